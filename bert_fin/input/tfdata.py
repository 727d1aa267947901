"""TFRecord files -> batches of feature dicts with tf.data (the google-research/bert input_fn).

Training pipeline, per worker (Horovod rank) of `num_workers`, in a deterministic order that is a
function of (seed, epoch, files, workers) only (see input/epochs.py):

  epochs e = first, first+1, ...: this worker's files of epoch e (a seeded permutation of the
  epoch's files, every num_workers-th one) -> deterministic interleave of TFRecordDatasets
  (cycle_length files at a time) -> shuffle buffer of records seeded by (seed, e, worker)
  -> [first epoch: skip the records already consumed] -> concatenated over epochs
  -> batch(drop_remainder) -> parse + cast int64->int32 -> prefetch(AUTOTUNE)

Resuming is rebuilding the same stream and skipping `skip` records of the first epoch: those
records are read (not parsed) again, since a shuffle buffer's output depends on everything before
it; that costs a fraction of an epoch's reading once per restart (bench/bench_input_pipelines.py),
and no shuffle buffer is ever saved. Epochs past the DataOrder's recorded ones reuse its last
file list (run_pretraining records each epoch before any worker reaches it).

Records are batched before parsing so one vectorised `parse_example` decodes a whole batch (same
result as google's per-record parse; fewer ops). Eval reads every file in order, unsharded, once:
no shuffle, no repeat, last partial batch kept (the Estimator stops at max_eval_steps or at the
end of the data).

Features given to model_fn (see bert_fin/data/records.py, the only place that names them):
  input_ids, segment_ids int32 [B, S]; input_len int32 [B]; masked_lm_positions, masked_lm_ids
  int32 [B, P]; masked_lm_weights float32 [B, P]; next_sentence_labels int32 [B, 1].
Packed records (tools/pack_records.py) are detected from the records themselves (no flag):
  then also sequence_lens int32 [B, K], next_sentence_labels [B, K], P = the records' own P'
  (packed_layout; B counts packed rows).
"""
import numpy as np
import tensorflow.compat.v1 as tf

from bert_fin import io_utils
from bert_fin import tfrecord_index
from bert_fin.data import records
from bert_fin.data import writer
from bert_fin.input import epochs

DEFAULT_CYCLE_LENGTH = 4
DEFAULT_SHUFFLE_BUFFER = 100
_KNOWN_OPTIONS = ("cycle_length", "shuffle_buffer_size")


# Files bert_fin writes beside the records, which a broad glob (`records/*`) also matches.
SIDE_FILE_SUFFIXES = (tfrecord_index.INDEX_SUFFIX, writer.STATS_SUFFIX)


def expand_input_files(input_files):
  """Comma list of globs (google's --input_file) or a list of paths/globs -> sorted file list,
  through tf.io.gfile so remote filesystems work; see io_utils.expand_file_patterns. DALI indexes
  and create_pretraining_data's stats JSON are left out, with a logged count (they would fail as
  TFRecords mid-run, or break the files % workers rule)."""
  files = io_utils.expand_file_patterns(input_files, tf.io.gfile.glob)
  shards = [f for f in files if not f.endswith(SIDE_FILE_SUFFIXES)]
  if len(shards) != len(files):
    tf.logging.warning("input: skipped %d index/stats file(s) (%s) matched by the input file "
                       "pattern", len(files) - len(shards), ", ".join(SIDE_FILE_SUFFIXES))
  if not shards:
    raise ValueError("input file pattern %r matches only index/stats files" % (input_files,))
  return shards


def check_files_divisible(files, num_workers):
  """Refuses a file list that cannot be split evenly over the workers.

  With fewer files than workers some ranks get no data; with a remainder some ranks get more
  records than others. Either way ranks run out of data at different steps and the others stall in
  their next allreduce. Raises ValueError with the counts and the fix; returns files per worker.
  """
  return epochs.check_files_divisible(len(files), num_workers)


def _check_options(options):
  unknown = sorted(set(options) - set(_KNOWN_OPTIONS))
  if unknown:
    raise ValueError("unknown tf.data input options %s (known: %s)"
                     % (unknown, list(_KNOWN_OPTIONS)))


def packed_layout(files, max_seq_length):
  """The RecordLayout of packed records, or None for unpacked ones, read from the first record
  of every file (records are self-describing). Raises ValueError naming a file whose layout
  differs from the first file's, or packed records of another max_seq_length."""
  layouts = []
  for path in files:
    for serialized in tf.io.tf_record_iterator(path):
      layouts.append((path, records.layout_of_example(serialized)))
      break
  if not layouts:
    return None
  first_path, first = layouts[0]
  for path, layout in layouts[1:]:
    if bool(layout.max_sequences_per_pack) != bool(first.max_sequences_per_pack) or (
        first.max_sequences_per_pack and layout != first):
      raise ValueError("%s and %s hold records of different layouts (%s vs %s): train on packed "
                       "or unpacked records of one kind" % (first_path, path, first, layout))
  if not first.max_sequences_per_pack:
    return None
  if first.max_seq_length != max_seq_length:
    raise ValueError("%s: packed records of %d tokens, but --max_seq_length=%d"
                     % (first_path, first.max_seq_length, max_seq_length))
  tf.logging.info("input: packed records (%d sequences a row at most, %d predictions a row; "
                  "--max_predictions_per_seq is not used)", first.max_sequences_per_pack,
                  first.max_predictions_per_seq)
  return first


def average_sequences_per_pack(files, limit=1000):
  """Mean number of sequences in the first `limit` records of files[0] (packed records)."""
  counts = []
  for serialized in tf.io.tf_record_iterator(files[0]):
    lens = tf.train.Example.FromString(serialized).features.feature[records.SEQUENCE_LENS]
    counts.append(sum(1 for n in lens.int64_list.value if n > 0))
    if len(counts) >= limit:
      break
  return sum(counts) / float(len(counts)) if counts else 0.0


def _decode_batch(max_seq_length, max_predictions_per_seq, legacy_input_mask, layout=None):
  """Returns fn(serialized string [B]) -> features dict (dtypes/shapes in the module docstring);
  layout: a packed RecordLayout (packed_layout) or None."""
  if layout is not None:
    spec = records.tf_feature_spec(records.layout_specs(layout))
  else:
    spec = records.tf_parsing_spec(max_seq_length, max_predictions_per_seq, legacy_input_mask)

  def decode(serialized):
    return records.tf_decode_features(tf.io.parse_example(serialized, spec))

  return decode


def new_order(files, num_workers, batch_size, seed, sharding="files"):
  """A DataOrder with one epoch of `files` (record counts from indexes or a header scan)."""
  order = epochs.DataOrder(seed, num_workers, batch_size, sharding)
  order.add_epoch(files, [epochs.record_count(f) for f in files])
  return order


def _epoch_files_fn(order, worker_index):
  """fn(epoch int64 tensor) -> (this worker's files string [n], shuffle seed int64 []) through a
  py_function (epochs past the recorded ones reuse the last file list)."""

  def files_and_seed(epoch):
    number = int(epoch)
    epoch_def = order.epochs[min(number, len(order.epochs) - 1)]
    pieces = epochs.worker_pieces(epoch_def, order.seed, number, order.num_workers, worker_index,
                                  "files")
    tf.logging.info("input: worker %d starts reading data epoch %d (%d files)", worker_index,
                    number, len(pieces))
    return (np.array([p.path for p in pieces], dtype=object),
            np.int64(epochs.shuffle_seed(order.seed, number, worker_index)))

  def fn(epoch):
    files, seed = tf.py_function(files_and_seed, [epoch], [tf.string, tf.int64])
    files.set_shape([None])
    seed.set_shape([])
    return files, seed

  return fn


def _training_records(order, worker_index, position, cycle_length, shuffle_buffer_size):
  """Serialized records of this worker's stream from `position` micro-batches on, endless."""
  first_epoch, skip = order.locate(position, worker_index)
  epoch_files = _epoch_files_fn(order, worker_index)

  def epoch_records(epoch):
    files, seed = epoch_files(epoch)
    d = tf.data.Dataset.from_tensor_slices(files)
    d = d.interleave(tf.data.TFRecordDataset, cycle_length=cycle_length, block_length=1,
                     num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
    d = d.shuffle(buffer_size=shuffle_buffer_size, seed=seed)
    return d.skip(tf.where(tf.equal(epoch, first_epoch), tf.constant(skip, tf.int64), 0))

  return tf.data.Dataset.range(first_epoch, np.iinfo(np.int64).max).flat_map(epoch_records)


def input_fn_builder(input_files, max_seq_length, max_predictions_per_seq, is_training, batch_size,
                     num_workers=1, worker_index=0, legacy_input_mask=False, seed=None, order=None,
                     position=0, **options):
  """Returns input_fn(params) -> tf.data.Dataset of feature dicts (no labels, like google's).

  input_files: comma list of globs or list of paths; batch_size: per-worker micro-batch;
  num_workers/worker_index: Horovod size/rank (training shards files; eval ignores them and reads
  all files on the one evaluating rank); legacy_input_mask: read google's records (input_mask, no
  input_len); seed: data order seed (None: random). Training only: order: an epochs.DataOrder
  (run_pretraining's; its files replace input_files; default: one epoch of input_files, repeated
  with a new order each epoch); position: micro-batches already consumed (resume).
  options: cycle_length (parallel files, default 4), shuffle_buffer_size (records, default 100 as
  google). Raises ValueError on bad file counts (see check_files_divisible) before any graph is
  built.
  """
  _check_options(options)
  if batch_size < 1:
    raise ValueError("batch_size must be >= 1, got %d" % batch_size)
  files = expand_input_files(input_files) if order is None else order.epochs[-1].files
  if is_training:
    check_files_divisible(files, num_workers)
    if not 0 <= worker_index < num_workers:
      raise ValueError("worker_index %d not in [0, %d)" % (worker_index, num_workers))
    if order is None:
      seed = np.random.SeedSequence().entropy % 2 ** 31 if seed is None else seed
      order = new_order(files, num_workers, batch_size, seed)
    elif (order.num_workers, order.batch_size, order.sharding) != (num_workers, batch_size,
                                                                   "files"):
      raise ValueError("tf.data input: order made for %s, not %d workers x batch %d"
                       % (order.layout(), num_workers, batch_size))
  cycle_length = options.get("cycle_length", DEFAULT_CYCLE_LENGTH)
  shuffle_buffer_size = options.get("shuffle_buffer_size", DEFAULT_SHUFFLE_BUFFER)
  decode = _decode_batch(max_seq_length, max_predictions_per_seq, legacy_input_mask,
                         packed_layout(files, max_seq_length))

  def input_fn(params=None):
    """params is accepted for the Estimator's signature; batch_size comes from the builder."""
    del params
    if is_training:
      d = _training_records(order, worker_index, position, cycle_length, shuffle_buffer_size)
    else:
      d = tf.data.TFRecordDataset(files)
    d = d.batch(batch_size, drop_remainder=is_training)
    d = d.map(decode, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
    return d.prefetch(tf.data.AUTOTUNE)

  return input_fn
