//! The `.pt2` reader against every committed fixture: listings match their
//! goldens, the IR round-trips byte for byte through the wire format, weights
//! match the checksums torch recorded, and every node torch wrote is read.

mod common;

use std::collections::BTreeMap;
use std::path::Path;

use common::*;
use pt2kit::import::pt2::{read_pt2, ImportOptions};
use pt2kit::ir::Program;
use pt2kit::{text, wire};

fn read(p: &Path) -> Program {
    read_pt2(p, &ImportOptions::default()).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

fn meta(p: &Path) -> Option<serde_json::Value> {
    let name = stem(p);
    let model = name.trim_end_matches(".decomp");
    let path = p.parent()?.join(format!("{model}.meta.json"));
    let text = std::fs::read_to_string(path).ok()?;
    serde_json::from_str(&text).ok()
}

fn check_listings(files: &[std::path::PathBuf]) {
    let failures: Vec<String> = files
        .iter()
        .filter_map(|p| {
            check_golden(
                &format!("golden/listings/{}.txt", stem(p)),
                &text::listing(&read(p)),
            )
        })
        .collect();
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn listings_match_goldens() {
    check_listings(&fixtures());
}

#[test]
#[ignore = "needs golden/big (make big); run by make test-big"]
fn big_listings_match_goldens() {
    check_listings(&big_fixtures());
}

fn check_round_trip(p: &Path) {
    let program = read(p);
    let first = wire::encode_program(&program).unwrap();
    let decoded = wire::read_program(&mut first.as_slice(), "stream").unwrap();
    let second = wire::encode_program(&decoded).unwrap();
    assert!(first == second, "{}: re-encoding differs", p.display());
    assert_eq!(
        text::listing(&program),
        text::listing(&decoded),
        "{}",
        p.display()
    );
    assert_eq!(text::yaml(&program).unwrap(), text::yaml(&decoded).unwrap());
}

#[test]
fn wire_round_trip_is_byte_identical() {
    fixtures().iter().for_each(|p| check_round_trip(p));
}

#[test]
#[ignore = "needs golden/big (make big); run by make test-big"]
fn big_wire_round_trip_is_byte_identical() {
    big_fixtures().iter().for_each(|p| check_round_trip(p));
}

#[test]
fn weights_match_torch_checksums() {
    let mut checked = 0;
    for p in fixtures()
        .iter()
        .filter(|p| p.starts_with(repo().join("golden/models")))
    {
        let program = read(p);
        let meta = meta(p).expect("meta.json");
        let crcs = meta["weights_crc32"].as_object().expect("weights_crc32");
        for (name, crc) in crcs {
            let w = program
                .weights
                .iter()
                .find(|w| &w.name == name)
                .unwrap_or_else(|| panic!("{}: weight {name} not read", p.display()));
            let ours = format!("{:08x}", crc32fast::hash(&program.weight_bytes(w)));
            assert_eq!(
                &ours,
                crc.as_str().unwrap(),
                "{}: weight {name}",
                p.display()
            );
            checked += 1;
        }
    }
    assert!(checked > 50, "only {checked} weights checked");
}

/// Node targets, counted over the graph and its subgraphs, as the recipe
/// counts them from torch's graph.
fn histogram(program: &Program) -> BTreeMap<String, u64> {
    let mut h = BTreeMap::new();
    program.graph.visit_nodes(&mut |n| {
        *h.entry(n.target.to_string()).or_insert(0) += 1;
    });
    h
}

#[test]
fn every_node_torch_wrote_is_read() {
    for p in fixtures()
        .iter()
        .filter(|p| p.starts_with(repo().join("golden/models")))
    {
        let program = read(p);
        let meta = meta(p).unwrap();
        let key = if stem(p).ends_with(".decomp") {
            "ops_decomp"
        } else {
            "ops_training"
        };
        let expected: BTreeMap<String, u64> = meta[key]
            .as_object()
            .unwrap()
            .iter()
            .map(|(k, v)| (k.clone(), v.as_u64().unwrap()))
            .collect();
        assert_eq!(histogram(&program), expected, "{}", p.display());
        let inputs: Vec<String> = program
            .user_inputs()
            .iter()
            .map(|(i, _)| {
                program.graph.values[match &program.graph.inputs[*i] {
                    pt2kit::ir::Argument::Tensor(v) => v.index(),
                    other => panic!("{other:?}"),
                }]
                .name
                .clone()
            })
            .collect();
        let expected_inputs: Vec<String> = meta["user_inputs"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap().to_string())
            .collect();
        assert_eq!(inputs, expected_inputs, "{}", p.display());
    }
}

#[test]
fn dialects_and_mutations_are_kept() {
    let training = read(&repo().join("golden/models/bufconst.pt2"));
    assert_eq!(training.dialect(), "TRAINING");
    assert!(histogram(&training).contains_key("aten.add_.Tensor"));
    let aten = read(&repo().join("golden/models/bufconst.decomp.pt2"));
    assert_eq!(aten.dialect(), "ATEN");
    assert!(aten
        .output_kinds
        .iter()
        .any(|k| matches!(k, pt2kit::ir::OutputKind::BufferMutation(b) if b == "counter")));
}

#[test]
fn dynamic_dims_keep_symbols_and_ranges() {
    let p = read(&repo().join("golden/models/dynamic.pt2"));
    assert_eq!(p.range_constraints.len(), 1);
    let r = &p.range_constraints[0];
    assert_eq!((r.min, r.max), (Some(1), Some(64)));
    let x = p.graph.find_value("x").unwrap();
    match &p.graph.value(x).kind {
        pt2kit::ir::ValueKind::Tensor(m) => {
            assert_eq!(text::sym_text(&m.sizes[0]), r.symbol);
            assert!(m.sizes[1].as_int() == Some(4));
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn omitted_defaults_are_filled_from_schemas() {
    let p = read(&repo().join("golden/models/multiout.pt2"));
    let topk = p
        .graph
        .nodes
        .iter()
        .find(|n| n.target.name == "topk")
        .unwrap();
    let names: Vec<&str> = topk.inputs.iter().map(|a| a.name.as_str()).collect();
    assert_eq!(names, ["self", "k", "dim", "largest", "sorted"]);
    assert!(matches!(
        topk.arg("largest"),
        Some(pt2kit::ir::Argument::Bool(true))
    ));
    assert!(
        topk.inputs
            .iter()
            .find(|a| a.name == "largest")
            .unwrap()
            .defaulted
    );
    assert!(
        !topk
            .inputs
            .iter()
            .find(|a| a.name == "k")
            .unwrap()
            .defaulted
    );
}

#[test]
fn legacy_layouts_read_the_same_program() {
    let modern = read(&repo().join("golden/models/mlp.pt2"));
    for legacy in [
        "golden/legacy/legacy_zip_mlp.pt2",
        "golden/legacy/legacy_pickled_mlp.pt2",
    ] {
        let old = read(&repo().join(legacy));
        assert_ne!(old.info.archive_layout, modern.info.archive_layout);
        let body = |p: &Program| {
            text::listing(p)
                .lines()
                .skip(2)
                .collect::<Vec<_>>()
                .join("\n")
        };
        assert_eq!(body(&old), body(&modern), "{legacy}");
    }
}

#[test]
fn stdin_bytes_read_like_a_file() {
    let path = repo().join("golden/models/cnn.pt2");
    let from_file = read(&path);
    let from_bytes = pt2kit::import::pt2::read_pt2_bytes(
        "<stdin>",
        std::fs::read(&path).unwrap(),
        &ImportOptions::default(),
    )
    .unwrap();
    assert_eq!(text::listing(&from_file), text::listing(&from_bytes));
}
