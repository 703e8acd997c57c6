//! Fallback through the decomposition table, for a back end that lacks an
//! op. The executor (`exec::Executor::new`) and the ONNX writer
//! (`ir2onnx`) each pass the predicate "I run this node" (a row for its
//! op, and arguments the row accepts); every
//! node the back end lacks is lowered by the rules of [`super::rules`],
//! recursively (a rule's result that the back end lacks is lowered in
//! turn), once, at load. Nodes the back end has are left as they are, so
//! native rows stay where they are faster. What neither a row nor a rule
//! handles is left for the back end to refuse, by name.
//!
//! An in-place op the back end lacks (`fill_`, `masked_fill_`, `copy_`)
//! cannot be rewritten alone, since later readers see the mutation: the
//! whole program is then functionalised first (as `ir-decompose` does),
//! and the mutated buffers and inputs become mutation outputs.

use crate::ir::{Node, Program};
use crate::Result;

/// One node lowered for a back end: its name, its op, and the ops it
/// became (the rule's direct results; those lowered further have entries
/// of their own).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Lowered {
    pub node: String,
    pub op: String,
    pub into: Vec<String>,
}

impl std::fmt::Display for Lowered {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "node {} ({}) lowered into {}",
            self.node,
            self.op,
            self.into.join(", ")
        )
    }
}

/// What a back end did to a program before it could run or convert it.
#[derive(Debug, Default)]
pub struct Fallback {
    /// In-place ops made functional (0 when the program was not touched).
    pub functionalized: usize,
    pub lowered: Vec<Lowered>,
}

/// Whether some node of `p` is one `has_row` rejects and a rule (or
/// functionalisation) could help with.
fn needs_fallback(p: &Program, has_row: fn(&Node) -> bool) -> bool {
    let mut needs = false;
    p.graph.visit_nodes(&mut |n| {
        if !needs && !has_row(n) {
            let id = n.target.to_string();
            needs = super::rules::rule_for(&id).is_some() || crate::schema::mutates(&n.target);
        }
    });
    needs
}

/// A copy of `p` with every node `has_row` rejects lowered through the
/// decomposition table, or `None` when no node needs it (the caller keeps
/// `p`; weights are shared, never copied).
pub fn lower_unsupported(
    p: &Program,
    has_row: fn(&Node) -> bool,
) -> Result<Option<(Program, Fallback)>> {
    if !needs_fallback(p, has_row) {
        return Ok(None);
    }
    let mut q = p.clone();
    let mut report = Fallback::default();
    let mut in_place_missing = false;
    q.graph.visit_nodes(&mut |n| {
        in_place_missing |= !has_row(n) && crate::schema::mutates(&n.target);
    });
    if in_place_missing {
        report.functionalized = super::functionalize::functionalize(&mut q)?;
        if q.dialect() == "TRAINING" {
            q.info.verifiers = vec!["ATEN".into()];
        }
    }
    let policy = super::Policy {
        backend_has: Some(has_row),
        ..super::Policy::default()
    };
    super::lower_graph(&mut q.graph, &policy, &mut report.lowered)?;
    Ok(Some((q, report)))
}
