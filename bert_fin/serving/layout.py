"""Token ids -> model inputs in the graph: [CLS] A [SEP] (B [SEP]), long texts cut as fine-tuning.

The rules are run_classifier's (finetune/classify/features.py and long_text.py), written in
TensorFlow ops over a batch: a single text keeps `capacity` = seq_length - 2 tokens, a pair shares
seq_length - 3 between its sides with google's _truncate_seq_pair counts (the longer side loses a
token first; `pair_counts` is its closed form), and each side keeps its head, its tail or its head
and tail (--long_text head / tail / head_tail; `keep_mask`). --long_text=chunks (windows pooled
per document) has no single-row layout and is not served here.
"""
import tensorflow as tf

from bert_fin.finetune.classify import long_text

SERVED_MODES = (long_text.HEAD, long_text.TAIL, long_text.HEAD_TAIL)


def pair_counts(len_a, len_b, room):
  """(kept_a, kept_b) int32 [B]: long_text.pair_counts for each row, in closed form (a single
  text is a pair with len_b 0: it keeps min(len_a, room)).

  Args:
    len_a, len_b: int32 [B], each side's tokens.
    room: int or int32 [B], the places both sides share.
  """
  fits = len_a + len_b <= room
  kept_a = tf.minimum(len_a, tf.maximum((room + 1) // 2, room - len_b))
  kept_b = tf.minimum(len_b, room - kept_a)
  return tf.where(fits, len_a, kept_a), tf.where(fits, len_b, kept_b)


def head_count(kept, cap, mode, head_tokens=None):
  """int32 [B]: how many of the `kept` tokens (int32 [B]) come from the head under `mode`, for
  rows of capacity `cap` (int32 [B]): long_text.head_count's rule for head_tail, rounding half
  to even as Python's round, in float64 as Python's floats."""
  if mode == long_text.HEAD:
    return kept
  if mode == long_text.TAIL:
    return tf.zeros_like(kept)
  cap = tf.cast(cap, tf.float64)
  head = (tf.round(cap * long_text.DEFAULT_HEAD_SHARE) if head_tokens is None
          else tf.fill(tf.shape(cap), tf.constant(head_tokens, tf.float64)))
  share = tf.round(tf.cast(kept, tf.float64) * head / cap)
  return tf.minimum(kept, tf.cast(share, tf.int32))


def keep_mask(ids, count, cap, mode, head_tokens=None):
  """Ragged bool like `ids` ([B, (n)]): the `count` (int32 [B]) tokens `mode` keeps of each row,
  its first h and last count - h (h = head_count; cap: int32 [B])."""
  length = tf.cast(ids.row_lengths(), tf.int32)
  head = head_count(count, cap, mode, head_tokens)
  position = tf.ragged.range(length)
  row = tf.cast(position.value_rowids(), tf.int32)
  tail_start = tf.gather(length - (count - head), row)
  keep = tf.logical_or(position.flat_values < tf.gather(head, row),
                       position.flat_values >= tail_start)
  return position.with_flat_values(keep)


def lay_out(ids_a, ids_b, seq_length, special_ids, options, has_b=None):
  """Model inputs of a batch of tokenized texts (pairs when ids_b is given).

  Args:
    ids_a, ids_b: int64 ragged [B, (tokens)] (ids_b None: single texts).
    seq_length: int, the model's sequence length S.
    special_ids: (cls id, sep id).
    options: long_text.Options (mode one of SERVED_MODES).
    has_b: bool [B], the rows whose text_b is not the empty string (run_classifier reads an
      empty text_b as none: a single text, and such a row must have no ids_b); default every
      row when ids_b is given.

  Returns:
    {"input_ids", "input_mask", "segment_ids"}: int32 [B, S]; "truncated": bool [B], a row
    that lost tokens; "num_tokens": int32 [B], the text's tokens before cutting.
  """
  if options.mode not in SERVED_MODES:
    raise ValueError("--long_text=%s cannot be served (one row a text): served are %s" % (
        options.mode, ", ".join(SERVED_MODES)))
  len_a = tf.cast(ids_a.row_lengths(), tf.int32)
  batch = tf.shape(len_a)[0]
  if ids_b is None:
    ids_b = tf.RaggedTensor.from_row_lengths(tf.zeros([0], tf.int64), tf.zeros([batch], tf.int64))
    has_b = tf.zeros([batch], tf.bool)
  elif has_b is None:
    has_b = tf.ones([batch], tf.bool)
  len_b = tf.cast(ids_b.row_lengths(), tf.int32)
  cap = tf.where(has_b, long_text.capacity(seq_length, pair=True),
                 long_text.capacity(seq_length))
  counts = pair_counts(len_a, len_b, cap)
  cls = tf.fill([batch, 1], tf.constant(special_ids[0], tf.int64))
  sep = tf.fill([batch, 1], tf.constant(special_ids[1], tf.int64))
  sep_b = tf.ragged.boolean_mask(sep, has_b[:, None])
  pieces, segments = [cls], [tf.zeros([batch, 1], tf.int64)]
  for side, (ids, count, closing) in enumerate(zip((ids_a, ids_b), counts, (sep, sep_b))):
    kept = tf.ragged.boolean_mask(ids, keep_mask(ids, count, cap, options.mode,
                                                 options.head_tokens))
    pieces += [kept, closing]
    segments += [tf.ones_like(kept) * side, tf.ones_like(closing) * side]
  tokens = tf.concat(pieces, axis=1)
  segment_ids = tf.concat(segments, axis=1)
  shape = [None, seq_length]
  return {
      "input_ids": tf.cast(tokens.to_tensor(0, shape=shape), tf.int32),
      "input_mask": tf.cast(tf.ones_like(tokens).to_tensor(0, shape=shape), tf.int32),
      "segment_ids": tf.cast(segment_ids.to_tensor(0, shape=shape), tf.int32),
      "truncated": (counts[0] < len_a) | (counts[1] < len_b),
      "num_tokens": len_a + len_b,
  }


def text_specs(pairs):
  """The raw-text signature's inputs: text tf.string [B] (and text_b [B] when `pairs`)."""
  return [tf.TensorSpec([None], tf.string, name) for name in ("text", "text_b")[:1 + bool(pairs)]]


def lay_out_texts(tokenizer, text, text_b, seq_length, special_ids, options):
  """lay_out of raw texts: text, text_b tf.string [B] (text_b None: single texts; an empty
  text_b reads the row as a single text, as run_classifier and extract_features do) tokenized by
  `tokenizer` (graph_tokenizer.GraphTokenizer). Returns lay_out's dict."""
  ids_b = has_b = None
  if text_b is not None:
    ids_b, has_b = tokenizer.token_ids(text_b), tf.strings.length(text_b) > 0
  return lay_out(tokenizer.token_ids(text), ids_b, seq_length, special_ids, options, has_b)
