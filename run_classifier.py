"""Fine-tune a pretrained checkpoint on sentence / sentence-pair classification: google's
run_classifier.py command line on bert_fin's model, tokenizer and training step.

  python run_classifier.py --task_name=jsonl --data_dir=samples/sentiment \\
    --bert_config_file=bert_config.json --vocab_file=vocab.txt --init_checkpoint=model.ckpt-1000 \\
    --do_train --do_eval --do_predict --output_dir=out/
  mpirun -np 4 python run_classifier.py --horovod ...   (as run_pretraining)

Thin on purpose: settings and flags in bert_fin/finetune/classify/flags.py, the work in
bert_fin/finetune/classify/orchestration.py (command line: bert_fin/command_line.py). Flag,
model-input and data errors found before training print one line and exit with status 2.
"""
from absl import app

from bert_fin import command_line
from bert_fin import console_log
from bert_fin.finetune import program
from bert_fin.finetune.classify import flags as classify_flags

PROGRAM = "run_classifier.py"
FLAGS = command_line.define_flags(classify_flags, __doc__)


def main(_):
  console_log.configure(FLAGS.verbose)  # before TensorFlow is imported
  with command_line.refusals(PROGRAM):  # flag, model-input, data errors: one line, exit 2
    settings = program.checked(classify_flags.settings_of(FLAGS))  # before TensorFlow: instant
    from bert_fin.finetune.classify import orchestration  # pylint: disable=g-import-not-at-top
    from bert_fin.training import distributed  # pylint: disable=g-import-not-at-top
    dist = distributed.init(settings.distribution.horovod)
    plan = orchestration.preflight(settings, dist)  # every rank: files read and checked
  orchestration.run(settings, dist, plan)


def console_main():
  """Entry point of the bert-fin-run-classifier console script."""
  app.run(main, flags_parser=command_line.flags_parser(PROGRAM))


if __name__ == "__main__":
  console_main()
