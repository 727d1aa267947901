"""Documents read as windows (--long_text=chunks): eval figures and predictions per document.

The model sees windows (features.Encoded rows, doc_index naming each row's document); a document's
logits pool those of its windows (long_text.pool_logits: mean or max), its probabilities are their
softmax. Eval figures are google's names over documents, not windows:
  eval_accuracy     share of dev documents whose argmax is their label;
  eval_loss         mean cross-entropy of the documents' pooled logits;
  confusion matrix  rows = true labels, over documents (metrics.classification_report's input);
  global_step       the step of the checkpoint read (0: none, an initialised model).
"""
import numpy as np
import tensorflow.compat.v1 as tf

from bert_fin.finetune import batches
from bert_fin.finetune.classify import long_text
from bert_fin.finetune.classify import metrics
from bert_fin.finetune.classify import model as classifier


def window_logits(estimator, encoded, batch_size):
  """float64 [R, L]: the logits of every row of `encoded` (features.Encoded), in row order."""
  rows = [prediction["logits"] for prediction in estimator.predict(
      input_fn=batches.input_fn_builder(encoded.arrays, batch_size, False))]
  expected = len(encoded.doc_index)
  if len(rows) != expected:
    raise RuntimeError("predicted %d windows for %d" % (len(rows), expected))
  return np.asarray(rows, np.float64).reshape([expected, -1])


def document_probabilities(estimator, encoded, batch_size, how):
  """(pooled logits float64 [N, L], probabilities float64 [N, L]): one row a document (example),
  in example order; how: long_text.MEAN or MAX."""
  pooled = long_text.pool_logits(window_logits(estimator, encoded, batch_size),
                                 encoded.doc_index, encoded.num_examples, how)
  return pooled, long_text.softmax(pooled)


def document_labels(encoded):
  """int [N]: each document's label id (the label of its first window)."""
  first = np.searchsorted(encoded.doc_index, np.arange(encoded.num_examples))
  return encoded.arrays[batches.LABEL_IDS][first]


def evaluation(pooled, true_ids, num_labels):
  """{eval_accuracy, eval_loss, CONFUSION_MATRIX int64 [L, L]} of documents' pooled logits
  float [N, L] against their label ids int [N]."""
  pooled = np.asarray(pooled, np.float64)
  true_ids = np.asarray(true_ids, np.int64)
  shifted = pooled - pooled.max(axis=1, keepdims=True)
  log_probs = shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))
  predicted = pooled.argmax(axis=1)
  return {"eval_accuracy": float(np.mean(predicted == true_ids)),
          "eval_loss": float(-log_probs[np.arange(len(true_ids)), true_ids].mean()),
          classifier.CONFUSION_MATRIX: metrics.confusion_matrix(true_ids, predicted, num_labels)}


def checkpoint_step(estimator):
  """The global step of the checkpoint the estimator reads (0 without one)."""
  checkpoint = estimator.latest_checkpoint()
  if not checkpoint:
    return 0
  return int(tf.train.load_variable(checkpoint, tf.GraphKeys.GLOBAL_STEP))


def evaluate(estimator, encoded, num_labels, batch_size, how):
  """The eval result dict of the dev documents (module docstring): eval_accuracy, eval_loss,
  confusion_matrix (int64 [L, L]), global_step."""
  pooled, _ = document_probabilities(estimator, encoded, batch_size, how)
  result = evaluation(pooled, document_labels(encoded), num_labels)
  result["global_step"] = checkpoint_step(estimator)
  return result
