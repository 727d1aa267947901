# coding=utf-8
"""Export to a transformers folder, checked without PyTorch: the safetensors file read back equals
the checkpoint tensor by tensor (nn.Linear kernels transposed), its names are transformers' BERT
state-dict names, the tokenizer.json gives bert_fin's ids, and bad inputs exit 2 with one line.
(The full comparison with transformers' logits is bench/compare_export_hf.py.)"""
import json
import os

import numpy as np
import pytest
from safetensors import numpy as safetensors_numpy
import tensorflow.compat.v1 as tf
import tokenizers

from helpers.google_checkpoints import write_google_checkpoint
from helpers import modeling_toys as mt
from helpers import tokenizer_vocab
from bert_fin import tokenization
from bert_fin.cli import export_hf as cli
from bert_fin.interop import hf_names

VOCAB_SIZE = len(tokenizer_vocab.vocab_tokens())


def _config(**overrides):
  return mt.tiny_config(vocab_size=VOCAB_SIZE, **overrides)


def _write_inputs(tmp_path, objective="bert", config=None, training_state=True):
  config = config or _config()
  ckpt = str(tmp_path / "ckpt" / "model.ckpt")
  values = write_google_checkpoint(ckpt, mt.google_variable_shapes(config, objective),
                                   np.random.RandomState(3), training_state=training_state)
  config_file = tmp_path / "bert_config.json"
  config_file.write_text(config.to_json_string())
  vocab = tokenizer_vocab.write_vocab(tmp_path)
  return values, str(config_file), ckpt, vocab


def _run_cli(config_file, ckpt, vocab, out, *extra):
  return cli.main(["--bert_config_file", config_file, "--init_checkpoint", ckpt,
                   "--vocab_file", vocab, "--output_dir", str(out)] + list(extra))


@pytest.mark.parametrize("objective,architecture", [("bert", "BertForPreTraining"),
                                                    ("roberta", "BertForMaskedLM")])
def test_round_trip_every_tensor_equal_and_named_like_transformers(tmp_path, objective,
                                                                   architecture):
  values, config_file, ckpt, vocab = _write_inputs(tmp_path, objective)
  out = tmp_path / "hf"
  assert _run_cli(config_file, ckpt, vocab, out) == 0
  tensors = safetensors_numpy.load_file(str(out / "model.safetensors"))
  config = _config()
  expected = set(hf_names.expected_shapes(config, architecture))
  # Every name is transformers'; nothing is missing but what transformers ties itself.
  assert set(tensors) <= expected
  assert expected - set(tensors) == {"cls.predictions.decoder.weight",
                                     "cls.predictions.decoder.bias"}
  # Spot checks written out by hand (independent of the mapping rules).
  w = tensors["bert.encoder.layer.1.attention.self.query.weight"]
  np.testing.assert_array_equal(w, values["bert/encoder/layer_1/attention/self/query/kernel"].T)
  np.testing.assert_array_equal(tensors["bert.encoder.layer.0.output.LayerNorm.weight"],
                                values["bert/encoder/layer_0/output/LayerNorm/gamma"])
  np.testing.assert_array_equal(tensors["cls.predictions.bias"],
                                values["cls/predictions/output_bias"])
  # Every checkpoint weight lands somewhere, equal (transposed for kernels); slots never do.
  exported = 0
  for name, value in values.items():
    if objective == "roberta" and name.startswith("bert/pooler/"):
      continue  # BertForMaskedLM has no pooler
    target, transpose = hf_names.hf_name(name)
    np.testing.assert_array_equal(tensors[target], value.T if transpose else value, err_msg=name)
    assert tensors[target].dtype == np.float32
    exported += 1
  assert exported == len(tensors)
  if objective == "bert":
    np.testing.assert_array_equal(tensors["cls.seq_relationship.weight"],
                                  values["cls/seq_relationship/output_weights"])  # no transpose
  else:
    assert not any("pooler" in name or "seq_relationship" in name for name in tensors)
  hf_config = json.loads((out / "config.json").read_text())
  assert hf_config["architectures"] == [architecture]
  assert hf_config["model_type"] == "bert"
  assert hf_config["hidden_act"] == "gelu_new"  # google's tanh GELU
  assert hf_config["layer_norm_eps"] == 1e-12
  for key in ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads",
              "intermediate_size", "max_position_embeddings", "type_vocab_size"):
    assert hf_config[key] == getattr(config, key), key


def test_checkpoint_written_by_bert_fins_own_model_exports(tmp_path):
  config = _config()
  inputs = mt.example_inputs(np.random.RandomState(0), config)
  ckpt = str(tmp_path / "own" / "model.ckpt")
  with tf.Graph().as_default():
    mt.build(config, inputs, objective="bert")
    tvars = tf.trainable_variables()
    with mt.session() as sess:
      sess.run(tf.global_variables_initializer())
      values = dict(zip([mt.variable_name(v) for v in tvars], sess.run(tvars)))
      tf.train.Saver().save(sess, ckpt)
  config_file = tmp_path / "bert_config.json"
  config_file.write_text(config.to_json_string())
  vocab = tokenizer_vocab.write_vocab(tmp_path)
  assert _run_cli(str(config_file), str(tmp_path / "own"), vocab, tmp_path / "hf") == 0
  tensors = safetensors_numpy.load_file(str(tmp_path / "hf" / "model.safetensors"))
  assert len(tensors) == len(values)
  np.testing.assert_array_equal(tensors["bert.embeddings.word_embeddings.weight"],
                                values["bert/embeddings/word_embeddings"])
  np.testing.assert_array_equal(tensors["cls.predictions.transform.dense.weight"],
                                values["cls/predictions/transform/dense/kernel"].T)


TEXTS = [
    ("沪深300指数上涨，银行股领涨", None),
    ("iPhone手机 无创DNA", "人民币基金2019年"),
    ("The unaffable CPU's ETF (IPO)!", "Über café, σας"),
    ("中国股市：上涨了！", "我有 ok 的 bert"),
]


@pytest.mark.parametrize("do_lower_case", [True, False])
def test_tokenizer_files_give_bert_fins_ids(tmp_path, do_lower_case):
  _, config_file, ckpt, vocab = _write_inputs(tmp_path, training_state=False)
  out = tmp_path / "hf"
  assert _run_cli(config_file, ckpt, vocab, out, "--do_lower_case=%s" % do_lower_case) == 0
  assert (out / "vocab.txt").read_bytes() == open(vocab, "rb").read()
  tok_config = json.loads((out / "tokenizer_config.json").read_text())
  assert tok_config["do_lower_case"] is do_lower_case
  assert tok_config["tokenize_chinese_chars"] is True and tok_config["strip_accents"] is None
  assert json.loads((out / "special_tokens_map.json").read_text())["mask_token"] == "[MASK]"
  hf = tokenizers.Tokenizer.from_file(str(out / "tokenizer.json"))
  google = tokenization.FullTokenizer(vocab, do_lower_case=do_lower_case)
  for text_a, text_b in TEXTS:
    tokens = ["[CLS]"] + google.tokenize(text_a) + ["[SEP]"]
    types = [0] * len(tokens)
    if text_b:
      tokens_b = google.tokenize(text_b) + ["[SEP]"]
      tokens, types = tokens + tokens_b, types + [1] * len(tokens_b)
    encoding = hf.encode(text_a, text_b) if text_b else hf.encode(text_a)
    assert encoding.ids == google.convert_tokens_to_ids(tokens), (text_a, text_b)
    assert encoding.type_ids == types


def _assert_refused(capsys, status, out, *words):
  assert status == 2
  err = capsys.readouterr().err.strip()
  assert len(err.splitlines()) == 1 and err.startswith("bert-fin-export-hf: error:")
  for word in words:
    assert word in err
  assert not out.exists() or not os.listdir(out)


def test_bad_inputs_exit_2_with_one_line_and_write_nothing(tmp_path, capsys):
  _, config_file, ckpt, vocab = _write_inputs(tmp_path)
  out = tmp_path / "hf"
  _assert_refused(capsys, _run_cli(config_file, str(tmp_path / "nope.ckpt"), vocab, out), out,
                  "--init_checkpoint", "nope.ckpt")
  _assert_refused(capsys, _run_cli(str(tmp_path / "none.json"), ckpt, vocab, out), out,
                  "--bert_config_file")
  _assert_refused(capsys, _run_cli(config_file, ckpt, str(tmp_path / "none.txt"), out), out,
                  "--vocab_file")
  long_vocab = tmp_path / "long_vocab.txt"
  long_vocab.write_text("\n".join(tokenizer_vocab.vocab_tokens() + ["extra1", "extra2"]) + "\n")
  _assert_refused(capsys, _run_cli(config_file, ckpt, str(long_vocab), out), out,
                  "%d tokens, more than the config's vocab_size %d" % (VOCAB_SIZE + 2, VOCAB_SIZE))
  wide = tmp_path / "wide_config.json"
  wide.write_text(_config(intermediate_size=41).to_json_string())
  _assert_refused(capsys, _run_cli(str(wide), ckpt, vocab, out), out, "shape mismatch",
                  "intermediate/dense/kernel")
  deep = tmp_path / "deep_config.json"
  deep.write_text(_config(num_hidden_layers=3).to_json_string())
  _assert_refused(capsys, _run_cli(str(deep), ckpt, vocab, out), out, "missing",
                  "bert.encoder.layer.2.output.dense.weight")
  shallow = tmp_path / "shallow_config.json"
  shallow.write_text(_config(num_hidden_layers=1).to_json_string())
  _assert_refused(capsys, _run_cli(str(shallow), ckpt, vocab, out), out, "no place for",
                  "bert/encoder/layer_1/")


def test_a_vocab_size_padded_past_the_vocab_exports_with_a_warning(tmp_path, caplog):
  """NVIDIA pads vocab_size to a multiple of 8 for tensor cores: a valid model, whose rows past
  the vocab no token uses. Exported as it is: transformers' tokenizer has the vocab's tokens, the
  config (and the embedding) vocab_size rows."""
  padded = mt.tiny_config(vocab_size=VOCAB_SIZE + 5)
  values, config_file, ckpt, vocab = _write_inputs(tmp_path, config=padded)
  out = tmp_path / "hf"
  assert _run_cli(config_file, ckpt, vocab, out) == 0
  assert "%d tokens, the config's vocab_size is %d: embedding rows %d..%d are padding" % (
      VOCAB_SIZE, VOCAB_SIZE + 5, VOCAB_SIZE, VOCAB_SIZE + 4) in caplog.text
  assert "exported as it is" in caplog.text
  assert json.loads((out / "config.json").read_text())["vocab_size"] == VOCAB_SIZE + 5
  tensors = safetensors_numpy.load_file(str(out / "model.safetensors"))
  np.testing.assert_array_equal(tensors["bert.embeddings.word_embeddings.weight"],
                                values["bert/embeddings/word_embeddings"])
  assert tensors["cls.predictions.bias"].shape == (VOCAB_SIZE + 5,)
  hf = tokenizers.Tokenizer.from_file(str(out / "tokenizer.json"))
  assert hf.get_vocab_size() == VOCAB_SIZE
  assert len((out / "vocab.txt").read_text(encoding="utf-8").splitlines()) == VOCAB_SIZE


def test_a_vocab_with_a_byte_order_mark_and_crlf_exports_clean_token_lines(tmp_path):
  """transformers' BertTokenizer keeps a BOM in the first token ("\\ufeff[PAD]", then one token
  more than the model has): vocab.txt is written as google reads it."""
  _, config_file, ckpt, vocab = _write_inputs(tmp_path, training_state=False)
  windows = tmp_path / "windows_vocab.txt"
  windows.write_bytes(b"\xef\xbb\xbf" + open(vocab, "rb").read().replace(b"\n", b"\r\n"))
  out = tmp_path / "hf"
  assert _run_cli(config_file, ckpt, str(windows), out) == 0
  assert (out / "vocab.txt").read_bytes() == open(vocab, "rb").read()


def _write_classifier(tmp_path, labels=("neg", "pos", "中性"), pooling=None):
  """A run_classifier-like output: encoder + pooler + output_weights/output_bias (+ slots)."""
  config = _config()
  shapes = {name: shape for name, shape in mt.google_variable_shapes(config).items()
            if not name.startswith("cls/")}
  shapes.update({"output_weights": [3, config.hidden_size], "output_bias": [3]})
  directory = tmp_path / "ft"
  directory.mkdir(parents=True)
  values = write_google_checkpoint(str(directory / "model.ckpt-30"), shapes,
                                   np.random.RandomState(4))
  if labels is not None:
    (directory / "labels.txt").write_text("".join(l + "\n" for l in labels), encoding="utf-8")
  if pooling is not None:
    (directory / "classifier_config.json").write_text(json.dumps({"pooling": pooling}))
  config_file = tmp_path / "bert_config.json"
  config_file.write_text(config.to_json_string())
  return values, str(config_file), str(directory), tokenizer_vocab.write_vocab(tmp_path)


def test_run_classifier_output_exports_as_sequence_classification(tmp_path):
  values, config_file, ckpt_dir, vocab = _write_classifier(tmp_path)
  out = tmp_path / "hf"
  assert _run_cli(config_file, ckpt_dir, vocab, out) == 0
  tensors = safetensors_numpy.load_file(str(out / "model.safetensors"))
  config = _config()
  assert set(tensors) == set(hf_names.expected_shapes(config, "BertForSequenceClassification",
                                                      num_labels=3))
  # google's output_weights is [num_labels, H] like nn.Linear's weight: no transpose
  np.testing.assert_array_equal(tensors["classifier.weight"], values["output_weights"])
  np.testing.assert_array_equal(tensors["classifier.bias"], values["output_bias"])
  np.testing.assert_array_equal(tensors["bert.pooler.dense.weight"],
                                values["bert/pooler/dense/kernel"].T)
  assert not any(name.startswith("cls.") for name in tensors)
  hf_config = json.loads((out / "config.json").read_text(encoding="utf-8"))
  assert hf_config["architectures"] == ["BertForSequenceClassification"]
  assert hf_config["id2label"] == {"0": "neg", "1": "pos", "2": "中性"}
  assert hf_config["label2id"] == {"neg": 0, "pos": 1, "中性": 2}


def test_classifier_export_refuses_without_labels_or_with_mean_pooling(tmp_path, capsys):
  out = tmp_path / "hf"
  _, config_file, ckpt_dir, vocab = _write_classifier(tmp_path / "a", labels=None)
  _assert_refused(capsys, _run_cli(config_file, ckpt_dir, vocab, out), out, "no labels.txt")
  _, config_file, ckpt_dir, vocab = _write_classifier(tmp_path / "b", labels=("a", "b"))
  _assert_refused(capsys, _run_cli(config_file, ckpt_dir, vocab, out), out, "lists 2 labels",
                  "has 3 rows")
  _, config_file, ckpt_dir, vocab = _write_classifier(tmp_path / "c", pooling="mean")
  _assert_refused(capsys, _run_cli(config_file, ckpt_dir, vocab, out), out, "--pooling=mean")
