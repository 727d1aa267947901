"""Grappler's auto mixed precision (--amp on GPUs) over the real training graph, simulated on CPU.

TF_AUTO_MIXED_PRECISION_GRAPH_REWRITE_SIMULATE_GPU=1 makes the GPU-mode AMP pass run without a
GPU; it is read when TensorFlow initializes, so the graphs are built and rewritten in a fresh
process (tests/fixtures/training/amp_rewrite.py), all four configurations in one (~20 s).
Not the CPU AMP mode (auto_mixed_precision_cpu): it converts the accumulation adds, a GPU does not.

What the simulation cannot show (a tensorflow-cpu cluster reports no CUDA version): BatchMatMul
(attention scores/context, allowed from CUDA 9.1) and the infer-list ops (BiasAdd, GELU's Mul/Tanh)
stay fp32 here; on a GPU they follow the matmuls. The structural GELU check (no Pow) stands in.
"""
import json
import os
import subprocess
import sys

import pytest

from helpers import TRAINING_FIXTURES

SCRIPT = os.path.join(TRAINING_FIXTURES, "amp_rewrite.py")
CONFIGS = ("1:lamb", "2:lamb", "1:adam", "2:adam")


@pytest.fixture(scope="module")
def rewritten():
  env = dict(os.environ, TF_AUTO_MIXED_PRECISION_GRAPH_REWRITE_SIMULATE_GPU="1",
             TF_CPP_MIN_LOG_LEVEL="2", CUDA_VISIBLE_DEVICES="")
  proc = subprocess.run([sys.executable, SCRIPT] + list(CONFIGS), capture_output=True, text=True,
                        timeout=600, env=env)
  assert proc.returncode == 0, proc.stderr[-3000:]
  results = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
  return {r["config"]: r for r in results}


@pytest.mark.parametrize("config", CONFIGS)
def test_matmuls_fp16_and_nothing_of_the_update_in_fp16(rewritten, config):
  result = rewritten[config]
  matmuls = result["matmuls"]
  assert len(matmuls.get("float16", [])) >= 40, matmuls.keys()  # 2 layers + heads, fwd + bwd
  fp32_dense = [n for n in matmuls.get("float32", []) if "/self/MatMul" not in n]
  assert fp32_dense == []  # every dense-layer matmul, forward and backward (BatchMatMul: above)
  # loss scale, unscale, finite check, clipping, LAMB/Adam, accumulation: all fp32
  assert result["half_nodes"] == []
  assert result["model_half"] > 100
  assert result["pow_nodes"] == []  # GELU's cube as products: not on AMP's deny list
