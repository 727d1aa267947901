"""XLA's environment variables, set before TensorFlow is imported. The one writer of TF_XLA_FLAGS.

TensorFlow parses TF_XLA_FLAGS (the tf_xla_* JIT flags) and XLA_FLAGS (XLA's DebugOptions, e.g.
--xla_gpu_cuda_data_dir) once per process, no later than its first device query / compile, so a
value set afterwards is silently ignored. run_pretraining.main and the doctor call `prepare`
before they import TensorFlow. Flags, as NVIDIA's run_pretraining sets them in main():
  TF_XLA_FLAGS --tf_xla_enable_lazy_compilation=false  lazy compilation fragments GPU memory
                                                        for BERT (OOM);
  TF_XLA_FLAGS --tf_xla_cpu_global_jit                  hosts without an NVIDIA GPU only: without
                                                        it global_jit_level ON_1 compiles nothing
                                                        on CPU devices.
and, on GPU hosts with pip CUDA (tensorflow[and-cuda]):
  XLA_FLAGS --xla_gpu_cuda_data_dir=<site-packages>/nvidia/cuda_nvcc
      TF 2.15 looks for nvvm/libdevice/libdevice.10.bc and bin/ptxas relative to its own .so and
      /usr/local/cuda, and aborts an XLA GPU compile (`libdevice.10.bc: Not a directory`) when
      they are not there; the nvidia-cuda-nvcc-cu12 wheel ships both.
"""
import os
import re
import shutil
import subprocess
import sys

LAZY_COMPILATION_OFF = "--tf_xla_enable_lazy_compilation=false"
CPU_GLOBAL_JIT = "--tf_xla_cpu_global_jit"
CUDA_DATA_DIR_FLAG = "--xla_gpu_cuda_data_dir"
LIBDEVICE = os.path.join("nvvm", "libdevice", "libdevice.10.bc")
PTXAS = os.path.join("bin", "ptxas")
NVCC_WHEEL_DIR = os.path.join("nvidia", "cuda_nvcc")


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


def is_cuda_data_dir(path):
  """True when `path` holds what XLA's GPU backend loads: nvvm/libdevice/libdevice.10.bc and an
  executable bin/ptxas."""
  ptxas = os.path.join(path, PTXAS)
  return os.path.isfile(os.path.join(path, LIBDEVICE)) and os.access(ptxas, os.X_OK)


def find_cuda_data_dir(search_path=None):
  """The first `<entry>/nvidia/cuda_nvcc` on search_path (default sys.path) that is a CUDA data
  dir (see is_cuda_data_dir): the nvidia-cuda-nvcc-cu12 wheel of tensorflow[and-cuda]. None if
  there is none (tensorflow-cpu venvs, or a system CUDA install)."""
  for entry in sys.path if search_path is None else search_path:
    candidate = os.path.join(entry or os.getcwd(), NVCC_WHEEL_DIR)
    if is_cuda_data_dir(candidate):
      return os.path.abspath(candidate)
  return None


def ptxas_version(cuda_data_dir):
  """'12.2' from `<cuda_data_dir>/bin/ptxas --version` (None when it does not run)."""
  try:
    out = subprocess.run([os.path.join(cuda_data_dir, PTXAS), "--version"], capture_output=True,
                         text=True, timeout=60, check=True).stdout
  except (OSError, subprocess.SubprocessError):
    return None
  match = re.search(r"release (\d+\.\d+)", out)
  return match.group(1) if match else None


def _append_flags(environ, name, flags):
  """Appends each of `flags` to environ[name] unless an entry with the same --key is present."""
  current = environ.get(name, "").split()
  keys = {entry.split("=", 1)[0] for entry in current}
  for flag in flags:
    if flag.split("=", 1)[0] not in keys:
      current.append(flag)
  if current:
    environ[name] = " ".join(current)


def prepare(use_xla, environ=None, gpu_host=None, cuda_data_dir=None):
  """Sets TF_XLA_FLAGS / XLA_FLAGS in environ (default os.environ) for this host, keeping what the
  user set (a user's own --xla_gpu_cuda_data_dir wins). Returns environ["TF_XLA_FLAGS"] or "".

  gpu_host: default has_nvidia_gpu(). cuda_data_dir: default find_cuda_data_dir() on GPU hosts.
  """
  environ = os.environ if environ is None else environ
  gpu_host = has_nvidia_gpu() if gpu_host is None else gpu_host
  _append_flags(environ, "TF_XLA_FLAGS", xla_flags(use_xla, gpu_host))
  if gpu_host:
    cuda_data_dir = cuda_data_dir or find_cuda_data_dir()
    if cuda_data_dir:
      _append_flags(environ, "XLA_FLAGS", ["%s=%s" % (CUDA_DATA_DIR_FLAG, cuda_data_dir)])
  return environ.get("TF_XLA_FLAGS", "")
