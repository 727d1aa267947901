# coding=utf-8
"""tools/export_serving.py on a run_classifier output: the SavedModel's raw-text signature, its
ids signature and onnxruntime give run_classifier --do_predict's labels and probabilities (within
1e-4), the SavedModel answers in a process that cannot import bert_fin, the ONNX client in one
that can import neither TensorFlow nor bert_fin; the deployment files are there and parse; bad
inputs exit 2 with one line and leave nothing behind."""
import collections
import json
import os
import random
import shutil
import subprocess
import sys

from absl import flags
import numpy as np
import onnx
import onnxruntime
import pytest
import tensorflow as tf

from helpers.finetune_toys import toy_rows
from helpers.finetune_toys import write_jsonl
from helpers.google_checkpoints import write_google_checkpoint
from helpers import modeling_toys as mt
from helpers import tokenizer_vocab
from helpers.serving_checks import refused as _refused
from helpers.serving_checks import run_blocked as _run_blocked
from bert_fin import tokenization
from bert_fin.cli import export_serving as cli
from bert_fin.finetune import finetuned
from bert_fin.finetune.classify import features
from bert_fin.finetune.classify import flags as classify_flags
from bert_fin.finetune.classify import multi_label
from bert_fin.finetune.classify import orchestration
from bert_fin.finetune.classify import tasks
from bert_fin.serving import classifier
from bert_fin.serving import deploy_files
from bert_fin.serving import export
from bert_fin.serving import graph_tokenizer
from bert_fin.serving import onnx_client
from bert_fin.training import distributed

LABELS = ["down", "up", "flat"]
SEQ = 16
EXTRA_TEXTS = ["", "  ", "沪深股指上涨" * 6, "ＩＰＯ上涨\u200b下跌", "Über iPhone 300元"]
# A process where `import bert_fin` (and with BLOCK_TF, tensorflow) fails.
def _write_finetuned(root, labels=LABELS):
  """A run_classifier output directory (random weights: encoder, pooler and a head for labels)."""
  config = mt.tiny_config(vocab_size=len(tokenizer_vocab.vocab_tokens()), num_hidden_layers=1,
                          max_position_embeddings=32)
  shapes = {name: shape for name, shape in mt.google_variable_shapes(config).items()
            if not name.startswith("cls/")}
  shapes.update({"output_weights": [len(labels), config.hidden_size],
                 "output_bias": [len(labels)]})
  out = root / "out"
  out.mkdir()
  write_google_checkpoint(str(out / "model.ckpt-20"), shapes, np.random.RandomState(4))
  (out / "labels.txt").write_text("".join(l + "\n" for l in labels), encoding="utf-8")
  (out / "classifier_config.json").write_text(json.dumps({  # as run_classifier writes it
      "pooling": "first", "long_text": "head", "max_seq_length": SEQ, "do_lower_case": True}))
  config_file = root / "bert_config.json"
  config_file.write_text(config.to_json_string())
  return str(out), str(config_file)


def _predict_flags(root, out, config_file, vocab, data="data", extra=()):
  values = classify_flags.define_flags(flags.FlagValues())
  values(["run_classifier"] + list(extra) + [ "--task_name=jsonl", "--data_dir=" + str(root / data),
          "--bert_config_file=" + config_file, "--vocab_file=" + vocab, "--output_dir=" + out,
          "--max_seq_length=%d" % SEQ, "--predict_batch_size=4", "--do_predict",
          "--intra_op_parallelism_threads=1", "--inter_op_parallelism_threads=1"])
  return classify_flags.settings_of(values)


@pytest.fixture(scope="module")
def served(tmp_path_factory):
  """The fine-tuned dir, run_classifier's test_results.tsv, and its export (made once)."""
  root = tmp_path_factory.mktemp("served")
  out, config_file = _write_finetuned(root)
  vocab = tokenizer_vocab.write_vocab(root)
  rows = [{"text": row["text"]} for row in toy_rows(random.Random(3), 18)]
  rows += [{"text": text} for text in EXTRA_TEXTS]
  (root / "data").mkdir()
  write_jsonl(root / "data" / "test.jsonl", rows)
  orchestration.run(_predict_flags(root, out, config_file, vocab), distributed.init(False))
  predicted = np.loadtxt(os.path.join(out, tasks.TEST_RESULTS_FILE), delimiter="\t", ndmin=2)
  export_dir = root / "export"
  assert cli.main(["--finetuned_dir", out, "--bert_config_file", config_file, "--vocab_file",
                   vocab, "--max_seq_length", str(SEQ), "--export_dir", str(export_dir)]) == 0
  examples = tasks.read_split(str(root / "data"), "test", "jsonl").examples
  arrays = features.encode(examples, LABELS, tokenization.FullTokenizer(vocab), SEQ).arrays
  ids = {"input_ids": arrays["input_ids"], "segment_ids": arrays["segment_ids"],
         "input_mask": (np.arange(SEQ)[None, :] < arrays["input_len"][:, None]).astype(np.int32)}
  return dict(root=root, out=out, config_file=config_file, vocab=vocab, predicted=predicted,
              texts=[row["text"] for row in rows], export=str(export_dir), ids=ids)


def _assert_like_predict(probabilities, served):
  predicted = served["predicted"]
  np.testing.assert_allclose(probabilities, predicted, atol=1e-4)
  np.testing.assert_array_equal(np.argmax(probabilities, axis=1), np.argmax(predicted, axis=1))


def test_the_predictions_compared_are_not_all_one_label(served):
  assert len(set(np.argmax(served["predicted"], axis=1))) >= 2


def test_raw_text_and_ids_signatures_give_run_classifiers_predictions(served):
  loaded = tf.saved_model.load(os.path.join(served["export"], export.SAVED_MODEL_DIR))
  by_text = loaded.signatures["serving_default"](text=tf.constant(served["texts"]))
  _assert_like_predict(by_text["probabilities"].numpy(), served)
  labels = [LABELS[i] for i in np.argmax(served["predicted"], axis=1)]
  assert [l.decode() for l in by_text["label"].numpy()] == labels
  by_ids = loaded.signatures["ids"](**{k: tf.constant(v) for k, v in served["ids"].items()})
  _assert_like_predict(by_ids["probabilities"].numpy(), served)
  np.testing.assert_allclose(by_ids["logits"].numpy(), by_text["logits"].numpy(), atol=1e-4)
  long_row = served["texts"].index(EXTRA_TEXTS[2])
  rows = range(len(served["texts"]))
  assert by_text["truncated"].numpy().tolist() == [i == long_row for i in rows]
  assert by_text["num_tokens"].numpy()[long_row] == 36
  assert by_text["num_tokens"].numpy()[served["texts"].index("")] == 0


def test_onnxruntime_gives_the_same_logits(served):
  session = onnxruntime.InferenceSession(os.path.join(served["export"], export.ONNX_FILE),
                                         providers=["CPUExecutionProvider"])
  logits, probabilities = session.run(["logits", "probabilities"], served["ids"])
  _assert_like_predict(probabilities, served)
  loaded = tf.saved_model.load(os.path.join(served["export"], export.SAVED_MODEL_DIR))
  by_ids = loaded.signatures["ids"](**{k: tf.constant(v) for k, v in served["ids"].items()})
  np.testing.assert_allclose(logits, by_ids["logits"].numpy(), atol=1e-4)


def test_the_onnx_model_runs_onnxruntimes_fused_layer_norm_gelu_and_attention(served):
  model = onnx.load(os.path.join(served["export"], export.ONNX_FILE))
  ops = collections.Counter(node.op_type for node in model.graph.node)
  layers = 1  # _write_finetuned's: a layer norm after the embeddings, two a layer
  assert (ops["LayerNormalization"], ops["FastGelu"], ops["Attention"]) == (1 + 2 * layers,
                                                                             layers, layers)
  assert ops["Transpose"] == ops["ReduceMean"] == 0


def test_the_saved_model_answers_in_a_process_without_bert_fin(served):
  script = ("import json, tensorflow as tf\n"
            "try:\n  import bert_fin\n  raise SystemExit('bert_fin importable')\n"
            "except ImportError:\n  pass\n"
            "model = tf.saved_model.load(%r)\n"
            "out = model.signatures['serving_default'](text=tf.constant(%r))\n"
            "print(json.dumps(out['probabilities'].numpy().tolist()))\n" % (
                os.path.join(served["export"], export.SAVED_MODEL_DIR), served["texts"]))
  _assert_like_predict(np.array(_run_blocked(["bert_fin"], script, "/")), served)


def test_the_onnx_client_needs_neither_tensorflow_nor_bert_fin(served):
  script = ("import json\nfrom onnx_client import OnnxClassifier\n"
            "for name in ('tensorflow', 'bert_fin'):\n"
            "  try:\n    __import__(name)\n    raise SystemExit(name + ' importable')\n"
            "  except ImportError:\n    pass\n"
            "answers = OnnxClassifier('.', threads=1).classify(%r)\n"
            "print(json.dumps([[a['probabilities'][l] for l in %r] + [a['label'], a['truncated']]"
            " for a in answers]))\n" % (served["texts"], LABELS))
  answers = _run_blocked(["bert_fin", "tensorflow"], script, served["export"])
  _assert_like_predict(np.array([a[:3] for a in answers]), served)
  assert [a[3] for a in answers] == [LABELS[i] for i in np.argmax(served["predicted"], axis=1)]
  assert [a[4] for a in answers] == [t == EXTRA_TEXTS[2] for t in served["texts"]]


def test_deployment_files(served):
  root = served["export"]
  record = json.load(open(os.path.join(root, export.CONFIG_FILE), encoding="utf-8"))
  assert record["labels"] == LABELS and record["max_seq_length"] == SEQ
  for name in ("vocab.txt", "labels.txt", "bert_config.json", export.CONFIG_FILE):
    with open(os.path.join(root, export.SAVED_MODEL_DIR, "assets", name), "rb") as f:
      asset = f.read()
    with open(os.path.join(root, name) if name != "vocab.txt" else served["vocab"], "rb") as f:
      assert asset == f.read(), name
  warmup = os.path.join(root, export.SAVED_MODEL_DIR, export.WARMUP_FILE)
  records = list(tf.data.TFRecordDataset(warmup).as_numpy_iterator())
  assert len(records) == 2
  assert records[0] == deploy_files.prediction_log(
      export.MODEL_NAME, "serving_default", {"text": np.array(["上涨", ""], dtype=object)})
  batching = open(os.path.join(root, export.BATCHING_FILE)).read()
  assert "max_batch_size { value: %d }" % deploy_files.MAX_BATCH_SIZE in batching
  for name in ("bert_fin_text", "bert_fin_onnx"):
    text = open(os.path.join(root, "triton", name, "config.pbtxt")).read()
    assert 'name: "%s"' % name in text and "dynamic_batching {" in text
  assert os.path.isfile(os.path.join(root, "tokenizer", "tokenizer.json"))


def test_warmup_record_is_a_prediction_log_on_the_wire():
  """Decoded by hand: PredictionLog.predict_log (6) -> request (1) -> model_spec (1) name (1),
  signature_name (3); inputs (2) map entry key (1) / TensorProto value (2)."""
  def fields(data):
    out, i = {}, 0
    while i < len(data):
      key, i = _varint(data, i)
      length, i = _varint(data, i)
      out.setdefault(key >> 3, []).append(data[i:i + length])
      i += length
    return out
  record = deploy_files.prediction_log("m", "ids", {"x": np.array([[1, 2]], np.int32)})
  request = fields(fields(fields(record)[6][0])[1][0])
  spec = fields(request[1][0])
  assert spec[1] == [b"m"] and spec[3] == [b"ids"]
  entry = fields(request[2][0])
  assert entry[1] == [b"x"]
  assert tf.make_ndarray(tf.make_tensor_proto(0).FromString(entry[2][0])).tolist() == [[1, 2]]


def _varint(data, i):
  value, shift = 0, 0
  while True:
    byte = data[i]
    i += 1
    value |= (byte & 0x7F) << shift
    shift += 7
    if byte < 0x80:
      return value, i


def test_a_pair_model_served_in_process_gives_run_classifiers_predictions(served, tmp_path):
  """--text_pairs: text and text_b (an empty text_b read as a single text, a long pair cut
  longer side first), the module as it is saved, against run_classifier --do_predict."""
  rng = random.Random(8)
  texts = served["texts"]
  rows = [{"text": rng.choice(texts), "text_b": rng.choice(texts)} for _ in range(12)]
  rows += [{"text": "上涨", "text_b": ""}, {"text": "下跌" * 9, "text_b": "上涨" * 5}]
  (tmp_path / "pairs").mkdir()
  write_jsonl(tmp_path / "pairs" / "test.jsonl", rows)
  out = str(tmp_path / "out")
  shutil.copytree(served["out"], out)
  orchestration.run(_predict_flags(tmp_path, out, served["config_file"], served["vocab"],
                                   "pairs"), distributed.init(False))
  predicted = np.loadtxt(os.path.join(out, tasks.TEST_RESULTS_FILE), delimiter="\t", ndmin=2)
  plan = export.check(export.Request(out, served["config_file"], served["vocab"], True, SEQ,
                                     str(tmp_path / "unused"), True, False))
  module = classifier.ClassifierServing(
      plan.spec, plan.checkpoint, graph_tokenizer.GraphTokenizer(plan.vocab, True), plan.vocab)
  answer = module.text(tf.constant([r["text"] for r in rows]),
                       tf.constant([r["text_b"] for r in rows]))
  np.testing.assert_allclose(answer["probabilities"].numpy(), predicted, atol=1e-4)
  tokenizer = tokenization.FullTokenizer(served["vocab"])
  room = lambda row: SEQ - (3 if row["text_b"] else 2)
  longer = [len(tokenizer.tokenize(r["text"]) + tokenizer.tokenize(r["text_b"])) > room(r)
            for r in rows]
  assert answer["truncated"].numpy().tolist() == longer and longer[-1] and not longer[-2]


def _thresholds_between(probabilities, quantile):
  """float [L]: per label, midway between two neighbouring predicted probabilities (no
  probability sits on its threshold), about `quantile` of them below it."""
  ordered = np.sort(probabilities, axis=0)
  row = int(quantile * (len(ordered) - 1))
  return (ordered[row] + ordered[row + 1]) / 2.0


def test_the_multi_label_rule_in_the_graph_and_the_client_is_multi_label_predict():
  """Ties with the threshold, rows with no label over it (the most probable one), rows with
  several: classifier.predicted_labels (float32 in, as served) and the ONNX client's restatement
  give multi_label.predict's sets."""
  rng = np.random.RandomState(5)
  probabilities = rng.uniform(size=[64, 4]).astype(np.float32)
  thresholds = np.array([0.5, 0.7, 0.9, 0.3])
  probabilities[:8, 0] = np.float32(0.5)  # on the threshold: predicted
  probabilities[8:16] = np.float32(0.1)   # nothing over: the first most probable
  expected = multi_label.predict(probabilities, thresholds)
  assert expected.sum(axis=1).max() >= 2 and expected[8:16, 0].all()
  in_graph = classifier.predicted_labels(tf.constant(probabilities), thresholds).numpy()
  np.testing.assert_array_equal(in_graph, expected)
  np.testing.assert_array_equal(onnx_client.predicted_labels(probabilities, thresholds), expected)


@pytest.mark.slow
def test_a_multi_label_model_serves_every_label_over_its_threshold(served, tmp_path):
  """run_classifier --multi_label --do_predict's sigmoid probabilities and multi_label.predict's
  label sets (thresholds from multi_label.json) against the raw-text and ids signatures,
  onnxruntime and the ONNX client."""
  out = str(tmp_path / "out")
  shutil.copytree(served["out"], out)
  orchestration.run(_predict_flags(served["root"], out, served["config_file"], served["vocab"],
                                   extra=["--multi_label"]), distributed.init(False))
  predicted = np.loadtxt(os.path.join(out, tasks.TEST_RESULTS_FILE), delimiter="\t", ndmin=2)
  thresholds = _thresholds_between(predicted, 0.6)
  multi_label.write_thresholds(out, multi_label.Thresholds(LABELS, thresholds, 0.5))
  expected = multi_label.predict(predicted, thresholds)
  over = predicted >= thresholds
  assert expected.sum(axis=1).max() >= 2 and not over.any(axis=1).all()  # both rules used
  names = [" ".join(l for l, on in zip(LABELS, row) if on) for row in expected]
  export_dir = str(tmp_path / "export")
  assert cli.main(["--finetuned_dir", out, "--bert_config_file", served["config_file"],
                   "--vocab_file", served["vocab"], "--max_seq_length", str(SEQ),
                   "--export_dir", export_dir]) == 0
  loaded = tf.saved_model.load(os.path.join(export_dir, export.SAVED_MODEL_DIR))
  by_text = loaded.signatures["serving_default"](text=tf.constant(served["texts"]))
  by_ids = loaded.signatures["ids"](**{k: tf.constant(v) for k, v in served["ids"].items()})
  for answer in (by_text, by_ids):
    np.testing.assert_allclose(answer["probabilities"].numpy(), predicted, atol=1e-4)
    np.testing.assert_array_equal(answer["predicted"].numpy(), expected)
    assert [l.decode() for l in answer["label"].numpy()] == names
  session = onnxruntime.InferenceSession(os.path.join(export_dir, export.ONNX_FILE),
                                         providers=["CPUExecutionProvider"])
  logits, = session.run(["logits"], served["ids"])
  np.testing.assert_allclose(logits, by_ids["logits"].numpy(), atol=1e-4)
  answers = onnx_client.OnnxClassifier(export_dir, threads=1).classify(served["texts"])
  assert [a["label"] for a in answers] == names
  assert [a["labels"] for a in answers] == [n.split() for n in names]
  record = json.load(open(os.path.join(export_dir, export.CONFIG_FILE), encoding="utf-8"))
  assert record["multi_label"] and record["thresholds"] == thresholds.tolist()


def test_the_tokenizing_flags_are_read_from_classifier_config(served, tmp_path, capsys):
  """Recorded: the flags may be left out, and one given must equal the record; not recorded (a
  directory saved before they were): the flags are needed."""
  def request(out, lower=None, seq=None):
    return export.Request(str(out), served["config_file"], served["vocab"], lower, seq,
                          str(tmp_path / "export"), False, True)
  def argv(out, *flags):
    return ["--finetuned_dir", str(out), "--bert_config_file", served["config_file"],
            "--vocab_file", served["vocab"], "--export_dir", str(tmp_path / "export")] + list(flags)
  plan = export.check(request(served["out"]))
  assert (plan.request.max_seq_length, plan.request.do_lower_case) == (SEQ, True)
  assert plan.spec.seq_length == SEQ
  _refused(capsys, argv(served["out"], "--max_seq_length=12"), "--max_seq_length=12",
           "--max_seq_length=%d" % SEQ)
  _refused(capsys, argv(served["out"], "--do_lower_case=false"), "--do_lower_case=false",
           "--do_lower_case=true")
  older = tmp_path / "older"
  shutil.copytree(served["out"], older)
  (older / "classifier_config.json").write_text(json.dumps({"pooling": "first"}))
  _refused(capsys, argv(older, "--do_lower_case=true"), "--max_seq_length", "does not record")
  _refused(capsys, argv(older, "--max_seq_length=%d" % SEQ), "--do_lower_case", "does not record")
  plan = export.check(request(older, False, 12))
  assert (plan.request.max_seq_length, plan.request.do_lower_case) == (12, False)
  (older / "classifier_config.json").write_text(json.dumps({"max_seq_length": "16"}))
  _refused(capsys, argv(older, "--do_lower_case=true"), "max_seq_length is '16', not an int")
  assert not os.path.exists(tmp_path / "export")


def test_a_multi_label_record_of_other_labels_is_refused(served, tmp_path, capsys):
  out = tmp_path / "out"
  shutil.copytree(served["out"], out)
  multi_label.write_thresholds(str(out), multi_label.Thresholds(
      list(reversed(LABELS)), [0.5] * 3, 0.5))
  _refused(capsys, ["--finetuned_dir", str(out), "--bert_config_file", served["config_file"],
                    "--vocab_file", served["vocab"], "--max_seq_length", str(SEQ),
                    "--export_dir", str(tmp_path / "export")], "multi_label.json", "labels.txt")
  (out / "multi_label.json").write_text("{\"labels\": 3}")
  _refused(capsys, ["--finetuned_dir", str(out), "--bert_config_file", served["config_file"],
                    "--vocab_file", served["vocab"], "--max_seq_length", str(SEQ),
                    "--export_dir", str(tmp_path / "export")], "not a multi-label record")
  assert not (tmp_path / "export").exists()


def test_a_head_the_export_cannot_serve_is_refused(served, tmp_path, capsys):
  """classifier_config.json says what the head is: an entity-marker head (its logits read the
  markers' states) or a multi-label head without its dev thresholds is refused, not served as a
  plain single-label model."""
  argv = lambda out: ["--finetuned_dir", str(out), "--bert_config_file", served["config_file"],
                      "--vocab_file", served["vocab"], "--max_seq_length", str(SEQ),
                      "--export_dir", str(tmp_path / "export")]
  for key, value, words in (("entity_markers", 2, ("--entity_markers=2", "markers")),
                            ("multi_label", True, ("--multi_label", "multi_label.json",
                                                   "--do_eval"))):
    out = tmp_path / key
    shutil.copytree(served["out"], out)
    config = json.loads((out / "classifier_config.json").read_text())
    config[key] = value
    (out / "classifier_config.json").write_text(json.dumps(config))
    _refused(capsys, argv(out), *words)
    assert not (tmp_path / "export").exists()
  # the module's own export read a config that records no head kind (a model saved before
  # they were recorded: single-label, no markers), and a recorded plain head reads as such
  assert finetuned.read_head(served["out"]) == {}
  config.update(multi_label=False, entity_markers=0)
  (out / "classifier_config.json").write_text(json.dumps(config))
  assert finetuned.read_head(str(out)) == {"multi_label": False, "entity_markers": 0}


def test_bad_inputs_exit_2_with_one_line_and_write_nothing(served, tmp_path, capsys):
  base = ["--bert_config_file", served["config_file"], "--vocab_file", served["vocab"],
          "--max_seq_length", str(SEQ)]
  target = tmp_path / "export"
  argv = lambda finetuned, export_dir=target: base + ["--finetuned_dir", finetuned,
                                                      "--export_dir", str(export_dir)]
  pretrained = tmp_path / "pretrained"
  pretrained.mkdir()
  write_google_checkpoint(str(pretrained / "model.ckpt-1"),
                          mt.google_variable_shapes(mt.tiny_config(vocab_size=400)),
                          np.random.RandomState(1), training_state=False)
  _refused(capsys, argv(str(pretrained)), "no classifier or tagger head")
  other_labels = tmp_path / "other"
  other_labels.mkdir()
  _write_finetuned(other_labels, labels=["a", "b"])
  (other_labels / "out" / "labels.txt").write_text("a\nb\nc\n")
  _refused(capsys, argv(str(other_labels / "out")), "head for 2 labels", "lists 3")
  (other_labels / "out" / "labels.txt").unlink()
  _refused(capsys, argv(str(other_labels / "out")), "labels.txt")
  big_vocab = tmp_path / "big_vocab.txt"
  big_vocab.write_text(open(served["vocab"], encoding="utf-8").read() + "".join(
      "extra%d\n" % i for i in range(50)), encoding="utf-8")
  _refused(capsys, base[:2] + ["--vocab_file", str(big_vocab)] + base[4:] + [
      "--finetuned_dir", served["out"], "--export_dir", str(target)], "vocab")
  wider = tmp_path / "wider_config.json"
  wider.write_text(mt.tiny_config(vocab_size=len(tokenizer_vocab.vocab_tokens()), hidden_size=48,
                                  num_hidden_layers=1, max_position_embeddings=32).to_json_string())
  _refused(capsys, ["--bert_config_file", str(wider)] + base[2:] + [
      "--finetuned_dir", served["out"], "--export_dir", str(target)], "another shape")
  occupied = tmp_path / "occupied"
  occupied.mkdir()
  (occupied / "keep.txt").write_text("x")
  _refused(capsys, argv(served["out"], occupied), "not empty")
  a_file = tmp_path / "a_file"
  a_file.write_text("x")
  _refused(capsys, argv(served["out"], a_file / "export"), "--export_dir")
  assert not target.exists() and os.listdir(occupied) == ["keep.txt"]
  assert sorted(os.listdir(tmp_path)) == ["a_file", "big_vocab.txt", "occupied", "other",
                                          "pretrained", "wider_config.json"]


def test_a_failure_while_writing_leaves_no_export(served, tmp_path, monkeypatch, capsys):
  def full_disk(*args, **kwargs):
    raise OSError(28, "No space left on device", "tokenizer.json")
  monkeypatch.setattr(export.hf_tokenizer, "write_tokenizer_files", full_disk)
  target = tmp_path / "export"
  _refused(capsys, ["--finetuned_dir", served["out"], "--bert_config_file",
                    served["config_file"], "--vocab_file", served["vocab"], "--max_seq_length",
                    str(SEQ), "--export_dir", str(target), "--onnx=false"], "No space left")
  assert os.listdir(tmp_path) == []  # neither the export nor a scratch directory


def test_a_checkpoint_whose_values_do_not_read_is_one_line(served, tmp_path, capsys):
  broken = tmp_path / "broken"
  shutil.copytree(served["out"], broken)
  data_file = next(broken.glob("model.ckpt-20.data-*"))
  data_file.write_bytes(data_file.read_bytes()[:100])
  (broken / "checkpoint").write_text('model_checkpoint_path: "model.ckpt-20"\n')  # this copy's
  target = tmp_path / "out" / "export"
  _refused(capsys, ["--finetuned_dir", str(broken), "--bert_config_file", served["config_file"],
                    "--vocab_file", served["vocab"], "--max_seq_length", str(SEQ),
                    "--export_dir", str(target), "--onnx=false"], "cannot read", "damaged")
  assert not target.exists() and os.listdir(tmp_path / "out") == []
