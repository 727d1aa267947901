"""Files from outside read as hostile input: regular, inside their folder, bounded, one line.

  roots = allowed_roots(folder)          # the folder (and the hub cache's blobs/ it links into)
  path = member(folder, name, roots)     # None when absent; Refused unless a regular file inside
  with open_regular(path, roots) as f:   # stat first, then O_NONBLOCK: a FIFO never blocks
  data = read_bytes(path, limit, roots)  # whole file, refused when larger than limit
  obj = load_json(path, limit, roots)    # + UTF-8, nesting at most MAX_JSON_DEPTH deep
  budget = Budget(...)                   # what config.json justifies, spent as files claim it
  with reading(path, "safetensors file"):  # any other failure of a parser: one Refused line

Every refusal is Refused (a ValueError): one line naming the file and what is wrong. A symlink is
followed only when its target stays inside roots: the folder itself or, for a snapshot of the
huggingface hub cache (<repo>/snapshots/<revision>/), that repo's blobs/, where the cache's own
links point. roots None: a file the user named on the command line (any place, still regular).
(Also the guard of bert_fin/tokenization's vocab readers: a vocab that is a FIFO or huge.)
"""
import contextlib
import json
import os
import re
import stat

MAX_JSON_DEPTH = 64  # transformers' files nest < 10 deep; json's C parser recurses per level
MiB = 1 << 20
_KINDS = ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO (named pipe)"),
          (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
          (stat.S_ISSOCK, "a socket"))
# A JSON string (escapes skipped); possessive, and an unterminated one runs to the end of the
# data: the match never fails, so stripping strings is linear whatever the bytes are.
_JSON_STRING = re.compile(rb'"[^"\\]*+(?:\\.[^"\\]*+)*+(?:"|\\?\Z)', re.DOTALL)
_NOT_BRACKET = re.compile(rb"[^\[\]{}]++")
_LFS_POINTER = b"version https://git-lfs.github.com/spec/"


class Refused(ValueError):
  """A file of the folder cannot be used: the message (one line) names it and what is wrong."""


def quote(value, limit=60):
  """repr of a str or bytes cut to `limit` characters (untrusted text in a one-line message);
  other values by their type name."""
  if isinstance(value, (str, bytes)):
    text = repr(value[:limit])
    return text + ("..." if len(value) > limit else "")
  if isinstance(value, (bool, float)) or value is None:
    return repr(value)
  if isinstance(value, int):
    return repr(value) if value.bit_length() < 64 else "an integer of %d bits" % value.bit_length()
  if isinstance(value, (list, tuple)) and len(value) <= 8 and all(
      isinstance(item, (str, bytes, int, float)) or item is None for item in value):
    return "[%s]" % ", ".join(quote(item, 20) for item in value)  # one level, never recursive
  if isinstance(value, (list, tuple, dict)):
    return "a %s of %d items" % (type(value).__name__, len(value))
  return "a %s" % type(value).__name__


def size_text(nbytes):
  if nbytes < 10 * MiB:
    return "%d bytes" % nbytes
  return "%.1f MB" % (nbytes / 1e6) if nbytes < 10 ** 10 else "%.1f GB" % (nbytes / 1e9)


def allowed_roots(folder):
  """The real directories a folder's files may resolve into: the folder; and for a huggingface
  hub cache snapshot (<repo>/snapshots/<revision>), <repo>/blobs too."""
  real = os.path.realpath(folder)
  roots = [real]
  parent = os.path.dirname(real)
  if os.path.basename(parent) == "snapshots":
    roots.append(os.path.join(os.path.dirname(parent), "blobs"))
  return tuple(roots)


def _inside(path, roots):
  return any(path == root or path.startswith(root.rstrip(os.sep) + os.sep) for root in roots)


def _kind(mode):
  for test, name in _KINDS:
    if test(mode):
      return name
  return "not a regular file"


def check_regular(path, roots=None):
  """os.stat_result of path, which must be a regular file and (roots given) resolve inside roots.
  Nothing is opened: a FIFO or device is refused before it could block or be read."""
  if roots is not None:
    target = os.path.realpath(path)
    if not _inside(target, roots):
      raise Refused("%s resolves to %s, outside the folder: refused (a symlink leaving the "
                    "folder; copy the file in instead)" % (path, target))
  try:
    status = os.stat(path)
  except FileNotFoundError:
    raise Refused("%s: no such file%s" % (path, " (a broken symlink)" if os.path.islink(path)
                                          else "")) from None
  except OSError as e:
    raise Refused("%s cannot be read: %s" % (path, e.strerror)) from None
  if not stat.S_ISREG(status.st_mode):
    raise Refused("%s is %s, not a regular file: refused" % (path, _kind(status.st_mode)))
  return status


def member(folder, name, roots):
  """folder/name checked (check_regular) when something of that name is there, else None."""
  path = os.path.join(folder, name)
  if not os.path.lexists(path):
    return None
  check_regular(path, roots)
  return path


def file_name(name, where):
  """name when it is a plain file name (a shard of an index file: no directory part, no '..',
  not absolute); Refused naming `where` otherwise."""
  if (not isinstance(name, str) or not name or name in (".", "..") or "/" in name
      or "\\" in name or "\0" in name or os.path.basename(name) != name):
    raise Refused("%s names the file %s, which is not a plain file name in the folder: "
                  "refused" % (where, quote(name)))
  return name


@contextlib.contextmanager
def open_regular(path, roots=None):
  """The binary file object of path after check_regular; opened O_NONBLOCK (a FIFO swapped in
  after the check cannot block) and checked again on the descriptor (the same regular file)."""
  status = check_regular(path, roots)
  try:
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
  except OSError as e:
    raise Refused("%s cannot be opened: %s" % (path, e.strerror)) from None
  with os.fdopen(fd, "rb") as f:
    opened = os.fstat(fd)
    if (not stat.S_ISREG(opened.st_mode)
        or (opened.st_dev, opened.st_ino) != (status.st_dev, status.st_ino)):
      raise Refused("%s changed while it was being opened: refused" % path)
    yield f


def read_bytes(path, limit, roots=None, what="file"):
  """The bytes of path (open_regular), refused when it holds more than limit bytes."""
  with open_regular(path, roots) as f:
    size = os.fstat(f.fileno()).st_size
    data = f.read(limit + 1) if size <= limit else b""
  if size > limit or len(data) > limit:
    raise Refused("%s is %s, more than a %s may be (%s): refused" % (
        path, size_text(max(size, len(data))), what, size_text(limit)))
  return data


def json_depth(data):
  """The deepest nesting of [ ] { } outside the strings of JSON bytes, in linear time and
  bounded memory (no parser recursion: what json.loads would need)."""
  # numpy here only: its ~20 MB stay out of the processes that just read a vocab (build_vocab)
  import numpy as np  # pylint: disable=import-outside-toplevel
  brackets = _NOT_BRACKET.sub(b"", _JSON_STRING.sub(b"", data))
  deepest = level = 0
  for start in range(0, len(brackets), MiB):
    chunk = np.frombuffer(brackets[start:start + MiB], np.uint8)
    steps = np.where((chunk == ord("[")) | (chunk == ord("{")), 1, -1)
    levels = np.cumsum(steps) + level
    deepest, level = max(deepest, int(levels.max())), int(levels[-1])
  return deepest


def parse_json(data, name):
  """The JSON value of bytes `data` (UTF-8, a byte order mark allowed) named `name` in messages;
  Refused when not UTF-8, nested deeper than MAX_JSON_DEPTH, or not valid JSON."""
  depth = json_depth(data)
  if depth > MAX_JSON_DEPTH:
    raise Refused("%s nests %d levels deep, more than the %d a transformers file needs: "
                  "refused" % (name, depth, MAX_JSON_DEPTH))
  try:
    return json.loads(data.decode("utf-8-sig"))
  except UnicodeDecodeError as e:
    raise Refused("%s is not UTF-8 text (byte %d)" % (name, e.start)) from None
  except (ValueError, RecursionError) as e:
    raise Refused("%s is not valid JSON (%s)" % (name, str(e)[:200])) from None


def load_json(path, limit, roots=None, what="JSON file"):
  """parse_json of read_bytes(path, limit, roots)."""
  return parse_json(read_bytes(path, limit, roots, what), path)


def accident(head):
  """What a weight file whose first bytes are `head` most likely is, when it is one of the common
  accidents (a phrase to follow its path), else None."""
  if not head:
    return "is empty (an interrupted download?): download it again"
  if head.startswith(_LFS_POINTER):
    return ("is a Git LFS pointer, not the weights: run `git lfs pull` in the clone (or "
            "download the file itself)")
  start = head.lstrip()[:256].lower()
  if start.startswith(b"<") and (b"<html" in start or b"<!doctype html" in start):
    return ("is an HTML page, not weights (a login or error page saved in its place): "
            "download the file again")
  if start.startswith((b"{", b"[")):
    return "is a JSON document, not weights (a hub's error response saved in its place?)"
  return None


class Budget(object):
  """What a folder's config.json justifies its weight files holding, all files together, spent
  as the files claim tensors and checked BEFORE anything is allocated:
    elements      tensor elements made (each an output array element);
    nbytes        bytes of stored tensor data read;
    pickle_bytes  bytes of one .bin's pickle;
    header_bytes  bytes of one safetensors header, shard index or zip central directory;
    entries       members of one .bin zip archive (and storages of a legacy .bin).
  source names what justifies it (config.json's path) in the refusals."""

  def __init__(self, elements, nbytes, pickle_bytes, header_bytes, entries, source):
    self.elements, self.nbytes = elements, nbytes
    self.pickle_bytes, self.header_bytes, self.entries = pickle_bytes, header_bytes, entries
    self.source = source
    self.spent_elements = self.spent_bytes = 0

  @classmethod
  def unlimited(cls):
    """For trusted files (tests, tools reading what bert_fin wrote)."""
    big = 1 << 62
    return cls(big, big, big, big, big, "the caller")

  def spend(self, elements, nbytes, path, what):
    """Counts `what` of path (elements made, bytes read); Refused when over the budget."""
    if (self.spent_elements + elements > self.elements
        or self.spent_bytes + nbytes > self.nbytes):
      claims = " and ".join(part for part in ("%d elements" % elements if elements else "",
                                              size_text(nbytes) if nbytes else "") if part)
      raise Refused("%s: %s claims %s, more than the model of %s justifies (%d elements, %s "
                    "of tensor data in all): refused" % (
                        path, what, claims, self.source, self.elements, size_text(self.nbytes)))
    self.spent_elements += elements
    self.spent_bytes += nbytes


@contextlib.contextmanager
def reading(path, what):
  """Turns any failure of a parser reading path into Refused (one line naming path and `what`
  it should have been); Refused and OSError (the disk's own errors) pass unchanged."""
  try:
    yield
  except (Refused, OSError):
    raise
  except Exception as e:  # pylint: disable=broad-except  (the trust boundary: never a traceback)
    raise Refused("%s: not a readable %s (%s: %s)" % (
        path, what, type(e).__name__, " ".join(str(e).split())[:200])) from None
