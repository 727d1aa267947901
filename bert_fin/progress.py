"""A progress bar over the input's bytes (known up front), advanced from any worker process.

  bar = ByteProgress(total_bytes, "clean", enabled)     # before the worker pool forks
  ... pool initializer gets bar.counter; a worker calls add(counter, n) as it reads n bytes
  with bar:                                             # after the fork: starts the display
    ...

The bar (tqdm: bytes done, total, rate, ETA, on stderr) is driven by a thread of the parent that
reads the shared counter twice a second, so one big file advances as it is read, not only when a
whole file is done. Workers never touch tqdm. Disabled: no counter, no thread, add() is a no-op.
"""
import multiprocessing
import threading

POLL_SECONDS = 0.5


def add(counter, num_bytes):
  """Adds num_bytes to a ByteProgress counter (None: no progress wanted)."""
  if counter is not None and num_bytes:
    with counter.get_lock():
      counter.value += num_bytes


class ByteProgress(object):
  """tqdm bar with total=total_bytes; `counter` is a multiprocessing.Value('q') shared by forks.

  Args:
    total_bytes: the input's size.
    desc: the bar's label.
    enabled: False: no counter (None), no thread, no bar.
  """

  def __init__(self, total_bytes, desc, enabled=True):
    self.total = int(total_bytes)
    self.desc = desc
    self.counter = multiprocessing.Value("q", 0) if enabled else None
    self._stop = threading.Event()
    self._thread = None
    self._bar = None

  def __enter__(self):
    if self.counter is None:
      return self
    import tqdm  # pylint: disable=import-outside-toplevel
    self._bar = tqdm.tqdm(total=self.total, desc=self.desc, unit="B", unit_scale=True,
                          unit_divisor=1024, dynamic_ncols=True, mininterval=1.0)
    self._thread = threading.Thread(target=self._poll, daemon=True)
    self._thread.start()
    return self

  def _sync(self):
    done = min(self.counter.value, self.total)
    if done > self._bar.n:
      self._bar.update(done - self._bar.n)

  def _poll(self):
    while not self._stop.wait(POLL_SECONDS):
      self._sync()

  def __exit__(self, *exc_info):
    if self._thread is None:
      return False
    self._stop.set()
    self._thread.join()
    self._sync()
    self._bar.close()
    return False
