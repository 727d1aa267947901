# coding=utf-8
"""run_distill --unlabeled_weight: the texts take their share of the training rows as
run_pretraining's --input_source weights mix (every labelled row once an epoch, the texts'
passes running on across epochs), the whole run's order a function of the seed and epochs, the
teacher's logits of its distinct rows; without the flag the rows are mixed by count as before;
(slow) a resumed weighted distillation equals an uninterrupted one."""
import glob
import os
import random
import shutil

from absl import flags
import numpy as np
import pytest
import tensorflow.compat.v1 as tf

from helpers.finetune_toys import toy_rows
from helpers.finetune_toys import write_jsonl
from helpers import distill_toys
from helpers import tokenizer_vocab
from bert_fin.finetune.distill import flags as distill_flags
from bert_fin.finetune.distill import model as distill_model
from bert_fin.finetune.distill import orchestration
from bert_fin.finetune.distill import soft_targets
from bert_fin.finetune.distill import unlabeled
from bert_fin.modeling import checkpoint as checkpoint_lib
from bert_fin.training import distributed


def test_weighted_rows_take_their_share_and_every_labelled_row_once():
  order = unlabeled.row_order(300, 70, 0.6, seed=4)
  labelled, texts = order[order < 300], order[order >= 300] - 300
  assert sorted(labelled) == list(range(300))  # each labelled row once
  assert len(texts) / len(order) == pytest.approx(0.6, abs=0.01)
  assert order[-1] < 300  # the pass ends at the last labelled row
  counts = np.bincount(texts, minlength=70)  # cycled: every text 6 or 7 times (450 / 70)
  assert counts.min() >= 6 and counts.max() <= 7
  first_pass = texts[:70]
  assert sorted(first_pass) == list(range(70))  # a whole pass before any text repeats
  for start in range(0, len(order) - 128, 128):  # the share holds within every block
    block = order[start:start + 128]
    assert np.mean(block >= 300) == pytest.approx(0.6, abs=0.05)
  np.testing.assert_array_equal(order, unlabeled.row_order(300, 70, 0.6, seed=4))
  assert not np.array_equal(order, unlabeled.row_order(300, 70, 0.6, seed=5))


def test_without_a_weight_every_row_is_read_once_in_a_seeded_order():
  order = unlabeled.row_order(30, 12, None, seed=3)
  np.testing.assert_array_equal(order, np.random.RandomState(3).permutation(42))


def test_mix_says_how_many_texts_the_whole_run_leaves_unread():
  labelled = {"x": np.arange(40)}
  said = []
  mixed = unlabeled.mix(labelled, {"x": np.arange(100, 400)}, 0.5, 2, "labelled", said.append,
                        epochs=2)
  arrays = unlabeled.gather(mixed)
  texts = arrays["x"][arrays["labelled"] == 0]
  read = len(np.unique(texts))
  assert 40 < read < 300  # two epochs read further than one, a share of 0.5 not all 300
  assert said == ["--unlabeled_weight=0.5: the run (2 epochs) reads %d of the 300 text rows; %d "
                  "are never read: raise --unlabeled_weight or the epochs, or drop "
                  "--unlabeled_weight to read every text once an epoch" % (read, 300 - read)]
  assert len(mixed.rows["x"]) == 40 + read  # the distinct rows, each once
  assert sorted(mixed.rows["x"]) == list(mixed.rows["x"])  # labelled, then texts, file order
  said.clear()  # every text read: nothing to say
  unlabeled.mix(labelled, {"x": np.arange(100, 110)}, 0.5, 2, "labelled", said.append)
  unlabeled.mix(labelled, {"x": np.arange(100, 400)}, None, 2, "labelled", said.append)
  assert said == []


def test_the_texts_passes_continue_across_epochs():
  order = unlabeled.row_order(300, 1000, 0.6, seed=4, epochs=3)
  labelled_rows = order < 300
  epoch_ends = np.flatnonzero(labelled_rows)[[299, 599, 899]]
  assert epoch_ends[-1] == len(order) - 1  # the run ends at its last labelled row
  starts = np.concatenate([[0], epoch_ends[:-1] + 1])
  for start, end in zip(starts, epoch_ends):  # each labelled row exactly once an epoch
    epoch = order[start:end + 1]
    assert sorted(epoch[epoch < 300]) == list(range(300))
  texts = order[order >= 300] - 300
  assert len(texts) == pytest.approx(900 * 1.5, abs=128)  # a share 0.6 over 3 epochs
  assert len(np.unique(texts[:1000])) == 1000  # every text read before any repeats
  assert len(np.unique(texts)) == 1000  # epoch 1 alone reads ~450: later epochs read on
  assert len(np.unique(texts[texts.size // 3:])) > 450  # not epoch 1's texts again
  for start in range(0, len(order) - 128, 128):  # the share holds within every block
    assert np.mean(order[start:start + 128] >= 300) == pytest.approx(0.6, abs=0.05)
  np.testing.assert_array_equal(order, unlabeled.row_order(300, 1000, 0.6, seed=4, epochs=3))
  assert not np.array_equal(order, unlabeled.row_order(300, 1000, 0.6, seed=5, epochs=3))
  np.testing.assert_array_equal(unlabeled.row_order(300, 70, 0.6, seed=4, epochs=1),
                                unlabeled.row_order(300, 70, 0.6, seed=4))


def test_a_fractional_epoch_reads_the_first_rows_of_its_order():
  whole = unlabeled.row_order(300, 1000, 0.5, seed=1, epochs=2)
  part = unlabeled.row_order(300, 1000, 0.5, seed=1, epochs=1.5)
  labelled = part[part < 300]
  assert len(labelled) == 450  # round(1.5 x 300)
  assert sorted(labelled[:300]) == list(range(300))  # epoch 1 whole
  assert len(np.unique(labelled[300:])) == 150  # half an epoch: distinct rows
  np.testing.assert_array_equal(labelled, whole[whole < 300][:450])  # epoch 2's first rows
  assert len(unlabeled.row_order(300, 1000, 0.5, seed=1, epochs=0.001)) >= 1


def test_a_weighted_run_is_read_once_and_steps_as_epochs_over_one_epoch():
  one = len(unlabeled.row_order(300, 1000, 0.5, seed=1))
  three = len(unlabeled.row_order(300, 1000, 0.5, seed=1, epochs=3))
  assert three // 32 == pytest.approx(one * 3 // 32, abs=128 // 32 + 1)  # block rounding
  assert unlabeled.run_epochs(None, 2.5, 32, one) == 2.5
  assert unlabeled.run_epochs(100, 3.0, 32, 400) == 8.0  # 3,200 rows of --num_train_steps
  assert unlabeled.run_epochs(5, 3.0, 32, 400) == 1.0  # at least one epoch


def test_the_teacher_reads_each_distinct_row_once():
  mixed = unlabeled.mix({"x": np.arange(20)}, {"x": np.arange(100, 130)}, 0.75, 3, "labelled",
                        lambda line: None, epochs=4)
  rows, covered = unlabeled.teacher_rows(unlabeled.gather(mixed), mixed)
  assert len(rows["x"]) == 50 and len(np.unique(rows["x"])) == 50  # 20 labelled + 30 texts
  assert len(mixed.order) > 4 * 20 / 0.25 - 128  # the whole run: every row read many times
  np.testing.assert_array_equal(covered[unlabeled.ORDER], mixed.order)
  logits = rows["x"][:, None] * np.ones([1, 3], np.float32)  # a teacher: row -> its logits
  arrays = unlabeled.with_teacher_logits(unlabeled.gather(mixed), mixed, "logits", logits)
  np.testing.assert_array_equal(arrays["logits"][:, 0], arrays["x"])  # each row its own
  plain = {"x": np.arange(5)}
  assert unlabeled.teacher_rows(plain, None) == (plain, plain)


@pytest.fixture
def toy(tmp_path):
  rng = random.Random(7)
  data = tmp_path / "data"
  data.mkdir()
  for split, count in (("train", 40), ("dev", 8), ("test", 8)):
    write_jsonl(data / ("%s.jsonl" % split), toy_rows(rng, count))
  texts = tmp_path / "texts.txt"
  texts.write_text("".join(row["text"] + "\n" for row in toy_rows(rng, 10)), encoding="utf-8")
  config_file, teacher = distill_toys.write_teacher(tmp_path, num_hidden_layers=2)
  return dict(argv=["--task_name=jsonl", "--data_dir=" + str(data),
                    "--bert_config_file=" + config_file,
                    "--vocab_file=" + tokenizer_vocab.write_vocab(tmp_path),
                    "--teacher_dir=" + teacher, "--student_layers=1", "--alpha=0.7",
                    "--unlabeled_file=" + str(texts), "--do_train", "--max_seq_length=16",
                    "--train_batch_size=8", "--learning_rate=1e-3", "--seed=2",
                    "--save_checkpoints_steps=4", "--intra_op_parallelism_threads=1",
                    "--inter_op_parallelism_threads=1"], tmp=tmp_path)


def _settings(toy, *extra):
  values = distill_flags.define_flags(flags.FlagValues())
  values(["run_distill"] + toy["argv"] + list(extra))
  return distill_flags.settings_of(values)


def test_a_weight_without_texts_is_refused(toy):
  argv = [flag for flag in toy["argv"] if not flag.startswith("--unlabeled_file")]
  values = distill_flags.define_flags(flags.FlagValues())
  values(["run_distill"] + argv + ["--output_dir=x", "--unlabeled_weight=0.5"])
  with pytest.raises(ValueError, match="--unlabeled_weight weighs --unlabeled_file"):
    distill_flags.settings_of(values)


@pytest.mark.slow  # three short distillations
def test_a_resumed_weighted_distillation_equals_an_uninterrupted_one(toy):
  whole = str(toy["tmp"] / "whole")
  plan = orchestration.preflight(_settings(toy, "--output_dir=" + whole,
                                           "--unlabeled_weight=0.75", "--num_train_steps=8"),
                                 distributed.init(False))
  labelled = plan.train_arrays[distill_model.LABELLED]
  assert int(np.sum(labelled)) == 40  # each labelled row once, the texts 3 to 1
  assert len(labelled) == pytest.approx(40 / 0.25, abs=8)  # the share within a block of 128
  orchestration.run(plan, distributed.init(False))
  resumed = str(toy["tmp"] / "resumed")  # killed after its step-4 checkpoint
  shutil.copytree(whole, resumed)
  for path in glob.glob(os.path.join(resumed, "model.ckpt-8*")):
    os.remove(path)
  tf.train.update_checkpoint_state(resumed, os.path.join(resumed, "model.ckpt-4"))
  with pytest.raises(ValueError, match="holds a checkpoint distilled with"):  # another weight
    orchestration.preflight(_settings(toy, "--output_dir=" + resumed, "--unlabeled_weight=0.5",
                                      "--num_train_steps=8"), distributed.init(False))
  orchestration.run(orchestration.preflight(_settings(
      toy, "--output_dir=" + resumed, "--unlabeled_weight=0.75", "--num_train_steps=8"),
      distributed.init(False)), distributed.init(False))
  expected = checkpoint_lib.model_tensors(os.path.join(whole, "model.ckpt-8"))
  got = checkpoint_lib.model_tensors(os.path.join(resumed, "model.ckpt-8"))
  assert sorted(got) == sorted(expected)
  for name in expected:
    np.testing.assert_array_equal(got[name], expected[name], err_msg=name)


def test_stored_logits_are_of_the_distinct_rows_and_refused_for_another_order(toy):
  out = toy["tmp"] / "out"
  common = ("--output_dir=" + str(out), "--unlabeled_weight=0.5")
  plan = orchestration.preflight(_settings(toy, *common, "--num_train_epochs=3"),
                                 distributed.init(False))
  distinct = len(plan.mixed.rows[distill_model.LABELLED])
  assert distinct == 40 + 10 < len(plan.train_arrays[distill_model.LABELLED])  # 3 epochs
  out.mkdir()
  soft_targets.write(str(out), np.zeros([distinct, len(plan.teacher.labels)], np.float32),
                     plan.fingerprint)
  again = orchestration.preflight(_settings(toy, *common, "--num_train_epochs=3"),
                                  distributed.init(False))
  assert again.stored_logits.shape == (distinct, len(plan.teacher.labels))
  for changed in ("--num_train_epochs=2", "--seed=3"):  # the same rows, another order
    with pytest.raises(ValueError, match="fingerprint differs"):
      orchestration.preflight(_settings(toy, *common, "--num_train_epochs=3", changed),
                              distributed.init(False))
