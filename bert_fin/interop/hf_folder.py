"""A transformers BERT folder read without PyTorch: weights, config (as a BertConfig) and vocab.

  folder = read_folder(hf_dir)   # everything checked; raises ImportRefused (one line)

Weights, the first of these present:
  model.safetensors                 the safetensors numpy API (bfloat16 tensors, which numpy
                                    lacks, read from the file's own header and upcast exactly);
  model.safetensors.index.json      sharded: its weight_map's files, each read as above;
  pytorch_model.bin                 torch_pickle.py (zip or legacy layout, no PyTorch, no code run);
  pytorch_model.bin.index.json      sharded .bin.
Every float tensor comes back float32 (float16 / bfloat16 upcast: every value exact); the dtypes
found are reported. tf_model.h5 / flax_model.msgpack alone are refused (not read).

config.json -> BertConfig (google's fields, missing ones at transformers' BertConfig defaults):
  model_type must be bert (roberta, xlm-roberta, ... refused: positions offset by padding_idx + 1
  and other names); position_embedding_type absolute; layer_norm_eps 1e-12 (google's, the only
  epsilon bert_fin's layer norm has); no decoder / cross-attention.
  hidden_act: transformers' "gelu" is the exact erf GELU -> bert_fin "gelu_erf"; "gelu_new",
  "gelu_pytorch_tanh", "gelu_fast" are google's tanh approximation -> "gelu"; relu, tanh, linear
  as they are; anything else is refused.
vocab.txt (google's format) is copied; without it the WordPiece vocab of tokenizer.json is used.
"""
import collections
import json
import os
import struct

import numpy as np
import safetensors
from safetensors import numpy as safetensors_numpy

from bert_fin.export import hf as export_hf
from bert_fin.interop import torch_pickle
from bert_fin.interop.layout import CONFIG_FILE, TOKENIZER_CONFIG, TOKENIZER_FILE, VOCAB_FILE
from bert_fin.interop.layout import WEIGHT_FILES
from bert_fin.modeling import config as config_lib
from bert_fin.modeling import layers

# transformers' hidden_act -> bert_fin's: the exporter's table inverted, plus tanh-GELU aliases.
HIDDEN_ACT = dict({hf: google for google, hf in export_hf.HIDDEN_ACT.items()},
                  gelu_pytorch_tanh="gelu", gelu_fast="gelu")
SAFETENSORS_DTYPES = {"F32": "float32", "F16": "float16", "BF16": "bfloat16", "F64": "float64",
                      "I64": "int64", "I32": "int32", "BOOL": "bool"}
# transformers' BertConfig defaults, for fields an older config.json leaves out.
HF_DEFAULTS = {"vocab_size": 30522, "hidden_size": 768, "num_hidden_layers": 12,
               "num_attention_heads": 12, "intermediate_size": 3072, "hidden_act": "gelu",
               "hidden_dropout_prob": 0.1, "attention_probs_dropout_prob": 0.1,
               "max_position_embeddings": 512, "type_vocab_size": 2, "initializer_range": 0.02,
               "layer_norm_eps": 1e-12, "position_embedding_type": "absolute"}

Folder = collections.namedtuple("Folder", [
    "hf_dir", "config", "hf_config", "tensors", "weight_files", "dtypes", "vocab", "vocab_source",
    "do_lower_case"])
Folder.__doc__ = """read_folder's result: config a BertConfig (bert_fin's hidden_act), hf_config
the config.json dict, tensors {transformers name: np.ndarray} (floats float32), weight_files (the
files read), dtypes (sorted stored dtype names), vocab (list of tokens, index = id), vocab_source
(the file it came from), do_lower_case (tokenizer_config.json's, or None)."""


class ImportRefused(ValueError):
  """The folder cannot be imported exactly: the message names the file, what and the fix."""


def weight_files(hf_dir):
  """(kind, [paths]) of the first weight layout present (module docstring). Raises ImportRefused."""
  for name in WEIGHT_FILES:
    path = os.path.join(hf_dir, name)
    if not os.path.isfile(path):
      continue
    if not name.endswith(".index.json"):
      return name, [path]
    try:
      with open(path, encoding="utf-8") as f:
        weight_map = json.load(f)["weight_map"]
      shards = sorted(set(weight_map.values()))
    except (ValueError, KeyError, TypeError, AttributeError) as e:
      raise ImportRefused("%s: not a shard index with a weight_map (%s)" % (path, e))
    missing = [s for s in shards if not os.path.isfile(os.path.join(hf_dir, s))]
    if missing:
      raise ImportRefused("%s names shard(s) that are not there: %s" % (path, ", ".join(missing)))
    return name, [os.path.join(hf_dir, s) for s in shards]
  others = [n for n in ("tf_model.h5", "flax_model.msgpack") if os.path.isfile(
      os.path.join(hf_dir, n))]
  raise ImportRefused("%s has no %s%s" % (
      hf_dir, " / ".join(WEIGHT_FILES),
      " (only %s, which is not read: save the model with save_pretrained from PyTorch)"
      % ", ".join(others) if others else ""))


def _read_safetensors(path):
  """{name: array} of one safetensors file; bfloat16 tensors from the raw bytes."""
  with open(path, "rb") as f:
    header_size = struct.unpack("<Q", f.read(8))[0]
    header = json.loads(f.read(header_size))
  bf16 = {name for name, entry in header.items()
          if name != "__metadata__" and entry.get("dtype") == "BF16"}
  if not bf16:
    return safetensors_numpy.load_file(path), sorted({header[n]["dtype"] for n in header
                                                      if n != "__metadata__"})
  tensors = {}
  with open(path, "rb") as f:
    for name, entry in header.items():
      if name == "__metadata__":
        continue
      if entry["dtype"] != "BF16":
        raise ImportRefused("%s mixes bfloat16 with %s tensors" % (path, entry["dtype"]))
      start, end = entry["data_offsets"]
      f.seek(8 + header_size + start)
      halves = np.frombuffer(f.read(end - start), "<u2")
      tensors[name] = (halves.astype(np.uint32) << 16).view(np.float32).reshape(entry["shape"])
  return tensors, ["BF16"]


def read_tensors(kind, paths):
  """({name: array, floats float32}, sorted stored dtype names) of the weight files."""
  tensors, dtypes = {}, set()
  for path in paths:
    try:
      if kind.startswith("model.safetensors"):
        part, stored = _read_safetensors(path)
      else:
        part, stored = torch_pickle.load_state_dict(path)
    except torch_pickle.UnsupportedPickle as e:
      raise ImportRefused("%s: %s" % (path, e))
    except (ValueError, TypeError, KeyError, struct.error, safetensors.SafetensorError) as e:
      raise ImportRefused("%s: not a readable safetensors file (%s)" % (path, e))
    duplicated = sorted(set(part) & set(tensors))
    if duplicated:
      raise ImportRefused("%s repeats tensors of another shard: %s" % (path, duplicated[:3]))
    tensors.update(part)
    dtypes.update(SAFETENSORS_DTYPES.get(d, d) for d in stored)
  return ({name: value.astype(np.float32, copy=False) if np.issubdtype(value.dtype, np.floating)
           else value
           for name, value in tensors.items()}, sorted(dtypes))


def bert_config(hf_config, config_path):
  """BertConfig of a config.json dict; raises ImportRefused naming what is unsupported."""
  model_type = hf_config.get("model_type", "bert")
  if model_type != "bert":
    raise ImportRefused("%s: model_type %r is not supported, only bert (RoBERTa folders offset "
                        "positions by padding_idx + 1 and name weights roberta.*; hfl's "
                        "chinese-roberta-wwm-ext is model_type bert and imports)" % (
                            config_path, model_type))
  c = dict(HF_DEFAULTS, **{k: v for k, v in hf_config.items() if v is not None})
  if c["position_embedding_type"] != "absolute":
    raise ImportRefused("%s: position_embedding_type %r is not supported (bert_fin has google's "
                        "absolute position embeddings only)" % (config_path,
                                                                c["position_embedding_type"]))
  if float(c["layer_norm_eps"]) != layers.LAYER_NORM_EPSILON:
    raise ImportRefused("%s: layer_norm_eps %g is not supported (bert_fin's layer norm uses "
                        "google's %g; the outputs would differ)" % (
                            config_path, c["layer_norm_eps"], layers.LAYER_NORM_EPSILON))
  for flag in ("is_decoder", "add_cross_attention"):
    if c.get(flag):
      raise ImportRefused("%s: %s is set: a decoder is not supported" % (config_path, flag))
  if c["hidden_act"] not in HIDDEN_ACT:
    raise ImportRefused("%s: hidden_act %r has no bert_fin equivalent (supported: %s)" % (
        config_path, c["hidden_act"], ", ".join(sorted(HIDDEN_ACT))))
  fields = {name: c[name] for name in config_lib._FIELDS}  # pylint: disable=protected-access
  fields["hidden_act"] = HIDDEN_ACT[c["hidden_act"]]
  config = config_lib.BertConfig(**fields)
  try:
    config.validate()
  except ValueError as e:
    raise ImportRefused("%s: %s" % (config_path, e))
  return config


def read_vocab(hf_dir):
  """(tokens, source path) from vocab.txt, else tokenizer.json's WordPiece vocab."""
  path = os.path.join(hf_dir, VOCAB_FILE)
  if os.path.isfile(path):
    try:
      with open(path, encoding="utf-8-sig") as f:
        return [line.rstrip("\r\n") for line in f], path
    except UnicodeDecodeError as e:
      raise ImportRefused("%s is not UTF-8 text (%s)" % (path, e))
  path = os.path.join(hf_dir, TOKENIZER_FILE)
  if os.path.isfile(path):
    try:
      with open(path, encoding="utf-8") as f:
        model = json.load(f)["model"]
      if model.get("type") != "WordPiece":
        raise ValueError("model type %s" % model.get("type"))
      by_id = {int(i): token for token, i in model["vocab"].items()}
      if sorted(by_id) != list(range(len(by_id))):
        raise ValueError("its ids are not 0..n-1")
      return [by_id[i] for i in range(len(by_id))], path
    except (ValueError, KeyError, TypeError, AttributeError) as e:
      raise ImportRefused("%s: no WordPiece vocab in it (%s); add the model's vocab.txt" % (
          path, e))
  raise ImportRefused("%s has no %s (nor %s): add the model's vocab.txt" % (
      hf_dir, VOCAB_FILE, TOKENIZER_FILE))


def _do_lower_case(hf_dir):
  path = os.path.join(hf_dir, TOKENIZER_CONFIG)
  try:
    with open(path, encoding="utf-8") as f:
      value = json.load(f).get("do_lower_case")
  except (OSError, ValueError, AttributeError):
    return None
  return value if isinstance(value, bool) else None


def read_folder(hf_dir):
  """Folder of a transformers BERT directory, every check of the module docstring done (nothing
  is written). Raises ImportRefused; OSError when a file cannot be read."""
  if not os.path.isdir(hf_dir):
    raise ImportRefused("--hf_dir %s: no such directory" % hf_dir)
  config_path = os.path.join(hf_dir, CONFIG_FILE)
  if not os.path.isfile(config_path):
    raise ImportRefused("%s has no %s: not a transformers model folder" % (hf_dir, CONFIG_FILE))
  try:
    with open(config_path, encoding="utf-8") as f:
      hf_config = json.load(f)
  except ValueError as e:
    raise ImportRefused("%s is not valid JSON (%s)" % (config_path, e))
  if not isinstance(hf_config, dict):
    raise ImportRefused("%s is not a JSON object" % config_path)
  config = bert_config(hf_config, config_path)
  vocab, vocab_source = read_vocab(hf_dir)
  if len(vocab) > config.vocab_size:
    raise ImportRefused("%s has %d tokens, more than config.json's vocab_size %d" % (
        vocab_source, len(vocab), config.vocab_size))
  kind, paths = weight_files(hf_dir)
  tensors, dtypes = read_tensors(kind, paths)
  return Folder(hf_dir, config, hf_config, tensors, paths, dtypes, vocab, vocab_source,
                _do_lower_case(hf_dir))
