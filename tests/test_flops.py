"""Model FLOPs against a hand count and against the matmuls of the real graph; peak FLOP/s."""
import os

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np
import pytest
import tensorflow.compat.v1 as tf

from bert_fin import modeling
from bert_fin.records import schema
from bert_fin.training.monitor import flops
from bert_fin.training.graph import losses as losses_lib


# Graph mode per test (tests/conftest.py), eager stays on for the rest of the suite.
pytestmark = pytest.mark.usefixtures("fresh_graph")



TINY = dict(vocab_size=30, hidden_size=8, num_hidden_layers=2, num_attention_heads=2,
            intermediate_size=16, max_position_embeddings=16, type_vocab_size=2)
SEQ_LEN, MAX_PREDICTIONS = 5, 2


def test_model_flops_match_a_hand_count_for_a_tiny_config():
  config = modeling.BertConfig(**TINY)
  s, h, i, v, p, layers = SEQ_LEN, 8, 16, 30, MAX_PREDICTIONS, 2
  per_layer = (3 * (2 * s * h * h)     # Q, K, V projections
               + 2 * s * s * h         # scores Q K^T over all heads
               + 2 * s * s * h         # context probs V
               + 2 * s * h * h         # attention output projection
               + 2 * s * h * i         # intermediate
               + 2 * s * i * h)        # output
  mlm = 2 * p * h * h + 2 * p * h * v  # transform + vocab projection on the P masked positions
  nsp = 2 * h * h + 2 * h * 2          # pooler + 2-way classifier
  assert per_layer == 5920 and mlm == 1216 and nsp == 160  # the arithmetic above, spelled out
  bert = flops.model_flops_per_sequence(config, s, p, "bert")
  roberta = flops.model_flops_per_sequence(config, s, p, "roberta")
  assert bert == 3 * (layers * per_layer + mlm + nsp)
  assert roberta == 3 * (layers * per_layer + mlm)
  # Scaling: attention is quadratic in seq_len, the rest linear; the heads ignore seq_len.
  double = flops.encoder_flops(config, 2 * s)
  assert double == layers * (2 * (8 * s * h * h + 4 * s * h * i) + 4 * (4 * s * s * h))


def test_config_as_dict_and_bad_arguments():
  assert flops.model_flops_per_sequence(TINY, SEQ_LEN, MAX_PREDICTIONS, "bert") == \
      flops.model_flops_per_sequence(modeling.BertConfig(**TINY), SEQ_LEN, MAX_PREDICTIONS, "bert")
  with pytest.raises(ValueError, match="objective"):
    flops.model_flops_per_sequence(TINY, SEQ_LEN, MAX_PREDICTIONS, "electra")
  with pytest.raises(ValueError, match="seq_len"):
    flops.model_flops_per_sequence(TINY, 0, MAX_PREDICTIONS, "bert")
  with pytest.raises(ValueError, match="hidden_size"):
    flops.model_flops_per_sequence(dict(TINY, hidden_size=None), SEQ_LEN, 2, "bert")


_MATMUL_TYPES = ("MatMul", "BatchMatMul", "BatchMatMulV2", "BatchMatMulV3")


def _matmul_flops_on_path(loss, skip_prefix):
  """2 x output elements x contracted dim, summed over the matmuls `loss` depends on."""
  seen, stack, total = set(), [loss.op], 0
  while stack:
    op = stack.pop()
    if op in seen:
      continue
    seen.add(op)
    stack.extend(t.op for t in op.inputs)
    if op.type not in _MATMUL_TYPES or op.name.startswith(skip_prefix):
      continue
    a_shape = op.inputs[0].shape.as_list()
    transposed = op.get_attr("transpose_a" if op.type == "MatMul" else "adj_x")
    contracted = a_shape[-2] if transposed else a_shape[-1]
    total += 2 * int(np.prod(op.outputs[0].shape.as_list())) * contracted
  return total


@pytest.mark.parametrize("objective", ["bert", "roberta"])
def test_model_flops_equal_the_matmuls_of_the_real_pretraining_graph(objective):
  config = modeling.BertConfig(**TINY)
  with tf.Graph().as_default():
    features = {
        schema.MASKED_LM_POSITIONS: tf.constant([[1, 3]], tf.int32),
        schema.MASKED_LM_IDS: tf.constant([[4, 7]], tf.int32),
        schema.MASKED_LM_WEIGHTS: tf.constant([[1.0, 1.0]], tf.float32),
        schema.NEXT_SENTENCE_LABELS: tf.constant([[0]], tf.int32),
    }
    model = modeling.BertModel(config, is_training=False,
                               input_ids=tf.constant([[2, 5, 6, 7, 3]], tf.int32),
                               input_len=tf.constant([SEQ_LEN], tf.int32))
    losses = losses_lib.pretraining_losses(config, model, features, objective=objective)
    # google's token-type embedding is a one-hot matmul: an embedding lookup, counted as free.
    counted = _matmul_flops_on_path(losses["total_loss"], skip_prefix="bert/embeddings")
  assert counted > 0
  assert 3 * counted == flops.model_flops_per_sequence(config, SEQ_LEN, MAX_PREDICTIONS, objective)


CPUINFO = """processor\t: 0
model name\t: Some Xeon
cpu MHz\t\t: 2000.000
flags\t\t: fpu sse sse2 %s

processor\t: 1
model name\t: Some Xeon
cpu MHz\t\t: 3000.000
flags\t\t: fpu sse sse2 %s
"""


@pytest.mark.parametrize("extra_flags,lanes", [("avx avx2 fma avx512f avx512bw", 16),
                                               ("avx avx2 fma", 8), ("avx", 4)])
def test_cpu_peak_is_cores_times_fma_lanes_times_two_times_clock(extra_flags, lanes):
  text = CPUINFO % (extra_flags, extra_flags)
  assert flops.cpu_peak_flops_from_cpuinfo(text, num_cores=2) == pytest.approx(
      2 * lanes * 2 * 2500e6)  # mean clock of the two listed processors


def test_cpu_peak_needs_a_clock():
  with pytest.raises(ValueError, match="peak_tflops"):
    flops.cpu_peak_flops_from_cpuinfo("processor\t: 0\nflags\t: avx2\n", num_cores=1)


def test_cpu_peak_of_this_machine(tmp_path, monkeypatch):
  """The real /proc/cpuinfo gives a physically possible peak for the usable cores (at least SSE at
  0.5 GHz, at most AVX-512 at 6 GHz per core), and the default core count is the affinity set."""
  cores = len(os.sched_getaffinity(0))
  assert cores * 4 * 2 * 0.5e9 <= flops.peak_flops("cpu") <= cores * 16 * 2 * 6e9
  fake = tmp_path / "cpuinfo"
  fake.write_text(CPUINFO % ("avx2 fma", "avx2 fma"))
  assert flops.peak_flops("cpu", cpuinfo_path=str(fake), num_cores=4) == pytest.approx(
      4 * 8 * 2 * 2500e6)
  monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1, 2})
  assert flops.peak_flops("cpu", cpuinfo_path=str(fake)) == pytest.approx(3 * 8 * 2 * 2500e6)


@pytest.mark.parametrize("name,precision,peak", [
    ("Tesla V100-SXM2-16GB", "fp16", 125e12),
    ("Tesla V100-PCIE-32GB", "fp32", 15.7e12),
    ("NVIDIA A100-SXM4-40GB", "fp16", 312e12),
    ("NVIDIA A100 80GB PCIe", "fp32", 19.5e12),
    ("NVIDIA A10", "fp16", 125e12),
    ("NVIDIA H100 80GB HBM3", "fp16", 989.4e12),
    ("NVIDIA H100 PCIe", "fp16", 756e12),
    ("Tesla T4", "fp32", 8.1e12),
    ("NVIDIA GeForce RTX 3090", "fp16", 71e12),
    ("NVIDIA GeForce RTX 4090", "fp32", 82.6e12),
    ("NVIDIA A100-SXM4-80GB", "tf32", 156e12),
    ("NVIDIA A800-SXM4-80GB", "fp16", 312e12),
    ("NVIDIA A800 80GB PCIe", "tf32", 156e12),
    ("NVIDIA H100 NVL", "fp16", 835.5e12),
    ("NVIDIA H100 80GB HBM3", "tf32", 494.7e12),
    ("NVIDIA H800", "fp16", 989.4e12),
    ("NVIDIA H800 PCIe", "tf32", 378e12),
    ("NVIDIA H20", "fp16", 148e12),
    ("NVIDIA H20", "tf32", 74e12),
    ("NVIDIA H200", "fp16", 989.4e12),
    ("NVIDIA H200 NVL", "tf32", 417.5e12),
    ("NVIDIA L40S", "fp16", 362.05e12),
    ("NVIDIA L40", "fp16", 181.05e12),
    ("Tesla V100-SXM2-32GB", "tf32", 15.7e12),  # no TF32 before Ampere
])
def test_gpu_peak_by_device_name(name, precision, peak):
  assert flops.peak_flops("gpu", device_name=name, precision=precision) == peak


def test_unknown_gpu_or_device_asks_for_the_flag():
  with pytest.raises(ValueError, match="peak_tflops"):
    flops.peak_flops("gpu", device_name="NVIDIA A10G")  # not an A10: no guess
  with pytest.raises(ValueError, match="device"):
    flops.peak_flops("tpu")
  assert flops.peak_flops("gpu", override=42e12, device_name="NVIDIA A10G") == 42e12
  with pytest.raises(ValueError, match="override"):
    flops.peak_flops("cpu", override=0)


def test_peak_flops_with_source_names_where_the_figure_comes_from(tmp_path):
  value, source = flops.peak_flops_with_source("gpu", device_name="Tesla V100-SXM2-16GB",
                                               precision="fp16")
  assert value == flops.peak_flops("gpu", device_name="Tesla V100-SXM2-16GB", precision="fp16")
  assert "V100" in source and "fp16" in source
  assert flops.peak_flops_with_source("gpu", override=42e12, device_name="x") == (
      42e12, "--peak_tflops")
  fake = tmp_path / "cpuinfo"
  fake.write_text("processor\t: 0\nflags\t: avx2 fma\ncpu MHz\t\t: 2000.000\n")
  value, source = flops.peak_flops_with_source("cpu", cpuinfo_path=str(fake), num_cores=4)
  assert value == pytest.approx(4 * 8 * 2 * 2e9)
  assert str(fake) in source and "4 cores" in source
