"""Counts, in bounded memory, how many documents of a corpus contain each line: the boilerplate
filter's first pass (clean.find_frequent_lines).

A corpus has about as many distinct lines as it has lines, so an in-memory table of them grows with
the corpus (a Python Counter costs ~100 bytes a line). Instead, each file's per-document distinct
line digests (uint64, filters.line_digest) are appended to one of `num_buckets` files on disk by
their top bits; `frequent(min_docs)` then loads one bucket at a time and counts it with np.unique.
Peak memory: one file's digests plus one bucket (8 bytes per line occurrence / num_buckets).
`buckets_for(input_bytes)` picks the bucket count for a corpus size.
"""
import numpy as np

from bert_fin.text.dedup import disk_buckets

_DIGEST = np.dtype("<u8")  # filters.digest64 bytes read as a little-endian uint64
MAX_BUCKETS = disk_buckets.MAX_BUCKETS


def buckets_for(input_bytes):
  """Bucket count for a corpus of input_bytes: lines average > 8 bytes, so the digests take at
  most as many bytes as the input (disk_buckets.buckets_for)."""
  return disk_buckets.buckets_for(input_bytes)


def digests_to_array(digests):
  """Iterable of 8-byte digests -> uint64 array."""
  return np.frombuffer(b"".join(digests), dtype=_DIGEST)


class LineCounter(object):
  """Bucketed on-disk multiset of line digests (disk_buckets.BucketFiles). Use as a context
  manager: the bucket files live in a temp directory (under `directory`) removed on exit."""

  def __init__(self, num_buckets=16, directory=None):
    self._buckets = disk_buckets.BucketFiles(num_buckets, directory, _DIGEST,
                                             prefix=".line-counts-")

  @property
  def added(self):
    return self._buckets.added

  def add(self, digests):
    """digests: uint64 array (each digest once per document that holds the line)."""
    self._buckets.add(digests)

  def frequent(self, min_docs):
    """frozenset of the 8-byte digests added at least min_docs times (one bucket in memory)."""
    found = []
    for values in self._buckets.read():
      if len(values):
        unique, counts = np.unique(values, return_counts=True)
        found.append(unique[counts >= min_docs])
    data = np.concatenate(found).astype(_DIGEST).tobytes() if found else b""
    return frozenset(data[i:i + 8] for i in range(0, len(data), 8))

  def __enter__(self):
    return self

  def __exit__(self, *exc_info):
    return self._buckets.__exit__(*exc_info)
