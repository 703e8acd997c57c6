//! Control flow: cond, while_loop, map and other higher-order ops: the shape rules.

use crate::ir::op::higher_order;
use super::*;

/// cond: each branch returns at least the node's outputs. Torch's graph
/// reads the node's outputs by position (`getitem`), so a branch that
/// returns more runs there, its extra values unread: the executor and
/// the ONNX writer take the first ones too. A branch that returns fewer
/// would fail there (an index out of range): refused here, at load.
fn cond(site: &Site) -> Result<Vec<Out>> {
    let n = site.node.outputs.len();
    for (i, arg) in site.node.inputs.iter().enumerate().skip(1).take(2) {
        if let Argument::Graph(g) = &arg.arg {
            if g.graph.outputs.len() < n {
                return Err(site.fail(
                    if i == 1 { "true branch" } else { "false branch" },
                    format!(
                        "'{}' returns {} values, but the node has {n} outputs",
                        g.name,
                        g.graph.outputs.len()
                    ),
                ));
            }
        }
    }
    Ok(Vec::new())
}

/// This family's rows: op identity -> rule.
pub(super) const ROWS: &[(&str, ShapeRule)] = &[(higher_order::COND, cond)];
