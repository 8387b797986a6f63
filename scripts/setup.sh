#!/usr/bin/env bash
# Idempotent set-up for a fresh machine (with or without a GPU). Sourced by
# scripts/test.sh and scripts/demo.sh; safe to run again and again.
#
#  1. the pinned Rust toolchain and its components (rust-toolchain.toml);
#  2. libcuda: the NVIDIA driver's when present, else Debian's `libcuda1` so
#     that `cust` links and fails cleanly at run time with "no device";
#  3. a CUDA root with `lib64/` for cust's build script (CUDA_LIBRARY_PATH);
#  4. `ptxas` from the PyPI wheel nvidia-cuda-nvcc-cu12 in .tools/ (offline
#     PTX checks);
#  5. NumPy and the C ABI library for the Python/C caller tests.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
TOOLS="$ROOT/.tools"
mkdir -p "$TOOLS"
say() { echo "[setup] $*" >&2; }
SUDO=""
if [ "$(id -u)" != 0 ] && command -v sudo >/dev/null; then SUDO=sudo; fi

# 1. toolchain
if ! (cd "$ROOT" && rustup component list --installed 2>/dev/null | grep -q '^llvm-bitcode-linker'); then
  say "installing the pinned Rust toolchain (rust-toolchain.toml)"
  (cd "$ROOT" && rustup toolchain install)
fi

# 2. libcuda
if ! ldconfig -p | grep -q 'libcuda\.so\.1'; then
  say "no NVIDIA driver library found: installing Debian's libcuda1 (contrib, non-free)"
  for f in /etc/apt/sources.list.d/debian.sources; do
    if [ -f "$f" ] && ! grep -q 'non-free' "$f"; then
      $SUDO sed -i 's/^Components: main$/Components: main contrib non-free non-free-firmware/' "$f"
    fi
  done
  if [ -f /etc/apt/sources.list ] && grep -q '^deb ' /etc/apt/sources.list && ! grep -q 'non-free' /etc/apt/sources.list; then
    $SUDO sed -i -E 's/^(deb .* main)$/\1 contrib non-free non-free-firmware/' /etc/apt/sources.list
  fi
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends libcuda1 >/dev/null
fi
# The link step wants `libcuda.so` (the unversioned name) where it searches.
mkdir -p "$TOOLS/cuda/lib64"
if ! ldconfig -p | grep -q 'libcuda\.so '; then
  ln -sf "$(ldconfig -p | awk '/libcuda\.so\.1 /{print $NF; exit}')" "$TOOLS/cuda/lib64/libcuda.so"
fi

# 3. a CUDA root for cust's build script: .cargo/config.toml points
#    CUDA_LIBRARY_PATH at .tools/cuda (cust also looks in /usr/local/cuda).
mkdir -p "$TOOLS/cuda/lib64"

# 4. ptxas for the offline PTX checks
if ! command -v ptxas >/dev/null && [ ! -x "$TOOLS/ptxas/nvidia/cuda_nvcc/bin/ptxas" ]; then
  say "installing ptxas from the PyPI wheel nvidia-cuda-nvcc-cu12 into .tools/ptxas"
  python3 -m pip install -q --disable-pip-version-check --no-deps --target "$TOOLS/ptxas" nvidia-cuda-nvcc-cu12
fi
if [ -x "$TOOLS/ptxas/nvidia/cuda_nvcc/bin/ptxas" ]; then
  export PTXAS="${PTXAS:-$TOOLS/ptxas/nvidia/cuda_nvcc/bin/ptxas}"
fi

# 5. the C ABI callers (tests/capi_callers.rs): NumPy for the Python ctypes
#    caller, and the cdylib libcuda_kernels_capi.so that `cargo test` alone
#    does not write. Failures here only make those tests report "ignored".
if ! python3 -c 'import numpy' 2>/dev/null; then
  say "installing NumPy for the Python ctypes caller"
  python3 -m pip install -q --disable-pip-version-check numpy \
    || say "could not install NumPy: the Python caller test will be ignored"
fi
(cd "$ROOT" && cargo build -q -p cuda-kernels-capi) \
  || say "could not build libcuda_kernels_capi.so: the C ABI caller tests will be ignored"

say "ready: PTXAS=${PTXAS:-$(command -v ptxas || echo none)}"

