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
//! A program that computes with complex values (neither back end has a
//! complex dtype) is first lowered to real pairs ([`super::complex`]),
//! functionalised first when it has in-place ops.
//!
//! An in-place op the back end lacks (`fill_`, `masked_fill_`, `copy_`)
//! cannot be rewritten alone, since later readers see the mutation: the
//! whole program is then functionalised first (as `ir-decompose` does),
//! and the mutated buffers and inputs become mutation outputs. So is a
//! program whose in-place op writes to a value that a view shares storage
//! with (`x.transpose(0, 1)[0].add_(2)`): a row that runs the op rebinds
//! its `self` alone, and the base or the other views would not see it.

use crate::ir::{Argument, Graph, Node, Program, Reads};
use crate::Result;

/// Whether a back end runs a node as it stands: a row for its op, and
/// arguments that row takes. `reads` says which values of the node's
/// graph are read (a row may take a node only when an output is unused).
pub type HasRow = fn(&Node, &Reads) -> bool;

/// Arguments a back end's row does not handle, as data: (op identity,
/// whether the row declines this node). Such a node is lowered through the
/// decomposition table instead, as if the row were not there.
pub type Declines = &'static [(&'static str, fn(&Node, &Reads) -> bool)];

/// Whether a back end's row for `op` declines this node, by its table.
pub fn declined(table: Declines, op: &str, node: &Node, reads: &Reads) -> bool {
    table.iter().any(|(o, f)| *o == op && f(node, reads))
}

pub use super::Lowered;

/// What a back end did to a program before it could run or convert it.
#[derive(Debug, Default)]
pub struct Fallback {
    /// In-place ops made functional (0 when the program was not touched).
    pub functionalized: usize,
    pub lowered: Vec<Lowered>,
    /// What else the back end did to the program at load, a line each
    /// (`-v` prints them first).
    pub notes: Vec<String>,
}

/// Whether an in-place op of `g` (or of a subgraph) writes to a value
/// that shares its storage through a view: a view of it, or a base it is
/// a view of. A back end that runs the in-place op by rebinding its
/// `self` would leave the other stale, so such a program is
/// functionalised first (the write goes back through the views there).
fn writes_through_view(g: &Graph) -> bool {
    fn root(parent: &mut [usize], mut i: usize) -> usize {
        while parent[i] != i {
            parent[i] = parent[parent[i]];
            i = parent[i];
        }
        i
    }
    let n = g.values.len();
    let mut parent: Vec<usize> = (0..n).collect();
    let mut viewed = vec![false; n];
    let mut written = Vec::new();
    let mut refs = Vec::new();
    for node in &g.nodes {
        for input in &node.inputs {
            if let Argument::Graph(sub) = &input.arg {
                if writes_through_view(&sub.graph) {
                    return true;
                }
            }
        }
        let Some(Argument::Tensor(base)) = node.inputs.first().map(|a| &a.arg) else {
            continue;
        };
        let Some(schema) = crate::schema::lookup(
            &node.target.namespace,
            &node.target.name,
            &node.target.overload,
        ) else {
            continue;
        };
        // `-> Tensor(a)` (a view) or `-> Tensor(a!)` (an in-place op): the
        // outputs share the first argument's storage.
        let aliases = schema.returns.starts_with("Tensor(a")
            && schema
                .args
                .first()
                .is_some_and(|a| a.ty.starts_with("Tensor(a"));
        if !aliases {
            continue;
        }
        let in_place = schema.args.first().is_some_and(|a| a.ty.contains('!'));
        if in_place {
            written.push(base.index());
        }
        refs.clear();
        node.outputs.iter().for_each(|a| a.value_refs(&mut refs));
        for v in &refs {
            let (a, b) = (
                root(&mut parent, base.index()),
                root(&mut parent, v.index()),
            );
            if a != b {
                parent[b] = a;
                viewed[a] |= viewed[b] || !in_place;
            } else if !in_place {
                viewed[a] = true;
            }
        }
    }
    written.into_iter().any(|w| {
        let r = root(&mut parent, w);
        viewed[r]
    })
}

/// Whether a node of the top-level graph writes, in place, into a graph
/// input (a buffer, parameter or user input) or a view of one: program
/// state, which functionalisation makes explicit mutation outputs (a back
/// end that rebinds `self` would run it right but could not hand back the
/// new state). A training batch norm's running statistics count.
pub fn writes_state(p: &Program) -> bool {
    let g = &p.graph;
    let mut root: std::collections::HashMap<usize, usize> = std::collections::HashMap::new();
    let mut inputs = std::collections::HashSet::new();
    for a in &g.inputs {
        if let Argument::Tensor(v) = a {
            inputs.insert(v.index());
        }
    }
    for node in &g.nodes {
        if super::functionalize::updates_running_stats(node) {
            return true;
        }
        let Some(Argument::Tensor(base)) = node.inputs.first().map(|a| &a.arg) else {
            continue;
        };
        let base_root = *root.get(&base.index()).unwrap_or(&base.index());
        let in_place = crate::schema::mutates_first(&node.target);
        if in_place && inputs.contains(&base_root) {
            return true;
        }
        if in_place || crate::schema::is_view(&node.target) {
            for o in &node.outputs {
                if let Argument::Tensor(v) = o {
                    root.insert(v.index(), base_root);
                }
            }
        }
    }
    false
}

/// Whether some node of `p` is one `has_row` rejects and a rule (or
/// functionalisation) could help with.
fn needs_fallback(p: &Program, has_row: HasRow) -> bool {
    if writes_through_view(&p.graph)
        || writes_state(p)
        || super::complex::needs_lowering(p)
        || super::vmap::has_regions(&p.graph)
    {
        return true;
    }
    let mut needs = false;
    p.graph.visit_nodes_read(&mut |_, reads, n| {
        if !needs && !has_row(n, reads) {
            let id = n.target.to_string();
            needs = super::rules::rule_for(&id).is_some()
                || crate::schema::mutates(&n.target)
                || super::hops::refusal(&n.target).is_some();
        }
    });
    needs
}

/// A copy of `p` with every node `has_row` rejects lowered through the
/// decomposition table, or `None` when no node needs it (the caller keeps
/// `p`; weights are shared, never copied).
pub fn lower_unsupported(p: &Program, has_row: HasRow) -> Result<Option<(Program, Fallback)>> {
    if !needs_fallback(p, has_row) {
        return Ok(None);
    }
    let mut q = p.clone();
    let mut report = Fallback::default();
    super::vmap::unroll(&mut q)?;
    let complex = super::complex::needs_lowering(&q);
    let mut in_place_missing = false;
    q.graph.visit_nodes_read(&mut |_, reads, n| {
        in_place_missing |= (complex || !has_row(n, reads)) && crate::schema::mutates(&n.target);
    });
    if in_place_missing || writes_through_view(&q.graph) || writes_state(&q) {
        report.functionalized = super::functionalize::functionalize(&mut q)?;
        if q.dialect() == "TRAINING" {
            q.info.verifiers = vec!["ATEN".into()];
        }
    }
    if complex {
        super::complex::to_real_pairs(&mut q, &mut report.lowered)?;
    }
    let policy = super::Policy {
        backend_has: Some(has_row),
        ..super::Policy::default()
    };
    super::lower_graph(&mut q.graph, &policy, &mut report.lowered)?;
    Ok(Some((q, report)))
}
