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
];
