//! Identities, copies, casts, clones and aliasing views: the shape rules.

use crate::ir::op::aten;
use super::pointwise::same;
use super::*;

/// This family's rows: op identity -> rule.
#[rustfmt::skip]
pub(super) const ROWS: &[(&str, ShapeRule)] = &[
    (aten::CLONE, same), (aten::CONTIGUOUS, same),
    (aten::DETACH, same), (aten::ALIAS, same), (aten::LIFT_FRESH_COPY, same),
    (aten::_TO_COPY, same), (aten::TO_DTYPE, same), (aten::TO_DTYPE_LAYOUT, same),
    (aten::TO_DEVICE, same), (aten::COPY, same),
];
