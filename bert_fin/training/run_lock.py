"""Who trains in --output_dir, and what a killed trainer left there.

RunLock: the chief holds an exclusive flock on OUTPUT_DIR/.bert_fin-run.lock while it trains; the
kernel releases it when the process ends, kill -9 included. A second training in the same
directory is refused with one line naming the live one (two trainers would overwrite each other's
checkpoints and data_order.json). Continuous eval only reads the training's files and takes no
lock. release() (every exit path of a training: estimator.train_and_evaluate's finally) removes
the file while still holding the lock; so a lock is only ever taken on the file the path names now
(acquire checks its inode after the flock and retries otherwise): a starter that opened the file
just before the holder removed it cannot hold a lock beside a third one on a new file. A kill -9
leaves the file, unlocked: the next start takes it.

remove_stale_tf_temp: with the lock held, no live trainer owns the temporary names TensorFlow 2.15
writes into the directory and renames when done, so they are leftovers of a killed run:
  <prefix>_temp/               the sharded Saver's checkpoint shards (part-N-of-M.index/.data-*),
                               merged into <prefix>.index/.data-* and deleted on success;
  <file>.tmp<32 hex digits>    file_io.atomic_write_string_to_file: the `checkpoint` state file,
                               graph.pbtxt;
  <file>.tempstate<digits>     tensor_bundle's BundleWriter (a checkpoint's .index / .data-*).
They are removed, counted and logged; no other name is touched (bert_fin's own temp directories
are io_utils's, swept by pid).
"""
import contextlib
import fcntl
import os
import re
import shutil

LOCK_FILE = ".bert_fin-run.lock"
_SAVER_TEMP_DIR = re.compile(r"^.+_temp$")
_SAVER_PART = re.compile(r"^part-\d+-of-\d+\.(index|data-\d+-of-\d+)(\.tempstate\d+)?$")
_TEMP_FILE = re.compile(r"^.+(\.tmp[0-9a-f]{32}|\.tempstate\d+)$")


class RunLockError(ValueError):
  """Another process trains in the output directory."""


class RunLock(object):
  """An exclusive, non-blocking flock on output_dir/LOCK_FILE (the file keeps the holder's pid)."""

  def __init__(self, output_dir):
    self._path = os.path.join(output_dir, LOCK_FILE)
    self._file = None

  def acquire(self, attempts=5):
    """Takes the lock or raises RunLockError naming the holder (attempts: how often a file removed
    by its releasing holder between our open and our flock is opened again)."""
    for _ in range(attempts):
      handle = open(self._path, "a+", encoding="ascii")  # pylint: disable=consider-using-with
      try:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
      except OSError:
        handle.seek(0)
        holder = handle.read().strip() or "unknown"
        handle.close()
        raise RunLockError("another run_pretraining (pid %s) is training in --output_dir %s; "
                           "wait for it to end or choose another --output_dir"
                           % (holder, os.path.dirname(self._path))) from None
      if _same_file(handle, self._path):
        handle.truncate(0)
        handle.write("%d\n" % os.getpid())
        handle.flush()
        self._file = handle
        return self
      handle.close()  # locked a file its holder has just removed: open the path again
    raise RunLockError("--output_dir %s: %s was removed and made again %d times while this run "
                       "started: another program keeps starting there" % (
                           os.path.dirname(self._path), LOCK_FILE, attempts))

  def release(self):
    """Removes the lock file (while holding the lock) and unlocks it; idempotent."""
    if self._file is not None:
      if _same_file(self._file, self._path):
        with contextlib.suppress(FileNotFoundError):
          os.remove(self._path)
      fcntl.flock(self._file.fileno(), fcntl.LOCK_UN)
      self._file.close()
      self._file = None


def _same_file(handle, path):
  """True when the open file `handle` is the file `path` names now."""
  try:
    return os.path.samestat(os.fstat(handle.fileno()), os.stat(path))
  except FileNotFoundError:
    return False


def _is_saver_temp_dir(path):
  if not _SAVER_TEMP_DIR.match(os.path.basename(path)) or not os.path.isdir(path):
    return False
  return all(_SAVER_PART.match(name) for name in os.listdir(path))


def remove_stale_tf_temp(output_dir):
  """Removes TensorFlow's temporary names left by a killed run (module docstring); call it with
  the RunLock held. Returns the names removed (logged)."""
  import tensorflow.compat.v1 as tf  # pylint: disable=import-outside-toplevel
  removed = []
  for name in sorted(os.listdir(output_dir)):
    path = os.path.join(output_dir, name)
    if _is_saver_temp_dir(path):
      shutil.rmtree(path, ignore_errors=True)
    elif _TEMP_FILE.match(name) and os.path.isfile(path):
      with contextlib.suppress(FileNotFoundError):
        os.remove(path)
    else:
      continue
    removed.append(name)
  if removed:
    tf.logging.warning("removed %d TensorFlow temporary file(s) a killed run left in %s: %s",
                       len(removed), output_dir, ", ".join(removed))
  return removed
