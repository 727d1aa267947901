"""The distillation loss of a classifier or a tagger (in the graph).

soft_target_loss: T^2 x KL(softmax(teacher / T) || softmax(student / T)), the mean over the batch
(Hinton et al. 2015: the T^2 keeps the gradients' scale as T changes); a tagger's (its emission
scores, what the CRF reads) is the mean over the positions of `mask` (run_ner's label positions:
each unit's first piece), every unit of the batch weighing the same, as run_ner's gold loss.
binary_soft_target_loss, a multi-label classifier's (one sigmoid a label): T^2 x the mean over
the batch and the labels of the Bernoulli KL(sigmoid(teacher / T) || sigmoid(student / T)).
distillation_loss mixes it with the gold loss: alpha x soft + (1 - alpha) x gold, and with
alpha = 0 it is the gold loss itself (no op of the soft term in the graph).
"""
import tensorflow.compat.v1 as tf


def _kl(student_logits, teacher_logits, temperature):
  """float32 [...]: KL(softmax(teacher / T) || softmax(student / T)) over the last axis."""
  teacher = tf.stop_gradient(tf.cast(teacher_logits, tf.float32)) / temperature
  student = tf.cast(student_logits, tf.float32) / temperature
  teacher_log_probs = tf.nn.log_softmax(teacher, axis=-1)
  return tf.reduce_sum(tf.exp(teacher_log_probs) * (
      teacher_log_probs - tf.nn.log_softmax(student, axis=-1)), axis=-1)


def soft_target_loss(student_logits, teacher_logits, temperature, mask=None):
  """float32 []: T^2 x mean KL(teacher || student) at temperature T.

  Args:
    student_logits: float32 [B, L] (a tagger's emissions: [B, S, L]).
    teacher_logits: float32 of the same shape, the teacher's stored logits (constants: no
      gradient).
    temperature: T > 0.
    mask: None (the mean over the rows), or int32 [B, S]: the mean over the positions where it
      is 1 (0 for a batch without any).
  """
  kl = _kl(student_logits, teacher_logits, temperature)  # [B] or [B, S]
  if mask is None:
    return tf.reduce_mean(kl) * (temperature ** 2)
  weights = tf.cast(mask, tf.float32)
  return tf.reduce_sum(kl * weights) / tf.maximum(tf.reduce_sum(weights), 1.0) * (
      temperature ** 2)


def binary_soft_target_loss(student_logits, teacher_logits, temperature):
  """float32 []: T^2 x the mean over rows and labels of KL(Bernoulli(sigmoid(teacher / T)) ||
  Bernoulli(sigmoid(student / T))).

  Args:
    student_logits, teacher_logits: float32 [B, L], one logit a label (the teacher's stored:
      no gradient). A label's Bernoulli is the softmax of the logit pair [x, 0], so each label's
      KL is _kl of the pairs.
    temperature: T > 0.
  """
  def pairs(logits):  # [B, L] -> [B, L, 2]
    logits = tf.cast(logits, tf.float32)
    return tf.stack([logits, tf.zeros_like(logits)], axis=-1)
  return tf.reduce_mean(_kl(pairs(student_logits), pairs(teacher_logits), temperature)) * (
      temperature ** 2)


def labelled_mean(per_example_loss, labelled):
  """float32 []: the mean of per_example_loss (float32 [B]) over the rows whose labelled (int32
  [B], 1: a gold label, 0: an --unlabeled_file text) is 1; 0 for a batch without any."""
  weights = tf.cast(labelled, tf.float32)
  return tf.reduce_sum(per_example_loss * weights) / tf.maximum(tf.reduce_sum(weights), 1.0)


def labelled_positions(mask, labelled):
  """int32 [B, S]: a tagger's label positions (mask int32 [B, S]) of the labelled rows only
  (labelled int32 [B]: 1 a window with gold tags, 0 an --unlabeled_file text's): the positions
  its gold loss (run_ner's, the CRF's too: a row without positions adds nothing) reads."""
  return mask * tf.cast(labelled, mask.dtype)[:, None]


def distillation_loss(gold_loss, student_logits, teacher_logits, temperature, alpha, mask=None,
                      multi_label=False):
  """float32 []: alpha x soft_target_loss (mask: a tagger's, as there; multi_label:
  binary_soft_target_loss) + (1 - alpha) x gold_loss; gold_loss (float32 []) itself when
  alpha == 0, the soft loss alone when alpha == 1."""
  if alpha == 0:
    return gold_loss
  soft = (binary_soft_target_loss(student_logits, teacher_logits, temperature) if multi_label
          else soft_target_loss(student_logits, teacher_logits, temperature, mask))
  if alpha == 1:
    return soft
  return alpha * soft + (1.0 - alpha) * gold_loss
