"""Helpers of the run_pretraining tests: flags parsed as the command line parses them, a resolved
TrainingRun, in-process training, the command line in a subprocess, N workers without mpirun."""
import os
import subprocess
import sys

import tiny_data  # tests/fixtures/training, on sys.path by conftest.py

from helpers import REPO

RUN_PRETRAINING = os.path.join(REPO, "run_pretraining.py")

SEQ, P = 32, 5


def parse_flags(argv):
  """A fresh FlagValues with every run_pretraining flag, parsed from argv."""
  from absl import flags as absl_flags  # pylint: disable=import-outside-toplevel
  from bert_fin.training import flags as train_flags  # pylint: disable=import-outside-toplevel
  values = train_flags.define_flags(absl_flags.FlagValues())
  values(["run_pretraining.py"] + argv)
  return values


def tiny_argv(tmp_path, input_file, **extra):
  """run_pretraining's argv for the tiny model on tiny_data records in tmp_path/out."""
  argv = {
      "bert_config_file": tiny_data.write_config(str(tmp_path / "bert_config.json")),
      "input_file": input_file, "output_dir": str(tmp_path / "out"),
      "max_seq_length": SEQ, "max_predictions_per_seq": P, "train_batch_size": 4,
      "eval_batch_size": 8, "learning_rate": 1e-3, "num_warmup_steps": 0,
      "intra_op_parallelism_threads": 1, "inter_op_parallelism_threads": 2, "seed": 1234,
  }
  argv.update(extra)
  out = []
  for name, value in argv.items():
    if value is True:
      out.append("--" + name)
    elif value is False:
      out.append("--no" + name)
    elif value is not None:
      out.append("--%s=%s" % (name, value))
  return out


def workers(size=1):
  """Rank 0 of `size` workers without mpirun (broadcasts return rank 0's value)."""
  from bert_fin.training import distributed  # pylint: disable=import-outside-toplevel
  dist = distributed.SingleProcess()
  dist.size = size
  return dist


def resolve(tmp_path, input_file, workers_count=1, **flags):
  """The TrainingRun of tiny_argv(...) with --do_train unless flags say otherwise."""
  from bert_fin.training import run as run_lib  # pylint: disable=import-outside-toplevel
  flags.setdefault("do_train", True)
  return run_lib.resolve(parse_flags(tiny_argv(tmp_path, input_file, **flags)),
                         workers(workers_count))


def train(values, extra_hooks=None):
  """run_pretraining in this process (one worker) for parsed flags: resolve + train_and_evaluate."""
  from bert_fin.training import estimator  # pylint: disable=import-outside-toplevel
  from bert_fin.training import run as run_lib  # pylint: disable=import-outside-toplevel
  dist = workers(1)
  return estimator.train_and_evaluate(run_lib.resolve(values, dist), dist, extra_hooks)


def run_cli(tmp_path, argv, timeout=600, env=None):
  """run_pretraining.py in a subprocess (cwd tmp_path); the CompletedProcess."""
  environ = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", OMP_NUM_THREADS="1", PYTHONPATH=REPO)
  environ.update(env or {})
  return subprocess.run([sys.executable, RUN_PRETRAINING] + argv, capture_output=True, text=True,
                        timeout=timeout, env=environ, cwd=str(tmp_path))


def step_lines(stdout):
  """The step numbers of the step lines printed on stdout."""
  import re  # pylint: disable=import-outside-toplevel
  return [int(m.group(1)) for m in map(re.compile(r"^step (\d+): total_loss = ").match,
                                        stdout.splitlines()) if m]


MPI_STEPS = 4  # the mpirun tests' training length (one checkpoint at the end)


def mpi_flags(tmp_path, input_glob):
  """run_pretraining's flags of the `mpirun -np N --horovod` tests: MPI_STEPS steps of batch 2 a
  rank, train then eval 2 batches, output in tmp_path/out."""
  return ["--horovod", "--do_train", "--do_eval", "--max_eval_steps=2",
          "--bert_config_file=%s" % tiny_data.write_config(str(tmp_path / "bert_config.json")),
          "--input_file=%s" % input_glob, "--output_dir=%s" % (tmp_path / "out"),
          "--max_seq_length=%d" % SEQ, "--max_predictions_per_seq=%d" % P,
          "--train_batch_size=2", "--learning_rate=1e-3", "--num_warmup_steps=0",
          "--num_train_steps=%d" % MPI_STEPS, "--save_checkpoints_steps=%d" % MPI_STEPS,
          "--log_every_n_steps=2", "--intra_op_parallelism_threads=1",
          "--inter_op_parallelism_threads=1"]


def mpi_env(tmp_path):
  """The environment of those tests' mpirun: one thread, quiet TF, BERT_FIN_TEST_TMP for
  fixtures/training/mpi_train.py's per-rank reports."""
  return dict(os.environ, OMP_NUM_THREADS="1", TF_CPP_MIN_LOG_LEVEL="3",
              BERT_FIN_TEST_TMP=str(tmp_path / "ranks"))
