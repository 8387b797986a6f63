#!/usr/bin/env bash
# Idempotent set-up for a fresh machine (with or without a GPU). Run by
# scripts/test.sh and scripts/demo.sh; safe to run again and again.
#
#  1. the pinned Rust toolchain and its components (rust-toolchain.toml);
#  2. libcuda: the NVIDIA driver's when present, else Debian's `libcuda1` so
#     that `cust` links and fails cleanly at run time with "no device";
#  3. a CUDA root with `lib64/` for cust's build script (CUDA_LIBRARY_PATH);
#  4. `ptxas` from the PyPI wheel nvidia-cuda-nvcc-cu12, pinned, in
#     .tools/ptxas (copied to ~/.cache/cuda-kernels/ptxas for workspaces
#     outside the clone): build.rs assembles the embedded sm_80/sm_90 cubins with it
#     and tests/ptx.rs checks the PTX for sm_70/80/90 (CUDA 13's ptxas
#     dropped sm_70; 12.9 assembles it). build.rs and the tests find it there
#     themselves (after $PTXAS and PATH): nothing to export;
#  5. NumPy, a C compiler and the C ABI library for the Python/C caller tests.
#
# On a developer's machine what cannot be installed only makes the tests that
# need it report "ignored". In CI (CI=true) and for a packed GPU run
# (CUDA_KERNELS_REQUIRE_GPU=1) it fails the set-up, with the reason.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
TOOLS="$ROOT/.tools"
mkdir -p "$TOOLS"
say() { echo "[setup] $*" >&2; }
missing() {
  if [ "${CI:-}" = true ] || [ "${CI:-}" = 1 ] || [ "${CUDA_KERNELS_REQUIRE_GPU:-}" = 1 ]; then
    say "error: $1 (CI=${CI:-} CUDA_KERNELS_REQUIRE_GPU=${CUDA_KERNELS_REQUIRE_GPU:-}: every prerequisite is required)"
    exit 1
  fi
  say "$1: $2"
}
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

# 4. ptxas for the embedded cubins and the offline PTX checks, pinned: its
#    `ptxas --version` says "release 12.9, V12.9.86", and it assembles sm_70.
NVCC_WHEEL=nvidia-cuda-nvcc-cu12==12.9.86
PTXAS_BIN="$TOOLS/ptxas/nvidia/cuda_nvcc/bin/ptxas"
if [ ! -d "$TOOLS/ptxas/nvidia_cuda_nvcc_cu12-12.9.86.dist-info" ] || [ ! -x "$PTXAS_BIN" ]; then
  say "installing ptxas from the PyPI wheel $NVCC_WHEEL into .tools/ptxas"
  python3 -m pip install -q --disable-pip-version-check --no-deps --upgrade --target "$TOOLS/ptxas" "$NVCC_WHEEL" \
    || missing "could not install $NVCC_WHEEL" "the library embeds PTX only and the ptxas checks are ignored"
fi
if ! "$PTXAS_BIN" --version >/dev/null 2>&1; then
  missing "no working ptxas at $PTXAS_BIN" "the library embeds PTX only and the ptxas checks are ignored"
fi
# The same wheel for workspaces outside this clone: cuda-kernels-builder also
# looks in the user's cache, ${XDG_CACHE_HOME:-~/.cache}/cuda-kernels/ptxas.
# A copy, not a link: a link into this clone broke when the clone moved.
CACHE="${XDG_CACHE_HOME:-$HOME/.cache}/cuda-kernels"
if [ -x "$PTXAS_BIN" ] && [ ! -d "$CACHE/ptxas/nvidia_cuda_nvcc_cu12-12.9.86.dist-info" -o -L "$CACHE/ptxas" ]; then
  say "copying ptxas and libdevice to $CACHE/ptxas for workspaces outside this clone"
  rm -rf "$CACHE/ptxas.new" && mkdir -p "$CACHE/ptxas.new" && cp -a "$TOOLS/ptxas/." "$CACHE/ptxas.new" \
    && rm -rf "$CACHE/ptxas" && mv "$CACHE/ptxas.new" "$CACHE/ptxas"
fi

# 5. the C ABI callers (tests/capi_callers.rs): NumPy for the Python ctypes
#    caller, a C compiler for the C caller, and the cdylib
#    libcuda_kernels_capi.so that `cargo test` alone does not write.
if ! python3 -c 'import numpy' 2>/dev/null; then
  say "installing NumPy for the Python ctypes caller"
  python3 -m pip install -q --disable-pip-version-check numpy \
    || missing "could not install NumPy" "the Python caller test will be ignored"
fi
if ! command -v cc >/dev/null; then
  say "no C compiler: installing gcc"
  { $SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends gcc libc6-dev >/dev/null; } \
    || missing "could not install a C compiler (cc)" "the C caller test will be ignored"
fi
(cd "$ROOT" && cargo build -q -p cuda-kernels-capi) \
  || missing "could not build libcuda_kernels_capi.so" "the C ABI caller tests will be ignored"

say "ready: ptxas $( (${PTXAS:-false} --version || ptxas --version || "$PTXAS_BIN" --version) 2>/dev/null | grep -m1 release || echo none)"

