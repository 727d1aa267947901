# coding=utf-8
"""run_classifier's --task_name: google's cola, mnli, mrpc, xnli files read as google's processors
read them (columns, headers, xnli's language filter, label lists), bad lines named by FILE:LINE."""
import os

from absl import flags  # noqa: E402
import pytest  # noqa: E402

from helpers import modeling_toys as mt  # noqa: E402
from helpers import tokenizer_vocab  # noqa: E402
from bert_fin.finetune.classify import flags as classify_flags  # noqa: E402
from bert_fin.finetune.classify import google_tasks  # noqa: E402
from bert_fin.finetune.classify import orchestration  # noqa: E402
from bert_fin.finetune.classify import tasks  # noqa: E402
from bert_fin.training import distributed  # noqa: E402

# Tiny files in each task's layout: (relative path, content). Columns follow the GLUE / XNLI
# releases; only the columns google reads carry meaning here.
FILES = {
    "cola": [
        ("train.tsv", "gj04\t1\t\tThe sailors rode the breeze clear of the rocks.\n"
                      "gj04\t0\t*\tThe more does Bill smoke.\n"),
        ("dev.tsv", "clc95\t1\t\tMary sang a song.\n"),
        ("test.tsv", "index\tsentence\n0\tBill left.\n1\tLeft Bill the.\n"),
    ],
    "mrpc": [
        ("train.tsv", "Quality\t#1 ID\t#2 ID\t#1 String\t#2 String\n"
                      "1\t702876\t702977\tHe said so .\tHe told us so .\n"
                      "0\t2108705\t2108831\tShares rose .\tIt rained .\n"),
        ("dev.tsv", "Quality\t#1 ID\t#2 ID\t#1 String\t#2 String\n1\t1\t2\tA b .\tA c .\n"),
        ("test.tsv", "index\t#1 ID\t#2 ID\t#1 String\t#2 String\n0\t1\t2\tX y .\tX z .\n"),
    ],
    "mnli": [
        ("train.tsv", "\t".join("index promptID pairID genre s1bp s2bp s1p s2p sentence1 sentence2 "
                                "label1 gold_label".split()) + "\n" +
         "\t".join(["0", "1", "1e", "gov", "", "", "", "", "他来了。", "有人来了。", "entailment",
                    "entailment"]) + "\n"),
        ("dev_matched.tsv", "\t".join(["h"] * 16) + "\n" + "\t".join(
            ["0", "1", "1n", "fic", "", "", "", "", "天晴了。", "下雨了。", "contradiction", "x", "y",
             "z", "w", "contradiction"]) + "\n"),
        ("test_matched.tsv", "\t".join(["h"] * 10) + "\n" + "\t".join(
            ["0", "1", "1", "fic", "", "", "", "", "猫睡了。", "猫醒着。"]) + "\n"),
    ],
    "xnli": [
        ("multinli/multinli.train.zh.tsv", "premise\thypo\tlabel\n"
                                           "他来了。\t没有人来。\tcontradictory\n"
                                           "他来了。\t有人来了。\tentailment\n"),
        ("xnli.dev.tsv", "language\tgold_label\ts1bp\ts2bp\ts1p\ts2p\tsentence1\tsentence2\n"
                         "en\tneutral\t\t\t\t\tHe came.\tSomeone came.\n"
                         "zh\tneutral\t\t\t\t\t他来了。\t他很高兴。\n"),
        ("xnli.test.tsv", "language\tgold_label\ts1bp\ts2bp\ts1p\ts2p\tsentence1\tsentence2\n"
                          "zh\tentailment\t\t\t\t\t天晴。\t没下雨。\n"
                          "de\tneutral\t\t\t\t\tEr kam.\tJemand kam.\n"),
    ],
}


def _write(tmp_path, name, files=None):
  for relative, content in files or FILES[name]:
    path = tmp_path / name / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(content, encoding="utf-8")
  return str(tmp_path / name)


def _read(data_dir, name, split):
  return tasks.read_split(data_dir, split, name, labels=tasks.format_labels(name))


def _triples(examples):
  return [(e.text_a, e.text_b, e.label) for e in examples.examples]


def test_cola_no_header_in_train_dev_header_in_test(tmp_path):
  data = _write(tmp_path, "cola")
  assert _triples(_read(data, "cola", "train")) == [
      ("The sailors rode the breeze clear of the rocks.", None, "1"),
      ("The more does Bill smoke.", None, "0")]
  assert _triples(_read(data, "cola", "dev")) == [("Mary sang a song.", None, "1")]
  assert _triples(_read(data, "cola", "test")) == [("Bill left.", None, None),
                                                   ("Left Bill the.", None, None)]
  assert tasks.format_labels("cola") == ["0", "1"]


def test_mrpc_and_mnli_columns_and_unlabelled_test(tmp_path):
  mrpc = _write(tmp_path, "mrpc")
  assert _triples(_read(mrpc, "mrpc", "train")) == [("He said so .", "He told us so .", "1"),
                                                    ("Shares rose .", "It rained .", "0")]
  assert _triples(_read(mrpc, "mrpc", "test")) == [("X y .", "X z .", None)]
  mnli = _write(tmp_path, "mnli")
  assert _triples(_read(mnli, "mnli", "train")) == [("他来了。", "有人来了。", "entailment")]
  assert _triples(_read(mnli, "mnli", "dev")) == [("天晴了。", "下雨了。", "contradiction")]
  assert _triples(_read(mnli, "mnli", "test")) == [("猫睡了。", "猫醒着。", None)]
  assert tasks.split_path(mnli, "dev", "mnli").endswith("dev_matched.tsv")
  assert tasks.format_labels("mnli") == ["contradiction", "entailment", "neutral"]


def test_xnli_maps_contradictory_and_keeps_only_chinese_dev_and_test_lines(tmp_path):
  data = _write(tmp_path, "xnli")
  assert _triples(_read(data, "xnli", "train")) == [("他来了。", "没有人来。", "contradiction"),
                                                    ("他来了。", "有人来了。", "entailment")]
  dev = _read(data, "xnli", "dev")
  assert _triples(dev) == [("他来了。", "他很高兴。", "neutral")]
  assert dev.skipped == {google_tasks.OTHER_LANGUAGE: [2]}
  assert "1 skipped with language other than zh (lines 2)" in tasks.describe(dev)
  test = _read(data, "xnli", "test")
  assert _triples(test) == [("天晴。", "没下雨。", "entailment")]


def test_google_task_errors_name_file_and_line(tmp_path):
  data = _write(tmp_path, "mrpc", [("train.tsv", "Quality\t#1 ID\t#2 ID\t#1 String\t#2 String\n"
                                                 "1\t7\t8\tonly four fields\n")])
  with pytest.raises(tasks.DataError, match=r"train\.tsv:2: 4 tab-separated field\(s\), "
                     r"google's mrpc train file has at least 5"):
    _read(data, "mrpc", "train")
  with pytest.raises(tasks.DataError, match=r"dev\.tsv: no such file .*train\.tsv, dev\.tsv, "
                     r"test\.tsv for --task_name=mrpc"):
    _read(data, "mrpc", "dev")
  data = _write(tmp_path, "cola", [("train.tsv", "gj04\t2\t\tA label google's list lacks.\n")])
  with pytest.raises(tasks.DataError, match=r"train\.tsv:1: label '2' is not one of"):
    _read(data, "cola", "train")
  assert os.path.isdir(data)


def test_run_classifier_preflight_on_a_google_task_uses_googles_labels(tmp_path):
  data = _write(tmp_path, "xnli")
  config = tmp_path / "bert_config.json"
  config.write_text(
      mt.tiny_config(vocab_size=len(tokenizer_vocab.vocab_tokens())).to_json_string())
  values = classify_flags.define_flags(flags.FlagValues())
  values(["run_classifier", "--task_name=XNLI", "--data_dir=" + data, "--do_train", "--do_eval",
          "--bert_config_file=" + str(config),
          "--vocab_file=" + tokenizer_vocab.write_vocab(tmp_path),
          "--output_dir=" + str(tmp_path / "out"), "--max_seq_length=16",
          "--train_batch_size=2"])
  plan = orchestration.preflight(classify_flags.settings_of(values), distributed.init(False))
  # google's list, not the training set's two labels
  assert plan.labels == ["contradiction", "entailment", "neutral"]
  assert plan.data["train"].arrays["label_ids"].tolist() == [0, 1]
  assert plan.data["dev"].arrays["label_ids"].tolist() == [2]
