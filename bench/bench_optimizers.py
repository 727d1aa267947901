"""Time of one optimizer update on BERT-shaped variables: google's Adam and LAMB vs TF's fused Adam.

  python bench/bench_optimizers.py [--hidden 256 --layers 4 --intermediate 1024 --vocab 21128]
      [--steps 20] [--threads 2] [--quick]  (quick: H=32 L=1 I=64 V=1000, 1 timed update)
Builds the variables of a BertModel of that size (embeddings, layers, pooler; no heads), random
gradients held in variables (no constant folding), and times session.run(update) (median, the
optimizers taking turns) for tf.train.AdamOptimizer (fused C++ kernel: the baseline, measured in
the same run), bert_fin AdamWeightDecayOptimizer and LAMBOptimizer. Prints ms/update and the
ratio to the baseline.
"""
import argparse
import os
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import numpy as np  # pylint: disable=wrong-import-position
import tensorflow.compat.v1 as tf  # pylint: disable=wrong-import-position

import _model_size  # pylint: disable=wrong-import-position  (bench/_model_size.py)
import _quick  # pylint: disable=wrong-import-position  (bench/_quick.py)
import _timing  # pylint: disable=wrong-import-position  (bench/_timing.py)
from bert_fin.optimization import optimizers  # pylint: disable=wrong-import-position
from bert_fin.training.graph import model_fn  # pylint: disable=wrong-import-position

tf.disable_eager_execution()
QUICK = dict(hidden=32, layers=1, intermediate=64, vocab=1000, steps=1)


def bert_variable_shapes(config):
  """{google variable name: shape} of BertModel's weights (embeddings, layers, pooler): those of
  run_pretraining's model (training.graph.model_fn.pretraining_variable_shapes) without the cls/
  heads."""
  return {name: shape for name, shape in model_fn.pretraining_variable_shapes(config).items()
          if name.startswith("bert/")}


def build_update(optimizer_name, shapes, threads):
  """(session, update op) of one optimizer on its own graph, variables initialised."""
  rng = np.random.RandomState(0)
  graph = tf.Graph()
  with graph.as_default():
    global_step = tf.train.get_or_create_global_step()
    params, grads = [], []
    for name, shape in sorted(shapes.items()):
      params.append(tf.get_variable(name, initializer=rng.randn(*shape).astype(np.float32) * 0.02))
      grads.append(tf.get_variable(name + "_grad", trainable=False,
                                   initializer=rng.randn(*shape).astype(np.float32) * 1e-3))
    if optimizer_name == "tf.train.AdamOptimizer":
      optimizer = tf.train.AdamOptimizer(1e-4, epsilon=1e-6)
    else:
      optimizer = optimizers.make_optimizer(optimizer_name, 1e-4, global_step)
    update = optimizer.apply_gradients(zip([g.read_value() for g in grads], params))
    init = tf.global_variables_initializer()
  sess = tf.Session(graph=graph, config=_timing.session_config(threads))
  sess.run(init)
  return sess, update


def time_updates(names, shapes, steps, threads):
  """{name: median seconds of one update}; the optimizers take turns (round robin) so a shared,
  fluctuating machine slows them alike. 3 untimed warm-up updates each."""
  built = {name: build_update(name, shapes, threads) for name in names}
  times = {name: [] for name in names}
  for i in range(steps + 3):
    for name, (sess, update) in built.items():
      start = time.perf_counter()
      sess.run(update)
      if i >= 3:
        times[name].append(time.perf_counter() - start)
  for sess, _ in built.values():
    sess.close()
  return {name: float(np.median(t)) for name, t in times.items()}


def main():
  parser = argparse.ArgumentParser(description=__doc__)
  _model_size.add_flags(parser, heads=False)
  parser.add_argument("--steps", type=int, default=20)
  parser.add_argument("--threads", type=int, default=2)
  args = _quick.parse_args(parser, None, QUICK)
  # One attention head: no variable's shape depends on the number of heads.
  shapes = bert_variable_shapes(_model_size.bert_config(args, num_attention_heads=1))
  num_params = sum(int(np.prod(s)) for s in shapes.values())
  print("BERT H=%d L=%d I=%d V=%d: %d variables, %.2fM parameters, %d threads"
        % (args.hidden, args.layers, args.intermediate, args.vocab, len(shapes), num_params / 1e6,
           args.threads))
  names = ("tf.train.AdamOptimizer", "adam", "lamb")
  medians = time_updates(names, shapes, args.steps, args.threads)
  baseline = medians[names[0]]
  for name in names:
    seconds = medians[name]
    print("%-24s %8.2f ms/update  %5.2fx baseline  %6.1f M params/s"
          % (name, seconds * 1e3, seconds / baseline, num_params / seconds / 1e6))


if __name__ == "__main__":
  main()
