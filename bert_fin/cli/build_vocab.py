"""bert-fin-build-vocab / tools/build_vocab.py: google-compatible WordPiece vocab.txt from clean JSONL.

  python tools/build_vocab.py --vocab_size V --output vocab.txt INPUT.jsonl...
  python tools/build_vocab.py --base_vocab chinese_vocab.txt --output vocab.txt INPUT.jsonl...
The second form keeps the base vocab's ids and fills [unusedN] slots with frequent missing chars.
Prints the corpus [UNK] rate (before and after when extending).
"""
import argparse
import json
import os
import sys
import tempfile

from bert_fin import cli
from bert_fin.tokenization import vocab as vocab_lib
from bert_fin.text import documents


def build_parser():
  parser = argparse.ArgumentParser(description=__doc__,
                                   formatter_class=cli.HelpFormatter)
  parser.add_argument("inputs", nargs="+", metavar="INPUT.jsonl",
                      help="clean JSON Lines documents (clean_corpus / shard_corpus output)")
  parser.add_argument("--output", required=True, help="vocab.txt to write")
  parser.add_argument("--vocab_size", type=int, default=21128,
                      help="target size, padded to a multiple of 8 (google Chinese: 21128)")
  parser.add_argument("--base_vocab", default=None, help="extend this vocab instead of training")
  parser.add_argument("--do_lower_case", type=lambda s: s.lower() in ("1", "true", "yes"),
                      default=True, help="lower-case and strip accents (true/false)")
  parser.add_argument("--min_frequency", type=int, default=2,
                      help="WordPiece training: minimum count of a merged piece")
  parser.add_argument("--limit_alphabet", type=int, default=0, help="0: keep every character")
  parser.add_argument("--min_char_count", type=int, default=2,
                      help="extend: a missing char needs this many occurrences")
  parser.add_argument("--unk_max_docs", type=int, default=20000,
                      help="documents used to measure the [UNK] rate and missing chars (0: all)")
  return parser


def _rate(tokens, args, sentences):
  with tempfile.NamedTemporaryFile("w", suffix=".txt", encoding="utf-8", delete=False) as f:
    f.write("".join(token + "\n" for token in tokens))
  try:
    tokenizer = vocab_lib.GoogleTokenizer(tokens, args.do_lower_case, vocab_file=f.name)
    return vocab_lib.unk_rate(tokenizer, sentences), tokenizer
  finally:
    os.remove(f.name)


def main(argv=None):
  args = build_parser().parse_args(argv)
  try:
    inputs = documents.expand_inputs(args.inputs)
  except FileNotFoundError as error:
    print("error: %s" % error, file=sys.stderr)
    return 2
  sample = lambda: vocab_lib.iter_sentences(inputs, args.unk_max_docs)
  report = {}
  if args.base_vocab:
    base = vocab_lib.read_vocab(args.base_vocab)
    (rate, unk, total), tokenizer = _rate(base, args, sample())
    report["unk_rate_before"] = rate
    counts = vocab_lib.missing_char_counts(tokenizer, sample())
    tokens, added = vocab_lib.extend_vocab(base, counts, min_count=args.min_char_count)
    report["added"] = "".join(added)
    report["free_slots_left"] = sum(1 for t in tokens if vocab_lib._UNUSED_RE.match(t))  # pylint: disable=protected-access
  else:
    if args.vocab_size <= len(vocab_lib.HEAD_TOKENS):
      print("error: --vocab_size must exceed %d" % len(vocab_lib.HEAD_TOKENS), file=sys.stderr)
      return 2
    learned = vocab_lib.train_wordpiece(vocab_lib.iter_sentences(inputs), args.vocab_size,
                                        args.do_lower_case, args.min_frequency,
                                        args.limit_alphabet)
    tokens = vocab_lib.google_layout(learned, args.vocab_size)
  (rate, unk, total), tokenizer = _rate(tokens, args, sample())
  vocab_lib.write_vocab(args.output, tokens)
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
