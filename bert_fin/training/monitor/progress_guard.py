"""Training that cannot progress stops in one line: a non-finite loss (divergence) or too many
consecutive skipped updates, in run_pretraining and the fine-tuning programs alike.

training/graph/step.py skips an update whose gradients hold an inf or NaN (the weights and
global_step stay). A skip now and then is what dynamic loss scaling does; every update skipped is
a run that reads its data epochs forever at the same step (an init penalty of NaNs, a weight that
is inf in float32). ProgressGuard, a SessionRunHook on every rank, fetches each session.run's loss
and the step's scalars and raises TrainingHalted:
  diverged   the loss of this rank's micro-batch is NaN or inf (e.g. --learning_rate=1e30: the
             first update throws the weights far out), naming the step and the learning rate
             (and --init_regularizer_weight, whose pull can throw them out too);
  stalled    MAX_SKIPPED_UPDATES consecutive updates skipped, naming the step and the likely
             cause: the init penalty's gradient (--init_regularizer_weight, --fisher_file) when
             it was the non-finite part, else the data gradients (--learning_rate, the data).
AMP's loss-scale search keeps its own allowance: a skipped update is counted only once the loss
scale it used is down to 1 (each overflow halves the scale, so the search itself never counts;
without --amp the scale is 1 and every skip counts).

The hook raises in after_run, so the Estimator saves nothing more: the checkpoints already written
stay as they were (skipped updates never touched the weights; a diverged update's weights are not
saved). The stall is the same on every rank (the flags are read after the allreduce);
TrainingHalted.every_rank says so, and the program prints it once.

The Estimator's own NanTensorHook raises a traceback on a NaN loss before the model's hooks run:
reported_loss(loss), the loss a model_fn hands the EstimatorSpec, carries a NaN as +inf (which
that hook lets through) so that this guard says it.
"""
import math
import os
import sys

import numpy as np
import tensorflow.compat.v1 as tf

from bert_fin import command_line

MAX_SKIPPED_UPDATES = 20  # consecutive, at loss scale 1


class TrainingHalted(ValueError):
  """Training cannot progress (one line). every_rank: every rank met the same (a stall)."""

  def __init__(self, message, every_rank):
    super().__init__(message)
    self.every_rank = every_rank


def reported_loss(loss):
  """float32 []: `loss` for the EstimatorSpec, NaN as +inf (module docstring)."""
  return tf.where(tf.math.is_nan(loss), tf.constant(np.inf, loss.dtype), loss,
                  name="reported_loss")


def flag_hints(learning_rate, init_regularizer=None):
  """{"diverged": ..., "data": ..., "penalty": ...}: what the divergence and stall messages name
  as likely causes. init_regularizer: the penalty.Spec of --init_regularizer, or None."""
  hints = {"data": "lower --learning_rate (%g) or check the records and --init_checkpoint"
                   % learning_rate}
  hints["diverged"] = hints["data"]
  if init_regularizer is not None:
    hints["diverged"] = ("lower --learning_rate (%g) or --init_regularizer_weight (%g), or check "
                         "the records and --init_checkpoint" % (learning_rate,
                                                                init_regularizer.weight))
    fisher = (", --fisher_file=%s" % init_regularizer.fisher_checkpoint
              if init_regularizer.fisher_checkpoint else "")
    hints["penalty"] = ("the init penalty's gradient is not finite: lower "
                        "--init_regularizer_weight (%g)%s" % (init_regularizer.weight, fisher))
  return hints


class SkipCount(object):
  """Pure: consecutive skipped updates at loss scale <= 1 (module docstring)."""

  def __init__(self):
    self.count = 0

  def observe(self, update_step, all_finite, loss_scale):
    """One session.run's flags; returns the count after it."""
    if update_step:
      if all_finite:
        self.count = 0
      elif loss_scale <= 1.0:
        self.count += 1
    return self.count


class ProgressGuard(tf.estimator.SessionRunHook):
  """Raises TrainingHalted on divergence or a stall (module docstring).

  loss: float []: this rank's micro-batch loss; scalars: step.build_train_op's dict (all_finite,
  update_step, loss_scale, and penalty_nonfinite with a regularizer); hints: flag_hints(...);
  max_skipped: the stall's length; on_halt: called with the TrainingHalted instead of raising it
  (a program without a handler around its Estimator: exit_program).
  """

  def __init__(self, loss, scalars, hints, max_skipped=MAX_SKIPPED_UPDATES, on_halt=None):
    self._fetches = {name: scalars[name] for name in
                     ("all_finite", "update_step", "loss_scale", "penalty_nonfinite")
                     if name in scalars}
    self._fetches["loss"] = loss
    self._hints, self._max_skipped, self._on_halt = hints, max_skipped, on_halt
    self._skips = SkipCount()

  def begin(self):
    self._fetches["global_step"] = tf.train.get_global_step()
    self._skips = SkipCount()

  def before_run(self, run_context):
    return tf.estimator.SessionRunArgs(self._fetches)

  def after_run(self, run_context, run_values):
    values = run_values.results
    error = halt_reason(values, self._skips, self._max_skipped, self._hints)
    if error is None:
      return
    if self._on_halt is None:
      raise error
    self._on_halt(error)


def halt_reason(values, skips, max_skipped, hints):
  """The TrainingHalted that one session.run's fetched `values` call for, or None (skips: the
  run's SkipCount, advanced here)."""
  step, loss = int(values["global_step"]), float(values["loss"])
  if not math.isfinite(loss):
    return TrainingHalted(
        "training diverged at step %d: the loss is %s; %s. The checkpoints saved so far are "
        "kept" % (step, loss, hints["diverged"]), every_rank=False)
  count = skips.observe(bool(values["update_step"]), bool(values["all_finite"]),
                        float(values["loss_scale"]))
  if count < max_skipped:
    return None
  penalty_broke = float(values.get("penalty_nonfinite", 0.0)) > 0
  return TrainingHalted(
      "%d consecutive updates skipped for non-finite gradients at step %d (no update since): "
      "%s. The checkpoints saved so far are kept" % (
          count, step, hints["penalty"] if penalty_broke else "the data gradients are not "
          "finite: " + hints["data"]), every_rank=True)


def exit_program(error):
  """on_halt of a program that has no handler around its training: `PROGRAM: error: ...` on
  stderr, exit status 2."""
  command_line.refuse(os.path.basename(sys.argv[0]), error)
