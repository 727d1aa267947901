"""Streams the input documents of create_pretraining_data: corpus-tool JSON Lines or google's text.

Formats:
  jsonl  one document a line: {"id": ..., "source": ..., "sentences": ["...", ...]}
  text   google-research/bert's format: one sentence a line, blank line between documents. Like
         google, files are one continuous stream of lines (a document may continue into the next
         file when the previous one does not end with a blank line); lines split on "\n" only and
         are str.strip()ped.
  auto   jsonl for *.jsonl / *.json (optionally .gz), text otherwise.

`iter_documents` yields `RawDocument(sentences, skip_reason, doc_id)` in input order; a document
that cannot be used has sentences=[] and a skip_reason ("undecodable", "bad_json", "no_sentences",
"binary": a whole file of google's text format that is not text),
so it is counted, never silently dropped. Input patterns (comma-separated globs like google's) are
expanded by io_utils.expand_file_patterns.
"""
import collections
import gzip
import json
import os

from bert_fin.text import documents as text_documents

RawDocument = collections.namedtuple("RawDocument", ["sentences", "skip_reason", "doc_id"])

FORMATS = ("auto", "jsonl", "text")


def detect_format(path, input_format="auto"):
  if input_format not in FORMATS:
    raise ValueError("unknown input format %r, expected one of %s" % (input_format, FORMATS))
  if input_format != "auto":
    return input_format
  name = path[:-3] if path.endswith(".gz") else path
  return "jsonl" if os.path.splitext(name)[1] in (".jsonl", ".json") else "text"


class ReadPosition(object):
  """How far iter_documents has read the input, in bytes on disk (compressed bytes for .gz):
  the files finished plus the open file's offset (to its read buffer). total: the files' sizes,
  known before reading, so a progress bar has an ETA and one big file advances as it is read."""

  def __init__(self, paths):
    self.total = sum(os.path.getsize(path) for path in paths)
    self._done = 0
    self._raw = None

  def bytes_read(self):
    if self._raw is not None and not self._raw.closed:
      return self._done + self._raw.tell()
    return self._done

  def _opened(self, raw):
    self._raw = raw

  def _finished(self, path):
    self._done += os.path.getsize(path)
    self._raw = None


def _iter_byte_lines(path, position=None):
  with open(path, "rb") as raw:
    if position is not None:
      position._opened(raw)  # pylint: disable=protected-access
    f = gzip.GzipFile(fileobj=raw, mode="rb") if path.endswith(".gz") else raw
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
      yield RawDocument([], "undecodable", doc_id)
      continue
    if not text.strip():
      continue
    try:
      obj = json.loads(text)
    except ValueError:
      yield RawDocument([], "bad_json", doc_id)
      continue
    sentences = obj.get("sentences") if isinstance(obj, dict) else None
    if not isinstance(sentences, list) or not all(isinstance(s, str) for s in sentences):
      yield RawDocument([], "bad_json", doc_id)
      continue
    sentences = [s.strip() for s in sentences if s.strip()]
    doc_id = str(obj.get("id", doc_id))
    yield RawDocument(sentences, None if sentences else "no_sentences", doc_id)


def _text_documents(paths, position=None):
  """google's loop over a continuous line stream; a document with an undecodable line is skipped
  whole (google would crash); a binary file (clean_corpus's rule, text/documents.is_binary_file)
  is one skipped document, its lines never reach the stream."""
  sentences, undecodable, first_line = [], False, None
  for path in paths:
    if not path.endswith(".gz") and text_documents.is_binary_file(path):
      yield RawDocument([], "binary", path)
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
          yield RawDocument([] if undecodable else sentences,
                            "undecodable" if undecodable else None, first_line)
        sentences, undecodable, first_line = [], False, None
        continue
      if first_line is None:
        first_line = "%s:%d" % (path, line_number)
      if line is not None:
        sentences.append(line)
  if sentences or undecodable:
    yield RawDocument([] if undecodable else sentences,
                      "undecodable" if undecodable else None, first_line)


def iter_documents(paths, input_format="auto", position=None):
  """Yields RawDocument for every document of `paths`, in order (see module doc).
  position: an optional ReadPosition(paths), advanced as the files are read."""
  text_run = []
  for path in paths:
    if detect_format(path, input_format) == "jsonl":
      if text_run:
        yield from _text_documents(text_run, position)
        text_run = []
      yield from _jsonl_documents(path, position)
    else:
      text_run.append(path)
  if text_run:
    yield from _text_documents(text_run, position)
