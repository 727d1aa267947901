"""ThroughputHook and SummaryHook in a MonitoredSession with a fake clock: the cadence (1, N, 2N,
...), rates, MFU, accumulation, event files."""
import glob
import os
import re

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import pytest
import tensorflow.compat.v1 as tf

from bert_fin.training.monitor import hooks


# Graph mode per test (tests/conftest.py), eager stays on for the rest of the suite.
pytestmark = pytest.mark.usefixtures("fresh_graph")

SESSION_CONFIG = tf.ConfigProto(intra_op_parallelism_threads=1, inter_op_parallelism_threads=1)


def _parse(line):
  """'step 3: loss = 1.5, eta = 0:00:04' -> {'step': 3.0, 'loss': 1.5, 'eta': '0:00:04'}."""
  step, rest = re.match(r"step (\d+): (.*)$", line).groups()
  fields = dict(pair.split(" = ") for pair in rest.split(", "))
  parsed = {name: value if ":" in value else float(value) for name, value in fields.items()}
  return dict(parsed, step=float(step))


def _tiny_training_graph(accumulation_steps=1):
  """A counter 'trained' each run; global_step += 1 every accumulation_steps runs."""
  global_step = tf.train.get_or_create_global_step()
  runs = tf.Variable(0, dtype=tf.int64, trainable=False, name="runs")
  loss = 10.0 / tf.cast(runs + 1, tf.float32)
  with tf.control_dependencies([loss]):
    next_runs = runs.assign_add(1)
  update = tf.equal(next_runs % accumulation_steps, 0)
  train_op = tf.cond(update, lambda: global_step.assign_add(1), lambda: global_step.read_value())
  return loss, train_op


def _run(hook, train_op, times):
  now = [0.0]
  hook._clock = lambda: now[0]
  with tf.train.MonitoredSession(
      session_creator=tf.train.ChiefSessionCreator(config=SESSION_CONFIG), hooks=[hook]) as sess:
    for t in times:
      now[0] = t
      sess.run(train_op)


def test_logs_rates_mfu_and_eta_from_the_fake_clock(tmp_path):
  lines = []
  with tf.Graph().as_default():
    loss, train_op = _tiny_training_graph()
    hook = hooks.ThroughputHook(
        every_n_steps=2, global_batch_size=8,
        tensors={"loss": loss, "learning_rate": tf.constant(1e-4), "loss_scale": None},
        real_tokens_tensor=tf.constant(13), flops_per_step=1000.0, peak_flops=4000.0,
        num_train_steps=7, log=lines.append, summary_dir=str(tmp_path))
    # begin() at t=0. Run 1 (step 1, t=10) logs without rates and opens the window; then the
    # multiples of 2: step 2 (1 update in 1 s), step 4 (2 updates in 2 s), step 6 (2 in 4 s).
    _run(hook, train_op, times=[10.0, 11.0, 12.0, 13.0, 15.0, 17.0])
  records = [_parse(line) for line in lines]
  assert [r["step"] for r in records] == [1, 2, 4, 6]
  first, second, third, fourth = records
  assert "sentences/s" not in first and "eta" not in first
  assert first["loss"] == pytest.approx(10.0, rel=1e-5)  # the value of the log step's own run
  assert first["elapsed"] == "0:00:10"
  assert second["sentences/s"] == pytest.approx(1 * 8 / 1.0)
  assert third["sentences/s"] == pytest.approx(2 * 8 / 2.0)
  assert third["real_tokens/s"] == pytest.approx(2 * 13 / 2.0)  # runs 3 and 4
  assert third["mfu"] == pytest.approx(2 * 1000.0 / 2.0 / 4000.0)
  assert third["sec/step"] == pytest.approx(1.0)
  assert (third["elapsed"], third["eta"]) == ("0:00:13", "0:00:03")  # (7 - 4) x 1 s
  assert third["loss"] == pytest.approx(10.0 / 4, rel=1e-5)
  assert fourth["sentences/s"] == pytest.approx(2 * 8 / 4.0)
  assert fourth["eta"] == "0:00:02"  # (7 - 6) x 2 s
  assert second["learning_rate"] == pytest.approx(1e-4)
  assert "loss_scale" not in first
  assert lines[1].startswith("step 2: loss = ")


@pytest.mark.parametrize("every_n,first_step,expected", [
    (10, 0, [1, 10, 20, 30]),  # a fresh run: the first step, then the multiples
    (10, 13, [14, 20, 30]),  # a resumed run
    (1, 0, list(range(1, 36))),
])
def test_cadence_is_the_first_step_then_every_multiple_of_n(every_n, first_step, expected):
  cadence, logged, step = hooks.Cadence(every_n), [], first_step
  for _ in range(35 - first_step):
    wanted = cadence.wanted()
    stale, step = step, step + 1
    if not wanted:
      cadence.skipped(stale)
      continue
    if cadence.due(step):
      logged.append(step)
    cadence.done(step)
  assert logged == expected


def test_format_duration():
  assert hooks.format_duration(0) == "0:00:00"
  assert hooks.format_duration(3725.4) == "1:02:05"
  assert hooks.format_duration(52 * 3600 + 61) == "52:01:01"
  assert hooks.format_duration(-5) == "0:00:00"


def test_rates_count_updates_not_runs_with_gradient_accumulation():
  lines = []
  with tf.Graph().as_default():
    loss, train_op = _tiny_training_graph(accumulation_steps=2)
    hook = hooks.ThroughputHook(every_n_steps=1, global_batch_size=8, tensors={"loss": loss},
                                real_tokens_tensor=tf.constant(5), log=lines.append)
    # Updates land on runs 2, 4, 6; run 1 (step 0, t = 0) opens the window; the micro-batch
    # runs 3 and 5 reach no new step: no line of their own.
    _run(hook, train_op, times=[0.0, 1.0, 2.0, 3.0, 4.0, 5.0])
  records = [_parse(line) for line in lines]
  assert [r["step"] for r in records] == [0, 1, 2, 3]
  assert records[1]["sentences/s"] == pytest.approx(1 * 8 / 1.0)  # 1 update in 1 s
  assert records[2]["sentences/s"] == pytest.approx(1 * 8 / 2.0)  # 1 update in 2 runs, 2 s
  assert records[2]["real_tokens/s"] == pytest.approx(2 * 5 / 2.0)  # tokens of both runs
  assert "mfu" not in records[1]


def test_packed_rows_count_real_sequences_not_rows():
  lines = []
  with tf.Graph().as_default():
    loss, train_op = _tiny_training_graph(accumulation_steps=2)
    # 8 packed rows an update, holding 3 + 4 real sequences in the two runs of an update
    runs = [v for v in tf.global_variables() if v.op.name == "runs"][0]
    sequences = tf.where(tf.equal(runs % 2, 0), 3.0, 4.0)
    hook = hooks.ThroughputHook(every_n_steps=1, global_batch_size=8, tensors={"loss": loss},
                                sequences_tensor=sequences, log=lines.append)
    _run(hook, train_op, times=[0.0, 1.0, 2.0, 3.0, 4.0, 5.0])
  records = [_parse(line) for line in lines]
  assert [r["step"] for r in records] == [0, 1, 2, 3]
  assert records[2]["sentences/s"] == pytest.approx(7 / 2.0)  # both runs' sequences, 2 s
  assert records[2]["sentences/s"] != pytest.approx(8 / 2.0)  # not rows


def _event_scalars(directory):
  scalars = {}
  for path in glob.glob(os.path.join(directory, "events.out.tfevents.*")):
    for event in tf.train.summary_iterator(path):
      for value in event.summary.value:
        scalars.setdefault(value.tag, {})[event.step] = value.simple_value
  return scalars


def test_writes_the_same_scalars_to_event_files(tmp_path):
  lines = []
  with tf.Graph().as_default():
    loss, train_op = _tiny_training_graph()
    hook = hooks.ThroughputHook(
        every_n_steps=2, global_batch_size=4,
        tensors={"loss": loss, "mlm_loss": loss * 0.5, "learning_rate": tf.constant(2e-5)},
        real_tokens_tensor=tf.constant(7), flops_per_step=10.0, peak_flops=100.0,
        log=lines.append, summary_dir=str(tmp_path))
    _run(hook, train_op, times=[0.0, 1.0, 2.0, 3.0, 4.0, 5.0])
  scalars = _event_scalars(str(tmp_path))
  assert set(scalars) == {"train/loss", "train/mlm_loss", "train/learning_rate",
                          "examples/sec", "throughput/real_tokens_per_sec",
                          "throughput/mfu", "throughput/sec_per_step"}
  logged = {int(r["step"]): r for r in map(_parse, lines)}
  assert sorted(logged) == [1, 2, 4, 6]
  for step in (2, 4, 6):
    record = logged[step]
    assert scalars["examples/sec"][step] == pytest.approx(record["sentences/s"])
    assert scalars["throughput/mfu"][step] == pytest.approx(record["mfu"], rel=1e-6)
    assert scalars["train/loss"][step] == pytest.approx(record["loss"], rel=1e-5)
  assert scalars["examples/sec"][4] == pytest.approx(2 * 4 / 2.0)
  assert sorted(scalars["train/loss"]) == [1, 2, 4, 6]


@pytest.mark.parametrize("accumulation_steps,every_n", [(1, 3), (1, 1), (2, 3), (3, 2)])
def test_summary_hook_writes_the_graphs_loss_on_the_step_line_steps(
    tmp_path, accumulation_steps, every_n):
  """SummaryHook (the Estimator's `loss`, every N) and ThroughputHook (every N) write on the same
  steps with the same values; every 2N, the summaries fall on a subset of the step lines."""
  with tf.Graph().as_default():
    loss, train_op = _tiny_training_graph(accumulation_steps)
    tf.summary.scalar("loss", loss)
    summary_dir, twice_dir = str(tmp_path / "every_n"), str(tmp_path / "every_2n")
    hook = hooks.ThroughputHook(every_n_steps=every_n, global_batch_size=4,
                                tensors={"total_loss": loss}, log=lambda line: None,
                                summary_dir=summary_dir)
    with tf.train.MonitoredSession(
        session_creator=tf.train.ChiefSessionCreator(config=SESSION_CONFIG),
        hooks=[hooks.SummaryHook(every_n, summary_dir), hooks.SummaryHook(2 * every_n, twice_dir),
               hook]) as sess:
      for _ in range(14 * accumulation_steps):
        sess.run(train_op)
  scalars, twice = _event_scalars(summary_dir), _event_scalars(twice_dir)
  assert len(scalars["loss"]) >= 4
  assert scalars["train/total_loss"] == pytest.approx(scalars["loss"], rel=1e-6)
  assert set(twice["loss"]) < set(scalars["loss"])
  assert sorted(s for s in scalars["loss"] if s > 1) == [
      s for s in range(2, 15) if s % every_n == 0]


def test_needs_a_global_step_and_scalar_tensors():
  with tf.Graph().as_default():
    hook = hooks.ThroughputHook(every_n_steps=1, global_batch_size=1, tensors={})
    with pytest.raises(RuntimeError, match="global step"):
      hook.begin()
    tf.train.get_or_create_global_step()
    hook = hooks.ThroughputHook(every_n_steps=1, global_batch_size=1,
                                tensors={"loss": tf.zeros([3])})
    with pytest.raises(ValueError, match="scalar"):
      hook.begin()
  with pytest.raises(ValueError, match="every_n_steps"):
    hooks.ThroughputHook(every_n_steps=0, global_batch_size=1, tensors={})
