//! Elementwise kernels declared from an expression (PyOpenCL's and PyCUDA's
//! `ElementwiseKernel`), and `vector_sum_repeat`.
//!
//! # Declaring an elementwise kernel
//! PyCUDA writes
//! ```text
//! ElementwiseKernel("int *a, int *b, int *c", "c[i] = a[i] + b[i]", "sum")
//! ```
//! and compiles it at run time. Here the same declaration is one entry of
//! the list in [`elementwise_kernels!`](crate::elementwise_kernels), compiled
//! to PTX at build time:
//! ```text
//! /// `c = a + b` (the seed's `sum`).
//! sum => elementwise_sum<T: i32, i64, f32, f64>
//!     (in [a, b] out [c] inout [] scalar []) { *c = a + b; }
//! ```
//! - `sum` names the kernel: for each listed element type `T` the PTX gets
//!   an entry point `elementwise_sum_<T>` (`elementwise_sum_i32`, …) and
//!   this module a marker type `sum` implementing [`Elementwise<T>`];
//! - `elementwise_sum` names the typed host method the host crate generates
//!   from the same list (`gpu.elementwise_sum(a.view(), b.view(),
//!   c.view_mut())`);
//! - the parameters, all of element type `T`: `in` arrays (read), `out`
//!   arrays (written, never read: they start at zero in the body), `inout`
//!   arrays (read and written, e.g. saxpy's `y`) and `scalar`s;
//! - the body is ordinary Rust, run once per index `i`: an `in` array or a
//!   scalar is its value (`a` means `a[i]`), an `out`/`inout` array is a
//!   `&mut T` to its element (`*c = …` means `c[i] = …`). `T` names the
//!   element type inside the body. The body is compiled separately for each
//!   type, so it needs no trait bounds; integer overflow follows Rust's
//!   rules (use `wrapping_add` etc. where wrapping is meant: a host build
//!   of this crate with overflow checks panics in the CPU reference and on
//!   the simulator, where the GPU wraps; this workspace's profiles build
//!   the crate without them, as the GPU build does).
//!
//! What is generated, per type: the per-element function
//! [`Elementwise::element`] (the body on single elements, which the host's
//! generic CPU reference `elementwise_cpu` calls), and the entry point
//! `elementwise_<name>_<T>(in…: *const T, out…: *mut T, inout…: *mut T,
//! scalar…: T, n: usize)`, the vectorized grid-stride map of
//! [`bandwidth`](crate::bandwidth) over `i < n` (16-byte vectors with an
//! element-wise head and tail): it loads the `in`/`inout` words, runs the
//! body on them and stores the `out`/`inout` words. A word
//! ([`Lanes`](crate::bandwidth::Lanes)) is one element, except for `f16`
//! and `bf16`: the kernel runs the body on packed pairs
//! ([`f16x2`](crate::device::float16::f16x2),
//! [`bf16x2`](crate::device::float16::bf16x2), `T` naming the pair type
//! there, the scalars in both halves), so that one packed instruction
//! (`add.rn.f16x2`, `fma.rn.bf16x2`, …) does two elements and the vectors
//! stay in registers. A body listed for a 16-bit float must therefore use
//! only what the pairs have (`+ − × ÷`, unary `−`, `fma`, `min`, `max`);
//! each of those rounds every element once, so the pair gives each
//! element's own bits. On nvptx64 that is the PTX entry point; on the host
//! the same body is the host entry of the handle [`Elementwise::KERNEL`],
//! which the CPU simulator runs.
//!
//! # Adding your own
//! 1. Add an entry to the list in [`elementwise_kernels!`](crate::elementwise_kernels)
//!    (this file). Rebuild: `build.rs` compiles the new entry points into
//!    the PTX.
//! 2. The host crate (`cuda_kernels_host::matrices::elementwise`) expands
//!    the same list into a typed `impl Gpu` method named as you said, with
//!    the parameters in order (`in` as `ArrayView1<T>`, `out`/`inout` as
//!    `ArrayViewMut1<T>`, scalars as `T`), plus the PTX entry-point list the
//!    offline PTX test checks. The generic launcher
//!    `Gpu::elementwise::<K, T>` and the CPU reference `elementwise_cpu`
//!    work for any kernel declared here.
//!
//! Limits: at most 8 arrays of each kind (in, out + inout) and 8 scalars
//! (the CPU reference stages one element of each on the stack); every
//! array of one call has the same length.
//!
//! # In a kernel crate of your own
//! Invoke [`elementwise!`](macro@crate::elementwise) itself, with the same
//! entry syntax, in your kernel crate (which depends on this one with
//! `default-features = false`, see the [crate docs](crate)), and launch the
//! marker type from your host crate with `Gpu::elementwise::<name, T>` on the
//! module your build script made (`examples/downstream` does it).
//! `elementwise_kernels!` is this crate's own list, not a declaration macro.
//!
//! # `vector_sum_repeat`
//! The seed's deliberately heavy kernel: every thread repeats
//! `c[i] = a[i] + b[i]` 10,000 times. The loads and the store are volatile
//! (`ld.volatile.global`/`st.volatile.global`), so the compiler can neither
//! hoist them out of the loop nor drop the loop: the PTX keeps it.

/// An elementwise kernel declared with [`elementwise!`](macro@crate::elementwise)
/// (or listed in [`elementwise_kernels!`](crate::elementwise_kernels)), for
/// element type `T`. Implemented by that macro only.
///
/// # Safety
/// The host launches the entry point of the handle [`KERNEL`](Self::KERNEL)
/// (on the GPU by its name, [`ENTRY`](Self::ENTRY); on the simulator its
/// host entry) with the parameters these constants describe, all of element
/// type `T`: one
/// `*const T` per [`INPUTS`](Self::INPUTS) name, one `*mut T` per
/// [`OUTPUTS`](Self::OUTPUTS) and [`INOUTS`](Self::INOUTS) name, one `T` per
/// [`SCALARS`](Self::SCALARS) name, then `n: usize`, every array holding `n`
/// elements. An implementation promises that the PTX has an entry point of
/// that name, and the handle a host entry, with exactly those parameters,
/// which touch no element at or beyond `n`.
/// [`elementwise!`](macro@crate::elementwise) emits the entry point, the
/// host entry and the implementation together from one declaration, so its
/// promise holds by construction; an implementation written by hand could
/// name another kernel (the `f64` one for `f32` buffers reads twice the
/// bytes it was given), which is why a safe one is refused:
///
/// ```compile_fail,E0200
/// use cuda_kernels_gpu::device::kernel::Kernel;
/// use cuda_kernels_gpu::elementwise::{Elementwise, Params};
///
/// struct Mine;
/// impl Elementwise<f32> for Mine {
///     // The f64 kernel, on f32 buffers.
///     const KERNEL: Kernel<Params<f32>> = Kernel::new("cuda_kernels_gpu", "elementwise_sum_f64");
///     const NAME: &'static str = "sum";
///     const INPUTS: &'static [&'static str] = &["a", "b"];
///     const OUTPUTS: &'static [&'static str] = &["c"];
///     const INOUTS: &'static [&'static str] = &[];
///     const SCALARS: &'static [&'static str] = &[];
///     fn element(_: &[f32], _: &mut [f32], _: &[f32]) {}
/// }
/// ```
pub unsafe trait Elementwise<T: Copy> {
    /// The entry point's handle: its name and, on the host, the kernel body
    /// compiled for the simulator. The family is variadic (its arrays and
    /// scalars are counted at run time against [`Self::INPUTS`] …), so the
    /// handle's parameters are [`Params<T>`]: arrays and scalars of `T`.
    const KERNEL: crate::device::kernel::Kernel<Params<T>>;
    /// The kernel's name (`"sum"`).
    const NAME: &'static str;
    /// The PTX entry point for `T` (`"elementwise_sum_i32"`), the name of
    /// [`KERNEL`](Self::KERNEL).
    const ENTRY: &'static str = Self::KERNEL.name();
    /// Names of the `in` arrays, in parameter order.
    const INPUTS: &'static [&'static str];
    /// Names of the `out` arrays (written only), in parameter order.
    const OUTPUTS: &'static [&'static str];
    /// Names of the `inout` arrays (read and written), in parameter order.
    const INOUTS: &'static [&'static str];
    /// Names of the scalars, in parameter order.
    const SCALARS: &'static [&'static str];

    /// The per-element function: `ins` holds one element of each `in`
    /// array, `outs` one element of each `out` array (zero on entry)
    /// followed by one of each `inout` array (its current value), `scalars`
    /// the scalars. Slices of the wrong length leave `outs` unchanged.
    fn element(ins: &[T], outs: &mut [T], scalars: &[T]);
}

/// The parameters of an elementwise entry point of element type `T`: the
/// `in`, `out` and `inout` arrays (pointers to `T`), the scalars (`T`), then
/// `n: usize`, in that order (see [`Elementwise`]).
pub struct Params<T>(core::marker::PhantomData<T>);

/// Most arrays of one kind (in, or out + inout) and most scalars an
/// elementwise kernel may have.
pub const MAX_ELEMENTWISE_ARGS: usize = 8;

/// Declares elementwise kernels (see the [module documentation](self)):
///
/// ```text
/// elementwise! {
///     /// doc
///     name => host_method<T: type, …> (in [..] out [..] inout [..] scalar [..]) { body }
///     …
/// }
/// ```
///
/// For each entry: a marker type `name` implementing
/// [`Elementwise<T>`](crate::elementwise::Elementwise) for every listed
/// type, with its handle [`Elementwise::KERNEL`](crate::elementwise::Elementwise::KERNEL)
/// (carrying the body compiled for the simulator on the host), and on
/// nvptx64 the entry points `elementwise_<name>_<type>`. The host method
/// name is used by the host crate only.
#[macro_export]
macro_rules! elementwise {
    ($(
        $(#[$meta:meta])*
        $name:ident => $method:ident <T: $($ty:ident),+ $(,)?> $sig:tt $body:block
    )*) => {$(
        $(#[$meta])*
        ///
        /// (An elementwise kernel marker: see
        /// `cuda_kernels_gpu::elementwise::Elementwise`. Plain text: a link
        /// here would resolve in the crate that invokes the macro.)
        #[allow(non_camel_case_types)]
        #[derive(Debug, Clone, Copy, Default)]
        pub struct $name;
        $( $crate::__elementwise_one!($name, $ty, $sig, $body); )+
    )*
        /// The PTX entry points of these elementwise kernels, in declaration
        /// order.
        pub const ELEMENTWISE_KERNELS: &[&str] = &[$($(
            concat!("elementwise_", stringify!($name), "_", stringify!($ty)),
        )+)*];
    };
}

/// One kernel for one type (used by [`elementwise!`](macro@crate::elementwise)).
#[doc(hidden)]
#[macro_export]
macro_rules! __elementwise_one {
    (
        $name:ident, $ty:ident,
        (in [$($i:ident),* $(,)?] out [$($o:ident),* $(,)?] inout [$($io:ident),* $(,)?] scalar [$($s:ident),* $(,)?]),
        $body:block
    ) => {
        const _: () = {
            $crate::__family_entry! {
                concat!("elementwise_", stringify!($name), "_", stringify!($ty))
                    => HANDLE: $crate::elementwise::Params<$ty>,
                /// The generated entry point: the vectorized grid-stride map of
                /// [`bandwidth`](crate::bandwidth) over `i < n`, running the
                /// body on words of `Lanes`.
                ///
                /// # Safety
                /// Every array pointer holds at least `n` elements on the
                /// device; `out`/`inout` arrays overlap no other array
                /// (host-checked).
                kernel(
                    $($i: *const $ty,)*
                    $($o: *mut $ty,)*
                    $($io: *mut $ty,)*
                    $($s: $ty,)*
                    n: usize,
                ) {
                    type Word = <$ty as $crate::bandwidth::Lanes>::Word;
                    $( let $s = $crate::bandwidth::Lanes::splat($s); )*
                    // The body on whole words (a packed pair of 16-bit
                    // floats, else one element).
                    #[allow(unused_variables, non_camel_case_types, unused_mut, clippy::all)]
                    let body = |&[$($i),*]: &[Word; 0usize $(+ $crate::__elementwise_one_for!($i))*],
                                [$($o,)* $($io,)*]: &mut [Word; 0usize $(+ $crate::__elementwise_one_for!($o))* $(+ $crate::__elementwise_one_for!($io))*]| {
                        #[allow(dead_code)]
                        type T = Word;
                        $body
                    };
                    // SAFETY: every array holds n elements (host-checked);
                    // outputs overlap no other array.
                    unsafe {
                        $crate::bandwidth::device::map::<
                            $ty,
                            { 16 / ::core::mem::size_of::<Word>() },
                            { 0usize $(+ $crate::__elementwise_one_for!($i))* },
                            { 0usize $(+ $crate::__elementwise_one_for!($o))* $(+ $crate::__elementwise_one_for!($io))* },
                        >(
                            [$($i),*],
                            [$($o,)* $($io,)*],
                            0usize $(+ $crate::__elementwise_one_for!($o))*,
                            n,
                            body,
                        )
                    }
                }
            }

            // SAFETY: HANDLE is the entry point emitted just above (and its
            // host entry), from the same parameter lists, for exactly ($name,
            // $ty): a grid-stride loop over i < n.
            unsafe impl $crate::elementwise::Elementwise<$ty> for $name {
                const KERNEL: $crate::device::kernel::Kernel<$crate::elementwise::Params<$ty>> = HANDLE;
                const NAME: &'static str = stringify!($name);
                const INPUTS: &'static [&'static str] = &[$(stringify!($i)),*];
                const OUTPUTS: &'static [&'static str] = &[$(stringify!($o)),*];
                const INOUTS: &'static [&'static str] = &[$(stringify!($io)),*];
                const SCALARS: &'static [&'static str] = &[$(stringify!($s)),*];

                #[inline(always)]
                #[allow(unused_variables, non_camel_case_types, unused_mut, dead_code, clippy::all)]
                fn element(ins: &[$ty], outs: &mut [$ty], scalars: &[$ty]) {
                    type T = $ty;
                    let &[$($i),*] = ins else { return };
                    let [$($o,)* $($io,)*] = outs else { return };
                    let &[$($s),*] = scalars else { return };
                    $body
                }
            }
        };
    };
}

/// One entry point of a kernel family whose entry names are built from
/// several tokens (`elementwise!`, `reduce_kernels!`): the PTX entry point
/// `entry` on nvptx64, and everywhere the handle `HANDLE` of the given
/// parameter type, which carries the same body compiled for the simulator on
/// the host (`cuda_kernels_device::kernel_handle!`).
#[doc(hidden)]
#[macro_export]
macro_rules! __family_entry {
    (
        $entry:expr => $handle:ident : $params:ty,
        $(#[$attr:meta])*
        $name:ident ( $($arg:ident : $ty:ty),* $(,)? ) $body:block
    ) => {
        $(#[$attr])*
        #[cfg(target_arch = "nvptx64")]
        #[unsafe(export_name = $entry)]
        pub unsafe extern "ptx-kernel" fn $name($($arg: $ty),*) $body

        const $handle: $crate::device::kernel::Kernel<$params> =
            $crate::device::kernel_handle!($entry => $name($($arg: $ty),*) $body);
    };
}

/// `1` for any identifier: counts the arrays of one kind in
/// [`__elementwise_one!`](crate::__elementwise_one).
#[doc(hidden)]
#[macro_export]
macro_rules! __elementwise_one_for {
    ($x:ident) => {
        1usize
    };
}

/// The list of elementwise kernels this crate builds, handed to a callback
/// macro: [`elementwise!`](macro@crate::elementwise) here (kernels and marker
/// types), the host crate's launcher generator there (typed `Gpu` methods
/// and the entry-point list). Add your kernel here (see the
/// [module documentation](mod@crate::elementwise)).
#[macro_export]
macro_rules! elementwise_kernels {
    ($callback:path) => {
        $callback! {
            /// `c = a + b`: the seed's `ElementwiseKernel("int *a, int *b,
            /// int *c", "c[i] = a[i] + b[i]", "sum")` (wrapping is not
            /// asked for: integer overflow follows Rust's rules).
            sum => elementwise_sum<T: i32, i64, f32, f64, f16, bf16>
                (in [a, b] out [c] inout [] scalar []) { *c = a + b; }

            /// saxpy, `y = a·x + y`, in place on `y` (one rounding for the
            /// product and one for the sum, like NumPy's `a*x + y`).
            saxpy => elementwise_saxpy<T: f32, f64, f16, bf16>
                (in [x] out [] inout [y] scalar [a]) { *y = a * x + *y; }

            /// Linear interpolation over three arrays:
            /// `out = a + t·(b − a)`.
            lerp => elementwise_lerp<T: f32, f64, f16, bf16>
                (in [a, b, t] out [out] inout [] scalar []) { *out = a + t * (b - a); }
        }
    };
}

// The built-in kernels (their entry points only with `builtin-kernels`).
// The 16-bit floats are the device crate's (the bits of `half`'s types):
// their `+ − ×` round each operation once, like f32's.
#[cfg(any(not(target_arch = "nvptx64"), feature = "builtin-kernels"))]
use crate::device::float16::{bf16, f16};
#[cfg(any(not(target_arch = "nvptx64"), feature = "builtin-kernels"))]
elementwise_kernels!(crate::elementwise);

/// The per-element function of `vector_sum_repeat`, shared with the
/// CPU reference.
#[inline(always)]
pub fn vector_sum_repeat_element(a: f32, b: f32) -> f32 {
    a + b
}

/// Threads per block of `vector_sum_repeat`.
pub const REPEAT_THREADS: u32 = 256;

// The entry point only with `builtin-kernels` (see the crate docs).
#[cfg(any(not(target_arch = "nvptx64"), feature = "builtin-kernels"))]
crate::device::kernels! {
    list REPEAT_KERNELS;
    /// For each `i < n`, `repeats` times: `c[i] = a[i] + b[i]`, with
    /// volatile loads and store so that the loop survives optimization (the
    /// seed's deliberately heavy kernel). Grid-stride.
    ///
    /// # Safety
    /// `a`, `b` and `c` hold at least `n` f32 on the device; `c` overlaps
    /// neither input (host-checked).
    pub fn vector_sum_repeat(
        a: *const f32,
        b: *const f32,
        c: *mut f32,
        n: usize,
        repeats: u32,
    ) as VECTOR_SUM_REPEAT {
        for i in crate::device::thread::grid_stride(n) {
            for _ in 0..repeats {
                // SAFETY: i < n, the length of all three buffers.
                unsafe {
                    let x = a.add(i).read_volatile();
                    let y = b.add(i).read_volatile();
                    c.add(i).write_volatile(vector_sum_repeat_element(x, y));
                }
            }
        }
    }
}
