//! `tessera plan gemm`, run as a program: the Hopper path's cluster options on the command
//! line. Needs no GPU and no NVRTC.

use std::process::{Command, Output};

/// `tessera plan gemm` of an `m x n x k` problem with `args`.
fn plan_mnk(m: &str, n: &str, k: &str, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_tessera"))
        .args(["plan", "gemm", "--m", m, "--n", n, "--k", k])
        .args(args)
        .output()
        .expect("the binary runs")
}

fn plan(args: &[&str]) -> Output {
    plan_mnk("300", "300", "64", args)
}

fn text(b: &[u8]) -> String {
    String::from_utf8(b.to_vec()).expect("utf-8 output")
}

#[test]
fn cluster_is_shown_and_emitted() {
    // 300 x 300 in 128 x 128 tiles: 3 x 3 tiles; pairs along N share A: 3 x 2 cluster tiles.
    let o = plan(&[
        "--path",
        "sm90",
        "--tile",
        "128x128",
        "--cluster",
        "2",
        "--share",
        "a",
    ]);
    let out = text(&o.stdout);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    assert!(out.contains("_c2a_ts_sm_90a"), "{out}");
    assert!(
        out.contains("D store      TMA from smem: 4 buffers of 4096 B per consumer"),
        "{out}"
    );
    assert!(
        out.contains("cluster      2 CTAs along N (__cluster_dims__(2,1,1)) sharing A by TMA multicast, 3x2x1 cluster tiles"),
        "{out}"
    );
    assert!(out.contains("multicast  2 parts of box {64, 64}"), "{out}");
    let o = plan(&[
        "--path",
        "sm90",
        "--tile",
        "128x128",
        "--cluster",
        "2",
        "--share",
        "b",
        "--emit-cuda-only",
    ]);
    let src = text(&o.stdout);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    assert!(src.contains("#define TESSERA_SM90_CLUSTER 2"));
    assert!(src.contains("constexpr bool kShareA = false, kShareB = true;"));
    // The default plan: a cluster of one.
    let o = plan(&["--path", "sm90"]);
    assert!(text(&o.stdout).contains("cluster      1 CTA (no multicast)"));
    let o = plan(&["--path", "sm90", "--emit-cuda-only"]);
    assert!(text(&o.stdout).contains("#define TESSERA_SM90_CLUSTER 1"));
    assert!(text(&o.stdout).contains("constexpr bool kEpiTmaStore = true;"));
    // The TMA store turned off, and refused where it cannot apply.
    let o = plan(&["--path", "sm90", "--tma-store", "off"]);
    let out = text(&o.stdout);
    assert!(out.contains("D store      from registers"), "{out}");
    assert!(!out.contains("_ts_"), "{out}");
    let o = plan(&[
        "--path",
        "sm90",
        "--tma-store",
        "on",
        "--epilogue",
        "bias,gelu,aux,c",
    ]);
    assert_ne!(o.status.code(), Some(0));
    assert!(text(&o.stderr).contains("TMA-store"), "{}", text(&o.stderr));
    // A bias and an aux output go through the TMA-store epilogue by default.
    let o = plan(&[
        "--path",
        "sm90",
        "--epilogue",
        "bias,gelu,aux",
        "--emit-cuda-only",
    ]);
    let src = text(&o.stdout);
    assert!(src.contains("constexpr bool kEpiTmaStore = true;"), "{src}");
    assert!(src.contains("constexpr int kBiasStage = "), "{src}");
    assert!(!src.contains("constexpr int kBiasStage = 0;"), "{src}");
    let o = plan(&["--path", "sm90", "--tma-store", "maybe"]);
    assert!(
        text(&o.stderr).contains("`on` or `off`"),
        "{}",
        text(&o.stderr)
    );
}

#[test]
fn bad_cluster_options_are_errors() {
    for (args, why) in [
        (vec!["--path", "sm80", "--cluster", "2"], "Hopper path"),
        (vec!["--path", "sm90", "--cluster", "4"], "1 or 2"),
        (
            vec!["--path", "sm90", "--share", "a"],
            "needs a cluster of 2",
        ),
        (
            vec!["--path", "sm90", "--cluster", "2", "--share", "c"],
            "`a` or `b`",
        ),
        (
            vec!["--path", "sm80", "--schedule", "pingpong"],
            "Hopper path",
        ),
        (
            vec!["--path", "sm90", "--schedule", "zigzag"],
            "`cooperative` or `pingpong`",
        ),
        (
            vec![
                "--path",
                "sm90",
                "--schedule",
                "pingpong",
                "--tile",
                "128x256",
            ],
            "BN <= 128",
        ),
    ] {
        let o = plan(&args);
        let err = text(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{args:?}: {err}");
        assert!(err.contains(why), "{args:?}: {err}");
    }
}

/// `--d-major col`: both paths plan the transposed product (M and N exchanged, a row bias
/// becoming a column bias), tree epilogues too (a column reduction becoming a row one).
#[test]
fn column_major_d_is_planned_transposed() {
    let run = |extra: &[&str]| {
        let args: Vec<&str> = ["--d-major", "col"].iter().chain(extra).copied().collect();
        plan_mnk("100", "300", "64", &args)
    };
    for arch in ["sm_90a", "sm_80"] {
        let o = run(&["--arch", arch, "--epilogue", "rowbias,relu"]);
        let out = text(&o.stdout);
        assert_eq!(o.status.code(), Some(0), "{arch}: {}", text(&o.stderr));
        assert!(
            out.contains("A row, B col, D col: relu(alpha * acc + bias_row)"),
            "{out}"
        );
        assert!(
            out.contains("the kernel runs Dᵀ = Bᵀ Aᵀ (300x100), the epilogue transposed: relu(alpha * acc + bias_col)"),
            "{out}"
        );
        assert!(out.contains("problem      300x100x64"), "{out}");
    }
    let o = run(&[
        "--arch",
        "sm_90a",
        "--epilogue",
        "rowbias,relu",
        "--emit-cuda-only",
    ]);
    let src = text(&o.stdout);
    assert!(src.contains("kEpiBias = 2,"), "column bias compiled in");
    let o = run(&["--arch", "sm_90a", "--epilogue", "drelu_bgrad"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    assert!(
        text(&o.stdout).contains("the epilogue transposed: bgrad_row("),
        "{}",
        text(&o.stdout)
    );
}

/// Ping-pong takes a 64-row tile with BN up to 256 (one m64nBNk16 per k16 step).
#[test]
fn pingpong_takes_a_64_row_tile() {
    let o = plan(&[
        "--path",
        "sm90",
        "--schedule",
        "pingpong",
        "--tile",
        "64x256",
    ]);
    let out = text(&o.stdout);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    assert!(out.contains("_64x256x64_"), "{out}");
    assert!(out.contains("_pp2_"), "{out}");
    assert!(out.contains("m64n256k16"), "{out}");
    assert!(out.contains("PingPong"), "{out}");
}

/// `--stream-k`: the plan says when the Hopper kernel may split a last wave, and the option is
/// checked like the others.
#[test]
fn stream_k_is_shown_and_checked() {
    let shown = |args: &[&str]| {
        let o = plan_mnk("8192", "8192", "8192", args);
        assert_eq!(o.status.code(), Some(0), "{args:?}: {}", text(&o.stderr));
        // The Hopper plan's stream-K section (the decisions name stream-K either way).
        text(&o.stdout).contains("\n  stream-K     ")
    };
    assert!(shown(&["--path", "sm90"]));
    assert!(shown(&["--path", "sm90", "--stream-k", "on"]));
    assert!(!shown(&["--path", "sm90", "--stream-k", "off"]));
    assert!(!shown(&["--path", "sm90", "--schedule", "pingpong"]));
    assert!(!shown(&["--path", "sm90", "--cluster", "2"]));
    // The default rule and the forced one read differently.
    let o = plan_mnk("8192", "8192", "8192", &["--path", "sm90"]);
    assert!(text(&o.stdout).contains("at least 32 k-tiles a CTA idle"));
    let o = plan_mnk(
        "8192",
        "8192",
        "8192",
        &["--path", "sm90", "--stream-k", "on"],
    );
    assert!(text(&o.stdout).contains("every partial wave split along K"));
    for (args, why) in [
        (
            vec!["--path", "sm90", "--stream-k", "maybe"],
            "`on` or `off`",
        ),
        (vec!["--path", "sm80", "--stream-k", "on"], "Hopper path"),
        (
            vec![
                "--path",
                "sm90",
                "--stream-k",
                "on",
                "--schedule",
                "pingpong",
            ],
            "cooperative schedule without a cluster",
        ),
        (
            vec!["--path", "sm90", "--stream-k", "on", "--cluster", "2"],
            "cooperative schedule without a cluster",
        ),
    ] {
        let o = plan(&args);
        let err = text(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{args:?}: {err}");
        assert!(err.contains(why), "{args:?}: {err}");
    }
}

/// `tessera plan sweep`: one line per shape of the sweep, every one planned; `plan gemm`
/// prints each tuned choice with its reason.
#[test]
fn the_sweep_is_planned_and_the_decisions_explained() {
    let o = Command::new(env!("CARGO_BIN_EXE_tessera"))
        .args(["plan", "sweep"])
        .output()
        .expect("the binary runs");
    let out = text(&o.stdout);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    assert!(out.lines().count() > 40, "{out}");
    assert!(!out.contains("ERROR"), "{out}");
    assert!(
        out.contains("16x4096x4096  bf16  sm90 coop 64x128 s6 sk 32/32 on 128"),
        "{out}"
    );
    let o = Command::new(env!("CARGO_BIN_EXE_tessera"))
        .args(["plan", "sweep", "--class", "unaligned", "--why"])
        .output()
        .expect("the binary runs");
    let out = text(&o.stdout);
    assert!(out.contains("4095x4095x4095"), "{out}");
    assert!(!out.contains("decode"), "{out}");
    assert!(out.contains("tile 128x256x64:"), "{out}");
    let o = plan_mnk("16", "4096", "4096", &[]);
    let out = text(&o.stdout);
    for line in [
        "decisions    tile 64x128x64: M = 16 <= 64",
        "schedule cooperative:",
        "stream-K on 132 SMs, 32 tiles on 128 CTAs: 32 tiles split",
        "stages 6:",
        "raster groups of 8 tile rows:",
        "cluster 1:",
    ] {
        assert!(out.contains(line), "{line}\n{out}");
    }
    let o = plan_mnk(
        "4096",
        "4096",
        "4096",
        &["--tile", "128x256", "--path", "sm90"],
    );
    assert!(
        text(&o.stdout).contains("tile 128x256x64: forced (Options::tile)"),
        "{}",
        text(&o.stdout)
    );
}

/// A reader that closes the pipe early (`tessera plan gemm ... --emit-cuda-only | head`):
/// the source (far more than a pipe holds) stops there, and the process ends without a panic.
#[cfg(unix)]
#[test]
fn a_closed_pipe_ends_the_output_without_a_panic() {
    use std::io::Read;
    use std::process::Stdio;
    let mut child = Command::new(env!("CARGO_BIN_EXE_tessera"))
        .args(["plan", "gemm", "--m", "4096", "--n", "4096", "--k", "4096"])
        .arg("--emit-cuda-only")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the binary runs");
    let mut first = [0u8; 64];
    child
        .stdout
        .take()
        .expect("piped")
        .read_exact(&mut first)
        .expect("some output");
    // (The read end is dropped here: the rest of the source meets a closed pipe.)
    let out = child.wait_with_output().expect("the process ends");
    let err = text(&out.stderr);
    assert!(!err.contains("panicked"), "stderr: {err}");
    assert!(text(&first).starts_with("//"), "{}", text(&first));
}
