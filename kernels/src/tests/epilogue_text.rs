//! The text form of epilogue trees: the issue's examples, the named fusions, the comma
//! list, rejected texts, and print -> parse round trips over random trees.

use tessera_kernels::epilogue::build::*;
use tessera_kernels::epilogue::{
    from_comma_list, parse_epilogue, to_comma_list, AuxFormat, EpilogueError, EpilogueTree, Expr,
    Fusion, Operand, UnaryOp, VecAxis,
};
use tessera_kernels::rng::Rng;
use tessera_kernels::{DType, Epilogue};

fn parsed(s: &str) -> EpilogueTree {
    parse_epilogue(s).unwrap_or_else(|e| panic!("{s}: {e}"))
}

#[test]
fn the_issue_examples_parse_to_the_trees_they_name() {
    assert_eq!(
        parsed("gelu_aux(acc + bias_row)").d,
        (acc() + bias_row()).store_aux(AuxFormat::Full(None)).gelu()
    );
    assert_eq!(
        parsed("select(row < 100, sigmoid(acc), tanh(acc))").d,
        select(row().lt(int(100)), acc().sigmoid(), acc().tanh())
    );
    assert_eq!(
        parsed("relu(acc + bias_row + residual)").d,
        (acc() + bias_row() + residual()).relu()
    );
    assert_eq!(parsed("dgelu_bgrad"), Fusion::DGeluBgrad.tree());
    assert_eq!(
        parsed("relu_aux(alpha * acc)").d,
        (alpha() * acc()).store_aux(AuxFormat::Bits).relu()
    );
}

#[test]
fn precedence_and_associativity() {
    assert_eq!(parsed("acc + c * beta").d, acc() + c() * beta());
    assert_eq!(parsed("acc - c - beta").d, (acc() - c()) - beta());
    assert_eq!(parsed("acc - (c - beta)").d, acc() - (c() - beta()));
    assert_eq!(parsed("-acc * 2").d, (-acc()) * int(2));
    assert_eq!(parsed("acc * -2.5").d, acc() * num(-2.5));
    assert_eq!(parsed("-(2.5)").d, -num(2.5));
    assert_eq!(
        parsed("select(col >= 1 + 2, acc, 0.0)").d,
        select(col().ge(int(1) + int(2)), acc(), num(0.0))
    );
    assert_eq!(parsed("clamp(acc, -1, 6.0)").d, acc().clamp(-1.0, 6.0));
    assert_eq!(parsed("max(acc, c)").d, acc().max(c()));
    assert_eq!(
        parsed("aux(acc, fp32)").d,
        acc().store_aux(AuxFormat::Full(Some(DType::F32)))
    );
    assert_eq!(parsed("bf16(acc)").d, acc().round_to(DType::Bf16));
    assert_eq!(parsed("bgrad_row(acc)").d, acc().bgrad(VecAxis::Row));
    assert_eq!(
        parsed("acc; sum_k_a; sum_k_b").sum_k,
        vec![Operand::A, Operand::B]
    );
    assert_eq!(parsed("1e-3 * acc").d, num(1e-3) * acc());
}

#[test]
fn every_named_fusion_parses_by_its_name_and_prints_its_tree() {
    for f in Fusion::ALL {
        let t = parsed(f.name());
        assert_eq!(t, f.tree(), "{}", f.name());
        // The printed tree is ordinary text form and reads back to the same tree.
        assert_eq!(parsed(&t.to_string()), t, "{}", f.name());
    }
    let table: Vec<String> = Fusion::ALL
        .iter()
        .map(|f| format!("{:14} {:4} {}", f.name(), f.cublaslt_epilogue(), f.tree()))
        .collect();
    insta::assert_snapshot!("fusion_table", table.join("\n"));
    let described: Vec<String> = Fusion::ALL
        .iter()
        .map(|f| f.tree())
        .chain(
            [
                "bias,gelu,aux",
                "select(row < 100, sigmoid(acc), tanh(acc))",
                "bgrad_row(aux(acc, fp32) + residual)",
            ]
            .map(parsed),
        )
        .map(|t| tessera_kernels::epilogue::describe(&t))
        .collect();
    insta::assert_snapshot!("described", described.join("\n"));
}

#[test]
fn comma_lists_stay_accepted() {
    for s in [
        "bias,gelu,aux",
        "rowbias,relu",
        "c,bias",
        "gelu_tanh",
        "",
        "none",
        "relu",
    ] {
        let flags = Epilogue::parse(s).unwrap();
        assert_eq!(parsed(s), from_comma_list(&flags), "`{s}`");
    }
    assert_eq!(
        parsed("bias,gelu,aux").d,
        (alpha() * acc() + bias_col())
            .store_aux(AuxFormat::Full(None))
            .gelu()
    );
    assert_eq!(parsed("c").d, alpha() * acc() + beta() * c());
    assert_eq!(
        parsed("rowbias,relu").d,
        (alpha() * acc() + bias_row()).relu()
    );
    // Every comma-list epilogue comes back from its tree.
    for s in [
        "bias,gelu,aux",
        "rowbias,relu",
        "c,bias",
        "gelu_tanh,c,rowbias,aux",
        "",
        "relu,aux",
    ] {
        let flags = Epilogue::parse(s).unwrap();
        assert_eq!(
            to_comma_list(&from_comma_list(&flags)),
            Some(flags),
            "`{s}`"
        );
    }
    assert_eq!(
        to_comma_list(&Fusion::GeluBias.tree()).unwrap().to_string(),
        "c,bias,gelu_tanh"
    );
    for f in [
        Fusion::ReluAuxBias,
        Fusion::DRelu,
        Fusion::DGeluBgrad,
        Fusion::BgradA,
    ] {
        assert_eq!(to_comma_list(&f.tree()), None, "{}", f.name());
    }
    assert_eq!(to_comma_list(&parsed("relu(acc + bias_col)")), None); // no alpha
                                                                      // `relu,gelu` is a comma list with two activations: rejected.
    assert!(parse_epilogue("relu,gelu").is_err());
}

#[test]
fn malformed_texts_are_errors_with_a_position() {
    let cases = [
        ("relu(acc", "expected `)`"),
        ("acc +", "expected a number"),
        ("foo(acc)", "unknown function `foo`"),
        ("acc + bias", "unknown leaf `bias`"),
        ("relu(acc, c)", "takes 1 argument"),
        ("acc $ c", "unexpected character"),
        ("acc acc", "trailing input"),
        ("acc; sum_k_c", "sum_k_a"),
        ("aux(acc, int8)", "dtype"),
        ("clamp(acc, c, 1)", "bounds must be numbers"),
        ("99999999999999999999", "out of range"),
    ];
    for (text, want) in cases {
        match parse_epilogue(text) {
            Err(EpilogueError::Parse { msg, pos, .. }) => {
                assert!(msg.contains(want), "`{text}`: {msg}");
                assert!(pos <= text.len());
            }
            other => panic!("`{text}`: {other:?}"),
        }
    }
}

#[test]
fn ill_kinded_trees_are_rejected() {
    for text in [
        "relu(acc < 3)",                // predicate as a value
        "acc + row",                    // coordinate as a value
        "select(acc < 3, acc, c)",      // predicate over values
        "select(row, acc, c)",          // condition not a comparison
        "select(row < 2, aux(acc), c)", // sink under a select
        "aux(acc) + aux_bits(c)",       // two aux outputs
        "bgrad_col(bgrad_col(acc))",    // two reductions on one axis
        "aux_in + aux_in_bits",         // both aux inputs
        "acc; sum_k_a; sum_k_a",        // an operand sum twice
        "row < 3",                      // D is a predicate
        "clamp(acc, 2, 1)",             // lo > hi
    ] {
        let e = parse_epilogue(text).expect_err(text);
        assert!(
            matches!(
                e,
                EpilogueError::Type { .. } | EpilogueError::Unsupported { .. }
            ),
            "`{text}`: {e:?}"
        );
    }
    // Coordinate arithmetic inside predicates is fine, and integer literals are values.
    parsed("select(row * 2 + 1 < col, acc * 2, 0)");
}

#[test]
fn nesting_is_bounded_not_a_stack_overflow() {
    let deep = format!("{}acc{}", "relu(".repeat(500), ")".repeat(500));
    assert!(parse_epilogue(&deep).is_err());
    let deep_neg = format!("{}acc", "-".repeat(500));
    assert!(parse_epilogue(&deep_neg).is_err());
    let ok = format!("{}acc{}", "relu(".repeat(20), ")".repeat(20));
    assert!(parse_epilogue(&ok).is_ok());
}

/// A random value-kinded tree of depth at most `d`, with no sinks (those are limited to one
/// per kind) and coordinates only in predicates.
fn random_value(r: &mut Rng, d: u32) -> Expr {
    let pick = r.next_u64() % if d == 0 { 6 } else { 12 };
    match pick {
        0 => acc(),
        1 => c(),
        2 => bias_col(),
        3 => num(((r.next_u64() % 2001) as f64 - 1000.0) / 8.0),
        4 => int((r.next_u64() % 21) as i64 - 10),
        5 => alpha(),
        6 => random_value(r, d - 1) + random_value(r, d - 1),
        7 => random_value(r, d - 1) - random_value(r, d - 1),
        8 => random_value(r, d - 1) * random_value(r, d - 1),
        9 => {
            let ops = [
                UnaryOp::Neg,
                UnaryOp::Relu,
                UnaryOp::GeluTanh,
                UnaryOp::DSilu,
                UnaryOp::Round(DType::F16),
            ];
            random_value(r, d - 1).unary(ops[(r.next_u64() % 5) as usize])
        }
        10 => random_value(r, d - 1).max(random_value(r, d - 1)),
        _ => {
            let coord = [row(), col(), batch()][(r.next_u64() % 3) as usize].clone();
            let bound = int((r.next_u64() % 200) as i64 - 20);
            let p = match r.next_u64() % 4 {
                0 => coord.lt(bound),
                1 => coord.le(bound),
                2 => bound.gt(coord),
                _ => (coord - int(1)).ge(-bound),
            };
            select(p, random_value(r, d - 1), random_value(r, d - 1))
        }
    }
}

#[test]
fn print_then_parse_is_the_identity_on_random_trees() {
    let mut r = Rng::new(0x005e_ede9);
    for i in 0..3000 {
        let mut d = random_value(&mut r, 5);
        if i % 3 == 0 {
            d = d.store_aux(AuxFormat::Bits).relu();
        }
        if i % 5 == 0 {
            d = d.bgrad(VecAxis::Col);
        }
        let t = EpilogueTree::new(d);
        let text = t.to_string();
        let back = parse_epilogue(&text).unwrap_or_else(|e| panic!("{text}: {e}"));
        assert_eq!(back, t, "{text}");
    }
}

#[test]
fn token_soup_never_panics_and_what_parses_round_trips() {
    use tessera_kernels::epilogue::check::check;
    use tessera_kernels::epilogue::cuda::generate;
    use tessera_kernels::epilogue::{Binding, KernelCaps};
    let vocab = [
        "acc",
        "c",
        "alpha",
        "beta",
        "bias_row",
        "bias_col",
        "residual",
        "aux_in",
        "aux_in_bits",
        "row",
        "col",
        "batch",
        "1",
        "-2",
        "0.5",
        "1e-3",
        "+",
        "-",
        "*",
        "<",
        "<=",
        ">",
        ">=",
        "(",
        ")",
        ",",
        ";",
        "relu",
        "gelu",
        "select",
        "clamp",
        "max",
        "aux",
        "aux_bits",
        "relu_aux",
        "gelu_aux",
        "bgrad_row",
        "bgrad_col",
        "fp16",
        "sum_k_a",
        "dgelu_bgrad",
        "bias",
        "gelu,aux",
        "9223372036854775808",
        "@",
    ];
    let mut r = Rng::new(42);
    let mut parsed_ok = 0;
    for _ in 0..20_000 {
        let len = 1 + (r.next_u64() % 12) as usize;
        let text: Vec<&str> = (0..len)
            .map(|_| vocab[(r.next_u64() % vocab.len() as u64) as usize])
            .collect();
        let text = text.join(" ");
        if let Ok(t) = parse_epilogue(&text) {
            parsed_ok += 1;
            assert_eq!(parse_epilogue(&t.to_string()).as_ref(), Ok(&t), "{text}");
            let _ = generate(&t);
            let b = Binding::for_tree(&t, 33, 65, 8, 2, DType::F16);
            let _ = check(&t, &b, &KernelCaps::GENERATED);
        }
    }
    assert!(
        parsed_ok > 100,
        "only {parsed_ok} texts parsed: the sweep tests little"
    );
}

#[test]
fn long_chains_are_refused_before_they_get_deep() {
    let chain = vec!["acc"; 5000].join(" + ");
    let e = parse_epilogue(&chain).unwrap_err();
    assert!(e.to_string().contains("at most 4096"), "{e}");
    let chain = vec!["acc"; 1000].join(" * ");
    assert!(parse_epilogue(&chain).is_err());
    let ok = vec!["acc"; 40].join(" + ");
    assert!(parse_epilogue(&ok).is_ok());
    // A tree built in code is bounded by the checks instead.
    let mut deep = acc();
    for _ in 0..2_000 {
        deep = deep + acc();
    }
    assert!(deep.kind().is_err());
    assert_eq!(deep.depth(), 2_001);
    assert!(EpilogueTree::new(deep).check_structure().is_err());
}

#[test]
fn describe_names_the_tree_its_fusion_and_the_aux_extent() {
    let text = tessera_kernels::epilogue::describe(&Fusion::GeluAuxBias.tree());
    assert!(text
        .starts_with("epilogue gelu_tanh(aux(alpha * acc + beta * c + bias_col)) = gelu_aux_bias"));
    assert!(text.contains("aux: M x N in D's type"));
}

#[test]
fn from_comma_list_of_bias_gelu_aux() {
    let t = from_comma_list(&Epilogue::parse("bias,gelu,aux").unwrap());
    assert_eq!(t.to_string(), "gelu(aux(alpha * acc + bias_col))");
}

#[test]
fn to_comma_list_of_gelu_aux_and_not_of_a_bit_mask() {
    let e = to_comma_list(&parsed("gelu_aux(alpha * acc + bias_col)")).unwrap();
    assert_eq!(e.to_string(), "bias,gelu,aux");
    assert!(to_comma_list(&parsed("relu_aux(alpha * acc)")).is_none()); // a bit-mask
}

/// The flag-driven epilogue runs GELU_AUX_BIAS bound in bf16, not with an fp32 bias, and not
/// the ReLU bit mask (not a full aux).
#[test]
fn flag_epilogue_for_needs_the_output_type_and_a_full_aux() {
    use tessera_kernels::epilogue::{flag_epilogue_for, Binding, VecSpec};
    let tree = Fusion::GeluAuxBias.tree();
    let mut binding = Binding::for_tree(&tree, 256, 512, 64, 1, DType::Bf16);
    assert_eq!(
        flag_epilogue_for(&tree, &binding, DType::Bf16)
            .unwrap()
            .to_string(),
        "bias,gelu_tanh,aux"
    );
    // An fp32 bias is not what the flag-driven epilogue reads.
    binding.bias_col = Some(VecSpec::shared(512, DType::F32));
    assert!(flag_epilogue_for(&tree, &binding, DType::Bf16).is_none());
    // The ReLU bit-mask is not a full aux.
    let relu_aux = Fusion::ReluAuxBias.tree();
    let b = Binding::for_tree(&relu_aux, 256, 512, 64, 1, DType::Bf16);
    assert!(flag_epilogue_for(&relu_aux, &b, DType::Bf16).is_none());
}

/// A chain of minus signs prints with one level of nesting a sign, as it parses: every tree
/// the parser accepts prints as text it accepts again, up to the nesting limit.
#[test]
fn nested_minus_signs_print_as_text_that_parses_back() {
    for n in [2, 5, 40, 60] {
        for inner in ["acc", "0", "1.5", "(acc + bias_col)", "relu(acc)"] {
            let text = format!("{}{inner}", "-".repeat(n));
            let t = parsed(&text);
            let printed = t.to_string();
            assert_eq!(parsed(&printed), t, "{text} printed as {printed}");
        }
    }
    // A negative constant under the chain keeps its sign, not a pair of parentheses, so a
    // chain at the nesting limit still reads back.
    for text in [
        format!("{}1.7-1.7", "-".repeat(65)),
        format!("{}3", "-".repeat(65)),
        format!("{}(-2)", "-".repeat(62)),
        "-(-9223372036854775808)".to_string(),
    ] {
        let t = parsed(&text);
        let printed = t.to_string();
        assert_eq!(parsed(&printed), t, "{text} printed as {printed}");
    }
    // A minus over the integer 0 (what `--0` reads as, `-0` folding to 0) prints as `--0`,
    // not `-(0)`, whose parentheses would cost a level the text did not have.
    for text in [
        format!("{}0", "-".repeat(65)),
        format!("acc{}", " - --0 * 0".repeat(63)),
    ] {
        let t = parsed(&text);
        let printed = t.to_string();
        assert_eq!(parsed(&printed), t, "{text} printed as {printed}");
    }
    assert_eq!(parsed("--0").to_string(), "--0");
    assert_eq!(parsed("-(0)").to_string(), "--0");
    assert_eq!(parsed("---0").to_string(), "---0");
    assert_eq!(parsed("-(-1.5)").to_string(), "--1.5");
    assert_eq!(parsed("-(1.5)").to_string(), "-(1.5)");
    assert_eq!(parsed("--acc").to_string(), "--acc");
    assert_eq!(parsed("-(-(1.5))").to_string(), "--(1.5)");
    assert_eq!(parsed("-(acc + bias_col)").to_string(), "-(acc + bias_col)");
}
