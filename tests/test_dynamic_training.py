"""Training on dynamic-masking records (create_pretraining_data --masking=dynamic): the record
identities of the data stream (independent of the workers and the shuffle), masks drawn anew each
epoch and the same for 1 or 2 workers, DALI drawing tf.data's masks, eval's fixed masks, the
masking config resolved once (refusals in one line), and short training runs (unpacked and packed)
with a finite loss. Exact resume with dynamic masking: tests/test_resume.py."""
import json
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
import numpy as np  # noqa: E402
import pytest  # noqa: E402
import tensorflow as tf2  # noqa: E402

from helpers import pretraining_runs as pt  # noqa: E402
from helpers.pretraining_runs import tiny_data  # noqa: E402

from bert_fin.input import stream  # noqa: E402
from bert_fin.input import tfdata  # noqa: E402
from bert_fin.records import masking_source  # noqa: E402
from bert_fin.records import schema  # noqa: E402
from bert_fin.training import run as run_lib  # noqa: E402
from helpers.graph_datasets import run_to_end  # noqa: E402

SEQ, BATCH = pt.SEQ, 4
NUM_FILES, PER_FILE = 4, 6


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
  directory = str(tmp_path_factory.mktemp("dynamic"))
  paths, contents = tiny_data.write_dynamic_records(directory, NUM_FILES, PER_FILE, SEQ, seed=5)
  config, _ = masking_source.resolve(paths)
  layout = run_lib.dynamic_layout(schema.RecordLayout(SEQ, None, None, False, True), config)
  originals = [tuple(i["input_ids"]) for file in contents for i in file]
  assert len(set(originals)) == len(originals)  # a record is known by its tokens below
  return directory, paths, contents, config, layout


def _numpy(dataset, num_batches):
  return list(dataset.take(num_batches).as_numpy_iterator())


def _masks_by_record(batches):
  """{original input_ids: (positions, labels, masked input_ids)} of masked batches."""
  out = {}
  for batch in batches:
    for row in range(len(batch[schema.INPUT_IDS])):
      k = int(batch[schema.MASKED_LM_WEIGHTS][row].sum())
      positions = batch[schema.MASKED_LM_POSITIONS][row][:k].tolist()
      labels = batch[schema.MASKED_LM_IDS][row][:k].tolist()
      original = batch[schema.INPUT_IDS][row].copy()
      original[positions] = labels
      out[tuple(original.tolist())] = (positions, labels, tuple(batch[schema.INPUT_IDS][row]))
  return out


def test_identities_are_glob_order_indexes_whatever_the_workers(corpus):
  _, paths, contents, _, _ = corpus
  by_identity = [tuple(i["input_ids"]) for file in contents for i in file]
  spec = schema.tf_feature_spec(schema.dynamic_feature_specs(SEQ))
  per_epoch = {}
  for workers in (1, 2):
    seen = set()
    for worker in range(workers):
      view = tiny_data.worker_stream(paths, BATCH, seed=9, num_workers=workers,
                                     worker_index=worker)
      d = tfdata._worker_records(view, tfdata.CYCLE_LENGTH, tfdata.SHUFFLE_BUFFER_SIZE,  # pylint: disable=protected-access
                                 identities=True)
      for key, raw in d.take(2 * NUM_FILES * PER_FILE // workers).as_numpy_iterator():
        epoch, identity = key >> tfdata.IDENTITY_BITS, key & ((1 << tfdata.IDENTITY_BITS) - 1)
        ids = tf2.io.parse_single_example(raw, spec)[schema.INPUT_IDS].numpy()
        assert tuple(ids.tolist()) == by_identity[identity]
        seen.add((int(epoch), int(identity)))
    per_epoch[workers] = seen
  every = {(e, i) for e in (0, 1) for i in range(NUM_FILES * PER_FILE)}
  assert per_epoch[1] == per_epoch[2] == every
  epoch = stream.Epoch(paths, [PER_FILE] * NUM_FILES)
  assert stream.identity_offsets(epoch) == {p: PER_FILE * k for k, p in enumerate(paths)}


def _epoch_masks(paths, layout, config, workers, epochs=2):
  """[{original: masks}] of each epoch, from `workers` workers' tf.data streams."""
  per_worker_records = NUM_FILES * PER_FILE // workers
  out = [{} for _ in range(epochs)]
  for worker in range(workers):
    view = tiny_data.worker_stream(paths, BATCH, seed=9, num_workers=workers, worker_index=worker)
    batches = _numpy(tfdata.training_dataset(view, layout, BATCH, config),
                     epochs * per_worker_records // BATCH)
    rows_per_epoch = per_worker_records // BATCH
    for e in range(epochs):
      out[e].update(_masks_by_record(batches[e * rows_per_epoch:(e + 1) * rows_per_epoch]))
  return out


def test_masks_are_the_same_for_one_or_two_workers_and_new_every_epoch(corpus):
  _, paths, _, config, layout = corpus
  one = _epoch_masks(paths, layout, config, 1)
  two = _epoch_masks(paths, layout, config, 2)
  assert len(one[0]) == len(one[1]) == NUM_FILES * PER_FILE
  assert one == two
  changed = sum(one[0][r][0] != one[1][r][0] for r in one[0])
  assert changed >= 0.75 * len(one[0])
  for epoch in one:  # the masks are whole words within the cap, labels the originals
    for original, (positions, labels, masked) in epoch.items():
      assert 1 <= len(positions) <= config.max_predictions_per_seq
      assert labels == [original[p] for p in positions]
      assert all(m == o for p, (m, o) in enumerate(zip(masked, original)) if p not in positions)


def test_eval_masks_are_fixed_and_every_record_is_read_once(corpus):
  _, paths, _, config, layout = corpus
  first = _masks_by_record(_numpy(tfdata.eval_dataset(paths, layout, 5, config), 100))
  again = _masks_by_record(_numpy(tfdata.eval_dataset(list(reversed(paths)), layout, 7, config),
                                  100))
  assert len(first) == NUM_FILES * PER_FILE
  same = sum(first[r] == again[r] for r in first)
  assert 0 < same < len(first)  # reversed files: other identities, so other masks for most
  assert _masks_by_record(_numpy(tfdata.eval_dataset(paths, layout, 3, config), 100)) == first


def test_dali_draws_the_masks_of_tfdata(corpus, tmp_path):
  pytest.importorskip("nvidia.dali.plugin.tf", reason="nvidia-dali TF plugin not installed")
  import tensorflow.compat.v1 as tf  # pylint: disable=import-outside-toplevel
  from bert_fin.input import dali  # pylint: disable=import-outside-toplevel
  _, paths, _, config, layout = corpus
  index_of = dali.prepare_indexes(paths, str(tmp_path / "index"))
  total = NUM_FILES * PER_FILE
  view = tiny_data.worker_stream(paths, BATCH, seed=9, sharding="records", num_epochs=2)
  batches = []
  with tf.Graph().as_default():
    dataset = dali.training_dataset(view, layout, BATCH, index_of, num_threads=1,
                                    masking_config=config)
    next_batch = tf.data.make_one_shot_iterator(dataset).get_next()
    with tf.Session() as session:
      for _ in range(2 * total // BATCH):
        batches.append(session.run(next_batch))
  from_dali = [_masks_by_record(batches[:total // BATCH]), _masks_by_record(batches[total // BATCH:])]
  assert len(from_dali[0]) == total
  assert from_dali == _epoch_masks(paths, layout, config, 1)
  with tf.Graph().as_default():
    dataset = dali.eval_dataset(paths, layout, 5, index_of, num_threads=1, masking_config=config)
    next_batch = tf.data.make_one_shot_iterator(dataset).get_next()
    with tf.Session() as session:
      evaluated = run_to_end(session, next_batch)
  assert _masks_by_record(evaluated) == _masks_by_record(
      _numpy(tfdata.eval_dataset(paths, layout, 5, config), 100))


def test_the_masking_config_is_resolved_once_and_refusals_are_one_line(corpus, tmp_path):
  directory, paths, _, config, _ = corpus
  run = pt.resolve(tmp_path, os.path.join(directory, "*.tfrecord"))
  assert run.decided.masking_config == config
  assert run.decided.layout.dynamic_masking and run.decided.layout.max_predictions_per_seq == 5
  with pytest.raises(run_lib.RunError, match=r"--max_predictions_per_seq=20, but the dynamic-"
                     r"masking records were made for max_predictions_per_seq=5 .*pass "
                     r"--max_predictions_per_seq=5"):
    pt.resolve(tmp_path, os.path.join(directory, "*.tfrecord"), max_predictions_per_seq=20)
  bare = tmp_path / "bare"
  bare.mkdir()
  for path in paths:
    with open(path, "rb") as f, open(bare / os.path.basename(path), "wb") as g:
      g.write(f.read())
  with pytest.raises(run_lib.RunError, match=r"no \*\.stats\.json beside it lists it.*"
                     r"--dynamic_masking_config=PATH_TO_IT"):
    pt.resolve(tmp_path, str(bare / "*.tfrecord"))
  stats_path = os.path.join(directory, "part.stats.json")
  run = pt.resolve(tmp_path, str(bare / "*.tfrecord"), dynamic_masking_config=stats_path)
  assert run.decided.masking_config == config
  static_dir = tmp_path / "static"
  tiny_data.write_records(str(static_dir), 1, 8, SEQ, pt.P)
  with pytest.raises(run_lib.RunError, match="--dynamic_masking_config=.*leave the flag out"):
    pt.resolve(tmp_path, str(static_dir / "*.tfrecord"), dynamic_masking_config=stats_path)


def test_command_line_refusal_is_one_line_exit_2_before_writing(corpus, tmp_path):
  _, paths, _, _, _ = corpus
  bare = tmp_path / "bare"
  bare.mkdir()
  with open(paths[0], "rb") as f, open(bare / "one.tfrecord", "wb") as g:
    g.write(f.read())
  proc = pt.run_cli(tmp_path, pt.tiny_argv(tmp_path, str(bare / "*.tfrecord"), do_train=True,
                                           max_predictions_per_seq=5, num_train_steps=2))
  assert proc.returncode == 2
  lines = proc.stderr.strip().splitlines()
  assert lines[-1].startswith("run_pretraining.py: error: ") and "--dynamic_masking_config" in \
      lines[-1]
  assert not (tmp_path / "out").exists() or not os.listdir(tmp_path / "out")


class _Losses(tf2.compat.v1.train.SessionRunHook):
  def __init__(self):
    self.losses = []

  def before_run(self, run_context):
    return tf2.compat.v1.train.SessionRunArgs("total_loss:0")

  def after_run(self, run_context, run_values):
    self.losses.append(float(run_values.results))


@pytest.mark.parametrize("packed", [False, True], ids=["unpacked", "packed"])
def test_training_on_dynamic_records_runs_with_a_finite_loss(corpus, packed, tmp_path):
  directory, _, _, _, _ = corpus
  input_file = os.path.join(directory, "*.tfrecord")
  if packed:
    from bert_fin.data.packing import pack_files  # pylint: disable=import-outside-toplevel
    stats = pack_files.pack_files(input_file, str(tmp_path / "packed" / "train"), 2,
                                  max_sequences_per_pack=2, log=lambda *a: None)
    assert stats[masking_source.BLOCK] == tiny_data.DYNAMIC_MASKING
    input_file = str(tmp_path / "packed" / "train-*.tfrecord")
  values = pt.parse_flags(pt.tiny_argv(tmp_path, input_file, do_train=True, do_eval=True,
                                       max_predictions_per_seq=5, num_train_steps=12,
                                       save_checkpoints_steps=12, max_eval_steps=2,
                                       learning_rate=5e-3))
  recorder = _Losses()
  result = pt.train(values, extra_hooks=[recorder])
  assert len(recorder.losses) == 12 and np.all(np.isfinite(recorder.losses))
  assert np.isfinite(result["masked_lm_loss"]) and result["masked_lm_loss"] > 0
  with open(tmp_path / "out" / stream.ORDER_FILE, encoding="utf-8") as f:
    assert json.load(f)["seed"] == 1234


def test_files_joining_a_growing_corpus_need_the_runs_masking_config(corpus, tmp_path):
  from bert_fin.training import estimator  # pylint: disable=import-outside-toplevel
  directory, _, _, _, _ = corpus
  run = pt.resolve(tmp_path, os.path.join(directory, "*.tfrecord"))
  check = estimator._check_new_files(run)  # pylint: disable=protected-access
  same, _ = tiny_data.write_dynamic_records(str(tmp_path / "same"), 1, 4, SEQ, seed=8)
  check(same)
  other, _ = tiny_data.write_dynamic_records(
      str(tmp_path / "other"), 1, 4, SEQ, seed=8,
      masking_block=dict(tiny_data.DYNAMIC_MASKING, masked_lm_prob=0.2))
  with pytest.raises(ValueError, match="masking config .* is not the run's"):
    check(other)
  static, _ = tiny_data.write_records(str(tmp_path / "static"), 1, 4, SEQ, pt.P)
  with pytest.raises(ValueError, match="another layout"):
    check(static)
