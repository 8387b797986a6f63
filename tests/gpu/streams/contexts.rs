//! Contexts made by hand and one per host thread, the wrong-thread error, and
//! the contexts' refusals.
use super::*;

pub(super) fn manual_context_round_trip(_gpu: &Gpu) -> Result<(), Failed> {
    let back = manual_context_roundtrip(&[1.0, 2.0, 3.0]).map_err(fail)?;
    ensure(back == [1.0, 2.0, 3.0], || format!("got {back:?}"))
}

pub(super) fn ten_threads_with_own_contexts(_gpu: &Gpu) -> Result<(), Failed> {
    let inputs = randn_arrays(10, 1 << 20, 11);
    let outputs = threads_mult_ker(cuda_kernels::IMAGES, &inputs).map_err(fail)?;
    ensure(outputs.len() == 10, || "ten results".into())?;
    for (k, (o, i)) in outputs.iter().zip(&inputs).enumerate() {
        ensure(check_mult_ker_output(i, o).is_none(), || {
            format!("thread {k} differs from the CPU reference")
        })?;
    }
    Ok(())
}

pub(super) fn wrong_thread_is_a_typed_error(_gpu: &Gpu) -> Result<(), Failed> {
    let (to_main, from_thread) = mpsc::channel();
    let (to_thread, from_main) = mpsc::channel::<()>();
    let worker = std::thread::spawn(move || -> Result<(), String> {
        let ctx = ThreadContext::new().map_err(|e| e.to_string())?;
        let handle = ctx.handle();
        to_main.send(handle.clone()).map_err(|e| e.to_string())?;
        // Wait until the main thread has tried to use the context.
        from_main.recv().map_err(|e| e.to_string())?;
        handle.bind().map_err(|e| format!("owner thread: {e}"))?;
        ctx.copy_roundtrip(&[4.0]).map_err(|e| e.to_string())?;
        ctx.destroy().map_err(|e| e.to_string())?;
        let r = reason(handle.bind());
        if !r.contains("destroyed") {
            return Err(format!("bind after destroy: {r}"));
        }
        Ok(())
    });
    let handle = from_thread.recv().map_err(fail)?;
    let r = reason(handle.bind());
    let _ = to_thread.send(());
    ensure(r.contains("wrong thread"), || format!("main thread: {r}"))?;
    worker
        .join()
        .map_err(|_| fail("worker panicked"))?
        .map_err(fail)?;
    ensure(!handle.is_alive(), || "handle still alive".into())
}

pub(super) fn thread_context_rebinds_after_gpu(gpu: &Gpu) -> Result<(), Failed> {
    let data = randn_arrays(1, 5000, 21).remove(0);
    let ctx = ThreadContext::with_module(cuda_kernels::PTX).map_err(fail)?;
    // Using the primary context in between makes it current on this thread.
    let via_gpu = gpu
        .mult_ker(Array1::from(data.clone()).view(), 1, 64)
        .map_err(fail)?;
    let via_ctx = ctx.mult_ker(&data).map_err(fail)?;
    ctx.destroy().map_err(fail)?;
    let want = mult_ker_cpu(ArrayView1::from(&data)).to_vec();
    ensure(via_gpu.to_vec() == want && via_ctx == want, || {
        "outputs differ from the CPU reference".into()
    })
}

pub(super) fn context_refusals(_gpu: &Gpu) -> Result<(), Failed> {
    let mut t = Cases::new("streams::context_refusals");
    let k = "context";
    t.refuse("manual_context_roundtrip: empty", Want::Invalid(k), || {
        manual_context_roundtrip(&[])
    });
    t.works("manual_context_roundtrip: one element", || {
        equal(
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
                equal("back", ctx.copy_roundtrip(&[1.0]).map_err(m)?, vec![1.0])
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
                equal("out", ctx.mult_ker(&[0.125]).map_err(m)?, vec![0.125])
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
    // (No arrays, an empty array and a PTX with a NUL are in `check_refusals`.)
    t.refuse("threads_mult_ker: corrupt PTX", Want::Cuda(k), || {
        threads_mult_ker(PTX_GARBAGE, &[vec![1.0]])
    });
    t.refuse(
        "threads_mult_ker: PTX without mult_ker",
        Want::NotFound("mult_ker"),
        || threads_mult_ker(PTX_WITHOUT_KERNEL, &[vec![1.0]]),
    );
    t.works("threads_mult_ker: one thread, one element", || {
        equal(
            "out",
            threads_mult_ker(PTX, &[vec![9.0]]).map_err(m)?,
            vec![vec![9.0]],
        )
    });
    t.finish()
}
