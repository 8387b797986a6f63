#!/usr/bin/env bash
# Mutation testing (issue 19): cargo-mutants changes the per-element
# functions, the launch plans and the reduce order one operator at a time,
# and the simulated suite must fail for each change.
#
#   scripts/mutants.sh [kernels|launch|reduce|all]   (default: all)
#
# Groups, each with the narrowest oracle that judges it:
#   kernels  kernels-gpu/src/{life,mandelbrot,multiply,elementwise,bandwidth}.rs
#            against the kernels crate's own tests: the simulator smoke tier
#            (every kernel run on the simulator), the literal-value tests of
#            the per-element functions and the unit tests;
#   launch   runtime/src/launch.rs against the runtime crate's unit tests;
#   reduce   the reduce order: host/src/reduce.rs's reduce_in_gpu_order
#            against the host crate's tests.
#
# Why these oracles and not `cargo test --test gpu`: that binary belongs to
# the root package, whose build.rs rebuilds kernels-gpu for nvptx64 (the
# builder prints rerun-if-changed for every kernels-gpu source), so every
# mutant of kernels-gpu/src would pay the inner nvptx build, a release build
# with -Zbuild-std and two ptxas runs, minutes on two shared cores. The
# kernels and host packages build no PTX. Everything runs under `nice`, one
# job at a time, with a timeout per test run (a mutant that hangs a kernel's
# loop, e.g. a grid-stride step of 0, times out and counts as caught by
# cargo-mutants' rules: reported as timeout).
#
# Mutants are tested in a random order (cargo-mutants' default), so that a
# run cut short is a random sample of its group.
#
# Results: target/mutants/<group>/mutants.out/{caught,missed,timeout,unviable}.txt
# and a summary line per group on stdout.
#
# Mutants that no test can catch, because the program means the same
# (equivalent mutants), are excluded here by name, one line of reason each:
set -euo pipefail
cd "$(dirname "$0")/.."
if ! cargo mutants --version >/dev/null 2>&1; then
  cargo install cargo-mutants --locked
fi
group="${1:-all}"
out=target/mutants
mkdir -p "$out"
common=(
  --shuffle --jobs 1 --baseline skip
  --timeout "${MUTANTS_TIMEOUT:-240}" --build-timeout "${MUTANTS_BUILD_TIMEOUT:-900}"
)
# Equivalent mutants (regexes over cargo-mutants' mutant names):
exclude=(
  # split's head, `(align - first % align) % align`: with `first + align`
  # for `first % align` it is `(-first) mod 2^64 % align`, the same number
  # for a power-of-two `align` (kernels-gpu builds with wrapping arithmetic).
  --exclude-re 'bandwidth\.rs:65:32: replace % with \+ in split'
)
run() {  # NAME ARGS...: one group
  local name="$1"; shift
  echo "=== mutants: $name"
  nice cargo mutants "${common[@]}" --output "$out/$name" "${exclude[@]}" "$@" || true
  local dir="$out/$name/mutants.out"
  printf '%s: caught %s, missed %s, timeout %s, unviable %s\n' "$name" \
    "$(wc -l <"$dir/caught.txt")" "$(wc -l <"$dir/missed.txt")" \
    "$(wc -l <"$dir/timeout.txt")" "$(wc -l <"$dir/unviable.txt")"
}
if [ "$group" = kernels ] || [ "$group" = all ]; then
  run kernels --package cuda-kernels-gpu --test-package cuda-kernels-gpu \
    -f kernels-gpu/src/life.rs -f kernels-gpu/src/mandelbrot.rs \
    -f kernels-gpu/src/multiply.rs -f kernels-gpu/src/elementwise.rs \
    -f kernels-gpu/src/bandwidth.rs
fi
if [ "$group" = launch ] || [ "$group" = all ]; then
  run launch --package cuda-kernels-runtime --test-package cuda-kernels-runtime \
    -f runtime/src/launch.rs
fi
if [ "$group" = reduce ] || [ "$group" = all ]; then
  run reduce --package cuda-kernels-host --test-package cuda-kernels-host \
    -f host/src/reduce.rs -F reduce_in_gpu_order
fi
