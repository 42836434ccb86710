//! The Hopper kernel through the shared correctness harness: fresh random data, poisoned
//! outputs, the float64 reference and its bounds (see [`crate::verify`]).

use crate::error::Result;
use crate::reference::{compare, reference_rows, Bounds, GemmStrides};
use crate::rng::Rng;
use crate::runtime::{driver_err, Runtime};
use crate::verify::{random_host, CheckReport, DeviceGemm};

use super::launch::Sm90Kernel;

/// Positions of `got` outside the matrices (padding of leading dimensions and batches) that
/// are not NaN, i.e. were written.
fn outside_written(got: &[f64], m: i64, n: i64, batch: i64, batch_stride: i64, ld: i64) -> usize {
    let mut inside = vec![false; got.len()];
    for b in 0..batch {
        for i in 0..m {
            let start = (b * batch_stride + i * ld) as usize;
            inside[start..start + n as usize]
                .iter_mut()
                .for_each(|x| *x = true);
        }
    }
    got.iter()
        .zip(&inside)
        .filter(|(g, &ins)| !ins && !g.is_nan())
        .count()
}

/// Runs `kernel` once on fresh random data (seed `seed`) with strides `s` and checks D (and
/// aux) against the float64 reference, on every row up to `2^30` multiply-adds and on the
/// first, last and 30 random rows per batch above.
pub fn check_sm90(
    rt: &Runtime,
    kernel: &Sm90Kernel,
    s: GemmStrides,
    seed: u64,
) -> Result<CheckReport> {
    let p = kernel.plan().problem;
    let mut rng = Rng::new(seed);
    let host = random_host(&p, &s, &mut rng);
    let dev = DeviceGemm::upload(rt, &p, &s, &host)?;
    let paths = kernel.launch(rt, &dev.args(s))?;
    rt.stream()
        .synchronize()
        .map_err(driver_err("cuStreamSynchronize after tessera_gemm (sm90)"))?;
    let d = dev.d.download(rt)?;
    let aux = dev.aux.as_ref().map(|a| a.download(rt)).transpose()?;
    let rows: Vec<i64> = if (p.m * p.n * p.k * p.batch) as f64 <= 2f64.powi(30) {
        (0..p.m).collect()
    } else {
        let mut r: Vec<i64> = vec![0, p.m - 1];
        r.extend((0..30).map(|_| (rng.next_u64() % p.m as u64) as i64));
        r.sort_unstable();
        r.dedup();
        r
    };
    let want = reference_rows(&p, &s, &host, &rows);
    let d_stats = compare(&d, &want.d);
    let d_bounds = Bounds::for_result(p.output, p.k, d_stats.max_ref);
    let mut written_outside = outside_written(&d, p.m, p.n, p.batch, s.batch_d, s.ldd);
    let aux_stats = match &aux {
        Some(a) => {
            written_outside += outside_written(a, p.m, p.n, p.batch, s.batch_aux, s.ldaux);
            let st = compare(a, &want.aux);
            Some((st, Bounds::for_result(p.output, p.k, st.max_ref)))
        }
        None => None,
    };
    Ok(CheckReport {
        problem: p,
        kernel: kernel.plan().kernel_name(),
        seed,
        paths,
        rows_checked: rows.len(),
        d: d_stats,
        d_bounds,
        aux: aux_stats,
        written_outside,
    })
}
