//! PT2E int8 graphs on the int8 kernels ([`crate::kernels::int8`]).
//!
//! torchao's `convert_pt2e` leaves float ops between quantize and
//! dequantize nodes: a quantized convolution is `dequantize_per_tensor(x_q)
//! -> conv2d(., dequantize_per_channel(w_q), bias) -> [add of another
//! dequantized value] -> [relu] -> [quantize_per_tensor]`, and run as
//! written it computes in float32 on dequantized copies. At load, before
//! the program is lowered ([`super::lowering`]), each such chain of the
//! top-level graph becomes one node, `pt2kit.int8_conv2d` or
//! `pt2kit.int8_linear` (`exec/ops/int8.rs`), which sums `x_q` times
//! `w_q` in integers (AVX512-VNNI, or AVX2) and applies the scales, the bias, the
//! residual, the ReLU and the quantization per output element, as torch's
//! reference graph does in float32 on the sums. What it matches:
//!
//! - the product: `conv2d` or `convolution` (2-D, one group, not
//!   transposed), `linear`, or `addmm` / `mm` of a transposed weight (a
//!   linear layer as torch decomposes it), its input dequantized per tensor from uint8
//!   or int8 (numbers as scale and zero point: static quantization), its
//!   weight an int8 weight of the program dequantized per output channel
//!   (axis 0) or per tensor with zero points 0 (symmetric, as both
//!   torchao quantizers make them), its bias none or a float32 vector;
//! - after it, each at most once and in this order, where the value so
//!   far has no other reader and is no output: `add` (or `add_`) of a
//!   value dequantized per tensor of the output's shape, `relu` (or
//!   `relu_`), `quantize_per_tensor` to uint8 or int8.
//!
//! A `max_pool2d` between a `dequantize_per_tensor` and a
//! `quantize_per_tensor` of one quantization becomes
//! `pt2kit.int8_max_pool2d` ([`pool_at`]), the pool of the quantized
//! values.
//!
//! Where the CPU has no int8 kernel (neither), or `PT2KIT_INT8_REFERENCE=1`, the
//! graph runs as written. The sums are exact where torch's float32 sums
//! round, so a value that lies within float32 rounding of a quantization
//! tie may land one step from torch's (docs/coverage.md, "PT2E int8").

use std::collections::{HashMap, HashSet};

use super::Executor;
use crate::ir::op::{aten, quantized_decomposed as qd};
use crate::ir::{
    Argument, Dtype, Graph, Node, Program, SymRef, Target, TargetKind, TensorMeta, ValueId,
    ValueKind,
};

/// The fused convolution's op identity.
pub const CONV2D: &str = "pt2kit.int8_conv2d.default";
/// The fused linear layer's op identity.
pub const LINEAR: &str = "pt2kit.int8_linear.default";
/// The max pool of quantized values' op identity.
pub const MAX_POOL2D: &str = "pt2kit.int8_max_pool2d.default";

/// Where each value of the top-level graph is defined and read.
struct Facts {
    /// The node that defines each value.
    def: Vec<Option<usize>>,
    /// How many reads each value has (node arguments and graph outputs).
    uses: Vec<usize>,
    /// The last node that reads each value (its only one where `uses` is 1).
    reader: Vec<Option<usize>>,
    /// The graph outputs.
    outputs: HashSet<ValueId>,
    /// The graph input position of each input value.
    input_pos: HashMap<ValueId, usize>,
}

impl Facts {
    fn of(g: &Graph) -> Facts {
        let n = g.values.len();
        let (mut def, mut uses, mut reader) = (vec![None; n], vec![0; n], vec![None; n]);
        let mut refs = Vec::new();
        for (i, node) in g.nodes.iter().enumerate() {
            refs.clear();
            node.inputs.iter().for_each(|a| a.arg.value_refs(&mut refs));
            for v in &refs {
                uses[v.index()] += 1;
                reader[v.index()] = Some(i);
            }
            for o in crate::ir::defined_tensors(node) {
                def[o.index()] = Some(i);
            }
        }
        refs.clear();
        g.outputs.iter().for_each(|a| a.value_refs(&mut refs));
        for v in &refs {
            uses[v.index()] += 1;
        }
        let input_pos = g
            .inputs
            .iter()
            .enumerate()
            .filter_map(|(i, a)| match a {
                Argument::Tensor(v) => Some((*v, i)),
                _ => None,
            })
            .collect();
        Facts {
            def,
            uses,
            reader,
            outputs: refs.into_iter().collect(),
            input_pos,
        }
    }
}

fn int_of(a: Option<&Argument>) -> Option<i64> {
    match a? {
        Argument::Int(v) | Argument::SymInt(SymRef::Int(v)) => Some(*v),
        _ => None,
    }
}

fn float_of(a: Option<&Argument>) -> Option<f64> {
    match a? {
        Argument::Float(v) | Argument::SymFloat(SymRef::Float(v)) => Some(*v),
        Argument::Int(v) | Argument::SymInt(SymRef::Int(v)) => Some(*v as f64),
        _ => None,
    }
}

fn ints_of(a: Option<&Argument>) -> Option<Vec<i64>> {
    match a? {
        Argument::Ints(v) => Some(v.clone()),
        Argument::SymInts(v) => v
            .iter()
            .map(|r| match r {
                SymRef::Int(i) => Some(*i),
                _ => None,
            })
            .collect(),
        _ => None,
    }
}

fn tensor_of(a: Option<&Argument>) -> Option<ValueId> {
    match a? {
        Argument::Tensor(v) | Argument::OptionalTensor(Some(v)) => Some(*v),
        _ => None,
    }
}

fn meta(g: &Graph, v: ValueId) -> Option<&TensorMeta> {
    match &g.values[v.index()].kind {
        ValueKind::Tensor(m) => Some(m),
        _ => None,
    }
}

/// The static sizes of a tensor value of dtype `d`.
fn sizes(g: &Graph, v: ValueId, d: Dtype) -> Option<Vec<i64>> {
    meta(g, v).filter(|m| m.dtype == d)?.static_sizes()
}

fn op_of(n: &Node) -> String {
    n.target.to_string()
}

/// A value dequantized per tensor from uint8 or int8 by numbers (static).
#[derive(Clone, Copy)]
struct Act {
    q: ValueId,
    scale: f64,
    zp: i64,
}

fn activation(g: &Graph, f: &Facts, v: ValueId) -> Option<Act> {
    let n = &g.nodes[f.def[v.index()]?];
    if op_of(n) != qd::DEQUANTIZE_PER_TENSOR {
        return None;
    }
    let q = tensor_of(n.arg("input"))?;
    let dtype = match n.arg("dtype")? {
        Argument::ScalarType(d @ (Dtype::Uint8 | Dtype::Int8)) => *d,
        _ => return None,
    };
    let float_out = matches!(
        n.arg("out_dtype"),
        None | Some(Argument::None) | Some(Argument::ScalarType(Dtype::Float32))
    );
    (float_out && meta(g, q)?.dtype == dtype).then_some(())?;
    Some(Act {
        q,
        scale: float_of(n.arg("scale"))?,
        zp: int_of(n.arg("zero_point"))?,
    })
}

/// An int8 weight of the program dequantized symmetrically.
struct Weight {
    q: ValueId,
    /// Per output channel (a float32 vector), or one scale.
    scales: Option<ValueId>,
    scale: f64,
}

/// Whether every element of a weight input (int64 or int32) is zero.
fn all_zero(p: &Program, f: &Facts, v: ValueId) -> bool {
    let Some(w) = f.input_pos.get(&v).and_then(|&i| p.weight_for_input(i)) else {
        return false;
    };
    matches!(w.meta.dtype, Dtype::Int64 | Dtype::Int32) && p.weight_bytes(w).iter().all(|b| *b == 0)
}

fn weight(p: &Program, f: &Facts, v: ValueId) -> Option<Weight> {
    let g = &p.graph;
    let n = &g.nodes[f.def[v.index()]?];
    let q = tensor_of(n.arg("input"))?;
    let is_weight = f
        .input_pos
        .get(&q)
        .is_some_and(|&i| p.weight_for_input(i).is_some());
    let int8 = matches!(n.arg("dtype"), Some(Argument::ScalarType(Dtype::Int8)));
    let float_out = matches!(
        n.arg("out_dtype"),
        None | Some(Argument::None) | Some(Argument::ScalarType(Dtype::Float32))
    );
    if !(is_weight && int8 && float_out && meta(g, q)?.dtype == Dtype::Int8) {
        return None;
    }
    let op = op_of(n);
    if op == qd::DEQUANTIZE_PER_CHANNEL {
        let scales = tensor_of(n.arg("scales"))?;
        let co = *sizes(g, q, Dtype::Int8)?.first()?;
        let zps_zero = match n.arg("zero_points") {
            None | Some(Argument::None) | Some(Argument::OptionalTensor(None)) => true,
            a => all_zero(p, f, tensor_of(a)?),
        };
        let ok =
            int_of(n.arg("axis"))? == 0 && zps_zero && sizes(g, scales, Dtype::Float32)? == [co];
        return ok.then_some(Weight {
            q,
            scales: Some(scales),
            scale: 1.0,
        });
    }
    if op == qd::DEQUANTIZE_PER_TENSOR && int_of(n.arg("zero_point"))? == 0 {
        return Some(Weight {
            q,
            scales: None,
            scale: float_of(n.arg("scale"))?,
        });
    }
    None
}

/// A chain matched at a product: the nodes it replaces, where the new
/// node goes (the last of them), and the new node.
struct Fused {
    removed: Vec<usize>,
    at: usize,
    node: Node,
}

fn named(name: &str, arg: Argument) -> (&str, Argument) {
    (name, arg)
}

/// The chain whose product is node `i`, if it is one ([`Fused`]).
fn match_at(p: &Program, f: &Facts, i: usize) -> Option<Fused> {
    let g = &p.graph;
    let node = &g.nodes[i];
    let op = op_of(node);
    let one = |name: &str| {
        matches!(node.arg(name), None | Some(Argument::Int(1)))
            || float_of(node.arg(name)) == Some(1.0)
    };
    // (whether a convolution, its input, its weight, its bias)
    let (conv, x, w, bias_arg) = match op.as_str() {
        aten::CONV2D | aten::LINEAR => (
            op == aten::CONV2D,
            tensor_of(node.arg("input"))?,
            tensor_of(node.arg("weight"))?,
            node.arg("bias"),
        ),
        aten::CONVOLUTION => {
            let plain = matches!(node.arg("transposed"), Some(Argument::Bool(false)));
            plain.then_some(())?;
            let (x, w) = (
                tensor_of(node.arg("input"))?,
                tensor_of(node.arg("weight"))?,
            );
            (true, x, w, node.arg("bias"))
        }
        // a linear layer as torch decomposes it: the weight transposed
        aten::ADDMM | aten::MM if one("alpha") && one("beta") => {
            let t = &g.nodes[f.def[tensor_of(node.arg("mat2"))?.index()]?];
            let transposed = match op_of(t).as_str() {
                aten::T => true,
                aten::PERMUTE => ints_of(t.arg("dims")).as_deref() == Some(&[1i64, 0][..]),
                _ => false,
            };
            transposed.then_some(())?;
            let bias = if op == aten::ADDMM {
                node.arg("self")
            } else {
                None
            };
            (
                false,
                tensor_of(node.arg("mat1"))?,
                tensor_of(t.arg("self"))?,
                bias,
            )
        }
        _ => return None,
    };
    let [Argument::Tensor(out)] = node.outputs.as_slice() else {
        return None;
    };
    let act = activation(g, f, x)?;
    let wt = weight(p, f, w)?;
    let xs = sizes(g, x, Dtype::Float32)?;
    let ws = sizes(g, wt.q, Dtype::Int8)?;
    let out_sizes = sizes(g, *out, Dtype::Float32)?;
    let k: i64 = ws[1..].iter().product();
    let empty = [&xs, &ws, &out_sizes].iter().any(|s| s.contains(&0));
    if empty || k as usize > crate::kernels::int8::MAX_K {
        return None;
    }
    let bias = match bias_arg {
        None | Some(Argument::None) | Some(Argument::OptionalTensor(None)) => None,
        a => {
            let b = tensor_of(a)?;
            (sizes(g, b, Dtype::Float32)? == [ws[0]]).then_some(b)?;
            Some(b)
        }
    };
    let mut args = vec![
        named("input", Argument::Tensor(act.q)),
        named("input_scale", Argument::Float(act.scale)),
        named("input_zero_point", Argument::Int(act.zp)),
        named("weight", Argument::Tensor(wt.q)),
        named("weight_scales", Argument::OptionalTensor(wt.scales)),
        named("weight_scale", Argument::Float(wt.scale)),
        named("bias", Argument::OptionalTensor(bias)),
    ];
    if conv {
        let groups = int_of(node.arg("groups")).unwrap_or(1);
        let two = |name: &str, default: i64| -> Option<Vec<i64>> {
            let v = match node.arg(name) {
                None => vec![default],
                a => ints_of(a)?,
            };
            match v.as_slice() {
                [a] => Some(vec![*a, *a]),
                [a, b] => Some(vec![*a, *b]),
                _ => None,
            }
        };
        let ok = groups == 1 && xs.len() == 4 && ws.len() == 4 && ws[1] == xs[1];
        ok.then_some(())?;
        args.push(named("stride", Argument::Ints(two("stride", 1)?)));
        args.push(named("padding", Argument::Ints(two("padding", 0)?)));
        args.push(named("dilation", Argument::Ints(two("dilation", 1)?)));
    } else if ws.len() != 2 || xs.last() != Some(&ws[1]) {
        return None;
    }
    // the chain after the product
    let (mut removed, mut cur, mut at) = (vec![i], *out, i);
    let (mut other, mut relu, mut quant) = (None, false, None);
    loop {
        if f.uses[cur.index()] != 1 || f.outputs.contains(&cur) {
            break;
        }
        let Some(r) = f.reader[cur.index()] else {
            break;
        };
        let rn = &g.nodes[r];
        let [Argument::Tensor(rout)] = rn.outputs.as_slice() else {
            break;
        };
        let rop = op_of(rn);
        let step = match rop.as_str() {
            aten::ADD_TENSOR | aten::ADD__TENSOR if other.is_none() && !relu => {
                let alpha_one = matches!(
                    rn.arg("alpha"),
                    None | Some(Argument::None) | Some(Argument::Int(1))
                ) || float_of(rn.arg("alpha")) == Some(1.0);
                let (a, b) = (tensor_of(rn.arg("self")), tensor_of(rn.arg("other")));
                let o = match (a, b) {
                    (Some(a), Some(b)) if a == cur && b != cur => b,
                    (Some(a), Some(b)) if b == cur && a != cur && rop == aten::ADD_TENSOR => a,
                    _ => break,
                };
                let same = sizes(g, o, Dtype::Float32).as_ref() == Some(&out_sizes)
                    && sizes(g, *rout, Dtype::Float32).as_ref() == Some(&out_sizes);
                match (alpha_one && same, activation(g, f, o)) {
                    (true, Some(oa)) => {
                        other = Some(oa);
                        true
                    }
                    _ => false,
                }
            }
            aten::RELU | aten::RELU_ if !relu => {
                relu = true;
                true
            }
            qd::QUANTIZE_PER_TENSOR => {
                let dtype = match rn.arg("dtype") {
                    Some(Argument::ScalarType(d @ (Dtype::Uint8 | Dtype::Int8))) => *d,
                    _ => break,
                };
                let q = (
                    float_of(rn.arg("scale")),
                    int_of(rn.arg("zero_point")),
                    int_of(rn.arg("quant_min")),
                    int_of(rn.arg("quant_max")),
                );
                let (Some(s), Some(z), Some(lo), Some(hi)) = q else {
                    break;
                };
                quant = Some((s, z, lo, hi, dtype));
                true
            }
            _ => false,
        };
        if !step {
            break;
        }
        removed.push(r);
        at = r;
        cur = *rout;
        if quant.is_some() {
            break;
        }
    }
    // nothing between the product and the new node's place updates a
    // value in place (the node reads its inputs there)
    let between = (i + 1..at).filter(|j| !removed.contains(j));
    if between
        .into_iter()
        .any(|j| crate::schema::mutates(&g.nodes[j].target))
    {
        return None;
    }
    if let Some(o) = other {
        args.push(named("other", Argument::OptionalTensor(Some(o.q))));
        args.push(named("other_scale", Argument::Float(o.scale)));
        args.push(named("other_zero_point", Argument::Int(o.zp)));
    }
    args.push(named("relu", Argument::Bool(relu)));
    if let Some((s, z, lo, hi, dtype)) = quant {
        args.push(named("output_scale", Argument::Float(s)));
        args.push(named("output_zero_point", Argument::Int(z)));
        args.push(named("output_min", Argument::Int(lo)));
        args.push(named("output_max", Argument::Int(hi)));
        args.push(named("output_dtype", Argument::ScalarType(dtype)));
    }
    let target = Target {
        kind: TargetKind::Op,
        namespace: "pt2kit".into(),
        name: if conv { "int8_conv2d" } else { "int8_linear" }.into(),
        overload: "default".into(),
    };
    let inputs = crate::decompose::edit::named_args(&target, args).ok()?;
    Some(Fused {
        at,
        node: Node {
            name: node.name.clone(),
            target,
            inputs,
            outputs: vec![Argument::Tensor(cur)],
            meta: node.meta.clone(),
            is_hop_single_tensor_return: None,
        },
        removed,
    })
}

/// `quantize_per_tensor(max_pool2d(dequantize_per_tensor(q)))` with the
/// same scale, zero point, range and dtype on both sides (a stem's max
/// pool, which X86InductorQuantizer gives its input's quantization) at
/// the max pool, node `i`: as one node, `pt2kit.int8_max_pool2d`, the max
/// pool of the quantized values themselves. The two maps are monotonic
/// and the quantization of a dequantized value is that value, so the
/// bytes are the ones torch's graph makes.
fn pool_at(p: &Program, f: &Facts, i: usize) -> Option<Fused> {
    let g = &p.graph;
    let node = &g.nodes[i];
    let op = op_of(node);
    if op != aten::MAX_POOL2D && op != aten::MAX_POOL2D_WITH_INDICES {
        return None;
    }
    let x = tensor_of(node.arg("self"))?;
    let d = f.def[x.index()]?;
    let act = activation(g, f, x)?;
    let dq = &g.nodes[d];
    let out = match node.outputs.as_slice() {
        [Argument::Tensor(o)] => *o,
        // the indices unread
        [Argument::Tensor(o), rest @ ..] => {
            let unread = rest.iter().all(|a| match a {
                Argument::Tensor(v) => f.uses[v.index()] == 0,
                Argument::None => true,
                _ => false,
            });
            unread.then_some(*o)?
        }
        _ => return None,
    };
    (f.uses[x.index()] == 1 && f.uses[out.index()] == 1 && !f.outputs.contains(&out))
        .then_some(())?;
    let qi = f.reader[out.index()]?;
    let qn = &g.nodes[qi];
    (op_of(qn) == qd::QUANTIZE_PER_TENSOR && tensor_of(qn.arg("input")) == Some(out))
        .then_some(())?;
    let same = |name: &str| match (dq.arg(name), qn.arg(name)) {
        (Some(a), Some(b)) => float_of(Some(a)).is_some() && float_of(Some(a)) == float_of(Some(b)),
        _ => false,
    };
    let dtype_same = matches!((dq.arg("dtype"), qn.arg("dtype")), (Some(Argument::ScalarType(a)), Some(Argument::ScalarType(b))) if a == b);
    (same("scale")
        && same("zero_point")
        && same("quant_min")
        && same("quant_max")
        && dtype_same
        && act.scale > 0.0)
        .then_some(())?;
    let q_out = match qn.outputs.as_slice() {
        [Argument::Tensor(v)] => *v,
        _ => return None,
    };
    let mut args = vec![named("input", Argument::Tensor(act.q))];
    for name in ["kernel_size", "stride", "padding", "dilation"] {
        if let Some(v) = ints_of(node.arg(name)) {
            args.push(named(name, Argument::Ints(v)));
        }
    }
    if let Some(Argument::Bool(c)) = node.arg("ceil_mode") {
        args.push(named("ceil_mode", Argument::Bool(*c)));
    }
    // a window of padding alone: torch's -inf, quantized to the lowest
    args.push(named("empty", Argument::Int(int_of(qn.arg("quant_min"))?)));
    let target = Target {
        kind: TargetKind::Op,
        namespace: "pt2kit".into(),
        name: "int8_max_pool2d".into(),
        overload: "default".into(),
    };
    let inputs = crate::decompose::edit::named_args(&target, args).ok()?;
    Some(Fused {
        at: qi,
        node: Node {
            name: node.name.clone(),
            target,
            inputs,
            outputs: vec![Argument::Tensor(q_out)],
            meta: node.meta.clone(),
            is_hop_single_tensor_return: None,
        },
        removed: vec![i, d, qi],
    })
}

/// `p` with its quantized convolutions and linear layers made fused int8
/// nodes, and a line for `-v` naming them; `None` where there is none,
/// the CPU has no int8 kernel, or `PT2KIT_INT8_REFERENCE=1`.
pub(super) fn fuse(p: &Program) -> Option<(Program, String)> {
    if crate::knobs::is_set("PT2KIT_INT8_REFERENCE") {
        return None;
    }
    let kernel = crate::kernels::int8::kernel()?;
    let f = Facts::of(&p.graph);
    let mut taken = HashSet::new();
    let mut fused = Vec::new();
    for i in 0..p.graph.nodes.len() {
        if taken.contains(&i) {
            continue;
        }
        if let Some(m) = match_at(p, &f, i).or_else(|| pool_at(p, &f, i)) {
            if m.removed.iter().all(|r| !taken.contains(r)) {
                taken.extend(m.removed.iter().copied());
                fused.push(m);
            }
        }
    }
    if fused.is_empty() {
        return None;
    }
    let names: Vec<String> = fused
        .iter()
        .map(|m| {
            let ops: Vec<String> = m.removed[1..]
                .iter()
                .map(|&r| {
                    p.graph.nodes[r]
                        .target
                        .name
                        .trim_end_matches('_')
                        .to_string()
                })
                .collect();
            let kind = &p.graph.nodes[m.removed[0]].target.name;
            match ops.is_empty() {
                true => format!("{} ({kind})", m.node.name),
                false => format!("{} ({kind} + {})", m.node.name, ops.join(" + ")),
            }
        })
        .collect();
    let mut q = p.clone();
    let mut place: HashMap<usize, Node> = fused.into_iter().map(|m| (m.at, m.node)).collect();
    let old = std::mem::take(&mut q.graph.nodes);
    for (i, n) in old.into_iter().enumerate() {
        if let Some(new) = place.remove(&i) {
            q.graph.nodes.push(new);
        } else if !taken.contains(&i) {
            q.graph.nodes.push(n);
        }
    }
    crate::decompose::passes::dce(&mut q).ok()?;
    crate::ir::validate::validate(&q).ok()?;
    let pools = q
        .graph
        .nodes
        .iter()
        .filter(|n| n.target.namespace == "pt2kit" && n.target.name == "int8_max_pool2d")
        .count();
    let pooled = match pools {
        0 => String::new(),
        1 => " and 1 max pool on the quantized values".into(),
        n => format!(" and {n} max pools on the quantized values"),
    };
    let note = format!(
        "int8: {} quantized products run on {} (integer sums, one requantisation){pooled}: {}",
        names.len() - pools,
        kernel.name(),
        names.join(", ")
    );
    Some((q, note))
}

impl Executor<'_> {
    /// Whether `v` of `graph` is a weight of the program's own graph (its
    /// tensor lives as long as the executor).
    pub(crate) fn is_weight_value(&self, graph: &Graph, v: ValueId) -> bool {
        std::ptr::eq(graph, &self.program.graph)
            && self.weight_slots.get(v.index()).copied().unwrap_or(false)
    }
}
