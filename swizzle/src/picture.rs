//! Pictures of layouts: CuTe's `print_layout` text grid and SVG grids, plain or swizzled,
//! and thread/value pictures (`T#/V#` cells coloured by thread).

use std::fmt::Write;

use tessera_layout::{num_digits, print_grid, IntTuple};

use crate::any::AnyLayout;
use crate::error::{Result, SwizzleError, ENUMERATION_LIMIT};

/// The largest number of grid cells a picture draws.
pub const MAX_CELLS: i64 = 1 << 16;

/// `(rows, cols)` of a rank-2 layout, checked against [`MAX_CELLS`].
fn grid_dims(op: &'static str, l: &AnyLayout) -> Result<(i64, i64)> {
    if l.rank() != 2 || l.shape().is_int() {
        return Err(SwizzleError::inadmissible(
            op,
            l.to_string(),
            format!("needs a rank-2 layout, this one has rank {}", l.rank()),
        ));
    }
    let (rows, cols) = (l.mode(0)?.size(), l.mode(1)?.size());
    if rows * cols > MAX_CELLS {
        return Err(SwizzleError::TooLarge {
            op,
            operands: l.to_string(),
            needed: (rows * cols) as u128,
            limit: MAX_CELLS as u64,
        });
    }
    Ok((rows, cols))
}

fn at(l: &AnyLayout, m: i64, n: i64) -> Result<i64> {
    l.eval(&IntTuple::flat([m, n]))
}

/// CuTe's `print_layout` grid of a rank-2 plain or swizzled layout: the layout on the first
/// line, column indices, then `L(m, n)` in cells `num_digits(cosize) + 2` wide between
/// `+---+` separators. The cosize is the exact one (for a swizzled layout CuTe uses the inner
/// layout's; the two agree on the standard atoms).
///
/// ```
/// use tessera_swizzle::{picture::print_layout, AnyLayout};
/// let l: AnyLayout = "Sw<1,0,1> o (2,2):(2,1)".parse().unwrap();
/// let expected = [
///     "Sw<1,0,1> o 0 o (2,2):(2,1)",
///     "      0   1 ",
///     "    +---+---+",
///     " 0  | 0 | 1 |",
///     "    +---+---+",
///     " 1  | 3 | 2 |",
///     "    +---+---+",
///     "",
/// ];
/// assert_eq!(print_layout(&l).unwrap(), expected.join("\n"));
/// ```
pub fn print_layout<L: Clone + Into<AnyLayout>>(l: &L) -> Result<String> {
    let l: AnyLayout = l.clone().into();
    let (rows, cols) = grid_dims("print_layout", &l)?;
    let cosize = l.cosize()?;
    print_grid(&l, rows, cols, cosize, |m, n| {
        at(&l, m, n).map(|v| v.to_string())
    })
}

/// Rows of tile cells, each `Some((thread, value))` or `None`.
pub type TvCells = Vec<Vec<Option<(i64, i64)>>>;

/// For a thread/value layout `tv` (mode 0 threads, mode 1 values) into a column-major tile of
/// shape `(M, N)`: which `(thread, value)` lands on each tile cell. Cells nobody reaches are
/// `None`; a cell reached twice keeps the first `(t, v)` in index order.
///
/// Errors: `Inadmissible` if `tv` is not rank 2, the tile is not two positive extents, or an
/// offset falls outside `[0, M*N)`.
pub fn tv_cells<L: Clone + Into<AnyLayout>>(tv: &L, tile: &IntTuple) -> Result<TvCells> {
    const OP: &str = "print_tv_layout";
    let tv: AnyLayout = tv.clone().into();
    let (threads, values) = grid_dims(OP, &tv)?;
    let (m, n) = match tile.leaves().as_slice() {
        [m, n] if tile.rank() == 2 && *m >= 1 && *n >= 1 => (*m, *n),
        _ => {
            return Err(SwizzleError::inadmissible(
                OP,
                format!("{tv}, {tile}"),
                "the tile must be a shape (M,N) of two positive extents",
            ))
        }
    };
    if m.saturating_mul(n) > MAX_CELLS || threads * values > ENUMERATION_LIMIT as i64 {
        return Err(SwizzleError::TooLarge {
            op: OP,
            operands: format!("{tv}, {tile}"),
            needed: (m as u128) * (n as u128),
            limit: MAX_CELLS as u64,
        });
    }
    let mut cells = vec![vec![None; n as usize]; m as usize];
    for v in 0..values {
        for t in 0..threads {
            let idx = at(&tv, t, v)?;
            if !(0..m * n).contains(&idx) {
                return Err(SwizzleError::inadmissible(
                    OP,
                    format!("{tv}, {tile}"),
                    format!("(thread {t}, value {v}) maps to {idx}, outside the tile"),
                ));
            }
            let cell = &mut cells[(idx % m) as usize][(idx / m) as usize];
            if cell.is_none() {
                *cell = Some((t, v));
            }
        }
    }
    Ok(cells)
}

/// The text grid of a thread/value layout over its tile: each cell `T#V#` (see [`tv_cells`]).
///
/// ```
/// use tessera_swizzle::{picture::print_tv_layout, AnyLayout};
/// let tv: AnyLayout = "(2,2):(2,1)".parse().unwrap(); // thread t owns column t
/// let out = print_tv_layout(&tv, &"(2,2)".parse().unwrap()).unwrap();
/// assert!(out.contains(" 0  | T0V0 | T1V0 |"));
/// assert!(out.contains(" 1  | T0V1 | T1V1 |"));
/// ```
pub fn print_tv_layout<L: Clone + Into<AnyLayout>>(tv: &L, tile: &IntTuple) -> Result<String> {
    let l: AnyLayout = tv.clone().into();
    let cells = tv_cells(&l, tile)?;
    let title = format!("{l} over the tile {tile}");
    let (rows, cols) = (cells.len() as i64, cells.first().map_or(0, Vec::len) as i64);
    print_grid(&title, rows, cols, 0, |m, n| {
        Ok::<_, SwizzleError>(match cells[m as usize][n as usize] {
            Some((t, v)) => format!("T{t}V{v}"),
            None => ".".to_string(),
        })
    })
}

/// Escapes text for SVG.
fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// Eight light colours, for cells by `offset mod 8`.
const OFFSET_COLOURS: [&str; 8] = [
    "#ffffff", "#e6e6e6", "#cccccc", "#b3b3b3", "#ffe0b3", "#ffd08a", "#ffc061", "#ffb038",
];

/// Sixteen distinguishable colours, for cells by thread.
const THREAD_COLOURS: [&str; 16] = [
    "#afc6ff", "#ffd0a6", "#b3e6b3", "#ffb3b3", "#d9c2f0", "#e6ccb3", "#ffccf0", "#d9d9d9",
    "#e6f0a3", "#a3e6f0", "#8fb0ff", "#ffb870", "#8fd98f", "#ff8f8f", "#c2a3e6", "#cfae8f",
];

struct Svg {
    out: String,
}

impl Svg {
    fn new(width: i64, height: i64, title: &str) -> Svg {
        let mut out = String::new();
        let _ = writeln!(
            out,
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{width}\" height=\"{height}\" \
             viewBox=\"0 0 {width} {height}\" font-family=\"monospace\" font-size=\"12\">"
        );
        let _ = writeln!(out, "<title>{}</title>", esc(title));
        let _ = writeln!(
            out,
            "<rect x=\"0\" y=\"0\" width=\"{width}\" height=\"{height}\" fill=\"#ffffff\"/>"
        );
        let _ = writeln!(
            out,
            "<text x=\"4\" y=\"14\" font-size=\"13\">{}</text>",
            esc(title)
        );
        Svg { out }
    }

    fn cell(&mut self, x: i64, y: i64, w: i64, h: i64, fill: &str, lines: &[String]) {
        let _ = writeln!(
            self.out,
            "<rect x=\"{x}\" y=\"{y}\" width=\"{w}\" height=\"{h}\" fill=\"{fill}\" stroke=\"#000000\"/>"
        );
        let n = lines.len() as i64;
        for (k, line) in lines.iter().enumerate() {
            let ty = y + h / 2 + 4 + (2 * k as i64 - (n - 1)) * 7;
            let _ = writeln!(
                self.out,
                "<text x=\"{}\" y=\"{ty}\" text-anchor=\"middle\">{}</text>",
                x + w / 2,
                esc(line)
            );
        }
    }

    fn label(&mut self, x: i64, y: i64, text: &str) {
        let _ = writeln!(
            self.out,
            "<text x=\"{x}\" y=\"{y}\" text-anchor=\"middle\" fill=\"#555555\">{}</text>",
            esc(text)
        );
    }

    fn finish(mut self) -> String {
        self.out.push_str("</svg>\n");
        self.out
    }
}

const TOP: i64 = 40;
const LEFT: i64 = 36;

fn grid_svg(
    title: &str,
    rows: i64,
    cols: i64,
    cw: i64,
    ch: i64,
    mut cell: impl FnMut(i64, i64) -> Result<(String, Vec<String>)>,
) -> Result<String> {
    // Wide enough for the title too (monospace, about 8 pixels a character at size 13).
    let width = (LEFT + cols * cw + 8).max(8 * title.chars().count() as i64 + 8);
    let mut svg = Svg::new(width, TOP + rows * ch + 8, title);
    for n in 0..cols {
        svg.label(LEFT + n * cw + cw / 2, TOP - 6, &n.to_string());
    }
    for m in 0..rows {
        svg.label(LEFT / 2, TOP + m * ch + ch / 2 + 4, &m.to_string());
        for n in 0..cols {
            let (fill, lines) = cell(m, n)?;
            svg.cell(LEFT + n * cw, TOP + m * ch, cw, ch, &fill, &lines);
        }
    }
    Ok(svg.finish())
}

/// An SVG picture of the [`print_layout`] grid: one cell per `(m, n)` labelled `L(m, n)` and
/// shaded by `L(m, n) mod 8`, row and column indices outside, the layout as the title.
pub fn svg_layout<L: Clone + Into<AnyLayout>>(l: &L) -> Result<String> {
    let l: AnyLayout = l.clone().into();
    let (rows, cols) = grid_dims("svg_layout", &l)?;
    let (lo, hi) = l.image_bounds()?;
    let digits = num_digits(lo).max(num_digits(hi)) as i64 + i64::from(lo < 0);
    let cw = (8 * digits + 12).max(28);
    grid_svg(&l.to_string(), rows, cols, cw, 24, |m, n| {
        let v = at(&l, m, n)?;
        Ok((
            OFFSET_COLOURS[v.rem_euclid(8) as usize].to_string(),
            vec![v.to_string()],
        ))
    })
}

/// An SVG picture of a shared-memory layout of `elem_bytes`-byte elements: the grid of
/// [`svg_layout`], each cell coloured by the 16-byte bank group its offset falls in
/// (`offset * elem_bytes / 16 mod 8`, i.e. banks `4g..4g+3`). In a conflict-free tile for
/// 16-byte reads down a column, the 8 rows of every column have 8 different colours.
///
/// Errors: as [`svg_layout`]; `Inadmissible` if `elem_bytes` is not in `1..=16`.
pub fn svg_layout_banks<L: Clone + Into<AnyLayout>>(l: &L, elem_bytes: i64) -> Result<String> {
    let l: AnyLayout = l.clone().into();
    if !(1..=16).contains(&elem_bytes) {
        return Err(SwizzleError::inadmissible(
            "svg_layout_banks",
            format!("{l}, {elem_bytes}"),
            "the element size must be 1 to 16 bytes",
        ));
    }
    let (rows, cols) = grid_dims("svg_layout_banks", &l)?;
    let (lo, hi) = l.image_bounds()?;
    let digits = num_digits(lo).max(num_digits(hi)) as i64 + i64::from(lo < 0);
    let cw = (8 * digits + 12).max(28);
    let title = format!("{l}, {elem_bytes}-byte elements, coloured by 16-byte bank group");
    grid_svg(&title, rows, cols, cw, 24, |m, n| {
        let v = at(&l, m, n)?;
        let group = (i128::from(v) * i128::from(elem_bytes))
            .div_euclid(16)
            .rem_euclid(8);
        Ok((
            THREAD_COLOURS[group as usize].to_string(),
            vec![v.to_string()],
        ))
    })
}

/// An SVG picture of a thread/value layout over its `(M, N)` tile (see [`tv_cells`]): each
/// cell coloured by its thread and labelled `T#` over `V#`; unreached cells are white.
pub fn svg_tv_layout<L: Clone + Into<AnyLayout>>(tv: &L, tile: &IntTuple) -> Result<String> {
    let l: AnyLayout = tv.clone().into();
    let cells = tv_cells(&l, tile)?;
    let (rows, cols) = (cells.len() as i64, cells.first().map_or(0, Vec::len) as i64);
    let title = format!("{l} over the tile {tile}");
    grid_svg(&title, rows, cols, 44, 34, |m, n| {
        Ok(match cells[m as usize][n as usize] {
            Some((t, v)) => (
                THREAD_COLOURS[t.rem_euclid(16) as usize].to_string(),
                vec![format!("T{t}"), format!("V{v}")],
            ),
            None => ("#ffffff".to_string(), vec![]),
        })
    })
}
