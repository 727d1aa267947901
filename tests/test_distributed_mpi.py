"""Two Horovod ranks (one mpirun launch): the training step equals one process on the whole batch,
the allreduce runs where StepConfig says, one rank's overflow stops both ranks' update.

The script tests/mpi_scripts/train_step_2ranks.py does the work and prints raw figures; the
assertions are here. About 1-2 minutes on 2 shared cores.
"""
import json
import os
import subprocess

import pytest

from bert_fin.launch import mpirun_command, python_command
from helpers import MPI_SCRIPTS

NUM_RANKS = 2
FINITE_CHECK_ALLREDUCES = 0  # the finite check reads the averaged gradients: no collective of its own


@pytest.fixture(scope="module")
def results(tmp_path_factory):
  pytest.importorskip("horovod.tensorflow")
  result_dir = str(tmp_path_factory.mktemp("ranks"))
  script = os.path.join(MPI_SCRIPTS, "train_step_2ranks.py")
  command = mpirun_command(NUM_RANKS, python_command(script, result_dir))
  env = dict(os.environ, OMP_NUM_THREADS="1", TF_CPP_MIN_LOG_LEVEL="3")
  proc = subprocess.run(command, capture_output=True, text=True, timeout=900, env=env)
  assert proc.returncode == 0, "mpirun failed:\n%s\n%s" % (proc.stdout[-3000:], proc.stderr[-3000:])
  parsed = []
  for name in sorted(os.listdir(result_dir)):
    with open(os.path.join(result_dir, name)) as f:
      parsed.append(json.load(f))
  assert sorted(r["rank"] for r in parsed) == list(range(NUM_RANKS)), proc.stdout[-3000:]
  return sorted(parsed, key=lambda r: r["rank"])


def _equivalence(results, name):
  return [next(e for e in r["equivalence"] if e["name"] == name) for r in results]


@pytest.mark.mpi
@pytest.mark.slow
def test_interface(results):
  for rank, result in enumerate(results):
    assert result["size"] == NUM_RANKS
    assert result["local_rank"] == rank
    assert result["is_chief"] == (rank == 0)


@pytest.mark.mpi
@pytest.mark.slow
@pytest.mark.parametrize("name,atol", [
    ("n1", 1e-5),
    ("n2_per_micro_batch", 1e-5),
    ("n2_post", 1e-5),
    ("n1_sparse_allgather", 1e-5),
    ("n2_post_fp16_allreduce", 1e-3),  # gradients travel as float16
])
def test_two_ranks_equal_one_process_on_the_whole_batch(results, name, atol):
  per_rank = _equivalence(results, name)
  for check in per_rank:
    assert check["max_diff"] < atol, check
    num_steps = check["num_steps"]
    assert check["global_steps"] == [u + 1 if k == num_steps - 1 else u
                                     for u in range(2) for k in range(num_steps)]
  assert per_rank[0]["checksum"] == per_rank[1]["checksum"]  # identical weights on both ranks


@pytest.mark.mpi
@pytest.mark.slow
@pytest.mark.parametrize("name", ["n1", "n2_per_micro_batch", "n2_post", "n2_post_fp16_allreduce"])
def test_allreduces_executed_per_micro_step(results, name):
  for check in _equivalence(results, name):
    tensors, num_steps = check["num_tensors"], check["num_steps"]
    assert check["graph_allreduces"] == tensors
    on_update = tensors + FINITE_CHECK_ALLREDUCES
    before_update = 0 if check["post"] else tensors
    assert check["run_allreduces"] == ([before_update] * (num_steps - 1) + [on_update]) * 2


@pytest.mark.mpi
@pytest.mark.slow
def test_sparse_gradients_go_through_allgather_not_allreduce(results):
  for check in _equivalence(results, "n1_sparse_allgather"):
    dense_tensors = check["num_tensors"] - 1  # the embedding table's IndexedSlices
    assert check["run_allreduces"] == [dense_tensors + FINITE_CHECK_ALLREDUCES] * 2


@pytest.mark.mpi
@pytest.mark.slow
def test_overflow_on_one_rank_skips_the_update_everywhere(results):
  for result in results:
    overflow = result["overflow"]
    assert overflow["all_finite"] is False
    assert overflow["global_step"] == 0
    assert overflow["loss_scale_after"] == 2.0 ** 15
    assert overflow["state_unchanged"] and overflow["state_finite"]


@pytest.mark.mpi
@pytest.mark.slow
def test_chief_decides_for_every_rank(results):
  for result in results:
    decided = result["chief_decides"]
    assert decided["answer"] == {"decided_by": 0}
    assert decided["refusal"] == "refused by rank 0"  # raised on rank 1 too, as the asked type
    assert decided["decide_calls"] == ([0] if result["rank"] == 0 else [])


@pytest.mark.mpi
@pytest.mark.slow
def test_broadcast_gives_every_rank_rank_0s_initial_values(results):
  for result in results:
    assert result["broadcast"] == 10.0  # rank 0's initial value (rank + 10)
