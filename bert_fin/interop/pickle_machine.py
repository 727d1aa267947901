"""A restricted pickle machine: the opcodes a PyTorch state dict uses and nothing else, bounded.

  obj = Machine(reader, hooks).load()   # one pickle; reader: BytesReader / FileReader

Not pickle.Unpickler, whose C machine trusts the file: a LONG_BINPUT index zero-fills a memo list
that large (a 9-byte pickle takes gigabytes), BINBYTES8 allocates the length it is given, a tuple
nested 10^6 deep used as a dict key overflows the C stack while hashing (a segfault), and a DAG of
shared tuples as a key hashes for ever (2^40 paths from 463 bytes). Here:
  - the memo is a dict (an index costs nothing until it is used);
  - every length is checked against the bytes that remain before anything is read;
  - tuples, lists and dicts nest at most MAX_DEPTH deep (an explicit depth per container, known
    when it is made: a container cannot be changed once it is inside another);
  - dict keys are scalars or flat tuples of scalars (hashing is linear);
  - integers (LONG1 / LONG4) at most MAX_LONG_BYTES bytes;
  - the reader counts the pickle's bytes against the budget's pickle_bytes.
Objects come only from the hooks (torch_pickle.py): find_global(module, name) resolves the few
globals a state dict needs, call(func, args) runs REDUCE for them, build(obj, state) BUILD,
persistent_load(pid) the storages. Opcodes that make other objects (INST, OBJ, NEWOBJ,
NEWOBJ_EX, EXT*, sets, out-of-band buffers, the text opcodes of protocol 0) are refused.
"""
import collections
import pickletools
import struct

from bert_fin.guard import untrusted

MAX_DEPTH = 32  # a state dict nests ~5 deep (dict -> REDUCE args -> persistent id -> ...)
MAX_LONG_BYTES = 16  # the legacy magic number is 10 bytes
MAX_NAME = 256  # a global's module or name
_OPCODE_NAMES = {op.code.encode("latin-1"): op.name for op in pickletools.opcodes}
_SCALARS = (str, bytes, int, float, bool, type(None))

Hooks = collections.namedtuple("Hooks", ["find_global", "call", "build", "persistent_load"])


class UnsupportedPickle(untrusted.Refused):
  """The pickle is not a plain state dict of tensors (or is damaged): the message says what."""


class BytesReader(object):
  """A pickle held in memory (a zip's data.pkl, read with its size limit)."""

  def __init__(self, data):
    self.data, self.pos = data, 0

  def read(self, n):
    if n > len(self.data) - self.pos:
      raise UnsupportedPickle("the pickle claims %d bytes at byte %d, %d remain (truncated or "
                              "damaged)" % (n, self.pos, len(self.data) - self.pos))
    self.pos += n
    return self.data[self.pos - n:self.pos]


class FileReader(object):
  """A pickle read from an open file of `size` bytes (the legacy .bin: pickles then raw
  storages); at most `limit` bytes of pickle in all (read_raw, for storages, is not counted)."""

  def __init__(self, f, size, limit):
    self.f, self.size, self.limit, self.counted = f, size, limit, 0
    self.pos = f.tell()

  def remaining(self):
    return self.size - self.pos

  def read_raw(self, n):
    if n > self.remaining():
      raise UnsupportedPickle("the file claims %d bytes at byte %d, %d remain (truncated)" % (
          n, self.pos, self.remaining()))
    data = self.f.read(n)
    if len(data) != n:
      raise UnsupportedPickle("the file ended while being read (changed or truncated)")
    self.pos += n
    return data

  def skip(self, n):
    """Moves past n bytes (a storage, read later by read_at); returns where they start."""
    if n > self.remaining():
      raise UnsupportedPickle("the file claims %d bytes at byte %d, %d remain (truncated)" % (
          n, self.pos, self.remaining()))
    start, self.pos = self.pos, self.f.seek(self.pos + n)
    return start

  def read_at(self, offset, n):
    """n bytes from offset (a storage found earlier), not counted as pickle."""
    self.pos = self.f.seek(offset)
    return self.read_raw(n)

  def read(self, n):
    self.counted += n
    if self.counted > self.limit:
      raise UnsupportedPickle("its pickles are longer than the %d bytes a state dict of this "
                              "model needs: refused" % self.limit)
    return self.read_raw(n)


class Machine(object):
  """One pickle's stack machine (module docstring). load() returns the pickled object."""

  def __init__(self, reader, hooks):
    self.reader, self.hooks = reader, hooks
    self.stack, self.marks, self.memo = [], [], {}
    self.depths, self.sealed, self.alive = {}, set(), []  # id -> depth; inside another; refs

  # ------------------------------------------------------------------ bookkeeping
  def _depth(self, obj):
    if isinstance(obj, _SCALARS):
      return 0
    return self.depths.get(id(obj), 1)

  def _made(self, obj, depth):
    if depth > MAX_DEPTH:
      raise UnsupportedPickle("containers nest more than %d deep: not a state dict" % MAX_DEPTH)
    if id(obj) not in self.depths:
      self.alive.append(obj)  # ids stay unique while the machine runs
    self.depths[id(obj)] = depth
    return obj

  def _contain(self, items):
    """Depth of a container of items (1 + the deepest); the mutable ones among them sealed."""
    deepest = 0
    for item in items:
      if isinstance(item, (list, dict)):
        self.sealed.add(id(item))
      deepest = max(deepest, self._depth(item))
    return deepest + 1

  def _mutable(self, kind):
    target = self.stack[-1] if self.stack else None
    if not isinstance(target, kind) or id(target) in self.sealed:
      raise UnsupportedPickle("the pickle adds to a %s that is not an open %s: not a state "
                              "dict" % (type(target).__name__, kind.__name__))
    return target

  def _grow(self, target, items):
    depth = max(self._depth(target), self._contain(items))
    self._made(target, depth)

  def _pop(self):
    if not self.stack:
      raise UnsupportedPickle("the pickle pops an empty stack (damaged)")
    return self.stack.pop()

  def _pop_mark(self):
    if not self.marks:
      raise UnsupportedPickle("the pickle uses a MARK it never set (damaged)")
    items, self.stack = self.stack, self.marks.pop()
    return items

  def _int(self, fmt):
    return struct.unpack(fmt, self.reader.read(struct.calcsize(fmt)))[0]

  def _text(self, n):
    try:
      return self.reader.read(n).decode("utf-8", "surrogatepass")
    except UnicodeDecodeError:
      raise UnsupportedPickle("a string of the pickle is not UTF-8 (damaged)") from None

  def _long(self, n):
    if not 0 <= n <= MAX_LONG_BYTES:
      raise UnsupportedPickle("an integer of %d bytes: not a state dict" % n)
    return int.from_bytes(self.reader.read(n), "little", signed=True)

  def _line(self):
    chars = b""
    while not chars.endswith(b"\n"):
      chars += self.reader.read(1)
      if len(chars) > MAX_NAME:
        raise UnsupportedPickle("a global's name is longer than %d bytes" % MAX_NAME)
    try:
      return chars[:-1].decode("utf-8")
    except UnicodeDecodeError:
      raise UnsupportedPickle("a global's name is not UTF-8 (damaged)") from None

  @staticmethod
  def _check_key(key):
    if isinstance(key, _SCALARS) or (
        isinstance(key, tuple) and all(isinstance(k, _SCALARS) for k in key)):
      return key
    raise UnsupportedPickle("a dict key is a %s (a state dict's keys are names): refused" %
                            type(key).__name__)

  def _set_items(self, target, items):
    if len(items) % 2:
      raise UnsupportedPickle("SETITEMS with an odd number of items (damaged)")
    keys, values = items[0::2], items[1::2]
    for key in keys:
      self._check_key(key)
    self._grow(target, values)
    for key, value in zip(keys, values):
      target[key] = value

  # ------------------------------------------------------------------ opcodes
  def load(self):
    """The object of one pickle (at its STOP); UnsupportedPickle for anything refused."""
    while True:
      code = self.reader.read(1)
      if code == b".":
        return self._pop()
      handler = _HANDLERS.get(code)
      if handler is None:
        raise UnsupportedPickle(
            "opcode %s (0x%02x) is not one a state dict of tensors uses: refused (only tensors "
            "are rebuilt, no pickle code is run)" % (_OPCODE_NAMES.get(code, "unknown"),
                                                     code[0]))
      handler(self)

  def _proto(self):
    version = self.reader.read(1)[0]
    if version > 5:
      raise UnsupportedPickle("pickle protocol %d is unknown" % version)

  def _frame(self):
    self._int("<Q")  # the frame's length: the bytes are read as the opcodes ask for them

  def _push(self, value):
    self.stack.append(value)

  def _tuple(self, n):
    items = self.stack[-n:] if n else []
    if len(items) != n:
      raise UnsupportedPickle("the pickle pops an empty stack (damaged)")
    del self.stack[len(self.stack) - n:]
    self.stack.append(self._made(tuple(items), self._contain(items)))

  def _mark_tuple(self):
    items = self._pop_mark()
    self.stack.append(self._made(tuple(items), self._contain(items)))

  def _mark_list(self):
    items = self._pop_mark()
    self.stack.append(self._made(list(items), self._contain(items)))

  def _mark_dict(self):
    items = self._pop_mark()
    target = self._made({}, 1)
    self._set_items(target, items)
    self.stack.append(target)

  def _append(self):
    value = self._pop()
    target = self._mutable(list)
    self._grow(target, [value])
    target.append(value)

  def _appends(self):
    items = self._pop_mark()
    target = self._mutable(list)
    self._grow(target, items)
    target.extend(items)

  def _setitem(self):
    value, key = self._pop(), self._pop()
    self._set_items(self._mutable(dict), [key, value])

  def _setitems(self):
    items = self._pop_mark()
    self._set_items(self._mutable(dict), items)

  def _put(self, index):
    if not self.stack:
      raise UnsupportedPickle("the pickle memoizes an empty stack (damaged)")
    self.memo[index] = self.stack[-1]

  def _get(self, index):
    if index not in self.memo:
      raise UnsupportedPickle("the pickle refers to memo entry %d it never stored (damaged)"
                              % index)
    self.stack.append(self.memo[index])

  def _global(self, module, name):
    if not (isinstance(module, str) and isinstance(name, str)):
      raise UnsupportedPickle("STACK_GLOBAL of a %s and a %s: not names" % (
          type(module).__name__, type(name).__name__))
    self.stack.append(self.hooks.find_global(module[:MAX_NAME], name[:MAX_NAME]))

  def _stack_global(self):
    name, module = self._pop(), self._pop()
    self._global(module, name)

  def _reduce(self):
    args, func = self._pop(), self._pop()
    if not isinstance(args, tuple):
      raise UnsupportedPickle("REDUCE with %s arguments, not a tuple" % type(args).__name__)
    self._contain(args)
    value = self.hooks.call(func, args)
    if isinstance(value, (list, dict)):
      self._made(value, 1)
    self.stack.append(value)

  def _build(self):
    state = self._pop()
    if not self.stack:
      raise UnsupportedPickle("BUILD on an empty stack (damaged)")
    self._contain([state])
    self.hooks.build(self.stack[-1], state)

  def _persistent(self):
    pid = self._pop()
    self._contain([pid])
    self.stack.append(self.hooks.persistent_load(pid))

  def _mark(self):
    self.marks.append(self.stack)
    self.stack = []

  def _pop_any(self):
    if self.stack:
      self.stack.pop()
    else:
      self._pop_mark()

  def _dup(self):
    self.stack.append(self.stack[-1] if self.stack else self._pop())

  def _memoize(self):
    self._put(len(self.memo))


def _bytes_op(fmt):
  return lambda m: m._push(m.reader.read(m._int(fmt)))  # pylint: disable=protected-access


def _text_op(fmt):
  return lambda m: m._push(m._text(m._int(fmt)))  # pylint: disable=protected-access


def _const(value):
  return lambda m: m._push(value)  # pylint: disable=protected-access


# pylint: disable=protected-access
_HANDLERS = {
    b"\x80": Machine._proto, b"\x95": Machine._frame, b"(": Machine._mark,
    b"0": Machine._pop_any, b"1": lambda m: m._pop_mark(), b"2": Machine._dup,
    b"N": _const(None), b"\x88": _const(True), b"\x89": _const(False),
    b"J": lambda m: m._push(m._int("<i")), b"K": lambda m: m._push(m._int("<B")),
    b"M": lambda m: m._push(m._int("<H")),
    b"\x8a": lambda m: m._push(m._long(m._int("<B"))),
    b"\x8b": lambda m: m._push(m._long(m._int("<i"))),
    b"G": lambda m: m._push(m._int(">d")),
    b"X": _text_op("<I"), b"\x8c": _text_op("<B"), b"\x8d": _text_op("<Q"),
    b"T": _text_op("<I"), b"U": _text_op("<B"),  # Python 2 str: UTF-8 here
    b"B": _bytes_op("<I"), b"C": _bytes_op("<B"), b"\x8e": _bytes_op("<Q"),
    b")": _const(()), b"t": Machine._mark_tuple, b"\x85": lambda m: m._tuple(1),
    b"\x86": lambda m: m._tuple(2), b"\x87": lambda m: m._tuple(3),
    b"]": lambda m: m._push(m._made([], 1)), b"l": Machine._mark_list,
    b"a": Machine._append, b"e": Machine._appends,
    b"}": lambda m: m._push(m._made({}, 1)), b"d": Machine._mark_dict,
    b"s": Machine._setitem, b"u": Machine._setitems,
    b"q": lambda m: m._put(m._int("<B")), b"r": lambda m: m._put(m._int("<I")),
    b"\x94": Machine._memoize,
    b"h": lambda m: m._get(m._int("<B")), b"j": lambda m: m._get(m._int("<I")),
    b"c": lambda m: m._global(m._line(), m._line()), b"\x93": Machine._stack_global,
    b"R": Machine._reduce, b"b": Machine._build, b"Q": Machine._persistent,
}
# pylint: enable=protected-access
