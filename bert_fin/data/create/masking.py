"""Masked-LM predictions on token-id sequences with (whole-)word groups: the fast mode's masking.

Contract (google-research/bert's create_masked_lm_predictions, on ids and explicit word groups):
  * num_to_predict = min(max_predictions_per_seq, max(1, round(len(ids) * masked_lm_prob))), where
    len(ids) counts [CLS] and [SEP] like google.
  * Candidate groups are the word groups (index ranges) of the non-special tokens in random
    order; a group is taken whole or skipped when it would exceed num_to_predict (google's
    whole-word rule), so a word is never split. [CLS]/[SEP] are never candidates.
  * Within a taken group each token independently: 80% [MASK], 10% kept, 10% a random id
    (pretraining_rules.py, the one statement of the rule) from `random_ids` (fast mode passes the
    ordinary vocabulary: every id except [PAD]/[UNK]/[CLS]/[SEP]/[MASK]/[unusedN]; google draws
    from the whole vocabulary -- see data/create/faithful.py for that).
  * Labels are the original input ids at the positions, sorted by position.

Word groups are (begin, end) index ranges built from `starts` (starts[i] is True when token i begins
a word: a jieba word after word-piecing), so a group may mix CJK chars and Latin pieces (无创dna ->
无 创 dna); ids are never rewritten with `##` marks, so no out-of-vocab token can arise.
"""
import collections
import itertools

from bert_fin.data.create import pretraining_rules as rules
from bert_fin.records import schema
from bert_fin.records.masking_config import MaskingConfig
from bert_fin.tokenization import special_tokens as special

MaskedLm = collections.namedtuple("MaskedLm", ["output_ids", "positions", "label_ids"])



def random_replacement_ids(vocab):
  """Sorted ids of every token except bracketed specials ([PAD] ... [unused99]): the fast mode's
  random-replacement set (google draws from the whole vocabulary, incl. specials); the whole
  vocabulary when it has nothing else."""
  ordinary = sorted({i for t, i in vocab.items() if not (t.startswith("[") and t.endswith("]"))})
  return ordinary or sorted(vocab.values())


def masking_config(vocab, masked_lm_prob, max_predictions_per_seq):
  """MaskingConfig of the fast mode.

  Args:
    vocab: {token: id}; needs [MASK].
    masked_lm_prob, max_predictions_per_seq: google's flags.

  Returns:
    records/masking_config.py's MaskingConfig with random_ids = random_replacement_ids(vocab).

  Raises:
    KeyError: the vocab has no [MASK].
  """
  return MaskingConfig(vocab[special.MASK], random_replacement_ids(vocab), masked_lm_prob,
                       max_predictions_per_seq)


def num_to_predict(num_tokens, masked_lm_prob, max_predictions_per_seq):
  """google's number of predictions for a sequence of num_tokens tokens.

  min(max_predictions_per_seq, max(1, round(num_tokens * masked_lm_prob))); num_tokens includes
  [CLS]/[SEP]; Python 3 round (half to even) as google on py3.
  """
  return min(max_predictions_per_seq, max(1, int(round(num_tokens * masked_lm_prob))))


def budget_table(max_seq_length, masked_lm_prob, max_predictions_per_seq):
  """The prediction budget of every sequence length.

  Computed once here so that the C kernel and in-graph dynamic masking use Python's exact
  rounding.

  Returns:
    [num_to_predict(n, ...) for n in 0..max_seq_length]: the budget of a sequence of n tokens.
  """
  return [num_to_predict(n, masked_lm_prob, max_predictions_per_seq)
          for n in range(max_seq_length + 1)]


def word_starts(num_tokens, groups):
  """The word_starts feature of a dynamic-masking record (records/schema.py).

  Args:
    num_tokens: the sequence's length, [CLS]/[SEP] included.
    groups: [(begin, end)] as groups_from_starts / word_groups give them.

  Returns:
    list[int] [num_tokens]: WORD_BEGINS at each group's first token, WORD_CONTINUES at its later
    tokens and NEVER_MASKED at every token outside the groups ([CLS], [SEP]).
  """
  starts = [schema.NEVER_MASKED] * num_tokens
  for begin, end in groups:
    starts[begin] = schema.WORD_BEGINS
    starts[begin + 1:end] = [schema.WORD_CONTINUES] * (end - begin - 1)
  return starts


def word_groups(starts, is_special):
  """Groups token indexes into words.

  Args:
    starts: list[bool] [seq], True where a token begins a word.
    is_special: list[bool] [seq], True for [CLS]/[SEP] (never in a group; they also end a word).

  Returns:
    list of (begin, end) half-open index ranges, in order.
  """
  groups = []
  begin = None
  for i, (start, special) in enumerate(zip(starts, is_special)):
    if special:
      if begin is not None:
        groups.append((begin, i))
      begin = None
    elif start or begin is None:
      if begin is not None:
        groups.append((begin, i))
      begin = i
  if begin is not None:
    groups.append((begin, len(starts)))
  return groups


def groups_from_starts(starts, offset=0):
  """Word groups of one special-free segment.

  Args:
    starts: list[bool] [n], True where a token begins a word.
    offset: the segment's first index in the sequence.

  Returns:
    [(begin, end)] half-open ranges shifted by offset; the segment's first token always begins a
    group (e.g. after a truncated front).
  """
  n = len(starts)
  if not n:
    return []
  begins = list(itertools.compress(range(offset, offset + n), starts))
  if not starts[0]:
    begins.insert(0, offset)
  ends = begins[1:]
  ends.append(offset + n)
  return list(zip(begins, ends))


def choose_groups(groups, budget, rng):
  """Chooses whole word groups to predict, google's rule.

  Visits groups in a uniformly random order and takes them greedily, skipping any that would
  exceed budget. The order is a lazy Fisher-Yates shuffle driven by rng.random() (one draw per
  visited group), so only the visited prefix is shuffled.

  Args:
    groups: [(begin, end)] word groups.
    budget: the most tokens to choose (num_to_predict).
    rng: random.Random.

  Returns:
    the chosen (begin, end) ranges, in visiting order, total length <= budget.
  """
  order = list(groups)
  total = len(order)
  chosen = []
  count = 0
  random = rng.random
  for i in range(total):
    j = i + int(random() * (total - i))
    group = order[j]
    order[j] = order[i]
    size = group[1] - group[0]
    if count + size > budget:
      continue
    chosen.append(group)
    count += size
    if count >= budget:
      break
  return chosen


def mask_tokens(ids, chosen_groups, rng, mask_id, random_ids):
  """Applies 80/10/10 (pretraining_rules) to every token of the chosen groups.

  One rng.random() per position: draw < MASK_BELOW (0.8) -> [MASK], [0.8, RANDOM_FROM = 0.9) ->
  kept, [0.9, 1) -> random_ids[floor((draw - 0.9) * RANDOM_SCALE (10) * R)] (the residual of the
  draw is uniform on [0, 1)).

  Args:
    ids: list[int] [seq] original ids.
    chosen_groups: [(begin, end)] (choose_groups).
    rng: random.Random.
    mask_id: the [MASK] id.
    random_ids: the R ids a random replacement draws from.

  Returns:
    MaskedLm(output_ids [seq], positions [n], label_ids [n]) with positions sorted ascending and
    label_ids = ids[positions].
  """
  output_ids = list(ids)
  positions = []
  for begin, end in chosen_groups:
    positions += range(begin, end)
  positions.sort()
  mask_below, random_from = rules.MASK_BELOW, rules.RANDOM_FROM
  scale = rules.RANDOM_SCALE * len(random_ids)
  last = len(random_ids) - 1
  random = rng.random
  for index in positions:
    draw = random()
    if draw < mask_below:
      output_ids[index] = mask_id
    elif draw >= random_from:
      output_ids[index] = random_ids[min(int((draw - random_from) * scale), last)]
  return MaskedLm(output_ids, positions, list(map(ids.__getitem__, positions)))


def create_masked_lm(ids, groups, masked_lm_prob, max_predictions_per_seq, rng, mask_id,
                     random_ids):
  """Whole-word masked-LM predictions for one sequence (see the module contract).

  Args:
    ids: list[int] [seq] incl. [CLS]/[SEP].
    groups: [(begin, end)] word groups of the non-special tokens (word_groups /
      groups_from_starts).
    masked_lm_prob, max_predictions_per_seq: google's flags (num_to_predict).
    rng: random.Random.
    mask_id, random_ids: as mask_tokens.

  Returns:
    MaskedLm (mask_tokens).
  """
  budget = num_to_predict(len(ids), masked_lm_prob, max_predictions_per_seq)
  chosen = choose_groups(groups, budget, rng)
  return mask_tokens(ids, chosen, rng, mask_id, random_ids)
