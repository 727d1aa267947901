"""THE TFRecord feature spec of bert_fin: names, dtypes and lengths, defined once.

Used by the writer (data/writer.py), the tf.data input_fn (input/tfdata.py), the DALI input_fn
(input/dali.py) and, later, packing. Nothing else may spell a feature name or length.

A record is a `tf.train.Example` holding, for max_seq_length S and max_predictions_per_seq P:

  input_ids            int64 [S]  token ids, 0-padded after the real tokens
  input_len            int64 [1]  number of real tokens (replaces google's input_mask)
  segment_ids          int64 [S]  0 for sentence A (and [CLS]), 1 for sentence B, 0 padding
  masked_lm_positions  int64 [P]  positions of the predicted tokens, 0-padded
  masked_lm_ids        int64 [P]  original token ids at those positions, 0-padded
  masked_lm_weights    float [P]  1.0 for a real prediction, 0.0 for padding
  next_sentence_labels int64 [1]  google's convention: 0 = B is the real next sentence, 1 = random
                                  (always 0 for the RoBERTa objective)
  input_mask           int64 [S]  only with --write_input_mask (google compatibility): 1 then 0

Old google-style records (input_mask, no input_len) are read too: input_len = sum(input_mask).
After decoding, each example is a dict of int32 tensors (float32 for masked_lm_weights):
input_len has shape [] (batched: [B]); next_sentence_labels keeps google's shape [1] ([B, 1]).
"""
import collections

INPUT_IDS = "input_ids"
INPUT_LEN = "input_len"
INPUT_MASK = "input_mask"
SEGMENT_IDS = "segment_ids"
MASKED_LM_POSITIONS = "masked_lm_positions"
MASKED_LM_IDS = "masked_lm_ids"
MASKED_LM_WEIGHTS = "masked_lm_weights"
NEXT_SENTENCE_LABELS = "next_sentence_labels"

INT64 = "int64"
FLOAT32 = "float32"

FeatureSpec = collections.namedtuple("FeatureSpec", ["name", "dtype", "length"])


def feature_specs(max_seq_length, max_predictions_per_seq, write_input_mask=False):
  """Returns the ordered list of FeatureSpec a record holds (the writer's order)."""
  if max_seq_length < 3:
    raise ValueError("max_seq_length must be >= 3 ([CLS] x [SEP]), got %d" % max_seq_length)
  if max_predictions_per_seq < 1:
    raise ValueError("max_predictions_per_seq must be >= 1, got %d" % max_predictions_per_seq)
  specs = [FeatureSpec(INPUT_IDS, INT64, max_seq_length)]
  if write_input_mask:
    specs.append(FeatureSpec(INPUT_MASK, INT64, max_seq_length))
  specs += [
      FeatureSpec(INPUT_LEN, INT64, 1),
      FeatureSpec(SEGMENT_IDS, INT64, max_seq_length),
      FeatureSpec(MASKED_LM_POSITIONS, INT64, max_predictions_per_seq),
      FeatureSpec(MASKED_LM_IDS, INT64, max_predictions_per_seq),
      FeatureSpec(MASKED_LM_WEIGHTS, FLOAT32, max_predictions_per_seq),
      FeatureSpec(NEXT_SENTENCE_LABELS, INT64, 1),
  ]
  return specs


def read_specs(max_seq_length, max_predictions_per_seq, legacy_input_mask=False):
  """The specs an input pipeline parses: with legacy_input_mask, google's records (input_mask, no
  input_len); otherwise bert_fin's records (input_len; an input_mask, if present, is ignored)."""
  specs = feature_specs(max_seq_length, max_predictions_per_seq, write_input_mask=legacy_input_mask)
  if legacy_input_mask:
    specs = [s for s in specs if s.name != INPUT_LEN]
  return specs


def tf_parsing_spec(max_seq_length, max_predictions_per_seq, legacy_input_mask=False):
  """{name: tf.io.FixedLenFeature} for tf.io.parse_single_example / parse_example."""
  import tensorflow.compat.v1 as tf
  dtypes = {INT64: tf.int64, FLOAT32: tf.float32}
  return collections.OrderedDict(
      (s.name, tf.io.FixedLenFeature([s.length], dtypes[s.dtype]))
      for s in read_specs(max_seq_length, max_predictions_per_seq, legacy_input_mask))


def tf_decode_features(parsed):
  """Casts a parsed example (or batch) to the model's dtypes and derives input_len.

  parsed: dict name -> int64/float32 tensor [..., length] from tf_parsing_spec.
  Returns dict with int32 tensors; input_len has the [1] axis removed ([] per example, [B] batched);
  input_mask is dropped once input_len exists (the model builds its mask from input_len).
  """
  import tensorflow.compat.v1 as tf
  out = {}
  for name, tensor in parsed.items():
    out[name] = tf.cast(tensor, tf.int32) if tensor.dtype == tf.int64 else tensor
  if INPUT_LEN not in out:
    out[INPUT_LEN] = tf.reduce_sum(out[INPUT_MASK], axis=-1, keepdims=True)
  out[INPUT_LEN] = tf.squeeze(out[INPUT_LEN], axis=-1)
  out.pop(INPUT_MASK, None)
  return out
