//! Emitting nodes into a graph: what every rewrite (decomposition,
//! functionalisation, pass) uses to add ops with their metadata.
//!
//! An [`Emitter`] appends nodes to a list, not to the graph, so a rewrite
//! can be built up and then spliced in place of the node it replaces. New
//! nodes take the provenance (stack trace, module stack) of the node they
//! replace, arguments are put in schema order with the schema's defaults
//! (as the importer does), and names are unique in the graph.

use std::collections::{HashMap, HashSet};

use crate::ir::{
    contiguous_strides, ArgKind, Argument, Dtype, Graph, Hint, NamedArg, Node, NodeMeta, Sym,
    SymExpr, SymRef, Target, TargetKind, TensorMeta, Value, ValueId, ValueKind,
};
use crate::schema;
use crate::{Error, Result};

/// Names in use in one graph scope, for fresh node and value names.
#[derive(Default)]
pub struct Names {
    used: HashSet<String>,
    next: HashMap<String, usize>,
}

impl Names {
    pub fn of(graph: &Graph) -> Names {
        let mut used: HashSet<String> = graph.values.iter().map(|v| v.name.clone()).collect();
        used.extend(graph.nodes.iter().map(|n| n.name.clone()));
        Names {
            used,
            next: HashMap::new(),
        }
    }

    /// `base`, or `base_1`, `base_2`, ... (torch's naming), unused so far.
    pub fn fresh(&mut self, base: &str) -> String {
        if self.used.insert(base.to_string()) {
            return base.to_string();
        }
        let n = self.next.entry(base.to_string()).or_insert(0);
        loop {
            *n += 1;
            let name = format!("{base}_{n}");
            if self.used.insert(name.clone()) {
                return name;
            }
        }
    }
}

/// Adds nodes (to `nodes`) and values (to the graph's arena) on behalf of
/// one node being rewritten.
pub struct Emitter<'g> {
    pub values: &'g mut Vec<Value>,
    pub names: &'g mut Names,
    pub nodes: Vec<Node>,
    /// Provenance given to every emitted node.
    pub meta: NodeMeta,
    /// `sym_size` values already emitted, by (tensor, dim).
    sizes: HashMap<(ValueId, usize), SymRef>,
}

/// What one emitted output is: a new tensor with this meta, a new symbolic
/// int, or an existing value (the rewritten node's own output).
pub enum Out {
    New(TensorMeta),
    Into(ValueId),
}

impl<'g> Emitter<'g> {
    pub fn new(values: &'g mut Vec<Value>, names: &'g mut Names, meta: NodeMeta) -> Emitter<'g> {
        Emitter {
            values,
            names,
            nodes: Vec::new(),
            meta,
            sizes: HashMap::new(),
        }
    }

    pub fn meta(&self, v: ValueId) -> Result<&TensorMeta> {
        match &self.values[v.index()].kind {
            ValueKind::Tensor(m) => Ok(m),
            _ => Err(Error::internal(format!(
                "value {} is not a tensor",
                self.values[v.index()].name
            ))),
        }
    }

    pub fn dtype(&self, v: ValueId) -> Result<Dtype> {
        Ok(self.meta(v)?.dtype)
    }

    pub fn sizes(&self, v: ValueId) -> Result<Vec<Sym>> {
        Ok(self.meta(v)?.sizes.clone())
    }

    pub fn rank(&self, v: ValueId) -> Result<usize> {
        Ok(self.meta(v)?.sizes.len())
    }

    /// One static size (dim `d`), or an error naming what needs it; the
    /// other dims may be symbolic.
    pub fn static_dim(&self, v: ValueId, d: usize, why: &str) -> Result<i64> {
        let m = self.meta(v)?;
        match m.sizes.get(d) {
            Some(Sym::Int(n)) => Ok(*n),
            Some(s) => Err(Error::unsupported(format!(
                "{why} needs a static size, but dim {d} of {} is {s}",
                self.values[v.index()].name
            ))),
            None => Err(Error::internal(format!(
                "dim {d} out of range for {}",
                self.values[v.index()].name
            ))),
        }
    }

    /// Static sizes, or an error naming what needs them.
    pub fn static_sizes(&self, v: ValueId, why: &str) -> Result<Vec<i64>> {
        self.meta(v)?.static_sizes().ok_or_else(|| {
            Error::unsupported(format!(
                "{why} needs static sizes, but {} has symbolic ones",
                self.values[v.index()].name
            ))
        })
    }

    pub fn new_value(&mut self, base: &str, kind: ValueKind) -> ValueId {
        let name = self.names.fresh(base);
        self.values.push(Value { name, kind });
        ValueId(self.values.len() as u32 - 1)
    }

    /// Emits `op` (`aten.addmm.default`) with these arguments by name;
    /// arguments the schema has and `args` lacks get their defaults.
    pub fn call(
        &mut self,
        op: &str,
        args: Vec<(&str, Argument)>,
        outs: Vec<Out>,
    ) -> Result<Vec<ValueId>> {
        let target = Target::parse(&format!("torch.ops.{op}"))
            .ok_or_else(|| Error::internal(format!("bad op name {op}")))?;
        let inputs = named_args(&target, args)?;
        let base = target.name.trim_start_matches('_').to_string();
        let mut ids = Vec::new();
        for out in outs {
            ids.push(match out {
                Out::New(m) => self.new_value(&base, ValueKind::Tensor(m)),
                Out::Into(v) => v,
            });
        }
        let outputs: Vec<Argument> = if schema_returns_list(&target) {
            vec![Argument::Tensors(ids.clone())]
        } else {
            ids.iter().map(|v| Argument::Tensor(*v)).collect()
        };
        let name = match ids.first() {
            Some(v) if !self.node_named(&self.values[v.index()].name) => {
                self.values[v.index()].name.clone()
            }
            _ => self.names.fresh(&base),
        };
        self.nodes.push(Node {
            name,
            target,
            inputs,
            outputs,
            meta: self.meta.clone(),
            is_hop_single_tensor_return: None,
        });
        Ok(ids)
    }

    fn node_named(&self, name: &str) -> bool {
        self.nodes.iter().any(|n| n.name == name)
    }

    /// One op with one new tensor output.
    pub fn op(
        &mut self,
        op: &str,
        args: Vec<(&str, Argument)>,
        meta: TensorMeta,
    ) -> Result<ValueId> {
        Ok(self.call(op, args, vec![Out::New(meta)])?[0])
    }

    /// One op writing into an existing value (the replaced node's output).
    pub fn op_into(
        &mut self,
        op: &str,
        args: Vec<(&str, Argument)>,
        out: ValueId,
    ) -> Result<ValueId> {
        Ok(self.call(op, args, vec![Out::Into(out)])?[0])
    }

    /// An op whose result is `out` when given, else a new value with `meta`.
    pub fn op_to(
        &mut self,
        op: &str,
        args: Vec<(&str, Argument)>,
        out: Option<ValueId>,
        meta: TensorMeta,
    ) -> Result<ValueId> {
        match out {
            Some(o) => self.op_into(op, args, o),
            None => self.op(op, args, meta),
        }
    }

    /// Size `dim` of tensor `v`: a literal when static, else the result of
    /// an emitted `aten.sym_size.int`.
    pub fn size(&mut self, v: ValueId, dim: usize) -> Result<SymRef> {
        let s = self.meta(v)?.sizes.get(dim).cloned().ok_or_else(|| {
            Error::internal(format!(
                "dim {dim} out of range for {}",
                self.values[v.index()].name
            ))
        })?;
        if let Sym::Int(i) = s {
            return Ok(SymRef::Int(i));
        }
        if let Some(r) = self.sizes.get(&(v, dim)) {
            return Ok(*r);
        }
        let out = self.new_value("sym_size_int", ValueKind::SymInt(s));
        let target = Target::op("aten", "sym_size", "int");
        let inputs = named_args(
            &target,
            vec![
                ("self", Argument::Tensor(v)),
                ("dim", Argument::Int(dim as i64)),
            ],
        )?;
        self.nodes.push(Node {
            name: self.values[out.index()].name.clone(),
            target,
            inputs,
            outputs: vec![Argument::SymInt(SymRef::Value(out))],
            meta: self.meta.clone(),
            is_hop_single_tensor_return: None,
        });
        let r = SymRef::Value(out);
        self.sizes.insert((v, dim), r);
        Ok(r)
    }

    /// Every size of `v` as symbolic-int arguments.
    pub fn size_refs(&mut self, v: ValueId) -> Result<Vec<SymRef>> {
        (0..self.rank(v)?).map(|d| self.size(v, d)).collect()
    }

    /// The symbolic value a reference stands for.
    pub fn sym_of(&self, r: SymRef) -> Sym {
        match r {
            SymRef::Int(i) => Sym::Int(i),
            SymRef::Float(f) => Sym::Float(f),
            SymRef::Bool(b) => Sym::Bool(b),
            SymRef::Value(v) => match &self.values[v.index()].kind {
                ValueKind::SymInt(s) | ValueKind::SymFloat(s) | ValueKind::SymBool(s) => s.clone(),
                _ => Sym::Int(-1),
            },
        }
    }

    /// `a * b` on symbolic ints: folded when both are literals, else an
    /// emitted `_operator.mul`.
    pub fn mul(&mut self, a: SymRef, b: SymRef) -> Result<SymRef> {
        match (a, b) {
            (SymRef::Int(x), SymRef::Int(y)) => return Ok(SymRef::Int(x * y)),
            (SymRef::Int(1), r) | (r, SymRef::Int(1)) => return Ok(r),
            _ => {}
        }
        let sym = sym_mul(&self.sym_of(a), &self.sym_of(b));
        Ok(self.sym_operator("mul", sym, a, b))
    }

    /// `a + b` on symbolic ints: folded when both are literals, else an
    /// emitted `_operator.add`.
    pub fn add(&mut self, a: SymRef, b: SymRef) -> Result<SymRef> {
        match (a, b) {
            (SymRef::Int(x), SymRef::Int(y)) => return Ok(SymRef::Int(x + y)),
            (SymRef::Int(0), r) | (r, SymRef::Int(0)) => return Ok(r),
            _ => {}
        }
        let sym = sym_add(&self.sym_of(a), &self.sym_of(b));
        Ok(self.sym_operator("add", sym, a, b))
    }

    /// An emitted `_operator.<name>(a, b)` whose value is `sym`.
    fn sym_operator(&mut self, name: &str, sym: Sym, a: SymRef, b: SymRef) -> SymRef {
        let out = self.new_value(name, ValueKind::SymInt(sym));
        let sym_arg = |r: SymRef| Argument::SymInt(r);
        self.nodes.push(Node {
            name: self.values[out.index()].name.clone(),
            target: Target {
                kind: TargetKind::Python,
                namespace: "_operator".into(),
                name: name.into(),
                overload: String::new(),
            },
            inputs: vec![
                NamedArg {
                    name: "a".into(),
                    arg: sym_arg(a),
                    kind: ArgKind::Positional,
                    defaulted: false,
                },
                NamedArg {
                    name: "b".into(),
                    arg: sym_arg(b),
                    kind: ArgKind::Positional,
                    defaulted: false,
                },
            ],
            outputs: vec![Argument::SymInt(SymRef::Value(out))],
            meta: self.meta.clone(),
            is_hop_single_tensor_return: None,
        });
        SymRef::Value(out)
    }

    /// The product of several sizes.
    pub fn product(&mut self, refs: &[SymRef]) -> Result<SymRef> {
        let mut acc = SymRef::Int(1);
        for r in refs {
            acc = self.mul(acc, *r)?;
        }
        Ok(acc)
    }

    /// A contiguous tensor meta like `like`'s (device), with new dtype/sizes.
    pub fn meta_like(&self, like: ValueId, dtype: Dtype, sizes: Vec<Sym>) -> Result<TensorMeta> {
        let m = self.meta(like)?;
        Ok(TensorMeta {
            dtype,
            strides: contiguous_sym_strides(&sizes),
            sizes,
            storage_offset: Sym::Int(0),
            device: m.device.clone(),
            layout: m.layout,
            requires_grad: false,
        })
    }
}

impl Emitter<'_> {
    /// Copies a subgraph's nodes in, its inputs bound to `args`; returns
    /// its outputs in this graph's values. Nested subgraphs are their own
    /// scopes and are copied as they are.
    pub fn inline(&mut self, sub: &Graph, args: &[Argument]) -> Result<Vec<Argument>> {
        self.inline_with(sub, args, &mut |_, _| Ok(()))
    }

    /// [`Emitter::inline`], with `hook` called on each copied node (its
    /// inputs already in this graph's values) before it is emitted: what
    /// the hook emits comes before the node.
    pub fn inline_with(
        &mut self,
        sub: &Graph,
        args: &[Argument],
        hook: &mut dyn FnMut(&mut Emitter, &mut Node) -> Result<()>,
    ) -> Result<Vec<Argument>> {
        if args.len() != sub.inputs.len() {
            return Err(Error::bad_input(format!(
                "a subgraph takes {} inputs but is given {}",
                sub.inputs.len(),
                args.len()
            )));
        }
        let mut map: HashMap<ValueId, ValueId> = HashMap::new();
        for (formal, actual) in sub.inputs.iter().zip(args) {
            let (mut f, mut a) = (Vec::new(), Vec::new());
            formal.value_refs(&mut f);
            actual.value_refs(&mut a);
            map.extend(f.into_iter().zip(a));
        }
        for (i, v) in sub.values.iter().enumerate() {
            let id = ValueId(i as u32);
            if let std::collections::hash_map::Entry::Vacant(slot) = map.entry(id) {
                slot.insert(self.new_value(&v.name, v.kind.clone()));
            }
        }
        let f = |v: ValueId| map.get(&v).copied().unwrap_or(v);
        for node in &sub.nodes {
            let mut n = node.clone();
            n.substitute_inputs(&f);
            crate::ir::substitute_values(&mut n.outputs, &f);
            n.name = match crate::decompose::args::node_outputs(&n).first() {
                Some(v) => self.values[v.index()].name.clone(),
                None => self.names.fresh(&n.name),
            };
            if n.meta.stack_trace.is_none() {
                n.meta = self.meta.clone();
            }
            hook(self, &mut n)?;
            self.nodes.push(n);
        }
        let mut outs = sub.outputs.clone();
        crate::ir::substitute_values(&mut outs, &f);
        Ok(outs)
    }
}

/// Symbolic sizes of `SymRef`s (as an emitter sees them).
pub fn syms(em: &Emitter, refs: &[SymRef]) -> Vec<Sym> {
    refs.iter().map(|r| em.sym_of(*r)).collect()
}

/// A node's arguments for another op: by name where the other op's schema
/// has the name, else by position (`dropout_(self, ...)` becomes
/// `dropout(input, ...)`, `clamp_max(self, max)` becomes `clamp(self, max=)`).
pub fn args_for(node: &Node, target: &Target) -> Result<Vec<(String, Argument)>> {
    let schema = schema::lookup(&target.namespace, &target.name, &target.overload)
        .ok_or_else(|| Error::internal(format!("no schema for {target}")))?;
    Ok(node
        .inputs
        .iter()
        .enumerate()
        .map(|(i, a)| {
            let name = if schema.args.iter().any(|s| s.name == a.name) {
                a.name.clone()
            } else {
                schema
                    .args
                    .get(i)
                    .map(|s| s.name.clone())
                    .unwrap_or_else(|| a.name.clone())
            };
            (name, a.arg.clone())
        })
        .collect())
}

/// Borrowed pairs for [`Emitter::call`].
pub fn borrow_args(args: &[(String, Argument)]) -> Vec<(&str, Argument)> {
    args.iter().map(|(n, a)| (n.as_str(), a.clone())).collect()
}

/// Puts `args` in schema order with defaults for the rest (an op with no
/// schema keeps them as given).
pub fn named_args(target: &Target, args: Vec<(&str, Argument)>) -> Result<Vec<NamedArg>> {
    let given: Vec<NamedArg> = args
        .into_iter()
        .map(|(n, a)| NamedArg {
            name: n.to_string(),
            arg: a,
            kind: ArgKind::Positional,
            defaulted: false,
        })
        .collect();
    if target.kind != TargetKind::Op {
        return Ok(given);
    }
    let schema = schema::lookup(&target.namespace, &target.name, &target.overload)
        .ok_or_else(|| Error::internal(format!("no schema for {target}")))?;
    for a in &given {
        if !schema.args.iter().any(|s| s.name == a.name) {
            return Err(Error::internal(format!(
                "{target} has no argument {:?}",
                a.name
            )));
        }
    }
    let mut out = schema::fill_defaults(given, &schema);
    for (a, s) in out.iter_mut().zip(&schema.args) {
        if s.kwarg_only {
            a.kind = ArgKind::Keyword;
        }
    }
    Ok(out)
}

fn schema_returns_list(target: &Target) -> bool {
    schema::lookup(&target.namespace, &target.name, &target.overload)
        .is_some_and(|s| s.returns.starts_with("Tensor[]") || s.returns.starts_with("Tensor(a)[]"))
}

fn sym_expr(s: &Sym) -> SymExpr {
    match s {
        Sym::Int(i) => SymExpr::Call {
            func: "Integer".into(),
            args: vec![SymExpr::Int(*i)],
            kwargs: vec![],
        },
        Sym::Expr { expr, .. } => expr.clone(),
        Sym::Float(f) => SymExpr::Float(*f),
        Sym::Bool(b) => SymExpr::Bool(*b),
    }
}

fn sym_hint(s: &Sym) -> Option<i64> {
    match s {
        Sym::Int(i) => Some(*i),
        Sym::Expr {
            hint: Some(Hint::Int(h)),
            ..
        } => Some(*h),
        _ => None,
    }
}

/// `a * b` as a symbolic size (a literal when both are).
pub fn sym_mul(a: &Sym, b: &Sym) -> Sym {
    match (a, b) {
        (Sym::Int(x), Sym::Int(y)) => Sym::Int(x * y),
        (Sym::Int(1), s) | (s, Sym::Int(1)) => s.clone(),
        _ => Sym::Expr {
            expr: SymExpr::Call {
                func: "Mul".into(),
                args: vec![sym_expr(a), sym_expr(b)],
                kwargs: vec![],
            },
            hint: sym_hint(a).zip(sym_hint(b)).map(|(x, y)| Hint::Int(x * y)),
        },
    }
}

/// `a + b` as a symbolic size (a literal when both are).
pub fn sym_add(a: &Sym, b: &Sym) -> Sym {
    match (a, b) {
        (Sym::Int(x), Sym::Int(y)) => Sym::Int(x + y),
        (Sym::Int(0), s) | (s, Sym::Int(0)) => s.clone(),
        _ => Sym::Expr {
            expr: SymExpr::Call {
                func: "Add".into(),
                args: vec![sym_expr(a), sym_expr(b)],
                kwargs: vec![],
            },
            hint: sym_hint(a).zip(sym_hint(b)).map(|(x, y)| Hint::Int(x + y)),
        },
    }
}

/// A symbolic product split into its integer coefficient and its other
/// factors (`Mul` flattened, `Integer(k)` folded into the coefficient).
fn factors(s: &Sym, coef: &mut i64, out: &mut Vec<SymExpr>) -> Option<()> {
    fn walk(e: &SymExpr, coef: &mut i64, out: &mut Vec<SymExpr>) -> Option<()> {
        match e {
            SymExpr::Int(k) => *coef = coef.checked_mul(*k)?,
            SymExpr::Call { func, args, .. } if func == "Integer" => match args.as_slice() {
                [SymExpr::Int(k)] => *coef = coef.checked_mul(*k)?,
                _ => return None,
            },
            SymExpr::Call { func, args, .. } if func == "Mul" => {
                for a in args {
                    walk(a, coef, out)?;
                }
            }
            other => out.push(other.clone()),
        }
        Some(())
    }
    match s {
        Sym::Int(k) => *coef = coef.checked_mul(*k)?,
        Sym::Expr { expr, .. } => walk(expr, coef, out)?,
        _ => return None,
    }
    Some(())
}

/// `product(num) / product(den)` when it divides exactly by cancelling
/// factors (`s0*s1*32 / (s0*2*16)` is `s1`); `None` when it does not, or
/// when a divisor factor is not among the numerator's. This is how a `-1`
/// in a view over symbolic sizes stays symbolic.
pub fn sym_div_exact(num: &[Sym], den: &[Sym]) -> Option<Sym> {
    let (mut nc, mut nf) = (1i64, Vec::new());
    for s in num {
        factors(s, &mut nc, &mut nf)?;
    }
    let (mut dc, mut df) = (1i64, Vec::new());
    for s in den {
        factors(s, &mut dc, &mut df)?;
    }
    for d in df {
        let i = nf.iter().position(|n| *n == d)?;
        nf.remove(i);
    }
    if dc == 0 || nc % dc != 0 {
        return None;
    }
    let coef = nc / dc;
    let hint = num
        .iter()
        .map(sym_hint)
        .try_fold(1i64, |a, h| h.and_then(|h| a.checked_mul(h)))
        .zip(
            den.iter()
                .map(sym_hint)
                .try_fold(1i64, |a, h| h.and_then(|h| a.checked_mul(h))),
        )
        .and_then(|(n, d)| (d != 0).then(|| Hint::Int(n / d)));
    let mut args = nf;
    if args.is_empty() {
        return Some(Sym::Int(coef));
    }
    if coef != 1 {
        args.insert(0, sym_expr(&Sym::Int(coef)));
    }
    let expr = if args.len() == 1 {
        args.pop()?
    } else {
        SymExpr::Call {
            func: "Mul".into(),
            args,
            kwargs: vec![],
        }
    };
    Some(Sym::Expr { expr, hint })
}

/// The real-pair meta of a complex value's meta: sizes `S + [2]`, strides
/// doubled with 1 for the pair, the offset doubled (the same bytes).
pub fn pair_meta(m: &TensorMeta) -> TensorMeta {
    let two = Sym::Int(2);
    let mut sizes = m.sizes.clone();
    sizes.push(Sym::Int(2));
    let mut strides: Vec<Sym> = m.strides.iter().map(|s| sym_mul(s, &two)).collect();
    strides.push(Sym::Int(1));
    TensorMeta {
        dtype: m.dtype.real_part(),
        sizes,
        strides,
        storage_offset: sym_mul(&m.storage_offset, &two),
        ..m.clone()
    }
}

/// Row-major strides for symbolic sizes.
pub fn contiguous_sym_strides(sizes: &[Sym]) -> Vec<Sym> {
    if let Some(s) = sizes.iter().map(Sym::as_int).collect::<Option<Vec<i64>>>() {
        return contiguous_strides(&s).into_iter().map(Sym::Int).collect();
    }
    let mut strides = vec![Sym::Int(1); sizes.len()];
    for i in (0..sizes.len().saturating_sub(1)).rev() {
        strides[i] = sym_mul(&strides[i + 1], &sizes[i + 1]);
    }
    strides
}

/// Whether a tensor's strides are row-major for its sizes (dims of size 1
/// may have any stride, as in torch's `is_contiguous`).
pub fn is_contiguous(m: &TensorMeta) -> bool {
    let want = contiguous_sym_strides(&m.sizes);
    m.sizes
        .iter()
        .zip(m.strides.iter().zip(&want))
        .all(|(size, (s, w))| size == &Sym::Int(1) || s == w)
}

pub fn ints_arg(v: &[i64]) -> Argument {
    Argument::Ints(v.to_vec())
}

pub fn sym_ints_arg(v: &[SymRef]) -> Argument {
    if let Some(ints) = v
        .iter()
        .map(|r| match r {
            SymRef::Int(i) => Some(*i),
            _ => None,
        })
        .collect::<Option<Vec<i64>>>()
    {
        return Argument::SymInts(ints.into_iter().map(SymRef::Int).collect());
    }
    Argument::SymInts(v.to_vec())
}

/// A Python number as a `Scalar` argument.
pub fn scalar(v: f64, dtype: Dtype) -> Argument {
    if dtype.is_floating() {
        Argument::Float(v)
    } else if dtype == Dtype::Bool {
        Argument::Bool(v != 0.0)
    } else {
        Argument::Int(v as i64)
    }
}
