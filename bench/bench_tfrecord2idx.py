"""tfrecord2idx throughput (MB/s): ours (verifying every CRC32C) vs DALI's own tool, same files.

  python bench/bench_tfrecord2idx.py [--num_files 4] [--mb_per_file 64] [--dali_tool PATH] [--quick]

Takes ~2 min on 2 shared cores with the defaults (--quick: one 1 MB file, one timing a case).

Writes synthetic BERT-sized records (seq 128, 20 predictions, via TensorFlow's writer) into a temp
directory, warms the page cache, then times, on the same files:
  ours, in process        bert_fin.records.tfrecord_index.write_index (verify), per file
  ours, in process, no CRC  scan only (what DALI's tool does), for the cost of verification
  ours, CLI per file      `python tools/tfrecord2idx.py FILE IDX`, a process per file (DALI's usage)
  ours, CLI directory     `python tools/tfrecord2idx.py DIR --jobs N --force`
  DALI, CLI per file      DALI's tfrecord2idx (found by --dali_tool / DALI_TFRECORD2IDX, proven by
                          its hash in the nvidia-dali wheel's RECORD; skipped if absent)
and prints MB/s of each and ratios against DALI's tool (or against ours, no CRC, without it).
"""
import argparse
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, REPO)
sys.path.insert(0, os.path.join(REPO, "tests"))
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import _quick  # noqa: E402  (bench/_quick.py)
import _records  # noqa: E402  (bench/_records.py)
from bert_fin.records import tfrecord_index  # noqa: E402

QUICK = dict(num_files=1, mb_per_file=1, repeats=1)


def synthetic_examples(count, seq_len=128, max_predictions=20, seed=0):
  """count serialized tf.train.Examples with the record spec of bert_fin (random values)."""
  import numpy as np
  import tensorflow as tf
  from bert_fin.records import schema
  rng = np.random.default_rng(seed)
  specs = schema.feature_specs(seq_len, max_predictions)
  out = []
  for _ in range(count):
    feature = {}
    for spec in specs:
      if spec.dtype == schema.FLOAT32:
        feature[spec.name] = tf.train.Feature(float_list=tf.train.FloatList(
            value=rng.random(spec.length).tolist()))
      else:
        feature[spec.name] = tf.train.Feature(int64_list=tf.train.Int64List(
            value=rng.integers(0, 21128, spec.length).tolist()))
    out.append(tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString())
  return out


def write_files(directory, num_files, mb_per_file):
  """num_files shards of about mb_per_file MB each (512 distinct records, repeated) -> paths."""
  examples = synthetic_examples(512)
  per_file = int(mb_per_file * 1e6 / (sum(len(e) + 16 for e in examples) / len(examples)))
  return _records.write_shards(directory, examples, num_files, per_file, stride=7)


def timed(function):
  start = time.perf_counter()
  function()
  return time.perf_counter() - start


def run(argv):
  subprocess.run(argv, check=True, capture_output=True,
                 env=dict(os.environ, CUDA_VISIBLE_DEVICES="", TF_CPP_MIN_LOG_LEVEL="3"))


def main():
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--num_files", type=int, default=4)
  parser.add_argument("--mb_per_file", type=float, default=64)
  parser.add_argument("--jobs", type=int, default=2)
  parser.add_argument("--dali_tool", default=None)
  parser.add_argument("--repeats", type=int, default=2, help="best of N timings")
  args = _quick.parse_args(parser, None, QUICK)
  if args.dali_tool:
    os.environ["DALI_TFRECORD2IDX"] = args.dali_tool
  from test_tfrecord_index import find_dali_tool  # the hash-proven lookup of the test
  dali_tool = find_dali_tool()
  shim = os.path.join(REPO, "tools", "tfrecord2idx.py")

  with tempfile.TemporaryDirectory(prefix="bench_tfrecord2idx_") as directory:
    paths = write_files(directory, args.num_files, args.mb_per_file)
    megabytes = sum(os.path.getsize(p) for p in paths) / 1e6
    records = sum(len(tfrecord_index.scan_index(p, verify=False)) for p in paths)  # warms cache
    print("%d files, %.1f MB, %d records (%.0f bytes each), best of %d"
          % (len(paths), megabytes, records, megabytes * 1e6 / records, args.repeats))
    idx = os.path.join(directory, "out.idx")
    cases = [
        ("ours, in process, verify", lambda: [tfrecord_index.write_index(p, idx) for p in paths]),
        ("ours, in process, no CRC", lambda: [tfrecord_index.scan_index(p, False) for p in paths]),
        ("ours, CLI per file", lambda: [run([sys.executable, shim, p, idx]) for p in paths]),
        ("ours, CLI dir --jobs %d" % args.jobs, lambda: run(
            [sys.executable, shim, directory, "--jobs", str(args.jobs), "--force",
             "--index_dir", os.path.join(directory, "idx")])),
    ]
    if dali_tool:
      cases.append(("DALI tfrecord2idx per file",
                    lambda: [run([sys.executable, dali_tool, p, idx]) for p in paths]))
    else:
      print("DALI's tfrecord2idx not found (set DALI_TFRECORD2IDX): ratios against ours, no CRC")
    rates = {}
    for name, function in cases:
      seconds = min(timed(function) for _ in range(args.repeats))
      rates[name] = megabytes / seconds
    baseline = "DALI tfrecord2idx per file" if dali_tool else "ours, in process, no CRC"
    for name, rate in rates.items():
      print("%-30s %9.1f MB/s  %6.2fx %s" % (name, rate, rate / rates[baseline], baseline))
    startup = {name: min(timed(lambda: run([sys.executable, "-c", code]))
                         for _ in range(args.repeats))
               for name, code in (("python + bert_fin.cli.tfrecord2idx",
                                   "import sys; sys.path.insert(0, %r); "
                                   "import bert_fin.cli.tfrecord2idx" % REPO),
                                  ("python + import tensorflow (DALI's tool)",
                                   "import tensorflow"))}
    for name, seconds in startup.items():
      print("process start-up, %-40s %.2f s" % (name, seconds))


if __name__ == "__main__":
  main()
