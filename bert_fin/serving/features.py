"""A pretrained checkpoint served as extract_features: the encoder's vectors of raw text or ids.

The export of `--kind=features` (export.py dispatches here): a checkpoint with its bert_config and
vocab, no fine-tuned head. The graph is extract_features' (finetune/features/encoder.py: BertModel,
is_training=False, google's variable names) and lays texts out as it does (inputs.py: [CLS] A
[SEP] (B [SEP]), a single text cut to its first S - 2 tokens, a pair by google's
_truncate_seq_pair).

Signatures of FeaturesServing:
  text(text[, text_b])  tf.string [B] each (text_b with Spec.pairs; an empty text_b: a single
                        text, as extract_features reads `a ||| ` );
  ids(input_ids, input_mask, segment_ids)  int32 [B, S] each.
Outputs (K = len(Spec.layers), H = hidden size):
  token_vectors  float32 [B, S, K, H]: token_vectors[b, t, k] is layer Spec.layers[k]'s vector
                 at position t (google's record: features[t].layers[k].values); positions past
                 the row's tokens hold the model's outputs there (input_mask says which are real);
  pooled_output  float32 [B, H]: BERT's pooler (tanh dense on [CLS]'s last-layer vector), only
                 when the checkpoint holds the pooler (bert/pooler/...; Spec.pooler);
the text signature adds tokens tf.string [B, S] (the WordPiece tokens, "" past the row),
input_mask int32 [B, S], truncated bool [B] and num_tokens int32 [B] (tokens before cutting).
extract_features' sentence vectors (--vectors_file, --pooling cls / mean) are
outputs.pooled_vectors of token_vectors[:, :, k] and input_mask's row sums.
"""
import collections

import tensorflow as tf

from bert_fin import modeling
from bert_fin import tokenization
from bert_fin.export import hf
from bert_fin.finetune.classify import long_text
from bert_fin.finetune.features import flags as features_flags
from bert_fin.modeling import checkpoint as checkpoint_lib
from bert_fin.modeling.checkpoint import variable_name
from bert_fin.records import schema as records
from bert_fin.serving import deploy_files
from bert_fin.serving import layout
from bert_fin.serving import restored_model
from bert_fin.tokenization import special_tokens as special

KIND = "features"
PROGRAM_SETTINGS = features_flags.Settings  # the program served: its flags' defaults
POOLER = "bert/pooler/"
FLOAT_OUTPUTS = ("token_vectors", "pooled_output")

Spec = collections.namedtuple("Spec", ["bert_config", "layers", "seq_length", "pairs", "pooler"])
Spec.__doc__ = """What a features export serves: bert_config (modeling.BertConfig), layers (list of
int, extract_features' --layers), seq_length (S), pairs (the text signature takes text_b),
pooler (the checkpoint holds BERT's pooler: pooled_output is served)."""


def encoder_shapes(bert_config):
  """{google variable name: shape list} of BertModel's variables (pooler included), read from a
  throwaway graph."""
  with tf.Graph().as_default():
    features = restored_model.features_of(*[
        tf.compat.v1.placeholder(tf.int32, [None, 2]) for _ in restored_model.INPUT_NAMES])
    _model(bert_config, features)
    return {variable_name(v): v.shape.as_list()
            for v in tf.compat.v1.global_variables()}


def _model(bert_config, features):
  return modeling.BertModel(config=bert_config, is_training=False,
                            input_ids=features[records.INPUT_IDS],
                            input_len=features[records.INPUT_LEN],
                            token_type_ids=features[records.SEGMENT_IDS])


def check(request):
  """(checkpoint prefix, Spec) of a features request (export.Request: finetuned_dir names the
  pretrained checkpoint, a prefix or a directory; layers is extract_features' --layers).

  Raises:
    ValueError (one line): no checkpoint there, a config or vocab that does not fit it, layers
      outside the model, --do_lower_case against google's model name, encoder variables missing
      or of another shape.
  """
  source = request.finetuned_dir
  checkpoint = checkpoint_lib.resolve_checkpoint(source)
  if checkpoint is None or not tf.io.gfile.glob(checkpoint + ".index"):
    raise ValueError("--init_checkpoint %s: no checkpoint there (a prefix such as "
                     "model.ckpt-1000, or a directory holding one)" % source)
  config = hf.read_config(request.bert_config_file)
  if not 3 <= request.max_seq_length <= config.max_position_embeddings:
    raise ValueError("--max_seq_length %d: must be 3..%d (max_position_embeddings of %s)" % (
        request.max_seq_length, config.max_position_embeddings, request.bert_config_file))
  layers = features_flags.parse_layers(request.layers)
  features_flags.check_layers(layers, config.num_hidden_layers, request.layers)
  hf.check_vocab(request.vocab_file, config, request.do_lower_case)  # padded vocab_size: valid
  tokenization.validate_case_matches_checkpoint(request.do_lower_case, checkpoint)
  try:
    saved = dict(tf.train.list_variables(checkpoint))
  except (tf.errors.OpError, ValueError) as e:
    raise ValueError("--init_checkpoint %s: cannot read checkpoint (%s)" % (
        checkpoint, str(e).splitlines()[0])) from None
  shapes = encoder_shapes(config)
  missing = sorted(n for n in shapes if n not in saved and not n.startswith(POOLER))
  reshaped = ["%s (model %s, checkpoint %s)" % (n, shapes[n], saved[n])
              for n in sorted(shapes) if n in saved and list(saved[n]) != shapes[n]]
  if missing or reshaped:
    raise ValueError("--init_checkpoint %s does not fit --bert_config_file %s: %s" % (
        checkpoint, request.bert_config_file,
        "%d encoder variable(s) missing (%s)" % (len(missing), ", ".join(missing[:3]))
        if missing else "%d of another shape: %s" % (len(reshaped), "; ".join(reshaped[:3]))))
  pooler = all(n in saved for n in shapes if n.startswith(POOLER))
  return checkpoint, Spec(config, layers, request.max_seq_length, request.text_pairs, pooler)


def _build(spec):
  def build(features):
    model = _model(spec.bert_config, features)
    every_layer = model.get_all_encoder_layers()
    outputs = {"token_vectors": tf.stack([every_layer[k] for k in spec.layers], axis=2)}
    if spec.pooler:
      outputs["pooled_output"] = model.get_pooled_output()
    return outputs
  return build


class FeaturesServing(restored_model.Servable):
  """The servable encoder (module docstring).

  Args:
    spec: Spec.
    checkpoint: the pretrained checkpoint prefix.
    tokenizer: graph_tokenizer.GraphTokenizer of the model's vocab and casing.
    vocab: OrderedDict token -> id.

  Raises:
    restored_model.RestoreError: the checkpoint lacks an encoder variable or has it in another
      shape.
  """

  def __init__(self, spec, checkpoint, tokenizer, vocab):
    super().__init__("features", _build(spec), spec, checkpoint, tokenizer,
                     skip=() if spec.pooler else (POOLER,))
    self._tokens = tf.constant(_id_to_token(vocab))
    self._special = (vocab[special.CLS], vocab[special.SEP])
    specs = restored_model.input_specs(spec.seq_length)
    self.ids = tf.function(self._numeric, input_signature=specs)
    self.numeric = self.ids
    self.text = tf.function(self._text, input_signature=layout.text_specs(spec.pairs))

  def _numeric(self, input_ids, input_mask, segment_ids):
    outputs = self._model(input_ids, input_mask, segment_ids)
    return {name: outputs[name] for name in FLOAT_OUTPUTS if name in outputs}

  def _text(self, text, text_b=None):
    inputs = layout.lay_out_texts(self.tokenizer, text, text_b, self._spec.seq_length,
                                  self._special, long_text.DEFAULT)
    outputs = self._numeric(inputs["input_ids"], inputs["input_mask"], inputs["segment_ids"])
    tokens = tf.where(inputs["input_mask"] > 0, tf.gather(self._tokens, inputs["input_ids"]), "")
    return dict(outputs, tokens=tokens, input_mask=inputs["input_mask"],
                truncated=inputs["truncated"], num_tokens=inputs["num_tokens"])


def _id_to_token(vocab):
  """[str] indexed by id (ids a vocab does not use: "")."""
  tokens = [""] * (max(vocab.values()) + 1)
  for token, index in vocab.items():
    tokens[index] = token
  return tokens


def outputs_of(spec):
  """The text signature's output names, in the order docs/serving.md lists them."""
  return [n for n in FLOAT_OUTPUTS if spec.pooler or n != "pooled_output"] + [
      "tokens", "input_mask", "truncated", "num_tokens"]


def config_record(spec):
  """serving_config.json's kind-specific fields."""
  return {"kind": KIND, "layers": list(spec.layers), "pooler": bool(spec.pooler),
          "hidden_size": spec.bert_config.hidden_size, "outputs": outputs_of(spec),
          "long_text": {"long_text": long_text.HEAD}}


def triton_configs(spec, text_signature):
  """{model name: config.pbtxt text}: the SavedModel's text signature and the ONNX ids graph."""
  hidden, seq = spec.bert_config.hidden_size, spec.seq_length
  floats = [("token_vectors", "TYPE_FP32", [seq, len(spec.layers), hidden])] + (
      [("pooled_output", "TYPE_FP32", [hidden])] if spec.pooler else [])
  texts = [("text", "TYPE_STRING", [])] + ([("text_b", "TYPE_STRING", [])] if spec.pairs else [])
  ids = [(name, "TYPE_INT32", [seq]) for name in restored_model.INPUT_NAMES]
  return {
      "bert_fin_text": deploy_files.triton_config(
          "bert_fin_text", "tensorflow_savedmodel", texts,
          floats + [("tokens", "TYPE_STRING", [seq]), ("input_mask", "TYPE_INT32", [seq]),
                    ("truncated", "TYPE_BOOL", []), ("num_tokens", "TYPE_INT32", [])],
          signature=text_signature),
      "bert_fin_onnx": deploy_files.triton_config("bert_fin_onnx", "onnxruntime_onnx", ids,
                                                  floats),
  }

