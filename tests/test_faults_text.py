"""Issue #15 reproducers on the text side (clean_corpus, shard_corpus, build_vocab): bad input is a
counted skip or one clear line, never a silent wrong result or lost data. Tiny generated data."""
import json
import os
import signal
import subprocess
import sys

import pytest

from helpers import REPO
from bert_fin import io_utils
from bert_fin.cli import build_vocab as vocab_cli
from bert_fin.cli import shard_corpus as shard_cli
from bert_fin.text import clean
from bert_fin.text import documents
from bert_fin.text import filters
from bert_fin.text import shard

NEWS = ["招商银行（600036）公布第%d季度业绩，净利润同比增长%d.5%%，不良贷款率保持稳定。" % (i % 4 + 1, i)
        for i in range(200)]


def _read_jsonl(path):
  with open(path, encoding="utf-8") as f:
    return [json.loads(line) for line in f]


# ---- item 4: one NUL byte must not make a text file binary ------------------------------------
def test_a_nul_byte_near_the_start_keeps_the_text_and_counts_the_byte(tmp_path):
  path = tmp_path / "news.txt"
  path.write_bytes(b"\x00" + "\n\n".join(NEWS).encode("utf-8"))
  reader = documents.FileReader(str(path))
  docs = list(reader)
  assert [d.reject for d in docs] == [None] * len(NEWS)
  assert "\x00" not in docs[0].text and docs[0].text.startswith("招商银行")
  assert reader.decode_errors == 1  # the NUL: dropped and counted
  stats = clean.clean_corpus([str(path)], str(tmp_path / "o.jsonl"))
  assert stats["documents_out"] == len(NEWS) and stats["decode_errors"] == 1


def test_real_binary_data_is_still_binary(tmp_path):
  import random  # pylint: disable=import-outside-toplevel
  rng = random.Random(0)
  noise = bytes(rng.randrange(256) for _ in range(200000))
  (tmp_path / "blob.dat").write_bytes(noise)
  # mostly text at the head, a large binary body (e.g. a text header glued to an image)
  (tmp_path / "glued.txt").write_bytes("\n".join(NEWS[:3]).encode("utf-8") + noise)
  for name in ("blob.dat", "glued.txt"):
    assert [d.reject for d in documents.FileReader(str(tmp_path / name))] == \
        [filters.REASON_BINARY], name


# ---- item 9: encoding detection beyond the first 64 KiB ---------------------------------------
def test_ascii_head_then_gbk_body_decodes_as_gbk(tmp_path):
  head = ("Financial news digest, plain ASCII preamble line %d.\n" % 0) * 2000  # > 64 KiB
  assert len(head) > documents.PROBE_BYTES
  body = "\n\n".join(NEWS).encode("gbk")
  path = tmp_path / "digest.txt"
  path.write_bytes(head.encode("ascii") + b"\n" + body)
  reader = documents.FileReader(str(path))
  docs = list(reader)
  assert reader.decode_errors == 0
  assert reader.encoding == "gb18030"
  assert sum(d.text.startswith("招商银行") for d in docs) == len(NEWS)


@pytest.mark.parametrize("main_codec,odd_codec,detected", [("utf-8", "gbk", "utf-8"),
                                                           ("gbk", "utf-8", "gb18030")])
def test_a_line_in_the_other_codec_is_decoded_not_dropped_or_mojibake(tmp_path, main_codec,
                                                                      odd_codec, detected):
  lines = [s.encode(main_codec) for s in NEWS[:50]] + [NEWS[50].encode(odd_codec)]
  path = tmp_path / "mixed.txt"
  path.write_bytes(b"\n".join(lines) + b"\n")
  reader = documents.FileReader(str(path), text_format="line")
  docs = list(reader)
  assert reader.encoding == detected
  assert reader.decode_errors == 0 and reader.fallback_lines == 1
  assert [d.text.strip() for d in docs] == NEWS[:51]
  stats = clean.clean_corpus([str(path)], str(tmp_path / "o.jsonl"),
                             config=clean.CleanConfig(text_format="line"))
  assert stats["fallback_decoded_lines"] == 1


# ---- item 5: syndicated articles are duplicates, not boilerplate ------------------------------
def test_boilerplate_filter_keeps_one_copy_of_a_syndicated_article(tmp_path):
  article = "\n".join(NEWS[:3])
  footer = "免责声明：本报告仅供参考，不构成任何投资建议，投资者据此操作风险自担。"
  others = ["宁德时代发布第%d份公告，公司经营情况良好，订单充足。\n%s" % (i, footer) for i in range(4)]
  (tmp_path / "in.txt").write_text("\n\n".join([article] * 5 + others), encoding="utf-8")
  config = clean.CleanConfig(filter_config=filters.FilterConfig(boilerplate_min_docs=3))
  stats = clean.clean_corpus([str(tmp_path / "in.txt")], str(tmp_path / "o.jsonl"), None, config)
  docs = _read_jsonl(tmp_path / "o.jsonl")
  assert sum(d["sentences"][0] == NEWS[0] for d in docs) == 1  # one copy kept
  assert stats["filtered"] == {"duplicate": 4}
  assert stats["boilerplate_lines_removed"] == 4  # the footer, in the 4 different documents
  assert all(footer not in d["sentences"] for d in docs)


# ---- item 6: shard_corpus shards appear all at once -------------------------------------------
def _corpus(path, num_docs=400):
  with open(path, "w", encoding="utf-8") as f:
    for i in range(num_docs):
      f.write(json.dumps({"id": str(i), "sentences": [NEWS[i % len(NEWS)]]},
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
    documents.expand_inputs([str(out / "part-*")])
  assert shard_cli.main(["--num_shards", "4", "--output_prefix", str(out / "part"),
                         str(tmp_path / "c.jsonl")]) == 0
  assert sorted(os.listdir(out)) == ["part-%05d-of-00004.jsonl" % i for i in range(4)] + [
      "part.stats.json"]


# ---- item 7: build_vocab keeps the most frequent characters, accepts the input formats --------
def _vocab_corpus(path, rare_chars):
  frequent = "，。的公司增长"
  docs = [{"id": str(i), "sentences": ["%s%s" % (frequent * 3, rare_chars[i % len(rare_chars)])]}
          for i in range(300)]
  with open(path, "w", encoding="utf-8") as f:
    for doc in docs:
      f.write(json.dumps(doc, ensure_ascii=False) + "\n")


def test_build_vocab_keeps_the_most_frequent_characters(tmp_path, capsys):
  rare = "".join(chr(0x4e00 + i) for i in range(200))  # low code points, each seen rarely
  _vocab_corpus(tmp_path / "c.jsonl", rare)
  assert vocab_cli.main(["--vocab_size", "160", "--output", str(tmp_path / "v.txt"),
                         str(tmp_path / "c.jsonl")]) == 0
  tokens = open(tmp_path / "v.txt", encoding="utf-8").read().split("\n")
  for char in "，。的公司增长":  # ，(U+FF0C) and 。(U+3002) sort after most CJK by code point
    assert char in tokens, char
  capsys.readouterr()


def test_build_vocab_reads_google_text_and_a_text_field(tmp_path, capsys):
  text = "\n\n".join("\n".join(NEWS[i:i + 3]) for i in range(0, 60, 3))
  (tmp_path / "g.txt").write_text(text, encoding="utf-8")
  assert vocab_cli.main(["--vocab_size", "300", "--output", str(tmp_path / "v1.txt"),
                         str(tmp_path / "g.txt")]) == 0
  out = capsys.readouterr().out
  assert "[UNK] rate: 0.000000" in out
  with open(tmp_path / "raw.jsonl", "w", encoding="utf-8") as f:
    for sentence in NEWS[:60]:
      f.write(json.dumps({"text": sentence}, ensure_ascii=False) + "\n")
  # the default field is `sentences`: refused, naming the field and the fix
  assert vocab_cli.main(["--vocab_size", "300", "--output", str(tmp_path / "v2.txt"),
                         str(tmp_path / "raw.jsonl")]) == 2
  err = capsys.readouterr().err
  assert "sentences" in err and "--text_field" in err and "Traceback" not in err
  assert not os.path.exists(tmp_path / "v2.txt")
  assert vocab_cli.main(["--vocab_size", "300", "--text_field", "text", "--output",
                         str(tmp_path / "v2.txt"), str(tmp_path / "raw.jsonl")]) == 0
  tokens = open(tmp_path / "v2.txt", encoding="utf-8").read().split()
  assert "招" in tokens and "稳" in tokens
