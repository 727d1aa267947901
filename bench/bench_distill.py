"""Does distillation pay? A fine-tuned teacher, the same small student trained on gold labels
alone, distilled, and distilled with unlabeled in-domain text: test accuracy (mean +- std over
seeds), parameters, and batch-1 / batch-32 latency end to end (raw text in, probabilities out)
through the serving export's SavedModel.

  python bench/bench_distill.py --checkpoint=demo_out/model \\
      --bert_config_file=demo_out/bert_config.json --vocab_file=demo_out/vocab.txt \\
      [--unlabeled_file=in_domain.txt] --output_dir=bench_distill_out

Fine-tunes the teacher with run_classifier on --task_dir (samples/sentiment; from --checkpoint,
else from random init; --teacher_learning_rate, --teacher_num_train_epochs, --pooling), then for
each seed runs run_distill with --student_layers from the teacher: --alpha=0 (gold labels only:
exactly run_classifier on the student), --alpha (soft targets at --temperature) and, with
--unlabeled_file (--unlabeled_weight), the same plus those texts; --layer_selections=skip,bottom
adds gold and distilled rows of the second selection (gold@bottom, distilled@bottom);
--student_from=random: students of the teacher's widths and --student_layers from random weights
instead of the teacher's layers; --teachers=N: the teacher recipe at seeds 1..N as one ensemble,
the distilled rows reading its mean soft targets (run_distill --ensemble_dirs). Every run
is in-process, in --output_dir/<row>-<seed> (a finished run is reused; --rows runs some rows
only, e.g. in a second process). Dev accuracy is printed beside test accuracy: choose T, alpha
and epochs on dev. --quick: a tiny random-weight "checkpoint", the first 64 / 32 / 32
reviews, the training texts as the unlabeled file, one seed, sequence length 32 (the path, not
the figures).
"""
import argparse
import json
import os
import statistics
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, REPO)

import numpy as np  # noqa: E402

import _distill_ner  # noqa: E402  (bench/_distill_ner.py)
import _quick  # noqa: E402  (bench/_quick.py)

TASK = os.path.join(REPO, "samples", "sentiment")
QUICK = dict(seeds="1", num_train_epochs=1.0, max_seq_length=32, student_layers=1,
             latency_requests=3)
QUICK_EXAMPLES = {"train": 64, "dev": 32, "test": 32}


def parse_args(argv):
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--checkpoint", help="the pretrained model the teacher is fine-tuned from "
                      "(none: the teacher starts from random init)")
  parser.add_argument("--bert_config_file")
  parser.add_argument("--vocab_file")
  parser.add_argument("--task", choices=("sentiment", "ner"), default="sentiment",
                      help="ner: a run_ner teacher (bench/_distill_ner.py; --task_dir defaults "
                      "to samples/ner)")
  parser.add_argument("--teacher_epochs", type=float,
                      help="--task=ner: the teacher's epochs (default: --num_train_epochs)")
  parser.add_argument("--student_from", choices=("teacher", "random"), default="teacher",
                      help="the students start from the teacher's layers, or from random "
                      "weights (--student_config of the teacher's widths, --student_layers)")
  parser.add_argument("--task_dir", default=TASK)
  parser.add_argument("--unlabeled_file", help=".jsonl / .txt in-domain texts (optional row)")
  parser.add_argument("--unlabeled_weight", type=float,
                      help="run_distill --unlabeled_weight of that row (default: by row count)")
  parser.add_argument("--teachers", type=int, default=1,
                      help="an ensemble of this many teachers (the same recipe at seeds 1..N): "
                      "the students read their mean soft targets (run_distill --ensemble_dirs); "
                      "the ensemble's own test accuracy is a row")
  parser.add_argument("--seeds", default="1,2,3")
  parser.add_argument("--student_layers", type=int, default=3)
  parser.add_argument("--alpha", type=float, default=0.5)
  parser.add_argument("--temperature", type=float, default=2.0)
  parser.add_argument("--learning_rate", type=float, default=5e-5)
  parser.add_argument("--teacher_learning_rate", type=float,
                      help="the teacher's fine-tuning learning rate (default: --learning_rate)")
  parser.add_argument("--teacher_num_train_epochs", type=float,
                      help="the teacher's fine-tuning epochs (default: --num_train_epochs)")
  parser.add_argument("--rows", help="run only these student rows, comma-separated (e.g. "
                      "distilled+unlabeled; default: all; finished rows are reused by a later "
                      "run in the same --output_dir)")
  parser.add_argument("--pooling", default="first",
                      help="the teacher's run_classifier --pooling (the students read it)")
  parser.add_argument("--layer_selections", default="skip",
                      help="run_distill --layer_selection of the student rows, comma-separated: "
                      "the first for gold / distilled / distilled+unlabeled, each other adds "
                      "gold and distilled rows of its own (e.g. skip,bottom)")
  parser.add_argument("--num_train_epochs", type=float, default=3.0)
  parser.add_argument("--max_seq_length", type=int, default=128)
  parser.add_argument("--train_batch_size", type=int, default=32)
  parser.add_argument("--latency_requests", type=int, default=20)
  parser.add_argument("--output_dir")
  parser.add_argument("--latency_only", action="store_true",
                      help="time a random-weight classifier (--task=ner: CRF tagger) of "
                      "--bert_config_file against its --student_layers student (latency does "
                      "not depend on the weights); --vocab_file optional")
  return _quick.parse_args(parser, argv, QUICK)


def quick_inputs(args):
  """--quick: the head of each split of samples/sentiment, its training texts as the unlabeled
  file, and a tiny random-weight BERT of 2 layers as --checkpoint, in a temp dir."""
  import tensorflow.compat.v1 as tf  # pylint: disable=g-import-not-at-top
  from bert_fin import modeling  # pylint: disable=g-import-not-at-top
  work = tempfile.mkdtemp(prefix="bench_distill_")
  args.task_dir, texts = _quick.task_head(TASK, work, QUICK_EXAMPLES)
  args.unlabeled_file = os.path.join(work, "unlabeled.txt")
  with open(args.unlabeled_file, "w", encoding="utf-8") as f:
    f.writelines(text.replace("\n", " ") + "\n" for text in texts[:QUICK_EXAMPLES["train"]])
  args.bert_config_file, args.vocab_file, args.checkpoint = _quick.tiny_bert(
      work, texts, args.max_seq_length,
      lambda config: modeling.BertModel(config, False, tf.zeros([1, 8], tf.int32)),
      vocab_size=2000)
  args.output_dir = os.path.join(work, "out")


def _common(args, seed, learning_rate=None, epochs=None):
  return ["--task_name=jsonl", "--data_dir=" + args.task_dir, "--vocab_file=" + args.vocab_file,
          "--max_seq_length=%d" % args.max_seq_length,
          "--train_batch_size=%d" % args.train_batch_size,
          "--learning_rate=%g" % (learning_rate or args.learning_rate),
          "--num_train_epochs=%g" % (epochs or args.num_train_epochs), "--seed=%d" % seed,
          "--do_train",
          "--do_eval", "--do_predict", "--predict_batch_size=32", "--log_every_n_steps=1000"]


def _run(flags_module, orchestration_run, argv):
  """A program in-process: its flags parsed on a fresh FlagValues, then its run."""
  from absl import flags  # pylint: disable=g-import-not-at-top
  values = flags_module.define_flags(flags.FlagValues())
  values(["bench"] + argv)
  orchestration_run(flags_module.settings_of(values))


def teacher(args, seed=1):
  """run_classifier of the teacher at `seed` in --output_dir/teacher (seed 1) or teacher-SEED."""
  from bert_fin.finetune.classify import flags as classify_flags  # pylint: disable=C0415
  from bert_fin.finetune.classify import orchestration  # pylint: disable=C0415
  from bert_fin.training import distributed  # pylint: disable=C0415
  out = os.path.join(args.output_dir, "teacher" if seed == 1 else "teacher-%d" % seed)
  if not os.path.isfile(os.path.join(out, "test_results.tsv")):
    start = ["--init_checkpoint=" + args.checkpoint] if args.checkpoint else []
    _run(classify_flags, lambda s: orchestration.run(s, distributed.init(False)), _common(
        args, seed, args.teacher_learning_rate, args.teacher_num_train_epochs) + start + [
            "--bert_config_file=" + args.bert_config_file, "--pooling=" + args.pooling,
            "--output_dir=" + out])
  return out


def student_rows(args):
  """[(row, loss, layer selection)] of the student rows: gold, distilled (and
  distilled+unlabeled with --unlabeled_file) on the first --layer_selections, then gold and
  distilled on each other, named row@selection."""
  first, *others = args.layer_selections.split(",")
  rows = [(loss, loss, first) for loss in ("gold", "distilled") + (
      ("distilled+unlabeled",) if args.unlabeled_file else ())]
  rows += [("%s@%s" % (loss, selection), loss, selection) for selection in others
           for loss in ("gold", "distilled")]
  wanted = args.rows.split(",") if args.rows else [row[0] for row in rows]
  unknown = sorted(set(wanted) - {row[0] for row in rows})
  if unknown:
    raise SystemExit("bench_distill: --rows %s: no such row (rows: %s)" % (
        ",".join(unknown), ", ".join(row[0] for row in rows)))
  return [row for row in rows if row[0] in wanted]


def student(args, row, seed, teacher_dir, ensemble_dirs=()):
  """run_distill of one student row (student_rows) and seed in --output_dir/ROW-SEED; the
  distilled rows read the soft targets of teacher_dir and ensemble_dirs."""
  from bert_fin.finetune.distill import flags as distill_flags  # pylint: disable=C0415
  from bert_fin.finetune.distill import orchestration  # pylint: disable=C0415
  from bert_fin.training import distributed  # pylint: disable=C0415
  name, loss, selection = row
  out = os.path.join(args.output_dir, "%s-%d" % (name, seed))
  extra = {"gold": ["--alpha=0"], "distilled": ["--alpha=%g" % args.alpha],
           "distilled+unlabeled": ["--alpha=%g" % args.alpha,
                                   "--unlabeled_file=" + str(args.unlabeled_file)] + (
                                       ["--unlabeled_weight=%g" % args.unlabeled_weight]
                                       if args.unlabeled_weight else [])}[loss]
  if loss != "gold" and ensemble_dirs:
    extra = extra + ["--ensemble_dirs=" + ",".join(ensemble_dirs)]
  if not os.path.isfile(os.path.join(out, "test_results.tsv")):
    _run(distill_flags, lambda s: orchestration.run(orchestration.preflight(
        s, distributed.init(False)), distributed.init(False)), _common(args, seed) + extra + [
            "--bert_config_file=" + args.bert_config_file, "--teacher_dir=" + teacher_dir,
            "--student_layers=%d" % args.student_layers, "--layer_selection=" + selection,
            "--temperature=%g" % args.temperature, "--output_dir=" + out]
        + _distill_ner.random_student(args))
  return out


def test_correct(args, dirs):
  """float [n]: 1 where the argmax of the mean of dirs' test_results.tsv probabilities (one
  directory: its own; several: an ensemble's) is --task_dir's test label, else 0."""
  from bert_fin.finetune import finetuned  # pylint: disable=C0415
  labels = finetuned.read_labels(dirs[0])
  with open(os.path.join(args.task_dir, "test.jsonl"), encoding="utf-8") as f:
    gold = [labels.index(str(json.loads(line)["label"])) for line in f if line.strip()]
  predicted = np.mean([np.loadtxt(os.path.join(out, "test_results.tsv"), delimiter="\t",
                                  ndmin=2) for out in dirs], axis=0)
  return (np.argmax(predicted, axis=1) == np.array(gold)).astype(np.float64)


def test_accuracy(args, dirs):
  """The test accuracy of dirs' mean probabilities (test_correct) against --task_dir's labels."""
  return float(np.mean(test_correct(args, dirs)))


def paired_interval(args, dirs, baseline_dirs):
  """(low, high) points: the yardstick's paired bootstrap 95% interval of test accuracy, dirs
  minus baseline_dirs (seed by seed), the test reviews resampled, the seeds pooled."""
  from bert_fin.yardstick import bootstrap  # pylint: disable=C0415
  from bert_fin.yardstick import scoring  # pylint: disable=C0415
  difference = bootstrap.paired_difference(
      [test_correct(args, [out])[:, None] for out in dirs],
      [test_correct(args, [out])[:, None] for out in baseline_dirs], scoring.MEAN)
  return 100 * difference.low, 100 * difference.high


def dev_accuracy(out):
  """eval_accuracy of out/eval_results.txt (dev)."""
  from bert_fin.training.monitor import eval_results  # pylint: disable=C0415
  return float(eval_results.read_results_file(os.path.join(
      out, eval_results.EVAL_RESULTS_FILE))["eval_accuracy"])


def mean_std(values):
  """'mean +- sample std (n)' of a list of figures."""
  spread = statistics.stdev(values) if len(values) > 1 else 0.0
  return "%.4f +- %.4f (%d)" % (statistics.mean(values), spread, len(values))


def parameters(out):
  from bert_fin.modeling import checkpoint as checkpoint_lib  # pylint: disable=C0415
  tensors = checkpoint_lib.model_tensors(checkpoint_lib.resolve_checkpoint(out, run_dir=True))
  return sum(int(value.size) for name, value in tensors.items() if name != "global_step")


def text_signature(args, out, config_file):
  """The text signature of out's serving export (made once, beside out): a run_classifier
  directory's (probabilities out) or a run_ner directory's (tags and entities out)."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from bert_fin.serving import export  # pylint: disable=g-import-not-at-top
  from bert_fin.serving import ner  # pylint: disable=g-import-not-at-top
  export_dir = out + "-export"
  if not os.path.isdir(export_dir):
    exporter = ner.export_tagger if ner.is_tagger(out) else export.export
    exporter(export.Request(out, config_file, args.vocab_file, True, args.max_seq_length,
                            export_dir, False, False))
  return tf.saved_model.load(os.path.join(export_dir, export.SAVED_MODEL_DIR)).signatures[
      export.TEXT_SIGNATURE]


def latencies(args, signatures, texts):
  """{kind: {batch: median seconds}} of raw texts -> every output of each text signature
  ({kind: signature}; a classifier's probabilities, a tagger's tags and entities), the kinds
  taking turns a request at a time (the same machine load)."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  result = {kind: {} for kind in signatures}
  for batch in (1, 32):
    request = tf.constant((texts * batch)[:batch])
    times = {kind: [] for kind in signatures}
    for kind, signature in signatures.items():
      signature(text=request)  # warm-up
    for _ in range(args.latency_requests):
      for kind, signature in signatures.items():
        start = time.perf_counter()
        _ = [value.numpy() for value in signature(text=request).values()]
        times[kind].append(time.perf_counter() - start)
    for kind in signatures:
      result[kind][batch] = statistics.median(times[kind])
  return result


def filled(texts, length, count=32):
  """The first count texts, each repeated and cut to length characters."""
  return [(text * (1 + length // max(1, len(text))))[:length] for text in texts[:count]]


def long_texts(args):
  """Test reviews of twice --max_seq_length characters (the export cuts them to the full
  sequence length)."""
  with open(os.path.join(args.task_dir, "test.jsonl"), encoding="utf-8") as f:
    return filled([json.loads(line)["text"] for line in f if line.strip()],
                  2 * args.max_seq_length)


def print_ratio(timing):
  """The teacher / student latency line of latencies' {kind: {batch: seconds}}."""
  print("latency teacher / student: batch 1 x%.2f, batch 32 x%.2f" % (
      timing["teacher"][1] / timing["student"][1], timing["teacher"][32] / timing["student"][32]))


def print_latencies(args, timing, size):
  """A line per kind of latencies' {kind: {batch: seconds}} ({kind: parameters} size), then
  print_ratio's."""
  for kind in timing:
    print("%-8s %10d params  b1 s%d %8.1f ms  b32 %8.1f ms" % (
        kind, size[kind], args.max_seq_length, 1000 * timing[kind][1], 1000 * timing[kind][32]))
  print_ratio(timing)


def tagger_latencies(args, teacher_dir, student_dir):
  """print_latencies of a run_ner teacher and student: test sentences filling one window of
  --max_seq_length, text in, tags and entities out through the serving export."""
  timing = latencies(args, {
      "teacher": text_signature(args, teacher_dir, args.bert_config_file),
      "student": text_signature(args, student_dir, os.path.join(student_dir, "bert_config.json"))},
                     filled(_distill_ner.test_sentences(args.task_dir), args.max_seq_length - 2))
  print_latencies(args, timing, {"teacher": parameters(teacher_dir),
                                 "student": parameters(student_dir)})


def latency_only(args):
  """The latency rows alone: random-weight classifiers (--task=ner: CRF taggers) of the config
  and of its student."""
  import bench_serving  # pylint: disable=g-import-not-at-top  (bench/bench_serving.py)
  from bert_fin import modeling  # pylint: disable=g-import-not-at-top
  from bert_fin.finetune.distill import student as student_lib  # pylint: disable=C0415
  config = modeling.BertConfig.from_json_file(args.bert_config_file)
  if not args.vocab_file:
    os.makedirs(args.output_dir, exist_ok=True)
    args.vocab_file = os.path.join(args.output_dir, "vocab.txt")
    bench_serving.write_vocab(args.vocab_file, config.vocab_size)
  signatures, size = {}, {}
  for kind, shape in (("teacher", config), ("student", student_lib.student_config(
      config, args.student_layers))):
    work = os.path.join(args.output_dir, kind)
    if not os.path.isdir(work):
      os.makedirs(work)
      (_distill_ner.write_tagger if args.task == "ner" else bench_serving.write_finetuned)(
          work, shape)
    with open(os.path.join(work, "bert_config.json"), "w", encoding="utf-8") as f:
      f.write(shape.to_json_string())
    out = os.path.join(work, "finetuned")
    signatures[kind] = text_signature(args, out, os.path.join(work, "bert_config.json"))
    size[kind] = parameters(out)
  length = args.max_seq_length - 2 if args.task == "ner" else 2 * args.max_seq_length
  timing = latencies(args, signatures, [  # a tagger's text fills one window, no more
      "".join(chr(0x4E00 + (i * 7 + j) % 3000) for j in range(length)) for i in range(32)])
  print_latencies(args, timing, size)


def main(argv=None):
  args = parse_args(argv)
  if args.quick:
    quick_inputs(args)
  if args.latency_only:
    return latency_only(args)
  if args.task == "ner":
    return _distill_ner.main(args, parameters, _run, lambda teacher_dir, student_dir: (
        tagger_latencies(args, teacher_dir, student_dir)))
  if not (args.bert_config_file and args.vocab_file and args.output_dir):
    raise SystemExit("bench_distill: pass --bert_config_file, --vocab_file and --output_dir "
                     "(and --checkpoint, else the teacher starts from random init; or --quick)")
  seeds = [int(seed) for seed in args.seeds.split(",")]
  teacher_dirs = [teacher(args, seed) for seed in range(1, args.teachers + 1)]
  teacher_dir = teacher_dirs[0]
  outs = {"teacher": [teacher_dir]}
  for row in student_rows(args):
    outs[row[0]] = [student(args, row, seed, teacher_dir, teacher_dirs[1:]) for seed in seeds]
  texts = long_texts(args)
  first = outs[student_rows(args)[0][0]][0]
  timing = latencies(args, {
      "teacher": text_signature(args, teacher_dir, args.bert_config_file),
      "student": text_signature(args, first, os.path.join(first, "bert_config.json"))}, texts)
  print("%-21s %8s %-22s %-22s %12s %12s" % ("row", "params", "dev accuracy", "test accuracy",
                                             "b1 s%d ms" % args.max_seq_length, "b32 ms"))
  accuracy = {}
  for row, dirs in outs.items():
    kind = "teacher" if row == "teacher" else "student"
    accuracy[row] = [test_accuracy(args, [out]) for out in dirs]
    print("%-21s %8d %-22s %-22s %12.1f %12.1f" % (
        row, parameters(dirs[0]), mean_std([dev_accuracy(out) for out in dirs]),
        mean_std(accuracy[row]), 1000 * timing[kind][1], 1000 * timing[kind][32]))
  teacher_accuracy = accuracy["teacher"][0]
  if len(teacher_dirs) > 1:
    teacher_accuracy = test_accuracy(args, teacher_dirs)
    print("teachers of seeds 1-%d: test accuracy %s; their ensemble (mean probabilities, what "
          "the students are distilled from) %.4f, latency x%d the teacher's" % (
              len(teacher_dirs), mean_std([test_accuracy(args, [out]) for out in teacher_dirs]),
              teacher_accuracy, len(teacher_dirs)))
  for row in [r for r in accuracy if r != "teacher"]:
    print("%s / %s: %.1f%% of its test accuracy" % (
        row, "teacher" if len(teacher_dirs) == 1 else "ensemble",
        100 * statistics.mean(accuracy[row]) / teacher_accuracy))
  for row in [r for r in accuracy if r.startswith("distilled")]:
    gold = "gold" + row[row.index("@"):] if "@" in row else "gold"
    if gold not in accuracy:
      continue
    difference = [100 * (a - b) for a, b in zip(accuracy[row], accuracy[gold])]
    spread = statistics.stdev(difference) if len(difference) > 1 else 0.0
    print("%s - %s: %+.2f points, std over seeds %.2f (per seed %s); paired bootstrap 95%% "
          "[%+.2f, %+.2f]" % (row, gold, statistics.mean(difference), spread,
                              ", ".join("%+.2f" % d for d in difference),
                              *paired_interval(args, outs[row], outs[gold])))
  print_ratio(timing)

if __name__ == "__main__":
  main()
