//! Generates, into `OUT_DIR`:
//! - the wire-format code from `proto/pt2ir.proto` with the pure-Rust
//!   protobuf parser, so building needs no `protoc` binary;
//! - `op_names.rs`: a constant for every op identity torch's schema table
//!   (`data/op_schemas.txt`), torchvision's op list and the higher-order op
//!   list name (`aten.add.Tensor` is `aten::ADD_TENSOR`), which
//!   `ir::op` includes. Code names ops by these constants, never by a
//!   string literal, so a misspelt op is a compile error.
use std::collections::BTreeMap;
use std::fmt::Write as _;

fn main() {
    println!("cargo:rerun-if-changed=proto/pt2ir.proto");
    protobuf_codegen::Codegen::new()
        .pure()
        .include("proto")
        .input("proto/pt2ir.proto")
        .cargo_out_dir("proto")
        .run_from_script();
    op_names();
}

/// The constant's name: the op's name in capitals, then its overload's
/// unless it is `default` (`add.Tensor` -> `ADD_TENSOR`, `relu_.default`
/// -> `RELU_`). TorchScript's type builtins, whose names start with a
/// capital (`aten::Size`, `aten::Int`), keep their names (`aten::Size`).
fn const_name(name: &str, overload: &str) -> String {
    let mut s = if name.starts_with(|c: char| c.is_ascii_uppercase()) {
        name.to_string()
    } else {
        name.to_ascii_uppercase()
    };
    if overload != "default" && !overload.is_empty() {
        s.push('_');
        s.push_str(&overload.to_ascii_uppercase());
    }
    s
}

fn op_names() {
    let data = |f: &str| {
        println!("cargo:rerun-if-changed=data/{f}");
        std::fs::read_to_string(format!("data/{f}")).expect("lib/data file")
    };
    // namespace -> constant -> identity
    let mut ns: BTreeMap<String, BTreeMap<String, String>> = BTreeMap::new();
    let mut clashes = Vec::new();
    let mut add = |namespace: &str, name: &str, overload: &str| {
        let ident = if overload.is_empty() {
            format!("{namespace}.{name}")
        } else {
            format!("{namespace}.{name}.{overload}")
        };
        let c = const_name(name, overload);
        let table = ns.entry(namespace.to_string()).or_default();
        match table.get(&c) {
            Some(other) if *other != ident => clashes.push(format!("{ident} and {other} -> {c}")),
            _ => {
                table.insert(c, ident);
            }
        }
    };
    for line in data("op_schemas.txt").lines() {
        if line.starts_with('#') || line.trim().is_empty() {
            continue;
        }
        let head = line.split('(').next().unwrap_or("");
        let Some((namespace, rest)) = head.split_once("::") else {
            continue;
        };
        // `quantized::` is TorchScript's eager int8 library (its names and
        // overloads overlap: `add_out` and `add.out`); torch.export's int8
        // graphs use `quantized_decomposed`.
        if namespace == "quantized" {
            continue;
        }
        let (name, overload) = rest.split_once('.').unwrap_or((rest, "default"));
        add(namespace, name, overload);
    }
    for line in data("torchvision_ops.txt").lines() {
        if line.starts_with('#') || line.trim().is_empty() {
            continue;
        }
        let mut parts = line.trim().splitn(3, '.');
        if let (Some(namespace), Some(name), Some(overload)) =
            (parts.next(), parts.next(), parts.next())
        {
            add(namespace, name, overload);
        }
    }
    for line in data("higher_order_ops.txt").lines() {
        if line.starts_with('#') || line.trim().is_empty() {
            continue;
        }
        if let Some(name) = line.split_whitespace().next() {
            add("higher_order", name, "");
        }
    }
    assert!(clashes.is_empty(), "op constant names clash: {clashes:?}");
    let mut out = String::new();
    for (namespace, consts) in &ns {
        writeln!(out, "/// `{namespace}` ops.").unwrap();
        writeln!(
            out,
            "#[allow(non_upper_case_globals)]\npub mod {namespace} {{"
        )
        .unwrap();
        for (c, ident) in consts {
            writeln!(out, "    pub const {c}: &str = \"{ident}\";").unwrap();
        }
        writeln!(out, "}}").unwrap();
    }
    let path = std::path::Path::new(&std::env::var("OUT_DIR").unwrap()).join("op_names.rs");
    std::fs::write(path, out).expect("write op_names.rs");
}
