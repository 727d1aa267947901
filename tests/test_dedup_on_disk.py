"""The dedup structures kept on disk so clean_corpus's memory does not grow with the corpus:
exact duplicates decided from bucketed digests (exact_dups.DigestLog) against an in-memory set,
digests that share a bucket but not their value (the bucket-collision path) and repeated ones
across parts; the union-find forest in a file (disk_arrays.UnionFind) against a naive one;
windows and rows read back; the C MinHash against the numpy reference on random texts."""
import random

import numpy as np
import pytest

from bert_fin.text.dedup import disk_arrays
from bert_fin.text.dedup import exact_dups
from bert_fin.text.dedup import near_dup
from bert_fin.text.dedup import seen_manifest


def _write_part(path, digests):
  """A part file's index with these uint64 digests (offsets: 100 bytes a line)."""
  with exact_dups.IndexWriter(str(path)) as index:
    for i, digest in enumerate(digests):
      index.add(int(digest).to_bytes(8, "little"), 100 * i)
  return str(path)


def _reference(parts, drop_duplicates, known):
  """The writing pass's old rule with a set: duplicate, then the manifest, else kept."""
  seen, verdicts = set(), []
  for digests in parts:
    for digest in digests:
      if drop_duplicates and digest in seen:
        verdicts.append(exact_dups.DUPLICATE)
        continue
      seen.add(digest)
      verdicts.append(exact_dups.SEEN if digest in known else exact_dups.KEPT)
  return verdicts


@pytest.mark.parametrize("num_buckets", [1, 16])
@pytest.mark.parametrize("drop_duplicates", [True, False])
def test_verdicts_match_a_set_and_buckets_keep_different_digests_apart(
    tmp_path, num_buckets, drop_duplicates):
  rng = np.random.default_rng(0)
  top = np.uint64(0xABC0000000000000)  # same top bits: one bucket, values that differ below
  pool = np.concatenate([rng.integers(0, 2**63, 40, dtype=np.uint64) * np.uint64(2),
                         top + np.arange(1, 9, dtype=np.uint64)])
  parts = [rng.choice(pool, size) for size in (30, 0, 45, 1)]  # repeats within and across parts
  known = set(pool[::5].tolist())
  manifest_path = tmp_path / "seen.bin"
  seen_manifest.append_block(str(manifest_path), sorted(known))
  paths = [_write_part(tmp_path / ("%d.part" % i), digests) for i, digests in enumerate(parts)]
  with exact_dups.DigestLog(str(tmp_path), num_buckets) as log:
    for path in paths:
      log.add(path)
    log.decide(drop_duplicates, seen_manifest.SeenManifest(str(manifest_path)))
    got = [value for part in range(len(paths)) for window in log.verdicts(part)
           for value in window.tolist()]
    assert [len(list(log.verdicts(part))) for part in range(len(paths))] == [1, 0, 1, 1]
  assert got == _reference([p.tolist() for p in parts], drop_duplicates, known)
  assert (exact_dups.DUPLICATE in got) == drop_duplicates and exact_dups.SEEN in got
  assert exact_dups.KEPT in got
  offsets = exact_dups.read_index(paths[2], 40, 10)["offset"]  # the last 5 of its 45
  assert offsets.tolist() == [4000, 4100, 4200, 4300, 4400]
  assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []  # cleaned up


def test_verdicts_are_read_a_window_at_a_time(tmp_path, monkeypatch):
  monkeypatch.setattr(exact_dups, "WINDOW", 7)
  path = _write_part(tmp_path / "a.part", [5, 6, 5, 7] * 5)
  with exact_dups.DigestLog(str(tmp_path)) as log:
    log.add(path)
    log.decide(True)
    windows = list(log.verdicts(0))
  assert [len(w) for w in windows] == [7, 7, 6]
  assert np.concatenate(windows).tolist() == [0, 0, 1, 0] + [1] * 16


def _naive_roots(count, pairs):
  parent = list(range(count))

  def find(x):
    while parent[x] != x:
      x = parent[x]
    return x
  for left, right in pairs:
    a, b = find(left), find(right)
    parent[max(a, b)] = min(a, b)
  return [find(x) for x in range(count)]


def test_union_find_on_disk_roots_are_the_smallest_member(tmp_path):
  rng = random.Random(1)
  count = 3000
  pairs = [(rng.randrange(count), rng.randrange(count)) for _ in range(1500)]
  forest = disk_arrays.UnionFind(str(tmp_path / "forest"), count)
  for start in range(0, len(pairs), 200):  # joined in chunks, as the clusters are
    chunk = np.array(pairs[start:start + 200], np.int64)
    forest.union(chunk[:, 0], chunk[:, 1])
  expected = _naive_roots(count, pairs)
  assert forest.roots(np.arange(count)).tolist() == expected
  numbers, roots = zip(*forest.non_roots(chunk=512))
  numbers, roots = np.concatenate(numbers), np.concatenate(roots)
  assert numbers.tolist() == [x for x in range(count) if expected[x] != x]
  assert roots.tolist() == [expected[x] for x in numbers.tolist()]
  assert (tmp_path / "forest").stat().st_size == 8 * count
  forest.remove()
  assert not (tmp_path / "forest").exists()


def test_rows_and_windows_are_read_back(tmp_path):
  rows = np.arange(60, dtype="<u4").reshape(20, 3)
  rows.tofile(str(tmp_path / "rows"))
  assert disk_arrays.read_rows(str(tmp_path / "rows"), "<u4", (3,), [7, 2, 7]).tolist() == [
      rows[7].tolist(), rows[2].tolist(), rows[7].tolist()]
  assert disk_arrays.read_window(str(tmp_path / "rows"), "<u4", (3,), 18, 5).tolist() == (
      rows[18:].tolist())
  assert disk_arrays.read_rows(str(tmp_path / "rows"), "<u4", (3,), []).shape == (0, 3)


def _random_texts(rng, count):
  """Texts mixing CJK, Latin words of any case (one longer than _MAX_WORD letters), digits,
  every kind of space, astral characters, 1-4 tokens and none at all."""
  alphabet = (list("贵州茅台发布公告营业收入增长，。！") + list("AbCdEfgXYZ") + list("0123456789")
              + [" ", "\u3000", "\xa0", "\x85", "\n", "\t", "😀", "é"])
  texts = ["", "   ", "a", "涨 停！", "Ab", "x" * 5000 + " tail"]
  for _ in range(count):
    texts.append("".join(rng.choice(alphabet) for _ in range(rng.randint(0, 300))))
  return texts


@pytest.mark.skipif(near_dup._minhash is None,  # pylint: disable=protected-access
                    reason="the C extension is not built (make install builds it)")
@pytest.mark.parametrize("num_perm", [16, 128])
def test_c_signatures_equal_the_numpy_reference(num_perm):
  texts = _random_texts(random.Random(num_perm), 300)
  family = near_dup.hash_family(num_perm)
  reference = near_dup.numpy_signatures(*near_dup.shingle_batch(texts), *family)
  assert np.array_equal(near_dup.signatures(texts, num_perm, family), reference)
  assert (reference[1] == near_dup.EMPTY).all() and not (reference[2] == near_dup.EMPTY).all()
