# coding=utf-8
"""Property test: FastFullTokenizer == google FullTokenizer on thousands of random Unicode strings.

Seeded generator mixing CJK (BMP + extensions B..E, compatibility ideographs, the U+2B820 range
HF gets wrong), full-width forms, emoji, combining accents, cased Greek/Latin oddities (final
sigma, dotted I, titlecase digraphs), control and format chars (\\x00 \\t \\r U+200B U+FEFF ...),
new and old punctuation, private-use and unassigned code points, lone surrogates, long words
(around 100 and 200 chars) and vocabulary words. Compares tokens and ids through tokenize,
tokenize_batch and tokenize_words, for do_lower_case True and False.
"""
import random
import unicodedata

import pytest

from bert_fin.tokenization import fast as fast_tokenization
from bert_fin import tokenization

from helpers import tokenizer_vocab
from helpers import unicode_texts

_random_texts = unicode_texts.random_texts


@pytest.fixture(scope="module")
def vocab_file(tmp_path_factory):
  return tokenizer_vocab.write_vocab(tmp_path_factory.mktemp("vocab"))


@pytest.fixture(scope="module")
def texts():
  return _random_texts()


def test_fuzz_corpus_covers_the_hard_cases(texts):
  """Guards the generator: each difficult input class occurs often enough to be tested."""
  def count(predicate):
    return sum(1 for text in texts if predicate(text))
  assert count(lambda t: any(len(w) > 200 for w in t.split())) >= 50
  assert count(lambda t: any(100 < len(w) <= 200 for w in t.split())) >= 50
  assert count(lambda t: any(0x2B820 <= ord(c) <= 0x2B91F for c in t)) >= 20
  assert count(lambda t: any(c in "\x00\u200b\ufeff" for c in t)) >= 50
  assert count(lambda t: any(0x300 <= ord(c) <= 0x36F for c in t)) >= 100
  assert count(lambda t: "Σ" in t) >= 50
  assert count(lambda t: any(0xFF01 <= ord(c) <= 0xFF5E for c in t)) >= 100
  assert count(lambda t: any(0x1F300 <= ord(c) <= 0x1FAFF for c in t)) >= 100
  assert count(lambda t: any(c in "\u166d\U000111c9" or 0xD800 <= ord(c) <= 0xDFFF for c in t)) >= 5


@pytest.mark.parametrize("do_lower_case", [True, False])
def test_fast_equals_google_on_random_unicode(vocab_file, texts, do_lower_case):
  google = tokenization.FullTokenizer(vocab_file, do_lower_case=do_lower_case)
  fast = fast_tokenization.FastFullTokenizer(vocab_file, do_lower_case=do_lower_case)
  expected = google.tokenize_batch(texts)
  batch = fast.tokenize_batch(texts)
  mismatches = []
  for text, want, got_batch in zip(texts, expected, batch):
    got = fast.tokenize(text)
    if got != want or got_batch != want:
      mismatches.append((text, want, got, got_batch))
  assert not mismatches, "%d/%d differ; first: %r" % (len(mismatches), len(texts), mismatches[0])
  for want, got in zip(expected, batch):
    assert fast.convert_tokens_to_ids(got) == google.convert_tokens_to_ids(want)
  assert sum(len(tokens) for tokens in expected) > 20 * len(texts)
  # Only texts holding a char HF cannot match google on leave the fast path (tokenize + batch);
  # when lower-casing, Mn chars (U+111C9) are stripped before HF sees them.
  def is_fallback_char(char):
    if do_lower_case and unicodedata.category(char) == "Mn":
      return False
    return any(first <= ord(char) <= last for first, last in fast_tokenization.FALLBACK_RANGES)
  fallback_texts = sum(1 for text in texts if any(is_fallback_char(c) for c in text))
  assert fast.fallback_count == 2 * fallback_texts < len(texts) // 5


@pytest.mark.parametrize("do_lower_case", [True, False])
def test_tokenize_words_equal_on_random_segments(vocab_file, texts, do_lower_case):
  """Random segmentations (as jieba would cut) of the fuzz texts, word by word."""
  rng = random.Random(unicode_texts.SEED + 1)
  words = []
  for text in texts[:600]:
    start = 0
    while start < len(text):
      end = start + rng.randint(1, 6)
      words.append(text[start:end])
      start = end
  google = tokenization.FullTokenizer(vocab_file, do_lower_case=do_lower_case)
  fast = fast_tokenization.FastFullTokenizer(vocab_file, do_lower_case=do_lower_case)
  expected = google.tokenize_words(words)
  got = fast.tokenize_words(words)
  assert len(got) == len(words)
  mismatches = [(w, e, g) for w, e, g in zip(words, expected, got) if e != g]
  assert not mismatches, "%d/%d differ; first: %r" % (len(mismatches), len(words), mismatches[0])
  assert any(not pieces for pieces in expected) and any(len(pieces) > 1 for pieces in expected)
  for pieces in got:  # callers may mutate the lists; the word cache must not see it.
    pieces.append("##mutated")
  assert fast.tokenize_words(words) == expected  # warm cache
