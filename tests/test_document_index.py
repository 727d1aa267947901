"""data/multihost/document_index.py: per-file scans joined into the input stream's numbering, and ranges of
the stream read from the middle equal to the same documents of data/create/sentence_documents.iter_documents."""
import gzip
import json
import os
import random

from bert_fin.data.create import sentence_documents
from bert_fin.data.multihost import document_index


def _text_file(rng, path):
  """google-format text with the edge cases: a document continued into the next file (no blank
  last line), a file starting with a continuation, leading/trailing/only blank lines, whitespace
  lines, undecodable lines, empty files."""
  kind = rng.random()
  lines = []
  if kind < 0.1:
    data = b""
  elif kind < 0.2:
    data = b"\n  \n\n"
  else:
    for _ in range(rng.randint(1, 12)):
      roll = rng.random()
      if roll < 0.3:
        lines.append(rng.choice(["", "  ", "\u3000"]))
      elif roll < 0.35:
        lines.append(None)
      else:
        lines.append("句子%d" % rng.randint(0, 999))
    data = b"\n".join(b"\xff\xfe bad" if line is None else line.encode("utf-8") for line in lines)
    data += rng.choice([b"", b"\n", b"\n\n"])
  if path.endswith(".gz"):
    data = gzip.compress(data)
  with open(path, "wb") as f:
    f.write(data)


def _jsonl_file(rng, path):
  with open(path, "w", encoding="utf-8") as f:
    for i in range(rng.randint(0, 6)):
      roll = rng.random()
      if roll < 0.15:
        f.write("\n")
      elif roll < 0.25:
        f.write("{bad json\n")
      else:
        f.write(json.dumps({"id": "d%d" % i, "sentences": ["文%d" % i, "x"]}) + "\n")


def _corpus(rng, directory):
  paths = []
  for i in range(rng.randint(1, 7)):
    roll = rng.random()
    if roll < 0.25:
      path = os.path.join(directory, "f%02d.jsonl" % i)
      _jsonl_file(rng, path)
    elif roll < 0.3:
      path = os.path.join(directory, "f%02d.bin" % i)
      with open(path, "wb") as f:
        f.write(bytes(rng.getrandbits(8) for _ in range(3000)))
    else:
      path = os.path.join(directory, "f%02d.txt%s" % (i, ".gz" if rng.random() < 0.2 else ""))
      _text_file(rng, path)
    paths.append(path)
  return paths


def test_ranges_read_from_the_middle_equal_the_stream(tmp_path):
  rng = random.Random(0)
  planned = unplanned = 0
  for case in range(150):
    directory = tmp_path / str(case)
    directory.mkdir()
    paths = _corpus(rng, str(directory))
    stream = list(sentence_documents.iter_documents(paths, "auto"))
    scans = [document_index.scan_file(path) for path in paths]
    plan = document_index.stream_plan(paths, "auto", scans)
    assert plan.total == len(stream)
    if plan.starts is None:  # a binary file inside an open document: read from the start
      unplanned += 1
    else:
      planned += 1
    for _ in range(6):
      begin = rng.randint(0, len(stream))
      end = rng.randint(begin, len(stream))
      assert list(document_index.iter_range(plan, begin, end)) == stream[begin:end]
  assert planned > 100 and unplanned >= 1


def test_a_document_continued_across_files_is_counted_once(tmp_path):
  first, second = tmp_path / "a.txt", tmp_path / "b.txt"
  first.write_text("s1\ns2\n\ns3\n", encoding="utf-8")  # s3 is continued by b.txt's s4
  second.write_text("s4\n\ns5\n", encoding="utf-8")
  paths = [str(first), str(second)]
  scans = [document_index.scan_file(p) for p in paths]
  assert [s.documents for s in scans] == [2, 2]
  plan = document_index.stream_plan(paths, "auto", scans)
  assert plan.total == 3 and plan.starts == [(0, 0), (2, 1)]
  docs = list(document_index.iter_range(plan, 1, 3))
  assert [d.sentences for d in docs] == [["s3", "s4"], ["s5"]]
