"""MinHash + LSH maths (text/dedup/near_dup.py) and the on-disk clusters (text/dedup/near_dup_clusters.py):
shingles of Chinese and Latin text, short texts, the estimate against exact Jaccard, the banding
choice, and clusters that do not depend on how the documents were added or bucketed."""
import numpy as np
import pytest

from bert_fin.text.dedup import near_dup
from bert_fin.text.dedup import near_dup_clusters

NEWS = ("贵州茅台发布年度报告，公司全年实现营业收入一千二百亿元，同比增长百分之十八，归属于上市公司股东"
        "的净利润六百亿元。董事会建议每股派发现金红利三十元，分红总额创历史新高。公司表示将继续推进渠道"
        "改革，稳步扩大直营比例，并加大对海外市场的投入，力争在三年内把海外收入占比提高到百分之十以上。")


def _exact_jaccard(left, right):
  left, right = set(near_dup.shingle_hashes(left).tolist()), set(
      near_dup.shingle_hashes(right).tolist())
  return len(left & right) / len(left | right)


def test_chinese_shingles_are_character_5_grams_and_latin_ones_word_5_grams():
  assert len(near_dup.shingle_hashes(NEWS)) == len(NEWS) - 4
  assert len(near_dup.token_hashes("Apple iPhone 15 销量")) == 6  # 2 words + 2 digits + 2 characters
  english = "Apple reported quarterly revenue of ninety billion dollars"
  assert len(near_dup.shingle_hashes(english)) == len(english.split()) - 4
  assert (near_dup.shingle_hashes("APPLE   reported") == near_dup.shingle_hashes(
      "apple reported")).all()  # case and spacing do not matter, words do
  assert not np.array_equal(near_dup.token_hashes("ab"), near_dup.token_hashes("ba"))


def test_short_texts_have_one_shingle_of_their_own():
  short = [near_dup.shingle_hashes(text) for text in ("涨停！", "跌停！", "涨 停！", "涨停")]
  assert [len(s) for s in short] == [1, 1, 1, 1]
  assert short[0][0] == short[2][0]  # the same tokens
  assert len({s[0] for s in short[:2]} | {short[3][0]}) == 3  # different ones never collide
  assert len(near_dup.shingle_hashes(" \n ")) == 0
  rows = near_dup.signatures(["涨停！", "跌停！", " "])
  assert near_dup.has_shingles(rows).tolist() == [True, True, False]
  assert near_dup.similarity(rows[0], rows[1])[0] == 0.0
  assert near_dup.similarity(rows[2], rows[2])[0] == 0.0  # no shingle: similar to nothing


def test_signature_estimate_tracks_exact_jaccard_and_is_deterministic():
  rng = np.random.default_rng(0)
  texts, pairs = [NEWS * 3], []
  for edits in (1, 4, 10, 25, 90):
    chars = list(NEWS * 3)
    for position in rng.choice(len(chars), edits, replace=False):
      chars[position] = "变"
    texts.append("".join(chars))
  rows = near_dup.signatures(texts, 256)
  assert rows.dtype == np.uint32 and rows.shape == (len(texts), 256)
  assert np.array_equal(rows, near_dup.signatures(texts, 256))
  for other in range(1, len(texts)):
    exact = _exact_jaccard(texts[0], texts[other])
    assert near_dup.jaccard(texts[0], texts[other]) == pytest.approx(exact, abs=1e-12)
    estimate = near_dup.similarity(rows[0], rows[other])[0]
    pairs.append(exact)
    assert abs(estimate - exact) < 4 * np.sqrt(exact * (1 - exact) / 256) + 0.02, (exact, estimate)
  assert pairs == sorted(pairs, reverse=True) and pairs[-1] < 0.3  # a spread of similarities
  # hashing in one batch or one text at a time gives the same rows
  assert np.array_equal(rows[2:3], near_dup.signatures(texts[2:3], 256))


def test_lsh_params_favour_recall_above_the_threshold():
  for threshold in (0.7, 0.8, 0.9):
    bands, rows = near_dup.lsh_params(threshold, 128)
    assert bands * rows <= 128
    above = near_dup.candidate_probability([threshold + 0.05], bands, rows)[0]
    far_below = near_dup.candidate_probability([threshold - 0.4], bands, rows)[0]
    assert above > 0.6 and far_below < 0.02, (threshold, bands, rows)
  assert near_dup.candidate_probability([0.85], *near_dup.lsh_params(0.8, 128))[0] > 0.99
  with pytest.raises(ValueError):
    near_dup.lsh_params(1.0, 128)


def _texts():
  reprint = "新华社北京1月5日电 " + NEWS + "（责任编辑：王五）"
  corrected = NEWS.replace("十八", "十九")
  other = "宁德时代公布一季度业绩，动力电池出货量保持全球第一，海外工厂建设进展顺利，匈牙利基地预计年内投产。"
  return [NEWS, other, "涨停！", reprint, "跌停！", corrected, other + "。", "涨 停！"]


def test_clusters_keep_the_first_document_whatever_the_split_and_buckets(tmp_path):
  texts = _texts()
  rows = near_dup.signatures(texts)
  results = []
  for split, buckets in ((len(texts), 1), (3, 16), (1, 4)):
    with near_dup_clusters.NearDupIndex(str(tmp_path), 0.8, num_buckets=buckets) as index:
      for start in range(0, len(texts), split):
        index.add(rows[start:start + split])
      results.append(index.clusters())
  first = results[0]
  assert first.removed.tolist() == [3, 5, 6, 7]
  assert first.kept.tolist() == [0, 0, 1, 2]
  assert (first.similarity >= 0.8).all() and first.similarity[-1] == 1.0
  for other in results[1:]:
    assert np.array_equal(other.removed, first.removed) and np.array_equal(other.kept, first.kept)
  assert not [name for name in tmp_path.iterdir()]  # the index removed its files


def test_documents_before_first_removable_are_never_removed(tmp_path):
  texts = _texts()
  with near_dup_clusters.NearDupIndex(str(tmp_path), 0.8) as index:
    index.add(near_dup.signatures(texts[3:4]))  # an earlier batch holds the reprint
    index.add(near_dup.signatures(texts[:3]))
    result = index.clusters(first_removable=1)
  assert result.removed.tolist() == [1] and result.kept.tolist() == [0]


def test_candidate_pairs_of_a_bucket():
  bucket = np.zeros(5, near_dup_clusters._KEY_DTYPE)  # pylint: disable=protected-access
  bucket["key"] = [7, 3, 7, 7, 3]
  bucket["doc"] = [4, 9, 1, 2, 5]
  pairs = near_dup_clusters.candidate_pairs(bucket)
  assert pairs.tolist() == [[1, 2], [1, 4], [2, 4], [5, 9]]


def test_signatures_are_pinned_across_releases():
  """Signatures of earlier batches live beside the seen manifest: a change to the tokens, the
  shingles or the hash family would make them incomparable with new ones without an error. These
  values were computed once; a change here needs a new HASH_SEED (refused for old files)."""
  rows = near_dup.signatures([NEWS, "Apple reported quarterly revenue of 90 billion dollars"])
  assert rows[:, :4].tolist() == [[5773763, 2570841, 66906490, 20429877],
                                  [624927522, 83959068, 305324700, 115308631]]


def _edited(positions):
  return "".join("变" if i in positions else ch for i, ch in enumerate(NEWS))


@pytest.mark.parametrize("positions, exact_side", [((5, 15, 139), True),       # exact 0.84
                                                   ((11, 34, 71, 139), False)])  # exact 0.78
def test_estimates_near_the_threshold_are_settled_by_the_texts(tmp_path, positions, exact_side):
  texts = [NEWS, _edited(positions)]
  exact = near_dup.jaccard(*texts)
  estimate = near_dup.similarity(*near_dup.signatures(texts))[0]
  assert (exact >= 0.8) == exact_side and (estimate >= 0.8) != exact_side  # they disagree
  for given, expected in (((lambda docs: [texts[d] for d in docs.tolist()]), exact_side),
                          (None, not exact_side)):
    with near_dup_clusters.NearDupIndex(str(tmp_path), 0.8) as index:
      index.add(near_dup.signatures(texts))
      result = index.clusters(texts=given, measure_kept=True)
    assert (result.removed.tolist() == [1]) == expected
    if expected and given is not None:
      assert result.jaccard[0] == pytest.approx(exact) and result.exact_checks == 1
