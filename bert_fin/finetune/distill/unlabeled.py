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

The texts' rows join the labelled rows (mix, row_order): each once, shuffled among them (mixed by
row count), or with --unlabeled_weight W a share W of the training rows, drawn as
run_pretraining's --input_source mixes its sources (input/stream/mixture.py's Schedule: the
share holds within every block of 128 rows).
"""
import collections
import json
import os

import numpy as np

from bert_fin.finetune import label_lists
from bert_fin.finetune.classify import tasks
from bert_fin.finetune.ner import data as ner_data
from bert_fin.input.stream import mixture

FORMATS = (".jsonl", ".txt")
MAX_LINE_CHARS = 1 << 20

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


def mix(arrays, extra, weight, seed, labelled_key, say):
  """{name: array}: the labelled rows `arrays` and the texts' rows `extra` (the same names, rows
  first), with labelled_key int32 [n] (1: a labelled row, 0: a text's), in row_order(weight,
  seed). say(line) is told how many of the texts' rows an epoch reads when --unlabeled_weight
  leaves some out (every epoch reads the same rows)."""
  rows, extra_rows = (len(next(iter(a.values()))) for a in (arrays, extra))
  mixed = {name: np.concatenate([arrays[name], extra[name]]) for name in arrays}
  mixed[labelled_key] = np.concatenate([np.ones([rows], np.int32),
                                        np.zeros([extra_rows], np.int32)])
  order = row_order(rows, extra_rows, weight, seed)
  read = texts_read(order, rows)
  if read < extra_rows:
    say("--unlabeled_weight=%g: an epoch reads %d of the %d text rows (the same %d every "
        "epoch); %d are not read: raise --unlabeled_weight, or drop it to read every text once "
        "an epoch" % (weight, read, extra_rows, read, extra_rows - read))
  return {name: value[order] for name, value in mixed.items()}


def texts_read(order, labelled_rows):
  """How many distinct texts' rows (numbers >= labelled_rows) row_order's `order` reads."""
  return len(np.unique(order[order >= labelled_rows]))


def row_order(labelled_rows, unlabeled_rows, weight, seed):
  """int64 [n]: the training rows of the labelled rows (0 .. labelled_rows - 1) followed by the
  texts' (labelled_rows ..), in the order training reads them, a function of its arguments.

  weight None: every row once, in a seeded random order (n = labelled_rows + unlabeled_rows).
  weight W (0 < W < 1): mixture.Schedule([1 - W, W], seed) says which source each row comes
  from, up to the last labelled row; the labelled rows each once, in a seeded order, the texts
  taking a share W of the rows, cycled (each pass over them in its own seeded order), so n is
  about labelled_rows / (1 - W).
  """
  rng = np.random.RandomState(seed)
  if weight is None:
    return rng.permutation(labelled_rows + unlabeled_rows)
  schedule = mixture.Schedule([1.0 - weight, weight], seed)
  sources = schedule.sources(0, schedule.index_of(0, labelled_rows - 1) + 1)
  wanted = int(np.sum(sources == 1))
  passes = [rng.permutation(unlabeled_rows) for _ in range(-(-wanted // unlabeled_rows))]
  order = np.empty([len(sources)], np.int64)
  order[sources == 0] = rng.permutation(labelled_rows)
  order[sources == 1] = labelled_rows + np.concatenate(passes or [[]])[:wanted]
  return order
