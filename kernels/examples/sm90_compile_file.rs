//! Compiles a CUDA file with NVRTC (for sm_90a unless ARCH says otherwise) and prints ptxas
//! statistics: `sm90_compile_file FILE [OUT.cubin [KERNEL [ARCH]]]` (an experiment helper for
//! hand-edited or emitted sources, e.g. `tessera plan gemm ... --emit-cuda-only`). With
//! OUT.cubin it also writes the CUBIN, for `cuobjdump --dump-sass`; KERNEL (default
//! `tessera_gemm`) names it; ARCH is `sm_80`, `sm_86`, `sm_89` or `sm_90a` (the default).
fn main() {
    let args: Vec<String> = std::env::args().collect();
    let Some(path) = args.get(1) else {
        eprintln!("usage: sm90_compile_file FILE [OUT.cubin [KERNEL [ARCH]]]");
        std::process::exit(1);
    };
    let src = match std::fs::read_to_string(path) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("{path}: {e}");
            std::process::exit(1);
        }
    };
    let kernel = args.get(3).map(String::as_str).unwrap_or("tessera_gemm");
    let arch = match args
        .get(4)
        .map_or(Ok(tessera_kernels::Arch::Sm90a), |a| a.parse())
    {
        Ok(a) => a,
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(1);
        }
    };
    match tessera_kernels::bench::dev::compile_source(&src, kernel, arch) {
        Ok((cubin, log)) => {
            println!("{log}");
            if let Some(out) = args.get(2) {
                if let Err(e) = std::fs::write(out, &cubin) {
                    eprintln!("writing {out}: {e}");
                    std::process::exit(1);
                }
            }
        }
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(1);
        }
    }
}
