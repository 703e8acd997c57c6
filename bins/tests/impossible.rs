//! Graphs that ask for the impossible, made from valid fixtures by editing
//! one argument value (as a user editing `models/model.json` would): every
//! tool that reads IR refuses each with exit 3 and a message naming the
//! node and the argument, before anything runs. None panics or exits 70.

#![cfg(feature = "exec")]

mod common;

use pt2kit::ir::{Argument, Program, SymRef};

/// (fixture, node, argument, new value, words the message must have)
fn cases() -> Vec<(
    &'static str,
    &'static str,
    &'static str,
    Argument,
    &'static str,
)> {
    use Argument::*;
    let syms = |v: &[i64]| SymInts(v.iter().map(|i| SymRef::Int(*i)).collect());
    vec![
        // convolution
        (
            "cnn",
            "conv2d",
            "stride",
            Ints(vec![0, 0]),
            "stride[0] is 0, must be > 0",
        ),
        (
            "cnn",
            "conv2d",
            "stride",
            Ints(vec![1, -2]),
            "stride[1] is -2, must be > 0",
        ),
        (
            "cnn",
            "conv2d",
            "dilation",
            Ints(vec![0, 0]),
            "dilation[0] is 0, must be > 0",
        ),
        (
            "cnn",
            "conv2d",
            "padding",
            Ints(vec![-1, 1]),
            "padding[0] is -1",
        ),
        (
            "cnn",
            "conv2d",
            "groups",
            Int(0),
            "groups is 0, must be > 0",
        ),
        (
            "cnn",
            "conv2d",
            "groups",
            Int(3),
            "input channels in 3 groups",
        ),
        ("cnn", "conv2d", "groups", Int(-1), "groups is -1"),
        (
            "cnn",
            "conv2d_1",
            "dilation",
            Ints(vec![9, 9]),
            "less than the kernel's",
        ),
        (
            "cnn",
            "conv2d",
            "stride",
            Ints(vec![1, 1, 1]),
            "stride has 3 values",
        ),
        (
            "cnn",
            "conv2d",
            "padding",
            Ints(vec![2, 2]),
            "output 0 is recorded as",
        ),
        // pooling
        (
            "cnn",
            "max_pool2d",
            "kernel_size",
            Ints(vec![0, 2]),
            "kernel_size[0] is 0, must be > 0",
        ),
        (
            "cnn",
            "max_pool2d",
            "stride",
            Ints(vec![0, 0]),
            "stride[0] is 0, must be > 0",
        ),
        (
            "cnn",
            "max_pool2d",
            "padding",
            Ints(vec![3, 0]),
            "padding[0] is 3, must be at most half",
        ),
        (
            "cnn",
            "max_pool2d",
            "dilation",
            Ints(vec![0, 1]),
            "dilation[0] is 0, must be > 0",
        ),
        (
            "cnn",
            "max_pool2d",
            "kernel_size",
            Ints(vec![3, 3]),
            "output 0 is recorded as",
        ),
        (
            "cnn",
            "adaptive_avg_pool2d",
            "output_size",
            syms(&[-1, 1]),
            "output_size[0] is -1",
        ),
        (
            "cnn",
            "adaptive_avg_pool2d",
            "output_size",
            syms(&[1]),
            "output_size has 1 sizes",
        ),
        // norms
        (
            "transformer",
            "layer_norm",
            "normalized_shape",
            syms(&[31]),
            "is not the last dims",
        ),
        (
            "transformer",
            "layer_norm",
            "normalized_shape",
            syms(&[5, 32, 1]),
            "is not the last dims",
        ),
        // linear algebra
        (
            "cnn",
            "linear",
            "weight",
            Tensor(pt2kit::ir::ValueId(0)),
            "linear",
        ),
        (
            "mlp",
            "linear_1",
            "input",
            Tensor(pt2kit::ir::ValueId(0)),
            "the product needs them equal",
        ),
        // views and shapes
        (
            "transformer",
            "view",
            "size",
            syms(&[5, 8, 9]),
            "holds 360 elements, the input 320",
        ),
        (
            "transformer",
            "view",
            "size",
            syms(&[-1, -1, 8]),
            "more than one -1",
        ),
        (
            "transformer",
            "view",
            "size",
            syms(&[5, -3, 8]),
            "size[1] is -3",
        ),
        (
            "transformer",
            "view",
            "size",
            syms(&[7, -1]),
            "does not divide",
        ),
        (
            "transformer",
            "permute",
            "dims",
            Ints(vec![2, 0, 0, 3]),
            "repeats dim 0",
        ),
        (
            "transformer",
            "permute",
            "dims",
            Ints(vec![2, 0, 1]),
            "has 3 entries for a tensor of rank 4",
        ),
        (
            "transformer",
            "permute",
            "dims",
            Ints(vec![2, 0, 1, 7]),
            "dims is 7, out of range",
        ),
        (
            "transformer",
            "transpose",
            "dim0",
            Int(5),
            "dim0 is 5, out of range",
        ),
        (
            "transformer",
            "transpose_1",
            "dim1",
            Int(-9),
            "dim1 is -9, out of range",
        ),
        (
            "transformer",
            "select",
            "dim",
            Int(4),
            "dim is 4, out of range",
        ),
        (
            "transformer",
            "select",
            "index",
            SymInt(SymRef::Int(3)),
            "index is 3, out of range for dim 0 of size 3",
        ),
        (
            "transformer",
            "select_1",
            "index",
            SymInt(SymRef::Int(-4)),
            "index is -4, out of range",
        ),
        (
            "transformer",
            "unsqueeze",
            "dim",
            Int(6),
            "dim is 6, out of range",
        ),
        (
            "transformer",
            "squeeze",
            "dim",
            Int(-7),
            "dim is -7, out of range",
        ),
        (
            "transformer",
            "unflatten",
            "dim",
            Int(3),
            "dim is 3, out of range",
        ),
        (
            "transformer",
            "unflatten",
            "sizes",
            syms(&[3, 31]),
            "do not make the 96",
        ),
        (
            "transformer",
            "reshape",
            "shape",
            syms(&[10, 33]),
            "holds 330 elements, the input 320",
        ),
        (
            "cnn",
            "flatten",
            "start_dim",
            Int(5),
            "start_dim is 5, out of range",
        ),
        ("cnn", "flatten", "end_dim", Int(0), "comes after end_dim"),
        // reductions and softmax
        (
            "embedding",
            "mean",
            "dim",
            Ints(vec![3]),
            "dim is 3, out of range",
        ),
        (
            "embedding",
            "mean",
            "dim",
            Ints(vec![1, 1]),
            "names dim 1 twice",
        ),
        // attention
        (
            "transformer",
            "scaled_dot_product_attention",
            "key",
            Tensor(pt2kit::ir::ValueId(0)),
            "key",
        ),
    ]
}

fn edit(mut p: Program, node: &str, arg: &str, value: &Argument) -> Program {
    // A tensor argument is swapped for another of the graph's values: the
    // graph input `x` (value 0 is whatever the arena holds first; use the
    // user input instead, which exists in every fixture).
    let value = match value {
        Argument::Tensor(_) => {
            let x = p
                .graph
                .find_value("x")
                .or_else(|| p.graph.find_value("ids"))
                .expect("a user input");
            Argument::Tensor(x)
        }
        v => v.clone(),
    };
    let n = p
        .graph
        .nodes
        .iter_mut()
        .find(|n| n.name == node)
        .unwrap_or_else(|| panic!("no node {node}"));
    let a = n
        .inputs
        .iter_mut()
        .find(|a| a.name == arg)
        .unwrap_or_else(|| panic!("node {node} has no argument {arg}"));
    a.arg = value;
    a.defaulted = false;
    p
}

#[test]
fn impossible_graphs_are_refused_by_every_tool() {
    let dir = tempfile::tempdir().unwrap();
    let mut failures = Vec::new();
    let cases = cases();
    assert!(cases.len() >= 40);
    for (k, (fixture, node, arg, value, says)) in cases.iter().enumerate() {
        let program =
            pt2kit::wire::read_program(&mut common::ir(fixture).as_slice(), fixture).unwrap();
        let broken = edit(program, node, arg, value);
        let e = match pt2kit::infer::check(&broken, &Default::default()) {
            Ok(()) => {
                failures.push(format!("{fixture} {node}.{arg}: accepted"));
                continue;
            }
            Err(e) => e.to_string(),
        };
        if !e.contains(&format!("node {node} (")) || !e.contains(says) {
            failures.push(format!("{fixture} {node}.{arg}: {e}"));
        }
        let path = dir.path().join(format!("{k}.ir"));
        std::fs::write(&path, pt2kit::wire::encode_program(&broken).unwrap()).unwrap();
        let p = path.to_str().unwrap();
        for (tool, exe, args) in [
            ("ir-run", env!("CARGO_BIN_EXE_ir-run"), vec![p, "--random"]),
            (
                "ir-decompose",
                env!("CARGO_BIN_EXE_ir-decompose"),
                vec![p, "-o", "-"],
            ),
            ("ir2onnx", env!("CARGO_BIN_EXE_ir2onnx"), vec![p, "-o", "-"]),
        ] {
            let out = std::process::Command::new(exe)
                .args(&args)
                .output()
                .unwrap();
            let err = String::from_utf8_lossy(&out.stderr);
            if out.status.code() != Some(3)
                || !err.contains(&format!("node {node} ("))
                || !out.stdout.is_empty()
            {
                failures.push(format!(
                    "{tool} on {fixture} {node}.{arg}: exit {:?}: {err}",
                    out.status.code()
                ));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// A value too big for the memory cap is refused before the run; the
/// limits on elements hold for every tool.
#[test]
fn the_memory_cap_and_the_element_limit() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_ir-run"))
        .args(["--random", "--max-memory", "100"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .and_then(|mut c| {
            use std::io::Write;
            c.stdin.take().unwrap().write_all(&common::ir("cnn"))?;
            c.wait_with_output()
        })
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{err}");
    assert!(
        err.contains("more than the memory cap of 100 B (--max-memory)"),
        "{err}"
    );
    // 2^40 x 2^40 elements
    let mut p = pt2kit::wire::read_program(&mut common::ir("mlp").as_slice(), "mlp").unwrap();
    let v = p.graph.find_value("x").unwrap();
    if let pt2kit::ir::ValueKind::Tensor(m) = &mut p.graph.values[v.index()].kind {
        m.sizes = vec![pt2kit::ir::Sym::Int(1 << 40), pt2kit::ir::Sym::Int(1 << 40)];
    }
    let e = pt2kit::infer::check(&p, &Default::default()).unwrap_err();
    assert!(e.to_string().contains("elements, more than the"), "{e}");
}
