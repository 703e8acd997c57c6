//! Identities, copies, casts, clones and aliasing views: the executor rows.

use crate::ir::op::aten;
use super::*;

fn identity(ctx: &mut Ctx) -> OpResult {
    let x = ctx.tensor("self")?;
    // (ViT-B/16's `contiguous` of its q, k and v split from one
    // projection: 1.0 ms a layer at batch 8 by candle's copy)
    one(Tensor::new(contiguous(&x.t)?, x.dtype))
}

fn dropout(ctx: &mut Ctx) -> OpResult {
    // (in training mode it draws a random mask, which torch's generator
    // decides; with p = 0 it is the identity, as in torch)
    if ctx.has("train") && ctx.bool("train")? && ctx.float("p")? != 0.0 {
        return Err(unsupported(
            "dropout with p > 0 in training mode (random; export the model in eval mode)",
        ));
    }
    let x = ctx.tensor(if ctx.node.arg("input").is_some() {
        "input"
    } else {
        "self"
    })?;
    one(x)
}

fn to_copy(ctx: &mut Ctx) -> OpResult {
    let x = ctx.tensor("self")?;
    let d = ctx.dtype("dtype").unwrap_or(x.dtype);
    one(x.cast(d)?)
}

fn assert_metadata(ctx: &mut Ctx) -> OpResult {
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

fn copy(ctx: &mut Ctx) -> OpResult {
    let x = ctx.tensor("self")?;
    let src = ctx.tensor("src")?.cast(x.dtype)?;
    one(Tensor::new(
        src.t
            .broadcast_as(x.dims())
            .and_then(|t| t.contiguous())?,
        x.dtype,
    ))
}

fn assert_scalar(ctx: &mut Ctx) -> OpResult {
    let ok = match ctx.value("self")? {
        Value::Bool(b) => b,
        Value::Int(i) => i != 0,
        Value::Float(f) => f != 0.0,
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
fn assert_async(ctx: &mut Ctx) -> OpResult {
    let cond = ctx.tensor("self")?.to_host()?.to_f64();
    if cond.contains(&0.0) {
        let msg = ctx.string("assert_msg")?.unwrap_or_default();
        return Err(Error::bad_input(format!("runtime assertion failed: {msg}")));
    }
    Ok(Vec::new())
}

/// `native_dropout(input, p, train)`: deterministic when it is not
/// training or p is 0 or 1.
fn native_dropout(ctx: &mut Ctx) -> OpResult {
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
    let mask = CandleTensor::full(keep as u8, x.dims(), ctx.device())?;
    let y = if keep {
        x.clone()
    } else {
        Tensor::new(x.t.zeros_like()?, x.dtype)
    };
    Ok(vec![
        Value::Tensor(y),
        Value::Tensor(Tensor::new(mask, Dtype::Bool)),
    ])
}

/// `resize_` to at most as many elements: the first ones, reshaped (more
/// would be uninitialised memory).
fn resize(ctx: &mut Ctx) -> OpResult {
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
            .and_then(|t| t.reshape(shape))?;
    one(Tensor::new(t, x.dtype))
}

/// This family's rows: op identity -> implementation.
/// Views a mapped weight goes through unchanged; see `exec::mapped`.
pub(super) const MAPPED_VIEWS: &[(&str, MappedViewFn)] = &[
    (aten::ALIAS, |_, m| Ok(Some(m.clone()))),
    (aten::DETACH, |_, m| Ok(Some(m.clone()))),
];

pub(super) const ROWS: &[(&str, OpFn)] = &[
    (aten::CONTIGUOUS, identity),
    (aten::CLONE, identity),
    (aten::ALIAS, identity),
    (aten::DETACH, identity),
    (aten::LIFT_FRESH_COPY, identity),
    (aten::DROPOUT, dropout),
    (aten::_TO_COPY, to_copy),
    (aten::TO_DTYPE, to_copy),
    (aten::_ASSERT_TENSOR_METADATA, assert_metadata),
    (aten::_ASSERT_SCALAR, assert_scalar),
    (aten::_ASSERT_ASYNC_MSG, assert_async),
    (aten::_ASSERT_ASYNC, assert_async),
    (aten::COPY, copy),
    (aten::NATIVE_DROPOUT, native_dropout),
    (aten::RESIZE, resize),
    (aten::TO_DTYPE_LAYOUT, to_copy),
    (aten::TO_DEVICE, to_copy),
];
