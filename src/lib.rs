#![doc = include_str!("../README.md")]
#![warn(missing_docs)]
pub use cuda_kernels_gpu as kernels;
pub use cuda_kernels_host::*;

/// The Rust examples of the guides in `docs/`, compiled and run as this
/// crate's doctests (`cargo test --doc`): the README is the crate's front
/// page, and the examples that moved from it to `docs/` stay tested here.
#[cfg(doctest)]
pub mod guides {
    #[doc = include_str!("../docs/library.md")]
    pub struct Library;
    #[doc = include_str!("../docs/simulator.md")]
    pub struct Simulator;
    #[doc = include_str!("../docs/multi-gpu.md")]
    pub struct MultiGpu;
    #[doc = include_str!("../docs/nccl.md")]
    pub struct Nccl;
}

/// The embedded kernels: [`PTX`] and [`CUBINS`], as `build.rs` built them
/// from `kernels-gpu` with `cuda-kernels-builder`.
pub const IMAGES: Images<'static> = embedded_images!("kernels");

/// The PTX of every kernel, built from `kernels-gpu` at compile time.
pub const PTX: &str = IMAGES.ptx;

/// The GPU architecture the embedded PTX targets (`CUDA_KERNELS_ARCH` at build
/// time, default `sm_70`).
pub const PTX_ARCH: &str = env!("CUDA_KERNELS_ARCH_BUILT");

/// Cubins assembled from [`PTX`] at build time by `ptxas`, for sm_80 and
/// sm_90 (those at or above [`PTX_ARCH`]); empty when the build found no
/// `ptxas` (a build warning says so).
pub const CUBINS: &[Cubin] = IMAGES.cubins;

/// Opens device 0 and loads the embedded kernels: the cubin of [`CUBINS`]
/// that matches the device, else the [`PTX`] (JIT-compiled by the driver);
/// [`Gpu::image`] says which.
///
/// With `CUDA_KERNELS_SIM=1` in the environment ([`SIM_ENV`]) it opens the
/// CPU simulator instead ([`simulator()`]), as `NUMBA_ENABLE_CUDASIM=1` makes
/// Numba's `cuda` module its simulator: the same program then runs its
/// kernels' Rust code on the CPU, with no GPU.
///
/// Errors with [`Error::NoDevice`] (the driver finds no device) or
/// [`Error::NoDriver`] (no NVIDIA kernel driver loaded) on a machine
/// without a GPU, and with [`Error::DriverFailed`] naming the driver's error
/// where a GPU is there but its driver fails (too old, mismatched): it never
/// falls back to the simulator unless `CUDA_KERNELS_SIM=1` asks for it.
pub fn gpu() -> Result<Gpu> {
    if sim_requested() {
        simulator()
    } else {
        cuda_gpu()
    }
}

/// Opens device 0 with the embedded kernels as [`gpu()`] does, or, on a
/// machine without a GPU (no NVIDIA driver or no device), the simulator
/// ([`simulator()`]), saying so on stderr: the constructor the template's
/// programs use ([`Gpu::from_images_or_simulator`]). A driver that is
/// there but fails is the error, never the simulator.
///
/// ```no_run
/// # fn main() -> cuda_kernels::Result<()> {
/// let gpu = cuda_kernels::gpu_or_simulator()?;
/// println!("{}", if gpu.is_simulated() { "simulator" } else { "GPU" });
/// # Ok(())
/// # }
/// ```
pub fn gpu_or_simulator() -> Result<Gpu> {
    Gpu::from_images_or_simulator(&IMAGES)
}

/// Opens device 0 with the embedded kernels, whatever `CUDA_KERNELS_SIM`
/// says (for what only a GPU has: the C ABI library uses it).
pub fn cuda_gpu() -> Result<Gpu> {
    Gpu::from_images(&IMAGES)
}

/// Opens CUDA device `ordinal` with the embedded kernels (as [`gpu()`] does
/// device 0). An ordinal that names no usable device is
/// [`Error::NoSuchDevice`], naming the devices there are.
pub fn gpu_on(ordinal: u32) -> Result<Gpu> {
    Gpu::on_device(ordinal, &IMAGES)
}

/// The device of rank `rank` in a job of one device per rank
/// ([`multi_gpu::ranks`]): CUDA device `rank` ([`gpu_on`]), or simulated
/// device `rank` ([`BuiltinSimulator::simulated_device`]) when `simulated`;
/// the embedded kernels either way.
pub fn rank_gpu(rank: usize, simulated: bool) -> Result<Gpu> {
    if simulated {
        Gpu::simulated_device(rank as u32)
    } else {
        gpu_on(rank as u32)
    }
}

/// Every CUDA device of the machine with its properties: name, ordinal,
/// memory, multiprocessors, compute capability, PCI bus id, and whether
/// these kernels can run on it ([`devices::devices`]).
pub fn devices() -> Result<Vec<device_info::DeviceInfo>> {
    devices::devices()
}

/// A [`Gpu`] on every usable CUDA device, in ordinal order: the default
/// device list of the multi-device launchers ([`multi_gpu`]). Errors with
/// [`Error::NoDriver`] or [`Error::NoDevice`] when there is none.
pub fn all_gpus() -> Result<Vec<Gpu>> {
    let usable: Vec<u32> = devices()?
        .into_iter()
        .filter(|d| d.unusable.is_none())
        .map(|d| d.ordinal)
        .collect();
    if usable.is_empty() {
        return Err(Error::NoDevice {
            reason: format!("no usable device: {}", devices::devices_summary()),
        });
    }
    usable.into_iter().map(gpu_on).collect()
}

/// The CPU simulator ([`Gpu::simulator`]): runs the kernels' own Rust code
/// on the host with CUDA's execution model, standing in for an H100's
/// limits. Needs no GPU and no driver.
pub fn simulator() -> Result<Gpu> {
    // The simulated device is an H100: its kernels' resources are the sm_90 cubin's.
    let resources = CUBINS
        .iter()
        .find(|c| c.sm == 90)
        .map_or(&[][..], |c| c.resources);
    Ok(Gpu::simulator()?.with_kernel_resources(resources))
}
