//! Complex arithmetic over real pairs: each op a formula over the real and
//! imaginary parts, as torch's kernels compute it ([`exact`]: products as
//! ATen's vectorized kernel, division by Smith's method, `hypot`, glibc's
//! special values), a real operand promoted to `(x, 0)` as torch does.

use super::{exact, pair_meta, scalar_parts, ComplexNode, Handler};
use crate::decompose::args::NodeArgs;
use crate::ir::op::aten;
use crate::ir::{Argument, Dtype, Sym, ValueId};
use crate::{Error, Result};

/// The real dtype of the node's (complex) output `i`.
pub(super) fn out_real(cx: &ComplexNode, i: usize) -> Result<Dtype> {
    Ok(cx.out_meta(i)?.dtype.real_part())
}

/// The sizes of the node's output `i` (complex: without the pair dim).
pub(super) fn out_sizes(cx: &ComplexNode, i: usize) -> Result<Vec<Sym>> {
    Ok(cx.out_meta(i)?.sizes)
}

/// `z` as its parts, a real operand as `(x, 0)` and a number as 0-d
/// parts: how torch promotes an operand of a complex op.
pub(super) fn operand(
    cx: &mut ComplexNode,
    arg: &Argument,
    real: Dtype,
) -> Result<(ValueId, ValueId)> {
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
fn add_sub(cx: &mut ComplexNode, a: &NodeArgs) -> Result<Vec<ValueId>> {
    let sub = cx.node.target.name == "sub";
    let real = out_real(cx, 0)?;
    let meta = cx.out_pair(0)?;
    let sizes = out_sizes(cx, 0)?;
    let alpha = alpha(a)?;
    let (x_re, x_im) = operand(cx, &Argument::Tensor(a.tensor("self")?), real)?;
    let (y_re, y_im) = match a.arg("other") {
        Argument::Tensor(y) => {
            let (c, d) = operand(cx, &Argument::Tensor(y), real)?;
            // (alpha c - 0 d, alpha d + 0 c)
            let ac = if alpha == 1.0 {
                c
            } else {
                cx.scalar(aten::MUL_TENSOR, c, alpha)?
            };
            let ad = if alpha == 1.0 {
                d
            } else {
                cx.scalar(aten::MUL_TENSOR, d, alpha)?
            };
            let zd = cx.scalar(aten::MUL_TENSOR, d, 0.0)?;
            let zc = cx.scalar(aten::MUL_TENSOR, c, 0.0)?;
            let yc = cx.em.sizes(ac)?;
            let re = cx.binary(aten::SUB_TENSOR, ac, zd, &yc)?;
            let im = cx.binary(aten::ADD_TENSOR, ad, zc, &yc)?;
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
        aten::SUB_TENSOR
    } else {
        aten::ADD_TENSOR
    };
    let re = cx.binary(op, x_re, y_re, &sizes)?;
    let im = cx.binary(op, x_im, y_im, &sizes)?;
    Ok(vec![cx.join(re, im, meta)?])
}

/// `mul` (`.Tensor`, `.Scalar`): the complex product, a real operand or a
/// number as `(x, 0)` ([`exact::cmul`]).
fn mul(cx: &mut ComplexNode, a: &NodeArgs) -> Result<Vec<ValueId>> {
    let real = out_real(cx, 0)?;
    let meta = cx.out_pair(0)?;
    let sizes = out_sizes(cx, 0)?;
    let x = operand(cx, &Argument::Tensor(a.tensor("self")?), real)?;
    let y = operand(cx, &a.arg("other"), real)?;
    let (re, im) = exact::cmul(cx, x, y, &sizes, real)?;
    Ok(vec![cx.join(re, im, meta)?])
}

/// `div` (`.Tensor`, `.Scalar`): Smith's method ([`exact::cdiv`]), a
/// real operand or a number as `(x, 0)`.
fn div(cx: &mut ComplexNode, a: &NodeArgs) -> Result<Vec<ValueId>> {
    if a.has("rounding_mode") {
        return Err(Error::unsupported(
            "div with a rounding mode is not defined on complex values",
        ));
    }
    let real = out_real(cx, 0)?;
    let meta = cx.out_pair(0)?;
    let sizes = out_sizes(cx, 0)?;
    let x = operand(cx, &Argument::Tensor(a.tensor("self")?), real)?;
    let y = operand(cx, &a.arg("other"), real)?;
    let (re, im) = exact::cdiv(cx, x, y, &sizes, real)?;
    Ok(vec![cx.join(re, im, meta)?])
}

fn neg(cx: &mut ComplexNode, a: &NodeArgs) -> Result<Vec<ValueId>> {
    let p = cx.pair(a.tensor("self")?)?;
    let meta = cx.out_pair(0)?;
    Ok(vec![cx.op(
        aten::NEG,
        vec![("self", Argument::Tensor(p))],
        meta,
    )?])
}

/// `exp(a + bi)` ([`exact::exp`]).
fn exp(cx: &mut ComplexNode, a: &NodeArgs) -> Result<Vec<ValueId>> {
    let p = cx.pair(a.tensor("self")?)?;
    let meta = cx.out_pair(0)?;
    let sizes = out_sizes(cx, 0)?;
    let z = cx.parts(p)?;
    let (re, im) = exact::exp(cx, z, &sizes)?;
    Ok(vec![cx.join(re, im, meta)?])
}

/// `|a + bi|` as `hypot` ([`exact::hypot`]), into the node's (real)
/// output.
fn abs(cx: &mut ComplexNode, a: &NodeArgs) -> Result<Vec<ValueId>> {
    let p = cx.pair(a.tensor("self")?)?;
    let out = a.out(0)?;
    let sizes = out_sizes(cx, 0)?;
    let (re, im) = cx.parts(p)?;
    let r = exact::hypot(cx, re, im, &sizes)?;
    cx.em
        .op_into(aten::ALIAS, vec![("self", Argument::Tensor(r))], out)?;
    Ok(vec![out])
}

/// `angle(a + bi) = atan2(b, a)`, into the node's (real) output.
fn angle(cx: &mut ComplexNode, a: &NodeArgs) -> Result<Vec<ValueId>> {
    let p = cx.pair(a.tensor("self")?)?;
    let out = a.out(0)?;
    let (re, im) = cx.parts(p)?;
    cx.em.op_into(
        aten::ATAN2,
        vec![
            ("self", Argument::Tensor(im)),
            ("other", Argument::Tensor(re)),
        ],
        out,
    )?;
    Ok(vec![out])
}

/// `conj(a + bi) = a - bi` (`_conj`, `conj`, `conj_physical`).
fn conj(cx: &mut ComplexNode, a: &NodeArgs) -> Result<Vec<ValueId>> {
    let p = cx.pair(a.tensor("self")?)?;
    let meta = cx.out_pair(0)?;
    let (re, im) = cx.parts(p)?;
    let dt = cx.em.dtype(im)?;
    let im = cx.unary(aten::NEG, im, dt)?;
    Ok(vec![cx.join(re, im, meta)?])
}

/// The real or imaginary part: a select of the pair dim, into the node's
/// output.
fn part(cx: &mut ComplexNode, a: &NodeArgs) -> Result<Vec<ValueId>> {
    let x = a.tensor("self")?;
    let p = cx.pair(x)?;
    let out = a.out(0)?;
    let index = i64::from(cx.node.target.name == "imag");
    let dim = cx.crank(x)? as i64;
    cx.em.op_into(
        aten::SELECT_INT,
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
fn view_as_real(cx: &mut ComplexNode, a: &NodeArgs) -> Result<Vec<ValueId>> {
    Ok(vec![cx.pair(a.tensor("self")?)?])
}

/// `view_as_complex`: the real tensor is the pair.
fn view_as_complex(cx: &mut ComplexNode, a: &NodeArgs) -> Result<Vec<ValueId>> {
    let _ = cx;
    Ok(vec![a.tensor("self")?])
}

/// Ops that are the identity on values (`alias`, `detach`,
/// `resolve_conj`, `resolve_neg`, `lift_fresh_copy`): the pair itself.
fn identity(cx: &mut ComplexNode, a: &NodeArgs) -> Result<Vec<ValueId>> {
    Ok(vec![cx.pair(a.tensor("self")?)?])
}

/// `polar(abs, angle) = abs (cos angle + i sin angle)`.
fn polar(cx: &mut ComplexNode, a: &NodeArgs) -> Result<Vec<ValueId>> {
    let meta = cx.out_pair(0)?;
    let sizes = out_sizes(cx, 0)?;
    let real = meta.dtype;
    let r = cx.cast(a.tensor("abs")?, real)?;
    let t = cx.cast(a.tensor("angle")?, real)?;
    let cos = cx.unary(aten::COS, t, real)?;
    let sin = cx.unary(aten::SIN, t, real)?;
    let re = cx.binary(aten::MUL_TENSOR, r, cos, &sizes)?;
    let im = cx.binary(aten::MUL_TENSOR, r, sin, &sizes)?;
    Ok(vec![cx.join(re, im, meta)?])
}

/// `complex(real, imag)`.
fn complex(cx: &mut ComplexNode, a: &NodeArgs) -> Result<Vec<ValueId>> {
    let meta = cx.out_pair(0)?;
    let (re, im) = (a.tensor("real")?, a.tensor("imag")?);
    Ok(vec![cx.join(re, im, meta)?])
}

/// `_to_copy` to or from a complex dtype: complex to complex casts the
/// pair; real to complex is `(x, 0)`; complex to real keeps the real part
/// (as torch does, with its warning).
fn to_copy(cx: &mut ComplexNode, a: &NodeArgs) -> Result<Vec<ValueId>> {
    let x = a.tensor("self")?;
    let out_m = cx.out_meta(0)?;
    if out_m.dtype.is_complex() {
        let p = cx.as_pair(x, out_m.dtype.real_part())?;
        let meta = pair_meta(&out_m);
        return Ok(vec![cx.op(
            aten::CLONE,
            vec![("self", Argument::Tensor(p))],
            meta,
        )?]);
    }
    let p = cx.pair(x)?;
    let (re, _) = cx.parts(p)?;
    let out = a.out(0)?;
    cx.em.op_into(
        aten::_TO_COPY,
        vec![
            ("self", Argument::Tensor(re)),
            ("dtype", Argument::ScalarType(out_m.dtype)),
        ],
        out,
    )?;
    Ok(vec![out])
}

/// `clone`: of the pair.
fn clone(cx: &mut ComplexNode, a: &NodeArgs) -> Result<Vec<ValueId>> {
    let p = cx.pair(a.tensor("self")?)?;
    let meta = cx.out_pair(0)?;
    Ok(vec![cx.op(
        aten::CLONE,
        vec![("self", Argument::Tensor(p))],
        meta,
    )?])
}

pub(super) const ROWS: &[(&str, Handler)] = &[
    (aten::ADD_TENSOR, add_sub),
    (aten::ADD_SCALAR, add_sub),
    (aten::SUB_TENSOR, add_sub),
    (aten::SUB_SCALAR, add_sub),
    (aten::MUL_TENSOR, mul),
    (aten::MUL_SCALAR, mul),
    (aten::DIV_TENSOR, div),
    (aten::DIV_SCALAR, div),
    (aten::NEG, neg),
    (aten::EXP, exp),
    (aten::ABS, abs),
    (aten::ANGLE, angle),
    (aten::_CONJ, conj),
    (aten::CONJ, conj),
    (aten::CONJ_PHYSICAL, conj),
    (aten::_CONJ_PHYSICAL, conj),
    (aten::REAL, part),
    (aten::IMAG, part),
    (aten::VIEW_AS_REAL, view_as_real),
    (aten::VIEW_AS_COMPLEX, view_as_complex),
    (aten::ALIAS, identity),
    (aten::DETACH, identity),
    (aten::RESOLVE_CONJ, identity),
    (aten::RESOLVE_NEG, identity),
    (aten::LIFT_FRESH_COPY, identity),
    (aten::POLAR, polar),
    (aten::COMPLEX, complex),
    (aten::_TO_COPY, to_copy),
    (aten::CLONE, clone),
];
