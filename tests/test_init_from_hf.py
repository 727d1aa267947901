# coding=utf-8
"""--init_checkpoint=<transformers folder> (run_pretraining, run_classifier, run_ner) and
compare_checkpoints' --checkpoint NAME=<folder>: imported on the fly into the output directory by
the importer (bert_fin/interop/init_checkpoint.py), reused when up to date, the import's config and
vocab used for flags left out, a config of another model refused, a bad folder one line + exit 2
with nothing written."""
import dataclasses
import errno
import json
import os
import shutil
import subprocess
import sys

from absl import flags
import pytest

import helpers
from helpers.finetune_toys import toy_rows
from helpers.finetune_toys import write_jsonl
from helpers import pretraining_runs as pt
from bert_fin.cli import compare_checkpoints
from bert_fin.finetune import model_inputs
from bert_fin.finetune.classify import flags as classify_flags
from bert_fin.finetune.classify import orchestration as classify_orchestration
from bert_fin.finetune.ner import flags as ner_flags
from bert_fin.finetune.ner import orchestration as ner_run
from bert_fin.interop import init_checkpoint as init_lib
from bert_fin.training import distributed

FIXTURES = os.path.join(helpers.FIXTURES, "hf_tiny")


def test_a_folder_is_imported_once_then_reused_and_a_checkpoint_path_is_left_alone(tmp_path):
  target = str(tmp_path / "out" / init_lib.IMPORT_DIR)
  first = init_lib.settle(init_lib.resolve(os.path.join(FIXTURES, "encoder"), target))
  assert first.checkpoint == os.path.join(target, "model.ckpt") and first.staged_in is None
  assert first.bert_config_file == os.path.join(target, "bert_config.json")
  assert "imported into" in first.lines[0] and "not filled (no masked LM" in " ".join(first.lines)
  stamp = os.stat(first.checkpoint + ".index").st_mtime_ns
  again = init_lib.resolve(os.path.join(FIXTURES, "encoder"), target)
  assert "using its import" in again.lines[0]
  assert os.stat(again.checkpoint + ".index").st_mtime_ns == stamp
  # another folder into the same place replaces the import
  other = init_lib.settle(init_lib.resolve(os.path.join(FIXTURES, "maskedlm"), target))
  assert "imported into" in other.lines[0]
  with open(other.bert_config_file, encoding="utf-8") as f:
    assert json.load(f)["hidden_act"] == "gelu"
  assert init_lib.resolve(other.checkpoint, target) is None  # a checkpoint prefix: as it is
  assert init_lib.resolve(target, target) is None  # a checkpoint directory too


def test_a_config_of_another_model_is_refused_naming_the_fields(tmp_path):
  google = tmp_path / "bert_config.json"
  google.write_text(json.dumps(dict(pt.tiny_data.TINY_CONFIG, hidden_act="gelu")))
  with pytest.raises(ValueError, match=r"hidden_act 'gelu' \(the folder's: 'gelu_erf'\); leave "
                                       r"the flag out"):
    init_lib.resolve(os.path.join(FIXTURES, "pretraining"), str(tmp_path / "imp"), str(google))
  same = tmp_path / "same.json"
  same.write_text(json.dumps(dict(pt.tiny_data.TINY_CONFIG, hidden_act="gelu_erf",
                                  hidden_dropout_prob=0.1)))  # dropout may differ
  resolved = init_lib.resolve(os.path.join(FIXTURES, "pretraining"), str(tmp_path / "imp"),
                              str(same))
  assert resolved.bert_config_file == str(same)
  settled = init_lib.settle(resolved)  # the given config kept, the import's files moved
  assert not os.path.exists(resolved.staged_in)
  assert settled.bert_config_file == str(same)
  assert settled.vocab_file == str(tmp_path / "imp" / "vocab.txt")
  assert settled.checkpoint == str(tmp_path / "imp" / "model.ckpt")


def test_run_pretraining_continues_from_a_transformers_folder(tmp_path):
  pt.tiny_data.write_records(str(tmp_path / "records"), num_files=1, per_file=8, seq_len=pt.SEQ,
                             max_predictions=pt.P, seed=2)
  argv = pt.tiny_argv(tmp_path, str(tmp_path / "records" / "*.tfrecord"), do_train=True,
                      num_train_steps=2, save_checkpoints_steps=2, bert_config_file=None,
                      init_checkpoint=os.path.join(FIXTURES, "pretraining"))
  proc = pt.run_cli(tmp_path, argv)
  assert proc.returncode == 0, proc.stderr[-3000:]
  assert "[run_pretraining] --init_checkpoint %s: a transformers folder, imported into" % (
      os.path.join(FIXTURES, "pretraining")) in proc.stdout
  assert "hidden_act gelu_erf" in proc.stdout
  imported = os.path.join(str(tmp_path / "out"), init_lib.IMPORT_DIR, "model.ckpt")
  # the start-up report: every variable of the model (encoder and both heads) restored
  assert "init_from_checkpoint %s: 46 of 46 variables mapped" % imported in proc.stderr
  assert "not in checkpoint" not in proc.stderr
  assert pt.step_lines(proc.stdout) == [1]
  assert os.path.isfile(str(tmp_path / "out" / "model.ckpt-2.index"))


def test_run_pretraining_refuses_a_bad_folder_with_one_line_and_writes_nothing(tmp_path):
  folder = tmp_path / "roberta"
  shutil.copytree(os.path.join(FIXTURES, "encoder"), str(folder))
  config = json.loads((folder / "config.json").read_text())
  (folder / "config.json").write_text(json.dumps(dict(config, model_type="roberta")))
  argv = pt.tiny_argv(tmp_path, os.path.join(FIXTURES, "*.none"), do_train=True,
                      bert_config_file=None, init_checkpoint=str(folder))
  proc = pt.run_cli(tmp_path, argv, timeout=300)
  assert proc.returncode == 2, proc.stderr[-2000:]
  errors = [line for line in proc.stderr.splitlines() if "error" in line]
  assert len(errors) == 1 and "model_type 'roberta' is not supported" in errors[0], errors
  assert "Traceback" not in proc.stderr
  assert not os.path.exists(str(tmp_path / "out"))


def _classifier_flags(tmp_path, *extra):
  data = tmp_path / "data"
  data.mkdir()
  import random  # pylint: disable=import-outside-toplevel
  rng = random.Random(3)
  write_jsonl(data / "train.jsonl", toy_rows(rng, 32))
  write_jsonl(data / "dev.jsonl", toy_rows(rng, 8))
  values = classify_flags.define_flags(flags.FlagValues())
  values(["run_classifier", "--task_name=jsonl", "--data_dir=" + str(data),
          "--output_dir=" + str(tmp_path / "out"), "--max_seq_length=16", "--do_train",
          "--do_eval"] + list(extra))
  return classify_flags.settings_of(values)


def test_run_classifier_takes_the_folder_and_its_config_and_vocab(tmp_path, capsys):
  values = _classifier_flags(tmp_path, "--init_checkpoint=" + os.path.join(FIXTURES, "encoder"))
  plan = classify_orchestration.preflight(values, distributed.init(False))  # no --bert_config_file

  target = os.path.join(str(tmp_path / "out"), init_lib.IMPORT_DIR)
  assert plan.settings.model.init_checkpoint == os.path.join(target, "model.ckpt")
  assert plan.settings.model.vocab_file == os.path.join(target, "vocab.txt")
  assert values.model.init_checkpoint == os.path.join(FIXTURES, "encoder")  # the given: frozen
  assert plan.bert_config.hidden_act == "gelu_erf"
  out = capsys.readouterr().out
  assert "[run_classifier] --init_checkpoint %s: a transformers folder" % os.path.join(
      FIXTURES, "encoder") in out
  assert "restores 39 of 41 variables; newly initialised: output_bias, output_weights" in out


class _OtherHost(object):
  """A non-chief rank whose chief imported into a directory this host does not see."""
  is_chief, rank, size = False, 1, 2

  def __init__(self, chief_decision):
    self.chief_decision = chief_decision

  def chief_decides(self, decide, error_type=ValueError, catch=()):
    """A non-chief rank: decide() runs on the chief only; this rank gets its answer (as JSON
    carries it)."""
    del decide, error_type, catch
    return json.loads(json.dumps(self.chief_decision))


def _staging_root(tmp_path, monkeypatch, name="tmp"):
  """A private TMPDIR tmp_path/name: where a new import is staged (and a rank's private one)."""
  root = tmp_path / name
  root.mkdir()
  monkeypatch.setenv("TMPDIR", str(root))
  import tempfile  # pylint: disable=import-outside-toplevel
  monkeypatch.setattr(tempfile, "tempdir", None)
  return root


def test_a_rank_that_does_not_see_the_chiefs_import_imports_its_own(tmp_path, monkeypatch):
  private = _staging_root(tmp_path, monkeypatch, "private")
  values = _classifier_flags(tmp_path, "--init_checkpoint=" + os.path.join(FIXTURES, "encoder"))
  chief = {"checkpoint": "/elsewhere/imported_init/model.ckpt", "lines": ["chief's"],
           "bert_config_file": "/elsewhere/imported_init/bert_config.json",
           "vocab_file": "/elsewhere/imported_init/vocab.txt", "do_lower_case": None,
           "staged_in": "/elsewhere/tmp/bert_fin_import_x",
           "import_dir": "/elsewhere/imported_init"}
  said = []
  model = model_inputs.resolve_init_folder(values, _OtherHost(chief), said.append).model
  assert model.init_checkpoint.startswith(str(private))
  assert os.path.isfile(model.init_checkpoint + ".index")
  assert os.path.isfile(model.bert_config_file) and os.path.isfile(model.vocab_file)
  assert said == [] and not os.path.exists(str(tmp_path / "out"))


@pytest.mark.parametrize("missing,words", [("model.safetensors", "has no model.safetensors"),
                                            ("config.json", "has no config.json")])
def test_run_classifier_refuses_a_bad_folder_before_writing(tmp_path, missing, words):
  folder = tmp_path / "nothing"
  shutil.copytree(os.path.join(FIXTURES, "encoder"), str(folder))
  (folder / missing).unlink()
  values = _classifier_flags(tmp_path, "--init_checkpoint=" + str(folder))
  with pytest.raises(ValueError, match=words):
    classify_orchestration.preflight(values, distributed.init(False))
  assert not os.path.exists(str(tmp_path / "out"))


def test_run_ner_takes_the_folder_through_the_same_code(tmp_path, capsys):
  data = tmp_path / "data"
  data.mkdir()
  (data / "train.txt").write_text("一 B-ORG\n丁 I-ORG\n七 O\n\n万 O\n丈 B-ORG\n\n",
                                  encoding="utf-8")
  (data / "dev.txt").write_text("一 B-ORG\n丁 I-ORG\n\n", encoding="utf-8")
  values = ner_flags.define_flags(flags.FlagValues())
  values(["run_ner", "--data_dir=" + str(data), "--output_dir=" + str(tmp_path / "out"),
          "--max_seq_length=16", "--train_batch_size=2", "--do_train", "--do_eval",
          "--init_checkpoint=" + os.path.join(FIXTURES, "maskedlm")])
  plan = ner_run.preflight(ner_flags.settings_of(values), distributed.init(False))
  assert plan.bert_config.hidden_act == "gelu"  # transformers' gelu_new: google's tanh GELU
  out = capsys.readouterr().out
  assert "[run_ner] --init_checkpoint %s: a transformers folder" % os.path.join(
      FIXTURES, "maskedlm") in out
  assert plan.settings.model.init_checkpoint == os.path.join(
      str(tmp_path / "out"), init_lib.IMPORT_DIR, "model.ckpt")


def test_compare_checkpoints_imports_a_folder_with_its_config_vocab_and_case(tmp_path):
  args = compare_checkpoints.build_parser().parse_args([
      "--output_dir", str(tmp_path / "cmp"), "--no_random_init",
      "--checkpoint", "base=" + os.path.join(FIXTURES, "maskedlm")])
  (checkpoint,) = compare_checkpoints.checkpoints_from(args)
  target = os.path.join(str(tmp_path / "cmp"), compare_checkpoints.IMPORT_DIR, "base")
  assert checkpoint.path == os.path.join(target, "model.ckpt")
  assert checkpoint.bert_config_file == os.path.join(target, "bert_config.json")
  assert checkpoint.vocab_file == os.path.join(target, "vocab.txt")


def test_a_new_import_is_staged_outside_the_target_until_settled_or_discarded(tmp_path,
                                                                              monkeypatch):
  root = _staging_root(tmp_path, monkeypatch)
  target = str(tmp_path / "out" / init_lib.IMPORT_DIR)
  staged = init_lib.resolve(os.path.join(FIXTURES, "encoder"), target)
  assert staged.staged_in.startswith(str(root)) and os.path.isfile(staged.checkpoint + ".index")
  assert not os.path.exists(str(tmp_path / "out"))  # nothing in the output dir yet
  init_lib.discard(staged)
  assert os.listdir(str(root)) == [] and not os.path.exists(str(tmp_path / "out"))
  # across filesystems the rename fails (EXDEV): copied beside the target, then renamed
  real_rename, calls = os.rename, []

  def rename_across_devices(source, destination):
    calls.append(source)
    if len(calls) == 1:
      raise OSError(errno.EXDEV, "Invalid cross-device link")
    real_rename(source, destination)
  staged = init_lib.resolve(os.path.join(FIXTURES, "encoder"), target)
  monkeypatch.setattr(os, "rename", rename_across_devices)
  settled = init_lib.settle(staged)
  monkeypatch.setattr(os, "rename", real_rename)
  assert len(calls) == 2 and settled.checkpoint == os.path.join(target, "model.ckpt")
  for name in ("model.ckpt.index", "bert_config.json", "vocab.txt", "import_hf.json"):
    assert os.path.isfile(os.path.join(target, name)), name
  assert os.listdir(str(root)) == [] and os.listdir(str(tmp_path / "out")) == [
      init_lib.IMPORT_DIR]  # no temp dir left beside it
  again = init_lib.resolve(os.path.join(FIXTURES, "encoder"), target)  # the settled one reused
  assert again.staged_in is None and "using its import" in again.lines[0]


def test_run_pretraining_refused_after_the_import_leaves_nothing_in_the_output_dir(
    tmp_path, monkeypatch):
  root = _staging_root(tmp_path, monkeypatch)
  pt.tiny_data.write_records(str(tmp_path / "records"), num_files=1, per_file=8, seq_len=pt.SEQ,
                             max_predictions=pt.P, seed=2)
  argv = pt.tiny_argv(tmp_path, str(tmp_path / "records" / "*.tfrecord"), do_train=True,
                      num_train_steps=2, bert_config_file=None,
                      init_checkpoint=os.path.join(FIXTURES, "pretraining"),
                      max_seq_length=pt.SEQ * 2)  # not the records': refused after the import
  proc = pt.run_cli(tmp_path, argv, timeout=300)
  assert proc.returncode == 2, proc.stderr[-2000:]
  assert "imported into %s (once the run's checks pass)" % os.path.join(
      str(tmp_path / "out"), init_lib.IMPORT_DIR) in proc.stdout
  assert "--max_seq_length" in proc.stderr and "Traceback" not in proc.stderr
  assert not os.path.exists(str(tmp_path / "out" / init_lib.IMPORT_DIR))
  assert not os.path.exists(str(tmp_path / "out")) or os.listdir(str(tmp_path / "out")) == []
  assert os.listdir(str(root)) == []  # the staged import removed


def test_compare_checkpoints_refused_after_the_import_leaves_nothing(tmp_path, monkeypatch,
                                                                     capsys):
  root = _staging_root(tmp_path, monkeypatch)
  status = compare_checkpoints.main([
      "--output_dir", str(tmp_path / "cmp"), "--no_random_init",
      "--checkpoint", "base=" + os.path.join(FIXTURES, "maskedlm"),
      "--task", "sentiment=" + str(tmp_path / "no_such_task")])
  assert status == 2
  err = capsys.readouterr().err
  assert "no_such_task" in err, err
  assert not os.path.exists(str(tmp_path / "cmp")) and os.listdir(str(root)) == []


def test_run_classifier_refused_after_the_import_leaves_nothing(tmp_path):
  data = tmp_path / "data"
  data.mkdir()
  import random  # pylint: disable=import-outside-toplevel
  write_jsonl(data / "train.jsonl", toy_rows(random.Random(3), 16))  # no dev.jsonl: refused
  (tmp_path / "tmp").mkdir()
  proc = subprocess.run(
      [sys.executable, os.path.join(helpers.REPO, "run_classifier.py"), "--task_name=jsonl",
       "--data_dir=" + str(data), "--output_dir=" + str(tmp_path / "out"),
       "--max_seq_length=16", "--do_train", "--do_eval",
       "--init_checkpoint=" + os.path.join(FIXTURES, "encoder")],
      capture_output=True, text=True, timeout=300,
      env=dict(os.environ, TMPDIR=str(tmp_path / "tmp"), CUDA_VISIBLE_DEVICES=""))
  assert proc.returncode == 2, proc.stderr[-2000:]
  assert "a transformers folder, imported into" in proc.stdout
  assert "dev.jsonl" in proc.stderr and "Traceback" not in proc.stderr
  assert not os.path.exists(str(tmp_path / "out" / init_lib.IMPORT_DIR))
  assert os.listdir(str(tmp_path / "tmp")) == []  # the staged import removed at exit


def test_after_preflight_every_rank_switches_from_the_staged_import_to_the_settled_one(
    tmp_path, monkeypatch):
  root = _staging_root(tmp_path, monkeypatch)
  values = _classifier_flags(tmp_path, "--init_checkpoint=" + os.path.join(FIXTURES, "encoder"))
  chief = distributed.init(False)
  staged = model_inputs.resolve_init_folder(values, chief, lambda line: None)
  assert staged.model.init_checkpoint.startswith(str(root))  # the checks read the staged files
  settled = model_inputs.settle_init_folder(staged, chief)
  target = os.path.join(str(tmp_path / "out"), init_lib.IMPORT_DIR)
  assert settled.model.init_checkpoint == os.path.join(target, "model.ckpt")
  assert settled.model.vocab_file == os.path.join(target, "vocab.txt")
  assert os.listdir(str(root)) == []
  # a second rank of the same host read the chief's staged files: it follows them to the output
  # dir; a rank on another host keeps its private import
  same_host = model_inputs.settle_init_folder(staged, _OtherHost(settled.init_import._asdict()))
  assert same_host.model.init_checkpoint == settled.model.init_checkpoint
  private = dataclasses.replace(staged, init_import=staged.init_import._replace(staged_in=None),
                                model=dataclasses.replace(staged.model, init_checkpoint="/p/m"))
  other_host = model_inputs.settle_init_folder(private, _OtherHost(settled.init_import._asdict()))
  assert other_host.model.init_checkpoint == "/p/m"
