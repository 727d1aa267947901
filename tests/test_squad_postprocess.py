# coding=utf-8
"""run_squad's answers from given logits against google's write_predictions / get_final_text
(pure Python). The logits are set by hand on the windows of the handmade English file
(test_squad_features.py's stride case: windows A..D, context positions 7..11) and every expected
n-best list, probability, null odds and prediction was worked out by hand from google's code."""
import math

import pytest

from helpers import squad_files as sf
from bert_fin import tokenization
from bert_fin.finetune.squad import data
from bert_fin.finetune.squad import features
from bert_fin.finetune.squad import postprocess
from bert_fin.records import schema as records

LOW = -10.0


def _windows(tmp_path, paragraphs=sf.ENGLISH_V2_PARAGRAPHS[:1], vocab=sf.ENGLISH_VOCAB,
             seq=13, stride=3):
  tokenizer = tokenization.make_tokenizer(sf.write_vocab(tmp_path / "vocab.txt", vocab))
  path = sf.write_json(tmp_path / "p.json", sf.squad_json([(paragraphs[0][0],
                                                            paragraphs[0][1][:1])]))
  squad_file = data.read_file(path)
  return squad_file, features.encode(squad_file, tokenizer, seq, stride, 6, False)


def _logits(encoded, starts, ends, seq=13):
  """Per window: LOW everywhere but {position: logit} of starts[w] / ends[w]."""
  rows = []
  for w in range(len(encoded.windows)):
    start, end = [LOW] * seq, [LOW] * seq
    for position, value in starts[w].items():
      start[position] = value
    for position, value in ends[w].items():
      end[position] = value
    rows.append((start, end, int(encoded.arrays[records.INPUT_LEN][w])))
  return rows


# A: 'the'(tok 0) at 7, max context; B: 'the'(tok 4) at 8 and 'store' at 9; C: the top start at 7
# ('and': not its max-context window), 'bought' at 8, [CLS] at 0; the top end at 12 ([SEP]), then
# 'gallon' (10) and 'a' (9); D: nothing.
STARTS = [{7: 3.0}, {8: 2.5, 9: 2.0}, {7: 9.0, 8: 4.0, 0: 1.0}, {}]
ENDS = [{7: 3.0}, {8: 2.5, 9: 2.0}, {12: 9.0, 10: 3.0, 9: 2.0}, {}]


def _settings(n_best=4, max_answer_length=30, version_2=False, threshold=0.0):
  return postprocess.Settings(n_best, max_answer_length, True, version_2, threshold)


def test_nbest_skips_invalid_spans_and_repeated_texts_v1(tmp_path):
  """google's candidates: a start outside its max-context window, an end at [SEP], ends before
  starts and the query are dropped; candidates sort by start + end logit, ties in window order;
  the second 'the' (window B, token 4) repeats a final text and is skipped; probabilities are a
  softmax over the kept entries; v1.1 predicts the first."""
  squad_file, encoded = _windows(tmp_path)
  out = postprocess.predict(squad_file.questions, encoded.windows,
                            _logits(encoded, STARTS, ENDS), encoded.paragraphs, _settings())
  nbest = out.nbest["stride"]
  assert [(e["text"], e["start_logit"], e["end_logit"]) for e in nbest] == [
      ("bought a gallon", 4.0, 3.0), ("the", 3.0, 3.0), ("bought a", 4.0, 2.0),
      ("the store", 2.5, 2.0)]
  scores = [7.0, 6.0, 6.0, 4.5]
  total = sum(math.exp(s - 7.0) for s in scores)
  assert [e["probability"] for e in nbest] == pytest.approx(
      [math.exp(s - 7.0) / total for s in scores], rel=1e-12)
  assert out.answers == {"stride": "bought a gallon"}
  assert out.null_odds == {}


def test_max_answer_length_and_equal_scores_keep_window_order(tmp_path):
  """--max_answer_length 2 drops 'bought a gallon' (3 tokens); 'the' (window A) and 'bought a'
  (window C) both score 6.0 and the earlier window's comes first (a stable sort)."""
  squad_file, encoded = _windows(tmp_path)
  out = postprocess.predict(squad_file.questions, encoded.windows,
                            _logits(encoded, STARTS, ENDS), encoded.paragraphs,
                            _settings(max_answer_length=2))
  assert [e["text"] for e in out.nbest["stride"]] == ["the", "bought a", "the store", "store"]
  assert out.answers["stride"] == "the"


@pytest.mark.parametrize("threshold,expected", [(0.0, "bought a gallon"), (-30.0, "")])
def test_v2_null_score_from_the_window_with_the_lowest_cls_score(tmp_path, threshold, expected):
  """v2.0: score_null = the lowest start[0] + end[0] over the windows (A: -20, the first of the
  lowest; C's [CLS] start is 1.0); "" is appended to a full n-best; null odds = score_null - the
  best non-null score (-20 - 7 = -27); "" is predicted when the odds exceed the threshold."""
  squad_file, encoded = _windows(tmp_path)
  out = postprocess.predict(squad_file.questions, encoded.windows,
                            _logits(encoded, STARTS, ENDS), encoded.paragraphs,
                            _settings(version_2=True, threshold=threshold))
  nbest = out.nbest["stride"]
  assert [(e["text"], e["start_logit"], e["end_logit"]) for e in nbest][-1] == ("", LOW, LOW)
  assert len(nbest) == 5
  assert out.null_odds == {"stride": -27.0}
  assert out.answers == {"stride": expected}


def test_no_valid_span_gives_googles_empty_and_v2_a_null_answer(tmp_path):
  """Every logit equal: only query positions are in the top indexes -> v1.1 'empty' (google's
  nonce), v2.0 "" with the null entry alone and odds NO_SPAN_ODDS (google would fail there)."""
  squad_file, encoded = _windows(tmp_path)
  flat = _logits(encoded, [{}] * 4, [{}] * 4)
  v1 = postprocess.predict(squad_file.questions, encoded.windows, flat, encoded.paragraphs,
                           _settings(n_best=2))
  assert v1.answers == {"stride": "empty"}
  v2 = postprocess.predict(squad_file.questions, encoded.windows, flat, encoded.paragraphs,
                           _settings(n_best=2, version_2=True))
  assert v2.answers == {"stride": ""} and v2.null_odds == {"stride": postprocess.NO_SPAN_ODDS}
  assert [e["text"] for e in v2.nbest["stride"]] == [""]


@pytest.mark.parametrize("pred,orig,lower,expected", [
    ("steve smith", "Steve Smith's", True, "Steve Smith"),  # google's docstring example
    ("1895", "(1895-1943).", True, "1895"),  # punctuation split off by BasicTokenizer
    ("Smith", "Smith's", False, "Smith"),  # cased
    ("john", "Steve Smith's", True, "Steve Smith's"),  # not found: the original words
    ("cafe", "Cafe\u0301", True, "Cafe\u0301"),  # a stripped accent: lengths differ
    ("the man", "the  man", True, "the  man"),  # spaces kept from the original
])
def test_get_final_text_is_googles_projection(pred, orig, lower, expected):
  assert postprocess.get_final_text(pred, orig, lower) == expected


def test_get_final_text_says_why_it_failed_when_asked():
  lines = []
  assert postprocess.get_final_text("cafe", "Cafe\u0301", True, lines.append) == "Cafe\u0301"
  assert lines and lines[0].startswith("Length not equal after stripping spaces")


def test_best_indexes_and_softmax():
  assert postprocess.best_indexes([1.0, 3.0, 3.0, 2.0], 3) == [1, 2, 3]
  assert postprocess.softmax([]) == []
  assert postprocess.softmax([0.0, 0.0]) == [0.5, 0.5]


def test_chinese_answers_are_the_context_characters_as_written(tmp_path):
  """A context with a CJK ideograph: the answer is context[start of first token : end of last
  token], its own spacing and case kept (no join of tokens, no get_final_text)."""
  context = "公司发布 iPhone 新品，售价5999元"
  vocab = sf.SPECIAL + list("公司发布新品，售价元") + ["iphone", "5", "##9"]
  squad_file, encoded = _windows(tmp_path, [(context, [("c", "发布什么？", "iPhone", 0)])],
                                 vocab=vocab, seq=32, stride=8)
  window = encoded.windows[0]
  offset = window.query_length + 2  # tokens: 公 司 发 布 iphone 新 品 ， 售 价 5 ##9 ##9 ##9 元
  for first, last, expected in ((2, 6, "发布 iPhone 新品"), (10, 13, "5999")):
    logits = _logits(encoded, [{offset + first: 5.0}], [{offset + last: 5.0}], seq=32)
    out = postprocess.predict(squad_file.questions, encoded.windows, logits, encoded.paragraphs,
                              _settings())
    assert out.answers == {"c": expected}
