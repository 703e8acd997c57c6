//! Which outputs the executor leaves channels-last: a value of `[b, c, h,
//! w]` stored `[b][h][w][c]` (a permuted view, `ops::channels_last_dims`),
//! which the ops after it read as it lies (a blocked depthwise
//! convolution's grid, a plane mean, a per-channel scale, a pointwise
//! convolution's pixel rows, a max pool) and any other op reads through a
//! copy into planes. A depthwise convolution on the blocked kernel leaves
//! its output so where no fused chain over planes follows it; a pointwise
//! one on the pixel rows, or a stem from few channels, where every reader
//! is such a depthwise convolution or a max pool (found once, at load,
//! here). A fused int8 convolution (`exec/int8.rs`) leaves its quantized
//! output so where every reader is another, as its input or its residual.

use super::fuse;
use crate::ir::{Argument, Graph, Node, SymRef, ValueId, ValueKind};

/// Per node of `graph`, whether it is a convolution every reader of whose
/// output (its fused chain's, where one runs as its epilogue) is a
/// depthwise convolution that takes the blocked kernel
/// ([`super::ops::takes_blocked`]), which reads an input left channels-last as
/// it lies (its sixteen channels a pixel side by side) where an input in
/// planes is transposed first, or a 2-D max pool (a stem's: each window's
/// pixels' channels side by side). An output of the graph is read as
/// planes.
pub(super) fn channels_last_readers(graph: &Graph, fusion: &fuse::Plan) -> Vec<bool> {
    let mut readers: Vec<Vec<usize>> = vec![Vec::new(); graph.values.len()];
    let mut refs = Vec::new();
    for (j, node) in graph.nodes.iter().enumerate() {
        refs.clear();
        for a in &node.inputs {
            a.arg.value_refs(&mut refs);
        }
        for v in &refs {
            readers[v.index()].push(j);
        }
    }
    let mut outputs = Vec::new();
    for o in &graph.outputs {
        o.value_refs(&mut outputs);
    }
    let conv = |n: &Node| n.target.name == "convolution" || n.target.name == "conv2d";
    let int8_conv = |n: &Node| n.target.namespace == "pt2kit" && n.target.name == "int8_conv2d";
    // (a plain int, or one the lowering made a constant symbolic one)
    let groups = |n: &Node| match n.arg("groups") {
        Some(Argument::Int(g)) | Some(Argument::SymInt(SymRef::Int(g))) => Some(*g),
        _ => None,
    };
    let sizes = |v: ValueId| match &graph.value(v).kind {
        ValueKind::Tensor(meta) => meta.static_sizes(),
        _ => None,
    };
    // a pair of constant ints (`default` where absent)
    let pair = |n: &Node, name: &str, default: usize| -> Option<(usize, usize)> {
        let v: Vec<i64> = match n.arg(name) {
            None | Some(Argument::None) => vec![default as i64; 2],
            Some(Argument::Ints(v)) => v.clone(),
            Some(Argument::SymInts(v)) => v
                .iter()
                .map(|s| match s {
                    SymRef::Int(i) => Some(*i),
                    _ => None,
                })
                .collect::<Option<_>>()?,
            _ => return None,
        };
        match v[..] {
            [a] => Some((a as usize, a as usize)),
            [a, b] => Some((a as usize, b as usize)),
            _ => None,
        }
    };
    let depthwise_reader = |n: &Node, v: ValueId| {
        let (Some(Argument::Tensor(x)), Some(Argument::Tensor(w))) =
            (n.arg("input"), n.arg("weight"))
        else {
            return false;
        };
        let (Some(xs), Some(ws)) = (sizes(*x), sizes(*w)) else {
            return false;
        };
        let geometry = (
            pair(n, "stride", 1),
            pair(n, "padding", 0),
            pair(n, "dilation", 1),
        );
        let (Some(stride), Some(pad), Some(dil)) = geometry else {
            return false;
        };
        conv(n)
            && *x == v
            && !matches!(n.arg("transposed"), Some(Argument::Bool(true)))
            && xs.len() == 4
            && ws.len() == 4
            && ws[1] == 1
            && groups(n) == Some(xs[1])
            && ws[0] == xs[1]
            && super::ops::takes_blocked(
                xs[1] as usize,
                (xs[2] as usize, xs[3] as usize),
                (ws[2] as usize, ws[3] as usize),
                stride,
                pad,
                dil,
            )
    };
    // a 2-D max pool of the value whose indices no one reads (those take
    // the host's path), which reads a channels-last input where it lies
    let pool_reader = |n: &Node, v: ValueId| {
        let unread = |a: &Argument| match a {
            Argument::Tensor(i) => readers[i.index()].is_empty() && !outputs.contains(i),
            _ => true,
        };
        matches!(
            n.target.name.as_str(),
            "max_pool2d" | "max_pool2d_with_indices"
        ) && matches!(n.arg("self"), Some(Argument::Tensor(x)) if *x == v)
            && sizes(v).is_some_and(|s| s.len() == 4)
            && pair(n, "dilation", 1) == Some((1, 1))
            && n.outputs.iter().skip(1).all(unread)
    };
    graph
        .nodes
        .iter()
        .enumerate()
        .map(|(i, node)| {
            let out = match fusion.roles.get(i) {
                Some(fuse::Role::Producer(g))
                    if fusion.bridges.get(*g).is_none_or(|b| b.is_empty()) =>
                {
                    Some(fusion.groups[*g].output)
                }
                Some(fuse::Role::Producer(_)) => None,
                _ => match node.outputs.first() {
                    Some(Argument::Tensor(v)) => Some(*v),
                    _ => None,
                },
            };
            out.is_some_and(|v| {
                let rs = &readers[v.index()];
                if int8_conv(node) {
                    // a quantized activation between two int8 convolutions
                    // (or a residual of the second's): read there by whole
                    // pixels
                    return !outputs.contains(&v)
                        && !rs.is_empty()
                        && rs.iter().all(|&j| {
                            let n = &graph.nodes[j];
                            int8_conv(n)
                                && n.inputs.iter().all(|a| match &a.arg {
                                    Argument::Tensor(x) if *x == v => {
                                        a.name == "input" || a.name == "other"
                                    }
                                    _ => true,
                                })
                        });
                }
                conv(node)
                    && !outputs.contains(&v)
                    && !rs.is_empty()
                    && rs.iter().all(|&j| {
                        let n = &graph.nodes[j];
                        depthwise_reader(n, v) || pool_reader(n, v)
                    })
            })
        })
        .collect()
}
