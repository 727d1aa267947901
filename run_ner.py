"""Fine-tune a pretrained checkpoint on Chinese named-entity recognition (token tagging): the
sibling of run_classifier.py, with its flags, on bert_fin's model, tokenizer and training step.

  python run_ner.py --data_dir=samples/ner --bert_config_file=bert_config.json \\
    --vocab_file=vocab.txt --init_checkpoint=model.ckpt-1000 \\
    --do_train --do_eval --do_predict --output_dir=out/
  mpirun -np 4 python run_ner.py --horovod ...   (as run_classifier)

--data_dir holds {train,dev,test}.txt (`char TAG` a line, a blank line between sentences, BIO or
BIOES) or {train,dev,test}.json (CLUENER2020); --task_name=auto picks the format. Flags in
bert_fin/finetune/ner_flags.py, the work in bert_fin/finetune/ner_run.py. Flag, model-input and
data errors found before training print one line (FILE:LINE: ... for data) and exit with status 2.
"""
import sys

from absl import app

from bert_fin import console_log
from bert_fin import flag_help
from bert_fin import io_utils
from bert_fin.finetune import ner_flags
from bert_fin.training import xla_env

FLAGS = ner_flags.define_flags()
console_log.define_flag(FLAGS)
flag_help.install(FLAGS, ner_flags.flag_groups() + [console_log.FLAG_GROUP], __doc__)


def main(_):
  console_log.configure(FLAGS.verbose)  # before TensorFlow is imported
  try:
    ner_flags.validate_flags(FLAGS)  # before importing TensorFlow: refusals are instant
    io_utils.check_output_dir(FLAGS.output_dir, "--output_dir")
    xla_env.prepare(FLAGS.use_xla)
    from bert_fin.finetune import ner_run  # pylint: disable=g-import-not-at-top
    from bert_fin.training import distributed  # pylint: disable=g-import-not-at-top
    dist = distributed.init(FLAGS.horovod)
    plan = ner_run.preflight(FLAGS, dist)
  except (ValueError, IOError) as e:
    print("run_ner.py: error: %s" % e, file=sys.stderr, flush=True)
    sys.exit(2)
  ner_run.run(FLAGS, dist, plan)


def console_main():
  """Entry point of the bert-fin-run-ner console script."""
  app.run(main)


if __name__ == "__main__":
  console_main()
