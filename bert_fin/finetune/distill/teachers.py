"""The teachers: --teacher_dir, and the ensemble of --ensemble_dirs beside it, whose soft targets
are averaged, as Hinton et al. (2015) distil an ensemble into one model.

  checkpoint_and_kind   a fine-tuned teacher directory's checkpoint and head kind (a classifier
              or a run_ner tagger); ValueError (one line) naming the flag and directory;
  members     the checked checkpoints of --ensemble_dirs: each a fine-tuned directory of the
              teacher's kind (a classifier or a run_ner tagger) with the teacher's labels, the
              same model variables and shapes as the teacher's checkpoint (the same
              --bert_config_file reads them all); ValueError (one line) naming the directory;
  mean_at_temperature   the logits whose soft targets at T are the mean of the teachers':
              T x log(mean_k softmax(z_k / T)) (a multi-label classifier's, one sigmoid a label:
              T x logit(mean_k sigmoid(z_k / T))), so that losses.py reads an ensemble's stored
              logits as it reads one teacher's.

Only the soft targets come from the ensemble: the student's first layers (--student_layers), its
head, a tagger's CRF transitions and the matching losses (--hidden_weight, --attention_weight)
are --teacher_dir's.
"""
import os

import numpy as np

from bert_fin.finetune import finetuned
from bert_fin.finetune.ner import model as ner_model
from bert_fin.modeling import checkpoint as checkpoint_lib


def checkpoint_and_kind(directory, flag="--teacher_dir"):
  """(checkpoint prefix, head kind: finetuned.CLASSIFIER or TAGGER) of a fine-tuned teacher
  directory (flag: the flag that named it, for the messages); ValueError (one line) for a
  missing directory, no checkpoint or no trained head."""
  if not os.path.isdir(directory or ""):
    raise ValueError("%s %s: no such directory" % (flag, directory))
  checkpoint = checkpoint_lib.resolve_checkpoint(directory, run_dir=True)
  if checkpoint is None:
    raise ValueError("%s %s holds no checkpoint: fine-tune the teacher with run_classifier.py "
                     "or run_ner.py --do_train first" % (flag, directory))
  kind = finetuned.head_kind(checkpoint)
  if kind is None:
    raise ValueError("%s %s: %s has no trained classifier head (%s, %s) nor tagger head (%s, "
                     "%s): pass a run_classifier or run_ner --output_dir" % (
                         flag, directory, checkpoint, finetuned.HEAD_WEIGHTS,
                         finetuned.HEAD_BIAS, ner_model.HEAD_WEIGHTS, ner_model.HEAD_BIAS))
  return checkpoint, kind


def _model_shapes(checkpoint):
  """{variable name: shape} of a checkpoint's model weights (training state left out)."""
  return {name: shape for name, shape in checkpoint_lib.checkpoint_shapes(checkpoint).items()
          if not checkpoint_lib.is_training_state(name)}


def members(ensemble_dirs, teacher_dir, teacher_checkpoint, kind, labels):
  """[checkpoint prefix] of each of ensemble_dirs, in order ([] for none).

  Args:
    ensemble_dirs: [str] or None (--ensemble_dirs).
    teacher_dir, teacher_checkpoint: --teacher_dir and its checkpoint (the shapes to match).
    kind: finetuned.head_kind of the teacher (CLASSIFIER or TAGGER).
    labels: [str], the teacher's labels.txt.

  Raises:
    ValueError (one line, naming the directory): --teacher_dir itself or named twice, missing,
    no checkpoint or head (checkpoint_and_kind), another head kind, other labels, other
    variables or shapes.
  """
  seen, checkpoints = {os.path.abspath(teacher_dir)}, []
  wanted = _model_shapes(teacher_checkpoint) if ensemble_dirs else None
  for directory in ensemble_dirs or ():
    if os.path.abspath(directory) in seen:
      raise ValueError("--ensemble_dirs: %s is named twice (or is --teacher_dir): each teacher "
                       "once" % directory)
    seen.add(os.path.abspath(directory))
    checkpoint, its_kind = checkpoint_and_kind(directory, "--ensemble_dirs")
    if its_kind != kind:
      raise ValueError("--ensemble_dirs: %s is not a %s like --teacher_dir %s: an ensemble's "
                       "teachers share the head" % (directory, "run_ner tagger" if kind ==
                                                    finetuned.TAGGER else "classifier",
                                                    teacher_dir))
    its_labels = finetuned.read_labels(directory)
    if its_labels != list(labels):
      raise ValueError("--ensemble_dirs: %s/labels.txt is %s, --teacher_dir's is %s: an "
                       "ensemble's teachers share the labels, in order" % (
                           directory, ",".join(its_labels or ["none"]), ",".join(labels)))
    shapes = _model_shapes(checkpoint)
    if shapes != wanted:
      differ = sorted(set(wanted) ^ set(shapes)) or sorted(
          name for name in wanted if wanted[name] != shapes[name])
      raise ValueError("--ensemble_dirs: %s's model differs from --teacher_dir's (%s, ...): the "
                       "teachers are read with one --bert_config_file; fine-tune them with the "
                       "same config" % (checkpoint, differ[0]))
    checkpoints.append(checkpoint)
  return checkpoints


def _log_mean_exp(values):
  """float64 [...]: log(mean over axis 0 of exp(values)), computed stably."""
  top = np.max(values, axis=0)
  return top + np.log(np.mean(np.exp(values - top), axis=0))


def _log_softmax(values):
  shifted = values - np.max(values, axis=-1, keepdims=True)
  return shifted - np.log(np.sum(np.exp(shifted), axis=-1, keepdims=True))


def _log_sigmoid(values):
  return -np.logaddexp(0.0, -values)


def mean_at_temperature(logits, temperature, multi_label=False):
  """float32 [...]: one array of logits whose soft targets at `temperature` are the mean of the
  teachers'.

  Args:
    logits: [float32 [n, L]] (a tagger's emission scores [n, S, L]), one a teacher, the same
      shape; a single array is returned unchanged.
    temperature: T > 0, run_distill's --temperature.
    multi_label: one sigmoid a label (softmax over the last axis otherwise).

  Returns:
    T x log(mean_k softmax(z_k / T)), whose softmax at T is the mean of the teachers'
    probabilities at T; multi_label: T x (log p - log(1 - p)) with p = mean_k sigmoid(z_k / T).
  """
  if len(logits) == 1:
    return logits[0]
  scaled = np.stack(logits).astype(np.float64) / temperature  # [K, ...]
  if multi_label:
    ensemble = (_log_mean_exp(_log_sigmoid(scaled)) - _log_mean_exp(_log_sigmoid(-scaled)))
  else:
    ensemble = _log_mean_exp(_log_softmax(scaled))
  return (temperature * ensemble).astype(np.float32)
