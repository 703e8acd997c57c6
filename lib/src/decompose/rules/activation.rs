//! Activation functions (relu, gelu, hardswish, softmax, ...): the decomposition rules.

use crate::ir::op::aten;
use super::*;

fn softmax_like(em: &mut Emitter, a: &NodeArgs, op: &str) -> Result<Vec<ValueId>> {
    let mut x = a.tensor("self")?;
    if let Some(d) = a.dtype("dtype") {
        if d != em.dtype(x)? {
            x = to_copy(em, x, d, None)?;
        }
    }
    em.op_into(
        op,
        vec![
            ("self", Argument::Tensor(x)),
            ("dim", Argument::Int(a.int("dim")?)),
            ("half_to_float", Argument::Bool(false)),
        ],
        a.out(0)?,
    )?;
    Ok(vec![a.out(0)?])
}

fn softmax(em: &mut Emitter, a: &NodeArgs) -> Result<Vec<ValueId>> {
    softmax_like(em, a, aten::_SOFTMAX)
}

fn log_softmax(em: &mut Emitter, a: &NodeArgs) -> Result<Vec<ValueId>> {
    softmax_like(em, a, aten::_LOG_SOFTMAX)
}

fn silu(em: &mut Emitter, a: &NodeArgs) -> Result<Vec<ValueId>> {
    let x = a.tensor("self")?;
    let s = unary(em, aten::SIGMOID, x)?;
    let dtype = em.dtype(x)?;
    binary_into(em, a, aten::MUL_TENSOR, x, s, dtype)
}

/// `clamp(x + 3, 0, 6)`, and the output's meta.
fn relu6_of_x_plus_3(em: &mut Emitter, x: ValueId) -> Result<(ValueId, TensorMeta)> {
    let dtype = em.dtype(x)?;
    let p = with_scalar(em, aten::ADD_TENSOR, x, scalar(3.0, dtype))?;
    let sizes = em.sizes(x)?;
    let meta = em.meta_like(x, dtype, sizes)?;
    let c = em.op(
        aten::CLAMP,
        vec![
            ("self", Argument::Tensor(p)),
            ("min", scalar(0.0, dtype)),
            ("max", scalar(6.0, dtype)),
        ],
        meta.clone(),
    )?;
    Ok((c, meta))
}

/// `v / 6` into `out` (a new value where `None`).
fn sixth(em: &mut Emitter, v: ValueId, meta: TensorMeta, out: Option<ValueId>) -> Result<ValueId> {
    let dtype = em.dtype(v)?;
    em.op_to(
        aten::DIV_TENSOR,
        vec![("self", Argument::Tensor(v)), ("other", scalar(6.0, dtype))],
        out,
        meta,
    )
}

/// torch's `x * clamp(x + 3, 0, 6) / 6`, in that order (a product, then a
/// division: `x * (clamp / 6)` rounds differently).
fn hardswish(em: &mut Emitter, a: &NodeArgs) -> Result<Vec<ValueId>> {
    let x = a.tensor("self")?;
    let (c, meta) = relu6_of_x_plus_3(em, x)?;
    let m = em.op(
        aten::MUL_TENSOR,
        vec![("self", Argument::Tensor(x)), ("other", Argument::Tensor(c))],
        meta.clone(),
    )?;
    Ok(vec![sixth(em, m, meta, Some(a.out(0)?))?])
}

fn hardsigmoid(em: &mut Emitter, a: &NodeArgs) -> Result<Vec<ValueId>> {
    let x = a.tensor("self")?;
    let (c, meta) = relu6_of_x_plus_3(em, x)?;
    Ok(vec![sixth(em, c, meta, Some(a.out(0)?))?])
}

fn relu6(em: &mut Emitter, a: &NodeArgs) -> Result<Vec<ValueId>> {
    let x = a.tensor("self")?;
    let dtype = em.dtype(x)?;
    em.op_into(
        aten::HARDTANH,
        vec![
            ("self", Argument::Tensor(x)),
            ("min_val", scalar(0.0, dtype)),
            ("max_val", scalar(6.0, dtype)),
        ],
        a.out(0)?,
    )?;
    Ok(vec![a.out(0)?])
}

fn softplus(em: &mut Emitter, a: &NodeArgs) -> Result<Vec<ValueId>> {
    // where(x * beta > threshold, x, log1p(exp(x * beta)) / beta)
    let x = a.tensor("self")?;
    let dtype = em.dtype(x)?;
    let beta = a.float("beta")?;
    let xb = with_scalar(em, aten::MUL_TENSOR, x, Argument::Float(beta))?;
    let ex = unary(em, aten::EXP, xb)?;
    let l = unary(em, aten::LOG1P, ex)?;
    let soft = with_scalar(em, aten::DIV_TENSOR, l, Argument::Float(beta))?;
    let sizes = em.sizes(x)?;
    let meta = em.meta_like(x, Dtype::Bool, sizes)?;
    let big = em.op(
        aten::GT_SCALAR,
        vec![
            ("self", Argument::Tensor(xb)),
            ("other", a.arg("threshold")),
        ],
        meta,
    )?;
    let _ = dtype;
    Ok(vec![where_(em, big, x, soft, Some(a.out(0)?))?])
}

fn mish(em: &mut Emitter, a: &NodeArgs) -> Result<Vec<ValueId>> {
    let x = a.tensor("self")?;
    let dtype = em.dtype(x)?;
    let sizes = em.sizes(x)?;
    let meta = em.meta_like(x, dtype, sizes)?;
    let sp = em.op(
        aten::SOFTPLUS,
        vec![("self", Argument::Tensor(x))],
        meta,
    )?;
    let t = unary(em, aten::TANH, sp)?;
    binary_into(em, a, aten::MUL_TENSOR, x, t, dtype)
}

fn elu(
    em: &mut Emitter,
    a: &NodeArgs,
    alpha: f64,
    scale: f64,
    input_scale: f64,
) -> Result<Vec<ValueId>> {
    let out = a.out(0)?;
    em.op_into(
        aten::ELU,
        vec![
            ("self", Argument::Tensor(a.tensor("self")?)),
            ("alpha", Argument::Float(alpha)),
            ("scale", Argument::Float(scale)),
            ("input_scale", Argument::Float(input_scale)),
        ],
        out,
    )?;
    Ok(vec![out])
}

fn selu(em: &mut Emitter, a: &NodeArgs) -> Result<Vec<ValueId>> {
    elu(em, a, 1.673_263_242_354_377_3, 1.050_700_987_355_480_5, 1.0)
}

fn celu(em: &mut Emitter, a: &NodeArgs) -> Result<Vec<ValueId>> {
    let alpha = a.float("alpha")?;
    elu(em, a, alpha, 1.0, 1.0 / alpha)
}

fn glu(em: &mut Emitter, a: &NodeArgs) -> Result<Vec<ValueId>> {
    let x = a.tensor("self")?;
    let d = normalize_dim(a.int("dim")?, em.rank(x)?)?;
    let n = em.static_dim(x, d, "glu")?;
    let mut half = em.sizes(x)?;
    half[d] = Sym::Int(n / 2);
    let dtype = em.dtype(x)?;
    let m1 = em.meta_like(x, dtype, half.clone())?;
    let m2 = em.meta_like(x, dtype, half)?;
    let parts = em.call(
        aten::SPLIT_WITH_SIZES,
        vec![
            ("self", Argument::Tensor(x)),
            ("split_sizes", ints_arg(&[n / 2, n / 2])),
            ("dim", Argument::Int(d as i64)),
        ],
        vec![Out::New(m1), Out::New(m2)],
    )?;
    let g = unary(em, aten::SIGMOID, parts[1])?;
    binary_into(em, a, aten::MUL_TENSOR, parts[0], g, dtype)
}

fn hardshrink(em: &mut Emitter, a: &NodeArgs) -> Result<Vec<ValueId>> {
    let x = a.tensor("self")?;
    let dtype = em.dtype(x)?;
    let ab = unary(em, aten::ABS, x)?;
    let small = cmp(em, aten::LE_SCALAR, ab, a.arg("lambd"))?;
    let zero = scalar_tensor(em, x, scalar(0.0, dtype), dtype)?;
    Ok(vec![where_(em, small, zero, x, Some(a.out(0)?))?])
}

fn softshrink(em: &mut Emitter, a: &NodeArgs) -> Result<Vec<ValueId>> {
    let x = a.tensor("self")?;
    let dtype = em.dtype(x)?;
    let l = a.float("lambd")?;
    let hi = cmp(em, aten::GT_SCALAR, x, Argument::Float(l))?;
    let lo = cmp(em, aten::LT_SCALAR, x, Argument::Float(-l))?;
    let minus = with_scalar(em, aten::SUB_TENSOR, x, Argument::Float(l))?;
    let plus = with_scalar(em, aten::ADD_TENSOR, x, Argument::Float(l))?;
    let zero = scalar_tensor(em, x, scalar(0.0, dtype), dtype)?;
    let inner = where_(em, lo, plus, zero, None)?;
    Ok(vec![where_(em, hi, minus, inner, Some(a.out(0)?))?])
}

fn threshold(em: &mut Emitter, a: &NodeArgs) -> Result<Vec<ValueId>> {
    let x = a.tensor("self")?;
    let dtype = em.dtype(x)?;
    let below = cmp(em, aten::LE_SCALAR, x, a.arg("threshold"))?;
    let value = scalar_tensor(em, x, a.arg("value"), dtype)?;
    Ok(vec![where_(em, below, value, x, Some(a.out(0)?))?])
}

fn log_sigmoid(em: &mut Emitter, a: &NodeArgs) -> Result<Vec<ValueId>> {
    // min(x, 0) - log1p(exp(-|x|))
    let x = a.tensor("self")?;
    let ab = unary(em, aten::ABS, x)?;
    let n = unary(em, aten::NEG, ab)?;
    let e = unary(em, aten::EXP, n)?;
    let l = unary(em, aten::LOG1P, e)?;
    let dtype = em.dtype(x)?;
    let m = same(
        em,
        aten::CLAMP,
        vec![("self", Argument::Tensor(x)), ("max", scalar(0.0, dtype))],
        x,
        None,
    )?;
    binary_into(em, a, aten::SUB_TENSOR, m, l, dtype)
}

fn logit(em: &mut Emitter, a: &NodeArgs) -> Result<Vec<ValueId>> {
    let mut x = a.tensor("self")?;
    let dtype = em.dtype(x)?;
    if let Some(eps) = a.opt_float("eps")? {
        x = same(
            em,
            aten::CLAMP,
            vec![
                ("self", Argument::Tensor(x)),
                ("min", Argument::Float(eps)),
                ("max", Argument::Float(1.0 - eps)),
            ],
            x,
            None,
        )?;
    }
    let n = unary(em, aten::NEG, x)?;
    let one_minus = with_scalar(em, aten::ADD_TENSOR, n, Argument::Float(1.0))?;
    let q = binary(em, aten::DIV_TENSOR, x, one_minus, dtype, None)?;
    Ok(vec![same(
        em,
        aten::LOG,
        vec![("self", Argument::Tensor(q))],
        x,
        Some(a.out(0)?),
    )?])
}

fn prelu(em: &mut Emitter, a: &NodeArgs) -> Result<Vec<ValueId>> {
    let (x, w) = (a.tensor("self")?, a.tensor("weight")?);
    let dtype = em.dtype(x)?;
    let r = em.rank(x)?;
    let nw = em.static_sizes(w, "prelu")?.iter().product::<i64>();
    let w = if nw > 1 && r >= 2 {
        let mut shape = vec![SymRef::Int(nw)];
        shape.extend(std::iter::repeat_n(SymRef::Int(1), r - 2));
        view(em, w, &shape, None)?
    } else {
        w
    };
    let scaled = binary(em, aten::MUL_TENSOR, w, x, dtype, None)?;
    let pos = cmp(em, aten::GT_SCALAR, x, scalar(0.0, dtype))?;
    Ok(vec![where_(em, pos, x, scaled, Some(a.out(0)?))?])
}

fn rrelu(em: &mut Emitter, a: &NodeArgs) -> Result<Vec<ValueId>> {
    if a.bool("training")? {
        return Err(Error::unsupported(format!(
            "node {}: rrelu in training mode is random",
            a.0.name
        )));
    }
    let slope = (a.float("lower")? + a.float("upper")?) / 2.0;
    em.op_into(
        aten::LEAKY_RELU,
        vec![
            ("self", Argument::Tensor(a.tensor("self")?)),
            ("negative_slope", Argument::Float(slope)),
        ],
        a.out(0)?,
    )?;
    // rrelu_with_noise_functional also returns the noise, untouched in eval.
    let mut outs = vec![a.out(0)?];
    if a.0.target.name == "rrelu_with_noise_functional" {
        outs.push(a.tensor("noise")?);
    }
    Ok(outs)
}

rules! {
    aten::SOFTMAX_INT => [aten::_SOFTMAX, aten::_TO_COPY] softmax;
    aten::LOG_SOFTMAX_INT => [aten::_LOG_SOFTMAX, aten::_TO_COPY] log_softmax;
    aten::SILU => [aten::SIGMOID, aten::MUL_TENSOR] silu;
    aten::HARDSWISH => [aten::ADD_TENSOR, aten::CLAMP, aten::MUL_TENSOR, aten::DIV_TENSOR] hardswish;
    aten::HARDSIGMOID => [aten::ADD_TENSOR, aten::CLAMP, aten::DIV_TENSOR] hardsigmoid;
    aten::RELU6 => [aten::HARDTANH] relu6;
    aten::SOFTPLUS => [aten::MUL_TENSOR, aten::EXP, aten::LOG1P, aten::DIV_TENSOR, aten::GT_SCALAR, aten::WHERE_SELF] softplus;
    aten::MISH => [aten::SOFTPLUS, aten::TANH, aten::MUL_TENSOR] mish;
    aten::SELU => [aten::ELU] selu;
    aten::RRELU_WITH_NOISE_FUNCTIONAL => [aten::LEAKY_RELU] rrelu;
    aten::RRELU => [aten::LEAKY_RELU] rrelu;
    aten::CELU => [aten::ELU] celu;
    aten::GLU => [aten::SPLIT_WITH_SIZES, aten::SIGMOID, aten::MUL_TENSOR] glu;
    aten::HARDSHRINK => [aten::ABS, aten::LE_SCALAR, aten::SCALAR_TENSOR, aten::WHERE_SELF] hardshrink;
    aten::SOFTSHRINK => [aten::GT_SCALAR, aten::LT_SCALAR, aten::SUB_TENSOR, aten::ADD_TENSOR, aten::SCALAR_TENSOR, aten::WHERE_SELF] softshrink;
    aten::THRESHOLD => [aten::LE_SCALAR, aten::SCALAR_TENSOR, aten::WHERE_SELF] threshold;
    aten::LOG_SIGMOID => [aten::ABS, aten::NEG, aten::EXP, aten::LOG1P, aten::CLAMP, aten::SUB_TENSOR] log_sigmoid;
    aten::LOGIT => [aten::CLAMP, aten::NEG, aten::ADD_TENSOR, aten::DIV_TENSOR, aten::LOG] logit;
    aten::PRELU => [aten::VIEW, aten::MUL_TENSOR, aten::GT_SCALAR, aten::WHERE_SELF] prelu;
}

/// Ops that are another op of this family under another name.
pub(super) const ALIASES: &[(&str, &str)] = &[];
