"""DALI input_fn: same records as tf.data (1 worker, 2 sample-level shards), shapes/dtypes,
shape validation, index building, and a short --input_pipeline dali training run."""
import os
import shutil
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("OMP_NUM_THREADS", "1")
import numpy as np  # noqa: E402
import pytest  # noqa: E402
import tensorflow.compat.v1 as tf  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "fixtures", "training"))
import tiny_data  # noqa: E402

from bert_fin import tfrecord_index  # noqa: E402
from bert_fin.cli import tfrecord2idx  # noqa: E402
from bert_fin.data import records  # noqa: E402
from bert_fin.input import dali  # noqa: E402
from bert_fin.input import tfdata  # noqa: E402

pytest.importorskip("nvidia.dali.plugin.tf", reason="nvidia-dali TF plugin not installed")

SEQ, P, BATCH = 32, 5, 4
NUM_FILES, PER_FILE = 3, 7  # 21 records: not divisible by 2 workers nor by BATCH
THREADS = {"num_threads": 1}


def session_config():
  return tf.ConfigProto(intra_op_parallelism_threads=1, inter_op_parallelism_threads=2)


def run_batches(input_fn, max_batches=None):
  """Numpy feature batches of input_fn's dataset, read the Estimator way: in a tf.Graph through
  an initializable iterator; until the end, or the first max_batches."""
  batches = []
  with tf.Graph().as_default():
    iterator = tf.data.make_initializable_iterator(input_fn({}))
    next_batch = iterator.get_next()
    with tf.Session(config=session_config()) as session:
      session.run(iterator.initializer)
      while max_batches is None or len(batches) < max_batches:
        try:
          batches.append(session.run(next_batch))
        except tf.errors.OutOfRangeError:
          break
  return batches


def examples(batches):
  """Batches -> list of hashable examples (one tuple of all feature values each)."""
  out = []
  for batch in batches:
    names = sorted(batch)
    for row in range(len(batch[names[0]])):
      out.append(tuple((name, tuple(np.ravel(batch[name][row]).tolist())) for name in names))
  return out


def dali_input_fn(paths, is_training, **kwargs):
  options = dict(THREADS, **kwargs)
  return dali.input_fn_builder(paths, SEQ, P, is_training, BATCH, **options)


@pytest.fixture(scope="module")
def shards(tmp_path_factory):
  directory = str(tmp_path_factory.mktemp("records"))
  paths, contents = tiny_data.write_records(directory, num_files=NUM_FILES, per_file=PER_FILE,
                                            seq_len=SEQ, max_predictions=P, seed=5)
  return paths, contents


@pytest.fixture(scope="module")
def tfdata_examples(shards):
  paths, _ = shards
  return examples(run_batches(tfdata.input_fn_builder(paths, SEQ, P, False, BATCH)))


def test_one_epoch_one_worker_yields_what_tfdata_yields(shards, tfdata_examples):
  paths, _ = shards
  ours = examples(run_batches(dali_input_fn(paths, False)))
  assert len(tfdata_examples) == NUM_FILES * PER_FILE
  assert ours == tfdata_examples  # same records, same (file) order, each exactly once


def test_two_shards_split_each_epoch_exactly(shards, tfdata_examples):
  paths, _ = shards
  total = NUM_FILES * PER_FILE
  per_worker = []
  for worker in range(2):
    start, end = dali.shard_bounds(total, 2, worker)
    input_fn = dali_input_fn(paths, True, num_workers=2, worker_index=worker, seed=3)
    batches = run_batches(input_fn, max_batches=-(-2 * (end - start) // BATCH))
    seen = examples(batches)
    per_worker.append((seen[:end - start], seen[end - start:2 * (end - start)]))
  for epoch in range(2):
    first, second = (per_worker[w][epoch] for w in range(2))
    assert [len(first), len(second)] == [10, 11]  # sample-level: any record count
    assert not set(first) & set(second)
    assert sorted(first + second) == sorted(tfdata_examples)
  assert per_worker[0][0] != per_worker[0][1]  # a new order each epoch


def test_training_batches_have_model_dtypes_static_shapes_and_shuffle(shards, tfdata_examples):
  paths, _ = shards
  input_fn = dali_input_fn(paths, True, initial_fill=16, seed=11)
  with tf.Graph().as_default():
    spec = input_fn({}).element_spec
  expected = {
      records.INPUT_IDS: (tf.int32, [BATCH, SEQ]), records.SEGMENT_IDS: (tf.int32, [BATCH, SEQ]),
      records.INPUT_LEN: (tf.int32, [BATCH]), records.MASKED_LM_POSITIONS: (tf.int32, [BATCH, P]),
      records.MASKED_LM_IDS: (tf.int32, [BATCH, P]),
      records.MASKED_LM_WEIGHTS: (tf.float32, [BATCH, P]),
      records.NEXT_SENTENCE_LABELS: (tf.int32, [BATCH, 1]),
  }
  assert {name: (s.dtype, s.shape.as_list()) for name, s in spec.items()} == expected
  seen = examples(run_batches(input_fn, max_batches=12))  # > 2 epochs: never runs out
  assert len(seen) == 12 * BATCH
  assert set(seen) <= set(tfdata_examples)
  assert seen[:len(tfdata_examples)] != tfdata_examples  # shuffled, not file order


def test_legacy_google_records_derive_input_len(tmp_path):
  paths, contents = tiny_data.write_records(str(tmp_path), num_files=1, per_file=6, seq_len=SEQ,
                                            max_predictions=P, seed=2, write_input_mask=True)
  batches = run_batches(dali.input_fn_builder(paths, SEQ, P, False, BATCH, legacy_input_mask=True,
                                              **THREADS))
  lengths = np.concatenate([b[records.INPUT_LEN] for b in batches]).tolist()
  assert lengths == [instance[records.INPUT_LEN][0] for instance in contents[0]]
  assert records.INPUT_MASK not in batches[0]


@pytest.mark.parametrize("seq,predictions,message", [
    (SEQ * 2, P, "'input_ids' has 32 values, expected 64"),
    (SEQ, P + 3, "'masked_lm_positions' has 5 values, expected 8"),
])
def test_length_mismatch_fails_naming_the_file(shards, seq, predictions, message):
  paths, _ = shards
  with pytest.raises(ValueError) as error:
    dali.input_fn_builder(paths, seq, predictions, True, BATCH, **THREADS)
  assert message in str(error.value) and paths[0] in str(error.value)


def test_google_records_without_legacy_flag_are_refused(tmp_path):
  paths, _ = tiny_data.write_records(str(tmp_path), num_files=1, per_file=2, seq_len=SEQ,
                                     max_predictions=P, write_input_mask=True)
  with open(paths[0], "rb") as f:  # sanity: the fixture really holds input_mask
    assert b"input_mask" in f.read()
  dali.input_fn_builder(paths, SEQ, P, True, BATCH, **THREADS)  # input_len present: accepted
  with pytest.raises(ValueError, match="'input_mask' is missing"):
    dali.input_fn_builder(tiny_data.write_records(
        str(tmp_path / "new"), 1, 2, SEQ, P)[0], SEQ, P, True, BATCH, legacy_input_mask=True,
        **THREADS)


def test_missing_and_stale_indexes(shards, tmp_path):
  paths = [shutil.copy(p, str(tmp_path)) for p in shards[0]]
  with pytest.raises(FileNotFoundError) as error:
    dali_input_fn(paths, True, build_missing_indexes=False)
  assert run_suggested_command(str(error.value)) == 0  # the command it names does the job
  dali_input_fn(paths, True, build_missing_indexes=False)
  for path in paths:
    os.remove(path + ".idx")
  dali_input_fn(paths, True)  # builds them
  for path in paths:
    assert tfrecord_index.read_index(path + ".idx") == tfrecord_index.scan_index(path)
  with open(paths[0], "ab") as f:
    f.write(tfrecord_index.frame_record(tfrecord_index.read_records(paths[0], limit=1)[0]))
  batches = run_batches(dali_input_fn(paths + [paths[0] + ".idx"], False))  # idx skipped
  assert len(examples(batches)) == NUM_FILES * PER_FILE + 1  # stale index rebuilt


def run_suggested_command(message):
  """Runs the `tfrecord2idx ...` line of an error message through the CLI's main."""
  line = message.split("\n  ")[1]
  argv = [arg.strip("'") for arg in line.split()]
  assert argv[0] == "tfrecord2idx", message
  return tfrecord2idx.main(argv[1:])


def test_suggested_index_command_covers_many_oddly_named_shards(tmp_path):
  paths = []
  for i in range(6):
    path = str(tmp_path / ("train-%02d" % i))
    with open(path, "wb") as f:
      f.write(tfrecord_index.frame_record(b"record %d" % i))
    paths.append(path)
  index_dir = str(tmp_path / "idx")
  with pytest.raises(FileNotFoundError) as error:
    dali.ensure_indexes(paths, index_dir, build_missing=False)
  assert "--pattern 'train-0*'" in str(error.value)
  assert run_suggested_command(str(error.value)) == 0
  assert dali.ensure_indexes(paths, index_dir, build_missing=False) == [
      os.path.join(index_dir, os.path.basename(p) + ".idx") for p in paths]


def test_corrupt_shard_is_refused_with_record_and_offset(shards, tmp_path):
  path = shutil.copy(shards[0][1], str(tmp_path))
  offset, size = tfrecord_index.scan_index(path)[3]
  with open(path, "r+b") as f:
    f.seek(offset + size // 2)
    f.write(b"\xff\xfe")
  with pytest.raises(tfrecord_index.TFRecordError, match="record 3 at byte offset %d" % offset):
    dali_input_fn([path], True)
  assert not os.path.exists(path + ".idx")


def test_option_and_sharding_refusals(shards):
  paths, _ = shards
  with pytest.raises(TypeError, match="shuffle_buffer_size"):
    dali_input_fn(paths, True, shuffle_buffer_size=10)
  with pytest.raises(ValueError, match="21 records cannot be split over 22 workers"):
    dali_input_fn(paths, True, num_workers=22, worker_index=0)
  with pytest.raises(ValueError, match="worker_index 2 not in"):
    dali_input_fn(paths, True, num_workers=2, worker_index=2)
  for device in ("gpu", "auto"):
    with pytest.raises(ValueError, match="runs on the CPU only"):
      dali_input_fn(paths, True, device=device)


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
  paths, _ = shards
  real_list = tf.config.list_physical_devices
  monkeypatch.setattr(tf.config, "list_physical_devices", lambda kind=None: (
      [tf.config.PhysicalDevice("/physical_device:GPU:0", "GPU")] if kind == "GPU"
      else real_list(kind)))
  assert tf.config.list_physical_devices("GPU")
  input_fn = dali_input_fn(paths, is_training)
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
  from absl import flags as absl_flags
  from bert_fin.training import distributed
  from bert_fin.training import estimator
  from bert_fin.training import flags as train_flags
  argv = ["run_pretraining.py", "--do_eval", "--input_pipeline=%s" % input_pipeline,
          "--bert_config_file=%s" % tiny_data.write_config(str(tmp_path / "bert_config.json")),
          "--input_file=%s" % input_glob, "--output_dir=%s" % (tmp_path / "out"),
          "--max_seq_length=%d" % SEQ, "--max_predictions_per_seq=%d" % P,
          "--train_batch_size=4", "--eval_batch_size=8", "--max_eval_steps=3",
          "--learning_rate=1e-3", "--num_warmup_steps=0",
          "--num_train_steps=%d" % steps, "--save_checkpoints_steps=%d" % steps,
          "--log_every_n_steps=10", "--intra_op_parallelism_threads=1",
          "--inter_op_parallelism_threads=2", "--seed=1234"]
  values = train_flags.define_flags(absl_flags.FlagValues())
  values(argv + (["--do_train"] if do_train else []))
  recorder = LossRecorder()
  result = estimator.run(values, distributed.init(False), extra_hooks=[recorder])
  assert len(recorder.losses) == (steps if do_train else 0)
  return recorder.losses, result


@pytest.mark.slow  # ~60 s on 2 shared cores: two 40-step runs of the tiny model + evals
def test_short_training_with_dali_lowers_the_loss_like_tfdata(tmp_path):
  if not os.path.exists(os.path.join(os.path.dirname(HERE), "run_pretraining.py")):
    pytest.skip("run_pretraining.py not written yet")
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
