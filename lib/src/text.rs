//! Readable forms of a program: the text listing (in the spirit of FX's
//! graph printing; golden files store it) and a YAML dump.
//!
//! Both are deterministic: no hash-map order, no paths, no timestamps.

use std::fmt::Write;

use serde::Serialize;

use crate::error::{Error, Result};
use crate::ir::sym::format_float;
use crate::ir::*;

/// Dtype and shape: `f32[s77, 4]`.
pub fn tensor_type(m: &TensorMeta) -> String {
    let dims: Vec<String> = m.sizes.iter().map(sym_text).collect();
    let mut s = format!("{}[{}]", m.dtype, dims.join(", "));
    if let (Some(sizes), Some(strides)) = (m.static_sizes(), m.static_strides()) {
        let dense = sizes
            .iter()
            .zip(strides.iter().zip(contiguous_strides(&sizes)))
            .all(|(&size, (&st, c))| size <= 1 || st == c);
        if !dense {
            let _ = write!(s, " strides={strides:?}");
        }
    }
    if m.device.kind != "cpu" {
        let _ = write!(s, " @{}", device_text(&m.device));
    }
    s
}

fn device_text(d: &Device) -> String {
    match d.index {
        Some(i) => format!("{}:{i}", d.kind),
        None => d.kind.clone(),
    }
}

pub fn sym_text(s: &Sym) -> String {
    match s {
        Sym::Int(v) => v.to_string(),
        Sym::Float(v) => format_float(*v),
        Sym::Bool(b) => py_bool(*b).into(),
        Sym::Expr { expr, .. } => expr.to_string(),
    }
}

fn py_bool(b: bool) -> &'static str {
    if b {
        "True"
    } else {
        "False"
    }
}

fn value_type(v: &Value) -> String {
    match &v.kind {
        ValueKind::Tensor(m) => tensor_type(m),
        ValueKind::SymInt(s) => format!("SymInt({})", sym_text(s)),
        ValueKind::SymBool(s) => format!("SymBool({})", sym_text(s)),
        ValueKind::SymFloat(s) => format!("SymFloat({})", sym_text(s)),
        ValueKind::CustomObj(c) => format!("ScriptObject({c})"),
        ValueKind::Token => "Token".into(),
    }
}

struct Printer<'a> {
    graph: &'a Graph,
}

impl Printer<'_> {
    fn name(&self, v: ValueId) -> String {
        format!("%{}", self.graph.value(v).name)
    }

    fn sym_ref(&self, r: &SymRef) -> String {
        match r {
            SymRef::Int(v) => v.to_string(),
            SymRef::Float(v) => format_float(*v),
            SymRef::Bool(b) => py_bool(*b).into(),
            SymRef::Value(v) => self.name(*v),
        }
    }

    fn list<T>(&self, items: &[T], f: impl Fn(&T) -> String) -> String {
        format!("[{}]", items.iter().map(f).collect::<Vec<_>>().join(", "))
    }

    fn arg(&self, a: &Argument) -> String {
        match a {
            Argument::None => "None".into(),
            Argument::Tensor(v) | Argument::CustomObj(v) => self.name(*v),
            Argument::OptionalTensor(v) => v.map(|v| self.name(v)).unwrap_or("None".into()),
            Argument::Tensors(vs) => self.list(vs, |v| self.name(*v)),
            Argument::OptionalTensors(vs) => {
                self.list(vs, |v| v.map(|v| self.name(v)).unwrap_or("None".into()))
            }
            Argument::Int(v) => v.to_string(),
            Argument::Ints(v) => self.list(v, |x| x.to_string()),
            Argument::Float(v) => format_float(*v),
            Argument::Floats(v) => self.list(v, |x| format_float(*x)),
            Argument::Bool(b) => py_bool(*b).into(),
            Argument::Bools(v) => self.list(v, |b| py_bool(*b).into()),
            Argument::String(s) => format!("{s:?}"),
            Argument::Strings(v) => self.list(v, |s| format!("{s:?}")),
            Argument::SymInt(r) | Argument::SymFloat(r) | Argument::SymBool(r) => self.sym_ref(r),
            Argument::SymInts(rs) | Argument::SymFloats(rs) | Argument::SymBools(rs) => {
                self.list(rs, |r| self.sym_ref(r))
            }
            Argument::ScalarType(d) => format!("torch.{}", d.torch_name()),
            Argument::MemoryFormat(m) => m.to_string(),
            Argument::Layout(l) => l.to_string(),
            Argument::Device(d) => format!("device({:?})", device_text(d)),
            Argument::Graph(sub) => format!("@{}", sub.name),
            Argument::Operator(s) => s.clone(),
            Argument::Complex { real, imag } => {
                format!("complex({}, {})", format_float(*real), format_float(*imag))
            }
            Argument::NestedTensors(vss) => self.list(vss, |vs| self.list(vs, |v| self.name(*v))),
            Argument::IntLists(ls) => self.list(ls, |l| self.list(l, |x| x.to_string())),
            Argument::FloatLists(ls) => self.list(ls, |l| self.list(l, |x| format_float(*x))),
            Argument::StringToArgument(entries) => format!(
                "{{{}}}",
                entries
                    .iter()
                    .map(|(k, v)| format!("{k:?}: {}", self.arg(v)))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        }
    }

    /// The type of an output argument.
    fn out_type(&self, a: &Argument) -> String {
        let mut refs = Vec::new();
        a.value_refs(&mut refs);
        match a {
            Argument::Tensor(v)
            | Argument::SymInt(SymRef::Value(v))
            | Argument::SymBool(SymRef::Value(v))
            | Argument::SymFloat(SymRef::Value(v)) => value_type(self.graph.value(*v)),
            Argument::None => "None".into(),
            _ => format!(
                "[{}]",
                refs.iter()
                    .map(|v| value_type(self.graph.value(*v)))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        }
    }

    fn graph(&self, out: &mut String, indent: &str, header: &str) {
        let g = self.graph;
        let params: Vec<String> = g
            .inputs
            .iter()
            .map(|a| {
                let text = self.arg(a);
                match a {
                    Argument::Tensor(_)
                    | Argument::CustomObj(_)
                    | Argument::SymInt(SymRef::Value(_)) => {
                        format!("{text}: {}", self.out_type(a))
                    }
                    _ => text,
                }
            })
            .collect();
        let _ = writeln!(out, "{indent}{header}({}):", params.join(", "));
        let inner = format!("{indent}  ");
        for node in &g.nodes {
            self.node(out, &inner, node);
        }
        let outs: Vec<String> = g.outputs.iter().map(|a| self.arg(a)).collect();
        let _ = writeln!(
            out,
            "{inner}return ({}{})",
            outs.join(", "),
            if outs.len() == 1 { "," } else { "" }
        );
    }

    fn node(&self, out: &mut String, indent: &str, node: &Node) {
        let args: Vec<String> = node
            .inputs
            .iter()
            .map(|a| match a.kind {
                ArgKind::Keyword => format!("{}={}", a.name, self.arg(&a.arg)),
                _ => self.arg(&a.arg),
            })
            .collect();
        let lhs: Vec<String> = node.outputs.iter().map(|o| self.arg(o)).collect();
        let types: Vec<String> = node.outputs.iter().map(|o| self.out_type(o)).collect();
        let call = format!("{}({})", node.target, args.join(", "));
        let first_name = node.outputs.first().map(|o| self.arg(o));
        let named_differently = first_name.as_deref() != Some(&format!("%{}", node.name));
        let suffix = if named_differently && !node.outputs.is_empty() {
            format!("  # node {}", node.name)
        } else {
            String::new()
        };
        match lhs.len() {
            0 => {
                let _ = writeln!(out, "{indent}{call}");
            }
            1 => {
                let _ = writeln!(out, "{indent}{} = {call} : {}{suffix}", lhs[0], types[0]);
            }
            _ => {
                let _ = writeln!(
                    out,
                    "{indent}{} = {call} : ({}){suffix}",
                    lhs.join(", "),
                    types.join(", ")
                );
            }
        }
        for a in &node.inputs {
            if let Argument::Graph(sub) = &a.arg {
                Printer { graph: &sub.graph }.graph(
                    out,
                    &format!("{indent}  "),
                    &format!("@{}", sub.name),
                );
            }
        }
    }
}

fn input_kind_text(k: &InputKind) -> String {
    match k {
        InputKind::UserInput => "user input".into(),
        InputKind::Parameter(n) => format!("parameter {n}"),
        InputKind::Buffer(n) => format!("buffer {n}"),
        InputKind::NonPersistentBuffer(n) => format!("buffer {n} (non-persistent)"),
        InputKind::TensorConstant(n) => format!("constant {n}"),
        InputKind::CustomObj(n) => format!("custom object {n}"),
        InputKind::Token => "token".into(),
        InputKind::ConstantInput(n) => format!("constant input {n}"),
    }
}

fn output_kind_text(k: &OutputKind) -> String {
    match k {
        OutputKind::UserOutput => "user output".into(),
        OutputKind::LossOutput => "loss output".into(),
        OutputKind::BufferMutation(n) => format!("mutates buffer {n}"),
        OutputKind::GradientToParameter(n) => format!("gradient of parameter {n}"),
        OutputKind::GradientToUserInput(n) => format!("gradient of input {n}"),
        OutputKind::UserInputMutation(n) => format!("mutates input {n}"),
        OutputKind::Token => "token".into(),
        OutputKind::ParameterMutation(n) => format!("mutates parameter {n}"),
    }
}

/// The text listing of a program.
pub fn listing(p: &Program) -> String {
    let mut out = String::new();
    let i = &p.info;
    let _ = writeln!(out, "# pt2ir listing");
    let _ = writeln!(
        out,
        "program: torch {}, schema {}.{}, dialect {}, {}",
        i.torch_version,
        i.schema_major,
        i.schema_minor,
        if i.verifiers.is_empty() {
            "unknown".to_string()
        } else {
            i.verifiers.join("+")
        },
        if i.archive_layout.is_empty() {
            "unknown layout"
        } else {
            &i.archive_layout
        }
    );
    if !p.range_constraints.is_empty() {
        let _ = writeln!(out, "range constraints:");
        for r in &p.range_constraints {
            let bound = |b: Option<i64>, inf: &str| b.map(|v| v.to_string()).unwrap_or(inf.into());
            let _ = writeln!(
                out,
                "  {} in [{}, {}]",
                r.symbol,
                bound(r.min, "-inf"),
                bound(r.max, "inf")
            );
        }
    }
    let printer = Printer { graph: &p.graph };
    let _ = writeln!(out, "inputs:");
    for (a, k) in p.graph.inputs.iter().zip(&p.input_kinds) {
        let _ = writeln!(out, "  {}  {}", printer.arg(a), input_kind_text(k));
    }
    let _ = writeln!(out, "outputs:");
    for (a, k) in p.graph.outputs.iter().zip(&p.output_kinds) {
        let _ = writeln!(out, "  {}  {}", printer.arg(a), output_kind_text(k));
    }
    printer.graph(&mut out, "", "graph");
    let total: usize = p.storages.iter().map(|s| s.len()).sum();
    let _ = writeln!(
        out,
        "weights: {} tensors in {} storages, {} bytes",
        p.weights.len(),
        p.storages.len(),
        total
    );
    for w in &p.weights {
        let kind = match w.kind {
            WeightKind::Parameter => "parameter",
            WeightKind::Buffer => "buffer",
            WeightKind::Constant => "constant",
        };
        let crc = crc32fast::hash(&p.weight_bytes(w));
        let _ = writeln!(
            out,
            "  {}  {kind}  {}  crc32={crc:08x}",
            w.name,
            tensor_type(&w.meta)
        );
    }
    out
}

#[derive(Serialize)]
struct YamlDoc<'a> {
    #[serde(flatten)]
    program: &'a Program,
    storages: Vec<StorageSummary>,
}

#[derive(Serialize)]
struct StorageSummary {
    bytes: usize,
    crc32: String,
}

/// The program as YAML (weights summarised by size and checksum).
pub fn yaml(p: &Program) -> Result<String> {
    let doc = YamlDoc {
        program: p,
        storages: p
            .storages
            .iter()
            .map(|s| StorageSummary {
                bytes: s.len(),
                crc32: format!("{:08x}", s.crc32()),
            })
            .collect(),
    };
    serde_yaml_ng::to_string(&doc).map_err(|e| Error::internal(format!("YAML: {e}")))
}

/// The graph as Graphviz DOT: one box per node (name, op, output type),
/// edges along values, subgraphs and module paths as clusters.
/// `pt2ir model.pt2 --emit dot | dot -Tsvg > model.svg`
pub fn dot(p: &Program) -> String {
    let mut out = String::from("digraph program {\n  rankdir=TB;\n  node [shape=box, fontname=\"monospace\", fontsize=10];\n");
    dot_graph(&p.graph, "g", &mut out, Some(&p.input_kinds));
    out.push_str("}\n");
    out
}

fn dot_escape(s: &str) -> String {
    s.replace('\\', "\\\\").replace('"', "\\\"")
}

fn dot_graph(g: &Graph, prefix: &str, out: &mut String, kinds: Option<&[InputKind]>) {
    let printer = Printer { graph: g };
    let id = |v: ValueId| format!("{prefix}_v{}", v.0);
    let mut producer: Vec<Option<String>> = vec![None; g.values.len()];
    let mut refs = Vec::new();
    for (i, a) in g.inputs.iter().enumerate() {
        refs.clear();
        a.value_refs(&mut refs);
        for v in &refs {
            let kind = kinds
                .and_then(|k| k.get(i))
                .map(input_kind_text)
                .unwrap_or_default();
            let _ = writeln!(
                out,
                "  {} [shape=ellipse, label=\"{}\\n{}\\n{}\"];",
                id(*v),
                dot_escape(&g.value(*v).name),
                dot_escape(&kind),
                dot_escape(&value_type(g.value(*v)))
            );
            producer[v.index()] = Some(id(*v));
        }
    }
    // group nodes by module path
    let mut clusters: Vec<(String, Vec<usize>)> = Vec::new();
    for (i, n) in g.nodes.iter().enumerate() {
        let path = n.meta.module_path().unwrap_or("").to_string();
        match clusters.iter_mut().find(|(p, _)| *p == path) {
            Some((_, v)) => v.push(i),
            None => clusters.push((path, vec![i])),
        }
    }
    for (ci, (path, nodes)) in clusters.iter().enumerate() {
        if !path.is_empty() {
            let _ = writeln!(
                out,
                "  subgraph cluster_{prefix}_m{ci} {{\n  label=\"{}\"; style=dashed;",
                dot_escape(path)
            );
        }
        for &i in nodes {
            let n = &g.nodes[i];
            let types: Vec<String> = n.outputs.iter().map(|o| printer.out_type(o)).collect();
            let _ = writeln!(
                out,
                "  {prefix}_n{i} [label=\"{}\\n{}\\n{}\"];",
                dot_escape(&n.name),
                dot_escape(&n.target.to_string()),
                dot_escape(&types.join(", "))
            );
        }
        if !path.is_empty() {
            out.push_str("  }\n");
        }
    }
    for (i, n) in g.nodes.iter().enumerate() {
        refs.clear();
        n.inputs.iter().for_each(|a| a.arg.value_refs(&mut refs));
        for v in &refs {
            if let Some(src) = &producer[v.index()] {
                let _ = writeln!(out, "  {src} -> {prefix}_n{i};");
            }
        }
        for a in &n.inputs {
            if let Argument::Graph(sub) = &a.arg {
                let sub_prefix = format!("{prefix}_n{i}_{}", sub.name);
                let _ = writeln!(
                    out,
                    "  subgraph cluster_{sub_prefix} {{\n  label=\"@{}\"; style=rounded;",
                    dot_escape(&sub.name)
                );
                dot_graph(&sub.graph, &sub_prefix, out, None);
                out.push_str("  }\n");
                let _ = writeln!(out, "  {sub_prefix}_out -> {prefix}_n{i} [style=dotted];");
            }
        }
        refs.clear();
        n.outputs.iter().for_each(|a| a.value_refs(&mut refs));
        for v in &refs {
            producer[v.index()] = Some(format!("{prefix}_n{i}"));
        }
    }
    let _ = writeln!(out, "  {prefix}_out [shape=ellipse, label=\"return\"];");
    refs.clear();
    g.outputs.iter().for_each(|a| a.value_refs(&mut refs));
    for v in &refs {
        if let Some(src) = &producer[v.index()] {
            let _ = writeln!(out, "  {src} -> {prefix}_out;");
        }
    }
}

/// Each top-level node's listing (subgraphs included in its text), by node
/// name, for structural diffs.
pub fn node_listings(p: &Program) -> Vec<(String, String)> {
    let printer = Printer { graph: &p.graph };
    p.graph
        .nodes
        .iter()
        .map(|n| {
            let mut s = String::new();
            printer.node(&mut s, "", n);
            (n.name.clone(), s.trim_end().to_string())
        })
        .collect()
}

/// The signature and range-constraint lines of a listing.
pub fn header_lines(p: &Program) -> Vec<String> {
    let full = listing(p);
    full.lines()
        .skip(1)
        .take_while(|l| !l.starts_with("graph("))
        .map(String::from)
        .collect()
}
