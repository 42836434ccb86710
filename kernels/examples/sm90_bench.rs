//! The Hopper kernel against cuBLAS / cuBLASLt, interleaved in one process (a program, not a
//! test). `sm90_bench [quick] [--json FILE] [--tile BMxBN] [--stages S] [--group G] [--pingpong]`.
//!
//! Prints one line per (shape, epilogue): ours and the vendor's TFLOP/s, the ratio (vendor
//! time / our time), the fused epilogue's cost over our plain GEMM, and the relative
//! difference between the two results on sampled rows.
#[cfg(feature = "cuda")]
fn main() {
    use tessera_kernels::bench::gemm::{standard_epilogues, standard_shapes, BenchConfig};
    use tessera_kernels::bench::sm90::run_bench_sm90;
    use tessera_kernels::launch::runtime::Runtime;
    use tessera_kernels::plan::Sm90Options;

    let args: Vec<String> = std::env::args().skip(1).collect();
    let value = |flag: &str| {
        args.iter()
            .position(|a| a == flag)
            .and_then(|i| args.get(i + 1))
            .cloned()
    };
    let mut opts = Sm90Options::default();
    if let Some(t) = value("--tile") {
        let v: Vec<i64> = t.split('x').filter_map(|x| x.parse().ok()).collect();
        if v.len() == 2 {
            opts.tile = Some((v[0], v[1]));
        }
    }
    opts.stages = value("--stages").and_then(|s| s.parse().ok());
    opts.group_m = value("--group").and_then(|s| s.parse().ok());
    if args.iter().any(|a| a == "--pingpong") {
        opts.schedule = Some(tessera_kernels::plan::Schedule::PingPong);
        opts.tile = opts.tile.or(Some((128, 128)));
    }
    let mut cfg = BenchConfig::default();
    if args.iter().any(|a| a == "quick") {
        cfg.shapes = vec![(4096, 4096, 4096), (8192, 8192, 8192)];
        cfg.epilogues = standard_epilogues().into_iter().take(1).collect();
    } else {
        cfg.shapes = standard_shapes();
    }
    let rt = match Runtime::new(0) {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("sm90_bench: {e}");
            std::process::exit(1);
        }
    };
    println!(
        "device {} ({}), {} SMs, seed {}, options {opts:?}",
        rt.device_name(),
        rt.arch(),
        rt.sm_count(),
        cfg.seed
    );
    let head = format!(
        "{:>17} {:>14} {:>9} {:>9} {:>7} {:>7} {:>9}  {}",
        "M x N x K", "epilogue", "ours TF", "vendor TF", "ratio", "/plain", "rel diff", "vendor"
    );
    println!("{head}");
    let line = |r: &tessera_kernels::bench::gemm::BenchRow| {
        format!(
            "{:>17} {:>14} {:>9.1} {:>9.1} {:>7.3} {:>7.3} {:>9.2e}  {}",
            format!("{}x{}x{}", r.m, r.n, r.k),
            r.epilogue,
            r.ours_tflops,
            r.vendor_tflops,
            r.ratio,
            r.over_plain,
            r.rel_diff,
            r.vendor
        )
    };
    let rows = match run_bench_sm90(&rt, &cfg, opts, |r| println!("{}", line(r))) {
        Ok(rows) => rows,
        Err(e) => {
            eprintln!("sm90_bench: {e}");
            std::process::exit(1);
        }
    };
    if let Some(path) = value("--json") {
        let body: Vec<String> = rows
            .iter()
            .map(|r| {
                format!(
                    "{{\"m\":{},\"n\":{},\"k\":{},\"epilogue\":\"{}\",\"kernel\":\"{}\",\"vendor\":\"{}\",\"ours_ms\":{},\"vendor_ms\":{},\"ours_tflops\":{},\"vendor_tflops\":{},\"ratio\":{},\"rel_diff\":{}}}",
                    r.m, r.n, r.k, r.epilogue, r.kernel, r.vendor, r.ours_ms, r.vendor_ms, r.ours_tflops, r.vendor_tflops, r.ratio, r.rel_diff
                )
            })
            .collect();
        if let Err(e) = std::fs::write(&path, format!("[{}]\n", body.join(",\n"))) {
            eprintln!("sm90_bench: writing {path}: {e}");
        }
    }
    println!("\nsummary (ratio = vendor time / our time)\n{head}");
    for r in &rows {
        println!("{}", line(r));
    }
    // NaN (a non-finite result) fails too.
    if rows
        .iter()
        .any(|r| r.rel_diff.is_nan() || r.rel_diff >= 2e-2)
    {
        eprintln!("sm90_bench: a result differs from the vendor's");
        std::process::exit(2);
    }
}

#[cfg(not(feature = "cuda"))]
fn main() {
    eprintln!("sm90_bench: built without the `cuda` feature");
    std::process::exit(1);
}
