# coding=utf-8
"""EM / F1 as the official SQuAD v2.0 and CMRC 2018 scripts define them (pure Python): SQuAD's
normalisation and bag-of-tokens F1, CMRC's mixed segmentation and longest-common-substring F1,
the v2.0 splits and best thresholds, and which metric --eval_metric=auto picks."""
import pytest

from bert_fin.finetune.squad import data
from bert_fin.finetune.squad import evaluate


def _q(qas_id, *answers, impossible=False):
  return data.Question(qas_id, "?", 0, tuple(data.Answer(a, None) for a in answers), impossible)


def test_squad_normalisation_and_token_f1():
  assert evaluate.squad_normalize("The  Cat, sat!  an apple") == "cat sat apple"
  assert evaluate.squad_scores("A Cat", "cat") == (1.0, 1.0)
  exact, f1 = evaluate.squad_scores("the cat sat", "cat sat on the mat")
  assert exact == 0.0 and f1 == pytest.approx(2 * 0.5 * 1.0 / 1.5)  # P 2/4, R 2/2
  assert evaluate.squad_scores("", "") == (1.0, 1.0)  # v2.0: both empty
  assert evaluate.squad_scores("", "cat") == (0.0, 0.0)
  assert evaluate.squad_scores("cat", "") == (0.0, 0.0)
  # the bag of tokens: order does not matter, repeats count once each
  assert evaluate.squad_scores("cat cat dog", "dog cat")[1] == pytest.approx(2 * 1 * (2 / 3) /
                                                                             (1 + 2 / 3))


def test_squad_gold_answers_that_normalise_to_nothing_are_dropped():
  assert evaluate.gold_answers(_q("a", "the", "cat"), evaluate.SQUAD) == ["cat"]
  assert evaluate.gold_answers(_q("a", impossible=True), evaluate.SQUAD) == [""]


def test_cmrc_mixed_segmentation():
  assert evaluate.mixed_segmentation("iPhone15发布，售价5999元") == [
      "iphone15", "发", "布", "，", "售", "价", "5999", "元"]
  assert evaluate.mixed_segmentation("iPhone15发布，售价5999元", remove_punctuation=True) == [
      "iphone15", "发", "布", "售", "价", "5999", "元"]
  assert evaluate.mixed_segmentation(" 12.5亿元 (约) ") == ["12.5", "亿", "元", "(", "约", ")"]
  assert evaluate.mixed_segmentation("A股、H股") == ["a", "股", "、", "h", "股"]


def test_cmrc_f1_is_the_longest_common_substring_and_em_ignores_its_punctuation():
  exact, f1 = evaluate.cmrc_scores("12.5亿元", "约12.5亿元")
  assert exact == 0.0 and f1 == pytest.approx(2 * 0.75 * 1.0 / 1.75)  # lcs 3 of 4 / 3
  # contiguous: 贵州 then 茅台 are split by 和: the longest common run is 2, not 4
  assert evaluate.cmrc_scores("贵州茅台", "贵州和茅台")[1] == pytest.approx(
      2 * 0.4 * 0.5 / 0.9)
  assert evaluate.cmrc_scores("《证券法》", "证券法") == (1.0, 1.0)
  assert evaluate.cmrc_scores("1,000", "1000")[0] == 0.0  # "," is not in CMRC's list
  assert evaluate.cmrc_scores("股份", "股票") == (0.0, pytest.approx(2 * 0.5 * 0.5 / 1.0))
  assert evaluate.cmrc_scores("", "") == (1.0, 1.0)
  assert evaluate.cmrc_scores("股份", "")[1] == 0.0


def test_figures_take_the_best_gold_answer_and_count_missing_predictions():
  questions = [_q("a", "招商银行", "招行"), _q("b", "12.5亿元"), _q("c", "2023年")]
  result = evaluate.evaluate(questions, {"a": "招行", "b": "12.5亿"}, evaluate.CMRC)
  assert result["exact"] == pytest.approx(100 / 3)
  assert result["f1"] == pytest.approx(100 * (1 + 0.8) / 3)  # b: lcs 2, P 1, R 2/3
  assert result["total"] == 3 and result["missing"] == 1
  assert "HasAns_exact" not in result and "best_f1" not in result


def test_v2_splits_and_the_official_best_threshold():
  """q1 answered right (odds -5), q2 unanswerable and predicted "" (odds 2), q3 unanswerable but
  answered (odds -1): exact 2/3; the official find_best_thresh starts from 2 (every NoAns right),
  adds q1 (+1 -> 3, threshold -5), loses q3 (-1): best 100.0 at -5."""
  questions = [_q("q1", "cat"), _q("q2", impossible=True), _q("q3", impossible=True)]
  predictions = {"q1": "the cat", "q2": "", "q3": "dog"}
  result = evaluate.evaluate(questions, predictions, evaluate.SQUAD,
                             null_odds={"q1": -5.0, "q2": 2.0, "q3": -1.0})
  assert result["exact"] == pytest.approx(200 / 3)
  assert (result["HasAns_exact"], result["HasAns_total"]) == (100.0, 1)
  assert (result["NoAns_exact"], result["NoAns_total"]) == (50.0, 2)
  assert (result["best_exact"], result["best_exact_thresh"]) == (100.0, -5.0)
  assert (result["best_f1"], result["best_f1_thresh"]) == (100.0, -5.0)


def test_auto_metric_follows_the_contexts_script():
  assert evaluate.choose_metric("auto", ["The cat sat.", "公司公告"]) == evaluate.CMRC
  assert evaluate.choose_metric("auto", ["The cat sat."]) == evaluate.SQUAD
  assert evaluate.choose_metric("squad", ["公司公告"]) == evaluate.SQUAD
