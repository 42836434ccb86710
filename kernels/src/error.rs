//! The one error type of `tessera-kernels`.

/// What went wrong while planning, compiling, launching or checking a kernel.
///
/// Every variant names the operation (`op`) and carries its operands, so a message reads like
/// `gemm: lda = 7 is smaller than K = 8 for row-major A`.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum KernelError {
    /// The problem cannot be run as asked (a zero extent, a leading dimension below the
    /// extent it must cover, a buffer too small, an option that does not apply).
    #[error("{op}: {msg}")]
    InvalidProblem {
        /// The operation.
        op: &'static str,
        /// What is wrong, with the operands.
        msg: String,
    },
    /// An operand of a launch breaks a rule: its type, layout, extent, alignment or overlap.
    #[error("{op}: {operand}: layout {layout}: {rule}")]
    Operand {
        /// The operation.
        op: &'static str,
        /// The operand's name (`A`, `D`, `bias_col`, ...).
        operand: &'static str,
        /// Its layout in CuTe notation (or the tight layout it was given).
        layout: String,
        /// The rule it breaks, with what was found.
        rule: String,
    },
    /// An operand is not aligned as the chosen kernel path needs.
    #[error("{op}: {operand} is misaligned: {msg}")]
    Misaligned {
        /// The operation.
        op: &'static str,
        /// Which operand (A, B, C, D, bias, aux).
        operand: &'static str,
        /// The requirement that fails, with the values.
        msg: String,
    },
    /// The target cannot run this path (compute capability below 8.0, not enough shared
    /// memory for two pipeline stages, ...).
    #[error("{op}: unsupported target {arch}: {msg}")]
    UnsupportedArch {
        /// The operation.
        op: &'static str,
        /// The target, e.g. `sm_75`.
        arch: String,
        /// Why.
        msg: String,
    },
    /// A layout-algebra step of the planner failed.
    #[error("{op}: layout algebra: {source}")]
    Layout {
        /// The planning step.
        op: &'static str,
        /// The algebra's error.
        #[source]
        source: Box<tessera_layout::LayoutError>,
    },
    /// A swizzle step of the planner failed.
    #[error("{op}: swizzle: {source}")]
    Swizzle {
        /// The planning step.
        op: &'static str,
        /// The swizzle crate's error.
        #[source]
        source: Box<tessera_swizzle::SwizzleError>,
    },
    /// A shared-memory layout of the plan has bank conflicts where the plan needs none.
    #[error("{op}: {layout} has {conflicts} bank conflicts for {access}")]
    BankConflicts {
        /// The planning step.
        op: &'static str,
        /// The layout, in CuTe notation.
        layout: String,
        /// The access pattern checked.
        access: String,
        /// Extra wavefronts counted.
        conflicts: i64,
    },
    /// NVRTC could not be loaded (no libnvrtc on the library path).
    #[error("{op}: NVRTC is not available: {msg}")]
    NvrtcUnavailable {
        /// The operation.
        op: &'static str,
        /// Why, with the library names searched.
        msg: String,
    },
    /// NVRTC rejected the source. The message holds the log, the options and the source.
    #[error("{0}")]
    Compile(Box<CompileFailure>),
    /// The CUDA driver reported an error.
    #[error("{op}: CUDA driver error: {msg}")]
    Driver {
        /// The operation (`cuModuleLoadData`, `launch tessera_gemm`, ...).
        op: &'static str,
        /// The driver's message.
        msg: String,
    },
    /// cuBLAS or cuBLASLt reported an error.
    #[error("{op}: {msg}")]
    Blas {
        /// The operation.
        op: &'static str,
        /// The library's message.
        msg: String,
    },
    /// No CUDA device is present (or the driver library cannot be loaded).
    #[error("{op}: no CUDA device: {msg}")]
    NoDevice {
        /// The operation.
        op: &'static str,
        /// Why.
        msg: String,
    },
    /// A verification against the reference failed.
    #[error("{op}: {msg}")]
    Verification {
        /// The operation.
        op: &'static str,
        /// The failing comparison, with the numbers.
        msg: String,
    },
}

/// What NVRTC said about a source it could not compile.
#[derive(Debug, Clone)]
pub struct CompileFailure {
    /// The NVRTC call that failed.
    pub op: &'static str,
    /// The kernel's name.
    pub kernel: String,
    /// NVRTC's status.
    pub status: String,
    /// The options passed.
    pub options: Vec<String>,
    /// NVRTC's program log.
    pub log: String,
    /// The complete source compiled.
    pub source_text: String,
}

impl std::fmt::Display for CompileFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(
            f,
            "{}: NVRTC failed ({}) for kernel `{}`",
            self.op, self.status, self.kernel
        )?;
        writeln!(f, "--- options ---\n{}", self.options.join("\n"))?;
        writeln!(f, "--- log ---\n{}", self.log)?;
        writeln!(f, "--- source ---")?;
        for (i, l) in self.source_text.lines().enumerate() {
            writeln!(f, "{:5} {l}", i + 1)?;
        }
        Ok(())
    }
}

/// `Result` with [`KernelError`].
pub type Result<T> = std::result::Result<T, KernelError>;

impl KernelError {
    /// Adds to an argument error of a column-major-D launch that the kernel saw the
    /// transposed problem, so that its "A", "lda" and "M" are read correctly.
    #[cfg(feature = "cuda")]
    pub(crate) fn in_transposed_launch(self) -> Self {
        const NOTE: &str = "D is column-major, so the kernel runs Dᵀ = Bᵀ Aᵀ: its A is the B given (lda = the ldb given), its B the A given, M and N exchanged";
        match self {
            KernelError::InvalidProblem { op, msg } => KernelError::InvalidProblem {
                op,
                msg: format!("{msg} ({NOTE})"),
            },
            KernelError::Misaligned { op, operand, msg } => KernelError::Misaligned {
                op,
                operand,
                msg: format!("{msg} ({NOTE})"),
            },
            other => other,
        }
    }

    pub(crate) fn invalid(op: &'static str, msg: impl Into<String>) -> Self {
        KernelError::InvalidProblem {
            op,
            msg: msg.into(),
        }
    }

    pub(crate) fn swizzle(op: &'static str) -> impl FnOnce(tessera_swizzle::SwizzleError) -> Self {
        move |source| KernelError::Swizzle {
            op,
            source: Box::new(source),
        }
    }

    pub(crate) fn layout(op: &'static str) -> impl FnOnce(tessera_layout::LayoutError) -> Self {
        move |source| KernelError::Layout {
            op,
            source: Box::new(source),
        }
    }
}
