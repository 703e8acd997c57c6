//! Normalisation: batch, layer, group and instance norm: the ONNX emitters.

use crate::ir::op::aten;
use super::*;

// normalization

/// A per-channel parameter, or a constant of ones/zeros when absent.
fn param_or(cx: &mut EmitNode, name: &str, fill: f64, channels: &Sym, dtype: Dtype) -> Result<String> {
    match cx.opt_input(name)? {
        Some(p) => {
            let pd = cx.dtype(name)?;
            cx.cast(&p, pd, dtype)
        }
        None => {
            let n = channels.as_int().ok_or_else(|| {
                Error::unsupported(format!(
                    "'{name}' is absent and the channel count is symbolic"
                ))
            })?;
            cx.filled(Lit::Float(fill), dtype, &[n])
        }
    }
}

fn batch_norm(cx: &mut EmitNode) -> Result<()> {
    let training = match cx.node.target.name.as_str() {
        "_native_batch_norm_legit_no_training" => false,
        _ => cx.opt_bool("training")?.unwrap_or(false),
    };
    if training || cx.node.target.overload == "no_stats" {
        return batch_norm_batch_stats(cx);
    }
    let x = cx.input("input")?;
    let meta = cx.meta("input")?;
    let out = cx.out_dtype(0)?;
    let c = cx.compute(out);
    let channels = meta
        .sizes
        .get(1)
        .cloned()
        .ok_or_else(|| Error::bad_input("batch norm of a tensor with fewer than 2 dims"))?;
    let eps = cx.opt_float("eps")?.unwrap_or(1e-5);
    let momentum = cx.opt_float("momentum")?.unwrap_or(0.1);
    let xs = cx.cast(&x, meta.dtype, c)?;
    let scale = param_or(cx, "weight", 1.0, &channels, c)?;
    let bias = param_or(cx, "bias", 0.0, &channels, c)?;
    let mean = param_or(cx, "running_mean", 0.0, &channels, c)?;
    let var = param_or(cx, "running_var", 1.0, &channels, c)?;
    let y = cx.node(
        "BatchNormalization",
        &[&xs, &scale, &bias, &mean, &var],
        vec![
            attr_float("epsilon", eps),
            attr_float("momentum", 1.0 - momentum),
        ],
    );
    let y = cx.cast(&y, c, out)?;
    cx.set(0, y);
    // The saved statistics of an inference batch norm are empty tensors;
    // the running stats pass through unchanged.
    for i in 1..cx.out_count() {
        if !cx.out_used(i) {
            continue;
        }
        let m = cx.out_meta(i)?;
        let sizes = m
            .static_sizes()
            .ok_or_else(|| Error::unsupported("batch norm statistics with symbolic sizes"))?;
        let numel: i64 = sizes.iter().product();
        let y = match (i, numel) {
            (_, 0) => cx.filled(Lit::Int(0), m.dtype, &sizes)?,
            (3, _) => mean.clone(),
            (4, _) => var.clone(),
            _ => return Err(Error::unsupported("batch norm statistics outputs")),
        };
        cx.set(i, y);
    }
    Ok(())
}

/// `v` with NaN where it is infinite: torch's statistics (Welford) of a
/// row holding an infinity, or whose squares overflow, are NaN.
fn finite_or_nan(cx: &mut EmitNode, v: &str, c: Dtype) -> Result<String> {
    let inf = cx.node("IsInf", &[v], vec![]);
    let nan = cx.scalar(Lit::Float(f64::NAN), c)?;
    Ok(cx.node("Where", &[&inf, &nan, v], vec![]))
}

/// Layer norm as torch computes it, two passes: the mean, then the mean
/// of squares about it, each NaN where it is not finite (ONNX Runtime's
/// LayerNormalization takes E[x²] - E[x]² in one pass, whose squares
/// overflow, and cancel, where torch's do not).
fn layer_norm(cx: &mut EmitNode) -> Result<()> {
    let x = cx.input("input")?;
    let meta = cx.meta("input")?;
    let shape = cx.ints("normalized_shape")?;
    let eps = cx.opt_float("eps")?.unwrap_or(1e-5);
    let out = cx.out_dtype(0)?;
    let c = cx.compute(out);
    let xs = cx.cast(&x, meta.dtype, c)?;
    let rank = meta.sizes.len() as i64;
    let axes: Vec<i64> = (rank - shape.len() as i64..rank).collect();
    let mean = cx.reduce("ReduceMean", &xs, Some(&axes), true);
    let mean = finite_or_nan(cx, &mean, c)?;
    let d = cx.node("Sub", &[&xs, &mean], vec![]);
    let d2 = cx.node("Mul", &[&d, &d], vec![]);
    let var = cx.reduce("ReduceMean", &d2, Some(&axes), true);
    let var = finite_or_nan(cx, &var, c)?;
    let e = cx.scalar(Lit::Float(eps), c)?;
    let ve = cx.node("Add", &[&var, &e], vec![]);
    let sd = cx.node("Sqrt", &[&ve], vec![]);
    let rstd = cx.node("Reciprocal", &[&sd], vec![]);
    let mut y = cx.node("Mul", &[&d, &rstd], vec![]);
    if let Some(w) = cx.opt_input("weight")? {
        let wd = cx.dtype("weight")?;
        let w = cx.cast(&w, wd, c)?;
        y = cx.node("Mul", &[&y, &w], vec![]);
    }
    if let Some(b) = cx.opt_input("bias")? {
        let bd = cx.dtype("bias")?;
        let b = cx.cast(&b, bd, c)?;
        y = cx.node("Add", &[&y, &b], vec![]);
    }
    let y = cx.cast(&y, c, out)?;
    cx.set(0, y);
    // mean and inverse std dev (float32 for the halves, as torch's)
    for (i, v) in [(1, mean), (2, rstd)] {
        if i < cx.out_count() && cx.out_used(i) {
            let d = cx.out_dtype(i)?;
            let s = cx.cast(&v, c, d)?;
            cx.set(i, s);
        }
    }
    Ok(())
}

/// Group norm: normalize [N, G, -1], then the per-channel affine.
fn group_norm(cx: &mut EmitNode) -> Result<()> {
    let x = cx.input("input")?;
    let meta = cx.meta("input")?;
    let groups = if cx.node.target.name == "native_group_norm" {
        cx.int("group")?
    } else {
        cx.int("num_groups")?
    };
    let eps = cx.opt_float("eps")?.unwrap_or(1e-5);
    let out = cx.out_dtype(0)?;
    let c = cx.compute(out);
    let rank = meta.sizes.len();
    let channels = meta
        .sizes
        .get(1)
        .cloned()
        .ok_or_else(|| Error::bad_input("group norm of a 1-D tensor"))?;
    let xs = cx.cast(&x, meta.dtype, c)?;
    let n = meta.sizes[0].clone();
    let grouped_shape = cx.sizes(&[n, Sym::Int(groups), Sym::Int(-1)])?;
    let g = cx.node("Reshape", &[&xs, &grouped_shape], vec![]);
    let mean = cx.reduce("ReduceMean", &g, Some(&[2]), true);
    // (a variance that overflows stays inf, rstd 0: torch's group norm
    // sums squares, no Welford moments)
    let mean = finite_or_nan(cx, &mean, c)?;
    let d = cx.node("Sub", &[&g, &mean], vec![]);
    let d2 = cx.node("Mul", &[&d, &d], vec![]);
    let var = cx.reduce("ReduceMean", &d2, Some(&[2]), true);
    let e = cx.scalar(Lit::Float(eps), c)?;
    let ve = cx.node("Add", &[&var, &e], vec![]);
    let sd = cx.node("Sqrt", &[&ve], vec![]);
    let norm = cx.node("Div", &[&d, &sd], vec![]);
    let full_shape = cx.shape(&xs);
    let mut y = cx.node("Reshape", &[&norm, &full_shape], vec![]);
    let affine_shape: Vec<i64> = std::iter::once(-1).chain(vec![1; rank - 2]).collect();
    if cx.has("weight") {
        let w = param_or(cx, "weight", 1.0, &channels, c)?;
        let w = cx.reshape_const(&w, &affine_shape)?;
        y = cx.node("Mul", &[&y, &w], vec![]);
    }
    if cx.has("bias") {
        let b = param_or(cx, "bias", 0.0, &channels, c)?;
        let b = cx.reshape_const(&b, &affine_shape)?;
        y = cx.node("Add", &[&y, &b], vec![]);
    }
    let y = cx.cast(&y, c, out)?;
    cx.set(0, y);
    if cx.out_used(1) || cx.out_used(2) {
        let m = cx.squeeze(&mean, &[2]);
        let md = cx.out_dtype(1)?;
        let m = cx.cast(&m, c, md)?;
        cx.set(1, m);
        let r = cx.node("Reciprocal", &[&sd], vec![]);
        let r = cx.squeeze(&r, &[2]);
        let r = cx.cast(&r, c, md)?;
        cx.set(2, r);
    }
    Ok(())
}

/// x / sqrt(mean(x², normalized dims) + eps) * weight
fn rms_norm(cx: &mut EmitNode) -> Result<()> {
    let x = cx.input("input")?;
    let meta = cx.meta("input")?;
    let shape = cx.ints("normalized_shape")?;
    let out = cx.out_dtype(0)?;
    let c = cx.compute(out);
    let eps = match cx.opt_float("eps")? {
        Some(e) => e,
        // torch uses the dtype's machine epsilon.
        None => match c {
            Dtype::Float64 => f64::EPSILON,
            Dtype::Float16 => 0.0009765625,
            _ => f32::EPSILON as f64,
        },
    };
    let rank = meta.sizes.len() as i64;
    let axes: Vec<i64> = (rank - shape.len() as i64..rank).collect();
    let xs = cx.cast(&x, meta.dtype, c)?;
    let sq = cx.node("Mul", &[&xs, &xs], vec![]);
    let ms = cx.reduce("ReduceMean", &sq, Some(&axes), true);
    let e = cx.scalar(Lit::Float(eps), c)?;
    let se = cx.node("Add", &[&ms, &e], vec![]);
    let r = cx.node("Sqrt", &[&se], vec![]);
    let mut y = cx.node("Div", &[&xs, &r], vec![]);
    if let Some(w) = cx.opt_input("weight")? {
        let wd = cx.dtype("weight")?;
        let ws = cx.cast(&w, wd, c)?;
        y = cx.node("Mul", &[&y, &ws], vec![]);
    }
    let y = cx.cast(&y, c, out)?;
    cx.set(0, y);
    Ok(())
}

fn instance_norm(cx: &mut EmitNode) -> Result<()> {
    if !cx.bool("use_input_stats")? {
        return batch_norm(cx);
    }
    let x = cx.input("input")?;
    let meta = cx.meta("input")?;
    let channels = meta
        .sizes
        .get(1)
        .cloned()
        .ok_or_else(|| Error::bad_input("instance norm of a 1-D tensor"))?;
    let eps = cx.opt_float("eps")?.unwrap_or(1e-5);
    let out = cx.out_dtype(0)?;
    let c = cx.compute(out);
    let xs = cx.cast(&x, meta.dtype, c)?;
    let scale = param_or(cx, "weight", 1.0, &channels, c)?;
    let bias = param_or(cx, "bias", 0.0, &channels, c)?;
    let y = cx.node(
        "InstanceNormalization",
        &[&xs, &scale, &bias],
        vec![attr_float("epsilon", eps)],
    );
    let y = cx.cast(&y, c, out)?;
    cx.set(0, y);
    Ok(())
}

/// Batch norm with the batch's own statistics (training mode, or the
/// decomposition of instance norm): normalize over every dim but 1. The
/// saved mean and inverse std and, for the functional form, the updated
/// running stats are outputs too.
fn batch_norm_batch_stats(cx: &mut EmitNode) -> Result<()> {
    let x = cx.input("input")?;
    let meta = cx.meta("input")?;
    let rank = meta.sizes.len();
    if rank < 2 {
        return Err(Error::bad_input(
            "batch norm of a tensor with fewer than 2 dims",
        ));
    }
    let channels = meta.sizes[1].clone();
    let eps = cx.opt_float("eps")?.unwrap_or(1e-5);
    let momentum = cx.opt_float("momentum")?.unwrap_or(0.1);
    let out = cx.out_dtype(0)?;
    let c = cx.compute(out);
    let xs = cx.cast(&x, meta.dtype, c)?;
    let axes: Vec<i64> = std::iter::once(0).chain(2..rank as i64).collect();
    let mean = cx.reduce("ReduceMean", &xs, Some(&axes), true);
    let d = cx.node("Sub", &[&xs, &mean], vec![]);
    let d2 = cx.node("Mul", &[&d, &d], vec![]);
    let var = cx.reduce("ReduceMean", &d2, Some(&axes), true);
    let e = cx.scalar(Lit::Float(eps), c)?;
    let ve = cx.node("Add", &[&var, &e], vec![]);
    let sd = cx.node("Sqrt", &[&ve], vec![]);
    let invstd = cx.node("Reciprocal", &[&sd], vec![]);
    // the statistics as torch keeps them (save_mean and save_invstd in
    // their recorded dtype: float16 for a float16 model), the output
    // normalised by those rounded values, as torch's kernel does
    let kept = match cx.out_count() > 1 {
        true => cx.out_dtype(1).ok().filter(|d| d.is_floating() && *d != c),
        false => None,
    };
    let (mean_k, invstd_k, d) = match kept {
        Some(k) => {
            let m = cx.cast(&mean, c, k)?;
            let m = cx.cast(&m, k, c)?;
            let r = cx.cast(&invstd, c, k)?;
            let r = cx.cast(&r, k, c)?;
            let d = cx.node("Sub", &[&xs, &m], vec![]);
            (m, r, d)
        }
        None => (mean.clone(), invstd.clone(), d),
    };
    let mut y = cx.node("Mul", &[&d, &invstd_k], vec![]);
    let affine: Vec<i64> = std::iter::once(-1).chain(vec![1; rank - 2]).collect();
    if cx.has("weight") {
        let w = param_or(cx, "weight", 1.0, &channels, c)?;
        let w = cx.reshape_const(&w, &affine)?;
        y = cx.node("Mul", &[&y, &w], vec![]);
    }
    if cx.has("bias") {
        let b = param_or(cx, "bias", 0.0, &channels, c)?;
        let b = cx.reshape_const(&b, &affine)?;
        y = cx.node("Add", &[&y, &b], vec![]);
    }
    let y = cx.cast(&y, c, out)?;
    cx.set(0, y);
    let flat = |cx: &mut EmitNode, v: &str| cx.reshape_const(v, &[-1]);
    if cx.out_used(1) {
        let m = flat(cx, &mean_k)?;
        let d = cx.out_dtype(1)?;
        let m = cx.cast(&m, c, d)?;
        cx.set(1, m);
    }
    if cx.out_used(2) {
        let r = flat(cx, &invstd_k)?;
        let d = cx.out_dtype(2)?;
        let r = cx.cast(&r, c, d)?;
        cx.set(2, r);
    }
    if cx.out_count() > 3 && (cx.out_used(3) || cx.out_used(4)) {
        // running = (1 - momentum) * running + momentum * batch (unbiased var).
        let count = match meta.static_sizes() {
            Some(s) => s.iter().product::<i64>() / s[1].max(1),
            None => {
                return Err(Error::unsupported(
                    "running stats of symbolic batch norm inputs",
                ))
            }
        };
        let keep = cx.scalar(Lit::Float(1.0 - momentum), c)?;
        let m = cx.scalar(Lit::Float(momentum), c)?;
        let bessel = cx.scalar(Lit::Float(count as f64 / (count as f64 - 1.0).max(1.0)), c)?;
        let unbiased = cx.node("Mul", &[&var, &bessel], vec![]);
        for (i, (name, batch)) in [
            (3, ("running_mean", mean.clone())),
            (4, ("running_var", unbiased)),
        ] {
            let rs = cx.input(name)?;
            let rd = cx.dtype(name)?;
            let rs = cx.cast(&rs, rd, c)?;
            let b = flat(cx, &batch)?;
            let a = cx.node("Mul", &[&rs, &keep], vec![]);
            let bm = cx.node("Mul", &[&b, &m], vec![]);
            let r = cx.node("Add", &[&a, &bm], vec![]);
            let d = cx.out_dtype(i)?;
            let r = cx.cast(&r, c, d)?;
            cx.set(i, r);
        }
    }
    Ok(())
}

/// This family's rows: op identity -> implementation.
#[rustfmt::skip]
pub(super) const ROWS: &[(&str, Emit)] = &[
    (aten::BATCH_NORM, batch_norm),
    (aten::_NATIVE_BATCH_NORM_LEGIT_NO_TRAINING, batch_norm),
    (aten::NATIVE_BATCH_NORM, batch_norm),
    (aten::_NATIVE_BATCH_NORM_LEGIT, batch_norm),
    (aten::_NATIVE_BATCH_NORM_LEGIT_NO_STATS, batch_norm),
    (aten::_NATIVE_BATCH_NORM_LEGIT_FUNCTIONAL, batch_norm),
    (aten::LAYER_NORM, layer_norm),
    (aten::NATIVE_LAYER_NORM, layer_norm),
    (aten::GROUP_NORM, group_norm),
    (aten::NATIVE_GROUP_NORM, group_norm),
    (aten::RMS_NORM, rms_norm),
    (aten::INSTANCE_NORM, instance_norm),
];
