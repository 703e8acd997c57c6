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

/// Element strides of `t` as broadcast to `dims` (its trailing dims
/// against `dims`' last ones; a dim of 1 broadcast, stride 0), with its
/// first element's offset; `None` where it does not broadcast.
fn broadcast_strides(t: &CandleTensor, dims: &[usize]) -> Option<Vec<usize>> {
    let (own, stride) = (t.dims(), t.stride());
    if own.len() > dims.len() {
        return None;
    }
    let lead = dims.len() - own.len();
    let mut out = vec![0; dims.len()];
    for (i, (&d, &s)) in own.iter().zip(stride).enumerate() {
        if d == dims[lead + i] {
            out[lead + i] = if d == 1 { 0 } else { s };
        } else if d != 1 {
            return None;
        }
    }
    Some(out)
}

/// The offsets of each flattened index of the batch dims `dims` (batch and
/// heads), by `strides` (one a dim).
fn batch_offsets(dims: &[usize], strides: &[usize], first: usize) -> Vec<usize> {
    let mut offs = vec![first];
    for (&d, &s) in dims.iter().zip(strides) {
        offs = offs
            .iter()
            .flat_map(|&o| (0..d).map(move |i| o + i * s))
            .collect();
    }
    offs
}

/// Attention fused on the CPU ([`kernels::attention`]): float32 query,
/// key and value, no dropout, a boolean or float32 mask or none. `None`
/// where it does not apply: the caller runs the ops one by one.
fn fused(ctx: &Ctx, q: &Tensor, k: &Tensor, v: &Tensor) -> Result<Option<Tensor>> {
    use crate::kernels::attention::{self, Inputs, Operand, Products, Shape};
    let f32s = [q, k, v].iter().all(|t| t.dtype == Dtype::Float32);
    let products_run = ctx.exec.bf16_kernel().is_some() || sgemm::available();
    if !ctx.device().is_cpu() || !f32s || !products_run {
        return Ok(None);
    }
    if ctx.opt_float("dropout_p")?.unwrap_or(0.0) != 0.0 {
        return Ok(None);
    }
    let r = q.rank();
    if r < 2 || k.rank() != r || v.rank() != r {
        return Ok(None);
    }
    let (qd, kd, vd) = (q.dims(), k.dims(), v.dims());
    let (l, e, s, ev) = (qd[r - 2], qd[r - 1], kd[r - 2], vd[r - 1]);
    if kd[r - 1] != e || vd[r - 2] != s {
        return Ok(None);
    }
    let batch = &qd[..r - 2];
    // grouped-query attention (`enable_gqa`): key and value heads shared
    // by groups of query heads, query head h reading key head h / group
    let mut group = 1;
    if r >= 3 && ctx.opt_bool("enable_gqa", false)? {
        let (hq, hk) = (batch[r - 3], kd[r - 3]);
        if hk > 0 && hq != hk && hq % hk == 0 {
            if vd[r - 3] != hk {
                return Ok(None);
            }
            group = hq / hk;
        }
    }
    let scale = ctx.opt_float("scale")?.unwrap_or(1.0 / (e as f64).sqrt()) as f32;
    let causal = ctx.opt_bool("is_causal", false)?;
    let mask = match ctx.opt_tensor("attn_mask")? {
        None => None,
        Some(m) if m.dtype == Dtype::Bool => {
            // 0 where kept, -inf where masked, at the mask's own shape
            let keep = m.t.contiguous()?;
            let ninf = CandleTensor::full(f32::NEG_INFINITY, keep.dims(), ctx.device())?;
            let zero = ninf.zeros_like()?;
            Some(keep.where_cond(&zero, &ninf)?)
        }
        Some(m) if m.dtype == Dtype::Float32 => Some(m.t.clone()),
        Some(_) => return Ok(None),
    };
    let bh: usize = batch.iter().product();
    // an operand read as `dims` (its batch dims broadcast to the query's,
    // the heads its own where shared): offsets per flattened batch index,
    // row and column strides; None where it does not broadcast
    let operand = |t: &CandleTensor, dims: &[usize], shared: bool| {
        let st = broadcast_strides(t, dims)?;
        let (mut db, mut sb) = (dims[..r - 2].to_vec(), st[..r - 2].to_vec());
        if shared && group > 1 {
            // (key head, member of its group): the members stride 0
            db.insert(r - 2, group);
            sb.insert(r - 2, 0);
        }
        Some((batch_offsets(&db, &sb, t.layout().start_offset()), st[r - 2], st[r - 1]))
    };
    let read_as = |t: &Tensor| -> Vec<usize> {
        let mut d = [batch, &t.dims()[r - 2..]].concat();
        if group > 1 {
            d[r - 3] = t.dims()[r - 3];
        }
        d
    };
    let scores: Vec<usize> = [batch, &[l, s]].concat();
    let (Some(qo), Some(ko), Some(vo)) = (
        operand(&q.t, qd, false),
        operand(&k.t, &read_as(k), true),
        operand(&v.t, &read_as(v), true),
    ) else {
        return Ok(None);
    };
    let mo = match &mask {
        Some(m) => match operand(m, &scores, false) {
            Some(o) => Some(o),
            None => return Ok(None),
        },
        None => None,
    };
    let storages = [Some(&q.t), Some(&k.t), Some(&v.t), mask.as_ref()];
    let guards: Vec<_> = storages.iter().flatten().map(|t| t.storage_and_layout().0).collect();
    let mut slices = Vec::with_capacity(guards.len());
    for g in &guards {
        let candle_core::Storage::Cpu(c) = &**g else {
            return Ok(None);
        };
        slices.push(c.as_slice::<f32>()?);
    }
    let op = |i: usize, (offs, rs, cs): (Vec<usize>, usize, usize)| Operand {
        data: slices[i],
        offs,
        rs,
        cs,
    };
    let inputs = Inputs {
        q: op(0, qo),
        k: op(1, ko),
        v: op(2, vo),
        mask: mo.map(|o| op(3, o)),
    };
    // the output as torch's CPU kernel lays it out, [.., l, heads, ev]
    // seen as [.., heads, l, ev]
    let heads = if r >= 3 { batch[r - 3] } else { 1 };
    let shape = Shape {
        bh,
        heads,
        l,
        s,
        e,
        ev,
        scale,
        causal,
    };
    let mut out = sgemm::uninit(bh * l * ev);
    let threads = rayon::current_num_threads();
    let products = ctx.exec.bf16_kernel().map_or(Products::F32, Products::Bf16);
    attention::attention(shape, &inputs, &mut out, products, threads);
    // SAFETY: attention writes every element
    let out = unsafe { sgemm::assume_init(out) };
    let t = if r >= 3 {
        let dims: Vec<usize> = [&batch[..r - 3], &[l, heads, ev]].concat();
        CandleTensor::from_vec(out, dims, ctx.device())?.transpose(r - 3, r - 2)?
    } else {
        CandleTensor::from_vec(out, [batch, &[l, ev]].concat(), ctx.device())?
    };
    Ok(Some(Tensor::new(t, Dtype::Float32)))
}

fn sdpa(ctx: &mut Ctx) -> OpResult {
    let q = ctx.tensor("query")?;
    let mut k = ctx.tensor("key")?;
    let mut v = ctx.tensor("value")?;
    if let Some(t) = fused(ctx, &q, &k, &v)? {
        return one(t);
    }
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
