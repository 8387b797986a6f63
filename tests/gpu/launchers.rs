//! Every public launcher that takes device memory, given memory of another
//! device and sizes past what its kernel indexes: each must refuse with the
//! typed error naming the kernel and the argument (`Error::WrongDevice` for
//! foreign memory, `Error::InvalidInput` whose reason names the size), before
//! any kernel sees a pointer, and leave the `Gpu` usable.
//!
//! The foreign memory is a simulated device's: on the simulator another
//! simulated device (two devices), on a GPU a simulated one (its identity is
//! not the GPU's). A launcher that forgot a check would hand its kernel a
//! pointer of the other device: on the simulator the sort wrote device 1's
//! values this way (issue 40, item 5).
use cuda_kernels::gemm_wgmma::WgmmaGemmExt;
use cuda_kernels::histogram::histogram_even_on_device;
use cuda_kernels::matrices::kernels::sum;
use cuda_kernels::matrices::{GemmShape, MatmulKernel, Op};
use cuda_kernels::peer::copy_between;
use cuda_kernels::prelude::*;
use cuda_kernels::reduce::Sum;
use cuda_kernels::scan::{self, ScanKind, TileScratch};
use cuda_kernels::select::{self, ByFlags, NonZero, SelectScratch};
use cuda_kernels::sort::{Key, MAX_KEYS, Order, RadixSort};
use cuda_kernels::{DeviceId, Gpu};
use half::bf16;

/// The device twin of bf16 (what the GEMM buffers hold).
type Bf16Dev = <bf16 as cuda_kernels::matrices::GemmInput>::Dev;
use libtest_mimic::{Failed, Trial};

use crate::common::fail;
use crate::support::cases::{Cases, Want, m};

/// The trials of this family.
pub fn trials() -> Vec<Trial> {
    vec![kernel!(foreign_memory_and_overflowing_sizes_are_refused)]
}

/// A device other than `gpu`'s: simulated device 1 (2 when `gpu` is
/// simulated device 1).
fn other_device(gpu: &Gpu) -> Result<Gpu, Failed> {
    let ordinal = if gpu.device_id() == (DeviceId::Simulator { ordinal: 1 }) {
        2
    } else {
        1
    };
    let other = Gpu::simulated_device(ordinal).map_err(fail)?;
    if other.device_id() == gpu.device_id() {
        return Err(format!("{} is not another device", other.label()).into());
    }
    Ok(other)
}

fn foreign_memory_and_overflowing_sizes_are_refused(gpu: &Gpu) -> Result<(), Failed> {
    let other = other_device(gpu)?;
    let mut t = Cases::new("launchers");
    elementary(gpu, &other, &mut t).map_err(fail)?;
    matrices(gpu, &other, &mut t).map_err(fail)?;
    gemm(gpu, &other, &mut t).map_err(fail)?;
    sorts::<u32>(gpu, &other, &mut t).map_err(fail)?;
    sorts::<i32>(gpu, &other, &mut t).map_err(fail)?;
    sorts::<f32>(gpu, &other, &mut t).map_err(fail)?;
    sorts::<u64>(gpu, &other, &mut t).map_err(fail)?;
    sorts::<i64>(gpu, &other, &mut t).map_err(fail)?;
    sorts::<f64>(gpu, &other, &mut t).map_err(fail)?;
    collectives(gpu, &other, &mut t).map_err(fail)?;
    if !gpu.is_simulated() {
        cublas(gpu, &other, &mut t);
    }
    // Nothing ran with a bad pointer: the Gpu still computes.
    t.works("the Gpu is usable after every refusal", || {
        let a = gpu.to_device(&[1.5f32, -2.0, 3.0]).map_err(m)?;
        let b = gpu.to_device(&[2.0f32, 4.0, -1.0]).map_err(m)?;
        let mut c = gpu.zeroed::<f32>(3).map_err(m)?;
        gpu.multiply_on_device(&a, &b, &mut c).map_err(m)?;
        gpu.synchronize("multiply").map_err(m)?;
        let got = c.to_vec().map_err(m)?;
        if got == [3.0, -8.0, -3.0] {
            Ok(())
        } else {
            Err(format!("multiply after the refusals gave {got:?}"))
        }
    });
    t.finish()
}

/// multiply, vector_sum_i32, elementwise, mult_ker, mandelbrot (both
/// launchers), peer copies.
fn elementary(gpu: &Gpu, other: &Gpu, t: &mut Cases) -> cuda_kernels::Result<()> {
    let (a, x) = (gpu.zeroed::<f32>(64)?, other.zeroed::<f32>(64)?);
    let mut c = gpu.zeroed::<f32>(64)?;
    let mut xc = other.zeroed::<f32>(64)?;
    t.refuse(
        "multiply: a foreign",
        Want::Foreign("multiply", "argument 0"),
        || gpu.multiply_on_device(&x, &a, &mut c),
    );
    t.refuse(
        "multiply: b foreign",
        Want::Foreign("multiply", "argument 1"),
        || gpu.multiply_on_device(&a, &x, &mut c),
    );
    t.refuse(
        "multiply: c foreign",
        Want::Foreign("multiply", "argument 2"),
        || gpu.multiply_on_device(&a, &a, &mut xc),
    );
    let (ai, xi) = (gpu.zeroed::<i32>(64)?, other.zeroed::<i32>(64)?);
    let mut xres = other.zeroed::<i32>(64)?;
    t.refuse(
        "vector_sum_i32: res foreign",
        Want::Foreign("vector_sum_i32", "argument 2"),
        || gpu.vector_sum_i32_on_device(&ai, &ai, &mut xres),
    );
    t.refuse(
        "vector_sum_i32: a foreign",
        Want::Foreign("vector_sum_i32", "argument 0"),
        || gpu.vector_sum_i32_on_device(&xi, &ai, &mut gpu.zeroed::<i32>(64)?),
    );
    let mut ci = gpu.zeroed::<i32>(64)?;
    t.refuse(
        "elementwise sum: an input foreign",
        Want::Foreign("elementwise_sum_i32", "an input"),
        || gpu.elementwise_on_device::<sum, i32>(&[&ai, &xi], &mut [&mut ci], &[]),
    );
    t.refuse(
        "elementwise sum: an output foreign",
        Want::Foreign("elementwise_sum_i32", "an output"),
        || gpu.elementwise_on_device::<sum, i32>(&[&ai, &ai], &mut [&mut xres], &[]),
    );
    t.refuse(
        "mult_ker: data foreign",
        Want::Foreign("mult_ker", "argument 0"),
        || gpu.mult_ker_on_device(&mut xc, 1, 64),
    );
    t.refuse(
        "mult_ker: a grid of u32::MAX blocks",
        Want::InvalidNaming("mult_ker", "grid"),
        || gpu.mult_ker_on_device(&mut c, u32::MAX, 64),
    );
    // An 8 × 8 Mandelbrot graph.
    let lattice = gpu.zeroed::<f32>(8)?;
    let x_lattice = other.zeroed::<f32>(8)?;
    t.refuse(
        "mandelbrot: lattice foreign",
        Want::Foreign("mandelbrot_ker", "argument 0"),
        || gpu.mandelbrot_on_device(&x_lattice, &mut c, 16, 2.0, 64),
    );
    t.refuse(
        "mandelbrot: graph foreign",
        Want::Foreign("mandelbrot_ker", "argument 1"),
        || gpu.mandelbrot_on_device(&lattice, &mut xc, 16, 2.0, 64),
    );
    t.refuse(
        "mandelbrot_rows: graph foreign",
        Want::Foreign("mandelbrot_rows", "argument 1"),
        || gpu.mandelbrot_rows_on_device(&lattice, &mut xc.index_mut(..16), 2..4, 16, 2.0, 64),
    );
    t.refuse(
        "mandelbrot_rows: rows 0..usize::MAX",
        Want::InvalidNaming("mandelbrot_rows", "rows"),
        || gpu.mandelbrot_rows_on_device(&lattice, &mut c, 0..usize::MAX, 16, 2.0, 64),
    );
    t.refuse(
        "copy_between: src named for the wrong Gpu",
        Want::Foreign("peer copy", "src"),
        || copy_between(gpu, &x, other, &mut xc, None),
    );
    t.refuse(
        "copy_between: dst named for the wrong Gpu",
        Want::Foreign("peer copy", "dst"),
        || copy_between(gpu, &a, gpu, &mut xc, None),
    );
    Ok(())
}

/// doubles_matrix and the matmul kernels (naive, tiled).
fn matrices(gpu: &Gpu, other: &Gpu, t: &mut Cases) -> cuda_kernels::Result<()> {
    let mut a = gpu.zeroed::<f32>(64)?;
    let mut x = other.zeroed::<f32>(64)?;
    t.refuse(
        "doubles_matrix: a foreign",
        Want::Foreign("doubles_matrix", "argument 0"),
        || gpu.doubles_matrix_on_device(&mut x, 8, 8),
    );
    t.refuse(
        "doubles_matrix: rows × cols overflows",
        Want::InvalidNaming("doubles_matrix", "element count"),
        || gpu.doubles_matrix_on_device(&mut a, usize::MAX, 2),
    );
    let (b, mut c) = (gpu.zeroed::<f32>(64)?, gpu.zeroed::<f32>(64)?);
    for kernel in [MatmulKernel::Naive, MatmulKernel::Tiled] {
        let k = kernel.entry();
        t.refuse(&format!("{k}: a foreign"), Want::Foreign(k, "a"), || {
            gpu.matmul_on_device(kernel, &x, &b, &mut c, 8, 8, 8)
        });
        t.refuse(&format!("{k}: b foreign"), Want::Foreign(k, "b"), || {
            gpu.matmul_on_device(kernel, &b, &x, &mut c, 8, 8, 8)
        });
        t.refuse(&format!("{k}: c foreign"), Want::Foreign(k, "c"), || {
            gpu.matmul_on_device(kernel, &b, &b, &mut x, 8, 8, 8)
        });
        t.refuse(
            &format!("{k}: m = 2^32"),
            Want::InvalidNaming(k, "m"),
            || gpu.matmul_on_device(kernel, &b, &b, &mut c, 1 << 32, 8, 8),
        );
        t.refuse(
            &format!("{k}: m · k overflows"),
            Want::InvalidNaming(k, "element count"),
            || gpu.matmul_on_device(kernel, &b, &b, &mut c, usize::MAX / 2, 4, 1),
        );
    }
    Ok(())
}

/// The GEMM family (bf16 in, f32 out) and the wgmma plan.
fn gemm(gpu: &Gpu, other: &Gpu, t: &mut Cases) -> cuda_kernels::Result<()> {
    let k: &'static str = <f32 as cuda_kernels::matrices::GemmOutput<bf16>>::MMA.name();
    let shape = GemmShape::dense(16, 16, 16);
    let a = gpu.zeroed::<Bf16Dev>(256)?;
    let x = other.zeroed::<Bf16Dev>(256)?;
    let mut c = gpu.zeroed::<f32>(256)?;
    let mut xc = other.zeroed::<f32>(256)?;
    let on = |a, b, c: &mut _, shape: &GemmShape| {
        gpu.gemm_on_device::<bf16, f32>(shape, 1.0, a, b, 0.0, c)
    };
    t.refuse("gemm: a foreign", Want::Foreign(k, "a"), || {
        on(&x, &a, &mut c, &shape)
    });
    t.refuse("gemm: b foreign", Want::Foreign(k, "b"), || {
        on(&a, &x, &mut c, &shape)
    });
    t.refuse("gemm: c foreign", Want::Foreign(k, "c"), || {
        on(&a, &a, &mut xc, &shape)
    });
    let with = |f: &dyn Fn(&mut GemmShape)| {
        let mut s = shape;
        f(&mut s);
        s
    };
    for (case, s, word) in [
        ("lda = usize::MAX", with(&|s| s.lda = usize::MAX), "lda"),
        ("ldb = 2^31", with(&|s| s.ldb = 1 << 31), "ldb"),
        ("ldc = 2^32 + 16", with(&|s| s.ldc = (1 << 32) + 16), "ldc"),
        ("m = 2^31", with(&|s| s.m = 1 << 31), "m"),
        (
            "k = 2^40",
            with(&|s| {
                s.k = 1 << 40;
                s.lda = 1 << 40;
            }),
            "k = ",
        ),
        (
            "batches · stride_c overflows",
            with(&|s| {
                s.batches = 2;
                s.stride_c = usize::MAX;
            }),
            "overflow",
        ),
        ("batches = 2^16", with(&|s| s.batches = 1 << 16), "batches"),
    ] {
        t.refuse(
            &format!("gemm: {case}"),
            Want::InvalidNaming(k, word),
            || on(&a, &a, &mut c, &s),
        );
    }
    // The wgmma plan (NT, the layout every input type has).
    let nt = GemmShape::with_ops(64, 64, 64, Op::N, Op::T);
    let wk: &'static str = "gemm_wgmma_bf16_f32_nt";
    let a4 = gpu.zeroed::<Bf16Dev>(64 * 64)?;
    let x4 = other.zeroed::<Bf16Dev>(64 * 64)?;
    let mut c4 = gpu.zeroed::<f32>(64 * 64)?;
    let mut xc4 = other.zeroed::<f32>(64 * 64)?;
    let plan = |a, b, c: &mut _, s: &GemmShape| {
        gpu.gemm_wgmma_plan::<bf16, f32>(s, 1.0, a, b, 0.0, c)
            .map(|_| ())
    };
    t.refuse("gemm_wgmma plan: a foreign", Want::Foreign(wk, "a"), || {
        plan(&x4, &a4, &mut c4, &nt)
    });
    t.refuse("gemm_wgmma plan: b foreign", Want::Foreign(wk, "b"), || {
        plan(&a4, &x4, &mut c4, &nt)
    });
    t.refuse("gemm_wgmma plan: c foreign", Want::Foreign(wk, "c"), || {
        plan(&a4, &a4, &mut xc4, &nt)
    });
    let wide = GemmShape {
        ldc: usize::MAX,
        ..nt
    };
    let want = Want::InvalidNaming(wk, "ldc");
    t.refuse("gemm_wgmma plan: ldc = usize::MAX", want, || {
        plan(&a4, &a4, &mut c4, &wide)
    });
    Ok(())
}

/// The radix sort of `K` keys: keys, values, indices and the sort's own
/// memory of another device, and a capacity past its limit.
fn sorts<K: Key + Default>(gpu: &Gpu, other: &Gpu, t: &mut Cases) -> cuda_kernels::Result<()> {
    let k: &'static str = K::ONESWEEP.name();
    let n = 100;
    let mut keys = gpu.zeroed::<K>(n)?;
    let mut values = gpu.zeroed::<u32>(n)?;
    let mut x_keys = other.zeroed::<K>(n)?;
    let mut x_values = other.zeroed::<u32>(n)?;
    let mut sorter = RadixSort::<K>::new(gpu, n, true)?;
    let o = Order::Ascending;
    t.refuse(
        &format!("{k} sort: keys foreign"),
        Want::Foreign(k, "keys"),
        || sorter.sort(gpu, &mut x_keys, o),
    );
    t.refuse(
        &format!("{k} sort_pairs: values foreign"),
        Want::Foreign(k, "values"),
        || sorter.sort_pairs(gpu, &mut keys, &mut x_values, o),
    );
    t.refuse(
        &format!("{k} argsort: indices foreign"),
        Want::Foreign(k, "indices"),
        || sorter.argsort(gpu, &mut keys, &mut x_values, o),
    );
    let mut x_sorter = RadixSort::<K>::new(other, n, true)?;
    t.refuse(
        &format!("{k} sort_pairs: the sorter's memory foreign"),
        Want::Foreign(k, "the sort's memory (RadixSort)"),
        || x_sorter.sort_pairs(gpu, &mut keys, &mut values, o),
    );
    t.refuse(
        &format!("{k} RadixSort::new: MAX_KEYS + 1"),
        Want::InvalidNaming(k, "keys"),
        || RadixSort::<K>::new(gpu, MAX_KEYS + 1, false).map(|_| ()),
    );
    // The foreign values were not written.
    t.works(&format!("{k}: the foreign values are untouched"), || {
        let got = x_values.to_vec().map_err(m)?;
        if got.iter().all(|&v| v == 0) {
            Ok(())
        } else {
            Err("a refused sort wrote the other device's values".into())
        }
    });
    Ok(())
}

/// The histogram, scan, select and reduction launchers.
fn collectives(gpu: &Gpu, other: &Gpu, t: &mut Cases) -> cuda_kernels::Result<()> {
    let n = 1000;
    let (input, x_input) = (gpu.zeroed::<u32>(n)?, other.zeroed::<u32>(n)?);
    let (mut output, mut x_output) = (gpu.zeroed::<u32>(n)?, other.zeroed::<u32>(n)?);
    let hk = "histogram_even_u32";
    t.refuse(
        "histogram: samples foreign",
        Want::Foreign(hk, "samples"),
        || histogram_even_on_device::<u32>(gpu, &x_input, &mut output.index_mut(..16), 0, 16),
    );
    t.refuse(
        "histogram: counts foreign",
        Want::Foreign(hk, "counts"),
        || histogram_even_on_device::<u32>(gpu, &input, &mut x_output.index_mut(..16), 0, 16),
    );
    let sk: &'static str = <scan::Sum as scan::ScanKernel<u32>>::ENTRY;
    let mut scratch = TileScratch::<u32>::new(gpu, n)?;
    let mut x_scratch = TileScratch::<u32>::new(other, n)?;
    let scan = |i: &_, o: &mut _, s: &mut _| {
        scan::scan_on_device::<scan::Sum, u32>(gpu, i, o, ScanKind::Inclusive, None, s)
    };
    t.refuse("scan: input foreign", Want::Foreign(sk, "input"), || {
        scan(&x_input, &mut output, &mut scratch)
    });
    t.refuse("scan: output foreign", Want::Foreign(sk, "output"), || {
        scan(&input, &mut x_output, &mut scratch)
    });
    t.refuse(
        "scan: scratch foreign",
        Want::Foreign(sk, "scratch"),
        || scan(&input, &mut output, &mut x_scratch),
    );
    let ek: &'static str = <NonZero as select::SelectKernel<u32>>::ENTRY;
    let mut sel = SelectScratch::new(gpu, n)?;
    let mut x_sel = SelectScratch::new(other, n)?;
    t.refuse("select: input foreign", Want::Foreign(ek, "input"), || {
        select::select_on_device::<NonZero, u32>(gpu, &x_input, None, &mut output, &mut sel)
    });
    t.refuse(
        "select: output foreign",
        Want::Foreign(ek, "output"),
        || select::select_on_device::<NonZero, u32>(gpu, &input, None, &mut x_output, &mut sel),
    );
    t.refuse(
        "select: scratch foreign",
        Want::Foreign(ek, "scratch"),
        || select::select_on_device::<NonZero, u32>(gpu, &input, None, &mut output, &mut x_sel),
    );
    let fk: &'static str = <ByFlags as select::SelectKernel<u32>>::ENTRY;
    let x_flags = other.zeroed::<u8>(n)?;
    t.refuse(
        "select by flags: flags foreign",
        Want::Foreign(fk, "flags"),
        || {
            select::select_on_device::<ByFlags, u32>(
                gpu,
                &input,
                Some(&x_flags),
                &mut output,
                &mut sel,
            )
        },
    );
    let rk: &'static str = <Sum as cuda_kernels::reduce::ReduceKernel<i32, i32>>::ENTRY;
    let (ri, x_ri) = (gpu.zeroed::<i32>(n)?, other.zeroed::<i32>(n)?);
    let mut rs = gpu.reduce_scratch::<i32>()?;
    let mut x_rs = other.reduce_scratch::<i32>()?;
    t.refuse(
        "reduce: input foreign",
        Want::Foreign(rk, "argument 0"),
        || gpu.reduce_on_device::<Sum, i32>(&x_ri, None, &mut rs),
    );
    t.refuse(
        "reduce: scratch foreign",
        Want::Foreign(rk, "scratch"),
        || gpu.reduce_on_device::<Sum, i32>(&ri, None, &mut x_rs),
    );
    t.refuse(
        "reduce: a grid of u32::MAX blocks",
        Want::InvalidNaming(rk, "grid"),
        || gpu.reduce_on_device_shaped::<Sum, i32>(&ri, None, &mut rs, u32::MAX, 256),
    );
    Ok(())
}

/// cuBLAS (a GPU's alone): a foreign operand and an m past c_int.
fn cublas(gpu: &Gpu, other: &Gpu, t: &mut Cases) {
    use cuda_kernels::cublas::Cublas;
    let made = Cublas::find()
        .map_err(|why| why.to_string())
        .and_then(|lib| Cublas::new(gpu, lib).map_err(|e| e.to_string()));
    let cublas = match made {
        Ok(c) => c,
        Err(why) => {
            t.works("cuBLAS is there", || Err(format!("cuBLAS missing: {why}")));
            return;
        }
    };
    let buffers = (|| {
        Ok::<_, cuda_kernels::Error>((
            gpu.zeroed::<f32>(64)?,
            other.zeroed::<f32>(64)?,
            gpu.zeroed::<f32>(64)?,
        ))
    })();
    let Ok((a, x, mut c)) = buffers else {
        t.works("cuBLAS buffers", || Err("allocation failed".into()));
        return;
    };
    let sk = "cublasSgemm_v2";
    t.refuse("cuBLAS sgemm: a foreign", Want::Foreign(sk, "a"), || {
        cublas.sgemm_row_major(&x, &a, &mut c, 8, 8, 8)
    });
    t.refuse("cuBLAS sgemm: b foreign", Want::Foreign(sk, "b"), || {
        cublas.sgemm_row_major(&a, &x, &mut c, 8, 8, 8)
    });
    t.refuse(
        "cuBLAS sgemm: m = 2^31",
        Want::InvalidNaming(sk, "m"),
        || cublas.sgemm_row_major(&a, &a, &mut c, 1 << 31, 8, 8),
    );
    let ek = "cublasGemmStridedBatchedEx";
    let shape = GemmShape::dense(8, 8, 8);
    t.refuse("cuBLAS gemm_ex: c foreign", Want::Foreign(ek, "c"), || {
        let mut xc = other.zeroed::<f32>(64)?;
        cublas.gemm_ex::<f32, f32>(&shape, 1.0, &a, &a, 0.0, &mut xc)
    });
    t.refuse(
        "cuBLAS gemm_ex: lda = 2^32",
        Want::InvalidNaming(ek, "lda"),
        || {
            cublas.gemm_ex::<f32, f32>(
                &GemmShape {
                    lda: 1 << 32,
                    ..shape
                },
                1.0,
                &a,
                &a,
                0.0,
                &mut c,
            )
        },
    );
}
