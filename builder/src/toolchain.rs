//! The toolchain the inner build runs on, and the components it needs.
use std::path::Path;
use std::process::{Command, Stdio};

/// The rustup components the nvptx64 build needs: `rust-src` for
/// `-Zbuild-std=core`, `llvm-bitcode-linker` (with `llvm-tools`) to link the
/// PTX.
pub const COMPONENTS: [&str; 3] = ["rust-src", "llvm-tools", "llvm-bitcode-linker"];

/// The active toolchain's name: `$RUSTUP_TOOLCHAIN` (rustup sets it for
/// cargo and build scripts), else what `rustup show active-toolchain` says
/// in `dir`. `None` without rustup.
pub fn active_toolchain(dir: &Path) -> Option<String> {
    if let Some(name) = std::env::var("RUSTUP_TOOLCHAIN")
        .ok()
        .filter(|n| !n.is_empty())
    {
        return Some(name);
    }
    let out = Command::new("rustup")
        .args(["show", "active-toolchain"])
        .current_dir(dir)
        .stderr(Stdio::null())
        .output()
        .ok()?;
    let text = String::from_utf8(out.stdout).ok()?;
    let name = text.split_whitespace().next()?;
    out.status.success().then(|| name.to_string())
}

/// Which of [`COMPONENTS`] are missing from `installed`, the output of
/// `rustup component list --installed` (one component a line, most with the
/// host triple appended: `llvm-tools-x86_64-unknown-linux-gnu`).
pub fn missing_components(installed: &str) -> Vec<&'static str> {
    COMPONENTS
        .into_iter()
        .filter(|c| {
            !installed
                .lines()
                .map(str::trim)
                .any(|line| line == *c || line.starts_with(&format!("{c}-")))
        })
        .collect()
}

/// The missing components of `toolchain`, asked of rustup; `None` when
/// rustup cannot say.
pub fn query_missing(toolchain: &str) -> Option<Vec<&'static str>> {
    let out = Command::new("rustup")
        .args(["component", "list", "--installed", "--toolchain", toolchain])
        .stderr(Stdio::null())
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| missing_components(&String::from_utf8_lossy(&out.stdout)))
}

/// The command that installs `missing` for `toolchain` (for the active
/// toolchain when its name is unknown).
pub fn component_add_line(toolchain: Option<&str>, missing: &[&str]) -> String {
    let mut line = format!("rustup component add {}", missing.join(" "));
    if let Some(name) = toolchain {
        line.push_str(" --toolchain ");
        line.push_str(name);
    }
    line
}

/// Which components the inner build's `stderr` says are missing (when
/// rustup cannot be asked).
pub fn components_named_in(stderr: &str) -> Vec<&'static str> {
    let mut found = Vec::new();
    if stderr.contains("rust-src") || stderr.contains("could not find `core`") {
        found.push("rust-src");
    }
    if stderr.contains("llvm-bitcode-linker") || stderr.contains("linker `") {
        found.extend(["llvm-tools", "llvm-bitcode-linker"]);
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    const FULL: &str = "cargo-x86_64-unknown-linux-gnu\nclippy-x86_64-unknown-linux-gnu\n\
        llvm-bitcode-linker-x86_64-unknown-linux-gnu\nllvm-tools-x86_64-unknown-linux-gnu\n\
        rust-src\nrust-std-x86_64-unknown-linux-gnu\nrustc-x86_64-unknown-linux-gnu\n";

    #[test]
    fn a_full_toolchain_misses_nothing() {
        assert!(missing_components(FULL).is_empty());
        let preview = FULL.replace("llvm-tools-x86", "llvm-tools-preview-x86");
        assert!(missing_components(&preview).is_empty());
    }

    #[test]
    fn each_missing_component_is_named_alone() {
        let no_src = FULL.replace("rust-src\n", "");
        assert_eq!(missing_components(&no_src), ["rust-src"]);
        let no_linker = FULL.replace("llvm-bitcode-linker-x86_64-unknown-linux-gnu\n", "");
        assert_eq!(missing_components(&no_linker), ["llvm-bitcode-linker"]);
        let no_tools = FULL.replace("llvm-tools-x86_64-unknown-linux-gnu\n", "");
        assert_eq!(missing_components(&no_tools), ["llvm-tools"]);
        assert_eq!(
            missing_components("rustc-x86_64-unknown-linux-gnu\n"),
            COMPONENTS
        );
    }

    #[test]
    fn the_fix_names_the_toolchain() {
        assert_eq!(
            component_add_line(Some("stable-x86_64-unknown-linux-gnu"), &["rust-src"]),
            "rustup component add rust-src --toolchain stable-x86_64-unknown-linux-gnu"
        );
        assert_eq!(
            component_add_line(None, &COMPONENTS),
            "rustup component add rust-src llvm-tools llvm-bitcode-linker"
        );
    }

    #[test]
    fn stderr_hints_name_components() {
        let no_core = "error[E0463]: can't find crate for `core`\n  = note: the `nvptx64-nvidia-cuda` target may not be installed\n  could not find `core`";
        assert_eq!(components_named_in(no_core), ["rust-src"]);
        let no_linker = "error: linker `llvm-bitcode-linker` not found";
        assert_eq!(
            components_named_in(no_linker),
            ["llvm-tools", "llvm-bitcode-linker"]
        );
        assert!(components_named_in("error[E0308]: mismatched types").is_empty());
    }
}
