//! Symbolic ints through the real binaries (golden/symint): an int input
//! given on the command line (`-i n=5`), random inputs that pick its
//! example value, and the errors that name the input, the dim and the
//! expression when a size or an int breaks the exported contract.

#![cfg(feature = "exec")]

mod common;

use common::{ir, repo};
use pt2kit::tensorfile::{read_npz, write_npy, HostTensor};

fn ir_run(stdin: &[u8], args: &[&str]) -> std::process::Output {
    common::run_tool(env!("CARGO_BIN_EXE_ir-run"), stdin, args)
}

fn symint(model: &str) -> Vec<u8> {
    ir(&format!("../symint/{model}"))
}

fn stderr(o: &std::process::Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// The alt input set of sym_int_arith (n = 5): x from an .npy, n as a
/// literal, against torch's outputs.
#[test]
fn an_int_input_given_as_a_literal_matches_torch() {
    let dir = tempfile::tempdir().unwrap();
    let inputs = read_npz(&repo().join("golden/symint/sym_int_arith.alt.inputs.npz")).unwrap();
    let (_, x) = inputs.iter().find(|(n, _)| n == "x").unwrap();
    let (_, n) = inputs.iter().find(|(n, _)| n == "n").unwrap();
    assert_eq!((n.shape.len(), n.data[0]), (0, 5), "the alt set has n = 5");
    let npy = dir.path().join("x.npy");
    std::fs::write(&npy, write_npy(x).unwrap()).unwrap();
    let out = dir.path().join("out.npz");
    let x_arg = format!("x={}", npy.display());
    let o = ir_run(
        &symint("sym_int_arith"),
        &["-i", &x_arg, "-i", "n=5", "-o", out.to_str().unwrap()],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let ours = read_npz(&out).unwrap();
    let theirs = read_npz(&repo().join("golden/symint/sym_int_arith.alt.expected.npz")).unwrap();
    assert_eq!(ours.len(), theirs.len());
    for ((name, a), (_, b)) in ours.iter().zip(&theirs) {
        assert_eq!(a.shape, b.shape, "{name}");
        let (a, b) = (a.to_f64(), b.to_f64());
        assert!(
            a.iter().zip(&b).all(|(x, y)| (x - y).abs() <= 1e-5),
            "{name}: {a:?} vs {b:?}"
        );
    }
}

/// `--random` gives an int input its example value (n = 3 at export).
#[test]
fn random_inputs_give_an_int_input_its_example_value() {
    let o = ir_run(&symint("sym_int_arith"), &["--random"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = String::from_utf8(o.stdout).unwrap();
    assert!(text.contains("repeat: f32[9, 8]"), "{text}");
}

#[test]
fn an_int_out_of_range_exits_3_naming_the_input_and_range() {
    let dir = tempfile::tempdir().unwrap();
    let x = HostTensor {
        dtype: pt2kit::ir::Dtype::Float32,
        shape: vec![3, 8],
        data: vec![0; 4 * 24],
    };
    let npy = dir.path().join("x.npy");
    std::fs::write(&npy, write_npy(&x).unwrap()).unwrap();
    let x_arg = format!("x={}", npy.display());
    let o = ir_run(&symint("sym_int_arith"), &["-i", &x_arg, "-i", "n=9"]);
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    let e = stderr(&o);
    // (torch's archive does not record the names of the Dims: the symbol)
    assert!(e.contains("input n is 9, but s86 must be in [2, 7]"), "{e}");
    let o = ir_run(&symint("sym_int_arith"), &["-i", &x_arg, "-i", "n=2.5"]);
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("input n is an int (SymInt)"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn a_size_not_of_a_derived_form_exits_3_naming_the_expression() {
    let dir = tempfile::tempdir().unwrap();
    let inputs = dir.path().join("in.npz");
    common::zeros_npz(&inputs, "x", &[1, 3, 7, 7]);
    let o = ir_run(
        &symint("sym_derived_pool"),
        &["--inputs", inputs.to_str().unwrap()],
    );
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    let e = stderr(&o);
    assert!(
        e.contains("input x: dim 2 is 7, which is not of the form 2*s"),
        "{e}"
    );
    common::zeros_npz(&inputs, "x", &[1, 3, 80, 80]);
    let o = ir_run(
        &symint("sym_derived_pool"),
        &["--inputs", inputs.to_str().unwrap()],
    );
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    let e = stderr(&o);
    assert!(
        e.contains("input x: dim 2 is 80, so s") && e.contains("must be in [2, 32]"),
        "{e}"
    );
    // the size solved for s binds it: a dim that disagrees is named
    common::zeros_npz(&inputs, "x", &[1, 3, 8, 10]);
    let o = ir_run(
        &symint("sym_derived_pool"),
        &["--inputs", inputs.to_str().unwrap()],
    );
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("input x: dim 3 is 10"),
        "{}",
        stderr(&o)
    );
}
