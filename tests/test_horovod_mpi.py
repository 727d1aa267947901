"""Horovod was built with TensorFlow + MPI: `mpirun -np 4` runs a graph-mode allreduce correctly."""
import json
import os
import subprocess

import pytest

from bert_fin.launch import mpirun_command, python_command
from helpers import MPI_SCRIPTS



@pytest.mark.mpi
@pytest.mark.slow  # 4 TensorFlow ranks
def test_mpirun_np4_allreduce_in_graph_mode(tmp_path):
  np_ = 4
  command = mpirun_command(np_, python_command(os.path.join(MPI_SCRIPTS, "allreduce_graph.py"),
                                               tmp_path))
  env = dict(os.environ, OMP_NUM_THREADS="1", TF_CPP_MIN_LOG_LEVEL="3")
  proc = subprocess.run(command, capture_output=True, text=True, timeout=300, env=env)
  assert proc.returncode == 0, "mpirun failed:\n%s\n%s" % (proc.stdout[-3000:], proc.stderr[-3000:])
  results = [json.loads(p.read_text()) for p in sorted(tmp_path.glob("rank-*.json"))]
  assert sorted(r["rank"] for r in results) == list(range(np_))
  expected_sum = [sum(r + 1.0 for r in range(np_)), sum(10.0 * (r + 1) for r in range(np_))]
  expected_avg = sum(range(np_)) / np_
  for r in results:
    assert r["size"] == np_
    assert r["sum"] == pytest.approx(expected_sum)
    assert r["avg"] == pytest.approx([expected_avg] * 3)
    assert r["gathered"] == list(range(np_))
    assert r["broadcast"] == [0.0]
