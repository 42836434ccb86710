//! Prints the complete source of the Hopper GEMM with a named fusion's tree epilogue, as the
//! tree launcher compiles it for a bf16 binding at 4096^3 (types compiled in, room for `N`
//! staged inputs, default the launcher's choice, beta `BETA`, default 0; bias vectors staged
//! as the launcher stages them): `sm90_tree_source FUSION [N [BETA [SCHEDULE [MxNxK]]]]`, e.g.
//! `sm90_tree_source dgelu 1` or `sm90_tree_source bias -1 0 pingpong 8192x8192x4096` (N -1:
//! the launcher's choice; SCHEDULE `cooperative`, `pingpong` or `auto`). An experiment helper, with `sm90_compile_file` for ptxas
//! statistics and a CUBIN to disassemble.
use tessera_kernels::epilogue::Fusion;
use tessera_kernels::plan::Schedule;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let names: Vec<&str> = Fusion::ALL.iter().map(|f| f.name()).collect();
    let Some(f) = args
        .get(1)
        .and_then(|a| Fusion::ALL.iter().find(|f| f.name() == a))
    else {
        eprintln!(
            "usage: sm90_tree_source FUSION [STAGED_INPUTS [BETA [SCHEDULE [MxNxK]]]]; fusions: {names:?}"
        );
        std::process::exit(1);
    };
    let staged: i64 = optional_arg(&args, 2, "STAGED_INPUTS", -1);
    let beta: f32 = optional_arg(&args, 3, "BETA", 0.0);
    let schedule = match args.get(4).map(String::as_str) {
        None | Some("auto") => None,
        Some("cooperative") => Some(Schedule::Cooperative),
        Some("pingpong") => Some(Schedule::PingPong),
        Some(s) => {
            eprintln!("SCHEDULE `{s}`: cooperative, pingpong or auto");
            std::process::exit(1);
        }
    };
    let (m, n, k) = match args.get(5).map(|s| {
        let v: Vec<Option<i64>> = s.split('x').map(|x| x.parse().ok()).collect();
        match v[..] {
            [Some(m), Some(n), Some(k)] => Some((m, n, k)),
            _ => None,
        }
    }) {
        None => (4096, 4096, 4096),
        Some(Some(mnk)) => mnk,
        Some(None) => {
            eprintln!("MxNxK `{}`: three integers joined by x", args[5]);
            std::process::exit(1);
        }
    };
    let staged = (staged >= 0).then_some(staged);
    match tessera_kernels::bench::dev::tree_source(*f, staged, beta, schedule, (m, n, k)) {
        Ok(src) => print!("{src}"),
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(1);
        }
    }
}

/// Argument `i` parsed, or `default` when absent; a parse error ends the program.
fn optional_arg<T: std::str::FromStr>(args: &[String], i: usize, name: &str, default: T) -> T
where
    T::Err: std::fmt::Display,
{
    match args.get(i).map(|a| a.parse::<T>()) {
        None => default,
        Some(Ok(x)) => x,
        Some(Err(e)) => {
            eprintln!("{name} `{}`: {e}", args[i]);
            std::process::exit(1);
        }
    }
}
