# coding=utf-8
"""run_distill with a run_ner teacher: the head's kind read from the checkpoint, the masked
emission loss against its formula, bad teachers and classifier-only flags refused in one line
before anything is written, and (slow) with alpha = 0 exactly run_ner's weights on the same
student, a resumed run equal to an uninterrupted one, the student an ordinary run_ner directory
(--do_predict, the transformers export)."""
import os
import subprocess
import sys

from absl import flags
import numpy as np
import pytest
from safetensors import numpy as safetensors_numpy
import tensorflow.compat.v1 as tf

from helpers import REPO
from helpers.distill_toys import NER_COMMON
from helpers.distill_toys import NER_TAGS
from helpers.distill_toys import ner_student_toy
from helpers.distill_toys import write_ner_teacher
from helpers.finetune_toys import assert_same_weights
from helpers.finetune_toys import check_distillation_resumes_exactly
from helpers.google_checkpoints import write_google_checkpoint
from helpers import modeling_toys as mt
from helpers import tokenizer_vocab
from bert_fin.cli import export_hf as export_hf_cli
from bert_fin.finetune import finetuned
from bert_fin.finetune.distill import flags as distill_flags
from bert_fin.finetune.distill import losses
from bert_fin.finetune.distill import orchestration
from bert_fin.finetune.distill import soft_targets
from bert_fin.finetune.distill import tagger
from bert_fin.finetune.ner import data as ner_data
from bert_fin.finetune.ner import flags as ner_flags
from bert_fin.finetune.ner import orchestration as ner_run
from bert_fin.interop import hf_names
from bert_fin.modeling import checkpoint as checkpoint_lib
from bert_fin.modeling import config as config_lib
from bert_fin.training import distributed

COMMON, TAGS = NER_COMMON, NER_TAGS
_fake_teacher = write_ner_teacher  # a run_ner directory written by hand


@pytest.fixture
def toy(tmp_path):
  return ner_student_toy(tmp_path, 64)


def _distill_settings(toy, *extra):
  values = distill_flags.define_flags(flags.FlagValues())
  values(["run_distill", "--task_name=chars", "--data_dir=" + toy["data"],
          "--bert_config_file=" + toy["config_file"], "--vocab_file=" + toy["vocab"],
          "--output_dir=" + toy["out"], "--teacher_dir=" + toy["teacher"], "--do_train"]
         + COMMON + list(extra))
  return distill_flags.settings_of(values)


def _ner_settings(toy, *extra):
  values = ner_flags.define_flags(flags.FlagValues())
  values(["run_ner", "--data_dir=" + toy["data"], "--vocab_file=" + toy["vocab"]] + COMMON
         + list(extra))
  return ner_flags.settings_of(values)


def test_emission_loss_is_t_squared_kl_at_the_label_positions_only():
  rng = np.random.RandomState(0)
  student_logits = rng.normal(size=(3, 6, 4)).astype(np.float32)
  teacher_logits = rng.normal(size=(3, 6, 4)).astype(np.float32)
  mask = np.array([[0, 1, 1, 0, 1, 0], [0, 1, 0, 0, 0, 0], [0, 0, 0, 0, 0, 0]], np.int32)
  temperature, alpha, gold = 2.5, 0.4, 0.75

  def softmax(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)

  p, q = softmax(teacher_logits / temperature), softmax(student_logits / temperature)
  kl = np.sum(p * np.log(p / q), axis=-1)  # [3, 6]
  expected = alpha * temperature ** 2 * kl[mask == 1].mean() + (1 - alpha) * gold
  moved = student_logits.copy()
  moved[mask == 0] += 5.0  # positions outside the mask do not count
  with tf.Graph().as_default(), tf.Session() as sess:
    value, same, unmasked, empty = sess.run([
        losses.distillation_loss(tf.constant(gold), tf.constant(student_logits),
                                 tf.constant(teacher_logits), temperature, alpha,
                                 tf.constant(mask)),
        losses.distillation_loss(tf.constant(gold), tf.constant(moved),
                                 tf.constant(teacher_logits), temperature, alpha,
                                 tf.constant(mask)),
        losses.soft_target_loss(tf.constant(moved), tf.constant(teacher_logits), temperature,
                                tf.constant(mask)),
        losses.soft_target_loss(tf.constant(student_logits), tf.constant(teacher_logits),
                                temperature, tf.zeros_like(mask))])
  np.testing.assert_allclose(value, expected, rtol=1e-5)
  np.testing.assert_allclose(same, expected, rtol=1e-5)
  np.testing.assert_allclose(unmasked, temperature ** 2 * kl[mask == 1].mean(), rtol=1e-5)
  assert empty == 0.0


def test_head_kind_is_read_from_the_checkpoint(toy):
  _fake_teacher(toy)
  checkpoint = os.path.join(toy["teacher"], "model.ckpt-7")
  assert finetuned.head_kind(checkpoint) == finetuned.TAGGER
  classifier = str(toy["tmp"] / "classifier" / "model.ckpt-1")
  shapes = mt.google_variable_shapes(toy["config"])
  write_google_checkpoint(classifier, dict(shapes, output_weights=[2, 32], output_bias=[2]),
                          np.random.RandomState(2), training_state=False)
  assert finetuned.head_kind(classifier) == finetuned.CLASSIFIER
  bare = str(toy["tmp"] / "bare" / "model.ckpt-1")
  write_google_checkpoint(bare, shapes, np.random.RandomState(2), training_state=False)
  assert finetuned.head_kind(bare) is None


def test_a_tagger_teacher_gives_a_run_ner_plan_of_the_student(toy):
  _fake_teacher(toy)
  plan = orchestration.preflight(_distill_settings(toy, "--student_layers=2"),
                                 distributed.init(False))
  assert isinstance(plan, tagger.Plan)
  assert plan.layer_map == [1, 2] and plan.ner.use_crf and plan.ner.labels == TAGS
  assert plan.ner.bert_config.num_hidden_layers == 2
  assert plan.ner.settings.model.init_checkpoint == os.path.join(
      toy["out"], "student_init", "model.ckpt")
  assert plan.fingerprint and plan.stored_logits is None
  assert not os.path.exists(toy["out"])


@pytest.mark.parametrize("teacher, extra, message", [
    (dict(head=False), (), "has no trained classifier head .* nor tagger head"),
    (dict(labels=False), (), "has no labels.txt .* not a run_ner --output_dir"),
    ({}, ("--task_name=jsonl",), "--task_name=jsonl is a run_classifier data format, the "
                                 "teacher .* is a run_ner tagger"),
    ({}, ("--pooling=mean",), "--pooling: a classifier's flag"),
    ({}, ("--long_text=tail",), "--long_text: a classifier's flag"),
    ({}, ("--labels=O,B-LOC",), "--labels O,B-LOC: the teacher's tags"),
    ({}, ("--unlabeled_file={tmp}/u.jsonl",), r"u.jsonl: unlabeled-1 is a pair \("),
    ({}, ("--unlabeled_file={tmp}/u.csv",), "--unlabeled_file .*u.csv: unknown format"),
    ({}, ("--student_layers=4",), "--student_layers=4: the teacher has 3 layers"),
])
def test_bad_tagger_teachers_and_flags_are_refused_before_anything_is_written(
    toy, teacher, extra, message):
  _fake_teacher(toy, **teacher)
  (toy["tmp"] / "u.jsonl").write_text('{"text": "上涨", "text_b": "了"}\n', encoding="utf-8")
  (toy["tmp"] / "u.csv").write_text("上涨\n", encoding="utf-8")
  settings = _distill_settings(toy, *[e.format(tmp=toy["tmp"]) for e in extra])
  with pytest.raises(ValueError, match=message):
    orchestration.preflight(settings, distributed.init(False))
  assert not os.path.exists(toy["out"])


def test_a_classifier_teacher_refuses_run_ners_data_formats(toy):
  shapes = dict(mt.google_variable_shapes(toy["config"]), output_weights=[2, 32],
                output_bias=[2])
  write_google_checkpoint(os.path.join(toy["teacher"], "model.ckpt-7"), shapes,
                          np.random.RandomState(1), training_state=False)
  with open(os.path.join(toy["teacher"], "labels.txt"), "w") as f:
    f.write("down\nup\n")
  with pytest.raises(ValueError, match="--task_name=chars is a run_ner data format, the "
                                       "teacher in .* is a classifier"):
    orchestration.preflight(_distill_settings(toy), distributed.init(False))
  assert not os.path.exists(toy["out"])


def test_cli_exits_2_with_one_line_for_unlabeled_pairs_with_a_tagger_teacher(toy):
  _fake_teacher(toy)
  texts = toy["tmp"] / "u.jsonl"
  texts.write_text('{"text": "上涨"}\n{"text": "上涨", "text_b": "了"}\n', encoding="utf-8")
  result = subprocess.run(
      [sys.executable, os.path.join(REPO, "run_distill.py"), "--task_name=chars",
       "--data_dir=" + toy["data"], "--bert_config_file=" + toy["config_file"],
       "--vocab_file=" + toy["vocab"], "--output_dir=" + toy["out"],
       "--teacher_dir=" + toy["teacher"], "--do_train", "--unlabeled_file=" + str(texts)]
      + COMMON, capture_output=True, text=True, timeout=300)
  assert result.returncode == 2
  assert result.stderr.strip().splitlines() == [result.stderr.strip()]
  assert "run_distill.py: error: %s: unlabeled-2 is a pair" % texts in result.stderr
  assert not os.path.exists(toy["out"])


def _train_teacher(toy, use_crf, steps=16):
  ner_run.run(_ner_settings(
      toy, "--bert_config_file=" + toy["config_file"], "--output_dir=" + toy["teacher"],
      "--use_crf=%s" % use_crf, "--do_train", "--num_train_steps=%d" % steps),
              distributed.init(False))


def _weights(directory, step):
  return checkpoint_lib.model_tensors(os.path.join(directory, "model.ckpt-%d" % step))


@pytest.mark.slow
def test_alpha_zero_gives_exactly_run_ners_weights_on_the_same_student(toy):
  _train_teacher(toy, use_crf=True)
  plan = orchestration.preflight(_distill_settings(toy, "--student_layers=2", "--alpha=0",
                                                   "--num_train_steps=6"),
                                 distributed.init(False))
  orchestration.run(plan, distributed.init(False))
  assert not os.path.exists(os.path.join(toy["out"], soft_targets.TEACHER_FILE))
  student_init = os.path.join(toy["out"], "student_init", "model.ckpt")
  teacher = _weights(toy["teacher"], 16)
  np.testing.assert_array_equal(checkpoint_lib.model_tensors(student_init)["ner/transitions"],
                                teacher["ner/transitions"])  # the teacher's CRF, copied
  baseline = str(toy["tmp"] / "tagger")
  ner_run.run(_ner_settings(
      toy, "--bert_config_file=" + os.path.join(toy["out"], "bert_config.json"),
      "--init_checkpoint=" + student_init, "--output_dir=" + baseline, "--use_crf=true",
      "--do_train", "--num_train_steps=6"), distributed.init(False))
  distilled, _ = assert_same_weights(toy["out"], baseline, 6)
  assert "ner/transitions" in distilled
  assert "bert/encoder/layer_2/output/dense/kernel" not in distilled


@pytest.mark.slow
def test_resumed_tagger_distillation_equals_an_uninterrupted_one_and_is_a_run_ner_dir(toy):
  _train_teacher(toy, use_crf=False)  # softmax: the transformers export takes no CRF tagger
  common = ("--student_layers=1", "--alpha=0.7", "--temperature=2", "--num_train_steps=8")
  result = orchestration.run(orchestration.preflight(
      _distill_settings(toy, "--do_eval", *common), distributed.init(False)),
                             distributed.init(False))
  assert "eval_micro_f1" in result
  with np.load(os.path.join(toy["out"], soft_targets.TEACHER_FILE)) as stored:
    assert stored["logits"].shape[1:] == (16, len(TAGS))
  check_distillation_resumes_exactly(
      toy["out"], str(toy["tmp"] / "resumed"),
      lambda *flags: _distill_settings(toy, *common, *flags), "--alpha=0.5")  # another loss
  # the output is a run_ner directory: --do_predict reads it with its own config
  student_config = os.path.join(toy["out"], "bert_config.json")
  ner_run.run(_ner_settings(toy, "--bert_config_file=" + student_config,
                            "--output_dir=" + toy["out"], "--do_predict"),
              distributed.init(False))
  predictions = os.path.join(toy["out"], ner_data.PREDICTIONS_FILE[ner_data.CHARS])
  assert os.path.isfile(predictions)
  assert os.path.isfile(os.path.join(toy["out"], ner_run.TEST_RESULTS_FILE))
  # ... and the transformers export writes a one-layer BertForTokenClassification
  hf_dir = toy["tmp"] / "hf"
  assert export_hf_cli.main(["--bert_config_file", student_config, "--init_checkpoint",
                             toy["out"], "--vocab_file", toy["vocab"], "--output_dir",
                             str(hf_dir)]) == 0
  tensors = safetensors_numpy.load_file(str(hf_dir / "model.safetensors"))
  assert set(tensors) == set(hf_names.expected_shapes(
      config_lib.BertConfig.from_json_file(student_config), hf_names.TOKEN_CLASSIFICATION,
      num_labels=len(TAGS)))
  assert not any(name.startswith("bert.encoder.layer.1.") for name in tensors)


@pytest.mark.slow
def test_a_tagger_student_matches_its_teachers_layers_and_stays_a_run_ner_dir(toy):
  _fake_teacher(toy)
  run = ("--student_layers=2", "--alpha=0", "--num_train_steps=4", "--do_eval")
  matched = _distill_settings(toy, *run, "--hidden_weight=1", "--attention_weight=0.5")
  plan = orchestration.preflight(matched, distributed.init(False))
  assert plan.matching.layer_map == [1, 2]
  result = orchestration.run(plan, distributed.init(False))
  assert result["global_step"] == 4  # run_ner's evaluation of the student
  final = os.path.join(toy["out"], "model.ckpt-4")
  assert not [name for name, _ in tf.train.list_variables(final)
              if name.startswith(("distill_teacher/", "distill_fit/"))]  # same width: no fit
  plain = str(toy["tmp"] / "plain")
  orchestration.run(orchestration.preflight(_distill_settings(toy, *run, "--output_dir=" + plain),
                                            distributed.init(False)), distributed.init(False))
  matched_weights, plain_weights = _weights(toy["out"], 4), _weights(plain, 4)
  assert sorted(matched_weights) == sorted(plain_weights)
  name = "bert/encoder/layer_0/attention/self/query/kernel"
  assert not np.array_equal(matched_weights[name], plain_weights[name])  # the matching trained
