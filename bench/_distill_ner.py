"""bench_distill.py --task=ner: does distilling a run_ner teacher pay? A teacher fine-tuned with
run_ner (--use_crf), its --student_layers student trained on gold tags alone (--alpha=0: run_ner
on the student) and distilled (--alpha at --temperature: the teacher's emission scores), each
student over --seeds: test entity micro-F1 (mean +- std) and parameters.

  python bench/bench_distill.py --task=ner --bert_config_file=teacher_config.json \\
      --vocab_file=vocab.txt [--checkpoint=pretrained] --output_dir=bench_distill_ner \\
      --learning_rate=1e-3 --num_train_epochs=10 [--teacher_epochs=30] --max_seq_length=64 \\
      [--student_from=random]

--task_dir defaults to samples/ner here; without --checkpoint the teacher starts from random
weights. Every run is in-process, in --output_dir/<row>-<seed> (a finished run is reused).
The last lines: the batch-1 / batch-32 latency of the teacher and the distilled seed-1 student,
end to end through the tagger's serving export (test sentences filling one window of
--max_seq_length; bench_distill.py --latency_only --task=ner: random-weight taggers of any shape).
(Not a bench script itself: the leading underscore keeps it out of `make bench`;
bench_distill.py --task=ner runs it.)
"""
import os
import statistics

NER_TASK = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "samples",
                        "ner")


def _common(args, seed):
  return ["--task_name=auto", "--data_dir=" + args.task_dir, "--vocab_file=" + args.vocab_file,
          "--max_seq_length=%d" % args.max_seq_length,
          "--train_batch_size=%d" % args.train_batch_size,
          "--learning_rate=%g" % args.learning_rate,
          "--num_train_epochs=%g" % args.num_train_epochs, "--seed=%d" % seed, "--do_train",
          "--do_predict", "--predict_batch_size=32", "--log_every_n_steps=1000"]


def teacher(args, run_program):
  """The run_ner teacher's directory (trained once, seed 1, with a CRF, --teacher_epochs)."""
  from bert_fin.finetune.ner import flags as ner_flags  # pylint: disable=C0415
  from bert_fin.finetune.ner import orchestration  # pylint: disable=C0415
  from bert_fin.training import distributed  # pylint: disable=C0415
  out = os.path.join(args.output_dir, "teacher")
  if not os.path.isfile(os.path.join(out, orchestration.TEST_RESULTS_FILE)):
    init = ["--init_checkpoint=" + args.checkpoint] if args.checkpoint else []
    epochs = ["--num_train_epochs=%g" % args.teacher_epochs] if args.teacher_epochs else []
    run_program(ner_flags, lambda s: orchestration.run(s, distributed.init(False)),
                _common(args, 1) + ["--bert_config_file=" + args.bert_config_file,
                                    "--use_crf=true", "--output_dir=" + out] + init + epochs)
  return out


def student(args, row, seed, teacher_dir, run_program):
  """The directory of a student row ("gold": alpha 0, "distilled") of one seed."""
  from bert_fin.finetune.distill import flags as distill_flags  # pylint: disable=C0415
  from bert_fin.finetune.distill import orchestration  # pylint: disable=C0415
  from bert_fin.finetune.ner import orchestration as ner_run  # pylint: disable=C0415
  from bert_fin.training import distributed  # pylint: disable=C0415
  out = os.path.join(args.output_dir, "%s-%d" % (row, seed))
  alpha = 0.0 if row == "gold" else args.alpha
  if not os.path.isfile(os.path.join(out, ner_run.TEST_RESULTS_FILE)):
    run_program(distill_flags, lambda s: orchestration.run(orchestration.preflight(
        s, distributed.init(False)), distributed.init(False)), _common(args, seed) + [
            "--alpha=%g" % alpha, "--bert_config_file=" + args.bert_config_file,
            "--teacher_dir=" + teacher_dir, "--student_layers=%d" % args.student_layers,
            "--temperature=%g" % args.temperature, "--output_dir=" + out]
        + random_student(args))
  return out


def random_student(args):
  """[--student_config=...] of a random-init student (the teacher's widths, --student_layers),
  written in --output_dir, for --student_from=random; else []."""
  if args.student_from != "random":
    return []
  from bert_fin import modeling  # pylint: disable=C0415
  from bert_fin.finetune.distill import student as student_lib  # pylint: disable=C0415
  path = os.path.join(args.output_dir, "student_config.json")
  with open(path, "w", encoding="utf-8") as f:
    f.write(student_lib.student_config(modeling.BertConfig.from_json_file(
        args.bert_config_file), args.student_layers).to_json_string())
  return ["--student_config=" + path]


TAGS = ("O", "B-ORG", "I-ORG", "B-PER", "I-PER", "B-LOC", "I-LOC")  # samples/ner's


def write_tagger(work, config):
  """work/finetuned: a run_ner output directory (CRF) of random weights, samples/ner's tags."""
  import tensorflow.compat.v1 as tf  # pylint: disable=C0415
  import bench_serving  # pylint: disable=C0415  (bench/bench_serving.py)
  from bert_fin.finetune.ner import features as ner_features  # pylint: disable=C0415
  from bert_fin.finetune.ner import model as ner_model  # pylint: disable=C0415
  from bert_fin.records import schema as records  # pylint: disable=C0415
  zeros = lambda: tf.zeros([1, 8], tf.int32)
  return bench_serving.write_random_model(os.path.join(work, "finetuned"), TAGS, lambda: (
      ner_model.create_model(config, False, {
          records.INPUT_IDS: zeros(), records.SEGMENT_IDS: zeros(),
          records.INPUT_LEN: tf.constant([8]), ner_features.LABEL_IDS: zeros(),
          ner_features.LABEL_MASK: tf.ones([1, 8], tf.int32)}, len(TAGS), use_crf=True)))


def test_micro_f1(out):
  """The test entity micro-F1 run_ner wrote in out/test_results.txt."""
  from bert_fin.finetune.ner import orchestration as ner_run  # pylint: disable=C0415
  with open(os.path.join(out, ner_run.TEST_RESULTS_FILE), encoding="utf-8") as f:
    values = dict(line.strip().split(" = ", 1) for line in f if " = " in line)
  return float(values["eval_micro_f1"])


def test_sentences(task_dir):
  """The sentences of task_dir/test.txt (a character and its tag a line, blank lines between
  sentences) as texts."""
  with open(os.path.join(task_dir, "test.txt"), encoding="utf-8") as f:
    blocks = f.read().split("\n\n")
  return [text for text in ("".join(line.split("\t")[0] for line in block.splitlines())
                            for block in blocks) if text]


def main(args, parameters, run_program, latencies):
  """The NER table on the console; parameters(out): a directory's parameter count;
  run_program(flags_module, run, argv): a program in-process (bench_distill.py's);
  latencies(teacher_dir, student_dir): prints their latency through the serving export."""
  if not (args.bert_config_file and args.vocab_file and args.output_dir):
    raise SystemExit("bench_distill --task=ner: pass --bert_config_file (the teacher's), "
                     "--vocab_file and --output_dir")
  if not args.task_dir or args.task_dir.rstrip("/").endswith("sentiment"):
    args.task_dir = NER_TASK
  seeds = [int(seed) for seed in args.seeds.split(",")]
  teacher_dir = teacher(args, run_program)
  rows, dirs = {"teacher": [test_micro_f1(teacher_dir)]}, {"teacher": teacher_dir}
  for row in ("gold", "distilled"):
    outs = [student(args, row, seed, teacher_dir, run_program) for seed in seeds]
    rows[row], dirs[row] = [test_micro_f1(out) for out in outs], outs[0]
  print("%-10s %8s %-26s %s" % ("row", "params", "test micro-F1", "per seed"))
  for row, scores in rows.items():
    spread = statistics.stdev(scores) if len(scores) > 1 else 0.0
    print("%-10s %8d %.4f +- %.4f (%d)       %s" % (
        row, parameters(dirs[row]), statistics.mean(scores), spread, len(scores),
        " ".join("%.4f" % s for s in scores)))
  for row in ("gold", "distilled"):
    print("%s / teacher: %.1f%% of its test micro-F1" % (
        row, 100 * statistics.mean(rows[row]) / rows["teacher"][0]))
  print("distilled - gold: %+.2f points (spreads %.2f / %.2f)" % (
      100 * (statistics.mean(rows["distilled"]) - statistics.mean(rows["gold"])),
      100 * statistics.stdev(rows["distilled"]) if len(seeds) > 1 else 0.0,
      100 * statistics.stdev(rows["gold"]) if len(seeds) > 1 else 0.0))
  latencies(dirs["teacher"], dirs["distilled"])
