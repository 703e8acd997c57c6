//! Symbolic scalars: sym_size, Python operators on SymInts, asserts: the decomposition rules.

use crate::ir::op::aten;
use super::*;

rules! {}

/// Ops that are another op of this family under another name.
pub(super) const ALIASES: &[(&str, &str)] = &[
    (aten::SIZE_INT, aten::SYM_SIZE_INT),
    (aten::STRIDE_INT, aten::SYM_STRIDE_INT),
    (aten::ITEM, aten::_LOCAL_SCALAR_DENSE),
];
