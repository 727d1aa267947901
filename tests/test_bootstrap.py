"""The paired bootstrap of a test figure's difference (bootstrap.py, scoring.py) and its place in
the yardstick's results.md / results.csv (differences.py, report.py), with the mark of a
checkpoint below random init."""
import csv

import numpy as np
import pytest

from bert_fin.yardstick import bootstrap
from bert_fin.yardstick import grid
from bert_fin.yardstick import report
from bert_fin.yardstick import scoring
from bert_fin.yardstick import task_kinds


def _correct(pattern):
  return np.asarray(pattern, np.float64)[:, None]


def test_identical_systems_differ_by_nothing_the_data_supports():
  stats = _correct(np.arange(100) % 3 == 0)
  difference = bootstrap.paired_difference([stats], [stats], scoring.MEAN)
  assert difference.delta == 0.0 and difference.low == 0.0 and difference.high == 0.0
  assert bootstrap.supported(difference) is None


def test_pairing_finds_a_small_difference_on_the_same_examples():
  n = 200
  weaker = _correct(np.arange(n) < 100)
  stronger = _correct(np.arange(n) < 110)  # right where weaker is, and on 10 examples more
  difference = bootstrap.paired_difference([stronger], [weaker], scoring.MEAN)
  assert difference.delta == pytest.approx(0.05)
  assert 0 < difference.low < 0.05 < difference.high
  assert bootstrap.supported(difference) == "better"
  assert bootstrap.supported(bootstrap.paired_difference([weaker], [stronger],
                                                         scoring.MEAN)) == "worse"


def test_noise_of_the_same_size_is_not_supported():
  rng = np.random.RandomState(0)
  a = _correct(rng.rand(60) < 0.6)
  b = _correct(rng.rand(60) < 0.6)
  difference = bootstrap.paired_difference([a], [b], scoring.MEAN)
  assert difference.low < 0 < difference.high


def test_seeds_are_pooled_and_f1_is_computed_from_summed_counts():
  true = [0, 1, 1, 2, 2, 0]
  seed_1 = scoring.example_statistics(true, [0, 1, 0, 2, 2, 1], ["none", "a", "b"],
                                      ["a", "b"], scoring.F1)
  seed_2 = scoring.example_statistics(true, [0, 1, 1, 2, 0, 0], ["none", "a", "b"],
                                      ["a", "b"], scoring.F1)
  # seed 1: tp 3, fp 1, fn 1; seed 2: tp 3, fp 0, fn 1 -> pooled 6 / (12 + 1 + 2)
  assert bootstrap.figure([seed_1, seed_2], scoring.F1) == pytest.approx(12 / 15)
  figures = scoring.figures(true, [0, 1, 0, 2, 2, 1], ["none", "a", "b"], ["a", "b"])
  assert figures["micro_f1"] == pytest.approx(6 / 8)
  difference = bootstrap.paired_difference([seed_1, seed_2], [seed_2, seed_2], scoring.F1)
  assert difference.seeds == 2 and difference.examples == 6
  assert difference.delta == pytest.approx(12 / 15 - 12 / 14)
  with pytest.raises(ValueError, match="other test examples"):
    bootstrap.paired_difference([seed_1], [seed_1[:4]], scoring.F1)


def _plan():
  checkpoints = [grid.Checkpoint(name, None, "c", "v", True)
                 for name in ("base", "ours", grid.RANDOM_INIT)]
  task = task_kinds.TaskSpec("t", "data", "jsonl", "classification")
  settings = grid.Settings("out", [1, 2], [1e-4], 1.0, 16, 8, 8, 0.1, "first", 0.1, False)
  data = {"t": task_kinds.TaskData([], ["a", "b"], [0, 1] * 50, {"train": 9, "dev": 9,
                                                                  "test": 100})}
  unk = {("t", c.name): 0.0 for c in checkpoints}
  return grid.Plan(checkpoints, [task], settings, data, unk, ["x"] * 3, [])


def _record(seed, right):
  examples = (np.arange(100) < right).astype(float)[:, None].tolist()
  return {"argv": ["--seed=%d" % seed], "results": {
      "dev": {"accuracy": right / 100, "macro_f1": right / 100},
      "test": {"accuracy": right / 100, "macro_f1": right / 100}, "collapsed": False,
      "test_examples": examples, "statistic": scoring.MEAN}}


def test_results_say_which_differences_the_data_supports_and_mark_below_random_init():
  plan = _plan()
  records = {("t", "base", 1e-4): [_record(1, 60), _record(2, 62)],
             ("t", "ours", 1e-4): [_record(1, 80), _record(2, 81)],
             ("t", grid.RANDOM_INIT, 1e-4): [_record(1, 70), _record(2, 70)]}
  rows = report.summarize(plan, records)
  comparisons = report.differences.compare(plan, records, rows)
  pairs = [(c.checkpoint, c.against) for c in comparisons]
  assert pairs == [("base", grid.RANDOM_INIT), ("ours", "base"), ("ours", grid.RANDOM_INIT)]
  text = report.markdown_text(plan, rows, None, comparisons)
  assert "ours better than base (+0.195 [" in text
  assert "base worse than random-init (-0.090 [" in text
  assert "-0.090%s" % report.BELOW_FLOOR in text
  assert "| ours | base | +0.195 [" in text
  table = {r["checkpoint"]: r for r in csv.DictReader(
      report.csv_text(plan, rows, comparisons).splitlines())}
  assert float(table["ours"]["test_vs_base_delta"]) == pytest.approx(0.195)
  assert float(table["ours"]["test_vs_base_low"]) > 0
  assert table["base"]["test_vs_base_delta"] == ""
  assert float(table["base"]["test_vs_random_init_high"]) < 0


def test_ner_cells_give_each_test_sentences_entity_counts_summing_to_run_ners_f1(tmp_path):
  """The NER kind reads a cell's predictions file (run_ner's format: the input line + the
  predicted tag) back into per-sentence [tp, fp, fn]: their sums are run_ner's test micro-F1,
  so the paired bootstrap has NER examples to resample (it said "n/a" without them)."""
  import collections  # pylint: disable=import-outside-toplevel
  from bert_fin.finetune.ner import data as ner_data  # pylint: disable=import-outside-toplevel
  from bert_fin.finetune.ner import metrics as ner_metrics  # pylint: disable=import-outside-toplevel
  from bert_fin.training.monitor import eval_results  # pylint: disable=import-outside-toplevel
  kind = task_kinds.get("ner")
  task = collections.namedtuple("Task", "data_dir data_format")("samples/ner", "auto")
  data = kind.check(task)
  test = ner_data.read_split("samples/ner", "test", ner_data.CHARS, data.labels)
  gold = [s.tags for s in test.sentences]
  outside = [t for t in data.labels if t == "O"][0]
  predicted = [[outside] * len(tags) if i % 3 == 0 else list(tags)  # every third: no entity
               for i, tags in enumerate(gold)]
  predicted[1] = ["B-" + t[2:] if t.startswith("I-") else t for t in predicted[1]]  # split
  report = ner_metrics.entity_report(gold, predicted)
  for name in (eval_results.EVAL_RESULTS_FILE, "test_results.txt"):
    eval_results.write_results_file(str(tmp_path / name), report)
  (tmp_path / ner_data.PREDICTIONS_FILE[ner_data.CHARS]).write_text(
      "".join(line + "\n" for line in ner_data.prediction_lines(test, predicted)),
      encoding="utf-8")
  result = kind.results(task, data, str(tmp_path))
  counts = np.asarray(result["test_examples"])
  assert result["statistic"] == scoring.F1 and counts.shape == (len(gold), 3)
  assert scoring.f1_of(*counts.sum(axis=0)) == pytest.approx(report["eval_micro_f1"], abs=1e-9)
  assert counts[0, 0] == counts[0, 1] == 0 and counts[0, 2] > 0  # nothing predicted: all fn
  assert counts[2, 1] == counts[2, 2] == 0  # predicted as gold: tp only
  assert 0 < report["eval_micro_f1"] < 1
  (tmp_path / ner_data.PREDICTIONS_FILE[ner_data.CHARS]).write_text("贵\tB-ORG\n", "utf-8")
  with pytest.raises(ValueError, match="not the %d test sentences" % len(gold)):
    kind.results(task, data, str(tmp_path))
