#!/usr/bin/env bash
# Runs NVIDIA compute-sanitizer (memcheck, racecheck, synccheck, initcheck)
# over the packed GPU test binaries and the demos, on the GPU machine:
#
#   here:  bash scripts/pack-gpu.sh .gpu-all        (packs tests + the CLI)
#   there: bash scripts/sanitize.sh .gpu-all        (through the device tool)
#
# Tests that provoke errors on purpose are run without the sanitizer's API
# error report (a refused PTX, a kernel name that does not exist) or skipped
# (the deliberate device trap, which runs in a child process). Prints one
# summary line per binary and tool, and exits non-zero if any reported errors.
set -uo pipefail
dir="${1:?usage: sanitize.sh PACKED_DIR}"
cd "$dir"
san="compute-sanitizer"
command -v "$san" >/dev/null || san=/usr/local/cuda/bin/compute-sanitizer
# Deliberate failures: API errors on purpose, and the trap test.
on_purpose_api=(bad_ptx_is_a_typed_error missing_kernel_is_a_typed_error missing_ptx_or_kernel_is_a_typed_error)
skip=(--skip device_fault_is_reported_with_location --skip threads_x_launches_no_error_no_leak)
for t in "${on_purpose_api[@]}"; do skip+=(--skip "$t"); done
status=0
summary=()
export CUDA_KERNELS_SANITIZE=1   # the tests leave their largest sizes out
run_one() { # label, then the command; each run is limited to 150 s
  local label="$1"; shift
  local log; log="$(mktemp)"
  timeout 150 "$@" >"$log" 2>&1
  local rc=$?
  local line; line="$(grep -E 'ERROR SUMMARY' "$log" | tail -1)"
  [ -z "$line" ] && line="(no summary, exit $rc)"
  summary+=("$label: $line")
  echo "$label: $line"
  if [ $rc -ne 0 ] || ! grep -q 'ERROR SUMMARY: 0 errors' "$log"; then
    status=1
    echo "---- $label (exit $rc)"; grep -E 'Invalid|Race|race|Barrier|Uninitialized|ERROR|error|FAILED' "$log" | head -30
  fi
  rm -f "$log"
}
for t in gpu_*; do
  [ -x "$t" ] || continue
  for tool in memcheck racecheck synccheck initcheck; do
    extra=()
    [ "$tool" = memcheck ] && extra=(--leak-check full)
    run_one "$t $tool" "$san" --tool "$tool" "${extra[@]}" --error-exitcode 99 "./$t" "${skip[@]}"
  done
done
for t in gpu_foundation gpu_mandelbrot; do
  [ -x "$t" ] || continue
  for name in "${on_purpose_api[@]}"; do
    ./"$t" --list 2>/dev/null | grep -q "$name" || continue
    run_one "$t $name (memcheck, deliberate API errors not reported)" \
      "$san" --tool memcheck --report-api-errors no --error-exitcode 99 "./$t" --exact "$name"
  done
done
# The demos, at sizes the sanitizer (10-100x slower) gets through quickly.
demos=(
  "multiply --n 65536"
  "vector-sum"
  "hello"
  "overhead --launches 200"
  "doubles-matrix --rows 33 --cols 70"
  "matmul --m 67 --k 45 --n 130"
  "elementwise --n 1000"
  "vector-sum-repeat --n 1000 --repeats 10"
  "gufunc-matmul --dim 10 --batch 3"
  "reduce --op sum --dtype f32 --n 100003"
  "reduce --op max --dtype i64 --n 5000"
  "mandelbrot --size 64 --iters 32 --path high-level --out /tmp/sanitize-mandelbrot.png"
  "mandelbrot --size 64 --iters 32 --path explicit-sync --out /tmp/sanitize-mandelbrot.png"
  "mult-ker --len 10000"
  "streams --arrays 4 --len 4096"
  "events --len 65536"
  "life --n 64 --sims 2 --steps 5 --out /tmp/sanitize-life.gif"
)
if [ -x cuda-kernels ]; then
  for d in "${demos[@]}"; do
    for tool in memcheck racecheck synccheck initcheck; do
      # shellcheck disable=SC2086
      run_one "demo '$d' $tool" "$san" --tool "$tool" --error-exitcode 99 ./cuda-kernels $d
    done
  done
fi
echo "==== compute-sanitizer summary"
printf '%s\n' "${summary[@]}"
exit $status
