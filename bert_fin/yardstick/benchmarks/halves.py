"""The half split of a labelled eval file into dev (model selection) and test (the reported
figure), when a benchmark gives no separate dev list (CFLEB keeps its test labels private).

Stratified and reproducible: the rows of each stratum (a label) are shuffled by a generator
seeded with SPLIT_SEED and the stratum's own name, so a row's side depends only on the file and
its stratum, not on the other strata or the machine; dev takes the first half of each stratum
(an odd stratum's extra row goes to dev and test in turn, strata in sorted order).
"""
import hashlib

import numpy as np

SPLIT_SEED = 47


def _stratum_seed(stratum):
  digest = hashlib.sha256(("%d\0%s" % (SPLIT_SEED, stratum)).encode("utf-8")).digest()
  return int.from_bytes(digest[:4], "little")


def split_in_half(strata):
  """(dev indices, test indices), each sorted, of rows whose strata are `strata` (one hashable
  value a row: its label). Every row goes to exactly one side."""
  groups = {}
  for index, stratum in enumerate(strata):
    groups.setdefault(str(stratum), []).append(index)
  dev, test = [], []
  odd = 0
  for stratum in sorted(groups):
    members = np.array(groups[stratum])
    np.random.RandomState(_stratum_seed(stratum)).shuffle(members)
    half = len(members) // 2
    if len(members) % 2:
      half += odd % 2 == 0
      odd += 1
    dev += members[:half].tolist()
    test += members[half:].tolist()
  return sorted(dev), sorted(test)


def describe(dev, test, source):
  """The sentence results.md states about the split."""
  return ("dev and test are the two halves of %s (%d / %d rows; stratified by label, seed %d: "
          "bert_fin/yardstick/benchmarks/halves.py, reproducible)" % (
              source, len(dev), len(test), SPLIT_SEED))
