"""vocab.txt: google layout, CJK single tokens, multiple of 8, reachable pieces, extension."""
import collections
import json
import os
import random
import subprocess
import sys

from bert_fin.tokenization import vocab as vocab_lib
from bert_fin.tokenization import wordpiece_trainer
from bert_fin.cli import build_vocab as cli
from helpers import REPO


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


def test_hand_worked_merges_break_ties_by_token_ids():
  # Words (lower-cased): abab x3, ab x2, ba x3, and CJK chars that stay single words.
  # Ids: a b 台 茅 (code points), ##a ##b. Pairs: (a,##b)=5 -> "ab"; then three pairs tie at 3:
  # (b,##a) (##a,##b) (ab,##a): the smallest ids (b,##a) -> "ba", then (##a,##b) -> "##ab",
  # then (ab,##ab)=3 -> "abab"; no pair is left.
  sentences = ["ABAB abab abab AB", "ab ba BA ba 茅台茅台"]
  head = len(vocab_lib.HEAD_TOKENS)
  expected = ["a", "b", "台", "茅", "##a", "##b", "ab", "ba", "##ab", "abab"]
  assert vocab_lib.train_wordpiece(sentences, head + 100) == expected
  assert vocab_lib.train_wordpiece(sentences, head + 8) == expected[:8]
  assert vocab_lib.train_wordpiece(sentences, head + 100, min_frequency=4) == expected[:7]


def _tie_heavy_corpus(path, seed=0):
  """Latin words over a small alphabet: many equal pair counts, the ties HF broke randomly."""
  rng = random.Random(seed)
  letters = "abcdefghijklmnopqrstuvwxyz0123456789"
  sentences = [" ".join("".join(rng.choice(letters) for _ in range(rng.randint(2, 7)))
                        for _ in range(12)) + " 财报显示" for _ in range(400)]
  _write_corpus(path, sentences)


def test_two_processes_write_byte_identical_vocab(tmp_path):
  _tie_heavy_corpus(tmp_path / "c.jsonl")
  outputs = []
  for hash_seed in ("1", "2"):
    output = tmp_path / ("vocab%s.txt" % hash_seed)
    env = dict(os.environ, PYTHONHASHSEED=hash_seed, PYTHONPATH=REPO)
    subprocess.run([sys.executable, os.path.join(REPO, "tools", "build_vocab.py"), "--vocab_size",
                    "1000", "--output", str(output), str(tmp_path / "c.jsonl")],
                   check=True, env=env, stdout=subprocess.DEVNULL)
    outputs.append(output.read_bytes())
  assert len(outputs[0].splitlines()) > 400  # merges were learned, not just characters
  assert outputs[0] == outputs[1]


def _naive_bpe(word_counts, vocab_size, min_frequency):
  """Reference: recounts every pair before each merge (same ids and tie rule, no index)."""
  chars = sorted({c for w in word_counts for c in w})
  words = {w: [c if i == 0 else "##" + c for i, c in enumerate(w)] for w in word_counts}
  tokens = chars + sorted({s for symbols in words.values() for s in symbols[1:]})
  while len(tokens) < vocab_size:
    counts = collections.Counter()
    for w, symbols in words.items():
      for pair in zip(symbols, symbols[1:]):
        counts[pair] += word_counts[w]
    if not counts:
      break
    ids = {t: i for i, t in enumerate(tokens)}
    (left, right), count = min(counts.items(), key=lambda kv: (-kv[1], ids[kv[0][0]], ids[kv[0][1]]))
    if count < min_frequency:
      break
    new = left + right[2:] if right.startswith("##") else left + right
    if new not in ids:
      tokens.append(new)
    for w, symbols in words.items():
      merged, i = [], 0
      while i < len(symbols):
        if symbols[i:i + 2] == [left, right]:
          merged.append(new)
          i += 2
        else:
          merged.append(symbols[i])
          i += 1
      words[w] = merged
  return tokens


def test_incremental_pair_counts_match_a_full_recount():
  rng = random.Random(3)
  word_counts = collections.Counter(
      "".join(rng.choice("aab") for _ in range(rng.randint(1, 9))) for _ in range(300))
  for vocab_size, min_frequency in ((60, 2), (200, 1)):
    assert (wordpiece_trainer.train(word_counts, vocab_size, (), min_frequency) ==
            _naive_bpe(word_counts, vocab_size, min_frequency))
