//! Finding the CUDA tools the build uses: `ptxas` and NVIDIA's libdevice.
//!
//! Both are searched for in the same places, in this order: an environment
//! variable, the `PATH` (`ptxas` only), the CUDA roots `$CUDA_HOME` and
//! `$CUDA_PATH`, the `nvidia-cuda-nvcc-cu12` wheel in a `.tools/ptxas` folder
//! of the crate's folder or any folder above it (where this project's
//! `scripts/setup.sh` installs it), the same wheel in the user's cache
//! (`$XDG_CACHE_HOME/cuda-kernels/ptxas`, else `~/.cache/cuda-kernels/ptxas`,
//! which `scripts/setup.sh` fills too), the CUDA toolkit in
//! `/usr/local/cuda`, and last the wheel installed for any Python on `PATH`
//! (`python3`, `python`: `pip install nvidia-cuda-nvcc-cu12`).
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// The environment variable naming the `ptxas` to use.
pub const PTXAS_VAR: &str = "PTXAS";
/// The environment variable naming the `libdevice.10.bc` to link.
pub const LIBDEVICE_VAR: &str = "CUDA_KERNELS_LIBDEVICE";
/// The variables naming a CUDA root, in the order they are asked.
pub const CUDA_ROOT_VARS: [&str; 2] = ["CUDA_HOME", "CUDA_PATH"];
/// The one command that installs both tools where the search finds them.
pub const INSTALL_LINE: &str = "pip install nvidia-cuda-nvcc-cu12";
/// The `nvidia-cuda-nvcc-cu12` wheel's folder inside a `--target` install
/// (`.tools/ptxas`, the cache).
const WHEEL_IN_TARGET: &str = "nvidia/cuda_nvcc";
/// The CUDA toolkit's usual root.
const CUDA_ROOT: &str = "/usr/local/cuda";
/// `ptxas` inside a CUDA root or the wheel's folder.
const PTXAS_IN_ROOT: &str = "bin/ptxas";
/// libdevice inside a CUDA root or the wheel's folder.
const LIBDEVICE_IN_ROOT: &str = "nvvm/libdevice/libdevice.10.bc";

/// The user's cache folder the project's set-up installs the wheel into:
/// `$XDG_CACHE_HOME/cuda-kernels/ptxas`, else `$HOME/.cache/cuda-kernels/ptxas`.
pub fn cache_dir() -> Option<PathBuf> {
    let var = |name| std::env::var_os(name).filter(|v| !v.is_empty());
    let cache = var("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| var("HOME").map(|h| Path::new(&h).join(".cache")))?;
    Some(cache.join("cuda-kernels").join("ptxas"))
}

/// The folders, in order, that may hold a CUDA root's layout (`bin/ptxas`,
/// `nvvm/libdevice/`) before the Python wheels: `$CUDA_HOME`, `$CUDA_PATH`
/// (`roots`), the wheel in every `.tools/ptxas` at or above `start`, the
/// wheel in `cache`, `/usr/local/cuda`.
pub(crate) fn roots(
    roots: &[Option<OsString>],
    start: &Path,
    cache: Option<&Path>,
) -> Vec<PathBuf> {
    let mut found: Vec<PathBuf> = roots
        .iter()
        .flatten()
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .collect();
    found.extend(
        start
            .ancestors()
            .map(|dir| dir.join(".tools/ptxas").join(WHEEL_IN_TARGET))
            .filter(|p| p.exists()),
    );
    found.extend(cache.map(|c| c.join(WHEEL_IN_TARGET)));
    found.push(PathBuf::from(CUDA_ROOT));
    found
}

/// Where a tool was looked for, in order, before the Python wheels (which
/// cost a process start each and are asked only when none of these has it).
///
/// `env` is the tool's own environment variable's value, `on_path` the bare
/// name to run from `PATH` (for `ptxas`), `in_root` the tool's path inside a
/// CUDA root or the wheel's folder, `start` the folder whose ancestors may
/// hold `.tools`.
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
    let vars: Vec<_> = CUDA_ROOT_VARS.iter().map(std::env::var_os).collect();
    found.extend(
        roots(&vars, start, cache_dir().as_deref())
            .into_iter()
            .map(|root| root.join(in_root)),
    );
    found
}

/// The folders of the `nvidia-cuda-nvcc-cu12` wheel installed for each
/// Python on `PATH` (`python3`, then `python` when it is another one).
fn python_wheels() -> Vec<PathBuf> {
    let mut found: Vec<PathBuf> = Vec::new();
    for python in ["python3", "python"] {
        let Ok(out) = Command::new(python)
            .args([
                "-c",
                "import nvidia.cuda_nvcc as m; print(list(m.__path__)[0])",
            ])
            .stderr(Stdio::null())
            .output()
        else {
            continue;
        };
        let dir = String::from_utf8_lossy(&out.stdout).trim().to_string();
        if out.status.success() && !dir.is_empty() && !found.contains(&PathBuf::from(&dir)) {
            found.push(PathBuf::from(dir));
        }
    }
    found
}

/// What [`find_ptxas`] and [`find_libdevice`] say where nothing was found:
/// every place looked at, in order, then the Python wheels' place.
pub(crate) const PYTHON_PLACE: &str =
    "the nvidia-cuda-nvcc-cu12 wheel of python3 and python on PATH";

/// Whether `ptxas --version` runs and succeeds.
fn runs(ptxas: &Path) -> bool {
    Command::new(ptxas)
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// The first `ptxas` that runs, and every place looked at (for the
/// message when there is none): `$PTXAS`, `ptxas` on `PATH`, then
/// `bin/ptxas` of each folder of the module docs' order, then of the wheel
/// of each Python on `PATH`.
pub fn find_ptxas(start: &Path) -> (Option<PathBuf>, Vec<PathBuf>) {
    let mut searched = candidates(
        std::env::var_os(PTXAS_VAR),
        Some("ptxas"),
        PTXAS_IN_ROOT,
        start,
    );
    if let Some(found) = searched.iter().find(|p| runs(p)) {
        return (Some(found.clone()), searched);
    }
    for wheel in python_wheels() {
        let path = wheel.join(PTXAS_IN_ROOT);
        searched.push(path.clone());
        if runs(&path) {
            return (Some(path), searched);
        }
    }
    searched.push(PathBuf::from(PYTHON_PLACE));
    (None, searched)
}

/// The `libdevice.10.bc` to link, with every place looked at (for the error
/// when there is none): `$CUDA_KERNELS_LIBDEVICE`, then
/// `nvvm/libdevice/libdevice.10.bc` of each folder of the module docs'
/// order, then of the wheel of each Python on `PATH`.
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
    for wheel in python_wheels() {
        let path = wheel.join(LIBDEVICE_IN_ROOT);
        searched.push(path.clone());
        if path.is_file() {
            return (Some(path), searched);
        }
    }
    searched.push(PathBuf::from(PYTHON_PLACE));
    (None, searched)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_environment_comes_first_then_cuda_roots_then_tools_folders_then_the_cache() {
        let root = std::env::temp_dir().join(format!("ckb-tools-{}", std::process::id()));
        let crate_dir = root.join("ws/kernels-host");
        let wheel = root.join("ws/.tools/ptxas").join(WHEEL_IN_TARGET);
        std::fs::create_dir_all(&wheel).unwrap();
        std::fs::create_dir_all(&crate_dir).unwrap();
        let list = roots(
            &[Some("/opt/cuda-12".into()), None],
            &crate_dir,
            Some(Path::new("/home/u/.cache/cuda-kernels/ptxas")),
        );
        assert_eq!(
            list,
            [
                PathBuf::from("/opt/cuda-12"),
                wheel,
                PathBuf::from("/home/u/.cache/cuda-kernels/ptxas/nvidia/cuda_nvcc"),
                PathBuf::from("/usr/local/cuda"),
            ]
        );
        // An empty variable counts as unset; a folder without `.tools` adds none.
        assert_eq!(
            roots(&[Some("".into())], &root, None),
            [PathBuf::from("/usr/local/cuda")]
        );
        let ptxas = candidates(
            Some("/opt/my/ptxas".into()),
            Some("ptxas"),
            PTXAS_IN_ROOT,
            &root,
        );
        assert_eq!(
            ptxas[..2],
            [PathBuf::from("/opt/my/ptxas"), PathBuf::from("ptxas")]
        );
        assert_eq!(
            ptxas.last(),
            Some(&PathBuf::from("/usr/local/cuda/bin/ptxas"))
        );
        std::fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn a_missing_ptxas_does_not_run() {
        assert!(!runs(Path::new("/nonexistent/ptxas")));
    }
}
