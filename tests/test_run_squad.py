# coding=utf-8
"""run_squad end to end on tiny models: a SQuAD v2.0 English file and a CMRC-like Chinese file
train, predict google's three files and score EM / F1 into eval_results.txt; a predict-only run
reads the saved model and refuses one without the span head; bad data exits 2 with
`FILE: question ID: reason` before TensorFlow is imported and before --output_dir exists; the
fine-tuned model exports as BertForQuestionAnswering."""
import json
import os
import subprocess
import sys

from absl import flags
import numpy as np
import pytest

from helpers import REPO
from helpers.finetune_toys import mpirun_program
from helpers import modeling_toys as mt
from helpers import squad_files as sf
from helpers import transformers_python
from bert_fin.finetune.squad import data
from bert_fin.finetune.squad import flags as squad_flags
from bert_fin.finetune.squad import orchestration
from bert_fin.training import distributed


def _model(tmp_path, vocab):
  tokens = open(vocab, encoding="utf-8").read().split()
  config = mt.tiny_config(vocab_size=len(tokens), hidden_size=32, num_hidden_layers=1,
                          intermediate_size=64, max_position_embeddings=64)
  path = tmp_path / "bert_config.json"
  path.write_text(config.to_json_string())
  return str(path)


def _settings(config, vocab, out, *extra):
  values = squad_flags.define_flags(flags.FlagValues())
  values(["run_squad", "--bert_config_file=" + config, "--vocab_file=" + vocab,
          "--output_dir=" + out, "--max_seq_length=48", "--doc_stride=16",
          "--max_query_length=12", "--train_batch_size=16", "--predict_batch_size=7",
          "--learning_rate=3e-3", "--warmup_proportion=0.1", "--seed=3",
          "--intra_op_parallelism_threads=1", "--inter_op_parallelism_threads=1",
          "--log_every_n_steps=1000"] + list(extra))
  return squad_flags.settings_of(values)


def _run(settings):
  dist = distributed.init(False)
  plan = orchestration.preflight(settings, dist, data.read_inputs(settings))
  return orchestration.run(plan, dist)


@pytest.fixture
def cmrc(tmp_path):
  train, dev, vocab, _ = sf.write_cmrc(tmp_path, n=80)
  return dict(train=train, dev=dev, vocab=vocab, config=_model(tmp_path, vocab),
              out=str(tmp_path / "out"))


@pytest.mark.slow
def test_chinese_file_trains_predicts_and_scores_with_cmrcs_metric(cmrc):
  result = _run(_settings(cmrc["config"], cmrc["vocab"], cmrc["out"], "--do_train",
                          "--train_file=" + cmrc["train"], "--do_predict",
                          "--predict_file=" + cmrc["dev"], "--num_train_steps=150"))
  print("tiny CMRC-like task: EM %.1f F1 %.1f" % (result["eval_exact"], result["eval_f1"]))
  assert result["eval_metric"] == "cmrc" and result["global_step"] == 150
  assert result["eval_f1"] >= 60.0, result  # templated answers; an untrained head scores ~5
  lines = open(os.path.join(cmrc["out"], "eval_results.txt"), encoding="utf-8").read()
  for key in ("eval_exact", "eval_f1", "eval_total", "eval_missing", "eval_metric",
              "global_step"):
    assert "\n%s = " % key in "\n" + lines
  dev = data.read_file(cmrc["dev"])
  predictions = json.load(open(os.path.join(cmrc["out"], "predictions.json"), encoding="utf-8"))
  assert list(predictions) == [q.qas_id for q in dev.questions]
  for question in dev.questions:  # every answer is a substring of its context, as written
    assert predictions[question.qas_id] in dev.contexts[question.context_index]
  nbest = json.load(open(os.path.join(cmrc["out"], "nbest_predictions.json"), encoding="utf-8"))
  assert all(abs(sum(e["probability"] for e in entries) - 1) < 1e-6
             for entries in nbest.values())
  assert not os.path.exists(os.path.join(cmrc["out"], "null_odds.json"))

  # predict-only: the saved model is read back and gives the same answers
  os.remove(os.path.join(cmrc["out"], "predictions.json"))
  again = _run(_settings(cmrc["config"], cmrc["vocab"], cmrc["out"], "--do_eval",
                         "--predict_file=" + cmrc["dev"]))
  assert json.load(open(os.path.join(cmrc["out"], "predictions.json"),
                        encoding="utf-8")) == predictions
  assert again["eval_f1"] == result["eval_f1"]


def test_english_v2_file_writes_null_odds_and_v2_figures(tmp_path):
  vocab = sf.write_vocab(tmp_path / "vocab.txt", sf.ENGLISH_VOCAB)
  squad = sf.write_json(tmp_path / "train-v2.json", sf.squad_json(
      sf.ENGLISH_V2_PARAGRAPHS + sf.ENGLISH_PARAGRAPHS[1:3], version="2.0"))
  out = str(tmp_path / "out")
  result = _run(_settings(_model(tmp_path, vocab), vocab, out, "--do_train", "--do_eval",
                          "--train_file=" + squad, "--predict_file=" + squad,
                          "--version_2_with_negative", "--num_train_steps=4",
                          "--max_seq_length=16", "--doc_stride=4", "--max_query_length=8"))
  assert result["eval_metric"] == "squad" and result["eval_total"] == 4
  assert result["eval_HasAns_total"] == 3 and result["eval_NoAns_total"] == 1
  assert {"eval_best_f1", "eval_best_f1_thresh", "eval_best_exact"} <= set(result)
  null_odds = json.load(open(os.path.join(out, "null_odds.json"), encoding="utf-8"))
  predictions = json.load(open(os.path.join(out, "predictions.json"), encoding="utf-8"))
  assert list(null_odds) == list(predictions) == ["stride", "impossible", "smith", "japan"]
  for qid, odds in null_odds.items():  # google's rule with --null_score_diff_threshold 0
    assert (predictions[qid] == "") == (odds > 0.0)
  assert sorted(n for n in os.listdir(out) if n.startswith("model.ckpt-4."))


def test_predict_only_without_the_span_head_is_refused(cmrc, tmp_path):
  from helpers.google_checkpoints import write_google_checkpoint  # pylint: disable=import-outside-toplevel
  from bert_fin import modeling  # pylint: disable=import-outside-toplevel
  settings = _settings(cmrc["config"], cmrc["vocab"], cmrc["out"], "--do_predict",
                       "--predict_file=" + cmrc["dev"])
  with pytest.raises(ValueError, match="holds no checkpoint"):
    orchestration.preflight(settings, distributed.init(False), data.read_inputs(settings))
  ckpt = str(tmp_path / "google" / "bert_model.ckpt")
  write_google_checkpoint(ckpt, mt.google_variable_shapes(
      modeling.BertConfig.from_json_file(cmrc["config"])), np.random.RandomState(5))
  settings = _settings(cmrc["config"], cmrc["vocab"], cmrc["out"], "--do_predict",
                       "--predict_file=" + cmrc["dev"], "--init_checkpoint=" + ckpt)
  with pytest.raises(ValueError, match=r"no reading-comprehension \(run_squad\) head"):
    orchestration.preflight(settings, distributed.init(False), data.read_inputs(settings))


def _poisoned_env(tmp_path):
  """PYTHONPATH with a `tensorflow` that fails to import: a refusal that still exits 2 with its
  one line came before TensorFlow was imported."""
  poison = tmp_path / "poison" / "tensorflow"
  poison.mkdir(parents=True)
  (poison / "__init__.py").write_text("raise ImportError('tensorflow imported too early')\n")
  return dict(os.environ, PYTHONPATH=os.pathsep.join([str(tmp_path / "poison"), REPO]))


BAD_FILES = [
    ("malformed", lambda: '{"data": [', "not valid JSON: Expecting value (line 1 column 11)"),
    ("answer_start", lambda: json.dumps(sf.squad_json([("公司发布新品", [
        ("q1", "发布什么？", "新品", 0)])])).replace('"answer_start": 4', '"answer_start": 3'),
     "question q1: answers[0]: answer_start 3 does not point at the answer text '新品' (the context there "
     "reads '布新'; the text occurs at offset 4)"),
    ("no_context", lambda: json.dumps({"data": [{"paragraphs": [{"context": " ", "qas": [
        {"id": "q7", "question": "谁？", "answers": []}]}]}]}),
     "question q7: the question has no context"),
    ("empty_question", lambda: json.dumps({"data": [{"paragraphs": [{"context": "公司", "qas": [
        {"id": "q9", "question": "  ", "answers": [{"text": "公司", "answer_start": 0}]}]}]}]}),
     "question q9: empty question"),
    ("impossible_v1", lambda: json.dumps(sf.squad_json([("公司发布新品", [
        ("q2", "什么？", None, 0)])])), "question q2: is_impossible is true"),
    ("lone_surrogate", lambda: json.dumps({"data": [{"paragraphs": [{
        "context": "公司\udc80", "qas": [{"id": "q3", "question": "谁？",
                                         "answers": [{"text": "公司", "answer_start": 0}]}]}]}]}),
     "data[0].paragraphs[0].context holds a lone surrogate '\\udc80' at character 2"),
    ("empty_id", lambda: json.dumps({"data": [{"paragraphs": [{"context": "公司", "qas": [
        {"id": "", "question": "谁？", "answers": [{"text": "公司", "answer_start": 0}]}]}]}]}),
     "data[0].paragraphs[0].qas[0]: the id is empty"),
    ("long_context", lambda: json.dumps({"data": [{"paragraphs": [{
        "context": "公" * 100001, "qas": [{"id": "q4", "question": "谁？",
                                         "answers": [{"text": "公", "answer_start": 0}]}]}]}]}),
     "data[0].paragraphs[0].context has 100001 characters, more than --max_context_chars=100000"),
]


@pytest.mark.parametrize("name,text,message", BAD_FILES, ids=[b[0] for b in BAD_FILES])
def test_bad_data_exits_2_with_file_and_question_before_tensorflow(tmp_path, name, text,
                                                                   message):
  bad = tmp_path / ("%s.json" % name)
  bad.write_text(text(), encoding="utf-8")
  out = tmp_path / "out"
  proc = subprocess.run(
      [sys.executable, os.path.join(REPO, "run_squad.py"), "--do_train", "--train_file=%s" % bad,
       "--bert_config_file=unused.json", "--vocab_file=unused.txt", "--output_dir=%s" % out],
      capture_output=True, text=True, timeout=120, env=_poisoned_env(tmp_path))
  assert proc.returncode == 2, proc.stderr[-2000:]
  lines = proc.stderr.strip().splitlines()
  assert len(lines) == 1 and lines[0].startswith("run_squad.py: error: %s: " % bad), lines
  assert message in lines[0]
  assert not out.exists()


def test_do_eval_needs_answers_and_flags_are_checked_first(tmp_path):
  unanswered = sf.write_json(tmp_path / "test.json", {"data": [{"paragraphs": [
      {"context": "公司发布新品", "qas": [{"id": "t1", "question": "发布什么？"}]}]}]})
  base = [sys.executable, os.path.join(REPO, "run_squad.py"), "--bert_config_file=c.json",
          "--vocab_file=v.txt", "--output_dir=%s" % (tmp_path / "out")]
  env = _poisoned_env(tmp_path)
  for extra, message in (
      (["--do_eval", "--predict_file=" + unanswered],
       "--do_eval scores the predictions against the answers, but 1 of 1 questions have none"),
      (["--do_train"], "If `do_train` is True, then `train_file` must be specified."),
      (["--do_predict", "--predict_file=x", "--max_seq_length=60"],
       "The max_seq_length (60) must be greater than max_query_length (64) + 3"),
      (["--do_predict", "--predict_file=x", "--null_score_diff_threshold=nan"],
       "--null_score_diff_threshold=nan must be a finite number")):
    proc = subprocess.run(base + extra, capture_output=True, text=True, timeout=120, env=env)
    assert proc.returncode == 2 and message in proc.stderr, proc.stderr[-2000:]
  assert not (tmp_path / "out").exists()


def test_export_hf_of_a_run_squad_output_is_question_answering(cmrc, tmp_path):
  import tensorflow.compat.v1 as tf  # pylint: disable=import-outside-toplevel
  from safetensors import numpy as safetensors_numpy  # pylint: disable=import-outside-toplevel
  from bert_fin import modeling  # pylint: disable=import-outside-toplevel
  from bert_fin.cli import export_hf  # pylint: disable=import-outside-toplevel
  from bert_fin.interop import hf_names  # pylint: disable=import-outside-toplevel
  _run(_settings(cmrc["config"], cmrc["vocab"], cmrc["out"], "--do_train",
                 "--train_file=" + cmrc["train"], "--num_train_steps=2"))
  out = tmp_path / "hf"
  assert export_hf.main(["--bert_config_file=" + cmrc["config"],
                         "--init_checkpoint=" + cmrc["out"], "--vocab_file=" + cmrc["vocab"],
                         "--output_dir=" + str(out)]) == 0
  tensors = safetensors_numpy.load_file(str(out / "model.safetensors"))
  config = modeling.BertConfig.from_json_file(cmrc["config"])
  assert set(tensors) == set(hf_names.expected_shapes(config, "BertForQuestionAnswering"))
  assert not any(name.startswith(("bert.pooler.", "cls.", "classifier.")) for name in tensors)
  reader = tf.train.load_checkpoint(tf.train.latest_checkpoint(cmrc["out"]))
  # cls/squad/output_weights is [2, H] like nn.Linear's weight: no transpose
  np.testing.assert_array_equal(tensors["qa_outputs.weight"],
                                reader.get_tensor("cls/squad/output_weights"))
  np.testing.assert_array_equal(tensors["qa_outputs.bias"],
                                reader.get_tensor("cls/squad/output_bias"))
  hf_config = json.loads((out / "config.json").read_text(encoding="utf-8"))
  assert hf_config["architectures"] == ["BertForQuestionAnswering"]
  assert "id2label" not in hf_config  # transformers' default num_labels 2: start, end


@pytest.mark.skipif(not transformers_python.hf_python(), reason=transformers_python.SKIP_REASON)
def test_live_transformers_question_answering_gives_run_squads_logits(cmrc, tmp_path):
  """bench/compare_export_hf.py on an exported run_squad model: BertForQuestionAnswering's
  start / end logits equal run_squad's graph's within 1e-4, the same token ids."""
  from bert_fin.cli import export_hf  # pylint: disable=import-outside-toplevel
  from bert_fin.modeling import checkpoint as checkpoint_lib  # pylint: disable=import-outside-toplevel
  _run(_settings(cmrc["config"], cmrc["vocab"], cmrc["out"], "--do_train",
                 "--train_file=" + cmrc["train"], "--num_train_steps=2"))
  assert export_hf.main(["--bert_config_file=" + cmrc["config"],
                         "--init_checkpoint=" + cmrc["out"], "--vocab_file=" + cmrc["vocab"],
                         "--output_dir=" + str(tmp_path / "hf")]) == 0
  proc = subprocess.run(
      [sys.executable, os.path.join(REPO, "bench", "compare_export_hf.py"), "all",
       "--bert_config_file=" + cmrc["config"],
       "--init_checkpoint=" + checkpoint_lib.resolve_checkpoint(cmrc["out"]),
       "--vocab_file=" + cmrc["vocab"], "--hf_dir=" + str(tmp_path / "hf"),
       "--npz=" + str(tmp_path / "ref.npz"), "--hf_python=" + transformers_python.hf_python()],
      capture_output=True, text=True, timeout=600, env=dict(os.environ, PYTHONPATH=REPO))
  print(proc.stdout)
  assert proc.returncode == 0 and "RESULT: OK" in proc.stdout, proc.stdout + proc.stderr


@pytest.mark.mpi
@pytest.mark.slow
def test_mpirun_np2_trains_on_both_ranks_rank0_predicts(cmrc):
  proc = mpirun_program(
      "run_squad.py", "--do_train", "--do_predict", "--train_file=" + cmrc["train"],
      "--predict_file=" + cmrc["dev"], "--bert_config_file=" + cmrc["config"],
      "--vocab_file=" + cmrc["vocab"], "--output_dir=" + cmrc["out"], "--max_seq_length=48",
      "--doc_stride=16", "--max_query_length=12", "--train_batch_size=8",
      "--learning_rate=3e-3", "--num_train_steps=40")
  assert proc.stdout.count("***** Eval results *****") == 1  # rank 0 only
  assert proc.stdout.count("[run_squad] wrote 60 answers") == 1
  assert proc.stdout.count("answers: 240 of 240 map to tokens exactly") == 1  # said once
  results = open(os.path.join(cmrc["out"], "eval_results.txt"), encoding="utf-8").read()
  assert "global_step = 40\n" in results and "eval_metric = cmrc\n" in results
  assert sorted(n for n in os.listdir(cmrc["out"]) if n.startswith("model.ckpt-40"))


@pytest.mark.slow  # a refused program, then a training run
def test_a_refused_surrogate_file_leaves_nothing_and_the_corrected_rerun_succeeds(cmrc, tmp_path):
  squad = json.load(open(cmrc["train"], encoding="utf-8"))
  paragraph = squad["data"][0]["paragraphs"][0]
  original = paragraph["context"]
  paragraph["context"] = original + "\udc80"
  bad = tmp_path / "bad.json"
  bad.write_text(json.dumps(squad), encoding="utf-8")  # \udc80 as JSON's escape
  proc = subprocess.run(
      [sys.executable, os.path.join(REPO, "run_squad.py"), "--do_train", "--train_file=%s" % bad,
       "--bert_config_file=" + cmrc["config"], "--vocab_file=" + cmrc["vocab"],
       "--output_dir=" + cmrc["out"]], capture_output=True, text=True, timeout=120,
      env=_poisoned_env(tmp_path))
  assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
  assert "data[0].paragraphs[0].context holds a lone surrogate" in proc.stderr
  assert not os.path.exists(cmrc["out"])
  paragraph["context"] = original
  bad.write_text(json.dumps(squad), encoding="utf-8")
  _run(_settings(cmrc["config"], cmrc["vocab"], cmrc["out"], "--do_train",
                 "--train_file=%s" % bad, "--do_predict", "--predict_file=" + cmrc["dev"],
                 "--num_train_steps=2"))
  written = os.listdir(cmrc["out"])
  assert "predictions.json" in written and "nbest_predictions.json" in written
