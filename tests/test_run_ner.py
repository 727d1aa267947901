# coding=utf-8
"""run_ner end to end: a tiny random-init tagger learns a toy task (sentences longer than a
window included), eval_results.txt has the entity keys, the predictions file keeps the input's
lines; CLUENER in and out; predict-only runs read the saved tags; bad input exits 2 first."""
import json
import os
import random
import subprocess
import sys

from absl import flags
import pytest

from helpers import REPO
from helpers.finetune_toys import mpirun_program
from helpers.finetune_toys import ner_sentences
from helpers.finetune_toys import step_lines
from helpers.finetune_toys import write_chars
from helpers.google_checkpoints import write_google_checkpoint
from helpers import modeling_toys as mt
from helpers import tokenizer_vocab
from bert_fin.finetune.ner import flags as ner_flags
from bert_fin.finetune.ner import orchestration as ner_run
from bert_fin.training import distributed

def _write_cluener(path, sentences):
  rows = []
  for units, tags in sentences:
    text = "".join(units)
    label, offset, start = {}, 0, None
    for unit, tag in zip(units + [""], tags + ["O"]):
      if start is not None and not tag.startswith("I-"):
        label.setdefault(kind, {}).setdefault(text[start:offset], []).append([start, offset - 1])
        start = None
      if tag.startswith("B-"):
        start, kind = offset, tag[2:]
      offset += len(unit)
    rows.append(json.dumps({"text": text, "label": label}, ensure_ascii=False))
  path.write_text("\n".join(rows) + "\n", encoding="utf-8")


@pytest.fixture
def toy(tmp_path):
  rng = random.Random(11)
  data = tmp_path / "data"
  data.mkdir()
  splits = {"train": ner_sentences(rng, 160, long_every=8),
            "dev": ner_sentences(rng, 40, long_every=5),
            "test": ner_sentences(rng, 12, long_every=4)}
  for split, sentences in splits.items():
    write_chars(data / (split + ".txt"), sentences)
  config = mt.tiny_config(vocab_size=len(tokenizer_vocab.vocab_tokens()), hidden_size=32,
                          num_hidden_layers=1, intermediate_size=64, max_position_embeddings=32)
  config_file = tmp_path / "bert_config.json"
  config_file.write_text(config.to_json_string())
  return dict(data=data, splits=splits, config_file=str(config_file),
              vocab=tokenizer_vocab.write_vocab(tmp_path), out=str(tmp_path / "out"))


def _flags(toy, *extra):
  values = ner_flags.define_flags(flags.FlagValues())
  values([
      "run_ner", "--data_dir=" + str(toy["data"]), "--bert_config_file=" + toy["config_file"],
      "--vocab_file=" + toy["vocab"], "--output_dir=" + toy["out"], "--max_seq_length=16",
      "--train_batch_size=16", "--eval_batch_size=7", "--predict_batch_size=5",
      "--learning_rate=2e-3", "--num_train_steps=120", "--warmup_proportion=0.1", "--seed=3",
      "--intra_op_parallelism_threads=1", "--inter_op_parallelism_threads=1"] + list(extra))
  return ner_flags.settings_of(values)


def test_tiny_tagger_learns_toy_task_and_predicts_every_line(toy):
  result = ner_run.run(_flags(toy, "--do_train", "--do_eval", "--do_predict"),
                       distributed.init(False))
  assert result["eval_micro_f1"] >= 0.8, result  # random tags score ~0
  lines = open(os.path.join(toy["out"], "eval_results.txt"), encoding="utf-8").read()
  for key in ("eval_micro_f1", "eval_macro_f1", "eval_f1_ORG", "eval_precision_LOC",
              "eval_recall_ORG", "eval_support_LOC", "eval_token_accuracy", "eval_loss",
              "global_step"):
    assert "\n%s = " % key in "\n" + lines
  saved = open(os.path.join(toy["out"], "labels.txt"), encoding="utf-8").read().split()
  assert saved == ["O", "B-LOC", "I-LOC", "B-ORG", "I-ORG"]
  inputs = (toy["data"] / "test.txt").read_text(encoding="utf-8").split("\n")
  outputs = open(os.path.join(toy["out"], "test_predictions.txt"),
                 encoding="utf-8").read().split("\n")
  assert len(outputs) == len(inputs)  # one line an input line, blank lines included
  right = total = 0
  for line, out in zip(inputs, outputs):
    if not line:
      assert out == ""
      continue
    assert out.startswith(line + "\t")
    gold, predicted = line.split("\t")[1], out.split("\t")[2]
    right += gold == predicted
    total += 1
  assert right / total >= 0.9
  assert os.path.isfile(os.path.join(toy["out"], "test_results.txt"))

  # predict-only: the saved tags and checkpoint are read back; other tags are refused
  os.remove(os.path.join(toy["out"], "test_predictions.txt"))
  ner_run.run(_flags(toy, "--do_predict"), distributed.init(False))
  again = open(os.path.join(toy["out"], "test_predictions.txt"), encoding="utf-8").read()
  assert again.split("\n") == outputs
  with pytest.raises(ValueError, match="differ from"):
    ner_run.preflight(_flags(toy, "--do_predict", "--labels=O,B-LOC,I-LOC"),
                      distributed.init(False))


def test_cluener_in_and_out(toy, tmp_path):
  data = tmp_path / "cluener"
  data.mkdir()
  for split, sentences in toy["splits"].items():
    _write_cluener(data / (split + ".json"), sentences)
  toy = dict(toy, data=data, out=str(tmp_path / "out_cluener"))
  result = ner_run.run(_flags(toy, "--do_train", "--do_eval", "--do_predict",
                              "--num_train_steps=80"), distributed.init(False))
  assert result["eval_micro_f1"] >= 0.7, result
  inputs = (data / "test.json").read_text(encoding="utf-8").splitlines()
  outputs = open(os.path.join(toy["out"], "test_predictions.json"),
                 encoding="utf-8").read().splitlines()
  assert len(outputs) == len(inputs)
  same = 0
  for line, out in zip(inputs, outputs):
    row, predicted = json.loads(line), json.loads(out)
    assert predicted["text"] == row["text"]
    for kind, mentions in predicted["label"].items():
      for mention, spans in mentions.items():
        assert all(row["text"][s:e + 1] == mention for s, e in spans)
    same += predicted["label"] == row["label"]
  assert same >= len(inputs) // 2


def test_predict_only_without_a_tagger_head_is_refused(toy, tmp_path):
  import numpy as np  # pylint: disable=import-outside-toplevel
  from bert_fin import modeling  # pylint: disable=import-outside-toplevel
  with pytest.raises(ValueError, match="holds no checkpoint"):
    ner_run.preflight(_flags(toy, "--do_predict"), distributed.init(False))
  config = modeling.BertConfig.from_json_file(toy["config_file"])
  ckpt = str(tmp_path / "google" / "bert_model.ckpt")
  write_google_checkpoint(ckpt, mt.google_variable_shapes(config), np.random.RandomState(5))
  with pytest.raises(ValueError, match=r"has no tagger head \(ner/output_weights"):
    ner_run.preflight(_flags(toy, "--do_predict", "--init_checkpoint=" + ckpt),
                      distributed.init(False))
  # the same google checkpoint initialises the encoder of a training run
  plan = ner_run.preflight(_flags(toy, "--do_train", "--init_checkpoint=" + ckpt),
                           distributed.init(False))
  assert plan.num_train_steps == 120 and not plan.use_crf


def _cli(toy, *extra):
  return subprocess.run(
      [sys.executable, os.path.join(REPO, "run_ner.py"), "--data_dir=" + str(toy["data"]),
       "--bert_config_file=" + toy["config_file"], "--vocab_file=" + toy["vocab"],
       "--output_dir=" + toy["out"], "--max_seq_length=16", "--do_train"] + list(extra),
      capture_output=True, text=True, timeout=300, env=dict(os.environ, PYTHONPATH=REPO))


def test_cli_bad_data_exits_2_with_file_and_line_before_writing(toy):
  (toy["data"] / "dev.txt").write_text("中\tB-ORG\n国\tB-PER\n", encoding="utf-8")
  proc = _cli(toy, "--do_eval")
  assert proc.returncode == 2, proc.stderr[-2000:]
  lines = proc.stderr.strip().splitlines()
  assert len(lines) == 1 and lines[0].startswith("run_ner.py: error: ")
  assert "dev.txt:2: tag 'B-PER' is not in the tag list" in lines[0]
  assert not os.path.exists(toy["out"])


SAMPLE = os.path.join(REPO, "samples", "ner")
SAMPLE_STEPS, SAMPLE_F1_FLOOR = 150, 0.6  # measured 0.80 (a random tagger: ~0)


def sample_model(tmp_path, max_position_embeddings=64):
  """(config file, vocab file) of a tiny random-init BERT whose vocab is the sample task's units
  (lower-cased, as the tokenizer sees them) after google's special tokens."""
  units = set()
  with open(os.path.join(SAMPLE, "train.txt"), encoding="utf-8") as f:
    units.update(line.split("\t")[0].lower() for line in f if line.strip())
  tokens = tokenizer_vocab.SPECIAL + sorted(units)
  vocab = tmp_path / "vocab.txt"
  vocab.write_text("\n".join(tokens) + "\n", encoding="utf-8")
  config = mt.tiny_config(vocab_size=len(tokens), hidden_size=32, num_hidden_layers=1,
                          intermediate_size=64, max_position_embeddings=max_position_embeddings)
  config_file = tmp_path / "bert_config.json"
  config_file.write_text(config.to_json_string())
  return str(config_file), str(vocab)


def test_sample_task_entity_f1_above_floor(tmp_path):
  config_file, vocab = sample_model(tmp_path)
  toy = dict(data=SAMPLE, config_file=config_file, vocab=vocab, out=str(tmp_path / "out"))
  result = ner_run.run(_flags(toy, "--do_train", "--do_eval", "--do_predict",
                              "--max_seq_length=32", "--train_batch_size=32",
                              "--num_train_steps=%d" % SAMPLE_STEPS), distributed.init(False))
  print("sample task: micro-F1 %.4f macro-F1 %.4f" % (result["eval_micro_f1"],
                                                      result["eval_macro_f1"]))
  assert result["eval_micro_f1"] >= SAMPLE_F1_FLOOR, result
  inputs = open(os.path.join(SAMPLE, "test.txt"), encoding="utf-8").read().split("\n")
  outputs = open(os.path.join(toy["out"], "test_predictions.txt"),
                 encoding="utf-8").read().split("\n")
  assert len(outputs) == len(inputs)
  assert all(out.startswith(line + "\t") if line else out == ""
             for line, out in zip(inputs, outputs))


def test_export_hf_of_a_run_ner_output_is_token_classification(toy, tmp_path):
  import numpy as np  # pylint: disable=import-outside-toplevel
  import tensorflow.compat.v1 as tf  # pylint: disable=import-outside-toplevel
  from safetensors import numpy as safetensors_numpy  # pylint: disable=import-outside-toplevel
  from bert_fin import modeling  # pylint: disable=import-outside-toplevel
  from bert_fin.cli import export_hf  # pylint: disable=import-outside-toplevel
  from bert_fin.interop import hf_names  # pylint: disable=import-outside-toplevel
  ner_run.run(_flags(toy, "--do_train", "--num_train_steps=2"), distributed.init(False))
  out = tmp_path / "hf"
  assert export_hf.main(["--bert_config_file=" + toy["config_file"],
                         "--init_checkpoint=" + toy["out"], "--vocab_file=" + toy["vocab"],
                         "--output_dir=" + str(out)]) == 0
  tensors = safetensors_numpy.load_file(str(out / "model.safetensors"))
  config = modeling.BertConfig.from_json_file(toy["config_file"])
  assert set(tensors) == set(hf_names.expected_shapes(config, "BertForTokenClassification", 5))
  assert not any(name.startswith(("bert.pooler.", "cls.")) for name in tensors)
  reader = tf.train.load_checkpoint(tf.train.latest_checkpoint(toy["out"]))
  # ner/output_weights is [tags, H] like nn.Linear's weight: no transpose
  np.testing.assert_array_equal(tensors["classifier.weight"],
                                reader.get_tensor("ner/output_weights"))
  np.testing.assert_array_equal(tensors["classifier.bias"], reader.get_tensor("ner/output_bias"))
  np.testing.assert_array_equal(tensors["bert.encoder.layer.0.output.dense.weight"],
                                reader.get_tensor("bert/encoder/layer_0/output/dense/kernel").T)
  hf_config = json.loads((out / "config.json").read_text(encoding="utf-8"))
  assert hf_config["architectures"] == ["BertForTokenClassification"]
  assert hf_config["id2label"] == {"0": "O", "1": "B-LOC", "2": "I-LOC", "3": "B-ORG",
                                   "4": "I-ORG"}
  # a tagger checkpoint without its labels.txt is refused in one line, nothing written
  os.remove(os.path.join(toy["out"], "labels.txt"))
  assert export_hf.main(["--bert_config_file=" + toy["config_file"],
                         "--init_checkpoint=" + toy["out"], "--vocab_file=" + toy["vocab"],
                         "--output_dir=" + str(tmp_path / "hf2")]) == 2
  assert not (tmp_path / "hf2").exists()


@pytest.mark.mpi
@pytest.mark.slow
def test_mpirun_np2_trains_on_both_ranks_rank0_writes(toy):
  proc = mpirun_program(
      "run_ner.py", "--do_train", "--do_eval", "--do_predict", "--data_dir=" + str(toy["data"]),
      "--bert_config_file=" + toy["config_file"], "--vocab_file=" + toy["vocab"],
      "--output_dir=" + toy["out"], "--max_seq_length=16", "--train_batch_size=8",
      "--learning_rate=2e-3", "--num_train_steps=60")
  assert proc.stdout.count("***** Eval results *****") == 1  # rank 0 only
  assert proc.stdout.count("[run_ner] wrote ") == 1
  results = open(os.path.join(toy["out"], "eval_results.txt"), encoding="utf-8").read()
  assert "global_step = 60\n" in results
  micro_f1 = float(results.split("eval_micro_f1 = ")[1].split("\n")[0])
  assert micro_f1 >= 0.5, results  # 60 updates of 2 x 8 windows
  assert os.path.isfile(os.path.join(toy["out"], "test_predictions.txt"))
  assert sorted(n for n in os.listdir(toy["out"]) if n.startswith("model.ckpt-60"))


def test_use_crf_trains_is_saved_and_read_back_and_is_not_exported(toy, tmp_path):
  from bert_fin.cli import export_hf  # pylint: disable=import-outside-toplevel
  result = ner_run.run(_flags(toy, "--do_train", "--do_eval", "--do_predict", "--use_crf"),
                       distributed.init(False))
  assert result["eval_micro_f1"] >= 0.8, result
  predictions = os.path.join(toy["out"], "test_predictions.txt")
  first = open(predictions, encoding="utf-8").read()
  os.remove(predictions)
  plan = ner_run.preflight(_flags(toy, "--do_predict"), distributed.init(False))
  assert plan.use_crf  # from the checkpoint's ner/transitions, without the flag
  ner_run.run(_flags(toy, "--do_predict"), distributed.init(False), plan)
  assert open(predictions, encoding="utf-8").read() == first
  with pytest.raises(ValueError, match="trained with --use_crf"):
    ner_run.preflight(_flags(toy, "--do_predict", "--nouse_crf"), distributed.init(False))
  assert export_hf.main(["--bert_config_file=" + toy["config_file"],
                         "--init_checkpoint=" + toy["out"], "--vocab_file=" + toy["vocab"],
                         "--output_dir=" + str(tmp_path / "hf")]) == 2
  assert not (tmp_path / "hf").exists()


def test_google_named_checkpoint_initialises_the_tagger_encoder(toy, tmp_path):
  import numpy as np  # pylint: disable=import-outside-toplevel
  import tensorflow.compat.v1 as tf  # pylint: disable=import-outside-toplevel
  from bert_fin import modeling  # pylint: disable=import-outside-toplevel
  config = modeling.BertConfig.from_json_file(toy["config_file"])
  ckpt = str(tmp_path / "google" / "bert_model.ckpt")
  values = write_google_checkpoint(ckpt, mt.google_variable_shapes(config),
                                   np.random.RandomState(5))
  ner_run.run(_flags(toy, "--do_train", "--num_train_steps=1", "--init_checkpoint=" + ckpt),
              distributed.init(False))
  reader = tf.train.load_checkpoint(os.path.join(toy["out"], "model.ckpt-0"))  # before step 1
  for name, value in values.items():
    if name.startswith("bert/"):
      np.testing.assert_array_equal(reader.get_tensor(name), value, err_msg=name)
  assert reader.get_tensor("ner/output_weights").shape == (5, config.hidden_size)
  assert not reader.has_tensor("cls/predictions/output_bias")  # pretraining heads unused


def test_cli_bad_flag_exits_2_with_one_line(toy):
  proc = _cli(toy, "--task_name=conll")
  assert proc.returncode == 2, proc.stderr[-2000:]
  assert proc.stderr.strip().splitlines() == [
      "run_ner.py: error: --task_name must be one of auto, chars, cluener (the format of the "
      "files in --data_dir), got 'conll'"]
  assert not os.path.exists(toy["out"])


def test_step_lines_optimizer_record_and_a_padded_config(toy, tmp_path, capsys):
  vocab_size = len(tokenizer_vocab.vocab_tokens()) + 5  # padded: 5 rows no token uses
  padded = tmp_path / "padded_config.json"
  padded.write_text(mt.tiny_config(vocab_size=vocab_size, hidden_size=16, num_hidden_layers=1,
                                   num_attention_heads=2, intermediate_size=32,
                                   max_position_embeddings=32).to_json_string())
  values = _flags(dict(toy, config_file=str(padded)), "--do_train", "--num_train_steps=4",
                  "--log_every_n_steps=2", "--optimizer=adamw")
  ner_run.run(values, distributed.init(False))
  out = capsys.readouterr().out
  assert sorted(step_lines(out)) == [1, 2, 4], out[-3000:]
  assert "examples/s = " in step_lines(out)[4] and "eta = 0:00:00" in step_lines(out)[4]
  assert out.count("the config's vocab_size is %d: embedding rows" % vocab_size) == 1
  assert json.load(open(os.path.join(toy["out"], "optimizer.json"))) == {"optimizer": "adamw"}
  with pytest.raises(ValueError, match="trained with --optimizer=adamw, this run asks for "
                                       "--optimizer=adam: resume"):
    ner_run.preflight(_flags(dict(toy, config_file=str(padded)), "--do_train",
                             "--num_train_steps=6"), distributed.init(False))
