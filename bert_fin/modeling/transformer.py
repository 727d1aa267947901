"""The transformer encoder (google's `transformer_model`), with optional per-layer recomputation.

Variables per layer (under `layer_<i>`): attention/self/{query,key,value}/{kernel,bias},
attention/output/dense/{kernel,bias}, attention/output/LayerNorm/{beta,gamma},
intermediate/dense/{kernel,bias}, output/dense/{kernel,bias}, output/LayerNorm/{beta,gamma}.

Recomputation (recompute=True) wraps each layer in tf.recompute_grad: the layer's activations are
not kept for the backward pass but recomputed from its input. Two details make this exact in
TF 2.x graph mode:
  * tf.recompute_grad calls the layer function a second time (for the gradient) in the layer's
    variable scope; that second call must reuse the variables the first one created, so the
    function opens its scope with reuse=True on every call after the first.
  * dropout must draw the same mask in the recomputation: the layer uses stateless dropout with a
    per-layer seed drawn once per step outside the recomputed function.
  * each stateless mask waits (control dependency) for the tensor it masks: its shape is static,
    so otherwise the masks can be drawn early and held across the step.
Memory saving (bench/bench_modeling.py, CPU, 4 layers): the peak depends on the executor's
run-to-run op order; measured 413-722 MB vs 718 MB without recompute (no dropout) and
602-878 MB vs 846 MB (dropout). Gradients are unchanged (tests/test_recompute.py).
Variables are created as resource variables (required by tf.custom_gradient in graph mode).
"""
import tensorflow.compat.v1 as tf

from bert_fin.modeling import attention
from bert_fin.modeling import layers

_INT32_MAX = 2**31 - 1


def transformer_layer(layer_input, mask, batch_size, seq_length, config, intermediate_act_fn,
                      dropout_seed=None, return_scores=False):
  """One encoder layer in the current variable scope.

  Args:
    layer_input: [B*S, H] (compute dtype).
    mask: float32 [B, S, S].
    batch_size: B, a python int or a scalar int32 tensor.
    seq_length: python int S.
    config: BertConfig.
    intermediate_act_fn: the feed-forward activation (layers.get_activation).
    dropout_seed: None (stateful dropout) or int tensor [2] (stateless, see layers.dropout); its
      three dropouts use seed + [k, 0], k = 0, 1, 2.
    return_scores: also return the layer's attention scores (attention.attention_layer's).

  Returns:
    [B*S, H] in the compute dtype; with return_scores (that, float32 [B, N, S, S]).
  """
  hidden_size = config.hidden_size
  size_per_head = hidden_size // config.num_attention_heads
  initializer = layers.create_initializer(config.initializer_range)

  def seed(k):
    return None if dropout_seed is None else dropout_seed + tf.constant([k, 0], dropout_seed.dtype)

  with tf.variable_scope("attention"):
    with tf.variable_scope("self"):
      attention_head, scores = attention.attention_layer(
          layer_input, mask, batch_size, seq_length, config.num_attention_heads, size_per_head,
          config.attention_probs_dropout_prob, config.initializer_range, seed(0),
          return_scores=True)
    with tf.variable_scope("output"):
      attention_output = layers.dense_in_scope(attention_head, hidden_size, initializer, "dense")
      attention_output = layers.dropout(attention_output, config.hidden_dropout_prob, seed(1))
      attention_output = layers.layer_norm(attention_output + layer_input)
  with tf.variable_scope("intermediate"):
    intermediate_output = layers.dense_in_scope(
        attention_output, config.intermediate_size, initializer, "dense", intermediate_act_fn)
  with tf.variable_scope("output"):
    layer_output = layers.dense_in_scope(intermediate_output, hidden_size, initializer, "dense")
    layer_output = layers.dropout(layer_output, config.hidden_dropout_prob, seed(2))
    layer_output = layers.layer_norm(layer_output + attention_output)
  return (layer_output, scores) if return_scores else layer_output


def _uses_dropout(config):
  return config.hidden_dropout_prob > 0.0 or config.attention_probs_dropout_prob > 0.0


def _recomputed_layer(scope_name, layer_input, mask, batch_size, seq_length, config, act_fn,
                      dropout_seed):
  """transformer_layer under `scope_name`, wrapped in tf.recompute_grad (see module doc)."""
  if dropout_seed is None and _uses_dropout(config):
    dropout_seed = tf.random.uniform([2], maxval=_INT32_MAX, dtype=tf.int32,
                                     name=scope_name + "_dropout_seed")
  calls = []

  def layer_fn(x):
    reuse = True if calls else None
    calls.append(1)
    with tf.variable_scope(scope_name, reuse=reuse, use_resource=True):
      return transformer_layer(x, mask, batch_size, seq_length, config, act_fn, dropout_seed)

  return tf.recompute_grad(layer_fn)(layer_input)


def transformer_model(input_tensor, mask, config, recompute=False, dropout_seeds=None,
                      return_scores=False):
  """The encoder stack: config.num_hidden_layers layers under `layer_<i>`.

  Args:
    input_tensor: [B, S, H] (compute dtype).
    mask: float32 [B, S, S].
    config: BertConfig.
    recompute: wrap each layer in tf.recompute_grad.
    dropout_seeds: None, or one int tensor [2] per layer: stateless dropout with these seeds
      (with recompute and dropout and no seeds given, seeds are drawn per step).
    return_scores: also return every layer's attention scores (not with recompute: a recomputed
      layer's inner tensors are not kept).

  Returns:
    the list of every layer's output, each [B, S, H] in the compute dtype; with return_scores
    (that, the list of every layer's scores, each float32 [B, N, S, S]: query . key / sqrt(D)
    before the mask's adder).

  Raises:
    ValueError: len(dropout_seeds) != num_hidden_layers, input_tensor is not rank 3, or its
      width is not hidden_size, or return_scores with recompute.
  """
  if return_scores and recompute:
    raise ValueError("transformer_model: return_scores and recompute exclude each other")
  if dropout_seeds is not None and len(dropout_seeds) != config.num_hidden_layers:
    raise ValueError("dropout_seeds: %d given for %d layers" % (
        len(dropout_seeds), config.num_hidden_layers))
  batch_size, seq_length, input_width = layers.get_shape_list(input_tensor, expected_rank=3)
  if input_width != config.hidden_size:
    raise ValueError("The width of the input tensor (%d) != hidden size (%d)" %
                     (input_width, config.hidden_size))
  act_fn = layers.get_activation(config.hidden_act)
  prev_output = layers.reshape_to_matrix(input_tensor)
  all_layer_outputs, all_scores = [], []
  for layer_idx in range(config.num_hidden_layers):
    scope_name = "layer_%d" % layer_idx
    seed = None if dropout_seeds is None else dropout_seeds[layer_idx]
    if recompute:
      prev_output = _recomputed_layer(scope_name, prev_output, mask, batch_size, seq_length,
                                      config, act_fn, seed)
    else:
      with tf.variable_scope(scope_name):
        prev_output, scores = transformer_layer(prev_output, mask, batch_size, seq_length,
                                                config, act_fn, seed, return_scores=True)
      all_scores.append(scores)
    all_layer_outputs.append(
        layers.reshape_from_matrix(prev_output, [batch_size, seq_length, input_width]))
  return (all_layer_outputs, all_scores) if return_scores else all_layer_outputs
