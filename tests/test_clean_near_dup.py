"""clean_corpus --near_dup_threshold end to end (text/dedup/clean_near_dup.py): which documents of a
handcrafted set go (Chinese reprints, short texts, Latin-only text), the report, the accounting
identity, the same bytes for 1 and 2 processes, incremental batches through --seen_manifest
(including a run killed between its two appends), and one-line refusals of bad flags."""
import json
import os

import pytest

from bert_fin.cli import clean_corpus as cli
from bert_fin.text import clean
from bert_fin.text.dedup import clean_near_dup
from bert_fin.text.dedup import seen_manifest
from bert_fin.text.dedup import seen_signatures

NEWS = ("贵州茅台发布年度报告，公司全年实现营业收入一千二百亿元，同比增长百分之十八，归属于上市公司股东"
        "的净利润六百亿元。董事会建议每股派发现金红利三十元，分红总额创历史新高。公司表示将继续推进渠道"
        "改革，稳步扩大直营比例，并加大对海外市场的投入，力争在三年内把海外收入占比提高到百分之十以上。")
OTHER = "宁德时代公布一季度业绩，动力电池出货量保持全球第一，海外工厂建设进展顺利，匈牙利基地预计年内投产。"
ENGLISH = ("Apple reported quarterly revenue of ninety billion dollars, driven by strong iPhone "
           "sales in emerging markets and steady growth in services, while the board approved "
           "a larger buyback and raised the dividend for the twelfth year in a row, the company "
           "said")
FIRST = [NEWS,                                   # 0 kept
         "新华社北京1月5日电 " + NEWS,              # 1 reprint with a header      -> near dup of 0
         OTHER,                                  # 2 kept
         "涨停！", "跌停！",                        # 3, 4 short, different: both kept
         "涨 停！",                               # 5 the tokens of 3            -> near dup of 3
         ENGLISH,                                # 6 kept
         ENGLISH.replace("said", "says"),        # 7 one word changed           -> near dup of 6
         "Tesla delivered fewer cars than expected as price cuts failed to lift demand."]  # 8
SECOND = [NEWS.replace("十八", "十九") + "（责任编辑：王五）",  # 0 corrected reprint -> of 0 in file a
          "招商银行发布年度业绩公告，净利润同比增长百分之八，不良贷款率保持稳定，资本充足率进一步提升。"]


def _write(path, docs):
  path.write_text("".join(doc + "\n" for doc in docs), encoding="utf-8")
  return str(path)


def _inputs(tmp_path):
  return [_write(tmp_path / "a.txt", FIRST), _write(tmp_path / "b.txt", SECOND)]


def _run(tmp_path, name, inputs, *flags):
  out = tmp_path / name
  args = ["--no_progress", "--text_format", "line", "--min_chars", "1", "--min_cjk_ratio", "0",
          "--near_dup_threshold", "0.8", "--near_dup_report", str(out) + ".report",
          "--output", str(out)] + list(flags) + inputs
  assert cli.main(args) == 0
  stats = json.loads((tmp_path / (name + ".stats.json")).read_text(encoding="utf-8"))
  docs = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
  report = [json.loads(line) for line in (tmp_path / (name + ".report")).read_text(
      encoding="utf-8").splitlines()]
  assert stats["documents_in"] == stats["documents_out"] + sum(stats["filtered"].values())
  assert stats["documents_out"] == len(docs)
  assert not [name for name in os.listdir(tmp_path) if name.startswith(".")]  # no scratch left
  return docs, stats, report


def test_reprints_short_and_latin_near_duplicates_go_the_first_stays(tmp_path):
  inputs = _inputs(tmp_path)
  docs, stats, report = _run(tmp_path, "out.jsonl", inputs)
  a, b = inputs
  assert [d["id"] for d in docs] == ["%s#%d" % (a, i) for i in (0, 2, 3, 4, 6, 8)] + [b + "#1"]
  assert stats["filtered"] == {"near_duplicate": 4}
  assert [(r["id"], r["kept_id"]) for r in report] == [
      (a + "#1", a + "#0"), (a + "#5", a + "#3"), (a + "#7", a + "#6"), (b + "#0", a + "#0")]
  assert [r["source"] for r in report] == [a, a, a, b] and {r["kept_source"] for r in report} == {a}
  assert all(0.8 <= r["similarity"] <= 1.0 for r in report) and report[1]["similarity"] == 1.0
  near = stats["near_dup"]
  assert near["threshold"] == 0.8 and near["num_perm"] == 128 and near["verified_pairs"] >= 4
  assert near["bands"] * near["rows"] <= 128


def test_without_the_flag_every_near_duplicate_is_kept(tmp_path):
  inputs = _inputs(tmp_path)
  out = tmp_path / "plain.jsonl"
  assert cli.main(["--no_progress", "--text_format", "line", "--min_chars", "1",
                   "--min_cjk_ratio", "0", "--output", str(out)] + inputs) == 0
  stats = json.loads((tmp_path / "plain.jsonl.stats.json").read_text(encoding="utf-8"))
  assert stats["documents_out"] == len(FIRST) + len(SECOND) and "near_dup" not in stats


def test_same_bytes_with_one_and_two_processes(tmp_path):
  inputs = _inputs(tmp_path)
  outputs = []
  for processes in (1, 2):
    name = "p%d.jsonl" % processes
    _run(tmp_path, name, inputs, "--processes", str(processes))
    outputs.append(((tmp_path / name).read_bytes(), (tmp_path / (name + ".report")).read_bytes()))
  assert outputs[0] == outputs[1] and outputs[0][1]


def test_batches_are_compared_with_earlier_batches(tmp_path):
  a, b = _inputs(tmp_path)
  manifest = str(tmp_path / "seen.bin")
  _, first, _ = _run(tmp_path, "one.jsonl", [a], "--seen_manifest", manifest)
  assert first["near_dup"]["signatures_added"] == 6 and first["near_dup"]["earlier_documents"] == 0
  third = _write(tmp_path / "c.txt", [OTHER + "另据报道。", "全新的一篇关于光伏行业产能过剩与价格战的深度报道。"])
  docs, second, report = _run(tmp_path, "two.jsonl", [b, third], "--seen_manifest", manifest)
  assert [d["id"] for d in docs] == [b + "#1", third + "#1"]
  assert [(r["id"], r["kept_id"], r["kept_source"]) for r in report] == [
      (b + "#0", a + "#0", a), (third + "#0", a + "#2", a)]
  assert second["near_dup"]["earlier_documents"] == 6 and second["filtered"] == {
      "near_duplicate": 2}
  assert all(r["jaccard"] >= 0.8 for r in report)  # checked on the first batch's output lines
  assert second["near_dup"]["exact_checks"] >= 2
  # the first batch's output moved away: its documents are met by their signatures alone
  os.rename(tmp_path / "one.jsonl", tmp_path / "moved.jsonl")
  fourth = _write(tmp_path / "d.txt", [NEWS + "（完）"])
  docs, moved, report = _run(tmp_path, "four.jsonl", [fourth], "--seen_manifest", manifest)
  assert docs == [] and moved["near_dup"]["exact_checks"] == 0
  assert report[0]["kept_id"] == a + "#0" and report[0]["jaccard"] is None
  assert report[0]["similarity"] >= 0.8
  # the near duplicates a batch removed are in the manifest too: a later copy is `seen`
  docs, again, _ = _run(tmp_path, "three.jsonl", [a], "--seen_manifest", manifest)
  assert docs == [] and again["filtered"] == {"seen_in_manifest": 9}


def test_a_run_killed_between_the_two_appends_is_recorded_once_by_the_rerun(tmp_path, monkeypatch):
  a, b = _inputs(tmp_path)
  manifest = str(tmp_path / "seen.bin")
  _run(tmp_path, "one.jsonl", [a], "--seen_manifest", manifest)
  size_after_first = os.path.getsize(manifest + seen_signatures.SUFFIX)

  def killed(self):
    raise KeyboardInterrupt("killed after the signature append, before the manifest's")

  with monkeypatch.context() as patch:
    patch.setattr(seen_manifest.SeenManifest, "commit", killed)
    with pytest.raises(KeyboardInterrupt):
      cli.main(["--no_progress", "--text_format", "line", "--min_chars", "1",
                "--near_dup_threshold", "0.8", "--seen_manifest", manifest, "--output",
                str(tmp_path / "x.jsonl"), b])
  assert os.path.getsize(manifest + seen_signatures.SUFFIX) > size_after_first  # an orphan block
  manifest_state = seen_manifest.SeenManifest(manifest)
  assert len(seen_signatures.SeenSignatures(manifest_state, 128)) == 6  # ignored when read
  docs, stats, _ = _run(tmp_path, "x.jsonl", [b], "--seen_manifest", manifest)
  assert [d["id"] for d in docs] == [b + "#1"] and stats["filtered"] == {"near_duplicate": 1}
  signatures = seen_signatures.SeenSignatures(seen_manifest.SeenManifest(manifest), 128)
  assert len(signatures) == 7 and len(signatures.blocks) == 2  # the orphan was cut off


@pytest.mark.parametrize("flags, message", [
    (["--near_dup_threshold", "1.5"], "--near_dup_threshold 1.5: give 0 (off)"),
    (["--near_dup_threshold", "-0.1"], "--near_dup_threshold -0.1"),
    (["--near_dup_threshold", "nan"], "--near_dup_threshold nan"),
    (["--near_dup_threshold", "0.8", "--near_dup_num_perm", "4"], "--near_dup_num_perm 4: give"),
    (["--near_dup_report", "r.jsonl"], "--near_dup_report needs --near_dup_threshold > 0"),
])
def test_bad_near_dup_flags_are_one_line_and_exit_2(tmp_path, capsys, flags, message):
  out = tmp_path / "o.jsonl"
  assert cli.main(["--output", str(out), str(tmp_path)] + flags) == 2
  err = capsys.readouterr().err.strip().splitlines()
  assert len(err) == 1 and message in err[0], err
  assert not out.exists()


def test_another_num_perm_for_a_later_batch_is_refused(tmp_path, capsys):
  a, b = _inputs(tmp_path)
  manifest = str(tmp_path / "seen.bin")
  _run(tmp_path, "one.jsonl", [a], "--seen_manifest", manifest)
  assert cli.main(["--no_progress", "--text_format", "line", "--near_dup_threshold", "0.8",
                   "--near_dup_num_perm", "64", "--seen_manifest", manifest, "--output",
                   str(tmp_path / "two.jsonl"), b]) == 2
  err = capsys.readouterr().err.strip().splitlines()
  assert len(err) == 1 and "same --near_dup_num_perm for every batch" in err[0]
  assert not (tmp_path / "two.jsonl").exists()
  (tmp_path / "other.bin.minhash").write_bytes(b"not signatures")
  assert cli.main(["--no_progress", "--near_dup_threshold", "0.8", "--seen_manifest",
                   str(tmp_path / "other.bin"), "--output", str(tmp_path / "two.jsonl"), b]) == 2
  assert "is not a near-duplicate signature file" in capsys.readouterr().err


def test_the_extra_passes_show_progress_bars(tmp_path, capfd):
  config = clean.CleanConfig(text_format="line", near_dup_threshold=0.8)
  stats = clean.clean_corpus(_inputs(tmp_path), str(tmp_path / "o.jsonl"), None, config,
                             progress=True)
  err = capfd.readouterr().err
  assert stats["filtered"]["near_duplicate"] >= 1
  for bar in ("near-dup signatures", "near-dup clusters"):
    assert bar + ": 100%" in err, err[-2000:]  # tqdm: "desc: 100%|...| done/total [time<ETA"


def test_id_and_source_are_read_without_decoding_the_sentences():
  class Raw:  # pylint: disable=too-few-public-methods
    id = 'a, "sentences": ["x"]'
    source = "dir/b\"c.txt"

  record = json.dumps(clean.document_record(Raw, ['y, "sentences": z', "w"]),
                      ensure_ascii=False) + "\n"
  assert clean_near_dup.record_id_and_source(record) == (Raw.id, Raw.source)
