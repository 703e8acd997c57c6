//! Each cleanup pass, and functionalisation, on small hand-built graphs.

#![cfg(feature = "exec")]

mod common;

use common::build::*;
use pt2kit::decompose::edit::Emitter;
use pt2kit::decompose::{functionalize, histogram, passes};
use pt2kit::exec::{self, DeviceKind, Executor};
use pt2kit::ir::*;
use pt2kit::tensorfile::HostTensor;

fn unary(em: &mut Emitter, op: &str, x: ValueId, sizes: &[i64]) -> ValueId {
    em.op(op, vec![("self", t(x))], meta(sizes)).unwrap()
}

fn run(p: &Program, x: &[f32], shape: &[usize]) -> Vec<f64> {
    let exec = Executor::new(p, exec::device(DeviceKind::Cpu).unwrap()).unwrap();
    let input = HostTensor {
        dtype: Dtype::Float32,
        shape: shape.to_vec(),
        data: f32s(x),
    };
    let out = exec.run(&[("x".into(), input)]).unwrap();
    out[0].1.to_f64()
}

fn count(p: &Program, op: &str) -> usize {
    histogram(p).get(op).copied().unwrap_or(0)
}

#[test]
fn dce_removes_dead_nodes_and_unread_weights_but_keeps_assertions() {
    let mut b = B::new();
    let w = b.input(
        "p_w",
        InputKind::Parameter("w".into()),
        meta(&[3]),
        Some(f32s(&[1.0, 2.0, 3.0])),
    );
    let x = b.input("x", InputKind::UserInput, meta(&[3]), None);
    let live = b.emit(|em| unary(em, "aten.relu.default", x, &[3]));
    b.emit(|em| unary(em, "aten.neg.default", x, &[3]));
    b.emit(|em| {
        em.call(
            "aten._assert_tensor_metadata.default",
            vec![("a", t(x))],
            vec![],
        )
        .unwrap();
        x
    });
    let _ = w;
    b.output(live);
    let mut p = b.p;
    let removed = passes::dce(&mut p).unwrap();
    assert_eq!(removed, 1);
    assert_eq!(count(&p, "aten.neg.default"), 0);
    assert_eq!(count(&p, "aten._assert_tensor_metadata.default"), 1);
    assert!(p.weights.is_empty() && p.storages.is_empty() && p.graph.inputs.len() == 1);
    pt2kit::ir::validate::validate(&p).unwrap();
    assert_eq!(run(&p, &[-1.0, 0.5, 2.0], &[3]), vec![0.0, 0.5, 2.0]);
}

#[test]
fn cse_merges_repeats_but_not_random_ops() {
    let mut b = B::new();
    let x = b.input("x", InputKind::UserInput, meta(&[2]), None);
    let r1 = b.emit(|em| unary(em, "aten.relu.default", x, &[2]));
    let r2 = b.emit(|em| unary(em, "aten.relu.default", x, &[2]));
    let n1 = b.emit(|em| unary(em, "aten.rand_like.default", x, &[2]));
    let n2 = b.emit(|em| unary(em, "aten.rand_like.default", x, &[2]));
    let s = b.emit(|em| {
        em.op(
            "aten.add.Tensor",
            vec![("self", t(r1)), ("other", t(r2))],
            meta(&[2]),
        )
        .unwrap()
    });
    let s2 = b.emit(|em| {
        em.op(
            "aten.add.Tensor",
            vec![("self", t(n1)), ("other", t(n2))],
            meta(&[2]),
        )
        .unwrap()
    });
    b.output(s);
    b.output(s2);
    let mut p = b.p;
    assert_eq!(passes::cse(&mut p).unwrap(), 1);
    assert_eq!(count(&p, "aten.relu.default"), 1);
    assert_eq!(count(&p, "aten.rand_like.default"), 2);
    let add = p
        .graph
        .nodes
        .iter()
        .find(|n| n.target.name == "add")
        .unwrap();
    assert!(
        matches!((&add.inputs[0].arg, &add.inputs[1].arg), (Argument::Tensor(a), Argument::Tensor(b)) if a == b)
    );
    pt2kit::ir::validate::validate(&p).unwrap();
}

#[test]
fn fold_evaluates_constant_subgraphs_only() {
    let mut b = B::new();
    let c = b.input(
        "c_k",
        InputKind::TensorConstant("k".into()),
        meta(&[3]),
        Some(f32s(&[1.0, 2.0, 3.0])),
    );
    let x = b.input("x", InputKind::UserInput, meta(&[3]), None);
    let d = b.emit(|em| {
        em.op(
            "aten.mul.Tensor",
            vec![("self", t(c)), ("other", Argument::Float(2.0))],
            meta(&[3]),
        )
        .unwrap()
    });
    let e = b.emit(|em| unary(em, "aten.exp.default", d, &[3]));
    let y = b.emit(|em| {
        em.op(
            "aten.add.Tensor",
            vec![("self", t(x)), ("other", t(e))],
            meta(&[3]),
        )
        .unwrap()
    });
    b.output(y);
    let mut p = b.p;
    let before = run(&p, &[0.0, 1.0, 2.0], &[3]);
    assert_eq!(
        pt2kit::exec::fold::fold(&mut p).unwrap(),
        2,
        "mul and exp are folded"
    );
    passes::dce(&mut p).unwrap();
    assert_eq!(
        histogram(&p).into_iter().collect::<Vec<_>>(),
        vec![("aten.add.Tensor".to_string(), 1)]
    );
    let folded = p
        .weights
        .iter()
        .find(|w| w.name.starts_with("_folded."))
        .expect("a folded constant");
    assert_eq!(folded.kind, WeightKind::Constant);
    assert_eq!(
        p.weights.len(),
        1,
        "the original constant is no longer read"
    );
    let after = run(&p, &[0.0, 1.0, 2.0], &[3]);
    assert_eq!(before, after);
    assert!((after[0] - 2f64.exp()).abs() < 1e-5);
}

fn conv_bn(extra_use: bool) -> Program {
    let mut b = B::new();
    let w = b.input(
        "p_w",
        InputKind::Parameter("conv.weight".into()),
        meta(&[2, 1, 1, 1]),
        Some(f32s(&[0.5, -1.0])),
    );
    let g = b.input(
        "p_g",
        InputKind::Parameter("bn.weight".into()),
        meta(&[2]),
        Some(f32s(&[2.0, 0.5])),
    );
    let be = b.input(
        "p_b",
        InputKind::Parameter("bn.bias".into()),
        meta(&[2]),
        Some(f32s(&[0.1, -0.2])),
    );
    let m = b.input(
        "b_m",
        InputKind::Buffer("bn.running_mean".into()),
        meta(&[2]),
        Some(f32s(&[0.3, 0.0])),
    );
    let v = b.input(
        "b_v",
        InputKind::Buffer("bn.running_var".into()),
        meta(&[2]),
        Some(f32s(&[4.0, 0.25])),
    );
    let x = b.input("x", InputKind::UserInput, meta(&[1, 1, 2, 2]), None);
    let y = b.emit(|em| {
        em.op(
            "aten.convolution.default",
            conv2d_args(x, w),
            meta(&[1, 2, 2, 2]),
        )
        .unwrap()
    });
    let z = b.emit(|em| {
        let outs = em
            .call(
                "aten._native_batch_norm_legit_no_training.default",
                vec![
                    ("input", t(y)),
                    ("weight", t(g)),
                    ("bias", t(be)),
                    ("running_mean", t(m)),
                    ("running_var", t(v)),
                    ("momentum", Argument::Float(0.1)),
                    ("eps", Argument::Float(1e-5)),
                ],
                vec![
                    pt2kit::decompose::edit::Out::New(meta(&[1, 2, 2, 2])),
                    pt2kit::decompose::edit::Out::New(meta(&[0])),
                    pt2kit::decompose::edit::Out::New(meta(&[0])),
                ],
            )
            .unwrap();
        outs[0]
    });
    let z = if extra_use {
        b.emit(|em| {
            em.op(
                "aten.add.Tensor",
                vec![("self", t(z)), ("other", t(y))],
                meta(&[1, 2, 2, 2]),
            )
            .unwrap()
        })
    } else {
        z
    };
    b.output(z);
    b.p
}

#[test]
fn bn_fold_folds_into_the_convolution_with_the_same_result() {
    let mut p = conv_bn(false);
    let x = [1.0, -2.0, 0.5, 3.0];
    let before = run(&p, &x, &[1, 1, 2, 2]);
    assert_eq!(passes::bn_fold(&mut p).unwrap(), 1);
    passes::dce(&mut p).unwrap();
    assert_eq!(
        count(&p, "aten._native_batch_norm_legit_no_training.default"),
        0
    );
    assert_eq!(count(&p, "aten.convolution.default"), 1);
    let names: Vec<&str> = p.weights.iter().map(|w| w.name.as_str()).collect();
    assert_eq!(names, vec!["conv.weight.bn_folded", "conv.bias.bn_folded"]);
    pt2kit::ir::validate::validate(&p).unwrap();
    let after = run(&p, &x, &[1, 1, 2, 2]);
    for (a, b) in before.iter().zip(&after) {
        assert!((a - b).abs() < 1e-5, "{before:?} vs {after:?}");
    }
}

#[test]
fn bn_fold_leaves_a_convolution_whose_result_is_used_elsewhere() {
    let mut p = conv_bn(true);
    assert_eq!(passes::bn_fold(&mut p).unwrap(), 0);
    assert_eq!(
        count(&p, "aten._native_batch_norm_legit_no_training.default"),
        1
    );
}

#[test]
fn functionalize_writes_back_through_views_and_adds_mutation_outputs() {
    // b.add_(1); y = x[0:2]; y.relu_(); out = x * b
    let mut b = B::new();
    let buf = b.input(
        "b_n",
        InputKind::Buffer("n".into()),
        meta(&[1]),
        Some(f32s(&[5.0])),
    );
    let x = b.input("x", InputKind::UserInput, meta(&[4]), None);
    b.emit(|em| {
        em.op(
            "aten.add_.Tensor",
            vec![("self", t(buf)), ("other", Argument::Int(1))],
            meta(&[1]),
        )
        .unwrap()
    });
    let y = b.emit(|em| {
        em.op(
            "aten.slice.Tensor",
            vec![
                ("self", t(x)),
                ("dim", Argument::Int(0)),
                ("start", Argument::SymInt(SymRef::Int(0))),
                ("end", Argument::SymInt(SymRef::Int(2))),
            ],
            meta(&[2]),
        )
        .unwrap()
    });
    b.emit(|em| unary(em, "aten.relu_.default", y, &[2]));
    let out = b.emit(|em| {
        em.op(
            "aten.mul.Tensor",
            vec![("self", t(x)), ("other", t(buf))],
            meta(&[4]),
        )
        .unwrap()
    });
    b.output(out);
    let mut p = b.p;
    assert_eq!(functionalize::functionalize(&mut p).unwrap(), 2);
    pt2kit::ir::validate::validate(&p).unwrap();
    assert_eq!(
        count(&p, "aten.add_.Tensor") + count(&p, "aten.relu_.default"),
        0
    );
    assert_eq!(count(&p, "aten.slice_scatter.default"), 1);
    assert_eq!(
        p.output_kinds,
        vec![
            OutputKind::BufferMutation("n".into()),
            OutputKind::UserInputMutation("x".into()),
            OutputKind::UserOutput
        ]
    );
    // x = [-1, -2, 3, -4] -> relu on the first two -> [0, 0, 3, -4], times 6.
    assert_eq!(
        run(&p, &[-1.0, -2.0, 3.0, -4.0], &[4]),
        vec![0.0, 0.0, 18.0, -24.0]
    );
}

#[test]
fn unknown_pass_names_the_passes() {
    let mut p = Program::default();
    let e = passes::run(&mut p, &["nope".into()]).unwrap_err();
    assert_eq!(e.kind, pt2kit::ErrorKind::Usage);
    assert!(
        e.to_string().contains("dce") && e.to_string().contains("bn-fold"),
        "{e}"
    );
}
