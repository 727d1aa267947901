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

HEAD, TAIL, HEAD_TAIL, CHUNKS = "head", "tail", "head_tail", "chunks"
MODES = (HEAD, TAIL, HEAD_TAIL, CHUNKS)
MEAN, MAX = "mean", "max"
CHUNK_POOLINGS = (MEAN, MAX)
# Sun et al. 2019 ("How to Fine-Tune BERT for Text Classification?"): head 128 + tail 382 of 510.
SUN_HEAD, SUN_CAPACITY = 128, 510
DEFAULT_HEAD_SHARE = float(SUN_HEAD) / SUN_CAPACITY

Options = collections.namedtuple("Options", ["mode", "head_tokens", "doc_stride", "chunk_pooling"])
Options.__doc__ = """How long texts are read: mode (MODES); head_tokens (head_tail: the head's
tokens at the whole capacity; None: the default share); doc_stride (chunks: tokens between window
starts; None: half the capacity); chunk_pooling (chunks: MEAN or MAX)."""
DEFAULT = Options(HEAD, None, None, MEAN)


def capacity(max_seq_length, pair=False):
  """Text tokens a row holds: max_seq_length - 2 ([CLS] A [SEP]), - 3 for a pair."""
  return max_seq_length - (3 if pair else 2)


def head_tokens_at(cap, head_tokens=None):
  """The head_tail head at the whole capacity `cap`: head_tokens, else round(cap * 128 / 510)."""
  if head_tokens is None:
    return int(round(cap * DEFAULT_HEAD_SHARE))
  return head_tokens


def doc_stride_of(cap, doc_stride=None):
  """Tokens between window starts: doc_stride, else half the capacity (at least 1)."""
  return doc_stride if doc_stride is not None else max(1, cap // 2)


def pair_counts(len_a, len_b, max_length):
  """(kept_a, kept_b) of google's _truncate_seq_pair on lists of len_a and len_b tokens and room
  for max_length: while they do not fit, the longer side (B on a tie) loses a token."""
  while len_a + len_b > max_length:
    if len_a > len_b:
      len_a -= 1
    else:
      len_b -= 1
  return len_a, len_b


def head_count(kept, cap, head_tokens):
  """How many of `kept` tokens come from the head in head_tail: round(kept * head / cap), where
  head = head_tokens_at(cap, head_tokens); at kept == cap exactly that head."""
  return min(kept, int(round(kept * head_tokens_at(cap, head_tokens) / float(cap))))


def keep(tokens, count, mode, cap, head_tokens=None):
  """The `count` tokens `mode` (HEAD, TAIL, HEAD_TAIL) keeps of `tokens` (list), in text order;
  `tokens` itself when it fits. cap: the row's whole capacity (head_count's scale)."""
  if len(tokens) <= count:
    return tokens
  if mode == HEAD:
    return tokens[:count]
  if mode == TAIL:
    return tokens[len(tokens) - count:] if count else []
  if mode == HEAD_TAIL:
    head = head_count(count, cap, head_tokens)
    tail = count - head
    return tokens[:head] + (tokens[len(tokens) - tail:] if tail else [])
  raise ValueError("keep: mode must be one of %s, got %r" % (", ".join((HEAD, TAIL, HEAD_TAIL)),
                                                             mode))


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
