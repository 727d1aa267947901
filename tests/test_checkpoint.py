"""Loading a checkpoint written with google-research/bert's variable names (made by hand from a
name -> shape table, not by our model) maps every variable and reports the odd ones by name."""
import numpy as np
import pytest
import tensorflow.compat.v1 as tf

from helpers import modeling_toys as mt
from helpers.google_checkpoints import write_google_checkpoint
from bert_fin import modeling
from bert_fin.training.graph import losses as losses_lib

EXTRA = "bert/encoder/layer_7/attention/self/query/kernel"  # a layer the tiny config lacks
DROPPED = "cls/seq_relationship/output_bias"


def build_model(config, mode):
  inputs = mt.example_inputs(np.random.RandomState(0), config)
  model = modeling.BertModel(config, True, tf.constant(inputs["input_ids"]),
                             input_len=tf.constant(inputs["input_len"]),
                             compute_type=tf.float16 if mode == "fp16" else tf.float32,
                             recompute=(mode == "recompute"))
  return losses_lib.pretraining_losses(config, model, mt.features_tensors(inputs))


@pytest.mark.parametrize("mode", ["fp32", "fp16", "recompute"])
def test_every_variable_mapped_and_values_equal(tmp_path, mode):
  config = mt.tiny_config()
  shapes = mt.google_variable_shapes(config)
  shapes[EXTRA] = [config.hidden_size, config.hidden_size]
  path = str(tmp_path / "model.ckpt")
  values = write_google_checkpoint(path, shapes, np.random.RandomState(1))
  lines = []
  with tf.Graph().as_default():
    build_model(config, mode)
    tvars = tf.trainable_variables()
    report = modeling.init_from_checkpoint(path, log=lines.append)
    with mt.session() as sess:
      sess.run(tf.global_variables_initializer())
      loaded = dict(zip([mt.variable_name(v) for v in tvars], sess.run(tvars)))
  del values[EXTRA]
  assert sorted(loaded) == sorted(values) == report.mapped
  for name, value in values.items():
    np.testing.assert_array_equal(loaded[name], value, err_msg=name)
  assert report.missing_in_checkpoint == []
  assert report.unused_in_checkpoint == [EXTRA]  # adam_m / adam_v / global_step not reported
  assert any(EXTRA in line for line in lines)


def test_missing_variable_reported_and_assignment_map_like_google(tmp_path):
  config = mt.tiny_config()
  shapes = mt.google_variable_shapes(config)
  del shapes[DROPPED]
  path = str(tmp_path / "model.ckpt")
  write_google_checkpoint(path, shapes, np.random.RandomState(2), training_state=False)
  lines = []
  with tf.Graph().as_default():
    build_model(config, "fp32")
    tvars = tf.trainable_variables()
    assignment_map, initialized = modeling.get_assignment_map_from_checkpoint(tvars, path)
    assert sorted(assignment_map) == sorted(shapes)
    assert all(assignment_map[name] == name for name in assignment_map)
    assert set(initialized) == set(shapes) | {name + ":0" for name in shapes}
    report = modeling.init_from_checkpoint(path, tvars, log=lines.append)
  assert report.missing_in_checkpoint == [DROPPED]
  assert report.unused_in_checkpoint == []
  assert len(report.mapped) == len(shapes)
  assert any(DROPPED in line and "not in checkpoint" in line for line in lines)


def test_shape_mismatch_and_unreadable_checkpoint_raise(tmp_path):
  config = mt.tiny_config()
  shapes = mt.google_variable_shapes(config)
  shapes["bert/pooler/dense/bias"] = [config.hidden_size + 1]
  path = str(tmp_path / "model.ckpt")
  write_google_checkpoint(path, shapes, np.random.RandomState(3), training_state=False)
  with tf.Graph().as_default():
    build_model(config, "fp32")
    with pytest.raises(ValueError, match="bert/pooler/dense/bias: graph \\[32\\], checkpoint"):
      modeling.init_from_checkpoint(path, log=None)
    with pytest.raises(ValueError, match="cannot read checkpoint"):
      modeling.init_from_checkpoint(str(tmp_path / "nothing_here.ckpt"), log=None)


def test_resolve_checkpoint_takes_a_directorys_latest_or_a_prefix_as_given(tmp_path):
  """The one "directory or prefix -> its checkpoint" rule (modeling/checkpoint.py) every reader
  of --init_checkpoint / --output_dir uses."""
  from bert_fin.modeling import checkpoint  # pylint: disable=import-outside-toplevel
  run = tmp_path / "run"
  run.mkdir()
  assert checkpoint.resolve_checkpoint(str(run)) is None  # a directory without a checkpoint
  assert checkpoint.resolve_checkpoint(str(run), run_dir=True) is None
  for step in (1, 2):
    checkpoint.write_checkpoint(str(run / ("model.ckpt-%d" % step)),
                                {"w": np.full([2], step, np.float32)})
  latest = checkpoint.resolve_checkpoint(str(run))
  assert latest == str(run / "model.ckpt-2") == checkpoint.resolve_checkpoint(str(run), True)
  assert tf.train.load_variable(latest, "w").tolist() == [2.0, 2.0]
  prefix = str(run / "model.ckpt-1")  # a prefix is returned as given, read or not
  assert checkpoint.resolve_checkpoint(prefix) == prefix
  assert checkpoint.resolve_checkpoint(str(tmp_path / "gone" / "model.ckpt")) == str(
      tmp_path / "gone" / "model.ckpt")
  for nothing in (None, ""):
    assert checkpoint.resolve_checkpoint(nothing) is None
    assert checkpoint.resolve_checkpoint(nothing, run_dir=True) is None
  # a run's output directory: only an existing directory holds a checkpoint, never a prefix
  assert checkpoint.resolve_checkpoint(prefix, run_dir=True) is None
  assert checkpoint.resolve_checkpoint(str(tmp_path / "not_yet"), run_dir=True) is None


def test_a_checkpoint_of_another_width_is_one_line_naming_the_count_and_the_first(tmp_path):
  config = mt.tiny_config()
  wide = mt.google_variable_shapes(mt.tiny_config(hidden_size=2 * config.hidden_size))
  path = str(tmp_path / "wide" / "model.ckpt")
  write_google_checkpoint(path, wide, np.random.RandomState(3), training_state=False)
  with tf.Graph().as_default():
    build_model(config, "fp32")
    with pytest.raises(ValueError) as refused:
      modeling.init_from_checkpoint(path, log=None)
  message = str(refused.value)
  narrow = mt.google_variable_shapes(config)
  differing = sum(1 for name, shape in narrow.items()
                  if name in wide and list(wide[name]) != list(shape))
  assert "\n" not in message and differing > 10
  assert message.startswith("init_from_checkpoint: shape mismatch for %d variable(s) of %s " % (
      differing, path))
  assert "the first: bert/embeddings/word_embeddings: graph [" in message
