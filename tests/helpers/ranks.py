"""Finding the processes of an MPI job, to kill one rank or the whole job in the fault tests
(Linux /proc)."""
import os
import signal
import time


def _all_pids():
  return [int(pid) for pid in os.listdir("/proc") if pid.isdigit()]


def rank_pid(rank, marker, pids=None):
  """pid of the process of MPI rank `rank` (OMPI_COMM_WORLD_RANK in its environment) whose
  command line holds marker, among pids (default: every process); None when there is none."""
  if pids is None:
    pids = _all_pids()
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


def _session_members(session):
  """The pids of the live processes whose session id is `session` (from /proc)."""
  members = []
  for pid in _all_pids():
    try:
      with open("/proc/%d/stat" % pid, encoding="utf-8") as f:
        fields = f.read().rpartition(")")[2].split()
    except OSError:
      continue  # ended meanwhile
    if int(fields[3]) == session and fields[0] != "Z":  # after "(comm)": state ppid pgrp session
      members.append(pid)
  return members


def kill_session(session, timeout=60):
  """SIGKILLs every process of the session until none is left alive (zombies aside): a whole
  mpirun job started as a session leader (Open MPI puts each rank in a process group of its own,
  so killing mpirun's group leaves the ranks running)."""
  deadline = time.time() + timeout
  while True:
    members = _session_members(session)
    if not members:
      return
    for pid in members:
      try:
        os.kill(pid, signal.SIGKILL)
      except ProcessLookupError:
        pass
    assert time.time() < deadline, "session %d still has %s" % (session, members)
    time.sleep(0.02)
