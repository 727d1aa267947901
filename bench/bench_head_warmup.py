"""Continued pretraining from an encoder-only checkpoint: with and without --head_warmup_steps.

  python bench/bench_head_warmup.py --base_checkpoint=base/model.ckpt-1200 \\
      --bert_config_file=bert_config.json --input_file='records0/train-*.tfrecord' \\
      --eval_input_file='records1/train-*.tfrecord' --output_dir=/tmp/bench_head_warmup

Writes --base_checkpoint without its pretraining heads (no cls/ variables: what an encoder-only
release holds) and continues pretraining from it for --num_train_steps updates, the same seed,
data, learning rate and warm-up each time:
  no warm-up      every variable from update 0 (random masked-LM and next-sentence heads);
  head warm-up N  --head_warmup_steps=N (the heads alone for N updates, counted in the total);
  heads kept      the full base checkpoint (the heads it was pretrained with: the ceiling).
Each run's checkpoints every --eval_every updates are evaluated on --eval_input_file
(run_pretraining --do_eval, the same --max_eval_steps batches) and a table of masked_lm_loss /
masked_lm_accuracy by update is printed, then the final losses as ratios to "no warm-up".
Without --base_checkpoint / --bert_config_file / --input_file, `make demo`'s demo_out/ (its
checkpoint, config and records) is used; without those it says it skipped.
--finetune_task=DIR adds the fine-tuning yardstick (tools/compare_checkpoints.py, one task,
--seeds) on the final checkpoints. --quick: a tiny random "pretrained" model on tiny synthetic
records (the path, not the figures).
"""
import argparse
import csv
import os
import re
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, REPO)
sys.path.insert(0, os.path.join(REPO, "tests", "fixtures", "training"))

import _quick  # noqa: E402  (bench/_quick.py)

RUN_PRETRAINING = os.path.join(REPO, "run_pretraining.py")
DEMO_OUT = os.path.join(REPO, "demo_out")  # make demo's outputs: the defaults
QUICK = dict(num_train_steps=4, head_warmup_steps=2, eval_every=4, num_warmup_steps=1,
             max_eval_steps=2, train_batch_size=4, max_seq_length=32, max_predictions_per_seq=5)


def quick_inputs(args):
  """--quick: tiny records (tests/fixtures/training/tiny_data.py) and a random tiny checkpoint."""
  import numpy as np  # pylint: disable=g-import-not-at-top
  import tiny_data  # pylint: disable=g-import-not-at-top
  from bert_fin import modeling  # pylint: disable=g-import-not-at-top
  from bert_fin.modeling import checkpoint  # pylint: disable=g-import-not-at-top
  from bert_fin.training.graph import model_fn  # pylint: disable=g-import-not-at-top
  work = tempfile.mkdtemp(prefix="bench_head_warmup_")
  tiny_data.write_records(os.path.join(work, "records"), num_files=1, per_file=24,
                          seq_len=args.max_seq_length, max_predictions=args.max_predictions_per_seq)
  args.input_file = args.eval_input_file = os.path.join(work, "records", "*.tfrecord")
  args.bert_config_file = tiny_data.write_config(os.path.join(work, "bert_config.json"))
  config = modeling.BertConfig.from_json_file(args.bert_config_file)
  rng = np.random.RandomState(0)
  tensors = {name: (np.ones(shape) if name.endswith("gamma") else rng.normal(0.0, 0.02, shape))
             .astype(np.float32)
             for name, shape in sorted(model_fn.pretraining_variable_shapes(config).items())}
  args.base_checkpoint = os.path.join(work, "base", "model.ckpt")
  checkpoint.write_checkpoint(args.base_checkpoint, tensors)
  args.output_dir = os.path.join(work, "out")


def write_encoder_only(base_checkpoint, prefix):
  """base_checkpoint's model weights without the pretraining heads (cls/...) as `prefix`."""
  from bert_fin.modeling import checkpoint  # pylint: disable=g-import-not-at-top
  tensors = {name: value for name, value in checkpoint.model_tensors(base_checkpoint).items()
             if not name.startswith("cls/")}
  os.makedirs(os.path.dirname(prefix), exist_ok=True)
  checkpoint.write_checkpoint(prefix, tensors)
  return prefix


def _common(args):
  return ["--bert_config_file=" + args.bert_config_file, "--max_seq_length=%d" % args.max_seq_length,
          "--max_predictions_per_seq=%d" % args.max_predictions_per_seq,
          "--intra_op_parallelism_threads=1", "--inter_op_parallelism_threads=1"]


def _run(command):
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", OMP_NUM_THREADS="1", PYTHONPATH=REPO)
  proc = subprocess.run(command, capture_output=True, text=True, env=env)
  if proc.returncode:
    sys.exit("failed (%d): %s\n%s" % (proc.returncode, " ".join(command), proc.stderr[-3000:]))
  return proc


def train(args, name, init_checkpoint, head_warmup_steps):
  """run_pretraining --do_train into OUTPUT_DIR/name (kept if complete: the bench resumes)."""
  output_dir = os.path.join(args.output_dir, name)
  command = [sys.executable, RUN_PRETRAINING, "--do_train", "--input_file=" + args.input_file,
             "--output_dir=" + output_dir, "--init_checkpoint=" + init_checkpoint,
             "--train_batch_size=%d" % args.train_batch_size,
             "--learning_rate=%g" % args.learning_rate,
             "--num_train_steps=%d" % args.num_train_steps,
             "--num_warmup_steps=%d" % args.num_warmup_steps,
             "--save_checkpoints_steps=%d" % args.eval_every, "--seed=%d" % args.seed,
             "--log_every_n_steps=%d" % args.eval_every,
             "--head_warmup_steps=%d" % head_warmup_steps, "--do_eval"] + _eval_flags(args)
  print("# " + " ".join(command[1:]), flush=True)
  _run(command)
  return output_dir


def _eval_flags(args):
  return ["--eval_input_file=" + args.eval_input_file,
          "--eval_batch_size=%d" % args.eval_batch_size,
          "--max_eval_steps=%d" % args.max_eval_steps] + _common(args)


def eval_results(output_dir):
  """{metric: value} of google's eval block in output_dir/eval_results.txt."""
  with open(os.path.join(output_dir, "eval_results.txt"), encoding="utf-8") as f:
    return {m.group(1): float(m.group(2))
            for m in re.finditer(r"^(\w+) = ([-\d.e]+)$", f.read(), re.M)}


def evaluate(args, checkpoint_prefix):
  """eval_results of run_pretraining --do_eval on checkpoint_prefix (an earlier checkpoint of a
  run; the training run evaluates its final one itself)."""
  with tempfile.TemporaryDirectory() as out:
    _run([sys.executable, RUN_PRETRAINING, "--do_eval", "--num_train_steps=0",
          "--input_file=" + args.eval_input_file, "--output_dir=" + out,
          "--init_checkpoint=" + checkpoint_prefix] + _eval_flags(args))
    return eval_results(out)


def finetune(args, finals):
  """The yardstick on --finetune_task for the final checkpoints: {name: (mean, std)}."""
  from bert_fin.cli import compare_checkpoints  # pylint: disable=g-import-not-at-top
  out = os.path.join(args.output_dir, "yardstick")
  status = compare_checkpoints.main(
      ["--output_dir=" + out, "--bert_config_file=" + args.bert_config_file,
       "--vocab_file=" + args.vocab_file, "--task=task=" + args.finetune_task,
       "--seeds=" + args.seeds, "--learning_rates=5e-4", "--num_train_epochs=2",
       "--max_seq_length=%d" % args.max_seq_length, "--no_random_init", "--no_progress",
       "--pooling=mean"] + ["--checkpoint=%s=%s" % (name.replace(" ", "_"), path)
                            for name, path in finals.items()])
  if status:
    sys.exit("compare_checkpoints failed")
  with open(os.path.join(out, "results.csv"), encoding="utf-8") as f:
    return {row["checkpoint"]: (float(row["test_accuracy_mean"]),
                                float(row["test_accuracy_std"] or 0)) for row in csv.DictReader(f)}


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--base_checkpoint", help="default: make demo's demo_out/model")
  parser.add_argument("--bert_config_file", help="default: demo_out/bert_config.json")
  parser.add_argument("--vocab_file", help="for --finetune_task")
  parser.add_argument("--input_file", help="training records (default: the demo's)")
  parser.add_argument("--eval_input_file", help="held-out records for the eval")
  parser.add_argument("--output_dir", default="/tmp/bench_head_warmup")
  parser.add_argument("--num_train_steps", type=int, default=300)
  parser.add_argument("--head_warmup_steps", type=int, default=100)
  parser.add_argument("--num_warmup_steps", type=int, default=30)
  parser.add_argument("--learning_rate", type=float, default=5e-4)
  parser.add_argument("--eval_every", type=int, default=100)
  parser.add_argument("--max_eval_steps", type=int, default=50)
  parser.add_argument("--train_batch_size", type=int, default=16)
  parser.add_argument("--eval_batch_size", type=int, default=32)
  parser.add_argument("--max_seq_length", type=int, default=64)
  parser.add_argument("--max_predictions_per_seq", type=int, default=10)
  parser.add_argument("--seed", type=int, default=2)
  parser.add_argument("--finetune_task", default=None, help="a run_classifier jsonl task dir")
  parser.add_argument("--seeds", default="1,2,3", help="fine-tuning seeds")
  args = _quick.parse_args(parser, argv, QUICK)
  if args.quick:
    quick_inputs(args)
  else:
    args.base_checkpoint = args.base_checkpoint or os.path.join(DEMO_OUT, "model")
    args.bert_config_file = args.bert_config_file or os.path.join(DEMO_OUT, "bert_config.json")
    args.input_file = args.input_file or os.path.join(DEMO_OUT, "records", "train-*.tfrecord")
    if not (os.path.exists(args.base_checkpoint) and os.path.exists(args.bert_config_file)):
      _quick.skipped("bench_head_warmup", "no --base_checkpoint / --bert_config_file (default: "
                     "make demo's %s): run `make demo` or pass them" % DEMO_OUT)
      return 0
  args.eval_input_file = args.eval_input_file or args.input_file
  encoder = write_encoder_only(args.base_checkpoint,
                               os.path.join(args.output_dir, "encoder_only", "model.ckpt"))
  runs = {"no warm-up": (encoder, 0),
          "head warm-up %d" % args.head_warmup_steps: (encoder, args.head_warmup_steps),
          "heads kept": (args.base_checkpoint, 0)}
  steps = sorted(set(range(args.eval_every, args.num_train_steps, args.eval_every)) |
                 {args.num_train_steps})
  table = {}
  for name, (init, head_steps) in runs.items():
    output_dir = train(args, name.replace(" ", "_"), init, head_steps)
    table[name] = [evaluate(args, os.path.join(output_dir, "model.ckpt-%d" % step))
                   for step in steps[:-1]] + [eval_results(output_dir)]
  print("\nmasked_lm_loss / masked_lm_accuracy on %s after N updates" % args.eval_input_file)
  print("%-18s" % "run" + "".join("%18d" % step for step in steps))
  for name, results in table.items():
    print("%-18s" % name + "".join("%11.4f / %.3f" % (r["masked_lm_loss"],
                                                      r["masked_lm_accuracy"]) for r in results))
  baseline = table["no warm-up"][-1]["masked_lm_loss"]
  for name, results in table.items():
    print("final masked_lm_loss %-18s %.4f  (x%.3f of no warm-up)" % (
        name, results[-1]["masked_lm_loss"], results[-1]["masked_lm_loss"] / baseline))
  if args.finetune_task:
    finals = {name: os.path.join(args.output_dir, name.replace(" ", "_"),
                                 "model.ckpt-%d" % args.num_train_steps) for name in runs}
    for name, (mean, std) in finetune(args, finals).items():
      print("fine-tuning test accuracy %-18s %.3f +- %.3f" % (name, mean, std))
  return 0


if __name__ == "__main__":
  sys.exit(main())
