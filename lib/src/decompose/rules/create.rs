//! Tensor creation (full, zeros, arange, scalar_tensor, empty, ...): the decomposition rules.

use crate::ir::op::{aten, prims};
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
        aten::ARANGE_START_STEP,
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
        aten::FULL,
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
    Ok(vec![full_like(em, a.tensor("self")?, value, dtype, Some(out))?])
}

pub(super) fn fill(em: &mut Emitter, a: &NodeArgs) -> Result<Vec<ValueId>> {
    let out = a.out(0)?;
    let dtype = em.dtype(out)?;
    let value = if a.0.target.name == "zero" {
        scalar(0.0, dtype)
    } else {
        a.arg("value")
    };
    Ok(vec![full_like(em, a.tensor("self")?, value, dtype, Some(out))?])
}

fn eye(em: &mut Emitter, a: &NodeArgs) -> Result<Vec<ValueId>> {
    let out = a.out(0)?;
    let s = em.static_sizes(out, "eye")?;
    let rows = arange_col(em, out, s[0], true)?;
    let cols = arange_col(em, out, s[1], false)?;
    let eq = binary(em, aten::EQ_TENSOR, rows, cols, Dtype::Bool, None)?;
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
        em.size_refs(a.tensor("self")?)?
    };
    let dtype = em.dtype(out)?;
    em.op_into(
        aten::EMPTY_MEMORY_FORMAT,
        vec![
            ("size", sym_ints_arg(&sizes)),
            ("dtype", Argument::ScalarType(dtype)),
        ],
        out,
    )?;
    Ok(vec![out])
}

fn fill_tensor(em: &mut Emitter, a: &NodeArgs) -> Result<Vec<ValueId>> {
    let (x, v) = (a.tensor("self")?, a.tensor("value")?);
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
    let up = with_scalar(em, aten::MUL_TENSOR, fi, Argument::Float(step))?;
    let up = with_scalar(em, aten::ADD_TENSOR, up, Argument::Float(start))?;
    let back = with_scalar(
        em,
        aten::SUB_TENSOR,
        fi,
        Argument::Float((steps - 1) as f64),
    )?;
    let down = with_scalar(em, aten::MUL_TENSOR, back, Argument::Float(step))?;
    let down = with_scalar(em, aten::ADD_TENSOR, down, Argument::Float(end))?;
    let first = cmp(em, aten::LT_SCALAR, i, Argument::Int(steps / 2))?;
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
            aten::FULL,
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
        aten::MUL_TENSOR,
        i,
        Argument::Float(std::f64::consts::PI * 2.0 / (points - 1) as f64),
    )?;
    let c = unary(em, aten::COS, t)?;
    let c = with_scalar(em, aten::MUL_TENSOR, c, Argument::Float(-beta))?;
    Ok(vec![em.op_into(
        aten::ADD_TENSOR,
        vec![("self", Argument::Tensor(c)), ("other", Argument::Float(alpha))],
        out,
    )?])
}

rules! {
    aten::HANN_WINDOW => [aten::ARANGE_START_STEP, aten::MUL_TENSOR, aten::COS, aten::ADD_TENSOR, aten::FULL] window;
    aten::HANN_WINDOW_PERIODIC => [aten::ARANGE_START_STEP, aten::MUL_TENSOR, aten::COS, aten::ADD_TENSOR, aten::FULL] window;
    aten::HAMMING_WINDOW => [aten::ARANGE_START_STEP, aten::MUL_TENSOR, aten::COS, aten::ADD_TENSOR, aten::FULL] window;
    aten::HAMMING_WINDOW_PERIODIC => [aten::ARANGE_START_STEP, aten::MUL_TENSOR, aten::COS, aten::ADD_TENSOR, aten::FULL] window;
    aten::HAMMING_WINDOW_PERIODIC_ALPHA => [aten::ARANGE_START_STEP, aten::MUL_TENSOR, aten::COS, aten::ADD_TENSOR, aten::FULL] window;
    aten::HAMMING_WINDOW_PERIODIC_ALPHA_BETA => [aten::ARANGE_START_STEP, aten::MUL_TENSOR, aten::COS, aten::ADD_TENSOR, aten::FULL] window;
    aten::ARANGE => [aten::ARANGE_START_STEP] arange;
    aten::ARANGE_START => [aten::ARANGE_START_STEP] arange;
    aten::ZEROS => [aten::FULL] full_of;
    aten::ONES => [aten::FULL] full_of;
    aten::NEW_ZEROS => [aten::FULL] full_of;
    aten::NEW_ONES => [aten::FULL] full_of;
    aten::NEW_FULL => [aten::FULL] full_of;
    aten::ZEROS_LIKE => [aten::FULL_LIKE] full_like_of;
    aten::ONES_LIKE => [aten::FULL_LIKE] full_like_of;
    aten::EMPTY_PERMUTED => [aten::EMPTY_MEMORY_FORMAT] empty_of;
    aten::FILL_SCALAR => [aten::FULL_LIKE] fill;
    aten::EYE => [aten::ARANGE_START_STEP, aten::UNSQUEEZE, aten::EQ_TENSOR, aten::_TO_COPY] eye;
    aten::EYE_M => [aten::ARANGE_START_STEP, aten::UNSQUEEZE, aten::EQ_TENSOR, aten::_TO_COPY] eye;
    aten::NEW_EMPTY => [aten::EMPTY_MEMORY_FORMAT] empty_of;
    aten::EMPTY_LIKE => [aten::EMPTY_MEMORY_FORMAT] empty_of;
    aten::FILL_TENSOR => [aten::EXPAND, aten::CLONE, aten::_TO_COPY] fill_tensor;
    aten::LINSPACE => [aten::ARANGE_START_STEP, aten::MUL_TENSOR, aten::ADD_TENSOR, aten::WHERE_SELF] linspace;
    aten::ZERO => [aten::FULL_LIKE] fill;
}

/// Ops that are another op of this family under another name.
pub(super) const ALIASES: &[(&str, &str)] =
    &[(prims::SCALAR_TENSOR, aten::SCALAR_TENSOR)];
