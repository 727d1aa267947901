"""Timing TensorFlow graph runs in the bench scripts: a session of a given thread count, and the
examples/s of a fetch run over and over after untimed warm-up runs.
(Not a bench script itself: the leading underscore keeps it out of tests/test_bench_quick.py and
`make bench`.)
"""
import time


def session_config(threads):
  """A tf.ConfigProto of `threads` intra-op and `threads` inter-op threads."""
  import tensorflow.compat.v1 as tf  # pylint: disable=g-import-not-at-top
  return tf.ConfigProto(intra_op_parallelism_threads=threads, inter_op_parallelism_threads=threads)


def examples_per_second(session, fetch, batch_size, runs, warmup):
  """examples/s of session.run(fetch), each run a batch of batch_size examples: `warmup` untimed
  runs, then the wall time of `runs` runs."""
  for _ in range(warmup):
    session.run(fetch)
  start = time.perf_counter()
  for _ in range(runs):
    session.run(fetch)
  return runs * batch_size / (time.perf_counter() - start)
