//! `ir-run` plans a graph as exported as it plans the graph `ir-decompose`
//! makes of it (`exec::lowering`; `--keep` the few ops whose native row is
//! faster): over every model fixture, the nodes the
//! executor runs, its fused chains and epilogues, and the bits of the
//! outputs are the same either way, both match torch, and the outputs keep
//! the names of the program as given. A program the
//! lowering refuses runs as given.

#![cfg(feature = "exec")]

mod common;

use common::*;
use pt2kit::decompose::{self, Policy};
use pt2kit::exec::{self, DeviceKind, ExecOptions, Executor};
use pt2kit::ir::Program;

/// `p` as `ir-decompose` lowers it with its default passes, the ops the
/// executor keeps native in `p` kept (`None` where it leaves an op outside
/// the core opset).
fn decomposed(p: &Program) -> Option<Program> {
    let mut q = p.clone();
    let policy = Policy {
        keep: exec::lowering::kept(p),
        ..Policy::default()
    };
    let report = decompose::lower(&mut q, &policy).ok()?;
    if !report.not_core.is_empty() {
        return None;
    }
    let names: Vec<String> = ["dce", "fold", "cse", "bn-fold"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    exec::fold::run(&mut q, &names).ok()?;
    Some(q)
}

fn targets(e: &Executor) -> Vec<String> {
    e.program
        .graph
        .nodes
        .iter()
        .map(|n| format!("{} {}", n.name, n.target))
        .collect()
}

#[test]
fn a_graph_as_exported_runs_as_its_lowered_form() {
    let cpu = || exec::device(DeviceKind::Cpu).unwrap();
    let mut failures = Vec::new();
    let mut planned = 0;
    for pt2 in model_fixtures() {
        let file = stem(&pt2);
        let program = read(&pt2);
        let exported = Executor::new(&program, cpu()).unwrap();
        let Some(lowered_program) = decomposed(&program) else {
            // refused: run as given (the fallback's lowering alone)
            let given = ExecOptions {
                as_given: true,
                ..Default::default()
            };
            let as_given = Executor::with_options(&program, cpu(), given).unwrap();
            assert_eq!(targets(&exported), targets(&as_given), "{file}");
            continue;
        };
        let lowered = Executor::new(&lowered_program, cpu()).unwrap();
        if targets(&exported) != targets(&lowered) {
            failures.push(format!("{file}: the nodes differ"));
            continue;
        }
        if exported.fused_groups() != lowered.fused_groups()
            || exported.epilogues() != lowered.epilogues()
        {
            failures.push(format!(
                "{file}: the fusion plans differ: {:?} against {:?}",
                exported.epilogues(),
                lowered.epilogues()
            ));
        }
        planned += usize::from(!exported.fallback.notes.is_empty());
        for (set, inputs, expected) in input_sets(&pt2) {
            let inputs = pt2kit::tensorfile::read_npz(&inputs).unwrap();
            let expected = pt2kit::tensorfile::read_npz(&expected).unwrap();
            let (a, b) = (
                exported.run(&inputs).unwrap(),
                lowered.run(&inputs).unwrap(),
            );
            failures.extend(compare(&format!("{file}{set} as exported"), &a, &expected));
            // the outputs keep the names of the program as given
            for (name, _) in &a {
                if !program.graph.values.iter().any(|v| v.name == *name) {
                    failures.push(format!(
                        "{file}{set}: output {name} is no value of the program"
                    ));
                }
            }
            for ((name, x), (_, y)) in a.iter().zip(&b) {
                if x.data != y.data {
                    failures.push(format!(
                        "{file}{set} {name}: the bits differ from the lowered run"
                    ));
                }
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    // the composite fixtures (conv2d, batch_norm, linear, in-place ops)
    assert!(
        planned >= 10,
        "only {planned} fixtures were lowered at load"
    );
}

/// With `PT2KIT_AS_GIVEN` unset, a program already in core ATen is left as
/// it is: nothing is noted, and the executor runs the program it was given.
#[test]
fn a_lowered_graph_is_left_as_it_is() {
    let program = read(&repo().join("golden/models/conv_epilogues.pt2"));
    let lowered = decomposed(&program).unwrap();
    let e = Executor::new(&lowered, exec::device(DeviceKind::Cpu).unwrap()).unwrap();
    assert!(e.fallback.notes.is_empty(), "{:?}", e.fallback.notes);
    assert!(matches!(e.program, std::borrow::Cow::Borrowed(_)));
}
