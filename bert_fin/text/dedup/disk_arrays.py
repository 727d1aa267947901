"""Corpus-sized arrays on disk, touched a window at a time, so a process's resident memory stays
bounded however many documents there are (the near-duplicate pass's signatures, survivor
locations and union-find forest).

A file mapped with np.memmap counts in a process's RSS for every page it has touched until it is
unmapped; so reads here are plain file reads (np.fromfile with an offset for a window, a pread
per run of rows for given numbers), which leave the pages in the kernel's cache, not in the
process, and the union-find forest maps its file for one call at a time and unmaps it.

  read_rows(path, dtype, row_shape, numbers)  -> the rows of ascending numbers
  read_window(path, dtype, row_shape, start, count)
  UnionFind(path, count)                      int64 [count] parent forest on disk
  BatchedWriter                               a file appended a batch of rows at a time
"""
import os

import numpy as np


def _row_bytes(dtype, row_shape):
  return int(np.dtype(dtype).itemsize * np.prod(row_shape, dtype=np.int64))


def read_window(path, dtype, row_shape, start, count):
  """dtype [count, *row_shape]: rows start .. start + count - 1 of a file of such rows (fewer at
  the end of the file), read without mapping it."""
  size = _row_bytes(dtype, row_shape)
  with open(path, "rb") as f:
    values = np.fromfile(f, dtype, count * size // np.dtype(dtype).itemsize, offset=start * size)
  return values.reshape((-1,) + tuple(row_shape))


def read_rows(path, dtype, row_shape, numbers):
  """dtype [len(numbers), *row_shape]: the rows of the given row numbers (int64 [k], any order,
  repeats allowed) of a file of such rows, read with one pread per run of consecutive numbers
  (nothing mapped: the memory is the rows returned)."""
  numbers = np.asarray(numbers, np.int64)
  row_shape = tuple(row_shape)
  if not len(numbers):
    return np.zeros((0,) + row_shape, dtype)
  size = _row_bytes(dtype, row_shape)
  unique, inverse = np.unique(numbers, return_inverse=True)
  rows = np.empty((len(unique),) + row_shape, dtype)
  raw = rows.reshape(len(unique), -1).view(np.uint8)
  breaks = np.flatnonzero(np.diff(unique) != 1) + 1
  with open(path, "rb") as f:
    for first, last in zip(np.concatenate([[0], breaks]).tolist(),
                           np.concatenate([breaks, [len(unique)]]).tolist()):
      data = os.pread(f.fileno(), (last - first) * size, int(unique[first]) * size)
      if len(data) != (last - first) * size:
        raise ValueError("%s: rows %d-%d past the end of the file" % (
            path, unique[first], unique[last - 1]))
      raw[first:last] = np.frombuffer(data, np.uint8).reshape(last - first, size)
  return rows[inverse.reshape(-1)]


class BatchedWriter(object):
  """A file of rows appended `batch` items at a time: a subclass turns the pending items into
  bytes in `_write(items, file)`. Use as a context manager (close writes the rest)."""

  def __init__(self, path, batch):
    self._file = open(path, "wb")
    self._batch = batch
    self._pending = []

  def _append(self, item):
    self._pending.append(item)
    if len(self._pending) >= self._batch:
      self._flush()

  def _flush(self):
    if self._pending:
      self._write(self._pending, self._file)
      self._pending = []

  def _write(self, items, file):
    raise NotImplementedError

  def close(self):
    self._flush()
    self._file.close()

  def __enter__(self):
    return self

  def __exit__(self, *exc_info):
    self.close()
    return False


class UnionFind(object):
  """Disjoint sets of the numbers 0 .. count - 1 whose representative (root) is always the
  smallest member, kept in a file of int64 [count] at `path` (8 bytes a number on disk, created
  sparse: parent + 1 of each number, 0 for a root). Every call maps the file, works on whole
  arrays (pointer jumping, not a Python loop a pair) and unmaps it, so resident memory is the
  pages one call touches, not the forest."""

  def __init__(self, path, count):
    self.path, self.count = path, count
    with open(path, "wb") as f:
      f.truncate(8 * count)

  def _map(self, mode):
    return np.memmap(self.path, dtype=np.int64, mode=mode, shape=(self.count,))

  @staticmethod
  def _roots(parent, items):
    current = np.array(items, np.int64)
    while True:
      up = parent[current]
      moving = np.flatnonzero(up)
      if not len(moving):
        return current
      current[moving] = up[moving] - 1

  def roots(self, items):
    """int64 [len(items)]: the root of each item."""
    if not self.count or not len(items):
      return np.array(items, np.int64)
    parent = self._map("r")
    try:
      return self._roots(parent, items)
    finally:
      del parent

  def union(self, left, right):
    """Joins the sets of each pair (left[i], right[i]) (int64 arrays of one length): each root
    hooked under the smallest root it is joined with, until every pair shares a root."""
    left, right = np.asarray(left, np.int64), np.asarray(right, np.int64)
    if not len(left):
      return
    parent = self._map("r+")
    try:
      while len(left):
        a, b = self._roots(parent, left), self._roots(parent, right)
        for items, roots in ((left, a), (right, b)):  # path compression: point at the root
          below = items != roots
          parent[items[below]] = roots[below] + 1
        apart = a != b
        if not apart.any():
          break
        left, right = left[apart], right[apart]
        low, high = np.minimum(a[apart], b[apart]), np.maximum(a[apart], b[apart])
        order = np.lexsort((low, high))  # by high root, then low: the first of each is its min
        high, low = high[order], low[order]
        first = np.concatenate([[True], high[1:] != high[:-1]])
        parent[high[first]] = low[first] + 1
      parent.flush()
    finally:
      del parent

  def non_roots(self, chunk=1 << 20):
    """Yields (int64 numbers, int64 their roots) of every number that is not a root, ascending,
    a chunk of the file at a time."""
    for start in range(0, self.count, chunk):
      stored = read_window(self.path, np.int64, (), start, chunk)
      numbers = np.flatnonzero(stored).astype(np.int64) + start
      if len(numbers):
        yield numbers, self.roots(numbers)

  def remove(self):
    if os.path.exists(self.path):
      os.remove(self.path)
