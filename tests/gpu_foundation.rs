//! GPU tests of the foundation: multiply (device and unified memory),
//! vector_sum_i32, hello_kernel's output, launch overhead, and bad input.
mod common;

use std::process::ExitCode;

use common::{AWKWARD_LENGTHS, ensure, fail, gpu_test, run};
use cuda_kernels::cust::memory::{CopyDestination, DeviceBuffer, DeviceCopy, DeviceSlice};
use cuda_kernels::demos::foundation::multiply_inputs;
use cuda_kernels::multiply::{MemoryMode, multiply_cpu, vector_sum_i32_cpu};
use cuda_kernels::ndarray::{Array1, ArrayView1, s};
use cuda_kernels::{Error, Gpu};
use libtest_mimic::Failed;

const HELLO_CHILD: &str = "CUDA_KERNELS_TEST_HELLO_CHILD";
const FAULT_CHILD: &str = "CUDA_KERNELS_TEST_FAULT_CHILD";

fn main() -> ExitCode {
    // Re-executed by `hello_prints_three_lines` to capture the device printf
    // output (it goes to this process's stdout).
    if std::env::var_os(HELLO_CHILD).is_some() {
        let gpu = cuda_kernels::gpu().expect("the parent checked the GPU");
        gpu.hello(1, 3, false).expect("hello_kernel runs");
        return ExitCode::SUCCESS;
    }
    // Re-executed by `device_fault_is_reported_with_location`: a trap ruins the
    // process's CUDA context, so it happens in a child.
    if std::env::var_os(FAULT_CHILD).is_some() {
        return fault_child();
    }
    run(vec![
        gpu_test("multiply_matches_cpu_exactly", multiply_matches_cpu_exactly),
        gpu_test("multiply_unified_matches_cpu", multiply_unified_matches_cpu),
        gpu_test("multiply_strided_views", multiply_strided_views),
        gpu_test("multiply_refuses_bad_input", multiply_refuses_bad_input),
        gpu_test("vector_sum_i32_matches_cpu", vector_sum_i32_matches_cpu),
        gpu_test(
            "vectorized_heads_and_tails_on_sub_slices",
            vectorized_heads_and_tails_on_sub_slices,
        ),
        gpu_test("hello_prints_three_lines", hello_prints_three_lines),
        gpu_test("hello_refuses_bad_shapes", hello_refuses_bad_shapes),
        gpu_test("empty_kernel_launch_rates", empty_kernel_launch_rates),
        gpu_test(
            "missing_kernel_is_a_typed_error",
            missing_kernel_is_a_typed_error,
        ),
        gpu_test("bad_ptx_is_a_typed_error", bad_ptx_is_a_typed_error),
        gpu_test("shared_array_block_reverse", shared_array_block_reverse),
        gpu_test(
            "device_fault_is_reported_with_location",
            device_fault_is_reported_with_location,
        ),
    ])
}

fn multiply_matches_cpu_exactly(gpu: &Gpu) -> Result<(), Failed> {
    let large: &[usize] = if common::under_sanitizer() {
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

fn multiply_refuses_bad_input(gpu: &Gpu) -> Result<(), Failed> {
    let a = Array1::<f32>::zeros(10);
    let b = Array1::<f32>::zeros(11);
    let e = Array1::<f32>::zeros(0);
    for (what, r) in [
        ("mismatched", gpu.multiply(a.view(), b.view())),
        ("empty", gpu.multiply(e.view(), e.view())),
    ] {
        match r {
            Err(Error::InvalidInput {
                kernel: "multiply", ..
            }) => {}
            other => return Err(format!("{what}: expected InvalidInput, got {other:?}").into()),
        }
    }
    Ok(())
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
    let da = DeviceBuffer::from_slice(&padded(host[0], oa)).map_err(fail)?;
    let db = DeviceBuffer::from_slice(&padded(host[1], ob)).map_err(fail)?;
    let dc = DeviceBuffer::from_slice(&padded(&vec![T::default(); n], oc)).map_err(fail)?;
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

fn hello_prints_three_lines(_gpu: &Gpu) -> Result<(), Failed> {
    let exe = std::env::current_exe().map_err(fail)?;
    let out = std::process::Command::new(exe)
        .env(HELLO_CHILD, "1")
        .output()
        .map_err(fail)?;
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

fn hello_refuses_bad_shapes(gpu: &Gpu) -> Result<(), Failed> {
    for (blocks, threads) in [(1, 0), (0, 1), (1, 1025)] {
        common::expect_invalid(
            &format!("<<<{blocks}, {threads}>>>"),
            gpu.hello(blocks, threads, false),
        )?;
    }
    Ok(())
}

fn empty_kernel_launch_rates(gpu: &Gpu) -> Result<(), Failed> {
    let r = gpu.launch_overhead(2000).map_err(fail)?;
    // Under compute-sanitizer every launch is instrumented: only check that it ran.
    let floor = if common::under_sanitizer() {
        0.0
    } else {
        1000.0
    };
    ensure(
        r.synchronous_per_s > floor && r.pipelined_per_s > r.synchronous_per_s * 0.5,
        || format!("{r:?}"),
    )
}

fn missing_kernel_is_a_typed_error(gpu: &Gpu) -> Result<(), Failed> {
    match gpu.function("no_such_kernel") {
        Err(Error::KernelNotFound { name }) if name == "no_such_kernel" => Ok(()),
        Err(e) => Err(format!("expected KernelNotFound, got {e:?}").into()),
        Ok(_) => Err("found a kernel that does not exist".into()),
    }
}

fn bad_ptx_is_a_typed_error(_gpu: &Gpu) -> Result<(), Failed> {
    match Gpu::from_ptx_file("/nonexistent/kernels.ptx") {
        Err(Error::PtxFile { .. }) => {}
        other => {
            return Err(format!("missing file: expected PtxFile, got {:?}", other.err()).into());
        }
    }
    match Gpu::from_ptx(".version 6.0\n.target sm_70\n.address_size 64\nthis is not ptx") {
        Err(Error::ModuleLoad { details, .. }) => ensure(
            details.contains(".version 6.0") && details.contains("sm_70"),
            || details.clone(),
        ),
        other => Err(format!("corrupt PTX: expected ModuleLoad, got {:?}", other.err()).into()),
    }
}

/// In the child: fail on purpose at block 2, thread 5; print the error; then
/// check that the next call fails cleanly too (no hang, no success).
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
    match gpu.multiply(a.view(), a.view()) {
        Err(e) => println!("AFTER: {e}"),
        Ok(_) => {
            println!("a launch after the fault succeeded");
            return ExitCode::FAILURE;
        }
    }
    ExitCode::SUCCESS
}

fn device_fault_is_reported_with_location(_gpu: &Gpu) -> Result<(), Failed> {
    let exe = std::env::current_exe().map_err(fail)?;
    let out = std::process::Command::new(exe)
        .env(FAULT_CHILD, "1")
        .output()
        .map_err(fail)?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    ensure(out.status.success(), || {
        format!("child: {stdout} {}", String::from_utf8_lossy(&out.stderr))
    })?;
    for needle in [
        "fault_test_kernel: the kernel failed at",
        "hello.rs:",
        "block [2, 0, 0], thread [5, 0, 0]",
        "fails here on purpose",
        "AFTER:",
    ] {
        ensure(stdout.contains(needle), || {
            format!("{needle:?} not in {stdout:?}")
        })?;
    }
    Ok(())
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
