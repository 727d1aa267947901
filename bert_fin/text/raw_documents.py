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
import io
import json
import os
import re
import sys

from bert_fin import io_utils
from bert_fin.text import corpus_format
from bert_fin.text import filters
from bert_fin.text import html

HTML_EXTENSIONS = (".html", ".htm", ".xhtml", ".shtml")
TEXT_FORMATS = ("blank_line", "line", "file")
PROBE_BYTES = 1 << 16
SAMPLE_CHUNKS = 8  # pieces read across the rest of a file for encoding / binary detection
SAMPLE_CHUNK_BYTES = 1 << 14
BINARY_CONTROL_RATIO = 0.05
_CONTROL_BYTES = bytes(range(32))
# a mixed file's lines are decoded in the first of these that works (UTF-8 first: GBK text is
# almost never valid UTF-8, UTF-8 text often decodes as GB18030)
_LINE_CODECS = ("utf-8", "gb18030")
_META_CHARSET_RE = re.compile(rb"""<meta[^>]+charset\s*=\s*["']?\s*([A-Za-z0-9_\-]+)""", re.I)
_ERROR_HANDLER = "bert_fin.count_and_drop"
_BLOCK_BYTES = 1 << 20  # lines decoded together when they all decode


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
  """Files, directories (recursed, hidden entries left out) or glob patterns -> sorted,
  de-duplicated list of file paths; a bert_fin writer's temp files (io_utils.is_temp_path) are
  never inputs.

  Raises FileNotFoundError naming the argument when one matches nothing, and the OSError of a
  directory that cannot be listed (its files are never silently left out).
  """
  paths = []
  for argument in inputs:
    if os.path.isdir(argument):
      matches = []
      for root, dirs, names in os.walk(argument, onerror=_raise):
        dirs[:] = [d for d in dirs if not d.startswith(".")]  # hidden and bert_fin temp dirs
        matches += [os.path.join(root, name) for name in names if not name.startswith(".")]
    elif os.path.isfile(argument):
      matches = [argument]
    else:
      matches = [path for path in glob.glob(argument, recursive=True)
                 if os.path.isfile(path) and not io_utils.is_temp_path(path)]
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


def _raise(error):
  raise error


def _strip_incomplete_tail(probe):
  """Drops up to 3 trailing bytes that may be a multi-byte character cut by the probe."""
  for cut in range(0, 4):
    try:
      probe[:len(probe) - cut].decode("utf-8")
      return probe[:len(probe) - cut]
    except UnicodeDecodeError:
      continue
  return probe


def read_sample(f, size, head_bytes=PROBE_BYTES, chunks=SAMPLE_CHUNKS, chunk_bytes=SAMPLE_CHUNK_BYTES):
  """(head, lines, raw) of an open binary file of `size` bytes: the first head_bytes, and up to
  `chunks` pieces spread evenly over the rest, so encoding and binary detection see the whole
  file, not only its start. raw: every piece as read (for binary detection); lines: the pieces
  that hold whole lines, each cut to them (a newline byte is never part of a multi-byte character
  in UTF-8 or GBK/GB18030). A piece inside one long line may start and end mid-character in any
  codec: it is in raw only, never voting on the encoding."""
  f.seek(0)
  head = f.read(head_bytes)
  lines, raw = [], []
  if size > head_bytes + chunk_bytes:
    step = (size - head_bytes) // chunks
    for i in range(chunks):
      f.seek(head_bytes + i * step)
      piece = f.read(chunk_bytes)
      if not piece:
        continue
      raw.append(piece)
      first, last = piece.find(b"\n"), piece.rfind(b"\n")
      if 0 <= first < last:
        lines.append(piece[first + 1:last + 1])
  return head, lines, raw


def control_byte_ratio(data):
  """Share of bytes < 32 other than tab, newlines, form feed and escape (NUL included)."""
  if not data:
    return 0.0
  text_controls = data.count(b"\t") + data.count(b"\n") + data.count(b"\r") + \
      data.count(b"\f") + data.count(b"\x1b")
  controls = len(data) - len(data.translate(None, _CONTROL_BYTES)) - text_controls
  return controls / len(data)


def looks_binary(probe, samples=()):
  """True for data that is not text: more than BINARY_CONTROL_RATIO control bytes (NUL included)
  over the head and the samples across the file (UTF-16 with a BOM is text). A few stray NUL or
  control bytes in real text do not make it binary: they are dropped and counted when reading."""
  if not probe:
    return False
  if probe.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
    return False
  return control_byte_ratio(probe + b"".join(samples)) > BINARY_CONTROL_RATIO


def sample_file(path):
  """read_sample of a file's content: its head and samples across it, or for a gzip name
  (text/corpus_format.py) the head of its decompressed content (a gzip stream is not sampled
  across: that would decompress it whole)."""
  with open(path, "rb") as f:
    if not corpus_format.is_gzip(path):
      return read_sample(f, os.path.getsize(path))
    with corpus_format.decompressed(f, path) as content:
      return read_sample(content, 0)


def is_binary_file(path):
  """looks_binary over a file's head and samples across it (clean_corpus's rule, for other
  readers of text files such as create_pretraining_data's google text format)."""
  probe, _, raw = sample_file(path)
  return looks_binary(probe, raw)


def not_utf8_text(path):
  """None for a file of UTF-8 text (BOM allowed), else what it is instead: "binary" or "not UTF-8
  (looks like <codec>)", judged from the head and samples across the file (read_sample)."""
  probe, samples, raw = sample_file(path)
  if looks_binary(probe, raw):
    return "binary, not text"
  codec, mixed = detect(probe, samples=samples)
  if codec in ("utf-8", "utf-8-sig") and not mixed and not _line_votes(probe, samples)[2]:
    return None
  return "not UTF-8 (looks like %s)" % (codec if codec not in ("utf-8", "utf-8-sig") else
                                        "a mix of encodings")


def _line_votes(probe, samples):
  """(bytes of non-ASCII lines that are valid UTF-8, bytes of lines valid only in GB18030, bytes
  of lines valid in neither) over the head (its possibly cut last line left out) and samples.
  Non-ASCII text in GBK is almost never valid UTF-8, while UTF-8 often decodes as GB18030."""
  if len(probe) >= PROBE_BYTES and b"\n" in probe:
    probe = probe[:probe.rfind(b"\n")]
  probe = _strip_incomplete_tail(probe)  # a short probe given alone may end mid-character
  utf8 = gb = other = 0
  for data in [probe] + list(samples):
    for line in data.split(b"\n"):
      if line.isascii():
        continue
      for codec in _LINE_CODECS:
        try:
          line.decode(codec)
        except UnicodeDecodeError:
          continue
        if codec == "utf-8":
          utf8 += len(line)
        else:
          gb += len(line)
        break
      else:
        other += len(line)
  return utf8, gb, other


def detect(probe, is_html=False, samples=()):
  """(codec, mixed) for a file from its first bytes and line-aligned samples of the rest (see
  read_sample): BOM, else UTF-8 when every non-ASCII line is UTF-8, else a declared HTML charset,
  else gb18030 (a superset of GBK/GB2312, the usual non-UTF-8 encoding of Chinese crawls) when
  more of the sampled bytes are GB18030-only lines than UTF-8 ones. mixed: the samples hold lines
  of the other codec too, so FileReader decodes line by line (fallback_lines)."""
  if probe.startswith(codecs.BOM_UTF8):
    return "utf-8-sig", False
  if probe.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
    return "utf-16", False
  utf8, gb, other = _line_votes(probe, samples)
  if not gb and not other:
    return "utf-8", False
  if is_html:
    match = _META_CHARSET_RE.search(probe)
    if match:
      declared = match.group(1).decode("ascii").lower()
      if declared in ("gbk", "gb2312", "gb_2312-80", "x-gbk"):
        return "gb18030", bool(utf8)
      try:
        return codecs.lookup(declared).name, False
      except LookupError:
        pass
  if gb > utf8:
    return "gb18030", bool(utf8)
  return "utf-8", bool(gb)  # bytes valid in neither are counted as decode errors


def detect_encoding(probe, is_html=False, samples=()):
  """The codec of detect(...)."""
  return detect(probe, is_html, samples)[0]


def file_kind(path):
  lower = path.lower()
  if lower.endswith(HTML_EXTENSIONS):
    return "html"
  if corpus_format.format_of(path) == corpus_format.JSONL:
    return "jsonl"
  return "text"


class FileReader:
  """Reads one input file as RawDocuments; `encoding`, `decode_errors` (undecodable and NUL
  bytes, dropped), `fallback_lines` (lines decoded with the other of UTF-8 / GB18030) and
  `bytes_in` are known after the iteration."""

  def __init__(self, path, text_format="blank_line", text_field="text"):
    if text_format not in TEXT_FORMATS:
      raise ValueError("text_format must be one of %s, got %r" % (TEXT_FORMATS, text_format))
    self.path = path
    self.text_format = text_format
    self.text_field = text_field
    self.kind = file_kind(path)
    self.encoding = None
    self.decode_errors = 0
    self.fallback_lines = 0
    self.bytes_in = 0
    self.fields_without_text = collections.Counter()  # see record_fields
    self._nul_bytes = 0
    self._mixed = False
    self._raw = None  # the open file's binary object while documents are read (bytes_read)

  def _document(self, index, text, kind="text", reject=None):
    return RawDocument("%s#%d" % (self.path, index), self.path, text, kind, reject)

  def __iter__(self):
    try:
      self.bytes_in = os.path.getsize(self.path)
      probe, samples, raw = sample_file(self.path)
    except OSError as error:
      print("warning: %s unreadable: %s" % (self.path, error), file=sys.stderr)
      self.encoding = "unreadable"
      yield self._document(0, "", reject=filters.REASON_UNREADABLE)
      return
    if not probe.strip():
      self.encoding = "empty"
      yield self._document(0, "", reject=filters.REASON_EMPTY)
      return
    if looks_binary(probe, raw):
      self.encoding = "binary"
      yield self._document(0, "", reject=filters.REASON_BINARY)
      return
    if self.kind == "text" and html.looks_like_html(probe[:4096].decode("latin-1")):
      self.kind = "html"  # a saved page without an .html extension
    self.encoding, self._mixed = detect(probe, is_html=self.kind == "html", samples=samples)
    start_errors = _DecodeErrorCounter.count
    try:
      yield from self._read_documents()
    finally:
      self.decode_errors = _DecodeErrorCounter.count - start_errors + self._nul_bytes

  def _drop_nul(self, text):
    if "\x00" in text:
      self._nul_bytes += text.count("\x00")
      text = text.replace("\x00", "")
    return text

  def bytes_read(self):
    """Bytes of the file read so far (to the read buffer's granularity): progress within a file.
    The whole size once the file is done or was rejected."""
    if self._raw is not None and not self._raw.closed:
      return self._raw.tell()
    return self.bytes_in

  def _lines(self):
    """Decoded lines ending in "\n" (universal newlines), NUL bytes dropped and counted."""
    with open(self.path, "rb") as raw:
      self._raw = raw  # its offset on disk: progress (compressed bytes for a gzip file)
      content = corpus_format.decompressed(raw, self.path)
      if not self._mixed:
        with io.TextIOWrapper(content, encoding=self.encoding, errors=_ERROR_HANDLER,
                              newline=None) as f:
          for line in f:
            yield self._drop_nul(line)
        return
      # A newline byte never sits inside a UTF-8 or GB18030 character, so each line of a mixed
      # file (a GBK paragraph in a UTF-8 file) is decoded on its own.
      for lines in iter(lambda: content.readlines(_BLOCK_BYTES), []):
        text = "".join(map(self._decode_line, lines))
        yield from io.StringIO(self._drop_nul(text), newline=None)  # universal newlines

  def _decode_line(self, raw):
    for codec in _LINE_CODECS:
      try:
        line = raw.decode(codec)
      except UnicodeDecodeError:
        continue
      if codec != self.encoding and not raw.isascii():
        self.fallback_lines += 1
      return line
    return raw.decode(self.encoding, errors=_ERROR_HANDLER)

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
          record_fields(record, self.fields_without_text)
          yield self._document(index, "", reject=filters.REASON_NO_TEXT_FIELD)
        else:
          kind = "html" if _looks_like_markup(value) else "text"
          yield self._document(index, value, kind=kind)
      index += 1
    if index == 0:
      yield self._document(0, "", reject=filters.REASON_EMPTY)


MAX_FIELDS_RECORDED = 64


def record_fields(record, fields):
  """Adds the fields of a JSONL record that lacks the text field to the Counter `fields`: each
  name with the characters of its text (str or list of str; 0 for other values), so the error
  can name the field that most likely holds the text. At most MAX_FIELDS_RECORDED names."""
  if not isinstance(record, dict):
    return
  for name, value in record.items():
    if name not in fields and len(fields) >= MAX_FIELDS_RECORDED:
      continue
    if isinstance(value, list) and all(isinstance(item, str) for item in value):
      value = "".join(value)
    fields[name] += len(value) if isinstance(value, str) else 0


def likely_text_field(fields):
  """The recorded field with the most text (record_fields), or None."""
  name, chars = max(fields.items(), key=lambda item: (item[1], item[0]), default=(None, 0))
  return name if chars else None


def _looks_like_markup(text):
  """JSONL text fields sometimes hold HTML fragments; a cheap check before parsing them."""
  return "<" in text and re.search(r"</?(p|div|br|span|script|style|table|a)\b", text, re.I) is not None
