"""build_vocab's counting pass on several processes: word counts (the trainer's input) and
character counts (google_layout's ranking) of a corpus, the same for any process count.

  counts = count_corpus(paths, processes=4, input_format="auto", text_field="sentences",
                        do_lower_case=True, max_docs=0, sample=1.0)
  counts.words, counts.chars, counts.documents, counts.skipped

unk_counts(paths, vocab_file, ...) measures the [UNK] rate of a vocab over the first documents
the same way (build_vocab's report).

Work split: each input file is cut into byte ranges of about its size / (4 x processes) (at
least MIN_RANGE_BYTES, at most MAX_RANGE_BYTES: a worker's Counters hold the distinct chunks of
one range, so ranges of bounded size keep them bounded however large the file), each starting
right after a line end (JSON Lines: a document a line) or after a blank line (google's text
format: a document ends at a blank line), so every document lies in exactly one range. A
worker reads its range as the single-process reader reads the file (UTF-8 with errors replaced,
universal newlines: vocab.iter_sentences' reading, a range at a time) and counts it with
wordpiece_trainer.count_words and vocab.counting; the parent adds the Counters range by range, in
input order. Counting is a sum, so the totals, and the vocab trained from them, do not depend on
the number of processes or ranges (tested byte for byte).

Subsets, for a quick vocab of a huge corpus (docs/data.md has what they cost in [UNK] rate):
  max_docs N  the first N documents in input order (as vocab.iter_sentences(max_docs=N)): the
              parent counts the documents of the ranges in order (a fast scan, no JSON) until N,
              and the last range needed stops at its share (the ranges holding them are cut again
              into processes x 4 pieces when fewer, so every process reads a share);
  sample F    each document with probability F, decided by a hash of its text (its JSON line,
              or its first line in the text format): the same documents whatever the split,
              and a skipped one costs only reading it.
Memory: per process, the Counters (distinct words and characters, not the corpus) and a read
buffer.
"""
import collections
import dataclasses
import hashlib
import io
import json
import multiprocessing
import os

from bert_fin.text import corpus_format
from bert_fin.tokenization import vocab as vocab_lib
from bert_fin.tokenization import wordpiece_trainer

MIN_RANGE_BYTES = 1 << 20
MAX_RANGE_BYTES = 16 << 20
_RANGES_PER_PROCESS = 4


@dataclasses.dataclass
class CorpusCounts:
  """words: Counter {word: occurrences} (wordpiece_trainer.count_words); chars: Counter {char:
  occurrences} (vocab.counting); documents: documents counted; skipped: JSONL lines without the
  text field (or not JSON)."""
  words: collections.Counter = dataclasses.field(default_factory=collections.Counter)
  chars: collections.Counter = dataclasses.field(default_factory=collections.Counter)
  documents: int = 0
  skipped: int = 0

  def pop_words(self):
    """The word Counter, replaced here by an empty one: handed to wordpiece_trainer.train as
    its only reference, it is freed before the merges."""
    words, self.words = self.words, collections.Counter()
    return words

  def add(self, other):
    self.words.update(other.words)
    self.chars.update(other.chars)
    self.documents += other.documents
    self.skipped += other.skipped


@dataclasses.dataclass(frozen=True)
class Range:
  """Bytes [start, end) of one input file, whole documents; max_docs: stop after this many
  documents of the range (0: all)."""
  path: str
  start: int
  end: int
  jsonl: bool
  max_docs: int = 0


class _Window(io.RawIOBase):
  """The bytes [start, end) of a file as a raw stream (for io.TextIOWrapper)."""

  def __init__(self, path, start, end):
    super().__init__()
    self._file = open(path, "rb")  # pylint: disable=consider-using-with
    self._file.seek(start)
    self._left = end - start

  def readable(self):
    return True

  def readinto(self, buffer):
    size = min(len(buffer), self._left)
    if size <= 0:
      return 0
    data = self._file.read(size)
    buffer[:len(data)] = data
    self._left -= len(data)
    return len(data)

  def close(self):
    self._file.close()
    super().close()


def _lines(one_range):
  """The text lines of a range, decoded as vocab.iter_sentences decodes the file (a gzip file is
  one range: its whole content)."""
  if corpus_format.is_gzip(one_range.path):
    return corpus_format.open_text(one_range.path, errors="replace")
  return io.TextIOWrapper(io.BufferedReader(_Window(one_range.path, one_range.start,
                                                    one_range.end)),
                          encoding="utf-8", errors="replace")


def _boundary(handle, offset, jsonl, size):
  """The first document start at or after byte `offset` of an open binary file (size: its
  length): after the line end that follows offset (JSONL), or after the next blank line."""
  if offset <= 0:
    return 0
  handle.seek(offset - 1)
  handle.readline()  # the rest of the line holding offset - 1 (ends at offset when it was "\n")
  while not jsonl:
    line = handle.readline()
    if not line or not line.strip():
      break
  return min(handle.tell(), size)


def split_ranges(paths, processes, input_format="auto"):
  """[Range] covering every byte of the files in input order (module docstring)."""
  ranges = []
  for path in paths:
    size = os.path.getsize(path)
    jsonl = corpus_format.format_of(path, input_format) == corpus_format.JSONL
    pieces = max(processes * _RANGES_PER_PROCESS, -(-size // MAX_RANGE_BYTES))
    ranges += _split_range(Range(path, 0, size, jsonl), pieces)
  return ranges


def _documents(one_range):
  """Yields each document of a range as a list of lines: a JSON line as read, or the stripped
  non-blank lines of a text-format document."""
  lines = []
  with _lines(one_range) as reader:
    for line in reader:
      stripped = line.strip()
      if not stripped:
        if lines:
          yield lines
          lines = []
      elif one_range.jsonl:
        yield [line]
      else:
        lines.append(stripped)
  if lines:
    yield lines


def count_documents(one_range):
  """How many documents a range holds."""
  return sum(1 for _ in _documents(one_range))


def sampled(document, sample):
  """True when a document (its lines) is in the sample of share `sample` (a hash of its first
  line, so the same documents whatever the split)."""
  if sample >= 1.0:
    return True
  digest = hashlib.blake2b(document[0].strip().encode("utf-8"), digest_size=8).digest()
  return int.from_bytes(digest, "little") < sample * 2.0**64


def _sentences(one_range, text_field, sample, counts):
  """The sentences of a range's (sampled) documents, as vocab.iter_sentences gives them."""
  for document in _documents(one_range):
    if one_range.max_docs and counts.documents >= one_range.max_docs:
      return
    if not sampled(document, sample):
      continue
    counts.documents += 1
    if not one_range.jsonl:
      yield from document
      continue
    try:
      sentences = vocab_lib.field_sentences(json.loads(document[0]), text_field)
    except ValueError:
      sentences = None
    if sentences is None:
      counts.skipped += 1
      continue
    yield from sentences


def count_range(task):
  """(Range, text_field, do_lower_case, sample) -> its CorpusCounts."""
  one_range, text_field, do_lower_case, sample = task
  counts = CorpusCounts()
  counts.words = wordpiece_trainer.count_words(
      vocab_lib.counting(_sentences(one_range, text_field, sample, counts), counts.chars,
                         do_lower_case), do_lower_case)
  return counts


_TOKENIZERS = {}  # call -> vocab.GoogleTokenizer: one per process and unk_counts call


def unk_range(task):
  """(Range, text_field, vocab file, do_lower_case, call) -> (unk pieces, pieces, CorpusCounts
  of the documents read) of the range's sentences, tokenized as FullTokenizer does (the
  tokenizer built once per process and `call`, a key unique to one unk_counts call)."""
  one_range, text_field, vocab_file, do_lower_case, key = task
  if key not in _TOKENIZERS:
    _TOKENIZERS.clear()
    _TOKENIZERS[key] = vocab_lib.GoogleTokenizer(vocab_lib.read_vocab(vocab_file), do_lower_case,
                                                 vocab_file=vocab_file)
  counts = CorpusCounts()
  _, unk, total = vocab_lib.unk_rate(_TOKENIZERS[key],
                                     _sentences(one_range, text_field, 1.0, counts))
  return unk, total, counts


def _first_documents(ranges, max_docs):
  """The ranges that hold the first max_docs documents, the last one cut at its share."""
  kept, total = [], 0
  for one_range in ranges:
    documents = count_documents(one_range)
    if total + documents >= max_docs:
      kept.append(dataclasses.replace(one_range, max_docs=max_docs - total))
      return kept
    kept.append(one_range)
    total += documents
  return kept


def default_processes():
  """All usable cores."""
  try:
    return len(os.sched_getaffinity(0))
  except AttributeError:
    return os.cpu_count() or 1


def _run(function, tasks, processes):
  """function(task) for each task, in order: inline for one process or one task, else on a
  Pool of min(processes, tasks) forked processes."""
  if processes <= 1 or len(tasks) <= 1:
    yield from map(function, tasks)
    return
  context = multiprocessing.get_context("fork" if hasattr(os, "fork") else "spawn")
  with context.Pool(min(processes, len(tasks))) as pool:
    yield from pool.imap(function, tasks)


def _split_range(one_range, pieces):
  """one_range cut at document starts into at most `pieces` ranges of at least MIN_RANGE_BYTES
  (split_ranges cuts each file this way; _ranges cuts a range again)."""
  length = one_range.end - one_range.start
  if corpus_format.is_gzip(one_range.path):
    return [one_range]  # a gzip stream is not entered mid-way: one range, one process
  pieces = max(1, min(pieces, length // MIN_RANGE_BYTES))
  with open(one_range.path, "rb") as handle:
    starts = sorted({one_range.start} | {
        _boundary(handle, one_range.start + length * i // pieces, one_range.jsonl, one_range.end)
        for i in range(1, pieces)})
  return [Range(one_range.path, start, end, one_range.jsonl)
          for start, end in zip(starts, starts[1:] + [one_range.end]) if end > start]


def _ranges(paths, processes, input_format, max_docs):
  """The ranges to read: the whole inputs, or the ones holding the first max_docs documents.
  Those often lie in one or two ranges of the file split (the [UNK] pass reads 20000 documents
  of a corpus of millions), which would leave the other processes idle: they are cut again into
  processes x 4 pieces before the first max_docs documents are counted off."""
  ranges = split_ranges(paths, processes, input_format)
  if not max_docs:
    return ranges
  kept = _first_documents(ranges, max_docs)
  wanted = processes * _RANGES_PER_PROCESS
  if processes > 1 and len(kept) < wanted:
    finer = [piece for one_range in kept
             for piece in _split_range(dataclasses.replace(one_range, max_docs=0),
                                       -(-wanted // len(kept)))]
    kept = _first_documents(finer, max_docs)
  return kept


def count_corpus(paths, processes=0, input_format="auto", text_field="sentences",
                 do_lower_case=True, max_docs=0, sample=1.0):
  """CorpusCounts of the inputs (module docstring); processes 0: all usable cores."""
  processes = processes or default_processes()
  tasks = [(one_range, text_field, do_lower_case, sample)
           for one_range in _ranges(paths, processes, input_format, max_docs)]
  total = CorpusCounts()
  for counts in _run(count_range, tasks, processes):  # in input order: a fixed order of sums
    total.add(counts)
  return total


def unk_counts(paths, vocab_file, processes=0, input_format="auto", text_field="sentences",
               do_lower_case=True, max_docs=0):
  """(unk pieces, pieces, documents without the text field) over the sentences of the first
  max_docs documents (0: all) tokenized with vocab_file as FullTokenizer does: the counts of
  vocab.unk_rate over vocab.iter_sentences(paths, max_docs), on `processes` processes."""
  processes = processes or default_processes()
  call = os.urandom(8).hex()
  tasks = [(one_range, text_field, vocab_file, do_lower_case, call)
           for one_range in _ranges(paths, processes, input_format, max_docs)]
  unk = total = skipped = 0
  for range_unk, range_total, counts in _run(unk_range, tasks, processes):
    unk, total, skipped = unk + range_unk, total + range_total, skipped + counts.skipped
  _TOKENIZERS.pop(call, None)  # built here when run inline: not kept after the call
  return unk, total, skipped
