//! Launching the planned GEMM: device buffers, argument checks and the launch itself.

use cudarc::driver::{CudaStream, DeviceRepr};

use crate::codegen::cuda_source;
use crate::error::{KernelError, Result};
use crate::launch::mem::{launch_kernel, param, Mem};
use crate::launch::runtime::{driver_err, Runtime};
use crate::plan::problem::{BiasMode, DType, GemmProblem, Major};
use crate::plan::GemmPlan;
use crate::plan::GemmStrides;

/// The operands of one launch, in the terms of the problem asked for (`GemmPlan::problem`:
/// for a column-major D, the A and B of `D = A B`, not exchanged).
#[derive(Clone, Copy)]
pub struct GemmArgs {
    /// A (M x K per batch).
    pub a: Mem,
    /// B (K x N per batch).
    pub b: Mem,
    /// C, read when beta != 0.
    pub c: Option<Mem>,
    /// D.
    pub d: Mem,
    /// Bias, when the epilogue has one.
    pub bias: Option<Mem>,
    /// Aux (pre-activation), when the epilogue writes it.
    pub aux: Option<Mem>,
    /// Strides.
    pub strides: GemmStrides,
}

impl GemmArgs {
    /// The arguments of the problem the kernels run for `p` ([`GemmProblem::row_major_d`]):
    /// unchanged for a row-major D; for a column-major D, A and B (and their strides)
    /// exchanged.
    pub fn row_major_d(&self, p: &GemmProblem) -> GemmArgs {
        if p.d_major == Major::Row {
            return *self;
        }
        GemmArgs {
            a: self.b,
            b: self.a,
            strides: self.strides.row_major_d(p),
            ..*self
        }
    }
}

/// The kernel's parameter block; field order and types match `TesseraGemmParams` in
/// `kernels/cuda/gemm_sm80.cuh`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct GemmParams {
    a: u64,
    b: u64,
    c: u64,
    d: u64,
    bias: u64,
    aux: u64,
    lda: i64,
    ldb: i64,
    ldc: i64,
    ldd: i64,
    ldaux: i64,
    batch_a: i64,
    batch_b: i64,
    batch_c: i64,
    batch_d: i64,
    batch_bias: i64,
    batch_aux: i64,
    m: i32,
    n: i32,
    k: i32,
    tiles_m: i32,
    tiles_n: i32,
    alpha: f32,
    beta: f32,
    act: i32,
    bias_mode: i32,
    out_dtype: i32,
    flags: i32,
}

// SAFETY: plain-old-data, `#[repr(C)]`, mirrored field by field on the device.
unsafe impl DeviceRepr for GemmParams {}

const FLAG_A_VEC: i32 = 1;
const FLAG_B_VEC: i32 = 2;
const FLAG_STORE_PAIR: i32 = 4;
const FLAG_AUX: i32 = 8;
const FLAG_READ_C: i32 = 16;
const FLAG_STORE_QUAD: i32 = 32;

/// Whether every row (`ld` elements apart) and every batch (`batch` apart) of the output-typed
/// matrix `buf` starts on `elems` elements: accessed `elems` elements at a time.
fn rows_start_on(elems: i64, buf: Mem, ld: i64, batch: i64, p: &GemmProblem) -> bool {
    buf.ptr % (elems as u64 * p.output.bytes() as u64) == 0
        && ld % elems == 0
        && (p.batch == 1 || batch % elems == 0)
}

/// How each operand will be moved, as decided by [`GemmKernel::check`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AccessPaths {
    /// A copied with 16-byte cp.async (else element by element).
    pub a_vec: bool,
    /// B copied with 16-byte cp.async.
    pub b_vec: bool,
    /// D / C / aux accessed two elements at a time.
    pub store_pair: bool,
    /// D written by TMA stores from shared memory (the Hopper path's TMA-store epilogue).
    pub tma_store: bool,
    /// D written from shared memory as whole rows by bulk copies (the Hopper path, where D's
    /// rows are off TMA's 16-byte grid but contiguous and all its columns in one tile).
    pub row_store: bool,
}

/// Runs `check` (a kernel's argument check, in the terms of the problem it runs) on `args`
/// given for `p`, exchanged for a column-major D (whose errors then say so); returns the
/// arguments the kernel takes and their access paths.
pub(crate) fn check_row_major_d(
    p: &GemmProblem,
    args: &GemmArgs,
    check: impl FnOnce(&GemmArgs) -> Result<AccessPaths>,
) -> Result<(GemmArgs, AccessPaths)> {
    let kernel_args = args.row_major_d(p);
    match check(&kernel_args) {
        Ok(paths) => Ok((kernel_args, paths)),
        Err(e) if p.d_major == Major::Col => Err(e.in_transposed_launch()),
        Err(e) => Err(e),
    }
}

impl AccessPaths {
    /// These paths (decided on the kernel problem's operands) named after the operands of `p`:
    /// for a column-major D the kernel's A is `p`'s B and its B is `p`'s A.
    pub(crate) fn in_terms_of(self, p: &GemmProblem) -> AccessPaths {
        if p.d_major == Major::Col {
            AccessPaths {
                a_vec: self.b_vec,
                b_vec: self.a_vec,
                ..self
            }
        } else {
            self
        }
    }
}

/// A compiled plan, ready to launch on problems with the plan's types, orders and epilogue.
pub struct GemmKernel {
    plan: GemmPlan,
    func: cudarc::driver::CudaFunction,
}

fn need(op: &'static str, name: &str, buf: &Mem, dtype: DType, elems: i64) -> Result<()> {
    if buf.dtype != dtype {
        return Err(KernelError::invalid(
            op,
            format!("{name} is {} but the problem needs {dtype}", buf.dtype),
        ));
    }
    if (buf.len as i64) < elems {
        return Err(KernelError::invalid(
            op,
            format!(
                "{name} holds {} elements, the problem with these strides reaches {elems}",
                buf.len
            ),
        ));
    }
    Ok(())
}

fn check_ld(op: &'static str, name: &str, ld: i64, min: i64, what: &str) -> Result<()> {
    if ld < min {
        return Err(KernelError::invalid(
            op,
            format!("{name} = {ld} is smaller than {what} = {min}"),
        ));
    }
    Ok(())
}

impl GemmKernel {
    /// Compiles `plan` for the runtime's device (cached by source).
    pub fn new(rt: &Runtime, plan: &GemmPlan) -> Result<GemmKernel> {
        if plan.arch != rt.arch() {
            return Err(KernelError::UnsupportedArch {
                op: "GemmKernel::new",
                arch: rt.arch().to_string(),
                msg: format!("the plan targets {}", plan.arch),
            });
        }
        let func = rt.function(
            &cuda_source(plan),
            &plan.kernel_name(),
            "tessera_gemm",
            plan.smem_bytes,
        )?;
        Ok(GemmKernel {
            plan: plan.clone(),
            func,
        })
    }

    /// The plan.
    pub fn plan(&self) -> &GemmPlan {
        &self.plan
    }

    /// Registers per thread and local (spill) bytes of the compiled kernel.
    pub fn resources(&self) -> Result<(i32, i32)> {
        let regs = self
            .func
            .num_regs()
            .map_err(driver_err("cuFuncGetAttribute"))?;
        let local = self
            .func
            .local_size_bytes()
            .map_err(driver_err("cuFuncGetAttribute"))?;
        Ok((regs, local))
    }

    /// [`Self::check`] in the kernel problem's terms: the arguments the kernel takes and their
    /// access paths (A and B exchanged for a column-major D).
    fn check_exchanged(&self, args: &GemmArgs) -> Result<(GemmArgs, AccessPaths)> {
        check_row_major_d(&self.plan.problem, args, |a| self.check_kernel_args(a))
    }

    /// [`GemmKernel::check`] on the arguments of the kernel problem.
    fn check_kernel_args(&self, args: &GemmArgs) -> Result<AccessPaths> {
        let op = "gemm";
        let p: &GemmProblem = &self.plan.kernel_problem();
        let s = &args.strides;
        let (a_rows, a_inner, a_name) = match p.a_major {
            Major::Row => (p.m, p.k, "K (row-major A)"),
            Major::Col => (p.k, p.m, "M (column-major A)"),
        };
        let (b_rows, b_inner, b_name) = match p.b_major {
            Major::Row => (p.k, p.n, "N (row-major B)"),
            Major::Col => (p.n, p.k, "K (column-major B)"),
        };
        check_ld(op, "lda", s.lda, a_inner, a_name)?;
        check_ld(op, "ldb", s.ldb, b_inner, b_name)?;
        check_ld(op, "ldd", s.ldd, p.n, "N")?;
        need(
            op,
            "A",
            &args.a,
            p.input,
            GemmStrides::extent(p.batch, s.batch_a, a_rows, s.lda, a_inner),
        )?;
        need(
            op,
            "B",
            &args.b,
            p.input,
            GemmStrides::extent(p.batch, s.batch_b, b_rows, s.ldb, b_inner),
        )?;
        need(
            op,
            "D",
            &args.d,
            p.output,
            GemmStrides::extent(p.batch, s.batch_d, p.m, s.ldd, p.n),
        )?;
        let e = p.epilogue;
        match (e.beta != 0.0, args.c) {
            (true, Some(c)) => {
                check_ld(op, "ldc", s.ldc, p.n, "N")?;
                need(
                    op,
                    "C",
                    &c,
                    p.output,
                    GemmStrides::extent(p.batch, s.batch_c, p.m, s.ldc, p.n),
                )?;
            }
            (true, None) => return Err(KernelError::invalid(op, "beta != 0 but no C given")),
            (false, _) => {}
        }
        match (e.bias, args.bias) {
            (BiasMode::None, _) => {}
            (mode, Some(bias)) => {
                let len = if mode == BiasMode::PerRow { p.m } else { p.n };
                need(
                    op,
                    "bias",
                    &bias,
                    p.output,
                    (p.batch - 1) * s.batch_bias + len,
                )?;
            }
            (_, None) => {
                return Err(KernelError::invalid(
                    op,
                    "the epilogue has a bias but none is given",
                ))
            }
        }
        match (e.aux, args.aux) {
            (false, _) => {}
            (true, Some(aux)) => {
                check_ld(op, "ldaux", s.ldaux, p.n, "N")?;
                need(
                    op,
                    "aux",
                    &aux,
                    p.output,
                    GemmStrides::extent(p.batch, s.batch_aux, p.m, s.ldaux, p.n),
                )?;
            }
            (true, None) => {
                return Err(KernelError::invalid(
                    op,
                    "the epilogue writes aux but no aux buffer is given",
                ))
            }
        }
        let in_bytes = p.input.bytes();
        let vec_ok = |ptr: u64, inner: i64, ld: i64, batch: i64| {
            let per = 16 / in_bytes;
            ptr % 16 == 0 && inner % per == 0 && ld % per == 0 && (p.batch == 1 || batch % per == 0)
        };
        let a_vec = vec_ok(args.a.ptr, a_inner, s.lda, s.batch_a);
        let b_vec = vec_ok(args.b.ptr, b_inner, s.ldb, s.batch_b);
        let pair_ok = |buf: Option<Mem>, ld: i64, batch: i64| {
            buf.map_or(true, |b| rows_start_on(2, b, ld, batch, p))
        };
        let store_pair = pair_ok(Some(args.d), s.ldd, s.batch_d)
            && (e.beta == 0.0 || pair_ok(args.c, s.ldc, s.batch_c))
            && (!e.aux || pair_ok(args.aux, s.ldaux, s.batch_aux));
        Ok(AccessPaths {
            a_vec,
            b_vec,
            store_pair,
            tma_store: false,
            row_store: false,
        })
    }

    /// Checks the arguments and launches on `stream` (asynchronously).
    pub fn launch(&self, stream: &CudaStream, args: &GemmArgs) -> Result<AccessPaths> {
        let (args, paths) = self.check_exchanged(args)?;
        let args = &args;
        let p = &self.plan.kernel_problem();
        let e = p.epilogue;
        let s = &args.strides;
        let (tiles_m, tiles_n) = self.plan.grid_tiles();
        let mut flags = 0;
        if paths.a_vec {
            flags |= FLAG_A_VEC;
        }
        if paths.b_vec {
            flags |= FLAG_B_VEC;
        }
        if paths.store_pair {
            flags |= FLAG_STORE_PAIR;
        }
        // D four elements at a time (the kernel's short epilogue, which reads no C and writes
        // no aux).
        if rows_start_on(4, args.d, s.ldd, s.batch_d, p) {
            flags |= FLAG_STORE_QUAD;
        }
        if e.aux {
            flags |= FLAG_AUX;
        }
        if e.beta != 0.0 {
            flags |= FLAG_READ_C;
        }
        let params = GemmParams {
            a: args.a.ptr,
            b: args.b.ptr,
            c: if e.beta != 0.0 {
                args.c.map(|c| c.ptr).unwrap_or(0)
            } else {
                0
            },
            d: args.d.ptr,
            bias: if e.bias != BiasMode::None {
                args.bias.map(|b| b.ptr).unwrap_or(0)
            } else {
                0
            },
            aux: if e.aux {
                args.aux.map(|b| b.ptr).unwrap_or(0)
            } else {
                0
            },
            lda: s.lda,
            ldb: s.ldb,
            ldc: s.ldc,
            ldd: s.ldd,
            ldaux: s.ldaux,
            batch_a: s.batch_a,
            batch_b: s.batch_b,
            batch_c: s.batch_c,
            batch_d: s.batch_d,
            batch_bias: s.batch_bias,
            batch_aux: s.batch_aux,
            m: p.m as i32,
            n: p.n as i32,
            k: p.k as i32,
            tiles_m: tiles_m as i32,
            tiles_n: tiles_n as i32,
            alpha: e.alpha,
            beta: e.beta,
            act: e.act.code(),
            bias_mode: e.bias.code(),
            out_dtype: p.output.code(),
            flags,
        };
        let grid_x = tiles_m * tiles_n;
        if grid_x > i32::MAX as i64 {
            return Err(KernelError::invalid(
                "gemm",
                format!("{grid_x} CTAs exceed the grid limit"),
            ));
        }
        // SAFETY: `check` verified every buffer covers what the kernel reads and writes for
        // these strides, types and extents; the parameter block mirrors the device struct.
        unsafe {
            launch_kernel(
                &self.func,
                stream,
                (grid_x as u32, 1, p.batch as u32),
                (self.plan.threads as u32, 1, 1),
                self.plan.smem_bytes as u32,
                &mut [param(&params)],
                "launch tessera_gemm",
            )
        }?;
        Ok(paths.in_terms_of(&self.plan.problem))
    }
}

#[cfg(test)]
mod tests {
    use super::AccessPaths;
    use crate::{GemmProblem, Major};

    #[test]
    fn access_paths_are_named_after_the_operands_given() {
        let k = AccessPaths {
            a_vec: true,
            b_vec: false,
            store_pair: true,
            tma_store: false,
            row_store: false,
        };
        let mut p = GemmProblem::new(8, 16, 32);
        assert_eq!(k.in_terms_of(&p), k);
        p.d_major = Major::Col;
        let u = k.in_terms_of(&p);
        assert_eq!(
            (u.a_vec, u.b_vec, u.store_pair, u.tma_store),
            (false, true, true, false)
        );
    }
}
