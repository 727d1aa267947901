"""Noise filters: hash/URL runs, CJK ratio, minimum length, duplicates, boilerplate lines."""
from bert_fin.text import filters


def test_hash_like_run_is_removed_but_words_and_numbers_stay():
  text, removed = filters.remove_noise_runs("公告3frfd44ee233ddfs/详见，比例3.5%，internationalization")
  assert text == "公告详见，比例3.5%，internationalization"
  assert removed == 1


def test_base64_and_urls_are_removed_and_counted():
  text, removed = filters.remove_noise_runs(
      "原文 https://example.com/a?b=1 数据 aGVsbG8gd29ybGQgaGVsbG8gd29ybGQ= 结束")
  assert "http" not in text and "aGVsbG8" not in text
  assert removed == 2
  text, removed = filters.remove_noise_runs("原文 https://example.com 结束", remove_urls=False,
                                            min_run=0)
  assert "https://example.com" in text and removed == 0


def test_run_length_threshold_is_configurable():
  short_hash = "ab12cd34ef"  # 10 chars
  assert filters.remove_noise_runs("前" + short_hash + "后", min_run=16)[0] == "前" + short_hash + "后"
  assert filters.remove_noise_runs("前" + short_hash + "后", min_run=8)[0] == "前后"


def test_cjk_ratio_and_rejections():
  config = filters.FilterConfig(min_chars=5, min_cjk_ratio=0.5)
  assert filters.cjk_ratio("沪深300") == 0.4
  assert filters.first_rejection("", config) == filters.REASON_EMPTY
  assert filters.first_rejection("短文。", config) == filters.REASON_TOO_SHORT
  assert filters.first_rejection("Apple iPhone 手机", config) == filters.REASON_LOW_CJK_RATIO
  assert filters.first_rejection("贵州茅台发布公告。", config) is None
  off = filters.FilterConfig(min_chars=0, min_cjk_ratio=0)
  assert filters.first_rejection("OK", off) is None


def test_is_cjk_char_matches_google_ranges():
  assert filters.is_cjk_char("茅") and filters.is_cjk_char("\U00020000")
  assert not filters.is_cjk_char("，") and not filters.is_cjk_char("a")


def test_duplicate_filter_uses_8_byte_digests():
  duplicates = filters.DuplicateFilter()
  digest = filters.digest64("同一篇文章")
  assert len(digest) == 8
  assert not duplicates.seen(digest)
  assert duplicates.seen(filters.digest64("同一篇文章"))
  assert not duplicates.seen(filters.digest64("另一篇文章"))
  assert len(duplicates) == 2


def test_boilerplate_lines_are_removed():
  frequent = {filters.line_digest("免责声明：本文仅供参考。")}
  text, removed = filters.remove_boilerplate_lines("正文一\n免责声明：本文仅供参考。\n正文二", frequent)
  assert text == "正文一\n正文二" and removed == 1
