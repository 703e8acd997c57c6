//! Constant folding (`ir-decompose`'s `fold` pass): the parts of a
//! program that depend only on constants, evaluated once by the executor.
//! It lives with the executor, which it runs, above the decomposition
//! layer whose passes it joins ([`passes`]).

use std::collections::{HashMap, HashSet};

use crate::decompose::passes::{
    add_weight, dce_graph, has_effect, nondeterministic, unique_weight_name, PassFn, Passes,
};
use crate::ir::args::node_outputs;
use crate::ir::{
    substitute_values, Argument, Graph, InputKind, OutputKind, Program, Sym, TargetKind,
    TensorMeta, ValueId, ValueKind, WeightKind,
};
use crate::{Error, Result};

/// The decomposition's passes and `fold`, in the order `ir-decompose` runs
/// them by default.
pub fn passes() -> Passes {
    let mut v = crate::decompose::passes::all();
    v.insert(
        1,
        (
            "fold",
            "evaluate subgraphs that depend only on constants",
            fold as PassFn,
        ),
    );
    v
}

/// Runs named passes of [`passes`] (`decompose::passes::run` with `fold`).
pub fn run(p: &mut Program, names: &[String]) -> Result<Vec<(String, usize)>> {
    crate::decompose::passes::run_from(&passes(), p, names)
}

/// Constant folding: nodes whose tensor inputs are all lifted constants
/// (or results of such nodes), with no symbolic sizes, are evaluated once
/// with the executor; the values other nodes read become new constants.
/// A result is not materialised when it is over 1 MiB and larger than the
/// constants it comes from (an `expand` of a scalar stays an `expand`).
pub fn fold(p: &mut Program) -> Result<usize> {
    let g = &p.graph;
    let mut constant: HashSet<ValueId> = HashSet::new();
    let mut const_inputs = Vec::new();
    for (i, input) in g.inputs.iter().enumerate() {
        if let (InputKind::TensorConstant(_), Argument::Tensor(v)) = (&p.input_kinds[i], input) {
            constant.insert(*v);
            const_inputs.push(i);
        }
    }
    let mut fold_nodes = Vec::new();
    for (i, node) in g.nodes.iter().enumerate() {
        if has_effect(node)
            || nondeterministic(node)
            || node.target.kind != TargetKind::Op
            || super::ops::lookup(&node.target.to_string()).is_none()
        {
            continue;
        }
        let mut refs = Vec::new();
        for a in &node.inputs {
            a.arg.value_refs(&mut refs);
        }
        let outs = node_outputs(node);
        let static_out = outs.iter().all(|v| match &g.values[v.index()].kind {
            ValueKind::Tensor(m) => m.static_sizes().is_some(),
            _ => false,
        });
        if static_out && refs.iter().all(|r| constant.contains(r)) && !outs.is_empty() {
            constant.extend(outs);
            fold_nodes.push(i);
        }
    }
    // Values of folded nodes read by nodes that stay (or by the outputs).
    let folded_set: HashSet<usize> = fold_nodes.iter().copied().collect();
    let mut frontier: Vec<ValueId> = Vec::new();
    let produced: HashSet<ValueId> = fold_nodes
        .iter()
        .flat_map(|&i| node_outputs(&g.nodes[i]))
        .collect();
    let mut refs = Vec::new();
    for (i, node) in g.nodes.iter().enumerate() {
        if folded_set.contains(&i) {
            continue;
        }
        for a in &node.inputs {
            a.arg.value_refs(&mut refs);
        }
    }
    for a in &g.outputs {
        a.value_refs(&mut refs);
    }
    for r in refs {
        if produced.contains(&r) && !frontier.contains(&r) {
            frontier.push(r);
        }
    }
    let bytes_of = |v: ValueId| -> usize {
        match &g.values[v.index()].kind {
            ValueKind::Tensor(m) => {
                m.static_sizes()
                    .map(|s| s.iter().product::<i64>().max(0) as usize)
                    .unwrap_or(0)
                    * m.dtype.size()
            }
            _ => 0,
        }
    };
    let input_bytes: usize = const_inputs
        .iter()
        .filter_map(|&i| match &g.inputs[i] {
            Argument::Tensor(v) => Some(bytes_of(*v)),
            _ => None,
        })
        .sum();
    frontier.retain(|v| {
        let b = bytes_of(*v);
        b <= (1 << 20) || b <= input_bytes
    });
    if frontier.is_empty() {
        return Ok(0);
    }
    // A program of just the constant part, run once.
    let mut mini = Program {
        info: p.info.clone(),
        graph: Graph {
            values: g.values.clone(),
            inputs: const_inputs.iter().map(|&i| g.inputs[i].clone()).collect(),
            nodes: fold_nodes.iter().map(|&i| g.nodes[i].clone()).collect(),
            outputs: frontier.iter().map(|v| Argument::Tensor(*v)).collect(),
            is_single_tensor_return: false,
        },
        input_kinds: const_inputs
            .iter()
            .map(|&i| p.input_kinds[i].clone())
            .collect(),
        output_kinds: vec![OutputKind::UserOutput; frontier.len()],
        range_constraints: vec![],
        weights: p.weights.clone(),
        storages: p.storages.clone(),
    };
    mini.graph.nodes.retain(|_| true);
    let device = super::device(super::DeviceKind::Cpu)?;
    let results = {
        let opts = super::ExecOptions {
            as_given: true,
            ..Default::default()
        };
        let exec = super::Executor::with_options(&mini, device, opts)?;
        exec.run(&[])?
    };
    let mut replaced = HashMap::new();
    for (v, (_, host)) in frontier.iter().zip(results) {
        let meta = match &p.graph.values[v.index()].kind {
            ValueKind::Tensor(m) => TensorMeta {
                strides: crate::ir::contiguous_strides(&m.static_sizes().unwrap_or_default())
                    .into_iter()
                    .map(Sym::Int)
                    .collect(),
                storage_offset: Sym::Int(0),
                ..m.clone()
            },
            _ => continue,
        };
        if host.dtype != meta.dtype {
            return Err(Error::internal(format!(
                "folded {} is {}, expected {}",
                p.graph.values[v.index()].name,
                host.dtype.torch_name(),
                meta.dtype.torch_name()
            )));
        }
        let name = unique_weight_name(p, &format!("_folded.{}", p.graph.values[v.index()].name));
        let nv = add_weight(p, &name, WeightKind::Constant, meta, host.data);
        replaced.insert(*v, nv);
    }
    let s = |v: ValueId| replaced.get(&v).copied().unwrap_or(v);
    for node in &mut p.graph.nodes {
        node.substitute_inputs(&s);
    }
    substitute_values(&mut p.graph.outputs, &s);
    let n = dce_graph(&mut p.graph);
    Ok(n)
}
