"""The yardstick's checks before any training: checkpoints (config, vocab, weights, case) and
whether a checkpoint's vocab can read a task's text. Each failure is one-line ValueError naming the
checkpoint or task and the fix."""
import os

import tensorflow.compat.v1 as tf

from bert_fin import modeling
from bert_fin import tokenization
from bert_fin.finetune import finetuned
from bert_fin.finetune.classify import model as classifier
from bert_fin.modeling import checkpoint as checkpoint_lib
from bert_fin.tokenization import vocab as vocab_lib
from bert_fin.training.monitor import eval_results
from bert_fin.training.monitor import plateau
from bert_fin.yardstick import encoders
from bert_fin.yardstick import task_kinds

UNK_SAMPLE = 2000  # training texts tokenized for the [UNK] rate
MAX_EVAL_RESULTS_BYTES = 1 << 20  # an eval_results.txt is a few lines


def check_task(task):
  """The task's kind and format exist and every split reads; returns task_kinds.TaskData."""
  kind = task_kinds.get(task.kind)
  if task.data_format not in kind.formats:
    raise ValueError("--task %s: format %r is not one of %s (kind %s)" % (
        task.name, task.data_format, ", ".join(kind.formats), kind.name))
  if not os.path.isdir(task.data_dir):
    raise ValueError("--task %s: %s is not a directory" % (task.name, task.data_dir))
  try:
    return kind.check(task)
  except ValueError as e:
    raise ValueError("--task %s: %s" % (task.name, e)) from e


def check_checkpoint(checkpoint, settings):
  """Config, vocab, weights and case of one checkpoint fit together; ValueError otherwise.

  Returns one line: what the checkpoint gives the encoder (or that it is random init), and the
  padding note of a config whose vocab_size exceeds the vocab (accepted; a smaller one is not)."""
  where = "--checkpoint %s" % checkpoint.name
  try:
    config = modeling.BertConfig.from_json_file(checkpoint.bert_config_file)
    config.validate()
  except (OSError, ValueError) as e:
    raise ValueError("%s: config %s: %s" % (where, checkpoint.bert_config_file, e)) from e
  if settings.reinit_top_layers > config.num_hidden_layers:
    raise ValueError("%s: --reinit_top_layers=%d, but %s has num_hidden_layers=%d" % (
        where, settings.reinit_top_layers, checkpoint.bert_config_file, config.num_hidden_layers))
  if settings.max_seq_length > config.max_position_embeddings:
    raise ValueError("%s: --max_seq_length %d > max_position_embeddings %d of %s" % (
        where, settings.max_seq_length, config.max_position_embeddings,
        checkpoint.bert_config_file))
  if not os.path.isfile(checkpoint.vocab_file):
    raise ValueError("%s: vocab %s: no such file" % (where, checkpoint.vocab_file))
  try:
    padding = tokenization.check_vocab_size(checkpoint.vocab_file, config.vocab_size, "vocab")
  except ValueError as e:
    raise ValueError("%s: %s (config %s)" % (where, e, checkpoint.bert_config_file)) from e
  padding = "; " + padding if padding else ""
  if checkpoint.path is None:
    return "%s: random init (config %s, vocab %s)%s" % (
        checkpoint.name, checkpoint.bert_config_file, checkpoint.vocab_file, padding)
  resolved = checkpoint_lib.resolve_checkpoint(checkpoint.path)
  try:
    if resolved is None:
      raise ValueError("no checkpoint in the directory")
    tf.train.list_variables(resolved)
  except (tf.errors.OpError, ValueError) as e:
    raise ValueError("%s: cannot read checkpoint %s (%s)" % (
        where, checkpoint.path, str(e).splitlines()[0])) from e
  try:
    tokenization.validate_case_matches_checkpoint(checkpoint.do_lower_case, resolved)
    shapes = classifier.variable_shapes(config, 2, settings.max_seq_length, settings.pooling)
    encoder = {name: shape for name, shape in shapes.items()
               if name.startswith(classifier.ENCODER_SCOPE + "/")}
    report = finetuned.restore_report(resolved, encoder)
  except ValueError as e:
    raise ValueError("%s: %s" % (where, e)) from e
  if not report.mapped:
    raise ValueError("%s: %s holds none of the encoder's variables (bert/...): not a BERT "
                     "checkpoint with google's names" % (where, resolved))
  missing = report.missing_in_checkpoint
  return "%s: %s restores %d of %d encoder variables%s%s%s%s" % (
      checkpoint.name, resolved, len(report.mapped), len(encoder),
      "; starting from scratch: " + ", ".join(missing) if missing else "", padding,
      plateau_note(resolved), encoders.describe(resolved))


def plateau_note(resolved):
  """'; WARNING: ... unigram plateau ...' when the eval_results.txt beside the checkpoint (its
  pretraining's eval block) shows it has not left the unigram plateau (plateau.py), else ''."""
  path = os.path.join(os.path.dirname(resolved), eval_results.EVAL_RESULTS_FILE)
  if not os.path.isfile(path) or os.path.getsize(path) > MAX_EVAL_RESULTS_BYTES:
    return ""
  warning = plateau.plateau_line(eval_results.read_results_file(path),
                                 "the checkpoint (its %s)" % path)
  return "; " + warning if warning else ""


def check_vocab_fits(checkpoint, task, data, max_unk_rate):
  """Share of [UNK] pieces in (a sample of) the task's training texts under the checkpoint's
  vocab and case; ValueError above max_unk_rate."""
  tokenizer = tokenization.make_tokenizer(checkpoint.vocab_file,
                                          do_lower_case=checkpoint.do_lower_case)
  step = max(1, len(data.texts) // UNK_SAMPLE)
  unk, total = 0, 0
  for pieces in tokenizer.tokenize_batch(data.texts[::step]):
    total += len(pieces)
    unk += sum(1 for piece in pieces if piece == vocab_lib.UNK)
  rate = unk / total if total else 0.0
  if rate > max_unk_rate:
    raise ValueError("--checkpoint %s: its vocab %s turns %.1f%% of task %s's training tokens "
                     "into [UNK] (limit --max_unk_rate %.2f): it does not fit the task's text "
                     "(another language or script, or a vocab from other text)" % (
                         checkpoint.name, checkpoint.vocab_file, 100 * rate, task.name,
                         max_unk_rate))
  return rate
