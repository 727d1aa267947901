"""clean_corpus's near-duplicate pass (--near_dup_threshold J > 0): reprints kept once.

Workers (clean.clean_file_to_part, on any process or MPI rank) write the MinHash signature of every
document they keep beside its part file (SignatureWriter: PART + ".minhash", uint32 [docs,
num_perm], the same order as the part's lines), so the expensive hashing runs in parallel. The
process that assembles the output (clean.assemble, rank 0 under mpirun) then:
  1. NearDupPass.find reads the parts in input order, drops exact duplicates and seen-manifest
     documents exactly as the writing pass will, numbers the survivors after the earlier batches'
     documents (seen_signatures.py) and adds their signatures to a near_dup_clusters.NearDupIndex
     (band keys in on-disk buckets); its clusters (candidates near the threshold checked on their
     texts, read back from the parts and the earlier outputs) say which survivors go;
  2. the writing pass asks NearDupPass.is_removed(digest, record) for each survivor, in the same
     order: a removed document is counted as `near_duplicate` and gets a line in the report;
  3. with a seen manifest, NearDupPass.commit_signatures appends the signatures of the documents
     written (and where their lines start in the output, for exact checks by later batches).
Everything depends only on the documents and their order: the same output for any --processes and
any number of ranks.
"""
import array
import json
import os

import numpy as np

from bert_fin import progress as progress_lib
from bert_fin.text.dedup import disk_buckets
from bert_fin.text import filters
from bert_fin.text.dedup import near_dup
from bert_fin.text.dedup import near_dup_clusters
from bert_fin.text.dedup import seen_signatures

REASON_NEAR_DUPLICATE = "near_duplicate"
RECOMMENDED_THRESHOLD = 0.8
_BATCH = 256  # documents hashed together by a worker
_FAMILIES = {}
_SENTENCES_KEY = ', "sentences": '


def signature_path(part_path):
  return part_path + ".minhash"


class SignatureWriter(object):
  """Appends the signatures of document bodies to signature_path(part_path), _BATCH at a time."""

  def __init__(self, part_path, num_perm):
    self.num_perm = num_perm
    if num_perm not in _FAMILIES:
      _FAMILIES[num_perm] = near_dup.hash_family(num_perm)
    self._file = open(signature_path(part_path), "wb")
    self._pending = []

  def add(self, body):
    self._pending.append(body)
    if len(self._pending) >= _BATCH:
      self._flush()

  def _flush(self):
    if self._pending:
      rows = near_dup.signatures(self._pending, self.num_perm, _FAMILIES[self.num_perm])
      rows.astype("<u4", copy=False).tofile(self._file)
      self._pending = []

  def close(self):
    self._flush()
    self._file.close()

  def __enter__(self):
    return self

  def __exit__(self, *exc_info):
    self.close()
    return False


def part_lines(part_path):
  """(8-byte digests, int64 byte offsets) of a part file's documents, in order (the digest is
  the first field of each line)."""
  digests, offsets, offset = [], [], 0
  with open(part_path, "rb") as part:
    for line in part:
      digests.append(bytes.fromhex(line[:16].decode("ascii")))
      offsets.append(offset)
      offset += len(line)
  return digests, np.array(offsets, np.int64)


def read_body(handle, offset):
  """The text the worker hashed (sentences joined by newlines) of the part line at offset."""
  handle.seek(offset)
  record = json.loads(handle.readline().decode("utf-8").split("\t", 3)[3])
  return "\n".join(record["sentences"])


def record_id_and_source(record):
  """(id, source) of an output JSON line, without decoding its sentences: clean.document_record
  writes them first, and the key that follows cannot occur unescaped inside a JSON string."""
  head, separator, _ = record.partition(_SENTENCES_KEY)
  fields = json.loads(head + "}") if separator else json.loads(record)
  return fields["id"], fields["source"]


def surviving(digests, duplicates, drop_duplicates, seen):
  """bool [len(digests)]: which documents the writing pass keeps before the near-duplicate test
  (clean._append_part's order: exact duplicates first, then the seen manifest). `duplicates` (a
  filters.DuplicateFilter) remembers them; `seen` is only read."""
  keep = np.array([not (drop_duplicates and duplicates.seen(d)) for d in digests], bool)
  if seen is not None and keep.any():
    values = np.array([int.from_bytes(d, "little") for d in digests], np.uint64)
    keep &= ~seen.contains(values)
  return keep


class NearDupPass(object):
  """Passes 1-3 of the module docstring for one assembly of part files. Use as a context manager
  (its scratch files live under work_dir and are removed on exit).

  config: clean.CleanConfig (near_dup_threshold > 0); seen: the run's SeenManifest or None;
  report: an open text file for the report lines, or None."""

  def __init__(self, config, seen, work_dir, progress=False, report=None):
    self.num_perm, self.threshold = config.near_dup_num_perm, config.near_dup_threshold
    self._drop_duplicates = config.filter_config.drop_duplicates
    self._seen, self._progress, self._report = seen, progress, report
    self._earlier = (seen_signatures.SeenSignatures(seen, self.num_perm) if seen is not None
                     else None)
    self._index = None  # made by find, once the number of documents is known
    self._work_dir = work_dir
    self._next = self._first_removable = 0
    self._removed = self._kept = self._similarity = self._jaccard = np.zeros([0], np.int64)
    self._at = 0  # position in self._removed
    self._kept_ids, self._wanted = {}, set()
    self._part_paths, self._locations = [], []  # survivors: part index, byte offset
    # numbers and digests of the documents written, for the signature file
    self._written_numbers, self._written_digests = array.array("q"), array.array("Q")
    self._written_offsets, self._output_bytes = array.array("Q"), 0  # lines in the output
    self._written_ids = None
    self.summary = {}

  def find(self, part_paths):
    """Pass 1 over the part files (in input order): which survivors of the exact filters go."""
    documents = (len(self._earlier) if self._earlier else 0) + sum(
        os.path.getsize(signature_path(path)) for path in part_paths) // (4 * self.num_perm)
    bands, _ = near_dup.lsh_params(self.threshold, self.num_perm)
    self._index = near_dup_clusters.NearDupIndex(
        self._work_dir, self.threshold, self.num_perm,
        disk_buckets.buckets_for(documents * bands * near_dup_clusters.KEY_BYTES))
    for rows in (self._earlier.signature_chunks() if self._earlier else ()):
      self._index.add(rows)
    self._first_removable = self._next = self._index.count
    duplicates = filters.DuplicateFilter()
    sizes = [os.path.getsize(path) for path in part_paths]
    bar = progress_lib.ByteProgress(sum(sizes), "near-dup signatures", self._progress)
    with bar:
      for part, (path, size) in enumerate(zip(part_paths, sizes)):
        digests, offsets = part_lines(path)
        keep = surviving(digests, duplicates, self._drop_duplicates, self._seen)
        rows = np.fromfile(signature_path(path), "<u4").reshape(-1, self.num_perm)
        os.remove(signature_path(path))  # the index keeps its own copy
        if len(rows) != len(keep):
          raise RuntimeError("%s: %d signatures for %d documents" % (path, len(rows), len(keep)))
        self._index.add(rows[keep])
        self._locations.append(np.stack([np.full(int(keep.sum()), part), offsets[keep]], 1))
        progress_lib.add(bar.counter, size)
    self._part_paths = list(part_paths)
    self._locations = (np.concatenate(self._locations) if self._locations
                       else np.zeros((0, 2), np.int64))
    clusters = self._index.clusters(self._first_removable, self._progress, self._texts,
                                    measure_kept=self._report is not None)
    self._removed, self._kept, self._similarity = (clusters.removed, clusters.kept,
                                                   clusters.similarity)
    self._jaccard = clusters.jaccard
    kept_earlier = np.unique(self._kept[self._kept < self._first_removable])
    self._kept_ids = self._earlier.ids(kept_earlier) if self._earlier else {}
    self._wanted = set(self._kept[self._kept >= self._first_removable].tolist())
    self.summary = {"threshold": self.threshold, "num_perm": self.num_perm,
                    "bands": self._index.bands, "rows": self._index.rows,
                    "earlier_documents": self._first_removable,
                    "candidate_pairs": clusters.candidate_pairs,
                    "exact_checks": clusters.exact_checks,
                    "verified_pairs": clusters.verified_pairs}
    if self._seen is not None:
      self._written_ids = open(os.path.join(self._work_dir, ".near-dup-written-ids"), "w",
                               encoding="utf-8")

  def _texts(self, numbers):
    """The texts of document numbers (int64 [k], ascending) from the part files, or for the
    documents of earlier batches from their outputs (None where that is gone or changed)."""
    found, handles = [], {}
    earlier = (self._earlier.texts(numbers[numbers < self._first_removable])
               if self._earlier is not None else {})
    try:
      for number in numbers.tolist():
        if number < self._first_removable:
          found.append(earlier.get(number))
          continue
        part, offset = self._locations[number - self._first_removable].tolist()
        if part not in handles:
          handles[part] = open(self._part_paths[part], "rb")
        found.append(read_body(handles[part], offset))
    finally:
      for handle in handles.values():
        handle.close()
    return found

  def is_removed(self, digest, record):
    """Pass 2: called for each survivor of the exact filters, in input order, with its digest
    and JSON line; True when it is a near duplicate (its report line is written then)."""
    number = self._next
    self._next += 1
    removed = self._at < len(self._removed) and self._removed[self._at] == number
    if number in self._wanted or removed or self._written_ids is not None:
      pair = record_id_and_source(record)
      if number in self._wanted:
        self._kept_ids[number] = pair
    if removed:
      if self._report is not None:
        kept_id, kept_source = self._kept_ids[int(self._kept[self._at])]
        exact = float(self._jaccard[self._at])
        self._report.write(json.dumps({
            "id": pair[0], "source": pair[1], "kept_id": kept_id, "kept_source": kept_source,
            "similarity": round(float(self._similarity[self._at]), 4),
            "jaccard": None if np.isnan(exact) else round(exact, 4)}, ensure_ascii=False) + "\n")
      self._at += 1
      return True
    if self._written_ids is not None:
      self._written_numbers.append(number)
      self._written_digests.append(int.from_bytes(digest, "little"))
      self._written_offsets.append(self._output_bytes)
      self._output_bytes += len(record.encode("utf-8"))
      seen_signatures.write_ids(self._written_ids, *pair)
    return False

  def commit_signatures(self, output_path):
    """Pass 3 (with a seen manifest, once the output is in place, before the manifest's own
    append): the written documents' signatures join the signature file. Returns how many."""
    if self._written_ids is None or not self._written_numbers:
      return 0
    self._written_ids.flush()
    numbers = np.frombuffer(self._written_numbers, np.int64)
    digests = np.frombuffer(self._written_digests, np.uint64)
    return seen_signatures.append_block(self._seen, self.num_perm,
                                        _Rows(self._index.signatures(), numbers), digests,
                                        np.frombuffer(self._written_offsets, np.uint64),
                                        output_path, self._written_ids.name)

  def __enter__(self):
    return self

  def __exit__(self, *exc_info):
    if self._written_ids is not None:
      self._written_ids.close()
    return self._index.__exit__(*exc_info) if self._index is not None else False


class _Rows(object):
  """rows[numbers] sliced lazily: [start:stop] reads only those rows of the memmap."""

  def __init__(self, rows, numbers):
    self._rows, self._numbers = rows, numbers

  def __getitem__(self, window):
    return self._rows[self._numbers[window]]
