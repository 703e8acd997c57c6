//! Cleanup passes, each a separate unit over a whole program: `dce`,
//! `cse`, `fold` (constant subgraphs, evaluated with the executor) and
//! `bn-fold` (eval-mode batch norm into the convolution before it). Each
//! returns how many nodes it removed or rewrote.

use crate::ir::op::aten;
use std::collections::{HashMap, HashSet};

use super::args::{node_outputs, NodeArgs};
use crate::blob::Blob;
use crate::ir::substitute_values;
use crate::ir::{
    Argument, Dtype, Graph, InputKind, Node, Program, Sym, TargetKind, TensorMeta, Value, ValueId,
    ValueKind, Weight, WeightKind,
};
use crate::schema::mutates;
use crate::{Error, Result};

pub type PassFn = fn(&mut Program) -> Result<usize>;

/// A pass table: (name, what it does, the pass).
pub type Passes = Vec<(&'static str, &'static str, PassFn)>;

/// The passes by name, in the order `ir-decompose` runs them by default;
/// constant folding, which runs the executor, is added above this layer
/// (`exec::fold::passes`).
pub fn all() -> Passes {
    vec![
        (
            "dce",
            "remove nodes whose results are unused, and weights nothing reads",
            dce,
        ),
        (
            "cse",
            "merge nodes that compute the same op on the same arguments",
            cse,
        ),
        (
            "bn-fold",
            "fold eval-mode batch norm into the convolution before it",
            bn_fold,
        ),
        (
            "complex",
            "complex values as real pairs, FFTs as pt2kit.dft (what ir-run and ir2onnx do at load; not run by default)",
            complex_pairs,
        ),
    ]
}

/// Passes `ir-decompose` runs only when asked (`--passes complex`): they
/// leave the core opset (`complex` emits the toolkit's own `pt2kit.dft`).
pub const OPT_IN: &[&str] = &["complex"];

/// The passes of a table (`all`, or `exec::fold::passes` with `fold`)
/// that `ir-decompose` runs by default: all but [`OPT_IN`].
pub fn defaults(table: Passes) -> Passes {
    table
        .into_iter()
        .filter(|(n, _, _)| !OPT_IN.contains(n))
        .collect()
}

/// `complex`: [`super::complex::to_real_pairs`] where the program computes
/// with complex values (its boundary views aside).
pub fn complex_pairs(p: &mut Program) -> Result<usize> {
    if !super::complex::needs_lowering(p) {
        return Ok(0);
    }
    super::complex::to_real_pairs(p, &mut Vec::new())
}

/// Runs named passes (`dce,cse`); the second DCE after the others is
/// implicit, so each pass can leave dead nodes behind.
pub fn run(p: &mut Program, names: &[String]) -> Result<Vec<(String, usize)>> {
    run_from(&all(), p, names)
}

/// [`run`] over a table of passes (`exec::fold::passes`: these and `fold`).
pub fn run_from(known: &Passes, p: &mut Program, names: &[String]) -> Result<Vec<(String, usize)>> {
    let mut report = Vec::new();
    for name in names {
        let Some((_, _, f)) = known.iter().find(|(n, _, _)| n == name) else {
            let list: Vec<&str> = known.iter().map(|(n, _, _)| *n).collect();
            let hint = if name == "fold" {
                " (constant folding needs the executor: this build has no `exec` feature)"
            } else {
                ""
            };
            return Err(Error::usage(format!(
                "unknown pass {name:?}{hint}; passes: {}",
                list.join(", ")
            )));
        };
        let n = f(p).map_err(|e| e.at(format!("pass {name}")))?;
        report.push((name.clone(), n));
    }
    if names.iter().any(|n| n != "dce") && names.iter().any(|n| n == "dce") {
        let n = dce(p)?;
        if let Some(r) = report.iter_mut().find(|(n, _)| n == "dce") {
            r.1 += n;
        }
    }
    Ok(report)
}

/// Ops that must stay even when nothing uses their result.
pub(crate) fn has_effect(node: &Node) -> bool {
    let t = &node.target;
    mutates(t)
        || t.name.starts_with("_assert")
        || t.name.starts_with("sym_constrain_range")
        || t.name == "print"
        || t.name == "_print"
        || t.kind == TargetKind::Extension
}

/// Ops whose results differ between calls with the same arguments.
pub(crate) fn nondeterministic(node: &Node) -> bool {
    matches!(
        node.target.name.as_str(),
        "rand"
            | "randn"
            | "randint"
            | "randperm"
            | "rand_like"
            | "randn_like"
            | "randint_like"
            | "bernoulli"
            | "native_dropout"
            | "dropout"
            | "multinomial"
            | "normal"
            | "uniform"
            | "empty"
            | "empty_like"
            | "empty_strided"
            | "exponential"
            | "poisson"
    )
}

fn graph_refs(g: &Graph, used: &mut HashSet<ValueId>) {
    used.extend(uses(g).into_keys());
}

pub(crate) fn dce_graph(g: &mut Graph) -> usize {
    let mut used = HashSet::new();
    let mut refs = Vec::new();
    for a in &g.outputs {
        a.value_refs(&mut refs);
    }
    used.extend(refs.drain(..));
    let mut keep = vec![false; g.nodes.len()];
    let mut removed = 0;
    for (i, node) in g.nodes.iter_mut().enumerate().rev() {
        for input in &mut node.inputs {
            if let Argument::Graph(sub) = &mut input.arg {
                removed += dce_graph(&mut sub.graph);
            }
        }
        let live = has_effect(node) || node_outputs(node).iter().any(|v| used.contains(v));
        if live {
            keep[i] = true;
            for a in &node.inputs {
                a.arg.value_refs(&mut refs);
            }
            used.extend(refs.drain(..));
        }
    }
    let before = g.nodes.len();
    let mut k = keep.into_iter();
    g.nodes.retain(|_| k.next().unwrap_or(true));
    removed + before - g.nodes.len()
}

/// Dead-code elimination: nodes nobody uses, and weight inputs (parameters,
/// buffers, constants) nothing reads, with their weights and storages.
pub fn dce(p: &mut Program) -> Result<usize> {
    let removed = dce_graph(&mut p.graph);
    let mut used = HashSet::new();
    graph_refs(&p.graph, &mut used);
    let mut keep_input = Vec::new();
    for (i, input) in p.graph.inputs.iter().enumerate() {
        let weight = p.input_kinds[i].weight_name().is_some();
        let read = match input {
            Argument::Tensor(v) => used.contains(v),
            _ => true,
        };
        keep_input.push(!weight || read);
    }
    let mut k = keep_input.iter();
    p.graph.inputs.retain(|_| *k.next().unwrap());
    let mut k = keep_input.iter();
    p.input_kinds.retain(|_| *k.next().unwrap());
    let still: HashSet<&str> = p
        .input_kinds
        .iter()
        .filter_map(|k| k.weight_name())
        .collect();
    let still: HashSet<String> = still.into_iter().map(String::from).collect();
    p.weights.retain(|w| still.contains(&w.name));
    drop_unused_storages(p);
    Ok(removed)
}

fn drop_unused_storages(p: &mut Program) {
    let mut map = HashMap::new();
    let mut storages = Vec::new();
    for w in &mut p.weights {
        let old = w.storage;
        let new = *map.entry(old).or_insert_with(|| {
            storages.push(p.storages[old as usize].clone());
            storages.len() as u32 - 1
        });
        w.storage = new;
    }
    p.storages = storages;
}

/// A node's identity for CSE: its op and arguments, with values resolved.
fn cse_key(node: &Node) -> Option<String> {
    if has_effect(node) || nondeterministic(node) || node.target.kind == TargetKind::HigherOrder {
        return None;
    }
    if node
        .inputs
        .iter()
        .any(|a| matches!(a.arg, Argument::Graph(_)))
    {
        return None;
    }
    let args: Vec<String> = node
        .inputs
        .iter()
        .map(|a| format!("{}={:?}", a.name, a.arg))
        .collect();
    let outs: Vec<&str> = node
        .outputs
        .iter()
        .map(|o| match o {
            Argument::Tensors(_) => "list",
            _ => "one",
        })
        .collect();
    Some(format!("{}({})->{:?}", node.target, args.join(","), outs))
}

fn cse_graph(g: &mut Graph) -> usize {
    let mut seen: HashMap<String, Vec<ValueId>> = HashMap::new();
    let mut subst: HashMap<ValueId, ValueId> = HashMap::new();
    let mut merged = 0;
    let old = std::mem::take(&mut g.nodes);
    for mut node in old {
        let s = |v: ValueId| subst.get(&v).copied().unwrap_or(v);
        node.substitute_inputs(&s);
        for input in &mut node.inputs {
            if let Argument::Graph(sub) = &mut input.arg {
                merged += cse_graph(&mut sub.graph);
            }
        }
        if let Some(key) = cse_key(&node) {
            let outs = node_outputs(&node);
            if let Some(prev) = seen.get(&key) {
                if prev.len() == outs.len() {
                    for (o, p) in outs.iter().zip(prev) {
                        subst.insert(*o, *p);
                    }
                    merged += 1;
                    continue;
                }
            }
            seen.insert(key, outs);
        }
        g.nodes.push(node);
    }
    let s = |v: ValueId| subst.get(&v).copied().unwrap_or(v);
    substitute_values(&mut g.outputs, &s);
    merged
}

/// Common-subexpression elimination: a node that repeats an earlier node's
/// op on the same arguments is replaced by the earlier node's results.
pub fn cse(p: &mut Program) -> Result<usize> {
    Ok(cse_graph(&mut p.graph))
}

/// A weight's values as f64, row-major.
fn weight_f64(p: &Program, w: &Weight) -> Result<Vec<f64>> {
    let bytes = p.weight_bytes(w);
    let t = crate::tensorfile::HostTensor {
        dtype: w.meta.dtype,
        shape: vec![bytes.len() / w.meta.dtype.size().max(1)],
        data: bytes.into_owned(),
    };
    Ok(t.to_f64())
}

fn encode(values: &[f64], dtype: Dtype) -> Option<Vec<u8>> {
    match dtype {
        Dtype::Float32 => Some(
            values
                .iter()
                .flat_map(|v| (*v as f32).to_le_bytes())
                .collect(),
        ),
        Dtype::Float64 => Some(values.iter().flat_map(|v| v.to_le_bytes()).collect()),
        _ => None,
    }
}

/// Adds a weight and the graph input that binds it (after the last
/// parameter input, where torch puts parameters).
pub fn add_weight(
    p: &mut Program,
    name: &str,
    kind: WeightKind,
    meta: TensorMeta,
    bytes: Vec<u8>,
) -> ValueId {
    p.storages.push(Blob::owned(bytes));
    let storage = p.storages.len() as u32 - 1;
    p.weights.push(Weight {
        name: name.to_string(),
        kind,
        meta: meta.clone(),
        storage,
    });
    let mut names = super::edit::Names::of(&p.graph);
    let base = match kind {
        WeightKind::Parameter => "p_",
        WeightKind::Buffer => "b_",
        WeightKind::Constant => "c_",
    };
    let vname = names.fresh(&format!("{base}{}", name.replace('.', "_")));
    p.graph.values.push(Value {
        name: vname,
        kind: ValueKind::Tensor(meta),
    });
    let v = ValueId(p.graph.values.len() as u32 - 1);
    let input_kind = match kind {
        WeightKind::Parameter => InputKind::Parameter(name.to_string()),
        WeightKind::Buffer => InputKind::Buffer(name.to_string()),
        WeightKind::Constant => InputKind::TensorConstant(name.to_string()),
    };
    let at = p
        .input_kinds
        .iter()
        .position(|k| {
            matches!(
                k,
                InputKind::UserInput
                    | InputKind::ConstantInput(_)
                    | InputKind::CustomObj(_)
                    | InputKind::Token
            )
        })
        .unwrap_or(p.input_kinds.len());
    p.graph.inputs.insert(at, Argument::Tensor(v));
    p.input_kinds.insert(at, input_kind);
    v
}

pub(crate) fn unique_weight_name(p: &Program, base: &str) -> String {
    let mut name = base.to_string();
    let mut i = 1;
    while p.weights.iter().any(|w| w.name == name) {
        name = format!("{base}_{i}");
        i += 1;
    }
    name
}

fn weight_of(p: &Program, v: ValueId) -> Option<usize> {
    let pos = p
        .graph
        .inputs
        .iter()
        .position(|a| matches!(a, Argument::Tensor(x) if *x == v))?;
    let name = p.input_kinds[pos].weight_name()?;
    p.weights.iter().position(|w| w.name == name)
}

fn uses(g: &Graph) -> HashMap<ValueId, usize> {
    let mut n = HashMap::new();
    let mut refs = Vec::new();
    for a in &g.outputs {
        a.value_refs(&mut refs);
    }
    for node in &g.nodes {
        for a in &node.inputs {
            a.arg.value_refs(&mut refs);
        }
    }
    for r in refs {
        *n.entry(r).or_insert(0) += 1;
    }
    n
}

/// Folds `_native_batch_norm_legit_no_training(convolution(x, W, b), ...)`
/// into one convolution with `W' = W * g / sqrt(var + eps)` and
/// `b' = (b - mean) * g / sqrt(var + eps) + beta`, when the convolution's
/// result feeds only the batch norm and every statistic is a weight. The
/// new weights are parameters named after the convolution's
/// (`conv1.weight.bn_folded`); the old ones go when nothing else reads them.
pub fn bn_fold(p: &mut Program) -> Result<usize> {
    let mut folded = 0;
    let use_count = uses(&p.graph);
    let producer: HashMap<ValueId, usize> = p
        .graph
        .nodes
        .iter()
        .enumerate()
        .flat_map(|(i, n)| node_outputs(n).into_iter().map(move |v| (v, i)))
        .collect();
    let mut plans = Vec::new();
    for (bi, bn) in p.graph.nodes.iter().enumerate() {
        if bn.target.to_string() != aten::_NATIVE_BATCH_NORM_LEGIT_NO_TRAINING {
            continue;
        }
        let a = NodeArgs(bn);
        let Ok(y) = a.tensor("input") else { continue };
        let outs = node_outputs(bn);
        if outs
            .iter()
            .skip(1)
            .any(|v| use_count.get(v).copied().unwrap_or(0) > 0)
        {
            continue;
        }
        let Some(&ci) = producer.get(&y) else {
            continue;
        };
        let conv = &p.graph.nodes[ci];
        if conv.target.to_string() != aten::CONVOLUTION || use_count.get(&y) != Some(&1) {
            continue;
        }
        let c = NodeArgs(conv);
        if c.bool("transposed").unwrap_or(true) {
            continue;
        }
        let weights: Option<Vec<Option<usize>>> = [
            c.tensor("weight").ok(),
            c.opt_tensor("bias").ok().flatten(),
            a.opt_tensor("weight").ok().flatten(),
            a.opt_tensor("bias").ok().flatten(),
            a.tensor("running_mean").ok(),
            a.tensor("running_var").ok(),
        ]
        .iter()
        .enumerate()
        .map(|(i, v)| match v {
            Some(v) => weight_of(p, *v).map(Some),
            None if i == 1 || i == 2 || i == 3 => Some(None),
            None => None,
        })
        .collect();
        let Some(w) = weights else { continue };
        let Ok(eps) = a.float("eps") else { continue };
        plans.push((ci, bi, w, eps));
    }
    for (ci, bi, w, eps) in plans {
        let conv_w = &p.weights[w[0].unwrap()];
        let dtype = conv_w.meta.dtype;
        if !matches!(dtype, Dtype::Float32 | Dtype::Float64) {
            continue;
        }
        let Some(sizes) = conv_w.meta.static_sizes() else {
            continue;
        };
        let out_ch = sizes[0] as usize;
        let values = |i: usize| -> Result<Option<Vec<f64>>> {
            w[i].map(|k| weight_f64(p, &p.weights[k])).transpose()
        };
        let bias = values(1)?.unwrap_or_else(|| vec![0.0; out_ch]);
        let gamma = values(2)?.unwrap_or_else(|| vec![1.0; out_ch]);
        let beta = values(3)?.unwrap_or_else(|| vec![0.0; out_ch]);
        let mean = values(4)?.unwrap();
        let var = values(5)?.unwrap();
        if [&bias, &gamma, &beta, &mean, &var]
            .iter()
            .any(|v| v.len() != out_ch)
        {
            continue;
        }
        let scale: Vec<f64> = (0..out_ch)
            .map(|o| gamma[o] / (var[o] + eps).sqrt())
            .collect();
        let new_bias: Vec<f64> = (0..out_ch)
            .map(|o| (bias[o] - mean[o]) * scale[o] + beta[o])
            .collect();
        // The kernel is scaled per output channel straight from its bytes
        // (it is most of the model: no intermediate copies).
        let kernel = {
            let bytes = p.weight_bytes(&p.weights[w[0].unwrap()]);
            let elem = dtype.size();
            let per = bytes.len() / elem / out_ch.max(1);
            let mut out = Vec::with_capacity(bytes.len());
            for (i, chunk) in bytes.chunks_exact(elem).enumerate() {
                let s = scale[i / per.max(1)];
                if dtype == Dtype::Float32 {
                    let v = f32::from_le_bytes(chunk.try_into().unwrap()) as f64 * s;
                    out.extend_from_slice(&(v as f32).to_le_bytes());
                } else {
                    let v = f64::from_le_bytes(chunk.try_into().unwrap()) * s;
                    out.extend_from_slice(&v.to_le_bytes());
                }
            }
            out
        };
        let base = p.weights[w[0].unwrap()].name.clone();
        let mut wmeta = p.weights[w[0].unwrap()].meta.clone();
        wmeta.strides = crate::ir::contiguous_strides(&sizes)
            .into_iter()
            .map(Sym::Int)
            .collect();
        wmeta.storage_offset = Sym::Int(0);
        let bmeta = TensorMeta {
            sizes: vec![Sym::Int(out_ch as i64)],
            strides: vec![Sym::Int(1)],
            ..wmeta.clone()
        };
        let wname = unique_weight_name(p, &format!("{base}.bn_folded"));
        let bname = unique_weight_name(
            p,
            &format!("{}.bias.bn_folded", base.trim_end_matches(".weight")),
        );
        let wv = add_weight(p, &wname, WeightKind::Parameter, wmeta, kernel);
        let bv = add_weight(
            p,
            &bname,
            WeightKind::Parameter,
            bmeta,
            encode(&new_bias, dtype).unwrap(),
        );
        // The convolution now writes the batch norm's result.
        let bn_out = node_outputs(&p.graph.nodes[bi])[0];
        let conv = &mut p.graph.nodes[ci];
        for arg in &mut conv.inputs {
            match arg.name.as_str() {
                "weight" => arg.arg = Argument::Tensor(wv),
                "bias" => {
                    arg.arg = Argument::OptionalTensor(Some(bv));
                    arg.defaulted = false;
                }
                _ => {}
            }
        }
        conv.outputs = vec![Argument::Tensor(bn_out)];
        p.graph.nodes[bi].outputs.clear();
        folded += 1;
    }
    if folded > 0 {
        // The emptied batch-norm nodes are removed here; the old weights
        // go with DCE.
        p.graph.nodes.retain(|n| {
            !(n.target.name == "_native_batch_norm_legit_no_training" && n.outputs.is_empty())
        });
        // The convolution's result moved: keep topological order valid by
        // construction (the convolution precedes the batch norm's users).
    }
    Ok(folded)
}
