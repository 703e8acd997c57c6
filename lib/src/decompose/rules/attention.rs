//! Attention (scaled_dot_product_attention and its variants): the decomposition rules.

use crate::ir::op::aten;
use super::*;

/// Swaps the last two dims.
fn mt(em: &mut Emitter, x: ValueId) -> Result<ValueId> {
    let r = em.rank(x)?;
    let mut perm: Vec<usize> = (0..r).collect();
    perm.swap(r - 2, r - 1);
    permute(em, x, &perm, None)
}

/// torch's math attention: both sides scaled by sqrt(scale), masks added,
/// a softmax that gives 0 (not NaN) for fully masked rows.
fn sdpa(em: &mut Emitter, a: &NodeArgs) -> Result<Vec<ValueId>> {
    let (q, mut k, mut v) = (a.tensor("query")?, a.tensor("key")?, a.tensor("value")?);
    let out = a.out(0)?;
    let dtype = em.dtype(q)?;
    let qs = em.sizes(q)?;
    let r = qs.len();
    let e = qs[r - 1].as_int().ok_or_else(|| {
        Error::unsupported("scaled_dot_product_attention with a symbolic head size")
    })?;
    let scale = a.opt_float("scale")?.unwrap_or(1.0 / (e as f64).sqrt());
    let s = scale.sqrt();
    if a.bool("enable_gqa")? && r >= 3 {
        let (hq, hk) = (qs[r - 3].as_int(), em.sizes(k)?[r - 3].as_int());
        if let (Some(hq), Some(hk)) = (hq, hk) {
            if hq != hk {
                k = repeat_heads(em, k, hq / hk)?;
                v = repeat_heads(em, v, hq / hk)?;
            }
        }
    }
    let qm = with_scalar(em, aten::MUL_SCALAR, q, Argument::Float(s))?;
    let kt = mt(em, k)?;
    let km = with_scalar(em, aten::MUL_SCALAR, kt, Argument::Float(s))?;
    let mut attn = matmul(em, qm, km, None)?;
    if a.bool("is_causal")? {
        // query i sees keys j <= i: aranges over the lengths (symbolic ones
        // read at run time), compared
        let rows = arange_dim(em, attn, r - 2, true)?;
        let cols = arange_dim(em, attn, r - 1, false)?;
        let keep = binary(em, aten::GE_TENSOR, rows, cols, Dtype::Bool, None)?;
        let ninf = scalar_tensor(em, attn, Argument::Float(f64::NEG_INFINITY), dtype)?;
        attn = where_(em, keep, attn, ninf, None)?;
    }
    if let Some(mask) = a.opt_tensor("attn_mask")? {
        let mask = if em.dtype(mask)? == Dtype::Bool {
            let zero = scalar_tensor(em, attn, Argument::Float(0.0), dtype)?;
            let ninf = scalar_tensor(em, attn, Argument::Float(f64::NEG_INFINITY), dtype)?;
            where_(em, mask, zero, ninf, None)?
        } else {
            mask
        };
        attn = binary(em, aten::ADD_TENSOR, attn, mask, dtype, None)?;
    }
    let last = Argument::Int(-1);
    let sm = {
        let sizes = em.sizes(attn)?;
        let meta = em.meta_like(attn, dtype, sizes)?;
        em.op(
            aten::_SOFTMAX,
            vec![
                ("self", Argument::Tensor(attn)),
                ("dim", last.clone()),
                ("half_to_float", Argument::Bool(false)),
            ],
            meta,
        )?
    };
    let eq = {
        let sizes = em.sizes(attn)?;
        let meta = em.meta_like(attn, Dtype::Bool, sizes)?;
        em.op(
            aten::EQ_SCALAR,
            vec![
                ("self", Argument::Tensor(attn)),
                ("other", Argument::Float(f64::NEG_INFINITY)),
            ],
            meta,
        )?
    };
    let not_masked = unary(em, aten::LOGICAL_NOT, eq)?;
    let any = {
        let mut sizes = em.sizes(attn)?;
        *sizes.last_mut().unwrap() = Sym::Int(1);
        let meta = em.meta_like(attn, Dtype::Bool, sizes)?;
        em.op(
            aten::ANY_DIM,
            vec![
                ("self", Argument::Tensor(not_masked)),
                ("dim", last),
                ("keepdim", Argument::Bool(true)),
            ],
            meta,
        )?
    };
    let all_masked = unary(em, aten::LOGICAL_NOT, any)?;
    let zeros = full_like(em, sm, scalar(0.0, dtype), dtype, None)?;
    let mut p = where_(em, all_masked, zeros, sm, None)?;
    let dp = a.float("dropout_p")?;
    if dp > 0.0 {
        let sizes = em.sizes(p)?;
        let m0 = em.meta_like(p, dtype, sizes.clone())?;
        let m1 = em.meta_like(p, Dtype::Bool, sizes)?;
        p = em.call(
            aten::NATIVE_DROPOUT,
            vec![
                ("input", Argument::Tensor(p)),
                ("p", Argument::Float(dp)),
                ("train", Argument::Bool(true)),
            ],
            vec![Out::New(m0), Out::New(m1)],
        )?[0];
    }
    Ok(vec![matmul(em, p, v, Some(out))?])
}

/// Repeats each head `n` times along dim -3 (grouped-query attention).
fn repeat_heads(em: &mut Emitter, x: ValueId, n: i64) -> Result<ValueId> {
    let r = em.rank(x)?;
    let u = unsqueeze(em, x, r - 2)?;
    let mut sizes = em.size_refs(u)?;
    sizes[r - 2] = SymRef::Int(n);
    let ex = expand(em, u, &sizes)?;
    let heads = em.mul(sizes[r - 3], SymRef::Int(n))?;
    let mut new: Vec<SymRef> = sizes[..r - 3].to_vec();
    new.extend([heads, sizes[r - 1], sizes[r]]);
    reshape(em, ex, &new, None)
}

rules! {
    aten::SCALED_DOT_PRODUCT_ATTENTION => [aten::MUL_SCALAR, aten::PERMUTE, aten::MATMUL, aten::ADD_TENSOR, aten::_SOFTMAX, aten::EQ_SCALAR, aten::LOGICAL_NOT, aten::ANY_DIM, aten::FULL_LIKE, aten::WHERE_SELF, aten::NATIVE_DROPOUT, aten::ARANGE_START_STEP, aten::GE_TENSOR] sdpa;
}

/// Ops that are another op of this family under another name.
pub(super) const ALIASES: &[(&str, &str)] = &[];
