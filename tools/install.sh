#!/usr/bin/env bash
# make install: create .venv/ (Python 3.11) and install bert_fin with every dependency, in the order
# that works. Versions come from requirements/constraints.txt only. A second run is a no-op when the
# stamp (hash of constraints + setup.py + the C kernel source + GPU flag) matches and every piece still imports.
#
#   GPU=1 make install    # tensorflow[and-cuda] and Horovod with NCCL
set -euo pipefail
cd "$(dirname "$0")/.."
GPU="${GPU:-0}"
VENV="${VENV:-.venv}"
CONSTRAINTS=requirements/constraints.txt
say() { printf '[install] %s\n' "$*"; }
die() { printf '[install] ERROR: %s\n' "$*" >&2; exit 1; }

pin() {  # pin NAME -> the name==version line of the constraints file
  local line
  line=$(grep -E "^$(printf '%s' "$1" | sed 's/[][]/\\&/g')==" "$CONSTRAINTS" | head -1) || true
  [ -n "$line" ] || die "no pin for $1 in $CONSTRAINTS"
  printf '%s\n' "$line"
}
group() {  # group NAME -> every pin of that group, one per line
  awk -v g="$1" '/^# group:/ {cur=$3; next} /^#/ || NF==0 {next} cur==g {print}' "$CONSTRAINTS"
}

stamp_value=$( (cat "$CONSTRAINTS" setup.py tools/install.sh tools/gpu_toolkit.sh bert_fin/data/kernel/_kernel*.[ch] bert_fin/text/dedup/_minhash.c; echo "GPU=$GPU") | sha256sum | cut -c1-16)
stamp_file="$VENV/.bert_fin-installed"
if [ -f "$stamp_file" ] && [ "$(cat "$stamp_file")" = "$stamp_value" ] \
   && "$VENV/bin/python" -c 'import tensorflow, horovod.tensorflow, nvidia.dali.plugin.tf, mpi4py, bert_fin.data.kernel._kernel' 2>/dev/null; then
  say "up to date ($VENV, stamp $stamp_value): nothing to do"
  exit 0
fi

# ---- system packages -----------------------------------------------------------------------------
need_apt=()
if command -v python3.11 >/dev/null; then
  # Horovod and the C kernel compile against Python.h
  python3.11 -c 'import os, sysconfig, sys; sys.exit(not os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h")))' \
    || need_apt+=(python3.11-dev)
else
  need_apt+=(python3.11 python3.11-venv python3.11-dev)
fi
command -v g++ >/dev/null || need_apt+=(g++)
command -v mpirun >/dev/null && command -v mpicxx >/dev/null || need_apt+=(openmpi-bin libopenmpi-dev)
if command -v cmake >/dev/null; then
  cmake_major=$(cmake --version | head -1 | awk '{print $3}' | cut -d. -f1)
  # cmake >= 4 refuses horovod's old cmake_minimum_required; tell it to accept the policy.
  [ "$cmake_major" -ge 4 ] && export CMAKE_POLICY_VERSION_MINIMUM=3.5
else
  need_apt+=(cmake)
fi
if [ "${#need_apt[@]}" -gt 0 ]; then
  say "system packages missing: ${need_apt[*]}"
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need_apt[@]}" >/dev/null \
      || die "apt-get install ${need_apt[*]} failed"
  else
    die "install them first, e.g.: sudo apt-get install ${need_apt[*]}"
  fi
fi

# ---- GPU preflight: a CUDA 12 toolkit and g++ <= 12, checked before ~3 GB of wheels download -------
source tools/gpu_toolkit.sh
[ "$GPU" = 1 ] && gpu_preflight

# ---- virtual environment ---------------------------------------------------------------------------
PYTHON_BIN=$(command -v python3.11) || die "python3.11 not found"
if [ ! -x "$VENV/bin/python" ]; then
  say "creating $VENV with $PYTHON_BIN"
  "$PYTHON_BIN" -m venv "$VENV"
fi
PIP=("$VENV/bin/python" -m pip --disable-pip-version-check)
"${PIP[@]}" install -q --upgrade "pip<25" "setuptools<71" wheel
has() { "$VENV/bin/python" -c "import $1" 2>/dev/null; }
LOGS="$VENV/build-logs"
logged() {  # logged NAME CMD... -> runs a build with its full output in $LOGS/NAME.log, shown on
            # failure; prints the build's wall time (CI reads it: .ci/run)
  mkdir -p "$LOGS"
  say "  (build log: $LOGS/$1.log)"
  local name=$1 log="$LOGS/$1.log" start=$SECONDS; shift
  if "$@" > "$log" 2>&1; then
    say "  built $name in $((SECONDS - start)) s"
    return 0
  fi
  { grep -E -m 15 'fatal error|error:|Error [0-9]|CMake Error' "$log"; echo ...; tail -n 25 "$log"; } \
    | sed 's/^/  | /' >&2
  die "build failed; full log: $log"
}
importable() {  # importable MODULE WHAT -> stops the install when a build left a module that cannot
                # be imported (a build can "succeed" and still produce a broken extension)
  local error
  error=$("$VENV/bin/python" -c "import $1" 2>&1 | tail -1) \
    || die "$2 was installed but 'import $1' fails: $error"
}

# ---- TensorFlow + the pure-python stack (one resolver call, all pinned) -----------------------------
if [ "$GPU" = 1 ]; then tf_group=tf-gpu; else tf_group=tf; fi
say "installing TensorFlow ($tf_group), the core and serving packages"
mapfile -t pins < <(group core; group "$tf_group"; pin tensorflow-estimator; group serving; group test)
start=$SECONDS
"${PIP[@]}" install -q "${pins[@]}"
say "  installed in $((SECONDS - start)) s"

# ---- DALI, then its TF plugin compiled against the TF just installed --------------------------------
if ! has nvidia.dali; then
  say "installing $(pin nvidia-dali-cuda120)"
  "${PIP[@]}" install -q "$(pin nvidia-dali-cuda120)"
fi
# bert_fin's console script `tfrecord2idx` replaces DALI's script of the same name; keep DALI's as
# dali-tfrecord2idx (the byte-for-byte oracle of tests/test_tfrecord_index.py). Ours is told by
# its body (the `bert-fin` entry point, or bert_fin.cli), never by the shebang: that names the
# venv's path, and a venv under a directory called bert_fin* (CI's) would look like ours.
if [ -f "$VENV/bin/tfrecord2idx" ] \
   && ! tail -n +2 "$VENV/bin/tfrecord2idx" | grep -qE "bert-fin|bert_fin\.cli" \
   && [ ! -f "$VENV/bin/dali-tfrecord2idx" ]; then
  cp "$VENV/bin/tfrecord2idx" "$VENV/bin/dali-tfrecord2idx"
fi
if ! has nvidia.dali.plugin.tf; then
  say "building $(pin nvidia-dali-tf-plugin-cuda120) against the installed TensorFlow (a few minutes)"
  # its CUDA headers come from TF's CUDA 12.2 wheels (runtime + nvcc's crt/), not /usr/local/cuda
  mapfile -t header_pins < <(group cuda-headers)
  "${PIP[@]}" install -q "${header_pins[@]}"
  logged dali-tf-plugin env CUDA_HOME="$(gpu_dali_cuda_home "$VENV")" \
    "${PIP[@]}" install -v --no-build-isolation "$(pin nvidia-dali-tf-plugin-cuda120)"
  importable nvidia.dali.plugin.tf "the DALI TF plugin"
fi

# ---- Horovod from source: TensorFlow + MPI + Gloo (+ NCCL on GPU hosts) ------------------------------
hvd_ok() {
  "$VENV/bin/python" - "$GPU" <<'PY' 2>/dev/null
import sys
import horovod.tensorflow as hvd
ok = hvd.mpi_built() and hvd.gloo_built()
if sys.argv[1] == "1":
    ok = ok and hvd.nccl_built()
sys.exit(0 if ok else 1)
PY
}
if ! hvd_ok; then
  say "building $(pin horovod) with TensorFlow + MPI + Gloo$([ "$GPU" = 1 ] && echo ' + NCCL') (~5 min on 2 cores; pip caches the wheel)"
  hvd_env=(HOROVOD_WITH_TENSORFLOW=1 HOROVOD_WITH_MPI=1 HOROVOD_WITH_GLOO=1
           HOROVOD_WITHOUT_PYTORCH=1 HOROVOD_WITHOUT_MXNET=1)
  # pip caches the built wheel by version only: the NCCL build bypasses that cache, so a cached
  # CPU-only wheel never stands in for it (nor the GPU wheel for a later CPU install)
  hvd_pip=(install -v --no-build-isolation)
  if [ "$GPU" = 1 ]; then
    gpu_horovod_env "$VENV"; hvd_env+=("${hvd_gpu_env[@]}"); hvd_pip+=(--no-cache-dir)
  else
    hvd_env+=(HOROVOD_CPU_OPERATIONS=MPI)
  fi
  "${PIP[@]}" uninstall -y -q horovod 2>/dev/null || true
  logged horovod env "${hvd_env[@]}" MAKEFLAGS="${MAKEFLAGS:--j$(nproc)}" "${PIP[@]}" "${hvd_pip[@]}" "$(pin horovod)"
  importable horovod.tensorflow "Horovod"
  hvd_ok || die "horovod built without the required controllers; run: $VENV/bin/horovodrun --check-build"
fi

# ---- mpi4py for the data tools under mpirun, compiled against the system Open MPI --------------------
# (a binary wheel could carry another MPI than the mpirun that starts the ranks: each rank would then
# see a world of 1)
if ! has mpi4py; then
  say "building $(pin mpi4py) against the system Open MPI"
  logged mpi4py "${PIP[@]}" install -v --no-binary mpi4py "$(pin mpi4py)"
  importable mpi4py.MPI "mpi4py"
fi

# ---- bert_fin itself ---------------------------------------------------------------------------------
say "installing bert_fin (editable; compiles the C kernel bert_fin/data/kernel/_kernel.c)"
logged bert_fin "${PIP[@]}" install -v --no-deps --no-build-isolation -e .
# setup.py marks the C kernel optional (pip install without a compiler still works, slower); here
# g++ and the Python headers are present, so a missing kernel is a build error worth stopping for
importable bert_fin.data.kernel._kernel "bert_fin's C kernel (build log: $LOGS/bert_fin.log)"
echo "$stamp_value" > "$stamp_file"
tf_version=$(TF_CPP_MIN_LOG_LEVEL=2 "$VENV/bin/python" -c 'import tensorflow as t; print(t.__version__)')
say "done in $SECONDS s: $VENV ready (tensorflow $tf_version)"
