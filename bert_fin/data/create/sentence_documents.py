"""Streams the input documents of create_pretraining_data: corpus-tool JSON Lines or google's text.

Formats:
  jsonl  one document a line: {"id": ..., "source": ..., "sentences": ["...", ...]}
  text   google-research/bert's format: one sentence a line, blank line between documents. Like
         google, files are one continuous stream of lines (a document may continue into the next
         file when the previous one does not end with a blank line); lines split on "\n" only and
         are str.strip()ped.
  auto   text/corpus_format.py decides from the name (*.jsonl/*.json/*.ndjson in any case, .gz or
         not, are jsonl), as every corpus tool does.

`iter_documents` yields `SentenceDocument(sentences, skip_reason, doc_id)` in input order; a
document
that cannot be used has sentences=[] and a skip_reason ("undecodable", "bad_json",
"no_sentences_field": a JSON line without a "sentences" list of strings, "no_sentences",
"markup": mostly HTML/XML markup (is_markup), "binary": a whole file of google's text format that
is not text), so it is counted, never silently dropped. `check_inputs` refuses, before anything is
written, a file whose first document shows that the whole file is the wrong input (an HTML page,
JSON Lines without "sentences", not JSON at all). Input patterns (comma-separated globs like
google's) are expanded by io_utils.expand_file_patterns.
"""
import collections
import json
import os
import re

from bert_fin.text import corpus_format
from bert_fin.text import raw_documents as text_documents

# One document of create_pretraining_data's input, split into sentences (or why it is skipped);
# not text.raw_documents.RawDocument, the clean_corpus input (raw HTML or text) it was made from.
SentenceDocument = collections.namedtuple("SentenceDocument",
                                          ["sentences", "skip_reason", "doc_id"])

SENTENCES_FIELD = "sentences"  # clean_corpus's output field, the JSONL input read here
# A document is markup when at least this share of its non-space characters are tags, comments,
# script/style bodies or character entities (clean prose: ~0; a raw news page: 0.5 and more).
MARKUP_SHARE = 0.3
_MARKUP_RE = re.compile(r"<(script|style)\b.*?</\1\s*>|<!--.*?-->|<[!/?]?[A-Za-z][^<>]*>"
                        r"|&(?:#[0-9]+|#[xX][0-9a-fA-F]+|[A-Za-z]+);", re.S | re.I)
_CHECK_BYTES = 1 << 16  # check_inputs reads at most this much of a text file's first document
CLEAN_FIRST = ("clean it first: .venv/bin/python tools/clean_corpus.py --output clean.jsonl %s, "
               "then --input_file=clean.jsonl")


class ReadPosition(object):
  """How far iter_documents has read the input, in bytes on disk (compressed bytes for .gz):
  the files finished plus the open file's offset (to its read buffer). total: the files' sizes,
  known before reading, so a progress bar has an ETA and one big file advances as it is read."""

  def __init__(self, paths):
    self._sizes = {path: os.path.getsize(path) for path in paths}  # a file deleted once read
    self.total = sum(self._sizes.values())                          # is no error
    self._done = 0
    self._raw = None

  def bytes_read(self):
    if self._raw is not None and not self._raw.closed:
      return self._done + self._raw.tell()
    return self._done

  def _opened(self, raw):
    self._raw = raw

  def _finished(self, path):
    self._done += self._sizes.get(path, 0)
    self._raw = None


def _iter_byte_lines(path, position=None):
  with open(path, "rb") as raw:
    if position is not None:
      position._opened(raw)  # pylint: disable=protected-access
    f = corpus_format.decompressed(raw, path)
    for line in f:  # binary iteration splits on b"\n" only
      yield line
  if position is not None:
    position._finished(path)  # pylint: disable=protected-access


def _jsonl_documents(path, position=None):
  for line_number, raw in enumerate(_iter_byte_lines(path, position), 1):
    doc_id = "%s:%d" % (path, line_number)
    try:
      text = raw.decode("utf-8")
    except UnicodeDecodeError:
      yield SentenceDocument([], "undecodable", doc_id)
      continue
    if not text.strip():
      continue
    try:
      obj = json.loads(text)
    except ValueError:
      yield SentenceDocument([], "bad_json", doc_id)
      continue
    sentences = _sentences_of(obj)
    if sentences is None:
      yield SentenceDocument([], "no_sentences_field", doc_id)
      continue
    yield _classified([s.strip() for s in sentences if s.strip()], str(obj.get("id", doc_id)))


def _sentences_of(record):
  """A JSON record's "sentences" list of str, or None."""
  sentences = record.get(SENTENCES_FIELD) if isinstance(record, dict) else None
  if isinstance(sentences, list) and all(isinstance(s, str) for s in sentences):
    return sentences
  return None


def markup_share(sentences):
  """Share of the non-space characters of `sentences` (list of str) that are HTML/XML markup."""
  text = "".join(sentences)
  if "<" not in text and "&" not in text:
    return 0.0
  text = "".join(text.split())
  marked = sum(match.end() - match.start() for match in _MARKUP_RE.finditer(text))
  return marked / len(text) if text else 0.0


def is_markup(sentences):
  return markup_share(sentences) >= MARKUP_SHARE


def _classified(sentences, doc_id):
  """SentenceDocument of stripped, non-empty sentences: skipped when empty or mostly markup."""
  if not sentences:
    return SentenceDocument([], "no_sentences", doc_id)
  if is_markup(sentences):
    return SentenceDocument([], "markup", doc_id)
  return SentenceDocument(sentences, None, doc_id)


def _text_documents(paths, position=None):
  """google's loop over a continuous line stream; a document with an undecodable line is skipped
  whole (google would crash); a binary file (clean_corpus's rule, text/raw_documents.is_binary_file)
  is one skipped document, its lines never reach the stream."""
  sentences, undecodable, first_line = [], False, None
  for path in paths:
    if not corpus_format.is_gzip(path) and text_documents.is_binary_file(path):
      yield SentenceDocument([], "binary", path)
      if position is not None:
        position._finished(path)  # pylint: disable=protected-access
      continue
    for line_number, raw in enumerate(_iter_byte_lines(path, position), 1):
      try:
        line = raw.decode("utf-8").strip()
      except UnicodeDecodeError:
        line, undecodable = None, True
      if line == "":
        if sentences or undecodable:
          yield _text_document(sentences, undecodable, first_line)
        sentences, undecodable, first_line = [], False, None
        continue
      if first_line is None:
        first_line = "%s:%d" % (path, line_number)
      if line is not None:
        sentences.append(line)
  if sentences or undecodable:
    yield _text_document(sentences, undecodable, first_line)


def _text_document(sentences, undecodable, doc_id):
  if undecodable:
    return SentenceDocument([], "undecodable", doc_id)
  return _classified(sentences, doc_id)


def iter_documents(paths, input_format="auto", position=None):
  """Yields SentenceDocument for every document of `paths`, in order (see module doc).
  position: an optional ReadPosition(paths), advanced as the files are read."""
  text_run = []
  for path in paths:
    if corpus_format.format_of(path, input_format) == corpus_format.JSONL:
      if text_run:
        yield from _text_documents(text_run, position)
        text_run = []
      yield from _jsonl_documents(path, position)
    else:
      text_run.append(path)
  if text_run:
    yield from _text_documents(text_run, position)


def check_inputs(paths, input_format="auto"):
  """Raises ValueError naming the file and the fix when the first document of a file shows that
  the file is the wrong input, before anything is written: HTML/XML markup (raw pages: clean
  them with clean_corpus), JSON Lines without a "sentences" list (naming the fields the line has),
  a .jsonl/.json file that is not JSON. Reads one line of a JSONL file and at most _CHECK_BYTES of
  a text file; an undecodable or binary start is left to the counted skips of iter_documents."""
  for path in paths:
    if corpus_format.format_of(path, input_format) == corpus_format.JSONL:
      _check_jsonl_start(path)
    elif corpus_format.is_gzip(path) or not text_documents.is_binary_file(path):
      _check_text_start(path)


def _first_lines(path, max_bytes=None):
  """(line number, decoded stripped line) of the start of a file, up to max_bytes; stops at an
  undecodable line."""
  read = 0
  for number, raw in enumerate(_iter_byte_lines(path), 1):
    try:
      yield number, raw.decode("utf-8").strip()
    except UnicodeDecodeError:
      return
    read += len(raw)
    if max_bytes and read >= max_bytes:
      return


def _check_jsonl_start(path):
  for number, line in _first_lines(path):
    if not line:
      continue
    try:
      record = json.loads(line)
    except ValueError:
      raise ValueError("%s:%d is not JSON: *.jsonl/*.json input is read as JSON Lines; for "
                       "google's text format pass --input_format=text" % (path, number)) from None
    sentences = _sentences_of(record)
    if sentences is None:
      fields = collections.Counter()
      text_documents.record_fields(record, fields)
      likely = text_documents.likely_text_field(fields)
      raise ValueError(
          "%s:%d has no %r list (fields: %s): JSON Lines input is clean_corpus output; %s" % (
              path, number, SENTENCES_FIELD, ", ".join(sorted(fields)) or "none",
              (CLEAN_FIRST % ("--text_field %s %s" % (likely, path))) if likely else
              CLEAN_FIRST % ("--text_field FIELD " + path)))
    if is_markup(sentences):
      raise ValueError("%s:%d is HTML/XML markup, not text; %s" % (path, number,
                                                                 CLEAN_FIRST % path))
    return


def _check_text_start(path):
  lines = []
  for _, line in _first_lines(path, _CHECK_BYTES):
    if not line and lines:
      break
    lines.append(line)
  if is_markup(lines):
    raise ValueError("%s starts with HTML/XML markup, not text (%.0f%% of its first document is "
                     "tags); %s" % (path, 100 * markup_share(lines), CLEAN_FIRST % path))
