//! PyTorch's type promotion on IR dtypes (`torch.promote_types`,
//! `torch.result_type`), one implementation for every tool: the executor
//! computes in these dtypes, the ONNX writer casts to them.
//!
//! Operands rank by kind: tensors with dims, then zero-dim tensors, then
//! Python scalars (and symbolic scalars). Each kind is promoted on its own;
//! a lower kind changes the result only when its category (bool < integer
//! < floating < complex) is higher, as torch's `combine_categories` says.
//! A scalar brings the default dtype of its category (int64, float32).

use crate::ir::Dtype;

/// The kind of an operand, lowest first.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Rank {
    Scalar,
    ZeroDim,
    Dim,
}

/// torch's category of a dtype: bool 0 < integer 1 < floating 2 < complex 3.
pub fn category(d: Dtype) -> u8 {
    match d {
        Dtype::Bool => 0,
        Dtype::Complex32 | Dtype::Complex64 | Dtype::Complex128 => 3,
        d if d.is_floating() => 2,
        _ => 1,
    }
}

fn is_unsigned(d: Dtype) -> bool {
    matches!(
        d,
        Dtype::Uint8 | Dtype::Uint16 | Dtype::Uint32 | Dtype::Uint64
    )
}

fn larger(a: Dtype, b: Dtype) -> Dtype {
    if a.size() >= b.size() {
        a
    } else {
        b
    }
}

/// `torch.promote_types` for two dtypes.
pub fn promote_types(a: Dtype, b: Dtype) -> Dtype {
    if a == b {
        return a;
    }
    let (ca, cb) = (category(a), category(b));
    if ca != cb {
        return if ca > cb { a } else { b };
    }
    match ca {
        1 if is_unsigned(a) != is_unsigned(b) => {
            let (s, u) = if is_unsigned(a) { (b, a) } else { (a, b) };
            if s.size() > u.size() {
                s
            } else {
                match u.size() {
                    1 => Dtype::Int16,
                    2 => Dtype::Int32,
                    _ => Dtype::Int64,
                }
            }
        }
        // float16 with bfloat16
        2 if a.size() == b.size() => Dtype::Float32,
        _ => larger(a, b),
    }
}

/// The complex dtype whose parts are `d`.
fn complex_of(d: Dtype) -> Dtype {
    match d {
        Dtype::Float64 => Dtype::Complex128,
        Dtype::Float16 => Dtype::Complex32,
        _ => Dtype::Complex64,
    }
}

/// The dtype a scalar of `d`'s category stands for.
fn scalar_default(d: Dtype) -> Dtype {
    match category(d) {
        0 => Dtype::Bool,
        1 => Dtype::Int64,
        2 => Dtype::Float32,
        _ => Dtype::Complex64,
    }
}

/// torch's `combine_categories(higher, lower)`.
fn combine(higher: Option<Dtype>, lower: Option<Dtype>) -> Option<Dtype> {
    let (h, l) = match (higher, lower) {
        (None, l) => return l,
        (h, None) => return h,
        (Some(h), Some(l)) => (h, l),
    };
    Some(match (category(h), category(l)) {
        (3, _) => h,
        (2, 3) => complex_of(h),
        (_, 3) => l,
        (2, _) => h,
        (ch, cl) if ch == 0 || cl == 2 => promote_types(h, l),
        _ => h,
    })
}

/// `torch.result_type` over operands (float32 when there are none).
pub fn result_type(operands: &[(Dtype, Rank)]) -> Dtype {
    let mut by_rank: [Option<Dtype>; 3] = [None, None, None];
    for &(d, rank) in operands {
        let d = if rank == Rank::Scalar {
            scalar_default(d)
        } else {
            d
        };
        let slot = &mut by_rank[rank as usize];
        *slot = Some(slot.map_or(d, |c| promote_types(c, d)));
    }
    let [scalar, zero_dim, dim] = by_rank;
    combine(dim, combine(zero_dim, scalar)).unwrap_or(Dtype::Float32)
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
        assert_eq!(result_type(&[(Bool, Dim), (Bool, ZeroDim)]), Bool);
        assert_eq!(result_type(&[(Bool, Dim), (Float64, Scalar)]), Float32);
        assert_eq!(result_type(&[(Uint8, ZeroDim), (Int64, Scalar)]), Uint8);
        assert_eq!(
            result_type(&[(Float32, Dim), (Complex64, Scalar)]),
            Complex64
        );
        assert_eq!(
            result_type(&[(Float64, Dim), (Complex64, ZeroDim)]),
            Complex128
        );
        assert_eq!(result_type(&[(Int64, Scalar), (Float64, Scalar)]), Float32);
        assert_eq!(result_type(&[]), Float32);
    }
}
