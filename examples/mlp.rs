//! A two-layer MLP, forward and backward, on device memory this program allocates with cudarc,
//! each layer one tessera GEMM with its epilogue fused; the gradients are checked against a
//! float64 reference computed here on the host.
//!
//! `cargo run --release --features cuda --example mlp`
//!
//! The model (nn.Linear's convention: weights stored `out x in`), batch B, loss
//! `L = ½ ‖y - t‖²`:
//!
//! ```text
//! pre1 = x W1ᵀ + b1          h1 = gelu(pre1)         (one GEMM: D = h1, aux = pre1)
//! y    = h1 W2ᵀ + b2         dy = y - t              (one GEMM: D = dy, aux = y, residual = t)
//! dW2  = dyᵀ h1              db2 = Σ_rows dy         (one GEMM, db2 its A's sum over K)
//! dpre1 = (dy W2) * gelu'(pre1)   db1 = Σ_rows dpre1 (one GEMM, db1 its column reduction)
//! dW1  = dpre1ᵀ x            dx = dpre1 W1           (two GEMMs)
//! ```

use std::error::Error;
use std::sync::Arc;

use cudarc::driver::{CudaSlice, CudaStream};
use half::bf16;
use tessera::kernels::{Context, Gemm, GemmSpec, Major, Operands};

/// Host values rounded to bf16, and the device copy.
fn upload(s: &Arc<CudaStream>, v: &[f64]) -> Result<(Vec<f64>, CudaSlice<bf16>), Box<dyn Error>> {
    let b: Vec<bf16> = v.iter().map(|&x| bf16::from_f64(x)).collect();
    let rounded = b.iter().map(|x| x.to_f64()).collect();
    Ok((rounded, s.clone_htod(&b)?))
}

fn download(s: &Arc<CudaStream>, d: &CudaSlice<bf16>) -> Result<Vec<f64>, Box<dyn Error>> {
    Ok(s.clone_dtoh(d)?.iter().map(|x| x.to_f64()).collect())
}

/// `a (m x k) b (k x n)` in float64, row-major; `ta`/`tb`: the operand is stored transposed.
fn matmul(a: &[f64], b: &[f64], (m, n, k): (usize, usize, usize), ta: bool, tb: bool) -> Vec<f64> {
    let mut c = vec![0.0; m * n];
    for i in 0..m {
        for kk in 0..k {
            let x = if ta { a[kk * m + i] } else { a[i * k + kk] };
            for j in 0..n {
                let y = if tb { b[j * k + kk] } else { b[kk * n + j] };
                c[i * n + j] += x * y;
            }
        }
    }
    c
}

fn gelu(x: f64) -> f64 {
    0.5 * x * (1.0 + libm_erf(x / std::f64::consts::SQRT_2))
}

fn dgelu(x: f64) -> f64 {
    let pdf = (-0.5 * x * x).exp() / (2.0 * std::f64::consts::PI).sqrt();
    0.5 * (1.0 + libm_erf(x / std::f64::consts::SQRT_2)) + x * pdf
}

/// erf by its continued series (Abramowitz–Stegun 7.1.26 is too coarse for a reference):
/// the Maclaurin series, converging fast for the |x| < 4 an MLP's activations take here.
fn libm_erf(x: f64) -> f64 {
    if x.abs() > 5.0 {
        return x.signum();
    }
    let (mut sum, mut term, mut n) = (x, x, 0.0);
    while term.abs() > 1e-17 * sum.abs().max(1e-300) {
        n += 1.0;
        term *= -x * x / n;
        sum += term / (2.0 * n + 1.0);
    }
    2.0 / std::f64::consts::PI.sqrt() * sum
}

/// `‖got - want‖ / ‖want‖`.
fn rel_err(got: &[f64], want: &[f64]) -> f64 {
    let num: f64 = got.iter().zip(want).map(|(g, w)| (g - w) * (g - w)).sum();
    let den: f64 = want.iter().map(|w| w * w).sum();
    (num / den.max(f64::MIN_POSITIVE)).sqrt()
}

/// The six GEMMs of a step, for batch `b` and widths `din -> h -> dout`: the two layers
/// forward, then dW2 (with db2), dpre1 (with db1), dW1 and dX.
fn plan_gemms(
    ctx: &Context,
    (b, din, h, dout): (usize, usize, usize, usize),
) -> Result<[Gemm; 6], Box<dyn Error>> {
    let (bi, hi, dini, douti) = (b as i64, h as i64, din as i64, dout as i64);
    let layer1 = Gemm::new(
        ctx,
        &GemmSpec::linear(bi, hi, dini).epilogue("gelu(aux(acc + bias_col))")?,
    )?;
    let layer2 = Gemm::new(
        ctx,
        &GemmSpec::linear(bi, douti, hi).epilogue("aux(acc + bias_col) - residual")?,
    )?;
    let grad_w2 = Gemm::new(
        ctx,
        &GemmSpec::new(douti, hi, bi)
            .a(Major::Col)
            .epilogue("acc; sum_k_a")?,
    )?;
    let grad_h1 = Gemm::new(
        ctx,
        &GemmSpec::new(bi, hi, douti).epilogue("bgrad_col(acc * dgelu(aux_in))")?,
    )?;
    let grad_w1 = Gemm::new(ctx, &GemmSpec::new(hi, dini, bi).a(Major::Col))?;
    let grad_x = Gemm::new(ctx, &GemmSpec::new(bi, dini, hi))?;
    Ok([layer1, layer2, grad_w2, grad_h1, grad_w1, grad_x])
}

/// The float64 values of a step, with float64 intermediates.
struct Reference {
    h1: Vec<f64>,
    y: Vec<f64>,
    dy: Vec<f64>,
    dw2: Vec<f64>,
    db2: Vec<f64>,
    dpre1: Vec<f64>,
    db1: Vec<f64>,
    dw1: Vec<f64>,
    dx: Vec<f64>,
}

fn reference(
    x: &[f64],
    w1: &[f64],
    b1: &[f64],
    w2: &[f64],
    b2: &[f64],
    t: &[f64],
    (b, din, h, dout): (usize, usize, usize, usize),
) -> Reference {
    let mut pre1 = matmul(x, w1, (b, h, din), false, true);
    pre1.iter_mut()
        .enumerate()
        .for_each(|(i, v)| *v += b1[i % h]);
    let h1: Vec<f64> = pre1.iter().map(|&v| gelu(v)).collect();
    let mut y = matmul(&h1, w2, (b, dout, h), false, true);
    y.iter_mut()
        .enumerate()
        .for_each(|(i, v)| *v += b2[i % dout]);
    let dy: Vec<f64> = y.iter().zip(t).map(|(a, b)| a - b).collect();
    let dw2 = matmul(&dy, &h1, (dout, h, b), true, false);
    let db2: Vec<f64> = (0..dout)
        .map(|j| (0..b).map(|i| dy[i * dout + j]).sum())
        .collect();
    let dh1 = matmul(&dy, w2, (b, h, dout), false, false);
    let dpre1: Vec<f64> = dh1.iter().zip(&pre1).map(|(g, p)| g * dgelu(*p)).collect();
    let db1: Vec<f64> = (0..h)
        .map(|j| (0..b).map(|i| dpre1[i * h + j]).sum())
        .collect();
    let dw1 = matmul(&dpre1, x, (h, din, b), true, false);
    let dx = matmul(&dpre1, w1, (b, din, h), false, false);
    Reference {
        h1,
        y,
        dy,
        dw2,
        db2,
        dpre1,
        db1,
        dw1,
        dx,
    }
}

fn main() -> Result<(), Box<dyn Error>> {
    let (b, din, h, dout) = (256usize, 384usize, 512usize, 128usize);
    let ctx = match Context::new(0) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("mlp: no GPU ({e}); nothing to run");
            return Ok(());
        }
    };
    let s = ctx.cudarc().default_stream();
    println!(
        "device {} ({}), batch {b}, {din} -> {h} -> {dout}",
        ctx.device_name(),
        ctx.arch()
    );

    // Inputs and parameters: deterministic pseudo-random values.
    let mut seed = 0x2545_f491_4f6c_dd1du64;
    let mut rand = |n: usize, scale: f64| -> Vec<f64> {
        (0..n)
            .map(|_| {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                ((seed >> 11) as f64 / (1u64 << 53) as f64 * 2.0 - 1.0) * scale
            })
            .collect()
    };
    let (x, x_d) = upload(&s, &rand(b * din, 1.0))?;
    let (w1, w1_d) = upload(&s, &rand(h * din, 1.0 / (din as f64).sqrt()))?;
    let (b1, b1_d) = upload(&s, &rand(h, 0.1))?;
    let (w2, w2_d) = upload(&s, &rand(dout * h, 1.0 / (h as f64).sqrt()))?;
    let (b2, b2_d) = upload(&s, &rand(dout, 0.1))?;
    let (t, t_d) = upload(&s, &rand(b * dout, 1.0))?;
    let zeros = |n: usize| s.alloc_zeros::<bf16>(n);
    let (mut h1_d, mut pre1_d, mut dy_d, mut y_d) = (
        zeros(b * h)?,
        zeros(b * h)?,
        zeros(b * dout)?,
        zeros(b * dout)?,
    );
    let (mut dw2_d, mut dpre1_d, mut dw1_d, mut dx_d) = (
        zeros(dout * h)?,
        zeros(b * h)?,
        zeros(h * din)?,
        zeros(b * din)?,
    );
    let mut db2_d = s.alloc_zeros::<f32>(dout)?;
    let mut db1_d = s.alloc_zeros::<f32>(h)?;

    // The six GEMMs, each planned and compiled once.
    let [layer1, layer2, grad_w2, grad_h1, grad_w1, grad_x] = plan_gemms(&ctx, (b, din, h, dout))?;
    for (name, g) in [
        ("layer1", &layer1),
        ("layer2", &layer2),
        ("dW2", &grad_w2),
        ("dpre1", &grad_h1),
        ("dW1", &grad_w1),
        ("dX", &grad_x),
    ] {
        println!(
            "  {name:6} {} path, {} epilogue",
            g.plan().path(),
            if g.plan().generated_epilogue() {
                "generated"
            } else {
                "flag-driven"
            }
        );
    }

    // Forward and backward: eight launches on one stream, no synchronization in between.
    layer1.launch(
        &s,
        &x_d,
        &w1_d,
        &mut h1_d,
        Operands::new().bias_col(&b1_d).aux(&mut pre1_d),
    )?;
    layer2.launch(
        &s,
        &h1_d,
        &w2_d,
        &mut dy_d,
        Operands::new().bias_col(&b2_d).aux(&mut y_d).residual(&t_d),
    )?;
    grad_w2.launch(
        &s,
        &dy_d,
        &h1_d,
        &mut dw2_d,
        Operands::new().sum_k_a(&mut db2_d),
    )?;
    grad_h1.launch(
        &s,
        &dy_d,
        &w2_d,
        &mut dpre1_d,
        Operands::new().aux_in(&pre1_d).bgrad_col(&mut db1_d),
    )?;
    grad_w1.launch(&s, &dpre1_d, &x_d, &mut dw1_d, Operands::new())?;
    grad_x.launch(&s, &dpre1_d, &w1_d, &mut dx_d, Operands::new())?;
    s.synchronize()?;

    // The float64 reference from the same (bf16-rounded) inputs, with float64 intermediates.
    let r = reference(&x, &w1, &b1, &w2, &b2, &t, (b, din, h, dout));
    let loss: f64 = 0.5 * r.dy.iter().map(|v| v * v).sum::<f64>();
    let got_dy = download(&s, &dy_d)?;
    let got_loss: f64 = 0.5 * got_dy.iter().map(|v| v * v).sum::<f64>();
    println!("loss {got_loss:.6} (float64 reference {loss:.6})");

    // bf16 storage of h1, dy and dpre1 between the GEMMs bounds the agreement: a few 2^-8.
    let f32s = |v: Vec<f32>| v.into_iter().map(f64::from).collect::<Vec<f64>>();
    let checks = [
        ("h1", rel_err(&download(&s, &h1_d)?, &r.h1)),
        ("y", rel_err(&download(&s, &y_d)?, &r.y)),
        ("dy", rel_err(&got_dy, &r.dy)),
        ("dW2", rel_err(&download(&s, &dw2_d)?, &r.dw2)),
        ("db2", rel_err(&f32s(s.clone_dtoh(&db2_d)?), &r.db2)),
        ("dpre1", rel_err(&download(&s, &dpre1_d)?, &r.dpre1)),
        ("db1", rel_err(&f32s(s.clone_dtoh(&db1_d)?), &r.db1)),
        ("dW1", rel_err(&download(&s, &dw1_d)?, &r.dw1)),
        ("dX", rel_err(&download(&s, &dx_d)?, &r.dx)),
    ];
    let bound = 3e-2;
    let mut ok = true;
    for (name, e) in checks {
        let pass = e < bound;
        ok &= pass;
        println!(
            "  {name:6} relative error {e:.2e} (bound {bound:.0e}): {}",
            if pass { "ok" } else { "FAILED" }
        );
    }
    if !ok {
        return Err("gradients differ from the float64 reference".into());
    }
    println!("PASSED");
    Ok(())
}
