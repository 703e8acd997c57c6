//! Activation functions (relu, gelu, hardswish, softmax, ...): the shape rules.

use crate::ir::op::aten;
use super::pointwise::same;
use super::*;

/// softmax-like: `dim` in range, the input's shape.
fn softmax(site: &Site) -> Result<Vec<Out>> {
    let dims = site.dims("self")?;
    site.dim_index("dim", site.args.int("dim")?, dims.len())?;
    Ok(vec![Out::dims(dims)])
}

/// glu: `dim` in range and even; it halves.
fn glu(site: &Site) -> Result<Vec<Out>> {
    let mut dims = site.dims("self")?;
    if dims.is_empty() {
        return Err(site.fail("self", "is 0-d: glu halves a dim"));
    }
    let d = site.dim_index("dim", site.args.opt_int("dim")?.unwrap_or(-1), dims.len())?;
    if let Some(n) = dims[d] {
        if n % 2 != 0 {
            return Err(site.fail("self", format!("has {n} in dim {d}: glu halves it, so it must be even")));
        }
    }
    dims[d] = dims[d].map(|n| n / 2);
    Ok(vec![Out::dims(dims)])
}

/// prelu: one weight, or one per channel (dim 1).
fn prelu(site: &Site) -> Result<Vec<Out>> {
    let dims = site.dims("self")?;
    let w = site.dims("weight")?;
    let n: Option<i64> = w.iter().try_fold(1i64, |n, d| d.map(|d| n * d));
    if let (Some(n), Some(Some(c))) = (n, dims.get(1)) {
        if n != 1 && n != *c {
            return Err(site.fail("weight", format!("has {n} values for {c} channels (1 or one per channel)")));
        }
    }
    Ok(vec![Out::dims(dims)])
}

/// This family's rows: op identity -> rule.
#[rustfmt::skip]
pub(super) const ROWS: &[(&str, ShapeRule)] = &[
    (aten::RELU, same), (aten::SIGMOID, same),
    (aten::SILU, same), (aten::GELU, same),
    (aten::HARDTANH, same),
    (aten::HARDSWISH, same),
    (aten::HARDSIGMOID, same), (aten::ELU, same),
    (aten::LEAKY_RELU, same),
    (aten::_SOFTMAX, softmax), (aten::SOFTMAX_INT, softmax),
    (aten::_LOG_SOFTMAX, softmax), (aten::LOG_SOFTMAX_INT, softmax),
    (aten::RELU6, same), (aten::SOFTPLUS, same), (aten::MISH, same),
    (aten::SELU, same), (aten::CELU, same), (aten::THRESHOLD, same),
    (aten::HARDSHRINK, same), (aten::SOFTSHRINK, same), (aten::LOGIT, same),
    (aten::LOG_SIGMOID, same), (aten::GLU, glu), (aten::PRELU, prelu),
];
