//! Attention (scaled_dot_product_attention and its variants): the ONNX emitters.

use crate::ir::op::aten;
use super::*;

/// softmax(q kᵀ · scale + mask) v, with the causal mask built from Trilu.
fn sdpa(cx: &mut EmitNode) -> Result<()> {
    let q = cx.input("query")?;
    let mut k = cx.input("key")?;
    let mut v = cx.input("value")?;
    let qm = cx.meta("query")?;
    let mut km = cx.meta("key")?.clone();
    // grouped-query attention: each key/value head repeated for the group
    // of query heads it serves (`repeat_interleave` over the heads)
    let heads = |m: &crate::ir::TensorMeta| m.sizes.iter().rev().nth(2).cloned();
    if km.sizes.len() >= 3 && heads(qm) != heads(&km) {
        let (Some(hq), Some(hk)) = (heads(qm).and_then(|h| h.as_int()), heads(&km).and_then(|h| h.as_int())) else {
            return Err(Error::unsupported("grouped-query attention over a symbolic number of heads"));
        };
        if hk == 0 || hq % hk != 0 {
            return Err(Error::bad_input(format!("attention: {hq} query heads do not share {hk} key heads evenly")));
        }
        let r = km.sizes.len();
        let mut wide = km.sizes.clone();
        wide[r - 3] = Sym::Int(hq);
        let target = cx.sizes(&wide)?;
        let mut reps = vec![1i64; r + 1];
        reps[r - 2] = hq / hk;
        let reps = cx.const_i64s(&reps);
        let repeat = |cx: &mut EmitNode, x: &str| -> String {
            let axis = cx.const_i64s(&[(r - 2) as i64]);
            let u = cx.node("Unsqueeze", &[x, &axis], vec![]);
            let e = cx.node("Expand", &[&u, &reps], vec![]);
            cx.node("Reshape", &[&e, &target], vec![])
        };
        k = repeat(cx, &k);
        v = repeat(cx, &v);
        km.sizes = wide;
    }
    let vd = cx.dtype("value")?;
    let out = cx.out_dtype(0)?;
    let c = cx.compute(out);
    let rank = km.sizes.len();
    if rank < 2 {
        return Err(Error::bad_input("attention inputs need at least 2 dims"));
    }
    let scale = match cx.opt_float("scale")? {
        Some(s) => Lit::Float(s),
        None => match qm.sizes.last().and_then(Sym::as_int) {
            Some(e) => Lit::Float(1.0 / (e as f64).sqrt()),
            None => {
                return Err(Error::unsupported(
                    "attention with a symbolic head size and no scale",
                ))
            }
        },
    };
    let qs = cx.cast(&q, qm.dtype, c)?;
    let ks = cx.cast(&k, km.dtype, c)?;
    let vs = cx.cast(&v, vd, c)?;
    let mut perm: Vec<i64> = (0..rank as i64).collect();
    perm.swap(rank - 1, rank - 2);
    let kt = cx.transpose(&ks, &perm);
    let scores = cx.node("MatMul", &[&qs, &kt], vec![]);
    let s = cx.scalar(scale, c)?;
    let mut scores = cx.node("Mul", &[&scores, &s], vec![]);
    if cx.opt_bool("is_causal")?.unwrap_or(false) {
        // Row i sees columns <= i: lower triangle of an L x S matrix of ones.
        let l = qm.sizes[qm.sizes.len() - 2].clone();
        let src = km.sizes[rank - 2].clone();
        let ls = cx.sizes(&[l, src])?;
        let ones = constant_of_shape(cx, &ls, Lit::Bool(true), Dtype::Bool)?;
        let zero = cx.const_i64(0);
        let mask = cx.node("Trilu", &[&ones, &zero], vec![attr_int("upper", 0)]);
        let ninf = cx.scalar(Lit::Float(f64::NEG_INFINITY), c)?;
        scores = cx.node("Where", &[&mask, &scores, &ninf], vec![]);
    }
    let masked = cx.opt_input("attn_mask")?.is_some();
    if let Some(mask) = cx.opt_input("attn_mask")? {
        let md = cx.dtype("attn_mask")?;
        if md == Dtype::Bool {
            let ninf = cx.scalar(Lit::Float(f64::NEG_INFINITY), c)?;
            scores = cx.node("Where", &[&mask, &scores, &ninf], vec![]);
        } else {
            let m = cx.cast(&mask, md, c)?;
            scores = cx.node("Add", &[&scores, &m], vec![]);
        }
    }
    let mut attn = cx.node("Softmax", &[&scores], vec![attr_int("axis", -1)]);
    if masked {
        // a query row with every key masked attends to nothing: 0, as
        // torch's `_safe_softmax` gives (Softmax gives NaN)
        let ninf = cx.scalar(Lit::Float(f64::NEG_INFINITY), c)?;
        let is_ninf = cx.node("Equal", &[&scores, &ninf], vec![]);
        let flag = cx.cast(&is_ninf, Dtype::Bool, Dtype::Float32)?;
        let all = cx.reduce("ReduceMin", &flag, Some(&[-1]), true);
        let zero_f = cx.scalar(Lit::Float(0.0), Dtype::Float32)?;
        let row = cx.node("Greater", &[&all, &zero_f], vec![]);
        let zero = cx.scalar(Lit::Float(0.0), c)?;
        attn = cx.node("Where", &[&row, &zero, &attn], vec![]);
    }
    let y = cx.node("MatMul", &[&attn, &vs], vec![]);
    let y = cx.cast(&y, c, out)?;
    cx.set(0, y);
    Ok(())
}

/// This family's rows: op identity -> implementation.
#[rustfmt::skip]
pub(super) const ROWS: &[(&str, Emit)] = &[
    (aten::SCALED_DOT_PRODUCT_ATTENTION, sdpa),
];
