//! `ir2onnx` as a user runs it: every fixture converts at every supported
//! opset with its names, dims and weights intact; unsupported ops fail
//! with all their node names and write nothing (or become custom-domain
//! nodes with --allow-custom); external data lands beside the model.
//!
//! Numerical agreement with torch is checked by `recipes/checks/check_onnx.py`
//! (ONNX's checker and ONNX Runtime), which needs Python.

use std::collections::HashMap;
use std::io::Write;
use std::path::Path;
use std::process::{Command, Output, Stdio};

use pt2kit::export::onnx::proto::{tensor_proto::DataLocation, GraphProto, Message, ModelProto};
use pt2kit::ir::{Target, TargetKind};

mod common;
use common::{repo, run_ok};

fn ir2onnx() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_ir2onnx"));
    c.current_dir(repo());
    c
}

/// The IR of a fixture, via the real pt2ir.
fn ir_of(fixture: &str) -> Vec<u8> {
    let mut pt2ir = Command::new(env!("CARGO_BIN_EXE_pt2ir"));
    pt2ir
        .current_dir(repo())
        .arg(format!("golden/models/{fixture}"));
    run_ok(&mut pt2ir, &format!("pt2ir {fixture}")).stdout
}

/// Runs ir2onnx with the IR on stdin.
fn run(ir: &[u8], args: &[&str]) -> Output {
    let mut child = ir2onnx()
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let ir = ir.to_vec();
    let writer = std::thread::spawn(move || {
        let _ = stdin.write_all(&ir);
    });
    let out = child.wait_with_output().unwrap();
    writer.join().unwrap();
    out
}

fn load(path: &Path) -> ModelProto {
    ModelProto::parse_from_bytes(&std::fs::read(path).unwrap()).unwrap()
}

fn fixtures() -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(repo().join("golden/models"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().to_string())
        .filter(|n| n.ends_with(".pt2"))
        .collect();
    names.sort();
    names
}

/// Every committed fixture (both dialects) converts at opsets 17 to 21,
/// with user input names, symbolic dims, state-dict weight names and only
/// standard ops.
#[test]
fn every_fixture_converts_at_every_opset() {
    let dir = tempfile::tempdir().unwrap();
    let fixtures = fixtures();
    assert!(fixtures.len() >= 20, "{fixtures:?}");
    for fixture in fixtures {
        let ir = ir_of(&fixture);
        let program = pt2kit::wire::read_program(&mut ir.as_slice(), &fixture).unwrap();
        let user_inputs: Vec<String> = program
            .user_inputs()
            .iter()
            .filter_map(|(_, a)| match a {
                pt2kit::ir::Argument::Tensor(v) => Some(program.graph.value(*v).name.clone()),
                _ => None,
            })
            .collect();
        let weight_names: Vec<&str> = program.weights.iter().map(|w| w.name.as_str()).collect();
        for opset in 17..=21 {
            let path = dir.path().join(format!("{fixture}.{opset}.onnx"));
            let out = run(
                &ir,
                &["--opset", &opset.to_string(), "-o", path.to_str().unwrap()],
            );
            assert!(
                out.status.success(),
                "{fixture} at opset {opset}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            let model = load(&path);
            assert_eq!(model.producer_name, "pt2kit");
            assert_eq!(
                model.ir_version,
                pt2kit::export::onnx::ir_version_for(opset)
            );
            assert!(model
                .opset_import
                .iter()
                .any(|o| o.domain.is_empty() && o.version == opset));
            let graph = model.graph.as_ref().unwrap();
            let inputs: Vec<&str> = graph.input.iter().map(|i| i.name.as_str()).collect();
            assert_eq!(inputs, user_inputs, "{fixture}");
            assert!(graph.node.iter().all(|n| n.domain.is_empty()), "{fixture}");
            for init in &graph.initializer {
                assert!(
                    weight_names.contains(&init.name.as_str()),
                    "{fixture}: {}",
                    init.name
                );
            }
            assert!(graph.output.iter().any(|o| o.doc_string == "user output"));
        }
    }
}

/// A dynamic dim becomes a dim_param named after the IR's symbol, on the
/// input and the output.
#[test]
fn symbolic_dims_are_named() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("dynamic.onnx");
    let out = run(
        &ir_of("dynamic.decomp.pt2"),
        &["-o", path.to_str().unwrap()],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let model = load(&path);
    let graph = model.graph.as_ref().unwrap();
    for value in [&graph.input[0], &graph.output[0]] {
        let text = format!("{value:?}");
        assert!(text.contains("DimParam(\"s77\")"), "{text}");
    }
    assert!(graph.input[0].doc_string.contains("s77 in [1, 64]"));
}

/// Every name a graph and its subgraphs define, in order.
fn defined_names(graph: &GraphProto, out: &mut Vec<String>) {
    out.extend(graph.input.iter().map(|i| i.name.clone()));
    out.extend(graph.initializer.iter().map(|i| i.name.clone()));
    for node in &graph.node {
        out.extend(node.output.iter().filter(|o| !o.is_empty()).cloned());
        for a in &node.attribute {
            if let Some(g) = a.g.as_ref() {
                defined_names(g, out);
            }
        }
    }
}

/// Control flow keeps its structure: cond becomes an If, while_loop a
/// Loop with no trip count (body inputs: iteration number, condition,
/// carried values; outputs: next condition, carried values), map a Scan
/// over every mapped tensor; no name is defined twice in the model,
/// subgraphs included (ONNX forbids shadowing).
#[test]
fn control_flow_becomes_if_loop_and_scan() {
    let dir = tempfile::tempdir().unwrap();
    for (fixture, op) in [
        ("cond.pt2", "If"),
        ("whileloop.pt2", "Loop"),
        ("whileloop.decomp.pt2", "Loop"),
        ("map.pt2", "Scan"),
        ("map.decomp.pt2", "Scan"),
    ] {
        let path = dir.path().join(format!("{fixture}.onnx"));
        let out = run(&ir_of(fixture), &["-o", path.to_str().unwrap()]);
        assert!(
            out.status.success(),
            "{fixture}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let model = load(&path);
        let graph = model.graph.as_ref().unwrap();
        let mut names = Vec::new();
        defined_names(graph, &mut names);
        let mut seen = std::collections::HashSet::new();
        for n in &names {
            assert!(seen.insert(n), "{fixture}: {n} is defined twice");
        }
        let node = graph.node.iter().find(|n| n.op_type == op).unwrap();
        let body = node.attribute.iter().find(|a| a.name == "body");
        match op {
            "Loop" => {
                let body = body.unwrap().g.as_ref().unwrap();
                assert_eq!(node.input[0], "", "{fixture}: a trip count");
                let carried = node.input.len() - 2;
                assert_eq!(node.output.len(), carried, "{fixture}");
                assert_eq!(body.input.len(), 2 + carried, "{fixture}");
                assert_eq!(body.output.len(), 1 + carried, "{fixture}");
            }
            "Scan" => {
                let scanned = node
                    .attribute
                    .iter()
                    .find(|a| a.name == "num_scan_inputs")
                    .unwrap()
                    .i;
                assert_eq!(scanned as usize, node.input.len(), "{fixture}");
                let body = body.unwrap().g.as_ref().unwrap();
                assert_eq!(body.input.len(), node.input.len(), "{fixture}");
                assert_eq!(body.output.len(), node.output.len(), "{fixture}");
            }
            _ => assert_eq!(node.attribute.len(), 2, "{fixture}: two branches"),
        }
    }
}

/// Rewrites two nodes of a fixture's IR to an op nobody converts.
fn ir_with_unknown_ops() -> Vec<u8> {
    let ir = ir_of("mlp.decomp.pt2");
    let mut program = pt2kit::wire::read_program(&mut ir.as_slice(), "mlp").unwrap();
    let mut renamed = 0;
    for node in program.graph.nodes.iter_mut() {
        if node.target.name == "relu" || node.name == "addmm_1" {
            node.target = Target {
                kind: TargetKind::Op,
                namespace: "aten".into(),
                name: "frobnicate".into(),
                overload: "default".into(),
            };
            renamed += 1;
        }
    }
    assert_eq!(renamed, 2);
    pt2kit::wire::encode_program(&program).unwrap()
}

/// Every unsupported node is listed at once, the exit code is 4 and no
/// file is written.
#[test]
fn unsupported_ops_fail_listing_every_node() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("model.onnx");
    let out = run(&ir_with_unknown_ops(), &["-o", path.to_str().unwrap()]);
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert_eq!(out.status.code(), Some(4), "{stderr}");
    assert!(
        stderr.starts_with("ir2onnx: error: cannot convert 2 nodes"),
        "{stderr}"
    );
    assert!(
        stderr.contains("node 'relu' (aten.frobnicate.default)"),
        "{stderr}"
    );
    assert!(
        stderr.contains("node 'addmm_1' (aten.frobnicate.default)"),
        "{stderr}"
    );
    assert!(!path.exists());
    assert_eq!(
        std::fs::read_dir(dir.path()).unwrap().count(),
        0,
        "a temporary file was left"
    );
}

/// --allow-custom writes them as nodes of a custom domain instead.
#[test]
fn allow_custom_writes_custom_domain_nodes() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("model.onnx");
    let out = run(
        &ir_with_unknown_ops(),
        &["--allow-custom", "-o", path.to_str().unwrap()],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let model = load(&path);
    let graph = model.graph.as_ref().unwrap();
    let custom: Vec<_> = graph
        .node
        .iter()
        .filter(|n| n.domain == "pt2kit.aten")
        .map(|n| (n.name.as_str(), n.op_type.as_str()))
        .collect();
    assert_eq!(custom, [("relu", "frobnicate"), ("addmm_1", "frobnicate")]);
    assert!(model
        .opset_import
        .iter()
        .any(|o| o.domain == "pt2kit.aten" && o.version == 1));
    // The output keeps its IR name, produced by the custom node.
    assert_eq!(graph.output[0].name, "addmm_1");
}

/// Weights above the threshold go to MODEL.data beside the model, each
/// initializer pointing at its bytes, which are those of the inline model.
#[test]
fn external_data_beside_the_model() {
    let dir = tempfile::tempdir().unwrap();
    let ir = ir_of("cnn.decomp.pt2");
    let inline_path = dir.path().join("inline.onnx");
    let out = run(&ir, &["-o", inline_path.to_str().unwrap()]);
    assert!(out.status.success());
    let inline = load(&inline_path);
    let inline_bytes: HashMap<String, Vec<u8>> = inline
        .graph
        .initializer
        .iter()
        .map(|t| (t.name.clone(), t.raw_data.clone()))
        .collect();
    assert!(!inline_bytes.is_empty());
    assert!(!dir.path().join("inline.onnx.data").exists());

    for args in [
        &["--external-data-threshold", "100"][..],
        &["--external-data"][..],
    ] {
        let path = dir.path().join("model.onnx");
        let mut all = args.to_vec();
        all.extend(["-o", path.to_str().unwrap()]);
        let out = run(&ir, &all);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let data = std::fs::read(dir.path().join("model.onnx.data")).unwrap();
        let model = load(&path);
        assert!(
            std::fs::metadata(&path).unwrap().len()
                < std::fs::metadata(&inline_path).unwrap().len()
        );
        for t in &model.graph.initializer {
            assert_eq!(
                t.data_location.enum_value(),
                Ok(DataLocation::EXTERNAL),
                "{}",
                t.name
            );
            assert!(t.raw_data.is_empty());
            let entry = |key: &str| {
                t.external_data
                    .iter()
                    .find(|e| e.key == key)
                    .map(|e| e.value.clone())
                    .unwrap()
            };
            assert_eq!(entry("location"), "model.onnx.data");
            let offset: usize = entry("offset").parse().unwrap();
            let length: usize = entry("length").parse().unwrap();
            assert_eq!(
                &data[offset..offset + length],
                inline_bytes[&t.name].as_slice(),
                "{}",
                t.name
            );
        }
        std::fs::remove_file(dir.path().join("model.onnx.data")).unwrap();
    }
}

/// External data needs a file to sit beside.
#[test]
fn external_data_to_stdout_is_refused() {
    let out = run(&ir_of("mlp.pt2"), &["--external-data"]);
    assert_eq!(
        out.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.stdout.is_empty());
    assert!(String::from_utf8_lossy(&out.stderr).contains("-o FILE"));
}

/// Standard input to standard output, as in `pt2ir m.pt2 | ir2onnx > m.onnx`.
#[test]
fn pipes_through() {
    let out = run(&ir_of("mlp.pt2"), &["--stats"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let model = ModelProto::parse_from_bytes(&out.stdout).unwrap();
    assert_eq!(model.graph.initializer.len(), 4);
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(stderr.contains("aten.linear.default"), "{stderr}");
    assert!(stderr.contains("Gemm"), "{stderr}");
}

#[test]
fn unsupported_opsets_are_usage_errors() {
    for opset in ["16", "22"] {
        let out = run(&ir_of("mlp.pt2"), &["--opset", opset]);
        assert_eq!(
            out.status.code(),
            Some(2),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

/// The fallback lowers what the emitter table lacks and `-v` says into
/// what: torch's FFT of `fb_fft` into `_fft_r2c`, its complex values into
/// real pairs and ONNX `DFT`. What it cannot lower is refused by name with
/// the reason (exit 4, nothing written): an op on complex values with no
/// real-pair form, and complex inputs and outputs, which ONNX Runtime's
/// kernels do not take.
#[test]
fn the_fallback_lowers_what_it_can_and_names_the_rest() {
    let ir = ir_of("../fallback/fb_fft.pt2");
    let dir = tempfile::tempdir().unwrap();
    let out_path = dir.path().join("m.onnx");
    let out = run(&ir, &["-v", "-o", out_path.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    for line in [
        "ir2onnx: node fft_rfft (aten.fft_rfft.default) lowered into aten._fft_r2c.default",
        "ir2onnx: node fft_rfft (aten._fft_r2c.default) lowered into aten.unsqueeze.default, pt2kit.dft.default",
    ] {
        assert!(err.contains(line), "{err}");
    }
    let model = load(&out_path);
    assert!(
        model.graph.node.iter().any(|n| n.op_type == "DFT"),
        "no DFT node"
    );
    std::fs::remove_file(&out_path).unwrap();
    // tanh of complex values: no real-pair form
    let mut program = pt2kit::import::pt2::read_pt2(
        &repo().join("golden/complex/cx_arith.pt2"),
        &pt2kit::import::pt2::ImportOptions::default(),
    )
    .unwrap();
    for n in &mut program.graph.nodes {
        if n.target.name == "exp" {
            n.target.name = "tanh".into();
        }
    }
    let ir = pt2kit::wire::encode_program(&program).unwrap();
    let out = run(&ir, &["-o", out_path.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(4), "{err}");
    assert!(
        err.contains(
            "node exp (aten.tanh.default): complex values (c64) through this op are not supported"
        ),
        "{err}"
    );
    assert!(!out_path.exists());
    // complex inputs and outputs
    let out = run(
        &ir_of("../complex/cx_io.pt2"),
        &["-o", out_path.to_str().unwrap()],
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(4), "{err}");
    assert!(
        err.contains("input 'z' is complex64, input 'd' is complex128, output 'add' is complex64"),
        "{err}"
    );
    assert!(
        err.contains("ONNX Runtime's kernels take no complex tensors"),
        "{err}"
    );
    assert!(!out_path.exists());
    // cdist, pdist and embedding_bag lower to core ops that convert.
    let ir = ir_of("../fallback/fb_dist.pt2");
    let out = run(&ir, &["-v", "-o", out_path.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(
        err.contains(
            "ir2onnx: node cdist (aten.cdist.default) lowered into aten._cdist_forward.default"
        ),
        "{err}"
    );
    // A write through a view (`y[0].fill_(2)`) reaches its base in ONNX:
    // the TRAINING graph is functionalised first.
    let ir = ir_of("../fallback/fb_inplace.pt2");
    let out = run(&ir, &["-v", "-o", "-"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(err.contains("functionalized"), "{err}");
}

/// `--external-data-in-archive`: with weights that came by reference from
/// a .pt2, every initializer's external data is its place in the archive
/// (the bytes there are the weight's, byte for byte). Beside the archive
/// the model names it; elsewhere MODEL.onnx.data is a hard link to it;
/// onto standard output it is a usage error.
#[test]
fn external_data_in_the_archive_points_at_the_weights() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::copy(repo().join("golden/models/bert.pt2"), d.join("bert.pt2")).unwrap();
    std::fs::create_dir(d.join("elsewhere")).unwrap();
    let program = pt2kit::import::pt2::read_pt2(
        &d.join("bert.pt2"),
        &pt2kit::import::pt2::ImportOptions::default(),
    )
    .unwrap();
    let convert = |out: &str| {
        Command::new("bash")
            .arg("-c")
            .arg(format!(
                "set -o pipefail; {} bert.pt2 | {} --external-data-in-archive -o {out}",
                env!("CARGO_BIN_EXE_pt2ir"),
                env!("CARGO_BIN_EXE_ir2onnx")
            ))
            .current_dir(d)
            .output()
            .unwrap()
    };
    let archive = std::fs::read(d.join("bert.pt2")).unwrap();
    for (out, location) in [("m.onnx", "bert.pt2"), ("elsewhere/m.onnx", "m.onnx.data")] {
        let o = convert(out);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let model = load(&d.join(out));
        let mut checked = 0;
        for t in &model.graph.initializer {
            if t.data_location.enum_value() != Ok(DataLocation::EXTERNAL) {
                continue;
            }
            let kv: HashMap<&str, &str> = t
                .external_data
                .iter()
                .map(|e| (e.key.as_str(), e.value.as_str()))
                .collect();
            assert_eq!(kv["location"], location, "{}", t.name);
            let (off, len): (usize, usize) =
                (kv["offset"].parse().unwrap(), kv["length"].parse().unwrap());
            let w = program.weights.iter().find(|w| w.name == t.name).unwrap();
            assert!(
                archive[off..off + len] == program.weight_bytes(w)[..],
                "{}",
                t.name
            );
            checked += 1;
        }
        assert!(checked > 10, "{out}: {checked} initializers checked");
    }
    // elsewhere: a hard link to the archive, not a copy
    use std::os::unix::fs::MetadataExt;
    let (a, l) = (
        std::fs::metadata(d.join("bert.pt2")).unwrap(),
        std::fs::metadata(d.join("elsewhere/m.onnx.data")).unwrap(),
    );
    assert_eq!((a.dev(), a.ino()), (l.dev(), l.ino()));
    // no file to put external data beside: a usage error
    let o = convert("-");
    assert_eq!(
        o.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(String::from_utf8_lossy(&o.stderr)
        .contains("must go to an external data file beside the model:"));
}

/// What ir2onnx refuses by design in the numerics fixtures, each by name
/// and with the reason (exit 4, nothing written): a float64 convolution
/// (ONNX Runtime has no float64 Conv), and integer bitwise ops below
/// opset 18 (BitwiseAnd and BitwiseOr come in 18).
#[test]
fn float64_convolutions_and_early_bitwise_ops_are_refused_with_the_reason() {
    let dir = tempfile::tempdir().unwrap();
    let out_path = dir.path().join("m.onnx");
    let out = run(
        &ir_of("../numerics/num_f64_conv.pt2"),
        &["-o", out_path.to_str().unwrap()],
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(4), "{err}");
    assert!(
        err.contains("ONNX Runtime's CPU provider has no float64 Conv kernel"),
        "{err}"
    );
    assert!(!out_path.exists());
    let out = run(
        &ir_of("../numerics/num_int8.pt2"),
        &["--opset", "17", "-o", out_path.to_str().unwrap()],
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(4), "{err}");
    assert!(
        err.contains("BitwiseAnd on integers needs opset 18"),
        "{err}"
    );
    assert!(!out_path.exists());
}
