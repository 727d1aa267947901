"""Dynamic whole-word masking in the graph: the masks of dynamic-masking records, drawn anew per
(seed, epoch, record position) with the rules of static creation.

`mask_features(features, seed, epoch, record_positions, config)` takes decoded dynamic-masking
records (schema.tf_decode_features of schema.layout_specs(layout), layout.dynamic_masking), a
batch or one example, and returns them with masks drawn: input_ids masked, word_starts dropped,
and the features the model already takes,

  masked_lm_positions int32 [B, P]  positions of the predictions, ascending, 0-padded
  masked_lm_ids       int32 [B, P]  the original ids there, 0-padded
  masked_lm_weights   float32 [B, P] 1.0 for a prediction, 0.0 for padding

so the model and losses do not change. P is config.max_predictions_per_seq for unpacked records;
for packed ones (sequence_lens [B, K]) packed_predictions_width(...) unless given. Inputs:

  input_ids      int32 [B, S]  unmasked ids (schema.INPUT_IDS)
  word_starts    int32 [B, S]  schema.WORD_BEGINS / WORD_CONTINUES / NEVER_MASKED per token
  input_len      int32 [B]     unpacked records: real tokens (or, packed, sequence_lens [B, K])
  seed           int64 scalar  (Python int or tensor), the run's --seed
  epoch          int64 scalar or [B]
  record_positions int64 [B]   each row's position (the data stream's; a scalar for one example)
  config         records.masking_config.MaskingConfig (the stats JSON's "dynamic_masking" block)

The rules are data/create/masking.py's (and the C kernel's), applied to each sequence (each slot of a
packed row, with its own budget, as packing keeps each sequence's static predictions):
  * budget = min(max_predictions_per_seq, max(1, round(n * masked_lm_prob))), n = the sequence's
    tokens with [CLS]/[SEP] (masking.budget_table: Python's rounding exactly);
  * words (a WORD_BEGINS token and the WORD_CONTINUES after it; a sequence's first maskable token
    always begins one) are visited in a uniformly random order and taken whole, skipping a word
    that would exceed the budget, until the budget is reached: never split, never over the cap;
    NEVER_MASKED tokens and padding are never chosen;
  * each chosen token independently: 80% [MASK], 10% kept, 10% config.random_ids uniformly
    (data/create/pretraining_rules.py's thresholds as uint32 draws).

Randomness: row b's numbers are the Philox-4x32-10 stream (TF's stateless generator) with key
`seed` and counter (block, record position, epoch): those of
tf.raw_ops.StatelessRandomUniformFullIntV2(key=seed, counter=[position << 32, epoch], alg=1,
dtype=uint32) (tested), computed for all rows at once. A row's masks are therefore a pure
function of (seed, epoch, its position, its record): never of the batch, the worker or the other
rows, so a resumed run or N workers draw exactly the masks of one uninterrupted worker.

Works on the tensors of a tf.data pipeline (dataset.map, before or after batching) and on those
of the DALI dataset alike; all ops run on the CPU.
"""
import numpy as np
import tensorflow.compat.v1 as tf

from bert_fin.data.create import masking
from bert_fin.data.create import pretraining_rules as rules
from bert_fin.records import schema

_PHILOX_M = (0xD2511F53, 0xCD9E8D57)
_PHILOX_W = (0x9E3779B9, 0xBB67AE85)
_PHILOX_ROUNDS = 10
_LOW32 = 0xFFFFFFFF
_WORD = 1 << 32


def philox_words(seed, epoch, record_positions, num_words):
  """int64 [B, num_words] of uint32 values: row b's Philox-4x32-10 words for key `seed` and
  counters (j, position_b mod 2**32, position_b >> 32, epoch_b) for blocks j = 0, 1, ...

  seed: int64 scalar; epoch: int64 scalar or [B]; record_positions: int64 [B].
  """
  u64 = tf.uint64
  low = tf.constant(_LOW32, u64)
  shift = tf.constant(32, u64)
  seed = tf.cast(tf.cast(seed, tf.int64), u64)
  key = [tf.bitwise.bitwise_and(seed, low), tf.bitwise.right_shift(seed, shift)]
  positions = tf.cast(tf.cast(record_positions, tf.int64), u64)[:, None]
  epoch = tf.reshape(tf.cast(tf.cast(epoch, tf.int64), u64), [-1, 1]) + tf.zeros_like(positions)
  blocks = (num_words + 3) // 4
  zeros = tf.zeros([1, blocks], u64)
  counter = [tf.cast(tf.range(blocks), u64)[None, :] + tf.zeros_like(positions),
             tf.bitwise.bitwise_and(positions, low) + zeros,
             tf.bitwise.right_shift(positions, shift) + zeros,
             tf.bitwise.bitwise_and(epoch, low) + zeros]
  for _ in range(_PHILOX_ROUNDS):
    product0 = tf.constant(_PHILOX_M[0], u64) * counter[0]
    product1 = tf.constant(_PHILOX_M[1], u64) * counter[2]
    counter = [
        tf.bitwise.bitwise_xor(tf.bitwise.bitwise_xor(tf.bitwise.right_shift(product1, shift),
                                                      counter[1]), key[0]),
        tf.bitwise.bitwise_and(product1, low),
        tf.bitwise.bitwise_xor(tf.bitwise.bitwise_xor(tf.bitwise.right_shift(product0, shift),
                                                      counter[3]), key[1]),
        tf.bitwise.bitwise_and(product0, low)]
    key = [tf.bitwise.bitwise_and(k + tf.constant(w, u64), low) for k, w in zip(key, _PHILOX_W)]
  words = tf.reshape(tf.stack(counter, axis=-1), [tf.shape(positions)[0], 4 * blocks])
  return tf.cast(words[:, :num_words], tf.int64)


def packed_predictions_width(max_seq_length, max_sequences_per_pack, config):
  """The most predictions a packed row can get: the max over up to K sequences of lengths summing
  to <= S of their budgets (a sequence of n tokens predicts at most min(budget, n - 2)). A dynamic
  program over lengths, computed once when the graph is built."""
  budgets = np.array(masking.budget_table(max_seq_length, config.masked_lm_prob,
                                          config.max_predictions_per_seq), np.int64)
  lengths = np.arange(max_seq_length + 1)
  gain = np.minimum(budgets, np.maximum(lengths - 2, 0))
  gain[0] = 0
  best = np.zeros(max_seq_length + 1, np.int64)  # best[s]: most predictions within s tokens
  for _ in range(max_sequences_per_pack):
    # best'[s] = max over n <= s of best[s - n] + gain[n]
    shifted = np.where(lengths[:, None] >= lengths[None, :],
                       best[np.clip(lengths[:, None] - lengths[None, :], 0, None)] + gain[None, :],
                       -1)
    best = shifted.max(axis=1)
  return max(int(best[-1]), 1)


def _shift_right(tensor, fill):
  """[B, S] -> [B, S] with column t holding column t - 1 (column 0: fill)."""
  return tf.concat([tf.fill([tf.shape(tensor)[0], 1], fill), tensor[:, :-1]], axis=1)


def _token_slots(sequence_lens, seq_len):
  """int32 [B, S]: the slot (sequence) of each token of a row; K (no slot) for padding."""
  ends = tf.cumsum(sequence_lens, axis=1)
  positions = tf.range(seq_len)[None, :, None]
  return tf.reduce_sum(tf.cast(positions >= ends[:, None, :], tf.int32), axis=2)


def _word_groups(word_starts, slots, num_slots):
  """Groups of the maskable tokens. Returns (maskable bool [B, S], group int32 [B, S]: the group
  index of each maskable token in row order, sizes int32 [B, S]: tokens of group g (0 beyond the
  last), group_slots int32 [B, S]: the slot of group g (num_slots beyond the last))."""
  batch, seq_len = tf.shape(word_starts)[0], tf.shape(word_starts)[1]
  maskable = (slots < num_slots) & tf.not_equal(word_starts, schema.NEVER_MASKED)
  begins = maskable & (tf.equal(word_starts, schema.WORD_BEGINS)
                       | ~_shift_right(maskable, False)
                       | tf.not_equal(slots, _shift_right(slots, -1)))
  group = tf.cumsum(tf.cast(begins, tf.int32), axis=1) - 1
  rows = tf.range(batch)[:, None] * seq_len
  flat = tf.where(maskable, rows + group, tf.fill(tf.shape(group), batch * seq_len))
  segments = batch * seq_len + 1
  sizes = tf.math.unsorted_segment_sum(tf.cast(maskable, tf.int32), flat, segments)
  sizes = tf.reshape(sizes[:-1], [batch, seq_len])
  group_slots = tf.math.unsorted_segment_max(tf.where(maskable, slots, tf.zeros_like(slots)),
                                             flat, segments)
  group_slots = tf.where(sizes > 0, tf.reshape(group_slots[:-1], [batch, seq_len]),
                         tf.fill([batch, seq_len], num_slots))
  return maskable, group, sizes, group_slots


def take_groups(sizes, slots, budgets):
  """google's greedy choice on groups already in visit order: for each slot, walk its groups in
  order, take one whole when it fits the slot's remaining budget, skip it otherwise, stop when the
  budget is reached (masking.choose_groups). Vectorised: each round takes, per slot, the run of
  consecutive fitting groups that starts at the first group fitting the remaining budget.

  sizes: int32 [B, G] group sizes in visit order (0: no group); slots: int32 [B, G] each group's
  slot, non-decreasing along a row (groups of a slot are contiguous); budgets: int32 [B, K1]
  per slot (slots without groups may have any budget). Returns bool [B, G]: taken.
  """
  batch, width = tf.shape(sizes)[0], tf.shape(sizes)[1]
  num_slots = tf.shape(budgets)[1]
  index = tf.broadcast_to(tf.range(width)[None, :], tf.shape(sizes))
  segment = tf.range(batch)[:, None] * num_slots + slots
  num_segments = batch * num_slots

  def per_slot(values):  # [B, G] -> [B, K1] sums over each slot's groups
    sums = tf.reshape(tf.math.unsorted_segment_sum(values, segment, num_segments),
                      [batch, num_slots])
    sums.set_shape(budgets.shape)
    return sums

  def at_groups(per_slot_values):  # [B, K1] -> [B, G]
    return tf.gather(per_slot_values, slots, batch_dims=1)

  def one_round(remaining, cursor, taken):
    left = at_groups(remaining)
    fits = (index >= at_groups(cursor)) & (sizes > 0) & (sizes <= left)
    first = tf.math.unsorted_segment_min(tf.where(fits, index, tf.fill(tf.shape(sizes), width)),
                                         segment, num_segments)
    first = tf.minimum(tf.reshape(first, [batch, num_slots]), width)
    first.set_shape(budgets.shape)
    zone = (index >= at_groups(first)) & (sizes > 0)
    zone_sizes = tf.where(zone, sizes, tf.zeros_like(sizes))
    running = tf.cumsum(zone_sizes, axis=1)
    before = tf.concat([running - zone_sizes, running[:, -1:]], axis=1)  # [B, G + 1]
    take = zone & (running - at_groups(tf.gather(before, first, batch_dims=1)) <= left)
    took = tf.cast(take, tf.int32)
    return (remaining - per_slot(took * sizes), first + per_slot(took), taken | take)

  def unfinished(remaining, cursor, taken):
    del taken
    return tf.reduce_any((remaining > 0) & (cursor < width))

  has_groups = per_slot(tf.cast(sizes > 0, tf.int32)) > 0
  remaining = tf.where(has_groups, budgets, tf.zeros_like(budgets))
  _, _, taken = tf.while_loop(
      unfinished, one_round,
      (remaining, tf.zeros_like(budgets), tf.zeros_like(sizes, dtype=tf.bool)),
      maximum_iterations=width + 1)
  return taken


def _scatter_rows(values, rank, chosen, width):
  """[B, S] values of chosen tokens -> [B, width] at their rank (the rest 0)."""
  batch = tf.shape(values)[0]
  flat = tf.range(batch)[:, None] * (width + 1) + tf.where(chosen, rank,
                                                           tf.fill(tf.shape(rank), width))
  scattered = tf.math.unsorted_segment_sum(tf.where(chosen, values, tf.zeros_like(values)),
                                           flat, batch * (width + 1))
  return tf.reshape(scattered, [batch, width + 1])[:, :width]


def choose_tokens(word_starts, sequence_lens, words, budget_table):
  """bool [B, S]: the tokens whose words are chosen, per slot within its budget.

  word_starts: int32 [B, S]; sequence_lens: int32 [B, K]; words: int64 [B, >= S] uint32 values
  (the groups' random keys); budget_table: int32 [S + 1] (masking.budget_table).
  """
  seq_len = tf.shape(word_starts)[1]
  num_slots = tf.shape(sequence_lens)[1]
  slots = _token_slots(sequence_lens, seq_len)
  maskable, group, sizes, group_slots = _word_groups(word_starts, slots, num_slots)
  # visit order: by slot, then by a uniform random key (a uniformly random order within a slot)
  order = tf.argsort(tf.cast(group_slots, tf.int64) * _WORD + words[:, :seq_len], axis=1,
                     stable=True)
  budgets = tf.gather(budget_table, sequence_lens)
  budgets = tf.concat([budgets, tf.zeros_like(budgets[:, :1])], axis=1)  # no-slot column
  taken = take_groups(tf.gather(sizes, order, batch_dims=1),
                      tf.gather(group_slots, order, batch_dims=1), budgets)
  batch = tf.shape(word_starts)[0]
  flat_order = tf.range(batch)[:, None] * seq_len + order
  chosen_groups = tf.math.unsorted_segment_max(tf.cast(taken, tf.int32), flat_order,
                                               batch * seq_len)
  chosen_groups = tf.reshape(chosen_groups, [batch, seq_len])
  return maskable & tf.cast(tf.gather(chosen_groups, tf.maximum(group, 0), batch_dims=1),
                            tf.bool)


def mask_features(features, seed, epoch, record_positions, config, max_predictions=None):
  """The features of dynamic-masking records with masks drawn (see the module docstring).

  features: dict of decoded dynamic-masking records, batched ([B, S]) or one example ([S]; then
  record_positions is a scalar and the outputs are unbatched too).
  max_predictions: P, the width of the masked_lm_* outputs; default
  config.max_predictions_per_seq (unpacked) or packed_predictions_width (packed). A width a row
  could overflow is a ValueError.
  """
  input_ids = features[schema.INPUT_IDS]
  single = input_ids.shape.rank == 1
  if single:
    features = {name: value[None] for name, value in features.items()}
    record_positions = tf.reshape(record_positions, [1])
    input_ids = features[schema.INPUT_IDS]
  seq_len = input_ids.shape[-1]
  if seq_len is None:
    raise ValueError("input_ids need a static length (FixedLenFeature records)")
  packed = schema.SEQUENCE_LENS in features
  if packed:
    sequence_lens = tf.cast(features[schema.SEQUENCE_LENS], tf.int32)
    needed = packed_predictions_width(seq_len, sequence_lens.shape[-1], config)
  else:
    sequence_lens = tf.cast(tf.reshape(features[schema.INPUT_LEN], [-1, 1]), tf.int32)
    needed = config.max_predictions_per_seq
  width = needed if max_predictions is None else max_predictions
  if width < needed:
    raise ValueError("max_predictions=%d is below the %d predictions a row can get"
                     % (width, needed))
  table = tf.constant(masking.budget_table(seq_len, config.masked_lm_prob,
                                           config.max_predictions_per_seq), tf.int32)
  words = philox_words(seed, epoch, record_positions, 3 * seq_len)
  word_starts = tf.cast(features[schema.WORD_STARTS], tf.int32)
  chosen = choose_tokens(word_starts, sequence_lens, words, table)

  ids = tf.cast(input_ids, tf.int32)
  decision, pick = words[:, seq_len:2 * seq_len], words[:, 2 * seq_len:]
  random_ids = tf.constant(config.random_ids, tf.int32)
  replacement = tf.gather(random_ids, tf.cast(
      tf.bitwise.right_shift(pick * len(config.random_ids), 32), tf.int32))
  # a chosen token's uint32 draw: below MASK_BELOW [MASK], from RANDOM_FROM a random id, else kept
  mask_below = rules.uint32_threshold(rules.MASK_BELOW)
  random_from = rules.uint32_threshold(rules.RANDOM_FROM)
  masked = tf.where(chosen & (decision < mask_below), tf.fill(tf.shape(ids), config.mask_id),
                    tf.where(chosen & (decision >= random_from), replacement, ids))
  rank = tf.cumsum(tf.cast(chosen, tf.int32), axis=1) - 1
  positions = tf.broadcast_to(tf.range(seq_len)[None, :], tf.shape(ids))
  count = tf.reduce_sum(tf.cast(chosen, tf.int32), axis=1)
  out = {name: value for name, value in features.items() if name != schema.WORD_STARTS}
  out[schema.INPUT_IDS] = masked
  out[schema.MASKED_LM_POSITIONS] = _scatter_rows(positions, rank, chosen, width)
  out[schema.MASKED_LM_IDS] = _scatter_rows(ids, rank, chosen, width)
  out[schema.MASKED_LM_WEIGHTS] = tf.cast(tf.range(width)[None, :] < count[:, None], tf.float32)
  if single:
    out = {name: value[0] for name, value in out.items()}
  return out
