//! Attention (scaled_dot_product_attention and its variants): the executor rows.

use super::*;

fn sdpa(ctx: &mut Ctx) -> OpResult {
    let q = ctx.tensor("query")?;
    let k = ctx.tensor("key")?;
    let v = ctx.tensor("value")?;
    let d = *q.dims().last().unwrap_or(&1) as f64;
    let scale = ctx.opt_float("scale")?.unwrap_or(1.0 / d.sqrt());
    let kt = Tensor::new(
        k.t.transpose(k.rank() - 2, k.rank() - 1).map_err(ce)?,
        k.dtype,
    );
    let mut s = matmul_t(ctx, &q, &kt)?;
    s.t = s.t.affine(scale, 0.0).map_err(ce)?;
    let (l, sk) = (s.dims()[s.rank() - 2], s.dims()[s.rank() - 1]);
    if ctx.opt_bool("is_causal", false)? {
        let mask: Vec<u8> = (0..l)
            .flat_map(|i| (0..sk).map(move |j| (j <= i) as u8))
            .collect();
        let m = CandleTensor::from_vec(mask, (l, sk), ctx.device()).map_err(ce)?;
        let ninf = CandleTensor::full(f32::NEG_INFINITY, s.dims(), ctx.device())
            .and_then(|t| t.to_dtype(s.t.dtype()))
            .map_err(ce)?;
        s.t = m
            .broadcast_as(s.dims())
            .and_then(|m| m.where_cond(&s.t, &ninf))
            .map_err(ce)?;
    }
    if let Some(mask) = ctx.opt_tensor("attn_mask")? {
        if mask.dtype == Dtype::Bool {
            let ninf = CandleTensor::full(f32::NEG_INFINITY, s.dims(), ctx.device())
                .and_then(|t| t.to_dtype(s.t.dtype()))
                .map_err(ce)?;
            s.t = mask
                .t
                .broadcast_as(s.dims())
                .and_then(|m| m.where_cond(&s.t, &ninf))
                .map_err(ce)?;
        } else {
            s.t = s.t.broadcast_add(&mask.cast(s.dtype)?.t).map_err(ce)?;
        }
    }
    let p = softmax_impl(&s, s.rank() - 1, false)?;
    one(matmul_t(ctx, &p, &v)?)
}

/// This family's rows: op identity -> implementation.
pub(super) const ROWS: &[(&str, OpFn)] = &[("aten.scaled_dot_product_attention.default", sdpa)];
