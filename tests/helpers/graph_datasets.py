"""Reading tf.data datasets the way the Estimator does (tf.compat.v1 graph mode: an iterator's next
element run in a Session until the dataset ends), and comparing what was read, shared by the tests
of the record writers and of the tf.data / DALI readers."""
import numpy as np
import tensorflow.compat.v1 as tf

SESSION_CONFIG = dict(intra_op_parallelism_threads=1, inter_op_parallelism_threads=2)


def run_to_end(session, next_element, limit=None):
  """The values of session.run(next_element), in order, until the iterator is exhausted
  (tf.errors.OutOfRangeError), or the first `limit` of them."""
  values = []
  while limit is None or len(values) < limit:
    try:
      values.append(session.run(next_element))
    except tf.errors.OutOfRangeError:
      break
  return values


def run_batches(input_fn, max_batches=None):
  """Numpy feature batches of input_fn's dataset, read the Estimator way: in a tf.Graph through
  an initializable iterator; until the end, or the first max_batches."""
  with tf.Graph().as_default():
    iterator = tf.data.make_initializable_iterator(input_fn({}))
    next_batch = iterator.get_next()
    with tf.Session(config=tf.ConfigProto(**SESSION_CONFIG)) as session:
      session.run(iterator.initializer)
      return run_to_end(session, next_batch, max_batches)


def examples(batches):
  """Batches -> list of hashable examples (one tuple of all feature values each)."""
  out = []
  for batch in batches:
    names = sorted(batch)
    for row in range(len(batch[names[0]])):
      out.append(tuple((name, tuple(np.ravel(batch[name][row]).tolist())) for name in names))
  return out
