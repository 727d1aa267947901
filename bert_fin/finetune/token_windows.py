"""Which tokens a row reads, pure Python + numpy: a pair's counts, a long side's kept tokens,
run_squad's windows over a long context.

The one home of these rules for bert_fin (classify/long_text.py, classify/features.py,
squad/features.py) and for the ONNX client of every export: this file imports nothing of
bert_fin, so serving/export.py copies it beside onnx_client.py, which imports it as a sibling.

  pair_counts        google's _truncate_seq_pair: the longer side (B on a tie) loses a token
                     until the pair fits;
  keep               the `count` tokens a side keeps: its head, its tail, or its head and tail
                     (--long_text head / tail / head_tail; head_count's share of the head);
  doc_spans          google's run_squad doc spans: windows of room tokens, the next starting
                     min(length, doc_stride) later, until one reaches the end;
  max_context_spans  google's _check_is_max_context: the window where a token has the most
                     context (min(left, right) + 0.01 * window length; the first of equals).
"""
import numpy as np

HEAD, TAIL, HEAD_TAIL = "head", "tail", "head_tail"
# Sun et al. 2019 ("How to Fine-Tune BERT for Text Classification?"): head 128 + tail 382 of 510.
SUN_HEAD, SUN_CAPACITY = 128, 510
DEFAULT_HEAD_SHARE = float(SUN_HEAD) / SUN_CAPACITY


def head_tokens_at(cap, head_tokens=None):
  """The head_tail head at the whole capacity `cap`: head_tokens, else round(cap * 128 / 510)."""
  if head_tokens is None:
    return int(round(cap * DEFAULT_HEAD_SHARE))
  return head_tokens


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
  `tokens` itself when it fits. cap: the row's whole capacity (head_count's scale).

  Raises:
    ValueError: mode is none of HEAD, TAIL, HEAD_TAIL.
  """
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


def doc_spans(num_tokens, max_tokens_for_doc, doc_stride):
  """[(start, length)] of google's sliding windows over num_tokens context tokens."""
  spans, start = [], 0
  while start < num_tokens:
    length = min(num_tokens - start, max_tokens_for_doc)
    spans.append((start, length))
    if start + length == num_tokens:
      break
    start += min(length, doc_stride)
  return spans


def max_context_spans(spans, num_tokens):
  """int64 [num_tokens]: google's _check_is_max_context winner (the span index) of every token
  (-1 for a token no span holds)."""
  best_score = np.full([num_tokens], -1.0)
  best_span = np.full([num_tokens], -1, np.int64)
  for index, (start, length) in enumerate(spans):
    positions = np.arange(start, start + length)
    score = np.minimum(positions - start, start + length - 1 - positions) + 0.01 * length
    better = score > best_score[positions]
    best_score[positions[better]] = score[better]
    best_span[positions[better]] = index
  return best_span
