//! Control flow: cond, while_loop, map and other higher-order ops: the decomposition rules.
//!
//! Which higher-order op each tool answers how, and the ones refused with
//! their reasons: [`crate::decompose::hops`] (checked against torch's list,
//! `lib/data/higher_order_ops.txt`).

use crate::ir::op::{aten, higher_order};
use super::*;
use crate::decompose::autocast::{self, Region};
use crate::ir::{ArgKind, Graph, NamedArg, Node, Subgraph, Target, ValueKind};

/// The subgraph argument of a wrapper and the operands it is called with:
/// the positional arguments after it, lists flattened; an identifier
/// (`invoke_subgraph`'s string) and a kwargs dict are not operands.
fn wrapped<'n>(a: &NodeArgs<'n>) -> Result<(&'n Graph, Vec<Argument>)> {
    let node = a.0;
    let at = node
        .inputs
        .iter()
        .position(|i| matches!(i.arg, Argument::Graph(_)))
        .ok_or_else(|| Error::bad_input(format!("node {}: no subgraph", node.name)))?;
    let Argument::Graph(sub) = &node.inputs[at].arg else {
        return Err(Error::internal("a subgraph argument moved"));
    };
    let mut args = Vec::new();
    for i in &node.inputs[at + 1..] {
        if i.kind == ArgKind::Keyword {
            continue;
        }
        match &i.arg {
            Argument::String(_) | Argument::StringToArgument(_) => {}
            Argument::Tensors(vs) => args.extend(vs.iter().map(|v| Argument::Tensor(*v))),
            Argument::SymInts(vs) => args.extend(vs.iter().map(|v| Argument::SymInt(*v))),
            other => args.push(other.clone()),
        }
    }
    Ok((&sub.graph, args))
}

/// The values a subgraph's outputs stand for, in order.
fn output_ids(outs: Vec<Argument>) -> Vec<ValueId> {
    let mut ids = Vec::new();
    for o in outs {
        let mut refs = Vec::new();
        o.value_refs(&mut refs);
        ids.extend(refs);
    }
    ids
}

/// Grad mode, a compile-region boundary and compiler hints mean nothing
/// to inference: the wrapped subgraph is inlined (as torch's
/// `run_decompositions()` does).
fn inline_subgraph(em: &mut Emitter, a: &NodeArgs) -> Result<Vec<ValueId>> {
    let (sub, args) = wrapped(a)?;
    Ok(output_ids(em.inline(sub, &args)?))
}

/// An autocast region, inlined with torch's CPU cast policy
/// ([`autocast`]): casts before the ops the policy names; a disabled
/// region as it is.
fn inline_autocast(em: &mut Emitter, a: &NodeArgs) -> Result<Vec<ValueId>> {
    let region = Region::of(a.0)?;
    let (sub, args) = wrapped(a)?;
    let outs = em.inline_with(sub, &args, &mut |em, n| autocast::apply(em, n, &region))?;
    Ok(output_ids(outs))
}

/// `print(format, *args)` prints and returns nothing: no back end here
/// prints, so it goes (what it would print does not change a result).
fn drop_print(_: &mut Emitter, _: &NodeArgs) -> Result<Vec<ValueId>> {
    Ok(Vec::new())
}

/// `out_dtype(op, dtype, *args)`: torch's fallback: the tensors cast to
/// the type they promote to with `dtype`, the op, the result cast to
/// `dtype` (int8 products into int32 come out exact, as `_int_mm`'s do).
fn out_dtype(em: &mut Emitter, a: &NodeArgs) -> Result<Vec<ValueId>> {
    let node = a.0;
    let op = match node.inputs.first().map(|i| &i.arg) {
        Some(Argument::Operator(s)) => s.trim_start_matches("torch.ops.").to_string(),
        other => {
            return Err(Error::bad_input(format!(
                "node {}: out_dtype's op is {other:?}",
                node.name
            )))
        }
    };
    let Some(Argument::ScalarType(want)) = node.inputs.get(1).map(|i| &i.arg) else {
        return Err(Error::bad_input(format!(
            "node {}: out_dtype without a dtype",
            node.name
        )));
    };
    let target = Target::parse(&format!("torch.ops.{op}"))
        .ok_or_else(|| Error::bad_input(format!("node {}: op {op} does not parse", node.name)))?;
    let schema = crate::schema::lookup(&target.namespace, &target.name, &target.overload)
        .ok_or_else(|| Error::unsupported(format!("node {}: no schema for {op}", node.name)))?;
    let operands = &node.inputs[2..];
    let mut common = *want;
    for i in operands {
        if let Argument::Tensor(v) = &i.arg {
            common = crate::promote::promote_types(common, em.dtype(*v)?);
        }
    }
    let mut args: Vec<(String, Argument)> = Vec::new();
    for (k, i) in operands.iter().enumerate() {
        let name = schema
            .args
            .get(k)
            .map(|s| s.name.clone())
            .ok_or_else(|| {
                Error::bad_input(format!(
                    "node {}: {op} takes {} arguments, out_dtype gives it {}",
                    node.name,
                    schema.args.len(),
                    operands.len()
                ))
            })?;
        let arg = match &i.arg {
            Argument::Tensor(v) if em.dtype(*v)? != common => {
                let meta = em.meta_like(*v, common, em.sizes(*v)?)?;
                Argument::Tensor(em.op(
                    aten::_TO_COPY,
                    vec![
                        ("self", Argument::Tensor(*v)),
                        ("dtype", Argument::ScalarType(common)),
                    ],
                    meta,
                )?)
            }
            other => other.clone(),
        };
        args.push((name, arg));
    }
    let out = a.out(0)?;
    let args: Vec<(&str, Argument)> = args.iter().map(|(n, a)| (n.as_str(), a.clone())).collect();
    if common == *want {
        em.op_into(&op, args, out)?;
    } else {
        let meta = em.meta_like(out, common, em.sizes(out)?)?;
        let r = em.op(&op, args, meta)?;
        em.op_into(
            aten::_TO_COPY,
            vec![
                ("self", Argument::Tensor(r)),
                ("dtype", Argument::ScalarType(*want)),
            ],
            out,
        )?;
    }
    Ok(vec![out])
}

/// `associative_scan(combine, xs, additional)` over dim 0 (export moves
/// the scan dim there) as a `scan`: the first row of each input is the
/// carry, the combine runs on (carry, row) for every later row, and each
/// result is the first row followed by the carries. torch combines in a
/// tree; the sums here go in order (the same up to rounding).
fn associative_scan(em: &mut Emitter, a: &NodeArgs) -> Result<Vec<ValueId>> {
    let node = a.0;
    let bad = |what: &str| Error::bad_input(format!("node {}: associative_scan {what}", node.name));
    let arg = |i: usize| node.inputs.get(i).map(|a| &a.arg);
    let Some(Argument::Graph(combine)) = arg(0) else {
        return Err(bad("without a combine graph"));
    };
    let xs = match arg(1) {
        Some(Argument::Tensors(v)) => v.clone(),
        Some(Argument::Tensor(v)) => vec![*v],
        _ => return Err(bad("without tensors to scan")),
    };
    let additional = match arg(2) {
        Some(Argument::Tensors(v)) => v.clone(),
        Some(Argument::None) | None => Vec::new(),
        _ => return Err(bad("with additional inputs that are not tensors")),
    };
    let outs = a.outs();
    if outs.len() != xs.len() || xs.is_empty() {
        return Err(bad(&format!(
            "of {} tensors with {} outputs",
            xs.len(),
            outs.len()
        )));
    }
    let mut inits = Vec::new();
    let mut firsts = Vec::new();
    let mut rests = Vec::new();
    for &x in &xs {
        let sizes = em.sizes(x)?;
        if sizes.is_empty() {
            return Err(bad("over a 0-dim tensor"));
        }
        let row = em.meta_like(x, em.dtype(x)?, sizes[1..].to_vec())?;
        inits.push(em.op(
            aten::SELECT_INT,
            vec![
                ("self", Argument::Tensor(x)),
                ("dim", Argument::Int(0)),
                ("index", Argument::Int(0)),
            ],
            row,
        )?);
        let mut first = sizes.clone();
        first[0] = Sym::Int(1);
        let meta = em.meta_like(x, em.dtype(x)?, first)?;
        firsts.push(em.op(
            aten::SLICE_TENSOR,
            vec![
                ("self", Argument::Tensor(x)),
                ("dim", Argument::Int(0)),
                ("start", Argument::Int(0)),
                ("end", Argument::Int(1)),
            ],
            meta,
        )?);
        let mut rest = sizes.clone();
        rest[0] = sym_add(&sizes[0], &Sym::Int(-1));
        let meta = em.meta_like(x, em.dtype(x)?, rest)?;
        rests.push(em.op(
            aten::SLICE_TENSOR,
            vec![
                ("self", Argument::Tensor(x)),
                ("dim", Argument::Int(0)),
                ("start", Argument::Int(1)),
                ("end", Argument::Int(i64::MAX)),
            ],
            meta,
        )?);
    }
    // The scan body: the combine graph, its results returned twice (the
    // next carry, and the row stacked into the result; a copy, so no value
    // is two outputs).
    let mut body: Graph = (*combine.graph).clone();
    let results = body.outputs.clone();
    let mut names = super::super::edit::Names::of(&body);
    let mut ys = Vec::new();
    {
        let mut bem = Emitter::new(&mut body.values, &mut names, node.meta.clone());
        for r in &results {
            let Argument::Tensor(v) = r else {
                return Err(bad("whose combine returns something other than tensors"));
            };
            let meta = bem.meta(*v)?.clone();
            ys.push(Argument::Tensor(bem.op(
                aten::CLONE,
                vec![("self", Argument::Tensor(*v))],
                meta,
            )?));
        }
        let emitted = std::mem::take(&mut bem.nodes);
        body.nodes.extend(emitted);
    }
    if results.len() != xs.len() {
        return Err(bad(&format!(
            "whose combine returns {} values for {} inputs",
            results.len(),
            xs.len()
        )));
    }
    body.outputs.extend(ys);
    body.is_single_tensor_return = false;
    let mut carries = Vec::new();
    let mut stacked = Vec::new();
    for k in 0..xs.len() {
        let row = em.meta(inits[k])?.clone();
        carries.push(em.new_value("scan_carry", ValueKind::Tensor(row)));
        let mut meta = em.meta(rests[k])?.clone();
        meta.dtype = em.dtype(outs[k])?;
        stacked.push(em.new_value("scan_rows", ValueKind::Tensor(meta)));
    }
    let positional = |arg: Argument| NamedArg {
        name: String::new(),
        arg,
        kind: ArgKind::Positional,
        defaulted: false,
    };
    let target = Target::parse("torch.ops.higher_order.scan")
        .ok_or_else(|| Error::internal("higher_order.scan does not parse"))?;
    let name = em.names.fresh("scan");
    em.nodes.push(Node {
        name,
        target,
        inputs: vec![
            positional(Argument::Graph(Subgraph {
                name: format!("{}_as_scan", combine.name),
                graph: Box::new(body),
            })),
            positional(Argument::Tensors(inits)),
            positional(Argument::Tensors(rests)),
            positional(Argument::Tensors(additional)),
        ],
        outputs: carries
            .iter()
            .chain(&stacked)
            .map(|v| Argument::Tensor(*v))
            .collect(),
        meta: em.meta.clone(),
        is_hop_single_tensor_return: None,
    });
    let mut result = Vec::new();
    for k in 0..xs.len() {
        result.push(em.op_into(
            aten::CAT,
            vec![
                ("tensors", Argument::Tensors(vec![firsts[k], stacked[k]])),
                ("dim", Argument::Int(0)),
            ],
            outs[k],
        )?);
    }
    Ok(result)
}

rules! {
    higher_order::WRAP_WITH_SET_GRAD_ENABLED => [] inline_subgraph;
    higher_order::WRAP_WITH_AUTOCAST => [aten::_TO_COPY] inline_autocast;
    higher_order::INVOKE_SUBGRAPH => [] inline_subgraph;
    higher_order::HINTS_WRAPPER => [] inline_subgraph;
    higher_order::PRINT => [] drop_print;
    higher_order::OUT_DTYPE => [aten::_TO_COPY] out_dtype;
    higher_order::ASSOCIATIVE_SCAN => [higher_order::SCAN, aten::SELECT_INT, aten::SLICE_TENSOR, aten::CAT, aten::CLONE] associative_scan;
}

/// Ops that are another op of this family under another name.
pub(super) const ALIASES: &[(&str, &str)] = &[];
