"""Byte progress: one big input file advances while it is read; the bar ends at the total."""
import io
import multiprocessing

from bert_fin import progress
from bert_fin.text import clean
from bert_fin.text import raw_documents


def _big_text_file(tmp_path, num_docs=3000):
  path = tmp_path / "big.txt"
  path.write_text("".join("第%d篇：上证指数收涨百分之一，成交额放大。\n\n" % i
                          for i in range(num_docs)), encoding="utf-8")
  return str(path)


def test_a_single_file_reports_bytes_as_it_is_read(tmp_path):
  path = _big_text_file(tmp_path)
  size = len(open(path, "rb").read())
  counter = multiprocessing.Value("q", 0)
  clean._init_worker(clean.CleanConfig(), frozenset(), counter)  # pylint: disable=protected-access
  seen = []
  reader = raw_documents.FileReader(path)
  for _ in clean._documents_with_progress(reader):  # pylint: disable=protected-access
    seen.append(counter.value)
  assert counter.value == size
  assert len(seen) == 3000
  middle = seen[len(seen) // 2]
  assert 0 < middle < size  # half-way through the documents, part of the bytes: not 0/1 file
  assert seen == sorted(seen)


def test_the_bar_counts_to_the_total_and_disabled_does_nothing(tmp_path, capsys):
  bar = progress.ByteProgress(1000, "test", enabled=True)
  with bar:
    progress.add(bar.counter, 400)
    progress.add(bar.counter, 600)
  assert bar._bar.n == 1000  # pylint: disable=protected-access
  assert "test: 100%" in capsys.readouterr().err
  off = progress.ByteProgress(1000, "test", enabled=False)
  with off:
    progress.add(off.counter, 5)  # no counter: a no-op
  assert off.counter is None


def test_clean_corpus_shows_a_byte_bar_with_the_total(tmp_path, capsys):
  path = _big_text_file(tmp_path, 500)
  out = str(tmp_path / "out.jsonl")
  stats = clean.clean_corpus([path], out, config=clean.CleanConfig(), progress=True)
  assert stats["documents_in"] == 500
  err = capsys.readouterr().err
  assert "clean: 100%" in err


def test_create_pretraining_data_reads_one_big_file_with_a_byte_position(tmp_path):
  from bert_fin.data.create import sentence_documents as data_documents  # pylint: disable=import-outside-toplevel
  path = tmp_path / "corpus.txt"
  path.write_text("".join("第%d篇的第一句。\n第二句。\n\n" % i for i in range(4000)),
                  encoding="utf-8")
  position = data_documents.ReadPosition([str(path)])
  assert position.total == path.stat().st_size and position.bytes_read() == 0
  seen = [position.bytes_read() for _ in data_documents.iter_documents([str(path)], "text",
                                                                       position)]
  assert len(seen) == 4000 and seen == sorted(seen)
  assert 0 < seen[len(seen) // 2] < position.total  # mid-file, not 0 until the file is done
  assert position.bytes_read() == position.total
