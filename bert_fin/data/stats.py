"""Accounting of a create_pretraining_data run, written as `<prefix>.stats.json` beside the output.

Invariant: documents_read == documents_used + sum(documents_skipped.values()).
`length_histogram` maps real token count (incl. [CLS]/[SEP]) -> number of instances; the packing
tool consumes it. padding_fraction = padded positions / (instances * max_seq_length).
"""
import collections


class PretrainingStats(object):
  """Mergeable counters (workers fill one per block, the parent merges them)."""

  def __init__(self):
    self.documents_read = 0
    self.documents_used = 0
    self.documents_skipped = collections.Counter()
    self.instances = 0
    self.next_sentence_random = 0
    self.tokens = 0
    self.unk_tokens = 0
    self.masked_tokens = 0
    self.masked_kept_as_mask = 0
    self.length_histogram = collections.Counter()

  def add_skip(self, reason):
    self.documents_read += 1
    self.documents_skipped[reason] += 1

  def add_used(self):
    self.documents_read += 1
    self.documents_used += 1

  def add_instance(self, input_ids, masked_lm_positions, output_ids_at_positions_masked,
                   next_sentence_label, unk_count):
    """input_ids: the real (unpadded) ids; output_ids_at_positions_masked: how many predicted
    positions hold [MASK]; unk_count: [UNK] tokens among the original (pre-masking) ids."""
    self.add_counts(len(input_ids), len(masked_lm_positions), output_ids_at_positions_masked,
                    next_sentence_label, unk_count)

  def add_counts(self, num_tokens, num_masked, num_mask_tokens, next_sentence_label, unk_count):
    """add_instance from counts: num_tokens real ids, num_masked predictions of which
    num_mask_tokens hold [MASK], unk_count [UNK] among the original ids."""
    self.instances += 1
    self.tokens += num_tokens
    self.unk_tokens += unk_count
    self.masked_tokens += num_masked
    self.masked_kept_as_mask += num_mask_tokens
    self.next_sentence_random += next_sentence_label
    self.length_histogram[num_tokens] += 1

  def add_totals(self, instances, tokens, unk_tokens, masked_tokens, masked_kept_as_mask,
                 next_sentence_random, length_histogram):
    """add_counts summed over many instances; length_histogram: list [max_len + 1] of counts."""
    self.instances += instances
    self.tokens += tokens
    self.unk_tokens += unk_tokens
    self.masked_tokens += masked_tokens
    self.masked_kept_as_mask += masked_kept_as_mask
    self.next_sentence_random += next_sentence_random
    self.length_histogram.update({n: c for n, c in enumerate(length_histogram) if c})

  def merge(self, other):
    for name in ("documents_read", "documents_used", "instances", "next_sentence_random", "tokens",
                 "unk_tokens", "masked_tokens", "masked_kept_as_mask"):
      setattr(self, name, getattr(self, name) + getattr(other, name))
    self.documents_skipped.update(other.documents_skipped)
    self.length_histogram.update(other.length_histogram)
    return self

  def to_json(self, max_seq_length, extra=None):
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
        "masked_positions_with_mask_token": self.masked_kept_as_mask,
        "unk_tokens": self.unk_tokens,
        "unk_rate": self.unk_tokens / self.tokens if self.tokens else 0.0,
        "length_histogram": {str(k): v for k, v in sorted(self.length_histogram.items())},
    }
    out.update(extra or {})
    return out
