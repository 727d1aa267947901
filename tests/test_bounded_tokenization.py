# coding=utf-8
"""A long text tokenized only as far as it is read (tokenization/bounded.py) gives the tokens of
the whole text: cut at google's word boundaries into blocks of a few characters, random texts of
every hard kind (words across many blocks, Greek final sigma, combining marks, control and
format characters, Zs spaces, CJK beside Latin) give the same head, tail and ids as tokenizing
them whole, under google's tokenizer and its fast twin; run_classifier's rows are the same."""
import random
import subprocess
import sys
import unicodedata

import numpy as np
import pytest

from helpers import REPO
from helpers import tokenizer_vocab
from bert_fin import tokenization
from bert_fin.finetune.classify import features
from bert_fin.finetune.classify import long_text
from bert_fin.finetune.classify import tasks
from bert_fin.finetune.features import inputs
from bert_fin.tokenization import bounded

PARTS = (["沪深", "股市上涨", "中国人民", "\U00020000", "\uf900", "iphone", "unaffable", "ΣΑΣ",
          "ΑΣ'Β", "ΑΣ.Β", "Α:ΣΑ", "Σ!", "a!b", "cafe\u0301", "!\u0301", "über", "İstanbul",
          "x" * 210, "a,b.c", "，。", "[MASK]", "\u200b", "\x00", "\ufffd", "\u0301", "2019年",
          "DNA", "ǅ"] +
         [" ", "  ", "\t", "\n", "\r\n", "\u3000", "\u00a0", "\u2028", "\x1c"])


def _text(rng, parts):
  return "".join(rng.choice(PARTS) for _ in range(parts))


@pytest.fixture(params=["google", "fast"])
def tokenizer(request, tmp_path):
  return tokenization.make_tokenizer(tokenizer_vocab.write_vocab(tmp_path),
                                     do_lower_case=True, fast=request.param == "fast")


def test_the_boundary_pattern_is_googles_whitespace_and_cjk_on_every_code_point():
  for cp in range(0x110000):
    char = chr(cp)
    if 0xD800 <= cp <= 0xDFFF:
      continue
    assert bool(bounded._boundary().match(char)) == bounded.is_boundary(char), hex(cp)
  assert unicodedata.category("\u3000") == "Zs" and bounded.is_boundary("\u3000")
  assert bounded.is_boundary("!") and bounded.is_boundary("，")
  assert not bounded.is_boundary(".") and not bounded.is_boundary("'")  # case-ignorable
  assert not bounded.is_boundary("a") and not bounded.is_boundary("\u200b")


@pytest.mark.parametrize("block", [1, 3, 7, 40])
def test_the_ends_and_ids_equal_the_whole_texts_tokens(tokenizer, block):
  rng = random.Random(block)
  for _ in range(60):
    text = _text(rng, rng.randint(0, 40))
    whole = tokenizer.tokenize(text)
    ids = bounded.token_ids(tokenizer, text, block)
    assert ids.dtype == np.int32 and ids.tolist() == tokenizer.convert_tokens_to_ids(whole)
    for head, tail in ((0, 0), (5, 0), (0, 5), (3, 4), (40, 40)):
      stand_in = bounded.tokenize_ends(tokenizer, text, head, tail, block)
      if len(whole) <= head + tail or bounded.OMITTED not in stand_in:  # the ends met
        assert stand_in == whole
      else:
        assert len(stand_in) == head + tail + 1 <= len(whole)
        assert stand_in[:head] == whole[:head] and stand_in[head] is bounded.OMITTED
        assert stand_in[head + 1:] == (whole[len(whole) - tail:] if tail else [])


def test_a_word_straddling_the_block_end_is_not_cut(tokenizer):
  text = "股市 unaffable 上涨"  # blocks of 6 characters end inside "unaffable" both ways
  assert tokenizer.tokenize(text) == ["股", "市", "un", "##aff", "##able", "上", "涨"]
  assert bounded.tokenize_ends(tokenizer, text, 3, 0, block=6) == [
      "股", "市", "un", bounded.OMITTED]
  assert bounded.tokenize_ends(tokenizer, text, 0, 3, block=6) == [
      bounded.OMITTED, "##able", "上", "涨"]


@pytest.mark.parametrize("mode", long_text.MODES)
def test_classifier_rows_are_those_of_the_whole_texts(tokenizer, mode, monkeypatch):
  rng = random.Random(len(mode))
  examples = [tasks.Example("e%d" % i, _text(rng, rng.randint(1, 60)),
                            _text(rng, rng.randint(1, 30)) if mode != long_text.CHUNKS and i % 3
                            else None, "a") for i in range(40)]
  options = long_text.Options(mode, None, 5, long_text.MEAN)
  monkeypatch.setattr(bounded, "BLOCK_CHARS", 1 << 30)  # every text whole, in one block
  whole = features.encode(examples, ["a", "b"], tokenizer, 16, options)
  monkeypatch.setattr(bounded, "BLOCK_CHARS", 5)
  monkeypatch.setattr(features, "GROUP_EXAMPLES", 7)
  cut = features.encode(examples, ["a", "b"], tokenizer, 16, options)
  assert cut.truncated == whole.truncated > 0
  assert cut.doc_index.tolist() == whole.doc_index.tolist()
  for name, array in whole.arrays.items():
    np.testing.assert_array_equal(cut.arrays[name], array, err_msg=name)


def test_extract_features_rows_are_those_of_the_whole_lines(tokenizer, monkeypatch):
  rng = random.Random(5)
  lines = [_text(rng, rng.randint(1, 60)).replace("|", "") + (
      " ||| " + _text(rng, rng.randint(1, 40)).replace("|", "") if i % 2 else "") + "\n"
           for i in range(30)]
  monkeypatch.setattr(bounded, "BLOCK_CHARS", 1 << 30)
  whole = inputs.encode(lines, tokenizer, 12)
  monkeypatch.setattr(bounded, "BLOCK_CHARS", 4)
  cut = inputs.encode(lines, tokenizer, 12)
  assert cut.tokens == whole.tokens and max(map(len, whole.tokens)) == 12
  for got, expected in zip(cut[1:], whole[1:]):
    np.testing.assert_array_equal(got, expected)


@pytest.mark.parametrize("len_a,len_b", [(a, b) for a in range(0, 30, 3) for b in range(0, 30, 4)])
def test_a_stand_in_longer_than_the_room_keeps_pair_counts_answer(len_a, len_b):
  room = 9
  for stand_in_a in range(room + 1, 40):
    if stand_in_a <= len_a:
      assert long_text.pair_counts(stand_in_a, len_b, room) == long_text.pair_counts(
          len_a, len_b, room)


LONG_TEXT = """
import resource, sys, time
sys.path.insert(0, %(repo)r)
resource.setrlimit(resource.RLIMIT_AS, (%(limit)d, %(limit)d))
from bert_fin import tokenization
from bert_fin.finetune.classify import features, long_text, tasks
tokenizer = tokenization.make_tokenizer(%(vocab)r, do_lower_case=True)
unit = "沪深股市上涨，iphone 2019年 "
text = unit * (%(chars)d // len(unit) + 1)
mode = sys.argv[1]
encoded = features.encode([tasks.Example("e", text, None, "a")], ["a", "b"], tokenizer, 32,
                          long_text.Options(mode, None, None, long_text.MEAN))
print(len(text), encoded.arrays["input_ids"].shape[0], encoded.truncated)
if mode == long_text.HEAD:  # extract_features' rows: a line's head; a text without spaces
  from bert_fin.finetune.features import inputs
  assert inputs.encode([text + "\\n"], tokenizer, 32).input_len.tolist() == [32]
  punctuated = features.encode([tasks.Example("p", "a!" * (%(chars)d // 2), None, "a")],
                               ["a", "b"], tokenizer, 32, long_text.DEFAULT)
  assert punctuated.truncated == 1 and punctuated.arrays["input_len"].tolist() == [32]
"""


@pytest.mark.parametrize("mode", [long_text.HEAD, long_text.TAIL, long_text.HEAD_TAIL,
                                  pytest.param(long_text.CHUNKS, marks=pytest.mark.slow)])
def test_a_5e6_character_text_stays_under_1_gb(tmp_path, mode):
  """head / tail / head_tail read two blocks (a second); chunks all 5 * 10^6 tokens (~15 s)."""
  script = tmp_path / "long.py"
  script.write_text(LONG_TEXT % dict(repo=REPO, limit=1 << 30, chars=5 * 10 ** 6,
                                     vocab=tokenizer_vocab.write_vocab(tmp_path)))
  proc = subprocess.run([sys.executable, str(script), mode], capture_output=True, text=True,
                        timeout=600)
  assert proc.returncode == 0, proc.stderr[-2000:]
  chars, rows, truncated = map(int, proc.stdout.split())
  assert chars >= 5 * 10 ** 6 and truncated == 1
  assert rows == 1 if mode != long_text.CHUNKS else rows > 10 ** 5
