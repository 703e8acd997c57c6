//! `ts2ir` on the TorchScript cases of `golden/ts` (made by
//! `recipes/fixtures/ts_cases.py`: traced, scripted and frozen modules, outputs from
//! torch.jit.load): every case through `ts2ir | ir-run` and
//! `ts2ir | ir-decompose | ir-run` against torch's outputs, with its inputs
//! bound (`--example-inputs`) and, for traced ones, symbolic; refusals name
//! the construct and its line in `code/`.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::{repo, run_tool, succeeded};
use pt2kit::tensorfile::{read_npz, write_npz, HostTensor};

fn cases() -> Vec<String> {
    let mut out: Vec<String> = std::fs::read_dir(repo().join("golden/ts"))
        .unwrap()
        .filter_map(|e| {
            let name = e.unwrap().file_name().into_string().ok()?;
            name.strip_suffix(".pt").map(str::to_string)
        })
        .filter(|n| !REFUSED.iter().any(|(r, _, _)| r == n))
        .collect();
    out.sort();
    out
}

/// Cases ts2ir refuses: (case, exit code, what the message says).
const REFUSED: &[(&str, i32, &str)] = &[
    (
        "data_list_scripted",
        4,
        "code/__torch__.py:11: a list that grows inside a while loop on tensor data",
    ),
    (
        "inplace_reshape_scripted",
        4,
        "code/__torch__.py:9: aten::add_ writes in place into a tensor that shares memory with a view made by aten.reshape.default",
    ),
];

fn ts2ir(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_ts2ir"))
        .current_dir(repo())
        .args(args)
        .output()
        .unwrap()
}

/// The inputs `ir-run` takes: the tensors of the example file that are
/// user inputs of the program (scalars are specialised into it).
fn run_inputs(ir: &[u8], example: &Path, dir: &Path) -> PathBuf {
    let program = pt2kit::wire::read_program(&mut &ir[..], "ts2ir output").unwrap();
    let names: Vec<String> = pt2kit::contract::user_inputs(&program)
        .into_iter()
        .map(|(_, n)| n)
        .collect();
    let given: Vec<(String, HostTensor)> = read_npz(example)
        .unwrap()
        .into_iter()
        .filter(|(n, _)| names.contains(n))
        .collect();
    let path = dir.join("inputs.npz");
    std::fs::write(&path, write_npz(&given).unwrap()).unwrap();
    path
}

fn compare(case: &str, got: &Path, how: &str) {
    let expected = read_npz(&repo().join(format!("golden/ts/{case}.expected.npz"))).unwrap();
    let got = read_npz(got).unwrap();
    assert_eq!(got.len(), expected.len(), "{case} ({how}): output count");
    for (k, ((_, g), (_, e))) in got.iter().zip(&expected).enumerate() {
        assert_eq!(g.shape, e.shape, "{case} ({how}): output {k} shape");
        let (g, e) = (g.to_f64(), e.to_f64());
        let worst = g
            .iter()
            .zip(&e)
            .map(|(a, b)| (a - b).abs() / (1.0 + b.abs()))
            .fold(0.0, f64::max);
        assert!(
            worst < 1e-4,
            "{case} ({how}): output {k} differs by {worst}"
        );
    }
}

fn run_case(case: &str, ir: &[u8], how: &str, decompose: bool) {
    let dir = tempfile::tempdir().unwrap();
    let example = repo().join(format!("golden/ts/{case}.inputs.npz"));
    let mut ir = ir.to_vec();
    if decompose {
        let out = run_tool(env!("CARGO_BIN_EXE_ir-decompose"), &ir, &[]);
        ir = succeeded(out, &format!("{case}: ir-decompose")).stdout;
    }
    let inputs = run_inputs(&ir, &example, dir.path());
    let out_path = dir.path().join("out.npz");
    let out = run_tool(
        env!("CARGO_BIN_EXE_ir-run"),
        &ir,
        &[
            "--inputs",
            inputs.to_str().unwrap(),
            "-o",
            out_path.to_str().unwrap(),
        ],
    );
    succeeded(out, &format!("{case} ({how}): ir-run"));
    compare(case, &out_path, how);
}

#[test]
fn every_case_runs_against_torch() {
    let cases = cases();
    assert!(cases.len() >= 7, "golden/ts has {} cases", cases.len());
    for case in &cases {
        let pt = format!("golden/ts/{case}.pt");
        let example = format!("golden/ts/{case}.inputs.npz");
        let out = ts2ir(&[&pt, "--example-inputs", &example]);
        let ir = succeeded(out, &format!("ts2ir {case}")).stdout;
        run_case(case, &ir, "bound", false);
        run_case(case, &ir, "bound, decomposed", true);
        if case.ends_with("_traced") {
            // The archive's recorded examples give ranks; dims symbolic.
            let out = ts2ir(&[&pt]);
            let ir = succeeded(out, &format!("ts2ir {case} (symbolic)")).stdout;
            run_case(case, &ir, "symbolic", false);
        }
    }
}

#[test]
fn refusals_name_the_construct_and_its_line() {
    for (case, code, says) in REFUSED {
        let pt = format!("golden/ts/{case}.pt");
        let example = format!("golden/ts/{case}.inputs.npz");
        let out = ts2ir(&[&pt, "--example-inputs", &example]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(*code), "{case}: {err}");
        assert!(err.contains(says), "{case}: {err}");
        assert!(out.stdout.is_empty(), "{case}: wrote output on a refusal");
    }
}

#[test]
fn a_scripted_input_without_an_example_is_a_usage_error() {
    let out = ts2ir(&["golden/ts/mlp_scripted.pt"]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("give --example-inputs"), "{err}");
}

#[test]
fn other_files_are_refused_as_bad_input() {
    let out = ts2ir(&["golden/ts/mlp_traced.inputs.npz"]);
    assert_eq!(out.status.code(), Some(3));
    let out = ts2ir(&["golden/ts/missing.pt"]);
    assert_eq!(out.status.code(), Some(5));
}
