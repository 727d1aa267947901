# coding=utf-8
"""run_distill: which teacher layers a student takes, the distillation loss against its formula,
bad teachers / students refused in one line before anything is written, and (slow) with alpha = 0
exactly run_classifier's weights on the same student, a resumed run equal to an uninterrupted one,
the student an ordinary run_classifier directory."""
import os
import random
import subprocess
import sys

from absl import flags
import numpy as np
import pytest
import tensorflow.compat.v1 as tf

from helpers import REPO
from helpers.distill_toys import COMMON
from helpers.distill_toys import check_student_is_ordinary
from helpers.distill_toys import classify_settings as _classify_settings
from helpers.distill_toys import distill_settings as _distill_settings
from helpers.distill_toys import fake_teacher as _fake_teacher
from helpers.distill_toys import toy_task
from helpers.finetune_toys import assert_same_weights
from helpers.finetune_toys import check_distillation_resumes_exactly
from helpers.finetune_toys import toy_rows
from helpers.finetune_toys import write_jsonl
from helpers import modeling_toys as mt
from helpers import tokenizer_vocab
from bert_fin.finetune.classify import orchestration as classify
from bert_fin.finetune.distill import flags as distill_flags
from bert_fin.finetune.distill import losses
from bert_fin.finetune.distill import model as distill_model
from bert_fin.finetune.distill import orchestration
from bert_fin.finetune.distill import soft_targets
from bert_fin.finetune.distill import student
from bert_fin.finetune.distill import unlabeled
from bert_fin.interop import hf_names
from bert_fin.modeling import config as config_lib
from bert_fin.training import distributed

@pytest.fixture
def toy(tmp_path):
  return toy_task(tmp_path)


def test_layer_selection_skip_keeps_the_top_bottom_keeps_the_first():
  assert student.select_layers(12, 3, distill_flags.SKIP) == [3, 7, 11]
  assert student.select_layers(12, 4, distill_flags.SKIP) == [2, 5, 8, 11]
  assert student.select_layers(6, 6, distill_flags.SKIP) == list(range(6))
  assert student.select_layers(12, 3, distill_flags.BOTTOM) == [0, 1, 2]
  with pytest.raises(ValueError, match="--student_layers=4: the teacher has 3 layers"):
    student.select_layers(3, 4, distill_flags.SKIP)


def test_student_tensors_rename_the_mapped_layers_and_drop_the_others():
  teacher = {"bert/embeddings/word_embeddings": np.zeros(1), "output_weights": np.ones(1),
             "bert/pooler/dense/kernel": np.full(1, 2.0)}
  for layer in range(4):
    teacher["bert/encoder/layer_%d/output/dense/kernel" % layer] = np.full(1, 10.0 + layer)
  tensors = student.student_tensors(teacher, [1, 3])
  assert sorted(tensors) == sorted(["bert/embeddings/word_embeddings", "output_weights",
                                    "bert/pooler/dense/kernel",
                                    "bert/encoder/layer_0/output/dense/kernel",
                                    "bert/encoder/layer_1/output/dense/kernel"])
  assert tensors["bert/encoder/layer_0/output/dense/kernel"][0] == 11.0
  assert tensors["bert/encoder/layer_1/output/dense/kernel"][0] == 13.0


def test_distillation_loss_is_t_squared_kl_mixed_with_gold():
  rng = np.random.RandomState(0)
  student_logits = rng.normal(size=(5, 3)).astype(np.float32)
  teacher_logits = rng.normal(size=(5, 3)).astype(np.float32)
  temperature, alpha, gold = 3.0, 0.7, 1.25

  def softmax(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)

  p, q = softmax(teacher_logits / temperature), softmax(student_logits / temperature)
  expected = alpha * temperature ** 2 * np.mean(np.sum(p * np.log(p / q), axis=-1)) + (
      1 - alpha) * gold
  with tf.Graph().as_default(), tf.Session() as sess:
    gold_t = tf.constant(gold)
    mixed = losses.distillation_loss(gold_t, tf.constant(student_logits),
                                     tf.constant(teacher_logits), temperature, alpha)
    assert losses.distillation_loss(gold_t, None, None, temperature, 0.0) is gold_t
    same = losses.soft_target_loss(tf.constant(teacher_logits), tf.constant(teacher_logits),
                                   temperature)
    value, zero = sess.run([mixed, same])
  np.testing.assert_allclose(value, expected, rtol=1e-5)
  assert abs(zero) < 1e-6


def test_teachers_without_head_or_labels_are_refused_before_anything_is_written(toy):
  _fake_teacher(toy, head=False)
  with pytest.raises(ValueError, match="has no trained classifier head"):
    orchestration.preflight(_distill_settings(toy), distributed.init(False))
  _fake_teacher(toy)
  os.remove(os.path.join(toy["teacher"], "labels.txt"))
  with pytest.raises(ValueError, match="has no labels.txt"):
    orchestration.preflight(_distill_settings(toy), distributed.init(False))
  assert not os.path.exists(toy["out"])


@pytest.mark.parametrize("extra, message", [
    (("--student_layers=4",), "--student_layers=4: the teacher has 3 layers"),
    (("--student_layers=2", "--layer_map=0,3"), r"--layer_map: layer\(s\) 3 out of range"),
    (("--student_layers=2", "--layer_map=0"), "names 1 teacher layers for a student of 2"),
    (("--layer_map=0,1", "--student_config={wide}"), "needs the teacher's widths: hidden_size"),
    (("--init_checkpoint={teacher}/model.ckpt-7",), "--init_checkpoint: the student starts"),
    (("--bert_config_file={wide}",), "has 2 layers, the teacher's checkpoint .* holds 3"),
])
def test_bad_students_are_refused_in_one_line_before_anything_is_written(toy, extra, message):
  _fake_teacher(toy)
  wide = toy["tmp"] / "wide.json"
  wide.write_text(mt.tiny_config(
      vocab_size=toy["config"].vocab_size, hidden_size=64, num_hidden_layers=2,
      intermediate_size=64, max_position_embeddings=32).to_json_string())
  extra = [e.format(wide=wide, teacher=toy["teacher"]) for e in extra]
  with pytest.raises(ValueError, match=message):
    orchestration.preflight(_distill_settings(toy, *extra), distributed.init(False))
  assert not os.path.exists(toy["out"])


def test_unlabeled_files_jsonl_and_txt_read_others_refused(tmp_path):
  jsonl = tmp_path / "u.jsonl"
  jsonl.write_text('{"text": "上涨了", "label": "x"}\n\n{"text": " "}\n{"text": "a", "text_b": "b"}\n',
                   encoding="utf-8")
  read = unlabeled.read(str(jsonl))
  assert [(e.text_a, e.text_b, e.label) for e in read.examples] == [("上涨了", None, None),
                                                                   ("a", "b", None)]
  assert read.skipped == {"blank line": 1, "empty text": 1}
  txt = tmp_path / "u.txt"
  txt.write_text("一\n二\n", encoding="utf-8")
  assert [e.text_a for e in unlabeled.read(str(txt)).examples] == ["一", "二"]
  for name, content, message in (("u.csv", "a\n", "unknown format '.csv'"),
                                 ("bad.jsonl", '{"text": 1}\n', "bad.jsonl:1: 'text' must be"),
                                 ("bad2.jsonl", "[1]\n", "bad2.jsonl:1: a JSON list")):
    (tmp_path / name).write_text(content, encoding="utf-8")
    with pytest.raises(ValueError, match=message):
      unlabeled.read(str(tmp_path / name))


def test_labelled_mean_reads_the_labelled_rows_only():
  with tf.Graph().as_default(), tf.Session() as sess:
    values = sess.run([losses.labelled_mean(tf.constant([1.0, 2.0, 4.0]), tf.constant([1, 0, 1])),
                       losses.labelled_mean(tf.constant([1.0, 2.0]), tf.constant([0, 0]))])
  assert values == [2.5, 0.0]


def test_unlabeled_texts_are_mixed_into_the_training_rows(toy):
  _fake_teacher(toy)
  texts = toy["tmp"] / "unlabeled.txt"
  texts.write_text("".join(row["text"] + "\n" for row in toy_rows(random.Random(2), 40)),
                   encoding="utf-8")
  plan = orchestration.preflight(_distill_settings(
      toy, "--unlabeled_file=" + str(texts), "--num_train_epochs=2"), distributed.init(False))
  labelled = plan.train_arrays[distill_model.LABELLED]
  assert len(labelled) == 136 and labelled.sum() == 96
  assert 0 < labelled[:68].sum() < 68  # mixed, not appended
  assert plan.num_train_steps == 136 * 2 // 16
  assert plan.fingerprint and plan.stored_logits is None
  with pytest.raises(ValueError, match="unknown format '.tsv'"):
    orchestration.preflight(_distill_settings(toy, "--unlabeled_file=" + str(texts) + ".tsv"),
                            distributed.init(False))
  with pytest.raises(ValueError, match="--unlabeled_file teaches through"):
    _distill_settings(toy, "--unlabeled_file=" + str(texts), "--alpha=0")
  assert not os.path.exists(toy["out"])


def test_cli_exits_2_with_one_line_for_a_teacher_without_head(toy):
  _fake_teacher(toy, head=False)
  result = subprocess.run(
      [sys.executable, os.path.join(REPO, "run_distill.py"), "--data_dir=" + toy["data"],
       "--bert_config_file=" + toy["config_file"], "--vocab_file=" + toy["vocab"],
       "--output_dir=" + toy["out"], "--teacher_dir=" + toy["teacher"], "--do_train"] + COMMON,
      capture_output=True, text=True, timeout=300)
  assert result.returncode == 2
  assert result.stderr.strip().splitlines() == [result.stderr.strip()]
  assert "run_distill.py: error: --teacher_dir" in result.stderr
  assert not os.path.exists(toy["out"])


def _train_teacher(toy, steps=24):
  classify.run(_classify_settings(
      toy, "--bert_config_file=" + toy["config_file"], "--output_dir=" + toy["teacher"],
      "--do_train", "--num_train_steps=%d" % steps), distributed.init(False))


@pytest.mark.slow
def test_alpha_zero_gives_exactly_run_classifiers_weights_on_the_same_student(toy):
  _train_teacher(toy)
  plan = orchestration.preflight(_distill_settings(toy, "--student_layers=2", "--alpha=0",
                                                   "--num_train_steps=6"),
                                 distributed.init(False))
  assert plan.layer_map == [1, 2]
  orchestration.run(plan, distributed.init(False))
  assert not os.path.exists(os.path.join(toy["out"], soft_targets.TEACHER_FILE))
  baseline = str(toy["tmp"] / "classifier")
  classify.run(_classify_settings(
      toy, "--bert_config_file=" + os.path.join(toy["out"], "bert_config.json"),
      "--init_checkpoint=" + os.path.join(toy["out"], "student_init", "model.ckpt"),
      "--output_dir=" + baseline, "--do_train", "--num_train_steps=6"), distributed.init(False))
  distilled, _ = assert_same_weights(toy["out"], baseline, 6)
  assert "bert/encoder/layer_1/output/dense/kernel" in distilled
  assert "bert/encoder/layer_2/output/dense/kernel" not in distilled


@pytest.mark.slow
def test_resumed_distillation_equals_an_uninterrupted_one_and_predicts_as_run_classifier(toy):
  _train_teacher(toy)
  texts = toy["tmp"] / "unlabeled.jsonl"
  write_jsonl(texts, [{"text": row["text"]} for row in toy_rows(random.Random(2), 40)])
  mixture = ("--student_layers=1", "--alpha=0.6", "--temperature=2", "--num_train_steps=8",
             "--unlabeled_file=" + str(texts))
  whole = _distill_settings(toy, "--do_eval", *mixture)
  result = orchestration.run(orchestration.preflight(whole, distributed.init(False)),
                             distributed.init(False))
  assert "eval_accuracy" in result
  assert os.path.isfile(os.path.join(toy["out"], soft_targets.TEACHER_FILE))
  check_distillation_resumes_exactly(
      toy["out"], str(toy["tmp"] / "resumed"),
      lambda *flags: _distill_settings(toy, *mixture, *flags), "--temperature=3")  # another loss
  # the output is a run_classifier directory: --do_predict, the serving path and export_hf
  # read it; the transformers export is a one-layer BertForSequenceClassification
  predicted, tensors = check_student_is_ordinary(toy)
  assert predicted.shape == (11, 2)
  student_config = os.path.join(toy["out"], "bert_config.json")
  assert set(tensors) == set(hf_names.expected_shapes(
      config_lib.BertConfig.from_json_file(student_config), "BertForSequenceClassification",
      num_labels=2))
  assert not any(name.startswith("bert.encoder.layer.1.") for name in tensors)
