"""Exact match and F1 of predicted answers: SQuAD's and CMRC 2018's official definitions, our code
(pure Python).

SQuAD (the official v2.0 script, which on answerable questions is v1.1's): an answer is
normalised by lower-casing, removing ASCII punctuation, removing the articles a / an / the and
collapsing whitespace; EM = normalised texts equal; F1 over the bags of whitespace tokens; the gold
answers are those that do not normalise to "" (none: [""]); an empty gold or predicted answer
scores 1 when both are empty, else 0 (unanswerable questions, v2.0).

CMRC 2018 (cmrc2018_evaluate.py): an answer is lower-cased and stripped, then cut by "mixed
segmentation": every character in U+4E00..U+9FA5 is a segment of its own, and so is each of
CMRC_PUNCTUATION (removed for scoring), the runs between them are cut into words (the script uses
nltk's word_tokenize there; here: numbers with their decimal / thousands separators, runs of
letters and digits, every other non-space character alone, the same on the letters, digits and
symbols of Chinese financial text). F1 = the harmonic mean of the longest common run of segments
over the predicted and the gold segments; EM = equal after removing CMRC_PUNCTUATION. (The
official list holds "……" as one entry, which matches no single character: "…" is kept, as
there.) Empty answers as in SQuAD v2.0.

Both take the best score over a question's gold answers; the figures are percentages (100 x the
mean over questions), as the official scripts print them. v2.0 files also get the HasAns / NoAns
splits and, given the null odds, the official best thresholds (best_f1, best_f1_thresh, ...).
"""
import collections
import re
import string

from bert_fin.finetune.squad import features

SQUAD, CMRC = "squad", "cmrc"
CMRC_PUNCTUATION = frozenset([
    "-", ":", "_", "*", "^", "/", "\\", "~", "`", "+", "=", "，", "。", "：", "？", "！", "“",
    "”", "；", "’", "《", "》", "……", "·", "、", "「", "」", "（", "）", "－", "～", "『", "』"])
_ARTICLES = re.compile(r"\b(a|an|the)\b", re.UNICODE)
_PUNCTUATION = frozenset(string.punctuation)
_CMRC_CJK = re.compile(u"[\u4e00-\u9fa5]")
_WORDS = re.compile(r"\d+(?:[.,]\d+)+|[^\W_]+|[^\w\s]", re.UNICODE)


def squad_normalize(text):
  """SQuAD's normalize_answer: lower, no punctuation, no articles, single spaces."""
  text = "".join(c for c in text.lower() if c not in _PUNCTUATION)
  return " ".join(_ARTICLES.sub(" ", text).split())


def _overlap_f1(common, predicted, gold):
  if common == 0:
    return 0.0
  precision, recall = common / predicted, common / gold
  return 2 * precision * recall / (precision + recall)


def squad_scores(gold, predicted):
  """(exact, f1) of one predicted text against one gold text, SQuAD's rules."""
  gold_tokens = squad_normalize(gold).split() if gold else []
  pred_tokens = squad_normalize(predicted).split() if predicted else []
  exact = float(squad_normalize(gold) == squad_normalize(predicted))
  if not gold_tokens or not pred_tokens:
    return exact, float(gold_tokens == pred_tokens)
  common = sum((collections.Counter(gold_tokens) & collections.Counter(pred_tokens)).values())
  return exact, _overlap_f1(common, len(pred_tokens), len(gold_tokens))


def mixed_segmentation(text, remove_punctuation=False):
  """CMRC 2018's segments of text (module docstring)."""
  segments, run = [], []
  for char in text.lower().strip():
    if _CMRC_CJK.match(char) or char in CMRC_PUNCTUATION:
      segments.extend(_WORDS.findall("".join(run)))
      run = []
      if not (remove_punctuation and char in CMRC_PUNCTUATION):
        segments.append(char)
    else:
      run.append(char)
  segments.extend(_WORDS.findall("".join(run)))
  return segments


def longest_common_run(a, b):
  """Length of the longest common contiguous run of two sequences (CMRC's find_lcs)."""
  best, previous = 0, [0] * (len(b) + 1)
  for x in a:
    current = [0] * (len(b) + 1)
    for j, y in enumerate(b):
      if x == y:
        current[j + 1] = previous[j] + 1
        best = max(best, current[j + 1])
    previous = current
  return best


def cmrc_scores(gold, predicted):
  """(exact, f1) of one predicted text against one gold text, CMRC 2018's rules."""
  strip = lambda text: "".join(c for c in text.lower().strip() if c not in CMRC_PUNCTUATION)
  exact = float(strip(gold) == strip(predicted))
  gold_segments = mixed_segmentation(gold, remove_punctuation=True)
  pred_segments = mixed_segmentation(predicted, remove_punctuation=True)
  if not gold_segments or not pred_segments:
    return exact, float(gold_segments == pred_segments)
  return exact, _overlap_f1(longest_common_run(gold_segments, pred_segments),
                            len(pred_segments), len(gold_segments))


SCORERS = {SQUAD: squad_scores, CMRC: cmrc_scores}


def gold_answers(question, metric):
  """The gold texts of a data.Question ([""] for an unanswerable one)."""
  texts = [a.text for a in question.answers]
  if metric == SQUAD:
    texts = [t for t in texts if squad_normalize(t)]
  return texts or [""]


def question_scores(questions, predictions, metric):
  """{qas_id: (exact, f1)} in 0..1, the best over each question's gold answers; a question
  without a prediction scores (0, 0)."""
  scorer = SCORERS[metric]
  scores = {}
  for question in questions:
    predicted = predictions.get(question.qas_id)
    if predicted is None:
      scores[question.qas_id] = (0.0, 0.0)
      continue
    pairs = [scorer(gold, predicted) for gold in gold_answers(question, metric)]
    scores[question.qas_id] = (max(p[0] for p in pairs), max(p[1] for p in pairs))
  return scores


def best_threshold(predictions, scores, null_odds, has_answer):
  """The official v2.0 find_best_thresh: (best score in %, its threshold) when every question
  whose null odds are <= the threshold is answered as predicted and the others get "".
  scores: {qas_id: score in 0..1}; has_answer: {qas_id: bool}."""
  score = best = sum(1 for qid in has_answer if not has_answer[qid])
  threshold = 0.0
  for qid in sorted(null_odds, key=lambda q: null_odds[q]):
    if qid not in scores:
      continue
    if has_answer[qid]:
      score += scores[qid]
    elif predictions[qid]:
      score -= 1
    if score > best:
      best, threshold = score, null_odds[qid]
  return 100.0 * best / len(scores), threshold


def evaluate(questions, predictions, metric, null_odds=None):
  """OrderedDict of figures (percentages; module docstring): exact, f1, total, missing
  (questions without a prediction); with unanswerable questions HasAns_* and NoAns_*; with
  null_odds (v2.0) best_exact, best_exact_thresh, best_f1, best_f1_thresh."""
  scores = question_scores(questions, predictions, metric)
  has_answer = {q.qas_id: not q.is_impossible for q in questions}
  result = collections.OrderedDict()

  def add(prefix, ids):
    if ids:
      result[prefix + "exact"] = 100.0 * sum(scores[i][0] for i in ids) / len(ids)
      result[prefix + "f1"] = 100.0 * sum(scores[i][1] for i in ids) / len(ids)
      result[prefix + "total"] = len(ids)

  add("", [q.qas_id for q in questions])
  result["missing"] = sum(1 for q in questions if q.qas_id not in predictions)
  if not all(has_answer.values()):
    add("HasAns_", [i for i, has in has_answer.items() if has])
    add("NoAns_", [i for i, has in has_answer.items() if not has])
  if null_odds:
    for index, name in enumerate(("exact", "f1")):
      result["best_" + name], result["best_%s_thresh" % name] = best_threshold(
          predictions, {i: s[index] for i, s in scores.items()}, null_odds, has_answer)
  return result


def choose_metric(flag, contexts):
  """--eval_metric: squad / cmrc as given; auto: cmrc when a context holds a CJK ideograph."""
  if flag != "auto":
    return flag
  return CMRC if any(features.has_cjk(context) for context in contexts) else SQUAD
