"""The run's data stream on every rank: rank 0 records epochs ahead of the position and broadcasts
them (DataStream), the input files and their record counts (through tf.io.gfile and DALI indexes),
and the position in the graph (the checkpointed variable, dropout seeds, the update that advances
it). The order's arithmetic is mixture.py (its sources') and order.py (a source's); what a resumed
run may change is resume.py.
"""
import os

from bert_fin import io_utils
from bert_fin.input.stream import mixture
from bert_fin.input.stream import order as order_lib
from bert_fin.input.stream import resume
from bert_fin.records import tfrecord_index

POSITION_AFTER = "data_position_after"  # graph collection: the position once this run's batch is in
DALI_VIEW_RECORDS = 1 << 22  # records a worker's DALI view covers at most (index lines written)


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


class DataStream(object):
  """The run's stream during training, on every rank: the order, extended ahead of the position.

  order: the mixture.MixedOrder of the run (rank 0's, broadcast; one --input_file is its one
  source); dist: distributed.init(); output_dir: where rank 0 saves data_order.json;
  check_new_files(paths): the run's checks of files new to the run (raises ValueError);
  num_accumulation_steps: updates are never cut by a stop.
  """

  def __init__(self, order, dist, output_dir, check_new_files, num_accumulation_steps):
    self.order, self._dist, self._output_dir = order, dist, output_dir
    self._check, self._window = check_new_files, num_accumulation_steps

  def _glob(self, position):
    """[[paths]] a source: the files of its glob now, those new to the run checked, for the
    sources whose recorded epochs end before `position` (the others keep their last epoch's
    list: nothing is recorded for them)."""
    return [self._checked_glob(order, source.input_file) if order.stop_position(1) < needed
            else order.epochs[-1].files
            for source, order, needed in zip(self.order.sources, self.order.orders,
                                             self.order.needed(position))]

  def _checked_glob(self, order, pattern):
    files = expand_input_files(pattern)
    known = {f for epoch in order.epochs for f in epoch.files}
    new = [f for f in files if f not in known]
    if new and known:  # the first epoch's files were checked with the run
      self._check(new)
    return files

  def record_ahead(self, position):
    """Records epochs until they end at least one update past `position` (rank 0 globs, checks
    the files new to the run, saves; every rank gets the result). Every rank calls it at the same
    positions. Raises StreamError (on every rank) when the next epoch cannot be recorded."""
    if self.order.stop_position(self._window) >= position + self._window:
      return
    def record_epochs():
      try:
        resume.record_ahead(self.order, position, self._window,
                            self._glob(position + self._window), record_count)
        resume.save_order(self._output_dir, self.order)
      except (ValueError, OSError) as e:
        raise resume.StreamError("data epoch %s: %s" % (self._next_epochs(), e)) from e
      return self.order.to_json()

    self.order = mixture.order_from_json(
        self._dist.chief_decides(record_epochs, resume.StreamError, catch=(resume.StreamError,)))

  def _next_epochs(self):
    return ", ".join("%d%s" % (len(o.epochs), "" if s.name is None else " of " + s.name)
                     for s, o in zip(self.order.sources, self.order.orders))

  def view(self, position, micro_batches=None):
    """mixture.MixtureStream of this rank from `position`: endless (micro_batches None, tf.data),
    or covering at least micro_batches more (DALI), ending on an update boundary."""
    self.record_ahead(position)
    if micro_batches is None:
      return mixture.MixtureStream(self.order.copy(), self._dist.rank, position)
    end = position + micro_batches
    end += -end % self._window  # the stop falls on an update boundary at or after `end`
    projected = self.order.projected(end)
    return mixture.MixtureStream(self.order.copy(), self._dist.rank, position,
                                 [len(o.epochs) for o in projected.orders])

  def first_change(self, view):
    """[the number of the first recorded epoch whose files differ from what `view` assumed, or
    None] a source, or None when no source changed."""
    changes = [_first_change(now, then) for now, then in zip(self.order.orders,
                                                             view.order.orders)]
    return None if changes == [None] * len(changes) else changes


def _first_change(order, assumed):
  """The first epoch of `order` beyond those of `assumed` whose files differ from assumed's last
  epoch (what a view reads again for later epochs), or None."""
  for number in range(len(assumed.epochs), len(order.epochs)):
    if order.epochs[number].files != assumed.epochs[-1].files:
      return number
  return None


def position_variable():
  """int64 [] global, non-trainable, checkpointed: micro-batches consumed (0 in a new run)."""
  import tensorflow.compat.v1 as tf  # pylint: disable=import-outside-toplevel
  scope, name = order_lib.POSITION_VARIABLE.split("/")
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
