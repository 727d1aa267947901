# coding=utf-8
"""run_distill --ensemble_dirs: the stored targets' soft targets at T are the mean of the
teachers' (softmax, multi-label sigmoid, a tagger's emissions), the loss is the KL from that
mean, bad ensembles are refused in one line before anything is written, the fingerprint
names every teacher and T; (slow) a run stores exactly the mean of what each teacher alone
stores, for a classifier and a tagger, and its record refuses a resume with another ensemble."""
import os

import numpy as np
import pytest
import tensorflow.compat.v1 as tf

from helpers.distill_toys import distill_settings
from helpers.distill_toys import fake_teacher
from helpers.distill_toys import ner_student_toy
from helpers.distill_toys import toy_task
from helpers.distill_toys import write_ner_teacher
from helpers import modeling_toys as mt
from helpers.google_checkpoints import write_google_checkpoint
from bert_fin.finetune.distill import teachers as ensemble
from bert_fin.finetune.distill import losses
from bert_fin.finetune.distill import orchestration
from bert_fin.finetune.distill import soft_targets
from bert_fin.training import distributed


def _softmax(x):
  e = np.exp(x - x.max(axis=-1, keepdims=True))
  return e / e.sum(axis=-1, keepdims=True)


def _sigmoid(x):
  return 1.0 / (1.0 + np.exp(-x))


@pytest.mark.parametrize("shape", [(5, 3), (4, 6, 7)])
@pytest.mark.parametrize("temperature", [1.0, 2.0, 4.0])
def test_mean_at_temperature_has_the_teachers_mean_probabilities(shape, temperature):
  rng = np.random.RandomState(0)
  logits = [rng.normal(0, 3, shape).astype(np.float32) for _ in range(3)]
  stored = ensemble.mean_at_temperature(logits, temperature)
  assert stored.dtype == np.float32 and stored.shape == shape
  wanted = np.mean([_softmax(z.astype(np.float64) / temperature) for z in logits], axis=0)
  np.testing.assert_allclose(_softmax(stored.astype(np.float64) / temperature), wanted,
                             rtol=1e-5, atol=1e-7)
  # not the mean of the logits (a geometric mean of the probabilities)
  assert not np.allclose(_softmax(np.mean(logits, axis=0) / temperature), wanted, atol=1e-3)


def test_mean_at_temperature_of_multi_label_teachers_averages_each_sigmoid():
  rng = np.random.RandomState(1)
  logits = [rng.normal(0, 4, (6, 5)).astype(np.float32) for _ in range(4)]
  stored = ensemble.mean_at_temperature(logits, 2.0, multi_label=True)
  wanted = np.mean([_sigmoid(z.astype(np.float64) / 2.0) for z in logits], axis=0)
  np.testing.assert_allclose(_sigmoid(stored.astype(np.float64) / 2.0), wanted, rtol=1e-5)


def test_one_teacher_is_stored_as_it_is_and_large_logits_stay_finite():
  one = np.array([[3.0, -1.0]], np.float32)
  assert ensemble.mean_at_temperature([one], 2.0) is one
  huge = [np.array([[900.0, -900.0, 0.0]], np.float32), np.array([[-900.0, 900.0, 0.0]],
                                                                np.float32)]
  stored = ensemble.mean_at_temperature(huge, 1.0)
  assert np.all(np.isfinite(stored))
  np.testing.assert_allclose(_softmax(stored.astype(np.float64)), [[0.5, 0.5, 0.0]], atol=1e-6)
  assert np.all(np.isfinite(ensemble.mean_at_temperature(huge, 1.0, multi_label=True)))


def test_the_soft_loss_of_an_ensemble_is_the_kl_from_the_mean_probabilities():
  rng = np.random.RandomState(2)
  temperature = 3.0
  teachers = [rng.normal(0, 2, (8, 4)).astype(np.float32) for _ in range(3)]
  student = rng.normal(0, 2, (8, 4)).astype(np.float32)
  mean = np.mean([_softmax(z.astype(np.float64) / temperature) for z in teachers], axis=0)
  student_probs = _softmax(student.astype(np.float64) / temperature)
  wanted = temperature ** 2 * np.mean(np.sum(mean * (np.log(mean) - np.log(student_probs)),
                                             axis=-1))
  with tf.Graph().as_default(), tf.Session() as session:
    loss = session.run(losses.soft_target_loss(
        tf.constant(student), tf.constant(ensemble.mean_at_temperature(teachers, temperature)),
        temperature))
  np.testing.assert_allclose(loss, wanted, rtol=1e-4)


def test_fingerprint_names_every_teacher_and_the_temperature_of_an_ensemble(tmp_path):
  toy = toy_task(tmp_path)
  fake_teacher(toy)
  fake_teacher(toy, directory=str(tmp_path / "second"), seed=2)
  first, second = (os.path.join(d, "model.ckpt-7") for d in (toy["teacher"],
                                                             str(tmp_path / "second")))
  rows = {"input_ids": np.arange(6, dtype=np.int32).reshape(2, 3)}
  alone = soft_targets.fingerprint(first, "{}", rows)
  assert soft_targets.fingerprint(first, "{}", rows, (), 2.0) == alone  # unchanged without one
  pair = soft_targets.fingerprint(first, "{}", rows, [second], 2.0)
  assert pair != alone
  assert soft_targets.fingerprint(first, "{}", rows, [second], 4.0) != pair
  assert soft_targets.fingerprint(second, "{}", rows, [first], 2.0) != pair  # order counts


def _refused(toy, directory, message):
  with pytest.raises(ValueError, match=message) as error:
    orchestration.preflight(distill_settings(toy, "--ensemble_dirs=" + directory,
                                             "--num_train_steps=2"), distributed.init(False))
  assert "\n" not in str(error.value)
  assert not os.path.exists(toy["out"])  # refused before anything is written


def test_bad_ensembles_are_refused_in_one_line_before_anything_is_written(tmp_path):
  toy = toy_task(tmp_path)
  fake_teacher(toy)
  _refused(toy, str(tmp_path / "missing"), "missing: no such directory")
  os.makedirs(tmp_path / "empty")
  _refused(toy, str(tmp_path / "empty"), "holds no checkpoint")
  _refused(toy, toy["teacher"], "named twice \\(or is --teacher_dir\\)")
  other_labels = str(tmp_path / "other_labels")
  fake_teacher(toy, directory=other_labels, seed=2)
  with open(os.path.join(other_labels, "labels.txt"), "w") as f:
    f.write("up\ndown\n")
  _refused(toy, other_labels, "labels.txt is up,down, --teacher_dir's is down,up")
  wider = str(tmp_path / "wider")
  shapes = dict(mt.google_variable_shapes(mt.tiny_config(
      vocab_size=toy["config"].vocab_size, hidden_size=48, num_hidden_layers=3,
      intermediate_size=64, max_position_embeddings=32)), output_weights=[2, 48],
                output_bias=[2])
  write_google_checkpoint(os.path.join(wider, "model.ckpt-3"), shapes, np.random.RandomState(3))
  with open(os.path.join(wider, "labels.txt"), "w") as f:
    f.write("down\nup\n")
  _refused(toy, wider, "wider/model.ckpt-3's model differs from --teacher_dir's")
  multi = str(tmp_path / "multi")
  fake_teacher(toy, directory=multi, seed=2, head_kind={"multi_label": True})
  _refused(toy, multi, "multi is a multi-label classifier, --teacher_dir's is not")
  tagger = str(tmp_path / "tagger")
  write_ner_teacher(toy, directory=tagger)
  _refused(toy, tagger, "tagger is not a classifier like --teacher_dir")
  _refused(toy, "%s,%s" % (multi, multi), "named twice")


def test_an_ensemble_needs_the_soft_targets():
  toy_dir = {"data": "d", "config_file": "c", "vocab": "v", "out": "o", "teacher": "t"}
  with pytest.raises(ValueError, match="--ensemble_dirs: .*pass --alpha > 0"):
    distill_settings(toy_dir, "--ensemble_dirs=a,b", "--alpha=0")


def _stored(toy, out, teacher, *flags):
  plan = orchestration.preflight(distill_settings(
      dict(toy, out=out, teacher=teacher), "--student_layers=1", "--temperature=2",
      "--num_train_steps=2", *flags), distributed.init(False))
  orchestration.run(plan, distributed.init(False))
  with np.load(os.path.join(out, soft_targets.TEACHER_FILE)) as stored:
    return stored["logits"]


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["classifier", "tagger"])
def test_an_ensemble_run_stores_the_mean_of_its_teachers_alone(tmp_path, kind):
  if kind == "classifier":
    toy = toy_task(tmp_path)
    write, flags = fake_teacher, ()
  else:
    toy = ner_student_toy(tmp_path, 20)
    write, flags = write_ner_teacher, ("--task_name=chars",)
  second = str(tmp_path / "second")
  write(toy)
  write(toy, directory=second, seed=2)
  alone = [_stored(toy, str(tmp_path / name), teacher, *flags)
           for name, teacher in (("first_alone", toy["teacher"]), ("second_alone", second))]
  assert not np.allclose(alone[0], alone[1])
  both = _stored(toy, toy["out"], toy["teacher"], "--ensemble_dirs=" + second, *flags)
  np.testing.assert_allclose(both, ensemble.mean_at_temperature(alone, 2.0), atol=1e-5)
  # the checkpoint was distilled from the pair: resuming it from one teacher is refused
  with pytest.raises(ValueError, match="distilled with"):
    orchestration.preflight(distill_settings(toy, "--student_layers=1", "--temperature=2",
                                             "--num_train_steps=4", *flags),
                            distributed.init(False))
