"""HTML -> text: non-text elements removed with content, blocks kept apart, entities decoded."""
import os

from bert_fin.text import html
from bert_fin.text import normalize

FIXTURES = os.path.join(os.path.dirname(__file__), "fixtures", "corpus")


def _page_text(**kwargs):
  with open(os.path.join(FIXTURES, "page.html"), encoding="utf-8") as f:
    return normalize.normalize_text(html.html_to_text(f.read(), **kwargs))


def test_script_style_noscript_iframe_do_not_leak():
  text = _page_text()
  for leaked in ("color", "#ff0000", "tracker", "function", "请启用脚本", "广告内容", "margin"):
    assert leaked not in text


def test_blocks_become_separate_lines_and_entities_are_decoded():
  lines = _page_text().split("\n")
  assert lines[0] == "贵州茅台发布季度报告"
  assert any(line.startswith("贵州茅台（600519）今日公告称") for line in lines)
  assert "公司表示“将继续稳健经营”，分析师认为业绩符合预期。" in lines
  assert all("&" not in line for line in lines)
  assert len(lines) >= 4


def test_navigation_and_footer_are_reducible():
  assert "首页" not in _page_text()
  assert "免责声明" not in _page_text()
  kept = _page_text(drop_boilerplate=False)
  assert "首页" in kept and "免责声明" in kept


def test_table_rows_are_lines_or_dropped():
  markup = "<p>正文</p><table><tr><td>代码</td><td>600519</td></tr><tr><td>名称</td><td>贵州茅台</td></tr></table>"
  text = normalize.normalize_text(html.html_to_text(markup))
  assert text.split("\n") == ["正文", "代码 600519", "名称 贵州茅台"]
  assert normalize.normalize_text(html.html_to_text(markup, drop_tables=True)) == "正文"


def test_inline_elements_do_not_break_lines():
  text = normalize.normalize_text(html.html_to_text("<p>招商<b>银行</b><a href='#'>公告</a></p>"))
  assert text == "招商银行公告"


def test_navigation_link_tables_are_dropped_but_text_with_links_stays():
  markup = ("<table><tr><td><a href='/'>首页</a></td><td><a href='/s'>股票</a></td>"
            "<td><a href='/f'>基金</a></td></tr></table>"
            "<p>详见<a href='/a'>公告</a>，公司业绩增长明显，<a href='/b'>点击</a>，<a href='/c'>查看</a>。</p>")
  assert normalize.normalize_text(html.html_to_text(markup)) == "详见公告，公司业绩增长明显，点击，查看。"
  kept = normalize.normalize_text(html.html_to_text(markup, drop_boilerplate=False))
  assert kept.startswith("首页 股票 基金")
