"""--quick, shared by every bench script: the same code path at tiny sizes, in seconds.

A bench script declares its quick sizes as a dict of argparse defaults and parses with
`parse_args(parser, argv, QUICK)`: with --quick those replace the defaults (a flag given on the
command line still wins), so quick mode changes sizes and inputs, never the logic.
tests/test_bench_quick.py runs every script in bench/ with --quick, so a broken bench fails CI.
(Not a bench script itself: the leading underscore keeps it out of that test and `make bench`.)
"""
import json
import os
import random

# The team's shared corpora: ../shared/corpora beside the checkout (each bench script that reads
# them through --corpus or --input takes another place there).
SHARED_CORPORA = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                               "shared", "corpora"))
SHARED_REVIEWS = os.path.join(SHARED_CORPORA, "reviews")

HELP = ("smoke run: tiny sizes, one repeat, synthetic inputs instead of the shared corpora "
        "(../shared beside the checkout); "
        "runs the whole path in seconds, its figures mean nothing")


def parse_args(parser, argv, quick_defaults):
  """parser.parse_args(argv) with a --quick flag added; with --quick, quick_defaults
  ({dest: value}) replace the parser's defaults before parsing again."""
  parser.add_argument("--quick", action="store_true", help=HELP)
  args = parser.parse_args(argv)
  if args.quick:
    options = {action.dest for action in parser._actions}  # pylint: disable=protected-access
    unknown = sorted(set(quick_defaults) - options)
    if unknown:
      raise ValueError("quick defaults name no option: %s" % unknown)
    parser.set_defaults(**quick_defaults)
    args = parser.parse_args(argv)
  return args


def skipped(what, why):
  """The one line a quick run prints for a part it cannot run here."""
  print("skipped %s: %s" % (what, why), flush=True)


def write_synthetic_lines(directory, num_lines, seed=0):
  """Writes directory/synthetic.txt: num_lines seeded lines of 1-6 Chinese-like sentences (3-40
  characters of a 600-character set, each ended by 。！ or ？), for benches whose default corpus
  is one of the shared corpora (SHARED_CORPORA). Returns directory."""
  rng = random.Random(seed)
  chars = [chr(code) for code in range(0x4E00, 0x4E00 + 600)]
  os.makedirs(directory, exist_ok=True)
  with open(os.path.join(directory, "synthetic.txt"), "w", encoding="utf-8") as f:
    for _ in range(num_lines):
      f.write("".join("".join(rng.choice(chars) for _ in range(rng.randint(3, 40)))
                      + rng.choice("。。。！？") for _ in range(rng.randint(1, 6))) + "\n")
  return directory


def task_head(task_dir, work_dir, counts):
  """Writes work_dir/task/SPLIT.jsonl, the first counts[SPLIT] lines of task_dir/SPLIT.jsonl (a
  run_classifier jsonl task such as samples/sentiment), for quick runs. Returns (the new task
  directory, [the "text" of every line copied, split after split])."""
  head_dir, texts = os.path.join(work_dir, "task"), []
  os.makedirs(head_dir)
  for split, count in counts.items():
    with open(os.path.join(task_dir, split + ".jsonl"), encoding="utf-8") as f:
      lines = [next(f) for _ in range(count)]
    with open(os.path.join(head_dir, split + ".jsonl"), "w", encoding="utf-8") as f:
      f.writelines(lines)
    texts.extend(json.loads(line)["text"] for line in lines)
  return head_dir, texts


def tiny_bert(work_dir, texts, seq_length, build_graph, vocab_size=400, **config_overrides):
  """A tiny BERT with random weights for quick runs: a WordPiece vocab trained on `texts`, a
  2-layer H=32 config (BertConfig fields in config_overrides replace those sizes) and a
  checkpoint of the variables `build_graph(config)` creates (seeded), all in work_dir. Returns
  (config_file, vocab_file, checkpoint_prefix)."""
  import collections  # pylint: disable=g-import-not-at-top
  import tensorflow.compat.v1 as tf  # pylint: disable=g-import-not-at-top
  from bert_fin import modeling  # pylint: disable=g-import-not-at-top
  from bert_fin.tokenization import vocab as vocab_lib  # pylint: disable=g-import-not-at-top
  char_counts = collections.Counter()
  sentences = vocab_lib.counting([text for text in texts if text], char_counts)
  tokens = vocab_lib.google_layout(vocab_lib.train_wordpiece(sentences, vocab_size), vocab_size,
                                   char_counts=char_counts)
  vocab_file = os.path.join(work_dir, "vocab.txt")
  vocab_lib.write_vocab(vocab_file, tokens)
  sizes = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
               max_position_embeddings=seq_length)
  sizes.update(config_overrides)
  config = modeling.BertConfig(len(tokens), **sizes)
  config_file = os.path.join(work_dir, "bert_config.json")
  with open(config_file, "w", encoding="utf-8") as f:
    f.write(config.to_json_string())
  checkpoint = os.path.join(work_dir, "ckpt", "model.ckpt")
  with tf.Graph().as_default():
    tf.set_random_seed(0)
    build_graph(config)
    with tf.Session() as session:
      session.run(tf.global_variables_initializer())
      tf.train.Saver().save(session, checkpoint)
  return config_file, vocab_file, checkpoint
