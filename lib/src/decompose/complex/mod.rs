//! Complex values as real pairs: the one lowering that lets back ends with
//! no complex dtype (candle, ONNX Runtime's standard kernels) run programs
//! that hold complex values.
//!
//! Every complex value of shape `S` becomes a real value of shape `S + [2]`
//! (float32 for complex64, float64 for complex128, float16 for complex32):
//! its real and imaginary parts side by side, the same bytes as torch's
//! complex layout. Every node that reads or defines a complex value is
//! rewritten into real ops:
//!
//! - `view_as_real` and `view_as_complex` become identities; `real`,
//!   `imag` selects of the pair dim;
//! - arithmetic (`add`, `sub`, `mul`, `div`, `neg`, `exp`, `abs`, `angle`,
//!   `conj`, `polar`, `complex`, casts) as formulas over the parts
//!   ([`arith`]); `pow` by a real scalar, `sqrt`, `log`, `reciprocal`, and
//!   matrix products (`mm`, `bmm`, and `matmul` through them) ([`math`]);
//! - ops that move or reduce elements (views, `cat`, `slice`, `select`,
//!   `permute`, `flip`, `index`, `sum`, `mean`, `where`, padding, ...) on
//!   the pairs, with their dims normalised against the complex rank so no
//!   dim lands on the pair dim ([`shape`]);
//! - torch's FFTs (`_fft_r2c`, `_fft_c2r`, `_fft_c2c`) into the toolkit's
//!   `pt2kit.dft` (ONNX `DFT`'s semantics), torch's normalisation as a
//!   multiplication ([`fft`]);
//! - any other op that touches a complex value is first lowered through
//!   the decomposition table (`stft`, `istft`, `fft_*`, `reshape`, ...) and
//!   its results rewritten in turn; an op neither handles is refused by
//!   name, with the reason.
//!
//! Weights (parameters, buffers, constants) that are complex become real
//! pair weights over the same bytes (their views' strides doubled). A
//! complex user input is read as it is and viewed as real pairs first
//! (`aten.view_as_real`); a complex user output is viewed back
//! (`aten.view_as_complex`). Those two boundary ops are the only nodes left
//! that touch a complex value: the executor runs them by relabelling its
//! tensor; `ir2onnx` refuses a program that has them, since ONNX Runtime
//! takes no complex tensors.

mod arith;
mod exact;
mod fft;
mod math;
mod shape;

use crate::ir::op::aten;
use std::collections::{HashMap, VecDeque};
use std::sync::OnceLock;

use super::args::{node_outputs, NodeArgs};
use super::edit::{contiguous_sym_strides, Emitter, Names};
use super::Lowered;
use crate::ir::{
    normalize_dim, Argument, Dtype, Graph, InputKind, Node, NodeMeta, OutputKind, Program, Sym,
    TensorMeta, ValueId, ValueKind,
};
use crate::{Error, Result};

/// The ops that may still touch a complex value after the lowering: a
/// complex user input viewed as pairs, a pair viewed as a complex output.
pub const BOUNDARY_OPS: &[&str] = &[aten::VIEW_AS_REAL, aten::VIEW_AS_COMPLEX];

/// How one op is rewritten: the value that now holds each output of the
/// node (in [`node_outputs`] order), a real pair for a complex output.
type Handler = fn(&mut ComplexNode, &NodeArgs) -> Result<Vec<ValueId>>;

/// Every op with a real-pair form: (op identity, rewrite).
fn handlers() -> &'static HashMap<&'static str, Handler> {
    static MAP: OnceLock<HashMap<&'static str, Handler>> = OnceLock::new();
    MAP.get_or_init(|| {
        arith::ROWS
            .iter()
            .chain(math::ROWS)
            .chain(shape::ROWS)
            .chain(fft::ROWS)
            .copied()
            .collect()
    })
}

/// Every op the lowering rewrites itself (others that touch a complex
/// value go through the decomposition table first), sorted: for docs and
/// `--list`.
pub fn supported_ops() -> Vec<&'static str> {
    let mut v: Vec<&str> = handlers().keys().copied().collect();
    v.sort_unstable();
    v
}

fn is_complex_value(g: &Graph, v: ValueId) -> bool {
    matches!(&g.values[v.index()].kind, ValueKind::Tensor(m) if m.dtype.is_complex())
}

/// Whether a program computes with complex values: a node, a graph input
/// or output (in any subgraph) with a complex dtype, or a complex weight.
/// (Values a rewrite left unused in the arena do not count.)
pub fn has_complex(p: &Program) -> bool {
    fn graph(g: &Graph) -> bool {
        let mut refs = Vec::new();
        g.inputs.iter().for_each(|a| a.value_refs(&mut refs));
        g.outputs.iter().for_each(|a| a.value_refs(&mut refs));
        refs.iter().any(|v| is_complex_value(g, *v))
            || g.nodes.iter().any(|n| {
                g.complex_dtype(n).is_some()
                    || n.inputs
                        .iter()
                        .any(|a| matches!(&a.arg, Argument::Graph(s) if graph(&s.graph)))
            })
    }
    graph(&p.graph) || p.weights.iter().any(|w| w.meta.dtype.is_complex())
}

/// Whether a program still has nodes that touch complex values other than
/// the boundary views ([`BOUNDARY_OPS`]): what the lowering removes.
pub fn needs_lowering(p: &Program) -> bool {
    let mut needs = p.weights.iter().any(|w| w.meta.dtype.is_complex());
    p.graph.visit_nodes_in(&mut |g, n| {
        needs |=
            g.complex_dtype(n).is_some() && !BOUNDARY_OPS.contains(&n.target.to_string().as_str());
    });
    if !needs {
        // a boundary view whose other side is not a graph input or output
        let g = &p.graph;
        let mut ends = Vec::new();
        g.inputs.iter().for_each(|a| a.value_refs(&mut ends));
        g.outputs.iter().for_each(|a| a.value_refs(&mut ends));
        needs = g.nodes.iter().any(|n| {
            let mut refs = Vec::new();
            n.inputs.iter().for_each(|a| a.arg.value_refs(&mut refs));
            n.outputs.iter().for_each(|a| a.value_refs(&mut refs));
            refs.iter()
                .any(|v| is_complex_value(g, *v) && !ends.contains(v))
        });
    }
    needs
}

pub use super::edit::pair_meta;

/// A rewrite's view of the lowering: the emitter, the pair of every complex
/// value lowered so far, and the node being rewritten.
pub(super) struct ComplexNode<'a, 'g> {
    pub em: &'a mut Emitter<'g>,
    pairs: &'a HashMap<ValueId, ValueId>,
    pub node: &'a Node,
}

impl ComplexNode<'_, '_> {
    /// Whether `v` is complex (the node's own values: never a pair).
    pub fn complex(&self, v: ValueId) -> bool {
        matches!(&self.em.values[v.index()].kind, ValueKind::Tensor(m) if m.dtype.is_complex())
    }

    /// The real pair that holds complex `v`.
    pub fn pair(&self, v: ValueId) -> Result<ValueId> {
        self.pairs.get(&v).copied().ok_or_else(|| {
            Error::internal(format!(
                "complex value {} has no real pair yet",
                self.em.values[v.index()].name
            ))
        })
    }

    /// A tensor of the node (its first output, else its first tensor
    /// argument): what a new constant takes its device from.
    pub fn node_tensor(&self) -> Result<ValueId> {
        let mut refs = node_outputs(self.node);
        self.node
            .inputs
            .iter()
            .for_each(|a| a.arg.value_refs(&mut refs));
        refs.into_iter()
            .find(|v| matches!(self.em.values[v.index()].kind, ValueKind::Tensor(_)))
            .ok_or_else(|| Error::internal(format!("node {} has no tensor", self.node.name)))
    }

    /// The meta the node recorded for its output `i` (complex or not).
    pub fn out_meta(&self, i: usize) -> Result<TensorMeta> {
        let v = *node_outputs(self.node)
            .get(i)
            .ok_or_else(|| Error::internal(format!("node {} has no output {i}", self.node.name)))?;
        Ok(self.em.meta(v)?.clone())
    }

    /// The real-pair meta of the node's complex output `i`.
    pub fn out_pair(&self, i: usize) -> Result<TensorMeta> {
        Ok(pair_meta(&self.out_meta(i)?))
    }

    /// The rank of complex `v` (its pair has one more dim).
    pub fn crank(&self, v: ValueId) -> Result<usize> {
        Ok(self.em.rank(self.pair(v)?)? - 1)
    }

    /// `dim` of complex `v` as a dim of its pair (never the pair dim).
    pub fn dim(&self, v: ValueId, dim: i64) -> Result<usize> {
        normalize_dim(dim, self.crank(v)?)
    }

    /// `dims` of complex `v` as dims of its pair.
    pub fn dims(&self, v: ValueId, dims: &[i64]) -> Result<Vec<usize>> {
        dims.iter().map(|&d| self.dim(v, d)).collect()
    }

    /// A contiguous meta of `dtype` and `sizes` (device from `like`).
    pub fn meta(&self, like: ValueId, dtype: Dtype, sizes: Vec<Sym>) -> Result<TensorMeta> {
        self.em.meta_like(like, dtype, sizes)
    }

    /// `op(args)` with one new output of `meta`.
    pub fn op(
        &mut self,
        op: &str,
        args: Vec<(&str, Argument)>,
        meta: TensorMeta,
    ) -> Result<ValueId> {
        self.em.op(op, args, meta)
    }

    /// A unary op keeping `x`'s sizes (dtype `dtype`).
    pub fn unary(&mut self, op: &str, x: ValueId, dtype: Dtype) -> Result<ValueId> {
        let meta = self.meta(x, dtype, self.em.sizes(x)?)?;
        self.op(op, vec![("self", Argument::Tensor(x))], meta)
    }

    /// `op(a, b)` on two tensors, broadcast to `sizes`.
    pub fn binary(&mut self, op: &str, a: ValueId, b: ValueId, sizes: &[Sym]) -> Result<ValueId> {
        let dtype = self.em.dtype(a)?;
        let meta = self.meta(a, dtype, sizes.to_vec())?;
        self.op(
            op,
            vec![
                ("self", Argument::Tensor(a)),
                ("other", Argument::Tensor(b)),
            ],
            meta,
        )
    }

    /// `op(x, s)` with a scalar, keeping `x`'s meta.
    pub fn scalar(&mut self, op: &str, x: ValueId, s: f64) -> Result<ValueId> {
        let m = self.em.meta(x)?.clone();
        let meta = self.meta(x, m.dtype, m.sizes)?;
        self.op(
            op,
            vec![("self", Argument::Tensor(x)), ("other", Argument::Float(s))],
            meta,
        )
    }

    /// A bool tensor: `op(x, v)` (`aten.eq.Scalar`, `aten.lt.Scalar`, ...).
    pub fn test(&mut self, op: &str, x: ValueId, v: f64) -> Result<ValueId> {
        let m = self.meta(x, Dtype::Bool, self.em.sizes(x)?)?;
        self.op(
            op,
            vec![("self", Argument::Tensor(x)), ("other", Argument::Float(v))],
            m,
        )
    }

    /// A bool tensor: `op(x)` (`aten.isinf.default`, `aten.isnan.default`).
    pub fn is(&mut self, op: &str, x: ValueId) -> Result<ValueId> {
        let m = self.meta(x, Dtype::Bool, self.em.sizes(x)?)?;
        self.op(op, vec![("self", Argument::Tensor(x))], m)
    }

    /// `op(a, b)` of two bool tensors, broadcast to `sizes`.
    pub fn logic(&mut self, op: &str, a: ValueId, b: ValueId, sizes: &[Sym]) -> Result<ValueId> {
        let m = self.meta(a, Dtype::Bool, sizes.to_vec())?;
        self.op(
            op,
            vec![
                ("self", Argument::Tensor(a)),
                ("other", Argument::Tensor(b)),
            ],
            m,
        )
    }

    /// `where(cond, t, f)` broadcast to `sizes` (`t`'s dtype).
    pub fn pick(
        &mut self,
        cond: ValueId,
        t: ValueId,
        f: ValueId,
        sizes: &[Sym],
    ) -> Result<ValueId> {
        let m = self.meta(t, self.em.dtype(t)?, sizes.to_vec())?;
        self.op(
            aten::WHERE_SELF,
            vec![
                ("condition", Argument::Tensor(cond)),
                ("self", Argument::Tensor(t)),
                ("other", Argument::Tensor(f)),
            ],
            m,
        )
    }

    /// A 0-d tensor of `dtype` holding `v`.
    pub fn constant(&mut self, like: ValueId, v: f64, dtype: Dtype) -> Result<ValueId> {
        let m = self.meta(like, dtype, vec![])?;
        self.op(
            aten::FULL,
            vec![
                ("size", Argument::SymInts(vec![])),
                ("fill_value", Argument::Float(v)),
                ("dtype", Argument::ScalarType(dtype)),
            ],
            m,
        )
    }

    /// `x` as `dtype` (itself when it is already).
    pub fn cast(&mut self, x: ValueId, dtype: Dtype) -> Result<ValueId> {
        if self.em.dtype(x)? == dtype {
            return Ok(x);
        }
        let meta = self.meta(x, dtype, self.em.sizes(x)?)?;
        self.op(
            aten::_TO_COPY,
            vec![
                ("self", Argument::Tensor(x)),
                ("dtype", Argument::ScalarType(dtype)),
            ],
            meta,
        )
    }

    /// `x` with a dim of 1 inserted at `dim` (of the result).
    pub fn unsqueeze(&mut self, x: ValueId, dim: usize) -> Result<ValueId> {
        let m = self.em.meta(x)?.clone();
        let mut sizes = m.sizes.clone();
        sizes.insert(dim, Sym::Int(1));
        let meta = self.meta(x, m.dtype, sizes)?;
        self.op(
            aten::UNSQUEEZE,
            vec![
                ("self", Argument::Tensor(x)),
                ("dim", Argument::Int(dim as i64)),
            ],
            meta,
        )
    }

    /// A real tensor with a trailing dim of 1, to broadcast against pairs.
    pub fn against_pairs(&mut self, x: ValueId, real: Dtype) -> Result<ValueId> {
        let x = self.cast(x, real)?;
        let r = self.em.rank(x)?;
        self.unsqueeze(x, r)
    }

    /// Complex `v` as a pair of `real` (its pair, cast when the precision
    /// differs), or real `v` as the pair `(v, 0)`.
    pub fn as_pair(&mut self, v: ValueId, real: Dtype) -> Result<ValueId> {
        if self.complex(v) {
            let p = self.pair(v)?;
            return self.cast(p, real);
        }
        let x = self.against_pairs(v, real)?;
        let mut sizes = self.em.sizes(x)?;
        if let Some(last) = sizes.last_mut() {
            *last = Sym::Int(2);
        }
        let meta = self.meta(x, real, sizes)?;
        self.op(
            aten::CONSTANT_PAD_ND,
            vec![
                ("self", Argument::Tensor(x)),
                ("pad", Argument::Ints(vec![0, 1])),
                ("value", Argument::Float(0.0)),
            ],
            meta,
        )
    }

    /// The real and imaginary parts of pair `p` (views of it).
    pub fn parts(&mut self, p: ValueId) -> Result<(ValueId, ValueId)> {
        let m = self.em.meta(p)?.clone();
        let n = m.sizes.len() - 1;
        let mut out = Vec::new();
        for i in [0, 1] {
            let offset = if i == 0 {
                m.storage_offset.clone()
            } else {
                super::edit::sym_add(&m.storage_offset, &m.strides[n])
            };
            let meta = TensorMeta {
                sizes: m.sizes[..n].to_vec(),
                strides: m.strides[..n].to_vec(),
                storage_offset: offset,
                ..m.clone()
            };
            out.push(self.op(
                aten::SELECT_INT,
                vec![
                    ("self", Argument::Tensor(p)),
                    ("dim", Argument::Int(n as i64)),
                    ("index", Argument::Int(i)),
                ],
                meta,
            )?);
        }
        Ok((out[0], out[1]))
    }

    /// The pair `(re, im)`, both broadcast to `meta`'s sizes (less the pair
    /// dim); the result has `meta`.
    pub fn join(&mut self, re: ValueId, im: ValueId, meta: TensorMeta) -> Result<ValueId> {
        let n = meta.sizes.len() - 1;
        let sizes = meta.sizes[..n].to_vec();
        let mut halves = Vec::new();
        for x in [re, im] {
            let x = self.cast(x, meta.dtype)?;
            let x = if self.em.sizes(x)? != sizes {
                let m = self.meta(x, meta.dtype, sizes.clone())?;
                let refs = sizes
                    .iter()
                    .map(|s| match s {
                        Sym::Int(i) => Ok(crate::ir::SymRef::Int(*i)),
                        _ => Err(Error::unsupported(
                            "complex values from parts of other shapes need static sizes",
                        )),
                    })
                    .collect::<Result<Vec<_>>>()?;
                self.op(
                    aten::EXPAND,
                    vec![
                        ("self", Argument::Tensor(x)),
                        ("size", Argument::SymInts(refs)),
                    ],
                    m,
                )?
            } else {
                x
            };
            halves.push(self.unsqueeze(x, n)?);
        }
        let meta = TensorMeta {
            strides: contiguous_sym_strides(&meta.sizes),
            storage_offset: Sym::Int(0),
            ..meta
        };
        self.op(
            aten::CAT,
            vec![
                ("tensors", Argument::Tensors(halves)),
                ("dim", Argument::Int(n as i64)),
            ],
            meta,
        )
    }

    /// The node again with its tensor arguments replaced (`f` gives the
    /// argument for a name, `None` to keep it), writing into new values of
    /// the given metas: for ops whose pair form is the op itself.
    pub fn same_op(
        &mut self,
        args: Vec<(&str, Argument)>,
        outs: Vec<TensorMeta>,
    ) -> Result<Vec<ValueId>> {
        let op = self.node.target.to_string();
        let given: Vec<(&str, Argument)> = self
            .node
            .inputs
            .iter()
            .filter(|a| !a.defaulted || args.iter().any(|(n, _)| *n == a.name))
            .map(|a| {
                let arg = args
                    .iter()
                    .find(|(n, _)| *n == a.name)
                    .map(|(_, x)| x.clone())
                    .unwrap_or_else(|| a.arg.clone());
                (a.name.as_str(), arg)
            })
            .collect();
        self.em.call(
            &op,
            given,
            outs.into_iter().map(super::edit::Out::New).collect(),
        )
    }
}

/// The scalar `(re, im)` of a number argument (`None` for a tensor).
pub(super) fn scalar_parts(a: &Argument) -> Option<(f64, f64)> {
    match a {
        Argument::Int(i) => Some((*i as f64, 0.0)),
        Argument::Float(f) => Some((*f, 0.0)),
        Argument::Bool(b) => Some((*b as i64 as f64, 0.0)),
        Argument::Complex { real, imag } => Some((*real, *imag)),
        _ => None,
    }
}

/// Whether a node reads or defines a complex value.
fn touches(values: &[crate::ir::Value], n: &Node) -> bool {
    let mut refs = Vec::new();
    n.inputs.iter().for_each(|a| a.arg.value_refs(&mut refs));
    n.outputs.iter().for_each(|a| a.value_refs(&mut refs));
    refs.iter()
        .any(|v| matches!(&values[v.index()].kind, ValueKind::Tensor(m) if m.dtype.is_complex()))
}

fn follow(subst: &HashMap<ValueId, ValueId>, mut v: ValueId) -> ValueId {
    while let Some(n) = subst.get(&v) {
        v = *n;
    }
    v
}

/// Lowers every complex value of `p` to a real pair (see the module
/// docs); returns how many nodes were rewritten, each logged in `log`.
pub fn to_real_pairs(p: &mut Program, log: &mut Vec<Lowered>) -> Result<usize> {
    let mut in_sub = None;
    p.graph.visit_nodes_in(&mut |g, n| {
        if in_sub.is_none() && !std::ptr::eq(g, &p.graph) && g.complex_dtype(n).is_some() {
            in_sub = Some(n.name.clone());
        }
    });
    if let Some(node) = in_sub {
        return Err(Error::unsupported(format!(
            "node {node}: complex values inside a control-flow subgraph are not supported"
        )));
    }
    let mut pairs: HashMap<ValueId, ValueId> = HashMap::new();
    let mut names = Names::of(&p.graph);
    let mut head = Vec::new();
    // Weights: the same bytes as real pairs. Complex user inputs: viewed.
    for pos in 0..p.graph.inputs.len() {
        let Argument::Tensor(v) = p.graph.inputs[pos] else {
            continue;
        };
        let meta = match &p.graph.values[v.index()].kind {
            ValueKind::Tensor(m) if m.dtype.is_complex() => m.clone(),
            _ => continue,
        };
        match &p.input_kinds[pos] {
            InputKind::UserInput => {
                let mut em = Emitter::new(&mut p.graph.values, &mut names, NodeMeta::default());
                let real = pair_meta(&meta);
                let r = em.op(
                    aten::VIEW_AS_REAL,
                    vec![("self", Argument::Tensor(v))],
                    real,
                )?;
                pairs.insert(v, r);
                head.extend(em.nodes);
            }
            kind => {
                let Some(name) = kind.weight_name().map(str::to_string) else {
                    return Err(Error::unsupported(format!(
                        "graph input {pos} is complex and neither a user input nor a weight"
                    )));
                };
                for w in p.weights.iter_mut().filter(|w| w.name == name) {
                    if w.meta.dtype.is_complex() {
                        w.meta = pair_meta(&w.meta);
                    }
                }
                // the input is now the pair (a new value, with the name);
                // the complex value it was is left for the nodes that read
                // it until they are rewritten
                let old_name = p.graph.values[v.index()].name.clone();
                p.graph.values[v.index()].name = names.fresh(&format!("{old_name}_complex"));
                p.graph.values.push(crate::ir::Value {
                    name: old_name,
                    kind: ValueKind::Tensor(pair_meta(&meta)),
                });
                let pair = ValueId(p.graph.values.len() as u32 - 1);
                p.graph.inputs[pos] = Argument::Tensor(pair);
                pairs.insert(v, pair);
            }
        }
    }
    for (kind, out) in p.output_kinds.iter().zip(&p.graph.outputs) {
        let mut refs = Vec::new();
        out.value_refs(&mut refs);
        if *kind != OutputKind::UserOutput && refs.iter().any(|v| is_complex_value(&p.graph, *v)) {
            return Err(Error::unsupported(format!(
                "a complex {kind:?} output is not supported (only user outputs may be complex)"
            )));
        }
    }
    let g = &mut p.graph;
    let mut queue: VecDeque<Node> = std::mem::take(&mut g.nodes).into();
    let mut out: Vec<Node> = head;
    let mut subst: HashMap<ValueId, ValueId> = HashMap::new();
    let mut rewritten = 0usize;
    let budget = 64 * (queue.len() + 16);
    while let Some(mut node) = queue.pop_front() {
        node.substitute_inputs(&|v| follow(&subst, v));
        if !touches(&g.values, &node) {
            out.push(node);
            continue;
        }
        rewritten += 1;
        if rewritten > budget {
            return Err(Error::internal(format!(
                "the complex lowering does not terminate (at node {}, {})",
                node.name, node.target
            )));
        }
        let op = node.target.to_string();
        let mut em = Emitter::new(&mut g.values, &mut names, node.meta.clone());
        let replaced = if let Some(h) = handlers().get(op.as_str()) {
            super::apply(&mut em, &node, |em, a| {
                h(
                    &mut ComplexNode {
                        em,
                        pairs: &pairs,
                        node: &node,
                    },
                    a,
                )
            })?
        } else if let Some(rule) = super::rules::rule_for(&op) {
            super::apply(&mut em, &node, |em, a| (rule.apply)(em, a))?
        } else {
            let mut refs = Vec::new();
            node.inputs.iter().for_each(|a| a.arg.value_refs(&mut refs));
            node.outputs.iter().for_each(|a| a.value_refs(&mut refs));
            let d = refs
                .iter()
                .find_map(|v| match &em.values[v.index()].kind {
                    ValueKind::Tensor(m) if m.dtype.is_complex() => Some(m.dtype.short_name()),
                    _ => None,
                })
                .unwrap_or("complex");
            return Err(Error::unsupported(format!(
                "node {} ({op}): complex values ({d}) through this op are not supported: \
                 it has no real-pair form (complex values run as real pairs; see docs/coverage.md)",
                node.name
            )));
        };
        let handled = handlers().contains_key(op.as_str());
        for (old, new) in node_outputs(&node).into_iter().zip(&replaced) {
            let was_complex = matches!(
                &em.values[old.index()].kind,
                ValueKind::Tensor(m) if m.dtype.is_complex()
            );
            if handled && was_complex {
                pairs.insert(old, *new);
            } else if old != *new {
                subst.insert(old, *new);
            }
        }
        log.push(Lowered {
            node: node.name.clone(),
            op,
            into: em.nodes.iter().map(|n| n.target.to_string()).collect(),
        });
        let emitted = std::mem::take(&mut em.nodes);
        for n in emitted.into_iter().rev() {
            queue.push_front(n);
        }
    }
    // Complex user outputs: the pairs viewed back.
    let mut tail = Vec::new();
    let mut renamed: Vec<ValueId> = Vec::new();
    let mut outputs = std::mem::take(&mut g.outputs);
    for o in &mut outputs {
        let Argument::Tensor(v) = o else {
            let mut refs = Vec::new();
            o.value_refs(&mut refs);
            if refs.iter().any(|v| is_complex_value(g, *v)) {
                return Err(Error::unsupported(
                    "a list of complex outputs is not supported",
                ));
            }
            continue;
        };
        let v0 = follow(&subst, *v);
        if !is_complex_value(g, v0) {
            // a real output now held by another value (`view_as_real` of
            // a pair) keeps its name, unless that value is an input or
            // another output's
            let input = g
                .inputs
                .iter()
                .any(|a| matches!(a, Argument::Tensor(i) if *i == v0));
            if v0 != *v && !input && !renamed.contains(&v0) {
                let name = g.values[v.index()].name.clone();
                g.values[v.index()].name = names.fresh(&format!("{name}_complex"));
                g.values[v0.index()].name = name;
                renamed.push(v0);
            }
            *v = v0;
            continue;
        }
        *v = v0;
        let pair = pairs.get(&v0).copied().ok_or_else(|| {
            Error::internal(format!(
                "output {} is complex and has no real pair",
                g.values[v0.index()].name
            ))
        })?;
        let m = match &g.values[v0.index()].kind {
            ValueKind::Tensor(m) => m.clone(),
            _ => continue,
        };
        let meta = TensorMeta {
            strides: contiguous_sym_strides(&m.sizes),
            storage_offset: Sym::Int(0),
            ..m
        };
        let mut em = Emitter::new(&mut g.values, &mut names, NodeMeta::default());
        let view = em.op(
            aten::VIEW_AS_COMPLEX,
            vec![("self", Argument::Tensor(pair))],
            meta,
        )?;
        let mut nodes = std::mem::take(&mut em.nodes);
        // the output keeps its name (the complex value it was is dead)
        let name = g.values[v0.index()].name.clone();
        let taken = out.iter().chain(&tail).any(|n: &Node| n.name == name);
        if !taken && !nodes.iter().any(|n| n.name == name) {
            g.values[v0.index()].name = names.fresh(&format!("{name}_complex"));
            g.values[view.index()].name = name.clone();
            if let Some(n) = nodes.last_mut() {
                n.name = name;
            }
        }
        *v = view;
        tail.extend(nodes);
    }
    g.outputs = outputs;
    out.extend(tail);
    g.nodes = out;
    Ok(rewritten)
}
