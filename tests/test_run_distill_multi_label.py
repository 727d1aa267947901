# coding=utf-8
"""run_distill of a run_classifier --multi_label teacher: the binary soft-target loss against its
formula, the student multi-label as its teacher (the flag refused when it says otherwise, before
anything is written), texts without label sets mixed in; the vocab.txt a student directory holds,
which the exports and the yardstick read without flags; and (slow) with alpha = 0 exactly
run_classifier --multi_label's weights, the student an ordinary multi-label directory (its own
dev thresholds, --do_predict, the serving path, the transformers export)."""
import argparse
import json
import os
import random

import numpy as np
import pytest
from safetensors import numpy as safetensors_numpy
import tensorflow as tf2
import tensorflow.compat.v1 as tf

from helpers.distill_toys import classify_settings
from helpers.distill_toys import distill_settings
from helpers.distill_toys import fake_teacher
from helpers.distill_toys import toy_task
from helpers.finetune_toys import assert_same_weights
from helpers.finetune_toys import label_set_rows
from helpers.finetune_toys import toy_rows
from helpers.finetune_toys import write_jsonl
from bert_fin import cli
from bert_fin.cli import compare_checkpoints
from bert_fin.cli import export_hf as export_hf_cli
from bert_fin.cli import export_serving as export_serving_cli
from bert_fin.finetune import finetuned
from bert_fin.finetune.classify import multi_label
from bert_fin.finetune.classify import orchestration as classify
from bert_fin.finetune.distill import losses
from bert_fin.finetune.distill import model as distill_model
from bert_fin.finetune.distill import orchestration
from bert_fin.finetune.distill import student
from bert_fin.serving import classifier as serving_classifier
from bert_fin.serving import export
from bert_fin.serving import graph_tokenizer
from bert_fin.training import distributed

@pytest.fixture
def toy(tmp_path):
  return toy_task(tmp_path, label_set_rows)


def _fake_teacher(toy, multi=True, markers=0):
  """The toy teacher with classifier_config.json saying the head's kind."""
  fake_teacher(toy, head_kind={"multi_label": multi, "entity_markers": markers})


def test_binary_soft_target_loss_is_t_squared_mean_bernoulli_kl():
  rng = np.random.RandomState(0)
  student_logits = rng.normal(size=(4, 3)).astype(np.float32) * 3
  teacher_logits = rng.normal(size=(4, 3)).astype(np.float32) * 3
  temperature, alpha, gold = 2.5, 0.4, 0.75
  p = 1 / (1 + np.exp(-teacher_logits / temperature))
  q = 1 / (1 + np.exp(-student_logits / temperature))
  kl = p * np.log(p / q) + (1 - p) * np.log((1 - p) / (1 - q))  # [B, L]
  expected = alpha * temperature ** 2 * kl.mean() + (1 - alpha) * gold
  with tf.Graph().as_default(), tf.Session() as sess:
    mixed = losses.distillation_loss(tf.constant(gold), tf.constant(student_logits),
                                     tf.constant(teacher_logits), temperature, alpha,
                                     multi_label=True)
    same = losses.binary_soft_target_loss(tf.constant(teacher_logits),
                                          tf.constant(teacher_logits), temperature)
    value, zero = sess.run([mixed, same])
  np.testing.assert_allclose(value, expected, rtol=1e-5)
  assert abs(zero) < 1e-6


def test_a_multi_label_teacher_gives_a_multi_label_student_with_unlabeled_texts(toy):
  _fake_teacher(toy)
  texts = toy["tmp"] / "unlabeled.txt"
  texts.write_text("".join(row["text"] + "\n" for row in toy_rows(random.Random(2), 40)),
                   encoding="utf-8")
  plan = orchestration.preflight(distill_settings(toy, "--unlabeled_file=" + str(texts)),
                                 distributed.init(False))
  assert plan.teacher.multi_label and plan.settings.task.multi_label
  labelled = plan.train_arrays[distill_model.LABELLED]
  label_ids = plan.train_arrays["label_ids"]
  assert label_ids.shape == (136, 2) and labelled.sum() == 96
  assert not label_ids[labelled == 0].any()  # texts: no label set, the gold term skips them
  assert (label_ids[labelled == 1].sum(axis=1) >= 1).all()  # every example has a label set
  assert not os.path.exists(toy["out"])


@pytest.mark.parametrize("teacher, flags_given, message", [
    (dict(multi=True), ("--multi_label=false",),
     "--multi_label=False: the teacher in .* is a multi-label"),
    (dict(multi=False), ("--multi_label",),
     "--multi_label=True: the teacher in .* is a single-label"),
    (dict(markers=2), (), "fine-tuned with --entity_markers=2 .*: run_distill distils"),
])
def test_a_head_kind_other_than_the_teachers_is_refused_before_anything_is_written(
    toy, teacher, flags_given, message):
  _fake_teacher(toy, **teacher)
  with pytest.raises(ValueError, match=message):
    orchestration.preflight(distill_settings(toy, *flags_given), distributed.init(False))
  assert not os.path.exists(toy["out"])


def test_the_student_directory_holds_the_vocab_and_the_exports_find_it(toy, capsys):
  out = toy["out"]
  os.makedirs(out)
  student.write_files(out, toy["config"], toy["vocab"], None, None)
  with open(toy["vocab"], "rb") as f, open(os.path.join(out, "vocab.txt"), "rb") as g:
    assert f.read() == g.read()
  args = export_hf_cli.build_parser().parse_args(["--init_checkpoint", out, "--output_dir", "x"])
  cli.model_files(args, out, "--init_checkpoint")
  assert (args.bert_config_file, args.vocab_file) == (os.path.join(out, "bert_config.json"),
                                                      os.path.join(out, "vocab.txt"))
  os.remove(os.path.join(out, "vocab.txt"))
  hf_dir = toy["tmp"] / "hf"
  assert export_hf_cli.main(["--init_checkpoint", out, "--output_dir", str(hf_dir)]) == 2
  err = capsys.readouterr().err.strip()
  assert err.splitlines() == [err] and "--vocab_file not given and --init_checkpoint" in err
  assert not hf_dir.exists()
  served = toy["tmp"] / "served"
  assert export_serving_cli.main(["--finetuned_dir", out, "--export_dir", str(served)]) == 2
  err = capsys.readouterr().err.strip()
  assert err.splitlines() == [err] and "--vocab_file not given and --finetuned_dir" in err
  assert not served.exists()


@pytest.mark.slow  # a teacher, two short distillations, a run_classifier run, two exports
def test_alpha_zero_is_run_classifier_multi_label_and_the_student_is_an_ordinary_directory(toy):
  classify.run(classify_settings(
      toy, "--bert_config_file=" + toy["config_file"], "--output_dir=" + toy["teacher"],
      "--multi_label", "--do_train", "--do_eval", "--num_train_steps=24"),
      distributed.init(False))
  plan = orchestration.preflight(distill_settings(toy, "--student_layers=2", "--alpha=0",
                                                   "--num_train_steps=6"),
                                 distributed.init(False))
  assert plan.teacher.multi_label
  orchestration.run(plan, distributed.init(False))
  baseline = str(toy["tmp"] / "classifier")
  classify.run(classify_settings(
      toy, "--bert_config_file=" + os.path.join(toy["out"], "bert_config.json"),
      "--init_checkpoint=" + os.path.join(toy["out"], "student_init", "model.ckpt"),
      "--output_dir=" + baseline, "--multi_label", "--do_train", "--num_train_steps=6"),
      distributed.init(False))
  assert_same_weights(toy["out"], baseline, 6)
  # distilled with texts mixed in: the student's own dev thresholds, a multi-label directory
  texts = toy["tmp"] / "unlabeled.jsonl"
  write_jsonl(texts, [{"text": row["text"]} for row in toy_rows(random.Random(2), 40)])
  out = str(toy["tmp"] / "distilled")
  result = orchestration.run(orchestration.preflight(distill_settings(
      toy, "--output_dir=" + out, "--student_layers=1", "--alpha=0.6", "--num_train_steps=8",
      "--unlabeled_file=" + str(texts), "--do_eval"), distributed.init(False)),
                             distributed.init(False))
  assert "eval_micro_f1" in result and "eval_accuracy" not in result
  assert multi_label.read_thresholds(out).labels == ["down", "up"]
  assert finetuned.read_head(out) == {"multi_label": True, "entity_markers": 0}
  assert finetuned.read_text_settings(out) == {"max_seq_length": 16, "do_lower_case": True}
  classify.run(classify_settings(
      toy, "--bert_config_file=" + os.path.join(out, "bert_config.json"),
      "--vocab_file=" + os.path.join(out, "vocab.txt"), "--output_dir=" + out, "--multi_label",
      "--do_predict"), distributed.init(False))
  predicted = np.loadtxt(os.path.join(out, "test_results.tsv"), delimiter="\t", ndmin=2)
  assert predicted.shape == (11, 2)
  # the serving export reads it with no flag but the directory (config, vocab, text settings)
  args = cli.model_files(argparse.Namespace(bert_config_file=None, vocab_file=None), out,
                         "--finetuned_dir")
  plan = export.check(export.Request(out, args.bert_config_file, args.vocab_file, None, None,
                                     str(toy["tmp"] / "unused"), False, False))
  assert plan.spec.thresholds == tuple(multi_label.read_thresholds(out).thresholds)
  module = serving_classifier.ClassifierServing(
      plan.spec, plan.checkpoint, graph_tokenizer.GraphTokenizer(plan.vocab, True), plan.vocab)
  test_texts = [json.loads(line)["text"] for line in open(
      os.path.join(toy["data"], "test.jsonl"), encoding="utf-8")]
  answer = module.text(tf2.constant(test_texts))
  np.testing.assert_allclose(answer["probabilities"].numpy(), predicted, atol=1e-4)
  # ... the transformers export too (a multi-label problem), and the yardstick's row
  hf_dir = toy["tmp"] / "hf"
  assert export_hf_cli.main(["--init_checkpoint", out, "--output_dir", str(hf_dir)]) == 0
  with open(hf_dir / "config.json", encoding="utf-8") as f:
    assert json.load(f)["problem_type"] == "multi_label_classification"
  assert "classifier.weight" in safetensors_numpy.load_file(str(hf_dir / "model.safetensors"))
  row, = compare_checkpoints.checkpoints_from(compare_checkpoints.build_parser().parse_args(
      ["--checkpoint=student=" + out, "--output_dir=" + str(toy["tmp"] / "y"),
       "--no_random_init"]))
  assert (row.bert_config_file, row.vocab_file) == (os.path.join(out, "bert_config.json"),
                                                    os.path.join(out, "vocab.txt"))

