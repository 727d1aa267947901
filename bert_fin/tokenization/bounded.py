# coding=utf-8
"""A long text tokenized only as far as it is read: its first and last tokens, or all of them a
block at a time (pure Python, any FullTokenizer-like tokenizer).

google's tokenization never joins characters across a whitespace character (google's: space,
\\t, \\n, \\r, category Zs), a CJK ideograph (each is a word of its own) or a punctuation
character (split off as a token of its own): cut just before one of those, a text's tokens are
the tokens of the part before the cut followed by those of the part after it, exactly (the same
words, the same lower-casing: Python's final-sigma rule looks only through case-ignorable
characters, so punctuation it looks through, such as "." and "'", is no cut). So a text is
tokenized in blocks of about BLOCK_CHARS characters, each cut at such a boundary, from either
end, and only as many blocks as the reader needs:

  tokenize_ends(tokenizer, text, head, tail)
      a stand-in for tokenizer.tokenize(text): the whole list when the blocks read from both
      ends meet (always when the text has at most head + tail tokens), else its first `head`
      tokens, OMITTED, its last `tail` tokens (len head + tail + 1 < the real length: every
      position a reader of at most `head` first or `tail` last tokens takes holds the real
      token, and the stand-in is longer than head + tail, as the text);
  tokenize_batch_ends(tokenizer, texts, head, tail)
      the stand-in of each text (short ones whole, in one tokenize_batch);
  token_ids(tokenizer, text)
      every token's id, int32 [n], tokenized a block at a time (4 bytes a token held, not the
      token strings of the whole text).
A text without a boundary (one 5 MB "word" of letters) is tokenized whole: one [UNK] (longer than
200 characters).
"""
import functools
import re
import unicodedata

import numpy as np

from bert_fin.text import cjk
from bert_fin.tokenization import google

BLOCK_CHARS = 1 << 14  # characters tokenized at a time (and shorter texts at once)
BATCH_BLOCKS = 16  # blocks a token_ids batch tokenizes together
OMITTED = None  # tokenize_ends' stand-in for the tokens between the head and the tail

_ZS = (0x20, 0xA0, 0x1680, 0x202F, 0x205F, 0x3000) + tuple(range(0x2000, 0x200B))


def _final_sigma_blind(char):
  """Whether Python's lower-casing reads no final-sigma context through `char` (it is neither
  cased nor case-ignorable): lower-casing a text cut before it gives the same characters."""
  return (("ΑΣ" + char + "Α").lower() == "ας" + (char + "Α").lower() and
          ("Α" + char + "Σ").lower() == "α" + (char + "Σ").lower())


def is_boundary(char):
  """Whether a cut before `char` splits google's tokens exactly: google's whitespace, a CJK
  ideograph (each starts a new word) or punctuation that lower-casing does not look through
  (it is split off, as its own token)."""
  return (google.is_whitespace(char) or google.is_chinese_char(ord(char)) or
          google.is_punctuation(char) and _final_sigma_blind(char))


@functools.lru_cache(maxsize=None)
def _boundary():
  """The compiled character class of is_boundary (built at first use: a pass over Unicode)."""
  points = set(_ZS) | {ord(c) for c in "\t\n\r"}
  points |= {cp for cp in range(0x110000) if not 0xD800 <= cp <= 0xDFFF and (
      unicodedata.category(chr(cp)).startswith("P") or cp < 128) and is_boundary(chr(cp))}
  ranges = "".join("%s-%s" % (re.escape(chr(first)), re.escape(chr(last)))
                   for first, last in cjk.CJK_RANGES)
  return re.compile("[%s%s]" % ("".join(re.escape(chr(cp)) for cp in sorted(points)), ranges))


def _block_end(text, start, stop, block):
  """The end of the block of text[start:stop] starting at `start`: stop when that is at most
  `block` characters away, else the first boundary position at least `block` characters on (or
  stop)."""
  if start + block >= stop:
    return stop
  match = _boundary().search(text, start + block, stop)
  return match.start() if match else stop


def _cut_before(text, at, lo, block):
  """The last boundary position in (lo, at], else lo; searches back a block at a time."""
  end = at + 1
  while end > lo + 1:
    start = max(lo + 1, end - block)
    last = None
    for last in _boundary().finditer(text, start, end):
      pass
    if last is not None:
      return last.start()
    end = start
  return lo


class _Cursor(object):
  """Tokens of text[:lo] (front) and text[hi:] (back blocks, last first), cut at boundaries."""

  def __init__(self, tokenizer, text, block):
    self.tokenizer, self.text = tokenizer, text
    self.block = BLOCK_CHARS if block is None else block
    self.lo, self.hi = 0, len(text)
    self.front, self.back_blocks, self.back_count = [], [], 0

  @property
  def met(self):
    return self.lo >= self.hi

  def step_front(self):
    end = _block_end(self.text, self.lo, self.hi, self.block)
    self.front.extend(self.tokenizer.tokenize(self.text[self.lo:end]))
    self.lo = end

  def step_back(self):
    start = self.lo if self.hi - self.block <= self.lo else _cut_before(
        self.text, self.hi - self.block, self.lo, self.block)
    tokens = self.tokenizer.tokenize(self.text[start:self.hi])
    self.back_blocks.append(tokens)
    self.back_count += len(tokens)
    self.hi = start

  def back(self):
    return [token for tokens in reversed(self.back_blocks) for token in tokens]


def tokenize_ends(tokenizer, text, head, tail, block=None):
  """The stand-in of the module docstring for tokenizer.tokenize(text) (head, tail >= 0;
  block: characters a block, None: BLOCK_CHARS).

  Tokenizes blocks from the front until `head` tokens, from the back until `tail`, then from the
  front until more than head + tail are known (or the two ends meet: the whole text, exact).
  Memory and time: the blocks read, about (head + tail) tokens' worth of text for a text in
  which tokens are dense, the whole text at worst (a text of whitespace), never more than one
  pass.
  """
  cursor = _Cursor(tokenizer, text, block)
  while not cursor.met and len(cursor.front) < head:
    cursor.step_front()
  while not cursor.met and cursor.back_count < tail:
    cursor.step_back()
  while not cursor.met and len(cursor.front) + cursor.back_count <= head + tail:
    cursor.step_front()
  back = cursor.back()
  if cursor.met:
    return cursor.front + back
  return cursor.front[:head] + [OMITTED] + (back[len(back) - tail:] if tail else [])


def tokenize_batch_ends(tokenizer, texts, head, tail):
  """[tokenize_ends(tokenizer, text, head, tail)] of texts: those of at most BLOCK_CHARS
  characters whole in one tokenizer.tokenize_batch (a fast tokenizer's batch), longer ones a
  block at a time."""
  short = [i for i, text in enumerate(texts) if len(text) <= BLOCK_CHARS]
  result = dict(zip(short, tokenizer.tokenize_batch([texts[i] for i in short])))
  return [result[i] if i in result else tokenize_ends(tokenizer, text, head, tail)
          for i, text in enumerate(texts)]


def token_ids(tokenizer, text, block=None):
  """int32 [n]: the ids of tokenizer.tokenize(text), tokenized BATCH_BLOCKS blocks at a time
  (one tokenize_batch call each: a fast tokenizer's batch path)."""
  block = BLOCK_CHARS if block is None else block
  parts, pieces, start = [], [], 0
  while start < len(text):
    end = _block_end(text, start, len(text), block)
    pieces.append(text[start:end])
    start = end
    if len(pieces) == BATCH_BLOCKS or start == len(text):
      parts += [np.asarray(tokenizer.convert_tokens_to_ids(tokens), np.int32)
                for tokens in tokenizer.tokenize_batch(pieces)]
      pieces = []
  return np.concatenate(parts) if parts else np.zeros([0], np.int32)
