"""What a run_classifier output directory holds besides checkpoints, and which weights a run reads.

A training run writes, beside its checkpoints (atomically):
  labels.txt              the label list, one a line, in the order of the classifier's rows and of
                          test_results.tsv's columns;
  classifier_config.json  {"pooling": "first" | "mean" | "max"}: how the text vector was made,
                          and how long texts were read ("long_text", "head_tokens",
                          "doc_stride", "chunk_pooling": run_classifier's --long_text flags),
                          and "max_seq_length", "do_lower_case" (the flags the texts were
                          tokenized with: the serving export reads them);
  optimizer.json          {"optimizer": --optimizer's name} (every fine-tuning program): the
                          optimizer whose slots the checkpoints hold; resuming with another is
                          refused, a name and its other spelling being the same optimizer
                          (optimization/names.py; a directory without the file was trained by
                          adamweightdecay, the only one then, today's adam).
A run without --do_train reads the fine-tuned model from --output_dir's latest checkpoint, else from
--init_checkpoint (google's run_classifier allows both); that model must have a classifier head
(`output_weights` [num_labels, H], `output_bias` [num_labels]) for the run's labels, and its saved
label list and pooling must be the run's. Anything else is a one-line ValueError: predictions from
a random head, or with the columns of another label order, would look like results.
"""
import json
import os

import tensorflow.compat.v1 as tf

from bert_fin import io_utils
from bert_fin.finetune import label_lists
from bert_fin.interop import hf_names
from bert_fin.modeling import checkpoint as checkpoint_lib
from bert_fin.optimization import names as optimizer_names
from bert_fin.optimization import recorded

CONFIG_FILE = "classifier_config.json"
OPTIMIZER_FILE = recorded.OPTIMIZER_FILE
OPTIMIZER_BEFORE_THE_FILE = optimizer_names.ADAMWEIGHTDECAY
HEAD_WEIGHTS, HEAD_BIAS = "output_weights", "output_bias"  # google's classifier variables
DEFAULT_POOLING = "first"  # a model without CONFIG_FILE (google's run_classifier) pooled [CLS]
LONG_TEXT_KEYS = ("long_text", "head_tokens", "doc_stride", "chunk_pooling")
HEAD_KEYS = ("multi_label", "entity_markers")  # the head's kind, saved in CONFIG_FILE
CLASSIFIER, TAGGER = "classifier", "tagger"  # head_kind: run_classifier's, run_ner's
TEXT_KEYS = ("max_seq_length", "do_lower_case")  # the tokenizing flags, saved in CONFIG_FILE


def read_labels(directory):
  """The label list saved in directory/labels.txt, or None."""
  path = os.path.join(directory, label_lists.LABELS_FILE)
  if not os.path.isfile(path):
    return None
  with open(path, encoding="utf-8") as f:
    return [line.rstrip("\r\n") for line in f if line.strip()]


def read_pooling(directory):
  """The pooling saved in directory/classifier_config.json, or None."""
  path = os.path.join(directory, CONFIG_FILE)
  return io_utils.read_saved(path, lambda text: json.loads(text)["pooling"], lambda e: ValueError(
      "%s: not a run_classifier config (%s); delete it or retrain" % (path, e)))


def _read_config(directory):
  """directory/classifier_config.json parsed (None without the file); ValueError (one line)
  for a file that is not JSON."""
  path = os.path.join(directory, CONFIG_FILE)
  return io_utils.read_saved(path, json.loads, lambda e: ValueError(
      "%s: not a run_classifier config (%s); delete it or retrain" % (path, e)))


def read_long_text(directory):
  """The long-text options ({"long_text", "head_tokens", "doc_stride", "chunk_pooling"}) saved in
  directory/classifier_config.json, or None (no file, or one written before --long_text: its
  model read the head of long texts)."""
  saved = _read_config(directory)
  if not isinstance(saved, dict) or "long_text" not in saved:
    return None
  return {key: saved.get(key) for key in LONG_TEXT_KEYS}


def read_head(directory):
  """{key: value} of the head's kind saved in directory/classifier_config.json (HEAD_KEYS:
  --multi_label, --entity_markers), only the keys it holds: {} without the file or for a model
  saved before they were recorded (a single-label head without entity markers)."""
  return _saved_keys(directory, HEAD_KEYS)


def read_text_settings(directory):
  """{key: value} of TEXT_KEYS (--max_seq_length, --do_lower_case) saved in
  directory/classifier_config.json, only the keys it holds: {} without the file or for a model
  saved before they were recorded."""
  return _saved_keys(directory, TEXT_KEYS)


def _saved_keys(directory, keys):
  saved = _read_config(directory)
  if not isinstance(saved, dict):
    return {}
  return {key: saved[key] for key in keys if key in saved}


def write_labels(output_dir, labels):
  """labels.txt beside the checkpoints, one label a line (atomic write); run_ner's tag list."""
  with io_utils.atomic_output(os.path.join(output_dir, label_lists.LABELS_FILE)) as f:
    f.write("".join(label + "\n" for label in labels))


def write_run_files(output_dir, labels, pooling, long_text=None):
  """labels.txt and classifier_config.json beside the checkpoints (atomic writes); long_text:
  {LONG_TEXT_KEYS: value} saved beside the pooling (None: not saved)."""
  write_labels(output_dir, labels)
  config = {"pooling": pooling}
  config.update(long_text or {})
  with io_utils.atomic_output(os.path.join(output_dir, CONFIG_FILE)) as f:
    f.write(json.dumps(config, indent=2) + "\n")


write_optimizer = recorded.write_optimizer  # optimizer.json, every training program's


def check_optimizer(output_dir, optimizer):
  """ValueError (one line) when output_dir holds a checkpoint that another --optimizer trained
  (recorded.check_optimizer; a checkpoint without optimizer.json: OPTIMIZER_BEFORE_THE_FILE)."""
  recorded.check_optimizer(output_dir, optimizer, "--optimizer", OPTIMIZER_BEFORE_THE_FILE)


def head_size(checkpoint, head=(HEAD_WEIGHTS, HEAD_BIAS)):
  """Number of labels of a checkpoint's classifier head (head: its weights [L, H] and bias
  names; run_ner's tagger passes its own), or None when it has none."""
  shapes = dict(tf.train.list_variables(checkpoint))
  if head[0] not in shapes or head[1] not in shapes:
    return None
  return shapes[head[0]][0]


def head_kind(checkpoint):
  """CLASSIFIER (run_classifier's head), TAGGER (run_ner's) or None (no fine-tuned head) of a
  checkpoint, by its variable names: the rule the transformers export picks the architecture by
  (hf_names.architecture_for)."""
  architecture = hf_names.architecture_for({name for name, _ in
                                            tf.train.list_variables(checkpoint)})
  return {hf_names.SEQUENCE_CLASSIFICATION: CLASSIFIER,
          hf_names.TOKEN_CLASSIFICATION: TAGGER}.get(architecture)


def model_to_read(output_dir, init_checkpoint, head=(HEAD_WEIGHTS, HEAD_BIAS), what="classifier"):
  """(checkpoint prefix, its directory) a run without --do_train evaluates / predicts with:
  output_dir's latest checkpoint, else --init_checkpoint. Raises ValueError when neither exists
  or the checkpoint has no `what` head (head: its variable names, as head_size)."""
  checkpoint = checkpoint_lib.resolve_checkpoint(output_dir, run_dir=True)
  if checkpoint is None:
    checkpoint = checkpoint_lib.resolve_checkpoint(init_checkpoint)
  if checkpoint is None:
    raise ValueError("--do_eval/--do_predict without --do_train need a fine-tuned model: "
                     "--output_dir %s holds no checkpoint and no --init_checkpoint is given "
                     "(train with --do_train first)" % output_dir)
  if head_size(checkpoint, head) is None:
    raise ValueError("--do_eval/--do_predict without --do_train: %s has no %s head (%s, %s): "
                     "it is a pretraining checkpoint (or another program's), and its predictions "
                     "would come from a random head; fine-tune it with --do_train first" % (
                         checkpoint, what, head[0], head[1]))
  return checkpoint, os.path.dirname(checkpoint)


def saved_model(settings, head=(HEAD_WEIGHTS, HEAD_BIAS), what="classifier"):
  """(fine-tuned checkpoint an eval/predict-only run reads or None, the directory of its saved
  files (labels.txt, classifier_config.json), where: the checkpoint or --output_dir, for
  messages). A training run reads none: (None, --output_dir, ...). head, what: as
  model_to_read."""
  if settings.mode.do_train:
    checkpoint, directory = None, settings.output.output_dir
  else:
    checkpoint, directory = model_to_read(settings.output.output_dir,
                                          settings.model.init_checkpoint, head, what)
  return checkpoint, directory, checkpoint or "--output_dir %s" % settings.output.output_dir


def check_model(checkpoint, labels, pooling):
  """Raises ValueError unless the fine-tuned `checkpoint` has a head for `labels` and was trained
  with `pooling` (its saved label list is checked by label_lists.choose_labels)."""
  rows = head_size(checkpoint)
  if rows != len(labels):
    raise ValueError("%s has a classifier head for %d labels, this run has %d (%s): pass the "
                     "model's labels with --labels" % (checkpoint, rows, len(labels),
                                                        ",".join(labels)))
  trained = read_pooling(os.path.dirname(checkpoint)) or DEFAULT_POOLING
  if pooling != trained:
    raise ValueError("%s was trained with --pooling=%s, this run asks for --pooling=%s: pass "
                     "--pooling=%s" % (checkpoint, trained, pooling, trained))


def restore_report(init_checkpoint, shapes):
  """What --init_checkpoint gives the model: checkpoint_lib.CheckpointReport by name.

  shapes: {graph variable name: shape list} of the classifier's trainable variables. Raises
  ValueError listing the variables whose shapes differ.
  """
  ckpt_shapes = dict(tf.train.list_variables(init_checkpoint))
  mismatched = ["%s (model %s, checkpoint %s)" % (name, shape, ckpt_shapes[name])
                for name, shape in sorted(shapes.items())
                if name in ckpt_shapes and list(ckpt_shapes[name]) != list(shape)]
  if mismatched:
    raise ValueError("--init_checkpoint %s does not fit --bert_config_file and the labels: %d "
                     "variable(s) of another shape: %s" % (
                         init_checkpoint, len(mismatched), "; ".join(mismatched[:4])))
  return checkpoint_lib.CheckpointReport(
      checkpoint=init_checkpoint,
      mapped=sorted(name for name in shapes if name in ckpt_shapes),
      missing_in_checkpoint=sorted(name for name in shapes if name not in ckpt_shapes),
      unused_in_checkpoint=sorted(name for name in ckpt_shapes if name not in shapes
                                  and not checkpoint_lib.is_training_state(name)))


def describe_restore(report):
  """One line: how many variables --init_checkpoint restores and which start from scratch."""
  unused = report.unused_in_checkpoint
  groups = sorted({name.split("/")[0] + "/..." if "/" in name else name for name in unused})
  return ("--init_checkpoint %s: restores %d of %d variables; newly initialised: %s; in the "
          "checkpoint but unused: %s" % (
              report.checkpoint, len(report.mapped),
              len(report.mapped) + len(report.missing_in_checkpoint),
              ", ".join(report.missing_in_checkpoint) or "none",
              ", ".join(groups) or "none"))
