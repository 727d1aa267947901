"""Does fine-tuning collapse to one class? google's pooled [CLS] (--pooling=first) vs the mean of
the token states (--pooling=mean), from a pretrained checkpoint and from random init, seeds 1-5.

  python bench/bench_finetune_pooling.py --checkpoint=demo_out/model \\
      --bert_config_file=demo_out/bert_config.json --vocab_file=demo_out/vocab.txt

Runs the yardstick (tools/compare_checkpoints.py) once per pooling on samples/sentiment with the
demo's fine-tuning (lr 5e-4, 2 epochs, max_seq_length 64, batch 32) into --output_dir/<pooling>/
(resumable), then prints per pooling and checkpoint: test accuracy mean +- std and how many seeds
collapsed (every dev prediction one class). The figures of the README's "Does pretraining pay?"
come from this script on the demo's checkpoint.
"""
import argparse
import csv
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bert_fin.cli import compare_checkpoints  # noqa: E402


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--checkpoint", required=True)
  parser.add_argument("--bert_config_file", required=True)
  parser.add_argument("--vocab_file", required=True)
  parser.add_argument("--output_dir", default="/tmp/bench_finetune_pooling")
  parser.add_argument("--seeds", default="1,2,3,4,5")
  parser.add_argument("--poolings", default="first,mean")
  args = parser.parse_args(argv)
  summary = []
  for pooling in args.poolings.split(","):
    out = os.path.join(args.output_dir, pooling)
    status = compare_checkpoints.main([
        "--output_dir=" + out, "--checkpoint=pretrained=" + args.checkpoint,
        "--bert_config_file=" + args.bert_config_file, "--vocab_file=" + args.vocab_file,
        "--task=sentiment=samples/sentiment", "--seeds=" + args.seeds, "--learning_rates=5e-4",
        "--num_train_epochs=2", "--max_seq_length=64", "--train_batch_size=32",
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
        float(row["test_accuracy_std"]), float(row["test_macro_f1_mean"]),
        float(row["test_macro_f1_std"]), row["collapsed"], row["seeds"]))
  return 0


if __name__ == "__main__":
  sys.exit(main())
