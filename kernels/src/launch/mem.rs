//! A checked device span: the address, length and element type the launchers address and
//! check operands by, whatever owns the memory (a cudarc slice, a view, a raw pointer).

use std::ffi::c_void;

use cudarc::driver::{CudaFunction, CudaStream};

use crate::error::Result;
use crate::launch::runtime::driver_err;
use crate::plan::problem::DType;

/// `len` elements of `dtype` at device address `ptr`. A bit mask is a span of 32-bit words
/// with dtype fp32 (`len` words).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Mem {
    /// Device address of the first element.
    pub ptr: u64,
    /// Elements.
    pub len: usize,
    /// Element type.
    pub dtype: DType,
}

/// Launches `func` on `stream` with the kernel parameters `params` (pointers to each
/// argument's bytes, in the kernel's parameter order), without allocating.
///
/// # Safety
/// `params` must match the kernel's signature argument for argument, and every address the
/// kernel forms from them must be valid for the accesses it makes.
pub(crate) unsafe fn launch_kernel(
    func: &CudaFunction,
    stream: &CudaStream,
    grid: (u32, u32, u32),
    block: (u32, u32, u32),
    smem_bytes: u32,
    params: &mut [*mut c_void],
    what: &'static str,
) -> Result<()> {
    launch_kernel_as(false, func, stream, grid, block, smem_bytes, params, what)
}

/// [`launch_kernel`], or with `dependent` a programmatic dependent launch: the grid may be
/// scheduled before the kernel ahead of it on the stream has made its writes visible (as
/// soon as that kernel has completed, or earlier where it signals
/// `griddepcontrol.launch_dependents`), so the launch gap between the two overlaps the end of
/// the first.
///
/// # Safety
/// As [`launch_kernel`], and with `dependent` every thread of `func` must execute
/// `griddepcontrol.wait` before its first access to global memory: nothing else orders it
/// after the kernel before it. (Or, where the kernel before it was launched in stream order,
/// so that everything before that kernel is done when this grid starts, its accesses must
/// touch nothing that kernel reads or writes, and it must execute `griddepcontrol.wait`
/// before it ends, so that its completion implies that kernel's.)
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn launch_kernel_as(
    dependent: bool,
    func: &CudaFunction,
    stream: &CudaStream,
    grid: (u32, u32, u32),
    block: (u32, u32, u32),
    smem_bytes: u32,
    params: &mut [*mut c_void],
    what: &'static str,
) -> Result<()> {
    use cudarc::driver::sys as cu;
    stream
        .context()
        .bind_to_thread()
        .map_err(driver_err("cuCtxSetCurrent"))?;
    if !dependent {
        return cudarc::driver::result::launch_kernel(
            func.cu_function(),
            grid,
            block,
            smem_bytes,
            stream.cu_stream(),
            params,
        )
        .map_err(driver_err(what));
    }
    // SAFETY (of the zeroed value): the attribute value is a plain C union; the one field
    // read for this attribute id is set below.
    let mut attr: cu::CUlaunchAttribute = std::mem::zeroed();
    attr.id = cu::CUlaunchAttributeID::CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
    attr.value.programmaticStreamSerializationAllowed = 1;
    let config = cu::CUlaunchConfig {
        gridDimX: grid.0,
        gridDimY: grid.1,
        gridDimZ: grid.2,
        blockDimX: block.0,
        blockDimY: block.1,
        blockDimZ: block.2,
        sharedMemBytes: smem_bytes,
        hStream: stream.cu_stream(),
        attrs: &mut attr,
        numAttrs: 1,
    };
    cu::cuLaunchKernelEx(
        &config,
        func.cu_function(),
        params.as_mut_ptr(),
        std::ptr::null_mut(),
    )
    .result()
    .map_err(driver_err(what))
}

/// The parameter pointer of one kernel argument.
pub(crate) fn param<T>(x: &T) -> *mut c_void {
    x as *const T as *mut c_void
}

/// Where a launch goes: the device runtime (SM count, the kernels' own workspaces), the stream,
/// and the caller's workspace, if any (see [`crate::launch::sm90::Sm90Kernel::launch`]).
#[derive(Clone, Copy)]
pub struct LaunchCtx<'a> {
    /// The device.
    pub rt: &'a crate::launch::runtime::Runtime,
    /// The stream the launch is queued on.
    pub stream: &'a CudaStream,
    /// The stream-K workspace (device address), or `None` for the kernel's own.
    pub work: Option<u64>,
}
