"""Near-duplicate clusters of a corpus from its MinHash signatures, in bounded memory.

  with NearDupIndex(work_dir, threshold, num_perm) as index:
    index.add(signature_rows)          # uint32 [n, num_perm], documents numbered 0, 1, ... in order
    result = index.clusters(first_removable)

Documents are numbered in input order as they are added (a seen manifest's earlier batches first).
Their signatures go to one file on disk (read back by row, np.memmap) and their LSH band keys
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
Memory: one bucket, the kept candidate pairs (16 bytes each: about as many as there are
near-duplicate pairs, not documents) and the union-find entries of documents in verified pairs.
"""
import dataclasses
import os
import tempfile

import numpy as np

from bert_fin import progress as progress_lib
from bert_fin.text.dedup import disk_buckets
from bert_fin.text.dedup import near_dup

_KEY_DTYPE = np.dtype([("key", "<u8"), ("doc", "<u8")])
KEY_BYTES = _KEY_DTYPE.itemsize  # on disk per document and band
_VERIFY_CHUNK = 1 << 16


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


class _UnionFind(object):
  """Union-find over the documents met in verified pairs (a dict, not a corpus-sized array); the
  root of a set is its smallest member."""

  def __init__(self):
    self.parent = {}

  def find(self, item):
    parent = self.parent
    root = item
    while parent.get(root, root) != root:
      root = parent[root]
    while item != root:  # path compression
      parent[item], item = root, parent[item]
    return root

  def union(self, left, right):
    left, right = self.find(left), self.find(right)
    if left != right:
      self.parent[max(left, right)] = min(left, right)
      self.parent.setdefault(min(left, right), min(left, right))


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


def _estimate(pairs, signatures):
  """float64 [len(pairs)]: estimated Jaccard similarity of each pair from their signatures."""
  if not len(pairs):
    return np.zeros([0])
  return near_dup.similarity(signatures[pairs[:, 0]], signatures[pairs[:, 1]])


def _exact(pairs, texts):
  """float64 [len(pairs)]: exact Jaccard similarity of each pair's texts, NaN where texts is None
  or has not got one of them."""
  result = np.full(len(pairs), np.nan)
  if texts is None or not len(pairs):
    return result
  docs = np.unique(pairs).tolist()
  found = [(doc, text) for doc, text in zip(docs, texts(np.array(docs, np.int64)))
           if text is not None]
  sets = dict(zip([doc for doc, _ in found],
                  near_dup.shingle_sets([text for _, text in found])))
  for i, (left, right) in enumerate(pairs.tolist()):
    if left in sets and right in sets:
      result[i] = near_dup.set_jaccard(sets[left], sets[right])
  return result


class NearDupIndex(object):
  """Signatures and band keys of numbered documents on disk under `directory` (see the module
  docstring). Use as a context manager (the files are removed on exit)."""

  def __init__(self, directory, threshold, num_perm=near_dup.DEFAULT_NUM_PERM, num_buckets=16):
    self.threshold = threshold
    self.num_perm = num_perm
    self.bands, self.rows = near_dup.lsh_params(threshold, num_perm)
    self.count = 0
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

  def signatures(self):
    """uint32 [count, num_perm] memmap of every added signature (read-only)."""
    self._signature_file.flush()
    if not self.count:
      return np.zeros((0, self.num_perm), np.uint32)
    return np.memmap(self._signature_path, dtype="<u4", mode="r",
                     shape=(self.count, self.num_perm))

  def clusters(self, first_removable=0, progress=False, texts=None, measure_kept=False):
    """Clusters of the documents added (see the module docstring) -> Clusters. progress: a bar
    over the bucket bytes, with an ETA. texts: None, or a function of int64 [k] document numbers
    -> k texts (None for one it does not have). measure_kept: also the exact similarity of each
    removed document with its kept one (Clusters.jaccard, else NaN)."""
    signatures = self.signatures()
    counts = {"candidate_pairs": 0, "exact_checks": 0, "verified_pairs": 0}
    floor = self.threshold - (near_dup.verification_margin(self.threshold, self.num_perm)
                              if texts is not None else 0.0)
    plausible = [np.zeros((0, 2), np.int64)]
    bar = progress_lib.ByteProgress(sum(self._buckets.sizes()), "near-dup clusters", progress)
    with bar:
      for bucket in self._buckets.read():
        pairs = candidate_pairs(bucket)
        for start in range(0, len(pairs), _VERIFY_CHUNK):
          chunk = pairs[start:start + _VERIFY_CHUNK]
          counts["candidate_pairs"] += len(chunk)
          plausible.append(chunk[_estimate(chunk, signatures) >= floor])
        progress_lib.add(bar.counter, bucket.nbytes)
    # a pair sharing several bands is met in several buckets: checked once, in document order
    plausible = np.unique(np.concatenate(plausible), axis=0)
    union_find = _UnionFind()
    for start in range(0, len(plausible), _VERIFY_CHUNK):
      chunk = plausible[start:start + _VERIFY_CHUNK]
      apart = np.array([union_find.find(left) != union_find.find(right)
                        for left, right in chunk.tolist()], bool)
      chunk = chunk[apart]
      for left, right in chunk[self._verify(chunk, signatures, texts, counts)].tolist():
        union_find.union(left, right)
    members = np.array(sorted(union_find.parent), np.int64)
    roots = np.array([union_find.find(member) for member in members.tolist()], np.int64)
    removed_mask = (roots != members) & (members >= first_removable)
    removed, kept = members[removed_mask], roots[removed_mask]
    pairs = np.stack([kept, removed], 1)
    return Clusters(removed, kept, _estimate(pairs, signatures),
                    _exact(pairs, texts if measure_kept else None), **counts)

  def _verify(self, pairs, signatures, texts, counts):
    """bool [len(pairs)]: the pairs that are near duplicates (see the module docstring)."""
    estimate = _estimate(pairs, signatures)
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
