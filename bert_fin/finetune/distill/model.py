"""run_distill's Estimator model_fns: run_classifier's model (classify/model.py) or, for a run_ner
teacher, run_ner's tagger (ner/model.py, its CRF kept) on the student's config, trained on
losses.distillation_loss of its logits and the teacher's stored logits (+ with
--hidden_weight / --attention_weight, matching.matching_loss: the teacher's encoder, frozen, built
in the training graph beside the student).

Features in TRAIN mode: run_classifier's (input_ids, input_len, segment_ids int32 [B, S],
label_ids int32 [B], a multi-label student's int32 [B, L] 0/1) and, when alpha > 0,
TEACHER_LOGITS float32 [B, L]; with --unlabeled_file LABELLED int32 [B] (0: a text without a
gold label, whose label_ids is a placeholder). Eval and predict are run_classifier's model_fn
itself: the student is an ordinary classifier (same variables).
A tagger's: run_ner's features (input_ids, input_len, segment_ids, label_ids, label_mask int32
[B, S]) and, when alpha > 0, TEACHER_LOGITS float32 [B, S, L] (the teacher's emission scores);
the soft term is read at label_mask's positions, the gold term at the labelled windows' (with
--unlabeled_file: LABELLED int32 [B]); eval and predict are run_ner's model_fn.
"""
import tensorflow.compat.v1 as tf

from bert_fin.records import schema as records
from bert_fin.finetune import train_op
from bert_fin.finetune.classify import model as classifier
from bert_fin.finetune.distill import losses
from bert_fin.finetune.distill import matching as matching_lib
from bert_fin.finetune.ner import features as ner_features
from bert_fin.finetune.ner import model as tagger

TEACHER_LOGITS, LABELLED = "teacher_logits", "labelled"


def model_fn_builder(bert_config, num_labels, init_checkpoint, dist, train_setup, pooling,
                     temperature, alpha, multi_label=False, matching=None):
  """model_fn(features, labels, mode, params) of the student (bert_config: its config); the
  other arguments as classify/model.py's model_fn_builder (multi_label: one sigmoid a label,
  the binary soft targets), temperature and alpha losses.py's, matching: matching.Matching (its
  losses added, the teacher's encoder in the step) or None."""
  classifier_fn = classifier.model_fn_builder(bert_config, num_labels, init_checkpoint, dist,
                                              train_setup, pooling, multi_label)

  def distilled_loss(features, dropout_seed):
    encoders = []
    gold_loss, per_example_loss, logits, _ = classifier.create_model(
        bert_config, True, features, num_labels, pooling, multi_label,
        dropout_seed=dropout_seed, on_encoder=encoders.append)
    if LABELLED in features:  # the gold term: the labelled rows only
      gold_loss = losses.labelled_mean(per_example_loss, features[LABELLED])
    return _with_matching(losses.distillation_loss(
        gold_loss, logits, features.get(TEACHER_LOGITS), temperature, alpha,
        multi_label=multi_label), matching, encoders[0], features)

  return _student_model_fn(classifier_fn, distilled_loss, init_checkpoint, dist, train_setup)


def _with_matching(loss, matching, student, features):
  """loss (float32 []) + matching_lib.matching_loss of the student's BertModel, or loss itself
  when matching is None (no teacher in the graph)."""
  if matching is None:
    return loss
  return loss + matching_lib.matching_loss(matching, student, features)


def _student_model_fn(eval_fn, distilled_loss, init_checkpoint, dist, train_setup):
  """model_fn(features, labels, mode, params): eval_fn (the program's own model_fn) outside
  training; in training the loss distilled_loss(features, dropout_seed) gives (its graph built
  first, then the student's weights restored), trained as the fine-tuning programs train."""

  def model_fn(features, labels, mode, params):
    if mode != tf.estimator.ModeKeys.TRAIN:
      return eval_fn(features, labels, mode, params)
    loss = distilled_loss(features, train_op.training_dropout_seed(train_setup, dist.rank))
    train_op.init_from_checkpoint(init_checkpoint, dist, train_setup)
    return train_op.train_spec(mode, loss, dist, train_setup, features[records.INPUT_LEN])

  return model_fn


def teacher_model_fn(bert_config, num_labels, pooling, dist, multi_label=False):
  """The teacher's predict-only model_fn (its weights: Estimator.predict's checkpoint_path)."""
  return classifier.model_fn_builder(bert_config, num_labels, None, dist, None, pooling,
                                     multi_label)


def tagger_model_fn_builder(bert_config, num_labels, init_checkpoint, dist, train_setup, use_crf,
                            temperature, alpha, matching=None):
  """model_fn(features, labels, mode, params) of a tagger student (bert_config: its config):
  run_ner's model (use_crf: its CRF, the teacher's transitions to start from) trained on its
  gold loss mixed with the soft targets of the teacher's emission scores at the label
  positions (+ matching's losses, as model_fn_builder's); the other arguments as ner/model.py's
  model_fn_builder."""
  tagger_fn = tagger.model_fn_builder(bert_config, num_labels, init_checkpoint, dist,
                                      train_setup, use_crf)

  def distilled_loss(features, dropout_seed):
    gold_features = features
    if LABELLED in features:  # the gold term: the labelled windows' units only
      gold_features = dict(features, **{ner_features.LABEL_MASK: losses.labelled_positions(
          features[ner_features.LABEL_MASK], features[LABELLED])})
    encoders = []
    gold_loss, _, logits, _ = tagger.create_model(bert_config, True, gold_features, num_labels,
                                                  use_crf, dropout_seed=dropout_seed,
                                                  on_encoder=encoders.append)
    return _with_matching(losses.distillation_loss(
        gold_loss, logits, features.get(TEACHER_LOGITS), temperature, alpha,
        features[ner_features.LABEL_MASK]), matching, encoders[0], features)

  return _student_model_fn(tagger_fn, distilled_loss, init_checkpoint, dist, train_setup)


def teacher_tagger_model_fn(bert_config, num_labels, use_crf):
  """The tagger teacher's predict-only model_fn: {"logits": float32 [S, L]} a row, the emission
  scores its CRF (or softmax) reads (its weights: Estimator.predict's checkpoint_path)."""

  def model_fn(features, labels, mode, params):  # pylint: disable=unused-argument
    _, _, logits, _ = tagger.create_model(bert_config, False, features, num_labels, use_crf)
    return tf.estimator.EstimatorSpec(mode=mode, predictions={"logits": logits})

  return model_fn
