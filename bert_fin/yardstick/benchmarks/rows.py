"""A benchmark's files, read as untrusted input: size-bounded, UTF-8, one JSON list (CFLEB) or one
JSON object a line (CLUE); and the one-line refusal of a bad row (file, row and field).

Rows are numbered from 1: the list index + 1 (CFLEB) or the line number (CLUE).
"""
import collections
import json
import math
import os

from bert_fin.finetune import label_lists

MAX_FILE_BYTES = 1 << 30  # a benchmark file larger than 1 GiB is not one of these benchmarks


Example = collections.namedtuple("Example", ["text", "text_b", "label", "entities"])
Example.__doc__ = """A classification example (label: str; finnl: space-separated topics) or, for
finese, a question (text: the context, text_b: the question, label: the answer, its first
occurrence in text). entities: the named entities of a relation / entity-level example, in the
order they are marked ((head, tail), (candidate,)), else ()."""
Parsed = collections.namedtuple("Parsed", ["stratum", "examples", "skip"])
Parsed.__doc__ = """stratum: what the half split stratifies on (the row's label); examples: the
row's examples (finnsp: one per candidate); skip: the reason a row gives no example (finese), or
None; missing entities are counted by the caller from Example.entities."""


class RowError(label_lists.DataError):
  """A bad benchmark row: 'FILE: row N: field F: what is wrong (what to do)'."""


def row_error(path, row, field, what):
  """RowError naming file, row number (1-based) and field."""
  return RowError("%s: row %d: field %s: %s" % (path, row, field, what))


def _checked_text(path):
  if not os.path.isfile(path):
    raise label_lists.DataError("%s: no such file" % path)
  size = os.path.getsize(path)
  if size > MAX_FILE_BYTES:
    raise label_lists.DataError("%s: %d bytes, more than a benchmark file holds (%d): not this "
                                "benchmark's file" % (path, size, MAX_FILE_BYTES))
  try:
    with open(path, encoding="utf-8") as f:
      return f.read()
  except UnicodeDecodeError as e:
    raise label_lists.DataError("%s: not UTF-8 (%s)" % (path, e)) from None


def read_json_list(path):
  """The rows of a file holding one JSON list (CFLEB's layout): [(row number, row)]."""
  try:
    value = json.loads(_checked_text(path))
  except (ValueError, RecursionError) as e:
    raise label_lists.DataError("%s: not valid JSON (%s): the file must hold one JSON list" % (
        path, e)) from None
  if not isinstance(value, list):
    raise label_lists.DataError("%s: a JSON %s, expected one list of rows" % (
        path, type(value).__name__))
  return list(enumerate(value, 1))


def read_json_lines(path):
  """The rows of a file holding one JSON object a line (CLUE's layout): [(line number, row)];
  blank lines are not rows."""
  rows = []
  for number, line in enumerate(_checked_text(path).splitlines(), 1):
    if not line.strip():
      continue
    try:
      row = json.loads(line)
    except (ValueError, RecursionError) as e:
      raise RowError("%s: row %d: not valid JSON (%s): one JSON object a line" % (
          path, number, e)) from None
    if not isinstance(row, dict):
      raise RowError("%s: row %d: a JSON %s, expected an object" % (
          path, number, type(row).__name__))
    rows.append((number, row))
  return rows


def fields(path, number, row, names):
  """A list row of exactly len(names) fields -> the list; RowError otherwise."""
  if not isinstance(row, list) or len(row) != len(names):
    got = "%d fields" % len(row) if isinstance(row, list) else "a JSON %s" % type(row).__name__
    raise RowError("%s: row %d: %s, expected a list of %d: %s" % (
        path, number, got, len(names), ", ".join(names)))
  return row


def text_field(path, number, value, field, allow_empty=False):
  """A string field, stripped of surrounding whitespace; RowError for another type or (unless
  allow_empty) an empty one."""
  if not isinstance(value, str):
    raise row_error(path, number, field, "expected a string, got %r" % (value,))
  value = value.strip()
  if not value and not allow_empty:
    raise row_error(path, number, field, "empty")
  return value


def is_missing(value):
  """True for the benchmark's 'no value' spellings: null, NaN (a float or the string), ''."""
  if value is None:
    return True
  if isinstance(value, float):
    return math.isnan(value)
  return isinstance(value, str) and value.strip().lower() in ("", "nan", "none", "null")
