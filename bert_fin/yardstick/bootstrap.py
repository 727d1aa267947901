"""The paired bootstrap of a difference of test figures: checkpoint A vs checkpoint B on the same
test examples, pooled over seeds.

Each checkpoint's cells (one per seed) give a float [n, k] array of example statistics
(scoring.py: a figure is a function of their column sums). One resample draws n example indices
with replacement, the SAME indices for A and B (paired: the example's difficulty cancels) and for
every seed (pooled: the seeds' statistics of a drawn example are summed), and computes
figure(A) - figure(B). The interval is the 2.5th and 97.5th percentile of RESAMPLES such
differences (percentile bootstrap, Efron & Tibshirani 1993; Koehn 2004 for paired tests of NLP
systems); `supported` when it excludes 0.
"""
import collections

import numpy as np

from bert_fin.yardstick import scoring

RESAMPLES = 2000
SEED = 47
LEVEL = 0.95

Difference = collections.namedtuple("Difference", ["delta", "low", "high", "examples", "seeds"])
Difference.__doc__ = """delta: figure(A) - figure(B) on the pooled test examples; low, high: the
LEVEL percentile interval; examples: n; seeds: the seeds pooled."""


def _pooled(per_seed):
  """float [seeds, n, k] of a list of [n, k] arrays; ValueError when their shapes differ."""
  arrays = [np.asarray(a, np.float64) for a in per_seed]
  if not arrays or any(a.shape != arrays[0].shape or a.ndim != 2 for a in arrays):
    raise ValueError("the seeds' example statistics differ in shape: %s" % (
        [a.shape for a in arrays],))
  return np.stack(arrays)


def figure(per_seed, statistic):
  """The pooled figure of a checkpoint's seeds ([n, k] arrays): every seed's examples counted."""
  stats = _pooled(per_seed)
  return scoring.statistic_value(stats.sum(axis=(0, 1)), stats.shape[0] * stats.shape[1],
                                 statistic)


def paired_difference(per_seed_a, per_seed_b, statistic, resamples=RESAMPLES, seed=SEED):
  """Difference of A minus B (lists of float [n, k] arrays, seed by seed, the same test examples
  in the same order). ValueError when A and B cover other examples."""
  a, b = _pooled(per_seed_a), _pooled(per_seed_b)
  if a.shape[1:] != b.shape[1:]:
    raise ValueError("A and B were scored on other test examples: %s vs %s" % (a.shape, b.shape))
  per_example_a, per_example_b = a.sum(axis=0), b.sum(axis=0)  # [n, k]: seeds pooled
  n, count = a.shape[1], a.shape[1] * a.shape[0]
  count_b = b.shape[1] * b.shape[0]
  delta = (scoring.statistic_value(per_example_a.sum(axis=0), count, statistic)
           - scoring.statistic_value(per_example_b.sum(axis=0), count_b, statistic))
  generator = np.random.RandomState(seed)
  differences = np.empty(resamples)
  for r in range(resamples):
    weights = np.bincount(generator.randint(0, n, n), minlength=n).astype(np.float64)
    differences[r] = (scoring.statistic_value(weights @ per_example_a, count, statistic)
                      - scoring.statistic_value(weights @ per_example_b, count_b, statistic))
  tail = 100.0 * (1.0 - LEVEL) / 2.0
  low, high = np.percentile(differences, [tail, 100.0 - tail])
  return Difference(float(delta), float(low), float(high), n, a.shape[0])


def supported(difference):
  """'better' / 'worse' when the interval excludes 0, else None (the data cannot tell)."""
  if difference.low > 0:
    return "better"
  if difference.high < 0:
    return "worse"
  return None
