//! The standard shared-memory atoms, derived with the algebra.
//!
//! Hardware swizzle modes (TMA, wgmma descriptors) are defined on **byte** addresses: the
//! `W`-byte mode (`W` = 32, 64, 128) XORs the 16-byte chunk index (address bits 4 and up,
//! `log2(W/16)` of them) with the 128-byte line index (bits 7 and up), i.e. `Sw<log2(W/16),4,3>`
//! on bytes. Its atom is 8 rows of `W` bytes. Here each atom is built on bytes from those
//! three numbers and then brought to element units with [`algebra::upcast`]: a swizzled
//! layout in tessera maps coordinates to *element* offsets, and the swizzle acts on those, so
//! the 128-byte swizzle on 2-byte elements is `Sw<3,3,3>`.
//!
//! CuTe prints the same 16-bit 128-byte K-major atom as
//! `Sw<3,4,3> o smem_ptr[16b](unset) o (_8,_64):(_64,_1)`: there the swizzle is applied to the
//! byte address by the pointer, not to the element offset.
//!
//! ```
//! use tessera_swizzle::atoms::{smem_atom, Major};
//! let a = smem_atom(Major::K, 128, 2).unwrap();
//! assert_eq!(a.to_string(), "Sw<3,3,3> o 0 o (8,64):(64,1)");
//! let b = smem_atom(Major::MN, 64, 1).unwrap();
//! assert_eq!(b.to_string(), "Sw<2,4,3> o 0 o (64,8):(1,64)");
//! ```

use std::fmt;

use tessera_layout::Layout;

use crate::algebra;
use crate::error::{Result, SwizzleError};
use crate::swizzle::{log2_exact, Swizzle};
use crate::swizzled::SwizzledLayout;

/// Bytes of one shared-memory chunk a swizzle moves as a unit (one 16-byte vector).
pub const CHUNK_BYTES: i64 = 16;
/// Bytes of one line whose index the swizzle XORs into the chunk index.
pub const LINE_BYTES: i64 = 128;
/// Rows of a swizzle atom (lines of 128 bytes cycle through 8 patterns).
pub const ATOM_ROWS: i64 = 8;

/// Which dimension of a GEMM operand tile is contiguous in shared memory.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub enum Major {
    /// K-major: each row (one M or N index) holds contiguous K elements.
    K,
    /// MN-major: each column (one K index) holds contiguous M or N elements.
    MN,
}

impl fmt::Display for Major {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Major::K => "K",
            Major::MN => "MN",
        })
    }
}

/// The hardware swizzle of a `swizzle_bytes`-wide mode on byte addresses:
/// `Sw<log2(W/16), log2(16), log2(128/16)>`; `W = 16` is the unswizzled (interleaved) mode.
pub fn byte_swizzle(swizzle_bytes: i64) -> Result<Swizzle> {
    let ctx = || format!("{swizzle_bytes}");
    if ![16, 32, 64, 128].contains(&swizzle_bytes) {
        return Err(SwizzleError::inadmissible(
            "smem_atom",
            ctx(),
            "the swizzle width must be 16, 32, 64 or 128 bytes",
        ));
    }
    let b = log2_exact("smem_atom", swizzle_bytes / CHUNK_BYTES, ctx)?;
    let m = log2_exact("smem_atom", CHUNK_BYTES, ctx)?;
    let s = log2_exact("smem_atom", LINE_BYTES / CHUNK_BYTES, ctx)?;
    Swizzle::new(b, m, s)
}

/// The swizzled atom in **bytes**: `byte_swizzle(W) o 0 o` 8 rows of `W` bytes (K-major:
/// `(8,W):(W,1)`; MN-major: `(W,8):(1,W)`).
pub fn smem_atom_bytes(major: Major, swizzle_bytes: i64) -> Result<SwizzledLayout> {
    let sw = byte_swizzle(swizzle_bytes)?;
    let w = swizzle_bytes;
    let inner = match major {
        Major::K => Layout::row_major(tessera_layout::IntTuple::flat([ATOM_ROWS, w]))?,
        Major::MN => Layout::col_major(tessera_layout::IntTuple::flat([w, ATOM_ROWS]))?,
    };
    Ok(SwizzledLayout::new(sw, 0, inner))
}

/// The swizzled smem atom for `elem_bytes`-byte elements (1, 2, 4, 8 or 16), in element
/// units: [`smem_atom_bytes`] upcast by `elem_bytes`. These are the atoms Hopper's wgmma and
/// TMA use (`Layout_K_SW128_Atom<T>` and friends in CuTe), and what sm80 kernels use with
/// `ldmatrix`.
///
/// Post-condition: a bijection from its `8 * W / elem_bytes` coordinates onto
/// `[0, 8 * W / elem_bytes)`, and 8 lanes reading one 16-byte chunk from each of 8 rows
/// (K-major) or columns (MN-major) take one wavefront.
///
/// Errors: `Inadmissible` for other widths or element sizes.
pub fn smem_atom(major: Major, swizzle_bytes: i64, elem_bytes: i64) -> Result<SwizzledLayout> {
    if ![1, 2, 4, 8, 16].contains(&elem_bytes) {
        return Err(SwizzleError::inadmissible(
            "smem_atom",
            format!("{major}, {swizzle_bytes}, {elem_bytes}"),
            "the element size must be 1, 2, 4, 8 or 16 bytes",
        ));
    }
    algebra::upcast(&smem_atom_bytes(major, swizzle_bytes)?, elem_bytes)
}

/// The K-major 32-byte-swizzle atom (`Sw<1,..,3>`).
pub fn k_sw32(elem_bytes: i64) -> Result<SwizzledLayout> {
    smem_atom(Major::K, 32, elem_bytes)
}

/// The K-major 64-byte-swizzle atom (`Sw<2,..,3>`).
pub fn k_sw64(elem_bytes: i64) -> Result<SwizzledLayout> {
    smem_atom(Major::K, 64, elem_bytes)
}

/// The K-major 128-byte-swizzle atom (`Sw<3,..,3>`); for 2-byte elements
/// `Sw<3,3,3> o 0 o (8,64):(64,1)`.
pub fn k_sw128(elem_bytes: i64) -> Result<SwizzledLayout> {
    smem_atom(Major::K, 128, elem_bytes)
}

/// The MN-major 32-byte-swizzle atom.
pub fn mn_sw32(elem_bytes: i64) -> Result<SwizzledLayout> {
    smem_atom(Major::MN, 32, elem_bytes)
}

/// The MN-major 64-byte-swizzle atom.
pub fn mn_sw64(elem_bytes: i64) -> Result<SwizzledLayout> {
    smem_atom(Major::MN, 64, elem_bytes)
}

/// The MN-major 128-byte-swizzle atom; for 2-byte elements `Sw<3,3,3> o 0 o (64,8):(1,64)`.
pub fn mn_sw128(elem_bytes: i64) -> Result<SwizzledLayout> {
    smem_atom(Major::MN, 128, elem_bytes)
}

/// An `ldmatrix`-friendly K-major atom for sm80-class kernels: rows of `row_bytes`
/// (32, 64 or 128) so that the eight 16-byte row pieces one `ldmatrix` 8x8 matrix reads
/// (8 lanes, one row each) fall in eight different 16-byte bank groups.
///
/// Derived from the access, not from the hardware mode: a row is `row_bytes / 16` chunks;
/// 8 rows must cover all 8 chunk positions of a 128-byte line, so the swizzle XORs
/// `log2(row_bytes / 16)` chunk bits with the line index above them: `Sw<log2(row/16),
/// log2(16/elem), log2(128/16)>` on elements over `(8, row/elem):(row/elem, 1)`. It comes out
/// equal to the K-major TMA atom of the same width ([`smem_atom`]).
///
/// ```
/// use tessera_swizzle::atoms::ldmatrix_atom_sm80;
/// assert_eq!(ldmatrix_atom_sm80(64, 2).unwrap().to_string(), "Sw<2,3,3> o 0 o (8,32):(32,1)");
/// ```
pub fn ldmatrix_atom_sm80(row_bytes: i64, elem_bytes: i64) -> Result<SwizzledLayout> {
    let ctx = || format!("{row_bytes}, {elem_bytes}");
    if ![32, 64, 128].contains(&row_bytes) || ![1, 2, 4].contains(&elem_bytes) {
        return Err(SwizzleError::inadmissible(
            "ldmatrix_atom_sm80",
            ctx(),
            "rows of 32, 64 or 128 bytes of 1-, 2- or 4-byte elements",
        ));
    }
    let chunks = row_bytes / CHUNK_BYTES;
    let b = log2_exact("ldmatrix_atom_sm80", chunks, ctx)?;
    let m = log2_exact("ldmatrix_atom_sm80", CHUNK_BYTES / elem_bytes, ctx)?;
    let s = log2_exact("ldmatrix_atom_sm80", LINE_BYTES / CHUNK_BYTES, ctx)?;
    let row = row_bytes / elem_bytes;
    let inner = Layout::row_major(tessera_layout::IntTuple::flat([ATOM_ROWS, row]))?;
    Ok(SwizzledLayout::new(Swizzle::new(b, m, s)?, 0, inner))
}

/// Every named atom: `(name, atom)` for K- and MN-major, 16/32/64/128-byte modes, 1-, 2- and
/// 4-byte elements.
pub fn all_atoms() -> Vec<(String, SwizzledLayout)> {
    let mut out = Vec::new();
    for major in [Major::K, Major::MN] {
        for w in [16, 32, 64, 128] {
            for e in [1, 2, 4] {
                if let Ok(a) = smem_atom(major, w, e) {
                    out.push((format!("{major}-major SW{w} {}-bit", 8 * e), a));
                }
            }
        }
    }
    out
}
