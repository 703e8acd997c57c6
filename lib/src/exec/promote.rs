//! PyTorch's type promotion (`torch.result_type`) on logical dtypes.
//!
//! Operands rank by kind: tensors with dims, then zero-dim tensors, then
//! Python scalars. A lower-ranked operand changes the result only when its
//! category (bool < integer < floating) is higher; then a scalar brings the
//! default dtype of its category (int64, float32).

use crate::ir::Dtype;

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Rank {
    Scalar,
    ZeroDim,
    Dim,
}

pub fn category(d: Dtype) -> u8 {
    if d == Dtype::Bool {
        0
    } else if d.is_floating() {
        2
    } else {
        1
    }
}

/// `torch.promote_types` for two dtypes.
pub fn promote_types(a: Dtype, b: Dtype) -> Dtype {
    use Dtype::*;
    if a == b {
        return a;
    }
    let (ca, cb) = (category(a), category(b));
    if ca != cb {
        return if ca > cb { a } else { b };
    }
    match (a, b) {
        (Float16, BFloat16) | (BFloat16, Float16) => Float32,
        _ if ca == 2 => {
            if a.size() >= b.size() {
                a
            } else {
                b
            }
        }
        (Uint8, Int8) | (Int8, Uint8) => Int16,
        _ => {
            let signed = |d: Dtype| !matches!(d, Uint8 | Uint16 | Uint32 | Uint64);
            match (signed(a), signed(b)) {
                (true, true) | (false, false) => {
                    if a.size() >= b.size() {
                        a
                    } else {
                        b
                    }
                }
                _ => {
                    let (s, u) = if signed(a) { (a, b) } else { (b, a) };
                    if s.size() > u.size() {
                        s
                    } else {
                        match u.size() {
                            1 => Int16,
                            2 => Int32,
                            _ => Int64,
                        }
                    }
                }
            }
        }
    }
}

/// `torch.result_type` over operands.
pub fn result_type(operands: &[(Dtype, Rank)]) -> Dtype {
    let mut best: Option<(Dtype, Rank)> = None;
    for &(d, r) in operands {
        let d = if r == Rank::Scalar {
            match category(d) {
                0 => Dtype::Bool,
                1 => Dtype::Int64,
                _ => Dtype::Float32,
            }
        } else {
            d
        };
        best = Some(match best {
            None => (d, r),
            Some((bd, br)) => {
                if category(d) > category(bd) {
                    if r == Rank::Scalar && br != Rank::Scalar && category(d) == 2 {
                        // a float scalar with an integer tensor: default float
                        (Dtype::Float32, r)
                    } else {
                        (d, r)
                    }
                } else if category(d) < category(bd) {
                    (bd, br)
                } else if r == br {
                    (promote_types(bd, d), br)
                } else if r > br {
                    (d, r)
                } else {
                    (bd, br)
                }
            }
        });
    }
    best.map(|(d, _)| d).unwrap_or(Dtype::Float32)
}

#[cfg(test)]
mod tests {
    use super::*;
    use Dtype::*;
    use Rank::*;

    #[test]
    fn matches_torch() {
        assert_eq!(result_type(&[(Int64, Dim), (Float32, Scalar)]), Float32);
        assert_eq!(result_type(&[(Float16, Dim), (Float64, Scalar)]), Float16);
        assert_eq!(result_type(&[(Float16, Dim), (Float32, ZeroDim)]), Float16);
        assert_eq!(result_type(&[(Int32, Dim), (Int64, ZeroDim)]), Int32);
        assert_eq!(result_type(&[(Int32, Dim), (Float64, ZeroDim)]), Float64);
        assert_eq!(result_type(&[(Uint8, Dim), (Int8, Dim)]), Int16);
        assert_eq!(result_type(&[(Bool, Dim), (Int64, Scalar)]), Int64);
        assert_eq!(result_type(&[(Float16, Dim), (BFloat16, Dim)]), Float32);
        assert_eq!(result_type(&[(Int32, Dim), (Int64, Dim)]), Int64);
    }
}
