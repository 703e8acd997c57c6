//! The graph IR that every tool shares: plain data, no pointers.
//!
//! A [`Program`] is one exported program: its top-level [`Graph`], how each
//! graph input and output relates to the model (parameters, buffers, user
//! inputs, mutations), the range constraints of its symbolic dims, and its
//! weights with their bytes.
//!
//! Architecture invariant: values are referenced by [`ValueId`], an index
//! into the owning graph's `values` arena. Every graph (the top level and
//! each subgraph of `cond`/`while_loop`/`map`) is its own scope. Nodes are in
//! topological order: a node only uses graph inputs and outputs of earlier
//! nodes. [`validate`](crate::ir::validate) checks this once on load; later
//! code indexes without error handling.
//!
//! Ops the library knows nothing about are kept as they are: a [`Target`] is
//! an identity, not a closed enum, so the IR is a faithful container.

pub mod args;
pub mod dtype;
pub mod op;
pub mod sym;
pub mod validate;
pub use validate::{validate, MAX_GRAPH_DEPTH, MAX_NODES};

use serde::Serialize;

pub use dtype::{Dtype, Layout, MemoryFormat};
pub use sym::SymExpr;

/// A dim index as torch wraps it: a negative one counts from the end, and
/// a rank-0 tensor takes 0 and -1. Out of range is a bad-input error.
pub fn normalize_dim(dim: i64, rank: usize) -> crate::Result<usize> {
    let r = rank.max(1) as i64;
    let d = if dim < 0 { dim + r } else { dim };
    if d < 0 || d >= r {
        return Err(crate::Error::bad_input(format!(
            "dim {dim} is out of range for a tensor of rank {rank}"
        )));
    }
    Ok(d as usize)
}

use crate::blob::Blob;

/// Index of a value in its graph's `values` arena.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(transparent)]
pub struct ValueId(pub u32);

impl ValueId {
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

#[derive(Clone, Debug, Default, Serialize)]
pub struct Program {
    pub info: ProgramInfo,
    pub graph: Graph,
    /// One per `graph.inputs` entry, in the same order.
    pub input_kinds: Vec<InputKind>,
    /// One per `graph.outputs` entry, in the same order.
    pub output_kinds: Vec<OutputKind>,
    /// Sorted by symbol expression text.
    pub range_constraints: Vec<RangeConstraint>,
    /// Parameters, buffers and constant tensors, by state-dict name.
    pub weights: Vec<Weight>,
    /// The raw storages that weights view into (little-endian bytes).
    #[serde(skip)]
    pub storages: Vec<Blob>,
}

#[derive(Clone, Debug, Default, Serialize)]
pub struct ProgramInfo {
    /// torch version that produced the archive (`<=2.4` when it did not say).
    pub torch_version: String,
    pub schema_major: u32,
    pub schema_minor: u32,
    /// Dialect verifiers: `TRAINING` straight from `torch.export.export`,
    /// `ATEN` after `run_decompositions()`.
    pub verifiers: Vec<String>,
    pub opset_version: Vec<(String, String)>,
    /// Which archive layout the program was read from.
    pub archive_layout: String,
    /// Pytree specs of the root module call (JSON strings, as in the archive).
    pub in_spec: String,
    pub out_spec: String,
    pub forward_arg_names: Vec<String>,
    pub guards_code: Vec<String>,
    pub metadata: Vec<(String, String)>,
    pub extra_files: Vec<(String, String)>,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RangeConstraint {
    pub symbol: String,
    /// `None` means unbounded.
    pub min: Option<i64>,
    pub max: Option<i64>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum WeightKind {
    Parameter,
    Buffer,
    Constant,
}

#[derive(Clone, Debug, Serialize)]
pub struct Weight {
    /// State-dict name (`conv.weight`), or the constant's name.
    pub name: String,
    pub kind: WeightKind,
    /// dtype, sizes, strides and storage offset (all in elements) of the
    /// view into `storage`; always constant (no symbols) for weights.
    pub meta: TensorMeta,
    pub storage: u32,
}

impl Weight {
    /// The bytes its view covers (elements times element size).
    pub fn nbytes(&self) -> u64 {
        let numel: i64 = self
            .meta
            .static_sizes()
            .unwrap_or_default()
            .iter()
            .product();
        numel.max(0) as u64 * self.meta.dtype.size() as u64
    }
}

#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "kind", content = "value", rename_all = "snake_case")]
pub enum InputKind {
    UserInput,
    Parameter(String),
    Buffer(String),
    NonPersistentBuffer(String),
    TensorConstant(String),
    CustomObj(String),
    Token,
    /// A literal user input (an int, float, bool, str or None the graph
    /// specialised on), with its user-facing name.
    ConstantInput(String),
}

impl InputKind {
    /// The weight this input is bound to, if any.
    pub fn weight_name(&self) -> Option<&str> {
        match self {
            InputKind::Parameter(n)
            | InputKind::Buffer(n)
            | InputKind::NonPersistentBuffer(n)
            | InputKind::TensorConstant(n) => Some(n),
            _ => None,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "kind", content = "value", rename_all = "snake_case")]
pub enum OutputKind {
    UserOutput,
    LossOutput,
    BufferMutation(String),
    GradientToParameter(String),
    GradientToUserInput(String),
    UserInputMutation(String),
    Token,
    ParameterMutation(String),
}

impl OutputKind {
    /// The buffer, parameter or user input a mutation output updates
    /// (program state), by its state-dict or input name.
    pub fn state_name(&self) -> Option<&str> {
        match self {
            OutputKind::BufferMutation(n)
            | OutputKind::UserInputMutation(n)
            | OutputKind::ParameterMutation(n) => Some(n),
            _ => None,
        }
    }
}

/// Which values of one graph are read, by [`ValueId`]; values added
/// after it was worked out (by a rewrite) count as read.
#[derive(Clone, Debug, Default)]
pub struct Reads(Vec<bool>);

impl Reads {
    pub fn reads(&self, v: ValueId) -> bool {
        self.0.get(v.index()).copied().unwrap_or(true)
    }

    /// Whether the `i`th value a node defines (its outputs flattened) is
    /// read; `false` when it defines none there.
    pub fn output(&self, node: &Node, i: usize) -> bool {
        let mut defined = Vec::new();
        for o in &node.outputs {
            o.value_refs(&mut defined);
        }
        defined.get(i).is_some_and(|v| self.reads(*v))
    }
}

#[derive(Clone, Debug, Default, Serialize)]
pub struct Graph {
    pub values: Vec<Value>,
    pub inputs: Vec<Argument>,
    pub nodes: Vec<Node>,
    pub outputs: Vec<Argument>,
    pub is_single_tensor_return: bool,
}

impl Graph {
    pub fn value(&self, id: ValueId) -> &Value {
        &self.values[id.index()]
    }

    /// Finds a value by name (linear; for tools and tests, not hot paths).
    pub fn find_value(&self, name: &str) -> Option<ValueId> {
        self.values
            .iter()
            .position(|v| v.name == name)
            .map(|i| ValueId(i as u32))
    }

    /// Which of this graph's values a node or the graph's outputs read.
    pub fn reads(&self) -> Reads {
        let mut read = vec![false; self.values.len()];
        let mut refs = Vec::new();
        for node in &self.nodes {
            for a in &node.inputs {
                a.arg.value_refs(&mut refs);
            }
        }
        for o in &self.outputs {
            o.value_refs(&mut refs);
        }
        for v in refs {
            if let Some(r) = read.get_mut(v.index()) {
                *r = true;
            }
        }
        Reads(read)
    }

    /// Visits every node with the graph it belongs to and which of that
    /// graph's values are read (worked out once per graph).
    pub fn visit_nodes_read<'a>(&'a self, f: &mut dyn FnMut(&'a Graph, &Reads, &'a Node)) {
        let reads = self.reads();
        for node in &self.nodes {
            f(self, &reads, node);
            for input in &node.inputs {
                if let Argument::Graph(sub) = &input.arg {
                    sub.graph.visit_nodes_read(f);
                }
            }
        }
    }

    /// Visits this graph's nodes and those of every nested subgraph.
    pub fn visit_nodes<'a>(&'a self, f: &mut dyn FnMut(&'a Node)) {
        self.visit_nodes_in(&mut |_, node| f(node));
    }

    /// Visits every node with the graph it belongs to (this one or a
    /// nested subgraph).
    pub fn visit_nodes_in<'a>(&'a self, f: &mut dyn FnMut(&'a Graph, &'a Node)) {
        for node in &self.nodes {
            f(self, node);
            for input in &node.inputs {
                if let Argument::Graph(sub) = &input.arg {
                    sub.graph.visit_nodes_in(f);
                }
            }
        }
    }

    /// The first complex dtype among a node's tensor inputs and outputs:
    /// values that no back end here represents (say so when refusing).
    pub fn complex_dtype(&self, node: &Node) -> Option<Dtype> {
        let mut refs = Vec::new();
        node.inputs.iter().for_each(|a| a.arg.value_refs(&mut refs));
        node.outputs.iter().for_each(|a| a.value_refs(&mut refs));
        refs.iter()
            .find_map(|v| match &self.values.get(v.index())?.kind {
                ValueKind::Tensor(m) if m.dtype.is_complex() => Some(m.dtype),
                _ => None,
            })
    }
}

#[derive(Clone, Debug, Serialize)]
pub struct Value {
    pub name: String,
    pub kind: ValueKind,
}

#[derive(Clone, Debug, Serialize)]
#[serde(tag = "kind", content = "value", rename_all = "snake_case")]
pub enum ValueKind {
    Tensor(TensorMeta),
    SymInt(Sym),
    SymBool(Sym),
    SymFloat(Sym),
    /// A script object, with its class fqn.
    CustomObj(String),
    Token,
}

/// A symbolic scalar: a known constant, or an expression (with the value
/// it had when exporting, if any).
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "kind", content = "value", rename_all = "snake_case")]
pub enum Sym {
    Int(i64),
    Float(f64),
    Bool(bool),
    Expr { expr: SymExpr, hint: Option<Hint> },
}

#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
#[serde(tag = "kind", content = "value", rename_all = "snake_case")]
pub enum Hint {
    Int(i64),
    Float(f64),
    Bool(bool),
}

impl Sym {
    /// The constant integer, if this is one.
    pub fn as_int(&self) -> Option<i64> {
        match self {
            Sym::Int(v) => Some(*v),
            _ => None,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Device {
    #[serde(rename = "type")]
    pub kind: String,
    pub index: Option<i32>,
}

impl Default for Device {
    fn default() -> Self {
        Device {
            kind: "cpu".into(),
            index: None,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct TensorMeta {
    pub dtype: Dtype,
    pub sizes: Vec<Sym>,
    pub strides: Vec<Sym>,
    pub storage_offset: Sym,
    pub device: Device,
    pub layout: Layout,
    pub requires_grad: bool,
}

impl TensorMeta {
    /// A contiguous CPU tensor of static sizes (programs built by hand).
    pub fn contiguous(dtype: Dtype, sizes: &[i64]) -> TensorMeta {
        TensorMeta {
            dtype,
            sizes: sizes.iter().map(|&s| Sym::Int(s)).collect(),
            strides: contiguous_strides(sizes)
                .into_iter()
                .map(Sym::Int)
                .collect(),
            storage_offset: Sym::Int(0),
            device: Device::default(),
            layout: Layout::Strided,
            requires_grad: false,
        }
    }

    /// Constant sizes, or `None` when a dim is symbolic.
    pub fn static_sizes(&self) -> Option<Vec<i64>> {
        self.sizes.iter().map(Sym::as_int).collect()
    }
    pub fn static_strides(&self) -> Option<Vec<i64>> {
        self.strides.iter().map(Sym::as_int).collect()
    }
}

/// What a node calls.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize)]
pub struct Target {
    pub kind: TargetKind,
    pub namespace: String,
    pub name: String,
    pub overload: String,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum TargetKind {
    /// `torch.ops.<namespace>.<name>.<overload>`
    Op,
    /// `torch.ops.higher_order.<name>`
    HigherOrder,
    /// A Python function on symbolic scalars: `_operator.mul`, `torch.sym_max`, `math.trunc`
    Python,
    /// `#<namespace>:<name>`, a registered serialization extension
    Extension,
}

impl Target {
    pub fn op(namespace: &str, name: &str, overload: &str) -> Target {
        Target {
            kind: TargetKind::Op,
            namespace: namespace.into(),
            name: name.into(),
            overload: overload.into(),
        }
    }

    /// Parses the archive's target string.
    pub fn parse(s: &str) -> Option<Target> {
        if let Some(rest) = s.strip_prefix('#') {
            let (ns, name) = rest.split_once(':')?;
            return Some(Target {
                kind: TargetKind::Extension,
                namespace: ns.into(),
                name: name.into(),
                overload: String::new(),
            });
        }
        if let Some(rest) = s.strip_prefix("torch.ops.higher_order.") {
            return Some(Target {
                kind: TargetKind::HigherOrder,
                namespace: "higher_order".into(),
                name: rest.into(),
                overload: String::new(),
            });
        }
        if let Some(rest) = s.strip_prefix("torch.ops.") {
            let mut parts = rest.splitn(3, '.');
            let ns = parts.next()?;
            let name = parts.next()?;
            let overload = parts.next().unwrap_or("default");
            if ns.is_empty() || name.is_empty() {
                return None;
            }
            return Some(Target::op(ns, name, overload));
        }
        let (module, func) = s.rsplit_once('.')?;
        if module.is_empty() || func.is_empty() {
            return None;
        }
        Some(Target {
            kind: TargetKind::Python,
            namespace: module.into(),
            name: func.into(),
            overload: String::new(),
        })
    }

    /// The target as the archive writes it (`torch.ops.aten.add.Tensor`).
    pub fn archive_string(&self) -> String {
        match self.kind {
            TargetKind::Op => format!(
                "torch.ops.{}.{}.{}",
                self.namespace, self.name, self.overload
            ),
            TargetKind::HigherOrder => format!("torch.ops.higher_order.{}", self.name),
            TargetKind::Python => format!("{}.{}", self.namespace, self.name),
            TargetKind::Extension => format!("#{}:{}", self.namespace, self.name),
        }
    }
}

impl std::fmt::Display for Target {
    /// The short identity used in listings and `--keep` patterns:
    /// `aten.add.Tensor`, `higher_order.cond`, `_operator.mul`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.kind {
            TargetKind::Op => write!(f, "{}.{}.{}", self.namespace, self.name, self.overload),
            TargetKind::HigherOrder | TargetKind::Python => {
                write!(f, "{}.{}", self.namespace, self.name)
            }
            TargetKind::Extension => write!(f, "#{}:{}", self.namespace, self.name),
        }
    }
}

#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct NodeMeta {
    pub stack_trace: Option<String>,
    /// `nn_module_stack`: `key,path,type;key,path,type`
    pub module_stack: Option<String>,
    /// Every other metadata entry, sorted by key.
    pub other: Vec<(String, String)>,
}

impl NodeMeta {
    /// The innermost module path (`layer1.0.conv1`), if known.
    pub fn module_path(&self) -> Option<&str> {
        let last = self.module_stack.as_deref()?.rsplit(';').next()?;
        let mut parts = last.splitn(3, ',');
        parts.next()?;
        parts.next()
    }
}

#[derive(Clone, Debug, Serialize)]
pub struct Node {
    pub name: String,
    pub target: Target,
    pub inputs: Vec<NamedArg>,
    pub outputs: Vec<Argument>,
    pub meta: NodeMeta,
    pub is_hop_single_tensor_return: Option<bool>,
}

impl Node {
    /// The argument with this name, if present.
    pub fn arg(&self, name: &str) -> Option<&Argument> {
        self.inputs.iter().find(|a| a.name == name).map(|a| &a.arg)
    }
}

/// The tensor values a node defines, in output order (lists flattened).
pub fn defined_tensors(node: &Node) -> Vec<ValueId> {
    let mut out = Vec::new();
    for o in &node.outputs {
        match o {
            Argument::Tensor(v) | Argument::OptionalTensor(Some(v)) => out.push(*v),
            Argument::Tensors(vs) => out.extend(vs.iter().copied()),
            Argument::OptionalTensors(vs) => out.extend(vs.iter().flatten().copied()),
            _ => {}
        }
    }
    out
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ArgKind {
    Unknown,
    Positional,
    Keyword,
}

#[derive(Clone, Debug, Serialize)]
pub struct NamedArg {
    pub name: String,
    pub arg: Argument,
    pub kind: ArgKind,
    /// Filled in from the op schema: the archive omitted it as a default.
    pub defaulted: bool,
}

/// A symbolic scalar argument: a literal, or a reference to a sym value.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
#[serde(tag = "kind", content = "value", rename_all = "snake_case")]
pub enum SymRef {
    Int(i64),
    Float(f64),
    Bool(bool),
    Value(ValueId),
}

#[derive(Clone, Debug, Serialize)]
pub struct Subgraph {
    pub name: String,
    pub graph: Box<Graph>,
}

/// Every argument kind of the PT2 serialization schema.
#[derive(Clone, Debug, Serialize)]
#[serde(tag = "kind", content = "value", rename_all = "snake_case")]
pub enum Argument {
    None,
    Tensor(ValueId),
    OptionalTensor(Option<ValueId>),
    Tensors(Vec<ValueId>),
    OptionalTensors(Vec<Option<ValueId>>),
    Int(i64),
    Ints(Vec<i64>),
    Float(f64),
    Floats(Vec<f64>),
    Bool(bool),
    Bools(Vec<bool>),
    String(String),
    Strings(Vec<String>),
    SymInt(SymRef),
    SymInts(Vec<SymRef>),
    SymFloat(SymRef),
    SymFloats(Vec<SymRef>),
    SymBool(SymRef),
    SymBools(Vec<SymRef>),
    ScalarType(Dtype),
    MemoryFormat(MemoryFormat),
    Layout(Layout),
    Device(Device),
    Graph(Subgraph),
    CustomObj(ValueId),
    Operator(String),
    Complex { real: f64, imag: f64 },
    NestedTensors(Vec<Vec<ValueId>>),
    IntLists(Vec<Vec<i64>>),
    FloatLists(Vec<Vec<f64>>),
    StringToArgument(Vec<(String, Argument)>),
}

impl Argument {
    /// Every value this argument refers to (not into subgraphs: those are
    /// their own scopes).
    pub fn value_refs(&self, out: &mut Vec<ValueId>) {
        fn sym(r: &SymRef, out: &mut Vec<ValueId>) {
            if let SymRef::Value(v) = r {
                out.push(*v)
            }
        }
        match self {
            Argument::Tensor(v) | Argument::CustomObj(v) => out.push(*v),
            Argument::OptionalTensor(v) => out.extend(v.iter().copied()),
            Argument::Tensors(vs) => out.extend(vs.iter().copied()),
            Argument::OptionalTensors(vs) => out.extend(vs.iter().flatten().copied()),
            Argument::NestedTensors(vss) => out.extend(vss.iter().flatten().copied()),
            Argument::SymInt(r) | Argument::SymFloat(r) | Argument::SymBool(r) => sym(r, out),
            Argument::SymInts(rs) | Argument::SymFloats(rs) | Argument::SymBools(rs) => {
                rs.iter().for_each(|r| sym(r, out))
            }
            Argument::StringToArgument(entries) => {
                entries.iter().for_each(|(_, a)| a.value_refs(out))
            }
            _ => {}
        }
    }
}

impl Program {
    /// The weight bound to a graph input, by the input's position.
    pub fn weight_for_input(&self, input: usize) -> Option<&Weight> {
        let name = self.input_kinds.get(input)?.weight_name()?;
        self.weights.iter().find(|w| w.name == name)
    }

    /// Names of the user inputs, in order.
    pub fn user_inputs(&self) -> Vec<(usize, &Argument)> {
        self.graph
            .inputs
            .iter()
            .enumerate()
            .filter(|(i, _)| {
                matches!(
                    self.input_kinds.get(*i),
                    Some(InputKind::UserInput) | Some(InputKind::ConstantInput(_))
                )
            })
            .collect()
    }

    /// The dialect (`TRAINING`, `ATEN`, ...) the verifiers name.
    pub fn dialect(&self) -> &str {
        self.info
            .verifiers
            .first()
            .map(String::as_str)
            .unwrap_or("ATEN")
    }
}

/// Row-major strides for these sizes.
pub fn contiguous_strides(sizes: &[i64]) -> Vec<i64> {
    let mut strides = vec![1i64; sizes.len()];
    for i in (0..sizes.len().saturating_sub(1)).rev() {
        strides[i] = strides[i + 1] * sizes[i + 1].max(1);
    }
    strides
}

impl Program {
    /// A weight's elements in row-major order: a window of its storage when
    /// the view is already contiguous, a gathered copy otherwise. Weights
    /// are validated on load, so the view is in bounds.
    /// A dense weight's bytes as a window of its storage (no CRC pending:
    /// a part of an archive member), to stream with
    /// [`crate::blob::Blob::write_range_to`]; `None` for a strided view.
    pub fn weight_blob(&self, w: &Weight) -> Option<crate::blob::Blob> {
        let storage = self.storages.get(w.storage as usize)?;
        let sizes = w.meta.static_sizes()?;
        let strides = w.meta.static_strides()?;
        let dense = sizes
            .iter()
            .zip(strides.iter().zip(contiguous_strides(&sizes)))
            .all(|(&size, (&s, c))| size <= 1 || s == c);
        let start = usize::try_from(w.meta.storage_offset.as_int()?).ok()? * w.meta.dtype.size();
        let len = self.weight_bytes_len(w) as usize;
        (dense && start + len <= storage.len()).then(|| storage.slice(start..start + len))
    }

    /// The bytes a weight's view covers (elements times element size).
    pub fn weight_bytes_len(&self, w: &Weight) -> u64 {
        w.nbytes()
    }

    pub fn weight_bytes(&self, w: &Weight) -> std::borrow::Cow<'_, [u8]> {
        let storage = &self.storages[w.storage as usize];
        let sizes = w.meta.static_sizes().unwrap_or_default();
        let strides = w.meta.static_strides().unwrap_or_default();
        let offset = w.meta.storage_offset.as_int().unwrap_or(0) as usize;
        let elem = w.meta.dtype.size();
        let numel: i64 = sizes.iter().product();
        let numel = numel.max(0) as usize;
        let dense = sizes
            .iter()
            .zip(strides.iter().zip(contiguous_strides(&sizes)))
            .all(|(&size, (&s, c))| size <= 1 || s == c);
        if dense {
            let start = offset * elem;
            return std::borrow::Cow::Borrowed(&storage[start..start + numel * elem]);
        }
        let mut out = Vec::with_capacity(numel * elem);
        let mut index = vec![0i64; sizes.len()];
        for _ in 0..numel {
            let at = offset as i64 + index.iter().zip(&strides).map(|(i, s)| i * s).sum::<i64>();
            let at = at as usize * elem;
            out.extend_from_slice(&storage[at..at + elem]);
            for d in (0..sizes.len()).rev() {
                index[d] += 1;
                if index[d] < sizes[d] {
                    break;
                }
                index[d] = 0;
            }
        }
        std::borrow::Cow::Owned(out)
    }
}

/// For `as_strided` on a tensor whose storage layout is `in_strides` /
/// `in_offset`: the row-major (logical) index of the input element each
/// output element reads, or `None` when an output element reads storage
/// the input does not cover. Executors and converters keep tensors
/// row-major, so this is how they honour `as_strided`.
pub fn as_strided_gather(
    in_sizes: &[i64],
    in_strides: &[i64],
    in_offset: i64,
    size: &[i64],
    stride: &[i64],
    offset: i64,
) -> Option<Vec<i64>> {
    let mut by_pos = std::collections::HashMap::new();
    let total: i64 = in_sizes.iter().product();
    let mut idx = vec![0i64; in_sizes.len()];
    for flat in 0..total.max(0) {
        let pos = in_offset + idx.iter().zip(in_strides).map(|(i, s)| i * s).sum::<i64>();
        by_pos.insert(pos, flat);
        for d in (0..in_sizes.len()).rev() {
            idx[d] += 1;
            if idx[d] < in_sizes[d] {
                break;
            }
            idx[d] = 0;
        }
    }
    let n: i64 = size.iter().product();
    let mut out = Vec::with_capacity(n.max(0) as usize);
    let mut o = vec![0i64; size.len()];
    for _ in 0..n.max(0) {
        let pos = offset + o.iter().zip(stride).map(|(i, s)| i * s).sum::<i64>();
        out.push(*by_pos.get(&pos)?);
        for d in (0..size.len()).rev() {
            o[d] += 1;
            if o[d] < size[d] {
                break;
            }
            o[d] = 0;
        }
    }
    Some(out)
}

impl Argument {
    /// Replaces every value this argument refers to by `f` of it.
    pub fn substitute_values(&mut self, f: &dyn Fn(ValueId) -> ValueId) {
        match self {
            Argument::Tensor(v) | Argument::CustomObj(v) => *v = f(*v),
            Argument::OptionalTensor(Some(v)) => *v = f(*v),
            Argument::Tensors(vs) => vs.iter_mut().for_each(|v| *v = f(*v)),
            Argument::OptionalTensors(vs) => vs.iter_mut().flatten().for_each(|v| *v = f(*v)),
            Argument::NestedTensors(vss) => vss.iter_mut().flatten().for_each(|v| *v = f(*v)),
            Argument::SymInt(SymRef::Value(v))
            | Argument::SymFloat(SymRef::Value(v))
            | Argument::SymBool(SymRef::Value(v)) => *v = f(*v),
            Argument::SymInts(rs) | Argument::SymFloats(rs) | Argument::SymBools(rs) => {
                for r in rs.iter_mut() {
                    if let SymRef::Value(v) = r {
                        *v = f(*v)
                    }
                }
            }
            Argument::StringToArgument(entries) => {
                entries.iter_mut().for_each(|(_, a)| a.substitute_values(f))
            }
            _ => {}
        }
    }
}

/// Replaces value references in a list of arguments (graph outputs).
pub fn substitute_values(args: &mut [Argument], f: &dyn Fn(ValueId) -> ValueId) {
    args.iter_mut().for_each(|a| a.substitute_values(f));
}

impl Node {
    /// Replaces value references in this node's inputs.
    pub fn substitute_inputs(&mut self, f: &dyn Fn(ValueId) -> ValueId) {
        self.inputs
            .iter_mut()
            .for_each(|a| a.arg.substitute_values(f));
    }
}
