"""How bert_fin starts N local processes with Open MPI: one place for the flags that make mpirun
work as root, oversubscribed (more ranks than cores) and inside containers.

Used by the tests, the demo and the README examples. CPU ranks are not bound (--bind-to none:
they share oversubscribed cores) and yield their core while they wait in a collective
(mpi_yield_when_idle: Open MPI otherwise spins in its progress loop unless the node is
oversubscribed by its own count, and a spinning rank takes the core the other ranks' TensorFlow
threads, or a second job, need to reach that collective). GPU ranks (gpus=True) are bound to a
socket (--bind-to socket --map-by socket), so each rank's input pipeline and kernel-launch threads stay on the NUMA node
near its GPU. The environment forwarded to the ranks includes every NCCL_* variable and
LD_LIBRARY_PATH (pip CUDA / NCCL libraries), besides the Horovod/TF knobs below.

First start on a GPU box: the TF 2.15 wheel carries no SASS for the newest GPUs' every kernel, so
the driver JIT-compiles PTX on first use (minutes on H100); the result lands in the CUDA JIT cache
(~/.nv/ComputeCache). Set CUDA_CACHE_MAXSIZE=4294967296 (forwarded) so the cache keeps it all and
later starts skip the compile.
"""
import os
import shutil
import sys


FORWARDED = ("PYTHONPATH", "PATH", "LD_LIBRARY_PATH", "OMP_NUM_THREADS", "TF_CPP_MIN_LOG_LEVEL",
             "HOROVOD_TIMELINE", "HOROVOD_CYCLE_TIME", "HOROVOD_FUSION_THRESHOLD",
             "HOROVOD_AUTOTUNE", "CUDA_VISIBLE_DEVICES", "CUDA_CACHE_MAXSIZE", "BERT_FIN_VERBOSE")


def forwarded_env_names(environ=None):
  """The variables passed to every rank with -x.

  Args:
    environ: the environment (default os.environ).

  Returns:
    the names of environ's FORWARDED variables and every NCCL_* (NCCL_DEBUG,
    NCCL_SOCKET_IFNAME, NCCL_IB_*, ...), in a stable order.
  """
  environ = os.environ if environ is None else environ
  names = [name for name in FORWARDED if name in environ]
  return names + sorted(name for name in environ if name.startswith("NCCL_"))


def mpirun_command(num_processes, argv, oversubscribe=True, gpus=False, environ=None):
  """Returns the argv list `mpirun ... argv` for num_processes local ranks.

  Args:
    num_processes: the number of ranks.
    argv: the command each rank runs, e.g. [sys.executable, "run_pretraining.py", "--horovod"].
    oversubscribe: allow more ranks than cores.
    gpus: one GPU a rank: bind each rank to a socket (see the module docstring); CPU ranks are
      not bound.
    environ: the environment mpirun will be started with (default os.environ): its forwarded
      variables are named with -x.

  Returns:
    list of str: mpirun's path, its flags, then argv.

  Raises:
    RuntimeError: with the apt command, when mpirun is missing.
  """
  mpirun = shutil.which("mpirun")
  if mpirun is None:
    raise RuntimeError("mpirun not found: install Open MPI (apt-get install openmpi-bin libopenmpi-dev)")
  binding = ["--bind-to", "socket", "--map-by", "socket"] if gpus else ["--bind-to", "none",
                                                                         "--map-by", "slot"]
  command = [mpirun, "-np", str(num_processes)] + binding
  if oversubscribe:
    command.append("--oversubscribe")
  if not gpus:
    command += ["--mca", "mpi_yield_when_idle", "1"]
  if hasattr(os, "geteuid") and os.geteuid() == 0:
    command.append("--allow-run-as-root")
  # Shared-memory transport without CMA (blocked by ptrace rules in containers); no InfiniBand
  # probe.
  command += ["--mca", "btl", "self,vader,tcp", "--mca", "btl_vader_single_copy_mechanism", "none"]
  for name in forwarded_env_names(environ):
    command += ["-x", name]
  return command + list(argv)


def python_command(script, *args):
  """[this interpreter, script, args...]: ranks use the same Python (the venv's) as the caller."""
  return [sys.executable, script] + [str(a) for a in args]


LAUNCHER_RANK_VARIABLES = ("OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK", "HOROVOD_RANK")


def launcher_rank(environ=None):
  """This process's rank as mpirun / horovodrun set it, read before anything imports Horovod.

  Args:
    environ: the environment (default os.environ).

  Returns:
    int: the rank from the Open MPI, PMIx, MPICH or Gloo variable; 0 when no launcher says (a
    single process).
  """
  environ = os.environ if environ is None else environ
  for name in LAUNCHER_RANK_VARIABLES:
    if environ.get(name, "").isdigit():
      return int(environ[name])
  return 0
