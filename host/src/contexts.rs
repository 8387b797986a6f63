//! K16 (b) and (c): contexts made by hand and one context per host thread
//! (seed 003's `make_context()` / `ctx.pop()` and `KernelLauncherThread`).
//!
//! # What CUDA and `cust` require of threads and contexts
//! - Every driver call acts on the calling thread's *current* context (the
//!   top of a per-thread stack). A thread that has none gets
//!   `InvalidContext`; memory, modules, streams and events belong to the
//!   context that was current when they were made.
//! - The primary context ([`crate::Gpu`]) is reference-counted and may be
//!   current on many threads; `cust`'s `Context` for it is `Send + Sync`, and
//!   `Gpu` makes it current on the calling thread before every call.
//! - A context made with `cuCtxCreate` (`cust::context::legacy::Context`) is
//!   pushed on the *creating* thread's stack and destroyed by `cuCtxDestroy`
//!   even if other threads still use it; `cust` leaves it to the programmer
//!   to make sure no thread does. Worse, `cust`'s `UnownedContext` (`Send`) can
//!   outlive it, and its `Module`, `DeviceBuffer` and `Stream` are `Send` and do
//!   not borrow the context, so safe `cust` code can use them after the
//!   context is gone.
//!
//! # What this module does about it
//! - [`ThreadContext`] owns a non-primary context *and* the module loaded in
//!   it, and is `!Send` and `!Sync`: it cannot leave the thread that created
//!   it, so "used from the wrong thread" is a compile-time error. Its methods
//!   return host data only (`Vec<f32>`): no device object escapes, so nothing
//!   outlives the context. Each method makes the context current first, so a
//!   [`Gpu`](crate::Gpu) used on the same thread in between does no harm.
//!
//!   ```compile_fail
//!   use cuda_kernels_host::contexts::ThreadContext;
//!   fn needs_send<T: Send>(_: T) {}
//!   fn give_away(ctx: ThreadContext) {
//!       needs_send(ctx); // error: `*const ()` cannot be sent between threads safely
//!   }
//!   ```
//! - [`ContextHandle`] is the part that may travel (`Send + Sync + Clone`):
//!   its [`ContextHandle::bind`] checks at run time that it is called on the
//!   owning thread while the context is alive, and returns a typed error
//!   ([`Error::InvalidInput`] for `"context"`, "context used from the wrong
//!   thread", or "context destroyed") instead of touching a dangling handle.
use std::marker::PhantomData;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::{self, ThreadId};

use cust::context::CurrentContext;
use cust::context::legacy::{Context, ContextFlags, UnownedContext};
use cust::device::Device;
use cust::link::Linker;
use cust::memory::{CopyDestination, DeviceBuffer};
use cust::module::Module;
use cust::stream::{Stream, StreamFlags};

use cuda_kernels_gpu::streams::MULT_KER;

use crate::error::{CudaResultExt, Error, Result};
use crate::gpu::init;
use crate::image::Images;
use crate::image::load_module;
use crate::kernel::launch_function;
use crate::streams::{SEED_BLOCK, SEED_GRID, SEED_LAUNCH, check_mult_ker};

const K: &str = "context";

/// A non-primary CUDA context on device 0, created on, bound to and
/// destroyed on one host thread, with the module loaded in it. `!Send` and
/// `!Sync` (see the [module docs](self)).
pub struct ThreadContext {
    // Dropped by hand, module first, with the context current (see `Drop`).
    module: Option<Module>,
    context: Option<Context>,
    device: Device,
    thread: ThreadId,
    alive: Arc<AtomicBool>,
    _not_send: PhantomData<*const ()>,
}

impl ThreadContext {
    /// Creates a new context on device 0 (`cuCtxCreate`) and makes it current
    /// on this thread. No module is loaded yet.
    pub fn new() -> Result<Self> {
        let device = init()?;
        let context =
            Context::create_and_push(ContextFlags::SCHED_AUTO, device).during(K, "cuCtxCreate")?;
        Ok(Self {
            module: None,
            context: Some(context),
            device,
            thread: thread::current().id(),
            alive: Arc::new(AtomicBool::new(true)),
            _not_send: PhantomData,
        })
    }

    /// A new context with `ptx` loaded in it (seed 003 compiles the kernel
    /// in every thread's context for the same reason: a module belongs to
    /// one context).
    pub fn with_module(ptx: &str) -> Result<Self> {
        let mut ctx = Self::new()?;
        ctx.load_module(ptx)?;
        Ok(ctx)
    }

    /// Loads `ptx` into this context (replacing any module loaded before).
    pub fn load_module(&mut self, ptx: &str) -> Result<()> {
        self.bind()?;
        self.module = Some(load_module(ptx)?);
        Ok(())
    }

    /// Loads a cubin made by [`compile_for_device`] into this context
    /// (replacing any module loaded before): no JIT compilation.
    pub fn load_cubin(&mut self, cubin: &[u8]) -> Result<()> {
        self.bind()?;
        self.module = Some(Module::from_cubin(cubin, &[]).during(K, "cuModuleLoadData (cubin)")?);
        Ok(())
    }

    /// The device.
    pub fn device(&self) -> Device {
        self.device
    }

    /// Makes this context current on the calling thread (which is the
    /// owning thread: the type is `!Send`).
    pub fn bind(&self) -> Result<()> {
        self.handle().bind()
    }

    /// A handle that may be sent to other threads; it can bind the context
    /// only on this thread, and only while it is alive.
    pub fn handle(&self) -> ContextHandle {
        ContextHandle {
            raw: self.context.as_ref().map(Context::get_unowned),
            thread: self.thread,
            alive: Arc::clone(&self.alive),
        }
    }

    /// K16 (b): copies `data` to the device and back.
    pub fn copy_roundtrip(&self, data: &[f32]) -> Result<Vec<f32>> {
        if data.is_empty() {
            return Err(Error::invalid(K, "empty array: nothing to copy"));
        }
        self.bind()?;
        let buf = DeviceBuffer::from_slice(data).during(K, "copy to the device")?;
        let mut out = vec![0.0f32; data.len()];
        buf.copy_to(&mut out[..]).during(K, "copy to the host")?;
        Ok(out)
    }

    /// K16 (c): runs `mult_ker<<<1, 64>>>` on `data` in this context (copy in,
    /// kernel on a stream of this context, copy out).
    pub fn mult_ker(&self, data: &[f32]) -> Result<Vec<f32>> {
        const KER: &str = MULT_KER.name();
        check_mult_ker(data.len(), SEED_GRID, SEED_BLOCK)?;
        self.bind()?;
        let module = self.module.as_ref().ok_or_else(|| {
            Error::invalid(
                K,
                "no module is loaded in this context (ThreadContext::load_module)",
            )
        })?;
        let f = module
            .get_function(KER)
            .map_err(|_| Error::not_found(KER))?;
        let stream = Stream::new(StreamFlags::DEFAULT, None).during(KER, "cuStreamCreate")?;
        let stream = &stream;
        let buf = DeviceBuffer::from_slice(data).during(KER, "copy to the device")?;
        // SAFETY: `buf` holds data.len() f32, is used by nothing else, and is freed only
        // after the stream is synchronized below (or leaked if that fails).
        let launched = unsafe {
            let args = (buf.as_device_ptr(), buf.len());
            launch_function(f.to_raw(), MULT_KER, SEED_LAUNCH, stream, args)
        };
        if let Err(e) = stream.synchronize().during(KER, "synchronize") {
            std::mem::forget(buf);
            return Err(launched.err().unwrap_or(e));
        }
        launched?;
        let mut out = vec![0.0f32; data.len()];
        buf.copy_to(&mut out[..]).during(KER, "copy to the host")?;
        Ok(out)
    }

    /// Destroys the context (the seed's `ctx.pop()`), unloading the module
    /// first, and reports what the driver says. Dropping a `ThreadContext`
    /// does the same but cannot report errors.
    pub fn destroy(mut self) -> Result<()> {
        self.teardown()
    }

    fn teardown(&mut self) -> Result<()> {
        let Some(context) = self.context.take() else {
            return Ok(());
        };
        self.alive.store(false, Ordering::Release);
        let bound = CurrentContext::set_current(&context).during(K, "cuCtxSetCurrent");
        let unloaded = match self.module.take() {
            Some(m) if bound.is_ok() => Module::drop(m)
                .map_err(|(e, m)| {
                    // Leak the module rather than unload it in the wrong context.
                    std::mem::forget(m);
                    e
                })
                .during(K, "cuModuleUnload"),
            Some(m) => {
                std::mem::forget(m);
                Ok(())
            }
            None => Ok(()),
        };
        let destroyed = Context::drop(context)
            .map_err(|(e, c)| {
                std::mem::forget(c);
                e
            })
            .during(K, "cuCtxDestroy");
        bound.and(unloaded).and(destroyed)
    }
}

impl Drop for ThreadContext {
    fn drop(&mut self) {
        let _ = self.teardown();
    }
}

/// A `Send + Sync` handle to a [`ThreadContext`], checked at run time.
#[derive(Debug, Clone)]
pub struct ContextHandle {
    raw: Option<UnownedContext>,
    thread: ThreadId,
    alive: Arc<AtomicBool>,
}

impl ContextHandle {
    /// Makes the context current on the calling thread. Errors (typed, and
    /// without calling the driver) when called from any thread but the one
    /// that created the context, or after the context was destroyed.
    pub fn bind(&self) -> Result<()> {
        let here = thread::current().id();
        if here != self.thread {
            return Err(Error::invalid(
                K,
                format!(
                    "context used from the wrong thread: it belongs to {:?}, this is {here:?}",
                    self.thread
                ),
            ));
        }
        // Only the owning thread can destroy the context (ThreadContext is !Send),
        // and this is that thread: the check cannot race with the destruction.
        match &self.raw {
            Some(raw) if self.alive.load(Ordering::Acquire) => {
                CurrentContext::set_current(raw).during(K, "cuCtxSetCurrent")
            }
            _ => Err(Error::invalid(
                K,
                "context destroyed: it cannot be bound any more",
            )),
        }
    }

    /// Whether the context still exists.
    pub fn is_alive(&self) -> bool {
        self.alive.load(Ordering::Acquire)
    }

    /// The thread that owns the context.
    pub fn thread(&self) -> ThreadId {
        self.thread
    }
}

/// K16 (b): create a context on device 0, copy `data` there and back, destroy
/// the context; returns what came back.
pub fn manual_context_roundtrip(data: &[f32]) -> Result<Vec<f32>> {
    let ctx = ThreadContext::new()?;
    let out = ctx.copy_roundtrip(data)?;
    ctx.destroy()?;
    Ok(out)
}

/// JIT-compiles `ptx` once for device 0 into a cubin (`cuLinkCreate`,
/// `cuLinkAddData`, `cuLinkComplete`), in a context of its own that is
/// destroyed afterwards. Loading the cubin in other contexts
/// ([`ThreadContext::load_cubin`]) then skips the JIT step, which for this
/// crate's whole module takes about as long as everything else a thread does.
pub fn compile_for_device(ptx: &str) -> Result<Vec<u8>> {
    // cuLinkAddData reads PTX as a C string: text after a NUL would be
    // silently dropped. Refused like `load_module` does.
    if ptx.contains('\0') {
        return Err(Error::invalid(K, "the PTX text contains a NUL byte"));
    }
    let ctx = ThreadContext::new()?;
    let mut linker = Linker::new().during(K, "cuLinkCreate")?;
    // The driver wants PTX input NUL-terminated.
    let mut text = String::with_capacity(ptx.len() + 1);
    text.push_str(ptx);
    text.push('\0');
    linker.add_ptx(&text).during(K, "cuLinkAddData (PTX)")?;
    let cubin = linker.complete().during(K, "cuLinkComplete")?;
    ctx.destroy()?;
    Ok(cubin)
}

/// K16 (c): one host thread per array; each creates its own context, loads
/// the module, runs `mult_ker` on its array, destroys its context and returns
/// the result through `join`. Results come back in input order.
///
/// As in seed 003, every thread loads the module into its own context (a
/// module belongs to one context), and each loads a cubin: the one of
/// `kernels` that matches the device ([`Images::matching_cubin`], as
/// [`crate::Gpu`] does), else one JIT-compiled once beforehand from the PTX
/// ([`compile_for_device`]), so the threads do not each compile the same PTX.
/// `kernels` is `cuda_kernels::IMAGES`, or PTX text alone.
///
/// Errors before starting any thread when there are no arrays or an array is
/// empty; a thread's error is returned as is, a thread's panic as a typed
/// error.
pub fn threads_mult_ker<'a>(
    kernels: impl Into<Images<'a>>,
    inputs: &[Vec<f32>],
) -> Result<Vec<Vec<f32>>> {
    if inputs.is_empty() {
        return Err(Error::invalid(K, "0 threads: nothing to run"));
    }
    if let Some(i) = inputs.iter().position(|a| a.is_empty()) {
        return Err(Error::invalid(K, format!("array {i} is empty")));
    }
    let kernels = kernels.into();
    let embedded = match kernels.cubins {
        [] => None, // PTX alone: nothing to ask the device
        _ => kernels.matching_cubin(init()?)?.ok(),
    };
    let jitted;
    let cubin = match embedded {
        Some(c) => c.image,
        None => {
            jitted = compile_for_device(kernels.ptx)?;
            &jitted[..]
        }
    };
    thread::scope(|scope| {
        let mut handles = Vec::with_capacity(inputs.len());
        for (k, input) in inputs.iter().enumerate() {
            let handle = thread::Builder::new()
                .name(format!("mult_ker-{k}"))
                .spawn_scoped(scope, move || -> Result<Vec<f32>> {
                    let mut ctx = ThreadContext::new()?;
                    ctx.load_cubin(cubin)?;
                    let out = ctx.mult_ker(input)?;
                    ctx.destroy()?;
                    Ok(out)
                })
                .map_err(|e| Error::invalid(K, format!("cannot start thread {k}: {e}")))?;
            handles.push(handle);
        }
        handles
            .into_iter()
            .enumerate()
            .map(|(k, h)| {
                h.join()
                    .map_err(|_| Error::invalid(K, format!("thread {k} panicked")))?
            })
            .collect()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_thread_inputs_are_typed_errors() {
        assert!(matches!(
            threads_mult_ker("", &[]),
            Err(Error::InvalidInput {
                kernel: "context",
                ..
            })
        ));
        assert!(matches!(
            threads_mult_ker("", &[vec![1.0], vec![]]),
            Err(Error::InvalidInput {
                kernel: "context",
                ..
            })
        ));
    }

    #[test]
    fn handle_is_send_and_sync() {
        fn send_sync<T: Send + Sync>() {}
        send_sync::<ContextHandle>();
    }
}
