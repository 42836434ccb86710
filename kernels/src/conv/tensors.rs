//! A convolution's tensors as the frameworks describe them: logical sizes in `(N, C, H, W)`
//! order (`(K, C, R, S)` for the filter, `(N, K, P, Q)` for the output) and strides in
//! elements, i.e. a flat tessera layout such as `(2,3,4,4):(48,1,12,3)`; and the check that
//! such a tensor is channels-last in memory.
//!
//! The check compares strides, never a format flag: for every dimension of size greater than
//! 1 the stride must be the channels-last one (`C`: 1, `W`: C, `H`: W·C, `N`: H·W·C); a
//! dimension of size 1 is never stepped along, so its stride is ignored (PyTorch's N111 and
//! NC11 tensors are both NCHW- and channels-last-contiguous, and carry arbitrary strides
//! there). An NCHW tensor, a channel slice (`x[:, :4]`) or a strided view (`x[:, :, ::2]`)
//! therefore fails with the dimension, the stride found and the stride expected.

use tessera_layout::{IntTuple, Layout};

use crate::error::{KernelError, Result};

/// What a tensor is in a convolution: its name and the names of its four logical dimensions.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Role {
    pub name: &'static str,
    pub dims: [&'static str; 4],
}

/// The input x, `(N, C, H, W)`.
pub(crate) const X: Role = Role {
    name: "x",
    dims: ["N", "C", "H", "W"],
};
/// The filter w, `(K, C, R, S)`.
pub(crate) const W: Role = Role {
    name: "w",
    dims: ["K", "C", "R", "S"],
};

/// An output-shaped tensor (y, residual, c, aux_in, aux), `(N, K, P, Q)`.
pub(crate) const fn out(name: &'static str) -> Role {
    Role {
        name,
        dims: ["N", "K", "P", "Q"],
    }
}

/// The channels-last strides of logical sizes `(N, C, H, W)`: `(H·W·C, 1, W·C, C)`.
pub(crate) fn channels_last_strides([_, c, h, w]: [i64; 4]) -> [i64; 4] {
    [h * w * c, 1, w * c, c]
}

/// The channels-last layout of logical sizes `(N, C, H, W)`.
///
/// Post-condition: its offsets are a permutation of `[0, N·C·H·W)`, with C contiguous.
pub(crate) fn channels_last(dims: [i64; 4]) -> Layout {
    Layout::new(
        IntTuple::flat(dims),
        IntTuple::flat(channels_last_strides(dims)),
    )
    .expect("four sizes and four strides are congruent")
}

fn is_nchw_contiguous(dims: [i64; 4], stride: &[i64]) -> bool {
    let [_, c, h, w] = dims;
    let want = [c * h * w, h * w, w, 1];
    (0..4).all(|i| dims[i] == 1 || stride[i] == want[i])
}

/// Checks that `layout` (or, without one, the tight channels-last tensor) describes a
/// channels-last tensor of logical sizes `dims`. An error names the tensor, its layout, and
/// each dimension whose stride differs, with the stride found and the stride expected.
pub(crate) fn check_channels_last(
    op: &'static str,
    role: Role,
    dims: [i64; 4],
    layout: Option<&Layout>,
) -> Result<()> {
    let Some(l) = layout else { return Ok(()) };
    let err = |rule: String| KernelError::Operand {
        op,
        operand: role.name,
        layout: l.to_string(),
        rule,
    };
    let shape = l.shape().leaves();
    let stride = l.stride().leaves();
    let names = role.dims.join(",");
    if l.depth() > 1 || shape.len() != 4 || shape[..] != dims {
        return Err(err(format!(
            "the shape must be the logical sizes ({names}) = ({},{},{},{}), in that order (the strides say where each dimension lives in memory)",
            dims[0], dims[1], dims[2], dims[3]
        )));
    }
    let want = channels_last_strides(dims);
    let bad: Vec<String> = (0..4)
        .filter(|&i| dims[i] > 1 && stride[i] != want[i])
        .map(|i| {
            format!(
                "dimension {} (size {}) has stride {}, channels-last needs {}",
                role.dims[i], dims[i], stride[i], want[i]
            )
        })
        .collect();
    if bad.is_empty() {
        return Ok(());
    }
    let hint = if is_nchw_contiguous(dims, &stride) {
        "; these are the strides of a contiguous NCHW tensor: it is not channels-last in memory (PyTorch: .contiguous(memory_format=torch.channels_last); C++ torch::zeros and torch::ones drop the memory format, torch::empty keeps it)"
    } else if dims[1] == 1 || stride[1] == 1 {
        "; a view into a larger tensor (a channel slice, a strided slice) is not a dense channels-last tensor: copy it first"
    } else {
        ""
    };
    Err(err(format!(
        "not channels-last ({}): {}{hint}",
        role.dims
            .iter()
            .zip(want)
            .map(|(d, s)| format!("{d}:{s}"))
            .collect::<Vec<_>>()
            .join(", "),
        bad.join("; ")
    )))
}
