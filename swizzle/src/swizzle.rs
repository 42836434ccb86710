//! `Swizzle`: CuTe's `Swizzle<B,M,S>`, an XOR of `B` bits into `B` other bits.

use std::fmt;
use std::str::FromStr;

use tessera_layout::Cursor;

use crate::error::{Result, SwizzleError};

/// The largest `M + B + |S|` accepted: every mask bit and the period `2^(M+B+|S|)` fit in a
/// positive `i64`.
pub const MAX_SWIZZLE_BITS: i64 = 62;

/// CuTe's `Swizzle<B,M,S>`: `x ↦ x ^ ((x & YYY) >> S)`.
///
/// ```text
///   bit:   ... | M+S+B-1 ... M+S | ... | M+B-1 ... M | M-1 ... 0
///   x:     ... |       YYY       | ... |     ZZZ     |  kept
///   Sw(x): ... |       YYY       | ... |  ZZZ ^ YYY  |  kept
/// ```
///
/// The `M` least significant bits are kept, the `B` bits `ZZZ` starting at bit `M` are XORed
/// with the `B` bits `YYY` starting at bit `M + S`. A negative `S` puts `YYY` below `ZZZ`
/// (`YYY` at bit `M`, `ZZZ` at bit `M + |S|`). CuTe requires `|S| >= B` so that the two masks
/// do not overlap; then the map is an involution (its own inverse) and XOR-linear.
///
/// Invariants (checked by [`Swizzle::new`]): `B >= 0`, `M >= 0`, `|S| >= B`,
/// `M + B + |S| <= 62`.
///
/// ```
/// use tessera_swizzle::Swizzle;
/// let sw = Swizzle::new(3, 4, 3).unwrap();
/// assert_eq!(sw.to_string(), "Sw<3,4,3>");
/// assert_eq!(sw.yyy_mask(), 0b11_1000_0000);
/// assert_eq!(sw.zzz_mask(), 0b00_0111_0000);
/// // row 1 (bit 7) moves column chunk 0 to chunk 1 (bit 4):
/// assert_eq!(sw.apply(128), 128 + 16);
/// assert_eq!(sw.apply(sw.apply(1000)), 1000);
/// ```
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub struct Swizzle {
    b: i64,
    m: i64,
    s: i64,
}

impl Swizzle {
    /// `Sw<B,M,S>`, with CuTe's checks (`B >= 0`, `M >= 0`, `|S| >= B`) and
    /// `M + B + |S| <= 62`.
    ///
    /// ```
    /// use tessera_swizzle::Swizzle;
    /// assert!(Swizzle::new(3, 4, 3).is_ok());
    /// assert!(Swizzle::new(2, 0, -2).is_ok());
    /// assert!(Swizzle::new(3, 4, 2).is_err()); // |S| < B: the masks would overlap
    /// assert!(Swizzle::new(-1, 0, 1).is_err());
    /// ```
    pub fn new(b: i64, m: i64, s: i64) -> Result<Swizzle> {
        let bad = |reason: &str| SwizzleError::BadSwizzle {
            op: "make_swizzle",
            b,
            m,
            s,
            reason: reason.to_string(),
        };
        if b < 0 {
            return Err(bad("B (the number of mask bits) must be at least 0"));
        }
        if m < 0 {
            return Err(bad("M (the number of kept low bits) must be at least 0"));
        }
        let abs_s = s
            .checked_abs()
            .ok_or_else(|| bad("S does not fit in an i64"))?;
        if abs_s < b {
            return Err(bad(
                "|S| must be at least B, else the YYY and ZZZ masks overlap",
            ));
        }
        match m.checked_add(b).and_then(|x| x.checked_add(abs_s)) {
            Some(top) if top <= MAX_SWIZZLE_BITS => Ok(Swizzle { b, m, s }),
            _ => Err(bad("M + B + |S| must be at most 62")),
        }
    }

    /// The identity swizzle `Sw<0,0,0>`.
    pub fn identity() -> Swizzle {
        Swizzle { b: 0, m: 0, s: 0 }
    }

    /// `B`, the number of bits XORed (CuTe's `num_bits`).
    #[doc(alias = "num_bits")]
    pub fn bits(&self) -> i64 {
        self.b
    }

    /// `M`, the number of least significant bits kept (CuTe's `num_base`).
    #[doc(alias = "num_base")]
    pub fn base(&self) -> i64 {
        self.m
    }

    /// `S`, the distance from `ZZZ` to `YYY` (CuTe's `num_shft`); negative puts `YYY` below.
    #[doc(alias = "num_shft")]
    pub fn shift(&self) -> i64 {
        self.s
    }

    /// Whether this swizzle is the identity function (`B == 0`).
    pub fn is_identity(&self) -> bool {
        self.b == 0
    }

    /// The mask of the `YYY` bits, the ones read: `(2^B - 1) << (M + max(0, S))`.
    pub fn yyy_mask(&self) -> i64 {
        ((1i64 << self.b) - 1) << (self.m + self.s.max(0))
    }

    /// The mask of the `ZZZ` bits, the ones changed: `(2^B - 1) << (M - min(0, S))`.
    pub fn zzz_mask(&self) -> i64 {
        ((1i64 << self.b) - 1) << (self.m - self.s.min(0))
    }

    /// `yyy_mask() | zzz_mask()` (CuTe's `swizzle_code`).
    pub fn swizzle_code(&self) -> i64 {
        self.yyy_mask() | self.zzz_mask()
    }

    /// `2^(M + B + |S|)`: the swizzle maps every aligned block of this many offsets onto
    /// itself, and `Sw(x + k * period) == Sw(x) + k * period`.
    pub fn period(&self) -> i64 {
        1i64 << (self.m + self.b + self.s.abs())
    }

    /// One past the highest `ZZZ` bit, as a power of two: `Sw(x)` differs from `x` only in
    /// the `ZZZ` bits, so it stays in the aligned block of this size that holds `x`.
    pub fn zzz_block(&self) -> i64 {
        1i64 << (self.m + self.b + (-self.s).max(0))
    }

    /// The swizzled offset `x ^ ((x & YYY) >> S)` (a negative `S` shifts left). Negative
    /// offsets are handled in two's complement, as CuTe does on signed integers.
    ///
    /// Post-condition: `apply(apply(x)) == x`, and `apply(x) ^ x` has bits only in `ZZZ`.
    pub fn apply(&self, x: i64) -> i64 {
        let y = x & self.yyy_mask();
        let t = if self.s >= 0 {
            y >> self.s
        } else {
            y << -self.s
        };
        x ^ t
    }

    /// The inverse function: a swizzle is an involution, so this is `self`.
    #[doc(alias = "right_inverse")]
    #[doc(alias = "left_inverse")]
    pub fn inverse(&self) -> Swizzle {
        *self
    }

    /// CuTe's `make_swizzle<Y, Z>()`: the swizzle whose `YYY` mask is `y` and `ZZZ` mask is
    /// `z` (`B = popcount`, `M = min(trailing zeros)`, `S = tz(y) - tz(z)`).
    ///
    /// Errors: `BadSwizzle` if the masks are negative, have different popcounts, are not
    /// contiguous runs, or overlap. `make_swizzle(0, 0)` is `Sw<0,0,0>`.
    ///
    /// ```
    /// use tessera_swizzle::Swizzle;
    /// assert_eq!(Swizzle::make_swizzle(0b1000, 0b0100).unwrap().to_string(), "Sw<1,2,1>");
    /// assert_eq!(Swizzle::make_swizzle(0b1100_0000, 0b0000_0110).unwrap().to_string(), "Sw<2,1,5>");
    /// assert!(Swizzle::make_swizzle(0b1010, 0b0101).is_err());
    /// ```
    pub fn make_swizzle(y: i64, z: i64) -> Result<Swizzle> {
        let bad = |b: i64, m: i64, s: i64, reason: String| SwizzleError::BadSwizzle {
            op: "make_swizzle",
            b,
            m,
            s,
            reason,
        };
        if y < 0 || z < 0 {
            return Err(bad(
                0,
                0,
                0,
                format!("masks {y:#b} and {z:#b} must be non-negative"),
            ));
        }
        if y == 0 && z == 0 {
            return Ok(Swizzle::identity());
        }
        let (by, bz) = (i64::from(y.count_ones()), i64::from(z.count_ones()));
        if by != bz {
            return Err(bad(
                by,
                0,
                0,
                format!("Y mask {y:#b} has {by} bits but Z mask {z:#b} has {bz}"),
            ));
        }
        let (ty, tz) = (i64::from(y.trailing_zeros()), i64::from(z.trailing_zeros()));
        let (m, s) = (ty.min(tz), ty - tz);
        let sw = Swizzle::new(by, m, s)?;
        if sw.yyy_mask() != y || sw.zzz_mask() != z {
            return Err(bad(
                by,
                m,
                s,
                format!("masks Y={y:#b}, Z={z:#b} are not two disjoint runs of equal length"),
            ));
        }
        Ok(sw)
    }

    /// The image of bit `k` (`apply(1 << k)`), the `k`-th column of the swizzle's bit matrix.
    fn column(&self, k: u32) -> i64 {
        self.apply(1i64 << k)
    }

    /// `self ∘ other`, `x ↦ self.apply(other.apply(x))`, when it is again a single swizzle
    /// (CuTe's `composition(Swizzle, Swizzle)`, which requires equal shifts; this accepts
    /// every pair whose composite is a swizzle, and checks it).
    ///
    /// Post-condition: `r.apply(x) == self.apply(other.apply(x))` for every `x` (checked on
    /// every bit: both sides are XOR-linear).
    ///
    /// Errors: `Inadmissible` if the composite is not one `Sw<B,M,S>`.
    ///
    /// ```
    /// use tessera_swizzle::Swizzle;
    /// let a = Swizzle::new(1, 4, 3).unwrap(); // bit 7 into bit 4
    /// let b = Swizzle::new(1, 5, 3).unwrap(); // bit 8 into bit 5
    /// assert_eq!(a.compose(&b).unwrap().to_string(), "Sw<2,4,3>");
    /// assert_eq!(a.compose(&a).unwrap(), Swizzle::identity());
    /// ```
    #[doc(alias = "composition")]
    pub fn compose(&self, other: &Swizzle) -> Result<Swizzle> {
        let f = |x: i64| self.apply(other.apply(x));
        let (mut y, mut z) = (0i64, 0i64);
        for k in 0..MAX_SWIZZLE_BITS as u32 {
            let diff = f(1i64 << k) ^ (1i64 << k);
            if diff != 0 {
                y |= 1i64 << k;
                z |= diff;
            }
        }
        let fail = || {
            SwizzleError::inadmissible(
                "composition",
                format!("{self} o {other}"),
                "the composite is not a single swizzle",
            )
        };
        let r = Swizzle::make_swizzle(y, z).map_err(|_| fail())?;
        let same = (0..MAX_SWIZZLE_BITS as u32).all(|k| r.column(k) == f(1i64 << k));
        if same {
            Ok(r)
        } else {
            Err(fail())
        }
    }

    /// The swizzle on offsets in units `n` times larger (CuTe's `upcast<N>`): `Sw<B,M-log2(n),S>`.
    ///
    /// Post-condition: `n * r.apply(x) == self.apply(n * x)` for every `x`.
    ///
    /// Errors: `Inadmissible` if `n` is not a power of two, or `M < log2(n)` (the swizzle
    /// then moves data inside one unit of `n`; CuTe keeps only part of it there, which
    /// changes the function).
    ///
    /// ```
    /// use tessera_swizzle::Swizzle;
    /// // the 128-byte swizzle on bytes, seen on 2-byte elements:
    /// let bytes = Swizzle::new(3, 4, 3).unwrap();
    /// assert_eq!(bytes.upcast(2).unwrap().to_string(), "Sw<3,3,3>");
    /// ```
    pub fn upcast(&self, n: i64) -> Result<Swizzle> {
        let k = log2_exact("upcast", n, || format!("{self}, {n}"))?;
        if self.m < k {
            return Err(SwizzleError::inadmissible(
                "upcast",
                format!("{self}, {n}"),
                format!(
                    "M = {} is below log2({n}) = {k}: the swizzle permutes inside one unit",
                    self.m
                ),
            ));
        }
        Swizzle::new(self.b, self.m - k, self.s)
    }

    /// The swizzle on offsets in units `n` times smaller (CuTe's `downcast<N>`):
    /// `Sw<B,M+log2(n),S>`. `Sw<B,M,S>` on 2-byte elements is `Sw<B,M+1,S>` on bytes.
    ///
    /// Post-condition: `r.apply(n * x + j) == n * self.apply(x) + j` for `0 <= j < n`.
    ///
    /// Errors: `Inadmissible` if `n` is not a power of two; `BadSwizzle` past 62 bits.
    ///
    /// ```
    /// use tessera_swizzle::Swizzle;
    /// let elems = Swizzle::new(3, 3, 3).unwrap();
    /// assert_eq!(elems.downcast(2).unwrap().to_string(), "Sw<3,4,3>");
    /// ```
    pub fn downcast(&self, n: i64) -> Result<Swizzle> {
        let k = log2_exact("downcast", n, || format!("{self}, {n}"))?;
        Swizzle::new(self.b, self.m + k, self.s)
    }

    /// Parses `Sw<B,M,S>` at the cursor (spaces allowed between tokens), for grammars that
    /// embed swizzle literals. Errors are parse errors at the position of the problem.
    pub fn parse(c: &mut Cursor<'_>) -> tessera_layout::Result<Swizzle> {
        c.skip_ws();
        let start = c.pos();
        if !c.rest().starts_with("Sw") {
            return Err(c.error("expected `Sw<B,M,S>`"));
        }
        c.set_pos(start + 2);
        c.expect('<')?;
        let b = c.integer()?;
        c.expect(',')?;
        let m = c.integer()?;
        c.expect(',')?;
        let s = c.integer()?;
        c.expect('>')?;
        Swizzle::new(b, m, s).map_err(|e| {
            let mut at = c.clone();
            at.set_pos(start);
            at.error(e.to_string())
        })
    }

    /// Whether the text at the cursor starts a swizzle literal (`Sw`).
    pub fn at_literal(c: &mut Cursor<'_>) -> bool {
        c.skip_ws();
        c.rest().starts_with("Sw")
    }
}

/// `log2(n)` for a power of two `n >= 1`.
pub(crate) fn log2_exact(op: &'static str, n: i64, ctx: impl FnOnce() -> String) -> Result<i64> {
    if n >= 1 && n.count_ones() == 1 {
        Ok(i64::from(n.trailing_zeros()))
    } else {
        Err(SwizzleError::inadmissible(
            op,
            ctx(),
            format!("the factor {n} is not a power of two"),
        ))
    }
}

impl Default for Swizzle {
    fn default() -> Self {
        Swizzle::identity()
    }
}

impl fmt::Display for Swizzle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Sw<{},{},{}>", self.b, self.m, self.s)
    }
}

impl FromStr for Swizzle {
    type Err = SwizzleError;
    fn from_str(s: &str) -> Result<Self> {
        let mut c = Cursor::new(s);
        let sw = Swizzle::parse(&mut c)?;
        if !c.at_end() {
            return Err(c.error("unexpected trailing text").into());
        }
        Ok(sw)
    }
}

impl From<Swizzle> for (i64, i64, i64) {
    fn from(sw: Swizzle) -> Self {
        (sw.b, sw.m, sw.s)
    }
}

/// CuTe's `make_swizzle<Y, Z>()`: see [`Swizzle::make_swizzle`].
///
/// ```
/// assert_eq!(tessera_swizzle::make_swizzle(0b1000, 0b0100).unwrap().to_string(), "Sw<1,2,1>");
/// ```
pub fn make_swizzle(y: i64, z: i64) -> Result<Swizzle> {
    Swizzle::make_swizzle(y, z)
}
