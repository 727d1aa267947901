"""google-research/bert variable names -> transformers' BERT state-dict names, stated once.

transformers' BertForPreTraining state dict (modeling_bert.py, checked against 4.57) for
num_hidden_layers = L:
  bert.embeddings.{word,position,token_type}_embeddings.weight, bert.embeddings.LayerNorm.{weight,bias}
  bert.encoder.layer.<i>.attention.self.{query,key,value}.{weight,bias}
  bert.encoder.layer.<i>.attention.output.dense.{weight,bias}, ...attention.output.LayerNorm.{weight,bias}
  bert.encoder.layer.<i>.intermediate.dense.{weight,bias}
  bert.encoder.layer.<i>.output.dense.{weight,bias}, ...output.LayerNorm.{weight,bias}
  bert.pooler.dense.{weight,bias}
  cls.predictions.bias, cls.predictions.transform.dense.{weight,bias},
  cls.predictions.transform.LayerNorm.{weight,bias}, cls.predictions.decoder.{weight,bias}
  cls.seq_relationship.{weight,bias}
BertForMaskedLM: the same without bert.pooler.* and cls.seq_relationship.* (built with
add_pooling_layer=False). BertForSequenceClassification (a run_classifier output): bert.* with the
pooler, and classifier.{weight [num_labels, H], bias [num_labels]} from google's output_weights
(already [num_labels, H]: google multiplies with transpose_b) and output_bias; no cls.*.
BertForTokenClassification (a run_ner output): bert.* without the pooler (transformers builds it
with add_pooling_layer=False) and classifier.{weight, bias} from ner/output_weights [num_labels,
H] and ner/output_bias. BertForQuestionAnswering (a run_squad output): bert.* without the pooler
and qa_outputs.{weight [2, H], bias [2]} from google's cls/squad/output_weights (already [2, H])
and cls/squad/output_bias: row 0 gives the start logits, row 1 the end logits, in both.
cls.predictions.decoder.weight is tied to the word embeddings and
cls.predictions.decoder.bias to cls.predictions.bias: transformers fills them itself
(`TIED_NAMES`), as its own save_pretrained leaves them out. position_ids is a non-persistent
buffer, absent from the state dict.

Mapping rules: "/" -> ".", layer_<i> -> layer.<i>, LayerNorm gamma/beta -> weight/bias,
embedding tables get ".weight", cls/predictions/output_bias -> cls.predictions.bias,
cls/seq_relationship/output_{weights,bias} -> cls.seq_relationship.{weight,bias}. Dense kernels are
[in, out] in TF and nn.Linear weights are [out, in]: every "kernel" is transposed;
cls/seq_relationship/output_weights is already [2, H] (google multiplies with transpose_b).
"""
import re

PRETRAINING = "BertForPreTraining"  # MLM + NSP heads (objective bert)
MASKED_LM = "BertForMaskedLM"  # MLM head only (objective roberta)
SEQUENCE_CLASSIFICATION = "BertForSequenceClassification"  # run_classifier's head
TOKEN_CLASSIFICATION = "BertForTokenClassification"  # run_ner's head
QUESTION_ANSWERING = "BertForQuestionAnswering"  # run_squad's head
ARCHITECTURES = (PRETRAINING, MASKED_LM, SEQUENCE_CLASSIFICATION, TOKEN_CLASSIFICATION,
                 QUESTION_ANSWERING)
CLASSIFIER_WEIGHTS, CLASSIFIER_BIAS = "output_weights", "output_bias"  # google's run_classifier
TAGGER_WEIGHTS, TAGGER_BIAS = "ner/output_weights", "ner/output_bias"  # run_ner (finetune/ner/model.py)
TAGGER_TRANSITIONS = "ner/transitions"  # run_ner --use_crf: no transformers equivalent
SPAN_WEIGHTS, SPAN_BIAS = "cls/squad/output_weights", "cls/squad/output_bias"  # google's run_squad

_LAYER_NAMES = (
    "attention.self.query.weight", "attention.self.query.bias",
    "attention.self.key.weight", "attention.self.key.bias",
    "attention.self.value.weight", "attention.self.value.bias",
    "attention.output.dense.weight", "attention.output.dense.bias",
    "attention.output.LayerNorm.weight", "attention.output.LayerNorm.bias",
    "intermediate.dense.weight", "intermediate.dense.bias",
    "output.dense.weight", "output.dense.bias",
    "output.LayerNorm.weight", "output.LayerNorm.bias",
)
_EMBEDDING_NAMES = (
    "bert.embeddings.word_embeddings.weight", "bert.embeddings.position_embeddings.weight",
    "bert.embeddings.token_type_embeddings.weight", "bert.embeddings.LayerNorm.weight",
    "bert.embeddings.LayerNorm.bias",
)
_POOLER_NAMES = ("bert.pooler.dense.weight", "bert.pooler.dense.bias")
_MLM_NAMES = (
    "cls.predictions.bias", "cls.predictions.transform.dense.weight",
    "cls.predictions.transform.dense.bias", "cls.predictions.transform.LayerNorm.weight",
    "cls.predictions.transform.LayerNorm.bias", "cls.predictions.decoder.weight",
    "cls.predictions.decoder.bias",
)
_NSP_NAMES = ("cls.seq_relationship.weight", "cls.seq_relationship.bias")
_CLASSIFIER_NAMES = ("classifier.weight", "classifier.bias")
_QA_NAMES = ("qa_outputs.weight", "qa_outputs.bias")

# Expected by transformers but filled by it from other tensors (weight tying): never written.
TIED_NAMES = frozenset(["cls.predictions.decoder.weight", "cls.predictions.decoder.bias"])

# (pattern, replacement) applied in order to a google name; the result must be a state-dict name.
_RULES = (
    (r"^cls/predictions/output_bias$", "cls.predictions.bias"),
    (r"^cls/seq_relationship/output_weights$", "cls.seq_relationship.weight"),
    (r"^cls/seq_relationship/output_bias$", "cls.seq_relationship.bias"),
    (r"^%s$" % CLASSIFIER_WEIGHTS, "classifier.weight"),
    (r"^%s$" % CLASSIFIER_BIAS, "classifier.bias"),
    (r"^%s$" % TAGGER_WEIGHTS, "classifier.weight"),
    (r"^%s$" % TAGGER_BIAS, "classifier.bias"),
    (r"^%s$" % SPAN_WEIGHTS, "qa_outputs.weight"),
    (r"^%s$" % SPAN_BIAS, "qa_outputs.bias"),
    (r"_embeddings$", "_embeddings/weight"),
    (r"/layer_(\d+)/", r"/layer/\1/"),
    (r"/(kernel|gamma)$", "/weight"),
    (r"/beta$", "/bias"),
    (r"/", "."),
)


def expected_shapes(config, architecture, num_labels=None):
  """{state-dict name: shape} of `architecture` for a BertConfig (tied names included);
  num_labels: the classifier's rows (BertForSequenceClassification only)."""
  if architecture not in ARCHITECTURES:
    raise ValueError("architecture must be one of %s, got %r" % (ARCHITECTURES, architecture))
  h, i, v = config.hidden_size, config.intermediate_size, config.vocab_size
  shapes = dict(zip(_EMBEDDING_NAMES, ([v, h], [config.max_position_embeddings, h],
                                      [config.type_vocab_size, h], [h], [h])))
  layer_shapes = dict(zip(_LAYER_NAMES, [[h, h], [h]] * 4 + [[h], [h], [i, h], [i], [h, i], [h],
                                                             [h], [h]]))
  for n in range(config.num_hidden_layers):
    shapes.update(("bert.encoder.layer.%d.%s" % (n, suffix), shape)
                  for suffix, shape in layer_shapes.items())
  if architecture == SEQUENCE_CLASSIFICATION:
    shapes.update(zip(_POOLER_NAMES + _CLASSIFIER_NAMES,
                      ([h, h], [h], [num_labels, h], [num_labels])))
    return shapes
  if architecture == TOKEN_CLASSIFICATION:
    shapes.update(zip(_CLASSIFIER_NAMES, ([num_labels, h], [num_labels])))
    return shapes
  if architecture == QUESTION_ANSWERING:
    shapes.update(zip(_QA_NAMES, ([2, h], [2])))
    return shapes
  shapes.update(zip(_MLM_NAMES, ([v], [h, h], [h], [h], [h], [v, h], [v])))
  if architecture == PRETRAINING:
    shapes.update(zip(_POOLER_NAMES + _NSP_NAMES, ([h, h], [h], [2, h], [2])))
  return shapes


def hf_name(google_name):
  """(transformers name, transpose: bool) for a google variable name."""
  name = google_name
  for pattern, replacement in _RULES:
    name = re.sub(pattern, replacement, name)
  return name, google_name.endswith("/kernel")


def architecture_for(google_names):
  """BertForSequenceClassification for run_classifier's head, BertForTokenClassification for
  run_ner's, BertForQuestionAnswering for run_squad's, BertForPreTraining when the checkpoint has
  the NSP head, else BertForMaskedLM."""
  if CLASSIFIER_WEIGHTS in google_names and CLASSIFIER_BIAS in google_names:
    return SEQUENCE_CLASSIFICATION
  if TAGGER_WEIGHTS in google_names and TAGGER_BIAS in google_names:
    return TOKEN_CLASSIFICATION
  if SPAN_WEIGHTS in google_names and SPAN_BIAS in google_names:
    return QUESTION_ANSWERING
  has_nsp = any(name.startswith("cls/seq_relationship/") for name in google_names)
  return PRETRAINING if has_nsp else MASKED_LM
