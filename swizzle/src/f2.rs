//! The XOR-linear (F2) view of a layout on a power-of-two domain.
//!
//! A swizzle is linear over F2 (bits, with XOR as addition): `Sw(a ^ b) == Sw(a) ^ Sw(b)`.
//! A plain layout whose extents are powers of two and whose strides put each index bit on
//! its own offset bits (no carries) is F2-linear too, so `Sw o O o L` is an affine map over
//! bits: `R(i) = t ^ XOR { column_k : bit k of i is set }`. This module finds the columns,
//! and answers injectivity, bijectivity and the inverse map by linear algebra over F2.

use std::fmt;

use crate::any::AnyLayout;
use crate::error::{Result, SwizzleError, ENUMERATION_LIMIT};
use crate::extent::flat_modes;

/// An affine map over bits, `i ↦ translation ^ XOR { columns[k] : bit k of i }`, on the
/// domain `[0, 2^in_bits)`.
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub struct F2Map {
    columns: Vec<i64>,
    translation: i64,
}

impl F2Map {
    /// The F2 view of a plain or swizzled layout.
    ///
    /// Requires a power-of-two size. Decided structurally when every flat extent is a power
    /// of two and the offsets of the index bits (`stride * 2^j`) and the layout's offset have
    /// pairwise disjoint bits (then `+` is `^`); otherwise by evaluating the layout on every
    /// index (up to [`ENUMERATION_LIMIT`]) and checking the affine form.
    ///
    /// Errors: `Inadmissible` if the size is not a power of two or the layout is not affine
    /// over F2; `TooLarge` past the bound.
    ///
    /// ```
    /// use tessera_swizzle::{AnyLayout, F2Map};
    /// let l: AnyLayout = "Sw<1,0,1> o (2,2):(2,1)".parse().unwrap();
    /// let f = F2Map::of(&l).unwrap();
    /// assert_eq!(f.columns(), &[3, 1]); // index bit 0 -> offset 2 -> Sw(2) = 3
    /// assert!(f.is_bijective());
    /// assert_eq!(f.inverse().unwrap().apply(3), 1);
    /// ```
    pub fn of<L: Clone + Into<AnyLayout>>(l: &L) -> Result<F2Map> {
        const OP: &str = "f2_map";
        let l: AnyLayout = l.clone().into();
        let size = l.size();
        if size.count_ones() != 1 {
            return Err(SwizzleError::inadmissible(
                OP,
                l.to_string(),
                format!("the size {size} is not a power of two"),
            ));
        }
        let sw = l.swizzle();
        if let Some(terms) = bit_terms(&l) {
            let mut used = l.offset();
            let disjoint = terms.iter().all(|&t| {
                let ok = used & t == 0;
                used |= t;
                ok
            });
            if disjoint {
                return Ok(F2Map {
                    columns: terms.iter().map(|&t| sw.apply(t)).collect(),
                    translation: sw.apply(l.offset()),
                });
            }
        }
        if size as u64 > ENUMERATION_LIMIT {
            return Err(SwizzleError::TooLarge {
                op: OP,
                operands: l.to_string(),
                needed: size as u128,
                limit: ENUMERATION_LIMIT,
            });
        }
        let offs = l.offsets()?;
        let n = size.trailing_zeros();
        let translation = offs[0];
        let columns: Vec<i64> = (0..n).map(|k| offs[1usize << k] ^ translation).collect();
        let f = F2Map {
            columns,
            translation,
        };
        if let Some(i) = (0..size).find(|&i| f.apply(i) != offs[i as usize]) {
            return Err(SwizzleError::inadmissible(
                OP,
                l.to_string(),
                format!("not affine over F2: at index {i}"),
            ));
        }
        Ok(f)
    }

    /// Number of input bits (`log2(size)`).
    pub fn in_bits(&self) -> u32 {
        self.columns.len() as u32
    }

    /// The image of each input bit (the columns of the bit matrix).
    pub fn columns(&self) -> &[i64] {
        &self.columns
    }

    /// The image of index 0.
    pub fn translation(&self) -> i64 {
        self.translation
    }

    /// `translation ^ XOR { columns[k] : bit k of i }`, for the low `in_bits` bits of `i`.
    pub fn apply(&self, i: i64) -> i64 {
        self.columns
            .iter()
            .enumerate()
            .filter(|(k, _)| (i >> k) & 1 == 1)
            .fold(self.translation, |acc, (_, &c)| acc ^ c)
    }

    /// The rank of the bit matrix over F2.
    pub fn rank(&self) -> u32 {
        // Unsigned, so that a column's leading bit is its largest bit (also the sign bit).
        let mut basis: Vec<u64> = Vec::new(); // distinct leading bits, largest first
        for &c in &self.columns {
            let mut v = c as u64;
            for &b in &basis {
                v = v.min(v ^ b);
            }
            if v != 0 {
                basis.push(v);
                basis.sort_unstable_by(|a, b| b.cmp(a));
            }
        }
        basis.len() as u32
    }

    /// Whether distinct indices map to distinct offsets (full column rank).
    pub fn is_injective(&self) -> bool {
        self.rank() == self.in_bits()
    }

    /// Whether the map is a bijection onto an aligned block of `2^in_bits` offsets (the
    /// columns span exactly the low `in_bits` bits): a permutation of the tile's storage.
    pub fn is_bijective(&self) -> bool {
        let n = self.in_bits();
        let low = if n >= 63 { -1 } else { (1i64 << n) - 1 };
        self.columns.iter().all(|&c| c & !low == 0) && self.is_injective()
    }

    /// The inverse map, from an offset in the image (only its low `in_bits` bits are read) to
    /// the index: `inverse().apply(apply(i)) == i`.
    ///
    /// Errors: `Inadmissible` unless [`is_bijective`](Self::is_bijective).
    pub fn inverse(&self) -> Result<F2Map> {
        if !self.is_bijective() {
            return Err(SwizzleError::inadmissible(
                "f2_inverse",
                self.to_string(),
                "the map is not a bijection onto an aligned block",
            ));
        }
        let n = self.columns.len();
        // Gauss-Jordan on [M | I], rows = output bits, columns packed in u64 per row.
        let mut rows: Vec<(u64, u64)> = (0..n)
            .map(|r| {
                let m = self
                    .columns
                    .iter()
                    .enumerate()
                    .fold(0u64, |acc, (k, &c)| acc | ((((c >> r) & 1) as u64) << k));
                (m, 1u64 << r)
            })
            .collect();
        for col in 0..n {
            let Some(p) = (col..n).find(|&r| (rows[r].0 >> col) & 1 == 1) else {
                return Err(SwizzleError::inadmissible(
                    "f2_inverse",
                    self.to_string(),
                    "singular bit matrix",
                ));
            };
            rows.swap(col, p);
            let pivot = rows[col];
            for (r, row) in rows.iter_mut().enumerate() {
                if r != col && (row.0 >> col) & 1 == 1 {
                    row.0 ^= pivot.0;
                    row.1 ^= pivot.1;
                }
            }
        }
        // rows[k].1 is row k of M^-1: bit j says whether output bit j feeds index bit k.
        let columns: Vec<i64> = (0..n)
            .map(|j| (0..n).fold(0i64, |acc, k| acc | ((((rows[k].1 >> j) & 1) as i64) << k)))
            .collect();
        let mut inv = F2Map {
            columns,
            translation: 0,
        };
        let low = (1i64 << n) - 1;
        inv.translation = inv.apply(self.translation & low);
        Ok(inv)
    }
}

/// `stride * 2^j` for every bit `j` of every flat mode, if every extent is a power of two.
fn bit_terms(l: &AnyLayout) -> Option<Vec<i64>> {
    let mut terms = Vec::new();
    for (n, d) in flat_modes(l.inner()) {
        if n.count_ones() != 1 {
            return None;
        }
        for j in 0..n.trailing_zeros() {
            terms.push(d.checked_mul(1i64 << j)?);
        }
    }
    Some(terms)
}

impl fmt::Display for F2Map {
    /// One line per output bit, highest first; one column per input bit, highest first
    /// (`1` or `.`), then the translation bit.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let top = self
            .columns
            .iter()
            .chain(std::iter::once(&self.translation))
            .map(|&c| 64 - (c as u64).leading_zeros())
            .max()
            .unwrap_or(0)
            .max(1);
        for r in (0..top).rev() {
            write!(f, "o{r:<2} ")?;
            for c in self.columns.iter().rev() {
                f.write_str(if (c >> r) & 1 == 1 { "1" } else { "." })?;
            }
            let t = if (self.translation >> r) & 1 == 1 {
                "1"
            } else {
                "."
            };
            writeln!(f, " | {t}")?;
        }
        Ok(())
    }
}
