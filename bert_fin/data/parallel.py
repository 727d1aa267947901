"""Ordered, bounded multiprocess map for streaming pipelines.

`ordered_map(fn, tasks, num_workers)` returns an iterable of fn(task) in task order. At most
`max_in_flight` tasks are submitted and not yet consumed, so memory stays bounded however long the
task stream is (multiprocessing.Pool.imap would drain the whole input iterator eagerly). Workers
are forked when ordered_map is called (call it before starting threads such as a progress bar), so
state built beforehand in module globals (tokenizer, segmenter) is inherited, not rebuilt; an
optional `initializer` runs once per worker. With num_workers <= 1 everything runs in this process.
Results must not depend on which worker ran a task: callers derive randomness from the task's
content, never from the process (forked workers share any RNG state of the parent).
"""
import collections
import multiprocessing
import os


def default_num_workers():
  """All usable cores (this process's CPU affinity where the OS has one, else os.cpu_count)."""
  try:
    return len(os.sched_getaffinity(0))
  except AttributeError:
    return os.cpu_count() or 1


class OrderedMap(object):
  """Iterable of fn(task) in task order; a context manager that always stops its workers."""

  def __init__(self, fn, tasks, num_workers, initializer, initargs, max_in_flight):
    self._fn, self._tasks = fn, tasks
    self._max_in_flight = max_in_flight or 4 * num_workers
    self._pool = None
    if num_workers > 1:
      context = multiprocessing.get_context("fork")
      self._pool = context.Pool(num_workers, initializer=initializer, initargs=initargs)
    elif initializer is not None:
      initializer(*initargs)

  def __iter__(self):
    if self._pool is None:
      for task in self._tasks:
        yield self._fn(task)
      return
    pending = collections.deque()
    for task in self._tasks:
      pending.append(self._pool.apply_async(self._fn, (task,)))
      if len(pending) >= self._max_in_flight:
        yield pending.popleft().get()
    while pending:
      yield pending.popleft().get()

  def close(self):
    if self._pool is not None:
      self._pool.terminate()
      self._pool.join()
      self._pool = None

  def __enter__(self):
    return self

  def __exit__(self, *exc_info):
    self.close()
    return False


def ordered_map(fn, tasks, num_workers, initializer=None, initargs=(), max_in_flight=None):
  """Maps fn over tasks in worker processes, in task order (see the module docstring).

  Use as `with ordered_map(...) as results: for r in results: ...`; forks the workers now.

  Args:
    fn: picklable module-level function of one task.
    tasks: an iterable (consumed lazily).
    num_workers: processes; <= 1 runs everything in this process.
    initializer: optional picklable module-level function run once per worker (or once here).
    initargs: its arguments.
    max_in_flight: tasks submitted and not yet consumed, default 4 * num_workers.

  Returns:
    OrderedMap: an iterable of fn(task) for each task, a context manager that stops the workers.
  """
  return OrderedMap(fn, tasks, num_workers, initializer, initargs, max_in_flight)
