//! cuDNN's convolution, the comparator of `tessera bench conv`: the legacy API through
//! cudarc's bindings, libcudnn loaded at run time (on the GPU host it ships inside PyTorch's
//! wheels: `tools/gpu-visit.sh` puts its folder on `LD_LIBRARY_PATH`).
//!
//! Channels-last tensors (NHWC, KRSC filters), fp32 compute with tensor-core math; the
//! algorithm is chosen by timing every one cuDNN offers on the real buffers
//! (`cudnnFindConvolutionForwardAlgorithmEx`), as PyTorch's `cudnn.benchmark = True` does.
//! The fused comparator is `cudnnConvolutionBiasActivationForward`:
//! `y = relu(conv(x, w) + z + bias)`.

use std::ffi::c_void;

use cudarc::cudnn::{result, sys};
use cudarc::driver::CudaStream;

use crate::conv::ConvSpec;
use crate::error::{KernelError, Result};
use crate::plan::problem::DType;

fn err(op: &'static str) -> impl FnOnce(result::CudnnError) -> KernelError {
    move |e| KernelError::Blas {
        op,
        msg: format!("cuDNN: {:?}", e.0),
    }
}

/// cuDNN's version (e.g. 91900 for 9.19.0), or why it cannot be loaded.
pub fn version() -> Result<usize> {
    // cudarc panics when asked for a symbol of a library it cannot load; ask first.
    if !unsafe { sys::is_culib_present() } {
        return Err(KernelError::Blas {
            op: "cudnn",
            msg: format!(
                "libcudnn not found (searched {:?}); put its folder on LD_LIBRARY_PATH (on the GPU host: python3 -c \"import nvidia.cudnn, os; print(os.path.dirname(nvidia.cudnn.__file__))\", then its lib/)",
                cudarc::get_lib_name_candidates("cudnn")
            ),
        });
    }
    Ok(result::get_version())
}

fn data_type(t: DType) -> sys::cudnnDataType_t {
    match t {
        DType::Bf16 => sys::cudnnDataType_t::CUDNN_DATA_BFLOAT16,
        DType::F16 => sys::cudnnDataType_t::CUDNN_DATA_HALF,
        DType::F32 => sys::cudnnDataType_t::CUDNN_DATA_FLOAT,
    }
}

/// A convolution planned with cuDNN on a stream: its handle, descriptors, the algorithms
/// found fastest for the plain and the fused call, and the workspace size they need.
pub struct CudnnConv {
    handle: sys::cudnnHandle_t,
    x: sys::cudnnTensorDescriptor_t,
    y: sys::cudnnTensorDescriptor_t,
    bias: sys::cudnnTensorDescriptor_t,
    w: sys::cudnnFilterDescriptor_t,
    conv: sys::cudnnConvolutionDescriptor_t,
    act: sys::cudnnActivationDescriptor_t,
    /// The plain call's algorithm and its workspace bytes.
    pub algo: (sys::cudnnConvolutionFwdAlgo_t, usize),
}

fn i32_of(v: i64, what: &str) -> Result<i32> {
    i32::try_from(v).map_err(|_| KernelError::Blas {
        op: "cudnn",
        msg: format!("{what} = {v} exceeds cuDNN's 32-bit descriptors"),
    })
}

impl CudnnConv {
    /// Describes `spec` (symmetric padding: cuDNN's legacy descriptor has one pad per
    /// dimension) on `stream`. `x`, `w`, `y` (device addresses of the spec's tensors) and a
    /// workspace of `ws_bytes` at `ws` are used to time cuDNN's algorithms.
    ///
    /// # Safety
    /// The addresses must be valid device memory of `stream`'s context for the tensors'
    /// extents.
    pub unsafe fn new(
        stream: &CudaStream,
        spec: &ConvSpec,
        (x, w, y): (u64, u64, u64),
        (ws, ws_bytes): (u64, usize),
    ) -> Result<CudnnConv> {
        version()?;
        let [n, c, h, wd] = spec.input_dims();
        let [k, _, r, s] = spec.filter_dims();
        let [_, _, p, q] = spec.output_dims()?;
        let (pt, pb, pl, pr) = spec.padding_tblr();
        if pt != pb || pl != pr {
            return Err(KernelError::Blas {
                op: "cudnn",
                msg: "cuDNN's legacy descriptor takes symmetric padding only".into(),
            });
        }
        let (sh, sw) = spec.stride_hw();
        let (dh, dw) = spec.dilation_hw();
        let i = |v: i64| i32_of(v, "an extent");
        let (tin, tout) = (data_type(spec.input()), data_type(spec.out()));
        let handle = result::create_handle().map_err(err("cudnnCreate"))?;
        let mut me = CudnnConv {
            handle,
            x: std::ptr::null_mut(),
            y: std::ptr::null_mut(),
            bias: std::ptr::null_mut(),
            w: std::ptr::null_mut(),
            conv: std::ptr::null_mut(),
            act: std::ptr::null_mut(),
            algo: (
                sys::cudnnConvolutionFwdAlgo_t::CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM,
                0,
            ),
        };
        result::set_stream(handle, stream.cu_stream() as sys::cudaStream_t)
            .map_err(err("cudnnSetStream"))?;
        me.x = result::create_tensor_descriptor().map_err(err("cudnnCreateTensorDescriptor"))?;
        result::set_tensor4d_descriptor_ex(
            me.x,
            tin,
            [i(n)?, i(c)?, i(h)?, i(wd)?],
            [i(h * wd * c)?, 1, i(wd * c)?, i(c)?],
        )
        .map_err(err("cudnnSetTensor4dDescriptorEx (x)"))?;
        me.y = result::create_tensor_descriptor().map_err(err("cudnnCreateTensorDescriptor"))?;
        result::set_tensor4d_descriptor_ex(
            me.y,
            tout,
            [i(n)?, i(k)?, i(p)?, i(q)?],
            [i(p * q * k)?, 1, i(q * k)?, i(k)?],
        )
        .map_err(err("cudnnSetTensor4dDescriptorEx (y)"))?;
        me.bias = result::create_tensor_descriptor().map_err(err("cudnnCreateTensorDescriptor"))?;
        result::set_tensor4d_descriptor_ex(me.bias, tout, [1, i(k)?, 1, 1], [i(k)?, 1, 1, 1])
            .map_err(err("cudnnSetTensor4dDescriptorEx (bias)"))?;
        me.w = result::create_filter_descriptor().map_err(err("cudnnCreateFilterDescriptor"))?;
        result::set_filter4d_descriptor(
            me.w,
            tin,
            sys::cudnnTensorFormat_t::CUDNN_TENSOR_NHWC,
            [i(k)?, i(c)?, i(r)?, i(s)?],
        )
        .map_err(err("cudnnSetFilter4dDescriptor"))?;
        me.conv = result::create_convolution_descriptor()
            .map_err(err("cudnnCreateConvolutionDescriptor"))?;
        result::set_convolution2d_descriptor(
            me.conv,
            i(pt)?,
            i(pl)?,
            i(sh)?,
            i(sw)?,
            i(dh)?,
            i(dw)?,
            sys::cudnnConvolutionMode_t::CUDNN_CROSS_CORRELATION,
            sys::cudnnDataType_t::CUDNN_DATA_FLOAT,
        )
        .map_err(err("cudnnSetConvolution2dDescriptor"))?;
        result::set_convolution_math_type(me.conv, sys::cudnnMathType_t::CUDNN_TENSOR_OP_MATH)
            .map_err(err("cudnnSetConvolutionMathType"))?;
        me.act = result::create_activation_descriptor()
            .map_err(err("cudnnCreateActivationDescriptor"))?;
        result::set_activation_descriptor(
            me.act,
            sys::cudnnActivationMode_t::CUDNN_ACTIVATION_RELU,
            sys::cudnnNanPropagation_t::CUDNN_NOT_PROPAGATE_NAN,
            0.0,
        )
        .map_err(err("cudnnSetActivationDescriptor"))?;
        // Time every algorithm on the real buffers; keep the fastest that ran.
        let mut perf = [std::mem::zeroed::<sys::cudnnConvolutionFwdAlgoPerf_t>(); 8];
        let mut found = 0;
        sys::cudnnFindConvolutionForwardAlgorithmEx(
            handle,
            me.x,
            x as *const c_void,
            me.w,
            w as *const c_void,
            me.conv,
            me.y,
            y as *mut c_void,
            perf.len() as i32,
            &mut found,
            perf.as_mut_ptr(),
            ws as *mut c_void,
            ws_bytes,
        )
        .result()
        .map_err(err("cudnnFindConvolutionForwardAlgorithmEx"))?;
        let best = perf[..found as usize]
            .iter()
            .find(|p| p.status == sys::cudnnStatus_t::CUDNN_STATUS_SUCCESS)
            .ok_or_else(|| KernelError::Blas {
                op: "cudnnFindConvolutionForwardAlgorithmEx",
                msg: "no algorithm ran".into(),
            })?;
        me.algo = (best.algo, best.memory);
        Ok(me)
    }

    /// The plain call's algorithm, as cuDNN names it.
    pub fn algo_name(&self) -> String {
        format!("{:?}", self.algo.0)
            .trim_start_matches("CUDNN_CONVOLUTION_FWD_ALGO_")
            .to_lowercase()
    }

    /// Queues `y = conv(x, w)` with the found algorithm.
    ///
    /// # Safety
    /// As [`CudnnConv::new`]; the workspace holds at least `self.algo.1` bytes.
    pub unsafe fn forward(&self, x: u64, w: u64, y: u64, ws: u64) -> Result<()> {
        let (one, zero) = (1.0f32, 0.0f32);
        result::convolution_forward(
            self.handle,
            &one as *const f32 as *const c_void,
            self.x,
            x as *const c_void,
            self.w,
            w as *const c_void,
            self.conv,
            self.algo.0,
            ws as *mut c_void,
            self.algo.1,
            &zero as *const f32 as *const c_void,
            self.y,
            y as *mut c_void,
        )
        .map_err(err("cudnnConvolutionForward"))
    }

    /// Queues `y = relu(conv(x, w) + z + bias)` with `algo` (cuDNN runs the ReLU form with
    /// few algorithms; implicit precomputed GEMM always).
    ///
    /// # Safety
    /// As [`CudnnConv::forward`]; `z` is shaped as y, `bias` has K elements of y's type, and
    /// the workspace holds what `algo` needs.
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn fused(
        &self,
        algo: sys::cudnnConvolutionFwdAlgo_t,
        x: u64,
        w: u64,
        z: u64,
        bias: u64,
        y: u64,
        (ws, ws_bytes): (u64, usize),
    ) -> Result<()> {
        let one = 1.0f32;
        result::convolution_bias_activation_forward(
            self.handle,
            &one as *const f32 as *const c_void,
            self.x,
            x as *const c_void,
            self.w,
            w as *const c_void,
            self.conv,
            algo,
            ws as *mut c_void,
            ws_bytes,
            &one as *const f32 as *const c_void,
            self.y,
            z as *const c_void,
            self.bias,
            bias as *const c_void,
            self.act,
            self.y,
            y as *mut c_void,
        )
        .map_err(err("cudnnConvolutionBiasActivationForward"))
    }
}

impl Drop for CudnnConv {
    fn drop(&mut self) {
        // SAFETY: each descriptor was created by this value (or is null) and is destroyed once.
        unsafe {
            for t in [self.x, self.y, self.bias] {
                if !t.is_null() {
                    let _ = result::destroy_tensor_descriptor(t);
                }
            }
            if !self.w.is_null() {
                let _ = result::destroy_filter_descriptor(self.w);
            }
            if !self.conv.is_null() {
                let _ = result::destroy_convolution_descriptor(self.conv);
            }
            if !self.act.is_null() {
                let _ = sys::cudnnDestroyActivationDescriptor(self.act);
            }
            let _ = result::destroy_handle(self.handle);
        }
    }
}
