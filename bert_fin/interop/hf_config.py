"""A transformers config.json, checked as untrusted input -> google's BertConfig fields, and the
budget it justifies for the weight files (no TensorFlow, no PyTorch).

  fields = google_fields(hf_config, config_path, ceilings)   # {BertConfig field: value}
  budget = weights_budget(fields, config_path)                # untrusted.Budget

What is refused (Refused, one line naming config.json):
  model_type other than bert (roberta, xlm-roberta, ...: positions offset by padding_idx + 1 and
  other names); position_embedding_type other than absolute; layer_norm_eps other than google's
  1e-12 (the only epsilon bert_fin's layer norm has); a decoder or cross-attention; a hidden_act
  without a bert_fin equivalent (HIDDEN_ACT: transformers' "gelu" is the exact erf GELU ->
  "gelu_erf"; "gelu_new", "gelu_pytorch_tanh", "gelu_fast" are google's tanh form -> "gelu").
  Types and ranges: SIZE_FIELDS are integers (not bools, floats or strings) >= 1, hidden_size a
  multiple of num_attention_heads; dropout probabilities numbers in [0, 1); initializer_range a
  positive finite number.
  Ceilings (Ceilings; tools/import_hf.py --max_layers / --max_parameters raise them):
  num_hidden_layers <= max_layers (the model's graph is built a layer at a time), and the
  parameters the sizes imply (parameter_count) <= max_parameters, which bounds the width,
  intermediate size, vocab, positions and token types too (each is a factor of a weight matrix).
Fields missing from an older config.json take transformers' BertConfig defaults (HF_DEFAULTS).

The budget: the weight files together may hold 2x the parameters config.json implies plus 2^20
elements (a tied decoder stored twice, a fine-tuning head, position_ids buffers), at most 8 bytes
each (float64); a .bin pickle, a safetensors header, a shard index or a zip directory at most
1 MiB plus 4 KiB (pickle) / 2 KiB (the others) per tensor a BERT of that depth has. So nothing a
file claims can make the import allocate more than a small multiple of the model's float32 size.
"""
import collections
import math

from bert_fin.guard import untrusted

# transformers' hidden_act -> bert_fin's (the inverse of export/hf.py's table, plus the other
# names of the tanh GELU); tests/test_import_bounds.py checks that they agree.
HIDDEN_ACT = {"gelu": "gelu_erf", "gelu_new": "gelu", "gelu_pytorch_tanh": "gelu",
              "gelu_fast": "gelu", "relu": "relu", "tanh": "tanh", "linear": "linear"}
LAYER_NORM_EPSILON = 1e-12  # google's (modeling/layers.py), the only one bert_fin has
# transformers' BertConfig defaults, for fields an older config.json leaves out.
HF_DEFAULTS = {"vocab_size": 30522, "hidden_size": 768, "num_hidden_layers": 12,
               "num_attention_heads": 12, "intermediate_size": 3072, "hidden_act": "gelu",
               "hidden_dropout_prob": 0.1, "attention_probs_dropout_prob": 0.1,
               "max_position_embeddings": 512, "type_vocab_size": 2, "initializer_range": 0.02,
               "layer_norm_eps": 1e-12, "position_embedding_type": "absolute"}
GOOGLE_FIELDS = ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads",
                 "intermediate_size", "hidden_act", "hidden_dropout_prob",
                 "attention_probs_dropout_prob", "max_position_embeddings", "type_vocab_size",
                 "initializer_range")  # BertConfig's, in its order
SIZE_FIELDS = ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads",
               "intermediate_size", "max_position_embeddings", "type_vocab_size")
PROBABILITY_FIELDS = ("hidden_dropout_prob", "attention_probs_dropout_prob")
TENSORS_PER_LAYER, OTHER_TENSORS = 16, 16  # a BertForPreTraining's state dict, and a margin

Ceilings = collections.namedtuple("Ceilings", ["max_parameters", "max_layers"])
Ceilings.__doc__ = """The largest model an import accepts: parameters (all weights of BERT with
its pretraining heads, what config.json's sizes imply) and layers."""
DEFAULT_CEILINGS = Ceilings(max_parameters=10 ** 9, max_layers=128)  # bert-large: 0.34e9, 24
RAISE_HINT = ("a larger model: import it with tools/import_hf.py --max_parameters=N / "
              "--max_layers=N")
Refused = untrusted.Refused


def _is_int(value):
  return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value):
  return (isinstance(value, (int, float)) and not isinstance(value, bool)
          and math.isfinite(value))


def _check_names(c, path):
  """model_type, position_embedding_type, layer_norm_eps, decoder flags, hidden_act."""
  for name in ("model_type", "position_embedding_type", "hidden_act"):
    if not isinstance(c[name], str):
      raise Refused("%s: %s %s is not a string" % (path, name, untrusted.quote(c[name])))
  if c["model_type"] != "bert":
    raise Refused("%s: model_type %s is not supported, only bert (RoBERTa folders offset "
                  "positions by padding_idx + 1 and name weights roberta.*; hfl's "
                  "chinese-roberta-wwm-ext is model_type bert and imports)" % (
                      path, untrusted.quote(c["model_type"])))
  if c["position_embedding_type"] != "absolute":
    raise Refused("%s: position_embedding_type %s is not supported (bert_fin has google's "
                  "absolute position embeddings only)" % (
                      path, untrusted.quote(c["position_embedding_type"])))
  if not _is_number(c["layer_norm_eps"]):
    raise Refused("%s: layer_norm_eps %s is not a number" % (
        path, untrusted.quote(c["layer_norm_eps"])))
  if float(c["layer_norm_eps"]) != LAYER_NORM_EPSILON:
    raise Refused("%s: layer_norm_eps %g is not supported (bert_fin's layer norm uses google's "
                  "%g; the outputs would differ)" % (path, c["layer_norm_eps"],
                                                     LAYER_NORM_EPSILON))
  for flag in ("is_decoder", "add_cross_attention"):
    if c.get(flag):
      raise Refused("%s: %s is set: a decoder is not supported" % (path, flag))
  if c["hidden_act"] not in HIDDEN_ACT:
    raise Refused("%s: hidden_act %s has no bert_fin equivalent (supported: %s)" % (
        path, untrusted.quote(c["hidden_act"]), ", ".join(sorted(HIDDEN_ACT))))


def _check_numbers(c, path):
  """Types and ranges of the sizes, probabilities and initializer_range."""
  for name in SIZE_FIELDS:
    if not _is_int(c[name]):
      raise Refused("%s: %s %s is not an integer" % (path, name, untrusted.quote(c[name])))
    if c[name] < 1:
      raise Refused("%s: %s is %d, it must be at least 1" % (path, name, c[name]))
  if c["hidden_size"] % c["num_attention_heads"]:
    raise Refused("%s: hidden_size %d is not a multiple of num_attention_heads %d" % (
        path, c["hidden_size"], c["num_attention_heads"]))
  for name in PROBABILITY_FIELDS:
    if not _is_number(c[name]) or not 0 <= c[name] < 1:
      raise Refused("%s: %s %s is not a probability in [0, 1)" % (
          path, name, untrusted.quote(c[name])))
  if not _is_number(c["initializer_range"]) or c["initializer_range"] <= 0:
    raise Refused("%s: initializer_range %s is not a positive number" % (
        path, untrusted.quote(c["initializer_range"])))


def parameter_count(fields):
  """Parameters of BERT with both pretraining heads for these sizes (google's variables:
  embeddings, L layers, pooler, masked-LM transform and bias, next-sentence classifier)."""
  h, i, v = fields["hidden_size"], fields["intermediate_size"], fields["vocab_size"]
  embeddings = (v + fields["max_position_embeddings"] + fields["type_vocab_size"]) * h + 2 * h
  layer = 4 * (h * h + h) + 2 * h + (h * i + i) + (i * h + h) + 2 * h
  heads = (h * h + h) + (h * h + h + 2 * h + v) + (2 * h + 2)
  return embeddings + fields["num_hidden_layers"] * layer + heads


def check_ceilings(fields, path, ceilings):
  """Refused when the model is larger than ceilings allow (before anything is read or built)."""
  if fields["num_hidden_layers"] > ceilings.max_layers:
    raise Refused("%s: num_hidden_layers %d is more than the ceiling of %d layers (%s)" % (
        path, fields["num_hidden_layers"], ceilings.max_layers, RAISE_HINT))
  parameters = parameter_count(fields)
  if parameters > ceilings.max_parameters:
    raise Refused("%s: its sizes make %d parameters (%s in float32), more than the ceiling of "
                  "%d (%s)" % (path, parameters, untrusted.size_text(4 * parameters),
                               ceilings.max_parameters, RAISE_HINT))


def google_fields(hf_config, path, ceilings=DEFAULT_CEILINGS):
  """{BertConfig field: value} of a config.json dict (hidden_act bert_fin's), every check of the
  module docstring done; Refused (one line naming path) otherwise."""
  if not isinstance(hf_config, dict):
    raise Refused("%s is not a JSON object" % path)
  c = dict(HF_DEFAULTS, model_type="bert")
  c.update((k, v) for k, v in hf_config.items() if v is not None)
  _check_names(c, path)
  _check_numbers(c, path)
  fields = {name: c[name] for name in GOOGLE_FIELDS}
  fields["hidden_act"] = HIDDEN_ACT[c["hidden_act"]]
  check_ceilings(fields, path, ceilings)
  return fields


def expected_tensors(fields):
  """Tensors a BertForPreTraining of this depth has, with a margin."""
  return TENSORS_PER_LAYER * fields["num_hidden_layers"] + OTHER_TENSORS


def weights_budget(fields, path):
  """untrusted.Budget of the weight files of a model of these (checked) fields (docstring)."""
  elements = 2 * parameter_count(fields) + (1 << 20)
  tensors = expected_tensors(fields)
  return untrusted.Budget(elements=elements, nbytes=8 * elements,
                          pickle_bytes=untrusted.MiB + 4096 * tensors,
                          header_bytes=untrusted.MiB + 2048 * tensors,
                          entries=2 * tensors + 64, source=path)
