//! The swizzle of a plan's shared-memory tile, asked of swizzle synthesis.
//!
//! A planner hands [`choose_swizzle`] the warp accesses its kernel performs on the tile, the
//! candidates its hardware takes, and the swizzle of the standard atom it would pick by hand.
//! The synthesis ([`tessera_swizzle::best_swizzle`], or [`best_swizzle_among`] for hardware
//! modes) answers with the swizzle of the fewest wavefronts that keeps every access's vector
//! width; the planner uses it when it is the hand-picked one, or when it takes strictly fewer
//! wavefronts and the planner's checks of the kernel's constraints accept it. Otherwise the
//! hand-picked swizzle stays and the answer says why: the generated kernel changes only for a
//! measurable gain that its templates can take.

use std::fmt;

use tessera_layout::Layout;
use tessera_swizzle::algebra::composition as sw_composition;
use tessera_swizzle::{
    bank_conflicts, best_swizzle, best_swizzle_among, vectorization, BankConflicts, Swizzle,
    SwizzledLayout,
};

use crate::error::{KernelError, Result};

/// One warp access of a shared-memory tile: `(lane, value) -> coordinate index` of the tile,
/// mode 0 the lanes (as [`tessera_swizzle::bank_conflicts`] takes it), with the name the plan
/// prints.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TileAccess {
    /// What performs the access (`ldmatrix.x4`, `cp.async`, `wgmma core matrix`, ...).
    pub name: &'static str,
    /// `(lane, value) -> coordinate index` of the tile.
    pub layout: Layout,
}

/// The candidates a synthesis searches.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Candidates<'a> {
    /// Every `Sw<B,M,S>` within the tile's offset bits ([`best_swizzle`]).
    Every,
    /// The hardware's modes, in the order that breaks ties ([`best_swizzle_among`]), with
    /// what the plan prints for the choice (`the best TMA mode`).
    Modes(&'static str, &'a [Swizzle]),
}

/// The swizzle of one shared-memory tile: what the synthesis picks for the kernel's
/// accesses, the hand-picked swizzle of the standard atom, the wavefronts of each, and which
/// one the kernel uses.
///
/// ```
/// use tessera_kernels::plan::{GemmProblem, Sm90Plan};
/// let plan = Sm90Plan::new(&GemmProblem::new(4096, 4096, 4096)).unwrap();
/// let c = &plan.a.swizzle;
/// // Among the TMA modes, the wgmma core-matrix read wants the 128-byte one, which is the
/// // hand-picked atom's.
/// assert_eq!(c.synthesized, c.hand_picked);
/// assert_eq!(c.used.to_string(), "Sw<3,3,3>");
/// assert!(c.synthesized_wavefronts() <= c.hand_picked_wavefronts());
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AtomChoice {
    /// The accesses, by name, in the order of the counts.
    pub accesses: Vec<&'static str>,
    /// The candidates searched, as the plan prints them: `the best Sw<B,M,S> on the tile`, or
    /// the best of the hardware's modes.
    pub among: &'static str,
    /// The synthesis's answer.
    pub synthesized: Swizzle,
    /// Wavefronts / ideal of each access through the synthesized swizzle.
    pub synthesized_conflicts: Vec<BankConflicts>,
    /// Vector width (elements) of each access through the synthesized swizzle.
    pub synthesized_vectors: Vec<i64>,
    /// The swizzle of the standard atom the planner picks by hand.
    pub hand_picked: Swizzle,
    /// Wavefronts / ideal of each access through the hand-picked swizzle.
    pub hand_picked_conflicts: Vec<BankConflicts>,
    /// Vector width (elements) of each access through the hand-picked swizzle.
    pub hand_picked_vectors: Vec<i64>,
    /// The swizzle the kernel uses.
    pub used: Swizzle,
    /// When the synthesized swizzle differs from the hand-picked one and is not used: why.
    pub kept: Option<String>,
}

impl AtomChoice {
    /// Wavefronts of the accesses through the synthesized swizzle, summed.
    pub fn synthesized_wavefronts(&self) -> i64 {
        self.synthesized_conflicts
            .iter()
            .map(|c| c.wavefronts)
            .sum()
    }

    /// Wavefronts of the accesses through the hand-picked swizzle, summed.
    pub fn hand_picked_wavefronts(&self) -> i64 {
        self.hand_picked_conflicts
            .iter()
            .map(|c| c.wavefronts)
            .sum()
    }

    /// Whether the two are the same function (two identities may differ in `M` and `S`).
    pub fn agree(&self) -> bool {
        same_function(self.synthesized, self.hand_picked)
    }

    /// The planner's tile built by `build` with this choice; where `build` refuses the
    /// synthesized swizzle (a check of the kernel's that the tile fails), the synthesized one
    /// is given up for the hand-picked one, with that error as the reason, and the tile built
    /// again. Returns the tile and the choice it was built with.
    pub(crate) fn build<T>(
        mut self,
        build: impl Fn(&AtomChoice) -> crate::error::Result<T>,
    ) -> crate::error::Result<(T, AtomChoice)> {
        match build(&self) {
            Err(e) if self.used != self.hand_picked => {
                self.used = self.hand_picked;
                self.kept = Some(e.to_string());
                Ok((build(&self)?, self))
            }
            built => Ok((built?, self)),
        }
    }
}

fn same_function(a: Swizzle, b: Swizzle) -> bool {
    a == b || (a.is_identity() && b.is_identity())
}

impl fmt::Display for AtomChoice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let counts = |c: &[BankConflicts]| {
            c.iter()
                .map(|c| c.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        };
        let named: Vec<String> = self
            .accesses
            .iter()
            .zip(&self.synthesized_conflicts)
            .map(|(a, c)| format!("{a} {c}"))
            .collect();
        write!(
            f,
            "synthesized {} ({}): {} wavefronts/ideal; hand-picked {}: {}; ",
            self.synthesized,
            self.among,
            named.join(", "),
            self.hand_picked,
            counts(&self.hand_picked_conflicts)
        )?;
        match &self.kept {
            None if self.agree() => write!(f, "the same"),
            None => write!(f, "the synthesized one is used"),
            Some(why) => write!(f, "the hand-picked one is kept: {why}"),
        }
    }
}

/// Wavefronts / ideal and vector width of each access through `sw o 0 o tile`, counted by the
/// swizzle crate's `bank_conflicts` and `vectorization`.
fn measure(
    op: &'static str,
    sw: Swizzle,
    tile: &Layout,
    accesses: &[TileAccess],
    elem_bytes: i64,
) -> Result<(Vec<BankConflicts>, Vec<i64>)> {
    let swizzled = SwizzledLayout::new(sw, 0, tile.clone());
    let mut conflicts = Vec::with_capacity(accesses.len());
    let mut vectors = Vec::with_capacity(accesses.len());
    for a in accesses {
        let through = sw_composition(&swizzled, &a.layout).map_err(KernelError::swizzle(op))?;
        conflicts.push(bank_conflicts(&through, elem_bytes).map_err(KernelError::swizzle(op))?);
        vectors.push(
            vectorization(&through, elem_bytes)
                .map_err(KernelError::swizzle(op))?
                .vector_elems,
        );
    }
    Ok((conflicts, vectors))
}

/// The swizzle of `tile` (coordinates to element offsets, unswizzled) for the kernel's
/// `accesses`: the synthesis's answer among `candidates`, measured against `hand_picked`.
///
/// The answer uses the synthesized swizzle when it is the hand-picked one, or when it takes
/// strictly fewer wavefronts and keeps every vector width; otherwise the hand-picked one,
/// with the reason. A tie keeps the hand-picked swizzle: another swizzle of the same cost
/// would change the generated kernel for nothing. The planner then builds the tile with the
/// swizzle used, and gives a synthesized one up ([`AtomChoice::build`]) when its
/// own checks (the kernel's constraints) refuse it.
///
/// Errors: those of the synthesis and of the counts (an access outside the tile, a tile that
/// is not injective), named by `op`.
pub(crate) fn choose_swizzle(
    op: &'static str,
    accesses: &[TileAccess],
    tile: &Layout,
    elem_bytes: i64,
    candidates: Candidates<'_>,
    hand_picked: Swizzle,
) -> Result<AtomChoice> {
    let layouts: Vec<Layout> = accesses.iter().map(|a| a.layout.clone()).collect();
    let (found, among) = match candidates {
        Candidates::Every => (
            best_swizzle(&layouts, tile, elem_bytes),
            "the best Sw<B,M,S> on the tile",
        ),
        Candidates::Modes(name, modes) => {
            (best_swizzle_among(&layouts, tile, elem_bytes, modes), name)
        }
    };
    let found = found.map_err(KernelError::swizzle(op))?;
    let (hand_conflicts, hand_vectors) = measure(op, hand_picked, tile, accesses, elem_bytes)?;
    let synth = found.swizzle;
    let (synth_w, hand_w): (i64, i64) = (
        found.wavefronts(),
        hand_conflicts.iter().map(|c| c.wavefronts).sum(),
    );
    let narrower = found
        .vector_elems
        .iter()
        .zip(&hand_vectors)
        .any(|(s, h)| s < h);
    let kept = if same_function(synth, hand_picked) {
        None
    } else if synth_w > hand_w || narrower {
        // Only when the hand-picked swizzle is not among the candidates (it would have won).
        Some(format!(
            "{synth} takes {synth_w} wavefronts with vectors of {:?} elements, the hand-picked one {hand_w} with {hand_vectors:?}",
            found.vector_elems
        ))
    } else if synth_w == hand_w {
        Some(format!(
            "both take {hand_w} wavefronts, and a tie keeps the kernel's atom"
        ))
    } else {
        None
    };
    let used = if kept.is_none() && !same_function(synth, hand_picked) {
        synth
    } else {
        hand_picked
    };
    Ok(AtomChoice {
        accesses: accesses.iter().map(|a| a.name).collect(),
        among,
        synthesized: synth,
        synthesized_conflicts: found.conflicts,
        synthesized_vectors: found.vector_elems,
        hand_picked,
        hand_picked_conflicts: hand_conflicts,
        hand_picked_vectors: hand_vectors,
        used,
        kept,
    })
}
