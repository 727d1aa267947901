"""Examples -> model inputs, as google's convert_single_example, and the Estimator input_fn.

One example becomes [CLS] A [SEP] (B [SEP]) with segment ids 0 for A and 1 for B, zero-padded to
max_seq_length; a text longer than fit is read as --long_text says (long_text.py): google's
head by default (a pair cut by google's _truncate_seq_pair, longer side first), its tail, its head
and tail, or windows (chunks: one row a window, each with the example's label). bert_fin's model
takes the real length (`input_len`) instead of google's input_mask.

Arrays (numpy, one row a window: an example, or one of its windows in chunks; in example order):
  input_ids int32 [R, S], input_len int32 [R], segment_ids int32 [R, S], label_ids int32 [R]
  (test examples without a label get 0; their label_ids are never read).
"""
import collections

import numpy as np

from bert_fin.records import schema as records
from bert_fin.finetune import batches
from bert_fin.finetune.classify import long_text
from bert_fin.tokenization import bounded
from bert_fin.tokenization import special_tokens as special

LABEL_IDS = batches.LABEL_IDS
GROUP_EXAMPLES = 512  # examples tokenized at a time
OMITTED_ID = -1  # the id of bounded.OMITTED in a stand-in

Encoded = collections.namedtuple("Encoded", ["arrays", "truncated", "doc_index", "num_examples"])
Encoded.__doc__ = """arrays: {feature name: np.ndarray [R, ...]} (module docstring); truncated:
examples longer than fit (long_text's count); doc_index: int32 [R], the example of each row;
num_examples: the examples encoded (R == num_examples unless chunks cut some)."""


def truncate_seq_pair(tokens_a, tokens_b, max_length):
  """google's rule, in place: drop the last token of the longer list until both fit."""
  kept_a, kept_b = long_text.pair_counts(len(tokens_a), len(tokens_b), max_length)
  del tokens_a[kept_a:], tokens_b[kept_b:]


def first_pair(examples):
  """The first example with a text_b (a pair), or None."""
  return next((example for example in examples if example.text_b), None)


def _row_pieces(pieces_a, pieces_b, max_seq_length, options):
  """[(ids_a, ids_b or None)] of one example's rows, and whether it was longer than fit.
  pieces_a / pieces_b: the text's token ids (a list; chunks: all of them, int32 [n]), or their
  stand-in (long_text.keep's reads, see _text_ids)."""
  if options.mode == long_text.CHUNKS:
    if pieces_b is not None:
      raise ValueError("--long_text=chunks windows single texts, got a pair (text_b)")
    cap = long_text.capacity(max_seq_length)
    starts = long_text.window_starts(len(pieces_a), cap,
                                     long_text.doc_stride_of(cap, options.doc_stride))
    return [(pieces_a[start:start + cap], None) for start in starts], len(starts) > 1
  if pieces_b is None:
    cap = long_text.capacity(max_seq_length)
    kept = long_text.keep(pieces_a, cap, options.mode, cap, options.head_tokens)
    return [(kept, None)], len(kept) < len(pieces_a)
  cap = long_text.capacity(max_seq_length, pair=True)
  count_a, count_b = long_text.pair_counts(len(pieces_a), len(pieces_b), cap)
  kept_a = long_text.keep(pieces_a, count_a, options.mode, cap, options.head_tokens)
  kept_b = long_text.keep(pieces_b, count_b, options.mode, cap, options.head_tokens)
  return [(kept_a, kept_b)], len(kept_a) + len(kept_b) < len(pieces_a) + len(pieces_b)


def read_ends(mode, cap):
  """(head, tail): the first and last tokens `mode` may read of a text when a row has `cap`
  places (a single text's capacity: a pair's sides keep fewer, and a stand-in of more than cap
  tokens gets pair_counts' answer of the real length)."""
  return {long_text.HEAD: (cap, 0), long_text.TAIL: (0, cap)}.get(mode, (cap, cap))


def _ids(tokenizer, tokens):
  """The ids of tokens, OMITTED_ID for bounded.OMITTED (never read: _lay_out checks)."""
  if bounded.OMITTED not in tokens:
    return tokenizer.convert_tokens_to_ids(tokens)
  at = tokens.index(bounded.OMITTED)
  return (tokenizer.convert_tokens_to_ids(tokens[:at]) + [OMITTED_ID] +
          tokenizer.convert_tokens_to_ids(tokens[at + 1:]))


def _text_ids(tokenizer, texts, mode, cap):
  """For each text: its token ids (chunks: int32 [n], all of them), or the ids of its
  bounded.tokenize_ends stand-in (read_ends): a long text is tokenized only as far as it is
  read (bounded.tokenize_batch_ends)."""
  if mode == long_text.CHUNKS:
    return [bounded.token_ids(tokenizer, text) for text in texts]
  head, tail = read_ends(mode, cap)
  return [_ids(tokenizer, tokens)
          for tokens in bounded.tokenize_batch_ends(tokenizer, texts, head, tail)]


def encode(examples, labels, tokenizer, max_seq_length, options=long_text.DEFAULT):
  """Tokenizes and lays out `examples` (tasks.Example list). Returns Encoded.

  labels: the label list (label -> its index); tokenizer: a FullTokenizer-like object with
  tokenize, tokenize_batch, convert_tokens_to_ids and vocab; options: long_text.Options
  (default: google's head). A text is tokenized only as far as options.mode reads it (the same
  tokens as tokenizing it whole), GROUP_EXAMPLES examples at a time. ValueError for a pair
  under chunks (check first_pair before).
  """
  if max_seq_length < 3:
    raise ValueError("max_seq_length must be >= 3 ([CLS] A [SEP]), got %d" % max_seq_length)
  label_index = {label: i for i, label in enumerate(labels)}
  rows, doc_index, truncated = [], [], 0
  cap = long_text.capacity(max_seq_length)  # a pair's side reads fewer (read_ends)
  for first in range(0, len(examples), GROUP_EXAMPLES):
    group = examples[first:first + GROUP_EXAMPLES]
    pairs = [i for i, example in enumerate(group) if example.text_b]
    pieces_a = _text_ids(tokenizer, [example.text_a for example in group], options.mode, cap)
    pieces_b = dict(zip(pairs, _text_ids(tokenizer, [group[i].text_b for i in pairs],
                                         options.mode, cap)))
    for index in range(len(group)):
      example_rows, longer = _row_pieces(pieces_a[index], pieces_b.get(index), max_seq_length,
                                         options)
      truncated += longer
      rows += example_rows
      doc_index += [first + index] * len(example_rows)
  arrays = _lay_out(rows, tokenizer, max_seq_length)
  arrays[LABEL_IDS] = np.array([label_index[examples[i].label] if examples[i].label is not None
                                else 0 for i in doc_index], np.int32).reshape([len(rows)])
  return Encoded(arrays, truncated, np.array(doc_index, np.int32).reshape([len(rows)]),
                 len(examples))


def _lay_out(rows, tokenizer, max_seq_length):
  """{input_ids, input_len, segment_ids} of rows [(ids_a, ids_b or None)] that fit."""
  cls_id, sep_id = tokenizer.vocab[special.CLS], tokenizer.vocab[special.SEP]
  num = len(rows)
  arrays = {
      records.INPUT_IDS: np.zeros([num, max_seq_length], np.int32),
      records.INPUT_LEN: np.zeros([num], np.int32),
      records.SEGMENT_IDS: np.zeros([num, max_seq_length], np.int32),
  }
  input_ids, segment_ids = arrays[records.INPUT_IDS], arrays[records.SEGMENT_IDS]
  for row, (ids_a, ids_b) in enumerate(rows):
    length = len(ids_a) + 2
    input_ids[row, 0], input_ids[row, 1:length - 1], input_ids[row, length - 1] = (
        cls_id, ids_a, sep_id)
    if ids_b is not None:
      end = length + len(ids_b) + 1
      input_ids[row, length:end - 1], input_ids[row, end - 1] = ids_b, sep_id
      segment_ids[row, length:end] = 1
      length = end
    arrays[records.INPUT_LEN][row] = length
  if (input_ids == OMITTED_ID).any():
    raise RuntimeError("a row reads a token tokenize_ends left out: read_ends is wrong")
  return arrays
