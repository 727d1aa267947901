"""Part files: what one rank of a multi-rank run made of one piece of the work, for rank 0 to
assemble (data/multihost/create_ranks.py, data/packing/pack_files.py under mpirun).

A part holds TFRecord-framed records packed as shuffle.py packs them (the records concatenated,
their byte lengths as uint32) and a JSON `info` (the piece's statistics), behind a footer:

  records blob | lengths (uint32 [n]) | info (UTF-8 JSON) | footer

  footer = uint64 blob bytes, uint64 n, uint64 info bytes, uint32 CRC32C of everything before the
           footer, 8 bytes MAGIC  (little endian)

It is written to a temp name and renamed when complete (io_utils.atomic_output), so a killed rank
leaves no part under a final name, and read_part checks sizes and the checksum, so a damaged part
is an error (PartError), never records.
"""
import array
import json
import os
import struct

import crc32c

from bert_fin import io_utils

MAGIC = b"BFPART01"
_FOOTER = struct.Struct("<QQQI8s")


class PartError(ValueError):
  """A part file is missing, truncated or does not match its checksum."""


class PartWriter(object):
  """Context manager writing one part: add(blob, lengths) any number of times, then set `info`
  before the block ends; the part appears under `path` only when the block exits cleanly."""

  def __init__(self, path):
    self.path = path
    self.info = None
    self._lengths = array.array("I")
    self._blob_bytes = 0
    self._crc = 0
    self._manager = None
    self._file = None

  def __enter__(self):
    self._manager = io_utils.atomic_output(self.path, "wb")
    self._file = self._manager.__enter__()
    return self

  def _write(self, data):
    self._file.write(data)
    self._crc = crc32c.crc32c(data, self._crc)

  def add(self, blob, lengths):
    """blob: records concatenated; lengths: their byte lengths as uint32 array bytes."""
    self._write(blob)
    self._blob_bytes += len(blob)
    self._lengths.frombytes(lengths)

  def __exit__(self, exc_type, exc, tb):
    if exc_type is None:
      if self.info is None:
        raise AssertionError("PartWriter: set info before the part is closed")
      self._write(self._lengths.tobytes())
      info = json.dumps(self.info, sort_keys=True).encode("utf-8")
      self._write(info)
      self._file.write(_FOOTER.pack(self._blob_bytes, len(self._lengths), len(info), self._crc,
                                    MAGIC))
    return self._manager.__exit__(exc_type, exc, tb)


def _footer(path, data_size):
  if data_size < _FOOTER.size:
    raise PartError("%s: truncated part (%d bytes)" % (path, data_size))


def read_part(path):
  """(blob bytes, lengths uint32 array bytes, info dict) of a part; PartError if it is missing,
  truncated or damaged."""
  with _open(path) as f:
    data = f.read()
  _footer(path, len(data))
  blob_bytes, count, info_bytes, crc, magic = _FOOTER.unpack(data[-_FOOTER.size:])
  body = len(data) - _FOOTER.size
  if magic != MAGIC or blob_bytes + 4 * count + info_bytes != body:
    raise PartError("%s: not a whole part file" % path)
  if crc32c.crc32c(data[:body]) != crc:
    raise PartError("%s: checksum mismatch (damaged part)" % path)
  lengths = data[blob_bytes:blob_bytes + 4 * count]
  info = json.loads(data[blob_bytes + 4 * count:body].decode("utf-8"))
  return data[:blob_bytes], lengths, info


def iter_part(path, records_at_a_time=1 << 14):
  """Yields (blob, lengths) of a part's records, records_at_a_time records at a time, reading the
  file as it goes (memory: one chunk); the checksum is verified on the way and a mismatch raises
  PartError after the last chunk, so a caller writing the records atomically writes none."""
  with _open(path) as f:
    blob_bytes, count, info_bytes, crc, body = _check_footer(path, f)
    f.seek(blob_bytes)
    lengths = f.read(4 * count)
    sizes = array.array("I")
    sizes.frombytes(lengths)
    f.seek(0)
    running = 0
    for first in range(0, count, records_at_a_time):
      chunk_lengths = sizes[first:first + records_at_a_time]
      blob = f.read(sum(chunk_lengths))
      running = crc32c.crc32c(blob, running)
      yield blob, chunk_lengths.tobytes()
    running = crc32c.crc32c(lengths, running)
    f.seek(blob_bytes + 4 * count)
    running = crc32c.crc32c(f.read(info_bytes), running)
    if running != crc or body != blob_bytes + 4 * count + info_bytes:
      raise PartError("%s: checksum mismatch (damaged part)" % path)


def _open(path):
  try:
    return open(path, "rb")
  except FileNotFoundError:
    raise PartError("%s: missing part" % path)


def _check_footer(path, f):
  """(blob bytes, record count, info bytes, crc, body bytes) from an open part's footer."""
  f.seek(0, os.SEEK_END)
  size = f.tell()
  _footer(path, size)
  f.seek(size - _FOOTER.size)
  blob_bytes, count, info_bytes, crc, magic = _FOOTER.unpack(f.read(_FOOTER.size))
  body = size - _FOOTER.size
  if magic != MAGIC or blob_bytes + 4 * count + info_bytes != body:
    raise PartError("%s: not a whole part file" % path)
  return blob_bytes, count, info_bytes, crc, body


def read_info(path):
  """The info dict of a part, from its tail only (read_part / iter_part check the whole part)."""
  with _open(path) as f:
    _, _, info_bytes, _, body = _check_footer(path, f)
    f.seek(body - info_bytes)
    return json.loads(f.read(info_bytes).decode("utf-8"))


def is_whole(path):
  """True when `path` is a whole, undamaged part."""
  if not os.path.exists(path):
    return False
  try:
    read_part(path)
  except PartError:
    return False
  return True
