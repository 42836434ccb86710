//! One correctness harness for every caller (tests, `tessera run gemm`, the benchmark): fresh
//! random data, poisoned outputs, one launch, the float64 reference, stated bounds.

use std::fmt;

use crate::bench::buffers::DeviceBuf;
use crate::error::{KernelError, Result};
use crate::launch::runtime::{driver_err, Runtime};
use crate::launch::sm80::{AccessPaths, GemmArgs, GemmKernel};
use crate::plan::problem::{BiasMode, GemmProblem, Major};
use crate::plan::GemmPlan;
use crate::plan::GemmStrides;
use crate::reference::{compare, reference_rows, round_to, Bounds, ErrorStats, HostGemm};
use crate::rng::Rng;

/// Host data for a problem: A, B, C, bias uniform in [-1, 1), rounded to their types.
pub fn random_host(p: &GemmProblem, s: &GemmStrides, rng: &mut Rng) -> HostGemm {
    let (a_rows, a_inner) = if p.a_major == Major::Row {
        (p.m, p.k)
    } else {
        (p.k, p.m)
    };
    let (b_rows, b_inner) = if p.b_major == Major::Row {
        (p.k, p.n)
    } else {
        (p.n, p.k)
    };
    let a_len = GemmStrides::extent(p.batch, s.batch_a, a_rows, s.lda, a_inner) as usize;
    let b_len = GemmStrides::extent(p.batch, s.batch_b, b_rows, s.ldb, b_inner) as usize;
    let round = |v: Vec<f32>, t| v.into_iter().map(|x| round_to(x, t)).collect::<Vec<f32>>();
    let a = round(rng.vec(a_len, -1.0, 1.0), p.input);
    let b = round(rng.vec(b_len, -1.0, 1.0), p.input);
    let c = (p.epilogue.beta != 0.0).then(|| {
        let len = GemmStrides::out_extent(p, s.batch_c, s.ldc) as usize;
        round(rng.vec(len, -1.0, 1.0), p.output)
    });
    let bias = match p.epilogue.bias {
        BiasMode::None => None,
        mode => {
            let len = if mode == BiasMode::PerRow { p.m } else { p.n };
            Some(round(
                rng.vec(((p.batch - 1) * s.batch_bias + len) as usize, -1.0, 1.0),
                p.output,
            ))
        }
    };
    HostGemm { a, b, c, bias }
}

/// Device copies of the operands and poisoned outputs.
pub struct DeviceGemm {
    /// A.
    pub a: DeviceBuf,
    /// B.
    pub b: DeviceBuf,
    /// C.
    pub c: Option<DeviceBuf>,
    /// D.
    pub d: DeviceBuf,
    /// Bias.
    pub bias: Option<DeviceBuf>,
    /// Aux.
    pub aux: Option<DeviceBuf>,
}

impl DeviceGemm {
    /// Uploads `h` and allocates poisoned D (and aux).
    pub fn upload(
        rt: &Runtime,
        p: &GemmProblem,
        s: &GemmStrides,
        h: &HostGemm,
    ) -> Result<DeviceGemm> {
        let d_len = GemmStrides::out_extent(p, s.batch_d, s.ldd) as usize;
        let aux = if p.epilogue.aux {
            let len = GemmStrides::out_extent(p, s.batch_aux, s.ldaux) as usize;
            Some(DeviceBuf::poisoned(rt, p.output, len)?)
        } else {
            None
        };
        Ok(DeviceGemm {
            a: DeviceBuf::upload(rt, p.input, &h.a)?,
            b: DeviceBuf::upload(rt, p.input, &h.b)?,
            c: h.c
                .as_ref()
                .map(|c| DeviceBuf::upload(rt, p.output, c))
                .transpose()?,
            d: DeviceBuf::poisoned(rt, p.output, d_len)?,
            bias: h
                .bias
                .as_ref()
                .map(|b| DeviceBuf::upload(rt, p.output, b))
                .transpose()?,
            aux,
        })
    }

    /// The launch arguments.
    pub fn args(&self, rt: &Runtime, strides: GemmStrides) -> GemmArgs {
        GemmArgs {
            a: self.a.mem(rt),
            b: self.b.mem(rt),
            c: self.c.as_ref().map(|x| x.mem(rt)),
            d: self.d.mem(rt),
            bias: self.bias.as_ref().map(|x| x.mem(rt)),
            aux: self.aux.as_ref().map(|x| x.mem(rt)),
            strides,
        }
    }
}

/// The outcome of one checked run.
#[derive(Clone, Debug)]
pub struct CheckReport {
    /// The problem.
    pub problem: GemmProblem,
    /// The kernel's name.
    pub kernel: String,
    /// The seed of the random data.
    pub seed: u64,
    /// How the operands were moved.
    pub paths: AccessPaths,
    /// Rows (per batch) compared with the reference.
    pub rows_checked: usize,
    /// D against the reference.
    pub d: ErrorStats,
    /// The bounds D must meet.
    pub d_bounds: Bounds,
    /// Aux against the reference, if written.
    pub aux: Option<(ErrorStats, Bounds)>,
    /// Positions of the D / aux buffers outside the matrices that were written (must be 0).
    pub written_outside: usize,
}

impl CheckReport {
    /// Whether every check holds.
    pub fn passed(&self) -> bool {
        self.d_bounds.check(&self.d)
            && self.aux.as_ref().map_or(true, |(s, b)| b.check(s))
            && self.written_outside == 0
    }
}

impl fmt::Display for CheckReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} [{}] seed {:#x} rows {}: D rel_fro {:.2e} (<= {:.2e}) max_abs {:.2e} (<= {:.2e}) non-finite {}",
            self.problem,
            self.kernel,
            self.seed,
            self.rows_checked,
            self.d.rel_fro,
            self.d_bounds.rel_fro,
            self.d.max_abs,
            self.d_bounds.max_abs,
            self.d.non_finite
        )?;
        if let Some((s, b)) = &self.aux {
            write!(
                f,
                "; aux rel_fro {:.2e} (<= {:.2e}) non-finite {}",
                s.rel_fro, b.rel_fro, s.non_finite
            )?;
        }
        write!(
            f,
            "; paths a_vec={} b_vec={} pair={}{}; written outside {} -> {}",
            self.paths.a_vec,
            self.paths.b_vec,
            self.paths.store_pair,
            if self.paths.tma_store {
                " tma_store"
            } else {
                ""
            },
            self.written_outside,
            if self.passed() { "PASS" } else { "FAIL" }
        )
    }
}

fn outside_written(got: &[f64], p: &GemmProblem, batch_stride: i64, ld: i64) -> usize {
    let mut inside = vec![false; got.len()];
    for b in 0..p.batch {
        for i in 0..p.m {
            for j in 0..p.n {
                inside[GemmStrides::out_index(p, batch_stride, ld, b, i, j)] = true;
            }
        }
    }
    got.iter()
        .zip(&inside)
        .filter(|(g, &ins)| !ins && !g.is_nan())
        .count()
}

/// Runs `plan` once on fresh random data (seed `seed`) with strides `s` and checks D (and aux)
/// against the float64 reference. Problems above `2^30` multiply-adds are checked on a sample
/// of rows (the first, the last, and 30 random ones per batch).
pub fn check_plan(rt: &Runtime, plan: &GemmPlan, s: GemmStrides, seed: u64) -> Result<CheckReport> {
    let kernel = GemmKernel::new(rt, plan)?;
    check_kernel(rt, &kernel, s, seed)
}

/// As [`check_plan`], with a compiled kernel.
pub fn check_kernel(
    rt: &Runtime,
    kernel: &GemmKernel,
    s: GemmStrides,
    seed: u64,
) -> Result<CheckReport> {
    let plan = kernel.plan();
    check_launch(rt, &plan.problem, plan.kernel_name(), s, seed, |args| {
        kernel.launch(rt.stream(), args)
    })
}

/// The harness behind every GEMM path: uploads fresh random data (seed `seed`) with strides
/// `s` and NaN-poisoned outputs, calls `launch` once, and checks D (and aux) against the
/// float64 reference on every row up to `2^30` multiply-adds, else on the first, last and 30
/// random rows; also checks that nothing outside the matrices was written.
pub fn check_launch(
    rt: &Runtime,
    problem: &GemmProblem,
    kernel_name: String,
    s: GemmStrides,
    seed: u64,
    launch: impl FnOnce(&GemmArgs) -> Result<AccessPaths>,
) -> Result<CheckReport> {
    let p = *problem;
    let mut rng = Rng::new(seed);
    let host = random_host(&p, &s, &mut rng);
    let dev = DeviceGemm::upload(rt, &p, &s, &host)?;
    let paths = launch(&dev.args(rt, s))?;
    rt.stream()
        .synchronize()
        .map_err(driver_err("cuStreamSynchronize after the GEMM under check"))?;
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
    let mut written_outside = outside_written(&d, &p, s.batch_d, s.ldd);
    let aux_stats = match &aux {
        Some(a) => {
            written_outside += outside_written(a, &p, s.batch_aux, s.ldaux);
            let st = compare(a, &want.aux);
            Some((st, Bounds::for_result(p.output, p.k, st.max_ref)))
        }
        None => None,
    };
    Ok(CheckReport {
        problem: p,
        kernel: kernel_name,
        seed,
        paths,
        rows_checked: rows.len(),
        d: d_stats,
        d_bounds,
        aux: aux_stats,
        written_outside,
    })
}

/// [`check_plan`] turned into an error when a bound is missed.
pub fn require(report: CheckReport) -> Result<CheckReport> {
    if report.passed() {
        Ok(report)
    } else {
        Err(KernelError::Verification {
            op: "gemm check",
            msg: report.to_string(),
        })
    }
}
