"""bert_fin's own model graph as a TF2 function with its variables restored from a checkpoint.

The serving graph is the fine-tuning graph: `wrap(build, seq_length)` runs a TF1-style builder
(tf.compat.v1 variable scopes, BertModel, a head) once under tf.compat.v1.wrap_function, which
turns its tf.get_variable calls into resource variables of the same names; `restore(function,
checkpoint)` then loads every variable from the checkpoint by that name, after checking that
the checkpoint holds each one with the same shape (a missing or reshaped variable would serve a
random or wrong model). The inputs are NVIDIA's export's: input_ids, input_mask, segment_ids,
int32 [batch, seq_length]; bert_fin's model reads the real length, the mask's row sums (a mask is a
run of ones then zeros, as every BERT tokenizer writes it).
"""
import tensorflow as tf

from bert_fin.modeling.checkpoint import variable_name
from bert_fin.records import schema as records

INPUT_NAMES = ("input_ids", "input_mask", "segment_ids")  # NVIDIA's export's names


class RestoreError(ValueError):
  """The checkpoint cannot give the model its weights (one line: which variables, what to do)."""


def input_specs(seq_length):
  """tf.TensorSpec of each INPUT_NAMES input: int32 [None, seq_length]."""
  return [tf.TensorSpec([None, seq_length], tf.int32, name) for name in INPUT_NAMES]


def features_of(input_ids, input_mask, segment_ids):
  """bert_fin's model features of the serving inputs (int32 [B, S] each): input_ids,
  segment_ids, and input_len int32 [B], the mask's row sums."""
  return {records.INPUT_IDS: input_ids, records.SEGMENT_IDS: segment_ids,
          records.INPUT_LEN: tf.reduce_sum(input_mask, axis=1)}


def wrap(build, seq_length):
  """A ConcreteFunction (input_ids, input_mask, segment_ids) -> build's dict of tensors.

  Args:
    build: function of the features (features_of) building the model with tf.compat.v1 ops and
      returning {name: tensor [B, ...]}.
    seq_length: int, S.
  """
  def forward(input_ids, input_mask, segment_ids):
    return build(features_of(input_ids, input_mask, segment_ids))
  return tf.compat.v1.wrap_function(forward, input_specs(seq_length))


def restore(function, checkpoint, skip=()):
  """Assigns each of `function`'s variables its value in `checkpoint` (same name); variables
  whose names start with a `skip` prefix (parts of the graph no output reads) are left alone.

  Raises:
    RestoreError: variables missing from the checkpoint or of another shape, or whose values do
      not read (a damaged data file).
  """
  reader = tf.train.load_checkpoint(checkpoint)
  shapes = reader.get_variable_to_shape_map()
  variables = {variable_name(v): v for v in function.variables
               if not variable_name(v).startswith(tuple(skip))}
  missing = sorted(name for name in variables if name not in shapes)
  reshaped = ["%s (model %s, checkpoint %s)" % (name, variables[name].shape.as_list(),
                                                shapes[name])
              for name in sorted(variables)
              if name in shapes and list(shapes[name]) != variables[name].shape.as_list()]
  if missing or reshaped:
    raise RestoreError("%s does not fit the model: %s%s" % (
        checkpoint, "%d variable(s) missing (%s)" % (len(missing), ", ".join(missing[:4]))
        if missing else "", "; " * bool(missing and reshaped) + (
            "%d of another shape: %s" % (len(reshaped), "; ".join(reshaped[:4]))
            if reshaped else "")))
  for name, variable in variables.items():
    try:
      value = reader.get_tensor(name)
    except (tf.errors.OpError, IndexError, RuntimeError) as e:  # what a damaged file raises
      raise RestoreError("%s: cannot read %s (%s): a damaged checkpoint; use another one" % (
          checkpoint, name, str(e).splitlines()[0])) from None
    variable.assign(value)
  return sorted(variables)


class Servable(tf.Module):
  """What every kind's servable module (classifier, features, ner, question_answering) starts
  from: the model of `build` (wrap's) restored from `checkpoint` (restore's `skip`), its
  variables tracked so that they are saved with the module, and the graph tokenizer.

  Args:
    name: the tf.Module's name.
    build: as wrap's (it may read self._spec: set first).
    spec: the kind's Spec (spec.seq_length: S).
    checkpoint: the checkpoint prefix.
    tokenizer: graph_tokenizer.GraphTokenizer of the model's vocab and casing.
    skip: as restore's.

  Raises:
    RestoreError: as restore.
  """

  def __init__(self, name, build, spec, checkpoint, tokenizer, skip=()):
    super().__init__(name=name)
    self._spec = spec
    self._model = wrap(build, spec.seq_length)
    self._weights = list(self._model.variables)  # tracked: saved with the module
    restore(self._model, checkpoint, skip=skip)
    self.tokenizer = tokenizer
