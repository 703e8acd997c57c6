//! Inputs that used to crash a tool or run it out of memory (issue 53):
//! run-time memory bombs and endless loops (under an address-space
//! limit, as `prlimit --as=4GiB` sets), absurd thread counts, two
//! streams concatenated, tensor files read as numpy reads them, weights
//! whose view arithmetic wraps or whose dtype lies, shape rules that
//! refuse what torch's meta functions refuse, `cond` branches with more
//! outputs than their node. Each ends with a documented exit code and a
//! one-line message, or runs as torch runs it.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

mod common;
use common::repo;

use pt2kit::ir::{Argument, Dtype, Program, Sym, TensorMeta, ValueKind};
use pt2kit::tensorfile::HostTensor;

const PT2IR: &str = env!("CARGO_BIN_EXE_pt2ir");
const IR2ONNX: &str = env!("CARGO_BIN_EXE_ir2onnx");
const DECOMPOSE: &str = env!("CARGO_BIN_EXE_ir-decompose");
const RUN: &str = env!("CARGO_BIN_EXE_ir-run");
const BENCH: &str = env!("CARGO_BIN_EXE_ir-bench");
const DIFF: &str = env!("CARGO_BIN_EXE_ir-diff");

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// `exe args` in the repository, with its address space limited to 4 GiB
/// (`ulimit -v`, as `prlimit --as=4GiB` does): an allocation past the
/// limit would abort the process.
fn limited(exe: &str, args: &[&str]) -> Output {
    Command::new("sh")
        .current_dir(repo())
        .arg("-c")
        .arg("ulimit -v 4194304 && exec \"$0\" \"$@\"")
        .arg(exe)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

fn run(exe: &str, args: &[&str]) -> Output {
    Command::new(exe)
        .current_dir(repo())
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

/// The tool ended with `code` and one line naming each of `says`.
fn ends_with(o: &Output, code: i32, says: &[&str], what: &str) {
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(code), "{what}: {err}");
    assert_eq!(err.lines().count(), 1, "{what}: one line: {err}");
    for word in says {
        assert!(err.contains(word), "{what}: {word:?} in {err}");
    }
}

fn npz(path: &Path, tensors: Vec<(&str, HostTensor)>) {
    let named: Vec<(String, HostTensor)> = tensors
        .into_iter()
        .map(|(n, t)| (n.to_string(), t))
        .collect();
    std::fs::write(path, pt2kit::tensorfile::write_npz(&named).unwrap()).unwrap();
}

fn scalar_i64(v: i64) -> HostTensor {
    HostTensor {
        dtype: Dtype::Int64,
        shape: vec![],
        data: v.to_le_bytes().to_vec(),
    }
}

fn f32_zeros(shape: &[usize]) -> HostTensor {
    HostTensor {
        dtype: Dtype::Float32,
        shape: shape.to_vec(),
        data: vec![0; 4 * shape.iter().product::<usize>()],
    }
}

/// A fixture of golden/bombs as an IR file in `dir`.
fn bomb(dir: &Path, name: &str) -> PathBuf {
    let p = dir.join(format!("{name}.ir"));
    let o = run(PT2IR, &[&format!("golden/bombs/{name}.pt2"), "-o", s(&p)]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    p
}

fn read_pt2(rel: &str) -> Program {
    pt2kit::import::pt2::read_pt2(&repo().join(rel), &Default::default()).unwrap()
}

/// Writes a program as an IR stream, unchecked (as a hostile user would).
fn write_ir(p: &Program, path: &Path) {
    let mut out = Vec::new();
    pt2kit::wire::write_program(p, &mut out).unwrap();
    std::fs::write(path, out).unwrap();
}

#[test]
fn a_dynamic_outer_product_of_200000_squared_ends_over_the_budget() {
    let d = tempfile::tempdir().unwrap();
    let ir = bomb(d.path(), "outer");
    let small = d.path().join("small.npz");
    npz(&small, vec![("x", f32_zeros(&[4]))]);
    let o = limited(RUN, &[s(&ir), "--inputs", s(&small)]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let big = d.path().join("big.npz");
    npz(&big, vec![("x", f32_zeros(&[200_000]))]);
    for exe in [RUN, BENCH] {
        let o = limited(exe, &[s(&ir), "--inputs", s(&big)]);
        ends_with(
            &o,
            3,
            &[
                "node 'mul'",
                "[200000, 200000]",
                "149.0 GiB",
                "--max-memory",
            ],
            exe,
        );
    }
    // A budget given: the same, with that budget named.
    let o = run(RUN, &[s(&ir), "--inputs", s(&big), "--max-memory", "1G"]);
    ends_with(&o, 3, &["budget of 1.0 GiB"], "--max-memory 1G");
}

#[test]
fn ones_of_an_item_of_2_pow_40_ends_over_the_budget() {
    let d = tempfile::tempdir().unwrap();
    let ir = bomb(d.path(), "ones_item");
    let small = d.path().join("small.npz");
    npz(&small, vec![("n", scalar_i64(5))]);
    let o = limited(RUN, &[s(&ir), "--inputs", s(&small)]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let big = d.path().join("big.npz");
    npz(&big, vec![("n", scalar_i64(1 << 40))]);
    let o = limited(RUN, &[s(&ir), "--inputs", s(&big)]);
    ends_with(
        &o,
        3,
        &["node 'ones'", "[1099511627776]", "4.0 TiB", "--max-memory"],
        "ones(2^40)",
    );
}

#[test]
fn an_endless_while_loop_ends_at_max_iterations() {
    let d = tempfile::tempdir().unwrap();
    let ir = bomb(d.path(), "endless");
    let inputs = d.path().join("in.npz");
    npz(&inputs, vec![("i", scalar_i64(0)), ("x", f32_zeros(&[3]))]);
    for exe in [RUN, BENCH] {
        let o = limited(
            exe,
            &[s(&ir), "--inputs", s(&inputs), "--max-iterations", "1000"],
        );
        ends_with(
            &o,
            3,
            &["while_loop", "after 1000 iterations", "--max-iterations"],
            exe,
        );
    }
    // The documented default, in ir-run's help.
    let help = String::from_utf8(run(RUN, &["--help"]).stdout).unwrap();
    assert!(
        help.contains("--max-iterations") && help.contains("1000000"),
        "{help}"
    );
}

/// The endless loop with a body whose carry doubles every iteration (torch
/// refuses to export one; a hand-edited stream has it): refused at the
/// first iteration that changes the carried shape, before it grows.
#[test]
fn a_while_loop_whose_carry_doubles_is_refused() {
    let d = tempfile::tempdir().unwrap();
    let mut p = read_pt2("golden/bombs/endless.pt2");
    let node = p
        .graph
        .nodes
        .iter_mut()
        .find(|n| n.target.to_string() == "higher_order.while_loop")
        .unwrap();
    let Argument::Graph(body) = &mut node.inputs[1].arg else {
        panic!("no body")
    };
    let g = &mut body.graph;
    let x = match g.inputs[1] {
        Argument::Tensor(v) => v,
        _ => panic!(),
    };
    let mut names = pt2kit::decompose::edit::Names::of(g);
    let mut em =
        pt2kit::decompose::edit::Emitter::new(&mut g.values, &mut names, Default::default());
    let cat = em
        .op(
            "aten.cat.default",
            vec![
                ("tensors", Argument::Tensors(vec![x, x])),
                ("dim", Argument::Int(0)),
            ],
            TensorMeta::contiguous(Dtype::Float32, &[6]),
        )
        .unwrap();
    let nodes = em.nodes;
    g.nodes.extend(nodes);
    g.outputs[1] = Argument::Tensor(cat);
    let ir = d.path().join("doubling.ir");
    write_ir(&p, &ir);
    let inputs = d.path().join("in.npz");
    npz(&inputs, vec![("i", scalar_i64(0)), ("x", f32_zeros(&[3]))]);
    let o = limited(RUN, &[s(&ir), "--inputs", s(&inputs)]);
    ends_with(
        &o,
        3,
        &["carried value 1 of shape [6]", "the loop carries [3]"],
        "doubling",
    );
}

#[test]
fn thread_counts_are_bounded_and_checked() {
    let d = tempfile::tempdir().unwrap();
    let ir = bomb(d.path(), "outer");
    let o = run(BENCH, &[s(&ir), "--threads", "100000", "--iters", "1"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("1..=1024"));
    for (value, says) in [
        ("100000", "from 1 to 1024"),
        ("abc", "from 1 to 1024"),
        ("-3", "from 1 to 1024"),
    ] {
        for (exe, args) in [
            (RUN, vec![s(&ir), "--random"]),
            (BENCH, vec![s(&ir), "--iters", "1"]),
            (DECOMPOSE, vec![s(&ir)]),
        ] {
            let o = Command::new(exe)
                .current_dir(repo())
                .args(&args)
                .env("RAYON_NUM_THREADS", value)
                .stdin(Stdio::null())
                .output()
                .unwrap();
            ends_with(&o, 2, &["RAYON_NUM_THREADS", says], exe);
        }
    }
    // Within the bound, but more threads than the address space holds
    // stacks for: refused with exit 2, not rayon's panic.
    let mut cmd = Command::new("sh");
    cmd.current_dir(repo())
        .arg("-c")
        .arg("ulimit -v 1048576 && exec \"$0\" \"$@\"")
        .arg(RUN)
        .args([s(&ir), "--random"])
        .env("RAYON_NUM_THREADS", "1000")
        .stdin(Stdio::null());
    let o = cmd.output().unwrap();
    ends_with(
        &o,
        2,
        &["cannot start 1000 threads"],
        "1000 threads in 1 GiB",
    );
    let o = Command::new("sh")
        .current_dir(repo())
        .arg("-c")
        .arg("ulimit -v 1048576 && exec \"$0\" \"$@\"")
        .arg(BENCH)
        .args([s(&ir), "--threads", "1000", "--iters", "1"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    ends_with(
        &o,
        2,
        &["--threads 1000", "cannot start"],
        "--threads 1000 in 1 GiB",
    );
    // A sane count still runs.
    let o = Command::new(RUN)
        .current_dir(repo())
        .args([s(&ir), "--random"])
        .env("RAYON_NUM_THREADS", "2")
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
}

/// Two streams concatenated, as a file and through a pipe, into every
/// reader of IR: refused, exit 3.
#[test]
fn bytes_after_the_end_record_are_refused_by_every_reader() {
    let d = tempfile::tempdir().unwrap();
    let one = common::ir("mlp");
    let mut two = one.clone();
    two.extend_from_slice(&one);
    let file = d.path().join("two.ir");
    std::fs::write(&file, &two).unwrap();
    let mut junk = one.clone();
    junk.push(0);
    let junk_file = d.path().join("junk.ir");
    std::fs::write(&junk_file, &junk).unwrap();
    let readers: Vec<(&str, Vec<&str>)> = vec![
        (DECOMPOSE, vec![]),
        (IR2ONNX, vec![]),
        (RUN, vec!["--random"]),
        (BENCH, vec!["--iters", "1"]),
        (PT2IR, vec![]),
    ];
    for (exe, extra) in &readers {
        if *exe == PT2IR {
            continue; // reads archives, not streams
        }
        for f in [&file, &junk_file] {
            let mut a = vec![s(f)];
            a.extend(extra.iter().copied());
            ends_with(&run(exe, &a), 3, &["after the end record"], exe);
        }
        let mut a = vec!["-"];
        a.extend(extra.iter().copied());
        let o = common::run_tool(exe, &two, &a);
        ends_with(&o, 3, &["after the end record"], exe);
    }
    let single = d.path().join("one.ir");
    std::fs::write(&single, &one).unwrap();
    ends_with(
        &run(DIFF, &[s(&file), s(&single)]),
        3,
        &["after the end record"],
        "ir-diff",
    );
    let o = common::run_tool(DIFF, &two, &["-", s(&single)]);
    ends_with(&o, 3, &["after the end record"], "ir-diff -");
}

/// An .npz with bytes before its zip (numpy reads one that starts as a
/// zip does: Python's zipfile finds its directory from the end) is read.
#[test]
fn an_npz_with_bytes_before_the_zip_is_read_as_numpy_reads_it() {
    let d = tempfile::tempdir().unwrap();
    let orig = std::fs::read(repo().join("golden/models/mlp.inputs.npz")).unwrap();
    let mut pre = b"PK\x03\x04".to_vec();
    pre.extend_from_slice(&[0u8; 96]);
    pre.extend_from_slice(&orig);
    let shifted = d.path().join("shifted.npz");
    std::fs::write(&shifted, &pre).unwrap();
    let o = run(DIFF, &[s(&shifted), "golden/models/mlp.inputs.npz"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let ir = d.path().join("mlp.ir");
    std::fs::write(&ir, common::ir("mlp")).unwrap();
    let a = run(RUN, &[s(&ir), "--inputs", s(&shifted)]);
    let b = run(RUN, &[s(&ir), "--inputs", "golden/models/mlp.inputs.npz"]);
    assert!(a.status.success(), "{}", String::from_utf8_lossy(&a.stderr));
    assert_eq!(a.stdout, b.stdout);
}

/// Every tool that loads a program refuses it (exit 3), naming the weight.
fn refused_by_every_tool(ir: &Path, says: &[&str], what: &str) {
    for (exe, extra) in [
        (DECOMPOSE, vec![]),
        (IR2ONNX, vec![]),
        (RUN, vec!["--random"]),
        (BENCH, vec!["--iters", "1"]),
    ] {
        let mut a = vec![s(ir)];
        a.extend(extra);
        ends_with(&run(exe, &a), 3, says, &format!("{what}: {exe}"));
    }
}

#[test]
fn weight_views_whose_arithmetic_overflows_are_refused() {
    let d = tempfile::tempdir().unwrap();
    let mut p = read_pt2("golden/models/mlp.pt2");
    p.weights[0].meta.strides[0] = Sym::Int(0x5555_5555_5555_5556);
    let ir = d.path().join("stride.ir");
    write_ir(&p, &ir);
    refused_by_every_tool(
        &ir,
        &["fc1.weight", "Storage size calculation overflowed"],
        "wrapping stride",
    );
    let mut p = read_pt2("golden/models/mlp.pt2");
    p.weights[0].meta.storage_offset = Sym::Int(i64::MAX - 3);
    let ir = d.path().join("offset.ir");
    write_ir(&p, &ir);
    refused_by_every_tool(&ir, &["fc1.weight", "overflowed"], "offset");
}

#[test]
fn a_weight_declared_float64_over_float32_bytes_is_refused() {
    let d = tempfile::tempdir().unwrap();
    let mut p = read_pt2("golden/models/mlp.pt2");
    let v = match p.graph.inputs[0] {
        Argument::Tensor(v) => v,
        _ => panic!(),
    };
    assert!(p.weight_for_input(0).is_some());
    if let ValueKind::Tensor(m) = &mut p.graph.values[v.index()].kind {
        m.dtype = Dtype::Float64;
    }
    let ir = d.path().join("f64.ir");
    write_ir(&p, &ir);
    refused_by_every_tool(
        &ir,
        &["fc1.weight", "declares it float64", "payload is float32"],
        "float64 over float32",
    );
}

#[test]
fn recorded_sizes_whose_element_count_overflows_are_refused() {
    let d = tempfile::tempdir().unwrap();
    let mut p = read_pt2("golden/models/mlp.pt2");
    let last = p.graph.nodes.len() - 1;
    let out = match p.graph.nodes[last].outputs[0] {
        Argument::Tensor(v) => v,
        _ => panic!(),
    };
    if let ValueKind::Tensor(m) = &mut p.graph.values[out.index()].kind {
        m.sizes = vec![Sym::Int(1 << 32), Sym::Int(1 << 32)];
    }
    let ir = d.path().join("huge.ir");
    write_ir(&p, &ir);
    for (exe, extra) in [
        (DECOMPOSE, vec![]),
        (IR2ONNX, vec![]),
        (RUN, vec!["--random"]),
    ] {
        let mut a = vec![s(&ir)];
        a.extend(extra);
        let o = run(exe, &a);
        assert_eq!(
            o.status.code(),
            Some(3),
            "{exe}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
    }
}

#[test]
fn a_negative_pad_beyond_the_tensor_is_refused_by_the_shape_rule() {
    use pt2kit::decompose::edit::{Emitter, Names};
    let d = tempfile::tempdir().unwrap();
    let mut p = Program::default();
    p.info.verifiers = vec!["TRAINING".into()];
    p.graph.values.push(pt2kit::ir::Value {
        name: "x".into(),
        kind: ValueKind::Tensor(TensorMeta::contiguous(Dtype::Float32, &[4])),
    });
    let x = pt2kit::ir::ValueId(0);
    p.graph.inputs.push(Argument::Tensor(x));
    p.input_kinds.push(pt2kit::ir::InputKind::UserInput);
    let mut names = Names::of(&p.graph);
    let mut em = Emitter::new(&mut p.graph.values, &mut names, Default::default());
    let y = em
        .op(
            "aten.constant_pad_nd.default",
            vec![
                ("self", Argument::Tensor(x)),
                ("pad", Argument::Ints(vec![-6, 3])),
            ],
            TensorMeta::contiguous(Dtype::Float32, &[1]),
        )
        .unwrap();
    let nodes = em.nodes;
    p.graph.nodes.extend(nodes);
    p.graph.outputs.push(Argument::Tensor(y));
    p.output_kinds.push(pt2kit::ir::OutputKind::UserOutput);
    let ir = d.path().join("pad.ir");
    write_ir(&p, &ir);
    let inputs = d.path().join("x.npz");
    npz(&inputs, vec![("x", f32_zeros(&[4]))]);
    for (exe, extra) in [
        (DECOMPOSE, vec![]),
        (IR2ONNX, vec![]),
        (RUN, vec!["--inputs", s(&inputs)]),
    ] {
        let mut a = vec![s(&ir)];
        a.extend(extra);
        ends_with(
            &run(exe, &a),
            3,
            &["constant_pad_nd", "cuts more than dim 0 of size 4"],
            exe,
        );
    }
}

/// The cond fixture with each branch returning one value more than the
/// node declares: torch reads the node's outputs by position and runs
/// it; so do ir-run and the ONNX ir2onnx writes. A branch with fewer is
/// refused at load.
#[test]
fn cond_branches_with_more_outputs_run_as_torch_runs_them() {
    let d = tempfile::tempdir().unwrap();
    let grow = |p: &mut Program, more: bool| {
        for n in &mut p.graph.nodes {
            if n.target.to_string() == "higher_order.cond" {
                for a in &mut n.inputs {
                    if let Argument::Graph(g) = &mut a.arg {
                        if more {
                            let o = g.graph.outputs[0].clone();
                            g.graph.outputs.push(o);
                        } else {
                            g.graph.outputs.clear();
                        }
                    }
                }
            }
        }
    };
    let mut p = read_pt2("golden/models/cond.pt2");
    grow(&mut p, true);
    let ir = d.path().join("more.ir");
    write_ir(&p, &ir);
    let out = d.path().join("out.npz");
    let o = run(
        RUN,
        &[
            s(&ir),
            "--inputs",
            "golden/models/cond.inputs.npz",
            "-o",
            s(&out),
        ],
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let o = run(
        DIFF,
        &[s(&out), "golden/models/cond.expected.npz", "--by-position"],
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stdout));
    let onnx = d.path().join("more.onnx");
    let o = run(IR2ONNX, &[s(&ir), "-o", s(&onnx)]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    use pt2kit::export::onnx::proto::{Message, ModelProto};
    let m = ModelProto::parse_from_bytes(&std::fs::read(&onnx).unwrap()).unwrap();
    let if_node = m.graph.node.iter().find(|n| n.op_type == "If").unwrap();
    for a in &if_node.attribute {
        assert_eq!(a.g.output.len(), if_node.output.len(), "{}", a.name);
    }
    let mut p = read_pt2("golden/models/cond.pt2");
    grow(&mut p, false);
    let ir = d.path().join("fewer.ir");
    write_ir(&p, &ir);
    ends_with(
        &run(RUN, &[s(&ir), "--inputs", "golden/models/cond.inputs.npz"]),
        3,
        &["returns 0 values, but the node has 1 outputs"],
        "fewer",
    );
}
