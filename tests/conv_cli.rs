//! `tessera plan conv`, run as a program: the im2col layout, the path and its reason, the
//! sources NVRTC compiles, and the command line's errors. Needs no GPU and no NVRTC.

use std::process::{Command, Output};

fn plan(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_tessera"))
        .args(["plan", "conv"])
        .args(args)
        .output()
        .expect("the binary runs")
}

fn text(b: &[u8]) -> String {
    String::from_utf8(b.to_vec()).expect("utf-8 output")
}

const C2A: [&str; 16] = [
    "--n", "128", "--h", "56", "--w", "56", "--c", "64", "--k", "64", "--r", "3", "--s", "3",
    "--pad", "1",
];

#[test]
fn a_padded_3x3_layer_of_64_channels_takes_the_halo_load_and_says_so() {
    let o = plan(&C2A);
    let out = text(&o.stdout);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    for needle in [
        "-> y (N,K,P,Q) = (128,64,56,56)",
        "L = ((56,56,128),(64,3,3)):((64,3584,200704),(1,64,3584))",
        "offset -3648",
        "coalesced (401408,(192,3)):(64,(1,3584)): (C,S) is one contiguous run of C·S = 192 elements",
        "path         halo gemm: taps read the zero padding",
        "loads A straight from x by the halo load",
        "2 output rows a tile, 64 pixels apart",
        "workspace    0 bytes",
        "gemm 401408x64x576 bf16->bf16 A row, B col, D row: acc on sm_90a",
    ] {
        assert!(out.contains(needle), "`{needle}` missing from:\n{out}");
    }
    // Told not to, the same layer takes TMA's im2col load.
    let mut args: Vec<&str> = C2A.to_vec();
    args.extend(["--path", "no-halo"]);
    let o = plan(&args);
    let out = text(&o.stdout);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    for needle in [
        "path         implicit gemm: taps read the zero padding",
        "loads A straight from x with TMA's im2col mode",
    ] {
        assert!(out.contains(needle), "`{needle}` missing from:\n{out}");
    }
}

/// 96 channels: two k-tiles a tap, the second half past C, so the filter is staged with
/// zero channels; x is read in place.
const C96: [&str; 16] = [
    "--n", "128", "--h", "56", "--w", "56", "--c", "96", "--k", "64", "--r", "3", "--s", "3",
    "--pad", "1",
];

/// 8 channels: padded to 64 a tap, eight times the MMA work; the gather path.
const C8: [&str; 16] = [
    "--n", "128", "--h", "56", "--w", "56", "--c", "8", "--k", "64", "--r", "3", "--s", "3",
    "--pad", "1",
];

#[rustfmt::skip]
const C9: [&str; 16] = [
    "--n", "128", "--h", "56", "--w", "56", "--c", "9", "--k", "64", "--r", "3", "--s", "3",
    "--pad", "1",
];

#[test]
fn a_3x3_layer_of_96_channels_pads_them_and_says_so() {
    let o = plan(&C96);
    let out = text(&o.stdout);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    for needle in [
        "path         halo gemm: taps read the zero padding",
        "C = 96 is not a multiple of 64: each tap's last k-tile reads channels 96..128 as zeros",
        "x is read in place",
        "the GEMM's K = R·S·128 = 1152",
        "workspace    147456 bytes",
    ] {
        assert!(out.contains(needle), "`{needle}` missing from:\n{out}");
    }
}

#[test]
fn a_3x3_layer_of_8_channels_takes_the_window_load_and_says_so() {
    let o = plan(&C8);
    let out = text(&o.stdout);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    for needle in [
        "path         window gemm: C = 8 <= 8 channels",
        "a k-tile is 2 filter row(s) of 3 taps",
        "7168 batches of M = Q = 56 by K = 64·2 = 128",
        "workspace    7356416 bytes",
    ] {
        assert!(out.contains(needle), "`{needle}` missing from:\n{out}");
    }
}

#[test]
fn a_3x3_layer_of_9_channels_takes_the_gather_and_says_so() {
    let o = plan(&C9);
    let out = text(&o.stdout);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    for needle in [
        "path         im2col + gemm: taps read the zero padding",
        "this path pays that copy",
        "the implicit GEMM could take it with padded channels, but: C = 9",
        "workspace    102760448 bytes",
    ] {
        assert!(out.contains(needle), "`{needle}` missing from:\n{out}");
    }
}

#[test]
fn a_1x1_layer_runs_on_x_itself() {
    let o = plan(&[
        "--n",
        "32",
        "--h",
        "14",
        "--w",
        "14",
        "--c",
        "1024",
        "--k",
        "256",
        "--r",
        "1",
        "--s",
        "1",
        "--epilogue",
        "bias_residual_relu",
    ]);
    let out = text(&o.stdout);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    assert!(out.contains("path         gemm: A is x itself"), "{out}");
    assert!(out.contains("workspace    0 bytes"), "{out}");
    assert!(out.contains("relu(acc + bias_col + residual)"), "{out}");
}

#[test]
fn the_sources_are_the_gather_then_the_gemm() {
    // Padded channels: the staging copy, then the GEMM.
    let mut args = C96.to_vec();
    args.push("--emit-cuda-only");
    let out = text(&plan(&args).stdout);
    assert!(
        out.starts_with("// ==== NVRTC program 1 of 2: tessera_stage_rows ===="),
        "{out}"
    );
    assert!(out.contains("// ==== NVRTC program 2 of 2: tessera_gemm"));
    let mut args = C9.to_vec();
    args.push("--emit-cuda-only");
    let o = plan(&args);
    let out = text(&o.stdout);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    assert!(
        out.starts_with("// ==== NVRTC program 1 of 3: tessera_conv_im2col ===="),
        "{out}"
    );
    assert!(out.contains("tessera_conv_im2col_rows8"));
    assert!(out.contains("// ==== NVRTC program 3 of 3: tessera_gemm"));
    // The window load: its staging kernels, then the GEMM.
    let mut args = C8.to_vec();
    args.push("--emit-cuda-only");
    let out = text(&plan(&args).stdout);
    assert!(
        out.starts_with("// ==== NVRTC program 1 of 2: tessera_conv_window ===="),
        "{out}"
    );
    assert!(out.contains("tessera_conv_window_x"));
    assert!(out.contains("#define TESSERA_SM90_WINDOW 1"));
    // A direct convolution compiles the GEMM alone, with no separator.
    let o = plan(&[
        "--n",
        "2",
        "--h",
        "8",
        "--w",
        "8",
        "--c",
        "64",
        "--k",
        "64",
        "--r",
        "1",
        "--s",
        "1",
        "--emit-cuda-only",
    ]);
    let out = text(&o.stdout);
    assert!(!out.contains("===="), "{out}");
    assert!(out.contains("tessera_gemm"));
}

#[test]
fn stride_padding_and_dilation_take_one_two_or_four_values() {
    let o = plan(&[
        "--n",
        "2",
        "--h",
        "13",
        "--w",
        "13",
        "--c",
        "24",
        "--k",
        "16",
        "--r",
        "3",
        "--s",
        "5",
        "--stride",
        "2,3",
        "--pad",
        "1,2,1,2",
        "--dilation",
        "2",
    ]);
    let out = text(&o.stdout);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    assert!(
        out.contains("stride (2,3), padding (1,2,1,2), dilation (2,2) -> y (N,K,P,Q) = (2,16,6,3)"),
        "{out}"
    );
    for (flag, bad) in [
        ("--pad", "1,2,3"),
        ("--stride", "a"),
        ("--dilation", "1,2,3"),
    ] {
        // C2A without its own `--pad 1`.
        let mut args = C2A[..14].to_vec();
        args.extend([flag, bad]);
        let o = plan(&args);
        assert_eq!(o.status.code(), Some(1), "{flag} {bad}");
        assert!(text(&o.stderr).contains(flag), "{}", text(&o.stderr));
    }
    // A filter larger than the padded input is refused with the reason.
    let o = plan(&[
        "--n", "1", "--h", "2", "--w", "8", "--c", "8", "--k", "8", "--r", "3", "--s", "3",
    ]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        text(&o.stderr).contains("the dilated filter spans 3 rows"),
        "{}",
        text(&o.stderr)
    );
}

/// `bench conv --layers` takes a layer of no list as `C:K:HW:RS:STRIDE:PAD`; a malformed one
/// is refused by name before any device is looked for.
#[cfg(feature = "cuda")]
#[test]
fn bench_conv_refuses_a_malformed_layer_of_no_list() {
    for (layer, needle) in [
        ("64:64:56:3:1", "six numbers"),
        ("64:64:x:3:1:1", "invalid digit"),
    ] {
        let o = Command::new(env!("CARGO_BIN_EXE_tessera"))
            .args(["bench", "conv", "--layers", layer])
            .output()
            .expect("tessera runs");
        let err = text(&o.stderr);
        assert_ne!(o.status.code(), Some(0));
        assert!(
            err.contains(layer) && err.contains(needle),
            "{layer}: {err}"
        );
    }
}
