"""Model FLOPs of one training sequence and the peak FLOP/s of a device, for MFU in the logs.

MFU (model FLOPs utilisation) = model FLOPs actually trained per second / peak FLOP/s. "Model"
FLOPs count the matrix multiplications the model needs (2 FLOPs per multiply-add), independent
of the implementation: no recomputation (--recompute costs more but does not count), no
elementwise work (softmax, GELU, LayerNorm, dropout, bias adds), no padding tricks.
"""
import os
import re
import shutil
import subprocess

from bert_fin.objectives import OBJECTIVES

BACKWARD_FACTOR = 3  # forward + backward = 3 x forward (the backward pass does 2 matmuls per one)

# fp32 lanes of one FMA instruction, by the widest vector extension in /proc/cpuinfo flags.
_CPU_FMA_LANES = (("avx512f", 16), ("avx2", 8), ("fma", 8))
_CPU_SSE_LANES = 4

# Dense (no 2:4 sparsity) peak FLOP/s of one GPU, by precision:
#   "fp16"  tensor cores, fp16 inputs with fp32 accumulation (what --amp runs);
#   "tf32"  tensor cores on fp32 tensors: TF 2.15 enables TF32 by default on Ampere and newer, so a
#           run without --amp is measured against this (the plain fp32 peak reads up to ~8x high);
#           equal to "fp32" on GPUs without TF32 (V100, T4);
#   "fp32"  CUDA cores (TF32 disabled with tf.config.experimental.enable_tensor_float_32_execution).
# Data sheets print the sparse figure for tensor cores: dense is half. Sources: NVIDIA data sheets
# (V100, A100/A800 "A100 Tensor Core GPU", H100 SXM/PCIe/NVL and H800 "H100 Tensor Core GPU",
# H200 SXM/NVL "H200 Tensor Core GPU", L40S and L40 data sheets, A10, T4) and the GeForce Ampere/Ada
# whitepapers (fp16 with fp32 accumulation); H20: NVIDIA's China-market spec sheet (FP16 148,
# TF32 74, FP32 44 TFLOPS dense). A800/H800 are A100/H100 with less NVLink: the same compute.
# Matched in order against the device name, so the more specific patterns come first.
_A100 = {"fp16": 312e12, "tf32": 156e12, "fp32": 19.5e12}
_HOPPER_SXM = {"fp16": 989.4e12, "tf32": 494.7e12, "fp32": 66.9e12}
_HOPPER_PCIE = {"fp16": 756e12, "tf32": 378e12, "fp32": 51.2e12}
_HOPPER_NVL = {"fp16": 835.5e12, "tf32": 417.5e12, "fp32": 60e12}
GPU_PEAK_FLOPS = (
    (r"\bV100", {"fp16": 125e12, "tf32": 15.7e12, "fp32": 15.7e12}),
    (r"\bA[18]00\b", _A100),
    (r"\bH[12]00\b.*\bNVL\b", _HOPPER_NVL),
    (r"\bH[18]00\b.*\bPCIe\b", _HOPPER_PCIE),
    (r"\bH[128]00\b", _HOPPER_SXM),  # H100/H800 SXM5 ("NVIDIA H100 80GB HBM3"), H200 SXM
    (r"\bH20\b", {"fp16": 148e12, "tf32": 74e12, "fp32": 44e12}),
    (r"\bL40S\b", {"fp16": 362.05e12, "tf32": 183e12, "fp32": 91.6e12}),
    (r"\bL40\b", {"fp16": 181.05e12, "tf32": 90.5e12, "fp32": 90.5e12}),
    (r"\bA10\b", {"fp16": 125e12, "tf32": 62.5e12, "fp32": 31.2e12}),
    (r"\bT4\b", {"fp16": 65e12, "tf32": 8.1e12, "fp32": 8.1e12}),
    (r"\b3090 Ti\b", {"fp16": 80e12, "tf32": 40e12, "fp32": 40e12}),
    (r"\b3090\b", {"fp16": 71e12, "tf32": 35.6e12, "fp32": 35.6e12}),
    (r"\b4090\b", {"fp16": 165.2e12, "tf32": 82.6e12, "fp32": 82.6e12}),
)
PRECISIONS = ("fp16", "tf32", "fp32")


def _config_value(bert_config, name):
  value = bert_config[name] if isinstance(bert_config, dict) else getattr(bert_config, name)
  if not isinstance(value, int) or value < 1:
    raise ValueError("bert_config.%s must be a positive int, got %r" % (name, value))
  return value


def encoder_flops(bert_config, seq_len):
  """Forward FLOPs of the transformer layers for one sequence of seq_len tokens.

  Per layer, with S = seq_len, H = hidden_size, I = intermediate_size:
    Q, K, V projections   3 x 2 S H H
    attention scores      2 S S H   (all heads together: heads x S x S x H/heads)
    attention context     2 S S H
    output projection     2 S H H
    feed-forward          2 S H I + 2 S I H
  = 8 S H^2 + 4 S^2 H + 4 S H I, times num_hidden_layers. The embedding lookups are gathers: free.
  """
  if not isinstance(seq_len, int) or seq_len < 1:
    raise ValueError("seq_len must be a positive int, got %r" % (seq_len,))
  hidden = _config_value(bert_config, "hidden_size")
  intermediate = _config_value(bert_config, "intermediate_size")
  layers = _config_value(bert_config, "num_hidden_layers")
  s = seq_len
  per_layer = 8 * s * hidden * hidden + 4 * s * s * hidden + 4 * s * hidden * intermediate
  return layers * per_layer


def mlm_head_flops(bert_config, max_predictions):
  """Forward FLOPs of the masked-LM head over the P = max_predictions gathered positions only:
  transform dense 2 P H H + output projection on the (tied) embedding table 2 P H V."""
  if not isinstance(max_predictions, int) or max_predictions < 0:
    raise ValueError("max_predictions must be an int >= 0, got %r" % (max_predictions,))
  hidden = _config_value(bert_config, "hidden_size")
  vocab = _config_value(bert_config, "vocab_size")
  return 2 * max_predictions * hidden * hidden + 2 * max_predictions * hidden * vocab


def nsp_head_flops(bert_config):
  """Forward FLOPs of the pooler on [CLS] (2 H H) and the 2-way NSP classifier (2 H 2)."""
  hidden = _config_value(bert_config, "hidden_size")
  return 2 * hidden * hidden + 2 * hidden * 2


def model_flops_per_sequence(bert_config, seq_len, max_predictions, objective):
  """Training FLOPs (forward + backward) of one sequence.

    3 x [encoder_flops(S) + mlm_head_flops(P) + (nsp_head_flops if objective == "bert")]
      = 3 x [L (8 S H^2 + 4 S^2 H + 4 S H I) + 2 P H (H + V) + (2 H^2 + 4 H)]

  The roberta objective has no NSP loss, so the pooler is not on the training path (TF prunes it).
  Sequences are counted at their padded length seq_len (what the hardware computes); the
  real-token rate is logged separately.

  Args:
    bert_config: BertConfig (or a dict) with hidden_size, intermediate_size, num_hidden_layers,
      vocab_size.
    seq_len: int, max_seq_length of the records.
    max_predictions: int, max_predictions_per_seq of the records.
    objective: "bert" (MLM + NSP) or "roberta" (MLM only).

  Returns:
    int FLOPs.
  """
  if objective not in OBJECTIVES:
    raise ValueError("unknown objective %r: expected one of %s"
                     % (objective, ", ".join(OBJECTIVES)))
  forward = encoder_flops(bert_config, seq_len) + mlm_head_flops(bert_config, max_predictions)
  if objective == "bert":
    forward += nsp_head_flops(bert_config)
  return BACKWARD_FACTOR * forward


def cpu_peak_flops_from_cpuinfo(cpuinfo_text, num_cores):
  """num_cores x FMA lanes x 2 x clock, from the text of /proc/cpuinfo.

  FMA lanes (fp32): 16 with avx512f, 8 with avx2 or fma, else 4 (SSE). Clock: the mean "cpu MHz"
  of the listed processors. This counts ONE FMA unit per core: server cores with two AVX-512 FMA
  ports peak at twice this, so MFU against it is an upper estimate on those.
  """
  if num_cores < 1:
    raise ValueError("num_cores must be >= 1, got %r" % (num_cores,))
  flags = set()
  flags_match = re.search(r"^flags\s*:(.*)$", cpuinfo_text, re.MULTILINE)
  if flags_match:
    flags = set(flags_match.group(1).split())
  lanes = next((width for flag, width in _CPU_FMA_LANES if flag in flags), _CPU_SSE_LANES)
  mhz = [float(x) for x in re.findall(r"^cpu MHz\s*:\s*([0-9.]+)", cpuinfo_text, re.MULTILINE)]
  if not mhz:
    raise ValueError("no 'cpu MHz' line in /proc/cpuinfo: pass the peak explicitly "
                     "(--peak_tflops)")
  clock_hz = sum(mhz) / len(mhz) * 1e6
  return num_cores * lanes * 2 * clock_hz


def gpu_peak_flops(device_name, precision="fp16"):
  """Peak FLOP/s of one GPU looked up from its name (e.g. "Tesla V100-SXM2-16GB"), or None.

  precision: "fp16" (tensor cores, --amp), "tf32" (fp32 graphs on TF 2.15's default) or "fp32".
  """
  if precision not in PRECISIONS:
    raise ValueError("precision must be one of %s, got %r" % (PRECISIONS, precision))
  for pattern, peaks in GPU_PEAK_FLOPS:
    if re.search(pattern, device_name or "", re.IGNORECASE):
      return peaks[precision]
  return None


def detect_gpu_name():
  """Name of GPU 0 from `nvidia-smi --query-gpu=name`, or None when there is none."""
  if not shutil.which("nvidia-smi"):
    return None
  try:
    output = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"],
                            capture_output=True, text=True, timeout=30, check=True).stdout
  except (subprocess.SubprocessError, OSError):
    return None
  names = [line.strip() for line in output.splitlines() if line.strip()]
  return names[0] if names else None


def peak_flops(device="cpu", override=None, device_name=None, precision="fp32",
               cpuinfo_path="/proc/cpuinfo", num_cores=None):
  """Peak FLOP/s of ONE device (one GPU, or this machine's CPU cores), for MFU.

  Args:
    device: "cpu" or "gpu".
    override: FLOP/s (e.g. --peak_tflops * 1e12); when set, returned as is.
    device_name: GPU name; default: detected with nvidia-smi.
    precision: "fp16" (--amp), "tf32" (fp32 graphs, TF32 on) or "fp32"; GPUs only (the CPU peak
      is fp32).
    cpuinfo_path, num_cores: CPU inputs; num_cores defaults to the cores this process may run on.

  The CPU peak is cores x FMA lanes x 2 x clock (see cpu_peak_flops_from_cpuinfo). The GPU peak
  comes from GPU_PEAK_FLOPS by name; an unknown GPU raises ValueError asking for --peak_tflops.
  For several workers the caller multiplies by the number of GPUs (not for processes sharing
  one CPU).
  """
  if override is not None:
    if override <= 0:
      raise ValueError("peak FLOP/s override must be > 0, got %r" % (override,))
    return float(override)
  if device == "cpu":
    with open(cpuinfo_path, encoding="utf-8", errors="replace") as f:
      text = f.read()
    if num_cores is None:
      num_cores = len(os.sched_getaffinity(0))
    return cpu_peak_flops_from_cpuinfo(text, num_cores)
  if device == "gpu":
    name = device_name if device_name is not None else detect_gpu_name()
    if not name:
      raise ValueError("no GPU name (nvidia-smi missing or failed): pass --peak_tflops")
    peak = gpu_peak_flops(name, precision)
    if peak is None:
      raise ValueError("no peak FLOP/s known for GPU %r: pass --peak_tflops (dense %s "
                       "TFLOP/s from its data sheet)" % (name, precision))
    return peak
  raise ValueError("device must be 'cpu' or 'gpu', got %r" % (device,))


def peak_flops_with_source(device="cpu", override=None, device_name=None, precision="fp32",
                           cpuinfo_path="/proc/cpuinfo", num_cores=None):
  """(peak_flops(...) of ONE device, a one-line description of where the figure comes from).

  Same arguments as peak_flops; the description names the flag, the GPU table row or the
  /proc/cpuinfo inputs, so the start-up log says what MFU is measured against.
  """
  value = peak_flops(device, override, device_name, precision, cpuinfo_path, num_cores)
  if override is not None:
    return value, "--peak_tflops"
  if device == "gpu":
    name = device_name if device_name is not None else detect_gpu_name()
    return value, "GPU_PEAK_FLOPS (data sheet) for %r, %s dense" % (name, precision)
  cores = num_cores if num_cores is not None else len(os.sched_getaffinity(0))
  return value, ("%s: %d cores x fp32 FMA lanes x 2 x mean clock (one FMA unit a core)"
                 % (cpuinfo_path, cores))
