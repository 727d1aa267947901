"""Chinese / mixed sentence splitting."""
from bert_fin.text import sentences


def test_splits_after_terminators_and_their_runs():
  assert sentences.split_sentences("涨了。真的吗？？是的……好吧！") == [
      "涨了。", "真的吗？？", "是的……", "好吧！"]


def test_closing_quotes_stay_with_the_sentence():
  assert sentences.split_sentences("他说：“涨停！”随后回落。") == ["他说：“涨停！”", "随后回落。"]
  assert sentences.split_sentences("（见附注。）下文") == ["（见附注。）", "下文"]


def test_decimals_and_abbreviations_do_not_split():
  assert sentences.split_sentences("股价上涨3.5%，市值1.2万亿元。") == ["股价上涨3.5%，市值1.2万亿元。"]
  assert sentences.split_sentences("Apple Inc. sold more. Revenue rose!") == [
      "Apple Inc. sold more.", "Revenue rose!"]


def test_paragraphs_never_share_a_sentence():
  assert sentences.split_sentences("第一段没有句号\n第二段。") == ["第一段没有句号", "第二段。"]


def test_long_sentence_is_cut_at_comma_or_max_length():
  text = "甲" * 30 + "，" + "乙" * 30 + "。"
  pieces = sentences.split_sentences(text, max_chars=40)
  assert pieces == ["甲" * 30 + "，", "乙" * 30 + "。"]
  hard = sentences.split_sentences("丙" * 100, max_chars=40)
  assert [len(p) for p in hard] == [40, 40, 20] and "".join(hard) == "丙" * 100


def test_joining_sentences_gives_back_the_paragraph():
  text = "招商银行（600036）公告：净利润增长8.5%；不良率下降。管理层表示“稳中求进”！展望……乐观"
  assert "".join(sentences.split_sentences(text)) == text
