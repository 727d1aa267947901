"""A linear-chain CRF over the units of a window, in the graph (run_ner --use_crf).

The tagger's per-piece logits [B, S, L] are scored at the units' first pieces only (label_mask 1;
`##` pieces, [CLS], [SEP] and padding are not part of the chain): `compact` moves those positions
to the front of each row, in order, so a row's chain is its first `num_units` positions.
A transition matrix `ner/transitions` [L, L] (zeros at start; transitions[i, j] scores tag i
followed by tag j) is added to the unary logits:
  score(y) = sum_t logits[t, y_t] + sum_{t>=1} transitions[y_{t-1}, y_t]
  nll      = logsumexp over every tag path of score - score(gold path)   (forward algorithm)
  decode   = argmax path (Viterbi), scattered back to the pieces' positions.
No start/end transitions (a window may begin or end inside an entity).
"""
import tensorflow.compat.v1 as tf

TRANSITIONS = "transitions"  # under ner_model.HEAD_SCOPE


def transitions_variable(num_labels):
  """float32 [L, L], created in the current variable scope."""
  return tf.get_variable(TRANSITIONS, [num_labels, num_labels], initializer=tf.zeros_initializer())


def compact(mask):
  """(order int32 [B, S]: the positions with mask 1 first, in order, then the others;
  num_units int32 [B])."""
  order = tf.argsort(1 - mask, axis=1, stable=True, direction="ASCENDING")
  return tf.cast(order, tf.int32), tf.reduce_sum(mask, axis=1)


def _time_major(x):
  return tf.transpose(x, [1, 0] + list(range(2, len(x.shape))))


def log_likelihood_loss(logits, label_ids, mask, transitions):
  """float32 [B]: the negative log-likelihood of each row's gold chain (0 for a row without
  units). logits [B, S, L] float32; label_ids, mask int32 [B, S]."""
  order, num_units = compact(mask)
  unary = tf.gather(logits, order, batch_dims=1)  # [B, S, L]
  gold = tf.gather(label_ids, order, batch_dims=1)  # [B, S]
  seq_len = tf.shape(logits)[1]
  valid = tf.sequence_mask(num_units, seq_len, dtype=tf.float32)  # [B, S]
  gold_unary = tf.reduce_sum(tf.gather(unary, gold, batch_dims=2) * valid, axis=1)
  pair = tf.gather_nd(transitions, tf.stack([gold[:, :-1], gold[:, 1:]], axis=-1))  # [B, S-1]
  gold_score = gold_unary + tf.reduce_sum(pair * valid[:, 1:], axis=1)

  def forward(alpha, step):
    emission, is_valid = step
    scores = tf.reduce_logsumexp(alpha[:, :, None] + transitions[None], axis=1) + emission
    return tf.where_v2(is_valid[:, None] > 0, scores, alpha)

  alphas = tf.scan(forward, (_time_major(unary)[1:], _time_major(valid)[1:]),
                   initializer=unary[:, 0])
  last = tf.concat([unary[:, 0][None], alphas], axis=0)[-1]
  log_partition = tf.reduce_logsumexp(last, axis=-1)
  return (log_partition - gold_score) * tf.cast(num_units > 0, tf.float32)


def decode(logits, mask, transitions):
  """int32 [B, S]: the Viterbi tags at the units' first pieces (mask 1), 0 elsewhere."""
  order, num_units = compact(mask)
  unary = tf.gather(logits, order, batch_dims=1)
  seq_len = tf.shape(logits)[1]
  num_labels = tf.shape(logits)[2]
  valid = tf.sequence_mask(num_units, seq_len, dtype=tf.int32)
  identity = tf.range(num_labels, dtype=tf.int32)[None]

  def step(carry, inputs):
    delta, _ = carry
    emission, is_valid = inputs
    scores = delta[:, :, None] + transitions[None]  # [B, L(prev), L(next)]
    best = tf.reduce_max(scores, axis=1) + emission
    pointer = tf.argmax(scores, axis=1, output_type=tf.int32)
    keep = is_valid[:, None] > 0
    return (tf.where_v2(keep, best, delta),
            tf.where_v2(keep, pointer, tf.broadcast_to(identity, tf.shape(pointer))))

  batch = tf.shape(logits)[0]
  start = (unary[:, 0], tf.zeros([batch, num_labels], tf.int32))
  deltas, pointers = tf.scan(step, (_time_major(unary)[1:], _time_major(valid)[1:]),
                             initializer=start)
  final = tf.concat([unary[:, 0][None], deltas], axis=0)[-1]
  last_tag = tf.argmax(final, axis=-1, output_type=tf.int32)  # [B]

  def back(tag, pointer):
    return tf.gather(pointer, tag, batch_dims=1)

  earlier = tf.scan(back, pointers, initializer=last_tag, reverse=True)  # [S-1, B]
  tags = tf.concat([tf.transpose(earlier), last_tag[:, None]], axis=1)  # [B, S], compact order
  inverse = tf.argsort(order, axis=1)
  scattered = tf.gather(tags, inverse, batch_dims=1)
  return scattered * mask
