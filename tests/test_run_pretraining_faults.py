"""run_pretraining on faulty input and flags (first collected in issue 15; and DALI indexes): every
user error is one line before anything is written, corrupt data stops with file and offset. Tiny
records."""
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
import pytest  # noqa: E402
import tensorflow.compat.v1 as tf  # noqa: E402

from helpers import pretraining_runs as pt  # noqa: E402
from helpers import random_checkpoints  # noqa: E402
from helpers.pretraining_runs import P, SEQ, parse_flags, tiny_argv, tiny_data  # noqa: E402

from bert_fin import modeling  # noqa: E402
from bert_fin.records import tfrecord_index  # noqa: E402
from bert_fin.training import flags as train_flags  # noqa: E402


def _preflight(tmp_path, input_file, workers=1, **flags):
  return pt.resolve(tmp_path, input_file, workers, **flags)


def _run_cli(tmp_path, argv):
  return pt.run_cli(tmp_path, argv, timeout=300)


# ---- item 3: empty input ----------------------------------------------------------------------
def test_no_records_at_all_is_refused_before_training(tmp_path):
  (tmp_path / "r").mkdir()
  (tmp_path / "r" / "a.tfrecord").write_bytes(b"")
  (tmp_path / "r" / "b.tfrecord").write_bytes(b"")
  with pytest.raises(ValueError, match=r"no records.*empty.*a\.tfrecord"):
    _preflight(tmp_path, str(tmp_path / "r" / "*"))


def test_an_empty_shard_is_reported_and_a_rank_with_only_empty_files_is_refused(
    tmp_path, records_dir, caplog):
  empty = tmp_path / "empty.tfrecord"
  empty.write_bytes(b"")
  files = "%s,%s" % (records_dir / "part-00000.tfrecord", empty)
  with caplog.at_level("WARNING"):
    _preflight(tmp_path, "%s,%s" % (files, records_dir / "part-00001.tfrecord"), workers=1)
  assert "empty.tfrecord" in caplog.text
  with pytest.raises(ValueError, match=r"rank 1.*empty\.tfrecord"):
    _preflight(tmp_path, files, workers=2)  # tf.data gives rank 1 the empty file alone


# ---- item 10: records that do not match the flags ---------------------------------------------
def test_google_records_without_legacy_input_mask_get_the_hint(tmp_path):
  tiny_data.write_records(str(tmp_path / "g"), 1, 4, seq_len=SEQ, max_predictions=P,
                          write_input_mask=True)
  # google's records: input_mask instead of input_len
  path = str(tmp_path / "g" / "part-00000.tfrecord")
  examples = []
  for raw in tfrecord_index.read_records(path):
    example = tf.train.Example.FromString(raw)
    del example.features.feature["input_len"]
    examples.append(example.SerializeToString())
  with tf.io.TFRecordWriter(path) as writer:
    for raw in examples:
      writer.write(raw)
  with pytest.raises(ValueError, match="--legacy_input_mask"):
    _preflight(tmp_path, path)
  _preflight(tmp_path, path, legacy_input_mask=True)


def test_sequence_length_and_predictions_must_match_the_records(tmp_path, records_dir):
  pattern = str(records_dir / "*.tfrecord")
  with pytest.raises(ValueError, match=r"part-00000\.tfrecord.*max_seq_length=%d" % SEQ):
    _preflight(tmp_path, pattern, max_seq_length=SEQ * 2)
  with pytest.raises(ValueError, match=r"max_predictions_per_seq=%d" % P):
    _preflight(tmp_path, pattern, max_predictions_per_seq=P + 1)


def test_token_ids_beyond_the_vocab_are_refused_up_front(tmp_path, records_dir):
  with pytest.raises(ValueError, match=r"record \d+ has input_ids \d+, outside \[0, vocab_size=50\)"):
    _preflight(tmp_path, str(records_dir / "*.tfrecord"),
               bert_config_file=tiny_data.write_config(str(tmp_path / "small.json"),
                                                       vocab_size=50))


def test_token_ids_beyond_the_vocab_later_in_a_file_stop_training_in_graph(tmp_path):
  # only the 100th record is out of range: the up-front sample misses it, the graph check does not
  directory = tmp_path / "late"
  paths, _ = tiny_data.write_records(str(directory), 1, 100, seq_len=SEQ, max_predictions=P)
  examples = [tf.train.Example.FromString(raw) for raw in tfrecord_index.read_records(paths[0])]
  examples[-1].features.feature["input_ids"].int64_list.value[1] = 150
  with tf.io.TFRecordWriter(paths[0]) as writer:
    for example in examples:
      writer.write(example.SerializeToString())
  values = parse_flags(tiny_argv(tmp_path, paths[0], do_train=True, num_train_steps=30,
                                 train_batch_size=8, save_checkpoints_steps=1000))
  with pytest.raises(ValueError, match=r"part-00000.tfrecord has input_ids >= vocab_size 100"):
    pt.train(values)


# ---- item 11: corrupt record mid-run names the file -------------------------------------------
def test_a_corrupt_record_mid_run_names_the_file_and_offset(tmp_path):
  paths, _ = tiny_data.write_records(str(tmp_path / "c"), 1, 64, seq_len=SEQ, max_predictions=P)
  spans = tfrecord_index.scan_index(paths[0])
  offset, size = spans[40]
  with open(paths[0], "r+b") as f:
    f.seek(offset + size - 10)
    byte = f.read(1)
    f.seek(offset + size - 10)
    f.write(bytes([byte[0] ^ 0x40]))
  values = parse_flags(tiny_argv(tmp_path, paths[0], do_train=True, num_train_steps=40,
                                 train_batch_size=4, save_checkpoints_steps=1000))
  with pytest.raises(ValueError, match=r"part-00000\.tfrecord: record 40 at byte offset %d" % offset):
    pt.train(values)


# ---- item 12: init_loss_scale -----------------------------------------------------------------
def test_absurd_init_loss_scale_is_refused(tmp_path, records_dir):
  for scale in (2 ** 127, 2 ** 128, 0):
    values = parse_flags(tiny_argv(tmp_path, str(records_dir / "*.tfrecord"), do_train=True,
                                   amp=True, init_loss_scale=scale))
    with pytest.raises(ValueError, match="--init_loss_scale"):
      train_flags.validate_flags(values)


# ---- item 13: one line, nothing written -------------------------------------------------------
def test_unwritable_output_dir_is_one_line(tmp_path, records_dir):
  (tmp_path / "file").write_text("x")
  with pytest.raises(ValueError, match="--output_dir"):
    _preflight(tmp_path, str(records_dir / "*.tfrecord"), output_dir=str(tmp_path / "file" / "o"))


def test_command_line_errors_before_training_are_one_line_and_write_nothing(tmp_path, records_dir):
  # records do not match the flags: refused before output_dir exists (no model.ckpt-0)
  proc = _run_cli(tmp_path, tiny_argv(tmp_path, str(records_dir / "*.tfrecord"), do_train=True,
                                      max_predictions_per_seq=P + 3))
  assert proc.returncode == 2, proc.stderr[-3000:]
  assert "Traceback" not in proc.stderr
  assert "run_pretraining.py: error:" in proc.stderr and "max_predictions_per_seq" in proc.stderr
  assert not os.path.exists(tmp_path / "out")


@pytest.mark.parametrize("place", ["/proc/bert_fin_out", "{file}/out"])
def test_an_output_dir_that_cannot_be_written_is_refused_before_work(tmp_path, records_dir, place):
  """As root os.access says yes to /proc: the check creates a probe file (io_utils)."""
  (tmp_path / "a_file").write_text("x")
  output_dir = place.format(file=tmp_path / "a_file")
  with pytest.raises(ValueError, match="--output_dir %s" % output_dir):
    pt.resolve(tmp_path, str(records_dir / "*.tfrecord"), output_dir=output_dir)


def test_init_checkpoint_shape_mismatch_is_one_line_with_the_variables(tmp_path, records_dir):
  # a checkpoint of a model with another hidden size (google's names and shapes)
  wide = modeling.BertConfig.from_json_file(tiny_data.write_config(
      str(tmp_path / "wide.json"), hidden_size=48, num_attention_heads=4))
  prefix = str(tmp_path / "other" / "model.ckpt-1")
  random_checkpoints.write_random_checkpoint(prefix, wide)
  proc = _run_cli(tmp_path, tiny_argv(tmp_path, str(records_dir / "*.tfrecord"), do_train=True,
                                      num_train_steps=2, init_checkpoint=prefix))
  assert proc.returncode == 2, proc.stderr[-3000:]
  assert "Traceback" not in proc.stderr
  assert "run_pretraining.py: error: init_from_checkpoint: shape mismatch" in proc.stderr
  assert "bert/embeddings/word_embeddings" in proc.stderr
  assert not [n for n in os.listdir(tmp_path / "out") if n.startswith("model.ckpt")]


# ---- item 1: DALI index trusted by mtime/size -------------------------------------------------
def test_a_flipped_byte_after_indexing_is_found_before_dali_reads(tmp_path):
  paths, _ = tiny_data.write_records(str(tmp_path / "d"), 1, 32, seq_len=SEQ, max_predictions=P)
  tfrecord_index.write_index(paths[0])
  spans = tfrecord_index.scan_index(paths[0])
  offset, _ = spans[7]
  stat = os.stat(paths[0])
  with open(paths[0], "r+b") as f:  # bit rot inside a token id, size and mtime kept
    f.seek(offset + 40)
    byte = f.read(1)
    f.seek(offset + 40)
    f.write(bytes([byte[0] ^ 0x01]))
  os.utime(paths[0], ns=(stat.st_atime_ns, stat.st_mtime_ns))
  assert tfrecord_index.index_is_current(paths[0], paths[0] + ".idx")
  with pytest.raises(tfrecord_index.TFRecordError, match=r"record 7 at byte offset %d" % offset):
    tfrecord_index.verify_checksums([paths[0]], [paths[0] + ".idx"])
  with pytest.raises(ValueError, match=r"part-00000\.tfrecord: record 7 at byte offset %d" % offset):
    _preflight(tmp_path, paths[0], input_pipeline="dali")
