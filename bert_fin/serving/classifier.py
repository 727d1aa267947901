"""run_classifier's model as a servable tf.Module: raw text in, probabilities and labels out.

`ClassifierServing(spec, checkpoint, tokenizer)` builds google's classifier (finetune/classify/
model.py: BertModel, the pooling, output_weights / output_bias) once, restores it from the
fine-tuned checkpoint and exposes two tf.functions, the SavedModel's signatures:
  text(text[, text_b])  tf.string [B] (pairs: text_b too) -> the in-graph tokenizer
                        (graph_tokenizer.py) -> layout.py's [CLS] A [SEP] (B [SEP]), long texts
                        cut as the model was fine-tuned -> the outputs below, plus
                        truncated bool [B] (the text lost tokens) and num_tokens int32 [B];
  ids(input_ids, input_mask, segment_ids)  int32 [B, S] each, for clients that tokenize.
Outputs: probabilities float32 [B, L], logits float32 [B, L], label_index int32 [B] (argmax),
label tf.string [B] (its name). An empty text is [CLS] [SEP]: the model's answer for it.
A multi-label model (Spec.thresholds, run_classifier --multi_label's multi_label.json) has sigmoid
probabilities and multi_label.predict's rule in the graph: predicted bool [B, L] (every label
whose probability reaches its threshold; none reaching it: the most probable one), and label
tf.string [B] is the predicted names joined by multi_label.SEPARATOR ("外国 公司", the form of
its training label strings); label_index stays the most probable label.
`numeric` is the ids function with the float outputs only (what ONNX holds).
"""
import collections

import tensorflow as tf

from bert_fin.finetune.classify import model as classifier_model
from bert_fin.finetune.classify import multi_label
from bert_fin.serving import layout
from bert_fin.serving import restored_model
from bert_fin.tokenization import special_tokens as special

Spec = collections.namedtuple("Spec", [
    "bert_config", "labels", "pooling", "seq_length", "long_text", "pairs", "thresholds"])
Spec.__new__.__defaults__ = (None,)
Spec.__doc__ = """What the export serves: bert_config (modeling.BertConfig), labels (list of str,
the head's rows in order), pooling (model.POOLINGS), seq_length (S, the fine-tuning
--max_seq_length), long_text (long_text.Options the model was fine-tuned with), pairs (True: the
text signature takes text and text_b), thresholds (None: single-label; a multi-label model's
float [L] thresholds, multi_label.Thresholds.thresholds)."""

FLOAT_OUTPUTS = ("logits", "probabilities")


def _build(spec):
  def build(features):
    rows = tf.shape(features["input_len"])[:1]  # the loss's unused labels: [B] or [B, L]
    label_shape = rows if spec.thresholds is None else tf.concat([rows, [len(spec.labels)]], 0)
    features = dict(features, label_ids=tf.zeros(label_shape, tf.int32))
    _, _, logits, probabilities = classifier_model.create_model(
        spec.bert_config, False, features, len(spec.labels), spec.pooling,
        multi_label=spec.thresholds is not None)
    return {"logits": logits, "probabilities": probabilities}
  return build


class ClassifierServing(restored_model.Servable):
  """The servable classifier (module docstring).

  Args:
    spec: Spec.
    checkpoint: the fine-tuned checkpoint prefix.
    tokenizer: graph_tokenizer.GraphTokenizer of the model's vocab and casing.
    vocab: OrderedDict token -> id (for [CLS] and [SEP]).

  Raises:
    restored_model.RestoreError: the checkpoint lacks a variable or has it in another shape.
  """

  def __init__(self, spec, checkpoint, tokenizer, vocab):
    super().__init__("classifier", _build(spec), spec, checkpoint, tokenizer)
    self._labels = tf.constant(spec.labels)
    self._special = (vocab[special.CLS], vocab[special.SEP])
    specs = restored_model.input_specs(spec.seq_length)
    self.ids = tf.function(self._ids, input_signature=specs)
    self.numeric = tf.function(self._numeric, input_signature=specs)
    self.text = tf.function(self._text, input_signature=layout.text_specs(spec.pairs))

  def _numeric(self, input_ids, input_mask, segment_ids):
    outputs = self._model(input_ids, input_mask, segment_ids)
    return {name: outputs[name] for name in FLOAT_OUTPUTS}

  def _ids(self, input_ids, input_mask, segment_ids):
    outputs = self._numeric(input_ids, input_mask, segment_ids)
    index = tf.argmax(outputs["logits"], axis=-1, output_type=tf.int32)
    if self._spec.thresholds is None:
      return dict(outputs, label_index=index, label=tf.gather(self._labels, index))
    predicted = predicted_labels(outputs["probabilities"], self._spec.thresholds)
    names = tf.ragged.boolean_mask(
        tf.broadcast_to(self._labels, tf.shape(predicted)), predicted)
    return dict(outputs, label_index=index, predicted=predicted,
                label=tf.strings.reduce_join(names, axis=-1, separator=multi_label.SEPARATOR))

  def _text(self, text, text_b=None):
    inputs = layout.lay_out_texts(self.tokenizer, text, text_b, self._spec.seq_length,
                                  self._special, self._spec.long_text)
    outputs = self._ids(inputs["input_ids"], inputs["input_mask"], inputs["segment_ids"])
    return dict(outputs, truncated=inputs["truncated"], num_tokens=inputs["num_tokens"])


def predicted_labels(probabilities, thresholds):
  """multi_label.predict in the graph: bool [B, L] of probabilities float32 [B, L] and
  thresholds float [L], compared in float64 as multi_label.predict compares them."""
  probabilities = tf.cast(probabilities, tf.float64)
  over = probabilities >= tf.constant(thresholds, tf.float64)
  top = tf.one_hot(tf.argmax(probabilities, axis=-1), tf.shape(probabilities)[-1],
                   on_value=True, off_value=False)
  return over | (top & ~tf.reduce_any(over, axis=-1, keepdims=True))


def check_long_text(options):
  """ValueError (one line) for a model whose long texts cannot be served row by row."""
  if options.mode not in layout.SERVED_MODES:
    raise ValueError("the model was fine-tuned with --long_text=%s (windows pooled per text): "
                     "served are --long_text %s; fine-tune with one of them to export" % (
                         options.mode, ", ".join(layout.SERVED_MODES)))
  return options


