//! Functionalisation: the TRAINING dialect of `torch.export.export` keeps
//! in-place ops (`add_`, `relu_`, `copy_` into a buffer); this rewrites
//! them into their functional forms, as torch's ATEN dialect does:
//!
//! - `y = x.op_(...)` becomes `y = op(x, ...)`, and later uses of `x` use `y`;
//! - an in-place op on a view writes back into the view's base with the
//!   matching scatter (`slice_scatter`, `select_scatter`, an inverse view
//!   or permute), and views of that base made earlier are re-derived;
//! - a mutated buffer or user input becomes an explicit mutation output
//!   (`BUFFER_MUTATION`, `USER_INPUT_MUTATION`), first among the outputs.
//!
//! Which ops mutate and which alias is read from their schemas
//! (`Tensor(a!)`, `-> Tensor(a)`), not listed here.

use crate::ir::op::aten;
use std::collections::HashMap;

use super::args::{node_outputs, NodeArgs};
use super::edit::{named_args, sym_ints_arg, Emitter, Names, Out};
use crate::ir::substitute_values;
use crate::ir::{Argument, Graph, InputKind, Node, OutputKind, Program, Target, ValueId};
use crate::schema;
use crate::{Error, Result};

struct State {
    /// Original value -> the value that holds its current contents.
    current: HashMap<ValueId, ValueId>,
    /// View value -> (the value it views, the node that made it).
    view_of: HashMap<ValueId, (ValueId, Node)>,
    /// Base value -> views made of it, in order.
    views: HashMap<ValueId, Vec<ValueId>>,
    /// Views a write cannot go back through, with why: a reshape of a
    /// non-contiguous tensor (torch makes a view or a copy by the strides
    /// it has at run time), a piece of a multi-output view not written
    /// back here. A write through one is refused, never left unseen.
    ambiguous: HashMap<ValueId, String>,
    rewritten: usize,
}

impl State {
    fn resolve(&self, v: ValueId) -> ValueId {
        self.current.get(&v).copied().unwrap_or(v)
    }

    /// `old` (whatever currently stands for it) now holds `new`.
    fn set(&mut self, old: ValueId, new: ValueId) {
        let latest = self.resolve(old);
        for v in self.current.values_mut() {
            if *v == latest {
                *v = new;
            }
        }
        self.current.insert(old, new);
        self.current.insert(latest, new);
    }
}

/// Functionalises the program; returns how many in-place ops it rewrote.
pub fn functionalize(p: &mut Program) -> Result<usize> {
    let mut st = State {
        current: HashMap::new(),
        view_of: HashMap::new(),
        views: HashMap::new(),
        ambiguous: HashMap::new(),
        rewritten: 0,
    };
    functionalize_graph(&mut p.graph, &mut st)?;
    if st.rewritten == 0 {
        return Ok(0);
    }
    // Mutated inputs become mutation outputs (first, as torch orders them).
    let mut extra = Vec::new();
    for (i, input) in p.graph.inputs.iter().enumerate() {
        let Argument::Tensor(v) = input else { continue };
        let latest = st.resolve(*v);
        if latest == *v {
            continue;
        }
        let kind = match &p.input_kinds[i] {
            // (a tensor attribute that is no buffer, which export lifts as
            // a constant, is state all the same when the model updates it:
            // Hugging Face's static cache keeps its lengths so)
            InputKind::Buffer(n)
            | InputKind::NonPersistentBuffer(n)
            | InputKind::TensorConstant(n) => OutputKind::BufferMutation(n.clone()),
            InputKind::Parameter(n) => OutputKind::ParameterMutation(n.clone()),
            InputKind::UserInput => {
                OutputKind::UserInputMutation(p.graph.values[v.index()].name.clone())
            }
            other => {
                return Err(Error::unsupported(format!(
                    "input {} ({other:?}) is mutated in place",
                    p.graph.values[v.index()].name
                )))
            }
        };
        if !p.output_kinds.contains(&kind) {
            extra.push((Argument::Tensor(latest), kind));
        }
    }
    let resolve = |v: ValueId| st.resolve(v);
    substitute_values(&mut p.graph.outputs, &resolve);
    for (arg, kind) in extra.into_iter().rev() {
        p.graph.outputs.insert(0, arg);
        p.output_kinds.insert(0, kind);
    }
    Ok(st.rewritten)
}

fn functionalize_graph(g: &mut Graph, st: &mut State) -> Result<()> {
    let mut names = Names::of(g);
    let old = std::mem::take(&mut g.nodes);
    let mut out = Vec::with_capacity(old.len());
    for mut node in old {
        let resolve = |v: ValueId| st.resolve(v);
        node.substitute_inputs(&resolve);
        for input in &mut node.inputs {
            if let Argument::Graph(sub) = &mut input.arg {
                let mut inner = State {
                    current: HashMap::new(),
                    view_of: HashMap::new(),
                    views: HashMap::new(),
                    ambiguous: HashMap::new(),
                    rewritten: 0,
                };
                functionalize_graph(&mut sub.graph, &mut inner)?;
                let r = |v: ValueId| inner.resolve(v);
                substitute_values(&mut sub.graph.outputs, &r);
                st.rewritten += inner.rewritten;
            }
        }
        if updates_running_stats(&node) {
            let mut em = Emitter::new(&mut g.values, &mut names, node.meta.clone());
            functional_batch_norm(&mut em, st, &node)?;
            out.extend(em.nodes);
            st.rewritten += 1;
            continue;
        }
        if !schema::mutates(&node.target) {
            register_views(st, &node, g)?;
            out.push(node);
            continue;
        }
        let functional = functional_target(&node)?;
        // its arguments by the functional op's names (`dropout_`'s `self`
        // is `dropout`'s `input`), by position in the two schemas
        let mut node = node;
        if let (Some(from), Some(to)) = (
            schema::lookup(
                &node.target.namespace,
                &node.target.name,
                &node.target.overload,
            ),
            schema::lookup(
                &functional.namespace,
                &functional.name,
                &functional.overload,
            ),
        ) {
            for a in node.inputs.iter_mut() {
                if let Some(i) = from.args.iter().position(|s| s.name == a.name) {
                    if let Some(t) = to.args.get(i) {
                        a.name = t.name.clone();
                    }
                }
            }
        }
        let self_arg = match node.inputs.first().map(|a| &a.arg) {
            Some(Argument::Tensor(v)) => *v,
            _ => {
                return Err(Error::unsupported(format!(
                    "node {}: {} mutates an argument other than its first",
                    node.name, node.target
                )))
            }
        };
        let o = match node.outputs.first() {
            Some(Argument::Tensor(v)) => *v,
            _ => {
                // An in-place op whose result the graph does not name: give it one.
                let meta = match &g.values[self_arg.index()].kind {
                    crate::ir::ValueKind::Tensor(m) => m.clone(),
                    _ => {
                        return Err(Error::bad_input(format!(
                            "node {}: mutates a non-tensor",
                            node.name
                        )))
                    }
                };
                let name = names.fresh(&functional.name);
                g.values.push(crate::ir::Value {
                    name,
                    kind: crate::ir::ValueKind::Tensor(meta),
                });
                ValueId(g.values.len() as u32 - 1)
            }
        };
        let args = super::edit::args_for(&node, &functional)?;
        let inputs = named_args(&functional, super::edit::borrow_args(&args))?;
        let meta = node.meta.clone();
        out.push(Node {
            name: node.name.clone(),
            target: functional,
            inputs,
            outputs: vec![Argument::Tensor(o)],
            meta: node.meta.clone(),
            is_hop_single_tensor_return: None,
        });
        st.rewritten += 1;
        // Later uses of the mutated tensor (and of the op's result) see `o`.
        let mut em = Emitter::new(&mut g.values, &mut names, meta);
        write_back(&mut em, st, self_arg, o)?;
        out.extend(em.nodes);
    }
    g.nodes = out;
    Ok(())
}

/// Records the views `node` makes of its first argument: a view op
/// (`-> Tensor(a)`), `contiguous` of a tensor that already is (torch
/// returns the tensor itself; of any other it returns a copy, which is no
/// view), and each piece of `split` / `split_with_sizes` / `unbind` (as the
/// `slice` / `select` it is, so a write into a piece goes back).
fn register_views(st: &mut State, node: &Node, g: &Graph) -> Result<()> {
    let (Some(Argument::Tensor(base)), Some(first)) =
        (node.inputs.first().map(|a| &a.arg), node.outputs.first())
    else {
        return Ok(());
    };
    let base = *base;
    let add = |st: &mut State, o: ValueId, vnode: Node| {
        st.view_of.insert(o, (base, vnode));
        st.views.entry(base).or_default().push(o);
    };
    let op = node.target.to_string();
    let base_meta = match &g.values[base.index()].kind {
        crate::ir::ValueKind::Tensor(m) => Some(m),
        _ => None,
    };
    match (op.as_str(), first) {
        (aten::CONTIGUOUS, Argument::Tensor(o))
            if base_meta.is_some_and(super::edit::is_contiguous) =>
        {
            add(st, *o, node.clone());
        }
        (aten::CONTIGUOUS, Argument::Tensor(_)) => {}
        (
            aten::SPLIT_TENSOR
            | aten::SPLIT_WITH_SIZES
            | aten::UNBIND_INT
            | aten::CHUNK
            | aten::TENSOR_SPLIT_SECTIONS
            | aten::TENSOR_SPLIT_INDICES,
            Argument::Tensors(outs),
        ) => {
            let a = NodeArgs(node);
            let Some(m) = base_meta else { return Ok(()) };
            let rank = m.sizes.len() as i64;
            let d = a.int("dim").unwrap_or(0);
            let d = if d < 0 { d + rank } else { d };
            let Some(n) = usize::try_from(d)
                .ok()
                .and_then(|d| m.sizes.get(d)?.as_int())
            else {
                // a split over a symbolic dim: a write into a piece is refused
                for o in outs {
                    st.ambiguous.insert(
                        *o,
                        format!("a piece of {op} over a symbolic dim, which is not written back"),
                    );
                }
                return Ok(());
            };
            // each piece's (start, length) along the dim, as torch cuts it
            let steps = |step: i64| -> Vec<(i64, i64)> {
                let step = step.max(1);
                (0..n)
                    .step_by(step as usize)
                    .map(|s| (s, step.min(n - s)))
                    .collect()
            };
            let cuts = |bounds: Vec<i64>| -> Vec<(i64, i64)> {
                let clamp = |b: i64| b.clamp(0, n);
                let mut ends = bounds.clone();
                ends.push(n);
                std::iter::once(0)
                    .chain(bounds)
                    .zip(ends)
                    .map(|(a, b)| (clamp(a), (clamp(b) - clamp(a)).max(0)))
                    .collect()
            };
            let pieces: Vec<(i64, i64)> = match op.as_str() {
                aten::SPLIT_TENSOR => steps(a.int("split_size")?),
                aten::SPLIT_WITH_SIZES => {
                    let mut start = 0;
                    a.ints("split_sizes")?
                        .into_iter()
                        .map(|len| {
                            start += len;
                            (start - len, len)
                        })
                        .collect()
                }
                // ceil(n / chunks) each, the last what is left
                aten::CHUNK => {
                    let chunks = a.int("chunks")?.max(1);
                    steps((n + chunks - 1) / chunks)
                }
                // the first n % sections one longer
                aten::TENSOR_SPLIT_SECTIONS => {
                    let k = a.int("sections")?.max(1);
                    let (q, r) = (n / k, n % k);
                    cuts((1..k).map(|i| i * q + i.min(r)).collect())
                }
                aten::TENSOR_SPLIT_INDICES => cuts(a.ints("indices")?),
                _ => (0..n).map(|i| (i, 1)).collect(),
            };
            for (i, (o, (start, len))) in outs.iter().zip(pieces).enumerate() {
                let (target, args) = if op == aten::UNBIND_INT {
                    (
                        Target::op("aten", "select", "int"),
                        vec![
                            ("self", Argument::Tensor(base)),
                            ("dim", Argument::Int(d)),
                            ("index", Argument::SymInt(crate::ir::SymRef::Int(i as i64))),
                        ],
                    )
                } else {
                    (
                        Target::op("aten", "slice", "Tensor"),
                        vec![
                            ("self", Argument::Tensor(base)),
                            ("dim", Argument::Int(d)),
                            ("start", Argument::SymInt(crate::ir::SymRef::Int(start))),
                            ("end", Argument::SymInt(crate::ir::SymRef::Int(start + len))),
                            ("step", Argument::SymInt(crate::ir::SymRef::Int(1))),
                        ],
                    )
                };
                let piece = Node {
                    name: format!("{}[{i}]", node.name),
                    inputs: named_args(&target, args)?,
                    target,
                    outputs: vec![Argument::Tensor(*o)],
                    meta: node.meta.clone(),
                    is_hop_single_tensor_return: None,
                };
                add(st, *o, piece);
            }
        }
        // `to` returns its input itself when nothing changes (a view),
        // else a copy
        (t, Argument::Tensor(o)) if t.starts_with("aten.to.") => {
            let out_dtype = match &g.values[o.index()].kind {
                crate::ir::ValueKind::Tensor(m) => Some(m.dtype),
                _ => None,
            };
            if base_meta.map(|m| m.dtype) == out_dtype {
                add(st, *o, node.clone());
            }
        }
        (aten::RESHAPE | aten::FLATTEN_USING_INTS, Argument::Tensor(o))
            if !base_meta.is_some_and(super::edit::is_contiguous) =>
        {
            st.ambiguous.insert(
                *o,
                "a reshape of a non-contiguous tensor (torch makes a view or a copy by its strides; make it explicit with .contiguous() or .clone())".into(),
            );
            add(st, *o, node.clone());
        }
        (_, Argument::Tensor(o)) if schema::is_view(&node.target) => add(st, *o, node.clone()),
        // any other op whose pieces alias its input (`tensor_split`,
        // `chunk`, `hsplit`...): a write into one is refused
        (_, Argument::Tensors(outs)) if returns_views(&node.target) => {
            for o in outs {
                st.ambiguous
                    .insert(*o, format!("a piece of {op}, which is not written back"));
            }
        }
        _ => {}
    }
    Ok(())
}

/// Whether an op's list result aliases its first argument (`Tensor(a)[]`).
fn returns_views(target: &Target) -> bool {
    schema::lookup(&target.namespace, &target.name, &target.overload)
        .is_some_and(|s| s.returns.starts_with("Tensor(a)[]"))
}

/// A batch norm in training mode with running statistics: torch updates
/// them in place, though `batch_norm`'s schema does not say so.
pub fn updates_running_stats(node: &Node) -> bool {
    let op = node.target.to_string();
    if !matches!(
        op.as_str(),
        aten::BATCH_NORM | aten::_NATIVE_BATCH_NORM_LEGIT | aten::NATIVE_BATCH_NORM
    ) {
        return false;
    }
    let a = NodeArgs(node);
    matches!(a.arg("training"), Argument::Bool(true))
        && matches!(a.opt_tensor("running_mean"), Ok(Some(_)))
        && matches!(a.opt_tensor("running_var"), Ok(Some(_)))
}

/// A training batch norm as torch's functionalisation writes it:
/// `_native_batch_norm_legit_functional`, whose last two outputs are the
/// updated running statistics, written back to the ones it was given.
fn functional_batch_norm(em: &mut Emitter, st: &mut State, node: &Node) -> Result<()> {
    let a = NodeArgs(node);
    let (x, rm, rv) = (
        a.tensor("input")?,
        a.tensor("running_mean")?,
        a.tensor("running_var")?,
    );
    let xm = em.meta(x)?.clone();
    let c = xm.sizes.get(1).cloned().ok_or_else(|| {
        Error::bad_input(format!(
            "node {}: batch norm of a tensor with fewer than 2 dims",
            node.name
        ))
    })?;
    // save_mean and save_invstd: float32 for a half input, as torch's
    // CPU kernel keeps them
    let stats = match xm.dtype {
        crate::ir::Dtype::Float16 | crate::ir::Dtype::BFloat16 => crate::ir::Dtype::Float32,
        d => d,
    };
    let given: Vec<Option<ValueId>> = (0..3)
        .map(|i| match node.outputs.get(i) {
            Some(Argument::Tensor(v)) => Some(*v),
            _ => None,
        })
        .collect();
    let out = |i: usize, m: crate::ir::TensorMeta| match given[i] {
        Some(v) => Out::Into(v),
        None => Out::New(m),
    };
    let stat_meta = em.meta_like(x, stats, vec![c])?;
    let outs = vec![
        out(0, xm.clone()),
        out(1, stat_meta.clone()),
        out(2, stat_meta),
        Out::New(em.meta(rm)?.clone()),
        Out::New(em.meta(rv)?.clone()),
    ];
    let ids = em.call(
        aten::_NATIVE_BATCH_NORM_LEGIT_FUNCTIONAL,
        vec![
            ("input", Argument::Tensor(x)),
            ("weight", a.arg("weight")),
            ("bias", a.arg("bias")),
            ("running_mean", Argument::Tensor(rm)),
            ("running_var", Argument::Tensor(rv)),
            ("training", Argument::Bool(true)),
            ("momentum", Argument::Float(a.float("momentum")?)),
            ("eps", Argument::Float(a.float("eps")?)),
        ],
        outs,
    )?;
    write_back(em, st, rm, ids[3])?;
    write_back(em, st, rv, ids[4])
}

/// `aten.add_.Tensor` -> `aten.add.Tensor`, when torch has it
/// ([`schema::functional_of`]).
fn functional_target(node: &Node) -> Result<Target> {
    let t = &node.target;
    if let Some(f) = schema::functional_of(&t.to_string()) {
        let mut parts = f.splitn(3, '.');
        if let (Some(ns), Some(name), Some(overload)) = (parts.next(), parts.next(), parts.next()) {
            return Ok(Target::op(ns, name, overload));
        }
    }
    Err(Error::unsupported(format!(
        "node {}: {} mutates its input and has no functional form to rewrite it to",
        node.name, t
    )))
}

/// Value `v` now holds `new`: record it, write it back into the base `v`
/// views (recursively), and re-derive other views of every updated base.
fn write_back(em: &mut Emitter, st: &mut State, v: ValueId, new: ValueId) -> Result<()> {
    let ambiguous = |em: &Emitter, st: &State, v: ValueId| {
        Error::unsupported(format!(
            "an in-place op writes through {}, {}",
            em.values[v.index()].name,
            st.ambiguous.get(&v).map_or("", String::as_str)
        ))
    };
    if st.ambiguous.contains_key(&v) {
        return Err(ambiguous(em, st, v));
    }
    st.set(v, new);
    if let Some((base, vnode)) = st.view_of.get(&v).cloned() {
        if st.ambiguous.contains_key(&base) {
            return Err(ambiguous(em, st, base));
        }
        let base_now = st.resolve(base);
        let new_base = scatter_back(em, &vnode, base_now, new)?;
        st.set(base, new_base);
        if let Some((grand, gnode)) = st.view_of.get(&base).cloned() {
            // The base was itself a view: continue up the chain.
            let g_now = st.resolve(grand);
            let g_new = scatter_back(em, &gnode, g_now, new_base)?;
            write_back(em, st, grand, g_new)?;
            return Ok(());
        }
        rederive(em, st, base, Some(v))?;
        return Ok(());
    }
    rederive(em, st, v, None)
}

/// Re-emits the views of `base` (except `skip`) on its current value.
fn rederive(em: &mut Emitter, st: &mut State, base: ValueId, skip: Option<ValueId>) -> Result<()> {
    let children = st.views.get(&base).cloned().unwrap_or_default();
    let base_now = st.resolve(base);
    for child in children {
        if Some(child) == skip {
            continue;
        }
        let Some((_, vnode)) = st.view_of.get(&child).cloned() else {
            continue;
        };
        let meta = em.meta(child)?.clone();
        let mut args: Vec<(&str, Argument)> = vnode
            .inputs
            .iter()
            .map(|a| (a.name.as_str(), a.arg.clone()))
            .collect();
        args[0].1 = Argument::Tensor(base_now);
        let op = vnode.target.to_string();
        let fresh = em.op(&op, args, meta)?;
        st.set(child, fresh);
        st.view_of.insert(fresh, (base, vnode.clone()));
        rederive(em, st, child, None)?;
    }
    Ok(())
}

/// The base `base` with the view `vnode` of it replaced by `src`.
fn scatter_back(em: &mut Emitter, vnode: &Node, base: ValueId, src: ValueId) -> Result<ValueId> {
    let a = NodeArgs(vnode);
    let meta = em.meta(base)?.clone();
    let op = vnode.target.to_string();
    match op.as_str() {
        aten::SLICE_TENSOR => em.op(
            aten::SLICE_SCATTER,
            vec![
                ("self", Argument::Tensor(base)),
                ("src", Argument::Tensor(src)),
                ("dim", a.arg("dim")),
                ("start", a.arg("start")),
                ("end", a.arg("end")),
                ("step", a.arg("step")),
            ],
            meta,
        ),
        aten::SELECT_INT => em.op(
            aten::SELECT_SCATTER,
            vec![
                ("self", Argument::Tensor(base)),
                ("src", Argument::Tensor(src)),
                ("dim", a.arg("dim")),
                ("index", a.arg("index")),
            ],
            meta,
        ),
        aten::DIAGONAL => em.op(
            aten::DIAGONAL_SCATTER,
            vec![
                ("self", Argument::Tensor(base)),
                ("src", Argument::Tensor(src)),
                ("offset", a.arg("offset")),
                ("dim1", a.arg("dim1")),
                ("dim2", a.arg("dim2")),
            ],
            meta,
        ),
        aten::ALIAS | aten::DETACH | aten::CONTIGUOUS | aten::LIFT_FRESH => Ok(src),
        // (registered only where it returned its input: same dtype)
        o if o.starts_with("aten.to.") => Ok(src),
        aten::NARROW => {
            let (start, len) = match (a.arg("start"), a.arg("length")) {
                (Argument::Int(s), Argument::Int(l)) => (s, l),
                _ => {
                    return Err(Error::unsupported(format!(
                        "node {}: an in-place op writes through a narrow with a symbolic start or length",
                        vnode.name
                    )))
                }
            };
            let dim = a.int("dim")?;
            let rank = meta.sizes.len() as i64;
            let d = if dim < 0 { dim + rank } else { dim };
            let n = usize::try_from(d)
                .ok()
                .and_then(|d| meta.sizes.get(d)?.as_int())
                .ok_or_else(|| {
                    Error::unsupported(format!(
                        "node {}: an in-place op writes through a narrow of a symbolic dim",
                        vnode.name
                    ))
                })?;
            let start = if start < 0 { start + n } else { start };
            em.op(
                aten::SLICE_SCATTER,
                vec![
                    ("self", Argument::Tensor(base)),
                    ("src", Argument::Tensor(src)),
                    ("dim", Argument::Int(d)),
                    ("start", Argument::SymInt(crate::ir::SymRef::Int(start))),
                    ("end", Argument::SymInt(crate::ir::SymRef::Int(start + len))),
                    ("step", Argument::SymInt(crate::ir::SymRef::Int(1))),
                ],
                meta,
            )
        }
        aten::PERMUTE => {
            let dims = a.ints("dims")?;
            let r = dims.len() as i64;
            let mut inv = vec![0i64; dims.len()];
            for (i, d) in dims.iter().enumerate() {
                inv[((d % r + r) % r) as usize] = i as i64;
            }
            em.op(
                aten::PERMUTE,
                vec![
                    ("self", Argument::Tensor(src)),
                    ("dims", Argument::Ints(inv)),
                ],
                meta,
            )
        }
        aten::TRANSPOSE_INT => em.op(
            aten::TRANSPOSE_INT,
            vec![
                ("self", Argument::Tensor(src)),
                ("dim0", a.arg("dim0")),
                ("dim1", a.arg("dim1")),
            ],
            meta,
        ),
        aten::T => em.op(aten::T, vec![("self", Argument::Tensor(src))], meta),
        aten::VIEW
        | aten::RESHAPE
        | aten::_UNSAFE_VIEW
        | aten::UNSQUEEZE
        | aten::SQUEEZE_DIM
        | aten::SQUEEZE_DIMS
        | aten::SQUEEZE
        | aten::FLATTEN_USING_INTS
        | aten::UNFLATTEN_INT
        | aten::VIEW_AS => {
            let sizes = em.size_refs(base)?;
            em.op(
                aten::VIEW,
                vec![
                    ("self", Argument::Tensor(src)),
                    ("size", sym_ints_arg(&sizes)),
                ],
                meta,
            )
        }
        _ => Err(Error::unsupported(format!(
            "node {}: an in-place op writes through the view {op}, which cannot be written back",
            vnode.name
        ))),
    }
}

/// Every value a node defines (re-exported for passes).
pub fn defined(node: &Node) -> Vec<ValueId> {
    node_outputs(node)
}
