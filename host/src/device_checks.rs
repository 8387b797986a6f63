//! Launchers of the device-layer check kernels (`kernels-gpu/src/device_checks.rs`).
use ndarray::{Array1, ArrayView1};

use cuda_kernels_gpu::device_checks::{BLOCK_REVERSE_I32, REVERSE_BLOCK, reversed_index};

use crate::Gpu;
use crate::error::Result;
use crate::launch::LaunchConfig;
use crate::launch::grid_1d_capped;
use crate::util::contiguous;

/// The device-layer checks on a [`Gpu`].
pub trait DeviceChecks {
    /// Reverses each 256-element chunk of `input` through static shared memory
    /// (`shared_array!` and a block barrier); the last chunk may be shorter.
    fn block_reverse_i32(&self, input: ArrayView1<i32>) -> Result<Array1<i32>>;
}

impl DeviceChecks for Gpu {
    fn block_reverse_i32(&self, input: ArrayView1<i32>) -> Result<Array1<i32>> {
        const K: &str = BLOCK_REVERSE_I32.name();
        let n = input.len();
        let grid = grid_1d_capped(K, n, REVERSE_BLOCK as u32)?;
        if (grid as usize) * REVERSE_BLOCK < n {
            return Err(crate::Error::invalid(
                K,
                format!("{n} elements need more than {grid} blocks"),
            ));
        }
        self.bind()?;
        let stream = self.stream();
        let din = self.to_device(&contiguous(&input))?;
        let mut dout = self.zeroed::<i32>(n)?;
        // SAFETY: din and dout hold n i32 each and are distinct; blocks of REVERSE_BLOCK threads
        // and enough blocks to cover n (checked above).
        unsafe {
            let cfg = LaunchConfig::linear(grid, REVERSE_BLOCK as u32);
            self.launch(BLOCK_REVERSE_I32, cfg, stream, (&din, &mut dout, n))
        }?;
        self.synchronize(K)?;
        let mut out = vec![0i32; n];
        dout.copy_to(&mut out[..])?;
        Ok(Array1::from(out))
    }
}

/// CPU reference for [`Gpu::block_reverse_i32`](crate::device_checks::DeviceChecks::block_reverse_i32).
pub fn block_reverse_i32_cpu(input: ArrayView1<i32>) -> Array1<i32> {
    let input = contiguous(&input);
    let mut out = Vec::with_capacity(input.len());
    for chunk in input.chunks(REVERSE_BLOCK) {
        out.extend((0..chunk.len()).map(|i| chunk[reversed_index(i, chunk.len())]));
    }
    Array1::from(out)
}
