"""A run_squad output directory served: question + context -> the answer, in the graph.

The export of `--kind=squad` (export.py dispatches here). The graph is run_squad's
(finetune/squad/model.py: BertModel, then cls/squad/output_weights [2, H] and output_bias [2] on
every token), its variables restored from the directory's latest checkpoint.

Signatures of SquadServing:
  text(question, context)  tf.string [B] each (serving_default): run_squad --do_predict in the
      graph: the question's ids cut to max_query_length, the context's ids with the characters
      each came from (GraphTokenizer.token_spans), window_inputs (features.py's windows, the
      first MAX_WINDOWS of a context), the model on every window at once, choose_span
      (postprocess.py's rules for a context read by characters) and the answer cut from the
      context by character offsets. Outputs: answer tf.string [B], answer_start, answer_end
      int32 [B] (characters, end exclusive; -1 without a span), null_odds float32 [B],
      start_logits, end_logits float32 [B, MAX_WINDOWS, S], num_windows int32 [B],
      windows_dropped bool [B].
  ids(input_ids, input_mask, segment_ids)  int32 [N, S], one row a window -> start_logits,
      end_logits float32 [N, S] (what model.onnx holds; onnx_client.OnnxQuestionAnswering does
      the windows and the span choice in numpy with serving_config.json's "qa" options).
"""
import collections

import numpy as np
import tensorflow as tf

from bert_fin.export import hf
from bert_fin.finetune import finetuned
from bert_fin.finetune.squad import flags as squad_flags
from bert_fin.finetune.squad import model as squad_model
from bert_fin.finetune.squad import postprocess
from bert_fin.modeling import checkpoint as checkpoint_lib
from bert_fin.serving import deploy_files
from bert_fin.serving import restored_model
from bert_fin.tokenization import special_tokens as special

KIND = "squad"
PROGRAM_SETTINGS = squad_flags.Settings  # the program served: its flags' defaults
FLOAT_OUTPUTS = ("start_logits", "end_logits")
TEXT_INPUTS = ("question", "context")
TEXT_OUTPUTS = ("answer", "answer_start", "answer_end", "null_odds", "num_windows",
                "windows_dropped")
MAX_WINDOWS = 16  # windows a context may have in the raw-text signature (more: the first 16)
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


class SquadServing(restored_model.Servable):
  """The servable span model (module docstring).

  Args:
    spec: Spec.
    checkpoint: run_squad's fine-tuned checkpoint prefix.
    tokenizer: graph_tokenizer.GraphTokenizer of the model's vocab and casing.
    vocab: OrderedDict token -> id (for [CLS] and [SEP]).

  Raises:
    restored_model.RestoreError: the checkpoint lacks a variable or has it in another shape.
  """

  def __init__(self, spec, checkpoint, tokenizer, vocab):
    super().__init__("question_answering", _build(spec), spec, checkpoint, tokenizer,
                     skip=(POOLER,))
    self._special = (vocab[special.CLS], vocab[special.SEP])
    self.ids = tf.function(self._numeric,
                           input_signature=restored_model.input_specs(spec.seq_length))
    self.numeric = self.ids
    self.text = tf.function(self._text, input_signature=[
        tf.TensorSpec([None], tf.string, name) for name in TEXT_INPUTS])

  def _numeric(self, input_ids, input_mask, segment_ids):
    outputs = self._model(input_ids, input_mask, segment_ids)
    return {name: outputs[name] for name in FLOAT_OUTPUTS}

  def _text(self, question, context):
    spec, options = self._spec, self._spec.options
    query = self.tokenizer.token_ids(question)[:, :options.max_query_length]
    ids, starts, ends = self.tokenizer.token_spans(context)
    inputs = window_inputs(query, ids, spec.seq_length, options.doc_stride, self._special)
    valid = inputs["valid"]
    rows = tf.where(valid)  # [N, 2]: the windows that exist, run as one batch
    out = self._numeric(*[tf.gather_nd(inputs[name], rows)
                          for name in restored_model.INPUT_NAMES])
    shape = tf.shape(inputs["input_ids"], out_type=tf.int64)
    logits = [tf.scatter_nd(rows, out[name], shape) for name in FLOAT_OUTPUTS]
    chosen = choose_span(logits[0], logits[1], inputs, options)
    safe = lambda t: tf.maximum(t, 0)
    dense = lambda t: tf.pad(t.to_tensor(0), [[0, 0], [0, 1]])  # a column when no token
    char_start = tf.gather(dense(starts), safe(chosen["first"])[:, None], batch_dims=1)
    char_end = tf.gather(dense(ends), safe(chosen["last"])[:, None], batch_dims=1)
    char_start, char_end = (tf.cast(t[:, 0], tf.int32) for t in (char_start, char_end))
    text = tf.strings.substr(context, char_start, char_end - char_start, unit="UTF8_CHAR")
    found = chosen["found"]
    null_text = "" if options.version_2 else postprocess.EMPTY
    return {"start_logits": logits[0], "end_logits": logits[1],
            "answer": tf.where(found, text, null_text),
            "answer_start": tf.where(found, char_start, -1),
            "answer_end": tf.where(found, char_end, -1),
            "null_odds": tf.cast(chosen["null_odds"], tf.float32),
            "num_windows": tf.reduce_sum(tf.cast(valid, tf.int32), axis=1),
            "windows_dropped": inputs["dropped"]}


def window_inputs(query, context, seq_length, doc_stride, special_ids,
                  max_windows=MAX_WINDOWS):
  """run_squad's windows of each (question, context) row, as model inputs.

  Args:
    query: int64 ragged [B, (q)], the question's ids (cut to max_query_length).
    context: int64 ragged [B, (n)], the context's ids.
    seq_length: S; doc_stride: run_squad's; special_ids: (cls id, sep id);
    max_windows: W, the windows a row may have (features.doc_spans' first W).

  Returns:
    input_ids, input_mask, segment_ids int32 [B, W, S]; valid bool [B, W] (the window exists);
    doc_start, doc_length int32 [B, W]; query_length int32 [B]; owner int32 [B, n_max] (each
    context token's max-context window, features.max_context_spans over the windows served);
    dropped bool [B] (the context needed more than W windows).
  """
  q_len = tf.cast(query.row_lengths(), tf.int32)
  c_len = tf.cast(context.row_lengths(), tf.int32)
  room = seq_length - q_len - 3
  step = tf.minimum(room, doc_stride)
  needed = tf.where(c_len > 0, 1 + (tf.maximum(c_len - room, 0) + step - 1) // step, 0)
  window = tf.range(max_windows)[None, :]
  valid = window < needed[:, None]
  doc_start = window * step[:, None]
  doc_length = tf.where(valid, tf.minimum(c_len[:, None] - doc_start, room[:, None]), 0)
  position = tf.range(seq_length)[None, None, :]
  q_end = q_len[:, None, None] + 1  # the first [SEP]
  c_pos = position - q_end - 1
  c_len3 = doc_length[:, :, None]
  in_query = (position >= 1) & (position < q_end)
  in_context = (c_pos >= 0) & (c_pos < c_len3)
  q_dense = tf.pad(tf.cast(query.to_tensor(0), tf.int32), [[0, 0], [0, 1]])
  c_dense = tf.pad(tf.cast(context.to_tensor(0), tf.int32), [[0, 0], [0, 1]])
  batch = tf.shape(q_len)[0]
  flat = lambda t: tf.reshape(t, [batch, -1])
  grid = [batch, max_windows, seq_length]
  q_ids = tf.reshape(tf.gather(q_dense, flat(tf.broadcast_to(tf.clip_by_value(
      position - 1, 0, tf.shape(q_dense)[1] - 1), grid)), batch_dims=1), grid)
  c_ids = tf.reshape(tf.gather(c_dense, flat(tf.clip_by_value(
      c_pos + doc_start[:, :, None], 0, tf.shape(c_dense)[1] - 1)), batch_dims=1), grid)
  sep = (position == q_end) | (position == q_end + 1 + c_len3)
  ids = tf.where(position == 0, special_ids[0], tf.where(sep, special_ids[1], tf.where(
      in_query, q_ids, tf.where(in_context, c_ids, 0))))
  mask = (position <= q_end + 1 + c_len3) & valid[:, :, None]
  segment = (position > q_end) & mask
  token = tf.range(tf.maximum(tf.reduce_max(c_len), 1))[None, None, :]
  inside = ((token >= doc_start[:, :, None]) & (token < doc_start[:, :, None] + c_len3)
            & valid[:, :, None])
  score = (tf.cast(tf.minimum(token - doc_start[:, :, None],
                              doc_start[:, :, None] + c_len3 - 1 - token), tf.float64)
           + 0.01 * tf.cast(c_len3, tf.float64))
  score = tf.where(inside, score, -1.0)
  best = tf.reduce_max(score, axis=1, keepdims=True)
  owner = tf.reduce_min(tf.where(inside & (score == best), window[:, :, None], max_windows),
                        axis=1)
  cast = lambda t: tf.cast(t, tf.int32) * tf.cast(valid[:, :, None], tf.int32)
  return {"input_ids": cast(ids), "input_mask": cast(mask), "segment_ids": cast(segment),
          "valid": valid, "doc_start": doc_start, "doc_length": doc_length,
          "query_length": q_len, "owner": owner, "dropped": needed > max_windows}


def choose_span(start_logits, end_logits, inputs, options):
  """postprocess.predict's answer of each row in the graph, for contexts read by characters.

  Args:
    start_logits, end_logits: float32 [B, W, S] of window_inputs' windows.
    inputs: window_inputs' dict; options: Options.

  Returns:
    found bool [B] (a span is the answer: v1.1 any valid span; v2.0 one not beaten by the
    null answer by more than the threshold); first, last int32 [B] (its context tokens);
    null_odds float64 [B] (v2.0: score_null - the best span's score; NO_SPAN_ODDS without one).
  """
  k = min(options.n_best_size, start_logits.shape[-1])
  top_start, start_index = tf.math.top_k(start_logits, k)  # equal logits: lower index first
  top_end, end_index = tf.math.top_k(end_logits, k)
  s, e = start_index[:, :, :, None], end_index[:, :, None, :]
  offset = inputs["query_length"][:, None, None, None] + 2
  length = inputs["doc_length"][:, :, None, None]
  token = inputs["doc_start"][:, :, None, None] + s - offset
  n_max = tf.shape(inputs["owner"])[1]
  owner = tf.gather(inputs["owner"], tf.reshape(tf.clip_by_value(token, 0, n_max - 1),
                                                [tf.shape(token)[0], -1]), batch_dims=1)
  window = tf.range(tf.shape(start_logits)[1])[None, :, None, None]
  ok = ((s >= offset) & (s < offset + length) & (e >= offset) & (e < offset + length)
        & (tf.reshape(owner, tf.shape(token)) == window) & (e >= s)
        & (e - s + 1 <= options.max_answer_length) & inputs["valid"][:, :, None, None])
  score = (tf.cast(top_start, tf.float64)[:, :, :, None]
           + tf.cast(top_end, tf.float64)[:, :, None, :])
  batch = tf.shape(score)[0]
  flat_ok, flat_score = tf.reshape(ok, [batch, -1]), tf.reshape(score, [batch, -1])
  masked = tf.where(flat_ok, flat_score, -np.inf)
  best_score = tf.reduce_max(masked, axis=1)
  places = tf.range(tf.shape(masked)[1])[None, :]
  best = tf.reduce_min(tf.where(flat_ok & (masked == best_score[:, None]), places,
                                tf.shape(masked)[1]), axis=1)
  any_span = tf.reduce_any(flat_ok, axis=1)
  best = tf.where(any_span, best, 0)
  pick = lambda t: tf.gather(tf.reshape(tf.broadcast_to(t, tf.shape(ok)), [batch, -1]),
                             best[:, None], batch_dims=1)[:, 0]
  doc_start = inputs["doc_start"][:, :, None, None]
  first = pick(doc_start + s - offset)
  last = pick(doc_start + e - offset)
  null = tf.cast(start_logits[:, :, 0], tf.float64) + tf.cast(end_logits[:, :, 0], tf.float64)
  score_null = tf.reduce_min(tf.where(inputs["valid"], null, np.inf), axis=1)
  score_null = tf.minimum(score_null, 1000000.0)  # google's starting value
  null_odds = tf.where(any_span, score_null - best_score, postprocess.NO_SPAN_ODDS)
  found = any_span
  if options.version_2:
    found = any_span & (null_odds <= options.null_score_diff_threshold)
  return {"found": found, "first": first, "last": last, "null_odds": null_odds}


def config_record(spec):
  """serving_config.json's kind-specific fields."""
  return {"kind": KIND, "qa": spec.options._asdict(), "max_windows": MAX_WINDOWS,
          "outputs": list(FLOAT_OUTPUTS) + list(TEXT_OUTPUTS),
          "signatures": {"serving_default": list(TEXT_INPUTS),
                         "ids": list(restored_model.INPUT_NAMES)},
          "long_text": {"long_text": "windows"}}


def warmup_requests(spec, vocab, text_signature, ids_signature):
  """[(signature, inputs)]: a question and context request, and window ids of two rows."""
  ids = np.zeros([2, spec.seq_length], np.int32)
  ids[:, :3] = [vocab[special.CLS], vocab[special.SEP], vocab[special.SEP]]
  mask = (ids > 0).astype(np.int32)
  segments = np.zeros_like(ids)
  segments[:, 2] = 1
  texts = np.array(["上涨", ""], dtype=object)
  return [(text_signature, {"question": texts, "context": texts}),
          (ids_signature, {"input_ids": ids, "input_mask": mask, "segment_ids": segments})]


def triton_configs(spec, text_signature):
  """{model name: config.pbtxt text}: the SavedModel's raw-text signature, the ONNX ids graph."""
  seq = spec.seq_length
  ids = [(name, "TYPE_INT32", [seq]) for name in restored_model.INPUT_NAMES]
  texts = [(name, "TYPE_STRING", []) for name in TEXT_INPUTS]
  windows = [(name, "TYPE_FP32", [MAX_WINDOWS, seq]) for name in FLOAT_OUTPUTS]
  answers = [("answer", "TYPE_STRING", []), ("answer_start", "TYPE_INT32", []),
             ("answer_end", "TYPE_INT32", []), ("null_odds", "TYPE_FP32", []),
             ("num_windows", "TYPE_INT32", []), ("windows_dropped", "TYPE_BOOL", [])]
  return {
      "bert_fin_text": deploy_files.triton_config("bert_fin_text", "tensorflow_savedmodel",
                                                  texts, windows + answers,
                                                  signature=text_signature),
      "bert_fin_onnx": deploy_files.triton_config(
          "bert_fin_onnx", "onnxruntime_onnx", ids,
          [(name, "TYPE_FP32", [seq]) for name in FLOAT_OUTPUTS]),
  }
