//! List every CUDA device and its properties, as PyCUDA's and
//! PyOpenCL's device queries do. Exits with an error when there is no GPU.
//!
//! `cargo run --example 01_device_query`
fn main() -> Result<(), cuda_kernels::Error> {
    let (driver, devices) = cuda_kernels::device_info::query_devices()?;
    println!("CUDA driver {driver}, {} device(s)", devices.len());
    for device in devices {
        println!("{device}");
    }
    Ok(())
}
