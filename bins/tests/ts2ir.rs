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
        "data_while_list_scripted",
        4,
        "code/__torch__.py:11: a while loop on tensor data changes 'outs' (a list): only tensors are carried through while_loop",
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

/// The inputs `ir-run` takes: those of the example file that are user
/// inputs of the program (tensors and symbolic scalars; a scalar made
/// static is a constant of the program).
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

fn compare(case: &str, stem: &str, got: &Path, how: &str) {
    let expected = read_npz(&repo().join(format!("golden/ts/{stem}.expected.npz"))).unwrap();
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

/// `ir-run` (after `ir-decompose` with `decompose`) on the inputs of
/// `stem` (`CASE` or `CASE.alt`): its output, after the run succeeded.
fn run_stem(case: &str, stem: &str, ir: &[u8], how: &str, decompose: bool) -> std::process::Output {
    let dir = tempfile::tempdir().unwrap();
    let example = repo().join(format!("golden/ts/{stem}.inputs.npz"));
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
    if out.status.success() {
        compare(case, stem, &out_path, how);
    }
    out
}

fn run_case(case: &str, ir: &[u8], how: &str, decompose: bool) {
    let out = run_stem(case, case, ir, how, decompose);
    succeeded(out, &format!("{case} ({how}): ir-run"));
}

/// Cases whose scalar argument an import-time `for` / `if` needs: ts2ir
/// makes it static, and `ir-run` refuses another value, naming it.
const SPECIALISED: &[(&str, &str)] = &[(
    "specialised_scripted",
    "input n is 1, but the model was exported with n = 3 (static)",
)];

#[test]
fn every_case_runs_against_torch() {
    let cases = cases();
    assert!(cases.len() >= 14, "golden/ts has {} cases", cases.len());
    for case in &cases {
        let pt = format!("golden/ts/{case}.pt");
        let example = format!("golden/ts/{case}.inputs.npz");
        let out = ts2ir(&[&pt, "--example-inputs", &example]);
        let ir = succeeded(out, &format!("ts2ir {case}")).stdout;
        run_case(case, &ir, "bound", false);
        run_case(case, &ir, "bound, decomposed", true);
        // The graph that takes other inputs: every dim symbolic where the
        // case asks for it (dyn_*: --dynamic; traced: the archive's
        // recorded examples give ranks), else the one above, whose scalar
        // arguments are inputs.
        let symbolic = if case.starts_with("dyn_") {
            let out = ts2ir(&[&pt, "--example-inputs", &example, "--dynamic"]);
            let ir = succeeded(out, &format!("ts2ir {case} --dynamic")).stdout;
            run_case(case, &ir, "symbolic", false);
            run_case(case, &ir, "symbolic, decomposed", true);
            ir
        } else if case.ends_with("_traced") {
            let out = ts2ir(&[&pt]);
            let ir = succeeded(out, &format!("ts2ir {case} (symbolic)")).stdout;
            run_case(case, &ir, "symbolic", false);
            ir
        } else {
            ir
        };
        let alt = format!("{case}.alt");
        if !repo().join(format!("golden/ts/{alt}.inputs.npz")).exists() {
            continue;
        }
        if let Some((_, says)) = SPECIALISED.iter().find(|(c, _)| c == case) {
            // every input of the file given, the static one included
            let inputs = repo().join(format!("golden/ts/{alt}.inputs.npz"));
            let out = run_tool(
                env!("CARGO_BIN_EXE_ir-run"),
                &symbolic,
                &["--inputs", inputs.to_str().unwrap()],
            );
            let err = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(3), "{case} (other inputs): {err}");
            assert!(err.contains(says), "{case} (other inputs): {err}");
            continue;
        }
        for decompose in [false, true] {
            let how = if decompose {
                "other inputs, decomposed"
            } else {
                "other inputs"
            };
            let out = run_stem(case, &alt, &symbolic, how, decompose);
            succeeded(out, &format!("{case} ({how}): ir-run"));
        }
    }
}

/// Scalar arguments are graph inputs named after them (SymInt, SymFloat,
/// SymBool); an Optional one left out of the inputs is None.
#[test]
fn scalar_arguments_are_graph_inputs() {
    let input_kinds = |case: &str| -> Vec<(String, &'static str)> {
        let pt = format!("golden/ts/{case}.pt");
        let example = format!("golden/ts/{case}.inputs.npz");
        let ir = succeeded(ts2ir(&[&pt, "--example-inputs", &example]), case).stdout;
        let program = pt2kit::wire::read_program(&mut &ir[..], case).unwrap();
        pt2kit::contract::user_inputs(&program)
            .into_iter()
            .map(|(pos, name)| {
                let kind = match &program.graph.inputs[pos] {
                    pt2kit::ir::Argument::Tensor(_) => "tensor",
                    pt2kit::ir::Argument::SymInt(_) => "SymInt",
                    pt2kit::ir::Argument::SymFloat(_) => "SymFloat",
                    pt2kit::ir::Argument::SymBool(_) => "SymBool",
                    _ => "other",
                };
                (name, kind)
            })
            .collect()
    };
    let named = |v: &[(&str, &'static str)]| -> Vec<(String, &'static str)> {
        v.iter().map(|(n, k)| (n.to_string(), *k)).collect()
    };
    assert_eq!(
        input_kinds("scalars_scripted"),
        named(&[
            ("x", "tensor"),
            ("n", "SymInt"),
            ("scale", "SymFloat"),
            ("flag", "SymBool")
        ])
    );
    assert_eq!(
        input_kinds("optional_scripted"),
        named(&[("x", "tensor"), ("bias", "tensor"), ("k", "SymInt")])
    );
    assert_eq!(
        input_kinds("optional_none_scripted"),
        named(&[("x", "tensor")])
    );
}

/// A dict output keeps its keys and a nested tuple its structure in the
/// output spec, as torch.export's pytree writes them.
#[test]
fn output_structure_is_kept_in_the_spec() {
    let pt = "golden/ts/dict_out_scripted.pt";
    let example = "golden/ts/dict_out_scripted.inputs.npz";
    let ir = succeeded(ts2ir(&[pt, "--example-inputs", example]), "dict_out").stdout;
    let program = pt2kit::wire::read_program(&mut &ir[..], "dict_out").unwrap();
    let spec = &program.info.out_spec;
    let at = |s: &str| spec.find(s).unwrap_or_else(|| panic!("{s} not in {spec}"));
    // (dict of three, (tensor, (tensor, tensor)))
    assert!(at("builtins.tuple") < at("builtins.dict"), "{spec}");
    assert!(spec.contains(r#"[\"relu\",\"neg\",\"sum\"]"#), "{spec}");
    assert_eq!(spec.matches("builtins.tuple").count(), 3, "{spec}");
    assert_eq!(program.graph.outputs.len(), 6);
}

/// Where import needs a symbolic value no example gives, the refusal
/// names the construct, the value and its line.
#[test]
fn a_size_needed_at_import_without_an_example_is_refused_by_name() {
    let out = ts2ir(&[
        "golden/ts/specialised_scripted.pt",
        "--example-inputs",
        "golden/ts/optional_none_scripted.inputs.npz",
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(4), "{err}");
    assert!(
        err.contains("aten::sum's argument needs the value of s0 - 2 (from input n) at import")
            && err.contains("no example gives it"),
        "{err}"
    );
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
