# coding=utf-8
"""Fine-tuning recipes (bert_fin/finetune/recipes.py): layer-wise learning-rate decay gives each
variable lr x its documented factor (one optimizer step against the undecayed one, for every
optimizer); --reinit_top_layers draws the top layers and the pooler from google's initializer
while everything else is restored bit for bit, only when training starts from --init_checkpoint
(not on resume, not in a predict-only run); both are recorded beside the checkpoint and a resume
with other values is refused."""
import json
import os
import random

from absl import flags
import numpy as np
import pytest
import tensorflow.compat.v1 as tf

from helpers.finetune_toys import ner_sentences
from helpers.finetune_toys import toy_rows
from helpers.finetune_toys import write_chars
from helpers.finetune_toys import write_jsonl
from helpers.google_checkpoints import write_google_checkpoint
from helpers import modeling_toys as mt
from helpers import tokenizer_vocab
from bert_fin.optimization import optimizers
from bert_fin.finetune import recipes
from bert_fin.finetune.classify import flags as classify_flags
from bert_fin.finetune.classify import orchestration
from bert_fin.finetune.classify import tasks
from bert_fin.finetune.ner import flags as ner_flags
from bert_fin.finetune.ner import orchestration as ner_run
from bert_fin.training import distributed

LAYER = "bert/encoder/layer_%d/attention/self/query/kernel"
NAMES = ["bert/embeddings/word_embeddings", "bert/embeddings/LayerNorm/gamma", LAYER % 0,
         LAYER % 1, "bert/encoder/layer_1/output/LayerNorm/beta", "bert/pooler/dense/kernel",
         "output_weights", "output_bias"]


def test_learning_rate_factors_follow_the_documented_convention():
  """L = 2, decay 0.5: the head and the pooler 1, layer_1 0.5, layer_0 0.25, embeddings 0.125."""
  assert recipes.learning_rate_multipliers(NAMES, 0.5) == {
      "bert/embeddings/word_embeddings": 0.125, "bert/embeddings/LayerNorm/gamma": 0.125,
      LAYER % 0: 0.25, LAYER % 1: 0.5, "bert/encoder/layer_1/output/LayerNorm/beta": 0.5}
  assert recipes.learning_rate_multipliers(NAMES, 1.0) == {}
  assert recipes.num_layers(NAMES) == 2


def test_reinitialised_variables_are_the_top_layers_and_the_pooler():
  assert recipes.reinitialised(NAMES, 1) == [
      LAYER % 1, "bert/encoder/layer_1/output/LayerNorm/beta", "bert/pooler/dense/kernel"]
  assert recipes.reinitialised(NAMES, 2) == sorted([LAYER % 0] + recipes.reinitialised(NAMES, 1))
  assert recipes.reinitialised(NAMES, 0) == []
  with pytest.raises(ValueError, match="--reinit_top_layers=3, but the encoder has 2 layers"):
    recipes.reinitialised(NAMES, 3)


@pytest.mark.usefixtures("fresh_graph")
@pytest.mark.parametrize("optimizer_type", ["adam", "adamw", "lamb"])
def test_one_step_moves_each_variable_by_its_factor_times_the_plain_step(optimizer_type):
  """The same gradient applied with and without the decay: every variable's change is its
  factor times the undecayed change (weight decay included), the head's is the same."""
  rng = np.random.RandomState(0)
  values = {name: rng.normal(0.0, 0.5, [3, 2]).astype(np.float32) for name in NAMES}
  grads = {name: rng.normal(0.0, 1.0, [3, 2]).astype(np.float32) for name in NAMES}
  factors = recipes.learning_rate_multipliers(NAMES, 0.5)
  moves = {}
  for multipliers in ({}, factors):
    with tf.Graph().as_default():
      variables = [tf.get_variable(name, initializer=values[name]) for name in NAMES]
      step = tf.train.get_or_create_global_step()
      optimizer = optimizers.make_optimizer(optimizer_type, 0.01, step, multipliers)
      apply = optimizer.apply_gradients([(tf.constant(grads[v.op.name]), v) for v in variables])
      with mt.session() as sess:
        sess.run(tf.global_variables_initializer())
        sess.run(apply)
        moves[bool(multipliers)] = {v.op.name: sess.run(v) - values[v.op.name] for v in variables}
  for name in NAMES:
    assert np.abs(moves[False][name]).max() > 1e-4, name
    np.testing.assert_allclose(moves[True][name], factors.get(name, 1.0) * moves[False][name],
                               rtol=1e-4, atol=1e-7, err_msg=name)


@pytest.fixture
def toy(tmp_path):
  rng = random.Random(7)
  data = tmp_path / "data"
  data.mkdir()
  for split, count in (("train", 64), ("dev", 16), ("test", 9)):
    write_jsonl(data / (split + ".jsonl"), toy_rows(rng, count))
  config = mt.tiny_config(vocab_size=len(tokenizer_vocab.vocab_tokens()), hidden_size=32,
                          num_hidden_layers=2, intermediate_size=64, max_position_embeddings=32)
  config_file = tmp_path / "bert_config.json"
  config_file.write_text(config.to_json_string())
  base = str(tmp_path / "google" / "bert_model.ckpt")
  values = write_google_checkpoint(base, mt.google_variable_shapes(config), np.random.RandomState(5))
  return dict(data=str(data), config_file=str(config_file), vocab=tokenizer_vocab.write_vocab(
      tmp_path), base=base, values=values, out=str(tmp_path / "out"), tmp=tmp_path)


def _classifier(toy, *extra):
  values = classify_flags.define_flags(flags.FlagValues())
  values(["run_classifier", "--task_name=jsonl", "--data_dir=" + toy["data"],
          "--bert_config_file=" + toy["config_file"], "--vocab_file=" + toy["vocab"],
          "--max_seq_length=16", "--train_batch_size=16", "--predict_batch_size=5",
          "--learning_rate=1e-5", "--warmup_proportion=0", "--seed=3",
          "--intra_op_parallelism_threads=1", "--inter_op_parallelism_threads=1"] + list(extra))
  settings = classify_flags.settings_of(values)
  return orchestration.run(settings, distributed.init(False))


def _tensors(prefix):
  reader = tf.train.load_checkpoint(prefix)
  return {name: reader.get_tensor(name) for name in reader.get_variable_to_shape_map()}


def _predictions(directory):
  with open(os.path.join(directory, tasks.TEST_RESULTS_FILE), encoding="utf-8") as f:
    return np.array([line.split("\t") for line in f], dtype=np.float64)


@pytest.mark.slow  # three run_classifier programs
def test_reinit_top_layers_on_start_only_recorded_and_honoured(toy):
  out = toy["out"]
  _classifier(toy, "--do_train", "--do_predict", "--num_train_steps=1",
              "--save_checkpoints_steps=1", "--init_checkpoint=" + toy["base"],
              "--output_dir=" + out, "--reinit_top_layers=1", "--layerwise_lr_decay=0.5")
  assert json.load(open(os.path.join(out, recipes.RECIPE_FILE))) == {
      "layerwise_lr_decay": 0.5, "reinit_top_layers": 1}
  start = _tensors(os.path.join(out, "model.ckpt-0"))  # the weights before the first update
  fresh = recipes.reinitialised(sorted(toy["values"]), 1)
  assert fresh and all(n.startswith(("bert/encoder/layer_1/", "bert/pooler/")) for n in fresh)
  for name, value in toy["values"].items():
    if name.startswith("bert/") and name not in fresh:
      np.testing.assert_array_equal(start[name], value, err_msg=name)  # restored bit for bit
  for name in fresh:  # google's initializer, not the checkpoint's N(0, 0.5)
    if name.endswith(("bias", "LayerNorm/beta")):
      assert not start[name].any(), name
    elif name.endswith("LayerNorm/gamma"):
      assert (start[name] == 1.0).all(), name
    else:
      assert np.abs(start[name]).max() <= 2 * 0.02 + 1e-7 and start[name].std() > 0.01, name
  # Predict-only, google's way (the fine-tuned checkpoint as --init_checkpoint of a new
  # directory), the flag given: the fine-tuned model whole, the predictions of the trained run.
  other = str(toy["tmp"] / "predict")
  _classifier(toy, "--do_predict", "--output_dir=" + other, "--init_checkpoint=" + out,
              "--reinit_top_layers=1")
  np.testing.assert_array_equal(_predictions(other), _predictions(out))
  # Resumed: nothing is drawn again (lr 1e-5: one more update moves weights by ~1e-5).
  _classifier(toy, "--do_train", "--num_train_steps=2", "--init_checkpoint=" + toy["base"],
              "--output_dir=" + out, "--reinit_top_layers=1", "--layerwise_lr_decay=0.5")
  one, two = _tensors(os.path.join(out, "model.ckpt-1")), _tensors(os.path.join(out, "model.ckpt-2"))
  for name in fresh:
    assert np.abs(two[name] - one[name]).max() < 1e-4, name
  with pytest.raises(ValueError, match=r"trained with --layerwise_lr_decay=0.5 "
                     r"--reinit_top_layers=1, this run asks for --layerwise_lr_decay=1 "
                     r"--reinit_top_layers=1: resume with the recorded values"):
    _classifier(toy, "--do_train", "--num_train_steps=3", "--init_checkpoint=" + toy["base"],
                "--output_dir=" + out, "--reinit_top_layers=1")


@pytest.mark.slow  # two run_ner programs
def test_run_ner_takes_the_recipes(toy, tmp_path):
  rng = random.Random(3)
  data = tmp_path / "ner"
  data.mkdir()
  for split in ("train", "dev"):
    write_chars(data / (split + ".txt"), ner_sentences(rng, 20))
  values = ner_flags.define_flags(flags.FlagValues())
  values(["run_ner", "--data_dir=" + str(data), "--bert_config_file=" + toy["config_file"],
          "--vocab_file=" + toy["vocab"], "--output_dir=" + toy["out"], "--max_seq_length=16",
          "--train_batch_size=8", "--learning_rate=1e-3", "--num_train_steps=1", "--do_train",
          "--init_checkpoint=" + toy["base"], "--reinit_top_layers=2",
          "--layerwise_lr_decay=0.8", "--intra_op_parallelism_threads=1",
          "--inter_op_parallelism_threads=1"])
  ner_run.run(ner_flags.settings_of(values), distributed.init(False))
  assert recipes.read_recipe(toy["out"]) == recipes.Recipe(0.8, 2)
  start = _tensors(os.path.join(toy["out"], "model.ckpt-0"))
  for name, value in toy["values"].items():
    if not name.startswith("bert/"):
      continue  # the pretraining heads: not in a tagger
    moved = not np.array_equal(start[name], value)
    assert moved == (name.startswith(("bert/encoder/", "bert/pooler/"))), name


def test_bad_recipe_values_are_refused_by_flag():
  values = classify_flags.define_flags(flags.FlagValues())
  base = ["run_classifier", "--task_name=jsonl", "--data_dir=d", "--bert_config_file=c",
          "--vocab_file=v", "--output_dir=o", "--do_train"]
  values(base + ["--layerwise_lr_decay=1.5"])
  with pytest.raises(ValueError, match=r"--layerwise_lr_decay must be in \(0, 1\]"):
    classify_flags.settings_of(values)
  values = classify_flags.define_flags(flags.FlagValues())
  values(base + ["--reinit_top_layers=-1"])
  with pytest.raises(ValueError, match="--reinit_top_layers must be >= 0"):
    classify_flags.settings_of(values)
