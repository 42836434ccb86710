//! Every kernel variant the planner can emit compiles with NVRTC for sm_80 and sm_90a.
//!
//! Needs libnvrtc on the library path, no GPU. Skips with a printed reason when NVRTC cannot be
//! loaded, and fails instead when `TESSERA_REQUIRE_NVRTC=1` (CI).
#![cfg(feature = "cuda")]

use std::collections::BTreeMap;

use tessera_kernels::codegen::cuda_source;
use tessera_kernels::launch::runtime::{compile, nvrtc_version};
use tessera_kernels::{Arch, DType, GemmPlan, GemmProblem, Major};

/// The variants: the planner's outputs over every input type, both storage orders of A and B,
/// and a problem of each size class (the CTA tile depends on it). Epilogue, output type and
/// extents are run-time parameters of the kernel, so they add no variant.
fn variants(arch: Arch) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for input in [DType::Bf16, DType::F16] {
        for a_major in [Major::Row, Major::Col] {
            for b_major in [Major::Row, Major::Col] {
                for (m, n, k) in [(100, 100, 64), (4096, 4096, 4096)] {
                    let mut p = GemmProblem::new(m, n, k);
                    p.input = input;
                    p.a_major = a_major;
                    p.b_major = b_major;
                    let plan = GemmPlan::new(&p, arch).expect("plan");
                    out.insert(plan.kernel_name(), cuda_source(&plan));
                }
            }
        }
    }
    out
}

/// The spill-store bytes of one of ptxas's `-v` lines (`..., N bytes spill stores, ...`).
pub(crate) fn spill_store_bytes(line: &str) -> Option<i64> {
    line.split("bytes spill stores")
        .next()
        .and_then(|x| x.split(',').next_back())
        .and_then(|x| x.trim().parse().ok())
}

#[test]
fn every_variant_compiles_for_sm80_and_sm90a() {
    match nvrtc_version() {
        Ok((maj, min)) => eprintln!("NVRTC {maj}.{min}"),
        Err(e) => {
            if std::env::var("TESSERA_REQUIRE_NVRTC").as_deref() == Ok("1") {
                panic!("TESSERA_REQUIRE_NVRTC=1 but {e}");
            }
            eprintln!("SKIPPED: {e}");
            return;
        }
    }
    let mut jobs = Vec::new();
    for arch in [Arch::Sm80, Arch::Sm90a] {
        for (name, src) in variants(arch) {
            jobs.push((arch, name, src));
        }
    }
    assert_eq!(jobs.len(), 32, "2 targets x 2 types x 4 orders x 2 tiles");
    // Two threads: NVRTC is thread-safe and CI has two cores.
    let (left, right) = jobs.split_at(jobs.len() / 2);
    let run = |part: &[(Arch, String, String)]| -> Vec<String> {
        part.iter()
            .map(|(arch, name, src)| {
                let c = compile(src, name, *arch, true).unwrap_or_else(|e| panic!("{e}"));
                assert!(
                    c.cubin.len() > 1000,
                    "{name}: CUBIN of {} bytes",
                    c.cubin.len()
                );
                // ptxas -v: registers and spills per variant.
                let stats: Vec<&str> = c
                    .log
                    .lines()
                    .filter(|l| l.contains("registers") || l.contains("spill"))
                    .collect();
                for l in stats.iter().filter(|l| l.contains("spill")) {
                    // The register budget (255 at one CTA per SM) holds the whole warp tile;
                    // an accumulator array in local memory would spill hundreds of bytes.
                    // A few bytes of spill (seen: 16 in one 4-warp variant) are tolerated.
                    let bytes = spill_store_bytes(l)
                        .unwrap_or_else(|| panic!("{name}: unreadable ptxas line {l}"));
                    assert!(bytes <= 64, "{name} spills {bytes} bytes: {l}");
                }
                format!("{name}: {}", stats.join(" | "))
            })
            .collect()
    };
    let (a, b) = std::thread::scope(|s| {
        let h = s.spawn(|| run(left));
        let b = run(right);
        (h.join().expect("compile thread"), b)
    });
    for line in a.iter().chain(b.iter()) {
        eprintln!("{line}");
    }
}

/// The `mma.sync` probe of `tessera bench mma` compiles for both targets, without spills, and
/// its accumulator chains stay live (ptxas reports at least 4 registers per chain; chains
/// folded away would leave a handful).
#[test]
fn mma_peak_probe_compiles() {
    if let Err(e) = nvrtc_version() {
        if std::env::var("TESSERA_REQUIRE_NVRTC").as_deref() == Ok("1") {
            panic!("TESSERA_REQUIRE_NVRTC=1 but {e}");
        }
        eprintln!("SKIPPED: {e}");
        return;
    }
    for arch in [Arch::Sm80, Arch::Sm90a] {
        for chains in [4, 8] {
            let src = format!(
                "#define TESSERA_MMA_CHAINS {chains}\n{}",
                tessera_kernels::codegen::MMA_PEAK_CUH
            );
            let c = compile(&src, "tessera_mma_peak", arch, true).unwrap_or_else(|e| panic!("{e}"));
            assert!(
                c.cubin.len() > 1000,
                "{arch}: CUBIN of {} bytes",
                c.cubin.len()
            );
            assert!(
                !c.log.contains("spill stores") || c.log.contains("0 bytes spill stores"),
                "{arch}: {}",
                c.log
            );
            let regs: i64 = c
                .log
                .split("Used ")
                .nth(1)
                .and_then(|x| x.split(' ').next())
                .and_then(|x| x.parse().ok())
                .unwrap_or_else(|| panic!("{arch}: no register count in {}", c.log));
            assert!(
                regs >= 4 * chains,
                "{arch}, {chains} chains: {regs} registers"
            );
        }
    }
}

#[test]
fn the_staging_copy_compiles_for_sm80_and_sm90a() {
    if let Err(e) = nvrtc_version() {
        if std::env::var("TESSERA_REQUIRE_NVRTC").as_deref() == Ok("1") {
            panic!("TESSERA_REQUIRE_NVRTC=1 but {e}");
        }
        eprintln!("SKIPPED: {e}");
        return;
    }
    let src = crate::codegen::stage_rows_source();
    for arch in [Arch::Sm80, Arch::Sm90a] {
        let c = compile(&src, crate::codegen::STAGE_ROWS_KERNEL, arch, true)
            .unwrap_or_else(|e| panic!("{e}"));
        assert!(c.cubin.len() > 500);
        assert!(c.log.contains("tessera_stage_rows"), "{}", c.log);
        // At most 8 bytes of spill: the dependent launch's wait at the end of the copy (sm_90)
        // costs ptxas two 16-bit spills in one of its element-by-element paths; a copy
        // bound by the memory's rate does not feel them.
        for l in c.log.lines().filter(|l| l.contains("spill stores")) {
            let bytes = spill_store_bytes(l).unwrap_or_else(|| panic!("unreadable: {l}"));
            assert!(bytes <= 8, "{arch}: {l}");
        }
    }
}
