"""A --task spec of a benchmark format (format=cfleb | clue) -> its converted folder and the
yardstick's TaskSpec.

  converted = convert.read(name, data_dir, data_format, cfleb_task)  # every row checked, in memory
  convert.materialize(converted, directory)                          # files written atomically

read() reads every file of the folder and checks every row before anything is written (a bad row
raises rows.RowError naming file, row and field). The converted folder is what the task's kind
reads: classification kinds train/dev/test.jsonl ({"text", "text_b", "label"}: run_classifier's
jsonl; a relation / entity-level example is its text with its entities marked, entities=markers,
the default, or the pair (its entities, its text), entities=pair: classification_row), qa
train/dev/test.json (SQuAD v1.1 schema: run_squad). Without a separate dev list the
labelled eval file's halves are dev and test (halves.py). Converted.notes says in words what
results.md states: the split, the counted skips, the entities not found in their text.
"""
import collections
import json
import os

from bert_fin import io_utils
from bert_fin.finetune import label_lists
from bert_fin.finetune.classify import entity_markers
from bert_fin.yardstick.benchmarks import cfleb
from bert_fin.yardstick.benchmarks import clue
from bert_fin.yardstick.benchmarks import halves
from bert_fin.yardstick.benchmarks import rows as rows_lib

CFLEB, CLUE = "cfleb", "clue"
FORMATS = (CFLEB, CLUE)
CONVERTED_DIR = "benchmarks"  # OUTPUT_DIR/benchmarks/NAME: the converted folder of task NAME
# the yardstick kind of each benchmark task (task_kinds.KINDS)
CFLEB_KINDS = {"finfe": "classification", "finnl": "multilabel", "finre": "relation",
               "finnsp": "entity", "finese": "qa"}
QA_FORMAT, CLASSIFICATION_FORMAT = "v1.1", "jsonl"
ENTITY_JOINER = "；"
MARKERS, PAIR = "markers", "pair"  # the entities= of a relation / entity-level task
ENTITY_FORMS = (MARKERS, PAIR)
DEFAULT_ENTITY_FORM = MARKERS  # bench/bench_judge.py measured both on the finre sample

Converted = collections.namedtuple("Converted", ["kind", "data_format", "files", "notes",
                                                 "options"])
Converted.__doc__ = """kind: the task_kinds kind; data_format: its format of the converted folder;
files: {file name: text}; notes: [sentence] for results.md; options: {program flag: value} the
cells need (entity_markers)."""


def cfleb_task_of(data_dir, cfleb_task=None):
  """The CFLEB task of a folder: cfleb_task, else the folder's name (lower case); ValueError
  naming the known tasks."""
  task = (cfleb_task or os.path.basename(os.path.normpath(data_dir))).lower()
  if task not in cfleb.TASKS:
    raise ValueError("%s: CFLEB task %r is not one of %s (the folder's name, or pass "
                     "cfleb_task=NAME)" % (data_dir, task, ", ".join(cfleb.TASKS)))
  return task


def _parse_file(path, reader, parse):
  """[Parsed] of every row of path, and {skip reason: count}."""
  parsed, skips = [], collections.Counter()
  for number, row in reader(path):
    result = parse(path, number, row)
    if result.skip:
      skips[result.skip] += 1
    parsed.append(result)
  return parsed, skips


def _splits(data_dir, files, reader, parse):
  """{split: [Parsed]}, {skip reason: count}, the split sentence."""
  train_file, dev_file, eval_file = files
  skips = collections.Counter()
  train, counted = _parse_file(os.path.join(data_dir, train_file), reader, parse)
  skips.update(counted)
  evaluated, counted = _parse_file(os.path.join(data_dir, eval_file), reader, parse)
  skips.update(counted)
  if dev_file and os.path.isfile(os.path.join(data_dir, dev_file)):
    dev, counted = _parse_file(os.path.join(data_dir, dev_file), reader, parse)
    skips.update(counted)
    return {"train": train, "dev": dev, "test": evaluated}, skips, (
        "dev is %s, test is %s" % (dev_file, eval_file))
  dev_rows, test_rows = halves.split_in_half([p.stratum for p in evaluated])
  return ({"train": train, "dev": [evaluated[i] for i in dev_rows],
           "test": [evaluated[i] for i in test_rows]}, skips,
          halves.describe(dev_rows, test_rows, eval_file))


def classification_row(example, entity_form=DEFAULT_ENTITY_FORM):
  """run_classifier's jsonl object of an example. An entity-conditioned example (relation,
  entity-level) is, entity_form MARKERS, its text with its entities marked (entity_markers.mark;
  run_classifier --entity_markers), or, PAIR, the pair text = its entities (ENTITY_JOINER
  between them), text_b = its text: plain [CLS] pair input."""
  if example.entities and entity_form == MARKERS:
    return {"text": entity_markers.mark(example.text, example.entities)[0], "text_b": None,
            "label": example.label}
  if example.entities:
    return {"text": ENTITY_JOINER.join(example.entities), "text_b": example.text,
            "label": example.label}
  return {"text": example.text, "text_b": example.text_b, "label": example.label}


def _classification_file(examples, entity_form):
  return "".join(json.dumps(classification_row(e, entity_form), ensure_ascii=False) + "\n"
                 for e in examples)


def _squad_file(examples, split):
  data = [{"title": "%s-%d" % (split, i), "paragraphs": [{"context": e.text, "qas": [{
      "id": "%s-%d" % (split, i), "question": e.text_b,
      "answers": [{"text": e.label, "answer_start": e.text.index(e.label)}]}]}]}
          for i, e in enumerate(examples)]
  return json.dumps({"version": QA_FORMAT, "data": data}, ensure_ascii=False) + "\n"


def _notes(split_note, skips, missing, examples):
  notes = [split_note]
  for reason, count in sorted(skips.items()):
    notes.append("%d row(s) skipped: %s" % (count, reason))
  for split, count in missing.items():
    if count:
      notes.append("%s: %d of %d examples name an entity not found in their text" % (
          split, count, len(examples[split])))
  return notes


def read(data_dir, data_format, cfleb_task=None, entity_form=DEFAULT_ENTITY_FORM):
  """The Converted folder of a benchmark folder (every row checked); DataError when bad.
  entity_form: how a relation / entity-level example shows its entities (ENTITY_FORMS)."""
  if entity_form not in ENTITY_FORMS:
    raise ValueError("entities=%s: not one of %s" % (entity_form, ", ".join(ENTITY_FORMS)))
  if data_format == CFLEB:
    task = cfleb_task_of(data_dir, cfleb_task)
    kind = CFLEB_KINDS[task]
    files = (cfleb.TRAIN_FILE, cfleb.DEV_FILE, cfleb.EVAL_FILE)
    reader = rows_lib.read_json_list
    parse = lambda path, number, row: cfleb.parse_row(task, path, number, row)  # noqa: E731
  elif data_format == CLUE:
    kind, files, reader = "classification", (clue.TRAIN_FILE, None, clue.EVAL_FILE), (
        rows_lib.read_json_lines)
    parse = clue.parse_row
  else:
    raise ValueError("format %r is not one of %s" % (data_format, ", ".join(FORMATS)))
  parsed, skips, split_note = _splits(data_dir, files, reader, parse)
  examples = {split: [e for p in rows for e in p.examples] for split, rows in parsed.items()}
  for split, found in examples.items():
    if not found:
      raise label_lists.DataError("%s: no usable %s example (%s)" % (data_dir, split, split_note))
  missing = {split: sum(1 for e in found if cfleb.entity_missing(e))
             for split, found in examples.items()}
  options = {}
  if kind == "qa":
    converted = {split + ".json": _squad_file(found, split) for split, found in examples.items()}
    data_format = QA_FORMAT
  else:
    converted = {split + ".jsonl": _classification_file(found, entity_form)
                 for split, found in examples.items()}
    data_format = CLASSIFICATION_FORMAT
    marked = max(len(e.entities) for found in examples.values() for e in found)
    if marked and entity_form == MARKERS:
      options["entity_markers"] = str(marked)
  return Converted(kind, data_format, converted, _notes(split_note, skips, missing, examples),
                   options)


def materialize(converted, directory):
  """Writes the converted files into directory (each atomically); a file already there with the
  same text is left alone, one with other text is a ValueError (its cells read other data)."""
  for name, text in sorted(converted.files.items()):
    path = os.path.join(directory, name)
    if os.path.isfile(path):
      with open(path, encoding="utf-8") as f:
        if f.read() == text:
          continue
      raise ValueError("%s was converted from other data: its finished cells read that; use a "
                       "new --output_dir" % path)
  os.makedirs(directory, exist_ok=True)
  for name, text in sorted(converted.files.items()):
    path = os.path.join(directory, name)
    if not os.path.isfile(path):
      with io_utils.atomic_output(path) as f:
        f.write(text)
  return directory


def place(converted, output_dir, name, staging_root=None):
  """The folder task `name` reads: OUTPUT_DIR/benchmarks/NAME when it exists (its files checked
  against the conversion: materialize), else staging_root/NAME (written there: a run's first
  plan is checked before anything goes into output_dir; None: OUTPUT_DIR/benchmarks/NAME)."""
  final = os.path.join(output_dir, CONVERTED_DIR, name)
  if staging_root is None or os.path.isdir(final):
    return materialize(converted, final)
  return materialize(converted, os.path.join(staging_root, name))


def read_spec(spec, data_dir, options):
  """The Converted folder of a --task spec whose format is a benchmark's (None for another
  format). Rewrites `options` (a parse_spec dict) in place: kind and format become the converted
  folder's; cfleb_task is consumed. ValueError (one line, naming the spec) for a kind= beside a
  benchmark format, cfleb_task= without format=cfleb, or bad data."""
  data_format = options.get("format", "").lower()
  if data_format not in FORMATS:
    for key in ("cfleb_task", "entities"):
      if key in options:
        raise ValueError("--task %s: %s= needs format=cfleb" % (spec, key))
    return None
  if "kind" in options:
    raise ValueError("--task %s: format=%s sets the kind itself: drop kind=" % (spec, data_format))
  if "cfleb_task" in options and data_format != CFLEB:
    raise ValueError("--task %s: cfleb_task= needs format=cfleb" % spec)
  if not os.path.isdir(data_dir):
    raise ValueError("--task %s: %s is not a directory" % (spec, data_dir))
  try:
    converted = read(data_dir, data_format, options.pop("cfleb_task", None),
                     options.pop("entities", DEFAULT_ENTITY_FORM))
  except ValueError as e:
    raise ValueError("--task %s: %s" % (spec, e)) from None
  options["kind"], options["format"] = converted.kind, converted.data_format
  options.update(converted.options)
  return converted
