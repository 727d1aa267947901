"""A context's WordPiece tokens with their character spans in the ORIGINAL text (pure Python).

google's run_squad maps an answer's character offset to whitespace-separated words, then words to
WordPiece tokens. Chinese text has no spaces: a whole paragraph is one "word", and google's
_improve_answer_span then searches all of it for the first place the answer's tokens occur (the
wrong place when the answer occurs twice, and quadratic in the paragraph's length). Here the
context is tokenized once, keeping for every token the characters it came from, so a character
offset maps to tokens exactly:

  tokens = context_tokens(context, tokenizer)   # ContextTokens(tokens, starts, ends)
  tokens.starts[i], tokens.ends[i]              # token i came from context[starts[i]:ends[i]]
  char_span_to_tokens(tokens, start, end)       # the tokens of context[start:end], aligned?

The tokens are the tokenizer's own (tokenizer.tokenize(context) gives the same list): google's
BasicTokenizer steps are replayed character by character, each output character remembering its
source: control characters, U+0000 and U+FFFD dropped; whitespace (google's and Python's) splits;
every CJK ideograph a word of its own; with do_lower_case each run lower-cased and accent-stripped
(NFD, marks dropped; a run whose characters normalize differently together than one by one, e.g.
Greek final sigma, maps every output character to the whole run); punctuation split off; then
each word's WordPiece tokens (tokenizer.tokenize_words) take consecutive characters of the word
([UNK]: the whole word).
"""
import bisect
import collections
import unicodedata

from bert_fin import tokenization

ContextTokens = collections.namedtuple("ContextTokens", ["tokens", "starts", "ends"])
ContextTokens.__doc__ = """tokens: [str] WordPiece tokens; starts, ends: [int], token i came from
the context's characters [starts[i], ends[i]) (starts increasing, ends non-decreasing)."""

TokenSpan = collections.namedtuple("TokenSpan", ["first", "last", "aligned"])
TokenSpan.__doc__ = """first, last: token indices (inclusive) holding the characters of a span;
aligned: no token reaches outside the span (its boundaries fall between tokens)."""


def _strip_accents(text):
  return "".join(c for c in unicodedata.normalize("NFD", text) if unicodedata.category(c) != "Mn")


def _normalized(run, do_lower_case):
  """[(char, start, end)] of a whitespace-delimited run [(char, offset)] after lower-casing and
  accent stripping, each output character with the original characters it came from."""
  if not do_lower_case:
    return [(c, i, i + 1) for c, i in run]
  whole = _strip_accents("".join(c for c, _ in run).lower())
  pieces = [(_strip_accents(c.lower()), i) for c, i in run]
  if "".join(p for p, _ in pieces) == whole:
    return [(c, i, i + 1) for p, i in pieces for c in p]
  start, end = run[0][1], run[-1][1] + 1  # context-dependent (final sigma): the whole run
  return [(c, start, end) for c in whole]


def basic_words(text, do_lower_case):
  """google's BasicTokenizer(do_lower_case).tokenize(text) as [[(char, start, end)]]: each word's
  characters with the span of the original text they came from."""
  words, run, current = [], [], []

  def end_word():
    if current:
      words.append(list(current))
      current.clear()

  def end_run():
    for char in _normalized(run, do_lower_case):
      if tokenization.is_punctuation(char[0]):
        end_word()
        words.append([char])
      elif char[0].isspace():
        end_word()
      else:
        current.append(char)
    end_word()
    run.clear()

  for offset, char in enumerate(text):
    code = ord(char)
    if code == 0 or code == 0xFFFD or tokenization.is_control(char):
      continue
    if tokenization.is_whitespace(char) or char.isspace():
      end_run()
    elif tokenization.is_chinese_char(code):
      end_run()
      run.append((char, offset))
      end_run()
    else:
      run.append((char, offset))
  end_run()
  return words


def _piece_spans(word, pieces, unk_token):
  """[(start, end)] of each WordPiece token of `word` ([(char, start, end)])."""
  whole = (word[0][1], word[-1][2])
  lengths = [len(p) - 2 if i and p.startswith("##") else len(p) for i, p in enumerate(pieces)]
  if unk_token in pieces or sum(lengths) != len(word):
    return [whole] * len(pieces)
  spans, at = [], 0
  for length in lengths:
    spans.append((word[at][1], word[at + length - 1][2]))
    at += length
  return spans


def context_tokens(context, tokenizer):
  """ContextTokens of `context` (str) under `tokenizer` (FullTokenizer or FastFullTokenizer:
  do_lower_case and tokenize_words are read)."""
  words = basic_words(context, tokenizer.do_lower_case)
  tokens, starts, ends = [], [], []
  unk = tokenization.UNK_TOKEN
  for word, pieces in zip(words, tokenizer.tokenize_words(["".join(c for c, _, _ in w)
                                                          for w in words])):
    for piece, (start, end) in zip(pieces, _piece_spans(word, pieces, unk)):
      tokens.append(piece)
      starts.append(start)
      ends.append(end)
  return ContextTokens(tokens, starts, ends)


def char_span_to_tokens(context_tokens_, start, end):
  """TokenSpan of the characters [start, end) of the context, or None when no token lies in it
  (the span is whitespace or dropped characters only). The first token is the one holding
  character `start` (or the first after it), the last the one holding character end - 1 (or the
  last before it)."""
  first = bisect.bisect_right(context_tokens_.ends, start)
  last = bisect.bisect_left(context_tokens_.starts, end) - 1
  if first > last:
    return None
  aligned = context_tokens_.starts[first] >= start and context_tokens_.ends[last] <= end
  return TokenSpan(first, last, aligned)


def span_text(context, context_tokens_, first, last):
  """The original characters of tokens first..last: context[starts[first]:ends[last]]."""
  return context[context_tokens_.starts[first]:context_tokens_.ends[last]]
