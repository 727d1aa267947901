# coding=utf-8
"""run_classifier: a tiny model learns a separable toy task, --do_predict writes one row per test
line in order, google-named checkpoints initialise the encoder, bad data stops with one line."""
import collections
import glob
import json
import os
import random
import re
import shutil
import subprocess
import sys

from absl import flags
import numpy as np
import pytest
import tensorflow.compat.v1 as tf

from helpers import REPO
from helpers.finetune_toys import step_lines
from helpers.finetune_toys import toy_rows
from helpers.finetune_toys import write_jsonl
from helpers.google_checkpoints import write_google_checkpoint
from helpers import modeling_toys as mt
from helpers import tokenizer_vocab
from bert_fin import modeling
from bert_fin import tokenization
from bert_fin.records import schema
from bert_fin.finetune import label_lists
from bert_fin.finetune.classify import features
from bert_fin.finetune.classify import flags as classify_flags
from bert_fin.finetune.classify import metrics
from bert_fin.finetune.classify import model as classifier
from bert_fin.finetune.classify import orchestration
from bert_fin.finetune.classify import tasks
from bert_fin.training import distributed

@pytest.fixture
def toy(tmp_path):
  rng = random.Random(7)
  data = tmp_path / "data"
  data.mkdir()
  write_jsonl(data / "train.jsonl", toy_rows(rng, 192))
  write_jsonl(data / "dev.jsonl", toy_rows(rng, 48))
  test_rows = toy_rows(rng, 21)
  test_rows.insert(5, {"text": "  "})  # empty text: kept, so rows still align with lines
  write_jsonl(data / "test.jsonl", test_rows)
  config = mt.tiny_config(vocab_size=len(tokenizer_vocab.vocab_tokens()), hidden_size=32,
                          num_hidden_layers=1, intermediate_size=64, max_position_embeddings=32)
  config_file = tmp_path / "bert_config.json"
  config_file.write_text(config.to_json_string())
  return dict(data=str(data), config=config, config_file=str(config_file),
              vocab=tokenizer_vocab.write_vocab(tmp_path), test_rows=test_rows,
              out=str(tmp_path / "out"))


def _flags(toy, *extra):
  values = classify_flags.define_flags(flags.FlagValues())
  values([
      "run_classifier", "--task_name=jsonl", "--data_dir=" + toy["data"],
      "--bert_config_file=" + toy["config_file"], "--vocab_file=" + toy["vocab"],
      "--output_dir=" + toy["out"], "--max_seq_length=16", "--train_batch_size=16",
      "--eval_batch_size=7", "--predict_batch_size=5", "--learning_rate=1e-3",
      "--num_train_steps=150", "--warmup_proportion=0.1", "--seed=3",
      "--intra_op_parallelism_threads=1", "--inter_op_parallelism_threads=1"] + list(extra))
  return classify_flags.settings_of(values)


def test_tiny_classifier_learns_toy_task_and_predicts_in_order(toy):
  values = _flags(toy, "--do_train", "--do_eval", "--do_predict")
  result = orchestration.run(values, distributed.init(False))
  assert result["eval_accuracy"] >= 0.9  # chance is ~0.5
  assert result["eval_macro_f1"] >= 0.9
  lines = open(os.path.join(toy["out"], "eval_results.txt"), encoding="utf-8").read()
  for key in ("eval_accuracy", "eval_loss", "eval_macro_f1", "eval_precision_up",
              "eval_recall_down", "eval_f1_up", "eval_confusion_matrix"):
    assert "\n%s = " % key in "\n" + lines
  labels = open(os.path.join(toy["out"], label_lists.LABELS_FILE), encoding="utf-8").read().split()
  assert labels == ["down", "up"]
  rows = [line.split("\t") for line in open(os.path.join(toy["out"], tasks.TEST_RESULTS_FILE))]
  assert len(rows) == len(toy["test_rows"])  # one row a test line, the empty one included
  probabilities = np.array(rows, dtype=np.float64)
  assert probabilities.shape == (len(toy["test_rows"]), 2)
  np.testing.assert_allclose(probabilities.sum(axis=1), 1.0, atol=1e-5)
  expected = [labels.index(row["label"]) for row in toy["test_rows"] if "label" in row]
  predicted = [int(np.argmax(p)) for p, row in zip(probabilities, toy["test_rows"])
               if "label" in row]
  assert np.mean(np.array(predicted) == np.array(expected)) >= 0.9  # in input order


def test_google_named_checkpoint_initialises_the_encoder(toy, tmp_path):
  shapes = mt.google_variable_shapes(toy["config"])
  ckpt = str(tmp_path / "google" / "bert_model.ckpt")
  values = write_google_checkpoint(ckpt, shapes, np.random.RandomState(5))
  flag_values = _flags(toy, "--do_train", "--num_train_steps=1", "--init_checkpoint=" + ckpt)
  orchestration.run(flag_values, distributed.init(False))
  reader = tf.train.load_checkpoint(os.path.join(toy["out"], "model.ckpt-0"))  # before step 1
  for name, value in values.items():
    if name.startswith("bert/"):
      np.testing.assert_array_equal(reader.get_tensor(name), value, err_msg=name)
  assert reader.get_tensor("output_weights").shape == (2, toy["config"].hidden_size)
  assert not reader.has_tensor("cls/predictions/output_bias")  # pretraining heads unused


def test_encode_pairs_segments_truncation_and_labels(toy):
  tokenizer = tokenization.FullTokenizer(toy["vocab"])
  examples = [tasks.Example("a", "沪深股指", "银行基金证券", "up"),
              tasks.Example("b", "中国人民币元年月日上涨", None, None)]
  encoded = features.encode(examples, ["down", "up"], tokenizer, max_seq_length=8)
  ids, types = encoded.arrays[schema.INPUT_IDS], encoded.arrays[schema.SEGMENT_IDS]
  # google's rule on 4 + 6 pieces and room for 5: the longer side loses its last piece each
  # time (B on ties): A 沪深股, B 银行.
  assert tokenizer.convert_ids_to_tokens(ids[0].tolist()) == [
      "[CLS]", "沪", "深", "股", "[SEP]", "银", "行", "[SEP]"]
  assert types[0].tolist() == [0] * 5 + [1] * 3 and encoded.arrays[schema.INPUT_LEN][0] == 8
  assert tokenizer.convert_ids_to_tokens(ids[1].tolist()) == [
      "[CLS]", "中", "国", "人", "民", "币", "元", "[SEP]"]
  assert types[1].sum() == 0
  assert encoded.arrays[features.LABEL_IDS].tolist() == [1, 0]
  assert encoded.truncated == 2


def test_classification_report_matches_hand_computed_figures():
  # rows: true label, columns: predicted. a: P 8/10 R 8/9; b: P 1/2 R 1/3; c: never predicted.
  confusion = [[8, 1, 0], [2, 1, 0], [0, 0, 0]]
  report = metrics.classification_report(confusion, ["a", "b", "c c"])
  f1_a, f1_b = 2 * 0.8 * (8 / 9) / (0.8 + 8 / 9), 2 * 0.5 * (1 / 3) / (0.5 + 1 / 3)
  assert report["eval_f1_a"] == pytest.approx(f1_a)
  assert report["eval_recall_b"] == pytest.approx(1 / 3)
  assert report["eval_f1_c_c"] == 0.0 and report["eval_support_c_c"] == 0
  assert report["eval_macro_f1"] == pytest.approx((f1_a + f1_b) / 3)


def _bad(toy, split, content, fmt="jsonl"):
  path = os.path.join(toy["data"], "%s.%s" % (split, fmt))
  with open(path, "w", encoding="utf-8") as f:
    f.write(content)
  return path


def test_bad_data_named_by_file_and_line(toy):
  dev = open(os.path.join(toy["data"], "dev.jsonl"), encoding="utf-8").read().splitlines()
  _bad(toy, "dev", "\n".join(dev[:2] + ['{"text": "股市", "label": "sideways"}']) + "\n")
  with pytest.raises(tasks.DataError, match=r"dev\.jsonl:3: label 'sideways' is not one of"):
    orchestration.preflight(_flags(toy, "--do_train", "--do_eval"), distributed.init(False))
  _bad(toy, "dev", "\n".join(dev[:3]) + "\n{oops\n")
  with pytest.raises(tasks.DataError, match=r"dev\.jsonl:4: not valid JSON"):
    orchestration.preflight(_flags(toy, "--do_train", "--do_eval"), distributed.init(False))
  _bad(toy, "dev", '{"label": "up"}\n')
  with pytest.raises(tasks.DataError, match=r"dev\.jsonl:1: 'text' must be a string"):
    orchestration.preflight(_flags(toy, "--do_train", "--do_eval"), distributed.init(False))
  _bad(toy, "train", "text\tlabel\n股市上涨\tup\n股市\tdown\textra\n", fmt="tsv")
  with pytest.raises(tasks.DataError, match=r"train\.tsv:3: 3 tab-separated fields"):
    orchestration.preflight(_flags(toy, "--do_train", "--task_name=tsv"), distributed.init(False))


def test_empty_texts_are_counted_skips_in_train(toy):
  _bad(toy, "train", "text\ttext_b\tlabel\n股市上涨\t银行\tup\n \t银行\tdown\n\n股市下跌\t\tdown\n",
       fmt="tsv")
  examples = tasks.read_split(toy["data"], "train", "tsv")
  assert [e.guid for e in examples.examples] == ["train-2", "train-5"]
  assert examples.examples[1].text_b is None
  assert examples.skipped == {"empty text": [3]} and examples.blank_lines == 1
  assert "1 skipped with empty text (lines 3)" in tasks.describe(examples)


def test_a_train_file_of_empty_texts_names_the_file_and_the_fix(toy):
  path = _bad(toy, "train", '{"text": " ", "label": "up"}\n{"text": "", "label": "down"}\n')
  with pytest.raises(tasks.DataError) as refused:
    orchestration.preflight(_flags(toy, "--do_train"), distributed.init(False))
  assert str(refused.value) == (
      "%s: no usable example (2 skipped with empty text (lines 1, 2)): each line needs a "
      "non-empty text (and a label)" % path)
  _bad(toy, "train", '{"text": "股市上涨", "label": "up"}\n{"text": "股市下跌", "label": "down"}\n')
  plan = orchestration.preflight(_flags(toy, "--do_train"), distributed.init(False))
  assert plan.labels == ["down", "up"]


def test_cli_exits_2_with_one_line_before_writing(toy):
  _bad(toy, "dev", '{"text": "股市上涨", "label": "up"}\n{"text": "股市", "label": "flat"}\n')
  command = [sys.executable, os.path.join(REPO, "run_classifier.py"), "--task_name=jsonl",
             "--data_dir=" + toy["data"], "--bert_config_file=" + toy["config_file"],
             "--vocab_file=" + toy["vocab"], "--output_dir=" + toy["out"], "--do_train",
             "--do_eval", "--max_seq_length=16"]
  env = dict(os.environ, PYTHONPATH=REPO, TF_CPP_MIN_LOG_LEVEL="3")
  proc = subprocess.run(command, capture_output=True, text=True, env=env, timeout=300)
  assert proc.returncode == 2
  errors = [line for line in proc.stderr.splitlines() if "run_classifier.py: error:" in line]
  assert len(errors) == 1 and "dev.jsonl:2: label 'flat'" in errors[0]
  assert "Traceback" not in proc.stderr
  assert not os.path.exists(toy["out"])


def _pooled(config, ids, lengths, pooling):
  """classifier.pooled_output of a fixed random model (seeded initializers) for int arrays."""
  with tf.Graph().as_default():
    tf.set_random_seed(1)
    model = modeling.BertModel(config, False, tf.constant(ids), input_len=tf.constant(lengths))
    pooled = classifier.pooled_output(model, tf.constant(lengths), pooling)
    with mt.session() as sess:
      sess.run(tf.global_variables_initializer())
      values = sess.run({"pooled": pooled, "sequence": model.get_sequence_output(),
                         "kernel": tf.trainable_variables("bert/pooler/dense/kernel")[0],
                         "bias": tf.trainable_variables("bert/pooler/dense/bias")[0]})
  return values


def test_mean_and_max_pooling_read_real_tokens_only_with_google_variables():
  config = mt.tiny_config(hidden_size=16, num_hidden_layers=1, intermediate_size=32,
                          max_position_embeddings=8)
  # every pooling builds exactly google's variables: checkpoints are interchangeable
  shapes = {pooling: classifier.variable_shapes(config, 3, 8, pooling)
            for pooling in classifier.POOLINGS}
  assert shapes["mean"] == shapes["first"] == shapes["max"]
  assert shapes["first"]["output_weights"] == [3, 16]
  assert shapes["first"]["bert/pooler/dense/kernel"] == [16, 16]
  ids = np.array([[5, 6, 7, 0, 0, 0, 0, 0], [5, 6, 7, 9, 9, 9, 9, 9]], np.int32)
  lengths = np.array([3, 3], np.int32)  # row 2 differs from row 1 only in its padding
  for pooling in ("mean", "max"):
    values = _pooled(config, ids, lengths, pooling)
    np.testing.assert_allclose(values["pooled"][0], values["pooled"][1], atol=1e-6)
    real = values["sequence"][0, :3]
    vector = real.mean(axis=0) if pooling == "mean" else real.max(axis=0)
    expected = np.tanh(vector @ values["kernel"] + values["bias"])
    np.testing.assert_allclose(values["pooled"][0], expected, atol=1e-5)
  first = _pooled(config, ids, lengths, "first")
  np.testing.assert_allclose(
      first["pooled"][0], np.tanh(first["sequence"][0, 0] @ first["kernel"] + first["bias"]),
      atol=1e-5)


def _train_one_step(toy, *extra):
  orchestration.run(_flags(toy, "--do_train", "--num_train_steps=1", *extra), distributed.init(False))


def test_eval_or_predict_without_a_classifier_head_is_refused(toy, tmp_path):
  pretraining = str(tmp_path / "google" / "bert_model.ckpt")
  write_google_checkpoint(pretraining, mt.google_variable_shapes(toy["config"]),
                          np.random.RandomState(5))
  for mode in ("--do_predict", "--do_eval"):
    with pytest.raises(ValueError, match="holds no checkpoint and no --init_checkpoint"):
      orchestration.preflight(_flags(toy, mode, "--labels=down,up"), distributed.init(False))
    with pytest.raises(ValueError, match="has no classifier head .* pretraining checkpoint"):
      orchestration.preflight(_flags(toy, mode, "--labels=down,up", "--init_checkpoint=" + pretraining),
                    distributed.init(False))
  assert not os.path.exists(toy["out"])


def test_predict_checks_saved_labels_and_pooling(toy):
  _train_one_step(toy, "--pooling=mean")
  saved = json.load(open(os.path.join(toy["out"], "classifier_config.json")))
  assert saved == {"pooling": "mean", "long_text": "head", "head_tokens": None,
                   "doc_stride": None, "chunk_pooling": "mean",  # --long_text: test_long_text.py
                   "multi_label": False, "entity_markers": 0,  # the head's kind (issue 47)
                   "max_seq_length": 16, "do_lower_case": True}  # the tokenizing flags
  plan = orchestration.preflight(_flags(toy, "--do_predict"), distributed.init(False))
  assert plan.labels == ["down", "up"] and plan.pooling == "mean"  # the saved ones
  with pytest.raises(tasks.DataError, match=r"\['up', 'down'\] .* differ from \['down', 'up'\] "
                     r".*in another order"):
    orchestration.preflight(_flags(toy, "--do_predict", "--labels=up,down"), distributed.init(False))
  with pytest.raises(tasks.DataError, match="another label set"):
    orchestration.preflight(_flags(toy, "--do_predict", "--labels=down,up,flat"), distributed.init(False))
  with pytest.raises(ValueError, match="trained with --pooling=mean, this run asks for "
                     "--pooling=first"):
    orchestration.preflight(_flags(toy, "--do_eval", "--pooling=first"), distributed.init(False))
  # google's way: predict into a new directory from the fine-tuned checkpoint
  other = _flags(toy, "--do_predict", "--init_checkpoint=" + toy["out"],
                 "--output_dir=" + toy["out"] + "_predict")
  assert orchestration.preflight(other, distributed.init(False)).pooling == "mean"


def test_blank_line_inside_the_test_file_is_refused_with_its_line(toy):
  rows = [json.dumps(row, ensure_ascii=False) for row in toy["test_rows"][:4]]
  _bad(toy, "test", "\n".join(rows[:2] + [""] + rows[2:]) + "\n\n\n")
  with pytest.raises(tasks.DataError, match=r"test\.jsonl:3: blank line in the test file"):
    tasks.read_split(toy["data"], "test", "jsonl")
  _bad(toy, "test", "\n".join(rows) + "\n\n\n")  # blank lines at the end shift nothing
  examples = tasks.read_split(toy["data"], "test", "jsonl")
  assert len(examples.examples) == 4 and examples.blank_lines == 2


def _cli(toy, *extra):
  command = [sys.executable, os.path.join(REPO, "run_classifier.py"), "--task_name=jsonl",
             "--data_dir=" + toy["data"], "--bert_config_file=" + toy["config_file"],
             "--vocab_file=" + toy["vocab"], "--output_dir=" + toy["out"], "--do_train",
             "--max_seq_length=16", "--train_batch_size=8", "--learning_rate=1e-3",
             "--intra_op_parallelism_threads=1", "--inter_op_parallelism_threads=1"]
  env = dict(os.environ, PYTHONPATH=REPO, TF_CPP_MIN_LOG_LEVEL="3")
  env.pop("BERT_FIN_VERBOSE", None)  # quiet mode, the default
  return subprocess.run(command + list(extra), capture_output=True, text=True, env=env,
                        timeout=300)


def test_cli_step_lines_tensorboard_scalars_and_optimizer_record(toy):
  proc = _cli(toy, "--num_train_steps=6", "--log_every_n_steps=3", "--optimizer=adamw")
  assert proc.returncode == 0, proc.stderr[-3000:]
  lines = step_lines(proc.stdout)
  assert sorted(lines) == [1, 3, 6], proc.stdout[-3000:]  # update 1, then every 3rd, in quiet mode
  assert lines[1].startswith(", elapsed = ")  # the first line: no window yet, no rates
  for step in (3, 6):
    assert re.match(r"^, examples/s = [\d.e+]+, real_tokens/s = [\d.e+]+, sec/step = [\d.e+]+, "
                    r"elapsed = \d+:\d\d:\d\d, eta = \d+:\d\d:\d\d$", lines[step]), lines[step]
  assert lines[6].endswith("eta = 0:00:00")
  tags = collections.defaultdict(list)
  for path in glob.glob(os.path.join(toy["out"], "events.out.tfevents*")):
    for event in tf.compat.v1.train.summary_iterator(path):
      for value in event.summary.value:
        tags[value.tag].append(event.step)
  for tag in ("train/loss", "train/learning_rate", "examples/sec"):
    assert 6 in tags[tag], dict(tags)
  assert json.load(open(os.path.join(toy["out"], "optimizer.json"))) == {"optimizer": "adamw"}
  assert tf.train.load_checkpoint(os.path.join(toy["out"], "model.ckpt-6")).get_tensor(
      "adam_step") == 6  # adamw's own update count is checkpointed
  # Continuing that checkpoint with another optimizer is refused in one line, before training.
  proc = _cli(toy, "--num_train_steps=8", "--optimizer=lamb")
  assert proc.returncode == 2, proc.stderr[-3000:]
  assert proc.stderr.strip().splitlines() == [
      "run_classifier.py: error: --output_dir %s holds a checkpoint trained with "
      "--optimizer=adamw, this run asks for --optimizer=lamb: resume with --optimizer=adamw or "
      "use a new --output_dir" % toy["out"]]
  assert tf.train.latest_checkpoint(toy["out"]).endswith("model.ckpt-6")


def _nvidia_style_vocab(tmp_path, lines=30522):
  """google's 30522-line vocab layout in miniature: the toy tokens, then [unusedN] filler."""
  tokens = tokenizer_vocab.vocab_tokens()
  tokens += ["[unused%d]" % i for i in range(100, 100 + lines - len(tokens))]
  path = tmp_path / "vocab_30522.txt"
  path.write_text("\n".join(tokens) + "\n", encoding="utf-8")
  return str(path)


def test_nvidia_padded_vocab_size_fine_tunes_and_a_smaller_one_is_refused(toy, tmp_path, capsys):
  # NVIDIA's configs pad google's 30522-token vocab to vocab_size 30528 (a multiple of 8).
  vocab = _nvidia_style_vocab(tmp_path)
  padded = tmp_path / "nvidia_config.json"
  padded.write_text(mt.tiny_config(vocab_size=30528, hidden_size=16, num_hidden_layers=1,
                                   num_attention_heads=2, intermediate_size=32,
                                   max_position_embeddings=32).to_json_string())
  toy = dict(toy, vocab=vocab, config_file=str(padded))
  values = _flags(toy, "--do_train", "--do_eval", "--num_train_steps=3", "--log_every_n_steps=1")
  result = orchestration.run(values, distributed.init(False))
  assert result["global_step"] == 3
  out = capsys.readouterr().out
  note = ("[run_classifier] --vocab_file %s has 30522 tokens, the config's vocab_size is 30528: "
          "embedding rows 30522..30527 are padding that no token uses" % vocab)
  assert out.count(note) == 1, out[-3000:]  # said once, at start-up
  assert sorted(step_lines(out)) == [1, 2, 3]
  reader = tf.train.load_checkpoint(os.path.join(toy["out"], "model.ckpt-3"))
  assert reader.get_variable_to_shape_map()["bert/embeddings/word_embeddings"] == [30528, 16]
  small = tmp_path / "small_config.json"
  small.write_text(mt.tiny_config(vocab_size=30520).to_json_string())
  with pytest.raises(ValueError, match=r"has 30522 tokens, more than the config's vocab_size "
                                       r"30520 \(ids >= 30520 would have no embedding\)"):
    orchestration.preflight(_flags(dict(toy, config_file=str(small), out=str(tmp_path / "o2")),
                         "--do_train"), distributed.init(False))


@pytest.mark.slow
def test_a_run_directory_of_adamweightdecay_resumes_under_adam_as_if_uninterrupted(toy):
  """A directory trained before the one optimizer vocabulary (its optimizer.json says
  adamweightdecay), killed after its step-3 checkpoint, resumes under today's default name,
  adam, to the uninterrupted run's weights; under adamw it is refused."""
  dist = distributed.init(False)
  steps = ("--do_train", "--num_train_steps=6", "--save_checkpoints_steps=3")
  orchestration.run(_flags(toy, *steps, "--optimizer=adamweightdecay"), dist)
  resumed_dir = toy["out"] + "_resumed"
  shutil.copytree(toy["out"], resumed_dir)
  for path in glob.glob(os.path.join(resumed_dir, "model.ckpt-6*")):
    os.remove(path)
  tf.train.update_checkpoint_state(resumed_dir, os.path.join(resumed_dir, "model.ckpt-3"))
  with open(os.path.join(resumed_dir, "optimizer.json"), "w", encoding="utf-8") as f:
    f.write('{\n  "optimizer": "adamweightdecay"\n}\n')  # as the directory was written then
  resumed_toy = dict(toy, out=resumed_dir)
  with pytest.raises(ValueError, match="trained with --optimizer=adamweightdecay, this run asks "
                     "for --optimizer=adamw"):
    orchestration.preflight(_flags(resumed_toy, *steps, "--optimizer=adamw"), dist)
  orchestration.run(_flags(resumed_toy, *steps), dist)
  resumed = tf.train.load_checkpoint(os.path.join(resumed_dir, "model.ckpt-6"))
  uninterrupted = tf.train.load_checkpoint(os.path.join(toy["out"], "model.ckpt-6"))
  names = sorted(uninterrupted.get_variable_to_shape_map())
  assert names == sorted(resumed.get_variable_to_shape_map()) and "output_weights" in names
  for name in names:
    np.testing.assert_array_equal(resumed.get_tensor(name), uninterrupted.get_tensor(name),
                                  err_msg=name)
