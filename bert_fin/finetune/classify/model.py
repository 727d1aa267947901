"""run_classifier's Estimator model_fn: google's classifier on bert_fin's model and training step.

Graph as google-research/bert's run_classifier.create_model: BertModel, then on the pooled
output ([CLS] -> dense -> tanh; --pooling mean / max: the mean / max over the real tokens instead
of [CLS], same dense + tanh, see pooled_output) the variables `output_weights` [num_labels, H]
(truncated normal, stddev 0.02) and `output_bias` [num_labels] at the top level, and under the
"loss" scope dropout 0.1 (training), logits = pooled x output_weights^T + output_bias, softmax,
mean cross-entropy.
The encoder (bert/...) starts from --init_checkpoint (chief only; Horovod broadcasts it); the
pretraining heads (cls/...) of that checkpoint are unused.

Training: --optimizer (google's AdamWeightDecay by default, adamw or lamb; weight decay 0.01, no
decay for LayerNorm and biases) with linear warmup and linear decay, clip, Horovod, --amp and the
step lines: finetune/train_op.py, shared with run_ner. Eval: eval_accuracy and
eval_loss (google's names) and a confusion matrix, from which orchestration.py computes per-class
precision / recall / F1 and macro-F1.
Predict: {"probabilities": float32 [num_labels], "logits": float32 [num_labels]} per row (the
logits: what --long_text=chunks pools over a document's windows).
"""
import tensorflow.compat.v1 as tf

from bert_fin.records import schema as records
from bert_fin.finetune import batches
from bert_fin.finetune import train_op
from bert_fin.finetune.classify import entity_markers
from bert_fin.modeling import layers
from bert_fin.modeling.checkpoint import variable_name

CONFUSION_MATRIX = "confusion_matrix"
FIRST, MEAN, MAX = "first", "mean", "max"
POOLINGS = (FIRST, MEAN, MAX)
ENCODER_SCOPE = train_op.ENCODER_SCOPE
POOLER_SCOPE = ENCODER_SCOPE + "/pooler"

def pooled_output(model, input_len, pooling):
  """float32 [B, H]: the text vector the classifier reads.

  first: google's pooled [CLS] (bert/pooler/dense + tanh on the first token). mean / max: the
  mean / element-wise max of the last layer over the real tokens (positions < input_len, [CLS] and
  [SEP] included, padding never), then the same bert/pooler/dense + tanh (UER-py's
  --pooling, with google's variables: every pooling has the same variable names and shapes).
  input_len: int32 [B].
  """
  if pooling == FIRST:
    return model.get_pooled_output()
  sequence = model.get_sequence_output()  # [B, S, H]
  real = tf.sequence_mask(input_len, maxlen=sequence.shape[1], dtype=sequence.dtype)[:, :, None]
  if pooling == MEAN:
    vector = tf.reduce_sum(sequence * real, axis=1) / tf.maximum(
        tf.reduce_sum(real, axis=1), 1.0)
  elif pooling == MAX:
    vector = tf.reduce_max(sequence + (1.0 - real) * -1e9, axis=1)
  else:
    raise ValueError("pooling must be one of %s, got %r" % (", ".join(POOLINGS), pooling))
  with tf.variable_scope(POOLER_SCOPE, reuse=True):  # BertModel's pooler variables, reused
    return layers.dense_in_scope(vector, sequence.shape[-1], None, "dense", tf.tanh)


def create_model(bert_config, is_training, features, num_labels, pooling=FIRST,
                 multi_label=False, marker_ids=(), dropout_seed=None, on_encoder=None):
  """Returns (loss [], per_example_loss [B], logits [B, L], probabilities [B, L]).

  features: input_ids int32 [B, S], input_len int32 [B], segment_ids int32 [B, S],
  label_ids int32 [B] (multi_label: int32 [B, L], 0/1 a label). pooling: one of POOLINGS
  (pooled_output). multi_label: one sigmoid a label and the summed binary cross-entropy
  instead of softmax and cross-entropy (the same variables). marker_ids: the K entity start
  markers' vocab ids (--entity_markers, entity_markers.py): the classifier reads [CLS]'s vector
  and the last layer's state at each marker, concatenated (output_weights [L, (K+1) H]).
  dropout_seed: None (google's stateful dropout) or int64 [2]: every mask stateless
  (train_op.training_dropout_seed: a resumed run draws the uninterrupted run's masks).
  on_encoder: None, or a function called with the BertModel once it is built (run_distill's
  layer matching reads its hidden states and attention scores).
  """
  model = train_op.encoder(bert_config, is_training, features, dropout_seed, on_encoder)
  output_layer = pooled_output(model, features[records.INPUT_LEN], pooling)
  if marker_ids:  # the entity start representation beside [CLS]
    sequence = model.get_sequence_output()  # [B, S, H]
    states = tf.gather(sequence, entity_markers.start_positions(
        features[records.INPUT_IDS], marker_ids), batch_dims=1)  # [B, K, H]
    output_layer = tf.concat([output_layer, tf.reshape(
        states, [-1, len(marker_ids) * sequence.shape[-1]])], axis=-1)
  hidden_size = output_layer.shape[-1]
  output_weights = tf.get_variable("output_weights", [num_labels, hidden_size],
                                   initializer=tf.truncated_normal_initializer(stddev=0.02))
  output_bias = tf.get_variable("output_bias", [num_labels], initializer=tf.zeros_initializer())
  with tf.variable_scope("loss"):
    if is_training:
      output_layer = train_op.head_dropout(output_layer, dropout_seed,
                                           bert_config.num_hidden_layers)
    logits = tf.nn.bias_add(tf.matmul(output_layer, output_weights, transpose_b=True), output_bias)
    if multi_label:
      probabilities = tf.sigmoid(logits)
      per_example_loss = tf.reduce_sum(tf.nn.sigmoid_cross_entropy_with_logits(
          labels=tf.cast(features[batches.LABEL_IDS], tf.float32), logits=logits), axis=-1)
    else:
      probabilities = tf.nn.softmax(logits, axis=-1)
      log_probs = tf.nn.log_softmax(logits, axis=-1)
      one_hot_labels = tf.one_hot(features[batches.LABEL_IDS], depth=num_labels,
                                  dtype=tf.float32)
      per_example_loss = -tf.reduce_sum(one_hot_labels * log_probs, axis=-1)
    loss = tf.reduce_mean(per_example_loss)
  return loss, per_example_loss, logits, probabilities


def variable_shapes(bert_config, num_labels, max_seq_length, pooling=FIRST, marker_ids=()):
  """{name: shape list} of the classifier's trainable variables (built in a throwaway graph)."""
  with tf.Graph().as_default():
    features = {name: tf.placeholder(tf.int32, [None, max_seq_length]) for name in (
        records.INPUT_IDS, records.SEGMENT_IDS)}
    features[records.INPUT_LEN] = tf.placeholder(tf.int32, [None])
    features[batches.LABEL_IDS] = tf.placeholder(tf.int32, [None])
    create_model(bert_config, False, features, num_labels, pooling, marker_ids=marker_ids)
    return {variable_name(v): v.shape.as_list() for v in tf.trainable_variables()}


def streaming_confusion_matrix(labels, predictions, num_labels):
  """A tf.metrics-style (value, update_op): int64 [L, L] counts, rows = true labels."""
  total = tf.get_variable(
      "confusion_matrix_total", [num_labels, num_labels], dtype=tf.int64, trainable=False,
      initializer=tf.zeros_initializer(),
      collections=[tf.GraphKeys.LOCAL_VARIABLES, tf.GraphKeys.METRIC_VARIABLES])
  batch = tf.math.confusion_matrix(labels, predictions, num_classes=num_labels, dtype=tf.int64)
  update_op = tf.assign_add(total, batch)
  return tf.identity(total), update_op


def eval_metric_ops(per_example_loss, label_ids, logits, num_labels):
  """google's eval_accuracy / eval_loss plus the confusion matrix."""
  predictions = tf.argmax(logits, axis=-1, output_type=tf.int32)
  return {
      "eval_accuracy": tf.metrics.accuracy(labels=label_ids, predictions=predictions),
      "eval_loss": tf.metrics.mean(values=per_example_loss),
      CONFUSION_MATRIX: streaming_confusion_matrix(label_ids, predictions, num_labels),
  }


def model_fn_builder(bert_config, num_labels, init_checkpoint, dist, train_setup=None,
                     pooling=FIRST, multi_label=False, marker_ids=()):
  """Returns model_fn(features, labels, mode, params) for tf.estimator.Estimator.

  dist: training/distributed.init(...) result; train_setup: training/graph/train_setup.TrainSetup
  (TRAIN mode only);
  multi_label: create_model's (eval: eval_loss only; the F1s come from predictions and the
  thresholds chosen on dev, multi_label.py); marker_ids: create_model's.
  """

  def model_fn(features, labels, mode, params):  # pylint: disable=unused-argument
    is_training = mode == tf.estimator.ModeKeys.TRAIN
    loss, per_example_loss, logits, probabilities = create_model(
        bert_config, is_training, features, num_labels, pooling, multi_label, marker_ids,
        train_op.training_dropout_seed(train_setup if is_training else None, dist.rank))
    train_op.init_from_checkpoint(init_checkpoint, dist, train_setup if is_training else None)
    if is_training:
      return train_op.train_spec(mode, loss, dist, train_setup, features[records.INPUT_LEN])
    if mode == tf.estimator.ModeKeys.EVAL and multi_label:
      return tf.estimator.EstimatorSpec(mode=mode, loss=loss, eval_metric_ops={
          "eval_loss": tf.metrics.mean(values=per_example_loss)})
    if mode == tf.estimator.ModeKeys.EVAL:
      return tf.estimator.EstimatorSpec(mode=mode, loss=loss, eval_metric_ops=eval_metric_ops(
          per_example_loss, features[batches.LABEL_IDS], logits, num_labels))
    return tf.estimator.EstimatorSpec(mode=mode, predictions={"probabilities": probabilities,
                                                              "logits": logits})

  return model_fn
