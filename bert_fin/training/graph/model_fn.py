"""run_pretraining's Estimator model_fn: model + heads, init checkpoint, train op, eval metrics.

Same graph as google-research/bert's run_pretraining.model_fn_builder (variable names, losses named
"mlm_loss", "nsp_loss", "total_loss", google's four eval metrics), with bert_fin's pieces:
  model          bert_fin.modeling.BertModel fed input_len (not input_mask) and segment_ids;
  heads/losses   losses.pretraining_losses(config, model, features, objective);
  init           modeling.init_from_checkpoint on the chief only; the other ranks get the weights
                 from the broadcast hook that estimator.py adds (dist.broadcast_hooks());
  train op       train_setup.train_op_and_hooks, the fine-tuning programs' builder too
                 (schedule, optimizer, accumulation, loss scaling, allreduce, finite check,
                 --init_regularizer's penalty named "init_penalty", the progress guard, the
                 chief's step lines and summaries), fed the losses and the training masked-LM
                 accuracy to log (the spec's loss is progress_guard's reported_loss);
  data position  input/stream.py's variable, advanced after every micro-batch; with a seed,
                 dropout is stateless in (seed, rank, position).
What the records hold (packed or not) comes from the run's RecordLayout, not from the features.
"""
import tensorflow.compat.v1 as tf

from bert_fin import modeling
from bert_fin.records import schema as records
from bert_fin.input import stream
from bert_fin.modeling import checkpoint
from bert_fin.training.monitor import plateau
from bert_fin.training.monitor import progress_guard
from bert_fin.training.graph import losses as losses_lib
from bert_fin.training.graph import train_setup as train_setup_lib


def _log_features(features):
  tf.logging.info("*** Features ***")
  for name in sorted(features.keys()):
    tf.logging.info("  name = %s, shape = %s", name, features[name].shape)


def _build_model(bert_config, features, packed, is_training, recompute, dropout_seed=None):
  """BertModel on the decoded features (input_len masks the padding; packed rows also pass
  sequence_lens: per-sequence attention, positions and [CLS])."""
  return modeling.BertModel(
      config=bert_config,
      is_training=is_training,
      input_ids=features[records.INPUT_IDS],
      input_len=features[records.INPUT_LEN],
      token_type_ids=features[records.SEGMENT_IDS],
      recompute=recompute and is_training,
      dropout_seed=dropout_seed,
      sequence_lens=features[records.SEQUENCE_LENS] if packed else None)


def _named_losses(losses):
  """(total, mlm, nsp) scalars under google/NVIDIA's tensor names."""
  mlm = tf.identity(losses["mlm_loss"], name="mlm_loss")
  nsp = tf.identity(losses["nsp_loss"], name="nsp_loss")
  total = tf.identity(losses["total_loss"], name="total_loss")
  return total, mlm, nsp


def _init_from_checkpoint(init_checkpoint, is_chief):
  """Loads init_checkpoint into the trainable variables (chief only), logging the name report."""
  tvars = tf.trainable_variables()
  if not init_checkpoint or not is_chief:
    return tvars
  modeling.init_from_checkpoint(init_checkpoint, tvars, log=tf.logging.info)
  return tvars


def pretraining_variable_shapes(bert_config, objective="bert", trained_only=False):
  """{name: shape list} of the variables of run_pretraining's model (BertModel + the heads of
  `objective`), read from a throwaway graph of a 1 x 2 batch: what the training graph will hold,
  known before it is built. trained_only: only those the total loss has a gradient for (objective
  "roberta" leaves out the pooler): what training updates (training/head_warmup.py)."""
  with tf.Graph().as_default():
    tf.set_random_seed(0)  # never run, but op determinism (--deterministic) refuses unseeded ops
    features = {records.INPUT_IDS: tf.zeros([1, 2], tf.int32),
                records.INPUT_LEN: tf.fill([1], 2),
                records.SEGMENT_IDS: tf.zeros([1, 2], tf.int32),
                records.MASKED_LM_POSITIONS: tf.zeros([1, 1], tf.int32),
                records.MASKED_LM_IDS: tf.zeros([1, 1], tf.int32),
                records.MASKED_LM_WEIGHTS: tf.ones([1, 1], tf.float32),
                records.NEXT_SENTENCE_LABELS: tf.zeros([1, 1], tf.int32)}
    model = _build_model(bert_config, features, packed=False, is_training=False, recompute=False)
    losses = losses_lib.pretraining_losses(bert_config, model, features, objective)
    tvars = tf.trainable_variables()
    kept = tvars
    if trained_only:
      grads = tf.gradients(losses["total_loss"], tvars)
      kept = [v for v, g in zip(tvars, grads) if g is not None]
    return {checkpoint.variable_name(v): v.shape.as_list() for v in kept}


def masked_lm_predictions(losses):
  """int32 [B*P]: the most likely token at each masked position."""
  return tf.argmax(losses["mlm_log_probs"], axis=-1, output_type=tf.int32)


def masked_lm_accuracy(losses):
  """float32 []: this batch's masked-LM accuracy, weighted by mlm_weights (padding excluded);
  the training-side counterpart of eval's masked_lm_accuracy."""
  correct = tf.cast(tf.equal(masked_lm_predictions(losses), losses["mlm_ids"]), tf.float32)
  weights = tf.cast(losses["mlm_weights"], tf.float32)
  return tf.div_no_nan(tf.reduce_sum(correct * weights), tf.reduce_sum(weights),
                       name="mlm_accuracy")


def eval_metric_ops(losses):
  """google's metric_fn: masked_lm_accuracy/loss and (BERT objective) next_sentence_accuracy/loss,
  and masked_lm_top_token_share (plateau.py: the accuracy of the unigram plateau).

  losses: the dict of losses.pretraining_losses (mlm_log_probs [B*P, V], mlm_ids/weights [B*P],
  mlm_per_example_loss [B*P], nsp_* [B] or None). Packed rows: the next-sentence metrics are
  weighted by nsp_weights (real sequences only), so they mean what they mean unpacked.
  """
  mlm_predictions = masked_lm_predictions(losses)
  metrics = {
      "masked_lm_accuracy": tf.metrics.accuracy(
          labels=losses["mlm_ids"], predictions=mlm_predictions, weights=losses["mlm_weights"]),
      "masked_lm_loss": tf.metrics.mean(
          values=losses["mlm_per_example_loss"], weights=losses["mlm_weights"]),
      plateau.TOP_SHARE_KEY: plateau.top_token_share_metric(  # the unigram plateau's accuracy
          losses["mlm_ids"], losses["mlm_weights"], losses["mlm_log_probs"].shape[-1]),
  }
  if losses.get("nsp_log_probs") is not None:
    nsp_predictions = tf.argmax(losses["nsp_log_probs"], axis=-1, output_type=tf.int32)
    nsp_weights = losses.get("nsp_weights")
    metrics["next_sentence_accuracy"] = tf.metrics.accuracy(
        labels=losses["nsp_labels"], predictions=nsp_predictions, weights=nsp_weights)
    metrics["next_sentence_loss"] = tf.metrics.mean(values=losses["nsp_per_example_loss"],
                                                    weights=nsp_weights)
  return metrics


def _train_op_and_hooks(total, mlm, nsp, mlm_accuracy, features, packed, tvars, dist, setup):
  """(train_op, training hooks) of one micro-batch: train_setup.train_op_and_hooks, logging the
  losses and the masked-LM accuracy (nsp may be None: roberta); packed rows count sequences."""
  logged = {"total_loss": total, "mlm_loss": mlm, "nsp_loss": nsp, "mlm_accuracy": mlm_accuracy}
  return train_setup_lib.train_op_and_hooks(
      total, dist, setup, features[records.INPUT_LEN], logged, tvars=tvars,
      sequence_lens=features[records.SEQUENCE_LENS] if packed else None)


def model_fn_builder(bert_config, layout, init_checkpoint, dist, train_setup, objective="bert",
                     recompute=False, seed=None):
  """Returns model_fn(features, labels, mode, params) for tf.estimator.Estimator.

  bert_config: modeling.BertConfig; layout: records.RecordLayout of the records read (packed rows:
  max_sequences_per_pack set); dist: distributed.init(...) result (rank, size, is_chief);
  train_setup: train_setup.TrainSetup (only read in TRAIN mode); objective: "bert" | "roberta".
  seed: the run's seed; with it, training dropout is stateless in (seed, rank, data position)
  and resumes exactly (input/stream.py); None: google's stateful dropout.
  features: the dict of input/tfdata.py (int32 [B, S] ids, int32 [B] input_len, ...).
  TRAIN mode also counts micro-batches in the stream's checkpointed position variable.
  """
  packed = bool(layout.max_sequences_per_pack)

  def model_fn(features, labels, mode, params):  # pylint: disable=unused-argument
    """TRAIN: loss + train_op (+ chief's logging hooks); EVAL: loss + google's metrics."""
    if mode not in (tf.estimator.ModeKeys.TRAIN, tf.estimator.ModeKeys.EVAL):
      raise ValueError("Only TRAIN and EVAL modes are supported: %s" % mode)
    _log_features(features)
    is_training = mode == tf.estimator.ModeKeys.TRAIN
    position = stream.position_variable() if is_training else None
    dropout_seed = None
    if is_training and seed is not None:
      dropout_seed = stream.dropout_seed(seed, dist.rank, position.read_value())
    model = _build_model(bert_config, features, packed, is_training, recompute, dropout_seed)
    losses = losses_lib.pretraining_losses(bert_config, model, features, objective, packed)
    total, mlm, nsp = _named_losses(losses)
    tvars = _init_from_checkpoint(init_checkpoint, dist.is_chief)
    if is_training:
      nsp_logged = nsp if objective == "bert" else None
      train_op, hooks = _train_op_and_hooks(total, mlm, nsp_logged, masked_lm_accuracy(losses),
                                            features, packed, tvars, dist, train_setup)
      train_op = stream.advance_after(train_op, position)
      return tf.estimator.EstimatorSpec(mode=mode, loss=progress_guard.reported_loss(total),
                                        train_op=train_op, training_hooks=hooks)
    return tf.estimator.EstimatorSpec(mode=mode, loss=total,
                                      eval_metric_ops=eval_metric_ops(losses))

  return model_fn
