"""Hostile and broken transformers folders, built by hand for the importer's bounds tests
(tests/test_import_bounds.py) and bench/bench_import_bounds.py.

  folder = make(tmp_dir, case)        # a copy of tests/fixtures/hf_tiny/pretraining, damaged
  CASES                               # [Case(name, build, words)]: words the refusal holds,
                                      # OK for a folder that must import
Pickles are assembled from the opcodes (asm: GLOBAL, BINUNICODE, TUPLE, REDUCE, ...), zips
patched in their headers, safetensors written byte by byte. A bomb claims gigabytes from a small
(or sparse) file: it proves a check without using the memory. Cases whose code would run write
RAN_MARKER in the current directory (the tests look for it).
"""
import collections
import json
import os
import shutil
import struct
import zipfile

from helpers import FIXTURES

BASE = os.path.join(FIXTURES, "hf_tiny", "pretraining")  # config: L=2, H=32, vocab 100
OK = "OK"
RAN_MARKER = "code_ran"
Case = collections.namedtuple("Case", ["name", "build", "words"])


# ------------------------------------------------------------------ pickle assembly
def g(module, name):
  return b"c" + module.encode() + b"\n" + name.encode() + b"\n"


def s(text):
  data = text.encode()
  return b"X" + struct.pack("<I", len(data)) + data


def i(value):
  if 0 <= value < 256:
    return b"K" + bytes([value])
  data = value.to_bytes((value.bit_length() + 8) // 8, "little", signed=True)
  return b"\x8a" + bytes([len(data)]) + data


def ints(values):
  return b"(" + b"".join(i(v) for v in values) + b"t"


def tensor(key, numel, size, stride, offset=0, storage="FloatStorage"):
  """_rebuild_tensor_v2((storage pid), offset, size, stride, False, OrderedDict()) opcodes."""
  pid = b"(" + s("storage") + g("torch", storage) + s(key) + s("cpu") + i(numel) + b"tQ"
  return (g("torch._utils", "_rebuild_tensor_v2") + b"(" + pid + i(offset) + ints(size)
          + ints(stride) + b"\x89" + g("collections", "OrderedDict") + b")R" + b"tR")


def state_dict(entries):
  """A pickle of {name: tensor opcodes}."""
  return b"\x80\x02}(" + b"".join(s(name) + body for name, body in entries.items()) + b"u."


def named_often(times, numel):
  """A pickle of one tensor of numel elements (storage "0") under `times` names (BINGET)."""
  names = b"".join(s("n%d" % n) + b"h\x00" for n in range(1, times))
  return (b"\x80\x02}(" + s("n0") + tensor("0", numel, (numel,), (1,)) + b"q\x00" + names
          + b"u.")


def keyed(key_opcodes):
  """A pickle of {<key>: None}: a dict whose key the opcodes build."""
  return b"\x80\x02}" + key_opcodes + b"Ns."


def shared_tuple_key(levels):
  """A key of `levels` nested pairs of one shared tuple: 2^levels paths to hash."""
  body = b")"
  for level in range(levels):
    body += b"q" + bytes([level % 256]) + b"h" + bytes([level % 256]) + b"\x86"
  return keyed(body)


def reduce_call(module, name, *args):
  return b"\x80\x02" + g(module, name) + b"(" + b"".join(s(a) for a in args) + b"tR."


# ------------------------------------------------------------------ files
def write_bin(folder, pickle_bytes, records=None, name="pytorch_model.bin"):
  """folder/name: a PyTorch zip .bin of data.pkl and data/<key> records; safetensors removed."""
  _drop_weights(folder)
  with zipfile.ZipFile(os.path.join(folder, name), "w") as archive:
    archive.writestr("archive/data.pkl", pickle_bytes)
    archive.writestr("archive/byteorder", b"little")
    for key, data in (records or {}).items():
      archive.writestr("archive/data/" + key, data)
  return os.path.join(folder, name)


def patch_zip(path, member, flag=None, method=None, file_size=None, entries=None):
  """Rewrites fields of a member's local and central headers (and the end record's count)."""
  with open(path, "rb") as f:
    data = bytearray(f.read())
  encoded = member.encode()
  for signature, offsets in ((b"PK\x03\x04", (6, 8, 22, 26, 30)),
                             (b"PK\x01\x02", (8, 10, 24, 28, 46))):
    at = data.find(signature)
    while at >= 0:
      flag_at, method_at, size_at, name_len_at, name_at = (at + o for o in offsets)
      length = struct.unpack_from("<H", data, name_len_at)[0]
      if bytes(data[name_at:name_at + length]) == encoded:
        if flag is not None:
          struct.pack_into("<H", data, flag_at, flag)
        if method is not None:
          struct.pack_into("<H", data, method_at, method)
        if file_size is not None:
          struct.pack_into("<I", data, size_at, file_size)
      at = data.find(signature, at + 4)
  if entries is not None:
    struct.pack_into("<H", data, data.rfind(b"PK\x05\x06") + 10, entries)
  with open(path, "wb") as f:
    f.write(data)


def write_safetensors(folder, header, data=b"", length=None, size=None,
                      name="model.safetensors"):
  """folder/name with a header (a JSON value, or raw bytes), `length` overriding its stated
  length, the file extended (sparse) to `size` bytes when given."""
  raw = header if isinstance(header, bytes) else json.dumps(header).encode()
  path = os.path.join(folder, name)
  with open(path, "wb") as f:
    f.write(struct.pack("<Q", len(raw) if length is None else length) + raw + data)
    if size:
      f.truncate(size)
  return path


def _drop_weights(folder):
  for name in ("model.safetensors", "pytorch_model.bin"):
    if os.path.lexists(os.path.join(folder, name)):
      os.unlink(os.path.join(folder, name))


def _write(folder, name, data):
  with open(os.path.join(folder, name), "wb" if isinstance(data, bytes) else "w") as f:
    f.write(data)


def edit_config(folder, **changes):
  with open(os.path.join(folder, "config.json"), encoding="utf-8") as f:
    config = json.load(f)
  config.update(changes)
  _write(folder, "config.json", json.dumps(config))


def _fifo(name):
  def build(folder):
    path = os.path.join(folder, name)
    if os.path.lexists(path):
      os.unlink(path)
    os.mkfifo(path)
  return build


def _symlink(name, target):
  def build(folder):
    destination = target(folder) if callable(target) else target
    if os.path.lexists(os.path.join(folder, name)):
      os.unlink(os.path.join(folder, name))
    os.symlink(destination, os.path.join(folder, name))
  return build


def _outside_vocab(folder):
  _write(os.path.dirname(folder), "secret.txt", "password\n")
  return os.path.join(os.path.dirname(folder), "secret.txt")


def _inside_vocab(folder):
  os.rename(os.path.join(folder, "vocab.txt"), os.path.join(folder, "real_vocab.txt"))
  return "real_vocab.txt"


def _sharded(shard):
  def build(folder):
    _write(folder, "model.safetensors.index.json",
           json.dumps({"weight_map": {"bert.embeddings.word_embeddings.weight": shard}}))
    os.unlink(os.path.join(folder, "model.safetensors"))
  return build


def _hub_cache(folder):
  """The folder rebuilt as a huggingface hub cache snapshot: files are links into ../../blobs."""
  blobs = os.path.join(folder, "blobs")
  snapshot = os.path.join(folder, "snapshots", "abc123")
  os.makedirs(blobs)
  os.makedirs(snapshot)
  for name in ("config.json", "vocab.txt", "model.safetensors"):
    os.rename(os.path.join(folder, name), os.path.join(blobs, name + ".blob"))
    os.symlink(os.path.join("..", "..", "blobs", name + ".blob"), os.path.join(snapshot, name))
  return snapshot


def _tokenizer_json(vocab_edit=None, nested=0):
  def build(folder):
    with open(os.path.join(folder, "vocab.txt"), encoding="utf-8") as f:
      tokens = f.read().splitlines()
    os.unlink(os.path.join(folder, "vocab.txt"))
    vocab = {t: n for n, t in enumerate(tokens)}
    if vocab_edit:
      vocab_edit(vocab)
    text = json.dumps({"model": {"type": "WordPiece", "vocab": vocab}})
    if nested:
      text = text[:-1] + ', "deep": ' + "[" * nested + "]" * nested + "}"
    _write(folder, "tokenizer.json", text)
  return build


def _truncate(name, keep):
  def build(folder):
    path = os.path.join(folder, name)
    with open(path, "r+b") as f:
      f.truncate(keep(os.path.getsize(path)))
  return build


def _zip_bomb_pickle(folder):
  """data.pkl: 64 MiB of zeros deflated to ~64 KiB."""
  _drop_weights(folder)
  with zipfile.ZipFile(os.path.join(folder, "pytorch_model.bin"), "w",
                       zipfile.ZIP_DEFLATED) as archive:
    archive.writestr("archive/data.pkl", bytes(64 << 20))


def _zip_member(member, **patch):
  def build(folder):
    path = write_bin(folder, state_dict({"x": tensor("0", 4, (4,), (1,))}),
                     {"0": bytes(16)})
    patch_zip(path, member, **patch)
  return build


def _bin(pickle_bytes, records=None):
  return lambda folder: write_bin(folder, pickle_bytes, records)


def _legacy(folder):
  shutil.copy(os.path.join(FIXTURES, "hf_tiny", "legacy", "pytorch_model.bin"), folder)
  os.unlink(os.path.join(folder, "model.safetensors"))


def _f32(shape, offsets, dtype="F32"):
  return {"x": {"dtype": dtype, "shape": shape, "data_offsets": offsets}}


def _deep_tuple_key(depth):
  return keyed(b")" + b"\x85" * depth)


CODE = "touch " + RAN_MARKER
CASES = [
    # pickles: memory, crash and hang bombs
    Case("memo index 2^27", _bin(b"\x80\x02Nr\xff\xff\xff\x07."), "holds a NoneType, not a state"),
    Case("BINBYTES8 2^62", _bin(b"\x80\x02\x8e" + struct.pack("<Q", 1 << 62) + b"."),
         "the pickle claims 4611686018427387904 bytes"),
    Case("BINUNICODE 4 GiB", _bin(b"\x80\x02X\xff\xff\xff\xff."), "the pickle claims"),
    Case("LONG4 of 1 MB", _bin(b"\x80\x02\x8b" + struct.pack("<i", 1 << 20) + bytes(1 << 20)
                               + b"."), "an integer of 1048576 bytes"),
    Case("tuple key 10^6 deep", _bin(_deep_tuple_key(10 ** 6)), "nest more than 32 deep"),
    Case("shared tuple key 2^40", _bin(shared_tuple_key(40)), "nest more than 32 deep"),
    Case("shared tuple key 2^30", _bin(shared_tuple_key(30)), "a dict key is a tuple"),
    Case("stride 0", _bin(state_dict({"x": tensor("0", 1, (1000, 1000), (0, 0))}),
                          {"0": bytes(4)}), "stride 0 on a dimension of 1000"),
    Case("overlapping strides", _bin(state_dict({"x": tensor("0", 2000, (1000, 1000), (1, 1))}),
                                     {"0": bytes(8000)}), "its elements overlap"),
    Case("storage 2^40 elements", _bin(state_dict({"x": tensor("0", 1 << 40, (4,), (1,))})),
         "more than the model of"),
    Case("tensor 2^31 elements", _bin(state_dict({"x": tensor("0", 4, (1 << 31,), (1,))}),
                                      {"0": bytes(16)}), "more than the model of"),
    Case("one tensor named 5000 times", _bin(named_often(5000, 4), {"0": bytes(16)}),
         "the state dict holds 5000 entries, more than a model of"),
    Case("a 1M-element tensor named 100 times", _bin(named_often(100, 1 << 20),
                                                     {"0": bytes(4 << 20)}), OK),
    Case("tensor past its storage", _bin(state_dict({"x": tensor("0", 4, (8,), (1,))}),
                                         {"0": bytes(16)}), "reaches past its storage"),
    Case("zip bomb data.pkl", _zip_bomb_pickle, "unpacks to 67.1 MB"),
    Case("zip member lies 2 GiB", _zip_member("archive/data.pkl", file_size=1 << 31),
         "unpacks to 2147.5 MB"),
    Case("zip encrypted", _zip_member("archive/data.pkl", flag=1), "is encrypted"),
    Case("zip method 99", _zip_member("archive/data/0", method=99),
         "compressed with method 99"),
    Case("zip 65535 members", _zip_member("archive/data/0", entries=0xFFFF),
         "a zip of 65535 members"),
    # pickles: code that must never run (and the machine's opcode refusals)
    Case("REDUCE os.system", _bin(reduce_call("os", "system", CODE)), "needs os.system"),
    Case("REDUCE posix.system", _bin(reduce_call("posix", "system", CODE)),
         "needs posix.system"),
    Case("eval", _bin(reduce_call("builtins", "eval", "__import__('os').system(%r)" % CODE)),
         "needs builtins.eval"),
    Case("exec", _bin(reduce_call("builtins", "exec", "import os; os.system(%r)" % CODE)),
         "needs builtins.exec"),
    Case("getattr chain", _bin(b"\x80\x02" + g("builtins", "getattr") + b"(" +
                               g("collections", "OrderedDict") + s("__init__") + b"tR."),
         "needs builtins.getattr"),
    Case("INST", _bin(b"\x80\x02(" + s(CODE) + b"ios\nsystem\n."), "opcode INST"),
    Case("OBJ", _bin(b"\x80\x02(" + g("os", "system") + s(CODE) + b"o."), "needs os.system"),
    Case("NEWOBJ", _bin(b"\x80\x02" + s("collections") + s("OrderedDict") + b"\x93)\x81."),
         "opcode NEWOBJ"),
    Case("NEWOBJ_EX", _bin(b"\x80\x04" + s("collections") + s("OrderedDict") + b"\x93)}\x92."),
         "opcode NEWOBJ_EX"),
    Case("BUILD on an allowed global", _bin(b"\x80\x02" + g("collections", "OrderedDict") +
                                            b"}(" + s("__setstate__") + s("x") + b"ub."),
         "sets the state of a _Global"),
    Case("torch._utils.__builtins__", _bin(reduce_call("torch._utils", "__builtins__", "x")),
         "needs torch._utils.__builtins__"),
    Case("dotted global", _bin(b"\x80\x04" + s("torch._utils") +
                               s("_rebuild_tensor_v2.__globals__") + b"\x93."),
         "needs torch._utils._rebuild_tensor_v2.__globals__"),
    Case("REDUCE on a storage class", _bin(b"\x80\x02" + g("torch", "FloatStorage") + b")R."),
         "calls a _StorageType"),
    # weight files that are accidents
    Case("LFS pointer", lambda f: _write(f, "model.safetensors", b"version https://git-lfs."
                                         b"github.com/spec/v1\noid sha256:4d7a\nsize 411578\n"),
         "model.safetensors is a Git LFS pointer, not the weights: run `git lfs pull`"),
    Case("HTML page", lambda f: _write(f, "model.safetensors", b"<!DOCTYPE html>\n<html><head>"
                                       b"<title>Sign in</title></head></html>\n"),
         "is an HTML page"),
    Case("HTML page .bin", lambda f: (_drop_weights(f), _write(
        f, "pytorch_model.bin", b"\n<html><body>404</body></html>")), "is an HTML page"),
    Case("random .bin", lambda f: (_drop_weights(f), _write(f, "pytorch_model.bin", b"\x13" * 99)),
         "neither a zip archive (PyTorch >= 1.6) nor a pickle"),
    Case("empty safetensors", lambda f: _write(f, "model.safetensors", b""), "is empty"),
    Case("truncated safetensors", _truncate("model.safetensors", lambda n: n - 500),
         "is truncated: its header places tensor data up to byte"),
    Case("truncated zip", lambda f: (_zip_member("archive/data.pkl")(f), _truncate(
        "pytorch_model.bin", lambda n: n - 30)(f)), "without its end record: truncated"),
    Case("truncated legacy", lambda f: (_legacy(f), _truncate(
        "pytorch_model.bin", lambda n: n - 100)(f)), "the file ends inside it"),
    # safetensors bombs and lies
    Case("header length 2^62", lambda f: write_safetensors(f, {}, length=1 << 62),
         "its header length says 4611686018427387904 bytes"),
    Case("header 5 MB (sparse)", lambda f: write_safetensors(
        f, b"{" + b" " * (5 << 20) + b"}"), "a header of 5242882 bytes, more than"),
    Case("header a list", lambda f: write_safetensors(f, [1, 2]), "its header is [1, 2], not a"),
    Case("header 10^5 deep", lambda f: write_safetensors(f, b"[" * 10 ** 5 + b"]" * 10 ** 5),
         "nests 100000 levels deep"),
    Case("bf16 offset 2^62", lambda f: write_safetensors(
        f, _f32([2], [1 << 62, (1 << 62) + 4], "BF16")), "is truncated"),
    Case("bf16 negative offset", lambda f: write_safetensors(f, _f32([2], [-4, 0], "BF16")),
         "data_offsets [-4, 0], not [begin, end]"),
    Case("bf16 offsets past 2^64", lambda f: write_safetensors(
        f, _f32([2], [1 << 64, (1 << 64) + 4], "BF16")), "not [begin, end]"),
    Case("shape 2^40 elements (sparse)", lambda f: write_safetensors(
        f, _f32([1 << 20, 1 << 20], [0, 1 << 42]), size=(1 << 42) + 200),
         "more than the model of"),
    Case("sparse 1 GB tensor", lambda f: write_safetensors(
        f, _f32([1 << 28], [0, 1 << 30]), size=(1 << 30) + 100), "more than the model of"),
    Case("unknown dtype", lambda f: write_safetensors(f, _f32([2], [0, 2], "F8_E4M3"), bytes(2)),
         "has dtype 'F8_E4M3'"),
    Case("overlapping tensors", lambda f: write_safetensors(f, dict(
        _f32([4], [0, 16]), y={"dtype": "F32", "shape": [4], "data_offsets": [8, 24]}),
        bytes(24)), "overlaps the one before it"),
    Case("offsets vs shape", lambda f: write_safetensors(f, _f32([4], [0, 8]), bytes(8)),
         "needs 16 bytes, its data_offsets span 8"),
    # config.json
    Case("config 10^5 deep", lambda f: _write(f, "config.json", "[" * 10 ** 5 + "]" * 10 ** 5),
         "config.json nests 100000 levels deep"),
    Case("config a list", lambda f: _write(f, "config.json", "[1]"), "is not a JSON object"),
    Case("config 5 MB", lambda f: _write(f, "config.json", "{" + " " * (5 << 20) + "}"),
         "more than a config.json may be"),
    Case("config not UTF-8", lambda f: _write(f, "config.json", b'{"a": "\xff"}'),
         "config.json is not UTF-8 text"),
    Case("vocab_size a string", lambda f: edit_config(f, vocab_size="100"),
         "vocab_size '100' is not an integer"),
    Case("hidden_size a float", lambda f: edit_config(f, hidden_size=32.0),
         "hidden_size 32.0 is not an integer"),
    Case("hidden_size a bool", lambda f: edit_config(f, num_hidden_layers=True),
         "num_hidden_layers True is not an integer"),
    Case("no attention heads", lambda f: edit_config(f, num_attention_heads=0),
         "num_attention_heads is 0, it must be at least 1"),
    Case("layers -1", lambda f: edit_config(f, num_hidden_layers=-1), "num_hidden_layers is -1"),
    Case("layers 10^6", lambda f: edit_config(f, num_hidden_layers=10 ** 6),
         "num_hidden_layers 1000000 is more than the ceiling of 128 layers"),
    Case("vocab 10^12", lambda f: edit_config(f, vocab_size=10 ** 12),
         "more than the ceiling of 1000000000"),
    Case("heads do not divide", lambda f: edit_config(f, num_attention_heads=5),
         "hidden_size 32 is not a multiple of num_attention_heads 5"),
    Case("hidden_act a list", lambda f: edit_config(f, hidden_act=["gelu"]),
         "hidden_act ['gelu'] is not a string"),
    Case("dropout 2", lambda f: edit_config(f, hidden_dropout_prob=2),
         "hidden_dropout_prob 2 is not a probability"),
    Case("huge int in config", lambda f: _write(f, "config.json", '{"vocab_size": 1%s}' % (
        "0" * 5000)), "config.json is not valid JSON"),
    # files that are not regular, or not inside
    Case("config FIFO", _fifo("config.json"), "config.json is a FIFO (named pipe)"),
    Case("tokenizer_config FIFO", _fifo("tokenizer_config.json"),
         "tokenizer_config.json is a FIFO"),
    Case("weights FIFO", _fifo("model.safetensors"), "model.safetensors is a FIFO"),
    Case("vocab a directory", lambda f: (os.unlink(os.path.join(f, "vocab.txt")), os.mkdir(
        os.path.join(f, "vocab.txt"))), "vocab.txt is a directory"),
    Case("vocab a link outside", _symlink("vocab.txt", _outside_vocab), "outside the folder"),
    Case("weights /proc/self/mem", _symlink("model.safetensors", "/proc/self/mem"),
         "outside the folder"),
    Case("vocab a broken link", _symlink("vocab.txt", "nowhere.txt"), "(a broken symlink)"),
    Case("shard ../outside", _sharded("../outside.safetensors"), "not a plain file name"),
    Case("shard absolute", _sharded("/etc/passwd"), "not a plain file name"),
    Case("shard index 10^5 deep", lambda f: (_sharded("x")(f), _write(
        f, "model.safetensors.index.json", "[" * 10 ** 5 + "]" * 10 ** 5)), "nests 100000"),
    Case("tokenizer_config 10^5 deep", lambda f: _write(
        f, "tokenizer_config.json", "[" * 10 ** 5 + "]" * 10 ** 5), "nests 100000"),
    # vocabs
    Case("vocab empty", lambda f: _write(f, "vocab.txt", ""), "has no tokens: an empty vocab"),
    Case("vocab duplicate", lambda f: _write(f, "vocab.txt", "[PAD]\na\nb\na\n"),
         "line 4 repeats the token 'a' of line 2"),
    Case("vocab empty line", lambda f: _write(f, "vocab.txt", "[PAD]\n\na\n"), "line 2 is empty"),
    Case("vocab not UTF-8", lambda f: _write(f, "vocab.txt", b"[PAD]\n\xff\n"),
         "vocab.txt is not UTF-8 text"),
    Case("vocab 10 MB", lambda f: _write(f, "vocab.txt", "x" * (10 << 20)),
         "more than a vocab of this model may be"),
    Case("tokenizer.json token with a newline", _tokenizer_json(
        lambda v: v.update({"a\nb": v.pop("[unused1]")})), "cannot be a line of vocab.txt"),
    Case("tokenizer.json 10^5 deep", _tokenizer_json(nested=10 ** 5), "nests 100001 levels"),
    Case("tokenizer.json ids not 0..n-1", _tokenizer_json(
        lambda v: v.update({"[PAD]": 10 ** 30})), "its ids are not 0..99"),
    # legitimate folders that must still import
    Case("vocab a link inside", _symlink("vocab.txt", _inside_vocab), OK),
    Case("tokenizer.json vocab", _tokenizer_json(), OK),
    Case("legacy .bin", _legacy, OK),
]
HUB_CACHE = Case("hub cache snapshot", _hub_cache, OK)  # make() returns the snapshot


def make(root, case, index=0):
  """A copy of BASE under root, damaged by case.build; returns the folder to import."""
  folder = os.path.join(str(root), "case%03d" % index)
  shutil.copytree(BASE, folder)
  built = case.build(folder)
  return built if isinstance(built, str) and os.path.isdir(built) else folder
