"""TFRecord framing, the one place: frame records, read and verify them (length + CRC32C), write
DALI index files.

A TFRecord file is a plain sequence of framed records, each (little endian):

  uint64 length | uint32 masked_crc32c(length bytes) | data[length] | uint32 masked_crc32c(data)

with masked_crc32c(x) = ((crc >> 15) | (crc << 17)) + 0xa282ead8 (mod 2**32), crc = CRC32C(x).

An index file, the format NVIDIA DALI's `fn.readers.tfrecord` expects (and DALI's own tfrecord2idx
writes), has one line per record, `"%d %d\n" % (offset, size)`: the byte offset of the record's
first byte and the size of the whole framed record (16 + length).

Verification is what DALI's tool lacks: every length and data CRC is checked, and a truncated or
corrupt file raises TFRecordError naming the file, the record number and its byte offset. Index
files are written temp + rename, so a stopped run never leaves a partial index that looks whole.

DALI itself checks no CRC, and an index counts as current by mtime and size, which bit rot (or a
copy that keeps mtimes) does not change. So write_index also writes a checksum file beside the
index, `FILE.crc32c.idx` (`<crc32c of the whole file, hex> <size>`), and verify_checksums
recomputes it before DALI reads: one CRC32C pass over the mapped file (~14 GB/s page-cached here,
against ~270 MB/s for the per-record scan, which runs only to locate a mismatch). Both passes hand
the pages they have read back every 4 MB and the index is written as it is scanned, so memory
does not grow with the size of a shard.
Pure Python + the C-backed `crc32c` package; no TensorFlow.
"""
import mmap
import os
import struct

import crc32c as _crc32c

from bert_fin import io_utils

HEADER_BYTES = 12  # uint64 length + uint32 length crc
FOOTER_BYTES = 4  # uint32 data crc
FRAME_BYTES = HEADER_BYTES + FOOTER_BYTES
INDEX_SUFFIX = ".idx"
CHECKSUM_SUFFIX = ".crc32c" + INDEX_SUFFIX  # ends like an index: never taken for a shard

_MASK_DELTA = 0xa282ead8
_HEADER = struct.Struct("<QI")
_FOOTER = struct.Struct("<I")


class TFRecordError(ValueError):
  """A TFRecord file is truncated or corrupt; names file, record number (0-based) and offset."""

  def __init__(self, path, record_number, offset, reason):
    self.path, self.record_number, self.offset, self.reason = path, record_number, offset, reason
    super().__init__("%s: record %d at byte offset %d: %s" % (path, record_number, offset, reason))


def mask_crc(crc):
  """TFRecord's CRC mask: rotate right by 15 bits and add a constant, modulo 2**32."""
  return (((crc >> 15) | (crc << 17)) + _MASK_DELTA) & 0xffffffff


def masked_crc32c(data):
  """Masked CRC32C of a bytes-like object, as stored in TFRecord framing."""
  return mask_crc(_crc32c.crc32c(data))


_FRAME_HEADERS = {}  # record length -> uint64 length + its masked crc (a few hundred lengths)


def _frame_header(length):
  header = struct.pack("<Q", length)
  header += _FOOTER.pack(masked_crc32c(header))
  if len(_FRAME_HEADERS) < 1 << 16:
    _FRAME_HEADERS[length] = header
  return header


def frame_record(data):
  """Frames one record as tf.io.TFRecordWriter writes it.

  The header of each record length is computed once (the data pipeline frames millions of
  records).

  Args:
    data: the record's bytes.

  Returns:
    bytes: header (length + its masked CRC), data, data's masked CRC.
  """
  header = _FRAME_HEADERS.get(len(data)) or _frame_header(len(data))
  return b"".join([header, data, _FOOTER.pack(masked_crc32c(data))])


_RELEASE_BYTES = 4 << 20  # mapped pages handed back to the kernel every this many bytes read


def _release(buffer, start, end):
  """Drops the pages of buffer[start:end] (page-aligned start) from this process's mapping: a
  file read once does not stay in the process's resident memory (it stays in the page cache).
  Returns the page-aligned offset released up to."""
  end -= end % mmap.PAGESIZE
  if end > start and isinstance(buffer, mmap.mmap) and hasattr(mmap, "MADV_DONTNEED"):
    buffer.madvise(mmap.MADV_DONTNEED, start, end - start)
    return end
  return start


def _map_file(path):
  """(mmap or b"", size) of a file, read-only; an empty file maps to b""."""
  size = os.path.getsize(path)
  if size == 0:
    return b"", 0
  with open(path, "rb") as f:
    buffer = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
  if hasattr(buffer, "madvise") and hasattr(mmap, "MADV_SEQUENTIAL"):
    buffer.madvise(mmap.MADV_SEQUENTIAL)
  return buffer, size


def iter_record_spans(path, verify=True):
  """Yields every record of a TFRecord file, in file order.

  Args:
    path: the TFRecord file.
    verify: check the length CRC and the data CRC of every record.

  Yields:
    (offset, size, data memoryview); size is the framed size (16 + len(data)). The memoryview is
    valid until the generator is closed or exhausted (copy it to keep it).

  Raises:
    TFRecordError: a CRC mismatch (with verify); in any mode a record running past the end of
      the file.
  """
  buffer, size = _map_file(path)
  view = memoryview(buffer)
  crc = _crc32c.crc32c
  unpack_header, unpack_footer = _HEADER.unpack_from, _FOOTER.unpack_from
  offset, number, data, released = 0, 0, None, 0
  try:
    while offset < size:
      if size - offset < HEADER_BYTES:
        raise TFRecordError(path, number, offset, "truncated header: %d bytes left, a header has %d"
                            % (size - offset, HEADER_BYTES))
      length, length_crc = unpack_header(buffer, offset)
      if verify and mask_crc(crc(view[offset:offset + 8])) != length_crc:
        raise TFRecordError(path, number, offset, "corrupt length field (length CRC32C mismatch)")
      start = offset + HEADER_BYTES
      end = start + length
      if end + FOOTER_BYTES > size:
        raise TFRecordError(path, number, offset, "truncated: record declares %d data bytes, "
                            "the file has %d bytes after its header" % (length, size - start))
      data = view[start:end]
      if verify:
        stored, = unpack_footer(buffer, end)
        computed = mask_crc(crc(data))
        if computed != stored:
          raise TFRecordError(path, number, offset, "data CRC32C mismatch (stored 0x%08x, computed "
                              "0x%08x)" % (stored, computed))
      yield offset, length + FRAME_BYTES, data
      data.release()
      offset = end + FOOTER_BYTES
      number += 1
      if offset - released >= _RELEASE_BYTES:
        released = _release(buffer, released, offset)
  finally:
    if data is not None:
      data.release()
    view.release()
    if isinstance(buffer, mmap.mmap):
      buffer.close()


def scan_index(path, verify=True):
  """[(offset, size)] of every record of a TFRecord file (iter_record_spans).

  Raises:
    TFRecordError: the file is truncated or (with verify) corrupt.
  """
  return [(offset, size) for offset, size, _ in iter_record_spans(path, verify)]


def read_records(path, verify=True, limit=None):
  """The data bytes of the first `limit` (all if None) records of a TFRecord file.

  Args:
    path: the TFRecord file.
    verify: check every CRC read.
    limit: number of records to read, None for all.

  Returns:
    list of bytes.

  Raises:
    TFRecordError: the records read are truncated or (with verify) corrupt.
  """
  records = []
  for _, _, data in iter_record_spans(path, verify):
    if limit is not None and len(records) >= limit:
      break
    records.append(bytes(data))
  return records


def format_index(entries):
  """Index file text for [(offset, size)]: one `offset size` line per record (DALI's format)."""
  return "".join("%d %d\n" % entry for entry in entries)


def index_path_for(tfrecord_path, index_dir=None):
  """Default index file of a TFRecord file: `<file>.idx`, beside it or in index_dir."""
  if index_dir is None:
    return tfrecord_path + INDEX_SUFFIX
  return os.path.join(index_dir, os.path.basename(tfrecord_path) + INDEX_SUFFIX)


def checksum_path_for(index_path):
  """The whole-file checksum beside an index: FILE.idx -> FILE.crc32c.idx."""
  base = index_path[:-len(INDEX_SUFFIX)] if index_path.endswith(INDEX_SUFFIX) else index_path
  return base + CHECKSUM_SUFFIX


def file_checksum(path):
  """(CRC32C of the whole file, size): one pass over the mapped file, _RELEASE_BYTES at a time
  (each window's pages released once summed)."""
  buffer, size = _map_file(path)
  view = memoryview(buffer)
  crc = 0
  try:
    for start in range(0, size, _RELEASE_BYTES):
      window = view[start:start + _RELEASE_BYTES]
      crc = _crc32c.crc32c(window, crc)
      window.release()
      _release(buffer, start, start + _RELEASE_BYTES)
    return crc, size
  finally:
    view.release()
    if isinstance(buffer, mmap.mmap):
      buffer.close()


def write_index(tfrecord_path, index_path=None):
  """Verifies every record of a TFRecord file and writes its index and checksum file atomically.

  The checksum is written first: an index without one is stale.

  Args:
    tfrecord_path: the TFRecord file.
    index_path: the index to write, default index_path_for(tfrecord_path).

  Returns:
    the number of records.

  Raises:
    TFRecordError: (and writes nothing) the file is truncated or corrupt.
  """
  index_path = index_path or index_path_for(tfrecord_path)
  records = 0
  with io_utils.atomic_output(index_path, "w", encoding="ascii") as index:
    lines = []  # written a batch at a time: the index of a big shard never sits in memory
    for offset, size, _ in iter_record_spans(tfrecord_path, verify=True):
      lines.append("%d %d\n" % (offset, size))
      if len(lines) >= 1 << 14:
        records += len(lines)
        index.write("".join(lines))
        lines = []
    records += len(lines)
    index.write("".join(lines))
    crc, size = file_checksum(tfrecord_path)
    with io_utils.atomic_output(checksum_path_for(index_path), "w", encoding="ascii") as f:
      f.write("%08x %d\n" % (crc, size))
  return records  # the checksum is in place before the index appears


_verified = set()  # (path, size, mtime_ns) verified by this process


def verify_checksums(tfrecord_paths, index_paths):
  """Recomputes each file's CRC32C against the checksum written with its index.

  Each file is verified once per process (keyed by path, size and mtime).

  Args:
    tfrecord_paths: the TFRecord files.
    index_paths: their index files, in the same order (the checksum file is beside each).

  Raises:
    TFRecordError: on a mismatch the file is scanned record by record and the error names the
      file, record and byte offset; if every record still verifies, the file changed after
      indexing (record -1: re-run tfrecord2idx).
    OSError: a checksum file cannot be read.
  """
  for path, index_path in zip(tfrecord_paths, index_paths):
    stat = os.stat(path)
    key = (os.path.abspath(path), stat.st_size, stat.st_mtime_ns)
    if key in _verified:
      continue
    with open(checksum_path_for(index_path), encoding="ascii") as f:
      fields = f.read().split()
    crc, size = file_checksum(path)
    if len(fields) != 2 or fields != ["%08x" % crc, str(size)]:
      for _ in iter_record_spans(path, verify=True):  # raises at the first bad record
        pass
      raise TFRecordError(path, -1, 0, "content differs from when it was indexed (checksum "
                          "%s); re-run tfrecord2idx on it" % checksum_path_for(index_path))
    _verified.add(key)


def read_index(index_path):
  """[(offset, size)] from an index file.

  Raises:
    ValueError: naming the line, if a line is malformed.
  """
  entries = []
  with open(index_path, encoding="ascii") as f:
    for line_number, line in enumerate(f, 1):
      fields = line.split()
      if len(fields) != 2 or not all(x.isdigit() for x in fields):
        raise ValueError("%s:%d: malformed index line %r (want `offset size`)"
                         % (index_path, line_number, line))
      entries.append((int(fields[0]), int(fields[1])))
  return entries


def index_is_current(tfrecord_path, index_path):
  """Whether an index may be used for a TFRecord file without rewriting it.

  Cheap: reads only the index's last line (content is checked by verify_checksums).

  Args:
    tfrecord_path: the TFRecord file.
    index_path: its index file.

  Returns:
    True if index_path and its checksum file exist, the index is not older than the TFRecord
    file and covers exactly its bytes (last offset + size == file size).
  """
  if not os.path.exists(index_path) or not os.path.exists(checksum_path_for(index_path)):
    return False
  if os.stat(index_path).st_mtime_ns < os.stat(tfrecord_path).st_mtime_ns:
    return False
  return _indexed_bytes(index_path) == os.path.getsize(tfrecord_path)


def _indexed_bytes(index_path):
  """offset + size of the last line of an index file (0 if empty, -1 if unreadable)."""
  with open(index_path, "rb") as f:
    f.seek(0, os.SEEK_END)
    f.seek(max(0, f.tell() - 64))  # a line of two uint64 and a space fits in 64 bytes
    lines = f.read().splitlines()
  if not lines:
    return 0
  fields = lines[-1].split()
  if len(fields) != 2 or not all(x.isdigit() for x in fields):
    return -1
  return int(fields[0]) + int(fields[1])


def count_index_records(index_path):
  """Number of records an index file lists (its number of lines)."""
  with open(index_path, "rb") as f:
    return sum(chunk.count(b"\n") for chunk in iter(lambda: f.read(1 << 20), b""))
