"""data/packing/plans.py: histogram plans (SPFHP/LPFHP), sequence assignment and packed-array assembly."""
import numpy as np
import pytest

from bert_fin.data.packing import plans
from bert_fin.records import schema


def _random_histogram(rng, max_seq_length, num_sequences):
  lengths = rng.integers(1, max_seq_length + 1, num_sequences)
  return plans.length_histogram(lengths, max_seq_length)


@pytest.mark.parametrize("algorithm", plans.PLANNERS)
@pytest.mark.parametrize("k", [1, 2, 3, 5])
def test_plans_cover_the_histogram_within_limits(algorithm, k):
  rng = np.random.default_rng(k)
  for max_seq_length in (16, 128, 512):
    histogram = _random_histogram(rng, max_seq_length, 5000)
    plan = plans.plan_packs(histogram, k, algorithm)
    np.testing.assert_array_equal(plans.plan_histogram(plan, max_seq_length), histogram)
    for lengths, count in plan:
      assert count > 0 and 1 <= len(lengths) <= k
      assert sum(lengths) <= max_seq_length
      assert list(lengths) == sorted(lengths, reverse=True)
    if k == 1:
      assert plans.plan_stats(plan, max_seq_length).packs == 5000


@pytest.mark.parametrize("algorithm", plans.PLANNERS)
def test_complementary_lengths_pack_perfectly(algorithm):
  histogram = np.zeros(513, np.int64)
  histogram[[300, 212, 400, 56]] = [1000, 1000, 700, 1400]  # 300+212, 400+56+56
  stats = plans.plan_stats(plans.plan_packs(histogram, 3, algorithm), 512)
  assert stats.packs == 1700 and stats.efficiency == 1.0
  assert stats.sequences == 4100 and stats.sequences_per_pack == pytest.approx(4100 / 1700)
  unpacked = (1000 * 300 + 1000 * 212 + 700 * 400 + 1400 * 56) / (4100 * 512)
  assert stats.padding_before == pytest.approx(1 - unpacked)


def test_a_larger_k_packs_fewer_fuller_rows_with_either_planner():
  histogram = np.zeros(129, np.int64)
  histogram[[100, 30, 10]] = [10, 10, 60]
  for algorithm in plans.PLANNERS:
    two = plans.plan_stats(plans.plan_packs(histogram, 2, algorithm), 128)
    many = plans.plan_stats(plans.plan_packs(histogram, 8, algorithm), 128)
    assert many.packs < two.packs and many.efficiency > two.efficiency


def test_bad_histograms_and_names_are_refused():
  with pytest.raises(ValueError, match="histogram\\[0\\]"):
    plans.plan_packs(np.array([1, 2, 3]), 3)
  with pytest.raises(ValueError, match="algorithm"):
    plans.plan_packs(np.array([0, 2, 3]), 3, "nnlshp")
  with pytest.raises(ValueError, match=r"\[1, 8\]"):
    plans.length_histogram([0, 3], 8)


def test_assign_sequences_uses_every_sequence_once_and_is_seeded():
  rng = np.random.default_rng(0)
  lengths = rng.integers(1, 65, 3000)
  plan = plans.plan_packs(plans.length_histogram(lengths, 64), 3)
  packs = plans.assign_sequences(plan, lengths, np.random.default_rng(7))
  flat = sorted(i for p in packs for i in p)
  assert flat == list(range(3000))
  assert all(sum(lengths[p]) <= 64 and len(p) <= 3 for p in packs)
  again = plans.assign_sequences(plan, lengths, np.random.default_rng(7))
  other = plans.assign_sequences(plan, lengths, np.random.default_rng(8))
  assert packs == again and packs != other
  totals = [int(sum(lengths[p])) for p in packs]
  assert totals != sorted(totals) and totals != sorted(totals, reverse=True)  # shuffled
  with pytest.raises(ValueError, match="does not cover"):
    plans.assign_sequences(plan, lengths[1:], np.random.default_rng(7))


def _ragged_sequences(rng, num, max_len, max_predictions):
  lengths = rng.integers(3, max_len + 1, num)
  predictions = np.array([rng.integers(1, min(max_predictions, n) + 1) for n in lengths])
  positions = [np.sort(rng.choice(n, k, replace=False)) for n, k in zip(lengths, predictions)]
  return plans.RaggedSequences(
      tokens=rng.integers(5, 1000, lengths.sum()), segments=rng.integers(0, 2, lengths.sum()),
      lengths=lengths, predicted_positions=np.concatenate(positions),
      predicted_ids=rng.integers(5, 1000, predictions.sum()), num_predictions=predictions,
      next_sentence_labels=rng.integers(0, 2, num))


def _sequence(ragged, i):
  t0, p0 = ragged.lengths[:i].sum(), ragged.num_predictions[:i].sum()
  t1, p1 = t0 + ragged.lengths[i], p0 + ragged.num_predictions[i]
  return (ragged.tokens[t0:t1].tolist(), ragged.segments[t0:t1].tolist(),
          ragged.predicted_positions[p0:p1].tolist(), ragged.predicted_ids[p0:p1].tolist(),
          int(ragged.next_sentence_labels[i]))


def test_packed_arrays_hold_each_sequence_at_its_offset():
  rng = np.random.default_rng(3)
  seq, k, max_predictions = 48, 3, 6
  ragged = _ragged_sequences(rng, 400, seq, max_predictions)
  plan = plans.plan_packs(plans.length_histogram(ragged.lengths, seq), k)
  most = np.zeros(seq + 1, np.int64)
  np.maximum.at(most, ragged.lengths, ragged.num_predictions)
  bound = plans.predictions_bound(plan, most)
  assert max_predictions <= bound <= k * max_predictions
  packs = plans.assign_sequences(plan, ragged.lengths, rng)
  arrays = plans.packed_arrays(ragged, packs, seq, bound, k)
  specs = {s.name: s.length for s in schema.packed_feature_specs(seq, bound, k)}
  assert {name: a.shape[1] for name, a in arrays.items()} == specs
  for row, pack in enumerate(packs):
    lens = arrays[schema.SEQUENCE_LENS][row]
    assert lens.tolist() == ragged.lengths[pack].tolist() + [0] * (k - len(pack))
    start, predicted = 0, 0
    weights = arrays[schema.MASKED_LM_WEIGHTS][row]
    for slot, index in enumerate(pack):
      tokens, segments, positions, ids, label = _sequence(ragged, index)
      end = start + len(tokens)
      assert arrays[schema.INPUT_IDS][row, start:end].tolist() == tokens
      assert arrays[schema.SEGMENT_IDS][row, start:end].tolist() == segments
      span = slice(predicted, predicted + len(positions))
      assert (arrays[schema.MASKED_LM_POSITIONS][row, span] - start).tolist() == positions
      assert arrays[schema.MASKED_LM_IDS][row, span].tolist() == ids
      assert arrays[schema.NEXT_SENTENCE_LABELS][row, slot] == label
      start, predicted = end, predicted + len(positions)
    assert not arrays[schema.INPUT_IDS][row, start:].any()
    assert weights.tolist() == [1.0] * predicted + [0.0] * (bound - predicted)
    assert not arrays[schema.NEXT_SENTENCE_LABELS][row, len(pack):].any()


def test_packed_arrays_refuse_overfull_packs():
  rng = np.random.default_rng(4)
  ragged = _ragged_sequences(rng, 4, 16, 2)
  with pytest.raises(ValueError, match="more than 2"):
    plans.packed_arrays(ragged, [[0, 1, 2]], 64, 8, 2)
  with pytest.raises(ValueError, match="tokens, more than"):
    plans.packed_arrays(ragged, [[0, 1, 2, 3]], 8, 8, 4)
