//! Tensor creation (full, zeros, arange, scalar_tensor, empty, ...): the decomposition rules.

use super::*;

fn arange(em: &mut Emitter, a: &NodeArgs) -> Result<Vec<ValueId>> {
    let out = a.out(0)?;
    let start = if a.0.target.overload == "start" {
        a.arg("start")
    } else {
        Argument::Int(0)
    };
    let dtype = em.dtype(out)?;
    em.op_into(
        "aten.arange.start_step",
        vec![
            ("start", start),
            ("end", a.arg("end")),
            ("step", Argument::Int(1)),
            ("dtype", Argument::ScalarType(dtype)),
            ("layout", a.arg("layout")),
            ("device", a.arg("device")),
            ("pin_memory", a.arg("pin_memory")),
        ],
        out,
    )?;
    Ok(vec![out])
}

fn full_of(em: &mut Emitter, a: &NodeArgs) -> Result<Vec<ValueId>> {
    let out = a.out(0)?;
    let dtype = em.dtype(out)?;
    let value = match a.0.target.name.as_str() {
        "zeros" | "new_zeros" => scalar(0.0, dtype),
        "ones" | "new_ones" => scalar(1.0, dtype),
        _ => a.arg("fill_value"),
    };
    let sizes = a.syms("size")?;
    em.op_into(
        "aten.full.default",
        vec![
            ("size", sym_ints_arg(&sizes)),
            ("fill_value", value),
            ("dtype", Argument::ScalarType(dtype)),
            ("layout", a.arg("layout")),
            (
                "device",
                if a.has("device") {
                    a.arg("device")
                } else {
                    Argument::Device(em.meta(out)?.device.clone())
                },
            ),
            ("pin_memory", Argument::Bool(false)),
        ],
        out,
    )?;
    Ok(vec![out])
}

fn full_like_of(em: &mut Emitter, a: &NodeArgs) -> Result<Vec<ValueId>> {
    let out = a.out(0)?;
    let dtype = em.dtype(out)?;
    let value = scalar(
        if a.0.target.name == "ones_like" {
            1.0
        } else {
            0.0
        },
        dtype,
    );
    Ok(vec![full_like(em, a.t("self")?, value, dtype, Some(out))?])
}

pub(super) fn fill(em: &mut Emitter, a: &NodeArgs) -> Result<Vec<ValueId>> {
    let out = a.out(0)?;
    let dtype = em.dtype(out)?;
    let value = if a.0.target.name == "zero" {
        scalar(0.0, dtype)
    } else {
        a.arg("value")
    };
    Ok(vec![full_like(em, a.t("self")?, value, dtype, Some(out))?])
}

fn eye(em: &mut Emitter, a: &NodeArgs) -> Result<Vec<ValueId>> {
    let out = a.out(0)?;
    let s = em.static_sizes(out, "eye")?;
    let rows = arange_col(em, out, s[0], true)?;
    let cols = arange_col(em, out, s[1], false)?;
    let eq = binary(em, "aten.eq.Tensor", rows, cols, Dtype::Bool, None)?;
    let dtype = em.dtype(out)?;
    Ok(vec![to_copy(em, eq, dtype, Some(out))?])
}

fn empty_of(em: &mut Emitter, a: &NodeArgs) -> Result<Vec<ValueId>> {
    let out = a.out(0)?;
    // The values are unspecified, so a permuted physical layout is a
    // plain empty tensor of the same logical sizes.
    let sizes = if matches!(a.0.target.name.as_str(), "new_empty" | "empty_permuted") {
        a.syms("size")?
    } else {
        em.size_refs(a.t("self")?)?
    };
    let dtype = em.dtype(out)?;
    em.op_into(
        "aten.empty.memory_format",
        vec![
            ("size", sym_ints_arg(&sizes)),
            ("dtype", Argument::ScalarType(dtype)),
        ],
        out,
    )?;
    Ok(vec![out])
}

fn fill_tensor(em: &mut Emitter, a: &NodeArgs) -> Result<Vec<ValueId>> {
    let (x, v) = (a.t("self")?, a.t("value")?);
    let dtype = em.dtype(x)?;
    let v = if em.dtype(v)? != dtype {
        to_copy(em, v, dtype, None)?
    } else {
        v
    };
    let sizes = em.size_refs(x)?;
    let e = expand(em, v, &sizes)?;
    Ok(vec![clone(em, e, Some(a.out(0)?))?])
}

/// torch's linspace: the first half counted up from start, the second
/// down from end, so both ends are exact.
fn linspace(em: &mut Emitter, a: &NodeArgs) -> Result<Vec<ValueId>> {
    let out = a.out(0)?;
    let (start, end, steps) = (a.float("start")?, a.float("end")?, a.int("steps")?);
    let dtype = em.dtype(out)?;
    let step = if steps > 1 {
        (end - start) / (steps - 1) as f64
    } else {
        0.0
    };
    let i = arange_col(em, out, steps, false)?;
    let fi = to_copy(em, i, Dtype::Float64, None)?;
    let up = with_scalar(em, "aten.mul.Tensor", fi, Argument::Float(step))?;
    let up = with_scalar(em, "aten.add.Tensor", up, Argument::Float(start))?;
    let back = with_scalar(
        em,
        "aten.sub.Tensor",
        fi,
        Argument::Float((steps - 1) as f64),
    )?;
    let down = with_scalar(em, "aten.mul.Tensor", back, Argument::Float(step))?;
    let down = with_scalar(em, "aten.add.Tensor", down, Argument::Float(end))?;
    let first = cmp(em, "aten.lt.Scalar", i, Argument::Int(steps / 2))?;
    let v = where_(em, first, up, down, None)?;
    Ok(vec![to_copy(em, v, dtype, Some(out))?])
}

/// torch's `hamming_window` (and `hann_window`, alpha = beta = 0.5):
/// `alpha - beta * cos(2 pi n / (N - 1))`, over `N + 1` points when
/// periodic with the last dropped; one point is `[1]`.
fn window(em: &mut Emitter, a: &NodeArgs) -> Result<Vec<ValueId>> {
    let out = a.out(0)?;
    let n = a.int("window_length")?;
    let periodic = !a.has("periodic") || a.bool("periodic")?;
    let hann = a.0.target.name == "hann_window";
    let alpha = if hann { 0.5 } else { a.opt_float("alpha")?.unwrap_or(0.54) };
    let beta = if hann { 0.5 } else { a.opt_float("beta")?.unwrap_or(0.46) };
    let dtype = em.dtype(out)?;
    if n <= 1 {
        return Ok(vec![em.op_into(
            "aten.full.default",
            vec![
                ("size", Argument::SymInts(vec![SymRef::Int(n.max(0))])),
                ("fill_value", Argument::Float(1.0)),
                ("dtype", Argument::ScalarType(dtype)),
            ],
            out,
        )?]);
    }
    let points = if periodic { n + 1 } else { n };
    let i = arange_to(em, out, n, 1, dtype)?;
    let t = with_scalar(
        em,
        "aten.mul.Tensor",
        i,
        Argument::Float(std::f64::consts::PI * 2.0 / (points - 1) as f64),
    )?;
    let c = unary(em, "aten.cos.default", t)?;
    let c = with_scalar(em, "aten.mul.Tensor", c, Argument::Float(-beta))?;
    Ok(vec![em.op_into(
        "aten.add.Tensor",
        vec![("self", Argument::Tensor(c)), ("other", Argument::Float(alpha))],
        out,
    )?])
}

rules! {
    "aten.hann_window.default" => ["aten.arange.start_step", "aten.mul.Tensor", "aten.cos.default", "aten.add.Tensor", "aten.full.default"] window;
    "aten.hann_window.periodic" => ["aten.arange.start_step", "aten.mul.Tensor", "aten.cos.default", "aten.add.Tensor", "aten.full.default"] window;
    "aten.hamming_window.default" => ["aten.arange.start_step", "aten.mul.Tensor", "aten.cos.default", "aten.add.Tensor", "aten.full.default"] window;
    "aten.hamming_window.periodic" => ["aten.arange.start_step", "aten.mul.Tensor", "aten.cos.default", "aten.add.Tensor", "aten.full.default"] window;
    "aten.hamming_window.periodic_alpha" => ["aten.arange.start_step", "aten.mul.Tensor", "aten.cos.default", "aten.add.Tensor", "aten.full.default"] window;
    "aten.hamming_window.periodic_alpha_beta" => ["aten.arange.start_step", "aten.mul.Tensor", "aten.cos.default", "aten.add.Tensor", "aten.full.default"] window;
    "aten.arange.default" => ["aten.arange.start_step"] arange;
    "aten.arange.start" => ["aten.arange.start_step"] arange;
    "aten.zeros.default" => ["aten.full.default"] full_of;
    "aten.ones.default" => ["aten.full.default"] full_of;
    "aten.new_zeros.default" => ["aten.full.default"] full_of;
    "aten.new_ones.default" => ["aten.full.default"] full_of;
    "aten.new_full.default" => ["aten.full.default"] full_of;
    "aten.zeros_like.default" => ["aten.full_like.default"] full_like_of;
    "aten.ones_like.default" => ["aten.full_like.default"] full_like_of;
    "aten.empty_permuted.default" => ["aten.empty.memory_format"] empty_of;
    "aten.fill.Scalar" => ["aten.full_like.default"] fill;
    "aten.eye.default" => ["aten.arange.start_step", "aten.unsqueeze.default", "aten.eq.Tensor", "aten._to_copy.default"] eye;
    "aten.eye.m" => ["aten.arange.start_step", "aten.unsqueeze.default", "aten.eq.Tensor", "aten._to_copy.default"] eye;
    "aten.new_empty.default" => ["aten.empty.memory_format"] empty_of;
    "aten.empty_like.default" => ["aten.empty.memory_format"] empty_of;
    "aten.fill.Tensor" => ["aten.expand.default", "aten.clone.default", "aten._to_copy.default"] fill_tensor;
    "aten.linspace.default" => ["aten.arange.start_step", "aten.mul.Tensor", "aten.add.Tensor", "aten.where.self"] linspace;
    "aten.zero.default" => ["aten.full_like.default"] fill;
}

/// Ops that are another op of this family under another name.
pub(super) const ALIASES: &[(&str, &str)] =
    &[("prims.scalar_tensor.default", "aten.scalar_tensor.default")];
