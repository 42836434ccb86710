//! The calls on functions as a whole: `equal`, `canonical`, the F2 view (`f2`, `is_linear`,
//! and `composition`, inverses, `eval`, `is_bijective`, `is_injective` of F2 maps) and swizzle
//! synthesis (`best_swizzle`, `best_xor_swizzle`).

use tessera_layout as tl;
use tessera_swizzle::{self as tsw, F2Map, SwizzleError, SwizzledLayout};

use super::super::value::Value;
use super::super::Error;
use super::Args;

/// The names this module answers, whatever the arguments.
pub(super) const NAMES: &[&str] = &[
    "equal",
    "canonical",
    "f2",
    "is_linear",
    "best_swizzle",
    "best_xor_swizzle",
];

/// Whether a call of `name` is this module's: one of [`NAMES`], or a function of F2 maps
/// called on one.
pub(super) fn takes(name: &str, a: &Args) -> bool {
    NAMES.contains(&name)
        || (matches!(
            name,
            "composition"
                | "right_inverse"
                | "left_inverse"
                | "eval"
                | "is_bijective"
                | "is_injective"
        ) && matches!(a.vals.first(), Some(Value::F2Map(_))))
}

pub(super) fn call(name: &'static str, a: Args) -> Result<Value, Error> {
    match name {
        "equal" => {
            a.count(2, 2)?;
            match (&a.vals[0], &a.vals[1]) {
                (Value::SwizzledLayout(_), _) | (_, Value::SwizzledLayout(_)) => {
                    Ok(Value::Bool(tsw::equal(&a.any(0)?, &a.any(1)?)?))
                }
                _ => Ok(Value::Bool(tl::equal(&a.layout(0)?, &a.layout(1)?))),
            }
        }
        "canonical" => {
            a.count(1, 1)?;
            if let Some(l) = a.swizzled(0) {
                return Err(Error::call(
                    "canonical",
                    format!("`{l}` is a swizzled layout; compare swizzled layouts with equal"),
                ));
            }
            Ok(Value::Layout(tl::canonical(&a.layout(0)?)))
        }
        "f2" => {
            a.count(1, 2)?;
            if let Value::Swizzle(sw) = &a.vals[0] {
                a.count(2, 2)?;
                let bits = a.int(1)?;
                if !(0..=62).contains(&bits) {
                    return Err(Error::call(
                        "f2",
                        format!("{bits} bits: a swizzle's F2 map takes 0 to 62 input bits"),
                    ));
                }
                return Ok(Value::F2Map(F2Map::of_swizzle(sw, bits as u32)));
            }
            a.count(1, 1)?;
            Ok(Value::F2Map(
                F2Map::of(&a.any(0)?).map_err(|e| as_op(e, "f2"))?,
            ))
        }
        "is_linear" => {
            a.count(1, 1)?;
            match &a.vals[0] {
                Value::F2Map(f) => Ok(Value::Bool(f.is_linear())),
                _ => Ok(Value::Bool(tsw::is_linear(&a.any(0)?)?)),
            }
        }
        "best_swizzle" | "best_xor_swizzle" => {
            a.count(3, usize::MAX)?;
            let n = a.len();
            let accesses = (0..n - 2)
                .map(|i| a.layout(i))
                .collect::<Result<Vec<_>, _>>()?;
            let smem = a.layout(n - 2)?;
            let bytes = a.int(n - 1)?;
            if name == "best_swizzle" {
                let c = tsw::best_swizzle(&accesses, &smem, bytes)?;
                Ok(Value::SwizzledLayout(SwizzledLayout::new(
                    c.swizzle, 0, smem,
                )))
            } else {
                Ok(Value::F2Map(
                    tsw::best_xor_swizzle(&accesses, &smem, bytes)?.map,
                ))
            }
        }
        _ => f2_call(name, a),
    }
}

fn f2(a: &Args, i: usize) -> Result<F2Map, Error> {
    match &a.vals[i] {
        Value::F2Map(f) => Ok(f.clone()),
        Value::Swizzle(_) => Err(a.wrong(i, "an F2 map (a swizzle becomes one by f2(Sw, bits))")),
        _ => Ok(F2Map::of(&a.any(i).map_err(|_| a.wrong(i, "an F2 map"))?)
            .map_err(|e| as_op(e, a.op))?),
    }
}

/// `e` as an error of the operation the user called (the library names its own helper).
fn as_op(e: SwizzleError, op: &'static str) -> Error {
    Error::from(match e {
        SwizzleError::Inadmissible {
            operands, reason, ..
        } => SwizzleError::Inadmissible {
            op,
            operands,
            reason,
        },
        SwizzleError::TooLarge {
            operands,
            needed,
            limit,
            ..
        } => SwizzleError::TooLarge {
            op,
            operands,
            needed,
            limit,
        },
        SwizzleError::Overflow { operands, .. } => SwizzleError::Overflow { op, operands },
        e => e,
    })
}

/// An F2 map's `composition` (with another map or an XOR-linear layout), inverses, `eval`,
/// `is_bijective` and `is_injective`.
fn f2_call(name: &'static str, a: Args) -> Result<Value, Error> {
    let f = f2(&a, 0)?;
    match name {
        "composition" => {
            a.count(2, 2)?;
            Ok(Value::F2Map(f.compose(&f2(&a, 1)?)?))
        }
        "right_inverse" | "left_inverse" => {
            a.count(1, 1)?;
            Ok(Value::F2Map(f.inverse().map_err(|e| as_op(e, a.op))?))
        }
        "eval" => {
            a.count(2, 2)?;
            let i = a.int(1)?;
            if i < 0 || (f.in_bits() < 63 && i >> f.in_bits() != 0) {
                return Err(Error::call(
                    "eval",
                    format!(
                        "{i} is outside the domain [0, 2^{}) of {}",
                        f.in_bits(),
                        f.to_line()
                    ),
                ));
            }
            Ok(Value::int(f.apply(i)))
        }
        "is_bijective" => {
            a.count(1, 1)?;
            Ok(Value::Bool(f.is_bijective()))
        }
        _ => {
            a.count(1, 1)?;
            Ok(Value::Bool(f.is_injective()))
        }
    }
}
