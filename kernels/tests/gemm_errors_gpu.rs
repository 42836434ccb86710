//! Bad input never panics and never reaches the GPU: one test per rule of `Gemm::launch`'s
//! checks, each asserting the error names the operand and the rule (and that D was not
//! written). Skips without a GPU (`TESSERA_REQUIRE_GPU=1` fails instead).

mod common;

use common::gpu;
use cudarc::driver::{CudaSlice, CudaStream};
use half::bf16;
use std::sync::Arc;
use tessera_kernels::{Context, Gemm, GemmSpec, Major, Operands, Tensor, TensorMut};
use tessera_layout::Layout;

fn l(s: &str) -> Layout {
    s.parse().expect("layout")
}

struct Setup {
    ctx: Context,
    stream: Arc<CudaStream>,
    gemm: Gemm,
    a: CudaSlice<bf16>,
    b: CudaSlice<bf16>,
    d: CudaSlice<bf16>,
    bias: CudaSlice<bf16>,
}

const M: usize = 64;
const N: usize = 96;
const K: usize = 32;

fn setup(test: &str, epilogue: &str) -> Option<Setup> {
    let ctx = gpu(test)?;
    let stream = ctx.cudarc().default_stream();
    let spec = GemmSpec::new(M as i64, N as i64, K as i64)
        .b(Major::Col)
        .epilogue(epilogue)
        .expect("epilogue");
    let gemm = Gemm::new(&ctx, &spec).expect("gemm");
    let z = |n: usize| {
        stream
            .clone_htod(&vec![bf16::from_f32(0.5); n])
            .expect("upload")
    };
    let (a, b, bias) = (z(M * K), z(N * K), z(N));
    // D poisoned with a marker: an error must leave it untouched.
    let d = stream
        .clone_htod(&vec![bf16::from_f32(7.0); M * N])
        .expect("upload");
    Some(Setup {
        ctx,
        stream,
        gemm,
        a,
        b,
        d,
        bias,
    })
}

fn untouched(s: &Setup) {
    s.stream.synchronize().expect("sync");
    let d = s.stream.clone_dtoh(&s.d).expect("download");
    assert!(d.iter().all(|&x| x == bf16::from_f32(7.0)), "D was written");
}

fn expect_err(what: &str, r: Result<(), tessera_kernels::KernelError>, needles: &[&str]) {
    let e = r.expect_err(what).to_string();
    eprintln!("{what}: {e}");
    for n in needles {
        assert!(e.contains(n), "{what}: `{e}` lacks `{n}`");
    }
}

#[test]
fn wrong_element_type() {
    let Some(mut s) = setup("wrong_element_type", "acc") else {
        return;
    };
    let f: CudaSlice<f32> = s.stream.alloc_zeros(M * K).expect("alloc");
    let r = s
        .gemm
        .launch(&s.stream, &f, &s.b, &mut s.d, Operands::new());
    expect_err("f32 A", r, &["A", "fp32", "bf16"]);
    untouched(&s);
    let _ = &s.ctx;
}

#[test]
fn layouts_of_the_wrong_shape_order_or_strides() {
    let Some(mut s) = setup("layouts", "acc") else {
        return;
    };
    for (layout, rule) in [
        ("(96,32):(32,1)", "shape"),
        ("(64,32):(1,64)", "row-major A"),
        ("(64,32):(-32,1)", "negative"),
        ("(64,32):(16,1)", "overlap"),
        ("((8,8),32):((32,256),1)", "shape"),
    ] {
        let a = Tensor::new(&s.a, l(layout));
        let r = s.gemm.launch(&s.stream, a, &s.b, &mut s.d, Operands::new());
        expect_err(layout, r, &["A", layout, rule]);
    }
    untouched(&s);
}

#[test]
fn a_buffer_smaller_than_its_layout() {
    let Some(mut s) = setup("a_buffer_smaller_than_its_layout", "acc") else {
        return;
    };
    // D with a padded pitch reaches beyond the buffer.
    let d = TensorMut::new(&mut s.d, l("(64,96):(128,1)"));
    let r = s.gemm.launch(&s.stream, &s.a, &s.b, d, Operands::new());
    expect_err(
        "padded D",
        r,
        &[
            "D",
            "(64,96):(128,1)",
            "needs 8160 elements",
            "the buffer has 6144",
        ],
    );
    let short = s.a.slice(0..M * K - 1);
    let r = s
        .gemm
        .launch(&s.stream, &short, &s.b, &mut s.d, Operands::new());
    expect_err("short A", r, &["A", "needs 2048 elements", "2047"]);
    untouched(&s);
}

#[test]
fn outputs_that_overlap_inputs() {
    let Some(s) = setup("outputs_that_overlap_inputs", "relu(acc + bias_col)") else {
        return;
    };
    // D over A: the same memory seen through a raw pointer.
    use cudarc::driver::DevicePtr;
    let pa = s.a.device_ptr(&s.stream).0;
    let d = unsafe { TensorMut::from_raw(pa, Some(tessera_kernels::DType::Bf16), M * K * 4) };
    let r = s
        .gemm
        .launch(&s.stream, &s.a, &s.b, d, Operands::new().bias_col(&s.bias));
    expect_err("D over A", r, &["D", "overlaps", "A"]);
    untouched(&s);
}

#[test]
fn tensors_missing_or_not_used() {
    let Some(mut s) = setup("tensors_missing_or_not_used", "relu(acc + bias_col)") else {
        return;
    };
    let r = s
        .gemm
        .launch(&s.stream, &s.a, &s.b, &mut s.d, Operands::new());
    expect_err("no bias", r, &["bias_col", "not given"]);
    let r = s.gemm.launch(
        &s.stream,
        &s.a,
        &s.b,
        &mut s.d,
        Operands::new().bias_col(&s.bias).bias_row(&s.bias),
    );
    expect_err("extra bias_row", r, &["bias_row", "does not use"]);
    // A bias of the wrong length.
    let short = s.bias.slice(0..N - 1);
    let r = s.gemm.launch(
        &s.stream,
        &s.a,
        &s.b,
        &mut s.d,
        Operands::new().bias_col(&short),
    );
    expect_err("short bias", r, &["bias_col", "needs 96 elements"]);
    untouched(&s);
}

#[test]
fn misaligned_bases() {
    let Some(mut s) = setup("misaligned_bases", "acc") else {
        return;
    };
    use cudarc::driver::DevicePtr;
    let pa = s.a.device_ptr(&s.stream).0;
    // One byte off: not aligned to its 2-byte elements.
    let a = unsafe { Tensor::from_raw(pa + 1, Some(tessera_kernels::DType::Bf16), M * K - 1) };
    let r = s.gemm.launch(&s.stream, a, &s.b, &mut s.d, Operands::new());
    expect_err("odd byte", r, &["A", "not aligned"]);
    untouched(&s);
}
