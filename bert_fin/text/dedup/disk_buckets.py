"""Corpus-sized arrays kept on disk in buckets by the top bits of a 64-bit key, read back one bucket
at a time: what lets a corpus-wide count or grouping run in memory that does not grow with the
corpus (the boilerplate line counts, line_counts.py; the near-duplicate band keys,
near_dup_clusters.py).

  with BucketFiles(num_buckets, directory, dtype, key="key") as buckets:
    buckets.add(records)           # a numpy array of `dtype` (structured or plain uint64)
    for bucket in buckets.read():  # every record whose key falls in bucket b, in the order added
      ...
`buckets_for(total_bytes)` picks the bucket count for a given amount of data.
"""
import os
import shutil
import tempfile

import numpy as np

_BUCKET_TARGET_BYTES = 4 << 20  # one bucket in memory (and its sort's copies) stays small
MAX_BUCKETS = 256  # open files at once


def buckets_for(total_bytes):
  """A power of two >= 16 such that a bucket stays near 4 MB, capped at MAX_BUCKETS (past 1 GB
  of records, buckets grow: 256 MB-of-records steps cost 1 MB more a bucket)."""
  buckets = 16
  while buckets < MAX_BUCKETS and total_bytes > buckets * _BUCKET_TARGET_BYTES:
    buckets *= 2
  return buckets


class BucketFiles(object):
  """Records of `dtype` appended to num_buckets files (in a temp directory under `directory`,
  removed on exit) by the top bits of their uint64 `key` field (key=None: the records are the
  keys). Use as a context manager."""

  def __init__(self, num_buckets, directory, dtype, key=None, prefix=".buckets-"):
    if num_buckets < 1 or num_buckets & (num_buckets - 1) or num_buckets > MAX_BUCKETS:
      raise ValueError("num_buckets must be a power of two <= %d" % MAX_BUCKETS)
    self.dtype = np.dtype(dtype)
    self._key = key
    self._shift = np.uint64(64 - (num_buckets.bit_length() - 1))
    self._num_buckets = num_buckets
    self._dir = tempfile.mkdtemp(prefix=prefix, dir=directory)
    self._files = [open(os.path.join(self._dir, "%03d.bin" % b), "wb")
                   for b in range(num_buckets)]
    self.added = 0

  def add(self, records):
    """Appends a 1-d array of self.dtype to the buckets of its keys."""
    records = np.asarray(records, self.dtype)
    if not len(records):
      return
    if self._num_buckets == 1:
      records.tofile(self._files[0])
    else:
      keys = records[self._key] if self._key else records
      buckets = (keys >> self._shift).astype(np.int64)
      order = np.argsort(buckets, kind="stable")
      ordered, bounds = records[order], np.searchsorted(buckets[order],
                                                        np.arange(self._num_buckets + 1))
      for bucket in np.flatnonzero(bounds[1:] > bounds[:-1]):
        ordered[bounds[bucket]:bounds[bucket + 1]].tofile(self._files[bucket])
    self.added += len(records)

  def sizes(self):
    """Bytes written to each bucket so far."""
    for handle in self._files:
      handle.flush()
    return [os.path.getsize(handle.name) for handle in self._files]

  def read(self):
    """Yields each bucket's records (an array of self.dtype), one bucket in memory at a time."""
    for handle in self._files:
      handle.flush()
      yield np.fromfile(handle.name, dtype=self.dtype)

  def __enter__(self):
    return self

  def __exit__(self, *exc_info):
    for handle in self._files:
      handle.close()
    shutil.rmtree(self._dir, ignore_errors=True)
    return False
