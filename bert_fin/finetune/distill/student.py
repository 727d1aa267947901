"""The student, whatever the teacher's head: its shape and first weights from the teacher, and
the files that say where it started (shared by the classifier and the tagger distillation).

  select_layers     which teacher layers a student of N layers starts from (skip / bottom);
  check_layer_map   a layer map in range, one teacher layer a student layer;
  check_copyable    a student config whose layers can take the teacher's (same widths);
  student_config    the teacher's config with N layers;
  student_tensors   the teacher's weights renamed for the student: layer_map[i] -> layer_i, the
                    embeddings, pooler and head (classifier, or tagger and CRF transitions) as
                    they are, other layers dropped;
  teacher_config    --bert_config_file checked against the teacher checkpoint's depth;
  resolve           (student config, layer map) of the flags;
  init_checkpoint   where the student starts: OUTPUT_DIR/student_init/, --student_init or random;
  record / check_record   RECORD_FILE: the losses and origin a checkpoint was trained with;
  write_files       the chief's bert_config.json, vocab.txt and student_init/ in --output_dir,
                    once.
"""
import copy
import json
import os
import re

import tensorflow.compat.v1 as tf

from bert_fin import io_utils
from bert_fin.finetune.distill import flags as distill_flags
from bert_fin.interop import hf_files
from bert_fin.modeling import checkpoint as checkpoint_lib
from bert_fin.modeling import config as config_lib
from bert_fin.tokenization import google as google_tokenization

STUDENT_CONFIG_FILE = "bert_config.json"
STUDENT_VOCAB_FILE = hf_files.VOCAB_FILE  # vocab.txt: what the exports and the yardstick look for
STUDENT_INIT_DIR, STUDENT_INIT_PREFIX = "student_init", "model.ckpt"
RECORD_FILE = "distill.json"  # the losses and the student's origin a checkpoint was trained with

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


def teacher_config(config_file, max_seq_length, checkpoint):
  """The teacher's BertConfig (--bert_config_file); ValueError (one line) when its depth is not
  the teacher checkpoint's."""
  config = config_lib.read_config_for(config_file, max_seq_length)
  layers = checkpoint_layers(name for name, _ in tf.train.list_variables(checkpoint))
  if layers != config.num_hidden_layers:
    raise ValueError("--bert_config_file %s has %d layers, the teacher's checkpoint %s holds %d: "
                     "pass the config the teacher was fine-tuned with" % (
                         config_file, config.num_hidden_layers, checkpoint, layers))
  return config


def resolve(distill, teacher, max_seq_length):
  """(student BertConfig, layer map or None) of the flags (distill: settings.distill; teacher:
  the teacher's BertConfig); ValueError naming the flag."""
  layer_map = distill_flags.layer_map_of(distill)
  teacher_layers = teacher.num_hidden_layers
  if not distill.student_config:
    if layer_map is None:
      layer_map = select_layers(teacher_layers, distill.student_layers, distill.layer_selection)
    check_layer_map(layer_map, teacher_layers, distill.student_layers)
    return student_config(teacher, distill.student_layers), layer_map
  config = config_lib.read_config_for(distill.student_config, max_seq_length)
  if config.vocab_size != teacher.vocab_size:
    raise ValueError("--student_config %s: vocab_size %d, the teacher's is %d: the student "
                     "reads the teacher's vocab" % (distill.student_config, config.vocab_size,
                                                    teacher.vocab_size))
  if layer_map is not None:
    if distill.student_init:
      raise ValueError("--layer_map and --student_init both say where the student starts: "
                       "pass one")
    check_copyable(config, teacher, "--student_config " + distill.student_config)
    check_layer_map(layer_map, teacher_layers, config.num_hidden_layers)
  return config, layer_map


def init_checkpoint(settings, layer_map):
  """The checkpoint the student starts from: OUTPUT_DIR/student_init/ (teacher layers), else
  --student_init, else None (random)."""
  if layer_map is not None:
    return os.path.join(settings.output.output_dir, STUDENT_INIT_DIR, STUDENT_INIT_PREFIX)
  return settings.distill.student_init or None


def record(settings, layer_map):
  """What a resumed run must share with the checkpoint it continues (RECORD_FILE)."""
  distill = settings.distill
  return {"temperature": distill.temperature, "alpha": distill.alpha, "layer_map": layer_map,
          "student_init": distill.student_init, "unlabeled_file": distill.unlabeled_file,
          # recorded when set: a record written before the flag existed still resumes
          **({"unlabeled_weight": distill.unlabeled_weight} if distill.unlabeled_weight else {}),
          **({"ensemble_dirs": list(distill.ensemble_dirs)} if distill.ensemble_dirs else {}),
          **{name: getattr(distill, name) for name in ("hidden_weight", "attention_weight")
             if getattr(distill, name)}}


def check_record(output_dir, wanted):
  """ValueError (one line) when output_dir holds a checkpoint distilled with other settings
  than `wanted` (record()): continuing it would mix two losses or two students."""
  if not checkpoint_lib.resolve_checkpoint(output_dir, run_dir=True):
    return
  path = os.path.join(output_dir, RECORD_FILE)
  saved = io_utils.read_saved(path, json.loads, lambda e: ValueError(
      "%s: not run_distill's record (%s); use a new --output_dir" % (path, e)))
  if saved != wanted:
    raise ValueError("--output_dir %s holds a checkpoint distilled with %s, this run asks for "
                     "%s: resume with the recorded flags or use a new --output_dir" % (
                         output_dir, json.dumps(saved, sort_keys=True),
                         json.dumps(wanted, sort_keys=True)))


def write_record(output_dir, settings, layer_map):
  """RECORD_FILE in output_dir (atomic)."""
  io_utils.write_json_atomic(os.path.join(output_dir, RECORD_FILE), record(settings, layer_map))


def write_files(output_dir, config, vocab_file, layer_map, teacher_checkpoint):
  """The chief's student files in output_dir, once: bert_config.json (config), vocab.txt (the
  bytes of vocab_file, the vocab teacher and student read: a directory that names its own
  vocab, as google's releases and transformers folders do), and student_init/ (the teacher's
  layers of layer_map, None: none) built in a scratch directory and renamed in. Each file is
  written atomically."""
  with io_utils.atomic_output(os.path.join(output_dir, STUDENT_CONFIG_FILE)) as f:
    f.write(config.to_json_string())
  with io_utils.atomic_output(os.path.join(output_dir, STUDENT_VOCAB_FILE), mode="wb",
                              encoding=None) as f:
    f.write(google_tokenization.read_vocab_bytes(vocab_file))
  target = os.path.join(output_dir, STUDENT_INIT_DIR)
  if layer_map is None or os.path.isdir(target):
    return
  tensors = student_tensors(checkpoint_lib.model_tensors(teacher_checkpoint), layer_map)
  with io_utils.work_dir(output_dir) as scratch:
    staged = os.path.join(scratch, STUDENT_INIT_DIR)
    checkpoint_lib.write_checkpoint(os.path.join(staged, STUDENT_INIT_PREFIX), tensors)
    os.rename(staged, target)
