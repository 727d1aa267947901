"""Every tool's --help: exit 0, every option has help text and shows its default. Every
tools/*.py is covered as it appears: a tool is a shim calling the main() of a bert_fin.cli
module."""
import argparse
import importlib
import os
import re
import subprocess
import sys
from unittest import mock

import pytest

from helpers import REPO

TOOLS = sorted(name for name in os.listdir(os.path.join(REPO, "tools")) if name.endswith(".py"))


class _Parsed(Exception):
  """Carries the ArgumentParser a CLI's main() was about to parse with."""


def cli_parser(tool):
  """The ArgumentParser of tools/<tool>: its shim's bert_fin.cli module's main() is called with
  no arguments and stopped at parse_args, before it does anything."""
  with open(os.path.join(REPO, "tools", tool), encoding="utf-8") as f:
    found = re.search(r"from (bert_fin\.cli\.\w+) import main\b", f.read())
  assert found, "tools/%s: a tool is a shim: `from bert_fin.cli.NAME import main`" % tool

  def capture(parser, *args, **kwargs):
    del args, kwargs
    raise _Parsed(parser)

  with mock.patch.object(argparse.ArgumentParser, "parse_args", capture):
    with pytest.raises(_Parsed) as parsed:
      importlib.import_module(found.group(1)).main([])
  return parsed.value.args[0]


@pytest.mark.parametrize("tool", TOOLS)
def test_every_option_has_help_and_its_default_is_shown(tool):
  parser = cli_parser(tool)
  text = parser.format_help()
  for action in parser._actions:  # pylint: disable=protected-access
    assert action.help, action.dest
    if action.option_strings and action.default is not None and action.dest != "help":
      assert "(default: %s)" % action.default in " ".join(text.split()), action.dest


@pytest.mark.parametrize("tool", TOOLS)
def test_help_exits_zero_and_lists_every_option(tool):
  proc = subprocess.run([sys.executable, os.path.join(REPO, "tools", tool), "--help"],
                        capture_output=True, text=True, timeout=120,
                        env=dict(os.environ, PYTHONPATH=REPO))
  assert proc.returncode == 0, proc.stderr[-2000:]
  assert "usage:" in proc.stdout and "(default: " in proc.stdout


GOOGLE_CREATE_PRETRAINING_DATA_FLAGS = [
    "input_file", "output_file", "vocab_file", "do_lower_case", "do_whole_word_mask",
    "max_seq_length", "max_predictions_per_seq", "random_seed", "dupe_factor", "masked_lm_prob",
    "short_seq_prob"]


def test_create_pretraining_data_help_lists_every_flag_grouped_with_defaults():
  from bert_fin.data.create import options as options_lib  # pylint: disable=import-outside-toplevel
  proc = subprocess.run([sys.executable, os.path.join(REPO, "create_pretraining_data.py"),
                         "--help"], capture_output=True, text=True, timeout=120,
                        env=dict(os.environ, PYTHONPATH=REPO))
  assert proc.returncode == 0, proc.stderr[-2000:]
  out = proc.stdout
  google, ours = out.split("bert_fin flags:")
  assert "google-research/bert create_pretraining_data.py flags:" in google
  listed = lambda text: [line.split(":")[0].replace("--[no]", "").replace("--", "").strip()
                         for line in text.splitlines() if line.startswith("  --")]
  assert listed(google) == GOOGLE_CREATE_PRETRAINING_DATA_FLAGS
  # every Options field, plus the programs' shared --verbose (bert_fin/console_log.py)
  assert sorted(listed(google) + listed(ours)) == sorted(list(options_lib.NAMES) + ["verbose"])
  for field in options_lib.FIELDS:
    if field.default is not None and not isinstance(field.default, bool):
      assert "(default: '%s')" % field.default in " ".join(out.split()), field.name


def _help_lists_every_flag(script, flags_module):
  """`script --help` names every flag flags_module.define_flags defines, and its flag_groups
  cover exactly those flags. Returns the help text."""
  from absl import flags  # pylint: disable=import-outside-toplevel
  proc = subprocess.run([sys.executable, os.path.join(REPO, script), "--help"],
                        capture_output=True, text=True, timeout=120,
                        env=dict(os.environ, PYTHONPATH=REPO))
  assert proc.returncode == 0, proc.stderr[-2000:]
  defined = flags_module.define_flags(flags.FlagValues())
  names = [name for name in defined if defined[name].name == name]
  for name in names:
    assert ("--%s: " % name in proc.stdout or "--[no]%s: " % name in proc.stdout), name
  grouped = [n for _, group in flags_module.flag_groups() for n in group]
  assert sorted(grouped) == sorted(names)
  return proc.stdout


def test_run_classifier_help_lists_every_flag():
  from bert_fin.finetune.classify import flags as classify_flags  # pylint: disable=import-outside-toplevel
  _help_lists_every_flag("run_classifier.py", classify_flags)


def test_run_ner_help_lists_every_flag():
  from bert_fin.finetune.ner import flags as ner_flags  # pylint: disable=import-outside-toplevel
  out = _help_lists_every_flag("run_ner.py", ner_flags)
  assert "--pooling" not in out and "CLUENER" in out


# google-research/bert extract_features.py: every flag, with its default
GOOGLE_EXTRACT_FEATURES_DEFAULTS = {
    "input_file": None, "output_file": None, "layers": "-1,-2,-3,-4", "bert_config_file": None,
    "max_seq_length": 128, "init_checkpoint": None, "vocab_file": None, "do_lower_case": True,
    "batch_size": 32, "use_tpu": False, "master": None, "num_tpu_cores": 8,
    "use_one_hot_embeddings": False}


def test_extract_features_help_lists_googles_flags_with_googles_defaults():
  from absl import flags  # pylint: disable=import-outside-toplevel
  from bert_fin.finetune.features import flags as features_flags  # pylint: disable=import-outside-toplevel
  out = _help_lists_every_flag("extract_features.py", features_flags)
  groups = dict(features_flags.flag_groups())
  assert sorted(groups[features_flags.TITLES[features_flags.GOOGLE]]) == sorted(
      GOOGLE_EXTRACT_FEATURES_DEFAULTS)
  values = features_flags.define_flags(flags.FlagValues())
  assert {name: values[name].default for name in GOOGLE_EXTRACT_FEATURES_DEFAULTS} == (
      GOOGLE_EXTRACT_FEATURES_DEFAULTS)
  assert "--pooling" in out and "--vectors_file" in out


GOOGLE_RUN_SQUAD_FLAGS = [
    "bert_config_file", "vocab_file", "output_dir", "train_file", "predict_file",
    "init_checkpoint", "do_lower_case", "max_seq_length", "doc_stride", "max_query_length",
    "do_train", "do_predict", "train_batch_size", "predict_batch_size", "learning_rate",
    "num_train_epochs", "warmup_proportion", "save_checkpoints_steps", "iterations_per_loop",
    "n_best_size", "max_answer_length", "use_tpu", "tpu_name", "tpu_zone", "gcp_project",
    "master", "num_tpu_cores", "verbose_logging", "version_2_with_negative",
    "null_score_diff_threshold"]


def test_run_squad_help_lists_every_flag_with_googles_defaults():
  from bert_fin.finetune.squad import flags as squad_flags  # pylint: disable=import-outside-toplevel
  out = _help_lists_every_flag("run_squad.py", squad_flags)
  google = dict(squad_flags.flag_groups())[squad_flags.GOOGLE_TITLE]
  assert sorted(google) == sorted(GOOGLE_RUN_SQUAD_FLAGS)  # google's run_squad.py, all of them
  for name, default in (("max_seq_length", 384), ("doc_stride", 128), ("max_query_length", 64),
                        ("n_best_size", 20), ("max_answer_length", 30),
                        ("train_batch_size", 32), ("predict_batch_size", 8)):
    assert "--%s:" % name in out and "(default: '%d')" % default in out.split(
        "--%s:" % name)[1].split("\n  --")[0], name
