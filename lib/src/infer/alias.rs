//! Identities, copies, casts, clones and aliasing views: the shape rules.

use super::pointwise::same;
use super::*;

/// This family's rows: op identity -> rule.
#[rustfmt::skip]
pub(super) const ROWS: &[(&str, Rule)] = &[
    ("aten.clone.default", same), ("aten.contiguous.default", same),
    ("aten.detach.default", same), ("aten.alias.default", same),
];
