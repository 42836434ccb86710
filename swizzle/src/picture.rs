//! Pictures of layouts: CuTe's `print_layout` text grid and SVG grids, plain or swizzled,
//! and thread/value pictures (`T#/V#` cells coloured by thread).

use std::fmt::Write;

use tessera_layout::{num_digits, print_grid, IntTuple, Layout};

use crate::any::AnyLayout;
use crate::bank::{BankConflicts, BANKS, WAVEFRONT_BYTES};
use crate::error::{Result, SwizzleError, ENUMERATION_LIMIT};
use crate::synthesis::{relabel, wavefront_schedule, AccessCell};

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
/// (`offset * elem_bytes / 16 mod 8`, i.e. banks `4g..4g+3`) and labelled with its offset
/// and, below, the 4-byte bank of its first byte (`b` and `offset * elem_bytes / 4 mod 32`).
/// In a conflict-free tile for 16-byte reads down a column, the 8 rows of every column have
/// 8 different colours.
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
    grid_svg(&title, rows, cols, cw, 34, |m, n| {
        let v = at(&l, m, n)?;
        let group = (i128::from(v) * i128::from(elem_bytes))
            .div_euclid(16)
            .rem_euclid(8);
        Ok((
            THREAD_COLOURS[group as usize].to_string(),
            vec![v.to_string(), format!("b{}", bank_of(v, elem_bytes))],
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

/// The 4-byte bank of the first byte of element `offset`: `offset * elem_bytes / 4 mod 32`.
fn bank_of(offset: i64, elem_bytes: i64) -> i64 {
    (i128::from(offset) * i128::from(elem_bytes))
        .div_euclid(4)
        .rem_euclid(i128::from(BANKS)) as i64
}

fn check_picture_bytes(op: &'static str, l: &AnyLayout, elem_bytes: i64) -> Result<()> {
    if (1..=16).contains(&elem_bytes) {
        Ok(())
    } else {
        Err(SwizzleError::inadmissible(
            op,
            format!("{l}, {elem_bytes}"),
            "the element size must be 1 to 16 bytes",
        ))
    }
}

/// The text grid of the 4-byte bank of each cell of a rank-2 shared-memory layout of
/// `elem_bytes`-byte elements (`offset * elem_bytes / 4 mod 32`), under the title
/// `L, N-byte elements: 4-byte bank of each cell`.
///
/// ```
/// use tessera_swizzle::{picture::print_banks, AnyLayout};
/// let l: AnyLayout = "(2,4):(4,1)".parse().unwrap();
/// let grid = print_banks(&l, 8).unwrap(); // 8-byte elements: two banks each
/// assert!(grid.contains(" 0  |  0 |  2 |  4 |  6 |"), "{grid}");
/// assert!(grid.contains(" 1  |  8 | 10 | 12 | 14 |"), "{grid}");
/// ```
pub fn print_banks<L: Clone + Into<AnyLayout>>(l: &L, elem_bytes: i64) -> Result<String> {
    const OP: &str = "print_banks";
    let l: AnyLayout = l.clone().into();
    check_picture_bytes(OP, &l, elem_bytes)?;
    let (rows, cols) = grid_dims(OP, &l)?;
    let title = format!("{l}, {elem_bytes}-byte elements: 4-byte bank of each cell");
    print_grid(&title, rows, cols, BANKS - 1, |m, n| {
        at(&l, m, n).map(|v| bank_of(v, elem_bytes).to_string())
    })
}

/// Where one warp access lands in a rank-2 layout: the schedule of
/// [`wavefront_schedule`] placed on the layout's cells.
struct AccessGrid {
    rows: i64,
    cols: i64,
    /// Per cell, `(wavefront, lane)` of the first access element that reaches it.
    hits: Vec<Option<(i64, i64)>>,
    cells: Vec<AccessCell>,
    conflicts: BankConflicts,
}

fn access_grid(
    op: &'static str,
    l: &AnyLayout,
    access: &Layout,
    elem_bytes: i64,
) -> Result<AccessGrid> {
    check_picture_bytes(op, l, elem_bytes)?;
    let (rows, cols) = grid_dims(op, l)?;
    let cells = wavefront_schedule(access, l, elem_bytes).map_err(|e| relabel(e, op))?;
    let mut hits = vec![None; (rows * cols) as usize];
    for c in &cells {
        // A coordinate index of a rank-2 shape is m + rows * n.
        let slot = &mut hits[c.coord as usize];
        if slot.is_none() {
            *slot = Some((c.wavefront, c.lane));
        }
    }
    let wavefronts = cells.iter().map(|c| c.wavefront + 1).max().unwrap_or(0);
    let total = cells.len() as i64 * elem_bytes;
    Ok(AccessGrid {
        rows,
        cols,
        hits,
        conflicts: BankConflicts {
            wavefronts,
            ideal: ((total + WAVEFRONT_BYTES - 1) / WAVEFRONT_BYTES).max(1),
        },
        cells,
    })
}

/// `0-3,8,12-13`: sorted distinct integers as ranges.
fn ranges(mut xs: Vec<i64>) -> String {
    xs.sort_unstable();
    xs.dedup();
    let mut out: Vec<String> = Vec::new();
    let mut i = 0;
    while i < xs.len() {
        let mut j = i;
        while j + 1 < xs.len() && xs[j + 1] == xs[j] + 1 {
            j += 1;
        }
        out.push(if i == j {
            xs[i].to_string()
        } else {
            format!("{}-{}", xs[i], xs[j])
        });
        i = j + 1;
    }
    out.join(",")
}

/// The text picture of one warp access (`access`: `(lane, value) -> coordinate index` of
/// `l`, mode 0 the lanes) through a rank-2 shared-memory layout `l` of `elem_bytes`-byte
/// elements: a title with the wavefronts and the ideal (as [`bank_conflicts`](crate::bank_conflicts)
/// counts them), the grid with each accessed cell labelled `wW/bB` (served in wavefront `W`
/// from 4-byte bank `B`; `.` for cells the access does not reach), then one line per
/// wavefront: which lanes it serves, their cells and banks. Two cells in one wavefront never
/// share a bank unless they share a word; a bank that must serve two words shows up as the
/// same `bB` in two wavefronts.
///
/// ```
/// use tessera_layout::Layout;
/// use tessera_swizzle::{picture::print_access, AnyLayout};
/// // 8 lanes read 16 bytes each down column chunk 0 of 8 rows of 128 bytes: all in banks 0-3
/// let tile: AnyLayout = "(8,32):(32,1)".parse().unwrap();
/// let read: Layout = "(8,4):(1,8)".parse().unwrap();
/// let text = print_access(&tile, &read, 4).unwrap();
/// assert!(text.lines().next().unwrap().ends_with("8 wavefronts (ideal 1)"));
/// assert!(text.contains("wavefront 7: T7 (7,0)x4 banks 0-3"), "{text}");
/// ```
pub fn print_access<L: Clone + Into<AnyLayout>>(
    l: &L,
    access: &Layout,
    elem_bytes: i64,
) -> Result<String> {
    let l: AnyLayout = l.clone().into();
    let g = access_grid("print_access", &l, access, elem_bytes)?;
    let title = format!(
        "{l}, {elem_bytes}-byte elements, access {access}: {} wavefront{} (ideal {})",
        g.conflicts.wavefronts,
        if g.conflicts.wavefronts == 1 { "" } else { "s" },
        g.conflicts.ideal
    );
    let mut out = print_grid(&title, g.rows, g.cols, 0, |m, n| {
        Ok::<_, SwizzleError>(match g.hits[(m + g.rows * n) as usize] {
            Some((w, _)) => {
                let v = at(&l, m, n)?;
                format!("w{w}/b{}", bank_of(v, elem_bytes))
            }
            None => ".".to_string(),
        })
    })?;
    for w in 0..g.conflicts.wavefronts {
        let mut parts: Vec<String> = Vec::new();
        let mut lanes: Vec<i64> = g
            .cells
            .iter()
            .filter(|c| c.wavefront == w)
            .map(|c| c.lane)
            .collect();
        lanes.dedup();
        lanes.sort_unstable();
        lanes.dedup();
        for t in lanes {
            let mine: Vec<&AccessCell> = g
                .cells
                .iter()
                .filter(|c| c.wavefront == w && c.lane == t)
                .collect();
            let first = mine[0].coord;
            let banks = ranges(mine.iter().map(|c| c.bank).collect());
            let count = if mine.len() > 1 {
                format!("x{}", mine.len())
            } else {
                String::new()
            };
            parts.push(format!(
                "T{t} ({},{}){count} banks {banks}",
                first % g.rows,
                first / g.rows
            ));
        }
        let _ = writeln!(out, "wavefront {w}: {}", parts.join("; "));
    }
    Ok(out)
}

/// Two text pictures side by side, `left` padded to its widest line, then three spaces.
pub fn side_by_side(left: &str, right: &str) -> String {
    let width = left.lines().map(|x| x.chars().count()).max().unwrap_or(0);
    let (a, b): (Vec<&str>, Vec<&str>) = (left.lines().collect(), right.lines().collect());
    let mut out = String::new();
    for k in 0..a.len().max(b.len()) {
        let x = a.get(k).copied().unwrap_or("");
        let y = b.get(k).copied().unwrap_or("");
        let pad = width - x.chars().count();
        let line = format!("{x}{}   {y}", " ".repeat(pad));
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

/// [`print_access`] of the same access through two layouts (before and after a swizzle, say):
/// the two grids side by side, then the wavefront lines of each, `before` first.
///
/// ```
/// use tessera_layout::Layout;
/// use tessera_swizzle::{picture::print_access_compare, AnyLayout};
/// let before: AnyLayout = "(8,8):(8,1)".parse().unwrap();
/// let after: AnyLayout = "Sw<1,2,3> o (8,8):(8,1)".parse().unwrap();
/// let read: Layout = "(8,4):(1,8)".parse().unwrap();
/// let text = print_access_compare(&before, &after, &read, 4).unwrap();
/// assert!(text.lines().next().unwrap().contains("2 wavefronts (ideal 1)"));
/// assert!(text.lines().next().unwrap().ends_with("1 wavefront (ideal 1)"));
/// assert!(text.contains("after:\nwavefront 0: T0 (0,0)x4 banks 0-3;"));
/// ```
pub fn print_access_compare<A, B>(
    before: &A,
    after: &B,
    access: &Layout,
    elem_bytes: i64,
) -> Result<String>
where
    A: Clone + Into<AnyLayout>,
    B: Clone + Into<AnyLayout>,
{
    let split = |text: String| -> (String, String) {
        match text.find("\nwavefront ") {
            Some(k) => (text[..=k].to_string(), text[k + 1..].to_string()),
            None => (text, String::new()),
        }
    };
    let (grid_a, waves_a) = split(print_access(before, access, elem_bytes)?);
    let (grid_b, waves_b) = split(print_access(after, access, elem_bytes)?);
    Ok(format!(
        "{}before:\n{waves_a}after:\n{waves_b}",
        side_by_side(&grid_a, &grid_b)
    ))
}

/// One grid of a multi-panel SVG: a subtitle and per cell `(fill, lines)`, row by row.
struct Panel {
    subtitle: String,
    rows: i64,
    cols: i64,
    cells: Vec<(String, Vec<String>)>,
}

/// Panels side by side under one title, cells `cw x ch`.
fn panels_svg(title: &str, panels: &[Panel], cw: i64, ch: i64) -> String {
    const GAP: i64 = 24;
    let top = TOP + 18;
    let widths: Vec<i64> = panels.iter().map(|p| LEFT + p.cols * cw + 8).collect();
    let width = (widths.iter().sum::<i64>() + GAP * (panels.len() as i64 - 1))
        .max(8 * title.chars().count() as i64 + 8);
    let height = top + panels.iter().map(|p| p.rows).max().unwrap_or(0) * ch + 8;
    let mut svg = Svg::new(width, height, title);
    let mut x0 = 0;
    for (p, w) in panels.iter().zip(&widths) {
        let _ = writeln!(
            svg.out,
            "<text x=\"{}\" y=\"{}\" font-size=\"12\">{}</text>",
            x0 + 4,
            TOP - 6,
            esc(&p.subtitle)
        );
        for n in 0..p.cols {
            svg.label(x0 + LEFT + n * cw + cw / 2, top - 6, &n.to_string());
        }
        for m in 0..p.rows {
            svg.label(x0 + LEFT / 2, top + m * ch + ch / 2 + 4, &m.to_string());
            for n in 0..p.cols {
                let (fill, lines) = &p.cells[(m * p.cols + n) as usize];
                svg.cell(x0 + LEFT + n * cw, top + m * ch, cw, ch, fill, lines);
            }
        }
        x0 += w + GAP;
    }
    svg.finish()
}

fn access_panel(l: &AnyLayout, access: &Layout, elem_bytes: i64) -> Result<Panel> {
    let g = access_grid("svg_access", l, access, elem_bytes)?;
    let mut cells = Vec::with_capacity((g.rows * g.cols) as usize);
    for m in 0..g.rows {
        for n in 0..g.cols {
            let v = at(l, m, n)?;
            let bank = format!("b{}", bank_of(v, elem_bytes));
            cells.push(match g.hits[(m + g.rows * n) as usize] {
                Some((w, t)) => (
                    THREAD_COLOURS[w.rem_euclid(16) as usize].to_string(),
                    vec![v.to_string(), bank, format!("w{w} T{t}")],
                ),
                None => ("#ffffff".to_string(), vec![v.to_string(), bank]),
            });
        }
    }
    Ok(Panel {
        subtitle: format!(
            "{l}: {} wavefront{} (ideal {})",
            g.conflicts.wavefronts,
            if g.conflicts.wavefronts == 1 { "" } else { "s" },
            g.conflicts.ideal
        ),
        rows: g.rows,
        cols: g.cols,
        cells,
    })
}

/// An SVG picture of one warp access through a rank-2 shared-memory layout (see
/// [`print_access`]): every cell labelled with its offset and 4-byte bank; the cells the
/// access reaches coloured by wavefront and labelled `wW TT` (wavefront, lane).
pub fn svg_access<L: Clone + Into<AnyLayout>>(
    l: &L,
    access: &Layout,
    elem_bytes: i64,
) -> Result<String> {
    let l: AnyLayout = l.clone().into();
    let p = access_panel(&l, access, elem_bytes)?;
    let title = format!("access {access}, {elem_bytes}-byte elements, by wavefront");
    Ok(panels_svg(&title, &[p], 56, 46))
}

/// [`svg_access`] of the same access through two layouts side by side (before and after a
/// swizzle, say), under one title.
pub fn svg_access_compare<A, B>(
    before: &A,
    after: &B,
    access: &Layout,
    elem_bytes: i64,
) -> Result<String>
where
    A: Clone + Into<AnyLayout>,
    B: Clone + Into<AnyLayout>,
{
    let (a, b): (AnyLayout, AnyLayout) = (before.clone().into(), after.clone().into());
    let panels = [
        access_panel(&a, access, elem_bytes)?,
        access_panel(&b, access, elem_bytes)?,
    ];
    let title =
        format!("access {access}, {elem_bytes}-byte elements, by wavefront: before | after");
    Ok(panels_svg(&title, &panels, 56, 46))
}
