//! Activation functions (relu, gelu, hardswish, softmax, ...): the decomposition rules.

use super::*;

fn softmax_like(em: &mut Emitter, a: &NodeArgs, op: &str) -> Result<Vec<ValueId>> {
    let mut x = a.t("self")?;
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
    softmax_like(em, a, "aten._softmax.default")
}

fn log_softmax(em: &mut Emitter, a: &NodeArgs) -> Result<Vec<ValueId>> {
    softmax_like(em, a, "aten._log_softmax.default")
}

fn silu(em: &mut Emitter, a: &NodeArgs) -> Result<Vec<ValueId>> {
    let x = a.t("self")?;
    let s = unary(em, "aten.sigmoid.default", x)?;
    let dtype = em.dtype(x)?;
    binary_into(em, a, "aten.mul.Tensor", x, s, dtype)
}

/// `clamp(x + 3, 0, 6)`, and the output's meta.
fn relu6_of_x_plus_3(em: &mut Emitter, x: ValueId) -> Result<(ValueId, TensorMeta)> {
    let dtype = em.dtype(x)?;
    let p = with_scalar(em, "aten.add.Tensor", x, scalar(3.0, dtype))?;
    let sizes = em.sizes(x)?;
    let meta = em.meta_like(x, dtype, sizes)?;
    let c = em.op(
        "aten.clamp.default",
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
        "aten.div.Tensor",
        vec![("self", Argument::Tensor(v)), ("other", scalar(6.0, dtype))],
        out,
        meta,
    )
}

/// torch's `x * clamp(x + 3, 0, 6) / 6`, in that order (a product, then a
/// division: `x * (clamp / 6)` rounds differently).
fn hardswish(em: &mut Emitter, a: &NodeArgs) -> Result<Vec<ValueId>> {
    let x = a.t("self")?;
    let (c, meta) = relu6_of_x_plus_3(em, x)?;
    let m = em.op(
        "aten.mul.Tensor",
        vec![("self", Argument::Tensor(x)), ("other", Argument::Tensor(c))],
        meta.clone(),
    )?;
    Ok(vec![sixth(em, m, meta, Some(a.out(0)?))?])
}

fn hardsigmoid(em: &mut Emitter, a: &NodeArgs) -> Result<Vec<ValueId>> {
    let x = a.t("self")?;
    let (c, meta) = relu6_of_x_plus_3(em, x)?;
    Ok(vec![sixth(em, c, meta, Some(a.out(0)?))?])
}

fn relu6(em: &mut Emitter, a: &NodeArgs) -> Result<Vec<ValueId>> {
    let x = a.t("self")?;
    let dtype = em.dtype(x)?;
    em.op_into(
        "aten.hardtanh.default",
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
    let x = a.t("self")?;
    let dtype = em.dtype(x)?;
    let beta = a.float("beta")?;
    let xb = with_scalar(em, "aten.mul.Tensor", x, Argument::Float(beta))?;
    let ex = unary(em, "aten.exp.default", xb)?;
    let l = unary(em, "aten.log1p.default", ex)?;
    let soft = with_scalar(em, "aten.div.Tensor", l, Argument::Float(beta))?;
    let sizes = em.sizes(x)?;
    let meta = em.meta_like(x, Dtype::Bool, sizes)?;
    let big = em.op(
        "aten.gt.Scalar",
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
    let x = a.t("self")?;
    let dtype = em.dtype(x)?;
    let sizes = em.sizes(x)?;
    let meta = em.meta_like(x, dtype, sizes)?;
    let sp = em.op(
        "aten.softplus.default",
        vec![("self", Argument::Tensor(x))],
        meta,
    )?;
    let t = unary(em, "aten.tanh.default", sp)?;
    binary_into(em, a, "aten.mul.Tensor", x, t, dtype)
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
        "aten.elu.default",
        vec![
            ("self", Argument::Tensor(a.t("self")?)),
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
    let x = a.t("self")?;
    let d = normalize_dim(a.int("dim")?, em.rank(x)?)?;
    let n = em.static_dim(x, d, "glu")?;
    let mut half = em.sizes(x)?;
    half[d] = Sym::Int(n / 2);
    let dtype = em.dtype(x)?;
    let m1 = em.meta_like(x, dtype, half.clone())?;
    let m2 = em.meta_like(x, dtype, half)?;
    let parts = em.call(
        "aten.split_with_sizes.default",
        vec![
            ("self", Argument::Tensor(x)),
            ("split_sizes", ints_arg(&[n / 2, n / 2])),
            ("dim", Argument::Int(d as i64)),
        ],
        vec![Out::New(m1), Out::New(m2)],
    )?;
    let g = unary(em, "aten.sigmoid.default", parts[1])?;
    binary_into(em, a, "aten.mul.Tensor", parts[0], g, dtype)
}

fn hardshrink(em: &mut Emitter, a: &NodeArgs) -> Result<Vec<ValueId>> {
    let x = a.t("self")?;
    let dtype = em.dtype(x)?;
    let ab = unary(em, "aten.abs.default", x)?;
    let small = cmp(em, "aten.le.Scalar", ab, a.arg("lambd"))?;
    let zero = scalar_tensor(em, x, scalar(0.0, dtype), dtype)?;
    Ok(vec![where_(em, small, zero, x, Some(a.out(0)?))?])
}

fn softshrink(em: &mut Emitter, a: &NodeArgs) -> Result<Vec<ValueId>> {
    let x = a.t("self")?;
    let dtype = em.dtype(x)?;
    let l = a.float("lambd")?;
    let hi = cmp(em, "aten.gt.Scalar", x, Argument::Float(l))?;
    let lo = cmp(em, "aten.lt.Scalar", x, Argument::Float(-l))?;
    let minus = with_scalar(em, "aten.sub.Tensor", x, Argument::Float(l))?;
    let plus = with_scalar(em, "aten.add.Tensor", x, Argument::Float(l))?;
    let zero = scalar_tensor(em, x, scalar(0.0, dtype), dtype)?;
    let inner = where_(em, lo, plus, zero, None)?;
    Ok(vec![where_(em, hi, minus, inner, Some(a.out(0)?))?])
}

fn threshold(em: &mut Emitter, a: &NodeArgs) -> Result<Vec<ValueId>> {
    let x = a.t("self")?;
    let dtype = em.dtype(x)?;
    let below = cmp(em, "aten.le.Scalar", x, a.arg("threshold"))?;
    let value = scalar_tensor(em, x, a.arg("value"), dtype)?;
    Ok(vec![where_(em, below, value, x, Some(a.out(0)?))?])
}

fn log_sigmoid(em: &mut Emitter, a: &NodeArgs) -> Result<Vec<ValueId>> {
    // min(x, 0) - log1p(exp(-|x|))
    let x = a.t("self")?;
    let ab = unary(em, "aten.abs.default", x)?;
    let n = unary(em, "aten.neg.default", ab)?;
    let e = unary(em, "aten.exp.default", n)?;
    let l = unary(em, "aten.log1p.default", e)?;
    let dtype = em.dtype(x)?;
    let m = same(
        em,
        "aten.clamp.default",
        vec![("self", Argument::Tensor(x)), ("max", scalar(0.0, dtype))],
        x,
        None,
    )?;
    binary_into(em, a, "aten.sub.Tensor", m, l, dtype)
}

fn logit(em: &mut Emitter, a: &NodeArgs) -> Result<Vec<ValueId>> {
    let mut x = a.t("self")?;
    let dtype = em.dtype(x)?;
    if let Some(eps) = a.opt_float("eps")? {
        x = same(
            em,
            "aten.clamp.default",
            vec![
                ("self", Argument::Tensor(x)),
                ("min", Argument::Float(eps)),
                ("max", Argument::Float(1.0 - eps)),
            ],
            x,
            None,
        )?;
    }
    let n = unary(em, "aten.neg.default", x)?;
    let one_minus = with_scalar(em, "aten.add.Tensor", n, Argument::Float(1.0))?;
    let q = binary(em, "aten.div.Tensor", x, one_minus, dtype, None)?;
    Ok(vec![same(
        em,
        "aten.log.default",
        vec![("self", Argument::Tensor(q))],
        x,
        Some(a.out(0)?),
    )?])
}

fn prelu(em: &mut Emitter, a: &NodeArgs) -> Result<Vec<ValueId>> {
    let (x, w) = (a.t("self")?, a.t("weight")?);
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
    let scaled = binary(em, "aten.mul.Tensor", w, x, dtype, None)?;
    let pos = cmp(em, "aten.gt.Scalar", x, scalar(0.0, dtype))?;
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
        "aten.leaky_relu.default",
        vec![
            ("self", Argument::Tensor(a.t("self")?)),
            ("negative_slope", Argument::Float(slope)),
        ],
        a.out(0)?,
    )?;
    // rrelu_with_noise_functional also returns the noise, untouched in eval.
    let mut outs = vec![a.out(0)?];
    if a.0.target.name == "rrelu_with_noise_functional" {
        outs.push(a.t("noise")?);
    }
    Ok(outs)
}

rules! {
    "aten.softmax.int" => ["aten._softmax.default", "aten._to_copy.default"] softmax;
    "aten.log_softmax.int" => ["aten._log_softmax.default", "aten._to_copy.default"] log_softmax;
    "aten.silu.default" => ["aten.sigmoid.default", "aten.mul.Tensor"] silu;
    "aten.hardswish.default" => ["aten.add.Tensor", "aten.clamp.default", "aten.mul.Tensor", "aten.div.Tensor"] hardswish;
    "aten.hardsigmoid.default" => ["aten.add.Tensor", "aten.clamp.default", "aten.div.Tensor"] hardsigmoid;
    "aten.relu6.default" => ["aten.hardtanh.default"] relu6;
    "aten.softplus.default" => ["aten.mul.Tensor", "aten.exp.default", "aten.log1p.default", "aten.div.Tensor", "aten.gt.Scalar", "aten.where.self"] softplus;
    "aten.mish.default" => ["aten.softplus.default", "aten.tanh.default", "aten.mul.Tensor"] mish;
    "aten.selu.default" => ["aten.elu.default"] selu;
    "aten.rrelu_with_noise_functional.default" => ["aten.leaky_relu.default"] rrelu;
    "aten.rrelu.default" => ["aten.leaky_relu.default"] rrelu;
    "aten.celu.default" => ["aten.elu.default"] celu;
    "aten.glu.default" => ["aten.split_with_sizes.default", "aten.sigmoid.default", "aten.mul.Tensor"] glu;
    "aten.hardshrink.default" => ["aten.abs.default", "aten.le.Scalar", "aten.scalar_tensor.default", "aten.where.self"] hardshrink;
    "aten.softshrink.default" => ["aten.gt.Scalar", "aten.lt.Scalar", "aten.sub.Tensor", "aten.add.Tensor", "aten.scalar_tensor.default", "aten.where.self"] softshrink;
    "aten.threshold.default" => ["aten.le.Scalar", "aten.scalar_tensor.default", "aten.where.self"] threshold;
    "aten.log_sigmoid.default" => ["aten.abs.default", "aten.neg.default", "aten.exp.default", "aten.log1p.default", "aten.clamp.default", "aten.sub.Tensor"] log_sigmoid;
    "aten.logit.default" => ["aten.clamp.default", "aten.neg.default", "aten.add.Tensor", "aten.div.Tensor", "aten.log.default"] logit;
    "aten.prelu.default" => ["aten.view.default", "aten.mul.Tensor", "aten.gt.Scalar", "aten.where.self"] prelu;
}

/// Ops that are another op of this family under another name.
pub(super) const ALIASES: &[(&str, &str)] = &[];
