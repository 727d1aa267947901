"""Atomic output files and the temp files behind them.

Every temp file or work directory a bert_fin process makes in an output directory lives under ONE
directory of that process, `<dir>/.bert_fin-tmp-<host>-<pid>/` (TEMP_MARKER), removed when its
last user is done. So:
  - a killed run never leaves a half file under a final name, and no file a shard glob like
    `records/train-*` matches (a broad `records/*` can match the temp *directory*: the input
    expanders of bert_fin skip and count anything under TEMP_MARKER, and google's TFRecordDataset
    fails on a directory instead of training on partial data);
  - the next bert_fin process writing into that directory removes the temp directories of dead
    processes of its own host (remove_stale_temp), reporting what it freed.
"""
import collections
import contextlib
import errno
import glob
import itertools
import json
import logging
import os
import shutil
import socket
import tempfile
import threading

TEMP_MARKER = ".bert_fin-tmp-"
_LOG = logging.getLogger(__name__)
_counter = itertools.count()
_lock = threading.Lock()
_users = collections.Counter()  # process temp dir -> temp files / work dirs in use
_swept = set()  # directories whose stale temp dirs this process already removed


def _host():
  return socket.gethostname().replace("-", "_") or "host"


def is_temp_path(path):
  """True when `path` is (or is inside) a bert_fin temp directory: never an input."""
  return TEMP_MARKER in str(path)


def _pid_alive(pid):
  try:
    os.kill(pid, 0)
  except ProcessLookupError:
    return False
  except PermissionError:  # it exists, owned by another user
    return True
  return True


def owner_tag():
  """'<host>-<pid>' of this process, as its temp names carry it (is_stale_owner reads it)."""
  return "%s-%d" % (_host(), os.getpid())


def is_stale_owner(tag):
  """True when tag (owner_tag's form) names a process of this host that is gone: what it left
  in temp places is stale (another host's, a living one's and this process's are not)."""
  host, _, pid = tag.rpartition("-")
  return (host == _host() and pid.isdigit() and int(pid) != os.getpid()
          and not _pid_alive(int(pid)))


def _tree_bytes(path):
  total = 0
  for root, _, names in os.walk(path):
    for name in names:
      with contextlib.suppress(OSError):
        total += os.path.getsize(os.path.join(root, name))
  return total


def remove_stale_temp(directory):
  """Removes `directory`'s temp dirs left by killed bert_fin processes of this host.

  Only dirs whose owning pid is dead; others' (other hosts, live processes) are left alone.

  Returns:
    (number removed, bytes freed), also logged.
  """
  removed = freed = 0
  try:
    names = os.listdir(directory)
  except OSError:
    return 0, 0
  for name in names:
    if not name.startswith(TEMP_MARKER) or not is_stale_owner(name[len(TEMP_MARKER):]):
      continue
    path = os.path.join(directory, name)
    freed += _tree_bytes(path)
    shutil.rmtree(path, ignore_errors=True)
    removed += 1
  if removed:
    _LOG.warning("removed %d temp dir(s) (%.1f MB) left by killed runs in %s", removed,
                 freed / 1e6, directory)
  return removed, freed


def _acquire_temp_dir(directory):
  """This process's temp dir in `directory` (created; stale ones swept first), one more user."""
  directory = os.path.abspath(directory)
  temp_dir = os.path.join(directory, TEMP_MARKER + owner_tag())
  with _lock:
    if directory not in _swept:
      _swept.add(directory)
      os.makedirs(directory, exist_ok=True)
      remove_stale_temp(directory)
    os.makedirs(temp_dir, exist_ok=True)
    _users[temp_dir] += 1
  return temp_dir


def _release_temp_dir(temp_dir):
  with _lock:
    _users[temp_dir] -= 1
    if _users[temp_dir] <= 0:
      del _users[temp_dir]
      with contextlib.suppress(OSError):
        os.rmdir(temp_dir)  # only when empty


@contextlib.contextmanager
def work_dir(directory, prefix="work-"):
  """A private scratch directory inside this process's temp dir in `directory`, removed on exit.

  For bucket / part files that must live on the output's filesystem.

  Args:
    directory: the output directory (created if missing; stale temp dirs are swept first).
    prefix: the scratch directory's name prefix.

  Yields:
    the scratch directory's path.
  """
  temp_dir = _acquire_temp_dir(directory)
  try:
    path = tempfile.mkdtemp(prefix=prefix, dir=temp_dir)
    try:
      yield path
    finally:
      shutil.rmtree(path, ignore_errors=True)
  finally:
    _release_temp_dir(temp_dir)


@contextlib.contextmanager
def _temp_file_for(path):
  """Yields a unique temp path in this process's temp dir beside `path` (rename is atomic only
  within a filesystem); the temp dir is released afterwards."""
  temp_dir = _acquire_temp_dir(os.path.dirname(os.path.abspath(path)))
  try:
    yield os.path.join(temp_dir, "%s.%d" % (os.path.basename(path), next(_counter)))
  finally:
    _release_temp_dir(temp_dir)


@contextlib.contextmanager
def atomic_output(path, mode="w", encoding="utf-8"):
  """Context manager yielding a file object; on success the file appears at `path` whole.

  On an exception the temp file is removed and the target is left untouched.

  Args:
    path: the final path; the temp file is beside it (rename is atomic within a filesystem).
    mode: open() mode ("w", "wb", ...).
    encoding: for text modes (ignored for binary ones).

  Yields:
    the open file; it is flushed and fsynced before the rename.
  """
  if "b" in mode:
    encoding = None
  with _temp_file_for(path) as tmp:
    try:
      with open(tmp, mode, encoding=encoding) as f:
        yield f
        f.flush()
        os.fsync(f.fileno())
      os.replace(tmp, path)
    except BaseException:
      with contextlib.suppress(FileNotFoundError):
        os.remove(tmp)
      raise


@contextlib.contextmanager
def atomic_path(path):
  """A temp path for writers that open files themselves (e.g. tf.io.TFRecordWriter).

  Args:
    path: the final path.

  Yields:
    the temp path; it is renamed to `path` when the block succeeds, removed when it raises.
  """
  with _temp_file_for(path) as tmp:
    try:
      yield tmp
      os.replace(tmp, path)
    except BaseException:
      with contextlib.suppress(FileNotFoundError):
        os.remove(tmp)
      raise


def write_json_atomic(path, obj):
  """Writes obj as pretty, key-sorted UTF-8 JSON, atomically."""
  with atomic_output(path) as f:
    json.dump(obj, f, ensure_ascii=False, indent=2, sort_keys=True)
    f.write("\n")


def write_files_as_set(texts):
  """Writes {path: str} as a set of UTF-8 files: every text is encoded before any file is
  written (UnicodeEncodeError, e.g. a lone surrogate, leaves every path untouched), then each is
  written atomically (atomic_output), in the dict's order."""
  payloads = [(path, text.encode("utf-8")) for path, text in texts.items()]
  for path, payload in payloads:
    with atomic_output(path, mode="wb") as f:
      f.write(payload)


def read_saved(path, parse, refusal, default=None):
  """Reads a record a run wrote earlier (a file beside the checkpoints, a data order).

  Args:
    path: the UTF-8 file.
    parse: function of the file's text.
    refusal: function of the error, returning an exception whose one line names the file and
      what to do.
    default: returned when there is no such file.

  Returns:
    parse(text), or `default`.

  Raises:
    refusal(error), chained to the error: the file does not decode or parse cannot read it
      (ValueError, KeyError, TypeError: bad JSON, a missing key, a wrong type).
  """
  if not os.path.isfile(path):
    return default
  try:
    with open(path, encoding="utf-8") as f:
      return parse(f.read())
  except (ValueError, KeyError, TypeError) as e:
    raise refusal(e) from e


def os_error_message(error):
  """One line for an OSError met while reading or writing.

  Args:
    error: the OSError (disk full, permission, a directory where a file was expected, ...).

  Returns:
    `path: reason` (`path -> path2: reason` for a rename), and what to do for a full disk.
  """
  reason = error.strerror or str(error) or type(error).__name__
  where = " -> ".join(str(name) for name in (error.filename, error.filename2) if name)
  hint = ""
  if error.errno in (errno.ENOSPC, errno.EFBIG, errno.EDQUOT):
    hint = " (the output is too large for that filesystem or quota: free space or write elsewhere)"
  return "%s%s%s" % ("%s: " % where if where else "", reason, hint)


def _nearest_existing(path):
  while not os.path.lexists(path):
    path = os.path.dirname(path)
  return path


def check_output_dir(directory, flag, given=None):
  """Checks that files can be created in a local output directory, before any work.

  Checked by creating and removing a probe file, since as root os.access says yes to /proc, /sys
  and read-only mounts. Nothing is left behind; a missing directory is not created. Remote paths
  (scheme://) are left to their filesystem.

  Args:
    directory: the directory, or a missing one: then the directory it would be made from.
    flag: the flag named in the message.
    given: the path as the user wrote it, for the message (default: directory).

  Raises:
    ValueError: one line naming flag, path and fix.
  """
  if "://" in str(directory):
    return
  given = directory if given is None else given
  path = os.path.abspath(directory or ".")
  if os.path.lexists(path) and not os.path.isdir(path):
    raise ValueError("%s %s: %s exists and is not a directory" % (flag, given, directory))
  existing = _nearest_existing(path)
  if not os.path.isdir(existing):
    raise ValueError("%s %s cannot be created: %s is a file, not a directory" % (
        flag, given, existing))
  try:
    handle, probe = tempfile.mkstemp(prefix=TEMP_MARKER + "probe-", dir=existing)
  except OSError as error:
    raise ValueError("%s %s is not writable (cannot create a file in %s: %s); choose another "
                     "location" % (flag, given, existing, error.strerror)) from None
  os.close(handle)
  os.remove(probe)


def check_output_files(paths, flag):
  """What a writer of `paths` can be refused for, checked up front.

  Args:
    paths: output file paths (remote scheme:// paths are skipped).
    flag: the flag named in the message.

  Raises:
    ValueError: a path is an existing directory, or check_output_dir fails for a directory
      of `paths` (each checked once).
  """
  checked = set()
  for path in paths:
    if "://" in str(path):
      continue
    if os.path.isdir(path):
      raise ValueError("%s %s is a directory; give a file path" % (flag, path))
    directory = os.path.dirname(os.path.abspath(path))
    if directory not in checked:
      checked.add(directory)
      check_output_dir(directory, flag, given=path)


def check_input_files(paths, flag):
  """Checks that input files can be read; opens each file once and reads nothing (O_NONBLOCK: a
  FIFO without a writer does not block the check).

  Args:
    paths: local file paths.
    flag: the flag named in the message.

  Raises:
    ValueError: naming flag and path, for a path that is a directory or cannot be opened for
      reading (as root: /proc entries, a file deleted since it was listed).
  """
  for path in paths:
    if os.path.isdir(path):
      raise ValueError("%s %s is a directory, not a file" % (flag, path))
    try:
      os.close(os.open(path, os.O_RDONLY | os.O_NONBLOCK))
    except OSError as error:
      raise ValueError("%s %s" % (flag, os_error_message(error))) from None


def expand_file_patterns(patterns, glob_fn=glob.glob):
  """google's --input_file: a comma list of globs (or a list of paths/globs) -> list of files.

  Sorted per pattern, patterns kept in the order given, so every worker sees the same list.
  Paths under a bert_fin temp directory (a running or killed writer's, see is_temp_path) are
  left out with a logged count: they are partial outputs, never inputs.

  Args:
    patterns: a comma list of globs, or a list of paths/globs.
    glob_fn: glob.glob for local files, tf.io.gfile.glob where remote filesystems must work.

  Returns:
    list of file paths.

  Raises:
    ValueError: naming a pattern that matches no file (google silently skipped it) or only temp
      files, or when no pattern is given.
  """
  given = patterns.split(",") if isinstance(patterns, str) else list(patterns)
  files, skipped = [], 0
  for pattern in (p.strip() for p in given):
    if not pattern:
      continue
    matched = sorted(glob_fn(pattern))
    if not matched:
      raise ValueError("input file pattern %r matches no file" % pattern)
    kept = [path for path in matched if not is_temp_path(path)]
    skipped += len(matched) - len(kept)
    if not kept:
      raise ValueError("input file pattern %r matches only temp files of an unfinished or "
                       "running bert_fin process (%s*)" % (pattern, TEMP_MARKER))
    files.extend(kept)
  if skipped:
    _LOG.warning("input: left out %d temp path(s) (%s*) of an unfinished or running writer",
                 skipped, TEMP_MARKER)
  if not files:
    raise ValueError("no input files given (%r)" % (patterns,))
  return files
