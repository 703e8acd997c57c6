//! IR <-> generated protobuf messages. Each IR type has one `to_pb` and one
//! `from_pb`; decoding checks enum codes so a corrupt stream is an error,
//! never a wrong program.

use protobuf::{EnumOrUnknown, MessageField};

use super::pb;
use crate::error::{Error, Result};
use crate::ir::*;

fn bad(what: &str) -> Error {
    Error::bad_input(format!("IR stream: {what}"))
}

fn kv(pairs: &[(String, String)]) -> Vec<pb::KeyValue> {
    pairs
        .iter()
        .map(|(k, v)| pb::KeyValue {
            key: k.clone(),
            value: v.clone(),
            ..Default::default()
        })
        .collect()
}

fn from_kv(pairs: &[pb::KeyValue]) -> Vec<(String, String)> {
    pairs
        .iter()
        .map(|p| (p.key.clone(), p.value.clone()))
        .collect()
}

pub fn program_to_pb(p: &Program) -> pb::Program {
    let i = &p.info;
    pb::Program {
        info: MessageField::some(pb::ProgramInfo {
            torch_version: i.torch_version.clone(),
            schema_major: i.schema_major,
            schema_minor: i.schema_minor,
            verifiers: i.verifiers.clone(),
            opset_version: kv(&i.opset_version),
            archive_layout: i.archive_layout.clone(),
            in_spec: i.in_spec.clone(),
            out_spec: i.out_spec.clone(),
            forward_arg_names: i.forward_arg_names.clone(),
            guards_code: i.guards_code.clone(),
            metadata: kv(&i.metadata),
            extra_files: kv(&i.extra_files),
            ..Default::default()
        }),
        graph: MessageField::some(graph_to_pb(&p.graph)),
        input_kinds: p.input_kinds.iter().map(input_kind_to_pb).collect(),
        output_kinds: p.output_kinds.iter().map(output_kind_to_pb).collect(),
        range_constraints: p
            .range_constraints
            .iter()
            .map(|r| pb::RangeConstraint {
                symbol: r.symbol.clone(),
                min: r.min,
                max: r.max,
                ..Default::default()
            })
            .collect(),
        weights: p
            .weights
            .iter()
            .map(|w| pb::Weight {
                name: w.name.clone(),
                kind: EnumOrUnknown::new(match w.kind {
                    WeightKind::Parameter => pb::WeightKind::WEIGHT_PARAMETER,
                    WeightKind::Buffer => pb::WeightKind::WEIGHT_BUFFER,
                    WeightKind::Constant => pb::WeightKind::WEIGHT_CONSTANT,
                }),
                meta: MessageField::some(tensor_meta_to_pb(&w.meta)),
                storage: w.storage,
                ..Default::default()
            })
            .collect(),
        storage_sizes: p.storages.iter().map(|s| s.len() as u64).collect(),
        ..Default::default()
    }
}

/// Decodes everything but the storage bytes (`storage_sizes` says how many
/// bytes each storage will have).
pub fn program_from_pb(p: &pb::Program) -> Result<(Program, Vec<u64>)> {
    let i = p.info.as_ref().ok_or_else(|| bad("program without info"))?;
    let info = ProgramInfo {
        torch_version: i.torch_version.clone(),
        schema_major: i.schema_major,
        schema_minor: i.schema_minor,
        verifiers: i.verifiers.clone(),
        opset_version: from_kv(&i.opset_version),
        archive_layout: i.archive_layout.clone(),
        in_spec: i.in_spec.clone(),
        out_spec: i.out_spec.clone(),
        forward_arg_names: i.forward_arg_names.clone(),
        guards_code: i.guards_code.clone(),
        metadata: from_kv(&i.metadata),
        extra_files: from_kv(&i.extra_files),
    };
    let graph = graph_from_pb(
        p.graph
            .as_ref()
            .ok_or_else(|| bad("program without graph"))?,
    )?;
    let weights = p
        .weights
        .iter()
        .map(|w| {
            Ok(Weight {
                name: w.name.clone(),
                kind: match w.kind.enum_value() {
                    Ok(pb::WeightKind::WEIGHT_PARAMETER) => WeightKind::Parameter,
                    Ok(pb::WeightKind::WEIGHT_BUFFER) => WeightKind::Buffer,
                    Ok(pb::WeightKind::WEIGHT_CONSTANT) => WeightKind::Constant,
                    Err(c) => return Err(bad(&format!("unknown weight kind {c}"))),
                },
                meta: tensor_meta_from_pb(
                    w.meta.as_ref().ok_or_else(|| bad("weight without meta"))?,
                )?,
                storage: w.storage,
            })
        })
        .collect::<Result<_>>()?;
    let program = Program {
        info,
        graph,
        input_kinds: p
            .input_kinds
            .iter()
            .map(input_kind_from_pb)
            .collect::<Result<_>>()?,
        output_kinds: p
            .output_kinds
            .iter()
            .map(output_kind_from_pb)
            .collect::<Result<_>>()?,
        range_constraints: p
            .range_constraints
            .iter()
            .map(|r| RangeConstraint {
                symbol: r.symbol.clone(),
                min: r.min,
                max: r.max,
            })
            .collect(),
        weights,
        storages: Vec::new(),
    };
    Ok((program, p.storage_sizes.clone()))
}

fn input_kind_to_pb(k: &InputKind) -> pb::InputKind {
    use pb::input_kind::Kind as K;
    let kind = match k {
        InputKind::UserInput => K::UserInput(true),
        InputKind::Parameter(n) => K::Parameter(n.clone()),
        InputKind::Buffer(n) => K::Buffer(n.clone()),
        InputKind::NonPersistentBuffer(n) => K::NonPersistentBuffer(n.clone()),
        InputKind::TensorConstant(n) => K::TensorConstant(n.clone()),
        InputKind::CustomObj(n) => K::CustomObj(n.clone()),
        InputKind::Token => K::Token(true),
        InputKind::ConstantInput(n) => K::ConstantInput(n.clone()),
    };
    pb::InputKind {
        kind: Some(kind),
        ..Default::default()
    }
}

fn input_kind_from_pb(k: &pb::InputKind) -> Result<InputKind> {
    use pb::input_kind::Kind as K;
    Ok(
        match k.kind.as_ref().ok_or_else(|| bad("empty input kind"))? {
            K::UserInput(_) => InputKind::UserInput,
            K::Parameter(n) => InputKind::Parameter(n.clone()),
            K::Buffer(n) => InputKind::Buffer(n.clone()),
            K::NonPersistentBuffer(n) => InputKind::NonPersistentBuffer(n.clone()),
            K::TensorConstant(n) => InputKind::TensorConstant(n.clone()),
            K::CustomObj(n) => InputKind::CustomObj(n.clone()),
            K::Token(_) => InputKind::Token,
            K::ConstantInput(n) => InputKind::ConstantInput(n.clone()),
        },
    )
}

fn output_kind_to_pb(k: &OutputKind) -> pb::OutputKind {
    use pb::output_kind::Kind as K;
    let kind = match k {
        OutputKind::UserOutput => K::UserOutput(true),
        OutputKind::LossOutput => K::LossOutput(true),
        OutputKind::BufferMutation(n) => K::BufferMutation(n.clone()),
        OutputKind::GradientToParameter(n) => K::GradientToParameter(n.clone()),
        OutputKind::GradientToUserInput(n) => K::GradientToUserInput(n.clone()),
        OutputKind::UserInputMutation(n) => K::UserInputMutation(n.clone()),
        OutputKind::Token => K::Token(true),
        OutputKind::ParameterMutation(n) => K::ParameterMutation(n.clone()),
    };
    pb::OutputKind {
        kind: Some(kind),
        ..Default::default()
    }
}

fn output_kind_from_pb(k: &pb::OutputKind) -> Result<OutputKind> {
    use pb::output_kind::Kind as K;
    Ok(
        match k.kind.as_ref().ok_or_else(|| bad("empty output kind"))? {
            K::UserOutput(_) => OutputKind::UserOutput,
            K::LossOutput(_) => OutputKind::LossOutput,
            K::BufferMutation(n) => OutputKind::BufferMutation(n.clone()),
            K::GradientToParameter(n) => OutputKind::GradientToParameter(n.clone()),
            K::GradientToUserInput(n) => OutputKind::GradientToUserInput(n.clone()),
            K::UserInputMutation(n) => OutputKind::UserInputMutation(n.clone()),
            K::Token(_) => OutputKind::Token,
            K::ParameterMutation(n) => OutputKind::ParameterMutation(n.clone()),
        },
    )
}

fn graph_to_pb(g: &Graph) -> pb::Graph {
    pb::Graph {
        values: g
            .values
            .iter()
            .map(|v| {
                use pb::value::Kind as K;
                let kind = match &v.kind {
                    ValueKind::Tensor(m) => K::Tensor(tensor_meta_to_pb(m)),
                    ValueKind::SymInt(s) => K::SymInt(sym_to_pb(s)),
                    ValueKind::SymBool(s) => K::SymBool(sym_to_pb(s)),
                    ValueKind::SymFloat(s) => K::SymFloat(sym_to_pb(s)),
                    ValueKind::CustomObj(c) => K::CustomObj(c.clone()),
                    ValueKind::Token => K::Token(true),
                };
                pb::Value {
                    name: v.name.clone(),
                    kind: Some(kind),
                    ..Default::default()
                }
            })
            .collect(),
        inputs: g.inputs.iter().map(argument_to_pb).collect(),
        nodes: g.nodes.iter().map(node_to_pb).collect(),
        outputs: g.outputs.iter().map(argument_to_pb).collect(),
        is_single_tensor_return: g.is_single_tensor_return,
        ..Default::default()
    }
}

fn graph_from_pb(g: &pb::Graph) -> Result<Graph> {
    let values = g
        .values
        .iter()
        .map(|v| {
            use pb::value::Kind as K;
            let kind = match v.kind.as_ref().ok_or_else(|| bad("value without kind"))? {
                K::Tensor(m) => ValueKind::Tensor(tensor_meta_from_pb(m)?),
                K::SymInt(s) => ValueKind::SymInt(sym_from_pb(s)?),
                K::SymBool(s) => ValueKind::SymBool(sym_from_pb(s)?),
                K::SymFloat(s) => ValueKind::SymFloat(sym_from_pb(s)?),
                K::CustomObj(c) => ValueKind::CustomObj(c.clone()),
                K::Token(_) => ValueKind::Token,
            };
            Ok(Value {
                name: v.name.clone(),
                kind,
            })
        })
        .collect::<Result<_>>()?;
    Ok(Graph {
        values,
        inputs: g
            .inputs
            .iter()
            .map(argument_from_pb)
            .collect::<Result<_>>()?,
        nodes: g.nodes.iter().map(node_from_pb).collect::<Result<_>>()?,
        outputs: g
            .outputs
            .iter()
            .map(argument_from_pb)
            .collect::<Result<_>>()?,
        is_single_tensor_return: g.is_single_tensor_return,
    })
}

fn node_to_pb(n: &Node) -> pb::Node {
    use pb::target::Kind as TK;
    pb::Node {
        name: n.name.clone(),
        target: MessageField::some(pb::Target {
            kind: EnumOrUnknown::new(match n.target.kind {
                TargetKind::Op => TK::OP,
                TargetKind::HigherOrder => TK::HIGHER_ORDER,
                TargetKind::Python => TK::PYTHON,
                TargetKind::Extension => TK::EXTENSION,
            }),
            namespace: n.target.namespace.clone(),
            name: n.target.name.clone(),
            overload: n.target.overload.clone(),
            ..Default::default()
        }),
        inputs: n
            .inputs
            .iter()
            .map(|a| pb::NamedArg {
                name: a.name.clone(),
                arg: MessageField::some(argument_to_pb(&a.arg)),
                kind: EnumOrUnknown::new(match a.kind {
                    ArgKind::Unknown => pb::named_arg::Kind::UNKNOWN,
                    ArgKind::Positional => pb::named_arg::Kind::POSITIONAL,
                    ArgKind::Keyword => pb::named_arg::Kind::KEYWORD,
                }),
                defaulted: a.defaulted,
                ..Default::default()
            })
            .collect(),
        outputs: n.outputs.iter().map(argument_to_pb).collect(),
        meta: MessageField::some(pb::NodeMeta {
            stack_trace: n.meta.stack_trace.clone(),
            module_stack: n.meta.module_stack.clone(),
            other: kv(&n.meta.other),
            ..Default::default()
        }),
        is_hop_single_tensor_return: n.is_hop_single_tensor_return,
        ..Default::default()
    }
}

fn node_from_pb(n: &pb::Node) -> Result<Node> {
    use pb::target::Kind as TK;
    let t = n
        .target
        .as_ref()
        .ok_or_else(|| bad("node without target"))?;
    let kind = match t.kind.enum_value() {
        Ok(TK::OP) => TargetKind::Op,
        Ok(TK::HIGHER_ORDER) => TargetKind::HigherOrder,
        Ok(TK::PYTHON) => TargetKind::Python,
        Ok(TK::EXTENSION) => TargetKind::Extension,
        Err(c) => return Err(bad(&format!("unknown target kind {c}"))),
    };
    let meta = n.meta.as_ref().cloned().unwrap_or_default();
    Ok(Node {
        name: n.name.clone(),
        target: Target {
            kind,
            namespace: t.namespace.clone(),
            name: t.name.clone(),
            overload: t.overload.clone(),
        },
        inputs: n
            .inputs
            .iter()
            .map(|a| {
                Ok(NamedArg {
                    name: a.name.clone(),
                    arg: argument_from_pb(a.arg.as_ref().ok_or_else(|| bad("argument missing"))?)?,
                    kind: match a.kind.enum_value() {
                        Ok(pb::named_arg::Kind::POSITIONAL) => ArgKind::Positional,
                        Ok(pb::named_arg::Kind::KEYWORD) => ArgKind::Keyword,
                        _ => ArgKind::Unknown,
                    },
                    defaulted: a.defaulted,
                })
            })
            .collect::<Result<_>>()?,
        outputs: n
            .outputs
            .iter()
            .map(argument_from_pb)
            .collect::<Result<_>>()?,
        meta: NodeMeta {
            stack_trace: meta.stack_trace.clone(),
            module_stack: meta.module_stack.clone(),
            other: from_kv(&meta.other),
        },
        is_hop_single_tensor_return: n.is_hop_single_tensor_return,
    })
}

fn tensor_meta_to_pb(m: &TensorMeta) -> pb::TensorMeta {
    pb::TensorMeta {
        dtype: m.dtype.code(),
        sizes: m.sizes.iter().map(sym_to_pb).collect(),
        strides: m.strides.iter().map(sym_to_pb).collect(),
        storage_offset: MessageField::some(sym_to_pb(&m.storage_offset)),
        device: MessageField::some(device_to_pb(&m.device)),
        layout: m.layout.code(),
        requires_grad: m.requires_grad,
        ..Default::default()
    }
}

fn tensor_meta_from_pb(m: &pb::TensorMeta) -> Result<TensorMeta> {
    Ok(TensorMeta {
        dtype: Dtype::from_code(m.dtype)
            .ok_or_else(|| bad(&format!("unknown dtype {}", m.dtype)))?,
        sizes: m.sizes.iter().map(sym_from_pb).collect::<Result<_>>()?,
        strides: m.strides.iter().map(sym_from_pb).collect::<Result<_>>()?,
        storage_offset: sym_from_pb(
            m.storage_offset
                .as_ref()
                .ok_or_else(|| bad("no storage offset"))?,
        )?,
        device: device_from_pb(m.device.as_ref().ok_or_else(|| bad("no device"))?),
        layout: Layout::from_code(m.layout)
            .ok_or_else(|| bad(&format!("unknown layout {}", m.layout)))?,
        requires_grad: m.requires_grad,
    })
}

fn device_to_pb(d: &Device) -> pb::Device {
    pb::Device {
        type_: d.kind.clone(),
        index: d.index,
        ..Default::default()
    }
}

fn device_from_pb(d: &pb::Device) -> Device {
    Device {
        kind: d.type_.clone(),
        index: d.index,
    }
}

fn sym_to_pb(s: &Sym) -> pb::Sym {
    use pb::sym::Kind as K;
    use pb::sym_expr_with_hint::Hint as H;
    let kind = match s {
        Sym::Int(v) => K::Int(*v),
        Sym::Float(v) => K::Float(*v),
        Sym::Bool(v) => K::Bool(*v),
        Sym::Expr { expr, hint } => K::Expr(pb::SymExprWithHint {
            expr: MessageField::some(expr_to_pb(expr)),
            hint: hint.map(|h| match h {
                Hint::Int(v) => H::HintInt(v),
                Hint::Float(v) => H::HintFloat(v),
                Hint::Bool(v) => H::HintBool(v),
            }),
            ..Default::default()
        }),
    };
    pb::Sym {
        kind: Some(kind),
        ..Default::default()
    }
}

fn sym_from_pb(s: &pb::Sym) -> Result<Sym> {
    use pb::sym::Kind as K;
    use pb::sym_expr_with_hint::Hint as H;
    Ok(
        match s.kind.as_ref().ok_or_else(|| bad("empty symbolic value"))? {
            K::Int(v) => Sym::Int(*v),
            K::Float(v) => Sym::Float(*v),
            K::Bool(v) => Sym::Bool(*v),
            K::Expr(e) => Sym::Expr {
                expr: expr_from_pb(e.expr.as_ref().ok_or_else(|| bad("empty expression"))?)?,
                hint: e.hint.as_ref().map(|h| match h {
                    H::HintInt(v) => Hint::Int(*v),
                    H::HintFloat(v) => Hint::Float(*v),
                    H::HintBool(v) => Hint::Bool(*v),
                }),
            },
        },
    )
}

fn expr_to_pb(e: &SymExpr) -> pb::Expr {
    use pb::expr::Kind as K;
    let kind = match e {
        SymExpr::Int(v) => K::Int(*v),
        SymExpr::Float(v) => K::Float(*v),
        SymExpr::Str(s) => K::Str(s.clone()),
        SymExpr::Bool(b) => K::Bool(*b),
        SymExpr::Name(n) => K::Name(n.clone()),
        SymExpr::Call { func, args, kwargs } => K::Call(pb::ExprCall {
            func: func.clone(),
            args: args.iter().map(expr_to_pb).collect(),
            kwargs: kwargs
                .iter()
                .map(|(k, v)| pb::ExprKwarg {
                    key: k.clone(),
                    value: MessageField::some(expr_to_pb(v)),
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        }),
    };
    pb::Expr {
        kind: Some(kind),
        ..Default::default()
    }
}

fn expr_from_pb(e: &pb::Expr) -> Result<SymExpr> {
    use pb::expr::Kind as K;
    Ok(
        match e.kind.as_ref().ok_or_else(|| bad("empty expression"))? {
            K::Int(v) => SymExpr::Int(*v),
            K::Float(v) => SymExpr::Float(*v),
            K::Str(s) => SymExpr::Str(s.clone()),
            K::Bool(b) => SymExpr::Bool(*b),
            K::Name(n) => SymExpr::Name(n.clone()),
            K::Call(c) => SymExpr::Call {
                func: c.func.clone(),
                args: c.args.iter().map(expr_from_pb).collect::<Result<_>>()?,
                kwargs: c
                    .kwargs
                    .iter()
                    .map(|kw| {
                        Ok((
                            kw.key.clone(),
                            expr_from_pb(kw.value.as_ref().ok_or_else(|| bad("empty keyword"))?)?,
                        ))
                    })
                    .collect::<Result<_>>()?,
            },
        },
    )
}

fn sym_ref_to_pb(r: &SymRef) -> pb::SymRef {
    use pb::sym_ref::Kind as K;
    pb::SymRef {
        kind: Some(match r {
            SymRef::Int(v) => K::Int(*v),
            SymRef::Float(v) => K::Float(*v),
            SymRef::Bool(v) => K::Bool(*v),
            SymRef::Value(v) => K::Value(v.0),
        }),
        ..Default::default()
    }
}

fn sym_ref_from_pb(r: &pb::SymRef) -> Result<SymRef> {
    use pb::sym_ref::Kind as K;
    Ok(
        match r
            .kind
            .as_ref()
            .ok_or_else(|| bad("empty symbolic reference"))?
        {
            K::Int(v) => SymRef::Int(*v),
            K::Float(v) => SymRef::Float(*v),
            K::Bool(v) => SymRef::Bool(*v),
            K::Value(v) => SymRef::Value(ValueId(*v)),
        },
    )
}

fn refs(ids: &[ValueId]) -> pb::ValueRefs {
    pb::ValueRefs {
        values: ids.iter().map(|v| v.0).collect(),
        ..Default::default()
    }
}

fn opt_ref(id: &Option<ValueId>) -> pb::OptionalValueRef {
    pb::OptionalValueRef {
        value: id.map(|v| v.0),
        ..Default::default()
    }
}

fn ints(v: &[i64]) -> pb::Ints {
    pb::Ints {
        values: v.to_vec(),
        ..Default::default()
    }
}

fn floats(v: &[f64]) -> pb::Floats {
    pb::Floats {
        values: v.to_vec(),
        ..Default::default()
    }
}

fn sym_refs(v: &[SymRef]) -> pb::SymRefs {
    pb::SymRefs {
        values: v.iter().map(sym_ref_to_pb).collect(),
        ..Default::default()
    }
}

fn argument_to_pb(a: &Argument) -> pb::Argument {
    use pb::argument::Kind as K;
    let kind = match a {
        Argument::None => K::None(true),
        Argument::Tensor(v) => K::Tensor(v.0),
        Argument::OptionalTensor(v) => K::OptionalTensor(opt_ref(v)),
        Argument::Tensors(vs) => K::Tensors(refs(vs)),
        Argument::OptionalTensors(vs) => K::OptionalTensors(pb::OptionalValueRefs {
            values: vs.iter().map(opt_ref).collect(),
            ..Default::default()
        }),
        Argument::Int(v) => K::Int(*v),
        Argument::Ints(v) => K::Ints(ints(v)),
        Argument::Float(v) => K::Float(*v),
        Argument::Floats(v) => K::Floats(floats(v)),
        Argument::Bool(v) => K::Bool(*v),
        Argument::Bools(v) => K::Bools(pb::Bools {
            values: v.clone(),
            ..Default::default()
        }),
        Argument::String(s) => K::String(s.clone()),
        Argument::Strings(v) => K::Strings(pb::Strings {
            values: v.clone(),
            ..Default::default()
        }),
        Argument::SymInt(r) => K::SymInt(sym_ref_to_pb(r)),
        Argument::SymInts(rs) => K::SymInts(sym_refs(rs)),
        Argument::SymFloat(r) => K::SymFloat(sym_ref_to_pb(r)),
        Argument::SymFloats(rs) => K::SymFloats(sym_refs(rs)),
        Argument::SymBool(r) => K::SymBool(sym_ref_to_pb(r)),
        Argument::SymBools(rs) => K::SymBools(sym_refs(rs)),
        Argument::ScalarType(d) => K::ScalarType(d.code()),
        Argument::MemoryFormat(m) => K::MemoryFormat(m.code()),
        Argument::Layout(l) => K::Layout(l.code()),
        Argument::Device(d) => K::Device(device_to_pb(d)),
        Argument::Graph(sub) => K::Graph(pb::Subgraph {
            name: sub.name.clone(),
            graph: MessageField::some(graph_to_pb(&sub.graph)),
            ..Default::default()
        }),
        Argument::CustomObj(v) => K::CustomObj(v.0),
        Argument::Operator(s) => K::Operator(s.clone()),
        Argument::Complex { real, imag } => K::Complex(pb::Complex {
            real: *real,
            imag: *imag,
            ..Default::default()
        }),
        Argument::NestedTensors(vss) => K::NestedTensors(pb::NestedValueRefs {
            lists: vss.iter().map(|vs| refs(vs)).collect(),
            ..Default::default()
        }),
        Argument::IntLists(ls) => K::IntLists(pb::IntLists {
            lists: ls.iter().map(|l| ints(l)).collect(),
            ..Default::default()
        }),
        Argument::FloatLists(ls) => K::FloatLists(pb::FloatLists {
            lists: ls.iter().map(|l| floats(l)).collect(),
            ..Default::default()
        }),
        Argument::StringToArgument(entries) => K::StringToArgument(pb::ArgMap {
            entries: entries
                .iter()
                .map(|(k, v)| pb::NamedArgValue {
                    key: k.clone(),
                    value: MessageField::some(argument_to_pb(v)),
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        }),
    };
    pb::Argument {
        kind: Some(kind),
        ..Default::default()
    }
}

fn argument_from_pb(a: &pb::Argument) -> Result<Argument> {
    use pb::argument::Kind as K;
    let ids = |r: &pb::ValueRefs| r.values.iter().map(|v| ValueId(*v)).collect::<Vec<_>>();
    let srefs = |r: &pb::SymRefs| {
        r.values
            .iter()
            .map(sym_ref_from_pb)
            .collect::<Result<Vec<_>>>()
    };
    let code = |c: u32, what: &str| bad(&format!("unknown {what} {c}"));
    Ok(
        match a.kind.as_ref().ok_or_else(|| bad("empty argument"))? {
            K::None(_) => Argument::None,
            K::Tensor(v) => Argument::Tensor(ValueId(*v)),
            K::OptionalTensor(v) => Argument::OptionalTensor(v.value.map(ValueId)),
            K::Tensors(r) => Argument::Tensors(ids(r)),
            K::OptionalTensors(r) => {
                Argument::OptionalTensors(r.values.iter().map(|v| v.value.map(ValueId)).collect())
            }
            K::Int(v) => Argument::Int(*v),
            K::Ints(v) => Argument::Ints(v.values.clone()),
            K::Float(v) => Argument::Float(*v),
            K::Floats(v) => Argument::Floats(v.values.clone()),
            K::Bool(v) => Argument::Bool(*v),
            K::Bools(v) => Argument::Bools(v.values.clone()),
            K::String(s) => Argument::String(s.clone()),
            K::Strings(v) => Argument::Strings(v.values.clone()),
            K::SymInt(r) => Argument::SymInt(sym_ref_from_pb(r)?),
            K::SymInts(r) => Argument::SymInts(srefs(r)?),
            K::SymFloat(r) => Argument::SymFloat(sym_ref_from_pb(r)?),
            K::SymFloats(r) => Argument::SymFloats(srefs(r)?),
            K::SymBool(r) => Argument::SymBool(sym_ref_from_pb(r)?),
            K::SymBools(r) => Argument::SymBools(srefs(r)?),
            K::ScalarType(c) => {
                Argument::ScalarType(Dtype::from_code(*c).ok_or_else(|| code(*c, "dtype"))?)
            }
            K::MemoryFormat(c) => Argument::MemoryFormat(
                MemoryFormat::from_code(*c).ok_or_else(|| code(*c, "memory format"))?,
            ),
            K::Layout(c) => {
                Argument::Layout(Layout::from_code(*c).ok_or_else(|| code(*c, "layout"))?)
            }
            K::Device(d) => Argument::Device(device_from_pb(d)),
            K::Graph(sub) => Argument::Graph(Subgraph {
                name: sub.name.clone(),
                graph: Box::new(graph_from_pb(
                    sub.graph.as_ref().ok_or_else(|| bad("empty subgraph"))?,
                )?),
            }),
            K::CustomObj(v) => Argument::CustomObj(ValueId(*v)),
            K::Operator(s) => Argument::Operator(s.clone()),
            K::Complex(c) => Argument::Complex {
                real: c.real,
                imag: c.imag,
            },
            K::NestedTensors(n) => Argument::NestedTensors(n.lists.iter().map(ids).collect()),
            K::IntLists(l) => {
                Argument::IntLists(l.lists.iter().map(|x| x.values.clone()).collect())
            }
            K::FloatLists(l) => {
                Argument::FloatLists(l.lists.iter().map(|x| x.values.clone()).collect())
            }
            K::StringToArgument(m) => Argument::StringToArgument(
                m.entries
                    .iter()
                    .map(|e| {
                        Ok((
                            e.key.clone(),
                            argument_from_pb(
                                e.value.as_ref().ok_or_else(|| bad("empty map value"))?,
                            )?,
                        ))
                    })
                    .collect::<Result<_>>()?,
            ),
        },
    )
}
