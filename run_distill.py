"""Distil a fine-tuned run_classifier or run_ner teacher into a smaller student: soft targets at
temperature T (a tagger's: its emission scores) mixed with the gold labels, in run_classifier's
Estimator style.

  python run_distill.py --task_name=jsonl --data_dir=samples/sentiment \\
    --teacher_dir=teacher_out/ --bert_config_file=teacher_bert_config.json --vocab_file=vocab.txt \\
    --student_layers=3 --temperature=2 --alpha=0.5 --do_train --do_eval --output_dir=student/
  python run_classifier.py ... --bert_config_file=student/bert_config.json --output_dir=student/ \\
    --do_predict   (the student is an ordinary fine-tuned run_classifier directory)
  python run_distill.py --task_name=chars --data_dir=samples/ner --teacher_dir=ner_out/ ...
                 (a run_ner teacher: the student is a run_ner directory, the teacher's CRF kept)

Thin on purpose: settings and flags in bert_fin/finetune/distill/flags.py, the work in
bert_fin/finetune/distill/orchestration.py. Flag, teacher, student and data errors found before
training print one line and exit with status 2, before anything is written.
"""
from absl import app

from bert_fin import command_line
from bert_fin import console_log
from bert_fin.finetune import program
from bert_fin.finetune.distill import flags as distill_flags

PROGRAM = "run_distill.py"
FLAGS = command_line.define_flags(distill_flags, __doc__)


def main(_):
  console_log.configure(FLAGS.verbose)  # before TensorFlow is imported
  with command_line.refusals(PROGRAM):  # flag, teacher, student, data errors: one line, exit 2
    settings = program.checked(distill_flags.settings_of(FLAGS))  # before TensorFlow: instant
    from bert_fin.finetune.distill import orchestration  # pylint: disable=g-import-not-at-top
    from bert_fin.training import distributed  # pylint: disable=g-import-not-at-top
    dist = distributed.init(settings.distribution.horovod)
    plan = orchestration.preflight(settings, dist)  # every rank: files read and checked
  orchestration.run(plan, dist)


def console_main():
  """Entry point of run_distill.py."""
  app.run(main, flags_parser=command_line.flags_parser(PROGRAM))


if __name__ == "__main__":
  console_main()
