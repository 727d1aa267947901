"""training/xla_env.py: XLA's environment (TF_XLA_FLAGS, XLA_FLAGS) decided before TensorFlow starts.

The directory logic runs on a constructed tree everywhere, and on the real nvidia-cuda-nvcc-cu12
wheel where one is installed (GPU venvs: tensorflow[and-cuda]); the CPU venv has no nvidia wheels.
"""
import glob
import os
import re
import stat

import pytest

from bert_fin.training import xla_env
from helpers import REPO



def make_cuda_tree(root, libdevice=True, ptxas=True, release="12.2"):
  """A fake <site-packages>/nvidia/cuda_nvcc under root; returns the cuda_nvcc path."""
  data_dir = os.path.join(str(root), xla_env.NVCC_WHEEL_DIR)
  os.makedirs(os.path.join(data_dir, "bin"))
  os.makedirs(os.path.join(data_dir, "nvvm", "libdevice"))
  if libdevice:
    with open(os.path.join(data_dir, xla_env.LIBDEVICE), "wb") as f:
      f.write(b"BC\xc0\xde")
  if ptxas:
    path = os.path.join(data_dir, xla_env.PTXAS)
    with open(path, "w") as f:
      f.write("#!/bin/sh\necho 'Cuda compilation tools, release %s, V%s.140'\n" % (release, release))
    os.chmod(path, os.stat(path).st_mode | stat.S_IXUSR)
  return data_dir


def test_finds_the_first_complete_cuda_data_dir_on_the_path(tmp_path):
  no_ptxas = make_cuda_tree(tmp_path / "a", ptxas=False)
  no_libdevice = make_cuda_tree(tmp_path / "b", libdevice=False)
  good = make_cuda_tree(tmp_path / "c", release="12.3")
  assert not xla_env.is_cuda_data_dir(no_ptxas) and not xla_env.is_cuda_data_dir(no_libdevice)
  search = [str(tmp_path / "missing"), str(tmp_path / "a"), str(tmp_path / "b"), str(tmp_path / "c")]
  assert xla_env.find_cuda_data_dir(search) == good
  assert xla_env.find_cuda_data_dir(search[:3]) is None
  assert xla_env.ptxas_version(good) == "12.3"
  assert xla_env.ptxas_version(no_ptxas) is None


def test_real_nvcc_wheel_when_installed():
  """GPU venvs: the wheel TF 2.15 pulls in holds libdevice and a ptxas that runs, CUDA 12."""
  data_dir = xla_env.find_cuda_data_dir()
  if data_dir is None:
    pytest.skip("no nvidia-cuda-nvcc-cu12 wheel in this venv (CPU install)")
  assert os.path.getsize(os.path.join(data_dir, xla_env.LIBDEVICE)) > 100000
  assert xla_env.ptxas_version(data_dir).startswith("12.")


def test_gpu_host_points_xla_at_the_wheel_and_keeps_user_flags(tmp_path):
  data_dir = make_cuda_tree(tmp_path)
  environ = {"XLA_FLAGS": "--xla_dump_to=/tmp/x"}
  xla_env.prepare(True, environ, gpu_host=True, cuda_data_dir=data_dir)
  assert environ["XLA_FLAGS"].split() == ["--xla_dump_to=/tmp/x",
                                          "--xla_gpu_cuda_data_dir=" + data_dir]
  assert environ["TF_XLA_FLAGS"] == xla_env.LAZY_COMPILATION_OFF
  users = {"XLA_FLAGS": "--xla_gpu_cuda_data_dir=/opt/cuda"}  # the user's own choice wins
  xla_env.prepare(False, users, gpu_host=True, cuda_data_dir=data_dir)
  assert users == {"XLA_FLAGS": "--xla_gpu_cuda_data_dir=/opt/cuda"}
  cpu = {}
  xla_env.prepare(True, cpu, gpu_host=False, cuda_data_dir=data_dir)
  assert "XLA_FLAGS" not in cpu  # no GPU backend to point anywhere


# Assignments to the variables in os.environ / a child's env, in any module.
_WRITES = re.compile(r"""environ\[\s*["'](TF_)?XLA_FLAGS["']\s*\]\s*=[^=]"""
                     r"""|(setdefault|putenv|setenv)\(\s*["'](TF_)?XLA_FLAGS"""
                     r"""|\b(TF_)?XLA_FLAGS\s*=[^=]""")


def test_only_xla_env_writes_the_xla_environment():
  """TF reads TF_XLA_FLAGS once: a write anywhere else is too late or a second source of truth."""
  sources = glob.glob(os.path.join(REPO, "bert_fin", "**", "*.py"), recursive=True)
  sources += glob.glob(os.path.join(REPO, "*.py")) + glob.glob(os.path.join(REPO, "tools", "*.py"))
  writers = []
  for path in sources:
    with open(path, encoding="utf-8") as f:
      if _WRITES.search(f.read()):
        writers.append(os.path.relpath(path, REPO))
  assert writers == []  # xla_env.py writes through a variable name, environ[name]
  assert _WRITES.search('os.environ["TF_XLA_FLAGS"] = "x"') and _WRITES.search("env(XLA_FLAGS=1)")
