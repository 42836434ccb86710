//! The operands of a launch: the caller's device memory (cudarc slices and views, or a raw
//! pointer), each with an optional layout, and the epilogue's tensors ([`Operands`]).
//!
//! A tensor's layout is a flat `tessera_layout::Layout` over its logical extents: `(rows,
//! cols)` or `(rows, cols, batch)` for a matrix, `(len)` or `(len, batch)` for a vector, in
//! elements (in bits for a bit mask, whose buffer is 32-bit words). Without one, the
//! tensor is tight in the order the [`crate::GemmSpec`] gives.

use std::borrow::Cow;

use cudarc::driver::{
    CudaSlice, CudaStream, CudaView, CudaViewMut, DevicePtr, DevicePtrMut, DeviceSlice, SyncOnDrop,
};
use tessera_layout::Layout;

use crate::plan::problem::DType;

mod sealed {
    pub trait Sealed {}
    impl Sealed for half::bf16 {}
    impl Sealed for half::f16 {}
    impl Sealed for f32 {}
    impl Sealed for u32 {}
}

/// An element type tessera reads or writes: `half::bf16`, `half::f16`, `f32`, and `u32` for
/// the words of a bit mask.
pub trait Element: sealed::Sealed + cudarc::driver::DeviceRepr {
    /// The element type, or `None` for the 32-bit words of a bit mask.
    fn dtype() -> Option<DType>;
}

impl Element for half::bf16 {
    fn dtype() -> Option<DType> {
        Some(DType::Bf16)
    }
}
impl Element for half::f16 {
    fn dtype() -> Option<DType> {
        Some(DType::F16)
    }
}
impl Element for f32 {
    fn dtype() -> Option<DType> {
        Some(DType::F32)
    }
}
impl Element for u32 {
    fn dtype() -> Option<DType> {
        None
    }
}

/// What a buffer holds: elements of a type, or bit-mask words.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Elem {
    Real(DType),
    Words,
}

impl Elem {
    fn of<T: Element>() -> Elem {
        T::dtype().map_or(Elem::Words, Elem::Real)
    }

    pub(crate) fn bytes(self) -> u64 {
        match self {
            Elem::Real(t) => t.bytes() as u64,
            Elem::Words => 4,
        }
    }
}

impl std::fmt::Display for Elem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Elem::Real(t) => write!(f, "{t}"),
            Elem::Words => f.write_str("u32 (bit-mask words)"),
        }
    }
}

/// Device memory that can be read on a stream (cudarc's slices and views).
pub(crate) trait ReadPtr {
    fn elem(&self) -> Elem;
    fn elems(&self) -> usize;
    fn read_ptr<'s>(&'s self, stream: &'s CudaStream) -> (u64, SyncOnDrop<'s>);
}

/// Device memory that can be written on a stream.
pub(crate) trait WritePtr: ReadPtr {
    fn write_ptr<'s>(&'s mut self, stream: &'s CudaStream) -> (u64, SyncOnDrop<'s>);
}

macro_rules! read_ptr {
    ($t:ty) => {
        impl<T: Element> ReadPtr for $t {
            fn elem(&self) -> Elem {
                Elem::of::<T>()
            }
            fn elems(&self) -> usize {
                DeviceSlice::len(self)
            }
            fn read_ptr<'s>(&'s self, stream: &'s CudaStream) -> (u64, SyncOnDrop<'s>) {
                self.device_ptr(stream)
            }
        }
    };
}
read_ptr!(CudaSlice<T>);
read_ptr!(CudaView<'_, T>);
read_ptr!(CudaViewMut<'_, T>);

impl<T: Element> WritePtr for CudaSlice<T> {
    fn write_ptr<'s>(&'s mut self, stream: &'s CudaStream) -> (u64, SyncOnDrop<'s>) {
        self.device_ptr_mut(stream)
    }
}
impl<T: Element> WritePtr for CudaViewMut<'_, T> {
    fn write_ptr<'s>(&'s mut self, stream: &'s CudaStream) -> (u64, SyncOnDrop<'s>) {
        self.device_ptr_mut(stream)
    }
}

#[derive(Clone)]
enum Src<'a> {
    Dev(&'a dyn ReadPtr),
    Raw { ptr: u64, len: usize, elem: Elem },
}

enum SrcMut<'a> {
    Dev(&'a mut dyn WritePtr),
    Raw { ptr: u64, len: usize, elem: Elem },
}

/// An input operand: device memory the launch reads, and optionally its layout.
///
/// From a cudarc `&CudaSlice<T>`, `&CudaView<T>` or `&CudaViewMut<T>` (`.into()`, or
/// [`Tensor::new`]), or a raw device pointer ([`Tensor::from_raw`]).
#[derive(Clone)]
pub struct Tensor<'a> {
    src: Src<'a>,
    layout: Option<Cow<'a, Layout>>,
}

/// An output operand: device memory the launch writes, and optionally its layout.
///
/// From a cudarc `&mut CudaSlice<T>` or `&mut CudaViewMut<T>`, or a raw device pointer
/// ([`TensorMut::from_raw`]).
pub struct TensorMut<'a> {
    src: SrcMut<'a>,
    layout: Option<Cow<'a, Layout>>,
}

impl<'a, T: Element> From<&'a CudaSlice<T>> for Tensor<'a> {
    fn from(s: &'a CudaSlice<T>) -> Tensor<'a> {
        Tensor {
            src: Src::Dev(s),
            layout: None,
        }
    }
}
impl<'a, 'b: 'a, T: Element> From<&'a CudaView<'b, T>> for Tensor<'a> {
    fn from(s: &'a CudaView<'b, T>) -> Tensor<'a> {
        Tensor {
            src: Src::Dev(s),
            layout: None,
        }
    }
}
impl<'a, 'b: 'a, T: Element> From<&'a CudaViewMut<'b, T>> for Tensor<'a> {
    fn from(s: &'a CudaViewMut<'b, T>) -> Tensor<'a> {
        Tensor {
            src: Src::Dev(s),
            layout: None,
        }
    }
}
impl<'a, T: Element> From<&'a mut CudaSlice<T>> for TensorMut<'a> {
    fn from(s: &'a mut CudaSlice<T>) -> TensorMut<'a> {
        TensorMut {
            src: SrcMut::Dev(s),
            layout: None,
        }
    }
}
impl<'a, 'b: 'a, T: Element> From<&'a mut CudaViewMut<'b, T>> for TensorMut<'a> {
    fn from(s: &'a mut CudaViewMut<'b, T>) -> TensorMut<'a> {
        TensorMut {
            src: SrcMut::Dev(s),
            layout: None,
        }
    }
}

impl<'a> Tensor<'a> {
    /// `data` read with `layout` (see the module documentation), e.g. `(M,K):(lda,1)` for a
    /// row-major A with a leading dimension.
    pub fn new(data: impl Into<Tensor<'a>>, layout: Layout) -> Tensor<'a> {
        data.into().with_layout(layout)
    }

    /// `len` elements of `dtype` (`None`: bit-mask words) at the device address `ptr`.
    ///
    /// # Safety
    /// `ptr` must address `len` elements of device memory of the launch's context, valid and
    /// not written by other work for as long as the launch may read them (the stream
    /// ordering is the caller's).
    pub unsafe fn from_raw(ptr: u64, dtype: Option<DType>, len: usize) -> Tensor<'a> {
        Tensor {
            src: Src::Raw {
                ptr,
                len,
                elem: dtype.map_or(Elem::Words, Elem::Real),
            },
            layout: None,
        }
    }

    /// This tensor read with `layout`.
    pub fn with_layout(mut self, layout: Layout) -> Tensor<'a> {
        self.layout = Some(Cow::Owned(layout));
        self
    }

    /// This tensor read with a layout the caller keeps (no copy per launch).
    pub fn with_layout_ref(mut self, layout: &'a Layout) -> Tensor<'a> {
        self.layout = Some(Cow::Borrowed(layout));
        self
    }
}

impl<'a> TensorMut<'a> {
    /// `data` written with `layout` (see the module documentation).
    pub fn new(data: impl Into<TensorMut<'a>>, layout: Layout) -> TensorMut<'a> {
        data.into().with_layout(layout)
    }

    /// `len` elements of `dtype` (`None`: bit-mask words) at the device address `ptr`.
    ///
    /// # Safety
    /// `ptr` must address `len` elements of device memory of the launch's context, valid,
    /// and neither read nor written by other work for as long as the launch may write them.
    pub unsafe fn from_raw(ptr: u64, dtype: Option<DType>, len: usize) -> TensorMut<'a> {
        TensorMut {
            src: SrcMut::Raw {
                ptr,
                len,
                elem: dtype.map_or(Elem::Words, Elem::Real),
            },
            layout: None,
        }
    }

    /// This tensor written with `layout`.
    pub fn with_layout(mut self, layout: Layout) -> TensorMut<'a> {
        self.layout = Some(Cow::Owned(layout));
        self
    }

    /// This tensor written with a layout the caller keeps (no copy per launch).
    pub fn with_layout_ref(mut self, layout: &'a Layout) -> TensorMut<'a> {
        self.layout = Some(Cow::Borrowed(layout));
        self
    }
}

/// An operand resolved for one launch on a stream: its address, extent and type, its
/// layout, and cudarc's guard, which records the launch's use when dropped after it.
pub(crate) struct Bound<'s> {
    pub(crate) ptr: u64,
    pub(crate) len: usize,
    pub(crate) elem: Elem,
    pub(crate) layout: Option<&'s Layout>,
    pub(crate) _guard: Option<SyncOnDrop<'s>>,
}

impl<'a> Tensor<'a> {
    pub(crate) fn bind<'s>(&'s self, stream: &'s CudaStream) -> Bound<'s> {
        let layout = self.layout.as_deref();
        match &self.src {
            Src::Dev(d) => {
                let (ptr, g) = d.read_ptr(stream);
                Bound {
                    ptr,
                    len: d.elems(),
                    elem: d.elem(),
                    layout,
                    _guard: Some(g),
                }
            }
            Src::Raw { ptr, len, elem } => Bound {
                ptr: *ptr,
                len: *len,
                elem: *elem,
                layout,
                _guard: None,
            },
        }
    }
}

impl<'a> TensorMut<'a> {
    pub(crate) fn bind<'s>(&'s mut self, stream: &'s CudaStream) -> Bound<'s> {
        let layout = self.layout.as_deref();
        match &mut self.src {
            SrcMut::Dev(d) => {
                let (elem, len) = (d.elem(), d.elems());
                let (ptr, g) = d.write_ptr(stream);
                Bound {
                    ptr,
                    len,
                    elem,
                    layout,
                    _guard: Some(g),
                }
            }
            SrcMut::Raw { ptr, len, elem } => Bound {
                ptr: *ptr,
                len: *len,
                elem: *elem,
                layout,
                _guard: None,
            },
        }
    }
}

/// The epilogue's tensors of one launch, by the names the epilogue uses. Each tensor the
/// epilogue reads or writes must be given, and none that it does not use.
///
/// ```
/// # #[cfg(feature = "cuda")]
/// # fn f(bias: &cudarc::driver::CudaSlice<half::bf16>, aux: &mut cudarc::driver::CudaSlice<half::bf16>) {
/// use tessera_kernels::Operands;
/// let ops = Operands::new().bias_col(bias).aux(aux);
/// # let _ = ops;
/// # }
/// ```
#[derive(Default)]
pub struct Operands<'a> {
    pub(crate) c: Option<Tensor<'a>>,
    pub(crate) residual: Option<Tensor<'a>>,
    pub(crate) aux_in: Option<Tensor<'a>>,
    pub(crate) bias_row: Option<Tensor<'a>>,
    pub(crate) bias_col: Option<Tensor<'a>>,
    pub(crate) aux: Option<TensorMut<'a>>,
    pub(crate) bgrad_row: Option<TensorMut<'a>>,
    pub(crate) bgrad_col: Option<TensorMut<'a>>,
    pub(crate) sum_k_a: Option<TensorMut<'a>>,
    pub(crate) sum_k_b: Option<TensorMut<'a>>,
    pub(crate) workspace: Option<&'a mut CudaSlice<u8>>,
}

impl<'a> Operands<'a> {
    /// No tensors (an epilogue of `acc`, alpha and constants only).
    pub fn new() -> Operands<'a> {
        Operands::default()
    }

    /// C (`M x N`, the output type), read as `c` when beta is not 0.
    pub fn c(mut self, t: impl Into<Tensor<'a>>) -> Self {
        self.c = Some(t.into());
        self
    }

    /// `residual` (`M x N`, the output type).
    pub fn residual(mut self, t: impl Into<Tensor<'a>>) -> Self {
        self.residual = Some(t.into());
        self
    }

    /// `aux_in` (`M x N`, the output type) or `aux_in_bits` (a bit mask in `u32` words).
    pub fn aux_in(mut self, t: impl Into<Tensor<'a>>) -> Self {
        self.aux_in = Some(t.into());
        self
    }

    /// `bias_row` (length M, the output type; one vector for every batch unless its layout
    /// gives a batch stride).
    pub fn bias_row(mut self, t: impl Into<Tensor<'a>>) -> Self {
        self.bias_row = Some(t.into());
        self
    }

    /// `bias_col` (length N, the output type).
    pub fn bias_col(mut self, t: impl Into<Tensor<'a>>) -> Self {
        self.bias_col = Some(t.into());
        self
    }

    /// The aux output: `M x N` in the type the tree stores, or a bit mask in `u32` words
    /// (`aux_bits`, rows of a multiple of 128 bits).
    pub fn aux(mut self, t: impl Into<TensorMut<'a>>) -> Self {
        self.aux = Some(t.into());
        self
    }

    /// `bgrad_row`'s output: fp32, length M per batch (zeroed and summed by the launch).
    pub fn bgrad_row(mut self, t: impl Into<TensorMut<'a>>) -> Self {
        self.bgrad_row = Some(t.into());
        self
    }

    /// `bgrad_col`'s output: fp32, length N per batch.
    pub fn bgrad_col(mut self, t: impl Into<TensorMut<'a>>) -> Self {
        self.bgrad_col = Some(t.into());
        self
    }

    /// `sum_k_a`'s output: fp32, length M per batch.
    pub fn sum_k_a(mut self, t: impl Into<TensorMut<'a>>) -> Self {
        self.sum_k_a = Some(t.into());
        self
    }

    /// `sum_k_b`'s output: fp32, length N per batch.
    pub fn sum_k_b(mut self, t: impl Into<TensorMut<'a>>) -> Self {
        self.sum_k_b = Some(t.into());
        self
    }

    /// Device workspace for this launch, in place of the `Gemm`'s own: at least
    /// [`crate::Gemm::workspace_bytes`] bytes, zero before its first use (every launch leaves
    /// it zero). Launches that share a workspace must be ordered by the caller.
    pub fn workspace(mut self, w: &'a mut CudaSlice<u8>) -> Self {
        self.workspace = Some(w);
        self
    }
}
