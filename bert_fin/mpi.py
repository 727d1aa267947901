"""The data tools on several MPI ranks: who this process is, and the few collectives they use.

`world()` is the group of processes running this program: under `mpirun -np N` (Open MPI, or any
MPI whose launcher sets PMI/PMIx variables) the N ranks of MPI_COMM_WORLD through mpi4py (pinned
in requirements/constraints.txt, built against the system Open MPI); otherwise, or with N = 1, a
world of one whose collectives return at once. mpi4py is imported only under mpirun, so a plain
run needs no MPI at all.

The tools (create_pretraining_data, clean_corpus, pack_records, tfrecord2idx) divide their work
by rank over a filesystem every rank sees, and rank 0 assembles the output. Their ranks meet only
at `World.settle(step, fn)`: each rank runs fn; an exception on any rank stops every rank there
(rank 0 prints the first one, one line), so no rank waits forever in a later collective for one
that failed. A rank killed outright takes the whole job down (mpirun's default).
"""
import contextlib
import hashlib
import json
import os
import sys

from bert_fin import io_utils

LAUNCHER_VARIABLES = ("OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK")


class RankError(Exception):
  """A settle() step failed on some rank: message names the rank and the error (for rank 0 to
  print), status is the exit status for every rank (2 for user errors)."""

  def __init__(self, message, status):
    super().__init__(message)
    self.status = status


def launched_by_mpirun(environ=None):
  """True when an MPI launcher started this process (its rank variables are set)."""
  environ = os.environ if environ is None else environ
  return any(name in environ for name in LAUNCHER_VARIABLES)


class World(object):
  """This process's rank among `size`; collectives over mpi4py's COMM_WORLD (None: one process).

  Args:
    comm: mpi4py's COMM_WORLD, or None for a world of one whose collectives return at once.
  """

  def __init__(self, comm=None):
    self.comm = comm
    self.rank = comm.Get_rank() if comm else 0
    self.size = comm.Get_size() if comm else 1

  @property
  def is_root(self):
    return self.rank == 0

  @property
  def distributed(self):
    return self.size > 1

  def allgather(self, value):
    """[value of rank 0, ..., value of rank N - 1] on every rank (picklable values)."""
    return self.comm.allgather(value) if self.comm else [value]

  def gather(self, value):
    """The list of every rank's value on rank 0; None elsewhere."""
    return self.comm.gather(value, root=0) if self.comm else [value]

  def bcast(self, value):
    """Rank 0's value on every rank."""
    return self.comm.bcast(value, root=0) if self.comm else value

  def barrier(self):
    if self.comm:
      self.comm.Barrier()

  def settle(self, step, fn, user_errors=(ValueError, OSError)):
    """Runs fn() on every rank and returns its result once every rank has finished it.

    Args:
      step: what fn does, for the message (e.g. "checking the input").
      fn: function of no arguments.
      user_errors: exception types that are the user's (one line, exit status 2).

    Returns:
      this rank's fn().

    Raises:
      RankError: on every rank if fn raised on any rank (exit status 2 for user_errors, 1
        otherwise), naming the lowest failing rank and its error; an unexpected error's
        traceback is printed by the rank it happened on.
    """
    error = None
    try:
      result = fn()
    except user_errors as e:
      error, result = (2, str(e)), None
    except Exception as e:  # pylint: disable=broad-except
      import traceback  # pylint: disable=import-outside-toplevel
      traceback.print_exc(file=sys.stderr)
      error, result = (1, "%s: %s" % (type(e).__name__, e)), None
    errors = self.allgather(error)
    failed = [(rank, e) for rank, e in enumerate(errors) if e]
    if failed:
      rank, (status, message) = failed[0]
      where = " (rank %d of %d, %s)" % (rank, self.size, step) if self.distributed else ""
      raise RankError(message + where, status)
    return result

  def check_same(self, what, value):
    """Checks that every host sees the same files and runs the same command.

    Args:
      what: what value is, for the message.
      value: JSON-able (paths, sizes, flags).

    Raises:
      ValueError: on every rank, when value differs between ranks.
    """
    digest = hashlib.sha256(json.dumps(value, sort_keys=True).encode("utf-8")).hexdigest()
    digests = self.allgather(digest)
    odd = [rank for rank, d in enumerate(digests) if d != digests[0]]
    if odd:
      raise ValueError("rank %d sees other %s than rank 0: every host needs the same paths, the "
                       "same files (a shared filesystem) and the same command line"
                       % (odd[0], what))

  def spread(self, sizes):
    """The items this rank takes, balancing their sizes.

    Args:
      sizes: list of numbers (e.g. file sizes), the same on every rank.

    Returns:
      the sorted indexes of `sizes` this rank takes: items dealt biggest first to the rank with
      the least so far (ties: lowest index, lowest rank), the same on every rank.
    """
    loads, mine = [0] * self.size, []
    for index in sorted(range(len(sizes)), key=lambda i: (-sizes[i], i)):
      rank = loads.index(min(loads))
      loads[rank] += sizes[index]
      if rank == self.rank:
        mine.append(index)
    return sorted(mine)

  def share(self, count):
    """range of the items [0, count) this rank takes when they are split in contiguous runs."""
    return range(count * self.rank // self.size, count * (self.rank + 1) // self.size)


@contextlib.contextmanager
def shared_work_dir(world, directory, prefix):
  """A scratch directory of rank 0 that every rank uses.

  Args:
    world: the World.
    directory: on a filesystem every rank sees (the output's).
    prefix: the scratch directory's name prefix.

  Yields:
    on every rank, the path of rank 0's io_utils.work_dir in `directory`; rank 0 removes it when
    the block ends.
  """
  if not world.is_root:
    yield world.bcast(None)
    return
  with io_utils.work_dir(directory, prefix) as path:
    yield world.bcast(path)


_WORLD = None


def world():
  """The World of this process (built once).

  Raises:
    RuntimeError: started by mpirun but mpi4py is missing (names the fix).
  """
  global _WORLD
  if _WORLD is None:
    comm = None
    if launched_by_mpirun():
      try:
        from mpi4py import MPI  # pylint: disable=import-outside-toplevel
      except ImportError as e:
        raise RuntimeError("started by mpirun but mpi4py is missing (%s): run `make install`, or "
                           "pip install --no-binary mpi4py mpi4py (built against this MPI)" % e)
      comm = MPI.COMM_WORLD
    _WORLD = World(comm)
  return _WORLD
