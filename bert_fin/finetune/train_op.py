"""The fine-tuning train op, shared by run_classifier, run_ner and run_squad: --optimizer with google's
warmup / linear decay schedule through training/graph/step.py (clip at 1.0, Horovod allreduce, loss
scaling with --amp), training/monitor/progress_guard.py on every rank, and on the chief
run_pretraining's step lines (hooks.ThroughputHook: step, loss, grad norm, learning rate,
examples/s, real tokens/s, elapsed, ETA) with their TensorBoard scalars; the recipes of
finetune/recipes.py (layer-wise learning-rate decay, re-initialised top layers) of the
TrainSetup. Also the two constants both heads share: the encoder's scope and the head dropout.

A program adopts the recipes by building its TrainSetup with `recipe=recipes.of_settings(...)`
(estimator_skeleton.train_setup does) and passing it, in TRAIN mode only, to init_from_checkpoint.
"""
import collections

import tensorflow.compat.v1 as tf

from bert_fin import modeling
from bert_fin import optimization
from bert_fin.finetune import recipes
from bert_fin.modeling import layers
from bert_fin.modeling.checkpoint import variable_name
from bert_fin.training.monitor import hooks
from bert_fin.training.monitor import progress_guard
from bert_fin.training.graph import step

ENCODER_SCOPE = "bert"  # BertModel's default scope
HEAD_DROPOUT = 0.1  # google: tf.nn.dropout(keep_prob=0.9) on what the head reads

TrainSetup = collections.namedtuple("TrainSetup", [
    "learning_rate", "num_train_steps", "num_warmup_steps", "step_config", "optimizer_type",
    "log_every_n_steps", "global_batch_size", "summary_dir", "recipe", "dropout_seed"],
                                   defaults=[recipes.GOOGLE, None])
TrainSetup.__doc__ = """optimizer_type: optimization.make_optimizer's ("adam", "adamw", "lamb");
global_batch_size: examples per update over all workers; summary_dir: where the chief's step
lines also go as TensorBoard scalars (None: nowhere); recipe: recipes.Recipe (default: google's
fine-tuning, neither recipe); dropout_seed: --seed for a head that draws stateless dropout
masks (training_dropout_seed; None: google's stateful dropout)."""


def training_dropout_seed(setup, rank):
  """None, or int64 [2]: the stateless dropout seed of this training step, a function of
  setup.dropout_seed, the worker's rank and the global step, so that a resumed run draws the
  masks the uninterrupted run drew (modeling.BertModel's dropout_seed)."""
  if setup is None or setup.dropout_seed is None:
    return None
  return tf.random.experimental.stateless_fold_in(
      tf.constant([setup.dropout_seed, rank], tf.int64), tf.train.get_or_create_global_step())


def head_dropout(tensor, dropout_seed, num_hidden_layers):
  """tensor (float [..., H], what a head reads) with HEAD_DROPOUT applied: google's stateful mask
  when dropout_seed is None, else a stateless one from dropout_seed (int64 [2],
  training_dropout_seed) folded in past the encoder's (embeddings 0, layer i: i + 1)."""
  return layers.dropout(tensor, HEAD_DROPOUT, None if dropout_seed is None else
                        tf.random.experimental.stateless_fold_in(dropout_seed,
                                                                 num_hidden_layers + 1))


def init_from_checkpoint(init_checkpoint, dist, setup=None):
  """Starts the trainable variables from init_checkpoint (google's names; none: initializers),
  on the chief only: Horovod broadcasts its weights to the other ranks. setup: the TrainSetup in
  TRAIN mode (None otherwise): the variables its --reinit_top_layers names are not restored and
  keep their initializers (recipes.py; a resumed run restores its own checkpoint instead)."""
  if not init_checkpoint or not dist.is_chief:
    return
  tvars = tf.trainable_variables()
  if setup is not None and setup.recipe.reinit_top_layers:
    fresh = set(recipes.reinitialised([variable_name(v) for v in tvars],
                                      setup.recipe.reinit_top_layers))
    tf.logging.info("--reinit_top_layers=%d: %d variables keep their initializer: %s",
                    setup.recipe.reinit_top_layers, len(fresh), ", ".join(sorted(fresh)))
    tvars = [v for v in tvars if variable_name(v) not in fresh]
  modeling.init_from_checkpoint(init_checkpoint, tvars, log=tf.logging.info)


def train_spec(mode, loss, dist, setup, input_len):
  """The TRAIN EstimatorSpec of a head's loss (float32 []): train_op_and_hooks' op and hooks."""
  op, training_hooks = train_op_and_hooks(loss, dist, setup, input_len)
  return tf.estimator.EstimatorSpec(mode=mode, loss=progress_guard.reported_loss(loss),
                                    train_op=op, training_hooks=training_hooks)


def train_op_and_hooks(loss, dist, setup, input_len):
  """(train op, training hooks): setup.optimizer_type with the warmup / linear decay schedule
  (each variable's rate scaled by setup.recipe's layer-wise decay) through step.build_train_op
  (clip, allreduce, loss scaling); on every rank training/monitor/progress_guard.py (a
  non-finite loss or a run of skipped updates: one line, exit 2; the spec's loss is its
  reported_loss); on the chief, the step lines of run_pretraining (hooks.ThroughputHook, at
  update 1 and every setup.log_every_n_steps).
  loss: float32 []; input_len: int32 [B], this worker's real tokens a row."""
  global_step = tf.train.get_or_create_global_step()
  learning_rate = optimization.learning_rate_schedule(
      setup.learning_rate, global_step, setup.num_train_steps, setup.num_warmup_steps)
  multipliers = recipes.learning_rate_multipliers(
      [variable_name(v) for v in tf.trainable_variables()], setup.recipe.layerwise_lr_decay)
  optimizer = optimization.make_optimizer(setup.optimizer_type, learning_rate, global_step,
                                          multipliers)
  op, scalars = step.build_train_op(loss, optimizer, global_step, dist, setup.step_config)
  guard = progress_guard.ProgressGuard(loss, scalars, progress_guard.flag_hints(
      setup.learning_rate), on_halt=progress_guard.exit_program)
  if not dist.is_chief:
    return op, [guard]
  tensors = {"loss": loss, "grad_norm": scalars["grad_norm"], "learning_rate": learning_rate,
             "loss_scale": scalars["loss_scale"] if setup.step_config.use_loss_scaling else None}
  real_tokens = tf.reduce_sum(tf.cast(input_len, tf.float32)) * float(dist.size)
  return op, [guard, hooks.ThroughputHook(
      every_n_steps=setup.log_every_n_steps, global_batch_size=setup.global_batch_size,
      tensors=tensors, real_tokens_tensor=real_tokens, num_train_steps=setup.num_train_steps,
      summary_dir=setup.summary_dir, examples_name=hooks.EXAMPLES)]
