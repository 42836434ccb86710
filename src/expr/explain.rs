//! `tessera eval --explain`: the intermediate layouts of a divide or a product.
//!
//! A divide is `coalesce(L) o (T, complement(T, shape(coalesce(L))))` and a product is
//! `(A, complement(A, size(A) * cosize(B)) o B)`, mode by mode for a by-mode tiler; blocked
//! and raked products pad both operands to one rank first and zip the product's modes. The
//! explanation recomputes those pieces with the library's public operations, one line each,
//! and ends with the result line `= R`, which is what `tessera eval` prints for the same
//! expression. A step that fails prints its error (which names the violated condition and,
//! where there is one, a witness) and the explanation stops there.
//!
//! Any other expression is explained by its value alone.

use tessera_layout::{self as tl, IntTuple, Layout, Tiler};

use super::parse::{parse, Expr};
use super::value::Value;
use super::Error;

/// The steps of an expression and its value.
#[derive(Debug, Clone)]
pub struct Explanation {
    /// One line per step, up to the failing one if the expression fails.
    pub steps: Vec<String>,
    /// The value of the expression, or its error as [`evaluate`](super::evaluate) reports it.
    pub result: Result<Value, Error>,
}

/// The explanation of `src` (see the module documentation).
pub fn explain(src: &str) -> Explanation {
    let mut steps = Vec::new();
    let expr = match parse(src) {
        Ok(e) => e,
        Err(e) => {
            return Explanation {
                steps,
                result: Err(e),
            }
        }
    };
    let value = match &expr {
        Expr::Call { name, args } if EXPLAINED.contains(name) && args.len() == 2 => {
            explain_call(name, args, &mut steps)
        }
        _ => expr.eval(),
    };
    // On failure, the error the expression gives when evaluated (the failing step above
    // printed the helper's own error): the same line `tessera eval` prints.
    let result = value.map_err(|e| expr.eval().err().unwrap_or(e));
    Explanation { steps, result }
}

/// The operations explained step by step.
const EXPLAINED: &[&str] = &[
    "logical_divide",
    "zipped_divide",
    "tiled_divide",
    "flat_divide",
    "logical_product",
    "zipped_product",
    "tiled_product",
    "flat_product",
    "blocked_product",
    "raked_product",
];

fn as_layout(op: &'static str, v: &Value) -> Result<Layout, Error> {
    match v {
        Value::Layout(l) => Ok(l.clone()),
        Value::IntTuple(t) => Ok(Layout::col_major(t.clone())?),
        Value::SwizzledLayout(l) => Ok(l.inner.clone()),
        other => Err(Error::call(
            op,
            format!("{} `{other}` is not a layout", other.kind()),
        )),
    }
}

fn as_tiler(op: &'static str, v: &Value) -> Result<Tiler, Error> {
    match v {
        Value::Layout(l) => Ok(Tiler::Layout(l.clone())),
        Value::IntTuple(t) => Ok(Tiler::from_shape(t)?),
        Value::Tiler(t) => Ok(t.clone()),
        other => Err(Error::call(
            op,
            format!("{} `{other}` is not a layout, shape or tiler", other.kind()),
        )),
    }
}

fn explain_call(name: &'static str, args: &[Expr], out: &mut Vec<String>) -> Result<Value, Error> {
    let a = args[0].eval()?;
    let b = args[1].eval()?;
    let swizzled = match &a {
        Value::SwizzledLayout(s) => {
            out.push(format!(
                "{name} of the swizzled layout {s} works on its inner layout {}; the result keeps {} o {}",
                s.inner, s.swizzle, s.offset
            ));
            Some(s.clone())
        }
        _ => None,
    };
    let l = as_layout(name, &a)?;
    let plain = match name {
        "blocked_product" | "raked_product" => {
            let bl = as_layout(name, &b)?;
            out.push(format!("{name}({l}, {bl})"));
            zipped_pairs(name, &l, &bl, out)?
        }
        _ => {
            let t = as_tiler(name, &b)?;
            out.push(format!("{name}({l}, {t})"));
            let divide = name.ends_with("divide");
            let logical = by_mode(&l, &t, divide, 1, out)?;
            if name.starts_with("logical") {
                logical
            } else {
                let r = match name {
                    "zipped_divide" => tl::zipped_divide(&l, &t)?,
                    "tiled_divide" => tl::tiled_divide(&l, &t)?,
                    "flat_divide" => tl::flat_divide(&l, &t)?,
                    "zipped_product" => tl::zipped_product(&l, &t)?,
                    "tiled_product" => tl::tiled_product(&l, &t)?,
                    _ => tl::flat_product(&l, &t)?,
                };
                out.push(format!(
                    "{name} regroups the modes of {logical}: tile modes first, then the rest{}: {r}",
                    if name.starts_with("zipped") {
                        ""
                    } else if name.starts_with("tiled") {
                        ", unpacked"
                    } else {
                        ", both unpacked"
                    }
                ));
                r
            }
        }
    };
    Ok(match swizzled {
        Some(s) => Value::SwizzledLayout(s.with_inner(plain)),
        None => Value::Layout(plain),
    })
}

fn indent(depth: usize) -> String {
    "  ".repeat(depth)
}

/// The steps of a logical divide or product of `l` by `t`, at indentation `depth`.
fn by_mode(
    l: &Layout,
    t: &Tiler,
    divide: bool,
    depth: usize,
    out: &mut Vec<String>,
) -> Result<Layout, Error> {
    let pad = indent(depth);
    match t {
        Tiler::Skip => {
            out.push(format!("{pad}`_` keeps {l}"));
            Ok(l.clone())
        }
        Tiler::Layout(tile) if divide => divide_steps(l, tile, depth, out),
        Tiler::Layout(b) => product_steps(l, b, depth, out),
        Tiler::ByMode(ts) => {
            if ts.len() > l.rank() {
                // The library's error says it: the tiler has more modes than the layout.
                return Ok(if divide {
                    tl::logical_divide(l, t)?
                } else {
                    tl::logical_product(l, t)?
                });
            }
            out.push(format!("{pad}by mode: {} modes, tiler {t}", l.rank()));
            let mut modes = Vec::new();
            for (i, m) in l.modes().enumerate() {
                match ts.get(i) {
                    Some(ti) => {
                        out.push(format!("{pad}mode {i}: {m} by {ti}"));
                        modes.push(by_mode(&m, ti, divide, depth + 1, out)?);
                    }
                    None => {
                        out.push(format!("{pad}mode {i}: {m} (beyond the tiler, kept)"));
                        modes.push(m);
                    }
                }
            }
            let r = if divide {
                tl::logical_divide(l, t)?
            } else {
                tl::logical_product(l, t)?
            };
            out.push(format!("{pad}the modes together: {r}"));
            Ok(r)
        }
    }
}

fn divide_steps(
    l: &Layout,
    tile: &Layout,
    depth: usize,
    out: &mut Vec<String>,
) -> Result<Layout, Error> {
    let pad = indent(depth);
    let cl = tl::coalesce(l);
    out.push(format!("{pad}coalesce({l}) = {cl}"));
    let cot = cl.shape().as_tuple().clone();
    let c = step(out, &pad, format!("complement({tile}, {cot})"), || {
        tl::complement(tile, &cot)
    })?;
    let b = Layout::concat([tile.clone(), c])?;
    out.push(format!("{pad}(T, C) = {b}"));
    let r = step(out, &pad, format!("{cl} o {b}"), || {
        tl::composition(&cl, &b)
    })?;
    // The library composes the same operands; this is its answer, labelled as the divide.
    let lib = tl::logical_divide(l, &Tiler::Layout(tile.clone()))?;
    debug_assert_eq!(lib, r);
    Ok(lib)
}

fn product_steps(
    a: &Layout,
    b: &Layout,
    depth: usize,
    out: &mut Vec<String>,
) -> Result<Layout, Error> {
    let pad = indent(depth);
    let bound = a.size().checked_mul(b.cosize()).ok_or_else(|| {
        tl::LayoutError::overflow("logical_product", format!("{} * {}", a.size(), b.cosize()))
    })?;
    out.push(format!(
        "{pad}size({a}) * cosize({b}) = {} * {} = {bound}",
        a.size(),
        b.cosize()
    ));
    let cot = IntTuple::Int(bound);
    let c = step(out, &pad, format!("complement({a}, {bound})"), || {
        tl::complement(a, &cot)
    })?;
    let cb = step(out, &pad, format!("{c} o {b}"), || tl::composition(&c, b))?;
    let r = Layout::concat([a.clone(), cb])?;
    out.push(format!("{pad}(A, C o B) = {r}"));
    let lib = tl::logical_product(a, &Tiler::Layout(b.clone()))?;
    debug_assert_eq!(lib, r);
    Ok(lib)
}

/// Runs one step, printing `what = result` or `what: error: ...`.
fn step(
    out: &mut Vec<String>,
    pad: &str,
    what: String,
    f: impl FnOnce() -> tl::Result<Layout>,
) -> Result<Layout, Error> {
    match f() {
        Ok(r) => {
            out.push(format!("{pad}{what} = {r}"));
            Ok(r)
        }
        Err(e) => {
            out.push(format!("{pad}{what}: error: {e}"));
            Err(e.into())
        }
    }
}

/// Blocked and raked products: both operands padded with `1:0` to one rank, their logical
/// product, then mode `i` zipped from mode `i` of each half.
fn zipped_pairs(
    name: &'static str,
    a: &Layout,
    b: &Layout,
    out: &mut Vec<String>,
) -> Result<Layout, Error> {
    let rank = a.rank().max(b.rank());
    let pad = |l: &Layout| -> Result<Layout, Error> {
        let mut modes: Vec<Layout> = l.modes().collect();
        while modes.len() < rank {
            modes.push(Layout::int(1, 0)?);
        }
        Ok(if l.rank() >= rank {
            l.clone()
        } else {
            Layout::concat(modes)?
        })
    };
    let (pa, pb) = (pad(a)?, pad(b)?);
    out.push(format!("  padded to rank {rank}: A = {pa}, B = {pb}"));
    product_steps(&pa, &pb, 1, out)?;
    let r = if name == "blocked_product" {
        tl::blocked_product(a, b)?
    } else {
        tl::raked_product(a, b)?
    };
    out.push(format!(
        "  mode i of the result zips mode i of {} and of {}: {r}",
        if name == "blocked_product" {
            "A"
        } else {
            "C o B"
        },
        if name == "blocked_product" {
            "C o B"
        } else {
            "A"
        },
    ));
    Ok(r)
}
