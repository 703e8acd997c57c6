//! The builtins of TorchScript's Python subset, evaluated at import:
//! `range`, `len`, `int()`, `annotate`, `getattr`, `ops.prim.*`, the ATen
//! builtins that run on Python values (`aten::add.int`, `aten::append.t`,
//! `aten::size.int`), and the operators of expressions, which on tensors
//! become ATen calls. Everything else named `torch.*` / `ops.NS.*` is an
//! op call ([`super::ops::Builder::call`]).

use super::lower::{is_same, same_key, Lower, MAX_ITERATIONS};
use super::ops::{code_of_dtype, At, V};
use super::symbolic::{has_symbolic, is_symbolic, SIZE_LIST_OPS};
use crate::error::Result;
use crate::ir::{Argument, Sym, ValueKind};

impl Lower<'_> {
    pub(super) fn call_path(
        &mut self,
        p: &str,
        args: Vec<V>,
        kwargs: Vec<(String, V)>,
        at: &At,
    ) -> Result<V> {
        let one = |args: &[V]| -> Result<V> {
            args.first()
                .cloned()
                .ok_or_else(|| at.bad(format!("{p} without an argument")))
        };
        match p {
            "annotate" => {
                return args
                    .get(1)
                    .cloned()
                    .ok_or_else(|| at.bad("annotate without a value"))
            }
            "uninitialized" => return Ok(V::Uninit),
            "unchecked_cast" => {
                return args
                    .get(1)
                    .cloned()
                    .ok_or_else(|| at.bad("unchecked_cast without a value"))
            }
            "getattr" => {
                return match args.as_slice() {
                    [obj, V::Str(name)] => self.attr(obj.clone(), name, at),
                    _ => Err(at.refuse("getattr with a name that is not a string literal")),
                }
            }
            "range" => {
                let args = self.specialise(&V::Tuple(args), at, "a range (a loop's trip count)")?;
                let V::Tuple(args) = args else {
                    return Err(at.bad("range with bad arguments"));
                };
                let ints: Vec<i64> = args
                    .iter()
                    .map(|a| match a {
                        V::Int(i) => Ok(*i),
                        other => Err(at.refuse(format!(
                            "range over {} (a data-dependent trip count)",
                            other.kind()
                        ))),
                    })
                    .collect::<Result<_>>()?;
                let (lo, hi, step) = match ints.as_slice() {
                    [n] => (0, *n, 1),
                    [a, b] => (*a, *b, 1),
                    [a, b, s] if *s != 0 => (*a, *b, *s),
                    _ => return Err(at.bad("range with bad arguments")),
                };
                let mut out = Vec::new();
                let mut i = lo;
                while (step > 0 && i < hi) || (step < 0 && i > hi) {
                    out.push(V::Int(i));
                    i += step;
                    if out.len() > MAX_ITERATIONS {
                        return Err(at.refuse(format!("a range of more than {MAX_ITERATIONS}")));
                    }
                }
                return Ok(V::list(out));
            }
            "int" | "float" | "bool" | "len" | "str" => return self.builtin(p, &one(&args)?, at),
            "print" | "warnings.warn" | "ops.prim.Print" => return Ok(V::None),
            "ops.prim.NumToTensor"
            | "ops.prim.unchecked_cast"
            | "ops.prim.data"
            | "torch.detach"
                if !matches!(args.first(), Some(V::Tensor(_))) || p != "torch.detach" =>
            {
                return one(&args)
            }
            "ops.prim.device" | "torch.device" => return Ok(V::Device("cpu".into())),
            "ops.prim.type" => {
                return match one(&args)? {
                    V::Device(d) => Ok(V::Str(d.split(':').next().unwrap_or("cpu").to_string())),
                    other => Err(at.refuse(format!("prim::type of {}", other.kind()))),
                }
            }
            // Grad mode is taken as on and weights as requiring grad: that
            // keeps modules on their plain paths (MultiheadAttention's fast
            // path, taken only without grad, computes the same function
            // with an op no back end runs).
            "ops.prim.requires_grad" => {
                let Some(V::Tensor(t)) = args.first() else {
                    return Err(at.bad("prim::requires_grad of a non-tensor"));
                };
                return Ok(V::Bool(self.b.weight_inputs.iter().any(|(v, _)| v == t)));
            }
            "ops.prim.dtype" => {
                let Some(V::Tensor(t)) = args.first() else {
                    return Err(at.bad("prim::dtype of a non-tensor"));
                };
                let d = self.b.meta(*t).dtype;
                return code_of_dtype(d).map(V::Int).ok_or_else(|| {
                    at.refuse(format!("dtype {} has no TorchScript code", d.torch_name()))
                });
            }
            "ops.prim.is_cuda"
            | "ops.prim.is_quantized"
            | "ops.prim.is_mkldnn"
            | "ops.prim.is_nested"
            | "ops.prim.is_sparse"
            | "ops.prim.is_meta" => return Ok(V::Bool(false)),
            "ops.prim.RaiseException" => {
                return Err(at.bad(format!(
                    "the model raises an exception for these inputs: {}",
                    match args.first() {
                        Some(V::Str(s)) => s.clone(),
                        _ => String::new(),
                    }
                )))
            }
            "ops.prim.min" | "ops.prim.max" => {
                let items = if args.len() == 1 {
                    self.iterate(&args[0], at)?
                } else {
                    args.clone()
                };
                if items.iter().any(is_symbolic) {
                    // torch.sym_min / torch.sym_max, folded over the items
                    let op = if p == "ops.prim.min" { "min" } else { "max" };
                    let mut it = items.into_iter();
                    let mut acc = it.next().ok_or_else(|| at.bad(format!("{p} of nothing")))?;
                    for x in it {
                        acc = match self.sym_binary(op, &acc, &x, at)? {
                            Some(v) => v,
                            None => {
                                return Err(at.refuse(format!(
                                    "{p} of {} and {}",
                                    acc.kind(),
                                    x.kind()
                                )))
                            }
                        };
                    }
                    return Ok(acc);
                }
                let mut best: Option<V> = None;
                for x in items {
                    best = Some(match best {
                        None => x,
                        Some(b) => {
                            let less = matches!(
                                self.binary("<", x.clone(), b.clone(), at)?,
                                V::Bool(true)
                            );
                            if less == (p == "ops.prim.min") {
                                x
                            } else {
                                b
                            }
                        }
                    });
                }
                return best.ok_or_else(|| at.bad(format!("{p} of nothing")));
            }
            _ => {}
        }
        if p.starts_with("ops.prim.PythonOp") || p.contains("PythonOp") {
            return Err(at.refuse("prim::PythonOp (a call into Python) cannot be lowered"));
        }
        if let Some(name) = p.strip_prefix("math.") {
            let x = one(&args)?;
            let x = self.specialise(&x, at, &format!("math.{name}"))?;
            let x = match x {
                V::Int(i) => i as f64,
                V::Float(x) => x,
                other => return Err(at.refuse(format!("math.{name} of {}", other.kind()))),
            };
            return Ok(match name {
                "sqrt" => V::Float(x.sqrt()),
                "floor" => V::Int(x.floor() as i64),
                "ceil" => V::Int(x.ceil() as i64),
                "exp" => V::Float(x.exp()),
                "log" => V::Float(x.ln()),
                _ => return Err(at.refuse(format!("math.{name}"))),
            });
        }
        if p.starts_with("__torch__.") {
            if let Some((file, func)) = self.b.tree.function(p)? {
                return self.inline(&func, &file, None, args, kwargs, at);
            }
            // a NamedTuple of code/ (a class of fields, no methods): its
            // value is the tuple of them
            if let Ok(class) = self.b.tree.class(p) {
                if class.methods.is_empty() && kwargs.is_empty() {
                    return Ok(V::Tuple(args));
                }
            }
            return Err(at.refuse(format!(
                "{p}: a custom class or a function the archive does not define"
            )));
        }
        let (ns, name) = if let Some(rest) = p.strip_prefix("ops.") {
            match rest.split_once('.') {
                Some((ns, name)) => (ns.to_string(), name.to_string()),
                None => return Err(at.refuse(format!("{p}: an operator namespace without an op"))),
            }
        } else if let Some(name) = p.strip_prefix("torch.") {
            if name.contains('.') {
                return Err(at.refuse(format!("{p}: an unsupported builtin")));
            }
            ("aten".to_string(), name.to_string())
        } else {
            return Err(at.refuse(format!("{p}: an unsupported builtin")));
        };
        if ns == "prim" {
            return Err(at.refuse(format!("prim::{name}: an unsupported builtin")));
        }
        let tensor_args = args
            .iter()
            .chain(kwargs.iter().map(|(_, v)| v))
            .any(|v| matches!(v, V::Tensor(_)) || has_tensor(v));
        if ns == "aten" {
            if let Some(v) = self.python_aten(&name, &args, tensor_args, at)? {
                return Ok(v);
            }
        }
        let args: Vec<V> = args.iter().map(|a| self.b.current(a)).collect();
        let first = self.tensor_call(&ns, &name, &args, &kwargs, at);
        let symbolic = args
            .iter()
            .chain(kwargs.iter().map(|(_, v)| v))
            .any(has_symbolic);
        let out = match first {
            Err(e) if symbolic => {
                // A shape rule (or overload) that needs a symbolic argument
                // known: its example value, the inputs behind it made static.
                let what = format!("{ns}::{name}'s argument");
                let known = |lw: &mut Self, v: &V| lw.specialise(v, at, &what);
                let args = args
                    .iter()
                    .map(|a| known(self, a))
                    .collect::<Result<Vec<_>>>();
                let kwargs = kwargs
                    .iter()
                    .map(|(k, v)| Ok((k.clone(), known(self, v)?)))
                    .collect::<Result<Vec<_>>>();
                // No example value: why the value was needed, then what failed.
                let (args, kwargs) = match (args, kwargs) {
                    (Ok(a), Ok(k)) => (a, k),
                    (Err(s), _) | (_, Err(s)) => {
                        return Err(crate::error::Error::unsupported(format!("{s}: {e}")))
                    }
                };
                self.tensor_call(&ns, &name, &args, &kwargs, at)?
            }
            other => other?,
        };
        if let V::Tensor(t) = &out {
            if SIZE_LIST_OPS.contains(&name.as_str()) {
                if let Some(sizes) = args.iter().find(|a| matches!(a, V::List(_) | V::Tuple(_))) {
                    self.adopt_sizes(*t, sizes);
                }
            } else {
                self.adopt_broadcast(*t);
            }
        }
        Ok(out)
    }

    /// A tensor op, in place or not.
    fn tensor_call(
        &mut self,
        ns: &str,
        name: &str,
        args: &[V],
        kwargs: &[(String, V)],
        at: &At,
    ) -> Result<V> {
        if let Some(v) = self.b.call_in_place(ns, name, args, kwargs, at)? {
            return Ok(v);
        }
        self.b.call(ns, name, args, kwargs, at)
    }

    /// ATen builtins that TorchScript runs on Python values (`aten::add.int`,
    /// `aten::append.t`, `aten::size.int`), computed here; `None` for a
    /// tensor op.
    pub(super) fn python_aten(
        &mut self,
        name: &str,
        args: &[V],
        tensors: bool,
        at: &At,
    ) -> Result<Option<V>> {
        // Sizes are known at import where the dim is static.
        if let (Some(V::Tensor(t)), true) = (
            args.first(),
            matches!(name, "size" | "dim" | "numel" | "len" | "is_floating_point"),
        ) {
            let sizes = self.b.meta(*t).sizes.clone();
            let dtype = self.b.meta(*t).dtype;
            return Ok(Some(match (name, &args[1..]) {
                ("dim", []) => V::Int(sizes.len() as i64),
                ("is_floating_point", []) => V::Bool(dtype.is_floating()),
                ("size", []) => V::list(
                    (0..sizes.len())
                        .map(|d| self.size(*t, d as i64, at))
                        .collect::<Result<_>>()?,
                ),
                ("size", [V::Int(d)]) => self.size(*t, *d, at)?,
                ("len", []) => self.size(*t, 0, at)?,
                ("numel", []) => {
                    // The product of the sizes, symbolic where a dim is.
                    let mut n = V::Int(1);
                    for d in 0..sizes.len() {
                        let s = self.size(*t, d as i64, at)?;
                        n = self.binary("*", n, s, at)?;
                    }
                    n
                }
                _ => return Ok(None),
            }));
        }
        // List builtins, whatever their items; dropout in eval mode.
        match (name, args) {
            (
                "dropout" | "feature_dropout" | "alpha_dropout" | "dropout_" | "feature_dropout_"
                | "alpha_dropout_",
                [t @ V::Tensor(_), _, V::Bool(false)],
            ) => return Ok(Some(t.clone())),
            // the lowering is of inference without autocast, in grad mode
            // (see prim::requires_grad)
            ("is_autocast_enabled" | "is_autocast_cpu_enabled", []) => {
                return Ok(Some(V::Bool(false)))
            }
            ("is_grad_enabled", []) => return Ok(Some(V::Bool(true))),
            // `sum(l)` of a list of numbers
            ("sum", [V::List(l)])
                if l.borrow()
                    .iter()
                    .all(|x| matches!(x, V::Int(_) | V::Float(_))) =>
            {
                let items = l.borrow();
                return Ok(Some(if items.iter().all(|x| matches!(x, V::Int(_))) {
                    V::Int(
                        items
                            .iter()
                            .map(|x| if let V::Int(i) = x { *i } else { 0 })
                            .sum(),
                    )
                } else {
                    V::Float(
                        items
                            .iter()
                            .map(|x| match x {
                                V::Int(i) => *i as f64,
                                V::Float(f) => *f,
                                _ => 0.0,
                            })
                            .sum(),
                    )
                }));
            }
            ("all" | "any", [V::List(l)]) if l.borrow().iter().all(|x| matches!(x, V::Bool(_))) => {
                let items = l.borrow();
                let truth = |x: &V| matches!(x, V::Bool(true));
                let all = name == "all";
                return Ok(Some(V::Bool(if all {
                    items.iter().all(truth)
                } else {
                    items.iter().any(truth)
                })));
            }
            ("append", [V::List(l), x]) => {
                l.borrow_mut().push(x.clone());
                return Ok(Some(V::List(l.clone())));
            }
            // `d[k] = v`, `l[i] = v` as TorchScript prints them
            ("_set_item", [V::Dict(d), k, x]) => {
                let mut d = d.borrow_mut();
                match d.iter_mut().find(|(key, _)| same_key(key, k)) {
                    Some(slot) => slot.1 = x.clone(),
                    None => d.push((k.clone(), x.clone())),
                }
                return Ok(Some(V::None));
            }
            ("_set_item", [V::List(l), i, x]) => {
                let i = self.specialise(i, at, "an index into a list")?;
                let V::Int(k) = i else {
                    return Err(at.refuse(format!("a list index that is {}", i.kind())));
                };
                let mut l = l.borrow_mut();
                let n = l.len() as i64;
                let k = if k < 0 { k + n } else { k };
                if k < 0 || k >= n {
                    return Err(at.bad(format!("index {k} is out of range for a list of {n}")));
                }
                l[k as usize] = x.clone();
                return Ok(Some(V::None));
            }
            ("len", [x @ (V::List(_) | V::Tuple(_) | V::Dict(_) | V::Str(_))]) => {
                return self.builtin("len", x, at).map(Some)
            }
            ("__getitem__", [c @ (V::List(_) | V::Tuple(_) | V::Dict(_)), i]) => {
                return self.subscript(c.clone(), i.clone(), at).map(Some)
            }
            ("__is__", [a, b]) => return self.binary("is", a.clone(), b.clone(), at).map(Some),
            ("__contains__", [c @ (V::List(_) | V::Tuple(_) | V::Dict(_) | V::Str(_)), x]) => {
                return self.binary("in", x.clone(), c.clone(), at).map(Some)
            }
            ("__isnot__", [a, b]) => {
                return self.binary("is not", a.clone(), b.clone(), at).map(Some)
            }
            ("list", [x @ (V::List(_) | V::Tuple(_))]) => {
                return Ok(Some(V::list(self.iterate(x, at)?)))
            }
            ("copy", [V::List(l)]) => return Ok(Some(V::list(l.borrow().clone()))),
            // `l[start:end:step]` of a list (`aten::slice.t`)
            ("slice", [V::List(l), rest @ ..]) if rest.len() <= 3 => {
                let items = l.borrow().clone();
                let n = items.len() as i64;
                let bound = |v: Option<&V>, default: i64| match v {
                    None | Some(V::None) => Ok(default),
                    Some(V::Int(i)) => Ok(if *i < 0 { (i + n).max(0) } else { (*i).min(n) }),
                    Some(other) => Err(at.refuse(format!("a list sliced by {}", other.kind()))),
                };
                let (start, end) = (bound(rest.first(), 0)?, bound(rest.get(1), n)?);
                let step = match rest.get(2) {
                    None => 1,
                    Some(V::Int(s)) if *s > 0 => *s,
                    Some(other) => {
                        return Err(at.refuse(format!("a list sliced with step {}", other.kind())))
                    }
                };
                let picked = (start..end.max(start))
                    .step_by(step as usize)
                    .map(|i| items[i as usize].clone());
                return Ok(Some(V::list(picked.collect())));
            }
            _ => {}
        }
        if tensors {
            return Ok(None);
        }
        Ok(Some(match (name, args) {
            ("add", [a, b]) => self.binary("+", a.clone(), b.clone(), at)?,
            ("sub", [a, b]) => self.binary("-", a.clone(), b.clone(), at)?,
            ("rsub", [a, b]) => self.binary("-", b.clone(), a.clone(), at)?,
            ("mul", [a, b]) => self.binary("*", a.clone(), b.clone(), at)?,
            ("div", [a, b]) => self.binary("/", a.clone(), b.clone(), at)?,
            ("floordiv" | "floor_divide", [a, b]) => self.binary("//", a.clone(), b.clone(), at)?,
            ("true_divide", [a, b]) => self.binary("/", a.clone(), b.clone(), at)?,
            ("remainder", [a, b]) => self.binary("%", a.clone(), b.clone(), at)?,
            ("pow", [a, b]) => self.binary("**", a.clone(), b.clone(), at)?,
            ("eq", [a, b]) => self.binary("==", a.clone(), b.clone(), at)?,
            ("ne", [a, b]) => self.binary("!=", a.clone(), b.clone(), at)?,
            ("lt", [a, b]) => self.binary("<", a.clone(), b.clone(), at)?,
            ("le", [a, b]) => self.binary("<=", a.clone(), b.clone(), at)?,
            ("gt", [a, b]) => self.binary(">", a.clone(), b.clone(), at)?,
            ("ge", [a, b]) => self.binary(">=", a.clone(), b.clone(), at)?,
            ("neg", [a]) => self.binary("-", V::Int(0), a.clone(), at)?,
            ("__is__", [a, b]) => self.binary("is", a.clone(), b.clone(), at)?,
            ("__isnot__", [a, b]) => self.binary("is not", a.clone(), b.clone(), at)?,
            ("__not__", [a]) => V::Bool(!self.truth(a, at, "a not")?),
            ("Int", [a]) | ("IntImplicit", [a]) => self.builtin("int", a, at)?,
            ("Float", [a]) | ("FloatImplicit", [a]) => self.builtin("float", a, at)?,
            ("Bool", [a]) => self.builtin("bool", a, at)?,
            ("floor", [a]) => self.builtin("floor", a, at)?,
            ("__range_length", [V::Int(lo), V::Int(hi), V::Int(step)]) if *step != 0 => {
                let span = hi - lo;
                V::Int(if (span > 0) != (*step > 0) || span == 0 {
                    0
                } else {
                    (span + step - step.signum()) / step
                })
            }
            ("__derive_index", [V::Int(i), V::Int(start), V::Int(step)]) => {
                V::Int(start + i * step)
            }
            ("sqrt", [V::Int(i)]) => V::Float((*i as f64).sqrt()),
            ("sqrt", [V::Float(x)]) => V::Float(x.sqrt()),
            ("ceil", [a]) => self.builtin("ceil", a, at)?,
            ("format", _) | ("warn", _) => V::Str(String::new()),
            // Anything else with no tensor argument is a factory
            // (`torch.zeros([2, 3])`): a tensor op.
            _ => return Ok(None),
        }))
    }

    pub(super) fn size(&mut self, t: crate::ir::ValueId, d: i64, at: &At) -> Result<V> {
        let sizes = self.b.meta(t).sizes.clone();
        let dim = crate::ir::normalize_dim(d, sizes.len())
            .map_err(|e| e.at(format!("{}:{}", at.file, at.line)))?;
        if let Some(n) = sizes[dim].as_int() {
            return Ok(V::Int(n));
        }
        // A symbolic dim: `aten.sym_size.int`, a SymInt value.
        // The value is named as its node, as torch.export names them.
        let name = self.b.fresh("sym_size_int");
        self.b.graph.values.push(crate::ir::Value {
            name: name.clone(),
            kind: ValueKind::SymInt(sizes[dim].clone()),
        });
        let v = crate::ir::ValueId(self.b.graph.values.len() as u32 - 1);
        self.b.graph.nodes.push(crate::ir::Node {
            name,
            target: crate::ir::Target::op("aten", "sym_size", "int"),
            inputs: vec![
                crate::ir::NamedArg {
                    name: "self".into(),
                    arg: Argument::Tensor(t),
                    kind: crate::ir::ArgKind::Positional,
                    defaulted: false,
                },
                crate::ir::NamedArg {
                    name: "dim".into(),
                    arg: Argument::Int(dim as i64),
                    kind: crate::ir::ArgKind::Positional,
                    defaulted: false,
                },
            ],
            outputs: vec![Argument::SymInt(crate::ir::SymRef::Value(v))],
            meta: Default::default(),
            is_hop_single_tensor_return: None,
        });
        Ok(V::SymInt(v))
    }

    pub(super) fn builtin(&mut self, name: &str, x: &V, at: &At) -> Result<V> {
        Ok(match (name, x) {
            ("int", V::Int(i)) => V::Int(*i),
            ("int", V::Float(f)) => V::Int(f.trunc() as i64),
            ("int", V::Bool(b)) => V::Int(*b as i64),
            ("int" | "float" | "bool", v) if is_symbolic(v) => {
                self.sym_unary(name, v, at)?.unwrap_or(V::None)
            }
            (_, v) if is_symbolic(v) => {
                let known = self.specialise(v, at, &format!("{name}()"))?;
                self.builtin(name, &known, at)?
            }
            ("float", V::Int(i)) => V::Float(*i as f64),
            ("float", V::Float(f)) => V::Float(*f),
            ("float", V::Bool(b)) => V::Float(*b as i64 as f64),
            ("float", V::Str(s)) => V::Float(
                s.parse()
                    .map_err(|_| at.bad(format!("float({s:?})")))?,
            ),
            ("bool", V::Tensor(t)) => {
                let n: Option<i64> = self.b.meta(*t).sizes.iter().map(Sym::as_int).product();
                if n.is_some_and(|n| n != 1) {
                    return Err(at.bad(format!(
                        "bool() of a tensor of {} elements",
                        n.unwrap_or(0)
                    )));
                }
                V::Pred(*t)
            }
            ("bool", v) => V::Bool(self.truth(v, at, "bool()")?),
            ("floor", V::Float(f)) => V::Int(f.floor() as i64),
            ("ceil", V::Float(f)) => V::Int(f.ceil() as i64),
            ("floor" | "ceil", V::Int(i)) => V::Int(*i),
            ("len", V::List(l)) => V::Int(l.borrow().len() as i64),
            ("len", V::Tuple(t)) => V::Int(t.len() as i64),
            ("len", V::Dict(d)) => V::Int(d.borrow().len() as i64),
            ("len", V::Str(s)) => V::Int(s.chars().count() as i64),
            ("len", V::Tensor(t)) => self.size(*t, 0, at)?,
            ("str", V::Str(s)) => V::Str(s.clone()),
            ("str", V::Int(i)) => V::Str(i.to_string()),
            (_, V::Tensor(_)) => {
                return Err(at.refuse(format!(
                    "{name}() of a tensor reads its data (Tensor.item / aten::{}), a data-dependent value",
                    match name {
                        "int" => "Int",
                        "float" => "Float",
                        "bool" => "Bool",
                        n => n,
                    }
                )))
            }
            (_, v) => return Err(at.refuse(format!("{name}() of {}", v.kind()))),
        })
    }

    pub(super) fn binary(&mut self, op: &str, l: V, r: V, at: &At) -> Result<V> {
        use V::*;
        if matches!(l, Tensor(_)) || matches!(r, Tensor(_)) {
            let (name, swap) = match op {
                "+" => ("add", false),
                "-" => ("sub", false),
                "*" => ("mul", false),
                "/" => ("div", false),
                "//" => ("floor_divide", false),
                "%" => ("remainder", false),
                "**" => ("pow", false),
                "@" => ("matmul", false),
                "==" => ("eq", false),
                "!=" => ("ne", false),
                "<" => ("lt", false),
                "<=" => ("le", false),
                ">" => ("gt", false),
                ">=" => ("ge", false),
                "&" => ("bitwise_and", false),
                "|" => ("bitwise_or", false),
                "^" => ("bitwise_xor", false),
                "is" | "is not" => {
                    let same = matches!((&l, &r), (Tensor(a), Tensor(b)) if a == b);
                    return Ok(Bool(same == (op == "is")));
                }
                _ => return Err(at.refuse(format!("operator {op} on tensors"))),
            };
            let (a, b) = match (&l, &r) {
                (Tensor(_), _) => (l, r),
                _ if matches!(op, "+" | "*" | "==" | "!=" | "&" | "|" | "^") => (r, l),
                _ if op == "-" => return self.b.call("aten", "rsub", &[r, l], &[], at),
                _ => {
                    let lt = self.b.call("aten", "scalar_tensor", &[l], &[], at)?;
                    (lt, r)
                }
            };
            let _ = swap;
            let out = self.b.call("aten", name, &[a, b], &[], at)?;
            if let V::Tensor(t) = &out {
                self.adopt_broadcast(*t);
            }
            return Ok(out);
        }
        // Membership needs the values: a symbolic one takes its example.
        if matches!(op, "in" | "not in") && (has_symbolic(&l) || has_symbolic(&r)) {
            let l = self.specialise(&l, at, &format!("an '{op}'"))?;
            let r = self.specialise(&r, at, &format!("an '{op}'"))?;
            return self.binary(op, l, r, at);
        }
        // Arithmetic and comparisons on symbolic scalars: graph nodes.
        if !matches!(op, "is" | "is not" | "in" | "not in") {
            if let Some(v) = self.sym_binary(op, &l, &r, at)? {
                return Ok(v);
            }
        }
        let num = |v: &V| -> Option<f64> {
            match v {
                Int(i) => Some(*i as f64),
                Float(f) => Some(*f),
                Bool(b) => Some(*b as i64 as f64),
                _ => Option::None,
            }
        };
        Ok(match (op, &l, &r) {
            ("is", a, b) => Bool(is_same(a, b)),
            ("is not", a, b) => Bool(!is_same(a, b)),
            ("in", x, List(items)) => Bool(items.borrow().iter().any(|y| same_key(x, y))),
            ("in", x, Tuple(items)) => Bool(items.iter().any(|y| same_key(x, y))),
            ("in", x, Dict(d)) => Bool(d.borrow().iter().any(|(k, _)| same_key(x, k))),
            ("in", Str(a), Str(b)) => Bool(b.contains(a.as_str())),
            ("not in", ..) => match self.binary("in", l, r, at)? {
                Bool(b) => Bool(!b),
                v => v,
            },
            ("+", Str(a), Str(b)) => Str(format!("{a}{b}")),
            ("+", List(a), List(b)) => {
                let mut v = a.borrow().clone();
                v.extend(b.borrow().iter().cloned());
                V::list(v)
            }
            ("+", Tuple(a), Tuple(b)) => Tuple(a.iter().chain(b).cloned().collect()),
            ("==" | "!=", List(_) | Tuple(_), List(_) | Tuple(_)) => {
                let (a, b) = (self.iterate(&l, at)?, self.iterate(&r, at)?);
                let mut equal = a.len() == b.len();
                for (x, y) in a.iter().zip(&b) {
                    if !equal {
                        break;
                    }
                    equal = match self.binary("==", x.clone(), y.clone(), at)? {
                        Bool(e) => e,
                        // sizes compared (`x.size() == [2, 3]`): decided by the example
                        v @ SymBool(_) => self.truth(&v, at, "a comparison of lists")?,
                        _ => {
                            return Err(
                                at.refuse("comparing lists of tensors (a data-dependent result)")
                            )
                        }
                    };
                }
                Bool(equal == (op == "=="))
            }
            ("==", Str(a), Str(b)) => Bool(a == b),
            ("!=", Str(a), Str(b)) => Bool(a != b),
            ("==", None, None) => Bool(true),
            ("==", None, _) | ("==", _, None) => Bool(false),
            ("!=", None, None) => Bool(false),
            ("!=", None, _) | ("!=", _, None) => Bool(true),
            (_, Int(a), Int(b)) => {
                let (a, b) = (*a, *b);
                match op {
                    "+" => Int(a.wrapping_add(b)),
                    "-" => Int(a.wrapping_sub(b)),
                    "*" => Int(a.wrapping_mul(b)),
                    "/" => Float(a as f64 / b as f64),
                    "//" | "%" if b == 0 => return Err(at.bad("integer division by zero")),
                    "//" | "%" if a == i64::MIN && b == -1 => {
                        return Err(at.bad(format!("integer overflow in {a} {op} {b}")))
                    }
                    "//" => {
                        Int(a.div_euclid(b) - if b < 0 && a.rem_euclid(b) != 0 { 1 } else { 0 })
                    }
                    "%" => {
                        // Python's sign: the divisor's
                        let r = a % b;
                        Int(if r != 0 && (r < 0) != (b < 0) {
                            r + b
                        } else {
                            r
                        })
                    }
                    "**" if b >= 0 => Int(a.wrapping_pow(b.min(u32::MAX as i64) as u32)),
                    "**" => Float((a as f64).powf(b as f64)),
                    "<<" => Int(a.wrapping_shl(b as u32)),
                    ">>" => Int(a.wrapping_shr(b as u32)),
                    "&" => Int(a & b),
                    "|" => Int(a | b),
                    "^" => Int(a ^ b),
                    "==" => Bool(a == b),
                    "!=" => Bool(a != b),
                    "<" => Bool(a < b),
                    "<=" => Bool(a <= b),
                    ">" => Bool(a > b),
                    ">=" => Bool(a >= b),
                    _ => return Err(at.refuse(format!("operator {op} on ints"))),
                }
            }
            (_, Bool(a), Bool(b)) if matches!(op, "&" | "|" | "^" | "==" | "!=") => match op {
                "&" => Bool(a & b),
                "|" => Bool(a | b),
                "^" => Bool(a ^ b),
                "==" => Bool(a == b),
                _ => Bool(a != b),
            },
            (_, a, b) if num(a).is_some() && num(b).is_some() => {
                let (x, y) = (num(a).unwrap_or(0.0), num(b).unwrap_or(0.0));
                match op {
                    "+" => Float(x + y),
                    "-" => Float(x - y),
                    "*" => Float(x * y),
                    "/" => Float(x / y),
                    "//" => Float((x / y).floor()),
                    "%" => Float(x - y * (x / y).floor()),
                    "**" => Float(x.powf(y)),
                    "==" => Bool(x == y),
                    "!=" => Bool(x != y),
                    "<" => Bool(x < y),
                    "<=" => Bool(x <= y),
                    ">" => Bool(x > y),
                    ">=" => Bool(x >= y),
                    _ => return Err(at.refuse(format!("operator {op} on numbers"))),
                }
            }
            _ => return Err(at.refuse(format!("operator {op} on {} and {}", l.kind(), r.kind()))),
        })
    }
}

fn has_tensor(v: &V) -> bool {
    match v {
        V::Tensor(_) => true,
        V::List(l) => l.borrow().iter().any(has_tensor),
        V::Tuple(t) => t.iter().any(has_tensor),
        _ => false,
    }
}
