"""clean_corpus's near-duplicate pass (--near_dup_threshold J > 0): reprints kept once.

Workers (clean.clean_file_to_part, on any process or MPI rank) write the MinHash signature of every
document they keep beside its part file (SignatureWriter: PART + ".minhash", uint32 [docs,
num_perm], the same order as the part's lines), so the expensive hashing runs in parallel. The
process that assembles the output (clean.assemble, rank 0 under mpirun) then:
  1. NearDupPass.find reads the parts' signatures in input order, a window at a time, keeps
     those of the survivors of the exact filters (the run's exact_dups verdicts, which the
     writing pass applies too), numbers them after the earlier batches' documents
     (seen_signatures.py) and adds them to a near_dup_clusters.NearDupIndex (signatures and band
     keys on disk; where each survivor's line is, on disk too); its clusters (candidates near the
     threshold checked on their texts, read back from the parts and the earlier outputs) say
     which survivors go;
  2. the writing pass asks NearDupPass.is_removed(digest, record) for each survivor, in the same
     order: a removed document is counted as `near_duplicate` and gets a line in the report;
  3. with a seen manifest, NearDupPass.commit_signatures appends the signatures of the documents
     written (and where their lines start in the output, for exact checks by later batches; the
     writing pass logs them on disk, 24 bytes a document).
Memory: windows of the files above, one bucket, and per removed document its cluster entry (32
bytes) and, for the report, the id and source of its kept document until it is written.
Everything depends only on the documents and their order: the same output for any --processes and
any number of ranks.
"""
import json
import os
import struct

import numpy as np

from bert_fin import progress as progress_lib
from bert_fin.text.dedup import disk_arrays
from bert_fin.text.dedup import disk_buckets
from bert_fin.text.dedup import exact_dups
from bert_fin.text.dedup import near_dup
from bert_fin.text.dedup import near_dup_clusters
from bert_fin.text.dedup import seen_manifest
from bert_fin.text.dedup import seen_signatures

REASON_NEAR_DUPLICATE = "near_duplicate"
RECOMMENDED_THRESHOLD = 0.8
_BATCH = 256  # documents hashed together by a worker
_SIGNATURE_WINDOW = 1 << 13  # signatures read together (4 MB at num_perm 128)
_FAMILIES = {}
_SENTENCES_KEY = ', "sentences": '
_WRITTEN = np.dtype([("number", "<i8"), ("digest", "<u8"), ("offset", "<u8")])
_WRITTEN_RECORD = struct.Struct("<qQQ")


def signature_path(part_path):
  return part_path + ".minhash"


class SignatureWriter(disk_arrays.BatchedWriter):
  """Appends the signatures of document bodies to signature_path(part_path), _BATCH at a time."""

  def __init__(self, part_path, num_perm):
    super().__init__(signature_path(part_path), _BATCH)
    self.num_perm = num_perm
    if num_perm not in _FAMILIES:
      _FAMILIES[num_perm] = near_dup.hash_family(num_perm)

  def add(self, body):
    self._append(body)

  def _write(self, items, file):
    rows = near_dup.signatures(items, self.num_perm, _FAMILIES[self.num_perm])
    rows.astype("<u4", copy=False).tofile(file)


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


class NearDupPass(object):
  """Passes 1-3 of the module docstring for one assembly of part files. Use as a context manager
  (its scratch files live under work_dir and are removed on exit).

  config: clean.CleanConfig (near_dup_threshold > 0); seen: the run's SeenManifest or None;
  report: an open text file for the report lines, or None."""

  def __init__(self, config, seen, work_dir, progress=False, report=None):
    self.num_perm, self.threshold = config.near_dup_num_perm, config.near_dup_threshold
    self._seen, self._progress, self._report = seen, progress, report
    self._earlier = (seen_signatures.SeenSignatures(seen, self.num_perm) if seen is not None
                     else None)
    self._index = None  # made by find, once the number of documents is known
    self._work_dir = work_dir
    self._next = self._first_removable = 0
    self._removed = self._kept = self._similarity = self._jaccard = np.zeros([0], np.int64)
    self._at = 0  # position in self._removed
    self._kept_ids, self._wanted = {}, set()
    self._part_paths = []
    # survivors: int64 [n, 2] (part index, byte offset of the line), on disk
    self._locations = os.path.join(work_dir, ".near-dup-locations")
    # the documents written (with a seen manifest): _WRITTEN records, on disk
    self._written = self._written_ids = None
    self._output_bytes = 0  # where the next line starts in the output
    self.summary = {}

  def find(self, part_paths, log):
    """Pass 1 over the part files (in input order; log: the run's exact_dups.DigestLog, decided):
    which survivors of the exact filters go."""
    documents = (len(self._earlier) if self._earlier else 0) + sum(
        os.path.getsize(signature_path(path)) for path in part_paths) // (4 * self.num_perm)
    bands, _ = near_dup.lsh_params(self.threshold, self.num_perm)
    self._index = near_dup_clusters.NearDupIndex(
        self._work_dir, self.threshold, self.num_perm,
        disk_buckets.buckets_for(documents * bands * near_dup_clusters.KEY_BYTES))
    for rows in (self._earlier.signature_chunks() if self._earlier else ()):
      self._index.add(rows)
    self._first_removable = self._next = self._index.count
    sizes = [os.path.getsize(path) for path in part_paths]
    bar = progress_lib.ByteProgress(sum(sizes), "near-dup signatures", self._progress)
    with bar, open(self._locations, "wb") as locations:
      for part, (path, size) in enumerate(zip(part_paths, sizes)):
        self._add_part(part, path, log.verdicts(part), locations)
        progress_lib.add(bar.counter, size)
    self._part_paths = list(part_paths)
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
      self._written = open(os.path.join(self._work_dir, ".near-dup-written"), "wb")
      self._written_ids = open(os.path.join(self._work_dir, ".near-dup-written-ids"), "w",
                               encoding="utf-8")

  def _add_part(self, part, path, verdicts, locations):
    """Adds the signatures of one part's survivors (KEPT verdicts) to the index, a window at a
    time, and their locations to the open file `locations`; removes the signature file."""
    start = 0
    for window in verdicts:
      for first in range(0, len(window), _SIGNATURE_WINDOW):
        keep = window[first:first + _SIGNATURE_WINDOW] == exact_dups.KEPT
        rows = disk_arrays.read_window(signature_path(path), "<u4", (self.num_perm,), start,
                                       len(keep))
        offsets = exact_dups.read_index(path, start, len(keep))["offset"]
        if len(rows) != len(keep) or len(offsets) != len(keep):
          raise RuntimeError("%s: %d signatures and %d index entries for %d documents" % (
              path, len(rows), len(offsets), len(keep)))
        self._index.add(rows[keep])
        np.stack([np.full(int(keep.sum()), part), offsets[keep].astype(np.int64)],
                 1).astype("<i8").tofile(locations)
        start += len(keep)
    if os.path.getsize(signature_path(path)) != 4 * self.num_perm * start:
      raise RuntimeError("%s: more signatures than its %d documents" % (path, start))
    os.remove(signature_path(path))  # the index keeps its own copy

  def _texts(self, numbers):
    """The texts of document numbers (int64 [k], ascending) from the part files, or for the
    documents of earlier batches from their outputs (None where that is gone or changed)."""
    earlier = numbers[numbers < self._first_removable]
    texts = self._earlier.texts(earlier) if self._earlier is not None else {}
    found = [texts.get(number) for number in earlier.tolist()]
    locations = disk_arrays.read_rows(self._locations, "<i8", (2,),
                                      numbers[len(earlier):] - self._first_removable)
    handles = {}
    try:
      for part, offset in locations.tolist():
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
      self._written.write(_WRITTEN_RECORD.pack(number, seen_manifest.digest_to_int(digest),
                                               self._output_bytes))
      self._output_bytes += len(record.encode("utf-8"))
      seen_signatures.write_ids(self._written_ids, *pair)
    return False

  def commit_signatures(self, output_path):
    """Pass 3 (with a seen manifest, once the output is in place, before the manifest's own
    append): the written documents' signatures join the signature file. Returns how many."""
    if self._written_ids is None:
      return 0
    self._written.close()
    if not os.path.getsize(self._written.name):
      return 0
    self._written_ids.flush()
    written = _Written(self._written.name)
    return seen_signatures.append_block(
        self._seen, self.num_perm, written.column("number", self._index.signature_rows),
        written.column("digest"), written.column("offset"), output_path,
        self._written_ids.name)

  def __enter__(self):
    return self

  def __exit__(self, *exc_info):
    for handle in (self._written, self._written_ids):
      if handle is not None:
        handle.close()
        os.remove(handle.name)
    if os.path.exists(self._locations):
      os.remove(self._locations)
    return self._index.__exit__(*exc_info) if self._index is not None else False


class _Written(object):
  """The records NearDupPass wrote for each document written (_WRITTEN: document number,
  content hash, where its line starts in the output), read back a window at a time."""

  def __init__(self, path):
    self.path = path
    self.count = os.path.getsize(path) // _WRITTEN.itemsize

  def column(self, field, transform=None):
    return _Column(self, field, transform)


class _Column(object):
  """One field of _Written, sliced lazily ([start:stop] reads those records only), through
  `transform` (e.g. document numbers -> their signature rows)."""

  def __init__(self, written, field, transform=None):
    self._written, self._field, self._transform = written, field, transform

  def __len__(self):
    return self._written.count

  def __getitem__(self, window):
    start, stop, _ = window.indices(len(self))
    values = disk_arrays.read_window(self._written.path, _WRITTEN, (), start,
                                     max(0, stop - start))[self._field]
    return self._transform(values) if self._transform else values
