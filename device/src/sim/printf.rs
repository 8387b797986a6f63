//! `vprintf` on the host: C format strings over the packed argument buffer
//! of [`PrintfArgs`](crate::print::PrintfArgs) (each argument at its natural
//! alignment, `f32` promoted to `f64`, as `vprintf` reads them).
use std::cell::RefCell;
use std::ffi::CStr;

use super::context;

thread_local! {
    static CAPTURE: RefCell<Option<String>> = const { RefCell::new(None) };
}

/// Runs `f` (which launches simulated kernels on this OS thread) and returns
/// its result with the text the kernels printed with `gpu_printf!`, instead
/// of writing that text to stdout.
pub fn capture_printf<R>(f: impl FnOnce() -> R) -> (R, String) {
    let saved = CAPTURE.with(|c| c.borrow_mut().replace(String::new()));
    let r = f();
    let text = CAPTURE.with(|c| std::mem::replace(&mut *c.borrow_mut(), saved));
    (r, text.unwrap_or_default())
}

/// Writes a block's printf output (captured, or to stdout).
pub(crate) fn emit(text: &str) {
    if text.is_empty() {
        return;
    }
    let captured = CAPTURE.with(|c| match c.borrow_mut().as_mut() {
        Some(s) => {
            s.push_str(text);
            true
        }
        None => false,
    });
    if !captured {
        print!("{text}");
    }
}

/// Formats `format` with `args` into the current block's output; returns
/// the bytes formatted. Outside a simulated kernel it writes to stdout.
///
/// # Safety
/// `format` is NUL-terminated; a `%s` argument points to a NUL-terminated
/// string (or is null).
pub(crate) unsafe fn vprintf(format: *const u8, args: &[u8]) -> i32 {
    // SAFETY: forwarded from the caller.
    let format = unsafe { CStr::from_ptr(format.cast()) };
    let text = format_c(format.to_bytes(), args);
    if context::in_simulated_thread() {
        context::current()
            .block_state()
            .out
            .borrow_mut()
            .push_str(&text);
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

/// The text of the C format string `format` with the packed `args`:
/// conversions `d i u x X o c s p f F e E g G %`, flags `- + space # 0`,
/// width and precision (numbers or `*`), length modifiers `hh h l ll z j t L`.
pub(crate) fn format_c(format: &[u8], args: &[u8]) -> String {
    let mut args = Args { bytes: args, at: 0 };
    let mut out = String::new();
    let mut i = 0;
    while i < format.len() {
        let c = format[i];
        if c != b'%' {
            let end = format[i..]
                .iter()
                .position(|&b| b == b'%')
                .map_or(format.len(), |p| i + p);
            out.push_str(&String::from_utf8_lossy(&format[i..end]));
            i = end;
            continue;
        }
        let start = i;
        i += 1;
        let mut spec = Spec::default();
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
            } else {
                let mut p = 0;
                while let Some(d) = format.get(i).filter(|d| d.is_ascii_digit()) {
                    p = p * 10 + (d - b'0') as usize;
                    i += 1;
                }
                spec.precision = Some(p);
            }
        }
        let mut long = false;
        while let Some(&l) = format.get(i) {
            match l {
                b'l' | b'z' | b'j' | b't' | b'q' => long = true,
                b'h' | b'L' => {}
                _ => break,
            }
            i += 1;
        }
        let Some(&conv) = format.get(i) else {
            out.push_str(&String::from_utf8_lossy(&format[start..]));
            break;
        };
        i += 1;
        match conv {
            b'%' => out.push('%'),
            b'd' | b'i' => {
                let v = args.int(long);
                let v = if long {
                    v as i64
                } else {
                    v as u32 as i32 as i64
                };
                let sign = spec.sign(v < 0);
                integer(&mut out, &spec, sign, "", v.unsigned_abs().to_string());
            }
            b'u' | b'x' | b'X' | b'o' => {
                let v = args.int(long);
                let (digits, prefix) = match conv {
                    b'u' => (v.to_string(), ""),
                    b'x' => (format!("{v:x}"), if spec.alt && v != 0 { "0x" } else { "" }),
                    b'X' => (format!("{v:X}"), if spec.alt && v != 0 { "0X" } else { "" }),
                    _ => (format!("{v:o}"), if spec.alt && v != 0 { "0" } else { "" }),
                };
                integer(&mut out, &spec, "", prefix, digits);
            }
            b'c' => {
                let v = args.int(false) as u8;
                pad(&mut out, &spec, String::from(v as char), false);
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
                pad(&mut out, &spec, s, false);
            }
            b'p' => {
                let v = u64::from_ne_bytes(args.take());
                let s = if v == 0 {
                    "(nil)".to_string()
                } else {
                    format!("{v:#x}")
                };
                pad(&mut out, &spec, s, false);
            }
            b'f' | b'F' | b'e' | b'E' | b'g' | b'G' => {
                let v = args.float();
                float(&mut out, &spec, conv, v);
            }
            _ => out.push_str(&String::from_utf8_lossy(&format[start..i])),
        }
    }
    out
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

/// Pads `body` to the width (`zero`: with zeros after a sign or prefix).
fn pad(out: &mut String, spec: &Spec, body: String, zero: bool) {
    let len = body.chars().count();
    if len >= spec.width {
        out.push_str(&body);
    } else if spec.left {
        out.push_str(&body);
        out.extend(std::iter::repeat_n(' ', spec.width - len));
    } else if zero {
        let split = body.find(|c: char| c.is_ascii_digit()).unwrap_or(0);
        let split = if body[split..].starts_with("0x") || body[split..].starts_with("0X") {
            split + 2
        } else {
            split
        };
        out.push_str(&body[..split]);
        out.extend(std::iter::repeat_n('0', spec.width - len));
        out.push_str(&body[split..]);
    } else {
        out.extend(std::iter::repeat_n(' ', spec.width - len));
        out.push_str(&body);
    }
}

fn integer(out: &mut String, spec: &Spec, sign: &str, prefix: &str, digits: String) {
    let digits = match spec.precision {
        Some(0) if digits == "0" => String::new(),
        Some(p) if digits.len() < p => format!("{}{digits}", "0".repeat(p - digits.len())),
        _ => digits,
    };
    let zero = spec.zero && !spec.left && spec.precision.is_none();
    pad(out, spec, format!("{sign}{prefix}{digits}"), zero);
}

fn float(out: &mut String, spec: &Spec, conv: u8, v: f64) {
    let upper = conv.is_ascii_uppercase();
    let sign = spec.sign(v.is_sign_negative() && !v.is_nan());
    let a = v.abs();
    let body = if !a.is_finite() {
        let s = if a.is_nan() { "nan" } else { "inf" };
        let s = if upper {
            s.to_uppercase()
        } else {
            s.to_string()
        };
        return pad(out, spec, format!("{sign}{s}"), false);
    } else {
        let p = spec.precision.unwrap_or(6);
        match conv.to_ascii_lowercase() {
            b'f' => fixed(a, p, spec.alt),
            b'e' => exponent(a, p, spec.alt),
            _ => {
                let p = p.max(1);
                let x = exponent_of(a, p - 1);
                let s = if (x as i64) < p as i64 && x >= -4 {
                    fixed(a, (p as i64 - 1 - x as i64) as usize, spec.alt)
                } else {
                    exponent(a, p - 1, spec.alt)
                };
                if spec.alt { s } else { strip_zeros(&s) }
            }
        }
    };
    let body = if upper { body.to_uppercase() } else { body };
    let zero = spec.zero && !spec.left;
    pad(out, spec, format!("{sign}{body}"), zero);
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
    use super::format_c;

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
