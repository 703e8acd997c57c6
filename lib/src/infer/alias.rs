//! Identities, copies, casts, clones and aliasing views: the shape rules.

use super::pointwise::same;
use super::*;

/// This family's rows: op identity -> rule.
#[rustfmt::skip]
pub(super) const ROWS: &[(&str, Rule)] = &[
    ("aten.clone.default", same), ("aten.contiguous.default", same),
    ("aten.detach.default", same), ("aten.alias.default", same),
    ("aten.detach_.default", same), ("aten.lift_fresh_copy.default", same),
    ("aten._to_copy.default", same), ("aten.to.dtype", same), ("aten.to.dtype_layout", same),
    ("aten.to.device", same), ("aten.copy.default", same),
];
