"""tf.data reader: a worker's stream (file-level sharding, seeded shuffles, a new order each
epoch), shapes/dtypes, legacy records, eval order, the input glob."""
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
import numpy as np  # noqa: E402
import pytest  # noqa: E402
import tensorflow as tf2  # noqa: E402
import tiny_data  # noqa: E402

from bert_fin.input import stream  # noqa: E402
from bert_fin.input import tfdata  # noqa: E402
from bert_fin.records import schema  # noqa: E402

SEQ, P, BATCH = 32, 5, 4
LAYOUT = schema.RecordLayout(SEQ, P)


def _rows(dataset, num_batches=None):
  """Numpy batches of a dataset (first num_batches of an infinite one)."""
  it = dataset.as_numpy_iterator()
  out = []
  for batch in it:
    out.append(batch)
    if num_batches is not None and len(out) == num_batches:
      break
  return out


def _key(ids_row):
  return tuple(int(x) for x in ids_row)


@pytest.fixture(scope="module")
def four_files(tmp_path_factory):
  directory = str(tmp_path_factory.mktemp("records"))
  paths, contents = tiny_data.write_records(directory, num_files=4, per_file=8, seq_len=SEQ,
                                            max_predictions=P, seed=1)
  return directory, paths, contents


def test_expand_input_files_sorts_comma_globs_makes_them_absolute_and_names_empty_patterns(
    four_files, monkeypatch):
  directory, paths, _ = four_files
  monkeypatch.chdir(directory)
  assert stream.expand_input_files("part-0000[23].tfrecord," + paths[0]) == [
      paths[2], paths[3], paths[0]]
  with pytest.raises(ValueError, match="matches no file"):
    stream.expand_input_files(os.path.join(directory, "nothing-*.tfrecord"))


def test_training_batches_have_the_model_dtypes_and_static_shapes(four_files):
  _, paths, contents = four_files
  dataset = tfdata.training_dataset(tiny_data.worker_stream(paths, BATCH, seed=3), LAYOUT, BATCH)
  spec = dataset.element_spec
  expected = {
      schema.INPUT_IDS: (tf2.int32, [BATCH, SEQ]), schema.SEGMENT_IDS: (tf2.int32, [BATCH, SEQ]),
      schema.INPUT_LEN: (tf2.int32, [BATCH]),
      schema.MASKED_LM_POSITIONS: (tf2.int32, [BATCH, P]),
      schema.MASKED_LM_IDS: (tf2.int32, [BATCH, P]),
      schema.MASKED_LM_WEIGHTS: (tf2.float32, [BATCH, P]),
      schema.NEXT_SENTENCE_LABELS: (tf2.int32, [BATCH, 1]),
  }
  assert set(spec) == set(expected)
  for name, (dtype, shape) in expected.items():
    assert spec[name].dtype == dtype, name
    assert spec[name].shape.as_list() == shape, name
  # Values round-trip: every decoded example is one of the written ones, field by field.
  written = {_key(inst["input_ids"]): inst for insts in contents for inst in insts}
  for batch in _rows(dataset, 5):
    for i in range(BATCH):
      inst = written[_key(batch[schema.INPUT_IDS][i])]
      assert batch[schema.INPUT_LEN][i] == inst["input_len"][0]
      np.testing.assert_array_equal(batch[schema.MASKED_LM_POSITIONS][i],
                                    inst["masked_lm_positions"])
      np.testing.assert_allclose(batch[schema.MASKED_LM_WEIGHTS][i], inst["masked_lm_weights"])
      assert batch[schema.NEXT_SENTENCE_LABELS][i][0] == inst["next_sentence_labels"][0]


def test_workers_read_disjoint_file_shards_that_cover_every_record_each_epoch(four_files):
  _, paths, contents = four_files
  keys_of_file = [frozenset(_key(inst["input_ids"]) for inst in insts) for insts in contents]
  epochs_of_rank = []
  for rank in range(2):
    view = tiny_data.worker_stream(paths, BATCH, seed=5, num_workers=2, worker_index=rank)
    # 2 files x 8 records per worker and epoch: 4 batches an epoch; 3 epochs.
    keys = [_key(row) for b in _rows(tfdata.training_dataset(view, LAYOUT, BATCH), 12)
            for row in b[schema.INPUT_IDS]]
    epochs_of_rank.append([keys[i:i + 16] for i in (0, 16, 32)])
  shares = set()
  for epoch in range(3):
    rank0, rank1 = (set(epochs_of_rank[r][epoch]) for r in range(2))
    assert len(rank0) == len(rank1) == 16 and not rank0 & rank1  # each record once an epoch
    assert rank0 | rank1 == set().union(*keys_of_file)
    # A worker's share of an epoch is whole files (file-level sharding, files % workers).
    files0 = frozenset(f for f, k in enumerate(keys_of_file) if k <= rank0)
    assert len(files0) == 2 and set().union(*(keys_of_file[f] for f in files0)) == rank0
    shares.add(files0)
  # A new order every epoch: records in another order (and here the files move between ranks).
  assert len({tuple(e) for e in epochs_of_rank[0]}) == 3
  assert len(shares) > 1


def test_a_stream_from_a_position_is_the_rest_of_the_stream_from_the_start(four_files):
  _, paths, _ = four_files
  whole = _rows(tfdata.training_dataset(tiny_data.worker_stream(paths, BATCH, seed=2), LAYOUT,
                                        BATCH), 14)
  resumed = _rows(tfdata.training_dataset(tiny_data.worker_stream(paths, BATCH, seed=2,
                                                                  position=5), LAYOUT, BATCH), 9)
  assert [_key(r) for b in resumed for r in b[schema.INPUT_IDS]] == [
      _key(r) for b in whole[5:] for r in b[schema.INPUT_IDS]]


def test_training_shuffles_records_across_files(four_files):
  _, paths, contents = four_files
  first = _rows(tfdata.training_dataset(tiny_data.worker_stream(paths, 8, seed=7), LAYOUT, 8),
                1)[0]
  file_of = {_key(inst["input_ids"]): f for f, insts in enumerate(contents) for inst in insts}
  sources = [file_of[_key(row)] for row in first[schema.INPUT_IDS]]
  in_file_order = [file_of[_key(inst["input_ids"])] for inst in contents[0]]
  assert sources != in_file_order and len(set(sources)) > 1


def test_eval_reads_all_files_in_order_once_and_keeps_the_last_partial_batch(four_files):
  _, paths, contents = four_files
  batches = _rows(tfdata.eval_dataset(paths, LAYOUT, 5))
  assert [len(b[schema.INPUT_IDS]) for b in batches] == [5] * 6 + [2]
  keys = [_key(row) for b in batches for row in b[schema.INPUT_IDS]]
  assert keys == [_key(inst["input_ids"]) for insts in contents for inst in insts]


def test_legacy_google_records_derive_input_len_from_input_mask(tmp_path):
  paths, contents = tiny_data.write_records(str(tmp_path), 1, 6, seq_len=SEQ, max_predictions=P,
                                            write_input_mask=True, seed=5)
  batches = _rows(tfdata.eval_dataset(paths, schema.RecordLayout(SEQ, P, None, True), 3))
  assert schema.INPUT_MASK not in batches[0]
  lengths = [int(x) for b in batches for x in b[schema.INPUT_LEN]]
  assert lengths == [inst["input_len"][0] for inst in contents[0]]


def test_the_reader_refuses_a_record_sharded_order(four_files):
  _, paths, _ = four_files
  with pytest.raises(ValueError, match="sharding 'records'"):
    tfdata.training_dataset(tiny_data.worker_stream(paths, BATCH, sharding="records"), LAYOUT,
                            BATCH)


def test_broad_glob_leaves_out_index_and_stats_files(tmp_path):
  """`records/*` after tfrecord2idx and create_pretraining_data also matches FILE.idx and
  PREFIX.stats.json: they are left out (read as TFRecords they would fail mid-run, and they would
  break the files % workers rule)."""
  from bert_fin.records import tfrecord_index
  paths, contents = tiny_data.write_records(str(tmp_path), num_files=2, per_file=3, seq_len=SEQ,
                                            max_predictions=P, seed=4)
  for path in paths:
    tfrecord_index.write_index(path, path + ".idx")
  (tmp_path / "part.stats.json").write_text("{}")
  files = stream.expand_input_files(str(tmp_path / "*"))
  assert files == sorted(paths)
  got = sorted(_key(row) for batch in _rows(tfdata.eval_dataset(files, LAYOUT, BATCH))
               for row in batch[schema.INPUT_IDS])
  assert got == sorted(_key(inst["input_ids"]) for insts in contents for inst in insts)
  with pytest.raises(ValueError, match="only index/stats files"):
    stream.expand_input_files(str(tmp_path / "*.json"))
