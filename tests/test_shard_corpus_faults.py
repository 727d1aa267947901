"""shard_corpus on faults (found in issues 15 and 24): shards appear all at once (a failing or
killed run leaves no final shard, a rerun cleans up); lines that are not UTF-8 are counted and
named, and input without a document is one line and exit 2. Tiny generated data."""
import json
import os
import signal
import subprocess
import sys

import pytest

from bert_fin import io_utils
from bert_fin.cli import shard_corpus as shard_cli
from bert_fin.text import raw_documents
from bert_fin.text import shard
from helpers import REPO
from helpers.data_tools import ANNOUNCEMENTS, EARNINGS_REPORTS, one_error_line, write_jsonl


# ---- issue 15 item 6: shard_corpus shards appear all at once -------------------------------------
def _corpus(path, num_docs=400):
  with open(path, "w", encoding="utf-8") as f:
    for i in range(num_docs):
      f.write(json.dumps({"id": str(i),
                          "sentences": [EARNINGS_REPORTS[i % len(EARNINGS_REPORTS)]]},
                         ensure_ascii=False) + "\n")


def test_a_failing_shard_corpus_leaves_no_final_shard(tmp_path, monkeypatch):
  _corpus(tmp_path / "c.jsonl")
  writes = []
  original = shard._shuffled_documents  # pylint: disable=protected-access

  def dies_late(bucket_paths, rng):
    for i, item in enumerate(original(bucket_paths, rng)):
      if i == 350:  # after several shards are complete
        raise KeyboardInterrupt("killed")
      writes.append(i)
      yield item

  monkeypatch.setattr(shard, "_shuffled_documents", dies_late)
  with pytest.raises(KeyboardInterrupt):
    shard.shard_corpus([str(tmp_path / "c.jsonl")], str(tmp_path / "out" / "part"), 4)
  assert len(writes) == 350
  assert os.listdir(tmp_path / "out") == []


def test_a_killed_shard_corpus_leaves_no_final_shard_and_a_rerun_cleans_up(tmp_path):
  _corpus(tmp_path / "c.jsonl", 4000)
  out = tmp_path / "out"
  script = ("import sys, os, signal\n"
            "from bert_fin.text import shard\n"
            "original = shard._shuffled_documents\n"
            "def dies(paths, rng):\n"
            "  for i, item in enumerate(original(paths, rng)):\n"
            "    if i == 3500: os.kill(os.getpid(), signal.SIGKILL)\n"
            "    yield item\n"
            "shard._shuffled_documents = dies\n"
            "shard.shard_corpus([sys.argv[1]], sys.argv[2], 4)\n")
  result = subprocess.run([sys.executable, "-c", script, str(tmp_path / "c.jsonl"),
                           str(out / "part")], cwd=REPO, capture_output=True, timeout=120,
                          check=False, env=dict(os.environ, PYTHONPATH=REPO))
  assert result.returncode == -signal.SIGKILL, result.stderr
  leftovers = os.listdir(out)
  assert leftovers and all(io_utils.is_temp_path(name) for name in leftovers)
  with pytest.raises(FileNotFoundError):  # no shard under a final name
    raw_documents.expand_inputs([str(out / "part-*")])
  assert shard_cli.main(["--num_shards", "4", "--output_prefix", str(out / "part"),
                         str(tmp_path / "c.jsonl")]) == 0
  assert sorted(os.listdir(out)) == ["part-%05d-of-00004.jsonl" % i for i in range(4)] + [
      "part.stats.json"]


# ---- issue 24 item 10: binary, GBK or empty input ------------------------------------------------
def test_shard_corpus_counts_and_names_lines_that_are_not_utf8(tmp_path, capsys):
  good = tmp_path / "good.jsonl"
  write_jsonl(good, [{"sentences": [s]} for s in ANNOUNCEMENTS[:4]])
  gbk = tmp_path / "gbk.jsonl"
  gbk.write_bytes(json.dumps({"sentences": ANNOUNCEMENTS[:1]}, ensure_ascii=False).encode("gbk")
                  + b"\n")
  prefix = str(tmp_path / "s")
  assert shard_cli.main(["--num_shards", "2", "--output_prefix", prefix, str(good), str(gbk)]) == 0
  captured = capsys.readouterr()
  assert "gbk.jsonl:1 skipped (not UTF-8)" in captured.out and "Traceback" not in captured.err
  assert json.load(open(prefix + ".stats.json"))["bad_lines"] == 1
  assert shard_cli.main(["--num_shards", "2", "--output_prefix", prefix + "2", str(gbk)]) == 2
  err = one_error_line(capsys.readouterr().err, "shard_corpus")
  assert "no document in the input" in err and "gbk.jsonl:1: not UTF-8" in err
