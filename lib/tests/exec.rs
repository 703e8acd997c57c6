//! The executor against PyTorch: every committed fixture, both dialects,
//! matches the outputs torch recorded (`golden/models/*.expected.npz`), and
//! inputs outside the exported contract are refused before anything runs.

#![cfg(feature = "exec")]

mod common;

use std::path::Path;

use common::*;
use pt2kit::exec::{self, DeviceKind, Executor};
use pt2kit::ir::Dtype;
use pt2kit::tensorfile::HostTensor;

fn check_fixture(pt2: &Path, failures: &mut Vec<String>) -> usize {
    let program = read(pt2);
    let (runs, f) = run_against_torch(&stem(pt2), pt2, &program);
    failures.extend(f);
    runs
}

#[test]
fn every_fixture_matches_torch() {
    let mut failures = Vec::new();
    let mut runs = 0;
    for p in model_fixtures() {
        runs += check_fixture(&p, &mut failures);
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert!(runs >= 28, "only {runs} runs");
}

/// Every fixture with its weights left where they lie (`MapWeights::Always`:
/// the weights only read by matrix products and embeddings, through
/// views, are mapped and read in place) still matches torch, and weights
/// are mapped in the transformer fixtures.
#[test]
fn every_fixture_matches_torch_with_weights_mapped() {
    let opts = pt2kit::exec::ExecOptions {
        map_weights: pt2kit::exec::mapped::MapWeights::Always,
        ..Default::default()
    };
    let mut failures = Vec::new();
    let mut mapped = std::collections::BTreeMap::new();
    for p in model_fixtures() {
        let program = read(&p);
        let ((_, f), m) = run_against_torch_with(&stem(&p), &p, &program, opts);
        failures.extend(f);
        mapped.insert(stem(&p), m);
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    for model in ["bert", "gpt2", "llama", "mlp", "embedding"] {
        assert!(
            mapped.iter().any(|(n, &m)| n.starts_with(model) && m > 0),
            "{model}: no weight mapped ({mapped:?})"
        );
    }
}

#[test]
#[ignore = "needs golden/big (make big); run by make test-big"]
fn big_models_match_torch() {
    let mut failures = Vec::new();
    for p in big_fixtures() {
        check_fixture(&p, &mut failures);
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

fn run_err(model: &str, inputs: Vec<(String, HostTensor)>) -> String {
    let program = read(&repo().join(format!("golden/models/{model}.pt2")));
    let executor = Executor::new(&program, exec::device(DeviceKind::Cpu).unwrap()).unwrap();
    let e = executor.run(&inputs).unwrap_err();
    assert_eq!(e.kind, pt2kit::ErrorKind::BadInput, "{e}");
    e.to_string()
}

fn f32s(shape: &[usize]) -> HostTensor {
    let n: usize = shape.iter().product();
    HostTensor {
        dtype: Dtype::Float32,
        shape: shape.to_vec(),
        data: vec![0; n * 4],
    }
}

#[test]
fn inputs_outside_the_contract_are_refused() {
    let x = |shape: &[usize]| vec![("x".to_string(), f32s(shape))];
    assert_eq!(
        run_err("dynamic", x(&[128, 4])),
        "input x: dim 0 is 128, but s77 must be in [1, 64]"
    );
    assert_eq!(
        run_err("dynamic", x(&[0, 4])),
        "input x: dim 0 is 0, but s77 must be in [1, 64]"
    );
    assert!(
        run_err("dynamic", x(&[8, 5])).contains("dim 1 is 5, but the model was exported with 4")
    );
    assert!(run_err("dynamic", x(&[8])).contains("rank is 1"));
    assert!(run_err("mlp", x(&[3, 4])).contains("dim 0 is 3, but the model was exported with 2"));
    let ints = HostTensor {
        dtype: Dtype::Int64,
        shape: vec![2, 4],
        data: vec![0; 64],
    };
    assert!(run_err("mlp", vec![("x".into(), ints)])
        .contains("dtype is int64, the model was exported with float32"));
    assert!(run_err("mlp", vec![]).contains("input 'x' is missing"));
    let mut two = x(&[2, 4]);
    two.push(("y".into(), f32s(&[1])));
    assert!(run_err("mlp", two).contains("'y' is not an input of the model"));
}

#[test]
fn dynamic_models_run_at_other_sizes() {
    let program = read(&repo().join("golden/models/dynamic.pt2"));
    let executor = Executor::new(&program, exec::device(DeviceKind::Cpu).unwrap()).unwrap();
    for batch in [1, 3, 64] {
        let outs = executor.run(&[("x".into(), f32s(&[batch, 4]))]).unwrap();
        assert_eq!(outs[0].1.shape, vec![batch, 3]);
    }
}

/// `while_loop` runs its body exactly as often as its condition allows:
/// the carried counter comes back as the bound `n`, from 0 (the body never
/// runs) up; `map` stacks one result per slice, at any size of the mapped dim.
#[test]
fn loops_run_as_often_as_their_inputs_say() {
    for fixture in ["whileloop", "whileloop.decomp"] {
        let program = read(&repo().join(format!("golden/models/{fixture}.pt2")));
        let executor = Executor::new(&program, exec::device(DeviceKind::Cpu).unwrap()).unwrap();
        for n in [0i64, 1, 9] {
            let bound = HostTensor {
                dtype: Dtype::Int64,
                shape: vec![],
                data: n.to_le_bytes().to_vec(),
            };
            let outs = executor
                .run(&[("x".into(), f32s(&[3, 4])), ("n".into(), bound)])
                .unwrap();
            assert_eq!(outs[0].1.shape, vec![3, 4], "{fixture}");
            assert_eq!(outs[1].1.to_f64(), vec![n as f64], "{fixture} with n={n}");
        }
    }
    for fixture in ["map", "map.decomp"] {
        let program = read(&repo().join(format!("golden/models/{fixture}.pt2")));
        let executor = Executor::new(&program, exec::device(DeviceKind::Cpu).unwrap()).unwrap();
        for len in [1, 32] {
            let outs = executor
                .run(&[
                    ("xs".into(), f32s(&[len, 2, 4])),
                    ("ys".into(), f32s(&[len, 4])),
                    ("bias".into(), f32s(&[3])),
                ])
                .unwrap();
            assert_eq!(outs[0].1.shape, vec![len, 2, 3], "{fixture}");
            assert_eq!(outs[1].1.shape, vec![len, 2], "{fixture}");
        }
    }
}

#[test]
fn missing_ops_are_listed_with_their_nodes() {
    let mut program = read(&repo().join("golden/models/mlp.pt2"));
    program.graph.nodes[1].target = pt2kit::ir::Target::op("aten", "frobnicate", "default");
    program.graph.nodes[0].target = pt2kit::ir::Target::op("aten", "wibble", "default");
    let e = Executor::new(&program, exec::device(DeviceKind::Cpu).unwrap())
        .err()
        .unwrap();
    let msg = e.to_string();
    assert_eq!(e.kind, pt2kit::ErrorKind::Unsupported);
    assert!(
        msg.contains("2 op(s)") && msg.contains("aten.frobnicate.default (nodes relu)"),
        "{msg}"
    );
    assert!(msg.contains("aten.wibble.default (nodes linear)"), "{msg}");
}

#[test]
fn cuda_without_the_feature_is_a_clear_error() {
    if cfg!(feature = "cuda") {
        return;
    }
    let e = exec::device(DeviceKind::Cuda).unwrap_err();
    assert!(e.to_string().contains("--features cuda"), "{e}");
}

/// The archives of a golden folder, sorted.
fn archives_in(dir: &str) -> Vec<std::path::PathBuf> {
    let mut v: Vec<_> = std::fs::read_dir(repo().join(dir))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "pt2"))
        .collect();
    v.sort();
    v
}

/// What failed on models from outside the repo (`recipes/fixtures/zoo.py`, group
/// "fallback"): composite ops the executor has no row for (lowered at load
/// through the decomposition table), in-place ops on views, strided views
/// reaching kernels, HF BERT and DistilBERT with SDPA at batch 2. Each runs
/// as exported, in both dialects, against torch's outputs.
#[test]
fn outside_models_run_as_exported() {
    let mut failures = Vec::new();
    let mut runs = 0;
    for p in archives_in("golden/fallback") {
        if !refused(&p) {
            runs += check_fixture(&p, &mut failures);
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert!(runs >= 16, "only {runs} runs");
}

/// Models exported with dynamic dims (`recipes/fixtures/zoo.py`, group "dynamic":
/// BERT and GPT-2 over dynamic batch and sequence, Llama over a dynamic
/// sequence, an LSTM over a dynamic batch, size arithmetic over a dynamic
/// length) run as exported, in both dialects, at three sizes each.
#[test]
fn dynamic_models_run_at_three_sizes() {
    let mut failures = Vec::new();
    let mut runs = 0;
    for p in archives_in("golden/dynamic") {
        assert_eq!(input_sets(&p).len(), 3, "{}", p.display());
        runs += check_fixture(&p, &mut failures);
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert!(runs >= 30, "only {runs} runs");
}

/// Symbolic ints (`recipes/fixtures/zoo.py`, group "symint"): an int input (a
/// SymInt graph input) in arithmetic and as sizes, indices and bounds,
/// derived dims (t + 1 and 2*t with no input of size t, 2*s spatial dims),
/// tril/triu with a symbolic diagonal, causal attention over a dynamic
/// length: as exported, in both dialects, at three sizes each.
#[test]
fn symint_models_run_at_three_sizes() {
    let mut failures = Vec::new();
    let mut runs = 0;
    for p in archives_in("golden/symint") {
        assert_eq!(input_sets(&p).len(), 3, "{}", p.display());
        runs += check_fixture(&p, &mut failures);
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert!(runs >= 30, "only {runs} runs");
}

/// Torch's numbers beyond plain float32 (`recipes/fixtures/zoo.py`, group
/// "numerics"): int64 past 2^53 and int8 wrap-around through every integer
/// op, NaN's order, float16 and bfloat16 CNNs (accumulated in float32),
/// attention rows with every key masked, 3-D convolutions: each as
/// exported, in both dialects, against torch's outputs (integers exactly).
#[test]
fn numerics_fixtures_match_torch() {
    let mut failures = Vec::new();
    let mut runs = 0;
    for p in archives_in("golden/numerics") {
        runs += check_fixture(&p, &mut failures);
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert!(runs >= 16, "only {runs} runs");
}

/// PT2E int8 (`recipes/fixtures/zoo.py`, group "quant"): torch's X86Inductor and
/// XNNPACK quantizers on a CNN and an MLP (static per tensor and per
/// channel, dynamic through choose_qparams, weights quantized in the
/// graph), and q_ops, the quantized_decomposed ops on rounding ties and
/// saturation: each as exported, in both dialects, against torch. Integers
/// exactly; a float output a dequantize makes within one step of its
/// quantization (the fixture's `quant_steps`: a value on a rounding tie
/// goes either way under float32 ulps).
#[test]
fn quant_fixtures_match_torch() {
    let mut failures = Vec::new();
    let mut runs = 0;
    for p in archives_in("golden/quant") {
        runs += check_fixture(&p, &mut failures);
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert!(runs >= 18, "only {runs} runs");
}

/// Complex values (`recipes/fixtures/zoo.py`, group "complex": spectrograms and
/// istft round trips, torch.fft with every norm, Meta's Llama RoPE with a
/// complex buffer, complex arithmetic, HF FNet, complex inputs and
/// outputs), lowered to real pairs at load: each as exported, in both
/// dialects, against torch's outputs (complex outputs as complex64 and
/// complex128, angles at the branch cut as torch gives them).
#[test]
fn complex_fixtures_match_torch() {
    let mut failures = Vec::new();
    let mut runs = 0;
    for p in archives_in("golden/complex") {
        runs += check_fixture(&p, &mut failures);
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert!(runs >= 12, "only {runs} runs");
}

/// An op on complex values that has no real-pair form (here `tanh`) is
/// refused before anything runs, naming the node, the op and the reason.
#[test]
fn complex_ops_without_a_real_pair_form_are_refused_by_name() {
    let mut program = read(&repo().join("golden/complex/cx_arith.pt2"));
    let exp = program
        .graph
        .nodes
        .iter_mut()
        .find(|n| n.target.name == "exp")
        .unwrap();
    exp.target.name = "tanh".into();
    let e = Executor::new(&program, exec::device(DeviceKind::Cpu).unwrap())
        .err()
        .expect("ran");
    assert_eq!(e.kind, pt2kit::error::ErrorKind::Unsupported, "{e}");
    assert!(
        e.to_string().contains(
            "node exp (aten.tanh.default): complex values (c64) through this op are not supported"
        ),
        "{e}"
    );
}

/// torchvision's detection ops (`recipes/fixtures/zoo.py`, group "vision"):
/// roi_align (aligned or not, adaptive and fixed sampling, half scale,
/// float64, no boxes), roi_pool, ps_roi_align, ps_roi_pool, nms (ties, an
/// IoU at the threshold, batched over classes), deform_conv2d, and Faster
/// R-CNN's second stage on given proposals: each as exported, in both
/// dialects, against torch's outputs (nms's indices exactly).
#[test]
fn vision_fixtures_match_torch() {
    let mut failures = Vec::new();
    let mut runs = 0;
    for p in archives_in("golden/vision") {
        runs += check_fixture(&p, &mut failures);
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert!(runs >= 14, "only {runs} runs");
}

/// The composite-op fixtures run as exported too: every composite op
/// without a row goes through the fallback.
#[test]
fn composite_fixtures_run_as_exported() {
    let mut failures = Vec::new();
    let mut runs = 0;
    for p in archives_in("golden/composite") {
        runs += check_fixture(&p, &mut failures);
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert!(runs >= 10, "only {runs} runs");
}

/// The higher-order-op fixtures (`recipes/fixtures/zoo.py`, group "hop": autocast
/// regions disabled, bfloat16 and float16 with torch's eager outputs under
/// autocast, grad-mode regions, associative_scan as its higher-order op and
/// through vmap, out_dtype, hints_wrapper, timm's EfficientViT) run as
/// exported, both dialects, against torch's outputs.
#[test]
fn hop_fixtures_run_as_exported() {
    let mut failures = Vec::new();
    let mut runs = 0;
    for p in archives_in("golden/hop") {
        runs += check_fixture(&p, &mut failures);
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert!(runs >= 22, "only {runs} runs");
}

/// The mixture-of-experts fixtures (`recipes/fixtures/zoo.py`, group "moe": tiny
/// Mixtral and Qwen2-MoE decoders, `transformers.grouped_mm_fallback`
/// called directly with an expert without rows and rows past the last
/// offset) run as exported, both dialects, against torch's outputs.
#[test]
fn moe_fixtures_run_as_exported() {
    let mut failures = Vec::new();
    let mut runs = 0;
    for p in archives_in("golden/moe") {
        runs += check_fixture(&p, &mut failures);
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert!(runs >= 6, "only {runs} runs");
}

/// Offsets of `grouped_mm_fallback` that are not nondecreasing within
/// [0, S] are a bad-input error naming the node and the offset.
#[test]
fn grouped_mm_refuses_bad_offsets() {
    let program = read(&repo().join("golden/moe/moe_grouped_mm.pt2"));
    let executor = Executor::new(&program, exec::device(DeviceKind::Cpu).unwrap()).unwrap();
    let offs = |v: [i64; 4]| HostTensor {
        dtype: Dtype::Int64,
        shape: vec![4],
        data: v.iter().flat_map(|x| x.to_le_bytes()).collect(),
    };
    for (bad, says) in [
        ([2, 2, 2, 12], "offs[3] = 12 is past the last row"),
        ([3, 2, 5, 8], "offs[1] = 2 is below the offset before it"),
        ([-1, 2, 5, 8], "offs[0] = -1 is below"),
    ] {
        let inputs = [
            ("x".to_string(), f32s(&[10, 6])),
            ("offs64".to_string(), offs(bad)),
        ];
        let Err(e) = executor.run(&inputs) else {
            panic!("offsets {bad:?} ran");
        };
        assert_eq!(e.kind, pt2kit::ErrorKind::BadInput, "{e}");
        let msg = e.to_string();
        assert!(
            msg.contains("node 'grouped_mm_fallback_1'") && msg.contains(says),
            "{msg}"
        );
    }
    let good = [
        ("x".to_string(), f32s(&[10, 6])),
        ("offs64".to_string(), offs([0, 0, 10, 10])),
    ];
    assert!(executor.run(&good).is_ok());
}

/// The long-tail fixtures (`recipes/fixtures/zoo.py`, group "tail": bicubic
/// upsampling, histc, index_copy_, reshape_as, bilinear, einsum diagonals,
/// LSTM projections, bool masks) run as exported, both dialects, against
/// torch's outputs.
#[test]
fn tail_fixtures_run_as_exported() {
    let mut failures = Vec::new();
    let mut runs = 0;
    for p in archives_in("golden/tail") {
        runs += check_fixture(&p, &mut failures);
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert!(runs >= 18, "only {runs} runs");
}

/// What a random op draws: dtype, shape, mean, deviation, least and
/// greatest value.
type Drawn = (Dtype, &'static [usize], f64, f64, f64, f64);

/// rand, randn, randint and their `_like` forms run with this toolkit's
/// generator, not torch's: shapes, dtypes, ranges and moments on large
/// samples are checked, never values; a run repeats (the seed is fixed,
/// `PT2KIT_SEED`), and two nodes of one op differ.
#[test]
fn random_ops_have_torchs_shapes_dtypes_and_distributions() {
    for fixture in ["tail_random", "tail_random.decomp"] {
        let program = read(&repo().join(format!("golden/tail_random/{fixture}.pt2")));
        let executor = Executor::new(&program, exec::device(DeviceKind::Cpu).unwrap()).unwrap();
        let inputs = [("x".to_string(), f32s(&[64, 128]))];
        let outs = executor.run(&inputs).unwrap();
        let again = executor.run(&inputs).unwrap();
        // (dtype, shape, mean, std, min, max) as torch's ops draw them
        let third = 1.0 / 12f64.sqrt();
        let want: [Drawn; 6] = [
            (
                Dtype::Float32,
                &[400, 500],
                0.0,
                1.0,
                f64::NEG_INFINITY,
                f64::INFINITY,
            ),
            (Dtype::Float32, &[400, 500], 0.5, third, 0.0, 1.0),
            (
                Dtype::Float32,
                &[64, 128],
                0.0,
                1.0,
                f64::NEG_INFINITY,
                f64::INFINITY,
            ),
            (Dtype::Float32, &[64, 128], 0.5, third, 0.0, 1.0),
            (
                Dtype::Int64,
                &[400, 500],
                6.0,
                (48f64 / 12.0).sqrt(),
                3.0,
                9.0,
            ),
            (
                Dtype::Float64,
                &[300, 200],
                0.0,
                1.0,
                f64::NEG_INFINITY,
                f64::INFINITY,
            ),
        ];
        assert_eq!(outs.len(), want.len(), "{fixture}");
        for ((name, t), (dtype, shape, mean, std, lo, hi)) in outs.iter().zip(want) {
            assert_eq!(
                (t.dtype, t.shape.as_slice()),
                (dtype, shape),
                "{fixture} {name}"
            );
            let v = t.to_f64();
            let n = v.len() as f64;
            let m = v.iter().sum::<f64>() / n;
            let s = (v.iter().map(|x| (x - m) * (x - m)).sum::<f64>() / n).sqrt();
            // 6 standard errors of the mean; 3% of the deviation
            assert!(
                (m - mean).abs() < 6.0 * std / n.sqrt(),
                "{fixture} {name}: mean {m}"
            );
            assert!((s - std).abs() < 0.03 * std, "{fixture} {name}: std {s}");
            let (min, max) = v
                .iter()
                .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), &x| {
                    (a.min(x), b.max(x))
                });
            assert!(
                min >= lo && max <= hi,
                "{fixture} {name}: range [{min}, {max}]"
            );
            if dtype == Dtype::Float32 && lo == 0.0 {
                assert!(max < 1.0, "{fixture} {name}: rand reached 1");
            }
            if dtype == Dtype::Int64 {
                assert_eq!(
                    (min, max),
                    (3.0, 9.0),
                    "{fixture} {name}: not every integer drawn"
                );
            }
        }
        for ((name, a), (_, b)) in outs.iter().zip(&again) {
            assert_eq!(a.data, b.data, "{fixture} {name}: a second run differs");
        }
        assert_ne!(
            outs[0].1.data[..400],
            outs[1].1.data[..400],
            "{fixture}: two nodes drew alike"
        );
    }
}

/// The fallback lowers exactly the nodes the executor lacks (and those a
/// row declines), and leaves the rest; a native row and its rule agree.
#[test]
fn fallback_lowers_only_what_the_executor_lacks() {
    let program = read(&repo().join("golden/fallback/fb_rnn.pt2"));
    let as_given = pt2kit::exec::ExecOptions {
        as_given: true,
        ..Default::default()
    };
    let executor =
        Executor::with_options(&program, exec::device(DeviceKind::Cpu).unwrap(), as_given).unwrap();
    let lowered: Vec<&str> = executor
        .fallback
        .lowered
        .iter()
        .map(|l| l.op.as_str())
        .collect();
    // The bidirectional LSTM is declined by the native row; the GRU has none.
    assert!(lowered.contains(&"aten.lstm.input"), "{lowered:?}");
    assert!(lowered.contains(&"aten.gru.input"), "{lowered:?}");
    for l in &executor.fallback.lowered {
        assert!(!l.into.is_empty(), "{l}");
    }
    // A graph the executor runs whole is not copied.
    let mlp = read(&repo().join("golden/models/mlp.pt2"));
    let e = Executor::with_options(&mlp, exec::device(DeviceKind::Cpu).unwrap(), as_given).unwrap();
    assert!(matches!(e.program, std::borrow::Cow::Borrowed(_)));
    assert!(e.fallback.lowered.is_empty());
    // Native row against the rule: the one-direction LSTM fixture, as
    // exported (native) and lowered by the rule alone, both match torch.
    let lstm = repo().join("golden/models/lstm.pt2");
    let mut by_rule = read(&lstm);
    let policy = pt2kit::decompose::Policy {
        only: Some(vec!["aten.lstm.input".into()]),
        ..Default::default()
    };
    pt2kit::decompose::lower(&mut by_rule, &policy).unwrap();
    assert!(!pt2kit::decompose::histogram(&by_rule).contains_key("aten.lstm.input"));
    let native = read(&lstm);
    assert!(pt2kit::decompose::histogram(&native).contains_key("aten.lstm.input"));
    for (what, p) in [("native", &native), ("rule", &by_rule)] {
        let (runs, f) = run_against_torch(&format!("lstm ({what})"), &lstm, p);
        assert!(f.is_empty() && runs > 0, "{f:?}");
    }
}

/// Indices a valid graph cannot take, given at run time: every indexing
/// op refuses them as torch does (bad input, exit 3, naming the node),
/// never a crash or a silent read out of bounds. torch raises on each of
/// these; a negative index wraps where torch wraps it (index_select,
/// gather, scatter and embedding do not; `index` and `index_put` do).
#[test]
fn out_of_range_indices_are_bad_input() {
    use common::build::*;
    use pt2kit::error::ErrorKind;
    use pt2kit::ir::{Argument, InputKind};
    let ints = |v: &[i64], shape: &[usize]| HostTensor {
        dtype: Dtype::Int64,
        shape: shape.to_vec(),
        data: v.iter().flat_map(|x| x.to_le_bytes()).collect(),
    };
    let x = HostTensor {
        dtype: Dtype::Float32,
        shape: vec![5, 3],
        data: f32s(&(0..15).map(|i| i as f32).collect::<Vec<_>>()),
    };
    // (op, index shape, output sizes, extra arguments)
    type Case = (&'static str, Vec<i64>, Vec<i64>);
    let cases: Vec<Case> = vec![
        ("aten.index_select.default", vec![4], vec![4, 3]),
        ("aten.gather.default", vec![2, 3], vec![2, 3]),
        ("aten.scatter.src", vec![2, 3], vec![5, 3]),
        ("aten.index.Tensor", vec![4], vec![4, 3]),
        ("aten.embedding.default", vec![4], vec![4, 3]),
        ("aten.index_put.default", vec![4], vec![5, 3]),
    ];
    for (op, ishape, out) in cases {
        let mut b = B::new();
        let xv = b.input("x", InputKind::UserInput, meta(&[5, 3]), None);
        let iv = b.input(
            "idx",
            InputKind::UserInput,
            meta_of(Dtype::Int64, &ishape),
            None,
        );
        // scatter's source; index_put's values (broadcast over the rows)
        let src_shape: &[i64] = if op == "aten.index_put.default" {
            &[3]
        } else {
            &[2, 3]
        };
        let sv = b.input("src", InputKind::UserInput, meta(src_shape), None);
        let y = b.emit(|em| {
            let args = match op {
                "aten.index.Tensor" => vec![
                    ("self", t(xv)),
                    ("indices", Argument::OptionalTensors(vec![Some(iv)])),
                ],
                "aten.embedding.default" => vec![("weight", t(xv)), ("indices", t(iv))],
                "aten.index_put.default" => vec![
                    ("self", t(xv)),
                    ("indices", Argument::OptionalTensors(vec![Some(iv)])),
                    ("values", t(sv)),
                ],
                "aten.scatter.src" => vec![
                    ("self", t(xv)),
                    ("dim", Argument::Int(0)),
                    ("index", t(iv)),
                    ("src", t(sv)),
                ],
                _ => vec![("self", t(xv)), ("dim", Argument::Int(0)), ("index", t(iv))],
            };
            em.op(op, args, meta(&out)).unwrap()
        });
        b.output(y);
        let exec = Executor::new(&b.p, exec::device(DeviceKind::Cpu).unwrap()).unwrap();
        let n: i64 = ishape.iter().product();
        let src = HostTensor {
            dtype: Dtype::Float32,
            shape: src_shape.iter().map(|&d| d as usize).collect(),
            data: f32s(&vec![1.0; src_shape.iter().product::<i64>() as usize]),
        };
        let run = |bad: i64| {
            let mut v: Vec<i64> = (0..n).map(|i| i % 5).collect();
            v[1] = bad;
            let shape: Vec<usize> = ishape.iter().map(|&d| d as usize).collect();
            exec.run(&[
                ("x".into(), x.clone()),
                ("idx".into(), ints(&v, &shape)),
                ("src".into(), src.clone()),
            ])
        };
        // in range: runs
        assert!(run(4).is_ok(), "{op}: {:?}", run(4).err());
        // negative indices wrap only in `index` and `index_put` (torch's
        // advanced indexing)
        let wraps = matches!(op, "aten.index.Tensor" | "aten.index_put.default");
        assert_eq!(run(-5).is_ok(), wraps, "{op} with -5");
        for bad in [5, 99, -6] {
            let e = run(bad).expect_err(op);
            assert_eq!(e.kind, ErrorKind::BadInput, "{op} with {bad}: {e}");
            assert!(
                e.to_string().contains("out of range"),
                "{op} with {bad}: {e}"
            );
        }
    }
}

/// `where` against its definition: a condition true everywhere, false
/// everywhere (the operand picked whole, with no copy, where it has the
/// result's shape) and mixed, the condition broadcast over rows as a
/// decomposed attention's guard is, and an operand broadcast (so the
/// general path even under a uniform condition); NaNs go through.
#[test]
fn where_picks_as_its_condition_says() {
    use common::build::*;
    use pt2kit::ir::InputKind;
    let (n, rows) = (5usize, 6usize);
    let x: Vec<f32> = (0..rows * n)
        .map(|i| if i == 7 { f32::NAN } else { i as f32 * 0.5 })
        .collect();
    let y: Vec<f32> = (0..rows * n)
        .map(|i| if i == 3 { f32::NAN } else { -(i as f32) })
        .collect();
    let row: Vec<f32> = (0..n).map(|i| 100.0 + i as f32).collect();
    for (cond, y_row) in [
        (vec![true; rows], false),
        (vec![false; rows], false),
        (vec![true, false, false, true, false, true], false),
        (vec![false; rows], true),
        (vec![true; rows], true),
    ] {
        let mut b = B::new();
        let cv = b.input(
            "c",
            InputKind::UserInput,
            meta_of(Dtype::Bool, &[2, 3, 1]),
            None,
        );
        let xv = b.input("x", InputKind::UserInput, meta(&[2, 3, n as i64]), None);
        let y_shape: Vec<i64> = if y_row {
            vec![n as i64]
        } else {
            vec![2, 3, n as i64]
        };
        let yv = b.input("y", InputKind::UserInput, meta(&y_shape), None);
        let out = b.emit(|em| {
            em.op(
                "aten.where.self",
                vec![("condition", t(cv)), ("self", t(xv)), ("other", t(yv))],
                meta(&[2, 3, n as i64]),
            )
            .unwrap()
        });
        b.output(out);
        let exec = Executor::new(&b.p, exec::device(DeviceKind::Cpu).unwrap()).unwrap();
        let c = HostTensor {
            dtype: Dtype::Bool,
            shape: vec![2, 3, 1],
            data: cond.iter().map(|&v| v as u8).collect(),
        };
        let yt = if y_row {
            host_f32(&[n], &row)
        } else {
            host_f32(&[2, 3, n], &y)
        };
        let got = exec
            .run(&[
                ("c".into(), c),
                ("x".into(), host_f32(&[2, 3, n], &x)),
                ("y".into(), yt),
            ])
            .unwrap()[0]
            .1
            .to_f64();
        for (i, g) in got.iter().enumerate() {
            let want = if cond[i / n] {
                x[i]
            } else if y_row {
                row[i % n]
            } else {
                y[i]
            };
            assert!(
                (g.is_nan() && want.is_nan()) || *g == want as f64,
                "condition {cond:?} (y a row: {y_row}) at {i}: {g} against {want}"
            );
        }
    }
}

/// Element-wise arithmetic of a permuted view with another tensor of its
/// shape, either order, against the definition: rows of the last dim read
/// where they lie where both last dims are contiguous (a transposed
/// sequence-first stream, as ViT's residual adds), the general path where
/// the permutation moves the last dim; alpha and NaN go through.
#[test]
fn arithmetic_of_permuted_views_matches_the_definition() {
    use common::build::*;
    use pt2kit::ir::{Argument, InputKind};
    let (a, b, c) = (3usize, 4usize, 5usize);
    let x: Vec<f32> = (0..a * b * c)
        .map(|i| {
            if i == 11 {
                f32::NAN
            } else {
                i as f32 * 0.25 - 3.0
            }
        })
        .collect();
    let y: Vec<f32> = (0..a * b * c).map(|i| (i * 7 % 13) as f32 - 6.0).collect();
    type Reference = fn(f32, f32) -> f32;
    let ops: &[(&str, Reference, bool)] = &[
        ("aten.add.Tensor", |p, q| p + q * 2.0, true),
        ("aten.sub.Tensor", |p, q| p - q, false),
        ("aten.mul.Tensor", |p, q| p * q, false),
        ("aten.div.Tensor", |p, q| p / q, false),
    ];
    // (permutation of x, whether x is the first operand)
    for (perm, first) in [
        ([1usize, 0, 2], true),
        ([1, 0, 2], false),
        ([2, 1, 0], true),
    ] {
        let dims = [a, b, c];
        let pd: Vec<usize> = perm.iter().map(|&i| dims[i]).collect();
        let pd64: Vec<i64> = pd.iter().map(|&d| d as i64).collect();
        for &(op, f, alpha) in ops {
            let mut bld = B::new();
            let xv = bld.input(
                "x",
                InputKind::UserInput,
                meta(&[a as i64, b as i64, c as i64]),
                None,
            );
            let yv = bld.input("y", InputKind::UserInput, meta(&pd64), None);
            let out = bld.emit(|em| {
                let p = em
                    .op(
                        "aten.permute.default",
                        vec![
                            ("self", t(xv)),
                            (
                                "dims",
                                Argument::Ints(perm.iter().map(|&i| i as i64).collect()),
                            ),
                        ],
                        meta(&pd64),
                    )
                    .unwrap();
                let (l, r) = if first { (p, yv) } else { (yv, p) };
                let mut args = vec![("self", t(l)), ("other", t(r))];
                if alpha {
                    args.push(("alpha", Argument::Int(2)));
                }
                em.op(op, args, meta(&pd64)).unwrap()
            });
            bld.output(out);
            let exec = Executor::new(&bld.p, exec::device(DeviceKind::Cpu).unwrap()).unwrap();
            let got = exec
                .run(&[
                    ("x".into(), host_f32(&[a, b, c], &x)),
                    ("y".into(), host_f32(&pd, &y)),
                ])
                .unwrap()[0]
                .1
                .to_f64();
            for (i, g) in got.iter().enumerate() {
                // element i of the permuted shape, and where it lies in x
                let idx = [i / (pd[1] * pd[2]), i / pd[2] % pd[1], i % pd[2]];
                let mut at = [0usize; 3];
                for (k, &d) in perm.iter().enumerate() {
                    at[d] = idx[k];
                }
                let xe = x[(at[0] * b + at[1]) * c + at[2]];
                let want = if first { f(xe, y[i]) } else { f(y[i], xe) };
                assert!(
                    (g.is_nan() && want.is_nan()) || *g == want as f64,
                    "{op} permuted {perm:?} first {first} at {i}: {g} against {want}"
                );
            }
        }
    }
}

/// A view that needs a copy (of a permuted tensor, of an expanded one),
/// or a clone before it, gives the elements in row-major order of its
/// input: rows of a contiguous last dim copied in parallel, other layouts
/// by candle.
#[test]
fn views_of_strided_tensors_keep_the_order() {
    use common::build::*;
    use pt2kit::ir::{Argument, InputKind};
    let (a, b, c) = (6usize, 70usize, 96usize);
    let x: Vec<f32> = (0..a * b * c).map(|i| i as f32).collect();
    let ints = |v: &[usize]| Argument::Ints(v.iter().map(|&d| d as i64).collect());
    let i64s = |v: &[usize]| v.iter().map(|&d| d as i64).collect::<Vec<_>>();
    // (permutation, expand of a size-1 dim, a clone before the view)
    for (perm, expand, cloned) in [
        ([1usize, 0, 2], false, false),
        ([0, 2, 1], false, false),
        ([0, 1, 2], true, false),
        ([1, 0, 2], false, true),
        ([0, 2, 1], false, true),
    ] {
        let dims = [a, if expand { 1 } else { b }, c];
        let n: usize = dims.iter().product();
        let pd: Vec<usize> = perm.iter().map(|&i| dims[i]).collect();
        let shown: Vec<usize> = if expand { vec![a, b, c] } else { pd.clone() };
        let mut bld = B::new();
        let xv = bld.input("x", InputKind::UserInput, meta(&i64s(&dims)), None);
        let out = bld.emit(|em| {
            let v = if expand {
                em.op(
                    "aten.expand.default",
                    vec![("self", t(xv)), ("size", ints(&shown))],
                    meta(&i64s(&shown)),
                )
                .unwrap()
            } else {
                em.op(
                    "aten.permute.default",
                    vec![("self", t(xv)), ("dims", ints(&perm))],
                    meta(&i64s(&pd)),
                )
                .unwrap()
            };
            let v = if cloned {
                em.op(
                    "aten.clone.default",
                    vec![("self", t(v))],
                    meta(&i64s(&shown)),
                )
                .unwrap()
            } else {
                v
            };
            let flat = shown[0] * shown[1];
            em.op(
                "aten.view.default",
                vec![("self", t(v)), ("size", ints(&[flat, shown[2]]))],
                meta(&i64s(&[flat, shown[2]])),
            )
            .unwrap()
        });
        bld.output(out);
        let exec = Executor::new(&bld.p, exec::device(DeviceKind::Cpu).unwrap()).unwrap();
        let got = exec.run(&[("x".into(), host_f32(&dims, &x[..n]))]).unwrap()[0]
            .1
            .to_f64();
        assert_eq!(got.len(), shown.iter().product::<usize>());
        for (i, g) in got.iter().enumerate() {
            let idx = [
                i / (shown[1] * shown[2]),
                i / shown[2] % shown[1],
                i % shown[2],
            ];
            let at = if expand {
                idx[0] * c + idx[2]
            } else {
                let mut at = [0usize; 3];
                for (k, &d) in perm.iter().enumerate() {
                    at[d] = idx[k];
                }
                (at[0] * dims[1] + at[1]) * dims[2] + at[2]
            };
            assert_eq!(
                *g, x[at] as f64,
                "permutation {perm:?} expand {expand} clone {cloned} at {i}"
            );
        }
    }
}

/// The executor's float32 fast paths for a tensor broadcast over another's
/// trailing dims (a per-channel scale), in both operand orders, and for
/// clamp (NaN kept, min above max giving max) against a float64 reference
/// with torch's broadcasting; shapes that are not trailing blocks take the
/// general path and must agree too.
#[test]
fn broadcast_and_clamp_fast_paths_match_a_reference() {
    use common::build::*;
    use pt2kit::ir::{Argument, InputKind};
    let values = |n: usize, seed: usize| -> Vec<f32> {
        (0..n)
            .map(|i| match (i * 7 + seed) % 23 {
                0 => f32::NAN,
                r => r as f32 / 4.0 - 2.5,
            })
            .collect()
    };
    let host = |shape: &[usize], v: &[f32]| HostTensor {
        dtype: Dtype::Float32,
        shape: shape.to_vec(),
        data: f32s(v),
    };
    // the element of `shape` read at position `i` of the broadcast `to`
    let at = |shape: &[usize], to: &[usize], mut i: usize| -> usize {
        let mut idx = 0;
        let mut stride = 1;
        for (k, &d) in to.iter().enumerate().rev() {
            let c = i % d;
            i /= d;
            let off = k as isize - (to.len() - shape.len()) as isize;
            if off >= 0 {
                let s = shape[off as usize];
                if s != 1 {
                    idx += c * stride;
                }
                stride *= s;
            }
        }
        idx
    };
    let pairs: &[(&[usize], &[usize])] = &[
        (&[2, 3, 4, 5], &[2, 3, 1, 1]),
        (&[2, 3, 1, 1], &[2, 3, 4, 5]),
        (&[1, 6, 7, 9], &[6, 1, 1]),
        (&[4, 5], &[4, 1]),
        (&[2, 3, 4, 5], &[3, 1, 1]),
        (&[2, 3, 4, 5], &[5]),
        (&[3, 1, 5], &[3, 4, 1]),
    ];
    type Reference = fn(f64, f64) -> f64;
    let ops: &[(&str, Reference)] = &[
        ("aten.add.Tensor", |a, b| a + b),
        ("aten.sub.Tensor", |a, b| a - b),
        ("aten.mul.Tensor", |a, b| a * b),
        ("aten.div.Tensor", |a, b| a / b),
        ("aten.lt.Tensor", |a, b| (a < b) as u8 as f64),
        ("aten.ge.Tensor", |a, b| (a >= b) as u8 as f64),
    ];
    for &(sa, sb) in pairs {
        let to: Vec<usize> = {
            let r = sa.len().max(sb.len());
            (0..r)
                .map(|k| {
                    let d = |s: &[usize]| (k + s.len()).checked_sub(r).map_or(1, |i| s[i]);
                    d(sa).max(d(sb))
                })
                .collect()
        };
        let (va, vb) = (
            values(sa.iter().product(), 1),
            values(sb.iter().product(), 5),
        );
        for &(op, f) in ops {
            let mut b = B::new();
            let i64s = |s: &[usize]| s.iter().map(|&d| d as i64).collect::<Vec<_>>();
            let xa = b.input("a", InputKind::UserInput, meta(&i64s(sa)), None);
            let xb = b.input("b", InputKind::UserInput, meta(&i64s(sb)), None);
            let cmp = op.contains("lt") || op.contains("ge");
            let out_meta = if cmp {
                meta_of(Dtype::Bool, &i64s(&to))
            } else {
                meta(&i64s(&to))
            };
            let y = b.emit(|em| {
                em.op(op, vec![("self", t(xa)), ("other", t(xb))], out_meta)
                    .unwrap()
            });
            b.output(y);
            let exec = Executor::new(&b.p, exec::device(DeviceKind::Cpu).unwrap()).unwrap();
            let out = exec
                .run(&[("a".into(), host(sa, &va)), ("b".into(), host(sb, &vb))])
                .unwrap();
            let got = out[0].1.to_f64();
            assert_eq!(out[0].1.shape, to, "{op} {sa:?} {sb:?}");
            for (i, g) in got.iter().enumerate() {
                let want = f(va[at(sa, &to, i)] as f64, vb[at(sb, &to, i)] as f64);
                let want = if cmp { want } else { want as f32 as f64 };
                assert!(
                    (g.is_nan() && want.is_nan())
                        || *g == want
                        || (g - want).abs() <= 1e-6 * (1.0 + want.abs()),
                    "{op} {sa:?} {sb:?} at {i}: {g} against {want}"
                );
            }
        }
    }
    // clamp: bounds, one bound, min above max (gives max); NaN stays NaN
    let x = values(60, 3);
    for (lo, hi) in [
        (Some(-1.0), Some(1.5)),
        (None, Some(0.5)),
        (Some(0.25), None),
        (Some(2.0), Some(-1.0)),
    ] {
        let mut b = B::new();
        let xv = b.input("x", InputKind::UserInput, meta(&[3, 4, 5]), None);
        let bound = |v: Option<f64>| v.map_or(Argument::None, Argument::Float);
        let y = b.emit(|em| {
            em.op(
                "aten.clamp.default",
                vec![("self", t(xv)), ("min", bound(lo)), ("max", bound(hi))],
                meta(&[3, 4, 5]),
            )
            .unwrap()
        });
        b.output(y);
        let exec = Executor::new(&b.p, exec::device(DeviceKind::Cpu).unwrap()).unwrap();
        let got = exec.run(&[("x".into(), host(&[3, 4, 5], &x))]).unwrap()[0]
            .1
            .to_f64();
        for (g, v) in got.iter().zip(&x) {
            let mut want = *v as f64;
            if let Some(l) = lo {
                want = if want < l { l } else { want };
            }
            if let Some(h) = hi {
                want = if want > h { h } else { want };
            }
            assert!(
                (g.is_nan() && want.is_nan()) || *g == want,
                "clamp({v}, {lo:?}, {hi:?}) = {g}, want {want}"
            );
        }
    }
}

/// An executor of `p` with element-wise chains fused (the default) and
/// one that runs every node by itself.
/// (The program as given, not lowered at load: these tests hold the
/// native rows' plans, which `ir-run --intermediates` and
/// `PT2KIT_AS_GIVEN=1` run.)
fn fused_and_plain(p: &pt2kit::ir::Program) -> (Executor<'_>, Executor<'_>) {
    let cpu = || exec::device(DeviceKind::Cpu).unwrap();
    let fused = pt2kit::exec::ExecOptions {
        as_given: true,
        ..Default::default()
    };
    let plain = pt2kit::exec::ExecOptions {
        no_fusion: true,
        ..fused
    };
    (
        Executor::with_options(p, cpu(), fused).unwrap(),
        Executor::with_options(p, cpu(), plain).unwrap(),
    )
}

/// Element-wise chains are fused ([`pt2kit::exec::fuse`]) where their
/// intermediate values have no other reader, and a fused run gives the
/// same bits as the nodes run one by one: GPT-2's tanh GELU and a lowered
/// hardswish joined by a subtraction (one group of thirteen), a chain whose
/// first value is also an output (not fused), and a chain over a permuted
/// (strided) input, which falls back to its nodes. 945 elements: the last
/// chunk is short. The GELU also against a float64 reference.
#[test]
fn fused_chains_match_unfused_runs() {
    use common::build::*;
    use pt2kit::ir::{Argument, InputKind};
    let shape = [3i64, 7, 45];
    let mut b = B::new();
    let x = b.input("x", InputKind::UserInput, meta(&shape), None);
    let y = b.input("y", InputKind::UserInput, meta(&shape), None);
    let mut rest = None;
    let k = b.emit(|em| {
        let f = |v: f64| Argument::Float(v);
        let mut op = |name: &str, args: Vec<(&str, Argument)>, sizes: &[i64]| {
            em.op(name, args, meta(sizes)).unwrap()
        };
        let s = &shape;
        // 0.5 x (1 + tanh(0.7978845608 (x + 0.044715 x^3)))
        let h = op(
            "aten.mul.Scalar",
            vec![("self", t(x)), ("other", f(0.5))],
            s,
        );
        let p = op(
            "aten.pow.Tensor_Scalar",
            vec![("self", t(x)), ("exponent", f(3.0))],
            s,
        );
        let q = op(
            "aten.mul.Scalar",
            vec![("self", t(p)), ("other", f(0.044715))],
            s,
        );
        let r = op("aten.add.Tensor", vec![("self", t(x)), ("other", t(q))], s);
        let sc = op(
            "aten.mul.Scalar",
            vec![("self", t(r)), ("other", f(0.7978845608028654))],
            s,
        );
        let th = op("aten.tanh.default", vec![("self", t(sc))], s);
        let u = op(
            "aten.add.Scalar",
            vec![("self", t(th)), ("other", f(1.0))],
            s,
        );
        let g = op("aten.mul.Tensor", vec![("self", t(h)), ("other", t(u))], s);
        // y clamp(y + 3, 0, 6) / 6
        let a = op(
            "aten.add.Scalar",
            vec![("self", t(y)), ("other", f(3.0))],
            s,
        );
        let c = op(
            "aten.clamp.default",
            vec![("self", t(a)), ("min", f(0.0)), ("max", f(6.0))],
            s,
        );
        let d = op(
            "aten.div.Scalar",
            vec![("self", t(c)), ("other", f(6.0))],
            s,
        );
        let e = op("aten.mul.Tensor", vec![("self", t(y)), ("other", t(d))], s);
        let k = op(
            "aten.sub.Tensor",
            vec![("self", t(g)), ("other", t(e)), ("alpha", Argument::Int(2))],
            s,
        );
        // relu(x) is an output and neg's input: neither is fused
        let m = op("aten.relu.default", vec![("self", t(x))], s);
        let n = op("aten.neg.default", vec![("self", t(m))], s);
        // over a strided view: the nodes one by one
        let pt = op(
            "aten.permute.default",
            vec![("self", t(x)), ("dims", Argument::Ints(vec![2, 0, 1]))],
            &[45, 3, 7],
        );
        let w = op(
            "aten.mul.Scalar",
            vec![("self", t(pt)), ("other", f(2.0))],
            &[45, 3, 7],
        );
        let z = op("aten.sigmoid.default", vec![("self", t(w))], &[45, 3, 7]);
        rest = Some((m, n, z));
        k
    });
    let (m, n, z) = rest.unwrap();
    for v in [k, m, n, z] {
        b.output(v);
    }
    let (fused, plain) = fused_and_plain(&b.p);
    let groups = fused.fused_groups();
    assert_eq!(groups.len(), 2, "{groups:?}");
    assert_eq!(
        groups.iter().map(Vec::len).collect::<Vec<_>>(),
        [13, 2],
        "{groups:?}"
    );
    assert!(plain.fused_groups().is_empty());
    let len = 3 * 7 * 45;
    let vals = |seed: usize| -> Vec<f32> {
        (0..len)
            .map(|i| (((i * 37 + seed) % 101) as f32 - 50.0) / 9.0)
            .collect()
    };
    let host = |v: &[f32]| HostTensor {
        dtype: Dtype::Float32,
        shape: vec![3, 7, 45],
        data: f32s(v),
    };
    let (xv, yv) = (vals(1), vals(7));
    let inputs = [("x".to_string(), host(&xv)), ("y".to_string(), host(&yv))];
    let got = fused.run(&inputs).unwrap();
    let want = plain.run(&inputs).unwrap();
    assert_same_bits(&got, &want, "fused chains");
    // the GELU minus twice the hardswish, against float64
    let k_got = got[0].1.to_f64();
    for i in 0..len {
        let (xf, yf) = (xv[i] as f64, yv[i] as f64);
        let gelu = 0.5 * xf * (1.0 + (0.7978845608028654 * (xf + 0.044715 * xf.powi(3))).tanh());
        let hsw = yf * (yf + 3.0).clamp(0.0, 6.0) / 6.0;
        let want = gelu - 2.0 * hsw;
        assert!(
            (k_got[i] - want).abs() <= 1e-5 * (1.0 + want.abs()),
            "{i}: {} against {want}",
            k_got[i]
        );
    }
}

/// With in-place ops (the TRAINING dialect): no fused group reads a value
/// an in-place op updates (the update comes between the group's nodes and
/// its root), other groups are fused, and the results are the nodes' one
/// by one.
#[test]
fn fusion_keeps_out_of_values_updated_in_place() {
    use common::build::*;
    use pt2kit::ir::{Argument, InputKind};
    let s = [4i64, 33];
    let mut b = B::new();
    let x = b.input("x", InputKind::UserInput, meta(&s), None);
    let y = b.input("y", InputKind::UserInput, meta(&s), None);
    let mut rest = None;
    let k = b.emit(|em| {
        let f = |v: f64| Argument::Float(v);
        let mut op = |name: &str, args: Vec<(&str, Argument)>| em.op(name, args, meta(&s)).unwrap();
        // c = x.clone(); c * 2, then c += y in place, then (c * 2) + 1: c
        // is read before the update, so the chain may not run at its end
        // (an update of an input itself is program state: functionalised)
        let c = op("aten.clone.default", vec![("self", t(x))]);
        let h = op("aten.mul.Scalar", vec![("self", t(c)), ("other", f(2.0))]);
        let u = op("aten.add_.Tensor", vec![("self", t(c)), ("other", t(y))]);
        let k = op("aten.add.Scalar", vec![("self", t(h)), ("other", f(1.0))]);
        // a chain over y, which nothing updates
        let a = op("aten.mul.Scalar", vec![("self", t(y)), ("other", f(3.0))]);
        let n = op("aten.neg.default", vec![("self", t(a))]);
        rest = Some((u, n));
        k
    });
    let (u, n) = rest.unwrap();
    for v in [k, u, n] {
        b.output(v);
    }
    let (fused, plain) = fused_and_plain(&b.p);
    assert_eq!(
        fused.fused_groups(),
        [["aten.mul.Scalar", "aten.neg.default"]],
        "only the chain over y"
    );
    let vals = |seed: usize| -> Vec<f32> {
        (0..132)
            .map(|i| ((i * 13 + seed) % 29) as f32 - 14.0)
            .collect()
    };
    let host = |v: &[f32]| HostTensor {
        dtype: Dtype::Float32,
        shape: vec![4, 33],
        data: f32s(v),
    };
    let (xv, yv) = (vals(1), vals(5));
    let inputs = [("x".to_string(), host(&xv)), ("y".to_string(), host(&yv))];
    let got = fused.run(&inputs).unwrap();
    assert_eq!(got, plain.run(&inputs).unwrap());
    // (x * 2) + 1 from x as it was before the update
    let k_got = got[0].1.to_f64();
    for i in 0..132 {
        assert_eq!(k_got[i], (xv[i] * 2.0 + 1.0) as f64, "{i}");
    }
}

/// An output written to an npz from where the executor made it (ir-run's
/// path: `run_outputs`, bytes borrowed from the tensor) is byte for byte
/// the npz of its host copy (`run`), on every fixture: every output dtype,
/// views that are not contiguous, scalars.
#[test]
fn outputs_written_in_place_equal_their_host_copies() {
    let mut written = 0;
    for p in model_fixtures() {
        let program = read(&p);
        let Ok(executor) = Executor::new(&program, exec::device(DeviceKind::Cpu).unwrap()) else {
            continue;
        };
        for (_, inputs, _) in input_sets(&p) {
            let inputs = pt2kit::tensorfile::read_npz(&inputs).unwrap();
            let (Ok(host), Ok(lent)) = (executor.run(&inputs), executor.run_outputs(&inputs))
            else {
                continue;
            };
            let mut out = std::io::Cursor::new(Vec::new());
            pt2kit::tensorfile::write_npz_into(&mut out, &lent, "test").unwrap();
            let expected = pt2kit::tensorfile::write_npz(&host).unwrap();
            assert!(
                out.into_inner() == expected,
                "{}: npz bytes differ",
                stem(&p)
            );
            written += 1;
        }
    }
    assert!(written >= 28, "only {written} runs");
}

/// Permuted views through the paths that keep them permuted: a number
/// times a view (computed in its storage order, the result given the same
/// layout), gelu of a view, a view that only drops and adds dims of one
/// element, and a batched product of two permuted views (read with their
/// strides). Against a reference computed on the plain values.
#[test]
fn permuted_views_keep_their_layout_and_their_values() {
    use common::build::*;
    use pt2kit::ir::{Argument, InputKind};
    // x [4, 3, 5]: as [3, 4, 5] (permute 1, 0, 2) and as [3, 5, 4]
    // (permute 1, 2, 0): one head dim, a transposed matrix
    let xs: Vec<f32> = (0..60)
        .map(|i| ((i * 13 % 29) as f32 - 14.0) * 0.25)
        .collect();
    let x_at = |a: usize, h: usize, c: usize| xs[(a * 3 + h) * 5 + c] as f64;
    let mut b = B::new();
    let x = b.input("x", InputKind::UserInput, meta(&[4, 3, 5]), None);
    let ints = |v: &[i64]| Argument::Ints(v.to_vec());
    // one node, its output of `sizes`
    let node = |b: &mut B, op: &str, args: Vec<(&str, Argument)>, sizes: &[i64]| {
        b.emit(|em| em.op(op, args, meta(sizes)).unwrap())
    };
    let q = node(
        &mut b,
        "aten.permute.default",
        vec![("self", t(x)), ("dims", ints(&[1, 0, 2]))],
        &[3, 4, 5],
    );
    let k = node(
        &mut b,
        "aten.permute.default",
        vec![("self", t(x)), ("dims", ints(&[1, 2, 0]))],
        &[3, 5, 4],
    );
    let qs = node(
        &mut b,
        "aten.mul.Scalar",
        vec![("self", t(q)), ("other", Argument::Float(0.5))],
        &[3, 4, 5],
    );
    let q4 = node(
        &mut b,
        "aten.view.default",
        vec![("self", t(qs)), ("size", ints(&[1, 3, 4, 1, 5]))],
        &[1, 3, 4, 1, 5],
    );
    let q3 = node(
        &mut b,
        "aten.view.default",
        vec![("self", t(q4)), ("size", ints(&[3, 4, 5]))],
        &[3, 4, 5],
    );
    let g = node(
        &mut b,
        "aten.gelu.default",
        vec![("self", t(k))],
        &[3, 5, 4],
    );
    let s = node(
        &mut b,
        "aten.bmm.default",
        vec![("self", t(q3)), ("mat2", t(k))],
        &[3, 4, 4],
    );
    for v in [q4, g, s] {
        b.output(v);
    }
    let exec = Executor::new(&b.p, exec::device(DeviceKind::Cpu).unwrap()).unwrap();
    let host = HostTensor {
        dtype: Dtype::Float32,
        shape: vec![4, 3, 5],
        data: f32s(&xs),
    };
    let out = exec.run(&[("x".into(), host)]).unwrap();
    let close = |got: f64, want: f64, what: &str| {
        assert!(
            (got - want).abs() <= 1e-5 * (1.0 + want.abs()),
            "{what}: {got} against {want}"
        );
    };
    let (q4v, gv, sv) = (out[0].1.to_f64(), out[1].1.to_f64(), out[2].1.to_f64());
    assert_eq!(
        (out[0].1.shape.clone(), out[2].1.shape.clone()),
        (vec![1, 3, 4, 1, 5], vec![3, 4, 4])
    );
    for h in 0..3 {
        for a in 0..4 {
            for c in 0..5 {
                close(q4v[(h * 4 + a) * 5 + c], 0.5 * x_at(a, h, c), "0.5 * q");
                let v = x_at(a, h, c);
                let gelu = 0.5 * v * (1.0 + libm_erf(v / std::f64::consts::SQRT_2));
                close(gv[(h * 5 + c) * 4 + a], gelu, "gelu of k");
            }
            for j in 0..4 {
                let want: f64 = (0..5).map(|c| 0.5 * x_at(a, h, c) * x_at(j, h, c)).sum();
                close(sv[(h * 4 + a) * 4 + j], want, "q k");
            }
        }
    }
}

/// erf in float64 (Abramowitz and Stegun 7.1.26 is too coarse: a series
/// and a continued fraction).
fn libm_erf(x: f64) -> f64 {
    let ax = x.abs();
    let v = if ax < 2.5 {
        // Taylor series
        let mut sum = 0.0;
        let mut term = ax;
        let mut n = 0.0;
        while term.abs() > 1e-17 {
            sum += term / (2.0 * n + 1.0);
            n += 1.0;
            term *= -ax * ax / n;
        }
        sum * 2.0 / std::f64::consts::PI.sqrt()
    } else {
        // erfc's continued fraction
        let mut f = 0.0;
        for k in (1..60).rev() {
            f = (k as f64 / 2.0) / (ax + f);
        }
        1.0 - (-ax * ax).exp() / (ax + f) / std::f64::consts::PI.sqrt()
    };
    v.copysign(x)
}

/// The resident memory (kB) of the mappings of `path` in this process,
/// from /proc/self/smaps; `None` where there is no /proc.
fn mapped_rss_kb(path: &Path) -> Option<u64> {
    let smaps = std::fs::read_to_string("/proc/self/smaps").ok()?;
    let name = path.to_str()?;
    let mut ours = false;
    let mut kb = 0;
    for line in smaps.lines() {
        if line.contains('-') && line.split_whitespace().count() >= 5 && !line.ends_with(" kB") {
            ours = line.ends_with(name);
        } else if let (true, Some(v)) = (ours, line.strip_prefix("Rss:")) {
            kb += v
                .trim()
                .trim_end_matches(" kB")
                .trim()
                .parse::<u64>()
                .ok()?;
        }
    }
    Some(kb)
}

/// Weights the executor copies (small ones, or ones an op does not read in
/// place) leave the mapped file's pages: once copied, the file's pages of
/// them are dropped from the process's resident memory, so that a model
/// is not counted twice (ResNet-50 at batch 8: 395 -> 304 MB peak). A
/// convolution of a 2 MiB weight, from an IR file read through a map.
#[test]
fn copied_weights_leave_the_mapped_file() {
    use common::build::*;
    use pt2kit::ir::InputKind;
    let (co, ci) = (512, 256);
    let wv: Vec<f32> = (0..co * ci * 4).map(|i| (i % 97) as f32 * 1e-3).collect();
    let mut b = B::new();
    let w = b.input(
        "w",
        InputKind::Parameter("w".into()),
        meta(&[co as i64, ci as i64, 2, 2]),
        Some(f32s(&wv)),
    );
    let x = b.input("x", InputKind::UserInput, meta(&[1, ci as i64, 4, 4]), None);
    let y = b.emit(|em| {
        em.op(
            "aten.convolution.default",
            conv2d_args(x, w),
            meta(&[1, co as i64, 3, 3]),
        )
        .unwrap()
    });
    b.output(y);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("conv.ir");
    let mut bytes = Vec::new();
    pt2kit::wire::write_program(&b.p, &mut bytes).unwrap();
    std::fs::write(&path, bytes).unwrap();
    let program =
        pt2kit::wire::read_program_file(std::fs::File::open(&path).unwrap(), None, "conv.ir")
            .unwrap();
    let Some(before) = mapped_rss_kb(&path) else {
        eprintln!("no /proc/self/smaps here: nothing to measure");
        return;
    };
    let opts = pt2kit::exec::ExecOptions {
        map_weights: pt2kit::exec::mapped::MapWeights::Never,
        ..Default::default()
    };
    let exec =
        Executor::with_options(&program, exec::device(DeviceKind::Cpu).unwrap(), opts).unwrap();
    let after = mapped_rss_kb(&path).unwrap();
    let weight_kb = (wv.len() * 4 / 1024) as u64;
    // (the file is the weight and a small graph: what stays resident is
    // the graph's pages and the weight's partial pages at its ends)
    assert!(
        after < weight_kb / 8,
        "the file's resident memory went from {before} to {after} kB with {weight_kb} kB of weights copied"
    );
    // and the copy is the weight: a run gives the convolution
    let xs: Vec<f32> = (0..ci * 16).map(|i| (i % 13) as f32 * 0.1).collect();
    let host = HostTensor {
        dtype: Dtype::Float32,
        shape: vec![1, ci, 4, 4],
        data: f32s(&xs),
    };
    let out = exec.run(&[("x".into(), host)]).unwrap()[0].1.to_f64();
    let want: f64 = (0..ci)
        .flat_map(|c| (0..2).flat_map(move |ky| (0..2).map(move |kx| (c, ky, kx))))
        .map(|(c, ky, kx)| wv[(c * 2 + ky) * 2 + kx] as f64 * xs[c * 16 + ky * 4 + kx] as f64)
        .sum();
    assert!(
        (out[0] - want).abs() < 1e-3 * (1.0 + want.abs()),
        "{} against {want}",
        out[0]
    );
}

/// hardswish, hardsigmoid and hardtanh compute torch's formulas in
/// float32 bit for bit (`x * clamp(x + 3, 0, 6) / 6`, `clamp(x + 3, 0, 6)
/// / 6`, `clamp(x, min_val, max_val)`; NaN kept), alone and fused into a
/// chain (hardtanh joins one: relu6 then neg).
#[test]
fn hard_activations_are_torch_formulas_fused_or_not() {
    use common::build::*;
    use pt2kit::ir::{Argument, InputKind};
    let s = [5i64, 61];
    let len = 5 * 61;
    let mut x: Vec<f32> = (0..len)
        .map(|i| ((i * 37) % 211) as f32 / 17.0 - 6.2)
        .collect();
    x[3] = f32::NAN;
    x[4] = f32::INFINITY;
    x[5] = f32::NEG_INFINITY;
    let mut b = B::new();
    let xv = b.input("x", InputKind::UserInput, meta(&s), None);
    let mut outs = Vec::new();
    b.emit(|em| {
        let mut op = |name: &str, args: Vec<(&str, Argument)>| em.op(name, args, meta(&s)).unwrap();
        outs.push(op("aten.hardswish.default", vec![("self", t(xv))]));
        outs.push(op("aten.hardsigmoid.default", vec![("self", t(xv))]));
        let six = op(
            "aten.hardtanh.default",
            vec![
                ("self", t(xv)),
                ("min_val", Argument::Float(0.0)),
                ("max_val", Argument::Float(6.0)),
            ],
        );
        outs.push(op("aten.neg.default", vec![("self", t(six))]));
        outs[0]
    });
    for v in &outs {
        b.output(*v);
    }
    let (fused, plain) = fused_and_plain(&b.p);
    assert_eq!(
        fused.fused_groups(),
        [["aten.hardtanh.default", "aten.neg.default"]]
    );
    let clamp = |v: f32, lo: f32, hi: f32| {
        let v = if v < lo { lo } else { v };
        if v > hi {
            hi
        } else {
            v
        }
    };
    let want: [Vec<f32>; 3] = [
        x.iter()
            .map(|&v| v * clamp(v + 3.0, 0.0, 6.0) / 6.0)
            .collect(),
        x.iter().map(|&v| clamp(v + 3.0, 0.0, 6.0) / 6.0).collect(),
        x.iter().map(|&v| -clamp(v, 0.0, 6.0)).collect(),
    ];
    let inputs = [("x".to_string(), host_f32(&[5, 61], &x))];
    for exec in [&fused, &plain] {
        let got = exec.run(&inputs).unwrap();
        for ((name, g), w) in got.iter().zip(&want) {
            let g: Vec<f32> = g.to_f64().iter().map(|&v| v as f32).collect();
            for (i, (a, b)) in g.iter().zip(w).enumerate() {
                assert!(
                    a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan()),
                    "{name} at {i} (x = {}): {a} against {b}",
                    x[i]
                );
            }
        }
    }
}

/// Element-wise chains after a convolution are its epilogue: each kernel
/// runs them on each block of its output as it finishes it
/// (golden/models/conv_epilogues: a lone relu, a residual add and relu,
/// hardswish, relu6, after each convolution kernel, pixel rows included); the results are the
/// bits of the nodes run one by one. Not epilogues: a chain with the
/// convolution's output as its second operand, one with an operand made
/// after the convolution, and one after a convolution whose output is
/// returned too. Both the exported and the decomposed program.
#[test]
fn convolution_epilogues_match_unfused_runs() {
    // the chains after the convolutions c1, c2, pw, dw, small (relu6,
    // which the executor lowers to hardtanh), se, rows and rows2 (pixel
    // rows), in graph order (not sub's: the convolution is its second
    // operand)
    let relu = ["aten.relu.default"];
    let residual = ["aten.add.Tensor", "aten.relu.default"];
    let hardswish = ["aten.hardswish.default"];
    let lowered = [
        "aten.add.Tensor",
        "aten.clamp.default",
        "aten.clamp.default",
        "aten.mul.Tensor",
        "aten.div.Tensor",
    ];
    let relu6 = ["aten.hardtanh.default"];
    let exported: Vec<&[&str]> = vec![
        &relu, &residual, &hardswish, &hardswish, &relu6, &relu, &relu, &residual,
    ];
    let decomposed: Vec<&[&str]> = vec![
        &relu, &residual, &lowered, &lowered, &relu6, &relu, &relu, &residual,
    ];
    for (file, want) in [
        ("conv_epilogues.pt2", exported),
        ("conv_epilogues.decomp.pt2", decomposed),
    ] {
        // in the kernels (direct, depthwise, packed, transposed, pixel
        // rows; with AVX-512): every one
        epilogues_match_unfused_runs(file, "conv_epilogues.inputs.npz", &want, want.len());
    }
}

/// A pointwise convolution over a 7x7 plane at batch 1 takes the pixel
/// rows (the pixels the product's rows, the channels its columns), whose
/// blocks are moved into the output and their chain run there by the
/// thread that made them: split by pixels as well as channels here (five
/// row panels by two of columns on two threads), the chain runs on parts
/// of each channel's line. A hardswish, and a residual add then a relu:
/// the bits of the nodes run one by one, both chains in the kernel.
#[test]
fn pixel_rows_split_by_pixels_match_unfused_runs() {
    use common::build::*;
    use pt2kit::ir::InputKind;
    let (c, co, hw) = (200i64, 64i64, 7i64);
    let mut b = B::new();
    let x = b.input("x", InputKind::UserInput, meta(&[1, c, hw, hw]), None);
    let w = b.input("w", InputKind::UserInput, meta(&[co, c, 1, 1]), None);
    let w2 = b.input("w2", InputKind::UserInput, meta(&[co, c, 1, 1]), None);
    let r = b.input("r", InputKind::UserInput, meta(&[1, co, hw, hw]), None);
    let out = meta(&[1, co, hw, hw]);
    let h = b.emit(|em| {
        let y = em
            .op("aten.convolution.default", conv2d_args(x, w), out.clone())
            .unwrap();
        em.op("aten.hardswish.default", vec![("self", t(y))], out.clone())
            .unwrap()
    });
    let v = b.emit(|em| {
        let y2 = em
            .op("aten.convolution.default", conv2d_args(x, w2), out.clone())
            .unwrap();
        let s = em
            .op(
                "aten.add.Tensor",
                vec![("self", t(y2)), ("other", t(r))],
                out.clone(),
            )
            .unwrap();
        em.op("aten.relu.default", vec![("self", t(s))], out.clone())
            .unwrap()
    });
    b.output(h);
    b.output(v);
    let (c, co, hw) = (c as usize, co as usize, hw as usize);
    let draw = |n: usize, seed: u64| -> Vec<f32> {
        let mut next = common::draws(seed);
        (0..n).map(|_| next(2001) as f32 / 500.0 - 2.0).collect()
    };
    let inputs = [
        (
            "x".to_string(),
            host_f32(&[1, c, hw, hw], &draw(c * hw * hw, 1)),
        ),
        ("w".to_string(), host_f32(&[co, c, 1, 1], &draw(co * c, 2))),
        ("w2".to_string(), host_f32(&[co, c, 1, 1], &draw(co * c, 3))),
        (
            "r".to_string(),
            host_f32(&[1, co, hw, hw], &draw(co * hw * hw, 4)),
        ),
    ];
    let (fused, plain) = fused_and_plain(&b.p);
    let got = fused.run(&inputs).unwrap();
    let alone = plain.run(&inputs).unwrap();
    assert_same_bits(&got, &alone, "pixel rows");
    let want = if pt2kit::kernels::cpu().vector { 2 } else { 0 };
    assert_eq!(fused.epilogues_in_kernels(), want);
}

/// Outputs left channels-last (golden/models/channels_last: a
/// MobileNetV3 block at 14x14 and 7x7, and the ops after a depthwise
/// convolution that read that layout or copy it into planes): five a run
/// where the blocked depthwise kernel runs (its four outputs and the 7x7
/// expansion before the last, which only it reads; none with
/// `planes_only`, none on the baseline kernels), and the outputs match
/// torch's and the run that keeps every output in planes, both dialects.
/// On AVX2 a sixth: the 14x14 expansion runs as pixel rows there too (an
/// expansion over up to 196 pixels), and only the depthwise kernel reads it.
#[test]
fn channels_last_outputs_match_planes_and_torch() {
    let left = if pt2kit::kernels::cpu().wide { 5 } else { 6 };
    channels_last_matches("channels_last", left);
}

/// Stems from few channels leave their outputs channels-last where only a
/// max pool reads them (`golden/models/stem_pool`, from `recipes/fixtures/zoo.py`:
/// ResNet's 7x7 stride-2 stem with its relu and pool, a 5x5 under a pool
/// in ceil mode; a third with another reader stays in planes), the pools
/// read them so, and the outputs match torch's and the planes' run.
#[test]
fn stems_left_channels_last_for_their_pools() {
    channels_last_matches("stem_pool", 2);
}

/// Squeeze-and-excitation scales at batch 1 folded into the convolution
/// after them (`golden/models/se_fold`, from `recipes/fixtures/zoo.py`: a 1x1 and
/// a 3x3 after `d * s` and `s * d`; a scaled input read again, a weight
/// larger than half the input and a depthwise convolution not folded):
/// two a run, both dialects, none with the fusion plan off, and the
/// outputs match torch's and the unfused run's.
#[test]
fn scales_fold_into_the_convolutions_after_them() {
    for file in ["se_fold.pt2", "se_fold.decomp.pt2"] {
        let program = read(&repo().join("golden/models").join(file));
        let (fused, plain) = fused_and_plain(&program);
        both_match_torch("se_fold", file, (&fused, "folded"), (&plain, "unfused"));
        assert_eq!(fused.scales_folded(), 2, "{file}");
        assert_eq!(plain.scales_folded(), 0, "{file}");
    }
}

/// `NAME.pt2` and `NAME.decomp.pt2` leave `left` outputs channels-last a
/// run (where the packed kernels run; none with `planes_only`), and their
/// outputs match torch's (`NAME.expected.npz`) and the run that keeps
/// every output in planes.
fn channels_last_matches(name: &str, left: usize) {
    for file in [format!("{name}.pt2"), format!("{name}.decomp.pt2")] {
        let pt2 = repo().join("golden/models").join(&file);
        let program = read(&pt2);
        let cpu = || exec::device(DeviceKind::Cpu).unwrap();
        let planes_only = pt2kit::exec::ExecOptions {
            planes_only: true,
            ..Default::default()
        };
        let (cl, planes) = (
            Executor::new(&program, cpu()).unwrap(),
            Executor::with_options(&program, cpu(), planes_only).unwrap(),
        );
        both_match_torch(
            name,
            &file,
            (&cl, "channels-last"),
            (&planes, "planes only"),
        );
        let left = if pt2kit::kernels::cpu().vector {
            left
        } else {
            0
        };
        assert_eq!(cl.outputs_channels_last(), left, "{file}");
        assert_eq!(planes.outputs_channels_last(), 0, "{file}");
    }
}

/// Two executors of `golden/models/NAME`'s `file` run on its inputs
/// (`NAME.inputs.npz`): the outputs of each match torch's
/// (`NAME.expected.npz`) and each other's (`what` names the runs in a
/// failure).
fn both_match_torch(
    name: &str,
    file: &str,
    (a, what_a): (&Executor, &str),
    (b, what_b): (&Executor, &str),
) {
    let models = repo().join("golden/models");
    let inputs = pt2kit::tensorfile::read_npz(&models.join(format!("{name}.inputs.npz"))).unwrap();
    let expected =
        pt2kit::tensorfile::read_npz(&models.join(format!("{name}.expected.npz"))).unwrap();
    let (got, want) = (a.run(&inputs).unwrap(), b.run(&inputs).unwrap());
    let mut failures = compare(&format!("{file} {what_a}"), &got, &expected);
    failures.extend(compare(&format!("{file} {what_b}"), &want, &expected));
    failures.extend(compare(
        &format!("{file} {what_a} against {what_b}"),
        &got,
        &want,
    ));
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// A fused run's outputs `got` are the bits of the nodes run one by one
/// (`alone`), output by output (`what` names the run in a failure).
fn assert_same_bits(
    got: &[(String, pt2kit::tensorfile::HostTensor)],
    alone: &[(String, pt2kit::tensorfile::HostTensor)],
    what: &str,
) {
    assert_eq!(got.len(), alone.len(), "{what}");
    for ((name, a), (_, b)) in got.iter().zip(alone) {
        assert_eq!(a.shape, b.shape, "{what} {name}");
        assert!(
            a.data == b.data,
            "{what} {name}: the fused run differs from the nodes run one by one"
        );
    }
}

/// The fused groups of `file` that run as epilogues are the chains `want`
/// (op names), `in_kernels` of them ran inside their kernels (with
/// AVX-512; none without), and the outputs are the bits of the nodes run
/// one by one.
fn epilogues_match_unfused_runs(file: &str, inputs: &str, want: &[&[&str]], in_kernels: usize) {
    let program = read(&repo().join("golden/models").join(file));
    let (fused, plain) = fused_and_plain(&program);
    let chains: Vec<Vec<String>> = fused.epilogues().into_iter().map(|(_, ops)| ops).collect();
    assert_eq!(chains, want, "{file}: {:?}", fused.epilogues());
    assert!(plain.epilogues().is_empty());
    let inputs = pt2kit::tensorfile::read_npz(&repo().join("golden/models").join(inputs)).unwrap();
    let got = fused.run(&inputs).unwrap();
    let alone = plain.run(&inputs).unwrap();
    assert_same_bits(&got, &alone, file);
    let ran = fused.epilogues_in_kernels();
    let all = if pt2kit::kernels::cpu().vector {
        in_kernels
    } else {
        0
    };
    assert_eq!(ran, all, "{file}");
}

/// A convolution writes its output over the dead residual its fused add
/// reads (golden/models/conv_over): on the direct kernel, on a strided 1x1
/// whose output is the add's second operand, on the pixel rows of a
/// pointwise product and of one with taps, and over the run's copy of the
/// input: five with AVX-512; three on AVX2, where the two with taps run
/// packed (fresh, the add on each finished block: see `conv`'s
/// `packed_over_direct`); none without either; and not over a residual read
/// later, a view of a value read later, or a buffer. The outputs are the
/// bits of the nodes run one by one, and a second run's are the first's
/// (no weight or input was written over). Both the exported program and
/// the decomposed one.
#[test]
fn convolutions_write_over_dead_residuals_only() {
    let dir = repo().join("golden/models");
    let inputs = pt2kit::tensorfile::read_npz(&dir.join("conv_over.inputs.npz")).unwrap();
    for file in ["conv_over.pt2", "conv_over.decomp.pt2"] {
        let program = read(&dir.join(file));
        let (fused, plain) = fused_and_plain(&program);
        let first = fused.run(&inputs).unwrap();
        let second = fused.run(&inputs).unwrap();
        let alone = plain.run(&inputs).unwrap();
        assert_eq!(first.len(), 4, "{file}");
        for (((name, a), (_, b)), (_, c)) in first.iter().zip(&alone).zip(&second) {
            assert!(
                a.data == b.data,
                "{file} {name}: differs from the nodes run one by one"
            );
            assert!(
                a.data == c.data,
                "{file} {name}: the second run differs from the first"
            );
        }
        let want = if !pt2kit::kernels::cpu().vector {
            0
        } else if pt2kit::kernels::cpu().wide {
            10
        } else {
            6
        };
        assert_eq!(fused.outputs_in_place(), want, "{file}: two runs");
        assert_eq!(plain.outputs_in_place(), 0, "{file}");
    }
}

/// Inputs bound once ([`Executor::bind`], as `ir-bench` runs them) are
/// read by every run and written over by none: on golden/models/conv_over,
/// whose convolution writes over the run's copy of the input where it is
/// copied in, three runs on the bound inputs give the bits of the nodes
/// run one by one, and write one output fewer in place a run than runs
/// on host inputs where that convolution writes over its input (AVX-512;
/// the other residuals are the run's own). Inputs of the
/// wrong shape are refused as `run` refuses them.
#[test]
fn bound_inputs_are_never_written_over() {
    let dir = repo().join("golden/models");
    let inputs = pt2kit::tensorfile::read_npz(&dir.join("conv_over.inputs.npz")).unwrap();
    let program = read(&dir.join("conv_over.pt2"));
    let (fused, plain) = fused_and_plain(&program);
    let alone = plain.run(&inputs).unwrap();
    fused.run(&inputs).unwrap();
    let from_host = fused.outputs_in_place();
    let bound = fused.bind(&inputs).unwrap();
    for run in 0..3 {
        let got = fused.run_bound(&bound).unwrap();
        assert_same_bits(&got, &alone, &format!("run {run}"));
    }
    let on_bound = fused.outputs_in_place() - from_host;
    // the convolution over the input's copy has taps: it writes over its
    // input with AVX-512 only (on AVX2 it runs packed, into a fresh
    // output; see convolutions_write_over_dead_residuals_only)
    let over_input = usize::from(pt2kit::kernels::cpu().wide);
    let want = if pt2kit::kernels::cpu().vector {
        3 * (from_host - over_input)
    } else {
        0
    };
    assert_eq!(on_bound, want, "three runs on bound inputs");
    let mut wrong = inputs.clone();
    wrong[0].1.shape.push(1);
    let err = fused
        .bind(&wrong)
        .and_then(|b| fused.run_bound(&b))
        .unwrap_err();
    assert!(err.to_string().contains(&wrong[0].0), "{err}");
}

/// Element-wise chains after a linear layer's product are its epilogue,
/// seen through the view a 3-D input's product is reshaped by
/// (golden/models/linear_epilogues: exact GELU, a residual add, tanh GELU,
/// a relu after a 2-D product; and, through the group's own evaluator on
/// each block, a residual add with the product second and SiLU written
/// out): the results are the bits of the nodes run one by one. Both the
/// exported program (linear) and the decomposed one (addmm and view).
#[test]
fn linear_epilogues_match_unfused_runs() {
    let gelu = ["aten.gelu.default"];
    let add = ["aten.add.Tensor"];
    let relu = ["aten.relu.default"];
    let silu = ["aten.sigmoid.default", "aten.mul.Tensor"];
    let want: Vec<&[&str]> = vec![&gelu, &add, &gelu, &add, &relu, &silu];
    for file in ["linear_epilogues.pt2", "linear_epilogues.decomp.pt2"] {
        epilogues_match_unfused_runs(file, "linear_epilogues.inputs.npz", &want, want.len());
    }
}

/// A convolution over no input channels is its bias at every pixel (the
/// direct kernel, which would run no step of k, does not take it), with
/// taps and pointwise.
#[test]
fn convolution_over_no_channels_is_its_bias() {
    use common::build::*;
    use pt2kit::ir::{Argument, InputKind};
    for k in [3i64, 1] {
        let mut b = B::new();
        let x = b.input("x", InputKind::UserInput, meta(&[2, 0, 20, 20]), None);
        let w = b.input("w", InputKind::UserInput, meta(&[3, 0, k, k]), None);
        let bias = b.input("bias", InputKind::UserInput, meta(&[3]), None);
        let o = 20 - k + 1;
        let y = b.emit(|em| {
            let mut args = conv2d_args(x, w);
            args[2] = ("bias", Argument::Tensor(bias));
            em.op("aten.convolution.default", args, meta(&[2, 3, o, o]))
                .unwrap()
        });
        b.output(y);
        let exec = Executor::new(&b.p, exec::device(DeviceKind::Cpu).unwrap()).unwrap();
        let inputs = [
            ("x".to_string(), host_f32(&[2, 0, 20, 20], &[])),
            (
                "w".to_string(),
                host_f32(&[3, 0, k as usize, k as usize], &[]),
            ),
            ("bias".to_string(), host_f32(&[3], &[0.5, -1.0, 2.0])),
        ];
        let got = exec.run(&inputs).unwrap()[0].1.to_f64();
        let n = (o * o) as usize;
        assert_eq!(got.len(), 2 * 3 * n);
        for (i, v) in got.iter().enumerate() {
            assert_eq!(*v, [0.5, -1.0, 2.0][(i / n) % 3], "{k}x{k} at {i}");
        }
    }
}

/// A convolution of an empty batch is empty, on each path a shape picks
/// (pixel rows over a 7x7 plane, direct over 20x20, pointwise, strided
/// 1x1): no panel of rows, no kernel call, no error.
#[test]
fn convolutions_of_an_empty_batch_are_empty() {
    use common::build::*;
    use pt2kit::ir::{Argument, InputKind};
    for (hw, k, s) in [(7i64, 3i64, 1i64), (20, 3, 1), (7, 1, 1), (14, 1, 2)] {
        let (c, co) = (16i64, 32i64);
        let o = (hw + 2 * (k / 2) - k) / s + 1;
        let mut b = B::new();
        let x = b.input("x", InputKind::UserInput, meta(&[0, c, hw, hw]), None);
        let w = b.input("w", InputKind::UserInput, meta(&[co, c, k, k]), None);
        let y = b.emit(|em| {
            let mut args = conv2d_args(x, w);
            args[3] = ("stride", Argument::Ints(vec![s, s]));
            args[4] = ("padding", Argument::Ints(vec![k / 2, k / 2]));
            em.op("aten.convolution.default", args, meta(&[0, co, o, o]))
                .unwrap()
        });
        b.output(y);
        let exec = Executor::new(&b.p, exec::device(DeviceKind::Cpu).unwrap()).unwrap();
        let (c, co, hw, k) = (c as usize, co as usize, hw as usize, k as usize);
        let inputs = [
            ("x".to_string(), host_f32(&[0, c, hw, hw], &[])),
            (
                "w".to_string(),
                host_f32(&[co, c, k, k], &vec![0.5; co * c * k * k]),
            ),
        ];
        let got = exec.run(&inputs).unwrap();
        assert_eq!(got[0].1.to_f64().len(), 0, "{hw}x{hw} k{k} s{s}");
    }
}

/// 2-D convolutions of random geometry (batch, channels, sizes, kernel,
/// stride, padding, dilation per dim, with a bias or not; the shapes that
/// take the direct kernel (one in three of stride 1: in place), the packed
/// one and im2col alike; one in three depthwise, half of them with "same"
/// padding (read under masks, or sixteen channels at a time in a padded
/// grid for 5x5 kernels), the others in that grid) against a float64
/// reference.
#[test]
fn convolutions_of_random_geometry_match_a_reference() {
    let mut next = common::draws(0x2545_f491_u64);
    let mut done = 0;
    while done < 120 {
        // one in three depthwise (a group a channel): 16 to 85 channels,
        // planes from 1x1 to 20x20
        let depthwise = done % 3 == 2;
        let (bn, mut c, mut co) = (1 + next(3), 1 + next(9), 1 + next(20));
        if depthwise {
            c = 16 + next(70);
            // one in four two filters a channel
            co = if next(4) == 0 { 2 * c } else { c };
        }
        // one in five whole panels of 32 output channels from 16 input
        // channels or more (pixels as rows where the output plane is up
        // to 14x14, one product a tap), one in ten of those over more
        // channels than one slice of k
        let pixel_rows = done % 5 == 1 && !depthwise;
        if pixel_rows {
            c = if done % 10 == 1 {
                257 + next(30)
            } else {
                16 + next(48)
            };
            co = 32 * (1 + next(2));
        }
        let groups = if depthwise { c } else { 1 };
        // (depthwise lines up to 40 columns: at a stride of 2 along them,
        // output lines of 12 or more read in place as even and odd columns)
        let (h, w) = (1 + next(20), 1 + next(if depthwise { 40 } else { 20 }));
        let (kh, kw) = (1 + next(5), 1 + next(5));
        // one in three stride 1 (read in place where the output lines
        // fit the input's, each tap's padding lanes masked off)
        let (sh, sw) = if done % 3 == 0 {
            (1, 1)
        } else {
            (1 + next(3), 1 + next(3))
        };
        let (mut kh, mut kw, mut sh, mut sw) = (kh, kw, sh, sw);
        let (mut ph, mut pw) = (next(3), next(3));
        if done % 7 == 3 && !depthwise {
            // a 1x1 with a stride (ResNet's downsampling): its pixels
            // subsampled, then a pointwise product
            (kh, kw, ph, pw) = (1, 1, 0, 0);
            (sh, sw) = (2 + next(2), 2 + next(2));
        }
        let (dh, dw) = (1 + next(2), 1 + next(2));
        if depthwise && next(2) == 0 {
            // "same" padding (MobileNet's): each plane read in place
            // under masks at stride 1, its stride phases otherwise
            (kh, kw) = (1 + 2 * next(3), 1 + 2 * next(3));
            (ph, pw) = ((kh - 1) / 2 * dh, (kw - 1) / 2 * dw);
        }
        let span = |n: usize, p: usize, d: usize, k: usize, s: usize| {
            (n + 2 * p).checked_sub(d * (k - 1) + 1).map(|v| v / s + 1)
        };
        // (a window wider than the padded input: no output, drawn again)
        if span(h, ph, dh, kh, sh).is_none() || span(w, pw, dw, kw, sw).is_none() {
            continue;
        }
        let with_bias = next(2) == 1;
        conv2d_matches_a_reference(Conv2d {
            x: [bn, c, h, w],
            co,
            kernel: [kh, kw],
            stride: [sh, sw],
            pad: [ph, pw],
            dil: [dh, dw],
            groups,
            with_bias,
        });
        done += 1;
    }
}

/// Stride-2 convolutions whose padded, stride-phased copy of the input
/// is made in bands of rows split between the threads (a stem over three
/// colours, a 7x7 one over a plane of odd sizes, a batch of two with a
/// dilation) against a float64 reference.
#[test]
fn convolutions_over_a_grid_made_in_bands_match_a_reference() {
    for (x, co, k, pad, dil) in [
        ([1, 3, 96, 96], 16, 3, 1, 1),
        ([1, 3, 97, 95], 16, 7, 3, 1),
        ([2, 5, 61, 64], 24, 3, 2, 2),
    ] {
        conv2d_matches_a_reference(Conv2d {
            x,
            co,
            kernel: [k, k],
            stride: [2, 2],
            pad: [pad, pad],
            dil: [dil, dil],
            groups: 1,
            with_bias: true,
        });
    }
}

/// Pointwise convolutions over small planes from many channels (the
/// pixels as rows, the image packed first: 7x7 from 2048 channels as in
/// ResNet-50, a 5x6 plane from 300, a batch of three) and from few (read
/// in place), with and without a bias, against a float64 reference; then
/// depthwise convolutions of three geometries in turn and the first again
/// (each thread's padded grid kept between calls, cleared where the
/// geometry changes).
#[test]
fn pointwise_over_small_planes_and_depthwise_in_turn_match_a_reference() {
    // (batch, c, co, h, w, kernel, pad, groups, bias)
    let cases = [
        (
            1usize, 2048usize, 64usize, 7usize, 7usize, 1usize, 0usize, 1usize, true,
        ),
        (3, 300, 40, 5, 6, 1, 0, 1, false),
        (2, 96, 48, 7, 7, 1, 0, 1, true),
        (1, 48, 48, 14, 14, 5, 2, 48, true),
        (2, 40, 40, 9, 11, 3, 1, 40, false),
        (1, 72, 72, 28, 28, 3, 1, 72, true),
        (1, 48, 48, 14, 14, 5, 2, 48, false),
    ];
    for (bn, c, co, h, w, k, p, groups, with_bias) in cases {
        conv2d_matches_a_reference(Conv2d {
            x: [bn, c, h, w],
            co,
            kernel: [k, k],
            stride: [1, 1],
            pad: [p, p],
            dil: [1, 1],
            groups,
            with_bias,
        });
    }
}

/// A 2-D convolution's geometry for [`conv2d_matches_a_reference`].
struct Conv2d {
    x: [usize; 4],
    co: usize,
    kernel: [usize; 2],
    stride: [usize; 2],
    pad: [usize; 2],
    dil: [usize; 2],
    groups: usize,
    with_bias: bool,
}

/// `ir-run`'s convolution of this geometry (inputs of a fixed pattern in
/// [-1, 1]) against a float64 reference, element by element (within
/// 1e-4 relative).
fn conv2d_matches_a_reference(g: Conv2d) {
    use common::build::*;
    use pt2kit::ir::{Argument, InputKind};
    let Conv2d {
        x: [bn, c, h, w],
        co,
        kernel: [kh, kw],
        stride: [sh, sw],
        pad: [ph, pw],
        dil: [dh, dw],
        groups,
        with_bias,
    } = g;
    let span =
        |n: usize, p: usize, d: usize, k: usize, s: usize| (n + 2 * p - d * (k - 1) - 1) / s + 1;
    let (oh, ow) = (span(h, ph, dh, kh, sh), span(w, pw, dw, kw, sw));
    let cpg = c / groups;
    let vals = |n: usize, s: u64| -> Vec<f32> {
        (0..n)
            .map(|i| (((i as u64 * 7919 + s * 104729) % 2001) as f32 / 1000.0) - 1.0)
            .collect()
    };
    let (xv, wv, bv) = (
        vals(bn * c * h * w, 1),
        vals(co * cpg * kh * kw, 2),
        vals(co, 3),
    );
    let i64s = |v: &[usize]| v.iter().map(|&d| d as i64).collect::<Vec<_>>();
    let mut b = B::new();
    let x = b.input("x", InputKind::UserInput, meta(&i64s(&[bn, c, h, w])), None);
    let wt = b.input(
        "w",
        InputKind::UserInput,
        meta(&i64s(&[co, cpg, kh, kw])),
        None,
    );
    let bias = b.input("b", InputKind::UserInput, meta(&[co as i64]), None);
    let y = b.emit(|em| {
        let mut args = conv2d_args(x, wt);
        let two = |a: usize, b: usize| Argument::Ints(vec![a as i64, b as i64]);
        args[2] = ("bias", if with_bias { t(bias) } else { Argument::None });
        args[3] = ("stride", two(sh, sw));
        args[4] = ("padding", two(ph, pw));
        args[5] = ("dilation", two(dh, dw));
        args[8] = ("groups", Argument::Int(groups as i64));
        em.op(
            "aten.convolution.default",
            args,
            meta(&i64s(&[bn, co, oh, ow])),
        )
        .unwrap()
    });
    b.output(y);
    let exec = Executor::new(&b.p, exec::device(DeviceKind::Cpu).unwrap()).unwrap();
    let inputs = [
        ("x".to_string(), host_f32(&[bn, c, h, w], &xv)),
        ("w".to_string(), host_f32(&[co, cpg, kh, kw], &wv)),
        ("b".to_string(), host_f32(&[co], &bv)),
    ];
    let got = exec.run(&inputs).unwrap()[0].1.to_f64();
    let geometry = format!("x [{bn}, {c}, {h}, {w}] w [{co}, {cpg}, {kh}, {kw}] groups {groups} stride ({sh}, {sw}) pad ({ph}, {pw}) dil ({dh}, {dw}) bias {with_bias}");
    assert_eq!(got.len(), bn * co * oh * ow, "{geometry}");
    for n in 0..bn {
        for o in 0..co {
            // the channels of o's group
            let first = o / (co / groups) * cpg;
            for oy in 0..oh {
                for ox in 0..ow {
                    let mut want = if with_bias { bv[o] as f64 } else { 0.0 };
                    for (chl, ch) in (first..first + cpg).enumerate() {
                        for ky in 0..kh {
                            for kx in 0..kw {
                                let iy = (oy * sh + ky * dh) as isize - ph as isize;
                                let ix = (ox * sw + kx * dw) as isize - pw as isize;
                                if iy < 0 || ix < 0 || iy >= h as isize || ix >= w as isize {
                                    continue;
                                }
                                let xi = ((n * c + ch) * h + iy as usize) * w + ix as usize;
                                let wi = ((o * cpg + chl) * kh + ky) * kw + kx;
                                want += xv[xi] as f64 * wv[wi] as f64;
                            }
                        }
                    }
                    let g = got[((n * co + o) * oh + oy) * ow + ox];
                    assert!(
                        (g - want).abs() <= 1e-4 * (1.0 + want.abs()),
                        "{geometry}: ({n}, {o}, {oy}, {ox}) {g} against {want}"
                    );
                }
            }
        }
    }
}

/// A view of a batch of transposed matrices (attention's keys: permuted,
/// then viewed with the batch and heads merged) is made contiguous by
/// blocked transposes: the values are the permutation's, element by
/// element, at sizes that fill no 8x8 block evenly.
#[test]
fn views_of_transposed_batches_keep_their_values() {
    use common::build::*;
    use pt2kit::ir::{Argument, InputKind};
    let (b_, n, m0, m1) = (3usize, 13usize, 5usize, 4usize);
    let mut b = B::new();
    let x = b.input(
        "x",
        InputKind::UserInput,
        meta(&[b_ as i64, n as i64, m0 as i64, m1 as i64]),
        None,
    );
    let y = b.emit(|em| {
        let p = em
            .op(
                "aten.permute.default",
                vec![("self", t(x)), ("dims", Argument::Ints(vec![0, 2, 3, 1]))],
                meta(&[b_ as i64, m0 as i64, m1 as i64, n as i64]),
            )
            .unwrap();
        em.op(
            "aten.view.default",
            vec![
                ("self", t(p)),
                (
                    "size",
                    Argument::Ints(vec![(b_ * m0) as i64, m1 as i64, n as i64]),
                ),
            ],
            meta(&[(b_ * m0) as i64, m1 as i64, n as i64]),
        )
        .unwrap()
    });
    b.output(y);
    let exec = Executor::new(&b.p, exec::device(DeviceKind::Cpu).unwrap()).unwrap();
    let xv: Vec<f32> = (0..b_ * n * m0 * m1).map(|i| i as f32).collect();
    let inputs = [("x".to_string(), host_f32(&[b_, n, m0, m1], &xv))];
    let out = exec.run(&inputs).unwrap();
    assert_eq!(out[0].1.shape, vec![b_ * m0, m1, n]);
    let got = out[0].1.to_f64();
    for bi in 0..b_ {
        for i in 0..m0 {
            for j in 0..m1 {
                for tt in 0..n {
                    let want = xv[((bi * n + tt) * m0 + i) * m1 + j] as f64;
                    assert_eq!(
                        got[((bi * m0 + i) * m1 + j) * n + tt],
                        want,
                        "({bi}, {i}, {j}, {tt})"
                    );
                }
            }
        }
    }
}

/// Views of permuted tensors to random shapes (dims split, merged, of one
/// element added: some a view of the strides, some needing a copy), then
/// a product by a number (which reads the view's layout): the values of
/// the row-major reshape of the permuted values, element by element.
#[test]
fn views_of_permuted_tensors_of_random_shapes_keep_their_values() {
    use common::build::*;
    use pt2kit::ir::{Argument, InputKind};
    let mut next = common::draws(0x9e37_79b9_u64);
    for case in 0..60 {
        let rank = 2 + next(3);
        let dims: Vec<usize> = (0..rank).map(|_| [1, 2, 3, 4, 6][next(5)]).collect();
        let mut perm: Vec<usize> = (0..rank).collect();
        for i in (1..rank).rev() {
            perm.swap(i, next(i as u64 + 1));
        }
        let pdims: Vec<usize> = perm.iter().map(|&i| dims[i]).collect();
        // the new shape: the permuted dims' prime factors in order,
        // grouped at random, with a dim of one now and then
        let mut factors = Vec::new();
        for &d in &pdims {
            let mut d = d;
            for f in [2, 3] {
                while d % f == 0 {
                    factors.push(f);
                    d /= f;
                }
            }
        }
        let mut shape: Vec<usize> = Vec::new();
        for f in factors {
            match shape.last_mut() {
                Some(l) if next(2) == 0 => *l *= f,
                _ => shape.push(f),
            }
            if next(5) == 0 {
                shape.push(1);
            }
        }
        if shape.is_empty() {
            shape.push(1);
        }
        let n: usize = dims.iter().product();
        let i64s = |v: &[usize]| v.iter().map(|&d| d as i64).collect::<Vec<_>>();
        let mut b = B::new();
        let x = b.input("x", InputKind::UserInput, meta(&i64s(&dims)), None);
        let y = b.emit(|em| {
            let p = em
                .op(
                    "aten.permute.default",
                    vec![("self", t(x)), ("dims", Argument::Ints(i64s(&perm)))],
                    meta(&i64s(&pdims)),
                )
                .unwrap();
            let v = em
                .op(
                    "aten.view.default",
                    vec![("self", t(p)), ("size", Argument::Ints(i64s(&shape)))],
                    meta(&i64s(&shape)),
                )
                .unwrap();
            em.op(
                "aten.mul.Scalar",
                vec![("self", t(v)), ("other", Argument::Float(2.0))],
                meta(&i64s(&shape)),
            )
            .unwrap()
        });
        b.output(y);
        let exec = Executor::new(&b.p, exec::device(DeviceKind::Cpu).unwrap()).unwrap();
        let xv: Vec<f32> = (0..n).map(|i| i as f32).collect();
        let out = exec
            .run(&[("x".to_string(), host_f32(&dims, &xv))])
            .unwrap();
        assert_eq!(out[0].1.shape, shape, "case {case}");
        let got = out[0].1.to_f64();
        // the permuted tensor's values in row-major order
        let mut idx = vec![0usize; rank];
        for g in &got {
            let mut at = 0;
            for d in 0..rank {
                let stride: usize = dims[perm[d] + 1..].iter().product();
                at += idx[d] * stride;
            }
            assert_eq!(
                *g,
                2.0 * xv[at] as f64,
                "case {case}: x {dims:?} permuted {perm:?} viewed as {shape:?}"
            );
            // the next index of the permuted tensor
            for d in (0..rank).rev() {
                idx[d] += 1;
                if idx[d] < pdims[d] {
                    break;
                }
                idx[d] = 0;
            }
        }
    }
}

/// `sum.dim_IntList` and `mean.dim` over random dims of random 4-D
/// tensors (up to 150 thousand elements: trailing dims of a large one are
/// summed row by row on the threads), kept or dropped, against a float64
/// reference.
#[test]
fn sums_and_means_over_random_dims_match_a_reference() {
    use common::build::*;
    use pt2kit::ir::{Argument, InputKind};
    let mut next = common::draws(0x51ed_270b_u64);
    for case in 0..40 {
        let dims: Vec<usize> = (0..4).map(|_| 1 + next(24)).collect();
        let n: usize = dims.iter().product();
        // half the cases the trailing dims (a global pool), else any
        let reduce: Vec<usize> = if case % 2 == 0 {
            let from = 1 + next(3);
            (from..4).collect()
        } else {
            (0..4).filter(|_| next(2) == 0).collect::<Vec<_>>()
        };
        if reduce.is_empty() {
            continue;
        }
        let (mean, keep) = (next(2) == 0, next(2) == 0);
        let i64s = |v: &[usize]| v.iter().map(|&d| d as i64).collect::<Vec<_>>();
        let shape: Vec<usize> = (0..4)
            .filter_map(|d| match (reduce.contains(&d), keep) {
                (true, true) => Some(1),
                (true, false) => None,
                _ => Some(dims[d]),
            })
            .collect();
        let mut b = B::new();
        let x = b.input("x", InputKind::UserInput, meta(&i64s(&dims)), None);
        let y = b.emit(|em| {
            em.op(
                if mean {
                    "aten.mean.dim"
                } else {
                    "aten.sum.dim_IntList"
                },
                vec![
                    ("self", t(x)),
                    ("dim", Argument::Ints(i64s(&reduce))),
                    ("keepdim", Argument::Bool(keep)),
                ],
                meta(&i64s(&shape)),
            )
            .unwrap()
        });
        b.output(y);
        let exec = Executor::new(&b.p, exec::device(DeviceKind::Cpu).unwrap()).unwrap();
        let xv: Vec<f32> = (0..n)
            .map(|i| ((i * 7919 % 2003) as f32 / 1000.0) - 1.0)
            .collect();
        let out = exec
            .run(&[("x".to_string(), host_f32(&dims, &xv))])
            .unwrap();
        let what = format!(
            "case {case}: {} of {dims:?} over {reduce:?} keepdim {keep}",
            if mean { "mean" } else { "sum" }
        );
        assert_eq!(out[0].1.shape, shape, "{what}");
        let got = out[0].1.to_f64();
        let mut want = vec![0f64; got.len()];
        let count: usize = reduce.iter().map(|&d| dims[d]).product();
        for (i, v) in xv.iter().enumerate() {
            let mut rest = i;
            let mut idx = [0usize; 4];
            for d in (0..4).rev() {
                idx[d] = rest % dims[d];
                rest /= dims[d];
            }
            let at = (0..4)
                .filter(|d| !reduce.contains(d))
                .fold(0, |a, d| a * dims[d] + idx[d]);
            want[at] += *v as f64 / if mean { count as f64 } else { 1.0 };
        }
        for (g, w) in got.iter().zip(&want) {
            assert!(
                (g - w).abs() <= 1e-5 * count as f64 + 1e-5,
                "{what}: {g} against {w}"
            );
        }
    }
}

/// A stride-2 convolution whose copied grid is big enough to be made
/// image by image, with a fused residual add and relu (the epilogue's
/// input read at each image's offset): fused and plain runs give the same
/// bits, and both match a float64 reference.
#[test]
fn a_strided_convolution_image_by_image_with_a_residual_matches_a_reference() {
    use common::build::*;
    use pt2kit::ir::{Argument, InputKind};
    let (bn, c, hw, co, o) = (3usize, 48usize, 40usize, 8usize, 20usize);
    let mut b = B::new();
    let x = b.input(
        "x",
        InputKind::UserInput,
        meta(&[bn as i64, c as i64, hw as i64, hw as i64]),
        None,
    );
    let w = b.input(
        "w",
        InputKind::UserInput,
        meta(&[co as i64, c as i64, 3, 3]),
        None,
    );
    let r = b.input(
        "r",
        InputKind::UserInput,
        meta(&[bn as i64, co as i64, o as i64, o as i64]),
        None,
    );
    let out_shape = [bn as i64, co as i64, o as i64, o as i64];
    let y = b.emit(|em| {
        let mut args = conv2d_args(x, w);
        args[3] = ("stride", Argument::Ints(vec![2, 2]));
        args[4] = ("padding", Argument::Ints(vec![1, 1]));
        let y = em
            .op("aten.convolution.default", args, meta(&out_shape))
            .unwrap();
        let s = em
            .op(
                "aten.add.Tensor",
                vec![("self", t(y)), ("other", t(r))],
                meta(&out_shape),
            )
            .unwrap();
        em.op("aten.relu.default", vec![("self", t(s))], meta(&out_shape))
            .unwrap()
    });
    b.output(y);
    let vals = common::spread;
    let (xv, wv, rv) = (
        vals(bn * c * hw * hw, 1),
        vals(co * c * 9, 2),
        vals(bn * co * o * o, 3),
    );
    let inputs = [
        ("x".to_string(), host_f32(&[bn, c, hw, hw], &xv)),
        ("w".to_string(), host_f32(&[co, c, 3, 3], &wv)),
        ("r".to_string(), host_f32(&[bn, co, o, o], &rv)),
    ];
    let (fused, plain) = fused_and_plain(&b.p);
    assert_eq!(fused.fused_groups().len(), 1, "{:?}", fused.fused_groups());
    let got = fused.run(&inputs).unwrap()[0].1.to_f64();
    let want_bits = plain.run(&inputs).unwrap()[0].1.to_f64();
    assert!(
        got == want_bits,
        "a fused run differs from the nodes run one by one"
    );
    for n in 0..bn {
        for oc in 0..co {
            for oy in 0..o {
                for ox in 0..o {
                    let mut acc = 0f64;
                    for ch in 0..c {
                        for ky in 0..3 {
                            for kx in 0..3 {
                                let (iy, ix) =
                                    ((oy * 2 + ky) as isize - 1, (ox * 2 + kx) as isize - 1);
                                if iy < 0 || ix < 0 || iy >= hw as isize || ix >= hw as isize {
                                    continue;
                                }
                                acc += xv[((n * c + ch) * hw + iy as usize) * hw + ix as usize]
                                    as f64
                                    * wv[((oc * c + ch) * 3 + ky) * 3 + kx] as f64;
                            }
                        }
                    }
                    let at = ((n * co + oc) * o + oy) * o + ox;
                    let want = (acc + rv[at] as f64).max(0.0);
                    assert!(
                        (got[at] - want).abs() < 1e-4,
                        "image {n} channel {oc} ({oy}, {ox}): {} against {want}",
                        got[at]
                    );
                }
            }
        }
    }
}

/// A depthwise convolution whose weight is a permuted view (`[kh, kw, 1,
/// c]` permuted to `[c, 1, kh, kw]`, as a graph that keeps its filters
/// channels last has it): the kernels that read the weight in place get
/// it contiguous; against a float64 reference.
#[test]
fn a_depthwise_convolution_of_a_permuted_weight_matches_a_reference() {
    use common::build::*;
    use pt2kit::ir::{Argument, InputKind};
    let (bn, c, hw, k) = (2usize, 24usize, 9usize, 3usize);
    let i64s = |v: &[usize]| v.iter().map(|&d| d as i64).collect::<Vec<_>>();
    let mut b = B::new();
    let x = b.input(
        "x",
        InputKind::UserInput,
        meta(&i64s(&[bn, c, hw, hw])),
        None,
    );
    let w0 = b.input("w", InputKind::UserInput, meta(&i64s(&[k, k, 1, c])), None);
    let y = b.emit(|em| {
        let w = em
            .op(
                "aten.permute.default",
                vec![("self", t(w0)), ("dims", Argument::Ints(vec![3, 2, 0, 1]))],
                meta(&i64s(&[c, 1, k, k])),
            )
            .unwrap();
        let mut args = conv2d_args(x, w);
        args[4] = ("padding", Argument::Ints(vec![1, 1]));
        args[8] = ("groups", Argument::Int(c as i64));
        em.op(
            "aten.convolution.default",
            args,
            meta(&i64s(&[bn, c, hw, hw])),
        )
        .unwrap()
    });
    b.output(y);
    let (xv, wv) = (
        common::spread(bn * c * hw * hw, 1),
        common::spread(k * k * c, 2),
    );
    let exec = Executor::new(&b.p, exec::device(DeviceKind::Cpu).unwrap()).unwrap();
    let got = exec
        .run(&[
            ("x".to_string(), host_f32(&[bn, c, hw, hw], &xv)),
            ("w".to_string(), host_f32(&[k, k, 1, c], &wv)),
        ])
        .unwrap()[0]
        .1
        .to_f64();
    for n in 0..bn {
        for ch in 0..c {
            for oy in 0..hw {
                for ox in 0..hw {
                    let mut want = 0f64;
                    for ky in 0..k {
                        for kx in 0..k {
                            let (iy, ix) = ((oy + ky) as isize - 1, (ox + kx) as isize - 1);
                            if iy < 0 || ix < 0 || iy >= hw as isize || ix >= hw as isize {
                                continue;
                            }
                            // w[ch][0][ky][kx] is w0[ky][kx][0][ch]
                            want += xv[((n * c + ch) * hw + iy as usize) * hw + ix as usize] as f64
                                * wv[(ky * k + kx) * c + ch] as f64;
                        }
                    }
                    let g = got[((n * c + ch) * hw + oy) * hw + ox];
                    assert!(
                        (g - want).abs() < 1e-5,
                        "image {n} channel {ch} ({oy}, {ox}): {g} against {want}"
                    );
                }
            }
        }
    }
}

/// Stateful programs (golden/state, `recipes/fixtures/state_cases.py`: KV caches in
/// buffers, running statistics, a training batch norm, an updated user
/// input) called step by step, as exported and after `ir-decompose`, in
/// both dialects: each step's user outputs, and the state after it
/// ([`Executor::last_state`], carried into the next step with
/// [`Executor::carry_state`]), match torch's module called as many times.
#[test]
fn state_fixtures_carry_state_step_by_step() {
    let mut failures = Vec::new();
    let mut steps_run = 0;
    let dir = repo().join("golden/state");
    for p in archives_in("golden/state") {
        let name = stem(&p);
        let base = name.trim_end_matches(".decomp");
        let meta: serde_json::Value = serde_json::from_str(
            &std::fs::read_to_string(dir.join(format!("{base}.meta.json"))).unwrap(),
        )
        .unwrap();
        let steps = meta["steps"].as_u64().unwrap();
        let state: Vec<String> = meta["state"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s.as_str().unwrap().to_string())
            .collect();
        for lowered in [false, true] {
            let mut program = read(&p);
            if lowered {
                pt2kit::decompose::lower(&mut program, &Default::default()).unwrap();
            }
            let what = format!("{name}{}", if lowered { " (decomposed)" } else { "" });
            let e = Executor::new(&program, exec::device(DeviceKind::Cpu).unwrap()).unwrap();
            assert_eq!(e.state_names(), state, "{what}: state names");
            let mut carried: Vec<(String, pt2kit::tensorfile::HostTensor)> = Vec::new();
            for k in 0..steps {
                let file = |what: &str| dir.join(format!("{base}.step{k}.{what}.npz"));
                let mut inputs = pt2kit::tensorfile::read_npz(&file("inputs")).unwrap();
                // an updated user input comes back as the next step's input
                for (n, t) in &carried {
                    if let Some(slot) = inputs.iter_mut().find(|(i, _)| i == n) {
                        slot.1 = t.clone();
                    }
                }
                let outs = e.run(&inputs).unwrap();
                let expected = pt2kit::tensorfile::read_npz(&file("expected")).unwrap();
                failures.extend(compare(&format!("{what} step {k}"), &outs, &expected));
                let now = e.last_state().unwrap();
                let want = pt2kit::tensorfile::read_npz(&file("state")).unwrap();
                let names: Vec<&String> = now.iter().map(|(n, _)| n).collect();
                let want_names: Vec<&String> = want.iter().map(|(n, _)| n).collect();
                assert_eq!(names, want_names, "{what} step {k}: state names");
                failures.extend(compare(&format!("{what} step {k} state"), &now, &want));
                e.carry_state().unwrap();
                carried = now;
                steps_run += 1;
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert!(steps_run >= 40, "only {steps_run} steps");
}
