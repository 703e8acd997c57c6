//! Complex functions and products over real pairs: `pow` by a real
//! scalar, `sqrt` and `log` (principal branches, as `std::complex`),
//! `reciprocal`, and matrix products as four real ones.

use super::arith::{out_real, out_sizes};
use super::{exact, scalar_parts, ComplexNode, Handler};
use crate::decompose::args::NodeArgs;
use crate::ir::op::aten;
use crate::ir::{Argument, ValueId};
use crate::{Error, Result};

/// `pow(z, p)` for a real scalar `p`: `z * z` for 2, else the polar form
/// `|z|^p (cos p theta + i sin p theta)` (`std::pow`'s).
fn pow(cx: &mut ComplexNode, a: &NodeArgs) -> Result<Vec<ValueId>> {
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
    let z = cx.as_pair(a.tensor("self")?, real)?;
    if p == 1.0 {
        return Ok(vec![cx.op(
            aten::CLONE,
            vec![("self", Argument::Tensor(z))],
            meta,
        )?]);
    }
    let (re, im) = cx.parts(z)?;
    if p == 2.0 {
        let (re, im) = exact::cmul(cx, (re, im), (re, im), &sizes, real)?;
        return Ok(vec![cx.join(re, im, meta)?]);
    }
    let r = exact::hypot(cx, re, im, &sizes)?;
    let m = cx.meta(r, real, sizes.clone())?;
    let rp = cx.op(
        aten::POW_TENSOR_SCALAR,
        vec![
            ("self", Argument::Tensor(r)),
            ("exponent", Argument::Float(p)),
        ],
        m,
    )?;
    let t = cx.binary(aten::ATAN2, im, re, &sizes)?;
    let t = cx.scalar(aten::MUL_TENSOR, t, p)?;
    let cos = cx.unary(aten::COS, t, real)?;
    let sin = cx.unary(aten::SIN, t, real)?;
    let re = cx.binary(aten::MUL_TENSOR, rp, cos, &sizes)?;
    let im = cx.binary(aten::MUL_TENSOR, rp, sin, &sizes)?;
    Ok(vec![cx.join(re, im, meta)?])
}

/// The principal square root ([`exact::sqrt`]).
fn sqrt(cx: &mut ComplexNode, a: &NodeArgs) -> Result<Vec<ValueId>> {
    let meta = cx.out_pair(0)?;
    let sizes = out_sizes(cx, 0)?;
    let z = cx.pair(a.tensor("self")?)?;
    let z = cx.parts(z)?;
    let (re, im) = exact::sqrt(cx, z, &sizes)?;
    Ok(vec![cx.join(re, im, meta)?])
}

/// `log z = log |z| + i arg z` ([`exact::log`]).
fn log(cx: &mut ComplexNode, a: &NodeArgs) -> Result<Vec<ValueId>> {
    let meta = cx.out_pair(0)?;
    let sizes = out_sizes(cx, 0)?;
    let z = cx.pair(a.tensor("self")?)?;
    let z = cx.parts(z)?;
    let (re, im) = exact::log(cx, z, &sizes)?;
    Ok(vec![cx.join(re, im, meta)?])
}

/// `1 / z`, by the division's Smith's method.
fn reciprocal(cx: &mut ComplexNode, a: &NodeArgs) -> Result<Vec<ValueId>> {
    let meta = cx.out_pair(0)?;
    let sizes = out_sizes(cx, 0)?;
    let real = out_real(cx, 0)?;
    let z = cx.pair(a.tensor("self")?)?;
    let (c, d) = cx.parts(z)?;
    let one = cx.constant(c, 1.0, real)?;
    let zero = cx.constant(c, 0.0, real)?;
    let (re, im) = exact::cdiv(cx, (one, zero), (c, d), &sizes, real)?;
    Ok(vec![cx.join(re, im, meta)?])
}

/// `mm`, `bmm`: `(A + iB)(C + iD) = (AC - BD) + i(AD + BC)`, a real
/// factor's imaginary part left out.
fn product(cx: &mut ComplexNode, a: &NodeArgs) -> Result<Vec<ValueId>> {
    let meta = cx.out_pair(0)?;
    let sizes = out_sizes(cx, 0)?;
    let real = out_real(cx, 0)?;
    let op = cx.node.target.to_string();
    let (x, y) = (a.tensor("self")?, a.tensor("mat2")?);
    let split = |cx: &mut ComplexNode, v: ValueId| -> Result<(ValueId, Option<ValueId>)> {
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
    let mm = |cx: &mut ComplexNode, p: ValueId, q: ValueId| -> Result<ValueId> {
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
            let re = cx.binary(aten::SUB_TENSOR, ac, bd, &sizes)?;
            (re, cx.binary(aten::ADD_TENSOR, ad, bc, &sizes)?)
        }
        (Some(b), None) => (ac, mm(cx, b, c_re)?),
        (None, Some(d)) => (ac, mm(cx, a_re, d)?),
        (None, None) => return Err(Error::internal("a complex product of real factors")),
    };
    Ok(vec![cx.join(re, im, meta)?])
}

/// `index_put` into a complex tensor: of the pairs (the values as pairs
/// too; the indexed dims precede the pair dim).
fn index_put(cx: &mut ComplexNode, a: &NodeArgs) -> Result<Vec<ValueId>> {
    let real = out_real(cx, 0)?;
    let meta = cx.out_pair(0)?;
    let p = cx.pair(a.tensor("self")?)?;
    let v = cx.as_pair(a.tensor("values")?, real)?;
    cx.same_op(
        vec![
            ("self", Argument::Tensor(p)),
            ("values", Argument::Tensor(v)),
        ],
        vec![meta],
    )
}

/// `full_like` of a complex dtype: each part filled, shaped like `self`.
fn full_like_of(cx: &mut ComplexNode, a: &NodeArgs) -> Result<Vec<ValueId>> {
    let out = cx.out_meta(0)?;
    let real = out.dtype.real_part();
    let value = a.arg("fill_value");
    let (c, d) = scalar_parts(&value)
        .ok_or_else(|| Error::bad_input(format!("a fill value that is no number: {value:?}")))?;
    let x = a.tensor("self")?;
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
            aten::FULL_LIKE,
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
    (aten::POW_TENSOR_SCALAR, pow),
    (aten::SQRT, sqrt),
    (aten::LOG, log),
    (aten::RECIPROCAL, reciprocal),
    (aten::MM, product),
    (aten::BMM, product),
    (aten::INDEX_PUT, index_put),
    (aten::FULL_LIKE, full_like_of),
];
