//! The shared test harness (used by every test target with `harness = false`:
//! the `gpu` binary, `ptx`, `capi_callers`, and the program's `cli/tests/cli.rs`).
//!
//! A test of the `gpu` binary is one of three kinds, by its subject
//! ([`Subject`]):
//! - a CPU test ([`cpu_test`]): runs everywhere, kind `cpu`;
//! - a *kernel-result* test ([`kernel_test`]): its subject is what a kernel
//!   computes, or a launcher's refusal of bad input. It runs on the GPU when
//!   there is one (kind `gpu`), and on the CPU simulator otherwise (kind
//!   `sim`, shown as `[sim]`, and passed or failed, never ignored), with the
//!   same body: the body gets a [`Gpu`] of either backend;
//! - a *hardware-only* test ([`hardware_test`]): its subject is the hardware
//!   itself (timings, stream concurrency, contexts, the raw driver-API path,
//!   the driver's module loader, the C ABI, unified memory, the device-wide
//!   free memory, the sanitizer, and the simulator's agreement with the GPU).
//!   It runs on the GPU only; without one it is reported as `ignored
//!   (hardware-only: needs a CUDA GPU (…))`.
//!
//! On the simulator the largest sizes of a test shrink ([`sized`],
//! [`simulated`]) so that the simulated suite stays within minutes on two
//! cores; the hidden odd sizes stay.
//!
//! Where a test runs is decided once, before the trials are listed
//! ([`place`]), from the GPU ([`shared_gpu`]) and three environment
//! variables:
//! - `CUDA_KERNELS_SIM=1` ([`SIM`]): every kernel-result test runs on the
//!   simulator, even where there is a GPU (hardware-only tests still run on
//!   the GPU);
//! - `CUDA_KERNELS_SIM_COMPARE=1` ([`SIM_COMPARE`]): on a GPU, every
//!   kernel-result test runs its body on the GPU and then on the simulator
//!   (kind `gpu+sim`; both must pass);
//! - `CUDA_KERNELS_REQUIRE_GPU=1` ([`REQUIRE_GPU`]): a run meant for the GPU.
//!   Without a GPU every GPU test fails, naming itself and the reason,
//!   hardware-only and kernel-result alike, and a kernel-result test that
//!   `CUDA_KERNELS_SIM=1` would send to the simulator fails too: no test of
//!   such a run is `[sim]`, so that it cannot come back green untested on the
//!   GPU;
//! - `CUDA_KERNELS_MIN_GPUS=N` ([`MIN_GPUS`]): the run fails before any test
//!   when fewer than `N` distinct usable CUDA devices exist, naming the
//!   unusable ones and why (the packed GPU run sets it from `nvidia-smi -L`).
//!
//! The first line each binary prints names the backend and why
//! ([`backend_line`]): `backend: GPU 0 (NVIDIA H100 80GB HBM3, cubin sm_90)`
//! or `backend: simulator (no CUDA device: …)`.
//!
//! Strictness: only "no CUDA device" (the driver's `CUDA_ERROR_NO_DEVICE`)
//! and "no CUDA driver" (no NVIDIA kernel driver loaded)
//! ([`Error::is_no_gpu`](cuda_kernels::Error::is_no_gpu)) mean that there is no
//! GPU. A GPU that is there but unusable (the crate's PTX fails to load, a
//! driver too old or mismatched, a failing device count: any other error)
//! fails every GPU test, kernel-result ones included, naming the driver's
//! error: they do not fall back to the simulator.
//!
//! All trials share one GPU and one simulator (a [`Gpu`] is `Send + Sync` and
//! binds its context on every call).
#![allow(dead_code)]
use std::process::ExitCode;
use std::sync::{Arc, Mutex, OnceLock, RwLock};

use cuda_kernels::{Error, Gpu};
use libtest_mimic::{Arguments, Completion, Failed, Trial};

/// The environment variable that turns "ignored: no GPU" into a failure.
pub const REQUIRE_GPU: &str = "CUDA_KERNELS_REQUIRE_GPU";

/// The environment variable that runs every kernel-result test on the
/// simulator, even with a GPU (the one that makes `cuda_kernels::gpu()` open
/// the simulator).
pub const SIM: &str = cuda_kernels::SIM_ENV;

/// The environment variable that runs every kernel-result test on the GPU and
/// on the simulator (on a machine with a GPU).
pub const SIM_COMPARE: &str = "CUDA_KERNELS_SIM_COMPARE";

/// The environment variable that makes the run fail when fewer distinct
/// usable CUDA devices exist than it says.
pub const MIN_GPUS: &str = "CUDA_KERNELS_MIN_GPUS";

/// The value of [`MIN_GPUS`] given as `value` (`None`: unset): a whole
/// number of at least 1, else an error naming the variable.
pub fn parse_min_gpus(value: Option<&str>) -> Result<Option<usize>, String> {
    let Some(text) = value else {
        return Ok(None);
    };
    match text.trim().parse::<usize>() {
        Ok(n) if n >= 1 => Ok(Some(n)),
        _ => Err(format!(
            "{MIN_GPUS}={text:?} is not a number of GPUs (a whole number, at least 1)"
        )),
    }
}

/// `Ok` when `devices` (the machine's, or why they could not be listed)
/// hold at least `min` distinct usable devices (distinct PCI bus ids), else
/// why not, naming every unusable device and its reason.
pub fn check_min_gpus(
    min: usize,
    devices: Result<Vec<cuda_kernels::device_info::DeviceInfo>, Error>,
) -> Result<(), String> {
    let devices =
        devices.map_err(|e| format!("{MIN_GPUS}={min} but the devices cannot be listed: {e}"))?;
    let mut usable: Vec<&str> = devices
        .iter()
        .filter(|d| d.unusable.is_none())
        .map(|d| d.pci_bus_id.as_str())
        .collect();
    usable.sort_unstable();
    usable.dedup();
    if usable.len() >= min {
        return Ok(());
    }
    let unusable: Vec<String> = devices
        .iter()
        .filter_map(|d| {
            let why = d.unusable.as_ref()?;
            Some(format!("device {} ({}): {why}", d.ordinal, d.name))
        })
        .collect();
    Err(format!(
        "{MIN_GPUS}={min} but {} distinct usable CUDA device(s) exist; unusable: {}",
        usable.len(),
        if unusable.is_empty() {
            "none".to_string()
        } else {
            unusable.join("; ")
        }
    ))
}

/// Whether the environment variable `var` is set to anything but empty or `0`.
pub fn env_flag(var: &str) -> bool {
    std::env::var_os(var).is_some_and(|v| !v.is_empty() && v != "0")
}

/// Whether `CUDA_KERNELS_REQUIRE_GPU` is set.
pub fn gpu_required() -> bool {
    env_flag(REQUIRE_GPU)
}

/// Why the GPU tests cannot run on a GPU.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NoGpu {
    /// No CUDA driver or no CUDA device: kernel-result tests run on the
    /// simulator, hardware-only tests are ignored (both fail under
    /// [`REQUIRE_GPU`]).
    Absent(String),
    /// A GPU is there but unusable (the PTX failed to load, a broken
    /// driver, …): every GPU test fails.
    Broken(String),
}

impl NoGpu {
    /// Sorts an error of opening the GPU: only "no driver" and "no device"
    /// mean that there is no GPU.
    pub fn from_error(e: &Error) -> Self {
        if e.is_no_gpu() {
            NoGpu::Absent(e.to_string())
        } else {
            NoGpu::Broken(e.to_string())
        }
    }
}

/// What a test of the `gpu` binary is about, which decides where it runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Subject {
    /// What a kernel computes, or a launcher's refusal of bad input: on the
    /// GPU, or on the simulator.
    KernelResult,
    /// The hardware itself; the text names what (`"timings"`, `"contexts"`,
    /// …): on the GPU only.
    Hardware(&'static str),
}

/// How the environment asks for the simulator ([`SIM`], [`SIM_COMPARE`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SimMode {
    /// The simulator where there is no GPU (neither variable set).
    Fallback,
    /// `CUDA_KERNELS_SIM=1`: kernel-result tests on the simulator only.
    Forced,
    /// `CUDA_KERNELS_SIM_COMPARE=1`: kernel-result tests on both, where there
    /// is a GPU.
    Compare,
}

impl SimMode {
    /// The mode the environment asks for (`CUDA_KERNELS_SIM=1` wins).
    pub fn from_env() -> Self {
        if cuda_kernels::sim_requested() {
            SimMode::Forced
        } else if env_flag(SIM_COMPARE) {
            SimMode::Compare
        } else {
            SimMode::Fallback
        }
    }
}

/// Where a test runs, or what it reports instead.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Placement {
    /// On the GPU (kind `gpu`).
    Gpu,
    /// On the simulator (kind `sim`).
    Sim,
    /// On the GPU, then on the simulator (kind `gpu+sim`).
    Both,
    /// Ignored, with this reason.
    Ignored(String),
    /// Failed, with this message (it names the test and the reason).
    Fails(String),
}

impl Placement {
    /// The libtest-mimic kind shown in brackets before the name.
    pub fn kind(&self) -> &'static str {
        match self {
            Placement::Sim => "sim",
            Placement::Both => "gpu+sim",
            _ => "gpu",
        }
    }
}

/// The reason a hardware-only test gives for not running without a GPU.
pub fn hardware_only(what: &str) -> String {
    format!("hardware-only: needs a CUDA GPU ({what})")
}

/// Where test `name` about `subject` runs, given the GPU (`Ok` when there is
/// a usable one), the simulator mode and whether a GPU is `required`.
pub fn place(
    name: &str,
    subject: Subject,
    gpu: Result<(), &NoGpu>,
    mode: SimMode,
    required: bool,
) -> Placement {
    let no_gpu = |why: &NoGpu| match why {
        NoGpu::Absent(_) if !required => match subject {
            Subject::KernelResult => Placement::Sim,
            Subject::Hardware(what) => Placement::Ignored(hardware_only(what)),
        },
        NoGpu::Absent(reason) => Placement::Fails(format!(
            "{name}: {REQUIRE_GPU}=1 but this GPU test cannot run on a GPU: {reason}"
        )),
        NoGpu::Broken(reason) => Placement::Fails(format!(
            "{name}: a CUDA GPU is present but unusable: {reason}"
        )),
    };
    match (subject, mode, gpu) {
        (Subject::KernelResult, SimMode::Forced, _) if required => Placement::Fails(format!(
            "{name}: {REQUIRE_GPU}=1 but {SIM}=1 sends this test to the simulator: a GPU run \
             runs no test on the simulator"
        )),
        (Subject::KernelResult, SimMode::Forced, _) => Placement::Sim,
        (Subject::KernelResult, SimMode::Compare, Ok(())) => Placement::Both,
        (_, _, Ok(())) => Placement::Gpu,
        (_, _, Err(why)) => no_gpu(why),
    }
}

/// The shared GPU (dropped by [`run`] after the trials, so that its memory is
/// freed before exit, as compute-sanitizer's leak check wants).
static GPU: Mutex<Option<Arc<Gpu>>> = Mutex::new(None);
/// Why there is no GPU, decided once.
static NO_GPU: OnceLock<Option<NoGpu>> = OnceLock::new();
/// The shared simulator, opened on first use (dropped by [`run`] too).
static SIMULATOR: Mutex<Option<Result<Arc<Gpu>, String>>> = Mutex::new(None);

/// The shared CUDA GPU (`cuda_kernels::cuda_gpu()`, whatever
/// `CUDA_KERNELS_SIM` says), or why there is none.
pub fn shared_gpu() -> Result<Arc<Gpu>, NoGpu> {
    let mut slot = GPU.lock().unwrap_or_else(|e| e.into_inner());
    let reason = NO_GPU.get_or_init(|| match cuda_kernels::cuda_gpu() {
        Ok(gpu) => {
            *slot = Some(Arc::new(gpu));
            None
        }
        Err(e) => Some(NoGpu::from_error(&e)),
    });
    match (reason, slot.as_ref()) {
        (None, Some(gpu)) => Ok(gpu.clone()),
        (Some(reason), _) => Err(reason.clone()),
        (None, None) => Err(NoGpu::Broken("the shared GPU was already released".into())),
    }
}

/// The shared simulator (the error of opening it, as text, if that failed).
pub fn shared_simulator() -> Result<Arc<Gpu>, String> {
    let mut slot = SIMULATOR.lock().unwrap_or_else(|e| e.into_inner());
    slot.get_or_insert_with(|| {
        cuda_kernels::simulator()
            .map(Arc::new)
            .map_err(|e| format!("the simulator did not open: {e}"))
    })
    .clone()
}

/// Whether this machine has a usable GPU.
pub fn have_gpu() -> bool {
    shared_gpu().is_ok()
}

/// Where test `name` about `subject` runs on this machine, in this
/// environment ([`place`] with the shared GPU's state).
pub fn placement(name: &str, subject: Subject) -> Placement {
    let gpu = shared_gpu();
    place(
        name,
        subject,
        gpu.as_ref().map(drop),
        SimMode::from_env(),
        gpu_required(),
    )
}

/// Whether the tests run under compute-sanitizer (scripts/sanitize.sh sets
/// `CUDA_KERNELS_SANITIZE`): the largest sizes are left out there.
pub fn under_sanitizer() -> bool {
    std::env::var_os("CUDA_KERNELS_SANITIZE").is_some()
}

/// Whether `gpu` is the simulator, where the tests' largest sizes shrink
/// ([`sized`]) so that the whole simulated suite stays within minutes on
/// CI's 2 cores.
pub fn simulated(gpu: &Gpu) -> bool {
    gpu.is_simulated()
}

/// A test's size: `full` on a GPU, `on_simulator` on the simulator (hidden
/// odd sizes stay odd: pass an odd `on_simulator` where `full` is).
pub fn sized(gpu: &Gpu, full: usize, on_simulator: usize) -> usize {
    if simulated(gpu) { on_simulator } else { full }
}

/// Held shared by every GPU trial, and exclusively by the trials that
/// measure the whole device (its free memory, say), which therefore run while
/// no other GPU trial of the binary does. Simulated trials do not take it.
static WHOLE_DEVICE: RwLock<()> = RwLock::new(());

/// A body of a GPU trial: it gets the GPU or the simulator and decides its
/// own completion (it may be ignored for another reason, say too little GPU
/// memory). Called twice in a `gpu+sim` trial.
pub type Body = Arc<dyn Fn(&Gpu) -> Result<Completion, Failed> + Send + Sync>;

/// Runs `body` on the shared GPU (its context current on this thread; the
/// [`WHOLE_DEVICE`] lock held shared, or exclusively when `exclusive`).
fn on_gpu(body: &Body, exclusive: bool) -> Result<Completion, Failed> {
    let gpu = shared_gpu().map_err(|why| Failed::from(format!("{why:?}")))?;
    let (_shared, _exclusive) = if exclusive {
        (
            None,
            Some(WHOLE_DEVICE.write().unwrap_or_else(|e| e.into_inner())),
        )
    } else {
        (
            Some(WHOLE_DEVICE.read().unwrap_or_else(|e| e.into_inner())),
            None,
        )
    };
    // Each trial runs on its own thread: make the context current there, so
    // that tests calling `cust` directly have one.
    gpu.bind().map_err(fail)?;
    body(&gpu)
}

/// Runs `body` on the shared simulator.
fn on_simulator(body: &Body) -> Result<Completion, Failed> {
    let sim = shared_simulator().map_err(Failed::from)?;
    body(&sim)
}

/// The trial `name` about `subject`, placed by [`placement`].
fn device_trial(name: String, subject: Subject, exclusive: bool, body: Body) -> Trial {
    let placed = placement(&name, subject);
    let kind = placed.kind();
    Trial::ignorable_test(name, move || match &placed {
        Placement::Gpu => on_gpu(&body, exclusive),
        Placement::Sim => on_simulator(&body),
        Placement::Both => {
            let on = |backend: &str, r: Result<Completion, Failed>| {
                r.map_err(|f| {
                    Failed::from(format!(
                        "on the {backend}: {}",
                        f.message().unwrap_or("failed")
                    ))
                })
            };
            let gpu = on("GPU", on_gpu(&body, exclusive))?;
            on("simulator", on_simulator(&body))?;
            Ok(gpu)
        }
        Placement::Ignored(reason) => Ok(Completion::ignored_with(reason)),
        Placement::Fails(message) => Err(Failed::from(message.as_str())),
    })
    .with_kind(kind)
}

/// A kernel-result test that decides its own completion: on the GPU, or on
/// the simulator (see the module's notes).
pub fn kernel_trial(
    name: impl Into<String>,
    body: impl Fn(&Gpu) -> Result<Completion, Failed> + Send + Sync + 'static,
) -> Trial {
    device_trial(name.into(), Subject::KernelResult, false, Arc::new(body))
}

/// A kernel-result test (see [`kernel_trial`]).
pub fn kernel_test(name: impl Into<String>, body: fn(&Gpu) -> Result<(), Failed>) -> Trial {
    kernel_trial(name, move |gpu| body(gpu).map(|()| Completion::Completed))
}

/// A hardware-only test about `what` that decides its own completion: on the
/// GPU only (see the module's notes).
pub fn hardware_trial(
    name: impl Into<String>,
    what: &'static str,
    body: impl Fn(&Gpu) -> Result<Completion, Failed> + Send + Sync + 'static,
) -> Trial {
    device_trial(name.into(), Subject::Hardware(what), false, Arc::new(body))
}

/// A hardware-only test about `what` (see [`hardware_trial`]).
pub fn hardware_test(
    name: impl Into<String>,
    what: &'static str,
    body: fn(&Gpu) -> Result<(), Failed>,
) -> Trial {
    hardware_trial(name, what, move |gpu| {
        body(gpu).map(|()| Completion::Completed)
    })
}

/// A hardware-only test about `what` that runs while no other GPU trial runs
/// (see [`WHOLE_DEVICE`]).
pub fn exclusive_hardware_test(
    name: impl Into<String>,
    what: &'static str,
    body: fn(&Gpu) -> Result<(), Failed>,
) -> Trial {
    device_trial(
        name.into(),
        Subject::Hardware(what),
        true,
        Arc::new(move |gpu| body(gpu).map(|()| Completion::Completed)),
    )
}

/// A test that needs no GPU.
pub fn cpu_test(name: impl Into<String>, body: fn() -> Result<(), Failed>) -> Trial {
    Trial::test(name, body).with_kind("cpu")
}

/// Runs the trials (parsing the usual `cargo test` arguments) and exits with
/// libtest's status.
pub fn run(trials: Vec<Trial>) -> ExitCode {
    let args = Arguments::from_args();
    println!("{}", backend_line());
    let on_gpu = |t: &Trial| t.kind() == "gpu" || t.kind() == "gpu+sim";
    let has_gpu_tests = trials.iter().any(|t| on_gpu(t) || t.kind() == "sim");
    if has_gpu_tests {
        let min = parse_min_gpus(std::env::var(MIN_GPUS).ok().as_deref())
            .and_then(|min| min.map_or(Ok(()), |n| check_min_gpus(n, cuda_kernels::devices())));
        if let Err(why) = min {
            eprintln!("error: {why}");
            return ExitCode::FAILURE;
        }
        let simulated = trials.iter().filter(|t| t.kind() == "sim").count();
        match shared_gpu() {
            Ok(_) => {}
            Err(NoGpu::Absent(reason)) if gpu_required() => {
                eprintln!("error: {REQUIRE_GPU}=1 and no GPU: GPU tests fail: {reason}")
            }
            Err(NoGpu::Absent(reason)) => eprintln!(
                "note: no GPU ({reason}): kernel-result tests run on the simulator ([sim]), hardware-only tests are ignored"
            ),
            Err(NoGpu::Broken(reason)) => {
                eprintln!("error: the GPU is unusable: GPU tests fail: {reason}")
            }
        }
        if simulated > 0 && SimMode::from_env() == SimMode::Forced {
            eprintln!("note: {SIM}=1: {simulated} kernel-result tests run on the simulator");
        }
    }
    let conclusion = libtest_mimic::run(&args, trials);
    GPU.lock().unwrap_or_else(|e| e.into_inner()).take();
    SIMULATOR.lock().unwrap_or_else(|e| e.into_inner()).take();
    conclusion.exit_code()
}

/// The line each binary prints first: where its kernel-result tests run,
/// and why (`backend: GPU 0 (NVIDIA H100 80GB HBM3, cubin sm_90)`,
/// `backend: simulator (no CUDA device: …)`, `backend: none (…)`).
pub fn backend_line() -> String {
    let simulator = |why: &str| match shared_simulator() {
        Ok(sim) => sim.backend_line(why),
        Err(e) => format!("backend: none ({why}; {e})"),
    };
    match (shared_gpu(), SimMode::from_env() == SimMode::Forced) {
        (Ok(_), true) if gpu_required() => {
            format!("backend: none ({REQUIRE_GPU}=1 refuses {SIM}=1)")
        }
        (Ok(gpu), true) => simulator(&format!("{SIM}=1; hardware-only tests on {}", gpu.label())),
        (Ok(gpu), false) => gpu.backend_line(""),
        (Err(NoGpu::Absent(reason)), _) if gpu_required() => {
            format!("backend: none ({REQUIRE_GPU}=1 and {reason})")
        }
        (Err(NoGpu::Absent(reason)), _) => simulator(&reason),
        (Err(NoGpu::Broken(reason)), _) => {
            format!("backend: none (a CUDA GPU is present but unusable: {reason})")
        }
    }
}

/// Turns any displayable error into a test failure.
pub fn fail(e: impl std::fmt::Display) -> Failed {
    Failed::from(e.to_string())
}

/// `Err(Failed)` unless `cond`.
pub fn ensure(cond: bool, msg: impl FnOnce() -> String) -> Result<(), Failed> {
    if cond {
        Ok(())
    } else {
        Err(Failed::from(msg()))
    }
}

/// Lengths worth testing for a 1-D kernel with blocks of 256: 1, below and
/// above one block, not a multiple of the block, and large.
pub const AWKWARD_LENGTHS: &[usize] = &[1, 2, 31, 255, 256, 257, 1000, 65_537, (1 << 20) + 3];

/// What a test does when something it needs from the set-up is missing (a
/// tool, a library, a source file): ignored with `reason` on a developer's
/// machine, but a failure naming it where the run must be complete: in CI
/// (`CI=true`, where `scripts/setup.sh` installs every prerequisite) and in
/// the packed GPU run (`CUDA_KERNELS_REQUIRE_GPU=1`).
pub fn missing_prerequisite(reason: impl Into<String>) -> Result<Completion, Failed> {
    let reason = reason.into();
    let strict = if std::env::var("CI").is_ok_and(|v| v == "true" || v == "1") {
        "CI"
    } else if gpu_required() {
        REQUIRE_GPU
    } else {
        return Ok(Completion::ignored_with(reason));
    };
    Err(format!("{reason} (a failure, not ignored, because {strict} is set)").into())
}
