"""A corpus file's format, decided from its name in this one place: every tool that reads a corpus
(clean_corpus, build_vocab, adapt_vocab, create_pretraining_data and its mpirun ranks) asks here,
so one file is read as the same documents by all of them.

  JSON Lines  *.jsonl, *.json, *.ndjson, in any case (CORPUS.NDJSON too): one document a line;
  text        any other name: each tool's text format (google's for the data tools);
  gzip        any of those names + .gz, in any case (X.NDJSON.gz is JSON Lines): read decompressed.

An explicit input format ("jsonl" / "text", the tools' --input_format) overrides the name; "auto"
asks it.
"""
import gzip
import io

JSON_LINES_EXTENSIONS = (".jsonl", ".json", ".ndjson")
GZIP_EXTENSION = ".gz"
JSONL, TEXT, AUTO = "jsonl", "text", "auto"
INPUT_FORMATS = (AUTO, JSONL, TEXT)
# The --input_format help of the tools that read google's text format beside JSON Lines.
AUTO_HELP = ("auto: *.jsonl/*.json/*.ndjson (any case, .gz or not) are JSON Lines, anything else "
             "google's text format (one sentence a line, blank line between documents)")


def is_gzip(path):
  """True when the file's name ends in .gz (any case): its bytes are read decompressed."""
  return str(path).lower().endswith(GZIP_EXTENSION)


def format_of(path, input_format=AUTO):
  """The format the file is read in.

  Args:
    path: the file's path (only its name is read).
    input_format: "auto" (decided by the name: module docstring), or "jsonl" / "text" (taken).

  Returns:
    "jsonl" or "text".

  Raises:
    ValueError: input_format is not one of INPUT_FORMATS.
  """
  if input_format not in INPUT_FORMATS:
    raise ValueError("unknown input format %r, expected one of %s" % (input_format, INPUT_FORMATS))
  if input_format != AUTO:
    return input_format
  name = str(path).lower()
  if name.endswith(GZIP_EXTENSION):
    name = name[:-len(GZIP_EXTENSION)]
  return JSONL if name.endswith(JSON_LINES_EXTENSIONS) else TEXT


class _GzipContent(gzip.GzipFile):
  """A GzipFile whose cut-short stream is an OSError naming the file (gzip raises EOFError, which
  the tools' one-line error handling of OSError would not catch)."""

  def _guarded(self, method, *args):
    try:
      return method(*args)
    except EOFError as error:
      raise OSError("%s: %s (the gzip file is incomplete: copy or download it again)"
                    % (self.name, error)) from None
    except gzip.BadGzipFile as error:
      raise OSError("%s: %s (a .gz name is read as gzip: rename the file if it is not one)"
                    % (self.name, error)) from None

  def read(self, size=-1):
    return self._guarded(super().read, size)

  def read1(self, size=-1):
    return self._guarded(super().read1, size)

  def peek(self, n):
    return self._guarded(super().peek, n)

  def readline(self, size=-1):
    return self._guarded(super().readline, size)


def decompressed(raw, path):
  """The binary stream of a file's content: raw (the file opened "rb") itself, or for a gzip
  name the decompressing stream over it (closing it leaves raw open; raw.tell() stays the
  position on disk, for progress). A gzip stream that is not gzip or is cut short raises OSError
  naming the file."""
  return _GzipContent(fileobj=raw, mode="rb") if is_gzip(path) else raw


def open_text(path, encoding="utf-8", errors="strict", newline=None):
  """The file's content as a text stream (open()'s arguments; universal newlines by default),
  decompressed for a gzip name. Raises OSError as open() does (for a gzip name also while
  reading: not gzip, or cut short)."""
  if is_gzip(path):
    return io.TextIOWrapper(_GzipContent(path, "rb"), encoding=encoding, errors=errors,
                            newline=newline)
  return open(path, encoding=encoding, errors=errors, newline=newline)  # pylint: disable=consider-using-with
