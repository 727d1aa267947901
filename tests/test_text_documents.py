"""Input reading: expansion, encoding detection, formats, bad input as counted rejects."""
import os

import pytest

from bert_fin.text import clean
from bert_fin.text import raw_documents
from bert_fin.text import filters
from helpers.data_tools import EARNINGS_REPORTS

FIXTURES = os.path.join(os.path.dirname(__file__), "fixtures", "corpus")


def _read(path, **kwargs):
  reader = raw_documents.FileReader(path, **kwargs)
  return reader, list(reader)


def test_expand_inputs_dirs_globs_files_sorted_unique(tmp_path):
  (tmp_path / "sub").mkdir()
  for name in ("b.txt", "a.txt", "sub/c.html", ".hidden"):
    (tmp_path / name).write_text("x", encoding="utf-8")
  found = raw_documents.expand_inputs([str(tmp_path), str(tmp_path / "*.txt")])
  assert [os.path.relpath(p, tmp_path) for p in found] == ["a.txt", "b.txt", "sub/c.html"]
  with pytest.raises(FileNotFoundError, match="nothing.txt"):
    raw_documents.expand_inputs([str(tmp_path / "nothing.txt")])


def test_gbk_file_is_detected_and_decoded():
  reader, docs = _read(os.path.join(FIXTURES, "gbk_report.txt"))
  assert reader.encoding == "gb18030"
  assert reader.decode_errors == 0
  assert docs[0].text.startswith("中国平安（601318）")
  assert len(docs) == 2


def test_detect_encoding_variants():
  text = "宁德时代发布公告" * 10
  assert raw_documents.detect_encoding(text.encode("utf-8")) == "utf-8"
  assert raw_documents.detect_encoding(text.encode("utf-8")[:-1]) == "utf-8"  # cut character
  assert raw_documents.detect_encoding(b"\xef\xbb\xbf" + text.encode("utf-8")) == "utf-8-sig"
  assert raw_documents.detect_encoding(text.encode("gbk")) == "gb18030"
  assert raw_documents.detect_encoding(text.encode("utf-16")) == "utf-16"


def test_undecodable_bytes_are_counted_not_fatal(tmp_path):
  path = tmp_path / "mixed.txt"
  path.write_bytes("招商银行公告".encode("utf-8") * 5 + b"\xff\xfe\xfa" + "结束".encode("utf-8"))
  reader, docs = _read(str(path))
  assert reader.decode_errors == 3
  assert docs[0].text.endswith("结束")


def test_empty_and_binary_files_are_rejected_documents():
  _, empty = _read(os.path.join(FIXTURES, "empty.txt"))
  _, binary = _read(os.path.join(FIXTURES, "binary.bin"))
  assert [d.reject for d in empty] == [filters.REASON_EMPTY]
  assert [d.reject for d in binary] == [filters.REASON_BINARY]


def test_blank_line_line_and_file_formats(tmp_path):
  path = tmp_path / "docs.txt"
  path.write_text("第一篇第一行\n第一篇第二行\n\n\n第二篇\n", encoding="utf-8")
  assert [d.text for d in _read(str(path))[1]] == ["第一篇第一行\n第一篇第二行\n", "第二篇\n"]
  assert len(_read(str(path), text_format="line")[1]) == 3
  assert len(_read(str(path), text_format="file")[1]) == 1


def test_jsonl_field_bad_lines_and_html_fragments():
  _, docs = _read(os.path.join(FIXTURES, "docs.jsonl"), text_field="content")
  assert [d.reject for d in docs] == [None, filters.REASON_BAD_JSON, filters.REASON_NO_TEXT_FIELD,
                                      None]
  assert docs[3].kind == "html" and docs[0].kind == "text"
  assert [d.id for d in docs][-1].endswith("docs.jsonl#3")


def test_html_without_extension_is_parsed_as_html(tmp_path):
  path = tmp_path / "page_123"
  path.write_text("<!DOCTYPE html><html><body><style>p{}</style><p>正文</p></body></html>",
                  encoding="utf-8")
  reader, docs = _read(str(path))
  assert reader.kind == "html" and docs[0].kind == "html"


def test_unreadable_file_is_a_rejected_document(tmp_path):
  os.symlink(str(tmp_path / "missing-target"), str(tmp_path / "dangling.txt"))
  paths = raw_documents.expand_inputs([str(tmp_path)])
  reader, docs = _read(paths[0])
  assert [d.reject for d in docs] == [filters.REASON_UNREADABLE]
  assert reader.encoding == "unreadable"


def test_utf8_file_of_lines_longer_than_a_sample_is_utf8(tmp_path):
  """One JSONL document a line, each line longer than read_sample's chunks: the chunks fall
  inside lines and start mid-character; they must not vote the file "a mix of encodings"."""
  line = '{"sentences": ["%s"]}\n' % "".join(chr(0x4E00 + i % 600) for i in range(12000))
  path = tmp_path / "long_lines.jsonl"
  path.write_text(line * 20 + line[:5000], encoding="utf-8")  # the last line: no newline either
  assert len(line.encode("utf-8")) > raw_documents.SAMPLE_CHUNK_BYTES
  with open(path, "rb") as f:
    probe, samples, _ = raw_documents.read_sample(f, os.path.getsize(path))
  assert raw_documents.detect(probe, samples=samples) == ("utf-8", False)
  assert raw_documents.not_utf8_text(str(path)) is None


# ---- issue 15 item 4: one NUL byte does not make a text file binary ------------------------------
def test_a_nul_byte_near_the_start_keeps_the_text_and_counts_the_byte(tmp_path):
  path = tmp_path / "news.txt"
  path.write_bytes(b"\x00" + "\n\n".join(EARNINGS_REPORTS).encode("utf-8"))
  reader = raw_documents.FileReader(str(path))
  docs = list(reader)
  assert [d.reject for d in docs] == [None] * len(EARNINGS_REPORTS)
  assert "\x00" not in docs[0].text and docs[0].text.startswith("招商银行")
  assert reader.decode_errors == 1  # the NUL: dropped and counted
  stats = clean.clean_corpus([str(path)], str(tmp_path / "o.jsonl"))
  assert stats["documents_out"] == len(EARNINGS_REPORTS) and stats["decode_errors"] == 1


def test_real_binary_data_is_still_binary(tmp_path):
  import random  # pylint: disable=import-outside-toplevel
  rng = random.Random(0)
  noise = bytes(rng.randrange(256) for _ in range(200000))
  (tmp_path / "blob.dat").write_bytes(noise)
  # mostly text at the head, a large binary body (e.g. a text header glued to an image)
  (tmp_path / "glued.txt").write_bytes("\n".join(EARNINGS_REPORTS[:3]).encode("utf-8") + noise)
  for name in ("blob.dat", "glued.txt"):
    assert [d.reject for d in raw_documents.FileReader(str(tmp_path / name))] == \
        [filters.REASON_BINARY], name


# ---- issue 15 item 9: encoding detection beyond the first 64 KiB ---------------------------------
def test_ascii_head_then_gbk_body_decodes_as_gbk(tmp_path):
  head = ("Financial news digest, plain ASCII preamble line %d.\n" % 0) * 2000  # > 64 KiB
  assert len(head) > raw_documents.PROBE_BYTES
  body = "\n\n".join(EARNINGS_REPORTS).encode("gbk")
  path = tmp_path / "digest.txt"
  path.write_bytes(head.encode("ascii") + b"\n" + body)
  reader = raw_documents.FileReader(str(path))
  docs = list(reader)
  assert reader.decode_errors == 0
  assert reader.encoding == "gb18030"
  assert sum(d.text.startswith("招商银行") for d in docs) == len(EARNINGS_REPORTS)


@pytest.mark.parametrize("main_codec,odd_codec,detected", [("utf-8", "gbk", "utf-8"),
                                                           ("gbk", "utf-8", "gb18030")])
def test_a_line_in_the_other_codec_is_decoded_not_dropped_or_mojibake(tmp_path, main_codec,
                                                                      odd_codec, detected):
  lines = ([s.encode(main_codec) for s in EARNINGS_REPORTS[:50]]
           + [EARNINGS_REPORTS[50].encode(odd_codec)])
  path = tmp_path / "mixed.txt"
  path.write_bytes(b"\n".join(lines) + b"\n")
  reader = raw_documents.FileReader(str(path), text_format="line")
  docs = list(reader)
  assert reader.encoding == detected
  assert reader.decode_errors == 0 and reader.fallback_lines == 1
  assert [d.text.strip() for d in docs] == EARNINGS_REPORTS[:51]
  stats = clean.clean_corpus([str(path)], str(tmp_path / "o.jsonl"),
                             config=clean.CleanConfig(text_format="line"))
  assert stats["fallback_decoded_lines"] == 1
