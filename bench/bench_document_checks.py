"""Benchmark: what the per-document checks of create_pretraining_data's reader cost (issue 24).

data/create/sentence_documents.iter_documents classifies every document (markup share, empty) in the parent
process, which feeds the fast mode's workers. This reads a google-format text corpus (the reviews
corpus of ../shared/corpora beside the checkout, or --corpus, if present, else synthetic text) with the checks and with
`is_markup` replaced by `lambda s: False`, in the same run, and prints documents/s and the ratio.
Usage: .venv/bin/python bench/bench_document_checks.py [--docs 200000] [--repeat 3]
"""
import argparse
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import _quick  # noqa: E402  (bench/_quick.py)
from bert_fin.data.create import sentence_documents  # noqa: E402

REVIEWS = _quick.SHARED_REVIEWS
QUICK = dict(docs=2000, repeat=1, corpus="")


def corpus_lines(limit, corpus_dir):
  lines = []
  if corpus_dir and os.path.isdir(corpus_dir):
    for name in sorted(os.listdir(corpus_dir)):
      with open(os.path.join(corpus_dir, name), encoding="utf-8", errors="ignore") as f:
        lines.extend(line.strip() for line in f if line.strip())
  if not lines:
    lines = ["招商银行公布第%d季度业绩，净利润同比增长，不良贷款率保持稳定。" % i for i in range(1000)]
  return [lines[i % len(lines)] for i in range(limit)]


def read_all(path):
  start = time.perf_counter()
  count = sum(1 for _ in sentence_documents.iter_documents([path], "text"))
  return count, time.perf_counter() - start


def main():
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--docs", type=int, default=200000)
  parser.add_argument("--repeat", type=int, default=3)
  parser.add_argument("--corpus", default=REVIEWS,
                      help="directory of one-text-per-line files (synthetic text if absent)")
  args = _quick.parse_args(parser, None, QUICK)
  lines = corpus_lines(args.docs * 3, args.corpus)
  with tempfile.TemporaryDirectory() as tmp:
    path = os.path.join(tmp, "corpus.txt")
    with open(path, "w", encoding="utf-8") as f:
      for i in range(0, len(lines), 3):
        f.write("\n".join(lines[i:i + 3]) + "\n\n")
    checked = sentence_documents.is_markup
    best = {}
    for _ in range(args.repeat):
      for name, check in (("without markup check", lambda s: False), ("with markup check", checked)):
        sentence_documents.is_markup = check
        count, seconds = read_all(path)
        best[name] = min(best.get(name, seconds), seconds)
    sentence_documents.is_markup = checked
  base = best["without markup check"]
  for name, seconds in best.items():
    print("%-22s %8.0f documents/s  (%.3f x the time without)" % (name, count / seconds,
                                                                  seconds / base))


if __name__ == "__main__":
  main()
