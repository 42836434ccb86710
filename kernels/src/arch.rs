//! Compilation targets of the sm80-class path.

use std::fmt;
use std::str::FromStr;

use crate::error::{KernelError, Result};

/// A GPU target the sm80-class GEMM is compiled for. The NVRTC name is explicit
/// (`--gpu-architecture=sm_90a`), so the module holds machine code for exactly this target.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum Arch {
    /// A100 (compute capability 8.0).
    Sm80,
    /// GA10x (8.6).
    Sm86,
    /// Ada (8.9).
    Sm89,
    /// H100 / H200 (9.0), with the architecture-specific features enabled.
    Sm90a,
}

impl Arch {
    /// Every target, in order.
    pub const ALL: [Arch; 4] = [Arch::Sm80, Arch::Sm86, Arch::Sm89, Arch::Sm90a];

    /// The target for a device's compute capability.
    ///
    /// ```
    /// use tessera_kernels::Arch;
    /// assert_eq!(Arch::from_compute_capability(9, 0).unwrap(), Arch::Sm90a);
    /// assert!(Arch::from_compute_capability(7, 5).is_err());
    /// ```
    pub fn from_compute_capability(major: i32, minor: i32) -> Result<Arch> {
        match (major, minor) {
            (8, 0) => Ok(Arch::Sm80),
            (8, 6) | (8, 7) => Ok(Arch::Sm86),
            (8, 9) => Ok(Arch::Sm89),
            (9, 0) => Ok(Arch::Sm90a),
            _ => Err(KernelError::UnsupportedArch {
                op: "Arch::from_compute_capability",
                arch: format!("sm_{major}{minor}"),
                msg:
                    "the sm80-class GEMM is built for compute capability 8.0, 8.6, 8.7, 8.9 and 9.0"
                        .into(),
            }),
        }
    }

    /// The name NVRTC takes for `--gpu-architecture`.
    pub fn nvrtc_name(self) -> &'static str {
        match self {
            Arch::Sm80 => "sm_80",
            Arch::Sm86 => "sm_86",
            Arch::Sm89 => "sm_89",
            Arch::Sm90a => "sm_90a",
        }
    }

    /// The most dynamic shared memory one block may opt into, in bytes
    /// (`CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN` of the target's devices).
    pub fn smem_per_block_optin(self) -> i64 {
        match self {
            Arch::Sm80 => 166_912,
            Arch::Sm86 | Arch::Sm89 => 101_376,
            Arch::Sm90a => 232_448,
        }
    }
}

impl fmt::Display for Arch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.nvrtc_name())
    }
}

impl FromStr for Arch {
    type Err = KernelError;

    /// Parses `sm_80`, `sm_86`, `sm_89`, `sm_90a` (and `sm_90` as `sm_90a`).
    fn from_str(s: &str) -> Result<Arch> {
        match s {
            "sm_80" => Ok(Arch::Sm80),
            "sm_86" => Ok(Arch::Sm86),
            "sm_89" => Ok(Arch::Sm89),
            "sm_90" | "sm_90a" => Ok(Arch::Sm90a),
            _ => Err(KernelError::UnsupportedArch {
                op: "Arch::from_str",
                arch: s.to_string(),
                msg: "expected one of sm_80, sm_86, sm_89, sm_90a".into(),
            }),
        }
    }
}

/// SMs of an H100 SXM, the GPU the planners size their defaults for (a grid that fills it, the
/// source `tessera plan` prints for sm_90a) when no device is at hand to ask.
pub const H100_SMS: i64 = 132;
