"""tools/pack_records.py (bert_fin/cli/pack_records.py, data/packing/pack_files.py): packed records from
bert_fin's and google's records; every sequence in exactly one pack, seeded, shuffled, atomic."""
import collections
import glob
import json
import os

import numpy as np
import pytest
import tensorflow as tf
import tiny_data

from bert_fin.cli import pack_records
from bert_fin.records import schema
from helpers import graph_datasets

SEQ, P = 48, 6


def _write_inputs(directory, google_format=False, seed=0, per_file=150):
  """Two files of tiny records: bert_fin's (input_len) or google's (input_mask, no input_len)."""
  paths, contents = tiny_data.write_records(directory, num_files=2, per_file=per_file, seq_len=SEQ,
                                            max_predictions=P, seed=seed, min_len=6)
  if google_format:
    specs = schema.read_specs(SEQ, P, legacy_input_mask=True)
    for path, instances in zip(paths, contents):
      with tf.io.TFRecordWriter(path) as out:
        for instance in instances:
          out.write(tiny_data.to_example(instance, specs).SerializeToString())
  return paths, contents


def _read(paths):
  """Parsed records (dicts of numpy lists) of TFRecord files in order, layout from the first."""
  first = next(iter(tf.data.TFRecordDataset(paths[0]))).numpy()
  spec = schema.tf_feature_spec(schema.layout_specs(schema.layout_of_example(first)))
  rows = []
  for path in paths:
    for serialized in tf.data.TFRecordDataset(path):
      parsed = tf.io.parse_single_example(serialized, spec)
      rows.append({name: value.numpy() for name, value in parsed.items()})
  return rows


def _sequence_key(tokens, segments, positions, ids, label):
  return (tuple(tokens), tuple(segments), tuple(positions), tuple(ids), int(label))


def _unpacked_sequences(instances):
  out = collections.Counter()
  for instance in instances:
    n = instance["input_len"][0]
    k = int(sum(instance["masked_lm_weights"]))
    out[_sequence_key(instance["input_ids"][:n], instance["segment_ids"][:n],
                      instance["masked_lm_positions"][:k], instance["masked_lm_ids"][:k],
                      instance["next_sentence_labels"][0])] += 1
  return out


def _packed_sequences(rows):
  """Counter of the sequences held by packed records (positions made relative again)."""
  out = collections.Counter()
  for row in rows:
    start, predicted = 0, 0
    positions = row[schema.MASKED_LM_POSITIONS]
    total_predictions = int(row[schema.MASKED_LM_WEIGHTS].sum())
    for slot, length in enumerate(row[schema.SEQUENCE_LENS]):
      if not length:
        continue
      end = start + length
      mine = [i for i in range(total_predictions) if start <= positions[i] < end]
      assert mine == list(range(predicted, predicted + len(mine)))
      out[_sequence_key(row[schema.INPUT_IDS][start:end], row[schema.SEGMENT_IDS][start:end],
                        positions[mine] - start, row[schema.MASKED_LM_IDS][mine],
                        row[schema.NEXT_SENTENCE_LABELS][slot])] += 1
      start, predicted = end, predicted + len(mine)
    assert predicted == total_predictions
    assert not row[schema.INPUT_IDS][start:].any()
  return out


def _pack(tmp_path, inputs, name="packed", *extra):
  prefix = str(tmp_path / name / "train")
  status = pack_records.main(["--input_file", inputs, "--output_file", prefix,
                              "--num_output_files", "2"] + list(extra))
  return status, prefix


@pytest.mark.parametrize("google_format", [False, True], ids=["input_len", "google_mask"])
def test_every_sequence_lands_in_exactly_one_pack(tmp_path, google_format):
  _, contents = _write_inputs(str(tmp_path / "in"), google_format)
  status, prefix = _pack(tmp_path, str(tmp_path / "in" / "part-*"), "packed",
                         "--max_sequences_per_pack", "3")
  assert status == 0
  paths = sorted(glob.glob(prefix + "-*.tfrecord"))
  assert [os.path.basename(p) for p in paths] == ["train-00000-of-00002.tfrecord",
                                                  "train-00001-of-00002.tfrecord"]
  rows = _read(paths)
  instances = [i for file_instances in contents for i in file_instances]
  assert _packed_sequences(rows) == _unpacked_sequences(instances)
  stats = json.load(open(prefix + ".stats.json"))
  assert stats["sequences_in"] == stats["sequences_out"] == 300
  assert stats["packs"] == len(rows) < 300
  assert stats["input_layout"] == ("google_input_mask" if google_format else "input_len")
  lens = np.array([r[schema.SEQUENCE_LENS] for r in rows])
  assert lens.shape[1] == 3 and stats["real_tokens"] == lens.sum()
  assert stats["packing_efficiency"] == pytest.approx(lens.sum() / (len(rows) * SEQ))
  assert stats["padding_fraction_after"] < stats["padding_fraction_before"]
  assert stats["average_sequences_per_pack"] == pytest.approx(300 / len(rows))
  assert stats["max_predictions_per_pack"] == rows[0][schema.MASKED_LM_IDS].size <= 3 * P
  assert sum(stats["output_files"].values()) == len(rows)


def test_same_seed_same_bytes_other_seed_other_order_and_packs_shuffled(tmp_path):
  _write_inputs(str(tmp_path / "in"))
  inputs = str(tmp_path / "in" / "part-*")
  outputs = {}
  for name, seed in (("a", "1"), ("b", "1"), ("c", "2")):
    assert _pack(tmp_path, inputs, name, "--random_seed", seed)[0] == 0
    outputs[name] = [open(p, "rb").read()
                     for p in sorted(glob.glob(str(tmp_path / name / "train-*.tfrecord")))]
  assert outputs["a"] == outputs["b"] and outputs["a"] != outputs["c"]
  totals = [int(r[schema.SEQUENCE_LENS].sum()) for r in _read(
      sorted(glob.glob(str(tmp_path / "a" / "train-*.tfrecord"))))]
  assert totals != sorted(totals) and totals != sorted(totals, reverse=True)


def test_small_windows_still_pack_every_sequence(tmp_path):
  _, contents = _write_inputs(str(tmp_path / "in"))
  status, prefix = _pack(tmp_path, str(tmp_path / "in" / "part-*"), "packed",
                         "--window_size", "70", "--algorithm", "spfhp",
                         "--max_sequences_per_pack", "4")
  assert status == 0
  stats = json.load(open(prefix + ".stats.json"))
  assert stats["windows"] == 4  # 300 = 70 + 70 + 70 + 90 (a tail under half a window merges)
  rows = _read(sorted(glob.glob(prefix + "-*.tfrecord")))
  assert _packed_sequences(rows) == _unpacked_sequences([i for f in contents for i in f])


def _assert_refused(capsys, status, prefix, pattern):
  assert status == 2
  err = capsys.readouterr().err.strip()
  assert len(err.splitlines()) == 1 and pattern in err, err
  assert not glob.glob(os.path.join(os.path.dirname(prefix), "*"))


def test_bad_input_is_refused_in_one_line_before_anything_is_written(tmp_path, capsys):
  _write_inputs(str(tmp_path / "in"))
  assert _pack(tmp_path, str(tmp_path / "in" / "part-*"))[0] == 0
  capsys.readouterr()
  status, prefix = _pack(tmp_path, str(tmp_path / "packed" / "train-*"), "again")
  _assert_refused(capsys, status, prefix, "already packed")
  tiny_data.write_records(str(tmp_path / "other"), num_files=1, per_file=3, seq_len=SEQ + 16,
                          max_predictions=P)
  status, prefix = _pack(tmp_path, str(tmp_path / "in" / "part-*") + ","
                         + str(tmp_path / "other" / "part-*"), "mixed")
  _assert_refused(capsys, status, prefix, "differs from")
  status, prefix = _pack(tmp_path, str(tmp_path / "nothing-*"), "none")
  _assert_refused(capsys, status, prefix, "matches no file")
  with open(str(tmp_path / "in" / "part-00009"), "wb") as f:
    f.write(b"not a tfrecord at all")
  status, prefix = _pack(tmp_path, str(tmp_path / "in" / "part-*"), "corrupt")
  _assert_refused(capsys, status, prefix, "part-00009")


def test_packed_records_are_detected_and_read_alike_by_tfdata_and_dali(tmp_path):
  pytest.importorskip("nvidia.dali.plugin.tf", reason="nvidia-dali TF plugin not installed")
  from bert_fin.input import dali
  from bert_fin.input import tfdata
  from bert_fin.training import preflight
  _write_inputs(str(tmp_path / "in"))
  status, prefix = _pack(tmp_path, str(tmp_path / "in" / "part-*"))
  assert status == 0
  paths = sorted(glob.glob(prefix + "-*.tfrecord"))
  # --max_predictions_per_seq (here a wrong 99) is not used: packed records carry their own width
  layout = preflight.check_records(paths, SEQ, 99, False, vocab_size=1000)
  index_of = dali.prepare_indexes(paths, str(tmp_path / "index_cache"))
  read = {"tfdata": lambda params: tfdata.eval_dataset(paths, layout, 4),
          "dali": lambda params: dali.eval_dataset(paths, layout, 4, index_of, num_threads=1)}
  batches = {name: graph_datasets.run_batches(input_fn) for name, input_fn in read.items()}
  first = batches["tfdata"][0]
  assert first[schema.SEQUENCE_LENS].shape == (4, 3)
  assert first[schema.NEXT_SENTENCE_LABELS].shape == (4, 3)
  np.testing.assert_array_equal(first[schema.INPUT_LEN], first[schema.SEQUENCE_LENS].sum(1))
  assert sorted(graph_datasets.examples(batches["dali"])) == sorted(
      graph_datasets.examples(batches["tfdata"]))
  assert sum(len(b[schema.INPUT_IDS]) for b in batches["tfdata"]) == len(_read(paths))


def test_training_input_refuses_mixed_layouts_and_another_length(tmp_path):
  from bert_fin.training import preflight
  unpacked, _ = _write_inputs(str(tmp_path / "in"))
  predictions = len(_read(unpacked)[0][schema.MASKED_LM_POSITIONS])

  def layout(paths, seq=SEQ):
    return preflight.check_records(paths, seq, predictions, False, vocab_size=1000)

  assert layout(unpacked).max_sequences_per_pack is None
  status, prefix = _pack(tmp_path, str(tmp_path / "in" / "part-*"))
  assert status == 0
  packed = sorted(glob.glob(prefix + "-*.tfrecord"))
  assert layout(packed).max_sequences_per_pack == 3 and layout(packed).max_seq_length == SEQ
  with pytest.raises(ValueError, match="different layouts"):
    layout(packed + unpacked)
  with pytest.raises(ValueError, match="packed records of %d tokens, but --max_seq_length=64"
                     % SEQ):
    layout(packed, 64)


def _write_dynamic_inputs(directory, per_file=120, seed=3):
  """Two files of dynamic-masking records (create_pretraining_data --masking=dynamic's layout)."""
  from bert_fin.data import writer  # pylint: disable=import-outside-toplevel
  from bert_fin.records import tfrecord_index  # pylint: disable=import-outside-toplevel
  os.makedirs(directory, exist_ok=True)
  rng = np.random.RandomState(seed)
  encoder = writer.UnmaskedExampleEncoder(SEQ, max_value=1000)
  sequences = collections.Counter()
  for f in range(2):
    with open(os.path.join(directory, "part-%d" % f), "wb") as out:
      for _ in range(per_file):
        n = int(rng.randint(6, SEQ + 1))
        ids = [2] + list(rng.randint(100, 1000, n - 2)) + [3]
        starts = [schema.NEVER_MASKED] + list(rng.randint(0, 2, n - 2)) + [schema.NEVER_MASKED]
        starts[1] = schema.WORD_BEGINS
        segments, label = [0] * n, int(rng.randint(0, 2))
        out.write(tfrecord_index.frame_record(encoder.encode(ids, segments, starts, label)))
        sequences[(tuple(ids), tuple(segments), tuple(starts), label)] += 1
  return sequences


def test_dynamic_masking_records_pack_with_their_word_starts(tmp_path):
  """Dynamic-masking records (no predictions) pack like the others; each slot keeps its
  word_starts, so training masks every sequence of a row with its own budget."""
  sequences = _write_dynamic_inputs(str(tmp_path / "in"))
  status, prefix = _pack(tmp_path, str(tmp_path / "in" / "part-*"), "packed",
                         "--max_sequences_per_pack", "3")
  assert status == 0
  paths = sorted(glob.glob(prefix + "-*.tfrecord"))
  first = next(iter(tf.data.TFRecordDataset(paths[0]))).numpy()
  layout = schema.layout_of_example(first, allow_dynamic=True)
  assert layout.dynamic_masking and layout.max_sequences_per_pack == 3
  spec = schema.tf_feature_spec(schema.layout_specs(layout))
  packed = collections.Counter()
  rows = 0
  for path in paths:
    for serialized in tf.data.TFRecordDataset(path):
      row = {k: v.numpy() for k, v in tf.io.parse_single_example(serialized, spec).items()}
      assert schema.MASKED_LM_POSITIONS not in row
      rows += 1
      start = 0
      for slot, length in enumerate(row[schema.SEQUENCE_LENS]):
        end = start + length
        if length:
          packed[(tuple(row[schema.INPUT_IDS][start:end]),
                  tuple(row[schema.SEGMENT_IDS][start:end]),
                  tuple(row[schema.WORD_STARTS][start:end]),
                  int(row[schema.NEXT_SENTENCE_LABELS][slot]))] += 1
        start = end
      assert not row[schema.WORD_STARTS][start:].any()
  assert packed == sequences
  stats = json.load(open(prefix + ".stats.json"))
  assert stats["input_layout"] == "dynamic_masking" and stats["max_predictions_per_pack"] is None
  assert stats["sequences_in"] == stats["sequences_out"] == 240 and stats["packs"] == rows < 240
  # static and dynamic-masking records are not packed together
  _write_inputs(str(tmp_path / "static"))
  os.rename(str(tmp_path / "static" / "part-00000.tfrecord"),
            str(tmp_path / "in" / "part-x"))
  status, _ = _pack(tmp_path, str(tmp_path / "in" / "part-*"), "mixed")
  assert status == 2 and not os.path.exists(str(tmp_path / "mixed"))
