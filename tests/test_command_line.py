"""One shape for every program (bert_fin/command_line.py): the one form of a refusal (`PROGRAM:
error: <one line>`, exit 2; the rank named when not 0; an OSError as `path: reason`), the one
`main` of every entry point (flags from command_line.define_flags, configure, the refusals block),
nobody else printing a refusal by hand, and each fine-tuning program's run() reading top to bottom
(train_setup -> its model_fn_builder -> worker_estimator -> train), with no callbacks."""
import ast
import errno
import os

import pytest

from bert_fin import command_line
from helpers import REPO
from helpers import call_trail

ENTRY_POINTS = ("run_pretraining.py", "run_classifier.py", "run_ner.py", "run_squad.py",
                "extract_features.py", "run_distill.py")
FINETUNE_RUNS = ("classify", "ner", "squad", "distill")
# what each program's settings must be followable to by its calls: training, the metrics
TRAIL_ENDS = {
    "run_pretraining.py": [("training.estimator", "train_and_evaluate"),
                           ("training.graph.model_fn", "eval_metric_ops")],
    "run_classifier.py": [("finetune.estimator_skeleton", "train"),
                          ("classify.metrics", "classification_report"),
                          ("classify.model", "model_fn_builder")],
    "run_distill.py": [("finetune.estimator_skeleton", "train"),
                       ("classify.metrics", "classification_report"),
                       ("distill.model", "model_fn_builder")],
    "run_ner.py": [("finetune.estimator_skeleton", "train"), ("ner.metrics", "entity_report"),
                   ("ner.model", "model_fn_builder")],
    "run_squad.py": [("finetune.estimator_skeleton", "train"), ("squad.evaluate", "evaluate"),
                     ("squad.model", "model_fn_builder")],
}


def test_a_refusal_is_one_line_naming_the_program_and_the_rank():
  assert command_line.refusal_line("run_x.py", ValueError("bad --flag")) == (
      "run_x.py: error: bad --flag")
  assert command_line.refusal_line("run_x.py", ValueError("two\nlines"), rank=3) == (
      "run_x.py: error: rank 3: two lines")
  missing = FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), "/data/x.txt")
  assert command_line.refusal_line("tool", missing) == (
      "tool: error: /data/x.txt: No such file or directory")


def test_refusals_exit_2_with_one_line_and_let_bugs_through(capsys):
  with pytest.raises(SystemExit) as exit_info:
    with command_line.refusals("run_x.py"):
      raise ValueError("--output_dir is a file")
  assert exit_info.value.code == command_line.USAGE_ERROR == 2
  assert capsys.readouterr().err == "run_x.py: error: --output_dir is a file\n"
  with pytest.raises(SystemExit) as exit_info:  # another rank: the same exit, nothing printed
    with command_line.refusals("run_x.py", print_it=False):
      raise OSError("gone")
  assert exit_info.value.code == 2 and capsys.readouterr().err == ""
  with pytest.raises(RuntimeError, match="a bug"):  # not a user error: its traceback stays
    with command_line.refusals("run_x.py"):
      raise RuntimeError("a bug")


@pytest.mark.parametrize("script", sorted(TRAIL_ENDS))
def test_a_programs_settings_can_be_followed_by_its_calls(script):
  """From main, reading calls alone (no callback, no name bound to an object's method), a reader
  reaches the settings table, training, the optimizer and the metrics."""
  found = call_trail.follow(REPO, script)
  ends = [("flag_table", "from_flags"),
          ("optimization.optimizers", "make_optimizer")] + TRAIL_ENDS[script]
  assert [end for end in ends if call_trail.path(found, *end) is None] == []


def test_the_trail_is_lost_at_a_callback(tmp_path):
  package = tmp_path / "bert_fin"
  package.mkdir()
  (package / "__init__.py").write_text("")
  (package / "skeleton.py").write_text("def run(step):\n  step()\n")
  (package / "work.py").write_text("def train():\n  pass\n\ndef metrics():\n  pass\n")
  (tmp_path / "prog.py").write_text(
      "from bert_fin import skeleton\nfrom bert_fin import work\n\n"
      "def main(_):\n  work.metrics()\n  skeleton.run(work.train)\n")
  found = call_trail.follow(str(tmp_path), "prog.py")
  assert call_trail.path(found, "work", "metrics") == [
      (call_trail.SCRIPT, "main"), ("bert_fin.work", "metrics")]
  assert call_trail.path(found, "skeleton", "run") is not None
  assert call_trail.path(found, "work", "train") is None  # handed over, never called by name


def _module(path):
  with open(path, encoding="utf-8") as f:
    return ast.parse(f.read(), path)


def _calls(node):
  """Dotted names of every call in node (`a.b(...)` -> "a.b")."""
  names = []
  for call in ast.walk(node):
    if isinstance(call, ast.Call):
      names.append(ast.unparse(call.func))
  return names


@pytest.mark.parametrize("script", ENTRY_POINTS)
def test_every_entry_point_has_the_one_main_shape(script):
  tree = _module(os.path.join(REPO, script))
  assigned = {target.id: ast.unparse(node.value) for node in tree.body
              if isinstance(node, ast.Assign) for target in node.targets}
  assert assigned["PROGRAM"] == repr(script)
  assert assigned["FLAGS"].startswith("command_line.define_flags(")
  main = next(node for node in tree.body if isinstance(node, ast.FunctionDef)
              and node.name == "main")
  assert ast.unparse(main.body[0]) == "console_log.configure(FLAGS.verbose)"
  refusals = main.body[1]
  assert isinstance(refusals, ast.With) and ast.unparse(
      refusals.items[0].context_expr).startswith("command_line.refusals(PROGRAM")
  calls = _calls(tree)
  assert "print" not in calls and "sys.exit" not in calls  # refusals: command_line's alone
  assert "command_line.flags_parser(PROGRAM)" in ast.unparse(tree)


def _strings(tree):
  """The string literals of a module that are not docstrings."""
  docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                if isinstance(node, (ast.Module, ast.FunctionDef, ast.ClassDef)) and node.body
                and isinstance(node.body[0], ast.Expr)}
  return [node.value for node in ast.walk(tree) if isinstance(node, ast.Constant)
          and isinstance(node.value, str) and id(node) not in docstrings]


def test_nothing_but_command_line_spells_a_refusal():
  """`: error: ` is spelled in bert_fin/command_line.py alone (cli.fail, the progress guard, the
  flags parser and every program call it)."""
  spelled = []
  for directory, _, files in os.walk(os.path.join(REPO, "bert_fin")):
    for name in files:
      path = os.path.join(directory, name)
      if name.endswith(".py") and path != command_line.__file__:
        if any(": error: " in text for text in _strings(_module(path))):
          spelled.append(os.path.relpath(path, REPO))
  for script in ENTRY_POINTS + ("create_pretraining_data.py",):
    if any(": error: " in text for text in _strings(_module(os.path.join(REPO, script)))):
      spelled.append(script)
  assert spelled == []


@pytest.mark.parametrize("program", FINETUNE_RUNS)
def test_each_finetuning_run_reads_top_to_bottom(program):
  """orchestration.run: the TrainSetup of the flags into the program's own model_fn_builder, in
  worker_estimator, then estimator_skeleton.train; no function of the shared skeleton takes the
  program's steps as callbacks."""
  tree = _module(os.path.join(REPO, "bert_fin", "finetune", program, "orchestration.py"))
  run = next(node for node in tree.body if isinstance(node, ast.FunctionDef)
             and node.name == "run")
  calls = _calls(run)
  for step in ("estimator_skeleton.train_setup", "estimator_skeleton.worker_estimator",
               "estimator_skeleton.training_start", "estimator_skeleton.train"):
    assert step in calls, step
  assert [call for call in calls if call.endswith(".model_fn_builder")], calls
  skeleton = _module(os.path.join(REPO, "bert_fin", "finetune", "estimator_skeleton.py"))
  for function in (node for node in skeleton.body if isinstance(node, ast.FunctionDef)):
    parameters = {argument.arg for argument in function.args.args}
    called = [call for call in _calls(function) if call in parameters]
    assert called == [], (function.name, called)
