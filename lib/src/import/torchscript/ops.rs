//! The graph a lowering builds, and the values it evaluates to: a call of
//! an ATen op (`torch.relu`, `ops.aten.linear`) is resolved against the
//! schema table, its arguments converted to the schema's kinds, and its
//! outputs given the sizes and dtypes the shape rules infer.

use std::cell::RefCell;
use std::collections::{HashMap, HashSet};
use std::rc::Rc;

use super::tree::Tree;
use super::{refuse_at, ShapeFn};
use crate::blob::Blob;
use crate::error::{Error, Result};
use crate::import::pickle::{Py, TensorRec};
use crate::ir::{
    ArgKind, Argument, Device, Dtype, Graph, Hint, InputKind, Layout, MemoryFormat, NamedArg, Node,
    NodeMeta, RangeConstraint, Sym, SymExpr, SymRef, Target, TensorMeta, Value, ValueId, ValueKind,
    Weight, WeightKind,
};
use crate::promote::{result_type, Rank};
use crate::schema::{self, Schema};

/// A value as the lowering sees it: Python values are known at import
/// time; tensors (and sizes of symbolic dims) are graph values.
#[derive(Clone, Debug)]
pub enum V {
    None,
    Bool(bool),
    Int(i64),
    Float(f64),
    Str(String),
    Tensor(ValueId),
    /// A size of a symbolic dim (`aten.sym_size.int`'s output), an `int`
    /// argument, or arithmetic on them: a SymInt value of the graph.
    SymInt(ValueId),
    /// A `float` argument, or arithmetic on one: a SymFloat value.
    SymFloat(ValueId),
    /// A `bool` argument, or a comparison of symbolic values: a SymBool.
    SymBool(ValueId),
    List(Rc<RefCell<Vec<V>>>),
    Tuple(Vec<V>),
    Dict(Rc<RefCell<Vec<(V, V)>>>),
    Object(Rc<Obj>),
    /// A dotted name bound to nothing in scope: `torch`, `ops.aten`, a class.
    Path(String),
    /// `receiver.name`, waiting for its call.
    Method(Box<V>, String),
    Device(String),
    /// `uninitialized(T)`: a value on a path that never returns it.
    Uninit,
    /// `bool(t)` of a one-element tensor: a truth known only at run time.
    Pred(ValueId),
}

impl V {
    pub fn list(items: Vec<V>) -> V {
        V::List(Rc::new(RefCell::new(items)))
    }

    /// What kind of value this is, for messages.
    pub fn kind(&self) -> &'static str {
        match self {
            V::None => "None",
            V::Bool(_) => "a bool",
            V::Int(_) => "an int",
            V::Float(_) => "a float",
            V::Str(_) => "a str",
            V::Tensor(_) => "a tensor",
            V::SymInt(_) => "a symbolic int",
            V::SymFloat(_) => "a symbolic float",
            V::SymBool(_) => "a symbolic bool",
            V::List(_) => "a list",
            V::Tuple(_) => "a tuple",
            V::Dict(_) => "a dict",
            V::Object(_) => "a module",
            V::Path(_) => "a name",
            V::Method(..) => "a method",
            V::Device(_) => "a device",
            V::Uninit => "an uninitialized value",
            V::Pred(_) => "the truth of a tensor",
        }
    }
}

/// A module object of the tree, with its path from the root (`layer1.0`).
#[derive(Debug)]
pub struct Obj {
    pub class: String,
    pub attrs: Vec<(String, Py)>,
    pub path: String,
}

/// Where a construct is in `code/`, for refusals.
#[derive(Clone, Debug)]
pub struct At {
    pub file: String,
    pub line: u32,
}

impl At {
    pub fn refuse(&self, msg: impl std::fmt::Display) -> Error {
        refuse_at(&self.file, self.line, msg)
    }
    pub fn bad(&self, msg: impl std::fmt::Display) -> Error {
        Error::bad_input(format!("{}:{}: {msg}", self.file, self.line))
    }
}

/// A view a node made: its base (the node's first input) and the node
/// (`views.rs` writes through it and makes it again).
#[derive(Clone, Debug)]
pub struct ViewOf {
    pub base: ValueId,
    pub node: Node,
    /// One output, of an op that is a view whatever the strides.
    pub exact: bool,
}

pub struct Builder<'t> {
    pub tree: &'t Tree<'t>,
    pub graph: Graph,
    names: HashSet<String>,
    pub weights: Vec<Weight>,
    pub storages: Vec<Blob>,
    storage_of: HashMap<String, u32>,
    /// Weight inputs in the order they were first used, with their kinds.
    pub weight_inputs: Vec<(ValueId, InputKind)>,
    weight_by_name: HashMap<String, ValueId>,
    shapes: ShapeFn<'t>,
    symbols: usize,
    pub ranges: Vec<RangeConstraint>,
    /// The module path of the method being lowered (node provenance).
    pub module_path: String,
    /// What an in-place op (`relu_`) made of a value: later reads of the
    /// value read its functional result.
    pub replaced: HashMap<ValueId, ValueId>,
    /// The views made so far, by value (`views.rs`: writes through them).
    pub(super) views: HashMap<ValueId, ViewOf>,
}

/// c10's `ScalarType` numbering, as TorchScript passes dtypes (ints).
const C10_DTYPES: &[(i64, Dtype)] = &[
    (0, Dtype::Uint8),
    (1, Dtype::Int8),
    (2, Dtype::Int16),
    (3, Dtype::Int32),
    (4, Dtype::Int64),
    (5, Dtype::Float16),
    (6, Dtype::Float32),
    (7, Dtype::Float64),
    (8, Dtype::Complex32),
    (9, Dtype::Complex64),
    (10, Dtype::Complex128),
    (11, Dtype::Bool),
    (15, Dtype::BFloat16),
];

pub fn dtype_of_code(code: i64) -> Option<Dtype> {
    C10_DTYPES.iter().find(|(c, _)| *c == code).map(|(_, d)| *d)
}

pub fn code_of_dtype(d: Dtype) -> Option<i64> {
    C10_DTYPES.iter().find(|(_, x)| *x == d).map(|(c, _)| *c)
}

/// Ops whose output is bool whatever their inputs.
const BOOL_OPS: &[&str] = &[
    "eq",
    "ne",
    "lt",
    "le",
    "gt",
    "ge",
    "isnan",
    "isinf",
    "isfinite",
    "logical_and",
    "logical_or",
    "logical_not",
    "logical_xor",
    "isclose",
    "isneginf",
    "isposinf",
    "signbit",
];

/// Ops whose output dtype is the promotion of their operands.
const PROMOTING_OPS: &[&str] = &[
    "add",
    "sub",
    "mul",
    "div",
    "rsub",
    "pow",
    "remainder",
    "fmod",
    "maximum",
    "minimum",
    "where",
    "atan2",
    "floor_divide",
    "bitwise_and",
    "bitwise_or",
    "bitwise_xor",
    "__and__",
    "__or__",
    "__xor__",
    "true_divide",
    "hypot",
    "copysign",
    "cat",
    "stack",
    "lerp",
    "addcmul",
    "addcdiv",
];

/// Ops that make an integer tensor a float one.
const FLOATING_OPS: &[&str] = &[
    "true_divide",
    "sigmoid",
    "exp",
    "log",
    "sqrt",
    "rsqrt",
    "tanh",
    "sin",
    "cos",
    "erf",
    "softmax",
    "log_softmax",
    "mean",
];

impl<'t> Builder<'t> {
    pub fn new(tree: &'t Tree<'t>, shapes: ShapeFn<'t>) -> Builder<'t> {
        Builder {
            tree,
            graph: Graph::default(),
            names: HashSet::new(),
            weights: Vec::new(),
            storages: Vec::new(),
            storage_of: HashMap::new(),
            weight_inputs: Vec::new(),
            weight_by_name: HashMap::new(),
            shapes,
            symbols: 0,
            ranges: Vec::new(),
            module_path: String::new(),
            replaced: HashMap::new(),
            views: HashMap::new(),
        }
    }

    pub fn fresh(&mut self, base: &str) -> String {
        let base: String = base
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
            .collect();
        let base = if base.is_empty() {
            "v".to_string()
        } else {
            base
        };
        let mut name = base.clone();
        let mut k = 1;
        while self.names.contains(&name) {
            name = format!("{base}_{k}");
            k += 1;
        }
        self.names.insert(name.clone());
        name
    }

    pub fn new_value(&mut self, base: &str, kind: ValueKind) -> ValueId {
        let name = self.fresh(base);
        self.named_value(name, kind)
    }

    /// A value under a name already made fresh.
    fn named_value(&mut self, name: String, kind: ValueKind) -> ValueId {
        self.graph.values.push(Value { name, kind });
        ValueId(self.graph.values.len() as u32 - 1)
    }

    /// A fresh size symbol (`s0` for an input dim, `u0` for a size no rule
    /// infers), with the value it had in the example when known.
    pub fn symbol(&mut self, prefix: &str, hint: Option<i64>) -> Sym {
        let name = format!("{prefix}{}", self.symbols);
        self.symbols += 1;
        self.ranges.push(RangeConstraint {
            symbol: name.clone(),
            min: Some(0),
            max: None,
        });
        Sym::Expr {
            expr: SymExpr::symbol(&name),
            hint: hint.map(Hint::Int),
        }
    }

    pub fn meta(&self, v: ValueId) -> &TensorMeta {
        match &self.graph.values[v.index()].kind {
            ValueKind::Tensor(m) => m,
            _ => unreachable!("tensor values of the lowering always carry metadata"),
        }
    }

    /// The graph input bound to a weight (a parameter, buffer or constant
    /// tensor), made on first use.
    pub fn weight(
        &mut self,
        name: &str,
        kind: WeightKind,
        rec: &TensorRec,
        dir: &str,
    ) -> Result<ValueId> {
        if let Some(v) = self.weight_by_name.get(name) {
            return Ok(*v);
        }
        let (member, blob) = self.tree.storage(dir, &rec.key)?;
        let storage = match self.storage_of.get(&member) {
            Some(s) => *s,
            None => {
                self.storages.push(blob.clone());
                let s = self.storages.len() as u32 - 1;
                self.storage_of.insert(member.clone(), s);
                s
            }
        };
        let meta = rec.meta();
        crate::ir::validate::check_view(&meta, self.storages[storage as usize].len())
            .map_err(|msg| Error::bad_input(format!("{}: tensor '{name}': {msg}", member)))?;
        // The weight keeps the view torch saved (it may be strided); the
        // graph value is row-major like every value.
        self.weights.push(Weight {
            name: name.to_string(),
            kind,
            meta: meta.clone(),
            storage,
        });
        let base = match kind {
            WeightKind::Parameter => format!("p_{name}"),
            WeightKind::Buffer => format!("b_{name}"),
            WeightKind::Constant => format!("c_{name}"),
        };
        let v = self.new_value(
            &base.to_lowercase(),
            ValueKind::Tensor(TensorMeta::contiguous(meta.dtype, &rec.sizes)),
        );
        let input_kind = match kind {
            WeightKind::Parameter => InputKind::Parameter(name.to_string()),
            WeightKind::Buffer => InputKind::Buffer(name.to_string()),
            WeightKind::Constant => InputKind::TensorConstant(name.to_string()),
        };
        self.weight_inputs.push((v, input_kind));
        self.weight_by_name.insert(name.to_string(), v);
        Ok(v)
    }

    /// The current value of a tensor an in-place op may have replaced.
    pub fn current(&self, v: &V) -> V {
        match v {
            V::Tensor(t) => {
                let mut t = *t;
                while let Some(n) = self.replaced.get(&t) {
                    t = *n;
                }
                V::Tensor(t)
            }
            V::Tuple(items) => V::Tuple(items.iter().map(|x| self.current(x)).collect()),
            V::List(items) => {
                let mut l = items.borrow_mut();
                for x in l.iter_mut() {
                    *x = self.current(x);
                }
                drop(l);
                V::List(items.clone())
            }
            other => other.clone(),
        }
    }

    /// An in-place op (`relu_`, `add_`, `hardtanh_`) as its functional
    /// form, whose result replaces the value written into; `None` when
    /// `name` is not in place or has no functional form.
    pub fn call_in_place(
        &mut self,
        ns: &str,
        name: &str,
        args: &[V],
        kwargs: &[(String, V)],
        at: &At,
    ) -> Result<Option<V>> {
        let Some(functional) = name.strip_suffix('_') else {
            return Ok(None);
        };
        if functional.is_empty()
            || functional.ends_with('_')
            || schema::overloads(ns, functional).is_empty()
        {
            return Ok(None);
        }
        let Some(V::Tensor(target)) = args.first() else {
            return Ok(None);
        };
        if let Some((_, kind)) = self.weight_inputs.iter().find(|(v, _)| v == target) {
            return Err(at.refuse(format!(
                "{ns}::{name} writes into {} in place (program state is not lowered from TorchScript)",
                kind.weight_name().unwrap_or("a weight")
            )));
        }
        let out = self.call(ns, functional, args, kwargs, at)?;
        let V::Tensor(new) = out else {
            return Err(at.refuse(format!("{ns}::{name} in place with several outputs")));
        };
        let (old, fresh) = (self.meta(*target).clone(), self.meta(new).clone());
        if old.dtype != fresh.dtype || old.sizes != fresh.sizes {
            return Err(at.refuse(format!(
                "{ns}::{name} in place would change its tensor's dtype or sizes"
            )));
        }
        // torch changes the views of the tensor written and the tensors
        // it is a view of: each gets its new value (views.rs)
        self.write_through(*target, new, &format!("{ns}::{name}"), at)?;
        Ok(Some(V::Tensor(new)))
    }

    /// A tensor of numbers written in the code (`torch.tensor`): a 0-d
    /// `full` per number, nested lists stacked.
    fn constant_tensor(&mut self, v: &V, dtype: &V, at: &At) -> Result<V> {
        match v {
            V::List(items) => {
                let items = items.borrow().clone();
                let parts = items
                    .iter()
                    .map(|x| self.constant_tensor(x, dtype, at))
                    .collect::<Result<Vec<_>>>()?;
                self.call("aten", "stack", &[V::list(parts)], &[], at)
            }
            _ => self.call(
                "aten",
                "full",
                &[V::list(vec![]), v.clone()],
                &[("dtype".into(), dtype.clone())],
                at,
            ),
        }
    }

    /// Emits a call of `ns::name` on `args` / `kwargs`, its overload
    /// resolved against the schema table. Returns the outputs (one value,
    /// or a tuple / list of them).
    pub fn call(
        &mut self,
        ns: &str,
        name: &str,
        args: &[V],
        kwargs: &[(String, V)],
        at: &At,
    ) -> Result<V> {
        // `torch.tensor(number)`: a 0-d tensor of it, in the dtype given or
        // the number's (float32 for a float)
        // (`torch.tensor([..])` of numbers: those stacked)
        if let ("aten", "tensor", [v @ (V::Int(_) | V::Float(_) | V::Bool(_) | V::List(_))]) =
            (ns, name, args)
        {
            fn kinds(v: &V, out: &mut Vec<Dtype>) -> bool {
                match v {
                    V::Int(_) => out.push(Dtype::Int64),
                    V::Bool(_) => out.push(Dtype::Bool),
                    V::Float(_) => out.push(Dtype::Float32),
                    V::List(l) => {
                        return !l.borrow().is_empty() && l.borrow().iter().all(|x| kinds(x, out))
                    }
                    _ => return false,
                }
                true
            }
            let mut seen = Vec::new();
            if !kinds(v, &mut seen) {
                return Err(at.refuse(format!(
                    "torch.tensor of {}: numbers and non-empty lists of them are lowered",
                    v.kind()
                )));
            }
            let default = if seen.contains(&Dtype::Float32) {
                Dtype::Float32
            } else if seen.iter().all(|d| *d == Dtype::Bool) {
                Dtype::Bool
            } else {
                Dtype::Int64
            };
            let dtype = match kwargs.iter().find(|(k, _)| k == "dtype") {
                Some((_, d @ V::Int(_))) => d.clone(),
                _ => V::Int(code_of_dtype(default).unwrap_or(6)),
            };
            return self.constant_tensor(v, &dtype, at);
        }
        // unsafe_chunk / unsafe_split differ from chunk / split only in
        // autograd's view checks
        if let ("aten", Some(safe)) = (ns, name.strip_prefix("unsafe_")) {
            if matches!(safe, "chunk" | "split" | "split_with_sizes") {
                return self.call(ns, safe, args, kwargs, at);
            }
        }
        // `split` by a list of sizes is split_with_sizes (the op back ends run)
        if let ("aten", "split", [_, V::List(_), ..]) = (ns, name, args) {
            return self.call(ns, "split_with_sizes", args, kwargs, at);
        }
        let qualified = format!("{ns}::{name}");
        let candidates = schema::overloads(ns, name);
        if candidates.is_empty() {
            return Err(at.refuse(format!(
                "{qualified} is not an operator this toolkit's schema table knows (an unsupported builtin)"
            )));
        }
        let mut chosen = None;
        for s in &candidates {
            if s.overload == "out"
                || s.overload.ends_with("_out")
                || s.overload.starts_with("prim_")
                || s.args.iter().any(|a| a.ty.contains('!'))
            {
                continue;
            }
            if let Some(bound) = bind(s, args, kwargs) {
                chosen = Some((s.clone(), bound));
                break;
            }
        }
        let Some((schema, bound)) = chosen else {
            let given: Vec<&str> = args.iter().map(V::kind).collect();
            return Err(at.refuse(format!(
                "no overload of {qualified} takes ({}){}",
                given.join(", "),
                if kwargs.is_empty() {
                    String::new()
                } else {
                    format!(
                        " with keywords {}",
                        kwargs
                            .iter()
                            .map(|(k, _)| k.as_str())
                            .collect::<Vec<_>>()
                            .join(", ")
                    )
                }
            )));
        };
        // `_convolution` carries cuDNN flags no back end reads: the same
        // convolution without them.
        if ns == "aten" && name == "_convolution" && bound.len() >= 9 {
            let target = Target::op("aten", "convolution", "default");
            let inputs = bound.into_iter().take(9).collect();
            return self.emit(target, inputs, &schema, at);
        }
        let target = Target::op(ns, name, &schema.overload);
        self.emit(target, bound, &schema, at)
    }

    pub(super) fn emit(
        &mut self,
        target: Target,
        inputs: Vec<NamedArg>,
        schema: &Schema,
        at: &At,
    ) -> Result<V> {
        let returns = return_types(&schema.returns);
        if returns.is_empty() || returns.iter().any(|r| !r.starts_with("Tensor")) {
            return Err(at.refuse(format!(
                "{target} returns {}: a Python value computed from tensor data is data-dependent and not lowered",
                schema.returns
            )));
        }
        let node_name = self.fresh(&target.name);
        let mut node = Node {
            name: node_name.clone(),
            target: target.clone(),
            inputs,
            outputs: Vec::new(),
            meta: NodeMeta {
                stack_trace: Some(format!("{}:{}", at.file, at.line)),
                module_stack: (!self.module_path.is_empty())
                    .then(|| format!("L__self__,{},", self.module_path)),
                other: Vec::new(),
            },
            is_hop_single_tensor_return: None,
        };
        let inferred = match (self.shapes)(&self.graph, &node) {
            None => {
                return Err(at.refuse(format!(
                    "{target} has no shape rule, so its output sizes are unknown (ir-decompose --list names the ops with rules)"
                )))
            }
            Some(r) => r.map_err(|e| e.at(format!("{}:{}", at.file, at.line)))?,
        };
        let list = returns.len() == 1 && returns[0].ends_with("[]");
        if list && inferred.is_empty() {
            return Err(at.refuse(format!(
                "{target}: its shape rule does not infer how many tensors it returns (the dim it splits is symbolic)"
            )));
        }
        let count = if list { inferred.len() } else { returns.len() };
        let mut outs = Vec::new();
        for k in 0..count {
            let (dims, dtype) = inferred.get(k).cloned().unwrap_or((None, None));
            let Some(dims) = dims else {
                return Err(at.refuse(format!(
                    "{target}: its shape rule does not infer the rank of output {k}"
                )));
            };
            let dtype = match dtype {
                Some(d) => d,
                None => self.dtype_for(&node, k)?,
            };
            let sizes: Vec<Sym> = dims
                .iter()
                .map(|d| match d {
                    Some(n) => Sym::Int(*n),
                    None => self.symbol("u", None),
                })
                .collect();
            let name = if k == 0 {
                node_name.clone()
            } else {
                self.fresh(&format!("{node_name}_{k}"))
            };
            let v = self.named_value(name, ValueKind::Tensor(sym_contiguous(dtype, sizes)));
            outs.push(v);
        }
        node.outputs = if list {
            vec![Argument::Tensors(outs.clone())]
        } else {
            outs.iter().map(|v| Argument::Tensor(*v)).collect()
        };
        if aliases(&node.target) {
            self.record_views(&node, &outs, !list);
        }
        self.graph.nodes.push(node);
        Ok(if list {
            V::list(outs.into_iter().map(V::Tensor).collect())
        } else if outs.len() == 1 {
            V::Tensor(outs[0])
        } else {
            V::Tuple(outs.into_iter().map(V::Tensor).collect())
        })
    }

    /// The dtype of output `k` where the shape rule does not say.
    fn dtype_for(&self, node: &Node, k: usize) -> Result<Dtype> {
        let name = node.target.name.as_str();
        if let Some(Argument::ScalarType(d)) = node.arg("dtype") {
            return Ok(*d);
        }
        if BOOL_OPS.contains(&name) {
            return Ok(Dtype::Bool);
        }
        if matches!(name, "argmax" | "argmin" | "nonzero" | "argsort")
            || (k == 1
                && matches!(
                    name,
                    "max" | "min" | "sort" | "topk" | "kthvalue" | "mode" | "median"
                ))
        {
            return Ok(Dtype::Int64);
        }
        let tensors: Vec<ValueId> = node
            .inputs
            .iter()
            .flat_map(|a| match &a.arg {
                Argument::Tensor(v) => vec![*v],
                Argument::Tensors(vs) => vs.clone(),
                _ => vec![],
            })
            .collect();
        if let (Some("other"), Some(Argument::Tensor(o))) =
            (Some(node.target.overload.as_str()), node.arg("other"))
        {
            if name == "to" || name == "type_as" {
                return Ok(self.meta(*o).dtype);
            }
        }
        if matches!(name, "to" | "_to_copy") {
            if let Some(Argument::ScalarType(d)) = node.arg("dtype") {
                return Ok(*d);
            }
        }
        let scalar_dtype = |a: &Argument| match a {
            Argument::Int(_) | Argument::SymInt(_) => Some(Dtype::Int64),
            Argument::Float(_) | Argument::SymFloat(_) => Some(Dtype::Float64),
            Argument::Bool(_) | Argument::SymBool(_) => Some(Dtype::Bool),
            _ => None,
        };
        if tensors.is_empty() {
            // A factory: its fill value or range decides, else float32.
            let ints = node
                .inputs
                .iter()
                .filter(|a| {
                    matches!(
                        a.name.as_str(),
                        "fill_value" | "start" | "end" | "step" | "s"
                    )
                })
                .filter(|a| !a.defaulted)
                .filter_map(|a| scalar_dtype(&a.arg))
                .collect::<Vec<_>>();
            return Ok(match name {
                "arange" | "full" | "scalar_tensor"
                    if !ints.is_empty() && name != "scalar_tensor" =>
                {
                    if ints.iter().all(|d| *d == Dtype::Int64) {
                        Dtype::Int64
                    } else if ints.iter().all(|d| *d == Dtype::Bool) {
                        Dtype::Bool
                    } else {
                        Dtype::Float32
                    }
                }
                _ => Dtype::Float32,
            });
        }
        let first = self.meta(tensors[0]).dtype;
        if PROMOTING_OPS.contains(&name) {
            let mut ops: Vec<(Dtype, Rank)> = tensors
                .iter()
                .map(|v| {
                    let m = self.meta(*v);
                    (
                        m.dtype,
                        if m.sizes.is_empty() {
                            Rank::ZeroDim
                        } else {
                            Rank::Dim
                        },
                    )
                })
                .collect();
            for a in &node.inputs {
                if matches!(
                    a.name.as_str(),
                    "other" | "self" | "exponent" | "value" | "scalar"
                ) && !a.defaulted
                {
                    if let Some(d) = scalar_dtype(&a.arg) {
                        ops.push((d, Rank::Scalar));
                    }
                }
            }
            let d = result_type(&ops);
            let true_div = name == "true_divide"
                || (name == "div"
                    && !matches!(node.arg("rounding_mode"), Some(Argument::String(_))));
            if true_div && !d.is_floating() && !d.is_complex() {
                return Ok(Dtype::Float32);
            }
            return Ok(d);
        }
        if FLOATING_OPS.contains(&name) && !first.is_floating() && !first.is_complex() {
            return Ok(Dtype::Float32);
        }
        Ok(first)
    }
}

/// Whether an op's output may share memory with its first input (a view:
/// `Tensor(a) self -> Tensor(a)`, lists of views included).
fn aliases(target: &Target) -> bool {
    schema::lookup(&target.namespace, &target.name, &target.overload).is_some_and(|s| {
        s.returns.contains("Tensor(a")
            && s.args
                .first()
                .is_some_and(|a| a.ty.starts_with("Tensor(a") && !a.ty.contains('!'))
    })
}

/// A contiguous tensor of these sizes (strides symbolic where sizes are).
pub fn sym_contiguous(dtype: Dtype, sizes: Vec<Sym>) -> TensorMeta {
    let mut strides = vec![Sym::Int(1); sizes.len()];
    for i in (0..sizes.len().saturating_sub(1)).rev() {
        strides[i] = match (&strides[i + 1], &sizes[i + 1]) {
            (Sym::Int(a), Sym::Int(b)) => Sym::Int(a * (*b).max(1)),
            (a, b) => Sym::Expr {
                expr: SymExpr::Call {
                    func: "Mul".into(),
                    args: vec![sym_expr(a), sym_expr(b)],
                    kwargs: vec![],
                },
                hint: None,
            },
        };
    }
    TensorMeta {
        dtype,
        sizes,
        strides,
        storage_offset: Sym::Int(0),
        device: Device::default(),
        layout: Layout::Strided,
        requires_grad: false,
    }
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

/// The types a schema returns: `(Tensor values, Tensor indices)` gives
/// `["Tensor", "Tensor"]`; `()` none.
fn return_types(returns: &str) -> Vec<String> {
    let r = returns.trim();
    let inner = if r.starts_with('(') && r.ends_with(')') {
        &r[1..r.len() - 1]
    } else {
        r
    };
    let mut out = Vec::new();
    let mut depth = 0;
    let mut cur = String::new();
    for c in inner.chars() {
        match c {
            '(' | '[' => depth += 1,
            ')' | ']' => depth -= 1,
            _ => {}
        }
        if c == ',' && depth == 0 {
            out.push(std::mem::take(&mut cur));
        } else {
            cur.push(c);
        }
    }
    out.push(cur);
    out.into_iter()
        .map(|t| strip_alias(t.trim().split(' ').next().unwrap_or("")))
        .filter(|t| !t.is_empty())
        .collect()
}

/// `Tensor(a!)` is `Tensor`; `Tensor(a)[]` is `Tensor[]`.
fn strip_alias(ty: &str) -> String {
    let mut out = String::new();
    let mut depth = 0;
    for c in ty.chars() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            _ if depth == 0 => out.push(c),
            _ => {}
        }
    }
    out
}

/// Binds call arguments to a schema, converting each to the argument
/// kind its type takes; `None` when they do not fit.
fn bind(s: &Schema, args: &[V], kwargs: &[(String, V)]) -> Option<Vec<NamedArg>> {
    let positional: Vec<_> = s.args.iter().filter(|a| !a.kwarg_only).collect();
    if args.len() > positional.len() {
        return None;
    }
    for (k, _) in kwargs {
        if !s.args.iter().any(|a| &a.name == k) {
            return None;
        }
    }
    let mut out = Vec::new();
    for (i, sarg) in s.args.iter().enumerate() {
        let given = if !sarg.kwarg_only && i < args.len() {
            Some((&args[i], ArgKind::Positional))
        } else {
            kwargs
                .iter()
                .find(|(k, _)| k == &sarg.name)
                .map(|(_, v)| (v, ArgKind::Keyword))
        };
        match given {
            Some((v, kind)) => {
                let arg = convert(&strip_alias(&sarg.ty), v)?;
                out.push(NamedArg {
                    name: sarg.name.clone(),
                    arg,
                    kind: if sarg.kwarg_only {
                        ArgKind::Keyword
                    } else {
                        kind
                    },
                    defaulted: false,
                });
            }
            None => {
                let d = sarg.default.as_deref()?;
                let arg = match d {
                    "contiguous_format" => Argument::MemoryFormat(MemoryFormat::Contiguous),
                    "preserve_format" => Argument::MemoryFormat(MemoryFormat::Preserve),
                    _ => match schema::default_value(&strip_alias(&sarg.ty), d) {
                        Some(a) => a,
                        // A default this reader cannot write is left out,
                        // as the pt2 importer leaves it.
                        None => continue,
                    },
                };
                out.push(NamedArg {
                    name: sarg.name.clone(),
                    arg,
                    kind: if sarg.kwarg_only {
                        ArgKind::Keyword
                    } else {
                        ArgKind::Positional
                    },
                    defaulted: true,
                });
            }
        }
    }
    Some(out)
}

fn items_of(v: &V) -> Option<Vec<V>> {
    match v {
        V::List(l) => Some(l.borrow().clone()),
        V::Tuple(t) => Some(t.clone()),
        _ => None,
    }
}

/// One value as an argument of schema type `ty`, if it fits.
fn convert(ty: &str, v: &V) -> Option<Argument> {
    if let Some(inner) = ty.strip_suffix('?') {
        if matches!(v, V::None) {
            return Some(Argument::None);
        }
        return convert(inner, v);
    }
    if let Some(open) = ty.find('[') {
        let elem = &ty[..open];
        let fixed: Option<usize> = ty[open + 1..].trim_end_matches(']').parse().ok();
        let items = match (items_of(v), fixed) {
            (Some(items), _) => items,
            // `int[2] stride` takes one int for every dim.
            (None, Some(_)) if matches!(v, V::Int(_) | V::SymInt(_)) => vec![v.clone()],
            _ => return None,
        };
        return match elem {
            "Tensor" => items
                .iter()
                .map(|x| match x {
                    V::Tensor(t) => Some(*t),
                    _ => None,
                })
                .collect::<Option<Vec<_>>>()
                .map(Argument::Tensors),
            "Tensor?" => items
                .iter()
                .map(|x| match x {
                    V::Tensor(t) => Some(Some(*t)),
                    V::None => Some(None),
                    _ => None,
                })
                .collect::<Option<Vec<_>>>()
                .map(Argument::OptionalTensors),
            "int" | "SymInt" => {
                let refs = items
                    .iter()
                    .map(|x| match x {
                        V::Int(i) => Some(SymRef::Int(*i)),
                        V::SymInt(s) => Some(SymRef::Value(*s)),
                        _ => None,
                    })
                    .collect::<Option<Vec<_>>>()?;
                if refs.iter().all(|r| matches!(r, SymRef::Int(_))) {
                    Some(Argument::Ints(
                        refs.iter()
                            .map(|r| match r {
                                SymRef::Int(i) => *i,
                                _ => 0,
                            })
                            .collect(),
                    ))
                } else {
                    Some(Argument::SymInts(refs))
                }
            }
            "float" if items.iter().any(|x| matches!(x, V::SymFloat(_))) => items
                .iter()
                .map(|x| match x {
                    V::Float(f) => Some(SymRef::Float(*f)),
                    V::Int(i) => Some(SymRef::Float(*i as f64)),
                    V::SymFloat(s) => Some(SymRef::Value(*s)),
                    _ => None,
                })
                .collect::<Option<Vec<_>>>()
                .map(Argument::SymFloats),
            "float" => items
                .iter()
                .map(|x| match x {
                    V::Float(f) => Some(*f),
                    V::Int(i) => Some(*i as f64),
                    _ => None,
                })
                .collect::<Option<Vec<_>>>()
                .map(Argument::Floats),
            "bool" => items
                .iter()
                .map(|x| match x {
                    V::Bool(b) => Some(*b),
                    _ => None,
                })
                .collect::<Option<Vec<_>>>()
                .map(Argument::Bools),
            "str" => items
                .iter()
                .map(|x| match x {
                    V::Str(s) => Some(s.clone()),
                    _ => None,
                })
                .collect::<Option<Vec<_>>>()
                .map(Argument::Strings),
            _ => None,
        };
    }
    match (ty, v) {
        ("Tensor", V::Tensor(t)) => Some(Argument::Tensor(*t)),
        ("int" | "SymInt", V::Int(i)) => Some(Argument::Int(*i)),
        ("int" | "SymInt", V::SymInt(s)) => Some(Argument::SymInt(SymRef::Value(*s))),
        ("float", V::Float(f)) => Some(Argument::Float(*f)),
        ("float", V::Int(i)) => Some(Argument::Float(*i as f64)),
        ("float", V::SymFloat(s)) => Some(Argument::SymFloat(SymRef::Value(*s))),
        ("bool", V::Bool(b)) => Some(Argument::Bool(*b)),
        ("bool", V::SymBool(s)) => Some(Argument::SymBool(SymRef::Value(*s))),
        ("Scalar", V::Int(i)) => Some(Argument::Int(*i)),
        ("Scalar", V::Float(f)) => Some(Argument::Float(*f)),
        ("Scalar", V::Bool(b)) => Some(Argument::Bool(*b)),
        ("Scalar", V::SymInt(s)) => Some(Argument::SymInt(SymRef::Value(*s))),
        ("Scalar", V::SymFloat(s)) => Some(Argument::SymFloat(SymRef::Value(*s))),
        ("Scalar", V::SymBool(s)) => Some(Argument::SymBool(SymRef::Value(*s))),
        ("str", V::Str(s)) => Some(Argument::String(s.clone())),
        ("ScalarType", V::Int(code)) => dtype_of_code(*code).map(Argument::ScalarType),
        ("Layout", V::Int(0)) => Some(Argument::Layout(Layout::Strided)),
        ("Device", V::Device(d)) | ("Device", V::Str(d)) => {
            let (kind, index) = match d.split_once(':') {
                Some((k, i)) => (k.to_string(), i.parse().ok()),
                None => (d.clone(), None),
            };
            Some(Argument::Device(Device { kind, index }))
        }
        ("MemoryFormat", V::Int(code)) => match code {
            0 => Some(Argument::MemoryFormat(MemoryFormat::Contiguous)),
            1 => Some(Argument::MemoryFormat(MemoryFormat::Preserve)),
            2 => Some(Argument::MemoryFormat(MemoryFormat::ChannelsLast)),
            3 => Some(Argument::MemoryFormat(MemoryFormat::ChannelsLast3d)),
            _ => None,
        },
        _ => None,
    }
}
