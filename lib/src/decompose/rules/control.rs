//! Control flow: cond, while_loop, map and other higher-order ops: the decomposition rules.

use super::*;

/// Grad mode means nothing to inference: the wrapped subgraph is inlined
/// (as torch's `run_decompositions()` does).
fn inline_subgraph(em: &mut Emitter, a: &NodeArgs) -> Result<Vec<ValueId>> {
    let at =
        a.0.inputs
            .iter()
            .position(|i| matches!(i.arg, Argument::Graph(_)))
            .ok_or_else(|| Error::bad_input(format!("node {}: no subgraph", a.0.name)))?;
    let Argument::Graph(sub) = &a.0.inputs[at].arg else {
        unreachable!()
    };
    if a.0.target.name == "wrap_with_autocast" {
        return Err(Error::unsupported(format!(
            "node {}: autocast regions change dtypes and are not inlined",
            a.0.name
        )));
    }
    let args: Vec<Argument> = a.0.inputs[at + 1..].iter().map(|i| i.arg.clone()).collect();
    let outs = em.inline(&sub.graph, &args)?;
    let mut ids = Vec::new();
    for o in outs {
        let mut refs = Vec::new();
        o.value_refs(&mut refs);
        ids.extend(refs);
    }
    Ok(ids)
}

rules! {
    "higher_order.wrap_with_set_grad_enabled" => [] inline_subgraph;
    "higher_order.wrap_with_autocast" => [] inline_subgraph;
}

/// Ops that are another op of this family under another name.
pub(super) const ALIASES: &[(&str, &str)] = &[];
