"""Masked LM (+ next sentence) pretraining of BERT/RoBERTa: google-research/bert's command line.

  python run_pretraining.py --bert_config_file=... --input_file=... --output_dir=... --do_train
  mpirun -np 4 python run_pretraining.py --horovod ...   (see the README, "Train")

Thin on purpose: the flags live in bert_fin/training/flags.py, the work in
bert_fin/training/estimator.py. Flag and input errors found before training print one line and
exit with status 2 on every rank; so do the user errors found while training (a corrupt record, an
id beyond the vocab, an --init_checkpoint of another shape).
"""
import sys

from absl import app

from bert_fin import console_log
from bert_fin import flag_help
from bert_fin.training import flags as train_flags
from bert_fin.training import xla_env

FLAGS = train_flags.define_flags()
console_log.define_flag(FLAGS)
flag_help.install(FLAGS, train_flags.flag_groups() + [console_log.FLAG_GROUP], __doc__)


def main(_):
  console_log.configure(FLAGS.verbose)  # before TensorFlow is imported
  try:
    train_flags.validate_flags(FLAGS)  # before importing TensorFlow: refusals are instant
    xla_env.prepare(FLAGS.use_xla)  # TF_XLA_FLAGS is read once, when TensorFlow starts
    from bert_fin.training import distributed  # pylint: disable=g-import-not-at-top
    from bert_fin.training import estimator  # pylint: disable=g-import-not-at-top
    dist = distributed.init(FLAGS.horovod)
    plan = estimator.preflight(FLAGS, dist)
  except (ValueError, IOError) as e:
    _exit_with_error(e)
  from bert_fin.modeling import checkpoint  # pylint: disable=g-import-not-at-top
  from bert_fin.training import preflight  # pylint: disable=g-import-not-at-top
  try:
    estimator.run(FLAGS, dist, plan)
  except (preflight.InputError, checkpoint.CheckpointError) as e:  # user errors only
    _exit_with_error(e)


def _exit_with_error(error):
  print("run_pretraining.py: error: %s" % error, file=sys.stderr, flush=True)
  sys.exit(2)


def console_main():
  """Entry point of the bert-fin-run-pretraining console script."""
  app.run(main)


if __name__ == "__main__":
  console_main()
