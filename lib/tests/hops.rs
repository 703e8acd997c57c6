//! Every higher-order op torch registers has an answer: a row in both back
//! ends, a decomposition rule (which every tool applies), or a refusal
//! with its reason (`decompose::hops::REFUSED`). The list is torch's
//! (`lib/data/higher_order_ops.txt`, written by `recipes/fixtures/gen_hop_list.py`),
//! so a new torch's new higher-order op fails here until it has one.

#![cfg(feature = "exec")]

use std::collections::BTreeSet;

use pt2kit::decompose::{autocast, hops, rules};

const LIST: &str = include_str!("../data/higher_order_ops.txt");

/// (name, whether torch.export writes it).
fn torch_hops() -> Vec<(&'static str, bool)> {
    LIST.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(|l| {
            let (name, export) = l.split_once(' ').expect("name and export column");
            assert!(
                export == "export" || export == "no",
                "{name}: export column {export}"
            );
            (name, export == "export")
        })
        .collect()
}

#[test]
fn every_higher_order_op_is_handled_or_refused_with_a_reason() {
    let exec: BTreeSet<&str> = pt2kit::exec::ops::supported().collect();
    let onnx: BTreeSet<String> = pt2kit::export::onnx::supported_ops()
        .into_iter()
        .map(String::from)
        .collect();
    let list = torch_hops();
    assert!(
        list.len() >= 40,
        "only {} higher-order ops listed",
        list.len()
    );
    let mut failures = Vec::new();
    for (name, _) in &list {
        let id = format!("higher_order.{name}");
        let rule = rules::rule_for(&id).is_some();
        let rows = exec.contains(id.as_str()) && onnx.contains(&id);
        let refused = hops::REFUSED.iter().find(|(n, _)| n == name);
        match (rule || rows, refused) {
            (false, None) => failures.push(format!("{id}: no rule, no rows, no refusal")),
            (true, Some(_)) => failures.push(format!("{id}: handled and refused")),
            (false, Some((_, why))) if why.len() < 20 => {
                failures.push(format!("{id}: a refusal without a reason ({why:?})"))
            }
            _ => {}
        }
        if !rule && (exec.contains(id.as_str()) != onnx.contains(&id)) {
            failures.push(format!(
                "{id}: a row in one back end only (ir-run {}, ir2onnx {})",
                exec.contains(id.as_str()),
                onnx.contains(&id)
            ));
        }
    }
    let names: BTreeSet<&str> = list.iter().map(|(n, _)| *n).collect();
    for (name, _) in hops::REFUSED {
        if !names.contains(name) {
            failures.push(format!("refusal of {name}, which torch does not register"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// docs/coverage.md names every higher-order op torch.export writes.
#[test]
fn the_coverage_page_names_every_higher_order_op_export_writes() {
    let doc = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/coverage.md"),
    )
    .unwrap();
    let missing: Vec<&str> = torch_hops()
        .into_iter()
        .filter(|(name, export)| *export && !doc.contains(&format!("`{name}`")))
        .map(|(n, _)| n)
        .collect();
    assert!(missing.is_empty(), "docs/coverage.md lacks {missing:?}");
}

/// Every op of the autocast policy table is an op torch registers.
#[test]
fn the_autocast_policy_names_registered_ops() {
    let policy = autocast::policy();
    assert!(policy.len() > 100, "{} ops", policy.len());
    let unknown: Vec<&&str> = policy
        .keys()
        .filter(|op| {
            let (name, overload) = op.split_once('.').unwrap();
            pt2kit::schema::lookup("aten", name, overload).is_none()
        })
        .collect();
    assert!(unknown.is_empty(), "not registered: {unknown:?}");
    assert_eq!(
        policy.get("linear.default"),
        Some(&autocast::Cast::LowerPrecision)
    );
    assert_eq!(policy.get("cat.default"), Some(&autocast::Cast::Promote));
    assert_eq!(policy.get("softmax.int"), None);
}

/// A refused higher-order op is refused by name, with its reason, by
/// `ir-run` and `ir2onnx` (here: hints_wrapper's node renamed).
#[test]
fn a_refused_higher_order_op_is_refused_with_its_reason() {
    let pt2 = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../golden/hop/hop_hints.pt2");
    let mut p = pt2kit::import::pt2::read_pt2(&pt2, &Default::default()).unwrap();
    let node = p
        .graph
        .nodes
        .iter_mut()
        .find(|n| n.target.name == "hints_wrapper")
        .unwrap();
    node.target.name = "flex_attention".into();
    let why = hops::REFUSED
        .iter()
        .find(|(n, _)| *n == "flex_attention")
        .unwrap()
        .1;
    let device = pt2kit::exec::device(pt2kit::exec::DeviceKind::Cpu).unwrap();
    let Err(err) = pt2kit::exec::Executor::new(&p, device) else {
        panic!("the executor took higher_order.flex_attention");
    };
    assert!(
        err.message.contains("higher_order.flex_attention") && err.message.contains(why),
        "{}",
        err.message
    );
    // ir2onnx lowers through the same fallback, with its own rows.
    let Err(err) =
        pt2kit::decompose::fallback::lower_unsupported(&p, pt2kit::export::onnx::converts)
    else {
        panic!("ir2onnx's fallback took higher_order.flex_attention");
    };
    assert!(err.message.contains(why), "{}", err.message);
}
