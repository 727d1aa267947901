"""Start / end logits of the windows -> answers: google's write_predictions (n-best, final text,
null odds), with the Chinese answer text cut from the context by character offsets (pure Python).

Per question, over all its windows (google's rules, in order):
  candidates  the n_best_size highest start and end logits of each window (the first of equal
              logits first); a (start, end) pair is kept when both are context positions of the
              window, start is in its max-context window, end >= start and the span has at most
              max_answer_length tokens; v2.0: plus the null answer at [CLS] of the window with the
              lowest start[0] + end[0] (score_null);
  n-best      candidates by start + end logit, highest first; each becomes its final text, a
              text already in the list is skipped, at most n_best_size; v2.0: the null answer
              ("") is added when absent; none at all: "empty" (google's nonce); probabilities: a
              softmax of start + end over the list;
  prediction  v1.1: the first text; v2.0: "" when score_null - (start + end of the best non-null
              entry) > null_score_diff_threshold, else that entry (null_odds.json: the difference).
The final text of a span: paragraphs read by google's word rule (features.py) project the
WordPiece text back onto the original words with get_final_text (google's character alignment
heuristic: "steve smith" in "Steve Smith's" -> "Steve Smith"); paragraphs read by character
offsets (Chinese) are the context's characters from the first token's start to the last token's
end, exactly as written (no whitespace joins). A question without a window (a context with no
token) predicts "" (v2.0) or "empty", with null odds NO_SPAN_ODDS.
"""
import collections
import math

import numpy as np

from bert_fin import tokenization
from bert_fin.finetune.squad import features as features_lib

EMPTY = "empty"  # google's text when no span is valid
NO_SPAN_ODDS = 1e9  # null_odds.json of a v2.0 question without a non-null candidate

Prelim = collections.namedtuple("Prelim", ["window", "start", "end", "start_logit",
                                           "end_logit"])
Predictions = collections.namedtuple("Predictions", ["answers", "nbest", "null_odds",
                                                     "unprojected"])
Predictions.__doc__ = """answers: OrderedDict qas_id -> text (predictions.json); nbest:
OrderedDict qas_id -> [OrderedDict text, probability, start_logit, end_logit]
(nbest_predictions.json); null_odds: OrderedDict qas_id -> score difference (v2.0, else empty);
unprojected: n-best texts get_final_text could not project (it returned the whole words)."""


def best_indexes(logits, n_best_size):
  """google's _get_best_indexes: the indices of the n_best_size largest logits, largest first,
  equal logits in index order."""
  return [int(i) for i in np.argsort(-np.asarray(logits, np.float64), kind="stable")[:n_best_size]]


def softmax(scores):
  """google's _compute_softmax over a list of floats ([] for [])."""
  if not scores:
    return []
  top = max(scores)
  exps = [math.exp(score - top) for score in scores]
  total = sum(exps)
  return [e / total for e in exps]


def _strip_spaces(text):
  """(text without " ", {index there: index in text})."""
  kept, where = [], {}
  for index, char in enumerate(text):
    if char != " ":
      where[len(kept)] = index
      kept.append(char)
  return "".join(kept), where


def get_final_text(pred_text, orig_text, do_lower_case, log=None):
  """google's get_final_text: the part of orig_text (the original words of a span, joined by
  spaces) that pred_text (its de-tokenized WordPiece text) corresponds to, by aligning the
  space-stripped BasicTokenizer text of orig_text with orig_text character for character;
  orig_text itself when that fails (log(message) says why, if given)."""
  tok_text = " ".join(tokenization.BasicTokenizer(do_lower_case=do_lower_case).tokenize(
      orig_text))
  start = tok_text.find(pred_text)
  if start == -1:
    if log:
      log("Unable to find text: '%s' in '%s'" % (pred_text, orig_text))
    return orig_text
  end = start + len(pred_text) - 1
  orig_ns, orig_map = _strip_spaces(orig_text)
  tok_ns, tok_map = _strip_spaces(tok_text)
  if len(orig_ns) != len(tok_ns):
    if log:
      log("Length not equal after stripping spaces: '%s' vs '%s'" % (orig_ns, tok_ns))
    return orig_text
  tok_to_ns = {index: ns for ns, index in tok_map.items()}
  orig_start = orig_map.get(tok_to_ns[start]) if start in tok_to_ns else None
  if orig_start is None:
    if log:
      log("Couldn't map start position")
    return orig_text
  orig_end = orig_map.get(tok_to_ns[end]) if end in tok_to_ns else None
  if orig_end is None:
    if log:
      log("Couldn't map end position")
    return orig_text
  return orig_text[orig_start:orig_end + 1]


def span_text(para, window, start, end, do_lower_case, log=None):
  """(final text, projected: bool) of window positions start..end (module docstring)."""
  offset = window.query_length + 2
  first, last = window.doc_start + start - offset, window.doc_start + end - offset
  if para.by_chars:
    return para.context[para.tokens.starts[first]:para.tokens.ends[last]], True
  tok_text = " ".join(para.tokens.tokens[first:last + 1])
  tok_text = tok_text.replace(" ##", "").replace("##", "")
  tok_text = " ".join(tok_text.strip().split())
  orig_text = " ".join(para.words[para.token_words[first]:para.token_words[last] + 1])
  lines = []
  text = get_final_text(tok_text, orig_text, do_lower_case, lines.append)
  if log:
    for line in lines:
      log(line)
  return text, not lines


def _candidates(windows, logits, paragraphs, settings):
  """(prelim list, score_null, its window, null start logit, null end logit) of one question."""
  prelim = []
  score_null, null_window, null_start, null_end = 1000000, 0, 0, 0
  for index, (window, (start_logits, end_logits, num_tokens)) in enumerate(zip(windows, logits)):
    if settings.version_2:
      window_null = start_logits[0] + end_logits[0]
      if window_null < score_null:
        score_null, null_window = window_null, index
        null_start, null_end = start_logits[0], end_logits[0]
    to_word, is_max = features_lib.google_maps(window, paragraphs[window.context_index])
    for start in best_indexes(start_logits, settings.n_best_size):
      for end in best_indexes(end_logits, settings.n_best_size):
        if (start >= num_tokens or end >= num_tokens or start not in to_word
            or end not in to_word or not is_max.get(start, False) or end < start
            or end - start + 1 > settings.max_answer_length):
          continue
        prelim.append(Prelim(index, start, end, start_logits[start], end_logits[end]))
  if settings.version_2:
    prelim.append(Prelim(null_window, 0, 0, null_start, null_end))
  prelim.sort(key=lambda p: p.start_logit + p.end_logit, reverse=True)
  return prelim, score_null, null_start, null_end


Settings = collections.namedtuple("Settings", [
    "n_best_size", "max_answer_length", "do_lower_case", "version_2",
    "null_score_diff_threshold"])


def predict(questions, windows, logits, paragraphs, settings, log=None):
  """Predictions of every question (module docstring).

  questions: [data.Question]; windows: [features.Window] in row order; logits: per window
  (start_logits, end_logits: float lists [max_seq_length], num_tokens: input_len);
  paragraphs: {context index: features.Paragraph}; settings: Settings; log(line): get_final_text's
  messages (google's --verbose_logging)."""
  by_question = collections.defaultdict(list)
  for window, row in zip(windows, logits):
    by_question[window.question_index].append((window, row))
  answers, all_nbest, null_odds = (collections.OrderedDict() for _ in range(3))
  unprojected = 0
  for index, question in enumerate(questions):
    rows = by_question.get(index, [])
    prelim, score_null, null_start, null_end = _candidates(
        [w for w, _ in rows], [r for _, r in rows], paragraphs, settings)
    nbest, seen = [], set()
    for pred in prelim:
      if len(nbest) >= settings.n_best_size:
        break
      if pred.start > 0:
        window = rows[pred.window][0]
        text, projected = span_text(paragraphs[window.context_index], window, pred.start,
                                    pred.end, settings.do_lower_case, log)
        if text in seen:
          continue
        unprojected += not projected
      else:
        text = ""
      seen.add(text)
      nbest.append((text, pred.start_logit, pred.end_logit))
    if settings.version_2 and "" not in seen:
      nbest.append(("", null_start, null_end))
    if not nbest:
      nbest.append((EMPTY, 0.0, 0.0))
    probabilities = softmax([s + e for _, s, e in nbest])
    all_nbest[question.qas_id] = [collections.OrderedDict(
        [("text", text), ("probability", p), ("start_logit", s), ("end_logit", e)])
                                  for (text, s, e), p in zip(nbest, probabilities)]
    if not settings.version_2:
      answers[question.qas_id] = nbest[0][0]
      continue
    best = next((entry for entry in nbest if entry[0]), None)
    if best is None:
      null_odds[question.qas_id] = NO_SPAN_ODDS
      answers[question.qas_id] = ""
      continue
    null_odds[question.qas_id] = score_null - best[1] - best[2]
    answers[question.qas_id] = ("" if null_odds[question.qas_id] >
                                settings.null_score_diff_threshold else best[0])
  return Predictions(answers, all_nbest, null_odds, unprojected)
