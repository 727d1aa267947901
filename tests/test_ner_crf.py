"""run_ner --use_crf: the in-graph CRF's loss and Viterbi decoding equal brute force over every
tag path, on chains with gaps (## pieces, [CLS], padding) and of one unit."""
import itertools

import numpy as np
import tensorflow.compat.v1 as tf

from bert_fin.finetune.ner import crf as ner_crf


def _brute_force(logits, mask, labels, transitions):
  nlls, best = [], np.zeros_like(mask)
  for row in range(len(mask)):
    positions = np.flatnonzero(mask[row])
    num_labels = logits.shape[-1]

    def score(path, row=row, positions=positions):
      total = sum(logits[row, p, t] for p, t in zip(positions, path))
      return total + sum(transitions[a, b] for a, b in zip(path, path[1:]))

    paths = list(itertools.product(range(num_labels), repeat=len(positions)))
    scores = np.array([score(p) for p in paths])
    log_z = np.log(np.exp(scores - scores.max()).sum()) + scores.max()
    nlls.append(log_z - score(tuple(labels[row, positions])))
    best[row, positions] = paths[int(np.argmax(scores))]
  return np.array(nlls), best


def test_crf_loss_and_viterbi_equal_brute_force():
  rng = np.random.RandomState(3)
  logits = rng.normal(size=[3, 7, 3]).astype(np.float32)
  transitions = rng.normal(size=[3, 3]).astype(np.float32) * 2
  mask = np.array([[0, 1, 1, 0, 1, 1, 0], [0, 1, 0, 0, 0, 0, 0], [0, 1, 1, 1, 1, 1, 0]], np.int32)
  labels = rng.randint(3, size=[3, 7]).astype(np.int32) * mask
  with tf.Graph().as_default():
    nll = ner_crf.log_likelihood_loss(tf.constant(logits), tf.constant(labels), tf.constant(mask),
                                      tf.constant(transitions))
    tags = ner_crf.decode(tf.constant(logits), tf.constant(mask), tf.constant(transitions))
    with tf.Session() as session:
      nll, tags = session.run([nll, tags])
  expected_nll, expected_tags = _brute_force(logits, mask, labels, transitions)
  np.testing.assert_allclose(nll, expected_nll, rtol=1e-5, atol=1e-5)
  np.testing.assert_array_equal(tags, expected_tags)
  # strong transitions change the decoding away from the per-unit argmax
  assert not np.array_equal(tags, logits.argmax(-1) * mask)
