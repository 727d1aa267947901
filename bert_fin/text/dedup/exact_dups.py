"""Exact duplicates and seen-manifest documents of a clean_corpus run, found on disk: a verdict
byte per document, so memory does not grow with the corpus.

The rule (clean._append_part applies it in input order): a document whose content hash
(filters.digest64 of its sentences) an earlier document of the run has is a `duplicate` (unless
duplicates are kept); of the others, one whose hash is in the seen manifest is `seen_in_manifest`;
the rest are KEPT (the near-duplicate pass may still remove them). An in-memory set of hashes
decides that in one pass but costs ~100 bytes a document for the whole run; here:

  1. each worker writes, beside its part file, an index: (digest, byte offset of the line) per
     document, uint64 each (IndexWriter; index_path(part));
  2. DigestLog.add(part) reads a part's index in windows, numbers its documents after the
     previous parts' and appends (digest, number) records to bucket files by the digest's top
     bits (disk_buckets.BucketFiles);
  3. DigestLog.decide loads one bucket at a time, sorts it by (digest, number): the first of each
     digest is the first copy in input order; the verdicts go to a file of one byte a document
     (written through a memory map released after each bucket);
  4. DigestLog.verdicts(part) yields a part's verdicts in windows, read from that file.
Exact: no hash is dropped or approximated (two documents share a verdict only by sharing their
64-bit digest, as with the set). Disk beside the output: 16 bytes a document (index) + 16
(buckets) + 1 (verdicts); memory: one bucket and a window.
"""
import os
import tempfile

import numpy as np

from bert_fin.text.dedup import disk_arrays
from bert_fin.text.dedup import disk_buckets
from bert_fin.text.dedup import seen_manifest

KEPT, DUPLICATE, SEEN = 0, 1, 2
INDEX_DTYPE = np.dtype([("digest", "<u8"), ("offset", "<u8")])
_RECORD = np.dtype([("digest", "<u8"), ("number", "<u8")])
WINDOW = 1 << 16  # documents read at a time


def index_path(part_path):
  return part_path + ".index"


class IndexWriter(disk_arrays.BatchedWriter):
  """Appends (digest, offset) of each document of a part file to index_path(part_path)."""

  def __init__(self, part_path):
    super().__init__(index_path(part_path), WINDOW)

  def add(self, digest, offset):
    self._append((seen_manifest.digest_to_int(digest), offset))

  def _write(self, items, file):
    np.array(items, "<u8").tofile(file)


def read_index(part_path, start, count):
  """INDEX_DTYPE [<= count]: the index records of documents start .. start + count - 1."""
  return disk_arrays.read_window(index_path(part_path), INDEX_DTYPE, (), start, count)


def index_documents(part_path):
  return os.path.getsize(index_path(part_path)) // INDEX_DTYPE.itemsize


class DigestLog(object):
  """Steps 2-4 of the module docstring under `directory`. Use as a context manager (its files
  are removed on exit). num_buckets: a power of two (disk_buckets.buckets_for)."""

  def __init__(self, directory, num_buckets=16):
    self._buckets = disk_buckets.BucketFiles(num_buckets, directory, _RECORD, key="digest",
                                             prefix=".exact-dups-")
    handle, self._verdict_path = tempfile.mkstemp(prefix=".exact-dups-verdicts-", dir=directory)
    os.close(handle)
    self.count = 0
    self.starts = []  # first document number of each part added

  def add(self, part_path):
    """Numbers the documents of the part's index next and logs their digests."""
    self.starts.append(self.count)
    total = index_documents(part_path)
    for start in range(0, total, WINDOW):
      index = read_index(part_path, start, WINDOW)
      records = np.empty(len(index), _RECORD)
      records["digest"] = index["digest"]
      records["number"] = np.arange(self.count, self.count + len(index), dtype=np.uint64)
      self._buckets.add(records)
      self.count += len(index)

  def decide(self, drop_duplicates, seen=None):
    """Writes every document's verdict (module docstring). seen: a SeenManifest or None."""
    with open(self._verdict_path, "wb") as f:
      f.truncate(self.count)
    if not self.count:
      return
    for bucket in self._buckets.read():
      if not len(bucket):
        continue
      bucket = bucket[np.lexsort((bucket["number"], bucket["digest"]))]
      digests = bucket["digest"]
      verdict = np.full(len(bucket), KEPT, np.uint8)
      candidates = np.arange(len(bucket))
      if drop_duplicates:
        first = np.concatenate([[True], digests[1:] != digests[:-1]])
        verdict[~first] = DUPLICATE
        candidates = candidates[first]
      if seen is not None:
        verdict[candidates[seen.contains(digests[candidates])]] = SEEN
      verdicts = np.memmap(self._verdict_path, dtype=np.uint8, mode="r+", shape=(self.count,))
      try:
        verdicts[bucket["number"].astype(np.int64)] = verdict
        verdicts.flush()
      finally:
        del verdicts
    self._buckets.__exit__(None, None, None)  # decided: the digests are not needed any more

  def verdicts(self, part):
    """Yields uint8 arrays: the verdicts of the documents of the part-th part added, in order,
    a window at a time."""
    start = self.starts[part]
    stop = self.starts[part + 1] if part + 1 < len(self.starts) else self.count
    for window in range(start, stop, WINDOW):
      yield disk_arrays.read_window(self._verdict_path, np.uint8, (), window,
                                    min(WINDOW, stop - window))

  def __enter__(self):
    return self

  def __exit__(self, *exc_info):
    self._buckets.__exit__(*exc_info)
    if os.path.exists(self._verdict_path):
      os.remove(self._verdict_path)
    return False
