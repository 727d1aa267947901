"""TFRecord output of create_pretraining_data: a hand-encoded tf.train.Example and sharded files.

`ExampleEncoder` serialises an instance to the exact protobuf wire format of a tf.train.Example
holding the features of records/schema.feature_specs (packed int64/float lists, in spec order); it
is ~10x cheaper than building tf.train.Example objects and is tested to parse identically with
tf.io.parse_single_example. `ShardedRecordWriter` writes records framed by
tfrecord_index.frame_record round-robin over its files, each written to a temp name and renamed when
the writer closes cleanly (bert_fin/io_utils.atomic_path), so a killed run never leaves a half file
under a final name.
No TensorFlow import is needed to write.
"""
import os
import struct


from bert_fin import io_utils
from bert_fin.records import schema
from bert_fin.records import tfrecord_index


def varint(value):
  """The protobuf varint bytes of value (>= 0)."""
  out = bytearray()
  while True:
    bits = value & 0x7F
    value >>= 7
    if value:
      out.append(bits | 0x80)
    else:
      out.append(bits)
      return bytes(out)


def varint_table(max_value):
  """[v] -> the protobuf varint bytes of v, for 0 <= v <= max_value (built without a per-value
  Python loop body for the common 1..3-byte values)."""
  table = [bytes((v,)) for v in range(min(max_value + 1, 1 << 7))]
  table += [bytes((v & 0x7F | 0x80, v >> 7)) for v in range(1 << 7, min(max_value + 1, 1 << 14))]
  table += [bytes((v & 0x7F | 0x80, (v >> 7) & 0x7F | 0x80, v >> 14))
            for v in range(1 << 14, min(max_value + 1, 1 << 21))]
  table += [varint(v) for v in range(1 << 21, max_value + 1)]
  return table


def length_delimited(field_number, payload):
  """A protobuf length-delimited field (wire type 2): its key, length and payload (bytes)."""
  return varint(field_number << 3 | 2) + varint(len(payload)) + payload


class SpecEncoder(object):
  """Encodes {name: padded values} to serialized tf.train.Example bytes, in spec order.

  Args:
    specs: any list of FeatureSpecs (e.g. schema.packed_feature_specs).
    max_value: the largest int that will be encoded (the table holds at least 2**16 values).
      Ints must be 0 <= v <= max_value (varint table look-ups).
  """

  def __init__(self, specs, max_value=1 << 16):
    self.specs = list(specs)
    self._varints = varint_table(max(max_value, 1 << 16))
    self._key = {s.name: b"\x0a" + varint(len(s.name)) + s.name.encode("utf-8") + b"\x12"
                 for s in self.specs}  # map entry: key field 1, then value field 2's tag
    self._kind = {s.name: b"\x12" if s.dtype == schema.FLOAT32 else b"\x1a"
                  for s in self.specs}  # Feature.float_list = 2, Feature.int64_list = 3

  @property
  def varints(self):
    """The varint table: varints[v] is the protobuf varint bytes of v (read-only use)."""
    return self._varints

  def _entry(self, name, payload):
    """Features map entry (with its field-1 tag and length) for a packed payload."""
    table = self._varints
    values = b"\x0a" + table[len(payload)] + payload  # Int64List / FloatList field 1, packed
    feature = self._kind[name] + table[len(values)] + values
    entry = self._key[name] + table[len(feature)] + feature
    return b"\x0a" + table[len(entry)] + entry

  def _headers(self, name, max_payload):
    """[L] -> the map entry of feature `name` up to (excluding) a packed payload of L bytes."""
    headers = []
    for size in range(max_payload + 1):
      entry = self._entry(name, b"\x00" * size)
      headers.append(entry[:len(entry) - size])
    return headers

  def _byte_prefix(self, name, length):
    """The map entry of an int feature of `length` one-byte varints (values < 128), up to its
    payload: constant, since the payload is always `length` bytes."""
    return self._entry(name, b"\x00" * length)[:-length]

  def _int_feature(self, values):
    table = self._varints
    packed = b"".join([table[v] for v in values])
    return length_delimited(3, length_delimited(1, packed))  # Feature.int64_list{value}

  @staticmethod
  def _float_feature(values):
    packed = struct.pack("<%df" % len(values), *values)
    return length_delimited(2, length_delimited(1, packed))  # Feature.float_list{value}

  def encode_features(self, features):
    """Encodes one record's padded features to serialized Example bytes (the generic path).

    Args:
      features: {name: list of numbers of the spec's length} for every spec.

    Raises:
      ValueError: a feature's number of values differs from its spec's length.
    """
    entries = []
    for spec in self.specs:
      values = features[spec.name]
      if len(values) != spec.length:
        raise ValueError("feature %s has %d values, spec says %d"
                         % (spec.name, len(values), spec.length))
      if spec.dtype == schema.FLOAT32:
        feature = self._float_feature(values)
      else:
        feature = self._int_feature(values)
      entry = length_delimited(1, spec.name.encode("utf-8")) + length_delimited(2, feature)
      entries.append(length_delimited(1, entry))  # Features.feature map entry
    return length_delimited(1, b"".join(entries))  # Example.features


class ExampleEncoder(SpecEncoder):
  """Encodes static-masking instances (schema.feature_specs) to serialized tf.train.Example bytes.

  Args:
    max_seq_length: S.
    max_predictions_per_seq: P.
    write_input_mask: also write google's input_mask [S].
    max_value: the largest int that will be encoded (e.g. max(vocab_size, max_seq_length)); ints
      are looked up in a precomputed varint table. Ints must be 0 <= v <= max_value.

  Raises:
    ValueError: as schema.feature_specs.
  """

  def __init__(self, max_seq_length, max_predictions_per_seq, write_input_mask=False,
               max_value=1 << 16):
    super().__init__(
        schema.feature_specs(max_seq_length, max_predictions_per_seq, write_input_mask),
        max_value)
    self.max_seq_length = max_seq_length
    self.max_predictions_per_seq = max_predictions_per_seq
    self.write_input_mask = write_input_mask
    # ints and every length prefix are looked up (lengths stay < 2**16 for S, P <= 4096)
    order = ([schema.INPUT_IDS] + [schema.INPUT_MASK] * write_input_mask + [
        schema.INPUT_LEN, schema.SEGMENT_IDS, schema.MASKED_LM_POSITIONS, schema.MASKED_LM_IDS,
        schema.MASKED_LM_WEIGHTS, schema.NEXT_SENTENCE_LABELS])
    if [s.name for s in self.specs] != order:  # encode_packed writes the entries in this order
      raise AssertionError("feature_specs order changed; update ExampleEncoder.encode_packed")
    self._precompute_entries()
    self._precompute_headers()

  def packed_tables(self):
    """The precomputed pieces encode_packed splices together, for the C kernel (dispatch.py):
    (ids_headers, positions_headers, labels_headers, len_entries, mask_entries or None,
    segment_prefix, weight_entries, label_entries, None); see encode_packed for their order. The
    last slot is UnmaskedExampleEncoder's word_starts prefix."""
    return (self._ids_headers, self._positions_headers, self._labels_headers, self._len_entries,
            self._mask_entries, self._segment_prefix, self._weight_entries, self._label_entries,
            None)

  def padded_features(self, input_ids, segment_ids, masked_lm_positions, masked_lm_ids,
                      next_sentence_label):
    """Pads an instance as google's write_instance_to_example_files does.

    Args:
      input_ids, segment_ids: unpadded lists [n].
      masked_lm_positions, masked_lm_ids: unpadded lists [k].
      next_sentence_label: int.

    Returns:
      {name: padded values}: ids/segments/mask 0-padded to S, positions and ids 0-padded to P,
      weights 1.0 then 0.0, input_len [n].

    Raises:
      ValueError: n > S or k > P.
    """
    n, k = len(input_ids), len(masked_lm_positions)
    pad_s, pad_p = self.max_seq_length - n, self.max_predictions_per_seq - k
    if pad_s < 0 or pad_p < 0:
      raise ValueError("instance of %d tokens / %d predictions exceeds %d / %d"
                       % (n, k, self.max_seq_length, self.max_predictions_per_seq))
    features = {
        schema.INPUT_IDS: list(input_ids) + [0] * pad_s,
        schema.INPUT_LEN: [n],
        schema.SEGMENT_IDS: list(segment_ids) + [0] * pad_s,
        schema.MASKED_LM_POSITIONS: list(masked_lm_positions) + [0] * pad_p,
        schema.MASKED_LM_IDS: list(masked_lm_ids) + [0] * pad_p,
        schema.MASKED_LM_WEIGHTS: [1.0] * k + [0.0] * pad_p,
        schema.NEXT_SENTENCE_LABELS: [next_sentence_label],
    }
    if self.write_input_mask:
      features[schema.INPUT_MASK] = [1] * n + [0] * pad_s
    return features

  def _precompute_entries(self):
    """Entries that depend on one small number only: input_len n, input_mask n, weights k, label."""
    s, p = self.max_seq_length, self.max_predictions_per_seq
    table = self._varints
    self._len_entries = [self._entry(schema.INPUT_LEN, table[n]) for n in range(s + 1)]
    self._mask_entries = [self._entry(schema.INPUT_MASK, b"\x01" * n + b"\x00" * (s - n))
                          for n in range(s + 1)] if self.write_input_mask else None
    self._weight_entries = [self._entry(schema.MASKED_LM_WEIGHTS, struct.pack(
        "<%df" % p, *([1.0] * k + [0.0] * (p - k)))) for k in range(p + 1)]
    self._label_entries = [self._entry(schema.NEXT_SENTENCE_LABELS, table[v]) for v in (0, 1)]
    # segment ids are 0/1: one byte each, so the payload length (s) and the prefix are constant
    self._segment_prefix = self._byte_prefix(schema.SEGMENT_IDS, s)

  def _precompute_headers(self):
    """Entry headers by payload length for the variable features, and zero paddings."""
    s, p = self.max_seq_length, self.max_predictions_per_seq
    width = len(self._varints[-1])  # the longest varint in the table
    self._ids_headers = self._headers(schema.INPUT_IDS, s * width)
    self._positions_headers = self._headers(schema.MASKED_LM_POSITIONS, p * width)
    self._labels_headers = self._headers(schema.MASKED_LM_IDS, p * width)
    self._zeros = [b"\x00" * size for size in range(max(s, p) + 1)]

  def encode(self, input_ids, segment_ids, masked_lm_positions, masked_lm_ids,
             next_sentence_label):
    """Encodes an unpadded instance (padded_features' arguments) to serialized Example bytes.

    The same bytes as encode_features(padded_features(...)) (tested), from table look-ups and
    precomputed entries when segment_ids are in [0, 127] and next_sentence_label is 0/1 (else
    the generic path).

    Raises:
      ValueError: n > S or k > P, or a length mismatch (from the generic path).
    """
    n, k = len(input_ids), len(masked_lm_positions)
    pad_s, pad_p = self.max_seq_length - n, self.max_predictions_per_seq - k
    if (pad_s < 0 or pad_p < 0 or len(segment_ids) != n or len(masked_lm_ids) != k
        or next_sentence_label not in (0, 1)):
      return self.encode_features(self.padded_features(
          input_ids, segment_ids, masked_lm_positions, masked_lm_ids, next_sentence_label))
    try:
      segments = bytes(segment_ids)  # one varint byte per value when every value is < 128
    except (ValueError, TypeError):
      segments = b"\x80"
    if not segments.isascii():
      return self.encode_features(self.padded_features(
          input_ids, segment_ids, masked_lm_positions, masked_lm_ids, next_sentence_label))
    ids = b"".join(map(self._varints.__getitem__, input_ids))
    return self.encode_packed(ids, n, segments, masked_lm_positions, masked_lm_ids,
                              next_sentence_label)

  def encode_packed(self, ids_payload, n, segments, masked_lm_positions, masked_lm_ids,
                    next_sentence_label):
    """encode() with input_ids already packed and segment_ids as bytes: the same Example bytes.

    Inputs are trusted (encode() validates).

    Args:
      ids_payload: bytes, the concatenated varints of the n (<= S) unpadded input ids.
      n: the number of input ids.
      segments: bytes [n], one byte per segment id (each < 128).
      masked_lm_positions, masked_lm_ids: int lists [k], k <= P.
      next_sentence_label: 0/1.
    """
    k = len(masked_lm_positions)
    pad_s, pad_p = self.max_seq_length - n, self.max_predictions_per_seq - k
    lookup = self._varints.__getitem__
    positions = b"".join(map(lookup, masked_lm_positions))
    labels = b"".join(map(lookup, masked_lm_ids))
    zeros_s, zeros_p = self._zeros[pad_s], self._zeros[pad_p]
    parts = [self._ids_headers[len(ids_payload) + pad_s], ids_payload, zeros_s]
    if self.write_input_mask:
      parts.append(self._mask_entries[n])
    parts += [self._len_entries[n], self._segment_prefix, segments, zeros_s,
              self._positions_headers[len(positions) + pad_p], positions, zeros_p,
              self._labels_headers[len(labels) + pad_p], labels, zeros_p,
              self._weight_entries[k], self._label_entries[next_sentence_label]]
    body = b"".join(parts)
    return b"\x0a" + self._varints[len(body)] + body


class UnmaskedExampleEncoder(SpecEncoder):
  """Encodes dynamic-masking records (schema.dynamic_feature_specs).

  An UnmaskedInstance's unpadded lists -> serialized tf.train.Example bytes, from precomputed
  entries like ExampleEncoder (the same bytes as encode_features of the padded values; tested).

  Args:
    max_seq_length: S.
    max_value: the largest int that will be encoded (see SpecEncoder).
  """

  def __init__(self, max_seq_length, max_value=1 << 16):
    super().__init__(schema.dynamic_feature_specs(max_seq_length), max_value)
    self.max_seq_length = s = max_seq_length
    table = self._varints
    width = len(table[-1])
    self._ids_headers = self._headers(schema.INPUT_IDS, s * width)
    self._len_entries = [self._entry(schema.INPUT_LEN, table[n]) for n in range(s + 1)]
    self._segment_prefix = self._byte_prefix(schema.SEGMENT_IDS, s)
    self._word_starts_prefix = self._byte_prefix(schema.WORD_STARTS, s)
    self._label_entries = [self._entry(schema.NEXT_SENTENCE_LABELS, table[v]) for v in (0, 1)]
    self._zeros = [b"\x00" * size for size in range(s + 1)]

  def packed_tables(self):
    """ExampleEncoder.packed_tables' nine slots for the C kernel: the masked-LM slots are None,
    the last one is the word_starts prefix (encode's order: ids, len, segments, word_starts,
    label)."""
    return (self._ids_headers, None, None, self._len_entries, None, self._segment_prefix, None,
            self._label_entries, self._word_starts_prefix)

  def padded_features(self, input_ids, segment_ids, word_starts, next_sentence_label):
    """{name: padded values}: ids, segments and word_starts 0-padded to S; ValueError past S."""
    n = len(input_ids)
    pad = self.max_seq_length - n
    if pad < 0:
      raise ValueError("instance of %d tokens exceeds %d" % (n, self.max_seq_length))
    return {schema.INPUT_IDS: list(input_ids) + [0] * pad, schema.INPUT_LEN: [n],
            schema.SEGMENT_IDS: list(segment_ids) + [0] * pad,
            schema.WORD_STARTS: list(word_starts) + [0] * pad,
            schema.NEXT_SENTENCE_LABELS: [next_sentence_label]}

  def encode(self, input_ids, segment_ids, word_starts, next_sentence_label):
    """Unpadded UnmaskedInstance fields -> serialized Example bytes.

    Fast when segment_ids and word_starts are < 128 and next_sentence_label is 0/1; else the
    generic path (encode_features(padded_features(...))), which gives the same bytes.

    Args:
      input_ids, segment_ids, word_starts: lists [n] (word_starts: schema.WORD_BEGINS / ...).
      next_sentence_label: int.

    Raises:
      ValueError: n > S, or a length mismatch (from the generic path).
    """
    n = len(input_ids)
    pad = self.max_seq_length - n
    if (pad < 0 or len(segment_ids) != n or len(word_starts) != n
        or next_sentence_label not in (0, 1)):
      return self.encode_features(self.padded_features(input_ids, segment_ids, word_starts,
                                                       next_sentence_label))
    try:
      segments, starts = bytes(segment_ids), bytes(word_starts)
    except (ValueError, TypeError):
      segments = starts = b"\x80"
    if not (segments.isascii() and starts.isascii()):
      return self.encode_features(self.padded_features(input_ids, segment_ids, word_starts,
                                                       next_sentence_label))
    ids = b"".join(map(self._varints.__getitem__, input_ids))
    zeros = self._zeros[pad]
    body = b"".join([self._ids_headers[len(ids) + pad], ids, zeros, self._len_entries[n],
                     self._segment_prefix, segments, zeros, self._word_starts_prefix, starts,
                     zeros, self._label_entries[next_sentence_label]])
    return b"\x0a" + self._varints[len(body)] + body


STATS_SUFFIX = ".stats.json"  # the run's stats, written beside the records


def output_paths(output_file, num_output_files):
  """The record files of --output_file and --num_output_files.

  Args:
    output_file: one path/prefix or google's comma-separated list (then N must be 1 or the list
      length).
    num_output_files: N; for N > 1 and one prefix, `prefix-00000-of-0000N.tfrecord` names.

  Returns:
    (paths, stats_path) where stats_path is `<prefix>.stats.json` beside the first output.

  Raises:
    ValueError: an empty --output_file, N < 1, or N disagreeing with the list's length.
  """
  names = [name for name in output_file.split(",") if name]
  if not names:
    raise ValueError("--output_file is empty")
  if len(names) > 1:
    if num_output_files not in (1, len(names)):
      raise ValueError("--num_output_files=%d but --output_file lists %d files"
                       % (num_output_files, len(names)))
    return names, names[0] + STATS_SUFFIX
  if num_output_files < 1:
    raise ValueError("--num_output_files must be >= 1, got %d" % num_output_files)
  prefix = names[0]
  if num_output_files == 1:
    return [prefix], prefix + STATS_SUFFIX
  paths = ["%s-%05d-of-%05d.tfrecord" % (prefix, i, num_output_files)
           for i in range(num_output_files)]
  return paths, prefix + STATS_SUFFIX


class ShardedRecordWriter(object):
  """Round-robin TFRecord writer over `paths`, atomic per file.

  Use as a context manager: files appear under their final names only when the block exits
  without an exception (then each is flushed and fsynced first). `counts[f]` is the number of
  records file f received.

  Args:
    paths: the final file paths.
    buffer_bytes: the write buffer of each open file.
  """

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
    self.write_framed(tfrecord_index.frame_record(record))

  def write_framed(self, framed):
    """framed: tfrecord_index.frame_record(record) bytes (e.g. framed by a worker process)."""
    self._files[self._next].write(framed)
    self.counts[self._next] += 1
    self._next = (self._next + 1) % len(self._files)

  def write_many(self, framed_records):
    """write_framed for each of a list of framed records, in order (one write per file)."""
    num_files, first = len(self._files), self._next
    for k in range(min(num_files, len(framed_records))):
      index = (first + k) % num_files
      chunk = framed_records[k::num_files]
      self._files[index].write(b"".join(chunk))
      self.counts[index] += len(chunk)
    self._next = (first + len(framed_records)) % num_files

  @property
  def next_file(self):
    """Index of the file the next record goes to."""
    return self._next

  def write_dealt(self, per_file_bytes, num_records):
    """Writes a batch of framed records already dealt round-robin from next_file.

    Args:
      per_file_bytes: per_file_bytes[f] is what file f receives (shuffle.deal_records with
        first = next_file).
      num_records: the number of records in the batch (they advance next_file and counts).
    """
    num_files, first = len(self._files), self._next
    for index, data in enumerate(per_file_bytes):
      if data:
        self._files[index].write(data)
      # file `index` gets records k = r, r + F, r + 2F, ... < num_records, r = (index - first) % F
      self.counts[index] += (num_records - (index - first) % num_files + num_files - 1) // num_files
    self._next = (first + num_records) % num_files

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
