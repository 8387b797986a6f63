//! The kernels' PTX, checked offline with `ptxas` (no GPU needed): it has
//! the entry points the app launches, and assembles for sm_70, sm_80 and
//! sm_90 with no register spill.
use std::process::Command;

const PTX: &str = include_str!(concat!(env!("OUT_DIR"), "/downstream.ptx"));

#[test]
fn the_ptx_has_every_kernel_the_app_launches_and_no_other() {
    let mut entries = cuda_kernels_runtime::ptx_entry_points(PTX);
    entries.sort_unstable();
    assert_eq!(
        entries,
        [
            "bin_starts",
            "elementwise_leaky_relu_f32",
            "elementwise_leaky_relu_f64",
            "histogram",
            "reduce_max_abs_f32",
            "reduce_max_abs_f64",
            "softmax_rows",
        ]
    );
}

#[test]
fn ptxas_assembles_it_for_sm_70_80_90_without_spills() {
    let ptxas = env!("DOWNSTREAM_PTXAS");
    assert!(
        !ptxas.is_empty(),
        "the build found no ptxas: set PTXAS, or install CUDA's ptxas (pip install \
         nvidia-cuda-nvcc-cu12)"
    );
    let dir = std::env::temp_dir().join(format!("downstream-ptx-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("a temporary folder");
    let ptx = dir.join("downstream.ptx");
    std::fs::write(&ptx, PTX).expect("the PTX written");
    for arch in ["sm_70", "sm_80", "sm_90"] {
        let out = Command::new(ptxas)
            .args([&format!("-arch={arch}"), "-v", "-o"])
            .arg(dir.join(format!("{arch}.cubin")))
            .arg(&ptx)
            .output()
            .expect("ptxas runs");
        let log = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "ptxas -arch={arch} failed:\n{log}");
        let spills: Vec<_> = log
            .lines()
            .filter(|l| {
                l.contains("spill") && !l.contains("0 bytes spill stores, 0 bytes spill loads")
            })
            .collect();
        assert!(
            spills.is_empty(),
            "{arch}: register spills:\n{}",
            spills.join("\n")
        );
    }
    std::fs::remove_dir_all(&dir).ok();
}
