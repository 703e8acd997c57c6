//! Elementwise arithmetic, comparisons, logic and math functions: the decomposition rules.

use crate::ir::op::{aten, quantized_decomposed};
use super::*;
use crate::promote::{result_type, Rank};

fn renamed(em: &mut Emitter, a: &NodeArgs) -> Result<Vec<ValueId>> {
    let name = a.0.target.name.trim_matches('_');
    let op = format!("aten.bitwise_{name}.{}", a.0.target.overload);
    let args =
        a.0.inputs
            .iter()
            .map(|n| (n.name.as_str(), n.arg.clone()))
            .collect();
    em.op_into(&op, args, a.out(0)?)?;
    Ok(vec![a.out(0)?])
}

fn where_scalar(em: &mut Emitter, a: &NodeArgs) -> Result<Vec<ValueId>> {
    let out = a.out(0)?;
    let dtype = em.dtype(out)?;
    let c = a.tensor("condition")?;
    let side = |em: &mut Emitter, name: &str| -> Result<ValueId> {
        match a.0.arg(name) {
            Some(Argument::Tensor(v)) => Ok(*v),
            _ => scalar_tensor(em, out, a.arg(name), dtype),
        }
    };
    let x = side(em, "self")?;
    let y = side(em, "other")?;
    Ok(vec![where_(em, c, x, y, Some(out))?])
}

pub(super) fn diff(em: &mut Emitter, a: &NodeArgs) -> Result<Vec<ValueId>> {
    let mut x = a.tensor("self")?;
    let d = normalize_dim(a.int("dim")?, em.rank(x)?)?;
    let parts: Vec<ValueId> = [a.opt_tensor("prepend")?, Some(x), a.opt_tensor("append")?]
        .into_iter()
        .flatten()
        .collect();
    if parts.len() > 1 {
        let mut sizes = em.sizes(x)?;
        let mut total = Sym::Int(0);
        for p in &parts {
            total = sym_add(&total, &em.sizes(*p)?[d]);
        }
        sizes[d] = total;
        let meta = em.meta_like(x, em.dtype(x)?, sizes)?;
        x = em.op(
            aten::CAT,
            vec![
                ("tensors", Argument::Tensors(parts)),
                ("dim", Argument::Int(d as i64)),
            ],
            meta,
        )?;
    }
    let n = a.int("n")?;
    let out = a.out(0)?;
    for i in 0..n {
        let hi = slice(em, x, d, 1, i64::MAX)?;
        let lo = slice(em, x, d, 0, -1)?;
        let dtype = em.dtype(x)?;
        let op = if dtype == Dtype::Bool {
            aten::LOGICAL_XOR
        } else {
            aten::SUB_TENSOR
        };
        let target = if i == n - 1 { Some(out) } else { None };
        x = binary(em, op, hi, lo, dtype, target)?;
    }
    Ok(vec![if n == 0 { x } else { out }])
}

fn clamp_one(em: &mut Emitter, a: &NodeArgs) -> Result<Vec<ValueId>> {
    let bound = if a.0.target.name == "clamp_min" {
        ("min", a.arg("min"))
    } else {
        ("max", a.arg("max"))
    };
    em.op_into(
        aten::CLAMP,
        vec![("self", Argument::Tensor(a.tensor("self")?)), bound],
        a.out(0)?,
    )?;
    Ok(vec![a.out(0)?])
}

fn square(em: &mut Emitter, a: &NodeArgs) -> Result<Vec<ValueId>> {
    em.op_into(
        aten::POW_TENSOR_SCALAR,
        vec![
            ("self", Argument::Tensor(a.tensor("self")?)),
            ("exponent", Argument::Int(2)),
        ],
        a.out(0)?,
    )?;
    Ok(vec![a.out(0)?])
}

fn rsub(em: &mut Emitter, a: &NodeArgs) -> Result<Vec<ValueId>> {
    // other - alpha * self
    let x = a.tensor("self")?;
    let dtype = em.dtype(a.out(0)?)?;
    let o = scalar_tensor(em, x, a.arg("other"), dtype)?;
    em.op_into(
        aten::SUB_TENSOR,
        vec![
            ("self", Argument::Tensor(o)),
            ("other", Argument::Tensor(x)),
            ("alpha", a.arg("alpha")),
        ],
        a.out(0)?,
    )?;
    Ok(vec![a.out(0)?])
}

fn erfc(em: &mut Emitter, a: &NodeArgs) -> Result<Vec<ValueId>> {
    let x = a.tensor("self")?;
    let e = unary(em, aten::ERF, x)?;
    let n = unary(em, aten::NEG, e)?;
    Ok(vec![same(
        em,
        aten::ADD_TENSOR,
        vec![
            ("self", Argument::Tensor(n)),
            ("other", Argument::Float(1.0)),
        ],
        x,
        Some(a.out(0)?),
    )?])
}

fn lerp(em: &mut Emitter, a: &NodeArgs) -> Result<Vec<ValueId>> {
    // torch: weight < 0.5 ? start + w * (end - start) : end - (end - start) * (1 - w)
    let (x, end) = (a.tensor("self")?, a.tensor("end")?);
    let w = a.float("weight")?;
    let dtype = em.dtype(a.out(0)?)?;
    let diff = binary(em, aten::SUB_TENSOR, end, x, dtype, None)?;
    if w < 0.5 {
        let step = with_scalar(em, aten::MUL_TENSOR, diff, Argument::Float(w))?;
        binary_into(em, a, aten::ADD_TENSOR, x, step, dtype)
    } else {
        let step = with_scalar(em, aten::MUL_TENSOR, diff, Argument::Float(1.0 - w))?;
        binary_into(em, a, aten::SUB_TENSOR, end, step, dtype)
    }
}

fn addc(em: &mut Emitter, a: &NodeArgs) -> Result<Vec<ValueId>> {
    let (x, t1, t2) = (a.tensor("self")?, a.tensor("tensor1")?, a.tensor("tensor2")?);
    let dtype = em.dtype(a.out(0)?)?;
    let op = if a.0.target.name == "addcmul" {
        aten::MUL_TENSOR
    } else {
        aten::DIV_TENSOR
    };
    let mut p = binary(em, op, t1, t2, dtype, None)?;
    let v = a.float("value")?;
    if v != 1.0 {
        p = with_scalar(em, aten::MUL_TENSOR, p, scalar(v, dtype))?;
    }
    binary_into(em, a, aten::ADD_TENSOR, x, p, dtype)
}

fn deg_rad(em: &mut Emitter, a: &NodeArgs) -> Result<Vec<ValueId>> {
    let f = if a.0.target.name == "deg2rad" {
        std::f64::consts::PI / 180.0
    } else {
        180.0 / std::f64::consts::PI
    };
    Ok(vec![same(
        em,
        aten::MUL_TENSOR,
        vec![
            ("self", Argument::Tensor(a.tensor("self")?)),
            ("other", Argument::Float(f)),
        ],
        a.out(0)?,
        Some(a.out(0)?),
    )?])
}

fn floor_divide(em: &mut Emitter, a: &NodeArgs) -> Result<Vec<ValueId>> {
    let op = if a.0.target.overload == "Scalar" {
        aten::DIV_SCALAR_MODE
    } else {
        aten::DIV_TENSOR_MODE
    };
    em.op_into(
        op,
        vec![
            ("self", a.arg("self")),
            ("other", a.arg("other")),
            ("rounding_mode", Argument::String("floor".into())),
        ],
        a.out(0)?,
    )?;
    Ok(vec![a.out(0)?])
}

fn frac(em: &mut Emitter, a: &NodeArgs) -> Result<Vec<ValueId>> {
    let x = a.tensor("self")?;
    let t = unary(em, aten::TRUNC, x)?;
    let dtype = em.dtype(x)?;
    binary_into(em, a, aten::SUB_TENSOR, x, t, dtype)
}

fn isfinite(em: &mut Emitter, a: &NodeArgs) -> Result<Vec<ValueId>> {
    let x = a.tensor("self")?;
    let inf = predicate(em, aten::ISINF, x)?;
    let nan = predicate(em, aten::ISNAN, x)?;
    let bad = binary(em, aten::LOGICAL_OR, inf, nan, Dtype::Bool, None)?;
    Ok(vec![same(
        em,
        aten::LOGICAL_NOT,
        vec![("self", Argument::Tensor(bad))],
        bad,
        Some(a.out(0)?),
    )?])
}

fn isinf_signed(em: &mut Emitter, a: &NodeArgs) -> Result<Vec<ValueId>> {
    let v = if a.0.target.name == "isposinf" {
        f64::INFINITY
    } else {
        f64::NEG_INFINITY
    };
    em.op_into(
        aten::EQ_SCALAR,
        vec![
            ("self", Argument::Tensor(a.tensor("self")?)),
            ("other", Argument::Float(v)),
        ],
        a.out(0)?,
    )?;
    Ok(vec![a.out(0)?])
}

fn lerp_tensor(em: &mut Emitter, a: &NodeArgs) -> Result<Vec<ValueId>> {
    // where(w < 0.5, start + w * (end - start), end - (end - start) * (1 - w))
    let (x, end, w) = (a.tensor("self")?, a.tensor("end")?, a.tensor("weight")?);
    let dtype = em.dtype(a.out(0)?)?;
    let diff = binary(em, aten::SUB_TENSOR, end, x, dtype, None)?;
    let lo = binary(em, aten::MUL_TENSOR, w, diff, dtype, None)?;
    let lo = binary(em, aten::ADD_TENSOR, x, lo, dtype, None)?;
    let nw = unary(em, aten::NEG, w)?;
    let one_minus = with_scalar(em, aten::ADD_TENSOR, nw, Argument::Float(1.0))?;
    let hi = binary(em, aten::MUL_TENSOR, diff, one_minus, dtype, None)?;
    let hi = binary(em, aten::SUB_TENSOR, end, hi, dtype, None)?;
    let small = cmp(em, aten::LT_SCALAR, w, Argument::Float(0.5))?;
    Ok(vec![where_(em, small, lo, hi, Some(a.out(0)?))?])
}

fn logaddexp(em: &mut Emitter, a: &NodeArgs) -> Result<Vec<ValueId>> {
    // max(a, b) + log1p(exp(-|a - b|)); where both are the same infinity, that infinity
    let (x, y) = (a.tensor("self")?, a.tensor("other")?);
    let dtype = em.dtype(a.out(0)?)?;
    let m = binary(em, aten::MAXIMUM, x, y, dtype, None)?;
    let d = binary(em, aten::SUB_TENSOR, x, y, dtype, None)?;
    let ad = unary(em, aten::ABS, d)?;
    let n = unary(em, aten::NEG, ad)?;
    // logaddexp2: max + log2(1 + 2^-|a-b|) = max + log1p(2^-|a-b|) / ln 2
    let base2 = a.0.target.name == "logaddexp2";
    let e = if base2 {
        same(
            em,
            aten::POW_SCALAR,
            vec![
                ("self", Argument::Float(2.0)),
                ("exponent", Argument::Tensor(n)),
            ],
            n,
            None,
        )?
    } else {
        unary(em, aten::EXP, n)?
    };
    let mut l = unary(em, aten::LOG1P, e)?;
    if base2 {
        l = with_scalar(
            em,
            aten::MUL_TENSOR,
            l,
            Argument::Float(std::f64::consts::LOG2_E),
        )?;
    }
    let r = binary(em, aten::ADD_TENSOR, m, l, dtype, None)?;
    let inf = {
        predicate(em, aten::ISINF, x)?
    };
    let eq = binary(em, aten::EQ_TENSOR, x, y, Dtype::Bool, None)?;
    let both = binary(em, aten::LOGICAL_AND, inf, eq, Dtype::Bool, None)?;
    Ok(vec![where_(em, both, x, r, Some(a.out(0)?))?])
}

/// fmax/fmin: maximum/minimum, except that a NaN loses to a number (NaN
/// only where both are): `where(isnan(x), y, where(isnan(y), x, max(x, y)))`
/// in the result's dtype.
fn fmax_fmin(em: &mut Emitter, a: &NodeArgs) -> Result<Vec<ValueId>> {
    let op = if a.0.target.name == "fmax" { aten::MAXIMUM } else { aten::MINIMUM };
    let out = a.out(0)?;
    let dtype = em.dtype(out)?;
    let (mut x, mut y) = (a.tensor("self")?, a.tensor("other")?);
    if !dtype.is_floating() {
        return binary_into(em, a, op, x, y, dtype);
    }
    for v in [&mut x, &mut y] {
        if em.dtype(*v)? != dtype {
            *v = to_copy(em, *v, dtype, None)?;
        }
    }
    let m = binary(em, op, x, y, dtype, None)?;
    let (x_nan, y_nan) = (predicate(em, aten::ISNAN, x)?, predicate(em, aten::ISNAN, y)?);
    let r = where_(em, y_nan, x, m, None)?;
    Ok(vec![where_(em, x_nan, y, r, Some(out))?])
}

fn nan_to_num(em: &mut Emitter, a: &NodeArgs) -> Result<Vec<ValueId>> {
    let x = a.tensor("self")?;
    let dtype = em.dtype(x)?;
    let (big, small) = match dtype {
        Dtype::Float64 => (f64::MAX, f64::MIN),
        Dtype::Float16 => (65504.0, -65504.0),
        Dtype::BFloat16 => (3.3895313892515355e38, -3.3895313892515355e38),
        _ => (f32::MAX as f64, f32::MIN as f64),
    };
    let nan = a.opt_float("nan")?.unwrap_or(0.0);
    let pos = a.opt_float("posinf")?.unwrap_or(big);
    let neg = a.opt_float("neginf")?.unwrap_or(small);
    let is_nan = predicate(em, aten::ISNAN, x)?;
    let is_pos = cmp(em, aten::EQ_SCALAR, x, Argument::Float(f64::INFINITY))?;
    let is_neg = cmp(em, aten::EQ_SCALAR, x, Argument::Float(f64::NEG_INFINITY))?;
    let vn = scalar_tensor(em, x, Argument::Float(nan), dtype)?;
    let vp = scalar_tensor(em, x, Argument::Float(pos), dtype)?;
    let vg = scalar_tensor(em, x, Argument::Float(neg), dtype)?;
    let y = where_(em, is_nan, vn, x, None)?;
    let y = where_(em, is_pos, vp, y, None)?;
    Ok(vec![where_(em, is_neg, vg, y, Some(a.out(0)?))?])
}

fn rsub_tensor(em: &mut Emitter, a: &NodeArgs) -> Result<Vec<ValueId>> {
    em.op_into(
        aten::SUB_TENSOR,
        vec![
            ("self", Argument::Tensor(a.tensor("other")?)),
            ("other", Argument::Tensor(a.tensor("self")?)),
            ("alpha", a.arg("alpha")),
        ],
        a.out(0)?,
    )?;
    Ok(vec![a.out(0)?])
}

fn sinc(em: &mut Emitter, a: &NodeArgs) -> Result<Vec<ValueId>> {
    let x = a.tensor("self")?;
    let dtype = em.dtype(a.out(0)?)?;
    let px = with_scalar(
        em,
        aten::MUL_TENSOR,
        x,
        Argument::Float(std::f64::consts::PI),
    )?;
    let s = unary(em, aten::SIN, px)?;
    let q = binary(em, aten::DIV_TENSOR, s, px, dtype, None)?;
    let zero = cmp(em, aten::EQ_SCALAR, x, Argument::Float(0.0))?;
    let one = scalar_tensor(em, x, scalar(1.0, dtype), dtype)?;
    Ok(vec![where_(em, zero, one, q, Some(a.out(0)?))?])
}

fn xlogy(em: &mut Emitter, a: &NodeArgs) -> Result<Vec<ValueId>> {
    // where(isnan(y), nan, where(x == 0, 0, x * log(y)))
    let dtype = em.dtype(a.out(0)?)?;
    let out = a.out(0)?;
    let side = |em: &mut Emitter, name: &str| -> Result<ValueId> {
        match a.0.arg(name) {
            Some(Argument::Tensor(v)) => Ok(*v),
            _ => scalar_tensor(em, out, a.arg(name), dtype),
        }
    };
    let (x, y) = (side(em, "self")?, side(em, "other")?);
    let ly = unary(em, aten::LOG, y)?;
    let p = binary(em, aten::MUL_TENSOR, x, ly, dtype, None)?;
    let z = cmp(em, aten::EQ_SCALAR, x, Argument::Float(0.0))?;
    let zero = scalar_tensor(em, x, scalar(0.0, dtype), dtype)?;
    let r = where_(em, z, zero, p, None)?;
    let nan = predicate(em, aten::ISNAN, y)?;
    let nanv = scalar_tensor(em, x, Argument::Float(f64::NAN), dtype)?;
    Ok(vec![where_(em, nan, nanv, r, Some(a.out(0)?))?])
}

fn float_power(em: &mut Emitter, a: &NodeArgs) -> Result<Vec<ValueId>> {
    let out = a.out(0)?;
    let as64 = |em: &mut Emitter, name: &str| -> Result<Argument> {
        Ok(match a.0.arg(name) {
            Some(Argument::Tensor(v)) if em.dtype(*v)? != Dtype::Float64 => {
                Argument::Tensor(to_copy(em, *v, Dtype::Float64, None)?)
            }
            Some(Argument::Tensor(v)) => Argument::Tensor(*v),
            _ => Argument::Float(a.float(name)?),
        })
    };
    let (base, exp) = (as64(em, "self")?, as64(em, "exponent")?);
    let op = format!("aten.pow.{}", a.0.target.overload);
    em.op_into(&op, vec![("self", base), ("exponent", exp)], out)?;
    Ok(vec![out])
}

fn heaviside(em: &mut Emitter, a: &NodeArgs) -> Result<Vec<ValueId>> {
    let (x, v) = (a.tensor("self")?, a.tensor("values")?);
    let dtype = em.dtype(a.out(0)?)?;
    let zero = cmp(em, aten::EQ_SCALAR, x, Argument::Int(0))?;
    let pos = cmp(em, aten::GT_SCALAR, x, Argument::Int(0))?;
    let step = to_copy(em, pos, dtype, None)?;
    Ok(vec![where_(em, zero, v, step, Some(a.out(0)?))?])
}

fn isclose(em: &mut Emitter, a: &NodeArgs) -> Result<Vec<ValueId>> {
    let (x, y) = (a.tensor("self")?, a.tensor("other")?);
    let dtype = em.dtype(x)?;
    let d = binary(em, aten::SUB_TENSOR, x, y, dtype, None)?;
    let ad = unary(em, aten::ABS, d)?;
    let ay = unary(em, aten::ABS, y)?;
    let tol = with_scalar(em, aten::MUL_TENSOR, ay, Argument::Float(a.float("rtol")?))?;
    let tol = with_scalar(
        em,
        aten::ADD_TENSOR,
        tol,
        Argument::Float(a.float("atol")?),
    )?;
    let close = binary(em, aten::LE_TENSOR, ad, tol, Dtype::Bool, None)?;
    let eq = binary(em, aten::EQ_TENSOR, x, y, Dtype::Bool, None)?;
    let out = a.out(0)?;
    if !a.bool("equal_nan")? {
        return Ok(vec![binary(
            em,
            aten::LOGICAL_OR,
            eq,
            close,
            Dtype::Bool,
            Some(out),
        )?]);
    }
    let r = binary(em, aten::LOGICAL_OR, eq, close, Dtype::Bool, None)?;
    let nx = predicate(em, aten::ISNAN, x)?;
    let ny = predicate(em, aten::ISNAN, y)?;
    let both = binary(em, aten::LOGICAL_AND, nx, ny, Dtype::Bool, None)?;
    Ok(vec![binary(
        em,
        aten::LOGICAL_OR,
        r,
        both,
        Dtype::Bool,
        Some(out),
    )?])
}

fn exp2(em: &mut Emitter, a: &NodeArgs) -> Result<Vec<ValueId>> {
    em.op_into(
        aten::POW_SCALAR,
        vec![
            ("self", Argument::Float(2.0)),
            ("exponent", Argument::Tensor(a.tensor("self")?)),
        ],
        a.out(0)?,
    )?;
    Ok(vec![a.out(0)?])
}

/// `x << s` and `x >> s` by a constant: a product by `2^s` (wrapping
/// in the dtype, as the shift does), or floor divisions by powers of two
/// (an arithmetic shift); a shift past the width gives torch's 0 or -1.
fn shift_by_constant(em: &mut Emitter, a: &NodeArgs) -> Result<Vec<ValueId>> {
    let (x, out) = (a.tensor("self")?, a.out(0)?);
    let dtype = em.dtype(x)?;
    if dtype.is_floating() || dtype == Dtype::Bool {
        return Err(Error::unsupported(format!("a shift of {} values", dtype.torch_name())));
    }
    let s = match a.arg("other") {
        Argument::Int(s) => s,
        other => {
            return Err(Error::unsupported(format!(
                "a shift by {other:?} (only a constant int is lowered)"
            )))
        }
    };
    let unsigned = matches!(dtype, Dtype::Uint8 | Dtype::Uint16 | Dtype::Uint32 | Dtype::Uint64);
    let bits = (dtype.size() * 8) as i64;
    if a.0.target.name.contains("lshift") || a.0.target.name.contains("left") {
        let factor = if (0..bits).contains(&s) { 1i64.wrapping_shl(s as u32) } else { 0 };
        let args = vec![("self", Argument::Tensor(x)), ("other", Argument::Int(factor))];
        return Ok(vec![same(em, aten::MUL_TENSOR, args, out, Some(out))?]);
    }
    // right: by at most the width (less the sign bit), in steps whose
    // divisor the dtype holds
    let max = bits - (!unsigned) as i64;
    let mut left = if s < 0 || s > max { max } else { s };
    let mut v = x;
    while left > 0 {
        let step = left.min(bits - 2).min(62);
        left -= step;
        let args = vec![
            ("self", Argument::Tensor(v)),
            ("other", Argument::Int(1i64 << step)),
            ("rounding_mode", Argument::String("floor".into())),
        ];
        v = same(em, aten::DIV_TENSOR_MODE, args, out, (left == 0).then_some(out))?;
    }
    if v == x {
        return Ok(vec![same(em, aten::CLONE, vec![("self", Argument::Tensor(x))], out, Some(out))?]);
    }
    Ok(vec![v])
}

/// The pair view of a complex `x` and one of its parts (0 real, 1
/// imaginary), as torch's own decompositions of `real` and `imag` take it.
fn complex_part(em: &mut Emitter, x: ValueId, part: i64, out: Option<ValueId>) -> Result<ValueId> {
    let m = em.meta(x)?.clone();
    let pair = crate::decompose::edit::pair_meta(&m);
    let dtype = pair.dtype;
    let r = em.op(
        aten::VIEW_AS_REAL,
        vec![("self", Argument::Tensor(x))],
        pair,
    )?;
    let rank = m.sizes.len();
    let meta = em.meta_like(x, dtype, m.sizes)?;
    em.op_to(
        aten::SELECT_INT,
        vec![
            ("self", Argument::Tensor(r)),
            ("dim", Argument::Int(rank as i64)),
            ("index", Argument::Int(part)),
        ],
        out,
        meta,
    )
}

/// `real`, `imag` of a complex value: a select of its pair view (as
/// torch decomposes them); `real` of a real value is the value.
fn real_imag(em: &mut Emitter, a: &NodeArgs) -> Result<Vec<ValueId>> {
    let x = a.tensor("self")?;
    let imag = a.0.target.name == "imag";
    if !em.dtype(x)?.is_complex() {
        if imag {
            return Err(Error::bad_input("imag is not implemented for real tensors"));
        }
        return Ok(vec![x]);
    }
    Ok(vec![complex_part(em, x, i64::from(imag), Some(a.out(0)?))?])
}

/// `angle`: of a complex value `atan2(imag, real)`; of a real one pi where
/// it is negative, NaN where NaN, else 0 (torch's kernel; integers give
/// float32).
fn angle(em: &mut Emitter, a: &NodeArgs) -> Result<Vec<ValueId>> {
    let x = a.tensor("self")?;
    let out = a.out(0)?;
    if em.dtype(x)?.is_complex() {
        let re = complex_part(em, x, 0, None)?;
        let im = complex_part(em, x, 1, None)?;
        let dtype = em.dtype(re)?;
        return Ok(vec![binary(em, aten::ATAN2, im, re, dtype, Some(out))?]);
    }
    let dtype = em.dtype(out)?;
    let x = if em.dtype(x)? == dtype { x } else { to_copy(em, x, dtype, None)? };
    let neg = cmp(em, aten::LT_SCALAR, x, Argument::Int(0))?;
    let pi = scalar_tensor(em, x, Argument::Float(std::f64::consts::PI), dtype)?;
    let zero = scalar_tensor(em, x, Argument::Float(0.0), dtype)?;
    let v = where_(em, neg, pi, zero, None)?;
    let nan = predicate(em, aten::ISNAN, x)?;
    Ok(vec![where_(em, nan, x, v, Some(out))?])
}

/// `conj`: of a complex value torch's `_conj`; of a real one the value.
/// `resolve_conj`, `resolve_neg`: the value (a graph's conjugations are
/// explicit ops already).
fn conj_of(em: &mut Emitter, a: &NodeArgs) -> Result<Vec<ValueId>> {
    let x = a.tensor("self")?;
    if a.0.target.name != "conj" || !em.dtype(x)?.is_complex() {
        return Ok(vec![x]);
    }
    let m = em.meta(x)?.clone();
    let meta = em.meta_like(x, m.dtype, m.sizes)?;
    Ok(vec![em.op_to(
        aten::_CONJ,
        vec![("self", Argument::Tensor(x))],
        Some(a.out(0)?),
        meta,
    )?])
}

// PT2E int8 (quantized_decomposed): torch's reference kernels
// (torch/ao/quantization/fx/_decomposed.py) step by step in core ops, each
// in the dtype torch computes it in: the executor and ONNX Runtime give
// torch's integers.

/// A per-tensor parameter as a 0-d tensor (a `.tensor` overload's
/// one-element tensor viewed as 0-d), or `None` where it is a number.
fn qparam_0d(em: &mut Emitter, a: &NodeArgs, name: &str) -> Result<Option<ValueId>> {
    match a.0.arg(name) {
        Some(Argument::Tensor(v)) => Ok(Some(view(em, *v, &[], None)?)),
        _ => Ok(None),
    }
}

/// `x` as `dtype` (itself when it is).
fn as_dtype(em: &mut Emitter, x: ValueId, dtype: Dtype) -> Result<ValueId> {
    if em.dtype(x)? == dtype {
        Ok(x)
    } else {
        to_copy(em, x, dtype, None)
    }
}

/// `op(x, other)` with torch's result dtype `dtype` and `x`'s sizes
/// broadcast with `other`'s (a number: `x`'s).
fn scalar_op(em: &mut Emitter, op: &str, x: ValueId, other: Argument, dtype: Dtype) -> Result<ValueId> {
    let sizes = match &other {
        Argument::Tensor(o) => broadcast(&em.sizes(x)?, &em.sizes(*o)?),
        _ => em.sizes(x)?,
    };
    let meta = em.meta_like(x, dtype, sizes)?;
    em.op(op, vec![("self", Argument::Tensor(x)), ("other", other)], meta)
}

/// `clamp(round(t) + zp, quant_min, quant_max).to(dtype)` into the
/// node's output, `t` the scaled input in `c`.
fn round_shift_clamp(em: &mut Emitter, a: &NodeArgs, t: ValueId, zp: Argument, c: Dtype) -> Result<Vec<ValueId>> {
    let r = unary(em, aten::ROUND, t)?;
    let r = scalar_op(em, aten::ADD_TENSOR, r, zp, c)?;
    let sizes = em.sizes(r)?;
    let meta = em.meta_like(r, c, sizes)?;
    let clamped = em.op(
        aten::CLAMP,
        vec![
            ("self", Argument::Tensor(r)),
            ("min", Argument::Int(a.int("quant_min")?)),
            ("max", Argument::Int(a.int("quant_max")?)),
        ],
        meta,
    )?;
    Ok(vec![to_copy(em, clamped, em.dtype(a.out(0)?)?, Some(a.out(0)?))?])
}

/// quantize_per_tensor (`.default`, `.tensor`): `input * (1.0 / scale)` in
/// float32, the reciprocal in float64 (Python's, of `scale.item()`).
fn quantize_per_tensor(em: &mut Emitter, a: &NodeArgs) -> Result<Vec<ValueId>> {
    let f32_ = Dtype::Float32;
    let x = as_dtype(em, a.tensor("input")?, f32_)?;
    let inv = match qparam_0d(em, a, "scale")? {
        Some(s) => {
            let s = as_dtype(em, s, Dtype::Float64)?;
            let r = unary(em, aten::RECIPROCAL, s)?;
            Argument::Tensor(to_copy(em, r, f32_, None)?)
        }
        None => Argument::Float((1.0 / a.float("scale")?) as f32 as f64),
    };
    let t = scalar_op(em, aten::MUL_TENSOR, x, inv, f32_)?;
    let zp = match qparam_0d(em, a, "zero_point")? {
        Some(z) => Argument::Tensor(z),
        None => Argument::Int(a.int("zero_point")?),
    };
    round_shift_clamp(em, a, t, zp, f32_)
}

/// A per-channel parameter viewed to broadcast along `axis` of `x`.
fn along_axis(em: &mut Emitter, a: &NodeArgs, name: &str, x: ValueId) -> Result<ValueId> {
    let v = a.tensor(name)?;
    let rank = em.rank(x)?;
    let axis = normalize_dim(a.int("axis")?, rank)?;
    let mut shape = vec![SymRef::Int(1); rank];
    shape[axis] = SymRef::Int(em.static_dim(v, 0, "a per-channel parameter")?);
    view(em, v, &shape, None)
}

/// quantize_per_channel: `input * (1.0 / scales)`, the reciprocals in the
/// scales' dtype, the product in float32 promoted with it.
fn quantize_per_channel(em: &mut Emitter, a: &NodeArgs) -> Result<Vec<ValueId>> {
    let x = as_dtype(em, a.tensor("input")?, Dtype::Float32)?;
    let s = along_axis(em, a, "scales", x)?;
    let c = result_type(&[(Dtype::Float32, Rank::Dim), (em.dtype(s)?, Rank::Dim)]);
    let inv = unary(em, aten::RECIPROCAL, s)?;
    let t = scalar_op(em, aten::MUL_TENSOR, x, Argument::Tensor(inv), c)?;
    let z = along_axis(em, a, "zero_points", x)?;
    round_shift_clamp(em, a, t, Argument::Tensor(z), c)
}

/// dequantize_per_tensor (`.default`, `.tensor`): `(input.to(out_dtype) -
/// zero_point) * scale`, the parameters as Python numbers in `out_dtype`.
fn dequantize_per_tensor(em: &mut Emitter, a: &NodeArgs) -> Result<Vec<ValueId>> {
    let out = a.out(0)?;
    let od = em.dtype(out)?;
    let x = as_dtype(em, a.tensor("input")?, od)?;
    let zp = match qparam_0d(em, a, "zero_point")? {
        Some(z) => Argument::Tensor(z),
        None => Argument::Int(a.int("zero_point")?),
    };
    let d = scalar_op(em, aten::SUB_TENSOR, x, zp, od)?;
    let scale = match qparam_0d(em, a, "scale")? {
        Some(s) => Argument::Tensor(as_dtype(em, s, od)?),
        None => Argument::Float(a.float("scale")?),
    };
    em.op_into(aten::MUL_TENSOR, vec![("self", Argument::Tensor(d)), ("other", scale)], out)?;
    Ok(vec![out])
}

/// dequantize_per_channel: `((input - zero_points) * scales).to(out_dtype)`
/// under torch's promotion (an exact integer difference, then the scales'
/// dtype).
fn dequantize_per_channel(em: &mut Emitter, a: &NodeArgs) -> Result<Vec<ValueId>> {
    let out = a.out(0)?;
    let mut d = a.tensor("input")?;
    if a.opt_tensor("zero_points")?.is_some() {
        let z = along_axis(em, a, "zero_points", d)?;
        let dt = result_type(&[(em.dtype(d)?, Rank::Dim), (em.dtype(z)?, Rank::Dim)]);
        d = scalar_op(em, aten::SUB_TENSOR, d, Argument::Tensor(z), dt)?;
    }
    let s = along_axis(em, a, "scales", d)?;
    let c = result_type(&[(em.dtype(d)?, Rank::Dim), (em.dtype(s)?, Rank::Dim)]);
    let od = em.dtype(out)?;
    if c == od {
        return binary_into(em, a, aten::MUL_TENSOR, d, s, od);
    }
    let m = scalar_op(em, aten::MUL_TENSOR, d, Argument::Tensor(s), c)?;
    Ok(vec![to_copy(em, m, od, Some(out))?])
}

/// choose_qparams.tensor: torch's `determine_qparams` of `aminmax(input)`:
/// `scale = max((max(x, 0) - min(x, 0)) / (qmax - qmin), eps)` (in the
/// input's dtype, then float32), `zero_point = clamp(qmin - round(min(x,
/// 0) / scale), qmin, qmax)` in int32; as float64 and int64, shape `[1]`.
fn choose_qparams(em: &mut Emitter, a: &NodeArgs) -> Result<Vec<ValueId>> {
    let x = a.tensor("input")?;
    let dt = em.dtype(x)?;
    let (qmin, qmax) = (a.int("quant_min")?, a.int("quant_max")?);
    let f32_ = Dtype::Float32;
    let bound = |em: &mut Emitter, op: &str, side: &str| -> Result<ValueId> {
        let m = reduce(em, op, x, &[], false, vec![], dt, None)?;
        let meta = em.meta_like(m, dt, vec![])?;
        em.op(aten::CLAMP, vec![("self", Argument::Tensor(m)), (side, Argument::Float(0.0))], meta)
    };
    let neg = bound(em, aten::AMIN, "max")?;
    let pos = bound(em, aten::AMAX, "min")?;
    let range = scalar_op(em, aten::SUB_TENSOR, pos, Argument::Tensor(neg), dt)?;
    let scale = scalar_op(em, aten::DIV_TENSOR, range, Argument::Float((qmax - qmin) as f64), dt)?;
    let scale = as_dtype(em, scale, f32_)?;
    let scale = view(em, scale, &[SymRef::Int(1)], None)?;
    let eps = Argument::Float(a.float("eps")? as f32 as f64);
    let meta = em.meta_like(scale, f32_, vec![Sym::Int(1)])?;
    let scale = em.op(aten::CLAMP, vec![("self", Argument::Tensor(scale)), ("min", eps)], meta)?;
    let neg = as_dtype(em, neg, f32_)?;
    let q = scalar_op(em, aten::DIV_TENSOR, neg, Argument::Tensor(scale), f32_)?;
    let q = unary(em, aten::ROUND, q)?;
    let q = to_copy(em, q, Dtype::Int32, None)?;
    let z = scalar_op(em, aten::MUL_TENSOR, q, Argument::Int(-1), Dtype::Int32)?;
    let z = scalar_op(em, aten::ADD_TENSOR, z, Argument::Int(qmin), Dtype::Int32)?;
    let meta = em.meta_like(z, Dtype::Int32, vec![Sym::Int(1)])?;
    let z = em.op(
        aten::CLAMP,
        vec![("self", Argument::Tensor(z)), ("min", Argument::Int(qmin)), ("max", Argument::Int(qmax))],
        meta,
    )?;
    Ok(vec![
        to_copy(em, scale, Dtype::Float64, Some(a.out(0)?))?,
        to_copy(em, z, Dtype::Int64, Some(a.out(1)?))?,
    ])
}

rules! {
    aten::WHERE => [aten::NONZERO, aten::SELECT_INT] super::index::nonzero_numpy;
    aten::REAL => [aten::VIEW_AS_REAL, aten::SELECT_INT] real_imag;
    aten::IMAG => [aten::VIEW_AS_REAL, aten::SELECT_INT] real_imag;
    aten::ANGLE => [aten::VIEW_AS_REAL, aten::SELECT_INT, aten::ATAN2, aten::_TO_COPY, aten::LT_SCALAR, aten::SCALAR_TENSOR, aten::WHERE_SELF, aten::ISNAN] angle;
    aten::CONJ => [aten::_CONJ] conj_of;
    aten::RESOLVE_CONJ => [] conj_of;
    aten::RESOLVE_NEG => [] conj_of;
    aten::__LSHIFT___SCALAR => [aten::MUL_TENSOR] shift_by_constant;
    aten::BITWISE_LEFT_SHIFT_TENSOR_SCALAR => [aten::MUL_TENSOR] shift_by_constant;
    aten::__RSHIFT___SCALAR => [aten::DIV_TENSOR_MODE, aten::CLONE] shift_by_constant;
    aten::BITWISE_RIGHT_SHIFT_TENSOR_SCALAR => [aten::DIV_TENSOR_MODE, aten::CLONE] shift_by_constant;
    aten::__AND___TENSOR => [aten::BITWISE_AND_TENSOR] renamed;
    aten::__OR___TENSOR => [aten::BITWISE_OR_TENSOR] renamed;
    aten::__XOR___TENSOR => [aten::BITWISE_XOR_TENSOR] renamed;
    aten::__AND___SCALAR => [aten::BITWISE_AND_SCALAR] renamed;
    aten::__OR___SCALAR => [aten::BITWISE_OR_SCALAR] renamed;
    aten::__XOR___SCALAR => [aten::BITWISE_XOR_SCALAR] renamed;
    aten::WHERE_SCALAROTHER => [aten::SCALAR_TENSOR, aten::WHERE_SELF] where_scalar;
    aten::WHERE_SCALARSELF => [aten::SCALAR_TENSOR, aten::WHERE_SELF] where_scalar;
    aten::WHERE_SCALAR => [aten::SCALAR_TENSOR, aten::WHERE_SELF] where_scalar;
    aten::DIFF => [aten::SLICE_TENSOR, aten::SUB_TENSOR, aten::LOGICAL_XOR, aten::CAT] diff;
    aten::CLAMP_MIN => [aten::CLAMP] clamp_one;
    aten::CLAMP_MAX => [aten::CLAMP] clamp_one;
    aten::SQUARE => [aten::POW_TENSOR_SCALAR] square;
    aten::RSUB_SCALAR => [aten::SUB_TENSOR] rsub;
    aten::EXP2 => [aten::POW_SCALAR] exp2;
    aten::DEG2RAD => [aten::MUL_TENSOR] deg_rad;
    aten::RAD2DEG => [aten::MUL_TENSOR] deg_rad;
    aten::FLOOR_DIVIDE => [aten::DIV_TENSOR_MODE] floor_divide;
    aten::FLOOR_DIVIDE_SCALAR => [aten::DIV_SCALAR_MODE] floor_divide;
    aten::FRAC => [aten::TRUNC, aten::SUB_TENSOR] frac;
    aten::ISFINITE => [aten::ISINF, aten::ISNAN, aten::LOGICAL_OR, aten::LOGICAL_NOT] isfinite;
    aten::ISPOSINF => [aten::EQ_SCALAR] isinf_signed;
    aten::ISNEGINF => [aten::EQ_SCALAR] isinf_signed;
    aten::LERP_TENSOR => [aten::SUB_TENSOR, aten::MUL_TENSOR, aten::ADD_TENSOR, aten::LT_SCALAR, aten::WHERE_SELF] lerp_tensor;
    aten::FMAX => [aten::MAXIMUM, aten::_TO_COPY, aten::ISNAN, aten::WHERE_SELF] fmax_fmin;
    aten::FMIN => [aten::MINIMUM, aten::_TO_COPY, aten::ISNAN, aten::WHERE_SELF] fmax_fmin;
    aten::LOGADDEXP => [aten::MAXIMUM, aten::SUB_TENSOR, aten::ABS, aten::NEG, aten::EXP, aten::LOG1P, aten::ADD_TENSOR] logaddexp;
    aten::NAN_TO_NUM => [aten::ISNAN, aten::EQ_SCALAR, aten::SCALAR_TENSOR, aten::WHERE_SELF] nan_to_num;
    aten::RSUB_TENSOR => [aten::SUB_TENSOR] rsub_tensor;
    aten::SINC => [aten::MUL_TENSOR, aten::SIN, aten::DIV_TENSOR, aten::EQ_SCALAR, aten::SCALAR_TENSOR, aten::WHERE_SELF] sinc;
    aten::FLOAT_POWER_TENSOR_SCALAR => [aten::_TO_COPY, aten::POW_TENSOR_SCALAR] float_power;
    aten::FLOAT_POWER_TENSOR_TENSOR => [aten::_TO_COPY, aten::POW_TENSOR_TENSOR] float_power;
    aten::FLOAT_POWER_SCALAR => [aten::_TO_COPY, aten::POW_SCALAR] float_power;
    aten::HEAVISIDE => [aten::EQ_SCALAR, aten::GT_SCALAR, aten::_TO_COPY, aten::WHERE_SELF] heaviside;
    aten::ISCLOSE => [aten::SUB_TENSOR, aten::ABS, aten::MUL_TENSOR, aten::ADD_TENSOR, aten::LE_TENSOR, aten::EQ_TENSOR, aten::LOGICAL_OR] isclose;
    aten::LOGADDEXP2 => [aten::MAXIMUM, aten::POW_SCALAR, aten::LOG1P, aten::ADD_TENSOR] logaddexp;
    aten::XLOGY_SCALAR_SELF => [aten::SCALAR_TENSOR, aten::LOG, aten::MUL_TENSOR, aten::WHERE_SELF] xlogy;
    aten::XLOGY_SCALAR_OTHER => [aten::SCALAR_TENSOR, aten::LOG, aten::MUL_TENSOR, aten::WHERE_SELF] xlogy;
    aten::XLOGY_TENSOR => [aten::LOG, aten::MUL_TENSOR, aten::EQ_SCALAR, aten::ISNAN, aten::WHERE_SELF] xlogy;
    aten::ERFC => [aten::ERF, aten::NEG, aten::ADD_TENSOR] erfc;
    aten::LERP_SCALAR => [aten::SUB_TENSOR, aten::MUL_TENSOR, aten::ADD_TENSOR] lerp;
    aten::ADDCMUL => [aten::MUL_TENSOR, aten::ADD_TENSOR] addc;
    aten::ADDCDIV => [aten::DIV_TENSOR, aten::MUL_TENSOR, aten::ADD_TENSOR] addc;
    quantized_decomposed::QUANTIZE_PER_TENSOR => [aten::_TO_COPY, aten::MUL_TENSOR, aten::ROUND, aten::ADD_TENSOR, aten::CLAMP] quantize_per_tensor;
    quantized_decomposed::QUANTIZE_PER_TENSOR_TENSOR => [aten::VIEW, aten::_TO_COPY, aten::RECIPROCAL, aten::MUL_TENSOR, aten::ROUND, aten::ADD_TENSOR, aten::CLAMP] quantize_per_tensor;
    quantized_decomposed::QUANTIZE_PER_CHANNEL => [aten::VIEW, aten::_TO_COPY, aten::RECIPROCAL, aten::MUL_TENSOR, aten::ROUND, aten::ADD_TENSOR, aten::CLAMP] quantize_per_channel;
    quantized_decomposed::DEQUANTIZE_PER_TENSOR => [aten::_TO_COPY, aten::SUB_TENSOR, aten::MUL_TENSOR] dequantize_per_tensor;
    quantized_decomposed::DEQUANTIZE_PER_TENSOR_TENSOR => [aten::VIEW, aten::_TO_COPY, aten::SUB_TENSOR, aten::MUL_TENSOR] dequantize_per_tensor;
    quantized_decomposed::DEQUANTIZE_PER_CHANNEL => [aten::VIEW, aten::SUB_TENSOR, aten::MUL_TENSOR, aten::_TO_COPY] dequantize_per_channel;
    quantized_decomposed::CHOOSE_QPARAMS_TENSOR => [aten::AMIN, aten::AMAX, aten::CLAMP, aten::SUB_TENSOR, aten::DIV_TENSOR, aten::_TO_COPY, aten::VIEW, aten::ROUND, aten::MUL_TENSOR, aten::ADD_TENSOR] choose_qparams;
}

/// Ops that are another op of this family under another name.
pub(super) const ALIASES: &[(&str, &str)] = &[
    (aten::ABSOLUTE, aten::ABS),
    (aten::ARCCOS, aten::ACOS),
    (aten::ARCCOSH, aten::ACOSH),
    (aten::ARCSIN, aten::ASIN),
    (aten::ARCSINH, aten::ASINH),
    (aten::ARCTAN, aten::ATAN),
    (aten::ARCTAN2, aten::ATAN2),
    (aten::ARCTANH, aten::ATANH),
    (aten::CLIP, aten::CLAMP),
    (aten::CLIP_TENSOR, aten::CLAMP_TENSOR),
    (aten::CLAMP_MIN_TENSOR, aten::CLAMP_TENSOR),
    (aten::CLAMP_MAX_TENSOR, aten::CLAMP_TENSOR),
    (aten::DIVIDE_TENSOR, aten::DIV_TENSOR),
    (aten::DIVIDE_SCALAR, aten::DIV_SCALAR),
    (aten::DIVIDE_TENSOR_MODE, aten::DIV_TENSOR_MODE),
    (aten::DIVIDE_SCALAR_MODE, aten::DIV_SCALAR_MODE),
    (aten::TRUE_DIVIDE_TENSOR, aten::DIV_TENSOR),
    (aten::TRUE_DIVIDE_SCALAR, aten::DIV_SCALAR),
    (aten::MULTIPLY_TENSOR, aten::MUL_TENSOR),
    (aten::MULTIPLY_SCALAR, aten::MUL_SCALAR),
    (aten::SUBTRACT_TENSOR, aten::SUB_TENSOR),
    (aten::SUBTRACT_SCALAR, aten::SUB_SCALAR),
    (aten::NEGATIVE, aten::NEG),
    (aten::FIX, aten::TRUNC),
    (aten::SGN, aten::SIGN),
    (aten::GREATER_TENSOR, aten::GT_TENSOR),
    (aten::GREATER_SCALAR, aten::GT_SCALAR),
    (aten::GREATER_EQUAL_TENSOR, aten::GE_TENSOR),
    (aten::GREATER_EQUAL_SCALAR, aten::GE_SCALAR),
    (aten::LESS_TENSOR, aten::LT_TENSOR),
    (aten::LESS_SCALAR, aten::LT_SCALAR),
    (aten::LESS_EQUAL_TENSOR, aten::LE_TENSOR),
    (aten::LESS_EQUAL_SCALAR, aten::LE_SCALAR),
    (aten::NOT_EQUAL_TENSOR, aten::NE_TENSOR),
    (aten::NOT_EQUAL_SCALAR, aten::NE_SCALAR),
];
