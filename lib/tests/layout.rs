//! The source layout the architecture promises: every op's code sits in
//! the file of its family (`lib/data/op_families.txt`) in each of the three
//! tables, no source file outgrows one reader's attention, and no two
//! modules import each other.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use pt2kit::schema::family_of;

fn check_families(table: &str, rows: impl Iterator<Item = (&'static str, &'static str)>) {
    let mut wrong = Vec::new();
    let mut count = 0;
    for (family, op) in rows {
        count += 1;
        match family_of(op) {
            Some(f) if f == family => {}
            Some(f) => wrong.push(format!("{op}: in {family}.rs, its family is {f}")),
            None => wrong.push(format!("{op}: no family in lib/data/op_families.txt")),
        }
    }
    assert!(count > 100, "{table}: only {count} rows");
    assert!(wrong.is_empty(), "{table}:\n{}", wrong.join("\n"));
}

#[test]
fn every_row_sits_in_its_family_in_every_table() {
    check_families(
        "exec/ops",
        pt2kit::exec::ops::rows().map(|(family, op, _)| (family, op)),
    );
    check_families(
        "decompose/rules",
        pt2kit::decompose::rules::rules_by_family().map(|(family, r)| (family, r.source)),
    );
    check_families(
        "export/onnx/ops",
        pt2kit::export::onnx::op_families().into_iter(),
    );
}

fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            sources(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

#[test]
fn no_source_file_over_1500_lines() {
    let mut files = Vec::new();
    for dir in ["lib/src", "bins/src"] {
        sources(&repo().join(dir), &mut files);
    }
    let big: Vec<String> = files
        .iter()
        .filter_map(|f| {
            let n = std::fs::read_to_string(f).unwrap().lines().count();
            (n > 1500).then(|| format!("{} ({n} lines)", f.display()))
        })
        .collect();
    assert!(big.is_empty(), "split these by family or aspect: {big:?}");
}

/// Every `PT2KIT_*` variable the code names is declared once, with its
/// docs, in `pt2kit::knobs::KNOBS` (the man pages list them from there),
/// and only `knobs.rs` reads the environment for one.
#[test]
fn every_knob_is_declared_once_and_read_in_one_place() {
    let mut files = Vec::new();
    for dir in ["lib/src", "bins/src"] {
        sources(&repo().join(dir), &mut files);
    }
    let mut undeclared = BTreeSet::new();
    let mut readers = BTreeSet::new();
    for f in &files {
        let text = std::fs::read_to_string(f).unwrap();
        let mut rest = text.as_str();
        while let Some(i) = rest.find("PT2KIT_") {
            let name: String = rest[i..]
                .chars()
                .take_while(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || *c == '_')
                .collect();
            // (`PT2KIT_*` in prose names the family)
            if name != "PT2KIT_" && !pt2kit::knobs::declared(&name) {
                undeclared.insert(format!("{name} ({})", f.display()));
            }
            rest = &rest[i + name.len()..];
        }
        if !f.ends_with("knobs.rs")
            && (text.contains("env::var_os(\"PT2KIT_") || text.contains("env::var(\"PT2KIT_"))
        {
            readers.insert(f.display().to_string());
        }
    }
    assert!(undeclared.is_empty(), "not in knobs::KNOBS: {undeclared:?}");
    assert!(
        readers.is_empty(),
        "read outside knobs.rs (use knobs::is_set / value): {readers:?}"
    );
}

/// A module's path (`["export", "onnx", "builder"]`) from its file.
fn module_of(root: &Path, file: &Path) -> Vec<String> {
    let rel = file.strip_prefix(root).unwrap().with_extension("");
    let mut parts: Vec<String> = rel
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    if matches!(parts.last().map(String::as_str), Some("mod" | "lib")) {
        parts.pop();
    }
    parts
}

/// Code with comments and string contents left out.
fn code_only(src: &str) -> String {
    let mut out = String::with_capacity(src.len());
    let mut chars = src.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '/' if chars.peek() == Some(&'/') => {
                for c in chars.by_ref() {
                    if c == '\n' {
                        out.push('\n');
                        break;
                    }
                }
            }
            '"' => {
                while let Some(c) = chars.next() {
                    match c {
                        '\\' => {
                            chars.next();
                        }
                        '"' => break,
                        _ => {}
                    }
                }
                out.push_str("\"\"");
            }
            c => out.push(c),
        }
    }
    out
}

/// The modules a file names through `crate::` and `super::` paths.
fn imports(module: &[String], code: &str, known: &BTreeSet<Vec<String>>) -> BTreeSet<Vec<String>> {
    let mut found = BTreeSet::new();
    for (prefix, base) in [
        ("crate::", Vec::new()),
        ("super::", {
            let mut m = module.to_vec();
            m.pop();
            m
        }),
    ] {
        let mut rest = code;
        while let Some(at) = rest.find(prefix) {
            let before = rest[..at].chars().last();
            rest = &rest[at + prefix.len()..];
            if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':') {
                continue;
            }
            let mut path = base.clone();
            // crate::a::b::{c, d}: the longest known module prefix
            for seg in rest.split("::") {
                let ident: String = seg
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_')
                    .collect();
                if ident.is_empty() || ident.len() != seg.len() && !seg.starts_with(&ident) {
                    break;
                }
                path.push(ident.clone());
                if !known.contains(&path) || ident.len() != seg.len() {
                    if !known.contains(&path) {
                        path.pop();
                    }
                    break;
                }
            }
            found.insert(path);
        }
    }
    found
}

#[test]
fn no_import_cycles_between_modules() {
    let root = repo().join("lib/src");
    let mut files = Vec::new();
    sources(&root, &mut files);
    let modules: BTreeMap<Vec<String>, String> = files
        .iter()
        .map(|f| {
            (
                module_of(&root, f),
                code_only(&std::fs::read_to_string(f).unwrap()),
            )
        })
        .collect();
    let known: BTreeSet<Vec<String>> = modules.keys().cloned().collect();
    // Edges between modules where neither contains the other (a parent
    // and its children are one unit).
    let nested = |a: &[String], b: &[String]| a.starts_with(b) || b.starts_with(a);
    let mut edges: BTreeMap<Vec<String>, BTreeSet<Vec<String>>> = BTreeMap::new();
    for (module, code) in &modules {
        for target in imports(module, code, &known) {
            if !nested(module, &target) {
                edges.entry(module.clone()).or_default().insert(target);
            }
        }
    }
    // A cycle: a module that reaches itself, or a module reaching one that
    // reaches back into it (through children: a -> b/c -> a/d).
    let reach = |from: &Vec<String>| {
        let mut seen = BTreeSet::new();
        let mut stack = vec![from.clone()];
        while let Some(m) = stack.pop() {
            for (src, targets) in &edges {
                if nested(src, &m) && src.starts_with(&m) || src == &m {
                    for t in targets {
                        if seen.insert(t.clone()) {
                            stack.push(t.clone());
                        }
                    }
                }
            }
        }
        seen
    };
    let mut cycles = Vec::new();
    for (module, targets) in &edges {
        for t in targets {
            if reach(t).iter().any(|r| nested(r, module) && !nested(r, t)) {
                cycles.push(format!("{} <-> {}", module.join("::"), t.join("::")));
            }
        }
    }
    assert!(cycles.is_empty(), "import cycles:\n{}", cycles.join("\n"));
}

/// The library's floors, lowest first: a top-level module imports only
/// from its own floor's modules' lower floors (never up, never sideways
/// into another module of its floor). A new top-level module gets a floor
/// here first.
const FLOORS: &[&[&str]] = &[
    &["error", "knobs"],
    &["kernels"],
    &["output", "progress"],
    &["blob"],
    &["zip"],
    &["ir"],
    &["schema", "promote", "text"],
    &["wire"],
    &["tensorfile"],
    &["import", "contract"],
    &["infer"],
    &["decompose"],
    &["export", "exec"],
    &["diff"],
    &["fuzzing", "cli"],
];

/// Every import between top-level modules runs downhill ([`FLOORS`]):
/// the readers and the IR below the passes, the passes below the back
/// ends, the tools' conventions (`cli`) on top.
#[test]
fn imports_run_downhill() {
    let root = repo().join("lib/src");
    let mut files = Vec::new();
    sources(&root, &mut files);
    let floor = |m: &str| FLOORS.iter().position(|f| f.contains(&m));
    let known: BTreeSet<Vec<String>> = files.iter().map(|f| module_of(&root, f)).collect();
    let mut uphill = BTreeSet::new();
    for f in &files {
        let module = module_of(&root, f);
        let Some(top) = module.first() else { continue };
        if top == "lib" {
            continue;
        }
        let from = floor(top).unwrap_or_else(|| panic!("module {top} has no floor in FLOORS"));
        let code = code_only(&std::fs::read_to_string(f).unwrap());
        for target in imports(&module, &code, &known) {
            let Some(t) = target.first() else { continue };
            if t == top {
                continue;
            }
            let to = floor(t).unwrap_or_else(|| panic!("module {t} has no floor in FLOORS"));
            if to >= from {
                uphill.insert(format!("{} -> {}", module.join("::"), target.join("::")));
            }
        }
    }
    assert!(
        uphill.is_empty(),
        "imports that do not run downhill:\n{}",
        uphill.into_iter().collect::<Vec<_>>().join("\n")
    );
}

/// Where `needle` occurs in `code` as the start of a token (not inside
/// a longer identifier: `grouped_mm_fallback` holds no `_mm_`).
fn has_token(code: &str, needle: &str) -> bool {
    code.match_indices(needle).any(|(at, _)| {
        !code[..at]
            .chars()
            .last()
            .is_some_and(|c| c.is_alphanumeric() || c == '_')
    })
}

/// The kernels are a layer (`lib/src/kernels/`): the instruction sets
/// are detected there once (`kernels::cpu()`), and intrinsics, ISA tests
/// and target features are written nowhere else; the executor's rows call
/// kernels by name.
#[test]
fn intrinsics_and_isa_checks_live_only_in_kernels() {
    let mut files = Vec::new();
    for dir in ["lib/src", "bins/src"] {
        sources(&repo().join(dir), &mut files);
    }
    let kernels = repo().join("lib/src/kernels");
    let needles = [
        "_mm512_",
        "_mm256_",
        "_mm_",
        "core::arch",
        "std::arch",
        "is_x86_feature_detected",
        "target_feature",
        "isa()",
        "avx512()",
    ];
    let mut found = Vec::new();
    let mut inside = 0;
    for f in &files {
        let code = code_only(&std::fs::read_to_string(f).unwrap());
        for n in needles {
            if has_token(&code, n) {
                if f.starts_with(&kernels) {
                    inside += 1;
                } else {
                    found.push(format!("{}: {n}", f.display()));
                }
            }
        }
    }
    // (the scan itself finds what it looks for where it is meant to be)
    assert!(
        inside > 10,
        "no intrinsics found under lib/src/kernels: the scan is broken"
    );
    assert!(
        found.is_empty(),
        "intrinsics or ISA checks outside lib/src/kernels (call a kernel, or ask kernels::cpu()):\n{}",
        found.join("\n")
    );
}

/// The kernels know nothing of candle, the IR or the executor: they take
/// slices, pointers, shapes and parameter structs.
#[test]
fn kernels_name_no_candle_ir_or_executor() {
    let mut files = Vec::new();
    sources(&repo().join("lib/src/kernels"), &mut files);
    assert!(
        files.len() > 10,
        "lib/src/kernels: only {} files",
        files.len()
    );
    let mut found = Vec::new();
    for f in &files {
        let code = code_only(&std::fs::read_to_string(f).unwrap());
        for n in [
            "candle_core",
            "candle::",
            "crate::ir",
            "crate::exec",
            "super::super::super",
        ] {
            if code.contains(n) {
                found.push(format!("{}: {n}", f.display()));
            }
        }
    }
    assert!(found.is_empty(), "{}", found.join("\n"));
}

/// Ops a back end can reach from `op`: the op itself when the back end has
/// a row for it, else what its decomposition emits, recursively. Returns
/// the ops reached that neither a row nor a rule handles.
fn unreachable_ops(
    op: &str,
    has_row: &dyn Fn(&str) -> bool,
    seen: &mut BTreeSet<String>,
) -> Vec<String> {
    if has_row(op) || !seen.insert(op.to_string()) {
        return Vec::new();
    }
    match pt2kit::decompose::rules::rule_for(op) {
        None => vec![op.to_string()],
        Some(rule) => rule
            .results
            .iter()
            .flat_map(|r| unreachable_ops(r, has_row, seen))
            .collect(),
    }
}

/// `ir-run` and `ir2onnx` refuse an op only when `ir-decompose` cannot
/// lower it either: every op a rule emits has a row in the back end, or is
/// lowered by another rule in turn, or is an op on complex values that the
/// lowering to real pairs rewrites (`decompose::complex`: the FFTs,
/// `_conj`, `view_as_real`, ...; neither back end has a complex dtype).
fn check_fallback_closure(backend: &str, has_row: &dyn Fn(&str) -> bool) {
    let complex = pt2kit::decompose::complex::supported_ops();
    let has_row = |op: &str| has_row(op) || complex.contains(&op);
    let mut missing = BTreeMap::new();
    for rule in pt2kit::decompose::rules::all_rules() {
        let lost = unreachable_ops(rule.source, &has_row, &mut BTreeSet::new());
        if !lost.is_empty() {
            missing.insert(rule.source, lost);
        }
    }
    let report: Vec<String> = missing
        .iter()
        .map(|(k, v)| format!("{k} -> {v:?}"))
        .collect();
    assert!(
        missing.is_empty(),
        "{backend}: {} ops the decomposition table lowers reach ops it cannot run:\n{}",
        missing.len(),
        report.join("\n")
    );
}

#[test]
fn the_executor_runs_every_op_the_decomposition_table_lowers() {
    let rows: BTreeSet<&str> = pt2kit::exec::ops::supported().collect();
    check_fallback_closure("ir-run", &|op| rows.contains(op));
}

#[test]
fn the_onnx_writer_converts_every_op_the_decomposition_table_lowers() {
    let rows: BTreeSet<&str> = pt2kit::export::onnx::supported_ops().into_iter().collect();
    let inplace_functional = |op: &str| {
        // in-place twins convert through their functional row
        let mut parts: Vec<&str> = op.split('.').collect();
        if parts.len() == 3 && parts[1].ends_with('_') && !parts[1].ends_with("__") {
            parts[1] = &parts[1][..parts[1].len() - 1];
            rows.contains(parts.join(".").as_str())
        } else {
            false
        }
    };
    check_fallback_closure("ir2onnx", &|op| rows.contains(op) || inplace_functional(op));
}

/// No path of one machine in what the repository ships: sources, docs,
/// recipes, scripts (golden metadata from torch's own export is data).
#[test]
fn no_machine_specific_paths() {
    let files = std::process::Command::new("git")
        .args(["ls-files"])
        .current_dir(repo())
        .output()
        .unwrap();
    let list = String::from_utf8(files.stdout).unwrap();
    let mut found = Vec::new();
    for f in list.lines() {
        let shipped = [".rs", ".py", ".sh", ".md", "Makefile", ".toml", ".1"]
            .iter()
            .any(|e| f.ends_with(e));
        // golden/ holds torch's own metadata; this file names the patterns
        if !shipped || f.starts_with("golden/") || f == "lib/tests/layout.rs" {
            continue;
        }
        let Ok(text) = std::fs::read_to_string(repo().join(f)) else {
            continue;
        };
        for (n, line) in text.lines().enumerate() {
            for p in ["/work/", "/root/", "/home/"] {
                if line.contains(p) {
                    found.push(format!("{f}:{}: {line}", n + 1));
                }
            }
        }
    }
    assert!(found.is_empty(), "{}", found.join("\n"));
}

/// String literals in code (comments left out), with their files.
fn string_literals(src: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut chars = src.chars().peekable();
    let mut prev = ' ';
    while let Some(c) = chars.next() {
        match c {
            '/' if chars.peek() == Some(&'/') => {
                for c in chars.by_ref() {
                    if c == '\n' {
                        break;
                    }
                }
            }
            // a char literal holding a quote ('"'), not a string
            '\'' if chars.peek() == Some(&'"') => {
                chars.next();
            }
            '"' if !(prev.is_alphanumeric() || prev == '#') => {
                let mut s = String::new();
                while let Some(c) = chars.next() {
                    match c {
                        '\\' => {
                            chars.next();
                        }
                        '"' => break,
                        c => s.push(c),
                    }
                }
                out.push(s);
            }
            _ => {}
        }
        prev = c;
    }
    out
}

/// Ops are named by their generated constants (`pt2kit::ir::op`:
/// `aten::ADD_TENSOR`), never by a string literal, so a misspelt op does
/// not compile.
#[test]
fn ops_are_named_by_constants() {
    const NAMESPACES: &[&str] = &[
        "aten",
        "prims",
        "_quantized",
        "quantized_decomposed",
        "torchvision",
        "higher_order",
    ];
    let is_op = |s: &str| {
        let parts: Vec<&str> = s.split('.').collect();
        (2..=3).contains(&parts.len())
            && NAMESPACES.contains(&parts[0])
            && parts[1..]
                .iter()
                .all(|p| !p.is_empty() && p.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'))
    };
    // the scan sees a literal, and not one in a comment
    let sample = "let a = \"aten.relu.default\"; // \"aten.add.Tensor\"\nlet b = '\"';";
    let seen: Vec<String> = string_literals(sample)
        .into_iter()
        .filter(|s| is_op(s))
        .collect();
    assert_eq!(seen, ["aten.relu.default"]);
    let mut files = Vec::new();
    sources(&repo().join("lib/src"), &mut files);
    let mut found = Vec::new();
    for f in &files {
        if f.ends_with("ir/op.rs") {
            continue;
        }
        let src = std::fs::read_to_string(f).unwrap();
        for s in string_literals(&src) {
            if is_op(&s) {
                found.push(format!("{}: \"{s}\"", f.display()));
            }
        }
    }
    assert!(
        found.is_empty(),
        "op literals (use pt2kit::ir::op's constants):\n{}",
        found.join("\n")
    );
    // and the constants are the identities they name
    assert_eq!(pt2kit::ir::op::aten::ADD_TENSOR, "aten.add.Tensor");
    assert_eq!(pt2kit::ir::op::aten::RELU_, "aten.relu_.default");
    assert_eq!(pt2kit::ir::op::higher_order::COND, "higher_order.cond");
}
