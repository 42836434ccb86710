//! Launching the Hopper plan: TMA descriptors encoded from the plan's boxes, argument checks,
//! the persistent launch.

use cudarc::driver::sys as cu;
use cudarc::driver::{CudaFunction, CudaSlice, CudaStream, DevicePtr, DeviceRepr};

use crate::arch::Arch;
use crate::error::{KernelError, Result};
use crate::launch::mem::{launch_kernel_as, param, LaunchCtx, Mem};
use crate::launch::runtime::{driver_err, Runtime};
use crate::launch::sm80::{AccessPaths, GemmArgs};
use crate::plan::problem::{BiasMode, DType, GemmProblem};
use crate::plan::GemmStrides;

use crate::codegen::sm90::cuda_source;
use crate::plan::sm90::{Sm90Plan, Sm90Store};
use crate::plan::sm90_layouts::{TmaBox, TmaSwizzle};

/// An encoded `CUtensorMap`, passed to the kernel by value (`const __grid_constant__`).
#[repr(transparent)]
#[derive(Clone, Copy, Debug)]
pub struct TmaMap(cu::CUtensorMap);

// SAFETY: 128 bytes of plain data, copied into the kernel's parameter space at launch.
unsafe impl DeviceRepr for TmaMap {}

/// A K-major operand in global memory as TMA sees it: `rows x k` per batch, rows `ld`
/// elements apart, batches `batch_stride` elements apart.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TmaOperand {
    /// Device address.
    pub ptr: u64,
    /// Element type.
    pub dtype: DType,
    /// Contiguous extent (K).
    pub k: i64,
    /// Rows (M for A, N for B).
    pub rows: i64,
    /// Elements between rows.
    pub ld: i64,
    /// Batches.
    pub batch: i64,
    /// Elements between batches.
    pub batch_stride: i64,
}

/// Whether a row-major tensor of `elem_bytes` elements at `ptr`, rows `ld` apart and batches
/// `batch_stride` apart (`batch` of them), is one a tensor map can address: a 16-byte-aligned
/// start and 16-byte multiples for its strides (what [`encode_tma`] would otherwise refuse).
pub(crate) fn tma_addressable(
    ptr: u64,
    ld: i64,
    batch_stride: i64,
    batch: i64,
    elem_bytes: u64,
) -> bool {
    on_byte_grid(ptr, ld, batch_stride, batch, elem_bytes, 16)
}

/// Whether a 16-bit D (or aux) of `n` columns at `ptr`, rows `ld` apart and batches
/// `batch_stride` apart, can leave `plan`'s kernel as whole rows (the kernel's row store,
/// [`FLAG_ROW_STORE`]): its rows follow one another (`ld == n`), one tile holds all n columns,
/// the start and the batches are on 16 bytes (a warp's 16 rows, 32 n bytes, then start on 16
/// bytes too), and `outs` blocks of 64 such rows (D's, and aux's) fit the plan's store buffers
/// of a consumer; and the kernel has the path ([`Sm90Plan::row_store`]).
pub(crate) fn row_storable(
    plan: &Sm90Plan,
    (ptr, ld, batch_stride): (u64, i64, i64),
    (n, batch): (i64, i64),
    elem_bytes: u64,
    outs: i64,
) -> bool {
    let Some(st) = &plan.store else {
        return false;
    };
    plan.row_store()
        && elem_bytes == 2
        && n <= plan.cta_tile.1
        && ld == n
        && ptr % 16 == 0
        && (batch == 1 || (batch_stride as u64 * elem_bytes) % 16 == 0)
        && outs * 64 * n * elem_bytes as i64 <= st.buffers * st.tma.bytes
}

/// Whether such a tensor's start, rows and batches are all on multiples of `grid` bytes.
pub(crate) fn on_byte_grid(
    ptr: u64,
    ld: i64,
    batch_stride: i64,
    batch: i64,
    elem_bytes: u64,
    grid: u64,
) -> bool {
    ptr % grid == 0
        && (ld as u64 * elem_bytes) % grid == 0
        && (batch == 1 || (batch_stride as u64 * elem_bytes) % grid == 0)
}

/// TMA's element type for a 16-bit operand (the Hopper path loads no other).
fn tma_dtype(op: &'static str, dtype: DType) -> Result<cu::CUtensorMapDataType> {
    match dtype {
        DType::Bf16 => Ok(cu::CUtensorMapDataType::CU_TENSOR_MAP_DATA_TYPE_BFLOAT16),
        DType::F16 => Ok(cu::CUtensorMapDataType::CU_TENSOR_MAP_DATA_TYPE_FLOAT16),
        DType::F32 => Err(KernelError::invalid(
            op,
            "the Hopper path loads 16-bit operands",
        )),
    }
}

/// A tensor map's base address must be 16-byte aligned.
fn check_base(op: &'static str, operand: &'static str, ptr: u64) -> Result<()> {
    if ptr % 16 != 0 {
        return Err(KernelError::Misaligned {
            op,
            operand,
            msg: format!("address {ptr:#x} is not 16-byte aligned (TMA)"),
        });
    }
    Ok(())
}

/// The driver's swizzle mode of a box.
fn tma_swizzle(sw: TmaSwizzle) -> cu::CUtensorMapSwizzle {
    match sw {
        TmaSwizzle::None => cu::CUtensorMapSwizzle::CU_TENSOR_MAP_SWIZZLE_NONE,
        TmaSwizzle::B32 => cu::CUtensorMapSwizzle::CU_TENSOR_MAP_SWIZZLE_32B,
        TmaSwizzle::B64 => cu::CUtensorMapSwizzle::CU_TENSOR_MAP_SWIZZLE_64B,
        TmaSwizzle::B128 => cu::CUtensorMapSwizzle::CU_TENSOR_MAP_SWIZZLE_128B,
    }
}

/// Encodes the 3-D tensor map `{k, rows, batch}` that loads `bx` boxes of `o`.
///
/// Errors with [`KernelError::Misaligned`] when the address is not 16-byte aligned or a
/// stride is not a multiple of 16 bytes (what TMA requires).
pub fn encode_tma(name: &'static str, o: &TmaOperand, bx: &TmaBox) -> Result<TmaMap> {
    let op = "encode_tma";
    let eb = o.dtype.bytes();
    check_base(op, name, o.ptr)?;
    let row_bytes = o.ld * eb;
    let batch_bytes = if o.batch > 1 {
        o.batch_stride * eb
    } else {
        o.rows * row_bytes
    };
    for (what, v) in [
        ("leading dimension", row_bytes),
        ("batch stride", batch_bytes),
    ] {
        if v % 16 != 0 || v <= 0 || v >= 1 << 40 {
            return Err(KernelError::Misaligned {
                op,
                operand: name,
                msg: format!(
                    "{what} of {v} B: TMA strides are positive multiples of 16 B below 2^40"
                ),
            });
        }
    }
    let dtype = tma_dtype(op, o.dtype)?;
    let swizzle = tma_swizzle(bx.swizzle);
    let dims = [o.k as u64, o.rows as u64, o.batch as u64];
    let strides = [row_bytes as u64, batch_bytes as u64];
    let boxd = [bx.inner as u32, bx.outer as u32, 1];
    encode_tiled(name, dtype, o.ptr, &dims, &strides, &boxd, swizzle)
}

/// `cuTensorMapEncodeTiled` over `dims` (innermost first), `strides` in bytes for every
/// dimension but the first, boxes of `boxd` elements, every element of a box loaded, no
/// interleave, zeros outside the tensor; `name` goes into the error.
fn encode_tiled(
    name: &str,
    dtype: cu::CUtensorMapDataType,
    ptr: u64,
    dims: &[u64],
    strides: &[u64],
    boxd: &[u32],
    swizzle: cu::CUtensorMapSwizzle,
) -> Result<TmaMap> {
    debug_assert!(strides.len() + 1 == dims.len() && boxd.len() == dims.len());
    let elem_strides = vec![1u32; dims.len()];
    let mut map = std::mem::MaybeUninit::<cu::CUtensorMap>::zeroed();
    // SAFETY: every pointer is to a live slice of the rank the call is told (checked above);
    // the map is written by the driver.
    let r = unsafe {
        cu::cuTensorMapEncodeTiled(
            map.as_mut_ptr(),
            dtype,
            dims.len() as u32,
            ptr as *mut std::ffi::c_void,
            dims.as_ptr(),
            strides.as_ptr(),
            boxd.as_ptr(),
            elem_strides.as_ptr(),
            cu::CUtensorMapInterleave::CU_TENSOR_MAP_INTERLEAVE_NONE,
            swizzle,
            cu::CUtensorMapL2promotion::CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
            cu::CUtensorMapFloatOOBfill::CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE,
        )
    };
    r.result().map_err(|e| KernelError::Driver {
        op: "cuTensorMapEncodeTiled",
        msg: format!("{name}: {e:?} (dims {dims:?}, strides {strides:?} B, box {boxd:?})"),
    })?;
    // SAFETY: the driver wrote the map (the call succeeded); it was zeroed before anyway.
    Ok(TmaMap(unsafe { map.assume_init() }))
}

/// Encodes the 4-D im2col tensor map `{C, W, H, N}` of a channels-last x at `ptr` that
/// loads A for the implicit GEMM ([`crate::plan::Im2colTma`]): boxes of `rows` pixels by 64
/// channels, 128-byte swizzled as A's tiled box is, the pixels walked `(sw, sh)` apart over
/// the window corners the padding and the filter allow.
///
/// Strides are channels-last over `pitch` elements a pixel: the convolution's checks hold x to
/// channels-last strides on every dimension of size above 1 (or x is its staged copy), and a
/// dimension of size 1 is never stepped.
pub(crate) fn encode_tma_im2col(
    ptr: u64,
    dtype: DType,
    g: &crate::plan::Im2colTma,
    rows: i64,
) -> Result<TmaMap> {
    let op = "encode_tma_im2col";
    if let Some(why) = g.refusal() {
        return Err(KernelError::invalid(op, why));
    }
    check_base(op, "x", ptr)?;
    let dt = tma_dtype(op, dtype)?;
    let [n, c, h, w] = g.conv.x;
    let eb = dtype.bytes() as u64;
    // Channels past C (the last k-tile of a tap where C is not a multiple of 64) are outside
    // the map: TMA fills them with zeros.
    let pitch = g.pitch;
    let dims: [u64; 4] = [c as u64, w as u64, h as u64, n as u64];
    let strides: [u64; 3] = [
        pitch as u64 * eb,
        (w * pitch) as u64 * eb,
        (h * w * pitch) as u64 * eb,
    ];
    let (lo, hi) = g.corners();
    let lower: [i32; 2] = [lo[0] as i32, lo[1] as i32];
    let upper: [i32; 2] = [hi[0] as i32, hi[1] as i32];
    let elem_strides: [u32; 4] = [1, g.conv.stride.1 as u32, g.conv.stride.0 as u32, 1];
    let mut map = std::mem::MaybeUninit::<cu::CUtensorMap>::zeroed();
    // SAFETY: every pointer is to a live array of the length the rank implies; the map is
    // written by the driver.
    let r = unsafe {
        cu::cuTensorMapEncodeIm2col(
            map.as_mut_ptr(),
            dt,
            4,
            ptr as *mut std::ffi::c_void,
            dims.as_ptr(),
            strides.as_ptr(),
            lower.as_ptr(),
            upper.as_ptr(),
            64,
            rows as u32,
            elem_strides.as_ptr(),
            cu::CUtensorMapInterleave::CU_TENSOR_MAP_INTERLEAVE_NONE,
            cu::CUtensorMapSwizzle::CU_TENSOR_MAP_SWIZZLE_128B,
            cu::CUtensorMapL2promotion::CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
            cu::CUtensorMapFloatOOBfill::CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE,
        )
    };
    r.result().map_err(|e| KernelError::Driver {
        op: "cuTensorMapEncodeIm2col",
        msg: format!(
            "x: {e:?} (dims {dims:?}, strides {strides:?} B, corners {lower:?} {upper:?}, {rows} pixels)"
        ),
    })?;
    // SAFETY: the driver wrote the map (the call succeeded).
    Ok(TmaMap(unsafe { map.assume_init() }))
}

/// Encodes the 5-D tiled tensor map `{64, chunks / 8, planes, H, N}` of the window load's
/// phase-staged x at `ptr` ([`crate::plan::WindowTma`]): boxes of one strip, `strip_rows(bm)`
/// chunks of one plane of one input row as rows of 8 chunks (128 bytes), unswizzled (rows 16 bytes apart, as
/// the window's wgmma descriptors read them). Coordinates outside (rows in the padding, a
/// filter row past R, the zero strip) load zeros.
pub(crate) fn encode_tma_window(
    ptr: u64,
    dtype: DType,
    wd: &crate::plan::WindowTma,
    bm: i64,
) -> Result<TmaMap> {
    let op = "encode_tma_window";
    if let Some(why) = wd.refusal(bm) {
        return Err(KernelError::invalid(op, why));
    }
    check_base(op, "x (staged)", ptr)?;
    let dt = tma_dtype(op, dtype)?;
    let [n, _, h, _] = wd.conv.x;
    let (planes, chunks) = (wd.planes(), wd.chunks());
    let cb = crate::plan::window::CHUNK_BYTES as u64;
    // A box row is 8 chunks (128 bytes): chunks() and strip_rows() are whole box rows.
    let per = crate::plan::window::BOX_CHUNKS;
    let dims: [u64; 5] = [
        (per * crate::plan::window::CHUNK_CHANNELS) as u64,
        (chunks / per) as u64,
        planes as u64,
        h as u64,
        n as u64,
    ];
    let row = chunks as u64 * cb;
    let strides: [u64; 4] = [
        per as u64 * cb,
        row,
        row * planes as u64,
        row * (planes * h) as u64,
    ];
    let boxd: [u32; 5] = [
        (per * crate::plan::window::CHUNK_CHANNELS) as u32,
        (wd.strip_rows(bm) / per) as u32,
        1,
        1,
        1,
    ];
    encode_tiled(
        "staged x",
        dt,
        ptr,
        &dims,
        &strides,
        &boxd,
        cu::CUtensorMapSwizzle::CU_TENSOR_MAP_SWIZZLE_NONE,
    )
}

/// The tensor map A's loads read, as the plan loads A: the convolution's x through TMA's
/// im2col mode, its phase-staged copy through the window load's strips, or `a` (the operand
/// of the launch's region: `a.ptr` at its first row) as tiled boxes. The convolution's maps
/// address x from its first pixel, so they take the whole product in one region
/// (`region_start` 0).
pub(crate) fn encode_a(
    plan: &Sm90Plan,
    a: &TmaOperand,
    region_start: i64,
    op: &'static str,
) -> Result<TmaMap> {
    if (plan.im2col.is_some() || plan.window.is_some()) && region_start != 0 {
        return Err(KernelError::invalid(
            op,
            "a convolution's load of A (im2col or window) runs the whole product in one launch",
        ));
    }
    match (&plan.im2col, &plan.window) {
        (Some(g), _) if g.halo.is_some() => encode_tma_halo(a.ptr, a.dtype, g),
        (Some(g), _) => encode_tma_im2col(a.ptr, a.dtype, g, plan.a.load_box().outer),
        (_, Some(wd)) => encode_tma_window(a.ptr, a.dtype, wd, plan.cta_tile.0),
        _ => encode_tma("A", a, &plan.a.load_box()),
    }
}

/// Encodes the 4-D tiled tensor map `{C, W, H, N}` of a packed channels-last x at `ptr` from
/// which the halo load takes its strips ([`crate::plan::Halo`]): boxes of 64 channels by the
/// strip's pixels by the tile's output rows, 128-byte swizzled as A's tiled box is; pixels
/// and rows outside x (the padding) read as zeros.
pub(crate) fn encode_tma_halo(
    ptr: u64,
    dtype: DType,
    g: &crate::plan::Im2colTma,
) -> Result<TmaMap> {
    let op = "encode_tma_halo";
    let Some(h) = g.halo else {
        return Err(KernelError::invalid(op, "the plan has no halo load"));
    };
    if let Some(why) = h.refusal(&g.conv, g.pitch) {
        return Err(KernelError::invalid(op, why));
    }
    check_base(op, "x", ptr)?;
    let dt = tma_dtype(op, dtype)?;
    let [n, c, hh, w] = g.conv.x;
    let eb = dtype.bytes() as u64;
    let dims = [c as u64, w as u64, hh as u64, n as u64];
    let strides = [c as u64 * eb, (w * c) as u64 * eb, (hh * w * c) as u64 * eb];
    let boxd = [64u32, h.box_w(&g.conv) as u32, h.rows() as u32, 1];
    encode_tiled(
        "x",
        dt,
        ptr,
        &dims,
        &strides,
        &boxd,
        tma_swizzle(TmaSwizzle::B128),
    )
}

/// An epilogue tensor's tensor map (D, aux, a staged input: `o` as the kernel problem's
/// `{n, m, batch}`, boxes of `bx`): [`encode_tma`], or with the halo load the 4-D view
/// `{n, Q, P, N}` of the convolution's output rows, whose bounds drop the virtual rows that
/// are never stored.
pub(crate) fn encode_epilogue_tma(
    plan: &Sm90Plan,
    name: &'static str,
    o: &TmaOperand,
    bx: &TmaBox,
) -> Result<TmaMap> {
    let Some((h, g)) = plan.halo() else {
        return encode_tma(name, o, bx);
    };
    let op = "encode_tma";
    let [n, _, _, _] = g.x;
    let (pp, q) = g.pq;
    if o.batch != 1 || o.rows != n * pp * q {
        return Err(KernelError::invalid(
            op,
            format!(
                "{name}: the halo load's output is the convolution's N·P·Q = {} rows, one batch; got {} rows, {} batches",
                n * pp * q,
                o.rows,
                o.batch
            ),
        ));
    }
    debug_assert!(h.pitch >= q);
    check_base(op, name, o.ptr)?;
    let eb = o.dtype.bytes();
    let row = o.ld * eb;
    if row % 16 != 0 || row <= 0 {
        return Err(KernelError::Misaligned {
            op,
            operand: name,
            msg: format!("row stride of {row} B: TMA strides are positive multiples of 16 B"),
        });
    }
    let dims = [o.k as u64, q as u64, pp as u64, n as u64];
    let strides = [row as u64, (q * row) as u64, (pp * q * row) as u64];
    let boxd = [bx.inner as u32, bx.outer as u32, 1, 1];
    let swizzle = tma_swizzle(bx.swizzle);
    encode_tiled(
        name,
        tma_dtype(op, o.dtype)?,
        o.ptr,
        &dims,
        &strides,
        &boxd,
        swizzle,
    )
}

/// The tensor map of B (`b` as the launch gives it): with the window load, one batch (the
/// kernel loads the one filter at batch 0 for every batch, whose stride is 0).
pub(crate) fn encode_b(plan: &Sm90Plan, b: &TmaOperand) -> Result<TmaMap> {
    let mut b = *b;
    if plan.window.is_some() {
        b.batch = 1;
    }
    // A staged filter spans the rows up to its tile columns' end (zeros past N): the map
    // covers them, so that no box of B runs past it.
    if let Some(g) = &plan.im2col {
        if b.rows == plan.kernel_problem().n {
            b.rows = b.rows.max(g.filter_rows);
        }
    }
    encode_tma("B", &b, &plan.b.load_box())
}

/// The kernel's parameter block; mirrors `TesseraSm90Params` in `kernels/cuda/sm90_gemm.cuh`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Sm90Params {
    pub(crate) d: u64,
    pub(crate) c: u64,
    pub(crate) bias: u64,
    pub(crate) aux: u64,
    pub(crate) ldc: i64,
    pub(crate) ldd: i64,
    pub(crate) ldaux: i64,
    pub(crate) batch_c: i64,
    pub(crate) batch_d: i64,
    pub(crate) batch_bias: i64,
    pub(crate) batch_aux: i64,
    pub(crate) m: i32,
    pub(crate) n: i32,
    pub(crate) k: i32,
    pub(crate) batch: i32,
    pub(crate) tiles_m: i32,
    pub(crate) tiles_n: i32,
    pub(crate) group_m: i32,
    pub(crate) alpha: f32,
    pub(crate) beta: f32,
    pub(crate) act: i32,
    pub(crate) bias_mode: i32,
    pub(crate) out_dtype: i32,
    pub(crate) flags: i32,
    pub(crate) sk_tiles: i32,
    pub(crate) sk_waves: i32,
    pub(crate) sk_work: u64,
    pub(crate) sk_flags: u64,
    /// A and B for the cp.async load (the operands A's and B's tensor maps describe), strides
    /// in elements.
    pub(crate) a: u64,
    pub(crate) b: u64,
    pub(crate) lda: i64,
    pub(crate) ldb: i64,
    pub(crate) batch_a: i64,
    pub(crate) batch_b: i64,
    /// Stream-K: the parts a tile where a single wave of whole parts is numbered part by part
    /// ([`crate::plan::policy::stream_k_part_order`]), else 0.
    pub(crate) sk_parts: i32,
}

// SAFETY: plain-old-data, `#[repr(C)]`, mirrored field by field on the device.
unsafe impl DeviceRepr for Sm90Params {}

const FLAG_STORE_PAIR: i32 = 1;
/// The kernel's `kSm90FlagTmaStore`: D (and aux) go out by TMA from the plan's store buffers.
pub(crate) const FLAG_TMA_STORE: i32 = 2;
/// The kernel's `kSm90FlagRowStore` (with [`FLAG_TMA_STORE`]): D (and aux) go out from the
/// store buffers as whole rows by bulk copies, no tensor map ([`row_storable`]).
pub(crate) const FLAG_ROW_STORE: i32 = 4;

/// Clusters of `plan` the device can hold at once (`cuOccupancyMaxActiveClusters`, which takes
/// the cluster shape compiled into the kernel), or `None` when the driver does not say.
fn max_active_clusters(rt: &Runtime, func: &CudaFunction, plan: &Sm90Plan) -> Option<i64> {
    let c = plan.cluster as u32;
    let config = cu::CUlaunchConfig {
        gridDimX: c * (rt.sm_count() as u32 / c).max(1),
        gridDimY: 1,
        gridDimZ: 1,
        blockDimX: plan.threads as u32,
        blockDimY: 1,
        blockDimZ: 1,
        sharedMemBytes: plan.smem_bytes as u32,
        hStream: std::ptr::null_mut(),
        attrs: std::ptr::null_mut(),
        numAttrs: 0,
    };
    let mut n: std::ffi::c_int = 0;
    // SAFETY: `n` and `config` outlive the call; `config` names no attributes; the function
    // handle is alive (owned by `func`), and its dynamic shared memory limit was raised when
    // it was loaded.
    let r = unsafe { cu::cuOccupancyMaxActiveClusters(&mut n, func.cu_function(), &config) };
    match r.result() {
        Ok(()) if n > 0 => Some(n as i64),
        _ => None,
    }
}

/// A compiled Hopper plan.
pub struct Sm90Kernel {
    plan: Sm90Plan,
    func: CudaFunction,
    /// Persistent CTAs at most (the device's SM count unless set with [`Sm90Kernel::set_max_ctas`]).
    max_ctas: i64,
    /// Clusters of the plan that can be resident at once (the driver's occupancy answer),
    /// when the plan has clusters and the driver gave one.
    max_clusters: Option<i64>,
    /// Launch as a programmatic dependent of the kernel before it on the stream (see
    /// [`Sm90Kernel::set_dependent_launch`]).
    dependent_launch: bool,
    /// The stream-K workspace (the partial sums, then one flag word per CTA and consumer,
    /// zeroed), allocated at the first launch that splits tiles.
    sk_work: std::sync::OnceLock<CudaSlice<u8>>,
    /// The device's SM count.
    sms: i64,
    /// The tiles every launch splits along K ([`Sm90Plan::stream_k_tiles`] on the grid and
    /// the device's SMs), worked out whenever the grid is set: the planner's decision writes
    /// out its reasons, which a launch need not pay for.
    sk_split: i64,
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

fn check_ld(op: &'static str, name: &str, ld: i64, min: i64) -> Result<()> {
    if ld < min {
        return Err(KernelError::invalid(
            op,
            format!("{name} = {ld} is smaller than the {min} it must cover"),
        ));
    }
    Ok(())
}

impl Sm90Kernel {
    /// Compiles `plan` for the runtime's device, which must be sm_90a, as
    /// [`Sm90Plan::compiled_for`] its SM count ([`Sm90Kernel::plan`] is that plan).
    pub fn new(rt: &Runtime, plan: &Sm90Plan) -> Result<Sm90Kernel> {
        let plan = plan.compiled_for(rt.sm_count() as i64);
        Sm90Kernel::from_source(rt, &plan, &cuda_source(&plan))
    }

    /// Compiles `source` (the plan's kernel, or the plan's kernel with some other epilogue,
    /// e.g. [`crate::epilogue::cuda::sm90_tree_source`]) for the runtime's device, which must
    /// be sm_90a.
    pub fn from_source(rt: &Runtime, plan: &Sm90Plan, source: &str) -> Result<Sm90Kernel> {
        if rt.arch() != Arch::Sm90a {
            return Err(KernelError::UnsupportedArch {
                op: "Sm90Kernel::new",
                arch: rt.arch().to_string(),
                msg: "the Hopper path needs sm_90a (wgmma, TMA)".into(),
            });
        }
        let func = rt.function(source, &plan.kernel_name(), "tessera_gemm", plan.smem_bytes)?;
        let max_clusters = if plan.cluster > 1 {
            // The kernel's pairs come from `__cluster_dims__`: a module without it would run
            // every CTA as rank 0 of a cluster of one, waiting forever for a partner.
            let width = func
                .get_attribute(cu::CUfunction_attribute::CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_WIDTH)
                .map_err(driver_err("cuFuncGetAttribute(REQUIRED_CLUSTER_WIDTH)"))?;
            if width as i64 != plan.cluster {
                return Err(KernelError::Driver {
                    op: "Sm90Kernel::new",
                    msg: format!(
                        "{}: the module's cluster width is {width}, the plan's {}",
                        plan.kernel_name(),
                        plan.cluster
                    ),
                });
            }
            max_active_clusters(rt, &func, plan)
        } else {
            None
        };
        let sms = rt.sm_count() as i64;
        let mut k = Sm90Kernel {
            plan: plan.clone(),
            func,
            max_ctas: sms,
            max_clusters,
            dependent_launch: true,
            sk_work: std::sync::OnceLock::new(),
            sms,
            sk_split: 0,
        };
        k.set_max_ctas(sms);
        Ok(k)
    }

    /// The compiled kernel.
    pub(crate) fn func(&self) -> &CudaFunction {
        &self.func
    }

    /// CTAs of the persistent grid: one per tile (per cluster tile and CTA of the cluster with
    /// a cluster), at most the cap of [`Sm90Kernel::set_max_ctas`] and, with a cluster, at
    /// most the clusters the device can hold at once; whole clusters, at least one.
    ///
    /// With a cluster of 2 and the default cap (the SM count), the grid is limited by how many
    /// pairs fit side by side in the GPCs, which can be fewer than half the SMs.
    pub fn grid_ctas(&self) -> i64 {
        self.plan.persistent_ctas(self.max_ctas, self.max_clusters)
    }

    /// The plan.
    pub fn plan(&self) -> &Sm90Plan {
        &self.plan
    }

    /// Caps the persistent grid at `n` CTAs (at least 1; with a cluster, rounded down to whole
    /// clusters, at least one).
    pub fn set_max_ctas(&mut self, n: i64) {
        self.max_ctas = n.max(1);
        self.sk_split = self.plan.stream_k_tiles(self.grid_ctas(), self.sms);
    }

    /// Whether launches are programmatic dependent launches (the default): the kernel may be
    /// scheduled before the kernel ahead of it on the stream has made its writes visible, and
    /// waits in the kernel (`griddepcontrol.wait`, before any global access) until they are.
    /// This shortens the gap between back-to-back kernels; the results are the same either
    /// way. Off, the launch waits for the kernel before it as any launch does.
    pub fn set_dependent_launch(&mut self, on: bool) {
        self.dependent_launch = on;
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
        crate::launch::sm80::check_row_major_d(&self.plan.problem, args, |a| {
            self.check_kernel_args(a)
        })
    }

    /// [`Sm90Kernel::check`] on the arguments of the kernel problem.
    fn check_kernel_args(&self, args: &GemmArgs) -> Result<AccessPaths> {
        let op = "sm90 gemm";
        let p: &GemmProblem = &self.plan.kernel_problem();
        let s = &args.strides;
        check_ld(op, "lda", s.lda, p.k)?;
        check_ld(op, "ldb", s.ldb, p.k)?;
        check_ld(op, "ldd", s.ldd, p.n)?;
        // A is an M x K matrix, or (im2col) the convolution's x itself, N·H·W·C elements.
        let a_need = match (&self.plan.im2col, &self.plan.window) {
            (Some(g), _) => g.extent(),
            (_, Some(wd)) => wd.staged_elems().unwrap_or(i64::MAX),
            _ => GemmStrides::extent(p.batch, s.batch_a, p.m, s.lda, p.k),
        };
        need(op, "A", &args.a, p.input, a_need)?;
        need(
            op,
            "B",
            &args.b,
            p.input,
            GemmStrides::extent(p.batch, s.batch_b, p.n, s.ldb, p.k),
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
                check_ld(op, "ldc", s.ldc, p.n)?;
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
                check_ld(op, "ldaux", s.ldaux, p.n)?;
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
        let pair_bytes = 2 * p.output.bytes() as u64;
        let pair_ok = |buf: Option<Mem>, ld: i64, batch: i64| match buf {
            None => true,
            Some(b) => b.ptr % pair_bytes == 0 && ld % 2 == 0 && (p.batch == 1 || batch % 2 == 0),
        };
        let store_pair = pair_ok(Some(args.d), s.ldd, s.batch_d)
            && (e.beta == 0.0 || pair_ok(args.c, s.ldc, s.batch_c))
            && (!e.aux || pair_ok(args.aux, s.ldaux, s.batch_aux));
        // TMA stores D (and aux) when the plan has the TMA-store epilogue and the addresses
        // and strides are what a tensor map takes (16-byte multiples).
        let eb = p.output.bytes() as u64;
        let tma_ok =
            |buf: Mem, ld: i64, batch: i64| tma_addressable(buf.ptr, ld, batch, p.batch, eb);
        let tma_store = self.plan.store.is_some()
            && tma_ok(args.d, s.ldd, s.batch_d)
            && (!e.aux || args.aux.is_some_and(|a| tma_ok(a, s.ldaux, s.batch_aux)));
        // Else whole rows, where D's rows are contiguous and within one tile.
        let outs = if e.aux { 2 } else { 1 };
        let rows_ok = |buf: Mem, ld: i64, batch: i64| {
            row_storable(&self.plan, (buf.ptr, ld, batch), (p.n, p.batch), eb, outs)
        };
        let row_store = !tma_store
            && rows_ok(args.d, s.ldd, s.batch_d)
            && (!e.aux || args.aux.is_some_and(|a| rows_ok(a, s.ldaux, s.batch_aux)));
        Ok(AccessPaths {
            a_vec: true,
            b_vec: true,
            store_pair,
            tma_store,
            row_store,
        })
    }

    /// Checks the arguments, encodes the TMA maps and launches on `cx.stream`. `cx.work` is the
    /// stream-K workspace ([`Sm90Kernel::workspace_bytes`], zeroed before its first use), or
    /// `None` for the kernel's own (allocated on the runtime's stream at the first launch that
    /// splits).
    pub fn launch(&self, cx: LaunchCtx<'_>, args: &GemmArgs) -> Result<AccessPaths> {
        let (paths, maps, params) = self.prepare(cx, args)?;
        self.launch_raw(
            cx.stream,
            [
                &maps[0], &maps[1], &maps[2], &maps[3], &maps[4], &maps[5], &maps[6],
            ],
            &params,
            None::<&Sm90Params>,
        )?;
        Ok(paths)
    }

    /// Everything [`Sm90Kernel::launch`] does before the launch call: the checks, the tensor
    /// maps and the parameter block (the launch overhead benchmark times the call alone).
    pub(crate) fn prepare(
        &self,
        cx: LaunchCtx<'_>,
        args: &GemmArgs,
    ) -> Result<(AccessPaths, [TmaMap; 7], Sm90Params)> {
        let (args, paths) = self.check_exchanged(args)?;
        let args = &args;
        let p = &self.plan.kernel_problem();
        let s = &args.strides;
        let e = p.epilogue;
        let tma_a = encode_a(
            &self.plan,
            &TmaOperand {
                ptr: args.a.ptr,
                dtype: p.input,
                k: p.k,
                rows: p.m,
                ld: s.lda,
                batch: p.batch,
                batch_stride: s.batch_a,
            },
            0,
            "sm90 gemm",
        )?;
        let tma_b = encode_b(
            &self.plan,
            &TmaOperand {
                ptr: args.b.ptr,
                dtype: p.input,
                k: p.k,
                rows: p.n,
                ld: s.ldb,
                batch: p.batch,
                batch_stride: s.batch_b,
            },
        )?;
        let (tiles_m, tiles_n) = self.plan.grid_tiles();
        // The epilogue's terms are compiled into the kernel; only the alignment is run-time.
        let mut flags = if paths.store_pair { FLAG_STORE_PAIR } else { 0 };
        // D's and aux's tensor maps (`{n, m, batch}`, the store box), or A's as placeholders
        // the kernel does not read when it stores without TMA (or has no aux).
        let out_map = |name: &'static str, buf: Mem, ld: i64, batch_stride: i64, st: &Sm90Store| {
            encode_epilogue_tma(
                &self.plan,
                name,
                &TmaOperand {
                    ptr: buf.ptr,
                    dtype: p.output,
                    k: p.n,
                    rows: p.m,
                    ld,
                    batch: p.batch,
                    batch_stride,
                },
                &st.warp_tma,
            )
        };
        let (tma_d, tma_aux) = match &self.plan.store {
            Some(st) if paths.tma_store => {
                flags |= FLAG_TMA_STORE;
                let d = out_map("D", args.d, s.ldd, s.batch_d, st)?;
                let aux = match args.aux {
                    Some(a) if e.aux => out_map("aux", a, s.ldaux, s.batch_aux, st)?,
                    _ => tma_a,
                };
                (d, aux)
            }
            // Whole rows by bulk copies: no maps.
            Some(_) if paths.row_store => {
                flags |= FLAG_TMA_STORE | FLAG_ROW_STORE;
                (tma_a, tma_a)
            }
            _ => (tma_a, tma_a),
        };
        if self.plan.halo().is_some() && !paths.tma_store {
            return Err(KernelError::invalid(
                "sm90 gemm",
                "the halo load stores D through TMA (its maps drop the rows never stored), but D or aux is not on TMA's 16-byte grid",
            ));
        }
        let params = Sm90Params {
            d: args.d.ptr,
            c: if e.beta != 0.0 {
                args.c.map(|c| c.ptr).unwrap_or(0)
            } else {
                0
            },
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
            ldc: s.ldc,
            ldd: s.ldd,
            ldaux: s.ldaux,
            batch_c: s.batch_c,
            batch_d: s.batch_d,
            batch_bias: s.batch_bias,
            batch_aux: s.batch_aux,
            m: self.plan.kernel_rows() as i32,
            n: p.n as i32,
            k: p.k as i32,
            batch: p.batch as i32,
            tiles_m: tiles_m as i32,
            tiles_n: tiles_n as i32,
            group_m: self.plan.group_m as i32,
            alpha: e.alpha,
            beta: e.beta,
            act: e.act.code(),
            bias_mode: e.bias.code(),
            out_dtype: p.output.code(),
            flags,
            a: args.a.ptr,
            b: args.b.ptr,
            lda: s.lda,
            ldb: s.ldb,
            batch_a: s.batch_a,
            batch_b: s.batch_b,
            ..Sm90Params::default()
        };
        let params = self.with_stream_k(cx, params)?;
        Ok((
            paths.in_terms_of(&self.plan.problem),
            [tma_a, tma_b, tma_d, tma_aux, tma_a, tma_a, tma_a],
            params,
        ))
    }

    /// Bytes of the stream-K workspace a launch of this kernel may need: `sm_count x
    /// consumers` slots of `64 x BN` fp32 partial sums, then as many flag words; 0 when the
    /// plan never splits tiles.
    pub fn workspace_bytes(&self, sms: i64) -> usize {
        if !self.plan.stream_k {
            return 0;
        }
        let slots = (sms * self.plan.consumers) as usize;
        slots * (64 * self.plan.cta_tile.1 as usize * 4 + 4)
    }

    /// `params` with the stream-K split of this launch ([`Sm90Plan::stream_k_tiles`]) and its
    /// workspace `work` (or the kernel's own, allocated zeroed at the first launch that
    /// splits): the partial sums, then the flag words, zero between launches (the kernel
    /// clears each flag it consumed).
    pub(crate) fn with_stream_k(
        &self,
        cx: LaunchCtx<'_>,
        mut params: Sm90Params,
    ) -> Result<Sm90Params> {
        let rt = cx.rt;
        let sms = rt.sm_count() as i64;
        let grid = self.grid_ctas();
        let tiles = self.sk_split;
        if tiles == 0 {
            return Ok(params);
        }
        let slots = (sms * self.plan.consumers) as usize;
        let slot_bytes = (64 * self.plan.cta_tile.1 * 4) as usize;
        let base = match cx.work {
            Some(w) => w,
            None => {
                if self.sk_work.get().is_none() {
                    let buf = rt
                        .stream()
                        .alloc_zeros::<u8>(self.workspace_bytes(sms))
                        .map_err(driver_err("cuMemAlloc (stream-K workspace)"))?;
                    let _ = self.sk_work.set(buf);
                }
                let Some(w) = self.sk_work.get() else {
                    return Ok(params);
                };
                let (base, _sync) = w.device_ptr(rt.stream());
                base
            }
        };
        params.sk_tiles = tiles as i32;
        params.sk_waves = ((self.plan.total_tiles() - tiles) / grid) as i32;
        params.sk_parts = self.plan.sk_parts(grid, tiles) as i32;
        params.sk_work = base;
        params.sk_flags = base + (slots * slot_bytes) as u64;
        Ok(params)
    }

    /// The persistent launch of checked arguments: the TMA maps of A, B, D, aux and the tree
    /// epilogue's staged C, residual and aux_in (all but A and B read only with the TMA-store
    /// flag, and only those the kernel has), the parameter block and an optional last
    /// parameter (the tree epilogue's arguments).
    pub(crate) fn launch_raw<T: DeviceRepr>(
        &self,
        stream: &CudaStream,
        maps: [&TmaMap; 7],
        params: &Sm90Params,
        extra: Option<&T>,
    ) -> Result<()> {
        let total = self.plan.total_tiles();
        if total > i32::MAX as i64 {
            return Err(KernelError::invalid(
                "sm90 gemm",
                format!("{total} tiles exceed the 32-bit tile index"),
            ));
        }
        // With a cluster, `__cluster_dims__` in the kernel makes consecutive CTAs pairs; the
        // grid is a multiple of the cluster size.
        let grid = self.grid_ctas();
        let mut args = [
            param(maps[0]),
            param(maps[1]),
            param(maps[2]),
            param(maps[3]),
            param(maps[4]),
            param(maps[5]),
            param(maps[6]),
            param(params),
            std::ptr::null_mut(),
        ];
        let n = match extra {
            Some(x) => {
                args[8] = param(x);
                9
            }
            None => 8,
        };
        // SAFETY: the callers (`launch`, the tree launcher) checked that every buffer covers
        // what the kernel reads and writes for these strides, types and extents; the TMA maps
        // describe A and B within those buffers; the parameter blocks mirror the device
        // structs and match the compiled kernel's signature.
        // A dependent launch is sound because the kernel waits on `griddepcontrol.wait` before
        // its first global access (the invariant stated at its entry in sm90_gemm.cuh).
        unsafe {
            launch_kernel_as(
                self.dependent_launch,
                &self.func,
                stream,
                (grid as u32, 1, 1),
                (self.plan.threads as u32, 1, 1),
                self.plan.smem_bytes as u32,
                &mut args[..n],
                "launch tessera_gemm (sm90)",
            )
        }
    }
}

/// A compiled GEMM of either path ([`crate::plan::GemmPath`]): the sm80-class kernel or the Hopper
/// one, launched alike.
pub enum PathKernel {
    /// The sm80-class path.
    Sm80(Box<crate::launch::sm80::GemmKernel>),
    /// The sm_90a path.
    Hopper(Box<Sm90Kernel>),
}

impl PathKernel {
    /// Compiles the planned `path` for the runtime's device.
    pub fn new(rt: &Runtime, path: &crate::plan::GemmPath) -> Result<PathKernel> {
        Ok(match path {
            crate::plan::GemmPath::Sm80(plan) => {
                PathKernel::Sm80(Box::new(crate::launch::sm80::GemmKernel::new(rt, plan)?))
            }
            crate::plan::GemmPath::Hopper(plan) => {
                PathKernel::Hopper(Box::new(Sm90Kernel::new(rt, plan)?))
            }
        })
    }

    /// The problem the kernel was planned for.
    pub fn problem(&self) -> &GemmProblem {
        match self {
            PathKernel::Sm80(k) => &k.plan().problem,
            PathKernel::Hopper(k) => &k.plan().problem,
        }
    }

    /// Checks the arguments and launches on `stream` (`work`: see [`Sm90Kernel::launch`]).
    pub fn launch(&self, cx: LaunchCtx<'_>, args: &GemmArgs) -> Result<AccessPaths> {
        match self {
            PathKernel::Sm80(k) => k.launch(cx.stream, args),
            PathKernel::Hopper(k) => k.launch(cx, args),
        }
    }
}
