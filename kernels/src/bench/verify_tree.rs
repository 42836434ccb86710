//! One checked run of a GEMM with a tree epilogue against the float64 evaluator: random
//! inputs for everything the tree reads, NaN-poisoned outputs, the tree kernel on the path
//! [`crate::plan::choose_path`] picks (or the sm80-class one), and every output compared —
//! D, the aux output, the bias gradients and the operand sums (what `tessera run gemm
//! --epilogue TREE` does).

use std::fmt;

use crate::bench::buffers::DeviceBuf;
use crate::error::{KernelError, Result};
use crate::launch::runtime::Runtime;
use crate::plan::problem::{DType, GemmProblem};
use crate::plan::GemmStrides;
use crate::rng::Rng;

use crate::epilogue::check::Binding;
use crate::epilogue::eval::{evaluate, EvalInputs};
use crate::epilogue::tree::{EpilogueTree, Operand};
use crate::launch::tree::{EpBuffers, OperandSum, TreeKernel};

/// The comparison of one output.
#[derive(Clone, Debug, PartialEq)]
pub struct OutputCheck {
    /// `D`, `aux`, `bgrad_row`, ...
    pub name: &'static str,
    /// Elements compared.
    pub compared: usize,
    /// Elements outside the bound (for a bit-mask: bits that differ where the value behind
    /// the bit is not within rounding of zero).
    pub failed: usize,
    /// The largest `|got - want| / bound` over the compared elements (at most 1 passes).
    pub worst: f64,
}

/// What [`check_tree`] found.
#[derive(Clone, Debug, PartialEq)]
pub struct TreeReport {
    /// The tree.
    pub tree: String,
    /// `"sm90"` or `"sm80"`.
    pub path: &'static str,
    /// The random seed.
    pub seed: u64,
    /// One entry per output.
    pub outputs: Vec<OutputCheck>,
}

impl TreeReport {
    /// Every output within its bound.
    pub fn passed(&self) -> bool {
        self.outputs.iter().all(|o| o.failed == 0)
    }
}

impl fmt::Display for TreeReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "tree `{}` on the {} path, seed {} (replay with --seed {}):",
            self.tree, self.path, self.seed, self.seed
        )?;
        for o in &self.outputs {
            writeln!(
                f,
                "  {:10} {:>9} compared, {:>6} outside the bound, worst {:.3} of the bound: {}",
                o.name,
                o.compared,
                o.failed,
                o.worst,
                if o.failed == 0 { "ok" } else { "FAILED" }
            )?;
        }
        write!(f, "{}", if self.passed() { "PASSED" } else { "FAILED" })
    }
}

fn compare(
    name: &'static str,
    got: &[f64],
    want: &[f64],
    bound: impl Fn(f64) -> f64,
) -> OutputCheck {
    let mut c = OutputCheck {
        name,
        compared: 0,
        failed: 0,
        worst: 0.0,
    };
    for (g, w) in got.iter().zip(want) {
        let b = bound(*w);
        let r = (g - w).abs() / b;
        c.compared += 1;
        // NaN (a poisoned element never written) fails.
        if r.is_nan() || r > 1.0 {
            c.failed += 1;
        }
        if r.is_nan() {
            c.worst = f64::INFINITY;
        } else {
            c.worst = c.worst.max(r);
        }
    }
    c
}

/// Runs `tree` as the epilogue of `problem` (its own epilogue must be plain; A, B in its
/// storage orders, tight; alpha 1.5, beta 0.5 when the tree reads C) on random data from
/// `seed` and compares every output with [`evaluate`]'s. Refuses problems whose float64
/// reference would take more than about 2^34 multiply-adds.
///
/// Bounds: D and a full aux output `u |want| + (1e-4 + 4 K 2^-24)(1 + |want|)`, with `u` the
/// unit roundoff of the stored type (fp32 accumulation of K products of values in [-1, 1)
/// plus one rounding); a bias gradient or operand sum of `L` terms `(1e-4 + 4 K 2^-24) (1 +
/// |want|) max(1, L / 64)`; a bit-mask bit by bit, skipping bits whose value lies within
/// the D bound of zero.
pub fn check_tree(
    rt: &Runtime,
    problem: &GemmProblem,
    tree: &EpilogueTree,
    path: crate::plan::PathOptions,
    seed: u64,
) -> Result<TreeReport> {
    const OP: &str = "check_tree";
    let p = problem;
    p.validate()?;
    let work = p.m as f64 * p.n as f64 * p.k as f64 * p.batch as f64;
    if work > 2f64.powi(34) {
        return Err(KernelError::invalid(
            OP,
            format!("{p}: {work:.2e} multiply-adds is too big for the float64 reference"),
        ));
    }
    let (m, n, k, nb) = (p.m as usize, p.n as usize, p.k as usize, p.batch as usize);
    let out = p.output;
    let s = GemmStrides::tight(p);
    let mut r = Rng::new(seed);
    let round = |v: Vec<f32>, t: DType| -> Vec<f32> {
        v.into_iter()
            .map(|x| crate::reference::round_to(x, t))
            .collect()
    };
    let a = round(r.vec(nb * m * k, -1.0, 1.0), p.input);
    let b = round(r.vec(nb * k * n, -1.0, 1.0), p.input);
    let mut bind = Binding::for_tree(tree, p.m, p.n, p.k, p.batch, out);
    bind.alpha = 1.5;
    if bind.c.is_some() {
        bind.beta = 0.5;
    }
    let kernel = TreeKernel::plan(rt, p, tree, &bind, path)?;
    let full = |r: &mut Rng| round(r.vec(nb * m * n, -1.0, 1.0), out);
    let c = full(&mut r);
    let residual = full(&mut r);
    let aux_in = full(&mut r);
    let bias_row = round(r.vec(m, -1.0, 1.0), out);
    let bias_col = round(r.vec(n, -1.0, 1.0), out);
    let bits: Vec<bool> = (0..nb * m * n).map(|_| r.next_u64() & 1 == 1).collect();

    let up = |t: DType, v: &[f32]| DeviceBuf::upload(rt, t, v);
    let a_d = up(p.input, &a)?;
    let b_d = up(p.input, &b)?;
    let d_d = DeviceBuf::poisoned(rt, out, nb * m * n)?;
    let c_d = up(out, &c)?;
    let res_d = up(out, &residual)?;
    let aux_in_d = match bind.aux_in_bits {
        Some(spec) => {
            let ld = spec.ld as usize;
            let mut words = vec![0u32; (nb * m * ld).div_ceil(32)];
            for bi in 0..nb {
                for i in 0..m {
                    for j in 0..n {
                        if bits[(bi * m + i) * n + j] {
                            let bit = (bi * m + i) * ld + j;
                            words[bit / 32] |= 1 << (bit % 32);
                        }
                    }
                }
            }
            let w: Vec<f32> = words.iter().map(|&w| f32::from_bits(w)).collect();
            up(DType::F32, &w)?
        }
        None => up(out, &aux_in)?,
    };
    let aux_d = match bind.aux {
        Some(spec) if spec.bits => {
            // Junk words: the kernel must clear bits as well as set them.
            let words = (nb * m * spec.ld as usize).div_ceil(32);
            let junk: Vec<f32> = (0..words)
                .map(|_| f32::from_bits(r.next_u64() as u32))
                .collect();
            Some(up(DType::F32, &junk)?)
        }
        Some(spec) => Some(DeviceBuf::poisoned(rt, spec.dtype, nb * m * n)?),
        None => None,
    };
    let br_d = up(out, &bias_row)?;
    let bc_d = up(out, &bias_col)?;
    let gr_d = up(DType::F32, &vec![0.0; nb * m])?;
    let gc_d = up(DType::F32, &vec![0.0; nb * n])?;
    let bufs = EpBuffers {
        d: Some(d_d.mem(rt)),
        c: Some(c_d.mem(rt)),
        residual: Some(res_d.mem(rt)),
        aux_in: Some(aux_in_d.mem(rt)),
        aux: aux_d.as_ref().map(|x| x.mem(rt)),
        bias_row: Some(br_d.mem(rt)),
        bias_col: Some(bc_d.mem(rt)),
        bgrad_row: Some(gr_d.mem(rt)),
        bgrad_col: Some(gc_d.mem(rt)),
    };
    kernel.launch(rt.cx(), &a_d.mem(rt), &b_d.mem(rt), &s, &bind, &bufs)?;
    let mut sums = Vec::new();
    if !tree.sum_k.is_empty() {
        let k_sum = OperandSum::new(rt)?;
        for &which in &tree.sum_k {
            let (len, x) = match which {
                Operand::A => (m, &a_d),
                Operand::B => (n, &b_d),
            };
            let o = DeviceBuf::poisoned(rt, DType::F32, nb * len)?;
            k_sum.launch(
                rt.stream(),
                p,
                &s,
                which,
                &x.mem(rt),
                &o.mem(rt),
                len as i64,
            )?;
            sums.push((which, o));
        }
    }
    rt.stream()
        .synchronize()
        .map_err(crate::launch::runtime::driver_err("cuStreamSynchronize"))?;

    // The float64 reference.
    let f64s = |v: &[f32]| v.iter().map(|&x| f64::from(x)).collect::<Vec<f64>>();
    let (a64, b64) = (f64s(&a), f64s(&b));
    // A and B in the evaluator's layouts (batch x M x K, batch x K x N) and the product.
    let mut a_mk = vec![0f64; nb * m * k];
    let mut b_kn = vec![0f64; nb * k * n];
    for bi in 0..nb {
        for i in 0..m {
            for kk in 0..k {
                a_mk[(bi * m + i) * k + kk] = a64[s.a_index(p, bi as i64, i as i64, kk as i64)];
            }
        }
        for kk in 0..k {
            for j in 0..n {
                b_kn[(bi * k + kk) * n + j] = b64[s.b_index(p, bi as i64, kk as i64, j as i64)];
            }
        }
    }
    let mut acc = vec![0f64; nb * m * n];
    for bi in 0..nb {
        for i in 0..m {
            let row = &mut acc[(bi * m + i) * n..(bi * m + i + 1) * n];
            for kk in 0..k {
                let x = a_mk[(bi * m + i) * k + kk];
                let brow = &b_kn[(bi * k + kk) * n..(bi * k + kk + 1) * n];
                for (o, y) in row.iter_mut().zip(brow) {
                    *o += x * y;
                }
            }
        }
    }
    let (c64, res64, aux64, br64, bc64) = (
        f64s(&c),
        f64s(&residual),
        f64s(&aux_in),
        f64s(&bias_row),
        f64s(&bias_col),
    );
    let mut inp = EvalInputs::new(m, n, nb, &acc);
    inp.k = k;
    inp.alpha = f64::from(bind.alpha);
    inp.beta = f64::from(bind.beta);
    inp.c = Some(&c64);
    inp.residual = Some(&res64);
    inp.aux_in = Some(&aux64);
    inp.aux_in_bits = Some(&bits);
    inp.bias_row = Some(&br64);
    inp.bias_col = Some(&bc64);
    inp.a = Some(&a_mk);
    inp.b = Some(&b_kn);
    let want = evaluate(tree, &inp)?;

    let eps = 1e-4 + 4.0 * k as f64 * 2f64.powi(-24);
    let elem = |t: DType| move |w: f64| t.unit_roundoff() * w.abs() + eps * (1.0 + w.abs());
    let vec_bound =
        |terms: usize| move |w: f64| eps * (1.0 + w.abs()) * (terms as f64 / 64.0).max(1.0);
    let mut outputs = vec![compare("D", &d_d.download(rt)?, &want.d, elem(out))];
    if let (Some(spec), Some(buf), Some(wa)) = (bind.aux, &aux_d, &want.aux) {
        if spec.bits {
            let words = buf.download_words(rt)?;
            let ld = spec.ld as usize;
            let mut chk = OutputCheck {
                name: "aux bits",
                compared: 0,
                failed: 0,
                worst: 0.0,
            };
            // The value behind each bit: the same tree with the bit-mask store made a full one.
            let full_tree = EpilogueTree::new(crate::epilogue::tree::bits_to_full(&tree.d));
            let pre = evaluate(&full_tree, &inp)?.aux.unwrap_or_default();
            for bi in 0..nb {
                for i in 0..m {
                    for j in 0..n {
                        let at = (bi * m + i) * n + j;
                        let bit = (bi * m + i) * ld + j;
                        let got = (words[bit / 32] >> (bit % 32)) & 1 == 1;
                        let v = pre.get(at).copied().unwrap_or(f64::NAN);
                        if v.abs() <= elem(out)(v) {
                            continue;
                        }
                        chk.compared += 1;
                        if got != (wa[at] == 1.0) {
                            chk.failed += 1;
                            chk.worst = f64::INFINITY;
                        }
                    }
                }
            }
            outputs.push(chk);
        } else {
            outputs.push(compare("aux", &buf.download(rt)?, wa, elem(spec.dtype)));
        }
    }
    if let Some(w) = &want.bgrad_row {
        outputs.push(compare("bgrad_row", &gr_d.download(rt)?, w, vec_bound(n)));
    }
    if let Some(w) = &want.bgrad_col {
        outputs.push(compare("bgrad_col", &gc_d.download(rt)?, w, vec_bound(m)));
    }
    for (which, buf) in &sums {
        let (name, w) = match which {
            Operand::A => ("sum_k_a", &want.sum_k_a),
            Operand::B => ("sum_k_b", &want.sum_k_b),
        };
        if let Some(w) = w {
            outputs.push(compare(name, &buf.download(rt)?, w, vec_bound(k)));
        }
    }
    Ok(TreeReport {
        tree: tree.to_string(),
        path: kernel.path_name(),
        seed,
        outputs,
    })
}
