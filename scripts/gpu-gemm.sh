#!/usr/bin/env bash
# The GEMM family's GPU session in one call (the device machine has no Rust):
#
#   here:  bash scripts/pack-gpu.sh .gpu-run gpu && cp scripts/gpu-gemm.sh .gpu-run/
#   there: bash .gpu-run/gpu-gemm.sh .gpu-run [tests] [bench] [ncu]
#
# tests: the GEMM tests (`half_precision::`, `matrices::`) on the GPU, with
#        CUDA_KERNELS_REQUIRE_GPU=1 (an ignored or simulated test fails);
# bench: the gemm part of `cuda-kernels bench` (CUDA_KERNELS_GEMM_CASES picks
#        rows), JSON to $OUT/gemm.json;
# ncu:   Nsight Compute on one wgmma launch of each case in NCU_CASES (a
#        comma-separated list of bench labels, `4096³ NN bf16 → f32` by
#        default): speed of light, warp states, occupancy and the SASS lines
#        with the most stall samples, to $OUT/ncu-*.txt.
# Logs go to $OUT (the device tool brings them back).
set -uo pipefail
dir="${1:?usage: gpu-gemm.sh PACKED_DIR [tests] [bench] [ncu]}"; shift
out="${OUT:-/tmp/gpu-gemm-out}"; mkdir -p "$out"
cd "$dir"
export CUDA_KERNELS_REQUIRE_GPU=1
unset CUDA_KERNELS_SIM CUDA_KERNELS_SIM_COMPARE
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader
status=0
for part in "$@"; do
  case "$part" in
    tests)
      for family in half_precision:: matrices::; do
        ./gpu "$family" >>"$out/tests.log" 2>&1 || status=1
      done
      grep -E "^test result|FAILED|panicked|failed" "$out/tests.log" | head -20 ;;
    bench)
      CUDA_KERNELS_BENCH_ONLY=gemm ./cuda-kernels bench --json "$out/gemm.json" >"$out/bench.log" 2>&1 || status=1
      grep -E "TFLOP|ratio|fail|FAIL" "$out/bench.log" | tail -60 ;;
    ncu)
      IFS=',' read -ra cases <<<"${NCU_CASES:-4096³ NN bf16 → f32}"
      for c in "${cases[@]}"; do
        tag="$(echo "$c" | tr -c 'A-Za-z0-9' '_' | tr -s '_')"
        CUDA_KERNELS_BENCH_ONLY=gemm CUDA_KERNELS_GEMM_CASES="$c" \
          ncu --kernel-name regex:gemm_wgmma --launch-skip 2 --launch-count 1 \
          --section SpeedOfLight --section WarpStateStats --section Occupancy \
          --section LaunchStats --section SchedulerStats --section SourceCounters \
          --section MemoryWorkloadAnalysis \
          --metrics sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active,sm__inst_executed_pipe_tensor_op_hmma.avg.pct_of_peak_sustained_active \
          -o "$out/ncu-$tag" -f ./cuda-kernels bench >"$out/ncu-$tag.run.log" 2>&1 || status=1
        ncu --import "$out/ncu-$tag.ncu-rep" --page details >"$out/ncu-$tag.txt" 2>&1
        ncu --import "$out/ncu-$tag.ncu-rep" --page source --csv --print-source sass \
          >"$out/ncu-$tag.sass.csv" 2>&1
        grep -E "Duration|Tensor|tensor|Throughput|Stall|Warp Cycles|Achieved|Registers|Issued" "$out/ncu-$tag.txt" | head -40
      done ;;
    *) echo "gpu-gemm.sh: unknown part $part" >&2; status=2 ;;
  esac
done
exit $status
