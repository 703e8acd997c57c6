//! Python scalars known only when the graph runs: the `int`, `float` and
//! `bool` arguments of the method (SymInt, SymFloat and SymBool graph
//! inputs, as torch.export makes of a dynamic scalar), the sizes of
//! symbolic dims, and the arithmetic on them, emitted as torch.export
//! emits it (`_operator.mul`, `_operator.floordiv`, `torch.sym_float`),
//! so that `ir-run` evaluates it for the values it is given.
//!
//! Where the evaluator needs such a value at import (the condition of a
//! Python `if` or `while`, a `range`, a list index, an argument a shape
//! rule must know), the value is specialised: the value its example had
//! (its hint) is used, and every input symbol it depends on is pinned to
//! its example value. A pinned symbol is written as a constant into the
//! program ([`pin_graph`]), so its input becomes static and `ir-run`
//! refuses another value for it, naming the input. A value no example
//! gives (a size made inside the graph) is refused by name.

use std::collections::{BTreeMap, HashSet};

use super::lower::Lower;
use super::ops::{sym_contiguous, At, V};
use crate::error::Result;
use crate::ir::{
    ArgKind, Argument, Graph, Hint, InputKind, NamedArg, Node, NodeMeta, RangeConstraint, Sym,
    SymExpr, SymRef, Target, TargetKind, TensorMeta, ValueId, ValueKind,
};

/// The kind of a Python scalar.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) enum Kind {
    Int,
    Float,
    Bool,
}

impl Kind {
    fn value_kind(self, sym: Sym) -> ValueKind {
        match self {
            Kind::Int => ValueKind::SymInt(sym),
            Kind::Float => ValueKind::SymFloat(sym),
            Kind::Bool => ValueKind::SymBool(sym),
        }
    }

    fn value(self, v: ValueId) -> V {
        match self {
            Kind::Int => V::SymInt(v),
            Kind::Float => V::SymFloat(v),
            Kind::Bool => V::SymBool(v),
        }
    }

    fn arg(self, r: SymRef) -> Argument {
        match self {
            Kind::Int => Argument::SymInt(r),
            Kind::Float => Argument::SymFloat(r),
            Kind::Bool => Argument::SymBool(r),
        }
    }
}

/// One operand of a Python operator on scalars: the argument a node
/// takes, and its value as a symbolic expression (a literal, or the
/// value's recorded `Sym`).
struct Operand {
    kind: Kind,
    arg: Argument,
    sym: Sym,
}

/// A Python operator on scalars: the function torch.export calls for it,
/// the sympy function of its recorded expression, and whether it gives a
/// bool (a comparison).
const OPERATORS: &[(&str, &str, &str, &str, bool)] = &[
    ("+", "_operator", "add", "Add", false),
    ("-", "_operator", "sub", "Sub", false),
    ("*", "_operator", "mul", "Mul", false),
    ("/", "_operator", "truediv", "TrueDiv", false),
    ("//", "_operator", "floordiv", "FloorDiv", false),
    ("%", "_operator", "mod", "PythonMod", false),
    ("**", "_operator", "pow", "Pow", false),
    ("==", "_operator", "eq", "Eq", true),
    ("!=", "_operator", "ne", "Ne", true),
    ("<", "_operator", "lt", "StrictLessThan", true),
    ("<=", "_operator", "le", "LessThan", true),
    (">", "_operator", "gt", "StrictGreaterThan", true),
    (">=", "_operator", "ge", "GreaterThan", true),
    ("min", "torch", "sym_min", "Min", false),
    ("max", "torch", "sym_max", "Max", false),
];

/// The value of a hint as a Python value.
fn hint_value(h: Hint) -> V {
    match h {
        Hint::Int(i) => V::Int(i),
        Hint::Float(f) => V::Float(f),
        Hint::Bool(b) => V::Bool(b),
    }
}

fn value_hint(v: &V) -> Option<Hint> {
    match v {
        V::Int(i) => Some(Hint::Int(*i)),
        V::Float(f) => Some(Hint::Float(*f)),
        V::Bool(b) => Some(Hint::Bool(*b)),
        _ => None,
    }
}

/// The value a symbolic scalar had in the example, where known.
fn sym_hint(s: &Sym) -> Option<Hint> {
    match s {
        Sym::Int(i) => Some(Hint::Int(*i)),
        Sym::Float(f) => Some(Hint::Float(*f)),
        Sym::Bool(b) => Some(Hint::Bool(*b)),
        Sym::Expr { hint, .. } => *hint,
    }
}

fn sym_of_hint(h: Hint) -> Sym {
    match h {
        Hint::Int(i) => Sym::Int(i),
        Hint::Float(f) => Sym::Float(f),
        Hint::Bool(b) => Sym::Bool(b),
    }
}

/// A symbolic scalar as a sympy expression.
fn expr_of(s: &Sym) -> SymExpr {
    let call = |func: &str, arg: SymExpr| SymExpr::Call {
        func: func.into(),
        args: vec![arg],
        kwargs: vec![],
    };
    match s {
        Sym::Int(i) => call("Integer", SymExpr::Int(*i)),
        Sym::Float(f) => call("Float", SymExpr::Float(*f)),
        Sym::Bool(b) => SymExpr::Bool(*b),
        Sym::Expr { expr, .. } => expr.clone(),
    }
}

/// Whether a value is a symbolic scalar (a graph value, not a Python one).
pub(super) fn is_symbolic(v: &V) -> bool {
    matches!(v, V::SymInt(_) | V::SymFloat(_) | V::SymBool(_))
}

/// Whether a value holds a symbolic scalar, in a list or tuple too.
pub(super) fn has_symbolic(v: &V) -> bool {
    match v {
        V::List(l) => l.borrow().iter().any(has_symbolic),
        V::Tuple(t) => t.iter().any(has_symbolic),
        other => is_symbolic(other),
    }
}

impl Lower<'_> {
    /// A graph input for an `int`, `float` or `bool` argument: a fresh
    /// symbol whose hint is the example's value (none without an example).
    pub(super) fn scalar_input(
        &mut self,
        name: &str,
        ty: &str,
        example: Option<V>,
    ) -> (V, Argument) {
        let kind = match ty {
            "int" => Kind::Int,
            "float" => Kind::Float,
            _ => Kind::Bool,
        };
        let sym = self.b.symbol("s", None);
        let symbol = match &sym {
            Sym::Expr { expr, .. } => expr.as_symbol().unwrap_or_default().to_string(),
            _ => String::new(),
        };
        // An int argument may be negative; a float or bool has no range.
        match kind {
            Kind::Int => {
                for r in self.b.ranges.iter_mut().filter(|r| r.symbol == symbol) {
                    r.min = None;
                }
            }
            _ => self.b.ranges.retain(|r| r.symbol != symbol),
        }
        let hint = example
            .as_ref()
            .and_then(value_hint)
            .map(|h| match (kind, h) {
                (Kind::Float, Hint::Int(i)) => Hint::Float(i as f64),
                (Kind::Int, Hint::Bool(b)) => Hint::Int(b as i64),
                (Kind::Bool, Hint::Int(i)) => Hint::Bool(i != 0),
                (_, h) => h,
            });
        if let Some(h) = hint {
            self.input_hints.insert(symbol.clone(), h);
        }
        self.symbol_origin
            .insert(symbol.clone(), format!("input {name}"));
        let sym = match sym {
            Sym::Expr { expr, .. } => Sym::Expr { expr, hint },
            other => other,
        };
        let v = self.b.new_value(name, kind.value_kind(sym));
        (kind.value(v), kind.arg(SymRef::Value(v)))
    }

    /// Records the example value of an input dim's symbol, so that a
    /// specialisation may pin it.
    pub(super) fn note_input_dim(&mut self, dim: &Sym, input: &str, k: usize) {
        if let Sym::Expr { expr, hint } = dim {
            if let Some(name) = expr.as_symbol() {
                if let Some(h) = hint {
                    self.input_hints.insert(name.to_string(), *h);
                }
                self.symbol_origin
                    .insert(name.to_string(), format!("dim {k} of input {input}"));
            }
        }
    }

    /// The inputs behind some symbols, for messages (`input n, dim 0 of
    /// input x`), or the symbols themselves where no input gives them.
    fn origins(&self, symbols: &[String]) -> String {
        symbols
            .iter()
            .map(|s| {
                self.symbol_origin
                    .get(s)
                    .cloned()
                    .unwrap_or_else(|| s.clone())
            })
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// The recorded value of a symbolic scalar.
    fn sym_value(&self, v: ValueId) -> Sym {
        match &self.b.graph.values[v.index()].kind {
            ValueKind::SymInt(s) | ValueKind::SymFloat(s) | ValueKind::SymBool(s) => s.clone(),
            _ => Sym::Int(0),
        }
    }

    /// Whether every symbol of `s` is pinned (its value is then its hint).
    fn settled(&self, s: &Sym) -> bool {
        match s {
            Sym::Expr { expr, hint } => {
                let mut names = Vec::new();
                expr.symbols(&mut names);
                hint.is_some() && names.iter().all(|n| self.pinned.contains_key(n))
            }
            _ => true,
        }
    }

    fn operand(&self, v: &V) -> Option<Operand> {
        let (kind, id) = match v {
            V::Int(i) => {
                return Some(Operand {
                    kind: Kind::Int,
                    arg: Argument::Int(*i),
                    sym: Sym::Int(*i),
                })
            }
            V::Float(f) => {
                return Some(Operand {
                    kind: Kind::Float,
                    arg: Argument::Float(*f),
                    sym: Sym::Float(*f),
                })
            }
            V::Bool(b) => {
                return Some(Operand {
                    kind: Kind::Bool,
                    arg: Argument::Bool(*b),
                    sym: Sym::Bool(*b),
                })
            }
            V::SymInt(x) => (Kind::Int, *x),
            V::SymFloat(x) => (Kind::Float, *x),
            V::SymBool(x) => (Kind::Bool, *x),
            _ => return None,
        };
        let sym = self.sym_value(id);
        // A value whose symbols are pinned is a constant from here on.
        if self.settled(&sym) {
            if let Some(h) = sym_hint(&sym) {
                return self.operand(&hint_value(h));
            }
        }
        Some(Operand {
            kind,
            arg: kind.arg(SymRef::Value(id)),
            sym,
        })
    }

    /// A Python operator (`+`, `//`, `<`, `min` ...) where an operand is a
    /// symbolic scalar: a node of torch.export's function for it, whose
    /// value is the expression of its operands with the value the
    /// examples give. `None` when neither operand is symbolic, or an
    /// operand is no scalar.
    pub(super) fn sym_binary(&mut self, op: &str, l: &V, r: &V, at: &At) -> Result<Option<V>> {
        if !is_symbolic(l) && !is_symbolic(r) {
            return Ok(None);
        }
        let (Some(a), Some(b)) = (self.operand(l), self.operand(r)) else {
            return Ok(None);
        };
        let literal = |o: &Operand| !matches!(o.sym, Sym::Expr { .. });
        if literal(&a) && literal(&b) {
            // Both settled by a specialisation: a Python value again.
            let x = hint_value(sym_hint(&a.sym).unwrap_or(Hint::Int(0)));
            let y = hint_value(sym_hint(&b.sym).unwrap_or(Hint::Int(0)));
            return self.scalar_op(op, x, y, at).map(Some);
        }
        let (ns, func, sympy, compare) = match (op, a.kind, b.kind) {
            ("&", Kind::Bool, Kind::Bool) => ("_operator", "and_", "And", true),
            ("|", Kind::Bool, Kind::Bool) => ("_operator", "or_", "Or", true),
            _ => match OPERATORS.iter().find(|o| o.0 == op) {
                Some(&(_, ns, func, sympy, compare)) => (ns, func, sympy, compare),
                None => {
                    return Err(at.refuse(format!(
                        "operator {op} on a symbolic {}: ts2ir emits + - * / // % ** and comparisons on symbolic scalars",
                        match (a.kind, b.kind) {
                            (Kind::Float, _) | (_, Kind::Float) => "float",
                            (Kind::Bool, Kind::Bool) => "bool",
                            _ => "int",
                        }
                    )))
                }
            },
        };
        let out = if compare {
            Kind::Bool
        } else if op == "/" || a.kind == Kind::Float || b.kind == Kind::Float {
            Kind::Float
        } else {
            Kind::Int
        };
        // The example's value, by Python's own rules on the hints.
        let hint = match (sym_hint(&a.sym), sym_hint(&b.sym)) {
            (Some(x), Some(y)) => {
                value_hint(&self.scalar_op(op, hint_value(x), hint_value(y), at)?)
            }
            _ => None,
        };
        let expr = match sympy {
            // a - b as sympy writes it: a + (-1)*b
            "Sub" => SymExpr::Call {
                func: "Add".into(),
                args: vec![
                    expr_of(&a.sym),
                    match b.sym {
                        Sym::Int(k) => expr_of(&Sym::Int(k.wrapping_neg())),
                        Sym::Float(x) => expr_of(&Sym::Float(-x)),
                        _ => SymExpr::Call {
                            func: "Mul".into(),
                            args: vec![expr_of(&Sym::Int(-1)), expr_of(&b.sym)],
                            kwargs: vec![],
                        },
                    },
                ],
                kwargs: vec![],
            },
            "TrueDiv" if a.kind == Kind::Int && b.kind == Kind::Int => SymExpr::Call {
                func: "IntTrueDiv".into(),
                args: vec![expr_of(&a.sym), expr_of(&b.sym)],
                kwargs: vec![],
            },
            "TrueDiv" => SymExpr::Call {
                func: "FloatTrueDiv".into(),
                args: vec![expr_of(&a.sym), expr_of(&b.sym)],
                kwargs: vec![],
            },
            f => SymExpr::Call {
                func: f.into(),
                args: vec![expr_of(&a.sym), expr_of(&b.sym)],
                kwargs: vec![],
            },
        };
        Ok(Some(self.sym_node(
            ns,
            func,
            vec![a.arg, b.arg],
            out,
            expr,
            hint,
            at,
        )))
    }

    /// A Python operator on Python values, `min` and `max` included.
    fn scalar_op(&mut self, op: &str, x: V, y: V, at: &At) -> Result<V> {
        match op {
            "min" | "max" => {
                let less = matches!(self.binary("<", y.clone(), x.clone(), at)?, V::Bool(true));
                Ok(if less == (op == "min") { y } else { x })
            }
            _ => self.binary(op, x, y, at),
        }
    }

    /// A function of one symbolic scalar: `-n` (`_operator.neg`), `not b`
    /// (`torch.sym_not`), `float(n)` (`torch.sym_float`), `int(x)`
    /// (`torch.sym_int`). `None` when `v` is not symbolic.
    pub(super) fn sym_unary(&mut self, op: &str, v: &V, at: &At) -> Result<Option<V>> {
        if !is_symbolic(v) {
            return Ok(None);
        }
        let Some(a) = self.operand(v) else {
            return Ok(None);
        };
        let (ns, func, sympy, out) = match (op, a.kind) {
            ("-", k) => (
                "_operator",
                "neg",
                "Neg",
                if k == Kind::Float {
                    Kind::Float
                } else {
                    Kind::Int
                },
            ),
            ("not", _) => ("torch", "sym_not", "Not", Kind::Bool),
            ("float", Kind::Float) | ("int", Kind::Int) | ("bool", Kind::Bool) => {
                return Ok(Some(v.clone()))
            }
            ("float", _) => ("torch", "sym_float", "ToFloat", Kind::Float),
            ("int", Kind::Float) => ("torch", "sym_int", "TruncToInt", Kind::Int),
            ("int", Kind::Bool) => ("torch", "sym_int", "TruncToInt", Kind::Int),
            ("bool", _) => return self.sym_binary("!=", v, &V::Int(0), at),
            _ => return Err(at.refuse(format!("{op} of a symbolic scalar"))),
        };
        if !matches!(a.sym, Sym::Expr { .. }) {
            let x = hint_value(sym_hint(&a.sym).unwrap_or(Hint::Int(0)));
            return Ok(Some(match (op, x) {
                ("-", V::Int(i)) => V::Int(-i),
                ("-", V::Float(f)) => V::Float(-f),
                ("-", V::Bool(b)) => V::Int(-(b as i64)),
                ("not", x) => V::Bool(!self.truth(&x, at, "a not")?),
                (name, x) => self.builtin(name, &x, at)?,
            }));
        }
        let hint = sym_hint(&a.sym).and_then(|h| match (op, h) {
            ("-", Hint::Int(i)) => Some(Hint::Int(-i)),
            ("-", Hint::Float(f)) => Some(Hint::Float(-f)),
            ("-", Hint::Bool(b)) => Some(Hint::Int(-(b as i64))),
            ("not", Hint::Bool(b)) => Some(Hint::Bool(!b)),
            ("float", Hint::Int(i)) => Some(Hint::Float(i as f64)),
            ("float", Hint::Bool(b)) => Some(Hint::Float(b as i64 as f64)),
            ("int", Hint::Float(f)) => Some(Hint::Int(f.trunc() as i64)),
            ("int", Hint::Bool(b)) => Some(Hint::Int(b as i64)),
            _ => None,
        });
        let expr = SymExpr::Call {
            func: sympy.into(),
            args: vec![expr_of(&a.sym)],
            kwargs: vec![],
        };
        Ok(Some(self.sym_node(
            ns,
            func,
            vec![a.arg],
            out,
            expr,
            hint,
            at,
        )))
    }

    #[allow(clippy::too_many_arguments)]
    fn sym_node(
        &mut self,
        ns: &str,
        func: &str,
        args: Vec<Argument>,
        out: Kind,
        expr: SymExpr,
        hint: Option<Hint>,
        at: &At,
    ) -> V {
        let sym = Sym::Expr { expr, hint };
        let name = self.b.fresh(func);
        self.b.graph.values.push(crate::ir::Value {
            name: name.clone(),
            kind: out.value_kind(sym),
        });
        let v = ValueId(self.b.graph.values.len() as u32 - 1);
        let names = ["a", "b"];
        self.b.graph.nodes.push(Node {
            name,
            target: Target {
                kind: TargetKind::Python,
                namespace: ns.into(),
                name: func.into(),
                overload: String::new(),
            },
            inputs: args
                .into_iter()
                .enumerate()
                .map(|(i, arg)| NamedArg {
                    name: names.get(i).copied().unwrap_or("c").into(),
                    arg,
                    kind: ArgKind::Positional,
                    defaulted: false,
                })
                .collect(),
            outputs: vec![out.arg(SymRef::Value(v))],
            meta: NodeMeta {
                stack_trace: Some(format!("{}:{}", at.file, at.line)),
                module_stack: (!self.b.module_path.is_empty())
                    .then(|| format!("L__self__,{},", self.b.module_path)),
                other: Vec::new(),
            },
            is_hop_single_tensor_return: None,
        });
        out.value(v)
    }

    /// The value a symbolic scalar had in the example, where the import
    /// needs it (`what`: an if, a range ...): every input symbol it depends
    /// on is pinned to its example value. Other values are returned as
    /// they are; lists and tuples item by item.
    pub(super) fn specialise(&mut self, v: &V, at: &At, what: &str) -> Result<V> {
        let id = match v {
            V::SymInt(x) | V::SymFloat(x) | V::SymBool(x) => *x,
            V::List(l) => {
                let items = l.borrow().clone();
                let items = items
                    .iter()
                    .map(|x| self.specialise(x, at, what))
                    .collect::<Result<Vec<_>>>()?;
                return Ok(V::list(items));
            }
            V::Tuple(t) => {
                return Ok(V::Tuple(
                    t.iter()
                        .map(|x| self.specialise(x, at, what))
                        .collect::<Result<Vec<_>>>()?,
                ))
            }
            other => return Ok(other.clone()),
        };
        let sym = self.sym_value(id);
        let (expr, hint) = match sym {
            Sym::Expr { expr, hint } => (expr, hint),
            literal => return Ok(hint_value(sym_hint(&literal).unwrap_or(Hint::Int(0)))),
        };
        let name = self.b.graph.values[id.index()].name.clone();
        let mut names = Vec::new();
        expr.symbols(&mut names);
        let Some(hint) = hint else {
            return Err(at.refuse(format!(
                "{what} needs the value of {expr} (from {}) at import, and no example gives it: give --example-inputs",
                self.origins(&names)
            )));
        };
        for n in &names {
            let Some(h) = self.input_hints.get(n).copied() else {
                return Err(at.refuse(format!(
                    "{what} needs the value of {expr} ('{name}') at import, which depends on {n}, a size only known when the graph runs (a data-dependent value)"
                )));
            };
            self.pinned.insert(n.clone(), h);
        }
        Ok(hint_value(hint))
    }

    /// A pointwise op's output (families pointwise and activation): a
    /// dim its shape rule left unknown takes the dim its tensor inputs
    /// agree on there (right-aligned, static 1s broadcast), so sizes stay
    /// tied to the inputs' symbols through elementwise arithmetic.
    pub(super) fn adopt_broadcast(&mut self, t: ValueId) {
        let Some(node) = self.b.graph.nodes.last() else {
            return;
        };
        let mut outs = Vec::new();
        node.outputs.iter().for_each(|o| o.value_refs(&mut outs));
        let family = crate::schema::family_of(&node.target.to_string());
        if !outs.contains(&t) || !matches!(family, Some("pointwise" | "activation")) {
            return;
        }
        let mut inputs: Vec<Vec<Sym>> = Vec::new();
        for a in &node.inputs {
            if let Argument::Tensor(v) = a.arg {
                if let ValueKind::Tensor(m) = &self.b.graph.values[v.index()].kind {
                    inputs.push(m.sizes.clone());
                }
            }
        }
        let meta = self.b.meta(t).clone();
        let rank = meta.sizes.len();
        if inputs.iter().any(|s| s.len() > rank) {
            return;
        }
        let mut dropped = Vec::new();
        let mut sizes = meta.sizes.clone();
        for (k, dim) in sizes.iter_mut().enumerate() {
            let fresh = match &*dim {
                Sym::Expr { expr, hint: None } => expr.as_symbol().map(str::to_string),
                _ => None,
            };
            let Some(u) = fresh else { continue };
            let mut agreed: Option<&Sym> = None;
            let mut one = true;
            for s in &inputs {
                let Some(d) = (k + s.len()).checked_sub(rank).and_then(|i| s.get(i)) else {
                    continue;
                };
                if *d == Sym::Int(1) {
                    continue;
                }
                match agreed {
                    None => agreed = Some(d),
                    Some(a) if a == d => {}
                    Some(_) => one = false,
                }
            }
            if let (Some(a), true) = (agreed, one) {
                *dim = a.clone();
                dropped.push(u);
            }
        }
        if dropped.is_empty() {
            return;
        }
        self.b.ranges.retain(|r| !dropped.contains(&r.symbol));
        let mut fixed = sym_contiguous(meta.dtype, sizes);
        fixed.device = meta.device.clone();
        self.b.graph.values[t.index()].kind = ValueKind::Tensor(fixed);
    }

    /// The symbolic scalars among `operands` (what a subgraph reads from
    /// outside), which `cond` and `while_loop` do not take, specialised:
    /// their example values written into `nodes`, and taken off `operands`.
    pub(super) fn inline_scalars(
        &mut self,
        nodes: &mut [&mut Vec<Node>],
        operands: &mut Vec<ValueId>,
        at: &At,
        what: &str,
    ) -> Result<()> {
        let mut kept = Vec::new();
        for v in operands.drain(..) {
            let value = match &self.b.graph.values[v.index()].kind {
                ValueKind::SymInt(_) => V::SymInt(v),
                ValueKind::SymFloat(_) => V::SymFloat(v),
                ValueKind::SymBool(_) => V::SymBool(v),
                _ => {
                    kept.push(v);
                    continue;
                }
            };
            let literal = match self.specialise(&value, at, what)? {
                V::Int(i) => SymRef::Int(i),
                V::Float(f) => SymRef::Float(f),
                V::Bool(b) => SymRef::Bool(b),
                other => return Err(at.refuse(format!("{what} reads {}", other.kind()))),
            };
            let put = |r: &mut SymRef| {
                if *r == SymRef::Value(v) {
                    *r = literal;
                }
            };
            for node in nodes.iter_mut().flat_map(|n| n.iter_mut()) {
                for input in node.inputs.iter_mut() {
                    match &mut input.arg {
                        Argument::SymInt(r) | Argument::SymFloat(r) | Argument::SymBool(r) => {
                            put(r)
                        }
                        Argument::SymInts(rs)
                        | Argument::SymFloats(rs)
                        | Argument::SymBools(rs) => rs.iter_mut().for_each(&put),
                        _ => {}
                    }
                }
            }
        }
        *operands = kept;
        Ok(())
    }

    /// A tensor made by an op whose output sizes are a size argument
    /// (`view`, `reshape`, `expand`, `zeros` ...): the dims its shape rule
    /// left unknown where that argument gives a symbolic int take that
    /// int's expression, so later sizes stay tied to the inputs' symbols.
    pub(super) fn adopt_sizes(&mut self, t: ValueId, sizes: &V) {
        let Some(items) = (match sizes {
            V::List(l) => Some(l.borrow().clone()),
            V::Tuple(items) => Some(items.clone()),
            _ => None,
        }) else {
            return;
        };
        let meta = self.b.meta(t).clone();
        if items.len() != meta.sizes.len() {
            return;
        }
        let mut dropped = Vec::new();
        let mut sizes = meta.sizes.clone();
        for (dim, item) in sizes.iter_mut().zip(&items) {
            let V::SymInt(s) = item else { continue };
            let fresh = match &*dim {
                Sym::Expr { expr, hint: None } => expr.as_symbol().map(str::to_string),
                _ => None,
            };
            if let Some(u) = fresh {
                dropped.push(u);
                *dim = self.sym_value(*s);
            }
        }
        if dropped.is_empty() {
            return;
        }
        self.b.ranges.retain(|r| !dropped.contains(&r.symbol));
        let mut fixed = sym_contiguous(meta.dtype, sizes);
        fixed.device = meta.device.clone();
        self.b.graph.values[t.index()].kind = ValueKind::Tensor(fixed);
    }
}

impl Lower<'_> {
    /// Whether a value is a symbolic scalar.
    pub(super) fn is_symbolic(v: &V) -> bool {
        is_symbolic(v)
    }

    /// Whether a value holds a symbolic scalar, in a list or tuple too.
    pub(super) fn holds_symbolic(v: &V) -> bool {
        has_symbolic(v)
    }

    /// The program's graph once lowered: symbolic-scalar nodes nothing
    /// reads dropped, the pinned symbols written as their values (and out
    /// of the range constraints), the scalar inputs they fix constant.
    pub(super) fn settle(
        graph: &mut Graph,
        ranges: &mut Vec<RangeConstraint>,
        kinds: &mut [InputKind],
        pinned: &BTreeMap<String, Hint>,
    ) {
        drop_unread_scalars(graph);
        pin_graph(graph, pinned);
        ranges.retain(|r| !pinned.contains_key(&r.symbol));
        constant_scalar_inputs(graph, kinds);
    }
}

/// The ops whose output sizes are their size-list argument.
pub(super) const SIZE_LIST_OPS: &[&str] = &[
    "view",
    "reshape",
    "expand",
    "broadcast_to",
    "zeros",
    "ones",
    "empty",
    "full",
    "rand",
    "randn",
    "new_zeros",
    "new_ones",
    "new_empty",
    "new_full",
];

/// Writes the pinned symbols into a graph and its subgraphs as
/// constants: every recorded size, stride and symbolic scalar whose
/// symbols are all pinned becomes its value.
fn pin_graph(graph: &mut Graph, pinned: &BTreeMap<String, Hint>) {
    if pinned.is_empty() {
        return;
    }
    let pin_meta = |m: &mut TensorMeta| {
        for s in m
            .sizes
            .iter_mut()
            .chain(m.strides.iter_mut())
            .chain(std::iter::once(&mut m.storage_offset))
        {
            *s = pin_sym(s, pinned);
        }
    };
    for v in graph.values.iter_mut() {
        match &mut v.kind {
            ValueKind::Tensor(m) => pin_meta(m),
            ValueKind::SymInt(s) | ValueKind::SymFloat(s) | ValueKind::SymBool(s) => {
                *s = pin_sym(s, pinned)
            }
            _ => {}
        }
    }
    for node in graph.nodes.iter_mut() {
        for input in node.inputs.iter_mut() {
            if let Argument::Graph(sub) = &mut input.arg {
                pin_graph(&mut sub.graph, pinned);
            }
        }
    }
}

fn pin_sym(s: &Sym, pinned: &BTreeMap<String, Hint>) -> Sym {
    let Sym::Expr { expr, hint } = s else {
        return s.clone();
    };
    let mut names = Vec::new();
    expr.symbols(&mut names);
    if names.is_empty() || !names.iter().any(|n| pinned.contains_key(n)) {
        return s.clone();
    }
    if names.iter().all(|n| pinned.contains_key(n)) {
        if let Some(h) = hint {
            return sym_of_hint(*h);
        }
        let ints: BTreeMap<String, i64> = pinned
            .iter()
            .filter_map(|(k, h)| match h {
                Hint::Int(i) => Some((k.clone(), *i)),
                _ => None,
            })
            .collect();
        if let Ok(i) = expr.eval_int(&ints) {
            return Sym::Int(i);
        }
    }
    Sym::Expr {
        expr: substitute(expr, pinned),
        hint: *hint,
    }
}

/// `expr` with its pinned symbols replaced by their values.
fn substitute(expr: &SymExpr, pinned: &BTreeMap<String, Hint>) -> SymExpr {
    if let Some(h) = expr.as_symbol().and_then(|n| pinned.get(n)) {
        return expr_of(&sym_of_hint(*h));
    }
    match expr {
        SymExpr::Call { func, args, kwargs } => SymExpr::Call {
            func: func.clone(),
            args: args.iter().map(|a| substitute(a, pinned)).collect(),
            kwargs: kwargs.clone(),
        },
        other => other.clone(),
    }
}

/// Drops the symbolic-scalar nodes (`_operator.*`, `torch.sym_*`,
/// `aten.sym_size.int`) whose results nothing reads: a condition decided
/// at import by a specialisation leaves its comparison unread.
fn drop_unread_scalars(graph: &mut Graph) {
    loop {
        let mut read: HashSet<ValueId> = HashSet::new();
        let mut refs = Vec::new();
        for node in &graph.nodes {
            for a in &node.inputs {
                a.arg.value_refs(&mut refs);
            }
        }
        for o in &graph.outputs {
            o.value_refs(&mut refs);
        }
        read.extend(refs);
        let before = graph.nodes.len();
        graph.nodes.retain(|node| {
            let scalar = node.target.kind == TargetKind::Python
                || crate::ir::op::aten::SYM_SIZE_INT == node.target.to_string();
            if !scalar {
                return true;
            }
            let mut outs = Vec::new();
            node.outputs.iter().for_each(|o| o.value_refs(&mut outs));
            outs.iter().any(|v| read.contains(v))
        });
        if graph.nodes.len() == before {
            return;
        }
    }
}

/// The scalar inputs a specialisation made static become constant inputs,
/// as torch.export writes a specialised int (the caller gives no value for
/// them, and a value other than the example is refused); the nodes that
/// read them read the value.
fn constant_scalar_inputs(graph: &mut Graph, kinds: &mut [InputKind]) {
    for (i, input_kind) in kinds.iter_mut().enumerate() {
        let v = match &graph.inputs[i] {
            Argument::SymInt(SymRef::Value(v))
            | Argument::SymFloat(SymRef::Value(v))
            | Argument::SymBool(SymRef::Value(v)) => *v,
            _ => continue,
        };
        let (arg, literal) = match &graph.values[v.index()].kind {
            ValueKind::SymInt(Sym::Int(c)) => (Argument::Int(*c), SymRef::Int(*c)),
            ValueKind::SymFloat(Sym::Float(c)) => (Argument::Float(*c), SymRef::Float(*c)),
            ValueKind::SymBool(Sym::Bool(c)) => (Argument::Bool(*c), SymRef::Bool(*c)),
            _ => continue,
        };
        graph.inputs[i] = arg;
        *input_kind = InputKind::ConstantInput(graph.values[v.index()].name.clone());
        let put = |r: &mut SymRef| {
            if *r == SymRef::Value(v) {
                *r = literal;
            }
        };
        for node in graph.nodes.iter_mut() {
            for input in node.inputs.iter_mut() {
                match &mut input.arg {
                    Argument::SymInt(r) | Argument::SymFloat(r) | Argument::SymBool(r) => put(r),
                    Argument::SymInts(rs) | Argument::SymFloats(rs) | Argument::SymBools(rs) => {
                        rs.iter_mut().for_each(&put)
                    }
                    _ => {}
                }
            }
        }
    }
}
