"""THE TFRecord feature spec of bert_fin: names, dtypes and lengths, defined once.

Used by the writer (data/writer.py), the tf.data input_fn (input/tfdata.py), the DALI input_fn
(input/dali.py), packing (data/packing/pack_files.py) and dynamic masking
(input/dynamic_masking.py). Nothing else may spell a feature name or length.

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

A PACKED record (tools/pack_records.py, data/packing/plans.py) holds up to K sequences
concatenated in one row of S tokens, with P' = max_predictions_per_pack; it is recognised by
`sequence_lens`:

  input_ids            int64 [S]  the sequences' tokens one after the other, 0-padded at the end
  segment_ids          int64 [S]  each sequence's own segment ids, concatenated, 0 padding
  sequence_lens        int64 [K]  length of the sequence in each slot, in token order; 0 = empty
                                  slot (empty slots come last)
  masked_lm_positions  int64 [P'] positions of the predicted tokens, absolute within the pack
  masked_lm_ids        int64 [P'] original token ids, 0-padded
  masked_lm_weights    float [P'] 1.0 for a real prediction, 0.0 for padding
  next_sentence_labels int64 [K]  each slot's label (google's convention), 0 for an empty slot

No masks or position tables are stored: the model derives sequence ids, the block-diagonal
attention mask and positions restarting at 0 from sequence_lens. Decoded, a packed example also
gets input_len = sum(sequence_lens) (the real tokens of the row), so code that counts real
tokens reads both layouts alike; next_sentence_labels keeps its [K] ([B, K]) shape.

A DYNAMIC-MASKING record (create_pretraining_data --masking=dynamic) holds each sequence once,
unmasked, with the word boundaries whole-word masking needs; the masks are drawn while training
(input/dynamic_masking.py), so it has no masked_lm_* features and is recognised by word_starts:

  input_ids            int64 [S]  the original token ids (nothing replaced), 0-padded
  input_len            int64 [1]  number of real tokens
  segment_ids          int64 [S]  as above
  word_starts          int64 [S]  per token: 1 (WORD_BEGINS) = the first token of a word, 0
                                  (WORD_CONTINUES) = a later token of the word begun before it,
                                  2 (NEVER_MASKED) = [CLS] / [SEP]; 0 padding. A word is a
                                  masking group: a jieba word (user dictionary included)
                                  word-pieced on its own, so it may mix CJK and Latin pieces
                                  (无创dna -> 无 创 dna) and holds a Latin word's ## pieces; the
                                  first token after [CLS]/[SEP] always begins a word (a word cut
                                  by truncation is a word of its own, as static masking groups it)
  next_sentence_labels int64 [1]  as above

One varint byte per token: the same size as segment_ids. Packed (tools/pack_records.py), a row
of dynamic records holds input_ids, segment_ids, word_starts [S] (each concatenated in slot
order), sequence_lens [K] and next_sentence_labels [K]: the packed layout less masked_lm_*.
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
SEQUENCE_LENS = "sequence_lens"
WORD_STARTS = "word_starts"

# word_starts values (dynamic-masking records)
WORD_CONTINUES = 0
WORD_BEGINS = 1
NEVER_MASKED = 2

INT64 = "int64"
FLOAT32 = "float32"

FeatureSpec = collections.namedtuple("FeatureSpec", ["name", "dtype", "length"])


def feature_specs(max_seq_length, max_predictions_per_seq, write_input_mask=False):
  """The FeatureSpecs of an unpacked static-masking record (see the module docstring).

  Args:
    max_seq_length: S, >= 3 ([CLS] x [SEP]).
    max_predictions_per_seq: P, >= 1.
    write_input_mask: also google's input_mask [S] (after input_ids).

  Returns:
    the ordered list of FeatureSpec a record holds (the writer's order).

  Raises:
    ValueError: a length below its minimum.
  """
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


def packed_feature_specs(max_seq_length, max_predictions_per_pack, max_sequences_per_pack):
  """The ordered FeatureSpecs of a packed record (see the module docstring).

  Args:
    max_seq_length: S, >= 3.
    max_predictions_per_pack: P', >= 1.
    max_sequences_per_pack: K, >= 1.

  Raises:
    ValueError: a length below its minimum.
  """
  if max_sequences_per_pack < 1:
    raise ValueError("max_sequences_per_pack must be >= 1, got %d" % max_sequences_per_pack)
  unpacked = {s.name: s for s in feature_specs(max_seq_length, max_predictions_per_pack)}
  return [unpacked[INPUT_IDS], unpacked[SEGMENT_IDS],
          FeatureSpec(SEQUENCE_LENS, INT64, max_sequences_per_pack),
          unpacked[MASKED_LM_POSITIONS], unpacked[MASKED_LM_IDS], unpacked[MASKED_LM_WEIGHTS],
          FeatureSpec(NEXT_SENTENCE_LABELS, INT64, max_sequences_per_pack)]


def dynamic_feature_specs(max_seq_length):
  """The ordered FeatureSpecs of a dynamic-masking record (see the module docstring).

  Raises:
    ValueError: max_seq_length < 3.
  """
  if max_seq_length < 3:
    raise ValueError("max_seq_length must be >= 3 ([CLS] x [SEP]), got %d" % max_seq_length)
  return [FeatureSpec(INPUT_IDS, INT64, max_seq_length), FeatureSpec(INPUT_LEN, INT64, 1),
          FeatureSpec(SEGMENT_IDS, INT64, max_seq_length),
          FeatureSpec(WORD_STARTS, INT64, max_seq_length),
          FeatureSpec(NEXT_SENTENCE_LABELS, INT64, 1)]


def packed_dynamic_feature_specs(max_seq_length, max_sequences_per_pack):
  """The ordered FeatureSpecs of a packed row of dynamic-masking records.

  Raises:
    ValueError: max_seq_length < 3 or max_sequences_per_pack < 1.
  """
  if max_sequences_per_pack < 1:
    raise ValueError("max_sequences_per_pack must be >= 1, got %d" % max_sequences_per_pack)
  unpacked = {s.name: s for s in dynamic_feature_specs(max_seq_length)}
  return [unpacked[INPUT_IDS], unpacked[SEGMENT_IDS], unpacked[WORD_STARTS],
          FeatureSpec(SEQUENCE_LENS, INT64, max_sequences_per_pack),
          FeatureSpec(NEXT_SENTENCE_LABELS, INT64, max_sequences_per_pack)]


RecordLayout = collections.namedtuple("RecordLayout", [
    "max_seq_length", "max_predictions_per_seq", "max_sequences_per_pack", "legacy_input_mask",
    "dynamic_masking"], defaults=(None, False, False))  # unpacked, bert_fin's input_len records
RecordLayout.__doc__ = """What a record file holds, read from one record (records are
self-describing): max_predictions_per_seq is P (P' for packed records; None for dynamic-masking
records, which hold no predictions), max_sequences_per_pack is K for packed records and None for
unpacked ones, legacy_input_mask is True for google's records (input_mask, no input_len),
dynamic_masking is True for records whose masks are drawn while training (word_starts)."""


def layout_of(feature_lengths, allow_dynamic=False):
  """Recognises the layout of one record from its feature lengths.

  Args:
    feature_lengths: {feature name: number of values} of one record.
    allow_dynamic: accept dynamic-masking records (a reader that draws their masks, or a tool
      that copies them).

  Returns:
    RecordLayout.

  Raises:
    ValueError: naming what is missing when the record is no layout; for dynamic-masking records
      saying so, unless allow_dynamic.
  """
  packed = SEQUENCE_LENS in feature_lengths
  if WORD_STARTS in feature_lengths and MASKED_LM_POSITIONS not in feature_lengths:
    if not allow_dynamic:
      raise ValueError(
          "dynamic-masking records (%s, no masked_lm_*: create_pretraining_data "
          "--masking=dynamic); this reader needs records whose masks were drawn at creation "
          "(--masking=static)" % WORD_STARTS)
    needed = [INPUT_IDS, SEGMENT_IDS, NEXT_SENTENCE_LABELS] + ([] if packed else [INPUT_LEN])
    _check_present(needed, feature_lengths)
    return RecordLayout(
        max_seq_length=feature_lengths[INPUT_IDS], max_predictions_per_seq=None,
        max_sequences_per_pack=feature_lengths[SEQUENCE_LENS] if packed else None,
        legacy_input_mask=False, dynamic_masking=True)
  needed = [INPUT_IDS, SEGMENT_IDS, MASKED_LM_POSITIONS, MASKED_LM_IDS, MASKED_LM_WEIGHTS,
            NEXT_SENTENCE_LABELS]
  if not packed and INPUT_LEN not in feature_lengths:
    needed.append(INPUT_MASK)
  _check_present(needed, feature_lengths)
  return RecordLayout(
      max_seq_length=feature_lengths[INPUT_IDS],
      max_predictions_per_seq=feature_lengths[MASKED_LM_POSITIONS],
      max_sequences_per_pack=feature_lengths[SEQUENCE_LENS] if packed else None,
      legacy_input_mask=not packed and INPUT_LEN not in feature_lengths)


def _check_present(needed, feature_lengths):
  missing = [name for name in needed if name not in feature_lengths]
  if missing:
    raise ValueError("not a pretraining record: feature(s) %s missing (has %s)"
                     % (", ".join(missing), ", ".join(sorted(feature_lengths))))


def layout_of_example(serialized_example, allow_dynamic=False):
  """RecordLayout of one serialized tf.train.Example (see layout_of).

  Raises:
    ValueError: as layout_of; google.protobuf's DecodeError for bytes that are no Example.
  """
  from tensorflow.core.example import example_pb2
  feature_map = example_pb2.Example.FromString(serialized_example).features.feature
  lengths = {}
  for name, feature in feature_map.items():
    kind = feature.WhichOneof("kind")
    lengths[name] = len(getattr(feature, kind).value) if kind else 0
  return layout_of(lengths, allow_dynamic)


def layout_specs(layout):
  """The specs an input pipeline parses for a RecordLayout.

  Args:
    layout: RecordLayout (layout_of_example).

  Returns:
    ordered list of FeatureSpec: packed, dynamic-masking, or read_specs of unpacked records.
  """
  if layout.dynamic_masking:
    if layout.max_sequences_per_pack:
      return packed_dynamic_feature_specs(layout.max_seq_length, layout.max_sequences_per_pack)
    return dynamic_feature_specs(layout.max_seq_length)
  if layout.max_sequences_per_pack:
    return packed_feature_specs(layout.max_seq_length, layout.max_predictions_per_seq,
                                layout.max_sequences_per_pack)
  return read_specs(layout.max_seq_length, layout.max_predictions_per_seq,
                    layout.legacy_input_mask)


def read_specs(max_seq_length, max_predictions_per_seq, legacy_input_mask=False):
  """The specs an input pipeline parses for unpacked static-masking records.

  Args:
    max_seq_length: S.
    max_predictions_per_seq: P.
    legacy_input_mask: google's records (input_mask, no input_len); otherwise bert_fin's
      records (input_len; an input_mask, if present, is ignored).

  Returns:
    ordered list of FeatureSpec.

  Raises:
    ValueError: as feature_specs.
  """
  specs = feature_specs(max_seq_length, max_predictions_per_seq, write_input_mask=legacy_input_mask)
  if legacy_input_mask:
    specs = [s for s in specs if s.name != INPUT_LEN]
  return specs


def tf_parsing_spec(max_seq_length, max_predictions_per_seq, legacy_input_mask=False):
  """{name: tf.io.FixedLenFeature} for tf.io.parse_single_example / parse_example."""
  return tf_feature_spec(read_specs(max_seq_length, max_predictions_per_seq, legacy_input_mask))


def tf_feature_spec(specs):
  """{name: tf.io.FixedLenFeature} of a list of FeatureSpecs (e.g. layout_specs(layout))."""
  import tensorflow.compat.v1 as tf
  dtypes = {INT64: tf.int64, FLOAT32: tf.float32}
  return collections.OrderedDict(
      (s.name, tf.io.FixedLenFeature([s.length], dtypes[s.dtype])) for s in specs)


def tf_decode_features(parsed):
  """Casts a parsed example (or batch) to the model's dtypes and derives input_len.

  Args:
    parsed: dict name -> int64/float32 tensor [..., length] from tf_parsing_spec.

  Returns:
    dict with int32 tensors (float32 stays float32); input_len has the [1] axis removed ([] per
    example, [B] batched); input_mask is dropped once input_len exists (the model builds its
    mask from input_len). A packed example gets input_len = sum(sequence_lens).
  """
  import tensorflow.compat.v1 as tf
  out = {}
  for name, tensor in parsed.items():
    out[name] = tf.cast(tensor, tf.int32) if tensor.dtype == tf.int64 else tensor
  if SEQUENCE_LENS in out:
    out[INPUT_LEN] = tf.reduce_sum(out[SEQUENCE_LENS], axis=-1, keepdims=True)
  elif INPUT_LEN not in out:
    out[INPUT_LEN] = tf.reduce_sum(out[INPUT_MASK], axis=-1, keepdims=True)
  out[INPUT_LEN] = tf.squeeze(out[INPUT_LEN], axis=-1)
  out.pop(INPUT_MASK, None)
  return out
