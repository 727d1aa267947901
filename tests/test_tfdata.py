"""tf.data input_fn: file-level sharding, shapes/dtypes, legacy records, eval order, file checks."""
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
import numpy as np  # noqa: E402
import pytest  # noqa: E402
import tensorflow as tf2  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures", "training"))
import tiny_data  # noqa: E402

from bert_fin.data import records  # noqa: E402
from bert_fin.input import tfdata  # noqa: E402

SEQ, P, BATCH = 32, 5, 4


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


def test_check_files_divisible_refuses_too_few_and_remainders():
  assert tfdata.check_files_divisible(["a", "b", "c", "d"], 2) == 2
  assert tfdata.check_files_divisible(["a"], 1) == 1
  with pytest.raises(ValueError, match="1 input file.*for 2 workers"):
    tfdata.check_files_divisible(["a"], 2)
  with pytest.raises(ValueError, match="5 input files are not divisible by 4 workers"):
    tfdata.check_files_divisible(list("abcde"), 4)


def test_expand_input_files_sorts_comma_globs_and_names_empty_patterns(four_files):
  directory, paths, _ = four_files
  pattern = os.path.join(directory, "part-0000[23].tfrecord") + "," + paths[0]
  assert tfdata.expand_input_files(pattern) == [paths[2], paths[3], paths[0]]
  with pytest.raises(ValueError, match="matches no file"):
    tfdata.expand_input_files(os.path.join(directory, "nothing-*.tfrecord"))


def test_training_batches_have_the_model_dtypes_and_static_shapes(four_files):
  directory, _, contents = four_files
  input_fn = tfdata.input_fn_builder(os.path.join(directory, "*.tfrecord"), SEQ, P, True, BATCH,
                                     seed=3)
  dataset = input_fn({})
  spec = dataset.element_spec
  expected = {
      records.INPUT_IDS: (tf2.int32, [BATCH, SEQ]), records.SEGMENT_IDS: (tf2.int32, [BATCH, SEQ]),
      records.INPUT_LEN: (tf2.int32, [BATCH]),
      records.MASKED_LM_POSITIONS: (tf2.int32, [BATCH, P]),
      records.MASKED_LM_IDS: (tf2.int32, [BATCH, P]),
      records.MASKED_LM_WEIGHTS: (tf2.float32, [BATCH, P]),
      records.NEXT_SENTENCE_LABELS: (tf2.int32, [BATCH, 1]),
  }
  assert set(spec) == set(expected)
  for name, (dtype, shape) in expected.items():
    assert spec[name].dtype == dtype, name
    assert spec[name].shape.as_list() == shape, name
  # Values round-trip: every decoded example is one of the written ones, field by field.
  written = {_key(inst["input_ids"]): inst for insts in contents for inst in insts}
  for batch in _rows(dataset, 5):
    for i in range(BATCH):
      inst = written[_key(batch[records.INPUT_IDS][i])]
      assert batch[records.INPUT_LEN][i] == inst["input_len"][0]
      np.testing.assert_array_equal(batch[records.MASKED_LM_POSITIONS][i],
                                    inst["masked_lm_positions"])
      np.testing.assert_allclose(batch[records.MASKED_LM_WEIGHTS][i], inst["masked_lm_weights"])
      assert batch[records.NEXT_SENTENCE_LABELS][i][0] == inst["next_sentence_labels"][0]


def test_workers_read_disjoint_file_shards_that_cover_every_record_each_epoch(four_files):
  directory, _, contents = four_files
  keys_of_file = [frozenset(_key(inst["input_ids"]) for inst in insts) for insts in contents]
  epochs_of_rank = []
  for rank in range(2):
    input_fn = tfdata.input_fn_builder(os.path.join(directory, "part-*.tfrecord"), SEQ, P, True,
                                       BATCH, num_workers=2, worker_index=rank, seed=5)
    # 2 files x 8 records per worker and epoch: 4 batches an epoch; 3 epochs.
    keys = [_key(row) for b in _rows(input_fn({}), 12) for row in b[records.INPUT_IDS]]
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


def test_training_shuffles_records_across_files(four_files):
  _, paths, contents = four_files
  input_fn = tfdata.input_fn_builder(paths, SEQ, P, True, 8, seed=7)
  first = _rows(input_fn({}), 1)[0]
  file_of = {_key(inst["input_ids"]): f for f, insts in enumerate(contents) for inst in insts}
  sources = [file_of[_key(row)] for row in first[records.INPUT_IDS]]
  in_file_order = [file_of[_key(inst["input_ids"])] for inst in contents[0]]
  assert sources != in_file_order and len(set(sources)) > 1


def test_eval_reads_all_files_in_order_once_and_keeps_the_last_partial_batch(four_files):
  _, paths, contents = four_files
  input_fn = tfdata.input_fn_builder(paths, SEQ, P, False, 5, num_workers=2, worker_index=1)
  batches = _rows(input_fn({}))
  assert [len(b[records.INPUT_IDS]) for b in batches] == [5] * 6 + [2]
  keys = [_key(row) for b in batches for row in b[records.INPUT_IDS]]
  assert keys == [_key(inst["input_ids"]) for insts in contents for inst in insts]


def test_legacy_google_records_derive_input_len_from_input_mask(tmp_path):
  paths, contents = tiny_data.write_records(str(tmp_path), 1, 6, seq_len=SEQ, max_predictions=P,
                                            write_input_mask=True, seed=5)
  input_fn = tfdata.input_fn_builder(paths, SEQ, P, False, 3, legacy_input_mask=True)
  batches = _rows(input_fn({}))
  assert records.INPUT_MASK not in batches[0]
  lengths = [int(x) for b in batches for x in b[records.INPUT_LEN]]
  assert lengths == [inst["input_len"][0] for inst in contents[0]]


def test_bad_file_counts_and_options_fail_before_any_graph_is_built(four_files):
  _, paths, _ = four_files
  with pytest.raises(ValueError, match="3 input files are not divisible by 2 workers"):
    tfdata.input_fn_builder(paths[:3], SEQ, P, True, BATCH, num_workers=2, worker_index=0)
  with pytest.raises(ValueError, match="4 input file.*for 8 workers"):
    tfdata.input_fn_builder(paths, SEQ, P, True, BATCH, num_workers=8, worker_index=0)
  with pytest.raises(ValueError, match="unknown tf.data input options"):
    tfdata.input_fn_builder(paths, SEQ, P, True, BATCH, num_threads=3)
  # Eval is not sharded, so the training file check does not apply to it.
  tfdata.input_fn_builder(paths[:3], SEQ, P, False, BATCH, num_workers=2, worker_index=1)


def test_broad_glob_leaves_out_index_and_stats_files(tmp_path):
  """`records/*` after tfrecord2idx and create_pretraining_data also matches FILE.idx and
  PREFIX.stats.json: they are left out (read as TFRecords they would fail mid-run, and they would
  break the files % workers rule)."""
  from bert_fin import tfrecord_index
  paths, contents = tiny_data.write_records(str(tmp_path), num_files=2, per_file=3, seq_len=SEQ,
                                            max_predictions=P, seed=4)
  for path in paths:
    tfrecord_index.write_index(path, path + ".idx")
  (tmp_path / "part.stats.json").write_text("{}")
  pattern = str(tmp_path / "*")
  assert tfdata.expand_input_files(pattern) == sorted(paths)
  dataset = tfdata.input_fn_builder(pattern, SEQ, P, is_training=False, batch_size=BATCH)()
  got = sorted(_key(row) for batch in _rows(dataset) for row in batch[records.INPUT_IDS])
  assert got == sorted(_key(inst["input_ids"]) for insts in contents for inst in insts)
  tfdata.input_fn_builder(pattern, SEQ, P, is_training=True, batch_size=2, num_workers=2,
                          worker_index=1)  # 2 shards for 2 workers: the side files do not count
  with pytest.raises(ValueError, match="only index/stats files"):
    tfdata.expand_input_files(str(tmp_path / "*.json"))
