"""run_pretraining under `mpirun -np 2` and `-np 4` (Horovod, CPU): every rank trains, only rank 0
writes to output_dir and evaluates, all ranks end with identical weights (also on a two-source
mixture whose small source runs through epochs mid-run); a bad file count stops every rank before
the first step. Slow on 2 cores (4 TensorFlow processes): marked mpi and slow."""
import json
import os
import subprocess

import pytest

from bert_fin.launch import mpirun_command, python_command
from helpers import TRAINING_FIXTURES
from helpers import pretraining_runs as pt
import tiny_data

SCRIPT = os.path.join(TRAINING_FIXTURES, "mpi_train.py")
RUN_PRETRAINING, SEQ, P, STEPS = pt.RUN_PRETRAINING, pt.SEQ, pt.P, pt.MPI_STEPS


def _train_and_check(tmp_path, np_, extra=(), mixture=False):
  """mixture: the records as --input_source large, beside a small source (np_ files of 2
  records: several of its epochs are recorded and broadcast while training)."""
  tiny_data.write_records(str(tmp_path / "data"), num_files=np_, per_file=8, seq_len=SEQ,
                          max_predictions=P, seed=np_)
  flags = pt.mpi_flags(tmp_path, tmp_path / "data" / "*")
  if mixture:
    tiny_data.write_records(str(tmp_path / "small"), num_files=np_, per_file=2, seq_len=SEQ,
                            max_predictions=P, seed=np_ + 1)
    flags = [f for f in flags if not f.startswith("--input_file=")] + [
        "--input_source=large=%s:1" % (tmp_path / "data" / "*"),
        "--input_source=small=%s:1" % (tmp_path / "small" / "*")]
  command = mpirun_command(np_, python_command(SCRIPT, *flags, *extra))
  proc = subprocess.run(command, capture_output=True, text=True, timeout=900,
                        env=pt.mpi_env(tmp_path))
  assert proc.returncode == 0, "mpirun failed:\n%s\n%s" % (proc.stdout[-3000:], proc.stderr[-5000:])
  results = []
  for name in sorted(os.listdir(str(tmp_path / "ranks"))):
    if name.startswith("result-"):
      with open(str(tmp_path / "ranks" / name), encoding="utf-8") as f:
        results.append(json.load(f))
  results.sort(key=lambda r: r["rank"])
  assert [r["rank"] for r in results] == list(range(np_))
  assert all(r["size"] == np_ for r in results)
  # Ranks initialise from different seeds (mpi_train.py): equality needs rank 0's broadcast.
  assert len({r["digest"] for r in results}) == 1, results
  chief = results[0]
  assert chief["checkpoint"] == "model.ckpt-%d" % STEPS
  assert chief["checkpoint_digest"] == chief["digest"]
  # Rank 0 trained in output_dir; every other rank in one private temp model_dir, removed after.
  assert [r["private_dirs"] for r in results] == [0] + [1] * (np_ - 1)
  assert all(r["private_left"] == [] for r in results)
  # output_dir holds rank 0's checkpoints only (the Estimator saves step 0 and the last step).
  indexes = {f for f in os.listdir(str(tmp_path / "out")) if f.endswith(".index")}
  assert "model.ckpt-%d.index" % STEPS in indexes
  assert indexes <= {"model.ckpt-0.index", "model.ckpt-%d.index" % STEPS}
  # Eval runs on rank 0 only (the others exit): one block, one eval_results.txt at the last step.
  assert proc.stdout.count("***** Eval results *****") == 1
  with open(str(tmp_path / "out" / "eval_results.txt"), encoding="utf-8") as f:
    block = f.read()
  assert "global_step = %d\n" % STEPS in block
  if mixture:  # each source evaluated under its name; the small one read in several epochs
    assert "large/masked_lm_loss = " in block and "small/masked_lm_loss = " in block
    with open(str(tmp_path / "out" / "data_order.json"), encoding="utf-8") as f:
      assert len(json.load(f)["sources"][1]["epochs"]) >= 3


@pytest.mark.mpi
@pytest.mark.slow
def test_mpirun_np2_refuses_files_not_divisible_by_workers(tmp_path):
  tiny_data.write_records(str(tmp_path / "odd"), num_files=3, per_file=4, seq_len=SEQ,
                          max_predictions=P)
  command = mpirun_command(2, python_command(RUN_PRETRAINING,
                                             *pt.mpi_flags(tmp_path, tmp_path / "odd" / "*")))
  proc = subprocess.run(command, capture_output=True, text=True, timeout=600,
                        env=pt.mpi_env(tmp_path))
  assert proc.returncode == 2, proc.stderr[-3000:]
  assert "Traceback" not in proc.stderr
  # printed once, by rank 0; every rank exits with status 2
  assert proc.stderr.count("run_pretraining.py: error: 3 input files are not divisible by 2 "
                           "workers") == 1, proc.stderr[-3000:]
  assert not os.path.exists(str(tmp_path / "out" / "checkpoint"))
  # (np 2 training itself: the head warm-up test below, on a mixture)


@pytest.mark.mpi
@pytest.mark.slow
def test_mpirun_np4_trains_with_identical_weights_on_every_rank(tmp_path):
  _train_and_check(tmp_path, 4)


@pytest.mark.mpi
@pytest.mark.slow
def test_mpirun_np2_head_warmup_from_an_encoder_only_checkpoint_ends_equal_on_every_rank(
    tmp_path):
  """--head_warmup_steps with post-accumulation allreduce and LAMB, the encoder held near the
  checkpoint by --init_regularizer=l2: rank 0 decides the warmed-up and the held variables and
  alone reads θ0 (broadcast to rank 1, whose penalty would differ with its own zeros), every rank
  runs the same collectives in both phases and ends with the same weights; on a mixture
  (--input_source), whose small source's epochs rank 0 records and broadcasts."""
  from helpers import random_checkpoints  # pylint: disable=import-outside-toplevel
  from bert_fin import modeling  # pylint: disable=import-outside-toplevel
  config = modeling.BertConfig.from_json_file(
      tiny_data.write_config(str(tmp_path / "bert_config.json")))
  encoder = str(tmp_path / "encoder" / "model.ckpt")
  random_checkpoints.write_random_checkpoint(encoder, config, keep=random_checkpoints.is_encoder)
  _train_and_check(tmp_path, 2, ["--init_checkpoint=" + encoder, "--head_warmup_steps=2",
                                 "--num_accumulation_steps=2", "--allreduce_post_accumulation",
                                 "--optimizer_type=lamb", "--init_regularizer=l2",
                                 "--init_regularizer_weight=100"], mixture=True)


@pytest.mark.mpi
@pytest.mark.slow
def test_resume_decision_follows_rank_0_without_a_shared_output_dir(tmp_path):
  """Two hosts without a shared filesystem, simulated with mpirun's MPMD form: rank 0's output_dir
  holds a finished run, rank 1's is empty. Every rank must follow rank 0 (skip training); deciding
  per rank would leave rank 1 training alone while rank 0 has exited."""
  tiny_data.write_records(str(tmp_path / "data"), num_files=2, per_file=8, seq_len=SEQ,
                          max_predictions=P, seed=3)
  flags = [f for f in pt.mpi_flags(tmp_path, tmp_path / "data" / "*")
           if not f.startswith(("--output_dir", "--do_eval", "--max_eval_steps"))]
  single = [f for f in flags if f != "--horovod"]
  first = subprocess.run(python_command(RUN_PRETRAINING, *single, "--output_dir=%s" % (
      tmp_path / "host0")), capture_output=True, text=True, timeout=600, env=pt.mpi_env(tmp_path))
  assert first.returncode == 0, first.stderr[-3000:]
  assert os.path.exists(str(tmp_path / "host0" / ("model.ckpt-%d.index" % STEPS)))
  rank0 = python_command(RUN_PRETRAINING, *flags, "--output_dir=%s" % (tmp_path / "host0"))
  rank1 = python_command(RUN_PRETRAINING, *flags, "--output_dir=%s" % (tmp_path / "host1"))
  command = mpirun_command(1, rank0) + [":", "-np", "1"] + rank1
  # verbose: quiet mode keeps only rank 0's INFO lines, and each rank's line is the evidence here
  proc = subprocess.run(command, capture_output=True, text=True, timeout=300,
                        env=dict(pt.mpi_env(tmp_path), BERT_FIN_VERBOSE="1"))
  assert proc.returncode == 0, "mpirun failed:\n%s\n%s" % (proc.stdout[-3000:], proc.stderr[-5000:])
  assert proc.stderr.count("Skipping training") == 2, proc.stderr[-3000:]
  assert not os.path.exists(str(tmp_path / "host1" / "checkpoint"))
