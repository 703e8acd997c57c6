//! Attention (scaled_dot_product_attention and its variants): the ONNX emitters.

use super::*;

/// softmax(q kᵀ · scale + mask) v, with the causal mask built from Trilu.
fn sdpa(cx: &mut Cx) -> Result<()> {
    if cx.opt_bool("enable_gqa")?.unwrap_or(false) {
        let hq = cx.meta("query")?.sizes.iter().rev().nth(2).cloned();
        let hk = cx.meta("key")?.sizes.iter().rev().nth(2).cloned();
        if hq != hk {
            return Err(Error::unsupported(
                "grouped-query attention (enable_gqa with fewer key heads)",
            ));
        }
    }
    let q = cx.input("query")?;
    let k = cx.input("key")?;
    let v = cx.input("value")?;
    let qm = cx.meta("query")?;
    let km = cx.meta("key")?;
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
    let attn = cx.node("Softmax", &[&scores], vec![attr_int("axis", -1)]);
    let y = cx.node("MatMul", &[&attn, &vs], vec![]);
    let y = cx.cast(&y, c, out)?;
    cx.set(0, y);
    Ok(())
}

/// This family's rows: op identity -> implementation.
#[rustfmt::skip]
pub(super) const ROWS: &[(&str, Emit)] = &[
    ("aten.scaled_dot_product_attention.default", sdpa),
];
