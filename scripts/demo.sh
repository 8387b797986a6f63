#!/usr/bin/env bash
# The main job: set-up, build, then every seed demo in sequence with the
# results table: on the GPU when there is one; otherwise (or with --sim, or
# CUDA_KERNELS_SIM=1) on the CPU simulator, at small sizes, every kernel's
# result checked against its CPU reference, saying "SIMULATED" and giving no
# GPU timings. Images (from the kernels that ran) go to ./out.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
cargo run --release --bin cuda-kernels -- demo --out-dir out "$@"
