#!/usr/bin/env bash
# Runs NVIDIA compute-sanitizer over the packed GPU test binary (`gpu`,
# family by family) and the demos, on the GPU machine:
#
#   here:  bash scripts/pack-gpu.sh .gpu-all && cp scripts/sanitize.sh .gpu-all/
#   there: bash .gpu-all/sanitize.sh .gpu-all      (through the device tool)
#
# memcheck (with the leak check) and initcheck run over every test family and
# demo; racecheck and synccheck, which look at shared memory and barriers,
# over the families whose kernels use them (foundation's block_reverse,
# matrices' tiled matmul, reduce). Runs go 6 at a time, each limited to
# 240 s. Tests that provoke errors on purpose run with the sanitizer's API
# error report off (a refused PTX, a kernel name that does not exist) or are
# skipped (the deliberate device trap); the largest sizes are left out
# (CUDA_KERNELS_SANITIZE, and the --skip list below). Prints one summary line
# per run and exits non-zero if any run reported an error or did not finish.
set -uo pipefail
dir="${1:?usage: sanitize.sh PACKED_DIR}"
cd "$dir"
san="$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)"
export CUDA_KERNELS_SANITIZE=1
# A test that cannot reach the GPU fails instead of reporting ignored: a
# clean summary must mean the kernels ran.
export CUDA_KERNELS_REQUIRE_GPU=1
logs="$(mktemp -d)"

# The GPU tests are one binary, `gpu`, with a module per family; each family
# runs separately (so that runs stay under the limit and go in parallel).
families=(foundation matrices reduce mandelbrot streams multi graphs)
# Tests that provoke driver errors on purpose (refused PTX, missing kernels,
# foreign contexts): their own runs, with the API error report off.
on_purpose_api="refusals bad_ptx_is_a_typed_error"
skip="--skip device_fault_is_reported_with_location --skip threads_x_launches_no_error_no_leak"
skip+=" --skip more_than_2_31_elements --skip matches_cpu_4096 --skip events_are_ordered"
for t in $on_purpose_api; do skip+=" --skip $t"; done

jobs="$logs/jobs"
: >"$jobs"
add() { echo "$1|$2" >>"$jobs"; } # label | command line
if [ -x gpu ]; then
  for f in "${families[@]}"; do
    add "gpu $f:: memcheck" "$san --tool memcheck --leak-check full --error-exitcode 99 ./gpu $f:: $skip"
    add "gpu $f:: initcheck" "$san --tool initcheck --error-exitcode 99 ./gpu $f:: $skip"
    case "$f" in foundation|matrices|reduce)
      add "gpu $f:: synccheck" "$san --tool synccheck --error-exitcode 99 ./gpu $f:: $skip" ;;
    esac
  done
  for name in $on_purpose_api; do
    add "gpu $name (memcheck, deliberate API errors not reported)" \
        "$san --tool memcheck --leak-check full --report-api-errors no --error-exitcode 99 ./gpu $name"
    add "gpu $name (initcheck, deliberate API errors not reported)" \
        "$san --tool initcheck --report-api-errors no --error-exitcode 99 ./gpu $name"
  done
  # racecheck is the slowest tool: the tests whose kernels share memory, one by one.
  for name in foundation::shared_array_block_reverse matrices::matmul_small_matches_dot \
              matrices::matmul_views reduce::block_reduce_tree reduce::scratch_reuse_resets_the_counter \
              matrices::matmul_tile_selection matrices::matmul_split_k \
              reduce::warp_shuffles_and_votes reduce::seed_sum_of_1_to_10000_is_50005000; do
    add "gpu $name racecheck" "$san --tool racecheck --error-exitcode 99 ./gpu --exact $name"
  done
fi
# The demos, at sizes the sanitizer (10-100x slower) gets through quickly.
demos=(
  "multiply --n 65536" "vector-sum" "hello" "overhead --launches 200"
  "doubles-matrix --rows 33 --cols 70" "matmul --m 67 --k 45 --n 130" "elementwise --n 1000"
  "vector-sum-repeat --n 1000 --repeats 10" "gufunc-matmul --dim 10 --batch 3"
  "reduce --op sum --dtype f32 --n 100003" "reduce --op max --dtype i64 --n 5000"
  "mandelbrot --size 64 --iters 32 --path high-level --out /tmp/sanitize-m1.png"
  "mandelbrot --size 64 --iters 32 --path explicit-sync --out /tmp/sanitize-m2.png"
  "mult-ker --len 10000" "streams --arrays 4 --len 4096" "events --len 65536"
  "life --n 64 --sims 2 --steps 5 --out /tmp/sanitize-life.gif"
)
if [ -x cuda-kernels ]; then
  for d in "${demos[@]}"; do
    add "demo '$d' memcheck" "$san --tool memcheck --leak-check full --error-exitcode 99 ./cuda-kernels $d"
    add "demo '$d' initcheck" "$san --tool initcheck --error-exitcode 99 ./cuda-kernels $d"
    case "$d" in matmul*|reduce*)
      add "demo '$d' racecheck" "$san --tool racecheck --error-exitcode 99 ./cuda-kernels $d"
      add "demo '$d' synccheck" "$san --tool synccheck --error-exitcode 99 ./cuda-kernels $d" ;;
    esac
  done
fi

run_job() { # one line of the job list: label|command
  local label="${1%%|*}" cmd="${1#*|}" log
  log="$(mktemp -p "$LOGS")"
  timeout 240 bash -c "$cmd" >"$log" 2>&1
  local rc=$?
  local line; line="$(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$log" | tail -1)"
  [ -z "$line" ] && line="(no summary)"
  # What the test binary ran, where it is one.
  local tests; tests="$(grep -E '^test result:' "$log" | tail -1 | sed 's/; finished.*//')"
  [ -n "$tests" ] && line="$line; $tests"
  if [ $rc -ne 0 ] || ! grep -qE 'ERROR SUMMARY: 0 errors|RACECHECK SUMMARY: 0 hazards' "$log"; then
    echo "FAIL $label: exit $rc, $line"
    grep -E 'Invalid|Race|race|hazard|Barrier|Uninitialized|Leaked|ERROR|FAILED' "$log" | head -12 | sed 's/^/    /'
  else
    echo "ok   $label: $line"
  fi
}
export -f run_job
export LOGS="$logs"
echo "compute-sanitizer: $(wc -l <"$jobs") runs, 6 at a time"
tr '\n' '\0' <"$jobs" | xargs -0 -P 6 -I{} bash -c 'run_job "$1"' _ {} | tee "$logs/summary"
failed=$(grep -c '^FAIL' "$logs/summary")
echo "==== $(grep -c '^ok' "$logs/summary") clean, $failed with errors or unfinished"
[ "$failed" -eq 0 ]
