# coding=utf-8
"""tools/export_serving.py on a run_ner output (a CRF tagger): the SavedModel's raw-text
signature, its ids signature and onnxruntime (onnx_client.py's numpy Viterbi) give run_ner
--do_predict's tags on samples/ner's test sentences and its entities, with character offsets, on
texts with spaces, control characters, [UNK] words and long Latin words; emissions within 1e-4;
the in-graph entity rule equals ner_metrics.entities; a run_ner directory without its labels or
with other labels exits 2 with one line and writes nothing."""
import json
import os
import random

from absl import flags
import numpy as np
import onnxruntime
import pytest
import tensorflow as tf

from helpers import REPO
from helpers.finetune_toys import write_chars
from helpers.google_checkpoints import write_google_checkpoint
from helpers import modeling_toys as mt
from helpers import tokenizer_vocab
from bert_fin import tokenization
from bert_fin.cli import export_serving as cli
from bert_fin.finetune.ner import data as ner_data
from bert_fin.finetune.ner import features as ner_features
from bert_fin.finetune.ner import flags as ner_flags
from bert_fin.finetune.ner import metrics as ner_metrics
from bert_fin.finetune.ner import orchestration as ner_run
from bert_fin.serving import export
from bert_fin.serving import ner
from bert_fin.serving import onnx_client
from bert_fin.training import distributed
from helpers.serving_checks import refused as _refused
from helpers.serving_checks import run_blocked as _run_blocked

TAGS = ["O", "B-LOC", "I-LOC", "B-ORG", "I-ORG", "B-PER", "I-PER"]
SEQ = 48
SAMPLE = os.path.join(REPO, "samples", "ner")
STRESS = ["贵州 茅台\t与\u200b招商银行在武汉签署", "iPhone15发布，ＩＰＯ上涨 2019年 基金",
          "x" * 230 + "银行股指", "Über\x01café 基金经理陈东英", "中国人民银行  上调利率",
          "abcdefghij" * 5 + "银行"]  # a unit of 50 pieces: cut to a window's 46
CUT = len(STRESS) - 1
LONG = "上涨" * 40  # 80 units: more than a window of SEQ - 2 pieces
QUICK_SENTENCES = 10


def _save(path, values):
  """A checkpoint of {name: numpy value} and a global step."""
  with tf.Graph().as_default():
    for name, value in values.items():
      tf.compat.v1.get_variable(name, initializer=tf.constant(value))
    tf.compat.v1.train.get_or_create_global_step()  # what an Estimator restores too
    with tf.compat.v1.Session() as session:
      session.run(tf.compat.v1.global_variables_initializer())
      tf.compat.v1.train.Saver().save(session, path)


def _write_vocab(root):
  """The test vocab and the CJK characters of samples/ner's test sentences (so that their tags
  differ from character to character)."""
  tokens = tokenizer_vocab.vocab_tokens()
  text = open(os.path.join(SAMPLE, "test.txt"), encoding="utf-8").read()
  tokens += sorted({c for c in text if "\u4e00" <= c <= "\u9fff"} - set(tokens))
  path = root / "vocab.txt"
  path.write_text("".join(t + "\n" for t in tokens), encoding="utf-8")
  return str(path), len(tokens)


def _write_tagger(root, vocab_size, crf=True):
  """A run_ner output directory: random weights with a tagger head (and CRF transitions)."""
  config = mt.tiny_config(vocab_size=vocab_size, num_hidden_layers=1,
                          max_position_embeddings=64)
  shapes = {name: shape for name, shape in mt.google_variable_shapes(config).items()
            if not name.startswith("cls/")}
  shapes.update({"ner/output_weights": [len(TAGS), config.hidden_size],
                 "ner/output_bias": [len(TAGS)]})
  if crf:
    shapes["ner/transitions"] = [len(TAGS), len(TAGS)]
  out = root / "out"
  out.mkdir()
  values = write_google_checkpoint(str(out / "model.ckpt-5"), shapes, np.random.RandomState(7),
                                   training_state=False)
  for name in values:  # tags that change from unit to unit: the layer's residual (the
    if name.endswith("output/dense/kernel"):  # characters' embeddings) outweighs the
      values[name] *= 0.05                    # attention and feed-forward outputs
    elif name.endswith(("LayerNorm/gamma", "LayerNorm/beta")):
      values[name] = np.full_like(values[name], name.endswith("gamma"))
  values["ner/output_bias"] *= 0.0
  _save(str(out / "model.ckpt-5"), values)
  (out / "labels.txt").write_text("".join(t + "\n" for t in TAGS), encoding="utf-8")
  config_file = root / "bert_config.json"
  config_file.write_text(config.to_json_string())
  return str(out), str(config_file)


def _sample_sentences(count=None):
  """samples/ner test sentences whose units are the raw-text rule's units of their text."""
  sentences = ner_data.read_split(SAMPLE, "test", ner_data.CHARS).sentences
  same = [s.units for s in sentences if ner_data.cluener_units("".join(s.units))[0] == s.units]
  assert len(same) >= 0.9 * len(sentences)
  return same[:count]


def _run_ner(root, out, config_file, vocab, name, data_format, write):
  """run_ner --do_predict on the data `write(data_dir)` writes; returns the predictions path."""
  data = root / name
  data.mkdir()
  write(data)
  values = ner_flags.define_flags(flags.FlagValues())
  values(["run_ner", "--task_name=" + data_format, "--data_dir=" + str(data),
          "--bert_config_file=" + config_file, "--vocab_file=" + vocab, "--output_dir=" + out,
          "--max_seq_length=%d" % SEQ, "--predict_batch_size=8", "--do_predict",
          "--intra_op_parallelism_threads=1", "--inter_op_parallelism_threads=1"])
  ner_run.run(ner_flags.settings_of(values), distributed.init(False))
  return os.path.join(out, ner_data.PREDICTIONS_FILE[data_format])


def run_ner_tags(served, name, unit_lists):
  """run_ner's predicted tags of sentences given as units (its chars format)."""
  path = _run_ner(served["root"], served["out"], served["config_file"], served["vocab"], name,
                  ner_data.CHARS, lambda data: write_chars(
                      data / "test.txt", [(u, u) for u in unit_lists], with_tags=False))
  return ner_data.read_predictions(path, ner_data.CHARS, TAGS)


def run_ner_entities(served, name, texts):
  """run_ner's entities of texts (its CLUENER format): [(type, start, end exclusive, text)]."""
  write = lambda data: (data / "test.json").write_text("".join(
      json.dumps({"text": t}, ensure_ascii=False) + "\n" for t in texts), encoding="utf-8")
  path = _run_ner(served["root"], served["out"], served["config_file"], served["vocab"], name,
                  ner_data.CLUENER, write)
  found = []
  for line in open(path, encoding="utf-8"):
    row = json.loads(line)
    found.append(sorted((kind, s, e + 1, mention) for kind, mentions in row["label"].items()
                        for mention, spans in mentions.items() for s, e in spans))
  return found


@pytest.fixture(scope="module")
def served(tmp_path_factory):
  """The tagger dir, its export, and run_ner's tags and entities (made once)."""
  root = tmp_path_factory.mktemp("served_ner")
  vocab, vocab_size = _write_vocab(root)
  out, config_file = _write_tagger(root, vocab_size)
  export_dir = root / "export"
  assert cli.main(["--finetuned_dir", out, "--bert_config_file", config_file, "--vocab_file",
                   vocab, "--max_seq_length", str(SEQ), "--do_lower_case=true", "--export_dir", str(export_dir)]) == 0
  served = dict(root=root, out=out, config_file=config_file, vocab=vocab, export=str(export_dir))
  units = _sample_sentences(QUICK_SENTENCES + 4)
  units = units[:QUICK_SENTENCES] + [sum(units[QUICK_SENTENCES:], [])]  # several windows
  served.update(units=units, tags=run_ner_tags(served, "chars", units),
                texts=["".join(u) for u in units] + STRESS)
  served["entities"] = run_ner_entities(served, "cluener", served["texts"])
  served["model"] = tf.saved_model.load(os.path.join(str(export_dir), export.SAVED_MODEL_DIR))
  return served


def _text_answers(model, texts):
  out = model.signatures["serving_default"](text=tf.constant(texts))
  return {k: v.numpy() for k, v in out.items()}


def _strings(row):
  return [x.decode("utf-8") for x in row]


def _entities(out, row):
  count = out["num_entities"][row]
  return sorted(zip(_strings(out["entity_type"][row][:count]),
                    out["entity_start"][row][:count].tolist(),
                    out["entity_end"][row][:count].tolist(),
                    _strings(out["entity_text"][row][:count])))


def _unit_tags(out, row):
  return _strings(out["tags"][row][:out["num_units"][row]])


def _encode(unit_lists, vocab):
  """run_ner's model inputs of sentences that fit one window each."""
  sentences = [ner_data.Sentence(u, None, 1, None) for u in unit_lists]
  encoded = ner_features.encode(sentences, TAGS, tokenization.FullTokenizer(vocab), SEQ)
  arrays = encoded.arrays
  assert len(encoded.windows) == len(unit_lists)
  return {"input_ids": arrays["input_ids"], "segment_ids": arrays["segment_ids"],
          "input_mask": (np.arange(SEQ)[None, :] < arrays["input_len"][:, None]).astype(np.int32),
          "label_mask": arrays["label_mask"]}


def test_the_tags_compared_are_not_all_outside(served):
  tags = [t for sentence in served["tags"] for t in sentence]
  assert len(set(tags)) >= 4 and sum(1 for e in served["entities"] if e) >= 5


def assert_like_run_ner(model, unit_lists, tags, vocab):
  """The raw-text signature gives run_ner's tags (long sentences in windows too), the ids
  signature on the sentences of one window and the same emissions."""
  by_text = _text_answers(model, ["".join(u) for u in unit_lists])
  assert [_unit_tags(by_text, row) for row in range(len(unit_lists))] == tags
  single = np.flatnonzero(by_text["num_windows"] == 1)
  assert len(single) >= len(unit_lists) - 2 and not by_text["truncated"].any()
  inputs = _encode([unit_lists[row] for row in single], vocab)
  by_ids = model.signatures["ids"](**{k: tf.constant(v) for k, v in inputs.items()})
  for index, mask in enumerate(inputs["label_mask"]):
    assert _strings(by_ids["tags"].numpy()[index][mask > 0]) == tags[single[index]]
  np.testing.assert_allclose(by_ids["logits"].numpy(), by_text["logits"][single], atol=1e-4)
  return inputs, by_ids["logits"].numpy()


def test_raw_text_and_ids_signatures_give_run_ners_tags(served):
  assert_like_run_ner(served["model"], served["units"], served["tags"], served["vocab"])


def test_entities_have_run_ners_character_offsets(served):
  out = _text_answers(served["model"], served["texts"])
  for row, (text, expected) in enumerate(zip(served["texts"], served["entities"])):
    assert _entities(out, row) == expected, text
    units, offsets = ner_data.cluener_units(text)
    assert out["unit_start"][row][:len(units)].tolist() == offsets
    assert out["num_units"][row] == len(units)


def test_long_texts_take_windows_a_cut_unit_says_so_an_empty_text_has_no_units(served):
  out = _text_answers(served["model"], [LONG, "", "基金", STRESS[CUT]])
  assert served["model"].signatures["serving_default"](text=tf.constant(
      served["texts"]))["num_windows"].numpy().max() >= 2  # compared with run_ner's
  assert out["num_windows"].tolist() == [3, 1, 1, 2]  # the cut unit fills a window
  assert out["truncated"].tolist() == [False, False, False, True]
  assert out["num_units"].tolist() == [len(LONG), 0, 2, 3]
  assert all(_unit_tags(out, 0)) and len(_unit_tags(out, 0)) == len(LONG)
  assert out["num_entities"][1] == 0 and _unit_tags(out, 1) == []
  for texts, units in (([""], 0), (["\u200b\x01"], 2), ([b"\xff\xfe" + "贵州".encode()], 2)):
    out = _text_answers(served["model"], texts)  # batches without a character or a piece
    assert out["num_units"].tolist() == [units] and all(_unit_tags(out, 0))
    assert out["num_windows"].tolist() == [1] and out["logits"].shape == (1, SEQ, len(TAGS))


def test_in_graph_entities_equal_ner_metrics_entities():
  rng = random.Random(5)
  labels = ["O", "B-A", "I-A", "E-A", "S-A", "B-B", "I-B", "E-B", "S-B"]
  prefixes, kinds, types = ner.tag_tables(labels)
  rows = [[rng.randrange(len(labels)) for _ in range(rng.randrange(0, 12))] for _ in range(300)]
  rows += [[2, 2], [1, 6], [3, 2], [4, 4], [0, 2, 0]]
  width = max(len(r) for r in rows)
  dense = np.array([r + [0] * (width - len(r)) for r in rows], np.int32)
  start, end, kind = ner.entity_spans(tf.constant(dense), tf.constant(prefixes),
                                      tf.constant(kinds), 0)
  for row, tags in enumerate(rows):
    found = list(zip([types[k] for k in kind[row].numpy()], start[row].numpy().tolist(),
                     end[row].numpy().tolist()))
    assert found == ner_metrics.entities([labels[t] for t in tags]), [labels[t] for t in tags]


def test_onnxruntime_and_the_numpy_viterbi_give_run_ners_tags_and_entities(served):
  inputs, logits = assert_like_run_ner(served["model"], served["units"], served["tags"],
                                       served["vocab"])
  session = onnxruntime.InferenceSession(os.path.join(served["export"], export.ONNX_FILE),
                                         providers=["CPUExecutionProvider"])
  (onnx_logits,) = session.run(["logits"], {k: v for k, v in inputs.items() if k != "label_mask"})
  np.testing.assert_allclose(onnx_logits, logits, atol=1e-4)
  tagger = onnx_client.OnnxTagger(served["export"], threads=1)
  answers = tagger.tag(served["texts"] + [LONG, ""])
  for answer, tags in zip(answers, served["tags"]):
    assert answer["tags"] == tags
  for answer, expected in zip(answers, served["entities"]):
    assert sorted(tuple(e) for e in answer["entities"]) == expected
  assert [a["windows"] for a in answers[-2:]] == [3, 1]
  assert [a["truncated"] for a in answers] == [i == len(served["units"]) + CUT
                                              for i in range(len(answers))]
  assert answers[-1]["tags"] == [] and answers[-1]["entities"] == []


def test_deployment_files(served):
  record = json.load(open(os.path.join(served["export"], export.CONFIG_FILE), encoding="utf-8"))
  assert record["kind"] == "ner" and record["labels"] == TAGS and record["use_crf"]
  assert np.array(record["transitions"]).shape == (len(TAGS), len(TAGS))
  text = open(os.path.join(served["export"], "triton", "bert_fin_text", "config.pbtxt")).read()
  assert 'name: "entity_start"' in text and 'name: "label_mask"' not in text
  warmup = os.path.join(served["export"], export.SAVED_MODEL_DIR, export.WARMUP_FILE)
  assert len(list(tf.data.TFRecordDataset(warmup).as_numpy_iterator())) == 2


@pytest.mark.slow
def test_every_sample_sentence_gives_run_ners_tags_and_entities(served):
  units = _sample_sentences()
  tags = run_ner_tags(served, "chars_all", units)
  assert_like_run_ner(served["model"], units, tags, served["vocab"])
  texts = ["".join(u) for u in units]
  out = _text_answers(served["model"], texts)
  for row, expected in enumerate(run_ner_entities(served, "cluener_all", texts)):
    assert _entities(out, row) == expected
  answers = onnx_client.OnnxTagger(served["export"], threads=1).tag(texts)
  assert [a["tags"] for a in answers] == tags


def test_a_tagger_without_its_labels_or_with_others_exits_2_and_writes_nothing(
    served, tmp_path, capsys):
  target = tmp_path / "export"
  argv = lambda finetuned: ["--finetuned_dir", finetuned, "--bert_config_file",
                            served["config_file"], "--vocab_file", served["vocab"],
                            "--max_seq_length", str(SEQ), "--do_lower_case=true", "--export_dir", str(target)]
  other = tmp_path / "other"
  other.mkdir()
  for name in os.listdir(served["out"]):
    if name.startswith(("model.ckpt-5", "checkpoint")):
      os.link(os.path.join(served["out"], name), other / name)
  _refused(capsys, argv(str(other)), "labels.txt", "run_ner")
  (other / "labels.txt").write_text("O\nB-ORG\nI-ORG\n")
  _refused(capsys, argv(str(other)), "tagger head for 7 tags", "lists 3")
  (other / "labels.txt").write_text("".join(t + "\n" for t in TAGS[:-1]) + "PER\n")
  _refused(capsys, argv(str(other)), "PER not a tag")
  _refused(capsys, argv(served["out"]) + ["--text_pairs"], "--text_pairs")
  assert not target.exists() and sorted(os.listdir(tmp_path)) == ["other"]


def test_in_graph_and_numpy_windows_equal_run_ners():
  rng = random.Random(9)
  capacity = 6
  rows = [[rng.randint(1, capacity) for _ in range(rng.randrange(0, 14))] for _ in range(60)]
  width = max(len(r) for r in rows) + 1
  starts = np.full([len(rows), width], 10 ** 9, np.int64)
  for row, lengths in enumerate(rows):
    starts[row, :len(lengths) + 1] = np.concatenate([[0], np.cumsum(lengths)])
  first, end = ner.plan_windows(tf.constant(starts),
                                tf.constant([len(r) for r in rows], tf.int64), capacity)
  for row, lengths in enumerate(rows):
    expected = ner_features.plan_windows(lengths, capacity)
    assert list(zip(first[row].numpy().tolist(), end[row].numpy().tolist())) == expected
    assert onnx_client.plan_windows(lengths, capacity) == expected
    if lengths:  # the window each unit is read from
      cumulative = np.concatenate([[0], np.cumsum(lengths)])
      pairs = [(w, u) for w, (f, e) in enumerate(expected) for u in range(f, e)]
      context = [min(cumulative[u] - cumulative[expected[w][0]],
                     cumulative[expected[w][1]] - cumulative[u + 1]) for w, u in pairs]
      chosen = ner.choose_windows(tf.constant(context, tf.int64),
                                  tf.constant([u for _, u in pairs], tf.int64), len(lengths))
      assert [pairs[p][0] for p in chosen.numpy()] == ner_features.choose_windows(expected,
                                                                                   lengths)


@pytest.mark.slow
def test_a_softmax_tagger_gives_run_ners_tags(tmp_path):
  vocab, vocab_size = _write_vocab(tmp_path)
  out, config_file = _write_tagger(tmp_path, vocab_size, crf=False)
  export_dir = tmp_path / "export"
  assert cli.main(["--finetuned_dir", out, "--bert_config_file", config_file, "--vocab_file",
                   vocab, "--max_seq_length", str(SEQ), "--do_lower_case=true", "--export_dir", str(export_dir)]) == 0
  served = dict(root=tmp_path, out=out, config_file=config_file, vocab=vocab)
  units = _sample_sentences(QUICK_SENTENCES)
  tags = run_ner_tags(served, "chars", units)
  model = tf.saved_model.load(os.path.join(str(export_dir), export.SAVED_MODEL_DIR))
  assert_like_run_ner(model, units, tags, vocab)
  answers = onnx_client.OnnxTagger(str(export_dir), threads=1).tag(["".join(u) for u in units])
  assert [a["tags"] for a in answers] == tags
  record = json.load(open(os.path.join(str(export_dir), export.CONFIG_FILE), encoding="utf-8"))
  assert not record["use_crf"] and record["transitions"] is None


@pytest.mark.slow
def test_the_export_answers_without_bert_fin_and_the_client_without_tensorflow(served):
  texts = served["texts"]
  script = ("import json, tensorflow as tf\n"
            "try:\n  import bert_fin\n  raise SystemExit('bert_fin importable')\n"
            "except ImportError:\n  pass\n"
            "model = tf.saved_model.load(%r)\n"
            "out = model.signatures['serving_default'](text=tf.constant(%r))\n"
            "print(json.dumps([[x.decode() for x in row] for row in out['tags'].numpy()]))\n" % (
                os.path.join(served["export"], export.SAVED_MODEL_DIR), texts))
  tags = _run_blocked(["bert_fin"], script, "/")
  assert [row[:len(t)] for row, t in zip(tags, served["tags"])] == served["tags"]
  script = ("import json\nfrom onnx_client import OnnxTagger\n"
            "for name in ('tensorflow', 'bert_fin'):\n"
            "  try:\n    __import__(name)\n    raise SystemExit(name + ' importable')\n"
            "  except ImportError:\n    pass\n"
            "print(json.dumps(OnnxTagger('.', threads=1).tag(%r)))\n" % texts)
  answers = _run_blocked(["bert_fin", "tensorflow"], script, served["export"])
  assert [sorted(tuple(e) for e in a["entities"]) for a in answers] == served["entities"]
