"""Run directories written by bert_fin before the one data order resume exactly (one process;
mpirun -np 2 in the slow test).

tests/fixtures/resume_before/{single,mixture} were made by run_pretraining as it was when
--input_file had an order type of its own (DataOrder) beside the mixture's (MixedOrder): the tiny
config with dropout, --seed=7, 6 steps of 2 micro-batches of 4, checkpoints every 2 steps, killed
(SIGKILL) after its checkpoint at step 2 (a config 4 wide, 1 layer: the checkpoint is 13 KB).
Each holds the records it read, its bert_config.json and run/: data_order.json (its file paths
relative to the fixture: such paths are matched to the files given now), the step-2 checkpoint
and (one process) batches.json, the digest of every micro-batch that code's tf.data reader gave
from position 0 (all features of the batch, sha256; in a graph whose seed is the run's, as the
Estimator builds it).

Resuming such a directory with today's code ends with exactly the weights of an uninterrupted run
(max |diff| 0), and today's reader gives the same micro-batches from that order as the code that
wrote it (the records a step reads are identical before and after). {single,mixture}_np2 were
written by the same flags under `mpirun -np 2 --horovod` (rank 1 with an output_dir of its own, as
test_resume_mpi.py runs it).
"""
import hashlib
import json
import os
import shutil

import pytest

from bert_fin.launch import mpirun_command, python_command

from helpers import pretraining_runs as pt
from helpers import resume_runs as rt

FIXTURE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures", "resume_before")
STEPS, SAVE_STEPS, CHECKPOINT_STEP = 6, 2, 2


def _argv(root, kind, output_dir):
  if kind == "single":
    inputs = os.path.join(root, "records", "*.tfrecord")
  else:
    inputs = ["--input_source=small=%s:1" % os.path.join(root, "small", "*.tfrecord"),
              "--input_source=large=%s:2" % os.path.join(root, "large", "*.tfrecord")]
  return rt.flags(os.path.join(root, "bert_config.json"), inputs, output_dir, STEPS,
                  "tfdata", SAVE_STEPS)


def _mpirun(root, kind, output_dir, private_dir):
  """The two-rank command of the fixture's flags (MPMD: rank 1 writes to private_dir)."""
  flags = ["--horovod"] + _argv(root, kind, output_dir)
  rank1 = [f for f in flags if not f.startswith("--output_dir")]
  return (mpirun_command(1, python_command(rt.RUN_PRETRAINING, *flags)) + [":", "-np", "1"]
          + python_command(rt.RUN_PRETRAINING, *rank1, "--output_dir=%s" % private_dir))


@pytest.fixture
def op_determinism_restored():
  """--deterministic turns TensorFlow's op determinism on for the process: off again afterwards,
  so the tests that run after these in the same process see TensorFlow as they would alone."""
  from tensorflow.python.framework import config  # pylint: disable=import-outside-toplevel
  was = config.is_op_determinism_enabled()
  yield
  if not was:
    config.disable_op_determinism()


def _copy(kind, tmp_path):
  root = str(tmp_path / kind)
  shutil.copytree(os.path.join(FIXTURE, kind), root)
  return root


def _digests(dataset, count):
  import tensorflow.compat.v1 as tf  # pylint: disable=import-outside-toplevel
  out = []
  with tf.Graph().as_default():
    tf.set_random_seed(7)  # the graph seed the Estimator sets: the run's --seed
    batch = tf.data.make_one_shot_iterator(dataset()).get_next()
    with tf.Session() as session:
      for _ in range(count):
        values = session.run(batch)
        digest = hashlib.sha256()
        for key in sorted(values):
          digest.update(key.encode())
          digest.update(values[key].tobytes())
        out.append(digest.hexdigest()[:16])
  return out


@pytest.mark.parametrize("kind", ["single", "mixture"])
def test_a_run_directory_of_the_former_order_types_resumes_exactly(kind, tmp_path,
                                                                 op_determinism_restored):
  root = _copy(kind, tmp_path)
  run_dir = os.path.join(root, "run")
  assert rt.checkpoint_steps(run_dir) == [CHECKPOINT_STEP]
  pt.train(pt.parse_flags(_argv(root, kind, run_dir)))
  whole = str(tmp_path / "whole")
  pt.train(pt.parse_flags(_argv(root, kind, whole)))
  resumed = rt.checkpoint_variables(run_dir)
  assert int(resumed["global_step"]) == STEPS and 0 not in rt.checkpoint_steps(run_dir)
  rt.assert_identical(resumed, rt.checkpoint_variables(whole))  # max |diff| 0


@pytest.mark.parametrize("kind", ["single", "mixture"])
def test_the_reader_gives_the_micro_batches_the_former_code_gave(kind, tmp_path,
                                                                op_determinism_restored):
  from bert_fin.input import stream  # pylint: disable=import-outside-toplevel
  from bert_fin.input import tfdata  # pylint: disable=import-outside-toplevel
  from bert_fin.training import run as run_lib  # pylint: disable=import-outside-toplevel
  root = _copy(kind, tmp_path)
  with open(os.path.join(root, "run", "batches.json"), encoding="utf-8") as f:
    expected = json.load(f)["micro_batches_from_position_0"]
  run = run_lib.resolve(pt.parse_flags(_argv(root, kind, os.path.join(root, "run"))),
                        pt.workers(1))
  data_stream = stream.DataStream(run.order(), pt.workers(1), str(tmp_path), None, 2)
  view = data_stream.view(0)
  layout = run.decided.layout
  assert _digests(lambda: tfdata.training_dataset(view, layout, 4), len(expected)) == expected


@pytest.mark.mpi
@pytest.mark.slow  # two mpirun jobs
@pytest.mark.parametrize("kind", ["single", "mixture"])
def test_a_two_rank_run_directory_of_the_former_order_types_resumes_exactly(kind, tmp_path):
  root = _copy(kind + "_np2", tmp_path)
  run_dir = os.path.join(root, "run")
  assert rt.checkpoint_steps(run_dir) == [CHECKPOINT_STEP]
  rt.run(_mpirun(root, kind, run_dir, str(tmp_path / "rank1_private")))
  whole = str(tmp_path / "whole")
  rt.run(_mpirun(root, kind, whole, str(tmp_path / "rank1_whole")))
  resumed = rt.checkpoint_variables(run_dir)
  assert int(resumed["global_step"]) == STEPS and 0 not in rt.checkpoint_steps(run_dir)
  rt.assert_identical(resumed, rt.checkpoint_variables(whole))  # max |diff| 0
