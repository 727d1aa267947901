"""--unlabeled_file: in-domain text without labels, which the student learns from the teacher's
soft targets alone.

Formats, by the file's name:
  .jsonl  one JSON object a line: "text" (str), optional "text_b" (str or null) for pairs; any
          "label" is ignored;
  .txt    one text a line.
Another name is refused (one line) before anything is written. Blank lines and empty texts are
skipped and counted; a bad line (bad JSON, not an object, a non-string text) is a DataError
naming FILE:LINE; a line longer than MAX_LINE_CHARS is refused (an unlabeled corpus holds short
documents; cut longer ones first).

A run_ner teacher reads each text as run_ner reads an untagged CLUENER text (sentences: a run of
ASCII letters / digits one unit, every other character alone; a pair is refused), windowed as
its sentences are.

The texts' rows join the labelled rows (mix, row_order): each once an epoch, shuffled among them
(mixed by row count), or with --unlabeled_weight W a share W of the training rows over the whole
run, drawn as run_pretraining's --input_source mixes its sources (input/stream/mixture.py's
Schedule: the share holds within every block of 128 rows), the texts' passes continuing across
epochs. mix keeps the distinct rows the run reads and their order, so the teacher's logits are
computed once a row (gather: the training arrays).
"""
import collections
import dataclasses
import json
import os

import numpy as np

from bert_fin.finetune import estimator_skeleton
from bert_fin.finetune import label_lists
from bert_fin.finetune.classify import tasks
from bert_fin.finetune.ner import data as ner_data
from bert_fin.input.stream import mixture

FORMATS = (".jsonl", ".txt")
MAX_LINE_CHARS = 1 << 20
ORDER = "row_order"  # mixed.order's name in the teacher logits' fingerprint

Unlabeled = collections.namedtuple("Unlabeled", ["path", "examples", "skipped"])
Unlabeled.__doc__ = """path; examples: [tasks.Example] (label None), in file order; skipped:
{reason: count} of the lines left out."""


def check_format(path):
  """ValueError naming --unlabeled_file for a missing file or a name of an unknown format."""
  extension = os.path.splitext(path)[1].lower()
  if extension not in FORMATS:
    raise ValueError("--unlabeled_file %s: unknown format %r: name it .jsonl (one {\"text\": "
                     "...} a line) or .txt (one text a line)" % (path, extension or path))
  if not os.path.isfile(path):
    raise ValueError("--unlabeled_file %s: no such file" % path)


def _texts(path, line_number, line):
  """(text, text_b or None) of one non-blank line; DataError naming FILE:LINE."""
  where = "%s:%d" % (path, line_number)
  if path.lower().endswith(".txt"):
    return line.strip(), None
  try:
    row = json.loads(line)
  except ValueError as e:
    raise label_lists.DataError("%s: not valid JSON (%s): each line must be one JSON object" %
                                (where, e))
  if not isinstance(row, dict):
    raise label_lists.DataError("%s: a JSON %s, expected an object with %r" % (
        where, type(row).__name__, tasks.TEXT))
  text, text_b = row.get(tasks.TEXT), row.get(tasks.TEXT_B)
  if not isinstance(text, str) or not (text_b is None or isinstance(text_b, str)):
    raise label_lists.DataError("%s: %r must be a string (and %r a string or null)" % (
        where, tasks.TEXT, tasks.TEXT_B))
  return text, text_b or None


def read(path):
  """Unlabeled of the file (check_format first); DataError for a bad line or a file not UTF-8."""
  check_format(path)
  examples, skipped = [], collections.Counter()
  with open(path, encoding="utf-8") as f:
    try:
      for line_number, line in enumerate(f, 1):
        if len(line) > MAX_LINE_CHARS:
          raise label_lists.DataError("%s:%d: a line of more than %d characters: cut long "
                                      "documents first" % (path, line_number, MAX_LINE_CHARS))
        if not line.strip():
          skipped["blank line"] += 1
          continue
        text, text_b = _texts(path, line_number, line)
        if not text.strip():
          skipped["empty text"] += 1
          continue
        examples.append(tasks.Example("unlabeled-%d" % line_number, text, text_b, None))
    except UnicodeDecodeError as e:
      raise label_lists.DataError("%s: not UTF-8 (%s); convert it, e.g. iconv -f GBK -t UTF-8"
                                  % (path, e))
  if not examples:
    raise label_lists.DataError("%s: no text (%s)" % (path, ", ".join(
        "%d %s" % (n, reason) for reason, n in sorted(skipped.items())) or "empty file"))
  return Unlabeled(path, examples, dict(skipped))


def describe(unlabeled):
  """One line: how many texts were read, what was skipped."""
  line = "%s: %d unlabeled texts (the teacher's soft targets only)" % (
      unlabeled.path, len(unlabeled.examples))
  if unlabeled.skipped:
    line += "; skipped: %s" % ", ".join("%d %s" % (n, reason)
                                       for reason, n in sorted(unlabeled.skipped.items()))
  return line


def sentences(unlabeled):
  """[ner_data.Sentence] of the texts for a tagger: units as run_ner cuts an untagged CLUENER
  text (ner_data.cluener_units), tags None, line: the text's number (from 1). DataError naming
  the file and the text (its guid: unlabeled-LINE) for a pair (text_b): a tagger reads one
  text."""
  result = []
  for number, example in enumerate(unlabeled.examples, 1):
    if example.text_b is not None:
      raise label_lists.DataError("%s: %s is a pair (\"text_b\"): a run_ner teacher tags one "
                                  "text a line; drop text_b" % (unlabeled.path, example.guid))
    units, offsets = ner_data.cluener_units(example.text_a)
    result.append(ner_data.Sentence(units, None, number, offsets))
  return result


Mixed = collections.namedtuple("Mixed", ["rows", "order"])
Mixed.__doc__ = """rows: {name: array} of the distinct rows the run reads (the labelled rows
read, then the texts read, in file order), with the labelled key int32 [d] (1: a labelled row,
0: a text's); order: int64 [n], the rows' numbers in the order training reads them (gather
turns it into the training arrays)."""


def mix(arrays, extra, weight, seed, labelled_key, say, epochs=1.0):
  """Mixed of the labelled rows `arrays` and the texts' rows `extra` (the same names, rows
  first) in row_order(weight, seed, epochs). say(line) is told how many of the texts' rows the
  whole run never reads when --unlabeled_weight leaves some out."""
  rows, extra_rows = (len(next(iter(a.values()))) for a in (arrays, extra))
  mixed = {name: np.concatenate([arrays[name], extra[name]]) for name in arrays}
  mixed[labelled_key] = np.concatenate([np.ones([rows], np.int32),
                                        np.zeros([extra_rows], np.int32)])
  order = row_order(rows, extra_rows, weight, seed, epochs)
  read = texts_read(order, rows)
  if read < extra_rows:
    say("--unlabeled_weight=%g: the run (%g epochs) reads %d of the %d text rows; %d are never "
        "read: raise --unlabeled_weight or the epochs, or drop --unlabeled_weight to read every "
        "text once an epoch" % (weight, epochs, read, extra_rows, extra_rows - read))
  distinct = np.unique(order)
  return Mixed({name: value[distinct] for name, value in mixed.items()},
               np.searchsorted(distinct, order))


def mix_for_run(arrays, extra, settings, dist, labelled_key, say):
  """mix of run_distill's flags: --unlabeled_weight, --seed, and (weighted) the epochs of the
  run (run_epochs: --num_train_epochs, or what --num_train_steps spans)."""
  weight, seed = settings.distill.unlabeled_weight, settings.execution.seed
  epochs = 1.0
  if weight is not None:
    rows, extra_rows = (len(next(iter(a.values()))) for a in (arrays, extra))
    epochs = run_epochs(settings.optimizer.num_train_steps, settings.optimizer.num_train_epochs,
                        settings.data.train_batch_size * dist.size,
                        len(row_order(rows, extra_rows, weight, seed)))
  return mix(arrays, extra, weight, seed, labelled_key, say, epochs)


def train_steps(settings, mixed, dist, what):
  """(num_train_steps, num_warmup_steps) over mixed.order: estimator_skeleton.train_steps, the
  epochs counted by --num_train_epochs over a one-epoch order (no --unlabeled_weight), or 1 over
  a weighted order (the whole run's: read once, int(rows / global batch) steps)."""
  if settings.distill.unlabeled_weight is not None:
    settings = dataclasses.replace(settings, optimizer=dataclasses.replace(
        settings.optimizer, num_train_epochs=1.0))
  return estimator_skeleton.train_steps(settings, len(mixed.order), dist, what)


def gather(mixed, extra=None):
  """{name: array [n, ...]}: the rows of mixed.rows (and of `extra`, {name: array} row-aligned
  with them, e.g. the teacher's logits) in mixed.order: the arrays training reads."""
  rows = dict(mixed.rows, **(extra or {}))
  return {name: value[mixed.order] for name, value in rows.items()}


def teacher_rows(train_arrays, mixed):
  """(rows the teacher reads, {name: array} its logits' fingerprint covers): the training rows
  both, without --unlabeled_file (mixed None); else the distinct rows mixed.rows, and those with
  ORDER: mixed.order (a changed order, --unlabeled_weight, --seed or epochs, is another run's)."""
  if mixed is None:
    return train_arrays, train_arrays
  return mixed.rows, dict(mixed.rows, **{ORDER: mixed.order})


def with_teacher_logits(train_arrays, mixed, key, logits):
  """The training arrays and the teacher's logits under `key`: logits are of teacher_rows' rows,
  gathered by mixed.order when there is one."""
  if mixed is None:
    return dict(train_arrays, **{key: logits})
  return dict(train_arrays, **{key: logits[mixed.order]})


def run_epochs(num_train_steps, num_train_epochs, rows_per_step, one_epoch_rows):
  """The epochs a weighted whole-run order covers: --num_train_epochs, or with --num_train_steps
  the epochs its rows (steps x rows_per_step: batch x workers) span over one_epoch_rows (the
  length of a one-epoch order), at least one."""
  if not num_train_steps:
    return num_train_epochs
  return max(1.0, num_train_steps * rows_per_step / one_epoch_rows)


def texts_read(order, labelled_rows):
  """How many distinct texts' rows (numbers >= labelled_rows) row_order's `order` reads."""
  return len(np.unique(order[order >= labelled_rows]))


def row_order(labelled_rows, unlabeled_rows, weight, seed, epochs=1.0):
  """int64 [n]: the training rows of the labelled rows (0 .. labelled_rows - 1) followed by the
  texts' (labelled_rows ..), in the order training reads them, a function of its arguments.

  weight None: one epoch, every row once, in a seeded random order (n = labelled_rows +
  unlabeled_rows); training repeats it --num_train_epochs times. `epochs` is not read.
  weight W (0 < W < 1): the whole run, read once. mixture.Schedule([1 - W, W], seed) says which
  source each row comes from (the share W within every block of 128 rows), up to the last
  labelled row; the labelled rows each once an epoch, every epoch in its own seeded order,
  round(epochs x labelled_rows) of them in all (a fractional last epoch reads the first rows of
  its order; at least one row); the texts the rest, their seeded passes (each pass every text
  once) continuing across epoch boundaries, so every text is read before any repeats. n is
  about epochs x labelled_rows / (1 - W).
  """
  rng = np.random.RandomState(seed)
  if weight is None:
    return rng.permutation(labelled_rows + unlabeled_rows)
  labelled_total = max(1, int(round(epochs * labelled_rows)))
  schedule = mixture.Schedule([1.0 - weight, weight], seed)
  sources = schedule.sources(0, schedule.index_of(0, labelled_total - 1) + 1)
  wanted = int(np.sum(sources == 1))
  passes = [rng.permutation(unlabeled_rows) for _ in range(-(-wanted // unlabeled_rows))]
  labelled_passes = [rng.permutation(labelled_rows)
                     for _ in range(-(-labelled_total // labelled_rows))]
  order = np.empty([len(sources)], np.int64)
  order[sources == 0] = np.concatenate(labelled_passes)[:labelled_total]
  order[sources == 1] = labelled_rows + np.concatenate(passes or [[]])[:wanted]
  return order
