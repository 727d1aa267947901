"""A transformers BERT folder read without PyTorch, as untrusted input: weights, config and vocab.

  files = read_files(hf_dir, ceilings)     # no TensorFlow; config: {BertConfig field: value}
  folder = read_folder(hf_dir, ceilings)   # the same, config a BertConfig
  # everything checked; raises ImportRefused (a ValueError): one line naming the file

Every file is hostile until checked (untrusted.py): only regular files that resolve inside the
folder (for a huggingface hub cache snapshot, inside its blobs/ too) are opened, a FIFO or device
never; each is read with a size limit; the JSON files (config.json, the shard indexes,
tokenizer.json, tokenizer_config.json) nest at most untrusted.MAX_JSON_DEPTH deep. config.json
is read and checked first (hf_config.py: types, ranges, the ceilings on layers and parameters),
then the weight files within the budget it justifies (what a model of its sizes holds: memory
stays a small multiple of the model's float32 size whatever a file claims).

Weights, the first of these present:
  model.safetensors                 safetensors_file.py (every dtype; bfloat16 upcast exactly);
  model.safetensors.index.json      sharded: its weight_map's files (plain file names in the
                                    folder), each read as above;
  pytorch_model.bin                 torch_pickle.py (zip or legacy layout, no PyTorch, no code run);
  pytorch_model.bin.index.json      sharded .bin.
Every float tensor comes back float32 (float16 / bfloat16 upcast: every value exact); the dtypes
found are reported. tf_model.h5 / flax_model.msgpack alone are refused (not read). Git LFS
pointers, HTML pages and truncated downloads in place of a weight file are named as such.
config.json -> BertConfig: hf_config.py (model_type bert, absolute positions, google's layer norm
epsilon, no decoder, transformers' hidden_act mapped to bert_fin's).
vocab.txt (google's format: one token a line, none empty, each once) is copied; without it the
WordPiece vocab of tokenizer.json is used (its tokens must be what a vocab.txt line can hold:
non-empty, no line break, no surrounding whitespace). tokenizer_config.json's do_lower_case is
reported when the file is there.
"""
import collections
import os

import numpy as np

from bert_fin.interop import hf_config as hf_config_lib
from bert_fin.interop import safetensors_file
from bert_fin.interop import torch_pickle
from bert_fin.guard import untrusted
from bert_fin.interop.hf_files import CONFIG_FILE, TOKENIZER_CONFIG, TOKENIZER_FILE, VOCAB_FILE
from bert_fin.interop.hf_files import WEIGHT_FILES
from bert_fin.tokenization import config_fit

MiB = untrusted.MiB
CONFIG_LIMIT = TOKENIZER_CONFIG_LIMIT = 4 * MiB  # transformers writes a few KB
TOKENIZER_LIMIT = 50 * MiB  # and at most 4 MiB + 1 KiB a token of vocab_size
HIDDEN_ACT = hf_config_lib.HIDDEN_ACT
ImportRefused = untrusted.Refused

Folder = collections.namedtuple("Folder", [
    "hf_dir", "config", "hf_config", "tensors", "weight_files", "dtypes", "vocab", "vocab_source",
    "do_lower_case"])
Folder.__doc__ = """read_folder's result: config a BertConfig (bert_fin's hidden_act; read_files:
its fields as a dict), hf_config the config.json dict, tensors {transformers name: np.ndarray}
(floats float32), weight_files (the files read), dtypes (sorted stored dtype names), vocab (list of
tokens, index = id), vocab_source (the file it came from), do_lower_case (tokenizer_config.json's,
or None)."""


def weight_files(hf_dir, roots, budget):
  """(kind, [paths]) of the first weight layout present (module docstring). Raises ImportRefused."""
  for name in WEIGHT_FILES:
    path = untrusted.member(hf_dir, name, roots)
    if path is None:
      continue
    if not name.endswith(".index.json"):
      return name, [path]
    index = untrusted.load_json(path, budget.header_bytes, roots, "shard index of this model")
    weight_map = index.get("weight_map") if isinstance(index, dict) else None
    if (not isinstance(weight_map, dict) or not weight_map
        or not all(isinstance(shard, str) for shard in weight_map.values())):
      raise ImportRefused("%s: not a shard index with a weight_map of tensor name -> file name"
                          % path)
    shards = sorted(set(weight_map.values()))
    if len(shards) > budget.entries:
      raise ImportRefused("%s names %d shards, more than a model of %s has tensors" % (
          path, len(shards), budget.source))
    for shard in shards:
      untrusted.file_name(shard, path)
    missing = [s for s in shards if untrusted.member(hf_dir, s, roots) is None]
    if missing:
      raise ImportRefused("%s names shard(s) that are not there: %s" % (
          path, ", ".join(untrusted.quote(s) for s in missing[:5])))
    return name, [os.path.join(hf_dir, s) for s in shards]
  others = [n for n in ("tf_model.h5", "flax_model.msgpack")
            if os.path.lexists(os.path.join(hf_dir, n))]
  raise ImportRefused("%s has no %s%s" % (
      hf_dir, " / ".join(WEIGHT_FILES),
      " (only %s, which is not read: save the model with save_pretrained from PyTorch)"
      % ", ".join(others) if others else ""))


def read_tensors(kind, paths, budget, roots=None):
  """({name: array, floats float32}, sorted stored dtype names) of the weight files, all of them
  together within budget."""
  tensors, dtypes = {}, set()
  for path in paths:
    if kind.startswith("model.safetensors"):
      with untrusted.reading(path, "safetensors file"):
        part, stored = safetensors_file.read(path, budget, roots)
    else:
      part, stored = torch_pickle.load_state_dict(path, budget, roots)
    duplicated = sorted(set(part) & set(tensors))
    if duplicated:
      raise ImportRefused("%s repeats tensors of another shard: %s" % (
          path, ", ".join(untrusted.quote(name) for name in duplicated[:3])))
    upcast = {}  # one at a time (a float16 model is never held twice), each array once
    for name, value in part.items():
      if id(value) not in upcast:
        upcast[id(value)] = (value.astype(np.float32, copy=False)
                             if np.issubdtype(value.dtype, np.floating) else value)
      tensors[name] = upcast[id(value)]
    dtypes.update(stored)
  return tensors, sorted(dtypes)


def vocab_lines(data, path):
  """The tokens of vocab.txt bytes (one a line; a UTF-8 byte order mark and "\\r\\n" endings
  allowed); ImportRefused for an empty vocab, an empty line, a "\\r" inside a line, a repeat."""
  try:
    text = data.decode("utf-8-sig")
  except UnicodeDecodeError as e:
    raise ImportRefused("%s is not UTF-8 text (byte %d)" % (path, e.start)) from None
  lines = text.split("\n")
  if lines[-1] == "":
    lines.pop()
  tokens = [line[:-1] if line.endswith("\r") else line for line in lines]
  if not tokens:
    raise ImportRefused("%s has no tokens: an empty vocab" % path)
  first = {}
  for number, token in enumerate(tokens, 1):
    if not token:
      raise ImportRefused("%s: line %d is empty (a vocab holds one token a line)" % (path, number))
    if "\r" in token:
      raise ImportRefused("%s: line %d holds a carriage return inside its token" % (path, number))
    if token in first:
      raise ImportRefused("%s: line %d repeats the token %s of line %d (each token once, or the "
                          "ids shift)" % (path, number, untrusted.quote(token), first[token]))
    first[token] = number
  return tokens


def wordpiece_vocab(tokenizer, path):
  """The tokens (index = id) of tokenizer.json's WordPiece model; ImportRefused otherwise."""
  model = tokenizer.get("model") if isinstance(tokenizer, dict) else None
  if (not isinstance(model, dict) or model.get("type") != "WordPiece"
      or not isinstance(model.get("vocab"), dict)):
    kind = model.get("type") if isinstance(model, dict) else None
    raise ImportRefused("%s: no WordPiece vocab in it (model type %s); add the model's "
                        "vocab.txt" % (path, untrusted.quote(kind)))
  vocab, by_id = model["vocab"], {}
  for token, index in vocab.items():
    if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < len(vocab):
      raise ImportRefused("%s: token %s has the id %s: its ids are not 0..%d; add the model's "
                          "vocab.txt" % (path, untrusted.quote(token), untrusted.quote(index),
                                         len(vocab) - 1))
    if index in by_id:
      raise ImportRefused("%s: id %d is given to two tokens" % (path, index))
    if not token or token != token.strip() or "\n" in token or "\r" in token:
      raise ImportRefused("%s: token %s (id %d) cannot be a line of vocab.txt (empty, a line "
                          "break, or whitespace around it)" % (path, untrusted.quote(token), index))
    by_id[index] = token
  if not by_id:
    raise ImportRefused("%s: its WordPiece vocab is empty" % path)
  return [by_id[i] for i in range(len(by_id))]


def read_vocab(hf_dir, roots, vocab_size):
  """(tokens, source path) from vocab.txt, else tokenizer.json's WordPiece vocab."""
  path = untrusted.member(hf_dir, VOCAB_FILE, roots)
  if path is not None:
    data = untrusted.read_bytes(path, MiB + 1024 * vocab_size, roots, "vocab of this model")
    return vocab_lines(data, path), path
  path = untrusted.member(hf_dir, TOKENIZER_FILE, roots)
  if path is not None:
    limit = min(TOKENIZER_LIMIT, 4 * MiB + 1024 * vocab_size)
    tokenizer = untrusted.load_json(path, limit, roots, "tokenizer.json of this model")
    return wordpiece_vocab(tokenizer, path), path
  raise ImportRefused("%s has no %s (nor %s): add the model's vocab.txt" % (
      hf_dir, VOCAB_FILE, TOKENIZER_FILE))


def do_lower_case(hf_dir, roots):
  """tokenizer_config.json's do_lower_case (a bool), None when it has none or is absent."""
  path = untrusted.member(hf_dir, TOKENIZER_CONFIG, roots)
  if path is None:
    return None
  value = untrusted.load_json(path, TOKENIZER_CONFIG_LIMIT, roots, "tokenizer_config.json")
  if not isinstance(value, dict):
    raise ImportRefused("%s is not a JSON object" % path)
  value = value.get("do_lower_case")
  return value if isinstance(value, bool) else None


def read_files(hf_dir, ceilings=hf_config_lib.DEFAULT_CEILINGS):
  """Folder of a transformers BERT directory with config the dict of BertConfig fields, every
  check of the module docstring done, no TensorFlow imported, nothing written. Raises
  ImportRefused; OSError when a file cannot be read (the disk)."""
  if not os.path.isdir(hf_dir):
    raise ImportRefused("--hf_dir %s: no such directory" % hf_dir)
  roots = untrusted.allowed_roots(hf_dir)
  config_path = untrusted.member(hf_dir, CONFIG_FILE, roots)
  if config_path is None:
    raise ImportRefused("%s has no %s: not a transformers model folder" % (hf_dir, CONFIG_FILE))
  hf_config = untrusted.load_json(config_path, CONFIG_LIMIT, roots, "config.json")
  fields = hf_config_lib.google_fields(hf_config, config_path, ceilings)
  budget = hf_config_lib.weights_budget(fields, config_path)
  vocab, vocab_source = read_vocab(hf_dir, roots, fields["vocab_size"])
  try:
    config_fit.check_token_count(len(vocab), fields["vocab_size"], vocab_source, "config.json's")
  except ValueError as e:
    raise ImportRefused(str(e)) from e
  lower = do_lower_case(hf_dir, roots)
  kind, paths = weight_files(hf_dir, roots, budget)
  tensors, dtypes = read_tensors(kind, paths, budget, roots)
  return Folder(hf_dir, fields, hf_config, tensors, paths, dtypes, vocab, vocab_source, lower)


def read_folder(hf_dir, ceilings=hf_config_lib.DEFAULT_CEILINGS):
  """read_files with config a BertConfig (validated). Raises ImportRefused; OSError.
  TensorFlow (bert_fin.modeling's package) is imported only after every file passed."""
  files = read_files(hf_dir, ceilings)
  from bert_fin.modeling import config as config_lib  # pylint: disable=import-outside-toplevel
  config = config_lib.BertConfig(**files.config)
  try:
    config.validate()
  except ValueError as e:
    raise ImportRefused("%s: %s" % (os.path.join(hf_dir, CONFIG_FILE), e)) from None
  return files._replace(config=config)
