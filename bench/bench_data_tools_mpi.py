"""create_pretraining_data on N MPI ranks vs one process on this host: wall time, and that the
files are the same bytes.

  python bench/bench_data_tools_mpi.py [--ranks 2] [--dupe 5] [--rounds 2] [--masking static]
                                       [--documents N] [--quick]

The news-like corpus and vocab of bench/bench_dynamic_masking.py (real Chinese sentences when
../shared/corpora is there beside the checkout), create_pretraining_data --do_whole_word_mask S=128 P=20, each
variant a fresh command, interleaved --rounds times (fastest kept):
  one process   --num_workers R (R = --ranks: the same cores)
  mpirun -np R  --num_workers 1 (bert_fin.launch.mpirun_command), parts beside the output,
                rank 0 shuffling and dealing them
Prints wall seconds, the ratio one process / mpirun, the seconds of rank 0's serial pass over the
parts (its log line), and whether every output file is byte-identical. The corpus is repeated
--scale times so that start-up does not dominate.
On one host this measures the cost of the multi-rank path (scanning, parts, the merge); the gain
is on several hosts, where the ranks add cores. No assertion: figures only.
"""
import argparse
import filecmp
import glob
import os
import re
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, REPO)
sys.path.insert(0, HERE)

import _quick  # noqa: E402
import bench_dynamic_masking  # noqa: E402  (write_corpus)

from bert_fin import launch  # noqa: E402


def parse_args(argv):
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--ranks", type=int, default=2)
  parser.add_argument("--dupe", type=int, default=5)
  parser.add_argument("--rounds", type=int, default=2)
  parser.add_argument("--masking", default="static")
  parser.add_argument("--scale", type=int, default=4, help="the corpus repeated this many times")
  parser.add_argument("--documents", type=int, default=None,
                      help="the corpus's first N documents (default: all), before --scale")
  parser.add_argument("--work_dir", default=None, help="keep corpus and outputs here")
  return _quick.parse_args(parser, argv, QUICK)


QUICK = {"dupe": 1, "rounds": 1, "scale": 1, "documents": 150}


def _command(args, corpus, vocab, prefix, workers):
  return [sys.executable, os.path.join(REPO, "create_pretraining_data.py"),
          "--input_file=" + corpus, "--output_file=" + prefix, "--vocab_file=" + vocab,
          "--do_whole_word_mask", "--max_seq_length=128", "--max_predictions_per_seq=20",
          "--dupe_factor=%d" % args.dupe, "--masking=" + args.masking, "--num_output_files=4",
          "--num_workers=%d" % workers, "--noprogress"]


def _timed(command):
  env = dict(os.environ, OMP_NUM_THREADS="1", TOKENIZERS_PARALLELISM="false")
  start = time.time()
  proc = subprocess.run(command, capture_output=True, text=True, env=env)
  if proc.returncode:
    raise RuntimeError("failed:\n%s" % proc.stderr[-3000:])
  return time.time() - start, proc.stderr


def merge_seconds(log):
  """Rank 0's serial pass over the parts, from its log line."""
  found = re.findall(r"rank 0: \d+ part\(s\) shuffled and dealt to \d+ file\(s\) in ([\d.]+) s",
                     log)
  return float(found[-1]) if found else None


def main(argv=None):
  args = parse_args(sys.argv[1:] if argv is None else argv)
  with tempfile.TemporaryDirectory(prefix="bench_mpi_") as tmp:
    work_dir = args.work_dir or tmp
    os.makedirs(work_dir, exist_ok=True)
    corpus, vocab = bench_dynamic_masking.write_corpus(work_dir)
    scaled = os.path.join(work_dir, "news-%s-x%d.jsonl" % (args.documents or "all", args.scale))
    if not os.path.exists(scaled):
      with open(corpus, encoding="utf-8") as f:
        lines = f.readlines()[:args.documents]
      with open(scaled, "w", encoding="utf-8") as f:
        for _ in range(args.scale):
          f.writelines(lines)
    corpus = scaled
    best = {}
    merge = None
    for _ in range(args.rounds):
      one = os.path.join(work_dir, "one", "train")
      seconds, _ = _timed(_command(args, corpus, vocab, one, args.ranks))
      best["one"] = min(best.get("one", seconds), seconds)
      ranks = os.path.join(work_dir, "ranks", "train")
      seconds, log = _timed(launch.mpirun_command(args.ranks, _command(args, corpus, vocab, ranks,
                                                                       1)))
      if seconds < best.get("ranks", float("inf")):
        best["ranks"], merge = seconds, merge_seconds(log)
    files = sorted(glob.glob(os.path.join(work_dir, "one", "train-*.tfrecord")))
    same = all(filecmp.cmp(f, os.path.join(work_dir, "ranks", os.path.basename(f)),
                           shallow=False) for f in files)
    documents = sum(1 for _ in open(corpus, encoding="utf-8"))
    print("%d documents, --dupe_factor %d, --masking %s, %d cores here, fastest of %d rounds"
          % (documents, args.dupe, args.masking, len(os.sched_getaffinity(0)), args.rounds))
    print("one process, --num_workers %d:  %6.1f s" % (args.ranks, best["one"]))
    print("mpirun -np %d, --num_workers 1: %6.1f s  (one process / mpirun = %.2f; rank 0's serial "
          "pass over the parts: %s s)" % (args.ranks, best["ranks"], best["one"] / best["ranks"],
                                           merge))
    size = sum(os.path.getsize(f) for f in files)
    print("output files byte-identical: %s; %.0f MB written%s" % (
        same, size / 1e6, ", rank 0's pass %.0f MB/s" % (size / 1e6 / merge) if merge else ""))
  return 0


if __name__ == "__main__":
  sys.exit(main())
