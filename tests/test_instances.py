"""Instance creation: fast mode (data/create/instances.py) and google's faithful algorithm (data/create/faithful.py)."""
import random

from bert_fin.data.create import faithful
from bert_fin.data.create import fast
from bert_fin.data.create import instances
from bert_fin.data.create import options as options_lib

CLS, SEP, MASK = 2, 3, 4


class RecordingRandom(random.Random):
  """random.Random that logs the public calls google's algorithm makes."""

  def __init__(self, seed):
    super().__init__(seed)
    self.calls = []

  def getrandbits(self, k):  # keeps random.Random's getrandbits-based _randbelow (same stream)
    return super().getrandbits(k)

  def random(self):
    value = super().random()
    self.calls.append(("random", value))
    return value

  def randint(self, a, b):
    value = super().randint(a, b)
    self.calls.append(("randint", a, b, value))
    return value

  def shuffle(self, x):
    self.calls.append(("shuffle", len(x)))
    return super().shuffle(x)


def _doc(rng, num_sentences, max_len=12, base=100):
  doc = []
  for _ in range(num_sentences):
    n = rng.randint(1, max_len)
    doc.append(instances.Sentence([rng.randint(base, base + 500) for _ in range(n)],
                                  [rng.random() < 0.6 for _ in range(n)]))
  return doc


def _config(objective="bert", max_seq_length=32):
  return instances.InstanceConfig(max_seq_length, 5, 0.15, 0.1, objective, CLS, SEP, MASK,
                                  list(range(100, 600)))


def test_truncation_counts_equal_googles_and_fronts_are_fair():
  for seed in range(300):
    rng = random.Random(seed)
    len_a, len_b, limit = rng.randint(1, 60), rng.randint(1, 60), rng.randint(2, 40)
    a, b = list(range(len_a)), list(range(100, 100 + len_b))
    faithful.truncate_seq_pair(a, b, limit, random.Random(seed))
    removed = instances.truncation_counts(len_a, len_b, limit)
    assert removed == (len_a - len(a), len_b - len(b))
    (a_lo, a_hi), (b_lo, b_hi) = instances.truncate_pair(len_a, len_b, limit, random.Random(seed))
    assert (a_hi - a_lo, b_hi - b_lo) == (len(a), len(b))
    assert 0 <= a_lo <= a_hi <= len_a and 0 <= b_lo <= b_hi <= len_b
  # the front share of removals is 1/2, as google's per-token coin
  rng = random.Random(1)
  fronts = sum(instances.truncate_pair(40, 0, 10, rng)[0][0] for _ in range(2000))
  assert abs(fronts / (2000 * 30) - 0.5) < 0.01


def test_nsp_instances_are_well_formed():
  rng = random.Random(5)
  block = [_doc(rng, rng.randint(1, 8)) for _ in range(6)]
  config = _config()
  seen_random = seen_real = 0
  for position in range(len(block)):
    for dupe in range(5):
      for inst in instances.create_document_instances(block, position, config,
                                                      random.Random(dupe * 100 + position)):
        ids, seg = inst.input_ids, inst.segment_ids
        assert len(ids) == len(seg) <= config.max_seq_length
        assert ids[0] == CLS and ids[-1] == SEP and ids.count(SEP) - ids[1:-1].count(SEP) >= 1
        first_sep = seg.index(1) - 1
        assert ids[first_sep] == SEP and first_sep >= 2 and len(ids) - first_sep >= 3
        assert seg == [0] * (first_sep + 1) + [1] * (len(ids) - first_sep - 1)
        assert CLS not in [ids[p] for p in inst.masked_lm_positions if inst.masked_lm_ids]
        assert all(ids[p] != SEP or inst.masked_lm_ids[i] != SEP
                   for i, p in enumerate(inst.masked_lm_positions))
        seen_random += inst.next_sentence_label
        seen_real += 1 - inst.next_sentence_label
  assert seen_random and seen_real


def test_roberta_spans_are_contiguous_full_sentences():
  rng = random.Random(9)
  doc = _doc(rng, 20, max_len=25)
  config = _config("roberta", max_seq_length=20)
  all_ids = [t for s in doc for t in s.ids]
  for seed in range(20):
    spans = list(instances.full_sentence_spans(doc, 20, 0.1, random.Random(seed)))
    assert [t for ids, _ in spans for t in ids] == all_ids  # nothing dropped, order kept
    assert all(1 <= len(ids) <= 18 for ids, _ in spans)
    for inst in instances.create_document_instances([doc], 0, config, random.Random(seed)):
      assert inst.segment_ids == [0] * len(inst.input_ids) and inst.next_sentence_label == 0
      assert inst.input_ids[0] == CLS and inst.input_ids[-1] == SEP


def test_document_rng_depends_only_on_seed_document_and_dupe():
  a = fast.document_rng(12345, 7, 2).random()
  assert a == fast.document_rng(12345, 7, 2).random()
  assert a != fast.document_rng(12345, 7, 3).random()
  assert a != fast.document_rng(12345, 8, 2).random()
  assert a != fast.document_rng(12346, 7, 2).random()


class _Vocab(object):
  def __init__(self, tokens):
    self.vocab = {t: i for i, t in enumerate(tokens)}


def test_faithful_rng_call_sequence_golden():
  """Two one-sentence documents, short_seq_prob 0: by google's algorithm the calls must be
  shuffle(docs); per document: random (target), randint(0, 1) until another document (<= 10),
  randint(0, 0) (start in a 1-sentence document), no truncation, shuffle(4 candidates), one masked
  token: random [+ random [+ randint(0, V-1)]]; finally shuffle(instances)."""
  options = options_lib.make_options(max_seq_length=10, max_predictions_per_seq=5, dupe_factor=1,
                                  short_seq_prob=0.0, masked_lm_prob=0.15)
  vocab_tokens = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "b", "c", "d"]
  for seed in range(30):
    rng = RecordingRandom(seed)
    docs = [[["a", "b"]], [["c", "d"]]]
    made = faithful.create_training_instances(docs, _Vocab(vocab_tokens), options, rng)
    calls = list(rng.calls)
    assert calls.pop(0) == ("shuffle", 2)
    for document_index in range(2):
      assert calls.pop(0)[0] == "random"
      draws = 0
      while True:
        call = calls.pop(0)
        assert call[:3] == ("randint", 0, 1)
        draws += 1
        if call[3] != document_index or draws == 10:
          break
      assert calls.pop(0) == ("randint", 0, 0, 0)
      assert calls.pop(0) == ("shuffle", 4)
      first = calls.pop(0)
      assert first[0] == "random"
      if first[1] >= 0.8:
        second = calls.pop(0)
        assert second[0] == "random"
        if second[1] >= 0.5:
          assert calls.pop(0)[:3] == ("randint", 0, len(vocab_tokens) - 1)
    assert calls == [("shuffle", 2)]
    assert made == faithful.create_training_instances(
        [[["a", "b"]], [["c", "d"]]], _Vocab(vocab_tokens), options, random.Random(seed))
    assert len(made) == 2
    for inst in made:
      assert inst.is_random_next and len(inst.masked_lm_positions) == 1
      assert inst.segment_ids == [0, 0, 0, 0, 1, 1, 1]
      assert {tuple(inst.masked_lm_labels)} <= {("a",), ("b",), ("c",), ("d",)}


def test_faithful_whole_word_groups_are_googles():
  """google's ## grouping, including its quirk: a ## piece right after [SEP] joins the group before
  the [SEP]. round(7 * 0.4) = 3 predictions, groups {1, 2, 4} and {5}: either the 3-group first
  (then the budget is full) or {5} first (then the 3-group no longer fits and is skipped)."""
  tokens = ["[CLS]", "un", "##aff", "[SEP]", "##able", "x", "[SEP]"]
  vocab_words = tokens[:]
  for seed in range(50):
    out, positions, labels = faithful.create_masked_lm_predictions(
        tokens, 0.4, 20, vocab_words, random.Random(seed), do_whole_word_mask=True)
    assert labels == [tokens[p] for p in positions]
    assert positions in ([1, 2, 4], [5])
    out, positions, labels = faithful.create_masked_lm_predictions(
        tokens, 0.4, 20, vocab_words, random.Random(seed), do_whole_word_mask=False)
    assert len(positions) == 3
