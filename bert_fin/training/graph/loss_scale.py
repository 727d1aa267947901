"""Dynamic loss scaling for fp16 training: the scale and its update rule, nothing else.

The loss is multiplied by `scale` before differentiation so small fp16 gradients do not flush
to zero; gradients are divided by it before clipping and the optimizer. Update rule (TF's
DynamicLossScale and NVIDIA's ExponentialUpdateLossScaleManager, as used for BERT):

  all gradients finite:  good_steps += 1; when good_steps reaches growth_interval (1000):
                         scale *= 2 (only if the doubled scale is still finite), good_steps = 0.
  any gradient inf/NaN:  the update is skipped by the caller; scale = max(scale / 2, 1),
                         good_steps = 0.

Both values are non-trainable global variables, so they are checkpointed with the model and a
restarted job resumes with the scale it had.
"""
import collections

import tensorflow.compat.v1 as tf

LossScaleState = collections.namedtuple("LossScaleState", ["scale", "good_steps"])


def create_loss_scale(init_loss_scale, scope="loss_scale"):
  """Creates the variables: scale (float32 scalar, starts at init_loss_scale), good_steps (int64)."""
  with tf.variable_scope(scope):
    scale = tf.get_variable(
        "scale", shape=[], dtype=tf.float32, trainable=False, use_resource=True,
        initializer=tf.constant_initializer(float(init_loss_scale)))
    good_steps = tf.get_variable(
        "good_steps", shape=[], dtype=tf.int64, trainable=False, use_resource=True,
        initializer=tf.zeros_initializer())
  return LossScaleState(scale, good_steps)


def next_loss_scale(scale, good_steps, all_finite, growth_interval):
  """Pure rule: (scale float32 [], good_steps int64 [], all_finite bool []) -> (scale, good_steps)."""
  grown_good_steps = good_steps + 1
  grow = tf.logical_and(all_finite, grown_good_steps >= growth_interval)
  doubled = scale * 2.0
  doubled = tf.where(tf.is_finite(doubled), doubled, scale)
  finite_scale = tf.where(grow, doubled, scale)
  halved = tf.maximum(scale / 2.0, 1.0)
  new_scale = tf.where(all_finite, finite_scale, halved)
  new_good_steps = tf.where(tf.logical_and(all_finite, tf.logical_not(grow)),
                            grown_good_steps, tf.zeros_like(good_steps))
  return new_scale, new_good_steps


def update_loss_scale(state, scale_value, all_finite, growth_interval):
  """Op assigning next_loss_scale(...) to the variables.

  scale_value: the scale read once for this step (the one the gradients were computed with);
  the caller orders this op after everything that used it.
  """
  good_steps = state.good_steps.read_value()
  new_scale, new_good_steps = next_loss_scale(scale_value, good_steps, all_finite, growth_interval)
  return tf.group(state.scale.assign(new_scale), state.good_steps.assign(new_good_steps),
                  name="update_loss_scale")
