//! Symbolic scalars: sym_size, Python operators on SymInts, asserts: the decomposition rules.

use super::*;

rules! {}

/// Ops that are another op of this family under another name.
pub(super) const ALIASES: &[(&str, &str)] = &[
    ("aten.size.int", "aten.sym_size.int"),
    ("aten.stride.int", "aten.sym_stride.int"),
    ("aten.item.default", "aten._local_scalar_dense.default"),
];
