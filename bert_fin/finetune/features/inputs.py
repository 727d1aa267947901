"""google's extract_features input: one example a line, read twice in bounded memory.

A line (stripped of surrounding whitespace) is `text_a`, or `text_a ||| text_b` for a pair
(google's pattern `^(.*) \\|\\|\\| (.*)$`: the separator needs its spaces, so `a|||b` is one text).
Every line is an example, a blank one too (an empty text: [CLS] [SEP]); its index from 0 is
google's `linex_index`.

  count = check_input(path)                 # pass 1: UTF-8, at most one |||, not empty; the
                                            # number of examples (InputError: FILE:LINE: ...)
  for chunk in read_chunks(path, lines):    # pass 2: Chunk(first index, lines, bytes), at most
      rows = encode(chunk.lines, ...)       #   `lines` lines at a time, never the whole file
Rows lay out as google's convert_examples_to_features: [CLS] A [SEP] (B [SEP]), segment ids 0 / 1,
a pair cut by google's _truncate_seq_pair, a single text to its first max_seq_length - 2 tokens;
a text is tokenized only as far as that (tokenization/bounded.py): a 5 MB line costs one block.
"""
import collections
import re

import numpy as np

from bert_fin.finetune.classify import long_text
from bert_fin.tokenization import bounded
from bert_fin.tokenization import special_tokens as special

SEPARATOR = "|||"
PAIR = re.compile(r"^(.*) \|\|\| (.*)$")

Chunk = collections.namedtuple("Chunk", ["first_index", "lines", "num_bytes"])
Chunk.__doc__ = """first_index: the linex_index of lines[0]; lines: the decoded lines (newline
kept); num_bytes: their size in the file (progress)."""
Rows = collections.namedtuple("Rows", ["tokens", "input_ids", "input_len", "segment_ids"])
Rows.__doc__ = """tokens: one list of WordPiece tokens a row ([CLS] ... [SEP]); input_ids int32
[N, S], input_len int32 [N], segment_ids int32 [N, S]."""


class InputError(ValueError):
  """Bad input: FILE:LINE: what is wrong, what to do (one line)."""


def split_line(line):
  """(text_a, text_b or None) of one input line, as google's read_examples."""
  line = line.strip()
  match = PAIR.match(line)
  if match is None:
    return line, None
  return match.group(1), match.group(2)


def _decoded_lines(path):
  """(line number, decoded line, its bytes) of the file, one line at a time."""
  with open(path, "rb") as f:
    for number, raw in enumerate(f, 1):
      try:
        yield number, raw.decode("utf-8"), len(raw)
      except UnicodeDecodeError as e:
        raise InputError("%s:%d: not UTF-8 (%s); convert the file, e.g. iconv -f GBK -t UTF-8"
                         % (path, number, e)) from None


def check_input(path):
  """The number of examples in `path`; InputError for an empty file, a line that is not UTF-8,
  or a line with more than one ||| (which pair would it be?). Reads one line at a time."""
  count = 0
  for number, line, _ in _decoded_lines(path):
    if line.count(SEPARATOR) > 1:
      raise InputError("%s:%d: %d '%s' separators; a line is `text_a` or `text_a %s text_b`"
                       % (path, number, line.count(SEPARATOR), SEPARATOR, SEPARATOR))
    count = number
  if count == 0:
    raise InputError("%s: empty file: one example a line (`text_a` or `text_a %s text_b`)" % (
        path, SEPARATOR))
  return count


def read_chunks(path, lines_per_chunk):
  """Chunks of at most lines_per_chunk lines, in file order (module docstring)."""
  lines, num_bytes, first = [], 0, 0
  for number, line, size in _decoded_lines(path):
    lines.append(line)
    num_bytes += size
    if len(lines) == lines_per_chunk:
      yield Chunk(first, lines, num_bytes)
      lines, num_bytes, first = [], 0, number
  if lines:
    yield Chunk(first, lines, num_bytes)


def encode(lines, tokenizer, max_seq_length):
  """Rows of input lines (module docstring); tokenizer: FullTokenizer-like (tokenize,
  tokenize_batch, convert_tokens_to_ids). A long line is tokenized only as far as its row reads
  it (bounded.tokenize_batch_ends: the same tokens as tokenizing it whole)."""
  texts = [split_line(line) for line in lines]
  cap = long_text.capacity(max_seq_length)  # what a row reads of a text: its head
  pieces_a = bounded.tokenize_batch_ends(tokenizer, [text_a for text_a, _ in texts], cap, 0)
  pairs = [i for i, (_, text_b) in enumerate(texts) if text_b]
  pieces_b = dict(zip(pairs, bounded.tokenize_batch_ends(tokenizer, [texts[i][1] for i in pairs],
                                                         cap, 0)))
  num = len(lines)
  rows = Rows([], np.zeros([num, max_seq_length], np.int32), np.zeros([num], np.int32),
              np.zeros([num, max_seq_length], np.int32))
  for row in range(num):
    tokens_a, tokens_b = pieces_a[row], pieces_b.get(row)
    if tokens_b:
      kept_a, kept_b = long_text.pair_counts(len(tokens_a), len(tokens_b),
                                             long_text.capacity(max_seq_length, pair=True))
      tokens_a, tokens_b = tokens_a[:kept_a], tokens_b[:kept_b]
    else:
      tokens_a, tokens_b = tokens_a[:long_text.capacity(max_seq_length)], []
    tokens = [special.CLS] + tokens_a + [special.SEP]
    length_a = len(tokens)
    if tokens_b:
      tokens += tokens_b + [special.SEP]
    rows.tokens.append(tokens)
    rows.input_ids[row, :len(tokens)] = tokenizer.convert_tokens_to_ids(tokens)
    rows.input_len[row] = len(tokens)
    rows.segment_ids[row, length_a:len(tokens)] = 1
  return rows
