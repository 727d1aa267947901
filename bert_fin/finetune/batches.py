"""In-memory example arrays -> the Estimator's input_fn, and a worker's share of them (Horovod).

Shared by run_classifier (classify/features.py), run_ner (ner/features.py) and run_squad
(squad/features.py): arrays are {feature name: np.ndarray}, one row an example (a window for
run_ner and run_squad), every array with the same number of rows; integer arrays are fed as
int32, floating ones as float32 (run_distill's teacher logits).
"""
import numpy as np

LABEL_IDS = "label_ids"  # google's feature name


def num_rows(arrays):
  """The number of rows of `arrays` (every array has as many)."""
  return len(next(iter(arrays.values())))


def shard(arrays, num_workers, worker_index):
  """Rows worker_index, worker_index + num_workers, ... of every array (Horovod training)."""
  return {name: value[worker_index::num_workers] for name, value in arrays.items()}


def input_fn_builder(arrays, batch_size, is_training, seed=None, skip_rows=0):
  """Estimator input_fn over in-memory arrays (fed by a generator: no constants in the graph).

  Training: repeated, shuffled (seeded), full batches only; skip_rows: the rows of the stream an
  interrupted run already trained on (resume: global_step x batch_size), skipped so that the
  resumed run reads the batches the uninterrupted run read. Eval/predict: one pass in order, the
  last batch may be short.
  """
  import tensorflow.compat.v1 as tf  # pylint: disable=g-import-not-at-top
  names = sorted(arrays)
  num = num_rows(arrays)
  signature = {name: tf.TensorSpec(arrays[name].shape[1:], tf.float32 if np.issubdtype(
      arrays[name].dtype, np.floating) else tf.int32) for name in names}

  def generate():
    for row in range(num):
      yield {name: arrays[name][row] for name in names}

  def input_fn(params):  # pylint: disable=unused-argument
    dataset = tf.data.Dataset.from_generator(generate, output_signature=signature)
    if is_training:
      dataset = dataset.repeat().shuffle(buffer_size=min(num, 10000), seed=seed)
      if skip_rows:
        dataset = dataset.skip(skip_rows)
    return dataset.batch(batch_size, drop_remainder=is_training).prefetch(2)

  return input_fn
