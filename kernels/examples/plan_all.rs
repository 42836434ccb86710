//! Plans every tile option for every order on sm_80 and sm_90a (a quick planner sweep).
use tessera_kernels::{Arch, GemmPlan, GemmProblem, Major, PlanOptions};
fn main() {
    for arch in [Arch::Sm80, Arch::Sm86, Arch::Sm90a] {
        for tile in [
            (128, 128, 32),
            (128, 256, 32),
            (128, 256, 64),
            (256, 128, 32),
            (256, 128, 64),
            (128, 128, 64),
            (64, 64, 32),
            (64, 128, 64),
        ] {
            for (a, b) in [
                (Major::Row, Major::Col),
                (Major::Row, Major::Row),
                (Major::Col, Major::Col),
                (Major::Col, Major::Row),
            ] {
                let mut p = GemmProblem::new(1000, 1000, 1000);
                p.a_major = a;
                p.b_major = b;
                match GemmPlan::with_options(
                    &p,
                    arch,
                    PlanOptions {
                        tile: Some(tile),
                        stages: None,
                    },
                ) {
                    Ok(pl) => println!("ok  {}", pl.kernel_name()),
                    Err(e) => println!("ERR {arch} {tile:?} {a}/{b}: {e}"),
                }
            }
        }
    }
}
