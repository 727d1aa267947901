"""Issue #24 reproducers on the data paths: markup, JSONL without the text field, zero documents
out, non-UTF-8 or binary input to the JSONL tools, a 10 MB line, a full disk, an input deleted
mid-run. Each is a counted skip or one clear line (exit 2), never a traceback, a silent drop or a
half-written file. Tiny generated data."""
import json
import logging
import os
import random
import resource
import subprocess
import sys

import pytest

from bert_fin.cli import build_vocab as vocab_cli
from bert_fin.cli import clean_corpus as clean_cli
from bert_fin.cli import shard_corpus as shard_cli
from bert_fin.data.create import documents as documents_lib
from bert_fin.data.create import faithful
from bert_fin.data.create import fast
from helpers import FIXTURES, REPO
from helpers.data_tools import tiny_options  # tiny records of the fixture vocab

os.environ.setdefault("OMP_NUM_THREADS", "1")
VOCAB = os.path.join(FIXTURES, "pretraining", "vocab.txt")
PAGE = os.path.join(FIXTURES, "corpus", "page.html")
NEWS = ["宁德时代发布第%d份公告，公司经营情况良好，订单充足。" % i for i in range(60)]
NEWSFLASH = [{"title": "快讯%d" % i, "content": NEWS[i], "publish_time": "2025-06-01"}
             for i in range(6)]


def _text_corpus(path, documents):
  path.write_text("\n\n".join("\n".join(d) for d in documents) + "\n\n", encoding="utf-8")


def _jsonl(path, records):
  path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records),
                  encoding="utf-8")


def _cli(script, argv, **kwargs):
  return subprocess.run([sys.executable, os.path.join(REPO, script)] + argv, capture_output=True,
                        text=True, timeout=300, cwd=REPO,
                        env=dict(os.environ, PYTHONPATH=REPO, TF_CPP_MIN_LOG_LEVEL="3"), **kwargs)


def _one_error_line(stderr, prog):
  lines = [line for line in stderr.splitlines() if "error" in line.lower()]
  assert "Traceback" not in stderr, stderr
  assert len(lines) == 1 and lines[0].startswith(prog + ": error: "), stderr
  return lines[0]


# ---- item 1: raw HTML never becomes records of markup -------------------------------------------
@pytest.mark.parametrize("mode", [dict(num_workers=2), dict(faithful=True)])
def test_an_html_page_is_refused_before_anything_is_written(tmp_path, mode, monkeypatch):
  corpus = tmp_path / "good.txt"
  _text_corpus(corpus, [NEWS[i:i + 3] for i in range(0, 30, 3)])
  read = []
  monkeypatch.setattr(documents_lib, "iter_documents", lambda *a, **k: read.append(a) or iter(()))
  with pytest.raises(ValueError) as refused:
    fast.run(tiny_options(tmp_path, "%s,%s" % (corpus, PAGE), **mode))
  message = str(refused.value)
  assert PAGE in message and "markup" in message and "tools/clean_corpus.py" in message
  assert not read and not (tmp_path / "records").exists()  # refused before reading or writing


@pytest.mark.parametrize("mode", [dict(num_workers=2, block_docs=2), dict(faithful=True)])
def test_markup_documents_inside_a_text_corpus_are_skipped_counted_and_warned(tmp_path, mode,
                                                                            caplog):
  fragment = ['<div class="nav"><a href="/">首页</a><a href="/stock/">股票</a></div>',
              '<p>&nbsp;</p><script>var a = 1;</script>']
  documents = [NEWS[i:i + 3] for i in range(0, 30, 3)]
  documents.insert(4, fragment)  # not the first document: the file itself is text
  corpus = tmp_path / "mixed.txt"
  _text_corpus(corpus, documents)
  with caplog.at_level(logging.WARNING):
    stats = fast.run(tiny_options(tmp_path, corpus, **mode))
  assert stats["documents_skipped"] == {"markup": 1}
  assert stats["documents_used"] == 10 and stats["instances"] > 0
  assert "1 document(s) skipped: mostly HTML/XML markup" in caplog.text


def test_markup_share_of_prose_and_pages():
  assert documents_lib.markup_share(NEWS[:3]) == 0.0
  prose_with_a_tag = ["网页中的<div>标签用于分组，" + NEWS[0]]
  assert not documents_lib.is_markup(prose_with_a_tag)
  with open(PAGE, encoding="utf-8") as f:
    assert documents_lib.is_markup(f.read().split("\n"))


# ---- item 2: JSONL with the text under another name -------------------------------------------
def test_jsonl_without_sentences_names_the_fields_seen_and_the_flag(tmp_path):
  corpus = tmp_path / "newsflash.jsonl"
  _jsonl(corpus, NEWSFLASH)
  with pytest.raises(ValueError) as refused:
    fast.run(tiny_options(tmp_path, corpus))
  message = str(refused.value)
  assert "newsflash.jsonl:1" in message and "'sentences'" in message
  assert "content, publish_time, title" in message and "--text_field content" in message
  result = _cli("create_pretraining_data.py", ["--input_file=%s" % corpus, "--vocab_file=" + VOCAB,
                                               "--output_file=%s" % (tmp_path / "r"),
                                               "--noprogress"])
  assert result.returncode == 2
  assert "--text_field content" in _one_error_line(result.stderr, "create_pretraining_data")


def test_a_later_line_without_sentences_is_counted_apart_from_bad_json(tmp_path, caplog):
  corpus = tmp_path / "c.jsonl"
  _jsonl(corpus, [{"sentences": NEWS[i:i + 3]} for i in range(0, 30, 3)] + NEWSFLASH[:2])
  with corpus.open("a", encoding="utf-8") as f:
    f.write('{"sentences": ["broken\n')
  with caplog.at_level(logging.WARNING):
    stats = fast.run(tiny_options(tmp_path, corpus))
  assert stats["documents_skipped"] == {"no_sentences_field": 2, "bad_json": 1}
  assert '2 JSON line(s) skipped: no "sentences" list' in caplog.text


# ---- item 3: clean_corpus writing zero documents is an error ------------------------------------
def test_clean_corpus_with_a_wrong_text_field_exits_2_naming_the_fields(tmp_path, capsys):
  corpus = tmp_path / "newsflash.jsonl"
  _jsonl(corpus, NEWSFLASH)
  out = tmp_path / "out" / "clean.jsonl"
  status = clean_cli.main(["--no_progress", "--text_field", "WRONG", "--output", str(out),
                           str(corpus)])
  err = capsys.readouterr().err.strip()
  assert status == 2 and len(err.splitlines()) == 1, err
  assert "6 of 6 JSONL document(s) have no 'WRONG' field" in err
  assert "fields seen: content, publish_time, title" in err and "--text_field content" in err
  assert not out.exists() and not (tmp_path / "out" / "clean.jsonl.stats.json").exists()
  assert clean_cli.main(["--no_progress", "--text_field", "content", "--output", str(out),
                         str(corpus)]) == 0
  assert len(out.read_text(encoding="utf-8").splitlines()) == 6


def test_clean_corpus_with_nothing_usable_exits_2_but_an_already_seen_batch_is_done(tmp_path,
                                                                                  capsys):
  rng = random.Random(0)
  (tmp_path / "blob.bin").write_bytes(bytes(rng.randrange(256) for _ in range(5000)))
  out = str(tmp_path / "o.jsonl")
  assert clean_cli.main(["--no_progress", "--output", out, str(tmp_path / "blob.bin")]) == 2
  assert "all 1 input document(s) were filtered (binary: 1)" in capsys.readouterr().err
  short = tmp_path / "short.txt"
  short.write_text("短句。\n\n也短。\n", encoding="utf-8")
  assert clean_cli.main(["--no_progress", "--output", out, str(short)]) == 2
  assert "too_short: 2" in capsys.readouterr().err and not os.path.exists(out)
  # the same batch again against its seen manifest: nothing new is not an error
  text = tmp_path / "news.txt"
  _text_corpus(text, [NEWS[i:i + 2] for i in range(0, 10, 2)])
  manifest = str(tmp_path / "seen.bin")
  argv = ["--no_progress", "--output", out, "--seen_manifest", manifest, str(text)]
  assert clean_cli.main(argv) == 0 and clean_cli.main(argv) == 0
  assert os.path.getsize(out) == 0


# ---- item 10: the JSONL tools given binary, GBK or empty input ----------------------------------
def test_shard_corpus_counts_and_names_lines_that_are_not_utf8(tmp_path, capsys):
  good = tmp_path / "good.jsonl"
  _jsonl(good, [{"sentences": [s]} for s in NEWS[:4]])
  gbk = tmp_path / "gbk.jsonl"
  gbk.write_bytes(json.dumps({"sentences": NEWS[:1]}, ensure_ascii=False).encode("gbk") + b"\n")
  prefix = str(tmp_path / "s")
  assert shard_cli.main(["--num_shards", "2", "--output_prefix", prefix, str(good), str(gbk)]) == 0
  captured = capsys.readouterr()
  assert "gbk.jsonl:1 skipped (not UTF-8)" in captured.out and "Traceback" not in captured.err
  assert json.load(open(prefix + ".stats.json"))["bad_lines"] == 1
  assert shard_cli.main(["--num_shards", "2", "--output_prefix", prefix + "2", str(gbk)]) == 2
  err = _one_error_line(capsys.readouterr().err, "shard_corpus")
  assert "no document in the input" in err and "gbk.jsonl:1: not UTF-8" in err


@pytest.mark.parametrize("name,content,expected", [
    ("blob.jsonl", bytes(range(256)) * 40, "is binary, not text"),
    ("gbk.txt", "\n\n".join(NEWS).encode("gbk"), "is not UTF-8 (looks like gb18030)"),
    ("empty.txt", b"\n\n", "no text in"),
])
def test_build_vocab_refuses_input_it_would_misread(tmp_path, capsys, name, content, expected):
  (tmp_path / name).write_bytes(content)
  out = tmp_path / "vocab.txt"
  assert vocab_cli.main(["--vocab_size", "200", "--output", str(out), str(tmp_path / name)]) == 2
  assert expected in _one_error_line(capsys.readouterr().err, "build_vocab")
  assert not out.exists()


def test_build_vocab_extends_a_base_vocab_with_a_byte_order_mark(tmp_path, capsys):
  corpus = tmp_path / "c.jsonl"
  _jsonl(corpus, [{"sentences": [s]} for s in NEWS])
  with open(VOCAB, "rb") as f:
    (tmp_path / "bom.txt").write_bytes(b"\xef\xbb\xbf" + f.read())
  out = tmp_path / "vocab.txt"
  assert vocab_cli.main(["--base_vocab", str(tmp_path / "bom.txt"), "--output", str(out),
                         str(corpus)]) == 0
  assert out.read_text(encoding="utf-8").split("\n")[0] == "[PAD]"  # no BOM in the token


# ---- item 10: a 10 MB line: counted truncation, and faithful mode in linear time --------------
def _googles_truncate_seq_pair(tokens_a, tokens_b, max_num_tokens, rng):
  """google-research/bert create_pretraining_data.truncate_seq_pair, as written there."""
  while True:
    total_length = len(tokens_a) + len(tokens_b)
    if total_length <= max_num_tokens:
      break
    trunc_tokens = tokens_a if len(tokens_a) > len(tokens_b) else tokens_b
    assert len(trunc_tokens) >= 1
    if rng.random() < 0.5:
      del trunc_tokens[0]
    else:
      trunc_tokens.pop()


def test_faithful_truncation_equals_googles_and_leaves_the_rng_where_google_does():
  for seed in range(200):
    rng = random.Random(seed)
    len_a, len_b, limit = rng.randint(1, 300), rng.randint(1, 300), rng.randint(2, 200)
    ours = [list(range(len_a)), list(range(1000, 1000 + len_b)), random.Random(seed)]
    googles = [list(range(len_a)), list(range(1000, 1000 + len_b)), random.Random(seed)]
    faithful.truncate_seq_pair(ours[0], ours[1], limit, ours[2])
    _googles_truncate_seq_pair(googles[0], googles[1], limit, googles[2])
    assert ours[:2] == googles[:2] and ours[2].random() == googles[2].random()


def test_faithful_truncation_of_a_huge_sentence_finishes():
  """4M tokens, as a 10 MB line gives: google's del-at-front loop would run for hours."""
  code = ("import random; from bert_fin.data.create import faithful; a = list(range(4000000)); "
          "b = [1]; faithful.truncate_seq_pair(a, b, 61, random.Random(0)); "
          "assert len(a) + len(b) == 61")
  result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=240, cwd=REPO)
  assert result.returncode == 0, result.stderr


@pytest.mark.parametrize("mode", [dict(num_workers=2), dict(faithful=True)])
def test_sentences_longer_than_an_instance_are_counted_and_warned(tmp_path, mode, caplog):
  documents = [NEWS[i:i + 3] for i in range(0, 30, 3)]
  documents[2] = ["".join(NEWS)]  # one line of ~1,600 tokens: cut to 29 of them
  corpus = tmp_path / "long.txt"
  _text_corpus(corpus, documents)
  with caplog.at_level(logging.WARNING):
    stats = fast.run(tiny_options(tmp_path, corpus, **mode))
  assert stats["overlong_sentences"] == 1
  assert "1 sentence(s) are longer than max_seq_length - 3 = 29 tokens" in caplog.text
  roberta = fast.run(tiny_options(tmp_path / "r", corpus, objective="roberta"))
  assert roberta["overlong_sentences"] == 0  # roberta splits long sentences over instances


# ---- item 10: a full disk, an input deleted mid-run ---------------------------------------------
def _limit_file_size():
  resource.setrlimit(resource.RLIMIT_FSIZE, (20000, 20000))  # bytes; Python ignores SIGXFSZ


@pytest.mark.parametrize("script,argv", [
    ("tools/clean_corpus.py", ["--no_progress", "--output", "{out}/clean.jsonl", "{corpus}"]),
    ("create_pretraining_data.py", ["--input_file={corpus}", "--output_file={out}/train",
                                    "--vocab_file=" + VOCAB, "--noprogress", "--dupe_factor=20",
                                    "--max_seq_length=32", "--max_predictions_per_seq=5"]),
])
def test_a_full_disk_is_one_line_and_leaves_no_output(tmp_path, script, argv):
  corpus = tmp_path / "news.txt"
  _text_corpus(corpus, [[NEWS[i % 60] + NEWS[(i + 7) % 60] for _ in range(3)]
                        for i in range(400)])
  out = tmp_path / "out"
  argv = [a.format(out=out, corpus=corpus) for a in argv]
  result = _cli(script, argv, preexec_fn=_limit_file_size)
  assert result.returncode == 2, result.stderr[-2000:]
  line = _one_error_line(result.stderr, os.path.basename(script)[:-3])
  assert "File too large" in line and "free space or write elsewhere" in line
  assert not out.exists() or os.listdir(out) == []  # nothing half-written, no temp dir


def _two_files_one_deleted_while_read(tmp_path, monkeypatch, victim, at_document):
  """a.txt and b.txt (10 documents each); `victim` is deleted once `at_document` documents of
  the stream were read. Returns the --input_file value."""
  first, second = tmp_path / "a.txt", tmp_path / "b.txt"
  _text_corpus(first, [NEWS[i:i + 3] for i in range(0, 30, 3)])
  _text_corpus(second, [NEWS[i:i + 3] for i in range(30, 60, 3)])
  read = documents_lib.iter_documents

  def deleted_while_reading(*args, **kwargs):
    for number, document in enumerate(read(*args, **kwargs)):
      if number == at_document:
        os.remove(tmp_path / victim)
      yield document

  monkeypatch.setattr(documents_lib, "iter_documents", deleted_while_reading)
  return "%s,%s" % (first, second)


def test_an_input_deleted_mid_run_is_one_error_and_no_records(tmp_path, monkeypatch):
  inputs = _two_files_one_deleted_while_read(tmp_path, monkeypatch, "b.txt", 1)
  with pytest.raises(OSError) as gone:
    fast.run(tiny_options(tmp_path, inputs, num_workers=2))
  assert gone.value.filename == str(tmp_path / "b.txt")
  records = tmp_path / "records"
  assert not records.exists() or os.listdir(records) == []


def test_an_input_deleted_while_it_is_read_does_not_stop_the_run(tmp_path, monkeypatch):
  """Its open file is still read to the end; the progress count must not stat it again."""
  inputs = _two_files_one_deleted_while_read(tmp_path, monkeypatch, "a.txt", 3)
  stats = fast.run(tiny_options(tmp_path, inputs, num_workers=2))
  assert stats["documents_used"] == 20
