"""Training instances of the fast mode, on token ids: google's NSP pairs or RoBERTa full sentences.

A document is a list of sentences; a sentence is a `Sentence(ids, starts)`:
  ids:    list[int] [n] word-piece ids (n >= 1)
  starts: list[bool] [n] True where a token begins a word (whole-word masking group boundary)

`create_document_instances(documents, position, ...)` returns `Instance`s (`UnmaskedInstance`s
with config.dynamic_masking) for documents[position] and one dupe, all randomness from the `rng`
it is given (the pipeline's `random.Random` for (seed, block, dupe), shared by the block's
documents in order). `documents` is the caller's bounded block of neighbouring documents.

Objectives:
  bert    google's create_instances_from_document: target length (short_seq_prob), A = first
          a_end sentences of a chunk, B = the rest or (50%, or always for a 1-sentence chunk)
          sentences from another document, truncate the pair from front or back at random,
          [CLS] A [SEP] B [SEP].
          The other document is drawn uniformly from the other documents of the block; in a block
          of one, from the document itself (as google does when its 10 draws all hit it).
  roberta contiguous full sentences of one document up to the target length, [CLS] X [SEP], no NSP
          (next_sentence_label 0); a sentence longer than the maximum is cut into maximal pieces.
"""
import bisect
import collections

from bert_fin.data.create import masking
from bert_fin.data.create import pretraining_rules as rules


Sentence = collections.namedtuple("Sentence", ["ids", "starts"])

# input_ids/segment_ids: int [len] unpadded; masked_lm_positions/masked_lm_ids: int [n] sorted;
# next_sentence_label: 0 = real next (or roberta), 1 = random next.
Instance = collections.namedtuple("Instance", [
    "input_ids", "segment_ids", "masked_lm_positions", "masked_lm_ids", "next_sentence_label"])

# A dynamic-masking instance (records.dynamic_feature_specs): unmasked ids, word_starts [len].
UnmaskedInstance = collections.namedtuple("UnmaskedInstance", [
    "input_ids", "segment_ids", "word_starts", "next_sentence_label"])

# dynamic_masking: make UnmaskedInstances (no masking draws: the rng only drives the pairing).
InstanceConfig = collections.namedtuple("InstanceConfig", [
    "max_seq_length", "max_predictions_per_seq", "masked_lm_prob", "short_seq_prob", "objective",
    "cls_id", "sep_id", "mask_id", "random_ids", "dynamic_masking"], defaults=(False,))


def uniform_int(low, high, rng):
  """A uniform int in [low, high] from one rng.random() (cheaper than rng.randint's rejection
  sampling; the bias, < (high - low + 1) / 2**53, is immaterial here)."""
  return low + int(rng.random() * (high - low + 1))


def target_length(max_num_tokens, short_seq_prob, rng):
  """google's target_seq_length: max_num_tokens, or with short_seq_prob a randint(2, max)."""
  if rng.random() < short_seq_prob:
    return uniform_int(2, max_num_tokens, rng)
  return max_num_tokens


def truncation_counts(len_a, len_b, max_num_tokens):
  """How many tokens google's truncate_seq_pair removes from A and from B.

  google removes one token at a time from the longer list (B on ties); which list loses a token
  does not depend on the RNG, so the counts are closed-form: first the longer list is cut down to
  the other's length, then removals alternate starting with B.

  Args:
    len_a, len_b: the lengths of A and B.
    max_num_tokens: the most tokens A and B may hold together.

  Returns:
    (removed_a, removed_b).
  """
  excess = len_a + len_b - max_num_tokens
  if excess <= 0:
    return 0, 0
  removed_a = removed_b = 0
  if len_a > len_b:
    removed_a = min(excess, len_a - len_b)
  elif len_b > len_a:
    removed_b = min(excess, len_b - len_a)
  excess -= removed_a + removed_b
  return removed_a + excess // 2, removed_b + (excess + 1) // 2


def _front_count(removed, rng):
  """Binomial(removed, 1/2): how many of `removed` removals hit the front (google: p = 1/2 each)."""
  return bin(rng.getrandbits(removed)).count("1") if removed else 0


def truncate_pair(len_a, len_b, max_num_tokens, rng):
  """google's truncate_seq_pair in distribution, in O(1) draws.

  The number removed from each list equals google's exactly (truncation_counts); each removal is
  from the front with probability 1/2 independently, as google's, drawn as one Binomial per list.

  Args:
    len_a, len_b, max_num_tokens: as truncation_counts.
    rng: random.Random (one getrandbits per list that loses tokens).

  Returns:
    ((a_lo, a_hi), (b_lo, b_hi)): slices of A and B to keep.
  """
  removed_a, removed_b = truncation_counts(len_a, len_b, max_num_tokens)
  front_a, front_b = _front_count(removed_a, rng), _front_count(removed_b, rng)
  return ((front_a, len_a - (removed_a - front_a)), (front_b, len_b - (removed_b - front_b)))


PreparedDocument = collections.namedtuple("PreparedDocument", ["ids", "starts", "offsets"])


def prepare_document(sentences):
  """Flattens a document for pairing.

  Built once per document and block so that pairing slices flat lists instead of concatenating
  sentences per instance.

  Args:
    sentences: list[Sentence].

  Returns:
    PreparedDocument: ids/starts [T] of the sentences concatenated and offsets
    [num_sentences + 1], sentence j being ids[offsets[j]:offsets[j + 1]].
  """
  ids, starts, offsets = [], [], [0]
  for sentence in sentences:
    ids.extend(sentence.ids)
    starts.extend(sentence.starts)
    offsets.append(len(ids))
  return PreparedDocument(ids, starts, offsets)


def _pick_random_b(prepared, position, target_b_length, rng):
  """google's random next segment: (document, token begin, token end) of the sentences taken from
  a random sentence of another document until target_b_length tokens are reached."""
  if len(prepared) > 1:
    other = uniform_int(0, len(prepared) - 2, rng)
    other += other >= position  # uniform over the other documents
  else:
    other = position
  offsets = prepared[other].offsets
  num_sentences = len(offsets) - 1
  random_start = uniform_int(0, num_sentences - 1, rng)
  begin = offsets[random_start]
  end = bisect.bisect_left(offsets, begin + target_b_length, random_start + 1)
  return prepared[other], begin, offsets[min(end, num_sentences)]


def nsp_spans(prepared, position, max_seq_length, short_seq_prob, rng):
  """The A/B spans of google's objective for one document.

  Args:
    prepared: list of PreparedDocument (or anything with its `offsets`).
    position: the document's index in prepared.
    max_seq_length: S.
    short_seq_prob: google's flag (target_length).
    rng: random.Random.

  Yields:
    (a_doc, a_begin, a_end, b_doc, b_begin, b_end, is_random_next): A = a_doc.ids[a_begin:a_end],
    B = b_doc.ids[b_begin:b_end] (a_doc/b_doc are items of prepared), truncated so that
    len(A) + len(B) <= max_seq_length - 3, both non-empty.
  """
  document = prepared[position]
  offsets = document.offsets
  num_sentences = len(offsets) - 1
  max_num_tokens = max_seq_length - 3
  target = target_length(max_num_tokens, short_seq_prob, rng)
  first = 0  # the current chunk is sentences first..i
  i = 0
  while i < num_sentences:
    if i == num_sentences - 1 or offsets[i + 1] - offsets[first] >= target:
      chunk_size = i + 1 - first
      a_end = uniform_int(1, chunk_size - 1, rng) if chunk_size >= 2 else 1
      a_begin, a_stop = offsets[first], offsets[first + a_end]
      if chunk_size == 1 or rng.random() < rules.RANDOM_NEXT_BELOW:
        is_random_next = True
        b_doc, b_begin, b_stop = _pick_random_b(prepared, position, target - (a_stop - a_begin),
                                                rng)
        i -= chunk_size - a_end  # put the unused sentences back
      else:
        is_random_next = False
        b_doc, b_begin, b_stop = document, a_stop, offsets[i + 1]
      (a_lo, a_hi), (b_lo, b_hi) = truncate_pair(a_stop - a_begin, b_stop - b_begin,
                                                 max_num_tokens, rng)
      yield (document, a_begin + a_lo, a_begin + a_hi, b_doc, b_begin + b_lo, b_begin + b_hi,
             is_random_next)
      first = i + 1
    i += 1


def full_sentence_spans(document, max_seq_length, short_seq_prob, rng):
  """The RoBERTa spans of one document: contiguous sentences up to a target length.

  Args:
    document: list[Sentence].
    max_seq_length: S.
    short_seq_prob: google's flag (target_length).
    rng: random.Random.

  Yields:
    (ids, starts) of contiguous sentences, 1 <= len <= max_seq_length - 2; a sentence longer than
    that is cut into maximal pieces.
  """
  max_num_tokens = max_seq_length - 2
  target = target_length(max_num_tokens, short_seq_prob, rng)
  ids, starts = [], []
  for sentence in document:
    for lo in range(0, len(sentence.ids), max_num_tokens):
      piece_ids = sentence.ids[lo:lo + max_num_tokens]
      if ids and len(ids) + len(piece_ids) > target:
        yield ids, starts
        ids, starts = [], []
      ids.extend(piece_ids)
      starts.extend(sentence.starts[lo:lo + max_num_tokens])
  if ids:
    yield ids, starts


def _masked_instance(ids, groups, segment_ids, next_label, config, rng):
  """Instance with static masks drawn from rng, or an UnmaskedInstance (config.dynamic_masking)."""
  if config.dynamic_masking:
    return UnmaskedInstance(ids, segment_ids, masking.word_starts(len(ids), groups), next_label)
  masked = masking.create_masked_lm(ids, groups, config.masked_lm_prob,
                                    config.max_predictions_per_seq, rng, config.mask_id,
                                    config.random_ids)
  return Instance(masked.output_ids, segment_ids, masked.positions, masked.label_ids, next_label)


def create_document_instances(documents, position, config, rng, prepared=None):
  """All instances of documents[position] for one dupe (see the module docstring).

  The reference the C kernel (data/kernel/_kernel.c) reproduces draw for draw and byte for byte.

  Args:
    documents: list of list[Sentence], the block.
    position: the document's index in documents.
    config: InstanceConfig.
    rng: random.Random, advanced.
    prepared: optional [prepare_document(d) for d in documents], built once per block by a
      caller that walks every position (objective bert pairs across the block's documents).

  Returns:
    list of Instance, or of UnmaskedInstance with config.dynamic_masking.
  """
  instances = []
  cls_id, sep_id = config.cls_id, config.sep_id
  if config.objective == "roberta":
    for ids, starts in full_sentence_spans(documents[position], config.max_seq_length,
                                           config.short_seq_prob, rng):
      instances.append(_masked_instance(
          [cls_id] + ids + [sep_id], masking.groups_from_starts(starts, 1), [0] * (len(ids) + 2),
          0, config, rng))
    return instances
  if prepared is None:
    prepared = [prepare_document(d) for d in documents]
  groups_from_starts = masking.groups_from_starts
  for a_doc, a_lo, a_hi, b_doc, b_lo, b_hi, is_random_next in nsp_spans(
      prepared, position, config.max_seq_length, config.short_seq_prob, rng):
    na, nb = a_hi - a_lo, b_hi - b_lo
    ids = [cls_id]
    ids += a_doc.ids[a_lo:a_hi]
    ids.append(sep_id)
    ids += b_doc.ids[b_lo:b_hi]
    ids.append(sep_id)
    groups = groups_from_starts(a_doc.starts[a_lo:a_hi], 1)
    groups += groups_from_starts(b_doc.starts[b_lo:b_hi], na + 2)
    instances.append(_masked_instance(ids, groups, _segment_ids(na, nb),
                                      1 if is_random_next else 0, config, rng))
  return instances


_SEGMENT_IDS = {}


def _segment_ids(na, nb):
  """[0] * (na + 2) + [1] * (nb + 1), shared from a small cache (callers must not mutate it)."""
  key = na << 16 | nb
  segments = _SEGMENT_IDS.get(key)
  if segments is None:
    segments = [0] * (na + 2) + [1] * (nb + 1)
    if len(_SEGMENT_IDS) < 1 << 16:
      _SEGMENT_IDS[key] = segments
  return segments
