//! The element types every ONNX node ir2onnx writes must have: those its
//! opset's schema allows, and those ONNX Runtime's CPU provider has a
//! kernel for. Both are data (`lib/data/onnx_types.txt`, written by
//! `recipes/fixtures/gen_onnx_types.py` from onnx's schemas and ONNX Runtime's
//! kernel registry).
//!
//! [`EmitNode::check_types`] runs once per IR node, over the ONNX nodes its
//! emitter added: each node's input types (tracked per ONNX name in
//! [`Converter::types`]) bind the schema's type variables; a binding the
//! opset or the runtime does not take is widened where that is exact (the
//! inputs cast to the wider type, the outputs cast back: integers to wider
//! integers for ops that wrap as integers do; for ops that only move,
//! compare or pick values, also to a float that holds every value, and
//! bool to an integer; float16 and bfloat16 to float32 for any op, as
//! torch computes them), or the node is refused, naming the op and the
//! type. So no emitter handles a type gap of its own, and no file ir2onnx
//! writes is one that ONNX's checker or ONNX Runtime refuses for a type.

use std::collections::HashMap;
use std::sync::OnceLock;

use onnx_protobuf::{attribute_proto::AttributeType, GraphProto, NodeProto};

use super::*;

const TABLE: &str = include_str!("../../../../data/onnx_types.txt");

/// A formal input or output of a schema.
#[derive(Debug)]
struct Formal {
    /// A type variable, or a fixed set of types.
    kind: FormalKind,
    variadic: bool,
    /// A variadic whose values each have a type of their own.
    heterogeneous: bool,
}

#[derive(Debug)]
enum FormalKind {
    Var(String),
    Fixed(Vec<Dtype>),
}

#[derive(Debug)]
struct Spec {
    since: i64,
    inputs: Vec<Formal>,
    outputs: Vec<Formal>,
    vars: HashMap<String, Vec<Dtype>>,
}

/// One CPU kernel: the types it takes per variable, for opsets `from..=to`.
#[derive(Debug)]
struct Kernel {
    from: i64,
    to: i64,
    vars: Vec<(String, Vec<Dtype>)>,
}

#[derive(Default)]
struct Table {
    specs: HashMap<String, Vec<Spec>>,
    kernels: HashMap<String, Vec<Kernel>>,
    /// The types ONNX Runtime runs an op's function body for at an opset,
    /// where no kernel of the op takes them.
    bodies: HashMap<(String, i64), Vec<Dtype>>,
}

fn parse_types(s: &str) -> Vec<Dtype> {
    s.split(',').filter_map(Dtype::from_short_name).collect()
}

fn parse_formal(s: &str) -> Formal {
    let (s, variadic, heterogeneous) = match (s.strip_suffix("..."), s.strip_suffix('*')) {
        (Some(t), _) => (t, true, false),
        (_, Some(t)) => (t, true, true),
        _ => (s, false, false),
    };
    let s = s.strip_suffix('?').unwrap_or(s);
    let kind = match s.strip_prefix('{').and_then(|t| t.strip_suffix('}')) {
        Some(t) => FormalKind::Fixed(parse_types(t)),
        None => FormalKind::Var(s.to_string()),
    };
    Formal {
        kind,
        variadic,
        heterogeneous,
    }
}

fn table() -> &'static Table {
    static TABLE_CELL: OnceLock<Table> = OnceLock::new();
    TABLE_CELL.get_or_init(|| {
        let mut t = Table::default();
        for line in TABLE.lines() {
            let mut words = line.split_whitespace();
            match words.next() {
                Some("spec") => {
                    let (Some(op), Some(since)) = (words.next(), words.next()) else {
                        continue;
                    };
                    let rest: Vec<&str> = words.collect();
                    let arrow = rest.iter().position(|w| *w == "->").unwrap_or(rest.len());
                    let semi = rest.iter().position(|w| *w == ";").unwrap_or(rest.len());
                    let spec = Spec {
                        since: since.parse().unwrap_or(0),
                        inputs: rest[..arrow].iter().map(|w| parse_formal(w)).collect(),
                        outputs: rest[(arrow + 1).min(semi)..semi]
                            .iter()
                            .map(|w| parse_formal(w))
                            .collect(),
                        vars: rest[(semi + 1).min(rest.len())..]
                            .iter()
                            .filter_map(|w| w.split_once('='))
                            .map(|(v, ts)| (v.to_string(), parse_types(ts)))
                            .collect(),
                    };
                    t.specs.entry(op.to_string()).or_default().push(spec);
                }
                Some("fn") => {
                    let (Some(op), Some(opset), Some(ops)) =
                        (words.next(), words.next(), words.next())
                    else {
                        continue;
                    };
                    t.bodies.insert(
                        (op.to_string(), opset.parse().unwrap_or(0)),
                        parse_types(ops),
                    );
                }
                Some("ort") => {
                    let (Some(op), Some(from), Some(to)) =
                        (words.next(), words.next(), words.next())
                    else {
                        continue;
                    };
                    let kernel = Kernel {
                        from: from.parse().unwrap_or(0),
                        to: if to == "-" {
                            i64::MAX
                        } else {
                            to.parse().unwrap_or(0)
                        },
                        vars: words
                            .filter_map(|w| w.split_once('='))
                            .map(|(v, ts)| (v.to_string(), parse_types(ts)))
                            .collect(),
                    };
                    t.kernels.entry(op.to_string()).or_default().push(kernel);
                }
                _ => {}
            }
        }
        t
    })
}

fn spec_at(op: &str, opset: i64) -> Option<&'static Spec> {
    table()
        .specs
        .get(op)?
        .iter()
        .filter(|s| s.since <= opset)
        .max_by_key(|s| s.since)
}

/// The CPU kernels of an op at an opset.
fn kernels_at(op: &str, opset: i64) -> Vec<&'static Kernel> {
    table()
        .kernels
        .get(op)
        .map(|ks| {
            ks.iter()
                .filter(|k| k.from <= opset && opset <= k.to)
                .collect()
        })
        .unwrap_or_default()
}

/// The formal of each actual input (or output) position.
fn formal_at(formals: &[Formal], i: usize) -> Option<&Formal> {
    formals
        .get(i)
        .or_else(|| formals.last().filter(|f| f.variadic))
}

/// The type variable at a position, and the key its binding goes under:
/// the variable, or for a heterogeneous variadic the variable and the
/// position (`V#3`).
fn var_at(formals: &[Formal], i: usize) -> Option<(String, String)> {
    let f = formal_at(formals, i)?;
    match &f.kind {
        FormalKind::Var(v) if f.heterogeneous => Some((v.clone(), format!("{v}#{i}"))),
        FormalKind::Var(v) => Some((v.clone(), v.clone())),
        FormalKind::Fixed(_) => None,
    }
}

/// The variable a binding key belongs to.
fn var_of_key(key: &str) -> &str {
    key.split('#').next().unwrap_or(key)
}

/// How an op's values survive a wider type.
#[derive(Clone, Copy, PartialEq)]
enum Class {
    /// Moves, compares or picks values: any type that holds them all
    /// exactly will do (a float included), bool as an integer.
    Select,
    /// Integer arithmetic that wraps: wider integers wrap alike once cast
    /// back.
    Ring,
    /// Float math: float16 and bfloat16 in float32 only.
    Float,
}

/// The ops the emitters write, by how their values survive a wider type
/// (any other op: [`Class::Float`]).
const CLASSES: &[(&str, Class)] = &[
    ("ArgMax", Class::Select),
    ("ArgMin", Class::Select),
    ("Ceil", Class::Select),
    ("Clip", Class::Select),
    ("Compress", Class::Select),
    ("Concat", Class::Select),
    ("ConstantOfShape", Class::Select),
    ("DepthToSpace", Class::Select),
    ("Equal", Class::Select),
    ("Expand", Class::Select),
    ("Flatten", Class::Select),
    ("Floor", Class::Select),
    ("Gather", Class::Select),
    ("GatherElements", Class::Select),
    ("GatherND", Class::Select),
    ("GlobalMaxPool", Class::Select),
    ("Greater", Class::Select),
    ("GreaterOrEqual", Class::Select),
    ("Identity", Class::Select),
    ("IsInf", Class::Select),
    ("IsNaN", Class::Select),
    ("Less", Class::Select),
    ("LessOrEqual", Class::Select),
    ("Max", Class::Select),
    ("MaxPool", Class::Select),
    ("Min", Class::Select),
    ("NonZero", Class::Select),
    ("OneHot", Class::Select),
    ("Pad", Class::Select),
    ("ReduceMax", Class::Select),
    ("ReduceMin", Class::Select),
    ("Relu", Class::Select),
    ("Reshape", Class::Select),
    ("ReverseSequence", Class::Select),
    ("Round", Class::Select),
    ("ScatterElements", Class::Select),
    ("ScatterND", Class::Select),
    ("Shape", Class::Select),
    ("Sign", Class::Select),
    ("Size", Class::Select),
    ("Slice", Class::Select),
    ("SpaceToDepth", Class::Select),
    ("Split", Class::Select),
    ("Squeeze", Class::Select),
    ("Tile", Class::Select),
    ("TopK", Class::Select),
    ("Transpose", Class::Select),
    ("Trilu", Class::Select),
    ("Unsqueeze", Class::Select),
    ("Where", Class::Select),
    ("Abs", Class::Ring),
    ("Add", Class::Ring),
    ("BitShift", Class::Ring),
    ("BitwiseAnd", Class::Ring),
    ("BitwiseNot", Class::Ring),
    ("BitwiseOr", Class::Ring),
    ("BitwiseXor", Class::Ring),
    ("CumSum", Class::Ring),
    ("Div", Class::Ring),
    ("Einsum", Class::Ring),
    ("MatMul", Class::Ring),
    ("Mod", Class::Ring),
    ("Mul", Class::Ring),
    ("Neg", Class::Ring),
    ("ReduceProd", Class::Ring),
    ("ReduceSum", Class::Ring),
    ("Sub", Class::Ring),
    ("Sum", Class::Ring),
];

fn class_of(op: &str) -> Class {
    CLASSES
        .iter()
        .find(|(o, _)| *o == op)
        .map_or(Class::Float, |(_, c)| *c)
}

/// The wider types `t` may be computed in for an op of `class`, nearest
/// first.
fn wider(t: Dtype, class: Class) -> Vec<Dtype> {
    use Dtype::*;
    let ints: &[Dtype] = match t {
        Uint8 | Int8 => &[Int16, Int32, Int64],
        Int16 | Uint16 => &[Int32, Int64],
        Int32 | Uint32 => &[Int64],
        _ => &[],
    };
    let halves: &[Dtype] = match t {
        Float16 | BFloat16 => &[Float32],
        _ => &[],
    };
    let mut v: Vec<Dtype> = halves.to_vec();
    if class == Class::Float {
        return v;
    }
    v.extend_from_slice(ints);
    if class == Class::Select {
        // floats that hold every value of t, and bool as 0 and 1
        let exact: &[Dtype] = match t {
            Bool => &[Uint8, Int32, Int64, Float32],
            Uint8 | Int8 | Int16 | Uint16 => &[Float32, Float64],
            Int32 | Uint32 => &[Float64],
            Float16 | BFloat16 | Float32 => &[Float64],
            _ => &[],
        };
        v.extend_from_slice(exact);
    }
    v
}

/// The outcome of checking one node.
enum Verdict {
    /// Its types are taken as they are (or cannot be known).
    Fine,
    /// Computed with these variables widened: (variable, from, to).
    Widen(Vec<(String, Dtype, Dtype)>),
}

fn onnx_name(d: Dtype, opset: i64) -> String {
    match crate::export::onnx::onnx_dtype(d, opset) {
        Ok(t) => format!("tensor({})", format!("{t:?}").to_lowercase()),
        Err(_) => d.torch_name().to_string(),
    }
}

/// Checks a node with input types `ins` (`None`: absent or not known).
fn check(node: &NodeProto, ins: &[Option<Dtype>], opset: i64) -> Result<Verdict> {
    let op = node.op_type.as_str();
    let Some(spec) = spec_at(op, opset) else {
        return Ok(Verdict::Fine);
    };
    // bind the type variables
    let mut bound: Vec<(String, Dtype)> = Vec::new();
    for (i, t) in ins.iter().enumerate() {
        let (Some(t), Some(f)) = (t, formal_at(&spec.inputs, i)) else {
            continue;
        };
        if let FormalKind::Fixed(allowed) = &f.kind {
            if !allowed.is_empty() && !allowed.contains(t) {
                return Err(Error::unsupported(format!(
                    "ONNX opset {opset}'s {op} takes no {} as its input {i}",
                    onnx_name(*t, opset)
                )));
            }
            continue;
        }
        let Some((v, key)) = var_at(&spec.inputs, i) else {
            continue;
        };
        match bound.iter().find(|(b, _)| *b == key) {
            Some((_, u)) if u != t => {
                return Err(Error::internal(format!(
                    "{op}: inputs of one type ({v}) are {} and {}",
                    onnx_name(*u, opset),
                    onnx_name(*t, opset)
                )))
            }
            Some(_) => {}
            None => bound.push((key, *t)),
        }
    }
    let kernels = kernels_at(op, opset);
    let body = table().bodies.get(&(op.to_string(), opset));
    let spec_ok = |a: &[(String, Dtype)]| {
        a.iter().all(|(v, t)| {
            spec.vars
                .get(var_of_key(v))
                .is_none_or(|allowed| allowed.contains(t))
        })
    };
    // (an op with no CPU kernel at all is a function ONNX Runtime expands;
    // one with a function body runs it for the types the table lists)
    let ort_ok = |a: &[(String, Dtype)]| {
        kernels.is_empty()
            || kernels.iter().any(|k| {
                a.iter().all(|(v, t)| {
                    k.vars
                        .iter()
                        .find(|(kv, _)| kv == var_of_key(v))
                        .is_none_or(|(_, allowed)| allowed.contains(t))
                })
            })
            || body
                .zip(a.first())
                .is_some_and(|(types, (_, t))| types.contains(t))
    };
    if spec_ok(&bound) && ort_ok(&bound) {
        return Ok(Verdict::Fine);
    }
    // the nearest wider binding both take
    let class = class_of(op);
    let choices: Vec<Vec<Dtype>> = bound
        .iter()
        .map(|(v, t)| {
            let mut c = vec![*t];
            c.extend(wider(*t, class).into_iter().filter(|w| {
                spec.vars
                    .get(var_of_key(v))
                    .is_none_or(|allowed| allowed.contains(w))
            }));
            c
        })
        .collect();
    let mut pick = vec![0usize; bound.len()];
    loop {
        let a: Vec<(String, Dtype)> = bound
            .iter()
            .zip(&pick)
            .zip(&choices)
            .map(|(((v, _), &p), c)| (v.clone(), c[p]))
            .collect();
        if spec_ok(&a) && ort_ok(&a) {
            let widen = bound
                .iter()
                .zip(&a)
                .filter(|((_, from), (_, to))| from != to)
                .map(|((v, from), (_, to))| (v.clone(), *from, *to))
                .collect();
            return Ok(Verdict::Widen(widen));
        }
        // next combination
        let mut i = 0;
        loop {
            if i == pick.len() {
                return Err(refusal(op, opset, &bound, &spec_ok, &ort_ok));
            }
            pick[i] += 1;
            if pick[i] < choices[i].len() {
                break;
            }
            pick[i] = 0;
            i += 1;
        }
    }
}

/// Whether a binding of type variables is taken (by the opset's schema,
/// or by the runtime's kernels).
type Takes<'a> = &'a dyn Fn(&[(String, Dtype)]) -> bool;

fn refusal(
    op: &str,
    opset: i64,
    bound: &[(String, Dtype)],
    spec_ok: Takes,
    ort_ok: Takes,
) -> Error {
    let types: Vec<String> = bound.iter().map(|(_, t)| onnx_name(*t, opset)).collect();
    let types = types.join(", ");
    if !spec_ok(bound) {
        Error::unsupported(format!(
            "ONNX opset {opset}'s {op} takes no {types}, and no wider type computes it exactly"
        ))
    } else if !ort_ok(bound) {
        Error::unsupported(format!(
            "ONNX Runtime's CPU provider has no {op} kernel for {types}, and no wider type computes it exactly"
        ))
    } else {
        Error::unsupported(format!("{op} on {types}"))
    }
}

/// Whether ONNX Runtime's CPU provider holds values of `d` at all (some
/// kernel of Identity takes them): a graph input or output of another
/// type makes a model it cannot load.
pub(crate) fn runtime_holds(d: Dtype, opset: i64) -> bool {
    table().kernels.get("Identity").is_none_or(|ks| {
        ks.iter()
            .filter(|k| k.from <= opset && opset <= k.to)
            .any(|k| k.vars.iter().any(|(_, ts)| ts.contains(&d)))
    })
}

/// Why a graph input or output of `d` cannot be written, if it cannot.
pub(crate) fn unheld(d: Dtype, opset: i64) -> Option<String> {
    (!runtime_holds(d, opset)).then(|| {
        format!(
            "ONNX Runtime's CPU provider holds no {} values (no kernel takes them)",
            onnx_name(d, opset)
        )
    })
}

/// The IR dtype of an ONNX element type number.
pub(crate) fn dtype_of(code: i32) -> Option<Dtype> {
    Dtype::ALL.iter().copied().find(|d| {
        crate::export::onnx::onnx_dtype(*d, 21).is_ok_and(|t| t as i32 == code)
            && !matches!(d, Dtype::Unknown)
    })
}

fn graph_output_types(g: &GraphProto) -> Vec<Option<Dtype>> {
    g.output
        .iter()
        .map(|o| match o.type_.as_ref().and_then(|t| t.value.as_ref()) {
            Some(onnx_protobuf::type_proto::Value::TensorType(t)) => dtype_of(t.elem_type),
            _ => None,
        })
        .collect()
}

fn attr<'n>(node: &'n NodeProto, name: &str) -> Option<&'n AttributeProto> {
    node.attribute.iter().find(|a| a.name == name)
}

/// The types of a node's outputs, from its input types (`assign`: the
/// type variables as bound).
fn output_types(
    node: &NodeProto,
    ins: &[Option<Dtype>],
    assign: &[(String, Dtype)],
    opset: i64,
) -> Vec<Option<Dtype>> {
    let n = node.output.len();
    let tensor_type = |a: Option<&AttributeProto>| -> Option<Dtype> {
        let a = a?;
        if let Some(t) = a.t.as_ref() {
            return dtype_of(t.data_type);
        }
        match a.type_.enum_value().ok()? {
            AttributeType::FLOAT | AttributeType::FLOATS => Some(Dtype::Float32),
            AttributeType::INT | AttributeType::INTS => Some(Dtype::Int64),
            _ => None,
        }
    };
    match node.op_type.as_str() {
        "Cast" => return vec![attr(node, "to").and_then(|a| dtype_of(a.i as i32))],
        "CastLike" => return vec![ins.get(1).copied().flatten()],
        "Constant" => {
            let a = node.attribute.first();
            return vec![tensor_type(a)];
        }
        "ConstantOfShape" => {
            return vec![attr(node, "value").map_or(Some(Dtype::Float32), |a| tensor_type(Some(a)))]
        }
        "If" => {
            return attr(node, "then_branch")
                .and_then(|a| a.g.as_ref())
                .map_or(vec![None; n], graph_output_types)
        }
        "Loop" => {
            return attr(node, "body")
                .and_then(|a| a.g.as_ref())
                .map_or(vec![None; n], |g| {
                    graph_output_types(g).into_iter().skip(1).collect()
                })
        }
        "Scan" => {
            return attr(node, "body")
                .and_then(|a| a.g.as_ref())
                .map_or(vec![None; n], graph_output_types)
        }
        "EyeLike" | "RandomNormalLike" | "RandomUniformLike" => {
            return vec![attr(node, "dtype")
                .and_then(|a| dtype_of(a.i as i32))
                .or(ins.first().copied().flatten())]
        }
        _ => {}
    }
    let Some(spec) = spec_at(&node.op_type, opset) else {
        return vec![None; n];
    };
    (0..n)
        .map(|i| {
            match (
                var_at(&spec.outputs, i),
                formal_at(&spec.outputs, i).map(|f| &f.kind),
            ) {
                (Some((v, key)), _) => assign
                    .iter()
                    .find(|(b, _)| *b == key)
                    .map(|(_, t)| *t)
                    .or_else(|| spec.vars.get(&v).filter(|a| a.len() == 1).map(|a| a[0])),
                (None, Some(FormalKind::Fixed(a))) if a.len() == 1 => Some(a[0]),
                _ => None,
            }
        })
        .collect()
}

/// The type variables of a node as its inputs bind them.
fn bindings(node: &NodeProto, ins: &[Option<Dtype>], opset: i64) -> Vec<(String, Dtype)> {
    let Some(spec) = spec_at(&node.op_type, opset) else {
        return Vec::new();
    };
    let mut bound: Vec<(String, Dtype)> = Vec::new();
    for (i, t) in ins.iter().enumerate() {
        if let (Some(t), Some((_, key))) = (t, var_at(&spec.inputs, i)) {
            if !bound.iter().any(|(b, _)| *b == key) {
                bound.push((key, *t));
            }
        }
    }
    bound
}

impl Converter<'_> {
    /// Records the types of a node's outputs (nodes added outside an
    /// emitter: graph outputs, loop bodies' extras).
    pub(crate) fn note_types(&mut self, node: &NodeProto) {
        let ins: Vec<Option<Dtype>> = node
            .input
            .iter()
            .map(|i| {
                if i.is_empty() {
                    None
                } else {
                    self.types.get(i).copied()
                }
            })
            .collect();
        let assign = bindings(node, &ins, self.opset);
        for (o, t) in node
            .output
            .iter()
            .zip(output_types(node, &ins, &assign, self.opset))
        {
            if let (false, Some(t)) = (o.is_empty(), t) {
                self.types.insert(o.clone(), t);
            }
        }
    }
}

impl EmitNode<'_, '_> {
    /// Checks the types of every ONNX node this emitter added, widening
    /// or refusing as the module says.
    pub(super) fn check_types(&mut self) -> Result<()> {
        let opset = self.conv.opset;
        let mut k = self.start;
        while k < self.conv.scope().nodes.len() {
            let node = self.conv.scope().nodes[k].clone();
            if !node.domain.is_empty() {
                k += 1;
                continue;
            }
            let ins: Vec<Option<Dtype>> = node
                .input
                .iter()
                .map(|i| {
                    if i.is_empty() {
                        None
                    } else {
                        self.conv.types.get(i).copied()
                    }
                })
                .collect();
            let widen = match check(&node, &ins, opset)? {
                Verdict::Fine => {
                    self.conv.note_types(&node);
                    k += 1;
                    continue;
                }
                Verdict::Widen(w) => w,
            };
            let spec = spec_at(&node.op_type, opset).expect("a checked op has a schema");
            let var_of = |formals: &[Formal], i: usize| -> Option<String> {
                var_at(formals, i).map(|(_, key)| key)
            };
            let mut node = node;
            let mut before = Vec::new();
            let mut after = Vec::new();
            for i in 0..node.input.len() {
                let Some(v) = var_of(&spec.inputs, i) else {
                    continue;
                };
                let Some((_, from, to)) = widen.iter().find(|(w, _, _)| *w == v) else {
                    continue;
                };
                if node.input[i].is_empty() {
                    continue;
                }
                let name = match before
                    .iter()
                    .find(|c: &&NodeProto| c.input[0] == node.input[i])
                {
                    Some(c) => c.output[0].clone(),
                    None => {
                        let name =
                            self.conv
                                .unique(&format!("{}.{}", node.input[i], to.short_name()));
                        before.push(cast_node(&node.input[i], &name, *to, opset)?);
                        self.conv.types.insert(name.clone(), *to);
                        self.temps.insert(name.clone());
                        name
                    }
                };
                let _ = from;
                node.input[i] = name;
            }
            for i in 0..node.output.len() {
                let Some(v) = var_of(&spec.outputs, i) else {
                    continue;
                };
                let Some((_, from, to)) = widen.iter().find(|(w, _, _)| *w == v) else {
                    continue;
                };
                if node.output[i].is_empty() {
                    continue;
                }
                let wide = self
                    .conv
                    .unique(&format!("{}.{}", node.output[i], to.short_name()));
                after.push(cast_node(&wide, &node.output[i], *from, opset)?);
                self.conv.types.insert(node.output[i].clone(), *from);
                self.temps.insert(wide.clone());
                node.output[i] = wide;
            }
            let ins: Vec<Option<Dtype>> = node
                .input
                .iter()
                .map(|i| {
                    if i.is_empty() {
                        None
                    } else {
                        self.conv.types.get(i).copied()
                    }
                })
                .collect();
            let assign = bindings(&node, &ins, opset);
            for (o, t) in node
                .output
                .iter()
                .zip(output_types(&node, &ins, &assign, opset))
            {
                if let (false, Some(t)) = (o.is_empty(), t) {
                    self.conv.types.entry(o.clone()).or_insert(t);
                }
            }
            let count = before.len() + 1 + after.len();
            let nodes = &mut self.conv.scope_mut().nodes;
            let tail = nodes.split_off(k);
            nodes.extend(before);
            nodes.push(node);
            nodes.extend(after);
            nodes.extend(tail.into_iter().skip(1));
            k += count;
        }
        Ok(())
    }
}

fn cast_node(input: &str, output: &str, to: Dtype, opset: i64) -> Result<NodeProto> {
    let t = crate::export::onnx::onnx_dtype(to, opset)?;
    Ok(NodeProto {
        op_type: "Cast".into(),
        input: vec![input.to_string()],
        output: vec![output.to_string()],
        attribute: vec![attr_int("to", t as i64)],
        ..Default::default()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(op: &str, n_in: usize) -> NodeProto {
        NodeProto {
            op_type: op.into(),
            input: (0..n_in).map(|i| format!("x{i}")).collect(),
            output: vec!["y".into()],
            ..Default::default()
        }
    }

    #[test]
    fn the_table_reads() {
        assert!(spec_at("Add", 18).is_some());
        assert!(spec_at("Where", 17).is_some_and(|s| s.inputs.len() == 3));
        assert!(table().kernels.contains_key("Where"));
    }

    #[test]
    fn supported_types_pass_and_gaps_widen_exactly() {
        let f32s = [Some(Dtype::Float32); 2];
        assert!(matches!(
            check(&node("Add", 2), &f32s, 18),
            Ok(Verdict::Fine)
        ));
        // ONNX Runtime has no int16 Where: int32 holds every value
        let w = [Some(Dtype::Bool), Some(Dtype::Int16), Some(Dtype::Int16)];
        match check(&node("Where", 3), &w, 18) {
            Ok(Verdict::Widen(v)) => {
                assert_eq!(v, vec![("T".to_string(), Dtype::Int16, Dtype::Int32)])
            }
            _ => panic!("Where of int16 should widen"),
        }
        // MatMul of int8 wraps in int32 as in int8
        match check(&node("MatMul", 2), &[Some(Dtype::Int8); 2], 18) {
            Ok(Verdict::Widen(v)) => assert_eq!(v[0].2, Dtype::Int32),
            _ => panic!("MatMul of int8 should widen"),
        }
        // no exact wider type for int64 pooling or float64 Atan
        assert!(check(&node("MaxPool", 1), &[Some(Dtype::Int64)], 18).is_err());
        let e = check(&node("Atan", 1), &[Some(Dtype::Float64)], 18)
            .err()
            .unwrap();
        assert!(
            e.to_string().contains("no Atan kernel for tensor(double)"),
            "{e}"
        );
        // ONNX Runtime runs Relu's function body (Max) for int64, which has
        // no Relu kernel; not for int16 (no Max kernel either): int32
        assert!(matches!(
            check(&node("Relu", 1), &[Some(Dtype::Int64)], 18),
            Ok(Verdict::Fine)
        ));
        match check(&node("Relu", 1), &[Some(Dtype::Int16)], 18) {
            Ok(Verdict::Widen(v)) => assert_eq!(v[0].2, Dtype::Int32),
            _ => panic!("Relu of int16 should widen"),
        }
        // int32 max pooling: in float64, which holds every int32
        match check(&node("MaxPool", 1), &[Some(Dtype::Int32)], 18) {
            Ok(Verdict::Widen(v)) => assert_eq!(v[0].2, Dtype::Float64),
            _ => panic!("MaxPool of int32 should widen"),
        }
    }
}
