//! Reductions (sum, mean, amax, argmax, var, prod, cumsum, sort, topk, ...): the decomposition rules.

use crate::ir::op::aten;
use super::*;

fn sum_all(em: &mut Emitter, a: &NodeArgs) -> Result<Vec<ValueId>> {
    em.op_into(
        aten::SUM_DIM_INTLIST,
        vec![
            ("self", Argument::Tensor(a.tensor("self")?)),
            ("dim", Argument::Ints(vec![])),
            ("dtype", a.arg("dtype")),
        ],
        a.out(0)?,
    )?;
    Ok(vec![a.out(0)?])
}

fn std(em: &mut Emitter, a: &NodeArgs) -> Result<Vec<ValueId>> {
    let out = a.out(0)?;
    let m = em.meta(out)?.clone();
    let meta = em.meta_like(out, m.dtype, m.sizes)?;
    let var = em.op(
        aten::VAR_CORRECTION,
        vec![
            ("self", Argument::Tensor(a.tensor("self")?)),
            ("dim", a.arg("dim")),
            ("correction", a.arg("correction")),
            ("keepdim", a.arg("keepdim")),
        ],
        meta,
    )?;
    em.op_into(
        aten::SQRT,
        vec![("self", Argument::Tensor(var))],
        out,
    )?;
    Ok(vec![out])
}

fn logsumexp(em: &mut Emitter, a: &NodeArgs) -> Result<Vec<ValueId>> {
    let x = a.tensor("self")?;
    let dtype = em.dtype(x)?;
    let dims = a.ints("dim")?;
    let keepdim = a.bool("keepdim")?;
    let m = reduce(em, aten::AMAX, x, &dims, true, vec![], dtype, None)?;
    let ab = unary(em, aten::ABS, m)?;
    let inf = cmp(em, aten::EQ_SCALAR, ab, Argument::Float(f64::INFINITY))?;
    let zero = scalar_tensor(em, x, scalar(0.0, dtype), dtype)?;
    let safe = where_(em, inf, zero, m, None)?;
    let c = binary(em, aten::SUB_TENSOR, x, safe, dtype, None)?;
    let e = unary(em, aten::EXP, c)?;
    let s = sum_dims(em, e, &dims, keepdim, dtype, None)?;
    let l = unary(em, aten::LOG, s)?;
    let shift = if keepdim {
        safe
    } else {
        let r = em.rank(x)?;
        let all: Vec<usize> = if dims.is_empty() {
            (0..r).collect()
        } else {
            dims.iter()
                .map(|&d| normalize_dim(d, r))
                .collect::<Result<_>>()?
        };
        squeeze_dims(em, safe, &all, None)?
    };
    binary_into(em, a, aten::ADD_TENSOR, l, shift, dtype)
}

fn correction_of(a: &NodeArgs) -> Result<Argument> {
    Ok(if a.0.arg("unbiased").is_some() {
        Argument::Int(if a.bool("unbiased")? { 1 } else { 0 })
    } else {
        a.arg("correction")
    })
}

fn var_args(a: &NodeArgs) -> Result<Vec<(&'static str, Argument)>> {
    Ok(vec![
        ("self", Argument::Tensor(a.tensor("self")?)),
        ("dim", a.arg("dim")),
        ("correction", correction_of(a)?),
        ("keepdim", a.arg("keepdim")),
    ])
}

/// `var.correction` over the node's dims into `out`, or its square root
/// when `sqrt` (the standard deviation).
fn var_into(em: &mut Emitter, a: &NodeArgs, out: ValueId, sqrt: bool) -> Result<ValueId> {
    if !sqrt {
        return em.op_into(aten::VAR_CORRECTION, var_args(a)?, out);
    }
    let m = em.meta(out)?.clone();
    let meta = em.meta_like(out, m.dtype, m.sizes)?;
    let v = em.op(aten::VAR_CORRECTION, var_args(a)?, meta)?;
    em.op_into(
        aten::SQRT,
        vec![("self", Argument::Tensor(v))],
        out,
    )
}

/// The mean over the node's dims into `out`.
fn mean_into(em: &mut Emitter, a: &NodeArgs, out: ValueId) -> Result<ValueId> {
    em.op_into(
        aten::MEAN_DIM,
        vec![
            ("self", Argument::Tensor(a.tensor("self")?)),
            ("dim", a.arg("dim")),
            ("keepdim", a.arg("keepdim")),
        ],
        out,
    )
}

fn std_dim(em: &mut Emitter, a: &NodeArgs) -> Result<Vec<ValueId>> {
    Ok(vec![var_into(em, a, a.out(0)?, true)?])
}

fn var_dim(em: &mut Emitter, a: &NodeArgs) -> Result<Vec<ValueId>> {
    Ok(vec![var_into(em, a, a.out(0)?, false)?])
}

/// var_mean and std_mean: (var or std, mean).
fn var_mean(em: &mut Emitter, a: &NodeArgs) -> Result<Vec<ValueId>> {
    let sqrt = a.0.target.name == "std_mean";
    Ok(vec![
        var_into(em, a, a.out(0)?, sqrt)?,
        mean_into(em, a, a.out(1)?)?,
    ])
}

pub(super) fn all(em: &mut Emitter, a: &NodeArgs) -> Result<Vec<ValueId>> {
    // all(x) = not(any(not(x)))
    let x = a.tensor("self")?;
    let nx = unary(em, aten::LOGICAL_NOT, x)?;
    let nx = if em.dtype(nx)? != Dtype::Bool {
        to_copy(em, nx, Dtype::Bool, None)?
    } else {
        nx
    };
    let out = a.out(0)?;
    let m = em.meta(out)?.clone();
    let meta = em.meta_like(out, Dtype::Bool, m.sizes)?;
    let any_op = format!("aten.any.{}", a.0.target.overload);
    let mut args = vec![("self", Argument::Tensor(nx))];
    for name in ["dim", "keepdim"] {
        if a.0.arg(name).is_some() {
            args.push((name, a.arg(name)));
        }
    }
    let any = em.op(&any_op, args, meta)?;
    Ok(vec![same(
        em,
        aten::LOGICAL_NOT,
        vec![("self", Argument::Tensor(any))],
        any,
        Some(out),
    )?])
}

fn count_nonzero(em: &mut Emitter, a: &NodeArgs) -> Result<Vec<ValueId>> {
    let x = a.tensor("self")?;
    let nz = cmp(em, aten::NE_SCALAR, x, Argument::Int(0))?;
    let dims = match a.0.arg("dim") {
        Some(Argument::Int(d)) => vec![*d],
        Some(Argument::Ints(v)) => v.clone(),
        _ => vec![],
    };
    Ok(vec![reduce(
        em,
        aten::SUM_DIM_INTLIST,
        nz,
        &dims,
        false,
        vec![("dtype", Argument::ScalarType(Dtype::Int64))],
        Dtype::Int64,
        Some(a.out(0)?),
    )?])
}

/// mse, l1, huber and smooth-l1 losses with their reductions.
fn loss(em: &mut Emitter, a: &NodeArgs) -> Result<Vec<ValueId>> {
    let (x, t) = (a.tensor("self")?, a.tensor("target")?);
    let out = a.out(0)?;
    let dtype = em.dtype(out)?;
    let d = binary(em, aten::SUB_TENSOR, x, t, dtype, None)?;
    let elem = match a.0.target.name.as_str() {
        "mse_loss" => binary(em, aten::MUL_TENSOR, d, d, dtype, None)?,
        "l1_loss" => unary(em, aten::ABS, d)?,
        name => {
            let ad = unary(em, aten::ABS, d)?;
            let (k, huber) = if name == "huber_loss" {
                (a.float("delta")?, true)
            } else {
                (a.float("beta")?, false)
            };
            let small = cmp(em, aten::LT_SCALAR, ad, Argument::Float(k))?;
            // huber: 0.5 d^2 | k (|d| - k/2); smooth l1: 0.5 d^2 / k | |d| - k/2
            let sq = binary(em, aten::MUL_TENSOR, d, d, dtype, None)?;
            let half_sq = with_scalar(
                em,
                aten::MUL_TENSOR,
                sq,
                Argument::Float(if huber { 0.5 } else { 0.5 / k }),
            )?;
            let lin = with_scalar(em, aten::SUB_TENSOR, ad, Argument::Float(k / 2.0))?;
            let lin = if huber {
                with_scalar(em, aten::MUL_TENSOR, lin, Argument::Float(k))?
            } else {
                lin
            };
            where_(em, small, half_sq, lin, None)?
        }
    };
    let reduction = a.int("reduction")?;
    let meta = em.meta(out)?.clone();
    match reduction {
        0 => Ok(vec![elem]),
        1 => {
            let m = em.meta_like(out, dtype, meta.sizes)?;
            let _ = m;
            em.op_into(
                aten::MEAN,
                vec![("self", Argument::Tensor(elem))],
                out,
            )?;
            Ok(vec![out])
        }
        _ => Ok(vec![sum_dims(em, elem, &[], false, dtype, Some(out))?]),
    }
}

fn nan_reduce(em: &mut Emitter, a: &NodeArgs) -> Result<Vec<ValueId>> {
    let x = a.tensor("self")?;
    let dtype = em.dtype(a.out(0)?)?;
    let dims = a.opt_ints("dim")?.unwrap_or_default();
    let keepdim = a.bool("keepdim")?;
    let is_nan = predicate(em, aten::ISNAN, x)?;
    let zero = scalar_tensor(em, x, scalar(0.0, dtype), dtype)?;
    let clean = where_(em, is_nan, zero, x, None)?;
    if a.0.target.name == "nansum" {
        return Ok(vec![sum_dims(
            em,
            clean,
            &dims,
            keepdim,
            dtype,
            Some(a.out(0)?),
        )?]);
    }
    let s = sum_dims(em, clean, &dims, keepdim, dtype, None)?;
    let ok = unary(em, aten::LOGICAL_NOT, is_nan)?;
    let n = reduce(
        em,
        aten::SUM_DIM_INTLIST,
        ok,
        &dims,
        keepdim,
        vec![("dtype", Argument::ScalarType(dtype))],
        dtype,
        None,
    )?;
    binary_into(em, a, aten::DIV_TENSOR, s, n, dtype)
}

/// argsort (the indices of a sort) and msort (values along dim 0).
fn sort_like(em: &mut Emitter, a: &NodeArgs) -> Result<Vec<ValueId>> {
    let x = a.tensor("self")?;
    let out = a.out(0)?;
    let sizes = em.sizes(x)?;
    let vmeta = em.meta_like(x, em.dtype(x)?, sizes.clone())?;
    let imeta = em.meta_like(x, Dtype::Int64, sizes)?;
    let (dim, desc) = if a.0.target.name == "msort" {
        (0, false)
    } else {
        (a.int("dim")?, a.bool("descending")?)
    };
    let args = vec![
        ("self", Argument::Tensor(x)),
        ("dim", Argument::Int(dim)),
        ("descending", Argument::Bool(desc)),
    ];
    if a.0.target.name == "msort" {
        em.call(
            aten::SORT,
            args,
            vec![Out::Into(out), Out::New(imeta)],
        )?;
    } else {
        em.call(
            aten::SORT,
            args,
            vec![Out::New(vmeta), Out::Into(out)],
        )?;
    }
    Ok(vec![out])
}

fn aminmax(em: &mut Emitter, a: &NodeArgs) -> Result<Vec<ValueId>> {
    let x = a.tensor("self")?;
    let dims = a.opt_int("dim")?.map(|d| vec![d]).unwrap_or_default();
    let keep = a.bool("keepdim")?;
    let dtype = em.dtype(x)?;
    let lo = reduce(
        em,
        aten::AMIN,
        x,
        &dims,
        keep,
        vec![],
        dtype,
        Some(a.out(0)?),
    )?;
    let hi = reduce(
        em,
        aten::AMAX,
        x,
        &dims,
        keep,
        vec![],
        dtype,
        Some(a.out(1)?),
    )?;
    Ok(vec![lo, hi])
}

/// max()/min() of every element: amax/amin over every dim.
fn max_min_all(em: &mut Emitter, a: &NodeArgs) -> Result<Vec<ValueId>> {
    let x = a.tensor("self")?;
    let op = if a.0.target.name == "max" { aten::AMAX } else { aten::AMIN };
    let dtype = em.dtype(x)?;
    Ok(vec![reduce(em, op, x, &[], false, vec![], dtype, Some(a.out(0)?))?])
}

/// `histc(self, bins, min, max)` as torch's CPU kernel: an element's bin
/// is `trunc((x - min) * bins / (max - min))` in the input's precision (the
/// last bin closed: clamped), counted where `min <= x <= max` (NaN is not),
/// by a one-hot sum over the elements (`[numel, bins]` booleans). With
/// `min == max` the range is the data's (`amin`, `amax`), widened by 1 each
/// way where still empty; torch refuses NaN data there with an error, the
/// lowered form counts nothing instead (ir-run's native row refuses it).
fn histc(em: &mut Emitter, a: &NodeArgs) -> Result<Vec<ValueId>> {
    let x = a.tensor("self")?;
    let bins = a.int("bins")?;
    let (lo, hi) = (a.float("min")?, a.float("max")?);
    let dtype = em.dtype(x)?;
    let name = &a.0.name;
    if !dtype.is_floating() || bins <= 0 || lo > hi || !lo.is_finite() || !hi.is_finite() {
        return Err(Error::bad_input(format!(
            "node {name}: histc takes a floating tensor, bins > 0 and a finite range min <= max, not {dtype}, {bins} bins, [{lo}, {hi}]"
        )));
    }
    let sizes = em.size_refs(x)?;
    let n = em.product(&sizes)?;
    let flat = reshape(em, x, &[n], None)?;
    // the range's ends and width in the input's precision, as torch's kernel
    let (lo_a, hi_a, span_a, cmp_ops) = if lo == hi {
        let mut ends = Vec::new();
        for op in [aten::AMIN, aten::AMAX] {
            ends.push(reduce(em, op, flat, &[0], false, vec![], dtype, None)?);
        }
        let same = binary(em, aten::EQ_TENSOR, ends[0], ends[1], Dtype::Bool, None)?;
        let wide_lo = with_scalar(em, aten::SUB_TENSOR, ends[0], Argument::Float(1.0))?;
        let wide_hi = with_scalar(em, aten::ADD_TENSOR, ends[1], Argument::Float(1.0))?;
        let lo_t = where_(em, same, wide_lo, ends[0], None)?;
        let hi_t = where_(em, same, wide_hi, ends[1], None)?;
        let span = binary(em, aten::SUB_TENSOR, hi_t, lo_t, dtype, None)?;
        (
            Argument::Tensor(lo_t),
            Argument::Tensor(hi_t),
            Argument::Tensor(span),
            [aten::GE_TENSOR, aten::LE_TENSOR],
        )
    } else if dtype == Dtype::Float64 {
        (
            Argument::Float(lo),
            Argument::Float(hi),
            Argument::Float(hi - lo),
            [aten::GE_SCALAR, aten::LE_SCALAR],
        )
    } else {
        let (l, h) = (lo as f32, hi as f32);
        (
            Argument::Float(l as f64),
            Argument::Float(h as f64),
            Argument::Float((h - l) as f64),
            [aten::GE_SCALAR, aten::LE_SCALAR],
        )
    };
    let ge = cmp(em, cmp_ops[0], flat, lo_a.clone())?;
    let le = cmp(em, cmp_ops[1], flat, hi_a)?;
    let inside = binary(em, aten::LOGICAL_AND, ge, le, Dtype::Bool, None)?;
    let d = with_scalar(em, aten::SUB_TENSOR, flat, lo_a)?;
    let d = with_scalar(em, aten::MUL_TENSOR, d, Argument::Float(bins as f64))?;
    let d = with_scalar(em, aten::DIV_TENSOR, d, span_a)?;
    let pos = to_copy(em, d, Dtype::Int64, None)?;
    let meta = em.meta_like(pos, Dtype::Int64, em.sizes(pos)?)?;
    let pos = em.op(
        aten::CLAMP,
        vec![
            ("self", Argument::Tensor(pos)),
            ("min", Argument::Int(0)),
            ("max", Argument::Int(bins - 1)),
        ],
        meta,
    )?;
    let pos = unsqueeze(em, pos, 1)?;
    let ids = arange_to(em, x, bins, 1, Dtype::Int64)?;
    let hit = binary(em, aten::EQ_TENSOR, pos, ids, Dtype::Bool, None)?;
    let inside = unsqueeze(em, inside, 1)?;
    let hit = binary(em, aten::LOGICAL_AND, hit, inside, Dtype::Bool, None)?;
    let hit = to_copy(em, hit, dtype, None)?;
    Ok(vec![sum_dims(em, hit, &[0], false, dtype, Some(a.out(0)?))?])
}

rules! {
    aten::MAX => [aten::AMAX] max_min_all;
    aten::HISTC => [aten::VIEW, aten::CLONE, aten::AMIN, aten::AMAX, aten::WHERE_SELF, aten::ADD_TENSOR, aten::GE_TENSOR, aten::LE_TENSOR, aten::GE_SCALAR, aten::LE_SCALAR, aten::LOGICAL_AND, aten::SUB_TENSOR, aten::MUL_TENSOR, aten::DIV_TENSOR, aten::_TO_COPY, aten::CLAMP, aten::UNSQUEEZE, aten::ARANGE_START_STEP, aten::EQ_TENSOR, aten::SUM_DIM_INTLIST] histc;
    aten::MIN => [aten::AMIN] max_min_all;
    aten::SUM => [aten::SUM_DIM_INTLIST] sum_all;
    aten::STD_CORRECTION => [aten::VAR_CORRECTION, aten::SQRT] std;
    aten::ALL => [aten::LOGICAL_NOT, aten::ANY] all;
    aten::ALL_DIM => [aten::LOGICAL_NOT, aten::ANY_DIM] all;
    aten::ALL_DIMS => [aten::LOGICAL_NOT, aten::ANY_DIMS] all;
    aten::COUNT_NONZERO => [aten::NE_SCALAR, aten::SUM_DIM_INTLIST] count_nonzero;
    aten::COUNT_NONZERO_DIM_INTLIST => [aten::NE_SCALAR, aten::SUM_DIM_INTLIST] count_nonzero;
    aten::MSE_LOSS => [aten::SUB_TENSOR, aten::MUL_TENSOR, aten::MEAN, aten::SUM_DIM_INTLIST] loss;
    aten::L1_LOSS => [aten::SUB_TENSOR, aten::ABS, aten::MEAN, aten::SUM_DIM_INTLIST] loss;
    aten::HUBER_LOSS => [aten::SUB_TENSOR, aten::ABS, aten::LT_SCALAR, aten::MUL_TENSOR, aten::WHERE_SELF, aten::MEAN] loss;
    aten::SMOOTH_L1_LOSS => [aten::SUB_TENSOR, aten::ABS, aten::LT_SCALAR, aten::MUL_TENSOR, aten::DIV_TENSOR, aten::WHERE_SELF, aten::MEAN] loss;
    aten::NANSUM => [aten::ISNAN, aten::WHERE_SELF, aten::SUM_DIM_INTLIST] nan_reduce;
    aten::NANMEAN => [aten::ISNAN, aten::WHERE_SELF, aten::SUM_DIM_INTLIST, aten::LOGICAL_NOT, aten::DIV_TENSOR] nan_reduce;
    aten::STD_MEAN_DIM => [aten::VAR_CORRECTION, aten::SQRT, aten::MEAN_DIM] var_mean;
    aten::STD_MEAN_CORRECTION => [aten::VAR_CORRECTION, aten::SQRT, aten::MEAN_DIM] var_mean;
    aten::ARGSORT => [aten::SORT] sort_like;
    aten::ARGSORT_STABLE => [aten::SORT] sort_like;
    aten::MSORT => [aten::SORT] sort_like;
    aten::AMINMAX => [aten::AMIN, aten::AMAX] aminmax;
    aten::LOGSUMEXP => [aten::AMAX, aten::ABS, aten::EQ_SCALAR, aten::SCALAR_TENSOR, aten::WHERE_SELF, aten::SUB_TENSOR, aten::EXP, aten::SUM_DIM_INTLIST, aten::LOG, aten::SQUEEZE_DIMS, aten::ADD_TENSOR] logsumexp;
    aten::STD_DIM => [aten::VAR_CORRECTION, aten::SQRT] std_dim;
    aten::VAR_DIM => [aten::VAR_CORRECTION] var_dim;
    aten::VAR_MEAN_DIM => [aten::VAR_CORRECTION, aten::MEAN_DIM] var_mean;
    aten::VAR_MEAN_CORRECTION => [aten::VAR_CORRECTION, aten::MEAN_DIM] var_mean;
}

/// Ops that are another op of this family under another name.
pub(super) const ALIASES: &[(&str, &str)] = &[
    (aten::MAX_OTHER, aten::MAXIMUM),
    (aten::MIN_OTHER, aten::MINIMUM),
    (aten::VAR, aten::VAR_DIM),
    (aten::STD, aten::STD_DIM),
    (aten::STD_MEAN, aten::STD_MEAN_DIM),
    (aten::VAR_MEAN, aten::VAR_MEAN_DIM),
];
