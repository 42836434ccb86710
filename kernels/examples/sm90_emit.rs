//! Prints the complete CUDA source of the Hopper plan for `M N K` (default 4096³):
//! `cargo run -p tessera-kernels --example sm90_emit -- 4096 4096 4096`. With the `cuda`
//! feature and `--cubin FILE`, also compiles it with NVRTC for sm_90a and writes the CUBIN
//! (for `cuobjdump --dump-sass`); `--epilogue bias,gelu_tanh` plans that epilogue, `--pingpong`
//! the ping-pong schedule (128x128).
use tessera_kernels::GemmProblem;
use tessera_kernels::{codegen::sm90::cuda_source, plan::Sm90Plan};

fn main() {
    let a: Vec<i64> = std::env::args()
        .skip(1)
        .filter_map(|s| s.parse().ok())
        .collect();
    let (m, n, k) = if a.len() == 3 {
        (a[0], a[1], a[2])
    } else {
        (4096, 4096, 4096)
    };
    let argv: Vec<String> = std::env::args().collect();
    let mut problem = GemmProblem::new(m, n, k);
    if let Some(i) = argv.iter().position(|a| a == "--epilogue") {
        match tessera_kernels::Epilogue::parse(argv.get(i + 1).map(String::as_str).unwrap_or("")) {
            Ok(e) => problem.epilogue = e,
            Err(e) => {
                eprintln!("{e}");
                std::process::exit(1);
            }
        }
    }
    let opts = tessera_kernels::plan::Sm90Options {
        schedule: argv
            .iter()
            .any(|a| a == "--pingpong")
            .then_some(tessera_kernels::plan::Schedule::PingPong),
        tile: argv.iter().any(|a| a == "--pingpong").then_some((128, 128)),
        ..Default::default()
    };
    match Sm90Plan::with_options(&problem, opts) {
        Ok(plan) => {
            eprint!("{plan}");
            let src = cuda_source(&plan);
            print!("{src}");
            let args: Vec<String> = std::env::args().collect();
            if let Some(i) = args.iter().position(|a| a == "--cubin") {
                write_cubin(
                    &src,
                    &plan.kernel_name(),
                    args.get(i + 1).map(String::as_str).unwrap_or("sm90.cubin"),
                );
            }
        }
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(1);
        }
    }
}

#[cfg(feature = "cuda")]
fn write_cubin(src: &str, name: &str, path: &str) {
    match tessera_kernels::launch::runtime::compile(src, name, tessera_kernels::Arch::Sm90a, true) {
        Ok(c) => {
            eprintln!("{}", c.log);
            if let Err(e) = std::fs::write(path, &c.cubin) {
                eprintln!("writing {path}: {e}");
            }
        }
        Err(e) => eprintln!("{e}"),
    }
}

#[cfg(not(feature = "cuda"))]
fn write_cubin(_: &str, _: &str, _: &str) {
    eprintln!("--cubin needs the `cuda` feature");
}
