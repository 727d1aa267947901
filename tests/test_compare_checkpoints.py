# coding=utf-8
"""The fine-tuning yardstick (tools/compare_checkpoints.py): a tiny task x 2 seeds end to end
(cells fine-tuned by run_classifier, test figures recomputed from test_results.tsv, resumed runs
skip finished cells), refusals before any training, the learning-rate grid chosen on dev."""
import csv
import json
import os
import random
import re

import numpy as np
import pytest

from helpers.finetune_toys import CLASSIFY_FILLER
from helpers.finetune_toys import KEY
from helpers.finetune_toys import ner_sentences
from helpers.finetune_toys import toy_rows
from helpers.finetune_toys import write_chars
from helpers.google_checkpoints import write_google_checkpoint
from helpers import modeling_toys as mt
from helpers import squad_files
from helpers import tokenizer_vocab
from bert_fin.cli import compare_checkpoints as cli
from bert_fin.yardstick import grid
from bert_fin.yardstick import report as yardstick_report
from bert_fin.yardstick import task_kinds


def _write_task(directory, rows_per_split=(64, 24, 16)):
  rng = random.Random(11)
  directory.mkdir(parents=True)
  for split, count in zip(("train", "dev", "test"), rows_per_split):
    rows = toy_rows(rng, count)
    (directory / ("%s.jsonl" % split)).write_text(
        "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows), encoding="utf-8")
  return str(directory)


@pytest.fixture
def setup(tmp_path):
  config = mt.tiny_config(vocab_size=len(tokenizer_vocab.vocab_tokens()), hidden_size=16,
                          num_hidden_layers=1, num_attention_heads=2, intermediate_size=32,
                          max_position_embeddings=16)
  config_file = tmp_path / "bert_config.json"
  config_file.write_text(config.to_json_string())
  ckpt = str(tmp_path / "pre" / "model.ckpt")
  write_google_checkpoint(ckpt, mt.google_variable_shapes(config), np.random.RandomState(2))
  return dict(config=config, config_file=str(config_file), ckpt=ckpt,
              vocab=tokenizer_vocab.write_vocab(tmp_path), task=_write_task(tmp_path / "toy"),
              out=str(tmp_path / "cmp"))


def _argv(setup, *extra):
  return ["--output_dir=" + setup["out"], "--checkpoint=pre=" + setup["ckpt"],
          "--bert_config_file=" + setup["config_file"], "--vocab_file=" + setup["vocab"],
          "--task=toy=" + setup["task"], "--seeds=1,2", "--learning_rates=1e-3",
          "--num_train_epochs=2", "--max_seq_length=16", "--train_batch_size=16",
          "--no_progress"] + list(extra)


@pytest.mark.slow  # four fine-tuning programs, then a rerun
def test_two_seeds_end_to_end_then_resume_skips_finished_cells(setup, capsys):
  assert cli.main(_argv(setup, "--no_random_init")) == 0
  cells = sorted(os.path.join(root, name) for root, _, names in os.walk(setup["out"])
                 for name in names if name == grid.CELL_FILE)
  assert len(cells) == 2
  test_rows = [json.loads(line) for line in open(os.path.join(setup["task"], "test.jsonl"))]
  accuracies = []
  for path in cells:
    directory = os.path.dirname(path)
    record = json.load(open(path))
    assert not [n for n in os.listdir(directory) if n.startswith("model.ckpt")]  # figures only
    labels = open(os.path.join(directory, "labels.txt")).read().split()
    predicted = np.loadtxt(os.path.join(directory, "test_results.tsv")).argmax(axis=1)
    expected = np.mean([labels[p] == row["label"] for p, row in zip(predicted, test_rows)])
    assert record["results"]["test"]["accuracy"] == pytest.approx(expected)
    assert "--init_checkpoint=" + os.path.abspath(setup["ckpt"]) in record["argv"]
    log = open(os.path.join(directory, grid.LOG_FILE), encoding="utf-8").read()
    assert re.search(r"^step 1: loss = .*, learning_rate = ", log, re.MULTILINE)  # step lines
    accuracies.append(record["results"]["test"]["accuracy"])
  with open(os.path.join(setup["out"], yardstick_report.CSV_FILE)) as f:
    (row,) = list(csv.DictReader(f))
  assert row["checkpoint"] == "pre" and row["seeds"] == "2" and row["selected"] == "1"
  assert float(row["test_accuracy_mean"]) == pytest.approx(np.mean(accuracies), abs=1e-4)
  assert float(row["test_accuracy_std"]) == pytest.approx(np.std(accuracies, ddof=1), abs=1e-4)
  markdown = open(os.path.join(setup["out"], yardstick_report.MARKDOWN_FILE)).read()
  assert "| pre |" in markdown
  assert re.search(r"- pre: .*model\.ckpt restores (\d+) of \1 encoder variables", markdown)
  with open(os.path.join(setup["out"], yardstick_report.PLOT_FILE), "rb") as f:
    assert f.read(8) == b"\x89PNG\r\n\x1a\n"
  stamps = [os.path.getmtime(path) for path in cells]
  capsys.readouterr()
  assert cli.main(_argv(setup, "--no_random_init")) == 0  # nothing left to train
  assert "2 of 2 cells already finished" in capsys.readouterr().out
  assert [os.path.getmtime(path) for path in cells] == stamps
  assert cli.main(_argv(setup, "--no_random_init", "--num_train_epochs=3")) == 2
  assert "finished with other settings" in capsys.readouterr().err


def _refused(setup, capsys, *extra):
  assert cli.main(_argv(setup, *extra)) == 2
  err = capsys.readouterr().err.strip().splitlines()
  assert len(err) == 1 and "Traceback" not in err[0]
  assert not os.path.exists(setup["out"])  # checked before anything is written
  return err[0]


def test_refusals_before_any_training(setup, capsys, tmp_path):
  long_vocab = tmp_path / "long_vocab.txt"
  long_vocab.write_text("\n".join(tokenizer_vocab.vocab_tokens() + ["x1", "x2", "x3"]) + "\n")
  assert "has %d tokens, more than the config's vocab_size %d" % (
      len(tokenizer_vocab.vocab_tokens()) + 3, setup["config"].vocab_size) in _refused(
          setup, capsys, "--checkpoint=long=%s,vocab=%s" % (setup["ckpt"], long_vocab))
  wide = tmp_path / "wide.json"
  wide.write_text(mt.tiny_config(vocab_size=setup["config"].vocab_size, hidden_size=32,
                                 num_hidden_layers=1, max_position_embeddings=16).to_json_string())
  assert "variable(s) of another shape" in _refused(
      setup, capsys, "--checkpoint=wide=%s,config=%s" % (setup["ckpt"], wide))
  kana = tmp_path / "kana"
  kana.mkdir()
  for split in ("train", "dev", "test"):
    (kana / ("%s.jsonl" % split)).write_text(
        '{"text": "あいうえお", "label": "a"}\n{"text": "かきくけこ", "label": "b"}\n')
  assert "[UNK]" in _refused(setup, capsys, "--task=kana=%s" % kana)
  assert "no such file" in _refused(setup, capsys, "--task=missing=%s" % tmp_path)
  assert "used twice" in _refused(setup, capsys, "--checkpoint=pre=none")


def test_a_config_padded_past_the_vocab_is_accepted_and_said_once(setup, tmp_path):
  # vocab_size > the vocab's tokens (NVIDIA pads to a multiple of 8): rows no token uses.
  short_vocab = tmp_path / "short_vocab.txt"
  short_vocab.write_text("\n".join(tokenizer_vocab.vocab_tokens()[:-3]) + "\n")
  args = cli.build_parser().parse_args(_argv(setup, "--checkpoint=short=%s,vocab=%s" % (
      setup["ckpt"], short_vocab)))
  plan = grid.prepare(cli.checkpoints_from(args), cli.tasks_from(args),
                           cli.settings_from(args))
  size = setup["config"].vocab_size
  padded = [line for line in plan.restored if "are padding that no token uses" in line]
  assert len(padded) == 1 and padded[0].startswith("short: ")
  assert "vocab %s has %d tokens, the config's vocab_size is %d: embedding rows %d..%d" % (
      short_vocab, size - 3, size, size - 3, size - 1) in padded[0]


def test_optimizer_reaches_every_cell_and_the_default_keeps_old_cells_valid(setup):
  args = cli.build_parser().parse_args(_argv(setup, "--no_random_init", "--optimizer=adamw"))
  plan = grid.prepare(cli.checkpoints_from(args), cli.tasks_from(args),
                           cli.settings_from(args))
  assert all("--optimizer=adamw" in cell.argv for cell in plan.cells) and plan.cells
  assert "optimizer adamw" in yardstick_report.markdown_text(plan, [])
  args = cli.build_parser().parse_args(_argv(setup, "--no_random_init"))
  plan = grid.prepare(cli.checkpoints_from(args), cli.tasks_from(args),
                           cli.settings_from(args))
  assert not any(flag.startswith("--optimizer") for cell in plan.cells for flag in cell.argv)


def test_recipes_reach_every_cell_and_are_checked_against_each_config(setup, capsys):
  args = cli.build_parser().parse_args(_argv(setup, "--layerwise_lr_decay=0.9",
                                             "--reinit_top_layers=1"))
  plan = grid.prepare(cli.checkpoints_from(args), cli.tasks_from(args), cli.settings_from(args))
  assert plan.cells and all("--layerwise_lr_decay=0.9" in cell.argv
                            and "--reinit_top_layers=1" in cell.argv for cell in plan.cells)
  assert ("optimizer adam, layer-wise lr decay 0.9, top 1 layer(s) re-initialised,"
          in yardstick_report.markdown_text(plan, []))
  args = cli.build_parser().parse_args(_argv(setup, "--no_random_init"))
  plan = grid.prepare(cli.checkpoints_from(args), cli.tasks_from(args), cli.settings_from(args))
  assert not any("_top_layers" in flag or "lr_decay" in flag
                 for cell in plan.cells for flag in cell.argv)  # old cells keep their argv
  layers = setup["config"].num_hidden_layers
  assert "--reinit_top_layers=%d, but %s has num_hidden_layers=%d" % (
      layers + 1, setup["config_file"], layers) in _refused(
          setup, capsys, "--reinit_top_layers=%d" % (layers + 1))
  assert "--layerwise_lr_decay must be in (0, 1]" in _refused(setup, capsys,
                                                              "--layerwise_lr_decay=0")


def test_random_init_row_takes_the_first_checkpoints_config_and_vocab(setup):
  args = cli.build_parser().parse_args(
      ["--output_dir=x", "--checkpoint=pre=%s,config=%s,vocab=%s,lower=false" % (
          setup["ckpt"], setup["config_file"], setup["vocab"])])
  pre, floor = cli.checkpoints_from(args)
  assert floor == grid.Checkpoint(grid.RANDOM_INIT, None, setup["config_file"],
                                       setup["vocab"], False)
  assert pre.do_lower_case is False
  args = cli.build_parser().parse_args(["--output_dir=x", "--checkpoint=a=%s" % setup["ckpt"],
                                        "--no_random_init"])
  with pytest.raises(ValueError, match="no config"):
    cli.checkpoints_from(args)


def _fake_plan(learning_rates):
  task = task_kinds.TaskSpec("t", "data", "jsonl", "classification")
  checkpoints = [grid.Checkpoint(name, None, "c", "v", True)
                 for name in ("ours", grid.RANDOM_INIT)]
  settings = grid.Settings("out", [1, 2, 3], learning_rates, 3, 128, 32, 64, 0.1, "first",
                                0.1, False)
  data = {"t": task_kinds.TaskData([], ["a", "b"], [0, 1], {"train": 10, "dev": 5, "test": 5})}
  unk = {("t", c.name): 0.01 for c in checkpoints}
  return grid.Plan(checkpoints, [task], settings, data, unk, ["ours: ...", "floor"], [])


def _record(dev, test, collapsed=False):
  return {"results": {"dev": {"accuracy": dev, "macro_f1": dev},
                      "test": {"accuracy": test, "macro_f1": test}, "collapsed": collapsed}}


def test_grid_is_chosen_on_dev_and_reported_on_test():
  plan = _fake_plan([1e-4, 3e-4])
  records = {
      ("t", "ours", 1e-4): [_record(0.70, 0.90), _record(0.72, 0.90), _record(0.71, 0.90)],
      ("t", "ours", 3e-4): [_record(0.80, 0.60), _record(0.82, 0.62), _record(0.78, 0.58)],
      ("t", grid.RANDOM_INIT, 1e-4): [_record(0.5, 0.5, True)] * 3,
      ("t", grid.RANDOM_INIT, 3e-4): [_record(0.6, 0.55)] * 3,
  }
  rows = yardstick_report.summarize(plan, records)
  chosen = {row.checkpoint: row for row in rows if row.selected}
  assert chosen["ours"].learning_rate == 3e-4  # best dev, though its test is worse
  assert chosen["ours"].figures["test"]["accuracy"] == pytest.approx((0.60, 0.02))
  assert chosen[grid.RANDOM_INIT].learning_rate == 3e-4
  assert [row.collapsed for row in rows if row.checkpoint == grid.RANDOM_INIT] == [3, 0]
  text = yardstick_report.markdown_text(plan, rows)
  assert "| ours | 1.0% | 0.0003 | 3 | 0.800 ± 0.020 |" in text
  assert "+0.050 |" in text  # test accuracy 0.60 vs the floor's 0.55
  assert "chosen on dev" in text
  table = list(csv.DictReader(yardstick_report.csv_text(plan, rows).splitlines()))
  assert [(r["checkpoint"], r["learning_rate"], r["selected"]) for r in table] == [
      ("ours", "0.0001", "0"), ("ours", "0.0003", "1"), (grid.RANDOM_INIT, "0.0001", "0"),
      (grid.RANDOM_INIT, "0.0003", "1")]


@pytest.mark.slow  # two run_ner fine-tunings
def test_an_ner_task_runs_through_run_ner_and_reports_entity_f1(setup, tmp_path):
  rng = random.Random(5)
  data = tmp_path / "ner"
  data.mkdir()
  for split, count in (("train", 64), ("dev", 16), ("test", 12)):
    write_chars(data / (split + ".txt"), ner_sentences(rng, count, long_every=6))
  argv = [a for a in _argv(setup, "--no_random_init", "--seeds=1") if not a.startswith("--task=")]
  assert cli.main(argv + ["--task=ents=%s,kind=ner" % data]) == 0
  (cell,) = [os.path.join(root, name) for root, _, names in os.walk(setup["out"])
             for name in names if name == grid.CELL_FILE]
  record = json.load(open(cell))
  assert "--pooling=first" not in record["argv"] and "--task_name=auto" in record["argv"]
  assert set(record["results"]["dev"]) == {"micro_f1", "macro_f1"}
  test = open(os.path.join(os.path.dirname(cell), "test_results.txt")).read()
  assert "eval_micro_f1 = %r\n" % record["results"]["test"]["micro_f1"] in test
  with open(os.path.join(setup["out"], yardstick_report.CSV_FILE)) as f:
    (row,) = list(csv.DictReader(f))
  assert row["kind"] == "ner" and "test_micro_f1_mean" in row


@pytest.mark.slow
def test_a_qa_task_runs_through_run_squad_in_one_table_with_a_classification_task(tmp_path):
  """kind qa: train.json / dev.json / test.json in SQuAD's schema; a cell trains and scores dev,
  then predicts and scores test with its fine-tuned model (test/); F1 and EM (CMRC 2018's for
  Chinese) beside the classification task's accuracy in one results.csv."""
  rng = random.Random(3)
  qa = tmp_path / "qa"
  qa.mkdir()
  paragraphs = {split: squad_files.cmrc_paragraphs(rng, n)
                for split, n in (("train", 24), ("dev", 6), ("test", 6))}
  for split, rows in paragraphs.items():
    squad_files.write_json(qa / (split + ".json"), squad_files.squad_json(rows))
  tokens = squad_files.cmrc_vocab_tokens([p for rows in paragraphs.values() for p in rows])
  tokens += sorted(set("".join(CLASSIFY_FILLER) + "".join(KEY.values())) - set(tokens))
  vocab = squad_files.write_vocab(tmp_path / "vocab.txt", tokens)
  config = mt.tiny_config(vocab_size=len(tokens), hidden_size=16, num_hidden_layers=1,
                          num_attention_heads=2, intermediate_size=32, max_position_embeddings=64)
  config_file = tmp_path / "bert_config.json"
  config_file.write_text(config.to_json_string())
  ckpt = str(tmp_path / "pre" / "model.ckpt")
  write_google_checkpoint(ckpt, mt.google_variable_shapes(config), np.random.RandomState(2))
  out = str(tmp_path / "cmp")
  assert cli.main(["--output_dir=" + out, "--checkpoint=pre=" + ckpt,
                   "--bert_config_file=" + str(config_file), "--vocab_file=" + vocab,
                   "--task=toy=" + _write_task(tmp_path / "toy"), "--task=rc=%s,kind=qa" % qa,
                   "--seeds=1", "--learning_rates=1e-3", "--num_train_epochs=1",
                   "--max_seq_length=48", "--train_batch_size=16", "--no_random_init",
                   "--no_progress"]) == 0
  cell = os.path.join(out, "cells", "rc", "pre", "lr0.001-seed1")
  record = json.load(open(os.path.join(cell, grid.CELL_FILE)))
  assert "--pooling=first" not in record["argv"] and "--eval_batch_size=64" not in record["argv"]
  assert "--max_query_length=12" in record["argv"] and "--doc_stride=16" in record["argv"]
  commands = open(os.path.join(cell, grid.COMMAND_FILE)).read().splitlines()
  assert len(commands) == 2 and "--init_checkpoint=" + cell in commands[1]
  for directory, split in ((cell, "dev"), (os.path.join(cell, "test"), "test")):
    results = open(os.path.join(directory, "eval_results.txt")).read()
    assert "eval_metric = cmrc\n" in results
    assert "eval_f1 = %r\n" % record["results"][split]["f1"] in results
    assert "eval_total = 18\n" in results
  with open(os.path.join(out, yardstick_report.CSV_FILE)) as f:
    rows = {row["task"]: row for row in csv.DictReader(f)}
  assert rows["rc"]["kind"] == "qa" and rows["rc"]["test_f1_mean"]
  assert rows["toy"]["kind"] == "classification" and rows["toy"]["test_accuracy_mean"]
  assert "F1" in open(os.path.join(out, yardstick_report.MARKDOWN_FILE)).read()


def test_the_cli_names_the_fix_for_a_valueless_option_and_a_v2_file_read_as_v11(setup, capsys,
                                                                                tmp_path):
  assert "option 'doc_stride' needs a value (doc_stride=VALUE)" in _refused(
      setup, capsys, "--task=long=%s,doc_stride" % setup["task"])
  qa = tmp_path / "qa"
  qa.mkdir()
  for split in ("train", "dev", "test"):
    squad_files.write_json(qa / (split + ".json"),
                           squad_files.squad_json(squad_files.ENGLISH_V2_PARAGRAPHS, "2.0"))
  assert "needs format=v2.0 (or auto) in its --task" in _refused(
      setup, capsys, "--task=rc=%s,kind=qa,format=v1.1" % qa)


def test_a_task_option_without_its_value_and_a_v2_file_under_format_v11_name_the_fix(tmp_path):
  with pytest.raises(ValueError) as refused:
    grid.parse_spec("rc=data,kind=qa,doc_stride", "task", ("format", "kind", "doc_stride"))
  assert str(refused.value) == ("--task 'rc=data,kind=qa,doc_stride': option 'doc_stride' needs "
                                "a value (doc_stride=VALUE)")
  assert grid.parse_spec("rc=data,doc_stride=8", "task", ("doc_stride",)) == (
      "rc", "data", {"doc_stride": "8"})
  qa = tmp_path / "qa"
  qa.mkdir()
  for split in ("train", "dev", "test"):
    squad_files.write_json(qa / (split + ".json"),
                           squad_files.squad_json(squad_files.ENGLISH_V2_PARAGRAPHS, "2.0"))
  kind = task_kinds.get("qa")
  with pytest.raises(ValueError) as refused:
    kind.check(task_kinds.TaskSpec("rc", str(qa), "v1.1", "qa", ()))
  message = str(refused.value)
  assert "is_impossible is true: a SQuAD v2.0 file needs format=v2.0 (or auto) in its --task" in (
      message) and "--version_2_with_negative" not in message
  assert kind.check(task_kinds.TaskSpec("rc", str(qa), "v2.0", "qa", ())).labels == "v2.0"
