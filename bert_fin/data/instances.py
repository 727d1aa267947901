"""Training instances of the fast mode, on token ids: google's NSP pairs or RoBERTa full sentences.

A document is a list of sentences; a sentence is a `Sentence(ids, starts)`:
  ids:    list[int] [n] word-piece ids (n >= 1)
  starts: list[bool] [n] True where a token begins a word (whole-word masking group boundary)

`create_document_instances(documents, position, ...)` returns `Instance`s for documents[position]
and one dupe, all randomness from the `rng` it is given (a `random.Random` derived from (seed,
document, dupe) by the caller). `documents` is the caller's bounded block of neighbouring documents.

Objectives:
  bert    google's create_instances_from_document: target length (short_seq_prob), A = first a_end
          sentences of a chunk, B = the rest or (50%, or always for a 1-sentence chunk) sentences from
          another document, truncate the pair from front or back at random, [CLS] A [SEP] B [SEP].
          The other document is drawn uniformly from the other documents of the block; in a block
          of one, from the document itself (as google does when its 10 draws all hit it).
  roberta contiguous full sentences of one document up to the target length, [CLS] X [SEP], no NSP
          (next_sentence_label 0); a sentence longer than the maximum is cut into maximal pieces.
"""
import collections

from bert_fin.data import masking

Sentence = collections.namedtuple("Sentence", ["ids", "starts"])

# input_ids/segment_ids: int [len] unpadded; masked_lm_positions/masked_lm_ids: int [n] sorted;
# next_sentence_label: 0 = real next (or roberta), 1 = random next.
Instance = collections.namedtuple("Instance", [
    "input_ids", "segment_ids", "masked_lm_positions", "masked_lm_ids", "next_sentence_label"])

InstanceConfig = collections.namedtuple("InstanceConfig", [
    "max_seq_length", "max_predictions_per_seq", "masked_lm_prob", "short_seq_prob", "objective",
    "cls_id", "sep_id", "mask_id", "random_ids"])

OBJECTIVES = ("bert", "roberta")


def target_length(max_num_tokens, short_seq_prob, rng):
  """google's target_seq_length: max_num_tokens, or with short_seq_prob a randint(2, max)."""
  if rng.random() < short_seq_prob:
    return rng.randint(2, max_num_tokens)
  return max_num_tokens


def truncation_counts(len_a, len_b, max_num_tokens):
  """How many tokens google's truncate_seq_pair removes from A and from B: (removed_a, removed_b).

  google removes one token at a time from the longer list (B on ties); which list loses a token
  does not depend on the RNG, so the counts are closed-form: first the longer list is cut down to
  the other's length, then removals alternate starting with B.
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

  Returns ((a_lo, a_hi), (b_lo, b_hi)): slices of A and B to keep. The number removed from each
  list equals google's exactly (truncation_counts); each removal is from the front with probability
  1/2 independently, as google's, drawn as one Binomial per list.
  """
  removed_a, removed_b = truncation_counts(len_a, len_b, max_num_tokens)
  front_a, front_b = _front_count(removed_a, rng), _front_count(removed_b, rng)
  return ((front_a, len_a - (removed_a - front_a)), (front_b, len_b - (removed_b - front_b)))


def _concat(sentences):
  ids, starts = [], []
  for sentence in sentences:
    ids.extend(sentence.ids)
    starts.extend(sentence.starts)
  return ids, starts


def _pick_random_b(documents, position, target_b_length, rng):
  if len(documents) > 1:
    other = rng.randint(0, len(documents) - 2)
    other += other >= position  # uniform over the other documents
  else:
    other = position
  random_document = documents[other]
  random_start = rng.randint(0, len(random_document) - 1)
  chosen = []
  length = 0
  for sentence in random_document[random_start:]:
    chosen.append(sentence)
    length += len(sentence.ids)
    if length >= target_b_length:
      break
  return chosen


def nsp_pairs(documents, position, max_seq_length, short_seq_prob, rng):
  """Yields (ids_a, starts_a, ids_b, starts_b, is_random_next) for google's objective, truncated
  so that len(a) + len(b) <= max_seq_length - 3, both non-empty."""
  document = documents[position]
  max_num_tokens = max_seq_length - 3
  target = target_length(max_num_tokens, short_seq_prob, rng)
  chunk = []
  chunk_length = 0
  i = 0
  while i < len(document):
    chunk.append(document[i])
    chunk_length += len(document[i].ids)
    if i == len(document) - 1 or chunk_length >= target:
      a_end = rng.randint(1, len(chunk) - 1) if len(chunk) >= 2 else 1
      ids_a, starts_a = _concat(chunk[:a_end])
      if len(chunk) == 1 or rng.random() < 0.5:
        is_random_next = True
        b_sentences = _pick_random_b(documents, position, target - len(ids_a), rng)
        i -= len(chunk) - a_end  # put the unused sentences back
      else:
        is_random_next = False
        b_sentences = chunk[a_end:]
      ids_b, starts_b = _concat(b_sentences)
      (a_lo, a_hi), (b_lo, b_hi) = truncate_pair(len(ids_a), len(ids_b), max_num_tokens, rng)
      yield (ids_a[a_lo:a_hi], starts_a[a_lo:a_hi], ids_b[b_lo:b_hi], starts_b[b_lo:b_hi],
             is_random_next)
      chunk = []
      chunk_length = 0
    i += 1


def full_sentence_spans(document, max_seq_length, short_seq_prob, rng):
  """Yields (ids, starts) of contiguous sentences, 1 <= len <= max_seq_length - 2 (RoBERTa)."""
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
  masked = masking.create_masked_lm(ids, groups, config.masked_lm_prob,
                                    config.max_predictions_per_seq, rng, config.mask_id,
                                    config.random_ids)
  return Instance(masked.output_ids, segment_ids, masked.positions, masked.label_ids, next_label)


def create_document_instances(documents, position, config, rng):
  """All instances of documents[position] for one dupe; documents: list of list[Sentence]."""
  instances = []
  cls_id, sep_id = config.cls_id, config.sep_id
  if config.objective == "roberta":
    for ids, starts in full_sentence_spans(documents[position], config.max_seq_length,
                                           config.short_seq_prob, rng):
      instances.append(_masked_instance(
          [cls_id] + ids + [sep_id], masking.groups_from_starts(starts, 1), [0] * (len(ids) + 2),
          0, config, rng))
    return instances
  for ids_a, starts_a, ids_b, starts_b, is_random_next in nsp_pairs(
      documents, position, config.max_seq_length, config.short_seq_prob, rng):
    na, nb = len(ids_a), len(ids_b)
    groups = masking.groups_from_starts(starts_a, 1) + masking.groups_from_starts(starts_b, na + 2)
    instances.append(_masked_instance(
        [cls_id] + ids_a + [sep_id] + ids_b + [sep_id], groups,
        [0] * (na + 2) + [1] * (nb + 1), 1 if is_random_next else 0, config, rng))
  return instances
