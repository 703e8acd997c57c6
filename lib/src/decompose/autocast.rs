//! Autocast regions (`higher_order.wrap_with_autocast`): torch's CPU cast
//! policy, applied where a region is inlined.
//!
//! `torch.export` records the ops of a `torch.autocast(...)` block as they
//! were written (`linear` of float32 inputs) with the dtypes autocast gave
//! their results (`bf16`): the casts happened inside the dispatcher and are
//! not in the graph. Inlining a region puts them back, as
//! `aten._to_copy.default` nodes before each op of torch's CPU policy
//! (`lib/data/autocast_cpu.txt`, from `aten/src/ATen/autocast_mode.cpp`):
//! a `lower_precision_fp` op gets its floating inputs in the region's dtype,
//! an `fp32` op in float32, a `promote` op in the widest of them; float64
//! inputs are never cast (torch's `is_eligible`). A disabled region is
//! inlined as it is. The policy applies to the ops as written (a region is
//! inlined before its ops are lowered: `conv2d` is cast, the `convolution`
//! it becomes then sees low-precision inputs, as in torch). A region nested
//! in another is inlined after it with its own policy; nodes of a region
//! carry a `pt2kit_autocast` entry in their metadata and are not cast again.

use crate::ir::op::aten;
use std::collections::HashMap;
use std::sync::OnceLock;

use super::edit::{Emitter, Names};
use crate::ir::{Argument, Dtype, Graph, Node, ValueId};
use crate::{Error, Result};

const POLICY: &str = include_str!("../../data/autocast_cpu.txt");

/// The metadata key that marks a node whose region's policy was applied.
pub const MARK: &str = "pt2kit_autocast";

/// What torch's CPU autocast does to an op's inputs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cast {
    /// Floating inputs to the region's dtype.
    LowerPrecision,
    /// Floating inputs to float32.
    Fp32,
    /// Floating inputs to the widest of them and the region's dtype.
    Promote,
}

/// The policy table: `name.overload` of an `aten` op -> its cast.
pub fn policy() -> &'static HashMap<&'static str, Cast> {
    static MAP: OnceLock<HashMap<&'static str, Cast>> = OnceLock::new();
    MAP.get_or_init(|| {
        POLICY
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty() && !l.starts_with('#'))
            .filter_map(|l| {
                let (p, op) = l.split_once(' ')?;
                let cast = match p {
                    "lower_precision_fp" => Cast::LowerPrecision,
                    "fp32" => Cast::Fp32,
                    "promote" => Cast::Promote,
                    _ => return None,
                };
                Some((op.trim(), cast))
            })
            .collect()
    })
}

/// The cast torch's CPU autocast applies to a node's op, if any.
pub fn cast_of(node: &Node) -> Option<Cast> {
    let t = &node.target;
    if t.namespace != "aten" || t.kind != crate::ir::TargetKind::Op {
        return None;
    }
    let overload = if t.overload.is_empty() {
        "default"
    } else {
        t.overload.as_str()
    };
    policy()
        .get(format!("{}.{overload}", t.name).as_str())
        .copied()
}

/// A region's settings, from `wrap_with_autocast(device_type, dtype,
/// enabled, cache_enabled, subgraph, *operands)`.
#[derive(Clone, Debug)]
pub struct Region {
    pub device: String,
    /// The lower precision dtype (CPU's default, bfloat16, when `None`).
    pub dtype: Dtype,
    pub enabled: bool,
}

impl Region {
    pub fn of(node: &Node) -> Result<Region> {
        let arg = |i: usize| node.inputs.get(i).map(|a| &a.arg);
        let device = match arg(0) {
            Some(Argument::String(s)) => s.clone(),
            Some(Argument::Device(d)) => d.kind.clone(),
            other => {
                return Err(Error::bad_input(format!(
                    "node {}: wrap_with_autocast's device_type is {other:?}, not a string",
                    node.name
                )))
            }
        };
        let dtype = match arg(1) {
            Some(Argument::ScalarType(d)) => *d,
            Some(Argument::None) | None if device == "cpu" => Dtype::BFloat16,
            other => {
                return Err(Error::bad_input(format!(
                    "node {}: wrap_with_autocast's dtype is {other:?}",
                    node.name
                )))
            }
        };
        let enabled = match arg(2) {
            Some(Argument::Bool(b)) => *b,
            other => {
                return Err(Error::bad_input(format!(
                    "node {}: wrap_with_autocast's enabled is {other:?}, not a bool",
                    node.name
                )))
            }
        };
        Ok(Region {
            device,
            dtype,
            enabled,
        })
    }

    fn mark(&self) -> String {
        format!(
            "{}:{}:{}",
            self.device,
            self.dtype.short_name(),
            if self.enabled { "on" } else { "off" }
        )
    }
}

/// Whether a tensor of this dtype is one autocast casts (torch's
/// `is_eligible`: floating, not float64).
fn eligible(d: Dtype) -> bool {
    d.is_floating() && d != Dtype::Float64
}

/// The tensors of an argument, in order, with a setter's position.
fn tensors_of(arg: &Argument) -> Vec<ValueId> {
    match arg {
        Argument::Tensor(v) | Argument::OptionalTensor(Some(v)) => vec![*v],
        Argument::Tensors(vs) => vs.clone(),
        Argument::OptionalTensors(vs) => vs.iter().flatten().copied().collect(),
        _ => Vec::new(),
    }
}

/// Applies the region's policy to one node about to be emitted: casts
/// before it (emitted into `em`), its inputs rewired to them, the node
/// marked. A node already marked (an inner region's) is left alone, and
/// so are the nodes of its subgraphs.
pub fn apply(em: &mut Emitter, node: &mut Node, region: &Region) -> Result<()> {
    if node.meta.other.iter().any(|(k, _)| k == MARK) {
        return Ok(());
    }
    node.meta.other.push((MARK.to_string(), region.mark()));
    node.meta.other.sort();
    if !region.enabled {
        return Ok(());
    }
    // A region nested in this one is inlined after it, with its own policy.
    let nested = node.target.name == "wrap_with_autocast";
    for input in &mut node.inputs {
        match &mut input.arg {
            Argument::Graph(sub) if !nested => apply_graph(&mut sub.graph, region)?,
            _ => {}
        }
    }
    let on_device = |em: &Emitter, v: ValueId| -> Result<bool> {
        let m = em.meta(v)?;
        Ok(eligible(m.dtype) && m.device.kind == region.device)
    };
    if region.device != "cpu" {
        for input in &node.inputs {
            for v in tensors_of(&input.arg) {
                if on_device(em, v)? {
                    return Err(Error::unsupported(format!(
                        "node {}: an enabled autocast region on {} (only torch's CPU cast policy is implemented)",
                        node.name, region.device
                    )));
                }
            }
        }
        return Ok(());
    }
    let Some(cast) = cast_of(node) else {
        return Ok(());
    };
    let mut to = match cast {
        Cast::LowerPrecision | Cast::Promote => region.dtype,
        Cast::Fp32 => Dtype::Float32,
    };
    if cast == Cast::Promote {
        for input in &node.inputs {
            for v in tensors_of(&input.arg) {
                if on_device(em, v)? {
                    to = crate::promote::promote_types(to, em.dtype(v)?);
                }
            }
        }
    }
    let mut casts: HashMap<ValueId, ValueId> = HashMap::new();
    for input in &mut node.inputs {
        for v in tensors_of(&input.arg) {
            if casts.contains_key(&v) || !on_device(em, v)? || em.dtype(v)? == to {
                continue;
            }
            let sizes = em.sizes(v)?;
            let meta = em.meta_like(v, to, sizes)?;
            let c = em.op(
                aten::_TO_COPY,
                vec![
                    ("self", Argument::Tensor(v)),
                    ("dtype", Argument::ScalarType(to)),
                ],
                meta,
            )?;
            casts.insert(v, c);
        }
    }
    if casts.is_empty() {
        return Ok(());
    }
    let f = |v: ValueId| casts.get(&v).copied().unwrap_or(v);
    node.substitute_inputs(&f);
    Ok(())
}

/// Applies a region's policy to every node of a graph nested in the
/// region (a `cond` branch, a `scan` body), in place.
fn apply_graph(g: &mut Graph, region: &Region) -> Result<()> {
    let mut names = Names::of(g);
    let nodes = std::mem::take(&mut g.nodes);
    let mut out = Vec::with_capacity(nodes.len());
    for mut node in nodes {
        let mut em = Emitter::new(&mut g.values, &mut names, node.meta.clone());
        apply(&mut em, &mut node, region)?;
        out.append(&mut em.nodes);
        out.push(node);
    }
    g.nodes = out;
    Ok(())
}
