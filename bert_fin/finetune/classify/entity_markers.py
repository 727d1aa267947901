"""Entity markers (run_classifier --entity_markers=K): the named entities of an example are marked
in its text with reserved vocab tokens, and the classifier reads the hidden states of the entity
start markers beside [CLS] (the "entity start" representation of Baldini Soares et al. 2019,
"Matching the Blanks").

Markers: entity i (0-based) is wrapped as START[i] entity END[i], the vocab's [unused1] [unused2]
for the first entity and [unused3] [unused4] for the second (google's Chinese and English vocabs
hold [unused1..99]; a vocab without them is refused). mark() places them around each entity's
first occurrence in the text (an occurrence overlapping one already marked is passed over), on
character offsets, so a name inside mixed CJK / Latin text ("与Nova电子签约") is marked where it is;
an entity not found is left unmarked and reported (the reader counts it). MarkerTokenizer keeps
the markers whole (google's tokenizer would split "[unused1]" into "[", "unused1", "]").
In the graph, start_positions finds each start marker's first position; a marker absent from the
row (entity not found, or cut by --max_seq_length) reads position 0, [CLS].
"""
import re

import numpy as np

START = ("[unused1]", "[unused3]")
END = ("[unused2]", "[unused4]")
MAX_ENTITIES = len(START)
_MARKER = re.compile("(%s)" % "|".join(re.escape(m) for m in START + END))


def mark(text, entities):
  """(text with markers, [found: bool] per entity). entities: at most MAX_ENTITIES names."""
  if len(entities) > MAX_ENTITIES:
    raise ValueError("at most %d entities can be marked, got %d" % (MAX_ENTITIES, len(entities)))
  spans, found = [], []
  for index, name in enumerate(entities):
    start = text.find(name) if name else -1
    while start >= 0 and any(start < e and start + len(name) > s for s, e, _ in spans):
      start = text.find(name, start + 1)
    found.append(start >= 0)
    if start >= 0:
      spans.append((start, start + len(name), index))
  pieces, cursor = [], 0
  for start, end, index in sorted(spans):
    pieces += [text[cursor:start], START[index], text[start:end], END[index]]
    cursor = end
  return "".join(pieces) + text[cursor:], found


def strip(text):
  """text without its markers (what a vocab's [UNK] rate is measured on)."""
  return _MARKER.sub("", text)


class MarkerTokenizer(object):
  """A FullTokenizer-like tokenizer (tokenize_batch, vocab, convert_tokens_to_ids) that keeps the
  markers as single tokens. ValueError naming the vocab when a marker is not in it."""

  def __init__(self, tokenizer, vocab_file="the vocab"):
    missing = [m for m in START + END if m not in tokenizer.vocab]
    if missing:
      raise ValueError("%s has no %s: --entity_markers needs its reserved [unusedN] slots" % (
          vocab_file, ", ".join(missing)))
    self._tokenizer = tokenizer
    self.vocab = tokenizer.vocab

  def start_ids(self, count):
    """The vocab ids of the first `count` start markers."""
    return tuple(self.vocab[m] for m in START[:count])

  def convert_tokens_to_ids(self, tokens):
    return self._tokenizer.convert_tokens_to_ids(tokens)

  def tokenize_batch(self, texts):
    """[[token]] of texts, each marker one token, the text between tokenized as usual."""
    parts = [_MARKER.split(text) for text in texts]
    plain = [piece for pieces in parts for piece in pieces[::2]]
    tokenized = iter(self._tokenizer.tokenize_batch(plain))
    result = []
    for pieces in parts:
      tokens = []
      for i, piece in enumerate(pieces):
        tokens += next(tokenized) if i % 2 == 0 else [piece]
      result.append(tokens)
    return result


def rows_missing_a_marker(input_ids, marker_ids):
  """How many rows (input_ids: int [R, S]) lack one of the start markers (an entity not found in
  the text, or cut by --max_seq_length): their classifier reads [CLS] in its place."""
  input_ids = np.asarray(input_ids)
  present = np.stack([(input_ids == marker).any(axis=1) for marker in marker_ids], axis=1)
  return int((~present.all(axis=1)).sum())


def start_positions(input_ids, marker_ids):
  """int32 [B, K]: each start marker's first position in each row (0, [CLS], when absent).

  input_ids: int32 [B, S]; marker_ids: K vocab ids."""
  import tensorflow.compat.v1 as tf  # pylint: disable=import-outside-toplevel
  columns = []
  for marker in marker_ids:
    hit = tf.cast(tf.equal(input_ids, marker), tf.int32)  # [B, S]
    first = tf.argmax(hit, axis=1, output_type=tf.int32)  # 0 when there is none
    columns.append(first * tf.reduce_max(hit, axis=1))
  return tf.stack(columns, axis=1)
