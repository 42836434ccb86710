//! The convolution's im2col layout against brute force, its coalescing, the path it decides,
//! the channels-last check of every tensor (the PyTorch extension's NCHW output among them),
//! the spec's own checks, the plan's text (a snapshot), and the gather kernel's NVRTC compile.

use tessera_layout::Layout;

use crate::conv::im2col::{ConvPath, Im2col};
use crate::conv::tensors::{self, channels_last, check_channels_last};
use crate::{Arch, ConvSpec};

fn l(s: &str) -> Layout {
    s.parse().unwrap()
}

/// `(spec, description)`: the shapes of the sweep that a CPU can enumerate.
fn specs() -> Vec<ConvSpec> {
    vec![
        ConvSpec::new([2, 3, 5, 7], [4, 3, 3, 3]).padding(1, 1, 1, 1),
        ConvSpec::new([1, 2, 7, 5], [3, 2, 3, 5])
            .stride(2, 3)
            .padding(1, 2, 1, 2),
        ConvSpec::new([3, 2, 7, 7], [2, 2, 3, 2])
            .stride(1, 2)
            .padding(2, 2, 2, 2)
            .dilation(2, 3),
        ConvSpec::new([2, 8, 4, 4], [5, 8, 1, 1]),
        ConvSpec::new([1, 8, 5, 6], [5, 8, 1, 1]).stride(2, 3),
        ConvSpec::new([1, 3, 13, 2], [1, 3, 7, 1])
            .stride(3, 1)
            .padding(3, 3, 0, 1),
        ConvSpec::new([2, 3, 2, 2], [2, 3, 3, 3])
            .padding(2, 1, 1, 2)
            .dilation(2, 1),
        ConvSpec::new([2, 4, 3, 3], [2, 4, 3, 3]),
    ]
}

#[test]
fn every_element_of_a_is_the_tap_it_names() {
    for spec in specs() {
        let [n, c, h, w] = spec.input_dims();
        let [k, _, r, s] = spec.filter_dims();
        let [_, _, pp, qq] = spec.output_dims().unwrap();
        let (sh, sw) = spec.stride;
        let (pt, _, pl, _) = spec.pad;
        let (dh, dw) = spec.dilation;
        let _ = k;
        for m in 0..n * pp * qq {
            let (ni, p, q) = (m / (pp * qq), (m / qq) % pp, m % qq);
            for kk in 0..c * r * s {
                let (ci, si, ri) = (kk % c, (kk / c) % s, kk / (c * s));
                let (hi, wi) = (p * sh - pt + ri * dh, q * sw - pl + si * dw);
                let want = ((0..h).contains(&hi) && (0..w).contains(&wi))
                    .then(|| ((ni * h + hi) * w + wi) * c + ci);
                assert_eq!(spec.tap(m, kk).unwrap(), want, "{spec}: A({m}, {kk})");
            }
        }
        // Outside A is an error, not a tap.
        let (mm, kk) = (n * pp * qq, c * r * s);
        assert!(spec.tap(mm, 0).is_err() && spec.tap(0, kk).is_err() && spec.tap(-1, 0).is_err());
    }
}

#[test]
fn the_im2col_layout_is_printed_as_cute_does() {
    let spec = ConvSpec::new([128, 64, 56, 56], [64, 64, 3, 3]).padding(1, 1, 1, 1);
    let (a, offset) = spec.im2col().unwrap();
    assert_eq!(
        a.to_string(),
        "((56,56,128),(64,3,3)):((64,3584,200704),(1,64,3584))"
    );
    assert_eq!(offset, -(56 + 1) * 64);
    let im = Im2col::new(&spec.geometry().unwrap()).unwrap();
    // (C,S) is one contiguous run of C·S = 192 elements (dilation_w 1), and at stride 1 with
    // P = H, Q = W the pixels are one mode of stride C: without the padding's predicate A
    // would be a (Toeplitz) view of x.
    assert_eq!(im.coalesced().to_string(), "(401408,(192,3)):(64,(1,3584))");
}

#[test]
fn the_stems_channel_and_column_taps_coalesce_into_one_run() {
    // ResNet's stem, C = 3, 7x7 stride 2: 21 contiguous elements per filter row, whatever the
    // stride (the stride is in the M mode).
    let spec = ConvSpec::new([32, 3, 224, 224], [64, 3, 7, 7])
        .stride(2, 2)
        .padding(3, 3, 3, 3);
    let im = Im2col::new(&spec.geometry().unwrap()).unwrap();
    assert_eq!(
        im.coalesced().to_string(),
        "((112,3584),(21,7)):((6,1344),(1,672))"
    );
    // Dilation along W breaks the run: (C,S):(1,2C).
    let dil = Im2col::new(&spec.clone().dilation(1, 2).geometry().unwrap()).unwrap();
    assert_eq!(
        dil.coalesced().mode(1).unwrap().to_string(),
        "(3,7,7):(1,6,672)"
    );
}

#[test]
fn a_1x1_convolution_of_stride_1_is_x_itself() {
    // The M mode (Q,P,N):(C, W·C, H·W·C) coalesces to one mode of stride C: A = (M,C):(C,1).
    let spec = ConvSpec::new([128, 256, 56, 56], [64, 256, 1, 1]);
    let im = Im2col::new(&spec.geometry().unwrap()).unwrap();
    assert_eq!(im.coalesced().to_string(), "(401408,256):(256,1)");
    let (path, why) = im.decide();
    assert_eq!(path, ConvPath::Direct { lda: 256 });
    assert!(why.contains("no copy"), "{why}");
    assert_eq!(spec.workspace_bytes(Arch::Sm90a, 132).unwrap(), 0);
}

#[test]
fn the_path_says_why() {
    let path = |s: &ConvSpec| Im2col::new(&s.geometry().unwrap()).unwrap().decide();
    // Padding: the predicate is not a layout.
    let (p, why) = path(&ConvSpec::new([2, 64, 56, 56], [64, 64, 3, 3]).padding(1, 1, 1, 1));
    assert_eq!(p, ConvPath::Gather);
    assert!(why.contains("zero padding (rows 1 above, 1 below"), "{why}");
    // A strided 1x1: a strided GEMM whose rows are not equally spaced.
    let (p, why) = path(&ConvSpec::new([2, 256, 56, 56], [512, 256, 1, 1]).stride(2, 2));
    assert_eq!(p, ConvPath::Gather);
    assert!(
        why.contains("M mode (Q,P,N) coalesces to (28,56):(512,28672)"),
        "{why}"
    );
    // A filter as large as the unpadded input: one output pixel per image, A = (N, H·W·C).
    let (p, _) = path(&ConvSpec::new([4, 8, 3, 3], [5, 8, 3, 3]));
    assert_eq!(p, ConvPath::Direct { lda: 72 });
    // Taps that overlap: rows of A closer than K.
    let (p, why) = path(&ConvSpec::new([1, 8, 1, 5], [5, 8, 1, 3]));
    assert_eq!(p, ConvPath::Gather);
    assert!(why.contains("overlap"), "{why}");
    // Bottom padding no tap reaches is not read: stride 2 over 5 rows, padded by 1 below.
    let s = ConvSpec::new([1, 8, 5, 1], [5, 8, 1, 1])
        .stride(2, 1)
        .padding(0, 1, 0, 0);
    assert_eq!(s.output_dims().unwrap(), [1, 5, 3, 1]);
    assert_eq!(path(&s).0, ConvPath::Direct { lda: 16 });
    // A single output pixel (M = 1) of a 1x1 filter.
    let (p, _) = path(&ConvSpec::new([1, 8, 1, 1], [3, 8, 1, 1]));
    assert_eq!(p, ConvPath::Direct { lda: 8 });
}

#[test]
fn the_gather_paths_workspace_is_a_copy_of_a() {
    // (On sm_80: on sm_90a this layer takes the implicit GEMM, with no workspace.)
    let spec = ConvSpec::new([2, 64, 56, 56], [64, 64, 3, 3]).padding(1, 1, 1, 1);
    assert_eq!(
        spec.workspace_bytes(Arch::Sm80, 132).unwrap(),
        2 * 56 * 56 * 64 * 9 * 2
    );
    assert_eq!(spec.workspace_bytes(Arch::Sm90a, 132).unwrap(), 0);
    let f16_out = spec.clone().out_dtype(crate::DType::F32);
    assert_eq!(
        f16_out.workspace_bytes(Arch::Sm80, 132).unwrap(),
        spec.workspace_bytes(Arch::Sm80, 132).unwrap()
    );
}

/// The implicit GEMM's im2col geometry of `spec`'s plan on sm_90a (132 SMs).
fn implicit_of(spec: &ConvSpec) -> crate::plan::Im2colTma {
    spec.plan(Arch::Sm90a, 132)
        .unwrap()
        .problem_im2col()
        .expect("the implicit GEMM")
}

#[test]
fn a_staged_filter_spans_its_tile_columns_with_zero_output_channels() {
    // C = 100 -> K = 200: one 224-wide tile column; the staged filter holds 224 output
    // channels (24 of zeros), so that B's tensor map spans the column whole.
    let spec = ConvSpec::new([32, 100, 28, 28], [200, 100, 3, 3]).padding(1, 1, 1, 1);
    let plan = spec.plan(Arch::Sm90a, 132).unwrap();
    let t = plan.problem_im2col().expect("the implicit GEMM");
    let bn = plan.sm90().unwrap().cta_tile.1;
    assert_eq!((bn, t.filter_rows), (224, 224));
    let w_bytes: usize = 224 * 9 * 128 * 2;
    assert_eq!(
        spec.workspace_bytes(Arch::Sm90a, 132).unwrap(),
        w_bytes.div_ceil(256) * 256 + 32 * 28 * 28 * 128 * 2
    );
    // Past one column: 300 output channels in two columns of the same width.
    let wide = ConvSpec::new([32, 60, 14, 14], [300, 60, 3, 3]).padding(1, 1, 1, 1);
    let plan = wide.plan(Arch::Sm90a, 132).unwrap();
    let (_, tiles_n) = plan.sm90().unwrap().grid_tiles();
    let bn = plan.sm90().unwrap().cta_tile.1;
    assert_eq!(plan.problem_im2col().unwrap().filter_rows, tiles_n * bn);
    assert!(tiles_n * bn >= 300);
    // A filter read in place (C a multiple of 64) keeps its K rows where the GEMM is short
    // (N = 32: about 11 us by the roofline estimate, under STAGE_FILTER_MIN_SECS): a copy
    // would cost about what the loads past the map do.
    let in_place = ConvSpec::new([32, 128, 28, 28], [100, 128, 3, 3]).padding(1, 1, 1, 1);
    assert_eq!(implicit_of(&in_place).filter_rows, 100);
    assert_eq!(in_place.workspace_bytes(Arch::Sm90a, 132).unwrap(), 0);
    // At N = 256 (about 90 us) it is staged with zero output channels 100..128, its
    // channels as they are.
    let long = ConvSpec::new([256, 128, 28, 28], [100, 128, 3, 3]).padding(1, 1, 1, 1);
    assert_eq!(implicit_of(&long).filter_rows, 128);
    assert_eq!(
        long.workspace_bytes(Arch::Sm90a, 132).unwrap(),
        128 * 9 * 128 * 2
    );
    let text = long.explain(Arch::Sm90a, 132).unwrap();
    assert!(
        text.contains("the filter is staged with zero output channels 100..128"),
        "{text}"
    );
    let srcs = long.sources(Arch::Sm90a, 132).unwrap();
    assert_eq!(srcs[0].0, "tessera_stage_rows");
    // Where K fills the tile column, or leaves fewer than 16 of its rows past K (K = 120),
    // nothing is staged at any size.
    for k in [128, 120] {
        let few = ConvSpec::new([256, 128, 28, 28], [k, 128, 3, 3]).padding(1, 1, 1, 1);
        assert_eq!(few.workspace_bytes(Arch::Sm90a, 132).unwrap(), 0, "K = {k}");
    }
}

#[test]
fn channels_not_a_multiple_of_64_pad_to_whole_k_tiles_where_the_roofline_says_so() {
    // C = 124: 248-byte pixels are not on TMA's 16-byte grid, so x is staged with pixels 128
    // apart, and the filter with every tap's channels padded to 128.
    let odd = ConvSpec::new([128, 124, 28, 28], [124, 124, 3, 3]).padding(1, 1, 1, 1);
    let plan = odd.plan(Arch::Sm90a, 132).unwrap();
    let t = plan.problem_im2col().expect("the implicit GEMM");
    assert_eq!((t.pitch, t.c_blocks(), t.gemm_k()), (128, 2, 9 * 128));
    // The staged copy holds zeros in channels 124..128, and the tensor map reads all 128: no
    // load runs past its channel extent, and the map's last element is the copy's last.
    assert_eq!(t.conv.x[1], 128);
    assert_eq!(t.extent(), 128 * 28 * 28 * 128);
    assert_eq!(plan.problem.k, 9 * 128);
    // The staged filter holds zero output channels 124..128, so that B's map spans the
    // 128-wide tile column whole.
    assert_eq!(t.filter_rows, 128);
    let w_bytes: usize = 128 * 9 * 128 * 2;
    let x_at = w_bytes.div_ceil(256) * 256;
    assert_eq!(
        odd.workspace_bytes(Arch::Sm90a, 132).unwrap(),
        x_at + 128 * 28 * 28 * 128 * 2
    );
    let text = odd.explain(Arch::Sm90a, 132).unwrap();
    for needle in [
        "path         implicit gemm",
        "C = 124 is not a multiple of 64: each tap's last k-tile reads channels 124..128 as zeros (the staged copy's zeros) against a filter staged with zeros there and zero output channels 124..128",
        "x is staged with pixels 128 elements apart",
        "the GEMM's K = R·S·128 = 1152",
        "the staged filter and x",
    ] {
        assert!(text.contains(needle), "`{needle}` missing from:\n{text}");
    }
    // C = 96: 192-byte pixels, x read in place; only the filter is staged.
    let c96 = ConvSpec::new([32, 96, 28, 28], [96, 96, 3, 3]).padding(1, 1, 1, 1);
    let t = implicit_of(&c96);
    assert_eq!((t.pitch, t.gemm_k()), (96, 9 * 128));
    // In place, the map's extent is C: TMA fills channels 96..128.
    assert_eq!(t.conv.x[1], 96);
    assert_eq!(
        c96.workspace_bytes(Arch::Sm90a, 132).unwrap(),
        96 * 9 * 128 * 2
    );
    assert!(c96
        .explain(Arch::Sm90a, 132)
        .unwrap()
        .contains("x is read in place"));
    // The stem (C = 3): 64 channels a tap would be 21 times the MMA work; the window load
    // takes it (a tap is one 16-byte chunk), and the plan says why.
    let stem = ConvSpec::new([32, 3, 224, 224], [64, 3, 7, 7])
        .stride(2, 2)
        .padding(3, 3, 3, 3);
    let plan = stem.plan(Arch::Sm90a, 132).unwrap();
    assert!(plan.problem_im2col().is_none());
    assert!(plan.problem_window().is_some());
    let text = stem.explain(Arch::Sm90a, 132).unwrap();
    assert!(
        text.contains("path         window gemm: C = 3 <= 8"),
        "{text}"
    );
    assert!(
        text.contains("3584 batches of M = Q = 112 by K = 64·7 = 448"),
        "{text}"
    );
    // With 9 channels, the gather, and the plan says why not the padded channels.
    let c9 = ConvSpec::new([32, 9, 224, 224], [64, 9, 7, 7])
        .stride(2, 2)
        .padding(3, 3, 3, 3);
    let text = c9.explain(Arch::Sm90a, 132).unwrap();
    assert!(
        text.contains("the implicit GEMM could take it with padded channels, but: C = 9"),
        "{text}"
    );
    // sm_80 has no TMA: the gather.
    assert!(odd
        .plan(Arch::Sm80, 132)
        .unwrap()
        .problem_im2col()
        .is_none());
}

#[test]
fn the_spec_refuses_what_is_not_a_convolution() {
    let bad = [
        (ConvSpec::new([1, 3, 8, 8], [4, 2, 3, 3]), "C = 3"),
        (
            ConvSpec::new([1, 3, 8, 8], [4, 3, 3, 3]).groups(3),
            "groups = 3",
        ),
        (ConvSpec::new([1, 3, 2, 8], [4, 3, 3, 3]), "spans 3 rows"),
        (
            ConvSpec::new([1, 3, 8, 8], [4, 3, 3, 3]).stride(0, 1),
            "stride (h) = 0",
        ),
        (
            ConvSpec::new([1, 3, 8, 8], [4, 3, 3, 3]).padding(0, -1, 0, 0),
            "not negative",
        ),
        (
            ConvSpec::new([1, 3, 8, 8], [4, 3, 3, 3]).dtype(crate::DType::F32),
            "bf16 or fp16",
        ),
        (ConvSpec::new([0, 3, 8, 8], [4, 3, 3, 3]), "N = 0"),
        (
            ConvSpec::new([1 << 40, 1 << 20, 8, 8], [4, 1 << 20, 3, 3]),
            "overflow",
        ),
    ];
    for (spec, needle) in bad {
        let e = spec.output_dims().unwrap_err().to_string();
        assert!(e.contains(needle), "{spec}: `{e}` lacks `{needle}`");
        assert!(spec.plan(Arch::Sm90a, 132).is_err());
    }
}

#[test]
fn the_residual_orders_are_named() {
    let s = ConvSpec::new([1, 8, 5, 5], [8, 8, 3, 3]);
    assert_eq!(
        s.clone().bias_residual_relu().tree().to_string(),
        "relu(acc + bias_col + residual)"
    );
    assert_eq!(
        s.clone().bias_relu_residual().tree().to_string(),
        "relu(acc + bias_col) + residual"
    );
    assert_eq!(
        s.clone().epilogue("bias_residual_relu").unwrap(),
        s.clone().bias_residual_relu()
    );
    assert!(s.epilogue("relu(acc +").is_err());
}

#[test]
fn the_gemm_is_k_major_and_takes_the_hopper_path_where_c_r_s_allows() {
    let spec = ConvSpec::new([128, 64, 56, 56], [64, 64, 3, 3])
        .padding(1, 1, 1, 1)
        .bias_residual_relu();
    let plan = spec.plan(Arch::Sm90a, 132).unwrap();
    assert_eq!(plan.path(), "sm90");
    // A stem of 9 channels (more than the window load's 8): C·R·S = 441 elements per row,
    // not a multiple of 16 bytes: the gather writes rows of 448 and the GEMM stages only w,
    // on the Hopper path.
    let stem = ConvSpec::new([32, 9, 224, 224], [64, 9, 7, 7])
        .stride(2, 2)
        .padding(3, 3, 3, 3);
    let plan = stem.plan(Arch::Sm90a, 132).unwrap();
    assert_eq!((plan.path(), plan.staged_k()), ("sm90", Some(448)));
    assert_eq!(
        stem.workspace_bytes(Arch::Sm90a, 132).unwrap(),
        32 * 112 * 112 * 448 * 2
    );
    let text = stem.explain(Arch::Sm90a, 132).unwrap();
    for needle in [
        "L = ((112,112,32),(9,7,7)):((18,4032,451584),(1,9,2016))",
        "offset -6075",
        "(C,S) is one contiguous run of C·S = 63 elements",
        "path         im2col + gemm: taps read the zero padding",
        "this path pays that copy",
        "A(0,0) reads row -3, column -3: 0 (padding)",
        "the GEMM:",
    ] {
        assert!(text.contains(needle), "`{needle}` missing from:\n{text}");
    }
}

/// What `tessera plan conv` prints about the convolution itself (before the GEMM's own
/// plan), for a layer of each kind: the gather (padding), x as A (1x1), the strided 1x1, and
/// the stem's coalesced run.
#[test]
fn plan_text_snapshots() {
    let layers = [
        (
            "c2a",
            ConvSpec::new([128, 64, 56, 56], [64, 64, 3, 3])
                .padding(1, 1, 1, 1)
                .bias_residual_relu(),
        ),
        ("c2c", ConvSpec::new([128, 256, 56, 56], [64, 256, 1, 1])),
        (
            "c3d",
            ConvSpec::new([128, 256, 56, 56], [512, 256, 1, 1]).stride(2, 2),
        ),
        (
            "stem",
            ConvSpec::new([32, 3, 224, 224], [64, 3, 7, 7])
                .stride(2, 2)
                .padding(3, 3, 3, 3),
        ),
    ];
    for (name, spec) in layers {
        let text = spec.explain(Arch::Sm90a, 132).unwrap();
        let conv_part = text.split("the GEMM:").next().unwrap();
        insta::assert_snapshot!(format!("conv_plan_{name}"), conv_part);
    }
}

#[test]
fn a_channels_last_tensor_passes_with_any_stride_on_size_1_dimensions() {
    let dims = [2, 3, 4, 4];
    assert_eq!(channels_last(dims).to_string(), "(2,3,4,4):(48,1,12,3)");
    let ok = |s: &str, dims| check_channels_last("t", tensors::X, dims, Some(&l(s)));
    ok("(2,3,4,4):(48,1,12,3)", dims).unwrap();
    // No layout: tight channels-last.
    check_channels_last("t", tensors::X, dims, None).unwrap();
    // PyTorch's N111 and NC11 tensors: NCHW- and channels-last-contiguous at once.
    ok("(4,8,1,1):(8,1,1,1)", [4, 8, 1, 1]).unwrap();
    ok("(4,8,1,1):(8,1,8,8)", [4, 8, 1, 1]).unwrap();
    ok("(4,1,5,5):(25,1,5,1)", [4, 1, 5, 5]).unwrap();
    // Junk strides on size-1 dimensions.
    ok("(1,3,4,4):(7777,1,12,3)", [1, 3, 4, 4]).unwrap();
}

#[test]
fn each_layout_that_is_not_channels_last_names_the_dimension_and_both_strides() {
    let dims = [2, 3, 4, 4];
    let err = |s: &str| {
        check_channels_last("conv launch", tensors::X, dims, Some(&l(s)))
            .unwrap_err()
            .to_string()
    };
    // NCHW-contiguous.
    let e = err("(2,3,4,4):(48,16,4,1)");
    for needle in [
        "conv launch: x: layout (2,3,4,4):(48,16,4,1)",
        "dimension C (size 3) has stride 16, channels-last needs 1",
        "dimension W (size 4) has stride 1, channels-last needs 3",
        "contiguous NCHW",
    ] {
        assert!(e.contains(needle), "`{e}` lacks `{needle}`");
    }
    // x[:, :, ::2] of a (2,3,8,4) channels-last tensor: H's stride doubled.
    let e = err("(2,3,4,4):(96,1,24,3)");
    assert!(
        e.contains("dimension H (size 4) has stride 24, channels-last needs 12"),
        "{e}"
    );
    assert!(
        e.contains("dimension N (size 2) has stride 96, channels-last needs 48"),
        "{e}"
    );
    assert!(e.contains("view"), "{e}");
    // x[:, :3] of a (2,8,4,4) channels-last tensor: the channel slice keeps C's stride 1.
    let e = err("(2,3,4,4):(128,1,32,8)");
    assert!(
        e.contains("dimension W (size 4) has stride 8, channels-last needs 3"),
        "{e}"
    );
    // The logical sizes in another order.
    let e = err("(2,4,4,3):(48,12,3,1)");
    assert!(
        e.contains("the shape must be the logical sizes (N,C,H,W) = (2,3,4,4)"),
        "{e}"
    );
    // Not flat.
    let e = err("((2,1),3,4,4):((48,1),1,12,3)");
    assert!(e.contains("the shape must be"), "{e}");
}

#[test]
fn the_pytorch_extensions_nchw_output_is_refused() {
    // CUTLASS's generated extension allocated D = torch::zeros({N,K,P,Q},
    // opts.memory_format(ChannelsLast)); C++ zeros drops the format, so D had NCHW strides
    // (48,16,4,1) and the kernel, assuming NHWC, wrote wrong results. Here the strides are
    // the description: the same tensor is refused, naming y, K and both strides.
    let e = check_channels_last(
        "conv launch",
        tensors::out("y"),
        [2, 3, 4, 4],
        Some(&l("(2,3,4,4):(48,16,4,1)")),
    )
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("y: layout (2,3,4,4):(48,16,4,1): not channels-last (N:48, K:1, P:12, Q:3)"),
        "{e}"
    );
    assert!(
        e.contains("dimension K (size 3) has stride 16, channels-last needs 1"),
        "{e}"
    );
    assert!(e.contains("torch::empty keeps it"), "{e}");
}

#[cfg(feature = "cuda")]
#[test]
fn the_gather_reads_the_layout_it_is_given() {
    use crate::conv::kernel::GatherArgs;
    let spec = ConvSpec::new([2, 24, 9, 7], [4, 24, 3, 5])
        .stride(2, 3)
        .padding(1, 2, 0, 1)
        .dilation(2, 1);
    let im = Im2col::new(&spec.geometry().unwrap()).unwrap();
    // K = 24·5·3 = 360 elements, 720 bytes: on the 16-byte grid, rows of K.
    let k = spec.geometry().unwrap().gemm_k();
    assert_eq!(crate::conv::im2col::gathered_row(k, 2), 360);
    let a = GatherArgs::new(&im, 360);
    assert_eq!(a.tap_width(), Some(8));
    // K = 3·3·3 = 27: rows padded to 64 elements (128 bytes), so the GEMM reads A in place.
    assert_eq!(crate::conv::im2col::gathered_row(27, 2), 64);
    assert_eq!(crate::conv::im2col::gathered_row(147, 2), 192);
    let b = GatherArgs::new(
        &Im2col::new(
            &ConvSpec::new([1, 3, 5, 5], [1, 3, 3, 3])
                .geometry()
                .unwrap(),
        )
        .unwrap(),
        64,
    );
    assert_eq!(b.tap_width(), None);
    // Its strides are the layout's, field by field.
    assert_eq!(
        format!("{a:?}"),
        "GatherArgs { q: 2, p: 4, n: 2, c: 24, s: 5, r: 3, sq: 72, sp: 336, sn: 1512, ss: 24, sr: 336, offset: -168, h: 9, w: 7, sh: 2, sw: 3, pt: 1, pl: 0, dh: 2, dw: 1, lda: 360 }"
    );
}

#[cfg(feature = "cuda")]
#[test]
fn the_gather_kernel_compiles_with_nvrtc_for_sm80_and_sm90a() {
    use crate::launch::runtime::{compile, nvrtc_version};
    if let Err(e) = nvrtc_version() {
        if std::env::var("TESSERA_REQUIRE_NVRTC").as_deref() == Ok("1") {
            panic!("TESSERA_REQUIRE_NVRTC=1 but {e}");
        }
        eprintln!("SKIPPED: {e}");
        return;
    }
    let src = crate::conv::im2col::gather_source();
    for arch in [Arch::Sm80, Arch::Sm90a] {
        let c = compile(&src, "tessera_conv_im2col", arch, true).unwrap_or_else(|e| panic!("{e}"));
        assert!(c.cubin.len() > 1000);
        for entry in ["taps8", "taps4", "rows8"] {
            assert!(
                c.log.contains(&format!("tessera_conv_im2col_{entry}")),
                "{}",
                c.log
            );
        }
        assert!(
            !c.log.contains("bytes spill stores") || c.log.contains("0 bytes spill stores"),
            "{}",
            c.log
        );
    }
    // The size assert is live: a host mirror of another size fails to compile.
    let skewed = src.replace("== 168", "== 176");
    assert_ne!(skewed, src);
    assert!(compile(&skewed, "tessera_conv_im2col", Arch::Sm80, false).is_err());
    // And the sources of a gather-path convolution (C = 9: padded to 64 channels a tap, the
    // MMA work would be 7 times as much; more than the window load's 8) are the gather,
    // then the GEMM.
    let spec = ConvSpec::new([128, 9, 56, 56], [64, 9, 3, 3]).padding(1, 1, 1, 1);
    let srcs = spec.sources(Arch::Sm90a, 132).unwrap();
    // (The GEMM's own staging of w first: rows of 81 elements are off TMA's 16 bytes.)
    assert_eq!(srcs.len(), 3);
    assert_eq!(srcs[0], ("tessera_conv_im2col".to_string(), src));
    assert_eq!(srcs[1].0, "tessera_stage_rows");
    // With C = 64 the implicit GEMM: its one program loads A by TMA's im2col mode, and
    // compiles (the flag-driven and the generated epilogue). With C = 124, two k-tiles a tap
    // and the staging copy first.
    let c124 = ConvSpec::new([32, 124, 28, 28], [124, 124, 3, 3]).padding(1, 1, 1, 1);
    let srcs = c124.sources(Arch::Sm90a, 132).unwrap();
    assert_eq!(srcs.len(), 2);
    assert_eq!(srcs[0].0, "tessera_stage_rows");
    assert!(srcs[1]
        .1
        .contains("constexpr int kConvCBlocks = 2, kConvS = 3"));
    // c2a's layer takes the halo load (one strip a filter row for its three taps), unless
    // told not to; either way the kernel loads A from x by TMA.
    let no_halo = crate::plan::Options {
        halo: Some(false),
        ..Default::default()
    };
    let c2a = ConvSpec::new([2, 64, 56, 56], [64, 64, 3, 3]).padding(1, 1, 1, 1);
    for (s, halo) in [
        (c2a.clone(), true),
        (c2a.clone().bias_residual_relu(), true),
        (c2a.clone().bias_residual_relu().options(no_halo), false),
        (c124.bias_residual_relu(), false),
    ] {
        let srcs = s.sources(Arch::Sm90a, 132).unwrap();
        let srcs = &srcs[srcs.len() - 1..];
        let tag = if halo { "_halo" } else { "_im2col" };
        assert!(srcs[0].0.contains(tag), "{}", srcs[0].0);
        assert!(srcs[0].1.contains("#define TESSERA_SM90_IM2COL 1"));
        assert_eq!(srcs[0].1.contains("#define TESSERA_SM90_HALO 1"), halo);
        let c =
            compile(&srcs[0].1, &srcs[0].0, Arch::Sm90a, true).unwrap_or_else(|e| panic!("{e}"));
        assert!(c.cubin.len() > 1000);
    }
    let one = ConvSpec::new([2, 64, 56, 56], [64, 64, 1, 1])
        .sources(Arch::Sm90a, 132)
        .unwrap();
    assert_eq!(one.len(), 1);
}

#[cfg(feature = "cuda")]
#[test]
fn the_window_paths_kernels_compile_with_nvrtc() {
    use crate::launch::runtime::{compile, nvrtc_version};
    if let Err(e) = nvrtc_version() {
        if std::env::var("TESSERA_REQUIRE_NVRTC").as_deref() == Ok("1") {
            panic!("TESSERA_REQUIRE_NVRTC=1 but {e}");
        }
        eprintln!("SKIPPED: {e}");
        return;
    }
    let src = crate::conv::window::window_source();
    let c =
        compile(&src, "tessera_conv_window", Arch::Sm90a, true).unwrap_or_else(|e| panic!("{e}"));
    for entry in ["x", "w"] {
        assert!(
            c.log.contains(&format!("tessera_conv_window_{entry}")),
            "{}",
            c.log
        );
    }
    // The size assert is live.
    let skewed = src.replace("== 160", "== 168");
    assert_ne!(skewed, src);
    assert!(compile(&skewed, "tessera_conv_window", Arch::Sm90a, false).is_err());
    // The stem, a 3x3 stride-1 layer of 8 channels (two filter rows a k-tile), a dilated
    // stride-3 one, fp16, with and without the residual block: the staging kernels, then a
    // GEMM whose A is the window load; each compiles.
    let stem = ConvSpec::new([32, 3, 224, 224], [64, 3, 7, 7])
        .stride(2, 2)
        .padding(3, 3, 3, 3);
    for s in [
        stem.clone(),
        stem.clone().bias_residual_relu(),
        ConvSpec::new([8, 8, 56, 56], [32, 8, 3, 3]).padding(1, 1, 1, 1),
        ConvSpec::new([4, 8, 60, 361], [48, 8, 5, 3])
            .stride(1, 3)
            .dilation(2, 2)
            .padding(1, 2, 0, 3)
            .dtype(crate::DType::F16)
            .bias_relu_residual(),
    ] {
        let srcs = s.sources(Arch::Sm90a, 132).unwrap();
        assert_eq!(srcs.len(), 2, "{s}");
        assert_eq!(srcs[0], ("tessera_conv_window".to_string(), src.clone()));
        assert!(srcs[1].0.contains("_window"), "{}", srcs[1].0);
        assert!(srcs[1].1.contains("#define TESSERA_SM90_WINDOW 1"));
        let c =
            compile(&srcs[1].1, &srcs[1].0, Arch::Sm90a, true).unwrap_or_else(|e| panic!("{e}"));
        assert!(c.cubin.len() > 1000);
    }
}

#[test]
fn the_filter_is_a_panel_where_it_is_one_tile_column_and_fits() {
    let sm90 = |s: &ConvSpec| {
        let p = s.plan(Arch::Sm90a, 132).unwrap();
        let p = p.sm90().expect("the Hopper path").clone();
        p
    };
    // c2a: 64 output channels, one 128 x 64 tile column, a 73 KB filter beside 6 stages of A.
    let c2a = ConvSpec::new([256, 64, 56, 56], [64, 64, 3, 3]).padding(1, 1, 1, 1);
    let p = sm90(&c2a);
    assert!(p.b_panel && p.stages >= crate::plan::policy::PANEL_MIN_STAGES);
    assert!(
        p.to_string().contains("B panel      9 k-tiles x 8192 B"),
        "{p}"
    );
    assert!(sm90(&c2a.clone().bias_residual_relu()).b_panel);
    // c3a: 128 channels, 18 k-tiles of 16 KB: the filter does not fit beside the ring.
    let c3a = ConvSpec::new([256, 128, 28, 28], [128, 128, 3, 3]).padding(1, 1, 1, 1);
    assert!(!sm90(&c3a).b_panel);
    // The stem's window GEMM: 7 k-tiles of 8 KB.
    let stem = ConvSpec::new([32, 3, 224, 224], [64, 3, 7, 7])
        .stride(2, 2)
        .padding(3, 3, 3, 3);
    assert!(sm90(&stem).b_panel);
    // Ping-pong (a consumer may never see the first tile's stages) and a plain GEMM: no panel.
    let pp = c2a.options(crate::Options {
        schedule: Some(crate::plan::Schedule::PingPong),
        ..Default::default()
    });
    assert!(!sm90(&pp).b_panel);
    let g = crate::plan::Sm90Plan::new(&crate::plan::GemmProblem::new(4096, 64, 576)).unwrap();
    assert!(!g.b_panel);
}

/// Where a consumer's tile has more passes than its staged input has buffers of its own, the
/// fused block's residual is loaded into the store buffers (`Sm90Plan::staged_in_store`):
/// every pass during the mainloop, the stages kept; where the own buffers hold every pass, or
/// the tree stores an aux output beside D, not.
#[test]
fn the_residual_goes_into_the_store_buffers_where_passes_outnumber_its_own() {
    use crate::plan::sm90::{EPI_COLS, IN_BUFFERS};
    let sm90 = |s: &ConvSpec| s.plan(Arch::Sm90a, 132).unwrap().sm90().unwrap().clone();
    // c3a and c3s: 128 x 128 tiles, 4 passes a consumer.
    for x in [[256, 128, 28, 28], [256, 128, 56, 56]] {
        let stride = if x[2] == 56 { 2 } else { 1 };
        let spec = ConvSpec::new(x, [128, 128, 3, 3])
            .padding(1, 1, 1, 1)
            .stride(stride, stride);
        let plain = sm90(&spec);
        let fused = sm90(&spec.clone().bias_residual_relu());
        assert!(fused.staged_in_store, "{fused}");
        assert_eq!(fused.staged_inputs, 1);
        let passes = fused.m_halves * fused.cta_tile.1 / EPI_COLS;
        assert!(passes > IN_BUFFERS);
        let bufs = fused.store.as_ref().unwrap().buffers;
        assert!(bufs >= passes && fused.in_buffers == bufs, "{fused}");
        assert_eq!(fused.stages, plain.stages, "{fused}");
        assert!(fused.kernel_name().contains("_ins"));
        // The other residual order reads the residual after the ReLU: staged alike.
        assert!(sm90(&spec.clone().bias_relu_residual()).staged_in_store);
    }
    // c2a: a 128 x 64 tile, 2 passes a consumer, both in the residual's own buffers.
    let c2a = ConvSpec::new([256, 64, 56, 56], [64, 64, 3, 3]).padding(1, 1, 1, 1);
    let p = sm90(&c2a.bias_residual_relu());
    assert!(!p.staged_in_store && p.in_buffers == IN_BUFFERS, "{p}");
}
