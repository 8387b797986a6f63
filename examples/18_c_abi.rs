//! The C ABI library `libcuda_kernels_capi.so`
//! (crate `capi/`, header `capi/include/cuda_kernels.h`), opened at run time
//! with `dlopen`, as a C program does, and its `launch_hello` and
//! `launch_mandelbrot` called; the graph is checked against the CPU.
//!
//! The same library from other languages: `examples/python/mandelbrot_ctypes.py`
//! (ctypes and NumPy) and `examples/c/hello_dlopen.c`.
//!
//! `cargo build -p cuda-kernels-capi && cargo run --example 18_c_abi`
//! (or set `CUDA_KERNELS_CAPI` to the library's path)
use cuda_kernels::mandelbrot::c_abi::{CAbiLibrary, LIBRARY_NAME};
use cuda_kernels::mandelbrot::{MandelbrotParams, mandelbrot_cpu};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let Some(path) = CAbiLibrary::find() else {
        return Err(format!(
            "{LIBRARY_NAME} not found: build it with `cargo build -p cuda-kernels-capi` \
             or set CUDA_KERNELS_CAPI"
        )
        .into());
    };
    let lib = CAbiLibrary::open(&path)?; // dlopen + dlsym
    println!("loaded {}", lib.path().display());

    lib.hello()?; // launch_hello: "Hello World From GPU!" from three threads

    let p = MandelbrotParams {
        breadth: 256,
        ..MandelbrotParams::default()
    };
    let lattice = p.lattice();
    let graph = lib.mandelbrot(lattice.view(), p.max_iters, p.upper_bound)?;
    assert_eq!(
        graph,
        mandelbrot_cpu(lattice.view(), p.max_iters, p.upper_bound)?
    );
    println!("launch_mandelbrot through the C ABI: the same graph as the CPU");
    Ok(()) // dropping `lib` releases its GPU (cuda_kernels_reset) and dlcloses it
}
