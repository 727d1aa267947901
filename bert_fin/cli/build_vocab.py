"""bert-fin-build-vocab / tools/build_vocab.py: google-compatible WordPiece vocab.txt from clean JSONL.

  python tools/build_vocab.py --vocab_size V --output vocab.txt INPUT.jsonl...
  python tools/build_vocab.py --base_vocab chinese_vocab.txt --output vocab.txt INPUT.jsonl...
The second form keeps the base vocab's ids and fills [unusedN] slots with frequent missing chars.
Counting runs on --processes (default: all cores; the same vocab for any count); --max_docs N
or --sample F train on a subset (docs/data.md: what that costs in [UNK] rate).
Inputs: clean_corpus JSONL (`sentences`, or --text_field) or google's text format (--input_format,
by extension by default, as create_pretraining_data). Prints the corpus [UNK] rate (before and
after when extending).
"""
import json
import os
import sys
import tempfile

from bert_fin import cli
from bert_fin import flag_table
from bert_fin import io_utils
from bert_fin.data.create import options as create_options
from bert_fin.tokenization import corpus_counts
from bert_fin.tokenization import vocab as vocab_lib
from bert_fin.tokenization import wordpiece_trainer
from bert_fin.text import raw_documents


def build_parser():
  parser = cli.ArgumentParser(description=__doc__)
  parser.add_argument("inputs", nargs="+", metavar="INPUT.jsonl",
                      help="clean JSON Lines documents (clean_corpus / shard_corpus output)")
  parser.add_argument("--output", required=True, help="vocab.txt to write")
  parser.add_argument("--vocab_size", type=int, default=21128,
                      help="target size, padded to a multiple of 8 (google Chinese: 21128)")
  parser.add_argument("--base_vocab", default=None, help="extend this vocab instead of training")
  flag_table.add_arguments(parser, create_options.Options, ("input_format",))
  parser.add_argument("--text_field", default="sentences",
                      help="JSONL field holding the text (a list of sentences or a string)")
  flag_table.add_arguments(parser, create_options.Options, ("do_lower_case",))
  parser.add_argument("--min_frequency", type=int, default=2,
                      help="WordPiece training: minimum count of a merged piece")
  parser.add_argument("--limit_alphabet", type=int, default=0, help="0: keep every character")
  parser.add_argument("--min_char_count", type=int, default=2,
                      help="extend: a missing char needs this many occurrences")
  parser.add_argument("--unk_max_docs", type=int, default=20000,
                      help="documents used to measure the [UNK] rate and missing chars (0: all)")
  parser.add_argument("--processes", type=int, default=0,
                      help="processes counting the corpus (0: all usable cores); the vocab is "
                           "the same for any count")
  parser.add_argument("--max_docs", type=int, default=0,
                      help="train on the first N documents only (0: all)")
  parser.add_argument("--sample", type=float, default=1.0,
                      help="train on this share of the documents, picked by a hash of each "
                           "document (1: all)")
  return parser


def _rate(tokens, args, inputs):
  """((rate, unk, total), documents without the text field, tokenizer) of `tokens` over the
  first --unk_max_docs documents, counted on --processes processes."""
  with tempfile.NamedTemporaryFile("w", suffix=".txt", encoding="utf-8", delete=False) as f:
    f.write("".join(token + "\n" for token in tokens))
  try:
    unk, total, skipped = corpus_counts.unk_counts(inputs, f.name, args.processes,
                                                   args.input_format, args.text_field,
                                                   args.do_lower_case, args.unk_max_docs)
    tokenizer = vocab_lib.GoogleTokenizer(tokens, args.do_lower_case, vocab_file=f.name)
    return ((unk / total if total else 0.0), unk, total), skipped, tokenizer
  finally:
    os.remove(f.name)


PROG = "build_vocab"


def main(argv=None):
  args = build_parser().parse_args(argv)
  try:
    return _build(args)
  except (OSError, ValueError) as error:
    return cli.fail(PROG, error)


def _check_flags(args):
  """ValueError (one line naming the flag and the fix) for a bad setting."""
  if not args.base_vocab and args.vocab_size <= len(vocab_lib.HEAD_TOKENS):
    raise ValueError("--vocab_size must exceed %d" % len(vocab_lib.HEAD_TOKENS))
  if args.processes < 0 or args.max_docs < 0:
    raise ValueError("--processes and --max_docs must be >= 0 (0: all cores, all documents)")
  if not 0.0 < args.sample <= 1.0:
    raise ValueError("--sample %s: give a share of the documents in (0, 1], e.g. 0.1"
                     % args.sample)
  if args.sample < 1.0 and args.max_docs:
    raise ValueError("--sample and --max_docs pick the documents two ways: give one of them")
  if args.base_vocab and (args.sample < 1.0 or args.max_docs):
    raise ValueError("--sample and --max_docs choose the documents a vocab is trained on; "
                     "--base_vocab trains none (it measures --unk_max_docs documents)")


def _build(args):
  _check_flags(args)
  io_utils.check_output_files([args.output], "--output")
  inputs = raw_documents.expand_inputs(args.inputs)
  vocab_lib.check_inputs(inputs, args.input_format, args.text_field)
  first = vocab_lib.iter_sentences(inputs, 1, args.input_format, args.text_field)
  if next(first, None) is None:
    raise ValueError("no text in %s (empty, or no line with a %r field)" % (
        " ".join(args.inputs), args.text_field))
  first.close()
  report = {}
  if args.base_vocab:
    try:
      base = vocab_lib.read_vocab(args.base_vocab)
    except UnicodeDecodeError:
      raise ValueError("--base_vocab %s is not UTF-8 text (one token a line)"
                       % args.base_vocab) from None
    (rate, unk, total), skipped, tokenizer = _rate(base, args, inputs)  # skipped: of this read
    report["unk_rate_before"] = rate
    counts = vocab_lib.missing_char_counts(tokenizer, vocab_lib.iter_sentences(
        inputs, args.unk_max_docs, args.input_format, args.text_field))
    tokens, added = vocab_lib.extend_vocab(base, counts, min_count=args.min_char_count)
    report["added"] = "".join(added)
    report["free_slots_left"] = len(vocab_lib.unused_slots(tokens))
  else:
    counts = corpus_counts.count_corpus(inputs, args.processes, args.input_format,
                                        args.text_field, args.do_lower_case, args.max_docs,
                                        args.sample)
    learned = wordpiece_trainer.train(counts.pop_words(), args.vocab_size,
                                      vocab_lib.HEAD_TOKENS, args.min_frequency,
                                      args.limit_alphabet)
    tokens = vocab_lib.google_layout(learned, args.vocab_size, char_counts=counts.chars)
    report["documents_trained_on"] = counts.documents
    skipped = counts.skipped  # of the training read
    del counts, learned  # the word counts grow with the corpus: not kept through the [UNK] pass
  (rate, unk, total), _, tokenizer = _rate(tokens, args, inputs)
  vocab_lib.write_vocab(args.output, tokens)
  if skipped:
    report["documents_without_text_field"] = skipped
    print("warning: %d JSONL line(s) without a %r field (or not JSON) skipped"
          % (skipped, args.text_field), file=sys.stderr)
  report.update({"unk_rate": rate, "unk_tokens": unk, "tokens": total, "vocab_size": len(tokens),
                 "tokenizer": tokenizer.backend})
  if "unk_rate_before" in report:
    print("[UNK] rate before: %.6f  after: %.6f  (%d chars added)" %
          (report["unk_rate_before"], rate, len(report["added"])))
  else:
    print("[UNK] rate: %.6f over %d tokens" % (rate, total))
  print(json.dumps(report, ensure_ascii=False))
  print("wrote %s (%d tokens)" % (args.output, len(tokens)))
  return 0


if __name__ == "__main__":
  sys.exit(main())
