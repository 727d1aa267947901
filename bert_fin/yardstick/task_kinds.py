"""The kinds of fine-tuning task the yardstick (compare_checkpoints) runs, behind one interface.

A kind says which program fine-tunes one cell and how to read what it wrote:

  name              "classification" (run_classifier), "ner" (run_ner), "qa" (run_squad): a
                    new kind is a class like these added to KINDS: nothing else in the
                    yardstick names a kind.
  module            the program, run as `python -m <module> <flags>`.
  formats           its format values (--task ...,format=F); default_format.
  unused_flags      the yardstick's common flags its program does not take (--pooling, ...).
  task_options      the program flags a --task spec may set for its cells (NAME=DIR,flag=value;
                    classification: run_classifier's --long_text, --head_tokens, --doc_stride,
                    --chunk_pooling); check_options(options) refuses a bad value (one line).
  metrics           the figures reported per split (results.md / .csv / plot), best first;
  selection_metric  the one a learning-rate grid is chosen on (dev), CLUE practice.
  check(task)       reads every split once before any training: TaskData (or DataError).
  cell_flags(task, data, settings)  the task's flags of a cell (data, splits to run; settings:
                                     grid.Settings).
  commands(task, data, argv, output_dir)  the program's flag lists a cell runs, in order (one:
                                     argv with --output_dir; qa predicts the test file in a
                                     second).
  results(task, data, output_dir)   {"dev": {metric: float}, "test": {...} or None,
                                     "collapsed": bool (every dev prediction is one class),
                                     "test_examples": float [n, k] lists, each test example's
                                     statistic of the first metric (scoring.py; absent when the
                                     kind has none), "statistic": scoring.MEAN or F1}.
"""
import collections
import json
import os

import numpy as np

from bert_fin.finetune import label_lists
from bert_fin.finetune.classify import entity_markers
from bert_fin.finetune.classify import long_text
from bert_fin.finetune.classify import multi_label
from bert_fin.finetune.classify import tasks
from bert_fin.finetune.ner import data as ner_data
from bert_fin.finetune.ner import metrics as ner_metrics
from bert_fin.finetune.squad import data as squad_data
from bert_fin.finetune.squad import evaluate as squad_evaluate
from bert_fin.training.monitor import eval_results
from bert_fin.yardstick import scoring

TaskSpec = collections.namedtuple("TaskSpec", ["name", "data_dir", "data_format", "kind",
                                               "options", "notes"], defaults=[(), ()])
TaskSpec.__doc__ = """options: ((flag, value), ...) of the kind's task_options, passed to every
cell of the task as --flag=value (e.g. (("long_text", "chunks"),)); notes: sentences results.md
states about the task's data (a benchmark's split and counted skips)."""
TaskData = collections.namedtuple("TaskData", ["texts", "labels", "test_labels", "sizes"])
TaskData.__doc__ = """What the yardstick reads: texts, the training texts (for the [UNK] rate), and
sizes, {split: examples}. The kind's own: labels (classification: the label list; ner: the tag
list; qa: the SQuAD version, "v1.1" or "v2.0") and test_labels (classification: the label index
of each test example; ner: the tags of each test sentence; qa: the test questions; None when the
test split has no labels: test figures are then not reported)."""

METRIC_NAMES = {"accuracy": "accuracy", "macro_f1": "macro-F1", "micro_f1": "micro-F1",
                "f1": "F1", "em": "EM"}


class _Kind(object):
  """What every kind shares: a cell's data flags (the task's files; predict when test is tagged;
  the task's options), one command a cell."""

  task_options = ()

  def check_options(self, options):  # pylint: disable=unused-argument
    """ValueError for an option value the program would refuse (none here)."""

  unused_flags = ()

  def cell_flags(self, task, data, settings=None):
    del settings
    flags = ["--task_name=" + task.data_format, "--data_dir=" + os.path.abspath(task.data_dir),
             "--do_train", "--do_eval"]
    if data.test_labels is not None:
      flags.append("--do_predict")
    return flags + ["--%s=%s" % (flag, value) for flag, value in task.options]

  def commands(self, task, data, argv, output_dir):
    del task, data
    return [argv + ["--output_dir=" + output_dir]]


class Classification(_Kind):
  """Sentence / sentence-pair classification with run_classifier.py."""

  name = "classification"
  module = "run_classifier"
  formats = tasks.FORMATS
  default_format = "jsonl"
  metrics = ("accuracy", "macro_f1")
  selection_metric = "accuracy"
  task_options = ("long_text", "head_tokens", "doc_stride", "chunk_pooling")
  statistic = scoring.MEAN  # of the first metric: accuracy

  def positive(self, labels):  # pylint: disable=unused-argument
    """The labels the kind's micro-F1 counts (scoring.py); None: every label."""
    return None

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
      if flag == "entity_markers" and value not in ("0", "1", "2"):
        raise ValueError("%s=%s: 0, 1 or 2 (the entities marked)" % (flag, value))

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
    figures = scoring.confusion_figures(confusion, data.labels, self.positive(data.labels))
    result = {"dev": {metric: figures[metric] for metric in self.metrics},
              "test": None,
              "collapsed": bool((confusion.sum(axis=0) > 0).sum() <= 1)}
    if data.test_labels is not None:
      probabilities = np.loadtxt(os.path.join(output_dir, tasks.TEST_RESULTS_FILE), ndmin=2)
      if len(probabilities) != len(data.test_labels):
        raise ValueError("%s: %d rows for %d test examples" % (
            output_dir, len(probabilities), len(data.test_labels)))
      predicted = probabilities.argmax(axis=1)
      test = scoring.figures(data.test_labels, predicted, data.labels, self.positive(data.labels))
      result["test"] = {metric: test[metric] for metric in self.metrics}
      result["test_examples"] = scoring.example_statistics(
          data.test_labels, predicted, data.labels, self.positive(data.labels),
          self.statistic).tolist()
      result["statistic"] = self.statistic
    return result


class Relation(Classification):
  """The relation of two marked entities (CFLEB finre): micro-F1 over the relations other than
  NO_RELATION (a "no relation" answer is neither right nor wrong for it), and accuracy."""

  name = "relation"
  task_options = Classification.task_options + ("entity_markers",)
  metrics = ("micro_f1", "accuracy")
  selection_metric = "micro_f1"
  statistic = scoring.F1
  NO_RELATION = "unknown"

  def positive(self, labels):
    return [label for label in labels if label != self.NO_RELATION]

  def check(self, task):
    """Classification's, the texts without their entity markers (their [UNK] rate)."""
    data = super().check(task)
    return data._replace(texts=[entity_markers.strip(text) for text in data.texts])


class EntityLevel(Relation):
  """Entity-level binary judgements, one example per (text, entity) (CFLEB finnsp): F1 of the
  positive label POSITIVE over those pairs (micro-F1 of that one label), and accuracy."""

  name = "entity"
  POSITIVE = "1"

  def positive(self, labels):
    return [self.POSITIVE]


class MultiLabel(Classification):
  """Multi-label classification with run_classifier --multi_label (jsonl/tsv, the label a
  space-separated label set; multi_label.py): micro-, macro- and example-F1, chosen on dev
  micro-F1; test predictions use the thresholds the cell chose on dev (multi_label.json)."""

  name = "multilabel"
  formats = tasks.OWN_FORMATS
  metrics = ("micro_f1", "macro_f1", "example_f1")
  selection_metric = "micro_f1"
  statistic = scoring.F1

  def check(self, task):
    """Reads train, dev and test; every dev / test label name among the training set's.
    Returns TaskData (labels: the label names; test_labels: int [n, L] multi-hot or None)."""
    train = tasks.read_split(task.data_dir, "train", task.data_format)
    labels = multi_label.labels_from(e.label for e in train.examples)
    splits, hot = {"train": train}, {}
    for split in ("dev", "test"):
      splits[split] = tasks.read_split(task.data_dir, split, task.data_format)
      examples = splits[split].examples
      hot[split] = multi_label.multi_hot([e.label for e in examples], labels, [
          "%s (%s)" % (splits[split].path, e.guid) for e in examples])
    for split in ("train", "dev"):
      if not splits[split].examples:
        raise tasks.DataError("%s: no usable example" % splits[split].path)
    if len(labels) < 2:
      raise tasks.DataError("%s: multi-label classification needs at least 2 labels, got %s" % (
          train.path, labels))
    test = splits["test"].examples
    test_labels = hot["test"].tolist() if test and all(e.label for e in test) else None
    texts = [e.text_a for e in train.examples] + [e.text_b for e in train.examples if e.text_b]
    return TaskData(texts, labels, test_labels,
                    {split: len(examples.examples) for split, examples in splits.items()})

  def cell_flags(self, task, data, settings=None):
    return super().cell_flags(task, data, settings) + ["--multi_label"]

  def results(self, task, data, output_dir):
    dev = _read_eval_results(os.path.join(output_dir, eval_results.EVAL_RESULTS_FILE))
    result = {"dev": {metric: float(dev["eval_" + metric]) for metric in self.metrics},
              "test": None, "collapsed": int(dev[multi_label.DISTINCT_KEY]) <= 1}
    if data.test_labels is not None:
      saved = multi_label.read_thresholds(output_dir)
      if saved is None or saved.labels != list(data.labels):
        raise ValueError("%s: no %s for the labels %s" % (
            output_dir, multi_label.THRESHOLDS_FILE, data.labels))
      probabilities = np.loadtxt(os.path.join(output_dir, tasks.TEST_RESULTS_FILE), ndmin=2)
      truth = np.asarray(data.test_labels)
      if probabilities.shape != truth.shape:
        raise ValueError("%s: %s predictions for %s test labels" % (
            output_dir, probabilities.shape, truth.shape))
      predicted = multi_label.predict(probabilities, saved.thresholds)
      result["test"] = multi_label.f1_figures(truth, predicted)
      result["test_examples"] = multi_label.example_statistics(truth, predicted).tolist()
      result["statistic"] = self.statistic
    return result


class NamedEntities(_Kind):
  """Named-entity tagging with run_ner.py: entity-level micro / macro F1 (CoNLL semantics)."""

  name = "ner"
  module = "run_ner"
  formats = ner_data.FORMATS
  default_format = ner_data.AUTO
  unused_flags = ("--pooling",)  # run_ner reads every token
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
      data_format = ner_data.resolve_format(task.data_dir, task.data_format,
                                            label_lists.SPLITS)
      predicted = ner_data.read_predictions(
          os.path.join(output_dir, ner_data.PREDICTIONS_FILE[data_format]), data_format,
          data.labels)
      if [len(tags) for tags in predicted] != [len(tags) for tags in data.test_labels]:
        raise ValueError("%s: its predicted sentences are not the %d test sentences" % (
            output_dir, len(data.test_labels)))
      result["test_examples"] = ner_metrics.sentence_counts(data.test_labels, predicted)
      result["statistic"] = scoring.F1
    return result


class QuestionAnswering(_Kind):
  """Extractive reading comprehension with run_squad.py: EM and F1 (SQuAD's, or CMRC 2018's for
  Chinese contexts: run_squad's --eval_metric=auto), chosen on dev F1. DATA_DIR holds train.json,
  dev.json and test.json in SQuAD's schema (CMRC 2018 / DRCD files as they are). A cell trains
  on train.json and predicts and scores dev.json, then, when test.json has answers, predicts and
  scores it with the fine-tuned model (OUTPUT_DIR/test/). --max_query_length is a quarter of
  --max_seq_length (at most google's 64) and --doc_stride half the context window, so windows
  overlap at any --max_seq_length."""

  name = "qa"
  module = "run_squad"
  formats = ("auto", "v1.1", "v2.0")  # auto: v2.0 when a file has an is_impossible question
  default_format = "auto"
  unused_flags = ("--pooling", "--eval_batch_size")
  metrics = ("f1", "em")
  selection_metric = "f1"
  TEST_DIR = "test"

  @staticmethod
  def _path(task, split):
    return os.path.join(os.path.abspath(task.data_dir), split + ".json")

  def check(self, task):
    """Reads train, dev and test (squad_data.read_file's checks). Returns TaskData."""
    version_2 = task.data_format != "v1.1"
    files = {split: squad_data.read_file(self._path(task, split), version_2,
                                         training=split == "train",
                                         v2_fix="format=v2.0 (or auto) in its --task")
             for split in label_lists.SPLITS}
    if squad_data.unanswered(files["dev"]):
      raise tasks.DataError("%s: questions without answers: the yardstick scores dev" %
                            files["dev"].path)
    impossible = any(q.is_impossible for f in files.values() for q in f.questions)
    version = "v2.0" if task.data_format == "v2.0" or impossible else "v1.1"
    test = files["test"]
    test_labels = None if squad_data.unanswered(test) else test.questions
    train = files["train"]
    texts = train.contexts + [q.question for q in train.questions]
    return TaskData(texts, version, test_labels,
                    {split: len(f.questions) for split, f in files.items()})

  def cell_flags(self, task, data, settings=None):
    flags = ["--train_file=" + self._path(task, "train"), "--do_train",
             "--predict_file=" + self._path(task, "dev"), "--do_eval"]
    if settings is not None:
      query = min(64, settings.max_seq_length // 4)
      flags += ["--max_query_length=%d" % query,
                "--doc_stride=%d" % max(1, (settings.max_seq_length - query - 3) // 2)]
    if data.labels == "v2.0":
      flags.append("--version_2_with_negative")
    return flags

  def commands(self, task, data, argv, output_dir):
    """Train + dev into output_dir; then, with a labelled test.json, the fine-tuned model
    predicts and scores it into output_dir/test."""
    first = argv + ["--output_dir=" + output_dir]
    if data.test_labels is None:
      return [first]
    dropped = ("--do_train", "--train_file=", "--predict_file=", "--init_checkpoint=")
    second = [a for a in argv if not a.startswith(dropped)] + [
        "--predict_file=" + self._path(task, "test"), "--init_checkpoint=" + output_dir,
        "--output_dir=" + os.path.join(output_dir, self.TEST_DIR)]
    return [first, second]

  def results(self, task, data, output_dir):
    def figures(directory):
      values = _read_eval_results(os.path.join(directory, eval_results.EVAL_RESULTS_FILE))
      return {"f1": float(values["eval_f1"]), "em": float(values["eval_exact"])}

    with open(os.path.join(output_dir, "predictions.json"), encoding="utf-8") as f:
      answers = json.load(f)
    result = {"dev": figures(output_dir), "test": None,
              "collapsed": len(set(answers.values())) <= 1}
    if data.test_labels is not None:
      test_dir = os.path.join(output_dir, self.TEST_DIR)
      result["test"] = figures(test_dir)
      metric = _read_eval_results(os.path.join(test_dir, eval_results.EVAL_RESULTS_FILE))[
          "eval_metric"]
      with open(os.path.join(test_dir, "predictions.json"), encoding="utf-8") as f:
        scores = squad_evaluate.question_scores(data.test_labels, json.load(f), metric)
      result["test_examples"] = [[100.0 * scores[q.qas_id][1]] for q in data.test_labels]
      result["statistic"] = scoring.MEAN  # F1 in %, as eval_results.txt
    return result


_read_eval_results = eval_results.read_results_file


KINDS = {kind.name: kind for kind in (Classification(), Relation(), EntityLevel(),
                                          MultiLabel(), NamedEntities(), QuestionAnswering())}
DEFAULT_KIND = Classification.name


def get(name):
  """The kind called `name`; ValueError naming the known ones."""
  if name not in KINDS:
    raise ValueError("unknown task kind %r (known: %s)" % (name, ", ".join(sorted(KINDS))))
  return KINDS[name]
