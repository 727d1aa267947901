"""Accounting of a create_pretraining_data run, written as `<prefix>.stats.json` beside the output.

Invariant: documents_read == documents_used + sum(documents_skipped.values()).
`length_histogram` maps real token count (incl. [CLS]/[SEP]) -> number of instances; the packing
tool consumes it. padding_fraction = padded positions / (instances * max_seq_length).
"""
import collections

_COUNTERS = ("documents_read", "documents_used", "instances", "next_sentence_random", "tokens",
             "unk_tokens", "masked_tokens", "masked_positions_with_mask_token",
             "overlong_sentences")


class PretrainingStats(object):
  """Mergeable counters (workers fill one per block, the parent merges them). Each statistic has
  one name, used for the attribute, the JSON key and the C kernel's counter:
    tokens                            real (unpadded) ids, [CLS]/[SEP] included
    unk_tokens                        [UNK] among the original (pre-masking) ids
    masked_tokens                     masked-LM predictions (masked_lm_positions)
    masked_positions_with_mask_token  predictions whose input id is [MASK] (the 80% rule, plus a
                                      random replacement or a kept token that happens to be [MASK])
    next_sentence_random              instances with next_sentence_label 1
    overlong_sentences                sentences longer than an instance holds (objective bert:
                                      max_seq_length - 3 tokens), which google's algorithm cuts
                                      to fit (count_overlong)
  """

  def __init__(self):
    for name in _COUNTERS:
      setattr(self, name, 0)
    self.documents_skipped = collections.Counter()
    self.length_histogram = collections.Counter()

  def add_skip(self, reason):
    """Counts a document read and skipped for `reason` (a documents_skipped key)."""
    self.documents_read += 1
    self.documents_skipped[reason] += 1

  def add_used(self):
    """Counts a document read and used."""
    self.documents_read += 1
    self.documents_used += 1

  def count_overlong(self, sentence_lengths, max_num_tokens):
    """Counts the sentences (token counts) longer than max_num_tokens (None: none can be)."""
    if max_num_tokens is not None:
      self.overlong_sentences += sum(1 for n in sentence_lengths if n > max_num_tokens)

  def add_instance(self, input_ids, masked_lm_positions, masked_lm_ids, next_sentence_label,
                   mask_id, unk_id):
    """Counts one instance.

    Args:
      input_ids: list, the real (unpadded) ids after masking.
      masked_lm_positions: list, the predicted positions.
      masked_lm_ids: list, the original ids at masked_lm_positions.
      next_sentence_label: 0 or 1.
      mask_id, unk_id: the [MASK] and [UNK] ids.
    """
    at_positions = [input_ids[p] for p in masked_lm_positions]
    self.instances += 1
    self.tokens += len(input_ids)
    self.unk_tokens += (input_ids.count(unk_id) - at_positions.count(unk_id)
                        + masked_lm_ids.count(unk_id))
    self.masked_tokens += len(masked_lm_positions)
    self.masked_positions_with_mask_token += at_positions.count(mask_id)
    self.next_sentence_random += next_sentence_label
    self.length_histogram[len(input_ids)] += 1

  def add_totals(self, instances, tokens, unk_tokens, masked_tokens,
                 masked_positions_with_mask_token, next_sentence_random, length_histogram):
    """add_instance summed over many instances (the C kernel's counters).

    Args:
      instances ... next_sentence_random: the sums of the counters of the same names.
      length_histogram: list [max_len + 1] of counts.
    """
    self.instances += instances
    self.tokens += tokens
    self.unk_tokens += unk_tokens
    self.masked_tokens += masked_tokens
    self.masked_positions_with_mask_token += masked_positions_with_mask_token
    self.next_sentence_random += next_sentence_random
    self.length_histogram.update({n: c for n, c in enumerate(length_histogram) if c})

  def merge(self, other):
    """Adds another PretrainingStats' counts into this one; returns self."""
    for name in _COUNTERS:
      setattr(self, name, getattr(self, name) + getattr(other, name))
    self.documents_skipped.update(other.documents_skipped)
    self.length_histogram.update(other.length_histogram)
    return self

  def state(self):
    """The counters as a JSON-able dict (from_state rebuilds them; parts of a multi-rank run)."""
    out = {name: getattr(self, name) for name in _COUNTERS}
    out["documents_skipped"] = dict(self.documents_skipped)
    out["length_histogram"] = {str(k): v for k, v in self.length_histogram.items()}
    return out

  @classmethod
  def from_state(cls, state):
    """The PretrainingStats of a state() dict."""
    stats = cls()
    for name in _COUNTERS:
      setattr(stats, name, state[name])
    stats.documents_skipped.update(state["documents_skipped"])
    stats.length_histogram.update({int(k): v for k, v in state["length_histogram"].items()})
    return stats

  def to_json(self, max_seq_length, extra=None):
    """The stats JSON dict: every counter, and padding_fraction, masked_tokens_per_instance and
    unk_rate derived with max_seq_length, then the `extra` dict's keys (they win)."""
    slots = self.instances * max_seq_length
    out = {
        "documents_read": self.documents_read,
        "documents_used": self.documents_used,
        "documents_skipped": dict(sorted(self.documents_skipped.items())),
        "instances": self.instances,
        "next_sentence_random": self.next_sentence_random,
        "tokens": self.tokens,
        "max_seq_length": max_seq_length,
        "padding_fraction": (slots - self.tokens) / slots if slots else 0.0,
        "masked_tokens": self.masked_tokens,
        "masked_tokens_per_instance": self.masked_tokens / self.instances if self.instances else 0.0,
        "masked_positions_with_mask_token": self.masked_positions_with_mask_token,
        "unk_tokens": self.unk_tokens,
        "unk_rate": self.unk_tokens / self.tokens if self.tokens else 0.0,
        "overlong_sentences": self.overlong_sentences,
        "length_histogram": {str(k): v for k, v in sorted(self.length_histogram.items())},
    }
    out.update(extra or {})
    return out
