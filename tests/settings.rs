//! The settings table of `docs/setup.md` is complete: every
//! `CUDA_KERNELS_*` name the code, the build scripts and the shell scripts
//! read appears in it (the internal child-process markers of the tests,
//! `CUDA_KERNELS_TEST_*`, and the device-side fault symbol aside).
use std::collections::BTreeSet;
use std::path::Path;

/// The `CUDA_KERNELS_*` names in `text`.
fn names(text: &str) -> BTreeSet<String> {
    let mut found = BTreeSet::new();
    let mut rest = text;
    while let Some(at) = rest.find("CUDA_KERNELS_") {
        let tail = &rest[at..];
        let end = tail
            .find(|c: char| !(c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_'))
            .unwrap_or(tail.len());
        let name = tail[..end].trim_end_matches('_');
        // `DEP_CUDA_KERNELS_…` is cargo's `links` metadata, not a setting.
        let dep = rest[..at].ends_with("DEP_");
        if !dep && name.len() > "CUDA_KERNELS_".len() {
            found.insert(name.to_string());
        }
        rest = &tail[end.max(1)..];
    }
    found
}

fn walk(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        let name = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
        if p.is_dir() {
            if !matches!(name, "target" | ".git" | "tests") && !name.starts_with('.') {
                walk(&p, out);
            }
        } else if name.ends_with(".rs") || name.ends_with(".sh") {
            out.push(p);
        }
    }
}

#[test]
fn every_setting_the_code_reads_is_in_the_table() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let doc = std::fs::read_to_string(root.join("docs/setup.md")).expect("docs/setup.md");
    let table = names(&doc);
    let mut files = Vec::new();
    for dir in [
        "runtime", "host", "device", "builder", "cli", "capi", "src", "scripts",
    ] {
        walk(&root.join(dir), &mut files);
    }
    files.push(root.join("build.rs"));
    let mut missing = BTreeSet::new();
    for f in &files {
        let text = std::fs::read_to_string(f).unwrap_or_default();
        for name in names(&text) {
            let internal =
                name.starts_with("CUDA_KERNELS_TEST_") || name == "CUDA_KERNELS_FAULT_RECORD";
            if !internal && !table.contains(&name) {
                missing.insert(format!(
                    "{name} ({})",
                    f.strip_prefix(root).unwrap_or(f).display()
                ));
            }
        }
    }
    assert!(
        missing.is_empty(),
        "settings read by the code but not in docs/setup.md's table: {missing:?}"
    );
}

/// The scan finds what it should (its own planted fault: a name missing
/// from a table).
#[test]
fn the_scan_catches_a_missing_name() {
    let code = r#"std::env::var("CUDA_KERNELS_NEW_KNOB"); const X: &str = "CUDA_KERNELS_SIM";"#;
    let table = names("| `CUDA_KERNELS_SIM=1` | run | … |");
    let read = names(code);
    assert_eq!(
        read.difference(&table).collect::<Vec<_>>(),
        ["CUDA_KERNELS_NEW_KNOB"]
    );
    assert!(names("DEP_CUDA_KERNELS_GPU_MANIFEST_DIR").is_empty());
}
