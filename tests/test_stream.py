"""input/stream.py, the data stream's one owner: the order (every record once an epoch per worker
group), positions and stops, resume decisions (exact, a growing corpus, refusals naming what
changed, --data_order=restart, relative paths of older files), recording epochs ahead, views and
the first change a view did not assume. In process, no training."""
import json
import os

import pytest

import tiny_data

from bert_fin.input import stream
from bert_fin.training import distributed

EPOCH = stream.Epoch(["f%d" % i for i in range(6)], [5, 0, 7, 3, 9, 4])


@pytest.mark.parametrize("sharding,workers", [("files", 3), ("records", 3), ("records", 4)])
def test_each_epoch_every_record_once_over_the_workers(sharding, workers):
  for number in range(3):
    seen = []
    for w in range(workers):
      for piece in stream.worker_pieces(EPOCH, 9, number, workers, w, sharding):
        seen += [(piece.path, r) for r in range(piece.first, piece.end)]
    assert sorted(seen) == sorted((f, r) for f, n in zip(EPOCH.files, EPOCH.records)
                                  for r in range(n))
  orders = {tuple(stream.file_order(6, 9, e)) for e in range(5)}
  assert len(orders) > 1  # a new file order per epoch
  assert list(stream.file_order(6, 9, 2)) == list(stream.file_order(6, 9, 2))  # pure


def test_locate_and_stop_position_count_from_the_orders_start():
  order = stream.DataOrder(1, 2, 4, "records")
  assert order.stop_position(2) == 0 and order.locate(3, 0) == (0, 12)
  order.add_epoch(EPOCH.files, EPOCH.records)  # 28 records: 14 a worker
  order.add_epoch(EPOCH.files, EPOCH.records)
  assert order.locate(0, 1) == (0, 0)
  assert order.locate(3, 1) == (0, 12)
  assert order.locate(4, 1) == (1, 2)  # 16 records consumed: 14 of epoch 0, 2 of epoch 1
  assert order.locate(7, 0) == (2, 0)
  assert order.stop_position(1) == 7 and order.stop_position(2) == 6  # 28 // 4, whole windows
  assert order.stop_position(1, num_epochs=1) == 3
  restored = stream.DataOrder.from_json(order.to_json())
  assert restored.epochs == order.epochs and restored.locate(4, 1) == (1, 2)
  later = stream.DataOrder(1, 2, 4, "records", order.epochs, start_position=100)
  assert later.locate(104, 1) == (1, 2) and later.stop_position(2) == 106


def test_new_epoch_refuses_files_not_divisible_by_workers_and_workers_without_data():
  order = stream.DataOrder(1, 2, 4, "files")
  with pytest.raises(ValueError, match=r"3 input files \(epoch 0\) are not divisible by 2"):
    order.add_epoch(["a", "b", "c"], [1, 1, 1])
  with pytest.raises(ValueError, match="leave worker 0 of 2 without data"):
    stream.DataOrder(1, 2, 4, "records").add_epoch(["a"], [1])


def _saved(files, seed=5, batch_size=4, input_file="data/*", **layout):
  """The one-source order of --input_file with one epoch of `files` (8 records each)."""
  num_workers, sharding = layout.get("num_workers", 1), layout.get("sharding", "files")
  source = stream.DataOrder(seed, num_workers, 1, sharding, input_file=input_file)
  source.add_epoch(files, [8] * len(files))
  return stream.MixedOrder(seed, num_workers, batch_size, sharding,
                           [stream.input_file_source(input_file)], [source])


def _resume(saved, files, seed=None, batch_size=4, input_file="data/*", position=2,
            restart=False):
  return stream.resume_order(saved, seed, 1, batch_size, "files",
                             [stream.input_file_source(input_file)], [files], position, restart)


def _start(order, position, worker=0):
  """(epoch, records of it already read) of worker at micro-batch `position`."""
  return stream.MixtureStream(order, worker, position).source_streams()[0].start()


def test_resume_with_the_same_inputs_continues_the_saved_order():
  files = ["/d/a", "/d/b"]
  saved = _saved(files)
  order, changes = _resume(saved, files)
  assert changes == [] and order.to_json() == saved.to_json()
  new, _ = _resume(None, files, seed=None)
  assert new.orders[0].epochs == [] and isinstance(new.seed, int)  # no order yet: a drawn seed


@pytest.mark.parametrize("change,message", [
    (dict(seed=6), "seed 5 -> 6"),
    (dict(batch_size=8), "batch_size 4 -> 8"),
    (dict(files=["/d/a", "/d/c"]), r"\+1/-1 against the 2 .*added: c; removed: b"),
    (dict(files=["/d/a"]), r"\+0/-1 .*removed: b"),
    (dict(files=["/d/a", "/d/b", "/e/x"], input_file="e/*,data/*"), r"\+1/-0 .*added: x"),
])
def test_resume_refuses_what_changed_naming_it_and_the_flag(change, message):
  files = change.pop("files", ["/d/a", "/d/b"])
  with pytest.raises(stream.StreamError, match=message) as error:
    _resume(_saved(["/d/a", "/d/b"]), files, **change)
  assert "--data_order=restart" in str(error.value) and "\n" not in str(error.value)


def test_files_added_under_the_same_input_file_are_a_growing_corpus():
  order, changes = _resume(_saved(["/d/a", "/d/b"]), ["/d/a", "/d/b", "/d/c"])
  assert changes == [] and order.orders[0].epochs[0].files == ["/d/a", "/d/b"]  # next epoch


def test_restart_keeps_the_seed_and_starts_a_new_order_at_the_position():
  order, changes = _resume(_saved(["/d/a", "/d/b"]), ["/d/c", "/d/e"], batch_size=8, position=3,
                           restart=True)
  assert order.seed == 5 and order.orders[0].epochs == [] and order.start_position == 3
  assert order.batch_size == 8 and len(changes) == 2
  order.orders[0].add_epoch(["/d/c", "/d/e"], [8, 8])
  assert _start(order, 3) == (0, 0) and _start(order, 4) == (0, 8)


def test_files_replaced_after_the_recorded_epochs_were_read_are_the_next_epoch():
  # position 4 = the end of the saved epoch (16 records, batch 4): nothing of it is left to read
  order, changes = _resume(_saved(["/d/a", "/d/b"]), ["/d/c", "/d/e"], position=4)
  assert changes == [] and order.orders[0].epochs[0].files == ["/d/a", "/d/b"]


def test_relative_paths_of_older_order_files_are_matched_to_the_files_given_now():
  saved = _saved(["records/a", "records/b"], input_file=None)
  order, changes = _resume(saved, ["/data/run1/records/a", "/data/run1/records/b"])
  assert changes == []
  assert order.orders[0].epochs[0].files == ["/data/run1/records/a", "/data/run1/records/b"]


def test_growing_corpus_is_recorded_at_epoch_boundaries_only_and_the_view_sees_the_change(
    tmp_path):
  data, out = tmp_path / "data", tmp_path / "out"
  out.mkdir()
  tiny_data.write_records(str(data), num_files=2, per_file=8, seq_len=8, max_predictions=2,
                          prefix="a")
  pattern = str(data / "*.tfrecord")
  checked = []
  sources = [stream.input_file_source(pattern)]
  order, _ = stream.resume_order(None, 5, 1, 4, "files", sources, [[]], 0)
  data_stream = stream.DataStream(order, distributed.init(False), str(out), checked.extend, 1)
  view = data_stream.view(0)
  epochs = lambda order: order.orders[0].epochs  # noqa: E731 (the one source's)
  assert len(epochs(data_stream.order)) == 1 and data_stream.order.stop_position() == 4
  assert epochs(stream.load_order(str(out))) == epochs(data_stream.order)  # saved for restarts
  # Files arrive mid-epoch 0: nothing is recorded before the boundary is near.
  tiny_data.write_records(str(data), num_files=2, per_file=4, seq_len=8, max_predictions=2,
                          prefix="b")
  data_stream.record_ahead(3)
  assert len(epochs(data_stream.order)) == 1 and data_stream.first_change(view) is None
  # At the boundary the glob is read again: epoch 1 has the 4 files, the new ones checked.
  data_stream.record_ahead(4)
  assert [len(e.files) for e in epochs(data_stream.order)] == [2, 4]
  assert sum(epochs(data_stream.order)[1].records) == 24 and len(checked) == 2
  assert data_stream.first_change(view) == [1]  # the view assumed epoch 0's files again
  assert data_stream.order.stop_position(1, num_epochs=[1]) == 4  # where training must stop
  assert data_stream.first_change(data_stream.view(4)) is None
  # A new epoch whose files cannot be split over the workers stops with one line.
  tiny_data.write_records(str(data), num_files=1, per_file=4, seq_len=8, max_predictions=2,
                          prefix="c")
  two = distributed.init(False)
  two.size = 2
  order, _ = stream.resume_order(None, 5, 2, 4, "files", sources, [[]], 0)
  with pytest.raises(stream.StreamError, match="5 input files .epoch 0. are not divisible by 2"):
    stream.DataStream(order, two, str(out), checked.extend, 1).record_ahead(0)


def test_a_bounded_view_covers_what_it_was_asked_and_ends_on_an_update_boundary(tmp_path):
  source = stream.DataOrder(5, 1, 1, "records", input_file="x")
  source.add_epoch(EPOCH.files, EPOCH.records)  # 28 records: 7 micro-batches an epoch
  order = stream.MixedOrder(5, 1, 4, "records", [stream.input_file_source("x")], [source])
  data_stream = stream.DataStream(order, distributed.init(False), str(tmp_path), None, 2)
  view = data_stream.view(3, micro_batches=20)
  assert view.num_epochs == [4] and view.end_position(2) == 28 >= 3 + 20
  (source_view,) = view.source_streams()
  assert source_view.num_epochs == 4 and source_view.start() == (0, 12)
  assert ([p.path for p in source_view.epoch_pieces(3)] !=
          [p.path for p in source_view.epoch_pieces(2)])
  assert data_stream.view(3).num_epochs is None and data_stream.view(3).end_position(2) is None


def test_order_file_keeps_absolute_paths_and_the_input_file(tmp_path):
  order = _saved(["/d/a", "/d/b"])
  stream.save_order(str(tmp_path), order)
  with open(os.path.join(str(tmp_path), stream.ORDER_FILE), encoding="utf-8") as f:
    saved = json.load(f)
  assert saved["input_file"] == "data/*" and saved["start_position"] == 0
  assert saved["epochs"][0]["files"] == ["/d/a", "/d/b"]
  older = dict(saved)
  del older["input_file"], older["start_position"]  # bert_fin before this file held them
  assert (stream.order_from_json(json.dumps(older)).orders[0].epochs ==
          order.orders[0].epochs)


def test_check_files_divisible_refuses_too_few_and_remainders():
  stream.check_files_divisible(4, 2)
  with pytest.raises(ValueError, match="1 input file.*for 2 workers.*--input_pipeline=dali"):
    stream.check_files_divisible(1, 2)
  with pytest.raises(ValueError, match="5 input files are not divisible by 4 workers"):
    stream.check_files_divisible(5, 4)


@pytest.mark.slow  # two training calls
def test_files_added_mid_run_join_at_the_next_epoch_in_a_second_training_call(tmp_path):
  """End to end (in process): 2 files of 8 records, batch 4 (4 micro-batches an epoch); two files
  written during update 2 join at epoch 1: training stops where epoch 0 ends (position 4) and goes
  on in a second Estimator.train call over the 4 files, to --num_train_steps."""
  import tensorflow.compat.v1 as tf  # pylint: disable=import-outside-toplevel
  from helpers import pretraining_runs as pt  # pylint: disable=import-outside-toplevel
  data = tmp_path / "data"
  tiny_data.write_records(str(data), 2, 8, seq_len=pt.SEQ, max_predictions=pt.P, prefix="a")

  class AddFilesAndCountCalls(tf.train.SessionRunHook):
    calls = 0

    def begin(self):
      AddFilesAndCountCalls.calls += 1
      self._step = tf.train.get_global_step()

    def after_run(self, run_context, run_values):
      if run_context.session.run(self._step) == 2 and not (data / "b-00000.tfrecord").exists():
        tiny_data.write_records(str(data), 2, 4, seq_len=pt.SEQ, max_predictions=pt.P, seed=9,
                                prefix="b")

  values = pt.parse_flags(pt.tiny_argv(tmp_path, str(data / "*.tfrecord"), do_train=True,
                                       num_train_steps=7, save_checkpoints_steps=100))
  pt.train(values, extra_hooks=[AddFilesAndCountCalls()])
  order = stream.load_order(values.output_dir)
  assert [len(e.files) for e in order.orders[0].epochs[:2]] == [2, 4]
  assert AddFilesAndCountCalls.calls == 2
  reader = tf.train.load_checkpoint(tf.train.latest_checkpoint(values.output_dir))
  assert reader.get_tensor("global_step") == 7 and reader.get_tensor(stream.POSITION_VARIABLE) == 7
  steps = sorted(int(n.split("-")[1].split(".")[0]) for n in os.listdir(values.output_dir)
                 if n.startswith("model.ckpt-") and n.endswith(".index"))
  assert 4 in steps  # the first call saved where it stopped


def test_an_order_file_that_is_not_one_is_refused_naming_it(tmp_path):
  (tmp_path / stream.ORDER_FILE).write_text('{"seed": 1, "epo')  # cut short
  with pytest.raises(stream.StreamError, match=r"data_order.json is not a data order .*"
                     "--data_order=restart"):
    stream.load_order(str(tmp_path))


def test_a_checkpoint_without_a_data_position_is_one_line_naming_init_checkpoint(tmp_path):
  import tensorflow.compat.v1 as tf  # pylint: disable=import-outside-toplevel
  prefix = str(tmp_path / "foreign.ckpt")
  with tf.Graph().as_default():
    tf.get_variable("bert/some_weight", shape=[2], initializer=tf.zeros_initializer())
    with tf.Session() as session:
      session.run(tf.global_variables_initializer())
      tf.train.Saver().save(session, prefix)
  assert stream.checkpoint_position(None) == 0
  with pytest.raises(stream.StreamError,
                     match=r"foreign.ckpt has no data_position/micro_batches .*"
                           r"--init_checkpoint=.*foreign.ckpt and a new --output_dir"):
    stream.checkpoint_position(prefix)
