"""End to end cleaning: every rule on the fixtures, the accounting identity, process-count
independence, the CLI contract (output JSONL + stats JSON)."""
import json
import os
import shutil
import subprocess
import sys

import pytest

import helpers
from helpers import REPO
from helpers.data_tools import read_jsonl
from bert_fin.cli import clean_corpus as cli
from bert_fin.text import clean
from bert_fin.text import filters

FIXTURES = os.path.join(helpers.FIXTURES, "corpus")


@pytest.fixture(name="cleaned")
def _cleaned(tmp_path):
  out, stats_path = tmp_path / "out.jsonl", tmp_path / "stats.json"
  assert cli.main(["--no_progress", "--text_field", "content", "--output", str(out), "--stats",
                   str(stats_path), FIXTURES]) == 0
  with open(stats_path, encoding="utf-8") as f:
    return read_jsonl(out), json.load(f)


def test_accounting_identity_holds(cleaned):
  docs, stats = cleaned
  assert stats["documents_in"] == stats["documents_out"] + sum(stats["filtered"].values())
  assert stats["documents_out"] == len(docs)
  assert stats["sentences_out"] == sum(len(d["sentences"]) for d in docs)
  assert stats["characters_out"] == sum(len(s) for d in docs for s in d["sentences"])
  assert 0 < stats["characters_out"] < stats["characters_in"]


def test_every_bad_input_is_counted_by_reason(cleaned):
  _, stats = cleaned
  for reason in ("empty", "binary", "duplicate", "too_short", "low_cjk_ratio", "bad_json",
                 "no_text_field"):
    assert stats["filtered"].get(reason) == 1, reason
  assert stats["encodings"]["gb18030"] == 1
  assert stats["noise_runs_removed"] >= 1


def test_output_documents_are_clean(cleaned):
  docs, _ = cleaned
  text = "\n".join(s for d in docs for s in d["sentences"])
  assert set(docs[0]) == {"id", "source", "sentences"}
  assert len({d["id"] for d in docs}) == len(docs)
  for leaked in ("color", "tracker", "3frfd44ee233ddfs", "\ue000", "\u200b", "１", "免责声明", "首页"):
    assert leaked not in text
  assert "中国平安（601318）发布公告：公司第一季度归母净利润同比增长12.3%，综合成本率下降。" in text
  assert "招商银行（600036）公布年度业绩，净利润同比增长8.5%，不良贷款率保持稳定。" in text
  assert sum(s.startswith("宁德时代（300750）") for d in docs for s in d["sentences"]) == 1


def test_output_is_identical_with_two_processes(tmp_path):
  outputs = []
  for processes in (1, 2):
    out = tmp_path / ("out%d.jsonl" % processes)
    clean.clean_corpus([FIXTURES], str(out), None,
                       clean.CleanConfig(text_field="content"), processes=processes)
    outputs.append(out.read_bytes())
  assert outputs[0] == outputs[1] and outputs[0]


def test_boilerplate_lines_repeated_across_documents_are_removed(tmp_path):
  footer = "免责声明：本报告仅供参考，不构成任何投资建议，投资者据此操作风险自担。"
  body = ["宁德时代发布第%d份公告，公司经营情况良好，订单充足。" % i for i in range(4)]
  (tmp_path / "in.txt").write_text("\n\n".join(b + "\n" + footer for b in body), encoding="utf-8")
  config = clean.CleanConfig(filter_config=filters.FilterConfig(boilerplate_min_docs=3))
  stats = clean.clean_corpus([str(tmp_path / "in.txt")], str(tmp_path / "o.jsonl"), None, config)
  docs = read_jsonl(tmp_path / "o.jsonl")
  assert stats["boilerplate_lines_removed"] == 4 and stats["documents_out"] == 4
  assert all(footer not in d["sentences"] for d in docs)


def test_missing_input_is_a_clear_error(tmp_path, capsys):
  assert cli.main(["--output", str(tmp_path / "o.jsonl"), str(tmp_path / "nope")]) == 2
  assert "matches no file" in capsys.readouterr().err
  assert not os.path.exists(tmp_path / "o.jsonl")


def test_tools_shim_runs_from_repo_root(tmp_path):
  out = tmp_path / "o.jsonl"
  gbk = os.path.join(FIXTURES, "gbk_report.txt")
  result = subprocess.run([sys.executable, "tools/clean_corpus.py", "--no_progress", "--output",
                           str(out), "--stats", str(tmp_path / "s.json"), gbk],
                          cwd=REPO, capture_output=True, text=True, timeout=120, check=False)
  assert result.returncode == 0, result.stderr
  assert len(read_jsonl(out)) == 2
  assert not [p for p in os.listdir(tmp_path) if ".tmp-" in p or "clean-parts" in p]
  shutil.rmtree(tmp_path)


def test_a_document_that_breaks_cleaning_is_counted_not_fatal(tmp_path, monkeypatch, capsys):
  (tmp_path / "a.txt").write_text("招商银行发布年度业绩公告，净利润稳步增长。\n\n坏文档会触发异常，但不应中断整个清洗过程。\n",
                                  encoding="utf-8")
  original = clean.sentence_lib.split_sentences

  def flaky(text, max_chars):
    if text.startswith("坏"):
      raise RecursionError("too deep")
    return original(text, max_chars)

  monkeypatch.setattr(clean.sentence_lib, "split_sentences", flaky)
  stats = clean.clean_corpus([str(tmp_path / "a.txt")], str(tmp_path / "o.jsonl"))
  assert stats["filtered"] == {"clean_error": 1} and stats["documents_out"] == 1
  assert "a.txt#1: RecursionError" in capsys.readouterr().err
