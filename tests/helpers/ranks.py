"""Finding the process of one MPI rank, to kill it in the fault tests (Linux /proc)."""
import os


def rank_pid(rank, marker, pids=None):
  """pid of the process of MPI rank `rank` (OMPI_COMM_WORLD_RANK in its environment) whose
  command line holds marker, among pids (default: every process); None when there is none."""
  if pids is None:
    pids = [int(pid) for pid in os.listdir("/proc") if pid.isdigit()]
  for pid in pids:
    try:
      with open("/proc/%d/cmdline" % pid, "rb") as f:
        cmdline = f.read()
      with open("/proc/%d/environ" % pid, "rb") as f:
        environ = f.read().split(b"\0")
    except OSError:
      continue
    if marker.encode() in cmdline and b"OMPI_COMM_WORLD_RANK=%d" % rank in environ:
      return pid
  return None
