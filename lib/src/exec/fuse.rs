//! Element-wise chains run as one pass.
//!
//! A decomposed activation is a chain of element-wise ops: GPT-2's tanh
//! GELU is eight (`pow`, `mul`, `add`, `mul`, `tanh`, `add`, `mul`, `mul`),
//! a lowered hardswish four. Run one by one, each reads and writes the
//! whole tensor. At load, the executor finds groups of float32 element-wise
//! nodes over tensors of one shape (no broadcasting) whose intermediate
//! values nothing else reads, and runs each group at its last node as one
//! pass: [`LANES`] elements at a time through every step, the intermediates
//! in a few vectors on the stack ([`Group::eval`]). ONNX Runtime's
//! optimiser fuses the same patterns (its GELU and bias fusions).
//!
//! Which ops may join, and how, are the `FUSES` rows of the family files
//! (`exec/ops/activation.rs`, `pointwise.rs`); this module reads only their
//! arguments.
//!
//! A chain after a convolution or a linear layer's product whose output
//! only it reads is that op's epilogue ([`Role::Producer`]; a product's
//! output may reach the chain through views, [`Plan::bridges`], as a 3-D
//! input's linear layer is an addmm viewed back to 3-D): where each step
//! maps the value so far with a number or another input of the output's
//! shape (a relu; a residual add and relu; hardswish, lowered or not; a
//! clamp; GELU), the kernel runs it on each block of its output as it
//! finishes the block, in L2 ([`register_steps`], [`sgemm::Epilogue`]), and
//! the output is never written twice; other kernels leave it to a pass
//! right after. `PT2KIT_NO_EPILOGUE=1` turns this off (for timing both
//! ways): ResNet-18 at batch 8 89 against 90 ms, MobileNetV3 8.2 against
//! 8.5 ms.
//!
//! The steps compute what the ops' own rows compute (the same formulas and
//! the same [`vmath`] functions), so a fused run matches an unfused one to
//! the bit. A group falls back to its nodes one by one when an input is not
//! a float32 host tensor of the group's size at run time; no group reads a
//! value that an in-place op of the TRAINING dialect updates (the update
//! might come between its nodes and its root); and the whole plan is off
//! while intermediates are recorded (`ir-run --intermediates`, which wants
//! every node's value).

use crate::ir::op::aten;
use std::collections::HashMap;

use super::ops::{Fusable, FuseOp as Op};
use crate::ir::{Argument, Dtype, Graph, Node, ValueId, ValueKind};
use crate::kernels::{sgemm, vmath};

/// Elements a step computes at once.
pub const LANES: usize = 128;

/// Where a step's operand comes from.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Src {
    /// The group's `i`th input tensor.
    In(usize),
    /// An earlier step's result.
    Step(usize),
    Const(f32),
}

#[derive(Clone, Copy, Debug)]
struct Step {
    op: Op,
    a: Src,
    b: Src,
}

/// A group of nodes run as one pass.
#[derive(Debug)]
pub struct Group {
    /// The member nodes, in graph order (the last is the root).
    pub nodes: Vec<usize>,
    /// The tensors it reads, all of one shape.
    pub inputs: Vec<ValueId>,
    /// The value it defines (the root's output).
    pub output: ValueId,
    steps: Vec<Step>,
    /// As an epilogue, its kernel steps for the producer's input (see
    /// [`Group::register_steps`]), made once.
    registered: Option<(usize, Option<Vec<sgemm::EpiStep>>)>,
}

/// A node's part in the plan.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Role {
    /// Runs as itself.
    Alone,
    /// Runs inside its group, at the root.
    Member,
    /// The last node of group `i`: the group runs here.
    Root(usize),
    /// A convolution or product whose output only group `i` reads: the group runs
    /// on its output as it is made (an epilogue), or right after it.
    Producer(usize),
}

/// The groups of a graph and each node's role.
#[derive(Debug, Default)]
pub struct Plan {
    pub groups: Vec<Group>,
    pub roles: Vec<Role>,
    /// Per group, where it runs as an epilogue: the convolution or product (node)
    /// that makes one of its inputs, and which input that is.
    pub epilogues: Vec<Option<(usize, usize)>>,
    /// Per group, the views between its producer and it (run right after
    /// the producer, on its output: the epilogue's result or not).
    pub bridges: Vec<Vec<usize>>,
    /// Where each node reads its inputs: a group's members at the group's
    /// root, or at its producer for an epilogue (the executor frees a
    /// value after the last place it is read).
    pub read_at: Vec<usize>,
    /// Convolutions whose input is a scaled one, one number per channel
    /// (a squeeze-and-excitation's `x * s`, `s` `[1, C, 1, 1]`), that
    /// read `x` and scale their weight's input channels by `s` instead, the
    /// product not made (its node a [`Role::Member`]): by node, `(x, s)`
    /// ([`scaled_inputs`]).
    pub scaled: HashMap<usize, (ValueId, ValueId)>,
}

/// A convolution's input scaled per channel at batch 1, `x * s` or `s *
/// x` with `x` `[1, C, H, W]` and `s` `[1, C, 1, 1]`, that only it reads:
/// `conv(x * s, w) = conv(x, w * s)` over its input channels (groups 1),
/// where the weight has at most half as many elements as `x` (the
/// squeeze-and-excitation blocks of MobileNetV3 before the deepest,
/// whose 576 x 96 weight outweighs its 576 x 7 x 7 input). The product is
/// a pass over the whole input, the weight's scaling one over the weight
/// (a copy of its packed form, `ops/conv/scaled.rs`). At batch 1 only:
/// each image has its own scale.
/// `PT2KIT_NO_SCALE_FOLD=1` turns it off (for timing both ways). None of
/// the three values is one an in-place op updates.
fn scaled_inputs(
    graph: &Graph,
    uses: &[usize],
    mutated: &std::collections::HashSet<ValueId>,
    plan: &mut Plan,
) {
    if crate::knobs::is_set("PT2KIT_NO_SCALE_FOLD") {
        return;
    }
    let f32_sizes = |v: ValueId| -> Option<Vec<usize>> {
        match &graph.values[v.index()].kind {
            ValueKind::Tensor(m) if m.dtype == Dtype::Float32 => m
                .sizes
                .iter()
                .map(|d| d.as_int().and_then(|d| usize::try_from(d).ok()))
                .collect(),
            _ => None,
        }
    };
    // the node that reads each value (one, where uses is 1)
    let mut reader: HashMap<ValueId, usize> = HashMap::new();
    let mut refs = Vec::new();
    for (i, node) in graph.nodes.iter().enumerate() {
        refs.clear();
        node.inputs.iter().for_each(|a| a.arg.value_refs(&mut refs));
        for v in &refs {
            reader.insert(*v, i);
        }
    }
    for (m, node) in graph.nodes.iter().enumerate() {
        if node.target.to_string() != aten::MUL_TENSOR || plan.roles[m] != Role::Alone {
            continue;
        }
        let (Some(Argument::Tensor(a)), Some(Argument::Tensor(b)), [Argument::Tensor(out)]) =
            (node.arg("self"), node.arg("other"), node.outputs.as_slice())
        else {
            continue;
        };
        let (Some(sa), Some(sb)) = (f32_sizes(*a), f32_sizes(*b)) else {
            continue;
        };
        let (x, s, xs) = match (sa.as_slice(), sb.as_slice()) {
            ([1, c, _, _], [1, k, 1, 1]) if c == k => (*a, *b, sa.clone()),
            ([1, k, 1, 1], [1, c, _, _]) if c == k => (*b, *a, sb.clone()),
            _ => continue,
        };
        // (none that an in-place op updates: the update might come
        // between the product and the convolution)
        if uses[out.index()] != 1 || [x, s, *out].iter().any(|v| mutated.contains(v)) {
            continue;
        }
        let Some(&c) = reader.get(out) else {
            continue;
        };
        let conv = &graph.nodes[c];
        let literal = |name: &str, want: i64| match conv.arg(name) {
            None | Some(Argument::None) => true,
            Some(Argument::Int(v)) | Some(Argument::SymInt(crate::ir::SymRef::Int(v))) => {
                *v == want
            }
            Some(Argument::Bool(v)) => i64::from(*v) == want,
            _ => false,
        };
        let ok = matches!(
            conv.target.to_string().as_str(),
            aten::CONVOLUTION | aten::CONV2D
        ) && matches!(conv.arg("input"), Some(Argument::Tensor(v)) if v == out)
            && matches!(conv.arg("weight"), Some(Argument::Tensor(w))
                if f32_sizes(*w).is_some_and(|ws| ws.len() == 4 && ws[1] == xs[1]
                    && 2 * ws.iter().product::<usize>() <= xs.iter().product::<usize>()))
            && literal("groups", 1)
            && literal("transposed", 0)
            && matches!(plan.roles[c], Role::Alone | Role::Producer(_));
        if !ok {
            continue;
        }
        plan.roles[m] = Role::Member;
        plan.read_at[m] = c;
        plan.scaled.insert(c, (x, s));
    }
}

impl Plan {
    /// Whether it changes nothing (every node runs as itself).
    pub fn is_empty(&self) -> bool {
        self.groups.is_empty() && self.scaled.is_empty()
    }
}

/// The ops whose output a group may take as an epilogue.
const PRODUCERS: &[&str] = &[
    aten::CONVOLUTION,
    aten::CONV2D,
    aten::ADDMM,
    aten::MM,
    aten::LINEAR,
];

/// The producers whose kernel also runs a group that is not a chain of
/// [`register_steps`] ([`Group::eval_span`] on each block: a product's
/// blocks are large; a convolution's small planes were slower that way).
const PRODUCTS: &[&str] = &[aten::ADDMM, aten::MM, aten::LINEAR];

/// Views a group may see its producer's output through (reshapes of a
/// product's contiguous output, which alias it).
const VIEWS: &[&str] = &[aten::VIEW, aten::_UNSAFE_VIEW];

/// A node as a step, if it is a float32 element-wise op the plan fuses:
/// its op and operands (values or constants), and its output.
/// A node as a step: its op, its operands (values, or constants), and the
/// value it defines.
type Classified = (Op, Vec<Result<ValueId, f32>>, ValueId);

/// A node as a step, if its op has a `FUSES` row, it defines one float32
/// tensor, and its tensor operands are float32 of the same sizes.
fn classify(graph: &Graph, node: &Node) -> Option<Classified> {
    let kind = super::ops::fusable(&node.target.to_string())?;
    let f32_meta = |v: ValueId| match &graph.values[v.index()].kind {
        ValueKind::Tensor(m) if m.dtype == Dtype::Float32 => Some(m.sizes.clone()),
        _ => None,
    };
    let [Argument::Tensor(out)] = node.outputs.as_slice() else {
        return None;
    };
    let sizes = f32_meta(*out)?;
    let tensor = |name: &str| -> Option<ValueId> {
        match node.arg(name)? {
            Argument::Tensor(v) if f32_meta(*v).as_ref() == Some(&sizes) => Some(*v),
            _ => None,
        }
    };
    let number = |name: &str| -> Option<Option<f32>> {
        match node.arg(name) {
            None | Some(Argument::None) => Some(None),
            Some(Argument::Float(f)) => Some(Some(*f as f32)),
            Some(Argument::Int(i)) => Some(Some(*i as f32)),
            _ => None,
        }
    };
    // a tensor of the output's shape, or a number
    let operand = |name: &str| -> Option<Result<ValueId, f32>> {
        match node.arg(name)? {
            Argument::Tensor(_) => tensor(name).map(Ok),
            Argument::Float(f) => Some(Err(*f as f32)),
            Argument::Int(i) => Some(Err(*i as f32)),
            _ => None,
        }
    };
    let op = match kind {
        Fusable::Unary(op) => op,
        Fusable::Binary(make) => {
            let op = make(number("alpha")?.unwrap_or(1.0));
            return Some((op, vec![Ok(tensor("self")?), operand("other")?], *out));
        }
        Fusable::Gelu => match node.arg("approximate") {
            Some(Argument::String(s)) if s == "tanh" => Op::GeluTanh,
            None | Some(Argument::None) => Op::GeluErf,
            Some(Argument::String(s)) if s == "none" => Op::GeluErf,
            _ => return None,
        },
        Fusable::Clamp => {
            let (lo, hi) = (number("min")?, number("max")?);
            Op::Clamp(lo.unwrap_or(f32::NEG_INFINITY), hi.unwrap_or(f32::INFINITY))
        }
        Fusable::Hardtanh => {
            let (lo, hi) = (number("min_val")?, number("max_val")?);
            Op::Clamp(lo.unwrap_or(-1.0), hi.unwrap_or(1.0))
        }
        Fusable::Pow => match number("exponent")? {
            Some(2.0) => Op::Square,
            Some(3.0) => Op::Cube,
            _ => return None,
        },
    };
    Some((op, vec![Ok(tensor("self")?)], *out))
}

impl Plan {
    /// The groups of `graph`: none that reads a value an in-place op
    /// updates (the update might come between its nodes and its root).
    /// With `epilogues`, chains after a convolution or product that its kernel can
    /// run on its output ([`register_steps`]) are its epilogue
    /// ([`Role::Producer`]).
    pub fn new(graph: &Graph, epilogues: bool) -> Plan {
        let n = graph.nodes.len();
        let mut plan = Plan {
            roles: vec![Role::Alone; n],
            read_at: (0..n).collect(),
            ..Plan::default()
        };
        // the `self` of every in-place op (the executor rebinds it)
        let mutated: std::collections::HashSet<ValueId> = graph
            .nodes
            .iter()
            .filter(|node| node.target.name.ends_with('_') && crate::schema::mutates(&node.target))
            .filter_map(|node| match node.arg("self") {
                Some(Argument::Tensor(v)) => Some(*v),
                _ => None,
            })
            .collect();
        // readers of each value (graph outputs count as one each)
        let mut uses = vec![0usize; graph.values.len()];
        let mut refs = Vec::new();
        for node in &graph.nodes {
            refs.clear();
            node.inputs.iter().for_each(|a| a.arg.value_refs(&mut refs));
            for v in &refs {
                uses[v.index()] += 1;
            }
        }
        refs.clear();
        graph.outputs.iter().for_each(|a| a.value_refs(&mut refs));
        for v in &refs {
            uses[v.index()] += 2;
        }
        // each fusable node's group, as its members (node indices), by the
        // value it defines
        let mut open: HashMap<ValueId, Vec<usize>> = HashMap::new();
        let mut steps: HashMap<usize, Classified> = HashMap::new();
        for (i, node) in graph.nodes.iter().enumerate() {
            let Some(step) = classify(graph, node) else {
                continue;
            };
            let mut members = Vec::new();
            for v in step.1.iter().filter_map(|o| o.ok()) {
                // an operand that only this node reads, made by a group
                if uses[v.index()] == 1 {
                    if let Some(m) = open.remove(&v) {
                        members.extend(m);
                    }
                }
            }
            members.push(i);
            members.sort_unstable();
            members.dedup();
            open.insert(step.2, members);
            steps.insert(i, step);
        }
        // the node that defines each value (graph inputs: none)
        let mut def: Vec<Option<usize>> = vec![None; graph.values.len()];
        for (i, node) in graph.nodes.iter().enumerate() {
            refs.clear();
            node.outputs.iter().for_each(|a| a.value_refs(&mut refs));
            for v in &refs {
                def[v.index()] = Some(i);
            }
        }
        // the convolution or product that makes `v`, where `members` are
        // all its readers (none outside the group, not a graph output),
        // and the views between them (a linear layer's [b*t, n] output
        // viewed as [b, t, n]), each read only by the next
        let produced = |v: ValueId, members: &[usize]| -> Option<(usize, Vec<usize>)> {
            let mut reads = 0;
            let mut refs = Vec::new();
            for &m in members {
                refs.clear();
                graph.nodes[m]
                    .inputs
                    .iter()
                    .for_each(|a| a.arg.value_refs(&mut refs));
                reads += refs.iter().filter(|&&r| r == v).count();
            }
            if !epilogues || uses[v.index()] != reads {
                return None;
            }
            let mut d = def[v.index()]?;
            let mut bridges = Vec::new();
            while VIEWS.contains(&graph.nodes[d].target.to_string().as_str()) {
                let Some(Argument::Tensor(u)) = graph.nodes[d].arg("self") else {
                    return None;
                };
                if uses[u.index()] != 1 {
                    return None;
                }
                bridges.push(d);
                d = def[u.index()]?;
            }
            bridges.reverse();
            let node = &graph.nodes[d];
            (node.outputs.len() == 1 && PRODUCERS.contains(&node.target.to_string().as_str()))
                .then_some((d, bridges))
        };
        // in graph order (of their last nodes): chains of two or more, and
        // single nodes on a producer's output (an epilogue)
        let mut open: Vec<(ValueId, Vec<usize>)> = open
            .into_iter()
            .filter(|(_, m)| {
                m.len() >= 2
                    || steps[&m[0]]
                        .1
                        .iter()
                        .any(|o| o.is_ok_and(|v| produced(v, m).is_some()))
            })
            .collect();
        open.sort_by_key(|(_, m)| m[m.len() - 1]);
        for (output, members) in open {
            let made: HashMap<ValueId, usize> = members
                .iter()
                .enumerate()
                .map(|(s, i)| (steps[i].2, s))
                .collect();
            let mut inputs: Vec<ValueId> = Vec::new();
            let mut src = |o: &Result<ValueId, f32>| match o {
                Err(c) => Src::Const(*c),
                Ok(v) => match made.get(v) {
                    Some(s) => Src::Step(*s),
                    None => Src::In(match inputs.iter().position(|x| x == v) {
                        Some(p) => p,
                        None => {
                            inputs.push(*v);
                            inputs.len() - 1
                        }
                    }),
                },
            };
            let group_steps: Vec<Step> = members
                .iter()
                .map(|i| {
                    let (op, args, _) = &steps[i];
                    Step {
                        op: *op,
                        a: src(&args[0]),
                        b: args.get(1).map_or(Src::Const(0.0), &mut src),
                    }
                })
                .collect();
            if inputs.iter().any(|v| mutated.contains(v)) {
                continue;
            }
            // an epilogue: an input a producer makes for this group
            // alone, every other input made before that producer (the
            // group then runs there); the latest such producer
            let epilogue = inputs
                .iter()
                .enumerate()
                .filter_map(|(own, &v)| {
                    let (c, bridges) = produced(v, &members)?;
                    Some((c, own, bridges))
                })
                .filter(|(c, own, _)| {
                    inputs
                        .iter()
                        .enumerate()
                        .all(|(i, u)| i == *own || def[u.index()].is_none_or(|d| d < *c))
                })
                .filter(|(c, own, _)| {
                    register_steps(&group_steps, *own).is_some()
                        || PRODUCTS.contains(&graph.nodes[*c].target.to_string().as_str())
                })
                .max();
            let (epilogue, bridges) = match epilogue {
                Some((c, own, bridges)) => (Some((c, own)), bridges),
                None => (None, Vec::new()),
            };
            if members.len() < 2 && epilogue.is_none() {
                continue;
            }
            let g = plan.groups.len();
            for &m in &members {
                plan.roles[m] = Role::Member;
            }
            match epilogue {
                Some((c, _)) => plan.roles[c] = Role::Producer(g),
                None => plan.roles[members[members.len() - 1]] = Role::Root(g),
            }
            let at = epilogue.map_or(members[members.len() - 1], |(c, _)| c);
            for &m in members.iter().chain(&bridges) {
                plan.read_at[m] = at;
            }
            for &b in &bridges {
                plan.roles[b] = Role::Member;
            }
            plan.epilogues.push(epilogue);
            plan.bridges.push(bridges);
            let registered = epilogue.map(|(_, own)| (own, register_steps(&group_steps, own)));
            plan.groups.push(Group {
                nodes: members,
                inputs,
                output,
                steps: group_steps,
                registered,
            });
        }
        scaled_inputs(graph, &uses, &mutated, &mut plan);
        plan
    }
}

/// `f` over the lanes of `a` and `b`, one loop per op (so that it
/// vectorises: a match inside the loop would not). A loop, not
/// `std::array::from_fn`: two ops' closures stayed out of line through it,
/// compiled without the instruction set of `eval_chunk`'s instance (see
/// `kernels::simd`).
#[inline(always)]
fn lanes<B: Lanes>(a: &[f32; LANES], b: B, f: impl Fn(f32, f32) -> f32) -> [f32; LANES] {
    let mut out = [0f32; LANES];
    for (i, o) in out.iter_mut().enumerate() {
        *o = f(a[i], b.at(i));
    }
    out
}

/// A step's second operand: a chunk of values, or one number for every
/// lane (a constant: no chunk filled with it first, which was a kilobyte
/// of stores a step).
trait Lanes: Copy {
    fn at(self, i: usize) -> f32;
}

impl Lanes for &[f32; LANES] {
    #[inline(always)]
    fn at(self, i: usize) -> f32 {
        self[i]
    }
}

impl Lanes for f32 {
    #[inline(always)]
    fn at(self, _: usize) -> f32 {
        self
    }
}

/// One step over a chunk.
#[inline(always)]
fn step_lanes<B: Lanes>(op: Op, a: &[f32; LANES], b: B) -> [f32; LANES] {
    match op {
        Op::Relu => lanes(a, b, |x, _| super::ops::scalar(Op::Relu, x, 0.0)),
        Op::Neg => lanes(a, b, |x, _| -x),
        Op::Abs => lanes(a, b, |x, _| x.abs()),
        Op::Tanh => lanes(a, b, |x, _| vmath::tanh(x)),
        Op::Sigmoid => lanes(a, b, |x, _| vmath::sigmoid(x)),
        Op::Silu => lanes(a, b, |x, _| vmath::silu(x)),
        Op::GeluErf => lanes(a, b, |x, _| vmath::gelu_erf(x)),
        Op::GeluTanh => lanes(a, b, |x, _| vmath::gelu_tanh(x)),
        Op::Hardswish => lanes(a, b, |x, _| super::ops::scalar(Op::Hardswish, x, 0.0)),
        Op::Hardsigmoid => lanes(a, b, |x, _| super::ops::scalar(Op::Hardsigmoid, x, 0.0)),
        Op::Square => lanes(a, b, |x, _| x * x),
        Op::Cube => lanes(a, b, |x, _| x * x * x),
        Op::Clamp(lo, hi) => lanes(a, b, |x, _| super::ops::scalar(Op::Clamp(lo, hi), x, 0.0)),
        Op::Add(k) => lanes(a, b, |x, y| x + y * k),
        Op::Sub(k) => lanes(a, b, |x, y| x - y * k),
        Op::Mul => lanes(a, b, |x, y| x * y),
        Op::Div => lanes(a, b, |x, y| x / y),
    }
}

vmath::multiversion! {
    /// Elements `[base, base + out.len())` of a group (`out.len()` at most
    /// [`LANES`]), every step over them in turn, `tmp` holding the steps'
    /// results (a short last chunk computes whole lanes and keeps its
    /// part).
    fn eval_chunk(steps: &[Step], inputs: &[&[f32]], base: usize, out: &mut [f32], tmp: &mut [[f32; LANES]]) {
        let len = out.len();
        let (mut bufa, mut bufb) = ([0f32; LANES], [0f32; LANES]);
        for (s, step) in steps.iter().enumerate() {
            let (done, rest) = tmp.split_at_mut(s);
            // an operand: read where it lies (a whole chunk of an input, an
            // earlier step), or made in `buf` (a short chunk, a constant)
            let operand = |src: Src, buf: &mut [f32; LANES]| -> Option<*const [f32; LANES]> {
                match src {
                    Src::In(i) => match <&[f32; LANES]>::try_from(&inputs[i][base..base + len]) {
                        Ok(whole) => Some(whole as *const _),
                        Err(_) => {
                            buf[..len].copy_from_slice(&inputs[i][base..base + len]);
                            None
                        }
                    },
                    Src::Step(j) => Some(&done[j] as *const _),
                    Src::Const(c) => {
                        *buf = [c; LANES];
                        None
                    }
                }
            };
            let pa = operand(step.a, &mut bufa);
            // SAFETY: the pointers are to an input or to `done`, both
            // borrowed (immutably) for the whole step; `rest` is disjoint.
            let a = unsafe { pa.map_or(&bufa, |p| &*p) };
            rest[0] = match step.b {
                Src::Const(c) => step_lanes(step.op, a, c),
                src => {
                    let pb = operand(src, &mut bufb);
                    // SAFETY: as for `a`
                    step_lanes(step.op, a, unsafe { pb.map_or(&bufb, |p| &*p) })
                }
            };
        }
        out.copy_from_slice(&tmp[steps.len() - 1][..len]);
    }
}

impl Group {
    /// The group on `span`, elements `[at, at + span.len())` of its output,
    /// in place: the span holds input `own` (a block a product has just
    /// made, in L2) and becomes the group's result; the other inputs are
    /// read at the same elements (`inputs[own]` is not read). A kernel's
    /// epilogue where the group is not a chain of [`register_steps`] (GPT-2's
    /// tanh GELU reads the product at three steps).
    pub fn eval_span(&self, own: usize, inputs: &[&[f32]], at: usize, span: &mut [f32]) {
        thread_local! {
            static TMP: std::cell::RefCell<Vec<[f32; LANES]>> = const { std::cell::RefCell::new(Vec::new()) };
        }
        let mut tmp = TMP.with(|t| t.take());
        tmp.resize(self.steps.len(), [0f32; LANES]);
        let mut buf = [0f32; LANES];
        for (k, o) in span.chunks_mut(LANES).enumerate() {
            let (base, len) = (at + k * LANES, o.len());
            buf[..len].copy_from_slice(o);
            let part = |i: usize| -> &[f32] {
                if i == own {
                    &buf[..len]
                } else {
                    &inputs[i][base..base + len]
                }
            };
            // each input's part from element 0 (on the stack for up to 8)
            let mut few: [&[f32]; 8] = [&[]; 8];
            let spill: Vec<&[f32]>;
            let local: &[&[f32]] = if inputs.len() <= few.len() {
                for (i, f) in few.iter_mut().enumerate().take(inputs.len()) {
                    *f = part(i);
                }
                &few[..inputs.len()]
            } else {
                spill = (0..inputs.len()).map(part).collect();
                &spill
            };
            eval_chunk(&self.steps, local, 0, o, &mut tmp);
        }
        TMP.with(|t| t.replace(tmp));
    }

    /// The group over its inputs (each `len` elements), split over the
    /// pool's threads when large.
    pub fn eval(&self, inputs: &[&[f32]], len: usize) -> Vec<f32> {
        let mut out = vec![0f32; len];
        let chunk = |(c, dst): (usize, &mut [f32])| {
            let mut tmp = vec![[0f32; LANES]; self.steps.len()];
            for (k, o) in dst.chunks_mut(LANES).enumerate() {
                eval_chunk(&self.steps, inputs, c + k * LANES, o, &mut tmp);
            }
        };
        // about 32 thousand elements a task
        let per = (1 << 15) / LANES * LANES;
        if len <= per {
            chunk((0, &mut out));
        } else {
            crate::kernels::threads::par_chunks(&mut out, per, |i, d| chunk((i * per, d)));
        }
        out
    }
}

/// A group's steps as the kernels run them
/// ([`sgemm::Epilogue`]), its input `own` the product: a chain where each
/// step maps the value so far with a number or another input (torch's
/// lowered hardswish, `x * clamp(x + 3, 0, 6) / 6` in five steps, is one);
/// `None` for any other shape or op.
fn register_steps(steps: &[Step], own: usize) -> Option<Vec<sgemm::EpiStep>> {
    use sgemm::{EpiOp, EpiSrc};
    // the lowered hardswish: add 3, clamp below 0 and above 6 (or both at
    // once), times x, over 6, in that order
    let x = Src::In(own);
    let hardswish = |st: &[Step]| -> Option<usize> {
        let [add, rest @ ..] = st else { return None };
        if add.op != Op::Add(1.0) || add.a != x || add.b != Src::Const(3.0) {
            return None;
        }
        // the clamp's last step
        let k = match rest {
            [c, ..] if c.op == Op::Clamp(0.0, 6.0) && c.a == Src::Step(0) => 2,
            [c0, c1, ..]
                if c0.op == Op::Clamp(0.0, f32::INFINITY)
                    && c0.a == Src::Step(0)
                    && c1.op == Op::Clamp(f32::NEG_INFINITY, 6.0)
                    && c1.a == Src::Step(1) =>
            {
                3
            }
            _ => return None,
        };
        let clamped = Src::Step(k - 1);
        let (mul, div) = (st.get(k)?, st.get(k + 1)?);
        let times_x = mul.op == Op::Mul
            && ((mul.a == x && mul.b == clamped) || (mul.a == clamped && mul.b == x));
        let over_6 = div.op == Op::Div && div.a == Src::Step(k) && div.b == Src::Const(6.0);
        (times_x && over_6).then_some(k + 2)
    };
    let mut out = Vec::new();
    let mut s = 0;
    while s < steps.len() {
        // the value so far: the product, or the last step's result
        let last = if s == 0 { x } else { Src::Step(s - 1) };
        if steps[s].a == last {
            if let Some(n) = (s == 0).then(|| hardswish(steps)).flatten() {
                out.push(sgemm::EpiStep {
                    op: EpiOp::Hardswish,
                    b: EpiSrc::Const(0.0),
                });
                s += n;
                continue;
            }
        }
        let st = &steps[s];
        // the value so far as the first operand, or as the second of an
        // op whose operands commute bit for bit (`r + x`: a residual add
        // whose producer is the later branch, ResNet's downsampling)
        let other = if st.a == last {
            st.b
        } else if st.b == last && matches!(st.op, Op::Add(k) if k == 1.0) | (st.op == Op::Mul) {
            st.a
        } else {
            return None;
        };
        let b = match other {
            Src::Const(c) => EpiSrc::Const(c),
            Src::In(i) if i != own => EpiSrc::Input(i),
            _ => return None,
        };
        let op = match st.op {
            Op::Relu => EpiOp::Relu,
            Op::Add(k) => EpiOp::Add(k),
            Op::Sub(k) => EpiOp::Sub(k),
            Op::Mul => EpiOp::Mul,
            Op::Div => EpiOp::Div,
            Op::Clamp(lo, hi) => EpiOp::Clamp(lo, hi),
            Op::Hardswish => EpiOp::Hardswish,
            Op::GeluErf => EpiOp::GeluErf,
            Op::GeluTanh => EpiOp::GeluTanh,
            _ => return None,
        };
        out.push(sgemm::EpiStep { op, b });
        s += 1;
    }
    Some(out)
}

impl Group {
    /// The group as a kernel's epilogue, its input
    /// `own` the producer's output (see [`register_steps`]).
    pub fn register_steps(&self, own: usize) -> Option<std::borrow::Cow<'_, [sgemm::EpiStep]>> {
        use std::borrow::Cow;
        match &self.registered {
            Some((o, steps)) if *o == own => steps.as_deref().map(Cow::Borrowed),
            _ => register_steps(&self.steps, own).map(Cow::Owned),
        }
    }
}
