"""The yardstick's answer with a confidence interval: per task, each checkpoint's test figure
against the base (the first checkpoint) and against random init, as a paired bootstrap interval
over the test examples pooled over the seeds both ran (bootstrap.py), in results.md and
results.csv, and a sentence saying which differences the data supports.

The figure is the kind's first metric (task_kinds: accuracy, micro-F1, F1 ...), computed from the
cells' per-example statistics (results["test_examples"]) at each checkpoint's chosen learning
rate. A task without them (no test labels, or a kind without per-example statistics: ner) has
no interval ("n/a").
"""
import collections
import re

from bert_fin.yardstick import bootstrap
from bert_fin.yardstick import grid
from bert_fin.yardstick import task_kinds

Comparison = collections.namedtuple("Comparison", ["task", "checkpoint", "against", "metric",
                                                   "difference"])
Comparison.__doc__ = """checkpoint minus against on task's test `metric`; difference:
bootstrap.Difference."""
_SEED = re.compile(r"^--seed=(-?\d+)$")


def _by_seed(runs):
  """{seed: float [n, k] example statistics} of a row's finished runs that have them."""
  found = {}
  for run in runs:
    seeds = [int(m.group(1)) for m in map(_SEED.match, run["argv"]) if m]
    if seeds and run["results"].get("test_examples") is not None:
      found[seeds[0]] = run["results"]["test_examples"]
  return found


def _statistic(runs):
  return next((run["results"].get("statistic") for run in runs
               if run["results"].get("statistic")), None)


def compare(plan, records, rows):
  """[Comparison] of every task: each checkpoint vs the first (the base) and vs random init
  (each pair once, never a checkpoint against itself). records: grid.collect(plan); rows:
  report.summarize's."""
  comparisons = []
  names = [c.name for c in plan.checkpoints]
  for task in plan.tasks:
    kind = task_kinds.get(task.kind)
    chosen = {row.checkpoint: records.get((task.name, row.checkpoint, row.learning_rate), [])
              for row in rows if row.task == task.name and row.selected}
    references = [names[0]] + ([grid.RANDOM_INIT] if grid.RANDOM_INIT in names[1:] else [])
    for name in names:
      for against in references:
        if name == against or name not in chosen or against not in chosen:
          continue
        if against == names[0] and name == grid.RANDOM_INIT:
          continue  # random init vs the base: the base vs random init says it
        mine, theirs = _by_seed(chosen[name]), _by_seed(chosen[against])
        seeds = sorted(set(mine) & set(theirs))
        statistic = _statistic(chosen[name])
        difference = None
        if seeds and statistic:
          try:
            difference = bootstrap.paired_difference([mine[s] for s in seeds],
                                                     [theirs[s] for s in seeds], statistic)
          except ValueError:
            difference = None  # scored on other test examples: no paired interval
        comparisons.append(Comparison(task.name, name, against, kind.metrics[0], difference))
  return comparisons


def _interval(difference):
  return "%+.3f [%+.3f, %+.3f]" % (difference.delta, difference.low, difference.high)


def markdown_lines(comparisons, task_name):
  """results.md's lines for one task: a table and the sentence of what the data supports."""
  mine = [c for c in comparisons if c.task == task_name]
  if not mine:
    return []
  metric = task_kinds.METRIC_NAMES.get(mine[0].metric, mine[0].metric)
  lines = ["", "Paired bootstrap (%d resamples of the test examples, seeds pooled), test %s:" % (
      bootstrap.RESAMPLES, metric), "", "| checkpoint | against | Δ [95% interval] | seeds | "
      "the data says |", "|---|---|---|---|---|"]
  supported, unsupported = [], []
  for c in mine:
    if c.difference is None:
      lines.append("| %s | %s | n/a | | no per-example test figures |" % (c.checkpoint,
                                                                         c.against))
      continue
    verdict = bootstrap.supported(c.difference)
    lines.append("| %s | %s | %s | %d | %s |" % (
        c.checkpoint, c.against, _interval(c.difference), c.difference.seeds,
        verdict or "no difference shown"))
    phrase = "%s %s than %s (%s)" % (c.checkpoint, verdict, c.against, _interval(c.difference))
    (supported if verdict else unsupported).append(
        phrase if verdict else "%s vs %s (%s)" % (c.checkpoint, c.against,
                                                  _interval(c.difference)))
  sentence = ("The data supports: %s." % "; ".join(supported) if supported
              else "The data supports no difference.")
  if unsupported:
    sentence += " Not shown (the interval holds 0): %s." % "; ".join(unsupported)
  return lines + ["", sentence]


def csv_values(comparisons, task_name, checkpoint, references):
  """results.csv's delta/low/high of checkpoint against each reference name ('' when none)."""
  values = []
  for against in references:
    found = next((c for c in comparisons if c.task == task_name and c.checkpoint == checkpoint
                  and c.against == against and c.difference is not None), None)
    values += (["%.4f" % v for v in (found.difference.delta, found.difference.low,
                                     found.difference.high)] if found else ["", "", ""])
  return values
