# coding=utf-8
"""Import of transformers BERT folders (tools/import_hf.py), checked without PyTorch: bert_fin's
model on each imported fixture form (tests/fixtures/hf_tiny: safetensors, sharded, .bin zip and
legacy, fp16, bf16, encoder-only, masked-LM-only) reproduces the outputs transformers computed for it
within 1e-5; the forms give the same variables bit for bit; export_hf -> import_hf gives back
every variable bit for bit; bad or unsupported folders exit 2 with one line and write nothing.
test_live_transformers re-makes the fixtures with transformers when it can run (torch importable,
or BERT_FIN_HF_PYTHON naming a python that has it)."""
import json
import os
import pickle
import shutil
import subprocess
import zipfile

import numpy as np
import pytest
from safetensors import numpy as safetensors_numpy
import tensorflow.compat.v1 as tf

import helpers
from helpers.google_checkpoints import write_google_checkpoint
from helpers import modeling_toys as mt
from helpers import transformers_python
from bert_fin import modeling
from bert_fin.cli import export_hf as export_cli
from bert_fin.cli import import_hf as cli
from bert_fin.interop import torch_pickle
from bert_fin.modeling import heads

FIXTURES = os.path.join(helpers.FIXTURES, "hf_tiny")
MAKE_FIXTURES = os.path.join(FIXTURES, "make_fixtures.py")
TOL = 1e-5


def _manifest(root=FIXTURES):
  with open(os.path.join(root, "manifest.json"), encoding="utf-8") as f:
    return json.load(f)["folders"]


def _import(form, tmp_path, root=FIXTURES):
  out = tmp_path / ("imported_" + form)
  assert cli.main(["--hf_dir", os.path.join(root, form), "--output_dir", str(out)]) == 0
  return out


def _checkpoint_values(prefix):
  reader = tf.train.load_checkpoint(str(prefix))
  return {name: reader.get_tensor(name) for name in reader.get_variable_to_shape_map()}


def bert_fin_outputs(imported_dir, feed, hidden_act=None):
  """bert_fin's BertModel (+ the heads the checkpoint has) on the imported checkpoint:
  {sequence_output, pooled_output, mlm_logits, nsp_logits} as the checkpoint allows."""
  config = modeling.BertConfig.from_json_file(str(imported_dir / "bert_config.json"))
  if hidden_act:
    config.hidden_act = hidden_act
  names = set(_checkpoint_values(imported_dir / "model.ckpt"))
  ids = np.array(feed["input_ids"], np.int32)
  batch, seq = ids.shape
  with tf.Graph().as_default():
    model = modeling.BertModel(config, False, tf.constant(ids),
                               input_len=tf.constant(feed["input_len"], tf.int32),
                               token_type_ids=tf.constant(feed["token_type_ids"], tf.int32))
    fetch = {"sequence_output": model.get_sequence_output()}
    if "bert/pooler/dense/kernel" in names:
      fetch["pooled_output"] = model.get_pooled_output()
    if "cls/predictions/output_bias" in names:
      positions = tf.constant(np.tile(np.arange(seq, dtype=np.int32), [batch, 1]))
      _, _, log_probs = heads.get_masked_lm_output(
          config, model.get_sequence_output(), model.get_embedding_table(), positions,
          tf.zeros_like(positions), tf.ones([batch, seq]))
      fetch["mlm_logits"] = tf.reshape(log_probs.op.inputs[0], [batch, seq, -1])
    if "cls/seq_relationship/output_bias" in names:
      _, _, log_probs = heads.get_next_sentence_output(config, model.get_pooled_output(),
                                                       tf.zeros([batch], tf.int32))
      fetch["nsp_logits"] = log_probs.op.inputs[0]
    report = modeling.init_from_checkpoint(str(imported_dir / "model.ckpt"),
                                           tf.global_variables(), log=None)
    assert report.missing_in_checkpoint == ([] if "pooled_output" in fetch else
                                            ["bert/pooler/dense/bias", "bert/pooler/dense/kernel"])
    with mt.session() as sess:
      sess.run(tf.global_variables_initializer())
      return sess.run(fetch)


def _feed(root=FIXTURES):
  with open(os.path.join(root, "inputs.json"), encoding="utf-8") as f:
    return json.load(f)


def _assert_reproduces(imported, expected_npz, feed):
  expected = dict(np.load(expected_npz))
  got = bert_fin_outputs(imported, feed)
  assert sorted(got) == sorted(expected)
  for name, value in expected.items():
    np.testing.assert_allclose(got[name], value, rtol=0, atol=TOL, err_msg=name)


@pytest.mark.parametrize("form", sorted(_manifest()))
def test_import_reproduces_transformers_outputs(tmp_path, form):
  imported = _import(form, tmp_path)
  _assert_reproduces(imported, os.path.join(FIXTURES, "outputs", _manifest()[form] + ".npz"),
                     _feed())


def test_google_tanh_gelu_would_not_reproduce_transformers_gelu(tmp_path):
  """The import's exact GELU matters: google's tanh GELU on the same weights is visibly off."""
  imported = _import("pretraining", tmp_path)
  assert json.loads((imported / "bert_config.json").read_text())["hidden_act"] == "gelu_erf"
  expected = np.load(os.path.join(FIXTURES, "outputs", "pretraining.npz"))["mlm_logits"]
  got = bert_fin_outputs(imported, _feed(), hidden_act="gelu")["mlm_logits"]
  assert np.max(np.abs(got - expected)) > 10 * TOL


def test_every_form_of_one_model_imports_the_same_variables(tmp_path):
  reference = _checkpoint_values(_import("pretraining", tmp_path) / "model.ckpt")
  google = mt.google_variable_shapes(mt.tiny_config())  # google's names, written out by hand
  assert {name: list(value.shape) for name, value in reference.items()} == google
  for form in ("sharded", "bin", "legacy"):
    values = _checkpoint_values(_import(form, tmp_path) / "model.ckpt")
    assert sorted(values) == sorted(reference), form
    for name, value in reference.items():
      assert value.dtype == values[name].dtype == np.float32
      np.testing.assert_array_equal(values[name], value, err_msg="%s %s" % (form, name))
  fp16 = _checkpoint_values(_import("fp16", tmp_path) / "model.ckpt")
  for name, value in reference.items():  # float16 upcast exactly: the rounded float32 values
    np.testing.assert_array_equal(fp16[name], value.astype(np.float16).astype(np.float32))


def test_encoder_only_and_masked_lm_only_report_what_they_cannot_fill(tmp_path, capsys):
  _import("encoder", tmp_path)
  out = capsys.readouterr().out
  assert "encoder, pooler (2 layers" in out
  assert "not filled (no masked LM" in out and "cls/predictions/output_bias" in out
  assert "not filled (no next sentence" in out
  values = _checkpoint_values(tmp_path / "imported_encoder" / "model.ckpt")
  assert not [name for name in values if name.startswith("cls/")]
  _import("maskedlm", tmp_path)
  out = capsys.readouterr().out
  assert "encoder, masked LM (2 layers" in out and "hidden_act gelu: google's" in out
  assert "not filled (no pooler" in out and "bert/pooler/dense/kernel" in out
  report = json.loads((tmp_path / "imported_maskedlm" / "import_hf.json").read_text())
  assert report["heads"] == ["masked LM"]


def test_a_fine_tuning_head_is_reported_as_not_imported(tmp_path, capsys):
  folder = tmp_path / "classifier"
  shutil.copytree(os.path.join(FIXTURES, "encoder"), str(folder))
  path = str(folder / "model.safetensors")
  tensors = safetensors_numpy.load_file(path)
  tensors["classifier.weight"] = np.ones([3, 32], np.float32)
  tensors["classifier.bias"] = np.zeros([3], np.float32)
  safetensors_numpy.save_file(tensors, path)
  assert cli.main(["--hf_dir", str(folder), "--output_dir", str(tmp_path / "out")]) == 0
  assert ("not imported (no google variable takes them): classifier.bias, classifier.weight"
          in capsys.readouterr().out)
  assert "output_weights" not in _checkpoint_values(tmp_path / "out" / "model.ckpt")


def test_legacy_names_position_ids_and_dtypes_are_reported(tmp_path, capsys):
  _import("legacy", tmp_path)
  out = capsys.readouterr().out
  assert "legacy names renamed: 12; buffers dropped: bert.embeddings.position_ids" in out
  _import("bf16", tmp_path)
  assert "stored bfloat16, upcast to float32" in capsys.readouterr().out
  _import("fp16", tmp_path)
  assert "stored float16, upcast to float32" in capsys.readouterr().out


def _write_google(tmp_path, objective, hidden_act):
  config = mt.tiny_config(hidden_act=hidden_act)
  ckpt = str(tmp_path / "ckpt" / "model.ckpt")
  values = write_google_checkpoint(ckpt, mt.google_variable_shapes(config, objective),
                                   np.random.RandomState(5))
  (tmp_path / "bert_config.json").write_text(config.to_json_string())
  vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + [chr(0x4e00 + i) for i in range(95)]
  (tmp_path / "vocab.txt").write_text("".join(t + "\n" for t in vocab), encoding="utf-8")
  return config, values, ckpt


@pytest.mark.parametrize("objective,hidden_act", [("bert", "gelu"), ("roberta", "gelu_erf")])
def test_export_then_import_gives_back_every_variable_bit_for_bit(tmp_path, objective,
                                                                    hidden_act):
  config, values, ckpt = _write_google(tmp_path, objective, hidden_act)
  assert export_cli.main(["--bert_config_file", str(tmp_path / "bert_config.json"),
                          "--init_checkpoint", ckpt, "--vocab_file", str(tmp_path / "vocab.txt"),
                          "--output_dir", str(tmp_path / "hf")]) == 0
  assert cli.main(["--hf_dir", str(tmp_path / "hf"), "--output_dir", str(tmp_path / "back")]) == 0
  back = _checkpoint_values(tmp_path / "back" / "model.ckpt")
  expected = {name: value for name, value in values.items()
              if not (objective == "roberta" and name.startswith("bert/pooler/"))}
  assert sorted(back) == sorted(expected)
  for name, value in expected.items():
    assert back[name].dtype == value.dtype
    np.testing.assert_array_equal(back[name], value, err_msg=name)
  assert json.loads((tmp_path / "back" / "bert_config.json").read_text()) == config.to_dict()
  assert (tmp_path / "back" / "vocab.txt").read_bytes() == (tmp_path / "vocab.txt").read_bytes()


def test_a_sharded_pytorch_model_bin_is_read_through_its_index(tmp_path):
  folder = tmp_path / "sharded_bin"
  shutil.copytree(os.path.join(FIXTURES, "bin"), str(folder))
  shard = "pytorch_model-00001-of-00001.bin"
  (folder / "pytorch_model.bin").rename(folder / shard)
  names, _ = torch_pickle.load_state_dict(str(folder / shard))
  (folder / "pytorch_model.bin.index.json").write_text(json.dumps(
      {"metadata": {}, "weight_map": {name: shard for name in names}}))
  assert cli.main(["--hf_dir", str(folder), "--output_dir", str(tmp_path / "out")]) == 0
  reference = _checkpoint_values(_import("pretraining", tmp_path) / "model.ckpt")
  values = _checkpoint_values(tmp_path / "out" / "model.ckpt")
  assert sorted(values) == sorted(reference)
  for name, value in reference.items():
    np.testing.assert_array_equal(values[name], value, err_msg=name)


def test_a_padded_vocab_size_imports(tmp_path, capsys):
  folder = tmp_path / "padded"
  shutil.copytree(os.path.join(FIXTURES, "pretraining"), str(folder))
  lines = (folder / "vocab.txt").read_text(encoding="utf-8").splitlines()[:90]
  (folder / "vocab.txt").write_text("".join(t + "\n" for t in lines), encoding="utf-8")
  assert cli.main(["--hf_dir", str(folder), "--output_dir", str(tmp_path / "out")]) == 0
  assert "vocab: 90 tokens, vocab_size 100 (rows 90..99 are padding" in capsys.readouterr().out
  assert len((tmp_path / "out" / "vocab.txt").read_text(encoding="utf-8").splitlines()) == 90


def test_a_folder_with_tokenizer_json_only_gives_its_wordpiece_vocab(tmp_path):
  folder = tmp_path / "fast"
  shutil.copytree(os.path.join(FIXTURES, "encoder"), str(folder))
  tokens = (folder / "vocab.txt").read_text(encoding="utf-8").splitlines()
  (folder / "vocab.txt").unlink()
  (folder / "tokenizer.json").write_text(json.dumps({"model": {
      "type": "WordPiece", "vocab": {t: i for i, t in enumerate(tokens)}}}), encoding="utf-8")
  assert cli.main(["--hf_dir", str(folder), "--output_dir", str(tmp_path / "out")]) == 0
  assert (tmp_path / "out" / "vocab.txt").read_text(encoding="utf-8").splitlines() == tokens


# ---------------------------------------------------------------- refusals


def _copy(tmp_path, form="pretraining", name="folder"):
  folder = tmp_path / name
  shutil.copytree(os.path.join(FIXTURES, form), str(folder))
  return folder


def _edit_config(folder, **changes):
  config = json.loads((folder / "config.json").read_text())
  config.update(changes)
  (folder / "config.json").write_text(json.dumps(config))


def _edit_tensors(folder, change):
  path = str(folder / "model.safetensors")
  tensors = safetensors_numpy.load_file(path)
  change(tensors)
  safetensors_numpy.save_file(tensors, path, metadata={"format": "pt"})


class _RunsCode(object):
  def __reduce__(self):
    return (os.system, ("touch pwned",))


def _evil_bin(folder):
  (folder / "model.safetensors").unlink()
  with zipfile.ZipFile(str(folder / "pytorch_model.bin"), "w") as archive:
    archive.writestr("archive/data.pkl", pickle.dumps({"x": _RunsCode()}, protocol=2))


def _untied(folder):
  def change(tensors):
    tensors["cls.predictions.decoder.weight"] = (
        tensors["bert.embeddings.word_embeddings.weight"] + 1.0)
  _edit_tensors(folder, change)


def _roberta_names(folder):
  def change(tensors):
    for name in list(tensors):
      tensors[name.replace("bert.", "roberta.")] = tensors.pop(name)
  _edit_tensors(folder, change)


def _drop_layer(folder):
  _edit_tensors(folder, lambda t: t.pop("bert.encoder.layer.1.output.dense.weight"))


def _legacy_truncated(folder):
  data = (folder / "pytorch_model.bin").read_bytes()
  (folder / "pytorch_model.bin").write_bytes(data[:len(data) - 100])


REFUSALS = [
    ("untied", "pretraining", _untied, "differs from the word embeddings"),
    ("roberta type", "pretraining", lambda f: _edit_config(f, model_type="roberta"),
     "model_type 'roberta' is not supported"),
    ("roberta names", "pretraining", _roberta_names, "holds RoBERTa weights"),
    ("relative positions", "pretraining",
     lambda f: _edit_config(f, position_embedding_type="relative_key"),
     "position_embedding_type 'relative_key' is not supported"),
    ("layer norm eps", "pretraining", lambda f: _edit_config(f, layer_norm_eps=1e-5),
     "layer_norm_eps 1e-05 is not supported"),
    ("activation", "pretraining", lambda f: _edit_config(f, hidden_act="silu"),
     "hidden_act 'silu' has no bert_fin equivalent"),
    ("shape", "pretraining", lambda f: _edit_config(f, intermediate_size=40),
     "do not fit config.json"),
    ("incomplete encoder", "pretraining", _drop_layer, "lacks 1 encoder weight"),
    ("no config", "pretraining", lambda f: (f / "config.json").unlink(), "has no config.json"),
    ("no weights", "pretraining", lambda f: (f / "model.safetensors").unlink(),
     "has no model.safetensors"),
    ("no vocab", "pretraining", lambda f: (f / "vocab.txt").unlink(), "has no vocab.txt"),
    ("big vocab", "pretraining",
     lambda f: (f / "vocab.txt").write_text("".join("t%d\n" % i for i in range(101))),
     "101 tokens, more than config.json's vocab_size 100"),
    ("pickle global", "pretraining", _evil_bin, "the pickle needs posix.system"),
    ("truncated legacy", "legacy", _legacy_truncated, "legacy storage"),
    ("truncated safetensors", "encoder", lambda f: (f / "model.safetensors").write_bytes(
        (f / "model.safetensors").read_bytes()[:-500]), "model.safetensors is truncated"),
    ("broken shard index", "sharded",
     lambda f: (f / "model-00002-of-00003.safetensors").unlink(), "names shard(s) that are not"),
]


@pytest.mark.parametrize("label,form,damage,words", REFUSALS, ids=[r[0] for r in REFUSALS])
def test_bad_or_unsupported_folders_exit_2_with_one_line_and_write_nothing(
    tmp_path, capsys, monkeypatch, label, form, damage, words):
  del label
  folder = _copy(tmp_path, form)
  damage(folder)
  monkeypatch.chdir(tmp_path)
  out = tmp_path / "out"
  assert cli.main(["--hf_dir", str(folder), "--output_dir", str(out)]) == 2
  err = capsys.readouterr().err
  assert err.count("\n") == 1 and err.startswith("bert-fin-import-hf: error: "), err
  assert words in err, err
  assert not out.exists()
  assert not [p for p in os.listdir(str(tmp_path)) if p not in ("folder",)]  # no temp, no pwned


def test_a_non_empty_output_dir_is_refused(tmp_path, capsys):
  (tmp_path / "out").mkdir()
  (tmp_path / "out" / "keep.txt").write_text("x")
  assert cli.main(["--hf_dir", os.path.join(FIXTURES, "encoder"),
                   "--output_dir", str(tmp_path / "out")]) == 2
  assert "exists and is not empty" in capsys.readouterr().err
  assert os.listdir(str(tmp_path / "out")) == ["keep.txt"]


def test_the_unpickler_rebuilds_views_and_strides_without_torch():
  """A non-contiguous tensor (a transposed view) and an offset into a shared storage."""
  storage = torch_pickle._Storage(torch_pickle._StorageType("FloatStorage", np.float32), "0", 12)
  storage.data = np.arange(12, dtype="<f4").tobytes()
  transposed = torch_pickle._rebuild_tensor(storage, 2, (3, 2), (1, 3))
  np.testing.assert_array_equal(transposed.array(False),
                                np.arange(2, 8, dtype=np.float32).reshape(2, 3).T)
  with pytest.raises(torch_pickle.UnsupportedPickle, match="reaches past its storage"):
    torch_pickle._rebuild_tensor(storage, 10, (3,), (1,)).array(False)


_hf_python = transformers_python.hf_python


@pytest.mark.skipif(not _hf_python(), reason=transformers_python.SKIP_REASON)
def test_live_transformers_fixtures_are_reproducible_and_imported_exactly(tmp_path):
  fresh = tmp_path / "fresh"
  subprocess.run([_hf_python(), MAKE_FIXTURES, "--output_dir", str(fresh)], check=True,
                 capture_output=True, timeout=600)
  for name in os.listdir(os.path.join(FIXTURES, "outputs")):
    committed, now = np.load(os.path.join(FIXTURES, "outputs", name)), np.load(
        str(fresh / "outputs" / name))
    for key in committed:
      np.testing.assert_allclose(now[key], committed[key], rtol=0, atol=1e-6)
  for form in ("pretraining", "legacy", "maskedlm"):
    _assert_reproduces(_import(form, tmp_path, str(fresh)),
                       str(fresh / "outputs" / (_manifest(str(fresh))[form] + ".npz")),
                       _feed(str(fresh)))
