"""The cleaning pipeline: raw input files -> JSON Lines of clean, sentence-split documents + stats.

Output (one document per line, the format create_pretraining_data reads):
  {"id": "<path>#<index>", "source": "<path>", "sentences": ["...", ...]}
Stats (JSON): documents_in == documents_out + sum(filtered.values()) always holds (checked at the
end of every run); characters_in counts decoded characters of the raw documents (HTML markup
included), characters_out the characters of the kept sentences; bytes_in, decode_errors
(undecodable and NUL bytes, dropped), fallback_decoded_lines (lines that only decoded in the other
of UTF-8 / GB18030 than their file's), encodings (files per detected codec), noise_runs_removed,
boilerplate_lines_removed, sentences_out.

Parallelism: one task per input file, `Pool.imap` in input order, so the output order does not
depend on the process count. Each worker streams its file into a part file (one line per kept
document, prefixed with its 8-byte digest) and an index beside it; as the parts arrive the parent
logs their digests, then decides the exact duplicates across the corpus on disk (exact_dups.py)
and concatenates the part files in order, dropping them. No state in memory grows with the
corpus: the digests, the boilerplate pass's line counts (line_counts.py) and the optional
near-duplicate pass's signatures, band keys and clusters (near_dup_threshold > 0: the workers hash
each kept document beside its part, clean_near_dup.py) are all in files beside the output, read
a bucket or a window at a time. Disk beside the output while it runs: the parts (about the
output's size) + 33 bytes a document (+ ~790 with the near-duplicate pass at num_perm 128).
"""
import collections
import contextlib
import dataclasses
import json
import multiprocessing
import os
import sys
import tempfile

import numpy as np

from bert_fin import io_utils
from bert_fin import progress as progress_lib
from bert_fin.text.dedup import clean_near_dup
from bert_fin.text.dedup import disk_arrays
from bert_fin.text.dedup import disk_buckets
from bert_fin.text.dedup import exact_dups
from bert_fin.text import raw_documents
from bert_fin.text import filters
from bert_fin.text import html
from bert_fin.text import line_counts
from bert_fin.text.dedup import near_dup
from bert_fin.text import normalize
from bert_fin.text.dedup import seen_manifest
from bert_fin.text import sentences as sentence_lib


@dataclasses.dataclass(frozen=True)
class CleanConfig:
  """Everything a worker needs; picklable."""
  filter_config: filters.FilterConfig = filters.FilterConfig()
  text_format: str = "blank_line"
  text_field: str = "text"
  max_sentence_chars: int = 256
  drop_boilerplate_html: bool = True
  drop_tables: bool = False
  near_dup_threshold: float = 0.0  # 0: off (clean_near_dup.py)
  near_dup_num_perm: int = near_dup.DEFAULT_NUM_PERM


class CleanStats:
  """Counters of one run (or one file); `merge` adds another; `to_json` is the stats file body."""

  COUNTERS = ("documents_in", "documents_out", "characters_in", "characters_out", "bytes_in",
              "decode_errors", "files", "sentences_out", "noise_runs_removed",
              "boilerplate_lines_removed", "fallback_decoded_lines")

  def __init__(self):
    for name in self.COUNTERS:
      setattr(self, name, 0)
    self.filtered = collections.Counter()
    self.encodings = collections.Counter()
    self.fields_without_text = collections.Counter()  # raw_documents.record_fields
    self.near_dup = None  # clean_near_dup.NearDupPass.summary of the run, when it ran

  def merge(self, other):
    for name in self.COUNTERS:
      setattr(self, name, getattr(self, name) + getattr(other, name))
    self.filtered.update(other.filtered)
    self.encodings.update(other.encodings)
    self.fields_without_text.update(other.fields_without_text)

  def check_accounting(self):
    """Raises RuntimeError unless documents_in == documents_out + sum(filtered)."""
    total = self.documents_out + sum(self.filtered.values())
    if self.documents_in != total:
      raise RuntimeError("document accounting broken: in=%d, out=%d + filtered=%d" %
                         (self.documents_in, self.documents_out, sum(self.filtered.values())))

  def to_json(self):
    result = {name: getattr(self, name) for name in self.COUNTERS}
    result["filtered"] = dict(sorted(self.filtered.items()))
    result["encodings"] = dict(sorted(self.encodings.items()))
    return result


# what to change when every document of a run is filtered for this reason
_FIX = {
    filters.REASON_TOO_SHORT: "lower --min_chars",
    filters.REASON_LOW_CJK_RATIO: "lower --min_cjk_ratio for text that is not mostly Chinese",
    filters.REASON_BAD_JSON: "*.jsonl/*.json files are read as JSON Lines: rename plain text files",
    filters.REASON_BINARY: "the input is not text",
    filters.REASON_EMPTY: "the input is empty",
    filters.REASON_UNREADABLE: "the input cannot be read",
}


def check_documents_out(stats, config):
  """Raises ValueError when documents were read and none is kept, saying why: a JSONL text field
  that is not there (naming the fields the documents have and the --text_field to pass), input
  that is not text, or filters too strict for it. Not an error: every document already in the
  seen manifest (that batch is done, copies of them count as duplicates, near ones too)."""
  if stats.documents_out or set(stats.filtered) <= {seen_manifest.REASON_SEEN,
                                                    filters.REASON_DUPLICATE,
                                                    clean_near_dup.REASON_NEAR_DUPLICATE}:
    return
  missing = stats.filtered.get(filters.REASON_NO_TEXT_FIELD, 0)
  if missing:
    fields = stats.fields_without_text
    likely = raw_documents.likely_text_field(fields)
    raise ValueError(
        "no document written: %d of %d JSONL document(s) have no %r field (fields seen: %s); "
        "pass --text_field %s" % (
            missing, stats.documents_in, config.text_field, ", ".join(sorted(fields)) or "none",
            likely or "FIELD with the field that holds the text"))
  reasons = ", ".join("%s: %d" % item for item in sorted(stats.filtered.items()))
  fixes = [_FIX[reason] for reason in sorted(stats.filtered) if reason in _FIX]
  raise ValueError("no document written: all %d input document(s) were filtered (%s)%s" % (
      stats.documents_in, reasons, "; " + "; ".join(fixes) if fixes else ""))


def extract_text(raw, config):
  """RawDocument -> normalised text (paragraphs separated by '\\n')."""
  text = raw.text
  if raw.kind == "html":
    text = html.html_to_text(text, drop_boilerplate=config.drop_boilerplate_html,
                             drop_tables=config.drop_tables)
  return normalize.normalize_text(text)


def clean_document(raw, config, frequent_lines=frozenset()):
  """RawDocument -> (reason or None, sentences, counters dict). Pure apart from its arguments."""
  counts = {"noise_runs_removed": 0, "boilerplate_lines_removed": 0}
  if raw.reject:
    return raw.reject, [], counts
  text = extract_text(raw, config)
  text, counts["boilerplate_lines_removed"] = filters.remove_boilerplate_lines(text, frequent_lines)
  text, counts["noise_runs_removed"] = filters.remove_noise_runs(
      text, config.filter_config.min_noise_run, config.filter_config.remove_urls)
  text = normalize.collapse_whitespace(text)
  reason = filters.first_rejection(text, config.filter_config)
  if reason:
    return reason, [], counts
  sentences = sentence_lib.split_sentences(text, config.max_sentence_chars)
  if not sentences:
    return filters.REASON_EMPTY, [], counts
  return None, sentences, counts


def document_record(raw, sentences):
  return {"id": raw.id, "source": raw.source, "sentences": sentences}


# ---- worker side -------------------------------------------------------------------------------
_WORKER = {}


def _init_worker(config, frequent_lines, progress_counter=None):
  _WORKER["config"] = config
  _WORKER["frequent_lines"] = frequent_lines
  _WORKER["progress"] = progress_counter


def _documents_with_progress(reader):
  """Iterates reader's documents, adding the bytes read to the shared progress counter."""
  counter, reported = _WORKER.get("progress"), 0
  for raw in reader:
    yield raw
    position = reader.bytes_read()
    progress_lib.add(counter, position - reported)
    reported = position
  progress_lib.add(counter, reader.bytes_in - reported)


def clean_file_to_part(task):
  """(path, part_path) -> CleanStats of the file; kept documents go to part_path as
  `<digest hex>\t<chars>\t<sentences>\t<json>` lines, in input order, with the part's index
  beside it (exact_dups.IndexWriter: digest and byte offset of each line) and, with the
  near-duplicate pass, their signatures (clean_near_dup.SignatureWriter). A document whose
  cleaning raises (e.g. RecursionError on absurdly nested HTML) is counted as `clean_error` and
  reported on stderr; the run goes on."""
  path, part_path = task
  config, frequent = _WORKER["config"], _WORKER["frequent_lines"]
  stats = CleanStats()
  stats.files = 1
  reader = raw_documents.FileReader(path, config.text_format, config.text_field)
  signatures = (clean_near_dup.SignatureWriter(part_path, config.near_dup_num_perm)
                if config.near_dup_threshold > 0 else None)
  offset = 0
  with open(part_path, "wb") as part, exact_dups.IndexWriter(part_path) as index, \
      signatures or contextlib.nullcontext():
    for raw in _documents_with_progress(reader):
      stats.documents_in += 1
      stats.characters_in += len(raw.text)
      try:
        reason, sentences, counts = clean_document(raw, config, frequent)
      except Exception as error:  # pylint: disable=broad-except
        print("warning: %s: %s: %s" % (raw.id, type(error).__name__, error), file=sys.stderr)
        reason, sentences, counts = filters.REASON_CLEAN_ERROR, [], {}
      stats.noise_runs_removed += counts.get("noise_runs_removed", 0)
      stats.boilerplate_lines_removed += counts.get("boilerplate_lines_removed", 0)
      if reason:
        stats.filtered[reason] += 1
        continue
      body = "\n".join(sentences)
      digest = filters.digest64(body)
      line = ("%s\t%d\t%d\t%s\n" % (digest.hex(), len(body) - len(sentences) + 1, len(sentences),
                                     json.dumps(document_record(raw, sentences),
                                                ensure_ascii=False))).encode("utf-8")
      part.write(line)
      index.add(digest, offset)
      offset += len(line)
      if signatures is not None:
        signatures.add(body)
  stats.bytes_in = reader.bytes_in
  stats.decode_errors = reader.decode_errors
  stats.fallback_decoded_lines = reader.fallback_lines
  stats.encodings[reader.encoding or "unknown"] += 1
  stats.fields_without_text = reader.fields_without_text
  return stats


def count_file_lines(task):
  """(path, lines_path) -> documents read: writes, for each document of the file (not rejected),
  the distinct digests of its lines (filters.line_digest; uint64, each once per document) to
  lines_path and an index beside it (exact_dups.IndexWriter: the digest of the document's text,
  and where its lines start, in line digests): line_counts.LineCounter's input once
  frequent_lines_of has dropped repeated documents."""
  path, lines_path = task
  config = _WORKER["config"]
  start = documents = 0
  with exact_dups.IndexWriter(lines_path) as index, _LineDigestWriter(lines_path) as lines_file:
    for raw in _documents_with_progress(raw_documents.FileReader(path, config.text_format,
                                                                 config.text_field)):
      if not raw.reject:
        text = extract_text(raw, config)
        lines = {filters.line_digest(line) for line in text.split("\n") if line.strip()}
        index.add(filters.digest64(text), start)
        lines_file.add(b"".join(lines))
        start += len(lines)
        documents += 1
  return documents


class _LineDigestWriter(disk_arrays.BatchedWriter):
  """Appends the line digests (8-byte strings joined) of each document to a file."""

  def __init__(self, path):
    super().__init__(path, 1 << 12)

  def add(self, digests):
    self._append(digests)

  def _write(self, items, file):
    file.write(b"".join(items))


def _first_copies_lines(lines_path, verdicts):
  """Yields uint64 arrays: the line digests of the documents of one count_file_lines file whose
  verdict (windows of exact_dups verdicts, in order) is KEPT: a syndicated article repeated N
  times counts once, so only lines repeating inside otherwise different documents reach
  boilerplate_min_docs (the copies are left to the duplicate filter)."""
  total = os.path.getsize(lines_path) // 8
  start = 0
  for verdict in verdicts:
    index = exact_dups.read_index(lines_path, start, len(verdict))
    first = int(index["offset"][0]) if len(index) else total
    following = exact_dups.read_index(lines_path, start + len(verdict), 1)
    stop = int(following["offset"][0]) if len(following) else total
    counts = np.diff(np.append(index["offset"].astype(np.int64), stop))
    digests = disk_arrays.read_window(lines_path, "<u8", (), first, stop - first)
    yield digests[np.repeat(verdict == exact_dups.KEPT, counts)]
    start += len(verdict)


# ---- parent side -------------------------------------------------------------------------------
@contextlib.contextmanager
def task_runner(processes, config, frequent_lines, bar):
  """Yields map(fn, iterable) that runs in order: inline for 1 process, else a Pool.imap.
  bar: a progress.ByteProgress, shown once the workers exist (its counter goes to them)."""
  if processes <= 1:
    _init_worker(config, frequent_lines, bar.counter)
    with bar:
      yield map
    return
  normalize.warm_up()  # forked workers inherit the compiled tables
  context = multiprocessing.get_context("fork" if hasattr(os, "fork") else "spawn")
  with context.Pool(processes, initializer=_init_worker,
                    initargs=(config, frequent_lines, bar.counter)) as pool, bar:
    yield lambda fn, items: pool.imap(fn, items, chunksize=1)


def _input_bytes(paths):
  return sum(os.path.getsize(p) for p in paths if os.path.isfile(p))


def find_frequent_lines(paths, config, processes=1, progress=False, work_dir=None,
                        num_buckets=None):
  """First pass for the boilerplate filter: digests of lines in >= boilerplate_min_docs distinct
  documents (exact repeats of a document count once), counted in on-disk buckets under work_dir
  (line_counts.py: memory does not grow with the corpus). num_buckets: None =
  line_counts.buckets_for(the inputs' size)."""
  min_docs = config.filter_config.boilerplate_min_docs
  if min_docs <= 0:
    return frozenset()
  bar = progress_lib.ByteProgress(_input_bytes(paths), "boilerplate", progress)
  with io_utils.work_dir(work_dir or tempfile.gettempdir(), "line-counts-") as scratch:
    tasks = line_tasks(paths, scratch)
    with task_runner(processes, config, frozenset(), bar) as run:
      documents = list(run(count_file_lines, tasks))
    return frequent_lines_of(tasks, documents, _input_bytes(paths), min_docs, scratch,
                             num_buckets)


def line_tasks(paths, directory):
  """count_file_lines' tasks: (input path, its line digest file in directory), in input order."""
  return [(path, os.path.join(directory, "%08d.lines" % i)) for i, path in enumerate(paths)]


def frequent_lines_of(tasks, documents, input_bytes, min_docs, work_dir, num_buckets=None):
  """The boilerplate filter's frequent line digests from the files count_file_lines wrote for
  `tasks` (documents: what each returned), in input order: the first copy of a document counts
  (exact_dups decides which, on disk; _first_copies_lines); each file is removed once read."""
  if num_buckets is None:
    num_buckets = line_counts.buckets_for(input_bytes)
  with exact_dups.DigestLog(work_dir, num_buckets) as log, \
      line_counts.LineCounter(num_buckets, work_dir) as counter:
    for (_, lines_path), count in zip(tasks, documents):
      log.add(lines_path)
      if exact_dups.index_documents(lines_path) != count:
        raise RuntimeError("%s: %d documents indexed of %d read" % (
            lines_path, exact_dups.index_documents(lines_path), count))
    log.decide(drop_duplicates=True)
    for part, (_, lines_path) in enumerate(tasks):
      for digests in _first_copies_lines(lines_path, log.verdicts(part)):
        counter.add(digests)
      for path in (lines_path, exact_dups.index_path(lines_path)):
        os.remove(path)
    return counter.frequent(min_docs)


def clean_corpus(inputs, output_path, stats_path=None, config=CleanConfig(), processes=1,
                 progress=False, seen_manifest_path=None, near_dup_report=None):
  """Cleans INPUT files/dirs/globs into output_path (JSONL, atomic); returns the stats dict.

  seen_manifest_path: optional seen manifest (seen_manifest.py): documents already in it are
  skipped (reason "seen_in_manifest"); the kept ones are appended once the output is in place.
  near_dup_report: with config.near_dup_threshold > 0, a JSON Lines file of the near duplicates
  removed (clean_near_dup.py), written atomically.
  """
  paths = raw_documents.expand_inputs(inputs)
  seen = seen_manifest.SeenManifest(seen_manifest_path) if seen_manifest_path else None
  output_dir = os.path.dirname(os.path.abspath(output_path))
  os.makedirs(output_dir, exist_ok=True)
  frequent = find_frequent_lines(paths, config, processes, progress, work_dir=output_dir)
  with io_utils.work_dir(output_dir, "clean-parts-") as part_dir:
    tasks = part_tasks(paths, part_dir)
    bar = progress_lib.ByteProgress(_input_bytes(paths), "clean", progress)
    with digest_log(tasks) as log:
      with task_runner(processes, config, frequent, bar) as run:
        stats = collect(tasks, run(clean_file_to_part, tasks), log)  # as each part is made
      stats = write_output(tasks, stats, log, output_path, config, seen, near_dup_report,
                           progress)
  return finish(stats, paths, frequent, processes, stats_path, seen, seen_manifest_path)


def part_tasks(paths, part_dir):
  """clean_file_to_part's tasks: (input path, its part file in part_dir), in input order."""
  return [(path, os.path.join(part_dir, "%08d.part" % i)) for i, path in enumerate(paths)]


def digest_log(tasks):
  """An exact_dups.DigestLog beside the part files of `tasks`, its buckets sized for their
  inputs (a document of at least 16 input bytes: at most as many bytes of records as input)."""
  directory = os.path.dirname(tasks[0][1]) if tasks else "."
  input_bytes = sum(os.path.getsize(path) for path, _ in tasks if os.path.isfile(path))
  return exact_dups.DigestLog(directory, disk_buckets.buckets_for(input_bytes))


def collect(tasks, file_stats, log):
  """Adds the parts of `tasks` to `log` (an exact_dups.DigestLog) as their CleanStats arrive,
  in order; returns the run's CleanStats so far (documents_out and the dedup reasons not yet
  counted)."""
  stats = CleanStats()
  for (_, part_path), one_file in zip(tasks, file_stats):
    stats.merge(one_file)
    log.add(part_path)
  return stats


def assemble(tasks, file_stats, output_path, config, seen=None, near_dup_report=None,
             progress=False):
  """Writes the parts of `tasks` (every one made; file_stats: the CleanStats of each task, in
  order) to output_path: collect + write_output. Returns the run's CleanStats."""
  with digest_log(tasks) as log:
    stats = collect(tasks, file_stats, log)
    return write_output(tasks, stats, log, output_path, config, seen, near_dup_report, progress)


def write_output(tasks, stats, log, output_path, config, seen=None, near_dup_report=None,
                 progress=False):
  """Writes the parts of `tasks` (in order, each removed once copied; all in `log`) to
  output_path atomically, dropping repeated documents, those of the seen manifest
  (exact_dups.DigestLog.decide) and, with config.near_dup_threshold > 0, near duplicates
  (clean_near_dup.NearDupPass: a first pass over the parts; near_dup_report: its report file).
  Returns `stats` with the output counted."""
  log.decide(config.filter_config.drop_duplicates, seen)
  with contextlib.ExitStack() as stack:
    near = None
    if config.near_dup_threshold > 0:
      report = (stack.enter_context(io_utils.atomic_output(near_dup_report))
                if near_dup_report else None)
      near = stack.enter_context(clean_near_dup.NearDupPass(
          config, seen, os.path.dirname(tasks[0][1]) if tasks else ".", progress, report))
      near.find([part_path for _, part_path in tasks], log)
    with io_utils.atomic_output(output_path) as out:
      for part, (_, part_path) in enumerate(tasks):
        _append_part(part_path, out, stats, log.verdicts(part), seen, near)
        for path in (part_path, exact_dups.index_path(part_path)):
          os.remove(path)
      check_documents_out(stats, config)  # raising here leaves no output and no stats
    if near is not None:  # the output is in place: the signatures go before the manifest's block
      stats.near_dup = dict(near.summary, signatures_added=near.commit_signatures(output_path),
                            report=near_dup_report)
  return stats


def finish(stats, paths, frequent, processes, stats_path, seen=None, seen_manifest_path=None):
  """Checks the accounting, commits the seen manifest, writes the stats JSON; returns it."""
  stats.check_accounting()
  result = stats.to_json()
  if seen is not None:
    result["seen_manifest"] = {"path": seen_manifest_path, "known_before": len(seen),
                               "added": seen.commit()}
  result["processes"] = processes
  result["inputs"] = len(paths)
  result["frequent_boilerplate_lines"] = len(frequent)
  if stats.near_dup is not None:
    result["near_dup"] = stats.near_dup
  if stats_path:
    io_utils.write_json_atomic(stats_path, result)
  return result


_REASONS = {exact_dups.DUPLICATE: filters.REASON_DUPLICATE,
            exact_dups.SEEN: seen_manifest.REASON_SEEN}


def _append_part(part_path, out, stats, verdicts, seen=None, near=None):
  """Copies one worker part file to `out`, counting documents and dropping those whose verdict
  (exact_dups: uint8 arrays, a window at a time, in the part's order) is not KEPT and the near
  duplicates `near` finds, if any; the others' hashes go to the seen manifest `seen`."""
  with open(part_path, encoding="utf-8") as part:
    verdict_values = (value for window in verdicts for value in window.tolist())
    for line, verdict in zip(part, verdict_values):
      if verdict != exact_dups.KEPT:
        stats.filtered[_REASONS[verdict]] += 1
        continue
      digest_hex, chars, num_sentences, record = line.split("\t", 3)
      digest = bytes.fromhex(digest_hex)
      if seen is not None:
        seen.add(digest)
      if near is not None and near.is_removed(digest, record):
        stats.filtered[clean_near_dup.REASON_NEAR_DUPLICATE] += 1
        continue
      out.write(record)
      stats.documents_out += 1
      stats.characters_out += int(chars)
      stats.sentences_out += int(num_sentences)
