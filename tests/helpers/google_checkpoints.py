"""Checkpoints written by hand with google-research/bert's variable names (from a name -> shape
table, not by our model), as test_checkpoint, the fine-tuning and the transformers tests read."""
import numpy as np
import tensorflow.compat.v1 as tf

from helpers import modeling_toys as mt


def write_google_checkpoint(path, shapes, rng, training_state=True):
  """Saves variables named and shaped like google's (values N(0, 0.5) from rng), with google's
  AdamWeightDecayOptimizer slots (adam_m / adam_v) and a global step when training_state;
  returns {name: value}."""
  values = {}
  with tf.Graph().as_default():
    for name, shape in sorted(shapes.items()):
      values[name] = rng.normal(0.0, 0.5, shape).astype(np.float32)
      tf.get_variable(name, initializer=tf.constant(values[name]))
      if training_state:  # optimizer slots as google's AdamWeightDecayOptimizer names them
        tf.get_variable(name + "/adam_m", initializer=tf.zeros(shape))
        tf.get_variable(name + "/adam_v", initializer=tf.zeros(shape))
    if training_state:
      tf.train.get_or_create_global_step()
    with mt.session() as sess:
      sess.run(tf.global_variables_initializer())
      tf.train.Saver().save(sess, path)
  return values
