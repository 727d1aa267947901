"""One boolean parser for every command line (bert_fin/booleans.py): the same spellings accepted by
the argparse tools and the absl programs, anything else ("ture") refused with one line and exit
status 2 naming the flag, never read as False."""
import os
import subprocess
import sys

import pytest
from absl import flags

from bert_fin import booleans
from bert_fin.cli import build_vocab
from bert_fin.cli import compare_checkpoints
from bert_fin.cli import export_hf
from helpers import REPO

SPELLINGS = [("true", True), ("True", True), ("T", True), ("1", True), ("yes", True),
             ("Y", True), ("false", False), ("FALSE", False), ("f", False), ("0", False),
             ("no", False), ("N", False)]
REFUSED = ["ture", "", "2", "on", "off", "nope"]


@pytest.mark.parametrize("text, value", SPELLINGS)
def test_parse_bool_reads_each_spelling_in_any_case(text, value):
  assert booleans.parse_bool(text) is value
  assert booleans.parse_bool(" %s\n" % text) is value
  assert booleans.parse_bool(value) is value


@pytest.mark.parametrize("text", REFUSED)
def test_parse_bool_refuses_everything_else_naming_the_spellings(text):
  with pytest.raises(ValueError, match=r"expected true or false \(or t/f, 1/0, yes/no, y/n\), "
                                       r"got '%s'" % text):
    booleans.parse_bool(text)


def _argparse_refusal(capsys, parse):
  with pytest.raises(SystemExit) as exit_info:
    parse()
  err = capsys.readouterr().err
  return exit_info.value.code, err


ARGPARSE_TOOLS = {
    "build_vocab": lambda argv: build_vocab.build_parser().parse_args(argv + [
        "--output=vocab.txt", "corpus.txt"]),
    "compare_checkpoints": lambda argv: compare_checkpoints.build_parser().parse_args(
        argv + ["--output_dir=x"]),
    "export_hf": lambda argv: export_hf.build_parser().parse_args(argv + [
        "--bert_config_file=c", "--init_checkpoint=k", "--vocab_file=v", "--output_dir=o"]),
}


@pytest.mark.parametrize("tool", sorted(ARGPARSE_TOOLS))
def test_argparse_tools_read_do_lower_case_with_the_one_parser(tool, capsys):
  parse = ARGPARSE_TOOLS[tool]
  for text, value in SPELLINGS:
    assert parse(["--do_lower_case=%s" % text]).do_lower_case is value
  status, err = _argparse_refusal(capsys, lambda: parse(["--do_lower_case=ture"]))
  assert status == 2 and len(err.splitlines()) == 1, err
  assert err.rstrip().endswith(": error: argument --do_lower_case: expected true or false (or "
                               "t/f, 1/0, yes/no, y/n), got 'ture'"), err


def test_compare_checkpoints_lower_option_uses_the_one_parser(tmp_path):
  (tmp_path / "bert_config.json").write_text("{}")
  (tmp_path / "vocab.txt").write_text("[PAD]\n")
  base = ["--output_dir=x", "--no_random_init"]
  spec = "--checkpoint=a=%s,config=%s,vocab=%s,lower=%%s" % (
      tmp_path / "model.ckpt", tmp_path / "bert_config.json", tmp_path / "vocab.txt")
  parser = compare_checkpoints.build_parser()
  for text, value in SPELLINGS:
    checkpoint, = compare_checkpoints.checkpoints_from(parser.parse_args(base + [spec % text]))
    assert checkpoint.do_lower_case is value
  with pytest.raises(ValueError, match=r"--checkpoint a: lower=: expected true or false .*'ture'"):
    compare_checkpoints.checkpoints_from(parser.parse_args(base + [spec % "ture"]))


def test_absl_flags_read_with_the_one_parser():
  values = flags.FlagValues()
  flags.DEFINE_bool("do_lower_case", True, "", flag_values=values)
  flags.DEFINE_bool("horovod", False, "", flag_values=values)
  booleans.read_booleans_with_parse_bool(values)
  for text, value in SPELLINGS:
    values.unparse_flags()
    values(["prog", "--do_lower_case=%s" % text])
    assert values.do_lower_case is value
  values.unparse_flags()
  values(["prog", "--nodo_lower_case", "--horovod"])  # absl's bare forms still work
  assert values.do_lower_case is False and values.horovod is True
  values.unparse_flags()
  with pytest.raises(flags.IllegalFlagValueError, match="--do_lower_case=ture: expected true"):
    values(["prog", "--do_lower_case=ture"])


ABSL_PROGRAMS = {  # program: (its name in errors, a boolean flag, its other flags)
    "create_pretraining_data.py": ("create_pretraining_data", "do_whole_word_mask",
                                   ["--input_file=x", "--output_file=out/train", "--vocab_file=v"]),
    "run_pretraining.py": ("run_pretraining.py", "horovod", ["--output_dir=out"]),
}


@pytest.mark.parametrize("program", sorted(ABSL_PROGRAMS))
def test_absl_programs_refuse_a_misspelt_boolean_in_one_line_with_status_2(program, tmp_path):
  prog, flag, others = ABSL_PROGRAMS[program]
  proc = subprocess.run([sys.executable, os.path.join(REPO, program), "--%s=ture" % flag] + others,
                        capture_output=True, text=True, timeout=120, cwd=str(tmp_path))
  assert proc.returncode == 2, proc.stderr[-2000:]
  assert proc.stderr.splitlines() == [
      "%s: error: flag --%s=ture: expected true or false (or t/f, 1/0, yes/no, y/n), got 'ture'"
      % (prog, flag)]
  assert not os.path.exists(str(tmp_path / "out"))
