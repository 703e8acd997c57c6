//! Identities, copies, casts, clones and aliasing views: the ONNX emitters.

use super::*;

// no-ops and casts

fn nothing(_: &mut Cx) -> Result<()> {
    Ok(())
}

pub(super) fn copy_of(cx: &mut Cx) -> Result<()> {
    let (x, meta) = first(cx)?;
    let out = cx.out_dtype(0)?;
    let y = cx.cast(&x, meta.dtype, out)?;
    cx.set(0, y);
    Ok(())
}

fn dropout(cx: &mut Cx) -> Result<()> {
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

fn native_dropout(cx: &mut Cx) -> Result<()> {
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

fn to_dtype(cx: &mut Cx) -> Result<()> {
    copy_of(cx)
}

/// `copy(self, src)`: `src` in `self`'s dtype and shape.
fn copy(cx: &mut Cx) -> Result<()> {
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
    ("aten._assert_tensor_metadata.default", nothing),
    ("aten._assert_scalar.default", nothing),
    ("aten._assert_async.msg", nothing),
    ("aten.sym_constrain_range_for_size.default", nothing),
    ("aten.sym_constrain_range.default", nothing),
    ("aten.clone.default", copy_of),
    ("aten.contiguous.default", copy_of),
    ("aten.alias.default", copy_of),
    ("aten.detach.default", copy_of),
    ("aten.lift_fresh_copy.default", copy_of),
    ("aten.dropout.default", dropout),
    ("aten.native_dropout.default", native_dropout),
    ("aten.feature_dropout.default", dropout),
    ("aten._to_copy.default", to_dtype),
    ("aten.to.dtype", to_dtype),
    ("aten.to.dtype_layout", to_dtype),
    ("aten.to.device", to_dtype),
    ("aten.to.other", to_dtype),
    ("aten.type_as.default", to_dtype),
    ("aten.copy.default", copy),
];
