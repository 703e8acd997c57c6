//! Shape and dtype rules per op, as torch's meta functions have them. Each
//! rule checks a node's arguments (ranks, dims in range, positive strides
//! and kernels, sizes that are not negative, groups that divide channels,
//! element counts that views preserve, `k` within its dim) and infers its
//! outputs' sizes, static where the inputs are, before anything runs.
//!
//! [`check`] runs the rules over every node of a program, subgraphs
//! included, when a tool loads it (`cli::read_ir`; `ir-run` also after its
//! fallback lowering). A violation is a bad-input error (exit 3) naming the
//! node, the argument, the value and the rule:
//! `node conv2d (aten.conv2d.default): stride[0] is 0, must be > 0`.
//! An inferred size that disagrees with the one the archive recorded is an
//! error too: a graph that lies about its shapes is refused, not trusted.
//! Every value is held to [`Limits`]: rank, element count and, for the
//! executor, bytes.
//!
//! The rules sit in the file of their op's family, ending with their rows,
//! as in the executor, decomposition and ONNX tables. Ops without a rule
//! are listed by `ir-decompose --list`; their outputs still meet the limits.

use std::collections::HashMap;
use std::sync::OnceLock;

use crate::ir::args::NodeArgs;
use crate::ir::{Argument, Dtype, Graph, Node, Program, Sym, ValueId, ValueKind};
use crate::{Error, Result};

op_families!(&[(&str, ShapeRule)]);

/// A dim as a rule knows it: a size, or `None` when it is symbolic.
pub type Dim = Option<i64>;

/// What a rule finds for one tensor output, in output order: its dims
/// (`None`: not inferred) and dtype (`None`: not inferred).
#[derive(Clone, Debug, Default)]
pub struct Out {
    pub dims: Option<Vec<Dim>>,
    pub dtype: Option<Dtype>,
}

impl Out {
    pub fn dims(dims: Vec<Dim>) -> Out {
        Out {
            dims: Some(dims),
            dtype: None,
        }
    }
}

/// A rule: checks the node's arguments, returns what it infers of the
/// outputs (fewer than the node has: the rest are not inferred).
pub type ShapeRule = fn(&Site) -> Result<Vec<Out>>;

/// Bounds every value is held to, whatever its op.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    pub max_rank: usize,
    pub max_elements: i64,
    /// Bytes of one value (the executor's `--max-memory`); `None`: no cap.
    pub max_bytes: Option<u64>,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            max_rank: 64,
            max_elements: 1 << 48,
            max_bytes: None,
        }
    }
}

/// What a rule sees: its node, the graph it is in, its arguments by name.
pub struct Site<'a> {
    pub node: &'a Node,
    graph: &'a Graph,
    pub args: NodeArgs<'a>,
}

impl<'a> Site<'a> {
    /// An error that names the node, the argument and what is wrong.
    pub fn fail(&self, arg: &str, msg: impl std::fmt::Display) -> Error {
        Error::bad_input(format!(
            "node {} ({}): {arg} {msg}",
            self.node.name, self.node.target
        ))
    }

    fn meta_of(&self, v: ValueId) -> Option<&'a crate::ir::TensorMeta> {
        match &self.graph.values.get(v.index())?.kind {
            ValueKind::Tensor(m) => Some(m),
            _ => None,
        }
    }

    /// The dims of a tensor value.
    pub fn dims_of(&self, v: ValueId) -> Result<Vec<Dim>> {
        self.meta_of(v)
            .map(|m| m.sizes.iter().map(Sym::as_int).collect())
            .ok_or_else(|| self.fail("a tensor", "has no metadata"))
    }

    /// The dims of the tensor argument `name`.
    pub fn dims(&self, name: &str) -> Result<Vec<Dim>> {
        self.dims_of(self.args.tensor(name)?)
    }

    /// The dims of an optional tensor argument.
    pub fn opt_dims(&self, name: &str) -> Result<Option<Vec<Dim>>> {
        match self.args.opt_tensor(name)? {
            Some(v) => self.dims_of(v).map(Some),
            None => Ok(None),
        }
    }

    pub fn dtype(&self, name: &str) -> Result<Dtype> {
        let v = self.args.tensor(name)?;
        self.meta_of(v)
            .map(|m| m.dtype)
            .ok_or_else(|| self.fail(name, "has no metadata"))
    }

    /// A dim index of a tensor of `rank`, wrapped as torch wraps it.
    pub fn dim_index(&self, arg: &str, d: i64, rank: usize) -> Result<usize> {
        let r = rank.max(1) as i64;
        let w = if d < 0 { d + r } else { d };
        if w < 0 || w >= r {
            return Err(self.fail(
                arg,
                format!("is {d}, out of range for a tensor of rank {rank}"),
            ));
        }
        Ok(w as usize)
    }

    /// Every value of an int list is above `min`.
    pub fn each_above(&self, arg: &str, values: &[i64], min: i64) -> Result<()> {
        for (i, v) in values.iter().enumerate() {
            if *v <= min {
                return Err(self.fail(&format!("{arg}[{i}]"), format!("is {v}, must be > {min}")));
            }
        }
        Ok(())
    }

    /// A list of ints or symbolic ints (`None` where symbolic).
    pub fn sym_list(&self, name: &str) -> Result<Vec<Dim>> {
        Ok(self
            .args
            .syms(name)?
            .iter()
            .map(|r| match r {
                crate::ir::SymRef::Int(i) => Some(*i),
                _ => None,
            })
            .collect())
    }

    /// An int or symbolic int (`None` where symbolic or absent).
    pub fn sym_int(&self, name: &str) -> Result<Dim> {
        if !self.args.has(name) {
            return Ok(None);
        }
        Ok(match self.args.sym(name)? {
            crate::ir::SymRef::Int(i) => Some(i),
            _ => None,
        })
    }

    /// An int list argument, one value repeated to `n` when it has one, as
    /// torch's `_pair`/`_triple` expand.
    pub fn per_dim(&self, arg: &str, n: usize, default: i64) -> Result<Vec<i64>> {
        let v = match self.args.arg(arg) {
            Argument::None => vec![],
            _ => self.args.ints(arg)?,
        };
        Ok(match v.len() {
            0 => vec![default; n],
            1 => vec![v[0]; n],
            k if k == n => v,
            k => return Err(self.fail(arg, format!("has {k} values, the op needs 1 or {n}"))),
        })
    }
}

/// The rule of an op identity, if it has one.
pub fn rule_for(op: &str) -> Option<ShapeRule> {
    static MAP: OnceLock<HashMap<&'static str, ShapeRule>> = OnceLock::new();
    let map = MAP.get_or_init(|| rows().map(|(_, op, r)| (op, r)).collect());
    // an in-place op has its functional op's shape (torch checks that it
    // is `self`'s) and `self`'s dtype (set where the rule's output is made)
    map.get(op)
        .or_else(|| map.get(crate::schema::functional_of(op)?))
        .copied()
}

/// Every rule with its family: (family, op identity, rule).
pub fn rows() -> impl Iterator<Item = (&'static str, &'static str, ShapeRule)> {
    FAMILIES
        .iter()
        .flat_map(|(family, rows)| rows.iter().map(move |(op, r)| (*family, *op, *r)))
}

/// Runs the rules and the limits over every node of a program.
/// What the rule of `node` (in `graph`) infers of its outputs; `None`
/// where its op has no rule (the fuzz target's program maker).
pub fn outputs_of(graph: &Graph, node: &Node) -> Option<Result<Vec<Out>>> {
    let rule = rule_for(&node.target.to_string())?;
    let site = Site {
        node,
        graph,
        args: NodeArgs(node),
    };
    Some(rule(&site))
}

pub fn check(p: &Program, limits: &Limits) -> Result<()> {
    for (i, input) in p.graph.inputs.iter().enumerate() {
        if let Argument::Tensor(v) = input {
            check_value(&p.graph, *v, limits).map_err(|e| e.at(format!("graph input {i}")))?;
        }
    }
    let mut found: Result<()> = Ok(());
    p.graph.visit_nodes_in(&mut |graph, node| {
        if found.is_ok() {
            found = check_node(graph, node, limits);
        }
    });
    found
}

fn check_node(graph: &Graph, node: &Node, limits: &Limits) -> Result<()> {
    let site = Site {
        node,
        graph,
        args: NodeArgs(node),
    };
    let outputs: Vec<ValueId> = crate::ir::args::node_outputs(node)
        .into_iter()
        .filter(|v| {
            matches!(
                graph.values.get(v.index()).map(|x| &x.kind),
                Some(ValueKind::Tensor(_))
            )
        })
        .collect();
    if let Some(rule) = rule_for(&node.target.to_string()) {
        let mut inferred = rule(&site)?;
        // an in-place op's result is `self`, in `self`'s dtype
        if node.target.name.ends_with('_') && crate::schema::mutates_first(&node.target) {
            if let (Some(first), Some(Argument::Tensor(s))) =
                (inferred.first_mut(), node.arg("self"))
            {
                first.dtype = site.meta_of(*s).map(|m| m.dtype).or(first.dtype);
            }
        }
        for (k, (out, v)) in inferred.iter().zip(&outputs).enumerate() {
            let recorded = site.dims_of(*v)?;
            if let Some(dims) = &out.dims {
                let lies = dims.len() != recorded.len()
                    || dims
                        .iter()
                        .zip(&recorded)
                        .any(|(a, b)| matches!((a, b), (Some(a), Some(b)) if a != b));
                if lies {
                    return Err(site.fail(
                        &format!("output {k}"),
                        format!(
                            "is recorded as {} but its arguments give {}",
                            show(&recorded),
                            show(dims)
                        ),
                    ));
                }
            }
            if let (Some(d), Some(m)) = (out.dtype, site.meta_of(*v)) {
                if d != m.dtype {
                    return Err(site.fail(
                        &format!("output {k}"),
                        format!(
                            "is recorded as {} but its arguments give {}",
                            m.dtype.torch_name(),
                            d.torch_name()
                        ),
                    ));
                }
            }
        }
    }
    for v in outputs {
        check_value(graph, v, limits).map_err(|e| e.at(format!("node {}", node.name)))?;
    }
    Ok(())
}

/// A value's rank, element count and bytes against the limits.
fn check_value(graph: &Graph, v: ValueId, limits: &Limits) -> Result<()> {
    let Some(ValueKind::Tensor(m)) = graph.values.get(v.index()).map(|x| &x.kind) else {
        return Ok(());
    };
    let name = &graph.values[v.index()].name;
    if m.sizes.len() > limits.max_rank {
        return Err(Error::bad_input(format!(
            "value {name} has rank {}, more than the {} this toolkit takes",
            m.sizes.len(),
            limits.max_rank
        )));
    }
    let mut elements: i64 = 1;
    for s in &m.sizes {
        let Some(n) = s.as_int() else { continue };
        if n < 0 {
            return Err(Error::bad_input(format!(
                "value {name} has a negative size {}",
                show_syms(&m.sizes)
            )));
        }
        elements = elements.saturating_mul(n);
    }
    if elements > limits.max_elements {
        return Err(Error::bad_input(format!(
            "value {name} of {} has {elements} elements, more than the {} this toolkit takes",
            show_syms(&m.sizes),
            limits.max_elements
        )));
    }
    if let Some(cap) = limits.max_bytes {
        let bytes = (elements as u64).saturating_mul(m.dtype.size() as u64);
        if bytes > cap {
            return Err(Error::bad_input(format!(
                "value {name} of {} {} needs {}, more than the memory cap of {} (--max-memory)",
                m.dtype.short_name(),
                show_syms(&m.sizes),
                human_bytes(bytes),
                human_bytes(cap)
            )));
        }
    }
    Ok(())
}

fn show(dims: &[Dim]) -> String {
    let parts: Vec<String> = dims
        .iter()
        .map(|d| d.map_or("?".to_string(), |n| n.to_string()))
        .collect();
    format!("[{}]", parts.join(", "))
}

fn show_syms(sizes: &[Sym]) -> String {
    show(&sizes.iter().map(Sym::as_int).collect::<Vec<_>>())
}

/// Bytes as people read them (`4.0 TiB`).
pub fn human_bytes(b: u64) -> String {
    let units = ["B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"];
    let mut v = b as f64;
    let mut u = 0;
    while v >= 1024.0 && u + 1 < units.len() {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{b} B")
    } else {
        format!("{v:.1} {}", units[u])
    }
}

/// Broadcasts two shapes as torch does; dims that are symbolic pass.
pub fn broadcast(site: &Site, a: &[Dim], b: &[Dim]) -> Result<Vec<Dim>> {
    let r = a.len().max(b.len());
    let at = |s: &[Dim], i: usize| -> Dim {
        if i + s.len() >= r {
            s[i + s.len() - r]
        } else {
            Some(1)
        }
    };
    (0..r)
        .map(|i| match (at(a, i), at(b, i)) {
            (Some(1), d) | (d, Some(1)) => Ok(d),
            (Some(x), Some(y)) if x != y => Err(site.fail(
                "operands",
                format!("of shapes {} and {} do not broadcast", show(a), show(b)),
            )),
            (Some(x), _) | (_, Some(x)) => Ok(Some(x)),
            (None, None) => Ok(None),
        })
        .collect()
}

/// The op kinds that have a rule, and those of the executor that have none
/// (for `ir-decompose --list` and the count in docs/formats.md).
pub fn coverage(ops: impl Iterator<Item = &'static str>) -> (Vec<&'static str>, Vec<&'static str>) {
    let mut with = Vec::new();
    let mut without = Vec::new();
    for op in ops {
        if rule_for(op).is_some() {
            with.push(op);
        } else {
            without.push(op);
        }
    }
    (with, without)
}
