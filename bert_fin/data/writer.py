"""TFRecord output of create_pretraining_data: a hand-encoded tf.train.Example and sharded files.

`ExampleEncoder` serialises an instance to the exact protobuf wire format of a tf.train.Example
holding the features of data/records.feature_specs (packed int64/float lists, in spec order); it is
~10x cheaper than building tf.train.Example objects and is tested to parse identically with
tf.io.parse_single_example. `ShardedRecordWriter` writes TFRecord framing (length, masked crc32c)
round-robin over its files, each written to a temp name and renamed when the writer closes cleanly
(bert_fin/io_utils.atomic_path), so a killed run never leaves a half file under a final name.
No TensorFlow import is needed to write.
"""
import os
import struct

import crc32c

from bert_fin import io_utils
from bert_fin.data import records


def _varint(value):
  out = bytearray()
  while True:
    bits = value & 0x7F
    value >>= 7
    if value:
      out.append(bits | 0x80)
    else:
      out.append(bits)
      return bytes(out)


def _length_delimited(field_number, payload):
  return _varint(field_number << 3 | 2) + _varint(len(payload)) + payload


class ExampleEncoder(object):
  """Encodes padded feature values to serialized tf.train.Example bytes.

  max_value: the largest int that will be encoded (e.g. max(vocab_size, max_seq_length)); ints are
  looked up in a precomputed varint table. Ints must be 0 <= v <= max_value.
  """

  def __init__(self, max_seq_length, max_predictions_per_seq, write_input_mask=False,
               max_value=1 << 16):
    self.specs = records.feature_specs(max_seq_length, max_predictions_per_seq, write_input_mask)
    self.max_seq_length = max_seq_length
    self.max_predictions_per_seq = max_predictions_per_seq
    self.write_input_mask = write_input_mask
    # ints and every length prefix are looked up (lengths stay < 2**16 for S, P <= 4096)
    self._varints = [_varint(v) for v in range(max(max_value, 1 << 16) + 1)]
    self._key = {s.name: b"\x0a" + _varint(len(s.name)) + s.name.encode("utf-8") + b"\x12"
                 for s in self.specs}  # map entry: key field 1, then value field 2's tag
    self._kind = {s.name: b"\x12" if s.dtype == records.FLOAT32 else b"\x1a"
                  for s in self.specs}  # Feature.float_list = 2, Feature.int64_list = 3
    self._names = [s.name for s in self.specs]
    self._precompute_entries()

  def _int_feature(self, values):
    table = self._varints
    packed = b"".join([table[v] for v in values])
    return _length_delimited(3, _length_delimited(1, packed))  # Feature.int64_list{value}

  @staticmethod
  def _float_feature(values):
    packed = struct.pack("<%df" % len(values), *values)
    return _length_delimited(2, _length_delimited(1, packed))  # Feature.float_list{value}

  def encode_features(self, features):
    """features: {name: list of numbers of the spec's length} -> serialized Example bytes."""
    entries = []
    for spec in self.specs:
      values = features[spec.name]
      if len(values) != spec.length:
        raise ValueError("feature %s has %d values, spec says %d"
                         % (spec.name, len(values), spec.length))
      if spec.dtype == records.FLOAT32:
        feature = self._float_feature(values)
      else:
        feature = self._int_feature(values)
      entry = _length_delimited(1, spec.name.encode("utf-8")) + _length_delimited(2, feature)
      entries.append(_length_delimited(1, entry))  # Features.feature map entry
    return _length_delimited(1, b"".join(entries))  # Example.features

  def padded_features(self, input_ids, segment_ids, masked_lm_positions, masked_lm_ids,
                      next_sentence_label):
    """google's write_instance_to_example_files padding: ids/segments/mask 0-padded to S, positions
    and ids 0-padded to P, weights 1.0 then 0.0. Inputs are unpadded lists."""
    n, k = len(input_ids), len(masked_lm_positions)
    pad_s, pad_p = self.max_seq_length - n, self.max_predictions_per_seq - k
    if pad_s < 0 or pad_p < 0:
      raise ValueError("instance of %d tokens / %d predictions exceeds %d / %d"
                       % (n, k, self.max_seq_length, self.max_predictions_per_seq))
    features = {
        records.INPUT_IDS: list(input_ids) + [0] * pad_s,
        records.INPUT_LEN: [n],
        records.SEGMENT_IDS: list(segment_ids) + [0] * pad_s,
        records.MASKED_LM_POSITIONS: list(masked_lm_positions) + [0] * pad_p,
        records.MASKED_LM_IDS: list(masked_lm_ids) + [0] * pad_p,
        records.MASKED_LM_WEIGHTS: [1.0] * k + [0.0] * pad_p,
        records.NEXT_SENTENCE_LABELS: [next_sentence_label],
    }
    if self.write_input_mask:
      features[records.INPUT_MASK] = [1] * n + [0] * pad_s
    return features

  def _entry(self, name, payload):
    """Features map entry (with its field-1 tag and length) for a packed payload."""
    table = self._varints
    values = b"\x0a" + table[len(payload)] + payload  # Int64List / FloatList field 1, packed
    feature = self._kind[name] + table[len(values)] + values
    entry = self._key[name] + table[len(feature)] + feature
    return b"\x0a" + table[len(entry)] + entry

  def _precompute_entries(self):
    """Entries that depend on one small number only: input_len n, input_mask n, weights k, label."""
    s, p = self.max_seq_length, self.max_predictions_per_seq
    table = self._varints
    self._len_entries = [self._entry(records.INPUT_LEN, table[n]) for n in range(s + 1)]
    self._mask_entries = [self._entry(records.INPUT_MASK, b"\x01" * n + b"\x00" * (s - n))
                          for n in range(s + 1)] if self.write_input_mask else None
    self._weight_entries = [self._entry(records.MASKED_LM_WEIGHTS, struct.pack(
        "<%df" % p, *([1.0] * k + [0.0] * (p - k)))) for k in range(p + 1)]
    self._label_entries = [self._entry(records.NEXT_SENTENCE_LABELS, table[v]) for v in (0, 1)]
    # segment ids are 0/1: one byte each, so the payload length (s) and the prefix are constant
    self._segment_prefix = self._entry(records.SEGMENT_IDS, b"\x00" * s)[:-s]

  def encode(self, input_ids, segment_ids, masked_lm_positions, masked_lm_ids,
             next_sentence_label):
    """Unpadded instance -> serialized Example bytes; the same bytes as
    encode_features(padded_features(...)) (tested), from table look-ups and precomputed entries.
    segment_ids and next_sentence_label must be 0/1 here (anything else takes the generic path)."""
    table = self._varints
    n, k = len(input_ids), len(masked_lm_positions)
    pad_s, pad_p = self.max_seq_length - n, self.max_predictions_per_seq - k
    if (pad_s < 0 or pad_p < 0 or len(segment_ids) != n or len(masked_lm_ids) != k
        or next_sentence_label not in (0, 1) or (segment_ids and max(segment_ids) > 1)):
      return self.encode_features(self.padded_features(
          input_ids, segment_ids, masked_lm_positions, masked_lm_ids, next_sentence_label))
    zeros_s, zeros_p = b"\x00" * pad_s, b"\x00" * pad_p
    entries = {
        records.INPUT_IDS: self._entry(
            records.INPUT_IDS, b"".join([table[v] for v in input_ids]) + zeros_s),
        records.INPUT_LEN: self._len_entries[n],
        records.SEGMENT_IDS: self._segment_prefix + bytes(segment_ids) + zeros_s,
        records.MASKED_LM_POSITIONS: self._entry(
            records.MASKED_LM_POSITIONS,
            b"".join([table[v] for v in masked_lm_positions]) + zeros_p),
        records.MASKED_LM_IDS: self._entry(
            records.MASKED_LM_IDS, b"".join([table[v] for v in masked_lm_ids]) + zeros_p),
        records.MASKED_LM_WEIGHTS: self._weight_entries[k],
        records.NEXT_SENTENCE_LABELS: self._label_entries[next_sentence_label],
    }
    if self.write_input_mask:
      entries[records.INPUT_MASK] = self._mask_entries[n]
    body = b"".join([entries[name] for name in self._names])
    return b"\x0a" + table[len(body)] + body


def _masked_crc(data):
  crc = crc32c.crc32c(data)
  return ((((crc >> 15) | (crc << 17)) & 0xFFFFFFFF) + 0xA282EAD8) & 0xFFFFFFFF


def tfrecord_frame(record):
  """TFRecord framing: uint64 length, masked crc32c(length), data, masked crc32c(data)."""
  header = struct.pack("<Q", len(record))
  return (header + struct.pack("<I", _masked_crc(header)) + record
          + struct.pack("<I", _masked_crc(record)))


def output_paths(output_file, num_output_files):
  """google's comma list, or, for num_output_files N > 1, `prefix-00000-of-0000N.tfrecord` names.

  output_file: one path/prefix or a comma-separated list (then N must be 1 or the list length).
  Returns (paths, stats_path) where stats_path is `<prefix>.stats.json` beside the first output.
  """
  names = [name for name in output_file.split(",") if name]
  if not names:
    raise ValueError("--output_file is empty")
  if len(names) > 1:
    if num_output_files not in (1, len(names)):
      raise ValueError("--num_output_files=%d but --output_file lists %d files"
                       % (num_output_files, len(names)))
    return names, names[0] + ".stats.json"
  if num_output_files < 1:
    raise ValueError("--num_output_files must be >= 1, got %d" % num_output_files)
  prefix = names[0]
  if num_output_files == 1:
    return [prefix], prefix + ".stats.json"
  paths = ["%s-%05d-of-%05d.tfrecord" % (prefix, i, num_output_files)
           for i in range(num_output_files)]
  return paths, prefix + ".stats.json"


class ShardedRecordWriter(object):
  """Round-robin TFRecord writer over `paths`, atomic per file. Use as a context manager: files
  appear under their final names only when the block exits without an exception."""

  def __init__(self, paths, buffer_bytes=1 << 20):
    self.paths = list(paths)
    self.counts = [0] * len(self.paths)
    self._buffer_bytes = buffer_bytes
    self._next = 0
    self._temps = []
    self._files = []

  def __enter__(self):
    for path in self.paths:
      manager = io_utils.atomic_path(path)
      temp = manager.__enter__()
      self._temps.append(manager)
      self._files.append(open(temp, "wb", buffering=self._buffer_bytes))
    return self

  def write(self, record):
    """record: serialized bytes; goes to the next file in round-robin order."""
    self.write_framed(tfrecord_frame(record))

  def write_framed(self, framed):
    """framed: tfrecord_frame(record) bytes (e.g. framed by a worker process)."""
    self._files[self._next].write(framed)
    self.counts[self._next] += 1
    self._next = (self._next + 1) % len(self._files)

  def __exit__(self, exc_type, exc, tb):
    for f in self._files:
      if exc_type is None:
        f.flush()
        os.fsync(f.fileno())
      f.close()
    for manager in self._temps:
      if exc_type is None:
        manager.__exit__(None, None, None)
      else:
        manager.__exit__(exc_type, exc, tb)
    return False
