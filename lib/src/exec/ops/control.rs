//! Control flow: cond, while_loop, map and other higher-order ops: the executor rows.

use crate::ir::op::higher_order;
use super::*;

/// `higher_order.wrap_with_set_grad_enabled(enabled, subgraph, *operands)`:
/// gradients do not exist here, so it runs the subgraph.
fn wrap_with_set_grad_enabled(ctx: &mut Ctx) -> OpResult {
    let sub = match ctx.input_arg(1) {
        Some(Argument::Graph(g)) => g,
        _ => {
            return Err(Error::bad_input(
                "wrap_with_set_grad_enabled without a subgraph",
            ))
        }
    };
    let operands = (2..ctx.node.inputs.len())
        .map(|i| ctx.input(i))
        .collect::<Result<Vec<_>>>()?;
    ctx.exec
        .run_graph(&sub.graph, operands, ctx.bindings)
        .map_err(|e| e.at(format!("subgraph '{}'", sub.name)))
}

/// A predicate as torch reads one: a bool, an int, or a one-element tensor.
fn truth(v: &Value, what: &str) -> Result<bool> {
    match v {
        Value::Bool(b) => Ok(*b),
        Value::Int(i) => Ok(*i != 0),
        Value::Tensor(t) => {
            let vals = t.to_host()?.to_f64();
            match vals.as_slice() {
                [v] => Ok(*v != 0.0),
                _ => Err(Error::bad_input(format!(
                    "{what} is a tensor of shape {:?}, not one value",
                    t.dims()
                ))),
            }
        }
        other => Err(Error::bad_input(format!("{what} is {other:?}"))),
    }
}

/// The subgraph at input `i`.
fn subgraph_at<'a>(ctx: &'a Ctx, i: usize, what: &str) -> Result<&'a Subgraph> {
    match ctx.input_arg(i) {
        Some(Argument::Graph(g)) => Ok(g),
        _ => Err(Error::bad_input(format!(
            "{} without its {what} subgraph (input {i})",
            ctx.node.target
        ))),
    }
}

/// The values of a list input (operands, carried or mapped tensors); an
/// absent input is an empty list.
fn list_at(ctx: &Ctx, i: usize) -> Result<Vec<Value>> {
    if ctx.input_arg(i).is_none() {
        return Ok(Vec::new());
    }
    Ok(match ctx.input(i)? {
        Value::List(items) => items,
        Value::None => Vec::new(),
        other => vec![other],
    })
}

/// Runs a subgraph on its inputs, named in errors.
fn run_subgraph(ctx: &Ctx, sub: &Subgraph, inputs: Vec<Value>) -> OpResult {
    if inputs.len() != sub.graph.inputs.len() {
        return Err(Error::bad_input(format!(
            "subgraph '{}' takes {} inputs, but {} are given",
            sub.name,
            sub.graph.inputs.len(),
            inputs.len()
        )));
    }
    ctx.exec
        .run_graph(&sub.graph, inputs, ctx.bindings)
        .map_err(|e| e.at(format!("subgraph '{}'", sub.name)))
}

fn cond(ctx: &mut Ctx) -> OpResult {
    let pred = truth(&ctx.input(0)?, "the cond predicate")?;
    let branch = subgraph_at(ctx, if pred { 1 } else { 2 }, "branch")?;
    let operands = list_at(ctx, 3)?;
    // The node's outputs are the branch's first ones (torch reads them by
    // position; a branch with fewer is refused at load, infer/control.rs).
    let mut outs = run_subgraph(ctx, branch, operands)?;
    outs.truncate(ctx.node.outputs.len());
    Ok(outs)
}

/// `while_loop(cond_graph, body_graph, carried, additional)`, as torch
/// runs it: while the cond graph, on (carried, additional), returns true,
/// the body graph on the same values gives the next carried values. The
/// result is the last carried values (the initial ones when the body
/// never runs).
fn while_loop(ctx: &mut Ctx) -> OpResult {
    let cond_graph = subgraph_at(ctx, 0, "cond")?;
    let body_graph = subgraph_at(ctx, 1, "body")?;
    let mut carried = list_at(ctx, 2)?;
    let additional = list_at(ctx, 3)?;
    let with_additional = |carried: &[Value]| {
        let mut inputs = carried.to_vec();
        inputs.extend(additional.iter().cloned());
        inputs
    };
    let mut iterations: u64 = 0;
    loop {
        if ctx.exec.max_iterations.is_some_and(|max| iterations >= max) {
            return Err(Error::bad_input(format!(
                "still looping after {iterations} iterations, the bound on a while_loop (raise it with --max-iterations N)"
            )));
        }
        let pred = run_subgraph(ctx, cond_graph, with_additional(&carried))?;
        let [pred] = pred.as_slice() else {
            return Err(Error::bad_input(format!(
                "subgraph '{}' returned {} values, not one predicate",
                cond_graph.name,
                pred.len()
            )));
        };
        if !truth(pred, "the while_loop condition")? {
            return Ok(carried);
        }
        let next = run_subgraph(ctx, body_graph, with_additional(&carried))?;
        if next.len() != carried.len() {
            return Err(Error::bad_input(format!(
                "subgraph '{}' returned {} values for {} carried inputs",
                body_graph.name,
                next.len(),
                carried.len()
            )));
        }
        // Torch keeps every carried value's shape (its while_loop refuses
        // a body that changes one): a body that grows its carry, which
        // would double it every iteration, is refused before the next.
        keeps_shapes(body_graph, &next)?;
        iterations += 1;
        if let Some(budget) = ctx.exec.max_memory {
            crate::exec::budget::check_carry(budget, ctx.node, &next, iterations)?;
        }
        carried = next;
    }
}

/// Each carried tensor the body returns has the sizes its graph input
/// (the carried value) is recorded with, where those are constants.
fn keeps_shapes(body: &Subgraph, next: &[Value]) -> Result<()> {
    for (k, (arg, value)) in body.graph.inputs.iter().zip(next).enumerate() {
        let (Argument::Tensor(v), Value::Tensor(t)) = (arg, value) else {
            continue;
        };
        let ValueKind::Tensor(m) = &body.graph.value(*v).kind else {
            continue;
        };
        let differs = m.sizes.len() != t.dims().len()
            || m
                .sizes
                .iter()
                .zip(t.dims())
                .any(|(s, &d)| s.as_int().is_some_and(|n| n != d as i64));
        if differs {
            let recorded: Vec<String> = m
                .sizes
                .iter()
                .map(|s| s.as_int().map_or("?".into(), |n| n.to_string()))
                .collect();
            return Err(Error::bad_input(format!(
                "subgraph '{}' returned carried value {k} of shape {:?}, but the loop carries [{}]: a while_loop keeps every carried shape",
                body.name,
                t.dims(),
                recorded.join(", ")
            )));
        }
    }
    Ok(())
}

/// `map_impl(body_graph, xs, args)`: the body on slice i (along dim 0) of
/// every xs, with args, for each i; each output is the body's results
/// stacked along a new dim 0.
fn map_impl(ctx: &mut Ctx) -> OpResult {
    let body = subgraph_at(ctx, 0, "body")?;
    let xs: Vec<Tensor> = list_at(ctx, 1)?
        .into_iter()
        .map(|v| match v {
            Value::Tensor(t) if t.rank() > 0 => Ok(t),
            other => Err(Error::bad_input(format!(
                "map_impl maps over tensors with a dim 0, not {other:?}"
            ))),
        })
        .collect::<Result<_>>()?;
    let args = list_at(ctx, 2)?;
    let Some(n) = xs.first().map(|x| x.dims()[0]) else {
        return Err(Error::bad_input("map_impl without tensors to map over"));
    };
    if let Some(x) = xs.iter().find(|x| x.dims()[0] != n) {
        return Err(Error::bad_input(format!(
            "map_impl over dim 0 of sizes {n} and {}",
            x.dims()[0]
        )));
    }
    let count = ctx.node.outputs.len();
    let mut slices: Vec<Vec<CandleTensor>> = vec![Vec::with_capacity(n); count];
    let mut dtypes: Vec<Option<Dtype>> = vec![None; count];
    for i in 0..n {
        let mut inputs = Vec::with_capacity(xs.len() + args.len());
        for x in &xs {
            inputs.push(Value::Tensor(Tensor::new(x.t.get(i)?, x.dtype)));
        }
        inputs.extend(args.iter().cloned());
        let outs = run_subgraph(ctx, body, inputs)?;
        if outs.len() != count {
            return Err(Error::bad_input(format!(
                "subgraph '{}' returned {} values, the node has {count} outputs",
                body.name,
                outs.len()
            )));
        }
        for (k, out) in outs.into_iter().enumerate() {
            let Value::Tensor(t) = out else {
                return Err(Error::unsupported(format!(
                    "map_impl output {k} is {out:?}, not a tensor"
                )));
            };
            dtypes[k] = Some(t.dtype);
            slices[k].push(t.t);
        }
    }
    let mut result = Vec::with_capacity(count);
    for (k, parts) in slices.into_iter().enumerate() {
        let t = match dtypes[k] {
            Some(dtype) => Tensor::new(CandleTensor::stack(&parts, 0)?, dtype),
            None => empty_output(ctx, k)?,
        };
        result.push(Value::Tensor(t));
    }
    Ok(result)
}

/// `scan(combine_graph, init, xs, additional_inputs)`, as torch runs it:
/// for each slice i along dim 0 of every xs, the combine graph on (carry,
/// slices, additional inputs) gives the next carry and one slice of each
/// stacked output. The outputs are the last carry, then the stacked slices
/// (a recurrence over a sequence whose length may be symbolic).
fn scan(ctx: &mut Ctx) -> OpResult {
    let combine = subgraph_at(ctx, 0, "combine")?;
    let mut carry = list_at(ctx, 1)?;
    let xs: Vec<Tensor> = list_at(ctx, 2)?
        .into_iter()
        .map(|v| match v {
            Value::Tensor(t) if t.rank() > 0 => Ok(t),
            other => Err(Error::bad_input(format!(
                "scan runs over tensors with a dim 0, not {other:?}"
            ))),
        })
        .collect::<Result<_>>()?;
    let additional = list_at(ctx, 3)?;
    let Some(n) = xs.first().map(|x| x.dims()[0]) else {
        return Err(Error::bad_input("scan without tensors to scan over"));
    };
    if let Some(x) = xs.iter().find(|x| x.dims()[0] != n) {
        return Err(Error::bad_input(format!(
            "scan over dim 0 of sizes {n} and {}",
            x.dims()[0]
        )));
    }
    let count = ctx.node.outputs.len();
    let stacked = count.checked_sub(carry.len()).ok_or_else(|| {
        Error::bad_input(format!(
            "scan with {} carried values has only {count} outputs",
            carry.len()
        ))
    })?;
    let mut slices: Vec<Vec<CandleTensor>> = vec![Vec::with_capacity(n); stacked];
    let mut dtypes: Vec<Option<Dtype>> = vec![None; stacked];
    for i in 0..n {
        let mut inputs = carry.clone();
        for x in &xs {
            inputs.push(Value::Tensor(Tensor::new(x.t.get(i)?, x.dtype)));
        }
        inputs.extend(additional.iter().cloned());
        let mut outs = run_subgraph(ctx, combine, inputs)?;
        if outs.len() != count {
            return Err(Error::bad_input(format!(
                "subgraph '{}' returned {} values, the node has {count} outputs",
                combine.name,
                outs.len()
            )));
        }
        let ys = outs.split_off(carry.len());
        carry = outs;
        for (k, out) in ys.into_iter().enumerate() {
            let Value::Tensor(t) = out else {
                return Err(Error::unsupported(format!(
                    "scan output {} is {out:?}, not a tensor",
                    carry.len() + k
                )));
            };
            dtypes[k] = Some(t.dtype);
            slices[k].push(t.t);
        }
    }
    let mut result = carry;
    for (k, parts) in slices.into_iter().enumerate() {
        let t = match dtypes[k] {
            Some(dtype) => Tensor::new(CandleTensor::stack(&parts, 0)?, dtype),
            None => empty_output(ctx, result.len())?,
        };
        result.push(Value::Tensor(t));
    }
    Ok(result)
}

/// Output `k` of the node, empty (a map over zero slices), from its
/// recorded dtype and sizes.
fn empty_output(ctx: &Ctx, k: usize) -> Result<Tensor> {
    let meta = match ctx.node.outputs.get(k) {
        Some(Argument::Tensor(v)) => match &ctx.graph.value(*v).kind {
            ValueKind::Tensor(meta) => meta,
            _ => return Err(Error::bad_input(format!("output {k} is not a tensor"))),
        },
        _ => return Err(Error::bad_input(format!("output {k} is not a tensor"))),
    };
    let inner: Vec<usize> = meta
        .sizes
        .iter()
        .skip(1)
        .map(|s| match s {
            Sym::Int(v) => Ok(*v as usize),
            other => Err(Error::unsupported(format!(
                "an empty map output with symbolic size {other:?}"
            ))),
        })
        .collect::<Result<_>>()?;
    let mut shape = vec![0];
    shape.extend(inner);
    let t = CandleTensor::zeros(shape, storage_dtype(meta.dtype)?, ctx.device())?;
    Ok(Tensor::new(t, meta.dtype))
}

/// This family's rows: op identity -> implementation.
pub(super) const ROWS: &[(&str, OpFn)] = &[
    (higher_order::COND, cond),
    (higher_order::WHILE_LOOP, while_loop),
    (higher_order::MAP_IMPL, map_impl),
    (higher_order::SCAN, scan),
    (
        higher_order::WRAP_WITH_SET_GRAD_ENABLED,
        wrap_with_set_grad_enabled,
    ),
];
