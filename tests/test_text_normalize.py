"""Each normalisation rule of bert_fin.text.normalize, alone and composed."""
import unicodedata

from bert_fin.text import normalize


def test_unescape_html_entities_decodes_complete_entities_only():
  assert normalize.unescape_html_entities("A&amp;B&nbsp;涨&#12290;&ldquo;好&rdquo;") == "A&B\u00a0涨。“好”"
  assert normalize.unescape_html_entities("R&D; &notice &unknownname; 5&6") == (
      "R&D; &notice &unknownname; 5&6")


def test_remove_private_use_drops_bmp_and_plane_15_pua():
  assert normalize.remove_private_use("买\ue000入\uf8ff评\U000f0001级") == "买入评级"


def test_remove_invalid_code_points_drops_unassigned_and_noncharacters():
  unassigned = next(chr(cp) for cp in range(0x0378, 0x10000)
                    if unicodedata.category(chr(cp)) == "Cn")
  text = "涨%s停\ufffe\uffff" % unassigned
  assert normalize.remove_invalid_code_points(text) == "涨停"
  assert normalize.remove_invalid_code_points("正常文本 ABC，。") == "正常文本 ABC，。"


def test_remove_control_chars_keeps_line_breaks():
  assert normalize.remove_control_chars("a\x00b\x07c\r\nd\re\tf\x85") == "abc\nd\ne f"


def test_remove_zero_width():
  assert normalize.remove_zero_width("\ufeff招\u200b商\u200d银\u00ad行\u2060") == "招商银行"


def test_fullwidth_letters_digits_space_become_ascii_but_chinese_punctuation_stays():
  assert normalize.fullwidth_to_halfwidth("ｉＰｈｏｎｅ１５　手机") == "iPhone15 手机"
  assert normalize.fullwidth_to_halfwidth("增长８．５％") == "增长8.5%"
  kept = "，。！？：；、（）“”《》"
  assert normalize.fullwidth_to_halfwidth(kept) == kept


def test_collapse_whitespace_keeps_paragraphs_single_spaced():
  text = "  第一段  有   空格 \n\n\n  第二段\u3000\u00a0结束 \n \n"
  assert normalize.collapse_whitespace(text) == "第一段 有 空格\n第二段 结束"


def test_normalize_text_applies_every_rule():
  raw = "&nbsp;\ufeff宁德时代\u200b（３００７５０）\ue123 涨停！\r\n\r\n\x07下一段\t\tＯＫ"
  assert normalize.normalize_text(raw) == "宁德时代（300750） 涨停！\n下一段 OK"
  assert normalize.normalize_text("") == ""
