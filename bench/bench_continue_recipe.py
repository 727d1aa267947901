"""Continued pretraining on domain text: what each way of keeping the general knowledge buys.

  python bench/bench_continue_recipe.py --output_dir=/tmp/bench_continue_recipe \\
      --general='../shared/corpora/reviews/*.txt' --domain=samples/corpus

1. a "general" checkpoint: a tiny BERT (2 layers, H=64, as `make demo`) pretrained for
   --general_steps on --general text only (review lines; --quick: synthetic lines), its vocab
   built by tools/build_vocab.py over both texts (the demo's steps: clean_corpus, build_vocab,
   create_pretraining_data with whole-word masking);
2. continued for --domain_steps on --domain (the financial news and announcements), the same
   seed, learning rate and steps in every setting of --settings:
     plain       the domain records alone;
     replay      --input_source=domain=...:0.8 --input_source=general=...:0.2 (--replay_weight);
     l2          --init_regularizer=l2 --init_regularizer_weight=--l2_weight;
     ewc         tools/estimate_fisher.py over the general training records, then
                 --init_regularizer=ewc with lambda = --l2_weight / mean(F) (docs/continue.md);
     replay_ewc  both;
3. reports each checkpoint's masked-LM accuracy / loss on held-out records of each source
   (--eval_source=general=... --eval_source=domain=..., every 10th document held out) and the
   yardstick (tools/compare_checkpoints.py, --seeds) on one task of each side: --sentiment_task
   (reviews: general) and --ner_task (financial entities: domain), mean +- std.
Every run goes under --output_dir (a finished step is not redone when the command is run again).
--quick: synthetic general text, small slices of the tasks, few steps (the path, not the
figures).
"""
import argparse
import csv
import glob
import json
import os
import re
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, REPO)

import _quick  # noqa: E402  (bench/_quick.py)

SETTINGS = ("plain", "replay", "l2", "ewc", "replay_ewc")
QUICK = dict(general=None, general_max_lines=300, general_steps=6, domain_steps=6,
             num_warmup_steps=1, max_eval_steps=2, fisher_batches=2, vocab_size=400, dupe_factor=1,
             seeds="1", sentiment_epochs=1, ner_epochs=1, task_examples=24,
             settings="plain,ewc", yardstick_settings="ewc", max_unk_rate=1.0,
             finetune_batch_size=8, tasks="sentiment")
CONFIG = dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=256,
              hidden_act="gelu", hidden_dropout_prob=0.1, attention_probs_dropout_prob=0.1,
              type_vocab_size=2, initializer_range=0.02)


def _run(args, *command):
  """Runs a repo program (path relative to the repo) with sys.executable; exits on failure."""
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", OMP_NUM_THREADS="1", PYTHONPATH=REPO)
  command = [sys.executable, os.path.join(REPO, command[0])] + list(command[1:])
  print("# " + " ".join(command[1:]), flush=True)
  proc = subprocess.run(command, capture_output=True, text=True, env=env)
  if proc.returncode:
    sys.exit("failed (%d): %s\n%s" % (proc.returncode, " ".join(command), proc.stderr[-3000:]))
  return proc


def _split_jsonl(path, train_path, heldout_path):
  """Every 10th line of a cleaned jsonl to heldout_path, the rest to train_path."""
  with open(path, encoding="utf-8") as f:
    lines = f.readlines()
  with open(train_path, "w", encoding="utf-8") as train, \
      open(heldout_path, "w", encoding="utf-8") as heldout:
    for i, line in enumerate(lines):
      (heldout if i % 10 == 0 else train).write(line)


def prepare_text(args, work):
  """Cleaned, split text of both sources: {source: (train_jsonl, heldout_jsonl)}."""
  general_files = sorted(glob.glob(args.general)) if args.general else []
  if args.general and not general_files:
    sys.exit("--general %s: no such files" % args.general)
  if not general_files:
    general_files = [os.path.join(_quick.write_synthetic_lines(
        os.path.join(work, "synthetic"), args.general_max_lines), "synthetic.txt")]
  sample = os.path.join(work, "general_sample.txt")
  handles = [open(path, encoding="utf-8", errors="replace") for path in general_files]
  try:  # the files' lines in turn (reviews: pos.txt, neg.txt), --general_max_lines in all
    with open(sample, "w", encoding="utf-8") as out:
      lines = (line for group in zip(*handles) for line in group)
      for _, line in zip(range(args.general_max_lines), lines):
        out.write(line)
  finally:
    for handle in handles:
      handle.close()
  _run(args, "tools/clean_corpus.py", "--min_chars", "10", "--no_progress", "--text_format",
       "line", "--output", os.path.join(work, "general.jsonl"), "--stats",
       os.path.join(work, "general.stats.json"), sample)
  _run(args, "tools/clean_corpus.py", "--text_field", "content", "--boilerplate_min_docs", "5",
       "--no_progress", "--output", os.path.join(work, "domain.jsonl"), "--stats",
       os.path.join(work, "domain.stats.json"), args.domain)
  texts = {}
  for source in ("general", "domain"):
    paths = tuple(os.path.join(work, "%s_%s.jsonl" % (source, part))
                  for part in ("train", "heldout"))
    _split_jsonl(os.path.join(work, source + ".jsonl"), *paths)
    texts[source] = paths
  return texts


def prepare_records(args, work, texts):
  """The vocab and {source/part: records glob}."""
  vocab = os.path.join(work, "vocab.txt")
  _run(args, "tools/build_vocab.py", "--vocab_size", str(args.vocab_size), "--output", vocab,
       texts["general"][0], texts["domain"][0])
  records = {}
  for source, paths in texts.items():
    for part, path in zip(("train", "heldout"), paths):
      output = os.path.join(work, "records", source, part + ".tfrecord")
      _run(args, "create_pretraining_data.py", "--input_file=" + path, "--output_file=" + output,
           "--vocab_file=" + vocab, "--do_lower_case=true", "--do_whole_word_mask=true",
           "--user_dict=" + os.path.join(REPO, "samples", "user_dict.txt"),
           "--max_seq_length=%d" % args.max_seq_length,
           "--max_predictions_per_seq=%d" % args.max_predictions_per_seq,
           "--dupe_factor=%d" % args.dupe_factor, "--random_seed=12345", "--noprogress")
      records["%s/%s" % (source, part)] = output
  return vocab, records


def write_config(work, vocab, seq_length):
  with open(vocab, encoding="utf-8") as f:
    vocab_size = sum(1 for _ in f)
  config = dict(CONFIG, vocab_size=vocab_size, max_position_embeddings=seq_length)
  path = os.path.join(work, "bert_config.json")
  with open(path, "w", encoding="utf-8") as f:
    json.dump(config, f, indent=2)
  return path


def _common(args, config, records):
  return ["--bert_config_file=" + config, "--max_seq_length=%d" % args.max_seq_length,
          "--max_predictions_per_seq=%d" % args.max_predictions_per_seq,
          "--eval_source=general=" + records["general/heldout"],
          "--eval_source=domain=" + records["domain/heldout"],
          "--eval_batch_size=%d" % args.eval_batch_size,
          "--max_eval_steps=%d" % args.max_eval_steps,
          "--intra_op_parallelism_threads=1", "--inter_op_parallelism_threads=1"]


def eval_results(output_dir):
  """{key: value} of output_dir/eval_results.txt (keys prefixed general/ and domain/)."""
  with open(os.path.join(output_dir, "eval_results.txt"), encoding="utf-8") as f:
    return {m.group(1): float(m.group(2))
            for m in re.finditer(r"^\s*([\w/]+) = ([-\d.e]+)$", f.read(), re.M)}


def pretrain(args, name, config, records, steps, data_flags, extra=()):
  """run_pretraining --do_train --do_eval into OUTPUT_DIR/name (skipped if already finished)."""
  output_dir = os.path.join(args.output_dir, name)
  if not os.path.exists(os.path.join(output_dir, "eval_results.txt")):
    _run(args, "run_pretraining.py", "--do_train", "--do_eval", "--output_dir=" + output_dir,
         "--train_batch_size=%d" % args.train_batch_size,
         "--learning_rate=%g" % args.learning_rate, "--num_train_steps=%d" % steps,
         "--num_warmup_steps=%d" % args.num_warmup_steps, "--save_checkpoints_steps=%d" % steps,
         "--log_every_n_steps=%d" % max(1, steps // 4), "--optimizer_type=adam",
         "--seed=%d" % args.seed, *data_flags, *extra, *_common(args, config, records))
  return output_dir


def fisher(args, config, records, base):
  """tools/estimate_fisher.py over the general training records; returns (dir, mean F)."""
  output_dir = os.path.join(args.output_dir, "fisher")
  if not os.path.exists(os.path.join(output_dir, "manifest.json")):
    _run(args, "tools/estimate_fisher.py", "--init_checkpoint=" + base,
         "--bert_config_file=" + config, "--input_file=" + records["general/train"],
         "--max_seq_length=%d" % args.max_seq_length,
         "--max_predictions_per_seq=%d" % args.max_predictions_per_seq, "--batch_size=8",
         "--fisher_batches=%d" % args.fisher_batches, "--output_dir=" + output_dir)
  with open(os.path.join(output_dir, "manifest.json"), encoding="utf-8") as f:
    return output_dir, float(json.load(f)["statistics"]["mean"])


def task_slice(args, work):
  """The tasks (full, or --task_examples of each split with --quick): {name: (dir, kind)}."""
  tasks = {"sentiment": (args.sentiment_task, "classification"), "ner": (args.ner_task, "ner")}
  tasks = {name: tasks[name] for name in args.tasks.split(",") if name}
  if not args.task_examples:
    return tasks
  for name, (directory, kind) in list(tasks.items()):
    out = os.path.join(work, "tasks", name)
    os.makedirs(out, exist_ok=True)
    for split in sorted(os.listdir(directory)):
      with open(os.path.join(directory, split), encoding="utf-8") as f:
        text = f.read()
      # classification: one example a line; ner: one example a blank-line-separated block
      sep = "\n\n" if kind == "ner" else "\n"
      kept = [part for part in text.split(sep) if part.strip()][:args.task_examples]
      with open(os.path.join(out, split), "w", encoding="utf-8") as f:
        f.write(sep.join(kept) + "\n")
    tasks[name] = (out, kind)
  return tasks


def yardstick(args, config, vocab, checkpoints, tasks):
  """compare_checkpoints on each task: {task: {checkpoint: (mean, std)}} of the test figure."""
  figures = {}
  for name, (directory, kind) in tasks.items():
    out = os.path.join(args.output_dir, "yardstick_" + name)
    lr, epochs, metric = (("1e-3", args.ner_epochs, "test_micro_f1") if kind == "ner" else
                          ("5e-4", args.sentiment_epochs, "test_accuracy"))
    _run(args, "tools/compare_checkpoints.py", "--output_dir=" + out,
         "--bert_config_file=" + config, "--vocab_file=" + vocab,
         "--task=%s=%s,kind=%s" % (name, directory, kind), "--seeds=" + args.seeds,
         "--learning_rates=" + lr, "--num_train_epochs=%g" % epochs,
         "--max_seq_length=%d" % args.max_seq_length, "--train_batch_size=%d" % args.finetune_batch_size, "--no_progress",
         "--no_random_init", "--max_unk_rate=%g" % args.max_unk_rate,
         *(["--pooling=mean"] if kind == "classification" else []),
         *["--checkpoint=%s=%s" % item for item in checkpoints.items()])
    with open(os.path.join(out, "results.csv"), encoding="utf-8") as f:
      figures[name] = {row["checkpoint"]: (float(row[metric + "_mean"]),
                                           float(row[metric + "_std"] or 0))
                       for row in csv.DictReader(f) if row["selected"] == "1"}
  return figures


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--general", default=os.path.join(_quick.SHARED_REVIEWS, "*.txt"),
                      help="general text, one document a line (glob; its files read in turn)")
  parser.add_argument("--general_max_lines", type=int, default=20000)
  parser.add_argument("--domain", default=os.path.join(REPO, "samples", "corpus"))
  parser.add_argument("--output_dir", default=os.path.join(tempfile.gettempdir(),
                                                           "bench_continue_recipe"))
  parser.add_argument("--settings", default=",".join(SETTINGS))
  parser.add_argument("--general_steps", type=int, default=600)
  parser.add_argument("--domain_steps", type=int, default=300)
  parser.add_argument("--num_warmup_steps", type=int, default=20)
  parser.add_argument("--learning_rate", type=float, default=5e-4)
  parser.add_argument("--train_batch_size", type=int, default=16)
  parser.add_argument("--eval_batch_size", type=int, default=32)
  parser.add_argument("--max_eval_steps", type=int, default=20)
  parser.add_argument("--max_seq_length", type=int, default=64)
  parser.add_argument("--max_predictions_per_seq", type=int, default=10)
  parser.add_argument("--vocab_size", type=int, default=2000)
  parser.add_argument("--dupe_factor", type=int, default=5)
  parser.add_argument("--seed", type=int, default=2)
  parser.add_argument("--replay_weight", type=float, default=0.2)
  parser.add_argument("--l2_weight", type=float, default=0.01)
  parser.add_argument("--fisher_batches", type=int, default=100)
  parser.add_argument("--sentiment_task", default=os.path.join(REPO, "samples", "sentiment"))
  parser.add_argument("--ner_task", default=os.path.join(REPO, "samples", "ner"))
  parser.add_argument("--tasks", default="sentiment,ner",
                      help="the yardstick's tasks: sentiment (--sentiment_task), ner (--ner_task)")
  parser.add_argument("--task_examples", type=int, default=0,
                      help="only the first N examples of each task split (0: all)")
  parser.add_argument("--sentiment_epochs", type=float, default=2)
  parser.add_argument("--ner_epochs", type=float, default=3)
  parser.add_argument("--seeds", default="1,2,3", help="fine-tuning seeds")
  parser.add_argument("--finetune_batch_size", type=int, default=32)
  parser.add_argument("--max_unk_rate", type=float, default=0.1,
                      help="as compare_checkpoints (--quick: 1, its vocab is of synthetic text)")
  parser.add_argument("--no_yardstick", action="store_true")
  parser.add_argument("--yardstick_settings", default=None,
                      help="the settings fine-tuned by the yardstick besides the general "
                           "checkpoint (default: all of --settings)")
  args = _quick.parse_args(parser, argv, QUICK)
  settings = [s for s in args.settings.split(",") if s]
  unknown = sorted(set(settings) - set(SETTINGS))
  if unknown:
    parser.error("--settings: unknown %s (choose from %s)" % (unknown, ",".join(SETTINGS)))
  if set(args.tasks.split(",")) - {"sentiment", "ner", ""}:
    parser.error("--tasks: sentiment and/or ner, comma separated")
  if args.quick:
    args.output_dir = tempfile.mkdtemp(prefix="bench_continue_recipe_")
  elif not glob.glob(args.general):
    _quick.skipped("bench_continue_recipe", "no --general text at %s: pass --general" %
                   args.general)
    return 0
  work = os.path.join(args.output_dir, "data")
  os.makedirs(work, exist_ok=True)
  if not os.path.exists(os.path.join(work, "records.json")):
    vocab, records = prepare_records(args, work, prepare_text(args, work))
    with open(os.path.join(work, "records.json"), "w", encoding="utf-8") as f:
      json.dump(records, f)
  vocab = os.path.join(work, "vocab.txt")
  with open(os.path.join(work, "records.json"), encoding="utf-8") as f:
    records = json.load(f)
  config = write_config(work, vocab, args.max_seq_length)
  general_dir = pretrain(args, "general", config, records, args.general_steps,
                         ["--input_file=" + records["general/train"]])
  base = os.path.join(general_dir, "model.ckpt-%d" % args.general_steps)
  results = {"general (before)": eval_results(general_dir)}
  checkpoints = {"general": base}
  domain_only = ["--input_file=" + records["domain/train"]]
  mixture = ["--input_source=domain=%s:%g" % (records["domain/train"], 1 - args.replay_weight),
             "--input_source=general=%s:%g" % (records["general/train"], args.replay_weight)]
  ewc = []
  if any("ewc" in s for s in settings):
    fisher_dir, mean_f = fisher(args, config, records, base)
    ewc = ["--init_regularizer=ewc", "--fisher_file=" + fisher_dir,
           "--init_regularizer_weight=%g" % (args.l2_weight / mean_f)]
    print("ewc lambda = %g (--l2_weight / mean F, mean F = %g)" % (args.l2_weight / mean_f,
                                                                   mean_f))
  runs = {"plain": domain_only, "replay": mixture,
          "l2": domain_only + ["--init_regularizer=l2",
                               "--init_regularizer_weight=%g" % args.l2_weight],
          "ewc": domain_only + ewc, "replay_ewc": mixture + ewc}
  for name in settings:
    output_dir = pretrain(args, name, config, records, args.domain_steps, runs[name],
                          ["--init_checkpoint=" + base])
    results[name] = eval_results(output_dir)
    checkpoints[name] = os.path.join(output_dir, "model.ckpt-%d" % args.domain_steps)
  if args.yardstick_settings is not None:
    kept = {"general"} | set(s for s in args.yardstick_settings.split(",") if s)
    checkpoints = {name: path for name, path in checkpoints.items() if name in kept}
  figures = {} if args.no_yardstick else yardstick(args, config, vocab, checkpoints,
                                                   task_slice(args, work))
  print("\nheld-out masked LM (accuracy / loss) and the yardstick (test, mean +- std over "
        "seeds %s)" % args.seeds)
  print("%-18s %-17s %-17s %-15s %-15s" % ("checkpoint", "general acc/loss", "domain acc/loss",
                                           "sentiment acc", "ner micro-F1"))
  for name, result in results.items():
    key = name.split(" ")[0]
    cells = ["%.3f +- %.3f" % figures[task][key] if key in figures.get(task, {}) else "-"
             for task in ("sentiment", "ner")]
    print(("%-18s %.3f / %-9.3f %.3f / %-9.3f %-15s %-15s" % (
        name, result["general/masked_lm_accuracy"], result["general/masked_lm_loss"],
        result["domain/masked_lm_accuracy"], result["domain/masked_lm_loss"], *cells)).rstrip())
  plain = results.get("plain")
  for name in settings:
    if plain and name != "plain":
      print("%s / plain: general masked_lm_loss x%.3f, domain masked_lm_loss x%.3f" % (
          name, results[name]["general/masked_lm_loss"] / plain["general/masked_lm_loss"],
          results[name]["domain/masked_lm_loss"] / plain["domain/masked_lm_loss"]))
  return 0


if __name__ == "__main__":
  sys.exit(main())
