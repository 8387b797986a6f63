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
    Some(cache_root()?.join("ptxas"))
}

/// This project's folder in the user's cache: `$XDG_CACHE_HOME/cuda-kernels`,
/// else `$HOME/.cache/cuda-kernels` (the wheel, the kept nvptx sysroots).
pub(crate) fn cache_root() -> Option<PathBuf> {
    let var = |name| std::env::var_os(name).filter(|v| !v.is_empty());
    let cache = var("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| var("HOME").map(|h| Path::new(&h).join(".cache")))?;
    Some(cache.join("cuda-kernels"))
}

/// One place a tool is looked for: the file to try (`None` where there is
/// nothing to try, such as an unset variable), and how an error names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Place {
    /// The file to try.
    pub file: Option<PathBuf>,
    /// The place as a message lists it.
    pub text: String,
}

impl Place {
    fn file(file: PathBuf, origin: &str) -> Self {
        let text = format!("{} ({origin})", file.display());
        Self {
            file: Some(file),
            text,
        }
    }

    fn none(text: String) -> Self {
        Self { file: None, text }
    }
}

/// The folders, in order, that may hold a CUDA root's layout (`bin/ptxas`,
/// `nvvm/libdevice/`) before the Python wheels, each with where it comes
/// from: `$CUDA_HOME`, `$CUDA_PATH` (`vars`: each variable's value), the
/// wheel in every `.tools/ptxas` at or above `start`, the wheel in `cache`,
/// `/usr/local/cuda`. A place with nothing in it (an unset variable, no
/// `.tools` folder, no cache) is listed with its reason and no folder.
pub(crate) fn roots(
    vars: &[(&str, Option<OsString>)],
    start: &Path,
    cache: Option<&Path>,
) -> Vec<(Option<PathBuf>, String)> {
    let mut found: Vec<(Option<PathBuf>, String)> = vars
        .iter()
        .map(
            |(name, value)| match value.as_ref().filter(|v| !v.is_empty()) {
                Some(v) => (Some(PathBuf::from(v)), format!("${name}")),
                None => (None, format!("${name}: unset")),
            },
        )
        .collect();
    let tools: Vec<_> = start
        .ancestors()
        .map(|dir| dir.join(".tools/ptxas").join(WHEEL_IN_TARGET))
        .filter(|p| p.exists())
        .map(|p| (Some(p), "a clone's set-up, .tools/ptxas".to_string()))
        .collect();
    if tools.is_empty() {
        found.push((
            None,
            format!(
                "a .tools/ptxas folder in {} or above it: none",
                start.display()
            ),
        ));
    }
    found.extend(tools);
    found.push(match cache {
        Some(c) => (Some(c.join(WHEEL_IN_TARGET)), cache_origin(c)),
        None => (None, "the cache: $XDG_CACHE_HOME and $HOME unset".into()),
    });
    found.push((Some(PathBuf::from(CUDA_ROOT)), "the CUDA toolkit".into()));
    found
}

/// How a message names the cache `dir`: cuda-kernels' set-up cache, and,
/// where it is a link to a folder that is gone (a clone moved or deleted),
/// that and the fix.
fn cache_origin(dir: &Path) -> String {
    match std::fs::read_link(dir) {
        Ok(target) if !dir.exists() => format!(
            "the set-up cache, a link to {}, which no longer exists: run scripts/setup.sh of a \
             clone again",
            target.display()
        ),
        _ => "the set-up cache of scripts/setup.sh".into(),
    }
}

/// Where a tool is looked for, in order, before the Python wheels (which
/// cost a process start each and are asked only when none of these has it).
///
/// `var` is the tool's own environment variable and its value, `on_path`
/// the bare name to run from `PATH` (for `ptxas`), `in_root` the tool's
/// path inside a CUDA root or the wheel's folder, `start` the folder whose
/// ancestors may hold `.tools`.
pub(crate) fn candidates(
    var: Option<(&str, Option<OsString>)>,
    on_path: Option<&str>,
    in_root: &str,
    start: &Path,
) -> Vec<Place> {
    let mut found = Vec::new();
    if let Some((name, value)) = var {
        found.push(match value.filter(|v| !v.is_empty()) {
            Some(v) => Place::file(PathBuf::from(v), &format!("${name}")),
            None => Place::none(format!("${name}: unset")),
        });
    }
    found.extend(on_path.map(|name| Place::file(PathBuf::from(name), "PATH")));
    let vars: Vec<_> = CUDA_ROOT_VARS
        .iter()
        .map(|&name| (name, std::env::var_os(name)))
        .collect();
    found.extend(
        roots(&vars, start, cache_dir().as_deref())
            .into_iter()
            .map(|(root, origin)| match root {
                Some(root) => Place::file(root.join(in_root), &origin),
                None => Place::none(origin),
            }),
    );
    found
}

/// The folders of the `nvidia-cuda-nvcc-cu12` wheel installed for each
/// Python on `PATH` (`python3`, then `python` when it is another one), or
/// why there is none.
fn python_wheels(in_root: &str) -> Vec<Place> {
    let mut found: Vec<Place> = Vec::new();
    for python in ["python3", "python"] {
        let place = match Command::new(python)
            .args([
                "-c",
                "import nvidia.cuda_nvcc as m; print(list(m.__path__)[0])",
            ])
            .stderr(Stdio::null())
            .output()
        {
            Err(_) => Place::none(format!("{python}: not on PATH")),
            Ok(out) => {
                let dir = String::from_utf8_lossy(&out.stdout).trim().to_string();
                if out.status.success() && !dir.is_empty() {
                    Place::file(
                        Path::new(&dir).join(in_root),
                        &format!("{python}'s nvidia-cuda-nvcc-cu12 wheel"),
                    )
                } else {
                    Place::none(format!(
                        "{python}: no nvidia-cuda-nvcc-cu12 wheel installed"
                    ))
                }
            }
        };
        if place.file.is_none() || !found.iter().any(|p| p.file == place.file) {
            found.push(place);
        }
    }
    found
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

/// The first place of `places`, then of the Python wheels' places, whose
/// file passes `good`, and every place looked at, as messages list them.
fn search(
    places: Vec<Place>,
    in_root: &str,
    good: impl Fn(&Path) -> bool,
) -> (Option<PathBuf>, Vec<String>) {
    let mut searched = Vec::new();
    let mut try_place = |place: Place| {
        searched.push(place.text);
        place.file.filter(|file| good(file))
    };
    // The wheels only when nothing else has the tool: a process start each.
    let found = places
        .into_iter()
        .find_map(&mut try_place)
        .or_else(|| python_wheels(in_root).into_iter().find_map(&mut try_place));
    (found, searched)
}

/// The first `ptxas` that runs, and every place looked at (for the
/// message when there is none): `$PTXAS`, `ptxas` on `PATH`, then
/// `bin/ptxas` of each folder of the module docs' order, then of the wheel
/// of each Python on `PATH`.
pub fn find_ptxas(start: &Path) -> (Option<PathBuf>, Vec<String>) {
    let places = candidates(
        Some((PTXAS_VAR, std::env::var_os(PTXAS_VAR))),
        Some("ptxas"),
        PTXAS_IN_ROOT,
        start,
    );
    search(places, PTXAS_IN_ROOT, runs)
}

/// The `libdevice.10.bc` to link, with every place looked at (for the error
/// when there is none): `$CUDA_KERNELS_LIBDEVICE`, then
/// `nvvm/libdevice/libdevice.10.bc` of each folder of the module docs'
/// order, then of the wheel of each Python on `PATH`.
///
/// A `$CUDA_KERNELS_LIBDEVICE` that names no file is not passed over: it is
/// the only place looked at, so that a wrong setting is reported, not hidden.
pub fn find_libdevice(start: &Path) -> (Option<PathBuf>, Vec<String>) {
    if let Some(set) = std::env::var_os(LIBDEVICE_VAR).filter(|v| !v.is_empty()) {
        let path = PathBuf::from(set);
        let place = Place::file(path.clone(), &format!("${LIBDEVICE_VAR}"));
        return (path.is_file().then_some(path), vec![place.text]);
    }
    let places = candidates(Some((LIBDEVICE_VAR, None)), None, LIBDEVICE_IN_ROOT, start);
    search(places, LIBDEVICE_IN_ROOT, Path::is_file)
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
            &[
                ("CUDA_HOME", Some("/opt/cuda-12".into())),
                ("CUDA_PATH", None),
            ],
            &crate_dir,
            Some(Path::new("/home/u/.cache/cuda-kernels/ptxas")),
        );
        let folders: Vec<_> = list.iter().map(|(f, _)| f.clone()).collect();
        assert_eq!(
            folders,
            [
                Some(PathBuf::from("/opt/cuda-12")),
                None,
                Some(wheel),
                Some(PathBuf::from(
                    "/home/u/.cache/cuda-kernels/ptxas/nvidia/cuda_nvcc"
                )),
                Some(PathBuf::from("/usr/local/cuda")),
            ]
        );
        assert_eq!(list[1].1, "$CUDA_PATH: unset");
        // An empty variable counts as unset; a folder without `.tools` says so.
        let bare = roots(&[("CUDA_HOME", Some("".into()))], &root, None);
        let texts: Vec<_> = bare.iter().map(|(_, t)| t.as_str()).collect();
        assert_eq!(
            texts,
            [
                "$CUDA_HOME: unset",
                &format!(
                    "a .tools/ptxas folder in {} or above it: none",
                    root.display()
                ),
                "the cache: $XDG_CACHE_HOME and $HOME unset",
                "the CUDA toolkit",
            ]
        );
        let ptxas = candidates(
            Some((PTXAS_VAR, Some("/opt/my/ptxas".into()))),
            Some("ptxas"),
            PTXAS_IN_ROOT,
            &root,
        );
        assert_eq!(ptxas[0].text, "/opt/my/ptxas ($PTXAS)");
        assert_eq!(ptxas[1].text, "ptxas (PATH)");
        assert_eq!(
            ptxas.last().and_then(|p| p.file.clone()),
            Some(PathBuf::from("/usr/local/cuda/bin/ptxas"))
        );
        std::fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn a_cache_linked_to_a_clone_that_is_gone_says_so() {
        let root = std::env::temp_dir().join(format!("ckb-cache-{}", std::process::id()));
        std::fs::create_dir_all(&root).unwrap();
        let cache = root.join("ptxas");
        std::os::unix::fs::symlink(root.join("gone/.tools/ptxas"), &cache).unwrap();
        let text = cache_origin(&cache);
        assert!(
            text.contains("gone/.tools/ptxas, which no longer exists: run scripts/setup.sh"),
            "{text}"
        );
        std::fs::remove_dir_all(&root).unwrap();
        assert_eq!(cache_origin(&root), "the set-up cache of scripts/setup.sh");
    }

    #[test]
    fn a_missing_ptxas_does_not_run() {
        assert!(!runs(Path::new("/nonexistent/ptxas")));
    }
}
