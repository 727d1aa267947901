"""The run's data order, pure arithmetic: its sources, which source each example of a worker's
stream comes from, and how many records of each source a position has consumed (no I/O, no TF, no
MPI). --input_file is a one-source order; --input_source=NAME=GLOB:WEIGHT (repeated) a mixture.

An order is a list of sources, each its own data order in *records*: a DataOrder (order.py) with
batch_size 1 and start_position 0, so its "position" is the number of its records a worker has
read; it has its own epochs (its own file lists, recorded when reached, a growing source joining
at its own epoch boundary), its own seed (the run's for source 0, one drawn from (seed, index)
for the others) and so its own file order and shuffles. A small source repeats (its epoch e+1
reshuffled by e+1) while a large one goes on. The --input_file source has no name (Source.name
None); it is source 0, so a one-source order reads exactly what a DataOrder of --input_file in
micro-batches read: the same seed, epochs, skip and shuffles.

Schedule(weights, seed): every worker's stream takes its n-th example (n = 0, 1, ... counted from
the order's start, n = (position - start_position) * batch_size + row) from the source
source_of(n) (`Schedule.sources(n, n + 1)`), the same function on every worker, so the workers
consume each source at the same rate and a source's epochs stay in step over the workers.
It is stratified: with f_s = weight_s / sum of weights and BLOCK examples a block,
  Q_s(b) = floor(b * BLOCK * f_s + 1/2)   examples of source s before block b,
  E(b)   = sum_s Q_s(b)                    block b's first example (|E(b) - b*BLOCK| <= S/2),
and block b's Q_s(b+1) - Q_s(b) examples of each source are put in an order drawn from
(seed, b). So |count_s(n) - n * f_s| < BLOCK + S for every n (the proportions hold within a block
over any stretch, not only on average), counts at any n cost O(S + BLOCK) (no enumeration of the
stream), and the inverse (where source s's k-th example falls) is a binary search over blocks.
One source: every example is its own (count_0(n) = n).

MixedOrder: data_order.json: the run's layout (workers, per-worker micro-batch, sharding), seed
and start position, and per source its name, glob, weight, seed and recorded epochs (the file of
one --input_file keeps the shape bert_fin wrote before mixtures: the layout, seed, start,
input_file and epochs). `consumed(position)` is each source's records per worker at a micro-batch
position; `stop_position` the last position no source has to read beyond its recorded epochs.
MixtureStream is a reader's view of one worker from one position: one order.WorkerStream per
source (at its consumed records) and the schedule from the position's first example on; bounded
(DALI) or endless (tf.data).
"""
import collections
import json
import math

import numpy as np

from bert_fin.input.stream import order as order_lib

BLOCK = 128  # examples of a schedule block (its sources' counts fixed, their order drawn)
MAX_SOURCES = 16  # the source index takes 4 bits of a dynamic-masking record key (input/tfdata.py)
MAX_WEIGHT_RATIO = 1e6  # largest / smallest weight: a source drawn once in a million examples
_SCHEDULE_TAG = 0x6d6978  # "mix": keeps the schedule's draws apart from the order's

# name None: --input_file's one source; input_file: its glob(s); weight: a positive number
Source = collections.namedtuple("Source", ["name", "input_file", "weight"])


def input_file_source(input_file):
  """The one Source of --input_file (globs, comma-separated): no name, weight 1."""
  return Source(None, input_file, 1.0)


def flag_of(source):
  """'--input_file' or '--input_source NAME': where a source's files come from, for messages."""
  return "--input_file" if source.name is None else "--input_source %s" % source.name


def sources_text(sources):
  """'a:0.8, b:0.2': the names and weights of [Source], for messages."""
  return ", ".join("%s:%g" % (s.name, s.weight) for s in sources)


def given_text(sources):
  """'--input_file GLOB' or '--input_source a:0.8, b:0.2': the flags of [Source], for messages."""
  if sources and sources[0].name is None:
    return "--input_file %s" % sources[0].input_file
  return "--input_source %s" % sources_text(sources)


def held_text(sources):
  """What a data_order.json of [Source] holds, for messages."""
  if sources and sources[0].name is None:
    return "one --input_file (%s)" % sources[0].input_file
  return "a mixture (--input_source %s)" % sources_text(sources)


def source_seed(seed, index):
  """The seed of source `index`'s own order (file orders, shuffles): the run's for source 0 (a
  one-source mixture reads what --input_file reads), else one drawn from (seed, index)."""
  if index == 0:
    return int(seed)
  return int(np.random.default_rng([seed, index, _SCHEDULE_TAG]).integers(2 ** 31))


def _first_true(predicate, guess=0):
  """The smallest integer b >= 0 with predicate(b) (predicate monotone: False ... True), searched
  from `guess` outwards."""
  if guess > 0 and predicate(guess):
    low, high = 0, guess
  else:
    low, step = guess, 2
    high = guess + step
    while not predicate(high):
      low, step = high, 2 * step
      high = guess + step
  while low < high:
    middle = (low + high) // 2
    if predicate(middle):
      high = middle
    else:
      low = middle + 1
  return low


def weight_problem(weights):
  """What makes `weights` (one a source) no mixture the schedule can represent, or None: each must
  be a finite number > 0, and the largest at most MAX_WEIGHT_RATIO times the smallest (a rarer
  source's blocks would lie beyond float arithmetic: 1e308 beside 1, or 1e-320)."""
  if not weights:
    return "no weights"
  bad = [w for w in weights if not (math.isfinite(w) and w > 0)]
  if bad:
    return "weight %r is not a finite number > 0" % bad[0]
  ratio = max(weights) / min(weights)  # both finite > 0: at worst inf, never an error
  if not ratio <= MAX_WEIGHT_RATIO:
    shown = "%.3g" % ratio if math.isfinite(ratio) else "over 1.8e308"
    return ("the largest weight is %s times the smallest, more than the %g a mixture's "
            "schedule represents" % (shown, MAX_WEIGHT_RATIO))
  return None


def fractions_of(weights):
  """[float] a source: weight / sum of weights, computed without overflow (two weights of 1e308
  sum to inf); ValueError for weights weight_problem refuses."""
  problem = weight_problem(list(weights))
  if problem:
    raise ValueError("mixture weights %s: %s" % (list(weights), problem))
  largest = float(max(weights))
  scaled = [float(w) / largest for w in weights]  # in [1 / MAX_WEIGHT_RATIO, 1]
  total = sum(scaled)
  return [w / total for w in scaled]


class Schedule(object):
  """Which source each example of a worker's stream comes from (module docstring).

  weights: positive numbers, one a source (normalised here, fractions_of); seed: int.
  """

  def __init__(self, weights, seed):
    if len(weights) > MAX_SOURCES:
      raise ValueError("at most %d sources, got %d" % (MAX_SOURCES, len(weights)))
    self.fractions = fractions_of(weights)
    self.seed = int(seed)

  @property
  def num_sources(self):
    return len(self.fractions)

  def quota(self, source, block):
    """int: examples of `source` before `block` (Q_s(b))."""
    return int(math.floor(block * BLOCK * self.fractions[source] + 0.5))

  def block_start(self, block):
    """int: the first example of `block` (E(b))."""
    return sum(self.quota(s, block) for s in range(self.num_sources))

  def block_of(self, n):
    """int: the block holding example n."""
    return _first_true(lambda b: self.block_start(b + 1) > n, max(0, n // BLOCK - 1))

  def block_sources(self, block):
    """int64 [E(b+1) - E(b)]: the source of each example of `block`, in stream order."""
    counts = [self.quota(s, block + 1) - self.quota(s, block) for s in range(self.num_sources)]
    ids = np.repeat(np.arange(self.num_sources, dtype=np.int64), counts)
    return np.random.default_rng([self.seed, block, _SCHEDULE_TAG]).permutation(ids)

  def counts(self, n):
    """[int] a source: examples of each source among the first n of the stream."""
    block = self.block_of(n)
    inside = np.bincount(self.block_sources(block)[:n - self.block_start(block)],
                         minlength=self.num_sources)
    return [self.quota(s, block) + int(inside[s]) for s in range(self.num_sources)]

  def index_of(self, source, k):
    """int: the stream index of source's k-th example (k = 0, 1, ...); so the first
    index_of(s, k) examples take exactly k of source s."""
    block = _first_true(lambda b: self.quota(source, b + 1) > k,
                        max(0, int(k / (BLOCK * self.fractions[source])) - 1))
    inside = np.flatnonzero(self.block_sources(block) == source)[k - self.quota(source, block)]
    return self.block_start(block) + int(inside)

  def sources(self, first, end):
    """int64 [end - first]: source_of(n) for n in [first, end) (tests, logs)."""
    out, block = [], self.block_of(first)
    start = self.block_start(block)
    while start < end:
      ids = self.block_sources(block)
      out.append(ids[max(0, first - start):end - start])
      block, start = block + 1, start + len(ids)
    return np.concatenate(out) if out else np.zeros([0], np.int64)


class MixedOrder(object):
  """The data order of a run, one source or a mixture (data_order.json; module docstring).

  seed: the run's; num_workers, batch_size (per-worker micro-batch), sharding: as DataOrder;
  sources: [Source]; orders: [DataOrder in records] one a source (None: new, without epochs);
  start_position: the micro-batch position at which the schedule's example 0 is read.
  """

  def __init__(self, seed, num_workers, batch_size, sharding, sources, orders=None,
               start_position=0):
    self.seed, self.num_workers, self.batch_size = int(seed), num_workers, batch_size
    self.sharding, self.start_position = sharding, start_position
    self.sources = [Source(*s) for s in sources]
    self.schedule = Schedule([s.weight for s in self.sources], self.seed)
    self._examples = {}  # records covered per source -> examples the stream can read
    self.orders = list(orders) if orders is not None else [
        order_lib.DataOrder(source_seed(self.seed, i), num_workers, 1, sharding,
                            input_file=s.input_file) for i, s in enumerate(self.sources)]

  def layout(self):
    return {"num_workers": self.num_workers, "batch_size": self.batch_size,
            "sharding": self.sharding}

  def copy(self):
    return MixedOrder(self.seed, self.num_workers, self.batch_size, self.sharding, self.sources,
                      [o.copy() for o in self.orders], self.start_position)

  def files(self):
    """{path}: every file of every source's recorded epochs."""
    return {f for order in self.orders for epoch in order.epochs for f in epoch.files}

  def projected(self, position):
    """A copy whose sources have epochs (their last file list again) until the order covers
    `position`: a bounded view's epochs (each source's num_epochs: len(orders[s].epochs))."""
    order = self.copy()
    for source_order, records in zip(order.orders, self.needed(position)):
      while source_order.stop_position(1) < records:
        source_order.add_epoch(source_order.epochs[-1].files, source_order.epochs[-1].records)
    return order

  def first_example(self, position):
    """int: the stream index of the first example read at micro-batch `position`."""
    return (position - self.start_position) * self.batch_size

  def consumed(self, position):
    """[int] a source: its records each worker has read before micro-batch `position`."""
    return self.schedule.counts(self.first_example(position))

  def stop_position(self, num_accumulation_steps=1, num_epochs=None):
    """The last position (a multiple of num_accumulation_steps) at which no worker has read beyond
    the first num_epochs[s] (default, or None: all recorded) epochs of any source s."""
    num_epochs = tuple(num_epochs or [None] * len(self.orders))
    covered = tuple(order.stop_position(1, num_epochs[s]) for s, order in enumerate(self.orders))
    if covered not in self._examples:  # after every update (hooks.StreamHook): kept
      self._examples[covered] = min(self.schedule.index_of(s, records)
                                    for s, records in enumerate(covered))
    last = self.start_position + self._examples[covered] // self.batch_size
    return last - last % num_accumulation_steps

  def needed(self, position):
    """[int] a source: records a worker must have recorded to read up to `position` (at least 1:
    every source has an epoch for the reader to start from)."""
    return [max(1, count) for count in self.consumed(position)]

  def to_json(self):
    if self.sources[0].name is None:  # --input_file: the shape of bert_fin before mixtures
      epochs = self.orders[0].epochs
      return json.dumps(dict(self.layout(), seed=self.seed, input_file=self.sources[0].input_file,
                             start_position=self.start_position,
                             epochs=[{"files": e.files, "records": e.records} for e in epochs]),
                        indent=1, sort_keys=True)
    sources = [{"name": s.name, "input_file": s.input_file, "weight": s.weight, "seed": o.seed,
                "epochs": [{"files": e.files, "records": e.records} for e in o.epochs]}
               for s, o in zip(self.sources, self.orders)]
    return json.dumps(dict(self.layout(), seed=self.seed, start_position=self.start_position,
                           sources=sources), indent=1, sort_keys=True)

  @classmethod
  def from_obj(cls, obj):
    """The order of data_order.json's object: "sources" (a mixture), else one --input_file."""
    if "sources" not in obj:
      epochs = [order_lib.Epoch(e["files"], e["records"]) for e in obj["epochs"]]
      input_file = obj.get("input_file")  # None in files of bert_fin before it was saved
      source_order = order_lib.DataOrder(obj["seed"], obj["num_workers"], 1, obj["sharding"],
                                         epochs, input_file)
      return cls(obj["seed"], obj["num_workers"], obj["batch_size"], obj["sharding"],
                 [input_file_source(input_file)], [source_order], obj.get("start_position", 0))
    sources, orders = [], []
    for item in obj["sources"]:
      sources.append(Source(item["name"], item["input_file"], float(item["weight"])))
      orders.append(order_lib.DataOrder(
          item["seed"], obj["num_workers"], 1, obj["sharding"],
          [order_lib.Epoch(e["files"], e["records"]) for e in item["epochs"]], item["input_file"]))
    return cls(obj["seed"], obj["num_workers"], obj["batch_size"], obj["sharding"], sources,
               orders, obj.get("start_position", 0))


def order_from_json(text):
  """The MixedOrder of data_order.json's text (one --input_file, as every bert_fin wrote it, or a
  "sources" list)."""
  return MixedOrder.from_obj(json.loads(text))


class MixtureStream(collections.namedtuple("MixtureStream", ["order", "worker_index", "position",
                                                             "num_epochs"])):
  """What one worker reads from `position` on: the readers' input (an immutable view).

  order: MixedOrder (not changed afterwards); num_epochs: None (endless: tf.data; a source's last
  recorded file list read again for its later epochs) or [epochs a source] of a bounded view
  (DALI; MixedOrder.projected).
  """

  def __new__(cls, order, worker_index, position, num_epochs=None):
    return super(MixtureStream, cls).__new__(cls, order, worker_index, position, num_epochs)

  def source_streams(self):
    """[order.WorkerStream] a source: this worker's stream of it from its consumed records."""
    num_epochs = self.num_epochs or [None] * len(self.order.orders)
    return [order_lib.WorkerStream(order, self.worker_index, consumed, epochs)
            for order, consumed, epochs in zip(self.order.orders,
                                               self.order.consumed(self.position), num_epochs)]

  def first_example(self):
    return self.order.first_example(self.position)

  def end_position(self, num_accumulation_steps):
    """Where the view ends (None: endless)."""
    if self.num_epochs is None:
      return None
    projected = self.order.copy()
    projected.orders = [order.projected(epochs)
                        for order, epochs in zip(self.order.orders, self.num_epochs)]
    return projected.stop_position(num_accumulation_steps, self.num_epochs)

  def where(self):
    """This worker's place in each source, for the logs."""
    return "; ".join("%srecord %d of epoch %d" % (
        ("" if source.name is None else source.name + ": ",) + stream.start()[::-1])
                     for source, stream in zip(self.order.sources, self.source_streams()))
