"""Sentence splitting for Chinese and mixed Chinese/English text.

Contract of `split_sentences(text, max_chars)`:
  * paragraphs (lines) never share a sentence;
  * a sentence ends after a run of terminators 。！？；… (and ASCII ! ? ;), plus any closing quotes
    or brackets that follow (`他说：“涨停！”` stays whole);
  * an ASCII '.' ends a sentence only before whitespace/end of line, not after a digit (3.5%, 1.)
    nor after a known abbreviation (Inc. Co. Ltd. e.g. U.S.);
  * a sentence longer than max_chars is cut after the last ，、,： within the limit, else at max_chars.
Sentences are stripped and never empty; joining them (per paragraph) gives back the text.
"""
import re

TERMINATORS = "。！？；…!?;"
CLOSERS = "”’」』）)】》〉]\"'"
SOFT_BREAKS = "，、,：:"
ABBREVIATIONS = frozenset(
    ["mr", "mrs", "ms", "dr", "prof", "inc", "co", "corp", "ltd", "jr", "sr", "st", "vs", "etc",
     "e.g", "i.e", "u.s", "u.k", "no", "fig", "jan", "feb", "mar", "apr", "jun", "jul", "aug",
     "sep", "sept", "oct", "nov", "dec"])
_CANDIDATE_RE = re.compile("[%s.]" % re.escape(TERMINATORS))
_TAIL_RE = re.compile("[%s.]*" % re.escape(TERMINATORS + CLOSERS))
_WORD_BEFORE_DOT_RE = re.compile(r"([A-Za-z](?:[A-Za-z.]*[A-Za-z])?)$")


def _is_period_boundary(line, i):
  """True when the ASCII '.' at line[i] ends an English sentence."""
  next_char = line[i + 1] if i + 1 < len(line) else ""
  if next_char and not next_char.isspace():
    return False  # 3.5, www.x, a.b
  before = line[:i]
  if not before or before[-1].isdigit():
    return False  # "1." list numbers
  word = _WORD_BEFORE_DOT_RE.search(before)
  if word and (word.group(1).lower() in ABBREVIATIONS or len(word.group(1)) == 1):
    return False  # abbreviations and initials
  return True


def _boundaries(line):
  """Yields the end offsets (exclusive) of the sentences of one line."""
  position = 0
  while True:
    match = _CANDIDATE_RE.search(line, position)
    if not match:
      break
    i = match.start()
    if line[i] == "." and not _is_period_boundary(line, i):
      position = i + 1
      continue
    position = _TAIL_RE.match(line, i + 1).end()  # absorb more terminators and closers
    yield position
  yield len(line)


def cut_long_sentence(sentence, max_chars):
  """Cuts a sentence longer than max_chars into pieces <= max_chars, preferring soft breaks."""
  pieces = []
  while len(sentence) > max_chars:
    window = sentence[:max_chars]
    cut = max(window.rfind(mark) for mark in SOFT_BREAKS)
    cut = cut + 1 if cut >= max_chars // 4 else max_chars
    pieces.append(sentence[:cut].strip())
    sentence = sentence[cut:].strip()
  if sentence:
    pieces.append(sentence)
  return [piece for piece in pieces if piece]


def split_line(line, max_chars=256):
  """One paragraph -> list of sentences."""
  sentences, start = [], 0
  for end in _boundaries(line):
    sentence = line[start:end].strip()
    start = end
    if not sentence:
      continue
    if max_chars and len(sentence) > max_chars:
      sentences.extend(cut_long_sentence(sentence, max_chars))
    else:
      sentences.append(sentence)
  return sentences


def split_sentences(text, max_chars=256):
  """text: paragraphs separated by '\\n' -> list of sentence strings (max_chars=0: no cutting)."""
  sentences = []
  for line in text.split("\n"):
    sentences.extend(split_line(line, max_chars))
  return sentences
