"""TF_XLA_FLAGS for --use_xla, set before TensorFlow is imported.

TensorFlow parses TF_XLA_FLAGS once per process, no later than its first device query, so a value
set afterwards is silently ignored. run_pretraining.main calls `prepare(use_xla)` before it
imports TensorFlow. Flags, as NVIDIA's run_pretraining sets them in main():
  --tf_xla_enable_lazy_compilation=false  lazy compilation fragments GPU memory for BERT (OOM);
  --tf_xla_cpu_global_jit                 hosts without an NVIDIA GPU only: without it
                                          global_jit_level ON_1 compiles nothing on CPU devices.
"""
import os
import shutil

LAZY_COMPILATION_OFF = "--tf_xla_enable_lazy_compilation=false"
CPU_GLOBAL_JIT = "--tf_xla_cpu_global_jit"


def has_nvidia_gpu():
  """True when this host shows an NVIDIA driver (device node or nvidia-smi) and
  CUDA_VISIBLE_DEVICES does not hide every GPU. Decided without importing TensorFlow."""
  if os.environ.get("CUDA_VISIBLE_DEVICES", None) in ("", "-1"):
    return False
  return os.path.exists("/dev/nvidiactl") or shutil.which("nvidia-smi") is not None


def xla_flags(use_xla, gpu_host):
  """The TF_XLA_FLAGS entries --use_xla needs on this host (empty without XLA)."""
  if not use_xla:
    return []
  return [LAZY_COMPILATION_OFF] + ([] if gpu_host else [CPU_GLOBAL_JIT])


def prepare(use_xla, environ=None, gpu_host=None):
  """Appends the needed flags to environ["TF_XLA_FLAGS"] (keeping the user's); returns its value."""
  environ = os.environ if environ is None else environ
  gpu_host = has_nvidia_gpu() if gpu_host is None else gpu_host
  current = environ.get("TF_XLA_FLAGS", "").split()
  for flag in xla_flags(use_xla, gpu_host):
    if flag not in current:
      current.append(flag)
  if current:
    environ["TF_XLA_FLAGS"] = " ".join(current)
  return environ.get("TF_XLA_FLAGS", "")
