"""Does fine-tuning collapse to one class? google's pooled [CLS] (--pooling=first) vs the mean of
the token states (--pooling=mean), from a pretrained checkpoint and from random init, seeds 1-5.

  python bench/bench_finetune_pooling.py --checkpoint=demo_out/model \\
      --bert_config_file=demo_out/bert_config.json --vocab_file=demo_out/vocab.txt

Runs the yardstick (tools/compare_checkpoints.py) once per pooling on samples/sentiment with the
demo's fine-tuning (lr 5e-4, 2 epochs, max_seq_length 64, batch 32) into --output_dir/<pooling>/
(resumable), then prints per pooling and checkpoint: test accuracy mean +- std and how many seeds
collapsed (every dev prediction one class). The figures of the README's "Does pretraining pay?"
come from this script on the demo's checkpoint. --quick: a tiny random-weight "checkpoint" and the
first 64 / 32 / 32 reviews of each split, mean pooling, one seed, one epoch (the path, not
the figures).
"""
import argparse
import csv
import os
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, REPO)

import _quick  # noqa: E402  (bench/_quick.py)
from bert_fin.cli import compare_checkpoints  # noqa: E402

TASK = os.path.join(REPO, "samples", "sentiment")
QUICK = dict(seeds="1", num_train_epochs=1, max_seq_length=32, poolings="mean")
QUICK_EXAMPLES = {"train": 64, "dev": 32, "test": 32}


def quick_inputs(args):
  """--quick: args.task_dir = the head of each split of samples/sentiment, and a tiny BERT with
  random weights as --checkpoint (bench/_quick.py), in a temp dir."""
  import tensorflow.compat.v1 as tf  # pylint: disable=g-import-not-at-top
  from bert_fin import modeling  # pylint: disable=g-import-not-at-top
  work = tempfile.mkdtemp(prefix="bench_finetune_pooling_")
  args.task_dir, texts = _quick.task_head(TASK, work, QUICK_EXAMPLES)
  args.bert_config_file, args.vocab_file, args.checkpoint = _quick.tiny_bert(
      work, texts, args.max_seq_length,
      lambda config: modeling.BertModel(config, False, tf.zeros([1, 8], tf.int32)),
      vocab_size=2000)
  args.output_dir = os.path.join(work, "out")


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--checkpoint")
  parser.add_argument("--bert_config_file")
  parser.add_argument("--vocab_file")
  parser.add_argument("--task_dir", default=TASK)
  parser.add_argument("--output_dir", default="/tmp/bench_finetune_pooling")
  parser.add_argument("--seeds", default="1,2,3,4,5")
  parser.add_argument("--poolings", default="first,mean")
  parser.add_argument("--num_train_epochs", type=int, default=2)
  parser.add_argument("--max_seq_length", type=int, default=64)
  args = _quick.parse_args(parser, argv, QUICK)
  if args.quick:
    quick_inputs(args)
  elif not (args.checkpoint and args.bert_config_file and args.vocab_file):
    parser.error("--checkpoint, --bert_config_file and --vocab_file are required")
  summary = []
  for pooling in args.poolings.split(","):
    out = os.path.join(args.output_dir, pooling)
    status = compare_checkpoints.main([
        "--output_dir=" + out, "--checkpoint=pretrained=" + args.checkpoint,
        "--bert_config_file=" + args.bert_config_file, "--vocab_file=" + args.vocab_file,
        "--task=sentiment=" + args.task_dir, "--seeds=" + args.seeds, "--learning_rates=5e-4",
        "--num_train_epochs=%d" % args.num_train_epochs,
        "--max_seq_length=%d" % args.max_seq_length, "--train_batch_size=32",
        "--pooling=" + pooling, "--no_progress"])
    if status:
      return status
    with open(os.path.join(out, "results.csv")) as f:
      for row in csv.DictReader(f):
        summary.append((pooling, row))
  print("\npooling  checkpoint   test accuracy    test macro-F1    collapsed")
  for pooling, row in summary:
    print("%-8s %-12s %.3f +- %.3f    %.3f +- %.3f    %s/%s" % (
        pooling, row["checkpoint"], float(row["test_accuracy_mean"]),
        float(row["test_accuracy_std"] or 0), float(row["test_macro_f1_mean"]),
        float(row["test_macro_f1_std"] or 0), row["collapsed"], row["seeds"]))
  return 0


if __name__ == "__main__":
  sys.exit(main())
