"""The fine-tuning yardstick: N checkpoints x M tasks x K seeds (x a learning-rate grid), each cell
fine-tuned the same way, so what pretraining bought shows as a difference of test figures.

  plan = grid.prepare(checkpoints, tasks, settings)  # every check, before any training
  grid.run(plan, progress=True)                     # cells not finished yet, one process each
  report.write(plan, grid.collect(plan))            # results.md, results.csv, results.png

Layout under settings.output_dir:
  cells/<task>/<checkpoint>/lr<lr>-seed<seed>/   the cell's run_classifier (run_ner, run_squad)
      output_dir, plus command.txt (the exact commands, one a line), log.txt (their output) and
      cell.json, written last
      (atomically): {"argv": the command's flags, "results": ..., "seconds": ...}. A cell with
      cell.json is finished and skipped by the next run, when its flags are the same; a cell
      finished with other flags stops the run (one line: use a new --output_dir). An
      unfinished cell (killed) is started again from scratch.
Every cell gets the same hyperparameters (Settings: the optimizer and the fine-tuning recipes
too); only --init_checkpoint (with its config, vocab and case), the learning rate of the grid and
--seed differ. A fine-tuned checkpoint (a run_classifier, run_ner, run_squad or run_distill
--output_dir) is judged by its encoder: its cells start from a copy without its task head
(encoders.py), the head fresh as every other row's.

Checks before any cell runs (one-line ValueError): each checkpoint's config, vocab (at most the
config's vocab_size tokens: a padded config is accepted and said once), readable checkpoint
whose variables have the config's shapes and hold the encoder, --do_lower_case against google's
model names, max_seq_length, and per task the share of [UNK] tokens its training texts get from
the checkpoint's vocab (> max_unk_rate: the vocab does not fit the task's text), besides every
split's data checks (tasks.read_split).
"""
import collections
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import time

from bert_fin import io_utils
from bert_fin.modeling import checkpoint as checkpoint_lib
from bert_fin.optimization import names as optimizer_names
from bert_fin.yardstick import encoders
from bert_fin.yardstick import task_kinds

RANDOM_INIT = "random-init"
CELL_FILE = "cell.json"
LOG_FILE = "log.txt"
COMMAND_FILE = "command.txt"
_NAME = re.compile(r"^[\w.+-]+$")

Checkpoint = collections.namedtuple("Checkpoint", [
    "name", "path", "bert_config_file", "vocab_file", "do_lower_case"])
Checkpoint.__doc__ = """path: checkpoint prefix or directory; None for random init."""

Settings = collections.namedtuple("Settings", [
    "output_dir", "seeds", "learning_rates", "num_train_epochs", "max_seq_length",
    "train_batch_size", "eval_batch_size", "warmup_proportion", "pooling", "max_unk_rate",
    "keep_models", "optimizer", "layerwise_lr_decay", "reinit_top_layers"],
                                  defaults=[optimizer_names.DEFAULT, 1.0, 0])
Settings.__doc__ = """optimizer, layerwise_lr_decay, reinit_top_layers: the cells' --optimizer and
fine-tuning recipes (run_classifier / run_ner's values; finetune/recipes.py)."""

Cell = collections.namedtuple("Cell", ["task", "checkpoint", "learning_rate", "seed", "directory",
                                       "argv"])
Plan = collections.namedtuple("Plan", ["checkpoints", "tasks", "settings", "task_data",
                                       "unk_rates", "restored", "cells", "encoder_copies"],
                              defaults=[{}])
Plan.__doc__ = """task_data: {task name: task_kinds.TaskData}; unk_rates: {(task, checkpoint):
share of the training tokens that are [UNK]}; restored: one line a checkpoint, what it gives the
encoder; cells: list of Cell in run order; encoder_copies: {prefix: fine-tuned checkpoint} of
the encoder copies the cells of fine-tuned checkpoints start from (encoders.py)."""


class CellError(RuntimeError):
  """A cell's program failed: the message names the cell, the exit status and its log."""


def parse_spec(text, what, keys):
  """'NAME=VALUE[,key=value...]' -> (name, value, {key: value}); ValueError on a bad spec."""
  head, *rest = text.split(",")
  name, sep, value = head.partition("=")
  if not sep or not name or not value:
    raise ValueError("--%s %r: expected NAME=%s[,key=value...]" % (what, text, what.upper()))
  if not _NAME.match(name):
    raise ValueError("--%s %r: the name may hold letters, digits, _ . + - only" % (what, text))
  options = {}
  for item in rest:
    key, sep, option = item.partition("=")
    if key in keys and not sep:
      raise ValueError("--%s %r: option %r needs a value (%s=VALUE)" % (what, text, key, key))
    if not sep or key not in keys:
      raise ValueError("--%s %r: unknown option %r (known: %s)" % (
          what, text, item, ", ".join(sorted(keys))))
    options[key] = option
  return name, value, options


def format_lr(learning_rate):
  return "%g" % learning_rate


def _cell_argv(task, checkpoint, learning_rate, seed, settings, data):
  kind = task_kinds.get(task.kind)
  argv = kind.cell_flags(task, data, settings) + [
      "--bert_config_file=" + os.path.abspath(checkpoint.bert_config_file),
      "--vocab_file=" + os.path.abspath(checkpoint.vocab_file),
      "--do_lower_case=%s" % str(checkpoint.do_lower_case).lower(),
      "--max_seq_length=%d" % settings.max_seq_length,
      "--train_batch_size=%d" % settings.train_batch_size,
      "--eval_batch_size=%d" % settings.eval_batch_size,
      "--predict_batch_size=%d" % settings.eval_batch_size,
      "--learning_rate=%s" % format_lr(learning_rate),
      "--num_train_epochs=%g" % settings.num_train_epochs,
      "--warmup_proportion=%g" % settings.warmup_proportion,
      "--pooling=" + settings.pooling,
      "--seed=%d" % seed,
  ]
  argv = [flag for flag in argv if flag.split("=")[0] not in kind.unused_flags]
  # left out for the default, however spelled: cells finished before the flag existed keep
  # their argv
  if optimizer_names.canonical(settings.optimizer) != optimizer_names.DEFAULT:
    argv.append("--optimizer=" + settings.optimizer)
  if settings.layerwise_lr_decay != 1.0:  # the same for the recipes
    argv.append("--layerwise_lr_decay=%g" % settings.layerwise_lr_decay)
  if settings.reinit_top_layers:
    argv.append("--reinit_top_layers=%d" % settings.reinit_top_layers)
  if checkpoint.path:  # the prefix, not a directory: a newer checkpoint there is another cell
    argv.append("--init_checkpoint=" + os.path.abspath(
        checkpoint_lib.resolve_checkpoint(checkpoint.path)))
  return argv


def plan_cells(checkpoints, task_specs, settings, task_data):
  """Every cell, task by task, checkpoint by checkpoint, then learning rate and seed."""
  cells = []
  for task in task_specs:
    for checkpoint in checkpoints:
      for learning_rate in settings.learning_rates:
        for seed in settings.seeds:
          directory = os.path.join(settings.output_dir, "cells", task.name, checkpoint.name,
                                   "lr%s-seed%d" % (format_lr(learning_rate), seed))
          argv = _cell_argv(task, checkpoint, learning_rate, seed, settings,
                            task_data[task.name])
          cells.append(Cell(task, checkpoint, learning_rate, seed, directory, argv))
  return cells


def prepare(checkpoints, task_specs, settings):
  """Checks everything and plans the cells; nothing is written. Returns Plan."""
  from bert_fin.yardstick import checks  # pylint: disable=g-import-not-at-top
  if not checkpoints:
    raise ValueError("no checkpoint to compare: pass --checkpoint NAME=PATH (and/or keep the "
                     "random-init row)")
  if not task_specs:
    raise ValueError("no task: pass --task NAME=DATA_DIR")
  for what, names in (("checkpoint", [c.name for c in checkpoints]),
                      ("task", [t.name for t in task_specs])):
    repeated = sorted({name for name in names if names.count(name) > 1})
    if repeated:
      raise ValueError("--%s: the name(s) %s are used twice" % (what, ", ".join(repeated)))
  task_data = {task.name: checks.check_task(task) for task in task_specs}
  unk_rates, restored = {}, []
  for checkpoint in checkpoints:
    restored.append(checks.check_checkpoint(checkpoint, settings))
    for task in task_specs:
      unk_rates[task.name, checkpoint.name] = checks.check_vocab_fits(
          checkpoint, task, task_data[task.name], settings.max_unk_rate)
  judged, copies = encoders.encoder_rows(checkpoints, settings.output_dir)
  cells = plan_cells(judged, task_specs, settings, task_data)
  for cell in cells:
    is_finished(cell)  # a cell finished with other flags stops the run here
  return Plan(checkpoints, task_specs, settings, task_data, unk_rates, restored, cells, copies)


def _read_cell(cell):
  path = os.path.join(cell.directory, CELL_FILE)
  if not os.path.isfile(path):
    return None
  with open(path, encoding="utf-8") as f:
    return json.load(f)


def is_finished(cell):
  """True when the cell finished with the same flags; False when it has not finished; ValueError
  when it finished with other flags."""
  record = _read_cell(cell)
  if record is None:
    return False
  if record["argv"] != cell.argv:
    changed = sorted(set(record["argv"]) ^ set(cell.argv))
    raise ValueError("%s finished with other settings (%s): use a new --output_dir, or the "
                     "flags of that run" % (cell.directory, " vs ".join(changed[:2])))
  return True


def run_cell(cell, plan):
  """Fine-tunes one cell in its own process; writes cell.json last. Returns its record."""
  kind = task_kinds.get(cell.task.kind)
  shutil.rmtree(cell.directory, ignore_errors=True)  # an unfinished cell starts again
  os.makedirs(cell.directory)
  commands = [[sys.executable, "-m", kind.module] + argv
              for argv in kind.commands(cell.task, plan.task_data[cell.task.name], cell.argv,
                                        os.path.abspath(cell.directory))]
  with io_utils.atomic_output(os.path.join(cell.directory, COMMAND_FILE)) as f:
    f.write("".join(" ".join(shlex.quote(part) for part in command) + "\n"
                    for command in commands))
  log_path = os.path.join(cell.directory, LOG_FILE)
  start = time.time()
  with open(log_path, "w", encoding="utf-8") as log:
    for command in commands:
      log.flush()
      status = subprocess.call(command, stdout=log, stderr=subprocess.STDOUT)
      if status != 0:
        raise CellError("%s failed (exit %d): %s; the whole output is in %s" % (
            cell.directory, status, _last_error(log_path), log_path))
  seconds = time.time() - start
  results = kind.results(cell.task, plan.task_data[cell.task.name], cell.directory)
  if not plan.settings.keep_models:
    _remove_model_files(cell.directory)
  record = {"argv": cell.argv, "results": results, "seconds": round(seconds, 1)}
  with io_utils.atomic_output(os.path.join(cell.directory, CELL_FILE)) as f:
    f.write(json.dumps(record, indent=2) + "\n")
  return record


def _last_error(log_path):
  with open(log_path, encoding="utf-8", errors="replace") as f:
    lines = [line.strip() for line in f if line.strip()]
  errors = [line for line in lines if "error" in line.lower()]
  return (errors or lines or ["(no output)"])[-1][:300]


def _remove_model_files(directory):
  """The cell's checkpoints (model.ckpt-*, checkpoint, graph, events): figures stay."""
  for name in os.listdir(directory):
    if name.startswith(("model.ckpt-", "events.out.tfevents")) or name in (
        "checkpoint", "graph.pbtxt"):
      os.remove(os.path.join(directory, name))
  shutil.rmtree(os.path.join(directory, "eval"), ignore_errors=True)


def run(plan, progress=True, say=print):
  """Runs every unfinished cell, in order, with a progress bar (cells, ETA) on stderr.

  Returns the number of cells run. Raises CellError when a cell's program fails (the finished
  cells stay finished: run again after the fix).
  """
  import tqdm  # pylint: disable=g-import-not-at-top
  todo = [cell for cell in plan.cells if not is_finished(cell)]
  if todo:
    for prefix in encoders.write_copies(plan.encoder_copies):
      say("[compare] the encoder of %s (its head left out) -> %s" % (
          plan.encoder_copies[prefix], prefix))
  done = len(plan.cells) - len(todo)
  if done:
    say("[compare] %d of %d cells already finished in %s: skipped" % (
        done, len(plan.cells), plan.settings.output_dir))
  bar = tqdm.tqdm(total=len(plan.cells), initial=done, desc="fine-tune cells", unit="cell",
                  disable=not progress, dynamic_ncols=True)
  with bar:
    for cell in todo:
      bar.set_postfix_str("%s / %s / lr %s / seed %d" % (
          cell.task.name, cell.checkpoint.name, format_lr(cell.learning_rate), cell.seed))
      record = run_cell(cell, plan)
      line = describe_cell(cell, record)
      if progress:
        bar.write(line)
      else:
        say(line)
      bar.update(1)
  return len(todo)


def describe_cell(cell, record):
  """One line: the cell and its dev (and test) figures."""
  kind = task_kinds.get(cell.task.kind)
  parts = []
  for split in ("dev", "test"):
    figures = record["results"][split]
    if figures:
      parts.append("%s %s" % (split, " ".join("%s %.3f" % (
          task_kinds.METRIC_NAMES.get(metric, metric), figures[metric])
                                             for metric in kind.metrics)))
  collapsed = ", COLLAPSED to one class" if record["results"]["collapsed"] else ""
  return "[compare] %s / %s / lr %s / seed %d: %s (%.0f s)%s" % (
      cell.task.name, cell.checkpoint.name, format_lr(cell.learning_rate), cell.seed,
      "; ".join(parts), record["seconds"], collapsed)


def collect(plan):
  """{(task, checkpoint, learning_rate): [record of each finished seed]}."""
  records = collections.OrderedDict()
  for cell in plan.cells:
    record = _read_cell(cell)
    if record is not None:
      records.setdefault((cell.task.name, cell.checkpoint.name, cell.learning_rate),
                         []).append(record)
  return records
