"""Fine-tune a pretrained checkpoint on extractive reading comprehension (SQuAD v1.1 / v2.0, and
CMRC 2018 / DRCD files in the same JSON schema): google's run_squad.py command line on bert_fin's
model, tokenizer and training step.

  python run_squad.py --vocab_file=vocab.txt --bert_config_file=bert_config.json \\
    --init_checkpoint=model.ckpt-1000 --do_train --train_file=train.json \\
    --do_predict --predict_file=dev.json --max_seq_length=384 --doc_stride=128 --output_dir=out/
  mpirun -np 4 python run_squad.py --horovod ...   (as run_classifier)

Writes google's predictions.json, nbest_predictions.json (null_odds.json with
--version_2_with_negative) and, when every question of --predict_file has answers, EM / F1 in
eval_results.txt (--eval_metric: SQuAD's, or CMRC 2018's for Chinese). Thin on purpose: flags in
bert_fin/finetune/squad/flags.py, the work in bert_fin/finetune/squad/orchestration.py (command
line: bert_fin/command_line.py). Flag, model-input and data errors found before
training print one line (FILE: question ID: reason for data) and exit with status 2.
"""
from absl import app

from bert_fin import command_line
from bert_fin import console_log
from bert_fin.finetune import program
from bert_fin.finetune.squad import data
from bert_fin.finetune.squad import flags as squad_flags

PROGRAM = "run_squad.py"
FLAGS = command_line.define_flags(squad_flags, __doc__)


def main(_):
  console_log.configure(FLAGS.verbose)  # before TensorFlow is imported
  with command_line.refusals(PROGRAM):  # flag, model-input, data errors: one line, exit 2
    settings = program.checked(squad_flags.settings_of(FLAGS))  # before TensorFlow: instant
    inputs = data.read_inputs(settings)  # the JSON files read and checked, still no TensorFlow
    from bert_fin.finetune.squad import orchestration  # pylint: disable=g-import-not-at-top
    from bert_fin.training import distributed  # pylint: disable=g-import-not-at-top
    dist = distributed.init(settings.distribution.horovod)
    plan = orchestration.preflight(settings, dist, inputs)  # every rank: model inputs, windows
  orchestration.run(plan, dist)


def console_main():
  """Entry point of the bert-fin-run-squad console script."""
  app.run(main, flags_parser=command_line.flags_parser(PROGRAM))


if __name__ == "__main__":
  console_main()
