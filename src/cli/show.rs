//! `tessera show`: layout pictures.
//!
//! `tessera show 'LAYOUT'` prints CuTe's `print_layout` grid of a rank-2 plain or swizzled
//! layout; `--svg FILE` also writes the grid as an SVG picture. With `--tile (M,N)` the
//! layout is read as a thread/value layout (mode 0 threads, mode 1 values) into a
//! column-major `M x N` tile, and the picture shows which `T#/V#` owns each tile cell. With
//! `--banks BYTES` the text adds the 4-byte bank of each cell and the SVG cells of a memory
//! layout are coloured by 16-byte bank group and labelled with their bank. With `--access A`
//! (one warp instruction's `(lane, value) -> coordinate` layout) the pictures show the cells
//! it reaches grouped by wavefront; `--best` puts beside them the same access through the
//! swizzle `best_swizzle` synthesizes for it.

use std::process::ExitCode;

use tessera_layout::IntTuple;
use tessera_swizzle::{picture, AnyLayout};

/// Arguments of `tessera show`.
#[derive(clap::Args)]
pub struct ShowArgs {
    /// The layout, in CuTe notation: `(8,8):(8,1)` or `Sw<3,3,3> o 0 o (8,64):(64,1)`.
    pub layout: String,
    /// Write an SVG picture to this file.
    #[arg(long)]
    pub svg: Option<std::path::PathBuf>,
    /// Read the layout as a thread/value layout into a tile of this shape, e.g. `(8,8)`.
    #[arg(long)]
    pub tile: Option<String>,
    /// Colour the SVG cells by 16-byte bank group, for elements of this many bytes.
    #[arg(long, value_name = "BYTES")]
    pub banks: Option<i64>,
    /// With --banks: one warp instruction's access, `(lane, value) -> coordinate index` of
    /// the layout (mode 0 the lanes); its cells are shown by wavefront.
    #[arg(long, value_name = "LAYOUT", requires = "banks")]
    pub access: Option<String>,
    /// With --access: also show the access through the synthesized swizzle (best_swizzle of
    /// the layout's unswizzled part), side by side.
    #[arg(long, requires = "access")]
    pub best: bool,
}

/// The text and SVG of `--banks` with an access (and `--best`): the access picture of the
/// layout, and beside it that of the layout under the synthesized swizzle.
pub fn render_access(
    layout: &str,
    banks: i64,
    access: &str,
    best: bool,
    svg: bool,
) -> Result<(String, Option<String>), String> {
    let l: AnyLayout = layout.parse().map_err(|e| format!("{e}"))?;
    let a: tessera_layout::Layout = access.parse().map_err(|e| format!("{e}"))?;
    let err = |e: tessera_swizzle::SwizzleError| e.to_string();
    if !best {
        let before = picture::print_access(&l, &a, banks).map_err(err)?;
        let pic = svg
            .then(|| picture::svg_access(&l, &a, banks))
            .transpose()
            .map_err(err)?;
        return Ok((before, pic));
    }
    let choice =
        tessera_swizzle::best_swizzle(std::slice::from_ref(&a), l.inner(), banks).map_err(err)?;
    let after = AnyLayout::from(tessera_swizzle::SwizzledLayout::new(
        choice.swizzle,
        0,
        l.inner().clone(),
    ));
    let text = picture::print_access_compare(&l, &after, &a, banks).map_err(err)?;
    let pic = svg
        .then(|| picture::svg_access_compare(&l, &after, &a, banks))
        .transpose()
        .map_err(err)?;
    Ok((text, pic))
}

/// The text and SVG `tessera show` produces for its arguments (the SVG only if asked).
pub fn render(
    layout: &str,
    tile: Option<&str>,
    banks: Option<i64>,
    svg: bool,
) -> Result<(String, Option<String>), String> {
    let l: AnyLayout = layout.parse().map_err(|e| format!("{e}"))?;
    match tile {
        None => {
            let mut text = picture::print_layout(&l).map_err(|e| e.to_string())?;
            if let Some(b) = banks {
                text.push_str(&picture::print_banks(&l, b).map_err(|e| e.to_string())?);
            }
            let pic = svg
                .then(|| match banks {
                    Some(b) => picture::svg_layout_banks(&l, b),
                    None => picture::svg_layout(&l),
                })
                .transpose()
                .map_err(|e| e.to_string())?;
            Ok((text, pic))
        }
        Some(t) => {
            let tile: IntTuple = t.parse().map_err(|e| format!("{e}"))?;
            let text = picture::print_tv_layout(&l, &tile).map_err(|e| e.to_string())?;
            let pic = svg
                .then(|| picture::svg_tv_layout(&l, &tile))
                .transpose()
                .map_err(|e| e.to_string())?;
            Ok((text, pic))
        }
    }
}

/// Runs `tessera show`.
pub fn run(args: ShowArgs) -> ExitCode {
    if args.banks.is_some() && args.tile.is_some() {
        eprintln!("error: show: --banks colours a memory layout; it does not apply with --tile");
        return ExitCode::from(1);
    }
    let rendered = match (&args.access, args.banks) {
        (Some(a), Some(b)) => render_access(&args.layout, b, a, args.best, args.svg.is_some()),
        _ => render(
            &args.layout,
            args.tile.as_deref(),
            args.banks,
            args.svg.is_some(),
        ),
    };
    match rendered {
        Ok((text, pic)) => {
            print!("{text}");
            if let (Some(path), Some(pic)) = (&args.svg, pic) {
                if let Err(e) = std::fs::write(path, pic) {
                    eprintln!("error: show: writing {}: {e}", path.display());
                    return ExitCode::from(1);
                }
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: show: {e}");
            ExitCode::from(1)
        }
    }
}
