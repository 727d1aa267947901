"""create_pretraining_data on faulty input (first collected in issue 15): temp files never taken as
shards, empty or binary input, bad vocab / user dict, a high [UNK] rate. Tiny generated data."""
import logging
import os
import random
import subprocess
import sys

import pytest

from bert_fin import io_utils
from bert_fin import tokenization
from bert_fin.data.create import fast
from bert_fin.text import segment
from helpers import PRETRAINING_FIXTURES, REPO
from helpers.data_tools import tiny_options

os.environ.setdefault("OMP_NUM_THREADS", "1")
VOCAB = os.path.join(PRETRAINING_FIXTURES, "vocab.txt")
TEXT = "\n\n".join("\n".join("宁德时代发布第%d份公告，公司经营情况良好，订单充足。" % (i * 3 + j)
                             for j in range(3)) for i in range(20)) + "\n"


def _cli(argv):
  return subprocess.run([sys.executable, os.path.join(REPO, "create_pretraining_data.py")] + argv,
                        capture_output=True, text=True, timeout=300, cwd=REPO,
                        env=dict(os.environ, PYTHONPATH=REPO, TF_CPP_MIN_LOG_LEVEL="3"))


def _dead_pid():
  proc = subprocess.Popen([sys.executable, "-c", "pass"])
  proc.wait()
  return proc.pid


# ---- item 2: a killed run's temp files never reach training; a rerun removes them -------------
def test_a_killed_runs_temp_files_are_skipped_by_readers_and_removed_by_a_rerun(tmp_path, caplog):
  (tmp_path / "in.txt").write_text(TEXT, encoding="utf-8")
  records = tmp_path / "records"
  stale = records / ("%s%s-%d" % (io_utils.TEMP_MARKER, io_utils._host(),  # pylint: disable=protected-access
                                  _dead_pid()))
  stale.mkdir(parents=True)
  (stale / "train.0").write_bytes(b"\x00" * 1000)  # a half-written shard of a killed run
  import tensorflow.compat.v1 as tf  # pylint: disable=import-outside-toplevel
  from bert_fin.input import stream  # pylint: disable=import-outside-toplevel
  (records / "train").write_bytes(b"")  # an existing shard, so the glob matches something real
  assert len(tf.io.gfile.glob(str(records / "*"))) == 2  # gfile matches the dot directory too
  with caplog.at_level(logging.WARNING):
    assert stream.expand_input_files(str(records / "*")) == [str(records / "train")]
  assert "left out 1 temp path" in caplog.text
  with caplog.at_level(logging.WARNING):
    fast.run(tiny_options(tmp_path, tmp_path / "in.txt"))
  assert "removed 1 temp dir(s)" in caplog.text
  assert sorted(os.listdir(records)) == ["train", "train.stats.json"]


# ---- item 3: empty / undecodable input: exit 2, nothing written --------------------------------
@pytest.mark.parametrize("content", [b"", b"\xff\xfe\xfd\n\xfa\xfb\n"])
def test_input_without_usable_text_is_an_error_and_writes_nothing(tmp_path, content):
  (tmp_path / "in.txt").write_bytes(content)
  with pytest.raises(ValueError, match="no training instance"):
    fast.run(tiny_options(tmp_path, tmp_path / "in.txt"))
  assert not os.path.exists(tmp_path / "records") or os.listdir(tmp_path / "records") == []
  result = _cli(["--input_file=%s" % (tmp_path / "in.txt"), "--vocab_file=%s" % VOCAB,
                 "--output_file=%s" % (tmp_path / "records" / "train"), "--noprogress"])
  assert result.returncode == 2, result.stderr[-2000:]
  assert "create_pretraining_data: error: no training instance" in result.stderr
  assert "Traceback" not in result.stderr


# ---- item 8: a binary file in google text mode is counted, not turned into instances ----------
def test_a_binary_file_in_text_mode_is_skipped_and_counted(tmp_path):
  rng = random.Random(0)
  (tmp_path / "a.txt").write_text(TEXT, encoding="utf-8")
  noise = bytearray(rng.randrange(256) for _ in range(20000))
  for i in range(0, len(noise), 50):  # lines that decode, as in many binary files
    noise[i:i + 20] = "公司经营情况良好订单充足\n".encode("utf-8")[:20]
  (tmp_path / "b.bin").write_bytes(bytes(noise))
  stats = fast.run(tiny_options(tmp_path, "%s,%s" % (tmp_path / "a.txt", tmp_path / "b.bin"),
                                input_format="text"))
  assert stats["documents_skipped"].get("binary") == 1
  assert stats["documents_used"] == 20


# ---- item 13: user dict and vocab file mistakes ------------------------------------------------
def test_negative_user_dict_frequency_names_file_and_line(tmp_path):
  (tmp_path / "dict.txt").write_text("贵州茅台 10\n宁德时代 -5 nt\n", encoding="utf-8")
  with pytest.raises(ValueError, match=r"dict\.txt:2: frequency '-5'"):
    segment.read_user_dict(str(tmp_path / "dict.txt"))


def test_vocab_with_a_bom_is_read_with_a_warning_and_duplicates_warn(tmp_path, caplog):
  tokens = open(VOCAB, encoding="utf-8").read().split("\n")
  (tmp_path / "bom.txt").write_text("\ufeff" + "\n".join(tokens), encoding="utf-8")
  with caplog.at_level(logging.WARNING):
    vocab = tokenization.load_vocab(str(tmp_path / "bom.txt"))
  assert vocab["[PAD]"] == 0 and "byte order mark" in caplog.text
  caplog.clear()
  (tmp_path / "dup.txt").write_text("\n".join(tokens + ["[UNK]"]), encoding="utf-8")
  with caplog.at_level(logging.WARNING):
    tokenization.load_vocab(str(tmp_path / "dup.txt"))
  assert "1 duplicate token" in caplog.text and "[UNK]" in caplog.text


# ---- item 14: [UNK] rate above 1% is explained -------------------------------------------------
def test_a_high_unk_rate_warns_with_the_reason(tmp_path, caplog):
  raw = TEXT.replace("公司", "ＡＢＣ䶵䶴")  # characters the vocab lacks (full-width, rare CJK)
  (tmp_path / "in.txt").write_text(raw, encoding="utf-8")
  with caplog.at_level(logging.WARNING):
    stats = fast.run(tiny_options(tmp_path, tmp_path / "in.txt"))
  assert stats["unk_rate"] > 0.01
  assert "[UNK] rate" in caplog.text and "clean_corpus" in caplog.text
