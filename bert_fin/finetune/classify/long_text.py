"""Texts longer than --max_seq_length: which tokens a classifier reads (--long_text), pure Python.

A text of n WordPiece tokens has `capacity` = max_seq_length - 2 places ([CLS] text [SEP]); a
pair (text_a, text_b) shares max_seq_length - 3 places between its sides, each side's count
decided by google's _truncate_seq_pair (the longer side loses a token first). When a side holds
more tokens than its count k, --long_text picks which k it keeps:

  head       its first k tokens (google's run_classifier: the default);
  tail       its last k tokens;
  head_tail  its first h and last k - h tokens, h = round(k * head_tokens / capacity): at the
             whole capacity, exactly --head_tokens (default: DEFAULT_HEAD_SHARE of the capacity,
             Sun et al. 2019's 128 head + 382 tail tokens of 510 at max_seq_length 512); a pair's
             side keeps the same share of its own count;
  chunks     the text is cut into windows of `capacity` tokens, one starting every --doc_stride
             tokens (default: half the capacity) until a window reaches the text's end (the last
             window may be shorter; google's run_squad doc spans). Every window is a row with the
             document's label (training) and a document's prediction pools its windows' logits
             (--chunk_pooling mean or max; pool_logits). Single texts only: a pair is refused
             (pairs are short: use head_tail, which cuts each side).

A text that fits is kept whole in every mode (one window in chunks). Counting: an example is
"longer than fit" when any of its tokens is left out (head / tail / head_tail) or when it needs
more than one window (chunks).
"""
import collections

import numpy as np

from bert_fin.finetune import token_windows

# The cuts of one row (token_windows.py: the ONNX client of every export reads the same rules).
HEAD, TAIL, HEAD_TAIL = token_windows.HEAD, token_windows.TAIL, token_windows.HEAD_TAIL
DEFAULT_HEAD_SHARE = token_windows.DEFAULT_HEAD_SHARE
head_tokens_at = token_windows.head_tokens_at
pair_counts = token_windows.pair_counts
head_count = token_windows.head_count
keep = token_windows.keep
CHUNKS = "chunks"
MODES = (HEAD, TAIL, HEAD_TAIL, CHUNKS)
MEAN, MAX = "mean", "max"
CHUNK_POOLINGS = (MEAN, MAX)

Options = collections.namedtuple("Options", ["mode", "head_tokens", "doc_stride", "chunk_pooling"])
Options.__doc__ = """How long texts are read: mode (MODES); head_tokens (head_tail: the head's
tokens at the whole capacity; None: the default share); doc_stride (chunks: tokens between window
starts; None: half the capacity); chunk_pooling (chunks: MEAN or MAX)."""
DEFAULT = Options(HEAD, None, None, MEAN)


def capacity(max_seq_length, pair=False):
  """Text tokens a row holds: max_seq_length - 2 ([CLS] A [SEP]), - 3 for a pair."""
  return max_seq_length - (3 if pair else 2)


def doc_stride_of(cap, doc_stride=None):
  """Tokens between window starts: doc_stride, else half the capacity (at least 1)."""
  return doc_stride if doc_stride is not None else max(1, cap // 2)


def window_starts(length, window, stride):
  """Start positions of the windows over a text of `length` tokens: 0, stride, 2 * stride, ...
  until a window of `window` tokens reaches the end; [0] for a text that fits (or is empty)."""
  if window < 1 or stride < 1:
    raise ValueError("window and stride must be >= 1, got %d and %d" % (window, stride))
  starts = [0]
  while starts[-1] + window < length:
    starts.append(starts[-1] + stride)
  return starts


def pool_logits(logits, doc_index, num_docs, how=MEAN):
  """float64 [num_docs, L]: the logits of each document from its windows' rows.

  logits: float [W, L], one row a window; doc_index: int [W], the document of each row (every
  document 0..num_docs-1 has at least one row). how: MEAN (average of the windows' logits) or MAX
  (element-wise maximum). ValueError when a document has no row.
  """
  logits = np.asarray(logits, np.float64)
  doc_index = np.asarray(doc_index, np.int64)
  counts = np.bincount(doc_index, minlength=num_docs)
  if len(counts) != num_docs or (counts == 0).any():
    raise ValueError("pool_logits: every one of %d documents needs a window (counts %s)" % (
        num_docs, counts.tolist()[:10]))
  if how == MEAN:
    sums = np.zeros([num_docs, logits.shape[1]])
    np.add.at(sums, doc_index, logits)
    return sums / counts[:, None]
  if how == MAX:
    pooled = np.full([num_docs, logits.shape[1]], -np.inf)
    np.maximum.at(pooled, doc_index, logits)
    return pooled
  raise ValueError("chunk pooling must be one of %s, got %r" % (", ".join(CHUNK_POOLINGS), how))


def softmax(logits):
  """float64 [N, L] probabilities of logits [N, L] (rows sum to 1)."""
  shifted = np.asarray(logits, np.float64) - np.max(logits, axis=-1, keepdims=True)
  exp = np.exp(shifted)
  return exp / exp.sum(axis=-1, keepdims=True)


def describe(split, longer, total, max_seq_length, options, rows=None):
  """One line: how many of a split's examples were longer than fit, and what was done with them
  (rows: the windows of chunks)."""
  if options.mode == CHUNKS:
    cap = capacity(max_seq_length)
    done = "cut into windows of %d tokens every %d: %d rows" % (
        cap, doc_stride_of(cap, options.doc_stride), rows if rows is not None else total)
  elif options.mode == HEAD_TAIL:
    cap = capacity(max_seq_length)
    head = head_tokens_at(cap, options.head_tokens)
    done = "cut to their first %d and last %d tokens" % (head, cap - head)
  else:
    done = "cut to their %s" % options.mode
  return "%s: %d of %d examples longer than max_seq_length %d (%s)" % (
      split, longer, total, max_seq_length, done)
