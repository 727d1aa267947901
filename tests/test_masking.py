"""Masked-LM maths of the fast mode (bert_fin/data/create/masking.py), on id sequences and word groups."""
import random

import pytest

from bert_fin.data.create import masking
from bert_fin.data.create import pretraining_rules as rules
from bert_fin.records import masking_config
from bert_fin.records import schema

MASK_ID = 4
CLS, SEP = 2, 3


def _random_sequence(rng, num_words):
  """[CLS] words [SEP] words [SEP] with random word lengths; returns ids, starts, is_special."""
  ids, starts, special = [CLS], [False], [True]
  for half in range(2):
    for _ in range(num_words):
      size = rng.choice([1, 1, 1, 2, 3, 4])
      for j in range(size):
        ids.append(rng.randint(100, 999))
        starts.append(j == 0)
        special.append(False)
    ids.append(SEP)
    starts.append(False)
    special.append(True)
  return ids, starts, special


def test_num_to_predict_is_googles_rule():
  assert masking.num_to_predict(128, 0.15, 20) == 19  # round(19.2)
  assert masking.num_to_predict(200, 0.15, 20) == 20  # capped
  assert masking.num_to_predict(3, 0.15, 20) == 1  # at least one
  assert masking.num_to_predict(10, 0.25, 20) == 2  # round(2.5) -> 2, python 3 banker's rounding
  assert masking.num_to_predict(14, 0.25, 20) == 4  # round(3.5) -> 4


def test_word_groups_follow_starts_and_stop_at_specials():
  starts = [False, True, False, True, False, False, True, True, False]
  special = [True, False, False, False, False, True, False, False, True]
  # [CLS] (1,2) (3,4) [SEP] ... a piece right after [SEP] starts a new group even if starts=False
  assert masking.word_groups(starts, special) == [(1, 3), (3, 5), (6, 7), (7, 8)]
  starts[6] = False
  assert masking.word_groups(starts, special) == [(1, 3), (3, 5), (6, 7), (7, 8)]


def test_groups_from_starts_equals_word_groups_per_segment():
  rng = random.Random(4)
  for _ in range(200):
    ids, starts, special = _random_sequence(rng, rng.randint(1, 10))
    starts[1] = rng.random() < 0.5  # a truncated front: first piece may not start a word
    second = special.index(True, 1)
    expected = masking.word_groups(starts, special)
    got = (masking.groups_from_starts(starts[1:second], 1)
           + masking.groups_from_starts(starts[second + 1:-1], second + 1))
    assert got == expected


def test_words_never_split_count_rule_and_labels():
  rng = random.Random(7)
  for trial in range(300):
    ids, starts, special = _random_sequence(rng, rng.randint(1, 30))
    groups = masking.word_groups(starts, special)
    budget = masking.num_to_predict(len(ids), 0.15, 20)
    out = masking.create_masked_lm(ids, groups, 0.15, 20, random.Random(trial), MASK_ID,
                                   list(range(100, 200)))
    chosen = set(out.positions)
    assert len(out.positions) <= budget
    assert out.positions == sorted(out.positions)
    assert out.label_ids == [ids[p] for p in out.positions]
    assert not any(special[p] for p in out.positions)
    for begin, end in groups:  # a group is masked whole or not at all
      inside = [p in chosen for p in range(begin, end)]
      assert all(inside) or not any(inside), (groups, out.positions)
    # google's greedy rule: every unchosen group is too big for the room left at the end
    room = budget - len(out.positions)
    unchosen = [g for g in groups if g[0] not in chosen]
    assert all(end - begin > room for begin, end in unchosen) or room == 0
    # unmasked positions are untouched
    for p, (a, b) in enumerate(zip(ids, out.output_ids)):
      if p not in chosen:
        assert a == b


def test_single_token_words_hit_the_budget_exactly():
  ids = [CLS] + list(range(100, 140)) + [SEP]
  special = [True] + [False] * 40 + [True]
  out = masking.create_masked_lm(ids, masking.word_groups([True] * 42, special), 0.15, 20,
                                 random.Random(1), MASK_ID, [7])
  assert len(out.positions) == masking.num_to_predict(42, 0.15, 20) == 6


def test_80_10_10_frequencies():
  ids = [CLS] + list(range(1000, 1100)) + [SEP]
  special = [True] + [False] * 100 + [True]
  random_ids = list(range(5000, 5100))
  counts = {"mask": 0, "kept": 0, "random": 0}
  rng = random.Random(3)
  for _ in range(2000):
    out = masking.create_masked_lm(ids, masking.word_groups([True] * len(ids), special), 0.15, 20,
                                   rng, MASK_ID, random_ids)
    for p, label in zip(out.positions, out.label_ids):
      token = out.output_ids[p]
      if token == MASK_ID:
        counts["mask"] += 1
      elif token == label:
        counts["kept"] += 1
      else:
        assert token in random_ids
        counts["random"] += 1
  total = sum(counts.values())
  assert total == 2000 * 15
  assert counts["mask"] / total == pytest.approx(0.8, abs=0.01)
  assert counts["kept"] / total == pytest.approx(0.1, abs=0.01)
  assert counts["random"] / total == pytest.approx(0.1, abs=0.01)


def test_the_rules_are_googles_thresholds_exactly():
  """pretraining_rules derives the thresholds from the percentages: they must be the very doubles
  google compares with (create_pretraining_data.py: < 0.8, then < 0.5; NSP < 0.5), or the faithful
  records would drift."""
  assert rules.MASK_PERCENT + rules.KEEP_PERCENT + rules.RANDOM_PERCENT == 100
  assert (rules.MASK_BELOW, rules.KEEP_OF_THE_REST, rules.RANDOM_NEXT_BELOW) == (0.8, 0.5, 0.5)
  assert (rules.RANDOM_FROM, rules.RANDOM_SCALE) == (0.9, 10.0)
  assert rules.uint32_threshold(rules.MASK_BELOW) == 3435973836  # floor(0.8 * 2**32)
  assert rules.kernel_parameters() == (0.5, 0.8, 0.9, 10.0)


def test_chosen_groups_are_uniformly_spread():
  # each of 20 single-token words should be chosen about budget/20 of the time
  ids = [CLS] + list(range(100, 120)) + [SEP]
  special = [True] + [False] * 20 + [True]
  hits = [0] * len(ids)
  rng = random.Random(11)
  for _ in range(4000):
    for p in masking.create_masked_lm(ids, masking.word_groups([True] * 22, special), 0.15, 20,
                                      rng, MASK_ID, [9]).positions:
      hits[p] += 1
  budget = masking.num_to_predict(22, 0.15, 20)
  for p in range(1, 21):
    assert hits[p] / 4000 == pytest.approx(budget / 20, abs=0.03)


def test_word_starts_mark_each_group_and_never_mask_the_rest():
  # [CLS] (1,3) (3,4) [SEP] (5,7) [SEP]: a dynamic record's word_starts reproduce the groups
  groups = [(1, 3), (3, 4), (5, 7)]
  starts = masking.word_starts(8, groups)
  assert starts == [schema.NEVER_MASKED, schema.WORD_BEGINS, schema.WORD_CONTINUES,
                    schema.WORD_BEGINS, schema.NEVER_MASKED, schema.WORD_BEGINS,
                    schema.WORD_CONTINUES, schema.NEVER_MASKED]
  special = [s == schema.NEVER_MASKED for s in starts]
  assert masking.word_groups([s == schema.WORD_BEGINS for s in starts], special) == groups


def test_masking_config_round_trips_through_json():
  vocab = {"[PAD]": 0, "[unused1]": 1, "[UNK]": 2, "[CLS]": 3, "[SEP]": 4, "[MASK]": 5, "a": 6,
           "b": 7, "[unused2]": 8, "c": 9}
  config = masking.masking_config(vocab, 0.15, 20)
  assert config.mask_id == 5 and config.random_ids == [6, 7, 9]
  saved = masking_config.config_to_json(config)
  assert saved["random_id_ranges"] == [[6, 8], [9, 10]]
  assert masking_config.config_from_json(saved) == config
