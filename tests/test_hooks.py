"""ThroughputHook in a MonitoredSession with a fake clock: rates, MFU, accumulation, event files."""
import glob
import os
import re

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import pytest
import tensorflow.compat.v1 as tf

from bert_fin.training import hooks


# Graph mode per test (tests/conftest.py), eager stays on for the rest of the suite.
pytestmark = pytest.mark.usefixtures("fresh_graph")

SESSION_CONFIG = tf.ConfigProto(intra_op_parallelism_threads=1, inter_op_parallelism_threads=1)


def _parse(line):
  """'step 3: loss = 1.5, sentences/s = 16' -> {'step': 3.0, 'loss': 1.5, 'sentences/s': 16.0}."""
  step, rest = re.match(r"step (\d+): (.*)$", line).groups()
  fields = dict(pair.split(" = ") for pair in rest.split(", "))
  return dict({name: float(value) for name, value in fields.items()}, step=float(step))


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


def test_logs_rates_and_mfu_from_the_fake_clock(tmp_path):
  lines = []
  with tf.Graph().as_default():
    loss, train_op = _tiny_training_graph()
    hook = hooks.ThroughputHook(
        every_n_steps=2, global_batch_size=8,
        tensors={"loss": loss, "learning_rate": tf.constant(1e-4), "loss_scale": None},
        real_tokens_tensor=tf.constant(13), flops_per_step=1000.0, peak_flops=4000.0,
        log=lines.append, summary_dir=str(tmp_path))
    # Run 1 opens the window (step 1, t=10); logs land on multiples of 2: step 2 (1 update in
    # 1 s), step 4 (2 updates in 2 s), step 6 (2 updates in 4 s).
    _run(hook, train_op, times=[10.0, 11.0, 12.0, 13.0, 15.0, 17.0])
  records = [_parse(line) for line in lines]
  assert [r["step"] for r in records] == [2, 4, 6]
  first, second, third = records
  assert first["sentences/s"] == pytest.approx(1 * 8 / 1.0)
  assert first["real_tokens/s"] == pytest.approx(1 * 13 / 1.0)
  assert first["mfu"] == pytest.approx(1 * 1000.0 / 1.0 / 4000.0)
  assert second["sentences/s"] == pytest.approx(2 * 8 / 2.0)
  assert second["real_tokens/s"] == pytest.approx(2 * 13 / 2.0)
  assert third["sentences/s"] == pytest.approx(2 * 8 / 4.0)
  assert first["loss"] == pytest.approx(10.0 / 2, rel=1e-5)  # the value of the log step's own run
  assert first["learning_rate"] == pytest.approx(1e-4)
  assert "loss_scale" not in first
  assert lines[0].startswith("step 2: loss = ")


def test_rates_count_updates_not_runs_with_gradient_accumulation():
  lines = []
  with tf.Graph().as_default():
    loss, train_op = _tiny_training_graph(accumulation_steps=2)
    hook = hooks.ThroughputHook(every_n_steps=1, global_batch_size=8, tensors={"loss": loss},
                                real_tokens_tensor=tf.constant(5), log=lines.append)
    # Updates land on runs 2, 4, 6; the window opens after run 1 (step 0) at t = 0.
    _run(hook, train_op, times=[0.0, 1.0, 2.0, 3.0, 4.0, 5.0])
  records = [_parse(line) for line in lines]
  assert [r["step"] for r in records] == [1, 2, 3]
  assert records[0]["sentences/s"] == pytest.approx(1 * 8 / 1.0)  # 1 update in 1 s
  assert records[1]["sentences/s"] == pytest.approx(1 * 8 / 2.0)  # 1 update in 2 runs, 2 s
  assert records[1]["real_tokens/s"] == pytest.approx(2 * 5 / 2.0)  # tokens of both runs
  assert "mfu" not in records[0]


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
  assert [r["step"] for r in records] == [1, 2, 3]
  assert records[1]["sentences/s"] == pytest.approx(7 / 2.0)  # both runs' sequences, 2 s
  assert records[1]["sentences/s"] != pytest.approx(8 / 2.0)  # not rows


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
    _run(hook, train_op, times=[0.0, 1.0, 2.0, 3.0, 4.0])
  scalars = _event_scalars(str(tmp_path))
  assert set(scalars) == {"train/loss", "train/mlm_loss", "train/learning_rate",
                          "throughput/sentences_per_sec", "throughput/real_tokens_per_sec",
                          "throughput/mfu"}
  logged = {int(r["step"]): r for r in map(_parse, lines)}
  assert sorted(logged) == [2, 4]
  for step, record in logged.items():
    assert scalars["throughput/sentences_per_sec"][step] == pytest.approx(record["sentences/s"])
    assert scalars["throughput/mfu"][step] == pytest.approx(record["mfu"], rel=1e-6)
    assert scalars["train/loss"][step] == pytest.approx(record["loss"], rel=1e-5)
  assert scalars["throughput/sentences_per_sec"][2] == pytest.approx(1 * 4 / 1.0)
  assert scalars["throughput/sentences_per_sec"][4] == pytest.approx(2 * 4 / 2.0)


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
