"""bert_fin.modeling inputs: the attention mask (lengths, input_mask, sequence_ids), padding,
default mask, dynamic batch, dropout, the RoBERTa objective, one-hot lookup and bad inputs."""

import numpy as np
import pytest
import tensorflow.compat.v1 as tf

from helpers import modeling_toys as mt
from helpers import reference_bert_numpy as ref
from bert_fin import modeling
from bert_fin.training.graph import losses as losses_lib

TOL = mt.TOL


def test_padding_does_not_change_real_positions_and_default_mask_is_all_ones():
  rng = np.random.RandomState(2)
  config = mt.tiny_config()
  inputs = mt.example_inputs(rng, config)
  garbage = dict(inputs, input_ids=inputs["input_ids"].copy())
  for b, n in enumerate(inputs["input_len"]):
    garbage["input_ids"][b, n:] = rng.randint(1, config.vocab_size, size=mt.SEQ - n)
  full = dict(garbage, input_len=np.full([mt.BATCH], mt.SEQ, np.int32))
  with tf.Graph().as_default():
    outputs = []
    for scope, feed, kwargs in [("a", inputs, {}), ("b", garbage, {}),
                                ("c", full, {}), ("d", full, {"mask_mode": "none"})]:
      with tf.variable_scope(scope):
        model, _ = mt.build(config, feed, **kwargs)
      outputs.append(model.get_sequence_output())
    with mt.session() as sess:
      sess.run(tf.global_variables_initializer())
      values = mt.randomize_variables(sess, rng, tvars=tf.global_variables("a/"))
      for scope in "bcd":  # same weights in every copy
        mt.copy_values(sess, values, tf.global_variables(scope + "/"), "a/", scope + "/")
      a, b, c, d = sess.run(outputs)
  for i, n in enumerate(inputs["input_len"]):
    np.testing.assert_allclose(a[i, :n], b[i, :n], atol=1e-6)
  assert np.abs(a[1, :5] - c[1, :5]).max() > 1e-3  # attending to the padding changes them
  np.testing.assert_allclose(c, d, atol=1e-6)  # neither input_len nor input_mask = all real


def test_attention_mask_lengths_input_mask_and_sequence_ids():
  rng = np.random.RandomState(3)
  input_len = np.array([16, 5, 0], np.int32)
  sequence_ids = np.zeros((3, 16), np.int32)
  sequence_ids[0] = [1] * 4 + [2] * 7 + [3] * 5
  sequence_ids[1, :5] = [1, 1, 2, 2, 2]
  general = rng.randint(0, 2, size=(3, 16)).astype(np.int32)
  with tf.Graph().as_default():
    by_len = modeling.attention_mask(tf.constant(input_len), 16)
    packed = modeling.attention_mask(tf.constant(input_len), 16, tf.constant(sequence_ids))
    by_mask = modeling.attention_mask(None, 16, input_mask=tf.constant(general))
    with mt.session() as sess:
      by_len, packed, by_mask = sess.run([by_len, packed, by_mask])
  assert by_len.dtype == np.float32 and by_len.shape == (3, 16, 16)
  np.testing.assert_array_equal(by_len, ref.visibility(input_len, 16))
  np.testing.assert_array_equal(packed, ref.visibility(input_len, 16, sequence_ids))
  assert packed[0, 0, :4].sum() == 4 and packed[0, 0, 4:].sum() == 0  # no cross-sequence keys
  np.testing.assert_array_equal(by_mask, np.repeat(general[:, None, :], 16, axis=1))
  with tf.Graph().as_default():
    with pytest.raises(ValueError, match="exactly one"):
      modeling.attention_mask(tf.constant(input_len), 16, input_mask=tf.constant(general))


def test_roberta_objective_has_no_nsp_and_one_hot_embeddings_match_gather():
  rng = np.random.RandomState(5)
  config = mt.tiny_config()
  inputs = mt.example_inputs(rng, config)
  with tf.Graph().as_default():
    with tf.variable_scope("gather"):
      _, gather_losses = mt.build(config, inputs, "roberta")
    with tf.variable_scope("one_hot"):
      _, one_hot_losses = mt.build(config, inputs, "roberta", use_one_hot_embeddings=True)
    assert not [v for v in tf.global_variables() if "seq_relationship" in v.name]
    assert "nsp_log_probs" not in gather_losses and "nsp_per_example_loss" not in gather_losses
    with mt.session() as sess:
      sess.run(tf.global_variables_initializer())
      values = mt.randomize_variables(sess, rng, tvars=tf.global_variables("gather/"))
      mt.copy_values(sess, values, tf.global_variables("one_hot/"), "gather/", "one_hot/")
      a, b = sess.run([gather_losses, one_hot_losses])
  assert a["nsp_loss"] == 0.0 and a["total_loss"] == a["mlm_loss"] > 0.0
  np.testing.assert_allclose(a["mlm_log_probs"], b["mlm_log_probs"], atol=1e-6)


def test_dropout_only_when_training():
  config = mt.tiny_config()
  inputs = mt.example_inputs(np.random.RandomState(6), config)
  with tf.Graph().as_default():
    with tf.variable_scope("train"):
      train_model, _ = mt.build(config, inputs, is_training=True)
    with tf.variable_scope("eval"):
      eval_model, _ = mt.build(config, inputs, is_training=False)
    with mt.session() as sess:
      sess.run(tf.global_variables_initializer())
      t1, t2 = sess.run(train_model.get_pooled_output()), sess.run(train_model.get_pooled_output())
      e1, e2 = sess.run(eval_model.get_pooled_output()), sess.run(eval_model.get_pooled_output())
  assert np.abs(t1 - t2).max() > 1e-4
  np.testing.assert_array_equal(e1, e2)


def test_bad_inputs_give_clear_errors():
  config = mt.tiny_config()
  ids = tf.constant
  with tf.Graph().as_default():
    with pytest.raises(ValueError, match="not both"):
      modeling.BertModel(config, False, ids(np.ones((2, 8), np.int32)), input_len=ids([8, 8]),
                         input_mask=ids(np.ones((2, 8), np.int32)))
    with pytest.raises(ValueError, match="rank"):
      modeling.BertModel(config, False, ids(np.ones((8,), np.int32)))
    with pytest.raises(ValueError, match="max_position_embeddings"):
      modeling.BertModel(config, False, ids(np.ones((1, 65), np.int32)))
    ids_in = tf.placeholder(tf.int32, [2, 8])
    len_in = tf.placeholder(tf.int32, [2])
    model = modeling.BertModel(config, False, ids_in, input_len=len_in)
    with pytest.raises(ValueError, match="objective"):
      losses_lib.pretraining_losses(config, model, {}, objective="xlnet")
    with pytest.raises(ValueError, match="next_sentence_labels"):
      inputs = mt.example_inputs(np.random.RandomState(0), config)
      feats = mt.features_tensors(inputs)
      del feats["next_sentence_labels"]
      losses_lib.pretraining_losses(config, model, feats, objective="bert")
    with mt.session() as sess:
      sess.run(tf.global_variables_initializer())
      ok = np.ones((2, 8), np.int32)
      assert sess.run(model.get_pooled_output(), {ids_in: ok, len_in: [8, 3]}).shape == (2, 32)
      with pytest.raises(tf.errors.InvalidArgumentError, match="input_len > seq_length 8"):
        sess.run(model.get_pooled_output(), {ids_in: ok, len_in: [8, 9]})
      with pytest.raises(tf.errors.InvalidArgumentError, match="input_ids >= vocab_size 100"):
        sess.run(model.get_pooled_output(), {ids_in: ok * 100, len_in: [8, 8]})


def test_dynamic_batch_size_like_an_estimator_input_fn():
  """input_fn batches without drop_remainder have shape [None, S]; results equal the static ones."""
  rng = np.random.RandomState(11)
  config = mt.tiny_config()
  inputs = mt.example_inputs(rng, config)
  with tf.Graph().as_default():
    model, losses = mt.build(config, inputs)
    holders = {name: tf.placeholder(tf.as_dtype(inputs[name].dtype),
                                    [None] + list(inputs[name].shape[1:]), name=name)
               for name in inputs}
    with tf.variable_scope(tf.get_variable_scope(), reuse=True):
      dyn_model = modeling.BertModel(config, False, holders["input_ids"],
                                     input_len=holders["input_len"],
                                     token_type_ids=holders["token_type_ids"], recompute=True,
                                     scope="bert")
      dyn_losses = losses_lib.pretraining_losses(config, dyn_model, {
          name: holders[name] for name in mt.features_tensors(inputs)})
    assert dyn_model.get_sequence_output().shape.as_list() == [None, mt.SEQ, config.hidden_size]
    grads = tf.gradients(dyn_losses["total_loss"], tf.trainable_variables())
    with mt.session() as sess:
      sess.run(tf.global_variables_initializer())
      mt.randomize_variables(sess, rng)
      want = sess.run([model.get_sequence_output(), losses["total_loss"]])
      got = sess.run([dyn_model.get_sequence_output(), dyn_losses["total_loss"]] + grads,
                     {holders[name]: inputs[name] for name in inputs})
  np.testing.assert_allclose(got[0], want[0], atol=TOL)
  np.testing.assert_allclose(got[1], want[1], atol=TOL)
  assert all(np.isfinite(g).all() for g in got[2:])
