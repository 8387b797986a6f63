//! Kernel handles bound to the image of the crate that declares them
//! (issue 19): a handle launches only on its own crate's image, never on
//! another kernel of the same name, with the same error on the GPU and on
//! the simulator, in both directions of a name collision.
use cuda_kernels::image::IMAGE_MARK;
use cuda_kernels::kernels::reduce::{Max, ReduceOp};
use cuda_kernels::ndarray::array;
use cuda_kernels::{Error, Gpu, Images};
use libtest_mimic::{Failed, Trial};

use crate::common::{ensure, fail};
use cuda_kernels::prelude::*;

/// The trials of this family, in the order they are listed.
pub fn trials() -> Vec<Trial> {
    vec![
        kernel!(an_op_declared_in_a_host_program_is_not_found),
        kernel!(a_built_in_kernel_is_not_found_on_another_crates_image),
        cpu!(the_built_in_images_name_their_crate),
    ]
}

/// Issue 19's user op: `max |x|` declared in this test binary (a crate that
/// builds no PTX) under the built-in `max`'s entry name, `reduce_max_f32`.
mod host_op {
    use cuda_kernels::kernels::reduce::ReduceOp;

    /// `combine(a, b) = max(|a|, |b|)`, identity 0.
    #[derive(Debug, Clone, Copy, Default)]
    pub struct HostMaxAbs;

    impl ReduceOp<f32> for HostMaxAbs {
        const NAME: &'static str = "max";
        fn identity() -> f32 {
            0.0
        }
        fn combine(a: f32, b: f32) -> f32 {
            a.abs().max(b.abs())
        }
    }

    cuda_kernels::kernels::reduce_kernels!(HostMaxAbs, "max": f32);
}

/// `Err` unless `got` is `KernelNotFound` for `name` whose reason names
/// each of `words`.
fn not_found<T: std::fmt::Debug>(
    got: cuda_kernels::Result<T>,
    name: &str,
    words: &[&str],
) -> Result<(), Failed> {
    match got {
        Err(Error::KernelNotFound { name: n, reason })
            if n == name && words.iter().all(|w| reason.contains(w)) =>
        {
            Ok(())
        }
        other => Err(
            format!("expected KernelNotFound for {name} naming {words:?}, got {other:?}").into(),
        ),
    }
}

/// On the H100 `gpu.reduce::<HostMaxAbs, f32>([-9, 2, 3])` returned 3 (the
/// built-in `reduce_max_f32` ran) while the simulator ran the handle's body
/// (9). Now both refuse it: the handle is this binary's (`gpu`), the loaded
/// image the built-in kernels'; the message says where ops must live.
fn an_op_declared_in_a_host_program_is_not_found(gpu: &Gpu) -> Result<(), Failed> {
    let x = array![-9.0f32, 2.0, 3.0];
    ensure(host_op::HostMaxAbs::combine(-9.0, 3.0) == 9.0, || {
        "the op itself".into()
    })?;
    not_found(
        gpu.reduce::<host_op::HostMaxAbs, f32>(x.view(), None),
        "reduce_max_f32",
        &[
            &format!("`{}`", env!("CARGO_CRATE_NAME")),
            "`cuda_kernels_gpu`",
            "reduce_kernels!",
            "cuda-kernels-builder",
        ],
    )?;
    // The built-in op of that name still runs on the built-in image.
    let max = gpu.reduce::<Max, f32>(x.view(), None).map_err(fail)?;
    ensure(max == 3.0, || format!("built-in max of [-9, 2, 3]: {max}"))
}

/// The reverse direction: the built-in `Max` on a module of another kernel
/// crate that defines `reduce_max_f32` (here the built-in PTX under another
/// crate's name, so that the entry point is certainly there) ran the
/// user's code on the GPU. Now it is `KernelNotFound` on both backends.
fn a_built_in_kernel_is_not_found_on_another_crates_image(gpu: &Gpu) -> Result<(), Failed> {
    let ptx = relabelled_ptx("user_kernels")?;
    ensure(
        cuda_kernels::ptx_entry_points(&ptx).contains(&"reduce_max_f32"),
        || "the relabelled PTX lacks reduce_max_f32".into(),
    )?;
    let images = Images::from(ptx.as_str());
    let other = if gpu.is_simulated() {
        Gpu::simulator_of(&images)
    } else {
        Gpu::from_images(&images)
    }
    .map_err(fail)?;
    ensure(other.image_crate() == Some("user_kernels"), || {
        format!("image crate: {:?}", other.image_crate())
    })?;
    let x = array![-9.0f32, 2.0, 3.0];
    not_found(
        other.reduce::<Max, f32>(x.view(), None),
        "reduce_max_f32",
        &["`cuda_kernels_gpu`", "`user_kernels`"],
    )?;
    not_found(
        other.multiply(x.view(), x.view()),
        "multiply",
        &["`user_kernels`"],
    )
}

/// The built-in PTX with its first line naming `crate_name` instead.
fn relabelled_ptx(crate_name: &str) -> Result<String, Failed> {
    let mark = format!("{IMAGE_MARK}{}\n", cuda_kernels::kernels::IMAGE);
    let body = cuda_kernels::PTX
        .strip_prefix(&mark)
        .ok_or_else(|| format!("the built-in PTX does not start with {mark:?}"))?;
    Ok(format!("{IMAGE_MARK}{crate_name}\n{body}"))
}

/// The builder wrote the kernel crate's name on the PTX's first line, and
/// the host reads it (the two ends of the image identity).
fn the_built_in_images_name_their_crate() -> Result<(), Failed> {
    let name = cuda_kernels::IMAGES.crate_name();
    ensure(name == Some(cuda_kernels::kernels::IMAGE), || {
        format!("IMAGES.crate_name() = {name:?}")
    })?;
    ensure(IMAGE_MARK == cuda_kernels_builder::IMAGE_MARK, || {
        "the host and the builder disagree on the image mark".into()
    })?;
    let multiply = cuda_kernels::kernels::multiply::MULTIPLY;
    ensure(multiply.image() == "cuda_kernels_gpu", || {
        format!("{multiply:?}")
    })
}
