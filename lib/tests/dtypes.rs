//! The dtype conformance suite: every core ATen overload crossed with
//! every dtype torch supports for it, on plain and extremal values (NaN,
//! ±inf, -0.0, subnormals, integer min/max, values around 2^53) and empty
//! tensors, recorded from torch by `recipes/fixtures/dtype_cases.py` (golden/dtypes).
//!
//! Each case runs in the executor as exported and, lowered by the
//! decomposition table to core ATen, again; its outputs are compared with
//! torch's under the tolerance policy below. A case either agrees, or is
//! refused with a message (an op or a dtype the executor does not take):
//! a wrong number that exits 0 fails this test. The per-op, per-dtype
//! results are a golden report (golden/dtypes/report.md, rendered into
//! docs/coverage.md): a case that changes either way changes the report;
//! `UPDATE_GOLDEN=1 cargo test --test dtypes` rewrites it after review.
//!
//! Tolerances are torch's own (`torch.testing.assert_close` defaults):
//! integers and bools exactly; float32 and complex64 within 1e-5 +
//! 1.3e-6·|torch|; float64 and complex128 1e-7 + 1e-7·|torch|; float16
//! 1e-5 + 1e-3·|torch|; bfloat16 1e-5 + 1.6e-2·|torch|; NaN only where
//! torch has NaN, an infinity only where torch has the same one (but for
//! complex products that overflow, where torch itself gives either:
//! `KERNEL_DEPENDENT_OVERFLOW`).

#![cfg(feature = "exec")]

mod common;

use std::collections::BTreeMap;

use common::*;
use pt2kit::decompose::{self, Policy};
use pt2kit::exec::{self, DeviceKind, Executor};
use pt2kit::import::pt2::{read_pt2, ImportOptions};
use pt2kit::ir::{Dtype, Program};
use pt2kit::tensorfile::{read_npz, HostTensor};

/// torch.testing's default (atol, rtol) for a dtype.
fn tolerance(d: Dtype) -> (f64, f64) {
    match d {
        Dtype::Float16 => (1e-5, 1e-3),
        Dtype::BFloat16 => (1e-5, 1.6e-2),
        Dtype::Float32 | Dtype::Complex64 => (1e-5, 1.3e-6),
        Dtype::Float64 | Dtype::Complex128 => (1e-7, 1e-7),
        _ => (0.0, 0.0),
    }
}

/// Complex products, where torch is not one function of its inputs: a
/// part whose partial products overflow is NaN from ATen's vectorized
/// kernel (`inf - inf`) and an infinity from its scalar tail (contracted
/// into an FMA), so the same inputs give `(-inf, NaN)` at one position of
/// a tensor and `(-inf, -inf)` at another (`torch.full((5,), a) *
/// torch.full((5,), b)` gives four of one and one of the other). There,
/// and only between NaN and an infinity, a non-finite part agrees with a
/// non-finite part; everything else is held as for any op.
const KERNEL_DEPENDENT_OVERFLOW: &[&str] = &["aten.mul.Tensor", "aten.mul.Scalar"];

/// Ours against torch's: `Err` says where they part. `overflow_either`:
/// NaN and an infinity agree in a complex part
/// ([`KERNEL_DEPENDENT_OVERFLOW`]).
fn agrees(ours: &HostTensor, torch: &HostTensor, overflow_either: bool) -> Result<(), String> {
    if ours.shape != torch.shape {
        return Err(format!("shape {:?}, torch {:?}", ours.shape, torch.shape));
    }
    let int = |d: Dtype| !d.is_floating() && !d.is_complex();
    if int(ours.dtype) != int(torch.dtype) || ours.dtype.is_complex() != torch.dtype.is_complex() {
        return Err(format!(
            "dtype {}, torch {}",
            ours.dtype.torch_name(),
            torch.dtype.torch_name()
        ));
    }
    if int(torch.dtype) {
        return match (0..torch.numel()).find(|&i| ours.int_at(i) != torch.int_at(i)) {
            Some(i) => Err(format!(
                "element {i} is {}, torch {}",
                ours.int_at(i),
                torch.int_at(i)
            )),
            None => Ok(()),
        };
    }
    let (atol, rtol) = tolerance(torch.dtype);
    let (a, b) = (ours.complex_parts(), torch.complex_parts());
    for (i, (x, y)) in a.iter().zip(&b).enumerate() {
        let either = overflow_either && torch.dtype.is_complex();
        let ok = if either && (x.is_nan() != y.is_nan()) && !x.is_finite() && !y.is_finite() {
            true
        } else if x.is_nan() || y.is_nan() {
            x.is_nan() && y.is_nan()
        } else if x.is_infinite() || y.is_infinite() {
            x == y
        } else {
            (x - y).abs() <= atol + rtol * y.abs()
        };
        if !ok {
            return Err(format!("element {} is {x}, torch {y}", i / 2));
        }
    }
    Ok(())
}

/// Ops whose second output indexes the first input along `dim` (default
/// -1) where ties may be broken either way (torch's sort and topk are not
/// stable): an index agrees when it points at the value torch returned.
const INDEX_OUTPUTS: &[&str] = &[
    "aten.topk.default",
    "aten.sort.default",
    "aten.sort.stable",
    "aten.max.dim",
    "aten.min.dim",
    "aten.kthvalue.default",
    "aten.median.dim",
];

/// Whether `idx` (int64, dims of `values`) points, along `dim` of `input`,
/// at elements equal to `values` (NaN equal to NaN).
fn indices_point_at_values(
    input: &HostTensor,
    idx: &HostTensor,
    values: &HostTensor,
    dim: usize,
) -> bool {
    if idx.shape != values.shape || idx.shape.len() != input.shape.len() {
        return false;
    }
    let (a, v) = (input.complex_parts(), values.complex_parts());
    let rank = input.shape.len();
    let mut pos = vec![0usize; rank];
    for i in 0..idx.numel() {
        let mut rem = i;
        for d in (0..rank).rev() {
            pos[d] = rem % idx.shape[d];
            rem /= idx.shape[d];
        }
        let j = idx.int_at(i);
        if j < 0 || j as usize >= input.shape[dim] {
            return false;
        }
        pos[dim] = j as usize;
        let flat = pos.iter().zip(&input.shape).fold(0, |f, (p, s)| f * s + p);
        let (x, y) = ((a[2 * flat], a[2 * flat + 1]), (v[2 * i], v[2 * i + 1]));
        let same = |p: f64, q: f64| p == q || (p.is_nan() && q.is_nan());
        if !same(x.0, y.0) || !same(x.1, y.1) {
            return false;
        }
    }
    true
}

/// How a case went.
enum Outcome {
    Agrees,
    Refused(String),
    Wrong(String),
}

fn first_line(e: &str) -> String {
    let s = e.replace(&format!("{}/", repo().display()), "");
    let line = s.lines().next().unwrap_or("").to_string();
    if line.len() > 100 {
        format!("{}...", &line[..100])
    } else {
        line
    }
}

/// The `dim` argument of `op`'s node in `program` (its default -1),
/// normalised against `rank`.
fn dim_of(program: &Program, op: &str, rank: usize) -> Option<usize> {
    let node = program
        .graph
        .nodes
        .iter()
        .find(|n| n.target.to_string() == op)?;
    let d = match node.arg("dim") {
        Some(pt2kit::ir::Argument::Int(d)) => *d,
        _ => -1,
    };
    pt2kit::ir::normalize_dim(d, rank.max(1)).ok()
}

/// Runs `program` on the case's inputs against torch's outputs.
fn run(program: &Program, data: &[(String, HostTensor)], op: &str) -> Outcome {
    let inputs: Vec<(String, HostTensor)> = data
        .iter()
        .filter_map(|(k, t)| k.strip_prefix("in:").map(|n| (n.to_string(), t.clone())))
        .collect();
    let expected: Vec<&HostTensor> = data
        .iter()
        .filter(|(k, _)| k.starts_with("out:"))
        .map(|(_, t)| t)
        .collect();
    let executor = match Executor::new(program, exec::device(DeviceKind::Cpu).unwrap()) {
        Ok(e) => e,
        Err(e) => return Outcome::Refused(first_line(&e.to_string())),
    };
    let outs = match executor.run(&inputs) {
        Ok(o) => o,
        Err(e) => return Outcome::Refused(first_line(&e.to_string())),
    };
    if outs.len() != expected.len() {
        return Outcome::Wrong(format!(
            "{} outputs, torch has {}",
            outs.len(),
            expected.len()
        ));
    }
    for (i, ((_, a), b)) in outs.iter().zip(&expected).enumerate() {
        if let Err(e) = agrees(a, b, KERNEL_DEPENDENT_OVERFLOW.contains(&op)) {
            // an index of a tie: right when it points at torch's value
            let tie = i == 1
                && INDEX_OUTPUTS.contains(&op)
                && agrees(&outs[0].1, expected[0], false).is_ok()
                && inputs
                    .first()
                    .zip(dim_of(
                        program,
                        op,
                        inputs.first().map_or(0, |(_, t)| t.shape.len()),
                    ))
                    .is_some_and(|((_, x), d)| {
                        x.shape.is_empty() || indices_point_at_values(x, a, expected[0], d)
                    });
            if !tie {
                return Outcome::Wrong(format!("output {i}: {e}"));
            }
        }
    }
    Outcome::Agrees
}

/// The program lowered to core ATen, as `ir-decompose` writes it.
fn lowered(program: &Program) -> Result<Program, String> {
    let mut p = program.clone();
    decompose::lower(&mut p, &Policy::default()).map_err(|e| first_line(&e.to_string()))?;
    Ok(p)
}

#[test]
fn every_dtype_agrees_with_torch_or_is_refused() {
    let dir = repo().join("golden/dtypes");
    let manifest: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("manifest.json")).unwrap()).unwrap();
    // op -> dtype -> (agree, cases, first refusal, wrong cases)
    type Cell = (usize, usize, Option<String>, Vec<String>);
    let mut table: BTreeMap<String, BTreeMap<String, Cell>> = BTreeMap::new();
    type Loaded = Option<(Program, Result<Program, String>)>;
    let mut programs: BTreeMap<String, Loaded> = BTreeMap::new();
    let mut wrong = Vec::new();
    let cases = manifest["cases"].as_array().unwrap();
    for case in cases {
        let name = case["case"].as_str().unwrap();
        let (op, dtype) = (
            case["op"].as_str().unwrap(),
            case["dtype"].as_str().unwrap(),
        );
        let pt2 = case["pt2"].as_str().unwrap().to_string();
        let loaded = programs.entry(pt2.clone()).or_insert_with(|| {
            read_pt2(&dir.join(&pt2), &ImportOptions::default())
                .ok()
                .map(|p| {
                    let l = lowered(&p);
                    (p, l)
                })
        });
        let data = read_npz(&dir.join(case["npz"].as_str().unwrap())).unwrap();
        let cell = table
            .entry(op.to_string())
            .or_default()
            .entry(dtype.to_string())
            .or_default();
        cell.1 += 1;
        let Some((program, low)) = loaded else {
            cell.2
                .get_or_insert_with(|| "the archive does not read".into());
            continue;
        };
        // as exported, then lowered: both must agree or refuse
        let mut outcomes = vec![("as exported", run(program, &data, op))];
        match low {
            Ok(l) => outcomes.push(("lowered", run(l, &data, op))),
            Err(e) => outcomes.push(("lowered", Outcome::Refused(format!("ir-decompose: {e}")))),
        }
        let mut all = true;
        for (how, o) in outcomes {
            match o {
                Outcome::Agrees => {}
                Outcome::Refused(why) => {
                    all = false;
                    cell.2.get_or_insert(format!("{how}: {why}"));
                }
                Outcome::Wrong(why) => {
                    all = false;
                    let line = format!("{name} ({how}): {why}");
                    cell.3.push(line.clone());
                    wrong.push(line);
                }
            }
        }
        if all {
            cell.0 += 1;
        }
    }
    // the report: per op and dtype, cases agreeing / cases, and why not
    let dtypes: Vec<String> = manifest["dtypes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d.as_str().unwrap().to_string())
        .collect();
    let short = |d: &str| {
        (0..64u32)
            .filter_map(Dtype::from_code)
            .find(|t| t.torch_name() == d || t.torch_name() == format!("torch.{d}"))
            .map_or(d.to_string(), |t| t.short_name().to_string())
    };
    let (mut agree, mut refused_cells, mut total) = (0, 0, 0);
    let mut rows = String::new();
    let mut reasons: BTreeMap<String, usize> = BTreeMap::new();
    for (op, cells) in &table {
        rows.push_str(&format!("| {op} |"));
        for d in &dtypes {
            match cells.get(d) {
                None => rows.push_str(" |"),
                Some((a, n, why, bad)) => {
                    total += n;
                    agree += a;
                    let mark = if !bad.is_empty() {
                        "WRONG".to_string()
                    } else if a == n {
                        "ok".to_string()
                    } else {
                        refused_cells += 1;
                        if let Some(w) = why {
                            // one row for both complex dtypes' refusal
                            let w = w
                                .replace("(c128)", "(complex)")
                                .replace("(c64)", "(complex)");
                            *reasons.entry(w).or_default() += 1;
                        }
                        format!("{a}/{n}")
                    };
                    rows.push_str(&format!(" {mark} |"));
                }
            }
        }
        rows.push('\n');
    }
    let mut report = String::new();
    report
        .push_str("# dtype conformance (generated by lib/tests/dtypes.rs from golden/dtypes)\n\n");
    report.push_str(&format!(
        "cases: {agree} of {total} agree with torch as exported and lowered; {} wrong; (op, dtype) cells with a refusal: {refused_cells}\n\n",
        wrong.len()
    ));
    report.push_str("`ok`: every case agrees, as exported and after ir-decompose; `a/n`: a of n cases agree, the rest are refused with a message (reasons below); `WRONG`: a number differs from torch's (none may).\n\n");
    report.push_str(&format!(
        "| op | {} |\n|---|{}\n",
        dtypes
            .iter()
            .map(|d| short(d))
            .collect::<Vec<_>>()
            .join(" | "),
        "---|".repeat(dtypes.len())
    ));
    report.push_str(&rows);
    report.push_str("\n## Refusals, by first reason (cells)\n\n| reason | cells |\n|---|---|\n");
    for (why, n) in &reasons {
        report.push_str(&format!("| {} | {n} |\n", why.replace('|', "\\|")));
    }
    let golden = check_golden("golden/dtypes/report.md", &report);
    assert!(
        wrong.is_empty(),
        "{} cases give a number torch does not:\n{}",
        wrong.len(),
        wrong.join("\n")
    );
    if let Some(mismatch) = golden {
        panic!("{mismatch}\n(the dtype results changed: review and run UPDATE_GOLDEN=1 cargo test --test dtypes)");
    }
}
