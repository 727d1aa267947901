"""TinyBERT's intermediate-layer matching (Jiao et al. 2020) in the student's training step: the
student's hidden states and attention scores pulled toward its teacher layers', the teacher's
encoder running beside the student in the same graph, frozen.

The layer map: the student's layer i matches the teacher layer it was copied from (--layer_map,
--layer_selection); a --student_config student matches by --layer_selection's rule (skip: every
k-th, the top included, TinyBERT's uniform map). The embedding outputs match as TinyBERT's layer
0: a student copied from its teacher has the teacher's embeddings.

  hidden     mean over the pairs (the embeddings, then each student layer) of the MSE between
             the student's hidden state x W_i + b_i and the teacher's, at the real tokens
             (position j < input_len: padding rows are read by nothing), over the teacher's
             width; W_i float32 [H_student, H_teacher] under checkpoint_lib.DISTILL_FIT_SCOPE,
             only where the widths differ (no projection otherwise: the states match as they are);
  attention  mean over the student's layers of the MSE between the attention scores (query . key
             / sqrt(D) before the softmax, TinyBERT's choice: the probabilities' softmax flattens
             what the scores tell apart), where query and key are both real tokens (a masked key's
             score is never read, its -10000 adder is no score; a padding query's row is read by
             nothing), over every head; needs the teacher's head count.

The teacher's encoder is BertModel on the teacher's config, cut above the highest teacher layer
the map reads, under TEACHER_SCOPE: its variables are local (not saved in the student's
checkpoints: the output directory stays an ordinary fine-tuned one), not trainable (no gradient,
no optimizer slot), initialised from the teacher's checkpoint whenever a session starts (every
rank, a resumed run too), dropout off. The projections are ordinary trainable variables, saved
with the student's (a resumed run continues them exactly); checkpoint_lib counts their scope as
training state, so the exports and the yardstick leave them out.
"""
import collections
import copy
import re

import tensorflow.compat.v1 as tf

from bert_fin.finetune import train_op
from bert_fin.finetune.distill import student as student_lib
from bert_fin.modeling import checkpoint as checkpoint_lib
from bert_fin.modeling import layers
from bert_fin.records import schema as records

TEACHER_SCOPE = "distill_teacher"

Matching = collections.namedtuple("Matching", [
    "teacher_config", "teacher_checkpoint", "layer_map", "hidden_weight", "attention_weight"])
Matching.__doc__ = """What the matching losses need: the teacher's BertConfig and checkpoint,
layer_map ([int], the teacher layer each student layer matches), and the two weights."""


def plan(distill, teacher_config, student_config, layer_map, teacher_checkpoint):
  """Matching of the flags, None when both weights are 0 (no teacher in the student's graph).

  Args:
    distill: settings.distill (hidden_weight, attention_weight, layer_selection).
    teacher_config, student_config: BertConfig of each.
    layer_map: the teacher layers the student was copied from, None when it was not.
    teacher_checkpoint: the teacher's checkpoint prefix.

  Raises:
    ValueError (one line): --attention_weight with another head count than the teacher's, or a
      student deeper than its teacher.
  """
  if not (distill.hidden_weight > 0 or distill.attention_weight > 0):
    return None
  heads = (student_config.num_attention_heads, teacher_config.num_attention_heads)
  if distill.attention_weight > 0 and heads[0] != heads[1]:
    raise ValueError("--attention_weight matches attention scores head by head: the student has "
                     "%d heads, the teacher %d; use a student config with %d heads or drop the "
                     "flag" % (heads[0], heads[1], heads[1]))
  if layer_map is None:
    student_layers = student_config.num_hidden_layers
    if student_layers > teacher_config.num_hidden_layers:
      raise ValueError("--hidden_weight / --attention_weight match each student layer to a "
                       "teacher layer: the student has %d layers, the teacher %d; drop the flags "
                       "or use a shallower student" % (student_layers,
                                                       teacher_config.num_hidden_layers))
    layer_map = student_lib.select_layers(teacher_config.num_hidden_layers, student_layers,
                                          distill.layer_selection)
  return Matching(teacher_config, teacher_checkpoint, list(layer_map), distill.hidden_weight,
                  distill.attention_weight)


def _frozen_local(getter, *args, **kwargs):
  """A custom getter: the variable local (not saved) and not trainable."""
  kwargs["trainable"] = False
  kwargs["collections"] = [tf.GraphKeys.LOCAL_VARIABLES]
  return getter(*args, **kwargs)


def teacher_encoder(matching, features):
  """The teacher's BertModel (is_training False) on features (input_ids, segment_ids int32
  [B, S], input_len int32 [B]) under TEACHER_SCOPE, its layers up to the map's highest, its
  local variables started from matching.teacher_checkpoint (google's names)."""
  config = copy.deepcopy(matching.teacher_config)
  config.num_hidden_layers = max(matching.layer_map) + 1
  with tf.variable_scope(TEACHER_SCOPE, custom_getter=_frozen_local):
    model = train_op.encoder(config, False, features)
  prefix = re.compile("^" + TEACHER_SCOPE + "/")
  variables = [v for v in tf.local_variables() if prefix.match(v.name)]
  tf.train.init_from_checkpoint(matching.teacher_checkpoint, {
      prefix.sub("", checkpoint_lib.variable_name(v)): v for v in variables})
  return model


def _fitted(state, width, index, initializer_range):
  """state float32 [B, S, H_student] x W + b (float32 [B, S, width]) under
  DISTILL_FIT_SCOPE/hidden_<index>; state itself when the widths agree."""
  if state.shape[-1] == width:
    return state
  batch_size, seq_length, _ = layers.get_shape_list(state, expected_rank=3)
  with tf.variable_scope(checkpoint_lib.DISTILL_FIT_SCOPE):
    fitted = layers.dense_in_scope(layers.reshape_to_matrix(state), width,
                                   layers.create_initializer(initializer_range),
                                   "hidden_%d" % index)
  return layers.reshape_from_matrix(fitted, [batch_size, seq_length, width])


def masked_mse(student, teacher, weights):
  """float32 []: the mean of (student - teacher)^2 (float32, the same shape) over the entries
  where weights (float32 0 / 1, broadcast to their shape) is 1; 0 when there are none. The
  teacher is a constant (no gradient)."""
  weights = weights * tf.ones_like(student)
  return tf.reduce_sum(weights * tf.square(student - tf.stop_gradient(teacher))) / tf.maximum(
      tf.reduce_sum(weights), 1.0)


def hidden_loss(student_states, teacher_states, layer_map, input_len, initializer_range):
  """float32 []: the mean over the pairs (embeddings: 0 -> 0, student layer i -> teacher layer
  layer_map[i]) of masked_mse at the real tokens.

  Args:
    student_states, teacher_states: the embedding output then every layer's, each float32
      [B, S, H] (each model's width).
    layer_map: [int], the teacher layer of each student layer.
    input_len: int32 [B].
    initializer_range: the projections' initializer stddev.
  """
  seq_length = int(student_states[0].shape[1])
  real = tf.sequence_mask(input_len, seq_length, dtype=tf.float32)  # [B, S]
  pairs = [(0, 0)] + [(i + 1, t + 1) for i, t in enumerate(layer_map)]
  width = int(teacher_states[0].shape[-1])
  return tf.add_n([masked_mse(_fitted(student_states[s], width, s, initializer_range),
                              teacher_states[t], real[:, :, None])
                   for s, t in pairs]) / len(pairs)


def attention_loss(student_scores, teacher_scores, layer_map, input_len):
  """float32 []: the mean over the student's layers of masked_mse of its attention scores (float32
  [B, N, S, S] a layer) against the teacher layer layer_map[i]'s, where query and key are real
  tokens (input_len int32 [B]); every head weighs the same."""
  seq_length = int(student_scores[0].shape[-1])
  real = tf.sequence_mask(input_len, seq_length, dtype=tf.float32)  # [B, S]
  both = real[:, None, :, None] * real[:, None, None, :]  # [B, 1, S (query), S (key)]
  return tf.add_n([masked_mse(student_scores[i], teacher_scores[t], both)
                   for i, t in enumerate(layer_map)]) / len(layer_map)


def matching_loss(matching, student, features):
  """float32 []: hidden_weight x hidden_loss + attention_weight x attention_loss of the student's
  BertModel (student) against the teacher's encoder, built here on the same features."""
  teacher = teacher_encoder(matching, features)
  input_len = features[records.INPUT_LEN]
  terms = []
  if matching.hidden_weight > 0:
    terms.append(matching.hidden_weight * hidden_loss(
        [student.get_embedding_output()] + student.get_all_encoder_layers(),
        [teacher.get_embedding_output()] + teacher.get_all_encoder_layers(),
        matching.layer_map, input_len, matching.teacher_config.initializer_range))
  if matching.attention_weight > 0:
    terms.append(matching.attention_weight * attention_loss(
        student.get_all_attention_scores(), teacher.get_all_attention_scores(),
        matching.layer_map, input_len))
  return tf.add_n(terms)
