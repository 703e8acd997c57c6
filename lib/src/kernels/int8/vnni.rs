//! The AVX512-VNNI kernel: blocks of [`MR`] x [`NR`] of C in 24 of the 32
//! vector registers, each step along `k` one quad of bytes per lane
//! (`vpdpbusd`: four unsigned-by-signed byte products added to each
//! 32-bit lane, exactly), a row's quad broadcast from A's rows, B's two
//! 16-column halves loaded from its panel.

use super::{Block, PackedI8, A8, MR, NR};

#[cfg(target_arch = "x86_64")]
use std::arch::x86_64::*;

/// Whether this CPU runs the kernel: AVX-512F chosen ([`crate::kernels::isa`],
/// so `PT2KIT_NO_AVX512=1` turns it off) and AVX512-VNNI present.
pub(super) fn available() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        crate::kernels::isa() == crate::kernels::Isa::Avx512
            && std::arch::is_x86_feature_detected!("avx512vnni")
    }
    #[cfg(not(target_arch = "x86_64"))]
    false
}

/// Row panels `rows` (of [`MR`]) x column panels `cols` of C, each block
/// handed to `done`.
///
/// # Safety
/// The CPU has the kernel ([`available`]).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512vnni")]
pub(super) unsafe fn block(
    a: &A8,
    b: &PackedI8,
    rows: std::ops::Range<usize>,
    cols: std::ops::Range<usize>,
    done: Block,
) {
    let mut tile = [0i32; MR * NR];
    let quads = a.kp / 4;
    for jp in cols {
        let bp = b.panel(jp);
        let ncols = (b.n - jp * NR).min(NR);
        for ip in rows.clone() {
            let i0 = ip * MR;
            let nrows = (a.m - i0).min(MR);
            let ap = a.data[i0 * a.kp..].as_ptr();
            let t = tile.as_mut_ptr();
            macro_rules! by_rows {
                ($($r:literal)*) => {
                    match nrows {
                        $($r => kernel::<$r>(ap, a.kp, bp, quads, t),)*
                        _ => unreachable!(),
                    }
                };
            }
            by_rows!(1 2 3 4 5 6 7 8 9 10 11 12);
            done(i0, nrows, jp * NR, ncols, &tile);
        }
    }
}

#[cfg(not(target_arch = "x86_64"))]
pub(super) unsafe fn block(
    _: &A8,
    _: &PackedI8,
    _: std::ops::Range<usize>,
    _: std::ops::Range<usize>,
    _: Block,
) {
    unreachable!("int8: no AVX512-VNNI off x86_64")
}

/// `R` rows of A (from `a`, row stride `lda` bytes) by one panel of B
/// (`quads` quad rows from `b`) into `tile` (row stride [`NR`]).
///
/// # Safety
/// As [`block`]; `a` holds `R` rows of `4 * quads` bytes, `b` `quads`
/// quad rows of [`NR`] words, `tile` `R` rows.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn kernel<const R: usize>(
    a: *const u8,
    lda: usize,
    b: *const i32,
    quads: usize,
    tile: *mut i32,
) {
    let mut acc = [[_mm512_setzero_si512(); 2]; R];
    for p in 0..quads {
        let bq = b.add(p * NR);
        let b0 = _mm512_loadu_si512(bq.cast());
        let b1 = _mm512_loadu_si512(bq.add(16).cast());
        for (i, acc) in acc.iter_mut().enumerate() {
            let quad = a.add(i * lda + 4 * p).cast::<i32>().read_unaligned();
            let av = _mm512_set1_epi32(quad);
            acc[0] = _mm512_dpbusd_epi32(acc[0], av, b0);
            acc[1] = _mm512_dpbusd_epi32(acc[1], av, b1);
        }
    }
    for (i, acc) in acc.iter().enumerate() {
        _mm512_storeu_si512(tile.add(i * NR).cast(), acc[0]);
        _mm512_storeu_si512(tile.add(i * NR + 16).cast(), acc[1]);
    }
}
