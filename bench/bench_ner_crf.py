"""run_ner --use_crf vs the softmax tagger on samples/ner: entity micro-F1 (dev, test) and time.

  python bench/bench_ner_crf.py [--steps 150,600] [--seeds 1,2,3] [--quick]

Each run trains a 1-layer H=32 BERT from random init (vocab: the training units after google's
special tokens) with run_ner's own code (ner_run.run), --max_seq_length 32 (some sentences take
two windows), batch 32, learning rate 2e-3, then evaluates dev and the tagged test split. Prints
one line per (steps, tagger) with mean +- sample std over the seeds and the seconds a run, then
the CRF / softmax ratio of the mean dev micro-F1. --quick: 10 updates, one seed.
"""
import argparse
import os
import statistics
import sys
import tempfile
import time

import _quick  # bench/_quick.py

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)
QUICK = {"steps": "10", "seeds": "1"}
SPECIAL = (["[PAD]"] + ["[unused%d]" % i for i in range(1, 100)] +
           ["[UNK]", "[CLS]", "[SEP]", "[MASK]"])


def tiny_model(work_dir, data_dir):
  """(config file, vocab file): the training units, lower-cased, as the vocab; 1 layer, H=32."""
  from bert_fin import modeling  # pylint: disable=g-import-not-at-top
  with open(os.path.join(data_dir, "train.txt"), encoding="utf-8") as f:
    units = sorted({line.split()[0].lower() for line in f if line.strip()})
  tokens = SPECIAL + [u for u in units if u not in SPECIAL]
  vocab = os.path.join(work_dir, "vocab.txt")
  with open(vocab, "w", encoding="utf-8") as f:
    f.write("\n".join(tokens) + "\n")
  config = modeling.BertConfig(len(tokens), hidden_size=32, num_hidden_layers=1,
                               num_attention_heads=2, intermediate_size=64,
                               max_position_embeddings=64)
  config_file = os.path.join(work_dir, "bert_config.json")
  with open(config_file, "w", encoding="utf-8") as f:
    f.write(config.to_json_string())
  return config_file, vocab


def one_run(work_dir, data_dir, steps, seed, use_crf):
  """(dev micro-F1, test micro-F1, seconds) of one fine-tuning run."""
  from absl import flags  # pylint: disable=g-import-not-at-top
  from bert_fin.finetune.ner import flags as ner_flags  # pylint: disable=g-import-not-at-top
  from bert_fin.finetune.ner import orchestration as ner_run  # pylint: disable=g-import-not-at-top
  from bert_fin.training import distributed  # pylint: disable=g-import-not-at-top
  config_file, vocab = tiny_model(work_dir, data_dir)
  out = os.path.join(work_dir, "out")
  values = ner_flags.define_flags(flags.FlagValues())
  values(["bench", "--data_dir=" + data_dir, "--bert_config_file=" + config_file,
          "--vocab_file=" + vocab, "--output_dir=" + out, "--max_seq_length=32",
          "--train_batch_size=32", "--learning_rate=2e-3", "--num_train_steps=%d" % steps,
          "--seed=%d" % seed, "--use_crf=%s" % str(use_crf).lower(), "--do_train",
          "--do_eval", "--do_predict"])
  start = time.time()
  result = ner_run.run(ner_flags.settings_of(values), distributed.init(False))
  seconds = time.time() - start
  with open(os.path.join(out, ner_run.TEST_RESULTS_FILE), encoding="utf-8") as f:
    test = dict(line.strip().split(" = ", 1) for line in f if " = " in line)
  return result["eval_micro_f1"], float(test["eval_micro_f1"]), seconds


def _mean_std(values):
  return statistics.mean(values), (statistics.stdev(values) if len(values) > 1 else 0.0)


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--data_dir", default=os.path.join(REPO, "samples", "ner"))
  parser.add_argument("--steps", default="150,600", help="comma-separated update counts")
  parser.add_argument("--seeds", default="1,2,3", help="comma-separated seeds")
  args = _quick.parse_args(parser, argv, QUICK)
  from bert_fin import console_log  # pylint: disable=g-import-not-at-top
  console_log.configure(False)
  import tensorflow.compat.v1 as tf  # pylint: disable=g-import-not-at-top
  tf.logging.set_verbosity(tf.logging.ERROR)
  seeds = [int(s) for s in args.seeds.split(",")]
  for steps in [int(s) for s in args.steps.split(",")]:
    dev_means = {}
    for name, use_crf in (("softmax", False), ("crf", True)):
      runs = []
      for seed in seeds:
        with tempfile.TemporaryDirectory() as work_dir:
          runs.append(one_run(work_dir, args.data_dir, steps, seed, use_crf))
      dev, test, seconds = (_mean_std([r[i] for r in runs]) for i in range(3))
      dev_means[name] = dev[0]
      print("%-7s updates %4d  dev micro-F1 %.3f +- %.3f  test %.3f +- %.3f  %.1f s a run "
            "(%d seeds)" % (name, steps, dev[0], dev[1], test[0], test[1], seconds[0],
                            len(seeds)), flush=True)
    print("crf / softmax dev micro-F1 at %d updates: x%.3f" % (
        steps, dev_means["crf"] / max(dev_means["softmax"], 1e-9)), flush=True)
  return 0


if __name__ == "__main__":
  sys.exit(main())
