//! Identities, copies, casts, clones and aliasing views: the executor rows.

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
    ("aten.alias.default", |_, m| Ok(Some(m.clone()))),
    ("aten.detach.default", |_, m| Ok(Some(m.clone()))),
];

pub(super) const ROWS: &[(&str, OpFn)] = &[
    ("aten.contiguous.default", identity),
    ("aten.clone.default", identity),
    ("aten.alias.default", identity),
    ("aten.detach.default", identity),
    ("aten.detach_.default", identity),
    ("aten.lift_fresh_copy.default", identity),
    ("aten.dropout.default", dropout),
    ("aten._to_copy.default", to_copy),
    ("aten.to.dtype", to_copy),
    ("aten._assert_tensor_metadata.default", assert_metadata),
    ("aten._assert_scalar.default", assert_scalar),
    ("aten._assert_async.msg", assert_async),
    ("aten._assert_async.default", assert_async),
    ("aten.copy.default", copy),
    ("aten.native_dropout.default", native_dropout),
    ("aten.resize_.default", resize),
    ("aten.resize.default", resize),
    ("aten.to.dtype_layout", to_copy),
    ("aten.to.device", to_copy),
    ("aten.dropout_.default", dropout),
];
