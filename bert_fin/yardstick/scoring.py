"""The yardstick's figures of classification-like tasks from labels and predictions, and each
test example's share of them (what bootstrap.py resamples). Pure numpy.

  accuracy   share of examples whose predicted label is the true one;
  macro_f1   the unweighted mean of the per-label F1 (classify/metrics.py);
  micro_f1   F1 over the `positive` labels only (a relation task's labels other than its
             "no relation" label; an entity-level task's one positive label, reported as f1):
             tp = predicted a positive label and right, fp = predicted a positive label and
             wrong, fn = a positive true label not predicted. Without `positive`: every label.

Example statistics: a [n, k] array whose column sums give the figure: accuracy: [correct]
(statistic MEAN: the sum over n); F1 figures: [tp, fp, fn] (statistic F1: 2tp / (2tp+fp+fn)).
"""
import numpy as np

from bert_fin.finetune.classify import metrics as metrics_lib

MEAN, F1 = "mean", "f1"


def f1_of(tp, fp, fn):
  """2tp / (2tp + fp + fn), 0 when there is nothing to count."""
  denominator = 2.0 * tp + fp + fn
  return float(2.0 * tp / denominator) if denominator > 0 else 0.0


def positive_mask(labels, positive=None):
  """bool [L]: the labels a micro-F1 counts (positive: label names; None: all)."""
  return np.array([positive is None or label in positive for label in labels], bool)


def confusion_figures(confusion, labels, positive=None):
  """{"accuracy", "macro_f1", "micro_f1"} of a confusion matrix (int [L, L], rows true,
  columns predicted) over label names `labels`."""
  confusion = np.asarray(confusion, np.float64)
  mask = positive_mask(labels, positive)
  tp = float(np.diag(confusion)[mask].sum())
  predicted = float(confusion[:, mask].sum())
  gold = float(confusion[mask, :].sum())
  report = metrics_lib.classification_report(confusion, [str(label) for label in labels])
  return {"accuracy": float(np.trace(confusion) / max(confusion.sum(), 1.0)),
          "macro_f1": report["eval_macro_f1"],
          "micro_f1": f1_of(tp, predicted - tp, gold - tp)}


def figures(true_ids, predicted_ids, labels, positive=None):
  """confusion_figures of label indices (int [n] each)."""
  confusion = metrics_lib.confusion_matrix(true_ids, predicted_ids, len(labels))
  return confusion_figures(confusion, labels, positive)


def example_statistics(true_ids, predicted_ids, labels, positive=None, statistic=MEAN):
  """float [n, k] each test example's statistic (module docstring): MEAN [correct], or F1 [tp,
  fp, fn] over the positive labels."""
  true_ids = np.asarray(true_ids, np.int64)
  predicted_ids = np.asarray(predicted_ids, np.int64)
  if statistic == MEAN:
    return (true_ids == predicted_ids).astype(np.float64)[:, None]
  mask = positive_mask(labels, positive)
  predicted_positive, true_positive = mask[predicted_ids], mask[true_ids]
  right = true_ids == predicted_ids
  tp = predicted_positive & right
  fp = predicted_positive & ~right
  fn = true_positive & ~right
  return np.stack([tp, fp, fn], axis=1).astype(np.float64)


def statistic_value(summed, count, statistic):
  """The figure of column sums `summed` (float [k]) over `count` examples."""
  if statistic == MEAN:
    return float(summed[0] / count) if count else 0.0
  return f1_of(summed[0], summed[1], summed[2])
