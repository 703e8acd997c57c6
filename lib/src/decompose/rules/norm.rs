//! Normalisation: batch, layer, group and instance norm: the decomposition rules.

use crate::ir::op::aten;
use super::*;

fn layer_norm(em: &mut Emitter, a: &NodeArgs) -> Result<Vec<ValueId>> {
    let x = a.tensor("input")?;
    let ns = a.syms("normalized_shape")?;
    let mut stat = em.sizes(x)?;
    let r = stat.len();
    for s in stat.iter_mut().skip(r - ns.len()) {
        *s = Sym::Int(1);
    }
    let dtype = em.dtype(x)?;
    let m1 = em.meta_like(x, dtype, stat.clone())?;
    let m2 = em.meta_like(x, dtype, stat)?;
    em.call(
        aten::NATIVE_LAYER_NORM,
        vec![
            ("input", Argument::Tensor(x)),
            ("normalized_shape", sym_ints_arg(&ns)),
            ("weight", a.arg("weight")),
            ("bias", a.arg("bias")),
            ("eps", Argument::Float(a.float("eps")?)),
        ],
        vec![Out::Into(a.out(0)?), Out::New(m1), Out::New(m2)],
    )?;
    Ok(vec![a.out(0)?])
}

fn group_norm(em: &mut Emitter, a: &NodeArgs) -> Result<Vec<ValueId>> {
    let x = a.tensor("input")?;
    let g = a.int("num_groups")?;
    let sizes = em.size_refs(x)?;
    let (n, c) = (sizes[0], sizes[1]);
    let hw = em.product(&sizes[2..])?;
    let dtype = em.dtype(x)?;
    let stat = vec![em.sym_of(n), Sym::Int(g)];
    let m1 = em.meta_like(x, dtype, stat.clone())?;
    let m2 = em.meta_like(x, dtype, stat)?;
    em.call(
        aten::NATIVE_GROUP_NORM,
        vec![
            ("input", Argument::Tensor(x)),
            ("weight", a.arg("weight")),
            ("bias", a.arg("bias")),
            ("N", Argument::SymInt(n)),
            ("C", Argument::SymInt(c)),
            ("HxW", Argument::SymInt(hw)),
            ("group", Argument::Int(g)),
            ("eps", Argument::Float(a.float("eps")?)),
        ],
        vec![Out::Into(a.out(0)?), Out::New(m1), Out::New(m2)],
    )?;
    Ok(vec![a.out(0)?])
}

fn batch_norm(em: &mut Emitter, a: &NodeArgs) -> Result<Vec<ValueId>> {
    if a.bool("training")? {
        if a.opt_tensor("running_mean")?.is_some() || a.opt_tensor("running_var")?.is_some() {
            // functionalisation makes these `_native_batch_norm_legit_functional`
            return Err(Error::unsupported(format!(
                "node {}: batch_norm in training mode updating running statistics in place",
                a.0.name
            )));
        }
        // the batch's statistics, no running ones to update
        let x = a.tensor("input")?;
        let stats = match em.dtype(x)? {
            Dtype::Float16 | Dtype::BFloat16 => Dtype::Float32,
            d => d,
        };
        let c = em.sizes(x)?.get(1).cloned().ok_or_else(|| {
            Error::bad_input(format!(
                "node {}: batch norm of a tensor with fewer than 2 dims",
                a.0.name
            ))
        })?;
        let m1 = em.meta_like(x, stats, vec![c.clone()])?;
        let m2 = em.meta_like(x, stats, vec![c])?;
        em.call(
            aten::_NATIVE_BATCH_NORM_LEGIT_NO_STATS,
            vec![
                ("input", Argument::Tensor(x)),
                ("weight", a.arg("weight")),
                ("bias", a.arg("bias")),
                ("training", Argument::Bool(true)),
                ("momentum", Argument::Float(a.float("momentum")?)),
                ("eps", Argument::Float(a.float("eps")?)),
            ],
            vec![Out::Into(a.out(0)?), Out::New(m1), Out::New(m2)],
        )?;
        return Ok(vec![a.out(0)?]);
    }
    let x = a.tensor("input")?;
    let (mean, var) = (a.opt_tensor("running_mean")?, a.opt_tensor("running_var")?);
    let (Some(mean), Some(var)) = (mean, var) else {
        return Err(Error::unsupported(format!(
            "node {}: batch_norm in eval mode without running statistics",
            a.0.name
        )));
    };
    let dtype = em.dtype(x)?;
    let m1 = em.meta_like(x, dtype, vec![Sym::Int(0)])?;
    let m2 = em.meta_like(x, dtype, vec![Sym::Int(0)])?;
    em.call(
        aten::_NATIVE_BATCH_NORM_LEGIT_NO_TRAINING,
        vec![
            ("input", Argument::Tensor(x)),
            ("weight", a.arg("weight")),
            ("bias", a.arg("bias")),
            ("running_mean", Argument::Tensor(mean)),
            ("running_var", Argument::Tensor(var)),
            ("momentum", Argument::Float(a.float("momentum")?)),
            ("eps", Argument::Float(a.float("eps")?)),
        ],
        vec![Out::Into(a.out(0)?), Out::New(m1), Out::New(m2)],
    )?;
    Ok(vec![a.out(0)?])
}

fn instance_norm(em: &mut Emitter, a: &NodeArgs) -> Result<Vec<ValueId>> {
    let x = a.tensor("input")?;
    let r = em.rank(x)?;
    let dtype = em.dtype(x)?;
    let spatial: Vec<i64> = (2..r as i64).collect();
    let c = em.size(x, 1)?;
    let per_channel = |em: &mut Emitter, t: ValueId| -> Result<ValueId> {
        let mut shape = vec![c];
        shape.extend(std::iter::repeat_n(SymRef::Int(1), r - 2));
        view(em, t, &shape, None)
    };
    let (mean, var) = if a.bool("use_input_stats")? || !a.has("running_mean") {
        let mean = reduce(em, aten::MEAN_DIM, x, &spatial, true, vec![], dtype, None)?;
        let var = reduce(
            em,
            aten::VAR_CORRECTION,
            x,
            &spatial,
            true,
            vec![("correction", Argument::Int(0))],
            dtype,
            None,
        )?;
        (mean, var)
    } else {
        let m = per_channel(em, a.tensor("running_mean")?)?;
        let v = per_channel(em, a.tensor("running_var")?)?;
        (m, v)
    };
    let centered = binary(em, aten::SUB_TENSOR, x, mean, dtype, None)?;
    let ve = with_scalar(em, aten::ADD_TENSOR, var, Argument::Float(a.float("eps")?))?;
    let rs = unary(em, aten::RSQRT, ve)?;
    let mut y = binary(em, aten::MUL_TENSOR, centered, rs, dtype, None)?;
    let (w, b) = (a.opt_tensor("weight")?, a.opt_tensor("bias")?);
    let out = a.out(0)?;
    if let Some(w) = w {
        let w = per_channel(em, w)?;
        y = binary(
            em,
            aten::MUL_TENSOR,
            y,
            w,
            dtype,
            if b.is_none() { Some(out) } else { None },
        )?;
    }
    if let Some(b) = b {
        let b = per_channel(em, b)?;
        y = binary(em, aten::ADD_TENSOR, y, b, dtype, Some(out))?;
    }
    Ok(vec![y])
}

fn rms_norm(em: &mut Emitter, a: &NodeArgs) -> Result<Vec<ValueId>> {
    let x = a.tensor("input")?;
    let dtype = em.dtype(x)?;
    let n = a.syms("normalized_shape")?.len();
    let r = em.rank(x)?;
    let dims: Vec<i64> = (r - n..r).map(|d| d as i64).collect();
    let eps = match a.opt_float("eps")? {
        Some(e) => e,
        // torch.finfo(dtype).eps
        None => match dtype {
            Dtype::Float64 => f64::EPSILON,
            Dtype::Float16 => 0.0009765625,
            Dtype::BFloat16 => 0.0078125,
            _ => f32::EPSILON as f64,
        },
    };
    let sq = binary(em, aten::MUL_TENSOR, x, x, dtype, None)?;
    let ms = reduce(em, aten::MEAN_DIM, sq, &dims, true, vec![], dtype, None)?;
    let me = with_scalar(em, aten::ADD_TENSOR, ms, Argument::Float(eps))?;
    let rs = unary(em, aten::RSQRT, me)?;
    let out = a.out(0)?;
    match a.opt_tensor("weight")? {
        Some(w) => {
            let y = binary(em, aten::MUL_TENSOR, x, rs, dtype, None)?;
            Ok(vec![binary(em, aten::MUL_TENSOR, y, w, dtype, Some(out))?])
        }
        None => Ok(vec![binary(
            em,
            aten::MUL_TENSOR,
            x,
            rs,
            dtype,
            Some(out),
        )?]),
    }
}

/// `_weight_norm(v, g, dim)`: `v * (g / norm)`, the 2-norm of `v` over
/// every dim but `dim` (over all of them when `dim` is -1), as torch's
/// `norm_except_dim`.
fn weight_norm(em: &mut Emitter, a: &NodeArgs) -> Result<Vec<ValueId>> {
    let (v, g) = (a.tensor("v")?, a.tensor("g")?);
    let out = a.out(0)?;
    let dtype = em.dtype(out)?;
    let r = em.rank(v)?;
    let dim = a.opt_int("dim")?.unwrap_or(0);
    let over: Vec<i64> = if dim == -1 {
        (0..r as i64).collect()
    } else {
        let keep = normalize_dim(dim, r)?;
        (0..r as i64).filter(|d| *d != keep as i64).collect()
    };
    let mut sizes = em.sizes(v)?;
    for d in &over {
        sizes[*d as usize] = Sym::Int(1);
    }
    let meta = em.meta_like(v, dtype, sizes)?;
    let norm = em.op(
        aten::LINALG_VECTOR_NORM,
        vec![
            ("self", Argument::Tensor(v)),
            ("ord", Argument::Float(2.0)),
            ("dim", Argument::Ints(over)),
            ("keepdim", Argument::Bool(true)),
        ],
        meta,
    )?;
    let scale = binary(em, aten::DIV_TENSOR, g, norm, dtype, None)?;
    binary_into(em, a, aten::MUL_TENSOR, v, scale, dtype)
}

rules! {
    aten::_WEIGHT_NORM => [aten::LINALG_VECTOR_NORM, aten::DIV_TENSOR, aten::MUL_TENSOR] weight_norm;
    aten::LAYER_NORM => [aten::NATIVE_LAYER_NORM] layer_norm;
    aten::GROUP_NORM => [aten::NATIVE_GROUP_NORM] group_norm;
    aten::BATCH_NORM => [aten::_NATIVE_BATCH_NORM_LEGIT_NO_TRAINING, aten::_NATIVE_BATCH_NORM_LEGIT_NO_STATS] batch_norm;
    aten::RMS_NORM => [aten::MUL_TENSOR, aten::MEAN_DIM, aten::ADD_TENSOR, aten::RSQRT] rms_norm;
    aten::INSTANCE_NORM => [aten::MEAN_DIM, aten::VAR_CORRECTION, aten::SUB_TENSOR, aten::ADD_TENSOR, aten::RSQRT, aten::MUL_TENSOR, aten::VIEW] instance_norm;
}

/// Ops that are another op of this family under another name.
pub(super) const ALIASES: &[(&str, &str)] = &[];
