"""The one train-op builder of run_pretraining and the fine-tuning programs, and its TrainSetup.

`train_op_and_hooks(loss, dist, setup, input_len, ...)` builds, for every program:
  schedule     optimization/schedule.py: google's linear warm-up and decay to 0 at
               num_train_steps (behind run_pretraining's head warm-up when the step config has
               one), a tensor named "learning_rate";
  optimizer    optimization/optimizers.make_optimizer of setup.optimizer_type (a name of
               optimization/names.py), each variable's rate scaled by learning_rate_multipliers
               (fine-tuning's layer-wise decay; none for pretraining);
  step         step.build_train_op: gradient accumulation, loss scaling (--amp), the Horovod
               allreduce, the finite check, clip at 1.0, the update and global_step + 1, with
               --init_regularizer's penalty (init_regularizer/penalty.py) when the setup has one;
  every rank   monitor/progress_guard.py: a non-finite loss or a run of skipped updates stops
               training in one line (on_halt: the program's way; None raises TrainingHalted);
  the chief    the step lines (hooks.ThroughputHook: the program's tensors, grad norm,
               learning rate, loss scale, rates, MFU when the setup has the figures, ETA) with
               their TensorBoard scalars, and hooks.SummaryHook of the graph's summaries when
               the setup has a summary_dir and a save_summaries_steps.
"""
import collections

import tensorflow.compat.v1 as tf

from bert_fin.optimization import optimizers
from bert_fin.optimization import schedule
from bert_fin.training.graph import step
from bert_fin.training.init_regularizer import penalty as penalty_lib
from bert_fin.training.monitor import hooks
from bert_fin.training.monitor import progress_guard

TrainSetup = collections.namedtuple("TrainSetup", [
    "learning_rate",         # float, peak learning rate (already scaled by workers if asked)
    "num_train_steps",       # int, optimizer updates
    "num_warmup_steps",      # int
    "optimizer_type",        # a name of optimization/names.py (ACCEPTED)
    "step_config",           # step.StepConfig
    "log_every_n_steps",     # int: the chief's step lines
    "global_batch_size",     # int, rows per optimizer update over all workers
    "summary_dir",           # str or None: where the chief's hooks write TensorBoard scalars
    "save_summaries_steps",  # int or None: the graph's summaries (SummaryHook; None: not written)
    "flops_per_sequence",    # float or None, training FLOPs of one row (fwd + bwd), for MFU
    "peak_flops",            # float or None, peak FLOP/s of all devices together (None: no MFU)
    "init_regularizer",      # penalty.Spec of --init_regularizer, or None
    "examples_name",         # the step line's rate: hooks.SENTENCES or hooks.EXAMPLES
    "recipe",                # fine-tuning's recipes.Recipe (finetune/train_op.py), or None
    "dropout_seed",          # fine-tuning's --seed of stateless dropout, or None
], defaults=[None, None, None, None, None, hooks.SENTENCES, None, None])


def train_op_and_hooks(loss, dist, setup, input_len, logged=None, tvars=None, sequence_lens=None,
                       learning_rate_multipliers=None, on_halt=None):
  """(train op, training hooks) of one micro-batch (the module docstring's rules).

  Args:
    loss: float32 [], the micro-batch's mean loss (unscaled).
    dist: training/distributed.init(...) result.
    setup: TrainSetup.
    input_len: int32 [B], this worker's real tokens a row (the step line's real tokens/s).
    logged: {name: float32 [] or None}: the program's own tensors of the step line (losses,
      accuracy); grad_norm, learning_rate, loss_scale and init_penalty are added here.
    tvars: the variables to train (None: tf.trainable_variables()).
    sequence_lens: None, or int32 [B, P] of packed rows: sentences/s counts real sequences.
    learning_rate_multipliers: {variable name: factor} (optimizers.make_optimizer); None: none.
    on_halt: progress_guard.ProgressGuard's on_halt (None: raise TrainingHalted).

  Returns:
    (train op, [hook]): every rank's hooks (the penalty's broadcast, the progress guard), then
    on the chief the step lines and the summaries.

  Raises:
    ValueError: an unknown optimizer_type, or as step.build_train_op.
  """
  tvars = tf.trainable_variables() if tvars is None else tvars
  global_step = tf.train.get_or_create_global_step()
  learning_rate = tf.identity(schedule.head_warmup_schedule(
      setup.learning_rate, global_step, setup.num_train_steps, setup.num_warmup_steps,
      setup.step_config.head_warmup_steps), name="learning_rate")
  optimizer = optimizers.make_optimizer(setup.optimizer_type, learning_rate, global_step,
                                        learning_rate_multipliers)
  regularizer, rank_hooks = None, []
  if setup.init_regularizer is not None:
    regularizer = penalty_lib.InitPenalty(setup.init_regularizer, tvars, dist.is_chief)
    rank_hooks = [hook for hook in [regularizer.broadcast_hook(dist)] if hook is not None]
  train_op, scalars = step.build_train_op(loss, optimizer, global_step, dist, setup.step_config,
                                          tvars=tvars, regularizer=regularizer)
  rank_hooks.append(progress_guard.ProgressGuard(
      loss, scalars, progress_guard.flag_hints(setup.learning_rate, setup.init_regularizer),
      on_halt=on_halt))
  if not dist.is_chief:
    return train_op, rank_hooks
  tensors = dict(logged or {})
  tensors.update(grad_norm=scalars["grad_norm"], learning_rate=learning_rate,
                 loss_scale=scalars["loss_scale"] if setup.step_config.use_loss_scaling else None)
  if regularizer is not None:
    tensors["init_penalty"] = tf.identity(scalars["penalty"], name="init_penalty")
  chief_hooks = [_throughput_hook(setup, dist, tensors, input_len, sequence_lens)]
  if setup.summary_dir and setup.save_summaries_steps:
    chief_hooks.append(hooks.SummaryHook(setup.save_summaries_steps, setup.summary_dir))
  return train_op, rank_hooks + chief_hooks


def _throughput_hook(setup, dist, tensors, input_len, sequence_lens):
  """The chief's ThroughputHook: tensors, rows/s, real tokens/s, MFU, sec/step, elapsed, ETA."""
  # Real tokens of one session.run over all workers: this worker's micro-batch x workers (the
  # workers' batches are the same size; no collective, since only the chief runs this fetch).
  real_tokens = tf.reduce_sum(tf.cast(input_len, tf.float32)) * float(dist.size)
  sequences = None
  if sequence_lens is not None:  # packed rows: count the real sequences, not the rows
    sequences = tf.reduce_sum(tf.cast(sequence_lens > 0, tf.float32)) * float(dist.size)
  mfu = setup.peak_flops and setup.flops_per_sequence
  return hooks.ThroughputHook(
      every_n_steps=setup.log_every_n_steps,
      global_batch_size=setup.global_batch_size,
      tensors=tensors,
      real_tokens_tensor=real_tokens,
      sequences_tensor=sequences,
      flops_per_step=setup.flops_per_sequence * setup.global_batch_size if mfu else None,
      peak_flops=setup.peak_flops,
      num_train_steps=setup.num_train_steps,
      summary_dir=setup.summary_dir,
      examples_name=setup.examples_name)
