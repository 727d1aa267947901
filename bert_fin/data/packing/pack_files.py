"""Packed record files from unpacked ones, in bounded memory (tools/pack_records.py).

Two streaming passes over the input records, in file order (files sorted per glob):

  1. survey: the first record of every file gives its layout (records are self-describing; all
     files must agree and be unpacked: bert_fin's input_len records, google's input_mask ones or
     dynamic-masking ones, whose word_starts are packed like the tokens);
     every record is parsed and checked (length in [1, S], predictions 1.0-then-0.0 weighted and
     inside the sequence); lengths are counted into one histogram per window of consecutive
     records, and the most predictions seen per length. Nothing is written in this pass, so bad
     input fails before any output exists.
  2. pack: each window's sequences are held as ragged numpy arrays (real tokens only), planned on
     that window's histogram (plans_lib.plan_packs), assigned to packs with a generator seeded by
     (random_seed, window index) (the packs come out shuffled), assembled
     (plans_lib.packed_arrays) and written round-robin over the output files, each written to a
     temp name and renamed at the end (writer.ShardedRecordWriter).

Memory is one window (about window_size x (5 bytes a real token + 8 a prediction)) plus one
histogram per window; it does not grow with the corpus. The packed records' masked-LM width P' is
the most predictions any planned pack can hold (plans_lib.predictions_bound), known after pass 1,
so no prediction is ever cut. Every input sequence ends up in exactly one pack (checked).
Dynamic-masking inputs: the stats JSON gets the "dynamic_masking" block of the inputs' stats JSON
(records/masking_source.py), so training finds the masking config beside the packed records too.
"""
import collections
import os
import time

import numpy as np

from bert_fin import io_utils
from bert_fin.data import writer
from bert_fin.data.packing import plans as plans_lib
from bert_fin.records import masking_source
from bert_fin.records import schema
from bert_fin.records import tfrecord_index

DEFAULT_WINDOW_SIZE = 65536
PARSE_BATCH = 2048
ENCODE_CHUNK = 1024  # packs assembled and encoded together (bounds the Python lists alive)

Survey = collections.namedtuple("Survey", [
    "layout", "num_sequences", "window_histograms", "max_predictions_by_length", "max_token_id",
    "file_counts"])
# One file's part of the survey: lengths uint16 [n] in record order, most_predictions int64
# [S + 1] (the most predictions a sequence of each length has), the largest token id.
FileSurvey = collections.namedtuple("FileSurvey", ["lengths", "most_predictions", "max_token_id"])
PackCounts = collections.namedtuple("PackCounts", ["slots_used", "sequences", "real_tokens"])


def input_files_of(patterns):
  """Sorted shard paths of a comma list of globs; index and stats files are left out.

  Raises:
    ValueError: nothing but index/stats files match, or an input cannot be read.
  """
  files = io_utils.expand_file_patterns(patterns)
  files = [f for f in files if not f.endswith((tfrecord_index.INDEX_SUFFIX, writer.STATS_SUFFIX))]
  if not files:
    raise ValueError("--input_file %r matches only index/stats files" % (patterns,))
  io_utils.check_input_files(files, "--input_file")
  return files


def files_layout(files):
  """The common RecordLayout of the files' first records.

  Raises:
    ValueError: naming a file that differs, is empty, is already packed or holds no pretraining
      records.
    TFRecordError: a file's first record is truncated or corrupt.
  """
  layout = None
  for path in files:
    first = tfrecord_index.read_records(path, limit=1)
    if not first:
      raise ValueError("%s: no records" % path)
    try:
      this = schema.layout_of_example(first[0], allow_dynamic=True)
    except Exception as e:  # a protobuf DecodeError or a missing feature
      raise ValueError("%s: record 0 is not a pretraining tf.train.Example (%s)" % (path, e))
    if this.max_sequences_per_pack:
      raise ValueError("%s: already packed (has %s)" % (path, schema.SEQUENCE_LENS))
    if layout is not None and this != layout:
      raise ValueError("%s: layout %s differs from %s's %s; pack files of one "
                       "max_seq_length/max_predictions_per_seq at a time"
                       % (path, dict(this._asdict()), files[0], dict(layout._asdict())))
    layout = this
  return layout


def iter_batches(path, layout, skip=0):
  """Reads a record file in parsed batches.

  Args:
    path, layout, skip: the record file, its RecordLayout, the records to skip first.

  Yields:
    {name: numpy array [n, length]} of the file's records after the first `skip`, PARSE_BATCH
    (n) at a time.

  Raises:
    ValueError: naming the file: a record does not match the layout, or the file is corrupt.
  """
  import tensorflow as tf
  spec = schema.tf_feature_spec(schema.layout_specs(layout))
  dataset = tf.data.TFRecordDataset(path).skip(skip).batch(PARSE_BATCH).map(
      lambda serialized: tf.io.parse_example(serialized, spec))
  iterator = iter(dataset)
  while True:
    try:
      batch = next(iterator)
    except StopIteration:
      return
    except (tf.errors.InvalidArgumentError, tf.errors.DataLossError) as e:
      raise ValueError("%s: a record does not match the first record's layout or the file is "
                       "corrupt (%s)" % (path, e.message.splitlines()[0]))
    yield {name: value.numpy() for name, value in batch.items()}


def checked_sequences(path, batch, layout):
  """Checks a parsed batch and measures its sequences.

  Checks that lengths are in [1, S], ids are not negative, segment ids <= 127 and each record's
  predictions are weighted 1.0 then 0.0 and lie inside its sequence (else a packed position
  could point into a neighbour), or, for dynamic-masking records (no predictions), that
  word_starts holds only its three values.

  Args:
    path, batch, layout: the file (for the message), a batch of iter_batches, the RecordLayout.

  Returns:
    (lengths int64 [n], num_predictions int64 [n]; zeros for dynamic-masking records).

  Raises:
    ValueError: naming path and every problem found.
  """
  if layout.legacy_input_mask:
    lengths = batch[schema.INPUT_MASK].sum(axis=1).astype(np.int64)
  else:
    lengths = batch[schema.INPUT_LEN][:, 0].astype(np.int64)
  if layout.dynamic_masking:
    return lengths, _checked_dynamic(path, batch, layout, lengths)
  weights = batch[schema.MASKED_LM_WEIGHTS]
  num_predictions = (weights != 0).sum(axis=1).astype(np.int64)
  slots = np.arange(weights.shape[1])
  real = slots < num_predictions[:, None]
  problems = []
  if lengths.min() < 1 or lengths.max() > layout.max_seq_length:
    problems.append("sequence length outside [1, %d]" % layout.max_seq_length)
  if not np.array_equal(weights, real.astype(np.float32)):
    problems.append("masked_lm_weights are not 1.0 for the predictions, then 0.0")
  if min(batch[name].min() for name in (schema.INPUT_IDS, schema.SEGMENT_IDS,
                                         schema.MASKED_LM_IDS, schema.NEXT_SENTENCE_LABELS)) < 0:
    problems.append("negative token, segment or label ids")
  if batch[schema.SEGMENT_IDS].max() > 127:
    problems.append("segment ids above 127")
  positions = batch[schema.MASKED_LM_POSITIONS]
  if np.any(real & ((positions < 0) | (positions >= lengths[:, None]))):
    problems.append("a masked_lm_position lies outside its sequence")
  if problems:
    raise ValueError("%s: %s; cannot pack these records" % (path, "; ".join(problems)))
  return lengths, num_predictions


def _checked_dynamic(path, batch, layout, lengths):
  """checked_sequences for dynamic-masking records: their num_predictions (zeros)."""
  problems = []
  if lengths.min() < 1 or lengths.max() > layout.max_seq_length:
    problems.append("sequence length outside [1, %d]" % layout.max_seq_length)
  if min(batch[name].min() for name in (schema.INPUT_IDS, schema.SEGMENT_IDS,
                                         schema.NEXT_SENTENCE_LABELS)) < 0:
    problems.append("negative token, segment or label ids")
  if batch[schema.SEGMENT_IDS].max() > 127:
    problems.append("segment ids above 127")
  known = (schema.WORD_CONTINUES, schema.WORD_BEGINS, schema.NEVER_MASKED)
  if not np.isin(batch[schema.WORD_STARTS], known).all():
    problems.append("%s values other than %s" % (schema.WORD_STARTS, known))
  if problems:
    raise ValueError("%s: %s; cannot pack these records" % (path, "; ".join(problems)))
  return np.zeros_like(lengths)


def survey_file(path, layout):
  """Pass 1 for one file: its FileSurvey (every record checked: ValueError as checked_sequences)."""
  parts, most = [], np.zeros(layout.max_seq_length + 1, np.int64)
  max_token_id = 0
  for batch in iter_batches(path, layout):
    lengths, num_predictions = checked_sequences(path, batch, layout)
    np.maximum.at(most, lengths, num_predictions)
    max_token_id = max(max_token_id, int(batch[schema.INPUT_IDS].max()),
                       0 if layout.dynamic_masking else int(batch[schema.MASKED_LM_IDS].max()))
    parts.append(lengths.astype(np.uint16))
  lengths = np.concatenate(parts) if parts else np.zeros(0, np.uint16)
  return FileSurvey(lengths, most, max_token_id)


def combine_surveys(layout, file_surveys, window_size):
  """The Survey of the files' FileSurveys (in file order).

  Args:
    layout, file_surveys, window_size: the RecordLayout, FileSurveys, records per window.

  Returns:
    Survey with one length histogram per window of window_size consecutive records; a last
    window under half that size joins the one before.

  Raises:
    ValueError: the files hold no records.
  """
  lengths = np.concatenate([f.lengths for f in file_surveys]).astype(np.int64)
  if not lengths.size:
    raise ValueError("the input files hold no records")
  max_len = layout.max_seq_length
  histograms = [np.bincount(lengths[at:at + window_size], minlength=max_len + 1)
                for at in range(0, lengths.size, window_size)]
  tail = lengths.size % window_size
  if len(histograms) > 1 and 0 < tail < window_size // 2:
    last = histograms.pop()
    histograms[-1] = histograms[-1] + last
  most = np.max([f.most_predictions for f in file_surveys], axis=0)
  return Survey(layout, int(lengths.size), histograms, most,
                max(f.max_token_id for f in file_surveys),
                [int(f.lengths.size) for f in file_surveys])


def survey(files, layout, window_size):
  """Pass 1 (see the module docstring): Survey with one length histogram per window."""
  return combine_surveys(layout, [survey_file(path, layout) for path in files], window_size)


def _ragged(batch, lengths, num_predictions):
  """RaggedSequences of a parsed batch (real tokens / predictions only)."""
  token_mask = np.arange(batch[schema.INPUT_IDS].shape[1]) < lengths[:, None]
  if schema.WORD_STARTS in batch:  # dynamic-masking records: no predictions
    none = np.zeros(0, np.int32)
    return plans_lib.RaggedSequences(
        tokens=batch[schema.INPUT_IDS][token_mask].astype(np.int32),
        segments=batch[schema.SEGMENT_IDS][token_mask].astype(np.int8),
        lengths=lengths, predicted_positions=none, predicted_ids=none,
        num_predictions=num_predictions,
        next_sentence_labels=batch[schema.NEXT_SENTENCE_LABELS][:, 0].astype(np.int64),
        word_starts=batch[schema.WORD_STARTS][token_mask].astype(np.int8))
  prediction_mask = np.arange(batch[schema.MASKED_LM_IDS].shape[1]) < num_predictions[:, None]
  return plans_lib.RaggedSequences(
      tokens=batch[schema.INPUT_IDS][token_mask].astype(np.int32),
      segments=batch[schema.SEGMENT_IDS][token_mask].astype(np.int8),
      lengths=lengths,
      predicted_positions=batch[schema.MASKED_LM_POSITIONS][prediction_mask].astype(np.int32),
      predicted_ids=batch[schema.MASKED_LM_IDS][prediction_mask].astype(np.int32),
      num_predictions=num_predictions,
      next_sentence_labels=batch[schema.NEXT_SENTENCE_LABELS][:, 0].astype(np.int64))


def _concatenate(parts):
  return plans_lib.RaggedSequences(*[None if field[0] is None else np.concatenate(field)
                                   for field in zip(*parts)])


def iter_windows(files, survey_result, first=0, end=None):
  """Pass 2's reader, reading from the file where window `first` begins.

  Args:
    files, survey_result: the input files, in survey order, and their Survey.
    first, end: the windows [first, end) to read (default: all).

  Yields:
    (window index, RaggedSequences) with the survey's window sizes; ValueError as
    checked_sequences.
  """
  sizes = [int(h.sum()) for h in survey_result.window_histograms]
  end = len(sizes) if end is None else end
  if first >= end:
    return
  skip = sum(sizes[:first])  # records before window `first`
  window, parts, held = first, [], 0
  for path, count in zip(files, survey_result.file_counts):
    if skip >= count:
      skip -= count
      continue
    for batch in iter_batches(path, survey_result.layout, skip):
      lengths, num_predictions = checked_sequences(path, batch, survey_result.layout)
      ragged = _ragged(batch, lengths, num_predictions)
      start = 0
      while start < lengths.size:
        take = min(sizes[window] - held, lengths.size - start)
        parts.append(_slice(ragged, start, start + take))
        held += take
        start += take
        if held == sizes[window]:
          yield window, _concatenate(parts)
          window, parts, held = window + 1, [], 0
          if window == end:
            return
    skip = 0


def _slice(ragged, start, end):
  """Sequences [start, end) of RaggedSequences."""
  token_offsets = np.concatenate([[0], np.cumsum(ragged.lengths)])
  prediction_offsets = np.concatenate([[0], np.cumsum(ragged.num_predictions)])
  t0, t1 = token_offsets[start], token_offsets[end]
  p0, p1 = prediction_offsets[start], prediction_offsets[end]
  return plans_lib.RaggedSequences(
      ragged.tokens[t0:t1], ragged.segments[t0:t1], ragged.lengths[start:end],
      ragged.predicted_positions[p0:p1], ragged.predicted_ids[p0:p1],
      ragged.num_predictions[start:end], ragged.next_sentence_labels[start:end],
      None if ragged.word_starts is None else ragged.word_starts[t0:t1])


def pack_files(input_file, output_file, num_output_files=1,
               max_sequences_per_pack=plans_lib.DEFAULT_MAX_SEQUENCES_PER_PACK,
               algorithm=plans_lib.DEFAULT_ALGORITHM, random_seed=12345,
               window_size=DEFAULT_WINDOW_SIZE, log=print):
  """Packs the records of unpacked files into packed records (see the module docstring).

  Args:
    input_file: comma list of globs.
    output_file, num_output_files: the outputs (writer.output_paths).
    max_sequences_per_pack, algorithm: K (>= 1) and a plans_lib.PLANNERS name.
    random_seed: seeds the assignment of sequences to packs (with the window index).
    window_size, log: records per window (>= 1); a function taking one string.

  Returns:
    the stats dict (also written to `<output prefix>.stats.json`).

  Raises:
    ValueError: bad input or arguments, before anything is written.
  """
  started = time.time()
  check_arguments(algorithm, max_sequences_per_pack, window_size)
  files, paths, stats_path = output_of(input_file, output_file, num_output_files)
  layout = files_layout(files)
  found = survey(files, layout, window_size)
  plans, max_predictions, encoder = plan_and_encoder(found, max_sequences_per_pack, algorithm,
                                                     len(files), log)
  counts = PackCounts(np.zeros(max_sequences_per_pack + 1, np.int64), [0], [0])
  with writer.ShardedRecordWriter(paths) as out:
    for window, sequences in iter_windows(files, found):
      for chunk in packed_records(window, sequences, plans[window], found.layout,
                                  max_predictions, max_sequences_per_pack, random_seed, encoder,
                                  counts):
        for record in chunk:
          out.write(record)
    written = list(out.counts)
  return finish_stats(found, files, paths, stats_path, written, counts, max_predictions,
                      max_sequences_per_pack, algorithm, random_seed, window_size, started)


def check_arguments(algorithm, max_sequences_per_pack, window_size):
  """Raises ValueError naming the flag when an argument of pack_files is out of range."""
  if algorithm not in plans_lib.PLANNERS:
    raise ValueError("--algorithm must be one of %s, got %r" % ("|".join(plans_lib.PLANNERS),
                                                               algorithm))
  if max_sequences_per_pack < 1:
    raise ValueError("--max_sequences_per_pack must be >= 1, got %d" % max_sequences_per_pack)
  if window_size < 1:
    raise ValueError("--window_size must be >= 1, got %d" % window_size)


def output_of(input_file, output_file, num_output_files):
  """(input files, output paths, stats path) of pack_files' arguments.

  Raises:
    ValueError: an output is also an input, or as input_files_of, writer.output_paths and
      io_utils.check_output_files.
  """
  files = input_files_of(input_file)
  paths, stats_path = writer.output_paths(output_file, num_output_files)
  overlap = set(map(os.path.abspath, files)) & set(map(os.path.abspath, paths + [stats_path]))
  if overlap:
    raise ValueError("output %s is also an input file; write the packed records elsewhere"
                     % sorted(overlap)[0])
  io_utils.check_output_files(paths + [stats_path], "--output_file")
  return files, paths, stats_path


def plan_and_encoder(found, max_sequences_per_pack, algorithm, num_files, log):
  """Plans every window of a Survey and makes the packed records' encoder.

  Args:
    found, max_sequences_per_pack, algorithm: the Survey, K, a plans_lib.PLANNERS name.
    num_files, log: for the one log line.

  Returns:
    (plan of every window, P' or None for dynamic-masking records, writer.SpecEncoder).
  """
  layout = found.layout
  plans = [plans_lib.plan_packs(h, max_sequences_per_pack, algorithm)
           for h in found.window_histograms]
  if layout.dynamic_masking:
    max_predictions = None  # drawn while training, each sequence with its own budget
    log("pack_records: %d dynamic-masking sequences in %d file(s), %d window(s); training draws "
        "their masks" % (found.num_sequences, num_files, len(plans)))
    specs = schema.packed_dynamic_feature_specs(layout.max_seq_length, max_sequences_per_pack)
  else:
    max_predictions = max(plans_lib.predictions_bound(p, found.max_predictions_by_length)
                          for p in plans)
    max_predictions = max(max_predictions, 1)
    log("pack_records: %d sequences in %d file(s), %d window(s); packed records hold at most %d "
        "predictions" % (found.num_sequences, num_files, len(plans), max_predictions))
    specs = schema.packed_feature_specs(layout.max_seq_length, max_predictions,
                                         max_sequences_per_pack)
  encoder = writer.SpecEncoder(specs, max_value=max(found.max_token_id, layout.max_seq_length))
  return plans, max_predictions, encoder


def packed_records(window, sequences, plan, layout, max_predictions, max_sequences_per_pack,
                   random_seed, encoder, counts):
  """Yields the serialized packed records of one window, ENCODE_CHUNK packs (a list) at a time.

  The packs are assigned with a generator seeded by (random_seed, window), so they come out
  shuffled and the same on every run.

  Args:
    window, sequences, plan: the window index, its RaggedSequences and its plan.
    layout, max_predictions, max_sequences_per_pack: RecordLayout, P' (None: dynamic), K.
    random_seed, encoder: pack_files' seed; the packed records' writer.SpecEncoder.
    counts: PackCounts; the window's slots, sequences and real tokens are added to it.
  """
  rng = np.random.default_rng([random_seed, window])
  packs = plans_lib.assign_sequences(plan, sequences.lengths, rng)
  counts.slots_used[:] += np.bincount([len(p) for p in packs],
                                      minlength=max_sequences_per_pack + 1)
  counts.sequences[0] += sum(len(p) for p in packs)
  for chunk in range(0, len(packs), ENCODE_CHUNK):
    arrays = plans_lib.packed_arrays(sequences, packs[chunk:chunk + ENCODE_CHUNK],
                                   layout.max_seq_length, max_predictions or 0,
                                   max_sequences_per_pack)
    counts.real_tokens[0] += int(arrays[schema.SEQUENCE_LENS].sum())
    columns = {name: values.tolist() for name, values in arrays.items()}
    yield [encoder.encode_features({name: columns[name][row] for name in columns})
           for row in range(len(columns[schema.SEQUENCE_LENS]))]


def finish_stats(found, files, paths, stats_path, written, counts, max_predictions,
                 max_sequences_per_pack, algorithm, random_seed, window_size, started):
  """Checks every sequence was packed, writes the stats JSON atomically; returns it.

  Raises:
    AssertionError: a sequence was not packed (never expected: the plans cover every one).
  """
  if counts.sequences[0] != found.num_sequences:  # never expected: the plans cover every one
    raise AssertionError("packed %d sequences of %d" % (counts.sequences[0], found.num_sequences))
  stats = _stats(found, files, paths, written, counts.slots_used, counts.real_tokens[0],
                 max_predictions, max_sequences_per_pack, algorithm, random_seed, window_size)
  stats["seconds"] = round(time.time() - started, 3)
  if found.layout.dynamic_masking:
    stats[masking_source.BLOCK] = masking_source.block_of(files)
  io_utils.write_json_atomic(stats_path, stats)
  return stats


def _stats(found, files, paths, counts, slots_used, real_tokens, max_predictions,
           max_sequences_per_pack, algorithm, random_seed, window_size):
  max_len = found.layout.max_seq_length
  packs = int(sum(counts))
  return {
      "algorithm": algorithm,
      "random_seed": random_seed,
      "window_size": window_size,
      "windows": len(found.window_histograms),
      "input_files": files,
      "input_layout": ("dynamic_masking" if found.layout.dynamic_masking else
                       "google_input_mask" if found.layout.legacy_input_mask else "input_len"),
      "output_files": dict(zip(paths, counts)),
      "max_seq_length": max_len,
      "max_predictions_per_seq": found.layout.max_predictions_per_seq,
      "max_predictions_per_pack": max_predictions,
      "max_sequences_per_pack": max_sequences_per_pack,
      "sequences_in": found.num_sequences,
      "sequences_out": int(slots_used @ np.arange(slots_used.size)),
      "packs": packs,
      "packs_by_sequences": {str(k): int(n) for k, n in enumerate(slots_used) if k and n},
      "real_tokens": real_tokens,
      "packing_efficiency": real_tokens / float(packs * max_len),
      "padding_fraction_before": 1.0 - real_tokens / float(found.num_sequences * max_len),
      "padding_fraction_after": 1.0 - real_tokens / float(packs * max_len),
      "average_sequences_per_pack": found.num_sequences / float(packs),
  }
