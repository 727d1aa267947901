"""Cleaning throughput (MB of raw input per second) with 1 and 2 processes.

  python bench/bench_clean.py [--corpus DIR] [--text_format line] [--processes 1,2] [--quick]
Default corpus: the shared corpora, ../shared/corpora beside the checkout (reviews one per line + HTML) if present, else samples/corpus
copied 20 times (--quick: samples/corpus once). Prints MB/s per process count and the speed-up
over 1 process (the baseline, measured in the same run). Output/outputs go to a temp dir and are
checked to be identical.
"""
import argparse
import filecmp
import os
import shutil
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import _quick  # pylint: disable=wrong-import-position  (bench/_quick.py)
from _cpu_control import cpu_headroom  # pylint: disable=wrong-import-position
from bert_fin.text import clean  # pylint: disable=wrong-import-position
from bert_fin.text import raw_documents  # pylint: disable=wrong-import-position

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHARED = _quick.SHARED_CORPORA
QUICK = dict(corpus=os.path.join(REPO, "samples", "corpus"), control_loop=3 * 10**5)


def _default_corpus(workdir):
  if os.path.isdir(SHARED):
    return SHARED, "line"
  copies = os.path.join(workdir, "samples_x20")
  for i in range(20):
    shutil.copytree(os.path.join(REPO, "samples", "corpus"), os.path.join(copies, "c%02d" % i))
  return copies, "blank_line"


def main():
  parser = argparse.ArgumentParser(description=__doc__)
  parser.add_argument("--corpus", default=None)
  parser.add_argument("--text_format", default=None)
  parser.add_argument("--text_field", default="content")
  parser.add_argument("--processes", default="1,2")
  parser.add_argument("--control_loop", type=int, default=3 * 10**6,
                      help="iterations of each of the 4 tasks of the pure-CPU control")
  args = _quick.parse_args(parser, None, QUICK)
  workdir = tempfile.mkdtemp(prefix="bench_clean-")
  try:
    corpus, text_format = (_default_corpus(workdir) if not args.corpus
                           else (args.corpus, "blank_line"))
    text_format = args.text_format or text_format
    paths = raw_documents.expand_inputs([corpus])
    megabytes = sum(os.path.getsize(p) for p in paths) / 1e6
    config = clean.CleanConfig(text_format=text_format, text_field=args.text_field)
    print("corpus %s: %d files, %.2f MB, text_format=%s" % (corpus, len(paths), megabytes,
                                                          text_format))
    baseline, outputs = None, []
    for processes in [int(p) for p in args.processes.split(",")]:
      out = os.path.join(workdir, "out_%d.jsonl" % processes)
      start = time.perf_counter()
      stats = clean.clean_corpus([corpus], out, None, config, processes=processes)
      seconds = time.perf_counter() - start
      rate = megabytes / seconds
      baseline = baseline or rate
      outputs.append(out)
      print("processes=%d  %.2f s  %.2f MB/s  %.0f docs/s  speed-up x%.2f  (docs in %d, out %d)" %
            (processes, seconds, rate, stats["documents_in"] / seconds, rate / baseline,
             stats["documents_in"], stats["documents_out"]))
    same = all(filecmp.cmp(outputs[0], other, shallow=False) for other in outputs[1:])
    print("outputs identical across process counts: %s" % same)
    top = max(int(p) for p in args.processes.split(","))
    if top > 1:
      print("control: pure-CPU loop speed-up with %d processes on this machine now: x%.2f "
            "(load average %.1f)" % (top, cpu_headroom(top, n=args.control_loop),
                                       os.getloadavg()[0]))
  finally:
    shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
  main()
