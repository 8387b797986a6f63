//! The `Gpu` and its PTX modules: device memory running out, the embedded
//! cubin, bad PTX and PTX files refused, device faults reported with their
//! location.
use super::*;

/// Issue 19: 1 TiB is more than the device has, on the GPU (an H100's
/// 80 GiB) and on the simulator (the simulated H100's): the same
/// out-of-memory error of `cuMemAlloc` on both, for a raw allocation and
/// for a launcher given an input it cannot hold.
pub(super) fn a_tebibyte_is_out_of_device_memory(gpu: &Gpu) -> Result<(), Failed> {
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
pub(super) fn embedded_cubin_is_loaded_on_its_architecture(gpu: &Gpu) -> Result<(), Failed> {
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

/// A module the driver refuses: `ModuleLoad`, whose details name the PTX's
/// version and target (a missing file is in `ptx_file_refusals`).
pub(super) fn bad_ptx_is_a_typed_error(_gpu: &Gpu) -> Result<(), Failed> {
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
pub(super) fn fault_child() -> ExitCode {
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

pub(super) fn device_fault_is_reported_with_location(gpu: &Gpu) -> Result<(), Failed> {
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

pub(super) fn ptx_file_refusals() -> Result<(), Failed> {
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
