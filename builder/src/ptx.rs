//! Checks and repairs of the PTX rustc's NVPTX backend writes, run on every
//! image [`KernelBuild::build`](crate::KernelBuild::build) writes (the
//! portable PTX and each architecture's), before `ptxas` or the driver sees
//! it:
//!
//! - [`mend_narrowing_stores`]: a 32-bit integer or bit-typed instruction
//!   (`st.global.b32 [a], %rd6`, `mov.b32 %r1, %rd6`, …) whose source is a
//!   64-bit register is legal PTX (the ISA's "Operand Size Exceeding
//!   Instruction-Type Size": the low 32 bits), but ptxas (12.9, 13.0) and the
//!   driver's JIT compile it as a float-to-integer conversion of the value
//!   when the register holds an f64 (`docs/known-issues.md`). Each such
//!   source is replaced by a fresh 32-bit register written by an explicit
//!   `cvt.u32.u64` (the form both compile right), and the build warns naming
//!   the functions.
//! - [`check_aligned_barriers`]: an aligned barrier (`bar.sync`, `bar.red`,
//!   `bar.arrive`, `barrier.*.aligned`) must be executed by every thread of
//!   the block at the *same instruction*. LLVM may duplicate a barrier into
//!   both arms of a branch (the source has one `sync_threads()`, the PTX
//!   two `bar.sync 0`), and then the block hangs on the GPU. The check
//!   fails the build ([`Error::AlignedBarrier`](crate::Error::AlignedBarrier))
//!   where that can happen; `cuda_kernels_device::sync::sync_threads` emits
//!   the non-aligned `barrier.sync 0` on sm_70 and later, which LLVM may
//!   duplicate freely, so the check concerns hand-written aligned barriers
//!   (inline `asm!`, `core::arch::nvptx::_syncthreads`) and builds for
//!   architectures below sm_70.
//!
//! The rule of the barrier check (sound, and conservative): threads start a
//! kernel together, at one instruction. From the kernel's start, and from
//! the instruction after each aligned barrier, follow every path (both ways
//! at every conditional branch, whatever the condition) up to the next
//! aligned barrier or the end of the thread. If at most one aligned barrier
//! instruction can be reached so, every thread that does not exit meets the
//! others at that same instruction, and they leave it together; by
//! induction no two threads ever wait at different aligned barriers. So the
//! check fails a function where two or more aligned barrier instructions are
//! reachable from one such point. Threads that exit count as arrived (sm_70
//! and later), so an exit beside a barrier is allowed in a kernel; in a
//! device function (`.func`) a `ret` beside a barrier is not (the threads
//! that return meet the caller's next barrier instead). A call of a function
//! that holds an aligned barrier counts as an aligned barrier at the call.
//! Barrier ids and thread counts are not told apart, and branch conditions
//! are not read: a kernel whose branches are uniform (the same for every
//! thread) and that has an aligned barrier in each arm is refused too — use
//! `sync_threads` there. Indirect calls are not followed.
use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet};

/// What [`mend_narrowing_stores`] made of a PTX text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mended {
    /// The PTX, with each narrowed 64-bit source read through a
    /// `cvt.u32.u64` (the same text where there was none).
    pub text: String,
    /// The functions (entry or device function names, as in the PTX) in
    /// which an instruction was rewritten, in the order they appear.
    pub functions: Vec<String>,
    /// How many instructions were rewritten.
    pub instructions: usize,
}

/// An aligned barrier that threads can reach at different instructions (see
/// the [module](self) documentation for the rule).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DivergentBarrier {
    /// The function's name in the PTX (an entry point's is the kernel's).
    pub function: String,
    /// The barrier instructions reachable from one point, as
    /// `(line in the PTX text, 1-based, instruction)`.
    pub barriers: Vec<(usize, String)>,
}

/// One function of a PTX text: where its lines are.
#[derive(Debug, Clone)]
struct Function {
    name: String,
    /// `.entry` (a kernel) rather than `.func`.
    entry: bool,
    /// The line holding the body's opening `{`.
    open: usize,
    /// The line holding the body's closing `}`.
    close: usize,
}

/// The functions with a body, in order. A body runs from the first line
/// `{` after the header to the next line `}` outside inline assembly (which
/// LLVM brackets with `// begin inline asm` and `// end inline asm`, and
/// whose own braces may start a line).
fn functions(lines: &[&str]) -> Vec<Function> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let Some((name, entry)) = header(lines[i]) else {
            i += 1;
            continue;
        };
        // A declaration (`.extern .func …;`, a prototype) ends with `;`
        // before any `{`.
        let open = (i..lines.len()).find(|&j| {
            let t = strip_comment(lines[j]).trim();
            t == "{" || t.ends_with(';')
        });
        let Some(open) = open.filter(|&o| strip_comment(lines[o]).trim() == "{") else {
            i = open.map_or(lines.len(), |o| o + 1);
            continue;
        };
        let mut in_asm = false;
        let mut close = None;
        for (j, line) in lines.iter().enumerate().skip(open + 1) {
            let t = line.trim();
            if t.starts_with("// begin inline asm") {
                in_asm = true;
            } else if t.starts_with("// end inline asm") {
                in_asm = false;
            } else if !in_asm && *line == "}" {
                close = Some(j);
                break;
            }
        }
        let close = close.unwrap_or(lines.len());
        out.push(Function {
            name,
            entry,
            open,
            close,
        });
        i = close + 1;
    }
    out
}

/// A function header's name, and whether it is an entry point:
/// `.visible .entry name(`, `.func (.param .b32 func_retval0) name(`,
/// `.weak .func name`.
fn header(line: &str) -> Option<(String, bool)> {
    let mut rest = strip_comment(line).trim_start();
    for prefix in [".visible ", ".weak ", ".extern "] {
        rest = rest.strip_prefix(prefix).unwrap_or(rest).trim_start();
    }
    let (rest, entry) = if let Some(r) = rest.strip_prefix(".entry") {
        (r, true)
    } else if let Some(r) = rest.strip_prefix(".func") {
        (r, false)
    } else {
        return None;
    };
    if !rest.is_empty() && !rest.starts_with([' ', '\t', '(']) {
        return None;
    }
    let mut rest = rest.trim_start();
    if rest.starts_with('(') {
        // The return value's parameter list.
        let close = rest.find(')')?;
        rest = rest[close + 1..].trim_start();
    }
    let name: String = rest.chars().take_while(|&c| is_ident_char(c)).collect();
    (!name.is_empty()).then_some((name, entry))
}

fn is_ident_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_' || c == '$' || c == '%'
}

fn strip_comment(line: &str) -> &str {
    line.find("//").map_or(line, |i| &line[..i])
}

/// A 64-bit register of LLVM's naming: `%rd<N>` (any 64-bit value) or
/// `%fd<N>` (an f64, in older LLVMs).
fn wide_register(operand: &str) -> Option<Wide> {
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    if operand.strip_prefix("%rd").is_some_and(digits) {
        Some(Wide::Int)
    } else if operand.strip_prefix("%fd").is_some_and(digits) {
        Some(Wide::Float)
    } else {
        None
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Wide {
    Int,
    Float,
}

/// An instruction's parts: guard (`@%p1 `, with its space), opcode,
/// operands (split at top-level commas), and the text after the `;`.
struct Instruction<'a> {
    indent: &'a str,
    guard: &'a str,
    opcode: &'a str,
    operands: Vec<&'a str>,
    tail: &'a str,
}

/// `line` as one instruction whose type [`narrows`] (`None` for any other,
/// labels, directives, braces, comments, and lines with more than one
/// statement).
fn instruction(line: &str) -> Option<Instruction<'_>> {
    let code = strip_comment(line);
    let semi = code.find(';')?;
    if !code[semi + 1..].trim().is_empty() {
        return None;
    }
    let indent_len = code.len() - code.trim_start().len();
    let indent = &code[..indent_len];
    let mut body = code[indent_len..semi].trim_end();
    let mut guard = "";
    if body.starts_with('@') {
        let end = body.find(char::is_whitespace)?;
        let after = body[end..].len() - body[end..].trim_start().len();
        guard = &body[..end + after];
        body = &body[end + after..];
    }
    let (opcode, rest) = body.split_once(char::is_whitespace).unwrap_or((body, ""));
    if !opcode.starts_with(|c: char| c.is_ascii_lowercase())
        || opcode.ends_with(':')
        || !narrows(opcode)
    {
        return None;
    }
    Some(Instruction {
        indent,
        guard,
        opcode,
        operands: split_operands(rest),
        tail: &line[semi + 1..],
    })
}

/// Operands split at the commas outside `{}`, `[]` and `()`.
fn split_operands(s: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let (mut depth, mut start) = (0i32, 0);
    for (i, c) in s.char_indices() {
        match c {
            '{' | '[' | '(' => depth += 1,
            '}' | ']' | ')' => depth -= 1,
            ',' if depth == 0 => {
                out.push(s[start..i].trim());
                start = i + 1;
            }
            _ => {}
        }
    }
    if !s[start..].trim().is_empty() {
        out.push(s[start..].trim());
    }
    out
}

/// Whether `opcode`'s type (its last `.` part) is a 32-bit integer or bit
/// type, with a source the ISA would narrow: not `.wide` (whose addend is
/// 64-bit) and not a `ld` (whose register is its destination).
fn narrows(opcode: &str) -> bool {
    let last = opcode.rsplit('.').next().unwrap_or("");
    matches!(last, "b32" | "u32" | "s32")
        && !opcode.split('.').any(|p| p == "wide")
        && opcode.split('.').next() != Some("ld")
}

/// Whether `line` is an instruction that [`mend_narrowing_stores`] rewrites.
fn has_wide_source(line: &str) -> bool {
    instruction(line).is_some_and(|ins| {
        let sources = usize::from(!has_no_destination(ins.opcode));
        ins.operands[sources.min(ins.operands.len())..]
            .iter()
            .filter(|op| !op.starts_with('['))
            .flat_map(
                |op| match op.strip_prefix('{').and_then(|o| o.strip_suffix('}')) {
                    Some(inner) => inner.split(',').map(str::trim).collect(),
                    None => vec![*op],
                },
            )
            .any(|r| wide_register(r).is_some())
    })
}

/// Whether every operand of `opcode` is a source (stores and reductions
/// have no destination register).
fn has_no_destination(opcode: &str) -> bool {
    matches!(opcode.split('.').next(), Some("st" | "red" | "sust"))
}

/// Rewrites every 32-bit integer- or bit-typed instruction whose source is a
/// 64-bit register (`st.global.b32 [%rd1], %rd6;`) to read the register's
/// low word through an explicit conversion (`cvt.u32.u64 %rmis0, %rd6;
/// st.global.b32 [%rd1], %rmis0;`), the value the ISA gives the first form
/// and the form ptxas compiles right; `%fd` sources go through `mov.b64`
/// first. The new registers are declared at the top of each function
/// (`.reg .b32 %rmis<N>;`, `.reg .b64 %rdmis<N>;`). Addresses (`[%rd1]`)
/// and destinations are left alone.
///
/// ```
/// let bad = ".visible .entry k(\n\t.param .u64 k_param_0\n)\n{\n\t.reg .b64 \t%rd<8>;\n\
///            \tst.global.b32 \t[%rd1], %rd6;\n\tret;\n}\n";
/// let mended = cuda_kernels_builder::ptx::mend_narrowing_stores(bad);
/// assert_eq!(mended.functions, ["k"]);
/// assert!(mended.text.contains("cvt.u32.u64 \t%rmis0, %rd6;"));
/// assert!(mended.text.contains("st.global.b32 \t[%rd1], %rmis0;"));
/// ```
pub fn mend_narrowing_stores(ptx: &str) -> Mended {
    // Most images have none: one quick pass to tell.
    if !ptx
        .lines()
        .any(|l| (l.contains("%rd") || l.contains("%fd")) && has_wide_source(l))
    {
        return Mended {
            text: ptx.to_string(),
            functions: Vec::new(),
            instructions: 0,
        };
    }
    let lines: Vec<&str> = ptx.lines().collect();
    let mut out: Vec<Cow<str>> = Vec::with_capacity(lines.len() + 8);
    let mut functions_changed = Vec::new();
    let mut instructions = 0;
    let mut next = 0;
    for f in functions(&lines) {
        out.extend(lines[next..=f.open].iter().map(|&l| Cow::Borrowed(l)));
        let (mut r32, mut r64) = (0usize, 0usize);
        let mut body = Vec::new();
        for line in &lines[f.open + 1..f.close] {
            let wide = line.contains("%rd") || line.contains("%fd");
            let Some(ins) = wide.then(|| instruction(line)).flatten() else {
                body.push(Cow::Borrowed(*line));
                continue;
            };
            let sources = usize::from(!has_no_destination(ins.opcode));
            let mut before = Vec::new();
            let mut renamed: BTreeMap<String, String> = BTreeMap::new();
            let mut rename = |reg: &str, before: &mut Vec<String>| -> Option<String> {
                let wide = wide_register(reg)?;
                if let Some(r) = renamed.get(reg) {
                    return Some(r.clone());
                }
                let (ind, g) = (ins.indent, ins.guard);
                let low = format!("%rmis{r32}");
                r32 += 1;
                let from = if wide == Wide::Float {
                    let bits = format!("%rdmis{r64}");
                    r64 += 1;
                    before.push(format!("{ind}{g}mov.b64 \t{bits}, {reg};"));
                    bits
                } else {
                    reg.to_string()
                };
                before.push(format!("{ind}{g}cvt.u32.u64 \t{low}, {from};"));
                renamed.insert(reg.to_string(), low.clone());
                Some(low)
            };
            let mut operands = Vec::new();
            for (k, op) in ins.operands.iter().enumerate() {
                if k < sources || op.starts_with('[') {
                    operands.push(op.to_string());
                } else if let Some(inner) = op.strip_prefix('{').and_then(|o| o.strip_suffix('}')) {
                    let parts: Vec<String> = inner
                        .split(',')
                        .map(|p| {
                            let p = p.trim();
                            rename(p, &mut before).unwrap_or_else(|| p.to_string())
                        })
                        .collect();
                    operands.push(format!("{{{}}}", parts.join(", ")));
                } else {
                    operands.push(rename(op, &mut before).unwrap_or_else(|| op.to_string()));
                }
            }
            if before.is_empty() {
                body.push(Cow::Borrowed(*line));
                continue;
            }
            instructions += 1;
            body.extend(before.into_iter().map(Cow::Owned));
            body.push(Cow::Owned(format!(
                "{}{}{} \t{};{}",
                ins.indent,
                ins.guard,
                ins.opcode,
                operands.join(", "),
                ins.tail
            )));
        }
        if r32 > 0 {
            out.push(Cow::Owned(format!("\t.reg .b32 \t%rmis<{r32}>;")));
            if r64 > 0 {
                out.push(Cow::Owned(format!("\t.reg .b64 \t%rdmis<{r64}>;")));
            }
            functions_changed.push(f.name.clone());
        }
        out.extend(body);
        next = f.close;
    }
    out.extend(
        lines[next.min(lines.len())..]
            .iter()
            .map(|&l| Cow::Borrowed(l)),
    );
    let mut text = out.join("\n");
    if ptx.ends_with('\n') {
        text.push('\n');
    }
    Mended {
        text,
        functions: functions_changed,
        instructions,
    }
}

/// Whether an instruction's opcode is an aligned CTA or cluster barrier:
/// `bar.sync`, `bar.arrive`, `bar.red` (and `bar.cta.*`), which the ISA
/// defines as `barrier.*.aligned`, and any `barrier.*` with `.aligned`. Not
/// the non-aligned `barrier.sync`, nor `bar.warp.sync`.
fn aligned_barrier(opcode: &str) -> bool {
    let parts: Vec<&str> = opcode.split('.').collect();
    match parts.first() {
        Some(&"bar") => parts.get(1) != Some(&"warp"),
        Some(&"barrier") => parts.contains(&"aligned"),
        _ => false,
    }
}

/// One statement of a function body, as the barrier check sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Step {
    /// Anything that goes on to the next statement.
    Next,
    /// An aligned barrier (or a call of a function holding one).
    Barrier,
    /// `bra` (guarded: or the next statement).
    Branch { target: String, guarded: bool },
    /// `brx.idx` through a `.branchtargets` list.
    Switch { table: String, guarded: bool },
    /// `ret` (guarded: or the next statement).
    Return { guarded: bool },
    /// `exit` or `trap` (guarded: or the next statement).
    Exit { guarded: bool },
}

/// A function body as statements, labels resolved.
struct Body {
    steps: Vec<Step>,
    /// Each statement's line and text.
    text: Vec<(usize, String)>,
    /// Each statement's successors (indices; `steps.len()` is the end).
    succ: Vec<Vec<usize>>,
    /// The callees named by each statement (direct calls).
    calls: Vec<Option<String>>,
}

/// Splits `lines[f.open + 1 .. f.close]` into statements (at `;`), with
/// labels (`name:`) and scopes (`{`, `}` starting a statement: call
/// sequences and inline assembly, whose labels are their own), and builds
/// the successors of each.
fn body(lines: &[&str], f: &Function) -> Body {
    // The scopes: each label is looked up from the innermost one out.
    let mut scope_of_label: Vec<(Vec<usize>, String, usize)> = Vec::new();
    let mut stack = vec![0usize];
    let mut scopes = 1;
    let mut statements: Vec<(usize, String, Vec<usize>)> = Vec::new();
    // Labels waiting for their statement, with the scope they are in.
    let mut labels_here: Vec<(String, Vec<usize>)> = Vec::new();
    let mut tables: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut cur = String::new();
    let mut cur_line = 0;
    for (n, line) in lines.iter().enumerate().take(f.close).skip(f.open + 1) {
        let code = strip_comment(line);
        let bytes: Vec<char> = code.chars().collect();
        for (k, &c) in bytes.iter().enumerate() {
            if cur.trim().is_empty() {
                cur_line = n + 1;
            }
            match c {
                '{' if cur.trim().is_empty() => {
                    stack.push(scopes);
                    scopes += 1;
                    cur.clear();
                }
                '}' if cur.trim().is_empty() => {
                    if stack.len() > 1 {
                        stack.pop();
                    }
                    cur.clear();
                }
                ';' => {
                    let s = cur.trim().to_string();
                    cur.clear();
                    if s.is_empty() {
                        continue;
                    }
                    if let Some(list) = s.strip_prefix(".branchtargets") {
                        for (l, _) in labels_here.drain(..) {
                            tables
                                .insert(l, list.split(',').map(|t| t.trim().to_string()).collect());
                        }
                        continue;
                    }
                    let index = statements.len();
                    for (l, at) in labels_here.drain(..) {
                        scope_of_label.push((at, l, index));
                    }
                    statements.push((cur_line, s, stack.clone()));
                }
                ':' if bytes.get(k + 1) != Some(&':')
                    && k.checked_sub(1).and_then(|p| bytes.get(p)) != Some(&':')
                    && is_label(cur.trim()) =>
                {
                    labels_here.push((cur.trim().to_string(), stack.clone()));
                    cur.clear();
                }
                _ => cur.push(c),
            }
        }
        cur.push(' ');
    }
    let end = statements.len();
    for (l, at) in labels_here.drain(..) {
        scope_of_label.push((at, l, end));
    }
    // (scope, name) -> statement: the first definition in a scope.
    let mut label_at: BTreeMap<(usize, &str), usize> = BTreeMap::new();
    for (path, l, i) in &scope_of_label {
        label_at
            .entry((path.last().copied().unwrap_or(0), l.as_str()))
            .or_insert(*i);
    }
    let resolve = |name: &str, at: &[usize]| -> Option<usize> {
        // The innermost enclosing scope that defines the label.
        at.iter()
            .rev()
            .find_map(|s| label_at.get(&(*s, name)).copied())
    };
    let mut steps = Vec::with_capacity(end);
    let mut calls = Vec::with_capacity(end);
    for (_, s, _) in &statements {
        let (guarded, rest) = match s.strip_prefix('@') {
            Some(r) => (
                true,
                r.split_once(char::is_whitespace)
                    .map_or("", |(_, b)| b.trim_start()),
            ),
            None => (false, s.as_str()),
        };
        let (opcode, operands) = rest.split_once(char::is_whitespace).unwrap_or((rest, ""));
        let ops = split_operands(operands);
        let root = opcode.split('.').next().unwrap_or("");
        calls.push(None);
        steps.push(match root {
            _ if aligned_barrier(opcode) => Step::Barrier,
            "bra" => Step::Branch {
                target: ops.first().unwrap_or(&"").to_string(),
                guarded,
            },
            "brx" => Step::Switch {
                table: ops.get(1).unwrap_or(&"").to_string(),
                guarded,
            },
            "ret" => Step::Return { guarded },
            "exit" | "trap" => Step::Exit { guarded },
            "call" => {
                if let Some(last) = calls.last_mut() {
                    *last = callee(operands).map(str::to_string);
                }
                Step::Next
            }
            _ => Step::Next,
        });
    }
    let all_labels: Vec<usize> = scope_of_label.iter().map(|(_, _, i)| *i).collect();
    let succ = statements
        .iter()
        .zip(&steps)
        .enumerate()
        .map(|(i, ((_, _, at), step))| {
            let mut next = Vec::new();
            let mut fall = true;
            match step {
                Step::Branch { target, guarded } => {
                    // An unknown label: every label (conservative).
                    match resolve(target, at) {
                        Some(t) => next.push(t),
                        None => next.extend(&all_labels),
                    }
                    fall = *guarded;
                }
                Step::Switch { table, guarded } => {
                    match tables.get(table) {
                        Some(targets) => {
                            for t in targets {
                                match resolve(t, at) {
                                    Some(t) => next.push(t),
                                    None => next.extend(&all_labels),
                                }
                            }
                        }
                        None => next.extend(&all_labels),
                    }
                    fall = *guarded;
                }
                Step::Return { guarded } | Step::Exit { guarded } => fall = *guarded,
                _ => {}
            }
            if fall {
                next.push(i + 1);
            }
            next
        })
        .collect();
    Body {
        steps,
        text: statements.into_iter().map(|(l, s, _)| (l, s)).collect(),
        succ,
        calls,
    }
}

/// The statements of one line, each without its label, guard and scope
/// braces: `$L_1: @%p1 bra $L_2;` gives `bra $L_2`.
fn line_statements(line: &str) -> impl Iterator<Item = &str> {
    strip_comment(line).split(';').filter_map(|piece| {
        let mut s = piece
            .trim()
            .trim_start_matches(['{', '}', ' ', '\t'])
            .trim();
        if let Some((label, rest)) = s.split_once(':')
            && is_label(label.trim())
            && !rest.starts_with(':')
        {
            s = rest.trim();
        }
        if s.starts_with('@') {
            s = s
                .split_once(char::is_whitespace)
                .map_or("", |(_, r)| r.trim_start());
        }
        (!s.is_empty()).then_some(s)
    })
}

/// The function a direct `call`'s operands name (`(retval0), f, (param0)`
/// or `f, (param0)`); `None` for an indirect call (a register).
fn callee(operands: &str) -> Option<&str> {
    split_operands(operands)
        .into_iter()
        .find(|o| !o.starts_with('('))
        .filter(|c| !c.starts_with('%'))
}

fn is_label(s: &str) -> bool {
    let mut chars = s.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || matches!(c, '_' | '$' | '%'))
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '$'))
}

/// Finds the aligned barriers that threads can reach at different
/// instructions (the rule is in the [module](self) documentation): `Err`
/// with the first function where it can happen.
///
/// ```
/// let two = ".visible .entry k()\n{\n\t.reg .pred %p<2>;\n\t@%p1 bra $L__BB0_2;\n\
///            \tbar.sync 0;\n\tret;\n$L__BB0_2:\n\tbar.sync 0;\n\tret;\n}\n";
/// let e = cuda_kernels_builder::ptx::check_aligned_barriers(two).unwrap_err();
/// assert_eq!(e.function, "k");
/// assert_eq!(e.barriers, [(5, "bar.sync 0".to_string()), (8, "bar.sync 0".to_string())]);
/// ```
pub fn check_aligned_barriers(ptx: &str) -> Result<(), DivergentBarrier> {
    // Most images hold no aligned barrier: one quick pass to tell.
    let maybe = |l: &str| {
        let c = strip_comment(l);
        // `bar.` as a word (not `membar.`), not `bar.warp`.
        let bar = c.match_indices("bar.").any(|(i, _)| {
            (i == 0 || !c.as_bytes()[i - 1].is_ascii_alphanumeric())
                && !c[i..].starts_with("bar.warp")
        });
        bar || (c.contains("barrier") && c.contains(".aligned"))
    };
    if !ptx.lines().any(maybe) {
        return Ok(());
    }
    let lines: Vec<&str> = ptx.lines().collect();
    let fns = functions(&lines);
    // A first pass over the lines (most images hold no aligned barrier):
    // each function's direct barriers and callees.
    let scanned: Vec<(bool, Vec<&str>)> = fns
        .iter()
        .map(|f| {
            let mut direct = false;
            let mut callees = Vec::new();
            for line in &lines[f.open + 1..f.close] {
                if !line.contains("bar") && !line.contains("call") {
                    continue;
                }
                for stmt in line_statements(line) {
                    let (opcode, rest) = stmt.split_once(char::is_whitespace).unwrap_or((stmt, ""));
                    direct |= aligned_barrier(opcode);
                    if opcode.split('.').next() == Some("call") {
                        callees.extend(callee(rest));
                    }
                }
            }
            (direct, callees)
        })
        .collect();
    // The functions holding an aligned barrier, directly or through calls.
    let mut holds: BTreeSet<&str> = fns
        .iter()
        .zip(&scanned)
        .filter(|(_, (direct, _))| *direct)
        .map(|(f, _)| f.name.as_str())
        .collect();
    loop {
        let before = holds.len();
        for (f, (_, callees)) in fns.iter().zip(&scanned) {
            if callees.iter().any(|c| holds.contains(c)) {
                holds.insert(f.name.as_str());
            }
        }
        if holds.len() == before {
            break;
        }
    }
    let fns: Vec<&Function> = fns
        .iter()
        .filter(|f| holds.contains(f.name.as_str()))
        .collect();
    let bodies: Vec<Body> = fns.iter().map(|f| body(&lines, f)).collect();
    for (f, b) in fns.iter().zip(&bodies) {
        let barrier: Vec<bool> = b
            .steps
            .iter()
            .zip(&b.calls)
            .map(|(s, c)| {
                *s == Step::Barrier || c.as_ref().is_some_and(|c| holds.contains(c.as_str()))
            })
            .collect();
        let starts = std::iter::once(0).chain(
            (0..b.steps.len())
                .filter(|&i| barrier[i])
                .flat_map(|i| b.succ[i].iter().copied()),
        );
        for start in starts {
            let (met, returns) = next_barriers(b, &barrier, start);
            let returns = returns && !f.entry;
            if met.len() > 1 || (returns && !met.is_empty()) {
                return Err(DivergentBarrier {
                    function: f.name.clone(),
                    barriers: met.into_iter().map(|i| b.text[i].clone()).collect(),
                });
            }
        }
    }
    Ok(())
}

/// The barrier statements reachable from `start` without passing another
/// barrier, and whether a `ret` (or the body's end) is.
fn next_barriers(b: &Body, barrier: &[bool], start: usize) -> (BTreeSet<usize>, bool) {
    let mut seen = vec![false; b.steps.len() + 1];
    let mut stack = vec![start];
    let (mut met, mut returns) = (BTreeSet::new(), false);
    while let Some(i) = stack.pop() {
        if seen[i] {
            continue;
        }
        seen[i] = true;
        if i == b.steps.len() {
            returns = true;
            continue;
        }
        if barrier[i] {
            met.insert(i);
            continue;
        }
        if matches!(b.steps[i], Step::Return { .. }) {
            returns = true;
        }
        stack.extend(b.succ[i].iter().copied());
    }
    (met, returns)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `fid_f64_low_word` as LLVM has emitted it elsewhere
    /// (`docs/known-issues.md`): the store ptxas miscompiles.
    const ST64: &str = "\
.version 6.0
.target sm_70
.address_size 64

.visible .entry fid_f64_low_word(
\t.param .u64 .ptr .align 1 fid_f64_low_word_param_0,
\t.param .u64 fid_f64_low_word_param_1
)                                       // @fid_f64_low_word
{
\t.reg .pred \t%p<2>;
\t.reg .b32 \t%r<5>;
\t.reg .b64 \t%rd<8>;

\tld.param.b64 \t%rd2, [fid_f64_low_word_param_0];
\tcvta.to.global.u64 \t%rd3, %rd2;
\t@%p1 bra \t$L__BB24_2;
\tbra.uni \t$L__BB24_1;
$L__BB24_2:
\tcvt.rn.f32.u32 \t%r3, %r2;
\tcvt.f64.f32 \t%rd6, %r4;
\tmul.wide.u32 \t%rd7, %r2, 4;
\tadd.s64 \t%rd1, %rd3, %rd7;
\tst.global.b32 \t[%rd1], %rd6;
$L__BB24_1:
\tret;
}
";

    #[test]
    fn the_narrowing_store_becomes_an_explicit_conversion() {
        let m = mend_narrowing_stores(ST64);
        assert_eq!(m.functions, ["fid_f64_low_word"]);
        assert_eq!(m.instructions, 1);
        let want = ST64
            .replace(
                "\t.reg .b64 \t%rd<8>;\n",
                "\t.reg .b64 \t%rd<8>;\n\t.reg .b32 \t%rmis<1>;\n",
            )
            .replace(
                "\tst.global.b32 \t[%rd1], %rd6;",
                "\tcvt.u32.u64 \t%rmis0, %rd6;\n\tst.global.b32 \t[%rd1], %rmis0;",
            );
        // The declaration goes first in the body.
        let want = want.replace(
            "{\n\t.reg .pred \t%p<2>;\n\t.reg .b32 \t%r<5>;\n\t.reg .b64 \t%rd<8>;\n\t.reg .b32 \t%rmis<1>;\n",
            "{\n\t.reg .b32 \t%rmis<1>;\n\t.reg .pred \t%p<2>;\n\t.reg .b32 \t%r<5>;\n\t.reg .b64 \t%rd<8>;\n",
        );
        assert_eq!(m.text, want);
        // The safe form is left as it is.
        assert_eq!(mend_narrowing_stores(&m.text).instructions, 0);
        assert_eq!(mend_narrowing_stores(&m.text).text, m.text);
    }

    #[test]
    fn wide_sources_of_other_forms_are_narrowed_and_the_rest_kept() {
        let f = |ins: &str| format!(".visible .entry k()\n{{\n{ins}\n\tret;\n}}\n");
        let m = mend_narrowing_stores(&f(
            "\t@!%p2 st.shared.v2.b32 \t[%rd1+8], {%r1, %fd3};\n\tmov.b32 \t%r2, %rd4;",
        ));
        assert_eq!(m.instructions, 2);
        assert_eq!(
            m.text,
            ".visible .entry k()\n{\n\t.reg .b32 \t%rmis<2>;\n\t.reg .b64 \t%rdmis<1>;\n\
             \t@!%p2 mov.b64 \t%rdmis0, %fd3;\n\t@!%p2 cvt.u32.u64 \t%rmis0, %rdmis0;\n\
             \t@!%p2 st.shared.v2.b32 \t[%rd1+8], {%r1, %rmis0};\n\
             \tcvt.u32.u64 \t%rmis1, %rd4;\n\tmov.b32 \t%r2, %rmis1;\n\tret;\n}\n"
        );
        for kept in [
            "\tst.global.b32 \t[%rd1], %r4;",
            "\tmul.wide.u32 \t%rd7, %r2, 4;",
            "\tmad.wide.u32 \t%rd7, %r2, 4, %rd3;",
            "\tld.global.b32 \t%rd7, [%rd2];",
            "\tcvt.u32.u64 \t%r1, %rd2;",
            "\tst.global.b64 \t[%rd1], %rd6;",
            "\tatom.global.add.u32 \t%r1, [%rd2], %r3;",
            "\tshl.b64 \t%rd1, %rd2, %r3;",
        ] {
            let m = mend_narrowing_stores(&f(kept));
            assert_eq!((m.instructions, m.text), (0, f(kept)), "{kept}");
        }
    }

    /// Two `bar.sync 0` in the exclusive arms of a branch: the shape LLVM
    /// made of the issue's 64-thread kernel.
    const DUPLICATED: &str = "\
.visible .entry dup(
\t.param .u64 dup_param_0
)
{
\t.reg .pred \t%p<3>;
\tsetp.lt.u32 \t%p1, %r1, 20;
\t@%p1 bra \t$L__BB0_2;
\tbar.sync \t0;
\tbra.uni \t$L__BB0_3;
$L__BB0_2:
\tst.shared.b32 \t[%r2], %r1;
\tbar.sync \t0;
$L__BB0_3:
\tatom.shared.add.u32 \t%r3, [%r2], 1;
\tbar.sync \t0;
\tret;
}
";

    #[test]
    fn barriers_in_exclusive_branches_are_found() {
        let e = check_aligned_barriers(DUPLICATED).unwrap_err();
        assert_eq!(e.function, "dup");
        assert_eq!(
            e.barriers,
            [
                (8, "bar.sync \t0".to_string()),
                (12, "bar.sync \t0".to_string())
            ]
        );
        // The same with the non-aligned barrier.sync passes.
        assert_eq!(
            check_aligned_barriers(&DUPLICATED.replace("bar.sync", "barrier.sync")),
            Ok(())
        );
        // barrier.sync.aligned and barrier.cta.sync.aligned are aligned.
        for form in [
            "barrier.sync.aligned",
            "barrier.cta.sync.aligned",
            "bar.cta.sync",
        ] {
            assert!(check_aligned_barriers(&DUPLICATED.replace("bar.sync", form)).is_err());
        }
    }

    #[test]
    fn barriers_every_thread_meets_in_turn_pass() {
        // A loop with two barriers, an early exit before them, a guarded
        // return, a call sequence's scope and inline assembly with its own
        // label and braces.
        let ok = "\
.visible .entry loops()
{
\tsetp.gt.u32 \t%p1, %r1, 99;
\t@%p1 bra \t$L__BB0_4;
$L__BB0_1:
\t{ // callseq 0, 0
\t.param .b64 param0;
\tcall.uni f, (param0);
\t}
\t// begin inline asm
\t{
\t.reg .pred p;
LAB_WAIT:
\tmbarrier.try_wait.parity.shared::cta.b64 p, [%r135], %r136;
\t@!p bra LAB_WAIT;
}
\t// end inline asm
\tbar.sync \t0;
\tld.shared.b32 \t%r3, [%r2];
\tbar.sync \t0;
\t@%p2 bra \t$L__BB0_1;
\t@%p3 ret;
\tst.global.b32 \t[%rd1], %r3;
$L__BB0_4:
\tret;
}
";
        assert_eq!(check_aligned_barriers(ok), Ok(()));
        // A barrier in one arm only: the other arm meets the next one.
        let one_arm = ok.replace(
            "\t@%p1 bra \t$L__BB0_4;",
            "\t@%p1 bra \t$L__BB0_1;\n\tbar.sync 1;",
        );
        assert!(check_aligned_barriers(&one_arm).is_err());
    }

    #[test]
    fn a_device_function_with_a_barrier_counts_at_its_calls() {
        let called = "\
.func g()
{
\tbar.sync \t0;
\tret;
}
.visible .entry k()
{
\t@%p1 bra \t$L__BB1_2;
\tcall.uni g, ();
\tret;
$L__BB1_2:
\tbar.sync \t0;
\tret;
}
";
        let e = check_aligned_barriers(called).unwrap_err();
        assert_eq!(e.function, "k");
        assert_eq!(e.barriers.len(), 2);
        // A device function that may return before its barrier.
        let early = ".func h()\n{\n\t@%p1 ret;\n\tbar.sync 0;\n\tret;\n}\n";
        assert_eq!(check_aligned_barriers(early).unwrap_err().function, "h");
        // The same in a kernel: exited threads count as arrived.
        let kernel = early.replace(".func h()", ".visible .entry h()");
        assert_eq!(check_aligned_barriers(&kernel), Ok(()));
    }

    #[test]
    fn a_switch_reaches_every_target() {
        let switch = "\
.visible .entry s()
{
\t$L_brx_0: .branchtargets
\t\t$L__BB0_1,
\t\t$L__BB0_2;
\tbrx.idx \t%r12, $L_brx_0;
$L__BB0_1:
\tbar.sync \t0;
\tret;
$L__BB0_2:
\tbar.sync \t0;
\tret;
}
";
        assert_eq!(
            check_aligned_barriers(switch).unwrap_err().barriers.len(),
            2
        );
    }

    #[test]
    fn headers_and_declarations() {
        assert_eq!(
            header(".func  (.param .b32 func_retval0) _RNvf7recurse"),
            Some(("_RNvf7recurse".into(), false))
        );
        assert_eq!(
            header(".visible .entry empty_kernel()          // @empty_kernel"),
            Some(("empty_kernel".into(), true))
        );
        assert_eq!(header(".visible .functional x"), None);
        // A declaration before a body is not given that body.
        let text = ".extern .func  (.param .b32 func_retval0) vprintf\n(\n\t.param .b64 a\n)\n;\n\
                    .visible .entry k()\n{\n\tret;\n}\n";
        let lines: Vec<&str> = text.lines().collect();
        let fs = functions(&lines);
        assert_eq!(fs.len(), 1);
        assert_eq!((fs[0].name.as_str(), fs[0].open, fs[0].close), ("k", 6, 8));
    }
}
