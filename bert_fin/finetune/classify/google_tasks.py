"""google-research/bert run_classifier.py's task formats (`--task_name` cola, mnli, mrpc, xnli),
read as google's processors read them.

google's _read_tsv is csv.reader(delimiter="\\t", quotechar=None): no quoting, a line is its
tab-separated fields. Per task (0-based columns):
  cola  train.tsv, dev.tsv (no header): label 1, text 3; test.tsv (header): text 1.
  mrpc  train.tsv, dev.tsv, test.tsv (header): label 0, text_a 3, text_b 4 (test: no label).
  mnli  train.tsv, dev_matched.tsv, test_matched.tsv (header): text_a 8, text_b 9, label the last
        column (test: no label).
  xnli  multinli/multinli.train.zh.tsv (header): text_a 0, text_b 1, label 2 ("contradictory" is
        "contradiction"); xnli.dev.tsv (header): only the lines whose language (column 0) is zh,
        label 1, text_a 6, text_b 7. google has no xnli test reader: xnli.test.tsv is read like the
        dev file (the XNLI release's layout; its labels are real), one test_results.tsv row per zh
        line. Lines of other languages are counted as skipped, never examples.
google writes placeholder labels ("0", "contradiction") for unlabelled test lines; here they have
no label. The label lists are google's get_labels(), in google's order.
"""
import collections

Task = collections.namedtuple("Task", ["files", "labels", "header", "columns"])
Task.__doc__ = """files: {split: path under --data_dir}; labels: google's label list; header:
{split: bool} (first line skipped); columns: {split: fn(fields) -> (text_a, text_b, label) or None
for a line google skips}."""

LANGUAGE = "zh"  # google's XnliProcessor language
OTHER_LANGUAGE = "language other than %s" % LANGUAGE


def _cola(split):
  if split == "test":
    return lambda f: (f[1], None, None)
  return lambda f: (f[3], None, f[1])


def _mrpc(split):
  return lambda f: (f[3], f[4], None if split == "test" else f[0])


def _mnli(split):
  return lambda f: (f[8], f[9], None if split == "test" else f[-1])


def _xnli(split):
  if split == "train":
    return lambda f: (f[0], f[1], "contradiction" if f[2] == "contradictory" else f[2])
  return lambda f: (f[6], f[7], f[1]) if f[0] == LANGUAGE else None


def _task(files, labels, columns, header=(True, True, True)):
  splits = ("train", "dev", "test")
  return Task(dict(zip(splits, files)), labels, dict(zip(splits, header)),
              {split: columns(split) for split in splits})


NLI_LABELS = ["contradiction", "entailment", "neutral"]
TASKS = {
    "cola": _task(("train.tsv", "dev.tsv", "test.tsv"), ["0", "1"], _cola,
                  header=(False, False, True)),
    "mrpc": _task(("train.tsv", "dev.tsv", "test.tsv"), ["0", "1"], _mrpc),
    "mnli": _task(("train.tsv", "dev_matched.tsv", "test_matched.tsv"), NLI_LABELS, _mnli),
    "xnli": _task(("multinli/multinli.train.%s.tsv" % LANGUAGE, "xnli.dev.tsv", "xnli.test.tsv"),
                  NLI_LABELS, _xnli),
}
# The fewest tab-separated fields of a data line, per task and split (train, dev, test).
NEEDED_COLUMNS = {"cola": (4, 4, 2), "mrpc": (5, 5, 5), "mnli": (11, 11, 10), "xnli": (3, 8, 8)}


def needed_columns(name, split):
  """The fewest tab-separated fields a data line of `name`'s `split` file must have."""
  return NEEDED_COLUMNS[name][("train", "dev", "test").index(split)]


def rows(name, path, split, lines):
  """(line number, row) for each line of a google task file, as tasks.read_split wants them:
  None for a blank line, tasks' row dict {"text", "text_b", "label"}, or a skip reason (str).

  lines: the file's decoded lines. Raises ValueError "FILE:LINE: ..." for a short line.
  """
  task = TASKS[name]
  needed = needed_columns(name, split)
  for line_number, line in enumerate(lines, 1):
    if line_number == 1 and task.header[split]:
      continue
    line = line.rstrip("\r\n")
    if not line.strip():
      yield line_number, None
      continue
    fields = line.split("\t")
    if len(fields) < needed:
      raise ValueError("%s:%d: %d tab-separated field(s), google's %s %s file has at least %d "
                       "(is --task_name right?)" % (path, line_number, len(fields), name, split,
                                                    needed))
    values = task.columns[split](fields)
    if values is None:
      yield line_number, OTHER_LANGUAGE
      continue
    text_a, text_b, label = values
    yield line_number, {"text": text_a, "text_b": text_b, "label": label}
