# coding=utf-8
"""`FastFullTokenizer`: HF `tokenizers` (Rust) twin of google's FullTokenizer, identical output.

Pipeline for one text (each step chosen so the result equals google's, see google.py):
  1. Python, C-speed string ops: drop Cc/Cf chars, U+0000 and U+FFFD (google's `_clean_text`);
     if lower-casing: str.lower(), NFD, drop Mn (google's lower + `_run_strip_accents`, done with
     the SAME Python/unicodedata functions, so casing rules such as the final sigma agree).
  2. Python: put spaces around the chars google splits off but HF's Rust tables do not
     (`RESPACE_RANGES`: the CJK Ext-E code points U+2B820..U+2B91F that HF's `is_chinese_char`
     skips, and punctuation newer than HF's Unicode tables).
  3. HF: BertNormalizer(clean_text=False, handle_chinese_chars=True, strip_accents=False,
     lowercase=False) -> BertPreTokenizer -> WordPiece(max_input_chars_per_word=200, "##",
     "[UNK]"), no special tokens, so "[MASK]" in text is split like google does.

Differences HF cannot be configured out of are listed in `FALLBACK_RANGES` (chars HF splits off
but google keeps inside a word, e.g. U+166D, U+111C9; lone surrogates, which Rust strings cannot
hold). A text containing one is tokenized by the faithful google code instead (one regex search
per text decides). Why step 1 is in Python: HF's BertNormalizer strips accents BEFORE lower-casing
and lower-cases char by char (so "ΣΑΣ" gives "σασ", google "σας"), and its `clean_text` also
deletes private-use (Co) chars that google keeps. Why max_input_chars_per_word is set: HF's default
is 100, google's 200.

The tables were probed from tokenizers==TABLES_PROBED_WITH[0] and Unicode TABLES_PROBED_WITH[1]
(Python's unicodedata); with any other version they are re-probed at first use (~3 s, logged).
`probe_char_classes()` re-derives them; tests/test_tokenization.py checks them for all code points.
"""
import itertools
import logging
import re
import unicodedata

import tokenizers
from tokenizers import models
from tokenizers import normalizers
from tokenizers import pre_tokenizers

from bert_fin.tokenization import google
from bert_fin.tokenization import special_tokens
from bert_fin.tokenization import unicode_tables

TABLES_PROBED_WITH = ("0.23.3", "14.0.0")

# (first, last) code points, inclusive; derived by probe_char_classes() for TABLES_PROBED_WITH.
RESPACE_RANGES = (
    (0x061D, 0x061D), (0x09FD, 0x09FD), (0x0A76, 0x0A76), (0x0C77, 0x0C77), (0x0C84, 0x0C84),
    (0x1B7D, 0x1B7E), (0x2E43, 0x2E4F), (0x2E52, 0x2E5D), (0x10EAD, 0x10EAD), (0x10F55, 0x10F59),
    (0x10F86, 0x10F89), (0x1144B, 0x1144F), (0x1145A, 0x1145B), (0x1145D, 0x1145D),
    (0x11660, 0x1166C), (0x116B9, 0x116B9), (0x1183B, 0x1183B), (0x11944, 0x11946),
    (0x119E2, 0x119E2), (0x11A3F, 0x11A46), (0x11A9A, 0x11A9C), (0x11A9E, 0x11AA2),
    (0x11C41, 0x11C45), (0x11C70, 0x11C71), (0x11EF7, 0x11EF8), (0x11FFF, 0x11FFF),
    (0x12FF1, 0x12FF2), (0x16E97, 0x16E9A), (0x16FE2, 0x16FE2), (0x1E95E, 0x1E95F),
    (0x2B820, 0x2B91F),
)
FALLBACK_RANGES = ((0x166D, 0x166D), (0xD800, 0xDFFF), (0x111C9, 0x111C9))

_MAX_CP = 0x10FFFF
_WORD_CACHE_SIZE = 1 << 18  # distinct words cached by tokenize_words


def _ranges_from_code_points(code_points):
  """Code points (any order, repeats allowed) -> tuple of inclusive (first, last) runs."""
  ranges = []
  for cp in sorted(set(code_points)):
    if ranges and ranges[-1][1] == cp - 1:
      ranges[-1][1] = cp
    else:
      ranges.append([cp, cp])
  return tuple((first, last) for first, last in ranges)


def _class_pattern(ranges):
  parts = []
  for first, last in ranges:
    parts.append(re.escape(chr(first)))
    if last != first:
      parts.append("-" + re.escape(chr(last)))
  return "[%s]" % "".join(parts)


def _char_class_regex(ranges):
  """A compiled regex matching any one char in the inclusive code point `ranges`.

  The BMP part compiles to a bitmap; the astral part (a linear range list in `re`) sits behind a
  one-range look-ahead, so BMP-only text never scans it.
  """
  bmp = [(first, min(last, 0xFFFF)) for first, last in ranges if first <= 0xFFFF]
  astral = [(max(first, 0x10000), last) for first, last in ranges if last > 0xFFFF]
  alternatives = []
  if bmp:
    alternatives.append(_class_pattern(bmp))
  if astral:
    alternatives.append("(?=[\U00010000-\U0010FFFF])" + _class_pattern(astral))
  return re.compile("|".join(alternatives) or "(?!)")


def _hf_normalizer():
  return normalizers.BertNormalizer(
      clean_text=False, handle_chinese_chars=True, strip_accents=False, lowercase=False)


def probe_char_classes():
  """Compares, for every code point, google's split class with HF's; returns the two range tables.

  A char of the pre-normalised text is, for google, "space" (str.split() whitespace), "isolate"
  (CJK or punctuation: becomes its own token) or "word"; for HF likewise from handle_chinese_chars
  and BertPreTokenizer. Google-isolate/HF-word chars go to RESPACE, HF-isolate-or-space/google-word
  chars to FALLBACK. Google-space/HF-other chars would need another table; none exist (asserted).

  Returns:
    (respace_ranges, fallback_ranges), tuples of inclusive (first, last) code points; FALLBACK
    also always holds the surrogates U+D800..U+DFFF.
  """
  code_points = [cp for cp in range(_MAX_CP + 1) if not 0xD800 <= cp <= 0xDFFF]
  text = "".join(map(chr, code_points))
  # HF CJK: handle_chinese_chars turns c into " c ".
  spaced = _hf_normalizer().normalize_str(text)
  hf_cjk = {ord(m.group(1)) for m in re.finditer(" ([^ ]) ", spaced)}
  if len(spaced) != len(text) + 2 * len(hf_cjk):
    raise RuntimeError("HF BertNormalizer changed more than CJK spacing; re-check the design")
  # HF pre-tokenizer: probe "x c x c ... x"; c at odd position 2k+1.
  probe = "x" + "x".join(map(chr, code_points)) + "x"
  pieces = pre_tokenizers.BertPreTokenizer().pre_tokenize_str(probe)
  hf_punct, hf_space = set(), set()
  covered_until = 0
  for _, (start, end) in pieces:
    hf_space.update(code_points[(p - 1) // 2] for p in range(covered_until, start) if p % 2)
    if end - start == 1 and start % 2:
      hf_punct.add(code_points[(start - 1) // 2])
    covered_until = end
  hf_space.update(code_points[(p - 1) // 2] for p in range(covered_until, len(probe)) if p % 2)
  respace, fallback = [], []
  for cp in code_points:
    char = chr(cp)
    if cp in (0, 0xFFFD) or google.is_control(char):
      continue  # removed in Python before HF sees the text.
    google_space = char.isspace()
    google_isolate = google.is_chinese_char(cp) or google.is_punctuation(char)
    hf_isolate = cp in hf_cjk or cp in hf_punct
    if google_space and cp not in hf_space:
      raise RuntimeError("U+%04X is whitespace for google but not for HF" % cp)
    if google_isolate and not hf_isolate:
      respace.append(cp)
    elif not google_space and not google_isolate and (hf_isolate or cp in hf_space):
      fallback.append(cp)
    elif google_isolate and cp in hf_space:
      fallback.append(cp)
  fallback.extend(range(0xD800, 0xDFFF + 1))
  return _ranges_from_code_points(respace), _ranges_from_code_points(fallback)


def category_ranges():
  """(drop, marks) inclusive code point ranges from this Python's unicodedata (~0.3 s): drop = what
  google's _clean_text removes (NUL, U+FFFD, Cc/Cf except tab, LF, CR), marks = Mn (what accent
  stripping removes after NFD). unicode_tables.py stores them for UNIDATA_VERSION."""
  # one C-level pass over every code point (a Python loop body per code point costs ~0.5 s)
  categories = list(map(unicodedata.category, map(chr, range(_MAX_CP + 1))))
  drop = [0, 0xFFFD] + [cp for cp in itertools.compress(
      range(_MAX_CP + 1), map({"Cc", "Cf"}.__contains__, categories)) if cp not in (9, 10, 13)]
  marks = list(itertools.compress(range(_MAX_CP + 1), map("Mn".__eq__, categories)))
  return _ranges_from_code_points(drop), _ranges_from_code_points(marks)


class _CharTables(object):
  """Compiled regexes of the pre-normalisation (built once per process: ~20 ms with the stored
  category ranges of unicode_tables.py, ~0.3 s when this Python's Unicode version differs)."""

  def __init__(self):
    if unicodedata.unidata_version == unicode_tables.UNIDATA_VERSION:
      drop, marks = unicode_tables.DROP_RANGES, unicode_tables.MARK_RANGES
    else:
      drop, marks = category_ranges()
    respace, fallback = RESPACE_RANGES, FALLBACK_RANGES
    versions = (tokenizers.__version__, unicodedata.unidata_version)
    if versions != TABLES_PROBED_WITH:
      logging.warning("tokenizers/Unicode versions %s differ from %s: re-probing char classes",
                      versions, TABLES_PROBED_WITH)
      respace, fallback = probe_char_classes()
    self.drop = _char_class_regex(drop)
    self.marks = _char_class_regex(marks)
    self.respace = _char_class_regex(respace)
    self.fallback = _char_class_regex(fallback)
    self.respace_or_fallback = _char_class_regex(tuple(respace) + tuple(fallback))


_tables = None


def _get_tables():
  global _tables
  if _tables is None:
    _tables = _CharTables()
  return _tables


_ASCII_DROP = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")


class FastFullTokenizer(object):
  """Same API and output as google.FullTokenizer, with WordPiece in Rust (HF tokenizers).

  Attributes: vocab (OrderedDict token -> id), inv_vocab, do_lower_case, fallback_count (texts or
  words that contained a FALLBACK char and went through the faithful tokenizer). One instance per
  thread: tokenize_words keeps a word cache.
  """

  def __init__(self, vocab_file, do_lower_case=True):
    self._faithful = google.FullTokenizer(vocab_file, do_lower_case=do_lower_case)
    self.vocab = self._faithful.vocab
    self.inv_vocab = self._faithful.inv_vocab
    self.do_lower_case = do_lower_case
    if special_tokens.UNK not in self.vocab:
      raise ValueError("%s has no %s token; WordPiece needs one" %
                       (vocab_file, special_tokens.UNK))
    wordpiece = models.WordPiece(
        vocab=dict(self.vocab), unk_token=special_tokens.UNK,
        max_input_chars_per_word=google.MAX_INPUT_CHARS_PER_WORD)
    wordpiece.continuing_subword_prefix = "##"
    self._hf = tokenizers.Tokenizer(wordpiece)
    self._hf.normalizer = _hf_normalizer()
    self._hf.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    self._tables = _get_tables()
    self.fallback_count = 0
    self._word_cache = {}

  def prenormalize(self, text):
    """Step 1 + 2 of the module docstring: returns (text for HF, needs_faithful_fallback)."""
    text = google.convert_to_unicode(text)
    if text.isascii():
      text = _ASCII_DROP.sub("", text)
      return (text.lower() if self.do_lower_case else text), False
    tables = self._tables
    text = tables.drop.sub("", text)
    if self.do_lower_case:
      text = tables.marks.sub("", unicodedata.normalize("NFD", text.lower()))
    if not tables.respace_or_fallback.search(text):  # the common case: one search.
      return text, False
    if tables.fallback.search(text):
      return text, True
    return tables.respace.sub(r" \g<0> ", text), False

  def tokenize(self, text):
    """Returns the word pieces (list of str) of `text`; equal to FullTokenizer.tokenize."""
    normalized, fallback = self.prenormalize(text)
    if fallback:
      self.fallback_count += 1
      return self._faithful.tokenize(text)
    return self._hf.encode(normalized, add_special_tokens=False).tokens

  def words(self, text):
    """The words of `text` before WordPiece: google.BasicTokenizer.tokenize(text) (cleaned,
    lower-cased and accent-stripped when do_lower_case, split on whitespace and punctuation, one
    word per CJK ideograph), on the fast path when it can be taken."""
    normalized, fallback = self.prenormalize(text)
    if fallback:
      self.fallback_count += 1
      return self._faithful.basic_tokenizer.tokenize(text)
    normalized = self._hf.normalizer.normalize_str(normalized)
    return [word for word, _ in self._hf.pre_tokenizer.pre_tokenize_str(normalized)]

  def tokenize_batch(self, texts):
    """Returns one list of word pieces per text (HF encode_batch over the fast-path texts)."""
    texts = [google.convert_to_unicode(text) for text in texts]
    prepared = [self.prenormalize(text) for text in texts]
    fast_inputs = [normalized for normalized, fallback in prepared if not fallback]
    encodings = iter(self._encode_batch(fast_inputs))
    output = []
    for text, (_, fallback) in zip(texts, prepared):
      if fallback:
        self.fallback_count += 1
        output.append(self._faithful.tokenize(text))
      else:
        output.append(next(encodings))
    return output

  def tokenize_words(self, words):
    """Tokenizes each word independently (one list of pieces per word, maybe empty).

    Distinct unseen words go through one HF encode of the pre-tokenized list (pieces grouped back
    by word id), so a word gets exactly the pieces FullTokenizer.tokenize(word) gives; results are
    cached per word (words repeat a lot: "的", "，").
    """
    words = [word if type(word) is str else google.convert_to_unicode(word) for word in words]
    distinct = dict.fromkeys(words)
    cache = self._word_cache
    missing = [word for word in distinct if word not in cache]
    if missing:
      if len(cache) + len(missing) > _WORD_CACHE_SIZE:
        cache.clear()
        missing = list(distinct)
      for word, pieces in zip(missing, self._tokenize_distinct_words(missing)):
        cache[word] = tuple(pieces)
    return [list(cache[word]) for word in words]

  def _tokenize_distinct_words(self, words):
    output = [[] for _ in words]
    fast_words, fast_index = [], []
    for index, word in enumerate(words):
      normalized, fallback = self.prenormalize(word)
      if fallback:
        self.fallback_count += 1
        output[index] = self._faithful.tokenize(word)
      else:
        fast_words.append(normalized)
        fast_index.append(index)
    if fast_words:
      encoding = self._hf.encode(fast_words, is_pretokenized=True, add_special_tokens=False)
      for token, word_id in zip(encoding.tokens, encoding.word_ids):
        output[fast_index[word_id]].append(token)
    return output

  def _encode_batch(self, texts):
    """Word pieces of each text via HF encode_batch_fast (ids only, no offsets: faster)."""
    if not texts:
      return []
    if not hasattr(self._hf, "encode_batch_fast"):
      encodings = self._hf.encode_batch(texts, add_special_tokens=False)
      return [encoding.tokens for encoding in encodings]
    inv_vocab = self.inv_vocab
    encodings = self._hf.encode_batch_fast(texts, add_special_tokens=False)
    return [[inv_vocab[token_id] for token_id in encoding.ids] for encoding in encodings]

  def convert_tokens_to_ids(self, tokens):
    return google.convert_by_vocab(self.vocab, tokens)

  def convert_ids_to_tokens(self, ids):
    return google.convert_by_vocab(self.inv_vocab, ids)
