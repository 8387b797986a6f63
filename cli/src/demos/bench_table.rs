//! The output of `cuda-kernels bench`: the run as JSON (device, date,
//! records), the console table, and the README's performance table rendered
//! from the JSON (`cuda-kernels bench-table --json FILE [--readme README.md]`),
//! so that the README's numbers are exactly what a bench run measured. The
//! table's first line names that command, JSON included, and
//! `cuda-kernels docs-tables` renders it again from there
//! ([`crate::docs_tables`]).
use std::fmt::Write as _;

use super::{BenchRecord, Check};

/// The start of the line before a rendered table (the command follows).
pub const BEGIN_KEY: &str = "<!-- bench-table:begin";
/// The line after it.
pub const END_MARKER: &str = "<!-- bench-table:end -->";

/// The command that renders the table of the run in `json` into `file`, as
/// the table's first line names it.
pub fn command(json: &str, file: &str) -> String {
    format!("cuda-kernels bench-table --json {json} --readme {file}")
}

/// One `cuda-kernels bench` run, as written by `--json`.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct BenchRun {
    /// The GPU's name.
    pub device: String,
    /// When the run ended, in seconds since 1970-01-01 UTC.
    pub unix_time: u64,
    /// Every record, in the order measured.
    pub records: Vec<BenchRecord>,
    /// Whether the run was `bench --multi` (scaling over several devices).
    #[serde(default)]
    pub multi: bool,
}

impl BenchRun {
    /// A run on `device` that ends now (`multi`: a `bench --multi` run).
    pub fn new(device: String, records: Vec<BenchRecord>, multi: bool) -> Self {
        let unix_time = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        Self {
            device,
            unix_time,
            records,
            multi,
        }
    }

    /// The console table: one line per record, with its ratio and check.
    pub fn to_text(&self) -> String {
        let mut out = String::new();
        for r in &self.records {
            let ratio = match (&r.reference, r.ratio) {
                (Some(reference), Some(x)) => format!("{x:.3} of {reference}"),
                (Some(reference), None) => reference.clone(),
                _ => String::new(),
            };
            let _ = writeln!(
                out,
                "{:<40} {:<22} {:>10.4} ms {:>12.1} {:<11} {:<8} {ratio}",
                r.kernel,
                r.size,
                r.median_ms,
                r.value,
                r.metric,
                check_word(&r.check)
            );
        }
        out
    }

    /// The README's performance table, in Markdown, between the markers;
    /// the first names `command` ([`command`]), which renders it.
    pub fn to_markdown(&self, command: &str) -> String {
        let mut out = format!(
            "{BEGIN_KEY} ({command}) -->\nMeasured by `cuda-kernels bench {}--json` on {} on {} \
             (UTC); every row's result checked against its CPU reference.\n\n\
             | kernel | size | median | result | reference | ratio | check |\n\
             |---|---|---|---|---|---|---|\n",
            if self.multi { "--multi " } else { "" },
            self.device,
            utc_date(self.unix_time)
        );
        for r in &self.records {
            let ratio = r.ratio.map_or("–".into(), |x| format!("{x:.3}"));
            let check = match &r.check {
                Check::Pass(s) => s.clone(),
                Check::Fail(s) => format!("**FAILED**: {s}"),
                Check::Skipped(s) => format!("not checked: {s}"),
            };
            let _ = writeln!(
                out,
                "| `{}` | {} | {} ms | {} {} | {} | {ratio} | {} |",
                r.kernel.trim(),
                r.size,
                number(r.median_ms),
                number(r.value),
                r.metric,
                r.reference.as_deref().unwrap_or("–"),
                check.replace('|', "\\|")
            );
        }
        out.push_str(END_MARKER);
        out.push('\n');
        out
    }
}

fn check_word(c: &Check) -> &'static str {
    match c {
        Check::Pass(_) => "ok",
        Check::Fail(_) => "FAILED",
        Check::Skipped(_) => "no-check",
    }
}

/// A number for people: thousands separated at 1,000 and more, one decimal
/// from 10, three significant digits below.
pub fn number(v: f64) -> String {
    if !v.is_finite() {
        return v.to_string();
    }
    let a = v.abs();
    if a >= 1000.0 {
        let digits = format!("{:.0}", a);
        let mut grouped = String::new();
        for (i, ch) in digits.chars().enumerate() {
            if i > 0 && (digits.len() - i) % 3 == 0 {
                grouped.push(',');
            }
            grouped.push(ch);
        }
        format!("{}{grouped}", if v < 0.0 { "-" } else { "" })
    } else if a >= 10.0 {
        format!("{v:.1}")
    } else if a >= 1.0 {
        format!("{v:.2}")
    } else {
        format!("{v:.3}")
    }
}

/// `YYYY-MM-DD` of a Unix time (UTC), by the civil-from-days algorithm.
pub fn utc_date(unix_time: u64) -> String {
    let days = (unix_time / 86_400) as i64 + 719_468;
    let era = days.div_euclid(146_097);
    let doe = days.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!("{y:04}-{m:02}-{d:02}")
}

/// `text` with everything from the first line starting with [`BEGIN_KEY`]
/// through the [`END_MARKER`] line replaced by `table` (which carries
/// both markers); an error when the markers are missing or out of order.
pub fn replace_between_markers(text: &str, table: &str) -> Result<String, String> {
    let begin = text
        .find(BEGIN_KEY)
        .ok_or_else(|| format!("no `{BEGIN_KEY}` marker"))?;
    let end = text[begin..]
        .find(END_MARKER)
        .map(|e| begin + e + END_MARKER.len())
        .ok_or_else(|| format!("no `{END_MARKER}` marker after the first"))?;
    let end = if text[end..].starts_with('\n') {
        end + 1
    } else {
        end
    };
    Ok(format!("{}{table}{}", &text[..begin], &text[end..]))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run() -> BenchRun {
        BenchRun {
            device: "NVIDIA H100 80GB HBM3".into(),
            unix_time: 1_795_000_000,
            records: vec![
                BenchRecord::new(
                    "matrix_mul_tiled",
                    "4096³ f32",
                    3.5,
                    "GFLOP/s",
                    39_268.4,
                    Check::Pass("within bound".into()),
                )
                .against("cuBLAS SGEMM", 0.78),
                BenchRecord::new(
                    "broken",
                    "2^20",
                    0.1,
                    "GB/s",
                    9_999.0,
                    Check::Fail("element 3".into()),
                )
                .against("device copy", 3.0),
            ],
            multi: false,
        }
    }

    #[test]
    fn renders_from_json_and_replaces_between_markers() {
        let json = serde_json::to_string(&run()).unwrap();
        let back: BenchRun = serde_json::from_str(&json).unwrap();
        assert_eq!(back.records[0].check, Check::Pass("within bound".into()));
        let md = back.to_markdown(&command("run.json", "README.md"));
        assert!(md.starts_with(
            "<!-- bench-table:begin (cuda-kernels bench-table --json run.json --readme README.md) -->\n\
             Measured by `cuda-kernels bench --json` on NVIDIA H100 80GB HBM3 on 2026-11-18"
        ));
        assert!(md.contains("| `matrix_mul_tiled` | 4096³ f32 | 3.50 ms | 39,268 GFLOP/s | cuBLAS SGEMM | 0.780 | within bound |"));
        // A failed row never shows a ratio.
        assert!(md.contains(
            "| `broken` | 2^20 | 0.100 ms | 9,999 GB/s | device copy | – | **FAILED**: element 3 |"
        ));
        assert!(md.contains("2026-11-18"));
        let readme = format!("intro\n{BEGIN_KEY} (old) -->\nold table\n{END_MARKER}\noutro\n");
        let new = replace_between_markers(&readme, &md).unwrap();
        assert_eq!(new, format!("intro\n{md}outro\n"));
        assert!(replace_between_markers("no markers", &md).is_err());
    }

    #[test]
    fn numbers_and_dates() {
        assert_eq!(number(2_940.4), "2,940");
        assert_eq!(number(1_234_567.0), "1,234,567");
        assert_eq!(number(38.26), "38.3");
        assert_eq!(number(0.3461), "0.346");
        assert_eq!(utc_date(0), "1970-01-01");
        assert_eq!(utc_date(951_782_400), "2000-02-29");
    }
}
