"""tf2onnx's graph of bert_fin's model rewritten into onnxruntime's fused operators.

tf2onnx turns each TensorFlow op into ONNX ops one for one, and onnxruntime's own graph
optimizations recognise none of bert_fin's patterns, so the exported graph runs as some 300
small ops. `rewrite(model, num_heads)` replaces, in place:

  layer norm   ReduceMean (or GlobalAveragePool over a [B, S, H] tensor) of x, of (x - mean)^2,
               Sqrt(var + eps), Reciprocal, * gamma, x * scale + (beta - mean * scale)
               -> LayerNormalization(x, gamma, beta; axis -1, epsilon) (ONNX opset 17);
  GELU         google's tanh form 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x x x)))
               -> com.microsoft FastGelu(x) (FastGelu(matmul, bias) when x adds a bias);
  attention    x [B*S, H] @ Wq, Wk, Wv (+ biases), split into heads, Q K^T * scale + the mask
               of the mask's lengths, Softmax, @ V, heads joined
               -> Reshape [B, S, H], com.microsoft Attention(x, [Wq Wk Wv], [bq bk bv],
               mask_index) with mask_index int32 [B] = the input_mask's row sums (bert_fin's model
               reads its length from them: restored_model.features_of), Reshape [B*S, H].

A pattern that does not match exactly is left as it is (counted as not fused), so the rewritten
graph computes what the original does; tests/test_onnx_graph.py checks its outputs against the
unrewritten graph's. Nodes and initializers no longer used are dropped, and the nodes re-sorted.
"""
import collections

import numpy as np
import onnx
from onnx import helper
from onnx import numpy_helper

MS_DOMAIN = "com.microsoft"
MIN_OPSET = 17  # LayerNormalization
MASK_INPUT = "input_mask"  # restored_model.INPUT_NAMES' mask


class Graph(object):
  """Lookups over an onnx GraphProto: which node makes a tensor, the constants."""

  def __init__(self, graph):
    self.graph = graph
    self.constants = {i.name: i for i in graph.initializer}
    self.counter = 0
    self.reindex()

  def reindex(self):
    """Maps each tensor to the node making it (again, after nodes were added)."""
    self.producer = {out: node for node in self.graph.node for out in node.output}

  def node_of(self, name, op_type):
    """The node making tensor `name` if its op is `op_type` (str or tuple), else None."""
    node = self.producer.get(name)
    types = (op_type,) if isinstance(op_type, str) else op_type
    return node if node is not None and node.op_type in types else None

  def constant(self, name):
    """numpy value of an initializer or Constant node's output, else None."""
    if name in self.constants:
      return numpy_helper.to_array(self.constants[name])
    node = self.node_of(name, "Constant")
    if node is not None and node.attribute and node.attribute[0].name == "value":
      return numpy_helper.to_array(node.attribute[0].t)
    return None

  def scalar(self, name):
    """float of a one-element constant, else None (a weight is not read to find out)."""
    if name in self.constants and np.prod(self.constants[name].dims) != 1:
      return None
    value = self.constant(name)
    return float(value) if value is not None and value.size == 1 else None

  def split_scalar(self, node, op_type):
    """(scalar, other input) of a binary `op_type` node with one scalar constant input."""
    if node is None or node.op_type != op_type or len(node.input) != 2:
      return None, None
    for i in (0, 1):
      value = self.scalar(node.input[i])
      if value is not None:
        return value, node.input[1 - i]
    return None, None

  def add_constant(self, value, hint):
    """The name of a new initializer holding numpy `value`."""
    self.counter += 1
    name = "%s__fused_%d" % (hint, self.counter)
    tensor = numpy_helper.from_array(np.asarray(value), name)
    self.graph.initializer.append(tensor)
    self.constants[name] = tensor
    return name

  def fresh(self, hint):
    """A tensor or node name not in the graph."""
    self.counter += 1
    return "%s__fused_%d" % (hint, self.counter)


def _attribute(node, name, default=None):
  for a in node.attribute:
    if a.name == name:
      return helper.get_attribute_value(a)
  return default


def _other(node, name):
  """The input of binary `node` that is not `name` (None if `name` is not one of them)."""
  if len(node.input) != 2 or name not in node.input:
    return None
  return node.input[1] if node.input[0] == name else node.input[0]


def _mean_of(g, name, x, rank):
  """Whether tensor `name` is the mean of `x` (of rank `rank`, None: unknown) over its last
  axis, keeping it."""
  node = g.node_of(name, ("ReduceMean", "GlobalAveragePool"))
  if node is None or node.input[0] != x:
    return False
  if node.op_type == "GlobalAveragePool":  # the mean over every axis after the second
    return rank == 3
  axes = list(_attribute(node, "axes", []) or [])
  return _attribute(node, "keepdims", 1) == 1 and len(node.input) == 1 and (
      axes == [-1] or (rank is not None and axes == [rank - 1]))


def _match_layer_norm(g, root, ranks):
  """(x, gamma or None, beta or None, epsilon) of a layer norm ending at Add `root`, else None."""
  for i in (0, 1):
    scaled, shift = g.node_of(root.input[i], "Mul"), g.producer.get(root.input[1 - i])
    if scaled is None or shift is None:
      continue
    if shift.op_type == "Neg":
      beta, mean_scaled = None, shift.input[0]
    elif shift.op_type == "Sub" and g.constant(shift.input[0]) is not None:
      beta, mean_scaled = shift.input[0], shift.input[1]
    else:
      continue
    mean_node = g.node_of(mean_scaled, "Mul")
    if mean_node is None:
      continue
    for x, scale in (scaled.input, scaled.input[::-1]):
      if scale not in mean_node.input:
        continue
      mean = _other(mean_node, scale)
      found = _match_scale(g, scale, x, mean, ranks.get(x)) if mean else None
      if found and _mean_of(g, mean, x, ranks.get(x)):
        return (x,) + found[:1] + (beta,) + found[1:]
  return None


def _match_scale(g, scale, x, mean, rank):
  """(gamma or None, epsilon) of scale = gamma / sqrt(mean((x - mean)^2) + eps), else None."""
  node = g.producer.get(scale)
  gamma = None
  if node is not None and node.op_type == "Mul":
    for i in (0, 1):
      if g.constant(node.input[i]) is not None:
        gamma, node = node.input[i], g.producer.get(node.input[1 - i])
        break
  if node is None or node.op_type != "Reciprocal":
    return None
  root = g.node_of(node.input[0], "Sqrt")
  epsilon, variance = g.split_scalar(g.node_of(root.input[0], "Add") if root else None, "Add")
  if epsilon is None:
    return None
  var_node = g.node_of(variance, ("ReduceMean", "GlobalAveragePool"))
  square = g.node_of(var_node.input[0], "Mul") if var_node is not None else None
  if square is None or square.input[0] != square.input[1]:
    return None
  diff = g.node_of(square.input[0], "Sub")
  if diff is None or list(diff.input) != [x, mean] or not _mean_of(g, variance, var_node.input[0],
                                                                   rank):
    return None
  return gamma, epsilon


def fuse_layer_norms(g, ranks):
  """Each layer norm -> LayerNormalization; returns how many."""
  count = 0
  for root in [n for n in g.graph.node if n.op_type == "Add"]:
    found = _match_layer_norm(g, root, ranks)
    if found is None:
      continue
    x, gamma, beta, epsilon = found
    width = g.constant(gamma).shape[-1] if gamma else None
    if width is None:
      continue  # the width comes from gamma; a graph without one keeps its ops
    beta = beta or g.add_constant(np.zeros([width], np.float32), "beta")
    g.graph.node.append(helper.make_node(
        "LayerNormalization", [x, gamma, beta], [root.output[0]], g.fresh("LayerNorm"),
        axis=-1, epsilon=epsilon))
    root.output[0] = g.fresh("dead")
    count += 1
  return count


GELU_CONSTANTS = (0.5, 1.0, float(np.sqrt(2.0 / np.pi)), 0.044715)


def _match_gelu(g, root):
  """x of x * 0.5 (1 + tanh(c (x + 0.044715 x x x))) ending at Mul `root`, else None."""
  for x, half in (root.input, root.input[::-1]):
    value, one_plus = g.split_scalar(g.producer.get(half), "Mul")
    if not _close(value, GELU_CONSTANTS[0]):
      continue
    value, tanh = g.split_scalar(g.producer.get(one_plus), "Add")
    tanh_node = g.node_of(tanh, "Tanh") if _close(value, 1.0) else None
    value, inner = g.split_scalar(g.producer.get(tanh_node.input[0]) if tanh_node else None,
                                  "Mul")
    inner_node = g.node_of(inner, "Add") if _close(value, GELU_CONSTANTS[2]) else None
    if inner_node is None or x not in inner_node.input:
      continue
    cube = g.node_of(_other(inner_node, x), "Mul")
    if cube is not None and _is_cube_term(g, cube, x):
      return x
  return None


def _is_cube_term(g, node, x):
  """Whether `node` is (x * x) * (0.044715 * x) in either order."""
  for square, scaled in (node.input, node.input[::-1]):
    square_node = g.node_of(square, "Mul")
    value, other = g.split_scalar(g.producer.get(scaled), "Mul")
    if (square_node is not None and list(square_node.input) == [x, x] and other == x
        and _close(value, GELU_CONSTANTS[3])):
      return True
  return False


def _close(value, expected):
  """Whether a float32 constant is `expected` (None: no constant)."""
  return value is not None and abs(value - expected) <= 1e-6 * max(1.0, abs(expected))


def _bias_split(g, x):
  """(input, bias) when x = input + a 1-D constant bias, else (x, None)."""
  node = g.node_of(x, "Add")
  if node is not None:
    for i in (0, 1):
      value = g.constant(node.input[i])
      if value is not None and value.ndim == 1 and g.constant(node.input[1 - i]) is None:
        return node.input[1 - i], node.input[i]
  return x, None


def fuse_gelus(g):
  """Each tanh GELU -> com.microsoft FastGelu; returns how many."""
  count = 0
  for root in [n for n in g.graph.node if n.op_type == "Mul"]:
    x = _match_gelu(g, root)
    if x is None:
      continue
    source, bias = _bias_split(g, x)
    g.graph.node.append(helper.make_node(
        "FastGelu", [source] + ([bias] if bias else []), [root.output[0]], g.fresh("FastGelu"),
        domain=MS_DOMAIN))
    root.output[0] = g.fresh("dead")
    count += 1
  return count


def _heads_of(g, name, perm):
  """(x, weight, bias or None) of Transpose(perm)(Reshape(x @ weight [+ bias])), else None."""
  node = g.node_of(name, "Transpose")
  if node is None or list(_attribute(node, "perm", [])) != perm:
    return None
  reshape = g.node_of(node.input[0], "Reshape")
  if reshape is None:
    return None
  projected, bias = _bias_split(g, reshape.input[0])
  matmul = g.node_of(projected, "MatMul")
  if matmul is None or g.constant(matmul.input[1]) is None:
    return None
  return matmul.input[0], matmul.input[1], bias


def _match_attention(g, root):
  """(x, [(weight, bias)] of q, k, v, scale, mask) of the attention ending at Reshape `root`."""
  joined = g.node_of(root.input[0], "Transpose")
  if joined is None or list(_attribute(joined, "perm", [])) != [0, 2, 1, 3]:
    return None
  context = g.node_of(joined.input[0], "MatMul")
  softmax = g.node_of(context.input[0], "Softmax") if context is not None else None
  if softmax is None or _attribute(softmax, "axis", -1) not in (-1, 3):
    return None
  masked = g.node_of(softmax.input[0], "Add")
  if masked is None:
    return None
  for scaled_name in masked.input:
    scale, scores = g.split_scalar(g.producer.get(scaled_name), "Mul")
    scores_node = g.node_of(scores, "MatMul") if scale is not None else None
    if scores_node is None:
      continue
    parts = [_heads_of(g, scores_node.input[0], [0, 2, 1, 3]),
             _heads_of(g, scores_node.input[1], [0, 2, 3, 1]),
             _heads_of(g, context.input[1], [0, 2, 1, 3])]
    if any(p is None for p in parts) or len({p[0] for p in parts}) != 1:
      return None
    return parts[0][0], [p[1:] for p in parts], scale, _other(masked, scaled_name)
  return None


def _inputs_reached(g, name):
  """The graph inputs tensor `name` is computed from."""
  inputs, seen, stack = set(i.name for i in g.graph.input), set(), [name]
  reached = set()
  while stack:
    tensor = stack.pop()
    if tensor in seen:
      continue
    seen.add(tensor)
    if tensor in inputs:
      reached.add(tensor)
    node = g.producer.get(tensor)
    if node is not None:
      stack.extend(node.input)
  return reached


def fuse_attentions(g, num_heads, seq_length):
  """Each self-attention -> com.microsoft Attention over [B, S, H]; returns how many."""
  count, lengths = 0, None
  for root in [n for n in g.graph.node if n.op_type == "Reshape"]:
    found = _match_attention(g, root)
    if found is None or _inputs_reached(g, found[3]) != {MASK_INPUT}:
      continue
    x, projections, scale, _ = found
    weights = [g.constant(w) for w, _ in projections]
    width = weights[0].shape[0]
    if any(w.shape != (width, width) for w in weights) or width % num_heads:
      continue
    if lengths is None:
      lengths = _mask_lengths(g)
    biases = [g.constant(b) if b else np.zeros([width], np.float32) for _, b in projections]
    packed = g.add_constant(np.concatenate(weights, axis=1).astype(np.float32), "qkv_weight")
    bias = g.add_constant(np.concatenate(biases).astype(np.float32), "qkv_bias")
    x3 = g.fresh("attention_input")
    out3 = g.fresh("attention_output")
    g.graph.node.extend([
        helper.make_node("Reshape", [x, g.add_constant(np.array([-1, seq_length, width],
                                                               np.int64), "shape")],
                         [x3], g.fresh("Reshape")),
        helper.make_node("Attention", [x3, packed, bias, lengths], [out3],
                         g.fresh("Attention"), domain=MS_DOMAIN, num_heads=num_heads,
                         scale=float(scale)),
        helper.make_node("Reshape", [out3, g.add_constant(np.array([-1, width], np.int64),
                                                          "shape")],
                         [root.output[0]], g.fresh("Reshape"))])
    root.output[0] = g.fresh("dead")
    count += 1
  return count


def _mask_lengths(g):
  """The int32 [B] tensor of the input_mask's row sums (a new ReduceSum node)."""
  name = g.fresh("mask_lengths")
  g.graph.node.append(helper.make_node(
      "ReduceSum", [MASK_INPUT, g.add_constant(np.array([1], np.int64), "axes")], [name],
      g.fresh("ReduceSum"), keepdims=0))
  return name


def prune_and_sort(graph):
  """Drops nodes no graph output needs and initializers no node reads; sorts the nodes so
  each comes after the makers of its inputs."""
  producer = {out: node for node in graph.node for out in node.output}
  needed, stack = set(), [o.name for o in graph.output]
  order = []
  while stack:  # depth-first post-order: a node after everything it reads
    item = stack.pop()
    if isinstance(item, tuple):
      order.append(item[1])
      continue
    node = producer.get(item)
    if node is None or id(node) in needed:
      continue
    needed.add(id(node))
    stack.append(("done", node))
    stack.extend(reversed([i for i in node.input if i]))
  used = {i for node in order for i in node.input}
  kept_init = [i for i in graph.initializer if i.name in used]
  graph.ClearField("node")
  graph.node.extend(order)
  graph.ClearField("initializer")
  graph.initializer.extend(kept_init)


def _ranks(model):
  """{tensor: rank} of the tensors onnx's shape inference knows."""
  inferred = onnx.shape_inference.infer_shapes(model)
  values = list(inferred.graph.value_info) + list(inferred.graph.input)
  return {v.name: len(v.type.tensor_type.shape.dim) for v in values
          if v.type.tensor_type.HasField("shape")}


def seq_length_of(graph):
  """The static sequence length of the graph's input_mask [B, S], else None."""
  for i in graph.input:
    if i.name == MASK_INPUT:
      dims = i.type.tensor_type.shape.dim
      return dims[1].dim_value if len(dims) == 2 and dims[1].dim_value else None
  return None


def rewrite(model, num_heads):
  """Fuses model's layer norms, GELUs and attentions in place (module docstring).

  Args:
    model: onnx ModelProto of tf2onnx's conversion of the ids graph (inputs input_ids,
      input_mask, segment_ids int32 [B, S] with a static S), opset >= MIN_OPSET.
    num_heads: the model's attention heads (bert_config num_attention_heads).

  Returns:
    {"LayerNormalization": n, "FastGelu": n, "Attention": n}: the nodes made.

  Raises:
    ValueError: the model's opset is below MIN_OPSET.
  """
  opset = max([o.version for o in model.opset_import if o.domain in ("", "ai.onnx")] or [0])
  if opset < MIN_OPSET:
    raise ValueError("an ONNX model of opset %d: the rewrite needs opset %d (LayerNormalization)"
                     % (opset, MIN_OPSET))
  g = Graph(model.graph)
  counts = collections.OrderedDict()
  counts["LayerNormalization"] = fuse_layer_norms(g, _ranks(model))
  g.reindex()
  counts["FastGelu"] = fuse_gelus(g)
  g.reindex()
  seq_length = seq_length_of(model.graph)
  counts["Attention"] = fuse_attentions(g, num_heads, seq_length) if seq_length else 0
  prune_and_sort(model.graph)
  if not any(o.domain == MS_DOMAIN for o in model.opset_import):
    model.opset_import.append(helper.make_opsetid(MS_DOMAIN, 1))
  return counts
