//! Recurrent layers (LSTM, GRU, RNN) and their cells: the shape rules (none yet: their outputs meet the limits).

use super::*;

/// This family's rows: op identity -> rule.
pub(super) const ROWS: &[(&str, ShapeRule)] = &[];
