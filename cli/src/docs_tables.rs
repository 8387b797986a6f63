//! The generated tables of `README.md` and `docs/*.md` (`cuda-kernels
//! docs-tables [--check]`). Each sits between a begin line that names the
//! command rendering it, `<!-- NAME:begin (COMMAND) -->`, and
//! `<!-- NAME:end -->`:
//! - `bench-table`: a bench run's table, rendered from the JSON that its
//!   command names (`--json docs/bench/….json`);
//! - `kernel-table`: every PTX entry point of the built-in kernels, by the
//!   family list that declares it ([`cuda_kernels::kernels::KERNEL_LISTS`]).
//!
//! `docs-tables` rewrites them all from their sources; with `--check` it
//! writes nothing and fails naming the files whose tables are out of date
//! (a test runs it, so a new kernel or bench run cannot leave them stale).
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use crate::demos::bench_table::BenchRun;

/// The command that regenerates every table, from the repository root.
pub const REGENERATE: &str = "cargo run -p cuda-kernels-cli -- docs-tables";

/// The begin line of the entry-point table.
pub const KERNEL_TABLE_BEGIN: &str = "<!-- kernel-table:begin (cuda-kernels docs-tables) -->";

/// The files that may hold generated tables: `README.md` and every
/// `docs/*.md` under `root`, sorted.
pub fn files(root: &Path) -> Result<Vec<PathBuf>, String> {
    let docs = root.join("docs");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&docs)
        .map_err(|e| format!("{}: {e}", docs.display()))?
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "md"))
        .collect();
    files.sort();
    files.insert(0, root.join("README.md"));
    Ok(files)
}

/// `text` with every generated table rendered again from its source
/// (bench JSON paths relative to `root`); an error names a begin line
/// without its end, an unknown table, or a source that cannot be read.
pub fn regenerate(root: &Path, text: &str) -> Result<String, String> {
    let mut out = String::with_capacity(text.len());
    let mut lines = text.split_inclusive('\n');
    while let Some(line) = lines.next() {
        let Some((name, command)) = begin_line(line) else {
            out.push_str(line);
            continue;
        };
        let end = format!("<!-- {name}:end -->");
        if !lines.by_ref().any(|l| l.trim_end() == end) {
            return Err(format!("`{}` has no `{end}` after it", line.trim_end()));
        }
        out.push_str(&render(root, name, command)?);
    }
    Ok(out)
}

/// The name and command of a begin line `<!-- NAME:begin (COMMAND) -->`.
fn begin_line(line: &str) -> Option<(&str, &str)> {
    let inner = line
        .trim_end()
        .strip_prefix("<!-- ")?
        .strip_suffix(") -->")?;
    let (name, command) = inner.split_once(":begin (")?;
    Some((name, command))
}

/// The table `name` rendered by `command`, begin and end lines included.
fn render(root: &Path, name: &str, command: &str) -> Result<String, String> {
    match name {
        "bench-table" => {
            let json = command
                .split_whitespace()
                .skip_while(|w| *w != "--json")
                .nth(1)
                .filter(|p| *p != "FILE")
                .ok_or_else(|| format!("`{command}` names no bench JSON (`--json PATH`)"))?;
            let path = root.join(json);
            let text =
                std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
            let run: BenchRun =
                serde_json::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))?;
            Ok(run.to_markdown(command))
        }
        "kernel-table" => Ok(kernel_table()),
        _ => Err(format!("no generated table is called `{name}`")),
    }
}

/// The entry-point table: each list of [`cuda_kernels::kernels::KERNEL_LISTS`]
/// (its path in `kernels-gpu/src`) with its entry points, and the total.
pub fn kernel_table() -> String {
    let lists = cuda_kernels::kernels::KERNEL_LISTS;
    let mut out = format!(
        "{KERNEL_TABLE_BEGIN}\n{} entry points in {} lists, `cuda_kernels_gpu::KERNELS` \
         (generated from `KERNEL_LISTS`).\n\n| list (`kernels-gpu/src`) | entry points |\n|---|---|\n",
        cuda_kernels::kernels::KERNELS.len(),
        lists.len()
    );
    for (path, entries) in lists {
        let entries: Vec<String> = entries.iter().map(|e| format!("`{e}`")).collect();
        let _ = writeln!(out, "| `{path}` | {} |", entries.join(", "));
    }
    out.push_str("<!-- kernel-table:end -->\n");
    out
}

/// Regenerates the tables of every file under `root` ([`files`]): writes
/// the files whose tables changed, or with `check` writes nothing and
/// returns an error naming them and [`REGENERATE`]. Returns the files
/// written (with `check`, none).
pub fn run(root: &Path, check: bool) -> Result<Vec<PathBuf>, String> {
    let mut changed = Vec::new();
    for path in files(root)? {
        let text =
            std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        let new = regenerate(root, &text).map_err(|e| format!("{}: {e}", path.display()))?;
        if new != text {
            if !check {
                std::fs::write(&path, &new).map_err(|e| format!("{}: {e}", path.display()))?;
            }
            changed.push(path);
        }
    }
    if check && !changed.is_empty() {
        let names: Vec<String> = changed
            .iter()
            .map(|p| p.strip_prefix(root).unwrap_or(p).display().to_string())
            .collect();
        return Err(format!(
            "generated tables out of date in {}: regenerate them with `{REGENERATE}` \
             (from the repository root)",
            names.join(", ")
        ));
    }
    Ok(changed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn begin_lines_name_their_table_and_command() {
        assert_eq!(
            begin_line(
                "<!-- bench-table:begin (cuda-kernels bench-table --json a.json --readme README.md) -->\n"
            ),
            Some((
                "bench-table",
                "cuda-kernels bench-table --json a.json --readme README.md"
            ))
        );
        assert_eq!(
            begin_line(KERNEL_TABLE_BEGIN),
            Some(("kernel-table", "cuda-kernels docs-tables"))
        );
        assert_eq!(begin_line("<!-- a comment -->"), None);
    }

    #[test]
    fn stale_tables_are_rendered_again_and_the_rest_kept() {
        let root = Path::new(".");
        let text = format!("intro\n{KERNEL_TABLE_BEGIN}\nold\n<!-- kernel-table:end -->\noutro\n");
        let new = regenerate(root, &text).unwrap();
        assert_eq!(new, format!("intro\n{}outro\n", kernel_table()));
        assert_eq!(regenerate(root, &new).unwrap(), new);
        // Every entry point is in the table, each exactly once.
        for entry in cuda_kernels::kernels::KERNELS {
            assert_eq!(new.matches(&format!("`{entry}`")).count(), 1, "{entry}");
        }
        let unended = format!("{KERNEL_TABLE_BEGIN}\nold\n");
        assert!(
            regenerate(root, &unended)
                .unwrap_err()
                .contains("no `<!-- kernel-table:end -->`")
        );
        let unknown = "<!-- other:begin (x) -->\n<!-- other:end -->\n";
        assert!(regenerate(root, unknown).unwrap_err().contains("`other`"));
        let no_json = "<!-- bench-table:begin (cuda-kernels bench-table --json FILE --readme README.md) -->\n<!-- bench-table:end -->\n";
        assert!(
            regenerate(root, no_json)
                .unwrap_err()
                .contains("names no bench JSON")
        );
    }
}
