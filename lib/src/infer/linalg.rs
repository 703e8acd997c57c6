//! Linear algebra (mm, bmm, addmm, linear, matmul, distances, ...): the shape rules.

use crate::ir::op::aten;
use super::*;

fn need_rank(site: &Site, arg: &str, dims: &[Dim], rank: usize) -> Result<()> {
    if dims.len() != rank {
        return Err(site.fail(arg, format!("has rank {}, must be {rank}", dims.len())));
    }
    Ok(())
}

/// The inner dims of a product agree.
fn inner(site: &Site, a: &str, ka: Dim, b: &str, kb: Dim) -> Result<()> {
    if let (Some(x), Some(y)) = (ka, kb) {
        if x != y {
            return Err(site.fail(
                b,
                format!("has {y} where {a} has {x}: the product needs them equal"),
            ));
        }
    }
    Ok(())
}

fn mm(site: &Site) -> Result<Vec<Out>> {
    let (a, b) = (site.dims("self")?, site.dims("mat2")?);
    need_rank(site, "self", &a, 2)?;
    need_rank(site, "mat2", &b, 2)?;
    inner(site, "self", a[1], "mat2", b[0])?;
    Ok(vec![Out::dims(vec![a[0], b[1]])])
}

fn bmm(site: &Site) -> Result<Vec<Out>> {
    let (a, b) = (site.dims("self")?, site.dims("mat2")?);
    need_rank(site, "self", &a, 3)?;
    need_rank(site, "mat2", &b, 3)?;
    if let (Some(x), Some(y)) = (a[0], b[0]) {
        if x != y {
            return Err(site.fail("mat2", format!("has batch {y}, self {x}")));
        }
    }
    inner(site, "self", a[2], "mat2", b[1])?;
    Ok(vec![Out::dims(vec![a[0], a[1], b[2]])])
}

/// addmm: the product, and `self` broadcasting to it.
fn addmm(site: &Site) -> Result<Vec<Out>> {
    let (a, b) = (site.dims("mat1")?, site.dims("mat2")?);
    need_rank(site, "mat1", &a, 2)?;
    need_rank(site, "mat2", &b, 2)?;
    inner(site, "mat1", a[1], "mat2", b[0])?;
    let out = vec![a[0], b[1]];
    let added = broadcast(site, &site.dims("self")?, &out)?;
    if added != out && added.iter().zip(&out).any(|(x, y)| x.is_some() && y.is_some() && x != y) {
        return Err(site.fail("self", "does not broadcast to the product"));
    }
    Ok(vec![Out::dims(out)])
}

/// linear: `weight` [out, in] with `in` the input's last dim.
fn linear(site: &Site) -> Result<Vec<Out>> {
    let x = site.dims("input")?;
    let w = site.dims("weight")?;
    if x.is_empty() {
        return Err(site.fail("input", "is 0-d"));
    }
    if w.len() != 2 && w.len() != 1 {
        return Err(site.fail("weight", format!("has rank {}, must be 1 or 2", w.len())));
    }
    inner(site, "input", x[x.len() - 1], "weight", w[w.len() - 1])?;
    let mut out = x[..x.len() - 1].to_vec();
    if w.len() == 2 {
        out.push(w[0]);
    }
    if let Some(b) = site.opt_dims("bias")? {
        broadcast(site, &b, &out)?;
    }
    Ok(vec![Out::dims(out)])
}

/// matmul: torch's cases by rank (dot, mv, mm, and batched with the batch
/// dims broadcast), the inner dims equal.
fn matmul(site: &Site) -> Result<Vec<Out>> {
    let (a, b) = (site.dims("self")?, site.dims("other")?);
    if a.is_empty() || b.is_empty() {
        return Err(site.fail("self", "and other must both have dims"));
    }
    let ka = a[a.len() - 1];
    let kb = if b.len() == 1 { b[0] } else { b[b.len() - 2] };
    inner(site, "self", ka, "other", kb)?;
    let out = match (a.len(), b.len()) {
        (1, 1) => vec![],
        (1, _) => {
            let mut o = b[..b.len() - 2].to_vec();
            o.push(b[b.len() - 1]);
            o
        }
        (_, 1) => a[..a.len() - 1].to_vec(),
        _ => {
            let mut o = broadcast(site, &a[..a.len() - 2], &b[..b.len() - 2])?;
            o.push(a[a.len() - 2]);
            o.push(b[b.len() - 1]);
            o
        }
    };
    Ok(vec![Out::dims(out)])
}

/// `pt2kit.dft` (ONNX DFT's contract): a float signal whose trailing dim
/// is 1 (real) or 2 (a complex pair), transformed over an axis before it;
/// the result is pairs, with `n / 2 + 1` bins when one-sided (not for an
/// inverse).
fn dft(site: &Site) -> Result<Vec<Out>> {
    let x = site.dims("self")?;
    if !site.dtype("self")?.is_floating() {
        return Err(site.fail("self", "must be floating point"));
    }
    let rank = x.len();
    if rank < 2 || !matches!(x[rank - 1], Some(1 | 2) | None) {
        return Err(site.fail("self", "must end in a dim of 1 (real) or 2 (a complex pair)"));
    }
    let axis = site.args.int("axis")?;
    if axis < 0 || axis as usize >= rank - 1 {
        return Err(site.fail("axis", format!("is {axis}, not a signal dim of rank {rank}")));
    }
    let onesided = site.args.has("onesided") && site.args.bool("onesided")?;
    if onesided && site.args.bool("inverse")? {
        return Err(site.fail("onesided", "is not defined for an inverse transform"));
    }
    let mut out = x.clone();
    if onesided {
        out[axis as usize] = x[axis as usize].map(|n| n / 2 + 1);
    }
    out[rank - 1] = Some(2);
    Ok(vec![Out::dims(out)])
}

/// `transformers.grouped_mm_fallback(input [S, K], weight [E, K, N], offs
/// [E])` and `aten._grouped_mm(self, mat2, offs)` in its 2-D x 3-D form:
/// one product per expert over its rows, [S, N] in the input's dtype (or
/// `_grouped_mm`'s `out_dtype`; its bias is the back ends' to take or
/// refuse).
fn grouped_mm(site: &Site) -> Result<Vec<Out>> {
    let aten = site.args.has("mat2") || site.args.has("self");
    let (xa, wa) = if aten { ("self", "mat2") } else { ("input", "weight") };
    let (x, w) = (site.dims(xa)?, site.dims(wa)?);
    if aten && (x.len() != 2 || w.len() != 3 || !site.args.has("offs")) {
        // `_grouped_mm`'s other forms: nothing inferred (the back ends refuse them)
        return Ok(vec![]);
    }
    need_rank(site, xa, &x, 2)?;
    need_rank(site, wa, &w, 3)?;
    inner(site, xa, x[1], wa, w[1])?;
    let Some(offs) = site.opt_dims("offs")? else {
        return Err(site.fail("offs", "is None: only the grouped 2-D x 3-D product (with offs) is known"));
    };
    need_rank(site, "offs", &offs, 1)?;
    if let (Some(e), Some(n)) = (w[0], offs[0]) {
        if e != n {
            return Err(site.fail("offs", format!("has {n} offsets for {e} experts")));
        }
    }
    if !matches!(site.dtype("offs")?, Dtype::Int32 | Dtype::Int64) {
        return Err(site.fail("offs", "must be int32 or int64"));
    }
    let dtype = match site.args.dtype("out_dtype") {
        Some(d) if aten => d,
        _ => site.dtype(xa)?,
    };
    Ok(vec![Out {
        dims: Some(vec![x[0], w[2]]),
        dtype: Some(dtype),
    }])
}

/// baddbmm: the batched product, and `self` broadcasting to it.
fn baddbmm(site: &Site) -> Result<Vec<Out>> {
    let (a, b) = (site.dims("batch1")?, site.dims("batch2")?);
    need_rank(site, "batch1", &a, 3)?;
    need_rank(site, "batch2", &b, 3)?;
    if let (Some(x), Some(y)) = (a[0], b[0]) {
        if x != y {
            return Err(site.fail("batch2", format!("has batch {y}, batch1 {x}")));
        }
    }
    inner(site, "batch1", a[2], "batch2", b[1])?;
    let out = vec![a[0].or(b[0]), a[1], b[2]];
    let added = broadcast(site, &site.dims("self")?, &out)?;
    if added.len() != 3 {
        return Err(site.fail("self", "does not broadcast to the product"));
    }
    Ok(vec![Out::dims(out)])
}

/// einsum: an equation of one letter per dim (`...` not inferred here),
/// one operand per term, a letter's sizes equal or 1 (broadcast); the
/// output as written after `->`, or the letters seen once in order.
fn einsum(site: &Site) -> Result<Vec<Out>> {
    let eq: String = site.args.string("equation")?.chars().filter(|c| !c.is_whitespace()).collect();
    let operands = site.args.tensors("tensors")?;
    if eq.contains('.') {
        return Ok(vec![]);
    }
    let (lhs, rhs) = match eq.split_once("->") {
        Some((l, r)) => (l, Some(r)),
        None => (eq.as_str(), None),
    };
    let terms: Vec<&str> = lhs.split(',').collect();
    if terms.len() != operands.len() {
        return Err(site.fail(
            "equation",
            format!("'{eq}' has {} operands, {} tensors given", terms.len(), operands.len()),
        ));
    }
    let mut sizes: Vec<(char, Dim, usize)> = Vec::new();
    for (k, (term, v)) in terms.iter().zip(&operands).enumerate() {
        let dims = site.dims_of(*v)?;
        if term.chars().count() != dims.len() {
            return Err(site.fail(
                "equation",
                format!("'{term}' names {} dims, operand {k} has {}", term.chars().count(), dims.len()),
            ));
        }
        for (c, d) in term.chars().zip(dims) {
            if !c.is_ascii_alphabetic() {
                return Err(site.fail("equation", format!("'{eq}' has '{c}', not a letter")));
            }
            match sizes.iter_mut().find(|(x, _, _)| *x == c) {
                None => sizes.push((c, d, 1)),
                Some((_, have, count)) => {
                    *count += 1;
                    *have = match (*have, d) {
                        (Some(1), d) | (d, Some(1)) => d,
                        (Some(a), Some(b)) if a != b => {
                            return Err(site.fail(
                                "equation",
                                format!("'{eq}': '{c}' is {a} in one operand, {b} in another"),
                            ))
                        }
                        (Some(a), _) | (_, Some(a)) => Some(a),
                        (None, None) => None,
                    };
                }
            }
        }
    }
    let out: Vec<Dim> = match rhs {
        Some(r) => r
            .chars()
            .map(|c| {
                sizes.iter().find(|(x, _, _)| *x == c).map(|(_, d, _)| *d).ok_or_else(|| {
                    site.fail("equation", format!("'{eq}': output '{c}' is in no operand"))
                })
            })
            .collect::<Result<_>>()?,
        None => {
            let mut once: Vec<&(char, Dim, usize)> = sizes.iter().filter(|(_, _, n)| *n == 1).collect();
            once.sort_by_key(|(c, _, _)| *c);
            once.iter().map(|(_, d, _)| *d).collect()
        }
    };
    Ok(vec![Out::dims(out)])
}

/// This family's rows: op identity -> rule.
#[rustfmt::skip]
pub(super) const ROWS: &[(&str, ShapeRule)] = &[
    (aten::MM, mm), (aten::BMM, bmm), (aten::ADDMM, addmm),
    (aten::LINEAR, linear), (aten::MATMUL, matmul),
    (aten::BADDBMM, baddbmm), (aten::EINSUM, einsum),
    ("pt2kit.dft.default", dft),
    ("transformers.grouped_mm_fallback.default", grouped_mm), (aten::_GROUPED_MM, grouped_mm),
];
