//! cuBLASLt's fused epilogues run on tessera's row-major problem: the GPU reference for the
//! named fusions ([`crate::epilogue::Fusion`]) and the vendor side of their benchmark.
//!
//! tessera's `D (M x N, row-major) = A (M x K, row-major) B (K x N, column-major)` runs in
//! cuBLASLt as the column-major `D' (N x M, ld N) = op(A') B'` with `A'` = B's storage (`K x N`
//! column-major, ld K, transposed: `TRANSA = T`) and `B'` = A's storage (`K x M` column-major,
//! ld K, `TRANSB = N`). cuBLASLt's "bias per row of D'" is then tessera's `bias_col`, its aux
//! (ld counted along N) lies exactly as tessera's row-major aux with the same ld, BGRADA's
//! vector is `sum_k_b` and BGRADB's `sum_k_a` (see [`super::fusions`]).

use std::ffi::c_void;

use cudarc::cublaslt::{result as lt, sys};
use cudarc::driver::{CudaSlice, DevicePtr};

use crate::bench::buffers::DeviceBuf;
use crate::error::{KernelError, Result};
use crate::launch::runtime::{driver_err, Runtime};
use crate::plan::problem::{DType, GemmProblem, Major};

use crate::epilogue::fusions::Fusion;

const OP: &str = "cuBLASLt epilogue";

fn lt_err(op: &'static str) -> impl FnOnce(lt::CublasError) -> KernelError {
    move |e| KernelError::Blas {
        op,
        msg: format!("{e:?}"),
    }
}

/// A cuBLASLt handle with its workspace.
pub struct LtHandle {
    handle: sys::cublasLtHandle_t,
    workspace: CudaSlice<u8>,
}

impl LtHandle {
    /// Workspace bytes (cuBLASLt's recommendation for Hopper; enough for Ampere).
    pub const WORKSPACE: usize = 32 << 20;

    /// Creates a handle and its workspace on the runtime's device.
    pub fn new(rt: &Runtime) -> Result<LtHandle> {
        rt.context()
            .bind_to_thread()
            .map_err(driver_err("cuCtxSetCurrent"))?;
        let handle = lt::create_handle().map_err(lt_err("cublasLtCreate"))?;
        let workspace = rt
            .stream()
            .alloc_zeros::<u8>(Self::WORKSPACE)
            .map_err(driver_err("cuMemAlloc (cuBLASLt workspace)"))?;
        Ok(LtHandle { handle, workspace })
    }
}

impl Drop for LtHandle {
    fn drop(&mut self) {
        // SAFETY: the handle was created by `new` and is destroyed once.
        let _ = unsafe { lt::destroy_handle(self.handle) };
    }
}

struct Desc(sys::cublasLtMatmulDesc_t);
impl Drop for Desc {
    fn drop(&mut self) {
        // SAFETY: created by create_matmul_desc, destroyed once.
        let _ = unsafe { lt::destroy_matmul_desc(self.0) };
    }
}
struct Layout(sys::cublasLtMatrixLayout_t);
impl Drop for Layout {
    fn drop(&mut self) {
        // SAFETY: created by create_matrix_layout, destroyed once.
        let _ = unsafe { lt::destroy_matrix_layout(self.0) };
    }
}
struct Pref(sys::cublasLtMatmulPreference_t);
impl Drop for Pref {
    fn drop(&mut self) {
        // SAFETY: created by create_matmul_pref, destroyed once.
        let _ = unsafe { lt::destroy_matmul_pref(self.0) };
    }
}

fn epilogue_enum(f: Fusion) -> sys::cublasLtEpilogue_t {
    use sys::cublasLtEpilogue_t as E;
    match f {
        Fusion::Bias => E::CUBLASLT_EPILOGUE_BIAS,
        Fusion::ReluBias => E::CUBLASLT_EPILOGUE_RELU_BIAS,
        Fusion::GeluBias => E::CUBLASLT_EPILOGUE_GELU_BIAS,
        Fusion::ReluAuxBias => E::CUBLASLT_EPILOGUE_RELU_AUX_BIAS,
        Fusion::GeluAuxBias => E::CUBLASLT_EPILOGUE_GELU_AUX_BIAS,
        Fusion::DRelu => E::CUBLASLT_EPILOGUE_DRELU,
        Fusion::DGelu => E::CUBLASLT_EPILOGUE_DGELU,
        Fusion::DReluBgrad => E::CUBLASLT_EPILOGUE_DRELU_BGRAD,
        Fusion::DGeluBgrad => E::CUBLASLT_EPILOGUE_DGELU_BGRAD,
        Fusion::BgradA => E::CUBLASLT_EPILOGUE_BGRADA,
        Fusion::BgradB => E::CUBLASLT_EPILOGUE_BGRADB,
    }
}

/// The buffers of one fused cuBLASLt call, in tessera's row-major terms.
pub struct LtBuffers<'a> {
    /// A, `M x K` row-major.
    pub a: &'a DeviceBuf,
    /// B, `K x N` column-major (stored `N x K`).
    pub b: &'a DeviceBuf,
    /// D, `M x N` row-major (also C: beta is 0).
    pub d: &'a DeviceBuf,
    /// The bias (`bias_col`, read) or the bias gradient (`bgrad_col`, `sum_k_b`, `sum_k_a`,
    /// written), in D's type.
    pub bias: Option<&'a DeviceBuf>,
    /// The aux tensor: written by `*_aux_bias`, read by `drelu*` / `dgelu*`. A bit-mask is a
    /// buffer of 32-bit words (dtype fp32).
    pub aux: Option<&'a DeviceBuf>,
    /// The aux pitch: elements, or bits for a mask (a multiple of 128).
    pub aux_ld: i64,
}

fn set_attr<T>(desc: &Desc, attr: sys::cublasLtMatmulDescAttributes_t, v: &T) -> Result<()> {
    // SAFETY: `v` is a live value of the attribute's type; cuBLASLt copies it.
    unsafe {
        lt::set_matmul_desc_attribute(
            desc.0,
            attr,
            (v as *const T).cast::<c_void>(),
            std::mem::size_of::<T>(),
        )
    }
    .map_err(lt_err("cublasLtMatmulDescSetAttribute"))
}

/// Runs `D = fusion(alpha * A B)` with cuBLASLt for a batch-1 problem with A row-major, B
/// column-major and 16-bit input and output of one type (nn.Linear's layout).
pub fn lt_fused(
    rt: &Runtime,
    h: &LtHandle,
    fusion: Fusion,
    p: &GemmProblem,
    alpha: f32,
    bufs: &LtBuffers<'_>,
) -> Result<()> {
    lt_matmul(rt, h, Some(fusion), p, alpha, bufs)
}

/// Runs `D = alpha * A B` with cuBLASLt's default epilogue, on the operands and with the
/// descriptors of [`lt_fused`] (`bias` and `aux` are not read): the vendor's plain GEMM, the
/// baseline of its own fusions' cost.
pub fn lt_plain(
    rt: &Runtime,
    h: &LtHandle,
    p: &GemmProblem,
    alpha: f32,
    bufs: &LtBuffers<'_>,
) -> Result<()> {
    lt_matmul(rt, h, None, p, alpha, bufs)
}

/// The problem and buffers of a cuBLASLt call of `fusion` checked: the bias (gradient)
/// pointer where the fusion takes one, and the aux pointer where it reads or writes one.
fn epilogue_pointers(
    rt: &Runtime,
    fusion: Option<Fusion>,
    p: &GemmProblem,
    bufs: &LtBuffers<'_>,
) -> Result<(Option<u64>, Option<u64>)> {
    p.validate()?;
    if p.batch != 1 || p.a_major != Major::Row || p.b_major != Major::Col || p.input != p.output {
        return Err(KernelError::InvalidProblem {
            op: OP,
            msg: format!(
                "{p}: only batch 1, A row-major, B column-major, input type = output type"
            ),
        });
    }
    let (m, n, k) = (p.m, p.n, p.k);
    let (reads_aux, writes_aux) = match fusion {
        Some(f) => {
            let tree = f.tree();
            (
                tree.d.uses(crate::epilogue::tree::Leaf::AuxIn)
                    || tree.d.uses(crate::epilogue::tree::Leaf::AuxInBits),
                tree.d
                    .sinks()
                    .iter()
                    .any(|s| matches!(s, crate::epilogue::tree::Sink::Aux(_))),
            )
        }
        None => (false, false),
    };
    let bits = matches!(
        fusion,
        Some(Fusion::ReluAuxBias | Fusion::DRelu | Fusion::DReluBgrad)
    );
    // Every fusion but DRELU and DGELU reads a bias or writes a bias gradient.
    let uses_bias = fusion.is_some_and(|f| !matches!(f, Fusion::DRelu | Fusion::DGelu));
    let bias_len = match fusion {
        Some(Fusion::BgradB) => m,
        _ => n,
    };
    let name = fusion.map_or("the default epilogue", |f| f.name());
    let size_ok = |b: &DeviceBuf, dtype: DType, len: i64| b.dtype == dtype && b.len as i64 >= len;
    if !size_ok(bufs.a, p.input, m * k)
        || !size_ok(bufs.b, p.input, n * k)
        || !size_ok(bufs.d, p.output, m * n)
    {
        return Err(KernelError::InvalidProblem {
            op: OP,
            msg: "A, B or D is smaller than the problem or of another type".into(),
        });
    }
    let bias = match bufs.bias {
        _ if !uses_bias => None,
        Some(b) if size_ok(b, p.output, bias_len) => Some(b.ptr(rt)),
        _ => {
            return Err(KernelError::InvalidProblem {
                op: OP,
                msg: format!(
                    "{name} needs a bias (gradient) buffer of {bias_len} x {}",
                    p.output
                ),
            })
        }
    };
    let aux = if reads_aux || writes_aux {
        let (dtype, need) = if bits {
            if bufs.aux_ld % 128 != 0 || bufs.aux_ld < n {
                return Err(KernelError::Misaligned {
                    op: OP,
                    operand: "aux",
                    msg: format!(
                        "bit-mask ld = {} must be >= N = {n} and a multiple of 128",
                        bufs.aux_ld
                    ),
                });
            }
            (DType::F32, (m * bufs.aux_ld + 31) / 32)
        } else {
            if bufs.aux_ld % 8 != 0 || bufs.aux_ld < n {
                return Err(KernelError::Misaligned {
                    op: OP,
                    operand: "aux",
                    msg: format!(
                        "aux ld = {} must be >= N = {n} and a multiple of 8",
                        bufs.aux_ld
                    ),
                });
            }
            (p.output, (m - 1) * bufs.aux_ld + n)
        };
        match bufs.aux {
            Some(b) if size_ok(b, dtype, need) => Some(b.ptr(rt)),
            _ => {
                return Err(KernelError::InvalidProblem {
                    op: OP,
                    msg: format!("{name} needs an aux buffer of {need} x {dtype}"),
                })
            }
        }
    } else {
        None
    };
    Ok((bias, aux))
}

/// The matmul descriptor of a call of `fusion` (the default epilogue for `None`) with
/// the checked pointers of [`epilogue_pointers`]: D^T = B^T A^T in cuBLASLt's column-major
/// terms.
fn matmul_desc(
    fusion: Option<Fusion>,
    bias: Option<u64>,
    aux: Option<u64>,
    aux_ld: i64,
) -> Result<Desc> {
    let desc = Desc(
        lt::create_matmul_desc(
            sys::cublasComputeType_t::CUBLAS_COMPUTE_32F,
            sys::cudaDataType_t::CUDA_R_32F,
        )
        .map_err(lt_err("cublasLtMatmulDescCreate"))?,
    );
    use sys::cublasLtMatmulDescAttributes_t as A;
    set_attr(
        &desc,
        A::CUBLASLT_MATMUL_DESC_TRANSA,
        &1i32, /* CUBLAS_OP_T */
    )?;
    set_attr(
        &desc,
        A::CUBLASLT_MATMUL_DESC_TRANSB,
        &0i32, /* CUBLAS_OP_N */
    )?;
    set_attr(
        &desc,
        A::CUBLASLT_MATMUL_DESC_EPILOGUE,
        &fusion.map_or(
            sys::cublasLtEpilogue_t::CUBLASLT_EPILOGUE_DEFAULT,
            epilogue_enum,
        ),
    )?;
    if let Some(bias) = bias {
        set_attr(&desc, A::CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias)?;
    }
    if let Some(aux) = aux {
        set_attr(&desc, A::CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &aux)?;
        set_attr(&desc, A::CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &aux_ld)?;
    }
    Ok(desc)
}

/// [`lt_fused`] (`Some`) or [`lt_plain`] (`None`).
fn lt_matmul(
    rt: &Runtime,
    h: &LtHandle,
    fusion: Option<Fusion>,
    p: &GemmProblem,
    alpha: f32,
    bufs: &LtBuffers<'_>,
) -> Result<()> {
    let (bias, aux) = epilogue_pointers(rt, fusion, p, bufs)?;
    let ty = match p.input {
        DType::Bf16 => sys::cudaDataType_t::CUDA_R_16BF,
        DType::F16 => sys::cudaDataType_t::CUDA_R_16F,
        DType::F32 => sys::cudaDataType_t::CUDA_R_32F,
    };
    let (m, n, k) = (p.m, p.n, p.k);
    let desc = matmul_desc(fusion, bias, aux, bufs.aux_ld)?;
    let layout = |rows: i64, cols: i64, ld: i64| -> Result<Layout> {
        Ok(Layout(
            lt::create_matrix_layout(ty, rows as u64, cols as u64, ld)
                .map_err(lt_err("cublasLtMatrixLayoutCreate"))?,
        ))
    };
    let a_layout = layout(k, n, k)?; // B's storage, transposed by TRANSA
    let b_layout = layout(k, m, k)?; // A's storage
    let d_layout = layout(n, m, n)?;
    let pref = Pref(lt::create_matmul_pref().map_err(lt_err("cublasLtMatmulPreferenceCreate"))?);
    let ws = LtHandle::WORKSPACE;
    // SAFETY: `pref` is live; the value is a usize as the attribute requires.
    unsafe {
        lt::set_matmul_pref_attribute(
            pref.0,
            sys::cublasLtMatmulPreferenceAttributes_t::CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
            (&ws as *const usize).cast::<c_void>(),
            std::mem::size_of::<usize>(),
        )
    }
    .map_err(lt_err("cublasLtMatmulPreferenceSetAttribute"))?;
    // SAFETY: every descriptor is live and describes the buffers checked above.
    let heuristic = unsafe {
        lt::get_matmul_algo_heuristic(
            h.handle, desc.0, a_layout.0, b_layout.0, d_layout.0, d_layout.0, pref.0,
        )
    }
    .map_err(lt_err("cublasLtMatmulAlgoGetHeuristic"))?;
    let beta = 0.0f32;
    let stream = rt.stream();
    let (w, _w_sync) = h.workspace.device_ptr(stream);
    let (pa, pb, pd) = (bufs.b.ptr(rt), bufs.a.ptr(rt), bufs.d.ptr(rt));
    // SAFETY: A, B, D, bias and aux cover the problem (checked above); the workspace has
    // `ws` bytes; alpha and beta are f32 as the fp32 scale type requires.
    unsafe {
        lt::matmul(
            h.handle,
            desc.0,
            (&alpha as *const f32).cast(),
            (&beta as *const f32).cast(),
            pa as *const c_void,
            a_layout.0,
            pb as *const c_void,
            b_layout.0,
            pd as *const c_void,
            d_layout.0,
            pd as *mut c_void,
            d_layout.0,
            &heuristic.algo,
            w as *mut c_void,
            ws,
            stream.cu_stream() as sys::cudaStream_t,
        )
    }
    .map_err(lt_err("cublasLtMatmul"))
}
