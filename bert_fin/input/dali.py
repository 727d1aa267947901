"""NVIDIA DALI input_fn: TFRecord shards -> batches of features (`--input_pipeline dali`).

Same contract as input/tfdata.py, so the same model_fn consumes either:

  input_fn_builder(input_files, max_seq_length, max_predictions_per_seq, is_training, batch_size,
                   num_workers=1, worker_index=0, legacy_input_mask=False, seed=None, **options)
    -> input_fn(params) -> tf.data.Dataset of feature dicts (no labels), batched [B = batch_size]:
       input_ids, segment_ids            int32 [B, S]
       input_len                         int32 [B]
       masked_lm_positions, masked_lm_ids int32 [B, P]
       masked_lm_weights                 float32 [B, P]
       next_sentence_labels              int32 [B, 1]
  (names, dtypes and lengths come from data/records.py; decoding is records.tf_decode_features;
  packed records are detected from the records, as in input/tfdata.py).

Training order is ours, not DALI's (input/epochs.py, sharding "records"): for each epoch e, the
seeded permutation of the epoch's files is concatenated and worker i of n takes the records
[N*i//n, N*(i+1)//n) of it, as pieces of files; each piece is read in a seeded random order of its
records. DALI reads records in the order of the index file it is given, so this order is written
as small per-piece index files (lines `offset size` of the shard's index, permuted) into a
temporary directory, and the reader runs without its own shuffle (random_shuffle=False). Resuming
at a data position drops the records already consumed from the first epoch's index entries: no
record is read twice, and the restart costs only writing the index files. The list covers the
stream from the position to the end of the recorded epochs plus one more epoch (the last file
list again, reordered); DALI wraps around after it (run_pretraining stops before).
Evaluation reads its shard exactly once, in order, in batches, the last one partial, like
input/tfdata.py (run_pretraining evaluates unsharded).

DALI checks no CRC: each shard's whole-file CRC32C is compared with the one written with its index
before reading (tfrecord_index.verify_checksums; a flipped byte stops with file and offset).

DALI does not check fixed-length features: a record with fewer values than requested is silently
padded with zeros, a missing feature comes back empty. So the first record of every shard is
checked against the specs before any pipeline is built, and a mismatch fails naming the file.

Unlike tf.data's file-level sharding the file count need not divide by num_workers: shard sizes
differ by at most one record and training never ends, so ranks cannot stall on each other.

The pipeline runs on the CPU (device_id=None), GPU hosts included. Its outputs are a few small
int tensors ([B, S] int32: 256 KB a batch at B=128, S=512), and the Estimator feeds them through
CPU tf.data ops (`map` below, `take/unbatch/batch` for eval, its own iterator), which DALI does not
support after a GPU DALIDataset (illegal memory access, or silent GPU->CPU->GPU copies). So there
is no GPU mode, and no local rank / CUDA device to pick.

Options (**options): shuffle (evaluation only; default False), index_dir (None: FILE.idx beside
each shard),
build_missing_indexes (True), initial_fill (1024), reader_prefetch_queue_depth (1),
prefetch_queue_depth (2), num_threads (2; alias num_cpu_threads), device ("cpu", the only value),
validate_records (True). Unknown options raise TypeError.
"""
import atexit
import collections
import fnmatch
import os
import shutil
import tempfile

import numpy as np
import tensorflow.compat.v1 as tf

from bert_fin import tfrecord_index
from bert_fin.cli import tfrecord2idx
from bert_fin.data import records
from bert_fin.input import epochs

READER_NAME = "tfrecord_reader"

DaliOptions = collections.namedtuple("DaliOptions", [
    "shuffle", "index_dir", "build_missing_indexes", "initial_fill", "reader_prefetch_queue_depth",
    "prefetch_queue_depth", "num_threads", "device", "validate_records"])
DEFAULT_OPTIONS = DaliOptions(
    shuffle=None, index_dir=None, build_missing_indexes=True, initial_fill=1024,
    reader_prefetch_queue_depth=1, prefetch_queue_depth=2, num_threads=2, device="cpu",
    validate_records=True)


def parse_options(options):
  """DaliOptions from the builder's **options; unknown names raise TypeError (never ignored)."""
  options = dict(options)
  if "num_cpu_threads" in options:  # google's input_fn_builder name
    options.setdefault("num_threads", options.pop("num_cpu_threads"))
  unknown = sorted(set(options) - set(DaliOptions._fields))
  if unknown:
    raise TypeError("unknown DALI input option(s) %s; known: %s"
                    % (", ".join(unknown), ", ".join(DaliOptions._fields)))
  parsed = DEFAULT_OPTIONS._replace(**options)
  if parsed.device != "cpu":
    raise ValueError("DALI input runs on the CPU only (device='cpu'), got device=%r: the Estimator "
                     "feeds its outputs through CPU tf.data ops, which a GPU DALIDataset does not "
                     "support" % (parsed.device,))
  return parsed


def shard_bounds(num_records, num_workers, worker_index):
  """[start, end) of the records DALI gives worker_index of num_workers (sample-level sharding)."""
  return (num_records * worker_index // num_workers,
          num_records * (worker_index + 1) // num_workers)


def check_shardable(num_records, num_workers, worker_index):
  """Raises ValueError unless every worker gets at least one record; returns this worker's
  number of records. (DALI's sample-level sharding needs no divisible file count.)"""
  if not 0 <= worker_index < num_workers:
    raise ValueError("worker_index %d not in [0, num_workers=%d)" % (worker_index, num_workers))
  if num_records < num_workers:
    raise ValueError("%d records cannot be split over %d workers" % (num_records, num_workers))
  start, end = shard_bounds(num_records, num_workers, worker_index)
  return end - start


def ensure_indexes(input_files, index_dir=None, build_missing=True):
  """Index paths of input_files (FILE.idx or index_dir/FILE.idx), building missing/stale ones
  (verified, atomic; concurrent workers may build the same index safely). Without build_missing,
  raises FileNotFoundError giving the exact command to run."""
  index_files = [tfrecord_index.index_path_for(f, index_dir) for f in input_files]
  stale = [(f, i) for f, i in zip(input_files, index_files)
           if not tfrecord_index.index_is_current(f, i)]
  if stale and not build_missing:
    raise FileNotFoundError("%d of %d DALI index files are missing or stale (first: %s); build "
                            "them with:\n  %s" % (len(stale), len(input_files), stale[0][1],
                                                 index_command([f for f, _ in stale], index_dir)))
  for tfrecord_path, index_path in stale:
    tf.logging.info("DALI input: indexing %s -> %s", tfrecord_path, index_path)
    try:
      tfrecord_index.write_index(tfrecord_path, index_path)
    except PermissionError as error:
      raise PermissionError("cannot write DALI index %s (%s); build the indexes elsewhere with:\n"
                            "  tfrecord2idx %s --index_dir DIR\nand pass index_dir=DIR"
                            % (index_path, error, os.path.dirname(tfrecord_path) or ".")) from error
  return index_files


def index_command(tfrecord_paths, index_dir=None):
  """The tfrecord2idx command line that indexes exactly these files (few: by name; many: by
  directory, which skips the up-to-date ones)."""
  if len(tfrecord_paths) <= 4:
    targets = list(tfrecord_paths)
  else:
    targets = sorted({os.path.dirname(f) or "." for f in tfrecord_paths})
    names = [os.path.basename(f) for f in tfrecord_paths]
    if not all(fnmatch.fnmatch(n, tfrecord2idx.DEFAULT_PATTERN) for n in names):
      targets += ["--pattern", "'%s*'" % os.path.commonprefix(names)]
  return " ".join(["tfrecord2idx"] + targets + (["--index_dir", index_dir] if index_dir else []))


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


def check_records_match_specs(input_files, specs, max_seq_length, max_predictions_per_seq):
  """Checks the first record of every shard against specs (DALI would pad or blank silently);
  raises ValueError naming the file and the features that differ."""
  for path in input_files:
    first = tfrecord_index.read_records(path, limit=1)
    if not first:
      continue
    problems = record_mismatches(first[0], specs)
    if problems:
      raise ValueError(
          "%s: record 0 does not match max_seq_length=%d, max_predictions_per_seq=%d: %s "
          "(wrong flags, or google-style records without input_len: legacy_input_mask)"
          % (path, max_seq_length, max_predictions_per_seq, "; ".join(problems)))


def _read_index_array(index_path):
  """int64 [records, 2] (offset, size) of an index file."""
  return np.loadtxt(index_path, dtype=np.int64, ndmin=2).reshape(-1, 2)


def write_order_indexes(order, worker_index, position, index_of, directory):
  """Writes this worker's stream from `position` micro-batches on as one index file per piece
  (see the module docstring) into directory; returns (tfrecord paths, index paths, records)."""
  first_epoch, skip = order.locate(position, worker_index)
  last_epoch = max(first_epoch, len(order.epochs))  # + one epoch reusing the last file list
  cache, paths, indexes, total = {}, [], [], 0
  for number in range(first_epoch, last_epoch + 1):
    epoch = order.epochs[min(number, len(order.epochs) - 1)]
    rng = np.random.default_rng([order.seed, number, worker_index, 1])
    drop = skip if number == first_epoch else 0
    for k, piece in enumerate(epochs.worker_pieces(epoch, order.seed, number, order.num_workers,
                                                   worker_index, "records")):
      if piece.path not in cache:
        cache[piece.path] = _read_index_array(index_of[piece.path])
      entries = cache[piece.path][piece.first:piece.end]
      entries = entries[rng.permutation(len(entries))][drop:]
      drop = max(0, drop - (piece.end - piece.first))
      if not len(entries):
        continue
      index_path = os.path.join(directory, "epoch%d-piece%d.idx" % (number, k))
      with open(index_path, "w", encoding="ascii") as f:
        f.write(tfrecord_index.format_index(map(tuple, entries.tolist())))
      paths.append(piece.path)
      indexes.append(index_path)
      total += len(entries)
  return paths, indexes, total


def _order_directory():
  """A private temporary directory for order index files, removed when the process exits."""
  directory = tempfile.mkdtemp(prefix="bert_fin_dali_order_")
  atexit.register(shutil.rmtree, directory, True)
  return directory


def build_pipeline(input_files, index_files, specs, batch_size, shard_id, num_shards, shuffle,
                   seed, options):
  """The CPU-only DALI pipeline: one tfrecord reader over input_files (a file may repeat, with
  another index file each time), records in index order unless shuffle; outputs follow specs'
  order, each sample [length], int64 features cast to int32."""
  from nvidia.dali import fn, pipeline, tfrecord, types
  dali_dtypes = {records.INT64: (tfrecord.int64, 0), records.FLOAT32: (tfrecord.float32, 0.0)}
  pipe = pipeline.Pipeline(batch_size=batch_size, num_threads=options.num_threads,
                           device_id=None, seed=seed,
                           prefetch_queue_depth=options.prefetch_queue_depth)
  with pipe:
    features = fn.readers.tfrecord(
        path=list(input_files), index_path=list(index_files),
        features={s.name: tfrecord.FixedLenFeature([s.length], *dali_dtypes[s.dtype])
                  for s in specs},
        shard_id=shard_id, num_shards=num_shards, random_shuffle=shuffle,
        initial_fill=options.initial_fill, prefetch_queue_depth=options.reader_prefetch_queue_depth,
        stick_to_shard=False, pad_last_batch=False, name=READER_NAME)
    outputs = []
    for spec in specs:
      tensor = features[spec.name]
      if spec.dtype == records.INT64:
        tensor = fn.cast(tensor, dtype=types.INT32)
      outputs.append(tensor)
    pipe.set_outputs(*outputs)
  return pipe


def dali_dataset(pipe, specs, batch_size, options):
  """tf.data view of the pipeline, on the CPU: a tuple of int32/float32 tensors
  [batch_size, length] in specs' order."""
  import nvidia.dali.plugin.tf as dali_tf
  dtypes = tuple(tf.float32 if s.dtype == records.FLOAT32 else tf.int32 for s in specs)
  shapes = tuple((batch_size, s.length) for s in specs)
  with tf.device("/cpu:0"):
    return dali_tf.DALIDataset(
        pipeline=pipe, batch_size=batch_size, num_threads=options.num_threads, device_id=None,
        prefetch_queue_depth=options.prefetch_queue_depth, output_dtypes=dtypes,
        output_shapes=shapes)


def exactly_once(dataset, num_records, batch_size):
  """The first num_records samples of an endless batched dataset, rebatched (last batch partial;
  batch dimension unknown, as in tf.data's eval input)."""
  num_batches = -(-num_records // batch_size)
  return dataset.take(num_batches).unbatch().take(num_records).batch(batch_size)


def input_fn_builder(input_files, max_seq_length, max_predictions_per_seq, is_training, batch_size,
                     num_workers=1, worker_index=0, legacy_input_mask=False, seed=None, order=None,
                     position=0, **options):
  """Checks the shards (indexes, shapes, sharding) now; returns input_fn(params) -> Dataset.

  Training: order: an epochs.DataOrder with sharding "records" (run_pretraining's; its files
  replace input_files; default: one epoch of input_files); position: micro-batches consumed.
  """
  from bert_fin.input import tfdata
  options = parse_options(options)
  if is_training and order is not None:
    input_files = sorted({f for epoch in order.epochs for f in epoch.files})
  input_files = tfdata.expand_input_files(input_files)  # index and stats files left out
  if batch_size < 1:
    raise ValueError("batch_size must be >= 1, got %d" % batch_size)
  missing = [f for f in input_files if not os.path.isfile(f)]
  if missing:
    raise FileNotFoundError("DALI input: %d input file(s) not found, first: %s"
                            % (len(missing), missing[0]))
  layout = tfdata.packed_layout(input_files, max_seq_length)  # packed records: their own specs
  specs = (records.layout_specs(layout) if layout else
           records.read_specs(max_seq_length, max_predictions_per_seq, legacy_input_mask))
  index_files = ensure_indexes(input_files, options.index_dir, options.build_missing_indexes)
  tfrecord_index.verify_checksums(input_files, index_files)  # DALI checks no CRC itself
  num_records = sum(tfrecord_index.count_index_records(i) for i in index_files)
  shard_records = check_shardable(num_records, num_workers, worker_index)
  if options.validate_records:
    check_records_match_specs(input_files, specs, max_seq_length, max_predictions_per_seq)
  names = [s.name for s in specs]
  tf.logging.info("DALI input: worker %d/%d reads %d of %d records from %d files (CPU)",
                  worker_index, num_workers, shard_records, num_records, len(input_files))
  if is_training:
    if options.shuffle:
      raise ValueError("DALI input: training reads in the order of input/epochs.py; the shuffle "
                       "option is for evaluation only")
    if order is None:
      seed = np.random.SeedSequence().entropy % 2 ** 31 if seed is None else seed
      order = tfdata.new_order(input_files, num_workers, batch_size, seed, sharding="records")
    elif (order.num_workers, order.batch_size, order.sharding) != (num_workers, batch_size,
                                                                   "records"):
      raise ValueError("DALI input: order made for %s, not %d workers x batch %d"
                       % (order.layout(), num_workers, batch_size))
    index_of = dict(zip(input_files, index_files))
    reader_files, reader_indexes, _ = write_order_indexes(order, worker_index, position, index_of,
                                                          _order_directory())
    reader_shard, reader_shards, shuffle = 0, 1, False
  else:
    reader_files, reader_indexes = input_files, index_files
    reader_shard, reader_shards, shuffle = worker_index, num_workers, bool(options.shuffle)

  def input_fn(params=None):
    """Estimator input_fn; params is unused (batch_size is fixed by the builder)."""
    del params
    pipe = build_pipeline(reader_files, reader_indexes, specs, batch_size, reader_shard,
                          reader_shards, shuffle, seed, options)
    dataset = dali_dataset(pipe, specs, batch_size, options)
    if not is_training:
      dataset = exactly_once(dataset, shard_records, batch_size)
    return dataset.map(lambda *tensors: records.tf_decode_features(dict(zip(names, tensors))))

  return input_fn
