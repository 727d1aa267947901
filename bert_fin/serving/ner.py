# coding=utf-8
"""A run_ner output directory -> a serving export: raw text in, CRF tags and entities out.

Units and tags are run_ner's (finetune/ner): a text is cut into units by ner_data.cluener_units'
rule (a run of ASCII letters and digits is one unit, every other character, spaces included, is a
unit of its own); each unit is tokenized alone and its first piece carries its tag; a unit without
any piece (a space, a control character) is one [UNK] (ner_features.unit_pieces); the tags are
run_ner's: Viterbi over the units' first pieces (crf.decode) with --use_crf, the argmax without;
tags -> entities by ner_metrics.entities' conlleval rules (BIO and BIOES), in the graph by
`entity_spans` (tested equal).
Long texts as run_ner reads them: a text whose pieces do not fit a window (max_seq_length - 2)
is split into overlapping windows (ner_features.plan_windows, in the graph: `plan_windows`), each
a row of the model, and each unit's tag is read from the window where it has the most context
(`choose_windows`); a unit longer than a window keeps its first pieces (the row says truncated).

`TaggerServing(spec, checkpoint, tokenizer, vocab)` is the servable tf.Module:
  text(text)  tf.string [B] -> tags tf.string [B, U] (each unit's tag, "" as padding),
    unit_start / unit_end int32 [B, U] (each unit's characters [start, end), -1 padding),
    num_units int32 [B], entity_type / entity_text tf.string [B, E] ("" padding), entity_start /
    entity_end int32 [B, E] (character offsets in the text, end exclusive: text[start:end] is
    the entity; -1 padding), num_entities int32 [B], num_windows int32 [B] (the model rows the
    text took: more than 1 for a long text), truncated bool [B] (a unit lost pieces), logits
    float32 [B, S, L] (the emissions of each text's first window). U and E are the batch's
    largest counts; an empty text has no unit and no entity.
  ids(input_ids, input_mask, segment_ids, label_mask)  int32 [B, S] each (label_mask: 1 at each
    unit's first piece) -> logits float32 [B, S, L], tag_ids int32 [B, S] and tags tf.string
    [B, S] at the label_mask positions (0 and "" elsewhere).
  numeric  the ids function's logits from input_ids, input_mask, segment_ids (what ONNX holds;
    the transitions are in serving_config.json for onnx_client.py's Viterbi).
`check(request)` / `export_tagger(request, plan)` as export.py's check / export, for a directory
whose checkpoint has the tagger head (ner/output_weights); `is_tagger(directory)` says which kind
a directory is.
"""
import collections
import os

import numpy as np
import tensorflow as tf

from bert_fin import tokenization
from bert_fin.finetune import finetuned
from bert_fin.finetune import label_lists
from bert_fin.finetune.ner import crf as ner_crf
from bert_fin.finetune.ner import data as ner_data
from bert_fin.finetune.ner import model as ner_model
from bert_fin.modeling import checkpoint as checkpoint_lib
from bert_fin.serving import deploy_files
from bert_fin.serving import export
from bert_fin.serving import graph_tokenizer
from bert_fin.serving import restored_model
from bert_fin.tokenization import special_tokens as special

KIND = "ner"
PREFIX_CODES = "OBIES"  # a tag's prefix -> its index here (O: 0)
TEXT_OUTPUTS = ("tags", "unit_start", "unit_end", "num_units", "entity_type", "entity_start",
                "entity_end", "entity_text", "num_entities", "num_windows", "truncated", "logits")
IDS_OUTPUTS = ("logits", "tag_ids", "tags")

Spec = collections.namedtuple("Spec", ["bert_config", "labels", "seq_length", "use_crf"])
Spec.__doc__ = """What the export serves: bert_config (modeling.BertConfig), labels (the tag list,
the head's rows in order), seq_length (S, the fine-tuning --max_seq_length), use_crf (the
checkpoint has ner/transitions)."""
Plan = collections.namedtuple("Plan", ["request", "checkpoint", "spec", "vocab"])


def tag_tables(labels):
  """(prefix code int32 [L] (PREFIX_CODES' index), type index int32 [L] (-1 for O), the sorted
  entity types) of a tag list."""
  types = sorted({ner_data.parse_tag(tag)[1] for tag in labels} - {None})
  parsed = [ner_data.parse_tag(tag) for tag in labels]
  prefixes = [PREFIX_CODES.index(prefix) for prefix, _ in parsed]
  kinds = [types.index(kind) if kind is not None else -1 for _, kind in parsed]
  return np.array(prefixes, np.int32), np.array(kinds, np.int32), types


def _among(codes, letters):
  return tf.reduce_any(tf.stack([tf.equal(codes, PREFIX_CODES.index(c)) for c in letters]), 0)


def entity_spans(tag_ids, prefixes, kinds, outside):
  """ner_metrics.entities in the graph, for a batch of tag sequences.

  Args:
    tag_ids: int32 [B, K], each row's tags, padded with `outside` (the O tag's id).
    prefixes, kinds: int32 [L], tag_tables' first two.
    outside: int, the O tag's id.

  Returns:
    (start, end, kind): int32 ragged [B, (E)] each, an entity's first unit, its end unit
    (exclusive) and its type index.
  """
  batch = tf.shape(tag_ids)[0]
  tags = tf.concat([tag_ids, tf.fill([batch, 1], outside)], 1)  # an O closes the last entity
  prefix, kind = tf.gather(prefixes, tags), tf.gather(kinds, tags)
  before = tf.concat([tf.zeros([batch, 1], tf.int32), prefix[:, :-1]], 1)
  before_kind = tf.concat([tf.fill([batch, 1], -1), kind[:, :-1]], 1)
  other_kind = tf.not_equal(kind, before_kind)
  outside_now, outside_before = tf.equal(prefix, 0), tf.equal(before, 0)
  starts = ~outside_now & (_among(prefix, "BS") | _among(before, "ESO") | other_kind)
  ends = ~outside_before & (_among(before, "ES") | _among(prefix, "BSO") & _among(before, "BI")
                            | outside_now | other_kind)
  closed = tf.cumsum(tf.cast(ends, tf.int32), axis=1)
  end = tf.searchsorted(closed, closed + 1, side="left", out_type=tf.int32)
  position = tf.broadcast_to(tf.range(tf.shape(tags)[1]), tf.shape(tags))
  pick = lambda t: tf.ragged.boolean_mask(t, starts)
  return pick(position), pick(end), pick(kind)


def units_of(text):
  """The units of each text (module docstring's rule).

  Returns:
    (chars: int32 ragged [B, (characters)], the code points (invalid UTF-8 bytes dropped);
     strings: tf.string [U], every unit of the batch in order; rows: int64 [U], its text;
     start, end: int64 [U], its characters [start, end) in its text).
  """
  chars = tf.strings.unicode_decode(text, "UTF-8", errors="ignore")
  cps = chars.flat_values
  alnum = ((cps >= ord("0")) & (cps <= ord("9")) | (cps >= ord("A")) & (cps <= ord("Z"))
           | (cps >= ord("a")) & (cps <= ord("z")))
  position = tf.ragged.range(chars.row_lengths()).flat_values
  joined = alnum & tf.concat([[False], alnum[:-1]], 0) & (position > 0)
  starts = ~joined
  unit_of_char = tf.cumsum(tf.cast(starts, tf.int64)) - 1
  units = tf.RaggedTensor.from_value_rowids(
      cps, unit_of_char, nrows=tf.reduce_sum(tf.cast(starts, tf.int64)))
  start = tf.boolean_mask(position, starts)
  return (chars, tf.strings.unicode_encode(units, "UTF-8"),
          tf.boolean_mask(chars.value_rowids(), starts), start, start + units.row_lengths())


def _row_offsets(values, rows, batch):
  """int64 [U]: the exclusive cumulative sum of values (int64 [U]) within each row (rows: int64
  [U], sorted; batch: the number of rows)."""
  total = tf.cumsum(values, exclusive=True)
  splits = tf.RaggedTensor.from_value_rowids(values, rows, nrows=batch).row_splits
  base = tf.gather(tf.concat([total, [tf.reduce_sum(values)]], 0), splits[:-1])
  return total - tf.gather(base, rows)


class TaggerServing(restored_model.Servable):
  """The servable tagger (module docstring).

  Args:
    spec: Spec.
    checkpoint: the fine-tuned checkpoint prefix.
    tokenizer: graph_tokenizer.GraphTokenizer of the model's vocab and casing.
    vocab: OrderedDict token -> id (for [CLS], [SEP] and [UNK]).

  Raises:
    restored_model.RestoreError: the checkpoint lacks a variable or has it in another shape.
  """

  def __init__(self, spec, checkpoint, tokenizer, vocab):
    super().__init__("tagger", self._build, spec, checkpoint, tokenizer)
    self._labels = tf.constant(spec.labels + [""])  # index L: no tag
    self._no_tag = len(spec.labels)
    prefixes, kinds, types = tag_tables(spec.labels)
    self._prefixes, self._kinds = tf.constant(prefixes), tf.constant(kinds)
    self._types = tf.constant(types + [""])
    self._outside = spec.labels.index(ner_data.OUTSIDE)
    self._special = [vocab[token] for token in (special.CLS, special.SEP, special.UNK)]
    specs = restored_model.input_specs(spec.seq_length)
    mask = tf.TensorSpec([None, spec.seq_length], tf.int32, "label_mask")
    self.ids = tf.function(self._ids, input_signature=specs + [mask])
    self.numeric = tf.function(self._numeric, input_signature=specs)
    self.text = tf.function(self._text, input_signature=[tf.TensorSpec([None], tf.string, "text")])

  def _build(self, features):
    shape = tf.shape(features["input_ids"])
    features = dict(features, label_ids=tf.zeros(shape, tf.int32),
                    label_mask=tf.ones(shape, tf.int32))
    _, _, logits, _ = ner_model.create_model(self._spec.bert_config, False, features,
                                             len(self._spec.labels), self._spec.use_crf)
    outputs = {"logits": logits}
    if self._spec.use_crf:
      with tf.compat.v1.variable_scope(ner_model.HEAD_SCOPE, reuse=True):
        outputs["transitions"] = tf.identity(ner_crf.transitions_variable(len(self._spec.labels)))
    return outputs

  def _numeric(self, input_ids, input_mask, segment_ids):
    return {"logits": self._model(input_ids, input_mask, segment_ids)["logits"]}

  def _ids(self, input_ids, input_mask, segment_ids, label_mask):
    outputs = self._model(input_ids, input_mask, segment_ids)
    logits = outputs["logits"]
    if self._spec.use_crf:
      tag_ids = ner_crf.decode(logits, label_mask, outputs["transitions"])
    else:
      tag_ids = tf.argmax(logits, axis=-1, output_type=tf.int32) * label_mask
    names = tf.gather(self._labels, tf.where(label_mask > 0, tag_ids, self._no_tag))
    return {"logits": logits, "tag_ids": tag_ids, "tags": names}

  def _unit_pieces(self, strings):
    """(pieces int64 ragged [U, (p)], each unit's WordPiece ids ([UNK] for none) cut to a
    window; their lengths int64 [U]; cut bool [U], a unit that lost pieces)."""
    unk = self._special[2]
    capacity = self._spec.seq_length - 2
    pieces = self.tokenizer.token_ids(strings)
    dense = tf.pad(pieces.to_tensor(unk), [[0, 0], [0, 1]], constant_values=unk)
    counts = tf.maximum(pieces.row_lengths(), 1)
    lengths = tf.minimum(counts, capacity)
    return tf.RaggedTensor.from_tensor(dense, lengths=lengths), lengths, counts > capacity

  def _windows(self, pieces, lengths, rows, batch):
    """run_ner's windows of every text (plan_windows), as model rows.

    Returns (the ids signature's inputs int32 [W, S] of the W windows, rows in order; the
    windows' first units, int64 ragged [B, (windows)]; pairs: {"window", "unit" (its index in
    the batch), "position" (its first piece's in the window), "context" (choose_windows')}
    int64 [P], one a unit of a window)."""
    cls, sep, _ = self._special
    before = tf.RaggedTensor.from_value_rowids(_row_offsets(lengths, rows, batch), rows,
                                               nrows=batch)
    totals = tf.reduce_sum(tf.RaggedTensor.from_value_rowids(lengths, rows, nrows=batch), 1)
    starts = tf.concat([before, totals[:, None]], 1).to_tensor(tf.int64.max // 4)
    first, end = plan_windows(starts, before.row_lengths(), self._spec.seq_length - 2)
    units = tf.ragged.range(first.flat_values, end.flat_values)  # [W, (units)]
    window = units.value_rowids()
    row = tf.gather(first.value_rowids(), window)
    local = units.flat_values
    at = lambda unit: tf.gather_nd(starts, tf.stack([row, unit], 1))
    window_start = at(tf.gather(first.flat_values, window))
    pairs = {"window": window, "unit": tf.gather(before.row_splits, row) + local,
             "position": 1 + at(local) - window_start,
             "context": tf.minimum(at(local) - window_start,
                                   at(tf.gather(end.flat_values, window)) - at(local + 1))}
    gathered = tf.gather(pieces, pairs["unit"])
    count = tf.shape(first.flat_values, out_type=tf.int64)[:1]
    tokens = tf.RaggedTensor.from_value_rowids(
        gathered.flat_values, tf.gather(window, gathered.value_rowids()), nrows=count[0])
    tokens = tf.concat([tf.fill(tf.concat([count, [1]], 0), tf.constant(cls, tf.int64)), tokens,
                        tf.fill(tf.concat([count, [1]], 0), tf.constant(sep, tf.int64))], 1)
    shape = [None, self._spec.seq_length]
    positions = tf.stack([window, pairs["position"]], 1)
    label_mask = tf.scatter_nd(positions, tf.ones(tf.shape(window), tf.int32),
                               tf.concat([count, [self._spec.seq_length]], 0))
    ids = tf.cast(tokens.to_tensor(0, shape=shape), tf.int32)
    mask = tf.cast(tf.ones_like(tokens).to_tensor(0, shape=shape), tf.int32)
    return [ids, mask, tf.zeros_like(ids), label_mask], first, pairs

  def _text(self, text):
    batch = tf.shape(text, out_type=tf.int64)[0]
    chars, strings, rows, start, end = units_of(text)
    pieces, lengths, cut = self._unit_pieces(strings)
    inputs, windows, pairs = self._windows(pieces, lengths, rows, batch)
    outputs = self._ids(*inputs)
    pair_tags = tf.gather_nd(outputs["tag_ids"], tf.stack([pairs["window"], pairs["position"]], 1))
    unit_tags = tf.gather(pair_tags, choose_windows(pairs["context"], pairs["unit"],
                                                    tf.size(strings, out_type=tf.int64)))
    by_row = lambda t: tf.RaggedTensor.from_value_rowids(t, rows, nrows=batch)
    first, last, kind = entity_spans(by_row(unit_tags).to_tensor(self._outside),
                                     self._prefixes, self._kinds, self._outside)
    starts, ends = (by_row(tf.cast(t, tf.int32)).to_tensor(-1) for t in (start, end))
    entity_rows = tf.cast(first.value_rowids(), tf.int32)
    char_start = tf.gather_nd(starts, tf.stack([entity_rows, first.flat_values], 1))
    char_end = tf.gather_nd(ends, tf.stack([entity_rows, last.flat_values - 1], 1))
    offset = tf.cast(tf.gather(chars.row_splits, entity_rows), tf.int32)
    spans = tf.ragged.range(offset + char_start, offset + char_end)
    texts = tf.strings.unicode_encode(spans.with_flat_values(
        tf.gather(chars.flat_values, spans.flat_values)), "UTF-8")
    entity = lambda t, pad: first.with_flat_values(t).to_tensor(pad)
    return {
        "logits": tf.gather(outputs["logits"], windows.row_splits[:-1]),
        "tags": by_row(tf.gather(self._labels, unit_tags)).to_tensor(""),
        "unit_start": starts, "unit_end": ends,
        "num_units": tf.cast(by_row(rows).row_lengths(), tf.int32),
        "num_windows": tf.cast(windows.row_lengths(), tf.int32),
        "truncated": tf.reduce_any(by_row(cut).to_tensor(False), axis=1),
        "entity_type": entity(tf.gather(self._types, kind.flat_values), ""),
        "entity_start": entity(char_start, -1), "entity_end": entity(char_end, -1),
        "entity_text": entity(texts, ""),
        "num_entities": tf.cast(first.row_lengths(), tf.int32)}


def plan_windows(starts, num_units, capacity):
  """ner_features.plan_windows of every row of a batch, in the graph.

  Args:
    starts: int64 [B, N + 1], row b: the pieces before each of its units (units cut to
      `capacity`), then its total at num_units[b], then a value larger than any (padding).
    num_units: int64 [B].
    capacity: int, the pieces a window holds (S - 2).

  Returns:
    (first, end): int64 ragged [B, (windows)], each window's first unit and end unit
    (exclusive); a row without units has one window without units.
  """
  def step(first, active, found):
    base = tf.gather(starts, first[:, None], batch_dims=1)
    end = tf.searchsorted(starts, base + capacity, side="right", out_type=tf.int64)[:, 0] - 1
    half = tf.searchsorted(starts, base + capacity // 2, out_type=tf.int64)[:, 0]
    found = found.write(found.size(), tf.stack([first, end, tf.cast(active, tf.int64)], 1))
    more = active & (end < num_units)
    return tf.where(more, tf.minimum(end, tf.maximum(first + 1, half)), first), more, found

  batch = tf.shape(starts)[0]
  _, _, found = tf.while_loop(
      lambda first, active, found: tf.reduce_any(active), step,
      (tf.zeros([batch], tf.int64), tf.ones([batch], tf.bool),
       tf.TensorArray(tf.int64, size=0, dynamic_size=True, element_shape=[None, 3])))
  windows = tf.transpose(found.stack(), [1, 0, 2])  # [B, steps, 3]
  windows = tf.ragged.boolean_mask(windows, windows[:, :, 2] > 0)
  return (windows.with_flat_values(windows.flat_values[:, 0]),
          windows.with_flat_values(windows.flat_values[:, 1]))


def choose_windows(context, unit, num_units):
  """int64 [U]: for each unit, the (window, unit) pair its tag is read from: ner_features.
  choose_windows' rule (the most context; the earlier window on ties). context, unit: int64
  [P], pairs in window order; num_units: U."""
  count = tf.size(context, out_type=tf.int64)
  score = context * count + (count - 1 - tf.range(count))
  return count - 1 - tf.math.unsorted_segment_max(score, unit, num_units) % tf.maximum(count, 1)


def is_tagger(finetuned_dir):
  """Whether --finetuned_dir's latest checkpoint has run_ner's tagger head (False when it has
  none or cannot be read: the classifier's check says what is wrong)."""
  checkpoint = checkpoint_lib.resolve_checkpoint(finetuned_dir, run_dir=True)
  try:
    return checkpoint is not None and ner_model.head_size(checkpoint) is not None
  except tf.errors.OpError:
    return False


def tagger_labels(directory, rows):
  """The tag list of a tagger head of `rows` tags (labels.txt beside its checkpoints).

  Raises:
    export.ExportError: no labels.txt, a line that is not a tag, no O, or another count.
  """
  path = os.path.join(directory, label_lists.LABELS_FILE)
  labels = finetuned.read_labels(directory)
  if not labels:
    raise export.ExportError("--finetuned_dir %s has no %s: run_ner writes it beside the "
                             "checkpoints; restore it (the tags in the head's order)" % (
                                 directory, label_lists.LABELS_FILE))
  bad = [tag for tag in labels if ner_data.parse_tag(tag) is None]
  if bad or ner_data.OUTSIDE not in labels:
    raise export.ExportError("%s: %s: not run_ner's tag list (O, B-X, I-X, E-X, S-X); restore "
                             "this fine-tuning's labels.txt" % (
                                 path, "%s not a tag" % ",".join(bad) if bad else "no O tag"))
  if rows != len(labels):
    raise export.ExportError("%s has a tagger head for %d tags, %s lists %d (%s): the tags of "
                             "another model; restore the labels.txt of this fine-tuning" % (
                                 directory, rows, path, len(labels), ",".join(labels)))
  return labels


def check(request):
  """Every input checked before anything is written; returns the Plan. Raises ExportError."""
  export.check_export_dir(request.export_dir)
  if request.text_pairs:
    raise export.ExportError("--text_pairs: a run_ner tagger reads single texts; drop the flag")
  checkpoint = export.finetuned_checkpoint(request.finetuned_dir,
                                           (ner_model.HEAD_WEIGHTS, ner_model.HEAD_BIAS))
  request = export.with_recorded_flags(request)  # run_ner records none: the flags, required
  labels = tagger_labels(request.finetuned_dir, ner_model.head_size(checkpoint))
  config = export.check_model_files(request)
  spec = Spec(config, labels, request.max_seq_length, ner_model.has_crf(checkpoint))
  export.check_weights(checkpoint, ner_model.variable_shapes(
      config, len(labels), spec.seq_length, spec.use_crf))
  return Plan(request, checkpoint, spec, tokenization.load_vocab(request.vocab_file))


def _config_record(plan):
  spec = plan.spec
  transitions = (tf.train.load_checkpoint(plan.checkpoint).get_tensor(ner_model.CRF_TRANSITIONS)
                 if spec.use_crf else None)
  return {
      "kind": KIND, "labels": spec.labels, "max_seq_length": spec.seq_length,
      "do_lower_case": bool(plan.request.do_lower_case), "use_crf": spec.use_crf,
      "transitions": transitions.tolist() if transitions is not None else None,
      "checkpoint": os.path.basename(plan.checkpoint),
      "signatures": {export.TEXT_SIGNATURE: ["text"],
                     export.IDS_SIGNATURE: list(restored_model.INPUT_NAMES) + ["label_mask"]},
      "outputs": list(TEXT_OUTPUTS), "ids_outputs": list(IDS_OUTPUTS),
      "onnx_outputs": ["logits"] if plan.request.onnx else [],
  }


def _warmup_requests(spec, vocab):
  """[(signature, inputs)]: one text request and one ids request of two rows."""
  ids = np.zeros([2, spec.seq_length], np.int32)
  ids[:, :3] = [vocab[special.CLS], vocab[special.UNK], vocab[special.SEP]]
  mask = np.zeros_like(ids)
  mask[:, :3] = 1
  label_mask = np.zeros_like(ids)
  label_mask[:, 1] = 1
  return [(export.TEXT_SIGNATURE, {"text": np.array(["上涨", ""], dtype=object)}),
          (export.IDS_SIGNATURE, {"input_ids": ids, "input_mask": mask,
                                  "segment_ids": np.zeros_like(ids), "label_mask": label_mask})]


def _triton_configs(spec):
  logits = [("logits", "TYPE_FP32", [spec.seq_length, len(spec.labels)])]
  ids = [(name, "TYPE_INT32", [spec.seq_length]) for name in restored_model.INPUT_NAMES]
  by_unit = [(name, kind, [-1]) for name, kind in (
      ("tags", "TYPE_STRING"), ("unit_start", "TYPE_INT32"), ("unit_end", "TYPE_INT32"),
      ("entity_type", "TYPE_STRING"), ("entity_start", "TYPE_INT32"),
      ("entity_end", "TYPE_INT32"), ("entity_text", "TYPE_STRING"))]
  by_row = [("num_units", "TYPE_INT32", []), ("num_entities", "TYPE_INT32", []),
            ("num_windows", "TYPE_INT32", []), ("truncated", "TYPE_BOOL", [])]
  return {
      "bert_fin_text": deploy_files.triton_config(
          "bert_fin_text", "tensorflow_savedmodel", [("text", "TYPE_STRING", [])],
          logits + by_unit + by_row, signature=export.TEXT_SIGNATURE),
      "bert_fin_onnx": deploy_files.triton_config("bert_fin_onnx", "onnxruntime_onnx", ids,
                                                  logits),
  }


def _files(plan):
  spec = plan.spec
  tokenizer = graph_tokenizer.GraphTokenizer(plan.vocab, plan.request.do_lower_case)
  module = TaggerServing(spec, plan.checkpoint, tokenizer, plan.vocab)
  return export.Parts(module, export.labels_file(spec.labels), _config_record(plan),
                      _triton_configs(spec), _warmup_requests(spec, plan.vocab))


def export_tagger(request, plan=None):
  """Writes the export (export.py's files; this module's signatures) atomically; returns the
  Plan. Raises ExportError (check; a checkpoint whose values do not read) or OSError, leaving
  nothing at --export_dir."""
  plan = plan or check(request)
  export.build_atomically(plan.request, plan.checkpoint, plan.spec.bert_config,
                          lambda: _files(plan))
  return plan


def describe(plan):
  """The line the command prints for an exported tagger."""
  spec = plan.spec
  return "%s (run_ner tagger, %d tags: %s; %s, seq %d)" % (
      plan.checkpoint, len(spec.labels), ",".join(spec.labels),
      "CRF" if spec.use_crf else "softmax", spec.seq_length)
