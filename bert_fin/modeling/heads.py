"""The pretraining heads and losses of google-research/bert's run_pretraining.py.

Variables: cls/predictions/transform/dense/{kernel [H, H], bias [H]},
cls/predictions/transform/LayerNorm/{beta,gamma} [H], cls/predictions/output_bias [vocab]
(the MLM output weights are the word embedding table), and for the BERT objective
cls/seq_relationship/output_weights [2, H], cls/seq_relationship/output_bias [2].
Everything here runs in float32.
"""
import tensorflow.compat.v1 as tf

from bert_fin.data import records
from bert_fin.modeling import layers

OBJECTIVES = ("bert", "roberta")  # MLM + NSP, MLM only


def gather_indexes(sequence_tensor, positions):
  """Gathers the vectors at `positions`.

  sequence_tensor: float [B, S, W]; positions: int32 [B, P]. Returns [B*P, W].
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
    input_tensor: float32 [B, S, H] (the sequence output); output_weights: [vocab, H] (the
      embedding table); positions, label_ids: int32 [B, P]; label_weights: float32 [B, P].
  Returns:
    (loss: scalar sum(w * per_example) / (sum(w) + 1e-5), per_example_loss: [B*P],
     log_probs: [B*P, vocab]).
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


def get_next_sentence_output(bert_config, input_tensor, labels):
  """The next sentence prediction head and loss.

  input_tensor: float32 [B, H] (the pooled output); labels: int32 [B] or [B, 1]
  (0 = B follows A, 1 = random). Returns (loss: mean, per_example_loss: [B], log_probs: [B, 2]).
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
    loss = tf.reduce_mean(per_example_loss)
  return loss, per_example_loss, log_probs


def pretraining_losses(config, model, features, objective="bert"):
  """Builds the heads for `objective` on `model` and returns the losses and eval inputs.

  features: the decoded record dict (bert_fin.data.records names): masked_lm_positions,
    masked_lm_ids int32 [B, P], masked_lm_weights float32 [B, P], next_sentence_labels int32
    [B, 1] (only read for "bert").
  Returns dict: total_loss, mlm_loss, nsp_loss (constant 0 for "roberta", which creates no
    cls/seq_relationship variables), and for google's eval metrics mlm_per_example_loss [B*P],
    mlm_log_probs [B*P, vocab], mlm_ids [B*P], mlm_weights [B*P], nsp_per_example_loss [B],
    nsp_log_probs [B, 2], nsp_labels [B] (these three only for "bert"). Every value is a tensor,
    so the dict can be fetched with Session.run.
  """
  if objective not in OBJECTIVES:
    raise ValueError("objective must be one of %s, got %r" % (OBJECTIVES, objective))
  needed = [records.MASKED_LM_POSITIONS, records.MASKED_LM_IDS, records.MASKED_LM_WEIGHTS]
  if objective == "bert":
    needed.append(records.NEXT_SENTENCE_LABELS)
  missing = [name for name in needed if name not in features]
  if missing:
    raise ValueError("pretraining_losses(%s): features lack %s (have %s)" % (
        objective, missing, sorted(features)))
  mlm_loss, mlm_per_example, mlm_log_probs = get_masked_lm_output(
      config, model.get_sequence_output(), model.get_embedding_table(),
      features[records.MASKED_LM_POSITIONS], features[records.MASKED_LM_IDS],
      features[records.MASKED_LM_WEIGHTS])
  out = {
      "mlm_loss": mlm_loss,
      "mlm_per_example_loss": mlm_per_example,
      "mlm_log_probs": mlm_log_probs,
      "mlm_ids": tf.reshape(features[records.MASKED_LM_IDS], [-1]),
      "mlm_weights": tf.reshape(features[records.MASKED_LM_WEIGHTS], [-1]),
  }
  if objective == "bert":
    labels = features[records.NEXT_SENTENCE_LABELS]
    nsp_loss, nsp_per_example, nsp_log_probs = get_next_sentence_output(
        config, model.get_pooled_output(), labels)
    out.update(nsp_per_example_loss=nsp_per_example, nsp_log_probs=nsp_log_probs,
               nsp_labels=tf.reshape(labels, [-1]))
  else:
    nsp_loss = tf.constant(0.0, tf.float32)
  out["nsp_loss"] = nsp_loss
  out["total_loss"] = mlm_loss + nsp_loss
  return out
