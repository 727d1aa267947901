"""vocab.txt: google layout, CJK single tokens, multiple of 8, reachable pieces, extension."""
import json

from bert_fin.tokenization import vocab as vocab_lib
from bert_fin.cli import build_vocab as cli

SENTENCES = [
    "贵州茅台（600519）发布公告，营业收入增长15.2%。",
    "宁德时代（300750）的iPhone手机电池订单增长，沪深300指数上涨。",
    "招商银行（600036）净利润增长8.5%，Investors expect growth.",
    "无创DNA检测业务收入增长，公司表示“稳健经营”——前景乐观…",
] * 20


def _write_corpus(path, sentences=SENTENCES):
  with open(path, "w", encoding="utf-8") as f:
    for i in range(0, len(sentences), 2):
      f.write(json.dumps({"id": str(i), "source": "t", "sentences": sentences[i:i + 2]},
                         ensure_ascii=False) + "\n")


def test_trained_vocab_has_google_layout_and_covers_the_corpus(tmp_path, capsys):
  _write_corpus(tmp_path / "c.jsonl")
  assert cli.main(["--vocab_size", "300", "--output", str(tmp_path / "vocab.txt"),
                   str(tmp_path / "c.jsonl")]) == 0
  tokens = vocab_lib.read_vocab(tmp_path / "vocab.txt")
  assert tokens[0] == "[PAD]" and tokens[1] == "[unused1]" and tokens[99] == "[unused99]"
  assert tokens[100:106] == ["[UNK]", "[CLS]", "[SEP]", "[MASK]", "<S>", "<T>"]
  assert len(tokens) % 8 == 0 and len(tokens) <= 304 and len(set(tokens)) == len(tokens)
  for char in "茅台宁德沪深":
    assert char in tokens
  assert not any(len(t) > 1 and vocab_lib.is_cjk_token(t) for t in tokens[106:] if
                 not t.startswith("[") and not t.startswith("##"))
  tokenizer = vocab_lib.GoogleTokenizer(tokens, vocab_file=str(tmp_path / "vocab.txt"))
  rate, unk, total = vocab_lib.unk_rate(tokenizer, SENTENCES)
  assert unk == 0 and total > 0 and rate == 0.0
  assert tokenizer.pieces("iphone")[0] in tokens
  assert "[UNK] rate: 0.000000" in capsys.readouterr().out


def test_padding_to_multiple_of_8():
  tokens = vocab_lib.google_layout(["a", "b", "c"], 1000)
  assert len(tokens) == 112 and tokens[-1] == "[unused102]"


def test_extend_puts_missing_chars_into_unused_slots(tmp_path, capsys):
  base = vocab_lib.google_layout(list("0123456789abcdefghijklmnopqrstuvwxyz，。（）%") +
                                 list("贵州茅台发布公告营业收入增长宁德时代的手机电池订单"), 1000)
  (tmp_path / "base.txt").write_text("".join(t + "\n" for t in base), encoding="utf-8")
  _write_corpus(tmp_path / "c.jsonl")
  assert cli.main(["--base_vocab", str(tmp_path / "base.txt"), "--output",
                   str(tmp_path / "vocab.txt"), str(tmp_path / "c.jsonl")]) == 0
  report = json.loads(capsys.readouterr().out.split("\n")[1])
  tokens = vocab_lib.read_vocab(tmp_path / "vocab.txt")
  assert len(tokens) == len(base)
  changed = [i for i, (a, b) in enumerate(zip(base, tokens)) if a != b]
  assert changed and all(base[i].startswith("[unused") for i in changed)
  for char in "“”—…沪深":
    assert char in tokens[1:100]
  assert report["unk_rate"] < report["unk_rate_before"]
