"""In-graph dynamic whole-word masking (bert_fin/input/dynamic_masking.py) against static masking
(bert_fin/data/create/masking.py, which the C kernel reproduces byte for byte): the same greedy rule
exactly, the same statistics over a large sample, masks that are a pure function of (seed, epoch,
record position), packed rows masked per sequence with its own budget."""
import collections
import random

import numpy as np
import pytest
import tensorflow as tf

from bert_fin.data.create import masking
from bert_fin.input import dynamic_masking as dm
from bert_fin.records import masking_config
from bert_fin.records import schema

CLS, SEP, MASK = 2, 3, 4
S, P, PROB = 64, 10, 0.15
CONFIG = masking_config.MaskingConfig(MASK, list(range(100, 1100)), PROB, P)
# word sizes of Chinese text after word-piecing: mostly 1-2 tokens, some 3-4, a few long Latin words
WORD_SIZES = [1] * 35 + [2] * 40 + [3] * 12 + [4] * 8 + [5, 6, 7, 8, 12]


def _segment(rng, length):
  groups, at = [], 0
  while at < length:
    size = min(rng.choice(WORD_SIZES), length - at)
    groups.append((at, at + size))
    at += size
  return groups


def _sequence(rng, max_len=S):
  """[CLS] A [SEP] B [SEP] (or [CLS] A [SEP]): (ids, groups) with groups as masking.py takes them."""
  n = rng.randint(5, max_len)
  len_a = rng.randint(1, n - 3) if rng.random() < 0.8 else n - 2
  parts = [(1, len_a)] + ([(len_a + 2, n - len_a - 3)] if len_a < n - 2 else [])
  ids = [rng.randint(100, 5000) for _ in range(n)]
  ids[0] = CLS
  groups = []
  for begin, length in parts:
    ids[begin + length] = SEP
    groups += [(begin + b, begin + e) for b, e in _segment(rng, length)]
  return ids, groups


def _features(sequences, seq_len=S):
  """Decoded dynamic-masking features [N, S] of (ids, groups) sequences."""
  ids = np.zeros([len(sequences), seq_len], np.int32)
  starts = np.zeros([len(sequences), seq_len], np.int32)
  for row, (seq, groups) in enumerate(sequences):
    ids[row, :len(seq)] = seq
    starts[row, :len(seq)] = masking.word_starts(len(seq), groups)
  return {schema.INPUT_IDS: tf.constant(ids), schema.WORD_STARTS: tf.constant(starts),
          schema.INPUT_LEN: tf.constant([len(seq) for seq, _ in sequences], tf.int32)}


def _masks(out, row):
  weights = out[schema.MASKED_LM_WEIGHTS][row]
  k = int(weights.sum())
  return (out[schema.INPUT_IDS][row], out[schema.MASKED_LM_POSITIONS][row][:k].tolist(),
          out[schema.MASKED_LM_IDS][row][:k].tolist(), weights)


def _run(features, seed, epoch, positions, config=CONFIG, **kwargs):
  out = dm.mask_features(features, seed, epoch, tf.constant(positions, tf.int64), config, **kwargs)
  return {name: value.numpy() for name, value in out.items()}


def test_philox_words_are_tensorflows_stateless_generator():
  positions = [0, 3, (5 << 32) + 7, 2 ** 40 + 11]
  epochs = [0, 1, 2, 2 ** 31 + 5]
  words = dm.philox_words(2 ** 40 + 99, tf.constant(epochs, tf.int64),
                          tf.constant(positions, tf.int64), 10).numpy()
  for row, (position, epoch) in enumerate(zip(positions, epochs)):
    counter = [(position & 0xFFFFFFFF) << 32, (position >> 32) | (epoch << 32)]
    want = tf.raw_ops.StatelessRandomUniformFullIntV2(
        shape=[10], key=tf.constant([2 ** 40 + 99], tf.uint64),
        counter=tf.constant(counter, tf.uint64), alg=1, dtype=tf.uint32).numpy()
    assert words[row].tolist() == want.astype(np.int64).tolist()


class _InOrder(object):
  """An rng whose random() is 0: masking.choose_groups then visits the groups in the order given."""

  @staticmethod
  def random():
    return 0.0


def test_take_groups_is_the_static_greedy_rule_exactly():
  """Groups already in visit order, several slots a row: taken exactly as masking.choose_groups
  takes them (whole, skipping a word that does not fit, stopping at the budget)."""
  rng = random.Random(3)
  rows, want_rows = [], []
  width, num_slots = 40, 4
  for _ in range(300):
    sizes, slots, budgets, want = [], [], [], []
    for slot in range(rng.randint(1, num_slots)):
      slot_sizes = [rng.choice(WORD_SIZES) for _ in range(rng.randint(0, 12))]
      budget = rng.randint(1, 25)
      ends = np.cumsum(slot_sizes).tolist()
      groups = [(end - size, end) for size, end in zip(slot_sizes, ends)]  # distinct ranges
      chosen = set(masking.choose_groups(groups, budget, _InOrder()))
      taken = [group in chosen for group in groups]
      sizes += slot_sizes
      slots += [slot] * len(slot_sizes)
      budgets.append(budget)
      want += taken
    pad = width - len(sizes)
    rows.append((sizes + [0] * pad, slots + [num_slots] * pad,
                 budgets + [0] * (num_slots + 1 - len(budgets))))
    want_rows.append(want + [False] * pad)
  sizes, slots, budgets = (tf.constant(np.array(column, np.int32)) for column in zip(*rows))
  taken = dm.take_groups(sizes, slots, budgets).numpy()
  assert taken.tolist() == want_rows


def _static_sample(sequences, draws, seed):
  rng = random.Random(seed)
  out = []
  for ids, groups in sequences:
    for _ in range(draws):
      out.append(masking.create_masked_lm(ids, groups, PROB, P, rng, MASK, CONFIG.random_ids))
  return out


def _dynamic_sample(sequences, draws, seed):
  features = _features(sequences)
  out = []
  per_draw = [_run(features, seed, epoch, np.arange(len(sequences))) for epoch in range(draws)]
  for row in range(len(sequences)):
    for result in per_draw:
      ids, positions, labels, _ = _masks(result, row)
      out.append(masking.MaskedLm(ids[:len(sequences[row][0])].tolist(), positions, labels))
  return out


def _summary(sequences, sample, draws):
  """Statistics of masks: per-draw counts, 80/10/10, chosen word sizes, relative positions."""
  counts, kinds, word_sizes, where = [], collections.Counter(), collections.Counter(), []
  for index, masked in enumerate(sample):
    ids, groups = sequences[index // draws]
    positions = set(masked.positions)
    budget = masking.num_to_predict(len(ids), PROB, P)
    assert len(positions) == len(masked.positions) <= budget  # the cap
    assert masked.label_ids == [ids[p] for p in masked.positions]
    assert masked.positions == sorted(masked.positions)
    for begin, end in groups:  # words are never split
      inside = sum(p in positions for p in range(begin, end))
      assert inside in (0, end - begin)
      if inside:
        word_sizes[min(end - begin, 5)] += 1
    for p in masked.positions:
      assert ids[p] not in (CLS, SEP)
      out = masked.output_ids[p]
      kinds["mask" if out == MASK else "kept" if out == ids[p] else "random"] += 1
      if out not in (MASK, ids[p]):
        assert out in CONFIG.random_ids
      where.append(p / len(ids))
    assert [t for i, t in enumerate(masked.output_ids) if i not in positions] == [
        t for i, t in enumerate(ids) if i not in positions]
    counts.append(len(positions))
  total = sum(kinds.values())
  return {"counts": np.array(counts), "kinds": {k: v / total for k, v in kinds.items()},
          "word_sizes": {k: v / sum(word_sizes.values()) for k, v in word_sizes.items()},
          "where": np.histogram(where, bins=8, range=(0, 1))[0] / len(where)}


def test_statistics_equal_static_masking():
  """The same 600 sequences masked 40 times each by both (24k masks a side, ~150k predictions):
  masked fraction, the 80/10/10 split, the sizes of the words chosen (what google's skip rule
  shapes), where predictions fall, and every mask checked: cap, whole words, labels, specials."""
  rng = random.Random(11)
  sequences = [_sequence(rng) for _ in range(600)]
  draws = 40
  static = _summary(sequences, _static_sample(sequences, draws, 5), draws)
  dynamic = _summary(sequences, _dynamic_sample(sequences, draws, 5), draws)
  # per draw the count is nearly fixed by the budget; a skipped long word can leave it short.
  # Mean over 24k draws: standard error < 0.005 predictions.
  assert abs(static["counts"].mean() - dynamic["counts"].mean()) < 0.02
  assert abs(static["counts"].std() - dynamic["counts"].std()) < 0.02
  # proportions over ~150k predictions: standard error ~0.001 each
  for kind, expected in (("mask", 0.8), ("kept", 0.1), ("random", 0.1)):
    assert abs(dynamic["kinds"][kind] - expected) < 0.006
    assert abs(dynamic["kinds"][kind] - static["kinds"][kind]) < 0.008
  for size in range(1, 6):
    assert abs(dynamic["word_sizes"][size] - static["word_sizes"][size]) < 0.008
  assert np.abs(dynamic["where"] - static["where"]).max() < 0.006


def test_masks_are_a_pure_function_of_seed_epoch_and_position():
  """Same key -> same masks, whatever the batch: a row masked alone, in another batch order or in
  a tf.data map before batching gets the masks it gets in the full batch (1 vs N workers, resume).
  Another epoch, position or seed -> other masks."""
  rng = random.Random(4)
  sequences = [_sequence(rng) for _ in range(12)]
  features = _features(sequences)
  positions = np.arange(100, 112)
  full = _run(features, 7, 3, positions)
  again = _run(features, 7, 3, positions)
  assert all(np.array_equal(full[k], again[k]) for k in full)
  permutation = np.random.RandomState(0).permutation(12)
  shuffled = _run({k: tf.gather(v, permutation) for k, v in features.items()}, 7, 3,
                  positions[permutation])
  for k in full:
    assert np.array_equal(shuffled[k], full[k][permutation])
  dataset = tf.data.Dataset.from_tensor_slices((features, positions)).map(
      lambda f, position: dm.mask_features(f, 7, 3, position, CONFIG))
  for row, example in enumerate(dataset):
    for k in full:
      assert np.array_equal(example[k].numpy(), full[k][row])
  for other in (_run(features, 7, 4, positions), _run(features, 7, 3, positions + 12),
                _run(features, 8, 3, positions)):
    differing = [not np.array_equal(other[schema.MASKED_LM_POSITIONS][r],
                                    full[schema.MASKED_LM_POSITIONS][r]) for r in range(12)]
    assert sum(differing) >= 9  # short sequences may happen to draw the same word again


def _packed_features(sequences, per_row, seq_len):
  """Packs consecutive sequences, per_row at most a row (and at most seq_len tokens)."""
  rows, row = [], []
  for seq in sequences:
    if len(row) == per_row or sum(len(s[0]) for s in row) + len(seq[0]) > seq_len:
      rows.append(row)
      row = []
    row.append(seq)
  rows.append(row)
  ids = np.zeros([len(rows), seq_len], np.int32)
  starts = np.zeros([len(rows), seq_len], np.int32)
  lens = np.zeros([len(rows), per_row], np.int32)
  for r, row in enumerate(rows):
    at = 0
    for k, (seq, groups) in enumerate(row):
      ids[r, at:at + len(seq)] = seq
      starts[r, at:at + len(seq)] = masking.word_starts(len(seq), groups)
      lens[r, k] = len(seq)
      at += len(seq)
  return rows, {schema.INPUT_IDS: tf.constant(ids), schema.WORD_STARTS: tf.constant(starts),
                schema.SEQUENCE_LENS: tf.constant(lens),
                schema.INPUT_LEN: tf.constant(lens.sum(axis=1))}


def test_packed_rows_mask_each_sequence_with_its_own_budget():
  """As packing keeps each sequence's static predictions: every slot of a packed row gets the
  budget of its own length (not the row's), words never cross slots, and per sequence the
  predictions match unpacked dynamic masking in count."""
  rng = random.Random(8)
  sequences = [_sequence(rng, max_len=40) for _ in range(300)]
  packed_len, per_row = 128, 3
  rows, features = _packed_features(sequences, per_row, packed_len)
  width = dm.packed_predictions_width(packed_len, per_row, CONFIG)
  assert width >= 3 * masking.num_to_predict(40, PROB, P)
  slot_counts, unpacked_counts = collections.defaultdict(list), collections.defaultdict(list)
  for epoch in range(8):
    out = _run(features, 1, epoch, np.arange(len(rows)))
    assert out[schema.MASKED_LM_POSITIONS].shape == (len(rows), width)
    for r, row in enumerate(rows):
      _, positions, labels, _ = _masks(out, r)
      assert positions == sorted(positions)
      at = 0
      for seq, groups in row:
        inside = [p - at for p in positions if at <= p < at + len(seq)]
        assert len(inside) <= masking.num_to_predict(len(seq), PROB, P)
        chosen = set(inside)
        for begin, end in groups:
          assert sum(p in chosen for p in range(begin, end)) in (0, end - begin)
        slot_counts[len(seq)].append(len(inside))
        at += len(seq)
      flat_ids = features[schema.INPUT_IDS].numpy()[r]
      assert labels == [flat_ids[p] for p in positions]
    unpacked = _run(_features(sequences), 1, epoch, np.arange(len(sequences)))
    for i, (seq, _) in enumerate(sequences):
      unpacked_counts[len(seq)].append(int(unpacked[schema.MASKED_LM_WEIGHTS][i].sum()))
  mean = lambda values: sum(values) / len(values)
  slot_mean = mean([c for counts in slot_counts.values() for c in counts])
  unpacked_mean = mean([c for counts in unpacked_counts.values() for c in counts])
  assert abs(slot_mean - unpacked_mean) < 0.05
  assert sum(len(v) for v in slot_counts.values()) == 8 * len(sequences)


def test_a_width_rows_could_overflow_is_refused():
  rng = random.Random(1)
  features = _features([_sequence(rng) for _ in range(2)])
  with pytest.raises(ValueError, match="below the 10 predictions"):
    dm.mask_features(features, 1, 0, tf.constant([0, 1], tf.int64), CONFIG, max_predictions=9)
  out = _run(features, 1, 0, [0, 1], max_predictions=12)  # wider is fine: padded
  assert out[schema.MASKED_LM_POSITIONS].shape == (2, 12)
