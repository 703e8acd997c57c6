//! Checks a program once, on load, so later code may index without error
//! handling: every value id is in its graph's arena, every value is defined
//! before it is used (graph inputs, then node outputs in order), the
//! signature lines up with the graph, and every weight fits its storage.

use crate::error::{Error, Result};
use crate::ir::{Argument, Graph, Program, ValueId};

pub fn validate(program: &Program) -> Result<()> {
    if program.input_kinds.len() != program.graph.inputs.len() {
        return Err(Error::bad_input(format!(
            "{} input kinds for {} graph inputs",
            program.input_kinds.len(),
            program.graph.inputs.len()
        )));
    }
    if program.output_kinds.len() != program.graph.outputs.len() {
        return Err(Error::bad_input(format!(
            "{} output kinds for {} graph outputs",
            program.output_kinds.len(),
            program.graph.outputs.len()
        )));
    }
    validate_graph(&program.graph).map_err(|e| e.at("graph"))?;
    for w in &program.weights {
        let storage = program.storages.get(w.storage as usize).ok_or_else(|| {
            Error::bad_input(format!(
                "weight '{}' refers to storage {}, but there are {}",
                w.name,
                w.storage,
                program.storages.len()
            ))
        })?;
        check_view(&w.meta, storage.len())
            .map_err(|m| Error::bad_input(format!("weight '{}': {m}", w.name)))?;
    }
    // A weight is what the graph input it fills says it is: the same
    // dtype (so its bytes are that dtype's) and sizes.
    for (pos, input) in program.graph.inputs.iter().enumerate() {
        let (Some(w), Argument::Tensor(v)) = (program.weight_for_input(pos), input) else {
            continue;
        };
        let Some(crate::ir::ValueKind::Tensor(m)) =
            program.graph.values.get(v.index()).map(|x| &x.kind)
        else {
            continue;
        };
        let agree = m.dtype == w.meta.dtype
            && m.sizes.len() == w.meta.sizes.len()
            && m.sizes
                .iter()
                .zip(&w.meta.sizes)
                .all(|(a, b)| a.as_int().is_none() || a == b);
        if !agree {
            let show = |sizes: &[crate::ir::Sym]| {
                let v: Vec<String> = sizes
                    .iter()
                    .map(|s| s.as_int().map_or("?".to_string(), |n| n.to_string()))
                    .collect();
                format!("[{}]", v.join(", "))
            };
            return Err(Error::bad_input(format!(
                "weight '{}': graph input {pos} declares it {} {}, but its payload is {} {} ({} bytes)",
                w.name,
                m.dtype.torch_name(),
                show(&m.sizes),
                w.meta.dtype.torch_name(),
                show(&w.meta.sizes),
                w.nbytes()
            )));
        }
    }
    Ok(())
}

/// Subgraphs (`cond` branches, loop bodies, `map`) nested deeper than
/// this are refused: every pass walks them recursively. The parsers stop
/// well before their own recursion could: serde_json at 128 levels of
/// JSON, protobuf at 100 levels of messages.
pub const MAX_GRAPH_DEPTH: usize = 32;

/// Nodes in a program, subgraphs included (large language models export
/// to some 10^4).
pub const MAX_NODES: usize = 1 << 24;

pub fn validate_graph(graph: &Graph) -> Result<()> {
    // Depth and size first, with a stack of our own (no recursion), so
    // that what recurses below is known to be shallow.
    let (mut stack, mut nodes) = (vec![(graph, 0usize)], 0usize);
    while let Some((g, depth)) = stack.pop() {
        if depth > MAX_GRAPH_DEPTH {
            return Err(Error::bad_input(format!(
                "subgraphs nested {depth} deep: at most {MAX_GRAPH_DEPTH} levels are accepted"
            )));
        }
        nodes += g.nodes.len();
        if nodes > MAX_NODES {
            return Err(Error::bad_input(format!(
                "more than {MAX_NODES} nodes: the limit on a program's size"
            )));
        }
        for a in g.nodes.iter().flat_map(|n| &n.inputs) {
            if let Argument::Graph(sub) = &a.arg {
                stack.push((&sub.graph, depth + 1));
            }
        }
    }
    validate_at(graph)
}

fn validate_at(graph: &Graph) -> Result<()> {
    let n = graph.values.len();
    let mut defined = vec![false; n];
    let mut refs = Vec::new();
    let check = |refs: &[ValueId], defined: &[bool], what: &dyn Fn() -> String| -> Result<()> {
        for v in refs {
            if v.index() >= n {
                return Err(Error::bad_input(format!(
                    "{}: value id {} is out of range ({} values)",
                    what(),
                    v.0,
                    n
                )));
            }
            if !defined[v.index()] {
                return Err(Error::bad_input(format!(
                    "{}: uses value '{}' before it is defined",
                    what(),
                    graph.values[v.index()].name
                )));
            }
        }
        Ok(())
    };
    for (i, input) in graph.inputs.iter().enumerate() {
        refs.clear();
        input.value_refs(&mut refs);
        for v in &refs {
            if v.index() >= n {
                return Err(Error::bad_input(format!(
                    "graph input {i}: value id out of range"
                )));
            }
            defined[v.index()] = true;
        }
    }
    for node in &graph.nodes {
        for a in &node.inputs {
            refs.clear();
            a.arg.value_refs(&mut refs);
            check(&refs, &defined, &|| {
                format!("node '{}' input '{}'", node.name, a.name)
            })?;
            if let Argument::Graph(sub) = &a.arg {
                validate_at(&sub.graph)
                    .map_err(|e| e.at(format!("node '{}' subgraph '{}'", node.name, sub.name)))?;
            }
        }
        for out in &node.outputs {
            refs.clear();
            out.value_refs(&mut refs);
            for v in &refs {
                if v.index() >= n {
                    return Err(Error::bad_input(format!(
                        "node '{}': output value id out of range",
                        node.name
                    )));
                }
                defined[v.index()] = true;
            }
        }
    }
    for (i, out) in graph.outputs.iter().enumerate() {
        refs.clear();
        out.value_refs(&mut refs);
        check(&refs, &defined, &|| format!("graph output {i}"))?;
    }
    Ok(())
}

/// Checks that a strided view fits in its storage.
pub fn check_view(
    meta: &crate::ir::TensorMeta,
    storage_bytes: usize,
) -> std::result::Result<(), String> {
    let sizes = meta.static_sizes().ok_or("symbolic sizes in a weight")?;
    let strides = meta
        .static_strides()
        .ok_or("symbolic strides in a weight")?;
    let offset = meta
        .storage_offset
        .as_int()
        .ok_or("symbolic storage offset")?;
    if sizes.len() != strides.len() {
        return Err(format!(
            "{} sizes but {} strides",
            sizes.len(),
            strides.len()
        ));
    }
    if sizes.iter().any(|&s| s < 0) || strides.iter().any(|&s| s < 0) || offset < 0 {
        return Err("negative size, stride or offset".into());
    }
    // Every size, stride and offset product in int64, checked: a view
    // whose arithmetic wraps is refused as torch refuses it.
    let overflow = || {
        format!(
            "Storage size calculation overflowed with sizes={sizes:?} and strides={strides:?} (offset {offset}, {})",
            meta.dtype
        )
    };
    let elem = meta.dtype.size() as i64;
    sizes
        .iter()
        .try_fold(1i64, |n, &s| n.checked_mul(s))
        .and_then(|n| n.checked_mul(elem))
        .ok_or_else(overflow)?;
    if sizes.contains(&0) {
        return Ok(());
    }
    let last = sizes
        .iter()
        .zip(&strides)
        .try_fold(offset, |at, (s, st)| {
            (s - 1).checked_mul(*st).and_then(|d| at.checked_add(d))
        })
        .ok_or_else(overflow)?;
    let needed = last
        .checked_add(1)
        .and_then(|n| n.checked_mul(elem))
        .ok_or_else(overflow)?;
    if needed as u128 > storage_bytes as u128 {
        return Err(format!(
            "shape {:?} with strides {:?} and offset {offset} needs {needed} bytes, the payload has {storage_bytes}",
            sizes, strides
        ));
    }
    Ok(())
}
