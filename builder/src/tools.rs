//! Finding the CUDA tools the build uses: `ptxas` and NVIDIA's libdevice.
//!
//! Both are searched for in the same places, in this order: an environment
//! variable, the `PATH` (`ptxas` only), the `nvidia-cuda-nvcc-cu12` wheel in
//! a `.tools/ptxas` folder of the crate's folder or any folder above it (where
//! this project's `scripts/setup.sh` installs it), the CUDA toolkit in
//! `/usr/local/cuda`, and last the same wheel installed in `python3`'s
//! environment (`pip install nvidia-cuda-nvcc-cu12`).
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// The environment variable naming the `ptxas` to use.
pub const PTXAS_VAR: &str = "PTXAS";
/// The environment variable naming the `libdevice.10.bc` to link.
pub const LIBDEVICE_VAR: &str = "CUDA_KERNELS_LIBDEVICE";
/// The `nvidia-cuda-nvcc-cu12` wheel's folder inside `.tools/ptxas`.
const WHEEL_IN_TOOLS: &str = ".tools/ptxas/nvidia/cuda_nvcc";
/// The CUDA toolkit's usual root.
const CUDA_ROOT: &str = "/usr/local/cuda";
/// `ptxas` inside a CUDA root or the wheel's folder.
const PTXAS_IN_ROOT: &str = "bin/ptxas";
/// libdevice inside a CUDA root or the wheel's folder.
const LIBDEVICE_IN_ROOT: &str = "nvvm/libdevice/libdevice.10.bc";

/// Where a tool was looked for, in order, before the `python3` wheel (which
/// costs a process start and is asked only when none of these has it).
///
/// `env` is the environment variable's value, `on_path` the bare name to
/// run from `PATH` (for `ptxas`), `in_root` the tool's path inside a CUDA
/// root or the wheel's folder, `start` the folder whose ancestors may hold
/// `.tools`.
pub(crate) fn candidates(
    env: Option<OsString>,
    on_path: Option<&str>,
    in_root: &str,
    start: &Path,
) -> Vec<PathBuf> {
    let mut found: Vec<PathBuf> = env
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .into_iter()
        .collect();
    found.extend(on_path.map(PathBuf::from));
    found.extend(
        start
            .ancestors()
            .map(|dir| dir.join(WHEEL_IN_TOOLS).join(in_root))
            .filter(|p| p.exists()),
    );
    found.push(Path::new(CUDA_ROOT).join(in_root));
    found
}

/// The folder of the `nvidia-cuda-nvcc-cu12` wheel installed for `python3`,
/// if any.
fn python_wheel() -> Option<PathBuf> {
    let out = Command::new("python3")
        .args([
            "-c",
            "import nvidia.cuda_nvcc as m; print(list(m.__path__)[0])",
        ])
        .stderr(Stdio::null())
        .output()
        .ok()?;
    let dir = String::from_utf8(out.stdout).ok()?;
    (out.status.success() && !dir.trim().is_empty()).then(|| PathBuf::from(dir.trim()))
}

/// Whether `ptxas --version` runs and succeeds.
fn runs(ptxas: &Path) -> bool {
    Command::new(ptxas)
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// The first `ptxas` that runs: `$PTXAS`, `ptxas` on `PATH`, the wheel in
/// `.tools/ptxas` above `start`, `/usr/local/cuda/bin/ptxas`, the wheel in
/// `python3`'s environment. `None` when none does.
pub fn find_ptxas(start: &Path) -> Option<PathBuf> {
    let list = candidates(
        std::env::var_os(PTXAS_VAR),
        Some("ptxas"),
        PTXAS_IN_ROOT,
        start,
    );
    list.into_iter().find(|p| runs(p)).or_else(|| {
        python_wheel()
            .map(|w| w.join(PTXAS_IN_ROOT))
            .filter(|p| runs(p))
    })
}

/// The `libdevice.10.bc` to link, with every place looked at (for the error
/// when there is none): `$CUDA_KERNELS_LIBDEVICE`, the wheel in `.tools/ptxas`
/// above `start`, `/usr/local/cuda/nvvm/libdevice/`, the wheel in `python3`'s
/// environment.
///
/// A `$CUDA_KERNELS_LIBDEVICE` that names no file is not passed over: it is
/// the only place looked at, so that a wrong setting is reported, not hidden.
pub fn find_libdevice(start: &Path) -> (Option<PathBuf>, Vec<PathBuf>) {
    if let Some(set) = std::env::var_os(LIBDEVICE_VAR).filter(|v| !v.is_empty()) {
        let path = PathBuf::from(set);
        return (path.is_file().then(|| path.clone()), vec![path]);
    }
    let mut searched = candidates(None, None, LIBDEVICE_IN_ROOT, start);
    if let Some(found) = searched.iter().find(|p| p.is_file()) {
        return (Some(found.clone()), searched);
    }
    if let Some(wheel) = python_wheel() {
        let path = wheel.join(LIBDEVICE_IN_ROOT);
        searched.push(path.clone());
        if path.is_file() {
            return (Some(path), searched);
        }
    }
    (None, searched)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_environment_comes_first_then_path_then_tools_folders_then_cuda() {
        let root = std::env::temp_dir().join(format!("ckb-tools-{}", std::process::id()));
        let crate_dir = root.join("ws/kernels-host");
        let wheel_ptxas = root.join("ws").join(WHEEL_IN_TOOLS).join(PTXAS_IN_ROOT);
        std::fs::create_dir_all(wheel_ptxas.parent().unwrap()).unwrap();
        std::fs::create_dir_all(&crate_dir).unwrap();
        std::fs::write(&wheel_ptxas, "").unwrap();
        let list = candidates(
            Some("/opt/my/ptxas".into()),
            Some("ptxas"),
            PTXAS_IN_ROOT,
            &crate_dir,
        );
        assert_eq!(
            list,
            [
                PathBuf::from("/opt/my/ptxas"),
                PathBuf::from("ptxas"),
                wheel_ptxas,
                PathBuf::from("/usr/local/cuda/bin/ptxas"),
            ]
        );
        // An empty variable counts as unset; a folder without `.tools` adds none.
        let list = candidates(Some("".into()), None, LIBDEVICE_IN_ROOT, &root);
        assert_eq!(
            list,
            [PathBuf::from(
                "/usr/local/cuda/nvvm/libdevice/libdevice.10.bc"
            )]
        );
        std::fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn a_missing_ptxas_does_not_run() {
        assert!(!runs(Path::new("/nonexistent/ptxas")));
    }
}
