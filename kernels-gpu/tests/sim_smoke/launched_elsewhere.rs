//! The kernel lists this tier leaves to a `[sim]` family of the GPU test
//! binary, and where each is launched there.

/// The families whose kernels this tier leaves to a `[sim]` family of the
/// GPU test binary (`tests/gpu/`, run in CI on the simulator), and where.
pub(super) const LAUNCHED_ELSEWHERE: [(&[&str], &str); 11] = [
    (
        cuda_kernels_gpu::fidelity::FIDELITY_KERNELS,
        "tests/gpu/fidelity/, each correct case under seeds 1 to 20",
    ),
    (
        cuda_kernels_gpu::gemm::GEMM_KERNELS,
        "tests/gpu/half_precision/gemm.rs (the GEMM family)",
    ),
    (
        cuda_kernels_gpu::float16_checks::KERNELS,
        "tests/gpu/half_precision/elementwise_and_reduce.rs (the f16 and bf16 operations)",
    ),
    (
        &[
            "shared_atomics_test",
            "shared_atomic_misaligned",
            "warp_match_test",
            "gpu_float_test_f32",
            "gpu_float_test_f64",
        ],
        "tests/gpu/primitives.rs (the shared-memory atomics, warp matches and float methods)",
    ),
    (
        cuda_kernels_gpu::sort::SORT_KERNELS,
        "tests/gpu/sort.rs (every key type, keys and pairs, both orders)",
    ),
    (
        cuda_kernels_gpu::histogram::HISTOGRAM_KERNELS,
        "tests/gpu/histogram.rs",
    ),
    (
        cuda_kernels_gpu::scan::built_in::SCAN_KERNELS,
        "tests/gpu/collectives.rs (every type and operation, both kinds)",
    ),
    (
        cuda_kernels_gpu::select::built_in::SELECT_KERNELS,
        "tests/gpu/collectives.rs (by predicate and by flags, every type)",
    ),
    (
        cuda_kernels_gpu::collective_checks::KERNELS,
        "tests/gpu/collectives.rs (the warp and block collectives, every type)",
    ),
    (
        cuda_kernels_gpu::collective_checks::LOAD_STORE_KERNELS,
        "tests/gpu/collectives.rs (block loads and stores, the misuse faults)",
    ),
    (
        cuda_kernels_gpu::collective_checks::LOOK_BACK_KERNELS,
        "tests/gpu/collectives.rs (the look-back over states filled in by hand)",
    ),
];

/// The f16 and bf16 entries of the elementwise and reduce families
/// (`elementwise_sum_f16`, `reduce_max_bf16`…): launched by
/// tests/gpu/half_precision/elementwise_and_reduce.rs (`elementwise_f16_bf16`,
/// `reduce_f16_bf16`).
pub(super) fn sixteen_bit_family(kernel: &str) -> bool {
    (kernel.starts_with("elementwise_") || kernel.starts_with("reduce_"))
        && (kernel.ends_with("_f16") || kernel.ends_with("_bf16"))
}
