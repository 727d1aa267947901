"""Fine-tune a pretrained checkpoint on sentence / sentence-pair classification: google's
run_classifier.py command line on bert_fin's model, tokenizer and training step.

  python run_classifier.py --task_name=jsonl --data_dir=samples/sentiment \\
    --bert_config_file=bert_config.json --vocab_file=vocab.txt --init_checkpoint=model.ckpt-1000 \\
    --do_train --do_eval --do_predict --output_dir=out/
  mpirun -np 4 python run_classifier.py --horovod ...   (as run_pretraining)

Thin on purpose: settings and flags in bert_fin/finetune/classify/flags.py, the work in
bert_fin/finetune/classify/orchestration.py (command line: bert_fin/finetune/program.py). Flag,
model-input and data errors found before training print one line and exit with status 2.
"""
from absl import app

from bert_fin import booleans
from bert_fin.finetune import program
from bert_fin.finetune.classify import flags as classify_flags

FLAGS = program.define_flags(classify_flags, __doc__)


def main(_):
  program.main("run_classifier.py", FLAGS, classify_flags,
               "bert_fin.finetune.classify.orchestration")


def console_main():
  """Entry point of the bert-fin-run-classifier console script."""
  app.run(main, flags_parser=booleans.flags_parser("run_classifier.py"))


if __name__ == "__main__":
  console_main()
