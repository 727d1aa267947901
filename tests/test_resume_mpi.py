"""Exact resume under `mpirun -np 2 --horovod` (CPU, tf.data and DALI; dynamic-masking records
with tf.data): the job SIGKILLed after its first checkpoint and started again with the same
command ends with exactly the weights of an uninterrupted job. Rank 1 gets an output_dir of its own that stays empty (MPMD form: two hosts
without a shared filesystem): the data position comes from rank 0 by broadcast."""
import os

import pytest

from bert_fin.launch import mpirun_command, python_command

from helpers import resume_runs as rt
from helpers.resume_runs import tiny_data

STEPS, SAVE_STEPS = 8, 4  # 4 files x 7 records: 14 a rank an epoch, 3.5 micro-batches of 4


def _command(tmp_path, output_dir, pipeline):
  config = rt.write_dropout_config(str(tmp_path / "bert_config.json"))
  flags = ["--horovod"] + rt.flags(config, str(tmp_path / "records" / "*.tfrecord"), output_dir,
                                   STEPS, pipeline, SAVE_STEPS)
  rank1 = [f for f in flags if not f.startswith("--output_dir")]
  return (mpirun_command(1, python_command(rt.RUN_PRETRAINING, *flags)) + [":", "-np", "1"]
          + python_command(rt.RUN_PRETRAINING, *rank1,
                           "--output_dir=%s" % (tmp_path / "rank1_private")))


@pytest.mark.mpi
@pytest.mark.slow
@pytest.mark.parametrize("pipeline,records", [("tfdata", "static"), ("dali", "static"),
                                              ("tfdata", "dynamic")])
def test_mpirun_sigkill_then_same_command_ends_with_identical_weights(pipeline, records,
                                                                      tmp_path):
  if pipeline == "dali":
    pytest.importorskip("nvidia.dali.plugin.tf", reason="nvidia-dali TF plugin not installed")
  if records == "dynamic":  # masks drawn per (seed, epoch, record); rank 1 gets the config from 0
    tiny_data.write_dynamic_records(str(tmp_path / "records"), num_files=4, per_file=7,
                                    seq_len=rt.SEQ, seed=13)
  else:
    tiny_data.write_records(str(tmp_path / "records"), num_files=4, per_file=7, seq_len=rt.SEQ,
                            max_predictions=rt.P, seed=13)
  whole = str(tmp_path / "whole")
  rt.run(_command(tmp_path, whole, pipeline))
  resumed = str(tmp_path / "resumed")
  command = _command(tmp_path, resumed, pipeline)
  rt.kill_after_first_checkpoint(command, resumed, STEPS)
  rt.run(command)
  rt.assert_identical(rt.checkpoint_variables(resumed), rt.checkpoint_variables(whole))
  assert int(rt.checkpoint_variables(resumed)["global_step"]) == STEPS
  assert not os.path.exists(str(tmp_path / "rank1_private"))
