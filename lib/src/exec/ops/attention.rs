//! Attention (scaled_dot_product_attention and its variants): the executor rows.

use crate::ir::op::aten;
use super::*;

/// `t` (`[..., heads, seq, dim]`) with each head repeated `n` times in
/// place (`repeat_interleave` over the heads): grouped-query attention's
/// keys and values for every query head.
fn repeat_heads(t: &Tensor, n: usize) -> Result<Tensor> {
    if n == 1 {
        return Ok(t.clone());
    }
    let r = t.rank();
    let mut wide = t.dims().to_vec();
    wide.insert(r - 2, n);
    let mut merged = t.dims().to_vec();
    merged[r - 3] *= n;
    let x = t
        .t
        .unsqueeze(r - 2)
        .and_then(|x| x.broadcast_as(wide))
        .and_then(|x| x.contiguous())
        .and_then(|x| x.reshape(merged))?;
    Ok(Tensor::new(x, t.dtype))
}

fn sdpa(ctx: &mut Ctx) -> OpResult {
    let q = ctx.tensor("query")?;
    let mut k = ctx.tensor("key")?;
    let mut v = ctx.tensor("value")?;
    // grouped-query attention (`enable_gqa`): fewer key/value heads than
    // query heads, each shared by a group of query heads
    if q.rank() >= 3 && k.rank() == q.rank() {
        let (hq, hk) = (q.dims()[q.rank() - 3], k.dims()[k.rank() - 3]);
        if hq != hk && hk > 0 && hq % hk == 0 {
            k = repeat_heads(&k, hq / hk)?;
            v = repeat_heads(&v, hq / hk)?;
        }
    }
    let d = *q.dims().last().unwrap_or(&1) as f64;
    let scale = ctx.opt_float("scale")?.unwrap_or(1.0 / d.sqrt());
    let kt = Tensor::new(
        k.t.transpose(k.rank() - 2, k.rank() - 1)?,
        k.dtype,
    );
    let mut s = matmul_t(ctx, &q, &kt)?;
    s.t = s.t.affine(scale, 0.0)?;
    let (l, sk) = (s.dims()[s.rank() - 2], s.dims()[s.rank() - 1]);
    if ctx.opt_bool("is_causal", false)? {
        let mask: Vec<u8> = (0..l)
            .flat_map(|i| (0..sk).map(move |j| (j <= i) as u8))
            .collect();
        let m = CandleTensor::from_vec(mask, (l, sk), ctx.device())?;
        let ninf = CandleTensor::full(f32::NEG_INFINITY, s.dims(), ctx.device())
            .and_then(|t| t.to_dtype(s.t.dtype()))?;
        s.t = m
            .broadcast_as(s.dims())
            .and_then(|m| m.where_cond(&s.t, &ninf))?;
    }
    if let Some(mask) = ctx.opt_tensor("attn_mask")? {
        if mask.dtype == Dtype::Bool {
            let ninf = CandleTensor::full(f32::NEG_INFINITY, s.dims(), ctx.device())
                .and_then(|t| t.to_dtype(s.t.dtype()))?;
            s.t = mask
                .t
                .broadcast_as(s.dims())
                .and_then(|m| m.where_cond(&s.t, &ninf))?;
        } else {
            s.t = s.t.broadcast_add(&mask.cast(s.dtype)?.t)?;
        }
    }
    let last = s.rank() - 1;
    let mut p = softmax_impl(&s, last, false)?;
    // a query row with every key masked attends to nothing: 0, as torch's
    // `_safe_softmax` gives (a plain softmax gives NaN)
    if s.dtype.is_floating() && s.dims()[last] > 0 {
        let masked = s
            .t
            .eq(f64::NEG_INFINITY)
            .and_then(|m| m.min_keepdim(last))?;
        if masked.max_keepdim(last).and_then(|m| m.flatten_all()).and_then(|m| m.max(0)).and_then(|m| m.to_scalar::<u8>())? != 0 {
            let zero = p.t.zeros_like()?;
            p.t = masked
                .broadcast_as(p.dims())
                .and_then(|m| m.where_cond(&zero, &p.t))?;
        }
    }
    one(matmul_t(ctx, &p, &v)?)
}

/// This family's rows: op identity -> implementation.
pub(super) const ROWS: &[(&str, OpFn)] = &[(aten::SCALED_DOT_PRODUCT_ATTENTION, sdpa)];
