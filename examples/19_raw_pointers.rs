//! Interop (issue 12 item 8): launching one of our kernels on memory that
//! another library allocated. Here `cuMemAlloc_v2` from the driver API stands
//! in for cudarc, CuPy or a C library: all that crosses over is the raw
//! device address (`CUdeviceptr`, a `u64`), wrapped as
//! `DevicePointer::from_raw`; the launch is the same typed `Gpu::launch`
//! every launcher uses, so the argument types are still checked against the
//! kernel's declaration.
//!
//! `cargo run --example 19_raw_pointers`
use cuda_kernels::cust::memory::DevicePointer;
use cuda_kernels::cust::sys::{self as cu, CUdeviceptr, CUresult};
use cuda_kernels::kernels::multiply::MULTIPLY;
use cuda_kernels::{Error, LaunchConfig};

/// Device memory owned by "another library": allocated and freed with the
/// driver API, never by our types.
struct Foreign(CUdeviceptr);

impl Foreign {
    fn alloc(bytes: usize) -> Result<Self, Error> {
        let mut p: CUdeviceptr = 0;
        // SAFETY: cuMemAlloc writes one address to `p`; the context is current.
        let r = unsafe { cu::cuMemAlloc_v2(&mut p, bytes) };
        check(r, "cuMemAlloc_v2").map(|()| Self(p))
    }
}

impl Drop for Foreign {
    fn drop(&mut self) {
        // SAFETY: allocated by cuMemAlloc_v2 above and freed once, here; the
        // stream was synchronized before the drop.
        unsafe { cu::cuMemFree_v2(self.0) };
    }
}

fn check(r: CUresult, operation: &'static str) -> Result<(), Error> {
    match r {
        CUresult::CUDA_SUCCESS => Ok(()),
        r => Err(Error::invalid(operation, format!("{r:?}"))),
    }
}

fn main() -> Result<(), Error> {
    let gpu = cuda_kernels::gpu()?;
    gpu.bind()?;
    let n = 1000usize;
    let bytes = n * size_of::<f32>();
    let (a, b, c) = (
        Foreign::alloc(bytes)?,
        Foreign::alloc(bytes)?,
        Foreign::alloc(bytes)?,
    );
    let (ha, hb): (Vec<f32>, Vec<f32>) = (0..n).map(|i| (i as f32, 2.0)).unzip();
    // SAFETY: a and b hold n f32; the host vectors hold as many.
    check(
        unsafe { cu::cuMemcpyHtoD_v2(a.0, ha.as_ptr().cast(), bytes) },
        "copy a",
    )?;
    // SAFETY: as above.
    check(
        unsafe { cu::cuMemcpyHtoD_v2(b.0, hb.as_ptr().cast(), bytes) },
        "copy b",
    )?;

    let args = (
        DevicePointer::<f32>::from_raw(a.0),
        DevicePointer::<f32>::from_raw(b.0),
        DevicePointer::<f32>::from_raw(c.0),
        n,
    );
    let cfg = LaunchConfig::linear(n.div_ceil(256) as u32, 256);
    // SAFETY: a, b and c are three distinct allocations of n f32 each, alive
    // until after the synchronization below.
    unsafe { gpu.launch(MULTIPLY, cfg, gpu.stream(), args) }?;
    gpu.synchronize(MULTIPLY.name())?;

    let mut hc = vec![0.0f32; n];
    // SAFETY: c holds n f32, hc as many.
    check(
        unsafe { cu::cuMemcpyDtoH_v2(hc.as_mut_ptr().cast(), c.0, bytes) },
        "copy c",
    )?;
    assert!(hc.iter().enumerate().all(|(i, &x)| x == 2.0 * i as f32));
    println!("multiply on foreign memory: c[999] = {}", hc[n - 1]);
    Ok(())
}
