"""Where the allreduce goes: per micro-batch vs once per update (allreduce_post_accumulation).

Run from the repo root: `python bench/bench_allreduce.py [--np 2] [--params 4000000] [--steps 4]`
(--quick: one dense layer, 1 update a variant, a smoke run of the same path).
It relaunches itself under mpirun (bert_fin.launch) and, on rank 0, prints for each variant the
mean wall time of one optimizer update (N micro-batches) and its ratio to the baseline measured
in the same run (per-micro-batch fp32 allreduce, NVIDIA's default). The model is a stack of
dense layers with about --params parameters, so the allreduce volume is realistic relative to
the compute of a tiny batch; on a CPU-only box the figures show the communication share only.
"""
import argparse
import json
import os
import subprocess
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)
import _quick  # noqa: E402  (bench/_quick.py)

QUICK = dict(params=200000, steps=2, updates=1, batch=2)


def parse_args(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--np", type=int, default=2, help="ranks to launch")
  parser.add_argument("--params", type=int, default=4000000, help="approximate model size")
  parser.add_argument("--steps", type=int, default=4, help="num_accumulation_steps")
  parser.add_argument("--updates", type=int, default=5, help="timed updates a variant")
  parser.add_argument("--batch", type=int, default=8, help="micro-batch size")
  return _quick.parse_args(parser, argv, QUICK)


def under_mpi():
  return "OMPI_COMM_WORLD_SIZE" in os.environ or "PMI_SIZE" in os.environ


def time_variant(dist, args, step_config):
  """Seconds an update (mean over args.updates, after one warm-up update)."""
  import numpy as np
  import tensorflow.compat.v1 as tf
  from bert_fin.training.graph import step
  width = 512
  depth = max(1, args.params // (width * width))
  with tf.Graph().as_default():
    inputs = tf.constant(np.random.RandomState(dist.rank).randn(args.batch, width), tf.float32)
    hidden = inputs
    for layer in range(depth):
      hidden = tf.layers.dense(hidden, width, activation=tf.tanh, name="dense_%d" % layer)
    loss = tf.reduce_mean(tf.square(hidden))
    global_step = tf.train.get_or_create_global_step()
    train_op, _ = step.build_train_op(loss, tf.train.GradientDescentOptimizer(1e-3), global_step,
                                      dist, step_config)
    config = tf.ConfigProto(intra_op_parallelism_threads=1, inter_op_parallelism_threads=1)
    with tf.Session(config=config) as sess:
      sess.run([tf.global_variables_initializer(), tf.local_variables_initializer()])
      for _ in range(step_config.num_accumulation_steps):
        sess.run(train_op)
      start = time.perf_counter()
      for _ in range(args.updates * step_config.num_accumulation_steps):
        sess.run(train_op)
      elapsed = (time.perf_counter() - start) / args.updates
      num_params = sum(int(np.prod(v.shape)) for v in tf.trainable_variables())
  return elapsed, num_params


def rank_main(args):
  import tensorflow.compat.v1 as tf
  from bert_fin.training import distributed
  from bert_fin.training.graph.step import StepConfig
  tf.disable_eager_execution()
  dist = distributed.init(True)
  variants = [
      ("per micro-batch, fp32 (baseline)", StepConfig(num_accumulation_steps=args.steps)),
      ("per micro-batch, fp16 compression",
       StepConfig(num_accumulation_steps=args.steps, fp16_allreduce=True)),
      ("post accumulation, fp32",
       StepConfig(num_accumulation_steps=args.steps, allreduce_post_accumulation=True)),
      ("post accumulation, fp16 compression",
       StepConfig(num_accumulation_steps=args.steps, allreduce_post_accumulation=True,
                  fp16_allreduce=True)),
  ]
  rows = []
  for name, config in variants:
    seconds, num_params = time_variant(dist, args, config)
    rows.append({"variant": name, "seconds_per_update": seconds, "params": num_params})
  if dist.is_chief:
    print("RESULT " + json.dumps(rows), flush=True)


def report(rows, args):
  baseline = rows[0]["seconds_per_update"]
  print("allreduce placement: %d ranks, %d params, N=%d micro-batches of %d, %d updates each"
        % (args.np, rows[0]["params"], args.steps, args.batch, args.updates))
  for row in rows:
    print("  %-38s %8.1f ms/update   x%.2f vs baseline" % (
        row["variant"], 1000 * row["seconds_per_update"], row["seconds_per_update"] / baseline))


def main(argv=None):
  args = parse_args(argv)
  if under_mpi():
    rank_main(args)
    return 0
  from bert_fin.launch import mpirun_command, python_command
  forwarded = ["--np", args.np, "--params", args.params, "--steps", args.steps,
               "--updates", args.updates, "--batch", args.batch]
  command = mpirun_command(args.np, python_command(os.path.abspath(__file__), *forwarded))
  env = dict(os.environ, OMP_NUM_THREADS="1", TF_CPP_MIN_LOG_LEVEL="3",
             PYTHONPATH=os.pathsep.join([REPO, os.environ.get("PYTHONPATH", "")]))
  proc = subprocess.run(command, capture_output=True, text=True, env=env)
  lines = [line for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
  if proc.returncode != 0 or not lines:
    print("benchmark failed (exit %d):\n%s\n%s" % (proc.returncode, proc.stdout[-2000:],
                                                    proc.stderr[-2000:]), file=sys.stderr)
    return 1
  report(json.loads(lines[0][len("RESULT "):]), args)
  return 0


if __name__ == "__main__":
  sys.exit(main())
