"""The yardstick's results: mean +- std over seeds per task x checkpoint (x learning rate), the
learning rate chosen on dev, written as results.csv, results.md and results.png (atomically).

Figures per split (dev, test) and metric of the task's kind; std is the sample standard deviation
over the seeds (0 for one seed). With a learning-rate grid, each task x checkpoint keeps the rate
whose mean dev `selection_metric` is highest (the first of a tie), and that rate's dev and test
figures are the ones reported (CLUE practice: choose on dev, report test); results.csv has every
rate, `selected` marks the chosen one. Each task's table marks a checkpoint whose figure is
below random init's (BELOW_FLOOR), and is followed by the paired bootstrap's intervals of each
checkpoint against the base and random init (differences.py), also in results.csv.
"""
import collections
import csv
import io
import os

import numpy as np

from bert_fin import io_utils
from bert_fin.yardstick import differences
from bert_fin.yardstick import grid
from bert_fin.yardstick import task_kinds

SPLITS = ("dev", "test")
CSV_FILE, MARKDOWN_FILE, PLOT_FILE = "results.csv", "results.md", "results.png"
BELOW_FLOOR = " ⚠ below random init: pretraining hurt"

Row = collections.namedtuple("Row", ["task", "checkpoint", "learning_rate", "selected", "seeds",
                                     "figures", "collapsed", "unk_rate"])
Row.__doc__ = """figures: {split: {metric: (mean, std)}}, a split absent when not measured
(an unlabelled test split); collapsed: seeds whose dev predictions were all one class."""


def _mean_std(values):
  values = np.asarray(values, np.float64)
  return float(values.mean()), float(values.std(ddof=1)) if len(values) > 1 else 0.0


def summarize(plan, records):
  """records: grid.collect(plan). Returns [Row] in plan order (tasks, checkpoints, rates)."""
  rows = []
  for task in plan.tasks:
    kind = task_kinds.get(task.kind)
    for checkpoint in plan.checkpoints:
      group = []
      for learning_rate in plan.settings.learning_rates:
        runs = records.get((task.name, checkpoint.name, learning_rate))
        if not runs:
          continue
        figures = {}
        for split in SPLITS:
          if all(run["results"][split] for run in runs):
            figures[split] = {metric: _mean_std([run["results"][split][metric] for run in runs])
                              for metric in kind.metrics}
        group.append(Row(task.name, checkpoint.name, learning_rate, False, len(runs), figures,
                         sum(bool(run["results"]["collapsed"]) for run in runs),
                         plan.unk_rates[task.name, checkpoint.name]))
      if group:
        best = max(range(len(group)), key=lambda i: (
            group[i].figures["dev"][kind.selection_metric][0], -i))
        group[best] = group[best]._replace(selected=True)
      rows.extend(group)
  return rows


def _columns(plan):
  metrics = []
  for task in plan.tasks:
    metrics += [m for m in task_kinds.get(task.kind).metrics if m not in metrics]
  return metrics


def _references(plan):
  """The names the bootstrap compares against: the base (first checkpoint), random init."""
  return [plan.checkpoints[0].name, grid.RANDOM_INIT]


def csv_text(plan, rows, comparisons=()):
  """results.csv: one row per task x checkpoint x learning rate; the chosen rate's row has the
  paired bootstrap's test delta / low / high against the base and random init (differences.py;
  the first metric of its kind)."""
  metrics = _columns(plan)
  header = ["task", "kind", "checkpoint", "learning_rate", "selected", "seeds", "collapsed",
            "unk_rate"]
  header += ["%s_%s_%s" % (split, metric, stat) for split in SPLITS for metric in metrics
             for stat in ("mean", "std")]
  header += ["test_vs_%s_%s" % (reference, stat) for reference in ("base", "random_init")
             for stat in ("delta", "low", "high")]
  kinds = {task.name: task.kind for task in plan.tasks}
  out = io.StringIO()
  writer = csv.writer(out, lineterminator="\n")
  writer.writerow(header)
  for row in rows:
    values = [row.task, kinds[row.task], row.checkpoint, grid.format_lr(row.learning_rate),
              int(row.selected), row.seeds, row.collapsed, "%.4f" % row.unk_rate]
    for split in SPLITS:
      for metric in metrics:
        mean_std = row.figures.get(split, {}).get(metric)
        values += ["%.4f" % v for v in mean_std] if mean_std else ["", ""]
    values += (differences.csv_values(comparisons, row.task, row.checkpoint, _references(plan))
               if row.selected else [""] * 6)
    writer.writerow(values)
  return out.getvalue()


def _pm(mean_std):
  return "%.3f ± %.3f" % mean_std if mean_std else "n/a"


def _report_split(row):
  return "test" if "test" in row.figures else "dev"


def _recipes(settings):
  """', layer-wise lr decay D, top N layers re-initialised' for the recipes the cells use."""
  parts = []
  if settings.layerwise_lr_decay != 1.0:
    parts.append("layer-wise lr decay %g" % settings.layerwise_lr_decay)
  if settings.reinit_top_layers:
    parts.append("top %d layer(s) re-initialised" % settings.reinit_top_layers)
  return "".join(", " + part for part in parts)


def markdown_text(plan, rows, command=None, comparisons=()):
  """results.md: the settings, then per task a table (the chosen learning rate's figures; a
  checkpoint below random init marked) and the paired bootstrap's differences (comparisons:
  differences.compare's)."""
  settings = plan.settings
  several_rates = len(settings.learning_rates) > 1
  lines = ["# Fine-tuning yardstick", ""]
  if command:
    lines += ["Command: `%s`" % command, ""]
  lines += [
      "Same fine-tuning for every checkpoint: max_seq_length %d, train batch %d, %g epochs, "
      "warmup %g, optimizer %s%s, pooling %s, learning rate %s, seeds %s. Figures are mean ± "
      "sample std over the seeds; `collapsed`: seeds whose dev predictions were all one class."
      % (settings.max_seq_length, settings.train_batch_size, settings.num_train_epochs,
         settings.warmup_proportion, settings.optimizer, _recipes(settings), settings.pooling,
         ("%s (chosen on dev per task and checkpoint)" if several_rates else "%s") % ", ".join(
             grid.format_lr(lr) for lr in settings.learning_rates),
         ",".join(str(seed) for seed in settings.seeds)), ""]
  lines += ["Checkpoints:", ""] + ["- " + line for line in plan.restored] + [""]
  for task in plan.tasks:
    kind = task_kinds.get(task.kind)
    sizes = plan.task_data[task.name].sizes
    lines += ["## %s" % task.name, "",
              "%s, `%s` (%s), %s." % (kind.name, task.data_dir, task.data_format, ", ".join(
                  "%d %s" % (sizes[split], split) for split in ("train", "dev", "test")))]
    lines += [note[:1].upper() + note[1:] + "." for note in task.notes]
    chosen = [row for row in rows if row.task == task.name and row.selected]
    if not chosen:
      lines += ["", "No finished cell yet.", ""]
      continue
    if "test" not in chosen[0].figures:
      lines += ["The test split has no labels: dev figures only."]
    names = [task_kinds.METRIC_NAMES.get(m, m) for m in kind.metrics]
    header = ["checkpoint", "[UNK]", "lr", "seeds"] + ["dev " + n for n in names] + [
        "test " + n for n in names]
    floor = next((row for row in chosen if row.checkpoint == grid.RANDOM_INIT), None)
    if floor is not None:
      header.append("Δ %s %s vs %s" % (_report_split(floor),
                                       task_kinds.METRIC_NAMES.get(kind.selection_metric),
                                       grid.RANDOM_INIT))
    header.append("collapsed")
    lines += ["", "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for row in chosen:
      cells = [row.checkpoint, "%.1f%%" % (100 * row.unk_rate),
               grid.format_lr(row.learning_rate), str(row.seeds)]
      cells += [_pm(row.figures.get(split, {}).get(m)) for split in SPLITS for m in kind.metrics]
      if floor is not None:
        split = _report_split(floor)
        delta = (row.figures[split][kind.selection_metric][0]
                 - floor.figures[split][kind.selection_metric][0])
        cells.append("" if row is floor else "%+.3f%s" % (delta, BELOW_FLOOR if delta < 0 else ""))
      cells.append("%d/%d" % (row.collapsed, row.seeds))
      lines.append("| " + " | ".join(cells) + " |")
    lines += differences.markdown_lines(comparisons, task.name)
    lines.append("")
  return "\n".join(lines)


def plot(plan, rows, path):
  """results.png: per metric a panel of grouped bars (tasks x checkpoints), error bars = std,
  the test split's figures (dev where the test split has no labels)."""
  import matplotlib  # pylint: disable=g-import-not-at-top
  matplotlib.use("Agg")
  from matplotlib import pyplot  # pylint: disable=g-import-not-at-top
  metrics = _columns(plan)
  chosen = [row for row in rows if row.selected]
  names = [c.name for c in plan.checkpoints]
  figure, axes = pyplot.subplots(1, len(metrics), figsize=(4.5 * len(metrics) + 1, 4),
                                 squeeze=False)
  width = 0.8 / max(len(names), 1)
  for axis, metric in zip(axes[0], metrics):
    tasks = [t.name for t in plan.tasks if metric in task_kinds.get(t.kind).metrics]
    for i, name in enumerate(names):
      means, stds = [], []
      for task in tasks:
        row = next((r for r in chosen if r.task == task and r.checkpoint == name), None)
        value = row.figures[_report_split(row)][metric] if row else (np.nan, 0.0)
        means.append(value[0])
        stds.append(value[1])
      positions = np.arange(len(tasks)) + (i - (len(names) - 1) / 2) * width
      axis.bar(positions, means, width, yerr=stds, capsize=3, label=name)
    labels = []
    for task in tasks:
      split = next((_report_split(r) for r in chosen if r.task == task), "test")
      labels.append(task if split == "test" else task + " (dev)")
    axis.set_xticks(np.arange(len(tasks)))
    axis.set_xticklabels(labels)
    axis.set_ylabel("test " + task_kinds.METRIC_NAMES.get(metric, metric))
    axis.set_ylim(0, 1)
    axis.grid(axis="y", alpha=0.3)
  axes[0][-1].legend(loc="lower right", fontsize="small")
  figure.suptitle("fine-tuning: mean ± std over seeds %s" % ",".join(
      str(seed) for seed in plan.settings.seeds))
  figure.tight_layout()
  with io_utils.atomic_path(path) as tmp:
    figure.savefig(tmp, format="png", dpi=100)
  pyplot.close(figure)


def write(plan, records, command=None):
  """Writes results.csv, results.md and results.png into the output dir; returns the md text."""
  rows = summarize(plan, records)
  comparisons = differences.compare(plan, records, rows)
  out = plan.settings.output_dir
  with io_utils.atomic_output(os.path.join(out, CSV_FILE)) as f:
    f.write(csv_text(plan, rows, comparisons))
  text = markdown_text(plan, rows, command, comparisons)
  with io_utils.atomic_output(os.path.join(out, MARKDOWN_FILE)) as f:
    f.write(text + "\n")
  plot(plan, rows, os.path.join(out, PLOT_FILE))
  return text
