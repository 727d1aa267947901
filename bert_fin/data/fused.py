"""The fast pipeline's NSP path fused: pairing, whole-word masking and Example encoding per block.

`FusedBlock(documents, encoder, config, unk_id).document_records(position, rng, stats)` returns the
TFRecord-framed records of documents[position] for one dupe. It is the same computation as

    for inst in instances.create_document_instances(documents, position, config, rng):
      writer.tfrecord_frame(encoder.encode(*inst))

(objective "bert"): it makes the same rng calls in the same order, so for the same rng state it
returns the same bytes (tested), and keeps masking.py's contract (word groups masked whole,
google's num_to_predict and cap, 80/10/10 over config.random_ids, labels = the original ids).

What it saves: each document's token ids are varint-encoded once per block (`vbytes` with byte
offsets `voff`), so an instance's input_ids payload is a few byte slices spliced around the
replaced tokens instead of one table look-up per token; word groups are bisected out of the
document's word-begin list instead of being rebuilt from `starts`; [UNK] counts come from prefix
sums; no per-instance id lists are copied.
"""
import bisect
import collections
import itertools

from bert_fin.data import instances as instances_lib
from bert_fin.data import masking
from bert_fin.data import writer as writer_lib

# ids/starts [T], offsets [num_sentences + 1] as instances.PreparedDocument; begins: sorted indexes
# i with starts[i]; vbytes: the varints of ids concatenated; voff [T + 1]: token i is
# vbytes[voff[i]:voff[i + 1]]; unk_before [T + 1]: number of [UNK] among ids[:i].
FusedDocument = collections.namedtuple("FusedDocument", [
    "ids", "starts", "offsets", "begins", "vbytes", "voff", "unk_before"])


def fuse_document(prepared, varints, unk_id):
  """instances.PreparedDocument -> FusedDocument; varints: writer.varint_table-style list."""
  ids = prepared.ids
  pieces = list(map(varints.__getitem__, ids))
  voff = list(itertools.accumulate(map(len, pieces), initial=0))
  begins = list(itertools.compress(range(len(ids)), prepared.starts))
  unk_before = list(itertools.accumulate([i == unk_id for i in ids], initial=0))
  return FusedDocument(ids, prepared.starts, prepared.offsets, begins, b"".join(pieces), voff,
                       unk_before)


def group_bounds(document, lo, hi):
  """Word groups of document tokens [lo, hi) as boundaries [lo, ..., hi]: group g is
  [bounds[g], bounds[g + 1]); the first token always begins a group (masking.groups_from_starts)."""
  begins = document.begins
  bounds = begins[bisect.bisect_left(begins, lo):bisect.bisect_left(begins, hi)]
  if lo < hi and not document.starts[lo]:
    bounds.insert(0, lo)
  bounds.append(hi)
  return bounds


def choose_tokens(bounds_a, bounds_b, budget, random):
  """masking.choose_groups over A's groups then B's (the same draws): returns the chosen tokens of
  A and of B, each a sorted list of document indexes."""
  groups_a = len(bounds_a) - 1
  total = groups_a + len(bounds_b) - 1
  order = list(range(total))
  chosen_a, chosen_b = [], []
  count = 0
  for i in range(total):
    j = i + int(random() * (total - i))
    group = order[j]
    order[j] = order[i]
    if group < groups_a:
      begin, end, chosen = bounds_a[group], bounds_a[group + 1], chosen_a
    else:
      group -= groups_a
      begin, end, chosen = bounds_b[group], bounds_b[group + 1], chosen_b
    if count + end - begin > budget:
      continue
    chosen += range(begin, end)
    count += end - begin
    if count >= budget:
      break
  chosen_a.sort()
  chosen_b.sort()
  return chosen_a, chosen_b


def dupe_records_of(document_records, num_documents, rng, stats):
  """Calls document_records(position, rng, stats) for positions 0..num_documents-1 in order;
  returns (records, produced) with produced[d] True when document d gave at least one record."""
  records, produced = [], []
  for position in range(num_documents):
    made = document_records(position, rng, stats)
    produced.append(bool(made))
    records += made
  return records, produced


class FusedBlock(object):
  """One block's documents, fused once, for all dupes (see the module docstring)."""

  def __init__(self, documents, encoder, config, unk_id):
    """documents: list of list[instances.Sentence]; encoder: writer.ExampleEncoder;
    config: instances.InstanceConfig with objective "bert"."""
    varints = encoder.varints
    self.documents = [fuse_document(instances_lib.prepare_document(d), varints, unk_id)
                      for d in documents]
    self.encoder, self.config, self.varints = encoder, config, varints
    self._random_ids = config.random_ids
    self._scale = 10.0 * len(config.random_ids)
    self._last = len(config.random_ids) - 1
    self._mask_id, self._mask_bytes = config.mask_id, varints[config.mask_id]
    s = config.max_seq_length
    # segment ids of [CLS] A [SEP] B [SEP] = _segments[s - (na + 2):s + nb + 1]
    self._segments = b"\x00" * s + b"\x01" * s
    self._budgets = [masking.num_to_predict(n, config.masked_lm_prob,
                                            config.max_predictions_per_seq) for n in range(s + 1)]

  def _mask_segment(self, document, lo, hi, chosen, random, pieces):
    """80/10/10 on the chosen tokens (sorted) of document[lo:hi], one draw each as
    masking.mask_tokens; appends the segment's varint payload to pieces. Returns how many predicted
    tokens hold [MASK] (also when a random replacement is [MASK])."""
    vbytes, voff, ids, varints = document.vbytes, document.voff, document.ids, self.varints
    mask_id, mask_bytes = self._mask_id, self._mask_bytes
    random_ids, scale, last = self._random_ids, self._scale, self._last
    append = pieces.append
    masks = 0
    cursor = lo
    for index in chosen:
      draw = random()
      if draw < 0.8:
        replacement = mask_bytes
        masks += 1
      elif draw < 0.9:
        masks += ids[index] == mask_id  # kept ([MASK] only if it was one)
        continue  # its bytes stay in the next slice
      else:
        replacement_id = random_ids[min(int((draw - 0.9) * scale), last)]
        masks += replacement_id == mask_id
        replacement = varints[replacement_id]
      if index != cursor:
        append(vbytes[voff[cursor]:voff[index]])
      append(replacement)
      cursor = index + 1
    append(vbytes[voff[cursor]:voff[hi]])
    return masks

  def dupe_records(self, rng, stats):
    """document_records for every position in order, one dupe (see dupe_records_of)."""
    return dupe_records_of(self.document_records, len(self.documents), rng, stats)

  def document_records(self, position, rng, stats):
    """Framed records of documents[position] for one dupe; adds each instance to stats
    (stats.PretrainingStats)."""
    config, varints = self.config, self.varints
    cls_bytes, sep_bytes = varints[config.cls_id], varints[config.sep_id]
    encode, frame = self.encoder.encode_packed, writer_lib.tfrecord_frame
    mask_segment, add_counts = self._mask_segment, stats.add_counts
    segments, s, budgets = self._segments, config.max_seq_length, self._budgets
    random = rng.random
    records = []
    for a_doc, a_lo, a_hi, b_doc, b_lo, b_hi, is_random_next in instances_lib.nsp_spans(
        self.documents, position, config.max_seq_length, config.short_seq_prob, rng):
      na, nb = a_hi - a_lo, b_hi - b_lo
      n = na + nb + 3
      chosen_a, chosen_b = choose_tokens(group_bounds(a_doc, a_lo, a_hi),
                                         group_bounds(b_doc, b_lo, b_hi), budgets[n], random)
      pieces = [cls_bytes]
      masks = mask_segment(a_doc, a_lo, a_hi, chosen_a, random, pieces)
      pieces.append(sep_bytes)
      masks += mask_segment(b_doc, b_lo, b_hi, chosen_b, random, pieces)
      pieces.append(sep_bytes)
      labels = list(map(a_doc.ids.__getitem__, chosen_a))
      labels += map(b_doc.ids.__getitem__, chosen_b)
      shift_a, shift_b = 1 - a_lo, na + 2 - b_lo
      positions = [i + shift_a for i in chosen_a]
      positions += [i + shift_b for i in chosen_b]
      label = 1 if is_random_next else 0
      records.append(frame(encode(b"".join(pieces), n, segments[s - na - 2:s + nb + 1],
                                  positions, labels, label)))
      unk_count = (a_doc.unk_before[a_hi] - a_doc.unk_before[a_lo]
                   + b_doc.unk_before[b_hi] - b_doc.unk_before[b_lo])
      add_counts(n, len(positions), masks, label, unk_count)
    return records
