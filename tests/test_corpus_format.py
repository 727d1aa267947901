"""One corpus file, one reading: text/corpus_format.py decides a file's format from its name for
every corpus tool, so clean_corpus, shard_corpus, build_vocab, create_pretraining_data (and
adapt_vocab, which reads as it does) and the mpirun ranks' document index read the same documents
from X.NDJSON.gz (upper case, compressed) as from x.jsonl."""
import gzip
import json

import pytest

from helpers.data_tools import read_jsonl
from bert_fin.cli import build_vocab as build_vocab_cli
from bert_fin.cli import clean_corpus as clean_corpus_cli
from bert_fin.data.create import sentence_documents
from bert_fin.data.multihost import document_index
from bert_fin.text import corpus_format
from bert_fin.text import raw_documents
from bert_fin.text import shard
from bert_fin.tokenization import corpus_counts
from bert_fin.tokenization import vocab as vocab_lib

CITIES = "北京上海广州深圳杭州南京成都重庆武汉西安苏州天津"
DOCUMENTS = [["%s第%d份年报披露营业收入同比增长百分之%d。" % (CITIES[i], i, 10 + i),
              "董事会建议每十股派发现金红利%d元，%s分行的净利润创下新高。" % (i + 1, CITIES[-1 - i])]
             for i in range(12)]


@pytest.mark.parametrize("name, expected", [
    ("a.jsonl", "jsonl"), ("A.JSONL", "jsonl"), ("b.json", "jsonl"), ("c.ndjson", "jsonl"),
    ("X.NDJSON.gz", "jsonl"), ("x.Jsonl.GZ", "jsonl"), ("dir.jsonl/part.txt", "text"),
    ("corpus.txt", "text"), ("corpus.txt.gz", "text"), ("corpus.gz", "text"), ("jsonl", "text")])
def test_the_name_decides_the_format_in_any_case_gzip_or_not(name, expected):
  assert corpus_format.format_of(name) == expected
  assert corpus_format.format_of(name, "text") == "text"
  assert corpus_format.format_of(name, "jsonl") == "jsonl"
  assert corpus_format.is_gzip(name) == name.lower().endswith(".gz")


def test_an_unknown_input_format_is_refused():
  with pytest.raises(ValueError, match="unknown input format 'csv'"):
    corpus_format.format_of("a.jsonl", "csv")


def _write(path, documents=DOCUMENTS):
  lines = "".join(json.dumps({"id": "d%d" % i, "sentences": sentences}, ensure_ascii=False) + "\n"
                  for i, sentences in enumerate(documents))
  opener = gzip.open if corpus_format.is_gzip(path) else open
  with opener(str(path), "wt", encoding="utf-8") as f:
    f.write(lines)
  return str(path)


@pytest.mark.parametrize("name", ["X.NDJSON.gz", "X.NDJSON", "corpus.Jsonl.GZ"])
def test_every_corpus_tool_reads_the_same_documents(tmp_path, name, capsys):
  path = _write(tmp_path / name)
  sentences = [s for document in DOCUMENTS for s in document]
  # create_pretraining_data (and adapt_vocab): google's reader of JSON Lines, not its text format
  sentence_documents.check_inputs([path])
  created = list(sentence_documents.iter_documents([path]))
  assert [(d.sentences, d.skip_reason) for d in created] == [(d, None) for d in DOCUMENTS]
  # the mpirun ranks' document index: the same count, a window read from the middle
  scan = document_index.scan_file(path)
  plan = document_index.stream_plan([path], "auto", [scan])
  assert (scan.documents, scan.text) == (len(DOCUMENTS), False)
  assert [d.sentences for d in document_index.iter_range(plan, 3, 7)] == DOCUMENTS[3:7]
  # build_vocab: its reader, its counting pass on two processes, the tool itself
  vocab_lib.check_inputs([path])
  assert list(vocab_lib.iter_sentences([path])) == sentences
  counts = corpus_counts.count_corpus([path], processes=2)
  assert (counts.documents, counts.skipped) == (len(DOCUMENTS), 0)
  assert set(counts.chars) == set("".join(sentences))
  assert build_vocab_cli.main(["--vocab_size", "200", "--output", str(tmp_path / "vocab.txt"),
                               path]) == 0
  tokens = vocab_lib.read_vocab(tmp_path / "vocab.txt")
  assert set("".join(sentences)) <= set(tokens)
  # clean_corpus: its reader, then the tool (every document in, every one out, the same text)
  read = list(raw_documents.FileReader(path, text_field="sentences"))
  assert [(r.text, r.reject) for r in read] == [("\n".join(d), None) for d in DOCUMENTS]
  out = tmp_path / "clean.jsonl"
  assert clean_corpus_cli.main(["--no_progress", "--text_field", "sentences", "--output",
                                str(out), "--stats", str(tmp_path / "stats.json"), path]) == 0
  assert ["".join(r["sentences"]) for r in read_jsonl(out)] == ["".join(d) for d in DOCUMENTS]
  # shard_corpus: every document in one of the shards
  summary = shard.shard_corpus([path], str(tmp_path / "shard"), 2)
  sharded = [r["sentences"] for output in summary["outputs"] for r in read_jsonl(output)]
  assert summary["bad_lines"] == 0 and sorted(sharded) == sorted(DOCUMENTS)
  capsys.readouterr()


def _cut_gzip(path):
  """A gzip file cut in the middle of its stream (an interrupted copy)."""
  lines = "".join(json.dumps({"sentences": ["%s公告第%d号，营业收入增长。" % (CITIES[i % 14], i)]},
                             ensure_ascii=False) + "\n" for i in range(4000)).encode("utf-8")
  data = gzip.compress(lines)
  path.write_bytes(data[:len(data) // 2])
  return str(path)


@pytest.mark.parametrize("kind", ["cut", "not_gzip"])
def test_a_broken_gzip_file_is_one_line_naming_it_in_every_tool(tmp_path, kind, capsys):
  if kind == "cut":
    path, problem = _cut_gzip(tmp_path / "X.NDJSON.gz"), "the gzip file is incomplete"
  else:
    path, problem = str(tmp_path / "X.NDJSON.gz"), "rename the file if it is not one"
    (tmp_path / "X.NDJSON.gz").write_bytes(b'{"sentences": ["plain JSON, not gzip"]}\n' * 50)
  for read in (lambda: list(sentence_documents.iter_documents([path])),
               lambda: document_index.scan_file(path),
               lambda: list(vocab_lib.iter_sentences([path])),
               lambda: corpus_counts.count_corpus([path], processes=1),
               lambda: shard.shard_corpus([path], str(tmp_path / "shard"), 1)):
    with pytest.raises(OSError, match=problem) as raised:
      read()
    assert str(raised.value).startswith(path)
  assert build_vocab_cli.main(["--vocab_size", "200", "--output", str(tmp_path / "v.txt"),
                               path]) == 2
  assert clean_corpus_cli.main(["--no_progress", "--text_field", "sentences", "--output",
                                str(tmp_path / "clean.jsonl"), path]) == 2
  errors = capsys.readouterr().err
  assert "build_vocab: error: %s" % path in errors and "clean_corpus: error:" in errors
  assert not (tmp_path / "v.txt").exists() and not (tmp_path / "clean.jsonl").exists()
