"""clean_corpus --seen_manifest: a second batch skips the documents of the first (own stats
reason, accounting identity kept), appends only new ones; the file survives a torn append; one
million hashes take 8 bytes each in memory and are looked up exactly."""
import json
import os

import numpy as np
import pytest

from bert_fin.cli import clean_corpus as cli
from bert_fin.text.dedup import seen_manifest

DOC = "贵州茅台发布年度报告，公司全年实现营业收入一千二百亿元，同比增长百分之十八。董事会建议派发现金红利。"


def _write_lines(path, lines):
  with open(path, "w", encoding="utf-8") as f:
    f.write("".join(line + "\n" for line in lines))
  return str(path)


def _docs(prefix, n):
  return ["%s第%d号公告：%s" % (prefix, i, DOC) for i in range(n)]


def _clean(tmp_path, name, inputs, manifest):
  out = str(tmp_path / (name + ".jsonl"))
  assert cli.main(inputs + ["--output", out, "--text_format", "line", "--seen_manifest",
                            manifest, "--no_progress"]) == 0
  with open(out + ".stats.json", encoding="utf-8") as f:
    stats = json.load(f)
  with open(out, encoding="utf-8") as f:
    kept = [json.loads(line)["sentences"] for line in f]
  assert stats["documents_in"] == stats["documents_out"] + sum(stats["filtered"].values())
  return stats, kept


def test_second_batch_skips_documents_of_the_first(tmp_path):
  manifest = str(tmp_path / "seen.bin")
  first = _write_lines(tmp_path / "a.txt", _docs("甲", 5))
  stats, kept = _clean(tmp_path, "batch1", [first], manifest)
  assert stats["documents_out"] == 5 and seen_manifest.REASON_SEEN not in stats["filtered"]
  assert stats["seen_manifest"] == {"path": manifest, "known_before": 0, "added": 5}
  # Batch 2: three old documents (one from another file format: same text, same hash) + 4 new.
  second = _write_lines(tmp_path / "b.txt", _docs("甲", 3) + _docs("乙", 4))
  stats, kept2 = _clean(tmp_path, "batch2", [second], manifest)
  assert stats["filtered"][seen_manifest.REASON_SEEN] == 3
  assert stats["documents_out"] == 4 and stats["seen_manifest"]["added"] == 4
  assert not {tuple(s) for s in kept} & {tuple(s) for s in kept2}
  assert len(seen_manifest.SeenManifest(manifest)) == 9
  # Batch 1 again: everything seen, nothing appended.
  stats, kept3 = _clean(tmp_path, "batch3", [first], manifest)
  assert kept3 == [] and stats["filtered"][seen_manifest.REASON_SEEN] == 5
  assert stats["seen_manifest"]["added"] == 0


def test_torn_append_is_ignored_then_truncated(tmp_path, capsys):
  path = str(tmp_path / "seen.bin")
  seen_manifest.append_block(path, [1, 2, 3])
  seen_manifest.append_block(path, [4, 5])
  whole = os.path.getsize(path)
  with open(path, "r+b") as f:  # a crash in the middle of the second append
    f.truncate(whole - 7)
  manifest = seen_manifest.SeenManifest(path)
  assert "unfinished append" in capsys.readouterr().err
  assert manifest.known.tolist() == [1, 2, 3]
  assert manifest.seen((4).to_bytes(8, "little")) is False
  assert manifest.commit() == 1
  assert seen_manifest.read_blocks(path)[0].tolist() == [1, 2, 3, 4]
  assert os.path.getsize(path) == whole - 8  # torn block cut off, one 1-hash block appended
  with open(path, "r+b") as f:  # a flipped bit in a complete block: stops there (crc)
    f.seek(len(seen_manifest.MAGIC) + 8)
    f.write(b"\x09")
  assert seen_manifest.read_blocks(path)[0].tolist() == []


def test_not_a_manifest_is_a_clear_error(tmp_path, capsys):
  bogus = _write_lines(tmp_path / "bogus.bin", ["hello"])
  doc = _write_lines(tmp_path / "a.txt", _docs("甲", 1))
  assert cli.main([doc, "--output", str(tmp_path / "o.jsonl"), "--seen_manifest", bogus,
                   "--no_progress"]) == 2
  assert "is not a seen manifest" in capsys.readouterr().err


def test_a_million_hashes_cost_8_bytes_each_and_are_found_exactly(tmp_path):
  rng = np.random.default_rng(0)
  hashes = rng.integers(0, 2 ** 64, size=1_000_000, dtype=np.uint64)
  path = str(tmp_path / "seen.bin")
  seen_manifest.append_block(path, hashes[:600_000])
  seen_manifest.append_block(path, hashes[600_000:])
  assert os.path.getsize(path) == 8 + 2 * 16 + 8 * 1_000_000
  manifest = seen_manifest.SeenManifest(path)
  assert manifest.known.dtype == np.uint64 and manifest.known.nbytes == 8 * len(np.unique(hashes))
  assert manifest.contains(hashes).all()
  others = rng.integers(0, 2 ** 64, size=100_000, dtype=np.uint64)
  assert (manifest.contains(others) == np.isin(others, hashes)).all()
  assert not manifest.contains(others).any()  # 1e5 random 64-bit values: no collision expected
