"""Packed rows: what the model derives from the per-row sequence lengths, in the graph.

A packed row holds up to K sequences one after the other, then padding; `sequence_lens`
int32 [B, K] gives each slot's length (0 = empty slot, empty slots last). From it:
  sequence_ids  int32 [B, S]: 1 + the slot of each token's sequence, 0 for padding (the
                block-diagonal attention mask of attention.attention_mask);
  position_ids  int32 [B, S]: each token's position inside its own sequence (restarts at 0),
                0 for padding;
  sequence_starts int32 [B, K]: where each slot starts (its [CLS]); empty slots point at 0.
Pure functions, no variables.
"""
import tensorflow.compat.v1 as tf


def sequence_starts(sequence_lens):
  """Where each slot of a packed row starts (its [CLS]).

  Args:
    sequence_lens: int32 [B, K].

  Returns:
    int32 [B, K]: exclusive cumulative sum of sequence_lens (the first token of each slot), 0 for
    empty slots.
  """
  starts = tf.cumsum(sequence_lens, axis=1, exclusive=True)
  return tf.where(sequence_lens > 0, starts, tf.zeros_like(starts))


def sequence_ids(sequence_lens, seq_length):
  """Which sequence of a packed row each token belongs to.

  Args:
    sequence_lens: int32 [B, K].
    seq_length: python int S (sum over K must be <= S).

  Returns:
    int32 [B, S]: 1-based slot index of each token's sequence, 0 for padding.
  """
  ends = tf.cumsum(sequence_lens, axis=1)  # [B, K], end (exclusive) of each slot
  positions = tf.range(seq_length, dtype=sequence_lens.dtype)
  # token i belongs to slot k = number of slots ending at or before i; past the last end: padding
  before = tf.reduce_sum(tf.cast(ends[:, None, :] <= positions[None, :, None], tf.int32), axis=2)
  total = ends[:, -1:]  # [B, 1]
  return tf.where(positions[None, :] < total, before + 1, tf.zeros_like(before))


def position_ids(sequence_lens, seq_length):
  """Each token's position inside its own sequence of a packed row.

  Args:
    sequence_lens: int32 [B, K].
    seq_length: python int S (sum over K must be <= S).

  Returns:
    int32 [B, S]: position of each token inside its own sequence (restarts at 0), 0 for padding.
  """
  ids = sequence_ids(sequence_lens, seq_length)
  starts = tf.cumsum(sequence_lens, axis=1, exclusive=True)  # [B, K]
  slot = tf.maximum(ids - 1, 0)
  own_start = tf.gather(starts, slot, batch_dims=1)  # [B, S]
  positions = tf.range(seq_length, dtype=sequence_lens.dtype)[None, :] - own_start
  return tf.where(ids > 0, positions, tf.zeros_like(positions))


def gather_slot_vectors(sequence_tensor, sequence_lens):
  """Gathers the vector at each slot's first token ([CLS]).

  Args:
    sequence_tensor: float [B, S, H].
    sequence_lens: int32 [B, K].

  Returns:
    float [B, K, H]; empty slots get token 0's vector.
  """
  return tf.gather(sequence_tensor, sequence_starts(sequence_lens), batch_dims=1)
