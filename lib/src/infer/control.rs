//! Control flow: cond, while_loop, map and other higher-order ops: the shape rules (none yet: their outputs meet the limits).

use super::*;

/// This family's rows: op identity -> rule.
pub(super) const ROWS: &[(&str, Rule)] = &[];
