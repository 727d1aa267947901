"""A run_classifier output directory -> a serving export: SavedModel, ONNX, deployment files.

Request.kind picks what is served: classifier (here and classifier.py), features (a pretrained
checkpoint as extract_features: features.py), squad (question + context -> the answer, and
run_squad's span logits of window ids: question_answering.py); `_kind_parts` is the one place
the files depend on it.

A directory holding multi_label.json (run_classifier --multi_label) exports a multi-label model:
its thresholds are in the graph (classifier.py) and in serving_config.json (for onnx_client.py).
A run_ner output directory has its own check and module (ner.py) and the same files, written by
`write_files` / `build_atomically` here from its `Files`.

Program shape as the fine-tuning programs: `check(request)` reads and checks every input and
raises ExportError (one line: the flag, the file, what to do) before anything is written;
`export(request)` then builds the whole export in a scratch directory beside --export_dir and
renames it into place, so the export appears whole or not at all. The export directory holds:

  saved_model/1/          the SavedModel (TF2 format; TF Serving's --model_base_path is
                          saved_model/): signatures serving_default (raw text, in-graph
                          tokenizer) and ids (input_ids, input_mask, segment_ids int32 [B, S]);
                          assets/ vocab.txt, labels.txt, bert_config.json, serving_config.json;
                          assets.extra/tf_serving_warmup_requests
  model.onnx              the ids graph's logits and probabilities (tf2onnx, its layer norms,
                          GELUs and attentions fused by onnx_graph.py), for onnxruntime
  tokenizer/              the transformers tokenizer files (tokenizer.json: `tokenizers` alone)
  onnx_client.py          a Python client needing numpy, onnxruntime and tokenizers only
  token_windows.py        its rules of which tokens a row reads (bert_fin's own, numpy only)
  labels.txt, bert_config.json, serving_config.json (what was exported, how texts are read)
  batching_parameters.txt TF Serving's --batching_parameters_file
  triton/bert_fin_text/config.pbtxt, triton/bert_fin_onnx/config.pbtxt  Triton, dynamic batching
"""
import collections
import json
import os
import shutil

import numpy as np
import tensorflow as tf

from bert_fin import flag_table
from bert_fin import io_utils
from bert_fin import tokenization
from bert_fin.export import hf
from bert_fin.export import hf_tokenizer
from bert_fin.finetune import finetuned
from bert_fin.finetune import label_lists
from bert_fin.finetune import token_windows
from bert_fin.finetune.classify import long_text
from bert_fin.finetune.classify import model as classifier_model
from bert_fin.finetune.classify import multi_label
from bert_fin.modeling import checkpoint as checkpoint_lib
from bert_fin.serving import classifier
from bert_fin.serving import deploy_files
from bert_fin.serving import features
from bert_fin.serving import graph_tokenizer
from bert_fin.serving import onnx_client
from bert_fin.serving import onnx_graph
from bert_fin.serving import question_answering
from bert_fin.serving import restored_model

SAVED_MODEL_DIR = os.path.join("saved_model", "1")
ONNX_FILE, CONFIG_FILE = "model.onnx", "serving_config.json"
BATCHING_FILE, BERT_CONFIG_FILE = "batching_parameters.txt", "bert_config.json"
TOKENIZER_DIR = "tokenizer"
WARMUP_FILE = os.path.join("assets.extra", "tf_serving_warmup_requests")
TEXT_SIGNATURE, IDS_SIGNATURE = "serving_default", "ids"
MODEL_NAME = "bert_fin"
CLASSIFIER = "classifier"
KINDS = (CLASSIFIER, features.KIND, question_answering.KIND)
ONNX_OPSET = onnx_graph.MIN_OPSET

Request = collections.namedtuple("Request", [
    "finetuned_dir", "bert_config_file", "vocab_file", "do_lower_case", "max_seq_length",
    "export_dir", "text_pairs", "onnx", "kind", "layers", "qa"])
Request.__new__.__defaults__ = (CLASSIFIER, "-1", None)
Request.__doc__ = """What to export: finetuned_dir (a run_classifier or run_ner --output_dir; kind
features: the pretrained checkpoint, a prefix or a directory), the model's bert_config_file and
vocab_file, do_lower_case, max_seq_length (the fine-tuning's: S; None: as finetuned_dir's
classifier_config.json records them, or for features / squad the program's default), export_dir
(missing or empty), text_pairs (the text signature takes text_b too), onnx (write model.onnx), kind
(KINDS; a run_ner directory is kind classifier's command, exported by ner.py), layers (kind
features: extract_features' --layers), qa (kind squad: question_answering.Options, None: run_squad's
defaults)."""

Plan = collections.namedtuple("Plan", ["request", "checkpoint", "spec", "vocab"])


class ExportError(ValueError):
  """A user error, one line: which input is wrong and what to do."""


def serving_labels(directory):
  """The label list a fine-tuned classifier serves (labels.txt beside its checkpoints).

  Raises:
    ExportError: no labels.txt.
  """
  labels = finetuned.read_labels(directory)
  if not labels:
    raise ExportError("--finetuned_dir %s has no %s: not a run_classifier output directory (or "
                      "one written before labels were saved); fine-tune with run_classifier" % (
                          directory, label_lists.LABELS_FILE))
  return labels


def serving_thresholds(directory, labels):
  """A multi-label model's float [L] thresholds (multi_label.json, read by
  multi_label.read_thresholds), or None for a single-label model (no such file).

  Raises:
    ExportError: the file is not a record, or its labels are not labels.txt's (in order).
  """
  try:
    record = multi_label.read_thresholds(directory)
  except ValueError as e:
    raise ExportError(str(e)) from None
  if record is None:
    return None
  if list(record.labels) != list(labels):
    raise ExportError("%s lists the labels %s, %s lists %s: files of two fine-tunings; restore "
                      "this fine-tuning's files" % (
                          os.path.join(directory, multi_label.THRESHOLDS_FILE),
                          ",".join(record.labels),
                          os.path.join(directory, label_lists.LABELS_FILE), ",".join(labels)))
  return tuple(float(t) for t in record.thresholds)


def check_export_dir(export_dir):
  """ExportError unless export_dir is missing or an empty directory whose parent is writable."""
  if os.path.isdir(export_dir) and os.listdir(export_dir):
    raise ExportError("--export_dir %s is not empty: pass a new directory (an export is "
                      "written whole, never into an existing one)" % export_dir)
  try:
    io_utils.check_output_dir(os.path.dirname(os.path.abspath(export_dir)), "--export_dir",
                              export_dir)
  except ValueError as e:
    raise ExportError(str(e)) from None


def finetuned_checkpoint(finetuned_dir, head=(finetuned.HEAD_WEIGHTS, finetuned.HEAD_BIAS)):
  """The latest checkpoint of --finetuned_dir, which has the head (its weights and bias names).
  Raises ExportError."""
  if not os.path.isdir(finetuned_dir):
    raise ExportError("--finetuned_dir %s: no such directory" % finetuned_dir)
  checkpoint = checkpoint_lib.resolve_checkpoint(finetuned_dir, run_dir=True)
  if checkpoint is None:
    raise ExportError("--finetuned_dir %s holds no checkpoint: fine-tune with run_classifier "
                      "or run_ner --do_train first" % finetuned_dir)
  try:
    rows = finetuned.head_size(checkpoint, head)
  except tf.errors.OpError as e:
    raise ExportError("--finetuned_dir %s: cannot read checkpoint %s (%s)" % (
        finetuned_dir, checkpoint, str(e).splitlines()[0])) from None
  if rows is None:
    raise ExportError("--finetuned_dir %s: %s has no classifier or tagger head (%s, %s or "
                      "ner/%s): a pretraining or another program's checkpoint; fine-tune it "
                      "with run_classifier or run_ner" % (
                          finetuned_dir, checkpoint, finetuned.HEAD_WEIGHTS,
                          finetuned.HEAD_BIAS, finetuned.HEAD_WEIGHTS))
  return checkpoint


def with_recorded_flags(request):
  """The request with --max_seq_length and --do_lower_case as run_classifier recorded them in
  finetuned_dir's classifier_config.json (finetuned.TEXT_KEYS); a flag given must equal the
  record, and a directory saved before they were recorded takes them from the flags.

  Raises:
    ExportError: a flag other than the record; neither a flag nor a record.
  """
  try:
    saved = finetuned.read_text_settings(request.finetuned_dir)
  except ValueError as e:
    raise ExportError(str(e)) from None
  path = os.path.join(request.finetuned_dir, finetuned.CONFIG_FILE)
  values = {}
  for key, kind in zip(finetuned.TEXT_KEYS, (int, bool)):
    flag, recorded = getattr(request, key), saved.get(key)
    if recorded is not None and type(recorded) is not kind:  # a bool is no int here
      raise ExportError("%s: %s is %r, not a%s %s: not run_classifier's record; restore it or "
                        "delete the key and pass --%s" % (path, key, recorded,
                                                          "n" * (kind is int), kind.__name__, key))
    if flag is not None and recorded is not None and flag != recorded:
      raise ExportError("--%s=%s, but %s records --%s=%s (the fine-tuning's): drop the flag" % (
          key, _flag_text(flag), path, key, _flag_text(recorded)))
    if flag is None and recorded is None:
      raise ExportError("--%s: %s does not record it (run_ner's, or fine-tuned before it was "
                        "saved): pass the "
                        "fine-tuning's --%s" % (key, path, key))
    values[key] = recorded if flag is None else flag
  return request._replace(**values)


def _flag_text(value):
  return str(value).lower() if isinstance(value, bool) else str(value)


def check_weights(checkpoint, shapes):
  """ExportError naming the model variables (shapes: {name: shape list}) the checkpoint lacks or
  holds in another shape."""
  try:
    finetuned.restore_report(checkpoint, shapes)
  except ValueError as e:
    raise ExportError(str(e).replace("--init_checkpoint", "--finetuned_dir's checkpoint")) from None
  missing = sorted(set(shapes) - set(dict(tf.train.list_variables(checkpoint))))
  if missing:
    raise ExportError("%s lacks %d variable(s) of the model (%s): not a model of "
                      "--bert_config_file" % (checkpoint, len(missing), ", ".join(missing[:4])))


def check_model_files(request):
  """The BertConfig of --bert_config_file, checked with --max_seq_length and --vocab_file.
  Raises ExportError."""
  config = hf.read_config(request.bert_config_file)
  if not 3 <= request.max_seq_length <= config.max_position_embeddings:
    raise ExportError("--max_seq_length %d: must be 3..%d (max_position_embeddings of %s)" % (
        request.max_seq_length, config.max_position_embeddings, request.bert_config_file))
  hf.check_vocab(request.vocab_file, config, request.do_lower_case)  # padded vocab_size: valid
  return config


def _with_program_defaults(request, kind):
  """The request with --max_seq_length / --do_lower_case not given taken from the program the
  kind serves (kind.PROGRAM_SETTINGS: extract_features', run_squad's settings table)."""
  return request._replace(**{
      key: flag_table.field_of(kind.PROGRAM_SETTINGS, key).default
      for key in finetuned.TEXT_KEYS if getattr(request, key) is None})


def check(request):
  """Every input checked before anything is written; returns the Plan. Raises ExportError."""
  check_export_dir(request.export_dir)
  if request.kind in (features.KIND, question_answering.KIND):
    kind = features if request.kind == features.KIND else question_answering
    request = _with_program_defaults(request, kind)
    try:
      checkpoint, spec = kind.check(request)
    except ValueError as e:
      raise ExportError(str(e)) from None
    return Plan(request, checkpoint, spec, tokenization.load_vocab(request.vocab_file))
  checkpoint = finetuned_checkpoint(request.finetuned_dir)
  request = with_recorded_flags(request)
  labels = serving_labels(request.finetuned_dir)
  rows = finetuned.head_size(checkpoint)
  if rows != len(labels):
    raise ExportError("%s has a classifier head for %d labels, %s lists %d (%s): the labels of "
                      "another model; restore the labels.txt of this fine-tuning" % (
                          checkpoint, rows, os.path.join(request.finetuned_dir,
                                                         label_lists.LABELS_FILE),
                          len(labels), ",".join(labels)))
  config = check_model_files(request)
  try:
    head = finetuned.read_head(request.finetuned_dir)
    pooling = finetuned.read_pooling(request.finetuned_dir) or finetuned.DEFAULT_POOLING
    saved = finetuned.read_long_text(request.finetuned_dir)
    options = classifier.check_long_text(long_text.Options(*[
        saved[key] for key in finetuned.LONG_TEXT_KEYS]) if saved else long_text.DEFAULT)
  except ValueError as e:
    raise ExportError(str(e)) from None
  if head.get("entity_markers"):
    raise ExportError("%s was fine-tuned with --entity_markers=%s (its head reads the marker "
                      "tokens' states): the serving export takes classifiers without entity "
                      "markers; serve its --do_predict, or fine-tune with --entity_markers=0" % (
                          request.finetuned_dir, head["entity_markers"]))
  thresholds = serving_thresholds(request.finetuned_dir, labels)
  if head.get("multi_label") and thresholds is None:
    raise ExportError("%s was fine-tuned with --multi_label but holds no %s (the thresholds are "
                      "chosen on dev): run run_classifier --do_eval on it first" % (
                          request.finetuned_dir, multi_label.THRESHOLDS_FILE))
  spec = classifier.Spec(config, labels, pooling, request.max_seq_length, options,
                         request.text_pairs, thresholds)
  check_weights(checkpoint, classifier_model.variable_shapes(
      config, len(labels), spec.seq_length, spec.pooling))
  return Plan(request, checkpoint, spec, tokenization.load_vocab(request.vocab_file))


def _warmup_requests(spec, vocab):
  """[(signature, inputs)]: one text request and one ids request of two rows."""
  texts = np.array(["上涨", ""], dtype=object)
  text_inputs = {"text": texts}
  if spec.pairs:
    text_inputs["text_b"] = texts
  ids = np.zeros([2, spec.seq_length], np.int32)
  ids[:, 0] = vocab["[CLS]"]
  ids[:, 1] = vocab["[SEP]"]
  mask = np.zeros_like(ids)
  mask[:, :2] = 1
  return [(TEXT_SIGNATURE, text_inputs), (IDS_SIGNATURE, {
      "input_ids": ids, "input_mask": mask, "segment_ids": np.zeros_like(ids)})]


def _config_record(plan, specific, onnx_outputs):
  """serving_config.json: what every kind records, then the kind's `specific` fields."""
  spec = plan.spec
  record = {
      "kind": plan.request.kind, "max_seq_length": spec.seq_length,
      "do_lower_case": bool(plan.request.do_lower_case), "text_pairs": bool(spec.pairs),
      "checkpoint": os.path.basename(plan.checkpoint),
      "signatures": {TEXT_SIGNATURE: ["text", "text_b"] if spec.pairs else ["text"],
                     IDS_SIGNATURE: list(restored_model.INPUT_NAMES)},
      "onnx_outputs": list(onnx_outputs) if plan.request.onnx else []}
  record.update(specific)
  return record


def _classifier_record(spec):
  return {
      "labels": spec.labels, "pooling": spec.pooling,
      "long_text": dict(zip(finetuned.LONG_TEXT_KEYS, spec.long_text)),
      "multi_label": spec.thresholds is not None,
      "thresholds": list(spec.thresholds) if spec.thresholds is not None else None,
      "outputs": ["probabilities", "logits", "label_index", "label", "truncated", "num_tokens"] + (
          ["predicted"] if spec.thresholds is not None else []),
  }


Parts = collections.namedtuple("Parts", ["module", "files", "record", "triton", "warmup"])
Parts.__doc__ = """What the export's files hold that depends on the kind: module (the servable
tf.Module: text, ids, numeric), files ({name: text} beside bert_config.json, also assets),
record (serving_config.json), triton ({model name: config.pbtxt}), warmup ([(signature,
inputs)])."""


def _kind_parts(plan):
  """Parts of the plan's kind: the one place the export's files depend on the kind (ner.py
  builds its own Parts: it reads this module)."""
  spec = plan.spec
  tokenizer = graph_tokenizer.GraphTokenizer(plan.vocab, plan.request.do_lower_case)
  if plan.request.kind == question_answering.KIND:
    qa = question_answering
    return Parts(qa.SquadServing(spec, plan.checkpoint, tokenizer, plan.vocab), {},
                 _config_record(plan, qa.config_record(spec), qa.FLOAT_OUTPUTS),
                 qa.triton_configs(spec, TEXT_SIGNATURE),
                 qa.warmup_requests(spec, plan.vocab, TEXT_SIGNATURE, IDS_SIGNATURE))
  if plan.request.kind == features.KIND:
    module = features.FeaturesServing(spec, plan.checkpoint, tokenizer, plan.vocab)
    onnx_outputs = [n for n in features.FLOAT_OUTPUTS if n in features.outputs_of(spec)]
    return Parts(module, {}, _config_record(plan, features.config_record(spec), onnx_outputs),
                 features.triton_configs(spec, TEXT_SIGNATURE),
                 _warmup_requests(spec, plan.vocab))
  module = classifier.ClassifierServing(spec, plan.checkpoint, tokenizer, plan.vocab)
  return Parts(module, labels_file(spec.labels),
               _config_record(plan, _classifier_record(spec), classifier.FLOAT_OUTPUTS),
               _triton_configs(spec), _warmup_requests(spec, plan.vocab))


def labels_file(labels):
  """{labels.txt: its text}: a Parts.files entry."""
  return {label_lists.LABELS_FILE: "".join(label + "\n" for label in labels)}


def _write_saved_model(parts, vocab_file, directory, scratch):
  """The SavedModel with its assets (the vocab; parts.files, bert_config.json and
  serving_config.json as written in `scratch`) and the warm-up records."""
  module = parts.module
  module.assets = [tf.saved_model.Asset(vocab_file)] + [
      tf.saved_model.Asset(os.path.join(scratch, name))
      for name in list(parts.files) + [BERT_CONFIG_FILE, CONFIG_FILE]]
  tf.saved_model.save(module, directory, signatures={
      TEXT_SIGNATURE: module.text.get_concrete_function(),
      IDS_SIGNATURE: module.ids.get_concrete_function()})
  os.makedirs(os.path.join(directory, "assets.extra"))
  deploy_files.write_warmup(os.path.join(directory, WARMUP_FILE), MODEL_NAME, parts.warmup)


def onnx_model(module, bert_config, fused=True):
  """onnx ModelProto of module.numeric (tf2onnx), its layer norms, GELUs and attentions fused
  into onnxruntime's ops (onnx_graph.rewrite) unless fused=False."""
  import tf2onnx  # pylint: disable=import-outside-toplevel  (slow import; only when asked)
  model, _ = tf2onnx.convert.from_function(module.numeric,
                                           input_signature=module.numeric.input_signature,
                                           opset=ONNX_OPSET)
  if fused:
    onnx_graph.rewrite(model, bert_config.num_attention_heads)
  return model


def _write_onnx(module, bert_config, path):
  import onnx  # pylint: disable=import-outside-toplevel
  onnx.save(onnx_model(module, bert_config), path)


def _triton_configs(spec):
  labels = len(spec.labels)
  floats = [("probabilities", "TYPE_FP32", [labels]), ("logits", "TYPE_FP32", [labels])]
  texts = [("text", "TYPE_STRING", [])] + ([("text_b", "TYPE_STRING", [])] if spec.pairs else [])
  ids = [(name, "TYPE_INT32", [spec.seq_length]) for name in restored_model.INPUT_NAMES]
  sets = [("predicted", "TYPE_BOOL", [labels])] if spec.thresholds is not None else []
  return {
      "bert_fin_text": deploy_files.triton_config(
          "bert_fin_text", "tensorflow_savedmodel", texts,
          floats + [("label", "TYPE_STRING", []), ("label_index", "TYPE_INT32", []),
                    ("truncated", "TYPE_BOOL", []), ("num_tokens", "TYPE_INT32", [])] + sets,
          signature=TEXT_SIGNATURE),
      "bert_fin_onnx": deploy_files.triton_config("bert_fin_onnx", "onnxruntime_onnx", ids,
                                                  floats),
  }


def _write_text(path, text):
  os.makedirs(os.path.dirname(path), exist_ok=True)
  with open(path, "w", encoding="utf-8") as f:
    f.write(text)


def copy_client(directory):
  """onnx_client.py and token_windows.py (the rules it imports from beside it) into
  `directory`: a client that needs neither bert_fin nor TensorFlow."""
  for module in (onnx_client, token_windows):
    shutil.copyfile(module.__file__, os.path.join(directory, os.path.basename(module.__file__)))


def write_files(request, bert_config, parts, scratch):
  """Every file of the export (module docstring) into `scratch`: parts (Parts) of the model
  of bert_config (modeling.BertConfig)."""
  for name, text in parts.files.items():
    _write_text(os.path.join(scratch, name), text)
  _write_text(os.path.join(scratch, BERT_CONFIG_FILE), bert_config.to_json_string())
  _write_text(os.path.join(scratch, CONFIG_FILE),
              json.dumps(parts.record, indent=2, ensure_ascii=False) + "\n")
  _write_saved_model(parts, request.vocab_file, os.path.join(scratch, SAVED_MODEL_DIR), scratch)
  if request.onnx:
    _write_onnx(parts.module, bert_config, os.path.join(scratch, ONNX_FILE))
  os.makedirs(os.path.join(scratch, TOKENIZER_DIR))
  hf_tokenizer.write_tokenizer_files(request.vocab_file, os.path.join(scratch, TOKENIZER_DIR),
                                     request.do_lower_case, request.max_seq_length)
  copy_client(scratch)
  _write_text(os.path.join(scratch, BATCHING_FILE), deploy_files.batching_parameters())
  for name, text in parts.triton.items():
    _write_text(os.path.join(scratch, "triton", name, "config.pbtxt"), text)


def build_atomically(request, checkpoint, bert_config, parts_of):
  """Writes write_files(request, bert_config, parts_of()) in a scratch directory beside
  --export_dir and renames it into place.

  Raises:
    ExportError: a checkpoint whose values do not read (nothing is left at --export_dir).
    OSError: writing failed (nothing is left at --export_dir).
  """
  export_dir = os.path.abspath(request.export_dir)
  with io_utils.work_dir(os.path.dirname(export_dir), prefix="export-") as scratch:
    built = os.path.join(scratch, "export")
    os.makedirs(built)
    try:
      write_files(request, bert_config, parts_of(), built)
    except tf.errors.OpError as e:  # a checkpoint whose data file does not read, ...
      raise ExportError("cannot export %s: %s" % (checkpoint, str(e).splitlines()[0])) from None
    if os.path.isdir(export_dir):
      os.rmdir(export_dir)  # empty: checked
    os.rename(built, export_dir)


def export(request, plan=None):
  """Writes the export (module docstring) atomically; returns the Plan it exported.

  Raises:
    ExportError: a bad input (check), before anything is written; a checkpoint whose values do
      not read (nothing is left at --export_dir).
    OSError: writing failed (nothing is left at --export_dir).
  """
  plan = plan or check(request)
  build_atomically(plan.request, plan.checkpoint, plan.spec.bert_config,
                   lambda: _kind_parts(plan))
  return plan


def describe(plan):
  """The line the command prints for an export of check's kinds."""
  spec = plan.spec
  if plan.request.kind != CLASSIFIER:
    return "%s (%s, seq %d)" % (plan.checkpoint, plan.request.kind, spec.seq_length)
  return "%s (%d labels: %s; --pooling=%s, --long_text=%s, seq %d)" % (
      plan.checkpoint, len(spec.labels), ",".join(spec.labels), spec.pooling,
      spec.long_text.mode, spec.seq_length)
