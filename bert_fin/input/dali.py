"""NVIDIA DALI reader (`--input_pipeline dali`): the contract of input/tfdata.py on DALI, plus the
index cache DALI needs.

  training_dataset(worker_stream, layout, batch_size, index_of[, masking_config])  one worker's
                                      stream from its position to the end of its view;
  eval_dataset(files, layout, batch_size, index_of[, masking_config])  every file once, in order;
  prepare_indexes(files, index_dir)                              {file: DALI index}, built if needed.
Batches are feature dicts like tf.data's (names, dtypes and shapes from records/schema.py; decoding
is schema.tf_decode_features), so the same model_fn reads either.

Order: input/stream.py's, sharding "records". DALI reads records in the order of the index file it
is given, so this worker's order (each epoch's pieces, each piece's records in
stream.piece_permutations order, the records already read dropped from the first epoch) is written
as one small index file per piece (lines `offset size` of the shard's index) into a private
temporary directory, one per training call, and the reader runs without its own shuffle. No record
is read twice on resume. The view covers a bounded number of epochs (stream.DALI_VIEW_RECORDS);
training stops at its end (the StreamHook) before DALI would wrap around.

Dynamic-masking records: the masks tf.data draws (input/tfdata.py), record for record. DALI reads
in index order, so each record's (epoch, identity) (stream.identity_offsets of its file + its
index inside the file) is known here: write_order_indexes also writes them, in reading order, as
int64 pairs into a file of the same private directory; a tf.data FixedLengthRecordDataset over it
is batched alongside DALI's batches (zip) and dynamic_masking.mask_features draws the masks from
(the order's seed, epoch, identity). Eval: tfdata.EVAL_SEED, epoch 0, identity = the index in the
eval files read in order.

Indexes: a current `FILE.idx` beside a shard (tfrecord2idx's default) is used as it is; otherwise
the index lives in the cache directory (--index_dir, default output_dir/dali_index), built there
when missing or stale (verified, atomic). Nothing is written beside the data unless --index_dir
says so. Ranks other than 0 never create the cache: they use rank 0's when they see it, else build
their own in a private temporary directory. DALI checks no CRC: each shard's whole-file CRC32C is
compared with the one written with its index before reading (tfrecord_index.verify_checksums).
DALI does not check fixed-length features either; training/preflight.py checks the records first.

The pipeline runs on the CPU (device_id=None), GPU hosts included: its outputs are a few small int
tensors and the Estimator feeds them through CPU tf.data ops, which DALI does not support after a
GPU DALIDataset (illegal memory access, or silent GPU->CPU->GPU copies).
"""
import atexit
import os
import shutil
import tempfile

import numpy as np
import tensorflow.compat.v1 as tf

from bert_fin.input import dynamic_masking
from bert_fin.input import stream as stream_lib
from bert_fin.input import tfdata
from bert_fin.records import schema
from bert_fin.records import tfrecord_index

READER_NAME = "tfrecord_reader"
INDEX_DIR_NAME = "dali_index"  # the default cache, under output_dir
NUM_THREADS, PREFETCH_QUEUE_DEPTH, READER_PREFETCH_QUEUE_DEPTH = 2, 2, 1


def _private_dir(prefix):
  """A temporary directory of this process, removed when it exits."""
  directory = tempfile.mkdtemp(prefix=prefix)
  atexit.register(shutil.rmtree, directory, True)
  return directory


def cache_name(path, files):
  """The index's file name in a cache directory: tfrecord2idx's (`FILE.idx`) unless two of `files`
  share a base name; then one made unique by a hash of the directory."""
  base = os.path.basename(path)
  if sum(1 for f in files if os.path.basename(f) == base) == 1:
    return base + tfrecord_index.INDEX_SUFFIX
  import hashlib  # pylint: disable=import-outside-toplevel
  tag = hashlib.sha1(os.path.dirname(path).encode("utf-8")).hexdigest()[:10]
  return "%s-%s%s" % (base, tag, tfrecord_index.INDEX_SUFFIX)


def prepare_indexes(files, index_dir, may_create=True):
  """{file: index path} of files, each verified against its CRC32C checksum file; builds missing
  or stale indexes in index_dir (created when may_create, else in a private temporary directory).
  Raises tfrecord_index.TFRecordError naming file, record and offset of a corrupt shard, ValueError
  when index_dir cannot be written."""
  index_of, built = {}, 0
  for path in files:
    beside = tfrecord_index.index_path_for(path)
    if tfrecord_index.index_is_current(path, beside):
      index_of[path] = beside
      continue
    cached = os.path.join(index_dir, cache_name(path, files))
    if not tfrecord_index.index_is_current(path, cached):
      if not may_create and not os.path.isdir(index_dir):
        index_dir = _private_dir("bert_fin_dali_index_")
        cached = os.path.join(index_dir, cache_name(path, files))
      try:
        os.makedirs(index_dir, exist_ok=True)
        tfrecord_index.write_index(path, cached)
      except PermissionError as error:
        raise ValueError("--index_dir %s: cannot write DALI indexes there (%s); pass a writable "
                         "--index_dir" % (index_dir, error)) from error
      built += 1
    index_of[path] = cached
  if built:
    tf.logging.info("DALI input: built %d index(es) in %s", built, index_dir)
  tfrecord_index.verify_checksums(list(index_of), list(index_of.values()))
  return index_of


def _read_index_array(index_path):
  """int64 [records, 2] (offset, size) of an index file."""
  return np.loadtxt(index_path, dtype=np.int64, ndmin=2).reshape(-1, 2)


IDENTITIES_FILE = "identities.bin"  # (epoch, identity) int64 little-endian pairs, reading order
_PAIR = np.dtype("<i8")


def write_order_indexes(worker_stream, index_of, directory, identities=False):
  """Writes the worker's view from its position on as one index file per piece into directory
  (with identities, also each record's (epoch, identity) into directory/IDENTITIES_FILE);
  returns (tfrecord paths, index paths, records)."""
  first_epoch, drop = worker_stream.start()
  entries_of, paths, indexes, total = {}, [], [], 0
  pairs = open(os.path.join(directory, IDENTITIES_FILE), "wb") if identities else None
  try:
    for number in range(first_epoch, worker_stream.num_epochs):
      pieces = worker_stream.epoch_pieces(number)
      order = worker_stream.order
      offsets = stream_lib.identity_offsets(worker_stream.epoch(number))
      permutations = stream_lib.piece_permutations(pieces, order.seed, number,
                                                   worker_stream.worker_index)
      for k, (piece, permutation) in enumerate(zip(pieces, permutations)):
        if piece.path not in entries_of:
          entries_of[piece.path] = _read_index_array(index_of[piece.path])
        entries = entries_of[piece.path][piece.first:piece.end][permutation][drop:]
        numbers = permutation[drop:]
        drop = max(0, drop - (piece.end - piece.first))
        if not len(entries):
          continue
        index_path = os.path.join(directory, "epoch%d-piece%d.idx" % (number, k))
        with open(index_path, "w", encoding="ascii") as f:
          f.write(tfrecord_index.format_index(map(tuple, entries.tolist())))
        if pairs is not None:
          np.stack([np.full(len(numbers), number, np.int64),
                    offsets[piece.path] + piece.first + numbers.astype(np.int64)],
                   axis=1).astype(_PAIR).tofile(pairs)
        paths.append(piece.path)
        indexes.append(index_path)
        total += len(entries)
  finally:
    if pairs is not None:
      pairs.close()
  return paths, indexes, total


def _identity_batches(path, batch_size):
  """tf.data of (epochs int64 [B], identities int64 [B]) from write_order_indexes' pairs file."""
  d = tf.data.FixedLengthRecordDataset(path, record_bytes=2 * _PAIR.itemsize)
  d = d.batch(batch_size, drop_remainder=True)

  def decode(raw):
    pairs = tf.reshape(tf.io.decode_raw(raw, tf.int64, little_endian=True), [batch_size, 2])
    return pairs[:, 0], pairs[:, 1]

  return d.map(decode)


def _masked(dataset_of_pairs, layout, masking_config, seed):
  """((epochs, identities), features) -> features with the masks drawn."""
  def mask(identity, features):
    epochs, identities = identity
    return dynamic_masking.mask_features(features, seed, epochs, identities, masking_config,
                                         layout.max_predictions_per_seq)

  return dataset_of_pairs.map(mask)


def build_pipeline(input_files, index_files, specs, batch_size, seed=None,
                   num_threads=NUM_THREADS):
  """The CPU-only DALI pipeline: one tfrecord reader over input_files (a file may repeat, with
  another index file each time), records in index order; outputs follow specs' order, each sample
  [length], int64 features cast to int32."""
  from nvidia.dali import fn, pipeline, tfrecord, types
  dali_dtypes = {schema.INT64: (tfrecord.int64, 0), schema.FLOAT32: (tfrecord.float32, 0.0)}
  pipe = pipeline.Pipeline(batch_size=batch_size, num_threads=num_threads, device_id=None,
                           seed=seed, prefetch_queue_depth=PREFETCH_QUEUE_DEPTH)
  with pipe:
    features = fn.readers.tfrecord(
        path=list(input_files), index_path=list(index_files),
        features={s.name: tfrecord.FixedLenFeature([s.length], *dali_dtypes[s.dtype])
                  for s in specs},
        random_shuffle=False, prefetch_queue_depth=READER_PREFETCH_QUEUE_DEPTH,
        stick_to_shard=False, pad_last_batch=False, name=READER_NAME)
    outputs = []
    for spec in specs:
      tensor = features[spec.name]
      if spec.dtype == schema.INT64:
        tensor = fn.cast(tensor, dtype=types.INT32)
      outputs.append(tensor)
    pipe.set_outputs(*outputs)
  return pipe


def _dataset(input_files, index_files, layout, batch_size, seed, num_threads):
  """tf.data view of the pipeline, on the CPU, decoded: feature dicts of [batch_size, ...]."""
  import nvidia.dali.plugin.tf as dali_tf
  specs = schema.layout_specs(layout)
  pipe = build_pipeline(input_files, index_files, specs, batch_size, seed, num_threads)
  dtypes = tuple(tf.float32 if s.dtype == schema.FLOAT32 else tf.int32 for s in specs)
  shapes = tuple((batch_size, s.length) for s in specs)
  with tf.device("/cpu:0"):
    dataset = dali_tf.DALIDataset(
        pipeline=pipe, batch_size=batch_size, num_threads=num_threads, device_id=None,
        prefetch_queue_depth=PREFETCH_QUEUE_DEPTH, output_dtypes=dtypes, output_shapes=shapes)
  names = [s.name for s in specs]
  return dataset.map(lambda *tensors: schema.tf_decode_features(dict(zip(names, tensors))))


def training_dataset(view, layout, batch_size, index_of, num_threads=NUM_THREADS,
                     masking_config=None):
  """Batches [batch_size] of one worker's stream (a bounded view of one source with sharding
  "records": the run's stream.MixtureStream of --input_file, or its stream.WorkerStream) from its
  position on; index_of: prepare_indexes(...) of the view's files; masking_config: as
  tfdata.training_dataset's (dynamic-masking records)."""
  streams = view.source_streams()
  if len(streams) != 1:
    raise ValueError("DALI reads one --input_file, got a view of %d sources" % len(streams))
  worker_stream = streams[0]
  order = worker_stream.order
  if order.sharding != "records" or worker_stream.num_epochs is None:
    raise ValueError("DALI reads a bounded view of a record-sharded order, got sharding %r, %s "
                     "epochs" % (order.sharding, worker_stream.num_epochs))
  tfdata.check_masking(layout, masking_config)
  directory = _private_dir("bert_fin_dali_order_")
  dynamic = masking_config is not None
  paths, indexes, total = write_order_indexes(worker_stream, index_of, directory, dynamic)
  tf.logging.info("DALI input: worker %d reads %d records from %d file pieces (CPU)",
                  worker_stream.worker_index, total, len(paths))
  dataset = _dataset(paths, indexes, layout, batch_size, order.seed, num_threads)
  if not dynamic:
    return dataset
  pairs = _identity_batches(os.path.join(directory, IDENTITIES_FILE), batch_size)
  return _masked(tf.data.Dataset.zip((pairs, dataset)), layout, masking_config, order.seed)


def eval_dataset(files, layout, batch_size, index_of, num_threads=NUM_THREADS,
                 masking_config=None):
  """Batches (the last one partial, batch dimension unknown as in tf.data's eval input) of every
  record of `files`, in order, once; dynamic-masking records masked as tfdata.eval_dataset's."""
  tfdata.check_masking(layout, masking_config)
  files = list(files)
  num_records = sum(tfrecord_index.count_index_records(index_of[f]) for f in files)
  dataset = _dataset(files, [index_of[f] for f in files], layout, batch_size, None, num_threads)
  num_batches = -(-num_records // batch_size)
  dataset = dataset.take(num_batches).unbatch().take(num_records)
  if masking_config is None:
    return dataset.batch(batch_size)
  dataset = dataset.enumerate().map(
      lambda index, features: ((tf.constant(0, tf.int64), index), features)).batch(batch_size)
  return _masked(dataset, layout, masking_config, tfdata.EVAL_SEED)
