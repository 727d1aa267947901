"""TFRecord files -> batches of feature dicts with tf.data (google-research/bert's input_fn): a reader.

  training_dataset(view, layout, batch_size[, masking_config])  one worker's stream (a
                                      stream.MixtureStream, or one source's WorkerStream) from
                                      its position on, endless;
  eval_dataset(files, layout, batch_size[, masking_config])  every file once, in order.
Nothing else: which files, in which order, from where, is input/stream.py's; which layout the
records have is the run's (training/run.py reads it once from the records).

Training, for each epoch e = first, first+1, ... of the stream: this worker's files of epoch e (a
py_function asks the WorkerStream when the epoch begins) -> deterministic interleave of
TFRecordDatasets (cycle_length files at a time) -> shuffle buffer of records seeded by
stream.shuffle_seed(seed, e, worker) -> [first epoch: skip the records already read] -> concatenated
over epochs -> batch(drop_remainder) -> parse + cast int64->int32 -> prefetch(AUTOTUNE).
Resuming rebuilds the same stream and skips records of the first epoch: those are read (not
parsed) again, since a shuffle buffer's output depends on everything before it; that costs a
fraction of an epoch's reading once per restart (bench/bench_input_pipelines.py).

Dynamic-masking records (layout.dynamic_masking, masking_config given): each record carries
(epoch, identity) from before the interleave on (identity: stream.identity_offsets of its file +
its index inside the file; both in one int64 key numbered by TFRecordDataset.enumerate, so no
per-record function runs), through shuffle, skip and batch; after
decoding, dynamic_masking.mask_features draws its masks from (the order's seed, epoch, identity).
So the masks do not depend on the worker count or the shuffle, change every epoch, and a resumed
stream draws exactly those of the uninterrupted one. Eval draws fixed masks: seed EVAL_SEED, epoch
0, identity = the record's index in the eval files read in order (the same for every checkpoint
and run). Static records take the path above unchanged.

The run's view (stream.MixtureStream: --input_file is its one source, read as above): each
source's records are the stream above of its own order (its files, epochs, shuffles, skip); with
several sources (--input_source), tf.data's choose_from_datasets takes each record from the
source the schedule names (stream/mixture.py: a py_function gives a block of
source ids at a time, skipped to the view's first example); batching and decoding follow as for
one source. Dynamic masking: a source's index is in bits SOURCE_SHIFT.. of its records' identities,
so two sources' records never share masks (source 0's masks are those of the same files read as
--input_file).

Records are batched before parsing so one vectorised `parse_example` decodes a whole batch (same
result as google's per-record parse; fewer ops). Eval reads every file in order, unsharded, once:
no shuffle, no repeat, the last partial batch kept.

Features (bert_fin/records/schema.py, the only place that names them), for a RecordLayout:
  input_ids, segment_ids int32 [B, S]; input_len int32 [B]; masked_lm_positions, masked_lm_ids
  int32 [B, P]; masked_lm_weights float32 [B, P]; next_sentence_labels int32 [B, 1];
  packed records: also sequence_lens int32 [B, K] and next_sentence_labels [B, K] (B counts rows).
"""
import numpy as np
import tensorflow.compat.v1 as tf

from bert_fin.input import dynamic_masking
from bert_fin.input import stream as stream_lib
from bert_fin.records import schema

CYCLE_LENGTH = 4
SHUFFLE_BUFFER_SIZE = 100  # records, as google's input_fn
EVAL_SEED = 0  # the key of eval's dynamic masks (epoch 0): every eval masks alike
IDENTITY_BITS = 40  # a record key: epoch << 40 | identity (2**40 records an epoch, 2**23 epochs)
SOURCE_SHIFT = 36  # a mixture's record identity: source << 36 | identity (2**36 records an epoch)


def _decode_batch(layout):
  """fn(serialized string [B]) -> features dict (dtypes/shapes in the module docstring)."""
  spec = schema.tf_feature_spec(schema.layout_specs(layout))

  def decode(serialized):
    return schema.tf_decode_features(tf.io.parse_example(serialized, spec))

  return decode


def _decode_and_mask(layout, masking_config, seed):
  """fn(keys int64 [B], serialized string [B]) -> features with masks drawn (dynamic-masking
  records; keys: epoch << IDENTITY_BITS | identity; P = layout.max_predictions_per_seq)."""
  decode = _decode_batch(layout)

  def decode_and_mask(keys, serialized):
    epochs = tf.bitwise.right_shift(keys, IDENTITY_BITS)
    identities = tf.bitwise.bitwise_and(keys, (1 << IDENTITY_BITS) - 1)
    return dynamic_masking.mask_features(decode(serialized), seed, epochs, identities,
                                         masking_config, layout.max_predictions_per_seq)

  return decode_and_mask


def _epoch_files_fn(worker_stream, identity_base=0):
  """fn(epoch int64 tensor) -> (this worker's files string [n], shuffle seed int64 [], identity of
  each file's record 0 int64 [n], + identity_base) through a py_function."""
  order, worker = worker_stream.order, worker_stream.worker_index

  def files_and_seed(epoch):
    number = int(epoch)
    pieces = worker_stream.epoch_pieces(number)
    offsets = stream_lib.identity_offsets(worker_stream.epoch(number))
    tf.logging.info("input: worker %d starts reading data epoch %d (%d files)", worker, number,
                    len(pieces))
    return (np.array([p.path for p in pieces], dtype=object),
            np.int64(stream_lib.shuffle_seed(order.seed, number, worker)),
            np.array([offsets[p.path] + identity_base for p in pieces], dtype=np.int64))

  def fn(epoch):
    files, seed, offsets = tf.py_function(files_and_seed, [epoch],
                                          [tf.string, tf.int64, tf.int64])
    files.set_shape([None])
    seed.set_shape([])
    offsets.set_shape([None])
    return files, seed, offsets

  return fn


def _worker_records(worker_stream, cycle_length, shuffle_buffer_size, identities=False,
                    identity_base=0):
  """Serialized records of the worker's stream from its position on, endless; with identities,
  (key, record) pairs (the same records in the same order), key = epoch << IDENTITY_BITS |
  identity (+ identity_base): one int64 numbered by TFRecordDataset.enumerate(start=key of the
  file's record 0), so no per-record function runs."""
  first_epoch, skip = worker_stream.start()
  epoch_files = _epoch_files_fn(worker_stream, identity_base)

  def numbered(epoch):
    def fn(path, offset):
      return tf.data.TFRecordDataset(path).enumerate(
          start=tf.bitwise.left_shift(epoch, IDENTITY_BITS) + offset)
    return fn

  def epoch_records(epoch):
    files, seed, offsets = epoch_files(epoch)
    if identities:
      d = tf.data.Dataset.from_tensor_slices((files, offsets))
      d = d.interleave(numbered(epoch), cycle_length=cycle_length, block_length=1,
                       num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
    else:
      d = tf.data.Dataset.from_tensor_slices(files)
      d = d.interleave(tf.data.TFRecordDataset, cycle_length=cycle_length, block_length=1,
                       num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
    d = d.shuffle(buffer_size=shuffle_buffer_size, seed=seed)
    return d.skip(tf.where(tf.equal(epoch, first_epoch), tf.constant(skip, tf.int64), 0))

  return tf.data.Dataset.range(first_epoch, np.iinfo(np.int64).max).flat_map(epoch_records)


def _source_choices(schedule, first):
  """int64 dataset: the source of each example of the schedule from example `first` on, endless
  (a py_function draws one block of ids at a time)."""
  block = schedule.block_of(first)

  def block_ids(number):
    ids = tf.py_function(lambda b: schedule.block_sources(int(b)), [number], tf.int64)
    ids.set_shape([None])
    return ids

  d = tf.data.Dataset.range(block, np.iinfo(np.int64).max).map(block_ids).unbatch()
  return d.skip(first - schedule.block_start(block))


def _mixture_records(view, cycle_length, shuffle_buffer_size, identities=False):
  """_worker_records of each source of the view (its source_streams()), each record from the
  source the schedule names; one source: its records (every example is its own)."""
  sources = [_worker_records(stream, cycle_length, shuffle_buffer_size, identities,
                             index << SOURCE_SHIFT)
             for index, stream in enumerate(view.source_streams())]
  if len(sources) == 1:
    return sources[0]
  choices = _source_choices(view.order.schedule, view.first_example())
  return tf.data.Dataset.choose_from_datasets(sources, choices)


def check_masking(layout, masking_config):
  """Raises ValueError unless masking_config is given exactly for dynamic-masking records."""
  if bool(layout.dynamic_masking) != (masking_config is not None):
    raise ValueError("dynamic-masking records need a masking config and only they take one "
                     "(layout %s, masking config %s)" % (layout, masking_config))


def training_dataset(worker_stream, layout, batch_size, masking_config=None,
                     cycle_length=CYCLE_LENGTH, shuffle_buffer_size=SHUFFLE_BUFFER_SIZE):
  """Batches [batch_size] of one worker's stream (the run's stream.MixtureStream, or a source's
  stream.WorkerStream; sharding "files") from its position on, endless; layout:
  schema.RecordLayout of the records; masking_config: the records.masking_config.MaskingConfig of
  dynamic-masking records (then layout.max_predictions_per_seq is the width P of the masks
  drawn), None for static ones."""
  if worker_stream.order.sharding != "files":
    raise ValueError("tf.data reads whole files a worker: the order has sharding %r"
                     % worker_stream.order.sharding)
  check_masking(layout, masking_config)
  dynamic = masking_config is not None
  d = _mixture_records(worker_stream, cycle_length, shuffle_buffer_size, identities=dynamic)
  d = d.batch(batch_size, drop_remainder=True)
  decode = (_decode_and_mask(layout, masking_config, worker_stream.order.seed) if dynamic
            else _decode_batch(layout))
  d = d.map(decode, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
  return d.prefetch(tf.data.AUTOTUNE)


def eval_dataset(files, layout, batch_size, masking_config=None):
  """Batches (the last one partial) of every record of `files`, in order, once; dynamic-masking
  records masked with the fixed eval key (module docstring)."""
  check_masking(layout, masking_config)
  d = tf.data.TFRecordDataset(list(files))
  if masking_config is None:
    d = d.batch(batch_size)
    decode = _decode_batch(layout)
  else:
    d = d.enumerate().batch(batch_size)  # epoch 0: the key is the index
    decode = _decode_and_mask(layout, masking_config, EVAL_SEED)
  d = d.map(decode, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
  return d.prefetch(tf.data.AUTOTUNE)
