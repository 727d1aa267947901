"""Training on packed rows: the same losses, metrics and gradients as the same sequences unpacked,
no attention across sequences, positions restarting per sequence, google's variables only."""

import numpy as np
import pytest
import tensorflow.compat.v1 as tf

from helpers import modeling_toys as mt
from bert_fin.data import writer
from bert_fin.data.packing import plans
from bert_fin.modeling import packed
from bert_fin.records import schema
from bert_fin.training.graph import losses as losses_lib
from bert_fin.training.graph import model_fn

UNPACKED_SEQ, PACKED_SEQ, P, K = 20, 32, 4, 3
LENGTHS = [10, 7, 12, 5, 9, 14, 20]
PACKS = [[0, 1, 3], [2, 4], [5], [6]]  # 22, 21, 14, 20 tokens of 32


def _sequences(rng, vocab_size):
  """RaggedSequences of LENGTHS: random tokens, [CLS]-first, two segments, 1..P predictions."""
  tokens, segments, positions, ids, counts = [], [], [], [], []
  for n in LENGTHS:
    tokens.append(rng.randint(5, vocab_size, n))
    segments.append((np.arange(n) >= n // 2).astype(np.int64))
    k = rng.randint(1, P + 1)
    positions.append(np.sort(rng.choice(np.arange(1, n), k, replace=False)))
    ids.append(rng.randint(5, vocab_size, k))
    counts.append(k)
  return plans.RaggedSequences(
      np.concatenate(tokens), np.concatenate(segments), np.array(LENGTHS),
      np.concatenate(positions), np.concatenate(ids), np.array(counts),
      rng.randint(0, 2, len(LENGTHS)))


def _serialized_unpacked(seqs):
  encoder = writer.ExampleEncoder(UNPACKED_SEQ, P)
  out, t, p = [], 0, 0
  for n, k, label in zip(seqs.lengths, seqs.num_predictions, seqs.next_sentence_labels):
    out.append(encoder.encode(seqs.tokens[t:t + n].tolist(), seqs.segments[t:t + n].tolist(),
                              seqs.predicted_positions[p:p + k].tolist(),
                              seqs.predicted_ids[p:p + k].tolist(), int(label)))
    t, p = t + n, p + k
  return out, schema.read_specs(UNPACKED_SEQ, P)


def _serialized_packed(seqs):
  most = P * K
  specs = schema.packed_feature_specs(PACKED_SEQ, most, K)
  arrays = plans.packed_arrays(seqs, PACKS, PACKED_SEQ, most, K)
  encoder = writer.SpecEncoder(specs)
  rows = [{name: a[row].tolist() for name, a in arrays.items()} for row in range(len(PACKS))]
  return [encoder.encode_features(row) for row in rows], specs


def _features(serialized, specs):
  parsed = tf.io.parse_example(tf.constant(serialized), schema.tf_feature_spec(specs))
  return schema.tf_decode_features(parsed)


def _build(config, features):
  """BertModel + losses through the training side (model_fn / losses)."""
  packed = schema.SEQUENCE_LENS in features
  model = model_fn._build_model(config, features, packed, is_training=False, recompute=False)
  return model, losses_lib.pretraining_losses(config, model, features, "bert", packed)


def _metric_values(sess, losses):
  metrics = model_fn.eval_metric_ops(losses)
  sess.run(tf.local_variables_initializer())
  sess.run([update for _, update in metrics.values()])
  return {name: sess.run(value) for name, (value, _) in metrics.items()}


def _run(config, serialized_and_specs, fetch, values=None, seed=0):
  """Builds the model on the records in a fresh graph, loads `values` ({name: array}; None: random
  ones) and returns (fetch(model, losses) evaluated, metrics, gradients by name, values)."""
  with tf.Graph().as_default():
    model, losses = _build(config, _features(*serialized_and_specs))
    variables = tf.trainable_variables()
    gradients = [tf.convert_to_tensor(g)  # gathers give IndexedSlices
                 for g in tf.gradients(losses["total_loss"], variables)]
    fetches = fetch(model, losses)
    with mt.session() as sess:
      sess.run(tf.global_variables_initializer())
      if values is None:
        values = mt.randomize_variables(sess, np.random.RandomState(seed), 0.1, variables)
      else:
        mt.load_values(sess, {v: values[mt.variable_name(v)] for v in variables})
      result, grads = sess.run([fetches, gradients])
      metrics = _metric_values(sess, losses)
  names = [mt.variable_name(v) for v in variables]
  return result, metrics, dict(zip(names, grads)), values


def test_packed_ids_positions_and_starts():
  lens = np.array([[3, 2, 0], [5, 0, 0], [0, 0, 0]], np.int32)
  with tf.Graph().as_default():
    t = tf.constant(lens)
    fetches = [packed.sequence_ids(t, 6), packed.position_ids(t, 6), packed.sequence_starts(t)]
    with mt.session() as sess:
      ids, positions, starts = sess.run(fetches)
  np.testing.assert_array_equal(ids, [[1, 1, 1, 2, 2, 0], [1, 1, 1, 1, 1, 0], [0] * 6])
  np.testing.assert_array_equal(positions, [[0, 1, 2, 0, 1, 0], [0, 1, 2, 3, 4, 0], [0] * 6])
  np.testing.assert_array_equal(starts, [[0, 3, 0], [0, 0, 0], [0, 0, 0]])


def test_packed_and_unpacked_batches_give_the_same_losses_metrics_and_gradients():
  rng = np.random.RandomState(5)
  config = mt.tiny_config()
  seqs = _sequences(rng, config.vocab_size)
  names = ["mlm_loss", "nsp_loss", "total_loss"]

  def fetch(model, losses):
    return dict({n: losses[n] for n in names}, pooled=model.get_pooled_output())

  a, metrics_a, grads_a, values = _run(config, _serialized_unpacked(seqs), fetch)
  b, metrics_b, grads_b, _ = _run(config, _serialized_packed(seqs), fetch, values)
  assert sorted(grads_b) == sorted(grads_a)  # google's variables, nothing new
  assert b["pooled"].shape == (len(PACKS), K, config.hidden_size)
  for name in names:
    assert b[name] == pytest.approx(a[name], rel=1e-5), name
  assert a["nsp_loss"] > 0.0 and a["mlm_loss"] > 0.0
  for name in ("masked_lm_accuracy", "masked_lm_loss", "next_sentence_accuracy",
               "next_sentence_loss"):
    assert metrics_b[name] == pytest.approx(metrics_a[name], rel=1e-5), name
  # attention key biases have a zero gradient (softmax ignores them): float noise there, so the
  # absolute tolerance is relative to the largest gradient of the model
  scale = max(np.abs(g).max() for g in grads_a.values())
  for name, ga in grads_a.items():
    np.testing.assert_allclose(grads_b[name], ga, rtol=1e-5, atol=1e-6 * scale, err_msg=name)
  assert sum(np.abs(g).max() > 1e-3 * scale for g in grads_a.values()) > len(grads_a) - 4


def test_a_sequence_cannot_see_its_neighbours_in_the_pack():
  rng = np.random.RandomState(6)
  config = mt.tiny_config()
  seqs = _sequences(rng, config.vocab_size)
  changed = seqs._replace(tokens=seqs.tokens.copy(), segments=seqs.segments.copy())
  start = LENGTHS[0]  # sequence 2 of pack 0 (index 1) follows sequence 1 (index 0)
  changed.tokens[start:start + LENGTHS[1]] = rng.randint(5, config.vocab_size, LENGTHS[1])
  changed.segments[start:start + LENGTHS[1]] = 1 - changed.segments[start:start + LENGTHS[1]]

  def fetch(model, losses):
    del losses
    return model.get_sequence_output(), model.get_pooled_output()

  (seq_a, pooled_a), _, _, values = _run(config, _serialized_packed(seqs), fetch)
  (seq_b, pooled_b), _, _, _ = _run(config, _serialized_packed(changed), fetch, values)
  first = slice(0, LENGTHS[0])
  np.testing.assert_allclose(seq_b[0, first], seq_a[0, first], rtol=0, atol=1e-6)
  np.testing.assert_allclose(pooled_b[0, 0], pooled_a[0, 0], rtol=0, atol=1e-6)
  second = slice(start, start + LENGTHS[1])
  assert np.abs(seq_b[0, second] - seq_a[0, second]).max() > 1e-3  # the changed one did change
  np.testing.assert_allclose(seq_b[1:], seq_a[1:], rtol=0, atol=1e-6)  # other packs untouched
