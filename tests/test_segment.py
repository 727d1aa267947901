"""Segmenter (bert_fin/text/segment.py): jieba/rjieba, user dictionary, honest rjieba fallback."""
import os

import pytest

from bert_fin.text import segment

FIXTURES = os.path.join(os.path.dirname(__file__), "fixtures", "pretraining")
USER_DICT = os.path.join(FIXTURES, "user_dict.txt")
SENTENCE = "宁德时代新能源科技股份有限公司和贵州茅台入选沪深300，无创dna与iPhone手机 热销"


@pytest.mark.parametrize("name", ["jieba", "rjieba"])
def test_user_dict_words_stay_whole(name):
  seg = segment.make_segmenter(name, USER_DICT)
  words = seg.cut(SENTENCE)
  for word in ("宁德时代新能源科技股份有限公司", "贵州茅台", "沪深300", "无创dna", "iPhone手机"):
    assert word in words, (name, words)
  assert "".join(words) == SENTENCE.replace(" ", "")  # nothing lost, whitespace dropped
  assert seg.name == name and seg.fallback_reason is None


@pytest.mark.parametrize("name", ["jieba", "rjieba"])
def test_without_user_dict_the_long_name_is_split(name):
  words = segment.make_segmenter(name).cut(SENTENCE)
  assert "宁德时代新能源科技股份有限公司" not in words


def test_rjieba_falls_back_to_jieba_when_it_cannot_honour_the_dict(monkeypatch, caplog):
  monkeypatch.setattr(segment._RjiebaSegmenter, "raw_cut", lambda self, text: list(text))
  seg = segment.make_segmenter("rjieba", USER_DICT)
  assert seg.name == "jieba" and seg.requested == "rjieba"
  assert "user-dict" in seg.fallback_reason
  assert "falling back" in caplog.text
  assert "贵州茅台" in seg.cut(SENTENCE)


def test_user_dict_format_errors_are_clear(tmp_path):
  bad = tmp_path / "bad.txt"
  bad.write_text("# comment\n\n好词 12 n\n坏词 many\n", encoding="utf-8")
  with pytest.raises(ValueError, match=r"bad.txt:4: frequency 'many'"):
    segment.read_user_dict(str(bad))
  good = tmp_path / "good.txt"
  good.write_text("\ufeff好词 12 n\n单词\n", encoding="utf-8")
  assert segment.read_user_dict(str(good)) == [("好词", 12, "n"), ("单词", None, None)]
  with pytest.raises(ValueError, match="unknown segmenter"):
    segment.make_segmenter("thulac")


@pytest.mark.parametrize("name", ["jieba", "rjieba"])
def test_user_words_with_brackets_stay_whole_without_a_fallback(name, tmp_path):
  """jieba splits text on （）& etc. before its dictionary is consulted; such user words are matched
  first, so the fast segmenter stays in use and the legal names are masked whole."""
  user_dict = tmp_path / "dict.txt"
  user_dict.write_text("中国平安保险（集团）股份有限公司 2000 nt\n中国平安 3000\n"
                       "A&B（中国）\n贵州茅台\n", encoding="utf-8")
  seg = segment.make_segmenter(name, str(user_dict))
  assert seg.name == name and seg.fallback_reason is None
  assert seg.protected_words == ("中国平安保险（集团）股份有限公司", "A&B（中国）")
  sentence = "公告：中国平安保险（集团）股份有限公司、A&B（中国）与贵州茅台（600519） 中国平安"
  words = seg.cut(sentence)
  assert words[:4] == ["公告", "：", "中国平安保险（集团）股份有限公司", "、"]
  for word in ("A&B（中国）", "贵州茅台", "中国平安", "600519"):
    assert word in words, words
  assert "".join(words) == sentence.replace(" ", "")
  # without the dictionary the name is split (the protection is what keeps it whole)
  assert "中国平安保险（集团）股份有限公司" not in segment.make_segmenter(name).cut(sentence)
  assert segment.split_by_jieba("（集团）") and not segment.split_by_jieba("沪深300")
