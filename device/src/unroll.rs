//! [`unroll!`](crate::unroll!): a block repeated with its index as a constant.

/// Repeats `$body` for `$i` = 0, 1, … `$n − 1`, each copy with `$i` a
/// constant `usize`. `$n` is a constant expression of at most 32 (a literal
/// or a const generic parameter such as a kernel's items per thread); the
/// copies past it are removed at compile time.
///
/// Arrays indexed only by constants stay in registers. A loop over them
/// that LLVM does not unroll fully (its heuristics give up on long bodies,
/// and on any body with inline assembly such as a shuffle) puts them in
/// local memory instead: `ptxas -v` then reports a stack frame.
///
/// ```
/// let mut squares = [0u32; 5];
/// cuda_kernels_device::unroll!(i in 5 => {
///     squares[i] = (i * i) as u32;
/// });
/// assert_eq!(squares, [0, 1, 4, 9, 16]);
/// ```
#[macro_export]
macro_rules! unroll {
    ($i:ident in $n:expr => $body:block) => {
        $crate::unroll!(@copies $i, $n, $body, [
            0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15
            16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31
        ])
    };
    (@copies $i:ident, $n:expr, $body:block, [$($k:literal)*]) => {{
        const { assert!($n <= 32, "unroll!: at most 32 copies") };
        $(
            if $k < $n {
                let $i: usize = $k;
                $body
            }
        )*
    }};
}
