//! Identities, copies, casts, clones and aliasing views: the shape rules.

use crate::ir::op::aten;
use super::pointwise::same;
use super::*;

/// dropout and its kin (as identities in eval, a mask in training): the
/// input's shape.
fn dropout(site: &Site) -> Result<Vec<Out>> {
    let p = site.args.float("p")?;
    if !(0.0..=1.0).contains(&p) {
        return Err(site.fail("p", format!("is {p}, must be in [0, 1]")));
    }
    // the in-place forms (`dropout_`) name it `self`
    let input = if site.args.has("input") { "input" } else { "self" };
    Ok(vec![Out::dims(site.dims(input)?)])
}

/// type_as / to.other: `self`'s shape in `other`'s dtype.
fn as_other(site: &Site) -> Result<Vec<Out>> {
    Ok(vec![Out {
        dims: Some(site.dims("self")?),
        dtype: Some(site.dtype("other")?),
    }])
}

/// This family's rows: op identity -> rule.
#[rustfmt::skip]
pub(super) const ROWS: &[(&str, ShapeRule)] = &[
    (aten::CLONE, same), (aten::CONTIGUOUS, same),
    (aten::DETACH, same), (aten::ALIAS, same), (aten::LIFT_FRESH_COPY, same),
    (aten::_TO_COPY, same), (aten::TO_DTYPE, same), (aten::TO_DTYPE_LAYOUT, same),
    (aten::TO_DEVICE, same), (aten::COPY, same),
    (aten::DROPOUT, dropout), (aten::FEATURE_DROPOUT, dropout), (aten::ALPHA_DROPOUT, dropout),
    (aten::TYPE_AS, as_other), (aten::TO_OTHER, as_other),
];
