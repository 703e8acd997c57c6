//! Complex arithmetic over real pairs: each op a formula over the real and
//! imaginary parts, as torch's `c10::complex` computes it (division by
//! Smith's method, as numpy and torch do).

use super::{pair_meta, scalar_parts, Cx, Handler};
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

/// `re + i im` scaled by a real `s` and shifted by `(c, d)`: the parts of
/// `p * s + (c + d i)`, each op skipped where it is the identity.
fn affine(cx: &mut Cx, x: ValueId, mul: f64, add: f64) -> Result<ValueId> {
    let mut x = x;
    if mul != 1.0 {
        x = cx.scalar("aten.mul.Tensor", x, mul)?;
    }
    if add != 0.0 {
        x = cx.scalar("aten.add.Tensor", x, add)?;
    }
    Ok(x)
}

/// `a * b` of two pairs, broadcast to `sizes`: `(ac - bd, ad + bc)`.
pub(super) fn cmul(
    cx: &mut Cx,
    x: ValueId,
    y: ValueId,
    sizes: &[Sym],
) -> Result<(ValueId, ValueId)> {
    let (a, b) = cx.parts(x)?;
    let (c, d) = cx.parts(y)?;
    let ac = cx.binary("aten.mul.Tensor", a, c, sizes)?;
    let bd = cx.binary("aten.mul.Tensor", b, d, sizes)?;
    let ad = cx.binary("aten.mul.Tensor", a, d, sizes)?;
    let bc = cx.binary("aten.mul.Tensor", b, c, sizes)?;
    let re = cx.binary("aten.sub.Tensor", ac, bd, sizes)?;
    let im = cx.binary("aten.add.Tensor", ad, bc, sizes)?;
    Ok((re, im))
}

/// `x / y` of two pairs by Smith's method, as `c10::complex` divides:
/// the larger of `|c|`, `|d|` scales the rest; a zero divisor gives
/// `a / |c|`, `b / |d|` (an infinity or NaN), as torch's does.
fn cdiv(cx: &mut Cx, x: ValueId, y: ValueId, sizes: &[Sym]) -> Result<(ValueId, ValueId)> {
    let (a, b) = cx.parts(x)?;
    let (c, d) = cx.parts(y)?;
    cdiv_parts(cx, (a, b), (c, d), sizes)
}

/// [`cdiv`] on parts: `(a + bi) / (c + di)`.
pub(super) fn cdiv_parts(
    cx: &mut Cx,
    (a, b): (ValueId, ValueId),
    (c, d): (ValueId, ValueId),
    sizes: &[Sym],
) -> Result<(ValueId, ValueId)> {
    let bool_meta = |cx: &Cx, like: ValueId| cx.meta(like, Dtype::Bool, sizes.to_vec());
    let abs_c = cx.unary("aten.abs.default", c, cx.em.dtype(c)?)?;
    let abs_d = cx.unary("aten.abs.default", d, cx.em.dtype(d)?)?;
    let m = bool_meta(cx, c)?;
    let swap = cx.op(
        "aten.lt.Tensor",
        vec![
            ("self", Argument::Tensor(abs_c)),
            ("other", Argument::Tensor(abs_d)),
        ],
        m,
    )?;
    let pick = |cx: &mut Cx, cond: ValueId, t: ValueId, f: ValueId| -> Result<ValueId> {
        let meta = cx.meta(t, cx.em.dtype(t)?, sizes.to_vec())?;
        cx.op(
            "aten.where.self",
            vec![
                ("condition", Argument::Tensor(cond)),
                ("self", Argument::Tensor(t)),
                ("other", Argument::Tensor(f)),
            ],
            meta,
        )
    };
    // not swapped: rat = d / c, scl = 1 / (c + d rat),
    //   re = (a + b rat) scl, im = (b - a rat) scl
    // swapped: rat = c / d, scl = 1 / (d + c rat),
    //   re = (a rat + b) scl, im = (b rat - a) scl
    let p = pick(cx, swap, d, c)?;
    let q = pick(cx, swap, c, d)?;
    let rat = cx.binary("aten.div.Tensor", q, p, sizes)?;
    let q_rat = cx.binary("aten.mul.Tensor", q, rat, sizes)?;
    let den = cx.binary("aten.add.Tensor", p, q_rat, sizes)?;
    let b_rat = cx.binary("aten.mul.Tensor", b, rat, sizes)?;
    let a_rat = cx.binary("aten.mul.Tensor", a, rat, sizes)?;
    let re_plain = cx.binary("aten.add.Tensor", a, b_rat, sizes)?;
    let im_plain = cx.binary("aten.sub.Tensor", b, a_rat, sizes)?;
    let re_swap = cx.binary("aten.add.Tensor", a_rat, b, sizes)?;
    let im_swap = cx.binary("aten.sub.Tensor", b_rat, a, sizes)?;
    let re = pick(cx, swap, re_swap, re_plain)?;
    let im = pick(cx, swap, im_swap, im_plain)?;
    let re = cx.binary("aten.div.Tensor", re, den, sizes)?;
    let im = cx.binary("aten.div.Tensor", im, den, sizes)?;
    // both parts of the divisor zero: a / |c| and b / |d|
    let is_zero = |cx: &mut Cx, x: ValueId| -> Result<ValueId> {
        let m = cx.meta(x, Dtype::Bool, cx.em.sizes(x)?)?;
        cx.op(
            "aten.eq.Scalar",
            vec![
                ("self", Argument::Tensor(x)),
                ("other", Argument::Float(0.0)),
            ],
            m,
        )
    };
    let zero_c = is_zero(cx, abs_c)?;
    let zero_d = is_zero(cx, abs_d)?;
    let m = bool_meta(cx, c)?;
    let zero = cx.op(
        "aten.logical_and.default",
        vec![
            ("self", Argument::Tensor(zero_c)),
            ("other", Argument::Tensor(zero_d)),
        ],
        m,
    )?;
    let re0 = cx.binary("aten.div.Tensor", a, abs_c, sizes)?;
    let im0 = cx.binary("aten.div.Tensor", b, abs_d, sizes)?;
    let re = pick(cx, zero, re0, re)?;
    let im = pick(cx, zero, im0, im)?;
    Ok((re, im))
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

/// `add` and `sub` (`.Tensor`, `.Scalar`): on the pairs, a real operand
/// as `(x, 0)`, a scalar added to the parts.
fn add_sub(cx: &mut Cx, a: &NodeArgs) -> Result<Vec<ValueId>> {
    let sign = if cx.node.target.name == "sub" {
        -1.0
    } else {
        1.0
    };
    let real = out_real(cx, 0)?;
    let meta = cx.out_pair(0)?;
    let x = cx.as_pair(a.t("self")?, real)?;
    let alpha = alpha(a)?;
    match a.arg("other") {
        Argument::Tensor(y) => {
            let y = cx.as_pair(y, real)?;
            let op = format!("aten.{}.Tensor", cx.node.target.name);
            Ok(vec![cx.op(
                &op,
                vec![
                    ("self", Argument::Tensor(x)),
                    ("other", Argument::Tensor(y)),
                    ("alpha", Argument::Float(alpha)),
                ],
                meta,
            )?])
        }
        other => {
            let (c, d) = scalar_parts(&other).ok_or_else(|| {
                Error::bad_input(format!("argument 'other' is not a number: {other:?}"))
            })?;
            let (re, im) = cx.parts(x)?;
            let re = affine(cx, re, 1.0, sign * alpha * c)?;
            let im = affine(cx, im, 1.0, sign * alpha * d)?;
            Ok(vec![cx.join(re, im, meta)?])
        }
    }
}

/// `mul` (`.Tensor`, `.Scalar`): complex by complex as `(ac - bd, ad +
/// bc)`; by a real tensor or scalar, both parts scaled.
fn mul(cx: &mut Cx, a: &NodeArgs) -> Result<Vec<ValueId>> {
    let real = out_real(cx, 0)?;
    let meta = cx.out_pair(0)?;
    let sizes = out_sizes(cx, 0)?;
    let x = a.t("self")?;
    match a.arg("other") {
        Argument::Tensor(y) => {
            let (cx_x, cx_y) = (cx.complex(x), cx.complex(y));
            if cx_x && cx_y {
                let (px, py) = (cx.as_pair(x, real)?, cx.as_pair(y, real)?);
                let (re, im) = cmul(cx, px, py, &sizes)?;
                return Ok(vec![cx.join(re, im, meta)?]);
            }
            let (z, r) = if cx_x { (x, y) } else { (y, x) };
            let pz = cx.as_pair(z, real)?;
            let r = cx.against_pairs(r, real)?;
            Ok(vec![cx.op(
                "aten.mul.Tensor",
                vec![
                    ("self", Argument::Tensor(pz)),
                    ("other", Argument::Tensor(r)),
                ],
                meta,
            )?])
        }
        other => {
            let (c, d) = scalar_parts(&other).ok_or_else(|| {
                Error::bad_input(format!("argument 'other' is not a number: {other:?}"))
            })?;
            let px = cx.as_pair(x, real)?;
            if d == 0.0 {
                return Ok(vec![cx.op(
                    "aten.mul.Tensor",
                    vec![
                        ("self", Argument::Tensor(px)),
                        ("other", Argument::Float(c)),
                    ],
                    meta,
                )?]);
            }
            let (re, im) = cx.parts(px)?;
            let (ac, bd) = (
                cx.scalar("aten.mul.Tensor", re, c)?,
                cx.scalar("aten.mul.Tensor", im, d)?,
            );
            let (ad, bc) = (
                cx.scalar("aten.mul.Tensor", re, d)?,
                cx.scalar("aten.mul.Tensor", im, c)?,
            );
            let re = cx.binary("aten.sub.Tensor", ac, bd, &sizes)?;
            let im = cx.binary("aten.add.Tensor", ad, bc, &sizes)?;
            Ok(vec![cx.join(re, im, meta)?])
        }
    }
}

/// `div` (`.Tensor`, `.Scalar`): by a complex value by Smith's method; by
/// a real tensor or scalar, both parts divided.
fn div(cx: &mut Cx, a: &NodeArgs) -> Result<Vec<ValueId>> {
    if a.has("rounding_mode") {
        return Err(Error::unsupported(
            "div with a rounding mode is not defined on complex values",
        ));
    }
    let real = out_real(cx, 0)?;
    let meta = cx.out_pair(0)?;
    let sizes = out_sizes(cx, 0)?;
    let x = a.t("self")?;
    let px = cx.as_pair(x, real)?;
    match a.arg("other") {
        Argument::Tensor(y) if cx.complex(y) => {
            let py = cx.as_pair(y, real)?;
            let (re, im) = cdiv(cx, px, py, &sizes)?;
            Ok(vec![cx.join(re, im, meta)?])
        }
        Argument::Tensor(y) => {
            let r = cx.against_pairs(y, real)?;
            Ok(vec![cx.op(
                "aten.div.Tensor",
                vec![
                    ("self", Argument::Tensor(px)),
                    ("other", Argument::Tensor(r)),
                ],
                meta,
            )?])
        }
        other => {
            let (c, d) = scalar_parts(&other).ok_or_else(|| {
                Error::bad_input(format!("argument 'other' is not a number: {other:?}"))
            })?;
            if d == 0.0 {
                return Ok(vec![cx.op(
                    "aten.div.Tensor",
                    vec![
                        ("self", Argument::Tensor(px)),
                        ("other", Argument::Float(c)),
                    ],
                    meta,
                )?]);
            }
            // by the scalar as a 0-d pair (c, d), Smith's method
            let full_meta = |cx: &Cx, v: f64| -> Result<(Vec<(&'static str, Argument)>, _)> {
                Ok((
                    vec![
                        ("size", Argument::SymInts(vec![])),
                        ("fill_value", Argument::Float(v)),
                        ("dtype", Argument::ScalarType(real)),
                    ],
                    cx.meta(px, real, vec![])?,
                ))
            };
            let (args, m) = full_meta(cx, c)?;
            let re = cx.op("aten.full.default", args, m)?;
            let (args, m) = full_meta(cx, d)?;
            let im = cx.op("aten.full.default", args, m)?;
            let m = cx.meta(px, real, vec![Sym::Int(2)])?;
            let py = cx.join(re, im, m)?;
            let (re, im) = cdiv(cx, px, py, &sizes)?;
            Ok(vec![cx.join(re, im, meta)?])
        }
    }
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

/// `exp(a + bi) = e^a (cos b + i sin b)`.
fn exp(cx: &mut Cx, a: &NodeArgs) -> Result<Vec<ValueId>> {
    let p = cx.pair(a.t("self")?)?;
    let meta = cx.out_pair(0)?;
    let sizes = out_sizes(cx, 0)?;
    let (re, im) = cx.parts(p)?;
    let dt = cx.em.dtype(re)?;
    let e = cx.unary("aten.exp.default", re, dt)?;
    let cos = cx.unary("aten.cos.default", im, dt)?;
    let sin = cx.unary("aten.sin.default", im, dt)?;
    let re = cx.binary("aten.mul.Tensor", e, cos, &sizes)?;
    let im = cx.binary("aten.mul.Tensor", e, sin, &sizes)?;
    Ok(vec![cx.join(re, im, meta)?])
}

/// `|a + bi| = sqrt(a^2 + b^2)`, into the node's (real) output.
fn abs(cx: &mut Cx, a: &NodeArgs) -> Result<Vec<ValueId>> {
    let p = cx.pair(a.t("self")?)?;
    let out = a.out(0)?;
    let sizes = out_sizes(cx, 0)?;
    let (re, im) = cx.parts(p)?;
    let re2 = cx.binary("aten.mul.Tensor", re, re, &sizes)?;
    let im2 = cx.binary("aten.mul.Tensor", im, im, &sizes)?;
    let sum = cx.binary("aten.add.Tensor", re2, im2, &sizes)?;
    cx.em.op_into(
        "aten.sqrt.default",
        vec![("self", Argument::Tensor(sum))],
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
