"""serving/onnx_graph.py: tf2onnx's graph of a classifier rewritten into onnxruntime's fused ops
(LayerNormalization, FastGelu, Attention) gives the unrewritten graph's outputs within 1e-5, every
layer's patterns fused; a pattern that differs in one constant is left as it was."""
import collections
import copy

import numpy as np
import onnx
from onnx import helper
from onnx import TensorProto
import onnxruntime
import pytest

from helpers.google_checkpoints import write_google_checkpoint
from helpers import modeling_toys as mt
from helpers import tokenizer_vocab
from bert_fin import tokenization
from bert_fin.finetune.classify import long_text
from bert_fin.serving import classifier
from bert_fin.serving import export
from bert_fin.serving import graph_tokenizer
from bert_fin.serving import onnx_graph

SEQ, LAYERS, LABELS = 16, 2, ["a", "b", "c"]


def _session(model):
  options = onnxruntime.SessionOptions()
  options.intra_op_num_threads = 1
  return onnxruntime.InferenceSession(model.SerializeToString(), options,
                                      providers=["CPUExecutionProvider"])


@pytest.fixture(scope="module")
def converted(tmp_path_factory):
  """(the unrewritten ONNX classifier, its config): random weights, biases, gammas and betas."""
  root = tmp_path_factory.mktemp("onnx_graph")
  config = mt.tiny_config(vocab_size=len(tokenizer_vocab.vocab_tokens()),
                          num_hidden_layers=LAYERS, max_position_embeddings=32)
  shapes = {name: shape for name, shape in mt.google_variable_shapes(config).items()
            if not name.startswith("cls/")}
  shapes.update({"output_weights": [len(LABELS), config.hidden_size],
                 "output_bias": [len(LABELS)]})
  checkpoint = str(root / "model.ckpt-1")
  write_google_checkpoint(checkpoint, shapes, np.random.RandomState(7))
  vocab = tokenization.load_vocab(tokenizer_vocab.write_vocab(root))
  spec = classifier.Spec(config, LABELS, "first", SEQ, long_text.DEFAULT, False, None)
  module = classifier.ClassifierServing(spec, checkpoint,
                                        graph_tokenizer.GraphTokenizer(vocab, True), vocab)
  return export.onnx_model(module, spec.bert_config, fused=False), config


def _inputs(vocab_size, rows=5):
  rng = np.random.RandomState(3)
  lengths = np.array([SEQ, 2, 9, 1, 13])[:rows]
  mask = (np.arange(SEQ)[None, :] < lengths[:, None]).astype(np.int32)
  ids = rng.randint(1, vocab_size, size=[rows, SEQ]).astype(np.int32) * mask
  segments = ((np.arange(SEQ)[None, :] >= lengths[:, None] // 2) * mask).astype(np.int32)
  return {"input_ids": ids, "input_mask": mask, "segment_ids": segments}


@pytest.mark.slow  # a tf2onnx conversion (~8 CPU s); test_export_serving counts the fused ops
def test_the_rewritten_graph_fuses_every_layer_and_gives_the_same_outputs(converted):
  model, config = converted
  fused = copy.deepcopy(model)
  counts = onnx_graph.rewrite(fused, config.num_attention_heads)
  # a layer norm after the embeddings and two a layer; a GELU and an attention a layer
  assert dict(counts) == {"LayerNormalization": 1 + 2 * LAYERS, "FastGelu": LAYERS,
                          "Attention": LAYERS}
  ops = collections.Counter(node.op_type for node in fused.graph.node)
  assert ops["LayerNormalization"] == 1 + 2 * LAYERS and ops["Attention"] == LAYERS
  assert ops["Softmax"] == 1 and ops["Tanh"] == 1  # the probabilities' and the pooler's
  assert ops["ReduceMean"] == ops["Transpose"] == ops["Sqrt"] == 0
  assert len(fused.graph.node) < len(model.graph.node) // 2
  feeds = _inputs(config.vocab_size)
  want = _session(model).run(["logits", "probabilities"], feeds)
  got = _session(fused).run(["logits", "probabilities"], feeds)
  assert np.abs(want[0]).max() > 0.1  # logits that tell a wrong fusion apart
  np.testing.assert_allclose(got[0], want[0], atol=1e-5)
  np.testing.assert_allclose(got[1], want[1], atol=1e-5)
  one_row = {name: value[2:3] for name, value in feeds.items()}  # batch 1, a padded row
  np.testing.assert_allclose(_session(fused).run(["logits"], one_row)[0], want[0][2:3], atol=1e-5)


def _gelu_graph(cube_constant):
  """y = 0.5 x (1 + tanh(sqrt(2/pi) (x + c x x x))) of x float [2, 3], as tf2onnx writes it."""
  def const(name, value):
    return helper.make_tensor(name, TensorProto.FLOAT, [], [value])
  steps = [("Mul", "c3", "x", "cx"), ("Mul", "x", "x", "xx"), ("Mul", "xx", "cx", "cube"),
           ("Add", "x", "cube", "inner"), ("Mul", "k", "inner", "scaled"),
           ("Tanh", "scaled", None, "t"), ("Add", "one", "t", "t1"), ("Mul", "half", "t1", "h"),
           ("Mul", "x", "h", "y")]
  nodes = [helper.make_node(op, [a] + ([b] if b else []), [out]) for op, a, b, out in steps]
  graph = helper.make_graph(
      nodes, "gelu", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
      [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])],
      [const("c3", cube_constant), const("k", float(np.sqrt(2 / np.pi))), const("one", 1.0),
       const("half", 0.5)])
  return helper.make_model(graph, opset_imports=[helper.make_opsetid("", onnx_graph.MIN_OPSET)])


def test_a_gelu_is_fused_and_one_with_another_constant_is_left_alone():
  x = {"x": np.linspace(-4, 4, 6, dtype=np.float32).reshape(2, 3)}
  for constant, fused in ((0.044715, 1), (0.05, 0)):
    model = _gelu_graph(constant)
    want = _session(model).run(["y"], x)[0]
    counts = onnx_graph.rewrite(model, num_heads=1)
    assert counts["FastGelu"] == fused
    assert [n.op_type for n in model.graph.node].count("Tanh") == 1 - fused
    np.testing.assert_allclose(_session(model).run(["y"], x)[0], want, atol=1e-5)
