"""bert-fin-build-vocab / tools/build_vocab.py: google-compatible WordPiece vocab.txt from clean JSONL.

  python tools/build_vocab.py --vocab_size V --output vocab.txt INPUT.jsonl...
  python tools/build_vocab.py --base_vocab chinese_vocab.txt --output vocab.txt INPUT.jsonl...
The second form keeps the base vocab's ids and fills [unusedN] slots with frequent missing chars.
Inputs: clean_corpus JSONL (`sentences`, or --text_field) or google's text format (--input_format,
by extension by default, as create_pretraining_data). Prints the corpus [UNK] rate (before and
after when extending).
"""
import collections
import json
import os
import sys
import tempfile

from bert_fin import booleans
from bert_fin import cli
from bert_fin import io_utils
from bert_fin.tokenization import vocab as vocab_lib
from bert_fin.text import raw_documents


def build_parser():
  parser = cli.ArgumentParser(description=__doc__)
  parser.add_argument("inputs", nargs="+", metavar="INPUT.jsonl",
                      help="clean JSON Lines documents (clean_corpus / shard_corpus output)")
  parser.add_argument("--output", required=True, help="vocab.txt to write")
  parser.add_argument("--vocab_size", type=int, default=21128,
                      help="target size, padded to a multiple of 8 (google Chinese: 21128)")
  parser.add_argument("--base_vocab", default=None, help="extend this vocab instead of training")
  parser.add_argument("--input_format", choices=vocab_lib.INPUT_FORMATS, default="auto",
                      help="auto: *.jsonl/*.json are JSON Lines, anything else google's text "
                           "format (one sentence a line, blank line between documents)")
  parser.add_argument("--text_field", default="sentences",
                      help="JSONL field holding the text (a list of sentences or a string)")
  parser.add_argument("--do_lower_case", type=booleans.argparse_bool,
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


PROG = "build_vocab"


def main(argv=None):
  args = build_parser().parse_args(argv)
  try:
    return _build(args)
  except (OSError, ValueError) as error:
    return cli.fail(PROG, error)


def _build(args):
  if not args.base_vocab and args.vocab_size <= len(vocab_lib.HEAD_TOKENS):
    raise ValueError("--vocab_size must exceed %d" % len(vocab_lib.HEAD_TOKENS))
  io_utils.check_output_files([args.output], "--output")
  inputs = raw_documents.expand_inputs(args.inputs)
  vocab_lib.check_inputs(inputs, args.input_format, args.text_field)
  passes = []  # skipped-document counts of each read

  def read(max_docs=0):
    passes.append({})
    return vocab_lib.iter_sentences(inputs, max_docs, args.input_format, args.text_field,
                                    passes[-1])

  sample = lambda: read(args.unk_max_docs)
  first = read(1)
  if next(first, None) is None:
    raise ValueError("no text in %s (empty, or no line with a %r field)" % (
        " ".join(args.inputs), args.text_field))
  first.close()
  passes.clear()
  report = {}
  if args.base_vocab:
    try:
      base = vocab_lib.read_vocab(args.base_vocab)
    except UnicodeDecodeError:
      raise ValueError("--base_vocab %s is not UTF-8 text (one token a line)"
                       % args.base_vocab) from None
    (rate, unk, total), tokenizer = _rate(base, args, sample())
    report["unk_rate_before"] = rate
    counts = vocab_lib.missing_char_counts(tokenizer, sample())
    tokens, added = vocab_lib.extend_vocab(base, counts, min_count=args.min_char_count)
    report["added"] = "".join(added)
    report["free_slots_left"] = len(vocab_lib.unused_slots(tokens))
  else:
    char_counts = collections.Counter()
    learned = vocab_lib.train_wordpiece(vocab_lib.counting(read(), char_counts, args.do_lower_case),
                                        args.vocab_size, args.do_lower_case, args.min_frequency,
                                        args.limit_alphabet)
    tokens = vocab_lib.google_layout(learned, args.vocab_size, char_counts=char_counts)
  (rate, unk, total), tokenizer = _rate(tokens, args, sample())
  vocab_lib.write_vocab(args.output, tokens)
  skipped = passes[0]  # the training read (every document), or the first sample when extending
  if skipped:
    report["documents_without_text_field"] = skipped["documents"]
    print("warning: %d JSONL line(s) without a %r field (or not JSON) skipped"
          % (skipped["documents"], args.text_field), file=sys.stderr)
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
