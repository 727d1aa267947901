"""PyTorch's pytorch_model.bin read with numpy, without PyTorch and without running pickle code.

  load_state_dict(path) -> ({name: np.ndarray}, sorted stored dtype names)

A .bin is a pickled state dict (an OrderedDict of name -> tensor) in one of two layouts:
  zip (PyTorch >= 1.6, what transformers writes): <archive>/data.pkl, the pickle, whose tensors
      name their storages by key; each storage's raw bytes are the record <archive>/data/<key>;
      <archive>/byteorder says little or big endian (little when absent).
  legacy (older PyTorch, `_use_new_zipfile_serialization=False`): one stream of pickles: a magic
      number, the protocol 1001, a sys-info dict, the state dict, the list of storage keys, then
      each storage as int64 element count + raw bytes, in that list's order.
The unpickler here is restricted: the only globals it resolves are collections.OrderedDict,
torch._utils._rebuild_tensor_v2 (and the older _rebuild_tensor) / _rebuild_parameter (rebuilt
as numpy arrays) and the typed
storage classes (torch.FloatStorage, HalfStorage, BFloat16Storage, ...). Anything else (a pickled
class, a function to call) raises UnsupportedPickle naming it: nothing in the file ever runs.
bfloat16 storages (numpy has no bfloat16) come back as float32, exactly (bf16 is the upper half of
a float32); other dtypes as stored.
"""
import collections
import pickle
import zipfile

import numpy as np

LEGACY_MAGIC = 0x1950a86a20f9469cfc6c
LEGACY_PROTOCOL = 1001
BFLOAT16 = "bfloat16"
# torch.<Name>Storage -> numpy dtype of its elements.
STORAGE_DTYPES = {
    "FloatStorage": np.float32, "HalfStorage": np.float16, "BFloat16Storage": BFLOAT16,
    "DoubleStorage": np.float64, "LongStorage": np.int64, "IntStorage": np.int32,
    "ShortStorage": np.int16, "CharStorage": np.int8, "ByteStorage": np.uint8,
    "BoolStorage": np.bool_,
}


class UnsupportedPickle(ValueError):
  """The file is not a plain state dict of tensors (or is damaged): the message says what."""


class _StorageType(collections.namedtuple("_StorageType", ["name", "dtype"])):
  """A typed storage class of the pickle (torch.FloatStorage ...): its elements' dtype."""

  @property
  def itemsize(self):
    return 2 if self.dtype == BFLOAT16 else np.dtype(self.dtype).itemsize


class _Storage(object):
  """A storage the pickle refers to by key; its bytes are attached once read (`data`)."""

  def __init__(self, storage_type, key, numel):
    self.storage_type, self.key, self.numel = storage_type, key, numel
    self.data = None

  def elements(self, big_endian):
    """The storage as a flat array of its dtype (bfloat16 as float32)."""
    if self.data is None:
      raise UnsupportedPickle("storage %s has no data in the file" % self.key)
    want = self.numel * self.storage_type.itemsize
    if len(self.data) < want:
      raise UnsupportedPickle("storage %s holds %d bytes, its %d elements need %d" % (
          self.key, len(self.data), self.numel, want))
    order = ">" if big_endian else "<"
    if self.storage_type.dtype == BFLOAT16:
      halves = np.frombuffer(self.data, order + "u2", self.numel)
      return (halves.astype(np.uint32) << 16).view(np.float32)
    dtype = np.dtype(self.storage_type.dtype).newbyteorder(order)
    return np.frombuffer(self.data, dtype, self.numel).astype(dtype.newbyteorder("="))


class _StorageView(object):
  """A legacy storage view: `size` elements of a root storage from element `offset`."""

  def __init__(self, root, offset, size):
    self.root, self.offset, self.size = root, offset, size
    self.storage_type = root.storage_type

  def elements(self, big_endian):
    return self.root.elements(big_endian)[self.offset:self.offset + self.size]


class _Tensor(collections.namedtuple("_Tensor", ["storage", "offset", "size", "stride"])):
  """A tensor of the pickle, made an array once every storage's bytes are known."""

  def array(self, big_endian):
    flat = self.storage.elements(big_endian)
    size, stride = tuple(int(n) for n in self.size), tuple(int(n) for n in self.stride)
    if len(size) != len(stride) or any(n < 0 for n in size + stride) or self.offset < 0:
      raise UnsupportedPickle("tensor of size %s stride %s is malformed" % (size, stride))
    last = self.offset + sum((n - 1) * s for n, s in zip(size, stride)) if all(size) else -1
    if last >= len(flat):
      raise UnsupportedPickle("tensor of size %s at offset %d reaches past its storage of %d "
                              "elements" % (size, self.offset, len(flat)))
    view = np.lib.stride_tricks.as_strided(
        flat[self.offset:], shape=size, strides=[s * flat.itemsize for s in stride])
    return np.array(view)


def _rebuild_tensor(storage, storage_offset, size, stride, requires_grad=False,
                    backward_hooks=None, metadata=None):
  del requires_grad, backward_hooks, metadata  # a state dict's tensors: plain values
  if not isinstance(storage, (_Storage, _StorageView)):
    raise UnsupportedPickle("a tensor is rebuilt from a %s, not a storage" % type(storage).__name__)
  return _Tensor(storage, int(storage_offset), tuple(size), tuple(stride))


def _rebuild_parameter(data, requires_grad=False, backward_hooks=None):
  del requires_grad, backward_hooks
  return data


_GLOBALS = {
    ("collections", "OrderedDict"): collections.OrderedDict,
    ("torch._utils", "_rebuild_tensor_v2"): _rebuild_tensor,
    ("torch._utils", "_rebuild_tensor"): _rebuild_tensor,  # PyTorch < 1.0: no requires_grad
    ("torch._utils", "_rebuild_parameter"): _rebuild_parameter,
}
_GLOBALS.update((("torch", name), _StorageType(name, dtype))
                for name, dtype in STORAGE_DTYPES.items())


class _RestrictedUnpickler(pickle.Unpickler):
  """Resolves only _GLOBALS; storages by persistent id (zip: 5 fields, legacy: 6)."""

  def __init__(self, stream, storages):
    super().__init__(stream)
    self.storages = storages  # key -> _Storage, filled as the pickle names them

  def find_class(self, module, name):
    if (module, name) not in _GLOBALS:
      raise UnsupportedPickle("the pickle needs %s.%s, which a state dict of tensors does not: "
                              "refused (only tensors are rebuilt, no pickle code is run)"
                              % (module, name))
    return _GLOBALS[(module, name)]

  def persistent_load(self, pid):
    if not (isinstance(pid, tuple) and len(pid) in (5, 6) and pid[0] == "storage"
            and isinstance(pid[1], _StorageType)):
      raise UnsupportedPickle("unknown persistent id %r (not a tensor storage)" % (pid[:2],))
    storage_type, key, numel = pid[1], str(pid[2]), int(pid[4])
    storage = self.storages.setdefault(key, _Storage(storage_type, key, numel))
    view = pid[5] if len(pid) == 6 else None
    if view is not None:  # legacy view: (view key, offset, size)
      return _StorageView(storage, int(view[1]), int(view[2]))
    return storage


def _state_dict(obj, big_endian):
  """({name: np.ndarray}, stored dtype names) of the unpickled object, which must be a dict of
  name -> tensor."""
  if not isinstance(obj, dict):
    raise UnsupportedPickle("the pickle holds a %s, not a state dict" % type(obj).__name__)
  result = collections.OrderedDict()
  for name, value in obj.items():
    if not isinstance(value, _Tensor):
      raise UnsupportedPickle("entry %r is a %s, not a tensor (a state dict holds tensors only)"
                              % (name, type(value).__name__))
    result[str(name)] = value.array(big_endian)
  dtypes = {np.dtype(v.storage.storage_type.dtype).name if v.storage.storage_type.dtype != BFLOAT16
            else BFLOAT16 for v in obj.values()}
  return result, sorted(dtypes)


def _load_zip(path):
  with zipfile.ZipFile(path) as archive:
    names = archive.namelist()
    pickles = [name for name in names if name.endswith("data.pkl") and name.count("/") == 1]
    if len(pickles) != 1:
      raise UnsupportedPickle("a zip without one <archive>/data.pkl (found %d)" % len(pickles))
    prefix = pickles[0][:-len("data.pkl")]
    big_endian = (prefix + "byteorder" in names
                  and archive.read(prefix + "byteorder").strip() == b"big")
    storages = {}
    with archive.open(pickles[0]) as stream:
      obj = _RestrictedUnpickler(stream, storages).load()
    for key, storage in storages.items():
      record = prefix + "data/" + key
      if record not in names:
        raise UnsupportedPickle("storage record %s is missing" % record)
      storage.data = archive.read(record)
  return _state_dict(obj, big_endian)


def _load_legacy(path):
  storages = {}
  with open(path, "rb") as stream:
    unpickler = _RestrictedUnpickler(stream, storages)
    magic = unpickler.load()
    if magic != LEGACY_MAGIC:
      raise UnsupportedPickle("neither a zip archive nor PyTorch's legacy format (a plain pickle "
                              "without its magic number)")
    protocol = unpickler.load()
    if protocol != LEGACY_PROTOCOL:
      raise UnsupportedPickle("legacy format protocol %r, only %d is known" % (
          protocol, LEGACY_PROTOCOL))
    sys_info = unpickler.load()
    big_endian = isinstance(sys_info, dict) and sys_info.get("little_endian") is False
    obj = unpickler.load()
    keys = unpickler.load()
    if not isinstance(keys, list):
      raise UnsupportedPickle("legacy format without its list of storage keys")
    for key in keys:
      storage = storages.get(str(key))
      if storage is None:
        raise UnsupportedPickle("legacy format lists storage %s that no tensor uses" % key)
      count = np.frombuffer(stream.read(8), ">i8" if big_endian else "<i8")
      if count.size != 1 or int(count[0]) != storage.numel:
        raise UnsupportedPickle("legacy storage %s: truncated or of another size" % key)
      storage.data = stream.read(storage.numel * storage.storage_type.itemsize)
      if len(storage.data) != storage.numel * storage.storage_type.itemsize:
        raise UnsupportedPickle("legacy storage %s: the file ends inside it (truncated)" % key)
  return _state_dict(obj, big_endian)


def load_state_dict(path):
  """({name: np.ndarray}, sorted stored dtype names) of a pytorch_model.bin (zip or legacy
  layout, see the module docstring).

  Raises UnsupportedPickle (a ValueError) for a file that needs more than tensors, or is damaged;
  OSError when it cannot be read."""
  try:
    if zipfile.is_zipfile(path):
      return _load_zip(path)
    return _load_legacy(path)
  except (pickle.UnpicklingError, EOFError, zipfile.BadZipFile, KeyError, TypeError,
          AttributeError, IndexError) as e:
    raise UnsupportedPickle("not a readable PyTorch state dict (%s: %s)" % (
        type(e).__name__, e)) from e
