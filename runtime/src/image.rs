//! What a module is loaded from: the PTX, or a cubin assembled from it at
//! build time for the device's architecture.
//!
//! The driver JIT-compiles PTX the first time a process loads it (on an
//! H100, `cuda_kernels::gpu()` took 1.05–1.5 s with an empty JIT cache,
//! about 0.2 s once the result is cached in `~/.nv/ComputeCache`); a cubin
//! for the device's architecture loads with no JIT at all (0.2 s, cache or
//! not). [`Images`] carries the PTX and the cubins, and
//! [`Images::load`] picks the cubin that runs on the device (same major
//! architecture, minor version at most the device's), else the PTX.
//!
//! `CUDA_KERNELS_FORCE_PTX=1` in the environment makes every load take the
//! PTX (to measure the JIT, or to rule out a cubin).
use std::fmt;

use cust::device::{Device, DeviceAttribute};
use cust::module::Module;

use std::ffi::CString;

use cust::CudaApiVersion;

use crate::error::{CudaResultExt, Error, Result};

/// The first line cuda-kernels-builder writes into every PTX (its
/// `IMAGE_MARK`), followed by the library name of the kernel crate the PTX
/// was built from: the image's identity ([`Images::crate_name`]).
pub const IMAGE_MARK: &str = "// cuda-kernels image: ";

/// The environment variable that makes [`Images::load`] take the PTX even
/// when a cubin matches.
pub const FORCE_PTX_VAR: &str = "CUDA_KERNELS_FORCE_PTX";

/// The [`Images`] a build script wrote with `cuda-kernels-builder` under
/// `name` (`KernelBuild::name`, default the kernel crate's library name),
/// embedded in the binary: `$OUT_DIR/<name>.ptx` and the cubins listed in
/// `$OUT_DIR/<name>.cubins.rs`. An `Images<'static>` constant expression.
///
/// With, in `build.rs`,
/// `cuda_kernels_builder::KernelBuild::new("kernels").name("kernels").cubins(&["sm_80", "sm_90a"]).build()`:
///
/// ```text
/// // (needs the build script's `OUT_DIR`, so not compiled here)
/// const IMAGES: cuda_kernels::Images<'static> = cuda_kernels::embedded_images!("kernels");
/// let gpu = cuda_kernels::Gpu::from_images(&IMAGES)?;
/// ```
#[macro_export]
macro_rules! embedded_images {
    ($name:literal) => {{
        // The cubin list names `Cubin` and `KernelResources` unqualified.
        #[allow(unused_imports)]
        use $crate::image::{Cubin, KernelResources};
        const IMAGES: $crate::Images<'static> = $crate::Images {
            ptx: include_str!(concat!(env!("OUT_DIR"), "/", $name, ".ptx")),
            cubins: include!(concat!(env!("OUT_DIR"), "/", $name, ".cubins.rs")),
        };
        IMAGES
    }};
}

/// Machine code for one GPU architecture, assembled from the PTX by `ptxas`.
#[derive(Debug, Clone, Copy)]
pub struct Cubin {
    /// The architecture as a number: 80 for `sm_80`, 90 for `sm_90`.
    pub sm: u32,
    /// The ELF image, as `ptxas` wrote it.
    pub image: &'static [u8],
    /// What `ptxas -v` reported of each kernel in it.
    pub resources: &'static [KernelResources],
}

/// One kernel's registers and local memory, as `ptxas -v` reported them
/// when it assembled a [`Cubin`] (recorded at build time).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KernelResources {
    /// The entry point.
    pub name: &'static str,
    /// Registers per thread.
    pub registers: u32,
    /// Bytes of stack frame (local memory) per thread.
    pub stack_bytes: u32,
}

/// Registers of a multiprocessor's register file (compute capability 5.0
/// to 9.0: 64 K 32-bit registers), the most one block may use.
pub const REGISTERS_PER_BLOCK: u64 = 65_536;

/// Refuses a launch of `threads` threads per block of a kernel with
/// `resources` whose registers exceed the register file, as the driver
/// refuses it (`CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES`): the check both
/// backends make before a launch. (The hardware allocates registers per
/// warp in units of 256: a block needs ⌈threads/32⌉ warps of
/// `registers` rounded up to a multiple of 8 × 32 registers.)
pub fn check_registers(
    kernel: &'static str,
    resources: Option<&KernelResources>,
    threads: u64,
) -> crate::Result<()> {
    let Some(r) = resources else { return Ok(()) };
    let per_warp = (r.registers as u64).next_multiple_of(8) * 32;
    let needed = threads.div_ceil(32) * per_warp;
    if needed > REGISTERS_PER_BLOCK {
        return Err(crate::Error::Cuda {
            kernel,
            operation: "launch",
            source: cust::error::CudaError::LaunchOutOfResources,
        });
    }
    Ok(())
}

/// One module's images: its PTX and the cubins assembled from it.
#[derive(Debug, Clone, Copy)]
pub struct Images<'a> {
    /// The PTX text (loaded, and JIT-compiled by the driver, when no cubin
    /// matches the device).
    pub ptx: &'a str,
    /// Cubins for some architectures (may be empty).
    pub cubins: &'a [Cubin],
}

impl<'a> From<&'a str> for Images<'a> {
    /// PTX alone.
    fn from(ptx: &'a str) -> Self {
        Self { ptx, cubins: &[] }
    }
}

/// Which image a module was loaded from (see [`crate::Gpu::image`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LoadedImage {
    /// The cubin for `sm` (no JIT compilation).
    Cubin {
        /// The cubin's architecture (80 for `sm_80`).
        sm: u32,
    },
    /// The PTX, JIT-compiled by the driver.
    Ptx {
        /// Why no cubin was loaded.
        reason: String,
    },
    /// No image: the simulator runs the kernels' host code.
    Simulator,
}

impl fmt::Display for LoadedImage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Cubin { sm } => write!(f, "cubin sm_{sm}"),
            Self::Ptx { reason } => write!(f, "PTX, JIT-compiled ({reason})"),
            Self::Simulator => write!(f, "none: the simulator runs the kernels' host code"),
        }
    }
}

/// The cubin of `cubins` that runs on a device of compute capability
/// `major.minor`: the same major architecture and the highest minor version
/// not above the device's (an sm_80 cubin runs on 8.0, 8.6 and 8.9; an sm_90
/// one on 9.0 only). `None` when none does.
pub fn pick_cubin(cubins: &[Cubin], major: u32, minor: u32) -> Option<&Cubin> {
    cubins
        .iter()
        .filter(|c| c.sm / 10 == major && c.sm % 10 <= minor)
        .max_by_key(|c| c.sm)
}

impl<'a> Images<'a> {
    /// The kernel crate these images were built from (its library name, as
    /// cuda-kernels-builder wrote it on the PTX's first line): a kernel
    /// handle launches only on the images of the crate that declared it.
    /// `None` for PTX from anywhere else, on which no handle launches.
    pub fn crate_name(&self) -> Option<&'a str> {
        let first = self.ptx.lines().next()?;
        first
            .strip_prefix(IMAGE_MARK)
            .map(str::trim)
            .filter(|name| !name.is_empty())
    }

    /// The cubin to load on `device`, or why the PTX must be loaded instead
    /// (no cubins, none for this architecture, or [`FORCE_PTX_VAR`] set).
    pub fn matching_cubin(&self, device: Device) -> Result<std::result::Result<&'a Cubin, String>> {
        if self.cubins.is_empty() {
            return Ok(Err("no cubins embedded".into()));
        }
        if std::env::var_os(FORCE_PTX_VAR).is_some_and(|v| !v.is_empty() && v != "0") {
            return Ok(Err(format!("{FORCE_PTX_VAR} is set")));
        }
        let attribute = |a| {
            device
                .get_attribute(a)
                .during("module", "cuDeviceGetAttribute (compute capability)")
        };
        let major = attribute(DeviceAttribute::ComputeCapabilityMajor)?;
        let minor = attribute(DeviceAttribute::ComputeCapabilityMinor)?;
        let (major, minor) = (major.max(0) as u32, minor.max(0) as u32);
        Ok(pick_cubin(self.cubins, major, minor).ok_or_else(|| {
            let have: Vec<_> = self.cubins.iter().map(|c| format!("sm_{}", c.sm)).collect();
            format!(
                "no cubin for sm_{major}{minor} (embedded: {})",
                have.join(", ")
            )
        }))
    }

    /// Loads the module into the current context: the matching cubin, else
    /// the PTX (also when the driver refuses the cubin, with its reason).
    pub fn load(&self, device: Device) -> Result<(Module, LoadedImage)> {
        let reason = match self.matching_cubin(device)? {
            Ok(cubin) => match Module::from_cubin(cubin.image, &[]) {
                Ok(module) => return Ok((module, LoadedImage::Cubin { sm: cubin.sm })),
                Err(e) => format!("the driver refused the sm_{} cubin: {e}", cubin.sm),
            },
            Err(reason) => reason,
        };
        Ok((load_module(self.ptx)?, LoadedImage::Ptx { reason }))
    }
}

/// Loads PTX text into the current context, turning refusals into an error
/// that says the PTX's `.version`/`.target` and the driver's version.
pub fn load_module(ptx: &str) -> Result<Module> {
    let cstr = CString::new(ptx)
        .map_err(|_| Error::invalid("module", "the PTX text contains a NUL byte"))?;
    Module::from_ptx_cstr(&cstr, &[]).map_err(|source| Error::ModuleLoad {
        details: ptx_summary(ptx),
        source,
    })
}

/// `.version X .target Y, driver N` for error messages.
pub fn ptx_summary(ptx: &str) -> String {
    let directive = |d: &str| {
        ptx.lines()
            .find_map(|l| l.trim().strip_prefix(d).map(|v| v.trim().to_string()))
            .unwrap_or_else(|| "none".into())
    };
    let driver = CudaApiVersion::get()
        .map(|v| format!("{}.{}", v.major(), v.minor()))
        .unwrap_or_else(|e| format!("unknown ({e})"));
    format!(
        "PTX .version {}, .target {}, driver supports CUDA {driver}",
        directive(".version"),
        directive(".target")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cubin_runs_on_its_major_architecture_from_its_minor_up() {
        let cubins = [
            Cubin {
                sm: 80,
                image: &[],
                resources: &[],
            },
            Cubin {
                sm: 90,
                image: &[],
                resources: &[],
            },
        ];
        let sm = |major, minor| pick_cubin(&cubins, major, minor).map(|c| c.sm);
        assert_eq!(sm(8, 0), Some(80));
        assert_eq!(sm(8, 6), Some(80));
        assert_eq!(sm(8, 9), Some(80));
        assert_eq!(sm(9, 0), Some(90));
        assert_eq!(sm(7, 5), None);
        assert_eq!(sm(10, 0), None);
        assert_eq!(sm(12, 0), None);
        let only_86 = [Cubin {
            sm: 86,
            image: &[],
            resources: &[],
        }];
        assert_eq!(pick_cubin(&only_86, 8, 0).map(|c| c.sm), None);
        assert_eq!(pick_cubin(&only_86, 8, 9).map(|c| c.sm), Some(86));
    }

    #[test]
    fn the_image_names_its_crate_on_the_first_line_only() {
        let built = Images::from("// cuda-kernels image: my_kernels\n.version 8.0\n");
        assert_eq!(built.crate_name(), Some("my_kernels"));
        for other in [
            "//\n// cuda-kernels image: my_kernels\n",
            ".version 8.0\n",
            "// cuda-kernels image: \n",
            "",
        ] {
            assert_eq!(Images::from(other).crate_name(), None, "{other:?}");
        }
    }

    #[test]
    fn loaded_image_says_which() {
        assert_eq!(LoadedImage::Cubin { sm: 90 }.to_string(), "cubin sm_90");
        let ptx = LoadedImage::Ptx {
            reason: "no cubins embedded".into(),
        };
        assert_eq!(ptx.to_string(), "PTX, JIT-compiled (no cubins embedded)");
    }
}
