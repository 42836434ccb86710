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
        if let Some(f) = structural_f2(&l) {
            return Ok(f);
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
                self.to_line(),
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
                    self.to_line(),
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

/// The F2 map of `l` when its structure shows it: a power-of-two size, and the offsets of the
/// index bits (`stride * 2^j`) and the layout's offset have pairwise disjoint bits, so that
/// `OFFSET + L(i)` is `OFFSET ^ XOR { stride * 2^j : bit j of i }` and the swizzle, linear
/// over XOR, distributes over it. `None` says nothing about linearity.
pub(crate) fn structural_f2(l: &AnyLayout) -> Option<F2Map> {
    if l.size().count_ones() != 1 {
        return None;
    }
    let terms = bit_terms(l)?;
    let mut used = l.offset();
    let disjoint = terms.iter().all(|&t| {
        let ok = used & t == 0;
        used |= t;
        ok
    });
    let sw = l.swizzle();
    disjoint.then(|| F2Map {
        columns: terms.iter().map(|&t| sw.apply(t)).collect(),
        translation: sw.apply(l.offset()),
    })
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

/// Building, composing and printing general XOR-linear maps.
impl F2Map {
    /// The map `i ↦ translation ^ XOR { columns[k] : bit k of i }` on `[0, 2^columns.len())`.
    ///
    /// Errors: `Inadmissible` for more than 62 columns (the domain must fit in an `i64`).
    ///
    /// ```
    /// use tessera_swizzle::F2Map;
    /// let f = F2Map::new(vec![2, 1], 0).unwrap(); // swaps the two bits
    /// assert_eq!(f.apply(1), 2);
    /// assert_eq!(f.apply(3), 3);
    /// ```
    pub fn new(columns: Vec<i64>, translation: i64) -> Result<F2Map> {
        if columns.len() > 62 {
            return Err(SwizzleError::inadmissible(
                "f2_map",
                format!("{} columns", columns.len()),
                "an F2 map has at most 62 input bits",
            ));
        }
        Ok(F2Map {
            columns,
            translation,
        })
    }

    /// The identity on `[0, 2^bits)`; `bits` is capped at 62.
    pub fn identity(bits: u32) -> F2Map {
        F2Map {
            columns: (0..bits.min(62)).map(|k| 1i64 << k).collect(),
            translation: 0,
        }
    }

    /// The swizzle `sw` restricted to `[0, 2^bits)`, as a linear map (`bits` capped at 62).
    /// Unlike CuTe, which composes two swizzles only when their shifts are equal, any two such
    /// maps compose ([`compose`](Self::compose)).
    ///
    /// ```
    /// use tessera_swizzle::{F2Map, Swizzle};
    /// let sw: Swizzle = "Sw<3,4,3>".parse().unwrap();
    /// let f = F2Map::of_swizzle(&sw, 10);
    /// assert!((0..1024).all(|x| f.apply(x) == sw.apply(x)));
    /// ```
    pub fn of_swizzle(sw: &crate::Swizzle, bits: u32) -> F2Map {
        F2Map {
            columns: (0..bits.min(62)).map(|k| sw.apply(1i64 << k)).collect(),
            translation: 0,
        }
    }

    /// `self ∘ inner`: `i ↦ self(inner(i))`, on inner's domain.
    ///
    /// Both are affine, `self(x) = t ^ M x` and `inner(i) = u ^ N i`, so the composite is
    /// `(t ^ M u) ^ (M N) i`: its columns are `M` applied to inner's columns and its
    /// translation is `self(u)`.
    ///
    /// Post-condition: `r.apply(i) == self.apply(inner.apply(i))` for every `i` in inner's
    /// domain.
    ///
    /// Errors: `Inadmissible` if an offset inner reaches lies outside self's domain
    /// `[0, 2^self.in_bits())` (then `self(inner(i))` is not defined).
    ///
    /// ```
    /// use tessera_swizzle::{F2Map, Swizzle};
    /// // two swizzles with different shifts: no single Sw<B,M,S>, but a linear map
    /// let a = F2Map::of_swizzle(&"Sw<1,4,3>".parse::<Swizzle>().unwrap(), 10);
    /// let b = F2Map::of_swizzle(&"Sw<1,5,2>".parse::<Swizzle>().unwrap(), 10);
    /// let ab = a.compose(&b).unwrap();
    /// assert!((0..1024).all(|x| ab.apply(x) == a.apply(b.apply(x))));
    /// assert_eq!(ab.inverse().unwrap().compose(&ab).unwrap(), F2Map::identity(10));
    /// ```
    #[doc(alias = "composition")]
    pub fn compose(&self, inner: &F2Map) -> Result<F2Map> {
        let n = self.in_bits();
        let outside = |x: i64| x < 0 || (n < 63 && x >> n != 0);
        if let Some(&x) = inner
            .columns
            .iter()
            .chain(std::iter::once(&inner.translation))
            .find(|&&x| outside(x))
        {
            return Err(SwizzleError::inadmissible(
                "composition",
                format!("{} o {}", self.to_line(), inner.to_line()),
                format!("the inner map reaches {x}, outside the outer map's domain [0, 2^{n})"),
            ));
        }
        let t = self.translation;
        Ok(F2Map {
            columns: inner.columns.iter().map(|&c| self.apply(c) ^ t).collect(),
            translation: self.apply(inner.translation),
        })
    }

    /// Whether the map is linear (`f(i ^ j) == f(i) ^ f(j)`), i.e. its translation is 0.
    pub fn is_linear(&self) -> bool {
        self.translation == 0
    }

    /// The number of output bits shown by [`rows`](Self::rows): at least the input bits, and
    /// enough for every column and the translation (a negative value has all 64).
    pub fn out_bits(&self) -> u32 {
        self.columns
            .iter()
            .chain(std::iter::once(&self.translation))
            .map(|&c| 64 - (c as u64).leading_zeros())
            .max()
            .unwrap_or(0)
            .max(self.in_bits())
            .max(1)
    }

    /// The bit matrix over GF(2), one string per output bit from the highest to bit 0; each
    /// string has one digit per input bit, from the highest to bit 0: the digit of output bit
    /// `r` and input bit `k` is bit `r` of column `k`, so bit `r` of `apply(i)` is the parity
    /// of the digits of row `r` where `i` has a 1, XOR bit `r` of the translation.
    ///
    /// ```
    /// use tessera_swizzle::{AnyLayout, F2Map};
    /// let l: AnyLayout = "Sw<1,0,1> o (2,2):(2,1)".parse().unwrap();
    /// // index bit 0 -> offset 2 -> Sw(2) = 3; index bit 1 -> offset 1
    /// assert_eq!(F2Map::of(&l).unwrap().rows(), ["01", "11"]);
    /// ```
    pub fn rows(&self) -> Vec<String> {
        (0..self.out_bits())
            .rev()
            .map(|r| {
                self.columns
                    .iter()
                    .rev()
                    .map(|&c| if (c >> r) & 1 == 1 { '1' } else { '0' })
                    .collect()
            })
            .collect()
    }

    /// The one-line text form: the rows of [`rows`](Self::rows) as `[r;r;...]`, then, for an
    /// affine map, `^ ` and the translation's bits (`[01;11]`, `[1;1] ^ 10`).
    pub fn to_line(&self) -> String {
        let mut s = format!("[{}]", self.rows().join(";"));
        if self.translation != 0 {
            let n = self.out_bits();
            s.push_str(" ^ ");
            s.extend((0..n).rev().map(|r| {
                if (self.translation >> r) & 1 == 1 {
                    '1'
                } else {
                    '0'
                }
            }));
        }
        s
    }
}

/// Whether `l` (plain or swizzled) is linear over F2: a power-of-two size and
/// `l(i ^ j) == l(i) ^ l(j)` for all indices (an affine map with `l(0) == 0`). `Sw o 0 o L`
/// with power-of-two extents and strides on disjoint bits is; a carry (`4:3`) or an
/// offset that the swizzle does not cancel makes it not.
///
/// Errors: `TooLarge` when the structure does not decide it and the size is above
/// [`ENUMERATION_LIMIT`]; `Overflow` as [`SwizzledLayout::offsets`](crate::SwizzledLayout::offsets).
///
/// ```
/// use tessera_swizzle::{is_linear, AnyLayout};
/// let p = |s: &str| s.parse::<AnyLayout>().unwrap();
/// assert!(is_linear(&p("Sw<3,4,3> o (8,64):(64,1)")).unwrap());
/// assert!(!is_linear(&p("4:3")).unwrap()); // 1 + 2 -> 9, but 3 ^ 6 = 5
/// assert!(!is_linear(&p("3:1")).unwrap()); // not a power of two
/// assert!(!is_linear(&p("Sw<3,4,3> o 16 o (8,64):(64,1)")).unwrap()); // l(0) = 16
/// ```
pub fn is_linear<L: Clone + Into<AnyLayout>>(l: &L) -> Result<bool> {
    let l: AnyLayout = l.clone().into();
    if l.size().count_ones() != 1 {
        return Ok(false);
    }
    match F2Map::of(&l) {
        Ok(f) => Ok(f.is_linear()),
        Err(SwizzleError::Inadmissible { .. }) => Ok(false),
        Err(SwizzleError::TooLarge {
            operands,
            needed,
            limit,
            ..
        }) => Err(SwizzleError::TooLarge {
            op: "is_linear",
            operands,
            needed,
            limit,
        }),
        Err(SwizzleError::Overflow { operands, .. }) => {
            Err(SwizzleError::overflow("is_linear", operands))
        }
        Err(e) => Err(e),
    }
}
