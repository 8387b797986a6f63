//! `vprintf` on the host: C format strings over the packed argument buffer
//! of [`PrintfArgs`](crate::print::PrintfArgs) (each argument at its natural
//! alignment, `f32` promoted to `f64`, as `vprintf` reads them).
use std::cell::RefCell;
use std::ffi::CStr;
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};

use super::context;

thread_local! {
    static CAPTURE: RefCell<Option<Vec<u8>>> = const { RefCell::new(None) };
}

/// Runs `f` (which launches simulated kernels on this OS thread) and returns
/// its result with the text the kernels printed with `gpu_printf!`, instead
/// of writing that text to stdout (bytes that are not UTF-8, from `%c` of a
/// byte ≥ 0x80, as U+FFFD).
pub fn capture_printf<R>(f: impl FnOnce() -> R) -> (R, String) {
    let saved = CAPTURE.with(|c| c.borrow_mut().replace(Vec::new()));
    let r = f();
    let text = CAPTURE.with(|c| std::mem::replace(&mut *c.borrow_mut(), saved));
    (
        r,
        String::from_utf8_lossy(&text.unwrap_or_default()).into_owned(),
    )
}

/// Writes a block's printf output (captured, or to stdout), byte for byte.
pub(crate) fn emit(text: &[u8]) {
    if text.is_empty() {
        return;
    }
    let captured = CAPTURE.with(|c| match c.borrow_mut().as_mut() {
        Some(s) => {
            s.extend_from_slice(text);
            true
        }
        None => false,
    });
    if !captured {
        use std::io::Write;
        let mut stdout = std::io::stdout().lock();
        // As `print!`, which panics when stdout is gone: the output is lost.
        let _ = stdout.write_all(text).and_then(|()| stdout.flush());
    }
}

/// The GPU's printf FIFO of one launch: what `vprintf` writes is a record
/// of [`record_bytes`] in a buffer of `capacity` bytes
/// (`cudaLimitPrintfFifoSize`), which the host reads when the launch ends;
/// a record that does not fit is dropped, silently on the GPU, counted here.
#[derive(Debug)]
pub(crate) struct Fifo {
    capacity: usize,
    used: AtomicUsize,
    dropped: AtomicUsize,
}

impl Fifo {
    /// An empty FIFO of `capacity` bytes.
    pub fn new(capacity: usize) -> Fifo {
        Fifo {
            capacity,
            used: AtomicUsize::new(0),
            dropped: AtomicUsize::new(0),
        }
    }

    /// Room for a record of `bytes`: `false` (and one more dropped) when
    /// the FIFO is full.
    fn take(&self, bytes: usize) -> bool {
        let fits = self
            .used
            .fetch_update(Relaxed, Relaxed, |u| {
                (u + bytes <= self.capacity).then_some(u + bytes)
            })
            .is_ok();
        if !fits {
            self.dropped.fetch_add(1, Relaxed);
        }
        fits
    }

    /// The records dropped so far.
    pub fn dropped(&self) -> usize {
        self.dropped.load(Relaxed)
    }

    /// Its size in bytes.
    pub fn capacity(&self) -> usize {
        self.capacity
    }
}

/// Bytes of a `vprintf` record in the GPU's FIFO with `args` bytes of
/// packed arguments (measured on an H100, see `docs/simulator.md`).
pub(crate) fn record_bytes(args: usize) -> usize {
    RECORD_HEADER_BYTES + args.next_multiple_of(8)
}

/// The fixed part of a FIFO record.
const RECORD_HEADER_BYTES: usize = 16;

/// Formats `format` with `args` into the current block's output; returns
/// the bytes formatted. Outside a simulated kernel it writes to stdout.
/// In a kernel whose printf FIFO is full, nothing is written (the record is
/// dropped, as on the GPU) and −1 returned. A conversion that the GPU's
/// `vprintf` misprints ([`Misprint`]) is a located fault of the calling
/// thread: the simulator would print the C text, the GPU does not.
///
/// # Safety
/// `format` is NUL-terminated; a `%s` argument points to a NUL-terminated
/// string (or is null).
#[track_caller]
pub(crate) unsafe fn vprintf(format: *const u8, args: &[u8]) -> i32 {
    // SAFETY: forwarded from the caller.
    let format = unsafe { CStr::from_ptr(format.cast()) };
    let (text, misprint) = format_c(format.to_bytes(), args);
    if let (Some(m), true) = (misprint, context::in_simulated_thread()) {
        let site = std::panic::Location::caller();
        context::fail(site.file(), site.line(), site.column(), &m.to_string());
    }
    if context::in_simulated_thread() {
        let block = context::current().block_state();
        if !block.fifo.take(record_bytes(args.len())) {
            return -1;
        }
        block.out.borrow_mut().extend_from_slice(&text);
    } else {
        emit(&text);
    }
    text.len() as i32
}

/// Reads the packed arguments in order, each at its natural alignment.
struct Args<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl Args<'_> {
    fn take<const W: usize>(&mut self) -> [u8; W] {
        let start = self.at.div_ceil(W) * W;
        self.at = start + W;
        let mut out = [0; W];
        if let Some(b) = self.bytes.get(start..start + W) {
            out.copy_from_slice(b);
        }
        out
    }
    fn int(&mut self, long: bool) -> u64 {
        if long {
            u64::from_ne_bytes(self.take())
        } else {
            u32::from_ne_bytes(self.take()) as u64
        }
    }
    fn float(&mut self) -> f64 {
        f64::from_ne_bytes(self.take())
    }
}

/// A length modifier of an integer conversion.
#[derive(Default, Clone, Copy, PartialEq)]
enum Length {
    /// `hh`: the argument converted to a char.
    Char,
    /// `h`: converted to a short.
    Short,
    /// None: an int.
    #[default]
    Int,
    /// `l`, `ll`, `z`, `j`, `t`, `q`: 64 bits.
    Long,
}

#[derive(Default)]
struct Spec {
    left: bool,
    plus: bool,
    space: bool,
    alt: bool,
    zero: bool,
    width: usize,
    precision: Option<usize>,
}

/// A conversion that the GPU's `vprintf` does not print as C does, which
/// the simulator reports instead of printing the C text (the reasons as
/// seen on an H100, `docs/simulator.md`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Misprint {
    /// The conversion, as written in the format (`%.*f`).
    pub conversion: String,
    /// What the GPU does with it, and what to write instead.
    pub reason: &'static str,
}

impl std::fmt::Display for Misprint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "printf conversion `{}`: {} (docs/simulator.md, printf)",
            self.conversion, self.reason
        )
    }
}

/// [`Misprint::reason`] of a precision given by `*`.
const STAR_PRECISION: &str = "the GPU's vprintf misreads a precision given by `*` and the \
     arguments after it (on an H100, `%.*f` of 2 and 3.14159 printed `0.00` and the next `%d` \
     garbage); write the precision into the format";
/// [`Misprint::reason`] of `hh`.
const CHAR_LENGTH: &str = "the GPU's vprintf garbles the arguments after an `hh` conversion, \
     at times its value too (on an H100, `%hhd` of 300 printed 44 and the next `%d` garbage, \
     or 91); convert the value in the kernel (`x as i8`) and print it with `%d`";
/// [`Misprint::reason`] of `z` and `t`.
const SIZE_LENGTH: &str = "the GPU's vprintf garbles the arguments after a `z` or `t` \
     conversion (on an H100, `%td` of -5 printed 4294967291 and the next `%d` garbage); print \
     64-bit values with `l` (`%lu`, `%ld`)";

/// The bytes of the C format string `format` with the packed `args`, as
/// `vprintf` writes them (conversions `d i u x X o c s p f F e E g G a A %`,
/// flags `- + space # 0`, width and precision (numbers or `*`), length
/// modifiers `hh h l ll z j t L`), and the first conversion of `format` that
/// the GPU's `vprintf` misprints.
pub(crate) fn format_c(format: &[u8], args: &[u8]) -> (Vec<u8>, Option<Misprint>) {
    let mut args = Args { bytes: args, at: 0 };
    let mut out = Vec::new();
    let mut misprint: Option<Misprint> = None;
    let mut i = 0;
    while i < format.len() {
        let c = format[i];
        if c != b'%' {
            let end = format[i..]
                .iter()
                .position(|&b| b == b'%')
                .map_or(format.len(), |p| i + p);
            out.extend_from_slice(&format[i..end]);
            i = end;
            continue;
        }
        let start = i;
        i += 1;
        let mut spec = Spec::default();
        // Why the GPU misprints this conversion, if it does.
        let mut why = None;
        while let Some(&f) = format.get(i) {
            match f {
                b'-' => spec.left = true,
                b'+' => spec.plus = true,
                b' ' => spec.space = true,
                b'#' => spec.alt = true,
                b'0' => spec.zero = true,
                _ => break,
            }
            i += 1;
        }
        if format.get(i) == Some(&b'*') {
            let w = args.int(false) as u32 as i32;
            spec.left |= w < 0;
            spec.width = w.unsigned_abs() as usize;
            i += 1;
        } else {
            while let Some(d) = format.get(i).filter(|d| d.is_ascii_digit()) {
                spec.width = spec.width * 10 + (d - b'0') as usize;
                i += 1;
            }
        }
        if format.get(i) == Some(&b'.') {
            i += 1;
            if format.get(i) == Some(&b'*') {
                let p = args.int(false) as u32 as i32;
                spec.precision = (p >= 0).then_some(p as usize);
                i += 1;
                why = why.or(Some(STAR_PRECISION));
            } else {
                let mut p = 0;
                while let Some(d) = format.get(i).filter(|d| d.is_ascii_digit()) {
                    p = p * 10 + (d - b'0') as usize;
                    i += 1;
                }
                spec.precision = Some(p);
            }
        }
        let mut length = Length::Int;
        while let Some(&l) = format.get(i) {
            if matches!(l, b'z' | b't') {
                why = why.or(Some(SIZE_LENGTH));
            }
            length = match (l, length) {
                (b'l' | b'z' | b'j' | b't' | b'q', _) => Length::Long,
                (b'h', Length::Short) => Length::Char,
                (b'h', _) => Length::Short,
                (b'L', _) => length,
                _ => break,
            };
            i += 1;
        }
        if length == Length::Char {
            why = why.or(Some(CHAR_LENGTH));
        }
        let long = length == Length::Long;
        let Some(&conv) = format.get(i) else {
            out.extend_from_slice(&format[start..]);
            break;
        };
        i += 1;

        match conv {
            b'%' => out.push(b'%'),
            b'd' | b'i' => {
                let v = args.int(long);
                let v = match length {
                    Length::Long => v as i64,
                    Length::Int => v as u32 as i32 as i64,
                    Length::Short => v as u16 as i16 as i64,
                    Length::Char => v as u8 as i8 as i64,
                };
                let sign = spec.sign(v < 0);
                integer(
                    &mut out,
                    &spec,
                    sign,
                    "",
                    v.unsigned_abs().to_string(),
                    false,
                );
            }
            b'u' | b'x' | b'X' | b'o' => {
                let v = args.int(long);
                let v = match length {
                    Length::Long => v,
                    Length::Int => v as u32 as u64,
                    Length::Short => v as u16 as u64,
                    Length::Char => v as u8 as u64,
                };
                let (digits, prefix) = match conv {
                    b'u' => (v.to_string(), ""),
                    b'x' => (format!("{v:x}"), if spec.alt && v != 0 { "0x" } else { "" }),
                    b'X' => (format!("{v:X}"), if spec.alt && v != 0 { "0X" } else { "" }),
                    _ => (format!("{v:o}"), ""),
                };
                integer(
                    &mut out,
                    &spec,
                    "",
                    prefix,
                    digits,
                    conv == b'o' && spec.alt,
                );
            }
            b'c' => {
                let v = args.int(false) as u8;
                pad(&mut out, &spec, "", &[v], false);
            }
            b's' => {
                let p = u64::from_ne_bytes(args.take()) as usize as *const std::ffi::c_char;
                let s = if p.is_null() {
                    "(null)".to_string()
                } else {
                    // SAFETY: the caller of `vprintf` guarantees a `%s`
                    // argument is a NUL-terminated string.
                    unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
                };
                let s: String = match spec.precision {
                    Some(p) => s.chars().take(p).collect(),
                    None => s,
                };
                pad(&mut out, &spec, "", s.as_bytes(), false);
            }
            b'p' => {
                let v = u64::from_ne_bytes(args.take());
                let s = if v == 0 {
                    "(nil)".to_string()
                } else {
                    format!("{v:#x}")
                };
                pad(&mut out, &spec, "", s.as_bytes(), false);
            }
            b'f' | b'F' | b'e' | b'E' | b'g' | b'G' | b'a' | b'A' => {
                let v = args.float();
                float(&mut out, &spec, conv, v);
            }
            _ => out.extend_from_slice(&format[start..i]),
        }
        if let (None, Some(reason)) = (&misprint, why) {
            let conversion = String::from_utf8_lossy(&format[start..i]).into_owned();
            misprint = Some(Misprint { conversion, reason });
        }
    }
    (out, misprint)
}

impl Spec {
    /// The sign printed before a number: `-`, or what the flags ask for.
    fn sign(&self, negative: bool) -> &'static str {
        if negative {
            "-"
        } else if self.plus {
            "+"
        } else if self.space {
            " "
        } else {
            ""
        }
    }
}

/// `head` (a sign, a prefix) and `body` padded to the width: with spaces
/// before (or after, for `-`), or (`zero`) with zeros between the two.
fn pad(out: &mut Vec<u8>, spec: &Spec, head: &str, body: &[u8], zero: bool) {
    let len = head.len() + body.len();
    let fill = spec.width.saturating_sub(len);
    if spec.left {
        out.extend_from_slice(head.as_bytes());
        out.extend_from_slice(body);
        out.extend(std::iter::repeat_n(b' ', fill));
    } else if zero {
        out.extend_from_slice(head.as_bytes());
        out.extend(std::iter::repeat_n(b'0', fill));
        out.extend_from_slice(body);
    } else {
        out.extend(std::iter::repeat_n(b' ', fill));
        out.extend_from_slice(head.as_bytes());
        out.extend_from_slice(body);
    }
}

/// An integer conversion: `digits` to the precision (none for a 0 of
/// precision 0), with `#o`'s leading zero (`alt_octal`: added when the
/// digits do not start with one), after `sign` and `prefix`.
fn integer(
    out: &mut Vec<u8>,
    spec: &Spec,
    sign: &str,
    prefix: &str,
    digits: String,
    alt_octal: bool,
) {
    let digits = match spec.precision {
        Some(0) if digits == "0" => String::new(),
        Some(p) if digits.len() < p => format!("{}{digits}", "0".repeat(p - digits.len())),
        _ => digits,
    };
    let digits = if alt_octal && !digits.starts_with('0') {
        format!("0{digits}")
    } else {
        digits
    };
    let zero = spec.zero && !spec.left && spec.precision.is_none();
    pad(
        out,
        spec,
        &format!("{sign}{prefix}"),
        digits.as_bytes(),
        zero,
    );
}

fn float(out: &mut Vec<u8>, spec: &Spec, conv: u8, v: f64) {
    let upper = conv.is_ascii_uppercase();
    // glibc's, and the GPU's: the sign of a NaN is printed too.
    let sign = spec.sign(v.is_sign_negative());
    let a = v.abs();
    if !a.is_finite() {
        let s = if a.is_nan() { "nan" } else { "inf" };
        let s = if upper {
            s.to_uppercase()
        } else {
            s.to_string()
        };
        return pad(out, spec, sign, s.as_bytes(), false);
    }
    let (prefix, body) = match conv.to_ascii_lowercase() {
        b'a' => ("0x", hex_float(a, spec.precision, spec.alt)),
        b'f' => ("", fixed(a, spec.precision.unwrap_or(6), spec.alt)),
        b'e' => ("", exponent(a, spec.precision.unwrap_or(6), spec.alt)),
        _ => {
            let p = spec.precision.unwrap_or(6).max(1);
            let x = exponent_of(a, p - 1);
            let s = if (x as i64) < p as i64 && x >= -4 {
                fixed(a, (p as i64 - 1 - x as i64) as usize, spec.alt)
            } else {
                exponent(a, p - 1, spec.alt)
            };
            ("", if spec.alt { s } else { strip_zeros(&s) })
        }
    };
    let (prefix, body) = if upper {
        (prefix.to_uppercase(), body.to_uppercase())
    } else {
        (prefix.to_string(), body)
    };
    let zero = spec.zero && !spec.left;
    pad(out, spec, &format!("{sign}{prefix}"), body.as_bytes(), zero);
}

/// `%a` of `a ≥ 0` after the `0x`, as glibc writes it: `1.<hex>p±e` for
/// normal numbers, `0.<hex>p-1022` for subnormals, `0p+0` for zero;
/// without a precision, the fraction's trailing zeros dropped; with one,
/// rounded to that many hex digits (to nearest, ties to even).
fn hex_float(a: f64, precision: Option<usize>, alt: bool) -> String {
    let bits = a.to_bits();
    let (mut lead, mut frac, exp) = match ((bits >> 52) as i64, bits & ((1 << 52) - 1)) {
        (0, 0) => (0u64, 0u64, 0i64),
        (0, f) => (0, f, -1022),
        (e, f) => (1, f, e - 1023),
    };
    let digits = match precision {
        None => {
            let mut d = 13;
            while d > 0 && (frac >> (4 * (13 - d))) & 0xf == 0 {
                d -= 1;
            }
            d
        }
        Some(p) if p < 13 => {
            let drop = 4 * (13 - p) as u32;
            let rest = frac & ((1u64 << drop) - 1);
            let half = 1u64 << (drop - 1);
            frac >>= drop;
            let odd = if p == 0 { lead & 1 == 1 } else { frac & 1 == 1 };
            if rest > half || (rest == half && odd) {
                frac += 1;
                if frac >> (4 * p) != 0 {
                    frac &= (1u64 << (4 * p)) - 1;
                    lead += 1;
                }
            }
            frac <<= drop;
            p
        }
        Some(p) => p,
    };
    let hex = format!("{frac:013x}");
    let mut s = format!("{lead}");
    if digits > 0 || alt {
        s.push('.');
    }
    s.push_str(&hex[..digits.min(13)]);
    s.extend(std::iter::repeat_n('0', digits.saturating_sub(13)));
    let sign = if exp < 0 { '-' } else { '+' };
    format!("{s}p{sign}{}", exp.unsigned_abs())
}

fn fixed(a: f64, p: usize, alt: bool) -> String {
    let s = format!("{a:.p$}");
    if alt && p == 0 { format!("{s}.") } else { s }
}

/// The decimal exponent of `a` printed with `p` digits after the point.
fn exponent_of(a: f64, p: usize) -> i32 {
    let s = format!("{a:.p$e}");
    s.rsplit('e')
        .next()
        .and_then(|e| e.parse().ok())
        .unwrap_or(0)
}

fn exponent(a: f64, p: usize, alt: bool) -> String {
    let s = format!("{a:.p$e}");
    let (mantissa, exp) = s.split_once('e').unwrap_or((&s, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let mantissa = if alt && p == 0 {
        format!("{mantissa}.")
    } else {
        mantissa.to_string()
    };
    let sign = if exp < 0 { '-' } else { '+' };
    format!("{mantissa}e{sign}{:02}", exp.unsigned_abs())
}

/// `%g` without `#`: trailing zeros of the fraction removed, then the point.
fn strip_zeros(s: &str) -> String {
    let (mantissa, exp) = match s.find('e') {
        Some(k) => (&s[..k], &s[k..]),
        None => (s, ""),
    };
    let mantissa = if mantissa.contains('.') {
        mantissa.trim_end_matches('0').trim_end_matches('.')
    } else {
        mantissa
    };
    format!("{mantissa}{exp}")
}

#[cfg(test)]
mod tests {
    fn format_c(format: &[u8], args: &[u8]) -> String {
        String::from_utf8(super::format_c(format, args).0).expect("UTF-8")
    }

    fn args(parts: &[&[u8]]) -> Vec<u8> {
        let mut v = Vec::new();
        for p in parts {
            let w = p.len();
            while v.len() % w != 0 {
                v.push(0);
            }
            v.extend_from_slice(p);
        }
        v
    }

    #[test]
    fn integers() {
        let a = args(&[
            &(-42i32).to_ne_bytes(),
            &7u32.to_ne_bytes(),
            &255u32.to_ne_bytes(),
        ]);
        assert_eq!(format_c(b"%d|%5u|%#x", &a), "-42|    7|0xff");
        let a = args(&[
            &42i32.to_ne_bytes(),
            &42i32.to_ne_bytes(),
            &42i32.to_ne_bytes(),
        ]);
        assert_eq!(format_c(b"%-5d|%05d|%+.4d", &a), "42   |00042|+0042");
        let a = args(&[
            &(-5i64).to_ne_bytes(),
            &u64::MAX.to_ne_bytes(),
            &8u32.to_ne_bytes(),
        ]);
        assert_eq!(
            format_c(b"%ld %llu %o %%", &a),
            "-5 18446744073709551615 10 %"
        );
        let a = args(&[&0xabcu32.to_ne_bytes(), &(b'z' as u32).to_ne_bytes()]);
        assert_eq!(format_c(b"%X %c", &a), "ABC z");
        let a = args(&[&(-7i32).to_ne_bytes()]);
        assert_eq!(format_c(b"[%06d]", &a), "[-00007]");
    }

    #[test]
    fn floats() {
        let a = args(&[&1.5f64.to_ne_bytes(), &(-0.000123f64).to_ne_bytes()]);
        assert_eq!(format_c(b"%f %e", &a), "1.500000 -1.230000e-04");
        let a = args(&[
            &100000.0f64.to_ne_bytes(),
            &1e6f64.to_ne_bytes(),
            &0.0001f64.to_ne_bytes(),
        ]);
        assert_eq!(format_c(b"%g %g %g", &a), "100000 1e+06 0.0001");
        let a = args(&[&3.14259f64.to_ne_bytes(), &2.5f64.to_ne_bytes()]);
        assert_eq!(format_c(b"%8.3f|%-6.1f|", &a), "   3.143|2.5   |");
        let a = args(&[&f64::INFINITY.to_ne_bytes(), &f64::NAN.to_ne_bytes()]);
        assert_eq!(format_c(b"%f %F", &a), "inf NAN");
        let a = args(&[&(-2.5f64).to_ne_bytes()]);
        assert_eq!(format_c(b"%08.2f", &a), "-0002.50");
        let a = args(&[&(-f64::NAN).to_ne_bytes()]);
        assert_eq!(format_c(b"%f", &a), "-nan");
    }

    #[test]
    fn as_vprintf_writes_them() {
        let a = args(&[&0x0a1a_7c86u32.to_ne_bytes(), &0xffu32.to_ne_bytes()]);
        assert_eq!(format_c(b"%08x|%#06x", &a), "0a1a7c86|0x00ff");
        let a = args(&[
            &300u32.to_ne_bytes(),
            &70000u32.to_ne_bytes(),
            &0x1ffu32.to_ne_bytes(),
        ]);
        assert_eq!(format_c(b"%hhd %hd %hhx", &a), "44 4464 ff");
        let a = args(&[
            &8u32.to_ne_bytes(),
            &0u32.to_ne_bytes(),
            &8u32.to_ne_bytes(),
        ]);
        assert_eq!(format_c(b"%#.3o %#.0o %#o", &a), "010 0 010");
        let a = args(&[&0xe9u32.to_ne_bytes()]);
        assert_eq!(super::format_c(b"%c", &a).0, [0xe9]);
        let a = args(&[
            &1.0f64.to_ne_bytes(),
            &0.5f64.to_ne_bytes(),
            &0.1f64.to_ne_bytes(),
            &0.0f64.to_ne_bytes(),
            &1.5f64.to_ne_bytes(),
        ]);
        assert_eq!(
            format_c(b"%a %A %a %a %.0a", &a),
            "0x1p+0 0X1P-1 0x1.999999999999ap-4 0x0p+0 0x2p+0"
        );
    }

    #[test]
    fn what_the_gpu_misprints_is_named() {
        let a = args(&[
            &7u32.to_ne_bytes(),
            &2u32.to_ne_bytes(),
            &std::f64::consts::PI.to_ne_bytes(),
        ]);
        let (text, m) = super::format_c(b"[%d|%.*f]", &a);
        assert_eq!(text, b"[7|3.14]");
        let m = m.expect("a precision from `*`");
        assert_eq!(m.conversion, "%.*f");
        assert!(m.to_string().contains("misreads"), "{m}");
        let a = args(&[&300u32.to_ne_bytes(), &7u32.to_ne_bytes()]);
        let (text, m) = super::format_c(b"%d %hhd", &a);
        assert_eq!(text, b"300 7");
        assert_eq!(m.map(|m| m.conversion), Some("%hhd".to_string()));
        for (format, conversion) in [(&b"%5zu"[..], "%5zu"), (b"%td", "%td"), (b"%.*d", "%.*d")] {
            let m = super::format_c(format, &[0u8; 64]).1;
            assert_eq!(m.map(|m| m.conversion), Some(conversion.to_string()));
        }
        for fine in [&b"%hd %5d %-*d %.3f %lu %lld %%"[..], b"%s", b"plain"] {
            let a = [0u8; 64];
            assert_eq!(super::format_c(fine, &a).1, None, "{fine:?}");
        }
    }

    #[test]
    fn pointers_and_mixed_widths() {
        let a = args(&[
            &1u32.to_ne_bytes(),
            &0x1000u64.to_ne_bytes(),
            &2.0f64.to_ne_bytes(),
        ]);
        assert_eq!(format_c(b"%u %p %g", &a), "1 0x1000 2");
        let a = args(&[&0u64.to_ne_bytes()]);
        assert_eq!(format_c(b"%p", &a), "(nil)");
    }
}
