"""Fine-tuned checkpoints as yardstick rows: a run_classifier, run_ner, run_squad or run_distill
--output_dir (a distilled student is one) holds a trained task head beside its encoder. The
yardstick judges encoders: every row's cells start their head from the initializer, so a
fine-tuned checkpoint's cells read a copy of its encoder alone (its bert/... tensors), written
into OUTPUT_DIR/encoders/NAME/CHECKPOINT/ (CHECKPOINT: the prefix's name, model.ckpt-225: a newer
checkpoint in the directory is another copy and other cells) before the first cell, once.

  judged, copies = encoders.encoder_rows(checkpoints, output_dir)  # in grid.prepare
  encoders.write_copies(copies)                                    # in grid.run
"""
import os

import tensorflow.compat.v1 as tf

from bert_fin import io_utils
from bert_fin.finetune import finetuned
from bert_fin.finetune.ner import model as ner_model
from bert_fin.finetune.squad import model as squad_model
from bert_fin.modeling import checkpoint as checkpoint_lib

ENCODERS_DIR, PREFIX = "encoders", "model.ckpt"
ENCODER_SCOPE = "bert/"
# google's task heads: run_classifier's (run_distill's too), run_ner's, run_squad's
TASK_HEADS = (finetuned.HEAD_WEIGHTS, finetuned.HEAD_BIAS, ner_model.HEAD_WEIGHTS,
              ner_model.HEAD_BIAS, squad_model.HEAD_WEIGHTS, squad_model.HEAD_BIAS)


def task_head(resolved):
  """The task-head variable names (TASK_HEADS) the checkpoint prefix `resolved` holds, sorted;
  [] for a pretrained checkpoint."""
  names = {name for name, _ in tf.train.list_variables(resolved)}
  return sorted(name for name in TASK_HEADS if name in names)


def encoder_copy(output_dir, name, resolved):
  """The prefix of the encoder copy of checkpoint `name` (prefix `resolved`) under output_dir."""
  return os.path.join(output_dir, ENCODERS_DIR, name, os.path.basename(resolved), PREFIX)


def encoder_rows(checkpoints, output_dir):
  """(checkpoints, copies): the grid.Checkpoint list with each fine-tuned one's path replaced
  by its encoder copy (encoder_copy), and {copy prefix: the checkpoint prefix it is made from}.
  Reads the checkpoints' variable names only; writes nothing."""
  judged, copies = [], {}
  for checkpoint in checkpoints:
    resolved = checkpoint_lib.resolve_checkpoint(checkpoint.path)
    if resolved and task_head(resolved):
      target = encoder_copy(output_dir, checkpoint.name, resolved)
      copies[target] = resolved
      checkpoint = checkpoint._replace(path=target)
    judged.append(checkpoint)
  return judged, copies


def describe(resolved):
  """'' for a pretrained checkpoint; else the note of the restore line: the head left out."""
  head = task_head(resolved)
  if not head:
    return ""
  return "; a fine-tuned model: its head (%s) is left out, every row's starts fresh" % (
      ", ".join(head))


def write_copies(copies):
  """Writes each copy ({copy prefix: source prefix}) not written yet: the source's bert/...
  tensors, staged in a scratch directory beside it and renamed in (a killed run leaves no half
  copy). Returns the prefixes written."""
  written = []
  for target, source in sorted(copies.items()):
    directory = os.path.dirname(target)
    if os.path.isdir(directory):
      continue
    tensors = {name: value for name, value in checkpoint_lib.model_tensors(source).items()
               if name.startswith(ENCODER_SCOPE)}
    parent = os.path.dirname(directory)
    with io_utils.work_dir(parent) as scratch:
      staged = os.path.join(scratch, os.path.basename(directory))
      checkpoint_lib.write_checkpoint(os.path.join(staged, PREFIX), tensors)
      os.rename(staged, directory)
    written.append(target)
  return written
