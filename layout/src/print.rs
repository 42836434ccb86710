//! CuTe's `print_layout`: a rank-2 layout as a text grid of offsets.

use std::fmt::{Display, Write};

use crate::error::{LayoutError, Result};
use crate::int_tuple::IntTuple;
use crate::layout::Layout;

/// Number of decimal digits of `x` (at least 1), CuTe's `num_digits`.
pub fn num_digits(x: i64) -> usize {
    x.unsigned_abs()
        .checked_ilog10()
        .map_or(1, |d| d as usize + 1)
}

/// The text grid of a rank-2 layout, as CuTe's `print_layout` prints it: the layout on the
/// first line, then the column indices, then one row per coordinate of mode 0, each cell
/// `L(m, n)` between `+---+` separators. Cells are `num_digits(cosize) + 2` wide, as in CuTe,
/// widened only if an offset needs more characters (negative strides).
///
/// Errors: `OutOfRange` if the rank is not 2.
///
/// ```
/// use tessera_layout::{print_layout, Layout};
/// let l: Layout = "(2,3):(3,1)".parse().unwrap();
/// let expected = [
///     "(2,3):(3,1)",
///     "      0   1   2 ",
///     "    +---+---+---+",
///     " 0  | 0 | 1 | 2 |",
///     "    +---+---+---+",
///     " 1  | 3 | 4 | 5 |",
///     "    +---+---+---+",
///     "",
/// ];
/// assert_eq!(print_layout(&l).unwrap(), expected.join("\n"));
/// ```
pub fn print_layout(l: &Layout) -> Result<String> {
    if l.rank() != 2 {
        return Err(LayoutError::OutOfRange {
            op: "print_layout",
            operand: l.to_string(),
            index: "2 modes".to_string(),
            rank: l.rank(),
        });
    }
    let (rows, cols) = (l.mode(0)?.size(), l.mode(1)?.size());
    print_grid(l, rows, cols, l.cosize(), |m, n| {
        l.eval(&IntTuple::flat([m, n])).map(|v| v.to_string())
    })
}

/// The grid of [`print_layout`] for any function `(m, n) -> cell text` on a `rows x cols`
/// domain: `title` on the first line; cells `num_digits(cosize) + 2` wide (widened to the
/// longest cell text). Used for swizzled layouts and thread/value pictures.
pub fn print_grid<E>(
    title: &dyn Display,
    rows: i64,
    cols: i64,
    cosize: i64,
    mut cell: impl FnMut(i64, i64) -> std::result::Result<String, E>,
) -> std::result::Result<String, E> {
    let mut cells = Vec::new();
    for m in 0..rows {
        for n in 0..cols {
            cells.push(cell(m, n)?);
        }
    }
    let longest = cells.iter().map(String::len).max().unwrap_or(0);
    let w = num_digits(cosize).max(longest); // CuTe's idx_width - 2
    let rule = format!("+{}", "-".repeat(w + 2)).repeat(cols as usize) + "+";
    let mut out = String::new();
    // Writing to a String cannot fail.
    let _ = writeln!(out, "{title}");
    out.push_str("    ");
    for n in 0..cols {
        let _ = write!(out, "  {n:>w$} ");
    }
    out.push('\n');
    let mut it = cells.iter();
    for m in 0..rows {
        let _ = writeln!(out, "    {rule}");
        let _ = write!(out, "{m:>2}  ");
        for _ in 0..cols {
            let _ = write!(out, "| {:>w$} ", it.next().map_or("", String::as_str));
        }
        out.push_str("|\n");
    }
    let _ = writeln!(out, "    {rule}");
    Ok(out)
}
