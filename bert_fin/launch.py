"""How bert_fin starts N local processes with Open MPI: one place for the flags that make mpirun
work as root, oversubscribed (more ranks than cores) and inside containers.

Used by the tests, the demo and the README examples. On a real multi-GPU box users usually run
`mpirun -np 4 --bind-to none --map-by slot -x NCCL_DEBUG=INFO ... python run_pretraining.py --horovod`.
"""
import os
import shutil
import sys


def mpirun_command(num_processes, argv, oversubscribe=True):
  """Returns the argv list `mpirun ... argv` for num_processes local ranks.

  argv: the command each rank runs, e.g. [sys.executable, "run_pretraining.py", "--horovod"].
  Raises RuntimeError with the apt command when mpirun is missing.
  """
  mpirun = shutil.which("mpirun")
  if mpirun is None:
    raise RuntimeError("mpirun not found: install Open MPI (apt-get install openmpi-bin libopenmpi-dev)")
  command = [mpirun, "-np", str(num_processes), "--bind-to", "none", "--map-by", "slot"]
  if oversubscribe:
    command.append("--oversubscribe")
  if hasattr(os, "geteuid") and os.geteuid() == 0:
    command.append("--allow-run-as-root")
  # Shared-memory transport without CMA (blocked by ptrace rules in containers); no InfiniBand probe.
  command += ["--mca", "btl", "self,vader,tcp", "--mca", "btl_vader_single_copy_mechanism", "none"]
  for name in ("PYTHONPATH", "PATH", "OMP_NUM_THREADS", "TF_CPP_MIN_LOG_LEVEL", "HOROVOD_TIMELINE",
               "HOROVOD_CYCLE_TIME", "HOROVOD_FUSION_THRESHOLD", "HOROVOD_AUTOTUNE", "CUDA_VISIBLE_DEVICES"):
    if name in os.environ:
      command += ["-x", name]
  return command + list(argv)


def python_command(script, *args):
  """[this interpreter, script, args...]: ranks use the same Python (the venv's) as the caller."""
  return [sys.executable, script] + [str(a) for a in args]
