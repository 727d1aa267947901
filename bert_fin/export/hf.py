"""A bert_fin (or google-research/bert) checkpoint -> a folder transformers loads with from_pretrained.

  export(bert_config_file, init_checkpoint, vocab_file, output_dir, do_lower_case)

writes into output_dir:
  model.safetensors   float32 weights under transformers' names (interop/hf_names.py), written with the
                      safetensors numpy API (no PyTorch here); optimizer slots (adam_m/v ...),
                      global_step and loss-scale state are left out, and so are the tied
                      cls.predictions.decoder.{weight,bias} that transformers fills itself;
  config.json         model_type bert, architectures [BertForPreTraining] (checkpoint with the NSP
                      head, objective bert), [BertForMaskedLM] (objective roberta) or
                      [BertForSequenceClassification] (a run_classifier output: id2label /
                      label2id from the labels.txt beside the checkpoint; a --multi_label
                      one: problem_type multi_label_classification, and its multi_label.json
                      (labels, dev thresholds) written beside config.json),
                      [BertForTokenClassification] (a run_ner output: its tags),
                      [BertForQuestionAnswering] (a run_squad output), hidden_act
                      gelu_new (google's gelu is the tanh approximation; transformers' "gelu" is
                      the exact erf form, 1e-4-ish off; bert_fin's "gelu_erf" exports as
                      "gelu"), layer_norm_eps 1e-12 as google;
  the tokenizer files of hf_tokenizer.py.

Everything is checked before the first file is written; a problem raises ExportError (a
ValueError) whose message names the file and what to do: an --output_dir that cannot be written,
unreadable checkpoint/config/vocab, more vocab lines than vocab_size (fewer is a padded
vocab_size: exported, with a warning), a variable of the wrong shape, a missing one, or one
transformers' model has no place for. BertForMaskedLM has no pooler: bert/pooler/* is left out (and
reported), and so does BertForTokenClassification (a run_ner model: encoder and tagger head, id2label
from its labels.txt, as many tags as the head's rows), and BertForQuestionAnswering (a run_squad
model: encoder and span head, qa_outputs). A run_classifier model exports only when transformers computes what run_classifier
computed: it needs its labels.txt (as many labels as the head's rows) and google's [CLS] pooling
(classifier_config.json pooling "first"; mean / max pooling has no transformers equivalent).
"""
import collections
import errno
import json
import logging
import os
import re

import numpy as np
import safetensors
from safetensors import numpy as safetensors_numpy
import tensorflow.compat.v1 as tf

from bert_fin import io_utils
from bert_fin import modeling
from bert_fin import tokenization
from bert_fin.interop import hf_names
from bert_fin.export import hf_tokenizer
from bert_fin.finetune import finetuned
from bert_fin.finetune import label_lists
from bert_fin.finetune.classify import multi_label
from bert_fin.modeling import checkpoint as checkpoint_lib
from bert_fin.modeling import layers
from bert_fin.text import raw_documents as text_documents

_LOG = logging.getLogger(__name__)
WEIGHTS_FILE = "model.safetensors"
CONFIG_FILE = "config.json"
MULTI_LABEL_PROBLEM = "multi_label_classification"  # transformers' problem_type
# google's config strings -> transformers' ACT2FN names computing the same function.
HIDDEN_ACT = {"gelu": "gelu_new", "gelu_erf": "gelu", "relu": "relu", "tanh": "tanh",
              "linear": "linear"}

Export = collections.namedtuple("Export", [
    "architecture", "output_dir", "checkpoint", "global_step", "tensors", "parameters",
    "left_out", "files", "labels"])
Export.__doc__ = """Result of export(): architecture name, output_dir, the checkpoint read, its
global_step (None if absent), tensors written (dict name -> np.ndarray), their total size,
left_out (google names not exported: pooler of a MaskedLM), files (written paths), labels (a
classifier's label list, else None)."""


class ExportError(ValueError):
  """A user error: the message says which input is wrong and how to fix it."""


def resolve_checkpoint(init_checkpoint):
  """A checkpoint prefix, or the latest checkpoint of a directory. Raises ExportError."""
  path = checkpoint_lib.resolve_checkpoint(init_checkpoint)
  if not path and os.path.isdir(init_checkpoint):
    raise ExportError("--init_checkpoint %s: directory holds no checkpoint" % init_checkpoint)
  try:
    tf.train.list_variables(path)
  except (tf.errors.OpError, ValueError) as e:
    raise ExportError("--init_checkpoint %s: cannot read checkpoint (%s); pass a prefix such as "
                      "out/model.ckpt-1000" % (init_checkpoint, str(e).splitlines()[0]))
  return path


def read_config(bert_config_file):
  """BertConfig from google's JSON, validated. Raises ExportError."""
  try:
    config = modeling.BertConfig.from_json_file(bert_config_file)
    config.validate()
  except (OSError, ValueError) as e:
    raise ExportError("--bert_config_file %s: %s" % (bert_config_file, e))
  if config.hidden_act not in HIDDEN_ACT:
    raise ExportError("--bert_config_file %s: hidden_act %r has no transformers equivalent "
                      "(supported: %s)" % (bert_config_file, config.hidden_act, sorted(HIDDEN_ACT)))
  return config


def check_vocab(vocab_file, config, do_lower_case):
  """Raises ExportError unless vocab_file is UTF-8 text with the special tokens (a tokenizer can be
  built from it) and at most config.vocab_size lines. Fewer lines is a valid model (vocab_size
  padded, e.g. to a multiple of 8 for tensor cores as NVIDIA does: the rows past the vocab are
  never looked up): returns a warning saying so, else None."""
  if not os.path.isfile(vocab_file):
    raise ExportError("--vocab_file %s: no such file" % vocab_file)
  try:
    problem = text_documents.not_utf8_text(vocab_file)
    if not problem:
      hf_tokenizer.build_tokenizer(tokenization.load_vocab(vocab_file), do_lower_case)
  except OSError as e:
    raise ExportError("--vocab_file %s" % io_utils.os_error_message(e))
  except ValueError as e:
    raise ExportError("--vocab_file %s: %s" % (vocab_file, e))
  if problem:
    raise ExportError("--vocab_file %s is %s" % (vocab_file, problem))
  try:
    padding = tokenization.check_vocab_size(vocab_file, config.vocab_size)
  except ValueError as e:
    raise ExportError(str(e)) from e
  if padding:
    return "%s; exported as it is (config.json vocab_size %d)" % (padding, config.vocab_size)
  return None


model_tensors = checkpoint_lib.model_tensors  # {google name: array}, training state left out


def convert(tensors, config, architecture, num_labels=None):
  """google-named arrays -> ({transformers name: float32 C-contiguous array}, left_out names).

  num_labels: the classifier's labels (BertForSequenceClassification). Raises ExportError listing
  every variable that does not fit `architecture` and `config`.
  """
  shapes = hf_names.expected_shapes(config, architecture, num_labels)
  converted, left_out, unknown, mismatched = {}, [], [], []
  for name, value in sorted(tensors.items()):
    target, transpose = hf_names.hf_name(name)
    if target not in shapes or target in hf_names.TIED_NAMES:
      (left_out if name.startswith("bert/pooler/") else unknown).append(name)
      continue
    value = np.ascontiguousarray(value.T if transpose else value, dtype=np.float32)
    if list(value.shape) != shapes[target]:
      mismatched.append("%s: %s, config needs %s" % (name, list(value.shape), shapes[target]))
    converted[target] = value
  if architecture == hf_names.PRETRAINING:
    unknown += left_out
    left_out = []
  missing = sorted(set(shapes) - set(converted) - hf_names.TIED_NAMES)
  problems = []
  if unknown:
    problems.append("%d variable(s) %s has no place for: %s" % (
        len(unknown), architecture, ", ".join(unknown)))
  if mismatched:
    problems.append("shape mismatch: " + "; ".join(mismatched))
  if missing:
    problems.append("%d weight(s) missing from the checkpoint: %s" % (
        len(missing), ", ".join(missing)))
  if problems:
    raise ExportError(" | ".join(problems))
  return converted, left_out


def classifier_labels(checkpoint, tensors, architecture=hf_names.SEQUENCE_CLASSIFICATION):
  """The label list of a run_classifier checkpoint (labels.txt beside it), checked against the
  head and the pooling; of a run_ner checkpoint (architecture BertForTokenClassification: its tag
  list), checked against the tagger head. Raises ExportError."""
  token = architecture == hf_names.TOKEN_CLASSIFICATION
  weights, bias = ((hf_names.TAGGER_WEIGHTS, hf_names.TAGGER_BIAS) if token else
                   (hf_names.CLASSIFIER_WEIGHTS, hf_names.CLASSIFIER_BIAS))
  program = "run_ner" if token else "run_classifier"
  if weights not in tensors or bias not in tensors:
    raise ExportError("%s has no %s head (%s, %s): not a %s output" % (
        checkpoint, "tagger" if token else "classifier", weights, bias, program))
  directory = os.path.dirname(checkpoint)
  labels = finetuned.read_labels(directory)
  rows = tensors[weights].shape[0]
  if labels is None:
    raise ExportError("%s has a %s head (%d labels) but no %s beside it: write the label "
                      "names there, one a line, in the head's order (%s's "
                      "labels.txt)" % (checkpoint, "tagger" if token else "classifier", rows,
                                       label_lists.LABELS_FILE, program))
  if len(labels) != rows:
    raise ExportError("%s: %s lists %d labels, the %s head has %d rows" % (
        checkpoint, os.path.join(directory, label_lists.LABELS_FILE), len(labels),
        "tagger" if token else "classifier", rows))
  if token:
    if hf_names.TAGGER_TRANSITIONS in tensors:
      raise ExportError("%s was fine-tuned with --use_crf: %s decodes each token by argmax, "
                        "run_ner by Viterbi over %s, so its tags would differ; fine-tune without "
                        "--use_crf to export" % (checkpoint, hf_names.TOKEN_CLASSIFICATION,
                                                 hf_names.TAGGER_TRANSITIONS))
    return labels
  try:
    pooling = finetuned.read_pooling(directory) or finetuned.DEFAULT_POOLING
  except ValueError as e:
    raise ExportError(str(e))
  if pooling != finetuned.DEFAULT_POOLING:
    raise ExportError("%s was fine-tuned with --pooling=%s: %s reads the pooled [CLS] only, so "
                      "its logits would differ; fine-tune with --pooling=first to export" % (
                          checkpoint, pooling, hf_names.SEQUENCE_CLASSIFICATION))
  return labels


def hf_config(config, architecture, labels=None, problem_type=None):
  """The dict of config.json for a BertConfig (labels: a classifier's, in the head's order;
  problem_type: transformers' problem_type of a classifier, e.g. MULTI_LABEL_PROBLEM)."""
  extra = {}
  if labels:
    extra = {"id2label": {str(i): label for i, label in enumerate(labels)},
             "label2id": {label: i for i, label in enumerate(labels)}}
  if problem_type:
    extra["problem_type"] = problem_type
  return dict(extra, **{
      "architectures": [architecture],
      "model_type": "bert",
      "vocab_size": config.vocab_size,
      "hidden_size": config.hidden_size,
      "num_hidden_layers": config.num_hidden_layers,
      "num_attention_heads": config.num_attention_heads,
      "intermediate_size": config.intermediate_size,
      "hidden_act": HIDDEN_ACT[config.hidden_act],
      "hidden_dropout_prob": config.hidden_dropout_prob,
      "attention_probs_dropout_prob": config.attention_probs_dropout_prob,
      "max_position_embeddings": config.max_position_embeddings,
      "type_vocab_size": config.type_vocab_size,
      "initializer_range": config.initializer_range,
      "layer_norm_eps": layers.LAYER_NORM_EPSILON,
      "pad_token_id": 0,
      "position_embedding_type": "absolute",
      "torch_dtype": "float32",
  })


def export(bert_config_file, init_checkpoint, vocab_file, output_dir, do_lower_case=True,
           architecture=None):
  """Writes the transformers folder; returns Export. Raises ExportError before writing anything.

  architecture: None (from the checkpoint: NSP head -> BertForPreTraining, else BertForMaskedLM)
  or one of hf_names.ARCHITECTURES.
  """
  try:
    io_utils.check_output_dir(output_dir, "--output_dir")
  except ValueError as e:
    raise ExportError(str(e))
  config = read_config(bert_config_file)
  padding = check_vocab(vocab_file, config, do_lower_case)
  if padding:
    _LOG.warning(padding)
  checkpoint = resolve_checkpoint(init_checkpoint)
  tensors = model_tensors(checkpoint)
  architecture = architecture or hf_names.architecture_for(tensors)
  labels = None
  if architecture in (hf_names.SEQUENCE_CLASSIFICATION, hf_names.TOKEN_CLASSIFICATION):
    labels = classifier_labels(checkpoint, tensors, architecture)
  thresholds = None  # a multi-label classifier's (run_classifier --multi_label)
  if architecture == hf_names.SEQUENCE_CLASSIFICATION:
    thresholds = multi_label.read_thresholds(os.path.dirname(checkpoint))
  converted, left_out = convert(tensors, config, architecture, len(labels) if labels else None)
  reader = tf.train.load_checkpoint(checkpoint)
  global_step = (int(reader.get_tensor(tf.GraphKeys.GLOBAL_STEP))
                 if reader.has_tensor(tf.GraphKeys.GLOBAL_STEP) else None)

  os.makedirs(output_dir, exist_ok=True)
  weights_path = os.path.join(output_dir, WEIGHTS_FILE)
  metadata = {"format": "pt", "bert_fin_checkpoint": os.path.abspath(checkpoint),
              "global_step": str(global_step)}
  with io_utils.atomic_path(weights_path) as tmp:
    try:
      safetensors_numpy.save_file(converted, tmp, metadata=metadata)
    except safetensors.SafetensorError as e:  # its I/O errors (a full disk) are no OSError
      number = re.search(r"os error (\d+)", str(e))
      raise OSError(int(number.group(1)) if number else errno.EIO, str(e), weights_path) from e
    os.chmod(tmp, 0o644)  # safetensors creates the file owner-only
  config_path = os.path.join(output_dir, CONFIG_FILE)
  with io_utils.atomic_output(config_path) as f:
    f.write(json.dumps(hf_config(config, architecture, labels,
                                 MULTI_LABEL_PROBLEM if thresholds else None),
                       indent=2, sort_keys=True, ensure_ascii=False) + "\n")
  files = [weights_path, config_path]
  if thresholds:  # its labels and dev thresholds beside the model (multi_label.json)
    files.append(multi_label.write_thresholds(output_dir, thresholds))
  files += hf_tokenizer.write_tokenizer_files(
      vocab_file, output_dir, do_lower_case, config.max_position_embeddings)
  return Export(architecture, output_dir, checkpoint, global_step, converted,
                sum(value.size for value in converted.values()), left_out, files, labels)
