"""The fine-tuning train op, shared by run_classifier and run_ner: --optimizer with google's
warmup / linear decay schedule through training/graph/step.py (clip at 1.0, Horovod allreduce, loss
scaling with --amp), and on the chief run_pretraining's step lines (hooks.ThroughputHook: step,
loss, grad norm, learning rate, examples/s, real tokens/s, elapsed, ETA) with their TensorBoard
scalars. Also the two constants both heads share: the encoder's scope and the head dropout.
"""
import collections

import tensorflow.compat.v1 as tf

from bert_fin import modeling
from bert_fin import optimization
from bert_fin.training.monitor import hooks
from bert_fin.training.graph import step

ENCODER_SCOPE = "bert"  # BertModel's default scope
HEAD_DROPOUT = 0.1  # google: tf.nn.dropout(keep_prob=0.9) on what the head reads

TrainSetup = collections.namedtuple("TrainSetup", [
    "learning_rate", "num_train_steps", "num_warmup_steps", "step_config", "optimizer_type",
    "log_every_n_steps", "global_batch_size", "summary_dir"])
TrainSetup.__doc__ = """optimizer_type: optimization.make_optimizer's ("adam", "adamw", "lamb");
global_batch_size: examples per update over all workers; summary_dir: where the chief's step
lines also go as TensorBoard scalars (None: nowhere)."""


def init_from_checkpoint(init_checkpoint, dist):
  """Starts the trainable variables from init_checkpoint (google's names; none: initializers),
  on the chief only: Horovod broadcasts its weights to the other ranks."""
  if init_checkpoint and dist.is_chief:
    modeling.init_from_checkpoint(init_checkpoint, tf.trainable_variables(),
                                  log=tf.logging.info)


def train_spec(mode, loss, dist, setup, input_len):
  """The TRAIN EstimatorSpec of a head's loss (float32 []): train_op_and_hooks' op and hooks."""
  op, training_hooks = train_op_and_hooks(loss, dist, setup, input_len)
  return tf.estimator.EstimatorSpec(mode=mode, loss=loss, train_op=op,
                                    training_hooks=training_hooks)


def train_op_and_hooks(loss, dist, setup, input_len):
  """(train op, training hooks): setup.optimizer_type with the warmup / linear decay schedule
  through step.build_train_op (clip, allreduce, loss scaling); on the chief, the step lines of
  run_pretraining (hooks.ThroughputHook, at update 1 and every setup.log_every_n_steps).
  loss: float32 []; input_len: int32 [B], this worker's real tokens a row."""
  global_step = tf.train.get_or_create_global_step()
  learning_rate = optimization.learning_rate_schedule(
      setup.learning_rate, global_step, setup.num_train_steps, setup.num_warmup_steps)
  optimizer = optimization.make_optimizer(setup.optimizer_type, learning_rate, global_step)
  op, scalars = step.build_train_op(loss, optimizer, global_step, dist, setup.step_config)
  if not dist.is_chief:
    return op, []
  tensors = {"loss": loss, "grad_norm": scalars["grad_norm"], "learning_rate": learning_rate,
             "loss_scale": scalars["loss_scale"] if setup.step_config.use_loss_scaling else None}
  real_tokens = tf.reduce_sum(tf.cast(input_len, tf.float32)) * float(dist.size)
  return op, [hooks.ThroughputHook(
      every_n_steps=setup.log_every_n_steps, global_batch_size=setup.global_batch_size,
      tensors=tensors, real_tokens_tensor=real_tokens, num_train_steps=setup.num_train_steps,
      summary_dir=setup.summary_dir, examples_name=hooks.EXAMPLES)]
