//! Turning hardware traps and panics of simulated threads into reports.
//!
//! - `SIGSEGV`/`SIGBUS`: a handler, installed once, that looks whether the
//!   faulting OS thread is running a simulated thread on its coroutine stack;
//!   if so, corosensei's `CoroutineTrapHandler` makes that coroutine return
//!   [`ThreadEnd::Trap`] with the faulting address (the scheduler then names
//!   the buffer and the element, see [`report`]); any other fault goes to the
//!   handler that was installed before (Rust's stack-overflow handler, or the
//!   default action). Linux on x86_64 and aarch64; elsewhere no handler is
//!   installed and an out-of-bounds access crashes the process.
//! - Panics: a panic hook, installed once, that records the location and
//!   message of a panic in a simulated thread and prints nothing (the launch
//!   returns it as a fault); panics elsewhere go to the previous hook.
use std::cell::{Cell, RefCell};
use std::sync::Once;

use corosensei::trap::CoroutineTrapHandler;

use super::context::{self, ThreadCtx};
use super::scheduler::RunnerEnd;
use super::{SimError, memory};

thread_local! {
    /// The running coroutine's trap handler, while a simulated thread runs.
    static HANDLER: Cell<Option<CoroutineTrapHandler<RunnerEnd>>> = const { Cell::new(None) };
    /// The last panic of a simulated thread on this OS thread.
    static PANIC: RefCell<Option<PanicRecord>> = const { RefCell::new(None) };
}

/// Where and why a simulated thread panicked.
pub(crate) struct PanicRecord {
    pub file: String,
    pub line: u32,
    pub column: u32,
    pub message: String,
}

/// Sets (or clears) the trap handler of the coroutine about to run. Setting
/// one also gives this OS thread a signal stack large enough for the
/// handler (see `signals::ensure_alt_stack`).
pub(crate) fn set_handler(h: Option<CoroutineTrapHandler<RunnerEnd>>) {
    #[cfg(all(
        target_os = "linux",
        any(target_arch = "x86_64", target_arch = "aarch64")
    ))]
    if h.is_some() {
        signals::ensure_alt_stack();
    }
    HANDLER.with(|c| c.set(h));
}

/// The panic the hook recorded for this OS thread's simulated thread, if any.
pub(crate) fn take_panic() -> Option<PanicRecord> {
    PANIC.with(|p| p.borrow_mut().take())
}

/// Installs the signal handlers and the panic hook (once per process).
pub(crate) fn install() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let previous_hook = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if context::in_simulated_thread() {
                let (file, line, column) = info
                    .location()
                    .map_or(("<unknown>".to_string(), 0, 0), |l| {
                        (l.file().to_string(), l.line(), l.column())
                    });
                let message = info
                    .payload_as_str()
                    .map_or_else(|| "panic".to_string(), str::to_string);
                PANIC.with(|p| {
                    *p.borrow_mut() = Some(PanicRecord {
                        file,
                        line,
                        column,
                        message,
                    })
                });
            } else {
                previous_hook(info)
            }
        }));
        #[cfg(all(
            target_os = "linux",
            any(target_arch = "x86_64", target_arch = "aarch64")
        ))]
        signals::install();
    });
}

/// The `SIGSEGV`/`SIGBUS` handler (Linux, x86_64 and aarch64).
#[cfg(all(
    target_os = "linux",
    any(target_arch = "x86_64", target_arch = "aarch64")
))]
mod signals {
    use std::cell::Cell;
    use std::sync::OnceLock;

    use corosensei::trap::TrapHandlerRegs;

    use super::HANDLER;
    use crate::sim::context;
    use crate::sim::scheduler::ThreadEnd;

    static PREVIOUS: OnceLock<[libc::sigaction; 2]> = OnceLock::new();

    /// The signal stack the handler needs: the kernel's signal frame (with
    /// the vector registers' state, several KiB with AVX-512) plus the
    /// stack walk of [`std::backtrace::Backtrace::force_capture`]. Rust's
    /// own per-thread signal stack (`SIGSTKSZ`, 8 KiB or the kernel's
    /// minimum) is too small for both on some machines: the handler then
    /// overflowed it and the process died of `SIGSEGV` instead of
    /// reporting the fault.
    const ALT_STACK_BYTES: usize = 256 << 10;

    /// A signal stack of [`ALT_STACK_BYTES`] (a guard page below it) this
    /// OS thread installed, and the one it replaced, put back on drop.
    struct AltStack {
        map: *mut libc::c_void,
        map_len: usize,
        previous: libc::stack_t,
    }

    impl Drop for AltStack {
        fn drop(&mut self) {
            // SAFETY: the previous stack (or its disabled state) goes back
            // before the mapping is released; the handler does not run on
            // this thread any more (its simulated threads are done).
            unsafe {
                libc::sigaltstack(&self.previous, std::ptr::null_mut());
                libc::munmap(self.map, self.map_len);
            }
        }
    }

    thread_local! {
        /// This OS thread's own signal stack, once it needed one.
        static ALT_STACK: std::cell::RefCell<Option<AltStack>> =
            const { std::cell::RefCell::new(None) };
    }

    /// Gives this OS thread a signal stack of at least [`ALT_STACK_BYTES`]
    /// unless it has one already (once per thread; a failed `mmap` keeps
    /// the stack there was).
    pub(super) fn ensure_alt_stack() {
        let _ = ALT_STACK.try_with(|slot| {
            let mut slot = slot.borrow_mut();
            if slot.is_some() {
                return;
            }
            // SAFETY: sigaltstack queries and sets this thread's signal
            // stack; the new one is a fresh private mapping that lives in
            // `slot` until the thread ends.
            unsafe {
                let mut previous: libc::stack_t = std::mem::zeroed();
                if libc::sigaltstack(std::ptr::null(), &mut previous) != 0 {
                    return;
                }
                if previous.ss_flags & libc::SS_DISABLE == 0 && previous.ss_size >= ALT_STACK_BYTES
                {
                    return;
                }
                let page = usize::try_from(libc::sysconf(libc::_SC_PAGESIZE)).unwrap_or(4096);
                let map_len = ALT_STACK_BYTES + page;
                let map = libc::mmap(
                    std::ptr::null_mut(),
                    map_len,
                    libc::PROT_READ | libc::PROT_WRITE,
                    libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                    -1,
                    0,
                );
                if map == libc::MAP_FAILED {
                    return;
                }
                // The lowest page is the guard: an overflow of the signal
                // stack faults instead of writing past it.
                libc::mprotect(map, page, libc::PROT_NONE);
                let stack = libc::stack_t {
                    ss_sp: map.cast::<u8>().add(page).cast(),
                    ss_flags: 0,
                    ss_size: ALT_STACK_BYTES,
                };
                if libc::sigaltstack(&stack, std::ptr::null_mut()) != 0 {
                    libc::munmap(map, map_len);
                    return;
                }
                *slot = Some(AltStack {
                    map,
                    map_len,
                    previous,
                });
            }
        });
    }

    /// Installs the handler for both signals, keeping the previous actions.
    pub(super) fn install() {
        // SAFETY: sigaction with a zeroed (then filled) struct; the previous
        // actions are kept for chaining before the handler can run.
        unsafe {
            let mut previous: [libc::sigaction; 2] = std::mem::zeroed();
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = handler as *const () as usize;
            action.sa_flags = libc::SA_SIGINFO | libc::SA_ONSTACK;
            libc::sigemptyset(&mut action.sa_mask);
            for (k, sig) in [libc::SIGSEGV, libc::SIGBUS].into_iter().enumerate() {
                libc::sigaction(sig, std::ptr::null(), &mut previous[k]);
            }
            let _ = PREVIOUS.set(previous);
            for sig in [libc::SIGSEGV, libc::SIGBUS] {
                libc::sigaction(sig, &action, std::ptr::null_mut());
            }
        }
    }

    /// The stack pointer of the interrupted context.
    ///
    /// # Safety
    /// `ctx` is the `ucontext_t` the kernel passed to the handler.
    unsafe fn stack_pointer(ctx: *mut libc::c_void) -> usize {
        let ctx = ctx.cast::<libc::ucontext_t>();
        // SAFETY: forwarded from the caller.
        unsafe {
            #[cfg(target_arch = "x86_64")]
            return (*ctx).uc_mcontext.gregs[libc::REG_RSP as usize] as usize;
            #[cfg(target_arch = "aarch64")]
            return (*ctx).uc_mcontext.sp as usize;
        }
    }

    /// Makes the interrupted context continue in the trap trampoline.
    ///
    /// # Safety
    /// `ctx` is the `ucontext_t` the kernel passed to the handler.
    unsafe fn redirect(ctx: *mut libc::c_void, regs: TrapHandlerRegs) {
        let ctx = ctx.cast::<libc::ucontext_t>();
        // SAFETY: forwarded from the caller.
        unsafe {
            #[cfg(target_arch = "x86_64")]
            {
                let TrapHandlerRegs {
                    rip,
                    rsp,
                    rbp,
                    rdi,
                    rsi,
                } = regs;
                let g = &mut (*ctx).uc_mcontext.gregs;
                g[libc::REG_RIP as usize] = rip as i64;
                g[libc::REG_RSP as usize] = rsp as i64;
                g[libc::REG_RBP as usize] = rbp as i64;
                g[libc::REG_RDI as usize] = rdi as i64;
                g[libc::REG_RSI as usize] = rsi as i64;
            }
            #[cfg(target_arch = "aarch64")]
            {
                let TrapHandlerRegs {
                    pc,
                    sp,
                    x0,
                    x1,
                    x29,
                    lr,
                } = regs;
                let m = &mut (*ctx).uc_mcontext;
                m.pc = pc;
                m.sp = sp;
                m.regs[0] = x0;
                m.regs[1] = x1;
                m.regs[29] = x29;
                m.regs[30] = lr;
            }
        }
    }

    extern "C" fn handler(sig: libc::c_int, info: *mut libc::siginfo_t, ctx: *mut libc::c_void) {
        // SAFETY: the kernel passes valid siginfo and ucontext pointers.
        unsafe {
            let h = HANDLER.with(Cell::take);
            if let Some(h) = &h
                && h.stack_ptr_in_bounds(stack_pointer(ctx))
            {
                let addr = (*info).si_addr() as usize;
                let thread = context::current_linear().unwrap_or(0);
                // The frames from here through the signal frame to the faulting
                // instruction and its callers, for the report's source line
                // (a walk of the stack; symbols are looked up later, if at
                // all). It allocates: safe here, where the interrupted code
                // is a kernel's load or store of a simulated device buffer,
                // never the allocator. An overflow of the simulated thread's
                // own stack is reported without a source line: no walk.
                let trace = if h.stack_ptr_in_bounds(addr) {
                    std::backtrace::Backtrace::disabled()
                } else {
                    std::backtrace::Backtrace::force_capture()
                };
                // The simulated thread's coroutine returns `Trap` once the handler
                // returns: its stack is discarded, nothing of it runs again.
                let regs =
                    h.setup_trap_handler(move || Some((thread, ThreadEnd::Trap { addr, trace })));
                redirect(ctx, regs);
                return;
            }
            HANDLER.with(|c| c.set(h));
            chain(sig, info, ctx);
        }
    }

    /// Hands a fault that is not a simulated thread's to the previous handler.
    ///
    /// # Safety
    /// Called from the signal handler with its arguments.
    unsafe fn chain(sig: libc::c_int, info: *mut libc::siginfo_t, ctx: *mut libc::c_void) {
        let k = usize::from(sig != libc::SIGSEGV);
        let Some(previous) = PREVIOUS.get().map(|p| p[k]) else {
            return;
        };
        // SAFETY: the previous action was the process's handler for this signal;
        // calling it (or restoring the default so that the fault recurs and the
        // process ends as it would have) is what it would have done.
        unsafe {
            if previous.sa_sigaction == libc::SIG_DFL || previous.sa_sigaction == libc::SIG_IGN {
                libc::sigaction(sig, &previous, std::ptr::null_mut());
            } else if previous.sa_flags & libc::SA_SIGINFO != 0 {
                let f: extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut libc::c_void) =
                    std::mem::transmute(previous.sa_sigaction);
                f(sig, info, ctx);
            } else {
                let f: extern "C" fn(libc::c_int) = std::mem::transmute(previous.sa_sigaction);
                f(sig);
            }
        }
    }
}

/// The report for a simulated thread that trapped at `addr` (`on_stack`:
/// the address is in its own stack, an overflow), with the call stack
/// `trace` captured at the trap.
pub(crate) fn report(
    ctx: &ThreadCtx,
    addr: usize,
    on_stack: bool,
    trace: &std::backtrace::Backtrace,
) -> SimError {
    let kernel = ctx.block_state().kernel;
    let fault = |message: String| SimError::Fault {
        kernel,
        file: "<simulated thread>".to_string(),
        line: 0,
        column: 0,
        at: ctx.id(),
        message,
    };
    if on_stack {
        return fault(format!(
            "stack overflow of the simulated thread (address {addr:#x})"
        ));
    }
    match memory::find(addr) {
        Some((info, true)) => {
            let offset = addr as i128 - info.base as i128;
            let buffer = match ctx.block_state().parameter_into(info.base, info.len_bytes) {
                Some(p) => format!("parameter `{p}`, buffer {}", info.label),
                None => format!("buffer {}", info.label),
            };
            SimError::OutOfBounds {
                kernel,
                buffer: buffer.into(),
                index: offset.div_euclid(info.element_size as i128) as i64,
                len: info.len_bytes / info.element_size,
                at: ctx.id(),
                site: access_site(trace),
            }
        }
        _ => fault(format!(
            "invalid memory access at address {addr:#x}, outside every simulated device buffer"
        )),
    }
}

/// The faulting access's place in the kernel's source, `file:line:column`,
/// from the call stack captured at the trap: its innermost frame outside
/// Rust's own library and this crate's `src/` (the signal handler, the
/// device layer's loads, the grid-stride loop), so an access through
/// `core::ptr::read` or a device-layer load names the kernel's line that
/// made it. In optimised code it is the line the compiler gave the faulting
/// instruction: the access's, or that of the loop around it. Only a Rust
/// source file counts, never a frame of C code. `None` without line tables
/// for the kernel (a build with `debug = false`, as the release profile's
/// default; `debug = "line-tables-only"` gives them). The file is named as
/// rustc names it in `file!()` where the build makes that possible
/// (relative to the workspace), else relative to the current directory,
/// else as the debug information has it.
fn access_site(trace: &std::backtrace::Backtrace) -> Option<Box<str>> {
    // The simulator's own dependencies, whose frames lie between the trap
    // and the kernel in a dev build (the coroutine that runs the simulated
    // thread): never the site (a dev build once named
    // `corosensei/src/coroutine.rs:243:62`).
    const SIMULATOR_CRATES: [&str; 3] = ["/corosensei-", "/libc-", "/corosensei/"];
    let own_src = concat!(env!("CARGO_MANIFEST_DIR"), "/src/");
    // `{:#}`: every frame, each file as the debug information names it.
    let text = format!("{trace:#}");
    let site = text
        .lines()
        .filter_map(|l| l.trim_start().strip_prefix("at "))
        .find(|at| {
            // A Rust source file: the path before `:line:column`. Not C code
            // under the thread (with the system's debug information, a build
            // without line tables of its own found glibc's
            // `./nptl/pthread_create.c` here).
            let file = at.rsplitn(3, ':').nth(2).unwrap_or(at);
            file.ends_with(".rs")
                && !at.starts_with("/rustc/")
                && !at.contains("/lib/rustlib/src/rust/library/")
                && !at.starts_with(own_src)
                && !SIMULATOR_CRATES.iter().any(|c| at.contains(c))
        })?;
    Some(relative_path(site).into())
}

/// `path` without the directory `file!()` paths are relative to (this
/// crate's workspace root, when rustc was given relative paths), or else
/// without the current directory, when it starts with either.
fn relative_path(path: &str) -> &str {
    let this_file = concat!(env!("CARGO_MANIFEST_DIR"), "/", "src/sim/trap.rs");
    let roots = [
        this_file.strip_suffix(file!()).map(str::to_string),
        std::env::current_dir()
            .ok()
            .and_then(|d| d.to_str().map(|d| format!("{d}/"))),
    ];
    roots
        .into_iter()
        .flatten()
        .filter(|root| root.ends_with('/'))
        .find_map(|root| path.strip_prefix(root.as_str()))
        .unwrap_or(path)
}
