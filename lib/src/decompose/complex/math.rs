//! Complex functions and products over real pairs: `pow` by a real
//! scalar, `sqrt` and `log` (principal branches, as `std::complex`),
//! `reciprocal`, and matrix products as four real ones.

use super::arith::{cdiv_parts, cmul, out_real, out_sizes};
use super::{scalar_parts, Cx, Handler};
use crate::decompose::args::NodeArgs;
use crate::ir::{Argument, Dtype, Sym, ValueId};
use crate::{Error, Result};

/// `|z|` of parts, as `abs` computes it.
fn modulus(cx: &mut Cx, a: ValueId, b: ValueId, sizes: &[Sym]) -> Result<ValueId> {
    let a2 = cx.binary("aten.mul.Tensor", a, a, sizes)?;
    let b2 = cx.binary("aten.mul.Tensor", b, b, sizes)?;
    let s = cx.binary("aten.add.Tensor", a2, b2, sizes)?;
    let dt = cx.em.dtype(s)?;
    cx.unary("aten.sqrt.default", s, dt)
}

fn full_like(cx: &mut Cx, like: ValueId, v: f64) -> Result<ValueId> {
    let m = cx.em.meta(like)?.clone();
    let meta = cx.meta(like, m.dtype, m.sizes)?;
    cx.op(
        "aten.full_like.default",
        vec![
            ("self", Argument::Tensor(like)),
            ("fill_value", Argument::Float(v)),
        ],
        meta,
    )
}

fn pick(cx: &mut Cx, cond: ValueId, t: ValueId, f: ValueId, sizes: &[Sym]) -> Result<ValueId> {
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
}

fn compare(cx: &mut Cx, op: &str, x: ValueId, v: f64) -> Result<ValueId> {
    let m = cx.meta(x, Dtype::Bool, cx.em.sizes(x)?)?;
    cx.op(
        op,
        vec![("self", Argument::Tensor(x)), ("other", Argument::Float(v))],
        m,
    )
}

/// `pow(z, p)` for a real scalar `p`: `z * z` for 2, else the polar form
/// `|z|^p (cos p theta + i sin p theta)` (`std::pow`'s).
fn pow(cx: &mut Cx, a: &NodeArgs) -> Result<Vec<ValueId>> {
    let meta = cx.out_pair(0)?;
    let sizes = out_sizes(cx, 0)?;
    let real = out_real(cx, 0)?;
    let p = match scalar_parts(&a.arg("exponent")) {
        Some((p, 0.0)) => p,
        _ => {
            return Err(Error::unsupported(
                "pow of complex values by a complex or tensor exponent (complex values run as \
                 real pairs; only a real scalar exponent has a form here)",
            ))
        }
    };
    let z = cx.as_pair(a.t("self")?, real)?;
    if p == 1.0 {
        return Ok(vec![cx.op(
            "aten.clone.default",
            vec![("self", Argument::Tensor(z))],
            meta,
        )?]);
    }
    if p == 2.0 {
        let (re, im) = cmul(cx, z, z, &sizes)?;
        return Ok(vec![cx.join(re, im, meta)?]);
    }
    let (re, im) = cx.parts(z)?;
    let r = modulus(cx, re, im, &sizes)?;
    let m = cx.meta(r, real, sizes.clone())?;
    let rp = cx.op(
        "aten.pow.Tensor_Scalar",
        vec![
            ("self", Argument::Tensor(r)),
            ("exponent", Argument::Float(p)),
        ],
        m,
    )?;
    let t = cx.binary("aten.atan2.default", im, re, &sizes)?;
    let t = cx.scalar("aten.mul.Tensor", t, p)?;
    let cos = cx.unary("aten.cos.default", t, real)?;
    let sin = cx.unary("aten.sin.default", t, real)?;
    let re = cx.binary("aten.mul.Tensor", rp, cos, &sizes)?;
    let im = cx.binary("aten.mul.Tensor", rp, sin, &sizes)?;
    Ok(vec![cx.join(re, im, meta)?])
}

/// The principal square root, as `std::sqrt(complex)`: with `t =
/// sqrt((|z| + |a|) / 2)`, `(t, b / 2t)` where `a >= 0`, else `(|b| / 2t,
/// t with b's sign)`; 0 at 0.
fn sqrt(cx: &mut Cx, a: &NodeArgs) -> Result<Vec<ValueId>> {
    let meta = cx.out_pair(0)?;
    let sizes = out_sizes(cx, 0)?;
    let real = out_real(cx, 0)?;
    let z = cx.pair(a.t("self")?)?;
    let (re, im) = cx.parts(z)?;
    let r = modulus(cx, re, im, &sizes)?;
    let abs_a = cx.unary("aten.abs.default", re, real)?;
    let s = cx.binary("aten.add.Tensor", r, abs_a, &sizes)?;
    let s = cx.scalar("aten.mul.Tensor", s, 0.5)?;
    let t = cx.unary("aten.sqrt.default", s, real)?;
    let two_t = cx.scalar("aten.mul.Tensor", t, 2.0)?;
    let u = cx.binary("aten.div.Tensor", im, two_t, &sizes)?;
    let zero_t = compare(cx, "aten.eq.Scalar", t, 0.0)?;
    let zero = full_like(cx, u, 0.0)?;
    let u = pick(cx, zero_t, zero, u, &sizes)?;
    let abs_u = cx.unary("aten.abs.default", u, real)?;
    // b's sign, -0.0 included (1 / -0.0 is -inf)
    let b_neg = compare(cx, "aten.lt.Scalar", im, 0.0)?;
    let inv = cx.unary("aten.reciprocal.default", im, real)?;
    let inv_neg = compare(cx, "aten.lt.Scalar", inv, 0.0)?;
    let m = cx.meta(im, Dtype::Bool, sizes.clone())?;
    let negative = cx.op(
        "aten.logical_or.default",
        vec![
            ("self", Argument::Tensor(b_neg)),
            ("other", Argument::Tensor(inv_neg)),
        ],
        m,
    )?;
    let neg_t = cx.unary("aten.neg.default", t, real)?;
    let signed_t = pick(cx, negative, neg_t, t, &sizes)?;
    let a_pos = compare(cx, "aten.ge.Scalar", re, 0.0)?;
    let re = pick(cx, a_pos, t, abs_u, &sizes)?;
    let im = pick(cx, a_pos, u, signed_t, &sizes)?;
    Ok(vec![cx.join(re, im, meta)?])
}

/// `log z = log |z| + i arg z`.
fn log(cx: &mut Cx, a: &NodeArgs) -> Result<Vec<ValueId>> {
    let meta = cx.out_pair(0)?;
    let sizes = out_sizes(cx, 0)?;
    let real = out_real(cx, 0)?;
    let z = cx.pair(a.t("self")?)?;
    let (re, im) = cx.parts(z)?;
    let r = modulus(cx, re, im, &sizes)?;
    let l = cx.unary("aten.log.default", r, real)?;
    let t = cx.binary("aten.atan2.default", im, re, &sizes)?;
    Ok(vec![cx.join(l, t, meta)?])
}

/// `1 / z`, by the division's Smith's method.
fn reciprocal(cx: &mut Cx, a: &NodeArgs) -> Result<Vec<ValueId>> {
    let meta = cx.out_pair(0)?;
    let sizes = out_sizes(cx, 0)?;
    let z = cx.pair(a.t("self")?)?;
    let (c, d) = cx.parts(z)?;
    let one = full_like(cx, c, 1.0)?;
    let zero = full_like(cx, c, 0.0)?;
    let (re, im) = cdiv_parts(cx, (one, zero), (c, d), &sizes)?;
    Ok(vec![cx.join(re, im, meta)?])
}

/// `mm`, `bmm`: `(A + iB)(C + iD) = (AC - BD) + i(AD + BC)`, a real
/// factor's imaginary part left out.
fn product(cx: &mut Cx, a: &NodeArgs) -> Result<Vec<ValueId>> {
    let meta = cx.out_pair(0)?;
    let sizes = out_sizes(cx, 0)?;
    let real = out_real(cx, 0)?;
    let op = cx.node.target.to_string();
    let (x, y) = (a.t("self")?, a.t("mat2")?);
    let split = |cx: &mut Cx, v: ValueId| -> Result<(ValueId, Option<ValueId>)> {
        if cx.complex(v) {
            let p = cx.as_pair(v, real)?;
            let (re, im) = cx.parts(p)?;
            Ok((re, Some(im)))
        } else {
            Ok((cx.cast(v, real)?, None))
        }
    };
    let (a_re, a_im) = split(cx, x)?;
    let (c_re, c_im) = split(cx, y)?;
    let mm = |cx: &mut Cx, p: ValueId, q: ValueId| -> Result<ValueId> {
        let m = cx.meta(p, real, sizes.clone())?;
        cx.op(
            &op,
            vec![("self", Argument::Tensor(p)), ("mat2", Argument::Tensor(q))],
            m,
        )
    };
    let ac = mm(cx, a_re, c_re)?;
    let (re, im) = match (a_im, c_im) {
        (Some(b), Some(d)) => {
            let bd = mm(cx, b, d)?;
            let ad = mm(cx, a_re, d)?;
            let bc = mm(cx, b, c_re)?;
            let re = cx.binary("aten.sub.Tensor", ac, bd, &sizes)?;
            (re, cx.binary("aten.add.Tensor", ad, bc, &sizes)?)
        }
        (Some(b), None) => (ac, mm(cx, b, c_re)?),
        (None, Some(d)) => (ac, mm(cx, a_re, d)?),
        (None, None) => return Err(Error::internal("a complex product of real factors")),
    };
    Ok(vec![cx.join(re, im, meta)?])
}

/// `index_put` into a complex tensor: of the pairs (the values as pairs
/// too; the indexed dims precede the pair dim).
fn index_put(cx: &mut Cx, a: &NodeArgs) -> Result<Vec<ValueId>> {
    let real = out_real(cx, 0)?;
    let meta = cx.out_pair(0)?;
    let p = cx.pair(a.t("self")?)?;
    let v = cx.as_pair(a.t("values")?, real)?;
    cx.same_op(
        vec![
            ("self", Argument::Tensor(p)),
            ("values", Argument::Tensor(v)),
        ],
        vec![meta],
    )
}

/// `full_like` of a complex dtype: each part filled, shaped like `self`.
fn full_like_of(cx: &mut Cx, a: &NodeArgs) -> Result<Vec<ValueId>> {
    let out = cx.out_meta(0)?;
    let real = out.dtype.real_part();
    let value = a.arg("fill_value");
    let (c, d) = scalar_parts(&value)
        .ok_or_else(|| Error::bad_input(format!("a fill value that is no number: {value:?}")))?;
    let x = a.t("self")?;
    let like = if cx.complex(x) {
        let p = cx.pair(x)?;
        cx.parts(p)?.0
    } else {
        x
    };
    let mut halves = Vec::new();
    for v in [c, d] {
        let m = cx.meta(like, real, out.sizes.clone())?;
        halves.push(cx.op(
            "aten.full_like.default",
            vec![
                ("self", Argument::Tensor(like)),
                ("fill_value", Argument::Float(v)),
                ("dtype", Argument::ScalarType(real)),
            ],
            m,
        )?);
    }
    Ok(vec![cx.join(
        halves[0],
        halves[1],
        super::pair_meta(&out),
    )?])
}

pub(super) const ROWS: &[(&str, Handler)] = &[
    ("aten.pow.Tensor_Scalar", pow),
    ("aten.sqrt.default", sqrt),
    ("aten.log.default", log),
    ("aten.reciprocal.default", reciprocal),
    ("aten.mm.default", product),
    ("aten.bmm.default", product),
    ("aten.index_put.default", index_put),
    ("aten.full_like.default", full_like_of),
];
