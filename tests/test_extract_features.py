# coding=utf-8
"""extract_features.py: google's JSON lines with the values of an independent float64 forward pass
(tests/helpers/reference_bert_numpy.py) on a tiny random checkpoint, google's token layout, the
sentence vectors and ids file, a transformers folder as --init_checkpoint, output written while
the input is still being read, and bad input refused in one line before anything is written."""
import json
import os
import subprocess
import sys

from absl import flags
import numpy as np
import pytest

from helpers import REPO
from helpers import FIXTURES
from helpers import modeling_toys as mt
from helpers import reference_bert_numpy as ref
from helpers import tokenizer_vocab
from helpers.random_checkpoints import is_encoder
from helpers.random_checkpoints import write_random_checkpoint
from bert_fin import tokenization
from bert_fin.finetune.features import extract
from bert_fin.finetune.features import flags as features_flags
from bert_fin.finetune.features import inputs
from bert_fin.finetune.features import outputs

LINES = ["沪深股指 ||| 银行基金证券", "上涨", "", "hello iphone 2019 市场",
         "中国人民币元年月日" * 4, "股|||基金", "a ||| "]  # google: both single texts
SEQ = 16


@pytest.fixture(scope="module")
def model(tmp_path_factory):
  tmp = tmp_path_factory.mktemp("model")
  config = mt.tiny_config(vocab_size=len(tokenizer_vocab.vocab_tokens()), hidden_size=32,
                          num_hidden_layers=3, intermediate_size=37, max_position_embeddings=32)
  (tmp / "bert_config.json").write_text(config.to_json_string())
  weights = write_random_checkpoint(str(tmp / "model.ckpt"), config, keep=is_encoder, seed=3)
  return dict(config=config, config_file=str(tmp / "bert_config.json"), weights=weights,
              checkpoint=str(tmp / "model.ckpt"), vocab=tokenizer_vocab.write_vocab(tmp))


def _settings(model, input_file, *argv):
  values = features_flags.define_flags(flags.FlagValues())
  values(["extract_features", "--input_file=" + str(input_file),
          "--bert_config_file=" + model["config_file"], "--vocab_file=" + model["vocab"],
          "--init_checkpoint=" + model["checkpoint"], "--max_seq_length=%d" % SEQ,
          "--batch_size=4", "--noprogress"] + list(argv))
  return features_flags.settings_of(values)


def _google_tokens(tokenizer, line):
  """google's read_examples + convert_examples_to_features, restated as the oracle."""
  line = line.strip()
  text_a, text_b = line, None
  if " ||| " in line:
    text_a, text_b = line.rsplit(" ||| ", 1)
  tokens_a = [piece for word in text_a.split(" ") for piece in tokenizer.tokenize(word)]
  tokens_b = tokenizer.tokenize(text_b) if text_b else []
  if tokens_b:
    while len(tokens_a) + len(tokens_b) > SEQ - 3:
      (tokens_a if len(tokens_a) > len(tokens_b) else tokens_b).pop()
  else:
    tokens_a = tokens_a[:SEQ - 2]
  tokens = ["[CLS]"] + tokens_a + ["[SEP]"]
  segments = [0] * len(tokens)
  if tokens_b:
    tokens += tokens_b + ["[SEP]"]
    segments += [1] * (len(tokens_b) + 1)
  return tokens, segments


def _reference(model, tokens, segments):
  """Every encoder layer (float64 [len(tokens), H]) of the numpy oracle for one row."""
  tokenizer = tokenization.FullTokenizer(model["vocab"])
  ids = np.zeros([1, SEQ], np.int64)
  types = np.zeros([1, SEQ], np.int64)
  ids[0, :len(tokens)] = tokenizer.convert_tokens_to_ids(tokens)
  types[0, :len(segments)] = segments
  out = ref.bert_forward(model["weights"], model["config"], ids, [len(tokens)], types)
  return [layer[0, :len(tokens)] for layer in out["all_layers"]]


def test_json_lines_are_googles_format_with_the_models_values(model, tmp_path):
  lines = LINES
  input_file = tmp_path / "input.txt"
  input_file.write_text("\n".join(lines) + "\n", encoding="utf-8")
  output = tmp_path / "features.jsonl"
  settings = _settings(model, input_file, "--output_file=" + str(output), "--layers=-1,0,-2")
  assert extract.run(settings) == len(lines)
  text = output.read_text(encoding="ascii")  # json.dumps' default: ASCII escapes
  records = [json.loads(line) for line in text.splitlines()]
  assert len(records) == len(lines)
  tokenizer = tokenization.FullTokenizer(model["vocab"])
  for index, (line, record) in enumerate(zip(lines, records)):
    assert list(record) == ["linex_index", "features"] and record["linex_index"] == index
    tokens, segments = _google_tokens(tokenizer, line)
    assert [feature["token"] for feature in record["features"]] == tokens
    expected = _reference(model, tokens, segments)
    for position, feature in enumerate(record["features"]):
      assert list(feature) == ["token", "layers"]
      assert [layer["index"] for layer in feature["layers"]] == [-1, 0, -2]
      for layer, which in zip(feature["layers"], (-1, 0, -2)):
        assert list(layer) == ["index", "values"]
        values = np.array(layer["values"])
        np.testing.assert_allclose(values, expected[which][position], atol=1e-5)
        assert all(round(v, 6) == v for v in layer["values"])  # google's 6 decimals
  assert records[0]["features"][5]["token"] == "[SEP]"  # a pair: [CLS] 4 [SEP] ...
  assert len(records[4]["features"]) == SEQ  # a long single text: its first SEQ - 2 pieces
  assert [f["token"] for f in records[2]["features"]] == ["[CLS]", "[SEP]"]  # a blank line


def test_sentence_vectors_cls_and_mean_with_the_ids_file(model, tmp_path):
  lines = LINES[:5]
  input_file = tmp_path / "input.txt"
  input_file.write_text("\n".join(lines), encoding="utf-8")  # no final newline: 5 lines
  tokenizer = tokenization.FullTokenizer(model["vocab"])
  expected = [_reference(model, *_google_tokens(tokenizer, line)) for line in lines]
  for pooling in ("cls", "mean"):
    vectors_file = tmp_path / ("vectors_%s.npy" % pooling)
    extract.run(_settings(model, input_file, "--vectors_file=" + str(vectors_file),
                          "--pooling=" + pooling, "--layers=-1,-3"))
    vectors = np.load(str(vectors_file))
    assert vectors.dtype == np.float32 and vectors.shape == (5, 2 * 32)
    for row, layers in enumerate(expected):
      pick = (lambda layer: layer[0]) if pooling == "cls" else (lambda layer: layer.mean(axis=0))
      np.testing.assert_allclose(vectors[row], np.concatenate([pick(layers[-1]),
                                                               pick(layers[-3])]), atol=1e-5)
    ids = (tmp_path / ("vectors_%s.ids.tsv" % pooling)).read_text(encoding="utf-8")
    assert ids.splitlines() == ["%d\t%s" % (i, line) for i, line in enumerate(lines)]
  assert not (tmp_path / "features.jsonl").exists()  # no --output_file: vectors only


def test_a_transformers_folder_as_init_checkpoint(tmp_path):
  folder = os.path.join(FIXTURES, "hf_tiny", "encoder")
  vocab = [line.rstrip("\n") for line in open(os.path.join(folder, "vocab.txt"),
                                              encoding="utf-8")]
  input_file = tmp_path / "input.txt"
  input_file.write_text("%s ||| %s\n%s\n" % ("".join(vocab[20:25]), "".join(vocab[30:33]),
                                              "".join(vocab[40:70])), encoding="utf-8")
  values = features_flags.define_flags(flags.FlagValues())
  values(["extract_features", "--input_file=" + str(input_file), "--init_checkpoint=" + folder,
          "--vectors_file=" + str(tmp_path / "v.npy"), "--max_seq_length=16", "--layers=-1,-2",
          "--noprogress"])
  settings = features_flags.settings_of(values)  # no --bert_config_file / --vocab_file
  extract.run(settings)
  from bert_fin.interop import hf_import  # pylint: disable=import-outside-toplevel
  imported = tmp_path / "imported"
  hf_import.import_folder(folder, str(imported))
  values = features_flags.define_flags(flags.FlagValues())
  values(["extract_features", "--input_file=" + str(input_file),
          "--init_checkpoint=" + str(imported / "model.ckpt"),
          "--bert_config_file=" + str(imported / "bert_config.json"),
          "--vocab_file=" + str(imported / "vocab.txt"),
          "--vectors_file=" + str(tmp_path / "w.npy"), "--max_seq_length=16", "--layers=-1,-2",
          "--noprogress"])
  extract.run(features_flags.settings_of(values))
  np.testing.assert_array_equal(np.load(str(tmp_path / "v.npy")), np.load(str(tmp_path / "w.npy")))
  assert np.abs(np.load(str(tmp_path / "v.npy"))).sum() > 0


class _Spy(object):
  """Counts the lines read from the input and, at each write, how many had been read."""

  def __init__(self, monkeypatch):
    self.read = 0
    self.read_at_write = []
    original = inputs._decoded_lines  # pylint: disable=protected-access

    def counted(path):
      for item in original(path):
        self.read += 1
        yield item
    monkeypatch.setattr(inputs, "_decoded_lines", counted)


class _FakeEncoder(object):
  """The Encoder interface without a model: layer values from the input ids."""

  def run(self, rows):
    return [rows.input_ids[:, :, None].astype(np.float32) * np.ones([1, 1, 4], np.float32)]


def test_output_is_written_while_the_input_is_still_read(model, tmp_path, monkeypatch):
  """Streaming: each batch is written once computed; the input is read a chunk at a time, so at
  the first write only the first chunk has been read, whatever the file's size."""
  num_lines = 1000
  input_file = tmp_path / "big.txt"
  input_file.write_text("".join("上涨 %d\n" % i for i in range(num_lines)), encoding="utf-8")
  spy = _Spy(monkeypatch)
  settings = _settings(model, input_file, "--vectors_file=" + str(tmp_path / "v.npy"),
                       "--layers=-1")
  tokenizer = tokenization.FullTokenizer(model["vocab"])
  with outputs.Writers(None, str(tmp_path / "v.npy"), num_lines, 4, [-1]) as writers:
    original_write = writers.write

    def write(*args):
      spy.read_at_write.append(spy.read)
      original_write(*args)
    writers.write = write
    extract.extract(str(input_file), tokenizer, _FakeEncoder(), writers, settings)
  chunk = extract.CHUNK_BATCHES * settings.data.batch_size
  assert len(spy.read_at_write) == num_lines // settings.data.batch_size
  assert spy.read_at_write[0] == chunk < num_lines  # one chunk read, not the file
  assert max(b - a for a, b in zip(
      range(0, num_lines, settings.data.batch_size), spy.read_at_write)) <= chunk
  vectors = np.load(str(tmp_path / "v.npy"))
  assert vectors.shape == (num_lines, 4) and vectors[0, 0] == vectors[-1, 0] != 0  # [CLS]


def test_a_failed_run_leaves_no_output(tmp_path):
  with pytest.raises(RuntimeError):
    with outputs.Writers(str(tmp_path / "f.jsonl"), str(tmp_path / "v.npy"), 3, 2, [-1]):
      raise RuntimeError("killed")
  with pytest.raises(ValueError, match="wrote 0 of 3 examples"):
    with outputs.Writers(str(tmp_path / "f.jsonl"), str(tmp_path / "v.npy"), 3, 2, [-1]):
      pass
  assert sorted(os.listdir(str(tmp_path))) == []


@pytest.mark.parametrize("content,argv,words", [
    (None, [], "--input_file .*missing.txt"),
    ("", [], "empty file"),
    ("a\nb ||| c ||| d\n", [], r"input.txt:2: 2 '\|\|\|' separators"),
    (b"\xff\xfe\n", [], "input.txt:1: not UTF-8"),
    ("a\n", ["--layers=-1,x"], "--layers=-1,x: comma-separated layer indexes"),
    ("a\n", ["--layers=-1,3"], "--layers=-1,3: the model has 3 layers"),
    ("a\n", ["--vectors_file=out.txt"], "a .npy file name"),
    ("a\n", ["--pooling=mean"], "--pooling makes sentence vectors"),
])
def test_bad_input_is_one_line_before_anything_is_written(model, tmp_path, content, argv, words):
  input_file = tmp_path / ("missing.txt" if content is None else "input.txt")
  if isinstance(content, bytes):
    input_file.write_bytes(content)
  elif content is not None:
    input_file.write_text(content, encoding="utf-8")
  output = tmp_path / "out" / "features.jsonl"
  output.parent.mkdir()
  argv = [arg.replace("out.txt", str(tmp_path / "out" / "out.txt")) for arg in argv]
  with pytest.raises(ValueError, match=words):
    extract.run(_settings(model, input_file, "--output_file=" + str(output), *argv))
  assert os.listdir(str(output.parent)) == []


def test_a_checkpoint_without_an_encoder_layer_is_refused(model, tmp_path):
  partial = str(tmp_path / "partial.ckpt")
  write_random_checkpoint(partial, model["config"], keep=lambda name: is_encoder(name) and (
      "layer_2/" not in name))
  input_file = tmp_path / "input.txt"
  input_file.write_text("上涨\n", encoding="utf-8")
  settings = _settings(model, input_file, "--output_file=" + str(tmp_path / "f.jsonl"),
                       "--init_checkpoint=" + partial, "--layers=-1")
  with pytest.raises(ValueError, match="lacks .* encoder variable"):
    extract.run(settings)
  assert not (tmp_path / "f.jsonl").exists()


def test_cli_writes_google_json_and_refuses_bad_input_with_exit_2(model, tmp_path):
  input_file = tmp_path / "input.txt"
  input_file.write_text("上涨 ||| 下跌\n银行\n", encoding="utf-8")
  command = [sys.executable, os.path.join(REPO, "extract_features.py"),
             "--input_file=" + str(input_file), "--output_file=" + str(tmp_path / "f.jsonl"),
             "--bert_config_file=" + model["config_file"], "--vocab_file=" + model["vocab"],
             "--init_checkpoint=" + model["checkpoint"], "--max_seq_length=16", "--layers=-1",
             "--use_one_hot_embeddings=true", "--master=ignored", "--noprogress"]
  env = dict(os.environ, PYTHONPATH=REPO)
  proc = subprocess.run(command, capture_output=True, text=True, timeout=300, env=env)
  assert proc.returncode == 0, proc.stderr[-2000:]
  records = [json.loads(line) for line in open(str(tmp_path / "f.jsonl"), encoding="utf-8")]
  assert [r["linex_index"] for r in records] == [0, 1]
  assert [f["token"] for f in records[0]["features"]] == ["[CLS]", "上", "涨", "[SEP]", "下",
                                                           "跌", "[SEP]"]
  input_file.write_text("a ||| b ||| c\n", encoding="utf-8")
  proc = subprocess.run(command[:2] + ["--input_file=" + str(input_file),
                                       "--output_file=" + str(tmp_path / "g.jsonl")] + command[4:],
                        capture_output=True, text=True, timeout=300, env=env)
  assert proc.returncode == 2
  assert proc.stderr.strip().count("\n") == 0 and "extract_features.py: error: " in proc.stderr
  assert not (tmp_path / "g.jsonl").exists()
