"""Environment doctor: `python -m bert_fin.doctor` (console script `bert-fin-doctor`).

Prints one table of what bert_fin needs and whether it works here: Python, TensorFlow and
tf.estimator versions, an XLA JIT compile, GPUs seen by TensorFlow, Horovod's build (frameworks,
controllers, tensor operations, like `horovodrun --check-build`), on hosts with 2+ GPUs a 2-rank
NCCL allreduce under mpirun, DALI + its TF plugin read through run_pretraining's own DALI input_fn
(both probes run bert_fin/doctor_probes.py in child processes), and, where `nvidia-smi` exists,
the GPU topology with a warning when GPUs meant to work together are only connected across PCIe
host bridges or NUMA nodes, and whether the data pipeline's C kernel is built.

Exit code 0 when every required piece works, 1 otherwise; each failing row says what to do.
"""
import collections
import json
import math
import os
import platform
import re
import shutil
import signal
import subprocess
import sysconfig
import sys
import tempfile

OK, WARN, FAIL, INFO = "ok", "WARN", "FAIL", "info"

Row = collections.namedtuple("Row", ["check", "status", "detail", "fix"])

EXPECTED_PYTHON = (3, 11)
CONSTRAINTS_FILE = os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, "requirements",
                                "constraints.txt")


def pinned_version(package):
  """The version requirements/constraints.txt pins for `package` (None when not pinned / not found)."""
  try:
    with open(CONSTRAINTS_FILE, encoding="utf-8") as f:
      for line in f:
        name, sep, version = line.strip().partition("==")
        if sep and name.split("[")[0] == package:
          return version
  except OSError:
    pass
  return None


def pinned_group(group):
  """[(package, version)] of one `# group: NAME` of requirements/constraints.txt ([] if absent)."""
  pins, current = [], None
  try:
    with open(CONSTRAINTS_FILE, encoding="utf-8") as f:
      for line in f:
        line = line.strip()
        if line.startswith("# group:"):
          current = line.split(":", 1)[1].strip()
        elif current == group and "==" in line and not line.startswith("#"):
          pins.append(tuple(line.split("==", 1)))
  except OSError:
    pass
  return pins


EXPECTED_TF = pinned_version("tensorflow-cpu")
EXPECTED_ESTIMATOR = pinned_version("tensorflow-estimator")
INSTALL_HINT = "run `make install` (GPU hosts: `GPU=1 make install`)"

# nvidia-smi topo -m link types, fastest first. SYS and NODE cross PCIe host bridges / NUMA nodes.
SLOW_LINKS = ("SYS", "NODE")


def check_python():
  version = sys.version_info[:3]
  ok = version[:2] == EXPECTED_PYTHON
  return Row("python", OK if ok else FAIL, "%d.%d.%d (%s)" % (version + (sys.executable,)),
             "" if ok else "bert_fin is pinned for Python 3.11: " + INSTALL_HINT)


IMPORT_NAMES = {"beautifulsoup4": "bs4"}  # distribution -> module, where they differ


def check_core_dependencies():
  """One row a package of the constraints' core group: FAIL with the pip command when it cannot
  be imported (instead of a ModuleNotFoundError later), WARN when its version differs."""
  from importlib import metadata  # pylint: disable=import-outside-toplevel
  import importlib  # pylint: disable=import-outside-toplevel
  rows = []
  for package, version in pinned_group("core"):
    module = IMPORT_NAMES.get(package, package.replace("-", "_"))
    fix = "pip install '%s==%s' (or %s)" % (package, version, INSTALL_HINT)
    try:
      importlib.import_module(module)
      found = metadata.version(package)
    except Exception as e:  # pylint: disable=broad-except
      rows.append(Row("  " + package, FAIL, "import %s failed: %s" % (module, e), fix))
      continue
    rows.append(Row("  " + package, OK if found == version else WARN, found,
                    "" if found == version else "expected %s: %s" % (version, fix)))
  return [Row("core packages", OK if all(r.status != FAIL for r in rows) else FAIL,
              "%d pinned in requirements/constraints.txt" % len(rows), "")] + rows


def check_data_kernel():
  """The compiled record kernel of create_pretraining_data's fast mode (WARN: the pure-Python path
  gives the same records, ~10x slower per instance)."""
  try:
    from bert_fin.data.kernel import dispatch as kernel  # pylint: disable=import-outside-toplevel
  except ImportError as e:
    return Row("data kernel (C)", FAIL, "bert_fin.data cannot be imported: %s" % e,
               "install the core packages above: " + INSTALL_HINT)
  if kernel.available():
    return Row("data kernel (C)", OK, "built: fast mode makes records in C", "")
  return Row("data kernel (C)", WARN, "not built (%s): fast mode uses pure Python" %
             kernel.IMPORT_ERROR, "make install (needs gcc and the Python headers)")


def check_tensorflow():
  try:
    import tensorflow as tf
  except Exception as e:  # pylint: disable=broad-except
    return [Row("tensorflow", FAIL, "import failed: %s" % e, INSTALL_HINT)]
  rows = [Row("tensorflow", OK if tf.__version__ == EXPECTED_TF else WARN, tf.__version__,
              "" if tf.__version__ == EXPECTED_TF else "expected %s: %s" % (EXPECTED_TF, INSTALL_HINT))]
  try:
    from importlib import metadata
    version = metadata.version("tensorflow-estimator")
    from tensorflow.compat.v1 import estimator  # noqa: F401  (the API bert_fin uses)
    ok = version == EXPECTED_ESTIMATOR
    rows.append(Row("tf.estimator", OK if ok else WARN, version,
                    "" if ok else "expected %s: %s" % (EXPECTED_ESTIMATOR, INSTALL_HINT)))
  except Exception as e:  # pylint: disable=broad-except
    rows.append(Row("tf.estimator", FAIL, "unavailable: %s" % e,
                    "pip install tensorflow-estimator==%s (%s)" % (EXPECTED_ESTIMATOR, INSTALL_HINT)))
  return rows


_XLA_PROBE = r"""
import tensorflow as tf
@tf.function(jit_compile=True)
def fused(x):  # exp lowers to libdevice's __nv_expf on GPUs: the probe needs libdevice and ptxas
  return tf.reduce_sum(tf.exp(x) * 2.0 + 1.0)
print(float(fused(tf.constant([0.0, 1.0, -1.0]))))
"""


def check_xla():
  """JIT-compiles and runs tf.exp with XLA in a subprocess (a missing libdevice aborts the
  process), its log noise kept out of the report; environment from training/xla_env.py."""
  from bert_fin.training import xla_env  # pylint: disable=import-outside-toplevel
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
  xla_env.prepare(True, env)
  try:
    result = subprocess.run([sys.executable, "-c", _XLA_PROBE], capture_output=True, text=True,
                            timeout=600, env=env)
  except subprocess.TimeoutExpired:
    return Row("XLA JIT", FAIL, "compile timed out", "train without --use_xla")
  expected = sum(2.0 * math.exp(v) + 1.0 for v in (0.0, 1.0, -1.0))
  try:
    value = float(result.stdout.strip().splitlines()[-1])
  except (IndexError, ValueError):
    lines = [l for l in result.stderr.splitlines() if l.strip() and "SetPriority" not in l]
    return Row("XLA JIT", FAIL, "compile failed: %s" % (lines[-1][:160] if lines else
                                                        "exit code %d" % result.returncode),
               "train without --use_xla; GPU hosts: put --xla_gpu_cuda_data_dir=<dir with "
               "nvvm/libdevice and bin/ptxas> in XLA_FLAGS")
  ok = abs(value - expected) < 1e-4
  return Row("XLA JIT", OK if ok else FAIL, "tf.exp compiled and ran (result %.4f)" % value,
             "" if ok else "XLA produced a wrong result; do not use --use_xla")


def check_cuda_versions():
  """TF's build CUDA against the ptxas XLA will use and the NCCL / CUDA runtime wheels."""
  try:
    import tensorflow as tf  # pylint: disable=import-outside-toplevel
    from importlib import metadata  # pylint: disable=import-outside-toplevel
    from bert_fin.training import xla_env  # pylint: disable=import-outside-toplevel
    build = tf.sysconfig.get_build_info()
  except Exception as e:  # pylint: disable=broad-except
    return Row("CUDA versions", WARN, "unknown: %s" % e, "")
  if not build.get("is_cuda_build"):
    return Row("CUDA versions", INFO, "CPU build of TensorFlow: no CUDA", "")
  wanted = build.get("cuda_version", "?")
  data_dir = xla_env.find_cuda_data_dir()
  ptxas = xla_env.ptxas_version(data_dir) if data_dir else None
  found = {}
  for package in ("nvidia-cuda-runtime-cu12", "nvidia-nccl-cu12"):
    try:
      found[package] = metadata.version(package)
    except metadata.PackageNotFoundError:
      found[package] = None
  detail = "TF built for CUDA %s, cuDNN %s; ptxas %s; cudart %s; NCCL %s" % (
      wanted, build.get("cudnn_version", "?"), ptxas, found["nvidia-cuda-runtime-cu12"],
      found["nvidia-nccl-cu12"])
  mismatch = ptxas is None or not ptxas.startswith(wanted.split(".")[0] + ".") or not (
      found["nvidia-cuda-runtime-cu12"] or "").startswith(wanted)
  return Row("CUDA versions", WARN if mismatch else OK, detail,
             "reinstall: GPU=1 make install (tensorflow[and-cuda] pins the matching wheels)"
             if mismatch else "")


def check_gpus():
  try:
    import tensorflow as tf
    gpus = tf.config.list_physical_devices("GPU")
  except Exception as e:  # pylint: disable=broad-except
    return Row("GPUs (TensorFlow)", WARN, "could not list: %s" % e, ""), 0
  if not gpus:
    return Row("GPUs (TensorFlow)", INFO, "none: training runs on CPU", ""), 0
  return Row("GPUs (TensorFlow)", OK, "%d: %s" % (len(gpus), ", ".join(g.name for g in gpus)), ""), len(gpus)


def check_horovod(num_gpus):
  """Horovod's build, like `horovodrun --check-build`: frameworks, controllers, tensor operations."""
  try:
    import horovod.tensorflow as hvd
  except Exception as e:  # pylint: disable=broad-except
    return [Row("horovod", FAIL, "import failed: %s" % str(e).splitlines()[0],
                "rebuild: pip uninstall -y horovod && " + INSTALL_HINT)]
  import horovod
  frameworks = horovod_frameworks(os.path.dirname(horovod.__file__))
  controllers = [name for name, built in (("MPI", hvd.mpi_built()), ("Gloo", hvd.gloo_built())) if built]
  operations = [name for name, built in (("NCCL", hvd.nccl_built()), ("DDL", hvd.ddl_built()),
                                         ("CCL", hvd.ccl_built()), ("MPI", hvd.mpi_built()),
                                         ("Gloo", hvd.gloo_built())) if built]
  rows = [Row("horovod", OK, horovod.__version__, "")]
  rows.append(Row("  frameworks", OK if "tensorflow" in frameworks else FAIL, ", ".join(frameworks) or "none",
                  "" if "tensorflow" in frameworks else "rebuild with HOROVOD_WITH_TENSORFLOW=1: " + INSTALL_HINT))
  missing = {"MPI", "Gloo"} - set(controllers)
  rows.append(Row("  controllers", FAIL if missing else OK, ", ".join(controllers) or "none",
                  "rebuild with HOROVOD_WITH_MPI=1 HOROVOD_WITH_GLOO=1 (needs libopenmpi-dev): " + INSTALL_HINT
                  if missing else ""))
  nccl_needed = num_gpus > 0 and not hvd.nccl_built()
  rows.append(Row("  tensor operations", FAIL if nccl_needed else OK, ", ".join(operations) or "none",
                  "GPUs present but Horovod has no NCCL: pip uninstall -y horovod && GPU=1 make install"
                  if nccl_needed else ""))
  return rows


# Horovod's framework bindings: package directory -> the library its build leaves there.
HOROVOD_LIBRARIES = (("tensorflow", "mpi_lib"), ("torch", "mpi_lib_v2"), ("mxnet", "mpi_lib"))


def horovod_frameworks(horovod_dir):
  """The frameworks Horovod was built for: those whose binding library exists in horovod_dir.
  (horovod.common.util.extension_available imports the binding, and horovod.torch imports
  without its library, so it names torch for a build made with HOROVOD_WITHOUT_PYTORCH=1; bert_fin
  needs the tensorflow binding only.)"""
  suffix = sysconfig.get_config_var("EXT_SUFFIX") or ".so"
  return [name for name, library in HOROVOD_LIBRARIES
          if os.path.isfile(os.path.join(horovod_dir, name, library + suffix))]


def _quietly(fn, *args):
  try:
    return bool(fn(*args))
  except Exception:  # pylint: disable=broad-except
    return False


def _probe_error(stderr, returncode):
  """The line that says why a probe process failed: its last exception, else its last line."""
  lines = [l.strip() for l in stderr.splitlines() if l.strip() and not l.startswith("---")]
  errors = [l for l in lines if re.match(r"^[\w.]*(Error|Exception)\b", l)]
  return ((errors or lines or ["exit code %d" % returncode])[-1])[:200]


def check_dali():
  """The DALI input built and read as run_pretraining --input_pipeline dali does, in a child
  process (a broken DALI can abort it): bert_fin/doctor_probes.py, `dali` probe."""
  with tempfile.TemporaryDirectory() as tmp:
    try:
      result = subprocess.run([sys.executable, "-m", "bert_fin.doctor_probes", "dali", tmp],
                              capture_output=True, text=True, timeout=300,
                              env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))
    except subprocess.TimeoutExpired:
      return Row("DALI + TF plugin", FAIL, "DALI input_fn read timed out (300 s)", INSTALL_HINT)
  if result.returncode == 0:
    return Row("DALI + TF plugin", OK, result.stdout.strip().splitlines()[-1], "")
  error = _probe_error(result.stderr, result.returncode)
  if re.search(r"No module named '?nvidia|ImportError|NotFoundError|undefined symbol", error):
    fix = ("pip install nvidia-dali-cuda120, then nvidia-dali-tf-plugin-cuda120 with "
           "--no-build-isolation: " + INSTALL_HINT)
  else:
    fix = "train with --input_pipeline tfdata (the default) until this is fixed"
  return Row("DALI + TF plugin", FAIL, error, fix)


ALLREDUCE_RANKS = 2
ALLREDUCE_TIMEOUT = 180  # seconds: TF start-up of 2 ranks, NCCL init; a hang is killed after it
ALLREDUCE_CHECK = "allreduce (%d ranks)" % ALLREDUCE_RANKS
ALLREDUCE_HANG_FIX = (
    "ranks hung in the first allreduce, usually NCCL unable to connect them: rerun with "
    "NCCL_DEBUG=INFO, try NCCL_P2P_DISABLE=1 or NCCL_IB_DISABLE=1, NCCL_SOCKET_IFNAME=<NIC>; a "
    "first start can also spend minutes JIT-compiling (CUDA_CACHE_MAXSIZE, docs/install.md GPU hosts)")


def horovod_nccl_built():
  """True/False: Horovod's NCCL support; None when horovod.tensorflow cannot be imported."""
  try:
    import horovod.tensorflow as hvd  # pylint: disable=import-outside-toplevel
    return bool(hvd.nccl_built())
  except Exception:  # pylint: disable=broad-except
    return None


def allreduce_plan(num_gpus, nccl_built):
  """(device, None) to run the allreduce probe, or (None, why it is skipped). GPU hosts only: one
  GPU a rank, so 2 GPUs at least (NCCL refuses two ranks on one GPU)."""
  if num_gpus == 0:
    return None, "skipped (no GPU)"
  if num_gpus < ALLREDUCE_RANKS:
    return None, "skipped (%d GPU)" % num_gpus
  if nccl_built is None:
    return None, "skipped (horovod cannot be imported, see above)"
  if not nccl_built:
    return None, "skipped (Horovod has no NCCL, see tensor operations)"
  return "gpu", None


def allreduce_command(device, environ=None):
  """(argv, env) of the probe: mpirun (launch.py's flags; GPU ranks socket-bound) running
  doctor_probes' allreduce on each rank; NCCL_DEBUG=INFO so NCCL's use shows in the output."""
  from bert_fin import launch  # pylint: disable=import-outside-toplevel
  env = dict(os.environ if environ is None else environ, TF_CPP_MIN_LOG_LEVEL="3")
  package_root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
  env["PYTHONPATH"] = os.pathsep.join([package_root] + [p for p in [env.get("PYTHONPATH")] if p])
  if device == "gpu":
    env["NCCL_DEBUG"] = "INFO"
  argv = [sys.executable, "-m", "bert_fin.doctor_probes", "allreduce", device]
  return launch.mpirun_command(ALLREDUCE_RANKS, argv, gpus=device == "gpu", environ=env), env


def run_killable(argv, env, timeout):
  """Runs argv in a process group of its own: (returncode, stdout, stderr), returncode None when
  it ran past timeout and the whole group (mpirun and its ranks) was killed."""
  process = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             env=env, start_new_session=True)
  try:
    stdout, stderr = process.communicate(timeout=timeout)
    return process.returncode, stdout, stderr
  except subprocess.TimeoutExpired:
    _quietly(os.killpg, process.pid, signal.SIGTERM)  # mpirun passes it on to its ranks
    try:
      process.wait(5)
    except subprocess.TimeoutExpired:
      pass
    _quietly(os.killpg, process.pid, signal.SIGKILL)  # whatever of the group is left
    stdout, stderr = process.communicate()
    return None, stdout, stderr


def nccl_version_seen(output):
  """NCCL's version from NCCL_DEBUG=INFO output ("NCCL INFO NCCL version 2.16.5+cuda12.2"),
  "?" if NCCL logged without it, None if NCCL printed nothing (it did not run)."""
  if "NCCL INFO" not in output:
    return None
  match = re.search(r"NCCL version ([\w.+-]+)", output)
  return match.group(1) if match else "?"


def allreduce_row(device, returncode, stdout, stderr, timeout=ALLREDUCE_TIMEOUT):
  """The report row of one probe run (pure: the outcome decides)."""
  if returncode is None:
    return Row(ALLREDUCE_CHECK, FAIL, "%s probe hung: killed after %d s"
               % (device.upper(), timeout), ALLREDUCE_HANG_FIX)
  summaries = [l for l in stdout.splitlines() if l.startswith("{")]
  if returncode != 0 or not summaries:
    return Row(ALLREDUCE_CHECK, FAIL, "%s probe failed: %s" % (
        device.upper(), _probe_error(stderr, returncode)),
               "check `mpirun -np 2` works (Open MPI), Horovod's rows above; " + INSTALL_HINT)
  summary = json.loads(summaries[-1])
  detail = "%d ranks on %s, via %s: mean %.1f as expected" % (
      summary["ranks"], summary["device"], summary["operations"], summary["result"])
  if device == "gpu":
    version = nccl_version_seen(stdout + stderr)
    if version is None:
      return Row(ALLREDUCE_CHECK, FAIL, detail + ", but NCCL_DEBUG=INFO shows no NCCL",
                 "Horovod did not use NCCL: unset HOROVOD_GPU_OPERATIONS/HOROVOD_GPU_ALLREDUCE, "
                 "or rebuild: pip uninstall -y horovod && GPU=1 make install")
    detail += " (NCCL %s ran)" % version
  return Row(ALLREDUCE_CHECK, OK, detail, "")


def run_allreduce_probe(device, timeout=ALLREDUCE_TIMEOUT):
  """Runs the 2-rank allreduce probe on `device` ("gpu" or "cpu": the same code) -> Row."""
  try:
    argv, env = allreduce_command(device)
  except RuntimeError as e:  # no mpirun
    return Row(ALLREDUCE_CHECK, FAIL, str(e).split(":")[0], str(e))
  return allreduce_row(device, *run_killable(argv, env, timeout), timeout=timeout)


def check_allreduce(num_gpus):
  """GPU hosts with >= 2 GPUs: the NCCL allreduce of 2 ranks, one GPU each; otherwise skipped."""
  device, skipped = allreduce_plan(num_gpus, horovod_nccl_built() if num_gpus else None)
  if device is None:
    return Row(ALLREDUCE_CHECK, INFO, skipped, "")
  return run_allreduce_probe(device)


def parse_topology(text):
  """Parses `nvidia-smi topo -m` into {("GPU0", "GPU1"): "NV2", ...} for GPU pairs only."""
  lines = [l.rstrip() for l in text.splitlines() if l.strip()]
  header = None
  links = {}
  for line in lines:
    cells = line.split()
    if header is None and cells and cells[0].startswith("GPU"):
      header = [c for c in cells if re.match(r"GPU\d+$", c)]
      continue
    if header and cells and re.match(r"GPU\d+$", cells[0]):
      for other, link in zip(header, cells[1:1 + len(header)]):
        if other != cells[0]:
          links[(cells[0], other)] = link
  return links


def slow_gpu_pairs(links, gpu_names=None):
  """GPU pairs (among gpu_names, default all) whose link crosses host bridges / NUMA nodes."""
  pairs = []
  for (a, b), link in sorted(links.items()):
    if a < b and link in SLOW_LINKS and (gpu_names is None or (a in gpu_names and b in gpu_names)):
      pairs.append((a, b, link))
  return pairs


def check_topology():
  if shutil.which("nvidia-smi") is None:
    return Row("GPU topology", INFO, "nvidia-smi not found: skipped", "")
  try:
    text = subprocess.run(["nvidia-smi", "topo", "-m"], capture_output=True, text=True, timeout=60).stdout
  except Exception as e:  # pylint: disable=broad-except
    return Row("GPU topology", WARN, "nvidia-smi topo -m failed: %s" % e, "")
  print(text)
  visible = os.environ.get("CUDA_VISIBLE_DEVICES")
  names = None if not visible else {"GPU%s" % v.strip() for v in visible.split(",") if v.strip().isdigit()}
  slow = slow_gpu_pairs(parse_topology(text), names)
  if not slow:
    return Row("GPU topology", OK, "all GPU pairs in use share a PCIe switch or NVLink", "")
  shown = ", ".join("%s-%s:%s" % p for p in slow[:6])
  return Row("GPU topology", WARN, "links across host bridges/NUMA: " + shown,
             "allreduce over SYS/NODE links can make more GPUs slower than fewer: choose GPUs on one "
             "PCIe switch/NUMA node with CUDA_VISIBLE_DEVICES, or measure -np 2 vs -np N")


def run_checks():
  rows = [check_python()]
  rows += check_core_dependencies()
  rows += check_tensorflow()
  rows.append(check_xla())
  gpu_row, num_gpus = check_gpus()
  rows.append(gpu_row)
  rows.append(check_cuda_versions())
  rows += check_horovod(num_gpus)
  rows.append(check_allreduce(num_gpus))
  rows.append(check_dali())
  rows.append(check_topology())
  rows.append(check_data_kernel())
  rows.append(Row("platform", INFO, "%s, %d cores" % (platform.platform(), os.cpu_count() or 0), ""))
  return rows


def format_table(rows):
  width = max(len(r.check) for r in rows)
  lines = ["%-*s  %-4s  %s" % (width, "check", "", "detail"), "-" * (width + 60)]
  for r in rows:
    lines.append("%-*s  %-4s  %s" % (width, r.check, r.status, r.detail))
    if r.fix:
      lines.append("%-*s        -> %s" % (width, "", r.fix))
  return "\n".join(lines)


def main(argv=None):
  del argv
  os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
  rows = run_checks()
  print(format_table(rows))
  failed = [r.check.strip() for r in rows if r.status == FAIL]
  if failed:
    print("\nbert_fin doctor: %d required piece(s) missing or broken: %s" % (len(failed), ", ".join(failed)))
    return 1
  print("\nbert_fin doctor: everything bert_fin needs works here.")
  return 0


if __name__ == "__main__":
  sys.exit(main())
