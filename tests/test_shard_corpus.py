"""Sharding: near-equal characters, seeded shuffle, nothing lost, bounded buckets, warnings."""
import json
import random

import pytest

from bert_fin.cli import shard_corpus as cli
from bert_fin.text import shard


def _write_corpus(path, num_docs=300, seed=0):
  rng = random.Random(seed)
  lines = []
  for i in range(num_docs):
    sentences = ["第%d篇第%d句%s。" % (i, j, "涨" * rng.randrange(1, 60))
                 for j in range(rng.randrange(1, 5))]
    lines.append(json.dumps({"id": "d%d" % i, "source": "s", "sentences": sentences},
                            ensure_ascii=False))
  path.write_text("\n".join(lines) + "\n", encoding="utf-8")
  return lines


def _read_shards(summary):
  shards = []
  for path in summary["outputs"]:
    with open(path, encoding="utf-8") as f:
      shards.append([line.rstrip("\n") for line in f])
  return shards


def test_shards_are_balanced_by_characters_and_keep_every_document(tmp_path):
  lines = _write_corpus(tmp_path / "in.jsonl")
  summary = shard.shard_corpus([str(tmp_path / "in.jsonl")], str(tmp_path / "out/part"), 4,
                               bucket_bytes=2000)  # many small buckets: the bounded-memory path
  shards = _read_shards(summary)
  assert sorted(line for s in shards for line in s) == sorted(lines)
  largest_doc = max(shard.document_chars(line) for line in lines)
  mean = summary["characters"] / 4
  for chars, docs in zip(summary["shard_characters"], shards):
    assert abs(chars - mean) <= largest_doc
    assert chars == sum(shard.document_chars(line) for line in docs)


def test_shuffle_is_seeded_and_crosses_the_whole_corpus(tmp_path):
  _write_corpus(tmp_path / "in.jsonl")
  first = _read_shards(shard.shard_corpus([str(tmp_path / "in.jsonl")], str(tmp_path / "a/p"), 2))
  again = _read_shards(shard.shard_corpus([str(tmp_path / "in.jsonl")], str(tmp_path / "b/p"), 2))
  other = _read_shards(shard.shard_corpus([str(tmp_path / "in.jsonl")], str(tmp_path / "c/p"), 2,
                                          seed=7))
  assert first == again and first != other
  ids = [json.loads(line)["id"] for line in first[0]]
  assert ids != sorted(ids, key=lambda x: int(x[1:]))
  assert max(int(x[1:]) for x in ids) > 150  # the first shard is not just the first half


def test_bad_lines_are_counted_and_too_many_shards_is_an_error(tmp_path, capsys):
  path = tmp_path / "in.jsonl"
  path.write_text('{"sentences": ["一句。"]}\nnot json\n{"sentences": ["二句。"]}\n',
                  encoding="utf-8")
  summary = shard.shard_corpus([str(path)], str(tmp_path / "p"), 2)
  assert summary["bad_lines"] == 1 and summary["documents"] == 2
  assert "in.jsonl:2" in capsys.readouterr().out
  with pytest.raises(ValueError, match="cannot fill"):
    shard.shard_corpus([str(path)], str(tmp_path / "q"), 3)


def test_cli_warns_on_uneven_shard_counts(tmp_path, capsys):
  _write_corpus(tmp_path / "in.jsonl", num_docs=40)
  assert cli.main(["--num_shards", "6", "--output_prefix", str(tmp_path / "p"),
                   str(tmp_path / "in.jsonl")]) == 0
  assert "not a multiple of 4/8" in capsys.readouterr().err
  assert (tmp_path / "p-00005-of-00006.jsonl").exists()
  assert json.loads((tmp_path / "p.stats.json").read_text())["documents"] == 40
  assert cli.main(["--num_shards", "8", "--output_prefix", str(tmp_path / "q"),
                   str(tmp_path / "in.jsonl")]) == 0
  assert "warning" not in capsys.readouterr().err
  assert shard.uneven_worker_counts(16) == [] and shard.uneven_worker_counts(3) == [2, 4, 8]
