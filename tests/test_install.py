"""The compiled pieces of `make install` import and are what bert_fin needs.

A build can finish with rc 0 and still leave a module that does not import (a missing header
compiled away, an ABI mismatch with the installed TensorFlow); other test modules skip when DALI or
Horovod is missing, so without this file a broken install would show as skips, not failures. Each
import runs in a fresh interpreter so one broken extension cannot take the others' results down.
"""
import os
import subprocess
import sys

import pytest

# module -> a statement that must run after importing it, checking what bert_fin relies on
COMPILED = {
    "nvidia.dali.plugin.tf": "assert callable(m.DALIDataset)",
    "horovod.tensorflow": "assert m.mpi_built(), 'no MPI controller'; "
                          "assert m.gloo_built(), 'no Gloo controller'",
    "bert_fin.data.kernel._kernel": "assert m.__file__.endswith('.so'), m.__file__",
    # the data tools under mpirun: built against the Open MPI whose mpirun starts the ranks
    "mpi4py.MPI": "assert 'Open MPI' in m.Get_library_version(), m.Get_library_version()",
}


@pytest.mark.parametrize("module", sorted(COMPILED))
def test_compiled_module_imports(module):
  program = "import importlib; m = importlib.import_module(%r); %s" % (module, COMPILED[module])
  result = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True,
                          timeout=300, env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))
  assert result.returncode == 0, "%s is broken in %s (run make install):\n%s" % (
      module, sys.prefix, result.stderr[-2000:])


def test_kernel_is_used_by_the_pipeline():
  """The data pipeline picks the compiled kernel, not its slower pure-Python twin."""
  from bert_fin.data.kernel import dispatch as kernel_dispatch
  assert kernel_dispatch.available(), "bert_fin.data.kernel._kernel is not importable"
  assert kernel_dispatch.resolve("auto") == "c"
