"""tfrecord_index + tfrecord2idx: DALI's index format byte for byte, CRC/truncation detection."""
import base64
import hashlib
import importlib.metadata
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

from bert_fin.cli import tfrecord2idx
from bert_fin.records import tfrecord_index
from helpers import REPO

DALI_DISTRIBUTIONS = ("nvidia-dali-cuda120", "nvidia-dali-cuda110", "nvidia-dali-cuda130")


def write_tfrecord(path, payloads):
  """Writes payloads with TensorFlow's own writer (an implementation independent of ours)."""
  import tensorflow as tf
  with tf.io.TFRecordWriter(path) as writer:
    for payload in payloads:
      writer.write(payload)
  return path


def random_payloads(seed, count):
  rng = np.random.RandomState(seed)
  sizes = list(rng.randint(0, 3000, size=count - 2)) + [0, 70000]  # empty and > 64 KiB records
  return [rng.bytes(int(size)) for size in sizes]


@pytest.fixture(scope="module")
def shards(tmp_path_factory):
  directory = tmp_path_factory.mktemp("shards")
  paths = [write_tfrecord(str(directory / ("part-%d.tfrecord" % i)), random_payloads(i, 20 + 7 * i))
           for i in range(3)]
  return paths


def copy_to(tmp_path, path):
  target = str(tmp_path / os.path.basename(path))
  shutil.copyfile(path, target)
  return target


def dali_tool_hash():
  """sha256 (RECORD's urlsafe base64) of bin/tfrecord2idx as the installed DALI wheel shipped it."""
  for name in DALI_DISTRIBUTIONS:
    try:
      files = importlib.metadata.distribution(name).files or []
    except importlib.metadata.PackageNotFoundError:
      continue
    for entry in files:
      if entry.name == "tfrecord2idx" and entry.hash is not None:
        return entry.hash.value
  return None


def find_dali_tool():
  """Path of DALI's own tfrecord2idx, proven by its hash in the DALI wheel's RECORD; else None.

  bert_fin's console script has the same name and overwrites .venv/bin/tfrecord2idx on install,
  so a verified copy can be named with DALI_TFRECORD2IDX or saved as bin/dali-tfrecord2idx
  (before bert_fin is installed).
  """
  wanted = dali_tool_hash()
  bin_dir = os.path.dirname(sys.executable)
  candidates = [os.environ.get("DALI_TFRECORD2IDX"), shutil.which("tfrecord2idx"),
                os.path.join(bin_dir, "tfrecord2idx"), shutil.which("dali-tfrecord2idx"),
                os.path.join(bin_dir, "dali-tfrecord2idx")]
  for candidate in filter(None, candidates):
    if wanted and os.path.isfile(candidate):
      with open(candidate, "rb") as f:
        digest = base64.urlsafe_b64encode(hashlib.sha256(f.read()).digest()).rstrip(b"=")
      if digest.decode() == wanted:
        return candidate
  return None


def test_framing_matches_tensorflow_writer(tmp_path):
  payloads = random_payloads(7, 12)
  path = write_tfrecord(str(tmp_path / "a.tfrecord"), payloads)
  with open(path, "rb") as f:
    assert f.read() == b"".join(tfrecord_index.frame_record(p) for p in payloads)
  assert tfrecord_index.read_records(path) == payloads


def test_index_offsets_and_sizes(shards):
  for path in shards:
    entries = tfrecord_index.scan_index(path)
    sizes = [len(p) + 16 for p in tfrecord_index.read_records(path)]
    assert [size for _, size in entries] == sizes
    assert [offset for offset, _ in entries] == list(np.cumsum([0] + sizes[:-1]))
    assert sum(sizes) == os.path.getsize(path)


def test_index_matches_dali_tool_byte_for_byte(shards, tmp_path):
  dali_tool = find_dali_tool()
  if dali_tool is None and dali_tool_hash() is not None:  # DALI installed: make install saves it
    pytest.fail("DALI is installed but its own tfrecord2idx is not found (sha256 %s from the "
                "nvidia-dali RECORD): make install saves it as .venv/bin/dali-tfrecord2idx before "
                "bert_fin's console script of the same name replaces it" % dali_tool_hash())
  if dali_tool is None:
    pytest.skip("DALI's own tfrecord2idx not found (sha256 %s from the nvidia-dali RECORD): "
                "bert_fin's `tfrecord2idx` console script overwrote .venv/bin/tfrecord2idx; set "
                "DALI_TFRECORD2IDX to a copy of DALI's script (or save it as "
                ".venv/bin/dali-tfrecord2idx)" % dali_tool_hash())
  for path in shards:
    ours, theirs = str(tmp_path / "ours.idx"), str(tmp_path / "dali.idx")
    assert tfrecord2idx.main([path, ours]) == 0
    subprocess.run([sys.executable, dali_tool, path, theirs], check=True, capture_output=True,
                   env=dict(os.environ, CUDA_VISIBLE_DEVICES="", TF_CPP_MIN_LOG_LEVEL="3"))
    with open(ours, "rb") as a, open(theirs, "rb") as b:
      assert a.read() == b.read()


def corrupt(path, offset, transform):
  with open(path, "r+b") as f:
    f.seek(offset)
    byte = f.read(1)
    f.seek(offset)
    f.write(bytes([transform(byte[0])]))


@pytest.mark.parametrize("record,where,reason", [
    (5, "data", "data CRC32C mismatch"),
    (9, "length", "corrupt length field"),
    (0, "data_crc", "data CRC32C mismatch"),
])
def test_corruption_names_file_record_offset(shards, tmp_path, record, where, reason):
  path = copy_to(tmp_path, shards[1])
  offset, size = tfrecord_index.scan_index(path)[record]
  position = {"data": offset + 12 + (size - 16) // 2, "length": offset + 1,
              "data_crc": offset + size - 2}[where]
  corrupt(path, position, lambda b: b ^ 0x20)
  with pytest.raises(tfrecord_index.TFRecordError) as error:
    tfrecord_index.scan_index(path)
  assert (error.value.path, error.value.record_number, error.value.offset) == (path, record, offset)
  assert reason in str(error.value)
  assert "%s: record %d at byte offset %d" % (path, record, offset) in str(error.value)


@pytest.mark.parametrize("cut", ["mid_data", "mid_header", "before_footer"])
def test_truncation_detected_and_no_index_written(shards, tmp_path, capsys, cut):
  path = copy_to(tmp_path, shards[2])
  entries = tfrecord_index.scan_index(path)
  offset, size = entries[-3]
  keep = {"mid_data": offset + size // 2, "mid_header": offset + 5,
          "before_footer": offset + size - 1}[cut]
  with open(path, "r+b") as f:
    f.truncate(keep)
  index = path + ".idx"
  assert tfrecord2idx.main([path]) == 1
  message = capsys.readouterr().err
  assert "%s: record %d at byte offset %d" % (path, len(entries) - 3, offset) in message
  assert "trunc" in message
  assert not os.path.exists(index)
  assert os.listdir(str(tmp_path)) == [os.path.basename(path)]  # no temp file left behind


def test_failed_rebuild_keeps_old_index_whole(shards, tmp_path):
  path = copy_to(tmp_path, shards[0])
  assert tfrecord2idx.main([path]) == 0
  with open(path + ".idx", "rb") as f:
    before = f.read()
  corrupt(path, os.path.getsize(path) - 100, lambda b: b ^ 1)
  assert tfrecord2idx.main([path]) == 1
  with open(path + ".idx", "rb") as f:
    assert f.read() == before


def test_directory_mode_parallel_skips_up_to_date(shards, tmp_path, capsys):
  directory = tmp_path / "d"
  directory.mkdir()
  paths = [copy_to(directory, p) for p in shards]
  assert tfrecord2idx.main([str(directory), "--jobs", "2"]) == 0
  for path in paths:
    assert tfrecord_index.read_index(path + ".idx") == tfrecord_index.scan_index(path)
  assert "indexed 3 file(s)" in capsys.readouterr().err
  assert tfrecord2idx.main([str(directory)]) == 0
  assert "indexed 0 file(s)" in capsys.readouterr().err
  with open(paths[1], "ab") as f:  # appended record: the old index no longer covers the file
    f.write(tfrecord_index.frame_record(b"extra"))
  assert tfrecord2idx.main([str(directory / "*.tfrecord")]) == 0
  assert "indexed 1 file(s)" in capsys.readouterr().err
  assert tfrecord_index.count_index_records(paths[1] + ".idx") == len(
      tfrecord_index.scan_index(paths[1]))
  assert tfrecord2idx.main([str(directory), "--force", "--index_dir", str(tmp_path / "idx")]) == 0
  assert sorted(os.listdir(str(tmp_path / "idx"))) == sorted(  # index + whole-file checksum
      os.path.basename(p) + suffix for p in paths
      for suffix in (tfrecord_index.INDEX_SUFFIX, tfrecord_index.CHECKSUM_SUFFIX))


def test_directory_mode_reports_bad_shard_and_indexes_the_rest(shards, tmp_path, capsys):
  paths = [copy_to(tmp_path, p) for p in shards]
  with open(paths[0], "r+b") as f:
    f.truncate(os.path.getsize(paths[0]) - 3)
  assert tfrecord2idx.main([str(tmp_path), "--jobs", "1"]) == 1
  assert "%s: record" % paths[0] in capsys.readouterr().err
  assert not os.path.exists(paths[0] + ".idx")
  assert all(os.path.exists(p + ".idx") for p in paths[1:])


def test_missing_input_is_a_clear_error(tmp_path, capsys):
  assert tfrecord2idx.main([str(tmp_path / "nothing-*.tfrecord")]) == 2
  assert "no TFRecord shards found" in capsys.readouterr().err


def test_malformed_index_line_is_named(tmp_path):
  index = tmp_path / "x.idx"
  index.write_text("0 20\n20 x\n")
  with pytest.raises(ValueError, match="x.idx:2"):
    tfrecord_index.read_index(str(index))


def test_shim_runs_from_repo_root(shards, tmp_path):
  target = str(tmp_path / "shim.idx")
  result = subprocess.run([sys.executable, "tools/tfrecord2idx.py", shards[0], target], cwd=REPO,
                          capture_output=True, text=True)
  assert result.returncode == 0, result.stderr
  assert tfrecord_index.read_index(target) == tfrecord_index.scan_index(shards[0])
