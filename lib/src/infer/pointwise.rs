//! Elementwise arithmetic, comparisons, logic and math functions: the shape rules.

use super::*;

/// The output has its input's shape.
pub(super) fn same(site: &Site) -> Result<Vec<Out>> {
    Ok(vec![Out::dims(site.dims("self")?)])
}

/// An operand's dims: a tensor's, or none for a Python number.
fn operand(site: &Site, name: &str) -> Result<Vec<Dim>> {
    match site.args.ot(name) {
        Ok(Some(v)) => site.dims_of(v),
        _ => Ok(vec![]),
    }
}

/// `self` and `other` (or `exponent`) broadcast; a number is 0-d.
fn binary(site: &Site) -> Result<Vec<Out>> {
    let a = operand(site, "self")?;
    let other = if site.args.has("exponent") { "exponent" } else { "other" };
    Ok(vec![Out::dims(broadcast(site, &a, &operand(site, other)?)?)])
}

/// A comparison: broadcast, and a bool result.
fn compare(site: &Site) -> Result<Vec<Out>> {
    let mut out = binary(site)?;
    out[0].dtype = Some(Dtype::Bool);
    Ok(out)
}

/// `where(condition, self, other)`: the three broadcast (numbers are 0-d).
fn where_self(site: &Site) -> Result<Vec<Out>> {
    let c = site.dims("condition")?;
    let s = broadcast(site, &c, &operand(site, "self")?)?;
    Ok(vec![Out::dims(broadcast(site, &s, &operand(site, "other")?)?)])
}

/// clamp: `min` and `max` tensors (when given) broadcast with `self`.
fn clamp_tensor(site: &Site) -> Result<Vec<Out>> {
    let mut dims = site.dims("self")?;
    for bound in ["min", "max"] {
        if let Some(b) = site.opt_dims(bound)? {
            dims = broadcast(site, &dims, &b)?;
        }
    }
    Ok(vec![Out::dims(dims)])
}

/// This family's rows: op identity -> rule.
#[rustfmt::skip]
pub(super) const ROWS: &[(&str, Rule)] = &[
    ("aten.add.Tensor", binary), ("aten.add.Scalar", binary), ("aten.add_.Tensor", binary),
    ("aten.sub.Tensor", binary), ("aten.sub.Scalar", binary), ("aten.rsub.Tensor", binary),
    ("aten.rsub.Scalar", binary), ("aten.mul.Tensor", binary), ("aten.mul.Scalar", binary),
    ("aten.mul_.Tensor", binary), ("aten.div.Tensor", binary), ("aten.div.Scalar", binary),
    ("aten.div.Tensor_mode", binary), ("aten.pow.Tensor_Tensor", binary),
    ("aten.pow.Tensor_Scalar", binary), ("aten.maximum.default", binary),
    ("aten.minimum.default", binary), ("aten.remainder.Tensor", binary),
    ("aten.remainder.Scalar", binary), ("aten.fmod.Tensor", binary), ("aten.fmod.Scalar", binary),
    ("aten.atan2.default", binary), ("aten.bitwise_and.Tensor", binary),
    ("aten.bitwise_or.Tensor", binary), ("aten.bitwise_xor.Tensor", binary),
    ("aten.logical_and.default", compare), ("aten.logical_or.default", compare),
    ("aten.logical_xor.default", compare),
    ("aten.eq.Tensor", compare), ("aten.eq.Scalar", compare), ("aten.ne.Tensor", compare),
    ("aten.ne.Scalar", compare), ("aten.lt.Tensor", compare), ("aten.lt.Scalar", compare),
    ("aten.le.Tensor", compare), ("aten.le.Scalar", compare), ("aten.gt.Tensor", compare),
    ("aten.gt.Scalar", compare), ("aten.ge.Tensor", compare), ("aten.ge.Scalar", compare),
    ("aten.where.self", where_self), ("aten.where.ScalarOther", where_self),
    ("aten.where.ScalarSelf", where_self), ("aten.where.Scalar", where_self),
    ("aten.clamp.Tensor", clamp_tensor), ("aten.add_.Scalar", binary),
    ("aten.__and__.Tensor", binary), ("aten.__or__.Tensor", binary),
    ("aten.bitwise_xor.Scalar", binary), ("aten.bitwise_and.Scalar", binary),
    ("aten.bitwise_or.Scalar", binary), ("aten.pow.Scalar", binary),
    ("aten.div.Scalar_mode", binary), ("aten.atan2.out", binary),
    ("aten.acos.default", same), ("aten.acosh.default", same), ("aten.asin.default", same),
    ("aten.asinh.default", same), ("aten.atan.default", same), ("aten.atanh.default", same),
    ("aten.cosh.default", same), ("aten.sinh.default", same), ("aten.tan.default", same),
    ("aten.expm1.default", same), ("aten.log10.default", same), ("aten.log1p.default", same),
    ("aten.log2.default", same),
    ("aten.clamp.default", same), ("aten.neg.default", same), ("aten.abs.default", same),
    ("aten.exp.default", same), ("aten.log.default", same), ("aten.sqrt.default", same),
    ("aten.rsqrt.default", same), ("aten.reciprocal.default", same), ("aten.sin.default", same),
    ("aten.cos.default", same), ("aten.tanh.default", same), ("aten.erf.default", same),
    ("aten.floor.default", same), ("aten.ceil.default", same), ("aten.round.default", same),
    ("aten.trunc.default", same), ("aten.sign.default", same), ("aten.logical_not.default", same),
    ("aten.bitwise_not.default", same), ("aten.isnan.default", same), ("aten.isinf.default", same),
];
