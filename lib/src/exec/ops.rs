//! Op implementations, registered once by op identity in [`TABLE`].
//! Each reads its arguments by schema name through [`Ctx`] and returns one
//! value per node output. Where candle is narrower than ATen (per-dim
//! padding, pooling padding and ceil_mode, attention, bool and int8), the
//! gap is closed here with PyTorch's semantics.

use std::collections::HashMap;
use std::sync::OnceLock;

use candle_core::{DType, Tensor as CT};

use super::promote::{result_type, Rank};
use super::{ce, storage_dtype, Ctx, RV, T};
use crate::error::{Error, Result};
use crate::ir::{Argument, Dtype, Subgraph, Sym, ValueKind};

pub type OpFn = fn(&mut Ctx) -> Result<Vec<RV>>;

type R = Result<Vec<RV>>;

fn one(t: T) -> R {
    Ok(vec![RV::T(t)])
}

fn unsupported(what: impl Into<String>) -> Error {
    Error::unsupported(what.into())
}

/// Negative dims count from the end.
fn dim(d: i64, rank: usize) -> Result<usize> {
    let r = rank.max(1) as i64;
    let n = if d < 0 { d + r } else { d };
    if n < 0 || n >= r {
        return Err(Error::bad_input(format!(
            "dim {d} is out of range for rank {rank}"
        )));
    }
    Ok(n as usize)
}

fn scalar_tensor(v: f64, dtype: Dtype, dev: &candle_core::Device) -> Result<T> {
    let t = CT::new(v, dev)
        .map_err(ce)?
        .to_dtype(storage_dtype(dtype)?)
        .map_err(ce)?;
    Ok(T::new(t, dtype))
}

/// An elementwise operand: a tensor or a Python number.
enum Operand {
    T(T),
    S(f64, Dtype),
}

impl Operand {
    fn from_rv(v: RV) -> Result<Operand> {
        Ok(match v {
            RV::T(t) => Operand::T(t),
            RV::Int(i) => Operand::S(i as f64, Dtype::Int64),
            RV::Float(f) => Operand::S(f, Dtype::Float32),
            RV::Bool(b) => Operand::S(b as i64 as f64, Dtype::Bool),
            other => {
                return Err(Error::bad_input(format!(
                    "expected a tensor or a number, found {other:?}"
                )))
            }
        })
    }

    fn key(&self) -> (Dtype, Rank) {
        match self {
            Operand::T(t) if t.rank() == 0 => (t.dtype, Rank::ZeroDim),
            Operand::T(t) => (t.dtype, Rank::Dim),
            Operand::S(_, d) => (*d, Rank::Scalar),
        }
    }

    fn as_tensor(&self, dtype: Dtype, dev: &candle_core::Device) -> Result<CT> {
        match self {
            Operand::T(t) => Ok(t.cast(dtype)?.t),
            Operand::S(v, _) => Ok(scalar_tensor(*v, dtype, dev)?.t),
        }
    }
}

#[derive(Clone, Copy, PartialEq)]
enum Bin {
    Add,
    Sub,
    Mul,
    Div,
    Max,
    Min,
    Pow,
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
    And,
    Or,
    Xor,
}

fn binary_on(ctx: &Ctx, a: RV, b: RV, op: Bin, alpha: Option<f64>) -> R {
    let a = Operand::from_rv(a)?;
    let b = Operand::from_rv(b)?;
    let dev = ctx.device();
    let result = result_type(&[a.key(), b.key()]);
    let compute = match op {
        Bin::Div | Bin::Pow if !result.is_floating() => Dtype::Float32,
        _ => result,
    };
    let x = a.as_tensor(compute, dev)?;
    let mut y = b.as_tensor(compute, dev)?;
    if let Some(alpha) = alpha.filter(|a| *a != 1.0) {
        y = y
            .broadcast_mul(&scalar_tensor(alpha, compute, dev)?.t)
            .map_err(ce)?;
    }
    let logical = |t: &CT| t.ne(0f64);
    let t = match op {
        Bin::Add => x.broadcast_add(&y),
        Bin::Sub => x.broadcast_sub(&y),
        Bin::Mul => x.broadcast_mul(&y),
        Bin::Div => x.broadcast_div(&y),
        Bin::Max => x.broadcast_maximum(&y),
        Bin::Min => x.broadcast_minimum(&y),
        Bin::Pow => x.broadcast_pow(&y),
        Bin::Eq => x.broadcast_eq(&y),
        Bin::Ne => x.broadcast_ne(&y),
        Bin::Lt => x.broadcast_lt(&y),
        Bin::Le => x.broadcast_le(&y),
        Bin::Gt => x.broadcast_gt(&y),
        Bin::Ge => x.broadcast_ge(&y),
        Bin::And | Bin::Or | Bin::Xor => {
            // logical_*: nonzero is true whatever the dtype (the bitwise
            // ops on integers go through `bitwise` instead)
            let (p, q) = (logical(&x).map_err(ce)?, logical(&y).map_err(ce)?);
            match op {
                Bin::And => p.broadcast_mul(&q),
                Bin::Or => p.broadcast_maximum(&q),
                _ => p.broadcast_ne(&q),
            }
        }
    }
    .map_err(ce)?;
    let out_dtype = match op {
        Bin::Eq
        | Bin::Ne
        | Bin::Lt
        | Bin::Le
        | Bin::Gt
        | Bin::Ge
        | Bin::And
        | Bin::Or
        | Bin::Xor => Dtype::Bool,
        _ => compute,
    };
    one(T::new(t, out_dtype))
}

fn binary(ctx: &mut Ctx, op: Bin) -> R {
    let a = ctx.value("self")?;
    let b = ctx.value("other")?;
    let alpha = if ctx.has("alpha") {
        Some(ctx.float("alpha")?)
    } else {
        None
    };
    binary_on(ctx, a, b, op, alpha)
}

macro_rules! binary_ops {
    ($($name:ident => $op:expr;)*) => { $( fn $name(ctx: &mut Ctx) -> R { binary(ctx, $op) } )* };
}

binary_ops! {
    add => Bin::Add; sub => Bin::Sub; mul => Bin::Mul; maximum => Bin::Max; minimum => Bin::Min;
    eq => Bin::Eq; ne => Bin::Ne; lt => Bin::Lt; le => Bin::Le; gt => Bin::Gt; ge => Bin::Ge;
    logical_and => Bin::And; logical_or => Bin::Or; logical_xor => Bin::Xor;
}

fn div(ctx: &mut Ctx) -> R {
    let a = ctx.value("self")?;
    let b = ctx.value("other")?;
    let out = binary_on(ctx, a, b, Bin::Div, None)?;
    match ctx.string("rounding_mode")?.as_deref() {
        None => Ok(out),
        Some(mode) => {
            let RV::T(t) = &out[0] else { unreachable!() };
            let a = Operand::from_rv(ctx.value("self")?)?;
            let b = Operand::from_rv(ctx.value("other")?)?;
            let result = result_type(&[a.key(), b.key()]);
            let r = match mode {
                "floor" => t.t.floor(),
                "trunc" => {
                    t.t.ge(0f64)
                        .and_then(|p| p.where_cond(&t.t.floor()?, &t.t.ceil()?))
                }
                other => return Err(unsupported(format!("rounding_mode {other:?}"))),
            }
            .map_err(ce)?;
            one(T::new(r, t.dtype).cast(result)?)
        }
    }
}

fn pow(ctx: &mut Ctx) -> R {
    let a = ctx.value("self")?;
    let b = ctx.value("exponent")?;
    // A scalar exponent uses powf, which (unlike exp(log(x) * y)) is right
    // for negative bases; the result dtype is torch's.
    let e = match &b {
        RV::Int(i) => Some(*i as f64),
        RV::Float(f) => Some(*f),
        _ => None,
    };
    if let (RV::T(t), Some(e)) = (&a, e) {
        let out = result_type(&[
            (t.dtype, Rank::Dim),
            (
                if matches!(b, RV::Int(_)) {
                    Dtype::Int64
                } else {
                    Dtype::Float32
                },
                Rank::Scalar,
            ),
        ]);
        if e == 2.0 {
            return one(T::new(t.cast(out)?.t.sqr().map_err(ce)?, out));
        }
        let r =
            t.t.to_dtype(DType::F64)
                .and_then(|x| x.powf(e))
                .map_err(ce)?;
        return one(T::new(r, Dtype::Float64).cast(out)?);
    }
    binary_on(ctx, a, b, Bin::Pow, None)
}

fn rsub(ctx: &mut Ctx) -> R {
    let a = ctx.value("self")?;
    let b = ctx.value("other")?;
    let alpha = if ctx.has("alpha") {
        Some(ctx.float("alpha")?)
    } else {
        None
    };
    binary_on(ctx, b, a, Bin::Sub, alpha)
}

fn unary_float(ctx: &mut Ctx, f: fn(&CT) -> candle_core::Result<CT>) -> R {
    let x = ctx.tensor("self")?;
    let x = if x.dtype.is_floating() {
        x
    } else {
        x.cast(Dtype::Float32)?
    };
    one(T::new(f(&x.t).map_err(ce)?, x.dtype))
}

macro_rules! unary_ops {
    ($($name:ident => $f:expr;)*) => { $( fn $name(ctx: &mut Ctx) -> R { unary_float(ctx, $f) } )* };
}

unary_ops! {
    sin => |t| t.sin(); cos => |t| t.cos(); exp => |t| t.exp(); log => |t| t.log();
    tanh => |t| t.tanh(); sqrt => |t| t.sqrt(); erf => |t| t.erf();
    rsqrt => |t| t.sqrt()?.recip(); reciprocal => |t| t.recip();
    sigmoid => |t| (t.neg()?.exp()? + 1.0)?.recip();
    silu => |t| t.silu();
}

fn same_dtype_unary(ctx: &mut Ctx, f: fn(&CT) -> candle_core::Result<CT>) -> R {
    let x = ctx.tensor("self")?;
    one(T::new(f(&x.t).map_err(ce)?, x.dtype))
}

fn relu(ctx: &mut Ctx) -> R {
    same_dtype_unary(ctx, |t| t.relu())
}
fn neg(ctx: &mut Ctx) -> R {
    same_dtype_unary(ctx, |t| t.neg())
}
fn abs(ctx: &mut Ctx) -> R {
    same_dtype_unary(ctx, |t| t.abs())
}

fn gelu(ctx: &mut Ctx) -> R {
    let x = ctx.tensor("self")?;
    let t = match ctx.string("approximate")?.as_deref() {
        Some("tanh") => x.t.gelu(),
        _ => x.t.gelu_erf(),
    }
    .map_err(ce)?;
    one(T::new(t, x.dtype))
}

fn hardtanh(ctx: &mut Ctx) -> R {
    let x = ctx.tensor("self")?;
    let lo = ctx.opt_float("min_val")?.unwrap_or(-1.0);
    let hi = ctx.opt_float("max_val")?.unwrap_or(1.0);
    one(T::new(x.t.clamp(lo, hi).map_err(ce)?, x.dtype))
}

fn clamp(ctx: &mut Ctx) -> R {
    let x = ctx.tensor("self")?;
    let mut t = x.t.clone();
    if let Some(lo) = ctx.opt_float("min")? {
        t = t.maximum(lo).map_err(ce)?;
    }
    if let Some(hi) = ctx.opt_float("max")? {
        t = t.minimum(hi).map_err(ce)?;
    }
    one(T::new(t, x.dtype))
}

fn hardswish(ctx: &mut Ctx) -> R {
    let x = ctx.tensor("self")?;
    let t = (&x.t
        * ((&x.t + 3.0).map_err(ce)?.clamp(0f64, 6f64).map_err(ce)? / 6.0).map_err(ce)?)
    .map_err(ce)?;
    one(T::new(t, x.dtype))
}

fn hardsigmoid(ctx: &mut Ctx) -> R {
    let x = ctx.tensor("self")?;
    let t = ((&x.t + 3.0).map_err(ce)?.clamp(0f64, 6f64).map_err(ce)? / 6.0).map_err(ce)?;
    one(T::new(t, x.dtype))
}

fn logical_not(ctx: &mut Ctx) -> R {
    let x = ctx.tensor("self")?;
    one(T::new(x.t.eq(0f64).map_err(ce)?, Dtype::Bool))
}

fn where_self(ctx: &mut Ctx) -> R {
    let c = ctx.tensor("condition")?;
    let a = Operand::from_rv(ctx.value("self")?)?;
    let b = Operand::from_rv(ctx.value("other")?)?;
    let dt = result_type(&[a.key(), b.key()]);
    let x = a.as_tensor(dt, ctx.device())?;
    let y = b.as_tensor(dt, ctx.device())?;
    let shape = broadcast_shape(&[c.dims(), x.dims(), y.dims()])?;
    let t =
        c.t.broadcast_as(shape.clone())
            .and_then(|c| c.where_cond(&x.broadcast_as(shape.clone())?, &y.broadcast_as(shape)?))
            .map_err(ce)?;
    one(T::new(t, dt))
}

fn broadcast_shape(shapes: &[&[usize]]) -> Result<Vec<usize>> {
    let rank = shapes.iter().map(|s| s.len()).max().unwrap_or(0);
    let mut out = vec![1usize; rank];
    for s in shapes {
        for (i, &d) in s.iter().enumerate() {
            let o = &mut out[rank - s.len() + i];
            if *o == 1 {
                *o = d;
            } else if d != 1 && d != *o {
                return Err(Error::bad_input(format!(
                    "shapes {shapes:?} do not broadcast"
                )));
            }
        }
    }
    Ok(out)
}

// ------------------------------------------------------------ reductions

fn reduce_dims(ctx: &Ctx, x: &T) -> Result<Vec<usize>> {
    let dims = if ctx.node.arg("dim").is_some() {
        ctx.ints("dim")?
    } else {
        Vec::new()
    };
    if dims.is_empty() {
        return Ok((0..x.rank()).collect());
    }
    dims.iter().map(|&d| dim(d, x.rank())).collect()
}

fn squeeze_dims(t: CT, dims: &[usize]) -> Result<CT> {
    let mut sorted = dims.to_vec();
    sorted.sort_unstable();
    sorted.dedup();
    let mut t = t;
    for d in sorted.iter().rev() {
        t = t.squeeze(*d).map_err(ce)?;
    }
    Ok(t)
}

fn sum(ctx: &mut Ctx) -> R {
    let x = ctx.tensor("self")?;
    let out_dtype = ctx.dtype("dtype").unwrap_or(if x.dtype.is_floating() {
        x.dtype
    } else {
        Dtype::Int64
    });
    reduce_over_dims(ctx, x, out_dtype, |t, dims| t.sum_keepdim(dims))
}

fn mean(ctx: &mut Ctx) -> R {
    let x = ctx.tensor("self")?;
    let out_dtype = ctx.dtype("dtype").unwrap_or(x.dtype);
    reduce_over_dims(ctx, x, out_dtype, |t, dims| t.mean_keepdim(dims))
}

/// sum / mean: in `out_dtype`, over the `dim` argument (all dims when
/// absent), keeping or dropping the reduced dims.
fn reduce_over_dims(
    ctx: &Ctx,
    x: T,
    out_dtype: Dtype,
    f: fn(&CT, Vec<usize>) -> candle_core::Result<CT>,
) -> R {
    let x = x.cast(out_dtype)?;
    let dims = reduce_dims(ctx, &x)?;
    let keep = ctx.opt_bool("keepdim", false)?;
    if x.rank() == 0 {
        return one(x);
    }
    let t = f(&x.t, dims.clone()).map_err(ce)?;
    one(T::new(
        if keep { t } else { squeeze_dims(t, &dims)? },
        out_dtype,
    ))
}

fn reduce_each(
    ctx: &mut Ctx,
    f: fn(&CT, usize) -> candle_core::Result<CT>,
    out: Option<Dtype>,
) -> R {
    let x = ctx.tensor("self")?;
    let dims = reduce_dims(ctx, &x)?;
    let keep = ctx.opt_bool("keepdim", false)?;
    let mut t = x.t.clone();
    for &d in &dims {
        t = f(&t, d).map_err(ce)?;
    }
    let t = if keep { t } else { squeeze_dims(t, &dims)? };
    one(T::new(t, out.unwrap_or(x.dtype)))
}

fn amax(ctx: &mut Ctx) -> R {
    reduce_each(ctx, |t, d| t.max_keepdim(d), None)
}
fn amin(ctx: &mut Ctx) -> R {
    reduce_each(ctx, |t, d| t.min_keepdim(d), None)
}
fn any(ctx: &mut Ctx) -> R {
    reduce_each(ctx, |t, d| t.ne(0f64)?.max_keepdim(d), Some(Dtype::Bool))
}
fn all(ctx: &mut Ctx) -> R {
    reduce_each(ctx, |t, d| t.ne(0f64)?.min_keepdim(d), Some(Dtype::Bool))
}

fn argmax(ctx: &mut Ctx) -> R {
    let x = ctx.tensor("self")?;
    let keep = ctx.opt_bool("keepdim", false)?;
    let (t, d) = match ctx.opt_int("dim")? {
        Some(d) => (x.t.clone(), dim(d, x.rank())?),
        None => (x.t.flatten_all().map_err(ce)?, 0),
    };
    let r = t
        .argmax_keepdim(d)
        .map_err(ce)?
        .to_dtype(DType::I64)
        .map_err(ce)?;
    one(T::new(
        if keep { r } else { r.squeeze(d).map_err(ce)? },
        Dtype::Int64,
    ))
}

fn softmax_impl(x: &T, d: usize, log: bool) -> Result<T> {
    let x = if x.dtype.is_floating() {
        x.clone()
    } else {
        x.cast(Dtype::Float32)?
    };
    let compute = if x.dtype == Dtype::Float64 {
        DType::F64
    } else {
        DType::F32
    };
    let t = x.t.to_dtype(compute).map_err(ce)?;
    let max = t.max_keepdim(d).map_err(ce)?;
    let shifted = t.broadcast_sub(&max).map_err(ce)?;
    let e = shifted.exp().map_err(ce)?;
    let s = e.sum_keepdim(d).map_err(ce)?;
    let r = if log {
        shifted.broadcast_sub(&s.log().map_err(ce)?)
    } else {
        e.broadcast_div(&s)
    }
    .map_err(ce)?;
    Ok(T::new(
        r.to_dtype(storage_dtype(x.dtype)?).map_err(ce)?,
        x.dtype,
    ))
}

fn softmax(ctx: &mut Ctx) -> R {
    let x = ctx.tensor("self")?;
    let x = match ctx.dtype("dtype") {
        Some(d) => x.cast(d)?,
        None => x,
    };
    let d = dim(ctx.int("dim")?, x.rank())?;
    let log = ctx.node.target.name.contains("log_softmax");
    one(softmax_impl(&x, d, log)?)
}

// ------------------------------------------------------------ shapes

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

fn reshape(ctx: &mut Ctx) -> R {
    let x = ctx.tensor("self")?;
    let name = if ctx.node.arg("size").is_some() {
        "size"
    } else {
        "shape"
    };
    let shape = resolve_shape(&ctx.ints(name)?, x.t.elem_count())?;
    one(T::new(x.t.reshape(shape).map_err(ce)?, x.dtype))
}

fn permute(ctx: &mut Ctx) -> R {
    let x = ctx.tensor("self")?;
    let dims: Vec<usize> = ctx
        .ints("dims")?
        .iter()
        .map(|&d| dim(d, x.rank()))
        .collect::<Result<_>>()?;
    one(T::new(x.t.permute(dims).map_err(ce)?, x.dtype))
}

fn transpose(ctx: &mut Ctx) -> R {
    let x = ctx.tensor("self")?;
    if x.rank() < 2 {
        return one(x);
    }
    let (a, b) = if ctx.node.target.name == "t" {
        (0, 1)
    } else {
        (
            dim(ctx.int("dim0")?, x.rank())?,
            dim(ctx.int("dim1")?, x.rank())?,
        )
    };
    one(T::new(x.t.transpose(a, b).map_err(ce)?, x.dtype))
}

fn unsqueeze(ctx: &mut Ctx) -> R {
    let x = ctx.tensor("self")?;
    let d = dim(ctx.int("dim")?, x.rank() + 1)?;
    one(T::new(x.t.unsqueeze(d).map_err(ce)?, x.dtype))
}

fn squeeze(ctx: &mut Ctx) -> R {
    let x = ctx.tensor("self")?;
    let dims: Vec<usize> = if ctx.node.arg("dim").is_some() {
        ctx.ints("dim")?
            .iter()
            .map(|&d| dim(d, x.rank()))
            .collect::<Result<_>>()?
    } else {
        (0..x.rank()).collect()
    };
    let keep: Vec<usize> = dims.into_iter().filter(|&d| x.dims()[d] == 1).collect();
    one(T::new(squeeze_dims(x.t.clone(), &keep)?, x.dtype))
}

fn flatten(ctx: &mut Ctx) -> R {
    let x = ctx.tensor("self")?;
    if x.rank() == 0 {
        return one(T::new(x.t.reshape(1).map_err(ce)?, x.dtype));
    }
    let s = dim(ctx.opt_int("start_dim")?.unwrap_or(0), x.rank())?;
    let e = dim(ctx.opt_int("end_dim")?.unwrap_or(-1), x.rank())?;
    one(T::new(x.t.flatten(s, e).map_err(ce)?, x.dtype))
}

fn unflatten(ctx: &mut Ctx) -> R {
    let x = ctx.tensor("self")?;
    let d = dim(ctx.int("dim")?, x.rank())?;
    let sizes = resolve_shape(&ctx.ints("sizes")?, x.dims()[d])?;
    let mut shape = x.dims()[..d].to_vec();
    shape.extend(sizes);
    shape.extend_from_slice(&x.dims()[d + 1..]);
    one(T::new(x.t.reshape(shape).map_err(ce)?, x.dtype))
}

fn expand(ctx: &mut Ctx) -> R {
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
    one(T::new(x.t.broadcast_as(shape).map_err(ce)?, x.dtype))
}

fn identity(ctx: &mut Ctx) -> R {
    let x = ctx.tensor("self")?;
    one(T::new(x.t.contiguous().map_err(ce)?, x.dtype))
}

fn dropout(ctx: &mut Ctx) -> R {
    if ctx.has("train") && ctx.bool("train")? {
        return Err(unsupported(
            "dropout in training mode (export the model in eval mode)",
        ));
    }
    let x = ctx.tensor(if ctx.node.arg("input").is_some() {
        "input"
    } else {
        "self"
    })?;
    one(x)
}

fn select(ctx: &mut Ctx) -> R {
    let x = ctx.tensor("self")?;
    let d = dim(ctx.int("dim")?, x.rank())?;
    let n = x.dims()[d] as i64;
    let i = ctx.int("index")?;
    let i = if i < 0 { i + n } else { i };
    if i < 0 || i >= n {
        return Err(Error::bad_input(format!(
            "index {i} out of range for dim of size {n}"
        )));
    }
    one(T::new(
        x.t.narrow(d, i as usize, 1)
            .and_then(|t| t.squeeze(d))
            .map_err(ce)?,
        x.dtype,
    ))
}

fn slice(ctx: &mut Ctx) -> R {
    let x = ctx.tensor("self")?;
    let d = dim(ctx.opt_int("dim")?.unwrap_or(0), x.rank())?;
    let n = x.dims()[d] as i64;
    let clampi = |v: i64| if v < 0 { (v + n).max(0) } else { v.min(n) };
    let start = clampi(ctx.opt_int("start")?.unwrap_or(0));
    let end = clampi(ctx.opt_int("end")?.unwrap_or(n)).max(start);
    let step = ctx.opt_int("step")?.unwrap_or(1);
    if step <= 0 {
        return Err(Error::bad_input("slice step must be positive"));
    }
    let t = if step == 1 {
        x.t.narrow(d, start as usize, (end - start) as usize)
            .map_err(ce)?
    } else {
        let idx: Vec<u32> = (start..end)
            .step_by(step as usize)
            .map(|i| i as u32)
            .collect();
        let idx = CT::new(idx.as_slice(), ctx.device()).map_err(ce)?;
        x.t.index_select(&idx, d).map_err(ce)?
    };
    one(T::new(t, x.dtype))
}

fn cat(ctx: &mut Ctx) -> R {
    let ts: Vec<T> = ctx.tensors("tensors")?.into_iter().flatten().collect();
    let keys: Vec<(Dtype, Rank)> = ts.iter().map(|t| (t.dtype, Rank::Dim)).collect();
    let dt = result_type(&keys);
    let nonempty: Vec<T> = ts
        .into_iter()
        .filter(|t| !(t.rank() == 1 && t.dims()[0] == 0))
        .collect();
    let rank = nonempty.first().map(|t| t.rank()).unwrap_or(1);
    let d = dim(ctx.opt_int("dim")?.unwrap_or(0), rank)?;
    let parts: Vec<CT> = nonempty
        .iter()
        .map(|t| t.cast(dt).map(|t| t.t))
        .collect::<Result<_>>()?;
    let parts: Vec<CT> = parts
        .into_iter()
        .filter(|t| t.dims()[d] > 0 || t.elem_count() > 0)
        .collect();
    if parts.is_empty() {
        return Err(unsupported("cat of only empty tensors"));
    }
    one(T::new(CT::cat(&parts, d).map_err(ce)?, dt))
}

fn split(ctx: &mut Ctx) -> R {
    let x = ctx.tensor("self")?;
    let d = dim(ctx.opt_int("dim")?.unwrap_or(0), x.rank())?;
    let n = x.dims()[d];
    let sizes: Vec<usize> = if ctx.node.arg("split_sizes").is_some() {
        ctx.ints("split_sizes")?
            .iter()
            .map(|&s| s as usize)
            .collect()
    } else {
        let s = ctx.int("split_size")?.max(1) as usize;
        (0..n).step_by(s).map(|i| s.min(n - i)).collect()
    };
    let mut out = Vec::new();
    let mut at = 0;
    for s in sizes {
        out.push(RV::T(T::new(x.t.narrow(d, at, s).map_err(ce)?, x.dtype)));
        at += s;
    }
    Ok(vec![RV::List(out)])
}

fn to_copy(ctx: &mut Ctx) -> R {
    let x = ctx.tensor("self")?;
    let d = ctx.dtype("dtype").unwrap_or(x.dtype);
    one(x.cast(d)?)
}

fn assert_metadata(ctx: &mut Ctx) -> R {
    let x = ctx.tensor("a")?;
    if let Some(d) = ctx.dtype("dtype") {
        if d != x.dtype {
            return Err(Error::bad_input(format!(
                "tensor metadata assertion failed: dtype {} is not {}",
                x.dtype.torch_name(),
                d.torch_name()
            )));
        }
    }
    Ok(Vec::new())
}

fn sym_size(ctx: &mut Ctx) -> R {
    let x = ctx.tensor("self")?;
    let d = dim(ctx.int("dim")?, x.rank())?;
    Ok(vec![RV::Int(x.dims()[d] as i64)])
}

fn sym_numel(ctx: &mut Ctx) -> R {
    let x = ctx.tensor("self")?;
    Ok(vec![RV::Int(x.t.elem_count() as i64)])
}

/// `_operator.*` on symbolic integers.
fn py_operator(ctx: &mut Ctx) -> R {
    let num = |v: RV| match v {
        RV::Int(i) => Ok(i),
        RV::Bool(b) => Ok(b as i64),
        other => Err(unsupported(format!("symbolic operand {other:?}"))),
    };
    let a = num(ctx.input(0)?)?;
    let b = if ctx.node.inputs.len() > 1 {
        num(ctx.input(1)?)?
    } else {
        0
    };
    let int = |v: i64| Ok(vec![RV::Int(v)]);
    let boolean = |v: bool| Ok(vec![RV::Bool(v)]);
    match ctx.node.target.name.as_str() {
        "add" => int(a + b),
        "sub" => int(a - b),
        "mul" => int(a * b),
        "floordiv" if b != 0 => {
            int(a.div_euclid(b) - if a.rem_euclid(b) != 0 && b < 0 { 1 } else { 0 })
        }
        "mod" if b != 0 => int(a.rem_euclid(b)),
        "neg" => int(-a),
        "eq" => boolean(a == b),
        "ne" => boolean(a != b),
        "lt" => boolean(a < b),
        "le" => boolean(a <= b),
        "gt" => boolean(a > b),
        "ge" => boolean(a >= b),
        "sym_max" => int(a.max(b)),
        "sym_min" => int(a.min(b)),
        other => Err(unsupported(format!("symbolic function {other}"))),
    }
}

// ------------------------------------------------------------ creation

fn fill_value(ctx: &Ctx) -> Result<(f64, Dtype)> {
    Ok(match ctx.value("fill_value")? {
        RV::Int(i) => (i as f64, Dtype::Int64),
        RV::Float(f) => (f, Dtype::Float32),
        RV::Bool(b) => (b as i64 as f64, Dtype::Bool),
        RV::T(t) => (
            t.to_host()?.to_f64().first().copied().unwrap_or(0.0),
            t.dtype,
        ),
        other => return Err(Error::bad_input(format!("fill value {other:?}"))),
    })
}

fn full_of(ctx: &Ctx, shape: Vec<usize>, value: f64, dtype: Dtype) -> R {
    let t = CT::full(value, shape, ctx.device())
        .and_then(|t| {
            t.to_dtype(storage_dtype(dtype).map_err(|e| candle_core::Error::Msg(e.to_string()))?)
        })
        .map_err(ce)?;
    one(T::new(t, dtype))
}

fn creation(ctx: &mut Ctx) -> R {
    let name = ctx.node.target.name.clone();
    let like = name.ends_with("_like");
    let (shape, base_dtype) = if like {
        let x = ctx.tensor("self")?;
        (x.dims().to_vec(), x.dtype)
    } else if name.starts_with("new_") {
        let x = ctx.tensor("self")?;
        (
            ctx.ints("size")?.iter().map(|&s| s as usize).collect(),
            x.dtype,
        )
    } else {
        let size = ctx.ints("size")?;
        (size.iter().map(|&s| s as usize).collect(), Dtype::Float32)
    };
    let (value, value_dtype) = match name.trim_end_matches("_like").trim_start_matches("new_") {
        "zeros" => (0.0, base_dtype),
        "ones" => (1.0, base_dtype),
        "full" | "new_full" => {
            let (v, d) = fill_value(ctx)?;
            (v, if like { base_dtype } else { d })
        }
        "empty" | "new_empty" => (0.0, base_dtype),
        other => return Err(unsupported(other.to_string())),
    };
    let dtype = ctx
        .dtype("dtype")
        .unwrap_or(if like { base_dtype } else { value_dtype });
    full_of(ctx, shape, value, dtype)
}

fn scalar_tensor_op(ctx: &mut Ctx) -> R {
    let v = ctx.float("s")?;
    let d = ctx.dtype("dtype").unwrap_or(Dtype::Float32);
    one(scalar_tensor(v, d, ctx.device())?)
}

fn arange(ctx: &mut Ctx) -> R {
    let start = if ctx.has("start") {
        ctx.float("start")?
    } else {
        0.0
    };
    let end = ctx.float("end")?;
    let step = if ctx.has("step") {
        ctx.float("step")?
    } else {
        1.0
    };
    let all_int = ["start", "end", "step"].iter().all(|n| {
        !matches!(
            ctx.node.arg(n),
            Some(Argument::Float(_)) | Some(Argument::SymFloat(_))
        )
    });
    let dtype = ctx.dtype("dtype").unwrap_or(if all_int {
        Dtype::Int64
    } else {
        Dtype::Float32
    });
    let n = ((end - start) / step).ceil().max(0.0) as usize;
    let vals: Vec<f64> = (0..n).map(|i| start + i as f64 * step).collect();
    let t = CT::new(vals.as_slice(), ctx.device()).map_err(ce)?;
    one(T::new(t, Dtype::Float64).cast(dtype)?)
}

// ------------------------------------------------------------ linear algebra

fn matmul_t(a: &T, b: &T) -> Result<T> {
    let dt = result_type(&[(a.dtype, Rank::Dim), (b.dtype, Rank::Dim)]);
    let (x, y) = (a.cast(dt)?.t, b.cast(dt)?.t);
    let t = match (x.rank(), y.rank()) {
        (1, 1) => x
            .unsqueeze(0)
            .and_then(|x| x.matmul(&y.unsqueeze(1)?))
            .and_then(|t| t.reshape(())),
        (1, _) => x
            .unsqueeze(0)
            .and_then(|x| x.broadcast_matmul(&y))
            .and_then(|t| t.squeeze(t.rank() - 2)),
        (_, 1) => y
            .unsqueeze(1)
            .and_then(|y| x.broadcast_matmul(&y))
            .and_then(|t| t.squeeze(t.rank() - 1)),
        _ => x.broadcast_matmul(&y),
    }
    .map_err(ce)?;
    Ok(T::new(t, dt))
}

fn matmul(ctx: &mut Ctx) -> R {
    let a = ctx.tensor("self")?;
    let b = ctx.tensor(if ctx.node.arg("mat2").is_some() {
        "mat2"
    } else {
        "other"
    })?;
    one(matmul_t(&a, &b)?)
}

fn addmm(ctx: &mut Ctx) -> R {
    let bias = ctx.tensor("self")?;
    let a = ctx.tensor("mat1")?;
    let b = ctx.tensor("mat2")?;
    let beta = if ctx.has("beta") {
        ctx.float("beta")?
    } else {
        1.0
    };
    let alpha = if ctx.has("alpha") {
        ctx.float("alpha")?
    } else {
        1.0
    };
    let mut p = matmul_t(&a, &b)?;
    if alpha != 1.0 {
        p.t = p.t.affine(alpha, 0.0).map_err(ce)?;
    }
    let bias = bias.cast(p.dtype)?;
    let bias_t = if beta != 1.0 {
        bias.t.affine(beta, 0.0).map_err(ce)?
    } else {
        bias.t
    };
    one(T::new(p.t.broadcast_add(&bias_t).map_err(ce)?, p.dtype))
}

fn linear(ctx: &mut Ctx) -> R {
    let x = ctx.tensor("input")?;
    let w = ctx.tensor("weight")?;
    let wt = T::new(w.t.t().map_err(ce)?, w.dtype);
    let mut y = matmul_t(&x, &wt)?;
    if let Some(b) = ctx.opt_tensor("bias")? {
        y.t = y.t.broadcast_add(&b.cast(y.dtype)?.t).map_err(ce)?;
    }
    one(y)
}

fn embedding(ctx: &mut Ctx) -> R {
    let w = ctx.tensor("weight")?;
    let ids = ctx.tensor("indices")?;
    let flat = ids
        .t
        .flatten_all()
        .and_then(|t| t.to_dtype(DType::I64))
        .map_err(ce)?;
    let rows = w.t.index_select(&flat, 0).map_err(ce)?;
    let mut shape = ids.dims().to_vec();
    shape.push(w.dims()[1]);
    one(T::new(rows.reshape(shape).map_err(ce)?, w.dtype))
}

fn index_select(ctx: &mut Ctx) -> R {
    let x = ctx.tensor("self")?;
    let d = dim(ctx.int("dim")?, x.rank())?;
    let idx = ctx.tensor("index")?.cast(Dtype::Int64)?;
    if x.rank() == 0 {
        // a 0-d tensor indexes as one element and stays 0-d
        let t =
            x.t.reshape(1)
                .and_then(|t| t.index_select(&idx.t.flatten_all()?, 0))
                .and_then(|t| t.reshape(()))
                .map_err(ce)?;
        return one(T::new(t, x.dtype));
    }
    // candle's index_select reads only contiguous tensors
    let src = x.t.contiguous().map_err(ce)?;
    let idx = idx.t.contiguous().map_err(ce)?;
    one(T::new(src.index_select(&idx, d).map_err(ce)?, x.dtype))
}

/// `aten.index.Tensor`: advanced indexing with integer index tensors on
/// adjacent dims (broadcast together), as torch places the result.
fn index(ctx: &mut Ctx) -> R {
    let x = ctx.tensor("self")?;
    let idx = ctx.tensors("indices")?;
    let given: Vec<(usize, T)> = idx
        .clone()
        .into_iter()
        .enumerate()
        .filter_map(|(i, t)| t.map(|t| (i, t)))
        .collect();
    if given.is_empty() {
        return one(x);
    }
    let first = given[0].0;
    let k = given.len();
    if given
        .iter()
        .any(|(_, t)| matches!(t.dtype, Dtype::Bool | Dtype::Uint8))
        || given.iter().enumerate().any(|(j, (d, _))| *d != first + j)
    {
        // masks (the output shape depends on the data) and index tensors
        // split by slices: on the host
        return index_host(ctx, &x, &idx);
    }
    let dims = x.dims().to_vec();
    let shapes: Vec<&[usize]> = given.iter().map(|(_, t)| t.dims()).collect();
    let b = broadcast_shape(&shapes)?;
    // linear index over the indexed dims
    let mut linear: Option<CT> = None;
    for (d, t) in &given {
        let n = dims[*d] as f64;
        let i =
            t.t.to_dtype(DType::I64)
                .and_then(|i| i.broadcast_as(b.clone()))
                .map_err(ce)?;
        let i = i
            .lt(0f64)
            .and_then(|neg| neg.where_cond(&(&i + n)?, &i))
            .map_err(ce)?;
        linear = Some(match linear {
            None => i,
            Some(acc) => (acc * n).and_then(|acc| acc.add(&i)).map_err(ce)?,
        });
    }
    let linear = linear.unwrap().flatten_all().map_err(ce)?;
    // move the indexed dims to the front, merge them, select, then put the
    // broadcast dims where the first indexed dim was
    let mut order: Vec<usize> = (first..first + k).collect();
    order.extend((0..dims.len()).filter(|d| *d < first || *d >= first + k));
    let moved =
        x.t.permute(order.clone())
            .and_then(|t| t.contiguous())
            .map_err(ce)?;
    let merged: usize = dims[first..first + k].iter().product();
    let rest: Vec<usize> = order[k..].iter().map(|&d| dims[d]).collect();
    let mut shape = vec![merged];
    shape.extend(&rest);
    let sel = moved
        .reshape(shape)
        .and_then(|t| t.index_select(&linear, 0))
        .map_err(ce)?;
    let mut out_shape = b.clone();
    out_shape.extend(&rest);
    let mut t = sel.reshape(out_shape).map_err(ce)?;
    if first > 0 {
        // result dims: leading (non-indexed) dims, then b, then the rest
        let nb = b.len();
        let mut perm: Vec<usize> = (nb..nb + first).collect();
        perm.extend(0..nb);
        perm.extend(nb + first..nb + rest.len());
        t = t.permute(perm).map_err(ce)?;
    }
    one(T::new(t, x.dtype))
}

// ------------------------------------------------------------ convolution and pooling

fn pair(v: &[i64], default: usize) -> (usize, usize) {
    match v {
        [] => (default, default),
        [a] => (*a as usize, *a as usize),
        [a, b, ..] => (*a as usize, *b as usize),
    }
}

fn pad_hw(t: &CT, top: usize, bottom: usize, left: usize, right: usize, value: f64) -> Result<CT> {
    let rank = t.rank();
    let mut t = t.clone();
    if value == 0.0 {
        if top + bottom > 0 {
            t = t.pad_with_zeros(rank - 2, top, bottom).map_err(ce)?;
        }
        if left + right > 0 {
            t = t.pad_with_zeros(rank - 1, left, right).map_err(ce)?;
        }
        return Ok(t);
    }
    let pad = |t: CT, d: usize, a: usize, b: usize| -> Result<CT> {
        if a + b == 0 {
            return Ok(t);
        }
        let mut shape = t.dims().to_vec();
        let mut parts = Vec::new();
        if a > 0 {
            shape[d] = a;
            parts.push(
                CT::full(value, shape.clone(), t.device())
                    .and_then(|p| p.to_dtype(t.dtype()))
                    .map_err(ce)?,
            );
        }
        parts.push(t.clone());
        if b > 0 {
            shape[d] = b;
            parts.push(
                CT::full(value, shape.clone(), t.device())
                    .and_then(|p| p.to_dtype(t.dtype()))
                    .map_err(ce)?,
            );
        }
        CT::cat(&parts, d).map_err(ce)
    };
    let t = pad(t, rank - 2, top, bottom)?;
    pad(t, rank - 1, left, right)
}

/// 2-D convolution (one group, float32, CPU) as im2col in NCHW plus a
/// gemm: each row of the column matrix (one input channel and kernel tap)
/// is filled by its own task from contiguous input rows; the weights are
/// used as they lie (`[c_out, c_in * kh * kw]`), the output channels are
/// split between the threads (one single-threaded gemm each, which scales
/// better than one gemm asked to parallelise small products), and the bias
/// is the product's initial value. candle's own kernel converts the input
/// to NHWC and reshuffles the weights on every call, single-threaded; this
/// is about six times as fast on ResNet's 3x3s. Stride, padding and
/// dilation may differ per dim.
fn conv2d_im2col(
    x: &CT,
    w: &CT,
    bias: Option<&CT>,
    stride: (usize, usize),
    pad: (usize, usize),
    dil: (usize, usize),
) -> Result<CT> {
    use rayon::prelude::*;
    let (b, c, h, wd) = x.dims4().map_err(ce)?;
    let (co, ci, kh, kw) = w.dims4().map_err(ce)?;
    if ci != c {
        return Err(Error::bad_input(format!(
            "convolution: input has {c} channels, the weight expects {ci}"
        )));
    }
    let span = |n: usize, p: usize, d: usize, k: usize, s: usize| -> Result<usize> {
        (n + 2 * p)
            .checked_sub(d * (k - 1) + 1)
            .map(|v| v / s + 1)
            .ok_or_else(|| {
                Error::bad_input("convolution: the kernel is larger than the padded input")
            })
    };
    let (oh, ow) = (
        span(h, pad.0, dil.0, kh, stride.0)?,
        span(wd, pad.1, dil.1, kw, stride.1)?,
    );
    let xs: Vec<f32> = x.flatten_all().and_then(|t| t.to_vec1()).map_err(ce)?;
    let (k, n) = (c * kh * kw, oh * ow);
    let mut col: Vec<f32> = Vec::with_capacity(b * k * n);
    col.spare_capacity_mut()
        .par_chunks_mut(n)
        .enumerate()
        .for_each(|(row, out)| {
            let (bi, r) = (row / k, row % k);
            let (ch, ky, kx) = (r / (kh * kw), (r / kw) % kh, r % kw);
            let plane = &xs[(bi * c + ch) * h * wd..][..h * wd];
            let x0 = (kx * dil.1) as isize - pad.1 as isize;
            for oy in 0..oh {
                let dst = &mut out[oy * ow..(oy + 1) * ow];
                let iy = (oy * stride.0 + ky * dil.0) as isize - pad.0 as isize;
                if iy < 0 || iy >= h as isize {
                    dst.iter_mut().for_each(|d| {
                        d.write(0.0);
                    });
                    continue;
                }
                let src = &plane[iy as usize * wd..][..wd];
                // Output columns whose input column ox * s + x0 is inside
                // the row: [lo, hi); the rest read padding.
                let s1 = stride.1 as isize;
                let lo = if x0 >= 0 {
                    0
                } else {
                    ((-x0 + s1 - 1) / s1) as usize
                }
                .min(ow);
                let hi = if (wd as isize) <= x0 {
                    0
                } else {
                    ((wd as isize - x0 + s1 - 1) / s1) as usize
                }
                .clamp(lo, ow);
                dst[..lo].iter_mut().for_each(|d| {
                    d.write(0.0);
                });
                dst[hi..].iter_mut().for_each(|d| {
                    d.write(0.0);
                });
                let first = (lo as isize * s1 + x0) as usize;
                if stride.1 == 1 {
                    for (d, v) in dst[lo..hi].iter_mut().zip(&src[first..first + (hi - lo)]) {
                        d.write(*v);
                    }
                } else {
                    for (d, v) in dst[lo..hi]
                        .iter_mut()
                        .zip(src[first..].iter().step_by(stride.1))
                    {
                        d.write(*v);
                    }
                }
            }
        });
    // SAFETY: every element of the b * k * n chunks was written above.
    unsafe { col.set_len(b * k * n) };
    // out[bi] = W [co, k] @ col[bi] [k, n] (+ bias per row), the output
    // channels split between the threads, each a single-threaded gemm.
    let wv: Vec<f32>;
    let (ws, wl) = w.storage_and_layout();
    let wsl: &[f32] = match (&*ws, wl.contiguous_offsets()) {
        (candle_core::Storage::Cpu(candle_core::CpuStorage::F32(v)), Some((a, z))) => &v[a..z],
        _ => {
            wv = w.flatten_all().and_then(|t| t.to_vec1()).map_err(ce)?;
            &wv
        }
    };
    let bias: Option<Vec<f32>> = match bias {
        Some(t) => Some(t.flatten_all().and_then(|t| t.to_vec1()).map_err(ce)?),
        None => None,
    };
    let mut out: Vec<f32> = Vec::with_capacity(b * co * n);
    for bi in 0..b {
        let colb = &col[bi * k * n..(bi + 1) * k * n];
        for o in 0..co {
            let v = bias.as_ref().map_or(0.0, |bv| bv[o]);
            out.extend(std::iter::repeat_n(v, n));
        }
        let dst = &mut out[bi * co * n..(bi + 1) * co * n];
        let threads = rayon::current_num_threads().clamp(1, co);
        let rows = co.div_ceil(threads);
        dst.par_chunks_mut(rows * n).enumerate().for_each(|(t, d)| {
            let m = d.len() / n;
            let wrows = &wsl[t * rows * k..(t * rows + m) * k];
            // SAFETY: dst is m x n, lhs m x k and rhs k x n, all row-major
            // slices of exactly those sizes.
            unsafe {
                gemm::gemm(
                    m,
                    n,
                    k,
                    d.as_mut_ptr(),
                    1,
                    n as isize,
                    bias.is_some(),
                    wrows.as_ptr(),
                    1,
                    k as isize,
                    colb.as_ptr(),
                    1,
                    n as isize,
                    1.0,
                    1.0,
                    false,
                    false,
                    false,
                    gemm::Parallelism::None,
                );
            }
        });
    }
    drop(ws);
    CT::from_vec(out, (b, co, oh, ow), x.device()).map_err(ce)
}

fn conv(ctx: &mut Ctx) -> R {
    let x = ctx.tensor("input")?;
    let w = ctx.tensor("weight")?;
    let bias = ctx.opt_tensor("bias")?;
    let transposed = ctx.node.target.name == "convolution" && ctx.bool("transposed")?;
    let groups = ctx.opt_int("groups")?.unwrap_or(1) as usize;
    let stride = pair(&ctx.ints("stride").unwrap_or_default(), 1);
    let dilation = pair(&ctx.ints("dilation").unwrap_or_default(), 1);
    let padding = match ctx.node.arg("padding") {
        Some(Argument::String(s)) if s == "same" => {
            let (kh, kw) = (w.dims()[2], w.dims()[3]);
            ((dilation.0 * (kh - 1)) / 2, (dilation.1 * (kw - 1)) / 2)
        }
        Some(Argument::String(_)) => (0, 0),
        _ => pair(&ctx.ints("padding").unwrap_or_default(), 0),
    };
    if transposed {
        let uniform = |name: &str| -> Result<Option<usize>> {
            let v = if ctx.has(name) {
                ctx.ints(name)?
            } else {
                Vec::new()
            };
            Ok(match v.as_slice() {
                [] => Some(if name == "stride" || name == "dilation" {
                    1
                } else {
                    0
                }),
                [a, rest @ ..] if rest.iter().all(|b| b == a) => Some(*a as usize),
                _ => None,
            })
        };
        let params = (
            uniform("stride")?,
            uniform("padding")?,
            uniform("output_padding")?,
            uniform("dilation")?,
        );
        if let (4, 1, Dtype::Float32, Dtype::Float32, (Some(s), Some(p), Some(op), Some(d))) =
            (x.rank(), groups, x.dtype, w.dtype, params)
        {
            let mut y = x.t.conv_transpose2d(&w.t, p, op, s, d).map_err(ce)?;
            if let Some(b) = bias {
                let b = b
                    .cast(Dtype::Float32)?
                    .t
                    .reshape((1, b.dims()[0], 1, 1))
                    .map_err(ce)?;
                y = y.broadcast_add(&b).map_err(ce)?;
            }
            return one(T::new(y, Dtype::Float32));
        }
        return one(conv_transpose_host(ctx, &x, &w, bias, groups)?);
    }
    if x.rank() == 3 {
        // 1-D: candle's conv1d (padding, stride, dilation are the first values)
        let dt = result_type(&[(x.dtype, Rank::Dim), (w.dtype, Rank::Dim)]);
        let mut y = x
            .cast(dt)?
            .t
            .conv1d(&w.cast(dt)?.t, padding.0, stride.0, dilation.0, groups)
            .map_err(ce)?;
        if let Some(b) = bias {
            let b = b.cast(dt)?.t.reshape((1, b.dims()[0], 1)).map_err(ce)?;
            y = y.broadcast_add(&b).map_err(ce)?;
        }
        return one(T::new(y, dt));
    }
    if x.rank() != 4 {
        return Err(unsupported(format!(
            "convolution on rank {} (1-D and 2-D are implemented)",
            x.rank()
        )));
    }
    if transposed {
        return Err(unsupported("transposed convolution"));
    }
    let dt = result_type(&[(x.dtype, Rank::Dim), (w.dtype, Rank::Dim)]);
    let (xin, win) = (x.cast(dt)?.t, w.cast(dt)?.t);
    let one_by_one =
        win.dims()[2] == 1 && win.dims()[3] == 1 && stride == (1, 1) && padding == (0, 0);
    let mut y = if groups == 1 && dt == Dtype::Float32 && xin.device().is_cpu() && !one_by_one {
        {
            let b = match &bias {
                Some(b) => Some(b.cast(dt)?.t),
                None => None,
            };
            // the bias is added inside (fused into the product)
            return one(T::new(
                conv2d_im2col(&xin, &win, b.as_ref(), stride, padding, dilation)?,
                dt,
            ));
        }
    } else {
        if stride.0 != stride.1 || dilation.0 != dilation.1 {
            return Err(unsupported(
                "grouped convolution with different strides or dilations per dim",
            ));
        }
        let (xin, pad) = if padding.0 == padding.1 {
            (xin, padding.0)
        } else {
            // candle takes one padding for both dims: pad by hand when they differ
            (
                pad_hw(&xin, padding.0, padding.0, padding.1, padding.1, 0.0)?,
                0,
            )
        };
        xin.conv2d(&win, pad, stride.0, dilation.0, groups)
            .map_err(ce)?
    };
    if let Some(b) = bias {
        let b = b.cast(dt)?.t.reshape((1, b.dims()[0], 1, 1)).map_err(ce)?;
        y = y.broadcast_add(&b).map_err(ce)?;
    }
    one(T::new(y, dt))
}

fn max_pool(ctx: &mut Ctx) -> R {
    let x = ctx.tensor("self")?;
    let k = pair(&ctx.ints("kernel_size")?, 1);
    let s = ctx.ints("stride").unwrap_or_default();
    let s = if s.is_empty() { k } else { pair(&s, 1) };
    let p = pair(&ctx.ints("padding").unwrap_or_default(), 0);
    let d = pair(&ctx.ints("dilation").unwrap_or_default(), 1);
    if d != (1, 1) || (ctx.node.outputs.len() > 1 && ctx.output_used(1)) {
        return max_pool_host(ctx, &x, 2);
    }
    let ceil = ctx.opt_bool("ceil_mode", false)?;
    let (h, w) = (x.dims()[x.rank() - 2], x.dims()[x.rank() - 1]);
    let out = |n: usize, k: usize, s: usize, p: usize| {
        let span = n + 2 * p - k;
        let mut o = if ceil {
            span.div_ceil(s) + 1
        } else {
            span / s + 1
        };
        // the last window must start inside the input or left padding
        if ceil && (o - 1) * s >= n + p {
            o -= 1;
        }
        o
    };
    let (oh, ow) = (out(h, k.0, s.0, p.0), out(w, k.1, s.1, p.1));
    let extra_h = ((oh - 1) * s.0 + k.0).saturating_sub(h + 2 * p.0);
    let extra_w = ((ow - 1) * s.1 + k.1).saturating_sub(w + 2 * p.1);
    let padded = pad_hw(
        &x.t,
        p.0,
        p.0 + extra_h,
        p.1,
        p.1 + extra_w,
        f64::NEG_INFINITY,
    )?;
    let y = padded.max_pool2d_with_stride(k, s).map_err(ce)?;
    let mut outs = vec![RV::T(T::new(y, x.dtype))];
    if ctx.node.outputs.len() > 1 {
        outs.push(RV::None);
    }
    Ok(outs)
}

fn adaptive_avg_pool(ctx: &mut Ctx) -> R {
    let x = ctx.tensor("self")?;
    let (oh, ow) = pair(&ctx.ints("output_size")?, 1);
    let (h, w) = (x.dims()[x.rank() - 2], x.dims()[x.rank() - 1]);
    let t = if h % oh == 0 && w % ow == 0 {
        x.t.avg_pool2d_with_stride((h / oh, w / ow), (h / oh, w / ow))
            .map_err(ce)?
    } else {
        // general case: each output cell averages its own window
        let mut rows = Vec::new();
        for i in 0..oh {
            let (h0, h1) = (i * h / oh, ((i + 1) * h).div_ceil(oh));
            let mut cols = Vec::new();
            for j in 0..ow {
                let (w0, w1) = (j * w / ow, ((j + 1) * w).div_ceil(ow));
                let win =
                    x.t.narrow(x.rank() - 2, h0, h1 - h0)
                        .and_then(|t| t.narrow(x.rank() - 1, w0, w1 - w0))
                        .and_then(|t| t.mean_keepdim(vec![x.rank() - 2, x.rank() - 1]))
                        .map_err(ce)?;
                cols.push(win);
            }
            rows.push(CT::cat(&cols, x.rank() - 1).map_err(ce)?);
        }
        CT::cat(&rows, x.rank() - 2).map_err(ce)?
    };
    one(T::new(t, x.dtype))
}

fn avg_pool(ctx: &mut Ctx) -> R {
    let x = ctx.tensor("self")?;
    let k = pair(&ctx.ints("kernel_size")?, 1);
    let s = ctx.ints("stride").unwrap_or_default();
    let s = if s.is_empty() { k } else { pair(&s, 1) };
    let p = pair(&ctx.ints("padding").unwrap_or_default(), 0);
    if p != (0, 0)
        || ctx.opt_bool("ceil_mode", false)?
        || ctx.opt_int("divisor_override")?.is_some()
        || !x.dtype.is_floating()
    {
        if x.dtype.is_floating() && x.rank() >= 3 {
            return avg_pool2d_padded(ctx, &x, 2);
        }
        return avg_pool_host(ctx, &x, 2);
    }
    one(T::new(
        x.t.avg_pool2d_with_stride(k, s).map_err(ce)?,
        x.dtype,
    ))
}

// ------------------------------------------------------------ normalisation

fn channel_view(t: &T, rank: usize) -> Result<CT> {
    let mut shape = vec![1usize; rank];
    shape[1] = t.t.elem_count();
    t.t.reshape(shape).map_err(ce)
}

/// Inference batch norm as one scale and one shift per channel, computed
/// on the (small) channel vectors, so the activation is touched twice.
fn batch_norm_core(x: &T, w: Option<T>, b: Option<T>, mean: &T, var: &T, eps: f64) -> Result<T> {
    let r = x.rank();
    let dt = x.dtype;
    let inv = (var.cast(dt)?.t + eps)
        .and_then(|v| v.sqrt())
        .and_then(|v| v.recip())
        .map_err(ce)?;
    let scale = match &w {
        Some(w) => inv.mul(&w.cast(dt)?.t).map_err(ce)?,
        None => inv,
    };
    let mut shift = mean
        .cast(dt)?
        .t
        .mul(&scale)
        .and_then(|t| t.neg())
        .map_err(ce)?;
    if let Some(b) = &b {
        shift = shift.add(&b.cast(dt)?.t).map_err(ce)?;
    }
    let scale = channel_view(&T::new(scale, dt), r)?;
    let shift = channel_view(&T::new(shift, dt), r)?;
    let y =
        x.t.broadcast_mul(&scale)
            .and_then(|t| t.broadcast_add(&shift))
            .map_err(ce)?;
    Ok(T::new(y, dt))
}

fn batch_norm(ctx: &mut Ctx) -> R {
    let x = ctx.tensor("input")?;
    let training = ctx.node.arg("training").is_some() && ctx.bool("training")?;
    if training {
        return Err(unsupported(
            "batch norm in training mode (export the model in eval mode)",
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
    let mut outs = vec![RV::T(y)];
    for i in 1..ctx.node.outputs.len() {
        // In inference torch returns empty save_mean / save_rstd.
        let empty = CT::zeros(0, storage_dtype(x.dtype)?, ctx.device()).map_err(ce)?;
        outs.push(if ctx.output_used(i) || ctx.node.outputs.len() == 3 {
            RV::T(T::new(empty, x.dtype))
        } else {
            RV::None
        });
    }
    Ok(outs)
}

fn layer_norm(ctx: &mut Ctx) -> R {
    let x = ctx.tensor("input")?;
    let shape = ctx.ints("normalized_shape")?;
    let eps = ctx.opt_float("eps")?.unwrap_or(1e-5);
    let dims: Vec<usize> = (x.rank() - shape.len()..x.rank()).collect();
    let compute = if x.dtype == Dtype::Float64 {
        DType::F64
    } else {
        DType::F32
    };
    let t = x.t.to_dtype(compute).map_err(ce)?;
    let mean = t.mean_keepdim(dims.clone()).map_err(ce)?;
    let centered = t.broadcast_sub(&mean).map_err(ce)?;
    let var = centered
        .sqr()
        .and_then(|c| c.mean_keepdim(dims.clone()))
        .map_err(ce)?;
    let rstd = (var + eps)
        .and_then(|v| v.sqrt())
        .and_then(|v| v.recip())
        .map_err(ce)?;
    let mut y = centered.broadcast_mul(&rstd).map_err(ce)?;
    if let Some(w) = ctx.opt_tensor("weight")? {
        y = y
            .broadcast_mul(&w.t.to_dtype(compute).map_err(ce)?)
            .map_err(ce)?;
    }
    if let Some(b) = ctx.opt_tensor("bias")? {
        y = y
            .broadcast_add(&b.t.to_dtype(compute).map_err(ce)?)
            .map_err(ce)?;
    }
    let y = T::new(y.to_dtype(storage_dtype(x.dtype)?).map_err(ce)?, x.dtype);
    let mut outs = vec![RV::T(y)];
    if ctx.node.outputs.len() == 3 {
        outs.push(RV::T(T::new(
            mean,
            if compute == DType::F64 {
                Dtype::Float64
            } else {
                Dtype::Float32
            },
        )));
        outs.push(RV::T(T::new(
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

// ------------------------------------------------------------ attention and sorting

fn sdpa(ctx: &mut Ctx) -> R {
    let q = ctx.tensor("query")?;
    let k = ctx.tensor("key")?;
    let v = ctx.tensor("value")?;
    let d = *q.dims().last().unwrap_or(&1) as f64;
    let scale = ctx.opt_float("scale")?.unwrap_or(1.0 / d.sqrt());
    let kt = T::new(
        k.t.transpose(k.rank() - 2, k.rank() - 1).map_err(ce)?,
        k.dtype,
    );
    let mut s = matmul_t(&q, &kt)?;
    s.t = s.t.affine(scale, 0.0).map_err(ce)?;
    let (l, sk) = (s.dims()[s.rank() - 2], s.dims()[s.rank() - 1]);
    if ctx.opt_bool("is_causal", false)? {
        let mask: Vec<u8> = (0..l)
            .flat_map(|i| (0..sk).map(move |j| (j <= i) as u8))
            .collect();
        let m = CT::from_vec(mask, (l, sk), ctx.device()).map_err(ce)?;
        let ninf = CT::full(f32::NEG_INFINITY, s.dims(), ctx.device())
            .and_then(|t| t.to_dtype(s.t.dtype()))
            .map_err(ce)?;
        s.t = m
            .broadcast_as(s.dims())
            .and_then(|m| m.where_cond(&s.t, &ninf))
            .map_err(ce)?;
    }
    if let Some(mask) = ctx.opt_tensor("attn_mask")? {
        if mask.dtype == Dtype::Bool {
            let ninf = CT::full(f32::NEG_INFINITY, s.dims(), ctx.device())
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
    one(matmul_t(&p, &v)?)
}

fn topk(ctx: &mut Ctx) -> R {
    let x = ctx.tensor("self")?;
    let k = ctx.int("k")? as usize;
    let d = dim(ctx.opt_int("dim")?.unwrap_or(-1), x.rank())?;
    let largest = ctx.opt_bool("largest", true)?;
    let last = x.rank() - 1;
    let moved = if d == last {
        x.t.clone()
    } else {
        x.t.transpose(d, last).map_err(ce)?
    }
    .contiguous()
    .map_err(ce)?;
    let idx = moved
        .arg_sort_last_dim(!largest)
        .map_err(ce)?
        .narrow(last, 0, k)
        .map_err(ce)?
        .contiguous()
        .map_err(ce)?;
    let vals = moved.gather(&idx, last).map_err(ce)?;
    let back = |t: CT| {
        if d == last {
            Ok(t)
        } else {
            t.transpose(d, last).map_err(ce)
        }
    };
    let idx = back(idx.to_dtype(DType::I64).map_err(ce)?)?;
    Ok(vec![
        RV::T(T::new(back(vals)?, x.dtype)),
        RV::T(T::new(idx, Dtype::Int64)),
    ])
}

fn gather(ctx: &mut Ctx) -> R {
    let x = ctx.tensor("self")?;
    let d = dim(ctx.int("dim")?, x.rank())?;
    let idx = ctx.tensor("index")?.cast(Dtype::Int64)?;
    let t =
        x.t.contiguous()
            .and_then(|t| t.gather(&idx.t.contiguous()?, d))
            .map_err(ce)?;
    one(T::new(t, x.dtype))
}

fn cumsum(ctx: &mut Ctx) -> R {
    let x = ctx.tensor("self")?;
    let d = dim(ctx.int("dim")?, x.rank())?;
    let out = ctx.dtype("dtype").unwrap_or(if x.dtype.is_floating() {
        x.dtype
    } else {
        Dtype::Int64
    });
    let t =
        x.t.to_dtype(DType::F64)
            .and_then(|t| t.cumsum(d))
            .map_err(ce)?;
    one(T::new(t, Dtype::Float64).cast(out)?)
}

fn diff(ctx: &mut Ctx) -> R {
    let x = ctx.tensor("self")?;
    if ctx.opt_int("n")?.unwrap_or(1) != 1 {
        return Err(unsupported("diff with n > 1"));
    }
    let d = dim(ctx.opt_int("dim")?.unwrap_or(-1), x.rank())?;
    let mut parts = Vec::new();
    if let Some(p) = ctx.opt_tensor("prepend")? {
        parts.push(p.cast(x.dtype)?.t);
    }
    parts.push(x.t.clone());
    if let Some(a) = ctx.opt_tensor("append")? {
        parts.push(a.cast(x.dtype)?.t);
    }
    let full = CT::cat(&parts, d).map_err(ce)?;
    let n = full.dims()[d];
    if n == 0 {
        return one(T::new(full, x.dtype));
    }
    let (hi, lo) = (
        full.narrow(d, 1, n - 1).map_err(ce)?,
        full.narrow(d, 0, n - 1).map_err(ce)?,
    );
    let t = if x.dtype == Dtype::Bool {
        hi.ne(&lo)
    } else {
        hi.sub(&lo)
    }
    .map_err(ce)?;
    one(T::new(t, x.dtype))
}

/// `as_strided` reads the input's storage; the executor keeps tensors
/// row-major, so the input's recorded strides map each storage position
/// back to a logical element.
fn as_strided(ctx: &mut Ctx) -> R {
    let x = ctx.tensor("self")?;
    let size: Vec<usize> = ctx.ints("size")?.iter().map(|&s| s as usize).collect();
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
    let gather_idx: Vec<u32> =
        crate::ir::as_strided_gather(&in_sizes, &in_strides, in_offset, &size_i, &stride, offset)
            .ok_or_else(|| unsupported("as_strided reading storage the input does not cover"))?
            .into_iter()
            .map(|i| i as u32)
            .collect();
    let gi = CT::new(gather_idx.as_slice(), ctx.device()).map_err(ce)?;
    let t =
        x.t.flatten_all()
            .and_then(|t| t.index_select(&gi, 0))
            .and_then(|t| t.reshape(size))
            .map_err(ce)?;
    one(T::new(t, x.dtype))
}

fn sigmoid_ct(t: &CT) -> Result<CT> {
    t.neg()
        .and_then(|t| t.exp())
        .and_then(|t| t + 1.0)
        .and_then(|t| t.recip())
        .map_err(ce)
}

/// `aten.lstm.input`: unidirectional, no projections.
fn lstm(ctx: &mut Ctx) -> R {
    let x = ctx.tensor("input")?;
    let hx: Vec<T> = ctx.tensors("hx")?.into_iter().flatten().collect();
    let params: Vec<T> = ctx.tensors("params")?.into_iter().flatten().collect();
    let has_biases = ctx.bool("has_biases")?;
    let layers = ctx.int("num_layers")? as usize;
    if ctx.bool("bidirectional")? {
        return Err(unsupported("bidirectional LSTM"));
    }
    if ctx.bool("train")? && ctx.float("dropout")? > 0.0 {
        return Err(unsupported("LSTM dropout in training mode"));
    }
    let batch_first = ctx.bool("batch_first")?;
    let per_layer = if has_biases { 4 } else { 2 };
    if params.len() != per_layer * layers || hx.len() != 2 {
        return Err(unsupported(
            "LSTM with projections or an unexpected parameter layout",
        ));
    }
    let dt = x.dtype;
    let mut seq = if batch_first {
        x.t.transpose(0, 1).map_err(ce)?
    } else {
        x.t.clone()
    }; // [T, B, I]
    let steps = seq.dims()[0];
    let (mut h_n, mut c_n) = (Vec::new(), Vec::new());
    for l in 0..layers {
        let p = &params[l * per_layer..(l + 1) * per_layer];
        let w_ih = p[0].cast(dt)?.t.t().map_err(ce)?;
        let w_hh = p[1].cast(dt)?.t.t().map_err(ce)?;
        let bias = if has_biases {
            Some(p[2].cast(dt)?.t.add(&p[3].cast(dt)?.t).map_err(ce)?)
        } else {
            None
        };
        let mut h = hx[0].cast(dt)?.t.get(l).map_err(ce)?;
        let mut c = hx[1].cast(dt)?.t.get(l).map_err(ce)?;
        let hidden = h.dims()[1];
        let mut outs = Vec::with_capacity(steps);
        for t in 0..steps {
            let xt = seq.get(t).map_err(ce)?;
            let mut gates = xt
                .matmul(&w_ih)
                .and_then(|g| g.add(&h.matmul(&w_hh)?))
                .map_err(ce)?;
            if let Some(b) = &bias {
                gates = gates.broadcast_add(b).map_err(ce)?;
            }
            let chunk = |k: usize| gates.narrow(1, k * hidden, hidden).map_err(ce);
            let (i, f, g, o) = (
                sigmoid_ct(&chunk(0)?)?,
                sigmoid_ct(&chunk(1)?)?,
                chunk(2)?.tanh().map_err(ce)?,
                sigmoid_ct(&chunk(3)?)?,
            );
            c = f.mul(&c).and_then(|fc| fc.add(&i.mul(&g)?)).map_err(ce)?;
            h = o.mul(&c.tanh().map_err(ce)?).map_err(ce)?;
            outs.push(h.clone());
        }
        seq = CT::stack(&outs, 0).map_err(ce)?;
        h_n.push(h);
        c_n.push(c);
    }
    let output = if batch_first {
        seq.transpose(0, 1).map_err(ce)?
    } else {
        seq
    };
    Ok(vec![
        RV::T(T::new(output, dt)),
        RV::T(T::new(CT::stack(&h_n, 0).map_err(ce)?, dt)),
        RV::T(T::new(CT::stack(&c_n, 0).map_err(ce)?, dt)),
    ])
}

/// `higher_order.wrap_with_set_grad_enabled(enabled, subgraph, *operands)`:
/// gradients do not exist here, so it runs the subgraph.
fn wrap_with_set_grad_enabled(ctx: &mut Ctx) -> R {
    let sub = match ctx.input_arg(1) {
        Some(Argument::Graph(g)) => g,
        _ => {
            return Err(Error::bad_input(
                "wrap_with_set_grad_enabled without a subgraph",
            ))
        }
    };
    let operands = (2..ctx.node.inputs.len())
        .map(|i| ctx.input(i))
        .collect::<Result<Vec<_>>>()?;
    ctx.exec
        .run_graph(&sub.graph, operands, ctx.bindings)
        .map_err(|e| e.at(format!("subgraph '{}'", sub.name)))
}

// ------------------------------------------------------------ host fallbacks
//
// Ops candle lacks are computed elementwise on the host in f64: exact
// enough for every dtype here and simple; they are rare in real graphs.

fn from_f64(vals: &[f64], shape: &[usize], dtype: Dtype, dev: &candle_core::Device) -> Result<T> {
    let t = CT::from_slice(vals, shape, dev).map_err(ce)?;
    T::new(t, Dtype::Float64).cast(dtype)
}

fn host_unary_with(ctx: &mut Ctx, float_out: bool, f: impl Fn(f64) -> f64) -> R {
    let x = ctx.tensor("self")?;
    let out = if float_out && !x.dtype.is_floating() {
        Dtype::Float32
    } else {
        x.dtype
    };
    let vals: Vec<f64> = x.to_host()?.to_f64().into_iter().map(f).collect();
    one(from_f64(&vals, x.dims(), out, ctx.device())?)
}

macro_rules! host_unary_ops {
    ($($name:ident => $float:expr, $f:expr;)*) => {
        $( fn $name(ctx: &mut Ctx) -> R { host_unary_with(ctx, $float, $f) } )*
    };
}

host_unary_ops! {
    acos => true, f64::acos; acosh => true, f64::acosh; asin => true, f64::asin;
    asinh => true, f64::asinh; atan => true, f64::atan; atanh => true, f64::atanh;
    cosh => true, f64::cosh; sinh => true, f64::sinh; tan => true, f64::tan;
    expm1 => true, f64::exp_m1; log10 => true, f64::log10; log1p => true, f64::ln_1p;
    log2 => true, f64::log2;
    ceil => false, f64::ceil; floor => false, f64::floor; trunc => false, f64::trunc;
    round => false, |v: f64| { let r = v.round(); if (v - v.trunc()).abs() == 0.5 { 2.0 * (v / 2.0).round() } else { r } };
    sign => false, |v: f64| if v > 0.0 { 1.0 } else if v < 0.0 { -1.0 } else { 0.0 };
}

fn bool_unary(ctx: &mut Ctx, f: fn(f64) -> bool) -> R {
    let x = ctx.tensor("self")?;
    let vals: Vec<u8> = x
        .to_host()?
        .to_f64()
        .into_iter()
        .map(|v| f(v) as u8)
        .collect();
    let t = CT::from_vec(vals, x.dims(), ctx.device()).map_err(ce)?;
    one(T::new(t, Dtype::Bool))
}

fn isnan(ctx: &mut Ctx) -> R {
    bool_unary(ctx, f64::is_nan)
}
fn isinf(ctx: &mut Ctx) -> R {
    bool_unary(ctx, f64::is_infinite)
}

fn bitwise_not(ctx: &mut Ctx) -> R {
    let x = ctx.tensor("self")?;
    if x.dtype == Dtype::Bool {
        return one(T::new(x.t.eq(0f64).map_err(ce)?, Dtype::Bool));
    }
    if x.dtype.is_floating() {
        return Err(unsupported("bitwise_not on floats"));
    }
    host_unary_with(ctx, false, |v| !(v as i64) as f64)
}

fn elu(ctx: &mut Ctx) -> R {
    let alpha = ctx.opt_float("alpha")?.unwrap_or(1.0);
    let scale = ctx.opt_float("scale")?.unwrap_or(1.0);
    let input_scale = ctx.opt_float("input_scale")?.unwrap_or(1.0);
    host_unary_with(ctx, true, move |v| {
        if v > 0.0 {
            scale * v
        } else {
            scale * alpha * ((v * input_scale).exp() - 1.0)
        }
    })
}

fn leaky_relu(ctx: &mut Ctx) -> R {
    let slope = ctx.opt_float("negative_slope")?.unwrap_or(0.01);
    let x = ctx.tensor("self")?;
    let neg = x.t.affine(slope, 0.0).map_err(ce)?;
    let t =
        x.t.ge(0f64)
            .and_then(|m| m.where_cond(&x.t, &neg))
            .map_err(ce)?;
    one(T::new(t, x.dtype))
}

/// Elementwise binary on the host with broadcasting and torch's promotion.
fn host_binary(ctx: &mut Ctx, a: &str, b: &str, float_out: bool, f: impl Fn(f64, f64) -> f64) -> R {
    let x = Operand::from_rv(ctx.value(a)?)?;
    let y = Operand::from_rv(ctx.value(b)?)?;
    let mut dt = result_type(&[x.key(), y.key()]);
    if float_out && !dt.is_floating() {
        dt = Dtype::Float32;
    }
    let dev = ctx.device().clone();
    let xt = x.as_tensor(Dtype::Float64, &dev)?;
    let yt = y.as_tensor(Dtype::Float64, &dev)?;
    let shape = broadcast_shape(&[xt.dims(), yt.dims()])?;
    let xv = xt
        .broadcast_as(shape.clone())
        .and_then(|t| t.flatten_all())
        .and_then(|t| t.to_vec1::<f64>())
        .map_err(ce)?;
    let yv = yt
        .broadcast_as(shape.clone())
        .and_then(|t| t.flatten_all())
        .and_then(|t| t.to_vec1::<f64>())
        .map_err(ce)?;
    let vals: Vec<f64> = xv.iter().zip(&yv).map(|(p, q)| f(*p, *q)).collect();
    one(from_f64(&vals, &shape, dt, &dev)?)
}

fn atan2(ctx: &mut Ctx) -> R {
    host_binary(ctx, "self", "other", true, f64::atan2)
}
fn fmod(ctx: &mut Ctx) -> R {
    host_binary(ctx, "self", "other", false, |a, b| a % b)
}
fn remainder(ctx: &mut Ctx) -> R {
    host_binary(ctx, "self", "other", false, |a, b| {
        let r = a % b;
        if r != 0.0 && ((r < 0.0) != (b < 0.0)) {
            r + b
        } else {
            r
        }
    })
}
fn pow_scalar_base(ctx: &mut Ctx) -> R {
    host_binary(ctx, "self", "exponent", false, f64::powf)
}

fn clamp_tensor(ctx: &mut Ctx) -> R {
    let x = ctx.tensor("self")?;
    let mut out = RV::T(x);
    if ctx.has("min") {
        let lo = ctx.value("min")?;
        out = binary_on(ctx, out, lo, Bin::Max, None)?.remove(0);
    }
    if ctx.has("max") {
        let hi = ctx.value("max")?;
        out = binary_on(ctx, out, hi, Bin::Min, None)?.remove(0);
    }
    Ok(vec![out])
}

fn minmax_dim(ctx: &mut Ctx) -> R {
    let x = ctx.tensor("self")?;
    if x.rank() == 0 {
        let zero = full_of(ctx, vec![], 0.0, Dtype::Int64)?.remove(0);
        return Ok(vec![RV::T(x), zero]);
    }
    let d = dim(ctx.int("dim")?, x.rank())?;
    let keep = ctx.opt_bool("keepdim", false)?;
    let is_max = ctx.node.target.name == "max";
    let (v, i) = if is_max {
        (x.t.max_keepdim(d), x.t.argmax_keepdim(d))
    } else {
        (x.t.min_keepdim(d), x.t.argmin_keepdim(d))
    };
    let (v, i) = (
        v.map_err(ce)?,
        i.and_then(|i| i.to_dtype(DType::I64)).map_err(ce)?,
    );
    let (v, i) = if keep {
        (v, i)
    } else {
        (v.squeeze(d).map_err(ce)?, i.squeeze(d).map_err(ce)?)
    };
    Ok(vec![
        RV::T(T::new(v, x.dtype)),
        RV::T(T::new(i, Dtype::Int64)),
    ])
}

fn argmin(ctx: &mut Ctx) -> R {
    let x = ctx.tensor("self")?;
    let keep = ctx.opt_bool("keepdim", false)?;
    let (t, d) = match ctx.opt_int("dim")? {
        Some(d) => (x.t.clone(), dim(d, x.rank())?),
        None => (x.t.flatten_all().map_err(ce)?, 0),
    };
    let r = t
        .argmin_keepdim(d)
        .and_then(|t| t.to_dtype(DType::I64))
        .map_err(ce)?;
    one(T::new(
        if keep { r } else { r.squeeze(d).map_err(ce)? },
        Dtype::Int64,
    ))
}

fn prod(ctx: &mut Ctx) -> R {
    let x = ctx.tensor("self")?;
    let out = ctx.dtype("dtype").unwrap_or(if x.dtype.is_floating() {
        x.dtype
    } else {
        Dtype::Int64
    });
    let keep = ctx.opt_bool("keepdim", false)?;
    let h = x.to_host()?;
    let vals = h.to_f64();
    let dims = x.dims().to_vec();
    let d = match ctx.opt_int("dim")? {
        Some(d) => Some(dim(d, x.rank())?),
        None => None,
    };
    let Some(d) = d.filter(|_| !dims.is_empty()) else {
        return one(from_f64(&[vals.iter().product()], &[], out, ctx.device())?);
    };
    let outer: usize = dims[..d].iter().product();
    let inner: usize = dims[d + 1..].iter().product();
    let n = dims[d];
    let mut res = vec![1.0; outer * inner];
    for o in 0..outer {
        for k in 0..n {
            for i in 0..inner {
                res[o * inner + i] *= vals[(o * n + k) * inner + i];
            }
        }
    }
    let mut shape = dims.clone();
    if keep {
        shape[d] = 1;
    } else {
        shape.remove(d);
    }
    one(from_f64(&res, &shape, out, ctx.device())?)
}

fn var(ctx: &mut Ctx) -> R {
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
    let t = x.t.to_dtype(DType::F64).map_err(ce)?;
    let mean = t.mean_keepdim(dims.clone()).map_err(ce)?;
    let ss = t
        .broadcast_sub(&mean)
        .and_then(|c| c.sqr())
        .and_then(|c| c.sum_keepdim(dims.clone()))
        .map_err(ce)?;
    let v = (ss / (n as f64 - correction)).map_err(ce)?;
    let v = if keep { v } else { squeeze_dims(v, &dims)? };
    one(T::new(v, Dtype::Float64).cast(x.dtype)?)
}

fn flip(ctx: &mut Ctx) -> R {
    let x = ctx.tensor("self")?;
    let mut t = x.t.clone();
    for d in ctx.ints("dims")? {
        let d = dim(d, x.rank())?;
        let n = x.dims()[d];
        let idx: Vec<u32> = (0..n as u32).rev().collect();
        t = t
            .index_select(&CT::new(idx.as_slice(), ctx.device()).map_err(ce)?, d)
            .map_err(ce)?;
    }
    one(T::new(t, x.dtype))
}

fn repeat(ctx: &mut Ctx) -> R {
    let x = ctx.tensor("self")?;
    let reps: Vec<usize> = ctx.ints("repeats")?.iter().map(|&r| r as usize).collect();
    let mut t = x.t.clone();
    while t.rank() < reps.len() {
        t = t.unsqueeze(0).map_err(ce)?;
    }
    let t = t.repeat(reps).map_err(ce)?;
    one(T::new(t, x.dtype))
}

fn constant_pad(ctx: &mut Ctx) -> R {
    let x = ctx.tensor("self")?;
    let pad = ctx.ints("pad")?;
    let value = ctx.opt_float("value")?.unwrap_or(0.0);
    let mut t = x.t.clone();
    for (k, pair) in pad.chunks(2).enumerate() {
        let d = x.rank() - 1 - k;
        let (before, after) = (pair[0], *pair.get(1).unwrap_or(&0));
        if before < 0 || after < 0 {
            let n = t.dims()[d] as i64;
            let start = (-before).max(0);
            let end = n + after.min(0);
            t = t
                .narrow(d, start as usize, (end - start).max(0) as usize)
                .map_err(ce)?;
        }
        let (b, a) = (before.max(0) as usize, after.max(0) as usize);
        if b + a > 0 {
            let mut shape = t.dims().to_vec();
            let mut parts = Vec::new();
            let filled = |n: usize, shape: &mut Vec<usize>| -> Result<CT> {
                shape[d] = n;
                CT::full(value, shape.clone(), t.device())
                    .and_then(|p| p.to_dtype(t.dtype()))
                    .map_err(ce)
            };
            if b > 0 {
                parts.push(filled(b, &mut shape)?);
            }
            parts.push(t.clone());
            if a > 0 {
                parts.push(filled(a, &mut shape)?);
            }
            t = CT::cat(&parts, d).map_err(ce)?;
        }
    }
    one(T::new(t, x.dtype))
}

fn fill_scalar(ctx: &mut Ctx) -> R {
    let x = ctx.tensor("self")?;
    let v = ctx.float("value")?;
    full_of(ctx, x.dims().to_vec(), v, x.dtype)
}

fn copy(ctx: &mut Ctx) -> R {
    let x = ctx.tensor("self")?;
    let src = ctx.tensor("src")?.cast(x.dtype)?;
    one(T::new(
        src.t
            .broadcast_as(x.dims())
            .and_then(|t| t.contiguous())
            .map_err(ce)?,
        x.dtype,
    ))
}

fn sort(ctx: &mut Ctx) -> R {
    let x = ctx.tensor("self")?;
    let d = dim(ctx.opt_int("dim")?.unwrap_or(-1), x.rank())?;
    let desc = ctx.opt_bool("descending", false)?;
    if x.rank() == 0 {
        let zero = full_of(ctx, vec![], 0.0, Dtype::Int64)?.remove(0);
        return Ok(vec![RV::T(x), zero]);
    }
    let last = x.rank() - 1;
    let moved = if d == last {
        x.t.clone()
    } else {
        x.t.transpose(d, last).map_err(ce)?
    }
    .contiguous()
    .map_err(ce)?;
    // arg_sort is not stable; torch's sort with stable=False is not either,
    // but a stable order is what torch returns on CPU for small inputs.
    let h = T::new(moved.clone(), x.dtype).to_host()?;
    let vals = h.to_f64();
    let n = *moved.dims().last().unwrap_or(&1);
    let mut idx = Vec::with_capacity(vals.len());
    for row in vals.chunks(n.max(1)) {
        let mut order: Vec<usize> = (0..row.len()).collect();
        order.sort_by(|&a, &b| {
            let o = row[a]
                .partial_cmp(&row[b])
                .unwrap_or_else(|| row[a].is_nan().cmp(&row[b].is_nan()));
            if desc {
                o.reverse()
            } else {
                o
            }
        });
        idx.extend(order.into_iter().map(|i| i as i64));
    }
    let it = CT::from_vec(idx, moved.dims(), ctx.device()).map_err(ce)?;
    let sorted = moved.gather(&it, last).map_err(ce)?;
    let back = |t: CT| {
        if d == last {
            Ok(t)
        } else {
            t.transpose(d, last).map_err(ce)
        }
    };
    Ok(vec![
        RV::T(T::new(back(sorted)?, x.dtype)),
        RV::T(T::new(back(it)?, Dtype::Int64)),
    ])
}

fn upsample_nearest(ctx: &mut Ctx) -> R {
    let x = ctx.tensor("input")?;
    let (h, w) = (x.dims()[x.rank() - 2], x.dims()[x.rank() - 1]);
    let (oh, ow) = if ctx.has("output_size") {
        pair(&ctx.ints("output_size")?, 1)
    } else {
        let scales = match ctx.node.arg("scale_factors") {
            Some(Argument::Floats(v)) => v.clone(),
            _ => return Err(unsupported("upsample without output_size or scale factors")),
        };
        (
            (h as f64 * scales[0]).floor() as usize,
            (w as f64 * scales[scales.len() - 1]).floor() as usize,
        )
    };
    // torch picks floor(out_index * in / out): build the index lists
    let rows: Vec<u32> = (0..oh).map(|i| ((i * h) / oh) as u32).collect();
    let cols: Vec<u32> = (0..ow).map(|j| ((j * w) / ow) as u32).collect();
    let t =
        x.t.index_select(
            &CT::new(rows.as_slice(), ctx.device()).map_err(ce)?,
            x.rank() - 2,
        )
        .and_then(|t| t.index_select(&CT::new(cols.as_slice(), ctx.device())?, x.rank() - 1))
        .map_err(ce)?;
    one(T::new(t, x.dtype))
}

fn group_norm(ctx: &mut Ctx) -> R {
    let x = ctx.tensor("input")?;
    let groups = ctx.int("group")? as usize;
    let eps = ctx.float("eps")?;
    let dims = x.dims().to_vec();
    let (n, c) = (dims[0], dims[1]);
    let t =
        x.t.to_dtype(DType::F32)
            .and_then(|t| t.reshape((n, groups, ())))
            .map_err(ce)?;
    let mean = t.mean_keepdim(2).map_err(ce)?;
    let centered = t.broadcast_sub(&mean).map_err(ce)?;
    let var = centered.sqr().and_then(|v| v.mean_keepdim(2)).map_err(ce)?;
    let rstd = (var + eps)
        .and_then(|v| v.sqrt())
        .and_then(|v| v.recip())
        .map_err(ce)?;
    let mut y = centered
        .broadcast_mul(&rstd)
        .and_then(|y| y.reshape(dims.clone()))
        .map_err(ce)?;
    let mut cshape = vec![1usize; dims.len()];
    cshape[1] = c;
    if let Some(w) = ctx.opt_tensor("weight")? {
        y = y
            .broadcast_mul(
                &w.t.to_dtype(DType::F32)
                    .and_then(|w| w.reshape(cshape.clone()))
                    .map_err(ce)?,
            )
            .map_err(ce)?;
    }
    if let Some(b) = ctx.opt_tensor("bias")? {
        y = y
            .broadcast_add(
                &b.t.to_dtype(DType::F32)
                    .and_then(|b| b.reshape(cshape.clone()))
                    .map_err(ce)?,
            )
            .map_err(ce)?;
    }
    let y = T::new(y, Dtype::Float32).cast(x.dtype)?;
    Ok(vec![
        RV::T(y),
        RV::T(T::new(mean.squeeze(2).map_err(ce)?, Dtype::Float32)),
        RV::T(T::new(rstd.squeeze(2).map_err(ce)?, Dtype::Float32)),
    ])
}

fn local_scalar(ctx: &mut Ctx) -> R {
    let x = ctx.tensor("self")?;
    let v = x.to_host()?.to_f64().first().copied().unwrap_or(0.0);
    Ok(vec![if x.dtype.is_floating() {
        RV::Float(v)
    } else if x.dtype == Dtype::Bool {
        RV::Bool(v != 0.0)
    } else {
        RV::Int(v as i64)
    }])
}

fn sym_stride(ctx: &mut Ctx) -> R {
    let x = ctx.tensor("self")?;
    let d = dim(ctx.int("dim")?, x.rank())?;
    Ok(vec![RV::Int(
        crate::ir::contiguous_strides(&x.dims().iter().map(|&v| v as i64).collect::<Vec<_>>())[d],
    )])
}

fn slice_scatter(ctx: &mut Ctx) -> R {
    let x = ctx.tensor("self")?;
    let src = ctx.tensor("src")?.cast(x.dtype)?;
    let d = dim(ctx.opt_int("dim")?.unwrap_or(0), x.rank())?;
    let n = x.dims()[d] as i64;
    let clampi = |v: i64| if v < 0 { (v + n).max(0) } else { v.min(n) };
    let start = clampi(ctx.opt_int("start")?.unwrap_or(0));
    let end = clampi(ctx.opt_int("end")?.unwrap_or(n)).max(start);
    let step = ctx.opt_int("step")?.unwrap_or(1).max(1);
    let positions: Vec<i64> = (start..end).step_by(step as usize).collect();
    scatter_positions(&x, &src.t, d, &positions)
}

fn select_scatter(ctx: &mut Ctx) -> R {
    let x = ctx.tensor("self")?;
    let d = dim(ctx.int("dim")?, x.rank())?;
    let src = ctx
        .tensor("src")?
        .cast(x.dtype)?
        .t
        .unsqueeze(d)
        .map_err(ce)?;
    let n = x.dims()[d] as i64;
    let i = ctx.int("index")?;
    scatter_positions(&x, &src, d, &[if i < 0 { i + n } else { i }])
}

/// Replaces the slices `positions` of dim `d` of x with those of src.
fn scatter_positions(x: &T, src: &CT, d: usize, positions: &[i64]) -> R {
    let n = x.dims()[d];
    let mut parts = Vec::with_capacity(n);
    for k in 0..n {
        let from_src = positions.iter().position(|&p| p == k as i64);
        parts.push(match from_src {
            Some(j) => src.narrow(d, j, 1).map_err(ce)?,
            None => x.t.narrow(d, k, 1).map_err(ce)?,
        });
    }
    one(T::new(CT::cat(&parts, d).map_err(ce)?, x.dtype))
}

fn scatter(ctx: &mut Ctx) -> R {
    let x = ctx.tensor("self")?;
    let d = dim(ctx.int("dim")?, x.rank())?;
    let idx = ctx.tensor("index")?.cast(Dtype::Int64)?;
    let name = ctx.node.target.name.clone();
    let reduce = match name.as_str() {
        "scatter_add" => Some("sum".to_string()),
        "scatter_reduce" => ctx.string("reduce")?,
        _ => ctx.string("reduce")?,
    };
    let include_self = ctx.opt_bool("include_self", true)?;
    let src_vals: Vec<f64> = if ctx.node.arg("src").is_some() {
        ctx.tensor("src")?.to_host()?.to_f64()
    } else {
        vec![ctx.float("value")?; idx.t.elem_count()]
    };
    let src_dims: Vec<usize> = if ctx.node.arg("src").is_some() {
        ctx.tensor("src")?.dims().to_vec()
    } else {
        idx.dims().to_vec()
    };
    let mut out = x.to_host()?.to_f64();
    let idx_vals = idx.to_host()?.to_f64();
    let xd = x.dims().to_vec();
    let id = idx.dims().to_vec();
    let xs = crate::ir::contiguous_strides(&xd.iter().map(|&v| v as i64).collect::<Vec<_>>());
    let ss = crate::ir::contiguous_strides(&src_dims.iter().map(|&v| v as i64).collect::<Vec<_>>());
    let mut counts = vec![0usize; out.len()];
    let mut touched = vec![false; out.len()];
    let mut pos = vec![0usize; id.len()];
    for (flat, iv) in idx_vals.iter().enumerate() {
        let _ = flat;
        let mut target = 0i64;
        let mut source = 0i64;
        for k in 0..id.len() {
            let p = if k == d {
                let v = *iv as i64;
                if v < 0 {
                    v + xd[d] as i64
                } else {
                    v
                }
            } else {
                pos[k] as i64
            };
            target += p * xs[k];
            source += pos[k] as i64 * ss[k];
        }
        let (t, v) = (target as usize, src_vals[source as usize]);
        match reduce.as_deref() {
            None => out[t] = v,
            Some(r) => {
                if !touched[t] && !include_self {
                    out[t] = v;
                } else {
                    out[t] = match r {
                        "sum" | "add" | "mean" => out[t] + v,
                        "prod" | "multiply" => out[t] * v,
                        "amax" => out[t].max(v),
                        "amin" => out[t].min(v),
                        other => return Err(unsupported(format!("scatter reduce {other:?}"))),
                    };
                }
                touched[t] = true;
                counts[t] += 1;
            }
        }
        for k in (0..id.len()).rev() {
            pos[k] += 1;
            if pos[k] < id[k] {
                break;
            }
            pos[k] = 0;
        }
    }
    if reduce.as_deref() == Some("mean") {
        for (i, c) in counts.iter().enumerate() {
            if *c > 0 {
                out[i] /= (*c + include_self as usize) as f64;
            }
        }
    }
    one(from_f64(&out, &xd, x.dtype, ctx.device())?)
}

fn div_scalar_mode(ctx: &mut Ctx) -> R {
    div(ctx)
}

fn adaptive_avg_pool1d(ctx: &mut Ctx) -> R {
    let x = ctx.tensor("self")?;
    let out = ctx.ints("output_size")?[0] as usize;
    let n = *x
        .dims()
        .last()
        .ok_or_else(|| Error::bad_input("adaptive_avg_pool1d on a 0-d tensor"))?;
    let last = x.rank() - 1;
    let mut cols = Vec::new();
    for j in 0..out {
        let (a, b) = (j * n / out, ((j + 1) * n).div_ceil(out));
        cols.push(
            x.t.narrow(last, a, b - a)
                .and_then(|t| t.mean_keepdim(last))
                .map_err(ce)?,
        );
    }
    one(T::new(CT::cat(&cols, last).map_err(ce)?, x.dtype))
}

fn bitwise(ctx: &mut Ctx, op: Bin, f: fn(i64, i64) -> i64) -> R {
    let a = Operand::from_rv(ctx.value("self")?)?;
    let b = Operand::from_rv(ctx.value("other")?)?;
    if result_type(&[a.key(), b.key()]) == Dtype::Bool {
        let (a, b) = (ctx.value("self")?, ctx.value("other")?);
        return binary_on(ctx, a, b, op, None);
    }
    host_binary(ctx, "self", "other", false, move |x, y| {
        f(x as i64, y as i64) as f64
    })
}

fn bitwise_and(ctx: &mut Ctx) -> R {
    bitwise(ctx, Bin::And, |a, b| a & b)
}
fn bitwise_or(ctx: &mut Ctx) -> R {
    bitwise(ctx, Bin::Or, |a, b| a | b)
}
fn bitwise_xor_op(ctx: &mut Ctx) -> R {
    bitwise(ctx, Bin::Xor, |a, b| a ^ b)
}

/// Reflection and replication padding: an index list per padded dim.
fn index_pad(ctx: &mut Ctx) -> R {
    let x = ctx.tensor("self")?;
    let pad = ctx.ints("padding")?;
    let reflect = ctx.node.target.name.starts_with("reflection");
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
        let it = CT::new(idx.as_slice(), ctx.device()).map_err(ce)?;
        t = t.index_select(&it, d).map_err(ce)?;
    }
    one(T::new(t, x.dtype))
}

fn assert_scalar(ctx: &mut Ctx) -> R {
    let ok = match ctx.value("self")? {
        RV::Bool(b) => b,
        RV::Int(i) => i != 0,
        RV::Float(f) => f != 0.0,
        other => return Err(Error::bad_input(format!("assertion on {other:?}"))),
    };
    if !ok {
        let msg = ctx.string("assert_msg")?.unwrap_or_default();
        return Err(Error::bad_input(format!("runtime assertion failed: {msg}")));
    }
    Ok(Vec::new())
}

/// `aten._assert_async.msg`: a tensor condition checked when the graph
/// runs (torch raises; so does the executor).
fn assert_async(ctx: &mut Ctx) -> R {
    let cond = ctx.tensor("self")?.to_host()?.to_f64();
    if cond.iter().any(|v| *v == 0.0) {
        let msg = ctx.string("assert_msg")?.unwrap_or_default();
        return Err(Error::bad_input(format!("runtime assertion failed: {msg}")));
    }
    Ok(Vec::new())
}

fn nonzero(ctx: &mut Ctx) -> R {
    let x = ctx.tensor("self")?;
    let dims = x.dims().to_vec();
    let vals = x.to_host()?.to_f64();
    let strides =
        crate::ir::contiguous_strides(&dims.iter().map(|&d| d as i64).collect::<Vec<_>>());
    let mut out = Vec::new();
    for (flat, v) in vals.iter().enumerate() {
        if *v != 0.0 {
            let mut rem = flat as i64;
            for s in &strides {
                out.push(rem / s);
                rem %= s;
            }
        }
    }
    let rows = out.len() / dims.len().max(1);
    let t = CT::from_vec(out, (rows, dims.len()), ctx.device()).map_err(ce)?;
    one(T::new(t, Dtype::Int64))
}

// ------------------------------------------------------------ control flow

/// A predicate as torch reads one: a bool, an int, or a one-element tensor.
fn truth(v: &RV, what: &str) -> Result<bool> {
    match v {
        RV::Bool(b) => Ok(*b),
        RV::Int(i) => Ok(*i != 0),
        RV::T(t) => {
            let vals = t.to_host()?.to_f64();
            match vals.as_slice() {
                [v] => Ok(*v != 0.0),
                _ => Err(Error::bad_input(format!(
                    "{what} is a tensor of shape {:?}, not one value",
                    t.dims()
                ))),
            }
        }
        other => Err(Error::bad_input(format!("{what} is {other:?}"))),
    }
}

/// The subgraph at input `i`.
fn subgraph_at<'a>(ctx: &'a Ctx, i: usize, what: &str) -> Result<&'a Subgraph> {
    match ctx.input_arg(i) {
        Some(Argument::Graph(g)) => Ok(g),
        _ => Err(Error::bad_input(format!(
            "{} without its {what} subgraph (input {i})",
            ctx.node.target
        ))),
    }
}

/// The values of a list input (operands, carried or mapped tensors); an
/// absent input is an empty list.
fn list_at(ctx: &Ctx, i: usize) -> Result<Vec<RV>> {
    if ctx.input_arg(i).is_none() {
        return Ok(Vec::new());
    }
    Ok(match ctx.input(i)? {
        RV::List(items) => items,
        RV::None => Vec::new(),
        other => vec![other],
    })
}

/// Runs a subgraph on its inputs, named in errors.
fn run_subgraph(ctx: &Ctx, sub: &Subgraph, inputs: Vec<RV>) -> R {
    if inputs.len() != sub.graph.inputs.len() {
        return Err(Error::bad_input(format!(
            "subgraph '{}' takes {} inputs, but {} are given",
            sub.name,
            sub.graph.inputs.len(),
            inputs.len()
        )));
    }
    ctx.exec
        .run_graph(&sub.graph, inputs, ctx.bindings)
        .map_err(|e| e.at(format!("subgraph '{}'", sub.name)))
}

fn cond(ctx: &mut Ctx) -> R {
    let pred = truth(&ctx.input(0)?, "the cond predicate")?;
    let branch = subgraph_at(ctx, if pred { 1 } else { 2 }, "branch")?;
    let operands = list_at(ctx, 3)?;
    run_subgraph(ctx, branch, operands)
}

/// `while_loop(cond_graph, body_graph, carried, additional)`, as torch
/// runs it: while the cond graph, on (carried, additional), returns true,
/// the body graph on the same values gives the next carried values. The
/// result is the last carried values (the initial ones when the body
/// never runs).
fn while_loop(ctx: &mut Ctx) -> R {
    let cond_graph = subgraph_at(ctx, 0, "cond")?;
    let body_graph = subgraph_at(ctx, 1, "body")?;
    let mut carried = list_at(ctx, 2)?;
    let additional = list_at(ctx, 3)?;
    let with_additional = |carried: &[RV]| {
        let mut inputs = carried.to_vec();
        inputs.extend(additional.iter().cloned());
        inputs
    };
    loop {
        let pred = run_subgraph(ctx, cond_graph, with_additional(&carried))?;
        let [pred] = pred.as_slice() else {
            return Err(Error::bad_input(format!(
                "subgraph '{}' returned {} values, not one predicate",
                cond_graph.name,
                pred.len()
            )));
        };
        if !truth(pred, "the while_loop condition")? {
            return Ok(carried);
        }
        let next = run_subgraph(ctx, body_graph, with_additional(&carried))?;
        if next.len() != carried.len() {
            return Err(Error::bad_input(format!(
                "subgraph '{}' returned {} values for {} carried inputs",
                body_graph.name,
                next.len(),
                carried.len()
            )));
        }
        carried = next;
    }
}

/// `map_impl(body_graph, xs, args)`: the body on slice i (along dim 0) of
/// every xs, with args, for each i; each output is the body's results
/// stacked along a new dim 0.
fn map_impl(ctx: &mut Ctx) -> R {
    let body = subgraph_at(ctx, 0, "body")?;
    let xs: Vec<T> = list_at(ctx, 1)?
        .into_iter()
        .map(|v| match v {
            RV::T(t) if t.rank() > 0 => Ok(t),
            other => Err(Error::bad_input(format!(
                "map_impl maps over tensors with a dim 0, not {other:?}"
            ))),
        })
        .collect::<Result<_>>()?;
    let args = list_at(ctx, 2)?;
    let Some(n) = xs.first().map(|x| x.dims()[0]) else {
        return Err(Error::bad_input("map_impl without tensors to map over"));
    };
    if let Some(x) = xs.iter().find(|x| x.dims()[0] != n) {
        return Err(Error::bad_input(format!(
            "map_impl over dim 0 of sizes {n} and {}",
            x.dims()[0]
        )));
    }
    let count = ctx.node.outputs.len();
    let mut slices: Vec<Vec<CT>> = vec![Vec::with_capacity(n); count];
    let mut dtypes: Vec<Option<Dtype>> = vec![None; count];
    for i in 0..n {
        let mut inputs = Vec::with_capacity(xs.len() + args.len());
        for x in &xs {
            inputs.push(RV::T(T::new(x.t.get(i).map_err(ce)?, x.dtype)));
        }
        inputs.extend(args.iter().cloned());
        let outs = run_subgraph(ctx, body, inputs)?;
        if outs.len() != count {
            return Err(Error::bad_input(format!(
                "subgraph '{}' returned {} values, the node has {count} outputs",
                body.name,
                outs.len()
            )));
        }
        for (k, out) in outs.into_iter().enumerate() {
            let RV::T(t) = out else {
                return Err(Error::unsupported(format!(
                    "map_impl output {k} is {out:?}, not a tensor"
                )));
            };
            dtypes[k] = Some(t.dtype);
            slices[k].push(t.t);
        }
    }
    let mut result = Vec::with_capacity(count);
    for (k, parts) in slices.into_iter().enumerate() {
        let t = match dtypes[k] {
            Some(dtype) => T::new(CT::stack(&parts, 0).map_err(ce)?, dtype),
            None => empty_output(ctx, k)?,
        };
        result.push(RV::T(t));
    }
    Ok(result)
}

/// Output `k` of the node, empty (a map over zero slices), from its
/// recorded dtype and sizes.
fn empty_output(ctx: &Ctx, k: usize) -> Result<T> {
    let meta = match ctx.node.outputs.get(k) {
        Some(Argument::Tensor(v)) => match &ctx.graph.value(*v).kind {
            ValueKind::Tensor(meta) => meta,
            _ => return Err(Error::bad_input(format!("output {k} is not a tensor"))),
        },
        _ => return Err(Error::bad_input(format!("output {k} is not a tensor"))),
    };
    let inner: Vec<usize> = meta
        .sizes
        .iter()
        .skip(1)
        .map(|s| match s {
            Sym::Int(v) => Ok(*v as usize),
            other => Err(Error::unsupported(format!(
                "an empty map output with symbolic size {other:?}"
            ))),
        })
        .collect::<Result<_>>()?;
    let mut shape = vec![0];
    shape.extend(inner);
    let t = CT::zeros(shape, storage_dtype(meta.dtype)?, ctx.device()).map_err(ce)?;
    Ok(T::new(t, meta.dtype))
}

// ------------------------------------------------------------ pooling on the host
//
// Pooling with padding, ceil_mode, dilation, divisor_override, used
// indices, or three spatial dims, as torch's CPU kernels compute it. One
// routine serves 1-, 2- and 3-D: missing leading spatial dims are size 1
// with kernel 1. The common inference cases keep candle's kernels.

/// A tensor's values as f64, with its dims.
fn host_f64(x: &T) -> Result<Vec<f64>> {
    Ok(x.to_host()?.to_f64())
}

/// A per-dim pooling argument: one value for every dim, or one each.
fn per_dim(v: &[i64], n: usize, default: &[usize]) -> Vec<usize> {
    match v.len() {
        0 => default.to_vec(),
        1 => vec![v[0].max(0) as usize; n],
        _ => v.iter().map(|&x| x.max(0) as usize).collect(),
    }
}

/// Pooling geometry over three spatial dims (depth, height, width).
struct Pool {
    input: [usize; 3],
    kernel: [usize; 3],
    stride: [usize; 3],
    pad: [usize; 3],
    dilation: [usize; 3],
    output: [usize; 3],
}

/// torch's `pooling_output_shape`.
fn pool_len(n: usize, k: usize, s: usize, p: usize, d: usize, ceil: bool) -> Result<usize> {
    let span = (n + 2 * p) as i64 - (d * (k - 1)) as i64 - 1;
    let s = s as i64;
    let mut o = if ceil {
        (span + s - 1).div_euclid(s)
    } else {
        span.div_euclid(s)
    } + 1;
    if ceil && (o - 1) * s >= (n + p) as i64 {
        o -= 1;
    }
    if o < 1 {
        return Err(Error::bad_input(format!(
            "pooling: output size {o} for input size {n}, kernel {k}, stride {s}, padding {p}"
        )));
    }
    Ok(o as usize)
}

impl Pool {
    /// Reads kernel_size, stride, padding, dilation and ceil_mode for `n`
    /// spatial dims of `x`.
    fn read(ctx: &Ctx, x: &T, n: usize) -> Result<Pool> {
        if x.rank() < n + 1 {
            return Err(Error::bad_input(format!(
                "{n}-D pooling on a rank-{} tensor",
                x.rank()
            )));
        }
        let ints = |name: &str| -> Vec<i64> {
            if ctx.has(name) {
                ctx.ints(name).unwrap_or_default()
            } else {
                Vec::new()
            }
        };
        let kernel = per_dim(&ints("kernel_size"), n, &vec![1; n]);
        let stride = per_dim(&ints("stride"), n, &kernel);
        let pad = per_dim(&ints("padding"), n, &vec![0; n]);
        let dilation = per_dim(&ints("dilation"), n, &vec![1; n]);
        let ceil = ctx.opt_bool("ceil_mode", false)?;
        if [&kernel, &stride, &pad, &dilation]
            .iter()
            .any(|v| v.len() != n)
            || kernel
                .iter()
                .chain(&stride)
                .chain(&dilation)
                .any(|&v| v == 0)
        {
            return Err(Error::bad_input(
                "pooling: bad kernel_size, stride, padding or dilation",
            ));
        }
        let mut p = Pool {
            input: [1; 3],
            kernel: [1; 3],
            stride: [1; 3],
            pad: [0; 3],
            dilation: [1; 3],
            output: [1; 3],
        };
        let dims = x.dims();
        for i in 0..n {
            let j = 3 - n + i;
            p.input[j] = dims[dims.len() - n + i];
            p.kernel[j] = kernel[i];
            p.stride[j] = stride[i];
            p.pad[j] = pad[i];
            p.dilation[j] = dilation[i];
            // torch's check, on the dilated kernel
            if pad[i] > ((kernel[i] - 1) * dilation[i]).div_ceil(2) {
                return Err(Error::bad_input(
                    "pooling: padding should be at most half of the effective kernel size",
                ));
            }
            p.output[j] = pool_len(
                dims[dims.len() - n + i],
                kernel[i],
                stride[i],
                pad[i],
                dilation[i],
                ceil,
            )?;
        }
        Ok(p)
    }

    fn out_shape(&self, x: &T, n: usize) -> Vec<usize> {
        let mut shape = x.dims()[..x.rank() - n].to_vec();
        shape.extend(&self.output[3 - n..]);
        shape
    }

    fn plane(&self) -> usize {
        self.input.iter().product()
    }

    fn out_plane(&self) -> usize {
        self.output.iter().product()
    }
}

/// Average pooling (`avg_pool1d/2d/3d`) as torch's CPU kernel computes it.
fn avg_pool_host(ctx: &Ctx, x: &T, n: usize) -> R {
    let count_include_pad = ctx.opt_bool("count_include_pad", true)?;
    let divisor = ctx.opt_int("divisor_override")?.filter(|&d| d != 0);
    let p = Pool::read(ctx, x, n)?;
    let vals = host_f64(x)?;
    let planes = vals.len() / p.plane().max(1);
    let [id, ih, iw] = p.input.map(|v| v as i64);
    let mut out = Vec::with_capacity(planes * p.out_plane());
    for plane in vals.chunks(p.plane().max(1)).take(planes) {
        for ot in 0..p.output[0] {
            for oh in 0..p.output[1] {
                for ow in 0..p.output[2] {
                    let range = |o: usize, a: usize, size: i64| {
                        let start = (o * p.stride[a]) as i64 - p.pad[a] as i64;
                        let end = (start + p.kernel[a] as i64).min(size + p.pad[a] as i64);
                        (start, end)
                    };
                    let (t0, t1) = range(ot, 0, id);
                    let (h0, h1) = range(oh, 1, ih);
                    let (w0, w1) = range(ow, 2, iw);
                    let pool_size = (t1 - t0) * (h1 - h0) * (w1 - w0);
                    let (t0, h0, w0) = (t0.max(0), h0.max(0), w0.max(0));
                    let (t1, h1, w1) = (t1.min(id), h1.min(ih), w1.min(iw));
                    if t0 >= t1 || h0 >= h1 || w0 >= w1 {
                        out.push(0.0);
                        continue;
                    }
                    let mut sum = 0.0;
                    for t in t0..t1 {
                        for h in h0..h1 {
                            let row = ((t * ih + h) * iw) as usize;
                            sum += plane[row + w0 as usize..row + w1 as usize]
                                .iter()
                                .sum::<f64>();
                        }
                    }
                    let factor = match divisor {
                        Some(d) => d,
                        None if count_include_pad => pool_size,
                        None => (t1 - t0) * (h1 - h0) * (w1 - w0),
                    };
                    out.push(sum / factor as f64);
                }
            }
        }
    }
    one(from_f64(&out, &p.out_shape(x, n), x.dtype, ctx.device())?)
}

/// 2-D average pooling with padding, ceil_mode or a divisor on the
/// device: window sums from candle's pooling over the zero-padded input
/// (widened so every window fits), each output scaled by torch's divisor
/// for its window (computed on the host, one per output position).
fn avg_pool2d_padded(ctx: &Ctx, x: &T, n: usize) -> R {
    let count_include_pad = ctx.opt_bool("count_include_pad", true)?;
    let divisor = ctx.opt_int("divisor_override")?.filter(|&d| d != 0);
    let p = Pool::read(ctx, x, n)?;
    // 1-D pools as 2-D with a unit height
    let x = if n == 1 {
        T::new(x.t.unsqueeze(x.rank() - 1).map_err(ce)?, x.dtype)
    } else {
        x.clone()
    };
    let ([_, h, w], [_, kh, kw], [_, sh, sw], [_, ph, pw], [_, oh, ow]) =
        (p.input, p.kernel, p.stride, p.pad, p.output);
    let extra = |o: usize, k: usize, s: usize, n: usize, pad: usize| {
        ((o - 1) * s + k).saturating_sub(n + 2 * pad)
    };
    let compute = if x.dtype == Dtype::Float64 {
        Dtype::Float64
    } else {
        Dtype::Float32
    };
    let padded = pad_hw(
        &x.cast(compute)?.t,
        ph,
        ph + extra(oh, kh, sh, h, ph),
        pw,
        pw + extra(ow, kw, sw, w, pw),
        0.0,
    )?;
    let r = x.rank();
    let mean = padded
        .avg_pool2d_with_stride((kh, kw), (sh, sw))
        .and_then(|t| t.narrow(r - 2, 0, oh))
        .and_then(|t| t.narrow(r - 1, 0, ow))
        .map_err(ce)?;
    let window = |o: usize, k: usize, s: usize, n: usize, pad: usize| {
        let start = (o * s) as i64 - pad as i64;
        let end = (start + k as i64).min((n + pad) as i64);
        let size = end - start;
        (size, end.min(n as i64) - start.max(0))
    };
    let mut scale = Vec::with_capacity(oh * ow);
    for i in 0..oh {
        let (size_h, inside_h) = window(i, kh, sh, h, ph);
        for j in 0..ow {
            let (size_w, inside_w) = window(j, kw, sw, w, pw);
            let factor = match divisor {
                _ if inside_h <= 0 || inside_w <= 0 => 0.0,
                Some(d) => d as f64,
                None if count_include_pad => (size_h * size_w) as f64,
                None => (inside_h * inside_w) as f64,
            };
            scale.push(if factor == 0.0 {
                0.0
            } else {
                (kh * kw) as f64 / factor
            });
        }
    }
    let scale = from_f64(&scale, &[oh, ow], compute, ctx.device())?;
    let mut y = mean.broadcast_mul(&scale.t).map_err(ce)?;
    if n == 1 {
        y = y.squeeze(r - 2).map_err(ce)?;
    }
    one(T::new(y, compute).cast(x.dtype)?)
}

/// Max pooling with indices (flat positions in each input plane), as
/// torch's CPU kernel computes it: NaN wins, the first maximum is kept.
fn max_pool_host(ctx: &Ctx, x: &T, n: usize) -> R {
    let p = Pool::read(ctx, x, n)?;
    let vals = host_f64(x)?;
    let planes = vals.len() / p.plane().max(1);
    let [id, ih, iw] = p.input.map(|v| v as i64);
    let mut out = Vec::with_capacity(planes * p.out_plane());
    let mut indices: Vec<i64> = Vec::with_capacity(planes * p.out_plane());
    for plane in vals.chunks(p.plane().max(1)).take(planes) {
        for ot in 0..p.output[0] {
            for oh in 0..p.output[1] {
                for ow in 0..p.output[2] {
                    let range = |o: usize, a: usize, size: i64| {
                        let mut start = (o * p.stride[a]) as i64 - p.pad[a] as i64;
                        let d = p.dilation[a] as i64;
                        let end = (start + (p.kernel[a] as i64 - 1) * d + 1).min(size);
                        while start < 0 {
                            start += d;
                        }
                        (start, end, d as usize)
                    };
                    let (t0, t1, dt) = range(ot, 0, id);
                    let (h0, h1, dh) = range(oh, 1, ih);
                    let (w0, w1, dw) = range(ow, 2, iw);
                    let mut best = f64::NEG_INFINITY;
                    let mut at = (t0 * ih + h0) * iw + w0;
                    for t in (t0..t1).step_by(dt) {
                        for h in (h0..h1).step_by(dh) {
                            for w in (w0..w1).step_by(dw) {
                                let i = (t * ih + h) * iw + w;
                                let v = plane[i as usize];
                                if v > best || v.is_nan() {
                                    best = v;
                                    at = i;
                                }
                            }
                        }
                    }
                    out.push(best);
                    indices.push(at);
                }
            }
        }
    }
    let shape = p.out_shape(x, n);
    let values = from_f64(&out, &shape, x.dtype, ctx.device())?;
    let mut outs = vec![RV::T(values)];
    if ctx.node.outputs.len() > 1 {
        let idx = CT::from_vec(indices, shape, ctx.device()).map_err(ce)?;
        outs.push(RV::T(T::new(idx, Dtype::Int64)));
    }
    Ok(outs)
}

fn avg_pool1d(ctx: &mut Ctx) -> R {
    let x = ctx.tensor("self")?;
    if x.dtype.is_floating() && x.rank() >= 2 {
        return avg_pool2d_padded(ctx, &x, 1);
    }
    avg_pool_host(ctx, &x, 1)
}

fn avg_pool3d(ctx: &mut Ctx) -> R {
    let x = ctx.tensor("self")?;
    avg_pool_host(ctx, &x, 3)
}

fn max_pool3d(ctx: &mut Ctx) -> R {
    let x = ctx.tensor("self")?;
    max_pool_host(ctx, &x, 3)
}

/// Adaptive average pooling over the last `n` dims: output cell i of a
/// dim averages input [floor(i * in / out), ceil((i + 1) * in / out)).
fn adaptive_avg_pool_host(ctx: &Ctx, x: &T, n: usize) -> R {
    let sizes = ctx.ints("output_size")?;
    if x.rank() < n || sizes.len() != n || sizes.iter().any(|&s| s < 0) {
        return Err(Error::bad_input(format!(
            "adaptive pooling of a rank-{} tensor to {sizes:?}",
            x.rank()
        )));
    }
    let mut input = [1usize; 3];
    let mut output = [1usize; 3];
    for i in 0..n {
        input[3 - n + i] = x.dims()[x.rank() - n + i];
        output[3 - n + i] = sizes[i] as usize;
    }
    let vals = host_f64(x)?;
    let plane: usize = input.iter().product();
    let window = |o: usize, a: usize| {
        (
            o * input[a] / output[a],
            ((o + 1) * input[a]).div_ceil(output[a]),
        )
    };
    let mut out = Vec::new();
    for src in vals.chunks(plane.max(1)).take(vals.len() / plane.max(1)) {
        for ot in 0..output[0] {
            let (t0, t1) = window(ot, 0);
            for oh in 0..output[1] {
                let (h0, h1) = window(oh, 1);
                for ow in 0..output[2] {
                    let (w0, w1) = window(ow, 2);
                    let mut sum = 0.0;
                    for t in t0..t1 {
                        for h in h0..h1 {
                            let row = (t * input[1] + h) * input[2];
                            sum += src[row + w0..row + w1].iter().sum::<f64>();
                        }
                    }
                    out.push(sum / ((t1 - t0) * (h1 - h0) * (w1 - w0)) as f64);
                }
            }
        }
    }
    let mut shape = x.dims()[..x.rank() - n].to_vec();
    shape.extend(sizes.iter().map(|&s| s as usize));
    one(from_f64(&out, &shape, x.dtype, ctx.device())?)
}

fn adaptive_avg_pool3d(ctx: &mut Ctx) -> R {
    let x = ctx.tensor("self")?;
    adaptive_avg_pool_host(ctx, &x, 3)
}

// ------------------------------------------------------------ sampling and indexing on the host

/// `upsample_bilinear2d` (`.vec` and `.default`), as torch's CPU kernel
/// computes source positions (`area_pixel_compute_source_index`).
fn upsample_bilinear(ctx: &mut Ctx) -> R {
    let x = ctx.tensor(if ctx.node.arg("input").is_some() {
        "input"
    } else {
        "self"
    })?;
    if x.rank() < 2 {
        return Err(Error::bad_input(
            "upsample_bilinear2d on a tensor of rank < 2",
        ));
    }
    let align = ctx.bool("align_corners")?;
    let (h, w) = (x.dims()[x.rank() - 2], x.dims()[x.rank() - 1]);
    // scales given by the caller (scale_factors, or scales_h / scales_w)
    let (sh, sw) = match ctx.node.arg("scale_factors") {
        Some(Argument::Floats(v)) if !v.is_empty() => (Some(v[0]), Some(v[v.len() - 1])),
        _ => (ctx.opt_float("scales_h")?, ctx.opt_float("scales_w")?),
    };
    let (oh, ow) = if ctx.has("output_size") && !ctx.ints("output_size")?.is_empty() {
        pair(&ctx.ints("output_size")?, 1)
    } else {
        match (sh, sw) {
            (Some(a), Some(b)) => (
                (h as f64 * a).floor() as usize,
                (w as f64 * b).floor() as usize,
            ),
            _ => return Err(unsupported("upsample without output_size or scale factors")),
        }
    };
    // (first source index, second source index, weight of the second) per output index
    let taps = |n_in: usize, n_out: usize, scale: Option<f64>| -> Vec<(usize, usize, f64)> {
        let ratio = if align {
            if n_out > 1 {
                (n_in as f64 - 1.0) / (n_out as f64 - 1.0)
            } else {
                0.0
            }
        } else {
            match scale {
                Some(s) if s > 0.0 => 1.0 / s,
                _ => n_in as f64 / n_out as f64,
            }
        };
        (0..n_out)
            .map(|o| {
                let src = if align {
                    ratio * o as f64
                } else {
                    (ratio * (o as f64 + 0.5) - 0.5).max(0.0)
                };
                let i0 = (src.floor() as usize).min(n_in - 1);
                let lambda = (src - i0 as f64).clamp(0.0, 1.0);
                let i1 = if i0 < n_in - 1 { i0 + 1 } else { i0 };
                (i0, i1, lambda)
            })
            .collect()
    };
    let rows = taps(h, oh, sh);
    let cols = taps(w, ow, sw);
    if !x.dtype.is_floating() {
        return Err(Error::bad_input(
            "upsample_bilinear2d takes a floating tensor",
        ));
    }
    // on the device: gather the two source rows, then the two source
    // columns of each, and blend with per-row and per-column weights, in
    // float32 at least (torch's opmath)
    let compute = if x.dtype == Dtype::Float64 {
        Dtype::Float64
    } else {
        Dtype::Float32
    };
    let xt = x.cast(compute)?.t;
    let dev = ctx.device();
    let (hd, wd) = (x.rank() - 2, x.rank() - 1);
    let ids = |v: Vec<u32>| -> Result<CT> {
        let n = v.len();
        CT::from_vec(v, n, dev).map_err(ce)
    };
    let weights = |v: Vec<f64>, shape: Vec<usize>| -> Result<CT> {
        Ok(from_f64(&v, &shape, compute, dev)?.t)
    };
    let (r0, r1) = (
        ids(rows.iter().map(|r| r.0 as u32).collect())?,
        ids(rows.iter().map(|r| r.1 as u32).collect())?,
    );
    let (c0, c1) = (
        ids(cols.iter().map(|c| c.0 as u32).collect())?,
        ids(cols.iter().map(|c| c.1 as u32).collect())?,
    );
    let ly = weights(rows.iter().map(|r| r.2).collect(), vec![oh, 1])?;
    let ly0 = weights(rows.iter().map(|r| 1.0 - r.2).collect(), vec![oh, 1])?;
    let lx = weights(cols.iter().map(|c| c.2).collect(), vec![ow])?;
    let lx0 = weights(cols.iter().map(|c| 1.0 - c.2).collect(), vec![ow])?;
    let blend = |row: &CT| -> candle_core::Result<CT> {
        row.index_select(&c0, wd)?
            .broadcast_mul(&lx0)?
            .add(&row.index_select(&c1, wd)?.broadcast_mul(&lx)?)
    };
    let out = (|| -> candle_core::Result<CT> {
        let top = blend(&xt.index_select(&r0, hd)?)?;
        let bottom = blend(&xt.index_select(&r1, hd)?)?;
        top.broadcast_mul(&ly0)?.add(&bottom.broadcast_mul(&ly)?)
    })()
    .map_err(ce)?;
    one(T::new(out, compute).cast(x.dtype)?)
}

/// `diagonal(self, offset, dim1, dim2)`: the two dims are removed and the
/// diagonal becomes the last dim.
fn diagonal(ctx: &mut Ctx) -> R {
    let x = ctx.tensor("self")?;
    let offset = ctx.opt_int("offset")?.unwrap_or(0);
    let d1 = dim(ctx.opt_int("dim1")?.unwrap_or(0), x.rank())?;
    let d2 = dim(ctx.opt_int("dim2")?.unwrap_or(1), x.rank())?;
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
            .and_then(|t| t.reshape(merged.clone()))
            .map_err(ce)?;
    let t = if len == 0 {
        CT::zeros(shape.clone(), t.dtype(), t.device()).map_err(ce)?
    } else {
        let idx = CT::from_vec(linear, len as usize, ctx.device()).map_err(ce)?;
        t.index_select(&idx, merged.len() - 1).map_err(ce)?
    };
    one(T::new(t.reshape(shape).map_err(ce)?, x.dtype))
}

/// Where `self[indices]` (torch's advanced indexing) reads: the result
/// shape and, per result element in row-major order, the flat position in
/// `self`. Boolean masks stand for their nonzero positions; index tensors
/// broadcast together; their dims go where the first indexed dim was when
/// the indexed dims are adjacent, first otherwise.
fn advanced_positions(dims: &[usize], indices: &[Option<T>]) -> Result<(Vec<usize>, Vec<usize>)> {
    // expand masks into one long index per masked dim
    let mut per_dim: Vec<Option<(Vec<usize>, Vec<i64>)>> = Vec::new();
    for t in indices {
        match t {
            None => per_dim.push(None),
            Some(t) if matches!(t.dtype, Dtype::Bool | Dtype::Uint8) => {
                let m = t.rank();
                let at = per_dim.len();
                if dims.len() < at + m || t.dims() != &dims[at..at + m] {
                    return Err(Error::bad_input(format!(
                        "mask of shape {:?} does not match the indexed dims {:?}",
                        t.dims(),
                        &dims[at.min(dims.len())..]
                    )));
                }
                let strides = crate::ir::contiguous_strides(
                    &t.dims().iter().map(|&d| d as i64).collect::<Vec<_>>(),
                );
                let hits: Vec<i64> = host_f64(t)?
                    .iter()
                    .enumerate()
                    .filter(|(_, v)| **v != 0.0)
                    .map(|(i, _)| i as i64)
                    .collect();
                if m == 0 {
                    // a 0-d mask adds a dim of size 1 (true) or 0 (false)
                    return Err(unsupported("indexing with a 0-d mask"));
                }
                for s in &strides {
                    let coords = hits
                        .iter()
                        .map(|h| (h / s) % (dims[per_dim.len()] as i64))
                        .collect();
                    per_dim.push(Some((vec![hits.len()], coords)));
                }
            }
            Some(t) => {
                if t.dtype.is_floating() {
                    return Err(Error::bad_input(
                        "tensors used as indices must be integer or bool",
                    ));
                }
                let v = host_f64(t)?.iter().map(|&f| f as i64).collect();
                per_dim.push(Some((t.dims().to_vec(), v)));
            }
        }
    }
    if per_dim.len() > dims.len() {
        return Err(Error::bad_input(format!(
            "too many indices ({}) for a tensor of rank {}",
            per_dim.len(),
            dims.len()
        )));
    }
    per_dim.resize(dims.len(), None);
    let indexed: Vec<usize> = (0..dims.len()).filter(|&d| per_dim[d].is_some()).collect();
    let strides: Vec<usize> =
        crate::ir::contiguous_strides(&dims.iter().map(|&d| d as i64).collect::<Vec<_>>())
            .iter()
            .map(|&s| s as usize)
            .collect();
    if indexed.is_empty() {
        return Ok((dims.to_vec(), (0..dims.iter().product()).collect()));
    }
    let shapes: Vec<&[usize]> = indexed
        .iter()
        .map(|&d| per_dim[d].as_ref().unwrap().0.as_slice())
        .collect();
    let b = broadcast_shape(&shapes)?;
    let nb: usize = b.iter().product();
    // offset of each broadcast position over the indexed dims
    let mut off_b = vec![0usize; nb];
    for &d in &indexed {
        let (shape, vals) = per_dim[d].as_ref().unwrap();
        let bstrides = broadcast_strides(shape, &b);
        for (k, o) in off_b.iter_mut().enumerate() {
            let mut rem = k;
            let mut src = 0;
            for (axis, size) in b.iter().enumerate().rev() {
                src += (rem % size) * bstrides[axis];
                rem /= size;
            }
            let mut i = vals[src];
            if i < 0 {
                i += dims[d] as i64;
            }
            if i < 0 || i >= dims[d] as i64 {
                return Err(Error::bad_input(format!(
                    "index {} is out of bounds for dim {d} of size {}",
                    vals[src], dims[d]
                )));
            }
            *o += i as usize * strides[d];
        }
    }
    let adjacent = indexed.windows(2).all(|w| w[1] == w[0] + 1);
    let (before, after): (Vec<usize>, Vec<usize>) = if adjacent {
        (
            (0..indexed[0]).collect(),
            (indexed[indexed.len() - 1] + 1..dims.len()).collect(),
        )
    } else {
        (
            Vec::new(),
            (0..dims.len()).filter(|d| !indexed.contains(d)).collect(),
        )
    };
    let offsets = |ds: &[usize]| -> Vec<usize> {
        let mut offs = vec![0usize];
        for &d in ds {
            offs = offs
                .iter()
                .flat_map(|o| {
                    let step = strides[d];
                    (0..dims[d]).map(move |i| o + i * step)
                })
                .collect();
        }
        offs
    };
    let (ob, oa) = (offsets(&before), offsets(&after));
    let mut shape: Vec<usize> = before.iter().map(|&d| dims[d]).collect();
    shape.extend(&b);
    shape.extend(after.iter().map(|&d| dims[d]));
    let mut positions = Vec::with_capacity(ob.len() * nb * oa.len());
    for p in &ob {
        for q in &off_b {
            for r in &oa {
                positions.push(p + q + r);
            }
        }
    }
    Ok((shape, positions))
}

/// Strides (in elements) that read a row-major tensor of `shape` broadcast
/// to `to`: 0 on broadcast dims.
fn broadcast_strides(shape: &[usize], to: &[usize]) -> Vec<usize> {
    let own = crate::ir::contiguous_strides(&shape.iter().map(|&d| d as i64).collect::<Vec<_>>());
    let lead = to.len() - shape.len();
    (0..to.len())
        .map(|i| {
            if i < lead || shape[i - lead] == 1 {
                0
            } else {
                own[i - lead] as usize
            }
        })
        .collect()
}

/// Values of `t` broadcast to `to`, row-major.
fn broadcast_host(t: &T, to: &[usize]) -> Result<Vec<f64>> {
    let vals = host_f64(t)?;
    broadcast_shape(&[t.dims(), to]).and_then(|b| {
        if b != to {
            Err(Error::bad_input(format!(
                "shape {:?} does not broadcast to {to:?}",
                t.dims()
            )))
        } else {
            Ok(())
        }
    })?;
    let strides = broadcast_strides(t.dims(), to);
    let n: usize = to.iter().product();
    Ok((0..n)
        .map(|k| {
            let mut rem = k;
            let mut src = 0;
            for (axis, size) in to.iter().enumerate().rev() {
                src += (rem % size) * strides[axis];
                rem /= size;
            }
            vals[src]
        })
        .collect())
}

/// `index.Tensor` with boolean masks or non-adjacent index tensors.
fn index_host(ctx: &Ctx, x: &T, indices: &[Option<T>]) -> R {
    let (shape, positions) = advanced_positions(x.dims(), indices)?;
    let vals = host_f64(x)?;
    let out: Vec<f64> = positions.iter().map(|&p| vals[p]).collect();
    one(from_f64(&out, &shape, x.dtype, ctx.device())?)
}

/// `index_put(self, indices, values, accumulate)`: `self[indices] = values`
/// (or `+=`), in order, so the last of repeated positions wins.
fn index_put(ctx: &mut Ctx) -> R {
    let x = ctx.tensor("self")?;
    let indices = ctx.tensors("indices")?;
    let values = ctx.tensor("values")?;
    let accumulate = ctx.opt_bool("accumulate", false)?;
    let given: Vec<usize> = (0..indices.len())
        .filter(|&i| indices[i].is_some())
        .collect();
    if let [d] = given[..] {
        let idx = indices[d].as_ref().unwrap();
        if d < x.rank() && idx.rank() == 1 && !matches!(idx.dtype, Dtype::Bool | Dtype::Uint8) {
            return index_put_dim(&x, d, idx, &values, accumulate);
        }
    }
    let (shape, positions) = advanced_positions(x.dims(), &indices)?;
    let src = broadcast_host(&values, &shape)?;
    let mut out = host_f64(&x)?;
    for (p, v) in positions.iter().zip(&src) {
        if accumulate {
            out[*p] += v;
        } else {
            out[*p] = *v;
        }
    }
    one(from_f64(&out, x.dims(), x.dtype, ctx.device())?)
}

/// `index_put` with one 1-D index tensor on dim `d` (KV-cache updates and
/// the like), on the device: a scatter along `d` (last write wins, as on
/// torch's CPU) or a scatter-add.
fn index_put_dim(x: &T, d: usize, idx: &T, values: &T, accumulate: bool) -> R {
    let n = x.dims()[d] as f64;
    let mut shape = x.dims().to_vec();
    shape[d] = idx.dims()[0];
    let mut idx_shape = vec![1usize; x.rank()];
    idx_shape[d] = shape[d];
    let values = values.cast(x.dtype)?;
    let run = || -> candle_core::Result<CT> {
        let i = idx.t.to_dtype(DType::I64)?;
        let i = i.lt(0f64)?.where_cond(&(&i + n)?, &i)?;
        let i = i
            .reshape(idx_shape.clone())?
            .broadcast_as(shape.clone())?
            .contiguous()?;
        let v = values.t.broadcast_as(shape.clone())?.contiguous()?;
        if accumulate {
            x.t.scatter_add(&i, &v, d)
        } else {
            x.t.scatter(&i, &v, d)
        }
    };
    one(T::new(run().map_err(ce)?, x.dtype))
}

/// `masked_scatter(self, mask, source)`: the positions where the mask
/// (broadcast to self) is true take source's elements in order.
fn masked_scatter(ctx: &mut Ctx) -> R {
    let x = ctx.tensor("self")?;
    let mask = broadcast_host(&ctx.tensor("mask")?, x.dims())?;
    let source = host_f64(&ctx.tensor("source")?)?;
    let mut out = host_f64(&x)?;
    let mut next = source.iter();
    for (o, m) in out.iter_mut().zip(&mask) {
        if *m != 0.0 {
            *o = *next.next().ok_or_else(|| {
                Error::bad_input("masked_scatter: source has fewer elements than the mask selects")
            })?;
        }
    }
    one(from_f64(&out, x.dims(), x.dtype, ctx.device())?)
}

/// `_embedding_bag`: sums (mode 0), means (1) or maxima (2) of the weight
/// rows of each bag, with the three bookkeeping outputs torch's CPU
/// kernel returns (offset2bag, bag_size, max_indices).
fn embedding_bag(ctx: &mut Ctx) -> R {
    let w = ctx.tensor("weight")?;
    let idx_t = ctx.tensor("indices")?;
    let off_t = ctx.tensor("offsets")?;
    let mode = ctx.opt_int("mode")?.unwrap_or(0);
    let psw = ctx.opt_tensor("per_sample_weights")?;
    let include_last = ctx.opt_bool("include_last_offset", false)?;
    let padding_idx = ctx.opt_int("padding_idx")?.unwrap_or(-1);
    if w.rank() != 2 || idx_t.rank() != 1 || off_t.rank() != 1 {
        return Err(unsupported(
            "_embedding_bag with 2-D indices (torch flattens them before this op)",
        ));
    }
    if psw.is_some() && mode != 0 {
        return Err(Error::bad_input(
            "per_sample_weights are only supported for mode sum",
        ));
    }
    let (rows, width) = (w.dims()[0], w.dims()[1]);
    // sums and means stay on the device (the table may be large): only
    // the indices and offsets are read here; maxima are taken on the host
    let weights = if mode == 2 { host_f64(&w)? } else { Vec::new() };
    let indices: Vec<i64> = host_f64(&idx_t)?.iter().map(|&v| v as i64).collect();
    let offsets: Vec<i64> = host_f64(&off_t)?.iter().map(|&v| v as i64).collect();
    let scales = psw.map(|t| host_f64(&t)).transpose()?;
    let n = indices.len();
    let bags = offsets.len() - usize::from(include_last && !offsets.is_empty());
    let mut out = vec![0.0; if mode == 2 { bags * width } else { 0 }];
    let mut bag_size = vec![0i64; bags];
    let mut max_indices = vec![-1i64; if mode == 2 { bags * width } else { 0 }];
    // per used entry: its weight row, its bag, its scale
    let (mut picked, mut into, mut scale_of) = (Vec::new(), Vec::new(), Vec::new());
    for b in 0..bags {
        let start = offsets[b].clamp(0, n as i64) as usize;
        let end = if b + 1 < offsets.len() {
            offsets[b + 1].clamp(start as i64, n as i64) as usize
        } else {
            n
        };
        let mut count = 0;
        for (i, &ix) in indices.iter().enumerate().take(end).skip(start) {
            if ix < 0 || ix as usize >= rows {
                return Err(Error::bad_input(format!(
                    "_embedding_bag: index {ix} is out of range for {rows} rows"
                )));
            }
            if ix == padding_idx {
                continue;
            }
            count += 1;
            if mode != 2 {
                picked.push(ix);
                into.push(b as i64);
                scale_of.push(scales.as_ref().map_or(1.0, |s| s[i]));
                continue;
            }
            let src = &weights[ix as usize * width..(ix as usize + 1) * width];
            let row = &mut out[b * width..(b + 1) * width];
            for (j, (o, v)) in row.iter_mut().zip(src).enumerate() {
                if count == 1 || *v > *o {
                    *o = *v;
                    max_indices[b * width + j] = ix;
                }
            }
        }
        bag_size[b] = match mode {
            1 => count as i64,
            _ => (end - start) as i64,
        };
    }
    let fast_sum = mode == 0
        && padding_idx < 0
        && matches!(w.dtype, Dtype::Float32 | Dtype::Float16 | Dtype::BFloat16);
    let offset2bag: Vec<i64> = if fast_sum {
        Vec::new()
    } else {
        (0..n)
            .map(|i| offsets.iter().filter(|&&o| o <= i as i64).count() as i64 - 1)
            .collect()
    };
    let int = |v: Vec<i64>, shape: Vec<usize>| -> Result<RV> {
        let t = CT::from_vec(v, shape, ctx.device()).map_err(ce)?;
        Ok(RV::T(T::new(t, Dtype::Int64).cast(off_t.dtype)?))
    };
    // torch divides means by max(bag_size, 1)
    let counts: Vec<f64> = bag_size.iter().map(|&c| c.max(1) as f64).collect();
    let (bag_size, max_indices) = match mode {
        0 => (
            int(vec![0; offsets.len()], vec![offsets.len()])?,
            int(vec![0; offsets.len()], vec![offsets.len()])?,
        ),
        1 => (int(bag_size, vec![bags])?, int(vec![0; bags], vec![bags])?),
        _ => (
            int(bag_size, vec![bags])?,
            int(
                max_indices.iter().map(|&m| m.max(0)).collect(),
                vec![bags, width],
            )?,
        ),
    };
    let out = if mode == 2 {
        from_f64(&out, &[bags, width], w.dtype, ctx.device())?
    } else {
        let compute = if w.dtype == Dtype::Float64 {
            Dtype::Float64
        } else {
            Dtype::Float32
        };
        let dev = ctx.device();
        let zeros = CT::zeros((bags, width), storage_dtype(compute)?, dev).map_err(ce)?;
        let sum = if picked.is_empty() {
            zeros
        } else {
            let k = picked.len();
            let rows = w
                .cast(compute)?
                .t
                .index_select(&CT::from_vec(picked, k, dev).map_err(ce)?, 0)
                .map_err(ce)?;
            let rows = if scales.is_some() {
                let s = from_f64(&scale_of, &[k, 1], compute, dev)?;
                rows.broadcast_mul(&s.t).map_err(ce)?
            } else {
                rows
            };
            zeros
                .index_add(&CT::from_vec(into, k, dev).map_err(ce)?, &rows, 0)
                .map_err(ce)?
        };
        let sum = if mode == 1 {
            sum.broadcast_div(&from_f64(&counts, &[bags, 1], compute, dev)?.t)
                .map_err(ce)?
        } else {
            sum
        };
        T::new(sum, compute).cast(w.dtype)?
    };
    Ok(vec![
        RV::T(out),
        int(offset2bag.clone(), vec![offset2bag.len()])?,
        bag_size,
        max_indices,
    ])
}

/// `_native_batch_norm_legit` (`.default`, `.no_stats`): in training, the
/// batch's own statistics (biased variance), returned as save_mean and
/// save_invstd. The running stats are not updated (the executor runs
/// inference).
fn batch_norm_legit(ctx: &mut Ctx) -> R {
    let has_stats = ctx.node.target.overload != "no_stats";
    if has_stats && !ctx.bool("training")? {
        return batch_norm(ctx);
    }
    let x = ctx.tensor("input")?;
    if x.rank() < 2 {
        return Err(Error::bad_input("batch norm needs an input of rank >= 2"));
    }
    let eps = ctx.float("eps")?;
    let r = x.rank();
    let dims: Vec<usize> = (0..r).filter(|&d| d != 1).collect();
    let xf = x.t.to_dtype(DType::F64).map_err(ce)?;
    let mean = xf.mean_keepdim(dims.clone()).map_err(ce)?;
    let centered = xf.broadcast_sub(&mean).map_err(ce)?;
    let var = centered
        .sqr()
        .and_then(|c| c.mean_keepdim(dims))
        .map_err(ce)?;
    let invstd = (var + eps)
        .and_then(|v| v.sqrt())
        .and_then(|v| v.recip())
        .map_err(ce)?;
    let mut y = centered.broadcast_mul(&invstd).map_err(ce)?;
    if let Some(w) = ctx.opt_tensor("weight")? {
        y = y
            .broadcast_mul(&channel_view(&w.cast(Dtype::Float64)?, r)?)
            .map_err(ce)?;
    }
    if let Some(b) = ctx.opt_tensor("bias")? {
        y = y
            .broadcast_add(&channel_view(&b.cast(Dtype::Float64)?, r)?)
            .map_err(ce)?;
    }
    let stats = if matches!(x.dtype, Dtype::Float16 | Dtype::BFloat16) {
        Dtype::Float32
    } else {
        x.dtype
    };
    let c = x.dims()[1];
    let flat = |t: CT| -> Result<RV> {
        Ok(RV::T(
            T::new(t.reshape(c).map_err(ce)?, Dtype::Float64).cast(stats)?,
        ))
    };
    Ok(vec![
        RV::T(T::new(y, Dtype::Float64).cast(x.dtype)?),
        flat(mean)?,
        flat(invstd)?,
    ])
}

/// `native_dropout(input, p, train)`: deterministic when it is not
/// training or p is 0 or 1.
fn native_dropout(ctx: &mut Ctx) -> R {
    let x = ctx.tensor("input")?;
    let p = ctx.float("p")?;
    let train = ctx.has("train") && ctx.bool("train")?;
    let keep = if !train || p == 0.0 {
        true
    } else if p == 1.0 {
        false
    } else {
        return Err(unsupported(
            "native_dropout in training with 0 < p < 1 (random)",
        ));
    };
    let mask = CT::full(keep as u8, x.dims(), ctx.device()).map_err(ce)?;
    let y = if keep {
        x.clone()
    } else {
        T::new(x.t.zeros_like().map_err(ce)?, x.dtype)
    };
    Ok(vec![RV::T(y), RV::T(T::new(mask, Dtype::Bool))])
}

/// `resize_` to at most as many elements: the first ones, reshaped (more
/// would be uninitialised memory).
fn resize(ctx: &mut Ctx) -> R {
    let x = ctx.tensor("self")?;
    let shape: Vec<usize> = ctx
        .ints("size")?
        .iter()
        .map(|&d| d.max(0) as usize)
        .collect();
    let n: usize = shape.iter().product();
    let have = x.t.elem_count();
    if n > have {
        return Err(unsupported(
            "resize_ to more elements (they would be uninitialised)",
        ));
    }
    let t =
        x.t.flatten_all()
            .and_then(|t| t.narrow(0, 0, n))
            .and_then(|t| t.reshape(shape))
            .map_err(ce)?;
    one(T::new(t, x.dtype))
}

// ------------------------------------------------------------ distances, folding, sampling

/// The p-norm of a difference vector, as torch's pdist/cdist kernels
/// special-case p: 0 counts nonzeros, infinity takes the maximum.
fn p_norm(diffs: impl Iterator<Item = f64>, p: f64) -> f64 {
    if p == 0.0 {
        diffs.filter(|d| *d != 0.0).count() as f64
    } else if p.is_infinite() {
        diffs.map(f64::abs).fold(0.0, f64::max)
    } else if p == 1.0 {
        diffs.map(f64::abs).sum()
    } else if p == 2.0 {
        diffs.map(|d| d * d).sum::<f64>().sqrt()
    } else {
        diffs.map(|d| d.abs().powf(p)).sum::<f64>().powf(1.0 / p)
    }
}

/// `_pdist_forward(self [n, m], p)`: distances of rows i < j, row-major.
fn pdist(ctx: &mut Ctx) -> R {
    let x = ctx.tensor("self")?;
    let p = ctx.opt_float("p")?.unwrap_or(2.0);
    if x.rank() != 2 || p < 0.0 {
        return Err(Error::bad_input(
            "_pdist_forward takes a 2-D input and p >= 0",
        ));
    }
    let (n, m) = (x.dims()[0], x.dims()[1]);
    let v = host_f64(&x)?;
    let mut out = Vec::with_capacity(n * n.saturating_sub(1) / 2);
    for i in 0..n {
        for j in i + 1..n {
            let (a, b) = (&v[i * m..(i + 1) * m], &v[j * m..(j + 1) * m]);
            out.push(p_norm(a.iter().zip(b).map(|(x, y)| x - y), p));
        }
    }
    one(from_f64(&out, &[out.len()], x.dtype, ctx.device())?)
}

/// `_cdist_forward(x1 [.., p, m], x2 [.., r, m], p, compute_mode)`: the
/// batch dims broadcast. Distances are computed directly (torch's matmul
/// form for p = 2 differs only by rounding).
fn cdist(ctx: &mut Ctx) -> R {
    let a = ctx.tensor("x1")?;
    let b = ctx.tensor("x2")?;
    let p = ctx.float("p")?;
    if a.rank() < 2 || b.rank() < 2 || a.dims()[a.rank() - 1] != b.dims()[b.rank() - 1] || p < 0.0 {
        return Err(Error::bad_input(format!(
            "_cdist_forward of {:?} and {:?} with p = {p}",
            a.dims(),
            b.dims()
        )));
    }
    let (pa, m) = (a.dims()[a.rank() - 2], a.dims()[a.rank() - 1]);
    let rb = b.dims()[b.rank() - 2];
    let batch = broadcast_shape(&[&a.dims()[..a.rank() - 2], &b.dims()[..b.rank() - 2]])?;
    let expand = |t: &T, rows: usize| -> Result<Vec<f64>> {
        let mut to = batch.clone();
        to.extend([rows, m]);
        broadcast_host(t, &to)
    };
    let (va, vb) = (expand(&a, pa)?, expand(&b, rb)?);
    let nb: usize = batch.iter().product();
    let mut out = Vec::with_capacity(nb * pa * rb);
    for k in 0..nb {
        for i in 0..pa {
            let x = &va[(k * pa + i) * m..][..m];
            for j in 0..rb {
                let y = &vb[(k * rb + j) * m..][..m];
                out.push(p_norm(x.iter().zip(y).map(|(x, y)| x - y), p));
            }
        }
    }
    let mut shape = batch.clone();
    shape.extend([pa, rb]);
    let dt = result_type(&[(a.dtype, Rank::Dim), (b.dtype, Rank::Dim)]);
    one(from_f64(&out, &shape, dt, ctx.device())?)
}

/// `col2im(self [n, c * kh * kw, l], output_size, kernel_size, dilation,
/// padding, stride)`: sums the sliding blocks back into images.
fn col2im(ctx: &mut Ctx) -> R {
    let x = ctx.tensor("self")?;
    let (oh, ow) = pair(&ctx.ints("output_size")?, 1);
    let (kh, kw) = pair(&ctx.ints("kernel_size")?, 1);
    let (dh, dw) = pair(&ctx.ints("dilation")?, 1);
    let (ph, pw) = pair(&ctx.ints("padding")?, 0);
    let (sh, sw) = pair(&ctx.ints("stride")?, 1);
    let batched = x.rank() == 3;
    if !(2..=3).contains(&x.rank()) || kh * kw == 0 || sh * sw == 0 {
        return Err(Error::bad_input(
            "col2im takes a 2-D or 3-D input and nonzero kernel and stride",
        ));
    }
    let (n, rows, l) = if batched {
        (x.dims()[0], x.dims()[1], x.dims()[2])
    } else {
        (1, x.dims()[0], x.dims()[1])
    };
    let blocks = |o: usize, p: usize, d: usize, k: usize, s: usize| {
        (o + 2 * p)
            .checked_sub(d * (k - 1) + 1)
            .map(|v| v / s + 1)
            .unwrap_or(0)
    };
    let (bh, bw) = (blocks(oh, ph, dh, kh, sh), blocks(ow, pw, dw, kw, sw));
    if rows % (kh * kw) != 0 || bh * bw != l {
        return Err(Error::bad_input(format!(
            "col2im: input {:?} does not match {bh}x{bw} blocks of a {kh}x{kw} kernel",
            x.dims()
        )));
    }
    let c = rows / (kh * kw);
    let v = host_f64(&x)?;
    let mut out = vec![0.0; n * c * oh * ow];
    for b in 0..n {
        for r in 0..rows {
            let (ch, ky, kx) = (r / (kh * kw), (r / kw) % kh, r % kw);
            let dst = &mut out[(b * c + ch) * oh * ow..][..oh * ow];
            let src = &v[(b * rows + r) * l..][..l];
            for by in 0..bh {
                let y = (by * sh + ky * dh) as i64 - ph as i64;
                if y < 0 || y >= oh as i64 {
                    continue;
                }
                for bx in 0..bw {
                    let xx = (bx * sw + kx * dw) as i64 - pw as i64;
                    if xx >= 0 && xx < ow as i64 {
                        dst[y as usize * ow + xx as usize] += src[by * bw + bx];
                    }
                }
            }
        }
    }
    let shape = if batched {
        vec![n, c, oh, ow]
    } else {
        vec![c, oh, ow]
    };
    one(from_f64(&out, &shape, x.dtype, ctx.device())?)
}

/// `grid_sampler_2d(input, grid, interpolation_mode, padding_mode,
/// align_corners)`: bilinear (0) and nearest (1) sampling with zeros (0),
/// border (1) or reflection (2) padding, as torch's CPU kernel.
fn grid_sampler_2d(ctx: &mut Ctx) -> R {
    let x = ctx.tensor("input")?;
    let grid = ctx.tensor("grid")?;
    let mode = ctx.int("interpolation_mode")?;
    let padding = ctx.int("padding_mode")?;
    let align = ctx.bool("align_corners")?;
    if mode > 1 {
        return Err(unsupported("grid_sampler_2d with bicubic interpolation"));
    }
    if x.rank() != 4 || grid.rank() != 4 || grid.dims()[3] != 2 || grid.dims()[0] != x.dims()[0] {
        return Err(Error::bad_input(format!(
            "grid_sampler_2d of {:?} with a grid of {:?}",
            x.dims(),
            grid.dims()
        )));
    }
    if x.dtype.is_floating() && grid.dtype.is_floating() {
        return grid_sample_device(&x, &grid, mode, padding, align);
    }
    let (n, c, h, w) = (x.dims()[0], x.dims()[1], x.dims()[2], x.dims()[3]);
    let (gh, gw) = (grid.dims()[1], grid.dims()[2]);
    let source = |coord: f64, size: usize| -> f64 {
        let size_f = size as f64;
        let mut v = if align {
            (coord + 1.0) / 2.0 * (size_f - 1.0)
        } else {
            ((coord + 1.0) * size_f - 1.0) / 2.0
        };
        let clip = |v: f64| v.max(0.0).min(size_f - 1.0);
        match padding {
            1 => v = clip(v),
            2 => {
                let (lo, hi) = if align {
                    (0.0, 2.0 * (size_f - 1.0))
                } else {
                    (-1.0, 2.0 * size_f - 1.0)
                };
                v = if lo == hi {
                    0.0
                } else {
                    let (min, span) = (lo / 2.0, (hi - lo) / 2.0);
                    let d = (v - min).abs();
                    let extra = d % span;
                    if (d / span).floor() as i64 % 2 == 0 {
                        extra + min
                    } else {
                        span - extra + min
                    }
                };
                v = clip(v);
            }
            _ => {}
        }
        v
    };
    let xv = host_f64(&x)?;
    let gv = host_f64(&grid)?;
    let mut out = vec![0.0; n * c * gh * gw];
    for b in 0..n {
        for gy in 0..gh {
            for gx in 0..gw {
                let g = ((b * gh + gy) * gw + gx) * 2;
                let (ix, iy) = (source(gv[g], w), source(gv[g + 1], h));
                let at = |yy: i64, xx: i64| -> Option<usize> {
                    (yy >= 0 && yy < h as i64 && xx >= 0 && xx < w as i64)
                        .then(|| yy as usize * w + xx as usize)
                };
                let taps: Vec<(usize, f64)> = if mode == 1 {
                    let round = |v: f64| {
                        let r = v.round();
                        if (v - v.trunc()).abs() == 0.5 {
                            2.0 * (v / 2.0).round()
                        } else {
                            r
                        }
                    };
                    at(round(iy) as i64, round(ix) as i64)
                        .map(|i| (i, 1.0))
                        .into_iter()
                        .collect()
                } else {
                    let (x0, y0) = (ix.floor(), iy.floor());
                    let (tx, ty) = (ix - x0, iy - y0);
                    let (x0, y0) = (x0 as i64, y0 as i64);
                    [
                        (y0, x0, (1.0 - tx) * (1.0 - ty)),
                        (y0, x0 + 1, tx * (1.0 - ty)),
                        (y0 + 1, x0, (1.0 - tx) * ty),
                        (y0 + 1, x0 + 1, tx * ty),
                    ]
                    .iter()
                    .filter_map(|&(yy, xx, wt)| at(yy, xx).map(|i| (i, wt)))
                    .collect()
                };
                for ch in 0..c {
                    let plane = &xv[(b * c + ch) * h * w..][..h * w];
                    out[((b * c + ch) * gh + gy) * gw + gx] =
                        taps.iter().map(|&(i, wt)| plane[i] * wt).sum();
                }
            }
        }
    }
    one(from_f64(&out, &[n, c, gh, gw], x.dtype, ctx.device())?)
}

/// `grid_sampler_2d` on the device, in the input's precision (float32 at
/// least): source coordinates per output position, then up to four
/// gathered taps per position, weighted (taps outside the input weigh 0).
fn grid_sample_device(x: &T, grid: &T, mode: i64, padding: i64, align: bool) -> R {
    let (n, c, h, w) = (x.dims()[0], x.dims()[1], x.dims()[2], x.dims()[3]);
    let (gh, gw) = (grid.dims()[1], grid.dims()[2]);
    let compute = if x.dtype == Dtype::Float64 {
        Dtype::Float64
    } else {
        Dtype::Float32
    };
    let run = || -> candle_core::Result<CT> {
        let g = grid.cast(compute).map_err(candle_core::Error::wrap)?.t;
        let g = g.reshape((n, gh * gw, 2))?;
        // x -> width, y -> height; returns source coordinates, padded
        let source = |coord: CT, size: usize| -> candle_core::Result<CT> {
            let sf = size as f64;
            let v = if align {
                coord.affine((sf - 1.0) / 2.0, (sf - 1.0) / 2.0)?
            } else {
                coord.affine(sf / 2.0, (sf - 1.0) / 2.0)?
            };
            match padding {
                1 => v.clamp(0f64, sf - 1.0),
                2 => {
                    let (lo, hi) = if align {
                        (0.0, 2.0 * (sf - 1.0))
                    } else {
                        (-1.0, 2.0 * sf - 1.0)
                    };
                    if lo == hi {
                        return v.zeros_like();
                    }
                    let (min, span) = (lo / 2.0, (hi - lo) / 2.0);
                    let d = v.affine(1.0, -min)?.abs()?;
                    let flips = d.affine(1.0 / span, 0.0)?.floor()?;
                    let extra = (&d - flips.affine(span, 0.0)?)?;
                    let odd = (&flips - flips.affine(0.5, 0.0)?.floor()?.affine(2.0, 0.0)?)?;
                    let even_v = extra.affine(1.0, min)?;
                    let odd_v = extra.affine(-1.0, span + min)?;
                    odd.ne(0f64)?
                        .where_cond(&odd_v, &even_v)?
                        .clamp(0f64, sf - 1.0)
                }
                _ => Ok(v),
            }
        };
        let ix = source(g.narrow(2, 0, 1)?.squeeze(2)?, w)?;
        let iy = source(g.narrow(2, 1, 1)?.squeeze(2)?, h)?;
        let xs =
            x.t.to_dtype(storage_dtype(compute).map_err(candle_core::Error::wrap)?)?;
        let xs = xs.reshape((n, c, h * w))?;
        // one tap: values at integer (yy, xx) (float tensors), weighted
        let tap = |yy: &CT, xx: &CT, wt: &CT| -> candle_core::Result<CT> {
            let inside = xx
                .ge(0f64)?
                .mul(&xx.le((w - 1) as f64)?)?
                .mul(&yy.ge(0f64)?)?
                .mul(&yy.le((h - 1) as f64)?)?;
            let at = yy
                .clamp(0f64, (h - 1) as f64)?
                .affine(w as f64, 0.0)?
                .add(&xx.clamp(0f64, (w - 1) as f64)?)?
                .to_dtype(DType::I64)?;
            let at = at
                .unsqueeze(1)?
                .broadcast_as((n, c, gh * gw))?
                .contiguous()?;
            let wt = wt.mul(&inside.to_dtype(wt.dtype())?)?.unsqueeze(1)?;
            xs.gather(&at, 2)?.broadcast_mul(&wt)
        };
        let out = if mode == 1 {
            // nearest: round half to even, as nearbyint
            let round = |v: &CT| -> candle_core::Result<CT> {
                let f = v.floor()?;
                let frac = (v - &f)?;
                let up = f.affine(1.0, 1.0)?;
                let f_odd = (&f - f.affine(0.5, 0.0)?.floor()?.affine(2.0, 0.0)?)?.ne(0f64)?;
                let tie = frac.eq(0.5)?.where_cond(&f_odd.where_cond(&up, &f)?, &f)?;
                frac.gt(0.5)?.where_cond(&up, &tie)
            };
            let ones = ix.ones_like()?;
            tap(&round(&iy)?, &round(&ix)?, &ones)?
        } else {
            let (x0, y0) = (ix.floor()?, iy.floor()?);
            let (tx, ty) = ((&ix - &x0)?, (&iy - &y0)?);
            let (x1, y1) = (x0.affine(1.0, 1.0)?, y0.affine(1.0, 1.0)?);
            let (sx, sy) = (tx.affine(-1.0, 1.0)?, ty.affine(-1.0, 1.0)?);
            let nw = tap(&y0, &x0, &sx.mul(&sy)?)?;
            let ne = tap(&y0, &x1, &tx.mul(&sy)?)?;
            let sw = tap(&y1, &x0, &sx.mul(&ty)?)?;
            let se = tap(&y1, &x1, &tx.mul(&ty)?)?;
            (((nw + ne)? + sw)? + se)?
        };
        out.reshape((n, c, gh, gw))
    };
    one(T::new(run().map_err(ce)?, compute).cast(x.dtype)?)
}

/// Transposed convolution over 1 to 3 spatial dims on the host, any
/// groups, stride, padding, output_padding and dilation per dim:
/// every input element scatters its kernel into the output.
fn conv_transpose_host(ctx: &Ctx, x: &T, w: &T, bias: Option<T>, groups: usize) -> Result<T> {
    let n = x.rank() - 2;
    if !(1..=3).contains(&n) || w.rank() != x.rank() {
        return Err(unsupported(format!(
            "transposed convolution of {:?} with {:?}",
            x.dims(),
            w.dims()
        )));
    }
    let ints = |name: &str, default: usize| -> Vec<usize> {
        let v = if ctx.has(name) {
            ctx.ints(name).unwrap_or_default()
        } else {
            Vec::new()
        };
        per_dim(&v, n, &vec![default; n])
    };
    let (stride, pad, opad, dil) = (
        ints("stride", 1),
        ints("padding", 0),
        ints("output_padding", 0),
        ints("dilation", 1),
    );
    let lift = |v: &[usize], fill: usize| -> [usize; 3] {
        let mut a = [fill; 3];
        a[3 - n..].copy_from_slice(v);
        a
    };
    let (s, p, op, d) = (
        lift(&stride, 1),
        lift(&pad, 0),
        lift(&opad, 0),
        lift(&dil, 1),
    );
    let (nb, cin) = (x.dims()[0], x.dims()[1]);
    let ci = lift(&x.dims()[2..], 1);
    let (wcin, cout_g) = (w.dims()[0], w.dims()[1]);
    let k = lift(&w.dims()[2..], 1);
    if groups == 0 || wcin != cin || cin % groups != 0 {
        return Err(Error::bad_input(format!(
            "transposed convolution: input has {cin} channels, the weight {wcin}, groups {groups}"
        )));
    }
    let mut o = [1usize; 3];
    for a in 0..3 {
        let len = (ci[a] as i64 - 1) * s[a] as i64 - 2 * p[a] as i64
            + (d[a] * (k[a] - 1)) as i64
            + op[a] as i64
            + 1;
        if len < 1 {
            return Err(Error::bad_input("transposed convolution: empty output"));
        }
        o[a] = len as usize;
    }
    let cout = cout_g * groups;
    let cin_g = cin / groups;
    let dt = result_type(&[(x.dtype, Rank::Dim), (w.dtype, Rank::Dim)]);
    let (xv, wv) = (host_f64(x)?, host_f64(w)?);
    let (ip, op_, kp) = (
        ci.iter().product::<usize>(),
        o.iter().product::<usize>(),
        k.iter().product::<usize>(),
    );
    let mut out = vec![0.0; nb * cout * op_];
    for b in 0..nb {
        for ic in 0..cin {
            let g = ic / cin_g;
            let src = &xv[(b * cin + ic) * ip..][..ip];
            for oc_l in 0..cout_g {
                let oc = g * cout_g + oc_l;
                let kern = &wv[(ic * cout_g + oc_l) * kp..][..kp];
                let dst = &mut out[(b * cout + oc) * op_..][..op_];
                for (i, &xval) in src.iter().enumerate() {
                    let pos = [i / (ci[1] * ci[2]), (i / ci[2]) % ci[1], i % ci[2]];
                    for (kk, &wval) in kern.iter().enumerate() {
                        let tap = [kk / (k[1] * k[2]), (kk / k[2]) % k[1], kk % k[2]];
                        let mut at = 0usize;
                        let mut inside = true;
                        for a in 0..3 {
                            let q = (pos[a] * s[a] + tap[a] * d[a]) as i64 - p[a] as i64;
                            if q < 0 || q >= o[a] as i64 {
                                inside = false;
                                break;
                            }
                            at = at * o[a] + q as usize;
                        }
                        if inside {
                            dst[at] += xval * wval;
                        }
                    }
                }
            }
        }
    }
    if let Some(bias) = bias {
        let bv = host_f64(&bias)?;
        for (i, v) in out.iter_mut().enumerate() {
            *v += bv[(i / op_) % cout];
        }
    }
    let mut shape = vec![nb, cout];
    shape.extend(&o[3 - n..]);
    from_f64(&out, &shape, dt, ctx.device())
}

/// The op table: identity -> implementation.
const TABLE: &[(&str, OpFn)] = &[
    ("aten.add.Tensor", add),
    ("aten.add.Scalar", add),
    ("aten.add_.Tensor", add),
    ("aten.add_.Scalar", add),
    ("aten.sub.Tensor", sub),
    ("aten.sub.Scalar", sub),
    ("aten.rsub.Scalar", rsub),
    ("aten.rsub.Tensor", rsub),
    ("aten.mul.Tensor", mul),
    ("aten.mul.Scalar", mul),
    ("aten.mul_.Tensor", mul),
    ("aten.div.Tensor", div),
    ("aten.div.Scalar", div),
    ("aten.div.Tensor_mode", div),
    ("aten.pow.Tensor_Scalar", pow),
    ("aten.pow.Tensor_Tensor", pow),
    ("aten.maximum.default", maximum),
    ("aten.minimum.default", minimum),
    ("aten.eq.Tensor", eq),
    ("aten.eq.Scalar", eq),
    ("aten.ne.Tensor", ne),
    ("aten.ne.Scalar", ne),
    ("aten.lt.Tensor", lt),
    ("aten.lt.Scalar", lt),
    ("aten.le.Tensor", le),
    ("aten.le.Scalar", le),
    ("aten.gt.Tensor", gt),
    ("aten.gt.Scalar", gt),
    ("aten.ge.Tensor", ge),
    ("aten.ge.Scalar", ge),
    ("aten.logical_and.default", logical_and),
    ("aten.logical_or.default", logical_or),
    ("aten.logical_xor.default", logical_xor),
    ("aten.bitwise_and.Tensor", bitwise_and),
    ("aten.bitwise_or.Tensor", bitwise_or),
    ("aten.__and__.Tensor", bitwise_and),
    ("aten.__or__.Tensor", bitwise_or),
    ("aten.logical_not.default", logical_not),
    ("aten.where.self", where_self),
    ("aten.sin.default", sin),
    ("aten.cos.default", cos),
    ("aten.exp.default", exp),
    ("aten.log.default", log),
    ("aten.tanh.default", tanh),
    ("aten.sqrt.default", sqrt),
    ("aten.rsqrt.default", rsqrt),
    ("aten.reciprocal.default", reciprocal),
    ("aten.erf.default", erf),
    ("aten.sigmoid.default", sigmoid),
    ("aten.silu.default", silu),
    ("aten.silu_.default", silu),
    ("aten.neg.default", neg),
    ("aten.abs.default", abs),
    ("aten.relu.default", relu),
    ("aten.relu_.default", relu),
    ("aten.gelu.default", gelu),
    ("aten.hardtanh.default", hardtanh),
    ("aten.hardtanh_.default", hardtanh),
    ("aten.clamp.default", clamp),
    ("aten.hardswish.default", hardswish),
    ("aten.hardswish_.default", hardswish),
    ("aten.hardsigmoid.default", hardsigmoid),
    ("aten.sum.default", sum),
    ("aten.sum.dim_IntList", sum),
    ("aten.mean.dim", mean),
    ("aten.mean.default", mean),
    ("aten.amax.default", amax),
    ("aten.amin.default", amin),
    ("aten.any.dim", any),
    ("aten.any.dims", any),
    ("aten.any.default", any),
    ("aten.all.dim", all),
    ("aten.argmax.default", argmax),
    ("aten._softmax.default", softmax),
    ("aten.softmax.int", softmax),
    ("aten._log_softmax.default", softmax),
    ("aten.log_softmax.int", softmax),
    ("aten.view.default", reshape),
    ("aten.reshape.default", reshape),
    ("aten._unsafe_view.default", reshape),
    ("aten.permute.default", permute),
    ("aten.transpose.int", transpose),
    ("aten.t.default", transpose),
    ("aten.unsqueeze.default", unsqueeze),
    ("aten.squeeze.dim", squeeze),
    ("aten.squeeze.dims", squeeze),
    ("aten.squeeze.default", squeeze),
    ("aten.flatten.using_ints", flatten),
    ("aten.unflatten.int", unflatten),
    ("aten.expand.default", expand),
    ("aten.contiguous.default", identity),
    ("aten.clone.default", identity),
    ("aten.alias.default", identity),
    ("aten.detach.default", identity),
    ("aten.detach_.default", identity),
    ("aten.lift_fresh_copy.default", identity),
    ("aten.dropout.default", dropout),
    ("aten.select.int", select),
    ("aten.slice.Tensor", slice),
    ("aten.cat.default", cat),
    ("aten.split.Tensor", split),
    ("aten.split_with_sizes.default", split),
    ("aten._to_copy.default", to_copy),
    ("aten.to.dtype", to_copy),
    ("aten._assert_tensor_metadata.default", assert_metadata),
    ("aten.sym_size.int", sym_size),
    ("aten.sym_numel.default", sym_numel),
    ("aten.zeros.default", creation),
    ("aten.ones.default", creation),
    ("aten.full.default", creation),
    ("aten.empty.memory_format", creation),
    ("aten.zeros_like.default", creation),
    ("aten.ones_like.default", creation),
    ("aten.full_like.default", creation),
    ("aten.empty_like.default", creation),
    ("aten.scalar_tensor.default", scalar_tensor_op),
    ("aten.arange.default", arange),
    ("aten.arange.start", arange),
    ("aten.arange.start_step", arange),
    ("aten.mm.default", matmul),
    ("aten.bmm.default", matmul),
    ("aten.matmul.default", matmul),
    ("aten.addmm.default", addmm),
    ("aten.linear.default", linear),
    ("aten.embedding.default", embedding),
    ("aten.index_select.default", index_select),
    ("aten.index.Tensor", index),
    ("aten.conv2d.default", conv),
    ("aten.convolution.default", conv),
    ("aten.max_pool2d.default", max_pool),
    ("aten.max_pool2d_with_indices.default", max_pool),
    ("aten.avg_pool2d.default", avg_pool),
    ("aten.adaptive_avg_pool2d.default", adaptive_avg_pool),
    ("aten._adaptive_avg_pool2d.default", adaptive_avg_pool),
    ("aten.batch_norm.default", batch_norm),
    (
        "aten._native_batch_norm_legit_no_training.default",
        batch_norm,
    ),
    ("aten.layer_norm.default", layer_norm),
    ("aten.native_layer_norm.default", layer_norm),
    ("aten.scaled_dot_product_attention.default", sdpa),
    ("aten.topk.default", topk),
    ("higher_order.cond", cond),
    ("higher_order.while_loop", while_loop),
    ("higher_order.map_impl", map_impl),
    ("aten.reflection_pad1d.default", index_pad),
    ("aten.reflection_pad2d.default", index_pad),
    ("aten.reflection_pad3d.default", index_pad),
    ("aten.replication_pad1d.default", index_pad),
    ("aten.replication_pad2d.default", index_pad),
    ("aten.replication_pad3d.default", index_pad),
    ("aten._assert_scalar.default", assert_scalar),
    ("aten._assert_async.msg", assert_async),
    ("aten._assert_async.default", assert_async),
    ("aten.nonzero.default", nonzero),
    ("aten.acos.default", acos),
    ("aten.acosh.default", acosh),
    ("aten.asin.default", asin),
    ("aten.asinh.default", asinh),
    ("aten.atan.default", atan),
    ("aten.atanh.default", atanh),
    ("aten.cosh.default", cosh),
    ("aten.sinh.default", sinh),
    ("aten.tan.default", tan),
    ("aten.expm1.default", expm1),
    ("aten.log10.default", log10),
    ("aten.log1p.default", log1p),
    ("aten.log2.default", log2),
    ("aten.ceil.default", ceil),
    ("aten.floor.default", floor),
    ("aten.trunc.default", trunc),
    ("aten.round.default", round),
    ("aten.sign.default", sign),
    ("aten.isnan.default", isnan),
    ("aten.isinf.default", isinf),
    ("aten.bitwise_not.default", bitwise_not),
    ("aten.elu.default", elu),
    ("aten.leaky_relu.default", leaky_relu),
    ("aten.atan2.default", atan2),
    ("aten.fmod.Tensor", fmod),
    ("aten.fmod.Scalar", fmod),
    ("aten.remainder.Tensor", remainder),
    ("aten.remainder.Scalar", remainder),
    ("aten.bitwise_xor.Tensor", bitwise_xor_op),
    ("aten.bitwise_xor.Scalar", bitwise_xor_op),
    ("aten.bitwise_and.Scalar", bitwise_and),
    ("aten.bitwise_or.Scalar", bitwise_or),
    ("aten.pow.Scalar", pow_scalar_base),
    ("aten.clamp.Tensor", clamp_tensor),
    ("aten.max.dim", minmax_dim),
    ("aten.min.dim", minmax_dim),
    ("aten.argmin.default", argmin),
    ("aten.prod.default", prod),
    ("aten.prod.dim_int", prod),
    ("aten.var.correction", var),
    ("aten.var.dim", var),
    ("aten.flip.default", flip),
    ("aten.repeat.default", repeat),
    ("aten.constant_pad_nd.default", constant_pad),
    ("aten.fill.Scalar", fill_scalar),
    ("aten.copy.default", copy),
    ("aten.sort.default", sort),
    ("aten.upsample_nearest2d.vec", upsample_nearest),
    ("aten.upsample_nearest2d.default", upsample_nearest),
    ("aten.native_group_norm.default", group_norm),
    ("aten._local_scalar_dense.default", local_scalar),
    ("aten.item.default", local_scalar),
    ("aten.sym_stride.int", sym_stride),
    ("aten.slice_scatter.default", slice_scatter),
    ("aten.select_scatter.default", select_scatter),
    ("aten.scatter.src", scatter),
    ("aten.scatter.value", scatter),
    ("aten.scatter_add.default", scatter),
    ("aten.scatter_reduce.two", scatter),
    ("aten.div.Scalar_mode", div_scalar_mode),
    ("aten.adaptive_avg_pool1d.default", adaptive_avg_pool1d),
    ("aten.avg_pool1d.default", avg_pool1d),
    ("aten.avg_pool3d.default", avg_pool3d),
    ("aten.max_pool3d_with_indices.default", max_pool3d),
    ("aten._adaptive_avg_pool3d.default", adaptive_avg_pool3d),
    ("aten.upsample_bilinear2d.vec", upsample_bilinear),
    ("aten.upsample_bilinear2d.default", upsample_bilinear),
    ("aten.diagonal.default", diagonal),
    ("aten.index_put.default", index_put),
    ("aten.index_put_.default", index_put),
    ("aten.masked_scatter.default", masked_scatter),
    ("aten._embedding_bag.default", embedding_bag),
    ("aten._native_batch_norm_legit.default", batch_norm_legit),
    ("aten._native_batch_norm_legit.no_stats", batch_norm_legit),
    ("aten.native_dropout.default", native_dropout),
    ("aten.resize_.default", resize),
    ("aten.atan2.out", atan2),
    ("aten._pdist_forward.default", pdist),
    ("aten._cdist_forward.default", cdist),
    ("aten.col2im.default", col2im),
    ("aten.grid_sampler_2d.default", grid_sampler_2d),
    ("aten.adaptive_avg_pool3d.default", adaptive_avg_pool3d),
    (
        "higher_order.wrap_with_set_grad_enabled",
        wrap_with_set_grad_enabled,
    ),
    ("aten.gather.default", gather),
    ("aten.cumsum.default", cumsum),
    ("aten.diff.default", diff),
    ("aten.as_strided.default", as_strided),
    ("aten.lstm.input", lstm),
    ("aten.where.ScalarOther", where_self),
    ("aten.where.ScalarSelf", where_self),
    ("aten.where.Scalar", where_self),
    ("aten.new_ones.default", creation),
    ("aten.new_zeros.default", creation),
    ("aten.new_full.default", creation),
    ("aten.to.dtype_layout", to_copy),
    ("aten.to.device", to_copy),
    ("aten.dropout_.default", dropout),
    ("_operator.add", py_operator),
    ("_operator.sub", py_operator),
    ("_operator.mul", py_operator),
    ("_operator.floordiv", py_operator),
    ("_operator.mod", py_operator),
    ("_operator.neg", py_operator),
    ("_operator.eq", py_operator),
    ("_operator.ne", py_operator),
    ("_operator.lt", py_operator),
    ("_operator.le", py_operator),
    ("_operator.gt", py_operator),
    ("_operator.ge", py_operator),
    ("torch.sym_max", py_operator),
    ("torch.sym_min", py_operator),
];

/// Arguments a row does not handle, as data: such a node is lowered
/// through the decomposition table instead (`decompose::fallback`).
const DECLINES: &[(&str, fn(&crate::ir::Node) -> bool)] = &[
    // The native LSTM runs one direction; the rule unrolls both.
    ("aten.lstm.input", |n| {
        matches!(n.arg("bidirectional"), Some(Argument::Bool(true)))
    }),
];

/// Whether the row of `op` declines this node's arguments.
pub fn declines(op: &str, node: &crate::ir::Node) -> bool {
    DECLINES.iter().any(|(o, f)| *o == op && f(node))
}

/// The implementation of an op, by identity (`aten.add.Tensor`).
pub fn lookup(op: &str) -> Option<OpFn> {
    static MAP: OnceLock<HashMap<&'static str, OpFn>> = OnceLock::new();
    MAP.get_or_init(|| TABLE.iter().copied().collect())
        .get(op)
        .copied()
}

/// Every op identity the executor implements.
pub fn supported() -> impl Iterator<Item = &'static str> {
    TABLE.iter().map(|(name, _)| *name)
}
