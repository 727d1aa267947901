"""The data position: micro-batches consumed, saved in every checkpoint, and what hangs on it.

One int64 global variable, `data_position/micro_batches`, is incremented by the train op after
every micro-batch (so also after updates skipped by the loss scale and inside accumulation
windows, where global_step does not move). Every rank runs the same number of micro-batches, so
rank 0's checkpointed value is the whole run's position: each rank rebuilds its deterministic
stream (input/epochs.py) and skips position * batch_size records. Nothing else about the input is
saved (no shuffle buffer, no iterator state): 8 bytes a checkpoint.

Dropout masks are stateless functions of (seed, rank, position): a restarted process draws the
masks the uninterrupted one would have drawn (stateful random ops restart their counters).
"""
import os

import tensorflow.compat.v1 as tf

VARIABLE_NAME = "data_position/micro_batches"


def create_variable():
  """int64 [] global, non-trainable, checkpointed; 0 in a new run."""
  with tf.variable_scope("data_position", reuse=tf.AUTO_REUSE):
    return tf.get_variable("micro_batches", shape=[], dtype=tf.int64, trainable=False,
                           use_resource=True, initializer=tf.zeros_initializer())


def dropout_seed(seed, rank, position):
  """int64 [2]: the stateless dropout seed of this rank's micro-batch number `position`."""
  base = tf.random.experimental.stateless_fold_in(tf.constant([seed, 0], tf.int64), rank)
  return tf.random.experimental.stateless_fold_in(base, position)


def advance_after(train_op, variable):
  """train_op grouped with variable += 1 (after it): one micro-batch consumed."""
  with tf.control_dependencies([train_op]):
    advance = variable.assign_add(1, read_value=False)
  return tf.group(train_op, advance, name="train_op_and_position")


def checkpoint_position(checkpoint, num_accumulation_steps):
  """Micro-batches consumed at `checkpoint` (a path prefix), or None without a checkpoint.

  Checkpoints written before the position was saved hold only global_step: the position is then
  global_step * num_accumulation_steps (exact unless loss-scale overflows skipped updates), logged.
  """
  if not checkpoint:
    return None
  reader = tf.train.load_checkpoint(checkpoint)
  if reader.has_tensor(VARIABLE_NAME):
    return int(reader.get_tensor(VARIABLE_NAME))
  step = int(reader.get_tensor(tf.GraphKeys.GLOBAL_STEP))
  tf.logging.warning("%s has no %s (written by an older bert_fin): data position taken as "
                     "global_step %d x %d accumulation steps", checkpoint, VARIABLE_NAME, step,
                     num_accumulation_steps)
  return step * num_accumulation_steps


class StopAtPositionHook(tf.train.SessionRunHook):
  """Requests a stop once the data position reaches `stop` (a multiple of the accumulation
  steps, so no update window is cut). On the chief (`model_dir` given) it also saves a checkpoint
  at the end when the last one holds an older position: updates skipped on overflow leave
  global_step, the Estimator's save trigger, unchanged. Each session.run is one micro-batch, so
  the position is counted here, not fetched."""

  def __init__(self, stop, num_accumulation_steps, model_dir=None):
    self._stop, self._window, self._model_dir = stop, num_accumulation_steps, model_dir

  def begin(self):
    self._variable = create_variable()
    self._global_step = tf.train.get_global_step()

  def after_create_session(self, session, coord):
    self._position = int(session.run(self._variable))

  def after_run(self, run_context, run_values):
    self._position += 1
    if self._position >= self._stop:
      run_context.request_stop()

  def end(self, session):
    position, step = session.run([self._variable, self._global_step])
    if not self._model_dir or position % self._window:
      return
    latest = tf.train.latest_checkpoint(self._model_dir)
    savers = tf.get_collection(tf.GraphKeys.SAVERS)
    if savers and not (latest and checkpoint_position(latest, 1) == position):
      tf.logging.info("Saving the data position %d at step %d", position, step)
      savers[0].save(session, os.path.join(self._model_dir, "model.ckpt"), global_step=step)
