"""run_pretraining's checks of its data and output dir before anything is built or written, and the
translation of the user errors only the running graph can find into one line.

Before training (training/run.py calls these on rank 0, which resolves the run for every rank),
and on files that join a growing corpus later (input/stream.py, through the run's check):
  check_not_empty       no records at all, an empty shard (warned), or a tf.data rank whose files
                        are all empty (under Horovod it would die with "Horovod has been shut down");
  check_same_layout     the sets of a mixture (or the eval sets) share one layout, else a line
                        naming two of them;
  check_records         reads the first SAMPLE_RECORDS records of every file once: the first one
                        against the flags (google-format records without --legacy_input_mask,
                        max_seq_length / max_predictions_per_seq, with the create_pretraining_data
                        options from the `.stats.json` beside them as the hint; packed and
                        dynamic-masking records against each other), the token ids of all against the config's vocab_size;
                        returns the records.RecordLayout the run reads them with.
During training:
  run_error             tf.errors -> InputError for a corrupt record (naming the file, found by a
                        verifying scan of the input files), a file gone, and a failed assertion of
                        BertModel's validate_inputs (an id >= vocab_size later in a file: on GPUs
                        it would silently be a zero embedding); None for anything else (internal
                        errors keep their traceback).
Every refusal is a ValueError whose message names the file or flag and the fix.
"""
import glob
import json
import os
import re

import numpy as np
import tensorflow.compat.v1 as tf

from bert_fin.records import schema as records
from bert_fin.records import tfrecord_index

SAMPLE_RECORDS = 64  # records per file whose token ids are checked before training
MODEL_CHECK_TAG = "BertModel: "  # modeling/bert.py's input range assertions start so


class InputError(ValueError):
  """A user error found while the graph runs (bad data), as one line with the fix."""


def check_not_empty(files, num_workers=1, shards_files=True, flag="--input_file"):
  """Refuses input without records and warns about empty shards (a TFRecord file without records
  has 0 bytes, so this costs one stat per file). shards_files: tf.data gives rank r the files
  files[r::num_workers]; a rank whose files are all empty is refused (naming rank and files)."""
  empty = [f for f in files if tf.io.gfile.stat(f).length == 0]
  if len(empty) == len(files):
    raise ValueError("%s: no records: all %d input file(s) are empty (%s%s); re-run "
                     "create_pretraining_data (its input had no usable document?)"
                     % (flag, len(files), ", ".join(files[:3]), ", ..." if len(files) > 3 else ""))
  if not empty:
    return
  tf.logging.warning("%s: %d of %d input files are empty (no records): %s", flag, len(empty),
                     len(files), ", ".join(empty))
  if shards_files and num_workers > 1:
    empty = set(empty)
    for rank in range(num_workers):
      mine = files[rank::num_workers]
      if all(f in empty for f in mine):
        raise ValueError(
            "%s: rank %d of %d would get only empty files (%s): tf.data shards files over the "
            "ranks. Remove the empty files (keeping a multiple of %d files) or use "
            "--input_pipeline=dali, which shards records" % (flag, rank, num_workers,
                                                             ", ".join(mine), num_workers))


def stats_options(path):
  """create_pretraining_data's options for the records file `path`, from the `.stats.json` beside
  it that lists it, or None."""
  directory = os.path.dirname(path) or "."
  for stats_path in glob.glob(os.path.join(glob.escape(directory), "*.stats.json")):
    try:
      with open(stats_path, encoding="utf-8") as f:
        stats = json.load(f)
    except (OSError, ValueError):
      continue
    if os.path.basename(path) in (stats.get("output_files") or {}):
      return dict(stats.get("options") or {}, stats_file=stats_path)
  return None


def _values(feature_map, name):
  feature = feature_map.get(name)
  if feature is None:
    return None
  return getattr(feature, feature.WhichOneof("kind") or "int64_list").value


def _mismatch_message(path, feature_map, max_seq_length, max_predictions_per_seq,
                      legacy_input_mask, problems):
  """One line: what differs in `path`'s first record and which flags would read it."""
  hints = []
  if records.INPUT_LEN not in feature_map and records.INPUT_MASK in feature_map and \
      not legacy_input_mask:
    hints.append("google-format records (input_mask, no input_len): add --legacy_input_mask")
  ids = _values(feature_map, records.INPUT_IDS)
  if ids is not None and len(ids) != max_seq_length:
    hints.append("the records have max_seq_length=%d" % len(ids))
  positions = _values(feature_map, records.MASKED_LM_POSITIONS)
  if positions is not None and len(positions) != max_predictions_per_seq:
    hints.append("the records have max_predictions_per_seq=%d" % len(positions))
  options = stats_options(path)
  if options and "max_seq_length" in options:
    hints.append("%s: written with --max_seq_length=%s --max_predictions_per_seq=%s%s" % (
        os.path.basename(options["stats_file"]), options.get("max_seq_length"),
        options.get("max_predictions_per_seq"),
        " --write_input_mask" if options.get("write_input_mask") else ""))
  return ("%s: record 0 does not match --max_seq_length=%d --max_predictions_per_seq=%d%s: %s. %s"
          % (path, max_seq_length, max_predictions_per_seq,
             " --legacy_input_mask" if legacy_input_mask else "", "; ".join(problems),
             "; ".join(hints) or "were these records written by create_pretraining_data?"))


def record_mismatches(serialized_example, specs):
  """Human-readable differences between one serialized tf.train.Example and the specs."""
  feature_map = tf.train.Example.FromString(serialized_example).features.feature
  problems = []
  for spec in specs:
    if spec.name not in feature_map:
      problems.append("feature %r is missing" % spec.name)
      continue
    kind = feature_map[spec.name].WhichOneof("kind")
    wanted = "float_list" if spec.dtype == records.FLOAT32 else "int64_list"
    if kind != wanted:
      problems.append("feature %r is %s, expected %s" % (spec.name, kind, wanted))
      continue
    found = len(getattr(feature_map[spec.name], kind).value)
    if found != spec.length:
      problems.append("feature %r has %d values, expected %d" % (spec.name, found, spec.length))
  return problems


def _packed_layout(path, first_record, max_seq_length):
  """The RecordLayout of packed or dynamic-masking records (they carry their own; dynamic ones with
  max_predictions_per_seq None: the run sets it from the masking config), None for unpacked static
  ones (read as the flags say, checked against the specs by the caller)."""
  found = records.layout_of_example(first_record, allow_dynamic=True)
  if found.max_sequences_per_pack or found.dynamic_masking:
    if found.max_seq_length != max_seq_length:
      raise ValueError("%s: %s records of %d tokens, but --max_seq_length=%d"
                       % (path, "packed" if found.max_sequences_per_pack else "dynamic-masking",
                          found.max_seq_length, max_seq_length))
    return found
  return None


def check_records(files, max_seq_length, max_predictions_per_seq, legacy_input_mask, vocab_size,
                  sample_records=SAMPLE_RECORDS):
  """Reads the first sample_records records of each file once: the first one against the flags
  (packed records: against each other), the token ids of all against vocab_size. Returns the
  records.RecordLayout every file is read with. Raises ValueError naming file and fix (a corrupt
  record among them: tfrecord_index.TFRecordError with its offset)."""
  unpacked = records.RecordLayout(max_seq_length, max_predictions_per_seq, None, legacy_input_mask)
  layout, layout_file = None, None
  for path in files:
    sample = tfrecord_index.read_records(path, limit=sample_records)
    if not sample:
      continue
    packed = _packed_layout(path, sample[0], max_seq_length)
    this = packed or unpacked
    if layout is not None and this != layout:
      raise ValueError("%s and %s hold records of different layouts (%s vs %s): train on packed "
                       "or unpacked records of one kind" % (layout_file, path, layout, this))
    layout, layout_file = this, path
    problems = record_mismatches(sample[0], records.layout_specs(this))
    if problems:
      feature_map = tf.train.Example.FromString(sample[0]).features.feature
      raise ValueError(_mismatch_message(path, feature_map, max_seq_length,
                                         max_predictions_per_seq, legacy_input_mask, problems))
    for number, raw in enumerate(sample):
      feature_map = tf.train.Example.FromString(raw).features.feature
      for name in (records.INPUT_IDS, records.MASKED_LM_IDS):
        if _values(feature_map, name) is None:  # dynamic-masking records: no masked_lm_ids
          continue
        ids = np.asarray(_values(feature_map, name), dtype=np.int64)
        if ids.size and (ids.max() >= vocab_size or ids.min() < 0):
          raise ValueError(
              "%s: record %d has %s %d, outside [0, vocab_size=%d) of --bert_config_file: the "
              "records were made with another vocab; use the config (and checkpoint) of the "
              "vocab_file given to create_pretraining_data"
              % (path, number, name, ids.max() if ids.max() >= vocab_size else ids.min(),
                 vocab_size))
  if layout is not None and layout.max_sequences_per_pack and not layout.dynamic_masking:
    tf.logging.info("input: packed records (%d sequences a row at most, %d predictions a row; "
                    "--max_predictions_per_seq is not used)", layout.max_sequences_per_pack,
                    layout.max_predictions_per_seq)
  return layout or unpacked


def _first_layout(files):
  """(records.RecordLayout of the first record of the first readable non-empty file, its path),
  or (None, None)."""
  for path in files:
    if os.path.exists(path):
      sample = tfrecord_index.read_records(path, limit=1)
      if sample:
        return records.layout_of_example(sample[0], allow_dynamic=True), path
  return None, None


def describe_layout(old_files, new_files):
  """'; records: <old> -> <new>' when the first records of the first readable file of each list
  differ in layout, else ''."""
  old, new = _first_layout(old_files)[0], _first_layout(new_files)[0]
  if old is None or new is None or old == new:
    return ""
  return "; records: %s -> %s" % (_layout_text(old), _layout_text(new))


def check_same_layout(named_files):
  """Refuses record sets whose first records differ in layout, naming two of them (before each
  set is checked against the flags): named_files: [(what, files)], what e.g. '--input_source
  news'. The sets of one run are read by one reader and one model_fn: the same max_seq_length,
  predictions, packing, masking and input_mask."""
  first = None
  for what, files in named_files:
    layout, path = _first_layout(files)
    if layout is None:
      continue
    if first is not None and layout != first[2]:
      raise ValueError(
          "%s (%s: %s) and %s (%s: %s) hold records of different layouts: the record sets of one "
          "run must agree; re-create one of them with the other's create_pretraining_data flags"
          % (first[0], os.path.basename(first[1]), _layout_text(first[2]), what,
             os.path.basename(path), _layout_text(layout)))
    first = first or (what, path, layout)


def _layout_text(layout):
  text = "max_seq_length=%d max_predictions=%s" % (layout.max_seq_length,
                                                    layout.max_predictions_per_seq)
  if layout.dynamic_masking:
    text += " dynamic_masking"
  if layout.max_sequences_per_pack:
    text += " packed x%d" % layout.max_sequences_per_pack
  return text + (" input_mask" if layout.legacy_input_mask else "")


def average_sequences_per_pack(path, limit=1000):
  """Mean number of sequences in the first `limit` records of a packed records file."""
  counts = []
  for raw in tfrecord_index.read_records(path, limit=limit):
    lens = tf.train.Example.FromString(raw).features.feature[records.SEQUENCE_LENS]
    counts.append(sum(1 for n in lens.int64_list.value if n > 0))
  return sum(counts) / float(len(counts)) if counts else 0.0


def locate_corruption(files):
  """The first TFRecordError of a verifying scan over files, or None."""
  for path in files:
    try:
      for _ in tfrecord_index.iter_record_spans(path, verify=True):
        pass
    except tfrecord_index.TFRecordError as error:
      return error
  return None


def run_error(error, files, checkpoint_step):
  """InputError for a user error raised by the running graph, or None (not ours: re-raise).

  error: the tf.errors.OpError; files: the input files being read; checkpoint_step: the step of
  the last checkpoint in output_dir (it is left as it was)."""
  kept = "the last checkpoint (step %d) is intact" % checkpoint_step if checkpoint_step else \
      "no checkpoint was written"
  if isinstance(error, tf.errors.DataLossError):
    found = locate_corruption(files)
    where = str(found) if found else "a corrupt record (%s)" % error.message.split("\n")[0]
    return InputError("%s; %s. Re-create or remove that file and run again" % (where, kept))
  if isinstance(error, tf.errors.NotFoundError):
    return InputError("an input file disappeared while training (%s); %s. Restore it, or pass "
                      "--data_order=restart to go on over the files there are now"
                      % (error.message.split("\n")[0], kept))
  if isinstance(error, tf.errors.InvalidArgumentError) and MODEL_CHECK_TAG in error.message:
    match = re.search(r"%s(.*?)\]" % MODEL_CHECK_TAG, error.message)
    detail = match.group(1) if match else error.message.split("\n")[0]
    return InputError("a batch of %s has %s: the records do not fit --bert_config_file (made "
                      "with another vocab?); %s" % (", ".join(files[:3]), detail, kept))
  return None
