"""create_pretraining_data on faulty input (collected in issues 15 and 24): temp files never taken
as shards, empty or binary input, bad vocab / user dict, a high [UNK] rate; HTML pages and markup
documents, JSONL without the text field, sentences longer than an instance (faithful truncation in
linear time), an input deleted mid-run. Each is a counted skip or one clear line (exit 2), never a
traceback, a silent drop or a half-written file. Tiny generated data."""
import logging
import os
import random
import subprocess
import sys

import pytest

from bert_fin import io_utils
from bert_fin import tokenization
from bert_fin.data.create import sentence_documents
from bert_fin.data.create import faithful
from bert_fin.data.create import fast
from bert_fin.text import segment
from helpers import FIXTURES, PRETRAINING_FIXTURES, REPO
from helpers.data_tools import ANNOUNCEMENTS, NEWSFLASH, one_error_line, run_program, tiny_options
from helpers.data_tools import write_jsonl, write_text_corpus

os.environ.setdefault("OMP_NUM_THREADS", "1")
VOCAB = os.path.join(PRETRAINING_FIXTURES, "vocab.txt")
PAGE = os.path.join(FIXTURES, "corpus", "page.html")
TEXT = "\n\n".join("\n".join(ANNOUNCEMENTS[i:i + 3]) for i in range(0, 60, 3)) + "\n"


def _dead_pid():
  proc = subprocess.Popen([sys.executable, "-c", "pass"])
  proc.wait()
  return proc.pid


# ---- issue 15 item 2: a killed run's temp files never reach training; a rerun removes them -------
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


# ---- issue 15 item 3: empty / undecodable input: exit 2, nothing written -------------------------
@pytest.mark.parametrize("content", [b"", b"\xff\xfe\xfd\n\xfa\xfb\n"])
def test_input_without_usable_text_is_an_error_and_writes_nothing(tmp_path, content):
  (tmp_path / "in.txt").write_bytes(content)
  with pytest.raises(ValueError, match="no training instance"):
    fast.run(tiny_options(tmp_path, tmp_path / "in.txt"))
  assert not os.path.exists(tmp_path / "records") or os.listdir(tmp_path / "records") == []
  result = run_program("create_pretraining_data.py", [
      "--input_file=%s" % (tmp_path / "in.txt"), "--vocab_file=%s" % VOCAB,
      "--output_file=%s" % (tmp_path / "records" / "train"), "--noprogress"])
  assert result.returncode == 2, result.stderr[-2000:]
  assert "create_pretraining_data: error: no training instance" in result.stderr
  assert "Traceback" not in result.stderr


# ---- issue 15 item 8: a binary file in google text mode is counted, not turned into instances ----
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


# ---- issue 15 item 13: user dict and vocab file mistakes -----------------------------------------
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


# ---- issue 15 item 14: [UNK] rate above 1% is explained ------------------------------------------
def test_a_high_unk_rate_warns_with_the_reason(tmp_path, caplog):
  raw = TEXT.replace("公司", "ＡＢＣ䶵䶴")  # characters the vocab lacks (full-width, rare CJK)
  (tmp_path / "in.txt").write_text(raw, encoding="utf-8")
  with caplog.at_level(logging.WARNING):
    stats = fast.run(tiny_options(tmp_path, tmp_path / "in.txt"))
  assert stats["unk_rate"] > 0.01
  assert "[UNK] rate" in caplog.text and "clean_corpus" in caplog.text


# ---- issue 24 item 1: raw HTML never becomes records of markup -----------------------------------
@pytest.mark.parametrize("mode", [dict(num_workers=2), dict(faithful=True)])
def test_an_html_page_is_refused_before_anything_is_written(tmp_path, mode, monkeypatch):
  corpus = tmp_path / "good.txt"
  write_text_corpus(corpus, [ANNOUNCEMENTS[i:i + 3] for i in range(0, 30, 3)])
  read = []
  monkeypatch.setattr(sentence_documents, "iter_documents", lambda *a, **k: read.append(a) or iter(()))
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
  documents = [ANNOUNCEMENTS[i:i + 3] for i in range(0, 30, 3)]
  documents.insert(4, fragment)  # not the first document: the file itself is text
  corpus = tmp_path / "mixed.txt"
  write_text_corpus(corpus, documents)
  with caplog.at_level(logging.WARNING):
    stats = fast.run(tiny_options(tmp_path, corpus, **mode))
  assert stats["documents_skipped"] == {"markup": 1}
  assert stats["documents_used"] == 10 and stats["instances"] > 0
  assert "1 document(s) skipped: mostly HTML/XML markup" in caplog.text


def test_markup_share_of_prose_and_pages():
  assert sentence_documents.markup_share(ANNOUNCEMENTS[:3]) == 0.0
  prose_with_a_tag = ["网页中的<div>标签用于分组，" + ANNOUNCEMENTS[0]]
  assert not sentence_documents.is_markup(prose_with_a_tag)
  with open(PAGE, encoding="utf-8") as f:
    assert sentence_documents.is_markup(f.read().split("\n"))


# ---- issue 24 item 2: JSONL with the text under another name -------------------------------------
def test_jsonl_without_sentences_names_the_fields_seen_and_the_flag(tmp_path):
  corpus = tmp_path / "newsflash.jsonl"
  write_jsonl(corpus, NEWSFLASH)
  with pytest.raises(ValueError) as refused:
    fast.run(tiny_options(tmp_path, corpus))
  message = str(refused.value)
  assert "newsflash.jsonl:1" in message and "'sentences'" in message
  assert "content, publish_time, title" in message and "--text_field content" in message
  result = run_program("create_pretraining_data.py", ["--input_file=%s" % corpus,
                                                      "--vocab_file=" + VOCAB,
                                                      "--output_file=%s" % (tmp_path / "r"),
                                                      "--noprogress"])
  assert result.returncode == 2
  assert "--text_field content" in one_error_line(result.stderr, "create_pretraining_data")


def test_a_later_line_without_sentences_is_counted_apart_from_bad_json(tmp_path, caplog):
  corpus = tmp_path / "c.jsonl"
  write_jsonl(corpus,
              [{"sentences": ANNOUNCEMENTS[i:i + 3]} for i in range(0, 30, 3)] + NEWSFLASH[:2])
  with corpus.open("a", encoding="utf-8") as f:
    f.write('{"sentences": ["broken\n')
  with caplog.at_level(logging.WARNING):
    stats = fast.run(tiny_options(tmp_path, corpus))
  assert stats["documents_skipped"] == {"no_sentences_field": 2, "bad_json": 1}
  assert '2 JSON line(s) skipped: no "sentences" list' in caplog.text


# ---- issue 24 item 10: a 10 MB line: counted truncation, and faithful mode in linear time --------
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
  documents = [ANNOUNCEMENTS[i:i + 3] for i in range(0, 30, 3)]
  documents[2] = ["".join(ANNOUNCEMENTS)]  # one line of ~1,600 tokens: cut to 29 of them
  corpus = tmp_path / "long.txt"
  write_text_corpus(corpus, documents)
  with caplog.at_level(logging.WARNING):
    stats = fast.run(tiny_options(tmp_path, corpus, **mode))
  assert stats["overlong_sentences"] == 1
  assert "1 sentence(s) are longer than max_seq_length - 3 = 29 tokens" in caplog.text
  roberta = fast.run(tiny_options(tmp_path / "r", corpus, objective="roberta"))
  assert roberta["overlong_sentences"] == 0  # roberta splits long sentences over instances


# ---- issue 24 item 10: an input deleted mid-run --------------------------------------------------
def _two_files_one_deleted_while_read(tmp_path, monkeypatch, victim, at_document):
  """a.txt and b.txt (10 documents each); `victim` is deleted once `at_document` documents of
  the stream were read. Returns the --input_file value."""
  first, second = tmp_path / "a.txt", tmp_path / "b.txt"
  write_text_corpus(first, [ANNOUNCEMENTS[i:i + 3] for i in range(0, 30, 3)])
  write_text_corpus(second, [ANNOUNCEMENTS[i:i + 3] for i in range(30, 60, 3)])
  read = sentence_documents.iter_documents

  def deleted_while_reading(*args, **kwargs):
    for number, document in enumerate(read(*args, **kwargs)):
      if number == at_document:
        os.remove(tmp_path / victim)
      yield document

  monkeypatch.setattr(sentence_documents, "iter_documents", deleted_while_reading)
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
