"""Per-class precision / recall / F1 and macro-F1 from a confusion matrix (pure numpy)."""
import collections

import numpy as np

from bert_fin.finetune import label_lists


def confusion_matrix(true_ids, predicted_ids, num_labels):
  """int64 [L, L]: confusion[i, j] = examples of label i predicted as j."""
  confusion = np.zeros([num_labels, num_labels], np.int64)
  np.add.at(confusion, (np.asarray(true_ids, np.int64), np.asarray(predicted_ids, np.int64)), 1)
  return confusion


def classification_report(confusion, labels):
  """OrderedDict of eval_* figures for eval_results.txt.

  confusion: int [L, L], confusion[i, j] = dev examples of label i predicted as j;
  labels: the L label names. Keys: eval_macro_precision/recall/f1 (unweighted means over the
  labels) and eval_{precision,recall,f1,support}_<label>. A label never predicted has precision
  0, one never present recall 0, and F1 is 0 when precision + recall is 0 (sklearn's
  zero_division=0).
  """
  confusion = np.asarray(confusion, dtype=np.float64)
  if confusion.shape != (len(labels), len(labels)):
    raise ValueError("confusion matrix %s does not match %d labels" % (confusion.shape,
                                                                        len(labels)))
  true_positives = np.diag(confusion)
  predicted = confusion.sum(axis=0)
  support = confusion.sum(axis=1)
  precision = np.divide(true_positives, predicted, out=np.zeros_like(true_positives),
                        where=predicted > 0)
  recall = np.divide(true_positives, support, out=np.zeros_like(true_positives),
                     where=support > 0)
  both = precision + recall
  f1 = np.divide(2 * precision * recall, both, out=np.zeros_like(both), where=both > 0)
  report = collections.OrderedDict()
  report["eval_macro_precision"] = float(precision.mean())
  report["eval_macro_recall"] = float(recall.mean())
  report["eval_macro_f1"] = float(f1.mean())
  for i, label in enumerate(labels):
    name = label_lists.key_part(label)
    report["eval_precision_" + name] = float(precision[i])
    report["eval_recall_" + name] = float(recall[i])
    report["eval_f1_" + name] = float(f1[i])
    report["eval_support_" + name] = int(support[i])
  return report
