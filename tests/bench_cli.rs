//! `tessera bench gemm`'s option checks, run as a program. Only what is decided before the
//! device is opened: on a machine without a GPU every run ends in a no-device error, which is
//! told apart from an option error by its text.

use std::process::{Command, Output};

fn bench_gemm(args: &[&str]) -> Output {
    // One tiny shape and one round, so that a machine with a GPU finishes at once.
    Command::new(env!("CARGO_BIN_EXE_tessera"))
        .args(["bench", "gemm", "--shapes", "64x64x64", "--rounds", "1"])
        .args(args)
        .output()
        .expect("the binary runs")
}

fn text(b: &[u8]) -> String {
    String::from_utf8(b.to_vec()).expect("utf-8 output")
}

/// `--tile` is read for the path that runs: BMxBN (BK 64) on the Hopper path, BMxBNxBK on the
/// sm80-class path.
#[test]
fn the_tile_is_parsed_for_the_path_that_runs() {
    for (args, refused) in [
        (
            vec!["--path", "sm90", "--tile", "128x128x32"],
            Some("the Hopper tile is BMxBN"),
        ),
        (
            vec!["--path", "sm80", "--tile", "128x128"],
            Some("expected AxBxC"),
        ),
        (vec!["--path", "sm90", "--tile", "128x128"], None),
        (vec!["--path", "sm90", "--tile", "64x256x64"], None),
        (vec!["--path", "sm80", "--tile", "128x256x64"], None),
    ] {
        let o = bench_gemm(&args);
        let err = text(&o.stderr);
        if err.contains("without the `cuda` feature") {
            eprintln!("SKIPPED: the benchmarks need the `cuda` feature ({err})");
            return;
        }
        match refused {
            Some(why) => {
                assert_eq!(o.status.code(), Some(1), "{args:?}: {err}");
                assert!(err.contains(why), "{args:?}: {err}");
            }
            None => {
                // Accepted: it ran (a GPU) or stopped at the device (none).
                assert!(
                    !err.contains("tile") || o.status.success(),
                    "{args:?} was refused: {err}"
                );
            }
        }
    }
}

/// `--sweep` runs its own list: the standard mode's shape options and `--path sm90` are
/// refused, and so are unknown classes and `--class` without `--sweep`, before the device.
#[test]
fn sweep_options_are_checked_first() {
    let run = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_tessera"))
            .args(["bench", "gemm"])
            .args(args)
            .output()
            .expect("the binary runs")
    };
    for (args, why) in [
        (
            vec!["--sweep", "--shapes", "64x64x64"],
            "no --quick, --shapes",
        ),
        (vec!["--sweep", "--quick"], "no --quick, --shapes"),
        (vec!["--sweep", "--path", "sm90"], "not sm90"),
        (vec!["--sweep", "--class", "tiny"], "unknown class `tiny`"),
        (vec!["--class", "decode"], "it needs --sweep"),
    ] {
        let o = run(&args);
        let err = text(&o.stderr);
        if err.contains("without the `cuda` feature") {
            eprintln!("SKIPPED: the benchmarks need the `cuda` feature ({err})");
            return;
        }
        assert_eq!(o.status.code(), Some(1), "{args:?}: {err}");
        assert!(err.contains(why), "{args:?}: {err}");
    }
}

/// `bench conv`'s forced schedule is checked before the device is opened.
#[test]
fn conv_schedule_is_checked_first() {
    let o = Command::new(env!("CARGO_BIN_EXE_tessera"))
        .args(["bench", "conv", "--layers", "c2a", "--batch", "1"])
        .args(["--schedule", "sideways"])
        .output()
        .expect("the binary runs");
    let err = text(&o.stderr);
    if err.contains("without the `cuda` feature") {
        eprintln!("SKIPPED: the benchmarks need the `cuda` feature ({err})");
        return;
    }
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(err.contains("--schedule `sideways`"), "{err}");
}
