//! The conversion driver and the context emitters build nodes through.
//!
//! [`convert`] walks a graph (and, through `cond`, `while_loop` and `map`,
//! their subgraphs), asking the op table for each node's emitter. An
//! emitter gets a [`Cx`]: typed access to the node's arguments by name, the
//! IR metadata of its inputs and outputs, and helpers that create nodes,
//! constants (deduplicated per scope), casts, symbolic sizes (read from the
//! input dims that define each symbol) and subgraphs (If branches, which
//! read the enclosing scope; Loop and Scan bodies, which also have inputs
//! of their own). Whatever an emitter creates is undone if it fails, so one
//! failing node never leaves half a conversion behind; every failure is
//! collected and reported at once.
//!
//! Names: one allocator for the whole model (ONNX subgraphs may not shadow
//! outer names). A node's result takes the IR value's name; helper values
//! are named after the node (`addmm.Gemm`).

use std::collections::{BTreeSet, HashMap, HashSet};

use onnx_protobuf::{
    attribute_proto::AttributeType,
    tensor_shape_proto::{dimension, Dimension},
    type_proto, AttributeProto, GraphProto, NodeProto, StringStringEntryProto, TensorProto,
    TensorShapeProto, TypeProto, ValueInfoProto,
};
use protobuf::{EnumOrUnknown, MessageField};

use super::{ops, OnnxOptions, Stats, CUSTOM_DOMAIN_PREFIX};
use crate::error::{Error, ErrorKind, Result};
use crate::ir::{
    Argument, Dtype, Graph, InputKind, Node, OutputKind, Program, Sym, SymExpr, SymRef, TensorMeta,
    ValueId, ValueKind, Weight,
};
use crate::promote::{result_type, Rank};

pub(crate) struct Converted<'p> {
    pub graph: GraphProto,
    pub weights: Vec<&'p Weight>,
    pub custom_domains: BTreeSet<String>,
    pub stats: Stats,
}

/// A failure: (node name, op, reason, kind).
type Failure = (String, String, String, ErrorKind);

pub(crate) struct Converter<'p> {
    pub opset: i64,
    pub ir_version: i64,
    allow_custom: bool,
    native_low_precision: bool,
    names: HashSet<String>,
    node_names: HashSet<String>,
    scopes: Vec<Scope<'p>>,
    failures: Vec<Failure>,
    custom_domains: BTreeSet<String>,
    stats: Stats,
    /// Bare symbols of the user inputs' sizes: symbol -> (input, dim).
    sym_sources: HashMap<String, (String, usize)>,
}

struct Scope<'p> {
    graph: &'p Graph,
    /// The ONNX name each IR value of this graph has, once defined.
    values: Vec<Option<String>>,
    used: Vec<bool>,
    nodes: Vec<NodeProto>,
    /// Constants and symbolic sizes already built in this scope, by key.
    cache: HashMap<String, String>,
    /// Names that nodes of this scope produce for IR values (may be graph
    /// outputs as they are).
    owned: HashSet<String>,
}

impl<'p> Scope<'p> {
    fn new(graph: &'p Graph) -> Scope<'p> {
        let mut used = vec![false; graph.values.len()];
        let mut refs = Vec::new();
        for node in &graph.nodes {
            for a in &node.inputs {
                a.arg.value_refs(&mut refs);
            }
        }
        for o in &graph.outputs {
            o.value_refs(&mut refs);
        }
        for v in refs {
            if let Some(u) = used.get_mut(v.index()) {
                *u = true;
            }
        }
        Scope {
            graph,
            values: vec![None; graph.values.len()],
            used,
            nodes: Vec::new(),
            cache: HashMap::new(),
            owned: HashSet::new(),
        }
    }
}

/// The values a node's outputs define, flattened (`None`: no value).
pub(crate) fn output_values(node: &Node) -> Vec<Option<ValueId>> {
    let mut out = Vec::new();
    for o in &node.outputs {
        match o {
            Argument::Tensor(v) | Argument::CustomObj(v) => out.push(Some(*v)),
            Argument::OptionalTensor(v) => out.push(*v),
            Argument::Tensors(vs) => out.extend(vs.iter().map(|v| Some(*v))),
            Argument::OptionalTensors(vs) => out.extend(vs.iter().copied()),
            Argument::SymInt(r) | Argument::SymFloat(r) | Argument::SymBool(r) => {
                out.push(match r {
                    SymRef::Value(v) => Some(*v),
                    _ => None,
                })
            }
            Argument::SymInts(rs) | Argument::SymFloats(rs) | Argument::SymBools(rs) => {
                out.extend(rs.iter().map(|r| match r {
                    SymRef::Value(v) => Some(*v),
                    _ => None,
                }))
            }
            _ => out.push(None),
        }
    }
    out
}

pub(crate) fn attr_int(name: &str, v: i64) -> AttributeProto {
    AttributeProto {
        name: name.into(),
        type_: EnumOrUnknown::new(AttributeType::INT),
        i: v,
        ..Default::default()
    }
}

pub(crate) fn attr_ints(name: &str, v: &[i64]) -> AttributeProto {
    AttributeProto {
        name: name.into(),
        type_: EnumOrUnknown::new(AttributeType::INTS),
        ints: v.to_vec(),
        ..Default::default()
    }
}

pub(crate) fn attr_float(name: &str, v: f64) -> AttributeProto {
    AttributeProto {
        name: name.into(),
        type_: EnumOrUnknown::new(AttributeType::FLOAT),
        f: v as f32,
        ..Default::default()
    }
}

pub(crate) fn attr_floats(name: &str, v: &[f64]) -> AttributeProto {
    AttributeProto {
        name: name.into(),
        type_: EnumOrUnknown::new(AttributeType::FLOATS),
        floats: v.iter().map(|x| *x as f32).collect(),
        ..Default::default()
    }
}

pub(crate) fn attr_str(name: &str, v: &str) -> AttributeProto {
    AttributeProto {
        name: name.into(),
        type_: EnumOrUnknown::new(AttributeType::STRING),
        s: v.as_bytes().to_vec(),
        ..Default::default()
    }
}

pub(crate) fn attr_strs(name: &str, v: &[String]) -> AttributeProto {
    AttributeProto {
        name: name.into(),
        type_: EnumOrUnknown::new(AttributeType::STRINGS),
        strings: v.iter().map(|s| s.as_bytes().to_vec()).collect(),
        ..Default::default()
    }
}

pub(crate) fn attr_tensor(name: &str, t: TensorProto) -> AttributeProto {
    AttributeProto {
        name: name.into(),
        type_: EnumOrUnknown::new(AttributeType::TENSOR),
        t: MessageField::some(t),
        ..Default::default()
    }
}

pub(crate) fn attr_graph(name: &str, g: GraphProto) -> AttributeProto {
    AttributeProto {
        name: name.into(),
        type_: EnumOrUnknown::new(AttributeType::GRAPH),
        g: MessageField::some(g),
        ..Default::default()
    }
}

/// A literal scalar.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Lit {
    Int(i64),
    Float(f64),
    Bool(bool),
}

impl Lit {
    pub fn as_f64(self) -> f64 {
        match self {
            Lit::Int(v) => v as f64,
            Lit::Float(v) => v,
            Lit::Bool(b) => b as i64 as f64,
        }
    }
    pub fn as_i64(self) -> i64 {
        match self {
            Lit::Int(v) => v,
            Lit::Float(v) => v as i64,
            Lit::Bool(b) => b as i64,
        }
    }
}

/// An operand of an elementwise op: a tensor, a symbolic scalar (a rank-0
/// ONNX value), or a literal; each promotes as torch says.
#[derive(Clone, Debug)]
pub(crate) enum Operand {
    Tensor {
        name: String,
        dtype: Dtype,
        rank0: bool,
    },
    Sym {
        name: String,
        dtype: Dtype,
    },
    Lit(Lit),
}

/// The dtype torch computes an elementwise op of these operands in
/// ([`crate::promote::result_type`]).
pub(crate) fn promote(ops: &[&Operand]) -> Dtype {
    let operands: Vec<(Dtype, Rank)> = ops
        .iter()
        .map(|op| match op {
            Operand::Tensor {
                dtype,
                rank0: false,
                ..
            } => (*dtype, Rank::Dim),
            Operand::Tensor {
                dtype, rank0: true, ..
            } => (*dtype, Rank::ZeroDim),
            Operand::Sym { dtype, .. } => (*dtype, Rank::Scalar),
            Operand::Lit(Lit::Int(_)) => (Dtype::Int64, Rank::Scalar),
            Operand::Lit(Lit::Float(_)) => (Dtype::Float32, Rank::Scalar),
            Operand::Lit(Lit::Bool(_)) => (Dtype::Bool, Rank::Scalar),
        })
        .collect();
    result_type(&operands)
}

fn f32_to_f16(v: f32) -> u16 {
    let x = v.to_bits();
    let sign = ((x >> 16) & 0x8000) as u16;
    let exp = ((x >> 23) & 0xff) as i32;
    let mant = x & 0x7f_ffff;
    if exp == 0xff {
        return sign | 0x7c00 | if mant != 0 { 0x200 } else { 0 };
    }
    let e = exp - 127 + 15;
    if e >= 0x1f {
        return sign | 0x7c00;
    }
    if e <= 0 {
        if e < -10 {
            return sign;
        }
        let m = mant | 0x80_0000;
        let shift = (14 - e) as u32;
        let half = 1u32 << (shift - 1);
        let rest = m & ((1 << shift) - 1);
        let mut r = m >> shift;
        if rest > half || (rest == half && r & 1 == 1) {
            r += 1;
        }
        return sign | r as u16;
    }
    let mut r = ((e as u32) << 10) | (mant >> 13);
    let rest = mant & 0x1fff;
    if rest > 0x1000 || (rest == 0x1000 && r & 1 == 1) {
        r += 1;
    }
    sign | r as u16
}

fn f32_to_bf16(v: f32) -> u16 {
    let x = v.to_bits();
    if v.is_nan() {
        return ((x >> 16) | 0x40) as u16;
    }
    let round = 0x7fff + ((x >> 16) & 1);
    (x.wrapping_add(round) >> 16) as u16
}

/// The little-endian bytes of a literal as `dtype`.
pub(crate) fn lit_bytes(v: Lit, dtype: Dtype) -> Result<Vec<u8>> {
    let f = v.as_f64();
    Ok(match dtype {
        Dtype::Bool => vec![(f != 0.0) as u8],
        Dtype::Uint8 => vec![v.as_i64() as u8],
        Dtype::Int8 => vec![v.as_i64() as i8 as u8],
        Dtype::Int16 => (v.as_i64() as i16).to_le_bytes().to_vec(),
        Dtype::Uint16 => (v.as_i64() as u16).to_le_bytes().to_vec(),
        Dtype::Int32 => (v.as_i64() as i32).to_le_bytes().to_vec(),
        Dtype::Uint32 => (v.as_i64() as u32).to_le_bytes().to_vec(),
        Dtype::Int64 => v.as_i64().to_le_bytes().to_vec(),
        Dtype::Uint64 => (v.as_i64() as u64).to_le_bytes().to_vec(),
        Dtype::Float16 => f32_to_f16(f as f32).to_le_bytes().to_vec(),
        Dtype::BFloat16 => f32_to_bf16(f as f32).to_le_bytes().to_vec(),
        Dtype::Float32 => (f as f32).to_le_bytes().to_vec(),
        Dtype::Float64 => f.to_le_bytes().to_vec(),
        other => {
            return Err(Error::unsupported(format!(
                "cannot write a {} constant",
                other.torch_name()
            )))
        }
    })
}

fn sanitize(s: &str) -> String {
    s.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// ONNX type of an IR value.
pub(crate) fn value_type(kind: &ValueKind, opset: i64) -> Result<TypeProto> {
    let (dtype, dims): (Dtype, Vec<Dimension>) = match kind {
        ValueKind::Tensor(meta) => (
            meta.dtype,
            meta.sizes
                .iter()
                .map(|s| Dimension {
                    value: Some(match s {
                        Sym::Int(v) => dimension::Value::DimValue(*v),
                        Sym::Expr { expr, .. } => dimension::Value::DimParam(expr.to_string()),
                        other => dimension::Value::DimParam(format!("{other:?}")),
                    }),
                    ..Default::default()
                })
                .collect(),
        ),
        ValueKind::SymInt(_) => (Dtype::Int64, vec![]),
        ValueKind::SymFloat(_) => (Dtype::Float64, vec![]),
        ValueKind::SymBool(_) => (Dtype::Bool, vec![]),
        ValueKind::CustomObj(c) => {
            return Err(Error::unsupported(format!(
                "script object {c} has no ONNX type"
            )))
        }
        ValueKind::Token => return Err(Error::unsupported("effect tokens have no ONNX type")),
    };
    let elem = super::onnx_dtype(dtype, opset)?;
    Ok(TypeProto {
        value: Some(type_proto::Value::TensorType(type_proto::Tensor {
            elem_type: elem as i32,
            shape: MessageField::some(TensorShapeProto {
                dim: dims,
                ..Default::default()
            }),
            ..Default::default()
        })),
        ..Default::default()
    })
}

fn value_info(name: &str, kind: &ValueKind, opset: i64, doc: String) -> Result<ValueInfoProto> {
    Ok(ValueInfoProto {
        name: name.into(),
        type_: MessageField::some(value_type(kind, opset)?),
        doc_string: doc,
        ..Default::default()
    })
}

/// The source location and module of a node, for `doc_string`.
fn node_doc(node: &Node) -> String {
    let mut doc = node.target.to_string();
    if let Some(path) = module_path(node) {
        doc.push_str(&format!(" in module {path}"));
    }
    if let Some(trace) = &node.meta.stack_trace {
        doc.push('\n');
        doc.push_str(trace);
    }
    doc
}

/// The node's module path, leaving out torch's placeholder for "none".
fn module_path(node: &Node) -> Option<&str> {
    node.meta
        .module_path()
        .filter(|p| !p.is_empty() && !p.starts_with("_empty_nn_module_stack"))
}

pub(crate) fn convert<'p>(program: &'p Program, opts: &OnnxOptions) -> Result<Converted<'p>> {
    let mut conv = Converter {
        opset: opts.opset,
        ir_version: super::ir_version_for(opts.opset),
        allow_custom: opts.allow_custom,
        native_low_precision: opts.native_low_precision,
        names: HashSet::new(),
        node_names: HashSet::new(),
        scopes: Vec::new(),
        failures: Vec::new(),
        custom_domains: BTreeSet::new(),
        stats: Stats::default(),
        sym_sources: HashMap::new(),
    };
    let graph = &program.graph;
    let mut scope = Scope::new(graph);
    let mut onnx_graph = GraphProto::default();
    let constraints: HashMap<&str, String> = program
        .range_constraints
        .iter()
        .map(|r| {
            let bound = |b: Option<i64>| b.map_or("inf".to_string(), |v| v.to_string());
            (
                r.symbol.as_str(),
                format!("{} in [{}, {}]", r.symbol, bound(r.min), bound(r.max)),
            )
        })
        .collect();

    // User inputs first: their IR names are the model's interface.
    for (i, input) in graph.inputs.iter().enumerate() {
        let kind = program
            .input_kinds
            .get(i)
            .cloned()
            .unwrap_or(InputKind::UserInput);
        if !matches!(kind, InputKind::UserInput | InputKind::ConstantInput(_)) {
            continue;
        }
        let v = match input {
            Argument::Tensor(v) => *v,
            Argument::SymInt(SymRef::Value(v))
            | Argument::SymFloat(SymRef::Value(v))
            | Argument::SymBool(SymRef::Value(v)) => *v,
            // A literal the graph was specialised on: nodes use the literal.
            _ => continue,
        };
        let value = graph.value(v);
        let name = conv.unique(&value.name);
        let mut doc = vec!["user input".to_string()];
        if let ValueKind::Tensor(meta) = &value.kind {
            for (dim, size) in meta.sizes.iter().enumerate() {
                if let Sym::Expr { expr, .. } = size {
                    let mut symbols = Vec::new();
                    expr.symbols(&mut symbols);
                    for s in symbols {
                        if let Some(c) = constraints.get(s.as_str()) {
                            if !doc.contains(c) {
                                doc.push(c.clone());
                            }
                        }
                    }
                    if let Some(symbol) = expr.as_symbol() {
                        conv.sym_sources
                            .entry(symbol.to_string())
                            .or_insert((name.clone(), dim));
                    }
                }
            }
        }
        onnx_graph.input.push(
            value_info(&name, &value.kind, conv.opset, doc.join("; "))
                .map_err(|e| e.at(format!("input '{}'", value.name)))?,
        );
        scope.values[v.index()] = Some(name);
    }

    // Weights: one initializer per distinct storage view, under the first
    // state-dict name that uses it.
    let mut weights: Vec<&'p Weight> = Vec::new();
    let mut by_view: HashMap<String, String> = HashMap::new();
    let mut initializers = Vec::new();
    for (i, input) in graph.inputs.iter().enumerate() {
        let Some(kind) = program.input_kinds.get(i) else {
            continue;
        };
        let Some(weight_name) = kind.weight_name() else {
            match (kind, input) {
                (InputKind::Token, Argument::Tensor(v)) if scope.used[v.index()] => {
                    conv.failures.push((
                        graph.value(*v).name.clone(),
                        "input".into(),
                        "effect tokens (ops with side effects) have no ONNX form".into(),
                        ErrorKind::Unsupported,
                    ));
                }
                (InputKind::CustomObj(c), Argument::CustomObj(v)) if scope.used[v.index()] => {
                    conv.failures.push((
                        graph.value(*v).name.clone(),
                        "input".into(),
                        format!("script object {c} has no ONNX form"),
                        ErrorKind::Unsupported,
                    ));
                }
                _ => {}
            }
            continue;
        };
        let Argument::Tensor(v) = input else { continue };
        let w = program.weight_for_input(i).ok_or_else(|| {
            Error::bad_input(format!(
                "input {i} is bound to weight '{weight_name}', which the program does not have"
            ))
        })?;
        if !scope.used[v.index()] {
            conv.stats.unused_weights.push(w.name.clone());
            continue;
        }
        let key = format!(
            "{}:{}:{:?}:{:?}:{:?}",
            w.storage, w.meta.dtype, w.meta.sizes, w.meta.strides, w.meta.storage_offset
        );
        let name = match by_view.get(&key) {
            Some(n) => n.clone(),
            None => {
                let name = conv.unique(&w.name);
                let sizes = w.meta.static_sizes().ok_or_else(|| {
                    Error::bad_input(format!("weight '{}' has symbolic sizes", w.name))
                })?;
                let dtype = super::onnx_dtype(w.meta.dtype, conv.opset)
                    .map_err(|e| e.at(format!("weight '{}'", w.name)))?;
                let mut t = super::tensor_proto(&name, dtype, &sizes, Vec::new());
                t.doc_string = format!("{:?} {}", w.kind, w.name).to_lowercase();
                initializers.push(t);
                weights.push(w);
                by_view.insert(key, name.clone());
                name
            }
        };
        scope.values[v.index()] = Some(name);
    }

    conv.scopes.push(scope);
    conv.convert_nodes();
    let outputs = conv.graph_outputs(Some(&program.output_kinds))?;
    let scope = conv.scopes.pop().expect("scope");

    if !conv.failures.is_empty() {
        // Unsupported (exit 4) unless something worse went wrong.
        let kind = conv
            .failures
            .iter()
            .map(|f| f.3)
            .find(|k| *k != ErrorKind::Unsupported)
            .unwrap_or(ErrorKind::Unsupported);
        let list: Vec<(String, String, String)> = conv
            .failures
            .iter()
            .map(|(n, o, r, _)| (n.clone(), o.clone(), r.clone()))
            .collect();
        return Err(super::failures_error(&list, conv.opset, kind));
    }

    onnx_graph.node = scope.nodes;
    onnx_graph.initializer = initializers;
    onnx_graph.output = outputs;
    count_onnx_ops(&onnx_graph, &mut conv.stats);
    Ok(Converted {
        graph: onnx_graph,
        weights,
        custom_domains: conv.custom_domains,
        stats: conv.stats,
    })
}

fn count_onnx_ops(graph: &GraphProto, stats: &mut Stats) {
    for n in &graph.node {
        let key = if n.domain.is_empty() {
            n.op_type.clone()
        } else {
            format!("{}.{}", n.domain, n.op_type)
        };
        *stats.onnx_ops.entry(key).or_default() += 1;
        for a in &n.attribute {
            if let Some(g) = a.g.as_ref() {
                count_onnx_ops(g, stats);
            }
        }
    }
}

impl<'p> Converter<'p> {
    /// A model-wide unique name, `base` when free.
    pub fn unique(&mut self, base: &str) -> String {
        let base = if base.is_empty() { "v" } else { base };
        if self.names.insert(base.to_string()) {
            return base.to_string();
        }
        let mut i = 1;
        loop {
            let name = format!("{base}_{i}");
            if self.names.insert(name.clone()) {
                return name;
            }
            i += 1;
        }
    }

    fn unique_node_name(&mut self, base: &str) -> String {
        if self.node_names.insert(base.to_string()) {
            return base.to_string();
        }
        let mut i = 1;
        loop {
            let name = format!("{base}_{i}");
            if self.node_names.insert(name.clone()) {
                return name;
            }
            i += 1;
        }
    }

    fn scope(&self) -> &Scope<'p> {
        self.scopes.last().expect("a scope")
    }

    fn scope_mut(&mut self) -> &mut Scope<'p> {
        self.scopes.last_mut().expect("a scope")
    }

    fn lookup_cache(&self, key: &str) -> Option<String> {
        self.scopes
            .iter()
            .rev()
            .find_map(|s| s.cache.get(key).cloned())
    }

    /// Converts every node of the current scope's graph.
    fn convert_nodes(&mut self) {
        let graph = self.scope().graph;
        for node in &graph.nodes {
            self.convert_node(node);
        }
    }

    fn convert_node(&mut self, node: &'p Node) {
        let op = node.target.to_string();
        let start = self.scope().nodes.len();
        let found = ops::lookup(&node.target);
        let result = match found {
            Some((emit, inplace)) => {
                let mut cx = Cx::new(self, node, start);
                let r = emit(&mut cx).and_then(|()| {
                    if inplace {
                        cx.mutates_first_arg()?;
                    }
                    Ok(())
                });
                match r {
                    Ok(()) => cx.finish(),
                    Err(e) => {
                        cx.rollback();
                        Err(e)
                    }
                }
            }
            None => Err(Error::unsupported("no ONNX conversion for this op")),
        };
        match result {
            Ok(()) => {}
            Err(e) if e.kind == ErrorKind::Unsupported && self.allow_custom => {
                let start = self.scope().nodes.len();
                match self.emit_custom(node) {
                    Ok(()) => {
                        self.stats
                            .custom_nodes
                            .push((node.name.clone(), op.clone()));
                    }
                    Err(e2) => {
                        self.scope_mut().nodes.truncate(start);
                        self.failures.push((
                            node.name.clone(),
                            op.clone(),
                            e2.to_string(),
                            e2.kind,
                        ));
                        self.bind_placeholders(node);
                    }
                }
            }
            Err(e) => {
                self.failures
                    .push((node.name.clone(), op.clone(), e.to_string(), e.kind));
                self.bind_placeholders(node);
            }
        }
        let made = self.scope().nodes.len() - start;
        let entry = self.stats.ir_ops.entry(op).or_default();
        entry.0 += 1;
        entry.1 += made;
    }

    /// Gives a failed node's outputs names, so later nodes still convert
    /// (and report their own problems).
    fn bind_placeholders(&mut self, node: &Node) {
        for v in output_values(node).into_iter().flatten() {
            let graph = self.scope().graph;
            let name = self.unique(&graph.value(v).name);
            self.scope_mut().values[v.index()] = Some(name);
        }
    }

    /// Writes a node as-is in a `pt2kit.<namespace>` domain: tensor and
    /// symbolic arguments as inputs, literals as attributes.
    fn emit_custom(&mut self, node: &'p Node) -> Result<()> {
        let domain = format!("{CUSTOM_DOMAIN_PREFIX}{}", node.target.namespace);
        let mut onnx = NodeProto {
            op_type: node.target.name.clone(),
            domain: domain.clone(),
            doc_string: node_doc(node),
            ..Default::default()
        };
        if !node.target.overload.is_empty() {
            onnx.attribute
                .push(attr_str("overload", &node.target.overload));
            if self.ir_version >= 10 {
                onnx.overload = node.target.overload.clone();
            }
        }
        let mut refs = Vec::new();
        for (i, a) in node.inputs.iter().enumerate() {
            let attr_name = if a.name.is_empty() {
                format!("arg{i}")
            } else {
                a.name.clone()
            };
            match &a.arg {
                Argument::None => {}
                Argument::Int(v) | Argument::SymInt(SymRef::Int(v)) => {
                    onnx.attribute.push(attr_int(&attr_name, *v))
                }
                Argument::Bool(b) | Argument::SymBool(SymRef::Bool(b)) => {
                    onnx.attribute.push(attr_int(&attr_name, *b as i64))
                }
                Argument::Float(f) | Argument::SymFloat(SymRef::Float(f)) => {
                    onnx.attribute.push(attr_float(&attr_name, *f))
                }
                Argument::Ints(v) => onnx.attribute.push(attr_ints(&attr_name, v)),
                Argument::Floats(v) => onnx.attribute.push(attr_floats(&attr_name, v)),
                Argument::Bools(v) => onnx.attribute.push(attr_ints(
                    &attr_name,
                    &v.iter().map(|b| *b as i64).collect::<Vec<_>>(),
                )),
                Argument::String(s) => onnx.attribute.push(attr_str(&attr_name, s)),
                Argument::Strings(s) => onnx.attribute.push(attr_strs(&attr_name, s)),
                Argument::ScalarType(d) => {
                    onnx.attribute.push(attr_str(&attr_name, d.torch_name()))
                }
                Argument::MemoryFormat(m) => {
                    onnx.attribute.push(attr_str(&attr_name, m.torch_name()))
                }
                Argument::Layout(l) => onnx.attribute.push(attr_str(&attr_name, l.torch_name())),
                Argument::Device(d) => onnx.attribute.push(attr_str(&attr_name, &d.kind)),
                Argument::SymInts(rs) if rs.iter().all(|r| matches!(r, SymRef::Int(_))) => {
                    let v: Vec<i64> = rs
                        .iter()
                        .map(|r| if let SymRef::Int(v) = r { *v } else { 0 })
                        .collect();
                    onnx.attribute.push(attr_ints(&attr_name, &v));
                }
                Argument::Graph(_) => {
                    return Err(Error::unsupported("a custom node cannot carry a subgraph"))
                }
                other => {
                    refs.clear();
                    other.value_refs(&mut refs);
                    for v in &refs {
                        let name = self.scope().values[v.index()].clone().ok_or_else(|| {
                            Error::internal(format!("value {} has no ONNX name", v.0))
                        })?;
                        onnx.input.push(name);
                    }
                }
            }
        }
        for v in output_values(node) {
            match v {
                Some(v) => {
                    let graph = self.scope().graph;
                    let name = self.unique(&graph.value(v).name);
                    self.scope_mut().values[v.index()] = Some(name.clone());
                    self.scope_mut().owned.insert(name.clone());
                    onnx.output.push(name);
                }
                None => onnx.output.push(String::new()),
            }
        }
        while onnx.output.last().is_some_and(|o| o.is_empty()) {
            onnx.output.pop();
        }
        onnx.name = self.unique_node_name(&node.name);
        self.custom_domains.insert(domain);
        self.scope_mut().nodes.push(onnx);
        Ok(())
    }

    /// The current graph's outputs as ONNX outputs, each with its own name
    /// (an Identity where a value is an input, a weight, a constant or
    /// already an output).
    fn graph_outputs(&mut self, kinds: Option<&[OutputKind]>) -> Result<Vec<ValueInfoProto>> {
        let graph = self.scope().graph;
        let mut outs = Vec::new();
        let mut taken: HashSet<String> = HashSet::new();
        for (i, out) in graph.outputs.iter().enumerate() {
            let kind = kinds.and_then(|k| k.get(i));
            if matches!(kind, Some(OutputKind::Token)) {
                continue;
            }
            let v = match out {
                Argument::Tensor(v) => *v,
                Argument::SymInt(SymRef::Value(v))
                | Argument::SymFloat(SymRef::Value(v))
                | Argument::SymBool(SymRef::Value(v)) => *v,
                Argument::None => continue,
                other => {
                    // A literal output: a constant.
                    let lit = match other {
                        Argument::Int(v) | Argument::SymInt(SymRef::Int(v)) => {
                            (Lit::Int(*v), Dtype::Int64)
                        }
                        Argument::Float(f) | Argument::SymFloat(SymRef::Float(f)) => {
                            (Lit::Float(*f), Dtype::Float64)
                        }
                        Argument::Bool(b) | Argument::SymBool(SymRef::Bool(b)) => {
                            (Lit::Bool(*b), Dtype::Bool)
                        }
                        _ => {
                            return Err(Error::unsupported(format!(
                                "graph output {i} ({other:?}) has no ONNX form"
                            )))
                        }
                    };
                    let name = self.unique(&format!("output_{i}"));
                    let t = super::tensor_proto(
                        "",
                        super::onnx_dtype(lit.1, self.opset)?,
                        &[],
                        lit_bytes(lit.0, lit.1)?,
                    );
                    let node = NodeProto {
                        op_type: "Constant".into(),
                        output: vec![name.clone()],
                        name: self.unique_node_name(&name),
                        attribute: vec![attr_tensor("value", t)],
                        ..Default::default()
                    };
                    self.scope_mut().nodes.push(node);
                    let kind = match lit.1 {
                        Dtype::Int64 => ValueKind::SymInt(Sym::Int(0)),
                        Dtype::Float64 => ValueKind::SymFloat(Sym::Float(0.0)),
                        _ => ValueKind::SymBool(Sym::Bool(false)),
                    };
                    outs.push(value_info(
                        &name,
                        &kind,
                        self.opset,
                        "constant output".into(),
                    )?);
                    continue;
                }
            };
            let value = graph.value(v);
            let bound = self.scope().values[v.index()].clone().ok_or_else(|| {
                Error::internal(format!("output '{}' was never defined", value.name))
            })?;
            let name = if self.scope().owned.contains(&bound) && !taken.contains(&bound) {
                bound
            } else {
                let name = self.unique(&value.name);
                let node = NodeProto {
                    op_type: "Identity".into(),
                    input: vec![bound],
                    output: vec![name.clone()],
                    name: self.unique_node_name(&format!("{}.output", value.name)),
                    ..Default::default()
                };
                self.scope_mut().nodes.push(node);
                name
            };
            taken.insert(name.clone());
            let doc = match kind {
                None | Some(OutputKind::UserOutput) => "user output".to_string(),
                Some(OutputKind::LossOutput) => "loss output".to_string(),
                Some(OutputKind::BufferMutation(b)) => format!("buffer mutation: {b}"),
                Some(OutputKind::UserInputMutation(u)) => format!("user input mutation: {u}"),
                Some(OutputKind::ParameterMutation(p)) => format!("parameter mutation: {p}"),
                Some(OutputKind::GradientToParameter(p)) => format!("gradient of {p}"),
                Some(OutputKind::GradientToUserInput(u)) => format!("gradient of {u}"),
                Some(OutputKind::Token) => "token".to_string(),
            };
            outs.push(
                value_info(&name, &value.kind, self.opset, doc)
                    .map_err(|e| e.at(format!("output '{}'", value.name)))?,
            );
        }
        Ok(outs)
    }

    /// Converts a subgraph (a `cond` branch) whose inputs are bound to
    /// values of the enclosing scope. ONNX branches take no inputs: they
    /// read the enclosing scope's names.
    pub(crate) fn convert_subgraph(
        &mut self,
        graph: &'p Graph,
        inputs: &[String],
        name: &str,
    ) -> Result<GraphProto> {
        if graph.inputs.len() != inputs.len() {
            return Err(Error::bad_input(format!(
                "subgraph {name} takes {} inputs, but {} are given",
                graph.inputs.len(),
                inputs.len()
            )));
        }
        let mut scope = Scope::new(graph);
        for (input, outer) in graph.inputs.iter().zip(inputs) {
            let mut refs = Vec::new();
            input.value_refs(&mut refs);
            for v in refs {
                scope.values[v.index()] = Some(outer.clone());
            }
        }
        self.scopes.push(scope);
        self.convert_nodes();
        let outputs = self.graph_outputs(None);
        let scope = self.scopes.pop().expect("scope");
        Ok(GraphProto {
            name: name.into(),
            node: scope.nodes,
            output: outputs?,
            ..Default::default()
        })
    }
}

impl<'p> Converter<'p> {
    /// Converts a loop or scan body into an ONNX graph with inputs: after
    /// `leading` (a Loop's iteration number and condition), the graph's
    /// first inputs become the ONNX graph's inputs (typed from the IR);
    /// the others, as many as `outer` names, read those values of the
    /// enclosing scopes. `then` runs in the body's scope on the names of
    /// the body's outputs; it may add nodes, and the outputs it returns go
    /// before the body's own (a while loop's next condition).
    pub(crate) fn convert_body(
        &mut self,
        graph: &'p Graph,
        leading: Vec<ValueInfoProto>,
        outer: &[String],
        name: &str,
        then: impl FnOnce(&mut Self, &[String]) -> Result<Vec<ValueInfoProto>>,
    ) -> Result<GraphProto> {
        let fresh = graph.inputs.len().checked_sub(outer.len()).ok_or_else(|| {
            Error::bad_input(format!(
                "subgraph {name} takes {} inputs, but {} outer values are given",
                graph.inputs.len(),
                outer.len()
            ))
        })?;
        let mut scope = Scope::new(graph);
        let mut inputs = leading;
        for (i, input) in graph.inputs.iter().enumerate() {
            if i >= fresh {
                let mut refs = Vec::new();
                input.value_refs(&mut refs);
                for v in refs {
                    scope.values[v.index()] = Some(outer[i - fresh].clone());
                }
                continue;
            }
            let v = match input {
                Argument::Tensor(v)
                | Argument::SymInt(SymRef::Value(v))
                | Argument::SymFloat(SymRef::Value(v))
                | Argument::SymBool(SymRef::Value(v)) => *v,
                other => {
                    return Err(Error::unsupported(format!(
                        "subgraph {name}: input {i} ({other:?}) cannot be a graph input"
                    )))
                }
            };
            let value = graph.value(v);
            let onnx_name = self.unique(&value.name);
            inputs.push(
                value_info(&onnx_name, &value.kind, self.opset, String::new())
                    .map_err(|e| e.at(format!("subgraph {name}: input '{}'", value.name)))?,
            );
            scope.values[v.index()] = Some(onnx_name);
        }
        self.scopes.push(scope);
        self.convert_nodes();
        let result = self.graph_outputs(None).and_then(|outputs| {
            let names: Vec<String> = outputs.iter().map(|o| o.name.clone()).collect();
            let mut all = then(self, &names)?;
            all.extend(outputs);
            Ok(all)
        });
        let scope = self.scopes.pop().expect("scope");
        Ok(GraphProto {
            name: name.into(),
            input: inputs,
            node: scope.nodes,
            output: result?,
            ..Default::default()
        })
    }

    /// Adds a node to the current scope, named after `name`, and returns
    /// its output (for nodes a body adds outside any emitter).
    pub(crate) fn add_node(
        &mut self,
        op: &str,
        inputs: &[&str],
        attrs: Vec<AttributeProto>,
        name: &str,
    ) -> String {
        let output = self.unique(name);
        let node = NodeProto {
            op_type: op.into(),
            input: inputs.iter().map(|s| s.to_string()).collect(),
            output: vec![output.clone()],
            name: self.unique_node_name(name),
            attribute: attrs,
            ..Default::default()
        };
        self.scope_mut().nodes.push(node);
        output
    }

    /// An ONNX value description of a scalar (bool or int64) with a doc.
    pub(crate) fn scalar_info(
        &self,
        name: &str,
        dtype: Dtype,
        doc: &str,
    ) -> Result<ValueInfoProto> {
        let kind = match dtype {
            Dtype::Bool => ValueKind::SymBool(Sym::Bool(false)),
            Dtype::Int64 => ValueKind::SymInt(Sym::Int(0)),
            other => {
                return Err(Error::internal(format!(
                    "no scalar value info for {}",
                    other.torch_name()
                )))
            }
        };
        value_info(name, &kind, self.opset, doc.into())
    }
}

impl<'p> Converter<'p> {
    /// Converts a subgraph in place: its nodes join the current graph and
    /// its outputs' names are returned (`wrap_with_set_grad_enabled` and
    /// other wrappers that only scope a region).
    pub(crate) fn inline_subgraph(
        &mut self,
        graph: &'p Graph,
        inputs: &[String],
    ) -> Result<Vec<String>> {
        if graph.inputs.len() != inputs.len() {
            return Err(Error::bad_input(format!(
                "a subgraph takes {} inputs, but {} are given",
                graph.inputs.len(),
                inputs.len()
            )));
        }
        let mut scope = Scope::new(graph);
        for (input, outer) in graph.inputs.iter().zip(inputs) {
            let mut refs = Vec::new();
            input.value_refs(&mut refs);
            for v in refs {
                scope.values[v.index()] = Some(outer.clone());
            }
        }
        self.scopes.push(scope);
        self.convert_nodes();
        let scope = self.scopes.pop().expect("scope");
        let mut outputs = Vec::new();
        for out in &graph.outputs {
            let mut refs = Vec::new();
            out.value_refs(&mut refs);
            for v in refs {
                outputs.push(scope.values[v.index()].clone().ok_or_else(|| {
                    Error::internal(format!(
                        "subgraph output '{}' was never defined",
                        graph.value(v).name
                    ))
                })?);
            }
        }
        self.scope_mut().nodes.extend(scope.nodes);
        Ok(outputs)
    }
}

/// What an emitter works with: one IR node, and the converter it adds
/// ONNX nodes to.
pub(crate) struct Cx<'c, 'p> {
    pub conv: &'c mut Converter<'p>,
    pub node: &'p Node,
    start: usize,
    outputs: Vec<Option<ValueId>>,
    bound: Vec<Option<String>>,
    /// Names of values this emitter's nodes produce (may be renamed to the
    /// IR names of the outputs they turn out to be).
    temps: HashSet<String>,
    /// Cache keys added by this emitter (removed again on failure).
    cached: Vec<String>,
    mutated: Vec<ValueId>,
}

impl<'c, 'p> Cx<'c, 'p> {
    fn new(conv: &'c mut Converter<'p>, node: &'p Node, start: usize) -> Cx<'c, 'p> {
        let outputs = output_values(node);
        let bound = vec![None; outputs.len()];
        Cx {
            conv,
            node,
            start,
            outputs,
            bound,
            temps: HashSet::new(),
            cached: Vec::new(),
            mutated: Vec::new(),
        }
    }

    fn rollback(&mut self) {
        let start = self.start;
        let keys = std::mem::take(&mut self.cached);
        let scope = self.conv.scope_mut();
        scope.nodes.truncate(start);
        for k in keys {
            scope.cache.remove(&k);
        }
    }

    /// Binds outputs, names the emitted nodes after the IR node and gives
    /// each result the IR value's name.
    fn finish(&mut self) -> Result<()> {
        let node = self.node;
        let mut renames: HashMap<String, String> = HashMap::new();
        for (i, v) in self.outputs.clone().into_iter().enumerate() {
            let Some(v) = v else { continue };
            let Some(bound) = self.bound[i].clone() else {
                if self.conv.scope().used[v.index()] {
                    return Err(Error::internal(format!(
                        "the emitter left output {i} undefined"
                    )));
                }
                continue;
            };
            let name = if let Some(r) = renames.get(&bound) {
                r.clone()
            } else if self.temps.contains(&bound) {
                let graph = self.conv.scope().graph;
                let ir_name = self.conv.unique(&graph.value(v).name);
                renames.insert(bound.clone(), ir_name.clone());
                self.conv.scope_mut().owned.insert(ir_name.clone());
                ir_name
            } else {
                bound
            };
            self.conv.scope_mut().values[v.index()] = Some(name);
        }
        let doc = node_doc(node);
        let module = module_path(node).map(str::to_string);
        let start = self.start;
        let count = self.conv.scope().nodes.len() - start;
        let ir_version = self.conv.ir_version;
        for k in start..start + count {
            if !self.conv.scope().nodes[k].name.is_empty() {
                // Named by an inlined subgraph's own nodes.
                continue;
            }
            let op_type = self.conv.scope().nodes[k].op_type.clone();
            let base = if count == 1 {
                node.name.clone()
            } else {
                format!("{}/{}", node.name, op_type)
            };
            let name = self.conv.unique_node_name(&base);
            let n = &mut self.conv.scope_mut().nodes[k];
            n.name = name;
            for s in n.input.iter_mut().chain(n.output.iter_mut()) {
                if let Some(r) = renames.get(s) {
                    *s = r.clone();
                }
            }
            n.doc_string = doc.clone();
            if ir_version >= 10 {
                let mut props = vec![
                    ("pt2.node", node.name.clone()),
                    ("pt2.op", node.target.to_string()),
                ];
                if let Some(m) = &module {
                    props.push(("pt2.module", m.clone()));
                }
                for (key, value) in props {
                    n.metadata_props.push(StringStringEntryProto {
                        key: key.into(),
                        value,
                        ..Default::default()
                    });
                }
            }
        }
        // In-place ops: later readers of the mutated value see the result.
        for v in std::mem::take(&mut self.mutated) {
            let result = self
                .outputs
                .first()
                .copied()
                .flatten()
                .and_then(|o| self.conv.scope().values[o.index()].clone())
                .ok_or_else(|| Error::internal("an in-place op without a result"))?;
            self.conv.scope_mut().values[v.index()] = Some(result);
        }
        Ok(())
    }

    pub fn opset(&self) -> i64 {
        self.conv.opset
    }

    /// The dtype ONNX computes an op in whose result torch gives in `d`:
    /// float16 and bfloat16 math runs in float32 and is rounded back, as
    /// torch's CPU kernels do (and ONNX Runtime has no CPU bfloat16
    /// kernels), unless the options ask for native low precision.
    pub fn compute(&self, d: Dtype) -> Dtype {
        if matches!(d, Dtype::Float16 | Dtype::BFloat16) && !self.conv.native_low_precision {
            Dtype::Float32
        } else {
            d
        }
    }

    fn graph(&self) -> &'p Graph {
        self.conv.scope().graph
    }

    // ---- arguments ----

    fn missing(&self, name: &str) -> Error {
        Error::bad_input(format!("missing argument '{name}'"))
    }

    pub fn arg(&self, name: &str) -> Result<&'p Argument> {
        let node: &'p Node = self.node;
        node.arg(name).ok_or_else(|| self.missing(name))
    }

    /// The argument at a position (higher-order ops have unnamed arguments).
    pub fn pos(&self, i: usize) -> Result<&'p Argument> {
        let node: &'p Node = self.node;
        node.inputs
            .get(i)
            .map(|a| &a.arg)
            .ok_or_else(|| Error::bad_input(format!("missing argument {i}")))
    }

    /// Present and not None.
    pub fn has(&self, name: &str) -> bool {
        !matches!(
            self.node.arg(name),
            None | Some(Argument::None) | Some(Argument::OptionalTensor(None))
        )
    }

    fn bad(&self, name: &str, what: &str, arg: &Argument) -> Error {
        Error::bad_input(format!("argument '{name}' should be {what}, not {arg:?}"))
    }

    pub fn value_name(&self, v: ValueId) -> Result<String> {
        self.conv
            .scope()
            .values
            .get(v.index())
            .cloned()
            .flatten()
            .ok_or_else(|| {
                Error::internal(format!(
                    "value '{}' has no ONNX name",
                    self.graph().value(v).name
                ))
            })
    }

    pub fn value_meta(&self, v: ValueId) -> Result<&'p TensorMeta> {
        match &self.graph().value(v).kind {
            ValueKind::Tensor(m) => Ok(m),
            other => Err(Error::bad_input(format!(
                "value '{}' is not a tensor ({other:?})",
                self.graph().value(v).name
            ))),
        }
    }

    fn tensor_id(&self, name: &str) -> Result<ValueId> {
        match self.arg(name)? {
            Argument::Tensor(v) | Argument::OptionalTensor(Some(v)) => Ok(*v),
            other => Err(self.bad(name, "a tensor", other)),
        }
    }

    /// The ONNX name of a tensor argument.
    pub fn input(&self, name: &str) -> Result<String> {
        self.value_name(self.tensor_id(name)?)
    }

    pub fn opt_input(&self, name: &str) -> Result<Option<String>> {
        match self.node.arg(name) {
            None | Some(Argument::None) | Some(Argument::OptionalTensor(None)) => Ok(None),
            Some(_) => self.input(name).map(Some),
        }
    }

    pub fn meta(&self, name: &str) -> Result<&'p TensorMeta> {
        self.value_meta(self.tensor_id(name)?)
    }

    pub fn dtype(&self, name: &str) -> Result<Dtype> {
        Ok(self.meta(name)?.dtype)
    }

    pub fn rank(&self, name: &str) -> Result<usize> {
        Ok(self.meta(name)?.sizes.len())
    }

    /// A list of tensors (`Tensor[]`), with their metadata.
    pub fn tensors(&self, name: &str) -> Result<Vec<(String, &'p TensorMeta)>> {
        match self.arg(name)? {
            Argument::Tensors(vs) => vs
                .iter()
                .map(|v| Ok((self.value_name(*v)?, self.value_meta(*v)?)))
                .collect(),
            other => Err(self.bad(name, "a list of tensors", other)),
        }
    }

    pub fn optional_tensors(&self, name: &str) -> Result<Vec<Option<(String, &'p TensorMeta)>>> {
        match self.arg(name)? {
            Argument::OptionalTensors(vs) => vs
                .iter()
                .map(|v| match v {
                    Some(v) => Ok(Some((self.value_name(*v)?, self.value_meta(*v)?))),
                    None => Ok(None),
                })
                .collect(),
            Argument::Tensors(vs) => vs
                .iter()
                .map(|v| Ok(Some((self.value_name(*v)?, self.value_meta(*v)?))))
                .collect(),
            other => Err(self.bad(name, "a list of optional tensors", other)),
        }
    }

    pub fn int(&self, name: &str) -> Result<i64> {
        self.opt_int(name)?.ok_or_else(|| self.missing(name))
    }

    pub fn opt_int(&self, name: &str) -> Result<Option<i64>> {
        match self.node.arg(name) {
            None | Some(Argument::None) => Ok(None),
            Some(Argument::Int(v)) | Some(Argument::SymInt(SymRef::Int(v))) => Ok(Some(*v)),
            Some(Argument::Bool(b)) => Ok(Some(*b as i64)),
            Some(Argument::SymInt(SymRef::Value(v))) => match &self.graph().value(*v).kind {
                ValueKind::SymInt(Sym::Int(k)) => Ok(Some(*k)),
                _ => Err(Error::unsupported(format!(
                    "argument '{name}' is symbolic ({}) where a constant is needed",
                    self.graph().value(*v).name
                ))),
            },
            Some(other) => Err(self.bad(name, "an integer", other)),
        }
    }

    pub fn ints(&self, name: &str) -> Result<Vec<i64>> {
        self.opt_ints(name)?.ok_or_else(|| self.missing(name))
    }

    pub fn opt_ints(&self, name: &str) -> Result<Option<Vec<i64>>> {
        match self.node.arg(name) {
            None | Some(Argument::None) => Ok(None),
            Some(Argument::Ints(v)) => Ok(Some(v.clone())),
            Some(Argument::Int(v)) => Ok(Some(vec![*v])),
            Some(Argument::SymInts(rs)) => rs
                .iter()
                .map(|r| match r {
                    SymRef::Int(v) => Ok(*v),
                    SymRef::Value(v) => match &self.graph().value(*v).kind {
                        ValueKind::SymInt(Sym::Int(k)) => Ok(*k),
                        _ => Err(Error::unsupported(format!(
                            "argument '{name}' has a symbolic element ({}) where constants are needed",
                            self.graph().value(*v).name
                        ))),
                    },
                    other => Err(Error::bad_input(format!("argument '{name}': {other:?} is not an integer"))),
                })
                .collect::<Result<Vec<_>>>()
                .map(Some),
            Some(other) => Err(self.bad(name, "a list of integers", other)),
        }
    }

    pub fn opt_float(&self, name: &str) -> Result<Option<f64>> {
        match self.node.arg(name) {
            None | Some(Argument::None) => Ok(None),
            Some(Argument::Float(v)) | Some(Argument::SymFloat(SymRef::Float(v))) => Ok(Some(*v)),
            Some(Argument::Int(v)) | Some(Argument::SymInt(SymRef::Int(v))) => Ok(Some(*v as f64)),
            Some(Argument::Bool(b)) => Ok(Some(*b as i64 as f64)),
            Some(other) => Err(self.bad(name, "a number", other)),
        }
    }

    pub fn bool(&self, name: &str) -> Result<bool> {
        match self.node.arg(name) {
            Some(Argument::Bool(b)) | Some(Argument::SymBool(SymRef::Bool(b))) => Ok(*b),
            Some(Argument::Int(v)) => Ok(*v != 0),
            None => Err(self.missing(name)),
            Some(other) => Err(self.bad(name, "a bool", other)),
        }
    }

    pub fn opt_bool(&self, name: &str) -> Result<Option<bool>> {
        match self.node.arg(name) {
            None | Some(Argument::None) => Ok(None),
            Some(_) => self.bool(name).map(Some),
        }
    }

    pub fn string(&self, name: &str) -> Result<String> {
        match self.arg(name)? {
            Argument::String(s) => Ok(s.clone()),
            other => Err(self.bad(name, "a string", other)),
        }
    }

    pub fn opt_string(&self, name: &str) -> Result<Option<String>> {
        match self.node.arg(name) {
            None | Some(Argument::None) => Ok(None),
            Some(_) => self.string(name).map(Some),
        }
    }

    /// An elementwise operand: tensor, symbolic scalar or literal.
    pub fn operand(&self, name: &str) -> Result<Operand> {
        self.operand_of(self.arg(name)?, name)
    }

    pub fn operand_of(&self, arg: &Argument, name: &str) -> Result<Operand> {
        let sym = |v: &ValueId, dtype: Dtype| -> Result<Operand> {
            Ok(Operand::Sym {
                name: self.value_name(*v)?,
                dtype,
            })
        };
        match arg {
            Argument::Tensor(v) | Argument::OptionalTensor(Some(v)) => {
                let meta = self.value_meta(*v)?;
                Ok(Operand::Tensor {
                    name: self.value_name(*v)?,
                    dtype: meta.dtype,
                    rank0: meta.sizes.is_empty(),
                })
            }
            Argument::Int(v) | Argument::SymInt(SymRef::Int(v)) => Ok(Operand::Lit(Lit::Int(*v))),
            Argument::Float(v) | Argument::SymFloat(SymRef::Float(v)) => {
                Ok(Operand::Lit(Lit::Float(*v)))
            }
            Argument::Bool(v) | Argument::SymBool(SymRef::Bool(v)) => {
                Ok(Operand::Lit(Lit::Bool(*v)))
            }
            Argument::SymInt(SymRef::Value(v)) => sym(v, Dtype::Int64),
            Argument::SymFloat(SymRef::Value(v)) => sym(v, Dtype::Float64),
            Argument::SymBool(SymRef::Value(v)) => sym(v, Dtype::Bool),
            Argument::SymInt(SymRef::Float(f)) => Ok(Operand::Lit(Lit::Float(*f))),
            other => Err(self.bad(name, "a tensor or a scalar", other)),
        }
    }

    /// An operand as an ONNX value of `dtype` (literals become rank-0 constants).
    pub fn operand_as(&mut self, op: &Operand, dtype: Dtype) -> Result<String> {
        match op {
            Operand::Tensor { name, dtype: d, .. } | Operand::Sym { name, dtype: d } => {
                let (name, d) = (name.clone(), *d);
                self.cast(&name, d, dtype)
            }
            Operand::Lit(l) => self.scalar(*l, dtype),
        }
    }

    /// A rank-0 int64 value for a symbolic int argument.
    pub fn sym_int(&mut self, r: &SymRef) -> Result<String> {
        match r {
            SymRef::Int(v) => Ok(self.const_i64(*v)),
            SymRef::Value(v) => {
                let name = self.value_name(*v)?;
                match &self.graph().value(*v).kind {
                    ValueKind::SymInt(_) => Ok(name),
                    ValueKind::SymFloat(_) => self.cast(&name, Dtype::Float64, Dtype::Int64),
                    ValueKind::SymBool(_) => self.cast(&name, Dtype::Bool, Dtype::Int64),
                    ValueKind::Tensor(m) => {
                        let dtype = m.dtype;
                        let flat = self.reshape_const(&name, &[])?;
                        self.cast(&flat, dtype, Dtype::Int64)
                    }
                    other => Err(Error::bad_input(format!("{other:?} is not an integer"))),
                }
            }
            SymRef::Float(f) => Ok(self.const_i64(*f as i64)),
            SymRef::Bool(b) => Ok(self.const_i64(*b as i64)),
        }
    }

    /// A 1-D int64 value for an int-list argument (constant, or a Concat of
    /// its symbolic elements).
    pub fn int_list(&mut self, name: &str) -> Result<String> {
        match self.arg(name)? {
            Argument::Ints(v) => Ok(self.const_i64s(&v.clone())),
            Argument::Int(v) => Ok(self.const_i64s(&[*v])),
            Argument::SymInts(rs) => {
                let rs = rs.clone();
                self.sym_list(&rs)
            }
            other => Err(self.bad(name, "a list of integers", other)),
        }
    }

    pub fn sym_list(&mut self, rs: &[SymRef]) -> Result<String> {
        if rs.iter().all(|r| matches!(r, SymRef::Int(_))) {
            let v: Vec<i64> = rs
                .iter()
                .map(|r| if let SymRef::Int(v) = r { *v } else { 0 })
                .collect();
            return Ok(self.const_i64s(&v));
        }
        let mut parts = Vec::new();
        let mut run: Vec<i64> = Vec::new();
        for r in rs {
            match r {
                SymRef::Int(v) => run.push(*v),
                other => {
                    if !run.is_empty() {
                        parts.push(self.const_i64s(&std::mem::take(&mut run)));
                    }
                    let s = self.sym_int(other)?;
                    parts.push(self.reshape_const(&s, &[1])?);
                }
            }
        }
        if !run.is_empty() {
            parts.push(self.const_i64s(&run));
        }
        Ok(self.concat(&parts, 0))
    }

    // ---- outputs ----

    pub fn out_count(&self) -> usize {
        self.outputs.len()
    }

    pub fn out_meta(&self, i: usize) -> Result<&'p TensorMeta> {
        let v = self
            .outputs
            .get(i)
            .copied()
            .flatten()
            .ok_or_else(|| Error::bad_input(format!("the node has no output {i}")))?;
        self.value_meta(v)
    }

    pub fn out_kind(&self, i: usize) -> Result<&'p ValueKind> {
        let v = self
            .outputs
            .get(i)
            .copied()
            .flatten()
            .ok_or_else(|| Error::bad_input(format!("the node has no output {i}")))?;
        Ok(&self.graph().value(v).kind)
    }

    pub fn out_dtype(&self, i: usize) -> Result<Dtype> {
        let v = self
            .outputs
            .get(i)
            .copied()
            .flatten()
            .ok_or_else(|| Error::bad_input(format!("the node has no output {i}")))?;
        Ok(match &self.graph().value(v).kind {
            ValueKind::Tensor(m) => m.dtype,
            ValueKind::SymInt(_) => Dtype::Int64,
            ValueKind::SymFloat(_) => Dtype::Float64,
            ValueKind::SymBool(_) => Dtype::Bool,
            other => return Err(Error::unsupported(format!("output {i} is {other:?}"))),
        })
    }

    pub fn out_used(&self, i: usize) -> bool {
        self.outputs
            .get(i)
            .copied()
            .flatten()
            .is_some_and(|v| self.conv.scope().used[v.index()])
    }

    /// Binds output `i` to an ONNX value.
    pub fn set(&mut self, i: usize, name: String) {
        if i < self.bound.len() {
            self.bound[i] = Some(name);
        }
    }

    /// Records that the op writes its first argument in place.
    fn mutates_first_arg(&mut self) -> Result<()> {
        let first = self
            .node
            .inputs
            .first()
            .ok_or_else(|| Error::bad_input("no arguments"))?;
        if let Argument::Tensor(v) = &first.arg {
            self.mutated.push(*v);
        }
        Ok(())
    }

    // ---- nodes ----

    /// Adds a node with one output and returns the output's name.
    pub fn node(&mut self, op: &str, inputs: &[&str], attrs: Vec<AttributeProto>) -> String {
        self.node_n(op, inputs, attrs, 1).remove(0)
    }

    /// Adds a node with `n` outputs.
    pub fn node_n(
        &mut self,
        op: &str,
        inputs: &[&str],
        attrs: Vec<AttributeProto>,
        n: usize,
    ) -> Vec<String> {
        let outputs: Vec<String> = (0..n)
            .map(|i| {
                let base = if n == 1 {
                    format!("{}.{op}", self.node.name)
                } else {
                    format!("{}.{op}.{i}", self.node.name)
                };
                self.conv.unique(&base)
            })
            .collect();
        for o in &outputs {
            self.temps.insert(o.clone());
        }
        self.push(op, inputs, attrs, outputs.clone());
        outputs
    }

    fn push(
        &mut self,
        op: &str,
        inputs: &[&str],
        attrs: Vec<AttributeProto>,
        outputs: Vec<String>,
    ) {
        let node = NodeProto {
            op_type: op.into(),
            input: inputs.iter().map(|s| s.to_string()).collect(),
            output: outputs,
            attribute: attrs,
            ..Default::default()
        };
        self.conv.scope_mut().nodes.push(node);
    }

    fn cache_get(&self, key: &str) -> Option<String> {
        self.conv.lookup_cache(key)
    }

    fn cache_put(&mut self, key: String, name: String) {
        self.conv.scope_mut().cache.insert(key.clone(), name);
        self.cached.push(key);
    }

    /// A constant tensor (deduplicated within the scope).
    pub fn constant(&mut self, dtype: Dtype, dims: &[i64], raw: Vec<u8>) -> Result<String> {
        let onnx = super::onnx_dtype(dtype, self.conv.opset)?;
        let key = format!("const:{}:{dims:?}:{raw:?}", dtype.short_name());
        if let Some(name) = self.cache_get(&key) {
            return Ok(name);
        }
        let base = match (dims.len(), raw.len()) {
            (0, _) | (1, ..=8) => format!("const_{}", dtype.short_name()),
            _ => "const".to_string(),
        };
        let name = self.conv.unique(&base);
        let t = super::tensor_proto("", onnx, dims, raw);
        self.push(
            "Constant",
            &[],
            vec![attr_tensor("value", t)],
            vec![name.clone()],
        );
        self.cache_put(key, name.clone());
        Ok(name)
    }

    pub fn const_i64s(&mut self, v: &[i64]) -> String {
        let raw: Vec<u8> = v.iter().flat_map(|x| x.to_le_bytes()).collect();
        self.constant(Dtype::Int64, &[v.len() as i64], raw)
            .expect("int64 constants")
    }

    pub fn const_i64(&mut self, v: i64) -> String {
        self.constant(Dtype::Int64, &[], v.to_le_bytes().to_vec())
            .expect("int64 constants")
    }

    /// A rank-0 constant of `dtype`.
    pub fn scalar(&mut self, v: Lit, dtype: Dtype) -> Result<String> {
        let raw = lit_bytes(v, dtype)?;
        self.constant(dtype, &[], raw)
    }

    /// A constant of `dtype` filled with `v`.
    pub fn filled(&mut self, v: Lit, dtype: Dtype, dims: &[i64]) -> Result<String> {
        let one = lit_bytes(v, dtype)?;
        let n: i64 = dims.iter().product();
        let raw = one.repeat(n.max(0) as usize);
        self.constant(dtype, dims, raw)
    }

    pub fn cast(&mut self, x: &str, from: Dtype, to: Dtype) -> Result<String> {
        if from == to {
            return Ok(x.to_string());
        }
        let onnx = super::onnx_dtype(to, self.conv.opset)?;
        Ok(self.node("Cast", &[x], vec![attr_int("to", onnx as i64)]))
    }

    pub fn concat(&mut self, parts: &[String], axis: i64) -> String {
        if parts.len() == 1 {
            return parts[0].clone();
        }
        let refs: Vec<&str> = parts.iter().map(String::as_str).collect();
        self.node("Concat", &refs, vec![attr_int("axis", axis)])
    }

    pub fn reshape_const(&mut self, x: &str, shape: &[i64]) -> Result<String> {
        let s = self.const_i64s(shape);
        let attrs = if shape.contains(&0) {
            vec![attr_int("allowzero", 1)]
        } else {
            vec![]
        };
        Ok(self.node("Reshape", &[x, &s], attrs))
    }

    pub fn unsqueeze(&mut self, x: &str, axes: &[i64]) -> String {
        let a = self.const_i64s(axes);
        self.node("Unsqueeze", &[x, &a], vec![])
    }

    pub fn squeeze(&mut self, x: &str, axes: &[i64]) -> String {
        let a = self.const_i64s(axes);
        self.node("Squeeze", &[x, &a], vec![])
    }

    pub fn transpose(&mut self, x: &str, perm: &[i64]) -> String {
        self.node("Transpose", &[x], vec![attr_ints("perm", perm)])
    }

    /// A reduction over `axes` (all when `None` or empty), honouring the
    /// opset: axes are an input of ReduceSum from 13 and of the others from 18.
    pub fn reduce(&mut self, op: &str, x: &str, axes: Option<&[i64]>, keepdims: bool) -> String {
        let axes = axes.filter(|a| !a.is_empty());
        let mut attrs = vec![attr_int("keepdims", keepdims as i64)];
        if op == "ReduceSum" || self.conv.opset >= 18 {
            match axes {
                Some(a) => {
                    let a = self.const_i64s(a);
                    self.node(op, &[x, &a], attrs)
                }
                None => self.node(op, &[x], attrs),
            }
        } else {
            if let Some(a) = axes {
                attrs.push(attr_ints("axes", a));
            }
            self.node(op, &[x], attrs)
        }
    }

    pub fn shape(&mut self, x: &str) -> String {
        self.node("Shape", &[x], vec![])
    }

    /// A rank-0 int64 value of a symbolic size. Symbols are read from the
    /// user input dim that defines them; expressions are built from those.
    pub fn sym_size(&mut self, s: &Sym) -> Result<String> {
        match s {
            Sym::Int(v) => Ok(self.const_i64(*v)),
            Sym::Expr { expr, .. } => self.sym_expr(expr),
            other => Err(Error::unsupported(format!("{other:?} is not a size"))),
        }
    }

    fn sym_expr(&mut self, e: &SymExpr) -> Result<String> {
        if let SymExpr::Int(v) = e {
            return Ok(self.const_i64(*v));
        }
        let key = format!("sym:{e}");
        if let Some(name) = self.cache_get(&key) {
            return Ok(name);
        }
        let name = if let Some(symbol) = e.as_symbol() {
            let (input, dim) = self.conv.sym_sources.get(symbol).cloned().ok_or_else(|| {
                Error::unsupported(format!(
                    "symbol {symbol} is not the size of any input dim, so it cannot be computed"
                ))
            })?;
            let shape_key = format!("shape:{input}");
            let shape = match self.cache_get(&shape_key) {
                Some(s) => s,
                None => {
                    let s = self.conv.unique(&format!("{input}.shape"));
                    self.push("Shape", &[&input], vec![], vec![s.clone()]);
                    self.cache_put(shape_key, s.clone());
                    s
                }
            };
            let index = self.const_i64(dim as i64);
            let out = self.conv.unique(&sanitize(symbol));
            self.push(
                "Gather",
                &[&shape, &index],
                vec![attr_int("axis", 0)],
                vec![out.clone()],
            );
            out
        } else {
            let SymExpr::Call { func, args, .. } = e else {
                return Err(Error::unsupported(format!("cannot compute the size {e}")));
            };
            if func == "Integer" {
                if let Some(SymExpr::Int(v)) = args.first() {
                    return Ok(self.const_i64(*v));
                }
            }
            let vals = args
                .iter()
                .map(|a| self.sym_expr(a))
                .collect::<Result<Vec<String>>>()?;
            let fold = |cx: &mut Self, op: &str| -> String {
                let mut acc = vals[0].clone();
                for v in &vals[1..] {
                    let out = cx.conv.unique("sym");
                    cx.push(op, &[&acc, v], vec![], vec![out.clone()]);
                    acc = out;
                }
                acc
            };
            let binary = |cx: &mut Self, op: &str, attrs: Vec<AttributeProto>| -> Result<String> {
                if vals.len() != 2 {
                    return Err(Error::unsupported(format!(
                        "{func} with {} arguments",
                        vals.len()
                    )));
                }
                let out = cx.conv.unique("sym");
                cx.push(op, &[&vals[0], &vals[1]], attrs, vec![out.clone()]);
                Ok(out)
            };
            let out = match func.as_str() {
                _ if vals.is_empty() => {
                    return Err(Error::unsupported(format!("cannot compute the size {e}")))
                }
                "Add" => fold(self, "Add"),
                "Mul" => fold(self, "Mul"),
                "Max" => fold(self, "Max"),
                "Min" => fold(self, "Min"),
                // Sizes are non-negative, where truncation is floor.
                "FloorDiv" => binary(self, "Div", vec![])?,
                "Mod" | "PythonMod" => binary(self, "Mod", vec![attr_int("fmod", 0)])?,
                "CeilDiv" => {
                    if vals.len() != 2 {
                        return Err(Error::unsupported(format!("cannot compute the size {e}")));
                    }
                    let one = self.const_i64(1);
                    let t = self.conv.unique("sym");
                    self.push("Add", &[&vals[0], &vals[1]], vec![], vec![t.clone()]);
                    let u = self.conv.unique("sym");
                    self.push("Sub", &[&t, &one], vec![], vec![u.clone()]);
                    let out = self.conv.unique("sym");
                    self.push("Div", &[&u, &vals[1]], vec![], vec![out.clone()]);
                    out
                }
                "Pow" | "PowByNatural" => match args.get(1) {
                    Some(SymExpr::Int(k)) if *k >= 1 => {
                        let mut acc = vals[0].clone();
                        for _ in 1..*k {
                            let out = self.conv.unique("sym");
                            self.push("Mul", &[&acc, &vals[0]], vec![], vec![out.clone()]);
                            acc = out;
                        }
                        acc
                    }
                    _ => return Err(Error::unsupported(format!("cannot compute the size {e}"))),
                },
                _ => return Err(Error::unsupported(format!("cannot compute the size {e}"))),
            };
            out
        };
        self.cache_put(key, name.clone());
        Ok(name)
    }

    /// A 1-D int64 value holding these sizes.
    pub fn sizes(&mut self, sizes: &[Sym]) -> Result<String> {
        if let Some(v) = sizes.iter().map(Sym::as_int).collect::<Option<Vec<i64>>>() {
            return Ok(self.const_i64s(&v));
        }
        let mut parts = Vec::new();
        let mut run = Vec::new();
        for s in sizes {
            match s.as_int() {
                Some(v) => run.push(v),
                None => {
                    if !run.is_empty() {
                        parts.push(self.const_i64s(&std::mem::take(&mut run)));
                    }
                    let v = self.sym_size(s)?;
                    parts.push(self.reshape_const(&v, &[1])?);
                }
            }
        }
        if !run.is_empty() {
            parts.push(self.const_i64s(&run));
        }
        Ok(self.concat(&parts, 0))
    }

    /// Reshapes `x` to the sizes an IR value has.
    pub fn reshape_to(&mut self, x: &str, sizes: &[Sym]) -> Result<String> {
        let shape = self.sizes(sizes)?;
        let zero = sizes.iter().any(|s| s.as_int() == Some(0));
        let attrs = if zero {
            vec![attr_int("allowzero", 1)]
        } else {
            vec![]
        };
        Ok(self.node("Reshape", &[x, &shape], attrs))
    }

    /// Converts a subgraph into nodes of the current graph, returning its
    /// outputs.
    pub fn inline(&mut self, graph: &'p Graph, inputs: &[String]) -> Result<Vec<String>> {
        self.conv.inline_subgraph(graph, inputs)
    }

    /// Converts a loop or scan body into an ONNX graph attribute value
    /// (see [`Converter::convert_body`]).
    pub fn body(
        &mut self,
        graph: &'p Graph,
        leading: Vec<ValueInfoProto>,
        outer: &[String],
        name: &str,
        then: impl FnOnce(&mut Converter<'p>, &[String]) -> Result<Vec<ValueInfoProto>>,
    ) -> Result<GraphProto> {
        let name = self.conv.unique(name);
        self.conv.convert_body(graph, leading, outer, &name, then)
    }

    /// Converts a subgraph into an ONNX graph attribute value.
    pub fn subgraph(
        &mut self,
        graph: &'p Graph,
        inputs: &[String],
        name: &str,
    ) -> Result<GraphProto> {
        let name = self.conv.unique(name);
        self.conv.convert_subgraph(graph, inputs, &name)
    }
}
