"""The parent's bounded shuffle of records and their round-robin dealing to the output files.

Records travel from the workers packed: `(blob, lengths)`, the records concatenated and their byte
lengths as uint32 array bytes (pack_records / unpack_records), so the parent makes no Python object
per record. The shuffle is a window of `window` records, like tf.data's shuffle buffer: once full,
each incoming record takes the place of a uniformly drawn slot (`int(rng.random() * window)`) and
the record there is emitted; drain() shuffles what is left (rng.shuffle). WindowShuffler is that in
Python (the reference); KernelWindowShuffler is the same in C (_kernel_shuffle.h): the same draws
from the same random.Random, the same emitted order (tests/test_shuffle.py). deal_records assigns
record k of a batch to file (first + k) % num_files, as ShardedRecordWriter.write_many does.
"""
import array
import itertools

from bert_fin.data.kernel import dispatch as kernel_dispatch


def pack_records(records):
  """Packs records for the trip from a worker to the parent.

  Args:
    records: list of bytes.

  Returns:
    (blob: the records concatenated, lengths: their byte lengths as uint32 array bytes).
  """
  return b"".join(records), array.array("I", map(len, records)).tobytes()


def count_records(lengths):
  """How many records a packed `lengths` describes."""
  return len(lengths) // array.array("I").itemsize


def unpack_records(blob, lengths):
  """(blob, lengths) of pack_records -> list of bytes (the records, in order)."""
  sizes = array.array("I")
  sizes.frombytes(lengths)
  offsets = list(itertools.accumulate(sizes, initial=0))
  return list(map(blob.__getitem__, map(slice, offsets, offsets[1:])))


class WindowShuffler(object):
  """Bounded shuffle in Python (the reference): holds at most `window` records.

  Args:
    window: the number of records held.
    rng: the random.Random drawing the slots.
  """

  def __init__(self, window, rng):
    self._window = window
    self._rng = rng
    self._buffer = []

  def push_many(self, records):
    """Pushes each record in order.

    Args:
      records: list of bytes.

    Returns:
      the emitted records (a list, maybe empty; none until the window is full).
    """
    buffer, window = self._buffer, self._window
    room = window - len(buffer)
    if room > 0:
      buffer += records[:room]
      records = records[room:]
    emitted = []
    append, random = emitted.append, self._rng.random
    for record in records:
      slot = int(random() * window)
      append(buffer[slot])
      buffer[slot] = record
    return emitted

  def push_packed(self, blob, lengths):
    """push_many on packed records; returns the emitted records packed."""
    return pack_records(self.push_many(unpack_records(blob, lengths)))

  def drain(self):
    """The records still held, shuffled (list of bytes); empties the window."""
    self._rng.shuffle(self._buffer)
    out, self._buffer = self._buffer, []
    return out


class KernelWindowShuffler(object):
  """WindowShuffler.push_packed / drain in C (the same records in the same order).

  Args:
    window: the number of records held.
    rng: the random.Random drawing the slots; the C code advances its state.
  """

  def __init__(self, window, rng):
    self._window = kernel_dispatch.c_module().make_window(window)
    self._rng = rng

  def push_packed(self, blob, lengths):
    # the C code draws from rng's own Mersenne Twister state and returns it advanced
    version, internal, gauss = self._rng.getstate()
    blob, lengths, internal = kernel_dispatch.c_module().window_push(self._window, internal, blob,
                                                                lengths)
    self._rng.setstate((version, internal, gauss))
    return blob, lengths

  def drain(self):
    records = kernel_dispatch.c_module().window_drain(self._window)
    self._rng.shuffle(records)
    return records


def make_shuffler(window, rng, kernel="auto"):
  """The window shuffler of the kernel in use.

  Args:
    window: the number of records held.
    rng: a random.Random.
    kernel: "auto", "c" or "python" (kernel_dispatch.resolve).

  Returns:
    KernelWindowShuffler or WindowShuffler for kernel_dispatch.resolve(kernel).

  Raises:
    ValueError, RuntimeError: as kernel_dispatch.resolve.
  """
  if kernel_dispatch.resolve(kernel) == "c":
    return KernelWindowShuffler(window, rng)
  return WindowShuffler(window, rng)


def deal_records(blob, lengths, num_files, first, kernel="auto"):
  """Deals packed records round-robin to files (ShardedRecordWriter.write_dealt writes them).

  Args:
    blob, lengths: packed records (pack_records).
    num_files: the number of output files.
    first: the file record 0 goes to (ShardedRecordWriter.next_file).
    kernel: "auto", "c" or "python" (kernel_dispatch.resolve).

  Returns:
    list of num_files bytes: record k goes to file (first + k) % num_files, framed records
    concatenated in order.
  """
  if kernel_dispatch.resolve(kernel) == "c":
    return kernel_dispatch.c_module().deal_records(blob, lengths, num_files, first)
  records = unpack_records(blob, lengths)
  return [b"".join(records[(f - first) % num_files::num_files]) for f in range(num_files)]
