"""Training data order as a pure function of (seed, epoch, file list, workers): epochs and positions.

An *epoch* is a file list fixed when the epoch is first needed (a growing corpus is re-globbed at
each new epoch, never inside one) with each file's record count. For epoch e, every worker reads
its share of the files in an order that depends only on (seed, e):

  file_order(n, seed, e)          a seeded permutation of the epoch's n files (same on every rank);
  worker_pieces(...)              this worker's share as pieces (path, first, end) of record ranges:
                                  sharding "files": whole files perm[w::workers] (tf.data; needs
                                  files % workers == 0); sharding "records": the records
                                  [N*w//W, N*(w+1)//W) of the permuted concatenation (DALI).

A worker's *stream* is the concatenation of its epochs' records (each epoch shuffled inside by the
input pipeline with a seed derived from (seed, epoch, worker)); batches run on across epoch
boundaries. Every worker consumes the same number of micro-batches (one per training step), so the
whole data position of a run is ONE integer: micro-batches consumed, `position`. Worker w has then
consumed position * batch_size records of its stream; `locate` turns that into (epoch, offset).

A DataOrder (the JSON file `data_order.json` beside the checkpoints, written by rank 0) holds the
seed, the layout it was made for (workers, batch size, sharding) and every epoch's files and record
counts: kilobytes, whatever the corpus size, and enough for every rank to rebuild its stream.
"""
import collections
import json
import os

import numpy as np

from bert_fin import tfrecord_index

ORDER_FILE = "data_order.json"
SHARDINGS = ("files", "records")

Epoch = collections.namedtuple("Epoch", ["files", "records"])  # paths (glob order), counts
Piece = collections.namedtuple("Piece", ["path", "first", "end"])  # records [first, end)


def record_count(path, index_dir=None):
  """Records in a TFRecord file: from its DALI index when current, else a header-only scan."""
  index = tfrecord_index.index_path_for(path, index_dir)
  if tfrecord_index.index_is_current(path, index):
    return tfrecord_index.count_index_records(index)
  return sum(1 for _ in tfrecord_index.iter_record_spans(path, verify=False))


def file_order(num_files, seed, epoch):
  """int array [num_files]: the epoch's file permutation, a function of (seed, epoch) only."""
  return np.random.default_rng([seed, epoch, 0]).permutation(num_files)


def shuffle_seed(seed, epoch, worker_index):
  """int: the seed of the record shuffle of (epoch, worker), in [0, 2**31)."""
  return int(np.random.default_rng([seed, epoch, worker_index + 1]).integers(2 ** 31))


def check_files_divisible(num_files, num_workers, what="input files"):
  """Raises ValueError unless num_files splits evenly over num_workers (file-level sharding)."""
  if num_workers < 1:
    raise ValueError("num_workers must be >= 1, got %d" % num_workers)
  if num_files < num_workers:
    raise ValueError(
        "%d %s for %d workers: every worker needs its own file(s), otherwise ranks stall waiting "
        "for each other. Write at least %d files (a multiple of %d), e.g. with "
        "create_pretraining_data --num_output_files."
        % (num_files, what, num_workers, num_workers, num_workers))
  remainder = num_files % num_workers
  if remainder:
    raise ValueError(
        "%d %s are not divisible by %d workers (remainder %d): ranks would get unequal data and "
        "stall waiting for each other. Use a multiple of %d files: drop %d or add %d."
        % (num_files, what, num_workers, remainder, num_workers, remainder,
           num_workers - remainder))
  return num_files // num_workers


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


def worker_records(epoch, seed, epoch_number, num_workers, worker_index, sharding):
  """Records of worker_index's share of `epoch`."""
  return sum(p.end - p.first for p in worker_pieces(epoch, seed, epoch_number, num_workers,
                                                    worker_index, sharding))


class DataOrder(object):
  """The epochs of a run and the layout they are read with; see the module docstring.

  seed: int; num_workers, batch_size (per-worker micro-batch): ints; sharding: "files" |
  "records"; epochs: [Epoch].
  """

  def __init__(self, seed, num_workers, batch_size, sharding, epochs=()):
    if sharding not in SHARDINGS:
      raise ValueError("sharding must be one of %s, got %r" % (SHARDINGS, sharding))
    self.seed, self.num_workers, self.batch_size = int(seed), num_workers, batch_size
    self.sharding = sharding
    self.epochs = [Epoch(list(e.files), [int(c) for c in e.records]) for e in epochs]
    self._lengths = [self._epoch_lengths(i, e) for i, e in enumerate(self.epochs)]

  def _epoch_lengths(self, number, epoch):
    return [worker_records(epoch, self.seed, number, self.num_workers, w, self.sharding)
            for w in range(self.num_workers)]

  def layout(self):
    return {"num_workers": self.num_workers, "batch_size": self.batch_size,
            "sharding": self.sharding}

  def add_epoch(self, files, records):
    """Appends the next epoch (files in glob order, their record counts); checks it is usable."""
    epoch = Epoch(list(files), [int(c) for c in records])
    number = len(self.epochs)
    if self.sharding == "files":
      check_files_divisible(len(epoch.files), self.num_workers,
                            "input files (epoch %d)" % number)
    lengths = self._epoch_lengths(number, epoch)
    if min(lengths) < 1:
      raise ValueError("epoch %d: %d records in %d files leave worker %d of %d without data"
                       % (number, sum(epoch.records), len(epoch.files), lengths.index(0),
                          self.num_workers))
    self.epochs.append(epoch)
    self._lengths.append(lengths)
    return number

  def worker_epoch_records(self, epoch_number, worker_index):
    return self._lengths[epoch_number][worker_index]

  def locate(self, position, worker_index):
    """(epoch, records of it already consumed) for worker_index after `position` micro-batches.

    epoch == len(self.epochs) when the position lies beyond the recorded epochs.
    """
    consumed = position * self.batch_size
    for number, lengths in enumerate(self._lengths):
      if consumed < lengths[worker_index]:
        return number, consumed
      consumed -= lengths[worker_index]
    return len(self.epochs), consumed

  def stop_position(self, num_accumulation_steps=1):
    """The last position (a multiple of num_accumulation_steps, so an update window is never cut)
    at which no worker has read a record beyond the recorded epochs: training may run up to it
    with the epochs known now."""
    if not self.epochs:
      return 0
    ends = np.asarray(self._lengths, dtype=np.int64).sum(axis=0)
    last = int(ends.min()) // self.batch_size
    return last - last % num_accumulation_steps

  def to_json(self):
    return json.dumps(dict(self.layout(), seed=self.seed,
                           epochs=[{"files": e.files, "records": e.records} for e in self.epochs]),
                      indent=1, sort_keys=True)

  @classmethod
  def from_json(cls, text):
    obj = json.loads(text)
    return cls(obj["seed"], obj["num_workers"], obj["batch_size"], obj["sharding"], [Epoch(e["files"], e["records"]) for e in obj["epochs"]])


def load_order(directory):
  """The DataOrder saved in directory, or None."""
  path = os.path.join(directory, ORDER_FILE)
  if not os.path.exists(path):
    return None
  with open(path, encoding="utf-8") as f:
    return DataOrder.from_json(f.read())


def check_same_layout(saved, wanted, path):
  """Raises ValueError when a saved order was made for another layout or seed (no exact resume)."""
  differences = ["%s %s -> %s" % (k, saved.layout()[k], v) for k, v in wanted.layout().items()
                 if saved.layout()[k] != v]
  if saved.seed != wanted.seed:
    differences.append("seed %d -> %d" % (saved.seed, wanted.seed))
  if differences:
    raise ValueError(
        "%s was written for another data layout (%s): the saved data position cannot be continued "
        "exactly. Use the same --seed, workers, --train_batch_size and --input_pipeline, or a "
        "new --output_dir (with --init_checkpoint to keep the weights)."
        % (path, "; ".join(differences)))
