"""The kinds of fine-tuning task the yardstick (compare_checkpoints) runs, behind one interface.

A kind says which program fine-tunes one cell and how to read what it wrote:

  name              "classification" (run_classifier), "ner" (run_ner): a new kind is a class
                    like these two added to KINDS: nothing else in the yardstick names a kind.
  module            the program, run as `python -m <module> <flags>`: a cell is one process.
  formats           its --task_name values; default_format.
  pooling           whether its program takes the yardstick's --pooling.
  task_options      the program flags a --task spec may set for its cells (NAME=DIR,flag=value;
                    classification: run_classifier's --long_text, --head_tokens, --doc_stride,
                    --chunk_pooling); check_options(options) refuses a bad value (one line).
  metrics           the figures reported per split (results.md / .csv / plot), best first;
  selection_metric  the one a learning-rate grid is chosen on (dev), CLUE practice.
  check(task)       reads every split once before any training: TaskData (or DataError).
  cell_flags(task, data)            the task's flags of a cell (data, splits to run).
  results(task, data, output_dir)   {"dev": {metric: float}, "test": {...} or None,
                                     "collapsed": bool (every dev prediction is one class)}.
"""
import collections
import json
import os

import numpy as np

from bert_fin.finetune import label_lists
from bert_fin.finetune.classify import long_text
from bert_fin.finetune.classify import metrics as metrics_lib
from bert_fin.finetune.classify import tasks
from bert_fin.finetune.ner import data as ner_data
from bert_fin.training.monitor import eval_results

TaskSpec = collections.namedtuple("TaskSpec", ["name", "data_dir", "data_format", "kind",
                                               "options"], defaults=[()])
TaskSpec.__doc__ = """options: ((flag, value), ...) of the kind's task_options, passed to every
cell of the task as --flag=value (e.g. (("long_text", "chunks"),))."""
TaskData = collections.namedtuple("TaskData", ["texts", "labels", "test_labels", "sizes"])
TaskData.__doc__ = """What the yardstick reads: texts, the training texts (for the [UNK] rate), and
sizes, {split: examples}. The kind's own: labels (classification: the label list; ner: the tag
list) and test_labels (classification: the label index of each test example; ner: the tags of each
test sentence; None when the test split has no labels: test figures are then not reported)."""

METRIC_NAMES = {"accuracy": "accuracy", "macro_f1": "macro-F1", "micro_f1": "micro-F1"}


class _Kind(object):
  """What every kind shares: a cell's data flags (the task's files; predict when test is tagged;
  the task's options)."""

  task_options = ()

  def check_options(self, options):  # pylint: disable=unused-argument
    """ValueError for an option value the program would refuse (none here)."""

  def cell_flags(self, task, data):
    flags = ["--task_name=" + task.data_format, "--data_dir=" + os.path.abspath(task.data_dir),
             "--do_train", "--do_eval"]
    if data.test_labels is not None:
      flags.append("--do_predict")
    return flags + ["--%s=%s" % (flag, value) for flag, value in task.options]


class Classification(_Kind):
  """Sentence / sentence-pair classification with run_classifier.py."""

  name = "classification"
  module = "run_classifier"
  formats = tasks.FORMATS
  default_format = "jsonl"
  pooling = True
  metrics = ("accuracy", "macro_f1")
  selection_metric = "accuracy"
  task_options = ("long_text", "head_tokens", "doc_stride", "chunk_pooling")

  def check_options(self, options):
    """long_text one of long_text.MODES, chunk_pooling of CHUNK_POOLINGS, head_tokens >= 0 and
    doc_stride >= 1 integers (run_classifier checks them against --max_seq_length)."""
    choices = {"long_text": long_text.MODES, "chunk_pooling": long_text.CHUNK_POOLINGS}
    for flag, value in options:
      if flag in choices and value not in choices[flag]:
        raise ValueError("%s=%s: not one of %s" % (flag, value, ", ".join(choices[flag])))
      if flag in ("head_tokens", "doc_stride") and not (
          value.isdigit() and int(value) >= (flag == "doc_stride")):
        raise ValueError("%s=%s: a whole number >= %d" % (flag, value, flag == "doc_stride"))

  def check(self, task):
    """Reads train, dev and test (tasks.read_split's checks). Returns TaskData."""
    fixed = tasks.format_labels(task.data_format)
    train = tasks.read_split(task.data_dir, "train", task.data_format, labels=fixed)
    labels = fixed or tasks.labels_from(train.examples)
    split_examples = {"train": train}
    for split in ("dev", "test"):
      split_examples[split] = tasks.read_split(task.data_dir, split, task.data_format,
                                               labels=labels)
    for split in ("train", "dev"):
      if not split_examples[split].examples:
        raise tasks.DataError("%s: no usable example" % split_examples[split].path)
    test = split_examples["test"].examples
    test_labels = None
    if test and all(example.label is not None for example in test):
      unknown = sorted({e.label for e in test} - set(labels))
      if unknown:
        raise tasks.DataError("%s: test label(s) %s are not among the training labels %s" % (
            split_examples["test"].path, unknown, labels))
      test_labels = [labels.index(example.label) for example in test]
    texts = [e.text_a for e in train.examples] + [e.text_b for e in train.examples if e.text_b]
    return TaskData(texts, labels, test_labels,
                    {split: len(examples.examples) for split, examples in split_examples.items()})

  def results(self, task, data, output_dir):
    dev = _read_eval_results(os.path.join(output_dir, eval_results.EVAL_RESULTS_FILE))
    confusion = np.array(json.loads(dev["eval_confusion_matrix"]))
    result = {"dev": {"accuracy": float(dev["eval_accuracy"]),
                      "macro_f1": float(dev["eval_macro_f1"])},
              "test": None,
              "collapsed": bool((confusion.sum(axis=0) > 0).sum() <= 1)}
    if data.test_labels is not None:
      probabilities = np.loadtxt(os.path.join(output_dir, tasks.TEST_RESULTS_FILE), ndmin=2)
      if len(probabilities) != len(data.test_labels):
        raise ValueError("%s: %d rows for %d test examples" % (
            output_dir, len(probabilities), len(data.test_labels)))
      result["test"] = scores(data.test_labels, probabilities.argmax(axis=1), len(data.labels))
    return result


class NamedEntities(_Kind):
  """Named-entity tagging with run_ner.py: entity-level micro / macro F1 (CoNLL semantics)."""

  name = "ner"
  module = "run_ner"
  formats = ner_data.FORMATS
  default_format = ner_data.AUTO
  pooling = False
  metrics = ("micro_f1", "macro_f1")
  selection_metric = "micro_f1"

  def check(self, task):
    """Reads train, dev and test (ner_data.read_split's checks). Returns TaskData."""
    data_format = ner_data.resolve_format(task.data_dir, task.data_format, label_lists.SPLITS)
    train = ner_data.read_split(task.data_dir, "train", data_format)
    labels = ner_data.choose_labels(None, ner_data.labels_from(train.sentences, data_format),
                                    None, task.data_dir)
    splits = {"train": train}
    for split in ("dev", "test"):
      splits[split] = ner_data.read_split(task.data_dir, split, data_format, labels=labels)
    if any(s.tags is None for s in splits["dev"].sentences):
      raise tasks.DataError("%s: untagged: the yardstick needs the dev tags" %
                            splits["dev"].path)
    test = splits["test"].sentences
    test_labels = [s.tags for s in test] if all(s.tags is not None for s in test) else None
    texts = [" ".join(s.units) for s in train.sentences]
    return TaskData(texts, labels, test_labels,
                    {split: len(data.sentences) for split, data in splits.items()})

  def results(self, task, data, output_dir):
    dev = _read_eval_results(os.path.join(output_dir, eval_results.EVAL_RESULTS_FILE))
    result = {"dev": {m: float(dev["eval_" + m]) for m in self.metrics}, "test": None,
              "collapsed": int(dev["eval_num_predicted_entities"]) == 0}
    if data.test_labels is not None:
      test = _read_eval_results(os.path.join(output_dir, "test_results.txt"))
      result["test"] = {m: float(test["eval_" + m]) for m in self.metrics}
    return result


def scores(true_ids, predicted_ids, num_labels):
  """{"accuracy", "macro_f1"} of predictions against labels (label indices)."""
  confusion = metrics_lib.confusion_matrix(true_ids, predicted_ids, num_labels)
  report = metrics_lib.classification_report(confusion, [str(i) for i in range(num_labels)])
  return {"accuracy": float(np.trace(confusion) / max(confusion.sum(), 1)),
          "macro_f1": report["eval_macro_f1"]}


def _read_eval_results(path):
  """google's eval_results.txt ('key = value' lines) -> {key: value string}."""
  values = {}
  with open(path, encoding="utf-8") as f:
    for line in f:
      key, _, value = line.partition(" = ")
      values[key.strip()] = value.strip()
  return values


KINDS = {kind.name: kind for kind in (Classification(), NamedEntities())}
DEFAULT_KIND = Classification.name


def get(name):
  """The kind called `name`; ValueError naming the known ones."""
  if name not in KINDS:
    raise ValueError("unknown task kind %r (known: %s)" % (name, ", ".join(sorted(KINDS))))
  return KINDS[name]
