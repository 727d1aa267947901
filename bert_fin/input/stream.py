"""THE training data stream of a run: epochs, order, position, skip on resume, a growing corpus, and
the record of what was read (output_dir/data_order.json). The one owner of the data order.

Order: pure functions of (seed, epoch, file list, workers).
  An *epoch* is a file list, fixed when the epoch is recorded, with each file's record count.
  file_order(n, seed, e)        seeded permutation of the epoch's files (the same on every rank);
  worker_pieces(...)            a worker's share as pieces (path, first, end) of record ranges:
                                sharding "files" (tf.data): whole files perm[w::W] (files % W == 0);
                                sharding "records" (DALI): the records [N*w//W, N*(w+1)//W) of the
                                permuted concatenation, as pieces of files;
  shuffle_seed(seed, e, w)      the seed of tf.data's record shuffle buffer for (epoch, worker);
  piece_permutations(...)       DALI's seeded order of each piece's records.
A worker's stream is the concatenation of its epochs' records; batches run on across epochs.

Position: micro-batches consumed, the int64 variable `data_position/micro_batches` of every
checkpoint (one integer, equal on every rank: each session.run is one micro-batch everywhere).
Worker w has read (position - start_position) * batch_size records of its stream since the order
began; `DataOrder.locate` turns that into (epoch, records of it already read). A reader resumes by
rebuilding the stream and skipping those records; no iterator or shuffle state is saved. Dropout
masks are stateless in (seed, rank, position), so a restarted process redraws them.

data_order.json (rank 0 writes it atomically; kilobytes): the seed, the layout it was made for
(workers, per-worker batch size, sharding), the --input_file it came from, the position its epoch 0
starts at (0, or the step where --data_order=restart began it) and every recorded epoch's absolute
file paths and record counts. Resuming checks the files given now against it (`resume_order`).

Growing corpus: after every update each rank checks whether the recorded epochs end less than one
update ahead of the position (the same answer everywhere); then rank 0 records the next epoch from
the --input_file glob as it is at that moment (files new to the run checked first, by the run's
check), writes the JSON and broadcasts it. A new file joins at an epoch boundary, never inside one.

Readers (input/tfdata.py, input/dali.py) get a WorkerStream: an immutable view of the order for one
worker from one position, reading the last recorded file list again for later epochs. While the
recorded epochs are what the view assumed, one training call runs to the end. When a new epoch's
files differ (the corpus changed), the StreamHook stops where that epoch begins and the caller
starts a new call with a new view. DALI's view covers a bounded number of records (its order is
written out as index files): the hook stops at its end too.

Per-record work keyed on (seed, epoch, record) has one place: WorkerStream.epoch_pieces gives, for
every epoch, the records of this worker in reading order. A record's identity in an epoch is its
index in the epoch's file list in glob order (identity_offsets: the records of the files before
its file, + its index inside the file): the same for any number of workers, sharding and shuffle.
Readers attach (epoch, identity) to each record before shuffling; dynamic masking
(input/dynamic_masking.py) draws a record's masks from (seed, epoch, identity).
"""
import collections
import json
import os

import numpy as np

from bert_fin import io_utils
from bert_fin.records import tfrecord_index

ORDER_FILE = "data_order.json"
SHARDING_OF_PIPELINE = {"tfdata": "files", "dali": "records"}
POSITION_VARIABLE = "data_position/micro_batches"
POSITION_AFTER = "data_position_after"  # graph collection: the position once this run's batch is in
DALI_VIEW_RECORDS = 1 << 22  # records a worker's DALI view covers at most (index lines written)

Epoch = collections.namedtuple("Epoch", ["files", "records"])  # paths (glob order), counts
Piece = collections.namedtuple("Piece", ["path", "first", "end"])  # records [first, end)


class StreamError(ValueError):
  """The data stream cannot go on as asked (one line: what changed and the flag that accepts it)."""


def record_count(path, index_path=None):
  """Records in a TFRecord file: from its DALI index when current, else a header-only scan."""
  index_path = index_path or tfrecord_index.index_path_for(path)
  if tfrecord_index.index_is_current(path, index_path):
    return tfrecord_index.count_index_records(index_path)
  return sum(1 for _ in tfrecord_index.iter_record_spans(path, verify=False))


def expand_input_files(patterns):
  """google's --input_file (a comma list of globs, or a list) -> sorted absolute paths, through
  tf.io.gfile so remote filesystems work (io_utils.expand_file_patterns). DALI indexes and
  create_pretraining_data's stats JSON a broad glob also matches are left out, with a logged count
  (read as TFRecords they would fail mid-run, or break the files % workers rule)."""
  import tensorflow.compat.v1 as tf  # pylint: disable=import-outside-toplevel
  from bert_fin.data import writer  # pylint: disable=import-outside-toplevel
  files = io_utils.expand_file_patterns(patterns, tf.io.gfile.glob)
  shards = [f if "://" in f else os.path.abspath(f) for f in files
            if not f.endswith((tfrecord_index.INDEX_SUFFIX, writer.STATS_SUFFIX))]
  if len(shards) != len(files):
    tf.logging.warning("input: skipped %d index/stats file(s) matched by the input file pattern",
                       len(files) - len(shards))
  if not shards:
    raise ValueError("input file pattern %r matches only index/stats files" % (patterns,))
  return shards


def file_order(num_files, seed, epoch):
  """int array [num_files]: the epoch's file permutation, a function of (seed, epoch) only."""
  return np.random.default_rng([seed, epoch, 0]).permutation(num_files)


def shuffle_seed(seed, epoch, worker_index):
  """int in [0, 2**31): the seed of tf.data's record shuffle for (epoch, worker)."""
  return int(np.random.default_rng([seed, epoch, worker_index + 1]).integers(2 ** 31))


def check_files_divisible(num_files, num_workers, what="input files"):
  """Raises ValueError unless num_files splits evenly over num_workers (file-level sharding)."""
  if num_files < num_workers:
    raise ValueError(
        "%d %s for %d workers: every worker needs its own file(s), otherwise ranks stall waiting "
        "for each other. Write at least %d files (a multiple of %d), e.g. with "
        "create_pretraining_data --num_output_files, or use --input_pipeline=dali (it shards "
        "records)" % (num_files, what, num_workers, num_workers, num_workers))
  remainder = num_files % num_workers
  if remainder:
    raise ValueError(
        "%d %s are not divisible by %d workers (remainder %d): ranks would get unequal data and "
        "stall waiting for each other. Use a multiple of %d files: drop %d or add %d, or use "
        "--input_pipeline=dali (it shards records)" % (num_files, what, num_workers, remainder,
                                                       num_workers, remainder,
                                                       num_workers - remainder))


def worker_pieces(epoch, seed, epoch_number, num_workers, worker_index, sharding):
  """[Piece] of worker_index's share of `epoch`, in reading order (see the module docstring)."""
  perm = file_order(len(epoch.files), seed, epoch_number)
  if sharding == "files":
    return [Piece(epoch.files[i], 0, epoch.records[i]) for i in perm[worker_index::num_workers]]
  counts = np.asarray(epoch.records, dtype=np.int64)[perm]
  total = int(counts.sum())
  lo, hi = total * worker_index // num_workers, total * (worker_index + 1) // num_workers
  pieces, start = [], 0
  for i, count in zip(perm, counts.tolist()):
    first, end = max(lo, start) - start, min(hi, start + count) - start
    if first < end:
      pieces.append(Piece(epoch.files[i], first, end))
    start += count
  return pieces


def identity_offsets(epoch):
  """{path: identity of the file's record 0}: an epoch's records numbered 0, 1, ... over its files
  in glob order (the order of epoch.files, not the permuted reading order)."""
  starts = np.concatenate([[0], np.cumsum(epoch.records, dtype=np.int64)[:-1]])
  return dict(zip(epoch.files, starts.tolist()))


def piece_permutations(pieces, seed, epoch_number, worker_index):
  """[int array]: DALI's reading order of each piece's records (offsets into the piece)."""
  rng = np.random.default_rng([seed, epoch_number, worker_index, 1])
  return [rng.permutation(piece.end - piece.first) for piece in pieces]


class DataOrder(object):
  """The epochs of a run and the layout they are read with (data_order.json; module docstring).

  seed: int; num_workers, batch_size (per-worker micro-batch): ints; sharding "files" | "records";
  epochs: [Epoch]; input_file: the --input_file they came from (None in files of bert_fin before
  it was saved); start_position: the position at which epoch 0 begins.
  """

  def __init__(self, seed, num_workers, batch_size, sharding, epochs=(), input_file=None,
               start_position=0):
    if sharding not in SHARDING_OF_PIPELINE.values():
      raise ValueError("sharding must be one of %s, got %r" % (
          sorted(SHARDING_OF_PIPELINE.values()), sharding))
    self.seed, self.num_workers, self.batch_size = int(seed), num_workers, batch_size
    self.sharding, self.input_file, self.start_position = sharding, input_file, start_position
    self.epochs, self._lengths = [], []
    for epoch in epochs:
      self.add_epoch(epoch.files, epoch.records)

  def layout(self):
    return {"num_workers": self.num_workers, "batch_size": self.batch_size,
            "sharding": self.sharding}

  def add_epoch(self, files, records):
    """Appends the next epoch (files in glob order, their record counts) after checking that every
    worker gets data; returns its number."""
    epoch = Epoch(list(files), [int(c) for c in records])
    number = len(self.epochs)
    if self.sharding == "files":
      check_files_divisible(len(epoch.files), self.num_workers, "input files (epoch %d)" % number)
    lengths = [sum(p.end - p.first for p in worker_pieces(epoch, self.seed, number,
                                                           self.num_workers, w, self.sharding))
               for w in range(self.num_workers)]
    if min(lengths) < 1:
      raise ValueError("epoch %d: %d records in %d files leave worker %d of %d without data"
                       % (number, sum(epoch.records), len(epoch.files), lengths.index(0),
                          self.num_workers))
    self.epochs.append(epoch)
    self._lengths.append(lengths)
    return number

  def copy(self):
    order = DataOrder(self.seed, self.num_workers, self.batch_size, self.sharding,
                      input_file=self.input_file, start_position=self.start_position)
    order.epochs, order._lengths = list(self.epochs), list(self._lengths)  # pylint: disable=protected-access
    return order

  def projected(self, num_epochs):
    """A copy with num_epochs epochs at least: the recorded ones, then the last file list again."""
    order = self.copy()
    while len(order.epochs) < num_epochs:
      order.add_epoch(self.epochs[-1].files, self.epochs[-1].records)
    return order

  def locate(self, position, worker_index):
    """(epoch, records of it already read) for worker_index at `position` micro-batches;
    epoch == len(self.epochs) when the position lies beyond the recorded epochs."""
    consumed = (position - self.start_position) * self.batch_size
    for number, lengths in enumerate(self._lengths):
      if consumed < lengths[worker_index]:
        return number, consumed
      consumed -= lengths[worker_index]
    return len(self.epochs), consumed

  def stop_position(self, num_accumulation_steps=1, num_epochs=None):
    """The last position (a multiple of num_accumulation_steps: an update is never cut) at which
    no worker has read beyond the first num_epochs (default: all recorded) epochs."""
    lengths = self._lengths[:len(self.epochs) if num_epochs is None else num_epochs]
    if not lengths:
      return self.start_position
    last = int(np.asarray(lengths, dtype=np.int64).sum(axis=0).min()) // self.batch_size
    last += self.start_position
    return last - last % num_accumulation_steps

  def to_json(self):
    return json.dumps(dict(self.layout(), seed=self.seed, input_file=self.input_file,
                           start_position=self.start_position,
                           epochs=[{"files": e.files, "records": e.records} for e in self.epochs]),
                      indent=1, sort_keys=True)

  @classmethod
  def from_json(cls, text):
    obj = json.loads(text)
    return cls(obj["seed"], obj["num_workers"], obj["batch_size"], obj["sharding"],
               [Epoch(e["files"], e["records"]) for e in obj["epochs"]],
               obj.get("input_file"), obj.get("start_position", 0))


def load_order(output_dir):
  """The DataOrder saved in output_dir, or None; StreamError when the file is not one."""
  path = os.path.join(output_dir, ORDER_FILE)
  if not os.path.exists(path):
    return None
  try:
    with open(path, encoding="utf-8") as f:
      return DataOrder.from_json(f.read())
  except (ValueError, KeyError, TypeError) as e:
    raise StreamError("%s is not a data order bert_fin wrote (%s: %s): restore it, or pass "
                      "--data_order=restart to start a new order from the checkpoint"
                      % (path, type(e).__name__, e)) from e


def save_order(output_dir, order):
  with io_utils.atomic_output(os.path.join(output_dir, ORDER_FILE)) as f:
    f.write(order.to_json())


def archive_order(output_dir, step):
  """Keeps a copy of the order --data_order=restart replaces, data_order-until-step-N.json (a
  copy: a run killed before the new order is saved still has the old one)."""
  path = os.path.join(output_dir, ORDER_FILE)
  if os.path.exists(path):
    with open(path, encoding="utf-8") as f, io_utils.atomic_output(os.path.join(
        output_dir, "data_order-until-step-%d.json" % step)) as archive:
      archive.write(f.read())


def _absolute(saved, files_now):
  """saved with relative paths (data_order.json of bert_fin before absolute paths) made absolute:
  the file given now whose path ends with it, else relative to the working directory."""
  def fix(path):
    if os.path.isabs(path) or "://" in path:
      return path
    tail = os.sep + os.path.normpath(path)
    matches = [f for f in files_now if f.endswith(tail)]
    return matches[0] if len(matches) == 1 else os.path.abspath(path)

  return DataOrder(saved.seed, saved.num_workers, saved.batch_size, saved.sharding,
                   [Epoch([fix(f) for f in e.files], e.records) for e in saved.epochs],
                   saved.input_file, saved.start_position)


def _names(paths, limit=3):
  shown = ", ".join(os.path.basename(p) for p in paths[:limit])
  return shown + (", ..." if len(paths) > limit else "")


def resume_order(saved, seed, num_workers, batch_size, sharding, input_file, files_now, position,
                 restart=False, describe_layout=None):
  """(DataOrder to continue at `position`, [what changed]) against the saved order.

  saved: the DataOrder of data_order.json or None; seed: --seed (None: the saved one, or drawn for
  a new order); num_workers, batch_size, sharding, input_file: this run's; files_now: the
  --input_file files now (absolute); restart: --data_order=restart. No saved order -> a new one.
  Same layout and files -> the saved order (exact resume); files only added under the same
  --input_file -> the saved order (a growing corpus: they join at the next epoch). Anything else
  -> StreamError naming what changed, or with restart a new order beginning at `position` and the
  changes. describe_layout(old_files, new_files) may add what differs in the records ('' if
  nothing).
  """
  if saved is None:
    seed = int(np.random.SeedSequence().entropy % 2 ** 31) if seed is None else seed
    return DataOrder(seed, num_workers, batch_size, sharding, input_file=input_file,
                     start_position=position), []
  saved = _absolute(saved, files_now)
  seed = saved.seed if seed is None else seed
  wanted = {"num_workers": num_workers, "batch_size": batch_size, "sharding": sharding}
  changes = ["%s %s -> %s" % (key, saved.layout()[key], value)
             for key, value in wanted.items() if saved.layout()[key] != value]
  if seed != saved.seed:
    changes.append("seed %d -> %d" % (saved.seed, seed))
  if position < saved.start_position:
    changes.append("the checkpoint's data position %d lies before the order's start %d"
                   % (position, saved.start_position))
  current = max([saved.locate(position, w)[0] for w in range(saved.num_workers)], default=0)
  unread = {f for e in saved.epochs[current:] for f in e.files}
  last = saved.epochs[-1].files if saved.epochs else []
  added = [f for f in files_now if f not in set(last)]
  removed = sorted(f for f in unread if f not in set(files_now))
  if added and saved.input_file not in (None, input_file) or removed:
    layout = describe_layout(last, files_now) if describe_layout else ""
    changes.append("--input_file gives %d files, +%d/-%d against the %d of %s (added: %s; "
                   "removed: %s)%s" % (len(files_now), len(added), len(removed), len(last),
                                       ORDER_FILE, _names(added) or "none",
                                       _names(removed) or "none", layout))
  if not changes:
    saved.input_file = input_file
    return saved, []
  if not restart:
    raise StreamError(
        "cannot resume the data order of %s exactly: %s. Resume with the same inputs and flags, "
        "or pass --data_order=restart to keep the weights and step and start a new data order "
        "over the files given now" % (ORDER_FILE, "; ".join(changes)))
  return DataOrder(seed, num_workers, batch_size, sharding, input_file=input_file,
                   start_position=position), changes


def record_epochs(order, position, num_accumulation_steps, files, count_records):
  """Records epochs of `files` until the order ends at least one update past `position` (a file
  already in an earlier epoch keeps its count; count_records(path) counts a new one). Logs each
  epoch; returns the files new to the run."""
  import tensorflow.compat.v1 as tf  # pylint: disable=import-outside-toplevel
  known = {}
  for epoch in order.epochs:
    known.update(zip(epoch.files, epoch.records))
  new = [f for f in files if f not in known]
  while order.stop_position(num_accumulation_steps) < position + num_accumulation_steps:
    counts = [known[f] if f in known else count_records(f) for f in files]
    known.update(zip(files, counts))
    gone = [f for f in order.epochs[-1].files if f not in set(files)] if order.epochs else []
    number = order.add_epoch(files, counts)
    tf.logging.info("data epoch %d: %d files, %d records%s", number, len(files), sum(counts),
                    "; %d new: %s" % (len(new), _names(new, 10)) if number and new else "")
    if gone:
      tf.logging.warning("data epoch %d: %d file(s) of epoch %d no longer match --input_file and "
                         "are not read from now on: %s", number, len(gone), number - 1,
                         _names(gone, 10))
  return new


class WorkerStream(collections.namedtuple("WorkerStream", ["order", "worker_index", "position",
                                                           "num_epochs"])):
  """What one worker reads from `position` on: the readers' input (an immutable view).

  order: DataOrder (not changed afterwards); num_epochs: epochs of the view (None: endless, the
  last recorded file list read again for every later epoch).
  """

  def start(self):
    """(first epoch, records of it to skip)."""
    return self.order.locate(self.position, self.worker_index)

  def epoch(self, number):
    return self.order.epochs[min(number, len(self.order.epochs) - 1)]

  def epoch_pieces(self, number):
    """[Piece] this worker reads in epoch `number` (whole pieces; see start() for the skip)."""
    return worker_pieces(self.epoch(number), self.order.seed, number, self.order.num_workers,
                         self.worker_index, self.order.sharding)

  def end_position(self, num_accumulation_steps):
    """Where the view ends (None: endless)."""
    if self.num_epochs is None:
      return None
    return self.order.projected(self.num_epochs).stop_position(num_accumulation_steps)


class DataStream(object):
  """The run's stream during training, on every rank: the order, extended ahead of the position.

  order: the DataOrder of the run (rank 0's, broadcast); dist: distributed.init(); output_dir:
  where rank 0 saves data_order.json; input_file: the --input_file globs; check_new_files(paths):
  the run's checks of files new to the run (raises ValueError); num_accumulation_steps: updates
  are never cut by a stop.
  """

  def __init__(self, order, dist, output_dir, input_file, check_new_files, num_accumulation_steps):
    self.order, self._dist, self._output_dir = order, dist, output_dir
    self._input_file, self._check = input_file, check_new_files
    self._window = num_accumulation_steps

  def record_ahead(self, position):
    """Records epochs until they end at least one update past `position` (rank 0 globs, checks
    the files new to the run, saves; every rank gets the result). Every rank calls it at the same
    positions. Raises StreamError (on every rank) when the next epoch cannot be recorded."""
    if self.order.stop_position(self._window) >= position + self._window:
      return
    text, error = "", ""
    if self._dist.is_chief:
      try:
        files = expand_input_files(self._input_file)
        known = {f for epoch in self.order.epochs for f in epoch.files}
        new = [f for f in files if f not in known]
        if new and known:  # the first epoch's files were checked with the run
          self._check(new)
        record_epochs(self.order, position, self._window, files, record_count)
        save_order(self._output_dir, self.order)
        text = self.order.to_json()
      except (ValueError, OSError) as e:
        error = "data epoch %d: %s" % (len(self.order.epochs), e)
    error = self._dist.broadcast_bytes(error.encode("utf-8")).decode("utf-8")
    if error:
      raise StreamError(error)
    self.order = DataOrder.from_json(self._dist.broadcast_bytes(text.encode("utf-8")).decode(
        "utf-8"))

  def view(self, position, micro_batches=None):
    """WorkerStream of this rank from `position`: endless (micro_batches None, tf.data), or
    covering at least micro_batches more (DALI)."""
    self.record_ahead(position)
    num_epochs = None
    if micro_batches is not None:
      projected = self.order.copy()
      while projected.stop_position(self._window) < position + micro_batches:
        projected.add_epoch(self.order.epochs[-1].files, self.order.epochs[-1].records)
      num_epochs = len(projected.epochs)
    return WorkerStream(self.order.copy(), self._dist.rank, position, num_epochs)

  def first_change(self, view):
    """The number of the first recorded epoch whose files differ from what `view` assumed, or
    None."""
    for number in range(len(view.order.epochs), len(self.order.epochs)):
      if self.order.epochs[number].files != view.order.epochs[-1].files:
        return number
    return None


def position_variable():
  """int64 [] global, non-trainable, checkpointed: micro-batches consumed (0 in a new run)."""
  import tensorflow.compat.v1 as tf  # pylint: disable=import-outside-toplevel
  scope, name = POSITION_VARIABLE.split("/")
  with tf.variable_scope(scope):
    return tf.get_variable(name, shape=[], dtype=tf.int64, trainable=False, use_resource=True,
                           initializer=tf.zeros_initializer())


def dropout_seed(seed, rank, position):
  """int64 [2]: the stateless dropout seed of this rank's micro-batch number `position`."""
  import tensorflow.compat.v1 as tf  # pylint: disable=import-outside-toplevel
  base = tf.random.experimental.stateless_fold_in(tf.constant([seed, 0], tf.int64), rank)
  return tf.random.experimental.stateless_fold_in(base, position)


def advance_after(train_op, variable):
  """train_op grouped with variable += 1 after it (one micro-batch consumed); the new value is put
  in the POSITION_AFTER collection for StreamHook."""
  import tensorflow.compat.v1 as tf  # pylint: disable=import-outside-toplevel
  with tf.control_dependencies([train_op]):
    after = variable.assign_add(1)
  tf.add_to_collection(POSITION_AFTER, after)
  return tf.group(train_op, after, name="train_op_and_position")


def checkpoint_position(checkpoint):
  """Micro-batches consumed at `checkpoint` (a path prefix); 0 without a checkpoint. Raises
  StreamError for a checkpoint without a data position (bert_fin before it was saved)."""
  if not checkpoint:
    return 0
  import tensorflow.compat.v1 as tf  # pylint: disable=import-outside-toplevel
  reader = tf.train.load_checkpoint(checkpoint)
  if not reader.has_tensor(POSITION_VARIABLE):
    raise StreamError("%s has no %s (written before bert_fin saved the data position): continue "
                      "from it with --init_checkpoint=%s and a new --output_dir"
                      % (checkpoint, POSITION_VARIABLE, checkpoint))
  return int(reader.get_tensor(POSITION_VARIABLE))
