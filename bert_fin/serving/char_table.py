# coding=utf-8
"""google's BasicTokenizer as per-code-point tables, for the tokenizer inside a serving graph.

google's BasicTokenizer (tokenization/google.py) decides everything a character at a time except
two context rules, so a table over every code point reproduces it:
  DROP     U+0000, U+FFFD and control/format chars (Cc, Cf but \\t \\n \\r): deleted;
  SPACE    google's whitespace (space, \\t \\n \\r, Zs) and what str.split() splits on (U+2028,
           U+2029, ...): ends a word, kept nowhere;
  CJK      google's CJK ideographs: a word of its own;
  PUNCT    google's punctuation (ASCII non-alphanumerics, P*): a word of its own; read on the
           character AFTER lower-casing (google splits punctuation after lower / strip accents);
and, when lower-casing, `mapping`: what str.lower() -> NFD -> drop Mn turns each character into
(zero, one or several characters; only those that change are listed), and the two classes of
str.lower()'s final-sigma rule ("Σ" becomes "ς" after a CASED character and before none, looking
through CASE_IGNORABLE ones), read off str.lower() itself; graph_tokenizer.py applies the rule.
The one rule a table cannot hold, where the graph tokenizer differs from google's: the canonical
reordering of NFD among combining marks that are not Mn (a few Mc marks with a combining class).
"""
import collections
import functools
import unicodedata

import numpy as np

from bert_fin.tokenization import google

DROP, SPACE, CJK, PUNCT = 1, 2, 4, 8  # bit flags of `flags`
CASED, CASE_IGNORABLE = 16, 32  # the final-sigma rule's classes (lower-casing tables only)
CAPITAL_SIGMA, FINAL_SIGMA = 0x03A3, 0x03C2
NUM_CODE_POINTS = 0x110000

CharTable = collections.namedtuple("CharTable", ["flags", "mapping"])
CharTable.__doc__ = """flags: uint8 [NUM_CODE_POINTS], DROP | SPACE | CJK | PUNCT bits of each
code point (and CASED | CASE_IGNORABLE when lower-casing); mapping: {code point: tuple of code
points} of the characters lower-casing changes (empty when the tokenizer keeps case)."""


def _flags_of(char):
  cp = ord(char)
  if cp == 0 or cp == 0xFFFD or google.is_control(char):
    return DROP
  flags = 0
  if google.is_whitespace(char) or char.isspace():
    flags |= SPACE
  if google.is_chinese_char(cp):
    flags |= CJK
  if google.is_punctuation(char):
    flags |= PUNCT
  return flags


def sigma_class(char):
  """CASE_IGNORABLE, CASED or 0: how str.lower()'s final-sigma rule reads `char` (a character
  both cased and case-ignorable is looked through: CASE_IGNORABLE)."""
  if unicodedata.category(char) in ("Cn", "Co"):  # unassigned, private use: neither
    return 0
  if (chr(0x391) + char + chr(CAPITAL_SIGMA)).lower()[-1] != chr(FINAL_SIGMA):
    return 0  # neither looked through nor cased: "ΑcΣ" keeps σ
  if (char + chr(CAPITAL_SIGMA)).lower()[-1] == chr(FINAL_SIGMA):
    return CASED
  return CASE_IGNORABLE


def lowered(char):
  """google's lower-casing of one character: str.lower(), NFD, non-spacing marks (Mn) dropped."""
  text = unicodedata.normalize("NFD", char.lower())
  return "".join(c for c in text if unicodedata.category(c) != "Mn")


@functools.lru_cache(maxsize=2)
def build(do_lower_case):
  """The CharTable of google's BasicTokenizer(do_lower_case) (~2 s: every code point once;
  kept for the process).

  Raises:
    RuntimeError: a Unicode version where lower-casing turns a CJK ideograph into other than one
      character, or a word character into whitespace (the graph's word splitting assumes neither).
  """
  flags = np.zeros([NUM_CODE_POINTS], np.uint8)
  mapping = {}
  for cp in range(NUM_CODE_POINTS):
    if 0xD800 <= cp <= 0xDFFF:  # surrogates: never decoded from UTF-8
      flags[cp] = DROP
      continue
    char = chr(cp)
    flags[cp] = _flags_of(char)
    if not do_lower_case or flags[cp] & (DROP | SPACE):
      continue
    flags[cp] |= sigma_class(char)
    target = lowered(char)
    if target == char:
      continue
    if flags[cp] & CJK and len(target) != 1:
      raise RuntimeError("U+%04X: a CJK ideograph lower-cases to %r" % (cp, target))
    if any(c.isspace() or google.is_whitespace(c) for c in target):
      raise RuntimeError("U+%04X lower-cases to whitespace %r" % (cp, target))
    mapping[cp] = tuple(ord(c) for c in target)
  return CharTable(flags, mapping)


def mapping_arrays(mapping):
  """The mapping as arrays for the graph: (keys int64 [M], starts int64 [M], lengths int64 [M],
  values int32 [sum of lengths]); code point keys[i] becomes values[starts[i]:starts[i] +
  lengths[i]]. An empty mapping gives the one key -1 (no code point) with no characters: a hash
  table cannot be empty."""
  mapping = mapping or {-1: ()}
  keys = np.array(sorted(mapping), np.int64)
  lengths = np.array([len(mapping[k]) for k in keys], np.int64)
  starts = np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(np.int64)
  values = np.array([cp for k in keys for cp in mapping[k]], np.int32)
  return keys, starts, lengths, values
