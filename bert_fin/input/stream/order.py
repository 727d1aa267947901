"""The data order, pure arithmetic: epochs, each worker's share, positions (no I/O, no TF, no MPI).

An *epoch* is a file list, fixed when the epoch is recorded, with each file's record count; the
order is a function of (seed, epoch, file list, workers) only (see the package docstring:
bert_fin/input/stream/__init__.py). DataOrder is what data_order.json holds (resume.py reads and
writes it); WorkerStream is a reader's immutable view of one worker from one position.
"""
import collections
import json

import numpy as np

SHARDING_OF_PIPELINE = {"tfdata": "files", "dali": "records"}
POSITION_VARIABLE = "data_position/micro_batches"  # checkpointed: micro-batches consumed

Epoch = collections.namedtuple("Epoch", ["files", "records"])  # paths (glob order), counts
Piece = collections.namedtuple("Piece", ["path", "first", "end"])  # records [first, end)


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

  def source_streams(self):
    """[self]: a one-source view, as the readers read a MixtureStream's sources."""
    return [self]

  def where(self):
    """This worker's place in the order, for the logs."""
    return "record %d of epoch %d" % self.start()[::-1]

  def end_position(self, num_accumulation_steps):
    """Where the view ends (None: endless)."""
    if self.num_epochs is None:
      return None
    return self.order.projected(self.num_epochs).stop_position(num_accumulation_steps)
