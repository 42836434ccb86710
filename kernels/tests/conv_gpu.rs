//! The library convolution on the GPU, through the public API only (`ConvSpec`, `Conv2d`,
//! tensors described by their logical sizes and strides): a property sweep over the issue's
//! lists and named cases on both of its paths, every output compared with the float64
//! direct loop (see `common::conv`); then one test per rule of the tensor checks, each
//! asserting the error names the tensor, the dimension and the strides, and that y was not
//! written. Skips without a GPU (`TESSERA_REQUIRE_GPU=1` fails instead); `TESSERA_SEED=N`
//! replays the sweep's data.

mod common;

use std::sync::Arc;

use common::conv::{run_conv_case, ConvCase};
use common::{assert_passed, gpu, Rng};
use cudarc::driver::{CudaSlice, CudaStream, DevicePtr};
use half::bf16;
use tessera_kernels::plan::Schedule;
use tessera_kernels::{Context, Conv2d, ConvSpec, DType, Operands, Tensor, TensorMut};
use tessera_layout::Layout;

fn l(s: &str) -> Layout {
    s.parse().expect("layout")
}

fn run(ctx: &Context, what: &str, case: &ConvCase) {
    let r = run_conv_case(ctx, case).unwrap_or_else(|e| panic!("{what}: {}: {e}", case.spec));
    assert_passed(&format!("{what}: {}", case.spec), &r);
}

fn seed() -> u64 {
    std::env::var("TESSERA_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(2026)
}

fn pick<T: Copy>(rng: &mut Rng, v: &[T]) -> T {
    v[(rng.next_u64() % v.len() as u64) as usize]
}

/// `count` valid convolutions drawn from the lists, each with an epilogue and types
/// drawn too, their float64 check kept under a few seconds.
fn sweep(part: u64, count: usize) -> Vec<ConvCase> {
    let mut rng = Rng::new(seed() * 31 + part);
    let epilogues = [
        "acc",
        "relu(acc + bias_col)",
        "bias_residual_relu",
        "bias_relu_residual",
        "gelu(aux(acc + bias_col))",
        "alpha * acc + beta * c",
    ];
    let mut out = Vec::new();
    while out.len() < count {
        let n = pick(&mut rng, &[1, 2, 3, 7]);
        let (h, w) = (
            pick(&mut rng, &[1, 2, 5, 7, 13, 56]),
            pick(&mut rng, &[1, 2, 5, 7, 13, 56]),
        );
        let sizes = [1, 3, 8, 16, 24, 64, 100, 124, 127, 256];
        let (c, k) = (pick(&mut rng, &sizes), pick(&mut rng, &sizes));
        let taps = [1, 2, 3, 5, 7];
        let (r, s) = (pick(&mut rng, &taps), pick(&mut rng, &taps));
        let (sh, sw) = pick(&mut rng, &[(1, 1), (2, 2), (3, 3), (2, 3)]);
        let d = pick(&mut rng, &[1, 1, 2, 3]);
        let pad = pick(&mut rng, &[(0, 0), (1, 1), (2, 2), (1, 2)]);
        let mut spec = ConvSpec::new([n, c, h, w], [k, c, r, s])
            .stride(sh, sw)
            .padding(pad.0, pad.1, pad.0, pad.1)
            .dilation(d, d);
        let Ok([_, _, p, q]) = spec.output_dims() else {
            continue;
        };
        let macs = (n * p * q * k * c * r * s) as f64;
        if macs > 3e8 {
            continue;
        }
        let input = pick(&mut rng, &[DType::Bf16, DType::F16]);
        let outt = pick(&mut rng, &[input, input, DType::F32]);
        let e = pick(&mut rng, &epilogues);
        spec = spec
            .dtype(input)
            .out_dtype(outt)
            .epilogue(e)
            .expect("epilogue");
        if e.contains("beta") {
            spec = spec.alpha(0.75).beta(0.5);
        }
        out.push(ConvCase {
            seed: rng.next_u64(),
            ..ConvCase::new(spec)
        });
    }
    out
}

fn run_sweep(test: &str, part: u64) {
    let Some(ctx) = gpu(test) else { return };
    for case in sweep(part, 12) {
        run(&ctx, test, &case);
    }
}

#[test]
fn sweep_part_0() {
    run_sweep("sweep_part_0", 0);
}

#[test]
fn sweep_part_1() {
    run_sweep("sweep_part_1", 1);
}

#[test]
fn sweep_part_2() {
    run_sweep("sweep_part_2", 2);
}

#[test]
fn sweep_part_3() {
    run_sweep("sweep_part_3", 3);
}

/// The named cases of the issue: each path, the edge shapes, the residual orders.
fn named() -> Vec<(&'static str, &'static str, ConvSpec)> {
    let c = |x: [i64; 4], f: [i64; 4]| ConvSpec::new(x, f);
    vec![
        (
            "1x1 stride 1 (x is A)",
            "gemm",
            c([2, 64, 14, 14], [256, 64, 1, 1]),
        ),
        (
            "1x1 stride 1, residual block",
            "gemm",
            c([3, 256, 7, 7], [64, 256, 1, 1]).bias_residual_relu(),
        ),
        (
            "1x1 stride 2",
            "implicit gemm",
            c([2, 64, 14, 14], [128, 64, 1, 1]).stride(2, 2),
        ),
        (
            "3x3 pad 1, ReLU after the residual add",
            "halo gemm",
            c([2, 64, 28, 28], [64, 64, 3, 3])
                .padding(1, 1, 1, 1)
                .bias_residual_relu(),
        ),
        (
            "3x3 pad 1, residual added after the ReLU",
            "halo gemm",
            c([2, 64, 28, 28], [64, 64, 3, 3])
                .padding(1, 1, 1, 1)
                .bias_relu_residual(),
        ),
        (
            "the stem (C = 3, 7x7 stride 2)",
            "im2col+gemm",
            c([2, 3, 64, 64], [64, 3, 7, 7])
                .stride(2, 2)
                .padding(3, 3, 3, 3),
        ),
        (
            "odd channels (C = K = 127)",
            "implicit gemm",
            c([2, 127, 13, 13], [127, 127, 3, 3]).padding(1, 1, 1, 1),
        ),
        (
            "R != S, stride (2,3), asymmetric padding (1,2)",
            "implicit gemm",
            c([3, 24, 13, 13], [16, 24, 3, 5])
                .stride(2, 3)
                .padding(1, 2, 1, 2),
        ),
        (
            "dilation 3, padding wider than half the filter",
            "implicit gemm",
            c([2, 16, 13, 13], [24, 16, 3, 3])
                .dilation(3, 3)
                .padding(4, 4, 4, 4),
        ),
        (
            "P = 1 (the filter covers the height)",
            "im2col+gemm",
            c([7, 8, 5, 13], [8, 8, 5, 3]).padding(0, 0, 1, 1),
        ),
        (
            "P = Q = 1, no padding (A is x: one row per image)",
            "gemm",
            c([7, 16, 5, 5], [24, 16, 5, 5]),
        ),
        (
            "tails in every GEMM dimension",
            "implicit gemm",
            c([3, 100, 13, 7], [124, 100, 3, 3]).padding(1, 1, 1, 1),
        ),
        (
            "fp16 in, fp32 out, the pre-activation saved",
            "implicit gemm",
            c([2, 64, 14, 14], [64, 64, 3, 3])
                .padding(1, 1, 1, 1)
                .dtype(DType::F16)
                .out_dtype(DType::F32)
                .epilogue("gelu(aux(acc + bias_col))")
                .unwrap(),
        ),
    ]
}

#[test]
fn named_cases_on_both_paths() {
    let Some(ctx) = gpu("named_cases_on_both_paths") else {
        return;
    };
    for (what, path, spec) in named() {
        let conv = Conv2d::new(&ctx, &spec).expect("conv");
        assert_eq!(conv.path(), path, "{what}");
        run(&ctx, what, &ConvCase::new(spec));
    }
}

/// The window load (C <= 8: x staged in phase planes, each tap a shifted run of 16-byte
/// chunks; the GEMM batched over the output rows) over what it must get right: the stem,
/// C of 1, 4, 6 and 8, strides (2,2), (1,3), (2,1), dilation (3,3) and (2,3), asymmetric
/// padding, an odd count of taps (the zero strip) and an even one, two filter rows a k-tile
/// (S <= 4) and one, Q above and below 64 (128- and 64-row tiles), both residual orders, the
/// pre-activation saved in fp32 from fp16, alpha and beta with C.
#[test]
fn the_window_load_over_strides_dilation_and_few_channels() {
    let Some(ctx) = gpu("the_window_load_over_strides_dilation_and_few_channels") else {
        return;
    };
    let c = |x: [i64; 4], f: [i64; 4]| ConvSpec::new(x, f);
    let cases = [
        c([1, 3, 224, 224], [64, 3, 7, 7])
            .stride(2, 2)
            .padding(3, 3, 3, 3)
            .bias_residual_relu(),
        c([3, 1, 40, 150], [40, 1, 3, 3]).padding(1, 1, 1, 1),
        c([2, 4, 30, 200], [72, 4, 5, 8])
            .stride(2, 2)
            .padding(2, 1, 3, 4)
            .bias_relu_residual(),
        c([2, 8, 33, 260], [64, 8, 3, 3])
            .stride(1, 3)
            .dilation(3, 3)
            .padding(3, 3, 3, 3)
            .dtype(DType::F16)
            .out_dtype(DType::F32)
            .epilogue("gelu(aux(acc + bias_col))")
            .unwrap(),
        c([3, 6, 23, 300], [24, 6, 2, 2])
            .stride(2, 1)
            .dilation(2, 3)
            .padding(1, 2, 1, 2)
            .epilogue("alpha * acc + beta * c")
            .unwrap()
            .alpha(0.75)
            .beta(0.5),
        c([2, 3, 56, 56], [32, 3, 3, 3]).padding(1, 1, 1, 1),
    ];
    for spec in cases {
        let conv = Conv2d::new(&ctx, &spec).expect("conv");
        assert_eq!(conv.path(), "window gemm", "{spec}");
        run(&ctx, "window gemm", &ConvCase::new(spec));
    }
}

/// The implicit GEMM (A loaded from x by TMA's im2col mode, C a multiple of 64) over the
/// geometry it must get right: strides (2,2) and (2,3), asymmetric padding, dilation, R != S,
/// a window wider than the padded input's edge, P or Q of 1, M and N off the tiles, both
/// residual orders, fp16 into fp32, a batch of 1.
#[test]
fn the_implicit_gemm_over_strides_padding_and_dilation() {
    let Some(ctx) = gpu("the_implicit_gemm_over_strides_padding_and_dilation") else {
        return;
    };
    let c = |x: [i64; 4], f: [i64; 4]| ConvSpec::new(x, f);
    let cases = [
        c([2, 128, 15, 15], [96, 128, 3, 3])
            .stride(2, 2)
            .padding(1, 1, 1, 1),
        c([3, 64, 13, 11], [100, 64, 3, 5])
            .stride(2, 3)
            .padding(1, 2, 0, 1)
            .dilation(2, 1)
            .bias_residual_relu(),
        c([1, 64, 9, 9], [64, 64, 7, 7])
            .padding(3, 3, 3, 3)
            .bias_relu_residual(),
        c([2, 192, 7, 1], [40, 192, 3, 1]).padding(1, 1, 0, 0),
        c([5, 64, 6, 7], [72, 64, 2, 2]).stride(2, 2),
        c([2, 64, 10, 10], [64, 64, 3, 3])
            .padding(1, 1, 1, 1)
            .dtype(DType::F16)
            .out_dtype(DType::F32)
            .epilogue("gelu(acc + bias_col)")
            .expect("epilogue"),
    ];
    for spec in cases {
        let conv = Conv2d::new(&ctx, &spec).expect("conv");
        assert_eq!(conv.path(), "implicit gemm", "{spec}");
        assert_eq!(conv.workspace_bytes(), 0, "{spec}");
        run(&ctx, "implicit gemm", &ConvCase::new(spec));
    }
}

/// The halo load (stride 1, x read in place: one strip per filter row and channel
/// block serves all its taps, the tile's rows whole output rows a power-of-two pitch apart,
/// the rows past Q and P computed and dropped by the epilogue's 4-D maps), forced on layers
/// the planner might not give it: pitches 16, 32, 64 and 256 (a tile part of one output row,
/// two tiles a row), one and three channel blocks, R != S, 7x7 and 1x3 filters, dilation
/// along W, asymmetric padding, P = 1, N tails (K = 96, 200), both residual orders, the
/// pre-activation saved, fp16, and C = 96 and 24 (their last k-tile partly past C).
#[test]
fn the_halo_load_over_pitches_taps_and_epilogues() {
    let Some(ctx) = gpu("the_halo_load_over_pitches_taps_and_epilogues") else {
        return;
    };
    let halo = tessera_kernels::plan::Options {
        halo: Some(true),
        ..Default::default()
    };
    let c = |x: [i64; 4], f: [i64; 4]| ConvSpec::new(x, f).options(halo);
    let cases = [
        c([2, 64, 56, 56], [64, 64, 3, 3])
            .padding(1, 1, 1, 1)
            .bias_residual_relu(),
        c([3, 128, 28, 28], [128, 128, 3, 3])
            .padding(1, 1, 1, 1)
            .bias_relu_residual(),
        c([2, 64, 14, 14], [96, 64, 3, 3]).padding(1, 1, 1, 1),
        c([1, 64, 13, 11], [64, 64, 5, 3])
            .padding(2, 1, 1, 2)
            .dilation(1, 2)
            .bias_residual_relu(),
        c([1, 64, 6, 150], [64, 64, 3, 3]).padding(1, 1, 1, 1),
        c([1, 64, 9, 9], [64, 64, 7, 7])
            .padding(3, 3, 3, 3)
            .epilogue("gelu(aux(acc + bias_col))")
            .expect("epilogue"),
        c([2, 64, 7, 7], [200, 64, 1, 3]).padding(0, 0, 1, 1),
        c([3, 64, 3, 20], [64, 64, 3, 3]).bias_relu_residual(),
        c([7, 192, 5, 5], [64, 192, 3, 3])
            .padding(1, 1, 1, 1)
            .dtype(DType::F16)
            .bias_residual_relu(),
        // Channels that do not fill their last k-tile: zeros past C from the tensor map,
        // against the staged filter's zeros.
        c([2, 96, 30, 30], [64, 96, 3, 3])
            .padding(1, 1, 1, 1)
            .bias_residual_relu(),
        c([3, 24, 17, 17], [32, 24, 3, 3]).padding(1, 1, 1, 1),
    ];
    for spec in cases {
        let conv = Conv2d::new(&ctx, &spec).expect("conv");
        assert_eq!(conv.path(), "halo gemm", "{spec}");
        // (Only the padded filter is staged, where C does not fill its k-tiles.)
        assert_eq!(
            conv.workspace_bytes() == 0,
            spec.input_dims()[1] % 64 == 0,
            "{spec}"
        );
        run(&ctx, "halo gemm", &ConvCase::new(spec));
    }
}

/// Output channel counts that take the planner's exact-width tiles (the fewest equal columns of
/// K on the 32-column grid: 96, 160, 192 or 224 wide), plain and with both residual orders, K
/// itself a multiple of 32 or not, one column or several.
#[test]
fn output_channels_on_exact_width_tiles() {
    let Some(ctx) = gpu("output_channels_on_exact_width_tiles") else {
        return;
    };
    let c = |x: [i64; 4], f: [i64; 4]| ConvSpec::new(x, f);
    let cases = [
        c([16, 64, 28, 28], [96, 64, 3, 3]).padding(1, 1, 1, 1),
        // (The filter held as a B panel beside a ring that still stages the residual.)
        c([16, 64, 28, 28], [96, 64, 3, 3])
            .padding(1, 1, 1, 1)
            .bias_residual_relu(),
        c([24, 128, 20, 21], [160, 128, 3, 3])
            .padding(1, 1, 1, 1)
            .bias_residual_relu(),
        c([20, 64, 23, 23], [184, 64, 3, 3])
            .padding(1, 1, 1, 1)
            .bias_relu_residual(),
        c([12, 96, 30, 30], [224, 96, 1, 1]),
        // Two columns of 160 for 320 channels, three of 224 for 600.
        c([12, 64, 24, 24], [320, 64, 3, 3])
            .padding(1, 1, 1, 1)
            .bias_residual_relu(),
        c([12, 64, 24, 24], [600, 64, 1, 1]),
    ];
    for spec in cases {
        let conv = Conv2d::new(&ctx, &spec).expect("conv");
        run(&ctx, conv.path(), &ConvCase::new(spec));
    }
}

/// The residual block over many tiles a CTA (the grid capped), so that the per-tile bias stage
/// and the staged residual's buffers are reused: the halo load, TMA's im2col load at stride 2,
/// ping-pong.
#[test]
fn the_residual_block_over_many_tiles_a_cta() {
    let Some(ctx) = gpu("the_residual_block_over_many_tiles_a_cta") else {
        return;
    };
    let capped = |schedule| tessera_kernels::plan::Options {
        max_ctas: Some(5),
        schedule,
        ..Default::default()
    };
    let c = |x: [i64; 4], f: [i64; 4], o| ConvSpec::new(x, f).options(o);
    let cases = [
        c([4, 64, 20, 20], [64, 64, 3, 3], capped(None))
            .padding(1, 1, 1, 1)
            .bias_residual_relu(),
        c([3, 128, 15, 15], [128, 128, 3, 3], capped(None))
            .stride(2, 2)
            .padding(1, 1, 1, 1)
            .bias_relu_residual(),
        c(
            [3, 64, 17, 17],
            [96, 64, 3, 3],
            capped(Some(Schedule::PingPong)),
        )
        .padding(1, 1, 1, 1)
        .bias_residual_relu(),
    ];
    for spec in cases {
        let conv = Conv2d::new(&ctx, &spec).expect("conv");
        run(&ctx, conv.path(), &ConvCase::new(spec));
    }
}

/// The implicit GEMM where C is not a multiple of 64: every tap's last k-tile reads zeros
/// past channel C against a filter staged with zeros there, x read in place (C·2 bytes a
/// multiple of 16) or staged with its pixels on 16 bytes; one k-tile or two a tap; strides,
/// dilation, the residual orders, fp16; the workspace the Conv2d's own or the caller's, which
/// starts as NaN bytes (the padding channels must be written, not assumed zero). A stride-1
/// layer whose x is read in place may take the halo load instead (the same padded k-tiles).
#[test]
fn the_implicit_gemm_on_padded_channels() {
    let Some(ctx) = gpu("the_implicit_gemm_on_padded_channels") else {
        return;
    };
    let c = |x: [i64; 4], f: [i64; 4]| ConvSpec::new(x, f);
    let cases = [
        (
            c([2, 100, 12, 9], [124, 100, 3, 3]).padding(1, 1, 1, 1),
            true,
        ),
        (
            c([3, 124, 7, 7], [64, 124, 3, 3])
                .padding(1, 1, 1, 1)
                .bias_residual_relu(),
            false,
        ),
        (
            c([4, 127, 16, 16], [127, 127, 3, 3])
                .padding(1, 1, 1, 1)
                .bias_relu_residual(),
            true,
        ),
        (
            c([4, 96, 24, 24], [96, 96, 3, 3])
                .stride(2, 2)
                .padding(1, 1, 1, 1),
            false,
        ),
        (
            c([4, 72, 20, 21], [40, 72, 3, 5])
                .stride(2, 3)
                .padding(1, 2, 0, 1)
                .dilation(2, 1),
            true,
        ),
        (
            c([2, 40, 8, 8], [48, 40, 3, 3])
                .padding(1, 1, 1, 1)
                .dtype(DType::F16)
                .out_dtype(DType::F32)
                .epilogue("gelu(acc + bias_col)")
                .expect("epilogue"),
            true,
        ),
        (c([3, 200, 9, 9], [32, 200, 2, 2]), false),
        // Channels read in place, the filter staged to fill its 128-wide tile column (K =
        // 100 and 104: GEMMs long enough to pay for the copy).
        (
            c([128, 128, 28, 28], [100, 128, 3, 3])
                .padding(1, 1, 1, 1)
                .bias_residual_relu(),
            false,
        ),
        (
            c([128, 128, 29, 27], [104, 128, 3, 3]).padding(1, 1, 1, 1),
            true,
        ),
    ];
    for (spec, caller_workspace) in cases {
        let conv = Conv2d::new(&ctx, &spec).expect("conv");
        // (The stride-1 layer of x read in place may take the halo load, which reads the
        // same padded k-tiles.)
        assert!(
            ["implicit gemm", "halo gemm"].contains(&conv.path()),
            "{spec}: {}",
            conv.path()
        );
        assert!(conv.workspace_bytes() > 0, "{spec}");
        let mut case = ConvCase::new(spec);
        case.caller_workspace = caller_workspace;
        case.repeat = 1;
        run(&ctx, "implicit gemm, padded channels", &case);
    }
}

#[test]
fn the_sm80_class_gemm_under_the_convolution() {
    let Some(ctx) = gpu("the_sm80_class_gemm_under_the_convolution") else {
        return;
    };
    let opts = tessera_kernels::Options {
        sm80: true,
        ..Default::default()
    };
    for (what, _, spec) in named().into_iter().take(6) {
        run(&ctx, what, &ConvCase::new(spec.options(opts)));
    }
}

#[test]
fn workspace_passed_per_launch_repeated_launches_and_y_over_the_residual() {
    let Some(ctx) = gpu("workspace_passed_per_launch_repeated_launches_and_y_over_the_residual")
    else {
        return;
    };
    let spec = ConvSpec::new([2, 32, 9, 9], [48, 32, 3, 3])
        .padding(1, 1, 1, 1)
        .bias_residual_relu();
    run(
        &ctx,
        "caller's workspace",
        &ConvCase {
            caller_workspace: true,
            ..ConvCase::new(spec.clone())
        },
    );
    run(
        &ctx,
        "three launches",
        &ConvCase {
            repeat: 2,
            ..ConvCase::new(spec.clone())
        },
    );
    run(
        &ctx,
        "y in place over the residual",
        &ConvCase {
            y_over_residual: true,
            ..ConvCase::new(spec.clone())
        },
    );
    run(
        &ctx,
        "1x1, y in place over the residual",
        &ConvCase {
            y_over_residual: true,
            ..ConvCase::new(ConvSpec::new([2, 32, 9, 9], [32, 32, 1, 1]).bias_relu_residual())
        },
    );
    // Tight tensors without junk strides, and no layouts at all, alike.
    run(
        &ctx,
        "plain strides",
        &ConvCase {
            junk_unit_strides: false,
            ..ConvCase::new(ConvSpec::new([1, 8, 1, 1], [16, 8, 1, 1]))
        },
    );
}

/// `(N,C,H,W)` sizes of more than 2^31 elements need 64-bit offsets in the gather and the
/// GEMM; then the halo load on an x and a y of 2^31+ elements. About 40 GB of device memory
/// and a few minutes of host time: run with `--ignored`.
#[test]
#[ignore]
fn tensors_of_more_than_2_pow_31_elements() {
    let Some(ctx) = gpu("tensors_of_more_than_2_pow_31_elements") else {
        return;
    };
    // x: 1 x 8 x 16400 x 16400 = 2 151 680 000 elements; the gather reads its far end.
    let gather = ConvSpec::new([1, 8, 16400, 16400], [16, 8, 3, 3])
        .stride(4, 4)
        .padding(1, 1, 1, 1)
        .epilogue("acc + bias_col")
        .unwrap();
    // The same x under a 1x1 convolution: A is x (2^31+ elements) and y has 4.3e9.
    let direct = ConvSpec::new([1, 8, 16400, 16400], [16, 8, 1, 1]);
    // The halo load: x and y of 2^31+ elements each (64 channels), a pitch of 33 tiles a row;
    // its strips and the epilogue's 4-D maps address the far images.
    let halo = ConvSpec::new([2, 64, 4100, 4100], [64, 64, 3, 3])
        .padding(1, 1, 1, 1)
        .options(tessera_kernels::plan::Options {
            halo: Some(true),
            ..Default::default()
        });
    for (what, spec) in [("gather", gather), ("direct", direct), ("halo", halo)] {
        let r = run_conv_case(&ctx, &ConvCase::new(spec)).unwrap_or_else(|e| panic!("{what}: {e}"));
        assert!(r.rows != "all", "checked on blocks of rows");
        assert_passed(what, &r);
    }
}

// --- The tensor checks: one test per rule. ---

struct Setup {
    stream: Arc<CudaStream>,
    conv: Conv2d,
    x: CudaSlice<bf16>,
    w: CudaSlice<bf16>,
    y: CudaSlice<bf16>,
    bias: CudaSlice<bf16>,
    res: CudaSlice<bf16>,
}

// x (2,8,5,5), w (8,8,3,3), padding 1: y (2,8,5,5). Channels-last strides (200,1,40,8).
const X: usize = 2 * 8 * 5 * 5;
const XL: &str = "(2,8,5,5):(200,1,40,8)";
const NCHW: &str = "(2,8,5,5):(200,25,5,1)";

fn setup(test: &str) -> Option<Setup> {
    let ctx = gpu(test)?;
    let stream = ctx.cudarc().default_stream();
    let spec = ConvSpec::new([2, 8, 5, 5], [8, 8, 3, 3])
        .padding(1, 1, 1, 1)
        .bias_residual_relu();
    let conv = Conv2d::new(&ctx, &spec).expect("conv");
    let z = |n: usize| {
        stream
            .clone_htod(&vec![bf16::from_f32(0.5); n])
            .expect("upload")
    };
    let (x, w, bias, res) = (z(2 * X), z(8 * 9 * 8), z(8), z(X));
    // y holds a marker: a refused launch must leave it untouched.
    let y = stream
        .clone_htod(&vec![bf16::from_f32(7.0); X])
        .expect("upload");
    Some(Setup {
        stream,
        conv,
        x,
        w,
        y,
        bias,
        res,
    })
}

/// A tensor by address: `(device address, element type, elements, layout)`.
type Raw = (u64, DType, usize, &'static str);

impl Setup {
    /// The launch with x, y and the residual replaced where given.
    fn launch(
        &mut self,
        x: Option<Raw>,
        y: Option<Raw>,
        res: Option<Raw>,
    ) -> Result<(), tessera_kernels::KernelError> {
        let x = x.unwrap_or((self.ptr(&self.x), DType::Bf16, 2 * X, XL));
        let y = y.unwrap_or((self.ptr(&self.y), DType::Bf16, X, XL));
        let res = res.unwrap_or((self.ptr(&self.res), DType::Bf16, X, XL));
        // SAFETY: every address lies in a buffer of this setup (or of the test), alive for
        // the launch, with at least the elements given.
        let (x, y, res) = unsafe {
            (
                Tensor::from_raw(x.0, Some(x.1), x.2).with_layout(l(x.3)),
                TensorMut::from_raw(y.0, Some(y.1), y.2).with_layout(l(y.3)),
                Tensor::from_raw(res.0, Some(res.1), res.2).with_layout(l(res.3)),
            )
        };
        let ops = Operands::new().bias_col(&self.bias).residual(res);
        self.conv.launch(&self.stream, x, &self.w, y, ops)
    }

    fn untouched(&self) {
        self.stream.synchronize().expect("sync");
        let y = self.stream.clone_dtoh(&self.y).expect("download");
        assert!(y.iter().all(|&v| v == bf16::from_f32(7.0)), "y was written");
    }

    fn ptr<T>(&self, b: &CudaSlice<T>) -> u64 {
        b.device_ptr(&self.stream).0
    }
}

fn expect_err(what: &str, r: Result<(), tessera_kernels::KernelError>, needles: &[&str]) {
    let e = r.expect_err(what).to_string();
    eprintln!("{what}: {e}");
    for n in needles {
        assert!(e.contains(n), "{what}: `{e}` lacks `{n}`");
    }
}

#[test]
fn a_channels_last_launch_passes_the_checks() {
    let Some(mut s) = setup("a_channels_last_launch_passes_the_checks") else {
        return;
    };
    s.launch(None, None, None).expect("launch");
    s.stream.synchronize().expect("sync");
}

#[test]
fn an_nchw_input_is_refused() {
    let Some(mut s) = setup("an_nchw_input_is_refused") else {
        return;
    };
    let x = (s.ptr(&s.x), DType::Bf16, 2 * X, NCHW);
    let r = s.launch(Some(x), None, None);
    expect_err(
        "NCHW x",
        r,
        &[
            "conv launch: x: layout (2,8,5,5):(200,25,5,1)",
            "dimension C (size 8) has stride 25, channels-last needs 1",
            "contiguous NCHW",
        ],
    );
    s.untouched();
}

/// The PyTorch extension's bug: its output, made with `torch::zeros(..., ChannelsLast)` in
/// C++, had NCHW strides, and the kernel wrote NHWC into it. tessera reads the strides.
#[test]
fn the_extensions_nchw_output_is_refused() {
    let Some(mut s) = setup("the_extensions_nchw_output_is_refused") else {
        return;
    };
    let y = (s.ptr(&s.y), DType::Bf16, X, NCHW);
    let r = s.launch(None, Some(y), None);
    expect_err(
        "NCHW y",
        r,
        &[
            "conv launch: y: layout (2,8,5,5):(200,25,5,1)",
            "dimension K (size 8) has stride 25, channels-last needs 1",
            "torch::zeros and torch::ones drop the memory format",
        ],
    );
    s.untouched();
}

#[test]
fn sliced_views_are_refused() {
    let Some(mut s) = setup("sliced_views_are_refused") else {
        return;
    };
    // x[:, :, ::2] of a (2,8,10,5) channels-last tensor (x's buffer holds 2·X elements).
    let x = (s.ptr(&s.x), DType::Bf16, 2 * X, "(2,8,5,5):(400,1,80,8)");
    let r = s.launch(Some(x), None, None);
    expect_err(
        "x[:, :, ::2]",
        r,
        &[
            "dimension H (size 5) has stride 80, channels-last needs 40",
            "view",
        ],
    );
    // x[:, :8] of a (2,16,5,5) channels-last tensor.
    let x = (s.ptr(&s.x), DType::Bf16, 2 * X, "(2,8,5,5):(400,1,80,16)");
    let r = s.launch(Some(x), None, None);
    expect_err(
        "x[:, :8]",
        r,
        &["dimension W (size 5) has stride 16, channels-last needs 8"],
    );
    s.untouched();
}

#[test]
fn a_misaligned_base_is_refused() {
    let Some(mut s) = setup("a_misaligned_base_is_refused") else {
        return;
    };
    // One element into x's buffer.
    let x = (s.ptr(&s.x) + 2, DType::Bf16, 2 * X - 1, XL);
    let r = s.launch(Some(x), None, None);
    expect_err(
        "x + 1 element",
        r,
        &["conv launch: x:", "is not 16-byte aligned"],
    );
    s.untouched();
}

#[test]
fn an_output_overlapping_an_input_is_refused() {
    let Some(mut s) = setup("an_output_overlapping_an_input_is_refused") else {
        return;
    };
    // y inside x's buffer (which holds 2·X elements).
    let y = (s.ptr(&s.x) + 64, DType::Bf16, X, XL);
    let r = s.launch(None, Some(y), None);
    // The message names both tensors and their address ranges, in either order.
    expect_err("y inside x", r, &["y [", "x [", "overlaps"]);
    s.untouched();
}

#[test]
fn a_residual_of_the_wrong_shape_or_strides_is_refused() {
    let Some(mut s) = setup("a_residual_of_the_wrong_shape_or_strides_is_refused") else {
        return;
    };
    let res = (s.ptr(&s.res), DType::Bf16, X, "(2,8,3,3):(72,1,24,8)");
    let r = s.launch(None, None, Some(res));
    expect_err(
        "residual (2,8,3,3)",
        r,
        &[
            "residual",
            "the shape must be the logical sizes (N,K,P,Q) = (2,8,5,5)",
        ],
    );
    let res = (s.ptr(&s.res), DType::Bf16, X, NCHW);
    let r = s.launch(None, None, Some(res));
    expect_err(
        "NCHW residual",
        r,
        &[
            "residual: layout (2,8,5,5):(200,25,5,1)",
            "dimension K (size 8) has stride 25",
        ],
    );
    s.untouched();
}

#[test]
fn wrong_types_short_buffers_and_missing_workspaces_are_refused() {
    let Some(mut s) = setup("wrong_types_short_buffers_and_missing_workspaces_are_refused") else {
        return;
    };
    let f: CudaSlice<f32> = s.stream.alloc_zeros(X).expect("alloc");
    let r = s.launch(Some((s.ptr(&f), DType::F32, X, XL)), None, None);
    expect_err(
        "fp32 x",
        r,
        &["x:", "holds fp32, the convolution needs bf16"],
    );
    let short: CudaSlice<bf16> = s.stream.alloc_zeros(X - 8).expect("alloc");
    let r = s.launch(Some((s.ptr(&short), DType::Bf16, X - 8, XL)), None, None);
    expect_err(
        "short x",
        r,
        &["x:", "needs 400 elements, the buffer has 392"],
    );
    // A Conv2d without a workspace: the launch must pass one, large enough.
    let ctx = gpu("wrong_types_short_buffers_and_missing_workspaces_are_refused").expect("gpu");
    let bare = Conv2d::without_workspace(&ctx, s.conv.spec()).expect("conv");
    assert!(bare.workspace_bytes() > 0);
    let ops = Operands::new().bias_col(&s.bias).residual(&s.res);
    let r = bare.launch(&s.stream, &s.x, &s.w, &mut s.y, ops);
    expect_err(
        "no workspace",
        r,
        &["built without a workspace", "Operands::workspace"],
    );
    let mut small: CudaSlice<u8> = s.stream.alloc_zeros(16).expect("alloc");
    let ops = Operands::new()
        .bias_col(&s.bias)
        .residual(&s.res)
        .workspace(&mut small);
    let r = bare.launch(&s.stream, &s.x, &s.w, &mut s.y, ops);
    expect_err("small workspace", r, &["workspace", "16 bytes", "needs"]);
    // The GEMM's own checks, in the convolution's words: a bias shorter than K = 8 (a longer
    // buffer is accepted, as for every operand: its first K elements are the bias).
    let short_bias: CudaSlice<bf16> = s.stream.alloc_zeros(4).expect("alloc");
    let ops = Operands::new().bias_col(&short_bias).residual(&s.res);
    let r = s.conv.launch(&s.stream, &s.x, &s.w, &mut s.y, ops);
    expect_err("bias of 4", r, &["bias_col"]);
    s.untouched();
}
