"""CLUE classification folders, as CLUE's downloads lay them out, -> examples.

A folder holds train.json and dev.json (labelled) and test.json (CLUE keeps its labels private:
not read); each is one JSON object a line:
  TNEWS / IFLYTEK   {"sentence", "label", "label_desc"}: single texts; the label is label_desc
                    when the row has one, else label;
  AFQMC / OCNLI / CMNLI  {"sentence1", "sentence2", "label"}: pairs.
A row whose label is "-" (OCNLI / CMNLI: annotators disagreed, no gold label) is a counted skip.
Since test has no labels, dev.json's two halves are dev and test (halves.py).
"""
from bert_fin.yardstick.benchmarks import rows as rows_lib

TRAIN_FILE, EVAL_FILE = "train.json", "dev.json"
NO_GOLD_LABEL = "-"


def _label(path, number, row):
  for field in ("label_desc", "label"):
    value = row.get(field)
    if isinstance(value, int) and not isinstance(value, bool):
      value = str(value)
    if isinstance(value, str) and value.strip():
      return value.strip()
  raise rows_lib.row_error(path, number, "label", "missing or not a string / integer: %r" % (
      row.get("label"),))


def parse_row(path, number, row):
  """The Parsed CLUE row (rows.Parsed; no stratum other than its label); RowError when bad."""
  if "sentence1" in row or "sentence2" in row:
    text = rows_lib.text_field(path, number, row.get("sentence1"), "sentence1")
    text_b = rows_lib.text_field(path, number, row.get("sentence2"), "sentence2")
  else:
    text = rows_lib.text_field(path, number, row.get("sentence"), "sentence")
    text_b = None
  label = _label(path, number, row)
  if label == NO_GOLD_LABEL:
    return rows_lib.Parsed(label, [], "no gold label (\"-\")")
  return rows_lib.Parsed(label, [rows_lib.Example(text, text_b, label, ())], None)
