"""A run_squad output directory served: the span head's start / end logits of window ids.

The export of `--kind=squad` (export.py dispatches here). The graph is run_squad's
(finetune/squad/model.py: BertModel, then cls/squad/output_weights [2, H] and output_bias [2] on
every token), its variables restored from the directory's latest checkpoint.

Signatures of SquadServing: `ids` and `serving_default` (the same function) take input_ids,
input_mask, segment_ids int32 [B, S] (one row a window: [CLS] question [SEP] context part [SEP],
as run_squad's features.py lays it out) and answer start_logits, end_logits float32 [B, S].
The windowing of long contexts (--doc_stride), the span choice (--n_best_size,
--max_answer_length, max-context windows, the null answer of --version_2_with_negative) and the
answer text (the context's characters from the first token's start to the last token's end) are
the client's: onnx_client.OnnxQuestionAnswering does them in numpy with the options the export
records (serving_config.json "qa"). The SavedModel has no raw-text question + context signature.
"""
import collections

import numpy as np
import tensorflow as tf

from bert_fin.export import hf
from bert_fin.finetune import finetuned
from bert_fin.finetune.squad import flags as squad_flags
from bert_fin.finetune.squad import model as squad_model
from bert_fin.modeling import checkpoint as checkpoint_lib
from bert_fin.serving import deploy_files
from bert_fin.serving import restored_model

KIND = "squad"
FLOAT_OUTPUTS = ("start_logits", "end_logits")
POOLER = "bert/pooler/"  # built by BertModel, read by no output

Options = collections.namedtuple("Options", [
    "doc_stride", "max_query_length", "n_best_size", "max_answer_length", "version_2",
    "null_score_diff_threshold"])
Options.__doc__ = """run_squad's flags the client applies: doc_stride, max_query_length (google's
window layout), n_best_size, max_answer_length, version_2 (--version_2_with_negative),
null_score_diff_threshold (google's span choice)."""

Spec = collections.namedtuple("Spec", ["bert_config", "seq_length", "options", "pairs"])
Spec.__doc__ = """What a QA export serves: bert_config, seq_length (S, run_squad's
--max_seq_length), options (Options), pairs (False: no text_b input)."""


def default_options():
  """Options of run_squad's flag defaults (flags.py: the one home of those values)."""
  data, task = squad_flags.Data(), squad_flags.Task()
  return Options(data.doc_stride, data.max_query_length, task.n_best_size,
                 task.max_answer_length, task.version_2_with_negative,
                 task.null_score_diff_threshold)


def check(request):
  """(checkpoint prefix, Spec) of a QA request (export.Request: finetuned_dir is run_squad's
  --output_dir; qa the Options).

  Raises:
    ValueError (one line): no checkpoint, no span head, a config or vocab that does not fit, a
      window with no room for the context.
  """
  directory = request.finetuned_dir
  checkpoint = checkpoint_lib.resolve_checkpoint(directory, run_dir=True)
  if checkpoint is None:
    raise ValueError("--finetuned_dir %s holds no checkpoint: fine-tune with run_squad "
                     "--do_train first" % directory)
  try:
    has_head = finetuned.head_size(checkpoint, squad_model.HEAD) is not None
  except tf.errors.OpError as e:
    raise ValueError("--finetuned_dir %s: cannot read checkpoint %s (%s)" % (
        directory, checkpoint, str(e).splitlines()[0])) from None
  if not has_head:
    raise ValueError("--finetuned_dir %s: %s has no span head (%s, %s): a pretraining or "
                     "another program's checkpoint; fine-tune it with run_squad" % (
                         directory, checkpoint, squad_model.HEAD_WEIGHTS,
                         squad_model.HEAD_BIAS))
  config = hf.read_config(request.bert_config_file)
  options = request.qa or default_options()
  seq = request.max_seq_length
  if not 3 <= seq <= config.max_position_embeddings:
    raise ValueError("--max_seq_length %d: must be 3..%d (max_position_embeddings of %s)" % (
        seq, config.max_position_embeddings, request.bert_config_file))
  if seq - options.max_query_length - 3 < 1:
    raise ValueError("--max_seq_length %d leaves no context token after a question of "
                     "--max_query_length %d: pass run_squad's values" % (
                         seq, options.max_query_length))
  hf.check_vocab(request.vocab_file, config, request.do_lower_case)
  shapes = squad_model.variable_shapes(config, seq)
  try:
    finetuned.restore_report(checkpoint, shapes)
  except ValueError as e:
    raise ValueError(str(e).replace("--init_checkpoint", "--finetuned_dir's checkpoint")
                     .replace(" and the labels", "")) from None
  saved = dict(tf.train.list_variables(checkpoint))
  missing = sorted(n for n in set(shapes) - set(saved) if not n.startswith(POOLER))
  if missing:
    raise ValueError("%s lacks %d variable(s) of the model (%s): not a model of "
                     "--bert_config_file" % (checkpoint, len(missing), ", ".join(missing[:4])))
  return checkpoint, Spec(config, seq, options, False)


def _build(spec):
  def build(features):
    start_logits, end_logits = squad_model.create_model(spec.bert_config, False, features)
    return {"start_logits": start_logits, "end_logits": end_logits}
  return build


class SquadServing(tf.Module):
  """The servable span model (module docstring).

  Args:
    spec: Spec.
    checkpoint: run_squad's fine-tuned checkpoint prefix.

  Raises:
    restored_model.RestoreError: the checkpoint lacks a variable or has it in another shape.
  """

  def __init__(self, spec, checkpoint):
    super().__init__(name="question_answering")
    self._model = restored_model.wrap(_build(spec), spec.seq_length)
    self._weights = list(self._model.variables)  # tracked: saved with the module
    restored_model.restore(self._model, checkpoint, skip=(POOLER,))
    self.ids = tf.function(self._numeric,
                           input_signature=restored_model.input_specs(spec.seq_length))
    self.numeric = self.text = self.ids  # no raw-text signature: serving_default is ids

  def _numeric(self, input_ids, input_mask, segment_ids):
    outputs = self._model(input_ids, input_mask, segment_ids)
    return {name: outputs[name] for name in FLOAT_OUTPUTS}


def config_record(spec):
  """serving_config.json's kind-specific fields."""
  return {"kind": KIND, "qa": spec.options._asdict(), "outputs": list(FLOAT_OUTPUTS),
          "signatures": {name: list(restored_model.INPUT_NAMES)
                         for name in ("serving_default", "ids")},
          "long_text": {"long_text": "windows"}}


def warmup_requests(spec, vocab, signatures):
  """[(signature, inputs)]: one ids request of two rows ([CLS] [SEP] [SEP]) to each signature."""
  ids = np.zeros([2, spec.seq_length], np.int32)
  ids[:, :3] = [vocab["[CLS]"], vocab["[SEP]"], vocab["[SEP]"]]
  mask = (ids > 0).astype(np.int32)
  segments = np.zeros_like(ids)
  segments[:, 2] = 1
  return [(name, {"input_ids": ids, "input_mask": mask, "segment_ids": segments})
          for name in signatures]


def triton_configs(spec, signature):
  """{model name: config.pbtxt text}: the SavedModel and the ONNX model, both on ids."""
  ids = [(name, "TYPE_INT32", [spec.seq_length]) for name in restored_model.INPUT_NAMES]
  floats = [(name, "TYPE_FP32", [spec.seq_length]) for name in FLOAT_OUTPUTS]
  return {
      "bert_fin_text": deploy_files.triton_config("bert_fin_text", "tensorflow_savedmodel", ids,
                                                  floats, signature=signature),
      "bert_fin_onnx": deploy_files.triton_config("bert_fin_onnx", "onnxruntime_onnx", ids,
                                                  floats),
  }
