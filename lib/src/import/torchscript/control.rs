//! Control flow on tensor data as torch.export's higher-order ops.
//!
//! An `if` on `bool(t)` (`prim::If`) becomes `cond`: each branch is
//! lowered on its own, its nodes taken out into a subgraph whose inputs
//! are every value the two branches read from outside (the cond's
//! operands, the same list for both); the cond's outputs are the
//! variables a branch assigns, or what both return.
//!
//! A `while` on `bool(t)` (`prim::Loop`) becomes `while_loop`: the
//! variables its body changes are the carried values (tensors whose dtype
//! and sizes stay the same), the condition and the body are lowered into
//! subgraphs over (carried, additional): what else they read.

use std::cell::RefCell;
use std::collections::{BTreeSet, HashMap, HashSet};
use std::rc::Rc;

use super::lower::{is_same, Flow, Frame, Lower};
use super::ops::{sym_contiguous, At, V};
use super::parser::{Expr, Stmt};
use crate::error::Result;
use crate::ir::{
    ArgKind, Argument, Graph, NamedArg, Node, NodeMeta, Subgraph, Sym, Target, TargetKind, Value,
    ValueId, ValueKind,
};

/// One branch, lowered: how it ended, its variables, its nodes.
struct Branch {
    flow: Flow,
    vars: HashMap<String, V>,
    nodes: Vec<Node>,
}

impl Lower<'_> {
    fn branch(
        &mut self,
        f: &mut Frame,
        before: &HashMap<String, V>,
        body: &[Stmt],
    ) -> Result<Branch> {
        let mark = self.b.graph.nodes.len();
        let replaced = self.b.replaced.len();
        // The branch works on its own copies of lists and dicts: what it
        // writes into them is its output, not a change made at import.
        f.vars = detach(before);
        let flow = self.exec_block(f, body)?;
        let nodes = self.b.graph.nodes.split_off(mark);
        if self.b.replaced.len() != replaced {
            return Err(crate::error::Error::unsupported(format!(
                "{}: an in-place op inside control flow on tensor data is not lowered",
                f.file
            )));
        }
        Ok(Branch {
            flow,
            vars: std::mem::take(&mut f.vars),
            nodes,
        })
    }

    pub(super) fn cond_if(
        &mut self,
        f: &mut Frame,
        pred: ValueId,
        body: &[Stmt],
        orelse: &[Stmt],
        at: &At,
    ) -> Result<Flow> {
        let before = f.vars.clone();
        let mut t = self.branch(f, &before, body)?;
        let mut e = self.branch(f, &before, orelse)?;
        f.vars = before.clone();
        if let Some(k) = grown(&before, &t.vars).or_else(|| grown(&before, &e.vars)) {
            return Err(at.refuse(format!(
                "a list that grows inside an if on tensor data ('{k}': its length would be data-dependent)"
            )));
        }
        // What the cond returns: the variables either branch changes, or
        // the value both return.
        let (t_out, e_out, names, returns) = match (&t.flow, &e.flow) {
            (Flow::Next, Flow::Next) => {
                let mut names: BTreeSet<String> = BTreeSet::new();
                for vars in [&t.vars, &e.vars] {
                    for (k, v) in vars.iter() {
                        if before.get(k).is_none_or(|b| !same_value(b, v)) {
                            names.insert(k.clone());
                        }
                    }
                }
                let mut t_out = Vec::new();
                let mut e_out = Vec::new();
                let mut kept = Vec::new();
                for k in names {
                    let side = |vars: &HashMap<String, V>| vars.get(&k).or(before.get(&k)).cloned();
                    match (side(&t.vars), side(&e.vars)) {
                        (Some(a @ (V::Tensor(_) | V::Tuple(_) | V::List(_))), Some(b))
                            if tensors_only(&a) =>
                        {
                            let (mut ta, mut eb) = (Vec::new(), Vec::new());
                            let shape = leaves(&a, &mut ta, at)?;
                            if !tensors_only(&b) || leaves(&b, &mut eb, at)? != shape {
                                return Err(at.refuse(format!(
                                    "an if on tensor data sets '{k}' to {} and {}: differently structured values",
                                    a.kind(),
                                    b.kind()
                                )));
                            }
                            t_out.extend(ta);
                            e_out.extend(eb);
                            kept.push((k, a));
                        }
                        // Temporaries a branch made and the other did not
                        // (TorchScript prints branch-local names).
                        (Some(_), None) | (None, Some(_)) => {}
                        (Some(a), Some(b)) if same_value(&a, &b) => {
                            if !before.contains_key(&k) {
                                f.vars.insert(k, a);
                            }
                        }
                        (Some(a), Some(b)) => {
                            return Err(at.refuse(format!(
                                "an if on tensor data sets '{k}' to {} and {}: only tensors are lowered into cond outputs",
                                a.kind(),
                                b.kind()
                            )))
                        }
                        (None, None) => {}
                    }
                }
                (t_out, e_out, kept, None)
            }
            (Flow::Return(a), Flow::Return(b)) => {
                let (mut ta, mut eb) = (Vec::new(), Vec::new());
                let shape = leaves(a, &mut ta, at)?;
                let shape_b = leaves(b, &mut eb, at)?;
                if shape != shape_b {
                    return Err(at.refuse(
                        "the two branches of an if on tensor data return differently structured values",
                    ));
                }
                (ta, eb, Vec::new(), Some(a.clone()))
            }
            _ => return Err(at.refuse(
                "an if on tensor data where one branch returns (or breaks) and the other goes on",
            )),
        };
        // The operands: every outside value either branch reads.
        let mut operands: BTreeSet<ValueId> = BTreeSet::new();
        for (nodes, outs) in [(&t.nodes, &t_out), (&e.nodes, &e_out)] {
            operands.extend(captured(nodes, outs));
        }
        let mut operands: Vec<ValueId> = operands.into_iter().collect();
        // cond takes tensors: a symbolic scalar a branch reads is specialised.
        self.inline_scalars(
            &mut [&mut t.nodes, &mut e.nodes],
            &mut operands,
            at,
            "a branch of an if on tensor data",
        )?;
        let k = self.b.graph.nodes.len();
        let true_graph = self.subgraph(&format!("true_graph_{k}"), &operands, t.nodes, &t_out);
        let false_graph = self.subgraph(&format!("false_graph_{k}"), &operands, e.nodes, &e_out);
        let name = self.b.fresh("cond");
        let mut outs = Vec::new();
        for (i, (a, b)) in t_out.iter().zip(&e_out).enumerate() {
            let (ma, mb) = (self.b.meta(*a).clone(), self.b.meta(*b).clone());
            if ma.dtype != mb.dtype || ma.sizes.len() != mb.sizes.len() {
                return Err(at.refuse(format!(
                    "the branches of an if on tensor data give output {i} as {} of rank {} and {} of rank {}",
                    ma.dtype.short_name(),
                    ma.sizes.len(),
                    mb.dtype.short_name(),
                    mb.sizes.len()
                )));
            }
            let sizes: Vec<Sym> = ma
                .sizes
                .iter()
                .zip(&mb.sizes)
                .map(|(x, y)| {
                    if x == y {
                        x.clone()
                    } else {
                        self.b.symbol("u", None)
                    }
                })
                .collect();
            let vname = if i == 0 {
                name.clone()
            } else {
                self.b.fresh(&format!("{name}_{i}"))
            };
            self.b.graph.values.push(Value {
                name: vname,
                kind: ValueKind::Tensor(sym_contiguous(ma.dtype, sizes)),
            });
            outs.push(ValueId(self.b.graph.values.len() as u32 - 1));
        }
        let arg = |name: &str, arg: Argument| NamedArg {
            name: name.into(),
            arg,
            kind: ArgKind::Positional,
            defaulted: false,
        };
        self.b.graph.nodes.push(Node {
            name,
            target: Target {
                kind: TargetKind::HigherOrder,
                namespace: "higher_order".into(),
                name: "cond".into(),
                overload: String::new(),
            },
            inputs: vec![
                arg("pred", Argument::Tensor(pred)),
                arg("true_fn", Argument::Graph(true_graph)),
                arg("false_fn", Argument::Graph(false_graph)),
                arg("operands", Argument::Tensors(operands)),
            ],
            outputs: outs.iter().map(|v| Argument::Tensor(*v)).collect(),
            meta: NodeMeta {
                stack_trace: Some(format!("{}:{}", at.file, at.line)),
                ..Default::default()
            },
            is_hop_single_tensor_return: None,
        });
        if let Some(shape) = returns {
            let mut it = outs.into_iter();
            return Ok(Flow::Return(rebuild(&shape, &mut it)));
        }
        let mut it = outs.into_iter();
        for (k, shape) in names {
            let v = rebuild_into(before.get(&k), &shape, &mut it);
            f.vars.insert(k, v);
        }
        Ok(Flow::Next)
    }

    pub(super) fn while_loop(
        &mut self,
        f: &mut Frame,
        cond: &Expr,
        body: &[Stmt],
        at: &At,
    ) -> Result<Flow> {
        let before = f.vars.clone();
        // A first pass finds what the body changes.
        let probe = self.branch(f, &before, body)?;
        if !matches!(probe.flow, Flow::Next | Flow::Continue) {
            return Err(at.refuse(
                "a while loop on tensor data whose body returns or breaks is not lowered",
            ));
        }
        if let Some(k) = grown(&before, &probe.vars) {
            return Err(at.refuse(format!(
                "a list that grows inside a while loop on tensor data ('{k}': a data-dependent list length)"
            )));
        }
        let mut carried: Vec<(String, ValueId)> = Vec::new();
        let mut names: Vec<&String> = probe.vars.keys().collect();
        names.sort();
        for k in names {
            let after = &probe.vars[k];
            let Some(old) = before.get(k) else { continue };
            if same_value(old, after) {
                continue;
            }
            match (tensor_of(old), tensor_of(after)) {
                (Some(a), Some(_)) => carried.push((k.clone(), a)),
                _ => {
                    return Err(at.refuse(format!(
                        "a while loop on tensor data changes '{k}' ({}): only tensors are carried through while_loop",
                        after.kind()
                    )))
                }
            }
        }
        // The condition and the body over placeholders of the carried values.
        let placeholders = |lw: &mut Self, f: &mut Frame| -> Vec<ValueId> {
            f.vars = before.clone();
            carried
                .iter()
                .map(|(k, v)| {
                    let kind = lw.b.graph.values[v.index()].kind.clone();
                    let id = lw.b.new_value(k, kind);
                    let old = &before[k];
                    f.vars.insert(
                        k.clone(),
                        if matches!(old, V::Pred(_)) {
                            V::Pred(id)
                        } else {
                            V::Tensor(id)
                        },
                    );
                    id
                })
                .collect()
        };
        let cond_in = placeholders(self, f);
        let mark = self.b.graph.nodes.len();
        let c = self.eval(f, cond)?;
        let cond_nodes = self.b.graph.nodes.split_off(mark);
        let Some(pred) = tensor_of(&c) else {
            return Err(at.refuse("a while loop whose condition stops being a tensor's truth"));
        };
        let body_in = placeholders(self, f);
        let vars = f.vars.clone();
        let mut b = self.branch(f, &vars, body)?;
        let mut body_out = Vec::new();
        for ((k, old), input) in carried.iter().zip(&body_in) {
            let Some(new) = b.vars.get(k).and_then(tensor_of) else {
                return Err(at.refuse(format!("'{k}' stops being a tensor in a while loop")));
            };
            let (mo, mn) = (self.b.meta(*old).clone(), self.b.meta(new).clone());
            if mo.dtype != mn.dtype || mo.sizes != mn.sizes {
                return Err(at.refuse(format!(
                    "'{k}' changes from {} {:?} to {} {:?} in a while loop on tensor data: while_loop carries values of fixed dtype and sizes",
                    mo.dtype.short_name(),
                    mo.sizes.iter().map(|s| s.as_int()).collect::<Vec<_>>(),
                    mn.dtype.short_name(),
                    mn.sizes.iter().map(|s| s.as_int()).collect::<Vec<_>>()
                )));
            }
            let _ = input;
            body_out.push(new);
        }
        let mut additional: BTreeSet<ValueId> = BTreeSet::new();
        additional.extend(
            captured(&cond_nodes, &[pred])
                .into_iter()
                .filter(|v| !cond_in.contains(v)),
        );
        additional.extend(
            captured(&b.nodes, &body_out)
                .into_iter()
                .filter(|v| !body_in.contains(v)),
        );
        let mut additional: Vec<ValueId> = additional.into_iter().collect();
        // while_loop takes tensors: a symbolic scalar it reads is specialised.
        let mut cond_nodes = cond_nodes;
        self.inline_scalars(
            &mut [&mut cond_nodes, &mut b.nodes],
            &mut additional,
            at,
            "a while loop on tensor data",
        )?;
        let k = self.b.graph.nodes.len();
        let with =
            |ins: &[ValueId]| -> Vec<ValueId> { ins.iter().chain(&additional).copied().collect() };
        let cond_graph = self.subgraph(
            &format!("while_loop_cond_graph_{k}"),
            &with(&cond_in),
            cond_nodes,
            &[pred],
        );
        let body_graph = self.subgraph(
            &format!("while_loop_body_graph_{k}"),
            &with(&body_in),
            b.nodes,
            &body_out,
        );
        let name = self.b.fresh("while_loop");
        let mut outs = Vec::new();
        for (i, (_, old)) in carried.iter().enumerate() {
            let kind = self.b.graph.values[old.index()].kind.clone();
            let vname = if i == 0 {
                name.clone()
            } else {
                self.b.fresh(&format!("{name}_{i}"))
            };
            self.b.graph.values.push(Value { name: vname, kind });
            outs.push(ValueId(self.b.graph.values.len() as u32 - 1));
        }
        let arg = |name: &str, arg: Argument| NamedArg {
            name: name.into(),
            arg,
            kind: ArgKind::Positional,
            defaulted: false,
        };
        self.b.graph.nodes.push(Node {
            name,
            target: Target {
                kind: TargetKind::HigherOrder,
                namespace: "higher_order".into(),
                name: "while_loop".into(),
                overload: String::new(),
            },
            inputs: vec![
                arg("cond_fn", Argument::Graph(cond_graph)),
                arg("body_fn", Argument::Graph(body_graph)),
                arg(
                    "carried_inputs",
                    Argument::Tensors(carried.iter().map(|(_, v)| *v).collect()),
                ),
                arg("additional_inputs", Argument::Tensors(additional)),
            ],
            outputs: outs.iter().map(|v| Argument::Tensor(*v)).collect(),
            meta: NodeMeta {
                stack_trace: Some(format!("{}:{}", at.file, at.line)),
                ..Default::default()
            },
            is_hop_single_tensor_return: None,
        });
        f.vars = before;
        for ((k, _), v) in carried.iter().zip(outs) {
            let was_pred = matches!(f.vars.get(k), Some(V::Pred(_)));
            f.vars
                .insert(k.clone(), if was_pred { V::Pred(v) } else { V::Tensor(v) });
        }
        Ok(Flow::Next)
    }

    /// Nodes as a subgraph whose inputs are `inputs` (values they read
    /// from outside), returning `outs`.
    fn subgraph(
        &self,
        name: &str,
        operands: &[ValueId],
        nodes: Vec<Node>,
        outs: &[ValueId],
    ) -> Subgraph {
        let mut graph = Graph::default();
        let mut map: HashMap<ValueId, ValueId> = HashMap::new();
        let copy = |graph: &mut Graph, v: ValueId, map: &mut HashMap<ValueId, ValueId>| {
            let id = ValueId(graph.values.len() as u32);
            graph.values.push(self.b.graph.values[v.index()].clone());
            map.insert(v, id);
            id
        };
        for v in operands {
            let id = copy(&mut graph, *v, &mut map);
            graph.inputs.push(Argument::Tensor(id));
        }
        for mut node in nodes {
            let mut defined = Vec::new();
            for o in &node.outputs {
                o.value_refs(&mut defined);
            }
            for v in defined {
                copy(&mut graph, v, &mut map);
            }
            node.substitute_inputs(&|v| map.get(&v).copied().unwrap_or(v));
            for o in node.outputs.iter_mut() {
                o.substitute_values(&|v| map.get(&v).copied().unwrap_or(v));
            }
            graph.nodes.push(node);
        }
        graph.outputs = outs
            .iter()
            .map(|v| Argument::Tensor(map.get(v).copied().unwrap_or(*v)))
            .collect();
        Subgraph {
            name: name.to_string(),
            graph: Box::new(graph),
        }
    }
}

/// The graph value behind a tensor or a tensor's truth.
fn tensor_of(v: &V) -> Option<ValueId> {
    match v {
        V::Tensor(t) | V::Pred(t) => Some(*t),
        _ => None,
    }
}

/// The outside values a branch's nodes and outputs read.
fn captured(nodes: &[Node], outs: &[ValueId]) -> Vec<ValueId> {
    let mut defined: HashSet<ValueId> = HashSet::new();
    let mut read = Vec::new();
    for node in nodes {
        let mut refs = Vec::new();
        for a in &node.inputs {
            a.arg.value_refs(&mut refs);
        }
        read.extend(refs.into_iter().filter(|v| !defined.contains(v)));
        let mut outs = Vec::new();
        for o in &node.outputs {
            o.value_refs(&mut outs);
        }
        defined.extend(outs);
    }
    read.extend(outs.iter().filter(|v| !defined.contains(v)));
    read
}

/// The tensors of a value a branch returns or sets, in order, and its
/// structure as text (tensors, and tuples and lists of them).
fn leaves(v: &V, out: &mut Vec<ValueId>, at: &At) -> Result<String> {
    Ok(match v {
        V::Tensor(t) => {
            out.push(*t);
            "T".into()
        }
        V::Tuple(items) => {
            let parts = items
                .iter()
                .map(|x| leaves(x, out, at))
                .collect::<Result<Vec<_>>>()?;
            format!("({})", parts.join(","))
        }
        V::List(items) => {
            let items = items.borrow().clone();
            let parts = items
                .iter()
                .map(|x| leaves(x, out, at))
                .collect::<Result<Vec<_>>>()?;
            format!("[{}]", parts.join(","))
        }
        other => {
            return Err(at.refuse(format!(
                "a branch of an if on tensor data returns {}: tensors, and tuples and lists of them, are lowered",
                other.kind()
            )))
        }
    })
}

/// Whether a value is a tensor, or a tuple or list of them, at any depth.
fn tensors_only(v: &V) -> bool {
    match v {
        V::Tensor(_) => true,
        V::Tuple(items) => items.iter().all(tensors_only),
        V::List(items) => items.borrow().iter().all(tensors_only),
        _ => false,
    }
}

fn rebuild(shape: &V, outs: &mut impl Iterator<Item = ValueId>) -> V {
    rebuild_into(None, shape, outs)
}

/// A value of `shape` over the cond's outputs. A list the variable held
/// before (`original`) is written in place, so every other reference to
/// it sees the branch's writes, as in Python.
fn rebuild_into(original: Option<&V>, shape: &V, outs: &mut impl Iterator<Item = ValueId>) -> V {
    match shape {
        V::Tuple(items) => V::Tuple(
            items
                .iter()
                .enumerate()
                .map(|(i, x)| {
                    let o = match original {
                        Some(V::Tuple(o)) => o.get(i),
                        _ => None,
                    };
                    rebuild_into(o, x, outs)
                })
                .collect(),
        ),
        V::List(items) => {
            let items = items.borrow().clone();
            let old: Vec<V> = match original {
                Some(V::List(o)) => o.borrow().clone(),
                _ => Vec::new(),
            };
            let new: Vec<V> = items
                .iter()
                .enumerate()
                .map(|(i, x)| rebuild_into(old.get(i), x, outs))
                .collect();
            match original {
                Some(V::List(o)) if old.len() == new.len() => {
                    *o.borrow_mut() = new;
                    V::List(o.clone())
                }
                _ => V::list(new),
            }
        }
        _ => outs.next().map(V::Tensor).unwrap_or(V::None),
    }
}

/// A copy of the variables whose lists and dicts are new objects (lists
/// shared between variables stay shared in the copy).
fn detach(vars: &HashMap<String, V>) -> HashMap<String, V> {
    fn copy(v: &V, seen: &mut HashMap<usize, V>) -> V {
        match v {
            V::List(l) => {
                let key = Rc::as_ptr(l) as usize;
                if let Some(c) = seen.get(&key) {
                    return c.clone();
                }
                let fresh = Rc::new(RefCell::new(Vec::new()));
                seen.insert(key, V::List(fresh.clone()));
                let items: Vec<V> = l.borrow().iter().map(|x| copy(x, seen)).collect();
                *fresh.borrow_mut() = items;
                V::List(fresh)
            }
            V::Dict(d) => {
                let key = Rc::as_ptr(d) as usize;
                if let Some(c) = seen.get(&key) {
                    return c.clone();
                }
                let fresh = Rc::new(RefCell::new(Vec::new()));
                seen.insert(key, V::Dict(fresh.clone()));
                let items: Vec<(V, V)> = d
                    .borrow()
                    .iter()
                    .map(|(k, x)| (copy(k, seen), copy(x, seen)))
                    .collect();
                *fresh.borrow_mut() = items;
                V::Dict(fresh)
            }
            V::Tuple(items) => V::Tuple(items.iter().map(|x| copy(x, seen)).collect()),
            other => other.clone(),
        }
    }
    let mut seen = HashMap::new();
    vars.iter()
        .map(|(k, v)| (k.clone(), copy(v, &mut seen)))
        .collect()
}

/// Whether two values are the same: tensors by identity, lists, tuples and
/// dicts item by item (a branch's copy of a list it did not write is the
/// list it copied).
fn same_value(a: &V, b: &V) -> bool {
    match (a, b) {
        (V::List(x), V::List(y)) => {
            Rc::ptr_eq(x, y) || {
                let (x, y) = (x.borrow(), y.borrow());
                x.len() == y.len() && x.iter().zip(y.iter()).all(|(p, q)| same_value(p, q))
            }
        }
        (V::Tuple(x), V::Tuple(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(p, q)| same_value(p, q))
        }
        (V::Dict(x), V::Dict(y)) => {
            Rc::ptr_eq(x, y) || {
                let (x, y) = (x.borrow(), y.borrow());
                x.len() == y.len()
                    && x.iter()
                        .zip(y.iter())
                        .all(|((k1, v1), (k2, v2))| same_value(k1, k2) && same_value(v1, v2))
            }
        }
        _ => is_same(a, b),
    }
}

/// The first list (by variable name, lists in tuples included) longer or
/// shorter in `after` than it was in `before`.
fn grown(before: &HashMap<String, V>, after: &HashMap<String, V>) -> Option<String> {
    fn lengths(v: &V, out: &mut Vec<usize>) {
        match v {
            V::List(l) => {
                let l = l.borrow();
                out.push(l.len());
                l.iter().for_each(|x| lengths(x, out));
            }
            V::Tuple(items) => items.iter().for_each(|x| lengths(x, out)),
            _ => {}
        }
    }
    let mut names: Vec<&String> = before.keys().collect();
    names.sort();
    names.into_iter().find_map(|k| {
        let (mut a, mut b) = (Vec::new(), Vec::new());
        lengths(&before[k], &mut a);
        lengths(after.get(k)?, &mut b);
        (a != b).then(|| k.clone())
    })
}
