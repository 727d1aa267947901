"""What --amp and --cpu_bf16 really do on this host, said once at start-up.

--amp (NVIDIA's flag) is the grappler `auto_mixed_precision` rewrite: fp16 compute on GPUs. On a
host without a GPU that rewrite does nothing; the dynamic loss scaling of graph/step.py still runs
(harmless, the scale is only multiplied in and out). `precision_notes` says so.

--cpu_bf16 (bert_fin's flag) is oneDNN's bfloat16 auto mixed precision for CPUs with bf16
instructions: the grappler option `auto_mixed_precision_onednn_bfloat16` (TF 2.15's name; the
older `auto_mixed_precision_mkl` is the same rewriter under its deprecated name). Matmuls,
convolutions and their neighbours run in bfloat16, variables and the optimizer stay fp32; bfloat16
has fp32's exponent range, so no loss scaling is needed. It pays only where the CPU has bf16
hardware: AVX512_BF16 or AMX (the `avx512_bf16` / `amx_bf16` flags of /proc/cpuinfo, detected at
run time, never assumed). Elsewhere oneDNN would emulate it, slower than fp32: refused.
"""
import re

from tensorflow.core.protobuf import rewriter_config_pb2

BF16_CPU_FLAGS = ("avx512_bf16", "amx_bf16")  # either makes bf16 matmuls native
BF16_REWRITE_OPTION = "auto_mixed_precision_onednn_bfloat16"


def cpu_flags(cpuinfo_path="/proc/cpuinfo"):
  """The set of CPU feature flags of the first processor in cpuinfo ({} when unreadable)."""
  try:
    with open(cpuinfo_path, encoding="utf-8", errors="replace") as f:
      text = f.read()
  except OSError:
    return set()
  match = re.search(r"^flags\s*:(.*)$", text, re.MULTILINE)
  return set(match.group(1).split()) if match else set()


def bf16_features(flags):
  """The bf16 features among flags (e.g. ['amx_bf16', 'avx512_bf16']); empty: no bf16 here."""
  return sorted(f for f in BF16_CPU_FLAGS if f in flags)


def check_cpu_bf16(use_cpu_bf16, num_gpus, flags):
  """Raises ValueError when --cpu_bf16 cannot mean what it says on this host."""
  if not use_cpu_bf16:
    return
  if num_gpus:
    raise ValueError("--cpu_bf16 is for hosts without a GPU; this one has %d GPU(s): use --amp "
                     "(fp16 on the GPU)" % num_gpus)
  if not bf16_features(flags):
    raise ValueError("--cpu_bf16: this CPU has none of the %s flags in /proc/cpuinfo, so bfloat16 "
                     "would be emulated (slower than fp32); train without --cpu_bf16"
                     % " / ".join(BF16_CPU_FLAGS))


def enable_bf16_rewrite(config):
  """Turns on oneDNN's bfloat16 auto mixed precision in a tf.ConfigProto (in place)."""
  setattr(config.graph_options.rewrite_options, BF16_REWRITE_OPTION,
          rewriter_config_pb2.RewriterConfig.ON)
  return config


def precision_notes(use_amp, use_cpu_bf16, num_gpus, flags):
  """Start-up lines saying which precision the run really computes in."""
  features = bf16_features(flags)
  notes = []
  if use_amp and not num_gpus:
    offer = ("; this CPU has %s: --cpu_bf16 gives bfloat16 mixed precision" % ", ".join(features)
             if features else "; this CPU has no bf16 instructions, so no mixed precision helps")
    notes.append("--amp: fp16 AMP is INACTIVE on this host (no GPU): compute stays fp32, the "
                 "loss scaling still runs and changes nothing" + offer)
  if use_cpu_bf16:
    notes.append("--cpu_bf16: oneDNN bfloat16 auto mixed precision on (%s), fp32 variables"
                 % ", ".join(features))
  return notes
