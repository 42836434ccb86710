//! Compiles a CUDA source file (for instance `tessera plan gemm ... --emit-cuda-only` output)
//! with NVRTC for sm_90a and writes the CUBIN, for `cuobjdump --dump-sass`:
//! `cargo run -p tessera-kernels --features cuda --example cubin -- SRC.cu OUT.cubin [KERNEL]`
//! (kernel name default `tessera_gemm`). The ptxas statistics go to stderr.
#[cfg(feature = "cuda")]
fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() < 3 {
        eprintln!("usage: cubin SRC.cu OUT.cubin [KERNEL]");
        std::process::exit(2);
    }
    let src = match std::fs::read_to_string(&args[1]) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("reading {}: {e}", args[1]);
            std::process::exit(1);
        }
    };
    let kernel = args.get(3).map(String::as_str).unwrap_or("tessera_gemm");
    match tessera_kernels::runtime::compile(&src, kernel, tessera_kernels::Arch::Sm90a, true) {
        Ok(c) => {
            eprintln!("{}", c.log);
            if let Err(e) = std::fs::write(&args[2], &c.cubin) {
                eprintln!("writing {}: {e}", args[2]);
                std::process::exit(1);
            }
        }
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(1);
        }
    }
}

#[cfg(not(feature = "cuda"))]
fn main() {
    eprintln!("the cubin example needs the `cuda` feature");
    std::process::exit(2);
}
