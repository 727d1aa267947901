"""Masked LM (+ next sentence) pretraining of BERT/RoBERTa: google-research/bert's command line.

  python run_pretraining.py --bert_config_file=... --input_file=... --output_dir=... --do_train
  mpirun -np 4 python run_pretraining.py --horovod ...   (see docs/training.md)

Thin on purpose: the flags are generated from the settings table bert_fin/training/settings.py
(by bert_fin/training/flags.py), the run is resolved once in bert_fin/training/run.py and trained
in bert_fin/training/estimator.py. A refusal (bad flags, inputs or resume, found before anything is
written, the same on every rank) prints one line from rank 0 and exits with status 2 on every
rank; so do the user errors found while training (a corrupt record, an id beyond the vocab, an
--init_checkpoint of another shape, a vanished file), printed by the rank that met them, and a
training that cannot progress (a non-finite loss, a run of skipped updates:
training/monitor/progress_guard.py).
"""
from absl import app

from bert_fin import command_line
from bert_fin import console_log
from bert_fin import launch
from bert_fin.training import flags as train_flags
from bert_fin.training import xla_env

PROGRAM = "run_pretraining.py"
FLAGS = command_line.define_flags(train_flags, __doc__)


def main(_):
  console_log.configure(FLAGS.verbose)  # before TensorFlow is imported
  with command_line.refusals(PROGRAM, print_it=launch.launcher_rank() == 0):  # every rank: rank 0
    train_flags.validate_flags(FLAGS)  # before importing TensorFlow: refusals are instant
    xla_env.prepare(FLAGS.use_xla)  # TF_XLA_FLAGS is read once, when TensorFlow starts
    from bert_fin.training import distributed  # pylint: disable=g-import-not-at-top
    from bert_fin.training import run as run_lib  # pylint: disable=g-import-not-at-top
    dist = distributed.init(FLAGS.horovod)
    training_run = run_lib.resolve(FLAGS, dist)  # rank 0's decisions, the same on every rank
  from bert_fin.input import stream  # pylint: disable=g-import-not-at-top
  from bert_fin.modeling import checkpoint  # pylint: disable=g-import-not-at-top
  from bert_fin.training.monitor import continuous_eval  # pylint: disable=g-import-not-at-top
  from bert_fin.training.monitor import progress_guard  # pylint: disable=g-import-not-at-top
  from bert_fin.training import estimator  # pylint: disable=g-import-not-at-top
  from bert_fin.training import preflight  # pylint: disable=g-import-not-at-top
  from bert_fin.training import run_lock  # pylint: disable=g-import-not-at-top
  rank = dist.rank
  try:
    estimator.train_and_evaluate(training_run, dist)
  except (stream.StreamError, run_lock.RunLockError) as e:  # decided by rank 0 for every rank
    command_line.refuse(PROGRAM, e, print_it=rank == 0)
  except progress_guard.TrainingHalted as e:  # a stall: every rank; a divergence: this rank
    command_line.refuse(PROGRAM, e, rank, print_it=rank == 0 or not e.every_rank)
  except (preflight.InputError, checkpoint.CheckpointError,
          continuous_eval.WatchError) as e:  # met by this rank
    command_line.refuse(PROGRAM, e, rank)


def console_main():
  """Entry point of the bert-fin-run-pretraining console script."""
  app.run(main, flags_parser=command_line.flags_parser(PROGRAM))


if __name__ == "__main__":
  console_main()
