//! Launching on the simulator: `sim::memory` buffers, a kernel's arguments
//! as its parameter list, launch shapes, the record of launched entry points,
//! and input values.
use super::*;

/// A simulated device buffer of `len` elements of `T`.
pub(super) struct Buf<T> {
    alloc: Allocation,
    len: usize,
    _t: PhantomData<T>,
}

impl<T: Copy> Buf<T> {
    /// `len` zeroed elements.
    pub(super) fn zeroed(len: usize) -> Self {
        let size = size_of::<T>();
        let alloc = Allocation::new(len * size, size, std::any::type_name::<T>())
            .expect("a simulated device buffer");
        Buf {
            alloc,
            len,
            _t: PhantomData,
        }
    }

    /// A copy of `data`.
    pub(super) fn from(data: &[T]) -> Self {
        let buf = Self::zeroed(data.len());
        // SAFETY: the allocation holds data.len() elements of T, fresh.
        unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), buf.ptr(), data.len()) };
        buf
    }

    pub(super) fn ptr(&self) -> *mut T {
        self.alloc.ptr().cast()
    }

    pub(super) fn to_vec(&self) -> Vec<T> {
        // SAFETY: the allocation holds len elements of T, no launch running.
        unsafe { std::slice::from_raw_parts(self.ptr(), self.len) }.to_vec()
    }
}

/// A kernel's arguments: a tuple of exactly its parameter types.
pub(super) trait Args {
    /// Calls `f` with a pointer to each value, in order.
    fn with_params<R>(self, f: impl FnOnce(&[*mut c_void]) -> R) -> R;
}

macro_rules! tuple_args {
    ($($a:ident $i:tt),*) => {
        impl<$($a: Copy),*> Args for ($($a,)*) {
            #[allow(unused_mut, unused_variables, clippy::unused_unit)]
            fn with_params<R>(self, f: impl FnOnce(&[*mut c_void]) -> R) -> R {
                let mut values = self;
                f(&[$(&mut values.$i as *mut $a as *mut c_void),*])
            }
        }
    };
}
tuple_args!();
tuple_args!(A0 0, A1 1);
tuple_args!(A0 0, A1 1, A2 2);
tuple_args!(A0 0, A1 1, A2 2, A3 3);
tuple_args!(A0 0, A1 1, A2 2, A3 3, A4 4);
tuple_args!(A0 0, A1 1, A2 2, A3 3, A4 4, A5 5);
tuple_args!(A0 0, A1 1, A2 2, A3 3, A4 4, A5 5, A6 6);
tuple_args!(A0 0, A1 1, A2 2, A3 3, A4 4, A5 5, A6 6, A7 7, A8 8);
tuple_args!(A0 0, A1 1, A2 2, A3 3, A4 4, A5 5, A6 6, A7 7, A8 8, A9 9);
tuple_args!(A0 0, A1 1, A2 2, A3 3, A4 4, A5 5, A6 6, A7 7, A8 8, A9 9, A10 10, A11 11);

/// A grid of `grid` blocks of `block` threads with `shared` bytes of dynamic
/// shared memory.
pub(super) fn shape(grid: [u32; 3], block: [u32; 3], shared: u32) -> LaunchShape {
    LaunchShape {
        grid,
        block,
        dynamic_shared_bytes: shared,
    }
}

/// Launches `kernel` on the simulator with its handle's host entry.
///
/// # Safety
/// The arguments satisfy the kernel's `# Safety` contract.
pub(super) unsafe fn launch<P: Args>(
    kernel: Kernel<P>,
    shape: LaunchShape,
    args: P,
) -> Result<(), SimError> {
    let entry = kernel
        .sim_entry()
        .expect("every kernel of the crate has a host entry");
    launched(kernel.name());
    // SAFETY: the parameters are the handle's types, in order; the contract
    // is the caller's.
    args.with_params(|params| unsafe { sim::launch(kernel.name(), shape, entry, params) })
}

/// The entry points this process has launched.
pub(super) static LAUNCHED: std::sync::Mutex<std::collections::BTreeSet<&'static str>> =
    std::sync::Mutex::new(std::collections::BTreeSet::new());

/// Records a launch of the entry point `name`.
pub(super) fn launched(name: &'static str) {
    LAUNCHED
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .insert(name);
}

/// A 1-D launch.
pub(super) fn linear(grid: u32, block: u32) -> LaunchShape {
    shape([grid, 1, 1], [block, 1, 1], 0)
}

/// Deterministic pseudo-random values in `[-1, 1)`.
pub(super) fn values(n: usize, seed: u64) -> Vec<f32> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 40) as f32 / (1u64 << 23) as f32 - 1.0
        })
        .collect()
}

pub(super) fn ints(n: usize, seed: u64) -> Vec<i32> {
    values(n, seed)
        .iter()
        .map(|&v| (v * 1.0e9) as i32)
        .collect()
}
