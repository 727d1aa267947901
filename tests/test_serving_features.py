# coding=utf-8
"""tools/export_serving.py --kind=features on a pretrained checkpoint: the SavedModel's raw-text
signature, its ids signature and onnxruntime give extract_features.py's token vectors (its JSON
lines, within 1e-4) and sentence vectors (--vectors_file, --pooling mean), its tokens, and BERT's
pooled output (the numpy oracle's); a checkpoint without the pooler serves without it; bad inputs
exit 2 with one line and write nothing."""
import json
import os

from absl import flags
import numpy as np
import pytest
import tensorflow as tf

from helpers import modeling_toys as mt
from helpers import reference_bert_numpy as ref
from helpers import tokenizer_vocab
from helpers.random_checkpoints import is_encoder
from helpers.random_checkpoints import write_random_checkpoint
from bert_fin import tokenization
from helpers.serving_checks import refused as _refused
from bert_fin.cli import export_serving as cli
from bert_fin.finetune.features import extract
from bert_fin.finetune.features import flags as features_flags
from bert_fin.finetune.features import inputs
from bert_fin.finetune.features import outputs
from bert_fin.serving import export
from bert_fin.serving import features
from bert_fin.serving import graph_tokenizer
from bert_fin.serving import onnx_client
from bert_fin.serving import restored_model

SEQ = 16
LAYERS = [-1, -3]
LINES = ["沪深股指 ||| 银行基金证券", "上涨", "", "hello iphone 2019 市场",
         "中国人民币元年月日" * 4, "股|||基金", "a ||| ", "ＩＰＯ上涨\u200b下跌",
         "Über iPhone 300元 ||| " + "上涨" * 9]


@pytest.fixture(scope="module")
def served(tmp_path_factory):
  """A pretrained checkpoint (pooler included) and extract_features' outputs on LINES."""
  root = tmp_path_factory.mktemp("features")
  config = mt.tiny_config(vocab_size=len(tokenizer_vocab.vocab_tokens()), hidden_size=32,
                          num_hidden_layers=3, intermediate_size=37, max_position_embeddings=32)
  config_file = root / "bert_config.json"
  config_file.write_text(config.to_json_string())
  weights = write_random_checkpoint(str(root / "model.ckpt"), config, keep=is_encoder, seed=3)
  assert "bert/pooler/dense/kernel" in weights
  vocab = tokenizer_vocab.write_vocab(root)
  input_file = root / "input.txt"
  input_file.write_text("\n".join(LINES) + "\n", encoding="utf-8")
  values = features_flags.define_flags(flags.FlagValues())
  values(["extract_features", "--input_file=%s" % input_file,
          "--bert_config_file=%s" % config_file,
          "--vocab_file=" + vocab, "--init_checkpoint=%s" % (root / "model.ckpt"),
          "--max_seq_length=%d" % SEQ, "--batch_size=4", "--noprogress",
          "--layers=" + ",".join(map(str, LAYERS)), "--output_file=%s" % (root / "out.jsonl"),
          "--vectors_file=%s" % (root / "vectors.npy"), "--pooling=mean"])
  extract.run(features_flags.settings_of(values))
  records = [json.loads(line) for line in open(root / "out.jsonl", encoding="ascii")]
  rows = inputs.encode(LINES, tokenization.FullTokenizer(vocab), SEQ)
  ids = {"input_ids": rows.input_ids, "segment_ids": rows.segment_ids,
         "input_mask": (np.arange(SEQ)[None, :] < rows.input_len[:, None]).astype(np.int32)}
  pairs = [inputs.split_line(line) for line in LINES]
  return dict(root=root, config=config, config_file=str(config_file), vocab=vocab,
              weights=weights, records=records, vectors=np.load(str(root / "vectors.npy")),
              ids=ids, texts=[a for a, _ in pairs], texts_b=[b or "" for _, b in pairs])


@pytest.fixture(scope="module")
def exported(served):
  """The export directory of the CLI (SavedModel and ONNX: the slow tests')."""
  export_dir = served["root"] / "export"
  assert cli.main(["--kind=features", "--init_checkpoint", str(served["root"] / "model.ckpt"),
                   "--bert_config_file", served["config_file"], "--vocab_file", served["vocab"],
                   "--max_seq_length", str(SEQ), "--layers=" + ",".join(map(str, LAYERS)),
                   "--text_pairs", "--export_dir", str(export_dir)]) == 0
  return str(export_dir)


def _module(served, checkpoint, layers="-1,-3"):
  """The servable module in process (not saved): what the export saves."""
  request = export.Request(checkpoint, served["config_file"], served["vocab"], True, SEQ,
                           str(served["root"] / "unused"), True, False, features.KIND, layers)
  plan = export.check(request)
  return plan, features.FeaturesServing(
      plan.spec, plan.checkpoint, graph_tokenizer.GraphTokenizer(plan.vocab, True), plan.vocab)


def _assert_like_extract_features(token_vectors, input_mask, served):
  """token_vectors float [B, S, K, H] against the JSON lines; their mean vectors (outputs'
  pooled_vectors) against --vectors_file."""
  token_vectors = np.asarray(token_vectors)
  assert token_vectors.shape == (len(LINES), SEQ, len(LAYERS), 32)
  for row, record in enumerate(served["records"]):
    assert int(np.sum(input_mask[row])) == len(record["features"])
    for position, feature in enumerate(record["features"]):
      for k, layer in enumerate(feature["layers"]):
        assert layer["index"] == LAYERS[k]
        np.testing.assert_allclose(token_vectors[row, position, k], layer["values"], atol=1e-4)
  mean = outputs.pooled_vectors([token_vectors[:, :, k] for k in range(len(LAYERS))],
                                np.sum(input_mask, axis=1), "mean")
  np.testing.assert_allclose(mean, served["vectors"], atol=1e-4)


def _pooled_oracle(served):
  """float64 [B, H]: the numpy oracle's pooled output of each row."""
  ids = served["ids"]
  out = ref.bert_forward(served["weights"], served["config"], ids["input_ids"],
                         ids["input_mask"].sum(axis=1), ids["segment_ids"])
  return out["pooled_output"]


def _assert_signatures_like_extract_features(by_text, by_ids, served):
  _assert_like_extract_features(by_text["token_vectors"].numpy(), by_text["input_mask"].numpy(),
                                served)
  tokens = [[t.decode() for t in row if t] for row in by_text["tokens"].numpy()]
  assert tokens == [[f["token"] for f in record["features"]] for record in served["records"]]
  np.testing.assert_array_equal(by_text["input_mask"].numpy(), served["ids"]["input_mask"])
  long_rows = {LINES.index("中国人民币元年月日" * 4), len(LINES) - 1}
  assert by_text["truncated"].numpy().tolist() == [i in long_rows for i in range(len(LINES))]
  _assert_like_extract_features(by_ids["token_vectors"].numpy(), served["ids"]["input_mask"],
                                served)
  oracle = _pooled_oracle(served)
  np.testing.assert_allclose(by_text["pooled_output"].numpy(), oracle, atol=1e-4)
  np.testing.assert_allclose(by_ids["pooled_output"].numpy(), oracle, atol=1e-4)


def _ids_tensors(served):
  return [tf.constant(served["ids"][name]) for name in restored_model.INPUT_NAMES]


def test_the_module_gives_extract_features_vectors_from_text_and_ids(served):
  plan, module = _module(served, str(served["root"] / "model.ckpt"))
  assert plan.spec.pooler and plan.spec.layers == LAYERS
  _assert_signatures_like_extract_features(
      module.text(tf.constant(served["texts"]), tf.constant(served["texts_b"])),
      module.ids(*_ids_tensors(served)), served)


@pytest.mark.slow
def test_the_saved_models_signatures_give_extract_features_vectors(served, exported):
  loaded = tf.saved_model.load(os.path.join(exported, export.SAVED_MODEL_DIR))
  _assert_signatures_like_extract_features(
      loaded.signatures["serving_default"](text=tf.constant(served["texts"]),
                                           text_b=tf.constant(served["texts_b"])),
      loaded.signatures["ids"](**{k: tf.constant(v) for k, v in served["ids"].items()}), served)


@pytest.mark.slow
def test_onnxruntime_and_the_client_give_the_same_vectors(served, exported):
  model = onnx_client.OnnxFeatures(exported, threads=1)
  answer = model.vectors(served["texts"], served["texts_b"])
  np.testing.assert_array_equal(answer["input_mask"], served["ids"]["input_mask"])
  _assert_like_extract_features(answer["token_vectors"], answer["input_mask"], served)
  np.testing.assert_allclose(answer["pooled_output"], _pooled_oracle(served), atol=1e-4)
  record = json.load(open(os.path.join(exported, export.CONFIG_FILE), encoding="utf-8"))
  assert record["kind"] == "features" and record["layers"] == LAYERS and record["pooler"]
  assert record["onnx_outputs"] == ["token_vectors", "pooled_output"]
  text = open(os.path.join(exported, "triton", "bert_fin_text", "config.pbtxt")).read()
  assert "dims: [ %d, %d, 32 ]" % (SEQ, len(LAYERS)) in text
  assert not os.path.exists(os.path.join(exported, "labels.txt"))


def test_a_checkpoint_without_the_pooler_serves_the_token_vectors(served, tmp_path):
  """extract_features reads no pooler: an encoder-only checkpoint is served without
  pooled_output."""
  weights = write_random_checkpoint(str(tmp_path / "model.ckpt"), served["config"],
                                    keep=lambda n: is_encoder(n) and "pooler" not in n, seed=3)
  plan, module = _module(served, str(tmp_path / "model.ckpt"))
  assert not plan.spec.pooler and "bert/pooler/dense/kernel" not in weights
  answer = module.ids(*_ids_tensors(served))
  assert sorted(answer) == ["token_vectors"]
  _assert_like_extract_features(answer["token_vectors"].numpy(), served["ids"]["input_mask"],
                                served)


def test_bad_inputs_exit_2_with_one_line_and_write_nothing(served, tmp_path, capsys):
  target = tmp_path / "export"
  base = lambda checkpoint=str(served["root"] / "model.ckpt"), config=served["config_file"], \
      vocab=served["vocab"], layers="-1": [
          "--kind=features", "--init_checkpoint", checkpoint, "--bert_config_file", config,
          "--vocab_file", vocab, "--max_seq_length", str(SEQ), "--layers=" + layers,
          "--export_dir", str(target)]
  _refused(capsys, base(checkpoint=str(tmp_path / "none.ckpt")), "--init_checkpoint",
           "no checkpoint")
  _refused(capsys, base(layers="-1,3"), "--layers=-1,3", "3 layers")
  wider = tmp_path / "wider.json"
  wider.write_text(mt.tiny_config(vocab_size=len(tokenizer_vocab.vocab_tokens()), hidden_size=48,
                                  num_hidden_layers=3, max_position_embeddings=32
                                  ).to_json_string())
  _refused(capsys, base(config=str(wider)), "does not fit", "another shape")
  deeper = tmp_path / "deeper.json"
  deeper.write_text(mt.tiny_config(vocab_size=len(tokenizer_vocab.vocab_tokens()), hidden_size=32,
                                   num_hidden_layers=4, intermediate_size=37,
                                   max_position_embeddings=32).to_json_string())
  _refused(capsys, base(config=str(deeper)), "encoder variable(s) missing", "layer_3")
  big_vocab = tmp_path / "big_vocab.txt"
  big_vocab.write_text(open(served["vocab"], encoding="utf-8").read() + "".join(
      "extra%d\n" % i for i in range(50)), encoding="utf-8")
  _refused(capsys, base(vocab=str(big_vocab)), "vocab")
  _refused(capsys, ["--kind=features", "--bert_config_file", served["config_file"],
                    "--vocab_file", served["vocab"], "--export_dir", str(target)],
           "--init_checkpoint")
  assert not target.exists()
  assert sorted(os.listdir(tmp_path)) == ["big_vocab.txt", "deeper.json", "wider.json"]
