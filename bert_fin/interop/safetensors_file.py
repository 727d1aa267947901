"""A safetensors file read as untrusted input, with numpy (every dtype, bfloat16 included).

  tensors, dtypes = read(path, budget, roots)   # {name: np.ndarray}, sorted stored dtype names

The format: an 8-byte little-endian header length N, N bytes of JSON header {name: {"dtype",
"shape", "data_offsets": [begin, end]}, "__metadata__": {str: str}}, then the tensor data (offsets
relative to its start). Checked before anything is allocated: N <= min(MAX_HEADER, the budget's
header_bytes) and <= the file's size; the header a JSON object nested at most
untrusted.MAX_JSON_DEPTH deep; each dtype known, each shape a list of at most MAX_DIMS integers
>= 0, each data_offsets two integers with end - begin the shape's bytes, the tensors in disjoint
ranges inside the file (a range past its end: a truncated download), and every tensor's elements
and bytes spent from the budget (what config.json justifies). Then each tensor is read into one
array of its size. Floats come back float32 (float16 / bfloat16 upcast exactly; float64 rounded),
other dtypes as stored. Git LFS pointers, HTML pages and JSON documents in place of the file are
named (untrusted.accident).
"""
import os
import struct

import numpy as np

from bert_fin.guard import untrusted

MAX_HEADER = 100 * untrusted.MiB  # the safetensors library's own bound
MAX_DIMS = 8
# safetensors dtype -> (numpy dtype of the stored elements, float32 after reading?)
DTYPES = {"F64": ("<f8", True), "F32": ("<f4", True), "F16": ("<f2", True),
          "BF16": ("<u2", True), "I64": ("<i8", False), "I32": ("<i4", False),
          "I16": ("<i2", False), "I8": ("i1", False), "U8": ("u1", False), "BOOL": ("?", False)}
NAMES = {"F32": "float32", "F16": "float16", "BF16": "bfloat16", "F64": "float64",
         "I64": "int64", "I32": "int32", "I16": "int16", "I8": "int8", "U8": "uint8",
         "BOOL": "bool"}
Refused = untrusted.Refused


def _is_int(value):
  return isinstance(value, int) and not isinstance(value, bool)


def _entry(path, name, entry):
  """(dtype, shape, begin, end) of one header entry, checked."""
  where = "%s: tensor %s" % (path, untrusted.quote(name))
  if not isinstance(entry, dict):
    raise Refused("%s is described by %s, not an object" % (where, untrusted.quote(entry)))
  dtype, shape, offsets = entry.get("dtype"), entry.get("shape"), entry.get("data_offsets")
  if not isinstance(dtype, str) or dtype not in DTYPES:
    raise Refused("%s has dtype %s, not one of %s" % (where, untrusted.quote(dtype),
                                                       ", ".join(sorted(DTYPES))))
  if (not isinstance(shape, list) or len(shape) > MAX_DIMS
      or not all(_is_int(n) and n >= 0 for n in shape)):
    raise Refused("%s has shape %s, not a list of at most %d integers >= 0" % (
        where, untrusted.quote(shape), MAX_DIMS))
  if (not isinstance(offsets, list) or len(offsets) != 2
      or not all(_is_int(n) and 0 <= n < 1 << 63 for n in offsets) or offsets[0] > offsets[1]):
    raise Refused("%s has data_offsets %s, not [begin, end] with 0 <= begin <= end" % (
        where, untrusted.quote(offsets)))
  numel = 1
  for n in shape:
    numel *= n
  itemsize = np.dtype(DTYPES[dtype][0]).itemsize
  if offsets[1] - offsets[0] != numel * itemsize:
    raise Refused("%s: shape %s of %s needs %d bytes, its data_offsets span %d" % (
        where, shape, dtype, numel * itemsize, offsets[1] - offsets[0]))
  return dtype, tuple(shape), offsets[0], offsets[1]


def _header(f, path, size, budget):
  """(header length N, {name: (dtype, shape, begin, end)}) of the open file, checked."""
  head = f.read(1024)
  accident = untrusted.accident(head)
  if accident and not accident.startswith("is a JSON"):
    raise Refused("%s %s" % (path, accident))
  if size < 8:
    raise Refused("%s is %d bytes: too short for a safetensors file (truncated?)" % (path, size))
  length = struct.unpack("<Q", head[:8])[0]
  limit = min(MAX_HEADER, budget.header_bytes)
  if length > size - 8 or length > limit:
    if accident:
      raise Refused("%s %s" % (path, accident))
    if length > size - 8:
      raise Refused("%s: its header length says %d bytes, the file holds %d after it: not a "
                    "safetensors file, or truncated (an interrupted download?)" % (
                        path, length, size - 8))
    raise Refused("%s: a header of %s, more than a model of %s needs (%s): refused" % (
        path, untrusted.size_text(length), budget.source, untrusted.size_text(limit)))
  f.seek(8)
  header = untrusted.parse_json(f.read(length), "%s (its header)" % path)
  if not isinstance(header, dict):
    raise Refused("%s: its header is %s, not a JSON object" % (path, untrusted.quote(header)))
  metadata = header.pop("__metadata__", {})
  if not isinstance(metadata, dict) or not all(isinstance(v, str) for v in metadata.values()):
    raise Refused("%s: its __metadata__ is not an object of strings" % path)
  if len(header) > budget.entries:
    raise Refused("%s holds %d tensors, more than a model of %s has (%d)" % (
        path, len(header), budget.source, budget.entries))
  return length, {name: _entry(path, name, entry) for name, entry in header.items()}


def _check_ranges(path, entries, data_size, budget):
  """The tensors' byte ranges disjoint and inside the data; every tensor spent from budget."""
  end_seen = 0
  for name, (dtype, shape, begin, end) in sorted(entries.items(), key=lambda e: e[1][2:]):
    if begin < end_seen:
      raise Refused("%s: tensor %s overlaps the one before it (data_offsets %d..%d): refused" % (
          path, untrusted.quote(name), begin, end))
    end_seen = max(end_seen, end)
    numel = (end - begin) // np.dtype(DTYPES[dtype][0]).itemsize
    budget.spend(numel, end - begin, path, "tensor %s %s %s" % (untrusted.quote(name), dtype,
                                                                 list(shape)))
  if end_seen > data_size:
    raise Refused("%s is truncated: its header places tensor data up to byte %d, the file holds "
                  "%d (an interrupted download? download it again)" % (path, end_seen,
                                                                        data_size))


def _read_array(f, path, dtype, shape, nbytes):
  """One tensor read from f's position: exactly its bytes, into one array, then as float32."""
  stored, to_float = DTYPES[dtype]
  numel = nbytes // np.dtype(stored).itemsize
  array = np.empty(numel, stored)
  if nbytes and f.readinto(memoryview(array).cast("B")) != nbytes:
    raise Refused("%s ended while being read (changed or truncated)" % path)
  if dtype == "BF16":
    array = (array.astype(np.uint32) << 16).view(np.float32)
  elif to_float:
    array = array.astype(np.float32, copy=False)
  else:
    array = array.astype(np.dtype(stored).newbyteorder("="), copy=False)
  return array.reshape(shape)


def read(path, budget, roots=None):
  """({name: np.ndarray}, sorted stored dtype names) of a safetensors file (module docstring);
  Refused (one line naming path) for anything the format or the budget does not allow."""
  with untrusted.open_regular(path, roots) as f:
    size = os.fstat(f.fileno()).st_size
    length, entries = _header(f, path, size, budget)
    _check_ranges(path, entries, size - 8 - length, budget)
    tensors = {}
    for name, (dtype, shape, begin, end) in sorted(entries.items(), key=lambda e: e[1][2:]):
      f.seek(8 + length + begin)
      tensors[name] = _read_array(f, path, dtype, shape, end - begin)
  return tensors, sorted({NAMES[entry[0]] for entry in entries.values()})
