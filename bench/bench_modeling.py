"""Training-step cost of BertModel variants: fp32 (the baseline, measured in the same run),
per-layer recomputation (recompute=True) and manual fp16 (compute_type=tf.float16), each with
dropout (is_training=True) and, suffixed "-nodrop", with dropout 0.

  python bench/bench_modeling.py [--hidden 256 --layers 4 --heads 4 --intermediate 1024]
      [--batch 16 --seq 256 --steps 3 --threads 2]
      [--modes fp32,recompute,fp32-nodrop,recompute-nodrop] (add fp16: slow on CPU)
      [--quick]  (H=32 L=2, batch 2 x seq 128, one timed step, modes fp32,recompute)
Each mode runs in its own process: builds model + MLM/NSP losses + gradients, runs one warm-up
step and `--steps` timed steps fetching the sum of all gradients. Prints ms/step (median) and the
peak bytes in use of TF's CPU allocator during one traced step (RunMetadata step stats), with
ratios to the first mode. On a CPU fp16 is emulated: its row shows the graph works, not GPU speed.
"""
import argparse
import json
import os
import resource
import subprocess
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)
import _model_size  # noqa: E402  (bench/_model_size.py)
import _quick  # noqa: E402  (bench/_quick.py)

QUICK = dict(hidden=32, layers=2, heads=2, intermediate=64, vocab=1000, batch=2, seq=128, preds=4,
             steps=1, modes="fp32,recompute")


def parse_args(argv):
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  _model_size.add_flags(parser)
  for name, default in (("batch", 16), ("seq", 256), ("preds", 20), ("steps", 3), ("threads", 2)):
    parser.add_argument("--" + name, type=int, default=default)
  parser.add_argument("--modes", default="fp32,recompute,fp32-nodrop,recompute-nodrop")
  parser.add_argument("--one_mode", default=None, help=argparse.SUPPRESS)
  return _quick.parse_args(parser, argv, QUICK)


def peak_allocator_mb(run_metadata):
  """Max bytes in use of the allocators over one traced step."""
  peak = 0
  for dev in run_metadata.step_stats.dev_stats:
    for node in dev.node_stats:
      for mem in node.memory:
        peak = max(peak, mem.allocator_bytes_in_use)
  return peak / 2.0**20


def run_one(args):
  """Builds and times one mode in this process; returns a dict of figures."""
  import numpy as np
  import tensorflow.compat.v1 as tf
  from bert_fin import modeling
  from bert_fin.records import schema
  from bert_fin.training.graph import losses as losses_lib
  tf.disable_eager_execution()
  rng = np.random.RandomState(0)
  config = _model_size.bert_config(args)
  b, s, p = args.batch, args.seq, args.preds
  mode = args.one_mode.replace("-nodrop", "")
  model = modeling.BertModel(
      config, not args.one_mode.endswith("-nodrop"),
      tf.constant(rng.randint(1, args.vocab, (b, s)), tf.int32),
      input_len=tf.constant(rng.randint(s // 2, s + 1, b), tf.int32),
      compute_type=tf.float16 if mode == "fp16" else tf.float32,
      recompute=mode == "recompute")
  features = {
      schema.MASKED_LM_POSITIONS: tf.constant(rng.randint(0, s // 2, (b, p)), tf.int32),
      schema.MASKED_LM_IDS: tf.constant(rng.randint(1, args.vocab, (b, p)), tf.int32),
      schema.MASKED_LM_WEIGHTS: tf.ones([b, p]),
      schema.NEXT_SENTENCE_LABELS: tf.zeros([b, 1], tf.int32)}
  loss = losses_lib.pretraining_losses(config, model, features)["total_loss"]
  grads = tf.gradients(loss, tf.trainable_variables())
  step = tf.add_n([tf.reduce_sum(g) for g in grads])
  session_config = tf.ConfigProto(intra_op_parallelism_threads=args.threads,
                                  inter_op_parallelism_threads=1)
  with tf.Session(config=session_config) as sess:
    sess.run(tf.global_variables_initializer())
    sess.run(step)
    run_metadata = tf.RunMetadata()
    sess.run(step, options=tf.RunOptions(trace_level=tf.RunOptions.FULL_TRACE),
             run_metadata=run_metadata)
    times = []
    for _ in range(args.steps):
      start = time.perf_counter()
      sess.run(step)
      times.append(time.perf_counter() - start)
  return {"mode": args.one_mode, "ms_per_step": 1000.0 * sorted(times)[len(times) // 2],
          "peak_mb": peak_allocator_mb(run_metadata),
          "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0}


def main(argv=None):
  args = parse_args(argv)
  if args.one_mode:
    print(json.dumps(run_one(args)))
    return 0
  passthrough = []
  for name, value in vars(args).items():
    if name not in ("modes", "one_mode", "quick"):
      passthrough += ["--" + name, str(value)]
  rows = []
  for mode in args.modes.split(","):
    out = subprocess.run([sys.executable, os.path.abspath(__file__), "--one_mode", mode]
                         + passthrough, capture_output=True, text=True, check=False)
    if out.returncode != 0:
      print("mode %s failed:\n%s" % (mode, out.stderr[-3000:]))
      return 1
    rows.append(json.loads(out.stdout.strip().splitlines()[-1]))
  base = rows[0]
  print("BertModel train step (fwd+bwd), H=%d L=%d A=%d I=%d, batch %d x seq %d, %d threads" % (
      args.hidden, args.layers, args.heads, args.intermediate, args.batch, args.seq, args.threads))
  print("%-17s %10s %7s %14s %7s %12s" % ("mode", "ms/step", "ratio", "peak alloc MB",
                                         "ratio", "peak RSS MB"))
  for row in rows:
    print("%-17s %10.1f %7.2f %14.0f %7.2f %12.0f" % (
        row["mode"], row["ms_per_step"], row["ms_per_step"] / base["ms_per_step"],
        row["peak_mb"], row["peak_mb"] / base["peak_mb"] if base["peak_mb"] else float("nan"),
        row["peak_rss_mb"]))
  return 0


if __name__ == "__main__":
  sys.exit(main())
