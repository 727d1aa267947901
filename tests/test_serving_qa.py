# coding=utf-8
"""tools/export_serving.py --kind=squad on a run_squad output directory: the ONNX client's windows
and span choice are run_squad's (features.py, postprocess.py) on every question of a CMRC-like
file, v1.1 and v2.0; the raw-text signature (question + context: windows, span choice and
character offsets in the graph) gives postprocess.predict's answers on the model's own window
logits; the export's SavedModel and ONNX client give the answers of run_squad --do_predict's
predictions.json on samples/qa's test file, onnxruntime the ids signature's logits (slow); a
directory without the span head or a config that does not fit exits 2 with one line and writes
nothing."""
import json
import os
import shutil

from absl import flags
import numpy as np
import pytest
import tensorflow as tf

from helpers import REPO
from helpers import modeling_toys as mt
from helpers import squad_files as sf
from helpers.google_checkpoints import write_google_checkpoint
from bert_fin import tokenization
from helpers.serving_checks import refused as _refused
from helpers.serving_checks import run_blocked
from bert_fin.cli import export_serving as cli
from bert_fin.finetune.classify import long_text
from bert_fin.finetune.squad import data
from bert_fin.finetune.squad import features as squad_features
from bert_fin.finetune.squad import flags as squad_flags
from bert_fin.finetune.squad import orchestration
from bert_fin.finetune.squad import postprocess
from bert_fin.serving import export
from bert_fin.serving import graph_tokenizer
from bert_fin.serving import onnx_client
from bert_fin.serving import question_answering
from bert_fin.training import distributed

SEQ, STRIDE, QUERY = 48, 16, 12


def _qa(version_2, threshold=0.0, n_best_size=5, max_answer_length=8):
  return {"doc_stride": STRIDE, "max_query_length": QUERY, "n_best_size": n_best_size,
          "max_answer_length": max_answer_length, "version_2": version_2,
          "null_score_diff_threshold": threshold}


def _client_answers(encoded, logits, qa, questions):
  """{qas_id: (text, null odds)} of the client's choose_span on run_squad's windows."""
  rows = {}
  for window, row in zip(encoded.windows, logits):
    rows.setdefault(window.question_index, []).append((window, row))
  answers = {}
  for index, question in enumerate(questions):
    windows = rows[index]
    para = encoded.paragraphs[windows[0][0].context_index]
    spans, owners = onnx_client.doc_windows(len(para.tokens.tokens),
                                            SEQ - windows[0][0].query_length - 3, STRIDE)
    assert spans == [(w.doc_start, w.doc_length) for w, _ in windows]
    for w, _ in windows:
      np.testing.assert_array_equal(owners[w.doc_start:w.doc_start + w.doc_length] == w.span_index,
                                    w.is_max_context)
    chosen = onnx_client.choose_span(
        spans, owners, windows[0][0].query_length, np.array([r[0] for _, r in windows]),
        np.array([r[1] for _, r in windows]), qa)
    span = chosen["span"]
    text = ("" if qa["version_2"] else postprocess.EMPTY) if span is None else (
        para.context[para.tokens.starts[span[0]]:para.tokens.ends[span[1]]])
    answers[question.qas_id] = (text, chosen.get("null_odds"))
  return answers


def test_the_exports_client_files_cut_and_window_as_bert_fin_without_it(tmp_path):
  """The client and token_windows.py as an export holds them (export.copy_client), read where
  neither bert_fin nor TensorFlow can be imported: run_squad's windows and max-context owners,
  google's pair counts and the head / tail / head_tail cuts are bert_fin's."""
  export.copy_client(str(tmp_path))
  assert sorted(os.listdir(tmp_path)) == ["onnx_client.py", "token_windows.py"]
  window_cases = [(0, 5, 2), (6, 5, 2), (40, 13, 4), (41, 13, 20), (100, 9, 9)]
  cut_cases = [(mode, head_tokens, count) for mode, head_tokens in (
      ("head", None), ("tail", None), ("head_tail", None), ("head_tail", 5))
               for count in (0, 3, 13, 30, 40)]
  script = ("import json\nimport onnx_client as c\n"
            "for name in ('tensorflow', 'bert_fin'):\n"
            "  try:\n    __import__(name)\n    raise SystemExit(name + ' importable')\n"
            "  except ImportError:\n    pass\n"
            "windows = [[s, o.tolist()] for s, o in (c.doc_windows(*w) for w in %r)]\n"
            "cuts = [c.keep(list(range(40)), n, 30, {'long_text': m, 'head_tokens': h})"
            " for m, h, n in %r]\n"
            "pairs = [c.pair_counts(a, b, 7) for a in range(10) for b in range(10)]\n"
            "print(json.dumps([windows, cuts, pairs]))\n" % (window_cases, cut_cases))
  windows, cuts, pairs = run_blocked(["bert_fin", "tensorflow"], script, str(tmp_path))
  for (spans, owners), (num_tokens, room, stride) in zip(windows, window_cases):
    expected = squad_features.doc_spans(num_tokens, room, stride)
    assert [tuple(span) for span in spans] == expected
    assert owners == squad_features.max_context_spans(expected, num_tokens).tolist()
  assert cuts == [long_text.keep(list(range(40)), count, mode, 30, head_tokens)
                  for mode, head_tokens, count in cut_cases]
  assert [tuple(p) for p in pairs] == [long_text.pair_counts(a, b, 7)
                                       for a in range(10) for b in range(10)]


def test_the_clients_windows_and_span_choice_are_run_squads(tmp_path):
  """Random logits on every window of a CMRC-like file (contexts of several windows): the
  client's answers and null odds are postprocess.predict's, for v1.1, v2.0 with a threshold
  splitting null and non-null answers, and a max_answer_length that rules spans out."""
  _, dev, vocab, _ = sf.write_cmrc(tmp_path, n=48, seed=7)
  squad_file = data.read_file(dev)
  tokenizer = tokenization.FullTokenizer(vocab)
  encoded = squad_features.encode(squad_file, tokenizer, SEQ, STRIDE, QUERY, False)
  counts = np.bincount([w.question_index for w in encoded.windows])
  assert counts.max() >= 3 and counts.min() >= 2
  rng = np.random.RandomState(3)
  logits = []
  for window in encoded.windows:
    start, end = rng.normal(size=[2, SEQ]).astype(np.float32)
    start[5] = end[5] = start[6]  # equal logits: the first index first
    logits.append((start.tolist(), end.tolist(), window.query_length + window.doc_length + 3))
  for qa in (_qa(False), _qa(True, threshold=0.5), _qa(False, n_best_size=2,
                                                       max_answer_length=1)):
    settings = postprocess.Settings(qa["n_best_size"], qa["max_answer_length"], True,
                                    qa["version_2"], qa["null_score_diff_threshold"])
    expected = postprocess.predict(squad_file.questions, encoded.windows, logits,
                                   encoded.paragraphs, settings)
    client = _client_answers(encoded, logits, qa, squad_file.questions)
    assert {k: text for k, (text, _) in client.items()} == dict(expected.answers)
    if qa["version_2"]:
      answered = sum(bool(text) for text in expected.answers.values())
      assert 0 < answered < len(expected.answers)  # both rules ran
      for qas_id, (_, odds) in client.items():
        assert odds == pytest.approx(expected.null_odds[qas_id], abs=1e-5)


def _in_graph_against_postprocess(model, squad_file, qa):
  """The module's raw-text signature against postprocess.predict on the module's own window
  logits (ids signature on features.encode's windows): answers, offsets and logits."""
  tokenizer = tokenization.FullTokenizer(model["vocab"])
  encoded = squad_features.encode(squad_file, tokenizer, SEQ, STRIDE, QUERY, False)
  options = question_answering.Options(STRIDE, QUERY, qa["n_best_size"],
                                       qa["max_answer_length"], qa["version_2"],
                                       qa["null_score_diff_threshold"])
  request = export.Request(model["out"], model["config_file"], model["vocab"], True, SEQ,
                           str(model["root"] / "unused"), False, False, "squad", "-1", options)
  plan = export.check(request)
  module = question_answering.SquadServing(
      plan.spec, plan.checkpoint, graph_tokenizer.GraphTokenizer(plan.vocab, True), plan.vocab)
  arrays = encoded.arrays
  mask = (np.arange(SEQ)[None, :] < arrays["input_len"][:, None]).astype(np.int32)
  by_ids = module.ids(tf.constant(arrays["input_ids"]), tf.constant(mask),
                      tf.constant(arrays["segment_ids"]))
  logits = [(s.tolist(), e.tolist(), int(n)) for s, e, n in zip(
      by_ids["start_logits"].numpy(), by_ids["end_logits"].numpy(), arrays["input_len"])]
  settings = postprocess.Settings(qa["n_best_size"], qa["max_answer_length"], True,
                                  qa["version_2"], qa["null_score_diff_threshold"])
  expected = postprocess.predict(squad_file.questions, encoded.windows, logits,
                                 encoded.paragraphs, settings)
  questions = squad_file.questions
  contexts = [squad_file.contexts[q.context_index] for q in questions]
  answer = module.text(tf.constant([q.question for q in questions]), tf.constant(contexts))
  texts = [t.decode() for t in answer["answer"].numpy()]
  assert texts == list(expected.answers.values())
  for text, context, start, end in zip(texts, contexts, answer["answer_start"].numpy(),
                                       answer["answer_end"].numpy()):
    assert (context[start:end] == text) if start >= 0 else text in ("", postprocess.EMPTY)
  row = 0
  for index, count in enumerate(answer["num_windows"].numpy()):
    for name in ("start_logits", "end_logits"):
      np.testing.assert_allclose(answer[name].numpy()[index, :count],
                                 by_ids[name].numpy()[row:row + count], atol=1e-4)
    row += count
  assert row == len(encoded.windows)
  if qa["version_2"]:
    np.testing.assert_allclose(answer["null_odds"].numpy(), list(expected.null_odds.values()),
                               atol=1e-4)
  edge = module.text(tf.constant(["", "问"]), tf.constant(["", " \u200b "]))  # no window
  assert edge["num_windows"].numpy().tolist() == [0, 0]
  assert edge["answer_start"].numpy().tolist() == [-1, -1]
  assert [t.decode() for t in edge["answer"].numpy()] == [
      "" if qa["version_2"] else postprocess.EMPTY] * 2
  return texts


def test_the_raw_text_signature_answers_as_run_squads_postprocess(squad_model):
  """question + context in, run_squad's windows, span choice and character offsets in the graph
  (the module as it is saved) on samples/qa's first test questions (contexts of several
  windows), v2.0 with a threshold giving null and non-null answers (v1.1: the slow test, against
  run_squad itself)."""
  squad_file = data.read_file(squad_model["predict_file"], version_2=True)
  squad_file = squad_file._replace(questions=squad_file.questions[:24])  # ~130 windows
  texts = _in_graph_against_postprocess(squad_model, squad_file, _qa(
      True, threshold=-1.0, n_best_size=20, max_answer_length=30))
  assert 0 < sum(bool(text) for text in texts) < len(texts)  # null and non-null answers


def _write_squad_dir(root, config, with_head=True):
  out = root / "squad_out"
  out.mkdir()
  shapes = dict(mt.google_variable_shapes(config))
  shapes = {name: shape for name, shape in shapes.items() if not name.startswith("cls/")}
  if with_head:
    shapes.update({"cls/squad/output_weights": [2, config.hidden_size],
                   "cls/squad/output_bias": [2]})
  write_google_checkpoint(str(out / "model.ckpt-5"), shapes, np.random.RandomState(11))
  return str(out)


def _samples_vocab(root, path):
  """Every character of the file's texts (lower-cased), alone and as a continuation: no [UNK]."""
  chars = set()
  for paragraph in json.load(open(path, encoding="utf-8"))["data"][0]["paragraphs"]:
    chars.update(paragraph["context"].lower())
    chars.update("".join(q["question"] for q in paragraph["qas"]).lower())
  chars -= set(" \t\n\u3000")
  return sf.write_vocab(root / "vocab.txt", sf.SPECIAL + sorted(chars) + sorted(
      "##" + c for c in chars))


@pytest.fixture(scope="module")
def squad_model(tmp_path_factory):
  root = tmp_path_factory.mktemp("qa")
  predict_file = os.path.join(REPO, "samples", "qa", "test.json")
  vocab = _samples_vocab(root, predict_file)
  config = mt.tiny_config(vocab_size=len(open(vocab, encoding="utf-8").read().split()),
                          hidden_size=32, num_hidden_layers=1, intermediate_size=64,
                          max_position_embeddings=64)
  config_file = root / "bert_config.json"
  config_file.write_text(config.to_json_string())
  return dict(root=root, out=_write_squad_dir(root, config), vocab=vocab, config=config,
              config_file=str(config_file), predict_file=predict_file)


def _argv(model, out, export_dir, *extra):
  return ["--kind=squad", "--finetuned_dir", out, "--bert_config_file", model["config_file"],
          "--vocab_file", model["vocab"], "--max_seq_length=%d" % SEQ,
          "--doc_stride=%d" % STRIDE, "--max_query_length=%d" % QUERY,
          "--export_dir", str(export_dir)] + list(extra)


def _run_squad_predict(model, out, extra):
  """run_squad --do_predict on samples/qa's test file with the directory's checkpoint."""
  values = squad_flags.define_flags(flags.FlagValues())
  values(["run_squad", "--bert_config_file=" + model["config_file"],
          "--vocab_file=" + model["vocab"], "--output_dir=" + out,
          "--max_seq_length=%d" % SEQ, "--doc_stride=%d" % STRIDE,
          "--max_query_length=%d" % QUERY, "--predict_batch_size=16", "--do_predict",
          "--predict_file=" + model["predict_file"], "--n_best_size=20",
          "--intra_op_parallelism_threads=1", "--inter_op_parallelism_threads=1"] + extra)
  settings = squad_flags.settings_of(values)
  dist = distributed.init(False)
  orchestration.run(orchestration.preflight(settings, dist, data.read_inputs(settings)), dist)


@pytest.mark.slow
@pytest.mark.parametrize("version_2", [False, True])
def test_the_export_answers_as_run_squad_predicts(squad_model, tmp_path, version_2):
  """run_squad --do_predict (predict-only: the directory's checkpoint) on samples/qa test.json
  against the export: the ONNX client's and the raw-text signature's answers equal, the chosen
  span's logits within 1e-4, SavedModel and onnxruntime logits within 1e-4 of each other."""
  out = str(tmp_path / "out")
  shutil.copytree(squad_model["out"], out)
  extra = ["--version_2_with_negative"] if version_2 else []
  _run_squad_predict(squad_model, out, extra)
  if version_2:  # a threshold between the questions' null odds: null and non-null answers
    odds = json.load(open(os.path.join(out, "null_odds.json"), encoding="utf-8"))
    extra.append("--null_score_diff_threshold=%r" % float(np.median(list(odds.values()))))
    _run_squad_predict(squad_model, out, extra)
  predictions = json.load(open(os.path.join(out, "predictions.json"), encoding="utf-8"))
  nbest = json.load(open(os.path.join(out, "nbest_predictions.json"), encoding="utf-8"))
  export_dir = tmp_path / "export"
  assert cli.main(_argv(squad_model, out, export_dir, *extra)) == 0
  squad_file = data.read_file(squad_model["predict_file"], version_2=version_2)
  questions = squad_file.questions
  client = onnx_client.OnnxQuestionAnswering(str(export_dir), threads=1)
  answers = client.answer([q.question for q in questions],
                          [squad_file.contexts[q.context_index] for q in questions])
  assert [a["text"] for a in answers] == [predictions[q.qas_id] for q in questions]
  if version_2:
    assert 0 < sum(bool(a["text"]) for a in answers) < len(answers)
  for question, answer in zip(questions, answers):
    context = squad_file.contexts[question.context_index]
    if answer["start"] is not None:
      assert context[answer["start"]:answer["end"]] == answer["text"]
      entry = next(e for e in nbest[question.qas_id] if e["text"] == answer["text"])
      assert answer["start_logit"] == pytest.approx(entry["start_logit"], abs=1e-4)
      assert answer["end_logit"] == pytest.approx(entry["end_logit"], abs=1e-4)
  edge = client.answer(["", "哪家公司？"], ["贵州茅台公告称", " \u200b "])  # 2nd: no token
  assert edge[1]["text"] == ("" if version_2 else postprocess.EMPTY) and edge[1]["start"] is None
  assert edge[0]["start"] is not None or version_2  # an empty question: still a span (v1.1)
  tokenizer = tokenization.FullTokenizer(squad_model["vocab"])
  arrays = squad_features.encode(squad_file, tokenizer, SEQ, STRIDE, QUERY, False).arrays
  ids = {"input_ids": arrays["input_ids"], "segment_ids": arrays["segment_ids"],
         "input_mask": (np.arange(SEQ)[None, :] < arrays["input_len"][:, None]).astype(np.int32)}
  assert len(ids["input_ids"]) > len(questions)  # contexts of several windows
  onnx_logits = client.run(ids)
  loaded = tf.saved_model.load(str(export_dir / export.SAVED_MODEL_DIR))
  by_ids = loaded.signatures["ids"](**{k: tf.constant(v) for k, v in ids.items()})
  for name in ("start_logits", "end_logits"):
    np.testing.assert_allclose(onnx_logits[name], by_ids[name].numpy(), atol=1e-4)
  by_text = loaded.signatures["serving_default"](
      question=tf.constant([q.question for q in questions]),
      context=tf.constant([squad_file.contexts[q.context_index] for q in questions]))
  assert [t.decode() for t in by_text["answer"].numpy()] == [a["text"] for a in answers]
  assert by_text["answer_start"].numpy().tolist() == [
      -1 if a["start"] is None else a["start"] for a in answers]
  record = json.load(open(export_dir / export.CONFIG_FILE, encoding="utf-8"))
  assert record["kind"] == "squad" and record["qa"]["doc_stride"] == STRIDE
  assert record["qa"]["version_2"] == version_2


def test_bad_inputs_exit_2_with_one_line_and_write_nothing(squad_model, tmp_path, capsys):
  target = tmp_path / "export"
  (tmp_path / "headless").mkdir()
  headless = _write_squad_dir(tmp_path / "headless", squad_model["config"], with_head=False)
  _refused(capsys, _argv(squad_model, headless, target), "no span head",
           "cls/squad/output_weights", "run_squad")
  _refused(capsys, _argv(squad_model, str(tmp_path / "nothing"), target), "no checkpoint")
  wider = tmp_path / "wider.json"
  wider.write_text(mt.tiny_config(vocab_size=squad_model["config"].vocab_size, hidden_size=48,
                                  num_hidden_layers=1, max_position_embeddings=64
                                  ).to_json_string())
  argv = _argv(squad_model, squad_model["out"], target)
  argv[argv.index(squad_model["config_file"])] = str(wider)
  _refused(capsys, argv, "another shape")
  _refused(capsys, _argv(squad_model, squad_model["out"], target, "--max_query_length=46"),
           "--max_query_length 46")
  _refused(capsys, _argv(squad_model, squad_model["out"], target, "--doc_stride=0"),
           "--doc_stride must be >= 1, got 0")
  assert not target.exists() and sorted(os.listdir(tmp_path)) == ["headless", "wider.json"]
