# coding=utf-8
"""bert_fin's tokenizer (google's FullTokenizer) as TensorFlow ops, for a serving graph.

Core TensorFlow only (no tensorflow-text), so TF Serving's stock binary and `tf.saved_model.load`
run it as it is. `GraphTokenizer(vocab, do_lower_case)` is a tf.Module holding:
  the character table of char_table.py (uint8 [0x110000] flags, the lower-casing mapping as a hash
  table), read per character: drop, split on whitespace, isolate CJK and punctuation;
  the vocab as a hash table (token -> id), with google's greedy longest-match-first WordPiece run
  over every word of the batch at once (one loop step a piece), a word of more than
  MAX_INPUT_CHARS_PER_WORD characters or one no piece covers becoming [UNK].
`token_ids(text)`: tf.string [batch] (UTF-8; invalid bytes dropped, as google's decode) ->
int64 ragged [batch, (tokens)], the ids google's FullTokenizer gives (lower-casing's final-sigma
rule applied on the table's classes; char_table.py names the one rule a table cannot hold);
`token_spans(text)` adds each token's characters in its text (squad/offsets.py's context_tokens,
for answers cut by character offsets).
"""
import tensorflow as tf

from bert_fin import tokenization
from bert_fin.serving import char_table
from bert_fin.tokenization import special_tokens as special

CONTINUATION = "##"


def longest_piece(vocab):
  """Characters of the longest piece a vocab matches (a "##" piece counted without its "##");
  WordPiece never needs to try a longer candidate."""
  return max(len(token[len(CONTINUATION):] if token.startswith(CONTINUATION) else token)
             for token in vocab)


class GraphTokenizer(tf.Module):
  """google's FullTokenizer in the graph (module docstring).

  Args:
    vocab: OrderedDict token -> id (tokenization.load_vocab).
    do_lower_case: google's flag.
    table: char_table.CharTable for do_lower_case (built when None: ~2 s).
  """

  def __init__(self, vocab, do_lower_case, table=None, name="graph_tokenizer"):
    super().__init__(name=name)
    table = table or char_table.build(do_lower_case)
    self._flags = tf.constant(table.flags, tf.uint8)
    keys, starts, lengths, values = char_table.mapping_arrays(table.mapping)
    self._map_index = tf.lookup.StaticHashTable(tf.lookup.KeyValueTensorInitializer(
        tf.constant(keys, tf.int64), tf.range(len(keys), dtype=tf.int64)), -1)
    self._map_starts = tf.constant(starts, tf.int64)
    self._map_lengths = tf.constant(lengths, tf.int64)
    self._map_values = tf.constant(values, tf.int32)
    tokens = list(vocab)
    self._vocab = tf.lookup.StaticHashTable(tf.lookup.KeyValueTensorInitializer(
        tf.constant(tokens), tf.constant([vocab[t] for t in tokens], tf.int64)), -1)
    self._unk = int(vocab[special.UNK])
    self._lower = bool(do_lower_case)
    self._max_piece = longest_piece(vocab)

  def _characters(self, text):
    """(code points int32 [N], row int64 [N], isolate bool [N], space bool [N], sources int64
    [N, 2]: the characters [start, end) of its text each came from) of the batch's characters
    after dropping and lower-casing, in order. A character comes from its own source, except in
    a whitespace-delimited run that lower-casing changed by context (final sigma): there every
    character comes from the whole run, as squad/offsets.py's _normalized says."""
    decoded = tf.strings.unicode_decode(text, "UTF-8", errors="ignore")
    cps = decoded.flat_values
    rows = decoded.value_rowids()
    sources = tf.ragged.range(decoded.row_lengths()).flat_values
    flags = tf.gather(self._flags, cps)
    kept = tf.logical_not(_has(flags, char_table.DROP))
    cps, rows, flags, sources = (tf.boolean_mask(t, kept) for t in (cps, rows, flags, sources))
    sources = tf.stack([sources, sources + 1], axis=1)
    if self._lower:
      lowered = _final_sigmas(cps, rows, flags)
      sources = _whole_runs_where(tf.not_equal(lowered, cps), sources, rows, flags)
      cps = lowered
    index = self._map_index.lookup(tf.cast(cps, tf.int64))
    mapped = index >= 0
    safe = tf.maximum(index, 0)
    offset = tf.cast(tf.size(self._map_values), tf.int64)
    starts = tf.where(mapped, tf.gather(self._map_starts, safe),
                      offset + tf.range(tf.size(cps, out_type=tf.int64)))
    lengths = tf.where(mapped, tf.gather(self._map_lengths, safe), tf.ones_like(safe))
    spans = tf.ragged.range(starts, starts + lengths)
    parent = spans.value_rowids()
    out = tf.gather(tf.concat([self._map_values, cps], 0), spans.flat_values)
    parent_flags = tf.gather(flags, parent)
    out_flags = tf.gather(self._flags, out)
    isolate = tf.logical_or(_has(parent_flags, char_table.CJK), _has(out_flags, char_table.PUNCT))
    return (out, tf.gather(rows, parent), isolate, _has(parent_flags, char_table.SPACE),
            tf.gather(sources, parent))

  def _words(self, text):
    """(words: int32 ragged [W, (chars)], the text of each word int64 [W], sources: int64
    ragged [W, (chars), 2], the characters [start, end) of its text each word character came
    from)."""
    cps, rows, isolate, space, sources = self._characters(text)
    new_row = tf.not_equal(rows, _previous(rows, tf.constant(-1, tf.int64)))
    starts = tf.logical_and(tf.logical_not(space), tf.reduce_any(tf.stack([
        new_row, _previous(space, True), _previous(isolate, True), isolate]), axis=0))
    word_ids = tf.cumsum(tf.cast(starts, tf.int64)) - 1
    kept = tf.logical_not(space)
    num_words = tf.reduce_sum(tf.cast(starts, tf.int64))
    words = tf.RaggedTensor.from_value_rowids(tf.boolean_mask(cps, kept),
                                              tf.boolean_mask(word_ids, kept), nrows=num_words)
    sources = tf.RaggedTensor.from_value_rowids(tf.boolean_mask(sources, kept),
                                                tf.boolean_mask(word_ids, kept), nrows=num_words)
    return words, tf.boolean_mask(rows, starts), sources

  def _wordpiece(self, words):
    """(int64 ragged [W, (pieces)]: google's WordPiece of each word, int32 ragged like it: the
    characters of the word each piece covers ([UNK]: the whole word))."""
    strings = tf.strings.unicode_encode(words, "UTF-8")
    length = tf.cast(words.row_lengths(), tf.int32)
    num = tf.size(strings)
    sizes = tf.range(1, self._max_piece + 1, dtype=tf.int32)
    too_long = length > tokenization.MAX_INPUT_CHARS_PER_WORD
    tiled = tf.tile(strings[:, None], [1, self._max_piece])

    def step(i, start, active, failed, pieces, covered):
      ends = start[:, None] + sizes[None, :]
      valid = tf.logical_and(ends <= length[:, None], active[:, None])
      candidates = tf.strings.substr(tiled, tf.tile(start[:, None], [1, self._max_piece]),
                                     tf.tile(sizes[None, :], [num, 1]), unit="UTF8_CHAR")
      candidates = tf.where((start > 0)[:, None], CONTINUATION + candidates, candidates)
      ids = self._vocab.lookup(candidates)
      found = tf.logical_and(valid, ids >= 0)
      best = tf.reduce_max(tf.where(found, sizes[None, :], 0), axis=1)
      matched = best > 0
      piece = tf.gather(ids, tf.maximum(best - 1, 0), batch_dims=1)
      pieces = pieces.write(i, tf.where(tf.logical_and(active, matched), piece, -1))
      covered = covered.write(i, tf.where(tf.logical_and(active, matched), best, 0))
      failed = tf.logical_or(failed, tf.logical_and(active, tf.logical_not(matched)))
      start += best
      active = tf.logical_and(tf.logical_and(active, matched), start < length)
      return i + 1, start, active, failed, pieces, covered

    _, _, _, failed, pieces, covered = tf.while_loop(
        # at least one step: a batch with no word to match still stacks [steps, W]
        lambda i, start, active, failed, pieces, covered: (i == 0) | tf.reduce_any(active), step,
        (0, tf.zeros([num], tf.int32), tf.logical_and(length > 0, tf.logical_not(too_long)),
         tf.zeros([num], tf.bool), tf.TensorArray(tf.int64, size=0, dynamic_size=True,
                                                  element_shape=tf.TensorShape([None])),
         tf.TensorArray(tf.int32, size=0, dynamic_size=True,
                        element_shape=tf.TensorShape([None]))))
    steps = tf.transpose(pieces.stack())  # [W, steps]
    dense = tf.concat([steps, -tf.ones([num, 1], tf.int64)], 1)
    unk = tf.logical_or(failed, too_long)
    dense = tf.where(unk[:, None], tf.one_hot(0, tf.shape(dense)[1], on_value=tf.constant(
        self._unk, tf.int64), off_value=tf.constant(-1, tf.int64))[None, :], dense)
    counts = tf.reduce_sum(tf.cast(dense >= 0, tf.int64), axis=1)
    sizes = tf.concat([tf.transpose(covered.stack()),
                       tf.zeros([num, 1], tf.int32)], 1)
    sizes = tf.where(unk[:, None], tf.one_hot(0, tf.shape(sizes)[1], dtype=tf.int32)
                     * length[:, None], sizes)
    return (tf.RaggedTensor.from_tensor(dense, lengths=counts),
            tf.RaggedTensor.from_tensor(sizes, lengths=counts))

  def token_ids(self, text):
    """int64 ragged [batch, (tokens)]: the WordPiece ids of each text (tf.string [batch])."""
    return self.token_spans(text)[0]

  def token_spans(self, text):
    """(ids, starts, ends): int64 ragged [batch, (tokens)] each, the WordPiece ids of each text
    (tf.string [batch]) and the characters [start, end) of the text each token came from (a
    [UNK] word: the whole word), as offsets.context_tokens gives them."""
    words, word_rows, sources = self._words(text)
    pieces, sizes = self._wordpiece(words)
    batch = tf.shape(text, out_type=tf.int64)[0]
    piece_rows = tf.gather(word_rows, pieces.value_rowids())
    flat_sizes = tf.cast(sizes.flat_values, tf.int64)
    before = tf.cumsum(flat_sizes, exclusive=True)  # characters of earlier pieces, all words
    word_first = tf.gather(before, sizes.row_starts())  # a word has at least one piece
    first = (tf.gather(sources.row_starts(), sizes.value_rowids()) + before
             - tf.gather(word_first, sizes.value_rowids()))
    starts = tf.gather(sources.flat_values, first)[:, 0]
    ends = tf.gather(sources.flat_values, first + flat_sizes - 1)[:, 1]
    ragged = lambda values: tf.RaggedTensor.from_value_rowids(values, piece_rows, nrows=batch)
    return ragged(pieces.flat_values), ragged(starts), ragged(ends)


def _whole_runs_where(changed, sources, rows, flags):
  """sources int64 [N, 2] with every character of a run holding a `changed` (bool [N]) one
  coming from the whole run [first start, last end). A run: the characters of one text between
  whitespace, a CJK ideograph a run of its own (google's BasicTokenizer lower-cases such runs).
  rows: int64 [N]; flags: uint8 [N]."""
  breaks = tf.logical_or(_has(flags, char_table.SPACE), _has(flags, char_table.CJK))
  new_run = tf.reduce_any(tf.stack([
      tf.not_equal(rows, _previous(rows, tf.constant(-1, tf.int64))), breaks,
      _previous(breaks, True)]), axis=0)
  run = tf.cumsum(tf.cast(new_run, tf.int64)) - 1
  runs = tf.size(run, out_type=tf.int64)  # at least the number of runs
  touched = tf.gather(tf.math.unsorted_segment_max(tf.cast(changed, tf.int32), run, runs),
                      run) > 0
  whole = tf.stack([tf.gather(tf.math.unsorted_segment_min(sources[:, 0], run, runs), run),
                    tf.gather(tf.math.unsorted_segment_max(sources[:, 1], run, runs), run)],
                   axis=1)
  return tf.where(touched[:, None], whole, sources)


def _final_sigmas(cps, rows, flags):
  """cps int32 [N] with each capital sigma that str.lower() makes final replaced by "ς": the
  nearest character before it in its text that is not case-ignorable is cased, and the nearest
  after it is not (or there is none). Whitespace and CJK ideographs are neither, so reading
  across google's words gives its per-word lower-casing. rows: int64 [N]; flags: uint8 [N]."""
  reads = tf.logical_not(_has(flags, char_table.CASE_IGNORABLE))
  positions = tf.concat([tf.where(reads)[:, 0], [0]], 0)  # [M + 1]: a stand-in at M
  count = tf.size(positions, out_type=tf.int64) - 1
  before = tf.cumsum(tf.cast(reads, tf.int64), exclusive=True)  # read characters before each
  cased = _has(flags, char_table.CASED)

  def cased_at(index, exists):
    at = tf.gather(positions, tf.clip_by_value(index, 0, count))
    return exists & tf.equal(tf.gather(rows, at), rows) & tf.gather(cased, at)

  after = before + tf.cast(reads, tf.int64)  # the first read character after each
  final = (tf.equal(cps, char_table.CAPITAL_SIGMA) & cased_at(before - 1, before > 0)
           & tf.logical_not(cased_at(after, after < count)))
  return tf.where(final, tf.constant(char_table.FINAL_SIGMA, cps.dtype), cps)


def _previous(t, first):
  """t [N] shifted one place later, `first` in front: each element's predecessor ([] for N = 0)."""
  return tf.concat([[first], t], 0)[:tf.size(t)]


def _has(flags, bit):
  """bool [N]: which of flags (uint8 [N]) have `bit` set."""
  return tf.not_equal(tf.bitwise.bitwise_and(flags, tf.constant(bit, tf.uint8)), 0)
