"""The run's data stream on every rank: rank 0 records epochs ahead of the position and broadcasts
them (DataStream), the input files and their record counts (through tf.io.gfile and DALI indexes),
and the position in the graph (the checkpointed variable, dropout seeds, the update that advances
it). The order's arithmetic is order.py; what a resumed run may change is resume.py.
"""
import os

from bert_fin import io_utils
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
    def record_epochs():
      try:
        files = expand_input_files(self._input_file)
        known = {f for epoch in self.order.epochs for f in epoch.files}
        new = [f for f in files if f not in known]
        if new and known:  # the first epoch's files were checked with the run
          self._check(new)
        resume.record_epochs(self.order, position, self._window, files, record_count)
        resume.save_order(self._output_dir, self.order)
      except (ValueError, OSError) as e:
        raise resume.StreamError("data epoch %d: %s" % (len(self.order.epochs), e)) from e
      return self.order.to_json()

    self.order = order_lib.DataOrder.from_json(
        self._dist.chief_decides(record_epochs, resume.StreamError, catch=(resume.StreamError,)))

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
    return order_lib.WorkerStream(self.order.copy(), self._dist.rank, position, num_epochs)

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
