//! The builder run on small kernel crates (`tests/fixtures/`): the inner
//! nvptx64 build happens for real (CPU only, no GPU), in a target directory
//! of its own under cargo's test scratch folder.
use std::path::{Path, PathBuf};

use cuda_kernels_builder::{Error, KernelBuild};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

/// A fresh out directory for one test, and the shared inner target directory.
fn dirs(test: &str) -> (PathBuf, PathBuf) {
    let tmp = Path::new(env!("CARGO_TARGET_TMPDIR"));
    let out = tmp.join("builder-tests").join(test);
    let _ = std::fs::remove_dir_all(&out);
    (out, tmp.join("builder-tests/nvptx"))
}

#[test]
fn a_kernel_crate_builds_to_ptx_with_libdevice_linked() {
    let (out, target) = dirs("tiny");
    let built = KernelBuild::new(fixture("tiny"))
        .arch("sm_70")
        .cubins(&["sm_80"])
        .out_dir(&out)
        .target_dir(&target)
        .build()
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(built.name, "tiny_kernels");
    assert_eq!(built.ptx, out.join("tiny_kernels.ptx"));
    let ptx = std::fs::read_to_string(&built.ptx).unwrap();
    // The image's identity, the kernel crate's library name, comes first.
    let mark = format!("{}tiny_kernels\n", cuda_kernels_builder::IMAGE_MARK);
    assert!(ptx.starts_with(&mark), "{ptx}");
    assert!(ptx.contains(".visible .entry scale_sin("), "{ptx}");
    assert!(ptx.lines().any(|l| l.trim() == ".target sm_70"), "{ptx}");
    let list = std::fs::read_to_string(&built.cubins_rs).unwrap();
    // Linked: `__nv_sinf` is inlined, not left as an extern call.
    assert!(
        built.libdevice.is_some(),
        "libdevice not found: the build should have failed"
    );
    assert!(!ptx.contains(".extern .func"), "{ptx}");
    // The sm_80 build is a build of its own: its cfg-gated kernel is in its
    // PTX, not in the portable one.
    assert!(!ptx.contains("only_on_sm80"), "{ptx}");
    assert_eq!(
        built.arch_ptx,
        [("sm_80".to_string(), out.join("tiny_kernels.sm_80.ptx"))]
    );
    let sm80 = std::fs::read_to_string(&built.arch_ptx[0].1).unwrap();
    assert!(sm80.lines().any(|l| l.trim() == ".target sm_80"), "{sm80}");
    assert!(sm80.contains(".visible .entry only_on_sm80("), "{sm80}");
    match &built.ptxas {
        Some(_) => {
            assert_eq!(built.cubins.len(), 1);
            assert_eq!(built.cubins[0].sm, 80);
            assert_eq!(built.cubins[0].path, out.join("tiny_kernels.sm_80.cubin"));
            assert!(built.cubins[0].resources.iter().all(|r| r.registers > 0));
            let elf = std::fs::read(&built.cubins[0].path).unwrap();
            assert_eq!(&elf[..4], b"\x7fELF");
            assert!(
                list.contains("Cubin { sm: 80, image: include_bytes!("),
                "{list}"
            );
        }
        None => assert_eq!(list, "&[\n\n]\n"),
    }
}

/// The error of building the fixture `name`, which must fail.
fn failed_build(name: &str) -> Error {
    let (out, target) = dirs(name);
    KernelBuild::new(fixture(name))
        .out_dir(&out)
        .target_dir(&target)
        .build()
        .unwrap_err()
}

#[test]
fn rustcs_errors_reach_the_builders_error_with_file_and_line() {
    let err = failed_build("broken");
    let text = err.to_string();
    println!("{text}");
    assert!(matches!(err, Error::Compile { .. }), "{text}");
    assert!(text.contains("error[E0308]: mismatched types"), "{text}");
    assert!(text.contains("src/lib.rs:7:"), "{text}");
    assert!(text.contains("does not compile for nvptx64"), "{text}");
}

#[test]
fn two_kernels_of_one_name_are_one_line_naming_both_crates() {
    let err = failed_build("collision");
    let text = err.to_string();
    println!("{text}");
    assert!(matches!(err, Error::DuplicateEntry { .. }), "{text}");
    assert_eq!(text.lines().count(), 1, "{text}");
    assert!(
        text.contains("`scale`")
            && text.contains("`collision_kernels`")
            && text.contains("`collision_dep`"),
        "{text}"
    );
}

/// The one-line error of building `crate_dir` for `arch`, which must fail
/// before any inner build.
fn refused(crate_dir: &Path, arch: &str) -> String {
    let (out, target) = dirs("refused");
    let text = KernelBuild::new(crate_dir)
        .arch(arch)
        .out_dir(&out)
        .target_dir(&target)
        .build()
        .unwrap_err()
        .to_string();
    println!("{text}");
    assert_eq!(text.lines().count(), 1, "{text}");
    text
}

#[test]
fn bad_input_is_one_line_naming_the_file_or_value_and_the_fix() {
    let tmp = Path::new(env!("CARGO_TARGET_TMPDIR")).join("builder-tests/bad-input");
    let _ = std::fs::remove_dir_all(&tmp);
    let missing = tmp.join("no-such-crate");
    let text = refused(&missing, "sm_70");
    assert!(
        text.starts_with(&format!("no kernel crate at {}:", missing.display())),
        "{text}"
    );
    let binary = tmp.join("binary");
    std::fs::create_dir_all(binary.join("src")).unwrap();
    std::fs::write(binary.join("Cargo.toml"), "[package]\nname = \"b\"\n").unwrap();
    std::fs::write(binary.join("src/main.rs"), "fn main() {}\n").unwrap();
    let text = refused(&binary, "sm_70");
    assert!(
        text.contains(&format!(
            "{} has no library",
            binary.join("Cargo.toml").display()
        )) && text.contains("add src/lib.rs"),
        "{text}"
    );
    std::fs::write(binary.join("src/lib.rs"), "pub fn f() {}\n").unwrap();
    let text = refused(&binary, "sm_70");
    assert!(
        text.contains(&format!(
            "{} is not no_std",
            binary.join("src/lib.rs").display()
        )) && text.contains("#![cfg_attr(target_arch = \"nvptx64\", no_std)]"),
        "{text}"
    );
    let text = refused(&fixture("tiny"), "sm_999");
    assert!(
        text.starts_with("\"sm_999\" is not a GPU architecture rustc's NVPTX backend knows")
            && text.contains("sm_90a")
            && text.ends_with("(`.arch(\"sm_80\")`)"),
        "{text}"
    );
    let text = refused(&fixture("tiny"), "compute_80");
    assert!(
        text.starts_with("\"compute_80\" is not a GPU architecture like sm_70"),
        "{text}"
    );
    std::fs::remove_dir_all(&tmp).unwrap();
}
