"""The speed-up a pure-CPU loop gets from P processes on this machine now: the ceiling a parallel
stage's speed-up is read against (the cores are shared, and virtual cores need not give x2).
(Not a bench script itself: the leading underscore keeps it out of tests/test_bench_quick.py and
`make bench`.)
"""
import multiprocessing
import time


def _busy(n):
  total = 0
  for i in range(n):
    total += i
  return total


def cpu_headroom(processes, tasks=4, n=3 * 10**6):
  """Wall time of `tasks` loops of n additions on 1 process / on `processes` processes (fork)."""
  times = []
  for count in (1, processes):
    start = time.perf_counter()
    with multiprocessing.get_context("fork").Pool(count) as pool:
      list(pool.imap(_busy, [n] * tasks, chunksize=1))
    times.append(time.perf_counter() - start)
  return times[0] / times[1]
