//! Reductions (sum, mean, amax, argmax, var, prod, cumsum, sort, topk, ...): the executor rows.

use crate::ir::op::aten;
use super::*;

fn reduce_dims(ctx: &Ctx, x: &Tensor) -> Result<Vec<usize>> {
    let dims = if ctx.node.arg("dim").is_some() {
        ctx.ints("dim")?
    } else {
        Vec::new()
    };
    if dims.is_empty() {
        return Ok((0..x.rank()).collect());
    }
    dims.iter().map(|&d| normalize_dim(d, x.rank())).collect()
}

pub(super) fn sum(ctx: &mut Ctx) -> OpResult {
    let x = ctx.tensor("self")?;
    let out_dtype = ctx.dtype("dtype").unwrap_or(if x.dtype.is_floating() {
        x.dtype
    } else {
        Dtype::Int64
    });
    reduce_over_dims(ctx, x, out_dtype, false)
}

pub(super) fn mean(ctx: &mut Ctx) -> OpResult {
    let x = ctx.tensor("self")?;
    let out_dtype = ctx.dtype("dtype").unwrap_or(x.dtype);
    reduce_over_dims(ctx, x, out_dtype, true)
}

/// sum / mean (`mean`): in `out_dtype`, over the `dim` argument (all
/// dims when absent), keeping or dropping the reduced dims.
fn reduce_over_dims(ctx: &Ctx, x: Tensor, out_dtype: Dtype, mean: bool) -> OpResult {
    let x = x.cast(out_dtype)?;
    let dims = reduce_dims(ctx, &x)?;
    let keep = ctx.opt_bool("keepdim", false)?;
    if x.rank() == 0 {
        return one(x);
    }
    let t = match channels_last_sum(&x.t, &dims, mean).or_else(|| trailing_rows_sum(&x.t, &dims, mean)) {
        Some(t) => t?,
        None if mean => x.t.mean_keepdim(dims.clone())?,
        None => x.t.sum_keepdim(dims.clone())?,
    };
    one(Tensor::new(
        if keep { t } else { squeeze_dims(t, &dims)? },
        out_dtype,
    ))
}

/// A sum (or `mean`) over the planes (dims 2 and 3) of a tensor stored
/// channels-last ([`channels_last_dims`]), kept: each channel's pixels
/// added in [`trailing_rows_sum`]'s order (the same bits as the tensor
/// in planes gives), scaled as it scales.
/// `None` for any other case.
fn channels_last_sum(t: &CandleTensor, dims: &[usize], mean: bool) -> Option<Result<CandleTensor>> {
    let [b, c, h, w] = channels_last_dims(t)?;
    let mut sorted = dims.to_vec();
    sorted.sort_unstable();
    let n = h * w;
    if sorted != [2, 3] || n == 0 {
        return None;
    }
    let mul = (1f64 / n as f64) as f32;
    let sums = with_channels_last(t, |xs| {
        let mut out = vec![0f32; b * c];
        // an image's channels in blocks of 64 a task, where large
        let block = if xs.len() < PARALLEL_SUM_MIN { c } else { c.min(64) };
        let blocks = c.div_ceil(block);
        let at = sgemm::SendPtr(out.as_mut_ptr());
        let task = |t: usize| {
            let (i, c0) = (t / blocks, t % blocks * block);
            let len = block.min(c - c0);
            // SAFETY: task t's channels of image i, no other task's
            let o = unsafe { std::slice::from_raw_parts_mut(at.at(i * c + c0), len) };
            let mut lanes = vec![0f32; crate::kernels::reduce::LANES * len];
            crate::kernels::reduce::column_sums(&xs[i * n * c + c0..], c, n, o, &mut lanes);
            if mean {
                o.iter_mut().for_each(|a| *a = *a * mul + 0.0);
            }
        };
        if xs.len() < PARALLEL_SUM_MIN {
            (0..b * blocks).for_each(task);
        } else {
            crate::kernels::threads::par_for(b * blocks, task);
        }
        out
    })?;
    Some(CandleTensor::from_vec(sums, (b, c, 1, 1), &candle_core::Device::Cpu).map_err(Error::from))
}


/// Below this many elements a sum over trailing dims stays on one thread.
const PARALLEL_SUM_MIN: usize = 1 << 15;

/// A float32 host tensor's sum (or `mean`) over its trailing dims `dims`
/// (the last ones, in any order: a global average pool's, which
/// torchvision gives as `[-1, -2]`), kept: each row by
/// [`kernels::reduce::row_sum`](crate::kernels::reduce::row_sum) (the
/// order of additions [`channels_last_sum`] keeps too) and scaled as
/// candle's `mean_keepdim` does (`v * (1 / n) + 0`), the rows split
/// between the threads when large. `None` for any other case.
fn trailing_rows_sum(t: &CandleTensor, dims: &[usize], mean: bool) -> Option<Result<CandleTensor>> {
    let rank = t.rank();
    // in any order (`[-1, -2]`, as torchvision's pools give them, went to
    // candle's reduction until this sorted them)
    let mut dims = dims.to_vec();
    dims.sort_unstable();
    let trailing = !dims.is_empty() && dims.iter().enumerate().all(|(i, &d)| d == rank - dims.len() + i);
    let n: usize = dims.iter().map(|&d| t.dims()[d]).product();
    // (rows of nothing: candle's sum, 0, and mean, NaN, of each)
    if !trailing || t.dtype() != DType::F32 || n == 0 {
        return None;
    }
    let mut shape = t.dims().to_vec();
    for &d in &dims {
        shape[d] = 1;
    }
    let rows = with_host(t, |xs: &[f32]| {
        let mut out = vec![0f32; xs.len() / n.max(1)];
        let (mul, add) = (1f64 / n as f64, 0f64);
        let (mul, add) = (mul as f32, add as f32);
        let row = |(i, v): (usize, &mut f32)| {
            let s = crate::kernels::reduce::row_sum(&xs[i * n..][..n]);
            *v = if mean { s * mul + add } else { s };
        };
        if xs.len() < PARALLEL_SUM_MIN {
            out.iter_mut().enumerate().for_each(row);
        } else {
            crate::kernels::threads::par_chunks(&mut out, 64, |i, part| {
                part.iter_mut().enumerate().for_each(|(j, v)| row((i * 64 + j, v)))
            });
        }
        out
    })?;
    Some(CandleTensor::from_vec(rows, shape, t.device()).map_err(Error::from))
}


fn reduce_each(
    ctx: &mut Ctx,
    f: fn(&CandleTensor, usize) -> candle_core::Result<CandleTensor>,
    out: Option<Dtype>,
) -> OpResult {
    let x = ctx.tensor("self")?;
    if x.rank() == 0 {
        // a 0-d tensor has no dim to reduce: `f` over it as one of one
        // element (any/all still turn it into a bool)
        let t = x
            .t
            .unsqueeze(0)
            .and_then(|t| f(&t, 0))
            .and_then(|t| t.squeeze(0))?;
        return one(Tensor::new(t, out.unwrap_or(x.dtype)));
    }
    let dims = reduce_dims(ctx, &x)?;
    let keep = ctx.opt_bool("keepdim", false)?;
    let mut t = x.t.clone();
    for &d in &dims {
        t = f(&t, d)?;
    }
    let t = if keep { t } else { squeeze_dims(t, &dims)? };
    one(Tensor::new(t, out.unwrap_or(x.dtype)))
}

fn amax(ctx: &mut Ctx) -> OpResult {
    reduce_each(ctx, |t, d| nan_or(t, d, t.max_keepdim(d)?), None)
}

fn amin(ctx: &mut Ctx) -> OpResult {
    reduce_each(ctx, |t, d| nan_or(t, d, t.min_keepdim(d)?), None)
}

/// A float reduction's result `r` along `d` (kept), NaN wherever the
/// reduced line holds a NaN, as torch's max and min propagate it (candle's
/// skip it).
fn nan_or(t: &CandleTensor, d: usize, r: CandleTensor) -> candle_core::Result<CandleTensor> {
    if !t.dtype().is_float() || t.dim(d)? == 0 {
        return Ok(r);
    }
    let nan = t.ne(t)?.max_keepdim(d)?;
    // the line's sum is NaN where it holds one
    nan.where_cond(&t.sum_keepdim(d)?, &r)
}

/// The dtype of `any`/`all` of `x`: uint8 for uint8 (torch keeps it, for
/// compatibility), bool for everything else.
fn any_all_dtype(x: Dtype) -> Dtype {
    if x == Dtype::Uint8 {
        Dtype::Uint8
    } else {
        Dtype::Bool
    }
}

fn any(ctx: &mut Ctx) -> OpResult {
    // bools on the host, over the last dim only: one pass over its rows
    let x = ctx.tensor("self")?;
    let out = any_all_dtype(x.dtype);
    if x.rank() > 0 && ctx.node.target.overload == "dim" {
        let d = normalize_dim(ctx.int("dim")?, x.rank())?;
        let n = x.dims()[d];
        if d + 1 == x.rank() && n > 0 {
            let rows = with_host::<u8, _>(&x.t, |v| {
                v.chunks(n).map(|r| r.iter().any(|&b| b != 0) as u8).collect::<Vec<u8>>()
            });
            if let Some(rows) = rows {
                let mut shape = x.dims().to_vec();
                if ctx.opt_bool("keepdim", false)? {
                    shape[d] = 1;
                } else {
                    shape.pop();
                }
                return one(Tensor::new(
                    CandleTensor::from_vec(rows, shape, x.t.device())?,
                    out,
                ));
            }
        }
    }
    reduce_each(ctx, |t, d| t.ne(0f64)?.max_keepdim(d), Some(out))
}

fn all(ctx: &mut Ctx) -> OpResult {
    let out = any_all_dtype(ctx.tensor("self")?.dtype);
    reduce_each(ctx, |t, d| t.ne(0f64)?.min_keepdim(d), Some(out))
}

/// argmax (`largest`) or argmin: over one dim, or over the flattened
/// tensor when no dim is given.
fn arg_extreme(ctx: &mut Ctx, largest: bool) -> OpResult {
    let x = ctx.tensor("self")?;
    let keep = ctx.opt_bool("keepdim", false)?;
    let (t, d) = match ctx.opt_int("dim")? {
        Some(d) => (x.t.clone(), normalize_dim(d, x.rank())?),
        None => (x.t.flatten_all()?, 0),
    };
    let r = arg_keepdim(&t, d, largest)?;
    one(Tensor::new(
        if keep { r } else { r.squeeze(d)? },
        Dtype::Int64,
    ))
}

/// The index (int64, dim `d` kept) of the first largest (or smallest)
/// element along `d`, or of the first NaN where there is one, as torch
/// gives it. On the host candle's own; on a GPU candle's reduction
/// returns any of equal elements (a tie in MobileNet-sized pools gave 8
/// where torch has 7), so there the first of them: the least index
/// among the extreme's (or the NaNs') positions.
fn arg_keepdim(t: &CandleTensor, d: usize, largest: bool) -> candle_core::Result<CandleTensor> {
    // (candle's own skips NaN: floats take the first of the NaNs' places)
    if !t.device().is_cpu() || t.dtype().is_float() {
        return first_extreme(t, d, largest);
    }
    let i = if largest {
        t.argmax_keepdim(d)
    } else {
        t.argmin_keepdim(d)
    }?;
    i.to_dtype(DType::I64)
}

/// [`arg_keepdim`] off the host: the first of the extreme's (or the
/// NaNs') positions along `d`, from comparisons and a least index.
fn first_extreme(t: &CandleTensor, d: usize, largest: bool) -> candle_core::Result<CandleTensor> {
    let n = t.dim(d)?;
    let mut shape = vec![1; t.rank()];
    shape[d] = n;
    let index = CandleTensor::arange(0i64, n as i64, t.device())?
        .reshape(shape)?
        .broadcast_as(t.shape())?;
    let none = CandleTensor::full(n as i64, t.shape(), t.device())?;
    let first = |mask: &CandleTensor| mask.where_cond(&index, &none)?.min_keepdim(d);
    let extreme = if largest {
        t.max_keepdim(d)
    } else {
        t.min_keepdim(d)
    }?;
    let at_extreme = first(&t.broadcast_eq(&extreme)?)?;
    if !t.dtype().is_float() {
        return Ok(at_extreme);
    }
    let at_nan = first(&t.ne(t)?)?;
    at_nan.lt(n as i64)?.where_cond(&at_nan, &at_extreme)
}

/// `t` with dim `d` swapped to the end, contiguous (candle sorts along
/// the last dim only).
fn dim_last(t: &CandleTensor, d: usize) -> Result<CandleTensor> {
    let last = t.rank() - 1;
    let moved = if d == last {
        t.clone()
    } else {
        t.transpose(d, last)?
    };
    moved.contiguous().map_err(Error::from)
}

/// Each line of `t` along `d` ordered (ascending, or descending where
/// `desc`) by torch's order (NaN above every number; [`exact::nan_last`]),
/// stably; the first `k` of each: `(values, int64 indices)`.
fn sorted_lines(ctx: &Ctx, x: &Tensor, d: usize, desc: bool, k: usize) -> Result<(Tensor, Tensor)> {
    let last = x.rank() - 1;
    let moved = Tensor::new(dim_last(&x.t, d)?, x.dtype);
    let n = *moved.dims().last().unwrap_or(&1);
    if k > n {
        return Err(Error::bad_input(format!("k ({k}) is larger than the dim's size ({n})")));
    }
    let vals = elems(&moved)?;
    let lines = vals.len().checked_div(n).unwrap_or(0);
    let mut idx: Vec<usize> = Vec::with_capacity(lines * k);
    let mut order: Vec<usize> = Vec::with_capacity(n);
    for r in 0..lines {
        order.clear();
        order.extend(0..n);
        match &vals {
            Elems::I(v) => {
                let row = &v[r * n..(r + 1) * n];
                order.sort_by(|&a, &b| if desc { row[b].cmp(&row[a]) } else { row[a].cmp(&row[b]) });
            }
            Elems::F(v) => {
                let row = &v[r * n..(r + 1) * n];
                order.sort_by(|&a, &b| if desc { nan_last(row[b], row[a]) } else { nan_last(row[a], row[b]) });
            }
        }
        idx.extend(order[..k].iter().map(|&i| r * n + i));
    }
    let mut shape = moved.dims().to_vec();
    shape[last] = k;
    let picked = vals.pick(idx.iter().copied());
    let positions = Elems::I(idx.iter().map(|&i| (i % n.max(1)) as i64).collect());
    let back = |t: Tensor| -> Result<Tensor> {
        Ok(if d == last {
            t
        } else {
            Tensor::new(t.t.transpose(d, last)?, t.dtype)
        })
    };
    Ok((
        back(from_elems(picked, &shape, x.dtype, ctx.device())?)?,
        back(from_elems(positions, &shape, Dtype::Int64, ctx.device())?)?,
    ))
}

fn topk(ctx: &mut Ctx) -> OpResult {
    let x = ctx.tensor("self")?;
    let k = usize::try_from(ctx.int("k")?).map_err(|_| Error::bad_input("k must not be negative"))?;
    if x.rank() == 0 {
        return Ok(vec![Value::Tensor(x), full_of(ctx, vec![], Num::Int(0), Dtype::Int64)?.remove(0)]);
    }
    let d = normalize_dim(ctx.opt_int("dim")?.unwrap_or(-1), x.rank())?;
    let largest = ctx.opt_bool("largest", true)?;
    let (v, i) = sorted_lines(ctx, &x, d, largest, k)?;
    Ok(vec![Value::Tensor(v), Value::Tensor(i)])
}

fn cumsum(ctx: &mut Ctx) -> OpResult {
    let x = ctx.tensor("self")?;
    let d = if x.rank() == 0 { 0 } else { normalize_dim(ctx.int("dim")?, x.rank())? };
    let out = ctx.dtype("dtype").unwrap_or(if x.dtype.is_floating() {
        x.dtype
    } else {
        Dtype::Int64
    });
    let x = x.cast(out)?;
    let dims = x.dims().to_vec();
    // running sums along `d`, in float64 for floats (torch's CPU
    // accumulator), wrapping in int64 for integers
    let n = dims.get(d).copied().unwrap_or(1);
    let inner: usize = dims.get(d + 1..).map_or(1, |r| r.iter().product());
    let run = |len: usize, mut step: Box<dyn FnMut(usize, usize) + '_>| {
        if n == 0 {
            return;
        }
        for o in 0..len / (n * inner).max(1) {
            for i in 0..inner {
                for k in 1..n {
                    step((o * n + k - 1) * inner + i, (o * n + k) * inner + i);
                }
            }
        }
    };
    let vals = match elems(&x)? {
        Elems::I(mut v) => {
            let len = v.len();
            run(len, Box::new(|a, b| v[b] = v[b].wrapping_add(v[a])));
            Elems::I(v)
        }
        Elems::F(mut v) => {
            let len = v.len();
            run(len, Box::new(|a, b| v[b] += v[a]));
            Elems::F(v)
        }
    };
    one(from_elems(vals, &dims, out, ctx.device())?)
}

fn minmax_dim(ctx: &mut Ctx) -> OpResult {
    let x = ctx.tensor("self")?;
    if x.rank() == 0 {
        let zero = full_of(ctx, vec![], Num::Int(0), Dtype::Int64)?.remove(0);
        return Ok(vec![Value::Tensor(x), zero]);
    }
    let d = normalize_dim(ctx.int("dim")?, x.rank())?;
    let keep = ctx.opt_bool("keepdim", false)?;
    let is_max = ctx.node.target.name == "max";
    let v = if is_max {
        x.t.max_keepdim(d)
    } else {
        x.t.min_keepdim(d)
    }
    .and_then(|r| nan_or(&x.t, d, r));
    let (v, i) = (v?, arg_keepdim(&x.t, d, is_max)?);
    let (v, i) = if keep {
        (v, i)
    } else {
        (v.squeeze(d)?, i.squeeze(d)?)
    };
    Ok(vec![
        Value::Tensor(Tensor::new(v, x.dtype)),
        Value::Tensor(Tensor::new(i, Dtype::Int64)),
    ])
}

fn prod(ctx: &mut Ctx) -> OpResult {
    let x = ctx.tensor("self")?;
    let out = ctx.dtype("dtype").unwrap_or(if x.dtype.is_floating() {
        x.dtype
    } else {
        Dtype::Int64
    });
    let keep = ctx.opt_bool("keepdim", false)?;
    let x = x.cast(out)?;
    let vals = elems(&x)?;
    let dims = x.dims().to_vec();
    let d = match ctx.opt_int("dim")? {
        Some(d) => Some(normalize_dim(d, x.rank())?),
        None => None,
    };
    // (outer, n, inner) of the reduced dim; everything at once without one
    let (outer, n, inner, shape) = match d.filter(|_| !dims.is_empty()) {
        Some(d) => {
            let mut shape = dims.clone();
            if keep {
                shape[d] = 1;
            } else {
                shape.remove(d);
            }
            (dims[..d].iter().product::<usize>(), dims[d], dims[d + 1..].iter().product::<usize>(), shape)
        }
        None => (1, vals.len(), 1, if keep { vec![1; dims.len()] } else { vec![] }),
    };
    // products wrapping in int64 for integers, in float64 for floats
    let res = match &vals {
        Elems::I(v) => {
            let mut res = vec![1i64; outer * inner];
            for o in 0..outer {
                for k in 0..n {
                    for i in 0..inner {
                        let r = &mut res[o * inner + i];
                        *r = r.wrapping_mul(v[(o * n + k) * inner + i]);
                    }
                }
            }
            Elems::I(res)
        }
        // (each step rounded to the dtype torch accumulates in: float32,
        // or the float16 / bfloat16 the graph records, as torch's: a
        // product that underflows to 0 there times an infinity is NaN)
        Elems::F(v) if out != Dtype::Float64 => {
            let step: fn(f32) -> f32 = match ctx.recorded_dtype(0) {
                Some(Dtype::Float16) => |p| half::f16::from_f32(p).to_f32(),
                Some(Dtype::BFloat16) => |p| half::bf16::from_f32(p).to_f32(),
                _ => |p| p,
            };
            let mut res = vec![1f32; outer * inner];
            for o in 0..outer {
                for k in 0..n {
                    for i in 0..inner {
                        let r = &mut res[o * inner + i];
                        *r = step(*r * v[(o * n + k) * inner + i] as f32);
                    }
                }
            }
            Elems::F(res.into_iter().map(f64::from).collect())
        }
        Elems::F(v) => {
            let mut res = vec![1.0; outer * inner];
            for o in 0..outer {
                for k in 0..n {
                    for i in 0..inner {
                        res[o * inner + i] *= v[(o * n + k) * inner + i];
                    }
                }
            }
            Elems::F(res)
        }
    };
    one(from_elems(res, &shape, out, ctx.device())?)
}

fn var(ctx: &mut Ctx) -> OpResult {
    let x = ctx.tensor("self")?;
    let x = if x.dtype.is_floating() {
        x
    } else {
        x.cast(Dtype::Float32)?
    };
    let dims = reduce_dims(ctx, &x)?;
    let keep = ctx.opt_bool("keepdim", false)?;
    let correction = if ctx.has("correction") {
        ctx.float("correction")?
    } else if ctx.has("unbiased") {
        ctx.bool("unbiased")? as i64 as f64
    } else {
        1.0
    };
    let n: usize = dims.iter().map(|&d| x.dims()[d]).product();
    let t = x.t.to_dtype(DType::F64)?;
    // (the mean of nothing is NaN, and so the variance, as torch's)
    let mean = if n == 0 {
        let mut shape = x.dims().to_vec();
        dims.iter().for_each(|&d| shape[d] = 1);
        CandleTensor::full(f64::NAN, shape, x.t.device())?
    } else {
        t.mean_keepdim(dims.clone())?
    };
    let ss = t
        .broadcast_sub(&mean)
        .and_then(|c| c.sqr())
        .and_then(|c| c.sum_keepdim(dims.clone()))?;
    let v = if n == 0 {
        // (NaN: nothing to take a variance of)
        (mean.clone() * 1.0)?
    } else {
        (ss / (n as f64 - correction))?
    };
    let v = if keep { v } else { squeeze_dims(v, &dims)? };
    one(Tensor::new(v, Dtype::Float64).cast(x.dtype)?)
}

fn sort(ctx: &mut Ctx) -> OpResult {
    let x = ctx.tensor("self")?;
    if x.rank() == 0 {
        let zero = full_of(ctx, vec![], Num::Int(0), Dtype::Int64)?.remove(0);
        return Ok(vec![Value::Tensor(x), zero]);
    }
    let d = normalize_dim(ctx.opt_int("dim")?.unwrap_or(-1), x.rank())?;
    let desc = ctx.opt_bool("descending", false)?;
    // a stable order: torch's CPU sort is stable whether asked or not
    let n = x.dims()[d];
    let (v, i) = sorted_lines(ctx, &x, d, desc, n)?;
    Ok(vec![Value::Tensor(v), Value::Tensor(i)])
}

/// `histc(self, bins, min, max)` as torch's CPU kernel: the range is
/// `[min, max]`, or the data's own when `min == max` (and the data is not
/// empty), widened by 1 each way when still empty; a range that is not
/// finite (NaN data) or reversed is an error. An element outside the range
/// or NaN is left out; its bin is `trunc((x - min) * bins / (max - min))`
/// in the input's precision (float32 for float32, float16 and bfloat16),
/// and the last bin is closed. Counts in the input's dtype.
fn histc(ctx: &mut Ctx) -> OpResult {
    let x = ctx.tensor("self")?;
    let bins = ctx.int("bins")?;
    let name = &ctx.node.name;
    if !x.dtype.is_floating() {
        return Err(Error::bad_input(format!(
            "node {name}: histc takes a floating tensor, not {} (torch's CPU kernel has no integer form)",
            x.dtype
        )));
    }
    if bins <= 0 {
        return Err(Error::bad_input(format!(
            "node {name}: histc takes bins > 0, not {bins}"
        )));
    }
    let vals = host_f64(&x)?;
    let (mut lo, mut hi) = (ctx.float("min")?, ctx.float("max")?);
    if lo == hi && !vals.is_empty() {
        // aminmax: NaN propagates (and is refused below)
        let nan = vals.iter().any(|v| v.is_nan());
        lo = if nan { f64::NAN } else { vals.iter().copied().fold(f64::INFINITY, f64::min) };
        hi = if nan { f64::NAN } else { vals.iter().copied().fold(f64::NEG_INFINITY, f64::max) };
    }
    if lo == hi {
        lo -= 1.0;
        hi += 1.0;
    }
    if !lo.is_finite() || !hi.is_finite() {
        return Err(Error::bad_input(format!(
            "node {name}: torch.histc: range of [{lo}, {hi}] is not finite"
        )));
    }
    if lo >= hi {
        return Err(Error::bad_input(format!(
            "node {name}: torch.histc: max must be larger than min ({hi} <= {lo})"
        )));
    }
    let n = bins as usize;
    ctx.check_alloc(&[n], x.dtype)?;
    let mut counts = vec![0.0f64; n];
    if x.dtype == Dtype::Float64 {
        for &v in &vals {
            if v >= lo && v <= hi {
                let pos = ((v - lo) * bins as f64 / (hi - lo)) as usize;
                counts[pos.min(n - 1)] += 1.0;
            }
        }
    } else {
        let (lo, hi) = (lo as f32, hi as f32);
        for &v in &vals {
            let v = v as f32;
            if v >= lo && v <= hi {
                let pos = ((v - lo) * bins as f32 / (hi - lo)) as usize;
                counts[pos.min(n - 1)] += 1.0;
            }
        }
    }
    one(from_f64(&counts, &[n], x.dtype, ctx.device())?)
}

/// This family's rows: op identity -> implementation.
pub(super) const ROWS: &[(&str, OpFn)] = &[
    (aten::SUM, sum),
    (aten::HISTC, histc),
    (aten::SUM_DIM_INTLIST, sum),
    (aten::MEAN_DIM, mean),
    (aten::MEAN, mean),
    (aten::AMAX, amax),
    (aten::AMIN, amin),
    (aten::ANY_DIM, any),
    (aten::ANY_DIMS, any),
    (aten::ANY, any),
    (aten::ALL_DIM, all),
    (aten::ARGMAX, |ctx| arg_extreme(ctx, true)),
    (aten::TOPK, topk),
    (aten::MAX_DIM, minmax_dim),
    (aten::MIN_DIM, minmax_dim),
    (aten::ARGMIN, |ctx| arg_extreme(ctx, false)),
    (aten::PROD, prod),
    (aten::PROD_DIM_INT, prod),
    (aten::VAR_CORRECTION, var),
    (aten::VAR_DIM, var),
    (aten::SORT, sort),
    (aten::CUMSUM, cumsum),
];

#[cfg(test)]
mod tests {
    use super::*;

    /// The GPU's first-of-ties argmax, run on the host: torch's indices
    /// with ties and NaNs, along either dim (the expected ones from torch
    /// 2.x: `x.argmax(1)`, `x.argmin(0)`, `x.long().argmax(1)`).
    #[test]
    fn first_extreme_is_torchs_index() -> candle_core::Result<()> {
        let nan = f32::NAN;
        let x = CandleTensor::from_vec(
            vec![1f32, 3., 3., 0., 5., nan, 5., nan, 2., 2., 2., 2.],
            (3, 4),
            &candle_core::Device::Cpu,
        )?;
        let along = |d, largest| -> candle_core::Result<Vec<i64>> {
            first_extreme(&x, d, largest)?.flatten_all()?.to_vec1()
        };
        assert_eq!(along(1, true)?, [1, 1, 0]);
        assert_eq!(along(1, false)?, [3, 1, 0]);
        assert_eq!(along(0, true)?, [1, 1, 1, 1]);
        assert_eq!(along(0, false)?, [0, 1, 2, 1]);
        // ints: no NaN step
        let i = x.to_dtype(DType::I64)?;
        assert_eq!(first_extreme(&i, 1, true)?.flatten_all()?.to_vec1::<i64>()?, [1, 0, 0]);
        Ok(())
    }

    /// A global average pool's rows (the trailing dims given in either
    /// order) summed and averaged by [`trailing_rows_sum`], which must take
    /// them, against sums in f64: rows shorter than, equal to and past one
    /// and two vectors (the masked part), and MobileNetV3's 7x7 and 14x14,
    /// small (one thread) and large (split).
    #[test]
    fn trailing_rows_sum_is_each_rows_sum() -> Result<()> {
        for (h, w) in [(1, 1), (3, 5), (4, 4), (1, 17), (31, 1), (4, 8), (3, 11), (7, 7), (14, 14)] {
            for rows in [6, 300] {
                let n = h * w;
                let xs: Vec<f32> = (0..rows * n).map(|i| ((i * 7919) % 1000) as f32 / 37.0 - 13.0).collect();
                let x = CandleTensor::from_vec(xs.clone(), (2, rows / 2, h, w), &candle_core::Device::Cpu)?;
                for dims in [[3, 2], [2, 3]] {
                    for mean in [false, true] {
                        let got = trailing_rows_sum(&x, &dims, mean).expect("trailing dims are taken")?;
                        assert_eq!(got.dims(), [2, rows / 2, 1, 1]);
                        let got = got.flatten_all().and_then(|t| t.to_vec1::<f32>())?;
                        for (r, v) in got.into_iter().enumerate() {
                            let s: f64 = xs[r * n..][..n].iter().map(|&e| e as f64).sum();
                            let want = if mean { s / n as f64 } else { s };
                            assert!(
                                (v as f64 - want).abs() <= 1e-5 * (1.0 + want.abs()),
                                "{h}x{w} dims {dims:?} mean {mean} row {r}: {v} against {want}"
                            );
                        }
                    }
                }
            }
        }
        // not trailing, or rows of nothing: left to candle
        let x = CandleTensor::zeros((2, 3, 4), DType::F32, &candle_core::Device::Cpu)?;
        assert!(trailing_rows_sum(&x, &[0, 2], true).is_none());
        let x = CandleTensor::zeros((3, 0), DType::F32, &candle_core::Device::Cpu)?;
        assert!(trailing_rows_sum(&x, &[1], false).is_none());
        Ok(())
    }
}
