//! Generated epilogue code: snapshots of every named fusion and the examples,
//! determinism, sharing of identical sub-trees, and refusals before any CUDA exists.

use tessera_kernels::epilogue::cuda::{apply_kernel_source, epilogue_source, generate};
use tessera_kernels::epilogue::{parse_epilogue, residual_relu, EpilogueTree, Fusion};

fn examples() -> Vec<(String, EpilogueTree)> {
    let mut v: Vec<(String, EpilogueTree)> = Fusion::ALL
        .iter()
        .map(|f| (f.name().to_string(), f.tree()))
        .collect();
    v.push(("residual_relu".into(), residual_relu()));
    for (name, text) in [
        ("gelu_aux_row", "gelu_aux(acc + bias_row)"),
        ("select_rows", "select(row < 100, sigmoid(acc), tanh(acc))"),
        ("residual_row", "relu(acc + bias_row + residual)"),
        (
            "col_ranges",
            "select(col < 64, relu(acc), select(col < 192, silu(acc), clamp(acc, -1, 6.0)))",
        ),
        (
            "aux_fp32_rowgrad",
            "bgrad_row(fp16(aux(alpha * acc, fp32)) * dsigmoid(aux_in))",
        ),
        ("comma_list", "bias,gelu,aux"),
    ] {
        v.push((name.into(), parse_epilogue(text).unwrap()));
    }
    v
}

#[test]
fn generated_epilogues_snapshot() {
    for (name, t) in examples() {
        let src = generate(&t).unwrap();
        insta::assert_snapshot!(format!("generated_{name}"), src);
    }
}

#[test]
fn generation_is_deterministic_and_shares_subtrees() {
    for (name, t) in examples() {
        assert_eq!(generate(&t).unwrap(), generate(&t).unwrap(), "{name}");
        assert_eq!(
            apply_kernel_source(&t).unwrap(),
            apply_kernel_source(&t).unwrap()
        );
    }
    let t = parse_epilogue("sigmoid(acc + bias_col) * sigmoid(acc + bias_col) + bias_col").unwrap();
    let src = generate(&t).unwrap();
    assert_eq!(src.matches("tessera_ep_sigmoid(").count(), 1, "{src}");
    assert_eq!(src.matches(", a.bias_col,").count(), 1, "{src}");
}

#[test]
fn select_branches_compute_only_their_side() {
    let t = parse_epilogue("select(row < 100, sigmoid(acc), tanh(acc))").unwrap();
    let src = generate(&t).unwrap();
    let if_at = src.find("if (").unwrap();
    let else_at = src.find("} else {").unwrap();
    let sig = src.find("tessera_ep_sigmoid(acc)").unwrap();
    let tanh = src.find("tessera_ep_tanh(acc)").unwrap();
    assert!(if_at < sig && sig < else_at && else_at < tanh, "{src}");
    // A value computed in one branch is not reused outside it.
    let t = parse_epilogue("select(row < 1, sigmoid(acc), acc) + sigmoid(acc)").unwrap();
    let src = generate(&t).unwrap();
    assert_eq!(src.matches("tessera_ep_sigmoid(acc)").count(), 2, "{src}");
}

#[test]
fn reductions_switch_on_their_hooks() {
    let src = generate(&Fusion::DGeluBgrad.tree()).unwrap();
    assert!(src.contains(
        "constexpr bool kTesseraEpRowSum = false, kTesseraEpColSum = true, kTesseraEpBits = false;"
    ));
    let src = generate(&Fusion::GeluAuxBias.tree()).unwrap();
    assert!(src.contains(
        "constexpr bool kTesseraEpRowSum = false, kTesseraEpColSum = false, kTesseraEpBits = false;"
    ));
    // The ReLU mask: the kernel's word stores switch on.
    let src = generate(&Fusion::ReluAuxBias.tree()).unwrap();
    assert!(src.contains(
        "constexpr bool kTesseraEpRowSum = false, kTesseraEpColSum = false, kTesseraEpBits = true;"
    ));
    assert!(src.contains("tessera_ep_store_bit(a, cta, lcol, "), "{src}");
    let full = epilogue_source(&Fusion::BgradA.tree()).unwrap();
    assert!(full.contains("tessera_ep_operand_sum"));
    let full = epilogue_source(&Fusion::Bias.tree()).unwrap();
    assert!(!full.contains("tessera_ep_operand_sum"));
}

#[test]
fn unrepresentable_trees_are_refused_before_cuda() {
    // fp32 overflow of a constant.
    let t = parse_epilogue("acc * 1e300").unwrap();
    assert!(generate(&t).is_err());
    // A hand-built ill-kinded tree is refused too.
    use tessera_kernels::epilogue::build::*;
    let bad = EpilogueTree::new(acc() + row());
    assert!(generate(&bad).is_err());
    let nan = EpilogueTree::new(acc() * num(f64::NAN));
    assert!(generate(&nan).is_err());
}

/// Lays out `struct NAME` from its declaration in `src` by the C rules (each field at the next
/// multiple of its alignment) and returns (name, offset) and the size.
fn device_layout(src: &str, name: &str) -> (Vec<(String, usize)>, usize) {
    let start = src.find(&format!("struct {name} {{")).unwrap();
    let body = &src[start..];
    let body = &body[body.find('{').unwrap() + 1..body.find("};").unwrap()];
    let mut fields = Vec::new();
    let (mut off, mut align_max) = (0usize, 1usize);
    for line in body.lines() {
        let code = line.split("//").next().unwrap();
        for decl in code.split(';').map(str::trim).filter(|d| !d.is_empty()) {
            // `TYPE name, name, ...`: the type is everything before the first name.
            let first = decl.split(',').next().unwrap();
            let split = first.rfind([' ', '*']).unwrap() + 1;
            let (ty, names) = decl.split_at(split);
            let size = match ty.trim() {
                "int" | "float" => 4,
                "long long" => 8,
                t if t.ends_with('*') => 8,
                t => panic!("unknown type `{t}` in TesseraEpArgs"),
            };
            for name in names.split(',').map(str::trim) {
                off = off.div_ceil(size) * size;
                fields.push((name.to_string(), off));
                off += size;
                align_max = align_max.max(size);
            }
        }
    }
    (fields, off.div_ceil(align_max) * align_max)
}

#[test]
fn host_mirror_matches_the_device_struct_field_by_field() {
    use tessera_kernels::epilogue::cuda::EPILOGUE_TREE_CUH;
    use tessera_kernels::epilogue::cuda::{ep_args_layout, EpArgs};
    let (device, size) = device_layout(EPILOGUE_TREE_CUH, "TesseraEpArgs");
    let host: Vec<(String, usize)> = ep_args_layout()
        .into_iter()
        .map(|(n, o)| (n.to_string(), o))
        .collect();
    assert_eq!(device, host);
    assert_eq!(size, std::mem::size_of::<EpArgs>());
}

#[cfg(feature = "cuda")]
#[test]
fn tree_gemm_params_match_the_sm80_template() {
    use tessera_kernels::codegen::GEMM_SM80_CUH;
    use tessera_kernels::launch::tree::{tree_gemm_params_layout, TreeGemmParams};
    let (device, size) = device_layout(GEMM_SM80_CUH, "TesseraGemmParams");
    let host: Vec<(String, usize)> = tree_gemm_params_layout()
        .into_iter()
        .map(|(n, o)| (n.to_string(), o))
        .collect();
    assert_eq!(device, host);
    assert_eq!(size, std::mem::size_of::<TreeGemmParams>());
}

#[test]
fn generate_relu_bias_adds_the_bias_then_clamps_at_zero() {
    let src = generate(&parse_epilogue("relu(acc + bias_col)").unwrap()).unwrap();
    assert!(src.contains("const float v1 = acc + v0;"));
    assert!(src.contains("fmaxf(v1, 0.0f)"));
}

/// A column bias gradient in the Hopper GEMM's source: the column sums are on and flushed.
#[test]
fn sm90_tree_source_of_a_column_bias_gradient_flushes_column_sums() {
    use tessera_kernels::epilogue::cuda::sm90_tree_source;
    use tessera_kernels::plan::Sm90Plan;
    use tessera_kernels::GemmProblem;
    let plan = Sm90Plan::new(&GemmProblem::new(4096, 4096, 4096)).unwrap();
    let src = sm90_tree_source(&plan, &Fusion::DGeluBgrad.tree(), None).unwrap();
    assert!(src.contains("kTesseraEpColSum = true"));
    assert!(src.contains("tessera_ep_flush_col"));
}

/// Light: no exponential, erf or tanh, no reduction, no operand sum.
#[test]
fn light_tree_refuses_reductions_gelu_and_sigmoid() {
    use tessera_kernels::epilogue::cuda::light_tree;
    assert!(light_tree(&Fusion::ReluAuxBias.tree()));
    assert!(light_tree(&Fusion::DRelu.tree()));
    assert!(!light_tree(&Fusion::DReluBgrad.tree()));
    assert!(!light_tree(&Fusion::GeluBias.tree()));
    assert!(!light_tree(
        &parse_epilogue("select(row < 8, acc, sigmoid(acc))").unwrap()
    ));
}

/// A full aux store with no reduction: not a bit mask, not without aux, not with a bias
/// gradient.
#[test]
fn full_aux_tree_needs_a_full_aux_and_no_reduction() {
    use tessera_kernels::epilogue::cuda::full_aux_tree;
    assert!(full_aux_tree(&Fusion::GeluAuxBias.tree()));
    assert!(!full_aux_tree(&Fusion::GeluBias.tree()));
    assert!(!full_aux_tree(&Fusion::ReluAuxBias.tree())); // a bit mask
    assert!(!full_aux_tree(
        &parse_epilogue("bgrad_col(gelu_aux(acc))").unwrap()
    ));
}

#[test]
fn stageable_inputs_of_dgelu_are_its_aux_input() {
    use tessera_kernels::epilogue::cuda::{stageable_inputs, StagedInput};
    use tessera_kernels::epilogue::Binding;
    use tessera_kernels::DType;
    let t = Fusion::DGelu.tree();
    let b = Binding::for_tree(&t, 64, 64, 64, 1, DType::Bf16);
    assert_eq!(stageable_inputs(&t, &b), vec![StagedInput::AuxIn]);
}

/// A bf16 binding of GELU_AUX_BIAS: D's type is bf16 (0), and C is not read (beta = 0).
#[test]
fn static_types_fix_a_bf16_output_and_no_read_of_c() {
    use tessera_kernels::epilogue::cuda::static_types;
    use tessera_kernels::epilogue::Binding;
    use tessera_kernels::DType;
    let t = Fusion::GeluAuxBias.tree();
    let b = Binding::for_tree(&t, 64, 64, 64, 1, DType::Bf16);
    let s = static_types(&t, &b);
    assert!(s.contains("#define TESSERA_EP_DT_D 0"));
    assert!(s.contains("#define TESSERA_EP_READ_C false")); // beta = 0
}

/// Which trees start the accumulators with their column bias, and the tree left to the
/// epilogue then (`epilogue::cuda::bias_col_in_acc`, `without_bias_col`).
#[test]
fn bias_col_in_the_accumulators() {
    use crate::epilogue::cuda::{bias_col_in_acc, without_bias_col};
    use crate::epilogue::parse_epilogue;
    let tree = |t: &str| parse_epilogue(t).expect("epilogue");
    for (text, folds, rest) in [
        (
            "relu(acc + bias_col + residual)",
            true,
            "relu(acc + residual)",
        ),
        (
            "relu(bias_col + acc) + residual",
            true,
            "relu(acc) + residual",
        ),
        ("gelu(aux(acc + bias_col))", true, "gelu(aux(acc))"),
        (
            "relu(residual + (acc + bias_col))",
            true,
            "relu(residual + acc)",
        ),
        ("relu(alpha * acc + bias_col)", false, ""),
        ("relu(acc + bias_col) + acc", false, ""),
        ("relu(acc + residual) + bias_col", false, ""),
        ("relu(acc + bias_col + bias_col)", false, ""),
        ("relu(acc - bias_col)", false, ""),
        ("relu(acc + bias_row)", false, ""),
    ] {
        let t = tree(text);
        assert_eq!(bias_col_in_acc(&t), folds, "{text}");
        if folds {
            assert_eq!(without_bias_col(&t), tree(rest), "{text}");
        }
    }
}
