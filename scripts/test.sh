#!/usr/bin/env bash
# The test command: set-up, then the whole test suite. Without a GPU every GPU
# test is reported as ignored with the reason; on a CUDA machine they run.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
cargo fmt --all -- --check
cargo clippy --workspace --all-targets -- -D warnings
RUSTDOCFLAGS="-D warnings" cargo doc --workspace --no-deps --quiet
cargo test --workspace "$@"
