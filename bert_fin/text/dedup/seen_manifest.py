"""The seen manifest: 64-bit content hashes of every document already cleaned, across data batches.

`clean_corpus --seen_manifest FILE` skips documents whose hash is in FILE (stats reason
"seen_in_manifest") and appends the hashes of the documents it wrote, so a document that comes
back in a later batch of raw data is never trained on twice. The hash is the one the exact
duplicate filter uses (filters.digest64 of the cleaned sentences), so the same text cleaned from
another file or format is recognised too.

File layout (little-endian): the 8-byte magic, then one block per batch:
  uint64 count | count x uint64 hashes | uint32 crc32 of the hashes | uint32 BLOCK_END
Append-only: a batch adds one block with a single write + fsync, after clean_corpus's output file
is in place, under an exclusive flock (two runs cannot interleave). A crash mid-append leaves a
torn last block: readers stop at the first block whose length, crc or end marker is wrong, and the
next append truncates the file to its valid prefix first (logged). Killed before the block is
complete, a batch is simply not recorded: running the same command again cleans it again (same
output) and records it. Order of the two writes: output first, manifest second; the other order
could mark documents seen whose output never appeared, losing them.

Memory: the hashes live in one sorted numpy uint64 array (8 bytes a document); membership is a
binary search (np.searchsorted), vectorised for whole arrays; the hashes a run adds, 8 bytes each
until `commit`.
"""
import array
import contextlib
import fcntl
import os
import struct
import sys
import zlib

import numpy as np

MAGIC = b"BFSEEN1\n"
BLOCK_END = 0x5EE11D05
REASON_SEEN = "seen_in_manifest"
_COUNT = struct.Struct("<Q")
_TRAILER = struct.Struct("<II")


def digest_to_int(digest):
  """8-byte digest (filters.digest64) -> the uint64 stored in the manifest."""
  return int.from_bytes(digest, "little")


def read_blocks(path):
  """(sorted unique uint64 array of every valid block's hashes, valid byte length, total bytes).

  A missing file is empty; a file without the magic raises ValueError naming it."""
  if not os.path.exists(path):
    return np.zeros([0], np.uint64), 0, 0
  with open(path, "rb") as f:
    data = f.read()
  if not data:  # created, nothing appended yet
    return np.zeros([0], np.uint64), 0, 0
  if data[:len(MAGIC)] != MAGIC:
    raise ValueError("%s is not a seen manifest (no %r header): pass a new file name or one "
                     "written by clean_corpus --seen_manifest" % (path, MAGIC))
  arrays, offset = [], len(MAGIC)
  while offset + _COUNT.size <= len(data):
    count, = _COUNT.unpack_from(data, offset)
    start = offset + _COUNT.size
    end = start + 8 * count
    if count > len(data) or end + _TRAILER.size > len(data):
      break
    crc, marker = _TRAILER.unpack_from(data, end)
    if marker != BLOCK_END or crc != zlib.crc32(data[start:end]):
      break
    arrays.append(np.frombuffer(data, dtype="<u8", count=count, offset=start))
    offset = end + _TRAILER.size
  hashes = np.unique(np.concatenate(arrays)) if arrays else np.zeros([0], np.uint64)
  return hashes.astype(np.uint64, copy=False), offset, len(data)


class SeenManifest(object):
  """The hashes of one manifest file in memory, plus the ones added by this run."""

  def __init__(self, path):
    self.path = path
    self.known, self._valid_bytes, total = read_blocks(path)
    if total > self._valid_bytes:
      print("warning: %s: %d bytes of an unfinished append (a killed run) are ignored and will be "
            "truncated" % (path, total - self._valid_bytes), file=sys.stderr)
    self._added = array.array("Q")  # 8 bytes a document written

  def __len__(self):
    return len(self.known)

  def contains(self, hashes):
    """bool array: which of the uint64 `hashes` are already in the manifest file."""
    hashes = np.asarray(hashes, dtype=np.uint64)
    if not len(self.known):
      return np.zeros(hashes.shape, bool)
    where = np.minimum(np.searchsorted(self.known, hashes), len(self.known) - 1)
    return self.known[where] == hashes

  def seen(self, digest):
    """True if the 8-byte digest is in the manifest file; else remembers it for `commit`."""
    if self.contains([digest_to_int(digest)])[0]:
      return True
    self.add(digest)
    return False

  def add(self, digest):
    """Remembers the 8-byte digest of a document known not to be in the file, for `commit`."""
    self._added.append(digest_to_int(digest))

  def commit(self):
    """Appends the remembered hashes as one block (see the module docstring); returns how many."""
    return append_block(self.path, self._added)


@contextlib.contextmanager
def locked(path):
  """Yields a read-write fd of path (created when missing) under an exclusive flock."""
  fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
  try:
    fcntl.flock(fd, fcntl.LOCK_EX)
    yield fd
  finally:
    os.close(fd)


def append_block(path, hashes):
  """Appends one block of uint64 hashes to the manifest at path (created when missing), after
  cutting off a torn tail; fsyncs. Returns the number of hashes written."""
  payload = np.asarray(hashes, dtype="<u8").tobytes()
  block = (_COUNT.pack(len(payload) // 8) + payload
           + _TRAILER.pack(zlib.crc32(payload), BLOCK_END))
  with locked(path) as fd:
    _, valid, total = read_blocks(path)
    if valid == 0:
      os.ftruncate(fd, 0)
      os.write(fd, MAGIC)
      valid = len(MAGIC)
    elif total > valid:
      os.ftruncate(fd, valid)
    os.lseek(fd, valid, os.SEEK_SET)
    write_all(fd, block)
    os.fsync(fd)
  return len(payload) // 8


def write_all(fd, data):
  """os.write until every byte of data is written."""
  view = memoryview(data)
  while view:
    view = view[os.write(fd, view):]
