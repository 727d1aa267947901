"""DALI reader: the same records as tf.data (1 worker, 2 sample-level shards), shapes/dtypes, the
index cache (never beside the data unless there already), checksums, the CPU placement, and a short
--input_pipeline dali training run."""
import os
import shutil

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("OMP_NUM_THREADS", "1")
import numpy as np  # noqa: E402
import pytest  # noqa: E402
import tensorflow.compat.v1 as tf  # noqa: E402

import tiny_data  # noqa: E402

from bert_fin.input import dali  # noqa: E402
from bert_fin.input import tfdata  # noqa: E402
from bert_fin.records import schema  # noqa: E402
from bert_fin.records import tfrecord_index  # noqa: E402
from helpers.graph_datasets import examples, run_batches  # noqa: E402

pytest.importorskip("nvidia.dali.plugin.tf", reason="nvidia-dali TF plugin not installed")

SEQ, P, BATCH = 32, 5, 4
LAYOUT = schema.RecordLayout(SEQ, P)
NUM_FILES, PER_FILE = 3, 7  # 21 records: not divisible by 2 workers nor by BATCH


def dataset_fn(paths, index_of, view=None, layout=LAYOUT):
  """input_fn of the DALI reader: training over `view` (a WorkerStream), else eval of paths."""
  if view is None:
    return lambda params: dali.eval_dataset(paths, layout, BATCH, index_of, num_threads=1)
  return lambda params: dali.training_dataset(view, layout, BATCH, index_of, num_threads=1)


@pytest.fixture(scope="module")
def shards(tmp_path_factory):
  directory = str(tmp_path_factory.mktemp("records"))
  paths, contents = tiny_data.write_records(directory, num_files=NUM_FILES, per_file=PER_FILE,
                                            seq_len=SEQ, max_predictions=P, seed=5)
  index_of = dali.prepare_indexes(paths, str(tmp_path_factory.mktemp("index_cache")))
  return paths, index_of


@pytest.fixture(scope="module")
def tfdata_examples(shards):
  paths, _ = shards
  return examples(run_batches(lambda params: tfdata.eval_dataset(paths, LAYOUT, BATCH)))


def test_one_epoch_one_worker_yields_what_tfdata_yields(shards, tfdata_examples):
  paths, index_of = shards
  ours = examples(run_batches(dataset_fn(paths, index_of)))
  assert len(tfdata_examples) == NUM_FILES * PER_FILE
  assert ours == tfdata_examples  # same records, same (file) order, each exactly once


def test_two_shards_split_each_epoch_exactly(shards, tfdata_examples):
  paths, index_of = shards
  per_worker = []
  for worker in range(2):
    view = tiny_data.worker_stream(paths, BATCH, seed=3, num_workers=2, worker_index=worker,
                                   sharding="records", num_epochs=2)
    share = sum(p.end - p.first for p in view.epoch_pieces(0))
    seen = examples(run_batches(dataset_fn(paths, index_of, view),
                                max_batches=-(-2 * share // BATCH)))
    per_worker.append((seen[:share], seen[share:2 * share]))
  for epoch in range(2):
    first, second = (per_worker[w][epoch] for w in range(2))
    assert [len(first), len(second)] == [10, 11]  # sample-level: any record count
    assert not set(first) & set(second)
    assert sorted(first + second) == sorted(tfdata_examples)
  assert per_worker[0][0] != per_worker[0][1]  # a new order each epoch


def test_training_batches_have_model_dtypes_static_shapes_and_shuffle(shards, tfdata_examples):
  paths, index_of = shards
  input_fn = dataset_fn(paths, index_of, tiny_data.worker_stream(
      paths, BATCH, seed=11, sharding="records", num_epochs=3))
  with tf.Graph().as_default():
    spec = input_fn({}).element_spec
  expected = {
      schema.INPUT_IDS: (tf.int32, [BATCH, SEQ]), schema.SEGMENT_IDS: (tf.int32, [BATCH, SEQ]),
      schema.INPUT_LEN: (tf.int32, [BATCH]), schema.MASKED_LM_POSITIONS: (tf.int32, [BATCH, P]),
      schema.MASKED_LM_IDS: (tf.int32, [BATCH, P]),
      schema.MASKED_LM_WEIGHTS: (tf.float32, [BATCH, P]),
      schema.NEXT_SENTENCE_LABELS: (tf.int32, [BATCH, 1]),
  }
  assert {name: (s.dtype, s.shape.as_list()) for name, s in spec.items()} == expected
  seen = examples(run_batches(input_fn, max_batches=12))  # > 2 epochs of the view
  assert len(seen) == 12 * BATCH
  assert set(seen) <= set(tfdata_examples)
  assert seen[:len(tfdata_examples)] != tfdata_examples  # shuffled, not file order


def test_a_stream_from_a_position_skips_what_was_read_without_reading_it(shards):
  paths, index_of = shards
  def view(position):
    return tiny_data.worker_stream(paths, BATCH, seed=4, sharding="records", position=position,
                                   num_epochs=2)
  whole = examples(run_batches(dataset_fn(paths, index_of, view(0)), max_batches=9))
  resumed = examples(run_batches(dataset_fn(paths, index_of, view(3)), max_batches=6))
  assert resumed == whole[3 * BATCH:]


def test_legacy_google_records_derive_input_len(tmp_path):
  paths, contents = tiny_data.write_records(str(tmp_path), num_files=1, per_file=6, seq_len=SEQ,
                                            max_predictions=P, seed=2, write_input_mask=True)
  index_of = dali.prepare_indexes(paths, str(tmp_path / "cache"))
  batches = run_batches(dataset_fn(paths, index_of, layout=schema.RecordLayout(SEQ, P, None,
                                                                                 True)))
  lengths = np.concatenate([b[schema.INPUT_LEN] for b in batches]).tolist()
  assert lengths == [instance[schema.INPUT_LEN][0] for instance in contents[0]]
  assert schema.INPUT_MASK not in batches[0]


def test_indexes_go_to_the_cache_and_are_rebuilt_when_stale(shards, tmp_path):
  paths = [shutil.copy(p, str(tmp_path)) for p in shards[0]]
  before = sorted(os.listdir(str(tmp_path)))
  cache = str(tmp_path / "cache")
  index_of = dali.prepare_indexes(paths, cache)
  assert sorted(os.listdir(str(tmp_path))) == sorted(before + ["cache"])  # nothing beside the data
  for path in paths:
    assert index_of[path] == os.path.join(cache, os.path.basename(path) + ".idx")
    assert tfrecord_index.read_index(index_of[path]) == tfrecord_index.scan_index(path)
  with open(paths[0], "ab") as f:  # a record appended: the cached index is stale
    f.write(tfrecord_index.frame_record(tfrecord_index.read_records(paths[0], limit=1)[0]))
  index_of = dali.prepare_indexes(paths, cache)
  assert len(examples(run_batches(dataset_fn(paths, index_of)))) == NUM_FILES * PER_FILE + 1
  # A current index beside a shard (tfrecord2idx's default) is used as it is.
  tfrecord_index.write_index(paths[1])
  assert dali.prepare_indexes(paths, cache)[paths[1]] == paths[1] + ".idx"


def test_shards_of_one_name_in_two_directories_get_two_cache_entries(shards, tmp_path):
  first = shutil.copy(shards[0][0], str(tmp_path / "a.tfrecord"))
  (tmp_path / "other").mkdir()
  second = shutil.copy(shards[0][1], str(tmp_path / "other" / "a.tfrecord"))
  index_of = dali.prepare_indexes([first, second], str(tmp_path / "cache"))
  assert len(set(index_of.values())) == 2
  for path in (first, second):
    assert tfrecord_index.read_index(index_of[path]) == tfrecord_index.scan_index(path)


def test_ranks_other_than_0_never_create_the_cache(shards, tmp_path):
  paths = [shutil.copy(p, str(tmp_path)) for p in shards[0]]
  missing = str(tmp_path / "rank0_output" / "dali_index")
  index_of = dali.prepare_indexes(paths, missing, may_create=False)
  assert not os.path.exists(str(tmp_path / "rank0_output"))
  assert all(os.path.exists(i) for i in index_of.values())  # a private directory instead


def test_corrupt_shard_is_refused_with_record_and_offset(shards, tmp_path):
  path = shutil.copy(shards[0][1], str(tmp_path))
  offset, size = tfrecord_index.scan_index(path)[3]
  with open(path, "r+b") as f:
    f.seek(offset + size // 2)
    f.write(b"\xff\xfe")
  with pytest.raises(tfrecord_index.TFRecordError, match="record 3 at byte offset %d" % offset):
    dali.prepare_indexes([path], str(tmp_path / "cache"))
  assert not os.path.exists(path + ".idx")
  assert not os.listdir(str(tmp_path / "cache"))


def test_the_reader_refuses_file_sharded_or_endless_views(shards):
  paths, index_of = shards
  for view in (tiny_data.worker_stream(paths, BATCH, num_epochs=2),
               tiny_data.worker_stream(paths, BATCH, sharding="records")):
    with pytest.raises(ValueError, match="bounded view of a record-sharded order"):
      dali.training_dataset(view, LAYOUT, BATCH, index_of)


def gpu_datasets_feeding_cpu_ops(graph):
  """(producer, consumer) op names where a dataset op placed on a GPU (by device string, or a
  DALIDataset with a CUDA device_id) feeds an op that is not on a GPU."""
  def on_gpu(op):
    if "GPU" in op.device.upper():
      return True
    return op.type == "DALIDataset" and op.get_attr("device_id") >= 0

  return [(op.name, consumer.name) for op in graph.get_operations()
          if "Dataset" in op.type and on_gpu(op)
          for out in op.outputs for consumer in out.consumers() if not on_gpu(consumer)]


@pytest.mark.parametrize("is_training", [True, False])
def test_estimator_input_graph_keeps_dali_on_cpu_with_a_gpu(shards, monkeypatch, is_training):
  """With TensorFlow seeing a GPU, the graph the Estimator builds from the DALI input_fn has its
  DALIDataset on the CPU (device_id None) and so no GPU dataset consumed by a CPU tf.data op."""
  from tensorflow_estimator.python.estimator import estimator as estimator_lib
  from tensorflow_estimator.python.estimator import model_fn as model_fn_lib
  paths, index_of = shards
  real_list = tf.config.list_physical_devices
  monkeypatch.setattr(tf.config, "list_physical_devices", lambda kind=None: (
      [tf.config.PhysicalDevice("/physical_device:GPU:0", "GPU")] if kind == "GPU"
      else real_list(kind)))
  assert tf.config.list_physical_devices("GPU")
  input_fn = dataset_fn(paths, index_of, tiny_data.worker_stream(
      paths, BATCH, sharding="records", num_epochs=2) if is_training else None)
  est = estimator_lib.Estimator(model_fn=lambda features, labels, mode: None)
  mode = model_fn_lib.ModeKeys.TRAIN if is_training else model_fn_lib.ModeKeys.EVAL
  with tf.Graph().as_default() as graph:
    features = est._get_features_and_labels_from_input_fn(input_fn, mode)[0]  # pylint: disable=protected-access
    dali_ops = [op for op in graph.get_operations() if op.type == "DALIDataset"]
    assert len(dali_ops) == 1 and dali_ops[0].get_attr("device_id") < 0
    assert "GPU" not in dali_ops[0].device.upper()
    assert gpu_datasets_feeding_cpu_ops(graph) == []
    assert features["input_ids"].dtype == tf.int32
  with tf.Graph().as_default() as graph:  # the check itself sees the construction DALI forbids
    with tf.device("/gpu:0"):
      gpu_data = tf.data.Dataset.range(4)
    tf.data.make_one_shot_iterator(gpu_data.map(lambda x: x + 1))
    assert gpu_datasets_feeding_cpu_ops(graph)


class LossRecorder(tf.train.SessionRunHook):
  """total_loss of every training session.run."""

  def __init__(self):
    self.losses = []

  def before_run(self, run_context):
    return tf.train.SessionRunArgs("total_loss:0")

  def after_run(self, run_context, run_values):
    self.losses.append(float(run_values.results))


def run_pretraining(tmp_path, input_pipeline, input_glob, steps, do_train=True):
  """(training losses, eval result) of a short single-process run_pretraining run (tiny model)
  in tmp_path/out; without do_train, evaluates the checkpoint already there."""
  from helpers import pretraining_runs as pt  # pylint: disable=import-outside-toplevel
  values = pt.parse_flags(pt.tiny_argv(
      tmp_path, input_glob, do_eval=True, do_train=do_train, input_pipeline=input_pipeline,
      eval_batch_size=8, max_eval_steps=3, num_train_steps=steps, save_checkpoints_steps=steps,
      log_every_n_steps=10, inter_op_parallelism_threads=2))
  recorder = LossRecorder()
  result = pt.train(values, extra_hooks=[recorder])
  assert len(recorder.losses) == (steps if do_train else 0)
  return recorder.losses, result


@pytest.mark.slow  # ~60 s on 2 shared cores: two 40-step runs of the tiny model + evals
def test_short_training_with_dali_lowers_the_loss_like_tfdata(tmp_path):
  tiny_data.write_records(str(tmp_path / "records"), num_files=2, per_file=16, seq_len=SEQ,
                          max_predictions=P, seed=3)
  input_glob = str(tmp_path / "records" / "*.tfrecord")
  steps = 40
  drops, evals = {}, {}
  for pipeline in ("tfdata", "dali"):
    (tmp_path / pipeline).mkdir()
    losses, evals[pipeline] = run_pretraining(tmp_path / pipeline, pipeline, input_glob, steps)
    drops[pipeline] = np.mean(losses[:6]) - np.mean(losses[-6:])
    assert evals[pipeline]["masked_lm_loss"] < losses[0], (pipeline, evals[pipeline], losses[0])
  print("loss drop over %d steps: %s" % (steps, drops))
  assert drops["tfdata"] > 0.3, drops  # the recipe learns at all
  assert drops["dali"] > 0.3 and drops["dali"] > 0.5 * drops["tfdata"], drops
  # The DALI-trained checkpoint evaluated through tf.data: the same eval batches, the same metrics.
  _, through_tfdata = run_pretraining(tmp_path / "dali", "tfdata", input_glob, steps, do_train=False)
  for key in ("masked_lm_loss", "masked_lm_accuracy", "next_sentence_loss", "global_step"):
    assert through_tfdata[key] == pytest.approx(evals["dali"][key], rel=1e-5), key
