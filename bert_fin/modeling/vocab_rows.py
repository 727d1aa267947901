"""A checkpoint's vocab-sized variables grown to an adapted vocab, every old row kept bit for bit.

google's BERT has two variables indexed by token id:
  bert/embeddings/word_embeddings   float [vocab_size, hidden_size]  (also the tied MLM decoder)
  cls/predictions/output_bias       float [vocab_size]               (MLM head; absent in an
                                                                      encoder-only checkpoint)
`grow(tensors, new_size, new_ids, reference_ids, init)` returns the tensors with rows for ids
>= the old size appended and the rows of `new_ids` (filled [unusedN] slots and appended ids)
initialised; every other row is copied unchanged. Initialisation (the same for every new row):
  init "mean": the mean of the rows of reference_ids (the ordinary tokens of the base vocab: not
               [PAD], [unusedN] or the special tokens), embedding and bias alike: a new token
               starts as an average token;
  init "unk":  the [UNK] row (embedding and bias): text that was [UNK] starts out meaning to the
               model what [UNK] meant.
The rows of filled [unusedN] slots are re-initialised too: those rows were never an input, and
their bias was trained to keep them from being predicted. Computed in float64, stored in the
variable's dtype.
"""
import numpy as np

WORD_EMBEDDINGS = "bert/embeddings/word_embeddings"
MLM_OUTPUT_BIAS = "cls/predictions/output_bias"
VOCAB_SIZED = (WORD_EMBEDDINGS, MLM_OUTPUT_BIAS)
INITS = ("mean", "unk")


def vocab_rows(tensors):
  """The checkpoint's vocab size: the rows of its word embeddings.

  Args:
    tensors: {google name: np.ndarray} (checkpoint.model_tensors).

  Returns:
    int.

  Raises:
    ValueError: tensors has no bert/embeddings/word_embeddings.
  """
  if WORD_EMBEDDINGS not in tensors:
    raise ValueError("the checkpoint has no %s: not a BERT checkpoint with google's names"
                     % WORD_EMBEDDINGS)
  return tensors[WORD_EMBEDDINGS].shape[0]


def _initial_row(table, reference_ids, unk_id, init):
  if init == "unk":
    return table[unk_id]
  return table[np.asarray(reference_ids)].astype(np.float64).mean(axis=0).astype(table.dtype)


def grow(tensors, new_size, new_ids, reference_ids, unk_id, init="mean"):
  """Grows the vocab-sized arrays to new_size rows (see the module docstring).

  Args:
    tensors: {google name: np.ndarray} of a checkpoint.
    new_size: the adapted vocab size, >= the checkpoint's.
    new_ids: ids (< new_size) to initialise; must cover every id >= the old size.
    reference_ids: the ids whose mean is the "mean" initialisation.
    unk_id: the [UNK] id (the "unk" initialisation).
    init: "mean" or "unk".

  Returns:
    {name: array}: a new dict with the VOCAB_SIZED arrays present grown to new_size rows; the
    other arrays are the same objects.

  Raises:
    ValueError: unknown init, new_size below the old size, new rows not in new_ids, no word
      embeddings, or a vocab-sized array whose rows differ from the word embeddings'.
  """
  if init not in INITS:
    raise ValueError("init must be one of %s, got %r" % (INITS, init))
  old_size = vocab_rows(tensors)
  if new_size < old_size:
    raise ValueError("new vocab size %d below the checkpoint's %d" % (new_size, old_size))
  uncovered = sorted(set(range(old_size, new_size)) - set(new_ids))
  if uncovered:
    raise ValueError("new rows %s have no initialisation (not in new_ids)" % uncovered[:5])
  out = dict(tensors)
  for name in VOCAB_SIZED:
    if name not in tensors:
      continue
    table = tensors[name]
    if table.shape[0] != old_size:
      raise ValueError("%s has %d rows, %s %d: the checkpoint is inconsistent"
                       % (name, table.shape[0], WORD_EMBEDDINGS, old_size))
    grown = np.empty((new_size,) + table.shape[1:], dtype=table.dtype)
    grown[:old_size] = table
    grown[list(new_ids)] = _initial_row(table, reference_ids, unk_id, init)
    out[name] = grown
  return out
