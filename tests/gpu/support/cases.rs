//! Refusal tables: every public host function that takes user input is fed
//! wrong shapes, mismatched lengths, empty inputs, one-element inputs (which
//! must work and match the CPU reference), non-contiguous and negatively
//! strided views (which must work: the launchers copy any layout to a
//! contiguous buffer), sizes at and past 2^31 and 2^32 where the API takes
//! them (zero-stride views, so that a huge logical size costs no memory, and
//! only where the launcher refuses before it copies), missing, corrupt and
//! kernel-less PTX, and the C ABI's null pointers, zero and negative sizes
//! and size² overflow. Each case must give the documented typed error (or C
//! status code), or work: no panic (each case runs under `catch_unwind`), no
//! crash, no kernel launch with a bad size.
//!
//! One trial per family runs a table of cases and reports every failing
//! case, not only the first; each prints (on stderr) how many cases it
//! checked.
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
use std::fmt::{Debug, Display};
use std::panic::{AssertUnwindSafe, catch_unwind};

use cuda_kernels::{Error, Gpu};
use libtest_mimic::Failed;

use super::PTX_WITHOUT_KERNEL;
use cuda_kernels::prelude::*;

/// The documented error a case must give.
#[derive(Debug, Clone, Copy)]
pub enum Want {
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
    /// `Error::NotOnSimulator`: a hardware-only feature asked of the
    /// simulator.
    NotOnSimulator,
    /// `Error::WrongDevice` naming this kernel and this argument.
    Foreign(&'static str, &'static str),
    /// `Error::InvalidInput` naming this kernel, its reason naming this
    /// argument (or size).
    InvalidNaming(&'static str, &'static str),
}

impl Want {
    fn matches(self, e: &Error) -> bool {
        match (self, e) {
            (Want::Invalid(k), Error::InvalidInput { kernel, .. }) => *kernel == k,
            (Want::PtxFile, Error::PtxFile { .. }) => true,
            (Want::ModuleLoad, Error::ModuleLoad { .. }) => true,
            (Want::NotFound(k), Error::KernelNotFound { name, .. }) => name == k,
            (Want::Cuda(k), Error::Cuda { kernel, .. }) => *kernel == k,
            (Want::NotOnSimulator, Error::NotOnSimulator { .. }) => true,
            (
                Want::Foreign(k, a),
                Error::WrongDevice {
                    kernel, argument, ..
                },
            ) => *kernel == k && *argument == a,
            (Want::InvalidNaming(k, a), Error::InvalidInput { kernel, reason }) => {
                *kernel == k && reason.contains(a)
            }
            _ => false,
        }
    }
}

/// The cases of one trial: how many ran, and every one that failed.
pub struct Cases {
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
    /// An empty table named `family` (in its report).
    pub fn new(family: &'static str) -> Self {
        Self {
            family,
            run: 0,
            failed: Vec::new(),
        }
    }

    /// A case that must be refused with `want` (the value, if any, is not
    /// printed: it may be large).
    pub fn refuse<T>(
        &mut self,
        case: &str,
        want: Want,
        f: impl FnOnce() -> cuda_kernels::Result<T>,
    ) {
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
    pub fn works(&mut self, case: &str, f: impl FnOnce() -> Result<(), String>) {
        self.run += 1;
        match catch_unwind(AssertUnwindSafe(f)) {
            Ok(Ok(())) => {}
            Ok(Err(e)) => self.failed.push(format!("{case}: {e}")),
            Err(p) => self
                .failed
                .push(format!("{case}: panicked: {}", panic_message(&*p))),
        }
    }

    /// A case of a hardware-only feature (timings, unified memory, …) on
    /// valid input: on a GPU `run` must work and `check` say nothing is
    /// wrong; on the simulator `run` must be refused with
    /// `Error::NotOnSimulator`.
    pub fn works_on_gpu<R>(
        &mut self,
        gpu: &Gpu,
        case: &str,
        run: impl FnOnce() -> cuda_kernels::Result<R>,
        check: impl FnOnce(R) -> Result<(), String>,
    ) {
        if gpu.is_simulated() {
            self.refuse(&format!("{case} (simulator)"), Want::NotOnSimulator, run);
        } else {
            self.works(case, || check(run().map_err(m)?));
        }
    }

    /// Prints the count and fails with every failing case.
    pub fn finish(self) -> Result<(), Failed> {
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
pub fn m(e: impl Display) -> String {
    e.to_string()
}

/// `Err` with `what` unless `got == want`.
pub fn equal<T: PartialEq + Debug>(what: &str, got: T, want: T) -> Result<(), String> {
    if got == want {
        Ok(())
    } else {
        Err(format!("{what}: got {got:?}, expected {want:?}"))
    }
}

/// `Err(msg)` unless `cond`.
pub fn require(cond: bool, msg: impl FnOnce() -> String) -> Result<(), String> {
    if cond { Ok(()) } else { Err(msg()) }
}

/// A GPU on which a launcher that forgot a check does no harm: on a GPU, one
/// whose module holds none of this crate's kernels ([`kernel_less`]); on the
/// simulator, a simulator of its own (a kernel that faults there is
/// reported as an error and leaves it usable).
pub fn harmless(gpu: &Gpu, t: &mut Cases) -> Option<Gpu> {
    if !gpu.is_simulated() {
        return kernel_less(t);
    }
    let mut sim = None;
    t.works("Gpu::simulator()", || {
        sim = Some(Gpu::simulator().map_err(m)?);
        Ok(())
    });
    sim
}

/// A GPU whose module holds none of this crate's kernels: a launcher that
/// forgot a check gets `KernelNotFound` instead of launching anything.
pub fn kernel_less(t: &mut Cases) -> Option<Gpu> {
    let mut gpu = None;
    t.works("Gpu::from_ptx(PTX without this crate's kernels)", || {
        gpu = Some(Gpu::from_ptx(PTX_WITHOUT_KERNEL).map_err(m)?);
        Ok(())
    });
    gpu
}
