//! CUDA contexts made by hand. (b) Create a
//! context on device 0, copy an array there and back, destroy the context
//! (PyCUDA's `make_context()` / `ctx.pop()`). (c) Host threads, each with a
//! context of its own, each running `mult_ker` on its own array.
//!
//! A `ThreadContext` cannot leave the thread that made it (it is `!Send`),
//! so "a context used from the wrong thread" is a compile-time error; see
//! the docs of `cuda_kernels::contexts`.
//!
//! `cargo run --release --example 16_contexts`
use cuda_kernels::contexts::{ThreadContext, threads_mult_ker};
use cuda_kernels::ndarray::ArrayView1;
use cuda_kernels::streams::{mult_ker_cpu, randn_arrays};

fn main() -> Result<(), cuda_kernels::Error> {
    // (b) No `cuda_kernels::gpu()` here: this context is not the primary one.
    let ctx = ThreadContext::new()?; // cuCtxCreate, current on this thread
    let sent = [1.0f32, 2.0, 3.0];
    let back = ctx.copy_roundtrip(&sent)?;
    ctx.destroy()?; // cuCtxDestroy, with the driver's verdict
    println!("manual context: sent {sent:?}, got back {back:?}");
    assert_eq!(back, sent);

    // (c) The seed runs 10 threads on 2^20 elements each. Each thread loads
    // the embedded cubin for this GPU (or, where none matches, the PTX
    // JIT-compiled once) into its own context.
    let inputs = randn_arrays(4, 1 << 16, 15);
    let outputs = threads_mult_ker(cuda_kernels::IMAGES, &inputs)?;
    for (output, input) in outputs.iter().zip(&inputs) {
        assert_eq!(*output, mult_ker_cpu(ArrayView1::from(input)).to_vec());
    }
    println!(
        "{} threads, one context each: every output equals the CPU reference",
        outputs.len()
    );
    Ok(())
}
