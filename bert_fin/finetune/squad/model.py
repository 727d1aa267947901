"""run_squad's Estimator model_fn: google's span head on bert_fin's model and training step.

Graph as google-research/bert's run_squad.create_model: BertModel (google's variable names under
bert/..., started from --init_checkpoint; its pooler is built but unused), then on every token of
the last layer the variables `cls/squad/output_weights` [2, H] (truncated normal, stddev 0.02) and
`cls/squad/output_bias` [2]: logits [B, S, 2] = sequence_output x output_weights^T + output_bias,
split into start_logits and end_logits [B, S]. No dropout on the head and no mask over the
softmax (google's: padding positions are learnt away). Loss: the mean over the batch of the
cross-entropy of start_positions under softmax(start_logits) and of end_positions under
softmax(end_logits), averaged: (start_loss + end_loss) / 2.

Training: run_classifier's optimizer, step and step lines (train_op.train_spec: --optimizer,
warmup / linear decay, clip 1.0, Horovod allreduce, --amp loss scaling). Predict:
{"start_logits", "end_logits": float32 [S]} per window (postprocess.py reads the answers).
"""
import tensorflow.compat.v1 as tf

from bert_fin.records import schema as records
from bert_fin.finetune import train_op
from bert_fin.finetune.squad import features as features_lib
from bert_fin.modeling.checkpoint import variable_name

HEAD_WEIGHTS, HEAD_BIAS = "cls/squad/output_weights", "cls/squad/output_bias"  # google's names
HEAD = (HEAD_WEIGHTS, HEAD_BIAS)
WHAT = "reading-comprehension (run_squad)"


def create_model(bert_config, is_training, features):
  """Returns (start_logits, end_logits): float32 [B, S].

  features: input_ids, segment_ids int32 [B, S]; input_len int32 [B]."""
  model = train_op.encoder(bert_config, is_training, features)
  sequence = model.get_sequence_output()  # [B, S, H]
  output_weights = tf.get_variable(HEAD_WEIGHTS, [2, sequence.shape[-1]],
                                   initializer=tf.truncated_normal_initializer(stddev=0.02))
  output_bias = tf.get_variable(HEAD_BIAS, [2], initializer=tf.zeros_initializer())
  logits = tf.nn.bias_add(tf.einsum("bsh,lh->bsl", sequence, output_weights), output_bias)
  logits = tf.cast(logits, tf.float32)
  return logits[:, :, 0], logits[:, :, 1]


def span_loss(logits, positions):
  """Mean cross-entropy of positions int32 [B] under softmax(logits float32 [B, S])."""
  one_hot = tf.one_hot(positions, depth=tf.shape(logits)[1], dtype=tf.float32)
  return -tf.reduce_mean(tf.reduce_sum(one_hot * tf.nn.log_softmax(logits, axis=-1), axis=-1))


def variable_shapes(bert_config, max_seq_length):
  """{name: shape list} of the model's trainable variables (built in a throwaway graph)."""
  with tf.Graph().as_default():
    features = {name: tf.placeholder(tf.int32, [None, max_seq_length]) for name in (
        records.INPUT_IDS, records.SEGMENT_IDS)}
    features[records.INPUT_LEN] = tf.placeholder(tf.int32, [None])
    create_model(bert_config, False, features)
    return {variable_name(v): v.shape.as_list() for v in tf.trainable_variables()}


def model_fn_builder(bert_config, init_checkpoint, dist, train_setup=None):
  """Returns model_fn(features, labels, mode, params) for tf.estimator.Estimator.

  dist: training/distributed.init(...) result; train_setup: training/graph/train_setup.TrainSetup
  (TRAIN only)."""

  def model_fn(features, labels, mode, params):  # pylint: disable=unused-argument
    is_training = mode == tf.estimator.ModeKeys.TRAIN
    start_logits, end_logits = create_model(bert_config, is_training, features)
    train_op.init_from_checkpoint(init_checkpoint, dist, train_setup if is_training else None)
    if is_training:
      loss = (span_loss(start_logits, features[features_lib.START_POSITIONS])
              + span_loss(end_logits, features[features_lib.END_POSITIONS])) / 2.0
      return train_op.train_spec(mode, loss, dist, train_setup, features[records.INPUT_LEN])
    if mode != tf.estimator.ModeKeys.PREDICT:
      raise ValueError("Only TRAIN and PREDICT modes are supported: %s" % mode)
    return tf.estimator.EstimatorSpec(mode=mode, predictions={
        "start_logits": start_logits, "end_logits": end_logits})

  return model_fn
