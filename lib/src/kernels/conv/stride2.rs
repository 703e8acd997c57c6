//! Depthwise convolutions with a stride of 2 along the lines, each plane
//! read in place as its even and odd columns ([`conv_stride2`]): on
//! AVX-512 sixteen output columns a vector ([`stride2_run`]), on AVX2
//! eight ([`stride2_run_avx2`]).

use super::depthwise::{planes_by_tasks, Depthwise};
use super::*;

/// Whether [`conv_stride2`] takes a depthwise convolution over `g`: a
/// stride of 2 along the lines, no dilation along them, and on AVX-512F
/// one of [`STRIDE2_KERNELS`] across with output lines of
/// [`STRIDE2_MIN_COLUMNS`] or more; on AVX2 + FMA a kernel 2 to
/// [`STRIDE2_AVX2_MAX_KW`] wide, padded less than its width, over lines
/// of [`STRIDE2_AVX2_MIN_COLUMNS`] or more.
pub fn stride2(g: &PlaneWindows) -> bool {
    let shape = g.stride.1 == 2 && g.dil.1 == 1 && g.oh > 0;
    if sgemm::avx512() {
        shape && STRIDE2_KERNELS.contains(&(g.kw, g.pad.1)) && g.ow >= STRIDE2_MIN_COLUMNS
    } else {
        shape
            && crate::kernels::cpu().vector
            && (2..=STRIDE2_AVX2_MAX_KW).contains(&g.kw)
            && g.pad.1 < g.kw
            && g.ow >= STRIDE2_AVX2_MIN_COLUMNS
    }
}

/// The widest kernel [`stride2_run_avx2`] is made for (each width its own
/// code, the taps unrolled; any padding narrower than the kernel).
const STRIDE2_AVX2_MAX_KW: usize = 7;

/// Output lines shorter than this take the other kernels on AVX2: one
/// whole vector of eight (a shorter line leaves lanes idle, as
/// [`STRIDE2_MIN_COLUMNS`] on AVX-512).
const STRIDE2_AVX2_MIN_COLUMNS: usize = 8;

/// Output lines shorter than this take the other kernels: a vector a line
/// leaves lanes idle (MobileNetV3's 288-channel 5x5 into 7x7 at batch 1:
/// 23 us this way, 15 blocked), where lines of 14 fill 14 of 16 (its
/// 96-channel 5x5 into 14x14 14 us, 19 blocked; the 3x3s into 56x56 and
/// 28x28 14 and 17 us, 29 and 35 under masks, one thread, BATCH=1
/// `depthwise_speed`).
const STRIDE2_MIN_COLUMNS: usize = 12;

/// The kernel widths and paddings along the lines [`conv_stride2`] is
/// made for (each its own code, the taps unrolled): "same" 3, 5 and 7,
/// and 3 and 2 unpadded.
const STRIDE2_KERNELS: [(usize, usize); 5] = [(3, 1), (5, 2), (7, 3), (3, 0), (2, 0)];

/// A depthwise convolution with a stride of 2 along the lines, each
/// plane read in place: sixteen output columns a vector, each tap's
/// inputs (32 columns, every other one wanted) loaded as two vectors under
/// the line's bounds and their even or odd lanes taken by one permute (a
/// pair of taps sharing the loads), up to four vectors of a line and two
/// lines in registers through all the taps. The stride phases of
/// [`conv_masked`] cost a pass over the plane, and its masked loads a
/// mask each (MobileNetV3's 16-channel 3x3 over 112x112 at batch 1 spent
/// 30 us against ONNX Runtime's 12). The multiply-adds of
/// [`window_planes`] in the same order (the bias first, then the taps, a
/// lane in the padding adding zero times the weight), so the same bits;
/// the planes in tasks by [`planes_by_tasks`].
///
/// # Safety
/// [`stride2`] holds (its instruction set is present); `xs` holds
/// `b * c * h * w` floats, `ws` `co * kh * kw`, `bs` (if any) `co`, `out`
/// `b * co * oh * ow`.
pub unsafe fn conv_stride2(
    p: &Depthwise,
    xs: &[f32],
    ws: &[f32],
    out: &mut [std::mem::MaybeUninit<f32>],
    then: Option<&Finish<'_>>,
) {
    let (g, c, co, bs) = (&p.g, p.channels, p.out_channels, p.bias);
    let (per_in, taps) = (g.h * g.w, g.kh * g.kw);
    planes_by_tasks(out, g.oh * g.ow, taps, then, |p, _: &mut (), dst| {
        let (n, o) = (p / co, p % co);
        let src = &xs[(n * c + o / (co / c)) * per_in..][..per_in];
        let init = bs.map_or(0.0, |v| v[o]);
        // SAFETY: stride2 holds (this function's contract); the plane
        // and `dst` are the geometry's.
        unsafe {
            stride2_plane(
                g,
                src.as_ptr(),
                &ws[o * taps..][..taps],
                init,
                dst.as_mut_ptr().cast(),
            )
        };
    });
}

/// One output plane of [`conv_stride2`]: runs of up to four vectors
/// along the lines, each run down the whole plane (on AVX2,
/// [`stride2_plane_avx2`]).
///
/// # Safety
/// As [`conv_stride2`]'s; `src` holds the `h * w` input plane, `dst`
/// `oh * ow` floats, `w` the `kh * kw` taps.
unsafe fn stride2_plane(g: &PlaneWindows, src: *const f32, w: &[f32], init: f32, dst: *mut f32) {
    if !sgemm::avx512() {
        // SAFETY: as this function's (stride2 holds on AVX2 + FMA)
        return unsafe { stride2_plane_avx2(g, src, w, init, dst) };
    }
    let mut ox = 0;
    while ox < g.ow {
        let n = (g.ow - ox).div_ceil(16).min(4);
        // SAFETY: as this function's
        unsafe {
            macro_rules! run {
                ($($kw:literal $pad:literal),*) => {
                    match (n, g.kw, g.pad.1) {
                        $(
                            (1, $kw, $pad) => stride2_run::<1, $kw, $pad>(g, src, w, init, ox, dst),
                            (2, $kw, $pad) => stride2_run::<2, $kw, $pad>(g, src, w, init, ox, dst),
                            (3, $kw, $pad) => stride2_run::<3, $kw, $pad>(g, src, w, init, ox, dst),
                            (_, $kw, $pad) => stride2_run::<4, $kw, $pad>(g, src, w, init, ox, dst),
                        )*
                        _ => unreachable!("stride2 takes these kernels only"),
                    }
                };
            }
            run!(3 1, 5 2, 7 3, 3 0, 2 0)
        }
        ox += n * 16;
    }
}

/// Stream vectors a run of [`stride2_run`] keeps: one left of its four
/// at most, one right.
const STRIDE2_STREAMS: usize = 6;

/// `N` vectors of output columns from `ox` on every line of a
/// [`conv_stride2`] plane, each through every tap in order, then stored.
/// Each input line is read once as two streams, its even columns and its
/// odd ones (`2 * 16` columns loaded as two vectors, a permute each):
/// tap `kx` of output column `o` reads column `2 * o + kx - pad`, which
/// is stream `(kx - pad) mod 2` at `o + floor((kx - pad) / 2)`, the
/// stream's vector itself or shifted by a lane or more from its neighbour
/// (one `valignd`).
///
/// # Safety
/// As [`stride2_plane`]'s; `ox < ow`, `N <= 4`.
#[target_feature(enable = "avx512f")]
unsafe fn stride2_run<const N: usize, const KW: usize, const PAD: usize>(
    g: &PlaneWindows,
    src: *const f32,
    w: &[f32],
    init: f32,
    ox: usize,
    dst: *mut f32,
) {
    use std::arch::x86_64::*;
    const M: usize = STRIDE2_STREAMS;
    let even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    let odd = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
    debug_assert_eq!((g.kw, g.pad.1), (KW, PAD));
    let (h, wd, pad) = (g.h as isize, g.w as isize, PAD as isize);
    // lanes of a load of 16 columns from column `p` that lie on the line
    let lanes = |p: isize| -> __mmask16 {
        let (lo, hi) = ((-p).clamp(0, 16), (wd - p).clamp(0, 16));
        if hi <= lo {
            0
        } else {
            (((1u32 << hi) - 1) & !((1u32 << lo) - 1)) as __mmask16
        }
    };
    // stream vector `s` holds stream elements from `ox + 16 * (s - 1)`:
    // its first column and the masks of its two loads, the same on every line
    let mut at = [0isize; M];
    let mut masks = [(0 as __mmask16, 0 as __mmask16); M];
    for s in 0..N + 2 {
        let p = 2 * (ox as isize + 16 * (s as isize - 1));
        at[s] = p;
        masks[s] = (lanes(p), lanes(p + 16));
    }
    let shift = |kx: usize| (kx as isize - pad).div_euclid(2);
    let (left, right) = (shift(0) < 0, shift(KW - 1) > 0);
    let stores: [__mmask16; N] = std::array::from_fn(|j| {
        let n = g.ow.saturating_sub(ox + 16 * j).min(16);
        ((1u32 << n) - 1) as __mmask16
    });
    let zero = _mm512_setzero_ps();
    for oy in 0..g.oh {
        let mut acc = [_mm512_set1_ps(init); N];
        for ky in 0..g.kh {
            let taps = &w[ky * KW..][..KW];
            let iy = (oy * g.stride.0 + ky * g.dil.0) as isize - g.pad.0 as isize;
            if !(0..h).contains(&iy) {
                // a line in the padding: zeros times its taps (the bits
                // of a padded sum, a -0 start included)
                for &t in taps {
                    let wt = _mm512_set1_ps(t);
                    for a in acc.iter_mut() {
                        *a = _mm512_fmadd_ps(wt, zero, *a);
                    }
                }
                continue;
            }
            let line = src.wrapping_offset(iy * wd);
            let (mut ev, mut od) = ([zero; M], [zero; M]);
            for s in 0..N + 2 {
                if (s == 0 && !left) || (s == N + 1 && !right) {
                    continue;
                }
                let p = line.wrapping_offset(at[s]);
                let a = _mm512_maskz_loadu_ps(masks[s].0, p);
                let b = _mm512_maskz_loadu_ps(masks[s].1, p.wrapping_add(16));
                ev[s] = _mm512_permutex2var_ps(a, even, b);
                od[s] = _mm512_permutex2var_ps(a, odd, b);
            }
            // (a constant count: the taps unrolled, each one's stream and
            // shift known)
            for (kx, &t) in taps.iter().enumerate() {
                let wt = _mm512_set1_ps(t);
                // output vector j's inputs: stream vector j + 1 shifted by
                // `shift(kx)` lanes (from its neighbour's); the streams
                // named in each arm, so that they stay in registers
                macro_rules! taps {
                    ($st:ident same) => {
                        for j in 0..N {
                            acc[j] = _mm512_fmadd_ps(wt, $st[j + 1], acc[j]);
                        }
                    };
                    ($st:ident right $e:literal) => {
                        for j in 0..N {
                            let x = _mm512_alignr_epi32::<$e>(
                                _mm512_castps_si512($st[j + 2]),
                                _mm512_castps_si512($st[j + 1]),
                            );
                            acc[j] = _mm512_fmadd_ps(wt, _mm512_castsi512_ps(x), acc[j]);
                        }
                    };
                    ($st:ident left $e:literal) => {
                        for j in 0..N {
                            let x = _mm512_alignr_epi32::<$e>(
                                _mm512_castps_si512($st[j + 1]),
                                _mm512_castps_si512($st[j]),
                            );
                            acc[j] = _mm512_fmadd_ps(wt, _mm512_castsi512_ps(x), acc[j]);
                        }
                    };
                }
                let d = kx as isize - pad;
                match (d.rem_euclid(2) == 0, d.div_euclid(2)) {
                    (true, 0) => taps!(ev same),
                    (true, 1) => taps!(ev right 1),
                    (true, 2) => taps!(ev right 2),
                    (true, 3) => taps!(ev right 3),
                    (true, 4) => taps!(ev right 4),
                    (true, -1) => taps!(ev left 15),
                    (true, -2) => taps!(ev left 14),
                    (true, -3) => taps!(ev left 13),
                    (true, _) => taps!(ev left 12),
                    (false, 0) => taps!(od same),
                    (false, 1) => taps!(od right 1),
                    (false, 2) => taps!(od right 2),
                    (false, 3) => taps!(od right 3),
                    (false, 4) => taps!(od right 4),
                    (false, -1) => taps!(od left 15),
                    (false, -2) => taps!(od left 14),
                    (false, -3) => taps!(od left 13),
                    (false, _) => taps!(od left 12),
                }
            }
        }
        for (j, v) in acc.iter().enumerate() {
            _mm512_mask_storeu_ps(dst.wrapping_add(oy * g.ow + ox + 16 * j), stores[j], *v);
        }
    }
}

/// [`stride2_plane`] on AVX2 + FMA, each line's vectors of eight output
/// columns in three parts: those whose inputs cross the line's start, one
/// at a time with their loads under masks; those inside it, in runs of up
/// to [`STRIDE2_AVX2_RUN`] loaded in place; those crossing its end, one
/// at a time under masks ([`stride2_run_avx2`], each run down the whole
/// plane). (A mask a load, tested per load, spilled and branched: the
/// 16-channel 3x3 over 112x112 ran at 6 taps a nanosecond.)
///
/// # Safety
/// As [`stride2_plane`]'s, on AVX2 + FMA with `2 <= kw <=`
/// [`STRIDE2_AVX2_MAX_KW`].
unsafe fn stride2_plane_avx2(
    g: &PlaneWindows,
    src: *const f32,
    w: &[f32],
    init: f32,
    dst: *mut f32,
) {
    let (vecs, reach) = (g.ow.div_ceil(8), 2 * (g.kw.div_ceil(2) - 1) + 16);
    // vector v reads columns 16 v - pad to 16 v - pad + reach - 1
    let inside = |v: usize| 16 * v >= g.pad.1 && 16 * v + reach <= g.w + g.pad.1;
    let first = (0..vecs).find(|&v| inside(v)).unwrap_or(vecs);
    let end = (first..vecs).find(|&v| !inside(v)).unwrap_or(vecs);
    // bands of lines, each line read once a band (runs down the whole
    // plane read each line once a run: 1.2-2.1x slower over planes past
    // L1, MobileNetV3's 144 channels over 56x56 at batch 8)
    for oy in (0..g.oh).step_by(STRIDE2_AVX2_BAND) {
        let rows = oy..(oy + STRIDE2_AVX2_BAND).min(g.oh);
        // the next band's input lines asked of memory now, a line of 64
        // bytes at a time
        let next = |oy: usize| (oy * g.stride.0).saturating_sub(g.pad.0).min(g.h);
        let (lo, hi) = (next(rows.end), next(rows.end + STRIDE2_AVX2_BAND + 1));
        for at in (lo * g.w..hi * g.w).step_by(16) {
            // SAFETY: inside the plane
            unsafe {
                std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(
                    src.add(at).cast(),
                )
            };
        }
        let mut v = 0;
        while v < vecs {
            let (n, edge) = if (first..end).contains(&v) {
                // (runs of 4, 2 and 1: a run of three as two and one)
                match (end - v).min(STRIDE2_AVX2_RUN) {
                    3 => (2, false),
                    n => (n, false),
                }
            } else {
                (1, true)
            };
            let ox = 8 * v;
            // SAFETY: as this function's
            unsafe {
                macro_rules! run {
                ($($kw:literal)*) => {
                    match (n, g.kw, edge) {
                        $(
                            (_, $kw, true) => stride2_run_avx2::<1, 8, $kw, true>(g, src, w, init, (ox, rows.clone()), dst),
                            (1, $kw, false) => stride2_run_avx2::<1, 8, $kw, false>(g, src, w, init, (ox, rows.clone()), dst),
                            (2 | 3, $kw, false) => stride2_run_avx2::<2, 4, $kw, false>(g, src, w, init, (ox, rows.clone()), dst),
                            (_, $kw, false) => stride2_run_avx2::<4, 2, $kw, false>(g, src, w, init, (ox, rows.clone()), dst),
                        )*
                        _ => unreachable!("stride2 takes kernels 2 to 7 wide on AVX2"),
                    }
                };
            }
                run!(2 3 4 5 6 7)
            }
            v += n;
        }
    }
}

/// Output lines a band of [`stride2_plane_avx2`] holds (a whole number of
/// each run's lines at a time).
const STRIDE2_AVX2_BAND: usize = 8;

/// Vectors of eight output columns a run of [`stride2_run_avx2`] covers
/// at most (on two lines: eight accumulators, the two loads of a block,
/// its even or odd lanes and two taps' weights, 13 of AVX2's 16).
const STRIDE2_AVX2_RUN: usize = 4;

/// `N` vectors of eight output columns from `ox` on output lines `lines`
/// of a [`conv_stride2`] plane on AVX2, `R` lines at a time (`N * R` = 8
/// accumulators, each a chain of FMAs four cycles apart: one line of one
/// vector waited on its chain, at 6 taps a nanosecond), each through
/// every tap in order, then stored. Taps `2m` and `2m + 1` of output
/// column `o` read input columns `2 (o + m) - pad` and the one after: the
/// even and odd lanes of the 16 columns from `2 (ox + m) - pad`, two
/// loads and one in-lane shuffle for each. AVX2 has no two-source permute
/// across its halves, so the lanes stay in the shuffle's order, the same
/// for every tap, and each accumulator is permuted into order once, when
/// stored. With `EDGE`, every load is under the line's bounds
/// (`vmaskmovps`, zero outside).
///
/// # Safety
/// AVX2 and FMA are present; as [`stride2_plane_avx2`]'s; `ox < ow`,
/// `lines` inside `0..oh`, `N <=`
/// [`STRIDE2_AVX2_RUN`], `KW` the kernel's width; without `EDGE`, every
/// column the run reads lies on the line.
#[target_feature(enable = "avx2,fma")]
unsafe fn stride2_run_avx2<const N: usize, const R: usize, const KW: usize, const EDGE: bool>(
    g: &PlaneWindows,
    src: *const f32,
    w: &[f32],
    init: f32,
    (ox, lines): (usize, std::ops::Range<usize>),
    dst: *mut f32,
) {
    use std::arch::x86_64::*;
    debug_assert_eq!(g.kw, KW);
    // blocks of 16 columns a line and vector: taps 2m and 2m + 1
    let blocks = KW.div_ceil(2);
    let (h, wd, pad) = (g.h as isize, g.w as isize, g.pad.1 as isize);
    // block m of vector j: its first column on the line, and (EDGE) the
    // masks of its two loads, the same on every line
    let mut at = [[0isize; 4]; N];
    let mut masks = [[(_mm256_setzero_si256(), _mm256_setzero_si256()); 4]; N];
    for j in 0..N {
        for m in 0..blocks {
            let p = 2 * (ox + 8 * j + m) as isize - pad;
            at[j][m] = p;
            if EDGE {
                let lanes = |p: isize| {
                    let on: [i32; 8] =
                        std::array::from_fn(|i| -i32::from((0..wd).contains(&(p + i as isize))));
                    _mm256_loadu_si256(on.as_ptr().cast())
                };
                masks[j][m] = (lanes(p), lanes(p + 8));
            }
        }
    }
    // the lanes of each vector that lie on the output line
    let stores: [usize; N] = std::array::from_fn(|j| g.ow.saturating_sub(ox + 8 * j).min(8));
    let zero = _mm256_setzero_ps();
    // (no closures in the loops: they are not inlined there)
    for oy0 in lines.clone().step_by(R) {
        let mut acc = [[_mm256_set1_ps(init); N]; R];
        for ky in 0..g.kh {
            let taps = &w[ky * KW..][..KW];
            for (r, acc) in acc.iter_mut().enumerate() {
                // (a line past the plane's last, oy0 + r >= oh, is
                // computed and not stored)
                let iy = ((oy0 + r) * g.stride.0 + ky * g.dil.0) as isize - g.pad.0 as isize;
                if !(0..h).contains(&iy) {
                    // a line in the padding: zeros times its taps (the
                    // bits of a padded sum, a -0 start included)
                    for &t in taps {
                        let wt = _mm256_set1_ps(t);
                        for a in acc.iter_mut() {
                            *a = _mm256_fmadd_ps(wt, zero, *a);
                        }
                    }
                    continue;
                }
                let line = src.wrapping_offset(iy * wd);
                for m in 0..blocks {
                    let we = _mm256_set1_ps(taps[2 * m]);
                    let wo = _mm256_set1_ps(taps[(2 * m + 1).min(KW - 1)]);
                    for j in 0..N {
                        // (a lane off the line is never read: its address
                        // is only formed, with wrapping arithmetic)
                        let p = line.wrapping_offset(at[j][m]);
                        let (a, b) = if EDGE {
                            (
                                _mm256_maskload_ps(p, masks[j][m].0),
                                _mm256_maskload_ps(p.wrapping_add(8), masks[j][m].1),
                            )
                        } else {
                            (_mm256_loadu_ps(p), _mm256_loadu_ps(p.wrapping_add(8)))
                        };
                        let even = _mm256_shuffle_ps::<0b10_00_10_00>(a, b);
                        acc[j] = _mm256_fmadd_ps(we, even, acc[j]);
                        if 2 * m + 1 < KW {
                            let odd = _mm256_shuffle_ps::<0b11_01_11_01>(a, b);
                            acc[j] = _mm256_fmadd_ps(wo, odd, acc[j]);
                        }
                    }
                }
            }
        }
        for (r, acc) in acc.iter().enumerate().take(lines.end - oy0) {
            for (j, v) in acc.iter().enumerate() {
                let d = dst.add((oy0 + r) * g.ow + ox + 8 * j);
                let v =
                    _mm256_castpd_ps(_mm256_permute4x64_pd::<0b11_01_10_00>(_mm256_castps_pd(*v)));
                if stores[j] == 8 {
                    _mm256_storeu_ps(d, v);
                } else {
                    // (a masked store is slow on AMD's cores: the lanes
                    // through the stack)
                    let mut lane = [0f32; 8];
                    _mm256_storeu_ps(lane.as_mut_ptr(), v);
                    for (i, x) in lane.iter().enumerate().take(stores[j]) {
                        *d.add(i) = *x;
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::depthwise::*;
    use super::*;

    /// [`conv_stride2`] gives the bits of [`window_planes`]: every kernel
    /// of [`STRIDE2_KERNELS`] across, padding down the planes none, "same"
    /// and more than the kernel's reach, lines of one vector and of five
    /// (runs of four and one), odd and even widths, a stride of 1 or 3
    /// down the planes, dilation down them, two and three outputs an input
    /// channel, a bias, and a fused step on each task's planes at their
    /// offset.
    #[test]
    pub fn stride2_depthwise_has_the_bits_of_plane_by_plane() {
        if !sgemm::available() {
            return;
        }
        for &(b, c, mult, (h, w), (kh, kw), sy, pad, dy, bias) in [
            (
                1usize,
                16usize,
                1usize,
                (112usize, 112usize),
                (3usize, 3usize),
                2usize,
                (1usize, 1usize),
                1usize,
                true,
            ),
            (2, 5, 1, (29, 29), (3, 3), 2, (1, 1), 1, false),
            (1, 3, 2, (14, 31), (5, 5), 2, (2, 2), 1, true),
            (1, 4, 1, (9, 161), (3, 7), 1, (0, 3), 2, true),
            (3, 2, 1, (8, 33), (2, 2), 3, (0, 0), 1, false),
            (1, 2, 1, (7, 27), (2, 3), 2, (3, 0), 1, true),
            (1, 3, 3, (5, 40), (4, 7), 2, (2, 3), 1, true),
        ]
        .iter()
        .chain(if sgemm::avx512() {
            &[][..]
        } else {
            // AVX2's: any width to 7 and padding narrower, lines of one
            // whole vector and of a vector and a lane, runs of four and
            // more, blocks across both ends of short lines
            &[
                (
                    1usize,
                    4usize,
                    1usize,
                    (6usize, 16usize),
                    (3usize, 4usize),
                    2usize,
                    (1usize, 1usize),
                    1usize,
                    true,
                ),
                (2, 3, 1, (9, 18), (2, 6), 1, (0, 5), 1, false),
                (1, 5, 2, (11, 80), (3, 7), 2, (1, 0), 1, true),
                (1, 2, 1, (4, 19), (1, 5), 1, (0, 4), 1, true),
                (1, 3, 1, (12, 150), (5, 3), 2, (2, 2), 2, false),
                (1, 1, 1, (3, 17), (3, 3), 2, (1, 1), 1, true),
            ][..]
        }) {
            let g = PlaneWindows::conv(h, w, (kh, kw), (sy, 2), pad, (dy, 1)).unwrap();
            assert!(stride2(&g));
            let (co, taps, per_out) = (c * mult, kh * kw, g.oh * g.ow);
            let xs: Vec<f32> = (0..b * c * h * w)
                .map(|i| ((i * 7919 % 2001) as f32 / 1000.0) - 1.0)
                .collect();
            let ws: Vec<f32> = (0..co * taps)
                .map(|i| ((i * 104_729 % 997) as f32 / 500.0) - 1.0)
                .collect();
            let bs: Vec<f32> = (0..co).map(|i| i as f32 * 0.01 - 0.2).collect();
            let bs = bias.then_some(&bs[..]);
            let len = b * co * per_out;
            let then = |at: usize, span: &mut [f32]| {
                for (i, v) in span.iter_mut().enumerate() {
                    *v += (at + i) as f32;
                }
            };
            let plane = |p: usize| {
                let (n, o) = (p / co, p % co);
                (
                    n * c + o / mult,
                    bs.map_or(0.0, |v| v[o]),
                    WindowOp::Fma(&ws[o * taps..][..taps]),
                )
            };
            let mut want = sgemm::uninit(len);
            window_planes(g, &xs, &mut want, 0.0, plane, Some(&then));
            let mut got = sgemm::uninit(len);
            // SAFETY: AVX-512F is present (checked above); the sizes are
            // the convolution's
            unsafe {
                conv_stride2(
                    &Depthwise {
                        g,
                        batch: b,
                        channels: c,
                        out_channels: co,
                        bias: bs,
                    },
                    &xs,
                    &ws,
                    &mut got,
                    Some(&then),
                )
            };
            // SAFETY: both wrote every element
            let (want, got) = unsafe { (sgemm::assume_init(want), sgemm::assume_init(got)) };
            for (i, (x, y)) in want.iter().zip(&got).enumerate() {
                assert_eq!(x.to_bits(), y.to_bits(), "{c}x{mult} channels {h}x{w} kernel {kh}x{kw} stride {sy}x2 pad {pad:?}: element {i}: {x} against {y}");
            }
        }
    }

    /// The depthwise kernels' speed on MobileNetV3's shapes at batch 8
    /// (a timing, not a test: `THREADS=2 cargo test --release -p pt2kit
    /// --features exec --lib depthwise_speed -- --ignored --nocapture`).
    #[test]
    #[ignore]
    pub fn depthwise_speed() {
        if !sgemm::available() {
            return;
        }
        let (_, pool) = crate::kernels::bench_pool(2);
        // `SHAPES="c,side,kernel,stride ..."` for others
        let shapes: Vec<(usize, usize, usize, usize)> = match std::env::var("SHAPES") {
            Ok(v) => v
                .split_whitespace()
                .map(|s| {
                    let v: Vec<usize> = s
                        .split(',')
                        .map(|x| x.parse().expect("SHAPES: c,side,k,s"))
                        .collect();
                    (v[0], v[1], v[2], v[3])
                })
                .collect(),
            Err(_) => vec![
                (576, 7, 5, 1),
                (240, 14, 5, 1),
                (88, 28, 3, 1),
                (16, 112, 3, 2),
                (72, 56, 3, 2),
                (96, 28, 5, 2),
                (288, 14, 5, 2),
            ],
        };
        for &(c, hw, k, s) in &shapes {
            let b = crate::kernels::env_number("BATCH", 8);
            let pad = k / 2;
            let g = PlaneWindows::conv(hw, hw, (k, k), (s, s), (pad, pad), (1, 1)).unwrap();
            let o = g.oh;
            let plan = MaskedPlan::cached(g).filter(|_| sgemm::avx512());
            let xs: Vec<f32> = (0..b * c * hw * hw).map(|i| (i % 7) as f32 * 0.1).collect();
            let ws: Vec<f32> = (0..c * k * k).map(|i| (i % 5) as f32 * 0.1).collect();
            let wt = depthwise_by_blocks(&ws, c, k * k);
            let mut out = sgemm::uninit(b * c * o * o);
            let taps = (b * c * o * o * k * k) as f64;
            let reps = (2e8 / taps) as usize + 1;
            let mut t = [0f64; 4];
            let dw = Depthwise {
                g,
                batch: b,
                channels: c,
                out_channels: c,
                bias: None,
            };
            pool.install(|| {
                for _ in 0..8 {
                    let t0 = std::time::Instant::now();
                    if stride2(&g) {
                        for _ in 0..reps {
                            unsafe { conv_stride2(&dw, &xs, &ws, &mut out, None) };
                        }
                    }
                    t[2] += t0.elapsed().as_secs_f64();
                    let t0 = std::time::Instant::now();
                    for _ in 0..reps {
                        let plane =
                            |p: usize| (p, 0.0, WindowOp::Fma(&ws[(p % c) * k * k..][..k * k]));
                        window_planes(g, &xs, &mut out, 0.0, plane, None);
                    }
                    t[3] += t0.elapsed().as_secs_f64();
                    let t0 = std::time::Instant::now();
                    for _ in 0..reps {
                        let Some(plan) = &plan else { break };
                        unsafe { conv_masked(plan, &dw, &xs, &ws, &mut out, None) };
                    }
                    t[0] += t0.elapsed().as_secs_f64();
                    let t0 = std::time::Instant::now();
                    if blocked(&g) {
                        for _ in 0..reps {
                            unsafe {
                                depthwise_blocked(
                                    &dw,
                                    &xs,
                                    &wt,
                                    &mut out,
                                    None,
                                    None,
                                    (false, false),
                                )
                            };
                        }
                    }
                    t[1] += t0.elapsed().as_secs_f64();
                }
            });
            let per = |v: f64| v / (8 * reps) as f64 * 1e3;
            eprintln!(
                "c {c} {hw}x{hw} k{k} s{s}: masked {:.4} ms, blocked {:.4} ms ({:.2} taps/ns), stride 2 {:.4} ms, plane by plane {:.4} ms ({:.2} taps/ns)",
                per(t[0]),
                per(t[1]),
                taps / (per(t[1]) * 1e6),
                per(t[2]),
                per(t[3]),
                taps / (per(t[3]) * 1e6),
            );
        }
    }
}
