//! `ir-decompose`: lowers a program to the core ATen opset, keeping the ops
//! a back end asks to keep, then runs cleanup passes.
//!
//! - [`functionalize`]: in-place ops of the TRAINING dialect become
//!   functional ops with explicit mutation outputs;
//! - [`vmap`]: functorch's batching calls (a traced `torch.vmap`) unrolled
//!   sample by sample;
//! - [`rules`]: the decomposition table, one rewrite per source op
//!   ([`autocast`]: torch's CPU cast policy for autocast regions;
//!   [`hops`]: what becomes of each higher-order op);
//! - [`passes`]: dead-code elimination, constant folding, common
//!   subexpression elimination, batch-norm folding; each its own unit;
//! - [`edit`]: how every rewrite emits nodes (schema defaults, fresh names,
//!   provenance carried over, symbolic sizes as `sym_size` nodes).
//!
//! The core opset is data (`lib/data/core_aten_ops.txt`).

/// The argument reader, which lives with the IR (`ir::args`).
pub use crate::ir::args;
pub mod autocast;
pub mod complex;
pub mod edit;
pub mod fallback;
pub mod functionalize;
pub mod hops;
pub mod passes;
pub mod rules;
pub mod vmap;

use crate::ir::op::aten;
use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::sync::OnceLock;

use crate::ir::{Argument, Graph, Program, Target, TargetKind, ValueId};
use crate::{Error, Result};
use args::{node_outputs, NodeArgs};
use edit::{Emitter, Names};

const CORE_OPS: &str = include_str!("../../data/core_aten_ops.txt");

/// The core ATen opset (`aten.add.Tensor`, ...).
pub fn core_ops() -> &'static HashSet<&'static str> {
    static SET: OnceLock<HashSet<&'static str>> = OnceLock::new();
    SET.get_or_init(|| {
        CORE_OPS
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty() && !l.starts_with('#'))
            .collect()
    })
}

/// Ops outside the core set that every lowered graph may keep: shape
/// assertions and symbolic-int bookkeeping that carry no computation.
const ALWAYS_KEPT: &[&str] = &[
    aten::_ASSERT_TENSOR_METADATA,
    aten::_ASSERT_SCALAR,
    aten::_ASSERT_ASYNC_MSG,
    aten::SYM_CONSTRAIN_RANGE,
    aten::SYM_CONSTRAIN_RANGE_FOR_SIZE,
];

/// Complex ops that torch's own `run_decompositions()` keeps (its table
/// has no decomposition for them): a lowered graph with complex values
/// keeps them too. `ir-run` and `ir2onnx` lower them to real pairs at load
/// ([`complex`]; `ir-decompose --passes complex` does it ahead of time).
pub const COMPLEX_KEPT: &[&str] = &[
    aten::_FFT_C2C,
    aten::_CONJ,
    aten::VIEW_AS_REAL,
    aten::VIEW_AS_COMPLEX,
    aten::COMPLEX,
    aten::POLAR,
];

/// Whether an op may stay in a lowered graph without being asked for:
/// core ATen, the bookkeeping ops above, torch's kept complex ops, and
/// everything that is not an `aten` op (control flow, Python scalar ops, a
/// back end's own namespace).
pub fn is_core(target: &Target) -> bool {
    if target.kind != TargetKind::Op || target.namespace != "aten" {
        return true;
    }
    let id = target.to_string();
    core_ops().contains(id.as_str())
        || ALWAYS_KEPT.contains(&id.as_str())
        || COMPLEX_KEPT.contains(&id.as_str())
}

/// Shell-style glob (`*`, `?`) match.
pub fn glob(pattern: &str, text: &str) -> bool {
    fn go(p: &[u8], t: &[u8]) -> bool {
        match (p.first(), t.first()) {
            (None, None) => true,
            (Some(b'*'), _) => go(&p[1..], t) || (!t.is_empty() && go(p, &t[1..])),
            (Some(b'?'), Some(_)) => go(&p[1..], &t[1..]),
            (Some(a), Some(b)) if a == b => go(&p[1..], &t[1..]),
            _ => false,
        }
    }
    go(pattern.as_bytes(), text.as_bytes())
}

/// Whether an op pattern names a target: `aten.conv*`, `aten.linear`
/// (every overload), `aten.add.Tensor`.
pub fn pattern_matches(pattern: &str, target: &Target) -> bool {
    let full = target.to_string();
    if glob(pattern, &full) {
        return true;
    }
    target.kind == TargetKind::Op && glob(pattern, &format!("{}.{}", target.namespace, target.name))
}

/// Checks op patterns (`--keep`, `--only`): each must name at least one
/// op torch registers or the toolkit knows; a pattern that names none is a
/// usage error that suggests the nearest names (`linear`: did you mean
/// `aten.linear`?).
pub fn check_patterns(flag: &str, patterns: &[String]) -> Result<()> {
    let mut known: Vec<String> = crate::schema::identities().collect();
    known.extend(crate::schema::family_ops().map(String::from));
    known.extend(rules::all_rules().map(|r| r.source.to_string()));
    for p in patterns {
        let names = |op: &String| {
            let mut parts = op.splitn(3, '.');
            let (ns, name) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
            format!("{ns}.{name}")
        };
        if known.iter().any(|op| glob(p, op) || glob(p, &names(op))) {
            continue;
        }
        let stem: String = p
            .rsplit('.')
            .find(|s| !s.is_empty() && *s != "default")
            .unwrap_or(p)
            .chars()
            .filter(|c| c.is_alphanumeric() || *c == '_')
            .collect();
        let mut near: Vec<String> = known
            .iter()
            .map(names)
            .filter(|n| !stem.is_empty() && n.rsplit('.').next() == Some(stem.as_str()))
            .collect();
        if near.is_empty() {
            near = known
                .iter()
                .map(names)
                .filter(|n| !stem.is_empty() && n.contains(stem.as_str()))
                .collect();
        }
        near.sort();
        near.dedup();
        near.truncate(4);
        let hint = if near.is_empty() {
            String::new()
        } else {
            format!(" (did you mean {}?)", near.join(", "))
        };
        return Err(Error::usage(format!(
            "{flag} {p}: names no op (patterns are namespace.name[.overload], * and ? match any characters){hint}"
        )));
    }
    Ok(())
}

/// What to lower.
#[derive(Clone, Debug, Default)]
pub struct Policy {
    /// Ops left intact (patterns).
    pub keep: Vec<String>,
    /// When set, only these decompositions apply (patterns).
    pub only: Option<Vec<String>>,
    /// A back end's own rows (`fallback`): nodes it runs are never lowered.
    pub backend_has: Option<fallback::HasRow>,
}

impl Policy {
    fn applies(
        &self,
        node: &crate::ir::Node,
        reads: &crate::ir::Reads,
    ) -> Option<&'static rules::Rule> {
        let target = &node.target;
        if self.backend_has.is_some_and(|has| has(node, reads)) {
            return None;
        }
        if self.keep.iter().any(|p| pattern_matches(p, target)) {
            return None;
        }
        if let Some(only) = &self.only {
            if !only.iter().any(|p| pattern_matches(p, target)) {
                return None;
            }
        }
        rules::rule_for(&target.to_string())
    }

    /// Whether a target is allowed to remain.
    pub fn allowed(&self, target: &Target) -> bool {
        is_core(target) || self.keep.iter().any(|p| pattern_matches(p, target))
    }
}

/// Op name -> node count, over every graph.
pub fn histogram(p: &Program) -> BTreeMap<String, usize> {
    let mut h = BTreeMap::new();
    p.graph
        .visit_nodes(&mut |n| *h.entry(n.target.to_string()).or_insert(0) += 1);
    h
}

#[derive(Debug, Default)]
pub struct Report {
    pub before: BTreeMap<String, usize>,
    pub after: BTreeMap<String, usize>,
    /// In-place ops made functional.
    pub functionalized: usize,
    /// Nodes rewritten by a decomposition.
    pub decomposed: usize,
    /// Per pass: nodes removed or rewritten.
    pub passes: Vec<(String, usize)>,
    /// `aten` ops left that are neither core nor kept: (op, node names).
    pub not_core: Vec<(String, Vec<String>)>,
}

impl Report {
    /// The `--stats` table: per op, nodes in and out.
    pub fn table(&self) -> String {
        let mut ops: Vec<&String> = self.before.keys().chain(self.after.keys()).collect();
        ops.sort();
        ops.dedup();
        let w = ops.iter().map(|o| o.len()).max().unwrap_or(2).max(2);
        let mut s = format!("{:<w$}  {:>6}  {:>6}\n", "op", "in", "out");
        for op in ops {
            let (a, b) = (
                self.before.get(op).copied().unwrap_or(0),
                self.after.get(op).copied().unwrap_or(0),
            );
            s.push_str(&format!("{op:<w$}  {a:>6}  {b:>6}\n"));
        }
        let (a, b): (usize, usize) = (self.before.values().sum(), self.after.values().sum());
        s.push_str(&format!("{:<w$}  {a:>6}  {b:>6}\n", "total"));
        s.push_str(&format!(
            "functionalized {} in-place op(s), decomposed {} node(s)",
            self.functionalized, self.decomposed
        ));
        for (pass, n) in &self.passes {
            s.push_str(&format!(", {pass}: {n}"));
        }
        s.push('\n');
        s
    }
}

/// Functionalises, then lowers every graph of the program by `policy`.
pub fn lower(p: &mut Program, policy: &Policy) -> Result<Report> {
    let mut report = Report {
        before: histogram(p),
        ..Report::default()
    };
    vmap::unroll(p)?;
    report.functionalized = functionalize::functionalize(p)?;
    report.decomposed = lower_graph(&mut p.graph, policy, &mut Vec::new())?;
    if p.dialect() == "TRAINING" {
        p.info.verifiers = vec!["ATEN".into()];
    }
    report.after = histogram(p);
    report.not_core = not_core(p, policy);
    Ok(report)
}

/// The `aten` ops left that are not core and not kept, with their nodes.
pub fn not_core(p: &Program, policy: &Policy) -> Vec<(String, Vec<String>)> {
    let mut by_op: BTreeMap<String, Vec<String>> = BTreeMap::new();
    p.graph.visit_nodes(&mut |n| {
        if !policy.allowed(&n.target) {
            by_op
                .entry(n.target.to_string())
                .or_default()
                .push(n.name.clone());
        }
    });
    by_op.into_iter().collect()
}

/// Rewrites the nodes of one graph (and its subgraphs) until no rule
/// applies; returns how many nodes were rewritten, and logs each rewrite.
fn lower_graph(g: &mut Graph, policy: &Policy, log: &mut Vec<Lowered>) -> Result<usize> {
    let mut names = Names::of(g);
    let reads = g.reads();
    let mut queue: VecDeque<crate::ir::Node> = std::mem::take(&mut g.nodes).into();
    let mut out = Vec::with_capacity(queue.len());
    let mut subst: HashMap<ValueId, ValueId> = HashMap::new();
    let mut rewritten = 0usize;
    let budget = 64 * (queue.len() + 16);
    while let Some(mut node) = queue.pop_front() {
        let s = |v: ValueId| follow(&subst, v);
        node.substitute_inputs(&s);
        // A node a rule rewrites is rewritten before its subgraphs are
        // lowered: an inlined region (autocast's casts go before the ops
        // as written) is lowered with the nodes it becomes.
        let rule = policy.applies(&node, &reads);
        if rule.is_none() {
            for input in &mut node.inputs {
                if let Argument::Graph(sub) = &mut input.arg {
                    rewritten += lower_graph(&mut sub.graph, policy, log)?;
                }
            }
        }
        let Some(rule) = rule else {
            if let (Some(has), Some(why)) = (policy.backend_has, hops::refusal(&node.target)) {
                if !has(&node, &reads) {
                    return Err(Error::unsupported(format!(
                        "node {} ({}): {why}",
                        node.name, node.target
                    )));
                }
            }
            out.push(node);
            continue;
        };
        rewritten += 1;
        if rewritten > budget {
            return Err(Error::internal(format!(
                "decomposition does not terminate (at node {}, {})",
                node.name, node.target
            )));
        }
        let mut em = Emitter::new(&mut g.values, &mut names, node.meta.clone());
        let replaced = apply(&mut em, &node, |em, a| (rule.apply)(em, a))?;
        for (old, new) in node_outputs(&node).into_iter().zip(replaced) {
            if old != new {
                subst.insert(old, new);
            }
        }
        log.push(Lowered {
            node: node.name.clone(),
            op: node.target.to_string(),
            into: em.nodes.iter().map(|n| n.target.to_string()).collect(),
        });
        for n in em.nodes.into_iter().rev() {
            queue.push_front(n);
        }
    }
    g.nodes = out;
    let s = |v: ValueId| follow(&subst, v);
    crate::ir::substitute_values(&mut g.outputs, &s);
    Ok(rewritten)
}

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

/// Applies one rewrite of `node` (a rule, or a lowering of complex
/// values), its errors placed at the node. A rewrite indexes dims the op's
/// contract guarantees; a graph that breaks the contract must not take the
/// tool down with a panic.
pub(crate) fn apply(
    em: &mut Emitter,
    node: &crate::ir::Node,
    f: impl FnOnce(&mut Emitter, &NodeArgs) -> Result<Vec<ValueId>>,
) -> Result<Vec<ValueId>> {
    let applied = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f(em, &NodeArgs(node))))
        .unwrap_or_else(|_| {
            Err(Error::bad_input(format!(
                "node {} ({}): its arguments do not have the shapes the op requires",
                node.name, node.target
            )))
        });
    applied.map_err(|e| {
        let place = format!("node {} ({})", node.name, node.target);
        if e.message.starts_with("node ") {
            e
        } else {
            e.at(place)
        }
    })
}

/// The value that finally stands for `v` after a chain of replacements.
fn follow(subst: &HashMap<ValueId, ValueId>, mut v: ValueId) -> ValueId {
    while let Some(n) = subst.get(&v) {
        v = *n;
    }
    v
}

/// Every decomposition: (source op, result ops).
pub fn list() -> Vec<(&'static str, &'static [&'static str])> {
    rules::all_rules().map(|r| (r.source, r.results)).collect()
}
