"""The financial judge's two choices, measured with the yardstick on the benchmark samples:
entity markers vs plain [CLS] pair input for relations (finre), and dev-chosen thresholds vs a
fixed 0.5 for multi-label topics (finnl).

  python bench/bench_judge.py [--checkpoint=PREFIX --bert_config_file=F --vocab_file=V]

Runs tools/compare_checkpoints.py once (into --output_dir, resumable) with three tasks read from
samples/benchmarks/cfleb: finre as entities=markers and as entities=pair (the same examples, so
the two are paired example by example), and finnl (--multi_label). Without --checkpoint the
model is random init of a 2-layer H=64 BERT whose WordPiece vocab is trained on the samples'
text (bench/_quick.py). Prints per representation the test micro-F1 (mean +- std over the
seeds), markers / pair as a ratio and the paired bootstrap interval of markers - pair (seeds
pooled); then finnl's test micro-F1 with each cell's dev-chosen thresholds (multi_label.json)
and with 0.5 for every label, as a ratio. The samples are small (12 test rows a task): the
figures say which way a choice goes on them, with the interval saying how sure that is.
--quick: one seed, one epoch (the path, not the figures).
"""
import argparse
import glob
import json
import os
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, REPO)

import _quick  # noqa: E402  (bench/_quick.py)
from bert_fin.cli import compare_checkpoints  # noqa: E402
from bert_fin.finetune.classify import multi_label  # noqa: E402
from bert_fin.yardstick import bootstrap  # noqa: E402
from bert_fin.yardstick import scoring  # noqa: E402

SAMPLES = os.path.join(REPO, "samples", "benchmarks", "cfleb")
QUICK = dict(seeds="1", num_train_epochs=1)
FIXED_THRESHOLD = 0.5


def tiny_random_bert(work):
  """(config, vocab) of a 2-layer H=64 BERT whose vocab is trained on the samples' text."""
  import tensorflow.compat.v1 as tf  # pylint: disable=g-import-not-at-top
  from bert_fin import modeling  # pylint: disable=g-import-not-at-top
  texts = []
  for path in glob.glob(os.path.join(SAMPLES, "*", "*.json")):
    with open(path, encoding="utf-8") as f:
      texts += [" ".join(str(field) for field in row) for row in json.load(f)]
  config_file, vocab_file, _ = _quick.tiny_bert(
      work, texts, 128, lambda config: modeling.BertModel(config, False,
                                                          tf.zeros([1, 8], tf.int32)),
      vocab_size=600, hidden_size=64, intermediate_size=128)
  return config_file, vocab_file


def _cells(output_dir, task):
  records = []
  for path in sorted(glob.glob(os.path.join(output_dir, "cells", task, "*", "*", "cell.json"))):
    with open(path, encoding="utf-8") as f:
      records.append((os.path.dirname(path), json.load(f)))
  return records


def _test_figures(output_dir, task, metric):
  return [record["results"]["test"][metric] for _, record in _cells(output_dir, task)]


def markers_vs_pair(output_dir):
  """Prints finre's test micro-F1 per representation, the ratio and the paired interval."""
  figures = {form: _test_figures(output_dir, "re_" + form, "micro_f1")
             for form in ("markers", "pair")}
  for form, values in figures.items():
    print("finre %-7s test micro-F1 %.3f +- %.3f (%d seeds)" % (
        form, np.mean(values), np.std(values, ddof=1) if len(values) > 1 else 0.0, len(values)))
  examples = {form: [record["results"]["test_examples"]
                     for _, record in _cells(output_dir, "re_" + form)]
              for form in ("markers", "pair")}
  difference = bootstrap.paired_difference(examples["markers"], examples["pair"], scoring.F1)
  ratio = np.mean(figures["markers"]) / max(np.mean(figures["pair"]), 1e-9)
  print("finre markers / pair test micro-F1: x%.3f; markers - pair %+.3f [%+.3f, %+.3f] (95%%, "
        "paired bootstrap, seeds pooled): %s" % (
            ratio, difference.delta, difference.low, difference.high,
            bootstrap.supported(difference) or "no difference shown"))


def thresholds_vs_fixed(output_dir):
  """Prints finnl's test micro-F1 with the dev-chosen thresholds and with a fixed 0.5."""
  with open(os.path.join(output_dir, "benchmarks", "nl", "test.jsonl"), encoding="utf-8") as f:
    labels_of_test = [json.loads(line)["label"] for line in f]
  chosen, fixed = [], []
  for directory, _ in _cells(output_dir, "nl"):
    record = multi_label.read_thresholds(directory)
    truth = multi_label.multi_hot(labels_of_test, record.labels)
    probabilities = np.loadtxt(os.path.join(directory, "test_results.tsv"), ndmin=2)
    for thresholds, figures in ((record.thresholds, chosen), (FIXED_THRESHOLD, fixed)):
      predicted = multi_label.predict(probabilities, thresholds)
      figures.append(multi_label.f1_figures(truth, predicted)["micro_f1"])
  print("finnl test micro-F1: dev-chosen thresholds %.3f, fixed %.1f %.3f (%d seeds): x%.3f" % (
      np.mean(chosen), FIXED_THRESHOLD, np.mean(fixed), len(chosen),
      np.mean(chosen) / max(np.mean(fixed), 1e-9)))


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--checkpoint")
  parser.add_argument("--bert_config_file")
  parser.add_argument("--vocab_file")
  parser.add_argument("--output_dir", default=None)
  parser.add_argument("--seeds", default="1,2,3")
  parser.add_argument("--num_train_epochs", type=int, default=3)
  parser.add_argument("--learning_rate", default="5e-4")
  args = _quick.parse_args(parser, argv, QUICK)
  work = tempfile.mkdtemp(prefix="bench_judge_")
  output_dir = args.output_dir or os.path.join(work, "out")
  if args.checkpoint:
    if not (args.bert_config_file and args.vocab_file):
      parser.error("--checkpoint needs --bert_config_file and --vocab_file")
    model = ["--checkpoint=given=" + args.checkpoint, "--no_random_init"]
    config_file, vocab_file = args.bert_config_file, args.vocab_file
  else:
    config_file, vocab_file = tiny_random_bert(work)
    model = ["--checkpoint=random=none"]
  status = compare_checkpoints.main(model + [
      "--output_dir=" + output_dir, "--bert_config_file=" + config_file,
      "--vocab_file=" + vocab_file, "--seeds=" + args.seeds,
      "--learning_rates=" + args.learning_rate, "--num_train_epochs=%d" % args.num_train_epochs,
      "--max_seq_length=64", "--train_batch_size=16", "--no_progress",
      "--task=re_markers=%s,format=cfleb,entities=markers" % os.path.join(SAMPLES, "finre"),
      "--task=re_pair=%s,format=cfleb,entities=pair" % os.path.join(SAMPLES, "finre"),
      "--task=nl=%s,format=cfleb" % os.path.join(SAMPLES, "finnl")])
  if status:
    return status
  print()
  markers_vs_pair(output_dir)
  thresholds_vs_fixed(output_dir)
  return 0


if __name__ == "__main__":
  sys.exit(main())
