"""Per-layer recomputation (tf.recompute_grad): same variables, same loss, same gradients."""

import numpy as np
import tensorflow.compat.v1 as tf

from helpers import modeling_toys as mt
from bert_fin import modeling
from bert_fin.training.graph import losses as losses_lib

TOL = 1e-6


def assert_close(got, want, name=""):
  """|got - want| <= 1e-6 relative to the tensor's scale (float32 sums in a different order
  differ by a few ulps; a different dropout mask or a missing term differs by O(1))."""
  scale = max(1.0, float(np.abs(want).max()))
  assert np.abs(got - want).max() <= TOL * scale, (name, np.abs(got - want).max(), scale)


def _softmax_ops(graph, prefix):
  return [op for op in graph.get_operations() if op.type == "Softmax" and op.name.startswith(prefix)]


def test_gradients_unchanged_with_recompute():
  rng = np.random.RandomState(8)
  config = mt.tiny_config()
  inputs = mt.example_inputs(rng, config)
  with tf.Graph().as_default() as graph:
    runs = {}
    for scope, recompute in (("plain", False), ("recompute", True)):
      with tf.variable_scope(scope):
        model = modeling.BertModel(config, False, tf.constant(inputs["input_ids"]),
                                   input_len=tf.constant(inputs["input_len"]),
                                   token_type_ids=tf.constant(inputs["token_type_ids"]),
                                   recompute=recompute)
        loss = losses_lib.pretraining_losses(config, model, mt.features_tensors(inputs))["total_loss"]
      tvars = tf.trainable_variables(scope + "/")
      runs[scope] = (loss, tvars, tf.gradients(loss, tvars))
    plain_names = [mt.variable_name(v)[len("plain/"):] for v in runs["plain"][1]]
    recompute_names = [mt.variable_name(v)[len("recompute/"):] for v in runs["recompute"][1]]
    assert plain_names == recompute_names
    assert all(g is not None for g in runs["recompute"][2])
    # The backward pass of the recomputed model runs every layer's forward again.
    assert len(_softmax_ops(graph, "plain/")) == config.num_hidden_layers
    assert len(_softmax_ops(graph, "")) - len(_softmax_ops(graph, "plain/")) == \
        2 * config.num_hidden_layers
    with mt.session() as sess:
      sess.run(tf.global_variables_initializer())
      values = mt.randomize_variables(sess, rng, scale=0.2, tvars=runs["plain"][1])
      mt.copy_values(sess, values, runs["recompute"][1], "plain/", "recompute/")
      (l1, g1), (l2, g2) = sess.run([(runs["plain"][0], runs["plain"][2]),
                                     (runs["recompute"][0], runs["recompute"][2])])
  assert_close(l2, l1)
  assert sum(np.abs(g).sum() for g in g1) > 1.0
  for name, a, b in zip(plain_names, g1, g2):
    assert_close(b, a, name)


def test_dropout_masks_identical_in_recomputation():
  """With dropout, the recomputed forward must draw the same masks as the first one: compare
  against the plain encoder using the same stateless seeds."""
  rng = np.random.RandomState(9)
  config = mt.tiny_config(hidden_dropout_prob=0.3, attention_probs_dropout_prob=0.3)
  batch, seq = 2, 8
  x_value = rng.normal(size=(batch, seq, config.hidden_size)).astype(np.float32)
  with tf.Graph().as_default():
    x = tf.constant(x_value)
    mask = modeling.attention_mask(tf.constant([8, 5]), seq)
    seeds = [tf.constant([11 + i, 3], tf.int32) for i in range(config.num_hidden_layers)]
    other_seeds = [tf.constant([41 + i, 7], tf.int32) for i in range(config.num_hidden_layers)]
    no_dropout = mt.tiny_config(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    runs = {}
    for scope, layer_config, recompute, layer_seeds in (
        ("plain", config, False, seeds), ("recompute", config, True, seeds),
        ("no_dropout", no_dropout, False, seeds), ("other_seeds", config, False, other_seeds)):
      with tf.variable_scope(scope):
        out = modeling.transformer_model(x, mask, layer_config, recompute,
                                         dropout_seeds=layer_seeds)[-1]
        loss = tf.reduce_sum(out * tf.sin(tf.range(config.hidden_size, dtype=tf.float32)))
      tvars = tf.trainable_variables(scope + "/")
      runs[scope] = (loss, tf.gradients(loss, [x] + tvars), tvars)
    with mt.session() as sess:
      sess.run(tf.global_variables_initializer())
      values = mt.randomize_variables(sess, rng, scale=0.2, tvars=runs["plain"][2])
      for scope in ("recompute", "no_dropout", "other_seeds"):
        mt.copy_values(sess, values, runs[scope][2], "plain/", scope + "/")
      (l1, g1), (l2, g2), (l0, _), (l3, _) = sess.run(
          [runs[scope][:2] for scope in ("plain", "recompute", "no_dropout", "other_seeds")])
  assert_close(l2, l1)
  for a, b in zip(g1, g2):
    assert_close(b, a)
  # dropout is really active (a no-op dropout would make these equal) and follows the seeds
  scale = max(1.0, abs(float(l0)))
  assert abs(l1 - l0) > 1e-2 * scale, (l1, l0)
  assert abs(l3 - l1) > 1e-2 * scale, (l3, l1)


def test_recompute_with_drawn_seeds_trains():
  """recompute + dropout without given seeds: the per-step seeds are drawn once and shared by the
  forward and the recomputation, so one step's gradient is consistent with its loss."""
  rng = np.random.RandomState(10)
  config = mt.tiny_config(hidden_dropout_prob=0.3, attention_probs_dropout_prob=0.3)
  inputs = mt.example_inputs(rng, config)
  with tf.Graph().as_default():
    model = modeling.BertModel(config, True, tf.constant(inputs["input_ids"]),
                               input_len=tf.constant(inputs["input_len"]), recompute=True)
    loss = losses_lib.pretraining_losses(config, model, mt.features_tensors(inputs))["total_loss"]
    tvars = tf.trainable_variables()
    grads = tf.gradients(loss, tvars)
    train_op = tf.train.GradientDescentOptimizer(0.5).apply_gradients(zip(grads, tvars))
    with mt.session() as sess:
      sess.run(tf.global_variables_initializer())
      first = [sess.run([loss, train_op])[0] for _ in range(15)]
  assert np.isfinite(first).all()
  assert np.mean(first[-3:]) < np.mean(first[:3])
