//! Running a generated epilogue on the GPU without a GEMM: `tessera_epilogue_apply` over an fp32
//! matrix standing for the accumulators (the check of the generated code against
//! [`super::eval`], and the operand-sum kernel of BGRADA / BGRADB).

use cudarc::driver::{CudaFunction, CudaStream, DeviceRepr};

use crate::error::{KernelError, Result};
use crate::launch::mem::{launch_kernel, param, LaunchCtx, Mem};
use crate::launch::runtime::Runtime;
use crate::plan::problem::DType;

use crate::epilogue::check::{check_binding, check_tree, Binding, KernelCaps, MatSpec, VecSpec};
use crate::epilogue::cuda::{EpArgs, StagedInput};
use crate::epilogue::tree::{AuxFormat, EpilogueTree, Leaf, Sink};

// SAFETY: plain-old-data, `#[repr(C)]`, mirrored field by field by `TesseraEpArgs` (checked by
// the `epilogue_codegen` test and a size assert compiled with every epilogue).
unsafe impl DeviceRepr for EpArgs {}

/// The device buffers of one epilogue launch. A bit-mask is a buffer of 32-bit words
/// (dtype fp32, `len` = words); reductions are fp32 and must be zeroed before the launch.
#[derive(Default)]
pub struct EpBuffers {
    /// D.
    pub d: Option<Mem>,
    /// C.
    pub c: Option<Mem>,
    /// `residual`.
    pub residual: Option<Mem>,
    /// `aux_in` or `aux_in_bits`.
    pub aux_in: Option<Mem>,
    /// The aux output.
    pub aux: Option<Mem>,
    /// `bias_row`.
    pub bias_row: Option<Mem>,
    /// `bias_col`.
    pub bias_col: Option<Mem>,
    /// `bgrad_row`.
    pub bgrad_row: Option<Mem>,
    /// `bgrad_col`.
    pub bgrad_col: Option<Mem>,
}

const OP: &str = "epilogue apply";

/// `(batch - 1) * batch_stride + (rows - 1) * ld + inner`, or None on overflow.
fn extent(batch: i64, batch_stride: i64, rows: i64, ld: i64, inner: i64) -> Option<i64> {
    (batch - 1)
        .checked_mul(batch_stride)?
        .checked_add((rows - 1).checked_mul(ld)?)?
        .checked_add(inner)
}

fn too_small(operand: &'static str, have: usize, need: i64) -> KernelError {
    KernelError::InvalidProblem {
        op: OP,
        msg: format!("{operand}: buffer of {have} elements, the binding reaches {need}"),
    }
}

/// The address of `buf` after checking it covers `spec` for `b`'s extents.
fn mat_ptr(
    name: &'static str,
    buf: Option<Mem>,
    spec: &Option<MatSpec>,
    b: &Binding,
) -> Result<u64> {
    let (Some(spec), Some(buf)) = (spec, buf) else {
        return match spec {
            Some(_) => Err(KernelError::InvalidProblem {
                op: OP,
                msg: format!("{name} is bound but has no buffer"),
            }),
            None => Ok(0),
        };
    };
    // Elements (or bits) up to the last one the kernel may touch.
    let last = (b.batch - 1)
        .checked_mul(spec.batch_stride)
        .and_then(|x| x.checked_add((b.m - 1).checked_mul(spec.ld)?))
        .and_then(|x| x.checked_add(b.n))
        .ok_or_else(|| too_small(name, buf.len, i64::MAX))?;
    let (need, dtype) = if spec.bits {
        ((last + 31) / 32, DType::F32)
    } else {
        (last, spec.dtype)
    };
    if buf.dtype != dtype {
        return Err(KernelError::InvalidProblem {
            op: OP,
            msg: format!("{name}: buffer of {}, bound as {dtype}", buf.dtype),
        });
    }
    if (buf.len as i64) < need {
        return Err(too_small(name, buf.len, need));
    }
    Ok(buf.ptr)
}

fn vec_ptr(
    name: &'static str,
    buf: Option<Mem>,
    spec: &Option<VecSpec>,
    batch: i64,
) -> Result<u64> {
    let (Some(spec), Some(buf)) = (spec, buf) else {
        return match spec {
            Some(_) => Err(KernelError::InvalidProblem {
                op: OP,
                msg: format!("{name} is bound but has no buffer"),
            }),
            None => Ok(0),
        };
    };
    let need = (batch - 1)
        .checked_mul(spec.batch_stride)
        .and_then(|x| x.checked_add(spec.len))
        .ok_or_else(|| too_small(name, buf.len, i64::MAX))?;
    if buf.dtype != spec.dtype {
        return Err(KernelError::InvalidProblem {
            op: OP,
            msg: format!("{name}: buffer of {}, bound as {}", buf.dtype, spec.dtype),
        });
    }
    if (buf.len as i64) < need {
        return Err(too_small(name, buf.len, need));
    }
    Ok(buf.ptr)
}

/// The epilogue arguments of one launch over rows `rows` x columns `cols` of the output
/// `b` describes: the binding's strides and types, the region, and every bound tensor's
/// address after checking its buffer covers the binding (`op` names the caller in errors).
fn region_args(
    op: &'static str,
    tree: &EpilogueTree,
    b: &Binding,
    bufs: &EpBuffers,
    rows: &std::ops::Range<i64>,
    cols: &std::ops::Range<i64>,
) -> Result<EpArgs> {
    if rows.start < 0
        || cols.start < 0
        || rows.end > b.m
        || cols.end > b.n
        || rows.is_empty()
        || cols.is_empty()
    {
        return Err(KernelError::InvalidProblem {
            op,
            msg: format!(
                "region rows {rows:?} x cols {cols:?} is empty or outside {} x {}",
                b.m, b.n
            ),
        });
    }
    let mut args = EpArgs::from_binding(tree, b);
    args.row0 = rows.start as i32;
    args.col0 = cols.start as i32;
    args.rows = (rows.end - rows.start) as i32;
    args.cols = (cols.end - cols.start) as i32;
    args.d = mat_ptr("D", bufs.d, &Some(b.d), b)?;
    args.c = if b.beta != 0.0 {
        mat_ptr("c", bufs.c, &b.c, b)?
    } else {
        0
    };
    args.residual = mat_ptr("residual", bufs.residual, &b.residual, b)?;
    let aux_in = if tree.d.uses(Leaf::AuxInBits) {
        &b.aux_in_bits
    } else {
        &b.aux_in
    };
    args.aux_in = mat_ptr("aux_in", bufs.aux_in, aux_in, b)?;
    args.aux = mat_ptr("aux", bufs.aux, &b.aux, b)?;
    args.bias_row = vec_ptr("bias_row", bufs.bias_row, &b.bias_row, b.batch)?;
    args.bias_col = vec_ptr("bias_col", bufs.bias_col, &b.bias_col, b.batch)?;
    args.bgrad_row = vec_ptr("bgrad_row", bufs.bgrad_row, &b.bgrad_row, b.batch)?;
    args.bgrad_col = vec_ptr("bgrad_col", bufs.bgrad_col, &b.bgrad_col, b.batch)?;
    // A pair store needs an even first column and a pair-aligned base.
    if cols.start % 2 != 0 || args.d % (2 * b.d.dtype.bytes() as u64) != 0 {
        args.d_pair = 0;
    }
    Ok(args)
}

/// Checks that the plan's problem is the `rows x cols` region of `b`'s product (same K and
/// batch) and outputs D's type; returns the region's extents.
fn region_matches_plan(
    op: &'static str,
    p: &crate::plan::problem::GemmProblem,
    b: &Binding,
    rows: &std::ops::Range<i64>,
    cols: &std::ops::Range<i64>,
) -> Result<(i64, i64)> {
    let (rm, rn) = (rows.end - rows.start, cols.end - cols.start);
    if (rm, rn, b.k, b.batch) != (p.m, p.n, p.k, p.batch) {
        return Err(KernelError::InvalidProblem {
            op,
            msg: format!(
                "region {rm} x {rn} x {} batch {} differs from the plan's {} x {} x {} batch {}",
                b.k, b.batch, p.m, p.n, p.k, p.batch
            ),
        });
    }
    if b.d.dtype != p.output {
        return Err(KernelError::InvalidProblem {
            op,
            msg: format!("D is bound as {}, the plan outputs {}", b.d.dtype, p.output),
        });
    }
    Ok((rm, rn))
}

/// The operand-sum kernel `tessera_ep_operand_sum` (cuBLASLt's BGRADA / BGRADB in the
/// row-major view: `sum_k_b`, `sum_k_a`), launched beside the GEMM.
pub struct OperandSum {
    func: CudaFunction,
}

impl OperandSum {
    /// Compiles and loads the kernel for the runtime's device.
    pub fn new(rt: &Runtime) -> Result<OperandSum> {
        let src = format!(
            "// tessera operand sums\n{}\n{}",
            crate::codegen::COMMON_CUH,
            crate::epilogue::cuda::OPERAND_SUM_CUH
        );
        let func = rt.function(&src, "tessera_ep_operand_sum", "tessera_ep_operand_sum", 0)?;
        Ok(OperandSum { func })
    }

    /// `out[b * out_batch + i] = sum_k op(b, i, k)` for the GEMM operand `which` of `p` (A:
    /// `i < M`; B: `i < N`) with the strides `s`, into the fp32 vector `out`.
    #[allow(clippy::too_many_arguments)]
    pub fn launch(
        &self,
        stream: &CudaStream,
        p: &crate::plan::problem::GemmProblem,
        s: &crate::plan::GemmStrides,
        which: crate::epilogue::tree::Operand,
        operand: &Mem,
        out: &Mem,
        out_batch: i64,
    ) -> Result<()> {
        use crate::epilogue::tree::Operand;
        use crate::plan::problem::Major;
        p.validate()?;
        let (outer, ld, batch_stride, k_contiguous) = match which {
            Operand::A => (p.m, s.lda, s.batch_a, p.a_major == Major::Row),
            Operand::B => (p.n, s.ldb, s.batch_b, p.b_major == Major::Col),
        };
        let name = if which == Operand::A { "A" } else { "B" };
        let (rows, inner) = if k_contiguous {
            (outer, p.k)
        } else {
            (p.k, outer)
        };
        if ld < inner || batch_stride < 0 {
            return Err(KernelError::InvalidProblem {
                op: "operand sum",
                msg: format!("{name}: ld = {ld} (at least {inner}), batch stride {batch_stride}"),
            });
        }
        let need = extent(p.batch, batch_stride, rows, ld, inner).unwrap_or(i64::MAX);
        if operand.dtype != p.input || (operand.len as i64) < need {
            return Err(KernelError::InvalidProblem {
                op: "operand sum",
                msg: format!(
                    "{name}: buffer of {} x {}, the problem needs {} x {need}",
                    operand.len, operand.dtype, p.input
                ),
            });
        }
        let out_need = extent(p.batch, out_batch, 1, 0, outer).unwrap_or(i64::MAX);
        if out.dtype != DType::F32 || out_batch < 0 || (out.len as i64) < out_need {
            return Err(KernelError::InvalidProblem {
                op: "operand sum",
                msg: format!(
                    "out: buffer of {} x {}, needs fp32 x {out_need}",
                    out.len, out.dtype
                ),
            });
        }
        let (x, o) = (operand.ptr, out.ptr);
        let (outer32, k32, kc, elem) = (
            outer as i32,
            p.k as i32,
            i32::from(k_contiguous),
            p.input.code(),
        );
        // SAFETY: the operand and output extents were checked above for these strides.
        unsafe {
            launch_kernel(
                &self.func,
                stream,
                (((outer + 127) / 128) as u32, p.batch as u32, 1),
                (128, 1, 1),
                0,
                &mut [
                    param(&x),
                    param(&ld),
                    param(&batch_stride),
                    param(&outer32),
                    param(&k32),
                    param(&kc),
                    param(&elem),
                    param(&o),
                    param(&out_batch),
                ],
                "launch tessera_ep_operand_sum",
            )
        }
    }
}

/// The host mirror of the sm80 template's `TesseraGemmParams` (kept here so that the tree
/// path needs nothing private from [`crate::gemm`]; the `epilogue_codegen` test lays the
/// device struct out from its declaration and compares).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct TreeGemmParams {
    /// A.
    pub a: u64,
    /// B.
    pub b: u64,
    /// C (unused by the tree epilogue).
    pub c: u64,
    /// D (unused by the tree epilogue, which stores through `tessera_ep_args`).
    pub d: u64,
    /// Bias (unused).
    pub bias: u64,
    /// Aux (unused).
    pub aux: u64,
    /// Leading dimension of A.
    pub lda: i64,
    /// Leading dimension of B.
    pub ldb: i64,
    /// Unused.
    pub ldc: i64,
    /// Unused.
    pub ldd: i64,
    /// Unused.
    pub ldaux: i64,
    /// Batch stride of A.
    pub batch_a: i64,
    /// Batch stride of B.
    pub batch_b: i64,
    /// Unused.
    pub batch_c: i64,
    /// Unused.
    pub batch_d: i64,
    /// Unused.
    pub batch_bias: i64,
    /// Unused.
    pub batch_aux: i64,
    /// M.
    pub m: i32,
    /// N.
    pub n: i32,
    /// K.
    pub k: i32,
    /// CTA tiles along M.
    pub tiles_m: i32,
    /// CTA tiles along N.
    pub tiles_n: i32,
    /// Unused (alpha is a leaf of the tree).
    pub alpha: f32,
    /// Unused.
    pub beta: f32,
    /// Unused.
    pub act: i32,
    /// Unused.
    pub bias_mode: i32,
    /// D's type code.
    pub out_dtype: i32,
    /// Access-path flags (`1`: A in 16-byte vectors, `2`: B likewise).
    pub flags: i32,
}

// SAFETY: plain-old-data, `#[repr(C)]`, mirrored field by field on the device.
unsafe impl DeviceRepr for TreeGemmParams {}

/// Every field of [`TreeGemmParams`] with its byte offset, in declaration order.
#[cfg(test)]
pub fn tree_gemm_params_layout() -> Vec<(&'static str, usize)> {
    use std::mem::offset_of;
    macro_rules! fields {
        ($($f:ident),*) => { vec![$((stringify!($f), offset_of!(TreeGemmParams, $f))),*] };
    }
    fields!(
        a, b, c, d, bias, aux, lda, ldb, ldc, ldd, ldaux, batch_a, batch_b, batch_c, batch_d,
        batch_bias, batch_aux, m, n, k, tiles_m, tiles_n, alpha, beta, act, bias_mode, out_dtype,
        flags
    )
}

/// The sm80-class GEMM of a plan with a tree epilogue ([`crate::epilogue::cuda::gemm_tree_source`]).
pub struct TreeGemm {
    plan: crate::plan::GemmPlan,
    tree: EpilogueTree,
    func: CudaFunction,
}

/// Tree epilogues address their outputs row-major; a problem with a column-major D is refused
/// (the flag-driven epilogue runs it as the transposed product).
fn refuse_col_major_d(op: &'static str, p: &crate::plan::problem::GemmProblem) -> Result<()> {
    if p.d_major == crate::plan::problem::Major::Col {
        return Err(KernelError::invalid(
            op,
            format!("{p}: tree epilogues write a row-major D (a column-major D is supported by the flag-driven epilogue only)"),
        ));
    }
    Ok(())
}

impl TreeGemm {
    /// Registers per thread and local (spill) bytes of the compiled kernel.
    pub fn resources(&self) -> Result<(i32, i32)> {
        let regs = self
            .func
            .num_regs()
            .map_err(crate::launch::runtime::driver_err("cuFuncGetAttribute"))?;
        let local = self
            .func
            .local_size_bytes()
            .map_err(crate::launch::runtime::driver_err("cuFuncGetAttribute"))?;
        Ok((regs, local))
    }

    /// Compiles the plan's GEMM with `tree` as its epilogue. Fails when the sm80 template
    /// lacks the `TESSERA_EPILOGUE_TREE` hook (the tree would be ignored).
    pub fn new(
        rt: &Runtime,
        plan: &crate::plan::GemmPlan,
        tree: &EpilogueTree,
    ) -> Result<TreeGemm> {
        refuse_col_major_d("TreeGemm::new", &plan.problem)?;
        if !crate::epilogue::cuda::gemm_has_tree_hook() {
            return Err(KernelError::InvalidProblem {
                op: "TreeGemm::new",
                msg: "the sm80 template has no TESSERA_EPILOGUE_TREE hook".into(),
            });
        }
        if plan.arch != rt.arch() {
            return Err(KernelError::UnsupportedArch {
                op: "TreeGemm::new",
                arch: rt.arch().to_string(),
                msg: format!("the plan targets {}", plan.arch),
            });
        }
        check_tree(tree, &KernelCaps::GENERATED)?;
        let src = crate::epilogue::cuda::gemm_tree_source(plan, tree)?;
        let func = rt.function(&src, &plan.kernel_name(), "tessera_gemm", plan.smem_bytes)?;
        Ok(TreeGemm {
            plan: plan.clone(),
            tree: tree.clone(),
            func,
        })
    }

    /// One launch of a region plan ([`crate::epilogue::coord::split_regions`]): the GEMM of rows `rows`
    /// of A and columns `cols` of B (the plan's problem must be that `rows x cols x K`
    /// product), with the epilogue writing the same rectangle of the full output `binding`
    /// describes (the epilogue sees full-output coordinates).
    #[allow(clippy::too_many_arguments)]
    pub fn launch_region(
        &self,
        cx: LaunchCtx<'_>,
        a: &Mem,
        b: &Mem,
        strides: &crate::plan::GemmStrides,
        binding: &Binding,
        bufs: &EpBuffers,
        rows: std::ops::Range<i64>,
        cols: std::ops::Range<i64>,
    ) -> Result<()> {
        use crate::plan::problem::Major;
        const OP: &str = "tree gemm";
        let p = &self.plan.problem;
        p.validate()?;
        check_binding(&self.tree, binding)?;
        if rows.start < 0 || cols.start < 0 || rows.end > binding.m || cols.end > binding.n {
            return Err(KernelError::InvalidProblem {
                op: OP,
                msg: format!(
                    "region rows {rows:?} x cols {cols:?} is outside {} x {}",
                    binding.m, binding.n
                ),
            });
        }
        region_matches_plan(OP, p, binding, &rows, &cols)?;
        let s = strides;
        // A and B must cover the full product; the region's operands start inside them.
        let (fm, fn_) = (binding.m, binding.n);
        let (a_rows, a_inner) = if p.a_major == Major::Row {
            (fm, p.k)
        } else {
            (p.k, fm)
        };
        let (b_rows, b_inner) = if p.b_major == Major::Row {
            (p.k, fn_)
        } else {
            (fn_, p.k)
        };
        for (name, buf, rows, inner, ld, bs) in [
            ("A", a, a_rows, a_inner, s.lda, s.batch_a),
            ("B", b, b_rows, b_inner, s.ldb, s.batch_b),
        ] {
            let need = extent(p.batch, bs, rows, ld, inner).unwrap_or(i64::MAX);
            if ld < inner || bs < 0 || buf.dtype != p.input || (buf.len as i64) < need {
                return Err(KernelError::InvalidProblem {
                    op: OP,
                    msg: format!(
                        "{name}: {} x {} with ld {ld}, the problem needs {} x {need} with ld >= {inner}",
                        buf.len, buf.dtype, p.input
                    ),
                });
            }
        }
        let args = region_args(OP, &self.tree, binding, bufs, &rows, &cols)?;
        // 16-byte copies of A and B when every row start and batch start is 16-byte aligned.
        let per = 16 / p.input.bytes();
        let vec_ok = |ptr: u64, inner: i64, ld: i64, bs: i64| {
            ptr % 16 == 0 && inner % per == 0 && ld % per == 0 && (p.batch == 1 || bs % per == 0)
        };
        let eb = p.input.bytes() as u64;
        let a_off = if p.a_major == Major::Row {
            rows.start * s.lda
        } else {
            rows.start
        };
        let b_off = if p.b_major == Major::Col {
            cols.start * s.ldb
        } else {
            cols.start
        };
        let (a_ptr, b_ptr) = (a.ptr + a_off as u64 * eb, b.ptr + b_off as u64 * eb);
        let (a_inner, b_inner) = (
            if p.a_major == Major::Row { p.k } else { p.m },
            if p.b_major == Major::Row { p.n } else { p.k },
        );
        let (tiles_m, tiles_n) = self.plan.grid_tiles();
        let params = TreeGemmParams {
            a: a_ptr,
            b: b_ptr,
            // The template still forms its flag-path pointers from these; keep them valid.
            d: args.d,
            ldd: args.ldd,
            batch_d: args.batch_d,
            lda: s.lda,
            ldb: s.ldb,
            batch_a: s.batch_a,
            batch_b: s.batch_b,
            m: p.m as i32,
            n: p.n as i32,
            k: p.k as i32,
            tiles_m: tiles_m as i32,
            tiles_n: tiles_n as i32,
            out_dtype: p.output.code(),
            flags: i32::from(vec_ok(a_ptr, a_inner, s.lda, s.batch_a))
                | (2 * i32::from(vec_ok(b_ptr, b_inner, s.ldb, s.batch_b))),
            ..TreeGemmParams::default()
        };
        let grid_x = tiles_m * tiles_n;
        if grid_x > i32::MAX as i64 {
            return Err(KernelError::InvalidProblem {
                op: OP,
                msg: format!("{grid_x} CTAs exceed the grid limit"),
            });
        }
        // SAFETY: A and B cover the problem for these strides (checked above); the epilogue's
        // tensors were checked against the binding by `check` and `mat_ptr` / `vec_ptr`; the
        // epilogue's arguments are the kernel's second parameter (`TesseraEpArgs`, mirrored by
        // `EpArgs`).
        unsafe {
            launch_kernel(
                &self.func,
                cx.stream,
                (grid_x as u32, 1, p.batch as u32),
                (self.plan.threads as u32, 1, 1),
                self.plan.smem_bytes as u32,
                &mut [param(&params), param(&args)],
                "launch tessera_gemm (tree epilogue)",
            )
        }
    }
}

/// The Hopper GEMM of a plan with a tree epilogue ([`crate::epilogue::cuda::sm90_tree_source`]): TMA
/// loads of the K-major A (`M x K`) and B (stored `N x K`), the plan's mainloop, and the
/// generated epilogue with its reductions summed in registers.
pub struct TreeSm90 {
    kernel: crate::launch::sm90::Sm90Kernel,
    tree: EpilogueTree,
    /// The binding's compiled-in part.
    statics: crate::epilogue::cuda::StaticTypes,
    /// What the fragment path needs of a launch's tensors (fixed by the tree and the binding's
    /// compiled-in part).
    frag: FragNeeds,
}

/// The tensors the fragment path of a [`TreeSm90`] kernel stores by TMA, reads by TMA, or
/// gathers a mask word at a time.
struct FragNeeds {
    full_aux: bool,
    bits_out: bool,
    bits_in: bool,
    staged: Vec<StagedInput>,
}

impl TreeSm90 {
    /// Compiles `plan` (whose own epilogue must be the plain one) with `tree` as its
    /// epilogue, for the runtime's device (sm_90a), with `binding`'s types and reading of C
    /// compiled in: launches must bind the same types (and beta zero or not alike). The
    /// plan is compiled as [`crate::plan::Sm90Plan::compiled_for`] the device's SM count, and
    /// with automatic stream-K, without the parts' code where the kernel would spill with it.
    pub fn new(
        rt: &Runtime,
        plan: &crate::plan::Sm90Plan,
        tree: &EpilogueTree,
        binding: &Binding,
    ) -> Result<TreeSm90> {
        let plan = plan.compiled_for(rt.sm_count() as i64);
        let src = crate::epilogue::cuda::sm90_tree_source(&plan, tree, Some(binding))?;
        let k = TreeSm90::from_source(rt, &plan, tree, binding, &src)?;
        // Automatic stream-K only where the kernel keeps every value in registers: the parts'
        // code can push a heavy tree over the consumers' register budget
        // (`docs/design/002-stream-k-unit-order.md`).
        if plan.stream_k && !plan.stream_k_forced() && k.resources()?.1 > 0 {
            let whole = crate::plan::Sm90Plan {
                stream_k: false,
                ..plan
            };
            let src = crate::epilogue::cuda::sm90_tree_source(&whole, tree, Some(binding))?;
            return TreeSm90::from_source(rt, &whole, tree, binding, &src);
        }
        Ok(k)
    }

    /// As [`TreeSm90::new`], compiling `src`: [`crate::epilogue::cuda::sm90_tree_source`]'s text for
    /// the same plan, tree and binding, with more `#define`s in front of it (an instrumented
    /// build, e.g. the per-tile timeline of `sm90_gemm.cuh`).
    pub fn from_source(
        rt: &Runtime,
        plan: &crate::plan::Sm90Plan,
        tree: &EpilogueTree,
        binding: &Binding,
        src: &str,
    ) -> Result<TreeSm90> {
        refuse_col_major_d("TreeSm90::new", &plan.problem)?;
        check_tree(tree, &KernelCaps::GENERATED)?;
        let sinks = tree.d.sinks();
        Ok(TreeSm90 {
            kernel: crate::launch::sm90::Sm90Kernel::from_source(rt, plan, src)?,
            tree: tree.clone(),
            statics: crate::epilogue::cuda::StaticTypes::of(tree, binding),
            frag: FragNeeds {
                full_aux: sinks
                    .iter()
                    .any(|k| matches!(k, Sink::Aux(AuxFormat::Full(_)))),
                bits_out: sinks.contains(&Sink::Aux(AuxFormat::Bits)),
                bits_in: tree.d.uses(Leaf::AuxInBits),
                staged: crate::epilogue::cuda::staged_inputs(plan, tree, binding),
            },
        })
    }

    /// CTAs in the persistent grid of a launch.
    pub fn grid_ctas(&self) -> i64 {
        self.kernel.grid_ctas()
    }

    /// Registers per thread and local (spill) bytes of the compiled kernel.
    pub fn resources(&self) -> Result<(i32, i32)> {
        self.kernel.resources()
    }

    /// Checks everything and launches `D = tree(A B)` on the runtime's stream. `binding`'s
    /// extents must be the plan's problem's; A and B are read with `strides`' `lda`, `ldb`,
    /// `batch_a`, `batch_b`.
    pub fn launch(
        &self,
        cx: LaunchCtx<'_>,
        a: &Mem,
        b: &Mem,
        strides: &crate::plan::GemmStrides,
        binding: &Binding,
        bufs: &EpBuffers,
    ) -> Result<()> {
        self.launch_region(cx, a, b, strides, binding, bufs, 0..binding.m, 0..binding.n)
    }

    /// One launch of a region plan ([`crate::epilogue::coord::split_regions`]): the product of rows
    /// `rows` of A and columns `cols` of B (the plan's problem must be that `rows x cols x K`
    /// product), the epilogue writing that rectangle of the full output `binding` describes
    /// (it sees full-output coordinates).
    #[allow(clippy::too_many_arguments)]
    pub fn launch_region(
        &self,
        cx: LaunchCtx<'_>,
        a: &Mem,
        b: &Mem,
        strides: &crate::plan::GemmStrides,
        binding: &Binding,
        bufs: &EpBuffers,
        rows: std::ops::Range<i64>,
        cols: std::ops::Range<i64>,
    ) -> Result<()> {
        let (maps, params, args) =
            self.prepare_region(cx, a, b, strides, binding, bufs, rows, cols)?;
        self.kernel.launch_raw(
            cx.stream,
            [
                &maps[0], &maps[1], &maps[2], &maps[3], &maps[4], &maps[5], &maps[6],
            ],
            &params,
            Some(&args),
        )
    }

    /// Everything [`TreeSm90::launch_region`] does before the launch call: the checks, the
    /// tensor maps, the parameter block and the epilogue's arguments.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn prepare_region(
        &self,
        cx: LaunchCtx<'_>,
        a: &Mem,
        b: &Mem,
        strides: &crate::plan::GemmStrides,
        binding: &Binding,
        bufs: &EpBuffers,
        rows: std::ops::Range<i64>,
        cols: std::ops::Range<i64>,
    ) -> Result<(
        [crate::launch::sm90::TmaMap; 7],
        crate::launch::sm90::Sm90Params,
        EpArgs,
    )> {
        use crate::launch::sm90::{Sm90Params, TmaOperand};
        use crate::plan::problem::Major;
        const OP: &str = "tree gemm (sm90)";
        let plan = self.kernel.plan();
        let p = &plan.problem;
        p.validate()?;
        check_binding(&self.tree, binding)?;
        let args = region_args(OP, &self.tree, binding, bufs, &rows, &cols)?;
        let statics = crate::epilogue::cuda::StaticTypes::of(&self.tree, binding);
        if statics != self.statics {
            return Err(KernelError::InvalidProblem {
                op: OP,
                msg: format!(
                    "the kernel was compiled for the binding\n{}but this launch binds\n{}",
                    self.statics, statics
                ),
            });
        }
        let (rm, rn) = region_matches_plan(OP, p, binding, &rows, &cols)?;
        if p.a_major != Major::Row || p.b_major != Major::Col {
            return Err(KernelError::InvalidProblem {
                op: OP,
                msg: format!(
                    "the Hopper path reads K-major operands (A row-major, B column-major), got A {} B {}",
                    p.a_major, p.b_major
                ),
            });
        }
        // A (full M x K) and B (full N x K) must cover the product; the region's rows start
        // inside them.
        let s = strides;
        for (name, buf, rows, ld, bs) in [
            ("A", a, binding.m, s.lda, s.batch_a),
            ("B", b, binding.n, s.ldb, s.batch_b),
        ] {
            // A is an M x K matrix, or (im2col) the convolution's x, N·H·W·C elements.
            let need = match (&plan.im2col, &plan.window, name) {
                (Some(g), _, "A") => g.extent(),
                (_, Some(wd), "A") => wd.staged_elems().unwrap_or(i64::MAX),
                _ => extent(p.batch, bs, rows, ld, p.k).unwrap_or(i64::MAX),
            };
            if ld < p.k || bs < 0 || buf.dtype != p.input || (buf.len as i64) < need {
                return Err(KernelError::InvalidProblem {
                    op: OP,
                    msg: format!(
                        "{name}: {} x {} with ld {ld}, the problem needs {} x {need} with ld >= {}",
                        buf.len, buf.dtype, p.input, p.k
                    ),
                });
            }
        }
        let eb = p.input.bytes() as u64;
        let operand = |ptr: u64, rows: i64, ld: i64, bs: i64| TmaOperand {
            ptr,
            dtype: p.input,
            k: p.k,
            rows,
            ld,
            batch: p.batch,
            batch_stride: bs,
        };
        // The boxes one CTA loads (with a cluster, its part of the shared tile): the kernel's
        // barriers expect exactly those bytes per CTA and stage (the plan's, in encode_a/b).
        // The region's first rows of A and B (its tensor maps and the cp.async load start there).
        let (a_start, b_start) = (
            a.ptr + (rows.start * s.lda) as u64 * eb,
            b.ptr + (cols.start * s.ldb) as u64 * eb,
        );
        let tma_a = crate::launch::sm90::encode_a(
            plan,
            &operand(a_start, rm, s.lda, s.batch_a),
            rows.start,
            OP,
        )?;
        let tma_b = crate::launch::sm90::encode_b(plan, &operand(b_start, rn, s.ldb, s.batch_b))?;
        let (tiles_m, tiles_n) = plan.grid_tiles();
        // A's map stands in for the maps a launch does not use.
        let (flags, tma_d, tma_aux, tma_in) =
            self.epilogue_maps(binding, &args, (&rows, &cols), (rm, rn), tma_a)?;
        // The halo load's rows are virtual: only the tensor maps place them.
        let mapped = flags & crate::launch::sm90::FLAG_TMA_STORE != 0
            && flags & crate::launch::sm90::FLAG_ROW_STORE == 0;
        if plan.halo().is_some() && !mapped {
            return Err(KernelError::invalid(
                OP,
                "the halo load stores D through TMA (its maps drop the rows never stored), but an output or staged input is not on TMA's 16-byte grid",
            ));
        }
        // The tree epilogue takes everything else from `args`.
        let params = Sm90Params {
            m: plan.kernel_rows() as i32,
            n: p.n as i32,
            k: p.k as i32,
            batch: p.batch as i32,
            tiles_m: tiles_m as i32,
            tiles_n: tiles_n as i32,
            group_m: plan.group_m as i32,
            out_dtype: p.output.code(),
            flags,
            a: a_start,
            b: b_start,
            lda: s.lda,
            ldb: s.ldb,
            batch_a: s.batch_a,
            batch_b: s.batch_b,
            ..Sm90Params::default()
        };
        let params = self.kernel.with_stream_k(cx, params)?;
        Ok((
            [
                tma_a, tma_b, tma_d, tma_aux, tma_in[0], tma_in[1], tma_in[2],
            ],
            params,
            args,
        ))
    }

    /// The epilogue's tensor maps and launch flags: the fragment path with TMA stores
    /// (plans with the TMA-store epilogue) when D, and a full aux, are tensors TMA can write
    /// from the region's first element, and a bit mask's rows start on word boundaries; else
    /// the scratch path, its maps `placeholder`. The maps are of the region (`{cols, rows,
    /// batch}` from its first element, `rm x rn`): the kernel's coordinates are
    /// launch-relative. Returns the flags and the maps of D, aux and the staged inputs (C, the
    /// residual, aux_in).
    fn epilogue_maps(
        &self,
        binding: &Binding,
        args: &EpArgs,
        (rows, cols): (&std::ops::Range<i64>, &std::ops::Range<i64>),
        (rm, rn): (i64, i64),
        placeholder: crate::launch::sm90::TmaMap,
    ) -> Result<(
        i32,
        crate::launch::sm90::TmaMap,
        crate::launch::sm90::TmaMap,
        [crate::launch::sm90::TmaMap; 3],
    )> {
        use crate::launch::sm90::{encode_epilogue_tma, tma_addressable, TmaOperand};
        let plan = self.kernel.plan();
        let p = &plan.problem;
        // The address of the region's first element of a tensor at `ptr`.
        let first_of = |ptr: u64, spec: &MatSpec| {
            ptr + (rows.start * spec.ld + cols.start) as u64 * spec.dtype.bytes() as u64
        };
        let region_map =
            |name: &'static str, ptr: u64, spec: &MatSpec, st: &crate::plan::Sm90Store| {
                let eb = spec.dtype.bytes() as u64;
                let first = first_of(ptr, spec);
                if eb != 2 || !tma_addressable(first, spec.ld, spec.batch_stride, p.batch, eb) {
                    return Ok(None);
                }
                encode_epilogue_tma(
                    plan,
                    name,
                    &TmaOperand {
                        ptr: first,
                        dtype: spec.dtype,
                        k: rn,
                        rows: rm,
                        ld: spec.ld,
                        batch: p.batch,
                        batch_stride: spec.batch_stride,
                    },
                    &st.warp_tma,
                )
                .map(Some)
            };
        let FragNeeds {
            full_aux,
            bits_out,
            bits_in,
            ref staged,
        } = self.frag;
        let mut flags = 0;
        let (mut tma_d, mut tma_aux) = (placeholder, placeholder);
        // The staged inputs' maps: C, the residual, aux_in.
        let mut tma_in = [placeholder, placeholder, placeholder];
        if let Some(st) = &plan.store {
            let d = region_map("D", args.d, &binding.d, st)?;
            let aux = match (&binding.aux, full_aux) {
                (Some(spec), true) => region_map("aux", args.aux, spec, st)?,
                _ => None,
            };
            // The mask's words are gathered (output) or preloaded (input) a row of a pass
            // at a time: rows and batches start on word boundaries, and so does the region.
            let words = (!bits_out || (args.ldaux % 32 == 0 && args.batch_aux % 32 == 0))
                && (!bits_in || (args.ld_aux_in % 32 == 0 && args.batch_aux_in % 32 == 0))
                && (!(bits_out || bits_in) || args.col0 % 32 == 0);
            // The inputs the kernel stages: each must be a tensor TMA can read, or the launch
            // takes the scratch path.
            let mut inputs_ok = true;
            for input in staged {
                let (slot, name, ptr, spec) = match input {
                    StagedInput::C => (0, "C", args.c, &binding.c),
                    StagedInput::Residual => (1, "residual", args.residual, &binding.residual),
                    StagedInput::AuxIn => (2, "aux_in", args.aux_in, &binding.aux_in),
                };
                match spec {
                    Some(spec) => match region_map(name, ptr, spec, st)? {
                        Some(m) => tma_in[slot] = m,
                        None => inputs_ok = false,
                    },
                    None => inputs_ok = false,
                }
            }
            // Else D (and a full aux) as whole rows (no maps), where the region is whole
            // contiguous rows within one tile.
            let outs = if full_aux { 2 } else { 1 };
            let rows_ok = |ptr: u64, spec: &MatSpec| {
                cols.start == 0
                    && crate::launch::sm90::row_storable(
                        plan,
                        (first_of(ptr, spec), spec.ld, spec.batch_stride),
                        (rn, p.batch),
                        spec.dtype.bytes() as u64,
                        outs,
                    )
            };
            let whole_rows = rows_ok(args.d, &binding.d)
                && (!full_aux || binding.aux.as_ref().is_some_and(|a| rows_ok(args.aux, a)));
            if words && inputs_ok {
                match d {
                    Some(d) if !full_aux || aux.is_some() => {
                        flags = crate::launch::sm90::FLAG_TMA_STORE;
                        tma_d = d;
                        tma_aux = aux.unwrap_or(placeholder);
                    }
                    _ if whole_rows => {
                        flags = crate::launch::sm90::FLAG_TMA_STORE
                            | crate::launch::sm90::FLAG_ROW_STORE;
                    }
                    _ => {}
                }
            }
        }
        Ok((flags, tma_d, tma_aux, tma_in))
    }

    /// The compiled Hopper kernel.
    pub(crate) fn sm90_kernel(&self) -> &crate::launch::sm90::Sm90Kernel {
        &self.kernel
    }
}

/// A tree run by the plan's kernel compiled with the flag-driven epilogue that
/// [`flag_epilogue_for`] finds for it (the named fusions BIAS, RELU_BIAS, GELU_BIAS,
/// GELU_AUX_BIAS and their variants): that kernel loads every operand of a block before its
/// first store and needs no generated code. [`TreeKernel::plan`] takes this route when it can,
/// but for a tree that takes the ping-pong schedule on the Hopper path
/// ([`crate::epilogue::cuda::tree_takes_pingpong`]).
pub struct TreeFused {
    kernel: crate::launch::sm90::PathKernel,
    /// The alpha and beta of the binding the kernel was compiled for (a launch must bind
    /// the same: they are compiled into the flag-driven epilogue).
    scalars: (f32, f32),
}

fn need(op: &'static str, what: &str, buf: Option<Mem>) -> Result<Mem> {
    buf.ok_or_else(|| KernelError::invalid(op, format!("the epilogue needs {what}, none given")))
}

impl TreeFused {
    /// The GEMM kernel.
    pub(crate) fn path_kernel(&self) -> &crate::launch::sm90::PathKernel {
        &self.kernel
    }

    /// The problem (with the flag-driven epilogue) the kernel was compiled for.
    pub fn problem(&self) -> &crate::plan::problem::GemmProblem {
        self.kernel.problem()
    }

    /// Launches `D = tree(A B)` over the whole output: `binding` must give the compiled
    /// epilogue (the same alpha, beta and types), `bufs` its tensors.
    pub fn launch(
        &self,
        cx: LaunchCtx<'_>,
        a: &Mem,
        b: &Mem,
        strides: &crate::plan::GemmStrides,
        binding: &Binding,
        bufs: &EpBuffers,
    ) -> Result<()> {
        let op = "TreeFused::launch";
        let p = self.problem();
        let e = p.epilogue;
        if (binding.alpha, binding.beta) != self.scalars
            || (binding.m, binding.n, binding.k, binding.batch) != (p.m, p.n, p.k, p.batch)
        {
            return Err(KernelError::InvalidProblem {
                op,
                msg: format!(
                    "the binding ({} x {} x {} batch {}, alpha {}, beta {}) differs from the compiled `{e}` of {p}",
                    binding.m, binding.n, binding.k, binding.batch, binding.alpha, binding.beta
                ),
            });
        }
        let mut s = *strides;
        s.ldd = binding.d.ld;
        s.batch_d = binding.d.batch_stride;
        let c = match (&binding.c, e.beta != 0.0) {
            (Some(m), true) => {
                s.ldc = m.ld;
                s.batch_c = m.batch_stride;
                Some(need(op, "C", bufs.c)?)
            }
            _ => None,
        };
        let (bias_spec, bias_buf) = match e.bias {
            crate::plan::problem::BiasMode::None => (None, None),
            crate::plan::problem::BiasMode::PerRow => (binding.bias_row, bufs.bias_row),
            crate::plan::problem::BiasMode::PerCol => (binding.bias_col, bufs.bias_col),
        };
        let bias = match bias_spec {
            Some(v) => {
                s.batch_bias = v.batch_stride;
                Some(need(op, "the bias", bias_buf)?)
            }
            None => None,
        };
        let aux = match (&binding.aux, e.aux) {
            (Some(m), true) => {
                s.ldaux = m.ld;
                s.batch_aux = m.batch_stride;
                Some(need(op, "aux", bufs.aux)?)
            }
            _ => None,
        };
        let args = crate::launch::sm80::GemmArgs {
            a: *a,
            b: *b,
            c,
            d: need(op, "D", bufs.d)?,
            bias,
            aux,
            strides: s,
        };
        self.kernel.launch(cx, &args).map(|_| ())
    }
}

/// A GEMM with a tree epilogue on either path: the Hopper kernel ([`TreeSm90`]) or the
/// sm80-class one ([`TreeGemm`]).
pub enum TreeKernel {
    /// The sm80-class path.
    Sm80(Box<TreeGemm>),
    /// The sm_90a path.
    Hopper(Box<TreeSm90>),
    /// Either path's kernel with the flag-driven epilogue the tree amounts to.
    Fused(Box<TreeFused>),
}

impl TreeKernel {
    /// Compiles the kernel `plan` chose, for the runtime's device.
    pub(crate) fn from_plan(rt: &Runtime, plan: &crate::plan::Plan) -> Result<TreeKernel> {
        use crate::plan::gemm::KernelPlan;
        Ok(match &plan.kernel {
            KernelPlan::Flags(path) => TreeKernel::Fused(Box::new(TreeFused {
                kernel: crate::launch::sm90::PathKernel::new(rt, path)?,
                scalars: (plan.binding.alpha, plan.binding.beta),
            })),
            KernelPlan::Sm80Tree(p) => {
                TreeKernel::Sm80(Box::new(TreeGemm::new(rt, p, &plan.tree)?))
            }
            KernelPlan::HopperTree(p) => {
                TreeKernel::Hopper(Box::new(TreeSm90::new(rt, p, &plan.tree, &plan.binding)?))
            }
        })
    }

    /// The Hopper kernel, where this is one (the grid and launch settings below apply to it
    /// alone).
    fn hopper_mut(&mut self) -> Option<&mut crate::launch::sm90::Sm90Kernel> {
        match self {
            TreeKernel::Hopper(k) => Some(&mut k.kernel),
            TreeKernel::Fused(f) => match &mut f.kernel {
                crate::launch::sm90::PathKernel::Hopper(k) => Some(k.as_mut()),
                _ => None,
            },
            TreeKernel::Sm80(_) => None,
        }
    }

    /// Caps a Hopper kernel's persistent grid at `n` CTAs (no effect on the sm80-class path).
    pub(crate) fn set_max_ctas(&mut self, n: i64) {
        if let Some(k) = self.hopper_mut() {
            k.set_max_ctas(n);
        }
    }

    /// A Hopper kernel's programmatic dependent launches on or off (the sm80-class kernel is
    /// launched plainly either way).
    pub(crate) fn set_dependent_launch(&mut self, on: bool) {
        if let Some(k) = self.hopper_mut() {
            k.set_dependent_launch(on);
        }
    }

    /// Registers per thread and local (spill) bytes of the GEMM kernel.
    pub(crate) fn resources(&self) -> Result<(i32, i32)> {
        match self {
            TreeKernel::Hopper(k) => k.resources(),
            TreeKernel::Sm80(k) => k.resources(),
            TreeKernel::Fused(f) => match &f.kernel {
                crate::launch::sm90::PathKernel::Hopper(k) => k.resources(),
                crate::launch::sm90::PathKernel::Sm80(k) => k.resources(),
            },
        }
    }

    /// See [`TreeGemm::launch`] / [`TreeSm90::launch`].
    pub fn launch(
        &self,
        cx: LaunchCtx<'_>,
        a: &Mem,
        b: &Mem,
        strides: &crate::plan::GemmStrides,
        binding: &Binding,
        bufs: &EpBuffers,
    ) -> Result<()> {
        self.launch_region(cx, a, b, strides, binding, bufs, 0..binding.m, 0..binding.n)
    }

    /// See [`TreeGemm::launch_region`] / [`TreeSm90::launch_region`].
    #[allow(clippy::too_many_arguments)]
    pub fn launch_region(
        &self,
        cx: LaunchCtx<'_>,
        a: &Mem,
        b: &Mem,
        strides: &crate::plan::GemmStrides,
        binding: &Binding,
        bufs: &EpBuffers,
        rows: std::ops::Range<i64>,
        cols: std::ops::Range<i64>,
    ) -> Result<()> {
        match self {
            TreeKernel::Sm80(k) => k.launch_region(cx, a, b, strides, binding, bufs, rows, cols),
            TreeKernel::Hopper(k) => k.launch_region(cx, a, b, strides, binding, bufs, rows, cols),
            TreeKernel::Fused(k) => {
                if (rows.start, rows.end, cols.start, cols.end) != (0, binding.m, 0, binding.n) {
                    return Err(KernelError::invalid(
                        "TreeKernel::launch_region",
                        format!(
                            "the flag-driven epilogue runs the whole output, not rows {rows:?} x columns {cols:?}"
                        ),
                    ));
                }
                k.launch(cx, a, b, strides, binding, bufs)
            }
        }
    }
}
