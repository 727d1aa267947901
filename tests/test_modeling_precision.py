"""Manual mixed precision: compute_type=tf.float16 keeps float32 variables, computes the encoder
in float16, softmax / layer norm / losses in float32, and stays close to the float32 model."""

import numpy as np
import pytest
import tensorflow.compat.v1 as tf

from helpers import modeling_toys as mt
from bert_fin import modeling
from bert_fin.training.graph import losses as losses_lib


def _build(config, inputs, compute_type, scope):
  model = modeling.BertModel(config, False, tf.constant(inputs["input_ids"]),
                             input_len=tf.constant(inputs["input_len"]),
                             token_type_ids=tf.constant(inputs["token_type_ids"]),
                             compute_type=compute_type, scope=scope)
  with tf.variable_scope(scope):
    losses = losses_lib.pretraining_losses(config, model, mt.features_tensors(inputs))
  return model, losses


def test_float16_close_to_float32_with_float32_variables():
  rng = np.random.RandomState(7)
  config = mt.tiny_config()
  inputs = mt.example_inputs(rng, config)
  with tf.Graph().as_default() as graph:
    m32, l32 = _build(config, inputs, tf.float32, "fp32")
    m16, l16 = _build(config, inputs, tf.float16, "fp16")
    fp16_vars = tf.global_variables("fp16/")
    assert len(fp16_vars) == len(tf.global_variables("fp32/")) > 0
    assert all(v.dtype.base_dtype == tf.float32 for v in fp16_vars)
    grads = tf.gradients(l16["total_loss"], fp16_vars)
    assert all(g is not None and g.dtype == tf.float32 for g in grads)
    for tensor in (m16.get_sequence_output(), m16.get_pooled_output(), l16["total_loss"],
                   m16.get_embedding_table()):
      assert tensor.dtype == tf.float32
    fp16_ops = [op for op in graph.get_operations() if op.name.startswith("fp16/")]
    half_matmuls = [op for op in fp16_ops if op.type in ("MatMul", "BatchMatMulV2")
                    and op.outputs[0].dtype == tf.float16]
    assert len(half_matmuls) >= 2 * 8  # q, k, v, scores, context, attention out, inter, out
    softmaxes = [op for op in fp16_ops if op.type == "Softmax"]
    assert len(softmaxes) == 2 and all(op.outputs[0].dtype == tf.float32 for op in softmaxes)
    rsqrts = [op for op in fp16_ops if op.type == "Rsqrt"]  # layer norms
    assert rsqrts and all(op.outputs[0].dtype == tf.float32 for op in rsqrts)
    with mt.session() as sess:
      sess.run(tf.global_variables_initializer())
      values = mt.randomize_variables(sess, rng, scale=0.1, tvars=tf.global_variables("fp32/"))
      mt.copy_values(sess, values, fp16_vars, "fp32/", "fp16/")
      (s32, p32, t32), (s16, p16, t16), g16 = sess.run([
          (m32.get_sequence_output(), m32.get_pooled_output(), l32["total_loss"]),
          (m16.get_sequence_output(), m16.get_pooled_output(), l16["total_loss"]), grads])
  assert np.abs(s32).max() > 0.5  # not trivially small outputs
  np.testing.assert_allclose(s16, s32, atol=2e-2, rtol=0)
  np.testing.assert_allclose(p16, p32, atol=2e-2, rtol=0)
  np.testing.assert_allclose(t16, t32, rtol=1e-2)
  assert all(np.isfinite(g).all() for g in g16)


def test_unsupported_compute_type_is_rejected():
  with tf.Graph().as_default():
    with pytest.raises(ValueError, match="compute_type"):
      modeling.BertModel(mt.tiny_config(), False, tf.zeros([2, 8], tf.int32),
                         compute_type=tf.int32)
