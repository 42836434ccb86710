//! The text form of an epilogue (`--epilogue TEXT`), and the conversion of the
//! comma-list form [`Epilogue`] (`bias,gelu,aux`, what the flag-driven epilogue runs) to a tree.
//!
//! Grammar (whitespace is free):
//!
//! ```text
//! tree    := expr (';' ('sum_k_a' | 'sum_k_b'))*
//! expr    := sum (('<' | '<=' | '>' | '>=') sum)?
//! sum     := product (('+' | '-') product)*
//! product := prefix ('*' prefix)*
//! prefix  := '-' NUMBER | '-' prefix | atom
//! atom    := NUMBER | LEAF | NAME '(' expr (',' expr)* ')' | '(' expr ')'
//! ```
//!
//! A number with a `.` or an exponent is a floating-point constant, otherwise an integer.
//! The whole text may instead be one named fusion (`gelu_aux_bias`, see
//! [`super::fusions::Fusion`]) or a comma list made only of the flag-driven epilogue's words
//! (`bias rowbias colbias relu gelu gelu_erf gelu_tanh aux c beta none`).

use super::check::{Binding, MatSpec};
use crate::plan::problem::{DType, Epilogue};

use super::error::{EpilogueError, Result};
use super::fusions::Fusion;
use super::tree::{build, AuxFormat, BinaryOp, CmpOp, Coord, EpilogueTree, Expr, Leaf, Operand};
use super::tree::{Sink, UnaryOp, VecAxis};

/// Parses the text form, a named fusion or a comma list into a tree whose structure is
/// checked ([`EpilogueTree::check_structure`]).
///
/// ```
/// use tessera_kernels::epilogue::parse_epilogue;
/// let t = parse_epilogue("select(row < 100, sigmoid(acc), tanh(acc))").unwrap();
/// assert_eq!(t.to_string(), "select(row < 100, sigmoid(acc), tanh(acc))");
/// assert!(parse_epilogue("relu(acc < 3)").is_err());
/// ```
pub fn parse_epilogue(text: &str) -> Result<EpilogueTree> {
    let trimmed = text.trim();
    let tree = if let Some(f) = Fusion::from_name(trimmed) {
        f.tree()
    } else if is_comma_list(trimmed) {
        let flags = Epilogue::parse(trimmed).map_err(|e| EpilogueError::Parse {
            text: text.to_string(),
            pos: 0,
            msg: e.to_string(),
        })?;
        from_comma_list(&flags)
    } else {
        let toks = lex(text)?;
        if toks.len() > MAX_TOKENS {
            return Err(EpilogueError::Parse {
                text: text.chars().take(80).collect::<String>() + "...",
                pos: 0,
                msg: format!(
                    "{} tokens; the text form takes at most {MAX_TOKENS}",
                    toks.len()
                ),
            });
        }
        let mut p = Parser { text, toks, at: 0 };
        let t = p.tree()?;
        if p.at < p.toks.len() {
            return Err(p.error("unexpected trailing input"));
        }
        t
    };
    tree.check_structure()?;
    Ok(tree)
}

const COMMA_LIST_WORDS: &[&str] = &[
    "bias",
    "rowbias",
    "colbias",
    "relu",
    "gelu",
    "gelu_erf",
    "gelu_tanh",
    "aux",
    "c",
    "beta",
    "none",
];

fn is_comma_list(s: &str) -> bool {
    s.is_empty()
        || s.split(',')
            .map(str::trim)
            .all(|w| w.is_empty() || COMMA_LIST_WORDS.contains(&w))
}

/// The tree of a comma-list epilogue: `act(aux(alpha * acc + beta * c + bias))`, with the
/// `beta * c` term only when `e.beta != 0`, the bias as its mode says, and `aux` only when
/// asked.
///
/// The struct's `alpha` and `beta` values are run-time scalars of the tree (`alpha`,
/// `beta` leaves): bind them when launching.
///
/// `bias,gelu,aux` is `gelu(aux(alpha * acc + bias_col))`.
pub fn from_comma_list(e: &Epilogue) -> EpilogueTree {
    use crate::plan::problem::{Activation, BiasMode};
    let mut x = build::alpha() * build::acc();
    if e.beta != 0.0 {
        x = x + build::beta() * build::c();
    }
    match e.bias {
        BiasMode::None => {}
        BiasMode::PerRow => x = x + build::bias_row(),
        BiasMode::PerCol => x = x + build::bias_col(),
    }
    if e.aux {
        x = x.store_aux(AuxFormat::Full(None));
    }
    let d = match e.act {
        Activation::None => x,
        Activation::Relu => x.relu(),
        Activation::GeluErf => x.gelu(),
        Activation::GeluTanh => x.gelu_tanh(),
    };
    EpilogueTree::new(d)
}

/// The comma-list [`Epilogue`] a tree stands for, when the sm80 kernel's flag-driven epilogue can run
/// it: `act(aux(alpha * acc [+ beta * c] [+ bias_row | bias_col]))` with `act` one of
/// `relu`, `gelu`, `gelu_tanh` (or none) and `aux` optional, in D's type. `alpha` and `beta`
/// are 1 in the result (their terms are present); set the values to run with.
///
/// `gelu_aux(alpha * acc + bias_col)` is `bias,gelu,aux`; `relu_aux(alpha * acc)` (a bit mask)
/// has none.
pub fn to_comma_list(tree: &EpilogueTree) -> Option<Epilogue> {
    use crate::plan::problem::{Activation, BiasMode};
    if !tree.sum_k.is_empty() {
        return None;
    }
    let mut e = Epilogue::default();
    let mut x = &tree.d;
    if let Expr::Unary(op, inner) = x {
        e.act = match op {
            UnaryOp::Relu => Activation::Relu,
            UnaryOp::Gelu => Activation::GeluErf,
            UnaryOp::GeluTanh => Activation::GeluTanh,
            _ => return None,
        };
        x = inner;
    }
    if let Expr::Sink(Sink::Aux(AuxFormat::Full(None)), inner) = x {
        e.aux = true;
        x = inner;
    }
    if let Expr::Binary(BinaryOp::Add, rest, bias) = x {
        match **bias {
            Expr::Leaf(Leaf::BiasRow) => e.bias = crate::plan::problem::BiasMode::PerRow,
            Expr::Leaf(Leaf::BiasCol) => e.bias = BiasMode::PerCol,
            _ => {}
        }
        if e.bias != BiasMode::None {
            x = rest;
        }
    }
    let lin = build::alpha() * build::acc();
    if *x == lin {
        return Some(e);
    }
    if *x == lin + build::beta() * build::c() {
        e.beta = 1.0;
        return Some(e);
    }
    None
}

#[derive(Clone, Debug, PartialEq)]
enum Tok {
    Int(i64),
    Num(f64),
    Ident(String),
    Sym(&'static str),
}

fn lex(text: &str) -> Result<Vec<(usize, Tok)>> {
    let b = text.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    let err = |pos: usize, msg: String| EpilogueError::Parse {
        text: text.to_string(),
        pos,
        msg,
    };
    while i < b.len() {
        let ch = b[i];
        if ch.is_ascii_whitespace() {
            i += 1;
        } else if ch.is_ascii_digit()
            || (ch == b'.' && b.get(i + 1).is_some_and(u8::is_ascii_digit))
        {
            let start = i;
            let mut float = false;
            while i < b.len() && (b[i].is_ascii_digit() || b[i] == b'.') {
                float |= b[i] == b'.';
                i += 1;
            }
            if i < b.len() && (b[i] == b'e' || b[i] == b'E') {
                float = true;
                i += 1;
                if i < b.len() && (b[i] == b'+' || b[i] == b'-') {
                    i += 1;
                }
                while i < b.len() && b[i].is_ascii_digit() {
                    i += 1;
                }
            }
            let s = &text[start..i];
            let tok = if float {
                Tok::Num(
                    s.parse::<f64>()
                        .map_err(|_| err(start, format!("bad number `{s}`")))?,
                )
            } else {
                // Parsed as a magnitude up to 2^63 so that `-9223372036854775808` folds.
                let v = s
                    .parse::<u64>()
                    .ok()
                    .filter(|&v| v <= 1u64 << 63)
                    .ok_or_else(|| err(start, format!("integer `{s}` out of range")))?;
                Tok::Int(v as i64) // 2^63 wraps to i64::MIN; only valid after a minus
            };
            out.push((start, tok));
        } else if ch.is_ascii_alphabetic() || ch == b'_' {
            let start = i;
            while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_') {
                i += 1;
            }
            out.push((start, Tok::Ident(text[start..i].to_string())));
        } else {
            let two = text.get(i..i + 2);
            let sym = match (two, ch) {
                (Some("<="), _) => "<=",
                (Some(">="), _) => ">=",
                (_, b'<') => "<",
                (_, b'>') => ">",
                (_, b'+') => "+",
                (_, b'-') => "-",
                (_, b'*') => "*",
                (_, b'(') => "(",
                (_, b')') => ")",
                (_, b',') => ",",
                (_, b';') => ";",
                _ => {
                    let c = text[i..].chars().next().unwrap_or('?');
                    return Err(err(i, format!("unexpected character `{c}`")));
                }
            };
            out.push((i, Tok::Sym(sym)));
            i += sym.len();
        }
    }
    Ok(out)
}

struct Parser<'a> {
    text: &'a str,
    toks: Vec<(usize, Tok)>,
    at: usize,
}

/// Nesting limit of the text form, so that hostile input cannot overflow the stack.
const MAX_DEPTH: usize = 64;
/// Length limit of the text form (it also bounds the depth of `a + a + ...` chains, which the
/// parser builds iteratively but every later pass walks recursively).
const MAX_TOKENS: usize = 4096;

impl Parser<'_> {
    fn pos(&self) -> usize {
        self.toks.get(self.at).map_or(self.text.len(), |t| t.0)
    }

    fn error(&self, msg: impl Into<String>) -> EpilogueError {
        EpilogueError::Parse {
            text: self.text.to_string(),
            pos: self.pos(),
            msg: msg.into(),
        }
    }

    fn peek(&self) -> Option<&Tok> {
        self.toks.get(self.at).map(|t| &t.1)
    }

    fn eat(&mut self, sym: &'static str) -> bool {
        if self.peek() == Some(&Tok::Sym(sym)) {
            self.at += 1;
            true
        } else {
            false
        }
    }

    fn expect(&mut self, sym: &'static str) -> Result<()> {
        if self.eat(sym) {
            Ok(())
        } else {
            Err(self.error(format!("expected `{sym}`")))
        }
    }

    fn tree(&mut self) -> Result<EpilogueTree> {
        let d = self.expr(0)?;
        let mut sum_k = Vec::new();
        while self.eat(";") {
            match self.peek() {
                Some(Tok::Ident(s)) if s == "sum_k_a" => sum_k.push(Operand::A),
                Some(Tok::Ident(s)) if s == "sum_k_b" => sum_k.push(Operand::B),
                _ => return Err(self.error("expected `sum_k_a` or `sum_k_b` after `;`")),
            }
            self.at += 1;
        }
        Ok(EpilogueTree { d, sum_k })
    }

    fn expr(&mut self, depth: usize) -> Result<Expr> {
        if depth > MAX_DEPTH {
            return Err(self.error(format!("nested deeper than {MAX_DEPTH}")));
        }
        let a = self.sum(depth)?;
        for (sym, op) in [
            ("<=", CmpOp::Le),
            (">=", CmpOp::Ge),
            ("<", CmpOp::Lt),
            (">", CmpOp::Gt),
        ] {
            if self.eat(sym) {
                let b = self.sum(depth)?;
                return Ok(Expr::Cmp(op, Box::new(a), Box::new(b)));
            }
        }
        Ok(a)
    }

    fn sum(&mut self, depth: usize) -> Result<Expr> {
        let mut a = self.product(depth)?;
        // Each operator of a chain adds a level to the tree's left spine.
        let mut depth = depth;
        loop {
            depth += 1;
            if depth > MAX_DEPTH {
                return Err(self.error(format!("nested deeper than {MAX_DEPTH}")));
            }
            let op = if self.eat("+") {
                BinaryOp::Add
            } else if self.eat("-") {
                BinaryOp::Sub
            } else {
                return Ok(a);
            };
            let b = self.product(depth)?;
            a = Expr::Binary(op, Box::new(a), Box::new(b));
        }
    }

    fn product(&mut self, depth: usize) -> Result<Expr> {
        let mut a = self.prefix(depth)?;
        let mut depth = depth;
        while self.eat("*") {
            depth += 1;
            if depth > MAX_DEPTH {
                return Err(self.error(format!("nested deeper than {MAX_DEPTH}")));
            }
            let b = self.prefix(depth)?;
            a = Expr::Binary(BinaryOp::Mul, Box::new(a), Box::new(b));
        }
        Ok(a)
    }

    fn prefix(&mut self, depth: usize) -> Result<Expr> {
        if depth > MAX_DEPTH {
            return Err(self.error(format!("nested deeper than {MAX_DEPTH}")));
        }
        if self.eat("-") {
            match self.peek().cloned() {
                Some(Tok::Int(v)) => {
                    self.at += 1;
                    return Ok(build::int(v.wrapping_neg()));
                }
                Some(Tok::Num(v)) => {
                    self.at += 1;
                    return Ok(build::num(-v));
                }
                _ => {
                    let x = self.prefix(depth + 1)?;
                    return Ok(-x);
                }
            }
        }
        self.atom(depth)
    }

    fn atom(&mut self, depth: usize) -> Result<Expr> {
        let start = self.at;
        match self.peek().cloned() {
            Some(Tok::Int(v)) => {
                if v == i64::MIN {
                    return Err(self.error("integer out of range"));
                }
                self.at += 1;
                Ok(build::int(v))
            }
            Some(Tok::Num(v)) => {
                self.at += 1;
                Ok(build::num(v))
            }
            Some(Tok::Sym("(")) => {
                self.at += 1;
                let e = self.expr(depth + 1)?;
                self.expect(")")?;
                Ok(e)
            }
            Some(Tok::Ident(name)) => {
                self.at += 1;
                if self.eat("(") {
                    if name == "aux" {
                        return self.aux_call(depth);
                    }
                    let mut args = vec![self.expr(depth + 1)?];
                    while self.eat(",") {
                        args.push(self.expr(depth + 1)?);
                    }
                    self.expect(")")?;
                    self.call(&name, args, start)
                } else {
                    self.leaf(&name, start)
                }
            }
            _ => Err(self.error("expected a number, a name or `(`")),
        }
    }

    fn error_at(&self, tok: usize, msg: String) -> EpilogueError {
        EpilogueError::Parse {
            text: self.text.to_string(),
            pos: self.toks.get(tok).map_or(self.text.len(), |t| t.0),
            msg,
        }
    }

    fn leaf(&self, name: &str, tok: usize) -> Result<Expr> {
        let leaf = match name {
            "acc" => Leaf::Acc,
            "c" => Leaf::C,
            "alpha" => Leaf::Alpha,
            "beta" => Leaf::Beta,
            "bias_row" => Leaf::BiasRow,
            "bias_col" => Leaf::BiasCol,
            "residual" => Leaf::Residual,
            "aux_in" => Leaf::AuxIn,
            "aux_in_bits" => Leaf::AuxInBits,
            "row" => Leaf::Coord(Coord::Row),
            "col" => Leaf::Coord(Coord::Col),
            "batch" => Leaf::Coord(Coord::Batch),
            _ => {
                let hint = if Fusion::from_name(name).is_some() {
                    " (a named fusion is the whole text, not part of an expression)"
                } else {
                    " (leaves: acc c alpha beta bias_row bias_col residual aux_in aux_in_bits row col batch)"
                };
                return Err(self.error_at(tok, format!("unknown leaf `{name}`{hint}")));
            }
        };
        Ok(Expr::Leaf(leaf))
    }

    fn call(&self, name: &str, mut args: Vec<Expr>, tok: usize) -> Result<Expr> {
        let arity = |n: usize| -> Result<()> {
            if args.len() == n {
                Ok(())
            } else {
                Err(self.error_at(
                    tok,
                    format!("`{name}` takes {n} argument(s), got {}", args.len()),
                ))
            }
        };
        let number = |e: &Expr| -> Result<f64> {
            match e {
                Expr::Leaf(Leaf::Const(v)) => Ok(*v),
                Expr::Leaf(Leaf::Int(v)) => Ok(*v as f64),
                _ => Err(self.error_at(tok, format!("`{name}`'s bounds must be numbers"))),
            }
        };
        let unary = |op: UnaryOp| -> Option<UnaryOp> { Some(op) };
        let simple = match name {
            "relu" => unary(UnaryOp::Relu),
            "gelu" => unary(UnaryOp::Gelu),
            "gelu_tanh" => unary(UnaryOp::GeluTanh),
            "sigmoid" => unary(UnaryOp::Sigmoid),
            "tanh" => unary(UnaryOp::Tanh),
            "silu" => unary(UnaryOp::Silu),
            "drelu" => unary(UnaryOp::DRelu),
            "dgelu" => unary(UnaryOp::DGelu),
            "dgelu_tanh" => unary(UnaryOp::DGeluTanh),
            "dsigmoid" => unary(UnaryOp::DSigmoid),
            "dtanh" => unary(UnaryOp::DTanh),
            "dsilu" => unary(UnaryOp::DSilu),
            "bf16" => unary(UnaryOp::Round(DType::Bf16)),
            "fp16" => unary(UnaryOp::Round(DType::F16)),
            "fp32" => unary(UnaryOp::Round(DType::F32)),
            _ => None,
        };
        if let Some(op) = simple {
            arity(1)?;
            return Ok(args.remove(0).unary(op));
        }
        let take = |args: &mut Vec<Expr>| args.remove(0);
        match name {
            "clamp" | "dclamp" => {
                arity(3)?;
                let (lo, hi) = (number(&args[1])?, number(&args[2])?);
                let x = take(&mut args);
                Ok(x.unary(if name == "clamp" {
                    UnaryOp::Clamp { lo, hi }
                } else {
                    UnaryOp::DClamp { lo, hi }
                }))
            }
            "max" | "min" => {
                arity(2)?;
                let a = take(&mut args);
                let b = take(&mut args);
                Ok(if name == "max" { a.max(b) } else { a.min(b) })
            }
            "select" => {
                arity(3)?;
                let p = take(&mut args);
                let a = take(&mut args);
                let b = take(&mut args);
                Ok(build::select(p, a, b))
            }
            "aux_bits" => {
                arity(1)?;
                Ok(take(&mut args).store_aux(AuxFormat::Bits))
            }
            "relu_aux" => {
                arity(1)?;
                Ok(take(&mut args).store_aux(AuxFormat::Bits).relu())
            }
            "gelu_aux" => {
                arity(1)?;
                Ok(take(&mut args).store_aux(AuxFormat::Full(None)).gelu())
            }
            "gelu_tanh_aux" => {
                arity(1)?;
                Ok(take(&mut args).store_aux(AuxFormat::Full(None)).gelu_tanh())
            }
            "bgrad_row" | "bgrad_col" => {
                arity(1)?;
                let axis = if name == "bgrad_row" {
                    VecAxis::Row
                } else {
                    VecAxis::Col
                };
                Ok(Expr::Sink(Sink::Bgrad(axis), Box::new(take(&mut args))))
            }
            _ => Err(self.error_at(tok, format!("unknown function `{name}`"))),
        }
    }

    /// `aux(x)` or `aux(x, DTYPE)`, after the `(`.
    fn aux_call(&mut self, depth: usize) -> Result<Expr> {
        let x = self.expr(depth + 1)?;
        let mut dtype = None;
        if self.eat(",") {
            let t = match self.peek() {
                Some(Tok::Ident(s)) => s.parse::<DType>().ok(),
                _ => None,
            };
            match t {
                Some(t) => {
                    self.at += 1;
                    dtype = Some(t);
                }
                None => {
                    return Err(self.error("aux's second argument is a dtype (bf16, fp16, fp32)"))
                }
            }
        }
        self.expect(")")?;
        Ok(x.store_aux(AuxFormat::Full(dtype)))
    }
}

/// The flag-driven epilogue ([`crate::plan::problem::Epilogue`]) that computes `tree` for
/// launches bound like `binding` with output type `out`, if any: [`super::to_comma_list`]
/// expresses the tree (an optional ReLU/GELU of `alpha * acc (+ beta * c) (+ bias)`, the
/// pre-activation optionally stored as a full aux) and every tensor the epilogue touches is
/// bound in `out` (it reads C and the bias and writes aux in D's type). alpha and beta are the
/// binding's.
///
/// `gelu_aux_bias` bound in bf16 is `bias,gelu_tanh,aux`; with an fp32 column bias there is
/// none (not what the flag-driven epilogue reads), nor for `relu_aux_bias` (a bit mask is not
/// a full aux).
pub fn flag_epilogue_for(
    tree: &EpilogueTree,
    binding: &Binding,
    out: DType,
) -> Option<crate::plan::problem::Epilogue> {
    use crate::plan::problem::BiasMode;
    // A tree of the bare accumulator is the flag-driven epilogue's with alpha fixed at 1
    // (`relu(acc + bias_col)` is `relu(alpha * acc + bias_col)` for alpha = 1).
    let scaled = !tree.d.uses(Leaf::Alpha);
    let mut e = if scaled {
        to_comma_list(&EpilogueTree {
            d: with_alpha(&tree.d),
            sum_k: tree.sum_k.clone(),
        })?
    } else {
        to_comma_list(tree)?
    };
    let mat_ok = |m: &Option<MatSpec>| m.is_some_and(|m| !m.bits && m.dtype == out);
    if binding.d.bits || binding.d.dtype != out {
        return None;
    }
    e.alpha = if scaled { 1.0 } else { binding.alpha };
    if e.beta != 0.0 {
        if binding.beta != 0.0 && !mat_ok(&binding.c) {
            return None;
        }
        e.beta = binding.beta;
    }
    let bias = match e.bias {
        BiasMode::None => None,
        BiasMode::PerRow => Some(binding.bias_row),
        BiasMode::PerCol => Some(binding.bias_col),
    };
    if let Some(v) = bias {
        if !v.is_some_and(|v| v.dtype == out) {
            return None;
        }
    }
    if e.aux && !mat_ok(&binding.aux) {
        return None;
    }
    Some(e)
}

/// `e` with every `acc` leaf scaled by `alpha`.
fn with_alpha(e: &Expr) -> Expr {
    match e {
        Expr::Leaf(Leaf::Acc) => build::alpha() * build::acc(),
        Expr::Leaf(l) => Expr::Leaf(*l),
        Expr::Unary(op, x) => Expr::Unary(*op, Box::new(with_alpha(x))),
        Expr::Binary(op, a, b) => {
            Expr::Binary(*op, Box::new(with_alpha(a)), Box::new(with_alpha(b)))
        }
        Expr::Cmp(op, a, b) => Expr::Cmp(*op, Box::new(with_alpha(a)), Box::new(with_alpha(b))),
        Expr::Select(p, a, b) => Expr::Select(
            Box::new(with_alpha(p)),
            Box::new(with_alpha(a)),
            Box::new(with_alpha(b)),
        ),
        Expr::Sink(s, x) => Expr::Sink(*s, Box::new(with_alpha(x))),
    }
}
