"""Shared helpers of the modeling tests: the tiny config, a 1-thread session, random weights."""
import os

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import tensorflow.compat.v1 as tf  # noqa: E402

from bert_fin import modeling  # noqa: E402
from bert_fin.training.graph import losses as losses_lib  # noqa: E402

BATCH, SEQ, PREDS = 3, 16, 4
TOL = 1e-5  # google equivalence tolerance


def tiny_config(**overrides):
  kwargs = dict(vocab_size=100, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                intermediate_size=37, max_position_embeddings=64, type_vocab_size=2)
  kwargs.update(overrides)
  return modeling.BertConfig(**kwargs)


def session():
  return tf.Session(config=tf.ConfigProto(intra_op_parallelism_threads=1,
                                          inter_op_parallelism_threads=1))


variable_name = modeling.checkpoint.variable_name


def load_values(sess, values_by_variable):
  """Assigns {variable: numpy value} in one session.run (placeholders, no constants in the graph)."""
  feeds, ops = {}, []
  for var, value in values_by_variable.items():
    holder = tf.placeholder(var.dtype.base_dtype, var.shape)
    ops.append(tf.assign(var, holder))
    feeds[holder] = value
  sess.run(ops, feeds)


def randomize_variables(sess, rng, scale=0.3, tvars=None):
  """Loads random values (LayerNorm gammas near 1) into the variables; returns {name: value}."""
  values, by_var = {}, {}
  for var in (tvars if tvars is not None else tf.global_variables()):
    name = variable_name(var)
    value = rng.normal(0.0, scale, var.shape.as_list())
    if name.endswith("/gamma"):
      value = 1.0 + value
    value = value.astype(var.dtype.base_dtype.as_numpy_dtype)
    values[name] = by_var[var] = value
  load_values(sess, by_var)
  return values


def copy_values(sess, values, tvars, src_prefix, dst_prefix):
  """Loads values {src_prefix + name: value} into the variables named dst_prefix + name."""
  load_values(sess, {var: values[src_prefix + variable_name(var)[len(dst_prefix):]]
                     for var in tvars})


def example_inputs(rng, config, batch=BATCH, seq=SEQ, preds=PREDS):
  """Random numpy inputs: ids, lengths (one full, one short), segments, MLM and NSP labels."""
  input_len = np.array([seq, 5, 11][:batch] + [seq] * max(0, batch - 3), np.int32)
  input_ids = rng.randint(1, config.vocab_size, size=(batch, seq)).astype(np.int32)
  token_type_ids = np.zeros((batch, seq), np.int32)
  for b in range(batch):
    input_ids[b, input_len[b]:] = 0
    token_type_ids[b, input_len[b] // 2:input_len[b]] = 1
  positions = np.stack([np.sort(rng.choice(input_len[b], preds, replace=False))
                        for b in range(batch)]).astype(np.int32)
  label_ids = rng.randint(1, config.vocab_size, size=(batch, preds)).astype(np.int32)
  label_weights = np.ones((batch, preds), np.float32)
  label_weights[1, -1] = 0.0
  nsp_labels = rng.randint(0, 2, size=(batch, 1)).astype(np.int32)
  return dict(input_ids=input_ids, input_len=input_len, token_type_ids=token_type_ids,
              masked_lm_positions=positions, masked_lm_ids=label_ids,
              masked_lm_weights=label_weights, next_sentence_labels=nsp_labels)


def features_tensors(inputs):
  """The record features (bert_fin.records.schema names) as constants."""
  from bert_fin.records import schema
  names = [schema.MASKED_LM_POSITIONS, schema.MASKED_LM_IDS, schema.MASKED_LM_WEIGHTS,
           schema.NEXT_SENTENCE_LABELS]
  return {name: tf.constant(inputs[name]) for name in names}


def google_variable_shapes(config, objective="bert"):
  """{name: shape} google's modeling.py + run_pretraining.py create, derived from the config."""
  h, i = config.hidden_size, config.intermediate_size
  shapes = {
      "bert/embeddings/word_embeddings": [config.vocab_size, h],
      "bert/embeddings/token_type_embeddings": [config.type_vocab_size, h],
      "bert/embeddings/position_embeddings": [config.max_position_embeddings, h],
      "bert/embeddings/LayerNorm/beta": [h],
      "bert/embeddings/LayerNorm/gamma": [h],
      "bert/pooler/dense/kernel": [h, h],
      "bert/pooler/dense/bias": [h],
      "cls/predictions/transform/dense/kernel": [h, h],
      "cls/predictions/transform/dense/bias": [h],
      "cls/predictions/transform/LayerNorm/beta": [h],
      "cls/predictions/transform/LayerNorm/gamma": [h],
      "cls/predictions/output_bias": [config.vocab_size],
  }
  if objective == "bert":
    shapes["cls/seq_relationship/output_weights"] = [2, h]
    shapes["cls/seq_relationship/output_bias"] = [2]
  for n in range(config.num_hidden_layers):
    p = "bert/encoder/layer_%d/" % n
    for dense_name, (rows, cols) in {"attention/self/query": (h, h), "attention/self/key": (h, h),
                                     "attention/self/value": (h, h),
                                     "attention/output/dense": (h, h),
                                     "intermediate/dense": (h, i), "output/dense": (i, h)}.items():
      shapes[p + dense_name + "/kernel"] = [rows, cols]
      shapes[p + dense_name + "/bias"] = [cols]
    for norm in ("attention/output/LayerNorm", "output/LayerNorm"):
      shapes[p + norm + "/beta"] = [h]
      shapes[p + norm + "/gamma"] = [h]
  return shapes


def build(config, inputs, objective="bert", is_training=False, mask_mode="len", **model_kwargs):
  """Model + heads on constant inputs; returns (model, losses dict)."""
  kwargs = dict(token_type_ids=tf.constant(inputs["token_type_ids"]))
  if mask_mode == "len":
    kwargs["input_len"] = tf.constant(inputs["input_len"])
  elif mask_mode == "mask":
    mask = np.arange(inputs["input_ids"].shape[1])[None] < inputs["input_len"][:, None]
    kwargs["input_mask"] = tf.constant(mask.astype(np.int32))
  kwargs.update(model_kwargs)
  model = modeling.BertModel(config, is_training, tf.constant(inputs["input_ids"]), **kwargs)
  losses = losses_lib.pretraining_losses(config, model, features_tensors(inputs), objective)
  return model, losses
