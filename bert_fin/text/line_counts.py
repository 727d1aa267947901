"""Counts, in bounded memory, how many documents of a corpus contain each line: the boilerplate
filter's first pass (clean.find_frequent_lines).

A corpus has about as many distinct lines as it has lines, so an in-memory table of them grows with
the corpus (a Python Counter costs ~100 bytes a line). Instead, each file's per-document distinct
line digests (uint64, filters.line_digest) are appended to one of `num_buckets` files on disk by
their top bits; `frequent(min_docs)` then loads one bucket at a time and counts it with np.unique.
Peak memory: one file's digests plus one bucket (8 bytes per line occurrence / num_buckets).
`buckets_for(input_bytes)` picks the bucket count for a corpus size.
"""
import os
import shutil
import tempfile

import numpy as np

_DIGEST = np.dtype("<u8")  # filters.digest64 bytes read as a little-endian uint64
_BUCKET_TARGET_BYTES = 128 << 20
MAX_BUCKETS = 256  # open files at once


def buckets_for(input_bytes):
  """A power of two >= 16 such that a bucket stays near 128 MB (lines average > 8 bytes, so the
  digests take at most as many bytes as the input), capped at MAX_BUCKETS."""
  buckets = 16
  while buckets < MAX_BUCKETS and input_bytes > buckets * _BUCKET_TARGET_BYTES:
    buckets *= 2
  return buckets


def digests_to_array(digests):
  """Iterable of 8-byte digests -> uint64 array."""
  return np.frombuffer(b"".join(digests), dtype=_DIGEST)


class LineCounter(object):
  """Bucketed on-disk multiset of line digests. Use as a context manager: the bucket files live in
  a temp directory (under `directory`) that is removed on exit."""

  def __init__(self, num_buckets=16, directory=None):
    if num_buckets < 1 or num_buckets & (num_buckets - 1) or num_buckets > MAX_BUCKETS:
      raise ValueError("num_buckets must be a power of two <= %d" % MAX_BUCKETS)
    self._shift = np.uint64(64 - (num_buckets.bit_length() - 1))
    self._num_buckets = num_buckets
    self._dir = tempfile.mkdtemp(prefix=".line-counts-", dir=directory)
    self._files = [open(os.path.join(self._dir, "%03d.u8" % b), "wb")
                   for b in range(num_buckets)]
    self.added = 0

  def add(self, digests):
    """digests: uint64 array (each digest once per document that holds the line)."""
    if not len(digests):
      return
    if self._num_buckets == 1:
      digests.tofile(self._files[0])
    else:
      buckets = (digests >> self._shift).astype(np.int64)
      order = np.argsort(buckets, kind="stable")
      ordered, bounds = digests[order], np.searchsorted(buckets[order],
                                                        np.arange(self._num_buckets + 1))
      for bucket in np.flatnonzero(bounds[1:] > bounds[:-1]):
        ordered[bounds[bucket]:bounds[bucket + 1]].tofile(self._files[bucket])
    self.added += len(digests)

  def frequent(self, min_docs):
    """frozenset of the 8-byte digests added at least min_docs times (one bucket in memory)."""
    found = []
    for handle in self._files:
      handle.flush()
      values = np.fromfile(handle.name, dtype=_DIGEST)
      if len(values):
        unique, counts = np.unique(values, return_counts=True)
        found.append(unique[counts >= min_docs])
    data = np.concatenate(found).astype(_DIGEST).tobytes() if found else b""
    return frozenset(data[i:i + 8] for i in range(0, len(data), 8))

  def __enter__(self):
    return self

  def __exit__(self, *exc_info):
    for handle in self._files:
      handle.close()
    shutil.rmtree(self._dir, ignore_errors=True)
    return False
