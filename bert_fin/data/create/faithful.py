"""create_pretraining_data, faithful mode: google-research/bert's algorithm and RNG call order.

For the same documents, vocab, flags and seed, the records equal google's
create_pretraining_data.py output feature by feature, in order (google's features + our
input_len). One `random.Random(seed)` drives, in google's order:
  read documents (tokenizer.tokenize per line; empty token lists dropped, empty documents removed)
  rng.shuffle(all_documents); vocab_words = list(tokenizer.vocab.keys())
  for each dupe, for each document: create_instances_from_document
      rng.random() [+ rng.randint(2, max)] for the target length; per chunk rng.randint(1, n-1) for
      a_end when n >= 2; rng.random() for random-next unless the chunk has one sentence; up to 10
      rng.randint for the random document, rng.randint for its start; rng.random() per truncated
      token; then create_masked_lm_predictions: rng.shuffle(cand_indexes) and per masked token
      rng.random() [+ rng.random() [+ rng.randint(0, len(vocab_words) - 1)]]
  rng.shuffle(instances); write round-robin over the output files.
Whole-word masking here is google's: a `##` piece joins the previous candidate group (even across
a [SEP], as google's loop does). Everything is held in memory, single process, as google.
"""
import collections
import random
import time

from bert_fin import io_utils
from bert_fin.data import writer as writer_lib
from bert_fin.data.create import common
from bert_fin.data.create import sentence_documents
from bert_fin.data.create import pretraining_rules as rules
from bert_fin.data.create import stats as stats_lib
from bert_fin.tokenization import special_tokens as special

# tokens/labels are word-piece strings; segment_ids int; is_random_next bool; positions sorted.
TrainingInstance = collections.namedtuple("TrainingInstance", [
    "tokens", "segment_ids", "is_random_next", "masked_lm_positions", "masked_lm_labels"])


def read_all_documents(raw_documents, tokenizer, stats, sentence_limit=None):
  """google's reading: each document's lines tokenized, empty token lists and documents dropped.

  Args:
    raw_documents: iterable of raw documents (`.sentences`, `.skip_reason`).
    tokenizer: has tokenize(line).
    stats: PretrainingStats; skipped documents are counted with reasons, sentences longer than
      sentence_limit tokens as overlong.
    sentence_limit: common.sentence_limit, or None.

  Returns:
    list of list of token lists.
  """
  all_documents = []
  for raw in raw_documents:
    if raw.skip_reason:
      stats.add_skip(raw.skip_reason)
      continue
    document = [tokens for tokens in (tokenizer.tokenize(line) for line in raw.sentences) if tokens]
    stats.count_overlong(map(len, document), sentence_limit)
    if document:
      all_documents.append(document)
    else:
      stats.add_skip("empty_after_tokenization")
  return all_documents


def truncate_seq_pair(tokens_a, tokens_b, max_num_tokens, rng):
  """google's truncate_seq_pair: truncates tokens_a and tokens_b in place to max_num_tokens.

  Removes tokens from the longer list (B on ties), front or back with p = 1/2 each: google's loop
  and rng calls, one per removed token, with the removals tracked as index windows and applied
  once (google's `del trunc_tokens[0]` is quadratic: hours for a 10 MB line).

  Args:
    tokens_a, tokens_b: lists, modified in place.
    max_num_tokens: the most tokens they may hold together.
    rng: random.Random.
  """
  a_start, a_end, b_start, b_end = 0, len(tokens_a), 0, len(tokens_b)
  while (a_end - a_start) + (b_end - b_start) > max_num_tokens:
    front = rng.random() < 0.5
    if a_end - a_start > b_end - b_start:
      a_start, a_end = (a_start + 1, a_end) if front else (a_start, a_end - 1)
    else:
      b_start, b_end = (b_start + 1, b_end) if front else (b_start, b_end - 1)
  tokens_a[:] = tokens_a[a_start:a_end]
  tokens_b[:] = tokens_b[b_start:b_end]


def create_masked_lm_predictions(tokens, masked_lm_prob, max_predictions_per_seq, vocab_words, rng,
                                 do_whole_word_mask):
  """google's create_masked_lm_predictions, the same rng calls.

  Args:
    tokens: list of word-piece strings, [CLS]/[SEP] included (never candidates).
    masked_lm_prob, max_predictions_per_seq: google's flags.
    vocab_words: the random replacements (the whole vocabulary, as google).
    rng: random.Random.
    do_whole_word_mask: a `##` piece joins the previous candidate group.

  Returns:
    (output_tokens, masked_lm_positions sorted, masked_lm_labels: the original tokens there).
  """
  cand_indexes = []
  for i, token in enumerate(tokens):
    if token in (special.CLS, special.SEP):
      continue
    if do_whole_word_mask and cand_indexes and token.startswith("##"):
      cand_indexes[-1].append(i)
    else:
      cand_indexes.append([i])
  rng.shuffle(cand_indexes)
  output_tokens = list(tokens)
  num_to_predict = min(max_predictions_per_seq, max(1, int(round(len(tokens) * masked_lm_prob))))
  masked = []  # (index, label)
  covered = set()
  for index_set in cand_indexes:
    if len(masked) >= num_to_predict:
      break
    if len(masked) + len(index_set) > num_to_predict:
      continue
    if any(index in covered for index in index_set):
      continue
    for index in index_set:
      covered.add(index)
      if rng.random() < rules.MASK_BELOW:
        replacement = special.MASK
      elif rng.random() < rules.KEEP_OF_THE_REST:
        replacement = tokens[index]
      else:
        replacement = vocab_words[rng.randint(0, len(vocab_words) - 1)]
      output_tokens[index] = replacement
      masked.append((index, tokens[index]))
  masked.sort(key=lambda pair: pair[0])
  return output_tokens, [p for p, _ in masked], [label for _, label in masked]


def create_instances_from_document(all_documents, document_index, options, vocab_words, rng):
  """google's create_instances_from_document (see the module doc for the RNG calls)."""
  document = all_documents[document_index]
  max_num_tokens = options.max_seq_length - 3
  target_seq_length = max_num_tokens
  if rng.random() < options.short_seq_prob:
    target_seq_length = rng.randint(2, max_num_tokens)
  instances = []
  current_chunk = []
  current_length = 0
  i = 0
  while i < len(document):
    current_chunk.append(document[i])
    current_length += len(document[i])
    if i == len(document) - 1 or current_length >= target_seq_length:
      if current_chunk:
        a_end = rng.randint(1, len(current_chunk) - 1) if len(current_chunk) >= 2 else 1
        tokens_a = [t for segment in current_chunk[:a_end] for t in segment]
        tokens_b = []
        if len(current_chunk) == 1 or rng.random() < rules.RANDOM_NEXT_BELOW:
          is_random_next = True
          target_b_length = target_seq_length - len(tokens_a)
          for _ in range(10):
            random_document_index = rng.randint(0, len(all_documents) - 1)
            if random_document_index != document_index:
              break
          random_document = all_documents[random_document_index]
          random_start = rng.randint(0, len(random_document) - 1)
          for segment in random_document[random_start:]:
            tokens_b.extend(segment)
            if len(tokens_b) >= target_b_length:
              break
          i -= len(current_chunk) - a_end
        else:
          is_random_next = False
          tokens_b = [t for segment in current_chunk[a_end:] for t in segment]
        truncate_seq_pair(tokens_a, tokens_b, max_num_tokens, rng)
        if not tokens_a or not tokens_b:
          raise AssertionError("google's algorithm produced an empty segment (max_seq_length %d)"
                               % options.max_seq_length)
        tokens = [special.CLS] + tokens_a + [special.SEP] + tokens_b + [special.SEP]
        segment_ids = [0] * (len(tokens_a) + 2) + [1] * (len(tokens_b) + 1)
        tokens, positions, labels = create_masked_lm_predictions(
            tokens, options.masked_lm_prob, options.max_predictions_per_seq, vocab_words, rng,
            options.do_whole_word_mask)
        instances.append(TrainingInstance(tokens, segment_ids, is_random_next, positions, labels))
      current_chunk = []
      current_length = 0
    i += 1
  return instances


def create_training_instances(all_documents, tokenizer, options, rng, used=None):
  """Shuffles the documents, makes dupe_factor passes, shuffles the instances (google's order).

  Args:
    all_documents: list of list of token lists (read_all_documents), shuffled in place.
    tokenizer: its vocab's keys are the random replacements.
    options: the run's options (dupe_factor, max_seq_length, ...).
    rng: random.Random(random_seed).
    used: optional set filled with the (post-shuffle) indexes of documents that gave an instance.

  Returns:
    list of TrainingInstance.
  """
  rng.shuffle(all_documents)
  vocab_words = list(tokenizer.vocab.keys())
  instances = []
  for _ in range(options.dupe_factor):
    for document_index in range(len(all_documents)):
      made = create_instances_from_document(all_documents, document_index, options, vocab_words,
                                            rng)
      if made and used is not None:
        used.add(document_index)
      instances.extend(made)
  rng.shuffle(instances)
  return instances


def run_faithful(options):
  """Faithful mode end to end; returns the stats dict (also written beside the output).

  Raises:
    ValueError: the input gave no instance (common.check_produced).
  """
  start = time.time()
  paths, stats_path = writer_lib.output_paths(options.output_file, options.num_output_files)
  input_paths = io_utils.expand_file_patterns(options.input_file)
  tokenizer = common.load_tokenizer(options.vocab_file, options.do_lower_case, fast=False)
  special.ids(tokenizer.vocab)
  stats = stats_lib.PretrainingStats()
  position = sentence_documents.ReadPosition(input_paths)
  raw_documents = sentence_documents.iter_documents(input_paths, options.input_format, position)
  with common.progress_bar(options.progress, unit="B", total=position.total) as bar:
    all_documents = read_all_documents(_advancing(raw_documents, bar, position), tokenizer, stats,
                                       common.sentence_limit(options))
  rng = random.Random(options.random_seed)
  used = set()
  instances = create_training_instances(all_documents, tokenizer, options, rng, used)
  for index in range(len(all_documents)):
    if index in used:
      stats.add_used()
    else:
      stats.add_skip("no_instances")
  encoder = writer_lib.ExampleEncoder(options.max_seq_length, options.max_predictions_per_seq,
                                      options.write_input_mask,
                                      max_value=max(tokenizer.vocab.values()))
  mask_id, unk_id = tokenizer.vocab[special.MASK], tokenizer.vocab[special.UNK]
  if not instances:
    common.check_produced(stats)
  with writer_lib.ShardedRecordWriter(paths) as out, common.progress_bar(
      options.progress, unit="inst") as bar:
    for instance in instances:
      input_ids = tokenizer.convert_tokens_to_ids(instance.tokens)
      label_ids = tokenizer.convert_tokens_to_ids(instance.masked_lm_labels)
      label = 1 if instance.is_random_next else 0
      out.write(encoder.encode(input_ids, instance.segment_ids, instance.masked_lm_positions,
                               label_ids, label))
      stats.add_instance(input_ids, instance.masked_lm_positions, label_ids, label, mask_id,
                         unk_id)
      bar.update(1)
    counts = list(out.counts)
  return common.finish(options, stats, stats_path, paths, counts, time.time() - start,
                           mode="faithful", num_workers=1, segmenter=None)


def _advancing(raw_documents, bar, position):
  for raw in raw_documents:
    common.advance_to(bar, position)
    yield raw
  common.advance_to(bar, position)
