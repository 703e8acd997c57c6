//! Elementwise arithmetic, comparisons, logic and math functions: the shape rules.

use crate::ir::op::{aten, quantized_decomposed};
use super::*;

/// The output has its input's shape.
pub(super) fn same(site: &Site) -> Result<Vec<Out>> {
    Ok(vec![Out::dims(site.dims("self")?)])
}

/// An operand's dims: a tensor's, or none for a Python number.
fn operand(site: &Site, name: &str) -> Result<Vec<Dim>> {
    match site.args.opt_tensor(name) {
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

/// diff: rank >= 1, `n` >= 0; `prepend` and `append` of the input's rank
/// and its dims but `dim`; that dim shortened by `n` (not below 0).
fn diff(site: &Site) -> Result<Vec<Out>> {
    let mut dims = site.dims("self")?;
    if dims.is_empty() {
        return Err(site.fail("self", "is 0-d: diff takes a tensor of rank 1 or more"));
    }
    let n = site.args.opt_int("n")?.unwrap_or(1);
    if n < 0 {
        return Err(site.fail("n", format!("is {n}, must be >= 0")));
    }
    let d = site.dim_index("dim", site.args.opt_int("dim")?.unwrap_or(-1), dims.len())?;
    let mut len = dims[d];
    for arg in ["prepend", "append"] {
        let Some(extra) = site.opt_dims(arg)? else { continue };
        if extra.len() != dims.len() {
            return Err(site.fail(
                arg,
                format!("has rank {}, self {}: diff takes them of one rank", extra.len(), dims.len()),
            ));
        }
        for (i, (a, b)) in dims.iter().zip(&extra).enumerate() {
            if let (true, Some(a), Some(b)) = (i != d, a, b) {
                if a != b {
                    return Err(site.fail(arg, format!("has {b} in dim {i}, self {a}")));
                }
            }
        }
        len = match (len, extra[d]) {
            (Some(a), Some(b)) => Some(a + b),
            _ => None,
        };
    }
    dims[d] = len.map(|l| (l - n).max(0));
    Ok(vec![Out::dims(dims)])
}

// PT2E int8 (quantized_decomposed): the checks torch's reference kernels
// make (torch/ao/quantization/fx/_decomposed.py), before any back end runs.

/// The integer `dtype` argument, one torch quantizes to, with
/// `quant_min`/`quant_max` in its range (where the op has them).
fn quant_dtype(site: &Site, bounds: bool) -> Result<Dtype> {
    let d = site.args.dtype("dtype").ok_or_else(|| site.fail("dtype", "is missing"))?;
    let (lo, hi) = match d {
        Dtype::Uint8 => (0, 255),
        Dtype::Int8 => (-128, 127),
        Dtype::Uint16 => (0, 65535),
        Dtype::Int16 => (-32768, 32767),
        Dtype::Int32 => (i32::MIN as i64, i32::MAX as i64),
        other => return Err(site.fail("dtype", format!("is {}, not a dtype torch quantizes to", other.torch_name()))),
    };
    if bounds {
        let (qmin, qmax) = (site.args.int("quant_min")?, site.args.int("quant_max")?);
        if qmin < lo || qmax > hi {
            return Err(site.fail(
                "quant_min/quant_max",
                format!("are [{qmin}, {qmax}], outside {}'s range [{lo}, {hi}]", d.torch_name()),
            ));
        }
    }
    Ok(d)
}

/// A float input (torch quantizes float32, float16 and bfloat16).
fn float_input(site: &Site) -> Result<()> {
    match site.dtype("input")? {
        Dtype::Float32 | Dtype::Float16 | Dtype::BFloat16 => Ok(()),
        d => Err(site.fail("input", format!("is {}, expected float32, float16 or bfloat16", d.torch_name()))),
    }
}

/// A quantized input of the `dtype` argument (torch asserts it).
fn quantized_input(site: &Site, d: Dtype) -> Result<()> {
    let got = site.dtype("input")?;
    if got != d {
        return Err(site.fail("input", format!("is {}, but dtype says {}", got.torch_name(), d.torch_name())));
    }
    Ok(())
}

/// The one-element `scale` and `zero_point` tensors of a `.tensor` overload.
fn one_element(site: &Site) -> Result<()> {
    for name in ["scale", "zero_point"] {
        if let Ok(Some(v)) = site.args.opt_tensor(name) {
            let dims = site.dims_of(v)?;
            if dims.iter().all(Option::is_some) && dims.iter().map(|d| d.unwrap_or(1)).product::<i64>() != 1 {
                return Err(site.fail(name, "must have one element"));
            }
        }
    }
    Ok(())
}

/// A per-channel op's `axis` within the input, and its `scales` and
/// `zero_points` one value a channel along it (or one for all).
fn channels(site: &Site) -> Result<()> {
    let x = site.dims("input")?;
    let axis = site.dim_index("axis", site.args.int("axis")?, x.len())?;
    for name in ["scales", "zero_points"] {
        let Some(v) = site.args.opt_tensor(name)? else { continue };
        let d = site.dims_of(v)?;
        let fits = d.len() == 1
            && match (d[0], x[axis]) {
                (Some(c), Some(n)) => c == 1 || c == n,
                _ => true,
            };
        if !fits {
            return Err(site.fail(name, format!("has dims {d:?}: one value a channel of the {x:?} input's dim {axis} expected")));
        }
    }
    Ok(())
}

fn quantize_per_tensor(site: &Site) -> Result<Vec<Out>> {
    float_input(site)?;
    one_element(site)?;
    let d = quant_dtype(site, true)?;
    Ok(vec![Out { dims: Some(site.dims("input")?), dtype: Some(d) }])
}

fn quantize_per_channel(site: &Site) -> Result<Vec<Out>> {
    float_input(site)?;
    channels(site)?;
    let d = quant_dtype(site, true)?;
    Ok(vec![Out { dims: Some(site.dims("input")?), dtype: Some(d) }])
}

fn dequantize(site: &Site) -> Result<Vec<Out>> {
    let per_channel = site.node.target.name == "dequantize_per_channel";
    let d = quant_dtype(site, per_channel)?;
    quantized_input(site, d)?;
    if per_channel {
        channels(site)?;
    } else {
        one_element(site)?;
    }
    let od = site.args.dtype("out_dtype").unwrap_or(Dtype::Float32);
    Ok(vec![Out { dims: Some(site.dims("input")?), dtype: Some(od) }])
}

/// choose_qparams: a float input with elements, a range that holds 0
/// (torch's `validate_qmin_qmax`); a float64 scale and an int64 zero point
/// of one element each.
fn choose_qparams(site: &Site) -> Result<Vec<Out>> {
    float_input(site)?;
    quant_dtype(site, false)?;
    let (qmin, qmax) = (site.args.int("quant_min")?, site.args.int("quant_max")?);
    if !(qmin <= 0 && 0 <= qmax && qmin < qmax) {
        return Err(site.fail("quant_min/quant_max", format!("are [{qmin}, {qmax}]: the range must hold 0 and qmin < qmax")));
    }
    if site.dims("input")?.contains(&Some(0)) {
        return Err(site.fail("input", "has no elements (torch's aminmax refuses it)"));
    }
    let one = |d| Out { dims: Some(vec![Some(1)]), dtype: Some(d) };
    Ok(vec![one(Dtype::Float64), one(Dtype::Int64)])
}

/// This family's rows: op identity -> rule.
#[rustfmt::skip]
pub(super) const ROWS: &[(&str, ShapeRule)] = &[
    (aten::ADD_TENSOR, binary), (aten::ADD_SCALAR, binary),
    (aten::SUB_TENSOR, binary), (aten::SUB_SCALAR, binary), (aten::RSUB_TENSOR, binary),
    (aten::RSUB_SCALAR, binary), (aten::MUL_TENSOR, binary), (aten::MUL_SCALAR, binary), (aten::DIV_TENSOR, binary), (aten::DIV_SCALAR, binary),
    (aten::DIV_TENSOR_MODE, binary), (aten::POW_TENSOR_TENSOR, binary),
    (aten::POW_TENSOR_SCALAR, binary), (aten::MAXIMUM, binary),
    (aten::MINIMUM, binary), (aten::REMAINDER_TENSOR, binary),
    (aten::REMAINDER_SCALAR, binary), (aten::FMOD_TENSOR, binary), (aten::FMOD_SCALAR, binary),
    (aten::ATAN2, binary), (aten::BITWISE_AND_TENSOR, binary),
    (aten::BITWISE_OR_TENSOR, binary), (aten::BITWISE_XOR_TENSOR, binary),
    (aten::LOGICAL_AND, compare), (aten::LOGICAL_OR, compare),
    (aten::LOGICAL_XOR, compare),
    (aten::EQ_TENSOR, compare), (aten::EQ_SCALAR, compare), (aten::NE_TENSOR, compare),
    (aten::NE_SCALAR, compare), (aten::LT_TENSOR, compare), (aten::LT_SCALAR, compare),
    (aten::LE_TENSOR, compare), (aten::LE_SCALAR, compare), (aten::GT_TENSOR, compare),
    (aten::GT_SCALAR, compare), (aten::GE_TENSOR, compare), (aten::GE_SCALAR, compare),
    (aten::WHERE_SELF, where_self), (aten::WHERE_SCALAROTHER, where_self),
    (aten::WHERE_SCALARSELF, where_self), (aten::WHERE_SCALAR, where_self),
    (aten::CLAMP_TENSOR, clamp_tensor),
    (aten::__AND___TENSOR, binary), (aten::__OR___TENSOR, binary),
    (aten::BITWISE_XOR_SCALAR, binary), (aten::BITWISE_AND_SCALAR, binary),
    (aten::BITWISE_OR_SCALAR, binary), (aten::POW_SCALAR, binary),
    (aten::DIV_SCALAR_MODE, binary), (aten::ATAN2_OUT, binary),
    (aten::ACOS, same), (aten::ACOSH, same), (aten::ASIN, same),
    (aten::ASINH, same), (aten::ATAN, same), (aten::ATANH, same),
    (aten::COSH, same), (aten::SINH, same), (aten::TAN, same),
    (aten::EXPM1, same), (aten::LOG10, same), (aten::LOG1P, same),
    (aten::LOG2, same),
    (aten::CLAMP, same), (aten::NEG, same), (aten::ABS, same),
    (aten::EXP, same), (aten::LOG, same), (aten::SQRT, same),
    (aten::RSQRT, same), (aten::RECIPROCAL, same), (aten::SIN, same),
    (aten::COS, same), (aten::TANH, same), (aten::ERF, same),
    (aten::FLOOR, same), (aten::CEIL, same), (aten::ROUND, same),
    (aten::TRUNC, same), (aten::SIGN, same), (aten::LOGICAL_NOT, same),
    (aten::BITWISE_NOT, same), (aten::ISNAN, same), (aten::ISINF, same),
    (aten::DIFF, diff), (aten::CLAMP_MIN, same), (aten::CLAMP_MAX, same),
    (aten::SQUARE, same), (aten::EXP2, same),
    (aten::FLOOR_DIVIDE, binary), (aten::FLOOR_DIVIDE_SCALAR, binary),
    (quantized_decomposed::QUANTIZE_PER_TENSOR, quantize_per_tensor),
    (quantized_decomposed::QUANTIZE_PER_TENSOR_TENSOR, quantize_per_tensor),
    (quantized_decomposed::QUANTIZE_PER_CHANNEL, quantize_per_channel),
    (quantized_decomposed::DEQUANTIZE_PER_TENSOR, dequantize),
    (quantized_decomposed::DEQUANTIZE_PER_TENSOR_TENSOR, dequantize),
    (quantized_decomposed::DEQUANTIZE_PER_CHANNEL, dequantize),
    (quantized_decomposed::CHOOSE_QPARAMS_TENSOR, choose_qparams),
];
