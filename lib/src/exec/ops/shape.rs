//! Shape ops that make new tensors (cat, split, flip, repeat, pad, ...) and views by shape (view, permute, expand, ...): the executor rows.

use crate::ir::op::aten;
use super::*;

fn resolve_shape(shape: &[i64], numel: usize) -> Result<Vec<usize>> {
    let known: i64 = shape.iter().filter(|&&s| s != -1).product();
    shape
        .iter()
        .map(|&s| {
            if s == -1 {
                if known == 0 {
                    Ok(0)
                } else {
                    Ok(numel / known as usize)
                }
            } else if s < 0 {
                Err(Error::bad_input(format!("negative size {s}")))
            } else {
                Ok(s as usize)
            }
        })
        .collect()
}

fn reshape(ctx: &mut Ctx) -> OpResult {
    let x = ctx.tensor("self")?;
    let name = if ctx.node.arg("size").is_some() {
        "size"
    } else {
        "shape"
    };
    let shape = resolve_shape(&ctx.ints(name)?, x.t.elem_count())?;
    if shape == x.dims() {
        // the same sizes: the same view, whatever its strides (candle's
        // reshape would copy a non-contiguous one, an expanded weight too)
        return one(x);
    }
    let sized = |d: &[usize]| d.iter().copied().filter(|&s| s != 1).collect::<Vec<_>>();
    if !x.t.is_contiguous() && sized(&shape) == sized(x.dims()) {
        // only dims of one element dropped or added ([1, 12, 197, 64] of
        // a permuted view as [12, 197, 64]): a view whatever the strides,
        // where candle's reshape would copy
        let mut t = x.t.clone();
        for i in (0..x.rank()).rev().filter(|&i| x.dims()[i] == 1) {
            t = t.squeeze(i)?;
        }
        for i in (0..shape.len()).filter(|&i| shape[i] == 1) {
            t = t.unsqueeze(i)?;
        }
        return one(Tensor::new(t, x.dtype));
    }
    if let Some(dense) = batched_transpose(&x.t)? {
        return one(Tensor::new(dense.reshape(shape)?, x.dtype));
    }
    // a view that needs a copy: the copy in order, then the sizes
    one(Tensor::new(contiguous(&x.t)?.reshape(shape)?, x.dtype))
}

/// A float32 host view that is a batch of transposed matrices (logical
/// `[batch..., m..., n]` over memory `[batch, n, m]`: attention's keys,
/// transposed then scaled, before their batched product), made
/// contiguous 8x8 blocks at a time ([`vmath::transpose`]); `None` for any
/// other layout. candle's strided copy took 0.83 ms for each of BERT-base's
/// `[8, 12, 64, 128]` keys at batch 8.
fn batched_transpose(t: &CandleTensor) -> Result<Option<CandleTensor>> {
    if t.dtype() != DType::F32 || !t.device().is_cpu() || t.is_contiguous() || t.rank() < 2 {
        return Ok(None);
    }
    let (dims, strides) = (t.dims().to_vec(), t.stride().to_vec());
    let r = dims.len();
    let (n, p) = (dims[r - 1], strides[r - 1]);
    if n < 2 || p < 2 {
        return Ok(None);
    }
    // dims k..r-1 row-major from stride 1 up to p, dims ..k from p * n up
    let mut k = r - 1;
    let mut want = 1;
    while k > 0 && want < p {
        k -= 1;
        if dims[k] != 1 && strides[k] != want {
            return Ok(None);
        }
        want *= dims[k];
    }
    if want != p {
        return Ok(None);
    }
    let mut want = p * n;
    for j in (0..k).rev() {
        if dims[j] != 1 && strides[j] != want {
            return Ok(None);
        }
        want *= dims[j];
    }
    let batch: usize = dims[..k].iter().product();
    let (storage, layout) = t.storage_and_layout();
    let candle_core::Storage::Cpu(cpu) = &*storage else {
        return Ok(None);
    };
    let Ok(all) = cpu.as_slice::<f32>() else {
        return Ok(None);
    };
    let start = layout.start_offset();
    let Some(src) = all.get(start..start + batch * n * p) else {
        return Ok(None);
    };
    let mut out = vec![0f32; batch * n * p];
    crate::kernels::threads::par_chunks(&mut out, n * p, |i, dst| {
        vmath::transpose(&src[i * n * p..][..n * p], n, p, dst)
    });
    drop(storage);
    Ok(Some(host_f32_tensor(out, &dims)?))
}

fn permute(ctx: &mut Ctx) -> OpResult {
    let x = ctx.tensor("self")?;
    let dims: Vec<usize> = ctx
        .ints("dims")?
        .iter()
        .map(|&d| normalize_dim(d, x.rank()))
        .collect::<Result<_>>()?;
    one(Tensor::new(x.t.permute(dims)?, x.dtype))
}

fn transpose(ctx: &mut Ctx) -> OpResult {
    let x = ctx.tensor("self")?;
    if x.rank() < 2 {
        return one(x);
    }
    let (a, b) = if ctx.node.target.name == "t" {
        (0, 1)
    } else {
        (
            normalize_dim(ctx.int("dim0")?, x.rank())?,
            normalize_dim(ctx.int("dim1")?, x.rank())?,
        )
    };
    one(Tensor::new(x.t.transpose(a, b)?, x.dtype))
}

fn unsqueeze(ctx: &mut Ctx) -> OpResult {
    let x = ctx.tensor("self")?;
    let d = normalize_dim(ctx.int("dim")?, x.rank() + 1)?;
    one(Tensor::new(x.t.unsqueeze(d)?, x.dtype))
}

fn squeeze(ctx: &mut Ctx) -> OpResult {
    let x = ctx.tensor("self")?;
    let dims: Vec<usize> = if ctx.node.arg("dim").is_some() {
        ctx.ints("dim")?
            .iter()
            .map(|&d| normalize_dim(d, x.rank()))
            .collect::<Result<_>>()?
    } else {
        (0..x.rank()).collect()
    };
    let keep: Vec<usize> = dims.into_iter().filter(|&d| x.dims()[d] == 1).collect();
    one(Tensor::new(squeeze_dims(x.t.clone(), &keep)?, x.dtype))
}

fn flatten(ctx: &mut Ctx) -> OpResult {
    let x = ctx.tensor("self")?;
    if x.rank() == 0 {
        return one(Tensor::new(x.t.reshape(1)?, x.dtype));
    }
    let s = normalize_dim(ctx.opt_int("start_dim")?.unwrap_or(0), x.rank())?;
    let e = normalize_dim(ctx.opt_int("end_dim")?.unwrap_or(-1), x.rank())?;
    one(Tensor::new(x.t.flatten(s, e)?, x.dtype))
}

fn unflatten(ctx: &mut Ctx) -> OpResult {
    let x = ctx.tensor("self")?;
    let d = normalize_dim(ctx.int("dim")?, x.rank())?;
    let sizes = resolve_shape(&ctx.ints("sizes")?, x.dims()[d])?;
    let mut shape = x.dims()[..d].to_vec();
    shape.extend(sizes);
    shape.extend_from_slice(&x.dims()[d + 1..]);
    one(Tensor::new(x.t.reshape(shape)?, x.dtype))
}

pub(super) fn expand(ctx: &mut Ctx) -> OpResult {
    let x = ctx.tensor("self")?;
    let size = ctx.ints("size")?;
    let offset = size.len() - x.rank();
    let shape: Vec<usize> = size
        .iter()
        .enumerate()
        .map(|(i, &s)| {
            if s == -1 {
                x.dims()[i - offset]
            } else {
                s as usize
            }
        })
        .collect();
    let mut t = x.t.broadcast_as(shape)?;
    if t.is_contiguous() {
        // Only size-1 dims were added or kept: candle gives them stride 0,
        // and its reductions over such a dim divide by that stride (a
        // panic). A reshape of a contiguous tensor is the same storage
        // with the usual strides.
        t = t.reshape(t.dims())?;
    }
    one(Tensor::new(t, x.dtype))
}

fn select(ctx: &mut Ctx) -> OpResult {
    let x = ctx.tensor("self")?;
    if x.rank() == 0 {
        return Err(Error::bad_input("select() cannot be applied to a 0-dim tensor"));
    }
    let d = normalize_dim(ctx.int("dim")?, x.rank())?;
    let n = x.dims()[d] as i64;
    let i = ctx.int("index")?;
    let i = if i < 0 { i + n } else { i };
    if i < 0 || i >= n {
        return Err(Error::bad_input(format!(
            "index {i} out of range for dim of size {n}"
        )));
    }
    one(Tensor::new(
        x.t.narrow(d, i as usize, 1)
            .and_then(|t| t.squeeze(d))?,
        x.dtype,
    ))
}

fn slice(ctx: &mut Ctx) -> OpResult {
    let x = ctx.tensor("self")?;
    if x.rank() == 0 {
        return Err(Error::bad_input("slice() cannot be applied to a 0-dim tensor"));
    }
    let d = normalize_dim(ctx.opt_int("dim")?.unwrap_or(0), x.rank())?;
    let n = x.dims()[d] as i64;
    let clampi = |v: i64| if v < 0 { (v + n).max(0) } else { v.min(n) };
    let start = clampi(ctx.opt_int("start")?.unwrap_or(0));
    let end = clampi(ctx.opt_int("end")?.unwrap_or(n)).max(start);
    let step = ctx.opt_int("step")?.unwrap_or(1);
    if step <= 0 {
        return Err(Error::bad_input("slice step must be positive"));
    }
    let t = if step == 1 || start == end || x.t.elem_count() == 0 {
        // (a stepped slice of nothing is nothing: candle's index_select
        // of an empty source indexes out of its slice)
        let len = if step == 1 { end - start } else { (end - start + step - 1) / step };
        if x.t.elem_count() == 0 || start == end {
            let mut shape = x.dims().to_vec();
            shape[d] = len.max(0) as usize;
            CandleTensor::zeros(shape.as_slice(), x.t.dtype(), x.t.device())?
        } else {
            x.t.narrow(d, start as usize, len as usize)?
        }
    } else {
        let idx: Vec<u32> = (start..end)
            .step_by(step as usize)
            .map(|i| i as u32)
            .collect();
        let idx = CandleTensor::new(idx.as_slice(), ctx.device())?;
        x.t.contiguous()
            .and_then(|t| t.index_select(&idx, d))?
    };
    one(Tensor::new(t, x.dtype))
}

pub(super) fn cat(ctx: &mut Ctx) -> OpResult {
    let ts: Vec<Tensor> = ctx.tensors("tensors")?.into_iter().flatten().collect();
    let keys: Vec<(Dtype, Rank)> = ts.iter().map(|t| (t.dtype, Rank::Dim)).collect();
    let dt = result_type(&keys);
    let nonempty: Vec<Tensor> = ts
        .into_iter()
        .filter(|t| !(t.rank() == 1 && t.dims()[0] == 0))
        .collect();
    let rank = nonempty.first().map(|t| t.rank()).unwrap_or(1);
    if let Some((i, t)) = nonempty.iter().enumerate().find(|(_, t)| t.rank() != rank || rank == 0) {
        return Err(Error::bad_input(format!(
            "cat: tensor {i} has rank {}, the first rank {rank}: cat takes tensors of one rank, at least 1",
            t.rank()
        )));
    }
    let d = normalize_dim(ctx.opt_int("dim")?.unwrap_or(0), rank)?;
    let parts: Vec<CandleTensor> = nonempty
        .iter()
        .map(|t| t.cast(dt).map(|t| t.t))
        .collect::<Result<_>>()?;
    let parts: Vec<CandleTensor> = parts
        .into_iter()
        .filter(|t| t.dims()[d] > 0 || t.elem_count() > 0)
        .collect();
    if parts.is_empty() {
        // every part is empty: so is the result, the parts' sizes along d summed
        let mut shape = nonempty.first().map_or(vec![0], |t| t.dims().to_vec());
        if let Some(s) = shape.get_mut(d) {
            *s = nonempty.iter().map(|t| t.dims()[d]).sum();
        }
        return full_of(ctx, shape, Num::Int(0), dt);
    }
    one(Tensor::new(CandleTensor::cat(&parts, d)?, dt))
}

fn split(ctx: &mut Ctx) -> OpResult {
    let x = ctx.tensor("self")?;
    if x.rank() == 0 {
        return Err(Error::bad_input("split() cannot be applied to a 0-dim tensor"));
    }
    let d = normalize_dim(ctx.opt_int("dim")?.unwrap_or(0), x.rank())?;
    let n = x.dims()[d];
    let sizes: Vec<usize> = if ctx.node.arg("split_sizes").is_some() {
        sizes_of(&ctx.ints("split_sizes")?)?
    } else {
        let s = ctx.int("split_size")?.max(1) as usize;
        (0..n).step_by(s).map(|i| s.min(n - i)).collect()
    };
    let total = sizes.iter().fold(0usize, |a, &s| a.saturating_add(s));
    if total != n {
        return Err(Error::bad_input(format!(
            "split: the sizes {sizes:?} sum to {total}, but dim {d} has {n}"
        )));
    }
    let mut out = Vec::new();
    let mut at = 0;
    for s in sizes {
        out.push(Value::Tensor(Tensor::new(
            x.t.narrow(d, at, s)?,
            x.dtype,
        )));
        at += s;
    }
    Ok(vec![Value::List(out)])
}

/// `as_strided` reads the input's storage; the executor keeps tensors
/// row-major, so the input's recorded strides map each storage position
/// back to a logical element.
fn as_strided(ctx: &mut Ctx) -> OpResult {
    let x = ctx.tensor("self")?;
    let size = sizes_of(&ctx.ints("size")?)?;
    let stride = ctx.ints("stride")?;
    let meta = match ctx.node.arg("self") {
        Some(Argument::Tensor(v)) => match &ctx.graph.value(*v).kind {
            crate::ir::ValueKind::Tensor(m) => Some(m.clone()),
            _ => None,
        },
        _ => None,
    };
    let meta = meta.ok_or_else(|| unsupported("as_strided without input metadata"))?;
    let in_strides = meta
        .static_strides()
        .ok_or_else(|| unsupported("as_strided on symbolic strides"))?;
    let in_offset = meta.storage_offset.as_int().unwrap_or(0);
    let offset = ctx.opt_int("storage_offset")?.unwrap_or(in_offset);
    let in_sizes: Vec<i64> = x.dims().iter().map(|&d| d as i64).collect();
    let size_i: Vec<i64> = size.iter().map(|&d| d as i64).collect();
    // the gather's int64 positions are the largest buffer it makes
    ctx.check_alloc(&size, Dtype::Int64)?;
    let gather_idx: Vec<u32> =
        crate::ir::as_strided_gather(&in_sizes, &in_strides, in_offset, &size_i, &stride, offset)
            .ok_or_else(|| unsupported("as_strided reading storage the input does not cover"))?
            .into_iter()
            .map(|i| i as u32)
            .collect();
    let gi = CandleTensor::new(gather_idx.as_slice(), ctx.device())?;
    let t =
        x.t.flatten_all()
            .and_then(|t| t.index_select(&gi, 0))
            .and_then(|t| t.reshape(size))?;
    one(Tensor::new(t, x.dtype))
}

fn flip(ctx: &mut Ctx) -> OpResult {
    let x = ctx.tensor("self")?;
    let mut t = x.t.clone();
    if x.rank() == 0 {
        // dim 0 of a 0-dim tensor is the tensor itself, as torch wraps it
        return one(Tensor::new(t, x.dtype));
    }
    for d in ctx.ints("dims")? {
        let d = normalize_dim(d, x.rank())?;
        let n = x.dims()[d];
        let idx: Vec<u32> = (0..n as u32).rev().collect();
        t = t
            .index_select(
                &CandleTensor::new(idx.as_slice(), ctx.device())?,
                d,
            )?;
    }
    one(Tensor::new(t, x.dtype))
}

fn repeat(ctx: &mut Ctx) -> OpResult {
    let x = ctx.tensor("self")?;
    let reps = ctx.ints("repeats")?;
    if let Some((i, r)) = reps.iter().enumerate().find(|(_, r)| **r < 0) {
        return Err(Error::bad_input(format!(
            "repeats[{i}] is {r}: a count must be >= 0"
        )));
    }
    let reps: Vec<usize> = reps.iter().map(|&r| r as usize).collect();
    let mut t = x.t.clone();
    while t.rank() < reps.len() {
        t = t.unsqueeze(0)?;
    }
    let out: Vec<usize> = t
        .dims()
        .iter()
        .zip(&reps)
        .map(|(&d, &r)| d.saturating_mul(r))
        .collect();
    ctx.check_alloc(&out, x.dtype)?;
    // [d0, d1] -> [1, d0, 1, d1] -> broadcast [r0, d0, r1, d1] -> copied
    // once into [r0 * d0, r1 * d1] (candle's repeat concatenates a list
    // of `r` references per dim: a count of 2^40 over an empty tensor
    // asks for terabytes)
    let mut inter = Vec::with_capacity(2 * reps.len());
    let mut wide = Vec::with_capacity(2 * reps.len());
    for (&d, &r) in t.dims().iter().zip(&reps) {
        inter.extend([1, d]);
        wide.extend([r, d]);
    }
    let t = if out.contains(&0) {
        CandleTensor::zeros(out.as_slice(), t.dtype(), t.device())?
    } else {
        t.reshape(inter)
            .and_then(|t| t.broadcast_as(wide))
            .and_then(|t| t.contiguous())
            .and_then(|t| t.reshape(out.as_slice()))?
    };
    one(Tensor::new(t, x.dtype))
}

fn constant_pad(ctx: &mut Ctx) -> OpResult {
    let x = ctx.tensor("self")?;
    let pad = ctx.ints("pad")?;
    let value = ctx.opt_float("value")?.unwrap_or(0.0);
    let mut t = x.t.clone();
    if pad.len() / 2 > x.rank() {
        return Err(Error::bad_input(format!(
            "pad {pad:?}: more pairs than the {} dims",
            x.rank()
        )));
    }
    // the output's size (its pads are made in float64 first) held to the
    // run's budget before anything is allocated
    let mut out = x.dims().to_vec();
    for (k, pair) in pad.chunks(2).enumerate() {
        let d = x.rank() - 1 - k;
        let grown = pair.iter().fold(out[d] as i64, |a, &p| a.saturating_add(p));
        out[d] = grown.max(0) as usize;
    }
    ctx.check_alloc(&out, Dtype::Float64)?;
    // every cut first, then every fill: no intermediate is larger than
    // the output (a fill of one dim made before another dim is cut to 0
    // would be)
    for (k, pair) in pad.chunks(2).enumerate() {
        let d = x.rank() - 1 - k;
        let (before, after) = (pair[0], *pair.get(1).unwrap_or(&0));
        if before < 0 || after < 0 {
            let n = t.dims()[d] as i64;
            let start = before.min(0).saturating_neg();
            let end = n.saturating_add(after.min(0));
            if end < start {
                // as torch's narrow refuses it (run-time pads: the shape
                // rule checks constant ones at load)
                return Err(Error::bad_input(format!(
                    "pad {pad:?} cuts more than dim {d} of size {n} holds (narrow(): length must be non-negative)"
                )));
            }
            t = t
                .narrow(d, start as usize, (end - start).max(0) as usize)?;
        }
    }
    if out.contains(&0) {
        return one(Tensor::new(
            CandleTensor::zeros(out.as_slice(), t.dtype(), t.device())?,
            x.dtype,
        ));
    }
    for (k, pair) in pad.chunks(2).enumerate() {
        let d = x.rank() - 1 - k;
        let (before, after) = (pair[0], *pair.get(1).unwrap_or(&0));
        let (b, a) = (before.max(0) as usize, after.max(0) as usize);
        if b + a > 0 {
            let mut shape = t.dims().to_vec();
            let mut parts = Vec::new();
            let filled = |n: usize, shape: &mut Vec<usize>| -> Result<CandleTensor> {
                shape[d] = n;
                CandleTensor::full(value, shape.clone(), t.device())
                    .and_then(|p| p.to_dtype(t.dtype()))
                    .map_err(Error::from)
            };
            if b > 0 {
                parts.push(filled(b, &mut shape)?);
            }
            if t.elem_count() > 0 {
                // (candle's cat copies an empty part out of its slice)
                parts.push(t.contiguous()?);
            }
            if a > 0 {
                parts.push(filled(a, &mut shape)?);
            }
            t = CandleTensor::cat(&parts, d)?;
        }
    }
    one(Tensor::new(t, x.dtype))
}

/// Reflection and replication padding: an index list per padded dim.
fn index_pad(ctx: &mut Ctx) -> OpResult {
    let x = ctx.tensor("self")?;
    let pad = ctx.ints("padding")?;
    let reflect = ctx.node.target.name.starts_with("reflection");
    if pad.len().div_ceil(2) > x.rank() {
        return Err(Error::bad_input(format!(
            "padding {pad:?}: more pairs than the {} dims",
            x.rank()
        )));
    }
    let mut out = x.dims().to_vec();
    for (k, pair) in pad.chunks(2).enumerate() {
        let d = x.rank() - 1 - k;
        let grown = pair.iter().fold(out[d] as i64, |a, &p| a.saturating_add(p));
        if grown < 0 || (reflect && pair.iter().any(|&p| p >= out[d] as i64)) {
            return Err(Error::bad_input(format!(
                "padding {pair:?} of dim {d} (size {}): {}",
                out[d],
                if reflect { "reflection takes pads below the size" } else { "the size would be negative" }
            )));
        }
        out[d] = grown as usize;
    }
    ctx.check_alloc(&out, x.dtype)?;
    let mut t = x.t.clone();
    for (k, pair) in pad.chunks(2).enumerate() {
        let d = x.rank() - 1 - k;
        let n = x.dims()[d] as i64;
        let (before, after) = (pair[0], *pair.get(1).unwrap_or(&0));
        let idx: Vec<u32> = (-before..n + after)
            .map(|i| {
                let j = if reflect {
                    let p = 2 * (n - 1).max(1);
                    let m = i.rem_euclid(p);
                    if m < n {
                        m
                    } else {
                        p - m
                    }
                } else {
                    i.clamp(0, n - 1)
                };
                j as u32
            })
            .collect();
        let it = CandleTensor::new(idx.as_slice(), ctx.device())?;
        t = t.index_select(&it, d)?;
    }
    one(Tensor::new(t, x.dtype))
}

/// `diagonal(self, offset, dim1, dim2)`: the two dims are removed and the
/// diagonal becomes the last dim.
fn diagonal(ctx: &mut Ctx) -> OpResult {
    let x = ctx.tensor("self")?;
    let offset = ctx.opt_int("offset")?.unwrap_or(0);
    let d1 = normalize_dim(ctx.opt_int("dim1")?.unwrap_or(0), x.rank())?;
    let d2 = normalize_dim(ctx.opt_int("dim2")?.unwrap_or(1), x.rank())?;
    if d1 == d2 {
        return Err(Error::bad_input("diagonal: dim1 and dim2 are the same dim"));
    }
    let (n1, n2) = (x.dims()[d1] as i64, x.dims()[d2] as i64);
    let len = if offset >= 0 {
        n1.min(n2 - offset)
    } else {
        (n1 + offset).min(n2)
    }
    .max(0);
    let (r0, c0) = ((-offset).max(0), offset.max(0));
    let linear: Vec<i64> = (0..len).map(|k| (k + r0) * n2 + k + c0).collect();
    let mut order: Vec<usize> = (0..x.rank()).filter(|&d| d != d1 && d != d2).collect();
    let mut shape: Vec<usize> = order.iter().map(|&d| x.dims()[d]).collect();
    order.extend([d1, d2]);
    let mut merged = shape.clone();
    merged.push((n1 * n2) as usize);
    shape.push(len as usize);
    let t =
        x.t.permute(order)
            .and_then(|t| t.contiguous())
            .and_then(|t| t.reshape(merged.clone()))?;
    let t = if len == 0 {
        CandleTensor::zeros(shape.clone(), t.dtype(), t.device())?
    } else {
        let idx = CandleTensor::from_vec(linear, len as usize, ctx.device())?;
        t.index_select(&idx, merged.len() - 1)?
    };
    one(Tensor::new(t.reshape(shape)?, x.dtype))
}

/// This family's rows: op identity -> implementation.
/// Views a mapped weight goes through and stays mapped (only its layout
/// changes); see `exec::mapped`.
pub(super) const MAPPED_VIEWS: &[(&str, MappedViewFn)] = &[
    (aten::PERMUTE, |ctx, m| {
        let dims: Vec<usize> = ctx
            .ints("dims")?
            .iter()
            .map(|&d| normalize_dim(d, m.rank()))
            .collect::<Result<_>>()?;
        m.with_layout(m.layout.permute(&dims)?).map(Some)
    }),
    (aten::T, |_, m| {
        if m.rank() < 2 {
            return Ok(Some(m.clone()));
        }
        m.with_layout(m.layout.transpose(0, 1)?).map(Some)
    }),
    (aten::TRANSPOSE_INT, |ctx, m| {
        let (a, b) = (
            normalize_dim(ctx.int("dim0")?, m.rank())?,
            normalize_dim(ctx.int("dim1")?, m.rank())?,
        );
        m.with_layout(m.layout.transpose(a, b)?).map(Some)
    }),
    (aten::UNSQUEEZE, |ctx, m| {
        let d = normalize_dim(ctx.int("dim")?, m.rank() + 1)?;
        let (mut dims, mut stride) = (m.dims().to_vec(), m.layout.stride().to_vec());
        let inner = stride.get(d).map_or(1, |&s| s * dims[d]);
        dims.insert(d, 1);
        stride.insert(d, inner);
        let layout = candle_core::Layout::new(dims.into(), stride, m.layout.start_offset());
        m.with_layout(layout).map(Some)
    }),
    (aten::EXPAND, |ctx, m| {
        let size = ctx.ints("size")?;
        let offset = size.len().saturating_sub(m.rank());
        let shape: Vec<usize> = size
            .iter()
            .enumerate()
            .map(|(i, &s)| if s == -1 { m.dims()[i - offset] } else { s as usize })
            .collect();
        m.with_layout(m.layout.broadcast_as(shape)?).map(Some)
    }),
    (aten::VIEW, mapped_reshape),
    (aten::RESHAPE, mapped_reshape),
    (aten::_UNSAFE_VIEW, mapped_reshape),
];

/// A reshape of a mapped weight: a view where its layout is contiguous.
fn mapped_reshape(ctx: &Ctx, m: &super::super::mapped::Mapped) -> Result<Option<super::super::mapped::Mapped>> {
    if !m.layout.is_contiguous() {
        return Ok(None);
    }
    let name = if ctx.node.arg("size").is_some() { "size" } else { "shape" };
    let numel = m.dims().iter().product();
    let shape = resolve_shape(&ctx.ints(name)?, numel)?;
    if shape.iter().product::<usize>() != numel {
        return Ok(None);
    }
    let layout = candle_core::Layout::contiguous_with_offset(shape, m.layout.start_offset());
    m.with_layout(layout).map(Some)
}

/// `view_as_real` of a complex tensor (which the executor holds as real
/// pairs: its trailing dim of 2 in storage, `decompose::complex`): the
/// same tensor, relabelled.
fn view_as_real(ctx: &mut Ctx) -> OpResult {
    let x = ctx.tensor("self")?;
    if !x.dtype.is_complex() {
        return Err(unsupported(format!(
            "view_as_real of {} values",
            x.dtype.torch_name()
        )));
    }
    one(Tensor::new(x.t, x.dtype.real_part()))
}

/// `view_as_complex` of real pairs (a trailing dim of 2): relabelled.
fn view_as_complex(ctx: &mut Ctx) -> OpResult {
    let x = ctx.tensor("self")?;
    let complex = match x.dtype {
        Dtype::Float32 => Dtype::Complex64,
        Dtype::Float64 => Dtype::Complex128,
        Dtype::Float16 => Dtype::Complex32,
        d => return Err(unsupported(format!("view_as_complex of {} values", d.torch_name()))),
    };
    if x.dims().last() != Some(&2) {
        return Err(unsupported(format!(
            "view_as_complex of a tensor whose last dim is not 2: {:?}",
            x.dims()
        )));
    }
    one(Tensor::new(x.t, complex))
}

pub(super) const ROWS: &[(&str, OpFn)] = &[
    (aten::VIEW_AS_REAL, view_as_real),
    (aten::VIEW_AS_COMPLEX, view_as_complex),
    (aten::VIEW, reshape),
    (aten::RESHAPE, reshape),
    (aten::_UNSAFE_VIEW, reshape),
    (aten::PERMUTE, permute),
    (aten::TRANSPOSE_INT, transpose),
    (aten::T, transpose),
    (aten::UNSQUEEZE, unsqueeze),
    (aten::SQUEEZE_DIM, squeeze),
    (aten::SQUEEZE_DIMS, squeeze),
    (aten::SQUEEZE, squeeze),
    (aten::FLATTEN_USING_INTS, flatten),
    (aten::UNFLATTEN_INT, unflatten),
    (aten::EXPAND, expand),
    (aten::SELECT_INT, select),
    (aten::SLICE_TENSOR, slice),
    (aten::CAT, cat),
    (aten::SPLIT_TENSOR, split),
    (aten::SPLIT_WITH_SIZES, split),
    (aten::REFLECTION_PAD1D, index_pad),
    (aten::REFLECTION_PAD2D, index_pad),
    (aten::REFLECTION_PAD3D, index_pad),
    (aten::REPLICATION_PAD1D, index_pad),
    (aten::REPLICATION_PAD2D, index_pad),
    (aten::REPLICATION_PAD3D, index_pad),
    (aten::FLIP, flip),
    (aten::REPEAT, repeat),
    (aten::CONSTANT_PAD_ND, constant_pad),
    (aten::DIAGONAL, diagonal),
    (aten::AS_STRIDED, as_strided),
];
