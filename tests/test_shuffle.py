"""The parent's shuffle and dealing (data/shuffle.py): C and Python give the same records in the
same order, the writer's dealt writes equal its record-by-record writes."""
import os
import random

import pytest

from bert_fin.data import shuffle
from bert_fin.data import writer


def _records(rng, n):
  return [os.urandom(rng.choice([0, 1, 9, 300, 700])) for _ in range(n)]


def test_pack_unpack_round_trip():
  rng = random.Random(0)
  for n in (0, 1, 17):
    records = _records(rng, n)
    assert shuffle.unpack_records(*shuffle.pack_records(records)) == records


@pytest.mark.parametrize("window", [1, 3, 50, 400])
def test_kernel_window_shuffler_equals_python(window):
  rng = random.Random(window)
  python = shuffle.WindowShuffler(window, random.Random(7))
  c = shuffle.KernelWindowShuffler(window, random.Random(7))
  seen = []
  for _ in range(30):
    records = _records(rng, rng.choice([0, 1, 5, 120]))
    seen += records
    want = python.push_many(list(records))
    got = c.push_packed(*shuffle.pack_records(records))
    assert shuffle.unpack_records(*got) == want
    assert python._rng.getstate() == c._rng.getstate()
  want_rest, got_rest = python.drain(), c.drain()
  assert got_rest == want_rest and python._rng.getstate() == c._rng.getstate()
  assert c.drain() == []  # drained means empty
  # nothing lost or duplicated overall (a multiset check independent of the reference)
  python_out = []
  again = shuffle.KernelWindowShuffler(window, random.Random(1))
  for start in range(0, len(seen), 37):
    python_out += shuffle.unpack_records(*again.push_packed(*shuffle.pack_records(
        seen[start:start + 37])))
  python_out += again.drain()
  assert sorted(python_out) == sorted(seen)


def test_kernel_rejects_lengths_that_do_not_match_the_blob():
  c = shuffle.KernelWindowShuffler(4, random.Random(0))
  blob, lengths = shuffle.pack_records([b"abc", b"de"])
  with pytest.raises(ValueError, match="do not add up"):
    c.push_packed(blob + b"x", lengths)
  with pytest.raises(ValueError):
    shuffle.deal_records(blob, lengths, 2, 5, kernel="c")


@pytest.mark.parametrize("num_files", [1, 2, 3])
def test_dealt_writes_equal_record_by_record_writes(tmp_path, num_files):
  rng = random.Random(num_files)
  batches = [_records(rng, rng.choice([0, 1, 4, 11])) for _ in range(12)]
  contents = {}
  for mode in ("many", "c", "python"):
    paths = [str(tmp_path / ("%s-%d" % (mode, i))) for i in range(num_files)]
    with writer.ShardedRecordWriter(paths) as out:
      for records in batches:
        if mode == "many":
          out.write_many(records)
        else:
          blob, lengths = shuffle.pack_records(records)
          out.write_dealt(shuffle.deal_records(blob, lengths, num_files, out.next_file, mode),
                          len(records))
      counts = list(out.counts)
    contents[mode] = ([open(p, "rb").read() for p in paths], counts)
  assert sum(contents["many"][1]) == sum(len(b) for b in batches)
  assert contents["c"] == contents["many"] == contents["python"]
