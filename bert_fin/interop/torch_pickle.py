"""PyTorch's pytorch_model.bin read with numpy: no PyTorch, no pickle code run, untrusted input.

  load_state_dict(path, budget, roots) -> ({name: np.ndarray}, sorted stored dtype names)

A .bin is a pickled state dict (an OrderedDict of name -> tensor) in one of two layouts:
  zip (PyTorch >= 1.6, what transformers writes): <archive>/data.pkl, the pickle, whose tensors
      name their storages by key; each storage's raw bytes are the record <archive>/data/<key>;
      <archive>/byteorder says little or big endian (little when absent).
  legacy (older PyTorch, `_use_new_zipfile_serialization=False`): one stream of pickles: a magic
      number, the protocol 1001, a sys-info dict, the state dict, the list of storage keys, then
      each storage as int64 element count + raw bytes, in that list's order.
The pickles run on pickle_machine.py (bounded, restricted opcodes); the only globals resolved are
collections.OrderedDict, torch._utils._rebuild_tensor_v2 (and the older _rebuild_tensor) /
_rebuild_parameter (rebuilt as numpy arrays) and the typed storage classes (torch.FloatStorage,
HalfStorage, BFloat16Storage, ...). Anything else raises UnsupportedPickle naming it.

Bounds (budget: untrusted.Budget, what config.json justifies; None: unlimited, trusted files):
  zip: the central directory's entry count and size read from its end record before zipfile
  parses it (<= budget.entries, budget.header_bytes); encrypted members and compression other
  than stored / deflate refused; data.pkl at most budget.pickle_bytes unpacked; each storage
  record read to exactly its elements' bytes. Legacy: pickles at most budget.pickle_bytes, each
  storage's count as the pickle said and within the file's remaining bytes.
  Every storage's bytes are spent from the budget when the pickle first names it, every tensor's
  elements when it is rebuilt, before anything is allocated. A tensor has at most MAX_DIMS
  dimensions, integer sizes / strides / offset >= 0, no stride 0 on a dimension longer than 1 (an
  expanded view), no overlapping strides, every element inside its storage; it is a copy of just
  its span. bfloat16 storages (numpy has no bfloat16) come back as float32, exactly; other dtypes
  as stored (hf_folder.py makes floats float32).
"""
import collections
import functools
import os
import struct
import zipfile

import numpy as np

from bert_fin.interop import pickle_machine
from bert_fin.guard import untrusted

LEGACY_MAGIC = 0x1950a86a20f9469cfc6c
LEGACY_PROTOCOL = 1001
BFLOAT16 = "bfloat16"
MAX_DIMS = 8
# torch.<Name>Storage -> numpy dtype of its elements.
STORAGE_DTYPES = {
    "FloatStorage": np.float32, "HalfStorage": np.float16, "BFloat16Storage": BFLOAT16,
    "DoubleStorage": np.float64, "LongStorage": np.int64, "IntStorage": np.int32,
    "ShortStorage": np.int16, "CharStorage": np.int8, "ByteStorage": np.uint8,
    "BoolStorage": np.bool_,
}
UnsupportedPickle = pickle_machine.UnsupportedPickle
_ZIP_MAGIC, _END, _END64, _LOCATOR64 = b"PK\x03\x04", b"PK\x05\x06", b"PK\x06\x06", b"PK\x06\x07"


class _StorageType(collections.namedtuple("_StorageType", ["name", "dtype"])):
  """A typed storage class of the pickle (torch.FloatStorage ...): its elements' dtype."""

  @property
  def itemsize(self):
    return 2 if self.dtype == BFLOAT16 else np.dtype(self.dtype).itemsize


class _Storage(object):
  """A storage the pickle refers to by key. Its bytes: `data`, or read when first needed by
  `fetch` (a callable) and dropped by release() once its last tensor is made (`users`)."""

  def __init__(self, storage_type, key, numel):
    self.storage_type, self.key, self.numel = storage_type, key, numel
    self.data, self.fetch, self.users = None, None, 0

  def release(self):
    self.users -= 1
    if self.users <= 0 and self.fetch is None:
      self.data = None

  def elements(self, start, stop, big_endian):
    """Elements start..stop-1 as a new array of the dtype (bfloat16 as float32)."""
    if self.data is None and self.fetch is not None:
      self.data, self.fetch = self.fetch(), None
    if self.data is None:
      raise UnsupportedPickle("storage %s has no data in the file" % self.key)
    itemsize = self.storage_type.itemsize
    if len(self.data) < self.numel * itemsize:
      raise UnsupportedPickle("storage %s holds %d bytes, its %d elements need %d" % (
          self.key, len(self.data), self.numel, self.numel * itemsize))
    order = ">" if big_endian else "<"
    if self.storage_type.dtype == BFLOAT16:
      halves = np.frombuffer(self.data, order + "u2", stop - start, start * 2)
      return (halves.astype(np.uint32) << 16).view(np.float32)
    dtype = np.dtype(self.storage_type.dtype).newbyteorder(order)
    return np.frombuffer(self.data, dtype, stop - start, start * itemsize).astype(
        dtype.newbyteorder("="))


class _StorageView(object):
  """A legacy storage view: `numel` elements of a root storage from element `offset`."""

  def __init__(self, root, offset, numel):
    self.root, self.offset, self.numel = root, offset, numel
    self.storage_type, self.key = root.storage_type, root.key

  def elements(self, start, stop, big_endian):
    return self.root.elements(self.offset + start, self.offset + stop, big_endian)

  def release(self):
    self.root.release()


def _out_dtype(storage_type):
  return np.float32 if storage_type.dtype == BFLOAT16 else np.dtype(storage_type.dtype)


class _Tensor(collections.namedtuple("_Tensor", ["storage", "offset", "size", "stride"])):
  """A tensor of the pickle, made an array once every storage's bytes are known."""

  def numel(self):
    count = 1
    for n in self.size:
      count *= n
    return count

  def array(self, big_endian):
    """A new array of the tensor's elements (checked: module docstring)."""
    size, stride, storage = self.size, self.stride, self.storage
    if self.numel() == 0:
      return np.zeros(size, _out_dtype(storage.storage_type))
    reach = 0  # the largest element offset the dimensions sorted so far can reach
    for step, n in sorted((s, n) for n, s in zip(size, stride) if n > 1):
      if step == 0:
        raise UnsupportedPickle("tensor of size %s has stride 0 on a dimension of %d (an "
                                "expanded view): refused" % (list(size), n))
      if step <= reach:
        raise UnsupportedPickle("tensor of size %s stride %s: its elements overlap: refused" % (
            list(size), list(stride)))
      reach += step * (n - 1)
    stop = self.offset + reach + 1
    if stop > storage.numel:
      raise UnsupportedPickle("tensor of size %s at offset %d reaches past its storage of %d "
                              "elements" % (list(size), self.offset, storage.numel))
    flat = storage.elements(self.offset, stop, big_endian)
    contiguous, expected = True, 1
    for n, s in reversed(list(zip(size, stride))):
      contiguous = contiguous and (n <= 1 or s == expected)
      expected *= n
    if contiguous:
      return flat.reshape(size)
    strides = [s * flat.itemsize if n > 1 else 0 for n, s in zip(size, stride)]
    return np.array(np.lib.stride_tricks.as_strided(flat, shape=size, strides=strides))


def _is_int(value):
  return isinstance(value, int) and not isinstance(value, bool)


def _rebuild_tensor(storage, storage_offset, size, stride, *unused):
  """A _Tensor of torch._utils._rebuild_tensor(_v2)'s arguments, their types checked."""
  del unused  # requires_grad, backward_hooks, metadata: a state dict's tensors are plain values
  if not isinstance(storage, (_Storage, _StorageView)):
    raise UnsupportedPickle("a tensor is rebuilt from a %s, not a storage" % type(storage).__name__)
  if not (isinstance(size, (tuple, list)) and isinstance(stride, (tuple, list))
          and len(size) == len(stride) <= MAX_DIMS and _is_int(storage_offset)
          and storage_offset >= 0
          and all(_is_int(n) and n >= 0 for n in list(size) + list(stride))):
    raise UnsupportedPickle("a tensor of size %s, stride %s, offset %s: not at most %d "
                            "integers >= 0 each" % (untrusted.quote(size), untrusted.quote(stride),
                                                    untrusted.quote(storage_offset), MAX_DIMS))
  return _Tensor(storage, storage_offset, tuple(size), tuple(stride))


def _key(value):
  """A storage key of the pickle as the str naming its record (legacy keys may be ints)."""
  if _is_int(value) and 0 <= value < 1 << 64:
    value = str(value)
  if not isinstance(value, str) or not 0 < len(value) <= 64:
    raise UnsupportedPickle("a storage key %s: not a short name" % untrusted.quote(value, 40))
  return value


class _Global(object):
  """A global the pickle may name: a marker, never a Python callable of the file's choosing."""

  def __init__(self, name):
    self.name = name


_ORDERED_DICT = _Global("collections.OrderedDict")
_REBUILD_TENSOR, _REBUILD_PARAMETER = _Global("rebuild tensor"), _Global("rebuild parameter")
_GLOBALS = {
    ("collections", "OrderedDict"): _ORDERED_DICT,
    ("torch._utils", "_rebuild_tensor_v2"): _REBUILD_TENSOR,
    ("torch._utils", "_rebuild_tensor"): _REBUILD_TENSOR,  # PyTorch < 1.0: no requires_grad
    ("torch._utils", "_rebuild_parameter"): _REBUILD_PARAMETER,
}
_GLOBALS.update((("torch", name), _StorageType(name, dtype))
                for name, dtype in STORAGE_DTYPES.items())


class _Loader(object):
  """The pickle machine's hooks for one file: globals, REDUCE, BUILD, storages, the budget."""

  def __init__(self, path, budget):
    self.path, self.budget, self.storages = path, budget, {}
    self.hooks = pickle_machine.Hooks(self.find_global, self.call, self.build,
                                      self.persistent_load)

  @staticmethod
  def find_global(module, name):
    if (module, name) not in _GLOBALS:
      raise UnsupportedPickle("the pickle needs %s.%s, which a state dict of tensors does not: "
                              "refused (only tensors are rebuilt, no pickle code is run)"
                              % (module[:80], name[:80]))
    return _GLOBALS[(module, name)]

  def call(self, func, args):
    if func is _ORDERED_DICT and not args:
      return collections.OrderedDict()
    if func is _REBUILD_TENSOR and 4 <= len(args) <= 7:
      return _rebuild_tensor(*args)
    if func is _REBUILD_PARAMETER and 1 <= len(args) <= 3 and isinstance(args[0], _Tensor):
      return args[0]
    raise UnsupportedPickle("the pickle calls %s with %d arguments: refused (only tensors are "
                            "rebuilt, no pickle code is run)" % (
                                func.name if isinstance(func, _Global) else
                                "a " + type(func).__name__, len(args)))

  @staticmethod
  def build(obj, state):
    """BUILD: only an OrderedDict's attributes (a state dict's _metadata), which are dropped."""
    if not (isinstance(obj, collections.OrderedDict) and isinstance(state, (dict, tuple))):
      raise UnsupportedPickle("the pickle sets the state of a %s: refused (no pickle code is "
                              "run)" % type(obj).__name__)

  def persistent_load(self, pid):
    if not (isinstance(pid, tuple) and len(pid) in (5, 6) and isinstance(pid[0], str)
            and pid[0] == "storage" and isinstance(pid[1], _StorageType)
            and _is_int(pid[4]) and pid[4] >= 0):
      raise UnsupportedPickle("unknown persistent id %s (not a tensor storage)" %
                              untrusted.quote(pid))
    storage_type, key, numel = pid[1], _key(pid[2]), pid[4]
    storage = self.storages.get(key)
    if storage is None:
      if len(self.storages) >= self.budget.entries:
        raise UnsupportedPickle("more than %d storages: more than a state dict of this model "
                                "has" % self.budget.entries)
      self.budget.spend(0, numel * storage_type.itemsize, self.path, "storage %s (%d %s "
                        "elements)" % (key, numel, storage_type.name))
      storage = self.storages[key] = _Storage(storage_type, key, numel)
    elif (storage.storage_type, storage.numel) != (storage_type, numel):
      raise UnsupportedPickle("storage %s is named twice, as two different storages" % key)
    view = pid[5] if len(pid) == 6 else None
    if view is None:
      return storage
    if not (isinstance(view, tuple) and len(view) == 3 and _is_int(view[1]) and _is_int(view[2])
            and 0 <= view[1] and 0 <= view[2] and view[1] + view[2] <= numel):
      raise UnsupportedPickle("storage %s: a view %s outside it" % (key, untrusted.quote(view)))
    return _StorageView(storage, view[1], view[2])


def _state_dict(obj, big_endian, loader):
  """({name: np.ndarray}, stored dtype names) of the unpickled object, which must be a dict of
  name -> tensor; each tensor's elements spent from the budget before its array is made (one
  array for a tensor the pickle names twice)."""
  if not isinstance(obj, dict):
    raise UnsupportedPickle("the pickle holds a %s, not a state dict" % type(obj).__name__)
  if len(obj) > loader.budget.entries:
    raise UnsupportedPickle("the state dict holds %d entries, more than a model of %s has "
                            "tensors: refused" % (len(obj), loader.budget.source))
  result, dtypes, made = collections.OrderedDict(), set(), {}
  for name, value in obj.items():
    if not isinstance(name, str) or not isinstance(value, _Tensor):
      raise UnsupportedPickle("entry %s is a %s, not a tensor (a state dict holds tensors only)"
                              % (untrusted.quote(name), type(value).__name__))
    if id(value) not in made:
      made[id(value)] = None
      getattr(value.storage, "root", value.storage).users += 1
  for name, value in obj.items():
    if made[id(value)] is None:
      loader.budget.spend(value.numel(), 0, loader.path, "tensor %s of size %s" % (
          untrusted.quote(name), list(value.size)))
      made[id(value)] = value.array(big_endian)
      value.storage.release()  # its bytes go once its last tensor is made
    result[name] = made[id(value)]
    dtype = value.storage.storage_type.dtype
    dtypes.add(BFLOAT16 if dtype == BFLOAT16 else np.dtype(dtype).name)
  return result, sorted(dtypes)


def _zip_directory(f, size):
  """(entries, central directory bytes) from a zip's end record (zip64 too); None when the file
  has no end record (not a zip, or truncated)."""
  tail_start = max(0, size - 22 - 0xFFFF)
  f.seek(tail_start)
  tail = f.read(size - tail_start)
  at = tail.rfind(_END)
  if at < 0 or len(tail) - at < 22:
    return None
  entries, directory = struct.unpack_from("<HI", tail, at + 10)
  if entries == 0xFFFF or directory == 0xFFFFFFFF:
    f.seek(max(0, tail_start + at - 20))
    locator = f.read(20)
    if len(locator) == 20 and locator.startswith(_LOCATOR64):
      f.seek(struct.unpack_from("<Q", locator, 8)[0])
      record = f.read(56)
      if len(record) == 56 and record.startswith(_END64):
        entries, directory = struct.unpack_from("<QQ", record, 32)
  return entries, directory


def _check_member(info, want, limit, archive_size):
  """UnsupportedPickle unless the zip member can give `want` bytes (None: all of it, at most
  limit): not encrypted, stored or deflated, sizes that fit."""
  if info.flag_bits & 0x1:
    raise UnsupportedPickle("its member %s is encrypted: refused" % info.filename[:80])
  if info.compress_type not in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED):
    raise UnsupportedPickle("its member %s is compressed with method %d, not stored or deflate "
                            "(PyTorch stores its records uncompressed): refused" % (
                                info.filename[:80], info.compress_type))
  if info.compress_size > archive_size:
    raise UnsupportedPickle("its member %s claims %d compressed bytes, the archive holds %d "
                            "(truncated?)" % (info.filename[:80], info.compress_size, archive_size))
  if want is None and info.file_size > limit:
    raise UnsupportedPickle("its member %s unpacks to %s, more than a state dict of this model "
                            "needs (%s): refused" % (info.filename[:80], untrusted.size_text(
                                info.file_size), untrusted.size_text(limit)))
  if want is not None and info.file_size < want:
    raise UnsupportedPickle("storage record %s holds %d bytes, its elements need %d" % (
        info.filename[:80], info.file_size, want))


def _read_member(archive, info, want, limit, archive_size):
  """`want` bytes of a zip member (None: all of it, at most limit), after _check_member."""
  _check_member(info, want, limit, archive_size)
  want = info.file_size if want is None else want
  with archive.open(info) as member:
    data = member.read(want)
  if len(data) != want:
    raise UnsupportedPickle("its member %s ends after %d of %d bytes (truncated)" % (
        info.filename[:80], len(data), want))
  return data


def _load_zip(f, size, loader):
  budget = loader.budget
  directory = _zip_directory(f, size)
  if directory is None:
    raise UnsupportedPickle("a zip archive without its end record: truncated (an interrupted "
                            "download? download it again)")
  if directory[0] > budget.entries or directory[1] > budget.header_bytes:
    raise UnsupportedPickle("a zip of %d members (a directory of %s), more than a state dict of "
                            "this model has (%d): refused" % (directory[0], untrusted.size_text(
                                directory[1]), budget.entries))
  f.seek(0)
  with zipfile.ZipFile(f) as archive:
    infos = {info.filename: info for info in archive.infolist()}
    pickles = [name for name in infos if name.endswith("data.pkl") and name.count("/") == 1]
    if len(pickles) != 1:
      raise UnsupportedPickle("a zip without one <archive>/data.pkl (found %d)" % len(pickles))
    prefix = pickles[0][:-len("data.pkl")]
    order = infos.get(prefix + "byteorder")
    big_endian = (order is not None
                  and _read_member(archive, order, None, 16, size).strip() == b"big")
    data = _read_member(archive, infos[pickles[0]], None, budget.pickle_bytes, size)
    obj = pickle_machine.Machine(pickle_machine.BytesReader(data), loader.hooks).load()
    for key, storage in loader.storages.items():  # all checked first, each read when needed
      info = infos.get(prefix + "data/" + key)
      if info is None:
        raise UnsupportedPickle("storage record %sdata/%s is missing" % (prefix, key))
      want = storage.numel * storage.storage_type.itemsize
      _check_member(info, want, None, size)
      storage.fetch = functools.partial(_read_member, archive, info, want, None, size)
    return _state_dict(obj, big_endian, loader)


def _load_legacy(f, size, loader):
  reader = pickle_machine.FileReader(f, size, loader.budget.pickle_bytes)
  def load():
    return pickle_machine.Machine(reader, loader.hooks).load()
  magic = load()
  if not (_is_int(magic) and magic == LEGACY_MAGIC):
    raise UnsupportedPickle("neither a zip archive nor PyTorch's legacy format (a plain pickle "
                            "without its magic number)")
  protocol = load()
  if not (_is_int(protocol) and protocol == LEGACY_PROTOCOL):
    raise UnsupportedPickle("legacy format protocol %s, only %d is known" % (
        untrusted.quote(protocol), LEGACY_PROTOCOL))
  sys_info = load()
  big_endian = isinstance(sys_info, dict) and sys_info.get("little_endian") is False
  obj = load()
  keys = load()
  if not isinstance(keys, list):
    raise UnsupportedPickle("legacy format without its list of storage keys")
  for key in keys:
    storage = loader.storages.get(_key(key))
    if storage is None:
      raise UnsupportedPickle("legacy format lists storage %s that no tensor uses" %
                              untrusted.quote(key, 40))
    nbytes = storage.numel * storage.storage_type.itemsize
    if reader.remaining() < 8 + nbytes:
      raise UnsupportedPickle("legacy storage %s: the file ends inside it (%d bytes remain, it "
                              "needs %d: truncated)" % (storage.key, reader.remaining(),
                                                        8 + nbytes))
    count = int.from_bytes(reader.read_raw(8), "big" if big_endian else "little", signed=True)
    if count != storage.numel:
      raise UnsupportedPickle("legacy storage %s: %d elements, the pickle said %d" % (
          storage.key, count, storage.numel))
    storage.fetch = functools.partial(reader.read_at, reader.skip(nbytes), nbytes)  # read later
  return _state_dict(obj, big_endian, loader)


def load_state_dict(path, budget=None, roots=None):
  """({name: np.ndarray}, sorted stored dtype names) of a pytorch_model.bin (zip or legacy
  layout, see the module docstring). Raises UnsupportedPickle / untrusted.Refused (ValueErrors,
  one line naming path) for a file that needs more than tensors, is damaged or claims more than
  budget allows; OSError when it cannot be read."""
  loader = _Loader(path, budget or untrusted.Budget.unlimited())
  with untrusted.open_regular(path, roots) as f:
    size = os.fstat(f.fileno()).st_size
    head = f.read(1024)
    accident = untrusted.accident(head)
    if accident:
      raise UnsupportedPickle("%s %s" % (path, accident))
    try:
      with untrusted.reading(path, "PyTorch state dict"):
        if head.startswith(_ZIP_MAGIC):
          return _load_zip(f, size, loader)
        if not head.startswith(b"\x80"):
          raise UnsupportedPickle("neither a zip archive (PyTorch >= 1.6) nor a pickle (older "
                                  "PyTorch): not a PyTorch state dict")
        f.seek(0)
        return _load_legacy(f, size, loader)
    except UnsupportedPickle as e:
      raise UnsupportedPickle("%s: %s" % (path, e)) from None
