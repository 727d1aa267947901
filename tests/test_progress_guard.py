"""training/monitor/progress_guard.py: a run that cannot progress stops in one line. The tiny model
of the step tests trained under a MonitoredSession with the guard: a gradient NaN on every update
(an init penalty of NaNs, a weight that is inf in float32) stops after MAX_SKIPPED_UPDATES
skipped updates at the same step; AMP's loss-scale halvings are not counted; a non-finite loss
stops at once; a finite run is never stopped."""
import os

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import tensorflow.compat.v1 as tf  # noqa: E402

from bert_fin.training import distributed  # noqa: E402
from bert_fin.training.graph import step  # noqa: E402
from bert_fin.training.init_regularizer import penalty  # noqa: E402
from bert_fin.training.monitor import progress_guard  # noqa: E402

import tiny_model  # noqa: E402

pytestmark = pytest.mark.usefixtures("fresh_graph")

SPEC = penalty.Spec("ewc", 1e30, "base/model.ckpt", "fisher/fisher", ("tiny/hidden/bias",))
HINTS = progress_guard.flag_hints(1e-3)
PENALTY_HINTS = progress_guard.flag_hints(1e-3, SPEC)


class NanPenalty(object):
  """A regularizer whose gradient on tiny/hidden/bias is NaN (as F = NaN gives), value 0."""

  def gradients_and_value(self, tvars):
    grads = [v * np.nan if v.op.name == "tiny/hidden/bias" else None for v in tvars]
    return grads, tf.constant(0.0)


def _train(runs, step_config=step.StepConfig(), regularizer=None, targets_value=None):
  """Runs the tiny model's train op `runs` times under a MonitoredSession with the guard; returns
  (the TrainingHalted raised or None, session.runs done, global_step at the end)."""
  ids_value, targets_array = tiny_model.make_data(4)
  if targets_value is not None:
    targets_array = np.full_like(targets_array, targets_value)
  with tf.Graph().as_default():
    ids, targets = tf.constant(ids_value), tf.constant(targets_array)
    loss = tiny_model.build_loss(ids, targets)
    global_step = tf.train.get_or_create_global_step()
    train_op, scalars = step.build_train_op(
        loss, tf.train.GradientDescentOptimizer(0.1), global_step, distributed.init(False),
        step_config, regularizer=regularizer)
    guard = progress_guard.ProgressGuard(loss, scalars, PENALTY_HINTS if regularizer else HINTS)
    done, halted = 0, None
    with tf.train.SingularMonitoredSession(hooks=[guard], config=tiny_model.session_config()) as s:
      try:
        for _ in range(runs):
          s.run(train_op)
          done += 1
      except progress_guard.TrainingHalted as error:
        halted = error
      final_step = int(s.raw_session().run(global_step))
  return halted, done, final_step


def test_every_update_skipped_stops_after_the_allowance_naming_the_penalty_flags():
  halted, done, final_step = _train(60, regularizer=NanPenalty())
  limit = progress_guard.MAX_SKIPPED_UPDATES
  assert done == limit - 1 and final_step == 0  # the limit-th run raised; nothing trained
  assert halted.every_rank and "\n" not in str(halted)
  assert str(halted).startswith("%d consecutive updates skipped for non-finite gradients at "
                                "step 0 (no update since): the init penalty's gradient is not "
                                "finite: lower --init_regularizer_weight (1e+30), "
                                "--fisher_file=fisher/fisher." % limit)


def test_the_loss_scale_search_keeps_its_own_allowance():
  """With loss scaling from 2**5 the first 5 skipped updates halve the scale down to 1 and are not
  counted; the count starts at scale 1 (accumulation: counted once an update)."""
  config = step.StepConfig(use_loss_scaling=True, init_loss_scale=2.0 ** 5,
                           num_accumulation_steps=2)
  halted, done, _ = _train(200, config, regularizer=NanPenalty())
  assert halted is not None
  assert done == 2 * (5 + progress_guard.MAX_SKIPPED_UPDATES) - 1


def test_a_non_finite_loss_stops_at_once_naming_the_learning_rate():
  halted, done, final_step = _train(10, targets_value=np.nan)
  assert done == 0 and final_step == 0 and not halted.every_rank
  assert str(halted) == ("training diverged at step 0: the loss is nan; lower --learning_rate "
                         "(0.001) or check the records and --init_checkpoint. The checkpoints "
                         "saved so far are kept")


def test_a_divergence_with_an_init_penalty_names_its_weight_too():
  error = progress_guard.halt_reason({"global_step": 2, "loss": np.nan}, progress_guard.SkipCount(),
                                     progress_guard.MAX_SKIPPED_UPDATES, PENALTY_HINTS)
  assert str(error).startswith("training diverged at step 2: the loss is nan; lower "
                               "--learning_rate (0.001) or --init_regularizer_weight (1e+30), or "
                               "check the records and --init_checkpoint.")


def test_a_finite_run_is_never_stopped():
  halted, done, final_step = _train(30)
  assert halted is None and done == 30 and final_step == 30


def test_skips_are_counted_only_when_consecutive_on_update_steps_at_scale_one():
  count = progress_guard.SkipCount()
  assert count.observe(True, False, 1.0) == 1
  assert count.observe(False, False, 1.0) == 1  # a micro-step without an update
  assert count.observe(True, False, 4.0) == 1  # the loss-scale search: not counted
  assert count.observe(True, False, 1.0) == 2
  assert count.observe(True, True, 1.0) == 0  # an applied update ends the run of skips


def test_the_reported_loss_carries_nan_as_inf_and_anything_else_as_it_is():
  values = tf.constant([np.nan, np.inf, 2.5], tf.float32)
  with tf.Session() as sess:
    reported = sess.run([progress_guard.reported_loss(values[i]) for i in range(3)])
  assert reported == [np.inf, np.inf, 2.5]


def test_a_program_without_a_handler_exits_2_with_one_line(capsys, monkeypatch):
  monkeypatch.setattr("sys.argv", ["/somewhere/run_classifier.py", "--do_train"])
  with pytest.raises(SystemExit) as exited:
    progress_guard.exit_program(progress_guard.TrainingHalted("training diverged at step 3",
                                                              every_rank=False))
  assert exited.value.code == 2
  assert capsys.readouterr().err == "run_classifier.py: error: training diverged at step 3\n"
