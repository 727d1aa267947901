"""Start-up and per-epoch-chunk overhead of run_pretraining, this checkout against a baseline one.

  python bench/bench_training_calls.py [--baseline_repo /tmp/redesign_base] [--rounds 2]
      [--steps 48] [--pipeline tfdata]

Runs the real command line (tiny model, one process, 1 TF thread) on two corpora with the same
number of updates and checkpoints (every 8 updates):
  long   2 files x 128 records: one epoch covers the whole run (no epoch boundary);
  short  2 files x 8 records, batch 4: an epoch is 4 updates, so the run crosses 11 boundaries.
Per run it records the seconds from the process start to the first step line (start-up: imports,
checks, graph build, session) and in all. Code that rebuilds the graph for each stretch of
recorded epochs pays that per stretch on the short corpus only; so
  chunk overhead = (short - long) / (stretches of the short run - 1)
where the number of stretches is counted from the log (the baseline's "training up to position N"
lines, this checkout's "training call N" lines). Rounds are interleaved (baseline, ours,
baseline, ...); the minimum over rounds is printed, with ours/baseline ratios from the same run.
Without --baseline_repo only this checkout is measured.
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(REPO, "tests", "fixtures", "training"))

import tiny_data  # noqa: E402
import _quick  # noqa: E402  (bench/_quick.py)

SEQ, P, BATCH, SAVE_STEPS = 32, 5, 4, 8
QUICK = dict(rounds=1, steps=8)  # 2 epochs of the short corpus: one boundary
STEP_LINE = re.compile(r"^step \d+: ")
STRETCH_LINE = re.compile(r"training up to position \d+|training call \d+")


def run_once(repo, config, input_glob, output_dir, steps, pipeline):
  """(seconds to the first step line, seconds in all, training stretches seen in the log)."""
  command = [sys.executable, os.path.join(repo, "run_pretraining.py"), "--do_train", "--seed=3",
             "--input_pipeline=%s" % pipeline, "--bert_config_file=%s" % config,
             "--input_file=%s" % input_glob, "--output_dir=%s" % output_dir,
             "--max_seq_length=%d" % SEQ, "--max_predictions_per_seq=%d" % P,
             "--train_batch_size=%d" % BATCH, "--learning_rate=1e-3", "--num_warmup_steps=0",
             "--num_train_steps=%d" % steps, "--save_checkpoints_steps=%d" % SAVE_STEPS,
             "--log_every_n_steps=1000", "--intra_op_parallelism_threads=1",
             "--inter_op_parallelism_threads=1"]
  env = dict(os.environ, OMP_NUM_THREADS="1", TF_CPP_MIN_LOG_LEVEL="3", PYTHONPATH=repo)
  started = time.time()
  proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                          env=env, cwd=repo)
  first = None
  for line in proc.stdout:
    if first is None and STEP_LINE.match(line):
      first = time.time() - started
  stderr = proc.stderr.read()
  if proc.wait() != 0:
    raise RuntimeError("%s failed:\n%s" % (repo, stderr[-3000:]))
  total = time.time() - started
  stretches = len(STRETCH_LINE.findall(stderr))
  return first, total, stretches


def main():
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--baseline_repo", default=None,
                      help="another checkout of bert_fin (e.g. `git archive c3337ee`)")
  parser.add_argument("--rounds", type=int, default=2)
  parser.add_argument("--steps", type=int, default=48)
  parser.add_argument("--pipeline", default="tfdata", choices=["tfdata", "dali"])
  args = _quick.parse_args(parser, None, QUICK)
  repos = ([("baseline", os.path.abspath(args.baseline_repo))] if args.baseline_repo else []) + [
      ("ours", REPO)]
  work = tempfile.mkdtemp(prefix="bench_training_calls_")
  config = tiny_data.write_config(os.path.join(work, "bert_config.json"))
  corpora = {}
  for name, per_file in (("long", 128), ("short", 8)):
    tiny_data.write_records(os.path.join(work, name), num_files=2, per_file=per_file,
                            seq_len=SEQ, max_predictions=P, seed=1)
    corpora[name] = os.path.join(work, name, "*.tfrecord")
  best = {}
  for round_number in range(args.rounds):
    for label, repo in repos:
      for corpus, pattern in corpora.items():
        out = os.path.join(work, "out-%s-%s-%d" % (label, corpus, round_number))
        first, total, stretches = run_once(repo, config, pattern, out, args.steps, args.pipeline)
        key = (label, corpus)
        previous = best.get(key)
        best[key] = (min(first, previous[0]) if previous else first,
                     min(total, previous[1]) if previous else total, stretches)
        print("round %d %-8s %-5s first step %.1f s, total %.1f s, %d stretch(es)"
              % (round_number, label, corpus, first, total, stretches), flush=True)
  print("\n%d updates, checkpoints every %d, %s, minimum of %d rounds:" % (
      args.steps, SAVE_STEPS, args.pipeline, args.rounds))
  overhead = {}
  for label, _ in repos:
    first_long, total_long, _ = best[(label, "long")]
    _, total_short, stretches = best[(label, "short")]
    overhead[label] = first_long
    extra = ("%.1f s per extra stretch" % ((total_short - total_long) / (stretches - 1))
             if stretches > 1 else "no extra stretch")
    print("  %-8s start-up %.1f s; long %.1f s, short %.1f s in %d stretch(es): %s"
          % (label, first_long, total_long, total_short, stretches, extra))
  if "baseline" in overhead:
    print("  ours / baseline: start-up %.2f, short-epoch run %.2f" % (
        overhead["ours"] / overhead["baseline"],
        best[("ours", "short")][1] / best[("baseline", "short")][1]))


if __name__ == "__main__":
  main()
