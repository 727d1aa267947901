"""Examples -> model inputs, as google's convert_single_example, and the Estimator input_fn.

One example becomes [CLS] A [SEP] (B [SEP]) with segment ids 0 for A and 1 for B, zero-padded to
max_seq_length; the pair is cut by google's _truncate_seq_pair (longer side first). bert_fin's
model takes the real length (`input_len`) instead of google's input_mask.

Arrays (numpy, one row an example, in example order):
  input_ids int32 [N, S], input_len int32 [N], segment_ids int32 [N, S], label_ids int32 [N]
  (test examples without a label get 0; their label_ids are never read).
"""
import collections

import numpy as np

from bert_fin.records import schema as records
from bert_fin.finetune import batches
from bert_fin.tokenization import special_tokens as special

LABEL_IDS = batches.LABEL_IDS

Encoded = collections.namedtuple("Encoded", ["arrays", "truncated"])
Encoded.__doc__ = "arrays: {feature name: np.ndarray} (module docstring); truncated: int."


def truncate_seq_pair(tokens_a, tokens_b, max_length):
  """google's rule, in place: drop the last token of the longer list until both fit."""
  while len(tokens_a) + len(tokens_b) > max_length:
    (tokens_a if len(tokens_a) > len(tokens_b) else tokens_b).pop()


def encode(examples, labels, tokenizer, max_seq_length):
  """Tokenizes and lays out `examples` (tasks.Example list). Returns Encoded.

  labels: the label list (label -> its index); tokenizer: a FullTokenizer-like object with
  tokenize_batch and vocab.
  """
  if max_seq_length < 3:
    raise ValueError("max_seq_length must be >= 3 ([CLS] A [SEP]), got %d" % max_seq_length)
  label_index = {label: i for i, label in enumerate(labels)}
  pieces_a = tokenizer.tokenize_batch([example.text_a for example in examples])
  pairs = [i for i, example in enumerate(examples) if example.text_b]
  pieces_b = dict(zip(pairs, tokenizer.tokenize_batch([examples[i].text_b for i in pairs])))
  cls_id, sep_id = tokenizer.vocab[special.CLS], tokenizer.vocab[special.SEP]
  num = len(examples)
  arrays = {
      records.INPUT_IDS: np.zeros([num, max_seq_length], np.int32),
      records.INPUT_LEN: np.zeros([num], np.int32),
      records.SEGMENT_IDS: np.zeros([num, max_seq_length], np.int32),
      LABEL_IDS: np.zeros([num], np.int32),
  }
  truncated = 0
  for row, example in enumerate(examples):
    tokens_a, tokens_b = list(pieces_a[row]), list(pieces_b.get(row, []))
    before = len(tokens_a) + len(tokens_b)
    if row in pieces_b:
      truncate_seq_pair(tokens_a, tokens_b, max_seq_length - 3)
    else:
      del tokens_a[max_seq_length - 2:]
    truncated += len(tokens_a) + len(tokens_b) < before
    ids = [cls_id] + tokenizer.convert_tokens_to_ids(tokens_a) + [sep_id]
    length_a = len(ids)
    if row in pieces_b:
      ids += tokenizer.convert_tokens_to_ids(tokens_b) + [sep_id]
    arrays[records.INPUT_IDS][row, :len(ids)] = ids
    arrays[records.SEGMENT_IDS][row, length_a:len(ids)] = 1
    arrays[records.INPUT_LEN][row] = len(ids)
    if example.label is not None:
      arrays[LABEL_IDS][row] = label_index[example.label]
  return Encoded(arrays, truncated)
