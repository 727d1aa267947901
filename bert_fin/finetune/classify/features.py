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
from bert_fin.tokenization import special_tokens as special

LABEL_IDS = batches.LABEL_IDS

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
  """[(tokens_a, tokens_b or None)] of one example's rows, and whether it was longer than fit."""
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


def encode(examples, labels, tokenizer, max_seq_length, options=long_text.DEFAULT):
  """Tokenizes and lays out `examples` (tasks.Example list). Returns Encoded.

  labels: the label list (label -> its index); tokenizer: a FullTokenizer-like object with
  tokenize_batch and vocab; options: long_text.Options (default: google's head). ValueError for a
  pair under chunks (check first_pair before).
  """
  if max_seq_length < 3:
    raise ValueError("max_seq_length must be >= 3 ([CLS] A [SEP]), got %d" % max_seq_length)
  label_index = {label: i for i, label in enumerate(labels)}
  pieces_a = tokenizer.tokenize_batch([example.text_a for example in examples])
  pairs = [i for i, example in enumerate(examples) if example.text_b]
  pieces_b = dict(zip(pairs, tokenizer.tokenize_batch([examples[i].text_b for i in pairs])))
  rows, doc_index, truncated = [], [], 0
  for index in range(len(examples)):
    example_rows, longer = _row_pieces(list(pieces_a[index]), pieces_b.get(index),
                                       max_seq_length, options)
    truncated += longer
    rows += example_rows
    doc_index += [index] * len(example_rows)
  arrays = _lay_out(rows, tokenizer, max_seq_length)
  arrays[LABEL_IDS] = np.array([label_index[examples[i].label] if examples[i].label is not None
                                else 0 for i in doc_index], np.int32).reshape([len(rows)])
  return Encoded(arrays, truncated, np.array(doc_index, np.int32).reshape([len(rows)]),
                 len(examples))


def _lay_out(rows, tokenizer, max_seq_length):
  """{input_ids, input_len, segment_ids} of rows [(tokens_a, tokens_b or None)] that fit."""
  cls_id, sep_id = tokenizer.vocab[special.CLS], tokenizer.vocab[special.SEP]
  num = len(rows)
  arrays = {
      records.INPUT_IDS: np.zeros([num, max_seq_length], np.int32),
      records.INPUT_LEN: np.zeros([num], np.int32),
      records.SEGMENT_IDS: np.zeros([num, max_seq_length], np.int32),
  }
  for row, (tokens_a, tokens_b) in enumerate(rows):
    ids = [cls_id] + tokenizer.convert_tokens_to_ids(tokens_a) + [sep_id]
    length_a = len(ids)
    if tokens_b is not None:
      ids += tokenizer.convert_tokens_to_ids(tokens_b) + [sep_id]
    arrays[records.INPUT_IDS][row, :len(ids)] = ids
    arrays[records.SEGMENT_IDS][row, length_a:len(ids)] = 1
    arrays[records.INPUT_LEN][row] = len(ids)
  return arrays
