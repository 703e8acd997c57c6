//! `ir-decompose` against PyTorch: every committed fixture, lowered from
//! both dialects, uses only core ATen ops, still matches the outputs torch
//! recorded, and has the op histogram of torch's own `run_decompositions()`
//! (recorded in each fixture's meta.json) up to the listed differences.

#![cfg(feature = "exec")]

mod common;

use std::collections::BTreeMap;
use std::path::Path;

use common::*;
use pt2kit::decompose::{self, Policy};
use pt2kit::ir::Program;
use pt2kit::{text, wire};

/// Lowers with the default policy and passes, then round-trips the result
/// through the IR stream (what the next tool in a pipeline reads).
fn lower(program: &mut Program, pass_names: &[&str]) -> decompose::Report {
    let mut report = decompose::lower(program, &Policy::default()).unwrap();
    let names: Vec<String> = pass_names.iter().map(|s| s.to_string()).collect();
    report.passes = pt2kit::exec::fold::run(program, &names).unwrap();
    pt2kit::ir::validate::validate(program).unwrap();
    let bytes = wire::encode_program(program).unwrap();
    *program = wire::read_program(&mut bytes.as_slice(), "lowered").unwrap();
    report
}

/// The archives of a folder, sorted.
fn archives_in(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut v: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "pt2"))
        .collect();
    v.sort();
    v
}

fn all_passes() -> Vec<&'static str> {
    pt2kit::decompose::passes::defaults(pt2kit::exec::fold::passes())
        .iter()
        .map(|(n, _, _)| *n)
        .collect()
}

fn check_fixture(pt2: &Path, failures: &mut Vec<String>) -> usize {
    let name = stem(pt2);
    let mut program = read(pt2);
    let report = lower(&mut program, &all_passes());
    for (op, nodes) in &report.not_core {
        failures.push(format!(
            "{name}: {op} is not core (nodes {})",
            nodes.join(", ")
        ));
    }
    let (runs, f) = run_against_torch(&name, pt2, &program);
    failures.extend(f);
    runs
}

#[test]
fn every_fixture_lowers_to_core_and_matches_torch() {
    let mut failures = Vec::new();
    let mut runs = 0;
    for p in model_fixtures() {
        runs += check_fixture(&p, &mut failures);
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert!(runs >= 28, "only {runs} runs");
}

/// One module per family of composite ops (activations, shape ops,
/// norms, ...; `recipes/fixtures/zoo.py`, group "composite"), both dialects: only
/// their lowered graphs must run (torch's own lowering, `.decomp.pt2`,
/// keeps a few non-core ops that ir-decompose then lowers).
#[test]
fn composite_op_fixtures_lower_to_core_and_match_torch() {
    let (runs, failures) = check_dir("golden/composite");
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert!(runs >= 10, "only {runs} runs");
}

/// The mixture-of-experts fixtures (`recipes/fixtures/zoo.py`, group "moe"), both
/// dialects, lowered to core ATen (`transformers.grouped_mm_fallback`,
/// not an `aten` op, is kept) and run against torch's outputs.
#[test]
fn moe_fixtures_lower_to_core_and_match_torch() {
    let (runs, failures) = check_dir("golden/moe");
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert!(runs >= 6, "only {runs} runs");
}

/// Every archive of a fixture folder, lowered to core ATen and run
/// against torch's outputs: (runs, failures).
fn check_dir(dir: &str) -> (usize, Vec<String>) {
    let mut failures = Vec::new();
    let mut runs = 0;
    let mut archives: Vec<_> = std::fs::read_dir(repo().join(dir))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "pt2"))
        .collect();
    archives.sort();
    for p in &archives {
        runs += check_fixture(p, &mut failures);
    }
    (runs, failures)
}

/// The higher-order-op fixtures (group "hop"), both dialects, lowered to
/// core ATen and run against torch's outputs: autocast regions inlined
/// with their casts, associative_scan as a `scan` (kept, as torch keeps
/// control flow), vmap regions unrolled.
#[test]
fn hop_fixtures_lower_to_core_and_match_torch() {
    let (runs, failures) = check_dir("golden/hop");
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert!(runs >= 22, "only {runs} runs");
}

/// torchvision's detection ops (group "vision") are not ATen ops:
/// ir-decompose keeps them (and lowers the ATen ops around them, such as
/// MultiScaleRoIAlign's `where(condition)`); the result still runs.
#[test]
fn vision_fixtures_lower_and_match_torch() {
    let (runs, failures) = check_dir("golden/vision");
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert!(runs >= 14, "only {runs} runs");
}

/// The long-tail fixtures (`recipes/fixtures/zoo.py`, group "tail"), both
/// dialects, lowered to core ATen and run against torch's outputs.
/// `upsample_bicubic2d` has no rule: it stays (not core; both back ends
/// have a row for it), the rest is core.
#[test]
fn tail_fixtures_lower_to_core_and_match_torch() {
    let (runs, mut failures) = check_dir("golden/tail");
    failures.retain(|f| !f.contains(": aten.upsample_bicubic2d.vec is not core"));
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert!(runs >= 18, "only {runs} runs");
}

#[test]
#[ignore = "needs golden/big (make big); run by make test-big"]
fn big_models_lower_to_core_and_match_torch() {
    let mut failures = Vec::new();
    for p in big_fixtures() {
        check_fixture(&p, &mut failures);
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

fn meta_histogram(meta: &serde_json::Value, key: &str) -> BTreeMap<String, i64> {
    meta[key]
        .as_object()
        .map(|o| {
            o.iter()
                .map(|(k, v)| (k.clone(), v.as_i64().unwrap_or(0)))
                .collect()
        })
        .unwrap_or_default()
}

/// Per op where ours and torch's differ: `model op ours torch`.
fn histogram_differences(models: &[(std::path::PathBuf, String)]) -> String {
    let mut out = String::new();
    for (dir, model) in models {
        let meta: serde_json::Value = serde_json::from_str(
            &std::fs::read_to_string(dir.join(format!("{model}.meta.json"))).unwrap(),
        )
        .unwrap();
        let torch = meta_histogram(&meta, "ops_decomp");
        let mut program = read(&dir.join(format!("{model}.pt2")));
        // torch's run_decompositions() eliminates dead code and nothing else.
        lower(&mut program, &["dce"]);
        let ours: BTreeMap<String, i64> = decompose::histogram(&program)
            .into_iter()
            .map(|(k, v)| (k, v as i64))
            .collect();
        let mut ops: Vec<&String> = torch.keys().chain(ours.keys()).collect();
        ops.sort();
        ops.dedup();
        for op in ops {
            let (a, b) = (
                ours.get(op).copied().unwrap_or(0),
                torch.get(op).copied().unwrap_or(0),
            );
            if a != b {
                out.push_str(&format!("{model} {op} {a} {b}\n"));
            }
        }
    }
    out
}

/// The histogram differences are a reviewed golden file; docs/coverage.md
/// lists each with its reason.
#[test]
fn histograms_match_torch_run_decompositions() {
    let mut models = Vec::new();
    for dir in ["golden/models", "golden/composite", "golden/moe"] {
        let dir = repo().join(dir);
        for e in std::fs::read_dir(&dir).unwrap() {
            let p = e.unwrap().path();
            let name = p.file_name().unwrap().to_string_lossy().to_string();
            if let Some(model) = name.strip_suffix(".meta.json") {
                models.push((dir.clone(), model.to_string()));
            }
        }
    }
    models.sort_by(|a, b| a.1.cmp(&b.1));
    let diff = format!(
        "# model op ours torch: where ir-decompose's op histogram differs from torch's\n# run_decompositions() (both with dead code removed); reasons in docs/coverage.md\n{}",
        histogram_differences(&models)
    );
    if let Some(e) = check_golden("golden/decompose/histogram_diff.txt", &diff) {
        panic!("{e}");
    }
}

/// Golden listings of lowered fixtures (read once by a person).
#[test]
fn lowered_listings() {
    let mut failures = Vec::new();
    for model in ["mlp", "cnn", "bufconst", "transformer", "dynseq", "cond"] {
        let mut program = read(&repo().join(format!("golden/models/{model}.pt2")));
        lower(&mut program, &all_passes());
        if let Some(e) = check_golden(
            &format!("golden/decompose/{model}.core.txt"),
            &text::listing(&program),
        ) {
            failures.push(e);
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn keep_leaves_chosen_ops_and_only_limits_rules() {
    let mut program = read(&repo().join("golden/models/cnn.pt2"));
    let policy = Policy {
        keep: vec!["aten.conv*".into(), "aten.linear".into()],
        ..Policy::default()
    };
    decompose::lower(&mut program, &policy).unwrap();
    let h = decompose::histogram(&program);
    assert_eq!(h.get("aten.conv2d.default"), Some(&2), "{h:?}");
    assert_eq!(h.get("aten.linear.default"), Some(&1), "{h:?}");
    assert!(
        h.contains_key("aten._native_batch_norm_legit_no_training.default"),
        "{h:?}"
    );
    assert!(decompose::not_core(&program, &policy).is_empty());
    // Without the keep list, the kept ops are reported as not core.
    assert_eq!(decompose::not_core(&program, &Policy::default()).len(), 2);

    let mut program = read(&repo().join("golden/models/cnn.pt2"));
    let only = Policy {
        only: Some(vec!["aten.linear".into()]),
        ..Policy::default()
    };
    decompose::lower(&mut program, &only).unwrap();
    let h = decompose::histogram(&program);
    assert!(
        h.contains_key("aten.addmm.default") && h.contains_key("aten.conv2d.default"),
        "{h:?}"
    );
    assert!(!h.contains_key("aten.linear.default"), "{h:?}");
}

#[test]
fn provenance_and_names_carry_over() {
    let program = read(&repo().join("golden/models/mlp.pt2"));
    let linear = program
        .graph
        .nodes
        .iter()
        .find(|n| n.target.name == "linear")
        .unwrap()
        .clone();
    let mut lowered = program.clone();
    decompose::lower(&mut lowered, &Policy::default()).unwrap();
    let replaced: Vec<_> = lowered
        .graph
        .nodes
        .iter()
        .filter(|n| {
            n.meta.stack_trace == linear.meta.stack_trace
                && n.meta.module_stack == linear.meta.module_stack
        })
        .collect();
    assert!(
        replaced.len() >= 2,
        "the permute and addmm carry the linear's stack trace and module"
    );
    assert!(linear.meta.stack_trace.is_some());
    // The result keeps the replaced node's output name, so outputs keep theirs.
    assert_eq!(
        lowered
            .graph
            .value(match &lowered.graph.outputs[0] {
                pt2kit::ir::Argument::Tensor(v) => *v,
                _ => unreachable!(),
            })
            .name,
        "linear_1"
    );
}

#[test]
fn symbolic_shapes_and_ranges_survive() {
    let program = read(&repo().join("golden/models/dynseq.pt2"));
    let mut lowered = program.clone();
    decompose::lower(&mut lowered, &Policy::default()).unwrap();
    assert_eq!(lowered.range_constraints, program.range_constraints);
    // The 3-D linear folds its batch with sym_size and a symbolic product.
    let h = decompose::histogram(&lowered);
    assert!(
        h.contains_key("aten.sym_size.int") && h.contains_key("_operator.mul"),
        "{h:?}"
    );
    let text = text::listing(&lowered);
    assert!(
        text.contains("f32[2*s27, 16]") && text.contains("f32[2, s27, 8]"),
        "symbolic sizes kept in metas:\n{text}"
    );
}

/// A batch norm in training mode (here, the CNN fixture's flipped to
/// training) is functionalised as torch does it: the functional op, and
/// its running statistics as buffer mutation outputs (golden/state checks
/// the numbers against torch).
#[test]
fn training_batch_norm_updates_its_running_stats() {
    let mut program = read(&repo().join("golden/models/cnn.pt2"));
    let mut flipped = 0;
    for n in &mut program.graph.nodes {
        for a in &mut n.inputs {
            if n.target.name == "batch_norm" && a.name == "training" {
                a.arg = pt2kit::ir::Argument::Bool(true);
                flipped += 1;
            }
        }
    }
    assert!(flipped > 0);
    decompose::lower(&mut program, &Policy::default()).unwrap();
    let h = decompose::histogram(&program);
    assert!(
        h.contains_key("aten._native_batch_norm_legit_functional.default"),
        "{h:?}"
    );
    let state: Vec<&str> = program
        .output_kinds
        .iter()
        .filter_map(|k| k.state_name())
        .collect();
    assert!(
        state.iter().any(|s| s.ends_with("running_mean"))
            && state.iter().any(|s| s.ends_with("running_var")),
        "{state:?}"
    );
}

/// Every op of torch's own decomposition table (`core_aten_decompositions()`,
/// forward functional ops, `lib/data/torch_decompositions.txt` from
/// `recipes/fixtures/gen_decomp_table.py`) has an answer here: a rewrite in
/// ir-decompose, a core op kept as it is, a row of ir-run or an ir2onnx
/// conversion, or a refusal with its reason (`lib/data/refusals.txt`). The
/// golden report lists each op with its answer.
#[test]
fn coverage_of_torchs_decomposition_table() {
    let text = std::fs::read_to_string(repo().join("lib/data/torch_decompositions.txt")).unwrap();
    let ops: Vec<&str> = text
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .collect();
    let refusals_text = std::fs::read_to_string(repo().join("lib/data/refusals.txt")).unwrap();
    let refusals: Vec<(&str, &str)> = refusals_text
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|l| l.split_once('\t').unwrap_or((l, "")))
        .collect();
    let onnx: std::collections::HashSet<&str> =
        pt2kit::export::onnx::supported_ops().into_iter().collect();
    let (mut rewritten, mut core, mut runs) = (0, 0, Vec::new());
    let mut refused: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    let mut unanswered = Vec::new();
    for op in &ops {
        let target = pt2kit::ir::Target::parse(&format!("torch.ops.{op}")).unwrap();
        if pt2kit::decompose::rules::rule_for(op).is_some() {
            rewritten += 1;
        } else if pt2kit::decompose::is_core(&target) {
            core += 1;
        } else if pt2kit::exec::ops::lookup(op).is_some() || onnx.contains(op) {
            runs.push(format!(
                "- {op}: {}",
                match (pt2kit::exec::ops::lookup(op).is_some(), onnx.contains(op)) {
                    (true, true) => "ir-run row, ir2onnx conversion",
                    (true, false) => "ir-run row",
                    _ => "ir2onnx conversion",
                }
            ));
        } else if let Some((_, why)) = refusals
            .iter()
            .find(|(pat, why)| !why.is_empty() && decompose::glob(pat, op))
        {
            refused.entry(why).or_default().push(op);
        } else {
            unanswered.push(*op);
        }
    }
    assert!(
        unanswered.is_empty(),
        "ops of torch's decomposition table with no rule, row, conversion or reason in lib/data/refusals.txt:\n{}",
        unanswered.join("\n")
    );
    let n_refused: usize = refused.values().map(Vec::len).sum();
    let mut report = format!(
        "# ir-decompose against torch's decomposition table\n\n\
         {} forward functional ops in torch's `core_aten_decompositions()`: {} have a rewrite here, \
         {} are core ops kept as they are, {} run in ir-run or convert in ir2onnx without a rewrite, \
         {} are refused by name (reasons from lib/data/refusals.txt).\n\n## Run or converted without a rewrite\n\n",
        ops.len(),
        rewritten,
        core,
        runs.len(),
        n_refused
    );
    for line in &runs {
        report.push_str(line);
        report.push('\n');
    }
    report.push_str("\n## Refused, by reason\n");
    for (why, list) in &refused {
        report.push_str(&format!("\n{why}:\n\n"));
        for op in list {
            report.push_str(&format!("- {op}\n"));
        }
    }
    assert!(rewritten >= 150, "only {rewritten} rewrites");
    if let Some(e) = check_golden("golden/decompose/coverage.md", &report) {
        panic!("{e}");
    }
}

/// Every op torchvision registers (`lib/data/torchvision_ops.txt`, from
/// `recipes/fixtures/gen_torchvision_ops.py`) runs in ir-run (golden/vision holds
/// them to torch) or is refused with a reason in `lib/data/refusals.txt`.
#[test]
fn every_torchvision_op_has_a_row_or_a_reason() {
    let text = std::fs::read_to_string(repo().join("lib/data/torchvision_ops.txt")).unwrap();
    let refusals_text = std::fs::read_to_string(repo().join("lib/data/refusals.txt")).unwrap();
    let reasons: Vec<(&str, &str)> = refusals_text
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .filter_map(|l| l.split_once('\t'))
        .collect();
    let onnx: std::collections::HashSet<&str> =
        pt2kit::export::onnx::supported_ops().into_iter().collect();
    let (mut run, mut unanswered) = (0, Vec::new());
    for op in text
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
    {
        if pt2kit::exec::ops::lookup(op).is_some() {
            run += 1;
            // (a row with no tensor result needs no conversion)
            assert!(
                onnx.contains(op) || op.contains("_cuda_version"),
                "{op}: an ir-run row but no ir2onnx conversion or refusal"
            );
        } else if !reasons.iter().any(|(p, _)| decompose::glob(p, op)) {
            unanswered.push(op);
        }
    }
    assert!(
        unanswered.is_empty(),
        "no row and no reason: {unanswered:?}"
    );
    assert!(run >= 7, "only {run} torchvision ops run");
}

/// A graph that breaks an op's contract (here a linear whose weight is a
/// vector) is refused with the node named, not a panic.
#[test]
fn malformed_graph_is_an_error_not_a_panic() {
    let mut program = read(&repo().join("golden/models/mlp.pt2"));
    let bias = program.graph.find_value("p_fc1_bias").unwrap();
    let linear = program
        .graph
        .nodes
        .iter_mut()
        .find(|n| n.target.name == "linear")
        .unwrap();
    for a in &mut linear.inputs {
        if a.name == "weight" {
            a.arg = pt2kit::ir::Argument::Tensor(bias);
        }
    }
    let e = decompose::lower(&mut program, &Policy::default()).unwrap_err();
    assert_eq!(e.kind, pt2kit::ErrorKind::BadInput, "{e}");
    assert!(
        e.to_string().contains("node linear (aten.linear.default)"),
        "{e}"
    );
}

/// The dynamic-shape fixtures (group "dynamic") lower to core ATen with
/// their sizes kept symbolic (a -1 view over symbols, split and diff over a
/// symbolic dim, a recurrent layer over a symbolic batch, 1-D upsampling)
/// and match torch at three sizes each.
#[test]
fn dynamic_models_lower_to_core_and_match_torch_at_three_sizes() {
    let dir = repo().join("golden/dynamic");
    let mut failures = Vec::new();
    let mut runs = 0;
    let mut archives: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "pt2"))
        .collect();
    archives.sort();
    for p in &archives {
        runs += check_fixture(p, &mut failures);
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert!(runs >= 30, "only {runs} runs");
}

/// The symbolic-int fixtures (group "symint": an int input, derived dims,
/// a symbolic tril diagonal, causal attention over a dynamic length) lower
/// to core ATen with the SymInt input kept and every size symbolic, and
/// match torch at three sizes each.
#[test]
fn symint_models_lower_to_core_and_match_torch_at_three_sizes() {
    let dir = repo().join("golden/symint");
    let mut failures = Vec::new();
    let mut runs = 0;
    let mut archives: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "pt2"))
        .collect();
    archives.sort();
    for p in &archives {
        runs += check_fixture(p, &mut failures);
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert!(runs >= 30, "only {runs} runs");
}

/// The numerics fixtures (group "numerics": integers past 2^53, int8
/// wrap-around, NaN's order, float16/bfloat16 CNNs, fully masked attention
/// rows, 3-D convolutions) lower to core ATen and still match torch.
#[test]
fn numerics_fixtures_lower_to_core_and_match_torch() {
    let dir = repo().join("golden/numerics");
    let mut failures = Vec::new();
    let mut runs = 0;
    let mut archives: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "pt2"))
        .collect();
    archives.sort();
    for p in &archives {
        runs += check_fixture(p, &mut failures);
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert!(runs >= 16, "only {runs} runs");
}

/// The complex fixtures (group "complex") lower to core ATen, complex
/// values kept where torch's core opset keeps them (`_fft_r2c`, `_fft_c2r`,
/// `_fft_c2c`, `view_as_real`, ...: `decompose::COMPLEX_KEPT`), and still
/// match torch (the back end lowers them to real pairs at load).
#[test]
fn complex_fixtures_lower_to_core_and_match_torch() {
    let mut failures = Vec::new();
    let mut runs = 0;
    for p in archives_in(&repo().join("golden/complex")) {
        runs += check_fixture(&p, &mut failures);
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert!(runs >= 12, "only {runs} runs");
}

/// `--passes complex` lowers the complex values ahead of time: what is
/// left touches a complex value only at a complex input or output
/// (`view_as_real`, `view_as_complex`), torch's FFTs are `pt2kit.dft`
/// nodes, the program survives the wire, and it still matches torch.
#[test]
fn the_complex_pass_leaves_real_pairs_that_match_torch() {
    let mut failures = Vec::new();
    let mut runs = 0;
    let mut dfts = 0;
    for p in archives_in(&repo().join("golden/complex")) {
        let name = stem(&p);
        let mut program = read(&p);
        let mut passes = all_passes();
        passes.push("complex");
        lower(&mut program, &passes);
        if decompose::complex::needs_lowering(&program) {
            failures.push(format!("{name}: complex values left inside"));
        }
        program.graph.visit_nodes(&mut |n| {
            dfts += usize::from(n.target.to_string() == "pt2kit.dft.default");
            if let Some(d) = program.graph.complex_dtype(n) {
                if !decompose::complex::BOUNDARY_OPS.contains(&n.target.to_string().as_str()) {
                    failures.push(format!("{name}: {} on {}", n.target, d.short_name()));
                }
            }
        });
        let (r, f) = run_against_torch(&name, &p, &program);
        runs += r;
        failures.extend(f);
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert!(runs >= 12, "only {runs} runs");
    assert!(dfts >= 20, "only {dfts} pt2kit.dft nodes");
}

/// The PT2E int8 fixtures (group "quant": quantize, dequantize and
/// choose_qparams of quantized_decomposed between float ops) lower to core
/// ATen and still match torch (integers exactly; a dequantized float
/// output within one step of its quantization, as `ir-run` as exported).
#[test]
fn quant_fixtures_lower_to_core_and_match_torch() {
    let dir = repo().join("golden/quant");
    let mut failures = Vec::new();
    let mut runs = 0;
    let mut archives: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "pt2"))
        .collect();
    archives.sort();
    for p in &archives {
        runs += check_fixture(p, &mut failures);
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert!(runs >= 18, "only {runs} runs");
}

/// The outside-model fixtures (group "fallback") lower to core ATen and
/// still match torch.
#[test]
fn outside_models_lower_to_core_and_match_torch() {
    let dir = repo().join("golden/fallback");
    let mut failures = Vec::new();
    let mut runs = 0;
    let mut archives: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "pt2"))
        .collect();
    archives.sort();
    for p in archives.iter().filter(|p| !refused(p)) {
        runs += check_fixture(p, &mut failures);
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert!(runs >= 16, "only {runs} runs");
}
