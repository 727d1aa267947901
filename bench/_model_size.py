"""The model-size flags of the bench scripts that time a BERT of a chosen size, and its config.

--hidden --layers --heads --intermediate --vocab, by default a small BERT (H=256 L=4 A=4 I=1024)
with Chinese BERT's 21128-token vocab; bert_config(args) is the modeling.BertConfig they describe
(google's other defaults, 2 token types as in the records). One place, so the benches that
compare against each other time the same model unless told otherwise.
(Not a bench script itself: the leading underscore keeps it out of tests/test_bench_quick.py and
`make bench`.)
"""


def add_flags(parser, heads=True):
  """Adds --hidden --layers [--heads] --intermediate --vocab to an argparse parser; heads=False
  for a bench whose figures do not depend on the number of attention heads."""
  parser.add_argument("--hidden", type=int, default=256)
  parser.add_argument("--layers", type=int, default=4)
  if heads:
    parser.add_argument("--heads", type=int, default=4)
  parser.add_argument("--intermediate", type=int, default=1024)
  parser.add_argument("--vocab", type=int, default=21128, help="21128: Chinese BERT's vocab")


def bert_config(args, max_position_embeddings=512, num_attention_heads=None):
  """modeling.BertConfig of the parsed size flags (num_attention_heads: instead of --heads)."""
  from bert_fin import modeling  # pylint: disable=g-import-not-at-top
  return modeling.BertConfig(args.vocab, args.hidden, args.layers,
                             num_attention_heads or args.heads, args.intermediate,
                             max_position_embeddings=max_position_embeddings, type_vocab_size=2)
