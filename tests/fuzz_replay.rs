//! Replays the fuzz targets' committed inputs on the stable toolchain: every file of
//! `fuzz/corpus/TARGET/` (the minimized corpus the fuzzer built) and `fuzz/regressions/TARGET/`
//! (inputs that once failed, kept after the fix) goes through the same target function the
//! fuzzer runs (`fuzz/src/targets.rs`), which panics on a failed property.
//!
//! So `cargo test` checks every committed input without nightly or libFuzzer; fuzzing itself
//! (`cargo +nightly fuzz run TARGET`) finds new ones.

#[path = "../fuzz/src/targets.rs"]
mod targets;

use std::path::Path;

#[test]
fn committed_fuzz_inputs_pass() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz");
    let mut total = 0;
    for (name, target) in targets::TARGETS {
        let mut n = 0;
        for dir in ["corpus", "regressions"] {
            let Ok(entries) = std::fs::read_dir(root.join(dir).join(name)) else {
                continue;
            };
            let mut files: Vec<_> = entries.filter_map(|e| e.ok()).map(|e| e.path()).collect();
            files.sort();
            for f in files {
                let data = std::fs::read(&f).expect("a committed input reads");
                let run = std::panic::catch_unwind(|| target(&data));
                assert!(run.is_ok(), "{name}: {} fails", f.display());
                n += 1;
            }
        }
        println!("{name}: {n} inputs");
        total += n;
    }
    assert!(
        total > 0,
        "no committed fuzz inputs found under {}",
        root.display()
    );
}
