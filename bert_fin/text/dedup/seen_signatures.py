"""MinHash signatures of the documents of earlier batches, beside the seen manifest.

`clean_corpus --seen_manifest FILE --near_dup_threshold J` compares a new batch with every earlier
batch too: FILE + SUFFIX holds, per batch, the signatures (near_dup.signatures) of the documents
that batch wrote, their content hashes (the manifest's, filters.digest64), where each one's line
starts in that batch's output file (so a candidate pair can be checked on its texts while that
file is in place: `texts` reads the line back and uses it only if its hash still matches) and their
id and source (for the near-duplicate report). Band keys are not stored: they follow from the
signatures and the threshold, which may change between batches; num_perm and the hash family may
not (ValueError).

File layout (little-endian): the 8-byte MAGIC, then one block per batch:
  header: uint64 count | uint32 num_perm | uint32 0 | uint64 hash seed | uint64 ids bytes |
          uint64 output path bytes
  count x num_perm uint32 signatures | count x uint64 hashes | count x uint64 byte offsets in the
  output | the output's absolute path (UTF-8) | ids: one JSON [id, source] a line
  uint32 crc32 of header and body | uint32 BLOCK_END
Appended like the manifest (seen_manifest.py): under an exclusive flock, fsynced, after the batch's
output file is in place and BEFORE the manifest block of the batch. A block is valid when whole
(length, crc, end marker) and every hash in it is in the manifest: a run killed between the two
appends leaves a block whose documents the manifest does not know, ignored and cut off by the next
append, as a torn tail is; the batch run again is cleaned and recorded again. Reading stops at the
first block that is not valid. Memory: blocks are checked and read in chunks, with plain reads.
"""
import bisect
import collections
import json
import os
import struct
import sys
import zlib

import numpy as np

from bert_fin.text import filters
from bert_fin.text.dedup import near_dup
from bert_fin.text.dedup import seen_manifest

SUFFIX = ".minhash"
MAGIC = b"BFMINH1\n"
BLOCK_END = 0x51C7B10C
_HEADER = struct.Struct("<QIIQQQ")
# one batch's block: where its parts start in the file, its first document number
Block = collections.namedtuple(
    "Block", "first count signatures digests offsets output ids ids_bytes")
_TRAILER = struct.Struct("<II")
_CHUNK_BYTES = 1 << 24
_ROWS_AT_ONCE = 1 << 14


def path_for(manifest_path):
  return manifest_path + SUFFIX


def _read(handle, start, size):
  """`size` bytes of an open binary file from `start` (plain reads: nothing of the file stays
  mapped, so its pages do not count in the process's memory)."""
  handle.seek(start)
  return handle.read(size)


def _crc_of_range(handle, start, end, crc=0):
  for offset in range(start, end, _CHUNK_BYTES):
    crc = zlib.crc32(_read(handle, offset, min(end, offset + _CHUNK_BYTES) - offset), crc)
  return crc


def _all_known(handle, manifest, start, count):
  """True when each of the `count` uint64 hashes at `start` is in the manifest."""
  for first in range(0, count, _ROWS_AT_ONCE):
    size = min(_ROWS_AT_ONCE, count - first)
    if not manifest.contains(np.frombuffer(_read(handle, start + 8 * first, 8 * size),
                                           "<u8")).all():
      return False
  return True


def _valid_blocks(path, manifest, num_perm):
  """([Block], valid bytes, total bytes) of the file at path (see the module docstring);
  ValueError for another file or another num_perm."""
  if not os.path.exists(path) or not os.path.getsize(path):
    return [], 0, 0
  check_compatible(path[:-len(SUFFIX)], num_perm)
  total = os.path.getsize(path)
  blocks, offset, first = [], len(MAGIC), 0
  with open(path, "rb") as handle:
    while offset + _HEADER.size <= total:
      count, perms, _, seed, ids_bytes, path_bytes = _HEADER.unpack(
          _read(handle, offset, _HEADER.size))
      signatures = offset + _HEADER.size
      digests = signatures + 4 * perms * count
      offsets = digests + 8 * count
      output = offsets + 8 * count
      end = output + path_bytes + ids_bytes
      if end + _TRAILER.size > total:
        break
      crc, marker = _TRAILER.unpack(_read(handle, end, _TRAILER.size))
      if marker != BLOCK_END or crc != _crc_of_range(handle, offset, end):
        break
      _check_family(path, perms, seed, num_perm)
      if not _all_known(handle, manifest, digests, count):
        break  # a killed run's block: the manifest never got it
      blocks.append(Block(first, count, signatures, digests, offsets,
                          _read(handle, output, path_bytes).decode("utf-8"),
                          output + path_bytes, ids_bytes))
      offset, first = end + _TRAILER.size, first + count
  return blocks, offset, total


def check_compatible(manifest_path, num_perm):
  """Raises ValueError (one line, the fix) when the signature file of the manifest at
  manifest_path was written with another num_perm or hash family, or is not one: checked before
  any work, from its first block's header."""
  path = path_for(manifest_path)
  if not os.path.exists(path) or not os.path.getsize(path):
    return
  with open(path, "rb") as f:
    head = f.read(len(MAGIC) + _HEADER.size)
  if head[:len(MAGIC)] != MAGIC:
    raise ValueError("%s is not a near-duplicate signature file (no %r header): remove it or pass "
                     "another --seen_manifest" % (path, MAGIC))
  if len(head) == len(MAGIC) + _HEADER.size:
    _, perms, _, seed, _, _ = _HEADER.unpack(head[len(MAGIC):])
    _check_family(path, perms, seed, num_perm)


def _check_family(path, perms, seed, num_perm):
  if perms != num_perm or seed != near_dup.HASH_SEED:
    raise ValueError("%s holds signatures of --near_dup_num_perm %d (hash seed %d), this run "
                     "uses %d (seed %d): use the same --near_dup_num_perm for every batch"
                     % (path, perms, seed, num_perm, near_dup.HASH_SEED))


class SeenSignatures(object):
  """The valid blocks of the signature file of manifest `manifest` (a SeenManifest)."""

  def __init__(self, manifest, num_perm):
    self.path = path_for(manifest.path)
    self.num_perm = num_perm
    self.blocks, valid, total = _valid_blocks(self.path, manifest, num_perm)
    if total > valid:
      print("warning: %s: %d bytes of an unfinished append (a killed run) are ignored and will be "
            "truncated" % (self.path, total - valid), file=sys.stderr)

  def __len__(self):
    return sum(block.count for block in self.blocks)

  def signature_chunks(self, rows=1 << 16):
    """Yields uint32 [<= rows, num_perm] arrays: every earlier document's signature, in order."""
    if not self.blocks:
      return
    with open(self.path, "rb") as handle:
      for block in self.blocks:
        for start in range(0, block.count, rows):
          size = min(rows, block.count - start)
          yield np.frombuffer(_read(handle, block.signatures + 4 * self.num_perm * start,
                                    4 * self.num_perm * size), "<u4").reshape(size, self.num_perm)

  def _by_block(self, numbers):
    """{block: [numbers in it]} for document numbers < len(self)."""
    starts = [block.first for block in self.blocks]
    found = collections.defaultdict(list)
    for number in sorted(set(int(n) for n in numbers)):
      found[self.blocks[bisect.bisect_right(starts, number) - 1]].append(number)
    return found

  def ids(self, numbers):
    """{number: (id, source)} for the given document numbers (< len(self)); reads the ids
    sections of the blocks holding them line by line."""
    found = {}
    if not len(numbers):
      return found
    with open(self.path, "rb") as handle:
      for block, wanted in self._by_block(numbers).items():
        handle.seek(block.ids)
        wanted_lines = {number - block.first: number for number in wanted}
        for line_number in range(max(wanted_lines) + 1):
          line = handle.readline()
          if line_number in wanted_lines:
            found[wanted_lines[line_number]] = tuple(json.loads(line))
    return found

  def texts(self, numbers):
    """{number: text} of the given document numbers read back from their batch's output file,
    for those whose line is still there with the same content hash (a moved, rewritten or
    sharded output gives none: the caller falls back to the signatures)."""
    found = {}
    if not len(numbers):
      return found
    with open(self.path, "rb") as handle:
      for block, wanted in self._by_block(numbers).items():
        try:
          with open(block.output, "rb") as output:
            for number in wanted:
              index = number - block.first
              offset, = np.frombuffer(_read(handle, block.offsets + 8 * index, 8), "<u8")
              digest, = np.frombuffer(_read(handle, block.digests + 8 * index, 8), "<u8")
              output.seek(int(offset))
              try:
                text = "\n".join(json.loads(output.readline())["sentences"])
              except (ValueError, KeyError, TypeError):
                continue
              if seen_manifest.digest_to_int(filters.digest64(text)) == digest:
                found[number] = text
        except OSError:
          continue
    return found


def write_ids(handle, doc_id, source):
  """Writes one document's line of a block's ids section to an open text file."""
  handle.write(json.dumps([doc_id, source], ensure_ascii=False) + "\n")


def append_block(manifest, num_perm, signature_rows, digests, offsets, output_path, ids_path):
  """Appends one block to the signature file of `manifest` (a SeenManifest, not yet holding this
  batch) after cutting off a torn or orphan tail; fsyncs. signature_rows: uint32 [n, num_perm],
  digests: uint64 [n], offsets: uint64 [n] where each document's line starts in output_path
  (each anything with a len and [start:stop] slices, read _ROWS_AT_ONCE rows at a time),
  ids_path: a file of n write_ids lines. Returns n."""
  path = path_for(manifest.path)
  output = os.path.abspath(output_path).encode("utf-8")
  header = _HEADER.pack(len(digests), num_perm, 0, near_dup.HASH_SEED,
                        os.path.getsize(ids_path), len(output))
  with seen_manifest.locked(path) as fd:
    _, valid, total = _valid_blocks(path, manifest, num_perm)
    if valid == 0:
      os.ftruncate(fd, 0)
      seen_manifest.write_all(fd, MAGIC)
    elif total > valid:
      os.ftruncate(fd, valid)
    os.lseek(fd, max(valid, len(MAGIC)), os.SEEK_SET)
    crc = zlib.crc32(header)
    seen_manifest.write_all(fd, header)
    for column, dtype in ((signature_rows, "<u4"), (digests, "<u8"), (offsets, "<u8")):
      for start in range(0, len(digests), _ROWS_AT_ONCE):
        chunk = np.ascontiguousarray(column[start:start + _ROWS_AT_ONCE], dtype).tobytes()
        crc = zlib.crc32(chunk, crc)
        seen_manifest.write_all(fd, chunk)
    crc = zlib.crc32(output, crc)
    seen_manifest.write_all(fd, output)
    with open(ids_path, "rb") as ids:
      for chunk in iter(lambda: ids.read(_CHUNK_BYTES), b""):
        crc = zlib.crc32(chunk, crc)
        seen_manifest.write_all(fd, chunk)
    seen_manifest.write_all(fd, _TRAILER.pack(crc, BLOCK_END))
    os.fsync(fd)
  return len(digests)
