//! Compiles a CUDA file with NVRTC for sm_90a and prints ptxas statistics:
//! `sm90_compile_file FILE` (an experiment helper for hand-edited generated sources).
#[cfg(feature = "cuda")]
fn main() {
    let Some(path) = std::env::args().nth(1) else {
        eprintln!("usage: sm90_compile_file FILE");
        std::process::exit(1);
    };
    let src = match std::fs::read_to_string(&path) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("{path}: {e}");
            std::process::exit(1);
        }
    };
    match tessera_kernels::runtime::compile(&src, "experiment", tessera_kernels::Arch::Sm90a, true)
    {
        Ok(c) => println!("{}", c.log),
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(1);
        }
    }
}

#[cfg(not(feature = "cuda"))]
fn main() {
    eprintln!("built without the `cuda` feature");
    std::process::exit(1);
}
