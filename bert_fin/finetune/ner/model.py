"""run_ner's Estimator model_fn: a token tagger on BertModel's last layer.

Graph: BertModel (google's variable names under bert/..., started from --init_checkpoint; its
pooler is built but unused), then run_classifier's head applied to every token, under the scope
`ner`: `ner/output_weights` [num_labels, H] (truncated normal, stddev 0.02) and `ner/output_bias`
[num_labels]; dropout 0.1 when training; logits [B, S, L] = sequence_output x output_weights^T +
output_bias. Loss: cross-entropy at the pieces with label_mask 1 (each unit's first piece,
features.py), summed and divided by their number (at least 1); the other pieces ([CLS], [SEP],
padding, `##` pieces of a Latin word) weigh 0. Training draws its dropout masks statelessly from
--seed, the rank and the step (train_op.training_dropout_seed), as run_classifier: a resumed run
draws the masks the uninterrupted run drew. --use_crf: a linear-chain CRF over the units instead
(crf.py: `ner/transitions` [L, L], negative log-likelihood, Viterbi decoding).

Training: run_classifier's optimizer, step and step lines (train_op.train_op_and_hooks:
--optimizer, warmup / linear decay, clip 1.0, Horovod allreduce, --amp loss scaling). Eval
(Estimator.evaluate): eval_loss and eval_token_accuracy over the weighted pieces. Predict: per row {"tag_ids": int32 [S]
(argmax, or Viterbi with --use_crf), "token_loss": float32 [S] (cross-entropy with label_ids, 0 where label_mask is 0)};
orchestration.py joins the windows and computes entity figures from them.
"""
import tensorflow.compat.v1 as tf

from bert_fin.records import schema as records
from bert_fin.finetune import finetuned
from bert_fin.finetune import train_op
from bert_fin.finetune.ner import crf as ner_crf
from bert_fin.finetune.ner import features as ner_features
from bert_fin.modeling.checkpoint import variable_name

HEAD_SCOPE = "ner"
HEAD_WEIGHTS, HEAD_BIAS = HEAD_SCOPE + "/output_weights", HEAD_SCOPE + "/output_bias"
CRF_TRANSITIONS = HEAD_SCOPE + "/" + ner_crf.TRANSITIONS


def create_model(bert_config, is_training, features, num_labels, use_crf=False,
                 dropout_seed=None, on_encoder=None):
  """Returns (loss [], token_loss [B, S], logits [B, S, L], tag_ids int32 [B, S]).

  features: input_ids, segment_ids, label_ids, label_mask int32 [B, S]; input_len int32 [B].
  use_crf: score the units' chain with ner_crf (transitions `ner/transitions`): loss = the chains'
  negative log-likelihood over the number of units, token_loss = each row's spread evenly over
  its units, tag_ids = Viterbi; else per-unit softmax cross-entropy and argmax.
  dropout_seed: None (google's stateful dropout) or int64 [2]: every mask stateless
  (train_op.training_dropout_seed), the head's folded in past the encoder's.
  on_encoder: None, or a function called with the BertModel once it is built (run_distill's
  layer matching reads its hidden states and attention scores).
  """
  model = train_op.encoder(bert_config, is_training, features, dropout_seed, on_encoder)
  sequence = model.get_sequence_output()  # [B, S, H]
  hidden_size = sequence.shape[-1]
  with tf.variable_scope(HEAD_SCOPE):
    output_weights = tf.get_variable("output_weights", [num_labels, hidden_size],
                                     initializer=tf.truncated_normal_initializer(stddev=0.02))
    output_bias = tf.get_variable("output_bias", [num_labels], initializer=tf.zeros_initializer())
    transitions = ner_crf.transitions_variable(num_labels) if use_crf else None
  with tf.variable_scope("loss"):
    if is_training:
      sequence = train_op.head_dropout(sequence, dropout_seed, bert_config.num_hidden_layers)
    logits = tf.nn.bias_add(tf.einsum("bsh,lh->bsl", sequence, output_weights), output_bias)
    mask = features[ner_features.LABEL_MASK]
    weights = tf.cast(mask, tf.float32)
    if use_crf:
      row_loss = ner_crf.log_likelihood_loss(logits, features[ner_features.LABEL_IDS], mask,
                                             transitions)
      units = tf.reduce_sum(weights, axis=1, keepdims=True)
      token_loss = weights * (row_loss[:, None] / tf.maximum(units, 1.0))
      tag_ids = ner_crf.decode(logits, mask, transitions)
    else:
      log_probs = tf.nn.log_softmax(logits, axis=-1)
      one_hot = tf.one_hot(features[ner_features.LABEL_IDS], depth=num_labels, dtype=tf.float32)
      token_loss = -tf.reduce_sum(one_hot * log_probs, axis=-1) * weights
      tag_ids = tf.argmax(logits, axis=-1, output_type=tf.int32)
    loss = tf.reduce_sum(token_loss) / tf.maximum(tf.reduce_sum(weights), 1.0)
  return loss, token_loss, logits, tag_ids


def variable_shapes(bert_config, num_labels, max_seq_length, use_crf=False):
  """{name: shape list} of the tagger's trainable variables (built in a throwaway graph)."""
  with tf.Graph().as_default():
    features = {name: tf.placeholder(tf.int32, [None, max_seq_length]) for name in (
        records.INPUT_IDS, records.SEGMENT_IDS, ner_features.LABEL_IDS, ner_features.LABEL_MASK)}
    features[records.INPUT_LEN] = tf.placeholder(tf.int32, [None])
    create_model(bert_config, False, features, num_labels, use_crf)
    return {variable_name(v): v.shape.as_list() for v in tf.trainable_variables()}


def has_crf(checkpoint):
  """Whether a checkpoint's tagger was trained with --use_crf (it has ner/transitions)."""
  return CRF_TRANSITIONS in dict(tf.train.list_variables(checkpoint))


def head_size(checkpoint):
  """Number of tags of a checkpoint's tagger head, or None when it has none."""
  return finetuned.head_size(checkpoint, (HEAD_WEIGHTS, HEAD_BIAS))


def model_fn_builder(bert_config, num_labels, init_checkpoint, dist, train_setup=None,
                     use_crf=False):
  """Returns model_fn(features, labels, mode, params) for tf.estimator.Estimator.

  dist: training/distributed.init(...) result; train_setup: training/graph/train_setup.TrainSetup
  (TRAIN only).
  """

  def model_fn(features, labels, mode, params):  # pylint: disable=unused-argument
    is_training = mode == tf.estimator.ModeKeys.TRAIN
    loss, token_loss, _, tag_ids = create_model(
        bert_config, is_training, features, num_labels, use_crf,
        train_op.training_dropout_seed(train_setup if is_training else None, dist.rank))
    train_op.init_from_checkpoint(init_checkpoint, dist, train_setup if is_training else None)
    if is_training:
      return train_op.train_spec(mode, loss, dist, train_setup, features[records.INPUT_LEN])
    if mode == tf.estimator.ModeKeys.EVAL:
      weights = features[ner_features.LABEL_MASK]
      return tf.estimator.EstimatorSpec(mode=mode, loss=loss, eval_metric_ops={
          "eval_token_accuracy": tf.metrics.accuracy(features[ner_features.LABEL_IDS], tag_ids,
                                                     weights=weights),
          "eval_loss": tf.metrics.mean(token_loss, weights=weights)})
    return tf.estimator.EstimatorSpec(mode=mode, predictions={
        "tag_ids": tag_ids, "token_loss": token_loss})

  return model_fn
