//! The evaluator: `forward` of the root module, with every method and
//! submodule call inlined. Python values (ints, floats, bools, strings,
//! lists, tuples, dicts, `range`) are computed at import time; so are
//! `if` and `while` conditions and `for` loops over them, which unrolls
//! loops of a known trip count. Tensor ops become nodes
//! ([`Builder::call`]). A condition that depends on tensor data, a call
//! of Python (`prim::PythonOp`), a custom class or an unknown builtin is
//! refused with its `code/` file and line.

use std::collections::{BTreeMap, HashMap};
use std::rc::Rc;

use super::ops::{At, Builder, Obj, V};
use super::parser::{Expr, ExprKind, FuncDef, Stmt, StmtKind};
use super::tree::Tree;
use super::{ShapeFn, TsOptions};
use crate::error::{Error, Result};
use crate::import::pickle::{unpickle_torchscript, Py};
use crate::ir::{
    Argument, Dtype, Hint, InputKind, OutputKind, Program, ProgramInfo, Sym, ValueKind, WeightKind,
};

/// Deepest chain of inlined calls.
const MAX_CALL_DEPTH: usize = 64;
/// Most iterations one loop may be unrolled to.
pub(super) const MAX_ITERATIONS: usize = 100_000;
/// Most nodes a lowering may emit.
const MAX_NODES: usize = 2_000_000;

pub(super) enum Flow {
    Next,
    Return(V),
    Break,
    Continue,
}

pub(super) struct Frame {
    pub(super) vars: HashMap<String, V>,
    pub(super) file: String,
}

pub(super) struct Lower<'t> {
    pub(super) b: Builder<'t>,
    depth: usize,
    /// The example value of each input symbol (dims and scalar arguments).
    pub(super) input_hints: BTreeMap<String, Hint>,
    /// The input symbols a specialisation fixed to their example value.
    pub(super) pinned: BTreeMap<String, Hint>,
    /// What each input symbol is (`input n`, `dim 0 of input x`), for messages.
    pub(super) symbol_origin: BTreeMap<String, String>,
}

pub fn lower(tree: &Tree, method: &str, opts: &TsOptions, shapes: ShapeFn) -> Result<Program> {
    let Py::Object { class, attrs } = &tree.module else {
        return Err(Error::bad_input(format!(
            "{}: data.pkl holds {}, not a module object",
            tree.archive.path,
            tree.module.describe()
        )));
    };
    let root = Rc::new(Obj {
        class: class.clone(),
        attrs: attrs.clone(),
        path: String::new(),
    });
    let cls = tree.class(class)?;
    let func = cls.methods.get(method).cloned().ok_or_else(|| {
        Error::unsupported(format!(
            "{}: class {} has no method {method}",
            tree.archive.path, cls.name
        ))
    })?;
    let mut lw = Lower {
        b: Builder::new(tree, shapes),
        depth: 0,
        input_hints: BTreeMap::new(),
        pinned: BTreeMap::new(),
        symbol_origin: BTreeMap::new(),
    };
    let traced = traced_inputs(tree, method)?;
    let mut frame = Frame {
        vars: HashMap::new(),
        file: cls.file.clone(),
    };
    let mut user_inputs: Vec<(Argument, InputKind)> = Vec::new();
    let mut arg_names = Vec::new();
    let params = func.params.iter().skip(1);
    for (i, p) in params.enumerate() {
        let at = At {
            file: cls.file.clone(),
            line: func.line,
        };
        let ann = p
            .ann
            .as_ref()
            .map(type_text)
            .unwrap_or_else(|| "Tensor".to_string());
        let example = opts.example_inputs.as_ref().and_then(|ex| {
            ex.iter()
                .find(|(n, _)| *n == p.name)
                .or_else(|| ex.iter().find(|(n, _)| *n == format!("arr_{i}")))
                .map(|(_, t)| t)
        });
        arg_names.push(p.name.clone());
        let base = ann
            .strip_prefix("Optional[")
            .and_then(|s| s.strip_suffix(']'))
            .unwrap_or(&ann)
            .to_string();
        let optional = ann != base;
        let value = match (base.as_str(), example) {
            ("Tensor", Some(t)) => {
                let sizes: Vec<Sym> = t
                    .shape
                    .iter()
                    .enumerate()
                    .map(|(k, &d)| {
                        // 0 and 1 stay static, as torch.export specialises them.
                        if opts.dynamic && d > 1 {
                            let s = lw.b.symbol("s", Some(d as i64));
                            lw.note_input_dim(&s, &p.name, k);
                            s
                        } else {
                            Sym::Int(d as i64)
                        }
                    })
                    .collect();
                let v = lw.b.new_value(
                    &p.name,
                    ValueKind::Tensor(super::ops::sym_contiguous(t.dtype, sizes)),
                );
                user_inputs.push((Argument::Tensor(v), InputKind::UserInput));
                V::Tensor(v)
            }
            ("Tensor", None)
                if !optional || (p.default.is_none() && opts.example_inputs.is_none()) =>
            {
                let Some((dtype, sizes)) = traced.get(i).cloned().flatten() else {
                    return Err(Error::usage(format!(
                        "input '{}' of {method}: the archive records no example of it (a scripted module records none), so its rank is unknown: give --example-inputs",
                        p.name
                    )));
                };
                let dims: Vec<Sym> = sizes
                    .iter()
                    .enumerate()
                    .map(|(k, &s)| {
                        let d = lw.b.symbol("s", Some(s));
                        lw.note_input_dim(&d, &p.name, k);
                        d
                    })
                    .collect();
                let v = lw.b.new_value(
                    &p.name,
                    ValueKind::Tensor(super::ops::sym_contiguous(dtype, dims)),
                );
                user_inputs.push((Argument::Tensor(v), InputKind::UserInput));
                V::Tensor(v)
            }
            ("int" | "float" | "bool", Some(t)) => {
                if t.numel() != 1 {
                    return Err(Error::usage(format!(
                        "input '{}' is {ann}: its example must hold one value, it has {}",
                        p.name,
                        t.numel()
                    )));
                }
                let example = match base.as_str() {
                    "int" => V::Int(t.int_at(0)),
                    "float" => V::Float(t.to_f64()[0]),
                    _ => V::Bool(t.int_at(0) != 0),
                };
                // A graph input of its own (SymInt, SymFloat, SymBool),
                // the example's value its hint.
                let (value, arg) = lw.scalar_input(&p.name, &base, Some(example));
                user_inputs.push((arg, InputKind::UserInput));
                value
            }
            (_, None) if p.default.is_some() => {
                let d = p.default.clone().unwrap_or(Expr {
                    kind: ExprKind::None,
                    line: func.line,
                });
                let mut f = Frame {
                    vars: HashMap::new(),
                    file: cls.file.clone(),
                };
                lw.eval(&mut f, &d)?
            }
            // An Optional argument the example file leaves out, with no
            // default, is None.
            (_, None) if optional => V::None,
            ("int" | "float" | "bool", None) => {
                // No example: a symbol without a value, which the graph
                // keeps symbolic; what needs its value at import refuses.
                let (value, arg) = lw.scalar_input(&p.name, &base, None);
                user_inputs.push((arg, InputKind::UserInput));
                value
            }
            _ => {
                return Err(at.refuse(format!(
                "input '{}' is {ann}: ts2ir takes Tensor, int, float, bool and Optional arguments",
                p.name
            )))
            }
        };
        frame.vars.insert(p.name.clone(), value);
    }
    frame
        .vars
        .insert(func.params[0].name.clone(), V::Object(root.clone()));
    let result = match lw.exec_block(&mut frame, &func.body)? {
        Flow::Return(v) => v,
        _ => V::None,
    };
    let mut outputs = Vec::new();
    let at = At {
        file: cls.file.clone(),
        line: func.line,
    };
    let result = lw.b.current(&result);
    let spec = flatten(&result, &mut outputs, &at)?;
    lw.finish(user_inputs, outputs, spec, arg_names)
}

/// The dtype and sizes of each recorded example of a traced method
/// (`traced_inputs.pkl`: tensors without data).
/// An input's dtype and sizes, as a traced archive records them.
type Recorded = Option<(Dtype, Vec<i64>)>;

fn traced_inputs(tree: &Tree, method: &str) -> Result<Vec<Recorded>> {
    let name = format!("{}traced_inputs.pkl", tree.root);
    if !tree.archive.contains(&name) {
        return Ok(Vec::new());
    }
    let bytes = tree.archive.member(&name)?;
    let Ok(Py::Dict(entries)) = unpickle_torchscript(&bytes) else {
        return Ok(Vec::new());
    };
    for (k, v) in entries {
        if matches!(&k, Py::Str(s) if s == method) {
            if let Py::List(items) | Py::Tuple(items) = v {
                return Ok(items
                    .iter()
                    .map(|x| match x {
                        Py::Tensor(t) => Some((t.dtype, t.sizes.clone())),
                        _ => None,
                    })
                    .collect());
            }
        }
    }
    Ok(Vec::new())
}

/// An annotation as text (`Tensor`, `Optional[int]`, `List[Tensor]`).
fn type_text(e: &Expr) -> String {
    match &e.kind {
        ExprKind::Index(base, idx) => format!("{}[{}]", type_text(base), type_text(idx)),
        ExprKind::Tuple(items) => items.iter().map(type_text).collect::<Vec<_>>().join(", "),
        ExprKind::None => "None".into(),
        _ => e.dotted().unwrap_or_else(|| "?".into()),
    }
}

/// Flattens an output in pytree order; returns its spec (JSON).
fn flatten(v: &V, out: &mut Vec<crate::ir::ValueId>, at: &At) -> Result<String> {
    let node = |ty: &str, context: &str, children: Vec<String>| {
        format!(
            "{{\"type\": \"{ty}\", \"context\": {}, \"children_spec\": [{}]}}",
            serde_json::to_string(context).unwrap_or_default(),
            children.join(", ")
        )
    };
    Ok(match v {
        V::Tensor(t) => {
            out.push(*t);
            "{\"type\": null, \"context\": null, \"children_spec\": []}".to_string()
        }
        V::Tuple(items) => {
            let c = items
                .iter()
                .map(|x| flatten(x, out, at))
                .collect::<Result<Vec<_>>>()?;
            node("builtins.tuple", "null", c)
        }
        V::List(items) => {
            let items = items.borrow().clone();
            let c = items
                .iter()
                .map(|x| flatten(x, out, at))
                .collect::<Result<Vec<_>>>()?;
            node("builtins.list", "null", c)
        }
        V::Dict(entries) => {
            let entries = entries.borrow().clone();
            let mut keys = Vec::new();
            let mut c = Vec::new();
            for (k, x) in &entries {
                keys.push(match k {
                    V::Str(s) => serde_json::Value::String(s.clone()),
                    V::Int(i) => serde_json::Value::from(*i),
                    other => {
                        return Err(at.refuse(format!(
                            "an output dict has a key that is {}: string and int keys are flattened",
                            other.kind()
                        )))
                    }
                });
                c.push(flatten(x, out, at)?);
            }
            let context = serde_json::Value::Array(keys).to_string();
            node("builtins.dict", &context, c)
        }
        // None holds no tensor, as in torch's pytree (a NamedTuple's unset field)
        V::None => node("builtins.NoneType", "null", vec![]),
        other => {
            return Err(at.refuse(format!(
                "the method returns {} among its outputs: ts2ir writes tensors, and tuples, lists and dicts of them",
                other.kind()
            )))
        }
    })
}

impl Lower<'_> {
    fn finish(
        self,
        user_inputs: Vec<(Argument, InputKind)>,
        outputs: Vec<crate::ir::ValueId>,
        spec: String,
        arg_names: Vec<String>,
    ) -> Result<Program> {
        let mut b = self.b;
        let mut inputs = Vec::new();
        let mut kinds = Vec::new();
        // Parameters, then buffers, then constants, then user inputs, as
        // torch.export orders them.
        for rank in 0..3 {
            for (v, k) in &b.weight_inputs {
                let r = match k {
                    InputKind::Parameter(_) => 0,
                    InputKind::Buffer(_) => 1,
                    _ => 2,
                };
                if r == rank {
                    inputs.push(Argument::Tensor(*v));
                    kinds.push(k.clone());
                }
            }
        }
        for (a, k) in user_inputs {
            inputs.push(a);
            kinds.push(k);
        }
        b.graph.inputs = inputs;
        b.graph.outputs = outputs.iter().map(|v| Argument::Tensor(*v)).collect();
        // Specialised inputs become static: their symbols are written as
        // the example values everywhere, and leave the range constraints.
        Lower::settle(&mut b.graph, &mut b.ranges, &mut kinds, &self.pinned);
        let leaf = "{\"type\": null, \"context\": null, \"children_spec\": []}";
        let args_spec = vec![leaf; arg_names.len()].join(", ");
        let in_spec = format!(
            "[1, {{\"type\": \"builtins.tuple\", \"context\": \"null\", \"children_spec\": [{{\"type\": \"builtins.tuple\", \"context\": \"null\", \"children_spec\": [{args_spec}]}}, {{\"type\": \"builtins.dict\", \"context\": \"[]\", \"children_spec\": []}}]}}]"
        );
        b.ranges.sort_by(|x, y| x.symbol.cmp(&y.symbol));
        let version = b
            .tree
            .archive
            .member(&format!("{}version", b.tree.root))
            .ok()
            .map(|v| String::from_utf8_lossy(&v).trim().to_string())
            .unwrap_or_default();
        let program = Program {
            info: ProgramInfo {
                torch_version: "torchscript".into(),
                verifiers: vec!["TRAINING".into()],
                archive_layout: format!("torchscript v{version}"),
                in_spec,
                out_spec: format!("[1, {spec}]"),
                forward_arg_names: arg_names,
                ..Default::default()
            },
            output_kinds: vec![OutputKind::UserOutput; outputs.len()],
            input_kinds: kinds,
            graph: b.graph,
            range_constraints: b.ranges,
            weights: b.weights,
            storages: b.storages,
        };
        crate::ir::validate(&program)?;
        Ok(program)
    }

    pub(super) fn exec_block(&mut self, f: &mut Frame, body: &[Stmt]) -> Result<Flow> {
        for s in body {
            match self.exec(f, s)? {
                Flow::Next => {}
                flow => return Ok(flow),
            }
        }
        Ok(Flow::Next)
    }

    pub(super) fn at(f: &Frame, line: u32) -> At {
        At {
            file: f.file.clone(),
            line,
        }
    }

    fn exec(&mut self, f: &mut Frame, s: &Stmt) -> Result<Flow> {
        let at = Self::at(f, s.line);
        if self.b.graph.nodes.len() > MAX_NODES {
            return Err(at.refuse(format!("the lowering passes {MAX_NODES} nodes")));
        }
        match &s.kind {
            StmtKind::Assign { targets, value } => {
                let v = self.eval(f, value)?;
                for t in targets {
                    self.assign(f, t, v.clone())?;
                }
            }
            StmtKind::AugAssign { target, op, value } => {
                let left = self.eval(f, target)?;
                let right = self.eval(f, value)?;
                let v = self.binary(op, left, right, &at)?;
                self.assign(f, target, v)?;
            }
            StmtKind::AnnAssign {
                target,
                value: Some(value),
                ..
            } => {
                let v = self.eval(f, value)?;
                self.assign(f, target, v)?;
            }
            StmtKind::AnnAssign { value: None, .. } | StmtKind::Pass | StmtKind::Import => {}
            StmtKind::Expr(e) => {
                self.eval(f, e)?;
            }
            StmtKind::If { cond, body, orelse } => {
                let c = self.eval(f, cond)?;
                if let V::Pred(p) = c {
                    return self.cond_if(f, p, body, orelse, &at);
                }
                let taken = self.truth(&c, &at, "an if")?;
                return self.exec_block(f, if taken { body } else { orelse });
            }
            StmtKind::For { target, iter, body } => {
                let it = self.eval(f, iter)?;
                let items = self.iterate(&it, &at)?;
                if items.len() > MAX_ITERATIONS {
                    return Err(at.refuse(format!(
                        "a for loop of {} iterations: ts2ir unrolls at most {MAX_ITERATIONS}",
                        items.len()
                    )));
                }
                for item in items {
                    self.assign(f, target, item)?;
                    match self.exec_block(f, body)? {
                        Flow::Break => break,
                        Flow::Return(v) => return Ok(Flow::Return(v)),
                        _ => {}
                    }
                }
            }
            StmtKind::While { cond, body } => {
                let mut n = 0;
                loop {
                    let c = self.eval(f, cond)?;
                    if let V::Pred(_) = c {
                        if n > 0 {
                            return Err(at.refuse(
                                "a while loop whose condition turns data-dependent after an iteration is not lowered",
                            ));
                        }
                        return self.while_loop(f, cond, body, &at);
                    }
                    if !self.truth(&c, &at, "a while loop")? {
                        break;
                    }
                    n += 1;
                    if n > MAX_ITERATIONS {
                        return Err(at.refuse(format!(
                            "a while loop runs past {MAX_ITERATIONS} iterations at import"
                        )));
                    }
                    match self.exec_block(f, body)? {
                        Flow::Break => break,
                        Flow::Return(v) => return Ok(Flow::Return(v)),
                        _ => {}
                    }
                }
            }
            StmtKind::Return(e) => {
                let v = match e {
                    Some(e) => self.eval(f, e)?,
                    None => V::None,
                };
                return Ok(Flow::Return(v));
            }
            StmtKind::Break => return Ok(Flow::Break),
            StmtKind::Continue => return Ok(Flow::Continue),
            StmtKind::Raise(e) => {
                let msg = match e {
                    Some(e) => format!("{:?}", self.eval(f, e).ok()),
                    None => String::new(),
                };
                return Err(at.bad(format!(
                    "the model raises an exception for these inputs {msg}"
                )));
            }
            StmtKind::Assert(cond) => {
                let c = self.eval(f, cond)?;
                if !self.truth(&c, &at, "an assert")? {
                    return Err(at.bad("an assert of the model fails for these inputs"));
                }
            }
            StmtKind::Def(_) | StmtKind::Class(_) => {
                return Err(at.refuse("a nested def or class is not lowered"));
            }
        }
        Ok(Flow::Next)
    }

    fn assign(&mut self, f: &mut Frame, target: &Expr, v: V) -> Result<()> {
        let at = Self::at(f, target.line);
        match &target.kind {
            ExprKind::Name(n) => {
                f.vars.insert(n.clone(), v);
            }
            ExprKind::Tuple(ts) | ExprKind::List(ts) => {
                let items = self.iterate(&v, &at)?;
                if items.len() != ts.len() {
                    return Err(at.bad(format!(
                        "{} values unpacked into {} names",
                        items.len(),
                        ts.len()
                    )));
                }
                for (t, x) in ts.iter().zip(items) {
                    self.assign(f, t, x)?;
                }
            }
            ExprKind::Index(base, idx) => {
                let container = self.eval(f, base)?;
                let key = self.eval(f, idx)?;
                let key = self.specialise(&key, &at, "an index into a list")?;
                match container {
                    V::Dict(d) => {
                        let mut d = d.borrow_mut();
                        match d.iter_mut().find(|(k, _)| same_key(k, &key)) {
                            Some(slot) => slot.1 = v,
                            None => d.push((key, v)),
                        }
                    }
                    V::List(l) => {
                        let mut l = l.borrow_mut();
                        let i = index(&key, l.len(), &at)?;
                        l[i] = v;
                    }
                    other => {
                        return Err(at.refuse(format!(
                            "an item assignment into {} (a tensor is written through ops)",
                            other.kind()
                        )))
                    }
                }
            }
            _ => {
                return Err(at.refuse(
                    "an assignment to an attribute (a module that changes its own state) is not lowered",
                ))
            }
        }
        Ok(())
    }

    /// The truth of a condition known at import time.
    pub(super) fn truth(&mut self, v: &V, at: &At, what: &str) -> Result<bool> {
        Ok(match v {
            V::Bool(b) => *b,
            V::Int(i) => *i != 0,
            V::Float(x) => *x != 0.0,
            V::None => false,
            V::Str(s) => !s.is_empty(),
            V::List(l) => !l.borrow().is_empty(),
            V::Tuple(t) => !t.is_empty(),
            V::Dict(d) => !d.borrow().is_empty(),
            // A symbolic scalar: decided by its example value, the inputs it
            // depends on made static.
            V::SymInt(_) | V::SymFloat(_) | V::SymBool(_) => {
                let known = self.specialise(v, at, what)?;
                return self.truth(&known, at, what);
            }
            V::Tensor(_) | V::Pred(_) => {
                return Err(at.refuse(format!(
                    "{what} whose condition depends on tensor data (prim::If / prim::Loop on a runtime value) is not lowered: trace the model"
                )))
            }
            other => {
                return Err(at.refuse(format!("{what} on {} is not lowered", other.kind())));
            }
        })
    }

    pub(super) fn iterate(&mut self, v: &V, at: &At) -> Result<Vec<V>> {
        Ok(match v {
            V::List(l) => l.borrow().clone(),
            V::Tuple(t) => t.clone(),
            V::Dict(d) => d.borrow().iter().map(|(k, _)| k.clone()).collect(),
            V::Str(s) => s.chars().map(|c| V::Str(c.to_string())).collect(),
            V::Tensor(t) => {
                // Iterating a tensor: its rows (aten::unbind), when its
                // first dim is known.
                let n = self.b.meta(*t).sizes.first().and_then(Sym::as_int);
                if n.is_none() {
                    return Err(at.refuse(
                        "a loop over the rows of a tensor whose first dim is symbolic (a data-dependent list length)",
                    ));
                }
                let out = self
                    .b
                    .call("aten", "unbind", std::slice::from_ref(v), &[], at)?;
                self.iterate(&out, at)?
            }
            other => return Err(at.refuse(format!("a loop over {}", other.kind()))),
        })
    }

    pub(super) fn eval(&mut self, f: &mut Frame, e: &Expr) -> Result<V> {
        let at = Self::at(f, e.line);
        Ok(match &e.kind {
            ExprKind::Name(n) => match f.vars.get(n) {
                Some(v) => self.b.current(v),
                // how TorchScript prints float("inf") and float("nan")
                None if n == "inf" => V::Float(f64::INFINITY),
                None if n == "nan" => V::Float(f64::NAN),
                None => V::Path(n.clone()),
            },
            ExprKind::Int(i) => V::Int(*i),
            ExprKind::Float(x) => V::Float(*x),
            ExprKind::Str(s) => V::Str(s.clone()),
            ExprKind::None => V::None,
            ExprKind::Bool(b) => V::Bool(*b),
            ExprKind::Attr(base, name) => {
                let b = self.eval(f, base)?;
                self.attr(b, name, &at)?
            }
            ExprKind::Call { func, args, kwargs } => {
                let fv = self.eval(f, func)?;
                let mut a = Vec::with_capacity(args.len());
                for x in args {
                    a.push(self.eval(f, x)?);
                }
                let mut kw = Vec::with_capacity(kwargs.len());
                for (k, x) in kwargs {
                    kw.push((k.clone(), self.eval(f, x)?));
                }
                self.call(fv, a, kw, &at)?
            }
            ExprKind::Index(base, idx) => {
                let b = self.eval(f, base)?;
                if let V::Path(p) = &b {
                    // A type: `List[Tensor]` in `annotate`.
                    return Ok(V::Path(format!("{p}[{}]", type_text(idx))));
                }
                let i = self.eval(f, idx)?;
                self.subscript(b, i, &at)?
            }
            ExprKind::Slice(lo, hi, step) => {
                let mut part = |x: &Option<Box<Expr>>, f: &mut Frame| -> Result<V> {
                    match x {
                        Some(x) => self.eval(f, x),
                        None => Ok(V::None),
                    }
                };
                let lo = part(lo, f)?;
                let hi = part(hi, f)?;
                let step = part(step, f)?;
                V::Tuple(vec![V::Str("slice".into()), lo, hi, step])
            }
            ExprKind::Tuple(items) => {
                let mut out = Vec::new();
                for x in items {
                    out.push(self.eval(f, x)?);
                }
                V::Tuple(out)
            }
            ExprKind::List(items) => {
                let mut out = Vec::new();
                for x in items {
                    out.push(self.eval(f, x)?);
                }
                V::list(out)
            }
            ExprKind::Dict(items) => {
                let mut out = Vec::new();
                for (k, x) in items {
                    out.push((self.eval(f, k)?, self.eval(f, x)?));
                }
                V::Dict(Rc::new(std::cell::RefCell::new(out)))
            }
            ExprKind::Unary(op, x) => {
                let v = self.eval(f, x)?;
                match (*op, v) {
                    (op @ ("not" | "-"), v) if Lower::is_symbolic(&v) => {
                        self.sym_unary(op, &v, &at)?.unwrap_or(V::None)
                    }
                    ("not", v) => V::Bool(!self.truth(&v, &at, "a not")?),
                    ("-", V::Int(i)) => V::Int(-i),
                    ("-", V::Float(x)) => V::Float(-x),
                    ("+", v @ (V::Int(_) | V::Float(_))) => v,
                    ("~", V::Int(i)) => V::Int(!i),
                    ("-", t @ V::Tensor(_)) => self.b.call("aten", "neg", &[t], &[], &at)?,
                    ("~", t @ V::Tensor(_)) => {
                        self.b.call("aten", "bitwise_not", &[t], &[], &at)?
                    }
                    (op, v) => return Err(at.refuse(format!("unary {op} on {}", v.kind()))),
                }
            }
            ExprKind::Binary(op, l, r) => {
                if *op == "and" || *op == "or" {
                    let lv = self.eval(f, l)?;
                    let lt = self.truth(&lv, &at, &format!("an '{op}'"))?;
                    if (*op == "and") != lt {
                        return Ok(lv);
                    }
                    return self.eval(f, r);
                }
                let lv = self.eval(f, l)?;
                let rv = self.eval(f, r)?;
                self.binary(op, lv, rv, &at)?
            }
            ExprKind::IfExp { cond, then, orelse } => {
                let c = self.eval(f, cond)?;
                if self.truth(&c, &at, "a conditional expression")? {
                    self.eval(f, then)?
                } else {
                    self.eval(f, orelse)?
                }
            }
        })
    }

    pub(super) fn attr(&mut self, base: V, name: &str, at: &At) -> Result<V> {
        Ok(match base {
            V::Path(p) if p == "CONSTANTS" => {
                let k: usize = name
                    .strip_prefix('c')
                    .and_then(|n| n.parse().ok())
                    .ok_or_else(|| at.bad(format!("CONSTANTS.{name} is no constant name")))?;
                let py = self.b.tree.constants.get(k).cloned().ok_or_else(|| {
                    at.bad(format!(
                        "CONSTANTS.{name}: constants.pkl holds {} constants",
                        self.b.tree.constants.len()
                    ))
                })?;
                // A 0-dim int64 constant is what tracing makes of a Python
                // int (a size): an int again, as TorchScript's arithmetic on
                // it promotes like one.
                if let Py::Tensor(t) = &py {
                    if t.sizes.is_empty() && t.dtype == Dtype::Int64 {
                        let (_, blob) = self.b.tree.storage("constants", &t.key)?;
                        let at_byte = usize::try_from(t.offset)
                            .unwrap_or(usize::MAX)
                            .saturating_mul(8);
                        if let Some(bytes) = blob.get(at_byte..at_byte.saturating_add(8)) {
                            let mut b = [0u8; 8];
                            b.copy_from_slice(bytes);
                            return Ok(V::Int(i64::from_le_bytes(b)));
                        }
                    }
                }
                self.py_value(
                    &py,
                    &format!("CONSTANTS.{name}"),
                    WeightKind::Constant,
                    "constants",
                    at,
                )?
            }
            V::Path(p) => V::Path(format!("{p}.{name}")),
            V::Object(obj) => self.object_attr(&obj, name, at)?,
            other => V::Method(Box::new(other), name.to_string()),
        })
    }

    fn object_attr(&mut self, obj: &Rc<Obj>, name: &str, at: &At) -> Result<V> {
        let class = self.b.tree.class(&obj.class)?;
        let path = if obj.path.is_empty() {
            name.to_string()
        } else {
            format!("{}.{name}", obj.path)
        };
        if let Some((_, py)) = obj.attrs.iter().find(|(k, _)| k == name) {
            let kind = if class.parameters.iter().any(|p| p == name) {
                WeightKind::Parameter
            } else if class.buffers.iter().any(|p| p == name) {
                WeightKind::Buffer
            } else {
                WeightKind::Constant
            };
            return self.py_value(&py.clone(), &path, kind, "data", at);
        }
        if class.methods.contains_key(name) {
            return Ok(V::Method(
                Box::new(V::Object(obj.clone())),
                name.to_string(),
            ));
        }
        if let Some((_, e)) = class.constants.iter().find(|(k, _)| k == name) {
            let mut f = Frame {
                vars: HashMap::new(),
                file: class.file.clone(),
            };
            return self.eval(&mut f, &e.clone());
        }
        Err(at.bad(format!(
            "module '{}' (class {}) has no attribute {name}",
            if obj.path.is_empty() {
                "<root>"
            } else {
                &obj.path
            },
            class.name
        )))
    }

    /// A pickled attribute as a value: tensors become weight inputs.
    fn py_value(&mut self, py: &Py, path: &str, kind: WeightKind, dir: &str, at: &At) -> Result<V> {
        Ok(match py {
            Py::None => V::None,
            Py::Bool(b) => V::Bool(*b),
            Py::Int(i) => V::Int(*i),
            Py::Float(x) => V::Float(*x),
            Py::Str(s) => V::Str(s.clone()),
            Py::Tensor(t) => V::Tensor(self.b.weight(path, kind, t, dir)?),
            Py::Tuple(items) => V::Tuple(
                items
                    .iter()
                    .enumerate()
                    .map(|(i, x)| self.py_value(x, &format!("{path}.{i}"), kind, dir, at))
                    .collect::<Result<_>>()?,
            ),
            Py::List(items) => V::list(
                items
                    .iter()
                    .enumerate()
                    .map(|(i, x)| self.py_value(x, &format!("{path}.{i}"), kind, dir, at))
                    .collect::<Result<_>>()?,
            ),
            Py::Dict(entries) => {
                let mut out = Vec::new();
                for (k, x) in entries {
                    let key = self.py_value(k, path, kind, dir, at)?;
                    let sub = match &key {
                        V::Str(s) => format!("{path}.{s}"),
                        V::Int(i) => format!("{path}.{i}"),
                        _ => path.to_string(),
                    };
                    out.push((key, self.py_value(x, &sub, kind, dir, at)?));
                }
                V::Dict(Rc::new(std::cell::RefCell::new(out)))
            }
            Py::Object { class, attrs } => {
                if !class.starts_with("__torch__.") {
                    return Err(at.refuse(format!("an attribute of class {class}")));
                }
                V::Object(Rc::new(Obj {
                    class: class.clone(),
                    attrs: attrs.clone(),
                    path: path.to_string(),
                }))
            }
            other => {
                return Err(at.refuse(format!(
                    "attribute {path} is {}: not read",
                    other.describe()
                )))
            }
        })
    }

    pub(super) fn subscript(&mut self, b: V, i: V, at: &At) -> Result<V> {
        // A list index or slice bound must be known at import.
        let i = if matches!(b, V::List(_) | V::Tuple(_) | V::Dict(_)) && Lower::holds_symbolic(&i) {
            self.specialise(&i, at, "an index into a list")?
        } else {
            i
        };
        Ok(match (&b, &i) {
            (V::List(_) | V::Tuple(_), V::Tuple(parts)) if matches!(parts.first(), Some(V::Str(s)) if s == "slice") =>
            {
                let items = self.iterate(&b, at)?;
                let n = items.len() as i64;
                let bound = |v: &V, default: i64| -> Result<i64> {
                    Ok(match v {
                        V::None => default,
                        V::Int(x) if *x < 0 => (x + n).max(0),
                        V::Int(x) => (*x).min(n),
                        other => {
                            return Err(at.refuse(format!("a slice bound that is {}", other.kind())))
                        }
                    })
                };
                if !matches!(parts[3], V::None | V::Int(1)) {
                    return Err(at.refuse("a list slice with a step"));
                }
                let lo = bound(&parts[1], 0)?;
                let hi = bound(&parts[2], n)?;
                let out: Vec<V> = items
                    .into_iter()
                    .skip(lo as usize)
                    .take((hi - lo).max(0) as usize)
                    .collect();
                if matches!(b, V::List(_)) {
                    V::list(out)
                } else {
                    V::Tuple(out)
                }
            }
            (V::List(l), _) => {
                let l = l.borrow();
                l[index(&i, l.len(), at)?].clone()
            }
            (V::Tuple(t), _) => t[index(&i, t.len(), at)?].clone(),
            (V::Dict(d), _) => d
                .borrow()
                .iter()
                .find(|(k, _)| same_key(k, &i))
                .map(|(_, v)| v.clone())
                .ok_or_else(|| at.bad(format!("key {i:?} is not in the dict")))?,
            (V::Tensor(_), V::Int(_)) => {
                self.b
                    .call("aten", "select", &[b.clone(), V::Int(0), i], &[], at)?
            }
            _ => return Err(at.refuse(format!("indexing {} with {}", b.kind(), i.kind()))),
        })
    }

    fn call(&mut self, func: V, args: Vec<V>, kwargs: Vec<(String, V)>, at: &At) -> Result<V> {
        match func {
            V::Method(recv, name) => self.call_method(*recv, &name, args, kwargs, at),
            V::Object(obj) => self.call_method(V::Object(obj), "forward", args, kwargs, at),
            V::Path(p) => self.call_path(&p, args, kwargs, at),
            other => Err(at.refuse(format!("a call of {}", other.kind()))),
        }
    }

    fn call_method(
        &mut self,
        recv: V,
        name: &str,
        mut args: Vec<V>,
        kwargs: Vec<(String, V)>,
        at: &At,
    ) -> Result<V> {
        match recv {
            V::Object(obj) => {
                let class = self.b.tree.class(&obj.class)?;
                let func = class.methods.get(name).cloned().ok_or_else(|| {
                    at.refuse(format!("class {} has no method {name}", class.name))
                })?;
                let saved = std::mem::replace(&mut self.b.module_path, obj.path.clone());
                let r = self.inline(
                    &func,
                    &class.file,
                    Some(V::Object(obj.clone())),
                    args,
                    kwargs,
                    at,
                );
                self.b.module_path = saved;
                r
            }
            V::List(l) => {
                match (name, args.as_slice()) {
                    ("append", [x]) => l.borrow_mut().push(x.clone()),
                    ("extend", [x]) => {
                        let items = self.iterate(x, at)?;
                        l.borrow_mut().extend(items)
                    }
                    ("insert", [V::Int(i), x]) => {
                        let n = l.borrow().len();
                        let i = (*i).clamp(-(n as i64), n as i64);
                        let i = if i < 0 { i + n as i64 } else { i } as usize;
                        l.borrow_mut().insert(i, x.clone())
                    }
                    ("pop", []) => {
                        return l
                            .borrow_mut()
                            .pop()
                            .ok_or_else(|| at.bad("pop from an empty list"))
                    }
                    _ => return Err(at.refuse(format!("list method {name}"))),
                }
                Ok(V::None)
            }
            V::Dict(d) => match (name, args.as_slice()) {
                ("keys", []) => Ok(V::list(d.borrow().iter().map(|(k, _)| k.clone()).collect())),
                ("values", []) => Ok(V::list(d.borrow().iter().map(|(_, v)| v.clone()).collect())),
                ("items", []) => Ok(V::list(
                    d.borrow()
                        .iter()
                        .map(|(k, v)| V::Tuple(vec![k.clone(), v.clone()]))
                        .collect(),
                )),
                ("get", [k, ..]) => Ok(d
                    .borrow()
                    .iter()
                    .find(|(x, _)| same_key(x, k))
                    .map(|(_, v)| v.clone())
                    .unwrap_or_else(|| args.get(1).cloned().unwrap_or(V::None))),
                _ => Err(at.refuse(format!("dict method {name}"))),
            },
            t @ V::Tensor(_) => {
                args.insert(0, t);
                self.call_path(&format!("torch.{name}"), args, kwargs, at)
            }
            other => Err(at.refuse(format!("method {name} of {}", other.kind()))),
        }
    }

    pub(super) fn inline(
        &mut self,
        func: &Rc<FuncDef>,
        file: &str,
        self_v: Option<V>,
        args: Vec<V>,
        kwargs: Vec<(String, V)>,
        at: &At,
    ) -> Result<V> {
        self.depth += 1;
        if self.depth > MAX_CALL_DEPTH {
            return Err(at.refuse(format!(
                "calls nest deeper than {MAX_CALL_DEPTH} (recursion is not TorchScript)"
            )));
        }
        let mut frame = Frame {
            vars: HashMap::new(),
            file: file.to_string(),
        };
        let mut given = args.into_iter();
        let mut params = func.params.iter();
        if let Some(s) = self_v {
            if let Some(p) = params.next() {
                frame.vars.insert(p.name.clone(), s);
            }
        }
        for p in params {
            let v = if let Some(v) = given.next() {
                v
            } else if let Some((_, v)) = kwargs.iter().find(|(k, _)| *k == p.name) {
                v.clone()
            } else if let Some(d) = &p.default {
                let mut df = Frame {
                    vars: HashMap::new(),
                    file: file.to_string(),
                };
                self.eval(&mut df, d)?
            } else {
                return Err(at.bad(format!(
                    "{} is called without its argument {}",
                    func.name, p.name
                )));
            };
            frame.vars.insert(p.name.clone(), v);
        }
        let r = match self.exec_block(&mut frame, &func.body)? {
            Flow::Return(v) => v,
            _ => V::None,
        };
        self.depth -= 1;
        Ok(r)
    }
}

pub(super) fn is_same(a: &V, b: &V) -> bool {
    match (a, b) {
        (V::None, V::None) => true,
        (V::None, _) | (_, V::None) => false,
        (V::Tensor(x), V::Tensor(y)) => x == y,
        (V::Object(x), V::Object(y)) => Rc::ptr_eq(x, y),
        (V::List(x), V::List(y)) => Rc::ptr_eq(x, y),
        _ => same_key(a, b),
    }
}

pub(super) fn same_key(a: &V, b: &V) -> bool {
    match (a, b) {
        (V::Str(x), V::Str(y)) => x == y,
        (V::Int(x), V::Int(y)) => x == y,
        (V::Bool(x), V::Bool(y)) => x == y,
        (V::Float(x), V::Float(y)) => x == y,
        (V::Int(x), V::Float(y)) | (V::Float(y), V::Int(x)) => *x as f64 == *y,
        (V::None, V::None) => true,
        (V::Tensor(x), V::Tensor(y)) => x == y,
        (V::SymInt(x), V::SymInt(y))
        | (V::SymFloat(x), V::SymFloat(y))
        | (V::SymBool(x), V::SymBool(y)) => x == y,
        _ => false,
    }
}

fn index(i: &V, len: usize, at: &At) -> Result<usize> {
    let V::Int(k) = i else {
        return Err(at.refuse(format!("an index that is {}", i.kind())));
    };
    let k = if *k < 0 { *k + len as i64 } else { *k };
    if k < 0 || k >= len as i64 {
        return Err(at.bad(format!("index {i:?} is out of range for a list of {len}")));
    }
    Ok(k as usize)
}
