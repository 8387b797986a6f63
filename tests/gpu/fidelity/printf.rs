//! Device printf, run in a child process: C's formatting, the GPU's
//! misprints, the FIFO's limit.
use super::*;

/// The printf child: runs the case named by `spec` (`<entry>` or
/// `<entry>@<FIFO bytes>`, the FIFO set first), then prints the FIFO's size
/// as `FIFO <bytes>` on stderr; a failure is printed on stderr.
pub(super) fn printf_child(gpu: &Gpu, spec: &str) -> std::process::ExitCode {
    let (name, fifo) = spec.split_once('@').unwrap_or((spec, ""));
    let run = || -> Result<(), String> {
        let case = FIDELITY_CASES
            .iter()
            .find(|c| c.kernel.name() == name)
            .ok_or_else(|| format!("no case {name}"))?;
        if let Ok(bytes) = fifo.parse() {
            gpu.set_printf_fifo_bytes(bytes)
                .map_err(|e| e.to_string())?;
        }
        gpu.fidelity_case(case).map_err(|e| e.to_string())?;
        let fifo = gpu.printf_fifo_bytes().map_err(|e| e.to_string())?;
        eprintln!("FIFO {fifo}");
        Ok(())
    };
    match run() {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("{e}");
            std::process::ExitCode::FAILURE
        }
    }
}

/// The lines of `out`'s stdout that start with `[`.
fn bracket_lines(out: &std::process::Output) -> Vec<&[u8]> {
    out.stdout
        .split(|&b| b == b'\n')
        .filter(|l| l.first() == Some(&b'['))
        .collect()
}

/// The C standard's text for each line `fid_printf_formats` prints.
const PRINTF_LINES: &[&[u8]] = &[
    b"[0a1a7c86]",
    b"[beef    ]",
    b"[     007]",
    b"[+5  5 -5]",
    b"[010]",
    b"[0]",
    b"[010 0xff 0XFF 0]",
    b"[]",
    b"[\xe9]",
    b"[A]",
    b"[4294967295]",
    b"[-9223372036854775808]",
    b"[123456789abcdef0]",
    b"[-nan]",
    b"[nan INF]",
    b"[1.234568e+04]",
    b"[0.0001234 1.23457e+08]",
    b"[1E-10]",
    b"[2.001  -1.23e+03]",
    b"[0x1p+0]",
    b"[0X1P-1]",
    b"[0x1.999999999999ap-4]",
    b"[  3.2|2.50   |-001.50]",
    b"[%]",
    b"[4464]",
    b"[4464]",
];

pub(super) fn printf_formats_as_c(gpu: &Gpu) -> Result<(), Failed> {
    let out = child(gpu, PRINTF_CHILD, k::FID_PRINTF_FORMATS.name())?;
    ensure(out.status.success(), || {
        format!("child failed: {}", String::from_utf8_lossy(&out.stderr))
    })?;
    let got = bracket_lines(&out);
    let bad: Vec<String> = PRINTF_LINES
        .iter()
        .enumerate()
        .filter(|(i, want)| got.get(*i) != Some(*want))
        .map(|(i, want)| {
            format!(
                "line {i}: {:?} want {:?}",
                got.get(i).map(|g| g.escape_ascii().to_string()),
                want.escape_ascii().to_string()
            )
        })
        .collect();
    ensure(bad.is_empty() && got.len() == PRINTF_LINES.len(), || {
        format!("{} lines; differences:\n{}", got.len(), bad.join("\n"))
    })
}

/// The C standard's text of each line of `fid_printf_gpu_misprints`, and
/// whether the GPU's `vprintf` misprints it (seen on an H100, driver
/// 580.159.04, the garbage differing between runs: `[0.00|-472274680]`,
/// `[-472274680|0]`, `[   42|9]`,
/// `[44|1751655771]`, `[ff|1751655771]`, `[5|-472274680]`,
/// `[4294967291|-472274680]`, `[end 9]`).
const MISPRINT_LINES: &[(&[u8], bool)] = &[
    (b"[3.14|9]", true),
    (b"[007|9]", true),
    (b"[   42|9]", false),
    (b"[44|9]", true),
    (b"[ff|9]", true),
    (b"[5|9]", true),
    (b"[-5|9]", true),
    (b"[end 9]", false),
];

/// What the GPU's `vprintf` misprints (`fid_printf_gpu_misprints`: a
/// precision from `*`, `hh`, `z`, `t`) is a located finding on the
/// simulator, on the kernel's first line. On the GPU each of those lines
/// differs from the C text and the others do not (printed here for the
/// record): a GPU that prints them right fails this test, and then the
/// finding should go.
pub(super) fn printf_gpu_misprints_are_findings(gpu: &Gpu) -> Result<(), Failed> {
    let out = child(gpu, PRINTF_CHILD, k::FID_PRINTF_GPU_MISPRINTS.name())?;
    let (lines, stderr) = (bracket_lines(&out), String::from_utf8_lossy(&out.stderr));
    if simulated(gpu) {
        return ensure(
            !out.status.success()
                && lines.is_empty()
                && stderr.contains("fidelity.rs:")
                && stderr.contains("printf conversion `%.*f`"),
            || format!("expected a located finding on `%.*f`, got {lines:?} and {stderr}"),
        );
    }
    let mut bad = Vec::new();
    for (i, &(c_text, misprinted)) in MISPRINT_LINES.iter().enumerate() {
        let got = lines.get(i).copied().unwrap_or_default();
        eprintln!("GPU printed: {}", got.escape_ascii());
        if (got != c_text) != misprinted {
            bad.push(format!(
                "line {i}: {} (C: {}, misprint expected: {misprinted})",
                got.escape_ascii(),
                c_text.escape_ascii()
            ));
        }
    }
    ensure(out.status.success() && bad.is_empty(), || {
        format!("{}\n{stderr}", bad.join("\n"))
    })
}

/// A FIFO record of `fid_printf_per_thread` on the simulator: 16 bytes and
/// its one 4-byte argument rounded up to 8 (`docs/simulator.md`).
const PER_THREAD_RECORD_BYTES: usize = 16 + 8;

/// `cudaLimitPrintfFifoSize` set on both backends
/// ([`Gpu::set_printf_fifo_bytes`]), 65,536 threads printing a line each:
/// with 16 MiB every line passes; 8 KiB reads back as the driver's smallest
/// FIFO, 512 KiB, and lines are dropped (on the simulator exactly those past
/// the FIFO's bytes, counted on stderr; on the GPU, which drains the FIFO
/// while the kernel runs, some: 15,794–20,565 on an H100); with the default the
/// counts are printed (the GPU's 8,650,752-byte default kept 33,792 lines
/// on an H100, the simulator's 1 MiB keeps 43,690).
pub(super) fn printf_fifo_limit_drops_lines(gpu: &Gpu) -> Result<(), Failed> {
    use cuda_kernels::simulator::PRINTF_FIFO_MIN_BYTES;
    let case = case_of(k::FID_PRINTF_PER_THREAD, None);
    let total = (case.grid[0] * case.block[0]) as usize;
    for fifo in [Some(16 << 20), Some(8 << 10), None] {
        let spec = match fifo {
            Some(b) => format!("{}@{b}", case.kernel.name()),
            None => case.kernel.name().to_string(),
        };
        let out = child(gpu, PRINTF_CHILD, &spec)?;
        let stderr = String::from_utf8_lossy(&out.stderr);
        let printed = bracket_lines(&out)
            .iter()
            .filter(|l| l.starts_with(b"[fifo "))
            .count();
        let read_back = stderr
            .lines()
            .find_map(|l| l.strip_prefix("FIFO ")?.parse::<usize>().ok());
        eprintln!(
            "printf FIFO {spec} ({read_back:?} bytes) on the {}: {printed} of {total} lines",
            if simulated(gpu) { "simulator" } else { "GPU" }
        );
        let bytes = match fifo {
            Some(b) => b.max(PRINTF_FIFO_MIN_BYTES),
            None if simulated(gpu) => 1 << 20,
            None => read_back.unwrap_or_default(),
        };
        ensure(out.status.success() && read_back == Some(bytes), || {
            format!("{spec}: the child failed or its FIFO is not {bytes}: {stderr}")
        })?;
        let kept = (bytes / PER_THREAD_RECORD_BYTES).min(total);
        let dropped = format!("{} printf lines dropped", total - kept);
        match (fifo, simulated(gpu)) {
            (Some(b), _) if b >= total * PER_THREAD_RECORD_BYTES => {
                ensure(printed == total, || format!("{spec}: {printed} lines"))?
            }
            (_, true) => ensure(printed == kept && stderr.contains(&dropped), || {
                format!("{spec}: {printed} lines, want {kept} and {dropped:?}: {stderr}")
            })?,
            (Some(_), false) => ensure(printed > 0 && printed < total, || {
                format!("{spec}: {printed} lines: none dropped")
            })?,
            (None, false) => {}
        }
    }
    Ok(())
}
