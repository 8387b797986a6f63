//! The foundation: the `Gpu` and its PTX module, the launch helpers,
//! `multiply` (device and unified memory), `vector_sum_i32`, `hello_kernel`'s
//! output, launch overhead, `block_reverse_i32` (shared memory), and device
//! faults reported with their location; their properties (random lengths
//! and values against the CPU) and their refusals of bad input, including
//! every launcher on a module without its kernel.
use std::fmt::{self, Debug};
use std::process::ExitCode;

use cuda_kernels::DeviceSlice;
use cuda_kernels::async_mem::Lane;
use cuda_kernels::cust::memory::DeviceCopy;
use cuda_kernels::device_checks::block_reverse_i32_cpu;
use cuda_kernels::launch::{
    MAX_GRID_X, MAX_GRID_YZ, check_block, checked_elements, grid_1d_capped, grid_exact, same_len,
};
use cuda_kernels::life::LifeSims;
use cuda_kernels::mandelbrot::KERNEL as MANDEL;
use cuda_kernels::multiply::{MemoryMode, multiply_cpu, multiply_inputs, vector_sum_i32_cpu};
use cuda_kernels::ndarray::{Array1, Array2, ArrayView1, s};
use cuda_kernels::reduce::{Max, Sum, Xor};
use cuda_kernels::streams::{SerialBatch, StreamBatch};
use cuda_kernels::{Error, Gpu};
use libtest_mimic::{Failed, Trial};
use proptest::prelude::*;

use crate::common::{AWKWARD_LENGTHS, ensure, fail};
use crate::support::cases::{Cases, Want, equal, harmless, kernel_less, m, require};
use crate::support::props::{Draw, all_same, brief, case_err, check};
use crate::support::{
    PTX_GARBAGE, PTX_WITHOUT_KERNEL, TempFile, huge1, huge2, huged, missing_path, rerun_self,
    rerun_self_printing, truncated_ptx,
};
use cuda_kernels::prelude::*;

const HELLO_CHILD: &str = "CUDA_KERNELS_TEST_HELLO_CHILD";
const FAULT_CHILD: &str = "CUDA_KERNELS_TEST_FAULT_CHILD";

/// The trials of this family, in the order they are listed.
pub fn trials() -> Vec<Trial> {
    vec![
        kernel!(multiply_matches_cpu_exactly),
        hardware!("unified memory, timings", multiply_unified_matches_cpu),
        kernel!(multiply_strided_views),
        kernel!(vector_sum_i32_matches_cpu),
        kernel!(vectorized_heads_and_tails_on_sub_slices),
        kernel!(hello_prints_three_lines),
        hardware_alone!("launch timings", empty_kernel_launch_rates),
        hardware!("timings", launchers_report_their_times),
        hardware!("the driver's PTX loader", bad_ptx_is_a_typed_error),
        kernel!(shared_array_block_reverse),
        kernel!(device_fault_is_reported_with_location),
        hardware!(
            "the driver's cubin loader",
            embedded_cubin_is_loaded_on_its_architecture
        ),
        cpu!(math_ptx_is_self_contained),
        kernel!(device_math_within_cuda_bounds),
        kernel!(multiply_agrees_with_cpu),
        kernel!(vector_sum_i32_agrees_with_cpu),
        cpu!(launch_helper_refusals),
        cpu!(ptx_file_refusals),
        kernel!(refusals),
        kernel!(launch_shapes_past_the_limits_are_refused),
        hardware!("the driver's PTX loader", module_refusals),
        kernel!(a_tebibyte_is_out_of_device_memory),
    ]
}

/// Issue 19: 1 TiB is more than the device has, on the GPU (an H100's
/// 80 GiB) and on the simulator (the simulated H100's): the same
/// out-of-memory error of `cuMemAlloc` on both, for a raw allocation and
/// for a launcher given an input it cannot hold.
fn a_tebibyte_is_out_of_device_memory(gpu: &Gpu) -> Result<(), Failed> {
    let oom = |what: &str, e: Option<Error>| match e {
        Some(Error::Cuda {
            operation: "cuMemAlloc",
            source: cuda_kernels::cust::error::CudaError::OutOfMemory,
            ..
        }) => Ok(()),
        other => Err(Failed::from(format!(
            "{what}: expected cuMemAlloc's out-of-memory error, got {other:?}"
        ))),
    };
    // SAFETY: refused, so nothing is read.
    oom(
        "1 TiB of u8",
        unsafe { gpu.uninitialized::<u8>(1 << 40) }.err(),
    )?;
    oom("2^38 zeroed f32", gpu.zeroed::<f32>(1 << 38).err())?;
    // What fits is still allocated, and freed memory is given back.
    for _ in 0..3 {
        drop(gpu.zeroed::<f32>(1 << 20).map_err(fail)?);
    }
    Ok(())
}

/// Issue 14: on a device an embedded cubin runs on (sm_80 and sm_90 builds
/// with ptxas), `cuda_kernels::gpu()` loads it, not the PTX.
fn embedded_cubin_is_loaded_on_its_architecture(gpu: &Gpu) -> Result<(), Failed> {
    use cuda_kernels::cust::device::DeviceAttribute::{
        ComputeCapabilityMajor, ComputeCapabilityMinor,
    };
    let device = gpu.device().map_err(fail)?;
    let cc = |a| device.get_attribute(a).map(|v| v.max(0) as u32);
    let (major, minor) = (cc(ComputeCapabilityMajor)?, cc(ComputeCapabilityMinor)?);
    let image = gpu.image();
    eprintln!("sm_{major}{minor}: {image}");
    match cuda_kernels::image::pick_cubin(cuda_kernels::CUBINS, major, minor) {
        Some(c) => ensure(
            *image == cuda_kernels::LoadedImage::Cubin { sm: c.sm },
            || {
                format!(
                    "the sm_{} cubin matches sm_{major}{minor}, but {image} was loaded",
                    c.sm
                )
            },
        ),
        None => ensure(
            matches!(image, cuda_kernels::LoadedImage::Ptx { .. }),
            || format!("no cubin matches sm_{major}{minor}, yet {image} was loaded"),
        ),
    }
}

/// The child processes some tests start (this binary again, with a
/// variable set): `Some(exit code)` in a child, `None` otherwise.
pub fn child_process() -> Option<ExitCode> {
    // Re-executed by `hello_prints_three_lines` to capture the device printf
    // output (it goes to this process's stdout).
    if std::env::var_os(HELLO_CHILD).is_some() {
        let Ok(gpu) = cuda_kernels::gpu() else {
            return Some(ExitCode::FAILURE);
        };
        return Some(match gpu.hello(1, 3, false) {
            Ok(()) => ExitCode::SUCCESS,
            Err(_) => ExitCode::FAILURE,
        });
    }
    // Re-executed by `device_fault_is_reported_with_location`: a trap ruins the
    // process's CUDA context, so it happens in a child.
    if std::env::var_os(FAULT_CHILD).is_some() {
        return Some(fault_child());
    }
    None
}

// ---------------------------------------------------------------------------
// Correctness.

fn multiply_matches_cpu_exactly(gpu: &Gpu) -> Result<(), Failed> {
    let large: &[usize] = if crate::common::under_sanitizer() || crate::common::simulated(gpu) {
        &[]
    } else {
        &[1 << 24]
    };
    for &n in AWKWARD_LENGTHS.iter().chain(large) {
        let (a, b) = multiply_inputs(n, n as u64);
        let c = gpu.multiply(a.view(), b.view()).map_err(fail)?;
        let expected = multiply_cpu(a.view(), b.view()).map_err(fail)?;
        ensure(c == expected, || format!("n = {n}: GPU and CPU differ"))?;
    }
    Ok(())
}

fn multiply_unified_matches_cpu(gpu: &Gpu) -> Result<(), Failed> {
    for &n in &[1usize, 257, 1 << 20] {
        let (a, b) = multiply_inputs(n, 7);
        let (c, t) = gpu
            .multiply_timed(a.view(), b.view(), MemoryMode::Unified)
            .map_err(fail)?;
        ensure(c == multiply_cpu(a.view(), b.view()).map_err(fail)?, || {
            format!("n = {n}")
        })?;
        ensure(
            t.kernel_ms >= 0.0 && t.with_transfers_ms >= t.kernel_ms,
            || format!("timing {t:?}"),
        )?;
    }
    Ok(())
}

fn multiply_strided_views(gpu: &Gpu) -> Result<(), Failed> {
    let (a, b) = multiply_inputs(1001, 3);
    let (a2, b2) = (a.slice(s![..;2]), b.slice(s![..;-2]));
    let c = gpu.multiply(a2, b2).map_err(fail)?;
    ensure(c == multiply_cpu(a2, b2).map_err(fail)?, || {
        "strided views".into()
    })
}

fn vector_sum_i32_matches_cpu(gpu: &Gpu) -> Result<(), Failed> {
    for &n in AWKWARD_LENGTHS {
        let a: Array1<i32> = (0..n as i32).map(|i| i.wrapping_mul(7919)).collect();
        let b: Array1<i32> = (0..n as i32).map(|i| i32::MAX - i).collect(); // overflows: wraps on both sides
        let r = gpu.vector_sum_i32(a.view(), b.view()).map_err(fail)?;
        ensure(
            r == vector_sum_i32_cpu(a.view(), b.view()).map_err(fail)?,
            || format!("n = {n}"),
        )?;
    }
    Ok(())
}

/// `multiply` and `vector_sum_i32` on device sub-slices that start 0..=3
/// elements into their buffers (the same offset for every array: a head up
/// to the next 128-byte line; offsets 1, 5, 9: a head up to the next
/// 16-byte boundary; disagreeing offsets: the element path), at lengths
/// 1..=33 and 2^k ± 1: exactly the CPU's results, and nothing outside the
/// output slice is written.
fn vectorized_heads_and_tails_on_sub_slices(gpu: &Gpu) -> Result<(), Failed> {
    // Lengths up to 2^16 + 1 only: this test shares the GPU's stream with the
    // launch-rate test (gpu_matrices covers 2^20 ± 1 on the same map).
    let lengths = (1..=33usize).chain([1023, 1025, 65_535, 65_537]);
    for n in lengths {
        for offsets in [
            [0, 0, 0],
            [1, 1, 1],
            [2, 2, 2],
            [3, 3, 3],
            [1, 5, 9],
            [1, 2, 0],
            [0, 3, 1],
        ] {
            let (a, b) = multiply_inputs(n, (n + offsets[0]) as u64);
            let (a, b) = (a.to_vec(), b.to_vec());
            sub_slice_pair(
                gpu,
                "multiply",
                [&a, &b],
                offsets,
                [-7.0, -9.0],
                |a, b, c| gpu.multiply_on_device(a, b, c),
                multiply_cpu,
            )?;
            let ai: Vec<i32> = (0..n as i32).map(|i| i.wrapping_mul(7919)).collect();
            let bi: Vec<i32> = (0..n as i32).map(|i| i32::MAX - i).collect();
            sub_slice_pair(
                gpu,
                "vector_sum_i32",
                [&ai, &bi],
                offsets,
                [-7, -9],
                |a, b, c| gpu.vector_sum_i32_on_device(a, b, c),
                vector_sum_i32_cpu,
            )?;
        }
    }
    Ok(())
}

/// `launch(a, b, c)` with the inputs `host` and the output `c` as device
/// sub-slices at `offsets` into buffers padded with `pad[0]` before and
/// `pad[1]` after: `c` must equal `cpu(a, b)` exactly, and the padding stay.
fn sub_slice_pair<T>(
    gpu: &Gpu,
    kernel: &str,
    host: [&[T]; 2],
    offsets: [usize; 3],
    pad: [T; 2],
    launch: impl Fn(&DeviceSlice<T>, &DeviceSlice<T>, &mut DeviceSlice<T>) -> cuda_kernels::Result<()>,
    cpu: impl Fn(ArrayView1<T>, ArrayView1<T>) -> cuda_kernels::Result<Array1<T>>,
) -> Result<(), Failed>
where
    T: DeviceCopy + Copy + Default + PartialEq + std::fmt::Debug,
{
    let n = host[0].len();
    let what = || format!("{kernel}, n = {n}, offsets {offsets:?}");
    let padded = |v: &[T], o: usize| -> Vec<T> {
        let mut p = vec![pad[0]; o];
        p.extend_from_slice(v);
        p.extend_from_slice(&[pad[1]; 3]);
        p
    };
    let [oa, ob, oc] = offsets;
    let da = gpu.to_device(&padded(host[0], oa)).map_err(fail)?;
    let db = gpu.to_device(&padded(host[1], ob)).map_err(fail)?;
    let dc = gpu
        .to_device(&padded(&vec![T::default(); n], oc))
        .map_err(fail)?;
    let mut sc = dc.index(oc..oc + n);
    launch(&da.index(oa..oa + n), &db.index(ob..ob + n), &mut sc).map_err(fail)?;
    gpu.synchronize("test").map_err(fail)?;
    let mut got = vec![T::default(); dc.len()];
    dc.copy_to(&mut got[..]).map_err(fail)?;
    let expected = cpu(ArrayView1::from(host[0]), ArrayView1::from(host[1])).map_err(fail)?;
    ensure(
        got[oc..oc + n] == expected.as_slice().unwrap_or(&[])[..],
        || format!("{}: GPU and CPU differ", what()),
    )?;
    ensure(
        got[..oc].iter().all(|&v| v == pad[0]) && got[oc + n..].iter().all(|&v| v == pad[1]),
        || format!("{}: wrote outside the slice", what()),
    )
}

fn hello_prints_three_lines(gpu: &Gpu) -> Result<(), Failed> {
    let out = rerun_self(gpu, HELLO_CHILD)?;
    ensure(out.status.success(), || {
        format!("child failed: {}", String::from_utf8_lossy(&out.stderr))
    })?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    let lines = stdout
        .lines()
        .filter(|l| *l == "Hello World From GPU!")
        .count();
    ensure(lines == 3, || {
        format!("expected 3 hello lines, got {lines}: {stdout:?}")
    })
}

/// Runs alone (`hardware_alone!`): the pipelined launches queue on the
/// stream every trial shares, behind the other trials' kernels, which would
/// be timed with them (seen on 2×H200 among the other trials: 2,354
/// pipelined launches/s against 9,068 synchronous).
fn empty_kernel_launch_rates(gpu: &Gpu) -> Result<(), Failed> {
    let r = gpu.launch_overhead(2000).map_err(fail)?;
    // Under compute-sanitizer every launch is instrumented: only check that it ran.
    let floor = if crate::common::under_sanitizer() {
        0.0
    } else {
        1000.0
    };
    ensure(
        r.synchronous_per_s > floor && r.pipelined_per_s > r.synchronous_per_s * 0.5,
        || format!("{r:?}"),
    )
}

/// The timed forms of the launchers (CUDA events; the untimed forms are
/// what the kernel-result tests use) give their result and sane times: the
/// kernel's positive, the whole call's (copies included) at least the
/// kernel's.
fn launchers_report_their_times(gpu: &Gpu) -> Result<(), Failed> {
    use cuda_kernels::mandelbrot::{BLOCK, MandelbrotParams, mandelbrot_cpu};
    use cuda_kernels::matrices::{MatmulKernel, check_matmul, vector_sum_repeat_cpu};
    let sane = |what: &str, kernel_ms: f32, total_ms: f32| {
        ensure(kernel_ms > 0.0 && total_ms >= kernel_ms, || {
            format!("{what}: kernel {kernel_ms} ms, with transfers {total_ms} ms")
        })
    };
    let (a, b) = multiply_inputs(1 << 20, 7);
    let (c, t) = gpu
        .multiply_timed(a.view(), b.view(), MemoryMode::Device)
        .map_err(fail)?;
    ensure(c == multiply_cpu(a.view(), b.view()).map_err(fail)?, || {
        "multiply_timed: wrong result".into()
    })?;
    sane("multiply_timed", t.kernel_ms, t.with_transfers_ms)?;
    let m = Array2::from_shape_fn((300, 200), |(i, j)| (i * 7 + j) as f32 * 1e-3);
    for kernel in [MatmulKernel::Naive, MatmulKernel::Tiled] {
        let (c, t) = gpu.matmul_timed(kernel, m.view(), m.t()).map_err(fail)?;
        let chk = check_matmul(c.view(), m.view(), m.t()).map_err(fail)?;
        ensure(chk.passed(), || format!("matmul_timed {kernel:?}: {chk:?}"))?;
        sane("matmul_timed", t.kernel_ms, t.with_transfers_ms)?;
    }
    let x = Array1::from_elem(10_000, 0.25f32);
    let (c, t) = gpu
        .vector_sum_repeat_timed(x.view(), x.view(), 1000)
        .map_err(fail)?;
    let want = vector_sum_repeat_cpu(x.view(), x.view(), 1000).map_err(fail)?;
    ensure(c == want, || "vector_sum_repeat_timed: wrong result".into())?;
    sane("vector_sum_repeat_timed", t.kernel_ms, t.with_transfers_ms)?;
    let p = MandelbrotParams::default();
    let lattice = p.lattice();
    let (g, t) = gpu
        .mandelbrot_timed(lattice.view(), p.max_iters, p.upper_bound, BLOCK)
        .map_err(fail)?;
    let want = mandelbrot_cpu(lattice.view(), p.max_iters, p.upper_bound).map_err(fail)?;
    ensure(g == want, || "mandelbrot_timed: wrong graph".into())?;
    sane("mandelbrot_timed", t.kernel_ms, t.with_transfers_ms)
}

/// A module the driver refuses: `ModuleLoad`, whose details name the PTX's
/// version and target (a missing file is in `ptx_file_refusals`).
fn bad_ptx_is_a_typed_error(_gpu: &Gpu) -> Result<(), Failed> {
    match Gpu::from_ptx(".version 6.0\n.target sm_70\n.address_size 64\nthis is not ptx") {
        Err(Error::ModuleLoad { details, .. }) => ensure(
            details.contains(".version 6.0") && details.contains("sm_70"),
            || details.clone(),
        ),
        other => Err(format!("corrupt PTX: expected ModuleLoad, got {:?}", other.err()).into()),
    }
}

/// In the child: fail on purpose at block 2, thread 5; print the error; then
/// check the next call: on the GPU it fails cleanly too (no hang, no
/// success: the context is ruined); on the simulator it works (a fault
/// leaves the simulator usable).
fn fault_child() -> ExitCode {
    let Ok(gpu) = cuda_kernels::gpu() else {
        return ExitCode::FAILURE;
    };
    match gpu.fault_test(2, 5) {
        Err(e @ Error::DeviceFault { .. }) => println!("FAULT: {e}"),
        other => {
            println!("expected DeviceFault, got {other:?}");
            return ExitCode::FAILURE;
        }
    }
    let a = Array1::<f32>::ones(10);
    match (gpu.multiply(a.view(), a.view()), gpu.is_simulated()) {
        (Err(e), false) => println!("AFTER: {e}"),
        (Ok(c), true) if c == a => println!("AFTER: the simulator still works"),
        (other, _) => {
            println!(
                "after the fault, on the simulator: {}: {other:?}",
                gpu.is_simulated()
            );
            return ExitCode::FAILURE;
        }
    }
    ExitCode::SUCCESS
}

fn device_fault_is_reported_with_location(gpu: &Gpu) -> Result<(), Failed> {
    rerun_self_printing(
        gpu,
        FAULT_CHILD,
        &[
            "fault_test_kernel: the kernel failed at",
            "hello.rs:",
            "block [2, 0, 0], thread [5, 0, 0]",
            "fails here on purpose",
            "AFTER:",
        ],
    )
}

fn shared_array_block_reverse(gpu: &Gpu) -> Result<(), Failed> {
    use cuda_kernels::device_checks::block_reverse_i32_cpu;
    for &n in AWKWARD_LENGTHS {
        let x: Array1<i32> = (0..n as i32).collect();
        let got = gpu.block_reverse_i32(x.view()).map_err(fail)?;
        ensure(got == block_reverse_i32_cpu(x.view()), || {
            format!("n = {n}")
        })?;
    }
    Ok(())
}

// ---------------------------------------------------------------------------
// Properties.

/// Two equally long arrays.
struct Pair<T> {
    a: Vec<T>,
    b: Vec<T>,
}

impl<T: Debug> Debug for Pair<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "a = {}, b = {}", brief(&self.a), brief(&self.b))
    }
}

fn pairs<S: Strategy + 'static>(
    len: impl Strategy<Value = usize>,
    elem: S,
) -> impl Strategy<Value = Pair<S::Value>> {
    len.prop_perturb(move |n, rng| {
        let mut d = Draw::new(rng);
        Pair {
            a: d.vec(&elem, n),
            b: d.vec(&elem, n),
        }
    })
}

/// Random length 1..5000, values in [-1000, 1000): `multiply` equals
/// `multiply_cpu` exactly (64 cases).
fn multiply_agrees_with_cpu(gpu: &Gpu) -> Result<(), Failed> {
    check(64, pairs(1..5000usize, -1e3f32..1e3), |p| {
        let (a, b) = (Array1::from(p.a), Array1::from(p.b));
        let c = gpu.multiply(a.view(), b.view()).map_err(case_err)?;
        let want = multiply_cpu(a.view(), b.view()).map_err(case_err)?;
        all_same("multiply", &c, &want)
    })
}

/// Random length 1..5000, any i32 (sums wrap): `vector_sum_i32` equals its
/// CPU reference exactly (64 cases).
fn vector_sum_i32_agrees_with_cpu(gpu: &Gpu) -> Result<(), Failed> {
    check(64, pairs(1..5000usize, any::<i32>()), |p| {
        let (a, b) = (Array1::from(p.a), Array1::from(p.b));
        let r = gpu.vector_sum_i32(a.view(), b.view()).map_err(case_err)?;
        let want = vector_sum_i32_cpu(a.view(), b.view()).map_err(case_err)?;
        all_same("vector_sum_i32", &r, &want)
    })
}

// ---------------------------------------------------------------------------
// Refusals.

fn launch_helper_refusals() -> Result<(), Failed> {
    let mut t = Cases::new("foundation::launch_helper_refusals");
    let k = "k";
    for (case, n, block) in [
        ("grid_1d_capped: n = 0", 0, 256),
        ("grid_1d_capped: block 0", 10, 0),
        ("grid_1d_capped: block 1025", 10, 1025),
        ("grid_1d_capped: block u32::MAX", 10, u32::MAX),
    ] {
        t.refuse(case, Want::Invalid(k), || grid_1d_capped(k, n, block));
    }
    for (case, n, want) in [
        ("grid_1d_capped: n = 1", 1usize, 1u32),
        ("grid_1d_capped: n = 2^31 − 1", MAX_GRID_X as usize, 1 << 23),
        ("grid_1d_capped: n = 2^32", 1 << 32, 1 << 24),
        (
            "grid_1d_capped: n = usize::MAX caps",
            usize::MAX,
            MAX_GRID_X,
        ),
    ] {
        t.works(case, || {
            let block = if n == usize::MAX { 1 } else { 256 };
            equal(case, grid_1d_capped(k, n, block).map_err(m)?, want)
        });
    }
    for (case, extent, block, axis) in [
        (
            "grid_exact: x past 2^31 − 1 blocks",
            (MAX_GRID_X as usize + 1) * 32,
            32,
            "x",
        ),
        ("grid_exact: x at usize::MAX", usize::MAX, 1, "x"),
        ("grid_exact: y past 65,535 blocks", 65_535 * 32 + 1, 32, "y"),
        ("grid_exact: z past 65,535 blocks", 65_536, 1, "z"),
    ] {
        t.refuse(case, Want::Invalid(k), || {
            grid_exact(k, extent, block, axis)
        });
    }
    for (case, extent, block, axis, want) in [
        (
            "grid_exact: x at 2^31 − 1 blocks",
            MAX_GRID_X as usize * 32,
            32,
            "x",
            MAX_GRID_X,
        ),
        (
            "grid_exact: y at 65,535 blocks",
            65_535 * 32,
            32,
            "y",
            MAX_GRID_YZ,
        ),
        ("grid_exact: one element", 1, 32, "y", 1),
        ("grid_exact: zero elements need no block", 0, 32, "x", 0),
    ] {
        t.works(case, || {
            equal(case, grid_exact(k, extent, block, axis).map_err(m)?, want)
        });
    }
    for (case, shape) in [
        ("check_block: (0, 1, 1)", (0, 1, 1)),
        ("check_block: (1, 0, 1)", (1, 0, 1)),
        ("check_block: (1, 1, 0)", (1, 1, 0)),
        ("check_block: 1025 threads", (1025, 1, 1)),
        ("check_block: 32 × 33", (32, 33, 1)),
        ("check_block: z = 65", (1, 1, 65)),
        (
            "check_block: u32::MAX³ (overflows u32)",
            (u32::MAX, u32::MAX, u32::MAX),
        ),
        (
            "check_block: 2^16 × 2^16 (product 2^32)",
            (1 << 16, 1 << 16, 1),
        ),
    ] {
        t.refuse(case, Want::Invalid(k), || check_block(k, shape));
    }
    for (case, shape) in [
        ("check_block: (1, 1, 1)", (1, 1, 1)),
        ("check_block: 1024 threads", (1024, 1, 1)),
        ("check_block: (1, 1, 64)", (1, 1, 64)),
        ("check_block: 32 × 32", (32, 32, 1)),
    ] {
        t.works(case, || check_block(k, shape).map_err(m));
    }
    for (case, dims) in [
        ("checked_elements: usize::MAX × 2", &[usize::MAX, 2][..]),
        ("checked_elements: 2^32 × 2^32", &[1 << 32, 1 << 32]),
        ("checked_elements: 2^62 × 4", &[1 << 62, 4]),
    ] {
        t.refuse(case, Want::Invalid(k), || checked_elements(k, dims));
    }
    for (case, dims, want) in [
        ("checked_elements: no dimension", &[][..], 1usize),
        ("checked_elements: a zero", &[0, usize::MAX], 0),
        ("checked_elements: 2^31 × 2", &[1 << 31, 2], 1 << 32),
        (
            "checked_elements: 2^32 × 2^31",
            &[1 << 32, 1 << 31],
            1 << 63,
        ),
    ] {
        t.works(case, || {
            equal(case, checked_elements(k, dims).map_err(m)?, want)
        });
    }
    t.refuse("same_len: 0 vs 1", Want::Invalid(k), || {
        same_len(k, "a", 0, 1)
    });
    t.refuse("same_len: 2^32 vs 2^32 + 1", Want::Invalid(k), || {
        same_len(k, "a", 1 << 32, (1 << 32) + 1)
    });
    t.works("same_len: 0 vs 0", || same_len(k, "a", 0, 0).map_err(m));
    t.works("same_len: 1 vs 1", || same_len(k, "a", 1, 1).map_err(m));
    t.finish()
}

fn ptx_file_refusals() -> Result<(), Failed> {
    let mut t = Cases::new("foundation::ptx_file_refusals");
    // The file is read before the driver is touched: PtxFile with or without a GPU.
    t.refuse("from_ptx_file: missing file", Want::PtxFile, || {
        Gpu::from_ptx_file(missing_path())
    });
    t.refuse("from_ptx_file: a directory", Want::PtxFile, || {
        Gpu::from_ptx_file(std::env::temp_dir())
    });
    t.refuse("from_ptx_file: path with a NUL", Want::PtxFile, || {
        Gpu::from_ptx_file("/tmp/a\0b.ptx")
    });
    let not_utf8 = TempFile::new("not-utf8.ptx", b".version 6.0\n\xff\xfe\x00garbage");
    t.refuse(
        "from_ptx_file: not UTF-8",
        Want::PtxFile,
        || match &not_utf8 {
            Ok(f) => Gpu::from_ptx_file(&f.0),
            Err(e) => Err(Error::invalid("test setup", e.clone())),
        },
    );
    t.finish()
}

fn refusals(gpu: &Gpu) -> Result<(), Failed> {
    let mut t = Cases::new("foundation::refusals");
    let k = "multiply";
    let (a10, a11, e) = (
        Array1::<f32>::zeros(10),
        Array1::<f32>::zeros(11),
        Array1::<f32>::zeros(0),
    );
    let one = [1.5f32];
    for mode in [MemoryMode::Device, MemoryMode::Unified] {
        let tag = format!("multiply ({mode:?})");
        t.refuse(&format!("{tag}: 10 vs 11"), Want::Invalid(k), || {
            gpu.multiply_timed(a10.view(), a11.view(), mode)
        });
        t.refuse(&format!("{tag}: empty"), Want::Invalid(k), || {
            gpu.multiply_timed(e.view(), e.view(), mode)
        });
        t.refuse(&format!("{tag}: empty vs one"), Want::Invalid(k), || {
            gpu.multiply_timed(e.view(), ArrayView1::from(&one), mode)
        });
        t.refuse(
            &format!("{tag}: 2^32 vs 1 (refused before any copy)"),
            Want::Invalid(k),
            || gpu.multiply_timed(huge1(&one, 1 << 32), ArrayView1::from(&one), mode),
        );
        t.refuse(
            &format!("{tag}: 2^32 + 1 vs 2^32"),
            Want::Invalid(k),
            || gpu.multiply_timed(huge1(&one, (1 << 32) + 1), huge1(&one, 1 << 32), mode),
        );
        t.works_on_gpu(
            gpu,
            &format!("{tag}: one element"),
            || {
                gpu.multiply_timed(
                    ArrayView1::from(&[3.0f32]),
                    ArrayView1::from(&[-0.5f32]),
                    mode,
                )
            },
            |(c, _)| equal("c", c.to_vec(), vec![-1.5]),
        );
    }
    let x: Array1<f32> = (0..301).map(|i| i as f32 * 0.25 - 7.0).collect();
    for (case, a, b) in [
        ("negative stride", x.slice(s![..;-1]), x.slice(s![..])),
        ("step 2 and step -2", x.slice(s![..;2]), x.slice(s![..;-2])),
        ("broadcast (zero stride)", huge1(&one, 301), x.view()),
    ] {
        t.works(&format!("multiply: {case}"), || {
            let c = gpu.multiply(a, b).map_err(m)?;
            equal("c", c, multiply_cpu(a, b).map_err(m)?)
        });
    }
    // On device.
    let dev = |n: usize| gpu.to_device(&vec![2.0f32; n]).map_err(m);
    let fail = crate::common::fail;
    let (d3, d4) = (dev(3).map_err(fail)?, dev(4).map_err(fail)?);
    let (mut c3, mut c4) = (dev(3).map_err(fail)?, dev(4).map_err(fail)?);
    let (d0, mut c0) = (dev(0).map_err(fail)?, dev(0).map_err(fail)?);
    t.refuse(
        "multiply_on_device: a/b lengths differ",
        Want::Invalid(k),
        || gpu.multiply_on_device(&d3, &d4, &mut c3),
    );
    t.refuse(
        "multiply_on_device: a/c lengths differ",
        Want::Invalid(k),
        || gpu.multiply_on_device(&d3, &d3, &mut c4),
    );
    t.refuse("multiply_on_device: empty", Want::Invalid(k), || {
        gpu.multiply_on_device(&d0, &d0, &mut c0)
    });
    t.works("multiply_on_device: one element", || {
        let (a, b) = (dev(1)?, dev(1)?);
        let mut c = dev(1)?;
        gpu.multiply_on_device(&a, &b, &mut c).map_err(m)?;
        gpu.synchronize(k).map_err(m)?;
        let mut out = [0.0f32];
        c.copy_to(&mut out[..]).map_err(m)?;
        equal("c", out, [4.0])
    });
    let v = "vector_sum_i32";
    let (i10, i11, ie) = (
        Array1::<i32>::zeros(10),
        Array1::<i32>::zeros(11),
        Array1::<i32>::zeros(0),
    );
    let ione = [1i32];
    t.refuse("vector_sum_i32: 10 vs 11", Want::Invalid(v), || {
        gpu.vector_sum_i32(i10.view(), i11.view())
    });
    t.refuse("vector_sum_i32: empty", Want::Invalid(v), || {
        gpu.vector_sum_i32(ie.view(), ie.view())
    });
    t.refuse("vector_sum_i32: 2^32 vs 1", Want::Invalid(v), || {
        gpu.vector_sum_i32(huge1(&ione, 1 << 32), ArrayView1::from(&ione))
    });
    t.works("vector_sum_i32: one element wraps", || {
        let r = gpu
            .vector_sum_i32(ArrayView1::from(&[i32::MAX]), ArrayView1::from(&ione))
            .map_err(m)?;
        equal("res", r.to_vec(), vec![i32::MIN])
    });
    let xi: Array1<i32> = (0..257).map(|i| i * 3 - 100).collect();
    t.works("vector_sum_i32: negative stride and step 3", || {
        let (a, b) = (xi.slice(s![..;-3]), xi.slice(s![..;3]));
        equal(
            "res",
            gpu.vector_sum_i32(a, b).map_err(m)?,
            vector_sum_i32_cpu(a, b).map_err(m)?,
        )
    });
    // hello: shapes only, plus one valid one-thread launch.
    for indexed in [false, true] {
        let name = if indexed {
            "hello_indexed"
        } else {
            "hello_kernel"
        };
        for (case, blocks, threads) in [
            ("0 blocks", 0, 1),
            ("0 threads", 1, 0),
            ("1025 threads", 1, 1025),
            ("u32::MAX threads", 1, u32::MAX),
            ("2^31 blocks", MAX_GRID_X + 1, 1),
            ("u32::MAX blocks", u32::MAX, 1),
        ] {
            t.refuse(
                &format!("hello({indexed}): {case}"),
                Want::Invalid(name),
                || gpu.hello(blocks, threads, indexed),
            );
        }
    }
    t.works("hello: one block of one thread", || {
        gpu.hello(1, 1, false).map_err(m)
    });
    // fault_test: only shapes it must refuse, on a GPU without the kernel, so
    // that a missing check gives KernelNotFound instead of a trap (on the
    // simulator, a simulator of its own: a trap there is an error).
    if let Some(other) = harmless(gpu, &mut t) {
        let f = "fault_test_kernel";
        for (case, block, thread) in [
            ("thread 1024 (block of 1025)", 0, 1024),
            ("thread u32::MAX", 0, u32::MAX),
            ("block 2^31 − 1 (grid of 2^31)", MAX_GRID_X, 0),
            ("block u32::MAX", u32::MAX, 0),
        ] {
            t.refuse(&format!("fault_test: {case}"), Want::Invalid(f), || {
                other.fault_test(block, thread)
            });
        }
    }
    let r = "block_reverse_i32";
    t.refuse("block_reverse_i32: empty", Want::Invalid(r), || {
        gpu.block_reverse_i32(ie.view())
    });
    t.refuse(
        "block_reverse_i32: (2^31 − 1) · 256 + 1 elements (refused before any copy)",
        Want::Invalid(r),
        || gpu.block_reverse_i32(huge1(&ione, MAX_GRID_X as usize * 256 + 1)),
    );
    for (case, view) in [
        ("one element", ArrayView1::from(&ione)),
        ("negative stride", xi.slice(s![..;-1])),
        ("step 2", xi.slice(s![..;2])),
    ] {
        t.works(&format!("block_reverse_i32: {case}"), || {
            equal(
                "out",
                gpu.block_reverse_i32(view).map_err(m)?,
                block_reverse_i32_cpu(view),
            )
        });
    }
    t.refuse(
        "launch_overhead: 0 launches",
        Want::Invalid("empty_kernel"),
        || gpu.launch_overhead(0),
    );
    t.works_on_gpu(
        gpu,
        "launch_overhead: 1 launch",
        || gpu.launch_overhead(1),
        |r| require(r.synchronous_per_s > 0.0, || format!("{r:?}")),
    );
    t.finish()
}

fn module_refusals(gpu: &Gpu) -> Result<(), Failed> {
    let mut t = Cases::new("foundation::module_refusals");
    t.refuse("from_ptx: empty text", Want::ModuleLoad, || {
        Gpu::from_ptx("")
    });
    t.refuse("from_ptx: corrupt text", Want::ModuleLoad, || {
        Gpu::from_ptx(PTX_GARBAGE)
    });
    t.refuse(
        "from_ptx: truncated inside the first kernel",
        Want::ModuleLoad,
        || Gpu::from_ptx(&truncated_ptx()),
    );
    t.refuse("from_ptx: PTX ISA 99.9", Want::ModuleLoad, || {
        Gpu::from_ptx(&PTX_WITHOUT_KERNEL.replace(".version 6.0", ".version 99.9"))
    });
    t.refuse("from_ptx: a NUL byte", Want::Invalid("module"), || {
        Gpu::from_ptx("a\0b")
    });
    let empty = TempFile::new("empty.ptx", b"");
    t.refuse(
        "from_ptx_file: empty file",
        Want::ModuleLoad,
        || match &empty {
            Ok(f) => Gpu::from_ptx_file(&f.0),
            Err(e) => Err(Error::invalid("test setup", e.clone())),
        },
    );
    let garbage = TempFile::new("garbage-module.ptx", PTX_GARBAGE.as_bytes());
    t.refuse(
        "from_ptx_file: corrupt file",
        Want::ModuleLoad,
        || match &garbage {
            Ok(f) => Gpu::from_ptx_file(&f.0),
            Err(e) => Err(Error::invalid("test setup", e.clone())),
        },
    );
    for name in ["", "no_such_kernel", "multiply\0", "\0"] {
        t.refuse(&format!("function({name:?})"), Want::NotFound(name), || {
            gpu.function(name).map(drop)
        });
    }
    t.works("function(\"multiply\")", || {
        gpu.function("multiply").map(drop).map_err(m)
    });
    // Every launcher on a module without its kernel: KernelNotFound, naming it.
    let Some(other) = kernel_less(&mut t) else {
        return t.finish();
    };
    let o = &other;
    let f1 = ArrayView1::from(&[1.0f32]);
    let i1 = ArrayView1::from(&[1i32]);
    let m11 = huge2(&[1.0f32], 1, 1);
    let g11 = huged(&[1i64], &[1, 1]);
    t.refuse("multiply", Want::NotFound("multiply"), || {
        o.multiply(f1, f1)
    });
    t.refuse("multiply (unified)", Want::NotFound("multiply"), || {
        o.multiply_timed(f1, f1, MemoryMode::Unified)
    });
    t.refuse("vector_sum_i32", Want::NotFound("vector_sum_i32"), || {
        o.vector_sum_i32(i1, i1)
    });
    t.refuse("launch_overhead", Want::NotFound("empty_kernel"), || {
        o.launch_overhead(1)
    });
    t.refuse("hello", Want::NotFound("hello_kernel"), || {
        o.hello(1, 1, false)
    });
    t.refuse("hello (indexed)", Want::NotFound("hello_indexed"), || {
        o.hello(1, 1, true)
    });
    t.refuse(
        "fault_test (valid shape, no kernel: no trap)",
        Want::NotFound("fault_test_kernel"),
        || o.fault_test(0, 0),
    );
    t.refuse(
        "block_reverse_i32",
        Want::NotFound("block_reverse_i32"),
        || o.block_reverse_i32(i1),
    );
    t.refuse("doubles_matrix", Want::NotFound("doubles_matrix"), || {
        o.doubles_matrix(m11)
    });
    t.refuse(
        "matrix_mul_naive",
        Want::NotFound("matrix_mul_naive"),
        || o.matrix_mul_naive(m11, m11),
    );
    // A 1 × 1 product runs on the 64² tile entry (see sgemm_choice).
    t.refuse(
        "matrix_mul_tiled (1 × 1: matrix_mul_tiled_64)",
        Want::NotFound("matrix_mul_tiled_64"),
        || o.matrix_mul_tiled(m11, m11),
    );
    t.refuse(
        "elementwise_sum (i32)",
        Want::NotFound("elementwise_sum_i32"),
        || {
            let (a, mut c) = ([1i32], Array1::<i32>::zeros(1));
            o.elementwise_sum(ArrayView1::from(&a), ArrayView1::from(&a), c.view_mut())
        },
    );
    t.refuse(
        "elementwise_saxpy (f64)",
        Want::NotFound("elementwise_saxpy_f64"),
        || {
            let mut y = Array1::<f64>::zeros(1);
            o.elementwise_saxpy(ArrayView1::from(&[1.0f64]), y.view_mut(), 2.0)
        },
    );
    t.refuse(
        "vector_sum_repeat",
        Want::NotFound("vector_sum_repeat"),
        || o.vector_sum_repeat(f1, f1, 1),
    );
    t.refuse(
        "gufunc_matmul_i64",
        Want::NotFound("gufunc_matmul_i64"),
        || o.gufunc_matmul_i64(g11.clone(), g11.clone()),
    );
    t.refuse("reduce sum f32", Want::NotFound("reduce_sum_f32"), || {
        o.reduce::<Sum, f32>(f1, None)
    });
    t.refuse("reduce max i64", Want::NotFound("reduce_max_i64"), || {
        o.reduce_slice::<Max, i64>(&[1], None)
    });
    t.refuse(
        "reduce_launch_shape",
        Want::NotFound("reduce_xor_i32"),
        || o.reduce_launch_shape::<Xor, i32>(10),
    );
    t.refuse(
        "warp_primitives_test",
        Want::NotFound("warp_shuffle_test"),
        || o.warp_primitives_test(1, 32),
    );
    t.refuse(
        "atomic_primitives_test",
        Want::NotFound("atomic_test"),
        || o.atomic_primitives_test(1),
    );
    t.refuse("load_primitives_test", Want::NotFound("load_test"), || {
        o.load_primitives_test(&[1, 2, 3, 4])
    });
    t.refuse(
        "block_reduce_test",
        Want::NotFound("block_reduce_test_i64"),
        || o.block_reduce_test(&[1; 32], 32),
    );
    t.refuse("mandelbrot", Want::NotFound(MANDEL), || {
        o.mandelbrot(f1, 10, 2.0)
    });
    t.refuse("mandelbrot_timed", Want::NotFound(MANDEL), || {
        o.mandelbrot_timed(f1, 10, 2.0, 32)
    });
    t.refuse("mandelbrot_explicit_sync", Want::NotFound(MANDEL), || {
        o.mandelbrot_explicit_sync(f1, 10, 2.0)
    });
    t.refuse("mult_ker", Want::NotFound("mult_ker"), || {
        o.mult_ker(f1, 1, 64)
    });
    t.refuse("mult_ker_events", Want::NotFound("mult_ker"), || {
        o.mult_ker_events(f1)
    });
    t.refuse("Lane::mult_ker", Want::NotFound("mult_ker"), || {
        let mut ln = Lane::<f32, 1>::from_host(o, &[1.0])?;
        ln.mult_ker(0, 1, 64)
    });
    t.refuse("Lane::conway_step", Want::NotFound("conway_ker"), || {
        let mut ln = Lane::<i32, 2>::from_host(o, &[1])?;
        ln.conway_step(1, 0, 1)
    });
    t.refuse("LifeSims::frame", Want::NotFound("conway_fast"), || {
        let mut sims = LifeSims::new(o, &[Array2::zeros((2, 2))])?;
        sims.frame()
    });
    let inputs = vec![vec![1.0f32]];
    t.refuse("SerialBatch::run", Want::NotFound("mult_ker"), || {
        SerialBatch::new(o, &inputs)?.run()
    });
    t.refuse("StreamBatch::run", Want::NotFound("mult_ker"), || {
        StreamBatch::new(o, &inputs)?.run()
    });
    t.works(
        "the kernel-less GPU still copies (reduce of nothing needs no kernel)",
        || {
            equal(
                "sum",
                o.reduce::<Sum, f64>(ArrayView1::from(&[] as &[f64]), Some(1.5))
                    .map_err(m)?,
                1.5,
            )
        },
    );
    t.works("the shared GPU still works after all this", || {
        equal("c", gpu.multiply(f1, f1).map_err(m)?.to_vec(), vec![1.0])
    });
    t.finish()
}

/// libdevice is linked in and inlined: the PTX calls no `__nv_*` function,
/// keeps no `__nvvm_reflect` query, and declares no external function but
/// `vprintf` (so the driver has nothing to resolve).
fn math_ptx_is_self_contained() -> Result<(), Failed> {
    let ptx = cuda_kernels::PTX;
    let externs: Vec<&str> = ptx
        .lines()
        .filter(|l| l.contains(".extern .func") && !l.contains("vprintf"))
        .collect();
    ensure(externs.is_empty(), || {
        format!("external functions: {externs:?}")
    })?;
    ensure(!ptx.contains("__nvvm_reflect"), || {
        "an unresolved __nvvm_reflect".into()
    })?;
    let calls: Vec<&str> = ptx
        .lines()
        .filter(|l| l.trim_start().starts_with("call") && l.contains("__nv_"))
        .collect();
    ensure(calls.is_empty(), || {
        format!("calls into libdevice: {calls:?}")
    })
}

/// The rows of `Gpu::math_accuracy_table` on the simulator: the edge
/// values and the first of the random arguments, 2^15 in all per function
/// and type.
fn simulated_math_table(gpu: &Gpu) -> Result<Vec<cuda_kernels::math_checks::MathAccuracy>, Failed> {
    use cuda_kernels::math_checks::{MATH_FUNCTIONS, MathFloat, math_arguments, measure};
    fn rows<T: MathFloat>(
        gpu: &Gpu,
        out: &mut Vec<cuda_kernels::math_checks::MathAccuracy>,
    ) -> Result<(), Failed> {
        for info in MATH_FUNCTIONS {
            let (mut x, mut y) = math_arguments::<T>(info.function, 1);
            x.truncate(1 << 15);
            y.truncate(1 << 15);
            let got = gpu.math_eval(info.function, &x, &y).map_err(fail)?;
            out.push(measure(info.function, &x, &y, &got));
        }
        Ok(())
    }
    let mut out = Vec::new();
    rows::<f32>(gpu, &mut out)?;
    rows::<f64>(gpu, &mut out)?;
    Ok(out)
}

/// Every `device::math` function, f32 and f64, over 2^20 arguments (2^15 on
/// the simulator) and the edge values, within the ulp bound CUDA documents (see
/// `cuda_kernels::math_checks`). Prints the measured table (and writes it
/// to `$CUDA_KERNELS_MATH_TABLE` when set). Under compute-sanitizer: every
/// function on the edge values only.
fn device_math_within_cuda_bounds(gpu: &Gpu) -> Result<(), Failed> {
    use cuda_kernels::math_checks::{MATH_FUNCTIONS, MathFloat, accuracy_markdown};
    if crate::common::under_sanitizer() {
        for info in MATH_FUNCTIONS {
            let x = f64::edges();
            gpu.math_eval(info.function, &x, &x).map_err(fail)?;
            let x = f32::edges();
            gpu.math_eval(info.function, &x, &x).map_err(fail)?;
        }
        return Ok(());
    }
    let rows = if crate::common::simulated(gpu) {
        simulated_math_table(gpu)?
    } else {
        gpu.math_accuracy_table().map_err(fail)?
    };
    let table = accuracy_markdown(&rows);
    eprintln!("{table}");
    for r in &rows {
        if let Some([x, y, got, want]) = r.worst_case {
            eprintln!(
                "worst {} {} {} ulp (allowed {}): x={x:e} ({:#018x}) y={y:e} ({:#018x}) gpu={got:e} ({:#018x}) reference={want:e} ({:#018x})",
                r.ty,
                r.name(),
                r.worst_ulp,
                r.allowed_ulp,
                x.to_bits(),
                y.to_bits(),
                got.to_bits(),
                want.to_bits()
            );
        }
    }
    if let Some(path) = std::env::var_os("CUDA_KERNELS_MATH_TABLE") {
        std::fs::write(path, &table).map_err(fail)?;
    }
    let over: Vec<String> = rows
        .iter()
        .filter(|r| !r.within_bound())
        .map(|r| {
            format!(
                "{} {}: {} ulp > {}",
                r.ty,
                r.name(),
                r.worst_ulp,
                r.allowed_ulp
            )
        })
        .collect();
    ensure(over.is_empty(), || format!("over CUDA's bound: {over:?}"))
}

/// A launch shape past the device's limits (a CUDA device's own, or the
/// simulated H100's) is refused before anything runs, with the same error on
/// both backends: `Error::LaunchRefused` naming the limit, its source the
/// driver's `CUDA_ERROR_INVALID_VALUE`; the device stays usable.
fn shapes_past_the_limits() -> Vec<(&'static str, cuda_kernels::LaunchConfig)> {
    use cuda_kernels::LaunchConfig;
    vec![
        ("1025 threads per block", LaunchConfig::linear(1, 1025)),
        (
            "block z of 65",
            LaunchConfig {
                grid: (1, 1, 1),
                block: (1, 1, 65),
                shared_mem_bytes: 0,
            },
        ),
        (
            "a block of 32 x 32 x 2 threads",
            LaunchConfig {
                grid: (1, 1, 1),
                block: (32, 32, 2),
                shared_mem_bytes: 0,
            },
        ),
        ("a grid with no blocks", LaunchConfig::linear(0, 32)),
        (
            "grid y of 65536",
            LaunchConfig {
                grid: (1, 65_536, 1),
                block: (32, 1, 1),
                shared_mem_bytes: 0,
            },
        ),
        (
            "dynamic shared memory past 48 KiB",
            LaunchConfig::linear(1, 32).with_shared(48 * 1024 + 16),
        ),
    ]
}

fn launch_shapes_past_the_limits_are_refused(gpu: &Gpu) -> Result<(), Failed> {
    use cuda_kernels::cust::error::CudaError;
    use cuda_kernels::kernels::multiply::EMPTY_KERNEL;
    for (what, cfg) in shapes_past_the_limits() {
        // SAFETY: empty_kernel takes no arguments and touches no memory; the
        // shape is refused before anything runs.
        let r = unsafe { gpu.launch(EMPTY_KERNEL, cfg, gpu.stream(), ()) };
        match r {
            Err(Error::LaunchRefused {
                kernel,
                source: CudaError::InvalidValue,
                ..
            }) if kernel == EMPTY_KERNEL.name() => {}
            other => return Err(fail(format!("{what}: {other:?}, not LaunchRefused"))),
        }
    }
    // The limits themselves pass, and the device is still usable.
    let ok = cuda_kernels::LaunchConfig::linear(2, 1024).with_shared(48 * 1024);
    // SAFETY: as above.
    unsafe { gpu.launch(EMPTY_KERNEL, ok, gpu.stream(), ()) }.map_err(fail)?;
    gpu.synchronize(EMPTY_KERNEL.name()).map_err(fail)?;
    let c = gpu
        .multiply(
            Array1::from(vec![2.0f32; 3]).view(),
            Array1::from(vec![3.0f32; 3]).view(),
        )
        .map_err(fail)?;
    ensure(c.iter().all(|&x| x == 6.0), || {
        format!("after the refusals: {c}")
    })
}
