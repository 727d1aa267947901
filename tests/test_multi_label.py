# coding=utf-8
"""run_classifier --multi_label: thresholds chosen on dev (global, and per label with enough dev
positives), micro / macro / example F1, multi_label.json, a tiny model learning label sets end to
end, and the transformers export's problem_type."""
import json
import os
import random
import subprocess

from absl import flags
import numpy as np
import pytest

from helpers.finetune_toys import label_set_rows
from helpers.finetune_toys import write_jsonl
from helpers import modeling_toys as mt
from helpers import tokenizer_vocab
from helpers import transformers_python
from bert_fin.export import hf
from bert_fin.finetune.classify import flags as classify_flags
from bert_fin.finetune.classify import multi_label
from bert_fin.finetune.classify import orchestration
from bert_fin.finetune.classify import tasks
from bert_fin.training import distributed


def test_global_threshold_is_chosen_on_dev_micro_f1():
  truth = np.array([[1, 1], [1, 0], [0, 1], [0, 1]])
  # positives at 0.3, negatives at 0.1: any threshold in (0.1, 0.3] is perfect (nearest 0.5
  # kept); above 0.3 each row keeps its most probable label only, missing one of row 0's
  probabilities = np.where(truth == 1, 0.3, 0.1)
  global_threshold, thresholds = multi_label.choose_thresholds(truth, probabilities)
  assert global_threshold == pytest.approx(0.3)
  assert list(thresholds) == pytest.approx([0.3, 0.3])  # fewer than MIN_POSITIVES positives


def test_a_label_with_enough_dev_positives_gets_its_own_threshold():
  n = 2 * multi_label.MIN_POSITIVES
  truth = np.zeros([n, 2], int)
  truth[:multi_label.MIN_POSITIVES, 0] = 1
  truth[multi_label.MIN_POSITIVES:, 1] = 1
  probabilities = np.zeros([n, 2])
  probabilities[:, 0] = np.where(truth[:, 0] == 1, 0.9, 0.7)  # label 0: separated at 0.7 .. 0.9
  probabilities[:, 1] = np.where(truth[:, 1] == 1, 0.4, 0.05)  # label 1: at 0.05 .. 0.4
  global_threshold, thresholds = multi_label.choose_thresholds(truth, probabilities)
  assert thresholds[0] == pytest.approx(0.75)  # the candidate in (0.7, 0.9] nearest 0.5
  assert thresholds[1] == pytest.approx(0.4)
  predicted = multi_label.predict(probabilities, thresholds)
  assert (predicted == truth.astype(bool)).all()
  assert multi_label.f1_figures(truth, predicted)["micro_f1"] == 1.0
  assert multi_label.f1_figures(truth, multi_label.predict(probabilities, global_threshold))[
      "micro_f1"] < 1.0


def test_f1_figures_by_hand_and_at_least_one_label_an_example():
  truth = np.array([[1, 1, 0], [0, 1, 0], [0, 0, 1]])
  predicted = np.array([[1, 0, 0], [0, 1, 1], [0, 0, 1]])
  figures = multi_label.f1_figures(truth, predicted)
  # tp 3, fp 1, fn 1: micro 6/8; per label F1 1, 2/3, 2/3; per example 2/3, 2/3, 1
  assert figures["micro_f1"] == pytest.approx(0.75)
  assert figures["macro_f1"] == pytest.approx((1 + 2 / 3 + 2 / 3) / 3)
  assert figures["example_f1"] == pytest.approx((2 / 3 + 2 / 3 + 1) / 3)
  np.testing.assert_array_equal(multi_label.example_statistics(truth, predicted),
                                [[1, 0, 1], [1, 1, 0], [1, 0, 0]])
  none_passes = multi_label.predict(np.array([[0.2, 0.4, 0.1]]), 0.5)
  assert none_passes.tolist() == [[False, True, False]]


def test_thresholds_file_round_trip_and_refusal(tmp_path):
  assert multi_label.read_thresholds(str(tmp_path)) is None
  record = multi_label.Thresholds(["公司", "外国"], np.array([0.3, 0.55]), 0.4)
  multi_label.write_thresholds(str(tmp_path), record)
  read = multi_label.read_thresholds(str(tmp_path))
  assert read.labels == record.labels and read.global_threshold == 0.4
  np.testing.assert_allclose(read.thresholds, record.thresholds)
  (tmp_path / multi_label.THRESHOLDS_FILE).write_text('{"labels": ["a"], "thresholds": []}')
  with pytest.raises(ValueError, match="not a multi-label record"):
    multi_label.read_thresholds(str(tmp_path))


def test_unknown_label_name_is_refused_with_its_file(tmp_path):
  with pytest.raises(tasks.DataError, match=r"dev.jsonl \(dev-2\): label '债券'"):
    multi_label.multi_hot(["公司", "债券 公司"], ["公司", "外国"],
                          ["dev.jsonl (dev-1)", "dev.jsonl (dev-2)"])


def test_hf_config_of_a_multi_label_classifier_has_its_problem_type_and_label_maps():
  config = mt.tiny_config(vocab_size=50, hidden_size=16, num_hidden_layers=1)
  written = hf.hf_config(config, "BertForSequenceClassification", ["公司", "外国"],
                         hf.MULTI_LABEL_PROBLEM)
  assert written["problem_type"] == "multi_label_classification"
  assert written["id2label"] == {"0": "公司", "1": "外国"} and written["label2id"]["外国"] == 1
  assert "problem_type" not in hf.hf_config(config, "BertForSequenceClassification", ["a", "b"])


@pytest.mark.slow  # a 150-update fine-tuning, an export (10-15 s on 2 busy cores)
def test_tiny_multi_label_classifier_learns_label_sets_and_exports_its_problem_type(tmp_path):
  rng = random.Random(5)
  data = tmp_path / "data"
  data.mkdir()
  for split, count in (("train", 192), ("dev", 48), ("test", 24)):
    write_jsonl(data / ("%s.jsonl" % split), label_set_rows(rng, count))
  config = mt.tiny_config(vocab_size=len(tokenizer_vocab.vocab_tokens()), hidden_size=32,
                          num_hidden_layers=1, intermediate_size=64, max_position_embeddings=32)
  config_file = tmp_path / "bert_config.json"
  config_file.write_text(config.to_json_string())
  vocab = tokenizer_vocab.write_vocab(tmp_path)
  out = str(tmp_path / "out")
  values = classify_flags.define_flags(flags.FlagValues())
  values(["run_classifier", "--task_name=jsonl", "--data_dir=" + str(data),
          "--bert_config_file=" + str(config_file), "--vocab_file=" + vocab,
          "--output_dir=" + out, "--max_seq_length=16", "--train_batch_size=16",
          "--learning_rate=1e-3", "--num_train_steps=150", "--seed=3", "--multi_label",
          "--do_train", "--do_eval", "--do_predict", "--intra_op_parallelism_threads=1",
          "--inter_op_parallelism_threads=1"])
  result = orchestration.run(classify_flags.settings_of(values), distributed.init(False))
  assert result["eval_micro_f1"] >= 0.9 and result["eval_example_f1"] >= 0.9
  assert result[multi_label.DISTINCT_KEY] == 3  # {up}, {down}, {down, up}
  record = multi_label.read_thresholds(out)
  assert record.labels == ["down", "up"]
  probabilities = np.loadtxt(os.path.join(out, tasks.TEST_RESULTS_FILE), ndmin=2)
  assert probabilities.shape == (24, 2)
  assert (probabilities.sum(axis=1) > 1.2).any()  # sigmoids, not a softmax
  with open(os.path.join(out, "classifier_config.json"), encoding="utf-8") as f:
    assert json.load(f)["multi_label"] is True
  predict_only = classify_flags.define_flags(flags.FlagValues())
  predict_only(["run_classifier", "--task_name=jsonl", "--data_dir=" + str(data),
                "--bert_config_file=" + str(config_file), "--vocab_file=" + vocab,
                "--output_dir=" + out, "--max_seq_length=16", "--do_predict"])
  with pytest.raises(ValueError, match="trained with --multi_label=True"):
    orchestration.preflight(classify_flags.settings_of(predict_only), distributed.init(False))
  exported = str(tmp_path / "hf")
  hf.export(str(config_file), out, vocab, exported,
            architecture="BertForSequenceClassification")
  with open(os.path.join(exported, hf.CONFIG_FILE), encoding="utf-8") as f:
    hf_config = json.load(f)
  assert hf_config["problem_type"] == hf.MULTI_LABEL_PROBLEM
  assert hf_config["id2label"] == {"0": "down", "1": "up"}
  assert multi_label.read_thresholds(exported).labels == ["down", "up"]
  python = transformers_python.hf_python()
  if python:  # transformers itself loads it as a multi-label classifier
    loaded = subprocess.run([python, "-c", (
        "import sys, transformers; m = transformers.AutoModelForSequenceClassification"
        ".from_pretrained(sys.argv[1]); print(m.config.problem_type, m.num_labels)"), exported],
                            capture_output=True, text=True, check=False)
    assert loaded.returncode == 0, loaded.stderr[-2000:]
    assert loaded.stdout.split()[-2:] == [hf.MULTI_LABEL_PROBLEM, "2"]


def test_eval_or_predict_asking_for_another_head_than_the_saved_one_is_refused(tmp_path):
  """classifier_config.json records the head's kind; a run without --do_train that asks for
  another is refused naming the flag and its saved value (a multi-label head read as softmax
  would score as if it were one), a model saved before the kinds were recorded is not checked."""
  from types import SimpleNamespace  # pylint: disable=import-outside-toplevel
  from bert_fin.finetune import finetuned  # pylint: disable=import-outside-toplevel
  from bert_fin.finetune.classify import orchestration  # pylint: disable=import-outside-toplevel
  settings = lambda do_train, multi, markers: SimpleNamespace(
      mode=SimpleNamespace(do_train=do_train),
      task=SimpleNamespace(multi_label=multi, entity_markers=markers))
  finetuned.write_run_files(str(tmp_path), ["a", "b"], "first",
                            {"multi_label": True, "entity_markers": 0})
  orchestration.check_saved_head(settings(False, True, 0), str(tmp_path), "out")
  orchestration.check_saved_head(settings(True, False, 2), str(tmp_path), "out")  # retrains
  for asked, flag in (((False, 0), "--multi_label=True"), ((True, 2), "--entity_markers=0")):
    with pytest.raises(ValueError, match="pass %s" % flag):
      orchestration.check_saved_head(settings(False, *asked), str(tmp_path), "out")
  finetuned.write_run_files(str(tmp_path), ["a", "b"], "first")  # saved before the kinds
  orchestration.check_saved_head(settings(False, False, 2), str(tmp_path), "out")
