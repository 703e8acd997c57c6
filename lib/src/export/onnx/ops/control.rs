//! Control flow: cond, while_loop, map and other higher-order ops: the ONNX emitters.

use crate::ir::op::higher_order;
use super::*;

// control flow

/// The ONNX names of the values in a list argument of a higher-order op
/// (operands, carried, mapped or additional tensors).
fn value_names(cx: &EmitNode, arg: &Argument) -> Result<Vec<String>> {
    let mut refs = Vec::new();
    arg.value_refs(&mut refs);
    refs.iter().map(|v| cx.value_name(*v)).collect()
}

/// The dtype of a subgraph's one output (a predicate).
fn predicate_dtype(graph: &Graph, what: &str) -> Result<Dtype> {
    let mut refs = Vec::new();
    graph.outputs.iter().for_each(|a| a.value_refs(&mut refs));
    let [v] = refs.as_slice() else {
        return Err(Error::bad_input(format!(
            "the {what} graph returns {} values, not one predicate",
            refs.len()
        )));
    };
    match &graph.value(*v).kind {
        ValueKind::Tensor(meta) => Ok(meta.dtype),
        ValueKind::SymBool(_) => Ok(Dtype::Bool),
        ValueKind::SymInt(_) => Ok(Dtype::Int64),
        other => Err(Error::unsupported(format!(
            "a {what} graph returning {other:?}"
        ))),
    }
}

/// `cond(pred, true_graph, false_graph, operands)` as an If whose branches
/// read the operands from the enclosing scope.
pub(super) fn cond(cx: &mut EmitNode) -> Result<()> {
    let pred = cx.operand_of(cx.pos(0)?, "pred")?;
    let (Argument::Graph(then_g), Argument::Graph(else_g)) = (cx.pos(1)?, cx.pos(2)?) else {
        return Err(Error::bad_input("cond without its branch graphs"));
    };
    let operands = value_names(cx, cx.pos(3)?)?;
    let p = cx.operand_as(&pred, Dtype::Bool)?;
    let node_name = cx.node.name.clone();
    let then_branch = cx.subgraph(
        &then_g.graph,
        &operands,
        &format!("{node_name}.{}", then_g.name),
    )?;
    let else_branch = cx.subgraph(
        &else_g.graph,
        &operands,
        &format!("{node_name}.{}", else_g.name),
    )?;
    // The node's outputs are the branches' first ones (see infer's cond
    // rule): an If's branches return exactly its outputs.
    let n = cx.out_count();
    let (mut then_branch, mut else_branch) = (then_branch, else_branch);
    then_branch.output.truncate(n);
    else_branch.output.truncate(n);
    let ys = cx.node_n(
        "If",
        &[&p],
        vec![
            attr_graph("then_branch", then_branch),
            attr_graph("else_branch", else_branch),
        ],
        n,
    );
    for (i, y) in ys.into_iter().enumerate() {
        cx.set(i, y);
    }
    Ok(())
}

/// `while_loop(cond_graph, body_graph, carried, additional)` as a Loop
/// with no trip count. The cond graph is inlined twice: before the Loop on
/// the initial values (the first condition) and at the end of the body on
/// the body's results (the next one). The body's carried values are its
/// graph inputs; the additional inputs are read from the enclosing scope.
fn while_loop(cx: &mut EmitNode) -> Result<()> {
    let (Argument::Graph(cond_g), Argument::Graph(body_g)) = (cx.pos(0)?, cx.pos(1)?) else {
        return Err(Error::bad_input(
            "while_loop without its cond and body graphs",
        ));
    };
    let carried = value_names(cx, cx.pos(2)?)?;
    let additional = match cx.node.inputs.get(3) {
        Some(a) => value_names(cx, &a.arg)?,
        None => Vec::new(),
    };
    let n = cx.out_count();
    if carried.len() != n || body_g.graph.inputs.len() != n + additional.len() {
        return Err(Error::unsupported(format!(
            "while_loop with {} carried tensors, {n} outputs and a body of {} inputs \
             (only tensors can be carried)",
            carried.len(),
            body_g.graph.inputs.len()
        )));
    }
    let cond_graph: &Graph = &cond_g.graph;
    let cond_dtype = predicate_dtype(cond_graph, "while_loop cond")?;
    let node_name = cx.node.name.clone();

    let mut inputs = carried.clone();
    inputs.extend(additional.iter().cloned());
    let first = cx.inline(cond_graph, &inputs)?;
    let [first] = first.as_slice() else {
        return Err(Error::bad_input(
            "the while_loop cond graph gives no predicate",
        ));
    };
    let first = cx.cast(first, cond_dtype, Dtype::Bool)?;

    let iter = cx.conv.unique(&format!("{node_name}.iter"));
    let cond_in = cx.conv.unique(&format!("{node_name}.cond_in"));
    let leading = vec![
        cx.conv
            .scalar_info(&iter, Dtype::Int64, "iteration number")?,
        cx.conv.scalar_info(&cond_in, Dtype::Bool, "condition")?,
    ];
    let body = cx.body(
        &body_g.graph,
        leading,
        &additional,
        &format!("{node_name}.{}", body_g.name),
        |conv, outs| {
            let mut inputs = outs.to_vec();
            inputs.extend(additional.iter().cloned());
            let next = conv.inline_subgraph(cond_graph, &inputs)?;
            let [next] = next.as_slice() else {
                return Err(Error::bad_input(
                    "the while_loop cond graph gives no predicate",
                ));
            };
            // Always a node of its own: the predicate may be a body input
            // or output as it is, and graph outputs need names of their own.
            let cond_out = format!("{node_name}.cond_out");
            let cond_out = if cond_dtype == Dtype::Bool {
                conv.add_node("Identity", &[next], vec![], &cond_out)
            } else {
                let to = crate::export::onnx::onnx_dtype(Dtype::Bool, conv.opset)? as i64;
                conv.add_node("Cast", &[next], vec![attr_int("to", to)], &cond_out)
            };
            Ok(vec![conv.scalar_info(
                &cond_out,
                Dtype::Bool,
                "condition",
            )?])
        },
    )?;
    let mut loop_inputs: Vec<&str> = vec!["", &first];
    loop_inputs.extend(carried.iter().map(String::as_str));
    let ys = cx.node_n("Loop", &loop_inputs, vec![attr_graph("body", body)], n);
    for (i, y) in ys.into_iter().enumerate() {
        cx.set(i, y);
    }
    Ok(())
}

/// `map_impl(body_graph, xs, args)` as a Scan with no state over dim 0 of
/// every xs: the body's outputs are stacked along a new dim 0, as map
/// stacks them; args are read from the enclosing scope.
fn map_impl(cx: &mut EmitNode) -> Result<()> {
    let Argument::Graph(body_g) = cx.pos(0)? else {
        return Err(Error::bad_input("map_impl without its body graph"));
    };
    let xs = value_names(cx, cx.pos(1)?)?;
    let args = match cx.node.inputs.get(2) {
        Some(a) => value_names(cx, &a.arg)?,
        None => Vec::new(),
    };
    if xs.is_empty() || body_g.graph.inputs.len() != xs.len() + args.len() {
        return Err(Error::unsupported(format!(
            "map_impl over {} tensors with {} other inputs and a body of {} inputs \
             (only tensors can be mapped over and passed)",
            xs.len(),
            args.len(),
            body_g.graph.inputs.len()
        )));
    }
    let node_name = cx.node.name.clone();
    let body = cx.body(
        &body_g.graph,
        Vec::new(),
        &args,
        &format!("{node_name}.{}", body_g.name),
        |_, _| Ok(Vec::new()),
    )?;
    let inputs: Vec<&str> = xs.iter().map(String::as_str).collect();
    let n = cx.out_count();
    let ys = cx.node_n(
        "Scan",
        &inputs,
        vec![
            attr_graph("body", body),
            attr_int("num_scan_inputs", xs.len() as i64),
        ],
        n,
    );
    for (i, y) in ys.into_iter().enumerate() {
        cx.set(i, y);
    }
    Ok(())
}

/// `scan(combine_graph, init, xs, additional_inputs)` as a Scan whose
/// state variables are the carry: the combine graph's inputs are (carry,
/// slices of xs, additional inputs) and its outputs (next carry, slices of
/// the stacked outputs), the order ONNX's Scan body has; the additional
/// inputs are read from the enclosing scope. The sequence length may be
/// symbolic.
fn scan(cx: &mut EmitNode) -> Result<()> {
    let Argument::Graph(body_g) = cx.pos(0)? else {
        return Err(Error::bad_input("scan without its combine graph"));
    };
    let init = value_names(cx, cx.pos(1)?)?;
    let xs = value_names(cx, cx.pos(2)?)?;
    let additional = match cx.node.inputs.get(3) {
        Some(a) => value_names(cx, &a.arg)?,
        None => Vec::new(),
    };
    let n = cx.out_count();
    if xs.is_empty()
        || n < init.len()
        || body_g.graph.inputs.len() != init.len() + xs.len() + additional.len()
    {
        return Err(Error::unsupported(format!(
            "scan with {} carried and {} scanned tensors, {} other inputs, {n} outputs and a \
             combine graph of {} inputs (only tensors can be carried, scanned and passed)",
            init.len(),
            xs.len(),
            additional.len(),
            body_g.graph.inputs.len()
        )));
    }
    let node_name = cx.node.name.clone();
    let body = cx.body(
        &body_g.graph,
        Vec::new(),
        &additional,
        &format!("{node_name}.{}", body_g.name),
        |_, _| Ok(Vec::new()),
    )?;
    let mut inputs: Vec<&str> = init.iter().map(String::as_str).collect();
    inputs.extend(xs.iter().map(String::as_str));
    let ys = cx.node_n(
        "Scan",
        &inputs,
        vec![
            attr_graph("body", body),
            attr_int("num_scan_inputs", xs.len() as i64),
        ],
        n,
    );
    for (i, y) in ys.into_iter().enumerate() {
        cx.set(i, y);
    }
    Ok(())
}

/// A wrapper HOP that only scopes a region (grad mode): its subgraph, at
/// argument `graph_at`, is inlined with the arguments after it as inputs.
fn wrapped_region(cx: &mut EmitNode, graph_at: usize) -> Result<()> {
    let Argument::Graph(sub) = cx.pos(graph_at)? else {
        return Err(Error::bad_input(format!(
            "argument {graph_at} should be a graph"
        )));
    };
    let mut inputs = Vec::new();
    for a in &cx.node.inputs[graph_at + 1..] {
        let mut refs = Vec::new();
        a.arg.value_refs(&mut refs);
        for v in refs {
            inputs.push(cx.value_name(v)?);
        }
    }
    let outputs = cx.inline(&sub.graph, &inputs)?;
    for (i, o) in outputs.into_iter().enumerate() {
        cx.set(i, o);
    }
    Ok(())
}

/// This family's rows: op identity -> implementation.
#[rustfmt::skip]
pub(super) const ROWS: &[(&str, Emit)] = &[
    (higher_order::COND, cond),
    (higher_order::WHILE_LOOP, while_loop),
    (higher_order::MAP_IMPL, map_impl),
    (higher_order::SCAN, scan),
    (higher_order::WRAP_WITH_SET_GRAD_ENABLED, |cx| wrapped_region(cx, 1)),
];
