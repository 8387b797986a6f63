#!/usr/bin/env bash
# The library crates as crates.io would hold them (issue 12, "Publishable"):
# `cargo package` for each, then the root crate and the C ABI library built
# from their .crate files alone. Nothing is published.
#
# 1. cargo's own check (packaging and its verify step, which builds each crate
#    from its .crate) for cuda-kernels-runtime, -host, -gpu, -device and -builder.
# 2. cuda-kernels and cuda-kernels-capi: cargo packages them, but its verify
#    step cannot build cuda-kernels. Its build.rs runs a second cargo (the
#    nvptx64 build of cuda-kernels-gpu, through cuda-kernels-builder), and that
#    cargo resolves cuda-kernels-gpu's dependency cuda-kernels-device from
#    crates.io, where it is not published: the unpublished workspace crates
#    that `cargo package` lays over crates.io exist only inside the outer
#    cargo process. So the .crate files are unpacked side by side into an empty
#    folder outside this repository ($TMPDIR), as cargo unpacks a registry's crates, with
#    a `[patch.crates-io]` in that folder's .cargo/config.toml naming them (for
#    both cargo processes), and cuda-kernels-capi (with cuda-kernels under it)
#    is built there, then cuda-kernels' offline PTX test (ptxas) is run there.
#    The variables a crates.io user would set are set from this repository's
#    set-up: CUDA_LIBRARY_PATH for cust, CUDA_KERNELS_LIBDEVICE and PTXAS (the
#    builder's search for .tools/ stops at this repository).
#
# --allow-dirty: the crates as they are in the working tree (uncommitted edits
# included), as the rest of scripts/test.sh checks them.
#
# The packaged crates build in a target folder of their own
# (target/package-check): built into the repository's, cargo gave the
# unpacked crates the same file names as the repository's own (the same
# crates and versions from other paths), and the next `cargo test` here
# failed with "multiple different versions of crate cuda_kernels_device".
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD
export CARGO_TARGET_DIR="$repo/target/package-check"
crates=(cuda-kernels cuda-kernels-runtime cuda-kernels-host cuda-kernels-gpu cuda-kernels-device cuda-kernels-builder cuda-kernels-capi)

# `cargo package --workspace` verifies each crate against the others'
# .crate files, which it unpacks into the registry's source folder; it reuses
# a copy unpacked there before, so an earlier run's copies of these
# unpublished crates would be verified instead of today's sources (seen:
# "could not find `kernel` in `device`"). Remove them first.
for name in "${crates[@]}"; do
  rm -rf "${CARGO_HOME:-$HOME/.cargo}"/registry/src/*/"$name"-[0-9]*
done
# cargo takes a registry crate's version for immutable, so the verify step
# (and the build of the unpacked crates below, whose paths and file times
# stay the same from run to run) can reuse an earlier run's build of these
# unpublished crates from target/package-check (seen in the container's
# cached target folder: a kernels crate built against an older device crate,
# cubin tables written by an older builder). Our crates' build outputs are
# removed first; third-party dependencies stay built.
for profile in "$CARGO_TARGET_DIR"/debug "$CARGO_TARGET_DIR"/release; do
  rm -rf "$profile"/build/cuda-kernels* "$profile"/.fingerprint/cuda-kernels* \
    "$profile"/deps/*cuda_kernels*
done
rm -rf "$CARGO_TARGET_DIR"/nvptx-kernels
cargo package --quiet --allow-dirty --workspace --exclude cuda-kernels-cli \
  --exclude cuda-kernels --exclude cuda-kernels-capi
cargo package --quiet --allow-dirty --workspace --exclude cuda-kernels-cli --no-verify

# Outside this repository (a folder under it would belong to its workspace),
# one per clone, the same on every run so that cargo rebuilds only what changed.
unpacked=${TMPDIR:-/tmp}/cuda-kernels-package.$(echo "$repo" | cksum | cut -d' ' -f1)
rm -rf "$unpacked"
mkdir -p "$unpacked/.cargo"
echo "[patch.crates-io]" >"$unpacked/.cargo/config.toml"
for name in "${crates[@]}"; do
  version=$(cargo pkgid -p "$name" | sed 's/.*[#@]//')
  tar -xzf "$CARGO_TARGET_DIR/package/$name-$version.crate" -C "$unpacked"
  echo "$name = { path = \"$unpacked/$name-$version\" }" >>"$unpacked/.cargo/config.toml"
done
# A user's project pins its own toolchain; this one is the repository's.
cp rust-toolchain.toml "$unpacked/"

wheel=$repo/.tools/ptxas/nvidia/cuda_nvcc
export CUDA_LIBRARY_PATH="${CUDA_LIBRARY_PATH:-$repo/.tools/cuda}"
[[ -f $wheel/nvvm/libdevice/libdevice.10.bc ]] &&
  export CUDA_KERNELS_LIBDEVICE="${CUDA_KERNELS_LIBDEVICE:-$wheel/nvvm/libdevice/libdevice.10.bc}"
[[ -x $wheel/bin/ptxas ]] && export PTXAS="${PTXAS:-$wheel/bin/ptxas}"
(cd "$unpacked"/cuda-kernels-capi-* && cargo build --quiet)
(cd "$unpacked"/cuda-kernels-[0-9]* && cargo test --quiet --test ptx)
