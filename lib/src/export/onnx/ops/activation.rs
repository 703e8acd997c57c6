//! Activation functions (relu, gelu, hardswish, softmax, ...): the ONNX emitters.

use crate::ir::op::aten;
use super::*;

fn activation(cx: &mut EmitNode, op: &str, attrs: &[(&str, f64)]) -> Result<()> {
    let (x, meta) = first(cx)?;
    let attrs = attrs.iter().map(|(k, v)| attr_float(k, *v)).collect();
    elementwise(cx, &x, meta.dtype, |cx, x, _| Ok(cx.node(op, &[x], attrs)))
}

fn silu(cx: &mut EmitNode) -> Result<()> {
    let (x, meta) = first(cx)?;
    elementwise(cx, &x, meta.dtype, |cx, x, _| {
        let s = cx.node("Sigmoid", &[x], vec![]);
        Ok(cx.node("Mul", &[x, &s], vec![]))
    })
}

/// GELU by its formula, as torch's CPU kernels compute it: the exact
/// form `x * (1 + erf(x / sqrt 2)) * 0.5` in float32 and narrower
/// (multiplied by 1 + erf first: past half the largest float the product
/// overflows to inf, as torch's does; NaN at both infinities, which
/// torch's vectorised kernel gives), `x * 0.5 * (1 + erf)` in float64
/// (inf at +inf); the tanh form `0.5 x (1 + tanh(...))`. ONNX's Gelu
/// (opset 20) leaves the infinities and the overflow to the runtime, so
/// it is not used.
fn gelu(cx: &mut EmitNode) -> Result<()> {
    let (x, meta) = first(cx)?;
    let approximate = cx
        .opt_string("approximate")?
        .unwrap_or_else(|| "none".into());
    if approximate != "none" && approximate != "tanh" {
        return Err(Error::unsupported(format!(
            "gelu approximate={approximate:?}"
        )));
    }
    elementwise(cx, &x, meta.dtype, |cx, x, c| {
        let half = cx.scalar(Lit::Float(0.5), c)?;
        let one = cx.scalar(Lit::Float(1.0), c)?;
        if approximate == "tanh" {
            // tanh(sqrt(2/pi) * (x + 0.044715 x^3))
            let k = cx.scalar(Lit::Float((2.0 / std::f64::consts::PI).sqrt()), c)?;
            let a = cx.scalar(Lit::Float(0.044715), c)?;
            let x2 = cx.node("Mul", &[x, x], vec![]);
            let x3 = cx.node("Mul", &[&x2, x], vec![]);
            let ax3 = cx.node("Mul", &[&a, &x3], vec![]);
            let s = cx.node("Add", &[x, &ax3], vec![]);
            let ks = cx.node("Mul", &[&k, &s], vec![]);
            let inner = cx.node("Tanh", &[&ks], vec![]);
            let p = cx.node("Add", &[&inner, &one], vec![]);
            let hx = cx.node("Mul", &[x, &half], vec![]);
            return Ok(cx.node("Mul", &[&hx, &p], vec![]));
        }
        let r = cx.scalar(Lit::Float(std::f64::consts::FRAC_1_SQRT_2), c)?;
        let xr = cx.node("Mul", &[x, &r], vec![]);
        let inner = cx.node("Erf", &[&xr], vec![]);
        let p = cx.node("Add", &[&inner, &one], vec![]);
        if c == Dtype::Float64 {
            let hx = cx.node("Mul", &[x, &half], vec![]);
            return Ok(cx.node("Mul", &[&hx, &p], vec![]));
        }
        let xp = cx.node("Mul", &[x, &p], vec![]);
        let y = cx.node("Mul", &[&xp, &half], vec![]);
        let inf = cx.node("IsInf", &[x], vec![]);
        let nan = cx.scalar(Lit::Float(f64::NAN), c)?;
        Ok(cx.node("Where", &[&inf, &nan, &y], vec![]))
    })
}

fn leaky_relu(cx: &mut EmitNode) -> Result<()> {
    let slope = lit(cx, "negative_slope")?.map_or(0.01, Lit::as_f64);
    activation(cx, "LeakyRelu", &[("alpha", slope)])
}

fn elu(cx: &mut EmitNode) -> Result<()> {
    let alpha = lit(cx, "alpha")?.map_or(1.0, Lit::as_f64);
    let scale = lit(cx, "scale")?.map_or(1.0, Lit::as_f64);
    let input_scale = lit(cx, "input_scale")?.map_or(1.0, Lit::as_f64);
    if scale == 1.0 && input_scale == 1.0 {
        return activation(cx, "Elu", &[("alpha", alpha)]);
    }
    if input_scale == 1.0 {
        // selu and friends: scale * (x > 0 ? x : alpha * (exp(x) - 1))
        return activation(cx, "Selu", &[("alpha", alpha), ("gamma", scale)]);
    }
    // scale * (x > 0 ? x : alpha * (exp(x * input_scale) - 1))
    let (x, meta) = first(cx)?;
    elementwise(cx, &x, meta.dtype, |cx, x, c| {
        let (s, is, sa) = (
            cx.scalar(Lit::Float(scale), c)?,
            cx.scalar(Lit::Float(input_scale), c)?,
            cx.scalar(Lit::Float(scale * alpha), c)?,
        );
        let (zero, one) = (
            cx.scalar(Lit::Float(0.0), c)?,
            cx.scalar(Lit::Float(1.0), c)?,
        );
        let pos = cx.node("Mul", &[x, &s], vec![]);
        let xi = cx.node("Mul", &[x, &is], vec![]);
        let e = cx.node("Exp", &[&xi], vec![]);
        let em1 = cx.node("Sub", &[&e, &one], vec![]);
        let neg = cx.node("Mul", &[&em1, &sa], vec![]);
        let up = cx.node("Greater", &[x, &zero], vec![]);
        Ok(cx.node("Where", &[&up, &pos, &neg], vec![]))
    })
}

/// mish(x) = x tanh(softplus(x)): ONNX `Mish` from opset 18, composed before.
fn mish(cx: &mut EmitNode) -> Result<()> {
    if cx.opset() >= 18 {
        return unary(cx, "Mish");
    }
    let (x, meta) = first(cx)?;
    elementwise(cx, &x, meta.dtype, |cx, x, _| {
        let sp = cx.node("Softplus", &[x], vec![]);
        let t = cx.node("Tanh", &[&sp], vec![]);
        Ok(cx.node("Mul", &[x, &t], vec![]))
    })
}

/// softplus(x) = log(1 + exp(beta x)) / beta, and x where beta x > threshold.
fn softplus(cx: &mut EmitNode) -> Result<()> {
    let beta = lit(cx, "beta")?.map_or(1.0, Lit::as_f64);
    let threshold = lit(cx, "threshold")?.map_or(20.0, Lit::as_f64);
    let (x, meta) = first(cx)?;
    elementwise(cx, &x, meta.dtype, |cx, x, c| {
        let b = cx.scalar(Lit::Float(beta), c)?;
        let bx = cx.node("Mul", &[x, &b], vec![]);
        let sp = cx.node("Softplus", &[&bx], vec![]);
        let y = cx.node("Div", &[&sp, &b], vec![]);
        let t = cx.scalar(Lit::Float(threshold), c)?;
        let big = cx.node("Greater", &[&bx, &t], vec![]);
        Ok(cx.node("Where", &[&big, x, &y], vec![]))
    })
}

fn hardtanh(cx: &mut EmitNode) -> Result<()> {
    if cx.node.target.name == "relu6" {
        return clip(
            cx,
            Some(Operand::Lit(Lit::Float(0.0))),
            Some(Operand::Lit(Lit::Float(6.0))),
        );
    }
    let lo = lit(cx, "min_val")?.unwrap_or(Lit::Float(-1.0));
    let hi = lit(cx, "max_val")?.unwrap_or(Lit::Float(1.0));
    clip(cx, Some(Operand::Lit(lo)), Some(Operand::Lit(hi)))
}

fn softmax(cx: &mut EmitNode, op: &str) -> Result<()> {
    let (x, meta) = first(cx)?;
    let dim = normalize_dim(cx.int("dim")?, meta.sizes.len())? as i64;
    if meta.sizes.is_empty() {
        let y = if op == "Softmax" {
            let out = cx.out_dtype(0)?;
            cx.scalar(Lit::Float(1.0), out)?
        } else {
            let out = cx.out_dtype(0)?;
            cx.scalar(Lit::Float(0.0), out)?
        };
        cx.set(0, y);
        return Ok(());
    }
    elementwise(cx, &x, meta.dtype, |cx, x, c| {
        if op == "LogSoftmax" && c == Dtype::Float64 {
            // ONNX Runtime's float64 LogSoftmax gives numbers for a line
            // holding NaN or +inf; torch's (x - max) - log(sum(exp(x -
            // max))) gives NaN
            let m = cx.reduce("ReduceMax", x, Some(&[dim]), true);
            let d = cx.node("Sub", &[x, &m], vec![]);
            let e = cx.node("Exp", &[&d], vec![]);
            let s = cx.reduce("ReduceSum", &e, Some(&[dim]), true);
            let l = cx.node("Log", &[&s], vec![]);
            return Ok(cx.node("Sub", &[&d, &l], vec![]));
        }
        Ok(cx.node(op, &[x], vec![attr_int("axis", dim)]))
    })
}

/// x where x > threshold, else value.
fn threshold(cx: &mut EmitNode) -> Result<()> {
    let x = cx.operand("self")?;
    let t = cx.operand("threshold")?;
    let v = cx.operand("value")?;
    let out = cx.out_dtype(0)?;
    let c = cx.compute(out);
    let xs = cx.operand_as(&x, c)?;
    let ts = cx.operand_as(&t, c)?;
    let vs = cx.operand_as(&v, c)?;
    let keep = cx.node("Greater", &[&xs, &ts], vec![]);
    let y = cx.node("Where", &[&keep, &xs, &vs], vec![]);
    let y = cx.cast(&y, c, out)?;
    cx.set(0, y);
    Ok(())
}

/// This family's rows: op identity -> implementation.
#[rustfmt::skip]
pub(super) const ROWS: &[(&str, Emit)] = &[
    (aten::RELU, |cx| unary(cx, "Relu")),
    (aten::SIGMOID, |cx| unary(cx, "Sigmoid")),
    (aten::TANH, |cx| unary(cx, "Tanh")),
    (aten::SILU, silu),
    (aten::GELU, gelu),
    (aten::HARDSIGMOID, |cx| activation(cx, "HardSigmoid", &[("alpha", 1.0 / 6.0), ("beta", 0.5)])),
    (aten::HARDSWISH, |cx| unary(cx, "HardSwish")),
    (aten::MISH, mish),
    (aten::LEAKY_RELU, leaky_relu),
    (aten::ELU, elu),
    (aten::SOFTPLUS, softplus),
    (aten::HARDTANH, hardtanh),
    (aten::RELU6, hardtanh),
    (aten::THRESHOLD, threshold),
    (aten::_SOFTMAX, |cx| softmax(cx, "Softmax")),
    (aten::SOFTMAX_INT, |cx| softmax(cx, "Softmax")),
    (aten::_SAFE_SOFTMAX, |cx| softmax(cx, "Softmax")),
    (aten::_LOG_SOFTMAX, |cx| softmax(cx, "LogSoftmax")),
    (aten::LOG_SOFTMAX_INT, |cx| softmax(cx, "LogSoftmax")),
];
