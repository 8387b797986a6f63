#!/usr/bin/env bash
# The test command: set-up, then the whole test suite. Without a GPU every GPU
# test is reported as ignored with the reason; on a CUDA machine they run.
# In CI (CI=true) a prerequisite the set-up could not install fails the run
# (scripts/setup.sh, and tests/common/mod.rs: missing_prerequisite).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
cargo fmt --all -- --check
cargo clippy --workspace --all-targets -- -D warnings
RUSTDOCFLAGS="-D warnings" cargo doc --workspace --no-deps --quiet
# The kernels and the device crate as the GPU build sees them (the device
# layer's hardware modules, the entry points and reduce/body.rs exist only for
# nvptx64): clippy and rustdoc for that target with build.rs's flags. RUSTC_BOOTSTRAP=1 is for these two commands
# only (-Zbuild-std), as for build.rs's inner build; their own target folder.
nvptx() {
  RUSTC_BOOTSTRAP=1 CARGO_ENCODED_RUSTFLAGS="-Ctarget-cpu=${CUDA_KERNELS_ARCH:-sm_70}" \
    cargo "$1" --release --target nvptx64-nvidia-cuda -Zbuild-std=core \
    --manifest-path kernels-gpu/Cargo.toml --target-dir target/nvptx-lint "${@:2}"
}
nvptx clippy --quiet -p cuda-kernels-gpu -p cuda-kernels-device -- -D warnings
RUSTDOCFLAGS="-D warnings" nvptx doc --no-deps --quiet -p cuda-kernels-gpu -p cuda-kernels-device
cargo test --workspace "$@"
# The library crates packaged as crates.io would hold them, and built from the
# packages (issue 12, "Publishable"; nothing is published): scripts/package.sh.
bash scripts/package.sh
