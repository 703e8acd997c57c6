//! Activation functions (relu, gelu, hardswish, softmax, ...): the shape rules.

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
pub(super) const ROWS: &[(&str, Rule)] = &[
    ("aten.relu.default", same), ("aten.relu_.default", same), ("aten.sigmoid.default", same),
    ("aten.silu.default", same), ("aten.silu_.default", same), ("aten.gelu.default", same),
    ("aten.hardtanh.default", same), ("aten.hardtanh_.default", same),
    ("aten.hardswish.default", same), ("aten.hardswish_.default", same),
    ("aten.hardsigmoid.default", same), ("aten.elu.default", same),
    ("aten.leaky_relu.default", same),
    ("aten._softmax.default", softmax), ("aten.softmax.int", softmax),
    ("aten._log_softmax.default", softmax), ("aten.log_softmax.int", softmax),
];
