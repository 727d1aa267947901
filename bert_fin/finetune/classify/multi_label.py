"""Multi-label classification (run_classifier --multi_label): an example carries a set of labels,
written as one label string of space-separated names ("外国 公司"); pure numpy, no TensorFlow.

The model gives one sigmoid probability per label (model.py, binary cross-entropy). A label is
predicted when its probability reaches its threshold; an example with none reaching its
threshold gets its most probable label (every example has at least one). The thresholds are
chosen on dev (choose_thresholds): one global threshold maximising dev micro-F1, and, for each
label with at least MIN_POSITIVES dev positives, its own threshold maximising its dev F1 (the
others keep the global one). They are saved in output_dir/multi_label.json ({"labels": [...],
"thresholds": [...], "global_threshold": t}) and read back with read_thresholds, the one reader.

Figures (f1_figures): micro-F1 (tp, fp, fn summed over labels and examples), macro-F1 (the mean
of the per-label F1), example-F1 (the mean over examples of each example's F1 between its
predicted and true label sets).
"""
import collections
import json
import os

import numpy as np

from bert_fin import io_utils
from bert_fin.finetune import label_lists

SEPARATOR = " "
THRESHOLDS_FILE = "multi_label.json"
CANDIDATES = tuple(np.round(np.arange(0.05, 0.96, 0.05), 2))  # the thresholds tried on dev
MIN_POSITIVES = 5  # dev positives a label needs for a threshold of its own
DISTINCT_KEY = "eval_distinct_predictions"  # eval_results.txt: distinct predicted label sets

Thresholds = collections.namedtuple("Thresholds", ["labels", "thresholds", "global_threshold"])
Thresholds.__doc__ = """A multi-label model's decision rule: labels (the L names, the order of
its outputs), thresholds (float [L]), global_threshold (the dev-chosen global one)."""


def label_names(label):
  """The label names of one example's label string ("外国 公司" -> ["外国", "公司"])."""
  return label.split()


def labels_from(label_strings):
  """The sorted distinct label names of the training examples' label strings."""
  return sorted({name for label in label_strings for name in label_names(label)})


def multi_hot(label_strings, labels, where=None):
  """int32 [n, L]: row i has 1 at each of example i's labels. None (an unlabelled test example):
  a zero row. where: [str] naming each example (FILE:LINE) for the DataError of a label name not
  in `labels`."""
  index = {label: i for i, label in enumerate(labels)}
  rows = np.zeros([len(label_strings), len(labels)], np.int32)
  for i, label in enumerate(label_strings):
    for name in label_names(label or ""):
      if name not in index:
        raise label_lists.DataError("%s: label %r is not one of the labels %s (from --labels or "
                                    "the training set)" % (where[i] if where else "example %d" % i,
                                                           name, labels))
      rows[i, index[name]] = 1
  return rows


def predict(probabilities, thresholds):
  """bool [n, L]: probabilities (float [n, L]) >= thresholds (float [L] or a scalar), and each
  row's most probable label when none reaches its threshold."""
  probabilities = np.asarray(probabilities, np.float64)
  predicted = probabilities >= np.asarray(thresholds, np.float64)
  empty = ~predicted.any(axis=1)
  if probabilities.size:
    predicted[np.flatnonzero(empty), probabilities[empty].argmax(axis=1)] = True
  return predicted


def _f1(tp, fp, fn):
  denominator = 2.0 * tp + fp + fn
  return np.divide(2.0 * tp, denominator, out=np.zeros_like(denominator, dtype=np.float64),
                   where=denominator > 0)


def counts(truth, predicted):
  """float [n, L, 3]: per example and label (tp, fp, fn) of bool/0-1 arrays [n, L]."""
  truth, predicted = np.asarray(truth, bool), np.asarray(predicted, bool)
  return np.stack([truth & predicted, ~truth & predicted, truth & ~predicted],
                  axis=-1).astype(np.float64)


def f1_figures(truth, predicted):
  """{"micro_f1", "macro_f1", "example_f1"} of truth and predictions (0/1 [n, L])."""
  per = counts(truth, predicted)
  total = per.sum(axis=(0, 1))
  per_label = per.sum(axis=0)
  per_example = per.sum(axis=1)
  return {"micro_f1": float(_f1(*total)),
          "macro_f1": float(_f1(per_label[:, 0], per_label[:, 1], per_label[:, 2]).mean()),
          "example_f1": float(_f1(per_example[:, 0], per_example[:, 1],
                                  per_example[:, 2]).mean())}


def example_statistics(truth, predicted):
  """float [n, 3]: each example's (tp, fp, fn) summed over labels (micro-F1's share)."""
  return counts(truth, predicted).sum(axis=1)


def choose_thresholds(truth, probabilities, candidates=CANDIDATES, min_positives=MIN_POSITIVES):
  """(global threshold, float [L] thresholds) chosen on dev (module docstring); a tie keeps the
  candidate nearest 0.5."""
  truth = np.asarray(truth, bool)
  probabilities = np.asarray(probabilities, np.float64)
  by_closeness = sorted(candidates, key=lambda t: (abs(t - 0.5), t))
  best_global = max(by_closeness, key=lambda t: (
      f1_figures(truth, predict(probabilities, t))["micro_f1"], -abs(t - 0.5)))
  thresholds = np.full(truth.shape[1], best_global, np.float64)
  for label in np.flatnonzero(truth.sum(axis=0) >= min_positives):
    column, scores = truth[:, label], {}
    for t in by_closeness:
      tp, fp, fn = counts(column[:, None], probabilities[:, label:label + 1] >= t).sum(
          axis=(0, 1))
      scores[t] = float(_f1(np.float64(tp), np.float64(fp), np.float64(fn)))
    thresholds[label] = max(by_closeness, key=lambda t: (scores[t], -abs(t - 0.5)))
  return float(best_global), thresholds


def write_thresholds(output_dir, record):
  """output_dir/multi_label.json (atomic) of a Thresholds record; returns its path."""
  path = os.path.join(output_dir, THRESHOLDS_FILE)
  io_utils.write_json_atomic(path, {"labels": list(record.labels),
                                    "thresholds": [float(t) for t in record.thresholds],
                                    "global_threshold": float(record.global_threshold)})
  return path


def read_thresholds(directory):
  """The Thresholds of directory/multi_label.json, or None when there is none (not a
  multi-label model); ValueError for a file that is not such a record."""
  path = os.path.join(directory, THRESHOLDS_FILE)
  if not os.path.isfile(path):
    return None
  try:
    with open(path, encoding="utf-8") as f:
      record = json.load(f)
    labels, thresholds = record["labels"], np.asarray(record["thresholds"], np.float64)
    global_threshold = float(record["global_threshold"])
    if (not isinstance(labels, list) or len(labels) != len(thresholds)
        or not all(isinstance(label, str) for label in labels) or thresholds.ndim != 1):
      raise ValueError("labels and thresholds differ in length or type")
  except (ValueError, KeyError, TypeError) as e:
    raise ValueError("%s: not a multi-label record (%s); delete it or train again" % (path, e))
  return Thresholds(labels, thresholds, global_threshold)


def binary_cross_entropy(truth, probabilities):
  """The mean over examples of the summed per-label binary cross-entropy (the training loss)."""
  p = np.clip(np.asarray(probabilities, np.float64), 1e-7, 1.0 - 1e-7)
  truth = np.asarray(truth, np.float64)
  return float(-(truth * np.log(p) + (1.0 - truth) * np.log(1.0 - p)).sum(axis=1).mean())


def dev_report(truth, probabilities, labels):
  """(eval_results dict, Thresholds) of dev: thresholds chosen
  (choose_thresholds), then eval_micro_f1 / eval_macro_f1 / eval_example_f1, eval_loss,
  eval_threshold (global), DISTINCT_KEY and per label eval_{f1,threshold,support}_<label>.

  truth: 0/1 [n, L]; probabilities: float [n, L] (sigmoid); labels: the L names."""
  truth = np.asarray(truth, bool)
  global_threshold, thresholds = choose_thresholds(truth, probabilities)
  predicted = predict(probabilities, thresholds)
  result = {"eval_" + key: value for key, value in f1_figures(truth, predicted).items()}
  result["eval_loss"] = binary_cross_entropy(truth, probabilities)
  result["eval_threshold"] = global_threshold
  result[DISTINCT_KEY] = len({row.tobytes() for row in predicted})
  per_label = counts(truth, predicted).sum(axis=0)
  f1 = _f1(per_label[:, 0], per_label[:, 1], per_label[:, 2])
  for i, label in enumerate(labels):
    name = label_lists.key_part(label)
    result["eval_f1_" + name] = float(f1[i])
    result["eval_threshold_" + name] = float(thresholds[i])
    result["eval_support_" + name] = int(truth[:, i].sum())
  return result, Thresholds(list(labels), thresholds, global_threshold)
