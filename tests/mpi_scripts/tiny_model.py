"""A tiny deterministic model + harness for the training-step tests (single process and mpirun).

Model: ids int32 [batch, SEQ] -> embedding [VOCAB, DIM] (IndexedSlices gradient) -> mean over
the sequence -> dense DIM->HIDDEN tanh -> dense HIDDEN->1; loss = mean squared error against
targets float32 [batch]. Weights come from a fixed numpy seed, so every process and every graph
starts from the same values. `poison` (float32 []) adds poison * sum(output kernel) to the loss:
feeding inf forces an inf gradient without touching the data.
"""
import numpy as np
import tensorflow.compat.v1 as tf

from bert_fin.modeling import precision
from bert_fin.training.graph import step

VOCAB, DIM, HIDDEN, SEQ = 13, 4, 5, 3


def make_data(num_examples, seed=0, target_scale=1.0):
  """(ids int32 [n, SEQ], targets float32 [n]), deterministic."""
  rng = np.random.RandomState(seed)
  ids = rng.randint(0, VOCAB, size=(num_examples, SEQ)).astype(np.int32)
  targets = (target_scale * rng.randn(num_examples)).astype(np.float32)
  return ids, targets


def _initial_values():
  rng = np.random.RandomState(1234)
  return {
      "embeddings": rng.randn(VOCAB, DIM).astype(np.float32) * 0.5,
      "hidden/kernel": rng.randn(DIM, HIDDEN).astype(np.float32) * 0.5,
      "hidden/bias": np.zeros(HIDDEN, np.float32),
      "output/kernel": rng.randn(HIDDEN, 1).astype(np.float32) * 0.5,
  }


def build_loss(ids, targets, poison=None, compute_type=tf.float32):
  """Mean squared error of the tiny model, float32 []. compute_type float16: fp32 variables read
  through bert_fin.modeling.precision's custom getter, fp16 matmuls (the manual AMP path)."""
  init = _initial_values()
  with tf.variable_scope("tiny", custom_getter=precision.custom_getter(compute_type)):

    def var(name):
      return tf.get_variable(name, shape=init[name].shape, dtype=compute_type,
                             initializer=tf.constant_initializer(init[name]))

    embedded = tf.reduce_mean(tf.gather(var("embeddings"), ids), axis=1)
    hidden = tf.tanh(tf.matmul(embedded, var("hidden/kernel")) + var("hidden/bias"))
    output_kernel = var("output/kernel")
    prediction = tf.squeeze(tf.matmul(hidden, output_kernel), axis=1)
  loss = tf.reduce_mean(tf.square(tf.cast(prediction, tf.float32) - targets))
  if poison is not None:
    loss += poison * tf.reduce_sum(tf.cast(output_kernel, tf.float32))
  return loss


def session_config():
  return tf.ConfigProto(intra_op_parallelism_threads=1, inter_op_parallelism_threads=1)


def count_executed(run_metadata, op_type):
  """Number of nodes of `op_type` that executed in a traced session.run (FULL_TRACE)."""
  needle = "= %s(" % op_type
  return sum(needle in node.timeline_label
             for dev in run_metadata.step_stats.dev_stats for node in dev.node_stats)


def train(step_config, micro_batches, dist, make_optimizer=None, poison_at=(),
          compute_type=tf.float32, trace=False, config=None, trainable=None,
          make_regularizer=None):
  """Builds a fresh graph, runs one train op a micro-batch, returns a result dict.

  micro_batches: list of (ids, targets); poison_at: indices of micro-batches fed poison=inf.
  make_optimizer(global_step) -> optimizer (default plain SGD, learning rate 0.1).
  config: tf.ConfigProto for the session (default: 1 thread).
  trainable: names of the variables to train (default: every trainable variable).
  make_regularizer(tvars) -> step.build_train_op's regularizer (default none).
  Result: weights {name: array}, variables {name: array} (every global variable, after),
  history: per micro-step {loss_scale, all_finite, update_step, global_step, allreduces}.
  """
  make_optimizer = make_optimizer or (lambda _: tf.train.GradientDescentOptimizer(0.1))
  with tf.Graph().as_default():
    ids = tf.placeholder(tf.int32, [None, SEQ])
    targets = tf.placeholder(tf.float32, [None])
    poison = tf.placeholder_with_default(0.0, [])
    loss = build_loss(ids, targets, poison, compute_type)
    global_step = tf.train.get_or_create_global_step()
    tvars = None
    if trainable is not None:
      tvars = [v for v in tf.trainable_variables() if v.op.name in trainable]
    regularizer = make_regularizer(tf.trainable_variables()) if make_regularizer else None
    train_op, scalars = step.build_train_op(loss, make_optimizer(global_step), global_step, dist,
                                            step_config, tvars=tvars, regularizer=regularizer)
    history = []
    with tf.Session(config=config or session_config()) as sess:
      sess.run([tf.global_variables_initializer(), tf.local_variables_initializer()])
      for index, (batch_ids, batch_targets) in enumerate(micro_batches):
        feed = {ids: batch_ids, targets: batch_targets}
        if index in poison_at:
          feed[poison] = np.inf
        options = tf.RunOptions(trace_level=tf.RunOptions.FULL_TRACE) if trace else None
        metadata = tf.RunMetadata()
        _, values = sess.run([train_op, scalars], feed, options=options, run_metadata=metadata)
        values["global_step"] = int(sess.run(global_step))
        values["allreduces"] = count_executed(metadata, "HorovodAllreduce")
        history.append(values)
      weights = {v.op.name: value for v, value in zip(tf.trainable_variables(),
                                                      sess.run(tf.trainable_variables()))}
      variables = {v.op.name: value for v, value in zip(tf.global_variables(),
                                                        sess.run(tf.global_variables()))}
  return {"weights": weights, "variables": variables, "history": history}


def split(ids, targets, parts):
  """[(ids_i, targets_i)] for `parts` equal consecutive slices of a batch."""
  return list(zip(np.split(ids, parts), np.split(targets, parts)))
