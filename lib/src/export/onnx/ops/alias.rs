//! Identities, copies, casts, clones and aliasing views: the ONNX emitters.

use crate::ir::op::aten;
use super::*;

// no-ops and casts

fn nothing(_: &mut EmitNode) -> Result<()> {
    Ok(())
}

pub(super) fn copy_of(cx: &mut EmitNode) -> Result<()> {
    let (x, meta) = first(cx)?;
    let out = cx.out_dtype(0)?;
    let y = cx.cast(&x, meta.dtype, out)?;
    cx.set(0, y);
    Ok(())
}

fn dropout(cx: &mut EmitNode) -> Result<()> {
    let train = cx.opt_bool("train")?.unwrap_or(false);
    let p = cx.opt_float("p")?.unwrap_or(0.0);
    if train && p > 0.0 {
        let (x, _) = first(cx)?;
        let ratio = cx.scalar(Lit::Float(p), Dtype::Float32)?;
        let t = cx.scalar(Lit::Bool(true), Dtype::Bool)?;
        let y = cx.node("Dropout", &[&x, &ratio, &t], vec![]);
        cx.set(0, y);
        return Ok(());
    }
    copy_of(cx)
}

fn native_dropout(cx: &mut EmitNode) -> Result<()> {
    let train = cx.opt_bool("train")?.unwrap_or(false);
    let p = cx.opt_float("p")?.unwrap_or(0.0);
    let (x, _) = first(cx)?;
    if train && p > 0.0 {
        let ratio = cx.scalar(Lit::Float(p), Dtype::Float32)?;
        let t = cx.scalar(Lit::Bool(true), Dtype::Bool)?;
        let ys = cx.node_n("Dropout", &[&x, &ratio, &t], vec![], 2);
        cx.set(0, ys[0].clone());
        cx.set(1, ys[1].clone());
        return Ok(());
    }
    cx.set(0, x.clone());
    if cx.out_used(1) {
        let shape = cx.shape(&x);
        let mask = constant_of_shape(cx, &shape, Lit::Bool(true), Dtype::Bool)?;
        cx.set(1, mask);
    }
    Ok(())
}

fn to_dtype(cx: &mut EmitNode) -> Result<()> {
    copy_of(cx)
}

/// `copy(self, src)`: `src` in `self`'s dtype and shape.
fn copy(cx: &mut EmitNode) -> Result<()> {
    let x = cx.input("self")?;
    let src = cx.input("src")?;
    let from = cx.dtype("src")?;
    let out = cx.out_dtype(0)?;
    let s = cx.cast(&src, from, out)?;
    let same_shape = cx.meta("self")?.sizes == cx.meta("src")?.sizes;
    let y = if same_shape {
        s
    } else {
        let shape = cx.shape(&x);
        cx.node("Expand", &[&s, &shape], vec![])
    };
    cx.set(0, y);
    Ok(())
}

/// This family's rows: op identity -> implementation.
#[rustfmt::skip]
pub(super) const ROWS: &[(&str, Emit)] = &[
    (aten::_ASSERT_TENSOR_METADATA, nothing),
    (aten::_ASSERT_SCALAR, nothing),
    (aten::_ASSERT_ASYNC_MSG, nothing),
    (aten::SYM_CONSTRAIN_RANGE_FOR_SIZE, nothing),
    (aten::SYM_CONSTRAIN_RANGE, nothing),
    (aten::CLONE, copy_of),
    (aten::CONTIGUOUS, copy_of),
    (aten::ALIAS, copy_of),
    (aten::DETACH, copy_of),
    (aten::LIFT_FRESH_COPY, copy_of),
    (aten::DROPOUT, dropout),
    (aten::NATIVE_DROPOUT, native_dropout),
    (aten::FEATURE_DROPOUT, dropout),
    (aten::_TO_COPY, to_dtype),
    (aten::TO_DTYPE, to_dtype),
    (aten::TO_DTYPE_LAYOUT, to_dtype),
    (aten::TO_DEVICE, to_dtype),
    (aten::TO_OTHER, to_dtype),
    (aten::TYPE_AS, to_dtype),
    (aten::COPY, copy),
];
