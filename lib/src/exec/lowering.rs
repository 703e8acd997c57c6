//! The program as the executor runs it on the CPU: a graph as exported is
//! lowered at load the way `ir-decompose` lowers it, so `pt2ir | ir-run`
//! plans the same nodes, fusions and kernels as `pt2ir | ir-decompose |
//! ir-run`.
//!
//! As exported, a graph holds composites (`conv2d`, `batch_norm`,
//! `linear`, `adaptive_avg_pool2d`) and in-place activations (`relu_`,
//! `hardswish_`, `add_`). The executor has rows for them, but the plan is
//! poorer there: a batch norm between a convolution and its activation
//! keeps the activation out of the convolution's epilogue, an in-place op
//! joins no fused chain, and no weight is folded. Lowered (functionalised,
//! every op with a rule lowered to core ATen but the few whose row is
//! faster ([`KEPT`]), then `ir-decompose`'s default passes: `dce`, `fold`,
//! `cse`, `bn-fold`), MobileNetV3-small at batch 1 ran in 1.84 ms against
//! 2.73 ms as exported (two threads, AVX-512, one sitting); on a loaded
//! machine, paired over ten rounds, as given took 1.62x the lowered IR's
//! time and this plan 1.05x, ResNet-18 1.20x and 1.02x. The seven models
//! of `make bench-compare` plan the same nodes either way.
//!
//! It is a plan, not a requirement: a program in core ATen that the
//! passes leave as it is (what `ir-decompose` wrote) is run as it is, and a
//! program that a rule or a pass cannot lower whole
//! (a rule that needs a static size the graph leaves symbolic, say) runs as
//! given, its missing ops lowered by the fallback alone
//! (`decompose::fallback`). Off on other devices, while a run records
//! every node's value (`ExecOptions::as_given`: `ir-run --intermediates`
//! names the values of the program as given), and with
//! `PT2KIT_AS_GIVEN=1` (for timing a run both ways).

use crate::decompose::{self, Policy};
use crate::ir::op::{aten, quantized_decomposed as qd};
use crate::ir::{Program, TargetKind};

/// Ops left to their native rows, where the row is faster than what the
/// rule lowers them into: the LSTM's one kernel over the sequence against
/// the rule's cells, one set of nodes a step (the `lstm` fixture, 10 steps:
/// 57 against 61 us); PT2E int8's per-tensor quantize and dequantize, one
/// pass over uint8 or int8 bytes against five nodes over int64 and float
/// values (ResNet-18's four took 15 of its 70 ms lowered).
pub const KEPT: &[&str] = &[
    aten::LSTM_INPUT,
    qd::QUANTIZE_PER_TENSOR,
    qd::DEQUANTIZE_PER_TENSOR,
];

/// Whether every attention node of `p` (`scaled_dot_product_attention`)
/// is one the executor's fused row takes: float32 query, key and value,
/// no dropout, a boolean or float32 mask or none. Those are left to the
/// row (BERT-base's twelve: the eleven nodes a layer the rule makes, on
/// `[1, 12, 128, 128]` scores, took 0.65 ms a layer); any other is
/// lowered with the rest.
fn attention_fused(p: &Program) -> bool {
    use crate::ir::{Argument, Dtype, ValueKind};
    let mut all = true;
    let mut any = false;
    p.graph.visit_nodes_in(&mut |g, n| {
        if n.target.to_string() != aten::SCALED_DOT_PRODUCT_ATTENTION {
            return;
        }
        any = true;
        let dtype = |name: &str| match n.arg(name) {
            Some(Argument::Tensor(v)) | Some(Argument::OptionalTensor(Some(v))) => {
                match &g.values[v.index()].kind {
                    ValueKind::Tensor(m) => Some(m.dtype),
                    _ => None,
                }
            }
            _ => None,
        };
        let f32s = ["query", "key", "value"]
            .iter()
            .all(|a| dtype(a) == Some(Dtype::Float32));
        let mask = matches!(
            n.arg("attn_mask"),
            None | Some(Argument::None) | Some(Argument::OptionalTensor(None))
        ) || matches!(dtype("attn_mask"), Some(Dtype::Bool | Dtype::Float32));
        let no_dropout = match n.arg("dropout_p") {
            None | Some(Argument::None) => true,
            Some(Argument::Float(x)) => *x == 0.0,
            Some(Argument::Int(x)) => *x == 0,
            _ => false,
        };
        all &= f32s && mask && no_dropout;
    });
    any && all
}

/// The ops the executor leaves to their rows in `p`: [`KEPT`], and
/// attention where its fused row takes every attention node
/// ([`attention_fused`]). `ir-decompose --keep` with these gives the
/// program the executor plans.
pub fn kept(p: &Program) -> Vec<String> {
    let mut keep: Vec<String> = KEPT.iter().map(|s| s.to_string()).collect();
    if attention_fused(p) {
        keep.push(aten::SCALED_DOT_PRODUCT_ATTENTION.to_string());
    }
    keep
}

/// The passes `ir-decompose` runs by default after lowering, in its order.
const PASSES: &[&str] = &["dce", "fold", "cse", "bn-fold"];

/// Whether lowering would change the program: a node (in any graph) of an
/// op outside the core opset that a rule lowers, or an in-place op that
/// functionalisation makes functional.
fn has_composites(p: &Program) -> bool {
    let mut found = false;
    p.graph.visit_nodes(&mut |n| {
        if found || n.target.kind != TargetKind::Op {
            return;
        }
        let op = n.target.to_string();
        found = (!decompose::is_core(&n.target)
            && !KEPT.contains(&op.as_str())
            && decompose::rules::rule_for(&op).is_some())
            || crate::schema::mutates(&n.target);
    });
    found
}

/// What planning made of a program.
pub(super) enum Planned {
    /// `p` lowered as `ir-decompose` lowers it (or with its PT2E int8
    /// chains fused, [`super::int8`]), with lines for `-v`.
    Lowered(Box<Program>, Vec<String>),
    /// Nothing to change (a program in core ATen that the passes leave as
    /// it is), or turned off.
    AsGiven,
    /// A rule, a pass or the checks after them refused: the program runs
    /// as given, and `-v` says why.
    Refused(String),
}

/// `p` as the executor plans it on the CPU ([`Planned`]). A PT2E int8
/// graph's quantized products are fused first ([`super::int8`]): lowered,
/// their weights' dequantization would be folded into float32 constants.
pub(super) fn plan(p: &Program) -> Planned {
    let int8 = super::int8::fuse(p);
    let given = int8.as_ref().map_or(p, |(q, _)| q);
    let fused_only = |why: Option<String>| match &int8 {
        Some((q, note)) => Planned::Lowered(
            Box::new(q.clone()),
            why.into_iter().chain([note.clone()]).collect(),
        ),
        None => why.map_or(Planned::AsGiven, Planned::Refused),
    };
    if crate::knobs::is_set("PT2KIT_AS_GIVEN") {
        return fused_only(None);
    }
    match as_decomposed(given) {
        Ok(Some((q, note))) => Planned::Lowered(
            Box::new(q),
            std::iter::once(note)
                .chain(int8.as_ref().map(|(_, n)| n.clone()))
                .collect(),
        ),
        Ok(None) => fused_only(None),
        Err(reason) => fused_only(Some(format!(
            "runs as given, not as ir-decompose lowers it: {reason}"
        ))),
    }
}

fn as_decomposed(p: &Program) -> Result<Option<(Program, String)>, String> {
    let mut q = p.clone();
    let composites = has_composites(p);
    let mut functionalized = 0;
    if composites {
        let policy = Policy {
            keep: kept(p),
            ..Policy::default()
        };
        let report = decompose::lower(&mut q, &policy).map_err(|e| e.to_string())?;
        if let Some((op, nodes)) = report.not_core.first() {
            return Err(format!(
                "{op} (node {}) is left outside the core opset",
                nodes.join(", ")
            ));
        }
        functionalized = report.functionalized;
    }
    let names: Vec<String> = PASSES.iter().map(|s| s.to_string()).collect();
    let passes = super::fold::run(&mut q, &names).map_err(|e| e.to_string())?;
    if !composites && passes.iter().all(|(_, n)| *n == 0) {
        return Ok(None);
    }
    keep_output_names(p, &mut q);
    // the weights the passes read (a batch norm's, the convolution's it
    // folds into) leave this process's resident memory
    p.storages.iter().for_each(|s| s.release());
    crate::ir::validate::validate(&q).map_err(|e| e.to_string())?;
    crate::infer::check(&q, &crate::infer::Limits::default()).map_err(|e| e.to_string())?;
    let before = p.graph.nodes.len();
    let after = q.graph.nodes.len();
    let passes: Vec<String> = passes.iter().map(|(n, c)| format!("{n} {c}")).collect();
    Ok(Some((
        q,
        format!(
            "planned as ir-decompose lowers it: {before} nodes to {after} \
             ({functionalized} in-place made functional; passes: {})",
            passes.join(", ")
        ),
    )))
}

/// The outputs of `q` (`p` lowered) under the names of `p`'s: a rule that
/// lowers the node making an output gives it a fresh name, and `ir-run`
/// writes its outputs under theirs. A value of `q` that holds such a name
/// already takes the fresh one (names stay unique); a value that is two
/// outputs (`cse` merged them) keeps the first one's, and an input its
/// own.
fn keep_output_names(p: &Program, q: &mut Program) {
    // (inputs keep their names, which bind them: an output the lowering
    // made an input itself, a flatten of what is flat already, say)
    let inputs: std::collections::HashSet<usize> = q
        .graph
        .inputs
        .iter()
        .filter_map(|a| match a {
            crate::ir::Argument::Tensor(v) => Some(v.index()),
            _ => None,
        })
        .collect();
    let mut renamed = std::collections::HashSet::new();
    for (a, b) in p.graph.outputs.iter().zip(&q.graph.outputs) {
        let (crate::ir::Argument::Tensor(a), crate::ir::Argument::Tensor(b)) = (a, b) else {
            continue;
        };
        let want = &p.graph.values[a.index()].name;
        let holder = q.graph.values.iter().position(|v| v.name == *want);
        if inputs.contains(&b.index())
            || holder.is_some_and(|h| inputs.contains(&h))
            || !renamed.insert(*b)
            || holder == Some(b.index())
        {
            continue;
        }
        let fresh = std::mem::replace(&mut q.graph.values[b.index()].name, want.clone());
        if let Some(h) = holder {
            q.graph.values[h].name = fresh;
        }
    }
}
