//! Normalisation: batch, layer, group and instance norm: the executor rows.

use crate::ir::op::aten;
use super::*;

fn channel_view(t: &Tensor, rank: usize) -> Result<CandleTensor> {
    let mut shape = vec![1usize; rank];
    shape[1] = t.t.elem_count();
    t.t.reshape(shape).map_err(Error::from)
}

/// Inference batch norm as one scale and one shift per channel, computed
/// on the (small) channel vectors, so the activation is touched twice.
/// `x * scale[c] + shift[c]` in one pass over a CPU float32 input (one
/// plane per batch and channel, the planes split between the threads), or
/// `None` for the device path.
fn batch_norm_host(x: &Tensor, scale: &CandleTensor, shift: &CandleTensor) -> Result<Option<Tensor>> {
    if x.dtype != Dtype::Float32 || x.rank() < 2 {
        return Ok(None);
    }
    let (Some(scale), Some(shift)) = (with_host(scale, |v: &[f32]| v.to_vec()), with_host(shift, |v: &[f32]| v.to_vec())) else {
        return Ok(None);
    };
    let dims = x.dims().to_vec();
    let c = dims[1];
    let plane: usize = dims[2..].iter().product();
    let y = with_host(&x.t, |xs: &[f32]| {
        let mut out = vec![0f32; xs.len()];
        crate::kernels::threads::par_chunks(&mut out, plane, |i, d| {
            let (a, b) = (scale[i % c], shift[i % c]);
            for (d, s) in d.iter_mut().zip(&xs[i * plane..]) {
                *d = s * a + b;
            }
        });
        out
    });
    match y {
        Some(v) => Ok(Some(Tensor::new(host_f32_tensor(v, &dims)?, Dtype::Float32))),
        None => Ok(None),
    }
}

fn batch_norm_core(
    x: &Tensor,
    w: Option<Tensor>,
    b: Option<Tensor>,
    mean: &Tensor,
    var: &Tensor,
    eps: f64,
) -> Result<Tensor> {
    let r = x.rank();
    let dt = x.dtype;
    let inv = (var.cast(dt)?.t + eps)
        .and_then(|v| v.sqrt())
        .and_then(|v| v.recip())?;
    let scale = match &w {
        Some(w) => inv.mul(&w.cast(dt)?.t)?,
        None => inv,
    };
    let mut shift = mean
        .cast(dt)?
        .t
        .mul(&scale)
        .and_then(|t| t.neg())?;
    if let Some(b) = &b {
        shift = shift.add(&b.cast(dt)?.t)?;
    }
    if let Some(y) = batch_norm_host(x, &scale, &shift)? {
        return Ok(y);
    }
    let scale = channel_view(&Tensor::new(scale, dt), r)?;
    let shift = channel_view(&Tensor::new(shift, dt), r)?;
    let y =
        x.t.broadcast_mul(&scale)
            .and_then(|t| t.broadcast_add(&shift))?;
    Ok(Tensor::new(y, dt))
}

fn batch_norm(ctx: &mut Ctx) -> OpResult {
    let x = ctx.tensor("input")?;
    let training = ctx.node.arg("training").is_some() && ctx.bool("training")?;
    if training {
        if ctx.node.target.name == "batch_norm"
            && ctx.opt_tensor("running_mean")?.is_none()
            && ctx.opt_tensor("running_var")?.is_none()
        {
            // the batch's statistics, nothing to update
            return batch_norm_legit(ctx);
        }
        // (with running statistics, functionalisation has made it
        // `_native_batch_norm_legit_functional` before it runs)
        return Err(unsupported(
            "batch norm in training mode updating running statistics in place",
        ));
    }
    let mean = ctx
        .opt_tensor("running_mean")?
        .ok_or_else(|| unsupported("batch norm without running stats"))?;
    let var = ctx
        .opt_tensor("running_var")?
        .ok_or_else(|| unsupported("batch norm without running stats"))?;
    let y = batch_norm_core(
        &x,
        ctx.opt_tensor("weight")?,
        ctx.opt_tensor("bias")?,
        &mean,
        &var,
        ctx.float("eps")?,
    )?;
    let mut outs = vec![Value::Tensor(y)];
    for i in 1..ctx.node.outputs.len() {
        // In inference torch returns empty save_mean / save_rstd.
        let empty = CandleTensor::zeros(0, storage_dtype(x.dtype)?, ctx.device())?;
        outs.push(if ctx.output_used(i) || ctx.node.outputs.len() == 3 {
            Value::Tensor(Tensor::new(empty, x.dtype))
        } else {
            Value::None
        });
    }
    Ok(outs)
}

/// Float32 layer norm on the host, row by row ([`vmath::layer_norm_rows`]);
/// `None` where it does not apply (other dtypes or devices, a weight or
/// bias not of the normalised size): candle's ops then.
fn layer_norm_host(ctx: &mut Ctx, x: &Tensor, dims: &[usize], eps: f64) -> Result<Option<Vec<Value>>> {
    if x.dtype != Dtype::Float32 || !x.t.device().is_cpu() {
        return Ok(None);
    }
    let n: usize = dims.iter().map(|&d| x.dims()[d]).product();
    let param = |t: Option<Tensor>| -> Option<Option<Vec<f32>>> {
        match t {
            None => Some(None),
            Some(t) if t.dtype == Dtype::Float32 && t.t.elem_count() == n => {
                with_host(&t.t, |v: &[f32]| v.to_vec()).map(Some)
            }
            Some(_) => None,
        }
    };
    let (Some(w), Some(b)) = (param(ctx.opt_tensor("weight")?), param(ctx.opt_tensor("bias")?)) else {
        return Ok(None);
    };
    let mut stat_shape = x.dims().to_vec();
    for &d in dims {
        stat_shape[d] = 1;
    }
    let (y, mean, rstd) = if n == 0 {
        // nothing to normalize: no output elements, each row's mean 0 and
        // its rstd NaN, as torch's (the rows are not the input's length
        // over n)
        let rows = stat_shape.iter().product();
        (Vec::new(), vec![0.0; rows], vec![f32::NAN; rows])
    } else {
        let Some(stats) = with_host(&x.t, |xs: &[f32]| {
            crate::kernels::vmath::layer_norm_rows(xs, n, w.as_deref(), b.as_deref(), eps as f32)
        }) else {
            return Ok(None);
        };
        stats
    };
    let mut outs = vec![Value::Tensor(Tensor::new(host_f32_tensor(y, x.dims())?, Dtype::Float32))];
    if ctx.node.outputs.len() == 3 {
        for v in [mean, rstd] {
            outs.push(Value::Tensor(Tensor::new(host_f32_tensor(v, &stat_shape)?, Dtype::Float32)));
        }
    }
    Ok(Some(outs))
}

/// `t` with NaN where it is not finite: the statistics of a row holding
/// an infinity, or whose squares overflow, are NaN in torch (Welford).
fn finite_or_nan(t: CandleTensor) -> Result<CandleTensor> {
    let finite = t.abs().and_then(|a| a.lt(f64::INFINITY))?;
    let nan = t.ones_like().and_then(|o| o.affine(f64::NAN, 0.0))?;
    finite.where_cond(&t, &nan).map_err(Error::from)
}

fn layer_norm(ctx: &mut Ctx) -> OpResult {
    let x = ctx.tensor("input")?;
    let shape = ctx.ints("normalized_shape")?;
    let eps = ctx.opt_float("eps")?.unwrap_or(1e-5);
    let dims: Vec<usize> = (x.rank() - shape.len()..x.rank()).collect();
    if let Some(outs) = layer_norm_host(ctx, &x, &dims, eps)? {
        return Ok(outs);
    }
    let compute = if x.dtype == Dtype::Float64 {
        DType::F64
    } else {
        DType::F32
    };
    let t = x.t.to_dtype(compute)?;
    let mean = finite_or_nan(t.mean_keepdim(dims.clone())?)?;
    let centered = t.broadcast_sub(&mean)?;
    let var = finite_or_nan(centered
        .sqr()
        .and_then(|c| c.mean_keepdim(dims.clone()))?)?;
    let rstd = (var + eps)
        .and_then(|v| v.sqrt())
        .and_then(|v| v.recip())?;
    let mut y = centered.broadcast_mul(&rstd)?;
    if let Some(w) = ctx.opt_tensor("weight")? {
        y = y
            .broadcast_mul(&w.t.to_dtype(compute)?)?;
    }
    if let Some(b) = ctx.opt_tensor("bias")? {
        y = y
            .broadcast_add(&b.t.to_dtype(compute)?)?;
    }
    let y = Tensor::new(y.to_dtype(storage_dtype(x.dtype)?)?, x.dtype);
    let mut outs = vec![Value::Tensor(y)];
    if ctx.node.outputs.len() == 3 {
        outs.push(Value::Tensor(Tensor::new(
            mean,
            if compute == DType::F64 {
                Dtype::Float64
            } else {
                Dtype::Float32
            },
        )));
        outs.push(Value::Tensor(Tensor::new(
            rstd,
            if compute == DType::F64 {
                Dtype::Float64
            } else {
                Dtype::Float32
            },
        )));
    }
    Ok(outs)
}

fn group_norm(ctx: &mut Ctx) -> OpResult {
    let x = ctx.tensor("input")?;
    let groups = ctx.int("group")? as usize;
    let eps = ctx.float("eps")?;
    let dims = x.dims().to_vec();
    let (n, c) = (dims[0], dims[1]);
    // (float64 in float64: its precision is the point of it)
    let (compute, stats) = if x.dtype == Dtype::Float64 {
        (DType::F64, Dtype::Float64)
    } else {
        (DType::F32, Dtype::Float32)
    };
    let t =
        x.t.to_dtype(compute)
            .and_then(|t| t.reshape((n, groups, ())))?;
    let mean = finite_or_nan(t.mean_keepdim(2)?)?;
    let centered = t.broadcast_sub(&mean)?;
    // (a variance that overflows stays inf: rstd 0, as torch's group
    // norm, whose sums of squares are no Welford moments)
    let var = centered.sqr().and_then(|v| v.mean_keepdim(2))?;
    let rstd = (var + eps)
        .and_then(|v| v.sqrt())
        .and_then(|v| v.recip())?;
    let mut y = centered
        .broadcast_mul(&rstd)
        .and_then(|y| y.reshape(dims.clone()))?;
    let mut cshape = vec![1usize; dims.len()];
    cshape[1] = c;
    if let Some(w) = ctx.opt_tensor("weight")? {
        y = y
            .broadcast_mul(
                &w.t.to_dtype(compute)
                    .and_then(|w| w.reshape(cshape.clone()))?,
            )?;
    }
    if let Some(b) = ctx.opt_tensor("bias")? {
        y = y
            .broadcast_add(
                &b.t.to_dtype(compute)
                    .and_then(|b| b.reshape(cshape.clone()))?,
            )?;
    }
    let y = Tensor::new(y, stats).cast(x.dtype)?;
    Ok(vec![
        Value::Tensor(y),
        Value::Tensor(Tensor::new(mean.squeeze(2)?, stats)),
        Value::Tensor(Tensor::new(rstd.squeeze(2)?, stats)),
    ])
}

/// `_native_batch_norm_legit` (`.default`, `.no_stats`) and
/// `_native_batch_norm_legit_functional`: in training, the batch's own
/// statistics (biased variance), returned as save_mean and save_invstd;
/// the functional form also returns the updated running statistics, as
/// torch's CPU kernel computes them (`momentum * batch + (1 - momentum) *
/// running`, the batch variance unbiased). `batch_norm` in training mode
/// without running statistics normalises the same way.
fn batch_norm_legit(ctx: &mut Ctx) -> OpResult {
    let has_stats = ctx.node.target.overload != "no_stats";
    if has_stats && !ctx.bool("training")? {
        let mut outs = batch_norm(ctx)?;
        if ctx.node.target.name == "_native_batch_norm_legit_functional" {
            // not training: the running statistics come back unchanged
            outs.truncate(3);
            outs.push(Value::Tensor(ctx.tensor("running_mean")?));
            outs.push(Value::Tensor(ctx.tensor("running_var")?));
        }
        return Ok(outs);
    }
    let x = ctx.tensor("input")?;
    if x.rank() < 2 {
        return Err(Error::bad_input("batch norm needs an input of rank >= 2"));
    }
    let eps = ctx.float("eps")?;
    let r = x.rank();
    let dims: Vec<usize> = (0..r).filter(|&d| d != 1).collect();
    // the statistics as torch keeps them (save_mean, save_invstd in their
    // recorded dtype: float16 for a float16 model), the output normalised
    // by those rounded values, as torch's kernel does
    let stats = ctx
        .recorded_dtype(1)
        .filter(|d| d.is_floating())
        .unwrap_or(if matches!(x.dtype, Dtype::Float16 | Dtype::BFloat16) {
            Dtype::Float32
        } else {
            x.dtype
        });
    let kept = |t: CandleTensor| -> Result<CandleTensor> {
        Ok(Tensor::new(t, Dtype::Float64).cast(stats)?.cast(Dtype::Float64)?.t)
    };
    let xf = x.t.to_dtype(DType::F64)?;
    let mean = xf.mean_keepdim(dims.clone())?;
    let var = xf
        .broadcast_sub(&mean)
        .and_then(|c| c.sqr())
        .and_then(|c| c.mean_keepdim(dims))?;
    let invstd = (var.clone() + eps)
        .and_then(|v| v.sqrt())
        .and_then(|v| v.recip())?;
    let batch_mean = mean.clone();
    let (mean, invstd) = (kept(mean)?, kept(invstd)?);
    let centered = xf.broadcast_sub(&mean)?;
    let mut y = centered.broadcast_mul(&invstd)?;
    if let Some(w) = ctx.opt_tensor("weight")? {
        y = y
            .broadcast_mul(&channel_view(&w.cast(Dtype::Float64)?, r)?)?;
    }
    if let Some(b) = ctx.opt_tensor("bias")? {
        y = y
            .broadcast_add(&channel_view(&b.cast(Dtype::Float64)?, r)?)?;
    }
    let c = x.dims()[1];
    let y = Value::Tensor(Tensor::new(y, Dtype::Float64).cast(x.dtype)?);
    if ctx.node.target.name == "batch_norm" {
        return Ok(vec![y]);
    }
    let flat = |t: CandleTensor, to: Dtype| -> Result<Value> {
        Ok(Value::Tensor(
            Tensor::new(t.reshape(c)?, Dtype::Float64).cast(to)?,
        ))
    };
    let mut outs = vec![y, flat(mean, stats)?, flat(invstd, stats)?];
    if ctx.node.target.name == "_native_batch_norm_legit_functional" {
        let count = x.t.elem_count() / c.max(1);
        if count < 2 {
            return Err(Error::bad_input(format!(
                "batch norm in training mode: expected more than 1 value per channel, got input of size {:?}",
                x.dims()
            )));
        }
        let m = ctx.float("momentum")?;
        let unbiased = (var * (count as f64 / (count - 1) as f64))?;
        for (name, batch) in [("running_mean", batch_mean), ("running_var", unbiased)] {
            let run = ctx.tensor(name)?;
            let old = run.t.to_dtype(DType::F64)?;
            let new = (batch.reshape(c)? * m)
                .and_then(|b| (old * (1.0 - m)).and_then(|o| o.add(&b)))?;
            outs.push(Value::Tensor(Tensor::new(new, Dtype::Float64).cast(run.dtype)?));
        }
    }
    Ok(outs)
}

/// This family's rows: op identity -> implementation.
pub(super) const ROWS: &[(&str, OpFn)] = &[
    (aten::BATCH_NORM, batch_norm),
    (
        aten::_NATIVE_BATCH_NORM_LEGIT_NO_TRAINING,
        batch_norm,
    ),
    (aten::LAYER_NORM, layer_norm),
    (aten::NATIVE_LAYER_NORM, layer_norm),
    (aten::NATIVE_GROUP_NORM, group_norm),
    (aten::_NATIVE_BATCH_NORM_LEGIT, batch_norm_legit),
    (aten::_NATIVE_BATCH_NORM_LEGIT_NO_STATS, batch_norm_legit),
    (
        aten::_NATIVE_BATCH_NORM_LEGIT_FUNCTIONAL,
        batch_norm_legit,
    ),
];
