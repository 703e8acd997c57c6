//! Reduction loops over host rows: sums along a row, and sums down
//! columns of rows stored channels-last.

super::vmath::multiversion! {
    /// `out[j] += xs[p * stride + j]` over `n` rows `p` (a block of
    /// channels over an image's pixels, stored channels-last).
    pub fn column_sums(xs: &[f32], stride: usize, n: usize, out: &mut [f32]) {
        let len = out.len();
        for p in 0..n {
            for (a, v) in out.iter_mut().zip(&xs[p * stride..][..len]) {
                *a += v;
            }
        }
    }
}

/// A row's sum in sixteen lanes (the last part masked), then across
/// them: a global average pool's row of 49 or 196 floats in one pass
/// where candle's sum takes eight lanes and a scalar tail.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn row_sum_avx512(xs: &[f32]) -> f32 {
    use std::arch::x86_64::*;
    let (mut a, mut b) = (_mm512_setzero_ps(), _mm512_setzero_ps());
    let mut pairs = xs.chunks_exact(32);
    for p in &mut pairs {
        a = _mm512_add_ps(a, _mm512_loadu_ps(p.as_ptr()));
        b = _mm512_add_ps(b, _mm512_loadu_ps(p.as_ptr().add(16)));
    }
    let mut rest = pairs.remainder();
    if rest.len() >= 16 {
        a = _mm512_add_ps(a, _mm512_loadu_ps(rest.as_ptr()));
        rest = &rest[16..];
    }
    let m = crate::kernels::simd::first(rest.len());
    b = _mm512_add_ps(b, _mm512_maskz_loadu_ps(m, rest.as_ptr()));
    _mm512_reduce_add_ps(_mm512_add_ps(a, b))
}

#[cfg(not(target_arch = "x86_64"))]
unsafe fn row_sum_avx512(_: &[f32]) -> f32 {
    unreachable!("no AVX-512 off x86_64")
}

/// [`row_sum_avx512`] where [`super::cpu`] found AVX-512F (the only
/// place it is put in the table).
pub(super) fn row_sum_wide(xs: &[f32]) -> f32 {
    // SAFETY: in the table only where AVX-512F is present
    unsafe { row_sum_avx512(xs) }
}
