"""Data order (input/epochs.py) and rank 0's epoch plan (training/epoch_plan.py): every record once
an epoch per worker group, positions, stop points, a corpus growing at epoch boundaries only."""
import argparse
import os
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "fixtures", "training"))
import tiny_data  # noqa: E402

from bert_fin.input import epochs  # noqa: E402
from bert_fin.training import distributed  # noqa: E402
from bert_fin.training import epoch_plan  # noqa: E402

EPOCH = epochs.Epoch(["f%d" % i for i in range(6)], [5, 0, 7, 3, 9, 4])


@pytest.mark.parametrize("sharding,workers", [("files", 3), ("records", 3), ("records", 4)])
def test_each_epoch_every_record_once_over_the_workers(sharding, workers):
  for number in range(3):
    seen = []
    for w in range(workers):
      for piece in epochs.worker_pieces(EPOCH, 9, number, workers, w, sharding):
        seen += [(piece.path, r) for r in range(piece.first, piece.end)]
    assert sorted(seen) == sorted((f, r) for f, n in zip(EPOCH.files, EPOCH.records)
                                  for r in range(n))
  orders = {tuple(epochs.file_order(6, 9, e)) for e in range(5)}
  assert len(orders) > 1  # a new file order per epoch
  assert list(epochs.file_order(6, 9, 2)) == list(epochs.file_order(6, 9, 2))  # pure


def test_locate_and_stop_position():
  order = epochs.DataOrder(1, 2, 4, "records")
  assert order.stop_position(2) == 0 and order.locate(3, 0) == (0, 12)
  order.add_epoch(EPOCH.files, EPOCH.records)  # 28 records: 14 a worker
  order.add_epoch(EPOCH.files, EPOCH.records)
  assert order.locate(0, 1) == (0, 0)
  assert order.locate(3, 1) == (0, 12)
  assert order.locate(4, 1) == (1, 2)  # 16 records consumed: 14 of epoch 0, 2 of epoch 1
  assert order.locate(7, 0) == (2, 0)
  assert order.stop_position(1) == 7 and order.stop_position(2) == 6  # 28 // 4, whole windows
  restored = epochs.DataOrder.from_json(order.to_json())
  assert restored.epochs == order.epochs and restored.locate(4, 1) == (1, 2)


def test_new_epoch_refuses_files_not_divisible_by_workers_and_workers_without_data():
  order = epochs.DataOrder(1, 2, 4, "files")
  with pytest.raises(ValueError, match=r"3 input files \(epoch 0\) are not divisible by 2"):
    order.add_epoch(["a", "b", "c"], [1, 1, 1])
  with pytest.raises(ValueError, match="leave worker 0 of 2 without data"):
    epochs.DataOrder(1, 2, 4, "records").add_epoch(["a"], [1])


def _values(tmp_path, input_glob, **overrides):
  values = dict(output_dir=str(tmp_path / "out"), input_file=input_glob, train_batch_size=4,
                num_accumulation_steps=1, input_pipeline="tfdata", save_checkpoints_steps=1,
                num_train_steps=1000, seed=5)
  values.update(overrides)
  os.makedirs(values["output_dir"], exist_ok=True)
  return argparse.Namespace(**values)


def test_growing_corpus_is_picked_up_at_the_next_epoch_only(tmp_path):
  data = tmp_path / "data"
  tiny_data.write_records(str(data), num_files=2, per_file=8, seq_len=8, max_predictions=2,
                          prefix="a")
  values = _values(tmp_path, str(data / "*.tfrecord"))
  dist = distributed.init(False)
  seed = epoch_plan.resolve_seed(values, dist)
  order, stop = epoch_plan.next_chunk(values, dist, seed, 0, 0)
  assert len(order.epochs) == 1 and stop == 4  # 16 records, batch 4
  # Files arrive mid-epoch 0 (position 2); a restart there keeps epoch 0 as it was.
  tiny_data.write_records(str(data), num_files=2, per_file=4, seq_len=8, max_predictions=2,
                          prefix="b")
  order, stop = epoch_plan.next_chunk(values, dist, seed, 2, 2)
  assert len(order.epochs) == 1 and stop == 4
  # At the epoch boundary the glob is read again: epoch 1 has the 4 files and their records.
  order, stop = epoch_plan.next_chunk(values, dist, seed, 4, 4)
  assert [len(e.files) for e in order.epochs] == [2, 4]
  assert sum(order.epochs[1].records) == 24 and stop == 4 + 6
  assert epochs.load_order(values.output_dir).epochs == order.epochs  # saved for restarts
  # A file count that cannot be split over the workers is refused at the boundary, clearly.
  tiny_data.write_records(str(data), num_files=1, per_file=4, seq_len=8, max_predictions=2,
                          prefix="c")
  two = _values(tmp_path, str(data / "*.tfrecord"), output_dir=str(tmp_path / "out2"))
  dist.size = 2
  with pytest.raises(ValueError, match="5 input files .epoch 0. are not divisible by 2 workers"):
    epoch_plan.next_chunk(two, dist, seed, 0, 0)


def test_resume_with_another_seed_or_layout_is_refused(tmp_path):
  data = tmp_path / "data"
  tiny_data.write_records(str(data), num_files=2, per_file=8, seq_len=8, max_predictions=2)
  values = _values(tmp_path, str(data / "*.tfrecord"))
  dist = distributed.init(False)
  epoch_plan.next_chunk(values, dist, epoch_plan.resolve_seed(values, dist), 0, 0)
  with pytest.raises(ValueError, match="--seed 6 differs from the seed 5"):
    epoch_plan.resolve_seed(_values(tmp_path, values.input_file, seed=6), dist)
  assert epoch_plan.resolve_seed(_values(tmp_path, values.input_file, seed=None), dist) == 5
  with pytest.raises(ValueError, match="batch_size 4 -> 8"):
    epoch_plan.next_chunk(_values(tmp_path, values.input_file, train_batch_size=8), dist, 5, 0, 0)
