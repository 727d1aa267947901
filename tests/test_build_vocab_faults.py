"""build_vocab on faulty input (found in issues 15 and 24): the most frequent characters are kept
whatever their code points; google's text format and a JSONL text field are read, a missing field
is refused naming --text_field; binary, GBK or empty input is one line and exit 2 with nothing
written; a base vocab with a byte order mark is read. Tiny generated data."""
import json
import os

import pytest

from bert_fin.cli import build_vocab as vocab_cli
from helpers import PRETRAINING_FIXTURES
from helpers.data_tools import ANNOUNCEMENTS, EARNINGS_REPORTS, one_error_line, write_jsonl

VOCAB = os.path.join(PRETRAINING_FIXTURES, "vocab.txt")


# ---- issue 15 item 7: the most frequent characters, the input formats ----------------------------
def _vocab_corpus(path, rare_chars):
  frequent = "，。的公司增长"
  docs = [{"id": str(i), "sentences": ["%s%s" % (frequent * 3, rare_chars[i % len(rare_chars)])]}
          for i in range(300)]
  with open(path, "w", encoding="utf-8") as f:
    for doc in docs:
      f.write(json.dumps(doc, ensure_ascii=False) + "\n")


def test_build_vocab_keeps_the_most_frequent_characters(tmp_path, capsys):
  rare = "".join(chr(0x4e00 + i) for i in range(200))  # low code points, each seen rarely
  _vocab_corpus(tmp_path / "c.jsonl", rare)
  assert vocab_cli.main(["--vocab_size", "160", "--output", str(tmp_path / "v.txt"),
                         str(tmp_path / "c.jsonl")]) == 0
  tokens = open(tmp_path / "v.txt", encoding="utf-8").read().split("\n")
  for char in "，。的公司增长":  # ，(U+FF0C) and 。(U+3002) sort after most CJK by code point
    assert char in tokens, char
  capsys.readouterr()


def test_build_vocab_reads_google_text_and_a_text_field(tmp_path, capsys):
  text = "\n\n".join("\n".join(EARNINGS_REPORTS[i:i + 3]) for i in range(0, 60, 3))
  (tmp_path / "g.txt").write_text(text, encoding="utf-8")
  assert vocab_cli.main(["--vocab_size", "300", "--output", str(tmp_path / "v1.txt"),
                         str(tmp_path / "g.txt")]) == 0
  out = capsys.readouterr().out
  assert "[UNK] rate: 0.000000" in out
  with open(tmp_path / "raw.jsonl", "w", encoding="utf-8") as f:
    for sentence in EARNINGS_REPORTS[:60]:
      f.write(json.dumps({"text": sentence}, ensure_ascii=False) + "\n")
  # the default field is `sentences`: refused, naming the field and the fix
  assert vocab_cli.main(["--vocab_size", "300", "--output", str(tmp_path / "v2.txt"),
                         str(tmp_path / "raw.jsonl")]) == 2
  err = capsys.readouterr().err
  assert "sentences" in err and "--text_field" in err and "Traceback" not in err
  assert not os.path.exists(tmp_path / "v2.txt")
  assert vocab_cli.main(["--vocab_size", "300", "--text_field", "text", "--output",
                         str(tmp_path / "v2.txt"), str(tmp_path / "raw.jsonl")]) == 0
  tokens = open(tmp_path / "v2.txt", encoding="utf-8").read().split()
  assert "招" in tokens and "稳" in tokens


# ---- issue 24 item 10: binary, GBK or empty input, a base vocab with a BOM -----------------------
@pytest.mark.parametrize("name,content,expected", [
    ("blob.jsonl", bytes(range(256)) * 40, "is binary, not text"),
    ("gbk.txt", "\n\n".join(ANNOUNCEMENTS).encode("gbk"), "is not UTF-8 (looks like gb18030)"),
    ("empty.txt", b"\n\n", "no text in"),
])
def test_build_vocab_refuses_input_it_would_misread(tmp_path, capsys, name, content, expected):
  (tmp_path / name).write_bytes(content)
  out = tmp_path / "vocab.txt"
  assert vocab_cli.main(["--vocab_size", "200", "--output", str(out), str(tmp_path / name)]) == 2
  assert expected in one_error_line(capsys.readouterr().err, "build_vocab")
  assert not out.exists()


def test_build_vocab_extends_a_base_vocab_with_a_byte_order_mark(tmp_path, capsys):
  corpus = tmp_path / "c.jsonl"
  write_jsonl(corpus, [{"sentences": [s]} for s in ANNOUNCEMENTS])
  with open(VOCAB, "rb") as f:
    (tmp_path / "bom.txt").write_bytes(b"\xef\xbb\xbf" + f.read())
  out = tmp_path / "vocab.txt"
  assert vocab_cli.main(["--base_vocab", str(tmp_path / "bom.txt"), "--output", str(out),
                         str(corpus)]) == 0
  assert out.read_text(encoding="utf-8").split("\n")[0] == "[PAD]"  # no BOM in the token
