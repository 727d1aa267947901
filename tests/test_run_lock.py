"""training/run_lock.py: one trainer per --output_dir, and TensorFlow's temporary files a kill -9
left there removed at the next start (only TF's own temporary names, only with no live trainer)."""
import os
import signal
import subprocess
import sys
import time

import pytest

from helpers import TRAINING_FIXTURES  # noqa: E402
from helpers import pretraining_runs as pt  # noqa: E402

from bert_fin.training import estimator  # noqa: E402
from bert_fin.training import run_lock  # noqa: E402

SLOW_SAVER = os.path.join(TRAINING_FIXTURES, "slow_saver.py")
# Left as they are: names TensorFlow does not use for its temporary files.
NOT_TF_TEMP = ("notes_temp/readme.txt", "plan.tmp", "graph.pbtxt.tmpX", "old.ckpt.tempstate")


def _saving(output_dir):
  """True while a save is under way: a `_temp` directory with a `.tempstate` file in it."""
  for name in os.listdir(output_dir):
    path = os.path.join(output_dir, name)
    if name.endswith("_temp") and os.path.isdir(path):
      try:
        if any(".tempstate" in n for n in os.listdir(path)):
          return True
      except FileNotFoundError:  # the save finished (renamed) in between
        pass
  return False


def _kill_mid_save(output_dir, attempts=3):
  """SIGKILLs slow_saver.py while a checkpoint save is under way in output_dir (a `_temp`
  directory holding BundleWriter's `.tempstate` file exists: the directory alone can be seen
  before the file is made); returns the names of TF's temporary files it left."""
  for _ in range(attempts):
    saver = subprocess.Popen([sys.executable, SLOW_SAVER, output_dir], start_new_session=True,
                             env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", OMP_NUM_THREADS="1"))
    deadline = time.time() + 120
    try:
      while not _saving(output_dir):
        assert saver.poll() is None and time.time() < deadline, "the saver never saved"
        time.sleep(0.005)
    finally:
      os.killpg(saver.pid, signal.SIGKILL)
      saver.wait()
    left = [n for n in os.listdir(output_dir) if n.startswith("other.ckpt") and "_temp" in n]
    if left:
      return left
  pytest.fail("the save finished before every kill")
  return []


@pytest.mark.slow  # SIGKILLs a saving program, three trainings: as the kill -9 resume cases
def test_tf_temp_files_of_a_killed_run_are_removed_at_the_next_start_and_only_those(
    tmp_path, records_dir, caplog):
  values = pt.parse_flags(pt.tiny_argv(tmp_path, str(records_dir / "*.tfrecord"), do_train=True,
                                       num_train_steps=2, save_checkpoints_steps=2))
  pt.train(values)
  out = values.output_dir
  left = _kill_mid_save(out)
  temp_dir = os.path.join(out, left[0])
  assert any(".tempstate" in n for n in os.listdir(temp_dir))  # BundleWriter's, inside
  with open(os.path.join(out, "checkpoint.tmp" + "0123456789abcdef" * 2), "w") as f:
    f.write("half")  # file_io.atomic_write_string_to_file's temp name (the state file, graph.pbtxt)
  for name in NOT_TF_TEMP:
    os.makedirs(os.path.dirname(os.path.join(out, name)), exist_ok=True)
    with open(os.path.join(out, name), "w") as f:
      f.write("mine")
  # While a trainer holds the directory, a second start is refused and nothing is removed.
  holder = run_lock.RunLock(out).acquire()
  try:
    with pytest.raises(run_lock.RunLockError, match="pid %d.*is training in --output_dir"
                       % os.getpid()):
      pt.train(pt.parse_flags(pt.tiny_argv(tmp_path, values.input_file, do_train=True,
                                           num_train_steps=4)))
    assert os.path.isdir(temp_dir)
  finally:
    holder.release()
  with caplog.at_level("WARNING"):
    pt.train(pt.parse_flags(pt.tiny_argv(tmp_path, values.input_file, do_train=True,
                                         num_train_steps=4)))
  assert estimator.checkpoint_step(out) == 4
  names = os.listdir(out)
  assert not [n for n in names if n.startswith(("other.ckpt", "checkpoint.tmp")) and (
      n.endswith("_temp") or ".tmp" in n)], names
  assert all(os.path.exists(os.path.join(out, name)) for name in NOT_TF_TEMP)
  assert "removed 2 TensorFlow temporary file(s) a killed run left" in caplog.text


def test_release_removes_the_lock_file_and_a_lock_is_only_held_on_the_file_the_path_names(
    tmp_path, monkeypatch):
  holder = run_lock.RunLock(str(tmp_path)).acquire()
  path = tmp_path / run_lock.LOCK_FILE
  assert path.read_text() == "%d\n" % os.getpid()
  with pytest.raises(run_lock.RunLockError, match="pid %d" % os.getpid()):
    run_lock.RunLock(str(tmp_path)).acquire()
  holder.release()
  assert not path.exists()  # nothing left behind after a run
  holder.release()  # idempotent
  # A starter that opened the file just before its holder removed it locks a removed file:
  # acquire sees that and takes the lock on the file the path names now.
  path.write_text("")
  stale = open(path, "a+", encoding="ascii")  # pylint: disable=consider-using-with
  os.remove(path)
  path.write_text("")  # a third starter's new file
  again = run_lock.RunLock(str(tmp_path))
  original_open = open

  def open_the_stale_file_first(name, *args, **kwargs):
    if name == str(path) and not stale.closed:
      return stale
    return original_open(name, *args, **kwargs)

  monkeypatch.setattr(run_lock, "open", open_the_stale_file_first, raising=False)
  again.acquire()
  monkeypatch.undo()
  assert stale.closed
  held = again._file  # pylint: disable=protected-access
  assert os.path.samestat(os.fstat(held.fileno()), os.stat(path))
  with pytest.raises(run_lock.RunLockError):
    run_lock.RunLock(str(tmp_path)).acquire()  # the lock is on the path's file: refused
  again.release()
  assert not path.exists()
