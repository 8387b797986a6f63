//! `reduce_*` (Numba's `@cuda.reduce`): a generic parallel
//! reduction with an associative, commutative binary operation.
//!
//! Numba turns `def sum_reduce(a, b): return a + b` into a reduction kernel;
//! here an operation is a type implementing [`ReduceOp`] (an identity and a
//! `combine` function, plain Rust shared by the GPU kernel and the CPU
//! reference), and [`reduce_kernels!`](crate::reduce_kernels) instantiates the one generic kernel
//! body for it, one PTX entry point per element type, named
//! `reduce_<op>_<type>`:
//!
//! | op | identity | combine | entry points |
//! |---|---|---|---|
//! | [`Sum`] | 0 | `+` (wrapping for integers) | `reduce_sum_{i32,i64,f32,f64,f16,bf16}` |
//! | [`Product`] | 1 | `*` (wrapping for integers) | `reduce_product_{i32,i64,f32,f64}` |
//! | [`Min`] | `MAX` / `+∞` (sentinel) | `min` (floats: `f32::min`, NaN-ignoring) | `reduce_min_{i32,i64,f32,f64,f16,bf16}` |
//! | [`Max`] | `MIN` / `−∞` (sentinel) | `max` (floats: `f32::max`, NaN-ignoring) | `reduce_max_{i32,i64,f32,f64,f16,bf16}` |
//!
//! The 16-bit floats (`f16 => f32` in [`reduce_kernels!`](crate::reduce_kernels)) are
//! read as they are stored, eight to a 16-byte vector, and combined in f32
//! (each element widened exactly): the sum is accumulated and returned in
//! f32; min and max return an f32 that is one of the inputs (or the
//! identity `±∞`), so it converts back to the input type exactly.
//! | [`Xor`] (the user-declared example) | 0 | `^` | `reduce_xor_{i32,i64}` |
//!
//! # Declaring another operation
//! Write the operation once, in this crate (the kernels are compiled from
//! it), and instantiate it for the types it supports; the host's generic
//! `Gpu::reduce::<Op, T>` then works for it with no host code:
//! ```
//! use cuda_kernels_gpu::reduce::ReduceOp;
//!
//! /// Bitwise OR of all elements.
//! #[derive(Debug, Clone, Copy, Default)]
//! pub struct BitOr;
//! impl ReduceOp<i32> for BitOr {
//!     const NAME: &'static str = "bit_or";
//!     fn identity() -> i32 { 0 }
//!     fn combine(a: i32, b: i32) -> i32 { a | b }
//! }
//! // Emits the entry point `reduce_bit_or_i32` (on nvptx64) and the
//! // host-side mapping `BitOr: ReduceKernel<i32>` (whose handle the
//! // simulator runs on the host).
//! cuda_kernels_gpu::reduce_kernels!(BitOr, "bit_or": i32);
//! # use cuda_kernels_gpu::reduce::ReduceKernel;
//! # assert_eq!(<BitOr as ReduceKernel<i32>>::ENTRY, "reduce_bit_or_i32");
//! ```
//! The invocation also lists the entry names (`REDUCE_KERNELS`), which join
//! the crate's generated list (the offline PTX test then checks that they
//! were built). [`Xor`] below is
//! declared exactly this way. A kernel crate of your own does the same with
//! its own types (`examples/downstream`'s `MaxAbs`), and its host crate
//! launches them on its own module with the catalogue's `Gpu::reduce::<Op,
//! T>`, or with the handle [`ReduceKernel::KERNEL`] on the runtime alone
//! (`examples/downstream/app/src/families.rs`). An entry name
//! used twice in one kernel crate is a build error (rustc: "symbol
//! `reduce_…` is already defined").
//!
//! # The algorithm (one launch)
//! 1. Each thread combines its share of the input in registers: a grid-stride
//!    loop over 16-byte vectors read with `ld.global.nc.v4` (four vectors in
//!    flight per iteration, into four accumulators), the elements before the
//!    first 16-byte boundary and after the last full vector handled by the
//!    first threads of the grid one element each.
//! 2. Each block combines its threads' values: a `shfl.sync.down` tree per
//!    warp, one shared-memory slot per warp, a second shuffle tree in warp 0
//!    (the device crate's block collective, `TempStorage::reduce`); thread 0
//!    writes the block's partial result.
//! 3. Last block done: thread 0 fences (`membar.gl`) and takes a ticket from
//!    a global atomic counter; the block that draws the last ticket fences
//!    again, reads every block's partial through L2 (`ld.global.cg`),
//!    combines them the same way, combines the initial value, writes the
//!    result and resets the counter to 0 for the next launch.
//!
//! # Order of the floating-point operations
//! The GPU does not combine left to right, so float sums and products differ
//! from the CPU reference's sequential fold by rounding. With `T` threads in
//! the grid, thread `t` (global index) accumulates vectors `t, t + T,
//! t + 2T, …` in four interleaved accumulators (each vector's elements
//! combined pairwise first), then the accumulators pairwise; the rest is a
//! balanced tree: 32 lanes (depth 5), up to 32 warps (depth ≤ 5), up to a few
//! thousand block partials (strided over the last block's threads, then the
//! same two trees). The depth of the whole sum is therefore about
//! `n / (T · lanes_per_vector) + 2 · log2(T) + 4`, far below the `n` of a
//! sequential sum; the host's tolerance for float sums is derived from it.
//!
//! # Requirements on an operation
//! `combine` must be associative and commutative (the GPU regroups and
//! reorders freely; Numba's `@cuda.reduce` has the same rule), and
//! `identity()` neutral: `combine(identity(), x) == x` for every `x` the
//! input can hold. Integer sums and products wrap on overflow, identically on
//! the GPU and the CPU (the wrapping ring is associative and commutative, so
//! integer results are exact whatever the order).

// The operation trait and the built-in sum, min and max are the device
// crate's, shared with its warp and block collectives and the scan family.
pub use crate::device::collectives::{Max, Min, ReduceOp, Sum};

/// Product: identity 1; integers wrap on overflow (like the CPU reference).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Product;

/// Bitwise exclusive or, for integers: the example of a user-declared
/// operation (see the [module docs](self)); identity 0.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Xor;

macro_rules! product_ops {
    ($($t:ty),*) => {$(
        impl ReduceOp<$t> for Product {
            const NAME: &'static str = "product";
            #[inline(always)]
            fn identity() -> $t { 1 }
            #[inline(always)]
            fn combine(a: $t, b: $t) -> $t { a.wrapping_mul(b) }
        }
    )*};
}
product_ops!(i32, i64);

macro_rules! float_product_ops {
    ($($t:ident),*) => {$(
        impl ReduceOp<$t> for Product {
            const NAME: &'static str = "product";
            #[inline(always)]
            fn identity() -> $t { 1.0 }
            #[inline(always)]
            fn combine(a: $t, b: $t) -> $t { a * b }
        }
    )*};
}
float_product_ops!(f32, f64);

// The user-declared example: written exactly as the module docs tell a user
// to declare an operation.
impl ReduceOp<i32> for Xor {
    const NAME: &'static str = "xor";
    #[inline(always)]
    fn identity() -> i32 {
        0
    }
    #[inline(always)]
    fn combine(a: i32, b: i32) -> i32 {
        a ^ b
    }
}
impl ReduceOp<i64> for Xor {
    const NAME: &'static str = "xor";
    #[inline(always)]
    fn identity() -> i64 {
        0
    }
    #[inline(always)]
    fn combine(a: i64, b: i64) -> i64 {
        a ^ b
    }
}

/// Dynamic shared memory, in bytes, that every `reduce_*` launch must pass:
/// the block collective's storage for blocks of up to 1024 threads (33 slots
/// of 8 bytes) and the last-block flag.
pub const SHARED_BYTES: u32 =
    (crate::device::collectives::block::storage_len(1024) * 8) as u32 + 16;

/// Vectors each thread combines per grid-stride iteration, into as many
/// interleaved accumulators (loads in flight per thread). Shared with the
/// host, whose CPU emulation of the kernel's order of operations
/// (`reduce_in_gpu_order`) follows the same loop.
pub const UNROLL: usize = 4;

/// Maps an (operation, element type) pair to the PTX entry point that
/// reduces it. Implemented by [`reduce_kernels!`](crate::reduce_kernels) only.
///
/// # Safety
/// [`KERNEL`](Self::KERNEL) is the handle of an entry point generated by
/// [`reduce_kernels!`](crate::reduce_kernels) for exactly this operation
/// and `T` (the PTX entry point of its name, and on the host its body
/// compiled for the simulator), with the parameters `(input: *const T,
/// partials: *mut T, counter: *mut u32, out: *mut T, n: usize, init: T)`:
/// the host launches it with those arguments. A safe implementation written
/// by hand is refused (use [`reduce_kernels!`](crate::reduce_kernels)):
///
/// ```compile_fail,E0200
/// use cuda_kernels_gpu::device::kernel::Kernel;
/// use cuda_kernels_gpu::reduce::{ReduceKernel, ReduceOp};
///
/// struct MaxAbs;
/// impl ReduceOp<f32> for MaxAbs {
///     const NAME: &'static str = "max_abs";
///     fn identity() -> f32 { 0.0 }
///     fn combine(a: f32, b: f32) -> f32 { a.abs().max(b.abs()) }
/// }
/// impl ReduceKernel<f32> for MaxAbs {
///     // Another op, another type.
///     const KERNEL: Kernel<(*const f32, *mut f32, *mut u32, *mut f32, usize, f32)> =
///         Kernel::new("cuda_kernels_gpu", "reduce_max_f64");
/// }
/// ```
pub unsafe trait ReduceKernel<T, A = T>: ReduceOp<A> {
    /// The entry point's handle, with its parameters `(input, partials,
    /// counter, out, n, init)`: the input of element type `T`, the rest of
    /// the accumulator type `A` (`T` itself, or f32 for a 16-bit float); on
    /// the host it carries the kernel body compiled for the simulator.
    const KERNEL: crate::device::kernel::Kernel<(*const T, *mut A, *mut u32, *mut A, usize, A)>;
    /// The entry point's name, `reduce_<op>_<type>` (the name of
    /// [`KERNEL`](Self::KERNEL)).
    const ENTRY: &'static str = Self::KERNEL.name();
}

/// Instantiates the reduction kernel for an operation and element types:
/// `reduce_kernels! { Op, "name": i32, f64, bf16 => f32, …; … }` emits, for
/// each type `t` (combined in `t`, or in the accumulator type `a` written
/// `t => a`), the entry point `reduce_<name>_<t>` (on nvptx64) and
/// `impl ReduceKernel<t, a> for Op` (everywhere, with its handle
/// [`ReduceKernel::KERNEL`], which on the host carries the same body
/// compiled for the simulator), and once the list `REDUCE_KERNELS` of the
/// entry names. `Op` must implement
/// [`ReduceOp<a>`](ReduceOp) for each accumulator type, and each type must be
/// one of the element types the host launches (`i32`, `i64`, `f32`, `f64`,
/// and `f16`/`bf16` combined in f32: the host crate's sealed
/// `reduce::Input`).
///
/// Each entry point has the parameters `(input: *const t, partials: *mut a,
/// counter: *mut u32, out: *mut a, n: usize, init: a)` and these safety
/// requirements, guaranteed by the host launcher:
/// - `input` points to `n` readable elements that nothing writes during the
///   launch; `out` to one writable element; none of the buffers overlap;
/// - `partials` has at least `gridDim.x` elements; `counter` points to a
///   `u32` that is 0 at launch (the kernel leaves it 0), used by no
///   concurrent launch;
/// - `blockDim.x` is a multiple of 32, at most 1024; `blockDim.y = z = 1`;
/// - the launch has [`SHARED_BYTES`] bytes of dynamic shared memory.
#[macro_export]
macro_rules! reduce_kernels {
    ($($op:ty, $name:literal: $($t:ident $(=> $acc:ident)?),+);+ $(;)?) => {
        /// The PTX entry points of the reductions, in declaration order.
        pub const REDUCE_KERNELS: &[&str] = &[$($(concat!("reduce_", $name, "_", stringify!($t)),)+)+];
        $($($crate::reduce_kernels!(@one $op, $name: $t $(=> $acc)?);)+)+
    };
    (@one $op:ty, $name:literal: $t:ident) => {
        $crate::reduce_kernels!(@one $op, $name: $t => $t);
    };
    (@one $op:ty, $name:literal: $t:ident => $a:ident) => {
        const _: () = {
            $crate::__family_entry! {
                concat!("reduce_", $name, "_", stringify!($t))
                    => HANDLE: (*const $t, *mut $a, *mut u32, *mut $a, usize, $a),
                /// The reduction kernel for this operation and element type
                /// (see `reduce_kernels!` for the parameters).
                ///
                /// # Safety
                /// The requirements listed in `reduce_kernels!`, guaranteed by
                /// the host launcher.
                kernel(
                    input: *const $t,
                    partials: *mut $a,
                    counter: *mut u32,
                    out: *mut $a,
                    n: usize,
                    init: $a,
                ) {
                    // SAFETY: forwarded from this entry point's contract.
                    unsafe {
                        $crate::reduce::body::reduce::<$t, $a, $op>(input, partials, counter, out, n, init)
                    }
                }
            }

            // SAFETY: HANDLE is the entry point emitted just above (and its
            // host entry), for exactly ($op, $t, $a), with the documented
            // parameters.
            unsafe impl $crate::reduce::ReduceKernel<$t, $a> for $op {
                const KERNEL: $crate::device::kernel::Kernel<
                    (*const $t, *mut $a, *mut u32, *mut $a, usize, $a),
                > = HANDLE;
            }
        };
    };
}

/// The built-in reductions, with the feature `builtin-kernels` (see the
/// crate docs): their `ReduceKernel` implementations, entry points and list
/// `REDUCE_KERNELS`.
#[cfg(feature = "builtin-kernels")]
pub mod built_in {
    use super::{Max, Min, Product, Sum, Xor};
    use crate::device::float16::{bf16, f16};

    reduce_kernels! {
        Sum, "sum": i32, i64, f32, f64, f16 => f32, bf16 => f32;
        Product, "product": i32, i64, f32, f64;
        Min, "min": i32, i64, f32, f64, f16 => f32, bf16 => f32;
        Max, "max": i32, i64, f32, f64, f16 => f32, bf16 => f32;
        Xor, "xor": i32, i64;
    }
}

/// The CPU side of the single source: a sequential left fold, from `init`
/// or else from the identity (as the GPU's accumulators start), with the
/// same [`ReduceOp::combine`] the kernel uses. `None` when the input is
/// empty, there is no `init`, and the operation is not
/// [defined on empty inputs](ReduceOp::DEFINED_ON_EMPTY).
pub fn fold<T: Copy, Op: ReduceOp<T>>(
    values: impl IntoIterator<Item = T>,
    init: Option<T>,
) -> Option<T> {
    let mut it = values.into_iter().peekable();
    let start = match init {
        Some(v) => v,
        None if it.peek().is_some() || Op::DEFINED_ON_EMPTY => Op::identity(),
        None => return None,
    };
    Some(it.fold(start, Op::combine))
}

pub mod body;

#[cfg(feature = "builtin-kernels")]
pub mod primitive_tests;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identities_are_neutral() {
        fn check<T: Copy + PartialEq + core::fmt::Debug, Op: ReduceOp<T>>(xs: &[T]) {
            for &x in xs {
                assert_eq!(Op::combine(Op::identity(), x), x, "{} identity", Op::NAME);
                assert_eq!(Op::combine(x, Op::identity()), x, "{} identity", Op::NAME);
            }
        }
        let ints = [0i32, 1, -1, i32::MAX, i32::MIN, 12345];
        check::<i32, Sum>(&ints);
        check::<i32, Product>(&ints);
        check::<i32, Min>(&ints);
        check::<i32, Max>(&ints);
        check::<i32, Xor>(&ints);
        let longs = [0i64, 1, -1, i64::MAX, i64::MIN, 1 << 40];
        check::<i64, Sum>(&longs);
        check::<i64, Product>(&longs);
        check::<i64, Min>(&longs);
        check::<i64, Max>(&longs);
        check::<i64, Xor>(&longs);
        let floats = [
            0.0f32,
            -1.5,
            3.25,
            f32::MAX,
            f32::MIN_POSITIVE,
            f32::INFINITY,
        ];
        check::<f32, Sum>(&floats[..5]);
        check::<f32, Product>(&floats);
        check::<f32, Min>(&floats);
        check::<f32, Max>(&floats);
        let doubles = [0.0f64, -1.5, 3.25, f64::MAX, f64::MIN_POSITIVE];
        check::<f64, Sum>(&doubles);
        check::<f64, Product>(&doubles);
        check::<f64, Min>(&doubles);
        check::<f64, Max>(&doubles);
    }

    #[test]
    fn integer_ops_wrap() {
        assert_eq!(<Sum as ReduceOp<i32>>::combine(i32::MAX, 1), i32::MIN);
        assert_eq!(<Product as ReduceOp<i64>>::combine(i64::MAX, 2), -2);
    }

    #[test]
    fn float_min_max_ignore_nan() {
        assert_eq!(<Min as ReduceOp<f32>>::combine(f32::NAN, 2.0), 2.0);
        assert_eq!(<Max as ReduceOp<f64>>::combine(-1.0, f64::NAN), -1.0);
    }

    #[test]
    fn fold_semantics() {
        assert_eq!(fold::<i64, Sum>(1..=10_000, None), Some(50_005_000));
        assert_eq!(fold::<i64, Sum>([], None), Some(0));
        assert_eq!(fold::<i64, Sum>([], Some(7)), Some(7));
        assert_eq!(fold::<i32, Product>([], None), Some(1));
        assert_eq!(fold::<i32, Min>([], None), None);
        assert_eq!(fold::<f32, Max>([], None), None);
        assert_eq!(fold::<f32, Max>([], Some(-3.0)), Some(-3.0));
        assert_eq!(fold::<i32, Min>([5], None), Some(5));
        assert_eq!(fold::<i32, Min>([5, -2, 9], Some(0)), Some(-2));
        assert_eq!(fold::<i32, Xor>([0b101, 0b110], Some(1)), Some(0b010));
    }

    #[test]
    #[cfg(feature = "builtin-kernels")]
    fn entry_names_follow_op_names() {
        fn check<T, Op: ReduceKernel<T>>(ty: &str) {
            assert_eq!(Op::ENTRY, format!("reduce_{}_{ty}", Op::NAME));
        }
        fn built_ins<T>(ty: &str)
        where
            Sum: ReduceKernel<T>,
            Product: ReduceKernel<T>,
            Min: ReduceKernel<T>,
            Max: ReduceKernel<T>,
        {
            check::<T, Sum>(ty);
            check::<T, Product>(ty);
            check::<T, Min>(ty);
            check::<T, Max>(ty);
        }
        built_ins::<i32>("i32");
        built_ins::<i64>("i64");
        built_ins::<f32>("f32");
        built_ins::<f64>("f64");
        check::<i32, Xor>("i32");
        check::<i64, Xor>("i64");
    }

    #[test]
    #[cfg(feature = "builtin-kernels")]
    fn entry_names() {
        assert_eq!(<Sum as ReduceKernel<f32>>::ENTRY, "reduce_sum_f32");
        assert_eq!(<Max as ReduceKernel<i64>>::ENTRY, "reduce_max_i64");
        assert_eq!(<Xor as ReduceKernel<i32>>::ENTRY, "reduce_xor_i32");
    }
}
