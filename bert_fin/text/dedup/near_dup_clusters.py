"""Near-duplicate clusters of a corpus from its MinHash signatures, in bounded memory.

  with NearDupIndex(work_dir, threshold, num_perm) as index:
    index.add(signature_rows)          # uint32 [n, num_perm], documents numbered 0, 1, ... in order
    result = index.clusters(first_removable)

Documents are numbered in input order as they are added (a seen manifest's earlier batches first).
Their signatures go to one file on disk (read back by row, a window at a time: disk_arrays) and
their LSH band keys
(near_dup.lsh_params for the threshold) to bucket files by the key's top bits
(disk_buckets.BucketFiles). `clusters` reads one bucket at a time: documents sharing a band key are
candidate pairs (each with the first of its group and with its predecessor). The pairs whose
estimated Jaccard similarity (full signature) is >= threshold - near_dup.verification_margin (when
a `texts` function can give texts; else >= threshold) are kept, then verified once each, in
document order: by their exact Jaccard similarity (>= threshold) when the estimate is within the
margin of the threshold (either side) and `texts` gives both texts, else by the estimate.
Verified pairs are joined by union-find whose root is always the smallest
number: the first document of a cluster in input order is kept, every other one numbered
>= first_removable is removed. The result does not depend on how the documents were split into
calls of `add`, nor on the bucket count.
Memory does not grow with the corpus: one bucket of band keys; the signature rows of
_ESTIMATE_CHUNK pairs; the plausible pairs spilled to bucket files of their smaller document's
number (8 bytes a pair on disk, read back one bucket at a time, so in document order); the
union-find forest in a file (8 bytes a document on disk, disk_arrays.UnionFind, touched a chunk at
a time); the texts of _EXACT_CHUNK pairs at a time. The result (Clusters) holds 32 bytes per
removed document.
"""
import dataclasses
import os
import tempfile

import numpy as np

from bert_fin import progress as progress_lib
from bert_fin.text.dedup import disk_arrays
from bert_fin.text.dedup import disk_buckets
from bert_fin.text.dedup import near_dup

_KEY_DTYPE = np.dtype([("key", "<u8"), ("doc", "<u8")])
KEY_BYTES = _KEY_DTYPE.itemsize  # on disk per document and band
_VERIFY_CHUNK = 1 << 16  # plausible pairs verified together (a window of document order)
_ESTIMATE_CHUNK = 1 << 12  # pairs whose signature rows are read together
_EXACT_CHUNK = 1 << 7  # pairs whose texts (and their shingles) are in memory together
_PAIR_BUCKETS = 16  # plausible pairs are about as many as near duplicates: few buckets


@dataclasses.dataclass
class Clusters:
  """removed: int64 [k] document numbers, ascending; kept: int64 [k] the kept document of each
  one's cluster (smaller number); similarity: float64 [k] their estimated Jaccard similarity;
  jaccard: float64 [k] their exact one (NaN where a text was not available);
  candidate_pairs / exact_checks / verified_pairs: counts of pairs compared, checked on their
  texts and joined."""
  removed: np.ndarray
  kept: np.ndarray
  similarity: np.ndarray
  jaccard: np.ndarray
  candidate_pairs: int = 0
  exact_checks: int = 0
  verified_pairs: int = 0


def candidate_pairs(bucket):
  """Records of one bucket (key, doc) -> int64 [pairs, 2] (smaller doc first), unique: every doc
  of a group of equal keys paired with the group's first doc and with the doc before it."""
  if len(bucket) < 2:
    return np.zeros((0, 2), np.int64)
  bucket = np.sort(bucket, order=("key", "doc"))
  keys, docs = bucket["key"], bucket["doc"].astype(np.int64)
  same = np.flatnonzero(keys[1:] == keys[:-1]) + 1  # positions continuing a group
  if not len(same):
    return np.zeros((0, 2), np.int64)
  starts = np.where(np.concatenate([[True], keys[1:] != keys[:-1]]), np.arange(len(keys)), 0)
  group_first = np.maximum.accumulate(starts)
  pairs = np.concatenate([np.stack([docs[same - 1], docs[same]], 1),
                          np.stack([docs[group_first[same]], docs[same]], 1)])
  pairs = pairs[pairs[:, 0] != pairs[:, 1]]
  return np.unique(np.sort(pairs, axis=1), axis=0)


def _pair_shift(count):
  """Bits to shift a document number left so that (left << shift) | right, for numbers below
  count, sorts as the pair (left, right) and falls in the bucket of left's top bits."""
  bits = max(1, (max(count, 2) - 1).bit_length())
  if bits > 32:
    raise ValueError("near-duplicate pass: %d documents, at most 2**32 supported" % count)
  return np.uint64(64 - bits)


def _pair_keys(pairs, shift):
  """int64 [n, 2] pairs (smaller first) -> uint64 [n] keys (_pair_shift)."""
  pairs = pairs.astype(np.uint64)
  return (pairs[:, 0] << shift) | pairs[:, 1]


def _pairs_of_keys(keys, shift):
  mask = (np.uint64(1) << shift) - np.uint64(1)
  return np.stack([keys >> shift, keys & mask], 1).astype(np.int64)


def _in_order(buckets, shift, size):
  """Yields int64 [<= size, 2]: the unique pairs of pair-key buckets in (left, right) order, in
  chunks of `size` (the last one shorter), whatever the bucket boundaries."""
  pending = np.zeros((0, 2), np.int64)
  for keys in buckets.read():
    pending = np.concatenate([pending, _pairs_of_keys(np.unique(keys), shift)])
    while len(pending) >= size:
      yield pending[:size]
      pending = pending[size:]
  if len(pending):
    yield pending


def _exact(pairs, texts):
  """float64 [len(pairs)]: exact Jaccard similarity of each pair's texts, NaN where texts is None
  or has not got one of them. The texts of _EXACT_CHUNK pairs are in memory at a time."""
  result = np.full(len(pairs), np.nan)
  if texts is None or not len(pairs):
    return result
  for start in range(0, len(pairs), _EXACT_CHUNK):
    chunk = pairs[start:start + _EXACT_CHUNK]
    docs = np.unique(chunk).tolist()
    found = [(doc, text) for doc, text in zip(docs, texts(np.array(docs, np.int64)))
             if text is not None]
    sets = dict(zip([doc for doc, _ in found],
                    near_dup.shingle_sets([text for _, text in found])))
    for i, (left, right) in enumerate(chunk.tolist()):
      if left in sets and right in sets:
        result[start + i] = near_dup.set_jaccard(sets[left], sets[right])
  return result


class NearDupIndex(object):
  """Signatures and band keys of numbered documents on disk under `directory` (see the module
  docstring). Use as a context manager (the files are removed on exit)."""

  def __init__(self, directory, threshold, num_perm=near_dup.DEFAULT_NUM_PERM, num_buckets=16):
    self.threshold = threshold
    self.num_perm = num_perm
    self.bands, self.rows = near_dup.lsh_params(threshold, num_perm)
    self.count = 0
    self._directory = directory
    self._buckets = disk_buckets.BucketFiles(num_buckets, directory, _KEY_DTYPE, key="key",
                                             prefix=".near-dup-")
    handle, self._signature_path = tempfile.mkstemp(prefix=".near-dup-signatures-", dir=directory)
    self._signature_file = os.fdopen(handle, "wb")

  def add(self, signature_rows):
    """Numbers the documents of uint32 [n, num_perm] next; spills their signatures and keys."""
    signature_rows = np.asarray(signature_rows, np.uint32).reshape(-1, self.num_perm)
    signature_rows.astype("<u4", copy=False).tofile(self._signature_file)
    docs = np.arange(self.count, self.count + len(signature_rows), dtype=np.uint64)
    self.count += len(signature_rows)
    with_shingles = near_dup.has_shingles(signature_rows)
    keys = near_dup.band_keys(signature_rows[with_shingles], self.bands, self.rows)
    records = np.empty(keys.size, _KEY_DTYPE)
    records["key"] = keys.reshape(-1)
    records["doc"] = np.repeat(docs[with_shingles], self.bands)
    self._buckets.add(records)

  @property
  def signature_path(self):
    """The file of every added signature: uint32 [count, num_perm], little-endian."""
    self._signature_file.flush()
    return self._signature_path

  def signature_rows(self, numbers):
    """uint32 [len(numbers), num_perm]: the signatures of the given document numbers."""
    return disk_arrays.read_rows(self.signature_path, "<u4", (self.num_perm,), numbers)

  def _estimate(self, pairs):
    """float64 [len(pairs)]: estimated Jaccard similarity of each pair from their signatures."""
    if not len(pairs):
      return np.zeros([0])
    docs, where = np.unique(pairs, return_inverse=True)
    rows = self.signature_rows(docs)
    where = where.reshape(pairs.shape)
    return near_dup.similarity(rows[where[:, 0]], rows[where[:, 1]])

  def _estimates(self, pairs):
    """_estimate a window of _ESTIMATE_CHUNK pairs at a time (their rows in memory)."""
    return np.concatenate([np.zeros([0])] + [
        self._estimate(pairs[start:start + _ESTIMATE_CHUNK])
        for start in range(0, len(pairs), _ESTIMATE_CHUNK)])

  def clusters(self, first_removable=0, progress=False, texts=None, measure_kept=False):
    """Clusters of the documents added (see the module docstring) -> Clusters. progress: a bar
    over the bucket bytes, with an ETA. texts: None, or a function of int64 [k] document numbers
    -> k texts (None for one it does not have). measure_kept: also the exact similarity of each
    removed document with its kept one (Clusters.jaccard, else NaN)."""
    counts = {"candidate_pairs": 0, "exact_checks": 0, "verified_pairs": 0}
    floor = self.threshold - (near_dup.verification_margin(self.threshold, self.num_perm)
                              if texts is not None else 0.0)
    shift = _pair_shift(self.count)
    bar = progress_lib.ByteProgress(sum(self._buckets.sizes()), "near-dup clusters", progress)
    with bar, disk_buckets.BucketFiles(_PAIR_BUCKETS, self._directory, np.uint64,
                                       prefix=".near-dup-pairs-") as plausible:
      for bucket in self._buckets.read():
        pairs = candidate_pairs(bucket)
        for start in range(0, len(pairs), _ESTIMATE_CHUNK):
          chunk = pairs[start:start + _ESTIMATE_CHUNK]
          counts["candidate_pairs"] += len(chunk)
          plausible.add(_pair_keys(chunk[self._estimate(chunk) >= floor], shift))
        progress_lib.add(bar.counter, bucket.nbytes)
      # a pair sharing several bands is met in several buckets: checked once, in document order
      union_find = disk_arrays.UnionFind(self._signature_path + ".union-find", self.count)
      try:
        for chunk in _in_order(plausible, shift, _VERIFY_CHUNK):
          chunk = chunk[union_find.roots(chunk[:, 0]) != union_find.roots(chunk[:, 1])]
          verified = chunk[self._verify(chunk, texts, counts)]
          union_find.union(verified[:, 0], verified[:, 1])
        removed, kept = [np.zeros([0], np.int64)], [np.zeros([0], np.int64)]
        for numbers, roots in union_find.non_roots():
          removable = numbers >= first_removable
          removed.append(numbers[removable])
          kept.append(roots[removable])
      finally:
        union_find.remove()
    removed, kept = np.concatenate(removed), np.concatenate(kept)
    pairs = np.stack([kept, removed], 1)
    return Clusters(removed, kept, self._estimates(pairs),
                    _exact(pairs, texts if measure_kept else None), **counts)

  def _verify(self, pairs, texts, counts):
    """bool [len(pairs)]: the pairs that are near duplicates (see the module docstring)."""
    estimate = self._estimates(pairs)
    similar = estimate >= self.threshold
    if texts is not None:  # the estimates that could be on the wrong side of the threshold
      margin = near_dup.verification_margin(self.threshold, self.num_perm)
      unsure = np.flatnonzero(np.abs(estimate - self.threshold) < margin)
      exact = _exact(pairs[unsure], texts)
      known = ~np.isnan(exact)
      similar[unsure[known]] = exact[known] >= self.threshold
      counts["exact_checks"] += int(known.sum())
    counts["verified_pairs"] += int(similar.sum())
    return similar

  def __enter__(self):
    return self

  def __exit__(self, *exc_info):
    self._signature_file.close()
    self._buckets.__exit__(*exc_info)
    if os.path.exists(self._signature_path):
      os.remove(self._signature_path)
    return False
