//! Issue 8: the bad-input suite. Every public host function that takes user
//! input, family by family, is fed wrong shapes, mismatched lengths, empty
//! inputs, one-element inputs (which must work and match the CPU
//! reference), non-contiguous and negatively strided views (which must work:
//! the launchers document that any layout is copied to a contiguous buffer),
//! sizes at and past 2^31 and 2^32 where the API takes them (zero-stride
//! views, so that a huge logical size costs no memory, and only where the
//! launcher refuses before it copies), missing, corrupt and kernel-less PTX,
//! and the C ABI's null pointers, zero and negative sizes and size²
//! overflow. Each case must give the documented typed error (or C status
//! code), or work: no panic (each case runs under `catch_unwind`), no crash,
//! no kernel launch with a bad size.
//!
//! One trial per family runs a table of cases and reports every failing case,
//! not only the first; each prints (on stderr) how many cases it checked.
//!
//! Cases: 732 in all, 223 of them without a GPU (each trial also prints
//! its own count; a trial whose setup fails, say a scratch allocation,
//! checks fewer).
//!
//! | trial                       | needs              | cases |
//! |-----------------------------|--------------------|------:|
//! | `cpu_launch_helpers`        | nothing            |    39 |
//! | `cpu_matrices_plans`        | nothing            |    56 |
//! | `cpu_reduce_references`     | nothing            |    42 |
//! | `cpu_mandelbrot_checks`     | nothing            |    24 |
//! | `cpu_streams_life_contexts` | nothing            |    25 |
//! | `cpu_ptx_files`             | nothing            |     4 |
//! | `cpu_c_abi`                 | the C ABI library  |    33 |
//! | `foundation`                | GPU                |    49 |
//! | `matrices`                  | GPU                |    96 |
//! | `reduce`                    | GPU                |   160 |
//! | `mandelbrot`                | GPU                |    63 |
//! | `c_abi`                     | GPU + library      |    11 |
//! | `streams_lanes`             | GPU                |    37 |
//! | `life`                      | GPU                |    21 |
//! | `contexts`                  | GPU                |    24 |
//! | `module`                    | GPU                |    48 |
//!
//! Left out on purpose (they would copy, or allocate, a huge input before
//! anything could refuse it, because nothing refuses it: the size is valid):
//! `multiply`, `vector_sum_i32`, `vector_sum_repeat`, the elementwise
//! kernels, `mult_ker` and the reductions with two equally huge (2^32)
//! broadcast inputs; `matrix_mul_naive` with a 2^32-element operand (only
//! the tiled kernel refuses it); `doubles_matrix` at a valid huge size;
//! `gufunc_matmul_i64` with a valid 2^32 batch (its plan allocates two
//! offsets per output matrix); `warp_primitives_test` at a valid huge grid
//! (it allocates 8 words per thread); `Lane::new` at a huge length (that is
//! an allocation failure, not a validation). `fault_test` is only called
//! with shapes it must refuse, and on a GPU whose module has no
//! `fault_test_kernel`, so that even a regression cannot make it trap.
mod common;

use std::fmt::{Debug, Display};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use common::{cpu_test, gpu_test, have_gpu, run};
use cuda_kernels::async_mem::Lane;
use cuda_kernels::contexts::{ThreadContext, manual_context_roundtrip, threads_mult_ker};
use cuda_kernels::cust::memory::{CopyDestination, DeviceBuffer};
use cuda_kernels::device_checks::block_reverse_i32_cpu;
use cuda_kernels::launch::{
    MAX_GRID_X, MAX_GRID_YZ, check_block, checked_elements, grid_1d_capped, grid_exact, same_len,
};
use cuda_kernels::life::{LifeSims, check_lattice, life_cpu, life_grid, life_step_cpu};
use cuda_kernels::mandelbrot::c_abi::{CAbiError, CAbiLibrary, LIBRARY_NAME, status};
use cuda_kernels::mandelbrot::driver_api::{PtxSource, mandelbrot_driver_api};
use cuda_kernels::mandelbrot::{
    BLOCK as MANDEL_BLOCK, KERNEL as MANDEL, MAX_LATTICE_SIZE, check_launch, linspace_f32,
    mandelbrot_cpu,
};
use cuda_kernels::matrices::kernels::{lerp, saxpy, sum};
use cuda_kernels::matrices::{
    MatmulKernel, check_matmul, doubles_matrix_cpu, doubles_matrix_launch, elementwise_cpu,
    gufunc_matmul_i64_cpu, gufunc_plan, matmul_cpu, matmul_launch, vector_sum_repeat_cpu,
};
use cuda_kernels::multiply::{MemoryMode, multiply_cpu, vector_sum_i32_cpu};
use cuda_kernels::ndarray::{
    Array1, Array2, ArrayD, ArrayView1, ArrayView2, ArrayViewD, Ix1, Ix2, IxDyn, ShapeBuilder, s,
};
use cuda_kernels::reduce::{
    Element, Max, Min, Product, ReduceKernel, Sum, Xor, reduce_cpu, start_value,
};
use cuda_kernels::streams::{IssueOrder, SerialBatch, StreamBatch, check_mult_ker, mult_ker_cpu};
use cuda_kernels::{Error, Gpu, PTX};
use libtest_mimic::{Completion, Failed, Trial};

fn main() -> ExitCode {
    run(vec![
        cpu_test("cpu_launch_helpers", cpu_launch_helpers),
        cpu_test("cpu_matrices_plans", cpu_matrices_plans),
        cpu_test("cpu_reduce_references", cpu_reduce_references),
        cpu_test("cpu_mandelbrot_checks", cpu_mandelbrot_checks),
        cpu_test("cpu_streams_life_contexts", cpu_streams_life_contexts),
        cpu_test("cpu_ptx_files", cpu_ptx_files),
        c_abi_trial("cpu_c_abi", false, cpu_c_abi),
        gpu_test("foundation", foundation),
        gpu_test("matrices", matrices),
        gpu_test("reduce", reduce),
        gpu_test("mandelbrot", mandelbrot),
        c_abi_trial("c_abi", true, c_abi_gpu),
        gpu_test("streams_lanes", streams_lanes),
        gpu_test("life", life),
        gpu_test("contexts", contexts),
        gpu_test("module", module),
    ])
}

// ---------------------------------------------------------------------------
// The case table.
// ---------------------------------------------------------------------------

/// The documented error a case must give.
#[derive(Debug, Clone, Copy)]
enum Want {
    /// `Error::InvalidInput` naming this kernel.
    Invalid(&'static str),
    /// `Error::PtxFile`.
    PtxFile,
    /// `Error::ModuleLoad`.
    ModuleLoad,
    /// `Error::KernelNotFound` for this name.
    NotFound(&'static str),
    /// `Error::Cuda` naming this kernel (a driver call refused the input).
    Cuda(&'static str),
}

impl Want {
    fn matches(self, e: &Error) -> bool {
        match (self, e) {
            (Want::Invalid(k), Error::InvalidInput { kernel, .. }) => *kernel == k,
            (Want::PtxFile, Error::PtxFile { .. }) => true,
            (Want::ModuleLoad, Error::ModuleLoad { .. }) => true,
            (Want::NotFound(k), Error::KernelNotFound { name }) => name == k,
            (Want::Cuda(k), Error::Cuda { kernel, .. }) => *kernel == k,
            _ => false,
        }
    }
}

/// The cases of one trial: how many ran, and every one that failed.
struct Cases {
    family: &'static str,
    run: usize,
    failed: Vec<String>,
}

fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic".into())
}

impl Cases {
    fn new(family: &'static str) -> Self {
        Self {
            family,
            run: 0,
            failed: Vec::new(),
        }
    }

    /// A case that must be refused with `want` (the value, if any, is not
    /// printed: it may be large).
    fn refuse<T>(&mut self, case: &str, want: Want, f: impl FnOnce() -> cuda_kernels::Result<T>) {
        self.run += 1;
        match catch_unwind(AssertUnwindSafe(f)) {
            Ok(Err(e)) if want.matches(&e) => {}
            Ok(Err(e)) => self
                .failed
                .push(format!("{case}: expected {want:?}, got {e:?}")),
            Ok(Ok(_)) => self
                .failed
                .push(format!("{case}: expected {want:?}, but it was accepted")),
            Err(p) => self.failed.push(format!(
                "{case}: expected {want:?}, but it panicked: {}",
                panic_message(&*p)
            )),
        }
    }

    /// A case that must work: `f` says what is wrong, if anything.
    fn works(&mut self, case: &str, f: impl FnOnce() -> Result<(), String>) {
        self.run += 1;
        match catch_unwind(AssertUnwindSafe(f)) {
            Ok(Ok(())) => {}
            Ok(Err(e)) => self.failed.push(format!("{case}: {e}")),
            Err(p) => self
                .failed
                .push(format!("{case}: panicked: {}", panic_message(&*p))),
        }
    }

    /// Prints the count and fails with every failing case.
    fn finish(self) -> Result<(), Failed> {
        eprintln!(
            "{}: {} cases checked, {} failed",
            self.family,
            self.run,
            self.failed.len()
        );
        if self.failed.is_empty() {
            Ok(())
        } else {
            Err(format!(
                "{}: {} of {} cases failed:\n  {}",
                self.family,
                self.failed.len(),
                self.run,
                self.failed.join("\n  ")
            )
            .into())
        }
    }
}

/// Any error as a message.
fn m(e: impl Display) -> String {
    e.to_string()
}

/// `Err` with `what` unless `got == want`.
fn same<T: PartialEq + Debug>(what: &str, got: T, want: T) -> Result<(), String> {
    if got == want {
        Ok(())
    } else {
        Err(format!("{what}: got {got:?}, expected {want:?}"))
    }
}

/// `Err(msg)` unless `cond`.
fn check(cond: bool, msg: impl FnOnce() -> String) -> Result<(), String> {
    if cond { Ok(()) } else { Err(msg()) }
}

// Zero-stride views: any logical size over one element of memory.

fn huge1<T>(one: &[T], n: usize) -> ArrayView1<'_, T> {
    ArrayView1::from_shape(Ix1(n).strides(Ix1(0)), one).expect("a zero-stride 1-D view")
}

fn huge2<T>(one: &[T], rows: usize, cols: usize) -> ArrayView2<'_, T> {
    ArrayView2::from_shape(Ix2(rows, cols).strides(Ix2(0, 0)), one).expect("a zero-stride 2-D view")
}

fn huged<'a, T>(one: &'a [T], shape: &[usize]) -> ArrayViewD<'a, T> {
    let zeros = vec![0; shape.len()];
    ArrayViewD::from_shape(IxDyn(shape).strides(IxDyn(&zeros)), one)
        .expect("a zero-stride n-D view")
}

/// Valid PTX with one kernel, none of this crate's.
const PTX_WITHOUT_KERNEL: &str = ".version 6.0\n.target sm_70\n.address_size 64\n\n.visible .entry something_else()\n{\n\tret;\n}\n";
/// A valid header and a body that is not PTX.
const PTX_GARBAGE: &str =
    ".version 6.0\n.target sm_70\n.address_size 64\n\nthis is not ptx at all {";

/// The crate's PTX cut right after the opening brace of the first kernel
/// body: the braces do not balance, whatever the PTX holds.
fn truncated_ptx() -> String {
    let entry = PTX.find(".visible .entry").unwrap_or(0);
    let brace = PTX[entry..].find('{').map_or(PTX.len(), |i| entry + i + 1);
    PTX[..brace].to_string()
}

/// A file in the temporary folder, removed on drop.
struct TempFile(PathBuf);

impl TempFile {
    fn new(name: &str, bytes: &[u8]) -> Result<Self, String> {
        let path = std::env::temp_dir().join(format!(
            "cuda-kernels-bad-input-{}-{name}",
            std::process::id()
        ));
        std::fs::write(&path, bytes).map_err(|e| format!("{}: {e}", path.display()))?;
        Ok(Self(path))
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// A path that does not exist.
fn missing_path() -> PathBuf {
    std::env::temp_dir().join(format!(
        "cuda-kernels-bad-input-{}-no-such-file.ptx",
        std::process::id()
    ))
}

/// A GPU whose module holds none of this crate's kernels: a launcher that
/// forgot a check gets `KernelNotFound` instead of launching anything.
fn kernel_less(t: &mut Cases) -> Option<Gpu> {
    let mut gpu = None;
    t.works("Gpu::from_ptx(PTX without this crate's kernels)", || {
        gpu = Some(Gpu::from_ptx(PTX_WITHOUT_KERNEL).map_err(m)?);
        Ok(())
    });
    gpu
}

// ---------------------------------------------------------------------------
// CPU trials: the pure validation helpers and the CPU references.
// ---------------------------------------------------------------------------

fn cpu_launch_helpers() -> Result<(), Failed> {
    let mut t = Cases::new("cpu_launch_helpers");
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
            same(case, grid_1d_capped(k, n, block).map_err(m)?, want)
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
            same(case, grid_exact(k, extent, block, axis).map_err(m)?, want)
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
            same(case, checked_elements(k, dims).map_err(m)?, want)
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

fn cpu_matrices_plans() -> Result<(), Failed> {
    let mut t = Cases::new("cpu_matrices_plans");
    for kernel in [MatmulKernel::Naive, MatmulKernel::Tiled] {
        let e = kernel.entry();
        for (case, a, b) in [
            ("inner dimensions differ", (2, 3), (4, 5)),
            ("m = 0", (0, 3), (3, 5)),
            ("k = 0", (2, 0), (0, 5)),
            ("n = 0", (2, 3), (3, 0)),
            ("m × k × 4 overflows", (1 << 62, 1), (1, 1)),
            ("k × n × 4 overflows", (1, 1 << 62), (1 << 62, 1)),
            ("m = 2^32", (1 << 32, 1), (1, 1)),
            ("n = 2^38", (1, 1), (1, 1 << 38)),
        ] {
            t.refuse(&format!("{e}: {case}"), Want::Invalid(e), || {
                matmul_launch(kernel, a, b)
            });
        }
        t.works(&format!("{e}: 1 × 1 · 1 × 1"), || {
            let l = matmul_launch(kernel, (1, 1), (1, 1)).map_err(m)?;
            same("grid", l.grid, (1, 1))
        });
    }
    let naive = MatmulKernel::Naive.entry();
    t.refuse("naive: 65,536 blocks along y", Want::Invalid(naive), || {
        matmul_launch(MatmulKernel::Naive, (65_535 * 16 + 1, 1), (1, 1))
    });
    t.works("naive: 65,535 blocks along y", || {
        matmul_launch(MatmulKernel::Naive, (65_535 * 16, 1), (1, 1))
            .map(drop)
            .map_err(m)
    });
    t.works("naive: A of 2^32 elements is accepted", || {
        matmul_launch(MatmulKernel::Naive, (1 << 16, 1 << 16), (1 << 16, 1))
            .map(drop)
            .map_err(m)
    });
    let tiled = MatmulKernel::Tiled.entry();
    for (case, a, b) in [
        (
            "tiled: A of 2^32 elements",
            (1 << 16, 1 << 16),
            (1 << 16, 1),
        ),
        (
            "tiled: A of 2^32 − 2^16 elements (one past the limit)",
            (1 << 16, 65_535),
            (65_535, 1),
        ),
        (
            "tiled: B of 2^32 elements",
            (1, 1 << 16),
            (1 << 16, 1 << 16),
        ),
        (
            "tiled: 65,536 blocks along y",
            (65_535 * 128 + 1, 1),
            (1, 1),
        ),
    ] {
        t.refuse(case, Want::Invalid(tiled), || {
            matmul_launch(MatmulKernel::Tiled, a, b)
        });
    }
    let dm = "doubles_matrix";
    for (case, rows, cols) in [
        ("0 × 5", 0, 5),
        ("5 × 0", 5, 0),
        ("0 × 0", 0, 0),
        ("65,536 blocks along y", 65_535 * 8 + 1, 1),
        ("2^31 blocks along x", 1, 1 << 36),
        ("rows × cols × 4 overflows", 1 << 62, 1),
    ] {
        t.refuse(
            &format!("doubles_matrix_launch: {case}"),
            Want::Invalid(dm),
            || doubles_matrix_launch(rows, cols),
        );
    }
    t.works("doubles_matrix_launch: 1 × 1", || {
        same("shape", doubles_matrix_launch(1, 1).map_err(m)?, (1, 256))
    });
    t.works("doubles_matrix_launch: 65,535 blocks along y", || {
        doubles_matrix_launch(65_535 * 8, 1).map(drop).map_err(m)
    });
    let g = "gufunc_matmul_i64";
    for (case, a, b) in [
        ("A has 1 axis", &[3][..], &[3, 3][..]),
        ("B has 1 axis", &[3, 3], &[3]),
        ("A has 0 axes", &[], &[3, 3]),
        ("core dimensions differ", &[2, 3], &[4, 5]),
        ("empty batch axis", &[0, 2, 2], &[2, 2]),
        ("empty core axis", &[2, 0], &[0, 2]),
        ("batch shapes do not broadcast", &[2, 2, 3], &[3, 3, 5]),
        ("A's 2^61 elements × 8 overflow", &[1 << 61, 1, 1], &[1, 1]),
        (
            "batch 2^40 × 2^40 overflows",
            &[1 << 40, 1, 1, 1],
            &[1 << 40, 1, 1],
        ),
        (
            "batch × m × p × 8 overflows",
            &[1 << 30, 1 << 17, 1],
            &[1, 1 << 17],
        ),
    ] {
        t.refuse(&format!("gufunc_plan: {case}"), Want::Invalid(g), || {
            gufunc_plan(a, b)
        });
    }
    t.works("gufunc_plan: [1, 1] · [1, 1]", || {
        let p = gufunc_plan(&[1, 1], &[1, 1]).map_err(m)?;
        same("out shape", p.out_shape, vec![1, 1])
    });
    t.works(
        "gufunc_plan: batch broadcast [3, 1, 2, 2] · [4, 2, 2]",
        || {
            let p = gufunc_plan(&[3, 1, 2, 2], &[4, 2, 2]).map_err(m)?;
            same("batch", p.batch(), 12)
        },
    );
    // The CPU references refuse what the GPU refuses.
    let a = Array1::<f32>::zeros(3);
    let b = Array1::<f32>::zeros(4);
    t.refuse(
        "matmul_cpu: inner dimensions differ",
        Want::Invalid("matmul (CPU)"),
        || {
            matmul_cpu(
                Array2::<f32>::zeros((2, 3)).view(),
                Array2::<f32>::zeros((4, 2)).view(),
            )
        },
    );
    t.refuse(
        "vector_sum_repeat_cpu: lengths differ",
        Want::Invalid("vector_sum_repeat (CPU)"),
        || vector_sum_repeat_cpu(a.view(), b.view(), 1),
    );
    let (x3, x4) = (Array1::<i32>::zeros(3), Array1::<i32>::zeros(4));
    let (mut c3, mut c4) = (Array1::<i32>::zeros(3), Array1::<i32>::zeros(4));
    let e = "elementwise_sum_i32";
    t.refuse("elementwise_cpu: 1 input for 2", Want::Invalid(e), || {
        elementwise_cpu::<sum, i32>(&[x3.view()], &mut [c3.view_mut()], &[])
    });
    t.refuse("elementwise_cpu: 3 inputs for 2", Want::Invalid(e), || {
        elementwise_cpu::<sum, i32>(
            &[x3.view(), x3.view(), x3.view()],
            &mut [c3.view_mut()],
            &[],
        )
    });
    t.refuse("elementwise_cpu: no output", Want::Invalid(e), || {
        elementwise_cpu::<sum, i32>(&[x3.view(), x3.view()], &mut [], &[])
    });
    t.refuse(
        "elementwise_cpu: a scalar too many",
        Want::Invalid(e),
        || elementwise_cpu::<sum, i32>(&[x3.view(), x3.view()], &mut [c3.view_mut()], &[1]),
    );
    t.refuse(
        "elementwise_cpu: input lengths differ",
        Want::Invalid(e),
        || elementwise_cpu::<sum, i32>(&[x3.view(), x4.view()], &mut [c3.view_mut()], &[]),
    );
    t.refuse(
        "elementwise_cpu: output length differs",
        Want::Invalid(e),
        || elementwise_cpu::<sum, i32>(&[x3.view(), x3.view()], &mut [c4.view_mut()], &[]),
    );
    let z = Array1::<i32>::zeros(0);
    let mut zc = Array1::<i32>::zeros(0);
    t.refuse("elementwise_cpu: empty", Want::Invalid(e), || {
        elementwise_cpu::<sum, i32>(&[z.view(), z.view()], &mut [zc.view_mut()], &[])
    });
    let s = "elementwise_saxpy_f32";
    let (fx, mut fy) = (Array1::<f32>::zeros(3), Array1::<f32>::zeros(3));
    t.refuse(
        "elementwise_cpu: saxpy without its scalar",
        Want::Invalid(s),
        || elementwise_cpu::<saxpy, f32>(&[fx.view()], &mut [fy.view_mut()], &[]),
    );
    let one = [0i64];
    t.refuse(
        "gufunc_matmul_i64_cpu: 2^61-element broadcast A",
        Want::Invalid(g),
        || gufunc_matmul_i64_cpu(huged(&one, &[1 << 61, 1, 1]), huged(&one, &[1, 1])),
    );
    t.finish()
}

/// Element types with small exact values for the reduction cases.
trait Num: Element {
    fn of(v: i8) -> Self;
}
impl Num for i32 {
    fn of(v: i8) -> Self {
        v.into()
    }
}
impl Num for i64 {
    fn of(v: i8) -> Self {
        v.into()
    }
}
impl Num for f32 {
    fn of(v: i8) -> Self {
        v.into()
    }
}
impl Num for f64 {
    fn of(v: i8) -> Self {
        v.into()
    }
}

/// Calls the generic function `$f::<Op, T>` for every built-in reduction
/// entry point (18).
macro_rules! every_reduction {
    ($f:ident ( $($arg:expr),* )) => {
        $f::<Sum, i32>($($arg),*);
        $f::<Sum, i64>($($arg),*);
        $f::<Sum, f32>($($arg),*);
        $f::<Sum, f64>($($arg),*);
        $f::<Product, i32>($($arg),*);
        $f::<Product, i64>($($arg),*);
        $f::<Product, f32>($($arg),*);
        $f::<Product, f64>($($arg),*);
        $f::<Min, i32>($($arg),*);
        $f::<Min, i64>($($arg),*);
        $f::<Min, f32>($($arg),*);
        $f::<Min, f64>($($arg),*);
        $f::<Max, i32>($($arg),*);
        $f::<Max, i64>($($arg),*);
        $f::<Max, f32>($($arg),*);
        $f::<Max, f64>($($arg),*);
        $f::<Xor, i32>($($arg),*);
        $f::<Xor, i64>($($arg),*);
    };
}

/// 2 cases per entry point: the CPU reference's empty-input rules.
fn reduce_cpu_cases<Op: ReduceKernel<T>, T: Num>(t: &mut Cases) {
    let k = Op::ENTRY;
    let empty = Array1::<T>::from(vec![]);
    if Op::DEFINED_ON_EMPTY {
        t.works(&format!("{k} (CPU): empty, no init"), || {
            same(
                "result",
                reduce_cpu::<Op, T>(empty.view(), None).map_err(m)?,
                Op::identity(),
            )
        });
    } else {
        t.refuse(
            &format!("{k} (CPU): empty, no init"),
            Want::Invalid(k),
            || reduce_cpu::<Op, T>(empty.view(), None),
        );
    }
    t.works(&format!("{k} (CPU): empty, init"), || {
        same(
            "result",
            reduce_cpu::<Op, T>(empty.view(), Some(T::of(7))).map_err(m)?,
            T::of(7),
        )
    });
}

fn cpu_reduce_references() -> Result<(), Failed> {
    let mut t = Cases::new("cpu_reduce_references");
    every_reduction!(reduce_cpu_cases(&mut t));
    t.refuse(
        "start_value: min of nothing",
        Want::Invalid("reduce_min_f32"),
        || start_value::<Min, f32>(0, None),
    );
    t.refuse(
        "start_value: max of nothing",
        Want::Invalid("reduce_max_i64"),
        || start_value::<Max, i64>(0, None),
    );
    t.works(
        "start_value: min of one element starts at the identity",
        || {
            same(
                "start",
                start_value::<Min, i32>(1, None).map_err(m)?,
                i32::MAX,
            )
        },
    );
    t.works("start_value: init wins", || {
        same(
            "start",
            start_value::<Max, f64>(0, Some(2.5)).map_err(m)?,
            2.5,
        )
    });
    // Strided views are reduced as viewed.
    let a = Array1::from_iter(1..=10i64);
    t.works("reduce_cpu: negative stride", || {
        same(
            "sum",
            reduce_cpu::<Sum, i64>(a.slice(s![..;-1]), None).map_err(m)?,
            55,
        )
    });
    t.works("reduce_cpu: step 3", || {
        same(
            "sum",
            reduce_cpu::<Sum, i64>(a.slice(s![..;3]), None).map_err(m)?,
            22,
        )
    });
    t.finish()
}

fn cpu_mandelbrot_checks() -> Result<(), Failed> {
    let mut t = Cases::new("cpu_mandelbrot_checks");
    for (case, size, iters, block) in [
        ("empty lattice", 0, 256, 32),
        (
            "46,341 points (size² overflows i32)",
            MAX_LATTICE_SIZE + 1,
            256,
            32,
        ),
        ("2^31 points", 1 << 31, 256, 32),
        ("2^32 points", 1 << 32, 256, 32),
        ("usize::MAX points", usize::MAX, 256, 32),
        ("max_iters = -1", 4, -1, 32),
        ("max_iters = i32::MIN", 4, i32::MIN, 32),
        ("block 0", 4, 256, 0),
        ("block 1025", 4, 256, 1025),
    ] {
        t.refuse(
            &format!("check_launch: {case}"),
            Want::Invalid(MANDEL),
            || check_launch(MANDEL, size, iters, 2.0, block),
        );
    }
    t.works("check_launch: 46,340 points (the largest)", || {
        let l = check_launch(MANDEL, MAX_LATTICE_SIZE, 1, 2.0, 1).map_err(m)?;
        check(l.grid as usize * l.block as usize >= l.points, || {
            format!("grid {} does not cover {}", l.grid, l.points)
        })
    });
    t.works("check_launch: one point, block 1024", || {
        same(
            "grid",
            check_launch(MANDEL, 1, 0, 2.0, 1024).map_err(m)?.grid,
            1,
        )
    });
    let one = [0.0f32];
    let cpu = "mandelbrot (CPU)";
    t.refuse("mandelbrot_cpu: empty", Want::Invalid(cpu), || {
        mandelbrot_cpu(Array1::<f32>::zeros(0).view(), 256, 2.0)
    });
    t.refuse(
        "mandelbrot_cpu: 2^32-point broadcast lattice",
        Want::Invalid(cpu),
        || mandelbrot_cpu(huge1(&one, 1 << 32), 256, 2.0),
    );
    t.works("mandelbrot_cpu: one point", || {
        let g = mandelbrot_cpu(ArrayView1::from(&[0.0f32]), 10, 2.0).map_err(m)?;
        same("graph", g, Array2::from_elem((1, 1), 1.0))
    });
    // The driver-API path checks everything before its first driver call:
    // these are refused with or without a GPU.
    let d = "mandelbrot_ker (driver API)";
    let lattice = linspace_f32(-2.0, 2.0, 4);
    let empty = Array1::<f32>::zeros(0);
    let text = PtxSource::Text(PTX);
    for (case, l, iters) in [
        ("empty lattice", empty.view(), 256),
        ("46,341 points", huge1(&one, MAX_LATTICE_SIZE + 1), 256),
        ("2^31 points", huge1(&one, 1 << 31), 256),
        ("2^32 points", huge1(&one, 1 << 32), 256),
        ("max_iters = -1", lattice.view(), -1),
    ] {
        t.refuse(&format!("driver API: {case}"), Want::Invalid(d), || {
            mandelbrot_driver_api(text, l, iters, 2.0)
        });
    }
    t.refuse("driver API: PTX text with a NUL", Want::Invalid(d), || {
        mandelbrot_driver_api(PtxSource::Text("a\0b"), lattice.view(), 256, 2.0)
    });
    let missing = missing_path();
    t.refuse("driver API: missing PTX file", Want::PtxFile, || {
        mandelbrot_driver_api(PtxSource::File(&missing), lattice.view(), 256, 2.0)
    });
    t.refuse("driver API: PTX path with a NUL", Want::PtxFile, || {
        mandelbrot_driver_api(
            PtxSource::File(Path::new("/tmp/a\0b.ptx")),
            lattice.view(),
            256,
            2.0,
        )
    });
    t.refuse(
        "driver API: bad size wins over a missing file",
        Want::Invalid(d),
        || mandelbrot_driver_api(PtxSource::File(&missing), Array1::zeros(0).view(), 256, 2.0),
    );
    t.works("linspace_f32: one point is [low]", || {
        same("lattice", linspace_f32(-2.0, 2.0, 1).to_vec(), vec![-2.0])
    });
    t.finish()
}

fn cpu_streams_life_contexts() -> Result<(), Failed> {
    let mut t = Cases::new("cpu_streams_life_contexts");
    let mk = "mult_ker";
    for (case, len, grid, block) in [
        ("empty", 0, 1, 64),
        ("grid 0", 10, 0, 64),
        ("grid 2^31", 10, MAX_GRID_X + 1, 64),
        ("grid u32::MAX", 10, u32::MAX, 64),
        ("block 0", 10, 1, 0),
        ("block 1025", 10, 1, 1025),
        ("2^32 elements, grid 0", 1 << 32, 0, 64),
    ] {
        t.refuse(
            &format!("check_mult_ker: {case}"),
            Want::Invalid(mk),
            || check_mult_ker(len, grid, block),
        );
    }
    t.works(
        "check_mult_ker: 2^32 elements, grid 2^31 − 1 of 1024",
        || check_mult_ker(1 << 32, MAX_GRID_X, 1024).map_err(m),
    );
    t.works("mult_ker_cpu: one element is the identity", || {
        same(
            "out",
            mult_ker_cpu(ArrayView1::from(&[1.5f32])).to_vec(),
            vec![1.5],
        )
    });
    let c = "conway_ker";
    for (case, n) in [
        ("0", 0),
        ("65,535 × 32 + 1 (65,536 blocks along y)", 65_535 * 32 + 1),
        ("2^32 (n² × 4 overflows)", 1 << 32),
        ("usize::MAX", usize::MAX),
    ] {
        t.refuse(&format!("life_grid: {case}"), Want::Invalid(c), || {
            life_grid(n)
        });
    }
    t.works("life_grid: 1", || {
        same("grid", life_grid(1).map_err(m)?, (1, 1))
    });
    let zero = [0i32];
    let two = [2i32];
    t.refuse("check_lattice: 0 × 0", Want::Invalid(c), || {
        check_lattice(Array2::<i32>::zeros((0, 0)).view())
    });
    t.refuse("check_lattice: 3 × 4", Want::Invalid(c), || {
        check_lattice(Array2::<i32>::zeros((3, 4)).view())
    });
    t.refuse("check_lattice: a cell of 2", Want::Invalid(c), || {
        check_lattice(huge2(&two, 2, 2))
    });
    t.refuse("check_lattice: a cell of -1", Want::Invalid(c), || {
        check_lattice(Array2::from_elem((2, 2), -1).view())
    });
    t.refuse(
        "check_lattice: 2,097,121² broadcast (past the grid)",
        Want::Invalid(c),
        || check_lattice(huge2(&zero, 65_535 * 32 + 1, 65_535 * 32 + 1)),
    );
    t.refuse(
        "check_lattice: 2^32 × 1 broadcast (not square)",
        Want::Invalid(c),
        || check_lattice(huge2(&zero, 1 << 32, 1)),
    );
    t.refuse("life_step_cpu: 0 × 0", Want::Invalid(c), || {
        life_step_cpu(Array2::<i32>::zeros((0, 0)).view())
    });
    t.works(
        "life_cpu: one live cell dies (it is its own 8 neighbours)",
        || {
            same(
                "step",
                life_cpu(Array2::from_elem((1, 1), 1).view(), 1).map_err(m)?,
                Array2::zeros((1, 1)),
            )
        },
    );
    let k = "context";
    t.refuse("threads_mult_ker: no arrays", Want::Invalid(k), || {
        threads_mult_ker(PTX, &[])
    });
    t.refuse("threads_mult_ker: an empty array", Want::Invalid(k), || {
        threads_mult_ker(PTX, &[vec![1.0], vec![]])
    });
    t.refuse("threads_mult_ker: PTX with a NUL", Want::Invalid(k), || {
        threads_mult_ker("a\0b", &[vec![1.0]])
    });
    t.finish()
}

fn cpu_ptx_files() -> Result<(), Failed> {
    let mut t = Cases::new("cpu_ptx_files");
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

/// A trial of the C ABI library: ignored without it (and, for `gpu`, without
/// a GPU), with the reason.
fn c_abi_trial(name: &str, gpu: bool, body: fn(&CAbiLibrary) -> Result<(), Failed>) -> Trial {
    let trial = Trial::ignorable_test(name, move || {
        if gpu && let Err(reason) = common::shared_gpu() {
            return Ok(Completion::ignored_with(reason));
        }
        let Some(path) = CAbiLibrary::find() else {
            return Ok(Completion::ignored_with(format!(
                "{LIBRARY_NAME} not found (build it: cargo build -p cuda-kernels-capi)"
            )));
        };
        let lib = CAbiLibrary::open(&path).map_err(common::fail)?;
        body(&lib).map(|()| Completion::Completed)
    });
    if gpu { trial.with_kind("gpu") } else { trial }
}

/// The C ABI's status for a case that the library must refuse.
fn c_status(t: &mut Cases, lib: &CAbiLibrary, case: &str, want: i32, call: impl FnOnce() -> i32) {
    t.works(case, || {
        let code = call();
        same("status", code, want)?;
        check(!lib.last_error().is_empty(), || "no message".into())
    });
}

const HEADER: &str = include_str!("../capi/include/cuda_kernels.h");

fn cpu_c_abi(lib: &CAbiLibrary) -> Result<(), Failed> {
    let mut t = Cases::new("cpu_c_abi");
    for (name, value) in status::HEADER_NAMES {
        t.works(&format!("header: {name} = {value}"), || {
            let line = HEADER
                .lines()
                .find(|l| l.starts_with(&format!("#define {name} ")))
                .ok_or_else(|| format!("{name} is not defined"))?;
            let defined: String = line[8 + name.len()..]
                .split("/*")
                .next()
                .unwrap_or("")
                .chars()
                .filter(|c| !c.is_whitespace() && *c != '(' && *c != ')')
                .collect();
            same(line, defined.parse::<i32>().ok(), Some(value))
        });
    }
    let lattice = [0.0f32; 4];
    let mut graph = [7.0f32; 16];
    let (l, g) = (lattice.as_ptr(), graph.as_mut_ptr());
    let (null_l, null_g) = (std::ptr::null::<f32>(), std::ptr::null_mut::<f32>());
    // A pointer one byte into the graph: not aligned for float.
    let odd_g = g.cast::<u8>().wrapping_add(1).cast::<f32>();
    let odd_l = lattice.as_ptr().cast::<u8>().wrapping_add(1).cast::<f32>();
    for (case, (lp, gp, iters, size), want) in [
        ("null lattice", (null_l, g, 256, 4), status::NULL_POINTER),
        ("null graph", (l, null_g, 256, 4), status::NULL_POINTER),
        ("both null", (null_l, null_g, 256, 4), status::NULL_POINTER),
        (
            "null lattice and size 0 (null wins)",
            (null_l, g, 256, 0),
            status::NULL_POINTER,
        ),
        ("size 0", (l, g, 256, 0), status::BAD_SIZE),
        ("size -1", (l, g, 256, -1), status::BAD_SIZE),
        ("size i32::MIN", (l, g, 256, i32::MIN), status::BAD_SIZE),
        (
            "size 46,341 (size² overflows int)",
            (l, g, 256, 46_341),
            status::BAD_SIZE,
        ),
        (
            "size 65,536 (size² = 2^32)",
            (l, g, 256, 65_536),
            status::BAD_SIZE,
        ),
        ("size i32::MAX", (l, g, 256, i32::MAX), status::BAD_SIZE),
        ("max_iters -1", (l, g, -1, 4), status::BAD_ARGUMENT),
        (
            "max_iters i32::MIN",
            (l, g, i32::MIN, 4),
            status::BAD_ARGUMENT,
        ),
        ("graph misaligned", (l, odd_g, 256, 2), status::BAD_ARGUMENT),
        (
            "lattice misaligned",
            (odd_l, g, 256, 2),
            status::BAD_ARGUMENT,
        ),
        (
            "lattice inside the graph",
            (g.wrapping_add(2).cast_const(), g, 256, 2),
            status::BAD_ARGUMENT,
        ),
        (
            "graph overlaps the lattice's end",
            (g.cast_const(), g.wrapping_add(1), 256, 2),
            status::BAD_ARGUMENT,
        ),
    ] {
        c_status(
            &mut t,
            lib,
            &format!("launch_mandelbrot: {case}"),
            want,
            || {
                // SAFETY: every non-null pointer is valid for what the size asks, or the
                // call is refused before any access (which is what this case checks).
                unsafe { lib.launch_mandelbrot_raw(lp, gp, iters, 2.0, size) }
            },
        );
    }
    t.works("refused calls wrote nothing", || {
        check(graph == [7.0; 16], || format!("graph is now {graph:?}"))
    });
    let one = [0.0f32];
    let status_of = |r: Result<_, CAbiError>| match r {
        Err(CAbiError::Status { status, .. }) => Ok(status),
        Err(e) => Err(format!("expected a status, got {e}")),
        Ok(_) => Err("accepted".to_string()),
    };
    t.works("CAbiLibrary::mandelbrot: empty lattice is BAD_SIZE", || {
        same(
            "status",
            status_of(lib.mandelbrot(Array1::zeros(0).view(), 256, 2.0))?,
            status::BAD_SIZE,
        )
    });
    t.works(
        "CAbiLibrary::mandelbrot: max_iters -1 is BAD_ARGUMENT",
        || {
            same(
                "status",
                status_of(lib.mandelbrot(ArrayView1::from(&one), -1, 2.0))?,
                status::BAD_ARGUMENT,
            )
        },
    );
    for (case, n) in [
        ("46,341 points", MAX_LATTICE_SIZE + 1),
        ("2^31 points", 1 << 31),
        ("2^32 points", 1 << 32),
    ] {
        t.works(
            &format!("CAbiLibrary::mandelbrot: {case} refused before any copy"),
            || match lib.mandelbrot(huge1(&one, n), 256, 2.0) {
                Err(CAbiError::Invalid(_)) => Ok(()),
                Err(e) => Err(format!("expected Invalid, got {e}")),
                Ok(_) => Err("accepted".into()),
            },
        );
    }
    t.works("a valid call: OK with a GPU, NO_GPU without", || {
        let lattice = [0.0f32; 2];
        let mut graph = [7.0f32; 4];
        // SAFETY: valid for 2 and 4 floats.
        let code =
            unsafe { lib.launch_mandelbrot_raw(lattice.as_ptr(), graph.as_mut_ptr(), 10, 2.0, 2) };
        same(
            "status",
            code,
            if have_gpu() {
                status::OK
            } else {
                status::NO_GPU
            },
        )
    });
    let missing = missing_path();
    t.works(
        "CAbiLibrary::open: missing file is a Load error",
        || match CAbiLibrary::open(&missing) {
            Err(CAbiError::Load { .. }) => Ok(()),
            Err(e) => Err(format!("expected Load, got {e}")),
            Ok(_) => Err("opened".into()),
        },
    );
    t.works("CAbiLibrary::open: a text file is a Load error", || {
        let f = TempFile::new("not-a-library.so", b"not an ELF file")?;
        match CAbiLibrary::open(&f.0) {
            Err(CAbiError::Load { .. }) => Ok(()),
            Err(e) => Err(format!("expected Load, got {e}")),
            Ok(_) => Err("opened".into()),
        }
    });
    t.works(
        "CAbiLibrary::open: a path with a NUL is a Load error",
        || match CAbiLibrary::open("/tmp/a\0b.so") {
            Err(CAbiError::Load { .. }) => Ok(()),
            Err(e) => Err(format!("expected Load, got {e}")),
            Ok(_) => Err("opened".into()),
        },
    );
    t.finish()
}

// ---------------------------------------------------------------------------
// GPU trials.
// ---------------------------------------------------------------------------

fn foundation(gpu: &Gpu) -> Result<(), Failed> {
    let mut t = Cases::new("foundation");
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
        t.works(&format!("{tag}: one element"), || {
            let (c, _) = gpu
                .multiply_timed(
                    ArrayView1::from(&[3.0f32]),
                    ArrayView1::from(&[-0.5f32]),
                    mode,
                )
                .map_err(m)?;
            same("c", c.to_vec(), vec![-1.5])
        });
    }
    let x: Array1<f32> = (0..301).map(|i| i as f32 * 0.25 - 7.0).collect();
    for (case, a, b) in [
        ("negative stride", x.slice(s![..;-1]), x.slice(s![..])),
        ("step 2 and step -2", x.slice(s![..;2]), x.slice(s![..;-2])),
        ("broadcast (zero stride)", huge1(&one, 301), x.view()),
    ] {
        t.works(&format!("multiply: {case}"), || {
            let c = gpu.multiply(a, b).map_err(m)?;
            same("c", c, multiply_cpu(a, b).map_err(m)?)
        });
    }
    // On device.
    let dev = |n: usize| DeviceBuffer::from_slice(&vec![2.0f32; n]).map_err(m);
    let fail = common::fail;
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
        same("c", out, [4.0])
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
        same("res", r.to_vec(), vec![i32::MIN])
    });
    let xi: Array1<i32> = (0..257).map(|i| i * 3 - 100).collect();
    t.works("vector_sum_i32: negative stride and step 3", || {
        let (a, b) = (xi.slice(s![..;-3]), xi.slice(s![..;3]));
        same(
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
    // that a missing check gives KernelNotFound instead of a trap.
    if let Some(other) = kernel_less(&mut t) {
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
            same(
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
    t.works("launch_overhead: 1 launch", || {
        let r = gpu.launch_overhead(1).map_err(m)?;
        check(r.synchronous_per_s > 0.0, || format!("{r:?}"))
    });
    t.finish()
}

fn matrices(gpu: &Gpu) -> Result<(), Failed> {
    let mut t = Cases::new("matrices");
    let dm = "doubles_matrix";
    let one = [1.25f32];
    let (e05, e50) = (Array2::<f32>::zeros((0, 5)), Array2::<f32>::zeros((5, 0)));
    for (case, a) in [
        ("0 × 5", e05.view()),
        ("5 × 0", e50.view()),
        (
            "524,281 × 1 broadcast (65,536 blocks along y)",
            huge2(&one, 65_535 * 8 + 1, 1),
        ),
        (
            "1 × 2^36 broadcast (2^31 blocks along x)",
            huge2(&one, 1, 1 << 36),
        ),
        (
            "2^62 × 1 broadcast (bytes overflow)",
            huge2(&one, 1 << 62, 1),
        ),
    ] {
        t.refuse(
            &format!("doubles_matrix: {case}"),
            Want::Invalid(dm),
            || gpu.doubles_matrix(a),
        );
    }
    let x = Array2::from_shape_fn((5, 7), |(i, j)| (i * 7 + j) as f32 - 3.5);
    for (case, a) in [
        (
            "1 × 1",
            ArrayView2::from_shape((1, 1), &one[..]).expect("1 × 1"),
        ),
        ("transposed", x.t()),
        ("negative strides", x.slice(s![..;-1, ..;-2])),
        ("broadcast 4 × 3", huge2(&one, 4, 3)),
    ] {
        t.works(&format!("doubles_matrix: {case}"), || {
            same(
                "2a",
                gpu.doubles_matrix(a).map_err(m)?,
                doubles_matrix_cpu(a),
            )
        });
    }
    t.refuse("doubles_matrix_in_place: 0 × 3", Want::Invalid(dm), || {
        gpu.doubles_matrix_in_place(Array2::<f32>::zeros((0, 3)).view_mut())
    });
    t.refuse(
        "doubles_matrix_in_place: 524,281 × 1 (65,536 blocks along y)",
        Want::Invalid(dm),
        || gpu.doubles_matrix_in_place(Array2::<f32>::zeros((65_535 * 8 + 1, 1)).view_mut()),
    );
    t.works(
        "doubles_matrix_in_place: transposed and reversed view",
        || {
            let mut y = x.clone();
            gpu.doubles_matrix_in_place(y.slice_mut(s![..;-1, ..]).reversed_axes())
                .map_err(m)?;
            same("in place", y, doubles_matrix_cpu(x.view()))
        },
    );
    t.works(
        "doubles_matrix_in_place: step-2 rows leave the others alone",
        || {
            let mut y = x.clone();
            gpu.doubles_matrix_in_place(y.slice_mut(s![..;2, ..]))
                .map_err(m)?;
            let mut want = x.clone();
            want.slice_mut(s![..;2, ..]).mapv_inplace(|v| 2.0 * v);
            same("in place", y, want)
        },
    );
    let mut d5 = DeviceBuffer::from_slice(&[1.0f32; 5]).map_err(common::fail)?;
    for (case, rows, cols) in [
        ("2 × 3 in 5", 2, 3),
        ("0 × 5", 0, 5),
        ("524,281 × 1 in 5", 65_535 * 8 + 1, 1),
        ("2^62 × 1 in 5", 1 << 62, 1),
    ] {
        t.refuse(
            &format!("doubles_matrix_on_device: {case}"),
            Want::Invalid(dm),
            || gpu.doubles_matrix_on_device(&mut d5, rows, cols),
        );
    }
    t.works("doubles_matrix_on_device: 1 × 1", || {
        let mut d = DeviceBuffer::from_slice(&[1.5f32]).map_err(m)?;
        gpu.doubles_matrix_on_device(&mut d, 1, 1).map_err(m)?;
        gpu.synchronize(dm).map_err(m)?;
        let mut out = [0.0f32];
        d.copy_to(&mut out[..]).map_err(m)?;
        same("2a", out, [3.0])
    });
    // Matrix products, both kernels.
    let z = |r: usize, c: usize| Array2::<f32>::zeros((r, c));
    let (a23, b45, a03, b35, a20, b05, b30) = (
        z(2, 3),
        z(4, 5),
        z(0, 3),
        z(3, 5),
        z(2, 0),
        z(0, 5),
        z(3, 0),
    );
    let p = Array2::from_shape_fn((6, 5), |(i, j)| ((i * 5 + j) % 7) as f32 - 3.0);
    let q = Array2::from_shape_fn((5, 4), |(i, j)| ((i + 2 * j) % 5) as f32 * 0.5);
    for kernel in [MatmulKernel::Naive, MatmulKernel::Tiled] {
        let e = kernel.entry();
        let mm = |a: ArrayView2<f32>, b: ArrayView2<f32>| match kernel {
            MatmulKernel::Naive => gpu.matrix_mul_naive(a, b),
            MatmulKernel::Tiled => gpu.matrix_mul_tiled(a, b),
        };
        let mut refusals: Vec<(&str, ArrayView2<f32>, ArrayView2<f32>)> = vec![
            ("inner dimensions differ", a23.view(), b45.view()),
            ("m = 0", a03.view(), b35.view()),
            ("k = 0", a20.view(), b05.view()),
            ("n = 0", a23.view(), b30.view()),
            (
                "2^62 × 1 broadcast A (bytes overflow)",
                huge2(&one, 1 << 62, 1),
                huge2(&one, 1, 1),
            ),
            (
                "A 2^32 × 1 broadcast: grid y",
                huge2(&one, 1 << 32, 1),
                huge2(&one, 1, 1),
            ),
            (
                "B 1 × 2^38 broadcast: grid x",
                huge2(&one, 1, 1),
                huge2(&one, 1, 1 << 38),
            ),
        ];
        match kernel {
            MatmulKernel::Naive => refusals.push((
                "1,048,561 × 1 broadcast A (65,536 blocks along y)",
                huge2(&one, 65_535 * 16 + 1, 1),
                huge2(&one, 1, 1),
            )),
            MatmulKernel::Tiled => refusals.extend([
                (
                    "8,388,481 × 1 broadcast A (65,536 blocks along y)",
                    huge2(&one, 65_535 * 128 + 1, 1),
                    huge2(&one, 1, 1),
                ),
                (
                    "2^16 × 2^16 broadcast A (2^32 elements)",
                    huge2(&one, 1 << 16, 1 << 16),
                    huge2(&one, 1 << 16, 1),
                ),
                (
                    "2^16 × 65,535 broadcast A (one past the limit)",
                    huge2(&one, 1 << 16, 65_535),
                    huge2(&one, 65_535, 1),
                ),
            ]),
        }
        for (case, a, b) in refusals {
            t.refuse(&format!("{e}: {case}"), Want::Invalid(e), || mm(a, b));
        }
        t.refuse(
            &format!("{e} (timed): inner dimensions differ"),
            Want::Invalid(e),
            || gpu.matmul_timed(kernel, a23.view(), b45.view()),
        );
        let works: Vec<(&str, ArrayView2<f32>, ArrayView2<f32>)> = vec![
            ("1 × 1 · 1 × 1", huge2(&one, 1, 1), huge2(&[-2.0f32], 1, 1)),
            ("transposed operands", q.t(), p.t()),
            (
                "negative strides",
                p.slice(s![..;-1, ..]),
                q.slice(s![.., ..;-1]),
            ),
            ("broadcast operands", huge2(&one, 3, 5), q.view()),
            (
                "1 × k · k × 1",
                p.slice(s![2..3, ..]),
                q.slice(s![.., 1..2]),
            ),
        ];
        for (case, a, b) in works {
            t.works(&format!("{e}: {case}"), || {
                let c = mm(a, b).map_err(m)?;
                let chk = check_matmul(c.view(), a, b).map_err(m)?;
                check(chk.passed(), || format!("{chk:?}"))
            });
        }
        let fail = common::fail;
        let (d6, d4) = (
            DeviceBuffer::from_slice(&[1.0f32; 6]).map_err(fail)?,
            DeviceBuffer::from_slice(&[1.0f32; 4]).map_err(fail)?,
        );
        let mut c4 = DeviceBuffer::from_slice(&[0.0f32; 4]).map_err(fail)?;
        let mut c6 = DeviceBuffer::from_slice(&[0.0f32; 6]).map_err(fail)?;
        // m = 2, k = 3, n = 2: A holds 6, B 6, C 4.
        t.refuse(&format!("{e}_on_device: A short"), Want::Invalid(e), || {
            gpu.matmul_on_device(kernel, &d4, &d6, &mut c4, 2, 3, 2)
        });
        t.refuse(&format!("{e}_on_device: B short"), Want::Invalid(e), || {
            gpu.matmul_on_device(kernel, &d6, &d4, &mut c4, 2, 3, 2)
        });
        t.refuse(&format!("{e}_on_device: C long"), Want::Invalid(e), || {
            gpu.matmul_on_device(kernel, &d6, &d6, &mut c6, 2, 3, 2)
        });
        t.refuse(&format!("{e}_on_device: m = 0"), Want::Invalid(e), || {
            gpu.matmul_on_device(kernel, &d6, &d6, &mut c4, 0, 3, 2)
        });
        t.refuse(
            &format!("{e}_on_device: 2^16 × 2^16 · 2^16 × 2^20 in small buffers"),
            Want::Invalid(e),
            || gpu.matmul_on_device(kernel, &d6, &d6, &mut c4, 1 << 16, 1 << 16, 1 << 20),
        );
        t.works(&format!("{e}_on_device: 1 × 1"), || {
            let (a, b) = (
                DeviceBuffer::from_slice(&[3.0f32]).map_err(m)?,
                DeviceBuffer::from_slice(&[0.5f32]).map_err(m)?,
            );
            let mut c = DeviceBuffer::from_slice(&[0.0f32]).map_err(m)?;
            gpu.matmul_on_device(kernel, &a, &b, &mut c, 1, 1, 1)
                .map_err(m)?;
            gpu.synchronize(e).map_err(m)?;
            let mut out = [0.0f32];
            c.copy_to(&mut out[..]).map_err(m)?;
            same("c", out, [1.5])
        });
    }
    // Elementwise: the generic launcher, the typed ones, on device.
    let es = "elementwise_sum_i32";
    let (x3, x4, x0) = (
        Array1::from(vec![1i32, 2, 3]),
        Array1::<i32>::zeros(4),
        Array1::<i32>::zeros(0),
    );
    let ione = [1i32];
    t.refuse(
        "elementwise::<sum>: 1 input for 2",
        Want::Invalid(es),
        || gpu.elementwise::<sum, i32>(&[x3.view()], &mut [Array1::zeros(3).view_mut()], &[]),
    );
    t.refuse(
        "elementwise::<sum>: 3 inputs for 2",
        Want::Invalid(es),
        || {
            gpu.elementwise::<sum, i32>(
                &[x3.view(), x3.view(), x3.view()],
                &mut [Array1::zeros(3).view_mut()],
                &[],
            )
        },
    );
    t.refuse("elementwise::<sum>: no output", Want::Invalid(es), || {
        gpu.elementwise::<sum, i32>(&[x3.view(), x3.view()], &mut [], &[])
    });
    t.refuse(
        "elementwise::<sum>: a scalar too many",
        Want::Invalid(es),
        || {
            gpu.elementwise::<sum, i32>(
                &[x3.view(), x3.view()],
                &mut [Array1::zeros(3).view_mut()],
                &[5],
            )
        },
    );
    t.refuse(
        "elementwise_sum: input lengths differ",
        Want::Invalid(es),
        || gpu.elementwise_sum(x3.view(), x4.view(), Array1::zeros(3).view_mut()),
    );
    t.refuse(
        "elementwise_sum: output length differs",
        Want::Invalid(es),
        || gpu.elementwise_sum(x3.view(), x3.view(), Array1::zeros(4).view_mut()),
    );
    t.refuse("elementwise_sum: empty", Want::Invalid(es), || {
        gpu.elementwise_sum(x0.view(), x0.view(), Array1::zeros(0).view_mut())
    });
    t.refuse(
        "elementwise_sum: 2^32 broadcast input vs 3 (refused before any copy)",
        Want::Invalid(es),
        || {
            gpu.elementwise_sum(
                huge1(&ione, 1 << 32),
                x3.view(),
                Array1::zeros(3).view_mut(),
            )
        },
    );
    t.refuse(
        "elementwise_saxpy: 2^32 broadcast x vs y of 3",
        Want::Invalid("elementwise_saxpy_f32"),
        || {
            gpu.elementwise_saxpy(
                huge1(&one, 1 << 32),
                Array1::<f32>::zeros(3).view_mut(),
                2.0f32,
            )
        },
    );
    t.works("elementwise_sum: one element", || {
        let mut c = Array1::<i32>::zeros(1);
        gpu.elementwise_sum(
            ArrayView1::from(&[40i32]),
            ArrayView1::from(&[2i32]),
            c.view_mut(),
        )
        .map_err(m)?;
        same("c", c.to_vec(), vec![42])
    });
    t.works("elementwise_saxpy (f64): one element, in place", || {
        let mut y = Array1::from(vec![0.5f64]);
        gpu.elementwise_saxpy(ArrayView1::from(&[3.0f64]), y.view_mut(), 2.0)
            .map_err(m)?;
        same("y", y.to_vec(), vec![6.5])
    });
    t.works("elementwise_lerp (f32): one element", || {
        let mut out = Array1::<f32>::zeros(1);
        gpu.elementwise_lerp(
            ArrayView1::from(&[1.0f32]),
            ArrayView1::from(&[3.0f32]),
            ArrayView1::from(&[0.5f32]),
            out.view_mut(),
        )
        .map_err(m)?;
        let mut want = Array1::<f32>::zeros(1);
        elementwise_cpu::<lerp, f32>(
            &[
                ArrayView1::from(&[1.0f32]),
                ArrayView1::from(&[3.0f32]),
                ArrayView1::from(&[0.5f32]),
            ],
            &mut [want.view_mut()],
            &[],
        )
        .map_err(m)?;
        same("out", out, want)
    });
    let big: Array1<i32> = (0..1001).map(|i| i % 97 - 48).collect();
    t.works(
        "elementwise_sum: negative-stride inputs into a negative-stride output",
        || {
            let mut c = Array1::<i32>::zeros(1001);
            let mut want = Array1::<i32>::zeros(1001);
            let (a, b) = (big.slice(s![..;-1]), big.view());
            gpu.elementwise_sum(a, b, c.slice_mut(s![..;-1]))
                .map_err(m)?;
            elementwise_cpu::<sum, i32>(&[a, b], &mut [want.slice_mut(s![..;-1])], &[])
                .map_err(m)?;
            same("c", c, want)
        },
    );
    t.works(
        "elementwise_saxpy: step-2 inout view leaves the rest alone",
        || {
            let xf: Array1<f32> = (0..501).map(|i| i as f32).collect();
            let mut y = Array1::<f32>::from_elem(1001, 1.0);
            gpu.elementwise_saxpy(xf.view(), y.slice_mut(s![..;2]), 2.0)
                .map_err(m)?;
            let ok = y.iter().enumerate().all(|(i, &v)| {
                if i % 2 == 0 {
                    v == 2.0 * (i / 2) as f32 + 1.0
                } else {
                    v == 1.0
                }
            });
            check(ok, || "wrong elements".into())
        },
    );
    let fail = common::fail;
    let (d3, d4) = (
        DeviceBuffer::from_slice(&[1i32; 3]).map_err(fail)?,
        DeviceBuffer::from_slice(&[1i32; 4]).map_err(fail)?,
    );
    let d0 = DeviceBuffer::<i32>::from_slice(&[]).map_err(fail)?;
    let mut c3 = DeviceBuffer::from_slice(&[0i32; 3]).map_err(fail)?;
    let mut c0 = DeviceBuffer::<i32>::from_slice(&[]).map_err(fail)?;
    t.refuse(
        "elementwise_on_device: 1 input for 2",
        Want::Invalid(es),
        || gpu.elementwise_on_device::<sum, i32>(&[&d3], &mut [&mut c3], &[]),
    );
    t.refuse(
        "elementwise_on_device: lengths differ",
        Want::Invalid(es),
        || gpu.elementwise_on_device::<sum, i32>(&[&d3, &d4], &mut [&mut c3], &[]),
    );
    t.refuse(
        "elementwise_on_device: a scalar too many",
        Want::Invalid(es),
        || gpu.elementwise_on_device::<sum, i32>(&[&d3, &d3], &mut [&mut c3], &[1]),
    );
    t.refuse("elementwise_on_device: empty", Want::Invalid(es), || {
        gpu.elementwise_on_device::<sum, i32>(&[&d0, &d0], &mut [&mut c0], &[])
    });
    t.works("elementwise_on_device: one element", || {
        let (a, b) = (
            DeviceBuffer::from_slice(&[5i32]).map_err(m)?,
            DeviceBuffer::from_slice(&[-7i32]).map_err(m)?,
        );
        let mut c = DeviceBuffer::from_slice(&[0i32]).map_err(m)?;
        gpu.elementwise_on_device::<sum, i32>(&[&a, &b], &mut [&mut c], &[])
            .map_err(m)?;
        gpu.synchronize(es).map_err(m)?;
        let mut out = [0i32];
        c.copy_to(&mut out[..]).map_err(m)?;
        same("c", out, [-2])
    });
    let vr = "vector_sum_repeat";
    let (f3, f4, f0) = (
        Array1::from(vec![1.0f32, 2.0, 3.0]),
        Array1::<f32>::zeros(4),
        Array1::<f32>::zeros(0),
    );
    t.refuse("vector_sum_repeat: 3 vs 4", Want::Invalid(vr), || {
        gpu.vector_sum_repeat(f3.view(), f4.view(), 1)
    });
    t.refuse("vector_sum_repeat: empty", Want::Invalid(vr), || {
        gpu.vector_sum_repeat(f0.view(), f0.view(), 1)
    });
    t.refuse("vector_sum_repeat: 2^32 vs 3", Want::Invalid(vr), || {
        gpu.vector_sum_repeat(huge1(&one, 1 << 32), f3.view(), 1)
    });
    for (case, a, b, repeats) in [
        (
            "one element",
            ArrayView1::from(&one),
            ArrayView1::from(&[0.5f32]),
            3,
        ),
        ("zero repeats", f3.view(), f3.view(), 0),
        ("negative stride", f3.slice(s![..;-1]), f3.view(), 2),
    ] {
        t.works(&format!("vector_sum_repeat: {case}"), || {
            let (c, _) = gpu.vector_sum_repeat(a, b, repeats).map_err(m)?;
            same("c", c, vector_sum_repeat_cpu(a, b, repeats).map_err(m)?)
        });
    }
    // gufunc.
    let g = "gufunc_matmul_i64";
    let zi = |shape: &[usize]| ArrayD::<i64>::zeros(IxDyn(shape));
    let (v3, m33, m23, m45, e022, m22, b223, b335, m20, m02) = (
        zi(&[3]),
        zi(&[3, 3]),
        zi(&[2, 3]),
        zi(&[4, 5]),
        zi(&[0, 2, 2]),
        zi(&[2, 2]),
        zi(&[2, 2, 3]),
        zi(&[3, 3, 5]),
        zi(&[2, 0]),
        zi(&[0, 2]),
    );
    let ione64 = [1i64];
    for (case, a, b) in [
        ("A has 1 axis", v3.view(), m33.view()),
        ("core dimensions differ", m23.view(), m45.view()),
        ("empty batch axis", e022.view(), m22.view()),
        ("empty core axis", m20.view(), m02.view()),
        ("batch shapes do not broadcast", b223.view(), b335.view()),
        (
            "2^61 × 1 × 1 broadcast A (bytes overflow)",
            huged(&ione64, &[1 << 61, 1, 1]),
            huged(&ione64, &[1, 1]),
        ),
        (
            "batch 2^40 × 2^40 overflows",
            huged(&ione64, &[1 << 40, 1, 1, 1]),
            huged(&ione64, &[1 << 40, 1, 1]),
        ),
    ] {
        t.refuse(
            &format!("gufunc_matmul_i64: {case}"),
            Want::Invalid(g),
            || gpu.gufunc_matmul_i64(a, b),
        );
    }
    let ga = ArrayD::from_shape_fn(IxDyn(&[2, 3, 4]), |d| {
        (d[0] * 12 + d[1] * 4 + d[2]) as i64 - 9
    });
    let gb = ArrayD::from_shape_fn(IxDyn(&[4, 5]), |d| (d[0] * 5 + d[1]) as i64 % 7 - 3);
    let gt = ArrayD::from_shape_fn(IxDyn(&[5, 4]), |d| (d[0] + 3 * d[1]) as i64 % 5 - 2);
    let gt_t = gt.t();
    for (case, a, b) in [
        (
            "1 × 1 · 1 × 1",
            huged(&[i64::MAX], &[1, 1]),
            huged(&[2i64], &[1, 1]),
        ),
        ("transposed B", ga.view(), gt_t.view()),
        (
            "negative strides",
            ga.slice(s![..;-1, .., ..;-1]).into_dyn(),
            gb.slice(s![..;-1, ..]).into_dyn(),
        ),
        (
            "broadcast (zero-stride) batch",
            huged(&ione64, &[3, 2, 4]),
            gb.view(),
        ),
    ] {
        t.works(&format!("gufunc_matmul_i64: {case}"), || {
            same(
                "C",
                gpu.gufunc_matmul_i64(a.clone(), b.clone()).map_err(m)?,
                gufunc_matmul_i64_cpu(a, b).map_err(m)?,
            )
        });
    }
    t.finish()
}

/// 7 cases per entry point.
fn reduce_gpu_cases<Op: ReduceKernel<T>, T: Num>(gpu: &Gpu, t: &mut Cases) {
    let k = Op::ENTRY;
    let empty = Array1::<T>::from(vec![]);
    if Op::DEFINED_ON_EMPTY {
        t.works(&format!("{k}: empty, no init gives the identity"), || {
            same(
                "result",
                gpu.reduce::<Op, T>(empty.view(), None).map_err(m)?,
                Op::identity(),
            )
        });
    } else {
        t.refuse(&format!("{k}: empty, no init"), Want::Invalid(k), || {
            gpu.reduce::<Op, T>(empty.view(), None)
        });
    }
    t.works(&format!("{k}: empty, init"), || {
        same(
            "result",
            gpu.reduce::<Op, T>(empty.view(), Some(T::of(-3)))
                .map_err(m)?,
            T::of(-3),
        )
    });
    let one = [T::of(5)];
    t.works(&format!("{k}: one element"), || {
        let v = ArrayView1::from(&one);
        same(
            "result",
            gpu.reduce::<Op, T>(v, None).map_err(m)?,
            reduce_cpu::<Op, T>(v, None).map_err(m)?,
        )
    });
    let vals: Vec<T> = [2, -1, 3, 1, -2, 4, 1].into_iter().map(T::of).collect();
    let arr = Array1::from(vals);
    for (case, v) in [
        ("negative stride", arr.slice(s![..;-1])),
        ("step 2", arr.slice(s![..;2])),
    ] {
        t.works(&format!("{k}: {case}"), || {
            same(
                "result",
                gpu.reduce::<Op, T>(v, Some(T::of(1))).map_err(m)?,
                reduce_cpu::<Op, T>(v, Some(T::of(1))).map_err(m)?,
            )
        });
    }
    t.works(&format!("{k}: reduce_slice, one element and init"), || {
        same(
            "result",
            gpu.reduce_slice::<Op, T>(&one, Some(T::of(2))).map_err(m)?,
            reduce_cpu::<Op, T>(ArrayView1::from(&one), Some(T::of(2))).map_err(m)?,
        )
    });
    t.works(&format!("{k}: reduce_device, empty device slice"), || {
        let d = DeviceBuffer::<T>::from_slice(&[]).map_err(m)?;
        let r = gpu.reduce_device::<Op, T>(&d, None);
        match (Op::DEFINED_ON_EMPTY, r) {
            (true, Ok(v)) => same("result", v, Op::identity()),
            (false, Err(Error::InvalidInput { kernel, .. })) if kernel == k => Ok(()),
            (_, r) => Err(format!("got {r:?}")),
        }
    });
}

fn reduce(gpu: &Gpu) -> Result<(), Failed> {
    let mut t = Cases::new("reduce");
    every_reduction!(reduce_gpu_cases(gpu, &mut t));
    // A chosen launch shape, a scratch, and device slices.
    let k = "reduce_sum_i64";
    let mut scratch = None;
    t.works("reduce_scratch: at least one partial", || {
        let s = gpu.reduce_scratch::<i64>().map_err(m)?;
        check(s.capacity() >= 1, || "capacity 0".into())?;
        scratch = Some(s);
        Ok(())
    });
    if let Some(mut scratch) = scratch {
        let cap = scratch.capacity();
        let d = DeviceBuffer::from_slice(&[1i64, 2, 3]).map_err(common::fail)?;
        for (case, grid, block) in [
            ("block 0", 1, 0),
            ("block 31 (not a multiple of 32)", 1, 31),
            ("block 1056", 1, 1056),
            ("block 2048", 1, 2048),
            ("grid 0", 0, 32),
            ("grid past the scratch", cap as u32 + 1, 32),
            ("grid u32::MAX", u32::MAX, 32),
        ] {
            t.refuse(
                &format!("reduce_on_device_shaped: {case}"),
                Want::Invalid(k),
                || gpu.reduce_on_device_shaped::<Sum, i64>(&d, None, &mut scratch, grid, block),
            );
        }
        let empty = DeviceBuffer::<i64>::from_slice(&[]).map_err(common::fail)?;
        t.refuse(
            "reduce_on_device_shaped: min of an empty slice, no init",
            Want::Invalid("reduce_min_i64"),
            || gpu.reduce_on_device_shaped::<Min, i64>(&empty, None, &mut scratch, 1, 32),
        );
        t.refuse(
            "reduce_on_device: max of an empty slice, no init",
            Want::Invalid("reduce_max_i64"),
            || gpu.reduce_on_device::<Max, i64>(&empty, None, &mut scratch),
        );
        t.works("reduce_on_device_shaped: grid 1 of 32 threads", || {
            gpu.reduce_on_device_shaped::<Sum, i64>(&d, Some(10), &mut scratch, 1, 32)
                .map_err(m)?;
            same("result", scratch.result(gpu).map_err(m)?, 16)
        });
        t.works(
            "reduce_on_device_shaped: the largest grid of 1024 threads",
            || {
                gpu.reduce_on_device_shaped::<Sum, i64>(&d, None, &mut scratch, cap as u32, 1024)
                    .map_err(m)?;
                same("result", scratch.result(gpu).map_err(m)?, 6)
            },
        );
        t.works("reduce_on_device: a one-element sub-slice", || {
            let sub = d.index(1..2usize);
            gpu.reduce_on_device::<Product, i64>(&sub, Some(-4), &mut scratch)
                .map_err(m)?;
            same("result", scratch.result(gpu).map_err(m)?, -8)
        });
        t.works("reduce_on_device: an empty slice with init", || {
            gpu.reduce_on_device::<Min, i64>(&empty, Some(9), &mut scratch)
                .map_err(m)?;
            same("result", scratch.result(gpu).map_err(m)?, 9)
        });
    }
    // The device-primitive test launchers.
    let w = "warp_shuffle_test";
    for (case, blocks, threads) in [
        ("0 blocks", 0, 32),
        ("0 threads", 1, 0),
        ("33 threads", 1, 33),
        ("2048 threads", 1, 2048),
        (
            "2^31 blocks (refused before allocating)",
            MAX_GRID_X + 1,
            32,
        ),
        ("u32::MAX blocks", u32::MAX, 1024),
    ] {
        t.refuse(
            &format!("warp_primitives_test: {case}"),
            Want::Invalid(w),
            || gpu.warp_primitives_test(blocks, threads),
        );
    }
    t.works("warp_primitives_test: one warp", || {
        let r = gpu.warp_primitives_test(1, 32).map_err(m)?;
        same("rows", (r.rows32.len(), r.rows64.len()), (8, 8))?;
        same(
            "lane ids",
            r.rows32[4].clone(),
            (0..32).collect::<Vec<u32>>(),
        )
    });
    let a = "atomic_test";
    for (case, n) in [
        ("0 threads", 0),
        ("2^31 − 1 threads", i32::MAX as usize),
        ("usize::MAX threads", usize::MAX),
    ] {
        t.refuse(
            &format!("atomic_primitives_test: {case}"),
            Want::Invalid(a),
            || gpu.atomic_primitives_test(n),
        );
    }
    t.works("atomic_primitives_test: one thread", || {
        let r = gpu.atomic_primitives_test(1).map_err(m)?;
        same("tickets", r.tickets.clone(), vec![0])?;
        same("sums", (r.sum_f32, r.sum_f64, r.sum_u64), (1.0, 0.5, 0))
    });
    let l = "load_test";
    t.refuse("load_primitives_test: empty", Want::Invalid(l), || {
        gpu.load_primitives_test(&[])
    });
    t.refuse("load_primitives_test: 3 words", Want::Invalid(l), || {
        gpu.load_primitives_test(&[1, 2, 3])
    });
    t.works("load_primitives_test: one vector", || {
        let (x, y) = gpu.load_primitives_test(&[1, 2, 3, 4]).map_err(m)?;
        same("copies", (x, y), (vec![1, 2, 3, 4], vec![1, 2, 3, 4]))
    });
    let b = "block_reduce_test_i64";
    let ones = vec![1i64; 33];
    for (case, input, tpb) in [
        ("empty", &ones[..0], 32),
        ("0 threads", &ones[..32], 0),
        ("33 threads", &ones[..], 33),
        ("33 values for blocks of 32", &ones[..], 32),
        ("2048 threads", &ones[..32], 2048),
    ] {
        t.refuse(
            &format!("block_reduce_test: {case}"),
            Want::Invalid(b),
            || gpu.block_reduce_test(input, tpb),
        );
    }
    t.works("block_reduce_test: one block of 32", || {
        let input: Vec<i64> = (1..=32).collect();
        same(
            "sums",
            gpu.block_reduce_test(&input, 32).map_err(m)?,
            vec![528],
        )
    });
    t.finish()
}

fn mandelbrot(gpu: &Gpu) -> Result<(), Failed> {
    let mut t = Cases::new("mandelbrot");
    let one = [0.0f32];
    let empty = Array1::<f32>::zeros(0);
    let over = Array1::<f32>::zeros(MAX_LATTICE_SIZE + 1);
    let ok = linspace_f32(-2.0, 2.0, 8);
    let bad: [(&str, ArrayView1<f32>, i32); 6] = [
        ("empty lattice", empty.view(), 256),
        ("46,341 points", over.view(), 256),
        ("2^31 points (broadcast)", huge1(&one, 1 << 31), 256),
        ("2^32 points (broadcast)", huge1(&one, 1 << 32), 256),
        ("max_iters -1", ok.view(), -1),
        ("max_iters i32::MIN", ok.view(), i32::MIN),
    ];
    let sync = "mandelbrot_ker (explicit sync)";
    let driver = "mandelbrot_ker (driver API)";
    for (case, l, iters) in bad {
        t.refuse(
            &format!("mandelbrot: {case}"),
            Want::Invalid(MANDEL),
            || gpu.mandelbrot(l, iters, 2.0),
        );
        t.refuse(
            &format!("mandelbrot_timed: {case}"),
            Want::Invalid(MANDEL),
            || gpu.mandelbrot_timed(l, iters, 2.0, MANDEL_BLOCK),
        );
        t.refuse(
            &format!("mandelbrot_explicit_sync: {case}"),
            Want::Invalid(sync),
            || gpu.mandelbrot_explicit_sync(l, iters, 2.0),
        );
        t.refuse(
            &format!("driver API: {case}"),
            Want::Invalid(driver),
            || mandelbrot_driver_api(PtxSource::Text(PTX), l, iters, 2.0),
        );
    }
    for block in [0, 1025] {
        t.refuse(
            &format!("mandelbrot_timed: block {block}"),
            Want::Invalid(MANDEL),
            || gpu.mandelbrot_timed(ok.view(), 256, 2.0, block),
        );
    }
    let oks = ok.as_slice().unwrap_or(&[]);
    let overs = over.as_slice().unwrap_or(&[]);
    for (case, lattice, len) in [
        ("graph one short", oks, 63),
        ("graph one long", oks, 65),
        ("empty graph", oks, 0),
        ("empty lattice", &[][..], 0),
        ("46,341 points, empty graph", overs, 0),
    ] {
        t.refuse(
            &format!("mandelbrot_into: {case}"),
            Want::Invalid(MANDEL),
            || gpu.mandelbrot_into(lattice, &mut vec![0.0; len], 256, 2.0),
        );
    }
    let fail = common::fail;
    let dl = DeviceBuffer::from_slice(oks).map_err(fail)?;
    let dover = DeviceBuffer::from_slice(overs).map_err(fail)?;
    let d0 = DeviceBuffer::<f32>::from_slice(&[]).map_err(fail)?;
    let mut g63 = DeviceBuffer::from_slice(&[0.0f32; 63]).map_err(fail)?;
    let mut g64 = DeviceBuffer::from_slice(&[0.0f32; 64]).map_err(fail)?;
    for (case, lattice, short, iters, block) in [
        ("graph one short", &dl, true, 256, 32),
        ("empty lattice", &d0, false, 256, 32),
        ("46,341 points", &dover, false, 256, 32),
        ("block 0", &dl, false, 256, 0),
        ("block 2048", &dl, false, 256, 2048),
        ("max_iters -1", &dl, false, -1, 32),
    ] {
        let graph = if short { &mut g63 } else { &mut g64 };
        t.refuse(
            &format!("mandelbrot_on_device: {case}"),
            Want::Invalid(MANDEL),
            || gpu.mandelbrot_on_device(lattice, graph, iters, 2.0, block),
        );
    }
    // What must work, on every path, against the CPU reference.
    let wide = linspace_f32(-2.0, 1.0, 37);
    let goods: [(&str, ArrayView1<f32>, i32); 5] = [
        ("one point", ArrayView1::from(&one), 256),
        ("one point, 0 iterations", ArrayView1::from(&[5.0f32]), 0),
        ("negative stride", wide.slice(s![..;-1]), 100),
        ("step 3", wide.slice(s![..;3]), 100),
        ("broadcast (zero stride)", huge1(&[-1.0f32], 5), 50),
    ];
    for (case, l, iters) in goods {
        let want = match mandelbrot_cpu(l, iters, 2.0) {
            Ok(w) => w,
            Err(e) => {
                t.works(case, || Err(format!("CPU reference: {e}")));
                continue;
            }
        };
        t.works(&format!("mandelbrot: {case}"), || {
            same(
                "graph",
                gpu.mandelbrot(l, iters, 2.0).map_err(m)?,
                want.clone(),
            )
        });
        t.works(&format!("mandelbrot_timed (block 1): {case}"), || {
            same(
                "graph",
                gpu.mandelbrot_timed(l, iters, 2.0, 1).map_err(m)?.0,
                want.clone(),
            )
        });
        t.works(&format!("mandelbrot_explicit_sync: {case}"), || {
            same(
                "graph",
                gpu.mandelbrot_explicit_sync(l, iters, 2.0).map_err(m)?,
                want.clone(),
            )
        });
    }
    t.works("mandelbrot_into: one point", || {
        let mut g = [7.0f32];
        gpu.mandelbrot_into(&[0.0], &mut g, 10, 2.0).map_err(m)?;
        let want = mandelbrot_cpu(ArrayView1::from(&[0.0f32]), 10, 2.0).map_err(m)?;
        same(
            "graph",
            g.to_vec(),
            want.iter().copied().collect::<Vec<f32>>(),
        )
    });
    t.works("mandelbrot_on_device: one point, block 1024", || {
        let dl = DeviceBuffer::from_slice(&[1.0f32]).map_err(m)?;
        let mut dg = DeviceBuffer::from_slice(&[7.0f32]).map_err(m)?;
        gpu.mandelbrot_on_device(&dl, &mut dg, 10, 2.0, 1024)
            .map_err(m)?;
        gpu.synchronize(MANDEL).map_err(m)?;
        let mut g = [0.0f32];
        dg.copy_to(&mut g[..]).map_err(m)?;
        let want = mandelbrot_cpu(ArrayView1::from(&[1.0f32]), 10, 2.0).map_err(m)?;
        same(
            "graph",
            g.to_vec(),
            want.iter().copied().collect::<Vec<f32>>(),
        )
    });
    // PTX files and the driver API's own loading.
    let one_point = ArrayView1::from(&one);
    let want1 = Array2::from_elem((1, 1), 1.0f32);
    match TempFile::new("kernels.ptx", PTX.as_bytes()) {
        Ok(file) => {
            t.works("from_ptx_file + mandelbrot: one point", || {
                let g2 = Gpu::from_ptx_file(&file.0).map_err(m)?;
                same(
                    "graph",
                    g2.mandelbrot(one_point, 10, 2.0).map_err(m)?,
                    want1.clone(),
                )
            });
            t.works("driver API (file): one point", || {
                same(
                    "graph",
                    mandelbrot_driver_api(PtxSource::File(&file.0), one_point, 10, 2.0)
                        .map_err(m)?,
                    want1.clone(),
                )
            });
        }
        Err(e) => t.works("writing the PTX file", || Err(e)),
    }
    t.works("driver API (text): negative-stride lattice", || {
        let l = wide.slice(s![..;-4]);
        same(
            "graph",
            mandelbrot_driver_api(PtxSource::Text(PTX), l, 50, 2.0).map_err(m)?,
            mandelbrot_cpu(l, 50, 2.0).map_err(m)?,
        )
    });
    t.refuse("driver API: empty PTX text", Want::ModuleLoad, || {
        mandelbrot_driver_api(PtxSource::Text(""), one_point, 10, 2.0)
    });
    t.refuse("driver API: corrupt PTX text", Want::ModuleLoad, || {
        mandelbrot_driver_api(PtxSource::Text(PTX_GARBAGE), one_point, 10, 2.0)
    });
    t.refuse(
        "driver API: PTX without mandelbrot_ker",
        Want::NotFound(MANDEL),
        || mandelbrot_driver_api(PtxSource::Text(PTX_WITHOUT_KERNEL), one_point, 10, 2.0),
    );
    let garbage = TempFile::new("garbage.ptx", PTX_GARBAGE.as_bytes());
    t.refuse(
        "driver API: corrupt PTX file",
        Want::ModuleLoad,
        || match &garbage {
            Ok(f) => mandelbrot_driver_api(PtxSource::File(&f.0), one_point, 10, 2.0),
            Err(e) => Err(Error::invalid("test setup", e.clone())),
        },
    );
    t.refuse(
        "driver API: a directory as the PTX file",
        Want::ModuleLoad,
        || mandelbrot_driver_api(PtxSource::File(&std::env::temp_dir()), one_point, 10, 2.0),
    );
    t.refuse("driver API: missing PTX file", Want::PtxFile, || {
        mandelbrot_driver_api(PtxSource::File(&missing_path()), one_point, 10, 2.0)
    });
    t.finish()
}

fn c_abi_gpu(lib: &CAbiLibrary) -> Result<(), Failed> {
    let mut t = Cases::new("c_abi");
    let wide = linspace_f32(-2.0, 1.0, 21);
    for (case, l, iters) in [
        ("one point", ArrayView1::from(&[0.0f32]), 10),
        ("one point outside", ArrayView1::from(&[1.0f32]), 10),
        ("two points", ArrayView1::from(&[-1.0f32, 0.25]), 100),
        ("negative stride", wide.slice(s![..;-1]), 100),
        ("step 2", wide.slice(s![..;2]), 100),
        ("0 iterations", wide.view(), 0),
    ] {
        t.works(&format!("CAbiLibrary::mandelbrot: {case}"), || {
            same(
                "graph",
                lib.mandelbrot(l, iters, 2.0).map_err(m)?,
                mandelbrot_cpu(l, iters, 2.0).map_err(m)?,
            )
        });
    }
    // With the library's GPU open, refusals still come before it, and the
    // library stays usable.
    let lattice = [0.0f32; 2];
    let mut graph = [7.0f32; 4];
    let (l, g) = (lattice.as_ptr(), graph.as_mut_ptr());
    for (case, (lp, gp, iters, size), want) in [
        (
            "null graph",
            (l, std::ptr::null_mut(), 10, 2),
            status::NULL_POINTER,
        ),
        ("size 46,341", (l, g, 10, 46_341), status::BAD_SIZE),
        ("size -2", (l, g, 10, -2), status::BAD_SIZE),
        ("max_iters -1", (l, g, -1, 2), status::BAD_ARGUMENT),
    ] {
        c_status(
            &mut t,
            lib,
            &format!("launch_mandelbrot (GPU open): {case}"),
            want,
            || {
                // SAFETY: valid for 2 and 4 floats, or refused before any access.
                unsafe { lib.launch_mandelbrot_raw(lp, gp, iters, 2.0, size) }
            },
        );
    }
    t.works("launch_mandelbrot: a good call after the refusals", || {
        // SAFETY: valid for 2 and 4 floats.
        let code = unsafe { lib.launch_mandelbrot_raw(l, g, 10, 2.0, 2) };
        same("status", code, status::OK)?;
        let want = mandelbrot_cpu(ArrayView1::from(&lattice), 10, 2.0).map_err(m)?;
        same("graph", graph.to_vec(), want.iter().copied().collect())
    });
    t.finish()
}

fn streams_lanes(gpu: &Gpu) -> Result<(), Failed> {
    let mut t = Cases::new("streams_lanes");
    let k = "mult_ker";
    let e = Array1::<f32>::zeros(0);
    let one = [1.75f32];
    let data: Array1<f32> = (0..300).map(|i| i as f32 * 0.5 - 20.0).collect();
    for (case, v, grid, block) in [
        ("empty", e.view(), 1, 64),
        ("grid 0", data.view(), 0, 64),
        ("grid 2^31", data.view(), MAX_GRID_X + 1, 64),
        ("grid u32::MAX", data.view(), u32::MAX, 64),
        ("block 0", data.view(), 1, 0),
        ("block 1025", data.view(), 1, 1025),
        (
            "2^32 broadcast elements, grid 0 (refused before any copy)",
            huge1(&one, 1 << 32),
            0,
            64,
        ),
    ] {
        t.refuse(&format!("mult_ker: {case}"), Want::Invalid(k), || {
            gpu.mult_ker(v, grid, block)
        });
    }
    for (case, v, grid, block) in [
        ("one element", ArrayView1::from(&one), 1, 64),
        (
            "one element, block 1024 × 3",
            ArrayView1::from(&one),
            3,
            1024,
        ),
        ("negative stride", data.slice(s![..;-1]), 2, 32),
        ("step 3", data.slice(s![..;3]), 1, 1),
    ] {
        t.works(&format!("mult_ker: {case}"), || {
            same(
                "out",
                gpu.mult_ker(v, grid, block).map_err(m)?,
                mult_ker_cpu(v),
            )
        });
    }
    let mut d0 = DeviceBuffer::<f32>::from_slice(&[]).map_err(common::fail)?;
    let mut d1 = DeviceBuffer::from_slice(&[2.5f32]).map_err(common::fail)?;
    // SAFETY (both): refused before any launch; were either launched, its buffer
    // outlives the synchronization of the one-element case below.
    t.refuse(
        "mult_ker_on_device: empty buffer",
        Want::Invalid(k),
        || unsafe { gpu.mult_ker_on_device(&mut d0, 1, 64) },
    );
    t.refuse("mult_ker_on_device: grid 0", Want::Invalid(k), || unsafe {
        gpu.mult_ker_on_device(&mut d1, 0, 64)
    });
    t.works("mult_ker_on_device: one element", || {
        // SAFETY: d1 outlives the synchronization right after.
        let launched = unsafe { gpu.mult_ker_on_device(&mut d1, 1, 64) };
        gpu.synchronize(k).map_err(m)?;
        launched.map_err(m)?;
        let mut out = [0.0f32];
        d1.copy_to(&mut out[..]).map_err(m)?;
        same("out", out, [2.5])
    });
    t.refuse("mult_ker_events: empty", Want::Invalid(k), || {
        gpu.mult_ker_events(e.view())
    });
    t.works("mult_ker_events: one element", || {
        same(
            "out",
            gpu.mult_ker_events(ArrayView1::from(&one))
                .map_err(m)?
                .0
                .to_vec(),
            vec![1.75],
        )
    });
    // Lanes.
    let lane = "lane";
    t.refuse("Lane::new: length 0", Want::Invalid(lane), || {
        Lane::<f32, 1>::new(gpu, 0)
    });
    t.refuse("Lane::new: no device buffer", Want::Invalid(lane), || {
        Lane::<f32, 0>::new(gpu, 4)
    });
    t.refuse("Lane::from_host: empty", Want::Invalid(lane), || {
        Lane::<f32, 2>::from_host(gpu, &[])
    });
    match Lane::<f32, 2>::from_host(gpu, &[3.0]) {
        Err(err) => t.works("Lane::from_host: one element", || Err(m(err))),
        Ok(mut ln) => {
            t.refuse("Lane::upload: buffer 2 of 2", Want::Invalid(lane), || {
                ln.upload(2)
            });
            t.refuse(
                "Lane::download: buffer usize::MAX",
                Want::Invalid(lane),
                || ln.download(usize::MAX),
            );
            t.refuse(
                "Lane::copy_on_device: onto itself",
                Want::Invalid(lane),
                || ln.copy_on_device(1, 1),
            );
            t.refuse(
                "Lane::copy_on_device: to buffer 5",
                Want::Invalid(lane),
                || ln.copy_on_device(0, 5),
            );
            t.refuse(
                "Lane::copy_on_device: from buffer 5",
                Want::Invalid(lane),
                || ln.copy_on_device(5, 0),
            );
            t.refuse("Lane::mult_ker: buffer 2", Want::Invalid(k), || {
                ln.mult_ker(2, 1, 64)
            });
            t.refuse("Lane::mult_ker: grid 0", Want::Invalid(k), || {
                ln.mult_ker(0, 0, 64)
            });
            t.refuse("Lane::mult_ker: block 2048", Want::Invalid(k), || {
                ln.mult_ker(0, 1, 2048)
            });
            t.works(
                "Lane: one element, upload, copy, mult_ker, download",
                || {
                    ln.upload(0).map_err(m)?;
                    ln.copy_on_device(0, 1).map_err(m)?;
                    ln.mult_ker(1, 1, 64).map_err(m)?;
                    ln.download(1).map_err(m)?;
                    same("host", ln.host().map_err(m)?.to_vec(), vec![3.0])
                },
            );
        }
    }
    // Batches.
    for (case, inputs) in [
        ("no arrays", vec![]),
        ("an empty array", vec![vec![]]),
        ("lengths differ", vec![vec![1.0f32], vec![1.0, 2.0]]),
    ] {
        t.refuse(
            &format!("SerialBatch::new: {case}"),
            Want::Invalid(k),
            || SerialBatch::new(gpu, &inputs).map(drop),
        );
        t.refuse(
            &format!("StreamBatch::new: {case}"),
            Want::Invalid(k),
            || StreamBatch::new(gpu, &inputs).map(drop),
        );
    }
    let single = vec![vec![-0.0f32]];
    t.works("SerialBatch: one array of one element", || {
        let mut b = SerialBatch::new(gpu, &single).map_err(m)?;
        let r = b.run().map_err(m)?;
        same("mismatch", r.first_mismatch, None)
    });
    for order in [IssueOrder::BreadthFirst, IssueOrder::DepthFirst] {
        t.works(
            &format!("StreamBatch ({order:?}): one array of one element"),
            || {
                let mut b = StreamBatch::new(gpu, &single).map_err(m)?;
                let r = b.run_with(order).map_err(m)?;
                same("mismatch", r.first_mismatch, None)?;
                same("kernels", r.kernel_ms.len(), 1)
            },
        );
    }
    t.finish()
}

fn life(gpu: &Gpu) -> Result<(), Failed> {
    let mut t = Cases::new("life");
    let c = "conway_ker";
    let sq = |n: usize| Array2::<i32>::zeros((n, n));
    for (case, lattices) in [
        ("no lattice", vec![]),
        ("0 × 0", vec![sq(0)]),
        ("3 × 4", vec![Array2::zeros((3, 4))]),
        ("a cell of 2", vec![Array2::from_elem((2, 2), 2)]),
        ("a cell of -1", vec![Array2::from_elem((2, 2), -1)]),
        ("sizes differ", vec![sq(8), sq(9)]),
        (
            "the second lattice is bad",
            vec![sq(4), Array2::from_elem((4, 4), 7)],
        ),
    ] {
        t.refuse(&format!("LifeSims::new: {case}"), Want::Invalid(c), || {
            LifeSims::new(gpu, &lattices).map(drop)
        });
    }
    let glider = {
        let mut l = sq(6);
        for (r, col) in [(0, 1), (1, 2), (2, 0), (2, 1), (2, 2)] {
            l[[r, col]] = 1;
        }
        l
    };
    for (case, start) in [
        ("1 × 1, alive", Array2::from_elem((1, 1), 1)),
        (
            "2 × 2",
            Array2::from_shape_vec((2, 2), vec![1, 0, 1, 1]).unwrap_or_else(|_| sq(2)),
        ),
        ("transposed (Fortran order)", glider.clone().reversed_axes()),
        (
            "negative strides",
            glider.clone().slice_move(s![..;-1, ..;-1]),
        ),
    ] {
        t.works(&format!("LifeSims: {case}"), || {
            let mut sims = LifeSims::new(gpu, std::slice::from_ref(&start)).map_err(m)?;
            for step in 1..=3 {
                sims.frame().map_err(m)?;
                same(
                    &format!("step {step}"),
                    sims.lattice(0).map_err(m)?.to_owned(),
                    life_cpu(start.view(), step).map_err(m)?,
                )?;
            }
            Ok(())
        });
    }
    t.works("LifeSims::lattice: simulation 1 of 1 refused", || {
        let sims = LifeSims::new(gpu, &[sq(2)]).map_err(m)?;
        match sims.lattice(1) {
            Err(Error::InvalidInput {
                kernel: "conway_ker",
                ..
            }) => Ok(()),
            r => Err(format!("got {r:?}")),
        }
    });
    match Lane::<i32, 2>::new(gpu, 4) {
        Err(e) => t.works("Lane<i32, 2>::new(4)", || Err(m(e))),
        Ok(mut ln) => {
            for (case, n, src, dst) in [
                ("n = 0", 0, 0, 1),
                ("3 × 3 in 4 cells", 3, 0, 1),
                ("in place", 2, 1, 1),
                ("source buffer 2", 2, 2, 1),
                ("destination buffer 7", 2, 0, 7),
                (
                    "n = 2,097,121 (65,536 blocks along y)",
                    65_535 * 32 + 1,
                    0,
                    1,
                ),
                ("n = 2^32 (n² overflows)", 1 << 32, 0, 1),
            ] {
                t.refuse(
                    &format!("Lane::conway_step: {case}"),
                    Want::Invalid(c),
                    || ln.conway_step(n, src, dst),
                );
            }
        }
    }
    t.works("Lane::conway_step: one live cell dies", || {
        let mut ln = Lane::<i32, 2>::from_host(gpu, &[1]).map_err(m)?;
        ln.upload(0).map_err(m)?;
        ln.conway_step(1, 0, 1).map_err(m)?;
        ln.download(1).map_err(m)?;
        same("cell", ln.host().map_err(m)?.to_vec(), vec![0])
    });
    t.refuse(
        "Lane<i32, 1>::conway_step: no second buffer",
        Want::Invalid(c),
        || {
            let mut ln = Lane::<i32, 1>::new(gpu, 1)?;
            ln.conway_step(1, 0, 1)
        },
    );
    t.finish()
}

fn contexts(_gpu: &Gpu) -> Result<(), Failed> {
    let mut t = Cases::new("contexts");
    let k = "context";
    t.refuse("manual_context_roundtrip: empty", Want::Invalid(k), || {
        manual_context_roundtrip(&[])
    });
    t.works("manual_context_roundtrip: one element", || {
        same(
            "back",
            manual_context_roundtrip(&[-3.5]).map_err(m)?,
            vec![-3.5],
        )
    });
    match ThreadContext::new() {
        Err(e) => t.works("ThreadContext::new", || Err(m(e))),
        Ok(mut ctx) => {
            t.refuse(
                "ThreadContext::copy_roundtrip: empty",
                Want::Invalid(k),
                || ctx.copy_roundtrip(&[]),
            );
            t.works("ThreadContext::copy_roundtrip: one element", || {
                same("back", ctx.copy_roundtrip(&[1.0]).map_err(m)?, vec![1.0])
            });
            t.refuse(
                "ThreadContext::mult_ker: no module loaded",
                Want::Invalid(k),
                || ctx.mult_ker(&[1.0]),
            );
            t.refuse(
                "ThreadContext::load_module: corrupt PTX",
                Want::ModuleLoad,
                || ctx.load_module(PTX_GARBAGE),
            );
            t.refuse(
                "ThreadContext::load_module: empty PTX",
                Want::ModuleLoad,
                || ctx.load_module(""),
            );
            t.refuse(
                "ThreadContext::load_module: PTX with a NUL",
                Want::Invalid("module"),
                || ctx.load_module("a\0b"),
            );
            t.refuse("ThreadContext::load_cubin: empty", Want::Cuda(k), || {
                ctx.load_cubin(&[])
            });
            t.refuse(
                "ThreadContext::load_cubin: not a cubin",
                Want::Cuda(k),
                || ctx.load_cubin(b"this is not an ELF image"),
            );
            t.works("ThreadContext::load_module: PTX without mult_ker", || {
                ctx.load_module(PTX_WITHOUT_KERNEL).map_err(m)
            });
            t.refuse(
                "ThreadContext::mult_ker: module without mult_ker",
                Want::NotFound("mult_ker"),
                || ctx.mult_ker(&[1.0]),
            );
            t.works("ThreadContext::load_module: the crate's PTX", || {
                ctx.load_module(PTX).map_err(m)
            });
            t.refuse(
                "ThreadContext::mult_ker: empty",
                Want::Invalid("mult_ker"),
                || ctx.mult_ker(&[]),
            );
            t.works("ThreadContext::mult_ker: one element", || {
                same("out", ctx.mult_ker(&[0.125]).map_err(m)?, vec![0.125])
            });
            let handle = ctx.handle();
            t.refuse(
                "ContextHandle::bind: from another thread",
                Want::Invalid(k),
                || {
                    let h = handle.clone();
                    std::thread::scope(|s| s.spawn(move || h.bind()).join())
                        .unwrap_or_else(|_| Err(Error::invalid("test", "the thread panicked")))
                },
            );
            t.works("ThreadContext::destroy", || ctx.destroy().map_err(m));
            t.refuse(
                "ContextHandle::bind: after destroy",
                Want::Invalid(k),
                || handle.bind(),
            );
        }
    }
    t.refuse("threads_mult_ker: no arrays", Want::Invalid(k), || {
        threads_mult_ker(PTX, &[])
    });
    t.refuse("threads_mult_ker: an empty array", Want::Invalid(k), || {
        threads_mult_ker(PTX, &[vec![1.0], vec![]])
    });
    t.refuse("threads_mult_ker: PTX with a NUL", Want::Invalid(k), || {
        threads_mult_ker("a\0b", &[vec![1.0]])
    });
    t.refuse("threads_mult_ker: corrupt PTX", Want::Cuda(k), || {
        threads_mult_ker(PTX_GARBAGE, &[vec![1.0]])
    });
    t.refuse(
        "threads_mult_ker: PTX without mult_ker",
        Want::NotFound("mult_ker"),
        || threads_mult_ker(PTX_WITHOUT_KERNEL, &[vec![1.0]]),
    );
    t.works("threads_mult_ker: one thread, one element", || {
        same(
            "out",
            threads_mult_ker(PTX, &[vec![9.0]]).map_err(m)?,
            vec![vec![9.0]],
        )
    });
    t.finish()
}

fn module(gpu: &Gpu) -> Result<(), Failed> {
    let mut t = Cases::new("module");
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
    t.refuse("from_ptx_file: missing file", Want::PtxFile, || {
        Gpu::from_ptx_file(missing_path())
    });
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
    t.refuse(
        "matrix_mul_tiled",
        Want::NotFound("matrix_mul_tiled"),
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
            same(
                "sum",
                o.reduce::<Sum, f64>(ArrayView1::from(&[] as &[f64]), Some(1.5))
                    .map_err(m)?,
                1.5,
            )
        },
    );
    t.works("the shared GPU still works after all this", || {
        same("c", gpu.multiply(f1, f1).map_err(m)?.to_vec(), vec![1.0])
    });
    t.finish()
}
