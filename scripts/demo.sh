#!/usr/bin/env bash
# The main job: set-up, build, then every seed demo in sequence with the
# results table (GPU results when there is a GPU, CPU results and a notice
# otherwise). Images go to ./out.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
cargo run --release --bin cuda-kernels -- demo --out-dir out "$@"
