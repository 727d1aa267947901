"""Benchmark: create_pretraining_data faithful (google's algorithm, 1 process) vs fast mode (WWM).

Builds a Chinese corpus (google text format) and a char vocab from ../shared/corpora/reviews (beside the checkout; --corpus) if
present (else a synthetic corpus), then runs, each in its own process with the process tree's RSS
sampled every 50 ms:
  faithful  --faithful --do_whole_word_mask (google's ## WWM), pure-Python FullTokenizer
  fast      --do_whole_word_mask --segmenter rjieba --num_workers 2 (C kernel; on the large corpus
            also --kernel python, the pure-Python twin)
on a 10-document corpus (the fixed start-up cost of each mode), the corpus (--docs) and one --scale
times larger, and prints instances/s, the speed-up over faithful on the same corpus (with and
without the start-up cost) and peak RSS (fast at two corpus sizes: it must not grow with the
corpus). Each row is the fastest of --repeat runs.
Usage: python bench/bench_create_pretraining_data.py [--docs 2000] [--corpus DIR] [--quick]
(--quick: 20 synthetic documents, scale 2, dupe_factor 1, one run a row)
"""
import argparse
import collections
import json
import os
import random
import re
import subprocess
import sys
import tempfile
import time

import psutil

import _quick  # bench/_quick.py

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REVIEWS = _quick.SHARED_REVIEWS
QUICK = dict(corpus="", docs=20, dupe_factor=1, scale=2, repeat=1)
SENTENCE_END = re.compile(r"(?<=[。！？!?])")


def load_documents(num_docs, corpus_dir, seed=0):
  """Returns num_docs documents (lists of sentences) from corpus_dir's one-text-per-line files
  (a seeded synthetic corpus when there is none), cycling the source if it is smaller."""
  lines = []
  if corpus_dir and os.path.isdir(corpus_dir):
    for name in sorted(os.listdir(corpus_dir)):
      with open(os.path.join(corpus_dir, name), encoding="utf-8", errors="ignore") as f:
        lines.extend(line.strip() for line in f if line.strip())
  else:
    rng = random.Random(seed)
    chars = [chr(c) for c in range(0x4E00, 0x4E00 + 3000)]
    lines = ["。".join("".join(rng.choice(chars) for _ in range(rng.randint(5, 40)))
                      for _ in range(rng.randint(1, 8))) + "。" for _ in range(5000)]
  docs = []
  for i in range(num_docs):
    sentences = [s.strip() for s in SENTENCE_END.split(lines[i % len(lines)]) if s.strip()]
    docs.append(sentences)
  return docs


def write_corpus(docs, path):
  with open(path, "w", encoding="utf-8") as f:
    for doc in docs:
      f.write("\n".join(doc) + "\n\n")


def write_vocab(docs, path):
  counts = collections.Counter(ch for doc in docs for s in doc for ch in s.lower())
  tokens = ["[PAD]"] + ["[unused%d]" % i for i in range(1, 100)] + ["[UNK]", "[CLS]", "[SEP]",
                                                                     "[MASK]"]
  ascii_pieces = list("abcdefghijklmnopqrstuvwxyz0123456789")
  tokens += ascii_pieces + ["##" + c for c in ascii_pieces]
  tokens += [ch for ch, n in counts.most_common() if n >= 2 and not ch.isspace()
             and ch not in ascii_pieces]
  with open(path, "w", encoding="utf-8") as f:
    f.write("\n".join(dict.fromkeys(tokens)) + "\n")


RUNNER = """
import sys, json, resource
sys.path.insert(0, %r)
from bert_fin.data.create import fast
from bert_fin.data.create import options as options_lib
stats = fast.run(options_lib.make_options(**json.loads(sys.argv[1])))
cpu = sum(r.ru_utime + r.ru_stime for r in (resource.getrusage(resource.RUSAGE_SELF),
                                            resource.getrusage(resource.RUSAGE_CHILDREN)))
print(json.dumps({"instances": stats["instances"], "seconds": stats["seconds"], "cpu": cpu}))
"""


def run_measured(options):
  """Runs fast.run(options) in a fresh process; returns (result dict, wall s, peak tree RSS MB,
  peak tree PSS MB). PSS shares copy-on-write pages between the forked workers; RSS counts them
  once per process."""
  env = dict(os.environ, OMP_NUM_THREADS="1", TOKENIZERS_PARALLELISM="false")
  start = time.time()
  proc = subprocess.Popen([sys.executable, "-c", RUNNER % REPO, json.dumps(options)],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
  root = psutil.Process(proc.pid)
  peak_rss = peak_pss = 0
  while proc.poll() is None:
    try:
      infos = [p.memory_full_info() for p in [root] + root.children(recursive=True)]
      peak_rss = max(peak_rss, sum(i.rss for i in infos))
      peak_pss = max(peak_pss, sum(i.pss for i in infos))
    except psutil.Error:
      pass
    time.sleep(0.1)
  out, err = proc.communicate()
  if proc.returncode != 0:
    raise RuntimeError("run failed:\n%s" % err[-3000:])
  return (json.loads(out.strip().splitlines()[-1]), time.time() - start, peak_rss / 2 ** 20,
          peak_pss / 2 ** 20)


def best_of(repeat, options):
  """run_measured `repeat` times: the fastest wall time (a noisy machine only ever slows a run
  down), with the largest peak memory seen."""
  runs = [run_measured(options) for _ in range(repeat)]
  result, wall = min(((r[0], r[1]) for r in runs), key=lambda pair: pair[1])
  return result, wall, max(r[2] for r in runs), max(r[3] for r in runs)


def main():
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--docs", type=int, default=2000)
  parser.add_argument("--dupe_factor", type=int, default=10)
  parser.add_argument("--max_seq_length", type=int, default=128)
  parser.add_argument("--workers", type=int, default=2)
  parser.add_argument("--scale", type=int, default=8, help="the large corpus is scale x --docs")
  parser.add_argument("--repeat", type=int, default=2, help="runs per row; the fastest is shown")
  parser.add_argument("--corpus", default=REVIEWS,
                      help="one-text-per-line files (synthetic documents when absent or empty)")
  args = _quick.parse_args(parser, None, QUICK)
  work = tempfile.mkdtemp(prefix="bench_cpd_")
  tiny, small, large = (os.path.join(work, name + ".txt") for name in ("tiny", "small", "large"))
  docs_large = load_documents(args.scale * args.docs, args.corpus)
  write_corpus(docs_large[:10], tiny)
  write_corpus(docs_large[:args.docs], small)
  write_corpus(docs_large, large)
  vocab = os.path.join(work, "vocab.txt")
  write_vocab(docs_large, vocab)
  common = dict(vocab_file=vocab, dupe_factor=args.dupe_factor, max_seq_length=args.max_seq_length,
                max_predictions_per_seq=20, do_whole_word_mask=True, progress=False)
  fast = dict(num_workers=args.workers, segmenter="rjieba")
  faithful = dict(faithful=True)
  runs = [  # (name, corpus, docs, options); each row is compared with faithful on its corpus
      ("faithful 1 proc", tiny, 10, faithful),
      ("fast WWM %d workers" % args.workers, tiny, 10, fast),
      ("faithful 1 proc", small, args.docs, faithful),
      ("fast WWM %d workers" % args.workers, small, args.docs, fast),
      ("faithful 1 proc", large, args.scale * args.docs, faithful),
      ("fast, python kernel", large, args.scale * args.docs, dict(fast, kernel="python")),
      ("fast WWM %d workers" % args.workers, large, args.scale * args.docs, dict(fast, kernel="c")),
  ]
  print("corpus: %s docs (%s), dupe_factor %d, max_seq_length %d, cores %d, best of %d"
        % (args.docs, args.corpus if os.path.isdir(args.corpus) else "synthetic", args.dupe_factor,
           args.max_seq_length, os.cpu_count(), args.repeat))
  print("%-20s %6s %9s %7s %8s %9s %11s %9s %8s %10s %9s %7s %7s" % (
      "mode", "docs", "instances", "wall s", "inst/s", "speed-up", "w/o start", "speed-up",
      "cpu s", "inst/cpu-s", "cpu-ratio", "RSS MB", "PSS MB"))
  baselines, start_up = {}, {}
  for run_index, (name, corpus, num_docs, extra) in enumerate(runs):
    options = dict(common, input_file=corpus, output_file=os.path.join(work, "out_%d" % run_index),
                   num_output_files=2, **extra)
    result, wall, rss_mb, pss_mb = best_of(args.repeat, options)
    mode = "faithful" if extra.get("faithful") else "fast"
    if corpus == tiny:  # the fixed cost of the mode: interpreter, imports, dictionaries, vocab
      start_up[mode] = wall
    rate, cpu_rate = result["instances"] / wall, result["instances"] / result["cpu"]
    steady = result["instances"] / max(wall - start_up.get(mode, 0.0), 1e-3)
    baseline, baseline_cpu, baseline_steady = baselines.setdefault(corpus,
                                                                   (rate, cpu_rate, steady))
    print("%-20s %6d %9d %7.2f %8.0f %8.1fx %11.0f %8.1fx %8.1f %10.0f %8.1fx %7.0f %7.0f" % (
        name, num_docs, result["instances"], wall, rate, rate / baseline, steady,
        steady / baseline_steady, result["cpu"], cpu_rate, cpu_rate / baseline_cpu, rss_mb,
        pss_mb))
  print("wall s: process wall time incl. start-up (the machine's load: %s); w/o start: inst/s over"
        " wall minus the mode's wall on the 10-document corpus; cpu s: user+sys of the process"
        " tree; work dir %s" % (" ".join("%.1f" % x for x in os.getloadavg()), work))


if __name__ == "__main__":
  main()
