"""An argparse tool takes a program's flags from its settings table (flag_table.add_arguments):
the same type, choices, help, default and bounds, declared once on the field."""
import argparse
import dataclasses
import typing

import pytest

from bert_fin import cli
from bert_fin import flag_table
from bert_fin.cli import adapt_vocab
from bert_fin.cli import build_vocab
from bert_fin.cli import compare_checkpoints
from bert_fin.cli import estimate_fisher
from bert_fin.cli import export_hf
from bert_fin.cli import export_serving
from bert_fin.data.create import options as create_options
from bert_fin.finetune import settings as finetune_settings
from bert_fin.finetune.classify import flags as classify_flags
from bert_fin.training import settings as train_settings

# each tool: the program table its flags come from, and those flags
TAKEN = {
    compare_checkpoints: (classify_flags.Settings, compare_checkpoints.CELL_FLAGS),
    estimate_fisher: (train_settings.Settings, estimate_fisher.RUN_FLAGS),
    export_serving: (classify_flags.Settings, ("do_lower_case", "max_seq_length")),
    export_hf: (finetune_settings.Settings, ("do_lower_case",)),
    build_vocab: (create_options.Options, ("input_format", "do_lower_case")),
    adapt_vocab: (create_options.Options, ("input_file", "input_format", "do_lower_case")),
}
TOOL_DEFAULTS = {(compare_checkpoints, "eval_batch_size"): compare_checkpoints.EVAL_BATCH_SIZE,
                 # unset: read from the fine-tuned directory's classifier_config.json
                 (export_serving, "do_lower_case"): None,
                 (export_serving, "max_seq_length"): None}


@dataclasses.dataclass(frozen=True)
class Table:
  rate: float = flag_table.option(0.5, "a rate in (0, 1]", above=0, at_most=1)
  lower: bool = flag_table.option(True, "lower-case")
  kind: str = flag_table.option("a", "the kind", ("a", "b"))
  labels: typing.Optional[typing.List[str]] = flag_table.option(None, "the labels")
  corpus: typing.Optional[str] = flag_table.option(None, "the corpus", required=True)
  config: typing.Optional[str] = flag_table.option(
      None, "needed unless the folder has one", required=True, unless=lambda table: True)
  sources: typing.Optional[typing.Tuple[str, ...]] = flag_table.option(None, "repeatable")


def _parser(names, defaults=None):
  return flag_table.add_arguments(cli.ArgumentParser(prog="tool"), Table, names, defaults)


def test_an_argument_is_the_fields_type_choices_help_default_and_requirement():
  names = ("rate", "lower", "kind", "labels", "corpus", "config")
  args = _parser(names).parse_args(["--corpus=c.txt"])
  assert (args.rate, args.lower, args.kind, args.labels, args.corpus, args.config) == (
      0.5, True, "a", None, "c.txt", None)
  args = _parser(names).parse_args(["--corpus=c", "--rate=0.25", "--lower=false", "--kind=b",
                                    "--labels=x, y,z"])
  assert (args.rate, args.lower, args.kind, args.labels) == (0.25, False, "b", ["x", "y", "z"])
  assert _parser(names).parse_args(["--corpus=c", "--lower"]).lower  # bare: true
  helps = {action.dest: action.help for action in _parser(names)._actions}
  assert helps["rate"] == "a rate in (0, 1]" and helps["kind"] == "the kind"
  assert _parser(("rate",), {"rate": 1.0}).parse_args([]).rate == 1.0  # the tool's default


@pytest.mark.parametrize("argv,words", [
    (["--kind=c"], "argument --kind: invalid choice: 'c'"),
    (["--lower=maybe"], "argument --lower"),
    ([], "the following arguments are required: --corpus"),  # --config: something stands in
])
def test_a_bad_argument_is_one_line_exit_2(argv, words, capsys):
  with pytest.raises(SystemExit) as exit_info:
    _parser(("kind", "lower", "corpus", "config")).parse_args(
        argv + (["--corpus=c"] if argv else []))
  err = capsys.readouterr().err.strip().splitlines()
  assert exit_info.value.code == 2 and len(err) == 1 and words in err[0]


def test_the_fields_bounds_are_checked_after_parsing_with_the_programs_words():
  args = _parser(("rate",)).parse_args(["--rate=2"])
  with pytest.raises(ValueError, match=r"^--rate must be in \(0, 1\], got 2$"):
    flag_table.check_arguments(Table, args, ("rate",))
  with pytest.raises(ValueError, match=r"^--rate=nan must be a finite number$"):
    flag_table.check_arguments(Table, _parser(("rate",)).parse_args(["--rate=nan"]), ("rate",))
  flag_table.check_arguments(Table, _parser(("rate",)).parse_args(["--rate=1"]), ("rate",))
  with pytest.raises(ValueError, match=r"^--rate must be in \(0, 1\], got 0$"):
    _parser(("rate",), {"rate": 0.0})  # a tool's own default is held to the bounds too
  with pytest.raises(TypeError, match="--sources is a repeatable flag"):
    _parser(("sources",))


@pytest.mark.parametrize("tool", sorted(TAKEN, key=lambda module: module.__name__),
                         ids=lambda module: module.__name__.rsplit(".", 1)[-1])
def test_every_tool_takes_the_programs_fields_instead_of_declaring_them_again(tool):
  table, names = TAKEN[tool]
  actions = {action.dest: action for action in tool.build_parser()._actions}
  for name in names:
    field, action = flag_table.field_of(table, name), actions[name]
    assert action.help == field.metadata["help"], name
    assert action.default == TOOL_DEFAULTS.get((tool, name), field.default), name
    assert list(action.choices or ()) == list(field.metadata["choices"] or ()), name
    if flag_table.flag_type(field) is not bool:
      assert action.type is flag_table.flag_type(field) or name == "labels", name
    else:
      assert action.nargs == argparse.OPTIONAL and action.const is True, name


def test_compare_checkpoints_refuses_a_cell_flag_outside_run_classifiers_bounds():
  base = ["--output_dir=x", "--checkpoint=a=none", "--task=t=d"]
  for flag, words in [("--max_seq_length=2", "--max_seq_length must be >= 3, got 2"),
                      ("--warmup_proportion=1", "--warmup_proportion must be in [0, 1), got 1"),
                      ("--num_train_epochs=0", "--num_train_epochs must be > 0, got 0")]:
    args = compare_checkpoints.build_parser().parse_args(base + [flag])
    with pytest.raises(ValueError, match=words.replace("[", r"\[").replace(")", r"\)")):
      compare_checkpoints.settings_from(args)
