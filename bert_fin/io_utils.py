"""Atomic output files: write to a temp file beside the target, fsync, rename.

A killed run leaves at most a `*.tmp-<pid>-<n>` file behind, never a half file under the final name.
"""
import contextlib
import glob
import itertools
import json
import os

_counter = itertools.count()


def temp_path_for(path):
  """A unique temp name in the same directory as `path` (rename is atomic only within a filesystem)."""
  directory, name = os.path.split(os.path.abspath(path))
  return os.path.join(directory, ".%s.tmp-%d-%d" % (name, os.getpid(), next(_counter)))


@contextlib.contextmanager
def atomic_output(path, mode="w", encoding="utf-8"):
  """Context manager yielding a file object; on success the file appears at `path` whole.

  On an exception the temp file is removed and the target is left untouched.
  """
  if "b" in mode:
    encoding = None
  directory = os.path.dirname(os.path.abspath(path))
  os.makedirs(directory, exist_ok=True)
  tmp = temp_path_for(path)
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
  """Yields a temp path for writers that open files themselves (e.g. tf.io.TFRecordWriter);
  renames it to `path` when the block succeeds, removes it when it raises."""
  os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
  tmp = temp_path_for(path)
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


def expand_file_patterns(patterns, glob_fn=glob.glob):
  """google's --input_file: a comma list of globs (or a list of paths/globs) -> list of files.

  Sorted per pattern, patterns kept in the order given, so every worker sees the same list.
  glob_fn: glob.glob for local files, tf.io.gfile.glob where remote filesystems must work.
  Raises ValueError naming a pattern that matches no file (google silently skipped it), or when no
  pattern is given.
  """
  given = patterns.split(",") if isinstance(patterns, str) else list(patterns)
  files = []
  for pattern in (p.strip() for p in given):
    if not pattern:
      continue
    matched = sorted(glob_fn(pattern))
    if not matched:
      raise ValueError("input file pattern %r matches no file" % pattern)
    files.extend(matched)
  if not files:
    raise ValueError("no input files given (%r)" % (patterns,))
  return files
