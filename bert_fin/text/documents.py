"""Input reading: expand INPUT arguments to files, detect each file's encoding, yield raw documents.

Formats (by extension, `text_format` for plain text):
  .html/.htm/.xhtml/.shtml -> one HTML document per file (also any other non-JSONL file whose
                              start looks like an HTML page);
  .jsonl/.json             -> one document per line, text in `text_field` (str or list of str);
  anything else            -> plain text: `blank_line` (google-bert style, blank-line separated;
                              a file without blank lines is one document), `line` (one per line) or
                              `file` (the whole file is one document).
A file is read as a stream (line by line) except HTML pages, which are parsed whole.

Every yielded RawDocument is one `document in`; unreadable input becomes a RawDocument with a
`reject` reason (empty, binary, unreadable, bad_json, no_text_field) instead of disappearing.
"""
import codecs
import collections
import glob
import json
import os
import re
import sys

from bert_fin.text import filters
from bert_fin.text import html

HTML_EXTENSIONS = (".html", ".htm", ".xhtml", ".shtml")
JSONL_EXTENSIONS = (".jsonl", ".json", ".ndjson")
TEXT_FORMATS = ("blank_line", "line", "file")
PROBE_BYTES = 1 << 16
_META_CHARSET_RE = re.compile(rb"""<meta[^>]+charset\s*=\s*["']?\s*([A-Za-z0-9_\-]+)""", re.I)
_ERROR_HANDLER = "bert_fin.count_and_drop"


class _DecodeErrorCounter:
  """Process-local count of undecodable bytes, fed by the codecs error handler below."""
  count = 0


def _count_and_drop(error):
  _DecodeErrorCounter.count += error.end - error.start
  return ("", error.end)


codecs.register_error(_ERROR_HANDLER, _count_and_drop)

RawDocument = collections.namedtuple("RawDocument", ["id", "source", "text", "kind", "reject"])
RawDocument.__doc__ = """One input document: kind in {'html', 'text'}; reject is a reason or None."""


def expand_inputs(inputs):
  """Files, directories (recursed) or glob patterns -> sorted, de-duplicated list of file paths.

  Raises FileNotFoundError naming the argument when one matches nothing.
  """
  paths = []
  for argument in inputs:
    if os.path.isdir(argument):
      matches = [os.path.join(root, name) for root, _, names in os.walk(argument)
                 for name in names if not name.startswith(".")]
    elif os.path.isfile(argument):
      matches = [argument]
    else:
      matches = [path for path in glob.glob(argument, recursive=True) if os.path.isfile(path)]
    if not matches:
      raise FileNotFoundError("input %r matches no file" % argument)
    paths.extend(sorted(matches))
  seen, unique = set(), []
  for path in paths:
    key = os.path.abspath(path)
    if key not in seen:
      seen.add(key)
      unique.append(path)
  return unique


def _strip_incomplete_tail(probe):
  """Drops up to 3 trailing bytes that may be a multi-byte character cut by the probe."""
  for cut in range(0, 4):
    try:
      probe[:len(probe) - cut].decode("utf-8")
      return probe[:len(probe) - cut]
    except UnicodeDecodeError:
      continue
  return probe


def looks_binary(probe):
  """True for data that is not text: NUL bytes (without a UTF-16 BOM) or many control bytes."""
  if not probe:
    return False
  if probe.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
    return False
  if b"\x00" in probe:
    return True
  controls = sum(1 for byte in probe if byte < 32 and byte not in (9, 10, 12, 13, 27))
  return controls / len(probe) > 0.05


def detect_encoding(probe, is_html=False):
  """First bytes of a file -> codec name: BOM, else strict UTF-8, else a declared HTML charset,
  else gb18030 (a superset of GBK/GB2312, the usual non-UTF-8 encoding of Chinese crawls)."""
  if probe.startswith(codecs.BOM_UTF8):
    return "utf-8-sig"
  if probe.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
    return "utf-16"
  try:
    _strip_incomplete_tail(probe).decode("utf-8")
    return "utf-8"
  except UnicodeDecodeError:
    pass
  if is_html:
    match = _META_CHARSET_RE.search(probe)
    if match:
      declared = match.group(1).decode("ascii").lower()
      if declared in ("gbk", "gb2312", "gb_2312-80", "x-gbk"):
        return "gb18030"
      try:
        return codecs.lookup(declared).name
      except LookupError:
        pass
  try:
    _strip_incomplete_tail(probe).decode("gb18030")
    return "gb18030"
  except UnicodeDecodeError:
    pass
  return "utf-8"  # best effort; bad bytes are counted as decode errors


def file_kind(path):
  lower = path.lower()
  if lower.endswith(HTML_EXTENSIONS):
    return "html"
  if lower.endswith(JSONL_EXTENSIONS):
    return "jsonl"
  return "text"


class FileReader:
  """Reads one input file as RawDocuments; `encoding`, `decode_errors` (bytes) and `bytes_in`
  are known after the iteration."""

  def __init__(self, path, text_format="blank_line", text_field="text"):
    if text_format not in TEXT_FORMATS:
      raise ValueError("text_format must be one of %s, got %r" % (TEXT_FORMATS, text_format))
    self.path = path
    self.text_format = text_format
    self.text_field = text_field
    self.kind = file_kind(path)
    self.encoding = None
    self.decode_errors = 0
    self.bytes_in = 0
    self._handle = None  # the open text file while documents are read (for bytes_read)

  def _document(self, index, text, kind="text", reject=None):
    return RawDocument("%s#%d" % (self.path, index), self.path, text, kind, reject)

  def __iter__(self):
    try:
      with open(self.path, "rb") as f:
        probe = f.read(PROBE_BYTES)
      self.bytes_in = os.path.getsize(self.path)
    except OSError as error:
      print("warning: %s unreadable: %s" % (self.path, error), file=sys.stderr)
      self.encoding = "unreadable"
      yield self._document(0, "", reject=filters.REASON_UNREADABLE)
      return
    if not probe.strip():
      self.encoding = "empty"
      yield self._document(0, "", reject=filters.REASON_EMPTY)
      return
    if looks_binary(probe):
      self.encoding = "binary"
      yield self._document(0, "", reject=filters.REASON_BINARY)
      return
    if self.kind == "text" and html.looks_like_html(probe[:4096].decode("latin-1")):
      self.kind = "html"  # a saved page without an .html extension
    self.encoding = detect_encoding(probe, is_html=self.kind == "html")
    start_errors = _DecodeErrorCounter.count
    try:
      yield from self._read_documents()
    finally:
      self.decode_errors = _DecodeErrorCounter.count - start_errors

  def bytes_read(self):
    """Bytes of the file read so far (to the read buffer's granularity): progress within a file.
    The whole size once the file is done or was rejected."""
    if self._handle is not None and not self._handle.closed:
      return self._handle.buffer.tell()
    return self.bytes_in

  def _lines(self):
    with open(self.path, "r", encoding=self.encoding, errors=_ERROR_HANDLER, newline=None) as f:
      self._handle = f
      yield from f

  def _read_documents(self):
    if self.kind == "html":
      text = "".join(self._lines())
      yield self._document(0, text, kind="html")
    elif self.kind == "jsonl":
      yield from self._read_jsonl()
    elif self.text_format == "line":
      index = 0
      for line in self._lines():
        if line.strip():
          yield self._document(index, line)
          index += 1
    elif self.text_format == "file":
      yield self._document(0, "".join(self._lines()))
    else:
      yield from self._read_blank_line_separated()

  def _read_blank_line_separated(self):
    index, paragraph = 0, []
    for line in self._lines():
      if line.strip():
        paragraph.append(line)
      elif paragraph:
        yield self._document(index, "".join(paragraph))
        index, paragraph = index + 1, []
    if paragraph:
      yield self._document(index, "".join(paragraph))
      index += 1
    if index == 0:
      yield self._document(0, "", reject=filters.REASON_EMPTY)

  def _read_jsonl(self):
    index = 0
    for line in self._lines():
      if not line.strip():
        continue
      try:
        record = json.loads(line)
      except ValueError:
        yield self._document(index, "", reject=filters.REASON_BAD_JSON)
      else:
        value = record.get(self.text_field) if isinstance(record, dict) else None
        if isinstance(value, list) and all(isinstance(item, str) for item in value):
          value = "\n".join(value)
        if not isinstance(value, str):
          yield self._document(index, "", reject=filters.REASON_NO_TEXT_FIELD)
        else:
          kind = "html" if _looks_like_markup(value) else "text"
          yield self._document(index, value, kind=kind)
      index += 1
    if index == 0:
      yield self._document(0, "", reject=filters.REASON_EMPTY)


def _looks_like_markup(text):
  """JSONL text fields sometimes hold HTML fragments; a cheap check before parsing them."""
  return "<" in text and re.search(r"</?(p|div|br|span|script|style|table|a)\b", text, re.I) is not None
