"""BertModel: google-research/bert's model, same variable names, shapes and maths.

Variables (scope "bert" by default):
  bert/embeddings/word_embeddings [vocab_size, H], token_type_embeddings [type_vocab_size, H],
  position_embeddings [max_position_embeddings, H], LayerNorm/{beta,gamma} [H];
  bert/encoder/layer_<i>/... (see transformer.py); bert/pooler/dense/{kernel [H, H], bias [H]}.
The attention mask is built from `input_len` (attention.attention_mask); for packed rows
(`sequence_lens`) also block-diagonal per sequence, with positions restarting at 0 per sequence
and the pooler applied to each sequence's own [CLS] (modeling/packed.py), same variables.
"""
import copy

import tensorflow.compat.v1 as tf

from bert_fin.modeling import attention
from bert_fin.modeling import layers
from bert_fin.modeling import packed
from bert_fin.modeling import precision
from bert_fin.modeling import transformer


class BertModel(object):
  """BERT encoder + pooler.

  Args:
    config: BertConfig.
    is_training: bool; False disables dropout (like google).
    input_ids: int32 [B, S].
    input_len: int32 [B], number of real tokens (the mask is j < input_len[b]).
    input_mask: google compatibility, int32 [B, S]; exactly one of input_len / input_mask, or
      neither (every token is real, like google's default).
    token_type_ids: int32 [B, S] (segment ids); default zeros.
    use_one_hot_embeddings: look up word embeddings with a one-hot matmul (TPU style) not gather.
    scope: variable scope name, default "bert".
    compute_type: tf.float32, or tf.float16 for manual mixed precision (precision.py).
    recompute: wrap every transformer layer in tf.recompute_grad (transformer.py).
    sequence_lens: optional int32 [B, K], packed rows: the length of each of the row's K
      sequences (0 = empty slot). The model derives sequence_ids (block-diagonal attention),
      per-sequence position ids and input_len = sum(sequence_lens) (when neither input_len nor
      input_mask is given); get_pooled_output() is then [B, K, H], one per sequence's [CLS].
    validate_inputs: add graph assertions 0 <= input_ids < vocab_size,
      0 <= token_type_ids < type_vocab_size and 0 <= input_len <= S (a clear error at run time
      instead of a silent wrong result).
    dropout_seed: None (google's stateful dropout) or int64 [2]: every dropout mask is stateless,
      a function of this seed (embeddings: fold_in(seed, 0), layer i: fold_in(seed, i + 1)), so a
      resumed run draws the masks the uninterrupted run drew (run_pretraining feeds the seed and
      the data position).

  Raises:
    ValueError: if the config is invalid (BertConfig.validate), compute_type is not
      float32/float16/bfloat16, both input_len and input_mask are given, input_ids is not rank
      2 with a static sequence length S, or S > max_position_embeddings.
  """

  def __init__(self, config, is_training, input_ids, input_len=None, input_mask=None,
               token_type_ids=None, use_one_hot_embeddings=False, scope=None,
               compute_type=tf.float32, recompute=False, validate_inputs=True,
               dropout_seed=None, sequence_lens=None):
    config = copy.deepcopy(config)  # dropout is zeroed below on a copy, not the caller's
    config.validate()
    if not is_training:
      config.hidden_dropout_prob = 0.0
      config.attention_probs_dropout_prob = 0.0
    compute_type = precision.check_compute_type(compute_type)
    if input_len is not None and input_mask is not None:
      raise ValueError("BertModel: pass input_len or input_mask, not both")
    batch_size, seq_length = layers.get_shape_list(input_ids, expected_rank=2, name="input_ids")
    if not isinstance(seq_length, int):
      raise ValueError("BertModel needs a static sequence length, input_ids is %s" % input_ids.shape)
    position_ids = sequence_ids = None
    if sequence_lens is not None:
      layers.assert_rank(sequence_lens, 2, "sequence_lens")
      if validate_inputs:
        with tf.control_dependencies([tf.debugging.assert_non_negative(
            sequence_lens, message="BertModel: negative sequence_lens")]):
          sequence_lens = tf.identity(sequence_lens)
      if input_len is None and input_mask is None:
        input_len = tf.reduce_sum(sequence_lens, axis=1)
      sequence_ids = packed.sequence_ids(sequence_lens, seq_length)
      position_ids = packed.position_ids(sequence_lens, seq_length)
    if input_len is None and input_mask is None:
      input_len = tf.fill([batch_size], tf.constant(seq_length, tf.int32))
    if token_type_ids is None:
      token_type_ids = tf.zeros([batch_size, seq_length], dtype=tf.int32)
    if validate_inputs:
      input_ids, input_len, token_type_ids = _validated(config, input_ids, input_len,
                                                        token_type_ids, seq_length)

    with tf.variable_scope(scope, default_name="bert",
                           custom_getter=precision.custom_getter(compute_type)):
      with tf.variable_scope("embeddings"):
        self.embedding_output, self.embedding_table = embedding_lookup(
            input_ids, config.vocab_size, config.hidden_size, config.initializer_range,
            use_one_hot_embeddings)
        self.embedding_output = embedding_postprocessor(self.embedding_output, token_type_ids,
                                                        config, _fold_in(dropout_seed, 0),
                                                        position_ids)
      with tf.variable_scope("encoder"):
        mask = attention.attention_mask(input_len, seq_length, sequence_ids=sequence_ids,
                                        input_mask=input_mask)
        encoder_input = self.embedding_output
        if compute_type != tf.float32:
          encoder_input = tf.saturate_cast(encoder_input, compute_type)
        layer_seeds = None if dropout_seed is None else [
            _fold_in(dropout_seed, i + 1) for i in range(config.num_hidden_layers)]
        layer_outputs = transformer.transformer_model(encoder_input, mask, config, recompute,
                                                      dropout_seeds=layer_seeds,
                                                      return_scores=not recompute)
        self.all_attention_scores = None
        if not recompute:
          layer_outputs, self.all_attention_scores = layer_outputs
        self.all_encoder_layers = [tf.cast(x, tf.float32) for x in layer_outputs]
      self.sequence_output = self.all_encoder_layers[-1]
      with tf.variable_scope("pooler"):
        if sequence_lens is None:
          first_token_tensor = tf.squeeze(self.sequence_output[:, 0:1, :], axis=1)
        else:  # every sequence's own [CLS]: [B, K, H] -> [B*K, H]
          first_token_tensor = tf.reshape(
              packed.gather_slot_vectors(self.sequence_output, sequence_lens),
              [-1, config.hidden_size])
        self.pooled_output = layers.dense_in_scope(
            first_token_tensor, config.hidden_size,
            layers.create_initializer(config.initializer_range), "dense", tf.tanh)
        if sequence_lens is not None:
          self.pooled_output = tf.reshape(
              self.pooled_output, [batch_size, -1, config.hidden_size])

  def get_pooled_output(self):
    """float32 [B, H]: tanh(dense(first token)); packed rows: [B, K, H], one per sequence."""
    return self.pooled_output

  def get_sequence_output(self):
    """float32 [B, S, H]: the last encoder layer."""
    return self.sequence_output

  def get_all_encoder_layers(self):
    """list of float32 [B, S, H], one per layer."""
    return self.all_encoder_layers

  def get_all_attention_scores(self):
    """list of float32 [B, N, S, S], one per layer: query . key / sqrt(D) before the mask's
    adder (what the softmax reads, less the mask); None with recompute (not kept)."""
    return self.all_attention_scores

  def get_embedding_output(self):
    """float32 [B, S, H]: embeddings after layer norm and dropout."""
    return self.embedding_output

  def get_embedding_table(self):
    """float32 [vocab_size, H]: the word embedding table (tied to the MLM output)."""
    return self.embedding_table


def _validated(config, input_ids, input_len, token_type_ids, seq_length):
  """input_ids, input_len, token_type_ids with run-time range assertions attached."""
  checks = [
      tf.debugging.assert_non_negative(token_type_ids, message="BertModel: negative token_type_ids"),
      tf.debugging.assert_less(
          token_type_ids, tf.constant(config.type_vocab_size, token_type_ids.dtype),
          message="BertModel: token_type_ids >= type_vocab_size %d" % config.type_vocab_size),
      tf.debugging.assert_non_negative(input_ids, message="BertModel: negative input_ids"),
      tf.debugging.assert_less(input_ids, tf.constant(config.vocab_size, input_ids.dtype),
                               message="BertModel: input_ids >= vocab_size %d" % config.vocab_size),
  ]
  if input_len is not None:
    checks += [
        tf.debugging.assert_non_negative(input_len, message="BertModel: negative input_len"),
        tf.debugging.assert_less_equal(input_len, tf.constant(seq_length, input_len.dtype),
                                       message="BertModel: input_len > seq_length %d" % seq_length),
    ]
  with tf.control_dependencies(checks):
    input_ids = tf.identity(input_ids)
    token_type_ids = tf.identity(token_type_ids)
    if input_len is not None:
      input_len = tf.identity(input_len)
  return input_ids, input_len, token_type_ids


def embedding_lookup(input_ids, vocab_size, embedding_size, initializer_range,
                     use_one_hot_embeddings=False, word_embedding_name="word_embeddings"):
  """Looks up word embeddings, creating the table `word_embedding_name` in the current scope.

  Args:
    input_ids: int32 [B, S].
    vocab_size: rows of the table.
    embedding_size: E, the width of an embedding.
    initializer_range: stddev of the table's truncated-normal initializer.
    use_one_hot_embeddings: a one-hot matmul (TPU style) instead of tf.gather.
    word_embedding_name: the table variable's name.

  Returns:
    (output: float32 [B, S, E], embedding_table: float32 [vocab_size, E]).
  """
  embedding_table = tf.get_variable(word_embedding_name, [vocab_size, embedding_size],
                                    initializer=layers.create_initializer(initializer_range))
  flat_input_ids = tf.reshape(input_ids, [-1])
  if use_one_hot_embeddings:
    one_hot_input_ids = tf.one_hot(flat_input_ids, depth=vocab_size)
    output = tf.matmul(one_hot_input_ids, embedding_table)
  else:
    output = tf.gather(embedding_table, flat_input_ids)
  input_shape = layers.get_shape_list(input_ids)
  return tf.reshape(output, input_shape + [embedding_size]), embedding_table


def _fold_in(seed, data):
  """None, or the stateless seed int64 [2] derived from seed and the int `data`."""
  if seed is None:
    return None
  return tf.random.experimental.stateless_fold_in(tf.cast(seed, tf.int64), data)


def embedding_postprocessor(input_tensor, token_type_ids, config, dropout_seed=None,
                            position_ids=None):
  """Adds token type and absolute position embeddings, then layer norm and dropout.

  Creates `token_type_embeddings` [type_vocab_size, H], `position_embeddings`
  [max_position_embeddings, H] and `LayerNorm/{beta,gamma}` [H] in the current scope.

  Args:
    input_tensor: float32 [B, S, H], the word embeddings.
    token_type_ids: int32 [B, S].
    config: BertConfig (type_vocab_size, max_position_embeddings, initializer_range,
      hidden_dropout_prob).
    dropout_seed: None or int64 [2] (stateless dropout, layers.dropout).
    position_ids: optional int32 [B, S] (packed rows: positions restart per sequence), default
      0..S-1 for every row.

  Returns:
    float32 [B, S, H].

  Raises:
    ValueError: if S > config.max_position_embeddings, or input_tensor is not rank 3.
  """
  batch_size, seq_length, width = layers.get_shape_list(input_tensor, expected_rank=3)
  if seq_length > config.max_position_embeddings:
    raise ValueError("seq_length %d > max_position_embeddings %d" % (
        seq_length, config.max_position_embeddings))
  initializer = layers.create_initializer(config.initializer_range)
  output = input_tensor
  token_type_table = tf.get_variable("token_type_embeddings", [config.type_vocab_size, width],
                                     initializer=initializer)
  one_hot_ids = tf.one_hot(tf.reshape(token_type_ids, [-1]), depth=config.type_vocab_size)
  token_type_embeddings = tf.matmul(one_hot_ids, token_type_table)
  output += tf.reshape(token_type_embeddings, [batch_size, seq_length, width])
  full_position_embeddings = tf.get_variable(
      "position_embeddings", [config.max_position_embeddings, width], initializer=initializer)
  if position_ids is None:
    position_embeddings = tf.slice(full_position_embeddings, [0, 0], [seq_length, -1])
    output += tf.expand_dims(position_embeddings, 0)
  else:
    output += tf.gather(full_position_embeddings, position_ids)
  return layers.layer_norm_and_dropout(output, config.hidden_dropout_prob, seed=dropout_seed)
