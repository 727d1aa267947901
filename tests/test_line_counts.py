"""Bounded-memory line counting for the boilerplate filter (text/line_counts.py)."""
import collections
import os
import random

import numpy as np
import pytest

from bert_fin.text import clean
from bert_fin.text import filters
from bert_fin.text import line_counts


@pytest.mark.parametrize("num_buckets", [1, 2, 16, 256])
def test_frequent_digests_equal_an_in_memory_count(tmp_path, num_buckets):
  rng = random.Random(num_buckets)
  pool = [filters.line_digest("line %d" % i) for i in range(300)]
  batches = [[rng.choice(pool) for _ in range(rng.choice([0, 1, 50, 400]))] for _ in range(30)]
  naive = collections.Counter(d for batch in batches for d in batch)
  with line_counts.LineCounter(num_buckets, str(tmp_path)) as counter:
    for batch in batches:
      counter.add(line_counts.digests_to_array(batch))
    assert counter.added == sum(naive.values())
    for min_docs in (1, 3, 40):
      assert counter.frequent(min_docs) == {d for d, n in naive.items() if n >= min_docs}
  assert os.listdir(str(tmp_path)) == []  # the bucket files are gone


def test_bucket_count_follows_the_corpus_size_within_bounds():
  assert line_counts.buckets_for(0) == 16
  sizes = [line_counts.buckets_for(n << 30) for n in (1, 8, 64, 10 ** 4)]
  assert sizes == sorted(sizes) and sizes[-1] == line_counts.MAX_BUCKETS
  assert all(s & (s - 1) == 0 for s in sizes)
  with pytest.raises(ValueError):
    line_counts.LineCounter(3)


def test_clean_finds_the_same_boilerplate_with_any_bucket_count(tmp_path):
  footer = "免责声明：本报告仅供参考，不构成任何投资建议。"
  rng = random.Random(0)
  for f in range(3):
    docs = ["公司第%d号公告第%d条，经营正常。\n%s" % (f, i, footer if rng.random() < 0.7 else "无")
            for i in range(20)]
    (tmp_path / ("in%d.txt" % f)).write_text("\n\n".join(docs), encoding="utf-8")
  paths = sorted(str(p) for p in tmp_path.glob("in*.txt"))
  config = clean.CleanConfig(filter_config=filters.FilterConfig(boilerplate_min_docs=5))
  found = [clean.find_frequent_lines(paths, config, processes=p, work_dir=str(tmp_path),
                                     num_buckets=b) for p, b in ((1, 1), (2, 16), (1, 256))]
  assert found[0] == found[1] == found[2] == {filters.line_digest(footer),
                                              filters.line_digest("无")}
  assert not [p for p in os.listdir(str(tmp_path)) if p.startswith(".line-counts-")]
  assert isinstance(line_counts.digests_to_array([]), np.ndarray)
