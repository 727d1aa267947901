# coding=utf-8
"""The yardstick's benchmark readers (format=cfleb | clue): the synthetic sample folders in each
layout converted, the seeded stratified half split, bad rows refused in one line naming file,
row and field (exit 2, nothing written), counted skips and missing entities."""
import csv
import json
import os
import shutil
import subprocess
import sys

import pytest

from bert_fin.cli import compare_checkpoints as cli
from bert_fin.finetune.classify import entity_markers
from bert_fin.yardstick import checks
from bert_fin.yardstick.benchmarks import convert
from bert_fin.yardstick.benchmarks import halves
from bert_fin.yardstick.benchmarks import rows as rows_lib

SAMPLES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "samples",
                       "benchmarks")


def test_make_benchmarks_rebuilds_the_shipped_folders_byte_for_byte(tmp_path):
  proc = subprocess.run([sys.executable, os.path.join(os.path.dirname(SAMPLES),
                                                      "make_benchmarks.py"),
                         "--output_dir", str(tmp_path)], capture_output=True, text=True,
                        check=False)
  assert proc.returncode == 0, proc.stderr[-2000:]
  shipped = sorted(os.path.relpath(os.path.join(root, name), SAMPLES)
                   for root, _, names in os.walk(SAMPLES) for name in names)
  assert len(shipped) == 16
  for relative in shipped:
    with open(os.path.join(SAMPLES, relative), "rb") as f:
      assert (tmp_path / relative).read_bytes() == f.read(), relative


def _lines(converted, name):
  return [json.loads(line) for line in converted.files[name].splitlines()]


@pytest.mark.parametrize("task, kind", [("finfe", "classification"), ("finnl", "multilabel"),
                                        ("finre", "relation"), ("finnsp", "entity"),
                                        ("finese", "qa")])
def test_cfleb_samples_convert_to_their_kind(task, kind):
  converted = convert.read(os.path.join(SAMPLES, "cfleb", task), "cfleb")
  assert converted.kind == kind
  assert "halves of eval_list.json (12 / 12 rows" in converted.notes[0]
  if kind == "qa":
    squad = json.loads(converted.files["dev.json"])
    question = squad["data"][0]["paragraphs"][0]
    answer = question["qas"][0]["answers"][0]
    assert question["context"][answer["answer_start"]:].startswith(answer["text"])
  else:
    assert sorted(converted.files) == ["dev.jsonl", "test.jsonl", "train.jsonl"]


def test_finnsp_one_example_per_candidate_and_missing_entities_counted():
  converted = convert.read(os.path.join(SAMPLES, "cfleb", "finnsp"), "cfleb")
  with open(os.path.join(SAMPLES, "cfleb", "finnsp", "train_list.json"), encoding="utf-8") as f:
    rows = json.load(f)
  train = _lines(converted, "train.jsonl")
  assert len(train) == sum(len(row[3].split(";")) for row in rows)
  first = rows[0]
  title_and_text = first[1] + "。" + first[2]
  assert train[0] == {"text": entity_markers.mark(title_and_text, [first[3].split(";")[0]])[0],
                      "text_b": None, "label": "1"}  # the title before the text
  assert converted.options == {"entity_markers": "1"}
  pair = convert.read(os.path.join(SAMPLES, "cfleb", "finnsp"), "cfleb", entity_form=convert.PAIR)
  assert _lines(pair, "train.jsonl")[0]["text_b"] == title_and_text and not pair.options
  missing = sum(1 for row in rows for name in row[3].split(";") if name not in row[2])
  assert missing > 0
  assert "train: %d of %d examples name an entity not found in their text" % (
      missing, len(train)) in converted.notes


def test_finese_nan_subject_is_a_counted_skip():
  converted = convert.read(os.path.join(SAMPLES, "cfleb", "finese"), "cfleb")
  rows = []
  for name in ("train_list.json", "eval_list.json"):
    with open(os.path.join(SAMPLES, "cfleb", "finese", name), encoding="utf-8") as f:
      rows += json.load(f)
  nan = sum(1 for row in rows if row[3] == "NaN")
  assert nan and "%d row(s) skipped: subject NaN" % nan in converted.notes
  questions = sum(len(json.loads(converted.files[n])["data"]) for n in converted.files)
  assert questions == len(rows) - nan


def test_clue_pairs_skip_no_gold_label_and_singles_use_label_desc():
  afqmc = convert.read(os.path.join(SAMPLES, "clue", "afqmc"), "clue")
  assert all(row["text_b"] and row["label"] in ("0", "1") for row in _lines(afqmc, "train.jsonl"))
  assert any("no gold label" in note for note in afqmc.notes)
  tnews = convert.read(os.path.join(SAMPLES, "clue", "tnews"), "clue")
  assert {row["label"] for row in _lines(tnews, "train.jsonl")} <= {
      "news_story", "news_finance", "news_edu"}


def test_half_split_is_stratified_reproducible_and_independent_of_other_strata():
  strata = ["a"] * 9 + ["b"] * 4 + ["c"] * 7
  dev, test = halves.split_in_half(strata)
  assert sorted(dev + test) == list(range(len(strata)))
  for stratum in "abc":
    in_dev = sum(1 for i in dev if strata[i] == stratum)
    assert abs(in_dev - (strata.count(stratum) - in_dev)) <= 1
  assert halves.split_in_half(strata) == (dev, test)
  only_b = halves.split_in_half(["b"] * 4)
  assert only_b[0] == [i - 9 for i in dev if strata[i] == "b"]


def _cfleb_folder(tmp_path, task, train_rows, eval_rows):
  folder = tmp_path / task
  folder.mkdir()
  (folder / "train_list.json").write_text(json.dumps(train_rows, ensure_ascii=False),
                                          encoding="utf-8")
  (folder / "eval_list.json").write_text(json.dumps(eval_rows, ensure_ascii=False),
                                         encoding="utf-8")
  return str(folder)


@pytest.mark.parametrize("task, bad_row, field", [
    ("finfe", ["文本", 5], "field label"),
    ("finfe", ["文本"], "1 fields, expected a list of 2"),
    ("finre", ["甲公司", "", "合作", "甲公司与乙公司合作"], "field tail: empty"),
    ("finnsp", ["1", "t", "甲公司下跌", "甲公司", "2", "甲公司"], "field negative"),
    ("finnsp", ["1", "t", "甲公司下跌", "甲公司", "1", "乙公司"], "field key_entities"),
])
def test_bad_row_is_one_line_naming_file_row_and_field(tmp_path, task, bad_row, field):
  good = {"finfe": ["好消息", 2], "finre": ["甲", "乙", "合作", "甲与乙合作"],
          "finnsp": ["1", "t", "甲公司上涨", "甲公司", "0", ""]}[task]
  folder = _cfleb_folder(tmp_path, task, [good, good, bad_row], [good, good])
  with pytest.raises(rows_lib.RowError) as raised:
    convert.read(folder, "cfleb")
  message = str(raised.value)
  assert "\n" not in message and "train_list.json: row 3: " in message and field in message


def test_folder_name_or_cfleb_task_chooses_the_task(tmp_path):
  folder = _cfleb_folder(tmp_path, "mydata", [["好", 2], ["差", 0]], [["好", 2], ["差", 0]])
  with pytest.raises(ValueError, match="cfleb_task=NAME"):
    convert.read(folder, "cfleb")
  assert convert.read(folder, "cfleb", "finfe").kind == "classification"


def test_materialize_keeps_the_same_and_refuses_other_data(tmp_path):
  converted = convert.read(os.path.join(SAMPLES, "cfleb", "finfe"), "cfleb")
  target = str(tmp_path / "out")
  convert.materialize(converted, target)
  before = os.stat(os.path.join(target, "train.jsonl")).st_mtime_ns
  convert.materialize(converted, target)
  assert os.stat(os.path.join(target, "train.jsonl")).st_mtime_ns == before
  other = converted._replace(files=dict(converted.files, **{"train.jsonl": "{}\n"}))
  with pytest.raises(ValueError, match="converted from other data"):
    convert.materialize(other, target)


def test_place_stages_a_first_run_and_reuses_the_output_dirs_folder(tmp_path):
  converted = convert.read(os.path.join(SAMPLES, "cfleb", "finfe"), "cfleb")
  out, staging = str(tmp_path / "cmp"), str(tmp_path / "staging")
  assert convert.place(converted, out, "fe", staging) == os.path.join(staging, "fe")
  assert not os.path.exists(out)
  final = convert.place(converted, out, "fe")  # the plan checked: into the output dir
  assert final == os.path.join(out, convert.CONVERTED_DIR, "fe")
  assert convert.place(converted, out, "fe", str(tmp_path / "other")) == final  # a rerun
  assert not os.path.exists(str(tmp_path / "other"))


def test_tasks_from_converts_and_the_kind_checks_the_folder(tmp_path):
  args = cli.build_parser().parse_args([
      "--output_dir=" + str(tmp_path / "cmp"),
      "--task=nl=%s,format=cfleb,cfleb_task=finnl" % os.path.join(SAMPLES, "cfleb", "finnl"),
      "--task=re=%s,format=cfleb" % os.path.join(SAMPLES, "cfleb", "finre")])
  specs = cli.tasks_from(args, str(tmp_path / "staging"))
  assert [(s.kind, s.data_format) for s in specs] == [("multilabel", "jsonl"),
                                                      ("relation", "jsonl")]
  assert specs[0].data_dir == str(tmp_path / "staging" / "nl") and specs[0].notes
  assert specs[1].options == (("entity_markers", "2"),)  # the cells read the markers
  data = checks.check_task(specs[0])
  assert data.sizes == {"train": 48, "dev": 12, "test": 12}
  assert len(data.test_labels[0]) == len(data.labels) and "公司" in data.labels
  assert not (tmp_path / "cmp").exists()


def test_a_bad_row_exits_2_before_anything_is_written(tmp_path, capsys):
  folder = tmp_path / "finfe"
  shutil.copytree(os.path.join(SAMPLES, "cfleb", "finfe"), folder)
  rows = json.loads((folder / "eval_list.json").read_text(encoding="utf-8"))
  rows[6] = [rows[6][0], "positive"]
  (folder / "eval_list.json").write_text(json.dumps(rows, ensure_ascii=False), encoding="utf-8")
  out = tmp_path / "cmp"
  status = cli.main(["--output_dir=" + str(out), "--task=fe=%s,format=cfleb" % folder,
                     "--bert_config_file=" + str(tmp_path / "c.json"),
                     "--vocab_file=" + str(tmp_path / "v.txt"), "--no_progress"])
  assert status == 2
  error = capsys.readouterr().err.strip()
  assert len(error.splitlines()) == 1
  assert "eval_list.json: row 7: field label" in error
  assert not out.exists()


def _benchmark_checkpoint(tmp_path):
  """A tiny random checkpoint whose vocab holds every character of the sample folders."""
  import numpy as np  # pylint: disable=import-outside-toplevel
  from helpers.google_checkpoints import write_google_checkpoint  # pylint: disable=g-import-not-at-top
  from helpers import modeling_toys as mt  # pylint: disable=g-import-not-at-top
  from bert_fin.tokenization import special_tokens  # pylint: disable=g-import-not-at-top
  chars = set()
  for root, _, names in os.walk(SAMPLES):
    for name in names:
      with open(os.path.join(root, name), encoding="utf-8") as f:
        chars |= {c.lower() for c in f.read() if not c.isspace()}
  tokens = list(dict.fromkeys(["[PAD]"] + ["[unused%d]" % i for i in range(1, 100)] + [
      special_tokens.UNK, special_tokens.CLS, special_tokens.SEP, special_tokens.MASK] +
                              sorted(chars)))
  folder = tmp_path / "pre"
  folder.mkdir()
  (folder / "vocab.txt").write_text("\n".join(tokens) + "\n", encoding="utf-8")
  config = mt.tiny_config(vocab_size=len(tokens), hidden_size=32, num_hidden_layers=1,
                          num_attention_heads=2, intermediate_size=64,
                          max_position_embeddings=64)
  (folder / "bert_config.json").write_text(config.to_json_string())
  write_google_checkpoint(str(folder / "model.ckpt"), mt.google_variable_shapes(config),
                          np.random.RandomState(2))
  return str(folder / "model.ckpt")


@pytest.mark.slow  # six fine-tuning programs (three tasks x the checkpoint and random init)
def test_cfleb_folders_end_to_end_with_bootstrap_intervals_then_resume(tmp_path, capsys):
  out = tmp_path / "cmp"
  argv = ["--output_dir=" + str(out), "--checkpoint=pre=" + _benchmark_checkpoint(tmp_path),
          "--seeds=1", "--learning_rates=1e-3", "--num_train_epochs=2", "--max_seq_length=64",
          "--train_batch_size=16", "--no_progress"] + [
              "--task=%s=%s,format=cfleb" % (task, os.path.join(SAMPLES, "cfleb", task))
              for task in ("finnl", "finnsp", "finese")]
  assert cli.main(argv) == 0
  text = (out / "results.md").read_text(encoding="utf-8")
  for task, metric in (("finnl", "micro-F1"), ("finnsp", "micro-F1"), ("finese", "F1")):
    section = text[text.index("## " + task):]
    assert "Dev and test are the two halves of eval_list.json" in section
    assert "Paired bootstrap (2000 resamples of the test examples, seeds pooled), test %s" % (
        metric) in section
    assert "| pre | random-init | " in section and "The data supports" in section
  assert "examples name an entity not found in their text" in text
  assert "row(s) skipped: subject NaN" in text
  with open(out / "results.csv", encoding="utf-8") as f:
    table = {(r["task"], r["checkpoint"]): r for r in csv.DictReader(f)}
  for task in ("finnl", "finnsp", "finese"):
    row = table[task, "pre"]
    assert float(row["test_vs_random_init_low"]) <= float(row["test_vs_random_init_delta"]) <= (
        float(row["test_vs_random_init_high"]))
  assert sorted(os.listdir(out / "benchmarks")) == ["finese", "finnl", "finnsp"]
  capsys.readouterr()
  assert cli.main(argv) == 0  # the converted folders are the same: every cell is skipped
  assert "6 of 6 cells already finished" in capsys.readouterr().out
