"""The student's shape and first weights, from the teacher (pure but for the checkpoint read).

  select_layers     which teacher layers a student of N layers starts from (skip / bottom);
  check_layer_map   a layer map in range, one teacher layer a student layer;
  check_copyable    a student config whose layers can take the teacher's (same widths);
  student_config    the teacher's config with N layers;
  student_tensors   the teacher's weights renamed for the student: layer_map[i] -> layer_i, the
                    embeddings, pooler and classifier head as they are, other layers dropped.
"""
import copy
import re

from bert_fin.finetune.distill import flags as distill_flags

_LAYER = re.compile(r"^(bert/encoder/layer_)(\d+)(/.*)$")
WIDTHS = ("hidden_size", "intermediate_size", "num_attention_heads", "vocab_size",
          "max_position_embeddings", "type_vocab_size")


def select_layers(teacher_layers, student_layers, selection):
  """[int] student_layers teacher layer numbers (from 0), increasing.

  skip: every k-th, the top layer included (round((i + 1) L / N) - 1: 12 -> 3 gives 3, 7, 11);
  bottom: 0 .. N - 1. ValueError when the student has more layers than the teacher.
  """
  if not 1 <= student_layers <= teacher_layers:
    raise ValueError("--student_layers=%d: the teacher has %d layers to take them from" % (
        student_layers, teacher_layers))
  if selection == distill_flags.BOTTOM:
    return list(range(student_layers))
  return [int(round((i + 1) * teacher_layers / student_layers)) - 1
          for i in range(student_layers)]


def check_layer_map(layer_map, teacher_layers, student_layers):
  """ValueError naming --layer_map unless it holds student_layers teacher layers in
  [0, teacher_layers)."""
  if len(layer_map) != student_layers:
    raise ValueError("--layer_map names %d teacher layers for a student of %d layers" % (
        len(layer_map), student_layers))
  wrong = [layer for layer in layer_map if not 0 <= layer < teacher_layers]
  if wrong:
    raise ValueError("--layer_map: layer(s) %s out of range: the teacher has layers 0..%d" % (
        ",".join(str(layer) for layer in wrong), teacher_layers - 1))


def check_copyable(student, teacher, where):
  """ValueError unless the student BertConfig's widths are the teacher's (its layers are
  copies of the teacher's); where: the student config's file, for the message."""
  differ = ["%s %s vs the teacher's %s" % (name, getattr(student, name), getattr(teacher, name))
            for name in WIDTHS if getattr(student, name) != getattr(teacher, name)]
  if differ:
    raise ValueError("%s: a student asked to copy teacher layers (--layer_map) needs the "
                     "teacher's widths: %s; drop --layer_map (random or --student_init) or "
                     "use --student_layers" % (where, "; ".join(differ)))


def checkpoint_layers(names):
  """The number of encoder layers a checkpoint's variable names (google's) hold: the highest
  bert/encoder/layer_N + 1, 0 when none."""
  numbers = [int(match.group(2)) for match in map(_LAYER.match, names) if match]
  return max(numbers) + 1 if numbers else 0


def student_config(teacher, num_layers):
  """A copy of the teacher BertConfig with num_layers encoder layers."""
  config = copy.deepcopy(teacher)
  config.num_hidden_layers = num_layers
  return config


def student_tensors(teacher_tensors, layer_map):
  """{name: array} of the student: bert/encoder/layer_{layer_map[i]}/... renamed layer_i/...,
  every other teacher layer dropped, the rest (embeddings, pooler, output_weights / output_bias)
  kept. teacher_tensors: {google name: np.ndarray} (checkpoint_lib.model_tensors)."""
  student_of = {teacher: student for student, teacher in enumerate(layer_map)}
  tensors = {}
  for name, value in teacher_tensors.items():
    match = _LAYER.match(name)
    if match is None:
      tensors[name] = value
    elif int(match.group(2)) in student_of:
      tensors["%s%d%s" % (match.group(1), student_of[int(match.group(2))], match.group(3))] = value
  return tensors
