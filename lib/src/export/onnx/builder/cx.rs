//! The context an emitter works in ([`EmitNode`]): typed access to one IR node's
//! arguments by schema name, the IR metadata of its inputs and outputs, and
//! the helpers that add ONNX nodes, constants, casts and symbolic sizes to
//! the converter's current scope.

use super::*;
use crate::ir::Target;

/// An op's emitter: adds the ONNX nodes for the node in `cx`.
pub(crate) type Emit = fn(&mut EmitNode) -> Result<()>;

/// The emitter for an op, and whether the op writes its first argument in
/// place (the op table's `lookup`).
pub(crate) type Lookup = fn(&Target) -> Option<(Emit, bool)>;

/// What an emitter works with: one IR node, and the converter it adds
/// ONNX nodes to.
pub(crate) struct EmitNode<'c, 'p> {
    pub conv: &'c mut Converter<'p>,
    pub node: &'p Node,
    pub(super) start: usize,
    outputs: Vec<Option<ValueId>>,
    bound: Vec<Option<String>>,
    /// Names of values this emitter's nodes produce (may be renamed to the
    /// IR names of the outputs they turn out to be).
    pub(super) temps: HashSet<String>,
    /// Cache keys added by this emitter (removed again on failure).
    cached: Vec<String>,
    mutated: Vec<ValueId>,
}

impl<'c, 'p> EmitNode<'c, 'p> {
    pub(super) fn new(
        conv: &'c mut Converter<'p>,
        node: &'p Node,
        start: usize,
    ) -> EmitNode<'c, 'p> {
        let outputs = output_values(node);
        let bound = vec![None; outputs.len()];
        EmitNode {
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

    pub(super) fn rollback(&mut self) {
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
    pub(super) fn finish(&mut self) -> Result<()> {
        let node = self.node;
        let mut renames: HashMap<String, String> = HashMap::new();
        for (i, v) in self.outputs.clone().into_iter().enumerate() {
            let Some(v) = v else { continue };
            let Some(bound) = self.bound[i].clone() else {
                if self.conv.scope().used.reads(v) {
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
                if let Some(t) = self.conv.types.get(&bound).copied() {
                    self.conv.types.insert(ir_name.clone(), t);
                }
                ir_name
            } else {
                bound
            };
            if !self.conv.types.contains_key(&name) {
                if let Some(t) = kind_dtype(&self.conv.scope().graph.value(v).kind) {
                    self.conv.types.insert(name.clone(), t);
                }
            }
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

    /// The op type of the ONNX node in this scope that makes `name`, if
    /// one does (none for graph inputs, initializers and outer values).
    pub fn producer_op(&self, name: &str) -> Option<&str> {
        let nodes = &self.conv.scope().nodes;
        nodes
            .iter()
            .rev()
            .find(|n| n.output.iter().any(|o| o == name))
            .map(|n| n.op_type.as_str())
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

    /// A tensor argument cast to `dtype`.
    pub fn input_as(&mut self, name: &str, dtype: Dtype) -> Result<String> {
        let (x, from) = (self.input(name)?, self.dtype(name)?);
        self.cast(&x, from, dtype)
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
            .is_some_and(|v| self.conv.scope().used.reads(v))
    }

    /// Binds output `i` to an ONNX value.
    pub fn set(&mut self, i: usize, name: String) {
        if i < self.bound.len() {
            self.bound[i] = Some(name);
        }
    }

    /// Records that the op writes its first argument in place.
    pub(super) fn mutates_first_arg(&mut self) -> Result<()> {
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
        let onnx = crate::export::onnx::onnx_dtype(dtype, self.conv.opset)?;
        let key = format!("const:{}:{dims:?}:{raw:?}", dtype.short_name());
        if let Some(name) = self.cache_get(&key) {
            return Ok(name);
        }
        let base = match (dims.len(), raw.len()) {
            (0, _) | (1, ..=8) => format!("const_{}", dtype.short_name()),
            _ => "const".to_string(),
        };
        let name = self.conv.unique(&base);
        let t = crate::export::onnx::tensor_proto("", onnx, dims, raw);
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
        let onnx = crate::export::onnx::onnx_dtype(to, self.conv.opset)?;
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
            let source = self.conv.sym_sources.get(symbol).cloned().ok_or_else(|| {
                Error::unsupported(format!(
                    "symbol {symbol} is not the size of any input dim, so it cannot be computed"
                ))
            })?;
            let input = source.input;
            let value = match source.dim {
                // a SymInt input: the 0-d int64 value itself
                None => input,
                Some(dim) => {
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
                }
            };
            // a derived dim `a*s + b`: s = (dim - b) / a
            let mut out = value;
            if source.b != 0 {
                let b = self.const_i64(source.b);
                let t = self.conv.unique(&sanitize(symbol));
                self.push("Sub", &[&out, &b], vec![], vec![t.clone()]);
                out = t;
            }
            if source.a != 1 {
                let a = self.const_i64(source.a);
                let t = self.conv.unique(&sanitize(symbol));
                self.push("Div", &[&out, &a], vec![], vec![t.clone()]);
                out = t;
            }
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
