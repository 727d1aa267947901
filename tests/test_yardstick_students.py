# coding=utf-8
"""A distilled student is a yardstick row like any checkpoint: its own bert_config.json read from
its directory (not the teacher's --bert_config_file), its encoder judged from a copy without its
classifier head (every row's head starts fresh), and (slow) its cells fine-tuned and reported
beside the teacher's."""
import csv
import json
import os
import random

from absl import flags
import numpy as np
import pytest

from helpers.finetune_toys import toy_rows
from helpers.finetune_toys import write_jsonl
from helpers import distill_toys
from helpers import tokenizer_vocab
from bert_fin.cli import compare_checkpoints as cli
from bert_fin.finetune.distill import flags as distill_flags
from bert_fin.finetune.distill import orchestration
from bert_fin.modeling import checkpoint as checkpoint_lib
from bert_fin.training import distributed
from bert_fin.yardstick import encoders
from bert_fin.yardstick import grid
from bert_fin.yardstick import report as yardstick_report


@pytest.fixture
def distilled(tmp_path):
  """A teacher directory (3 layers, a trained-looking head, labels.txt) and its 2-layer student
  trained by run_distill for 2 steps (alpha 0: no teacher pass, the quickest student directory)."""
  rng = random.Random(5)
  data = tmp_path / "data"
  data.mkdir()
  for split, count in (("train", 32), ("dev", 16), ("test", 16)):
    write_jsonl(data / ("%s.jsonl" % split), toy_rows(rng, count))
  config_file, teacher = distill_toys.write_teacher(tmp_path, num_hidden_layers=3)
  vocab = tokenizer_vocab.write_vocab(tmp_path)
  student = str(tmp_path / "student")
  values = distill_flags.define_flags(flags.FlagValues())
  values(["run_distill", "--task_name=jsonl", "--data_dir=" + str(data),
          "--bert_config_file=" + config_file, "--vocab_file=" + vocab,
          "--teacher_dir=" + teacher, "--output_dir=" + student, "--student_layers=2",
          "--alpha=0", "--do_train", "--num_train_steps=2", "--max_seq_length=16",
          "--train_batch_size=16", "--seed=1", "--save_checkpoints_steps=2",
          "--intra_op_parallelism_threads=1", "--inter_op_parallelism_threads=1"])
  dist = distributed.init(False)
  orchestration.run(orchestration.preflight(distill_flags.settings_of(values), dist), dist)
  return dict(data=str(data), config_file=config_file, teacher=teacher,
              student=student, vocab=vocab, out=str(tmp_path / "cmp"))


def _argv(distilled, *extra):
  return ["--output_dir=" + distilled["out"], "--checkpoint=student=" + distilled["student"],
          "--checkpoint=teacher=" + distilled["teacher"],
          "--bert_config_file=" + distilled["config_file"], "--vocab_file=" + distilled["vocab"],
          "--task=toy=" + distilled["data"], "--seeds=1", "--learning_rates=1e-3",
          "--num_train_epochs=1", "--max_seq_length=16", "--train_batch_size=16",
          "--no_random_init", "--no_progress"] + list(extra)


def test_a_student_directory_is_a_row_with_its_own_config_and_its_encoder_judged(distilled):
  args = cli.build_parser().parse_args(_argv(distilled))
  plan = grid.prepare(cli.checkpoints_from(args), cli.tasks_from(args), cli.settings_from(args))
  student, teacher = plan.checkpoints
  assert student.bert_config_file == os.path.join(distilled["student"], "bert_config.json")
  assert teacher.bert_config_file == distilled["config_file"]  # none beside it: the flag's
  student_line, teacher_line = plan.restored
  # 2 layers x 16 variables + 5 embedding + 2 pooler variables: the student's encoder, whole
  assert " restores 39 of 39 encoder variables" in student_line
  assert " restores 55 of 55 encoder variables" in teacher_line
  assert "its head (output_bias, output_weights) is left out" in student_line
  assert not os.path.exists(distilled["out"])  # checked and planned: nothing written
  resolved = checkpoint_lib.resolve_checkpoint(distilled["student"])
  copy = encoders.encoder_copy(distilled["out"], "student", resolved)
  assert plan.encoder_copies[copy] == resolved
  (student_cell,) = [cell for cell in plan.cells if cell.checkpoint.name == "student"]
  assert "--init_checkpoint=" + os.path.abspath(copy) in student_cell.argv
  assert "--bert_config_file=" + os.path.abspath(student.bert_config_file) in student_cell.argv
  assert encoders.write_copies(plan.encoder_copies) == sorted(plan.encoder_copies)
  assert encoders.write_copies(plan.encoder_copies) == []  # written once
  trained = checkpoint_lib.model_tensors(resolved)
  copied = checkpoint_lib.model_tensors(copy)
  assert sorted(copied) == sorted(name for name in trained if name.startswith("bert/"))
  assert "output_weights" in trained and "bert/encoder/layer_1/output/dense/kernel" in copied
  for name, value in copied.items():
    np.testing.assert_array_equal(value, trained[name], err_msg=name)


@pytest.mark.slow  # two fine-tuning programs
def test_a_student_and_its_teacher_are_judged_in_one_table(distilled):
  assert cli.main(_argv(distilled)) == 0
  with open(os.path.join(distilled["out"], yardstick_report.CSV_FILE)) as f:
    rows = {row["checkpoint"]: row for row in csv.DictReader(f)}
  assert sorted(rows) == ["student", "teacher"]
  test_rows = [json.loads(line) for line in open(os.path.join(distilled["data"], "test.jsonl"))]
  cell = os.path.join(distilled["out"], "cells", "toy", "student", "lr0.001-seed1")
  labels = open(os.path.join(cell, "labels.txt")).read().split()
  predicted = np.loadtxt(os.path.join(cell, "test_results.tsv")).argmax(axis=1)
  expected = np.mean([labels[p] == row["label"] for p, row in zip(predicted, test_rows)])
  assert float(rows["student"]["test_accuracy_mean"]) == pytest.approx(expected, abs=1e-4)
  log = open(os.path.join(cell, grid.LOG_FILE), encoding="utf-8").read()
  assert "newly initialised: output_bias, output_weights" in log  # the head starts fresh
  record = json.load(open(os.path.join(cell, grid.CELL_FILE)))
  assert "--bert_config_file=" + os.path.join(distilled["student"], "bert_config.json") in (
      record["argv"])
