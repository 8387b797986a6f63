#!/usr/bin/env bash
# The test command: set-up, then the whole test suite. Without a GPU the
# kernel-result tests run on the CPU simulator (reported as [sim]) and the
# hardware-only tests are reported as ignored with the reason; on a CUDA
# machine they all run on the GPU (CUDA_KERNELS_SIM=1: kernel-result tests on
# the simulator; CUDA_KERNELS_SIM_COMPARE=1: on both).
# In CI (CI=true) a prerequisite the set-up could not install fails the run
# (scripts/setup.sh, and tests/common/mod.rs: missing_prerequisite).
set -euo pipefail
cd "$(dirname "$0")/.."
# CI's disk is shared and has run out once (a link step died with SIGBUS):
# a CI run keeps no incremental caches and only line tables as debug info
# (file:line in backtraces stays), and drops each scratch target folder once
# its step has passed. About 7 GB at peak before, about 3.5 GB after.
if [ "${CI:-}" = true ]; then
  export CARGO_INCREMENTAL=0 CARGO_PROFILE_DEV_DEBUG=line-tables-only CARGO_PROFILE_TEST_DEBUG=line-tables-only
fi
ci_drop() { if [ "${CI:-}" = true ]; then rm -rf "$@"; fi; }
bash scripts/setup.sh
cargo fmt --all -- --check
cargo clippy --workspace --all-targets -- -D warnings
RUSTDOCFLAGS="-D warnings" cargo doc --workspace --no-deps --quiet
# The kernels and the device crate as the GPU build sees them (the device
# layer's hardware implementations and the entry points exist only for
# nvptx64): clippy and rustdoc for that target with build.rs's flags. RUSTC_BOOTSTRAP=1 is for these two commands
# only (-Zbuild-std), as for build.rs's inner build; their own target folder.
nvptx() {
  RUSTC_BOOTSTRAP=1 CARGO_ENCODED_RUSTFLAGS="${NVPTX_RUSTFLAGS:--Ctarget-cpu=${CUDA_KERNELS_ARCH:-sm_70}}" \
    cargo "$1" --release --target nvptx64-nvidia-cuda -Zbuild-std=core \
    --manifest-path "${MANIFEST:-kernels-gpu/Cargo.toml}" --target-dir target/nvptx-lint "${@:2}"
}
nvptx clippy --quiet -p cuda-kernels-gpu -p cuda-kernels-device -- -D warnings
# The sm_90a build, as build.rs makes it: Hopper's wgmma GEMM exists there alone.
NVPTX_RUSTFLAGS=$'-Ctarget-cpu=sm_90a\x1f-Ctarget-feature=+ptx83' \
  nvptx clippy --quiet -p cuda-kernels-gpu -p cuda-kernels-device -- -D warnings
# As a user's kernel crate sees it: without the built-in kernels.
nvptx clippy --quiet -p cuda-kernels-gpu --no-default-features -- -D warnings
RUSTDOCFLAGS="-D warnings" nvptx doc --no-deps --quiet -p cuda-kernels-gpu -p cuda-kernels-device
# The downstream workspace (examples/downstream, outside this workspace): a
# user's kernel crate and program on this library, built the way a user
# builds them; CUDA_LIBRARY_PATH as a user sets it (cargo never applies our
# .cargo/config.toml to a dependent). It has a target folder of its own
# (target/downstream): built into ours, its copies of our crates (other
# features, other dependency graph) replaced ours under the same file names,
# and a later `cargo run --release` here failed with "multiple different
# versions of crate cuda_kernels_device". Its app checks every kernel of
# the user's crate against its CPU reference: on the GPU, or here on the CPU
# simulator (the same kernel crate compiled for the host); its tests/ptx.rs assembles its PTX with ptxas for
# sm_70, sm_80 and sm_90 and refuses spills.
downstream() {
  CUDA_LIBRARY_PATH="$PWD/.tools/cuda" cargo "$1" --manifest-path examples/downstream/Cargo.toml \
    "${@:2}"
}
downstream fmt --all -- --check
downstream clippy --release --target-dir target/downstream --all-targets -- -D warnings
MANIFEST=examples/downstream/Cargo.toml nvptx clippy --quiet -p downstream-kernels -- -D warnings
# A user's first build, outside this clone: the downstream workspace copied
# to a temporary folder as a `cargo new`-style template (our crates by
# absolute path, as a user's git dependencies), with no .cargo/config.toml
# anywhere above it: ptxas and libdevice are found by the builder itself (the
# cache scripts/setup.sh fills); only cust's build script needs a CUDA root
# with lib64/, which a machine without the toolkit names in CUDA_LIBRARY_PATH
# (docs/setup.md, "Your own workspace"). Its release build is quiet (no
# warning), and its dev profile the simulator's (no "built without
# optimisation" warning).
template="$(mktemp -d)"
tar -C examples/downstream --exclude=./target -cf - . | tar -C "$template" -xf -
sed -i "s#path = \"\.\./\.\.#path = \"$PWD#" "$template/Cargo.toml"
if grep -q 'path = "\.\.' "$template/Cargo.toml"; then echo "template: a relative path left" >&2; exit 1; fi
(
  cd "$template"
  [ -d /usr/local/cuda/lib64 ] || export CUDA_LIBRARY_PATH=/usr
  unset PTXAS CUDA_KERNELS_LIBDEVICE
  cargo build --release --target-dir "$OLDPWD/target/downstream" 2>&1 | tee build.log
  if grep -q '^warning' build.log; then echo "template: its release build is not quiet" >&2; exit 1; fi
  "$OLDPWD/target/downstream/release/downstream-app"
  cargo test --release --target-dir "$OLDPWD/target/downstream"
  CUDA_KERNELS_SIM=1 cargo run --target-dir "$OLDPWD/target/downstream" 2>&1 | tee run.log
  if grep -q "built without optimisation" run.log; then exit 1; fi
)
rm -rf "$template"
# The smallest project (examples/template: 29 configuration lines, the app at
# its root and the kernel crate in kernels/), copied outside the clone as a
# user's `cargo new` project with our crates by absolute path: its release
# build is quiet, it runs (on the simulator here), and its dev build runs the
# simulator without the "built without optimisation" warning.
cargo fmt --manifest-path examples/template/Cargo.toml --all -- --check
lines=$(cd examples/template && grep -hv '^\s*\(#\|//\)' Cargo.toml kernels/Cargo.toml build.rs \
  rust-toolchain.toml | grep -cv '^\s*$')
if [ "$lines" -gt 30 ]; then echo "template: $lines configuration lines, at most 30" >&2; exit 1; fi
template="$(mktemp -d)"
cp -r examples/template/. "$template"
sed -i -E "s#path = \"(\.\./)+(runtime|device|builder)\"#path = \"$PWD/\2\"#" \
  "$template/Cargo.toml" "$template/kernels/Cargo.toml"
if grep -q 'path = "\.\.' "$template/Cargo.toml" "$template/kernels/Cargo.toml"; then
  echo "template: a relative path left" >&2; exit 1
fi
(
  cd "$template"
  [ -d /usr/local/cuda/lib64 ] || export CUDA_LIBRARY_PATH=/usr
  unset PTXAS CUDA_KERNELS_LIBDEVICE
  cargo build --locked --release --target-dir "$OLDPWD/target/downstream" 2>&1 | tee build.log
  if grep -q '^warning' build.log; then echo "template: its release build is not quiet" >&2; exit 1; fi
  "$OLDPWD/target/downstream/release/app"
  cargo run --locked --target-dir "$OLDPWD/target/downstream" 2>&1 | tee run.log
  if grep -q "built without optimisation" run.log; then exit 1; fi
)
rm -rf "$template"
ci_drop target/downstream target/nvptx-lint
cargo test --workspace "$@"
# The simulator's other schedules: the kernels' smoke tier under three fixed
# seeds (threads started and resumed in a random order, a different one per
# seed and block), with blocks on two OS threads; a kernel whose result
# depends on the order fails here.
for seed in 1 2 3; do
  CUDA_KERNELS_SIM_SEED=$seed CUDA_KERNELS_SIM_THREADS=2 \
    cargo test -p cuda-kernels-gpu --test sim_smoke "$@"
done
# The look-back and sort families under the interleaved block schedule
# (docs/simulator.md, "Interleaved blocks"): four resident blocks, started
# out of order and run in turns, so that a look-back waits for an
# unpublished tile (in order it never does) and a publication in the wrong
# order, or a spin nothing ends (SimError::Deadlock), fails here.
for family in collectives::scan collectives::select collectives::look_back sort::; do
  CUDA_KERNELS_SIM=1 CUDA_KERNELS_SIM_SCHEDULE=interleaved cargo test --test gpu "$@" -- "$family"
done
# The library crates packaged as crates.io would hold them, and built from the
# packages (issue 12, "Publishable"; nothing is published): scripts/package.sh.
bash scripts/package.sh
ci_drop target/package-check
