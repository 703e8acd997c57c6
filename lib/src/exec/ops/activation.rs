//! Activation functions (relu, gelu, hardswish, softmax, ...): the executor rows.

use crate::ir::op::aten;
use super::*;

vm_unary_ops! {
    tanh => vmath::tanh, |t| t.tanh();
    sigmoid => vmath::sigmoid, |t| (t.neg()?.exp()? + 1.0)?.recip();
    silu => vmath::silu, |t| t.silu();
}

fn relu(ctx: &mut Ctx) -> OpResult {
    // Zero below 0, NaN kept (candle's relu is max(x, 0), which drops NaN);
    // one host pass for float32 on the CPU.
    let x = ctx.tensor("self")?;
    let host = with_host::<f32, _>(&x.t, |v| crate::kernels::vmath::map(v, |a| if a < 0.0 { 0.0 } else { a }));
    if let Some(v) = host {
        return one(Tensor::new(host_f32_tensor(v, x.dims())?, x.dtype));
    }
    same_dtype_unary(
        ctx,
        |t| t.lt(0f64)?.where_cond(&t.zeros_like()?, t),
        |v| v.max(0),
    )
}

fn gelu(ctx: &mut Ctx) -> OpResult {
    let x = ctx.tensor("self")?;
    let tanh = ctx.string("approximate")?.as_deref() == Some("tanh");
    let fast = if tanh {
        vmap(&x, vmath::gelu_tanh)?
    } else {
        vmap(&x, vmath::gelu_erf)?
    };
    if let Some(y) = fast {
        return one(y);
    }
    let t = match ctx.string("approximate")?.as_deref() {
        Some("tanh") => x.t.gelu(),
        _ => x.t.gelu_erf(),
    }?;
    one(Tensor::new(t, x.dtype))
}

fn hardtanh(ctx: &mut Ctx) -> OpResult {
    let x = ctx.tensor("self")?;
    let lo = ctx.opt_float("min_val")?.unwrap_or(-1.0);
    let hi = ctx.opt_float("max_val")?.unwrap_or(1.0);
    // torch's clamp (NaN kept), as a fused chain computes it
    let clamp = FuseOp::Clamp(lo as f32, hi as f32);
    if let Some(y) = vmap(&x, move |a| scalar(clamp, a, 0.0))? {
        return one(y);
    }
    one(Tensor::new(x.t.clamp(lo, hi)?, x.dtype))
}

fn hardswish(ctx: &mut Ctx) -> OpResult {
    let x = ctx.tensor("self")?;
    // torch's x * clamp(x + 3, 0, 6) / 6, as a fused chain computes it
    if let Some(y) = vmap(&x, |a| scalar(FuseOp::Hardswish, a, 0.0))? {
        return one(y);
    }
    let t = (&x.t
        * ((&x.t + 3.0)?.clamp(0f64, 6f64)? / 6.0)?)?;
    one(Tensor::new(t, x.dtype))
}

fn hardsigmoid(ctx: &mut Ctx) -> OpResult {
    let x = ctx.tensor("self")?;
    if let Some(y) = vmap(&x, |a| scalar(FuseOp::Hardsigmoid, a, 0.0))? {
        return one(y);
    }
    let t = ((&x.t + 3.0)?.clamp(0f64, 6f64)? / 6.0)?;
    one(Tensor::new(t, x.dtype))
}

fn softmax(ctx: &mut Ctx) -> OpResult {
    let x = ctx.tensor("self")?;
    let x = match ctx.dtype("dtype") {
        Some(d) => x.cast(d)?,
        None => x,
    };
    let d = normalize_dim(ctx.int("dim")?, x.rank())?;
    let log = ctx.node.target.name.contains("log_softmax");
    one(softmax_impl(&x, d, log)?)
}

fn elu(ctx: &mut Ctx) -> OpResult {
    let alpha = ctx.opt_float("alpha")?.unwrap_or(1.0);
    let scale = ctx.opt_float("scale")?.unwrap_or(1.0);
    let input_scale = ctx.opt_float("input_scale")?.unwrap_or(1.0);
    host_unary_with(ctx, true, move |v| {
        if v > 0.0 {
            scale * v
        } else {
            scale * alpha * ((v * input_scale).exp() - 1.0)
        }
    }, None)
}

fn leaky_relu(ctx: &mut Ctx) -> OpResult {
    let slope = ctx.opt_float("negative_slope")?.unwrap_or(0.01);
    let x = ctx.tensor("self")?;
    let neg = x.t.affine(slope, 0.0)?;
    let t =
        x.t.ge(0f64)
            .and_then(|m| m.where_cond(&x.t, &neg))?;
    one(Tensor::new(t, x.dtype))
}

/// The rows an element-wise chain runs in one pass (`exec::fuse`).
pub(super) const FUSES: &[(&str, Fusable)] = &[
    (aten::RELU, Fusable::Unary(FuseOp::Relu)),
    (aten::TANH, Fusable::Unary(FuseOp::Tanh)),
    (aten::SIGMOID, Fusable::Unary(FuseOp::Sigmoid)),
    (aten::SILU, Fusable::Unary(FuseOp::Silu)),
    (aten::HARDSWISH, Fusable::Unary(FuseOp::Hardswish)),
    (aten::HARDSIGMOID, Fusable::Unary(FuseOp::Hardsigmoid)),
    (aten::GELU, Fusable::Gelu),
    (aten::HARDTANH, Fusable::Hardtanh),
];

/// This family's rows: op identity -> implementation.
pub(super) const ROWS: &[(&str, OpFn)] = &[
    (aten::TANH, tanh),
    (aten::SIGMOID, sigmoid),
    (aten::SILU, silu),
    (aten::RELU, relu),
    (aten::GELU, gelu),
    (aten::HARDTANH, hardtanh),
    (aten::HARDSWISH, hardswish),
    (aten::HARDSIGMOID, hardsigmoid),
    (aten::_SOFTMAX, softmax),
    (aten::SOFTMAX_INT, softmax),
    (aten::_LOG_SOFTMAX, softmax),
    (aten::LOG_SOFTMAX_INT, softmax),
    (aten::ELU, elu),
    (aten::LEAKY_RELU, leaky_relu),
];
