"""run_pretraining's named record sets: the sources of a training mixture and the eval sets.

  --input_source=NAME=GLOB:WEIGHT   (repeated) train on a mixture: each example drawn from source
                                    NAME with probability WEIGHT / sum of weights (input/stream/
                                    mixture.py); GLOB as --input_file (comma-separated globs);
  --eval_source=NAME=GLOB           (repeated) evaluate on each set apart: the eval block's keys
                                    prefixed NAME/, TensorBoard's eval_NAME/ directory;
  --best_eval_source=NAME           continuous eval keeps in best/ the checkpoint with the lowest
                                    NAME/masked_lm_loss (refused without --eval_continuous).

NAME: [A-Za-z0-9_-]+, unique among the sources (and among the eval sets); WEIGHT: a positive
number, written after the last ':' (a GLOB may hold ':', e.g. gs://); the largest weight at most
mixture.MAX_WEIGHT_RATIO (10^6) times the smallest. --input_file and
--input_source are refused together (one names the run's only source, the other a mixture: a
general corpus beside the domain one is one more --input_source). A mixture reads with tf.data.

Eval sets, in this order: --eval_input_file's (unprefixed keys, google's block) when given, then
each --eval_source. Given neither: google's default, --input_file's files (unprefixed), or for a
mixture each --input_source's files as an eval set of the source's name.
"""
import collections
import math
import re

from bert_fin.input.stream import mixture

NAME = re.compile(r"^[A-Za-z0-9_-]+$")
BEST_METRIC = "masked_lm_loss"  # lower is better

EvalSet = collections.namedtuple("EvalSet", ["name", "files"])  # name "" -> unprefixed keys


def _name_and_rest(value, flag, syntax):
  name, sep, rest = value.partition("=")
  if not sep or not rest:
    raise ValueError("--%s=%s: expected %s" % (flag, value, syntax))
  if not NAME.match(name):
    raise ValueError("--%s=%s: the name %r may hold only letters, digits, '_' and '-'"
                     % (flag, value, name))
  return name, rest


def _unique(names, flag):
  seen = set()
  for name in names:
    if name in seen:
      raise ValueError("--%s: the name %r is given twice: each source needs its own name"
                       % (flag, name))
    seen.add(name)


def parse_input_sources(values):
  """[mixture.Source] of the --input_source values (None or []: no mixture); raises ValueError
  (one line naming the value) for a malformed one, a repeated name or too many sources."""
  syntax = "NAME=GLOB:WEIGHT, e.g. news=records/news/*.tfrecord:0.8"
  sources = []
  for value in values or ():
    name, rest = _name_and_rest(value, "input_source", syntax)
    pattern, sep, weight_text = rest.rpartition(":")
    try:
      weight = float(weight_text)
    except ValueError:
      weight = None
    if not sep or not pattern or weight is None:
      raise ValueError("--input_source=%s: expected %s (the weight after the last ':')"
                       % (value, syntax))
    if not (weight > 0 and math.isfinite(weight)):
      raise ValueError("--input_source=%s: the weight must be a positive number, got %s"
                       % (value, weight_text))
    sources.append(mixture.Source(name, pattern, weight))
  _unique([s.name for s in sources], "input_source")
  problem = mixture.weight_problem([s.weight for s in sources]) if sources else None
  if problem:
    raise ValueError("--input_source %s: %s: give weights within a factor %g of each other"
                     % (mixture.sources_text(sources), problem,
                        mixture.MAX_WEIGHT_RATIO))
  if len(sources) > mixture.MAX_SOURCES:
    raise ValueError("--input_source: %d sources, at most %d" % (len(sources),
                                                                 mixture.MAX_SOURCES))
  return sources


def parse_eval_sources(values):
  """[(name, glob)] of the --eval_source values; raises ValueError as parse_input_sources."""
  named = [_name_and_rest(value, "eval_source", "NAME=GLOB, e.g. news=records/news_dev/*")
           for value in values or ()]
  _unique([name for name, _ in named], "eval_source")
  return named


def eval_patterns(data, train_sources):
  """[(name, glob)] of the run's eval sets (module docstring); data: the settings.Data;
  train_sources: the run's [mixture.Source] (validate's)."""
  named = ([("", data.eval_input_file)] if data.eval_input_file else []) + parse_eval_sources(
      data.eval_source)
  if named:
    return named
  return [(s.name or "", s.input_file) for s in train_sources]


def validate(settings):
  """The run's [mixture.Source] (each --input_source, else --input_file's one source; parsed here,
  once a run); raises ValueError (one line) for source flags that cannot run together."""
  data = settings.data
  sources = parse_input_sources(data.input_source)
  if sources and data.input_file:
    raise ValueError("--input_file and --input_source are given together: pass the run's records "
                     "either as one --input_file or as weighted sources (the --input_file corpus "
                     "as one more --input_source=NAME=GLOB:WEIGHT)")
  if sources and data.input_pipeline != "tfdata":
    raise ValueError("--input_source needs --input_pipeline=tfdata (DALI reads one --input_file)")
  train_sources = sources or [mixture.input_file_source(data.input_file)]
  names = [name for name, _ in eval_patterns(data, train_sources) if name]  # --eval_source too
  best = settings.mode.best_eval_source
  if best is not None:
    if best not in names:
      raise ValueError("--best_eval_source=%s names no eval set (they are: %s)"
                       % (best, ", ".join(names) or "none: pass --eval_source=NAME=GLOB"))
    if not settings.mode.eval_continuous:
      raise ValueError("--best_eval_source=%s chooses the checkpoint --eval_continuous keeps in "
                       "best/, and this run evaluates no stream of checkpoints: run --do_eval "
                       "--eval_continuous beside the training (same --output_dir) with it, or "
                       "leave it out" % best)
  return train_sources


def best_metric(eval_sets, best_eval_source=None):
  """The eval key whose lowest value best/ keeps: NAME/masked_lm_loss of --best_eval_source, else
  the unprefixed set's masked_lm_loss, else the first eval set's."""
  if best_eval_source:
    return "%s/%s" % (best_eval_source, BEST_METRIC)
  names = [s.name for s in eval_sets]
  if not names or "" in names:
    return BEST_METRIC
  return "%s/%s" % (names[0], BEST_METRIC)
