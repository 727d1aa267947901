"""Eval-only runs (--num_train_steps=0) and --eval_continuous beside a training run."""
import json
import os
import shutil
import subprocess
import sys
import threading
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
import pytest  # noqa: E402
import tensorflow.compat.v1 as tf  # noqa: E402

from bert_fin.training.monitor import continuous_eval  # noqa: E402
from bert_fin.training import estimator  # noqa: E402
from bert_fin.training import flags as train_flags  # noqa: E402
from helpers.pretraining_runs import RUN_PRETRAINING, parse_flags, tiny_argv, train  # noqa: E402


def _train_flags(tmp_path, records, steps):
  return parse_flags(tiny_argv(tmp_path, records, do_train=True, num_train_steps=steps,
                               save_checkpoints_steps=2, log_every_n_steps=2))


@pytest.fixture(scope="module")
def trained_2_steps(tmp_path_factory, records_dir):
  """A run of 2 steps (checkpoint at step 2), trained once for the module's tests."""
  tmp_path = tmp_path_factory.mktemp("trained_2_steps")
  train(_train_flags(tmp_path, os.path.join(str(records_dir), "*.tfrecord"), 2))
  return str(tmp_path / "out")


def _trained(tmp_path, trained_2_steps):
  """The 2-step run copied to tmp_path/out (tiny_argv's --output_dir), as if trained there."""
  out = str(tmp_path / "out")
  shutil.copytree(trained_2_steps, out)
  return out


def _watch(tmp_path, records, steps, **extra):
  return parse_flags(tiny_argv(tmp_path, records, do_eval=True, eval_continuous=True,
                               num_train_steps=steps, max_eval_steps=2, **extra))


def _remove_while_written(directory, attempts=100):
  """shutil.rmtree of a directory another process may be writing in (a temporary file renamed
  away between listing and removal): tried again until the directory is gone."""
  for _ in range(attempts):
    shutil.rmtree(directory, ignore_errors=True)
    if not os.path.exists(directory):
      return
    time.sleep(0.02)
  assert not os.path.exists(directory), os.listdir(directory)


def _best_step(output_dir):
  return int(tf.train.load_variable(
      tf.train.latest_checkpoint(os.path.join(output_dir, "best")), "global_step"))


def test_eval_only_with_zero_steps_evaluates_the_latest_checkpoint(tmp_path, records_dir,
                                                                   trained_2_steps):
  records = os.path.join(str(records_dir), "*.tfrecord")
  out = _trained(tmp_path, trained_2_steps)
  values = parse_flags(tiny_argv(tmp_path, records, do_eval=True, num_train_steps=0,
                                 max_eval_steps=2))
  train_flags.validate_flags(values)  # google accepts it; no refusal
  result = train(values)
  assert result["global_step"] == 2 and result["masked_lm_loss"] > 0
  assert estimator.checkpoint_step(out) == 2  # nothing trained
  with pytest.raises(ValueError, match="--num_train_steps must be >= 1"):
    train_flags.validate_flags(parse_flags(tiny_argv(tmp_path, records, do_train=True,
                                                     num_train_steps=0)))
  with pytest.raises(ValueError, match="--eval_continuous runs in a process of its own"):
    train_flags.validate_flags(parse_flags(tiny_argv(tmp_path, records, do_train=True,
                                                     do_eval=True, eval_continuous=True)))


def test_picks_up_new_checkpoints_and_keeps_the_best(tmp_path, records_dir, trained_2_steps):
  records = os.path.join(str(records_dir), "*.tfrecord")
  out = _trained(tmp_path, trained_2_steps)
  # Nothing newer than step 2 arrives: the timeout ends the watch after one eval.
  first = train(_watch(tmp_path, records, 6, eval_timeout_secs=1))
  assert first["global_step"] == 2 and _best_step(out) == 2

  # A watcher started before the training goes on sees steps 4 and 6 appear and stops at 6.
  watcher = _watch(tmp_path, records, 6, eval_timeout_secs=120)
  trainer = _train_flags(tmp_path, records, 6)  # (writes bert_config.json before the thread)
  results = []
  thread = threading.Thread(target=lambda: results.append(train(watcher)))
  thread.start()
  train(trainer)
  thread.join(timeout=300)
  assert not thread.is_alive()
  assert results[0]["global_step"] == 6

  lines = continuous_eval.read_results(out)
  steps = [line["global_step"] for line in lines]
  assert steps[0] == 2 and steps[-1] == 6 and len(set(steps)) == len(steps)
  losses = {line["global_step"]: line["masked_lm_loss"] for line in lines}
  best = min(losses, key=losses.get)
  assert _best_step(out) == best
  with open(os.path.join(out, "best", "eval_results.txt"), encoding="utf-8") as f:
    assert "masked_lm_loss = %s\n" % losses[best] in f.read()
  # Restarted after the end: the final step is already evaluated, it stops at once.
  assert train(_watch(tmp_path, records, 6)) is None
  assert len(continuous_eval.read_results(out)) == len(lines)
  # best/ holds exactly one checkpoint, its files survive the training's rotation.
  best_files = sorted(os.listdir(os.path.join(out, "best")))
  assert {f.split(".")[0] for f in best_files if f.startswith("model")} == {"model"}
  assert len({f.rsplit(".", 1)[0] for f in best_files if f.startswith("model")}) == 1
  for path in continuous_eval.checkpoint_files(os.path.join(out, "model.ckpt-%d" % best)):
    os.remove(path)
  reader = tf.train.load_checkpoint(tf.train.latest_checkpoint(os.path.join(out, "best")))
  assert reader.get_tensor("global_step") == best
  # google's eval_results.txt holds the latest block; TensorBoard's eval/ has every step.
  with open(os.path.join(out, "eval_results.txt"), encoding="utf-8") as f:
    assert "global_step = 6\n" in f.read()
  eval_steps = set()
  for path in tf.io.gfile.glob(os.path.join(out, "eval", "events.out.tfevents*")):
    for event in tf.train.summary_iterator(path):
      if any(v.tag == "masked_lm_loss" for v in event.summary.value):
        eval_steps.add(event.step)
  assert eval_steps == set(steps)



def test_a_better_checkpoint_replaces_best_and_a_worse_one_does_not(tmp_path):
  """promote/stage on fake checkpoints: the state file switches, the old best's files go."""
  out = str(tmp_path)
  for step in (2, 4):
    for suffix in (".index", ".data-00000-of-00001"):
      with open(os.path.join(out, "model.ckpt-%d%s" % (step, suffix)), "w") as f:
        f.write(str(step))
  best_dir = os.path.join(out, "best")
  staged = continuous_eval.stage(os.path.join(out, "model.ckpt-2"), best_dir)
  continuous_eval.promote(staged, {"masked_lm_loss": 3.0, "global_step": 2})
  assert continuous_eval.best_value(out) == 3.0
  staged = continuous_eval.stage(os.path.join(out, "model.ckpt-4"), best_dir)
  continuous_eval.promote(staged, {"masked_lm_loss": 2.5, "global_step": 4})
  assert continuous_eval.best_value(out) == 2.5
  assert sorted(os.listdir(best_dir)) == [
      "checkpoint", "eval_results.txt", "model.ckpt-4.data-00000-of-00001",
      "model.ckpt-4.index"]
  with open(os.path.join(best_dir, "checkpoint"), encoding="utf-8") as f:
    assert f.readline() == 'model_checkpoint_path: "model.ckpt-4"\n'
  # Hard links: the training deleting its own files leaves best/ whole.
  os.remove(os.path.join(out, "model.ckpt-4.index"))
  with open(os.path.join(best_dir, "model.ckpt-4.index"), encoding="utf-8") as f:
    assert f.read() == "4"
  record = {"global_step": 4, "masked_lm_loss": 2.5}
  continuous_eval.append_result(out, record)
  continuous_eval.append_result(out, dict(record, global_step=6))
  with open(os.path.join(out, continuous_eval.RESULTS_JSONL), encoding="utf-8") as f:
    assert [json.loads(line)["global_step"] for line in f] == [4, 6]


def _fake_checkpoint(directory, step):
  for suffix in (".index", ".data-00000-of-00001"):
    with open(os.path.join(directory, "model.ckpt-%d%s" % (step, suffix)), "w") as f:
      f.write(str(step))
  with open(os.path.join(directory, "checkpoint"), "w", encoding="utf-8") as f:
    f.write('model_checkpoint_path: "model.ckpt-%d"\n' % step)


class FakeClock(object):
  """time for new_checkpoints: sleep advances it and runs the scenario's next step."""

  def __init__(self, events):
    self.now, self.events = 0.0, dict(events)

  def time(self):
    return self.now

  def sleep(self, seconds):
    self.now += seconds
    action = self.events.pop(int(self.now), None)
    if action:
      action()


def test_waiting_says_once_what_is_gone_and_goes_on(tmp_path, caplog):
  out = str(tmp_path / "out")
  os.makedirs(out)
  _fake_checkpoint(out, 2)
  for suffix in (".index", ".data-00000-of-00001"):  # named in `checkpoint`, files gone
    os.remove(os.path.join(out, "model.ckpt-2" + suffix))
  clock = FakeClock({5: lambda: shutil.rmtree(out), 9: lambda: os.makedirs(out),
                     12: lambda: _fake_checkpoint(out, 4)})
  with caplog.at_level("WARNING"):
    found = next(continuous_eval.new_checkpoints(out, None, clock.time, clock.sleep))
  assert found == os.path.join(out, "model.ckpt-4") and clock.now == 12
  assert caplog.text.count("model.ckpt-2, named in") == 1
  assert caplog.text.count("is gone (deleted?): waiting for it to come back") == 1


def test_the_timeout_counts_the_wait_not_the_evaluation(tmp_path):
  """An evaluation longer than --eval_timeout_secs does not end the watch: the next checkpoint,
  arriving 3 s into the wait after it, is still picked up (google's checkpoints_iterator)."""
  out = str(tmp_path / "out")
  os.makedirs(out)
  _fake_checkpoint(out, 2)
  clock = FakeClock({23: lambda: _fake_checkpoint(out, 4)})
  watch = continuous_eval.new_checkpoints(out, 5, clock.time, clock.sleep)
  assert next(watch) == os.path.join(out, "model.ckpt-2")
  clock.now += 20  # the evaluation of model.ckpt-2 took 20 s
  assert next(watch) == os.path.join(out, "model.ckpt-4") and clock.now == 23
  assert list(watch) == [] and clock.now >= 28  # then 5 s of waiting end it


def test_a_deleted_output_dir_still_gone_at_the_timeout_stops_with_one_line(tmp_path):
  out = str(tmp_path / "out")
  os.makedirs(out)
  clock = FakeClock({1: lambda: shutil.rmtree(out)})
  with pytest.raises(continuous_eval.WatchError, match="was deleted and did not come back "
                     "within --eval_timeout_secs=5"):
    list(continuous_eval.new_checkpoints(out, 5, clock.time, clock.sleep))
  os.makedirs(out)  # there but empty at the timeout: the usual end, no error
  assert list(continuous_eval.new_checkpoints(out, 5, clock.time, clock.sleep)) == []


def test_command_line_watcher_whose_output_dir_is_deleted_exits_2_in_one_line(
    tmp_path, records_dir, trained_2_steps):
  records = os.path.join(str(records_dir), "*.tfrecord")
  out = _trained(tmp_path, trained_2_steps)
  watcher = subprocess.Popen(
      [sys.executable, RUN_PRETRAINING] + tiny_argv(
          tmp_path, records, do_eval=True, eval_continuous=True, num_train_steps=6,
          max_eval_steps=2, eval_timeout_secs=10),  # the deletion lands well inside it
      stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, cwd=str(tmp_path),
      env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", OMP_NUM_THREADS="1"))
  try:
    deadline = time.time() + 300
    while not os.path.exists(os.path.join(out, continuous_eval.RESULTS_JSONL)):
      assert watcher.poll() is None and time.time() < deadline
      time.sleep(0.1)
    _remove_while_written(out)  # while it waits for step 4
    stderr = watcher.communicate(timeout=300)[1]
  finally:
    if watcher.poll() is None:
      watcher.kill()
  assert watcher.returncode == 2, stderr[-3000:]
  assert "Traceback" not in stderr
  errors = [line for line in stderr.splitlines() if "error:" in line]
  assert errors == ["run_pretraining.py: error: --output_dir %s was deleted and did not come back "
                    "within --eval_timeout_secs=10: continuous evaluation stops" % out]
  assert not os.path.exists(out)  # not recreated by the watcher
