//! Complex arithmetic over real pairs: each op a formula over the real and
//! imaginary parts, as torch's kernels compute it ([`exact`]: products as
//! ATen's vectorized kernel, division by Smith's method, `hypot`, glibc's
//! special values), a real operand promoted to `(x, 0)` as torch does.

use super::{exact, pair_meta, scalar_parts, Cx, Handler};
use crate::decompose::args::NodeArgs;
use crate::ir::{Argument, Dtype, Sym, ValueId};
use crate::{Error, Result};

/// The real dtype of the node's (complex) output `i`.
pub(super) fn out_real(cx: &Cx, i: usize) -> Result<Dtype> {
    Ok(cx.out_meta(i)?.dtype.real_part())
}

/// The sizes of the node's output `i` (complex: without the pair dim).
pub(super) fn out_sizes(cx: &Cx, i: usize) -> Result<Vec<Sym>> {
    Ok(cx.out_meta(i)?.sizes)
}

/// `z` as its parts, a real operand as `(x, 0)` and a number as 0-d
/// parts: how torch promotes an operand of a complex op.
pub(super) fn operand(cx: &mut Cx, arg: &Argument, real: Dtype) -> Result<(ValueId, ValueId)> {
    match arg {
        Argument::Tensor(v) => {
            let p = cx.as_pair(*v, real)?;
            cx.parts(p)
        }
        other => {
            let (c, d) = scalar_parts(other).ok_or_else(|| {
                Error::bad_input(format!("an operand that is no number: {other:?}"))
            })?;
            let like = cx.node_tensor()?;
            Ok((cx.constant(like, c, real)?, cx.constant(like, d, real)?))
        }
    }
}

/// The scalar `alpha` of `add`/`sub` (real only).
fn alpha(a: &NodeArgs) -> Result<f64> {
    match scalar_parts(&a.arg("alpha")) {
        None => Ok(1.0),
        Some((re, 0.0)) => Ok(re),
        Some(_) => Err(Error::unsupported(
            "a complex alpha is not supported (complex values run as real pairs)",
        )),
    }
}

/// `add` and `sub` (`.Tensor`, `.Scalar`): `self ± alpha * other` as
/// torch's kernel computes it, `alpha * other` a complex product by
/// `(alpha, 0)`: its `0 * inf` terms make NaN where `other` has an
/// infinite part (a number `other` is added as it is unless infinite).
fn add_sub(cx: &mut Cx, a: &NodeArgs) -> Result<Vec<ValueId>> {
    let sub = cx.node.target.name == "sub";
    let real = out_real(cx, 0)?;
    let meta = cx.out_pair(0)?;
    let sizes = out_sizes(cx, 0)?;
    let alpha = alpha(a)?;
    let (x_re, x_im) = operand(cx, &Argument::Tensor(a.t("self")?), real)?;
    let (y_re, y_im) = match a.arg("other") {
        Argument::Tensor(y) => {
            let (c, d) = operand(cx, &Argument::Tensor(y), real)?;
            // (alpha c - 0 d, alpha d + 0 c)
            let ac = if alpha == 1.0 {
                c
            } else {
                cx.scalar("aten.mul.Tensor", c, alpha)?
            };
            let ad = if alpha == 1.0 {
                d
            } else {
                cx.scalar("aten.mul.Tensor", d, alpha)?
            };
            let zd = cx.scalar("aten.mul.Tensor", d, 0.0)?;
            let zc = cx.scalar("aten.mul.Tensor", c, 0.0)?;
            let yc = cx.em.sizes(ac)?;
            let re = cx.binary("aten.sub.Tensor", ac, zd, &yc)?;
            let im = cx.binary("aten.add.Tensor", ad, zc, &yc)?;
            (re, im)
        }
        other => {
            let (c, d) = scalar_parts(&other).ok_or_else(|| {
                Error::bad_input(format!("argument 'other' is not a number: {other:?}"))
            })?;
            let like = cx.node_tensor()?;
            (
                cx.constant(like, alpha * c - 0.0 * d, real)?,
                cx.constant(like, alpha * d + 0.0 * c, real)?,
            )
        }
    };
    let op = if sub {
        "aten.sub.Tensor"
    } else {
        "aten.add.Tensor"
    };
    let re = cx.binary(op, x_re, y_re, &sizes)?;
    let im = cx.binary(op, x_im, y_im, &sizes)?;
    Ok(vec![cx.join(re, im, meta)?])
}

/// `mul` (`.Tensor`, `.Scalar`): the complex product, a real operand or a
/// number as `(x, 0)` ([`exact::cmul`]).
fn mul(cx: &mut Cx, a: &NodeArgs) -> Result<Vec<ValueId>> {
    let real = out_real(cx, 0)?;
    let meta = cx.out_pair(0)?;
    let sizes = out_sizes(cx, 0)?;
    let x = operand(cx, &Argument::Tensor(a.t("self")?), real)?;
    let y = operand(cx, &a.arg("other"), real)?;
    let (re, im) = exact::cmul(cx, x, y, &sizes, real)?;
    Ok(vec![cx.join(re, im, meta)?])
}

/// `div` (`.Tensor`, `.Scalar`): Smith's method ([`exact::cdiv`]), a
/// real operand or a number as `(x, 0)`.
fn div(cx: &mut Cx, a: &NodeArgs) -> Result<Vec<ValueId>> {
    if a.has("rounding_mode") {
        return Err(Error::unsupported(
            "div with a rounding mode is not defined on complex values",
        ));
    }
    let real = out_real(cx, 0)?;
    let meta = cx.out_pair(0)?;
    let sizes = out_sizes(cx, 0)?;
    let x = operand(cx, &Argument::Tensor(a.t("self")?), real)?;
    let y = operand(cx, &a.arg("other"), real)?;
    let (re, im) = exact::cdiv(cx, x, y, &sizes, real)?;
    Ok(vec![cx.join(re, im, meta)?])
}

fn neg(cx: &mut Cx, a: &NodeArgs) -> Result<Vec<ValueId>> {
    let p = cx.pair(a.t("self")?)?;
    let meta = cx.out_pair(0)?;
    Ok(vec![cx.op(
        "aten.neg.default",
        vec![("self", Argument::Tensor(p))],
        meta,
    )?])
}

/// `exp(a + bi)` ([`exact::exp`]).
fn exp(cx: &mut Cx, a: &NodeArgs) -> Result<Vec<ValueId>> {
    let p = cx.pair(a.t("self")?)?;
    let meta = cx.out_pair(0)?;
    let sizes = out_sizes(cx, 0)?;
    let z = cx.parts(p)?;
    let (re, im) = exact::exp(cx, z, &sizes)?;
    Ok(vec![cx.join(re, im, meta)?])
}

/// `|a + bi|` as `hypot` ([`exact::hypot`]), into the node's (real)
/// output.
fn abs(cx: &mut Cx, a: &NodeArgs) -> Result<Vec<ValueId>> {
    let p = cx.pair(a.t("self")?)?;
    let out = a.out(0)?;
    let sizes = out_sizes(cx, 0)?;
    let (re, im) = cx.parts(p)?;
    let r = exact::hypot(cx, re, im, &sizes)?;
    cx.em.op_into(
        "aten.alias.default",
        vec![("self", Argument::Tensor(r))],
        out,
    )?;
    Ok(vec![out])
}

/// `angle(a + bi) = atan2(b, a)`, into the node's (real) output.
fn angle(cx: &mut Cx, a: &NodeArgs) -> Result<Vec<ValueId>> {
    let p = cx.pair(a.t("self")?)?;
    let out = a.out(0)?;
    let (re, im) = cx.parts(p)?;
    cx.em.op_into(
        "aten.atan2.default",
        vec![
            ("self", Argument::Tensor(im)),
            ("other", Argument::Tensor(re)),
        ],
        out,
    )?;
    Ok(vec![out])
}

/// `conj(a + bi) = a - bi` (`_conj`, `conj`, `conj_physical`).
fn conj(cx: &mut Cx, a: &NodeArgs) -> Result<Vec<ValueId>> {
    let p = cx.pair(a.t("self")?)?;
    let meta = cx.out_pair(0)?;
    let (re, im) = cx.parts(p)?;
    let dt = cx.em.dtype(im)?;
    let im = cx.unary("aten.neg.default", im, dt)?;
    Ok(vec![cx.join(re, im, meta)?])
}

/// The real or imaginary part: a select of the pair dim, into the node's
/// output.
fn part(cx: &mut Cx, a: &NodeArgs) -> Result<Vec<ValueId>> {
    let x = a.t("self")?;
    let p = cx.pair(x)?;
    let out = a.out(0)?;
    let index = i64::from(cx.node.target.name == "imag");
    let dim = cx.crank(x)? as i64;
    cx.em.op_into(
        "aten.select.int",
        vec![
            ("self", Argument::Tensor(p)),
            ("dim", Argument::Int(dim)),
            ("index", Argument::Int(index)),
        ],
        out,
    )?;
    Ok(vec![out])
}

/// `view_as_real`: the pair itself.
fn view_as_real(cx: &mut Cx, a: &NodeArgs) -> Result<Vec<ValueId>> {
    Ok(vec![cx.pair(a.t("self")?)?])
}

/// `view_as_complex`: the real tensor is the pair.
fn view_as_complex(cx: &mut Cx, a: &NodeArgs) -> Result<Vec<ValueId>> {
    let _ = cx;
    Ok(vec![a.t("self")?])
}

/// Ops that are the identity on values (`alias`, `detach`,
/// `resolve_conj`, `resolve_neg`, `lift_fresh_copy`): the pair itself.
fn identity(cx: &mut Cx, a: &NodeArgs) -> Result<Vec<ValueId>> {
    Ok(vec![cx.pair(a.t("self")?)?])
}

/// `polar(abs, angle) = abs (cos angle + i sin angle)`.
fn polar(cx: &mut Cx, a: &NodeArgs) -> Result<Vec<ValueId>> {
    let meta = cx.out_pair(0)?;
    let sizes = out_sizes(cx, 0)?;
    let real = meta.dtype;
    let r = cx.cast(a.t("abs")?, real)?;
    let t = cx.cast(a.t("angle")?, real)?;
    let cos = cx.unary("aten.cos.default", t, real)?;
    let sin = cx.unary("aten.sin.default", t, real)?;
    let re = cx.binary("aten.mul.Tensor", r, cos, &sizes)?;
    let im = cx.binary("aten.mul.Tensor", r, sin, &sizes)?;
    Ok(vec![cx.join(re, im, meta)?])
}

/// `complex(real, imag)`.
fn complex(cx: &mut Cx, a: &NodeArgs) -> Result<Vec<ValueId>> {
    let meta = cx.out_pair(0)?;
    let (re, im) = (a.t("real")?, a.t("imag")?);
    Ok(vec![cx.join(re, im, meta)?])
}

/// `_to_copy` to or from a complex dtype: complex to complex casts the
/// pair; real to complex is `(x, 0)`; complex to real keeps the real part
/// (as torch does, with its warning).
fn to_copy(cx: &mut Cx, a: &NodeArgs) -> Result<Vec<ValueId>> {
    let x = a.t("self")?;
    let out_m = cx.out_meta(0)?;
    if out_m.dtype.is_complex() {
        let p = cx.as_pair(x, out_m.dtype.real_part())?;
        let meta = pair_meta(&out_m);
        return Ok(vec![cx.op(
            "aten.clone.default",
            vec![("self", Argument::Tensor(p))],
            meta,
        )?]);
    }
    let p = cx.pair(x)?;
    let (re, _) = cx.parts(p)?;
    let out = a.out(0)?;
    cx.em.op_into(
        "aten._to_copy.default",
        vec![
            ("self", Argument::Tensor(re)),
            ("dtype", Argument::ScalarType(out_m.dtype)),
        ],
        out,
    )?;
    Ok(vec![out])
}

/// `clone`: of the pair.
fn clone(cx: &mut Cx, a: &NodeArgs) -> Result<Vec<ValueId>> {
    let p = cx.pair(a.t("self")?)?;
    let meta = cx.out_pair(0)?;
    Ok(vec![cx.op(
        "aten.clone.default",
        vec![("self", Argument::Tensor(p))],
        meta,
    )?])
}

pub(super) const ROWS: &[(&str, Handler)] = &[
    ("aten.add.Tensor", add_sub),
    ("aten.add.Scalar", add_sub),
    ("aten.sub.Tensor", add_sub),
    ("aten.sub.Scalar", add_sub),
    ("aten.mul.Tensor", mul),
    ("aten.mul.Scalar", mul),
    ("aten.div.Tensor", div),
    ("aten.div.Scalar", div),
    ("aten.neg.default", neg),
    ("aten.exp.default", exp),
    ("aten.abs.default", abs),
    ("aten.angle.default", angle),
    ("aten._conj.default", conj),
    ("aten.conj.default", conj),
    ("aten.conj_physical.default", conj),
    ("aten._conj_physical.default", conj),
    ("aten.real.default", part),
    ("aten.imag.default", part),
    ("aten.view_as_real.default", view_as_real),
    ("aten.view_as_complex.default", view_as_complex),
    ("aten.alias.default", identity),
    ("aten.detach.default", identity),
    ("aten.resolve_conj.default", identity),
    ("aten.resolve_neg.default", identity),
    ("aten.lift_fresh_copy.default", identity),
    ("aten.polar.default", polar),
    ("aten.complex.default", complex),
    ("aten._to_copy.default", to_copy),
    ("aten.clone.default", clone),
];
