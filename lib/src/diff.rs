//! Comparisons for regression tests: tensors against tensors (per-tensor
//! errors under tolerances) and programs against programs (nodes added,
//! removed or changed; weights changed). Reports are deterministic text.

use std::collections::BTreeMap;
use std::fmt::Write;

use crate::ir::Program;
use crate::tensorfile::HostTensor;

#[derive(Clone, Copy, Debug)]
pub struct Tolerance {
    pub atol: f64,
    pub rtol: f64,
}

/// One tensor pair's comparison.
pub struct TensorReport {
    pub name: String,
    pub line: String,
    pub ok: bool,
}

fn unravel(mut flat: usize, shape: &[usize]) -> Vec<usize> {
    let mut idx = vec![0; shape.len()];
    for d in (0..shape.len()).rev() {
        let n = shape[d].max(1);
        idx[d] = flat % n;
        flat /= n;
    }
    idx
}

/// The values of a tensor to compare: integers exactly, floats as
/// `f64`, complex numbers as (real, imaginary) pairs.
enum Values {
    Ints(Vec<i64>),
    Floats(Vec<(f64, f64)>),
}

impl Values {
    fn of(t: &HostTensor) -> Values {
        if crate::promote::category(t.dtype) <= 1 {
            return Values::Ints((0..t.numel()).map(|i| t.int_at(i)).collect());
        }
        if t.dtype.is_complex() {
            let parts = t.complex_parts();
            return Values::Floats(parts.chunks_exact(2).map(|c| (c[0], c[1])).collect());
        }
        Values::Floats(t.to_f64().into_iter().map(|v| (v, 0.0)).collect())
    }

    fn len(&self) -> usize {
        match self {
            Values::Ints(v) => v.len(),
            Values::Floats(v) => v.len(),
        }
    }

    fn show(&self, i: usize, complex: bool) -> String {
        match self {
            Values::Ints(v) => v[i].to_string(),
            Values::Floats(v) if complex => format!("{}{:+}j", v[i].0, v[i].1),
            Values::Floats(v) => v[i].0.to_string(),
        }
    }
}

/// Compares two tensors: shape, dtype, max abs/rel error, mismatches
/// (|a - b| > atol + rtol * |b|, NaN only equal to NaN), worst index.
/// Integers compare exactly (every bit of an int64, not through a
/// float); complex values by the modulus of their difference; a value
/// NaN on one side only is a mismatch that makes the max abs error NaN
/// and is counted on its own.
pub fn compare_tensor(name: &str, a: &HostTensor, b: &HostTensor, tol: Tolerance) -> TensorReport {
    if a.shape != b.shape {
        return TensorReport {
            name: name.into(),
            line: format!("{name}: shape {:?} vs {:?}", a.shape, b.shape),
            ok: false,
        };
    }
    let complex = a.dtype.is_complex() || b.dtype.is_complex();
    let (x, y) = (Values::of(a), Values::of(b));
    let (mut max_abs, mut max_rel, mut worst, mut mismatches, mut nans) =
        (0f64, 0f64, None, 0usize, 0usize);
    let mut worst_excess = f64::MIN;
    let n = x.len().min(y.len());
    for i in 0..n {
        // (difference, |b|, NaN on one side only, exactly equal)
        let (d, scale, nan_apart, equal) = match (&x, &y) {
            (Values::Ints(p), Values::Ints(q)) => {
                let d = (p[i] as i128 - q[i] as i128).unsigned_abs();
                (d as f64, (q[i] as f64).abs(), false, d == 0)
            }
            _ => {
                let at = |v: &Values| match v {
                    Values::Ints(v) => (v[i] as f64, 0.0),
                    Values::Floats(v) => v[i],
                };
                let ((pr, pi), (qr, qi)) = (at(&x), at(&y));
                let (pn, qn) = (pr.is_nan() || pi.is_nan(), qr.is_nan() || qi.is_nan());
                if pn || qn {
                    (0.0, 0.0, pn != qn, pn == qn)
                } else if pr == qr && pi == qi {
                    (0.0, 0.0, false, true)
                } else {
                    ((pr - qr).hypot(pi - qi), qr.hypot(qi), false, false)
                }
            }
        };
        if equal {
            continue;
        }
        let bad = if nan_apart {
            nans += 1;
            true
        } else if d.is_infinite() || d.is_nan() {
            // unequal with an infinity: no tolerance covers it
            worst_excess = f64::INFINITY;
            worst = Some(i);
            max_abs = f64::INFINITY;
            true
        } else {
            max_abs = max_abs.max(d);
            if scale != 0.0 {
                max_rel = max_rel.max(d / scale);
            }
            let excess = d - (tol.atol + tol.rtol * scale);
            if excess > worst_excess {
                worst_excess = excess;
                worst = Some(i);
            }
            excess > 0.0
        };
        if bad {
            mismatches += 1;
            if worst.is_none() || nan_apart {
                worst = Some(i);
            }
        }
    }
    if nans > 0 {
        max_abs = f64::NAN;
        max_rel = f64::NAN;
    }
    // Dtypes of one kind (float16 against float32, say) compare by value;
    // of different kinds (integer against floating) they differ outright.
    let kinds_differ = crate::promote::category(a.dtype) != crate::promote::category(b.dtype);
    let dtype_note = if a.dtype != b.dtype {
        format!(
            " (dtypes {} vs {}{})",
            a.dtype.torch_name(),
            b.dtype.torch_name(),
            if kinds_differ {
                ": different kinds"
            } else {
                ""
            }
        )
    } else {
        String::new()
    };
    let mut line = format!(
        "{name}: {}{:?}{dtype_note} max abs {max_abs:.3e} max rel {max_rel:.3e} mismatches {mismatches}/{}",
        a.dtype.short_name(),
        a.shape,
        x.len()
    );
    if nans > 0 {
        let _ = write!(line, " ({nans} NaN on one side only)");
    }
    if let (Some(i), true) = (worst, mismatches > 0) {
        let _ = write!(
            line,
            " worst at {:?}: {} vs {}",
            unravel(i, &a.shape),
            x.show(i, complex),
            y.show(i, complex)
        );
    }
    TensorReport {
        name: name.into(),
        line,
        ok: mismatches == 0 && !kinds_differ,
    }
}

/// Compares two tensor sets, by name or by position.
pub fn compare_tensors(
    a: &[(String, HostTensor)],
    b: &[(String, HostTensor)],
    tol: Tolerance,
    by_position: bool,
) -> (Vec<String>, bool) {
    let mut lines = Vec::new();
    let mut ok = true;
    if by_position {
        if a.len() != b.len() {
            lines.push(format!("{} tensors vs {}", a.len(), b.len()));
            ok = false;
        }
        for ((na, ta), (nb, tb)) in a.iter().zip(b) {
            let r = compare_tensor(&format!("{na} ~ {nb}"), ta, tb, tol);
            ok &= r.ok;
            lines.push(r.line);
        }
    } else {
        let bm: BTreeMap<&str, &HostTensor> = b.iter().map(|(n, t)| (n.as_str(), t)).collect();
        for (n, t) in a {
            match bm.get(n.as_str()) {
                Some(tb) => {
                    let r = compare_tensor(n, t, tb, tol);
                    ok &= r.ok;
                    lines.push(r.line);
                }
                None => {
                    ok = false;
                    lines.push(format!("{n}: only in the first file"));
                }
            }
        }
        for (n, _) in b {
            if !a.iter().any(|(m, _)| m == n) {
                ok = false;
                lines.push(format!("{n}: only in the second file"));
            }
        }
    }
    (lines, ok)
}

/// The first tensor, in the first file's order, that differs from the
/// second file's tensor of the same name: with two dumps of intermediate
/// values in execution order (`ir-run --intermediates`, ONNX Runtime on
/// `ir2onnx --intermediates`), the first node where two back ends part.
/// Names on one side only are counted, not compared (each back end may
/// compute values the other does not). Returns the report and whether
/// every shared tensor agrees; it fails when no name is shared.
pub fn first_divergence(
    a: &[(String, HostTensor)],
    b: &[(String, HostTensor)],
    tol: Tolerance,
) -> (Vec<String>, bool) {
    let bm: BTreeMap<&str, &HostTensor> = b.iter().map(|(n, t)| (n.as_str(), t)).collect();
    let shared = a
        .iter()
        .filter(|(n, _)| bm.contains_key(n.as_str()))
        .count();
    let only = |x: &[(String, HostTensor)], y: &[(String, HostTensor)]| {
        let names: std::collections::HashSet<&str> = y.iter().map(|(n, _)| n.as_str()).collect();
        x.iter()
            .filter(|(n, _)| !names.contains(n.as_str()))
            .count()
    };
    let counts = format!(
        "{shared} tensors in both files ({} only in the first, {} only in the second)",
        only(a, b),
        only(b, a)
    );
    if shared == 0 {
        return (vec![format!("{counts}: nothing to compare")], false);
    }
    let mut agreed = 0;
    for (n, t) in a {
        let Some(tb) = bm.get(n.as_str()) else {
            continue;
        };
        let r = compare_tensor(n, t, tb, tol);
        if !r.ok {
            return (
                vec![
                    format!("first to differ, after {agreed} that agree: {}", r.line),
                    counts,
                ],
                false,
            );
        }
        agreed += 1;
    }
    (vec![format!("all agree: {counts}")], true)
}

/// A structural diff of two programs: `-` removed, `+` added, `~` changed.
pub fn diff_programs(a: &Program, b: &Program) -> Vec<String> {
    let mut out = Vec::new();
    let (ha, hb) = (crate::text::header_lines(a), crate::text::header_lines(b));
    for l in ha.iter().filter(|l| !hb.contains(l)) {
        out.push(format!("- {}", l.trim()));
    }
    for l in hb.iter().filter(|l| !ha.contains(l)) {
        out.push(format!("+ {}", l.trim()));
    }
    let (na, nb) = (crate::text::node_listings(a), crate::text::node_listings(b));
    let mb: BTreeMap<&str, &str> = nb.iter().map(|(n, l)| (n.as_str(), l.as_str())).collect();
    let ma: BTreeMap<&str, &str> = na.iter().map(|(n, l)| (n.as_str(), l.as_str())).collect();
    for (name, line) in &na {
        match mb.get(name.as_str()) {
            None => out.push(format!("- node {name}: {line}")),
            Some(other) if other != line => {
                out.push(format!("~ node {name}:\n    {line}\n    {other}"));
            }
            _ => {}
        }
    }
    for (name, line) in &nb {
        if !ma.contains_key(name.as_str()) {
            out.push(format!("+ node {name}: {line}"));
        }
    }
    let weight = |p: &Program| -> BTreeMap<String, String> {
        p.weights
            .iter()
            .map(|w| {
                let crc = crc32fast::hash(&p.weight_bytes(w));
                (
                    w.name.clone(),
                    format!("{} crc32={crc:08x}", crate::text::tensor_type(&w.meta)),
                )
            })
            .collect()
    };
    let (wa, wb) = (weight(a), weight(b));
    for (n, d) in &wa {
        match wb.get(n) {
            None => out.push(format!("- weight {n}: {d}")),
            Some(e) if e != d => out.push(format!("~ weight {n}: {d} -> {e}")),
            _ => {}
        }
    }
    for (n, d) in &wb {
        if !wa.contains_key(n) {
            out.push(format!("+ weight {n}: {d}"));
        }
    }
    out
}
