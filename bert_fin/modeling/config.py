"""BertConfig: the model hyper-parameters; fields, defaults and JSON form as google-research/bert.

A config file written by google's `BertConfig.to_json_string` (e.g. bert_config.json of a released
checkpoint) loads here unchanged, and ours loads in google's code.
"""
import copy
import json
import numbers

_FIELDS = ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads",
           "intermediate_size", "hidden_act", "hidden_dropout_prob",
           "attention_probs_dropout_prob", "max_position_embeddings", "type_vocab_size",
           "initializer_range")
_SIZES = ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads",
          "intermediate_size", "max_position_embeddings", "type_vocab_size")


class BertConfig(object):
  """Configuration for `BertModel`.

  Args:
    vocab_size: size of the `input_ids` vocabulary.
    hidden_size: width H of the encoder layers and the pooler.
    num_hidden_layers: number of transformer layers.
    num_attention_heads: attention heads per layer; must divide hidden_size.
    intermediate_size: width of the feed-forward ("intermediate") layer.
    hidden_act: non-linearity of the feed-forward layer and the MLM transform ("gelu": google's
      tanh approximation, "gelu_erf": the exact GELU of transformers' "gelu" (imported models),
      "relu", "tanh", "linear").
    hidden_dropout_prob: dropout on embeddings, attention output and layer output.
    attention_probs_dropout_prob: dropout on the attention probabilities.
    max_position_embeddings: rows of the position embedding table (max sequence length).
    type_vocab_size: rows of the token type (segment) table.
    initializer_range: stddev of the truncated-normal initializer of every weight matrix.
  """

  def __init__(self,
               vocab_size,
               hidden_size=768,
               num_hidden_layers=12,
               num_attention_heads=12,
               intermediate_size=3072,
               hidden_act="gelu",
               hidden_dropout_prob=0.1,
               attention_probs_dropout_prob=0.1,
               max_position_embeddings=512,
               type_vocab_size=16,
               initializer_range=0.02):
    self.vocab_size = vocab_size
    self.hidden_size = hidden_size
    self.num_hidden_layers = num_hidden_layers
    self.num_attention_heads = num_attention_heads
    self.hidden_act = hidden_act
    self.intermediate_size = intermediate_size
    self.hidden_dropout_prob = hidden_dropout_prob
    self.attention_probs_dropout_prob = attention_probs_dropout_prob
    self.max_position_embeddings = max_position_embeddings
    self.type_vocab_size = type_vocab_size
    self.initializer_range = initializer_range

  @classmethod
  def from_dict(cls, json_object):
    """Builds a config from a dict.

    Like google, unknown keys are kept as attributes (released configs carry extra keys such as
    "directionality").

    Args:
      json_object: dict of fields; `vocab_size` is required, missing fields keep the defaults.

    Returns:
      BertConfig (not validated: see validate).

    Raises:
      ValueError: json_object is not a dict, or has no vocab_size.
    """
    if not isinstance(json_object, dict):
      raise ValueError("BertConfig.from_dict needs a dict, got %s" % type(json_object).__name__)
    if "vocab_size" not in json_object:
      raise ValueError("BertConfig: 'vocab_size' is missing (keys: %s)" % sorted(json_object))
    config = BertConfig(vocab_size=None)
    for key, value in json_object.items():
      config.__dict__[key] = value
    return config

  @classmethod
  def from_json_file(cls, json_file):
    """Reads a config from a JSON file (google's bert_config.json format), as untrusted input.

    Args:
      json_file: path of the file: a regular file of at most 4 MiB nested at most
        guard/untrusted.py's MAX_JSON_DEPTH deep (a FIFO never blocks, a deep file never
        recurses).

    Returns:
      BertConfig (see from_dict).

    Raises:
      ValueError: one line, when the file cannot be read, is not such a JSON object, or from_dict
        rejects it.
    """
    from bert_fin.guard import untrusted  # pylint: disable=import-outside-toplevel
    data = untrusted.read_bytes(json_file, 4 << 20, what="bert_config.json")
    return cls.from_dict(untrusted.parse_json(data, "BertConfig: %s" % json_file))

  def to_dict(self):
    """A deep copy of the attributes as a dict."""
    return copy.deepcopy(self.__dict__)

  def to_json_string(self):
    """google's JSON form: indent 2, sorted keys, trailing newline."""
    return json.dumps(self.to_dict(), indent=2, sort_keys=True) + "\n"

  def validate(self):
    """Checks that the config can build a model (called by BertModel).

    Raises:
      ValueError: a field is unset, or hidden_size is not a multiple of num_attention_heads.
    """
    for name in _FIELDS:
      if getattr(self, name, None) is None:
        raise ValueError("BertConfig.%s is not set" % name)
    for name in _SIZES:  # a config file is outside input: "100", 32.0, true or 0 are refused here
      value = getattr(self, name)
      if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
        raise ValueError("BertConfig.%s is %s: it must be an integer >= 1" % (
            name, repr(value)[:60]))
    if self.hidden_size % self.num_attention_heads != 0:
      raise ValueError("The hidden size (%d) is not a multiple of the number of attention heads "
                       "(%d)" % (self.hidden_size, self.num_attention_heads))


def read_config_for(config_file, max_seq_length):
  """Reads --bert_config_file, checked for a program reading sequences of max_seq_length tokens.

  Shared by run_pretraining, run_classifier and run_ner.

  Args:
    config_file: the path of --bert_config_file.
    max_seq_length: the program's --max_seq_length.

  Returns:
    the validated BertConfig.

  Raises:
    ValueError: one line naming the flag: unreadable or invalid file, or max_seq_length longer
      than the model's max_position_embeddings (google's message).
  """
  try:
    config = BertConfig.from_json_file(config_file)
    config.validate()
  except (OSError, ValueError) as e:
    raise ValueError("--bert_config_file %s: %s" % (config_file, e)) from e
  if max_seq_length > config.max_position_embeddings:
    raise ValueError("Cannot use sequence length %d because the BERT model was only trained up "
                     "to sequence length %d" % (max_seq_length, config.max_position_embeddings))
  return config
