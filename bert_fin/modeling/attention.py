"""Self-attention: the [B, S, S] attention mask (built in ONE place), google's attention layer."""
import tensorflow.compat.v1 as tf

from bert_fin.modeling import layers

MASK_ADDER = -10000.0  # google's additive penalty for masked attention scores


def attention_mask(input_len, seq_length, sequence_ids=None, input_mask=None):
  """Builds the attention mask: 1.0 where query i of example b may attend key j.

  Like google, every query row sees the same keys (rows of padding queries are not masked unless
  sequence_ids says so).

  Args:
    input_len: int32 [B], number of real tokens; key j is visible iff j < input_len[b]
      (tf.sequence_mask). Exactly one of input_len / input_mask.
    seq_length: python int S.
    sequence_ids: optional int32 [B, S] (packing): the index of the packed sequence each token
      belongs to, 0 for padding. When given, additionally
      sequence_ids[b, i] == sequence_ids[b, j] != 0.
    input_mask: google compatibility, int/float [B, S] with 1 for visible keys. Used as the key
      mask as it is (a general mask, not converted to lengths), so google's semantics hold even
      for masks that are not a prefix of ones.

  Returns:
    float32 [B, S, S]: 1.0 where query i of example b may attend key j, else 0.0.

  Raises:
    ValueError: if not exactly one of input_len / input_mask is given, or an input's static
      rank is wrong.
  """
  if (input_len is None) == (input_mask is None):
    raise ValueError("attention_mask needs exactly one of input_len / input_mask")
  if input_len is not None:
    layers.assert_rank(input_len, 1, "input_len")
    key_mask = tf.sequence_mask(input_len, maxlen=seq_length, dtype=tf.float32)
  else:
    layers.assert_rank(input_mask, 2, "input_mask")
    key_mask = tf.cast(input_mask, tf.float32)
  mask = tf.expand_dims(key_mask, 1)  # [B, 1, S]: broadcast over queries
  if sequence_ids is None:
    return mask * tf.ones([1, seq_length, 1], tf.float32)
  layers.assert_rank(sequence_ids, 2, "sequence_ids")
  query_ids = tf.expand_dims(sequence_ids, 2)  # [B, S, 1]
  key_ids = tf.expand_dims(sequence_ids, 1)    # [B, 1, S]
  same = tf.logical_and(tf.equal(query_ids, key_ids), tf.not_equal(key_ids, 0))
  return mask * tf.cast(same, tf.float32)


def _split_heads(tensor_2d, batch_size, seq_length, num_heads, size_per_head):
  """[B*S, N*D] -> [B, N, S, D]."""
  tensor = tf.reshape(tensor_2d, [batch_size, seq_length, num_heads, size_per_head])
  return tf.transpose(tensor, [0, 2, 1, 3])


def attention_layer(layer_input, mask, batch_size, seq_length, num_attention_heads,
                    size_per_head, attention_probs_dropout_prob, initializer_range,
                    dropout_seed=None, return_scores=False):
  """Multi-headed self-attention (google's `attention_layer` with from_tensor == to_tensor).

  Creates `query`, `key`, `value` dense layers ([H, N*D] kernels) in the current scope.

  Args:
    layer_input: float [B*S, H] (float16 allowed).
    mask: float32 [B, S, S] from `attention_mask`.
    batch_size: B, a python int or a scalar int32 tensor (layers.get_shape_list).
    seq_length: python int S.
    num_attention_heads: N.
    size_per_head: D; the scores are scaled by 1/sqrt(D).
    attention_probs_dropout_prob: dropout on the attention probabilities.
    initializer_range: stddev of the query/key/value kernel initializer.
    dropout_seed: None or int tensor [2] for stateless dropout (see layers.dropout).
    return_scores: also return the scores the softmax reads (the same ops either way).

  Returns:
    context: [B*S, N*D] in the dtype of layer_input. Scores get the -10000 adder and the softmax
    runs in float32. With return_scores: (context, scores float32 [B, N, S, S]: query . key /
    sqrt(D) before the mask's adder; TinyBERT's attention matching reads them).
  """
  initializer = layers.create_initializer(initializer_range)
  width = num_attention_heads * size_per_head
  query = layers.dense_in_scope(layer_input, width, initializer, "query")
  key = layers.dense_in_scope(layer_input, width, initializer, "key")
  value = layers.dense_in_scope(layer_input, width, initializer, "value")

  query = _split_heads(query, batch_size, seq_length, num_attention_heads, size_per_head)
  key = _split_heads(key, batch_size, seq_length, num_attention_heads, size_per_head)
  scores = tf.matmul(query, key, transpose_b=True)  # [B, N, S, S]
  scores = tf.multiply(scores, tf.cast(layers.inverse_sqrt(size_per_head), scores.dtype))
  adder = (1.0 - tf.expand_dims(mask, 1)) * MASK_ADDER  # [B, 1, S, S]
  scores = tf.cast(scores, tf.float32)
  probs = tf.nn.softmax(scores + adder)
  probs = tf.cast(probs, layer_input.dtype)
  probs = layers.dropout(probs, attention_probs_dropout_prob, dropout_seed)

  value = _split_heads(value, batch_size, seq_length, num_attention_heads, size_per_head)
  context = tf.matmul(probs, value)  # [B, N, S, D]
  context = tf.transpose(context, [0, 2, 1, 3])
  context = tf.reshape(context, [batch_size * seq_length, width])
  return (context, scores) if return_scores else context
