//! `vmap` regions unrolled, sample by sample.
//!
//! A `torch.vmap` traced by `torch.export` (functorch's batching; what
//! `associative_scan(..., combine_mode="generic")` leaves) is written as
//! Python calls of `torch._functorch.predispatch`: `_vmap_increment_nesting
//! (batch_size, randomness)` opens a region, `_add_batch_dim(x, in_dim,
//! level)` makes a batched value (its recorded shape is one sample's),
//! the ops between run per sample, `_remove_batch_dim(y, level,
//! batch_size, out_dim)` stacks the samples back, `_vmap_decrement_nesting
//! ()` closes the region. No back end runs a batched value, so each region
//! becomes plain ops: per sample `i`, `_add_batch_dim` is
//! `select(x, in_dim, i)`, every op that reads a batched value is copied,
//! and `_remove_batch_dim` stacks the copies at `out_dim` (torch's own
//! `run_decompositions()` removes them through batching rules; this gives
//! the same values). Ops of a region that read no batched value run once.
//! Nested regions unroll outermost first.

use crate::ir::op::aten;
use std::collections::HashMap;

use super::edit::{Emitter, Names};
use crate::ir::{Argument, Graph, Node, Program, Sym, ValueId};
use crate::{Error, Result};

/// At most this many nodes come out of unrolling one program's regions.
const MAX_UNROLLED: usize = 200_000;

fn is(node: &Node, name: &str) -> bool {
    node.target.name == name && node.target.namespace.ends_with("_functorch.predispatch")
}

/// Whether a graph (or a subgraph) holds a functorch batching call.
pub fn has_regions(g: &Graph) -> bool {
    let mut found = false;
    g.visit_nodes(&mut |n| {
        found |= n.target.namespace.ends_with("_functorch.predispatch");
    });
    found
}

/// Unrolls every vmap region of a program: how many regions.
pub fn unroll(p: &mut Program) -> Result<usize> {
    let mut budget = MAX_UNROLLED;
    unroll_graph(&mut p.graph, &mut budget)
}

fn int_at(node: &Node, i: usize, what: &str) -> Result<i64> {
    match node.inputs.get(i).map(|a| &a.arg) {
        Some(Argument::Int(v)) => Ok(*v),
        Some(Argument::SymInt(crate::ir::SymRef::Int(v))) => Ok(*v),
        other => Err(Error::unsupported(format!(
            "node {}: {} {what} is {other:?}, not a constant int",
            node.name, node.target
        ))),
    }
}

fn tensor_at(node: &Node, i: usize) -> Result<ValueId> {
    match node.inputs.get(i).map(|a| &a.arg) {
        Some(Argument::Tensor(v)) => Ok(*v),
        other => Err(Error::bad_input(format!(
            "node {}: {} takes a tensor, not {other:?}",
            node.name, node.target
        ))),
    }
}

fn unroll_graph(g: &mut Graph, budget: &mut usize) -> Result<usize> {
    let mut count = 0;
    for node in &mut g.nodes {
        for input in &mut node.inputs {
            if let Argument::Graph(sub) = &mut input.arg {
                count += unroll_graph(&mut sub.graph, budget)?;
            }
        }
    }
    while let Some(open) = g
        .nodes
        .iter()
        .position(|n| is(n, "_vmap_increment_nesting"))
    {
        let mut depth = 0usize;
        let mut close = None;
        for (k, n) in g.nodes.iter().enumerate().skip(open) {
            if is(n, "_vmap_increment_nesting") {
                depth += 1;
            } else if is(n, "_vmap_decrement_nesting") {
                depth -= 1;
                if depth == 0 {
                    close = Some(k);
                    break;
                }
            }
        }
        let close = close.ok_or_else(|| {
            Error::bad_input(format!(
                "node {}: a vmap region that is never closed (no _vmap_decrement_nesting)",
                g.nodes[open].name
            ))
        })?;
        let batch = int_at(&g.nodes[open], 0, "batch_size")?;
        let batch = usize::try_from(batch).map_err(|_| {
            Error::bad_input(format!(
                "node {}: vmap over {batch} samples",
                g.nodes[open].name
            ))
        })?;
        let mut nodes = std::mem::take(&mut g.nodes);
        let after = nodes.split_off(close + 1);
        let region: Vec<Node> = nodes.drain(open..).collect();
        let body = &region[1..region.len() - 1];
        let emitted = unroll_region(g, body, batch, budget)?;
        nodes.extend(emitted);
        nodes.extend(after);
        g.nodes = nodes;
        count += 1;
    }
    // A lone `lazy_load_decompositions()` (it precedes each region) does
    // nothing.
    g.nodes
        .retain(|n| !is(n, "lazy_load_decompositions") || n.outputs.iter().any(has_value));
    Ok(count)
}

fn has_value(a: &Argument) -> bool {
    let mut refs = Vec::new();
    a.value_refs(&mut refs);
    !refs.is_empty()
}

/// The nodes one region becomes.
fn unroll_region(
    g: &mut Graph,
    body: &[Node],
    batch: usize,
    budget: &mut usize,
) -> Result<Vec<Node>> {
    // The region's level: that of its own `_add_batch_dim`s (a nested
    // region's are deeper).
    let mut level = None;
    let mut depth = 0usize;
    for n in body {
        if is(n, "_vmap_increment_nesting") {
            depth += 1;
        } else if is(n, "_vmap_decrement_nesting") {
            depth = depth.saturating_sub(1);
        } else if depth == 0 && is(n, "_add_batch_dim") {
            let l = int_at(n, 2, "level")?;
            level = Some(level.map_or(l, |m: i64| m.min(l)));
        }
    }
    let copies = body.len().saturating_mul(batch.max(1));
    *budget = budget.checked_sub(copies).ok_or_else(|| {
        Error::unsupported(format!(
            "a vmap region of {} nodes over {batch} samples unrolls to more than {MAX_UNROLLED} nodes",
            body.len()
        ))
    })?;
    let meta = body.first().map(|n| n.meta.clone()).unwrap_or_default();
    let mut names = Names::of(g);
    let mut em = Emitter::new(&mut g.values, &mut names, meta);
    // Per sample: batched value -> its sample.
    let mut samples: Vec<HashMap<ValueId, ValueId>> = vec![HashMap::new(); batch];
    let ours = |n: &Node| -> Result<bool> {
        Ok(level.is_some()
            && int_at(n, if is(n, "_add_batch_dim") { 2 } else { 1 }, "level")?
                == level.unwrap_or(0))
    };
    for n in body {
        if (is(n, "_add_batch_dim") || is(n, "_remove_batch_dim")) && !ours(n)? {
            // A nested region's: copied like any op below.
        } else if is(n, "_add_batch_dim") {
            let x = tensor_at(n, 0)?;
            let dim = int_at(n, 1, "in_dim")?;
            let out = tensor_at_out(n)?;
            let meta = em.meta(out)?.clone();
            for (i, sample) in samples.iter_mut().enumerate() {
                let src = sample.get(&x).copied().unwrap_or(x);
                let v = em.op(
                    aten::SELECT_INT,
                    vec![
                        ("self", Argument::Tensor(src)),
                        ("dim", Argument::Int(dim)),
                        ("index", Argument::Int(i as i64)),
                    ],
                    meta.clone(),
                )?;
                sample.insert(out, v);
            }
            continue;
        } else if is(n, "_remove_batch_dim") {
            let y = tensor_at(n, 0)?;
            let out_dim = int_at(n, 3, "out_dim")?;
            let out = tensor_at_out(n)?;
            let per: Vec<ValueId> = samples
                .iter()
                .map(|s| s.get(&y).copied().unwrap_or(y))
                .collect();
            stack(&mut em, out, out_dim, per)?;
            continue;
        }
        if is(n, "lazy_load_decompositions") {
            continue;
        }
        let mut reads = Vec::new();
        n.inputs.iter().for_each(|a| a.arg.value_refs(&mut reads));
        let batched = samples
            .first()
            .is_some_and(|s| reads.iter().any(|v| s.contains_key(v)));
        if !batched {
            em.nodes.push(n.clone());
            continue;
        }
        for sample in samples.iter_mut() {
            let mut c = n.clone();
            let f = |v: ValueId| sample.get(&v).copied().unwrap_or(v);
            c.substitute_inputs(&f);
            let mut outs = Vec::new();
            n.outputs.iter().for_each(|a| a.value_refs(&mut outs));
            let mut fresh: HashMap<ValueId, ValueId> = HashMap::new();
            for o in outs {
                let v = &em.values[o.index()];
                let (name, kind) = (v.name.clone(), v.kind.clone());
                fresh.insert(o, em.new_value(&name, kind));
            }
            let fo = |v: ValueId| fresh.get(&v).copied().unwrap_or(v);
            crate::ir::substitute_values(&mut c.outputs, &fo);
            c.name = match super::args::node_outputs(&c).first() {
                Some(v) => em.values[v.index()].name.clone(),
                None => em.names.fresh(&n.name),
            };
            em.nodes.push(c);
            sample.extend(fresh);
        }
    }
    Ok(std::mem::take(&mut em.nodes))
}

fn tensor_at_out(node: &Node) -> Result<ValueId> {
    match node.outputs.first() {
        Some(Argument::Tensor(v)) => Ok(*v),
        other => Err(Error::bad_input(format!(
            "node {}: {} defines {other:?}, not a tensor",
            node.name, node.target
        ))),
    }
}

/// A `_remove_batch_dim`: the samples stacked at `dim` into `out` (zeros
/// of its recorded shape for a vmap over no samples).
fn stack(em: &mut Emitter, out: ValueId, dim: i64, per: Vec<ValueId>) -> Result<()> {
    if per.is_empty() {
        let meta = em.meta(out)?.clone();
        let sizes: Vec<i64> = meta
            .sizes
            .iter()
            .map(|s| match s {
                Sym::Int(v) => Ok(*v),
                other => Err(Error::unsupported(format!(
                    "an empty vmap result of symbolic size {other:?}"
                ))),
            })
            .collect::<Result<_>>()?;
        em.op_into(
            aten::FULL,
            vec![
                ("size", Argument::Ints(sizes)),
                ("fill_value", Argument::Float(0.0)),
                ("dtype", Argument::ScalarType(meta.dtype)),
                ("device", Argument::Device(meta.device.clone())),
            ],
            out,
        )?;
    } else {
        em.op_into(
            aten::STACK,
            vec![
                ("tensors", Argument::Tensors(per)),
                ("dim", Argument::Int(dim)),
            ],
            out,
        )?;
    }
    Ok(())
}
