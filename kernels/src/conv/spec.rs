//! The convolution a user asks for ([`ConvSpec`]), checked once, and its geometry.

use std::fmt;

use tessera_layout::Layout;

use crate::arch::Arch;
use crate::conv::im2col::{ConvPath, Im2col};
use crate::epilogue::{parse_epilogue, EpilogueTree};
use crate::error::{KernelError, Result};
use crate::plan::gemm::{GemmSpec, Options, Plan};
use crate::plan::problem::{DType, Major};

const OP: &str = "conv spec";

/// The checked extents of a convolution: the problem's and the output's `(P, Q)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Geometry {
    pub n: i64,
    pub c: i64,
    pub h: i64,
    pub w: i64,
    pub k: i64,
    pub r: i64,
    pub s: i64,
    pub p: i64,
    pub q: i64,
    /// `(sh, sw)`.
    pub stride: (i64, i64),
    /// `(top, bottom, left, right)`.
    pub pad: (i64, i64, i64, i64),
    /// `(dh, dw)`.
    pub dil: (i64, i64),
}

impl Geometry {
    /// GEMM rows: `N·P·Q`.
    pub fn gemm_m(&self) -> i64 {
        self.n * self.p * self.q
    }

    /// The GEMM's reduction extent: `C·R·S`.
    pub fn gemm_k(&self) -> i64 {
        self.c * self.r * self.s
    }

    /// The geometry the Hopper kernel's loads of A walk.
    pub fn loads(&self) -> crate::plan::ConvGeometry {
        crate::plan::ConvGeometry {
            x: [self.n, self.c, self.h, self.w],
            rs: (self.r, self.s),
            pq: (self.p, self.q),
            stride: self.stride,
            pad: self.pad,
            dil: self.dil,
        }
    }
}

/// A 2-D convolution with a fused epilogue: `y = epilogue(conv2d(x, w))`, cross-correlation
/// as PyTorch's `conv2d` and cuDNN compute it, groups 1, bf16 or fp16 inputs, fp32
/// accumulation, a bf16, fp16 or fp32 output.
///
/// Sizes are given in the frameworks' logical order, x as `(N, C, H, W)` and the filter as
/// `(K, C, R, S)`; the tensors themselves are channels-last in memory (NHWC, KRSC), which
/// the launch checks from their strides. The epilogue is the GEMM's tree over the output
/// seen as an `(N·P·Q) x K` matrix: `acc` is the convolution, `bias_col` a per-channel bias,
/// `residual` (and `c`, `aux_in`, a full `aux`) a tensor shaped as y.
///
/// ```
/// use tessera_kernels::ConvSpec;
/// // ResNet-50's first 3x3 layer at batch 128, with the residual block's epilogue.
/// let spec = ConvSpec::new([128, 64, 56, 56], [64, 64, 3, 3])
///     .padding(1, 1, 1, 1)
///     .bias_residual_relu();
/// assert_eq!(spec.output_dims().unwrap(), [128, 64, 56, 56]);
/// assert_eq!(spec.gemm().unwrap().extents(), (128 * 56 * 56, 64, 64 * 9, 1));
/// assert_eq!(spec.tree().to_string(), "relu(acc + bias_col + residual)");
/// // The dilated filter must fit in the padded input.
/// assert!(ConvSpec::new([1, 8, 2, 2], [8, 8, 3, 3]).output_dims().is_err());
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct ConvSpec {
    /// `(N, C, H, W)`.
    pub(crate) x: [i64; 4],
    /// `(K, C, R, S)`.
    pub(crate) filter: [i64; 4],
    pub(crate) stride: (i64, i64),
    /// `(top, bottom, left, right)`.
    pub(crate) pad: (i64, i64, i64, i64),
    pub(crate) dilation: (i64, i64),
    pub(crate) groups: i64,
    pub(crate) dtype: DType,
    pub(crate) out: Option<DType>,
    pub(crate) tree: EpilogueTree,
    pub(crate) alpha: f32,
    pub(crate) beta: f32,
    pub(crate) options: Options,
}

/// The residual block's epilogue with the residual inside the activation: the ResNet block,
/// cuDNN's `act(α1·conv + α2·z + bias)`, PyTorch's `cudnn_convolution_add_relu`, CUTLASS's
/// `LinCombPerColBiasEltAct`.
const BIAS_RESIDUAL_RELU: &str = "relu(acc + bias_col + residual)";
/// The residual added after the activation: Conv2D + ReLU + Add, CUTLASS's
/// `PerColResAddPerColBiasEltAct`.
const BIAS_RELU_RESIDUAL: &str = "relu(acc + bias_col) + residual";

impl ConvSpec {
    /// A convolution of x, of logical sizes `(N, C, H, W)`, with a filter of logical sizes
    /// `(K, C, R, S)` (the shapes PyTorch reports): stride 1, no padding, dilation 1, bf16 in
    /// and out, the epilogue `acc`.
    pub fn new(x: [i64; 4], filter: [i64; 4]) -> ConvSpec {
        ConvSpec {
            x,
            filter,
            stride: (1, 1),
            pad: (0, 0, 0, 0),
            dilation: (1, 1),
            groups: 1,
            dtype: DType::Bf16,
            out: None,
            tree: EpilogueTree::new(crate::epilogue::build::acc()),
            alpha: 1.0,
            beta: 0.0,
            options: Options::default(),
        }
    }

    /// The stride `(sh, sw)` (1 by default).
    pub fn stride(mut self, sh: i64, sw: i64) -> ConvSpec {
        self.stride = (sh, sw);
        self
    }

    /// Zero padding of x: rows above and below, columns left and right (asymmetric padding
    /// allowed; none by default).
    pub fn padding(mut self, top: i64, bottom: i64, left: i64, right: i64) -> ConvSpec {
        self.pad = (top, bottom, left, right);
        self
    }

    /// The dilation `(dh, dw)` of the filter (1 by default).
    pub fn dilation(mut self, dh: i64, dw: i64) -> ConvSpec {
        self.dilation = (dh, dw);
        self
    }

    /// Channel groups. Only 1 (a dense convolution) is supported: anything else is refused
    /// when the spec is checked.
    pub fn groups(mut self, groups: i64) -> ConvSpec {
        self.groups = groups;
        self
    }

    /// The type of x and the filter (bf16 or fp16); the output takes it too unless
    /// [`ConvSpec::out_dtype`] says otherwise.
    pub fn dtype(mut self, dtype: DType) -> ConvSpec {
        self.dtype = dtype;
        self
    }

    /// The type of y and of the epilogue's tensors (bf16, fp16 or fp32).
    pub fn out_dtype(mut self, dtype: DType) -> ConvSpec {
        self.out = Some(dtype);
        self
    }

    /// The epilogue in the GEMM's text form over the `(N·P·Q) x K` output (`acc` is the
    /// convolution, `bias_col` the per-channel bias, `residual` a tensor shaped as y), or one
    /// of the two residual blocks by name: `bias_residual_relu` is
    /// `relu(acc + bias_col + residual)` and `bias_relu_residual` is
    /// `relu(acc + bias_col) + residual`.
    ///
    /// ```
    /// use tessera_kernels::ConvSpec;
    /// let s = ConvSpec::new([1, 8, 5, 5], [8, 8, 3, 3]).epilogue("bias_relu_residual").unwrap();
    /// assert_eq!(s.tree().to_string(), "relu(acc + bias_col) + residual");
    /// ```
    pub fn epilogue(mut self, text: &str) -> Result<ConvSpec> {
        let text = match text.trim() {
            "bias_residual_relu" => BIAS_RESIDUAL_RELU,
            "bias_relu_residual" => BIAS_RELU_RESIDUAL,
            t => t,
        };
        self.tree = parse_epilogue(text)
            .map_err(|e| KernelError::invalid("ConvSpec::epilogue", e.to_string()))?;
        Ok(self)
    }

    /// The epilogue as a tree.
    pub fn epilogue_tree(mut self, tree: EpilogueTree) -> ConvSpec {
        self.tree = tree;
        self
    }

    /// The ResNet block: `relu(conv + bias + residual)`, the residual *inside* the
    /// activation (cuDNN's `act(α1·conv + α2·z + bias)`, PyTorch's
    /// `cudnn_convolution_add_relu`).
    pub fn bias_residual_relu(mut self) -> ConvSpec {
        self.tree = parse_epilogue(BIAS_RESIDUAL_RELU).expect("a fixed, valid epilogue");
        self
    }

    /// Conv2D + ReLU + Add: `relu(conv + bias) + residual`, the residual added *after* the
    /// activation.
    pub fn bias_relu_residual(mut self) -> ConvSpec {
        self.tree = parse_epilogue(BIAS_RELU_RESIDUAL).expect("a fixed, valid epilogue");
        self
    }

    /// The epilogue's scalar `alpha` (1 by default).
    pub fn alpha(mut self, alpha: f32) -> ConvSpec {
        self.alpha = alpha;
        self
    }

    /// The epilogue's scalar `beta` (0 by default); nonzero needs an epilogue that reads `c`.
    pub fn beta(mut self, beta: f32) -> ConvSpec {
        self.beta = beta;
        self
    }

    /// Forced choices of the GEMM's planner (its path, tile, stages, ...).
    pub fn options(mut self, options: Options) -> ConvSpec {
        self.options = options;
        self
    }

    /// x's logical sizes `(N, C, H, W)`.
    pub fn input_dims(&self) -> [i64; 4] {
        self.x
    }

    /// The filter's logical sizes `(K, C, R, S)`.
    pub fn filter_dims(&self) -> [i64; 4] {
        self.filter
    }

    /// y's logical sizes `(N, K, P, Q)`, with `P = (H + pad_top + pad_bottom − ((R−1)·dh +
    /// 1)) / sh + 1` and Q likewise; an error if the spec is not a valid convolution.
    pub fn output_dims(&self) -> Result<[i64; 4]> {
        let g = self.geometry()?;
        Ok([g.n, g.k, g.p, g.q])
    }

    /// The stride `(sh, sw)`.
    pub fn stride_hw(&self) -> (i64, i64) {
        self.stride
    }

    /// The padding `(top, bottom, left, right)`.
    pub fn padding_tblr(&self) -> (i64, i64, i64, i64) {
        self.pad
    }

    /// The dilation `(dh, dw)`.
    pub fn dilation_hw(&self) -> (i64, i64) {
        self.dilation
    }

    /// The input type.
    pub fn input(&self) -> DType {
        self.dtype
    }

    /// The output type.
    pub fn out(&self) -> DType {
        self.out.unwrap_or(self.dtype)
    }

    /// The epilogue tree.
    pub fn tree(&self) -> &EpilogueTree {
        &self.tree
    }

    /// The epilogue's scalars `(alpha, beta)`.
    pub fn scalars(&self) -> (f32, f32) {
        (self.alpha, self.beta)
    }

    /// The checked geometry: every extent at least 1, one channel count, non-negative
    /// padding, groups 1, 16-bit inputs, an output of at least one pixel, products within
    /// 64 bits.
    pub(crate) fn geometry(&self) -> Result<Geometry> {
        let [n, c, h, w] = self.x;
        let [k, c2, r, s] = self.filter;
        for (name, v) in [
            ("N", n),
            ("C", c),
            ("H", h),
            ("W", w),
            ("K", k),
            ("R", r),
            ("S", s),
            ("stride (h)", self.stride.0),
            ("stride (w)", self.stride.1),
            ("dilation (h)", self.dilation.0),
            ("dilation (w)", self.dilation.1),
        ] {
            if v < 1 {
                return Err(KernelError::invalid(
                    OP,
                    format!("{name} = {v}: at least 1"),
                ));
            }
        }
        if c != c2 {
            return Err(KernelError::invalid(
                OP,
                format!("x has C = {c} channels (N,C,H,W) = {:?}, the filter (K,C,R,S) = {:?} takes {c2}", self.x, self.filter),
            ));
        }
        let (pt, pb, pl, pr) = self.pad;
        if pt < 0 || pb < 0 || pl < 0 || pr < 0 {
            return Err(KernelError::invalid(
                OP,
                format!(
                    "padding (top, bottom, left, right) = {:?}: not negative",
                    self.pad
                ),
            ));
        }
        if self.groups != 1 {
            return Err(KernelError::invalid(
                OP,
                format!(
                    "groups = {}: only dense convolutions (groups 1) are supported",
                    self.groups
                ),
            ));
        }
        if self.dtype == DType::F32 {
            return Err(KernelError::invalid(
                OP,
                "x and the filter must be bf16 or fp16 (the tensor cores' 16-bit inputs)",
            ));
        }
        let overflow = || {
            KernelError::invalid(
                OP,
                format!(
                    "x (N,C,H,W) = {:?}, w (K,C,R,S) = {:?}: extents overflow 64 bits",
                    self.x, self.filter
                ),
            )
        };
        let out_len = |len: i64, lo: i64, hi: i64, taps: i64, dil: i64, st: i64, what: &str| {
            let span = (taps - 1).checked_mul(dil).and_then(|x| x.checked_add(1));
            let padded = len.checked_add(lo).and_then(|x| x.checked_add(hi));
            match (span, padded) {
                (Some(span), Some(padded)) if padded >= span => Ok((padded - span) / st + 1),
                (Some(span), Some(padded)) => Err(KernelError::invalid(
                    OP,
                    format!(
                        "the dilated filter spans {span} {what} (({taps} − 1)·{dil} + 1), the padded input only {padded} ({len} + {lo} + {hi}): no output"
                    ),
                )),
                _ => Err(overflow()),
            }
        };
        let p = out_len(h, pt, pb, r, self.dilation.0, self.stride.0, "rows")?;
        let q = out_len(w, pl, pr, s, self.dilation.1, self.stride.1, "columns")?;
        // Every product the kernels form, checked once here.
        for v in [[n, h, w, c], [n, p, q, k], [k, r, s, c], [n, p, q, c * r]] {
            v.iter()
                .try_fold(1i64, |a, &b| a.checked_mul(b))
                .ok_or_else(overflow)?;
        }
        (n * p * q)
            .checked_mul(c)
            .and_then(|x| x.checked_mul(r))
            .and_then(|x| x.checked_mul(s))
            .ok_or_else(overflow)?;
        Ok(Geometry {
            n,
            c,
            h,
            w,
            k,
            r,
            s,
            p,
            q,
            stride: self.stride,
            pad: self.pad,
            dil: self.dilation,
        })
    }

    /// The GEMM this convolution runs: `M = N·P·Q`, `N = K`, `K = C·R·S`, A row-major (the
    /// im2col rows), B column-major (the K-R-S-C filter: each output channel's `C·R·S`
    /// weights contiguous), D row-major (y in N-P-Q-K order), with the spec's types,
    /// epilogue, scalars and options.
    pub fn gemm(&self) -> Result<GemmSpec> {
        let g = self.geometry()?;
        let mut s = GemmSpec::new(g.gemm_m(), g.k, g.gemm_k())
            .dtype(self.dtype)
            .a(Major::Row)
            .b(Major::Col)
            .d(Major::Row)
            .epilogue_tree(self.tree.clone())
            .alpha(self.alpha)
            .beta(self.beta)
            .options(self.options);
        if let Some(o) = self.out {
            s = s.out_dtype(o);
        }
        Ok(s)
    }

    /// The im2col layout of x, the A operand of the GEMM, and its offset: A's element
    /// `(m, k)`, with `m = (q,p,n)` and `k = (c,s,r)` split colexicographically, is x's element
    /// at `offset + L(m, k)` when the tap it reads lies inside x, and 0 in the padding (see
    /// [`ConvSpec::tap`]). The offset `−(pad_top·W + pad_left)·C` moves the origin to the
    /// padded corner.
    ///
    /// ```
    /// use tessera_kernels::ConvSpec;
    /// let spec = ConvSpec::new([2, 8, 5, 5], [4, 8, 3, 3]).padding(1, 1, 1, 1);
    /// let (l, offset) = spec.im2col().unwrap();
    /// assert_eq!(l.to_string(), "((5,5,2),(8,3,3)):((8,40,200),(1,8,40))");
    /// assert_eq!(offset, -48);
    /// ```
    pub fn im2col(&self) -> Result<(Layout, i64)> {
        let a = Im2col::new(&self.geometry()?)?;
        Ok((a.layout, a.offset))
    }

    /// The element of x that A's `(m, k)` reads: `Some(offset)` (in elements, for tight
    /// channels-last x), or `None` where the tap falls in the padding (A reads 0 there).
    /// The predicate beside [`ConvSpec::im2col`].
    ///
    /// ```
    /// use tessera_kernels::ConvSpec;
    /// let spec = ConvSpec::new([2, 8, 5, 5], [4, 8, 3, 3]).padding(1, 1, 1, 1);
    /// // Output pixel (n,p,q) = (0,0,0), tap (r,s) = (0,0): row −1 of x, the padding.
    /// assert_eq!(spec.tap(0, 0).unwrap(), None);
    /// // Tap (r,s) = (1,1), channel 3 of the same pixel: x[n=0, h=0, w=0, c=3].
    /// assert_eq!(spec.tap(0, 3 + 8 * (1 + 3 * 1)).unwrap(), Some(3));
    /// ```
    pub fn tap(&self, m: i64, k: i64) -> Result<Option<i64>> {
        Im2col::new(&self.geometry()?)?.tap(m, k)
    }

    /// Checks the layout a launch would be given for `tensor` (`"x"`, `"w"`, `"y"`, or an
    /// output-shaped tensor of the epilogue: `"residual"`, `"c"`, `"aux_in"`, `"aux"`) exactly
    /// as [`crate::Conv2d::launch`] does, without a GPU: the logical sizes in `(N,C,H,W)`
    /// order (`(K,C,R,S)` for w, `(N,K,P,Q)` for the output) and channels-last strides for
    /// every dimension of size greater than 1.
    ///
    /// ```
    /// use tessera_kernels::ConvSpec;
    /// let spec = ConvSpec::new([2, 3, 4, 4], [3, 3, 1, 1]);
    /// spec.check_layout("x", &"(2,3,4,4):(48,1,12,3)".parse().unwrap()).unwrap();
    /// // NCHW strides: refused, naming the tensor, the dimension and both strides.
    /// let e = spec.check_layout("y", &"(2,3,4,4):(48,16,4,1)".parse().unwrap()).unwrap_err();
    /// assert!(e.to_string().contains("dimension K (size 3) has stride 16, channels-last needs 1"));
    /// ```
    pub fn check_layout(&self, tensor: &str, layout: &Layout) -> Result<()> {
        use crate::conv::tensors::{self, check_channels_last};
        let g = self.geometry()?;
        let out = [g.n, g.k, g.p, g.q];
        let (role, dims) = match tensor {
            "x" => (tensors::X, [g.n, g.c, g.h, g.w]),
            "w" => (tensors::W, [g.k, g.c, g.r, g.s]),
            "y" => (tensors::out("y"), out),
            "residual" => (tensors::out("residual"), out),
            "c" => (tensors::out("c"), out),
            "aux_in" => (tensors::out("aux_in"), out),
            "aux" => (tensors::out("aux"), out),
            other => {
                return Err(KernelError::invalid(
                    "ConvSpec::check_layout",
                    format!("`{other}` is not a tensor of the convolution (x, w, y, residual, c, aux_in, aux)"),
                ))
            }
        };
        check_channels_last("conv layout", role, dims, Some(layout))
    }

    /// Bytes of device workspace a launch on `arch` with `sms` SMs needs: on the gather path
    /// the im2col copy of A (`M x K` elements of the input type); on the implicit GEMM, where
    /// C is not a multiple of 64, the filter staged with its channels padded (and x, where its
    /// pixels are not on 16 bytes), or where its tile column runs far past K on a long GEMM,
    /// the filter staged with zero output channels to the column's end; on the window path
    /// (C <= 8), the filter in the k-tiles' order and x in phase planes; else 0.
    pub fn workspace_bytes(&self, arch: Arch, sms: i64) -> Result<usize> {
        self.workspace_of(&self.plan(arch, sms)?)
    }

    /// [`ConvSpec::workspace_bytes`] of the convolution run on `plan`, its GEMM's plan.
    pub(crate) fn workspace_of(&self, plan: &Plan) -> Result<usize> {
        let g = self.geometry()?;
        let eb = self.dtype.bytes();
        if let Some(wd) = plan.problem_window() {
            let total = crate::conv::window::workspace(&g, &wd, eb)?.2;
            return usize::try_from(total)
                .map_err(|_| KernelError::invalid(OP, format!("a workspace of {total} bytes")));
        }
        let bytes = match plan.problem_im2col() {
            Some(t) => {
                let pad = crate::conv::im2col::ChannelPadding::new(&g, &t, eb);
                if !pad.stages() {
                    return Ok(0);
                }
                crate::conv::im2col::padded_workspace(&g, &pad, eb)?.2 as i128
            }
            None => match Im2col::new(&g)?.path() {
                ConvPath::Direct { .. } => return Ok(0),
                ConvPath::Gather => {
                    let row = crate::conv::im2col::gathered_row(g.gemm_k(), eb);
                    (g.gemm_m() as i128) * (row as i128) * eb as i128
                }
            },
        };
        usize::try_from(bytes)
            .map_err(|_| KernelError::invalid(OP, format!("a workspace of {bytes} bytes")))
    }

    /// The GEMM's plan on `arch` with `sms` SMs (no GPU needed).
    pub fn plan(&self, arch: Arch, sms: i64) -> Result<Plan> {
        crate::conv::im2col::gemm_plan(self, arch, sms)
    }

    /// What tessera makes of this convolution on `arch` with `sms` SMs, in words: the
    /// tensors' layouts, the im2col layout evaluated and coalesced, the path and why, the
    /// workspace, then the GEMM's plan. Needs no GPU.
    pub fn explain(&self, arch: Arch, sms: i64) -> Result<String> {
        crate::conv::im2col::explain(self, arch, sms)
    }

    /// The complete CUDA sources the convolution compiles on `arch`, each exactly as NVRTC
    /// compiles it, with the kernel's name: the im2col gather (gather path), the staging
    /// copy (the implicit GEMM on padded channels) or the window path's staging kernels, then the GEMM's ([`crate::Plan::sources`]:
    /// its staging copy, if any, and its kernel).
    pub fn sources(&self, arch: Arch, sms: i64) -> Result<Vec<(String, String)>> {
        let g = self.geometry()?;
        let mut out = Vec::new();
        let plan = crate::conv::im2col::gemm_plan(self, arch, sms)?;
        let im2col = plan.problem_im2col();
        if plan.problem_window().is_some() {
            out.push((
                crate::conv::window::WINDOW_KERNEL.to_string(),
                crate::conv::window::window_source(),
            ));
        } else if Im2col::new(&g)?.path() == ConvPath::Gather && im2col.is_none() {
            out.push((
                crate::conv::im2col::GATHER_KERNEL.to_string(),
                crate::conv::im2col::gather_source(),
            ));
        }
        if let Some(t) = im2col {
            if crate::conv::im2col::ChannelPadding::new(&g, &t, self.dtype.bytes()).stages() {
                out.push((
                    crate::codegen::STAGE_ROWS_KERNEL.to_string(),
                    crate::codegen::stage_rows_source(),
                ));
            }
        }
        out.extend(plan.sources()?);
        Ok(out)
    }
}

fn pair(a: (i64, i64)) -> String {
    format!("({},{})", a.0, a.1)
}

impl fmt::Display for ConvSpec {
    /// `conv2d x (N,C,H,W) = (2,8,5,5), w (K,C,R,S) = (4,8,3,3), stride (1,1), padding
    /// (1,1,1,1), dilation (1,1) -> y (N,K,P,Q) = (2,4,5,5), bf16->bf16: acc`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let t = |v: [i64; 4]| format!("({},{},{},{})", v[0], v[1], v[2], v[3]);
        let (pt, pb, pl, pr) = self.pad;
        write!(
            f,
            "conv2d x (N,C,H,W) = {}, w (K,C,R,S) = {}, stride {}, padding ({pt},{pb},{pl},{pr}), dilation {}",
            t(self.x),
            t(self.filter),
            pair(self.stride),
            pair(self.dilation)
        )?;
        if self.groups != 1 {
            write!(f, ", groups {}", self.groups)?;
        }
        if let Ok(y) = self.output_dims() {
            write!(f, " -> y (N,K,P,Q) = {}", t(y))?;
        }
        write!(f, ", {}->{}: {}", self.dtype, self.out(), self.tree)?;
        if self.alpha != 1.0 || self.beta != 0.0 {
            write!(f, " (alpha {}, beta {})", self.alpha, self.beta)?;
        }
        Ok(())
    }
}
