# coding=utf-8
"""run_distill --unlabeled_file with a run_ner teacher: the texts cut into run_ner's units and
windows and mixed into the training windows (--unlabeled_weight: their share), the gold loss (the
CRF's too) reading the labelled windows only, and (slow) a resumed weighted distillation equal to
an uninterrupted one, the teacher's emissions of every window stored once."""
import os
import random

from absl import flags
import numpy as np
import pytest
import tensorflow.compat.v1 as tf

from helpers.distill_toys import NER_COMMON
from helpers.distill_toys import NER_TAGS
from helpers.distill_toys import ner_student_toy
from helpers.distill_toys import write_ner_teacher
from helpers.finetune_toys import check_distillation_resumes_exactly
from helpers.finetune_toys import ner_sentences
from helpers import modeling_toys as mt
from bert_fin.records import schema as records
from bert_fin.finetune.distill import flags as distill_flags
from bert_fin.finetune.distill import losses
from bert_fin.finetune.distill import model as distill_model
from bert_fin.finetune.distill import orchestration
from bert_fin.finetune.distill import soft_targets
from bert_fin.finetune.distill import unlabeled
from bert_fin.finetune.ner import data as ner_data
from bert_fin.finetune.ner import features as ner_features
from bert_fin.finetune.ner import flags as ner_flags
from bert_fin.finetune.ner import model as ner_model
from bert_fin.finetune.ner import orchestration as ner_run
from bert_fin.training import distributed

COMMON, TAGS = ["--task_name=chars"] + NER_COMMON, NER_TAGS


@pytest.fixture
def toy(tmp_path):
  texts = tmp_path / "unlabeled.txt"  # the sentences' characters, one text a line, no tags
  texts.write_text("".join("".join(units) + "\n" for units, _ in ner_sentences(
      random.Random(4), 30, long_every=5)), encoding="utf-8")
  return dict(ner_student_toy(tmp_path, 48), texts=str(texts))


def _distill_settings(toy, *extra):
  values = distill_flags.define_flags(flags.FlagValues())
  values(["run_distill", "--data_dir=" + toy["data"], "--bert_config_file=" + toy["config_file"],
          "--vocab_file=" + toy["vocab"], "--output_dir=" + toy["out"],
          "--teacher_dir=" + toy["teacher"], "--do_train",
          "--unlabeled_file=" + toy["texts"]] + COMMON + list(extra))
  return distill_flags.settings_of(values)


def test_texts_are_cut_into_run_ners_units(tmp_path):
  path = tmp_path / "u.jsonl"
  path.write_text('{"text": "中国银行ABC12 涨"}\n{"text": "深圳"}\n', encoding="utf-8")
  sentences = unlabeled.sentences(unlabeled.read(str(path)))
  assert [s.units for s in sentences] == [list("中国银行") + ["ABC12", " ", "涨"], ["深", "圳"]]
  assert [s.tags for s in sentences] == [None, None]
  assert sentences[0].units == ner_data.cluener_units("中国银行ABC12 涨")[0]


def test_texts_windows_join_the_training_windows_with_their_weight(toy):
  write_ner_teacher(toy)
  plain = orchestration.preflight(_distill_settings(toy), distributed.init(False))
  arrays = plain.train_arrays
  labelled = arrays[distill_model.LABELLED]
  gold_windows = len(plain.ner.encoded["train"].windows)
  assert labelled.sum() == gold_windows and len(labelled) > gold_windows + 30  # long texts: 2+
  texts = labelled == 0
  assert not arrays[ner_features.LABEL_IDS][texts].any()  # no tags: never read
  assert (arrays[ner_features.LABEL_MASK][texts].sum(axis=1) >= 1).all()  # the KL's positions
  assert 0 < labelled[:len(labelled) // 2].sum() < len(labelled) // 2  # mixed, not appended
  assert plain.ner.num_train_steps == len(labelled) * 3 // 16  # 3 epochs over both
  assert plain.fingerprint and plain.stored_logits is None
  weighted_plan = orchestration.preflight(_distill_settings(toy, "--unlabeled_weight=0.75"),
                                          distributed.init(False))
  weighted = weighted_plan.train_arrays[distill_model.LABELLED]
  assert weighted.sum() == 3 * gold_windows  # the whole run: each labelled window once an epoch
  assert len(weighted) == pytest.approx(3 * gold_windows / 0.25, abs=8)  # the texts 3 to 1
  assert weighted_plan.ner.num_train_steps == len(weighted) // 16  # read once
  assert len(weighted_plan.mixed.rows[distill_model.LABELLED]) == len(labelled)  # all read
  assert not os.path.exists(toy["out"])


@pytest.mark.parametrize("use_crf", [False, True])
def test_the_gold_loss_of_a_mixed_batch_is_run_ners_loss_of_its_labelled_windows(toy, use_crf):
  rng = np.random.RandomState(0)
  batch, seq = 5, 8
  features = {records.INPUT_IDS: rng.randint(5, 40, size=(batch, seq)).astype(np.int32),
              records.SEGMENT_IDS: np.zeros([batch, seq], np.int32),
              records.INPUT_LEN: np.full([batch], seq, np.int32),
              ner_features.LABEL_IDS: rng.randint(0, len(TAGS), size=(batch, seq)).astype(
                  np.int32),
              ner_features.LABEL_MASK: (rng.rand(batch, seq) < 0.6).astype(np.int32)}
  labelled = np.array([1, 0, 1, 1, 0], np.int32)
  config = mt.tiny_config(vocab_size=toy["config"].vocab_size, hidden_size=16,
                          num_hidden_layers=1, num_attention_heads=2, intermediate_size=32,
                          max_position_embeddings=16)
  with tf.Graph().as_default():
    with tf.variable_scope("m"):
      tensors = {name: tf.constant(value) for name, value in features.items()}
      mixed = dict(tensors, **{ner_features.LABEL_MASK: losses.labelled_positions(
          tensors[ner_features.LABEL_MASK], tf.constant(labelled))})
      mixed_loss = ner_model.create_model(config, False, mixed, len(TAGS), use_crf)[0]
    with tf.variable_scope("m", reuse=True):
      kept = {name: tf.constant(value[labelled == 1]) for name, value in features.items()}
      kept_loss = ner_model.create_model(config, False, kept, len(TAGS), use_crf)[0]
      with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        if use_crf:  # transitions away from zero: the chains' scores depend on them
          transitions = [v for v in tf.global_variables() if "transitions" in v.name][0]
          sess.run(transitions.assign(rng.normal(size=(len(TAGS), len(TAGS)))))
        got, expected = sess.run([mixed_loss, kept_loss])
  np.testing.assert_allclose(got, expected, rtol=1e-5)
  assert expected > 0


def _train_teacher(toy, steps=16):
  values = ner_flags.define_flags(flags.FlagValues())
  values(["run_ner", "--data_dir=" + toy["data"], "--vocab_file=" + toy["vocab"],
          "--bert_config_file=" + toy["config_file"], "--output_dir=" + toy["teacher"],
          "--use_crf=true", "--do_train", "--num_train_steps=%d" % steps] + COMMON[1:])
  ner_run.run(ner_flags.settings_of(values), distributed.init(False))


@pytest.mark.slow  # a teacher, a distillation, its resumed copy
def test_a_resumed_weighted_tagger_distillation_equals_an_uninterrupted_one(toy):
  _train_teacher(toy)
  common = ("--student_layers=1", "--alpha=0.6", "--num_train_steps=8",
            "--unlabeled_weight=0.5")
  plan = orchestration.preflight(_distill_settings(toy, "--do_eval", *common),
                                 distributed.init(False))
  rows = len(plan.train_arrays[distill_model.LABELLED])
  result = orchestration.run(plan, distributed.init(False))
  assert "eval_micro_f1" in result
  with np.load(os.path.join(toy["out"], soft_targets.TEACHER_FILE)) as stored:
    # the distinct windows (the texts' too), once each, not the order's repeats
    assert stored["logits"].shape == (len(plan.mixed.rows[distill_model.LABELLED]), 16,
                                      len(TAGS)) and len(stored["logits"]) < rows
  check_distillation_resumes_exactly(
      toy["out"], str(toy["tmp"] / "resumed"),
      lambda *flags: _distill_settings(toy, *common, *flags), "--unlabeled_weight=0.25")
