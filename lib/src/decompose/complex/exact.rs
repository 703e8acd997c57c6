//! torch's complex kernels value for value, infinities and NaN included
//! (held to it by the dtype conformance suite, `lib/tests/dtypes.rs`):
//!
//! - a product as ATen's vectorized kernel computes it (`fmaddsub`): `re =
//!   fma(ar, br, -(ai * bi))`, `im = fma(ar, bi, ai * br)`, the products of
//!   `self`'s imaginary part rounded, the others not (an overflow there
//!   is an infinity that an FMA keeps where a plain sum would give NaN);
//!   a real operand is `(x, 0)`, so `0 * inf` makes NaN as in torch;
//! - a quotient by Smith's method with `c10::complex`'s branches (a zero
//!   divisor gives `a / |c|`, `b / |d|`);
//! - `|z|` as `hypot` (no overflow, `hypot(inf, nan) = inf`);
//! - `exp`, `log`, `sqrt` with glibc's (C99 Annex G) special values.
//!
//! complex64 arithmetic that needs more than float32 (an unrounded
//! product, `hypot`) is computed in float64 and rounded once.

use super::ComplexNode;
use crate::ir::op::aten;
use crate::ir::{Dtype, Sym, ValueId};
use crate::Result;

/// `x` in float64 (itself when it is).
fn wide(cx: &mut ComplexNode, x: ValueId) -> Result<ValueId> {
    cx.cast(x, Dtype::Float64)
}

/// The product `(a + bi)(c + di)`, broadcast to `sizes`, in the parts'
/// dtype `real`, as ATen's `fmaddsub` computes it.
pub(super) fn cmul(
    cx: &mut ComplexNode,
    (a, b): (ValueId, ValueId),
    (c, d): (ValueId, ValueId),
    sizes: &[Sym],
    real: Dtype,
) -> Result<(ValueId, ValueId)> {
    // the rounded products: self's imaginary part's
    let bd = cx.binary(aten::MUL_TENSOR, b, d, sizes)?;
    let bc = cx.binary(aten::MUL_TENSOR, b, c, sizes)?;
    if real != Dtype::Float64 {
        // exact products in float64, one rounding at the end
        let (a, c, d) = (wide(cx, a)?, wide(cx, c)?, wide(cx, d)?);
        let (bd, bc) = (wide(cx, bd)?, wide(cx, bc)?);
        let ac = cx.binary(aten::MUL_TENSOR, a, c, sizes)?;
        let ad = cx.binary(aten::MUL_TENSOR, a, d, sizes)?;
        let re = cx.binary(aten::SUB_TENSOR, ac, bd, sizes)?;
        let im = cx.binary(aten::ADD_TENSOR, ad, bc, sizes)?;
        return Ok((cx.cast(re, real)?, cx.cast(im, real)?));
    }
    // float64: where the rounded product overflowed and the other factors
    // are finite, the FMA's result is that infinity
    let ac = cx.binary(aten::MUL_TENSOR, a, c, sizes)?;
    let ad = cx.binary(aten::MUL_TENSOR, a, d, sizes)?;
    let re = cx.binary(aten::SUB_TENSOR, ac, bd, sizes)?;
    let im = cx.binary(aten::ADD_TENSOR, ad, bc, sizes)?;
    let a_fin = cx.is(aten::ISFINITE, a)?;
    let mut out = Vec::new();
    for (naive, rounded, other, negate) in [(re, bd, c, true), (im, bc, d, false)] {
        let inf = cx.is(aten::ISINF, rounded)?;
        let fin = cx.is(aten::ISFINITE, other)?;
        let both = cx.logic(aten::LOGICAL_AND, a_fin, fin, sizes)?;
        let cond = cx.logic(aten::LOGICAL_AND, inf, both, sizes)?;
        let held = if negate {
            cx.unary(aten::NEG, rounded, real)?
        } else {
            rounded
        };
        out.push(cx.pick(cond, held, naive, sizes)?);
    }
    Ok((out[0], out[1]))
}

/// The quotient `(a + bi) / (c + di)` by `c10::complex`'s Smith's method:
/// the larger of `|c|`, `|d|` scales the rest (`scl = 1 / (c + d rat)`
/// multiplies, as there); both zero gives `a / |c|`, `b / |d|`.
pub(super) fn cdiv(
    cx: &mut ComplexNode,
    (a, b): (ValueId, ValueId),
    (c, d): (ValueId, ValueId),
    sizes: &[Sym],
    real: Dtype,
) -> Result<(ValueId, ValueId)> {
    // the divisor's own sizes (its parts share them) until it meets `self`
    let dsz = cx.em.sizes(c)?;
    let abs_c = cx.unary(aten::ABS, c, real)?;
    let abs_d = cx.unary(aten::ABS, d, real)?;
    let m = cx.meta(c, Dtype::Bool, dsz.clone())?;
    let swap = cx.op(
        aten::LT_TENSOR,
        vec![
            ("self", crate::ir::Argument::Tensor(abs_c)),
            ("other", crate::ir::Argument::Tensor(abs_d)),
        ],
        m,
    )?;
    // not swapped: rat = d / c, scl = 1 / (c + d rat),
    //   re = (a + b rat) scl, im = (b - a rat) scl
    // swapped: rat = c / d, scl = 1 / (d + c rat),
    //   re = (a rat + b) scl, im = (b rat - a) scl
    let p = cx.pick(swap, d, c, &dsz)?;
    let q = cx.pick(swap, c, d, &dsz)?;
    let rat = cx.binary(aten::DIV_TENSOR, q, p, &dsz)?;
    let q_rat = cx.binary(aten::MUL_TENSOR, q, rat, &dsz)?;
    let den = cx.binary(aten::ADD_TENSOR, p, q_rat, &dsz)?;
    let scl = cx.unary(aten::RECIPROCAL, den, real)?;
    let b_rat = cx.binary(aten::MUL_TENSOR, b, rat, sizes)?;
    let a_rat = cx.binary(aten::MUL_TENSOR, a, rat, sizes)?;
    let re_plain = cx.binary(aten::ADD_TENSOR, a, b_rat, sizes)?;
    let im_plain = cx.binary(aten::SUB_TENSOR, b, a_rat, sizes)?;
    let re_swap = cx.binary(aten::ADD_TENSOR, a_rat, b, sizes)?;
    let im_swap = cx.binary(aten::SUB_TENSOR, b_rat, a, sizes)?;
    let re = cx.pick(swap, re_swap, re_plain, sizes)?;
    let im = cx.pick(swap, im_swap, im_plain, sizes)?;
    let re = cx.binary(aten::MUL_TENSOR, re, scl, sizes)?;
    let im = cx.binary(aten::MUL_TENSOR, im, scl, sizes)?;
    // both parts of the divisor zero: a / |c| and b / |d|
    let zero_c = cx.test(aten::EQ_SCALAR, abs_c, 0.0)?;
    let zero_d = cx.test(aten::EQ_SCALAR, abs_d, 0.0)?;
    let zero = cx.logic(aten::LOGICAL_AND, zero_c, zero_d, &dsz)?;
    let re0 = cx.binary(aten::DIV_TENSOR, a, abs_c, sizes)?;
    let im0 = cx.binary(aten::DIV_TENSOR, b, abs_d, sizes)?;
    let re = cx.pick(zero, re0, re, sizes)?;
    let im = cx.pick(zero, im0, im, sizes)?;
    Ok((re, im))
}

/// `hypot(a, b)`: `|a + bi|` without overflow; an infinite part makes it
/// infinite, NaN or not. complex64 in float64 (then rounded); complex128
/// scaled by the larger part.
pub(super) fn hypot(
    cx: &mut ComplexNode,
    a: ValueId,
    b: ValueId,
    sizes: &[Sym],
) -> Result<ValueId> {
    let real = cx.em.dtype(a)?;
    let r = if real != Dtype::Float64 {
        let (x, y) = (wide(cx, a)?, wide(cx, b)?);
        let x2 = cx.binary(aten::MUL_TENSOR, x, x, sizes)?;
        let y2 = cx.binary(aten::MUL_TENSOR, y, y, sizes)?;
        let s = cx.binary(aten::ADD_TENSOR, x2, y2, sizes)?;
        let r = cx.unary(aten::SQRT, s, Dtype::Float64)?;
        cx.cast(r, real)?
    } else {
        let x = cx.unary(aten::ABS, a, real)?;
        let y = cx.unary(aten::ABS, b, real)?;
        let hi = cx.binary(aten::MAXIMUM, x, y, sizes)?;
        let lo = cx.binary(aten::MINIMUM, x, y, sizes)?;
        let q = cx.binary(aten::DIV_TENSOR, lo, hi, sizes)?;
        let q2 = cx.binary(aten::MUL_TENSOR, q, q, sizes)?;
        let one = cx.scalar(aten::ADD_TENSOR, q2, 1.0)?;
        let root = cx.unary(aten::SQRT, one, real)?;
        let r = cx.binary(aten::MUL_TENSOR, hi, root, sizes)?;
        let zero = cx.test(aten::EQ_SCALAR, hi, 0.0)?;
        cx.pick(zero, hi, r, sizes)?
    };
    let ia = cx.is(aten::ISINF, a)?;
    let ib = cx.is(aten::ISINF, b)?;
    let inf = cx.logic(aten::LOGICAL_OR, ia, ib, sizes)?;
    let big = cx.constant(a, f64::INFINITY, real)?;
    cx.pick(inf, big, r, sizes)
}

/// `exp(a + bi) = e^a (cos b + i sin b)` with glibc's special values: a
/// real result for `b = 0` (its sign kept), `(0, 0)` for `a = -inf`,
/// `(inf, NaN)` for `a = inf` and `b` not finite. complex64 in float64
/// (`e^a` past float32's range times a small cosine is finite).
pub(super) fn exp(
    cx: &mut ComplexNode,
    (a, b): (ValueId, ValueId),
    sizes: &[Sym],
) -> Result<(ValueId, ValueId)> {
    let out = cx.em.dtype(a)?;
    let (a, b) = (wide(cx, a)?, wide(cx, b)?);
    let real = Dtype::Float64;
    let e = cx.unary(aten::EXP, a, real)?;
    let cos = cx.unary(aten::COS, b, real)?;
    let sin = cx.unary(aten::SIN, b, real)?;
    let mut re = cx.binary(aten::MUL_TENSOR, e, cos, sizes)?;
    let mut im = cx.binary(aten::MUL_TENSOR, e, sin, sizes)?;
    // a = +inf, b inf or NaN: (inf, NaN)
    let pos = cx.test(aten::EQ_SCALAR, a, f64::INFINITY)?;
    let b_fin = cx.is(aten::ISFINITE, b)?;
    let b_not = cx.is(aten::LOGICAL_NOT, b_fin)?;
    let cond = cx.logic(aten::LOGICAL_AND, pos, b_not, sizes)?;
    let inf = cx.constant(a, f64::INFINITY, real)?;
    re = cx.pick(cond, inf, re, sizes)?;
    // a = -inf: (0, 0)
    let neg = cx.test(aten::EQ_SCALAR, a, f64::NEG_INFINITY)?;
    let zero = cx.constant(a, 0.0, real)?;
    re = cx.pick(neg, zero, re, sizes)?;
    im = cx.pick(neg, zero, im, sizes)?;
    // b = 0: (e^a, b)
    let b0 = cx.test(aten::EQ_SCALAR, b, 0.0)?;
    im = cx.pick(b0, b, im, sizes)?;
    Ok((cx.cast(re, out)?, cx.cast(im, out)?))
}

/// `log(a + bi) = log |z| + i atan2(b, a)`, `log |z|` of complex64 in
/// float64.
pub(super) fn log(
    cx: &mut ComplexNode,
    (a, b): (ValueId, ValueId),
    sizes: &[Sym],
) -> Result<(ValueId, ValueId)> {
    let real = cx.em.dtype(a)?;
    let f = Dtype::Float64;
    let (x, y) = (wide(cx, a)?, wide(cx, b)?);
    let r = hypot(cx, x, y, sizes)?;
    let l = cx.unary(aten::LOG, r, f)?;
    // both parts finite and not both zero: log(hi) + log1p((lo / hi)^2)
    // / 2, as glibc's clog scales (|z| may pass float64's range, or sit
    // among the subnormals, where it keeps too few bits)
    let ax = cx.unary(aten::ABS, x, f)?;
    let ay = cx.unary(aten::ABS, y, f)?;
    let hi = cx.binary(aten::MAXIMUM, ax, ay, sizes)?;
    let lo = cx.binary(aten::MINIMUM, ax, ay, sizes)?;
    let q = cx.binary(aten::DIV_TENSOR, lo, hi, sizes)?;
    let q2 = cx.binary(aten::MUL_TENSOR, q, q, sizes)?;
    let l1 = cx.unary(aten::LOG1P, q2, f)?;
    let half = cx.scalar(aten::MUL_TENSOR, l1, 0.5)?;
    let log_hi = cx.unary(aten::LOG, hi, f)?;
    let scaled = cx.binary(aten::ADD_TENSOR, log_hi, half, sizes)?;
    let nonzero = cx.test(aten::GT_SCALAR, hi, 0.0)?;
    let fx = cx.is(aten::ISFINITE, x)?;
    let fy = cx.is(aten::ISFINITE, y)?;
    let finite = cx.logic(aten::LOGICAL_AND, fx, fy, sizes)?;
    let plain = cx.logic(aten::LOGICAL_AND, nonzero, finite, sizes)?;
    let l = cx.pick(plain, scaled, l, sizes)?;
    // the angle in the parts' own dtype, as clogf's atan2f
    let t = cx.binary(aten::ATAN2, b, a, sizes)?;
    Ok((cx.cast(l, real)?, t))
}

/// The principal square root, as glibc's `csqrt`: with `t = sqrt((|z| +
/// |a|) / 2)` (halved before it is summed: no overflow), `(t, b / 2t)`
/// where `a >= 0`, else `(|b| / 2t, t with b's sign)`, 0 at 0; `(inf,
/// ±inf)` for an infinite `b`, `(0, ±inf)` for `a = -inf` (NaN real part
/// for a NaN `b`), `(inf, ±0)` for `a = +inf` (NaN imaginary part for a
/// NaN `b`). complex64 in float64.
pub(super) fn sqrt(
    cx: &mut ComplexNode,
    (a, b): (ValueId, ValueId),
    sizes: &[Sym],
) -> Result<(ValueId, ValueId)> {
    let real = cx.em.dtype(a)?;
    let f = Dtype::Float64;
    let (x, y) = (wide(cx, a)?, wide(cx, b)?);
    // parts past 2^1000 (complex128): the root of z / 4, doubled (|z|
    // itself may pass float64's range; glibc scales likewise)
    let ax = cx.unary(aten::ABS, x, f)?;
    let ay = cx.unary(aten::ABS, y, f)?;
    let hi = cx.binary(aten::MAXIMUM, ax, ay, sizes)?;
    let big = cx.test(aten::GT_SCALAR, hi, 2f64.powi(1000))?;
    let quarter = cx.constant(x, 0.25, f)?;
    let one = cx.constant(x, 1.0, f)?;
    let two = cx.constant(x, 2.0, f)?;
    let k = cx.pick(big, quarter, one, sizes)?;
    let grow = cx.pick(big, two, one, sizes)?;
    let xs = cx.binary(aten::MUL_TENSOR, x, k, sizes)?;
    let ys = cx.binary(aten::MUL_TENSOR, y, k, sizes)?;
    let r = hypot(cx, xs, ys, sizes)?;
    let half_r = cx.scalar(aten::MUL_TENSOR, r, 0.5)?;
    let abs_x = cx.unary(aten::ABS, xs, f)?;
    let half_x = cx.scalar(aten::MUL_TENSOR, abs_x, 0.5)?;
    let s = cx.binary(aten::ADD_TENSOR, half_r, half_x, sizes)?;
    let t = cx.unary(aten::SQRT, s, f)?;
    let two_t = cx.scalar(aten::MUL_TENSOR, t, 2.0)?;
    let u = cx.binary(aten::DIV_TENSOR, ys, two_t, sizes)?;
    let (t, u) = (
        cx.binary(aten::MUL_TENSOR, t, grow, sizes)?,
        cx.binary(aten::MUL_TENSOR, u, grow, sizes)?,
    );
    let t0 = cx.test(aten::EQ_SCALAR, t, 0.0)?;
    let zero = cx.constant(x, 0.0, f)?;
    let u = cx.pick(t0, zero, u, sizes)?;
    let abs_u = cx.unary(aten::ABS, u, f)?;
    // y's sign, -0.0 included (1 / -0.0 is -inf)
    let y_neg = cx.test(aten::LT_SCALAR, y, 0.0)?;
    let inv = cx.unary(aten::RECIPROCAL, y, f)?;
    let inv_neg = cx.test(aten::LT_SCALAR, inv, 0.0)?;
    let negative = cx.logic(aten::LOGICAL_OR, y_neg, inv_neg, sizes)?;
    let neg_t = cx.unary(aten::NEG, t, f)?;
    let signed_t = cx.pick(negative, neg_t, t, sizes)?;
    let x_pos = cx.test(aten::GE_SCALAR, x, 0.0)?;
    let mut re = cx.pick(x_pos, t, abs_u, sizes)?;
    let mut im = cx.pick(x_pos, u, signed_t, sizes)?;
    // special values
    let inf = cx.constant(x, f64::INFINITY, f)?;
    let nan = cx.constant(x, f64::NAN, f)?;
    let ninf = cx.constant(x, f64::NEG_INFINITY, f)?;
    let signed_inf = cx.pick(negative, ninf, inf, sizes)?;
    let y_nan = cx.is(aten::ISNAN, y)?;
    // a = +inf: (inf, 0 with b's sign), (inf, NaN) for a NaN b
    let x_pinf = cx.test(aten::EQ_SCALAR, x, f64::INFINITY)?;
    let signed_zero = cx.scalar(aten::MUL_TENSOR, y, 0.0)?;
    let im_p = cx.pick(y_nan, nan, signed_zero, sizes)?;
    re = cx.pick(x_pinf, inf, re, sizes)?;
    im = cx.pick(x_pinf, im_p, im, sizes)?;
    // a = -inf: (0, inf with b's sign), (NaN, inf) for a NaN b
    let x_ninf = cx.test(aten::EQ_SCALAR, x, f64::NEG_INFINITY)?;
    let re_n = cx.pick(y_nan, nan, zero, sizes)?;
    let im_n = cx.pick(y_nan, inf, signed_inf, sizes)?;
    re = cx.pick(x_ninf, re_n, re, sizes)?;
    im = cx.pick(x_ninf, im_n, im, sizes)?;
    // b infinite: (inf, b), whatever a is
    let y_inf = cx.is(aten::ISINF, y)?;
    re = cx.pick(y_inf, inf, re, sizes)?;
    im = cx.pick(y_inf, y, im, sizes)?;
    Ok((cx.cast(re, real)?, cx.cast(im, real)?))
}
