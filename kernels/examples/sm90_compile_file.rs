//! Compiles a CUDA file with NVRTC for sm_90a and prints ptxas statistics:
//! `sm90_compile_file FILE [OUT.cubin [KERNEL]]` (an experiment helper for hand-edited or
//! emitted sources, e.g. `tessera plan gemm ... --emit-cuda-only`). With OUT.cubin it also
//! writes the CUBIN, for `cuobjdump --dump-sass`; KERNEL (default `tessera_gemm`) names it.
fn main() {
    let args: Vec<String> = std::env::args().collect();
    let Some(path) = args.get(1) else {
        eprintln!("usage: sm90_compile_file FILE [OUT.cubin [KERNEL]]");
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
    match tessera_kernels::bench::dev::compile_source(&src, kernel, tessera_kernels::Arch::Sm90a) {
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
