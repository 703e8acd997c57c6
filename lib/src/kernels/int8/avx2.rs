//! The AVX2 kernel, for CPUs without VNNI: the products made exact in
//! 16-bit lanes. AVX2's byte product (`vpmaddubsw`) saturates a pair's
//! sum at 32767, which 255 * 127 * 2 passes, so this kernel widens both
//! operands to 16 bits instead and sums pairs with `vpmaddwd` (two
//! 16-bit products added into each 32-bit lane, at most 2 * 255 * 128,
//! exactly): the weight is packed so at load ([`super::Form::Pairs`]:
//! word `(p, j)` holds elements `(2p, j)` and `(2p + 1, j)` as two i16),
//! A's rows widened once to u16 as the block starts. Register blocks of
//! C are six rows by sixteen columns (12 of the 16 vector registers),
//! two per [`NR`]-column panel, `k` split in steps (see [`block`]).

use super::{Block, PackedI8, A8, MR, NR};

#[cfg(target_arch = "x86_64")]
use std::arch::x86_64::*;

/// Rows of a register block (of [`MR`]).
pub(super) const RB: usize = 6;
/// Columns of a register block (half an [`NR`]-column panel).
pub(super) const CB: usize = 16;
/// Pairs of `k` a pass over the rows takes (16 KiB of a half panel).
const KC: usize = 256;

/// Whether this CPU runs the kernel: AVX2 chosen ([`crate::kernels::isa`],
/// so `PT2KIT_NO_AVX2=1` turns it off).
pub(super) fn available() -> bool {
    matches!(
        crate::kernels::isa(),
        crate::kernels::Isa::Avx2 | crate::kernels::Isa::Avx512
    )
}

/// Row panels `rows` (of [`MR`]) x column panels `cols` of C, each block
/// handed to `done`. `b` is packed in pairs. The rows are widened once;
/// then for each column panel, `k` in steps of [`KC`] pairs (a step of
/// the half panel stays in L1 while every row passes over it) into sums
/// of all the rows (C's rows of the panel), handed on in blocks of
/// [`MR`] rows when the panel is done.
///
/// # Safety
/// The CPU has AVX2 ([`available`]).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
pub(super) unsafe fn block(
    a: &A8,
    b: &PackedI8,
    rows: std::ops::Range<usize>,
    cols: std::ops::Range<usize>,
    done: Block,
) {
    let i0 = rows.start * MR;
    let mr = (rows.end * MR).min(a.m).saturating_sub(i0);
    if mr == 0 {
        return;
    }
    // (buffers the thread keeps: a block's rows are all written before
    // they are read, so they need no clearing)
    thread_local! {
        static BUFFERS: std::cell::RefCell<(Vec<u16>, Vec<i32>)> = const { std::cell::RefCell::new((Vec::new(), Vec::new())) };
    }
    BUFFERS.with(|cell| {
        let (wide, sums) = &mut *cell.borrow_mut();
        wide.clear();
        wide.extend(a.data[i0 * a.kp..][..mr * a.kp].iter().map(|&x| x as u16));
        if sums.len() < mr * NR {
            sums.resize(mr * NR, 0);
        }
        // SAFETY: as this function's
        unsafe { passes(a, b, (i0, mr), cols, wide, sums, done) }
    })
}

/// [`block`]'s passes over `mr` rows from `i0`, widened in `wide`, into
/// `sums`.
///
/// # Safety
/// As [`block`].
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn passes(
    a: &A8,
    b: &PackedI8,
    (i0, mr): (usize, usize),
    cols: std::ops::Range<usize>,
    wide: &[u16],
    sums: &mut [i32],
    done: Block,
) {
    let pairs = a.kp / 2;
    for jp in cols {
        let bp = b.panel(jp);
        let ncols = (b.n - jp * NR).min(NR);
        for p0 in (0..pairs).step_by(KC) {
            let steps = (pairs - p0).min(KC);
            for c0 in (0..ncols).step_by(CB) {
                let bq = bp.add(p0 * NR + c0);
                for r0 in (0..mr).step_by(RB) {
                    let ap = wide[r0 * a.kp + 2 * p0..].as_ptr();
                    let t = sums.as_mut_ptr().add(r0 * NR + c0);
                    macro_rules! by_rows {
                        ($($r:literal)*) => {
                            match (mr - r0).min(RB) {
                                $($r => kernel::<$r>(ap, a.kp, bq, steps, t, p0 > 0),)*
                                _ => unreachable!(),
                            }
                        };
                    }
                    by_rows!(1 2 3 4 5 6);
                }
            }
        }
        for r0 in (0..mr).step_by(MR) {
            let nrows = (mr - r0).min(MR);
            done(i0 + r0, nrows, jp * NR, ncols, &sums[r0 * NR..]);
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
    unreachable!("int8: no AVX2 off x86_64")
}

/// `r` (at most [`RB`]) rows of 16-bit A by sixteen columns of a pair
/// panel into `tile`, stored (see [`kernel`]; Winograd's products).
///
/// # Safety
/// As [`kernel`].
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
pub(super) unsafe fn rows_by_panel(
    r: usize,
    a: *const u16,
    lda: usize,
    b: *const i32,
    pairs: usize,
    tile: *mut i32,
) {
    macro_rules! by_rows {
        ($($r:literal)*) => {
            match r {
                $($r => kernel::<$r>(a, lda, b, pairs, tile, false),)*
                _ => unreachable!(),
            }
        };
    }
    by_rows!(1 2 3 4 5 6);
}

#[cfg(not(target_arch = "x86_64"))]
pub(super) unsafe fn rows_by_panel(
    _: usize,
    _: *const u16,
    _: usize,
    _: *const i32,
    _: usize,
    _: *mut i32,
) {
    unreachable!("int8: no AVX2 off x86_64")
}

/// `R` rows of widened A (from `a`, row stride `lda` elements) by sixteen
/// columns of a pair panel (`pairs` pair rows from `b`, row stride
/// [`NR`] words) into `tile` (row stride [`NR`]): stored, or added to
/// what it holds (`add`).
///
/// # Safety
/// As [`block`]; `a` holds `R` rows of `2 * pairs` elements, `b` `pairs`
/// rows of sixteen words, `tile` `R` rows of sixteen.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn kernel<const R: usize>(
    a: *const u16,
    lda: usize,
    b: *const i32,
    pairs: usize,
    tile: *mut i32,
    add: bool,
) {
    let mut acc = [[_mm256_setzero_si256(); 2]; R];
    if add {
        for (i, acc) in acc.iter_mut().enumerate() {
            acc[0] = _mm256_loadu_si256(tile.add(i * NR).cast());
            acc[1] = _mm256_loadu_si256(tile.add(i * NR + 8).cast());
        }
    }
    for p in 0..pairs {
        let bq = b.add(p * NR);
        let b0 = _mm256_loadu_si256(bq.cast());
        let b1 = _mm256_loadu_si256(bq.add(8).cast());
        for (i, acc) in acc.iter_mut().enumerate() {
            let pair = a.add(i * lda + 2 * p).cast::<i32>().read_unaligned();
            let av = _mm256_set1_epi32(pair);
            acc[0] = _mm256_add_epi32(acc[0], _mm256_madd_epi16(av, b0));
            acc[1] = _mm256_add_epi32(acc[1], _mm256_madd_epi16(av, b1));
        }
    }
    for (i, acc) in acc.iter().enumerate() {
        _mm256_storeu_si256(tile.add(i * NR).cast(), acc[0]);
        _mm256_storeu_si256(tile.add(i * NR + 8).cast(), acc[1]);
    }
}
