"""Sequence packing plans on the histogram of sequence lengths (Graphcore's packedBERT idea).

Several unpacked sequences are concatenated into one row ("pack") of max_seq_length S tokens, at
most K (max_sequences_per_pack) of them, so that rows hold almost no padding. The planners work
on the length histogram only, never on individual sequences: a plan is a list of
(lengths, count) "strategies", e.g. ((300, 150, 60), 1200) = 1200 packs of three sequences of
lengths 300, 150 and 60. Planning cost grows with S and the number of strategies, not with the
number of sequences (16M sequences plan in milliseconds).

  histogram: int64 [S + 1], histogram[L] = number of sequences of length L (histogram[0] == 0).

Planners (both process lengths from the longest to the shortest, each group of equal lengths at
once, and keep the open packs grouped by their free space):
  spfhp  shortest-pack-first: a sequence goes into the open pack with the MOST free space that
         fits it (worst fit); fills packs evenly.
  lpfhp  longest-pack-first: a sequence goes into the open pack with the LEAST free space that
         fits it (best fit); a new pack takes as many copies of the length as fit (up to K), so
         short sequences fill their own packs densely. Usually the tighter of the two.
A pack is closed when it holds K sequences or has no free space. Graphcore's NNLSHP (a
non-negative least-squares solve over all K-combinations) is not provided: at K = 3 it reaches
about what LPFHP does here and costs seconds to minutes, and it does not scale to K > 3.

`assign_sequences` turns a plan into packs of concrete sequence indices (seeded, so the same
input and seed give the same packs), `plan_stats` reports its efficiency.
"""
import collections

import numpy as np

from bert_fin.records import schema

PLANNERS = ("spfhp", "lpfhp")
DEFAULT_ALGORITHM = "lpfhp"
DEFAULT_MAX_SEQUENCES_PER_PACK = 3

PlanStats = collections.namedtuple("PlanStats", [
    "sequences", "packs", "real_tokens", "efficiency", "padding_before", "padding_after",
    "sequences_per_pack"])


def length_histogram(lengths, max_seq_length):
  """The histogram of sequence lengths the planners take.

  Args:
    lengths: int array-like of values in [1, S].
    max_seq_length: S.

  Returns:
    int64 [S + 1]: counts of each length (histogram[0] == 0).

  Raises:
    ValueError: a length outside [1, S].
  """
  lengths = np.asarray(lengths, dtype=np.int64)
  if lengths.size and (lengths.min() < 1 or lengths.max() > max_seq_length):
    raise ValueError("sequence lengths must be in [1, %d], got [%d, %d]"
                     % (max_seq_length, lengths.min(), lengths.max()))
  return np.bincount(lengths, minlength=max_seq_length + 1).astype(np.int64)


def _check_histogram(histogram, max_sequences_per_pack):
  histogram = np.asarray(histogram, dtype=np.int64)
  if histogram.ndim != 1 or histogram.size < 2:
    raise ValueError("histogram must be 1-D [S + 1], got shape %s" % (histogram.shape,))
  if histogram[0] != 0 or (histogram < 0).any():
    raise ValueError("histogram counts must be >= 0 and histogram[0] (length 0) must be 0")
  if max_sequences_per_pack < 1:
    raise ValueError("max_sequences_per_pack must be >= 1, got %d" % max_sequences_per_pack)
  return histogram


class _OpenPacks(object):
  """Open (not yet closed) pack groups by free space: space -> stack of [count, lengths]."""

  def __init__(self, max_seq_length, max_sequences_per_pack):
    self.max_seq_length = max_seq_length
    self.limit = max_sequences_per_pack
    self.by_space = {}
    self.closed = []

  def add(self, lengths, count):
    """A group of `count` packs holding `lengths`; closed when full (K sequences or no space)."""
    if count <= 0:
      return
    space = self.max_seq_length - sum(lengths)
    if len(lengths) >= self.limit or space == 0:
      self.closed.append((lengths, count))
    else:
      self.by_space.setdefault(space, []).append([count, lengths])

  def take(self, space, wanted):
    """Removes up to `wanted` packs of free space `space`: (lengths, count taken)."""
    stack = self.by_space[space]
    count, lengths = stack[-1]
    taken = min(count, wanted)
    if taken == count:
      stack.pop()
      if not stack:
        del self.by_space[space]
    else:
      stack[-1][0] = count - taken
    return lengths, taken

  def fitting_space(self, length, most_room):
    """The free space of an open pack that fits `length`: the largest (most_room) or the
    smallest such space; None when no open pack fits."""
    spaces = [space for space in self.by_space if space >= length]
    if not spaces:
      return None
    return max(spaces) if most_room else min(spaces)

  def plan(self):
    """Every group, closed and open: list of (lengths tuple, count)."""
    groups = list(self.closed)
    for space in sorted(self.by_space):
      groups += [(lengths, count) for count, lengths in self.by_space[space]]
    return groups


def _plan(histogram, max_sequences_per_pack, most_room, repeat_new):
  histogram = _check_histogram(histogram, max_sequences_per_pack)
  max_seq_length = histogram.size - 1
  packs = _OpenPacks(max_seq_length, max_sequences_per_pack)
  for length in range(max_seq_length, 0, -1):
    remaining = int(histogram[length])
    while remaining > 0:
      space = packs.fitting_space(length, most_room)
      if space is None:
        copies = 1
        if repeat_new:
          copies = max(1, min(max_seq_length // length, max_sequences_per_pack, remaining))
        packs.add((length,) * copies, remaining // copies)
        remaining -= remaining // copies * copies
        continue
      lengths, taken = packs.take(space, remaining)
      packs.add(lengths + (length,), taken)
      remaining -= taken
  return packs.plan()


def plan_spfhp(histogram, max_sequences_per_pack=DEFAULT_MAX_SEQUENCES_PER_PACK):
  """Shortest-pack-first histogram packing. histogram: int [S + 1]. Returns the plan: a list of
  (lengths tuple, count), each lengths tuple in descending order, len <= K, sum <= S."""
  return _plan(histogram, max_sequences_per_pack, most_room=True, repeat_new=False)


def plan_lpfhp(histogram, max_sequences_per_pack=DEFAULT_MAX_SEQUENCES_PER_PACK):
  """Longest-pack-first histogram packing (best fit; new packs take several copies of a short
  length). Same contract as plan_spfhp."""
  return _plan(histogram, max_sequences_per_pack, most_room=False, repeat_new=True)


def plan_packs(histogram, max_sequences_per_pack=DEFAULT_MAX_SEQUENCES_PER_PACK,
               algorithm=DEFAULT_ALGORITHM):
  """Plans packs for a length histogram.

  Args:
    histogram: int [S + 1], histogram[0] == 0.
    max_sequences_per_pack: K, >= 1.
    algorithm: "spfhp" | "lpfhp".

  Returns:
    the plan: a list of (lengths tuple, count), each lengths tuple in descending order,
    len <= K, sum <= S.

  Raises:
    ValueError: an unknown algorithm, a malformed histogram or K < 1.
  """
  planners = {"spfhp": plan_spfhp, "lpfhp": plan_lpfhp}
  if algorithm not in planners:
    raise ValueError("algorithm must be one of %s, got %r" % (PLANNERS, algorithm))
  return planners[algorithm](histogram, max_sequences_per_pack)


def plan_histogram(plan, max_seq_length):
  """int64 [S + 1]: the lengths a plan packs (equal to the planned histogram for a valid plan)."""
  histogram = np.zeros(max_seq_length + 1, np.int64)
  for lengths, count in plan:
    for length in lengths:
      histogram[length] += count
  return histogram


def plan_stats(plan, max_seq_length):
  """The efficiency of a plan.

  Args:
    plan: list of (lengths tuple, count).
    max_seq_length: S.

  Returns:
    PlanStats: efficiency = real tokens / (packs x S); padding_before = the padding fraction
    of the same sequences unpacked (one a row); padding_after = 1 - efficiency;
    sequences_per_pack = sequences / packs.
  """
  sequences = sum(len(lengths) * count for lengths, count in plan)
  packs = sum(count for _, count in plan)
  real = sum(sum(lengths) * count for lengths, count in plan)
  efficiency = real / float(packs * max_seq_length) if packs else 1.0
  before = 1.0 - real / float(sequences * max_seq_length) if sequences else 0.0
  return PlanStats(sequences=sequences, packs=packs, real_tokens=real, efficiency=efficiency,
                   padding_before=before, padding_after=1.0 - efficiency,
                   sequences_per_pack=sequences / float(packs) if packs else 0.0)


def assign_sequences(plan, lengths, rng):
  """Concrete packs for the sequences of `lengths` following `plan`.

  Args:
    plan: list of (lengths tuple, count) (plan_packs).
    lengths: int array [N], the length of sequence i (the plan's histogram must be theirs).
    rng: numpy.random.Generator; which sequence of a given length goes to which pack, and the
      order of the packs, are drawn from it (packs never come out sorted by length).

  Returns:
    a list of packs, each a list of sequence indices (longest first). Every index appears
    exactly once.

  Raises:
    ValueError: the plan does not cover exactly these sequences.
  """
  lengths = np.asarray(lengths, dtype=np.int64)
  max_seq_length = max((sum(lengths_) for lengths_, _ in plan), default=0)
  max_seq_length = max(max_seq_length, int(lengths.max()) if lengths.size else 0)
  expected = plan_histogram(plan, max_seq_length)
  if not np.array_equal(expected, length_histogram(lengths, max_seq_length)):
    raise ValueError("the plan does not cover exactly these sequences")
  order = rng.permutation(lengths.size)
  by_length = np.argsort(lengths[order], kind="stable")
  indices = order[by_length]  # sequence indices grouped by length, shuffled within a length
  starts = np.concatenate([[0], np.cumsum(expected)])
  cursor = starts[:-1].copy()
  packs = []
  for group_lengths, count in plan:
    columns = []
    for length in group_lengths:
      columns.append(indices[cursor[length]:cursor[length] + count])
      cursor[length] += count
    packs.extend(np.stack(columns, axis=1).tolist())
  return [packs[i] for i in rng.permutation(len(packs))]


def predictions_bound(plan, max_predictions_by_length):
  """The most masked-LM predictions any pack of `plan` can hold.

  Sizes the packed records' masked_lm_* features without ever cutting one.

  Args:
    plan: list of (lengths tuple, count).
    max_predictions_by_length: int array [S + 1]: the most predictions a sequence of length L
      has.

  Returns:
    int: max over the plan's groups of the sum of max_predictions_by_length[L].
  """
  bound = 0
  for lengths, _ in plan:
    bound = max(bound, int(sum(max_predictions_by_length[length] for length in lengths)))
  return bound


# One window of unpacked sequences, stored ragged (only real tokens / real predictions):
#   tokens, segments: [sum(lengths)] the sequences' tokens one after the other
#   lengths: int64 [N]; predicted_positions, predicted_ids: [sum(num_predictions)] (positions
#   relative to the sequence); num_predictions: int64 [N]; next_sentence_labels: int64 [N];
#   word_starts: [sum(lengths)] for dynamic-masking records (no predictions then), else None.
RaggedSequences = collections.namedtuple("RaggedSequences", [
    "tokens", "segments", "lengths", "predicted_positions", "predicted_ids", "num_predictions",
    "next_sentence_labels", "word_starts"], defaults=(None,))


def _exclusive_cumsum(values):
  return np.concatenate([[0], np.cumsum(values)[:-1]]).astype(np.int64) if len(values) else (
      np.zeros(0, np.int64))


def _ragged_gather(starts, sizes):
  """Indices concatenating the ranges [starts[i], starts[i] + sizes[i]) in order."""
  total = int(np.sum(sizes))
  return np.repeat(starts - _exclusive_cumsum(sizes), sizes) + np.arange(total, dtype=np.int64)


def _fill_rows(values, row_sizes, width):
  """[rows, width] int64: row r holds the next row_sizes[r] values, then zeros."""
  out = np.zeros((len(row_sizes), width), np.int64)
  out[np.arange(width) < np.asarray(row_sizes)[:, None]] = values
  return out


def packed_arrays(sequences, packs, max_seq_length, max_predictions_per_pack,
                  max_sequences_per_pack):
  """The packed records' features for `packs` of `sequences`, as int64/float32 arrays.

  Args:
    sequences: RaggedSequences.
    packs: list of lists of sequence indices (slot order), each with <= K sequences whose
      lengths sum to <= S and predictions to <= max_predictions_per_pack.
    max_seq_length: S.
    max_predictions_per_pack: P' (0 for dynamic-masking sequences).
    max_sequences_per_pack: K.

  Returns:
    {feature name: array [num_packs, length]} in schema.packed_feature_specs' layout: tokens
    concatenated in slot order, masked positions offset by their sequence's start; for
    dynamic-masking sequences (word_starts given) schema.packed_dynamic_feature_specs' layout
    (word_starts concatenated like the tokens, no masked_lm_*).

  Raises:
    ValueError: a pack holds more than K sequences, S tokens or P' predictions.
  """
  slot_counts = np.array([len(p) for p in packs], np.int64)
  if slot_counts.size and slot_counts.max() > max_sequences_per_pack:
    raise ValueError("a pack holds %d sequences, more than %d"
                     % (slot_counts.max(), max_sequences_per_pack))
  order = np.array([i for p in packs for i in p], np.int64)  # every slot, pack by pack
  lengths = sequences.lengths[order]
  pack_of_slot = np.repeat(np.arange(len(packs)), slot_counts)
  pack_starts = _exclusive_cumsum(slot_counts)
  token_offsets = _exclusive_cumsum(lengths)  # where each slot starts in the packs' stream
  slot_start = token_offsets - np.repeat(token_offsets[pack_starts], slot_counts)
  pack_tokens = np.bincount(pack_of_slot, weights=lengths, minlength=len(packs)).astype(np.int64)
  if pack_tokens.size and pack_tokens.max() > max_seq_length:
    raise ValueError("a pack holds %d tokens, more than %d" % (pack_tokens.max(), max_seq_length))
  token_index = _ragged_gather(_exclusive_cumsum(sequences.lengths)[order], lengths)
  predictions = sequences.num_predictions[order]
  pack_predictions = np.bincount(pack_of_slot, weights=predictions,
                                 minlength=len(packs)).astype(np.int64)
  if pack_predictions.size and pack_predictions.max() > max_predictions_per_pack:
    raise ValueError("a pack holds %d predictions, more than %d"
                     % (pack_predictions.max(), max_predictions_per_pack))
  prediction_index = _ragged_gather(_exclusive_cumsum(sequences.num_predictions)[order],
                                    predictions)
  positions = (sequences.predicted_positions[prediction_index]
               + np.repeat(slot_start, predictions))
  slot_column = np.arange(len(order)) - np.repeat(pack_starts, slot_counts)
  sequence_lens = np.zeros((len(packs), max_sequences_per_pack), np.int64)
  sequence_lens[pack_of_slot, slot_column] = lengths
  labels = np.zeros((len(packs), max_sequences_per_pack), np.int64)
  labels[pack_of_slot, slot_column] = sequences.next_sentence_labels[order]
  weights = (np.arange(max_predictions_per_pack) < pack_predictions[:, None]).astype(np.float32)
  if sequences.word_starts is not None:
    return {
        schema.INPUT_IDS: _fill_rows(sequences.tokens[token_index], pack_tokens, max_seq_length),
        schema.SEGMENT_IDS: _fill_rows(sequences.segments[token_index], pack_tokens,
                                        max_seq_length),
        schema.WORD_STARTS: _fill_rows(sequences.word_starts[token_index], pack_tokens,
                                        max_seq_length),
        schema.SEQUENCE_LENS: sequence_lens, schema.NEXT_SENTENCE_LABELS: labels}
  return {
      schema.INPUT_IDS: _fill_rows(sequences.tokens[token_index], pack_tokens, max_seq_length),
      schema.SEGMENT_IDS: _fill_rows(sequences.segments[token_index], pack_tokens,
                                      max_seq_length),
      schema.SEQUENCE_LENS: sequence_lens,
      schema.MASKED_LM_POSITIONS: _fill_rows(positions, pack_predictions,
                                              max_predictions_per_pack),
      schema.MASKED_LM_IDS: _fill_rows(sequences.predicted_ids[prediction_index],
                                        pack_predictions, max_predictions_per_pack),
      schema.MASKED_LM_WEIGHTS: weights,
      schema.NEXT_SENTENCE_LABELS: labels,
  }
