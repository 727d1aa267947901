"""clean_corpus on faulty input (found in issues 15 and 24): a syndicated article is a duplicate
kept once, not boilerplate; a wrong --text_field or nothing usable is one line and exit 2 naming the
fix, with nothing written, while a batch already seen is no error. Tiny generated data."""
import os
import random

from bert_fin.cli import clean_corpus as clean_cli
from bert_fin.text import clean
from bert_fin.text import filters
from helpers.data_tools import ANNOUNCEMENTS, EARNINGS_REPORTS, NEWSFLASH
from helpers.data_tools import read_jsonl, write_jsonl, write_text_corpus


# ---- issue 15 item 5: syndicated articles are duplicates, not boilerplate ------------------------
def test_boilerplate_filter_keeps_one_copy_of_a_syndicated_article(tmp_path):
  article = "\n".join(EARNINGS_REPORTS[:3])
  footer = "免责声明：本报告仅供参考，不构成任何投资建议，投资者据此操作风险自担。"
  others = ["宁德时代发布第%d份公告，公司经营情况良好，订单充足。\n%s" % (i, footer) for i in range(4)]
  (tmp_path / "in.txt").write_text("\n\n".join([article] * 5 + others), encoding="utf-8")
  config = clean.CleanConfig(filter_config=filters.FilterConfig(boilerplate_min_docs=3))
  stats = clean.clean_corpus([str(tmp_path / "in.txt")], str(tmp_path / "o.jsonl"), None, config)
  docs = read_jsonl(tmp_path / "o.jsonl")
  assert sum(d["sentences"][0] == EARNINGS_REPORTS[0] for d in docs) == 1  # one copy kept
  assert stats["filtered"] == {"duplicate": 4}
  assert stats["boilerplate_lines_removed"] == 4  # the footer, in the 4 different documents
  assert all(footer not in d["sentences"] for d in docs)


# ---- issue 24 item 3: clean_corpus writing zero documents is an error ----------------------------
def test_clean_corpus_with_a_wrong_text_field_exits_2_naming_the_fields(tmp_path, capsys):
  corpus = tmp_path / "newsflash.jsonl"
  write_jsonl(corpus, NEWSFLASH)
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
  write_text_corpus(text, [ANNOUNCEMENTS[i:i + 2] for i in range(0, 10, 2)])
  manifest = str(tmp_path / "seen.bin")
  argv = ["--no_progress", "--output", out, "--seen_manifest", manifest, str(text)]
  assert clean_cli.main(argv) == 0 and clean_cli.main(argv) == 0
  assert os.path.getsize(out) == 0
