# coding=utf-8
"""Seeded random Unicode texts for the tokenizer property tests (test_tokenization_fuzz.py,
test_serving_tokenizer.py): CJK (BMP + extensions B..E, compatibility ideographs, the U+2B820
range HF gets wrong), full-width forms, emoji, combining accents, cased Greek/Latin oddities (final
sigma, dotted I, titlecase digraphs), control and format chars (\\x00 \\t \\r U+200B U+FEFF ...),
new and old punctuation, private-use and unassigned code points, lone surrogates, long words
(around 100 and 200 chars) and vocabulary words."""
import random

from helpers import tokenizer_vocab

NUM_TEXTS = 2000  # per casing mode
SEED = 20240611

_CONTROL_AND_SPACE = ("\t\r\n\x00\x0b\x0c\x1c\x7f\x85"
                      "\u200b\u200d\ufeff\u00ad\u2028\u2029\u3000\u00a0\ufffd")
_CASE_ODDITIES = "ΣσςİIıiǅǄǆéèÉÅåñÑẞßﬁŉΐ"
_CJK_STARTS = (0x3400, 0x20000, 0x2A700, 0x2B740, 0x2B820, 0x2B900, 0x2B920, 0x2CEA0, 0xF900,
               0xFA6E, 0x2F800, 0x2FA10, 0x30000)
_SPECIAL_POINTS = (0x166D, 0x111C9, 0x2E52, 0x2E5D, 0x061D, 0x1B7D, 0xE000, 0xF8FF, 0x70000,
                   0xD800, 0xDFFF, 0x0378, 0x037E, 0x1FEF, 0x2126, 0x212A, 0x0345)


def random_char(rng):
  kind = rng.random()
  if kind < 0.08:
    return chr(rng.randint(0, 0x10FFFF))
  if kind < 0.15:
    return chr(rng.randint(0, 0x3000))
  if kind < 0.30:
    return rng.choice(tokenizer_vocab.CJK_CHARS)
  if kind < 0.38:
    return chr(rng.randint(0x4E00, 0x9FFF))
  if kind < 0.43:
    return chr(rng.choice(_CJK_STARTS) + rng.randint(0, 40))
  if kind < 0.48:
    return chr(rng.randint(0xFF01, 0xFF5E))  # full-width ASCII
  if kind < 0.52:
    return chr(rng.randint(0x1F300, 0x1FAFF))  # emoji
  if kind < 0.57:
    return chr(rng.randint(0x300, 0x36F))  # combining accents
  if kind < 0.62:
    return rng.choice(_CONTROL_AND_SPACE)
  if kind < 0.67:
    return rng.choice(_CASE_ODDITIES)
  if kind < 0.71:
    return chr(rng.randint(0x2000, 0x2E7F))  # general punctuation, arrows, symbols
  if kind < 0.73:
    return chr(rng.choice(_SPECIAL_POINTS))
  if kind < 0.83:
    return rng.choice(tokenizer_vocab.PUNCT)
  return rng.choice(tokenizer_vocab.ALNUM + [" "] * 5)


def random_text(rng):
  parts = []
  for _ in range(rng.randint(0, 12)):
    kind = rng.random()
    if kind < 0.3:
      word = rng.choice(tokenizer_vocab.WORDS + tokenizer_vocab.SPECIAL[-4:]).replace("##", "")
      parts.append(word.upper() if rng.random() < 0.2 else word)
    elif kind < 0.35:
      length = rng.choice([99, 100, 101, 150, 199, 200, 201, 250])
      parts.append(rng.choice(tokenizer_vocab.ALNUM) * length)
    elif kind < 0.4:
      syllables = ["ab", "c", "É", "ς", "Σ"]
      parts.append("".join(rng.choice(syllables) for _ in range(rng.randint(60, 140))))
    else:
      parts.append("".join(random_char(rng) for _ in range(rng.randint(1, 8))))
    parts.append(rng.choice(["", " ", "  ", "\t", "\u3000"]))
  return "".join(parts)


def random_texts(num=NUM_TEXTS, seed=SEED):
  """num seeded random texts (random_text)."""
  rng = random.Random(seed)
  return [random_text(rng) for _ in range(num)]
