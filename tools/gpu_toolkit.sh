#!/usr/bin/env bash
# The GPU half of `GPU=1 make install`: sourced by tools/install.sh, or run alone to check a host:
#
#   bash tools/gpu_toolkit.sh        # preflight only: prints the toolkit it would use, or why not
#
# What a Horovod build with NCCL for TF 2.15 needs, and where each piece comes from:
#   nvcc, CUDA headers, libcudart_static.a  a CUDA 12.x toolkit on the host (no PyPI wheel ships a
#                                            CUDA 12 nvcc); CUDA 13 is refused: TF 2.15 is CUDA 12.2
#   host C++ compiler                        g++ <= 12 (Horovod 0.28.1 and nvcc 12.0-12.3 reject newer)
#   nccl.h + libnccl.so                      the nvidia-nccl-cu12 wheel tensorflow[and-cuda] installs
#                                            (the NCCL TF itself loads), via a link dir in the venv
#   CUDA headers for the DALI plugin         nvidia-cuda-runtime-cu12 + nvidia-cuda-nvcc-cu12's crt/
#                                            (TF's CUDA 12.2 wheels), CPU hosts too
# gpu_preflight runs before anything is downloaded; gpu_horovod_env after TensorFlow is installed.

gpu_say() { printf '[install] %s\n' "$*"; }
gpu_fail() {  # gpu_fail WHAT FIX -> the one message the user sees, and stop
  printf '[install] ERROR: %s\n[install] fix: %s\n' "$1" "$2" >&2
  exit 1
}

# The CUDA release (12.4) of the nvcc in toolkit root $1, or nothing.
cuda_release_of() {
  [ -x "$1/bin/nvcc" ] || return 0
  "$1/bin/nvcc" --version 2>/dev/null | sed -n 's/.*release \([0-9][0-9]*\.[0-9][0-9]*\).*/\1/p' | head -1
}

# Toolkit roots to try, most explicit first: $HOROVOD_CUDA_HOME, $CUDA_HOME, the nvcc on PATH,
# then the usual install places, newest 12.x first.
cuda_candidates() {
  local nvcc_path
  [ -n "${HOROVOD_CUDA_HOME:-}" ] && echo "$HOROVOD_CUDA_HOME"
  [ -n "${CUDA_HOME:-}" ] && echo "$CUDA_HOME"
  if nvcc_path=$(command -v nvcc 2>/dev/null); then
    dirname "$(dirname "$(readlink -f "$nvcc_path")")"
  fi
  ls -d /usr/local/cuda-12.* 2>/dev/null | sort -rV
  echo /usr/local/cuda
}

# gpu_find_cuda12 -> sets GPU_CUDA_HOME and GPU_CUDA_RELEASE, or fails with the fix.
gpu_find_cuda12() {
  local root release seen="" skipped=()
  for root in $(cuda_candidates); do
    root=$(readlink -f "$root" 2>/dev/null) || continue
    case " $seen " in *" $root "*) continue ;; esac
    seen="$seen $root"
    release=$(cuda_release_of "$root")
    [ -n "$release" ] || continue
    if [ "${release%%.*}" = 12 ]; then
      GPU_CUDA_HOME=$root GPU_CUDA_RELEASE=$release
      [ "${#skipped[@]}" -gt 0 ] && gpu_say "skipped (not CUDA 12): ${skipped[*]}"
      return 0
    fi
    skipped+=("$root/bin/nvcc=CUDA-$release")
  done
  gpu_fail "GPU=1 needs a CUDA 12.x toolkit (nvcc, headers, static runtime) to build Horovod's NCCL kernels for TF 2.15 (CUDA 12.2); found ${skipped[*]:-no nvcc at all} (TF 2.15 cannot use CUDA 13)" \
    "sudo apt-get install cuda-nvcc-12-2 cuda-cudart-dev-12-2 cuda-cccl-12-2 (NVIDIA's CUDA apt repository; on Debian 13 or Ubuntu 24.04: sudo apt-get install nvidia-cuda-toolkit), then: CUDA_HOME=/usr/local/cuda-12.2 GPU=1 make install"
}

# gpu_pick_cxx -> exports CC/CXX as a g++ <= 12 (nvcc's host compiler and Horovod's), or fails.
gpu_pick_cxx() {
  local cxx major
  for cxx in "${CXX:-g++}" g++-12 g++-11 g++-10; do
    command -v "$cxx" >/dev/null || continue
    major=$("$cxx" -dumpversion 2>/dev/null | cut -d. -f1)
    if [ -n "$major" ] && [ "$major" -le 12 ]; then
      export CXX=$(command -v "$cxx") CC=$(command -v "${cxx/g++/gcc}" 2>/dev/null || echo gcc)
      return 0
    fi
  done
  gpu_fail "GPU=1 needs g++ 12 or older for nvcc 12.x and Horovod 0.28.1; $(g++ -dumpfullversion 2>/dev/null | sed 's/^/g++ is /')" \
    "sudo apt-get install g++-12 gcc-12, then re-run GPU=1 make install (it picks g++-12 itself)"
}

# gpu_compile_probe -> compiles and links a kernel the way Horovod's build will (sm_80, static cudart).
gpu_compile_probe() {
  local dir log
  dir=$(mktemp -d) log="$dir/nvcc.log"
  # the headers Horovod's cuda_kernels.cu includes (cuda_fp16.h needs CCCL's nv/target)
  printf '%s\n' '#include <cuda_runtime_api.h>' '#include <cuda_fp16.h>' \
    '__global__ void scale(__half* x) { x[threadIdx.x] = __hmul(x[threadIdx.x], x[0]); }' \
    'int main() { scale<<<1, 1>>>(nullptr); return cudaGetLastError() == cudaSuccess ? 0 : 0; }' > "$dir/probe.cu"
  if ! "$GPU_CUDA_HOME/bin/nvcc" -ccbin "$CXX" -cudart static -gencode arch=compute_80,code=sm_80 \
       "$dir/probe.cu" -o "$dir/probe" > "$log" 2>&1; then
    sed 's/^/[nvcc] /' "$log" >&2
    gpu_fail "the CUDA $GPU_CUDA_RELEASE toolkit at $GPU_CUDA_HOME cannot compile and link a kernel (nvcc output above)" \
      "install its headers and static runtime (sudo apt-get install cuda-cudart-dev-${GPU_CUDA_RELEASE/./-} cuda-cccl-${GPU_CUDA_RELEASE/./-}), or point CUDA_HOME at a complete CUDA 12.x toolkit"
  fi
  rm -rf "$dir"
}

# gpu_preflight: everything that can be checked before pip downloads ~3 GB.
gpu_preflight() {
  gpu_find_cuda12
  gpu_pick_cxx
  gpu_compile_probe
  gpu_say "GPU preflight ok: CUDA $GPU_CUDA_RELEASE toolkit at $GPU_CUDA_HOME, host compiler $CXX ($("$CXX" -dumpversion))"
}

# gpu_site VENV -> the venv's site-packages
gpu_site() { "$1/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])'; }

# gpu_dali_cuda_home VENV -> a CUDA_HOME for the DALI TF plugin build, assembled from pinned wheels
# (TF 2.15's CUDA 12.2), never from whatever /usr/local/cuda is: include/ holds links to every header
# of nvidia-cuda-runtime-cu12 (cuda_runtime_api.h, ...) plus nvidia-cuda-nvcc-cu12's crt/ (the
# runtime headers include crt/host_defines.h, which only the nvcc wheel ships).
gpu_dali_cuda_home() {
  local site runtime nvcc home entry
  site=$(gpu_site "$1")
  runtime="$site/nvidia/cuda_runtime/include" nvcc="$site/nvidia/cuda_nvcc/include"
  [ -f "$runtime/cuda_runtime_api.h" ] \
    || gpu_fail "no cuda_runtime_api.h under $runtime (the nvidia-cuda-runtime-cu12 wheel)" \
                "$1/bin/pip install $(grep '^nvidia-cuda-runtime-cu12==' requirements/constraints.txt)"
  [ -f "$nvcc/crt/host_defines.h" ] \
    || gpu_fail "no crt/host_defines.h under $nvcc (the nvidia-cuda-nvcc-cu12 wheel)" \
                "$1/bin/pip install $(grep '^nvidia-cuda-nvcc-cu12==' requirements/constraints.txt)"
  home="$(readlink -f "$1")/cuda-build/dali"
  rm -rf "$home" && mkdir -p "$home/include"
  for entry in "$runtime"/* "$nvcc/crt"; do
    case "$(basename "$entry")" in __init__.py|__pycache__) continue ;; esac
    ln -s "$entry" "$home/include/$(basename "$entry")"
  done
  echo "$home"
}

# gpu_horovod_env VENV -> fills the array hvd_gpu_env with the variables of Horovod's NCCL build.
gpu_horovod_env() {
  local venv=$1 nccl links
  nccl="$(gpu_site "$venv")/nvidia/nccl"
  [ -f "$nccl/include/nccl.h" ] && [ -f "$nccl/lib/libnccl.so.2" ] \
    || gpu_fail "no nccl.h / libnccl.so.2 under $nccl (the nvidia-nccl-cu12 wheel of tensorflow[and-cuda])" \
                "$venv/bin/pip install --force-reinstall 'tensorflow[and-cuda]==2.15.1'"
  # the wheel has only the runtime name libnccl.so.2; the linker looks for libnccl.so
  links="$(readlink -f "$venv")/cuda-build/nccl/lib"
  mkdir -p "$links"
  ln -sfn "$nccl/lib/libnccl.so.2" "$links/libnccl.so"
  ln -sfn "$nccl/lib/libnccl.so.2" "$links/libnccl.so.2"
  hvd_gpu_env=(HOROVOD_GPU_OPERATIONS=NCCL
    HOROVOD_CUDA_HOME="$GPU_CUDA_HOME" CUDAToolkit_ROOT="$GPU_CUDA_HOME" CUDACXX="$GPU_CUDA_HOME/bin/nvcc"
    PATH="$GPU_CUDA_HOME/bin:$PATH" CC="$CC" CXX="$CXX"
    HOROVOD_BUILD_CUDA_CC_LIST="${HOROVOD_BUILD_CUDA_CC_LIST:-80,90}"
    HOROVOD_NCCL_HOME="$nccl" HOROVOD_NCCL_INCLUDE="$nccl/include" HOROVOD_NCCL_LIB="$links"
    HOROVOD_NCCL_LINK=SHARED
    # horovod's .so then finds the same libnccl.so.2 as TF without LD_LIBRARY_PATH
    LDFLAGS="${LDFLAGS:-} -Wl,-rpath,$nccl/lib")
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
  set -euo pipefail
  gpu_preflight
fi
