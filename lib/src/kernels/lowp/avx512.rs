//! The AVX512-BF16 kernel: blocks of [`MR`] x [`NR`] of C in 24 of the 32
//! vector registers, each step along `k` one pair of bfloat16 per lane
//! (`vdpbf16ps`: two products added to each float32 lane), a row's pair
//! broadcast from A's rows, B's two 16-column halves loaded from its
//! panel.

use super::NR;

#[cfg(target_arch = "x86_64")]
use std::arch::x86_64::*;

/// Rows of C a kernel call computes.
pub(super) const MR: usize = 12;

/// Whether this CPU runs the kernel: AVX-512F chosen ([`crate::kernels::isa`],
/// so `PT2KIT_NO_AVX512=1` turns it off) and AVX512-BF16 present.
pub(super) fn available() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        crate::kernels::isa() == crate::kernels::Isa::Avx512
            && std::arch::is_x86_feature_detected!("avx512bf16")
    }
    #[cfg(not(target_arch = "x86_64"))]
    false
}

/// One block of a product ([`super::gemm`], [`super::conv`]): `rows`
/// (at most [`MR`]) rows of A by 32 columns over every step (16 pair rows
/// of B, `ops.ldb` bytes apart), into `tile` (row stride [`NR`]).
///
/// # Safety
/// The CPU has the kernel ([`available`]); every step's rows lie inside
/// the operands; `tile` holds `rows` x [`NR`] floats.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bf16")]
pub(super) unsafe fn tile(ops: &super::Operands, rows: usize, tile: *mut f32) {
    macro_rules! by_rows {
        ($($r:literal)*) => {
            match rows {
                $($r => conv_kernel::<$r>(ops, tile),)*
                _ => unreachable!(),
            }
        };
    }
    by_rows!(1 2 3 4 5 6 7 8 9 10 11 12);
}

#[cfg(not(target_arch = "x86_64"))]
pub(super) unsafe fn tile(_: &super::Operands, _: usize, _: *mut f32) {
    unreachable!("lowp: no AVX512-BF16 off x86_64")
}

/// [`tile`] of `R` rows.
///
/// # Safety
/// As [`tile`].
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn conv_kernel<const R: usize>(ops: &super::Operands, tile: *mut f32) {
    let mut acc = [[_mm512_setzero_ps(); 2]; R];
    for s in ops.steps {
        let rows: [*const u8; R] = std::array::from_fn(|i| ops.a_row(i, s));
        let b = ops.b.add(s.b);
        for q in 0..16 {
            let bq = b.add(q * ops.ldb);
            let b0: __m512bh = std::mem::transmute(_mm512_loadu_si512(bq.cast()));
            let b1: __m512bh = std::mem::transmute(_mm512_loadu_si512(bq.add(64).cast()));
            for (i, acc) in acc.iter_mut().enumerate() {
                let pair = rows[i].add(4 * q).cast::<i32>().read_unaligned();
                let av: __m512bh = std::mem::transmute(_mm512_set1_epi32(pair));
                acc[0] = _mm512_dpbf16_ps(acc[0], av, b0);
                acc[1] = _mm512_dpbf16_ps(acc[1], av, b1);
            }
        }
    }
    for (i, acc) in acc.iter().enumerate() {
        _mm512_storeu_ps(tile.add(i * NR), acc[0]);
        _mm512_storeu_ps(tile.add(i * NR + 16), acc[1]);
    }
}
