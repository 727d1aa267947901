"""A vocab from part of the corpus (build_vocab --sample F / --max_docs N) against the vocab of the
whole corpus: time, [UNK] rate on held-out text, and how many tokens the two share.

  python bench/bench_vocab_sample.py [--corpus DIR] [--shares 0.05,0.2] [--processes 2] [--quick]
The corpus: the texts of --corpus (one per line, e.g. the reviews of ../shared/corpora beside
the checkout, by default when present; else samples/corpus), cleaned by clean_corpus, every
--held_out-th document kept out as held-out text. Then, in this run: the full vocab
(build_vocab's counting + trainer), and for each share F a vocab from --sample F and one from
--max_docs (F x documents); for each, the seconds, its [UNK] rate on the held-out documents, the
share of the full vocab's learned tokens it holds and the [UNK] rate ratio to the full vocab's.
"""
import argparse
import json
import os
import shutil
import sys
import tempfile
import time

import _quick

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from bert_fin.text import clean  # pylint: disable=wrong-import-position
from bert_fin.tokenization import corpus_counts  # pylint: disable=wrong-import-position
from bert_fin.tokenization import vocab as vocab_lib  # pylint: disable=wrong-import-position
from bert_fin.tokenization import wordpiece_trainer  # pylint: disable=wrong-import-position

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
QUICK = dict(corpus="", shares="0.3", vocab_size=400, quick_lines=600)


def cleaned_corpus(args, work_dir):
  """(train JSONL path, held-out JSONL path, training documents)."""
  source, text_format = args.corpus, "line"
  if not source and args.quick_lines:
    source = _quick.write_synthetic_lines(os.path.join(work_dir, "synthetic"), args.quick_lines)
  elif not source:
    source = (_quick.SHARED_REVIEWS if os.path.isdir(_quick.SHARED_REVIEWS)
              else os.path.join(REPO, "samples", "corpus"))
    text_format = "line" if source == _quick.SHARED_REVIEWS else "blank_line"
  cleaned = os.path.join(work_dir, "clean.jsonl")
  clean.clean_corpus([source], cleaned, None, clean.CleanConfig(text_format=text_format,
                                                                 text_field="content"))
  train, held_out = os.path.join(work_dir, "train.jsonl"), os.path.join(work_dir, "held.jsonl")
  documents = 0
  with open(cleaned, encoding="utf-8") as f, open(train, "w", encoding="utf-8") as t, \
      open(held_out, "w", encoding="utf-8") as h:
    for i, line in enumerate(f):
      if i % args.held_out == args.held_out - 1:
        h.write(line)
      else:
        t.write(line)
        documents += 1
  print("corpus %s: %d training documents (%.1f MB), every %dth held out" % (
      source, documents, os.path.getsize(train) / 1e6, args.held_out))
  return train, held_out, documents


def build(args, train, work_dir, name, **subset):
  """(tokens, seconds, documents counted) of a vocab trained on `train` with the subset."""
  start = time.perf_counter()
  counts = corpus_counts.count_corpus([train], args.processes, **subset)
  learned = wordpiece_trainer.train(counts.words, args.vocab_size, vocab_lib.HEAD_TOKENS)
  tokens = vocab_lib.google_layout(learned, args.vocab_size, char_counts=counts.chars)
  seconds = time.perf_counter() - start
  vocab_lib.write_vocab(os.path.join(work_dir, name), tokens)
  return tokens, seconds, counts.documents


def unk_rate(work_dir, name, held_out):
  unk, total, _ = corpus_counts.unk_counts([held_out], os.path.join(work_dir, name), 1)
  return unk / total


def learned(tokens):
  return {token for token in tokens[len(vocab_lib.HEAD_TOKENS):]
          if not vocab_lib.is_unused(token)}


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--corpus", default="", help="a file or directory, one text a line")
  parser.add_argument("--shares", default="0.05,0.2")
  parser.add_argument("--held_out", type=int, default=10, help="every Nth document held out")
  parser.add_argument("--vocab_size", type=int, default=21128)
  parser.add_argument("--processes", type=int, default=2)
  parser.add_argument("--quick_lines", type=int, default=0, help=argparse.SUPPRESS)
  args = _quick.parse_args(parser, argv, QUICK)
  work_dir = tempfile.mkdtemp(prefix="bench_vocab_sample-")
  try:
    train, held_out, documents = cleaned_corpus(args, work_dir)
    full, full_seconds, _ = build(args, train, work_dir, "full.txt")
    full_rate, full_learned = unk_rate(work_dir, "full.txt", held_out), learned(full)
    print("%-22s %8s %9s %12s %13s %9s" % ("vocab", "docs", "seconds", "held-out UNK",
                                          "full tokens", "UNK ratio"))
    print("%-22s %8d %9.1f %12.6f %12.1f%% %8.2fx" % ("full corpus", documents, full_seconds,
                                                     full_rate, 100.0, 1.0))
    for share in [float(s) for s in args.shares.split(",")]:
      for name, subset in (("--sample %g" % share, dict(sample=share)),
                           ("--max_docs %d" % int(share * documents),
                            dict(max_docs=max(1, int(share * documents))))):
        tokens, seconds, used = build(args, train, work_dir, "part.txt", **subset)
        rate = unk_rate(work_dir, "part.txt", held_out)
        print("%-22s %8d %9.1f %12.6f %12.1f%% %8.2fx  (x%.1f faster)" % (
            name, used, seconds, rate, 100.0 * len(learned(tokens) & full_learned) /
            max(1, len(full_learned)), rate / full_rate if full_rate else float("nan"),
            full_seconds / seconds))
    print(json.dumps({"vocab_size": args.vocab_size, "full_tokens": len(full_learned)}))
  finally:
    shutil.rmtree(work_dir, ignore_errors=True)


if __name__ == "__main__":
  main()
