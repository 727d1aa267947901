# coding=utf-8
"""A classifier, features or QA export served from Python: numpy, onnxruntime and tokenizers only.

This file is copied into every export as onnx_client.py, beside token_windows.py (bert_fin's
rules of which tokens a row reads, numpy only), and imports neither TensorFlow nor bert_fin, so a
service can run it as it is:

  from onnx_client import OnnxClassifier
  model = OnnxClassifier("export_dir", threads=4)
  model.classify(["沪深股指上涨"])   # [{"label": "up", "probabilities": {...}, "truncated": False}]

Texts are tokenized by the export's tokenizer/tokenizer.json (bert_fin's tokenizer as the
transformers files: identical on Chinese and ASCII text; hf_tokenizer.py lists the rare code points
where it differs), laid out as [CLS] A [SEP] (B [SEP]) and cut as the model was fine-tuned
(serving_config.json's long_text: head, tail or head_tail; pairs share the room with google's
longer-side-first rule), then run by onnxruntime on model.onnx (inputs input_ids, input_mask,
segment_ids int32 [B, S]; outputs logits, probabilities float32 [B, L]).
A multi-label export (serving_config.json's multi_label, thresholds) answers "labels": every
label whose probability reaches its threshold (none: the most probable one), and "label": those
names joined by a space.
A run_ner export ("kind": "ner") is served by OnnxTagger(export_dir).tag(texts): run_ner's units,
windows, Viterbi over model.onnx's emissions with serving_config.json's transitions, and the
entities with character offsets ([type, start, end exclusive, text]).
"""
import json
import os
import re

import numpy as np
import onnxruntime
from tokenizers import Tokenizer

if __package__:  # bert_fin.serving.onnx_client
  from bert_fin.finetune import token_windows
else:  # an export's copy: token_windows.py (numpy only) stands beside it
  import token_windows  # pylint: disable=import-error

pair_counts = token_windows.pair_counts  # the pair's counts, google's _truncate_seq_pair


def predicted_labels(probabilities, thresholds):
  """bool [B, L]: probabilities >= thresholds, and a row's most probable label when none reaches
  its threshold (multi_label.predict, restated: this file imports nothing of bert_fin)."""
  probabilities = np.asarray(probabilities, np.float64)
  predicted = probabilities >= np.asarray(thresholds, np.float64)
  empty = ~predicted.any(axis=1)
  predicted[np.flatnonzero(empty), probabilities[empty].argmax(axis=1)] = True
  return predicted


def keep(ids, count, cap, long_text):
  """The `count` ids a side keeps (token_windows.keep) as serving_config.json's long_text record
  ({"long_text": head | tail | head_tail, "head_tokens"}) says; cap: the row's capacity."""
  return token_windows.keep(ids, count, long_text.get("long_text") or token_windows.HEAD, cap,
                            long_text.get("head_tokens"))


class OnnxClassifier(object):
  """The export at `export_dir` (serving_config.json, tokenizer/, model.onnx) on onnxruntime.

  threads: onnxruntime's intra-op threads (0: one a core); spin: whether idle threads spin
  (onnxruntime's default; off, the default here, for a service sharing its cores with others,
  where spinning threads take the CPU the work needs).
  """

  def __init__(self, export_dir, threads=0, spin=False):
    with open(os.path.join(export_dir, "serving_config.json"), encoding="utf-8") as f:
      self.config = json.load(f)
    self.tokenizer = Tokenizer.from_file(os.path.join(export_dir, "tokenizer", "tokenizer.json"))
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.add_session_config_entry("session.intra_op.allow_spinning", "1" if spin else "0")
    self.session = onnxruntime.InferenceSession(os.path.join(export_dir, "model.onnx"), options,
                                                providers=["CPUExecutionProvider"])
    self.cls = self.tokenizer.token_to_id("[CLS]")
    self.sep = self.tokenizer.token_to_id("[SEP]")

  def _ids(self, texts):
    return [e.ids for e in self.tokenizer.encode_batch(list(texts), add_special_tokens=False)]

  def inputs(self, texts, texts_b=None):
    """{"input_ids", "input_mask", "segment_ids"}: int32 [B, S]; and truncated, bool [B]."""
    seq = self.config["max_seq_length"]
    long_text = self.config["long_text"]
    sides_a = self._ids(texts)
    sides_b = [None] * len(sides_a)
    if texts_b is not None:  # an empty text_b: a single text, as run_classifier reads it
      sides_b = [ids if text else None for text, ids in zip(texts_b, self._ids(texts_b))]
    arrays = {name: np.zeros([len(sides_a), seq], np.int32)
              for name in ("input_ids", "input_mask", "segment_ids")}
    truncated = np.zeros([len(sides_a)], bool)
    for row, (a, b) in enumerate(zip(sides_a, sides_b)):
      if b is None:
        cap = seq - 2
        kept_a, kept_b = keep(a, min(len(a), cap), cap, long_text), []
      else:
        cap = seq - 3
        count_a, count_b = pair_counts(len(a), len(b), cap)
        kept_a, kept_b = keep(a, count_a, cap, long_text), keep(b, count_b, cap, long_text)
      ids = [self.cls] + kept_a + [self.sep]
      first = len(ids)
      if b is not None:
        ids += kept_b + [self.sep]
      arrays["input_ids"][row, :len(ids)] = ids
      arrays["input_mask"][row, :len(ids)] = 1
      arrays["segment_ids"][row, first:len(ids)] = 1
      truncated[row] = len(kept_a) + len(kept_b) < len(a) + len(b or [])
    return arrays, truncated

  def run(self, arrays):
    """{"logits", "probabilities"}: float32 [B, L] of model inputs (inputs())."""
    names = [output.name for output in self.session.get_outputs()]
    return dict(zip(names, self.session.run(names, arrays)))

  def classify(self, texts, texts_b=None):
    """[{"label", "probabilities": {label: p}, "truncated"}] of each text (pair); a multi-label
    export adds "labels" (the predicted names) and "label" joins them."""
    arrays, truncated = self.inputs(texts, texts_b)
    probabilities = self.run(arrays)["probabilities"]
    labels = self.config["labels"]
    answers = [{"label": labels[int(np.argmax(p))],
                "probabilities": dict(zip(labels, (float(x) for x in p))),
                "truncated": bool(t)} for p, t in zip(probabilities, truncated)]
    if self.config.get("multi_label"):
      rows = predicted_labels(probabilities, self.config["thresholds"])
      for answer, row in zip(answers, rows):
        answer["labels"] = [labels[i] for i in np.flatnonzero(row)]
        answer["label"] = " ".join(answer["labels"])
    return answers


_ASCII_RUN = re.compile(r"[A-Za-z0-9]+|.", re.DOTALL)


def units(text):
  """[(unit, start, end)] of a text: a run of ASCII letters / digits is one unit, every other
  character one (run_ner's CLUENER units, ner_data.cluener_units, restated)."""
  return [(m.group(), m.start(), m.end()) for m in _ASCII_RUN.finditer(text)]


def viterbi(emissions, transitions):
  """The best tag path (list of int) of emissions float32 [n, L] under transitions float32
  [L, L] (transitions[i, j]: tag i then tag j; crf.decode, restated)."""
  if not len(emissions):
    return []
  score, pointers = emissions[0], []
  for emission in emissions[1:]:
    total = score[:, None] + transitions
    pointers.append(total.argmax(axis=0))
    score = total.max(axis=0) + emission
  path = [int(score.argmax())]
  for pointer in reversed(pointers):
    path.append(int(pointer[path[-1]]))
  return path[::-1]


def entities(tags):
  """[(type, first unit, end unit exclusive)] of BIO / BIOES tags by conlleval's chunk rules
  (ner_metrics.entities, restated)."""
  found, start, prev, prev_kind = [], None, "O", None
  for i, tag in enumerate(list(tags) + ["O"]):
    prefix, kind = tag.split("-", 1) if "-" in tag else ("O", None)
    if start is not None and (prev in "ES" or prefix in "BSO" and prev in "BI"
                              or prev_kind != kind):
      found.append((prev_kind, start, i))
      start = None
    if prefix != "O" and (prefix in "BS" or prev in "ESO" or prev_kind != kind):
      start = i
    prev, prev_kind = prefix, kind
  return found


def plan_windows(lengths, capacity):
  """[(first unit, end unit)] of a text's units of `lengths` pieces (each at most capacity):
  windows of at most capacity pieces, each starting at the first unit at least capacity // 2
  pieces after the previous one's start (ner_features.plan_windows, restated)."""
  starts = np.concatenate([[0], np.cumsum(lengths)]).astype(int).tolist()
  windows, first = [], 0
  while True:
    end = int(np.searchsorted(starts, starts[first] + capacity, side="right")) - 1
    windows.append((first, end))
    if end >= len(lengths):
      return windows
    half = int(np.searchsorted(starts, starts[first] + capacity // 2, side="left"))
    first = min(end, max(first + 1, half))


class OnnxTagger(OnnxClassifier):
  """A run_ner export (serving_config.json "kind": "ner") on onnxruntime: tag(texts). A long
  text is read in run_ner's windows, each unit's tag from the window where it has the most
  context (the earlier on ties)."""

  def inputs(self, texts, texts_b=None):
    """({"input_ids", "input_mask", "segment_ids"}: int32 [W, S], the windows of the texts in
    order; label_mask int32 [W, S], 1 at each unit's first piece; [(text, first unit, end
    unit)] of each window; each text's units (units()); whether a unit of a text lost pieces)."""
    seq, unk = self.config["max_seq_length"], self.tokenizer.token_to_id("[UNK]")
    cut = [units(text) for text in texts]
    flat = [unit for row in cut for unit, _, _ in row]
    pieces = iter(self._ids(flat) if flat else [])
    rows, windows, truncated = [], [], []
    for row, text_units in enumerate(cut):
      unit_ids = [next(pieces) or [unk] for _ in text_units]
      truncated.append(any(len(ids) > seq - 2 for ids in unit_ids))
      unit_ids = [ids[:seq - 2] for ids in unit_ids]
      for first, end in plan_windows([len(ids) for ids in unit_ids], seq - 2):
        kept = unit_ids[first:end]
        windows.append((row, first, end))
        rows.append(([self.cls] + [i for ids in kept for i in ids] + [self.sep],
                     np.cumsum([1] + [len(ids) for ids in kept])[:len(kept)]))
    arrays = {name: np.zeros([len(rows), seq], np.int32)
              for name in ("input_ids", "input_mask", "segment_ids", "label_mask")}
    for index, (ids, positions) in enumerate(rows):
      arrays["input_ids"][index, :len(ids)] = ids
      arrays["input_mask"][index, :len(ids)] = 1
      arrays["label_mask"][index, positions] = 1
    label_mask = arrays.pop("label_mask")
    return arrays, label_mask, windows, cut, truncated

  def _decode(self, emissions):
    transitions = self.config.get("transitions")
    if transitions is None:
      return emissions.argmax(axis=-1).tolist()
    return viterbi(emissions, np.asarray(transitions, np.float32))

  def tag(self, texts):
    """[{"tags": each unit's tag, "units": [[start, end), ...], "entities": [[type, start, end
    exclusive, text], ...] (character offsets), "windows": model rows read, "truncated": a unit
    lost pieces}]."""
    arrays, label_mask, windows, cut, truncated = self.inputs(texts)
    logits = self.run(arrays)["logits"]
    labels = self.config["labels"]
    best = [[(-1, None)] * len(row) for row in cut]  # each unit: (context, tag)
    for index, (row, first, end) in enumerate(windows):
      path = self._decode(logits[index][label_mask[index] > 0])
      lengths = np.diff(np.flatnonzero(label_mask[index]).tolist() + [
          int(arrays["input_mask"][index].sum()) - 1])
      for k, unit in enumerate(range(first, end)):
        context = min(int(lengths[:k].sum()), int(lengths[k + 1:].sum()))
        if context > best[row][unit][0]:
          best[row][unit] = (context, labels[path[k]])
    answers = []
    for row, text in enumerate(texts):
      tags = [tag for _, tag in best[row]]
      spans = [[start, end] for _, start, end in cut[row]]
      answers.append({
          "tags": tags, "units": spans,
          "entities": [[kind, spans[first][0], spans[end - 1][1],
                        text[spans[first][0]:spans[end - 1][1]]]
                       for kind, first, end in entities(tags)],
          "windows": sum(1 for w in windows if w[0] == row), "truncated": truncated[row]})
    return answers


class OnnxFeatures(OnnxClassifier):
  """A features export (serving_config.json kind "features") on onnxruntime: texts laid out as
  extract_features lays them out (a text cut to its head, pairs by google's rule)."""

  def vectors(self, texts, texts_b=None):
    """{"token_vectors": float32 [B, S, K, H] (K: serving_config.json's layers), "pooled_output":
    float32 [B, H] (an export whose checkpoint held the pooler), "input_mask": int32 [B, S],
    "truncated": bool [B]} of each text (pair)."""
    arrays, truncated = self.inputs(texts, texts_b)
    return dict(self.run(arrays), input_mask=arrays["input_mask"], truncated=truncated)


def doc_windows(num_tokens, room, doc_stride):
  """[(start, length)] of google's sliding windows over num_tokens context tokens, room tokens a
  window, and int64 [num_tokens] the window each token has the most context in
  (token_windows.doc_spans and max_context_spans)."""
  spans = token_windows.doc_spans(num_tokens, room, doc_stride)
  return spans, token_windows.max_context_spans(spans, num_tokens)


def _best_indexes(logits, n):
  return [int(i) for i in np.argsort(-np.asarray(logits, np.float64), kind="stable")[:n]]


def choose_span(windows, owners, query_length, start_logits, end_logits, qa):
  """google's span choice over one question's windows (postprocess.predict, restated).

  windows: [(doc start, length)]; owners: int [tokens], each context token's max-context window
  (doc_windows); query_length: the question's tokens; start_logits, end_logits: float [W, S];
  qa: serving_config.json's "qa" options. Returns {"span": (first, last) context token indexes or
  None (the null answer / no valid span), "start_logit", "end_logit", "null_odds" (v2.0)}: the
  prediction of run_squad for a context read by characters.
  """
  offset = query_length + 2
  prelim, score_null, null = [], 1000000, (0.0, 0.0)
  for index, (doc_start, length) in enumerate(windows):
    starts, ends = start_logits[index], end_logits[index]
    if qa["version_2"] and starts[0] + ends[0] < score_null:
      score_null, null = starts[0] + ends[0], (float(starts[0]), float(ends[0]))
    for start in _best_indexes(starts, qa["n_best_size"]):
      for end in _best_indexes(ends, qa["n_best_size"]):
        context = (offset <= start < offset + length and offset <= end < offset + length)
        if (not context or owners[doc_start + start - offset] != index or end < start
            or end - start + 1 > qa["max_answer_length"]):
          continue
        prelim.append((float(starts[start]) + float(ends[end]), doc_start + start - offset,
                       doc_start + end - offset, float(starts[start]), float(ends[end])))
  if qa["version_2"]:
    prelim.append((null[0] + null[1], None, None) + null)
  prelim.sort(key=lambda p: p[0], reverse=True)  # stable: equal scores keep their order
  top = [{"span": None if first is None else (first, last), "start_logit": start_logit,
          "end_logit": end_logit} for _, first, last, start_logit, end_logit in prelim]
  top = top[:qa["n_best_size"]]  # run_squad's n-best list begins so (distinct texts)
  if not qa["version_2"]:
    return top[0] if top else {"span": None, "start_logit": 0.0, "end_logit": 0.0}
  best = next((entry for entry in top if entry["span"] is not None), None)
  if best is None:
    return {"span": None, "start_logit": null[0], "end_logit": null[1], "null_odds": 1e9}
  odds = score_null - best["start_logit"] - best["end_logit"]
  if odds > qa["null_score_diff_threshold"]:
    return {"span": None, "start_logit": null[0], "end_logit": null[1], "null_odds": odds}
  return dict(best, null_odds=odds)


class OnnxQuestionAnswering(OnnxClassifier):
  """A run_squad export (serving_config.json kind "squad") on onnxruntime: each question and
  context laid out in run_squad's windows ([CLS] question [SEP] context part [SEP], the question
  cut to max_query_length, windows doc_stride apart), the span chosen by google's rules
  (choose_span) and its text cut from the context by the tokens' character offsets."""

  def answer(self, questions, contexts, batch_size=32):
    """[{"text", "start", "end" (character offsets in the context, end exclusive; None for the
    null answer), "start_logit", "end_logit"(, "null_odds" v2.0)}] of each (question, context).
    No valid span (v1.1): google's text "empty" at no offset; a v2.0 null answer: ""."""
    qa, seq = self.config["qa"], self.config["max_seq_length"]
    queries = [q[:qa["max_query_length"]] for q in self._ids(questions)]
    encoded = self.tokenizer.encode_batch(list(contexts), add_special_tokens=False)
    answers = []
    for query, context, text in zip(queries, encoded, contexts):
      windows, owners = doc_windows(len(context.ids), seq - len(query) - 3, qa["doc_stride"])
      arrays = {name: np.zeros([len(windows), seq], np.int32)
                for name in ("input_ids", "input_mask", "segment_ids")}
      for row, (start, length) in enumerate(windows):
        ids = [self.cls] + query + [self.sep] + context.ids[start:start + length] + [self.sep]
        arrays["input_ids"][row, :len(ids)] = ids
        arrays["input_mask"][row, :len(ids)] = 1
        arrays["segment_ids"][row, len(query) + 2:len(ids)] = 1
      logits = {"start_logits": np.zeros([0, seq], np.float32),
                "end_logits": np.zeros([0, seq], np.float32)}
      for first in range(0, len(windows), batch_size):
        out = self.run({k: v[first:first + batch_size] for k, v in arrays.items()})
        logits = {k: np.concatenate([logits[k], out[k]]) for k in logits}
      chosen = choose_span(windows, owners, len(query), logits["start_logits"],
                           logits["end_logits"], qa)
      span = chosen.pop("span")
      if span is None:
        chosen.update(text="" if qa["version_2"] else "empty", start=None, end=None)
      else:
        start, end = context.offsets[span[0]][0], context.offsets[span[1]][1]
        chosen.update(text=text[start:end], start=start, end=end)
      answers.append(chosen)
    return answers
