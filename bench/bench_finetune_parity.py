"""Fine-tuning parity with transformers: the same exported checkpoint fine-tuned by run_classifier /
run_ner (--optimizer=adamweightdecay, google's, and --optimizer=adamw) and by transformers
(BertForSequenceClassification / BertForTokenClassification with torch.optim.AdamW), on
samples/sentiment and samples/ner: same training rows, sequence length, batch, learning rate,
schedule, clipping, weight decay, steps and seeds. Prints dev accuracy / entity micro-F1 as
mean +- sample std over the seeds, and whether ours is within one std of transformers'.

  python bench/bench_finetune_parity.py --hf_python=/path/to/venv-with-torch/bin/python

The model: --init_checkpoint with --bert_config_file and --vocab_file, or by default a random-init
BERT (2 layers, H=128, 2 heads, I=512, seeded) with a WordPiece vocab trained on both tasks'
training text, saved with google's names (MLM + NSP heads); either is exported with
tools/export_hf.py, and transformers starts from that folder, ours from the checkpoint.

What is the same on both sides, by construction:
  rows      the program's own preflight (run.preflight / ner_run.preflight) encodes the data; the
            transformers worker trains and predicts on exactly those arrays (npz), NER windows
            included, and its dev predictions are scored by our code (metrics, ner_run.score);
  schedule  google's (linear warmup over warmup_proportion of the steps, then linear decay to 0
            counted from step 0) as a torch LambdaLR; transformers' get_linear_schedule_with_warmup
            decays from the end of the warmup instead, so it is not used: only the optimizer
            differs;
  optimizer transformers: torch.optim.AdamW, betas (0.9, 0.999), eps 1e-6 (google's), weight decay
            0.01 except biases and LayerNorm, gradients clipped to global norm 1.0 (as ours);
  steps     int(examples / batch x epochs), batches of one seeded shuffle per epoch (ours:
            tf.data's seeded shuffle, so the orders differ: that is part of the seed spread).
Ours runs as a user runs it: `python run_classifier.py ...` / `python run_ner.py ...` per optimizer
and seed (their logs, with the step lines, are kept in --output_dir).

Without torch and transformers in --hf_python (default: this Python) the transformers rows are
skipped with a message. --quick: a tiny random model, the head of each split, one seed, few steps
(the path, not the figures).
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, REPO)

import _quick  # noqa: E402  (bench/_quick.py)

OURS = ("adamweightdecay", "adamw")
TRANSFORMERS = "transformers AdamW"
TASKS = {  # program, --task_name, data, the dev figure and its name in eval_results.txt
    "sentiment": dict(program="run_classifier.py", task_name="jsonl", kind="classification",
                      data_dir=os.path.join(REPO, "samples", "sentiment"),
                      metric="eval_accuracy", metric_name="dev accuracy"),
    "ner": dict(program="run_ner.py", task_name="chars", kind="ner",
                data_dir=os.path.join(REPO, "samples", "ner"),
                metric="eval_micro_f1", metric_name="dev entity micro-F1"),
}
QUICK = dict(seeds="1", max_seq_length=32, sentiment_epochs=1, ner_epochs=2, train_batch_size=16,
             hidden_size=32, intermediate_size=64)
QUICK_ROWS = {"train": 64, "dev": 32}  # jsonl lines / NER sentences of each split in --quick


# ---------------------------------------------------------------- the model and the data


def _read_sentences(path, limit=None):
  """The `char TAG` sentences of an NER file as lists of lines (blank-line separated)."""
  with open(path, encoding="utf-8") as f:
    blocks = [b for b in f.read().split("\n\n") if b.strip()]
  return blocks[:limit] if limit else blocks


def quick_data(work):
  """--quick: the head of each split of both tasks in work/<task>; returns {task: data_dir}."""
  dirs = {}
  for task, spec in TASKS.items():
    dirs[task] = os.path.join(work, task)
    os.makedirs(dirs[task])
    for split, count in QUICK_ROWS.items():
      if spec["kind"] == "ner":
        blocks = _read_sentences(os.path.join(spec["data_dir"], split + ".txt"), count)
        text = "\n\n".join(b.strip("\n") for b in blocks) + "\n"
        name = split + ".txt"
      else:
        with open(os.path.join(spec["data_dir"], split + ".jsonl"), encoding="utf-8") as f:
          text = "".join(next(f) for _ in range(count))
        name = split + ".jsonl"
      with open(os.path.join(dirs[task], name), "w", encoding="utf-8") as f:
        f.write(text)
  return dirs


def training_texts(data_dirs):
  """Every training text of both tasks (for the random-init model's vocab)."""
  with open(os.path.join(data_dirs["sentiment"], "train.jsonl"), encoding="utf-8") as f:
    texts = [json.loads(line)["text"] for line in f if line.strip()]
  for block in _read_sentences(os.path.join(data_dirs["ner"], "train.txt")):
    texts.append("".join(line.split()[0] for line in block.splitlines() if line.split()))
  return texts


def random_init_model(args, work, data_dirs):
  """A seeded random-init BERT with MLM + NSP heads (exportable as BertForPreTraining) and a
  vocab trained on the tasks' text; fills args.bert_config_file / vocab_file / init_checkpoint."""
  import tensorflow.compat.v1 as tf  # pylint: disable=g-import-not-at-top
  from bert_fin import modeling  # pylint: disable=g-import-not-at-top

  def build(config):
    ids = tf.zeros([1, 8], tf.int32)
    model = modeling.BertModel(config, False, ids, input_len=tf.fill([1], 8))
    modeling.get_masked_lm_output(config, model.get_sequence_output(),
                                  model.get_embedding_table(), ids, ids, tf.ones([1, 8]))
    modeling.get_next_sentence_output(config, model.get_pooled_output(), tf.zeros([1], tf.int32))

  args.bert_config_file, args.vocab_file, args.init_checkpoint = _quick.tiny_bert(
      work, training_texts(data_dirs), args.max_seq_length, build, vocab_size=args.vocab_size,
      hidden_size=args.hidden_size, num_hidden_layers=args.num_hidden_layers,
      num_attention_heads=args.num_attention_heads, intermediate_size=args.intermediate_size)


def export(args, hf_dir):
  from bert_fin.cli import export_hf  # pylint: disable=g-import-not-at-top
  status = export_hf.main(["--bert_config_file", args.bert_config_file, "--init_checkpoint",
                           args.init_checkpoint, "--vocab_file", args.vocab_file,
                           "--output_dir", hf_dir])
  if status:
    raise SystemExit(status)


def task_argv(args, task, data_dir):
  """The flags of one fine-tuning run of `task` (seed, optimizer and output_dir aside)."""
  spec = TASKS[task]
  epochs = args.sentiment_epochs if task == "sentiment" else args.ner_epochs
  learning_rate = args.sentiment_learning_rate if task == "sentiment" else args.ner_learning_rate
  return ["--task_name=" + spec["task_name"], "--data_dir=" + data_dir,
          "--bert_config_file=" + args.bert_config_file, "--vocab_file=" + args.vocab_file,
          "--init_checkpoint=" + args.init_checkpoint, "--do_train", "--do_eval",
          "--max_seq_length=%d" % args.max_seq_length,
          "--train_batch_size=%d" % args.train_batch_size, "--eval_batch_size=64",
          "--learning_rate=%g" % learning_rate, "--num_train_epochs=%g" % epochs,
          "--warmup_proportion=%g" % args.warmup_proportion,
          "--save_checkpoints_steps=100000", "--log_every_n_steps=50"]


def plan_of(task, argv, output_dir):
  """The program's own Plan for these flags: encoded rows, labels, steps (nothing written)."""
  from absl import flags  # pylint: disable=g-import-not-at-top
  from bert_fin.training import distributed  # pylint: disable=g-import-not-at-top
  if TASKS[task]["kind"] == "ner":
    from bert_fin.finetune.ner import flags as flags_lib  # pylint: disable=g-import-not-at-top
    from bert_fin.finetune.ner import orchestration as run_lib  # pylint: disable=g-import-not-at-top
  else:
    from bert_fin.finetune.classify import flags as flags_lib  # pylint: disable=g-import-not-at-top
    from bert_fin.finetune.classify import orchestration as run_lib  # pylint: disable=g-import-not-at-top
  values = flags_lib.define_flags(flags.FlagValues())
  values([TASKS[task]["program"]] + argv + ["--output_dir=" + output_dir])
  return run_lib.preflight(flags_lib.settings_of(values), distributed.init(False))


def arrays_of(plan, split):
  return (plan.encoded if hasattr(plan, "encoded") else plan.data)[split].arrays


def write_npz(path, plan):
  arrays = {"%s/%s" % (split, name): value for split in ("train", "dev")
            for name, value in arrays_of(plan, split).items()}
  np.savez(path, num_labels=len(plan.labels), num_train_steps=plan.num_train_steps,
           num_warmup_steps=plan.num_warmup_steps, **arrays)


# ---------------------------------------------------------------- ours


def run_ours(task, argv, optimizer, seed, output_dir):
  """One run_classifier / run_ner process; returns (dev figure, seconds). A run finished in
  output_dir with the same command (run.json) is read back instead (run the bench again)."""
  command = [sys.executable, os.path.join(REPO, TASKS[task]["program"])] + argv + [
      "--optimizer=" + optimizer, "--seed=%d" % seed, "--output_dir=" + output_dir]
  record_path = os.path.join(output_dir, "run.json")
  if os.path.isfile(record_path):
    with open(record_path, encoding="utf-8") as f:
      record = json.load(f)
    if record["command"] == command[1:]:
      return record["figure"], record["seconds"]
  shutil.rmtree(output_dir, ignore_errors=True)
  os.makedirs(output_dir)
  start = time.time()
  with open(os.path.join(output_dir, "log.txt"), "w", encoding="utf-8") as log:
    status = subprocess.call(command, stdout=log, stderr=subprocess.STDOUT,
                             env=dict(os.environ, PYTHONPATH=REPO))
  seconds = time.time() - start
  if status:
    raise SystemExit("%s failed (exit %d): see %s" % (" ".join(command[:2]), status,
                                                     os.path.join(output_dir, "log.txt")))
  with open(os.path.join(output_dir, "eval_results.txt"), encoding="utf-8") as f:
    results = dict(line.strip().split(" = ", 1) for line in f if " = " in line)
  figure = float(results[TASKS[task]["metric"]])
  with open(record_path, "w", encoding="utf-8") as f:
    json.dump({"command": command[1:], "figure": figure, "seconds": seconds}, f)
  return figure, seconds


# ---------------------------------------------------------------- transformers


def hf_available(hf_python):
  """None when hf_python imports torch and transformers, else why not (one line)."""
  try:
    proc = subprocess.run([hf_python, "-c", "import torch, transformers"], capture_output=True,
                          text=True, timeout=300)
  except OSError as e:
    return "cannot run --hf_python %s (%s)" % (hf_python, e)
  if proc.returncode:
    return "--hf_python %s cannot import torch and transformers (%s)" % (
        hf_python, (proc.stderr.strip().splitlines() or ["?"])[-1])
  return None


def run_transformers(args, task, npz, hf_dir, out_json, learning_rate):
  command = [args.hf_python, os.path.abspath(__file__), "hf", "--npz", npz, "--hf_dir", hf_dir,
             "--kind", TASKS[task]["kind"], "--seeds", args.seeds, "--out", out_json,
             "--learning_rate=%g" % learning_rate,
             "--train_batch_size=%d" % args.train_batch_size,
             "--torch_threads=%d" % args.torch_threads]
  status = subprocess.call(command)
  if status:
    raise SystemExit("the transformers worker failed (exit %d)" % status)
  with open(out_json, encoding="utf-8") as f:
    return json.load(f)


def score_transformers(task, plan, predictions):
  """Our dev figure of the worker's predictions (per row: a label id, or tag ids [S])."""
  if TASKS[task]["kind"] == "classification":
    gold = arrays_of(plan, "dev")["label_ids"]
    return float(np.mean(np.asarray(predictions) == gold))
  from bert_fin.finetune.ner import features as ner_features  # pylint: disable=g-import-not-at-top
  from bert_fin.finetune.ner import orchestration as ner_run  # pylint: disable=g-import-not-at-top
  tags = [[plan.labels[i] for i in sentence]
          for sentence in ner_features.join(plan.encoded["dev"], predictions)]
  result, _ = ner_run.score(plan, "dev", tags)
  return result[TASKS[task]["metric"]]


def google_schedule(num_train_steps, num_warmup_steps):
  """schedule.learning_rate_schedule's factor of step k (the lr of the (k+1)-th update)."""
  def factor(step):
    if num_warmup_steps and step < num_warmup_steps:
      return step / num_warmup_steps
    return max(0.0, 1.0 - min(step, num_train_steps) / num_train_steps)
  return factor


def hf_worker(args):
  """Runs in --hf_python: trains one model per seed on the npz rows, predicts dev, writes json."""
  import torch  # pylint: disable=g-import-not-at-top
  import transformers  # pylint: disable=g-import-not-at-top
  transformers.logging.set_verbosity_error()
  torch.set_num_threads(args.torch_threads)
  data = np.load(args.npz)
  steps, warmup = int(data["num_train_steps"]), int(data["num_warmup_steps"])
  token_level = args.kind == "ner"
  model_class = (transformers.BertForTokenClassification if token_level
                 else transformers.BertForSequenceClassification)

  def tensors(split, rows=None):
    ids = data[split + "/input_ids"]
    rows = np.arange(len(ids)) if rows is None else rows
    mask = np.arange(ids.shape[1])[None, :] < data[split + "/input_len"][rows, None]
    inputs = dict(input_ids=torch.tensor(ids[rows], dtype=torch.long),
                  token_type_ids=torch.tensor(data[split + "/segment_ids"][rows],
                                              dtype=torch.long),
                  attention_mask=torch.tensor(mask, dtype=torch.long))
    labels = data[split + "/label_ids"][rows]
    if token_level:  # positions without a unit's first piece do not count (ours: label_mask)
      labels = np.where(data[split + "/label_mask"][rows] > 0, labels, -100)
    return inputs, torch.tensor(labels, dtype=torch.long)

  results = {}
  for seed in [int(s) for s in args.seeds.split(",")]:
    torch.manual_seed(seed)
    model = model_class.from_pretrained(args.hf_dir, num_labels=int(data["num_labels"]))
    no_decay = ("bias", "LayerNorm")
    groups = [{"params": [p for n, p in model.named_parameters()
                          if not any(x in n for x in no_decay)], "weight_decay": 0.01},
              {"params": [p for n, p in model.named_parameters()
                          if any(x in n for x in no_decay)], "weight_decay": 0.0}]
    optimizer = torch.optim.AdamW(groups, lr=args.learning_rate, betas=(0.9, 0.999), eps=1e-6)
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, google_schedule(steps, warmup))
    generator = torch.Generator().manual_seed(seed)
    num_rows = len(data["train/input_ids"])
    per_epoch = num_rows // args.train_batch_size
    start = time.time()
    model.train()
    for step in range(steps):
      if step % per_epoch == 0:
        order = torch.randperm(num_rows, generator=generator).numpy()
      at = step % per_epoch * args.train_batch_size
      inputs, labels = tensors("train", order[at:at + args.train_batch_size])
      loss = model(**inputs, labels=labels).loss
      loss.backward()
      torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
      optimizer.step()
      schedule.step()
      optimizer.zero_grad()
    model.eval()
    with torch.no_grad():
      inputs, _ = tensors("dev")
      logits = model(**inputs).logits
    results[str(seed)] = {"predictions": logits.argmax(-1).tolist(),
                          "seconds": time.time() - start, "final_loss": loss.item()}
    print("transformers %s, torch %s: seed %d, %d updates, last loss %.4f, %.0f s" % (
        transformers.__version__, torch.__version__, seed, steps, loss.item(),
        time.time() - start), flush=True)
  with open(args.out, "w", encoding="utf-8") as f:
    json.dump(results, f)
  return 0


# ---------------------------------------------------------------- the table


def mean_std(values):
  return statistics.mean(values), statistics.stdev(values) if len(values) > 1 else 0.0


def print_table(rows):
  """rows: [(task, trainer, metric name, [figures], seconds a run)]."""
  print("\n%-10s %-28s %-22s %-22s %s" % ("task", "trainer", "figure", "mean +- std (seeds)",
                                          "s/run"))
  for task, trainer, metric_name, figures, seconds in rows:
    mean, std = mean_std(figures)
    print("%-10s %-28s %-22s %.3f +- %.3f (%d)%s %5.0f" % (
        task, trainer, metric_name, mean, std, len(figures), " " * 5, seconds))
  for task in TASKS:
    by_trainer = {trainer: figures for t, trainer, _, figures, _ in rows if t == task}
    if TRANSFORMERS not in by_trainer:
      continue
    hf_mean, hf_std = mean_std(by_trainer[TRANSFORMERS])
    for optimizer in OURS:
      mean, _ = mean_std(by_trainer["ours " + optimizer])
      print("%s: ours %s - transformers = %+.3f (transformers' std %.3f): within one std: %s" % (
          task, optimizer, mean - hf_mean, hf_std,
          "yes" if abs(mean - hf_mean) <= hf_std else "no"))


def parse_args(argv):
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("phase", nargs="?", default="all", choices=("all", "hf"),
                      help="all (default): everything; hf: the transformers worker (internal)")
  parser.add_argument("--hf_python", default=sys.executable,
                      help="a Python with torch and transformers (default: this one)")
  parser.add_argument("--init_checkpoint", help="default: a random-init model (see above)")
  parser.add_argument("--bert_config_file")
  parser.add_argument("--vocab_file")
  parser.add_argument("--output_dir", help="runs, logs and the export (default: a temp dir)")
  parser.add_argument("--seeds", default="1,2,3")
  parser.add_argument("--tasks", default="sentiment,ner")
  parser.add_argument("--max_seq_length", type=int, default=64)
  parser.add_argument("--train_batch_size", type=int, default=32)
  parser.add_argument("--warmup_proportion", type=float, default=0.1)
  parser.add_argument("--sentiment_learning_rate", type=float, default=5e-4)
  parser.add_argument("--sentiment_epochs", type=float, default=2)
  parser.add_argument("--ner_learning_rate", type=float, default=1e-3)
  parser.add_argument("--ner_epochs", type=float, default=10)
  parser.add_argument("--vocab_size", type=int, default=3000, help="(random init)")
  parser.add_argument("--hidden_size", type=int, default=128, help="(random init)")
  parser.add_argument("--num_hidden_layers", type=int, default=2, help="(random init)")
  parser.add_argument("--num_attention_heads", type=int, default=2, help="(random init)")
  parser.add_argument("--intermediate_size", type=int, default=512, help="(random init)")
  parser.add_argument("--torch_threads", type=int, default=1,
                      help="torch's intra-op threads in the transformers worker (on 2 busy "
                           "shared cores, 2 threads made a step 7x slower than 1)")
  # the worker's own
  parser.add_argument("--npz", help=argparse.SUPPRESS)
  parser.add_argument("--hf_dir", help=argparse.SUPPRESS)
  parser.add_argument("--kind", help=argparse.SUPPRESS)
  parser.add_argument("--out", help=argparse.SUPPRESS)
  parser.add_argument("--learning_rate", type=float, help=argparse.SUPPRESS)
  return _quick.parse_args(parser, argv, QUICK)


def main(argv=None):
  args = parse_args(argv)
  if args.phase == "hf":
    return hf_worker(args)
  from bert_fin import console_log  # pylint: disable=g-import-not-at-top
  console_log.configure()  # before TensorFlow: its lines, not TensorFlow's chatter
  given = [args.init_checkpoint, args.bert_config_file, args.vocab_file]
  if any(given) and not all(given):
    print("bench_finetune_parity: error: pass --init_checkpoint, --bert_config_file and "
          "--vocab_file together (or none: a random-init model)", file=sys.stderr)
    return 2
  work = args.output_dir or tempfile.mkdtemp(prefix="bench_finetune_parity_")
  os.makedirs(work, exist_ok=True)
  tasks = args.tasks.split(",")
  data_dirs = quick_data(os.path.join(work, "data")) if args.quick else {
      task: spec["data_dir"] for task, spec in TASKS.items()}
  if not all(given):
    random_init_model(args, os.path.join(work, "model"), data_dirs)
  hf_dir = os.path.join(work, "hf")
  if not os.path.isdir(hf_dir):
    export(args, hf_dir)
  why_not = hf_available(args.hf_python)
  if why_not:
    _quick.skipped("the transformers rows", why_not)
  seeds = [int(s) for s in args.seeds.split(",")]
  rows = []
  for task in tasks:
    argv = task_argv(args, task, data_dirs[task])
    plan = plan_of(task, argv, os.path.join(work, "plan_not_written"))
    print("[parity] %s: %d training rows, %d updates (%d warmup), %d labels" % (
        task, len(arrays_of(plan, "train")["input_ids"]), plan.num_train_steps,
        plan.num_warmup_steps, len(plan.labels)), flush=True)
    for optimizer in OURS:
      figures, seconds = [], []
      for seed in seeds:
        figure, spent = run_ours(task, argv, optimizer, seed,
                                 os.path.join(work, "ours", task, optimizer, "seed%d" % seed))
        figures.append(figure)
        seconds.append(spent)
        print("[parity] %s ours %s seed %d: %s %.3f (%.0f s)" % (
            task, optimizer, seed, TASKS[task]["metric_name"], figure, spent), flush=True)
      rows.append((task, "ours " + optimizer, TASKS[task]["metric_name"], figures,
                   statistics.mean(seconds)))
    if why_not:
      continue
    npz = os.path.join(work, task + ".npz")
    write_npz(npz, plan)
    learning_rate = (args.sentiment_learning_rate if task == "sentiment"
                     else args.ner_learning_rate)
    results = run_transformers(args, task, npz, hf_dir, os.path.join(work, task + "_hf.json"),
                               learning_rate)
    figures = [score_transformers(task, plan, results[str(seed)]["predictions"])
               for seed in seeds]
    for seed, figure in zip(seeds, figures):
      print("[parity] %s transformers seed %d: %s %.3f" % (
          task, seed, TASKS[task]["metric_name"], figure), flush=True)
    rows.append((task, TRANSFORMERS, TASKS[task]["metric_name"], figures,
                 statistics.mean(results[str(s)]["seconds"] for s in seeds)))
  print_table(rows)
  return 0


if __name__ == "__main__":
  sys.exit(main())
