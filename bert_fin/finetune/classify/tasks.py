"""Classification data: the train / dev / test files of a directory -> examples, labels.

Formats (`--task_name` picks one):
  jsonl  {train,dev,test}.jsonl, one JSON object a line: "text" (str), optional "text_b" (str or
         null) for pairs, "label" (str or int; optional in test).
  tsv    {train,dev,test}.tsv, a header line naming the columns (text, optional text_b, label),
         then one example a line, tab-separated, no quoting (google's _read_tsv).
  cola, mnli, mrpc, xnli   google-research/bert's tasks, files and columns as google's
         processors read them (google_tasks.py); their label lists are google's.

Bad data is never dropped silently:
  malformed line (bad JSON, not an object, wrong column count, a missing or non-string text,
  a missing label in train/dev), a label not in the label list (dev, or train with --labels)
      -> DataError "FILE:LINE: what is wrong (what to do)";
  empty text (blank after stripping) -> in train/dev: skipped, counted in Examples.skipped and
      reported; in test: kept (test_results.tsv has one row a test example) and counted as well;
  blank lines -> not examples, counted; in test, a blank line with examples after it is a
      DataError (it would shift every later row of test_results.tsv against the input lines);
  xnli lines of another language than zh -> skipped (google's rule), counted.
"""
import collections
import json
import os

from bert_fin.finetune import label_lists
from bert_fin.finetune.classify import google_tasks

OWN_FORMATS = ("jsonl", "tsv")
FORMATS = OWN_FORMATS + tuple(sorted(google_tasks.TASKS))
TEXT, TEXT_B, LABEL = "text", "text_b", "label"
TEST_RESULTS_FILE = "test_results.tsv"
DataError = label_lists.DataError

Example = collections.namedtuple("Example", ["guid", "text_a", "text_b", "label"])
Examples = collections.namedtuple("Examples", ["split", "path", "examples", "skipped",
                                               "blank_lines"])
Examples.__doc__ = """A split's name, file, examples (list of Example, in file order), skipped: {reason:
[line numbers]} of examples left out (train/dev) or kept with a warning (test), blank_lines: int."""


def _file_name(split, data_format):
  if data_format in OWN_FORMATS:
    return "%s.%s" % (split, data_format)
  return google_tasks.TASKS[data_format].files[split]


def split_path(data_dir, split, data_format):
  """The file of `split` in data_dir: <split>.jsonl / <split>.tsv, or google's file name."""
  return os.path.join(data_dir, _file_name(split, data_format))


def format_labels(data_format):
  """google's fixed label list of a google task (cola, mnli, mrpc, xnli), else None."""
  task = google_tasks.TASKS.get(data_format)
  return list(task.labels) if task else None


def _rows(path, split, data_format):
  if data_format == "jsonl":
    return _jsonl_rows(path)
  if data_format == "tsv":
    return _tsv_rows(path)
  return _google_rows(path, split, data_format)


def read_split(data_dir, split, data_format, labels=None):
  """Reads one split. labels: the label list every train/dev label must belong to (None: any).

  Returns Examples. Raises DataError for a missing file or a bad line.
  """
  if data_format not in FORMATS:
    raise DataError("--task_name must be one of %s (the data format), got %r" % (
        ", ".join(FORMATS), data_format))
  path = split_path(data_dir, split, data_format)
  if not os.path.isfile(path):
    raise DataError("%s: no such file (--data_dir must hold %s for --task_name=%s)" % (
        path, ", ".join(_file_name(s, data_format) for s in label_lists.SPLITS), data_format))
  label_set = set(labels) if labels is not None else None
  examples, skipped, blank_lines, blank_line = [], collections.defaultdict(list), 0, None
  for line_number, row in _rows(path, split, data_format):
    if row is None:
      blank_lines += 1
      blank_line = blank_line or line_number
      continue
    if split == "test" and blank_line:
      raise DataError("%s:%d: blank line in the test file: %s has one row a test example in "
                      "input order, so every later row would be shifted against the lines; "
                      "delete it, or give it an empty text to keep a row" % (
                          path, blank_line, TEST_RESULTS_FILE))
    if isinstance(row, str):  # a line the format skips (google's xnli: other languages)
      skipped[row].append(line_number)
      continue
    example = _example(path, split, line_number, row, label_set)
    if not example.text_a.strip():
      skipped["empty text"].append(line_number)
      if split != "test":
        continue
    examples.append(example)
  return Examples(split, path, examples, dict(skipped), blank_lines)


def _jsonl_rows(path):
  """(line number, dict or None for a blank line) for each line."""
  with open(path, encoding="utf-8") as f:
    for line_number, line in enumerate(_decoded(f, path), 1):
      if not line.strip():
        yield line_number, None
        continue
      try:
        row = json.loads(line)
      except ValueError as e:
        raise DataError("%s:%d: not valid JSON (%s): each line must be one JSON object" % (
            path, line_number, e))
      if not isinstance(row, dict):
        raise DataError("%s:%d: a JSON %s, expected an object with %r and %r" % (
            path, line_number, type(row).__name__, TEXT, LABEL))
      yield line_number, row


def _tsv_rows(path):
  """(line number, {column: value} or None for a blank line); the first line is the header."""
  with open(path, encoding="utf-8") as f:
    lines = _decoded(f, path)
    header = next(lines, "").rstrip("\r\n").split("\t")
    if TEXT not in header:
      raise DataError("%s:1: the header %r has no %r column (first line: column names, e.g. "
                      "text<TAB>label or text<TAB>text_b<TAB>label)" % (path, header, TEXT))
    for line_number, line in enumerate(lines, 2):
      line = line.rstrip("\r\n")
      if not line.strip():
        yield line_number, None
        continue
      values = line.split("\t")
      if len(values) != len(header):
        raise DataError("%s:%d: %d tab-separated fields, the header has %d (%s)" % (
            path, line_number, len(values), len(header), ", ".join(header)))
      yield line_number, dict(zip(header, values))


def _google_rows(path, split, data_format):
  with open(path, encoding="utf-8") as f:
    try:
      yield from google_tasks.rows(data_format, path, split, _decoded(f, path))
    except ValueError as e:
      if isinstance(e, DataError):
        raise
      raise DataError(str(e)) from e


def _decoded(lines, path):
  try:
    for line in lines:
      yield line
  except UnicodeDecodeError as e:
    raise DataError("%s: not UTF-8 (%s); convert it, e.g. iconv -f GBK -t UTF-8" % (path, e))


def _example(path, split, line_number, row, label_set):
  where = "%s:%d" % (path, line_number)
  text_a, text_b = row.get(TEXT), row.get(TEXT_B)
  if not isinstance(text_a, str):
    raise DataError("%s: %r must be a string, got %r" % (where, TEXT, text_a))
  if text_b is not None and not isinstance(text_b, str):
    raise DataError("%s: %r must be a string or null, got %r" % (where, TEXT_B, text_b))
  label = row.get(LABEL)
  if isinstance(label, bool) or not (label is None or isinstance(label, (str, int))):
    raise DataError("%s: %r must be a string or an integer, got %r" % (where, LABEL, label))
  label = None if label is None or label == "" else str(label)
  if split != "test":
    if label is None:
      raise DataError("%s: no %r (every %s example needs one)" % (where, LABEL, split))
    if label_set is not None and label not in label_set:
      raise DataError("%s: label %r is not one of the labels %s (from --labels or the training "
                      "set); fix the line or add the label" % (where, label, sorted(label_set)))
  return Example("%s-%d" % (split, line_number), text_a, text_b or None, label)


def labels_from(examples):
  """The sorted distinct labels of the training examples."""
  return sorted({example.label for example in examples})


def describe(examples):
  """One log line: how many examples a file gave and what was skipped or kept with a warning."""
  parts = ["%s: %d examples" % (examples.path, len(examples.examples))]
  for reason, lines in sorted(examples.skipped.items()):
    action = "kept" if examples.split == "test" else "skipped"
    parts.append("%d %s with %s (lines %s%s)" % (
        len(lines), action, reason, ", ".join(map(str, lines[:10])),
        ", ..." if len(lines) > 10 else ""))
  if examples.blank_lines:
    parts.append("%d blank line(s) ignored" % examples.blank_lines)
  return "; ".join(parts)
