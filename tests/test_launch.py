"""bert_fin.launch: the mpirun command line for CPU and GPU ranks."""
import shutil

import pytest

from bert_fin import launch


def test_every_nccl_variable_and_ld_library_path_reach_the_ranks():
  environ = {"NCCL_DEBUG": "INFO", "NCCL_SOCKET_IFNAME": "eth0", "LD_LIBRARY_PATH": "/x",
             "HOME": "/root", "NCCLX": "no"}
  assert launch.forwarded_env_names(environ) == ["LD_LIBRARY_PATH", "NCCL_DEBUG",
                                                 "NCCL_SOCKET_IFNAME"]


def test_gpu_ranks_are_bound_to_a_socket_cpu_ranks_are_not_and_yield(monkeypatch):
  if shutil.which("mpirun") is None:
    pytest.skip("no mpirun")
  monkeypatch.setenv("NCCL_DEBUG", "INFO")
  gpu = launch.mpirun_command(4, ["python", "x.py"], oversubscribe=False, gpus=True)
  cpu = launch.mpirun_command(4, ["python", "x.py"])
  assert gpu[gpu.index("--bind-to") + 1] == "socket" and gpu[gpu.index("--map-by") + 1] == "socket"
  assert cpu[cpu.index("--bind-to") + 1] == "none" and "--oversubscribe" in cpu
  assert "mpi_yield_when_idle 1" in " ".join(cpu) and "mpi_yield_when_idle" not in " ".join(gpu)
  assert gpu[gpu.index("NCCL_DEBUG") - 1] == "-x" and gpu[-2:] == ["python", "x.py"]
