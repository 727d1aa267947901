"""The pretraining heads of google-research/bert's run_pretraining.py, each with its loss.

Variables: cls/predictions/transform/dense/{kernel [H, H], bias [H]},
cls/predictions/transform/LayerNorm/{beta,gamma} [H], cls/predictions/output_bias [vocab]
(the MLM output weights are the word embedding table), and for the BERT objective
cls/seq_relationship/output_weights [2, H], cls/seq_relationship/output_bias [2].
Everything here runs in float32.
"""
import tensorflow.compat.v1 as tf

from bert_fin.modeling import layers


def gather_indexes(sequence_tensor, positions):
  """Gathers the vectors at `positions` of every example.

  Args:
    sequence_tensor: float [B, S, W].
    positions: int32 [B, P], indexes into S.

  Returns:
    [B*P, W] in sequence_tensor's dtype.
  """
  batch_size, seq_length, width = layers.get_shape_list(sequence_tensor, expected_rank=3)
  flat_offsets = tf.reshape(tf.range(0, batch_size, dtype=tf.int32) * seq_length, [-1, 1])
  flat_positions = tf.reshape(tf.cast(positions, tf.int32) + flat_offsets, [-1])
  flat_sequence_tensor = tf.reshape(sequence_tensor, [batch_size * seq_length, width])
  return tf.gather(flat_sequence_tensor, flat_positions)


def get_masked_lm_output(bert_config, input_tensor, output_weights, positions, label_ids,
                         label_weights):
  """The masked LM head and loss.

  Args:
    bert_config: BertConfig (hidden_size, hidden_act, initializer_range, vocab_size).
    input_tensor: float32 [B, S, H] (the sequence output).
    output_weights: [vocab, H] (the embedding table).
    positions: int32 [B, P], the masked positions.
    label_ids: int32 [B, P], the original token ids there.
    label_weights: float32 [B, P], 1.0 for a real prediction, 0.0 for padding.

  Returns:
    (loss: scalar sum(w * per_example) / (sum(w) + 1e-5), per_example_loss: [B*P],
     log_probs: [B*P, vocab]), all float32.
  """
  input_tensor = tf.cast(gather_indexes(input_tensor, positions), tf.float32)
  with tf.variable_scope("cls/predictions"):
    with tf.variable_scope("transform"):
      input_tensor = layers.dense_in_scope(
          input_tensor, bert_config.hidden_size,
          layers.create_initializer(bert_config.initializer_range), "dense",
          layers.get_activation(bert_config.hidden_act))
      input_tensor = layers.layer_norm(input_tensor)
    output_bias = tf.get_variable("output_bias", shape=[bert_config.vocab_size],
                                  initializer=tf.zeros_initializer())
    logits = tf.matmul(input_tensor, tf.cast(output_weights, tf.float32), transpose_b=True)
    logits = tf.nn.bias_add(logits, output_bias)
    log_probs = tf.nn.log_softmax(logits, axis=-1)

    label_ids = tf.reshape(label_ids, [-1])
    label_weights = tf.reshape(tf.cast(label_weights, tf.float32), [-1])
    one_hot_labels = tf.one_hot(label_ids, depth=bert_config.vocab_size, dtype=tf.float32)
    per_example_loss = -tf.reduce_sum(log_probs * one_hot_labels, axis=[-1])
    numerator = tf.reduce_sum(label_weights * per_example_loss)
    denominator = tf.reduce_sum(label_weights) + 1e-5
    loss = numerator / denominator
  return loss, per_example_loss, log_probs


def get_next_sentence_output(bert_config, input_tensor, labels, label_weights=None):
  """The next sentence prediction head and loss.

  Args:
    bert_config: BertConfig (hidden_size, initializer_range).
    input_tensor: float32 [B, H] (the pooled output).
    labels: int32 [B] or [B, 1] (0 = B follows A, 1 = random).
    label_weights: optional float32 [B], 1.0 for a real example and 0.0 for an empty packed slot.

  Returns:
    (loss: the mean over the examples (weighted: the mean over the real ones),
     per_example_loss: [B], log_probs: [B, 2]), all float32.
  """
  with tf.variable_scope("cls/seq_relationship"):
    output_weights = tf.get_variable(
        "output_weights", shape=[2, bert_config.hidden_size],
        initializer=layers.create_initializer(bert_config.initializer_range))
    output_bias = tf.get_variable("output_bias", shape=[2], initializer=tf.zeros_initializer())
    logits = tf.matmul(tf.cast(input_tensor, tf.float32), output_weights, transpose_b=True)
    logits = tf.nn.bias_add(logits, output_bias)
    log_probs = tf.nn.log_softmax(logits, axis=-1)
    labels = tf.reshape(labels, [-1])
    one_hot_labels = tf.one_hot(labels, depth=2, dtype=tf.float32)
    per_example_loss = -tf.reduce_sum(one_hot_labels * log_probs, axis=-1)
    if label_weights is None:
      loss = tf.reduce_mean(per_example_loss)
    else:
      label_weights = tf.reshape(tf.cast(label_weights, tf.float32), [-1])
      # max(., 1): a batch of empty slots only gives loss 0, not a division by zero
      loss = (tf.reduce_sum(label_weights * per_example_loss)
              / tf.maximum(tf.reduce_sum(label_weights), 1.0))
  return loss, per_example_loss, log_probs


def pretraining_variable_shapes(bert_config, next_sentence=True):
  """The variables of google's pretraining model, read from a throwaway graph (nothing is run).

  Args:
    bert_config: BertConfig.
    next_sentence: with the next-sentence head (objective "bert"); False for "roberta".

  Returns:
    {google variable name: shape list}: BertModel (its pooler included), the masked-LM head and,
    next_sentence, the next-sentence head: what a run_pretraining checkpoint holds (the import
    of a transformers folder fills these names, interop/hf_import.py).
  """
  from bert_fin.modeling import bert  # pylint: disable=import-outside-toplevel
  from bert_fin.modeling import checkpoint  # pylint: disable=import-outside-toplevel
  with tf.Graph().as_default():
    tf.set_random_seed(0)  # never run, but op determinism (--deterministic) refuses unseeded ops
    model = bert.BertModel(bert_config, is_training=False, input_ids=tf.zeros([1, 2], tf.int32),
                           input_len=tf.fill([1], 2), token_type_ids=tf.zeros([1, 2], tf.int32))
    positions = tf.zeros([1, 1], tf.int32)
    get_masked_lm_output(bert_config, model.get_sequence_output(), model.get_embedding_table(),
                         positions, positions, tf.ones([1, 1], tf.float32))
    if next_sentence:
      get_next_sentence_output(bert_config, model.get_pooled_output(), tf.zeros([1], tf.int32))
    return {checkpoint.variable_name(v): v.shape.as_list() for v in tf.trainable_variables()}
