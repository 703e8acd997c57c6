//! Symbolic scalars: sym_size, Python operators on SymInts, asserts: the shape rules (none yet: their outputs meet the limits).

use super::*;

/// This family's rows: op identity -> rule.
pub(super) const ROWS: &[(&str, ShapeRule)] = &[];
