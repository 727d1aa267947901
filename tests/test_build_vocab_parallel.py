"""build_vocab's counting on several processes (tokenization/corpus_counts.py): byte ranges on
document boundaries in both input formats, counts equal to the single-process reader's for any
split and process count, --max_docs as the first N documents, --sample as a hash-picked share the
same for any split, the [UNK] counts, the same vocab.txt bytes for 1 and 2 processes, and
one-line refusals of bad subset flags. Ranges are made tiny so small files split."""
import collections
import json

import pytest

from bert_fin.cli import build_vocab as cli
from bert_fin.tokenization import corpus_counts
from bert_fin.tokenization import vocab as vocab_lib
from bert_fin.tokenization import wordpiece_trainer
from helpers.data_tools import EARNINGS_REPORTS, one_error_line


@pytest.fixture(autouse=True)
def _tiny_ranges(monkeypatch):
  monkeypatch.setattr(corpus_counts, "MIN_RANGE_BYTES", 64)


def _jsonl(path):
  """Documents of 1-3 sentences, a line without the text field, a blank line, CRLF endings."""
  with open(path, "w", encoding="utf-8", newline="") as f:
    for i in range(40):
      sentences = [EARNINGS_REPORTS[(i + j) % len(EARNINGS_REPORTS)] for j in range(i % 3 + 1)]
      f.write(json.dumps({"id": str(i), "sentences": sentences}, ensure_ascii=False)
              + ("\r\n" if i % 5 == 0 else "\n"))
      if i == 7:
        f.write('{"id": "x", "text": "无句子字段"}\n\n')
  return str(path)


def _text(path):
  """google's text format: a sentence a line, blank lines (some with spaces) between documents."""
  docs = ["\n".join(EARNINGS_REPORTS[i:i + 1 + i % 3]) for i in range(0, 45, 2)]
  path.write_text("\n\n".join(docs[:10]) + "\n  \n" + "\n\n".join(docs[10:]) + "\n",
                  encoding="utf-8")
  return str(path)


def _reference(paths, max_docs=0):
  """What one process counted before: the words and characters of vocab.iter_sentences."""
  chars, skipped = collections.Counter(), {}
  words = wordpiece_trainer.count_words(vocab_lib.counting(
      vocab_lib.iter_sentences(paths, max_docs, skipped=skipped), chars))
  return words, chars, skipped.get("documents", 0)


@pytest.mark.parametrize("make", [_jsonl, _text])
def test_ranges_start_at_documents_and_cover_every_byte(tmp_path, make):
  path = make(tmp_path / ("c.jsonl" if make is _jsonl else "c.txt"))
  ranges = corpus_counts.split_ranges([path], processes=4)
  data = open(path, "rb").read()
  assert len(ranges) > 4 and ranges[0].start == 0 and ranges[-1].end == len(data)
  assert all(a.end == b.start for a, b in zip(ranges, ranges[1:]))
  for one in ranges[1:]:
    before = data[:one.start]
    assert before.endswith(b"\n")
    if make is _text:  # after a blank line
      assert not before[:-1].rsplit(b"\n", 1)[-1].strip()
  assert sum(corpus_counts.count_documents(one) for one in ranges) == (41 if make is _jsonl
                                                                       else 23)


def test_ranges_of_a_large_file_stay_bounded_for_one_process(tmp_path, monkeypatch):
  """A worker's Counters hold one range's distinct chunks: ranges stay near MAX_RANGE_BYTES
  however few the processes, and the counts are the same as with one range."""
  path = _jsonl(tmp_path / "a.jsonl")
  reference = corpus_counts.count_corpus([path], 1)
  monkeypatch.setattr(corpus_counts, "MAX_RANGE_BYTES", 512)
  ranges = corpus_counts.split_ranges([path], processes=1)
  longest_line = max(len(line) for line in open(path, "rb"))
  assert len(ranges) > 4 and max(r.end - r.start for r in ranges) <= 512 + longest_line
  counts = corpus_counts.count_corpus([path], 1)
  assert (counts.words, counts.chars, counts.documents) == (
      reference.words, reference.chars, reference.documents)


@pytest.mark.parametrize("processes", [1, 2])
def test_counts_equal_the_single_process_reader(tmp_path, processes):
  paths = [_jsonl(tmp_path / "a.jsonl"), _text(tmp_path / "b.txt")]
  counts = corpus_counts.count_corpus(paths, processes)
  words, chars, skipped = _reference(paths)
  assert counts.words == words and counts.chars == chars and counts.skipped == skipped == 1
  assert counts.documents == 41 + 23
  for max_docs in (1, 9, 30, 50, 1000):  # across range and file boundaries
    counts = corpus_counts.count_corpus(paths, processes, max_docs=max_docs)
    words, chars, _ = _reference(paths, max_docs)
    assert (counts.words, counts.chars) == (words, chars), max_docs
    assert counts.documents == min(max_docs, 64)


def test_sample_is_a_share_picked_by_content_whatever_the_split(tmp_path, monkeypatch):
  path = _jsonl(tmp_path / "a.jsonl")
  one = corpus_counts.count_corpus([path], 1, sample=0.5)
  monkeypatch.setattr(corpus_counts, "MIN_RANGE_BYTES", 1 << 30)  # one range
  whole = corpus_counts.count_corpus([path], 1, sample=0.5)
  assert (one.words, one.chars, one.documents) == (whole.words, whole.chars, whole.documents)
  assert 8 < one.documents < 33 and sum(one.chars.values()) < sum(
      corpus_counts.count_corpus([path], 1).chars.values())
  assert corpus_counts.count_corpus([path], 1, sample=1.0).documents == 41


def test_the_first_documents_are_cut_for_every_process(tmp_path):
  """max_docs documents lying in the file split's first ranges are cut again so every process
  gets work (the [UNK] pass reads a fixed number of documents of a large corpus); the ranges
  still hold exactly the first max_docs documents, in order."""
  # pylint: disable=protected-access
  path = _jsonl(tmp_path / "a.jsonl")
  whole = corpus_counts.split_ranges([path], processes=2)
  first_two = sum(corpus_counts.count_documents(one) for one in whole[:2])
  kept = corpus_counts._ranges([path], 2, "auto", first_two)
  assert len(corpus_counts._first_documents(whole, first_two)) <= 2 < len(kept)
  assert kept[0].start == 0 and all(a.end == b.start for a, b in zip(kept, kept[1:]))
  read = [d for one in kept for d in list(corpus_counts._documents(one))[:one.max_docs or None]]
  in_file = corpus_counts._documents(corpus_counts.Range(path, 0, whole[-1].end, True))
  assert read == list(in_file)[:first_two]
  assert (corpus_counts.count_corpus([path], 2, max_docs=first_two).words
          == corpus_counts.count_corpus([path], 1, max_docs=first_two).words)


def _write_vocab(path, chars):
  """A vocab of [PAD]/[unused]/[UNK].. and each character of `chars` once (first occurrence)."""
  path.write_text("".join(t + "\n" for t in vocab_lib.google_layout(list(dict.fromkeys(chars)),
                                                                     200)),
                  encoding="utf-8")
  return str(path)


def test_unk_counts_equal_the_single_process_rate(tmp_path):
  paths = [_jsonl(tmp_path / "a.jsonl"), _text(tmp_path / "b.txt")]
  vocab_file = _write_vocab(tmp_path / "vocab.txt", "公司营业收入增长净利润")
  tokenizer = vocab_lib.GoogleTokenizer(vocab_lib.read_vocab(vocab_file), vocab_file=vocab_file)
  for max_docs in (12, 0):
    _, unk, total = vocab_lib.unk_rate(tokenizer, vocab_lib.iter_sentences(paths, max_docs))
    assert corpus_counts.unk_counts(paths, vocab_file, 2, max_docs=max_docs) == (unk, total, 1)
    assert 0 < unk < total
  assert corpus_counts.unk_counts(paths, vocab_file, 1)[0] == unk
  # another vocab at the same path, in this process: counted with it, not a cached tokenizer
  _write_vocab(tmp_path / "vocab.txt", "公司营业收入增长净利润招商银行公布第季度业绩同比不良贷款率保持稳定")
  assert corpus_counts.unk_counts(paths, vocab_file, 1)[0] < unk


def test_two_processes_write_the_vocab_one_writes(tmp_path, capsys):
  paths = [_jsonl(tmp_path / "a.jsonl"), _text(tmp_path / "b.txt")]
  outputs = []
  for processes in ("1", "2"):
    out = tmp_path / ("vocab%s.txt" % processes)
    assert cli.main(["--vocab_size", "400", "--processes", processes, "--output", str(out)]
                    + paths) == 0
    outputs.append(out.read_bytes())
  assert outputs[0] == outputs[1] and len(outputs[0].splitlines()) > 150
  report = json.loads([line for line in capsys.readouterr().out.splitlines()
                       if line.startswith("{")][-1])
  assert report["documents_trained_on"] == 64 and report["documents_without_text_field"] == 1


@pytest.mark.parametrize("flags, message", [
    (["--sample", "0"], "--sample 0.0: give a share"),
    (["--sample", "1.5"], "--sample 1.5: give a share"),
    (["--sample", "0.5", "--max_docs", "10"], "give one of them"),
    (["--max_docs", "-1"], "must be >= 0"),
])
def test_bad_subset_flags_are_one_line(tmp_path, capsys, flags, message):
  path = _jsonl(tmp_path / "a.jsonl")
  assert cli.main(flags + ["--output", str(tmp_path / "v.txt"), path]) == 2
  assert message in one_error_line(capsys.readouterr().err, "build_vocab")
  assert not (tmp_path / "v.txt").exists()


def test_max_docs_trains_on_the_first_documents(tmp_path, capsys):
  path = _jsonl(tmp_path / "a.jsonl")
  assert cli.main(["--vocab_size", "300", "--max_docs", "5", "--output",
                   str(tmp_path / "v.txt"), path]) == 0
  report = json.loads([line for line in capsys.readouterr().out.splitlines()
                       if line.startswith("{")][-1])
  assert report["documents_trained_on"] == 5
  first_five = vocab_lib.iter_sentences([path], 5)
  chars = {char for sentence in first_five for char in sentence.lower()}
  tokens = set(vocab_lib.read_vocab(tmp_path / "v.txt"))
  assert chars - {" "} <= tokens
