//! Float32 element-wise math that the compiler vectorises: `exp`, `tanh`,
//! `erf`, and the activations built from them (GELU both ways, sigmoid,
//! SiLU), and softmax along rows.
//!
//! Each function is branch-free scalar code (polynomials after a range
//! reduction, Cephes-style), `#[inline(always)]`, so a loop over a slice
//! inlines it and vectorises; the loops are compiled three times (AVX-512,
//! AVX2 + FMA, and the baseline) and chosen once at run time, so the
//! binaries stay portable. Large slices are split over the executor's
//! threads. candle computes these one element at a time through libm, on
//! one thread: GPT-2's tanh GELU spent a third of its run there.
//!
//! Accuracy (checked against float64 in the tests below): `exp` within 2
//! ulp, `tanh` within 3e-7 absolute, `erf` within 3e-7 absolute; NaN goes
//! through; `exp(-inf)` is 0 and `exp(+inf)` is infinite, as torch's.

// The polynomial coefficients are written as published (Cephes), digits
// beyond float32's included.
#![allow(clippy::excessive_precision)]

/// Elements below which a map runs on the calling thread.
pub(crate) const PARALLEL_MIN: usize = 1 << 15;

#[inline(always)]
pub fn exp(x: f32) -> f32 {
    let xc = x.clamp(-87.336_55, 88.722_83);
    let (e, n) = exp_reduced(xc);
    // 2^n from its bits (n in [-126, 128]: the clamp keeps it a normal),
    // the biased exponent read from the float's own bits (v + 2^23 holds
    // the integer v in its low bits, shifted into the exponent): `n as
    // i32`, a saturating cast, ran lane by lane in scalar conversions
    // (softmax at 1.1 ns an element on one thread)
    let v = n.clamp(-126.0, 127.0) + 127.0;
    let scale = f32::from_bits((v + 8_388_608.0).to_bits() << 23);
    let y = e * scale;
    let y = if n > 127.0 { y * 2.0 } else { y };
    if x < -87.336_55 {
        0.0
    } else if x > 88.722_83 {
        f32::INFINITY
    } else {
        y
    }
}

/// `exp(x) = e * 2^n` for `x` in exp's range: `n` the nearest integer to
/// `x / ln 2` (ties to even: one rounding instruction), `e` the Cephes
/// polynomial of the rest (within `[-ln 2 / 2, ln 2 / 2]`).
#[inline(always)]
fn exp_reduced(x: f32) -> (f32, f32) {
    const LOG2E: f32 = std::f32::consts::LOG2_E;
    const C1: f32 = 0.693_359_4;
    const C2: f32 = -2.121_944_4e-4;
    let n = (x * LOG2E).round_ties_even();
    let r = n.mul_add(-C2, n.mul_add(-C1, x));
    // Estrin's scheme (the loops over it are bound by its chain of
    // dependent steps)
    let r2 = r * r;
    let c = |hi: f32, lo: f32| hi.mul_add(r, lo);
    let p = c(1.987_569_1e-4, 1.398_199_9e-3).mul_add(r2, c(8.333_452e-3, 4.166_579_6e-2));
    let p = p.mul_add(r2, c(1.666_666_5e-1, 5.000_000_1e-1));
    (p.mul_add(r2, r) + 1.0, n)
}

/// [`exp`] of `x <= 0` (or NaN), as a softmax's `x - max` and a log of
/// erfc are: no overflow to handle, so fewer instructions (2^n is a
/// normal for n in [-126, 0]); below -87.34 is 0, as [`exp`]'s.
#[inline(always)]
pub fn exp_nonpos(x: f32) -> f32 {
    const LO: f32 = -87.336_55;
    // (a compare, not `max`: NaN stays NaN)
    let xc = if x < LO { LO } else { x };
    let (e, n) = exp_reduced(xc);
    let scale = f32::from_bits((n + (127.0 + 8_388_608.0)).to_bits() << 23);
    if x < LO {
        0.0
    } else {
        e * scale
    }
}

#[inline(always)]
pub fn tanh(x: f32) -> f32 {
    let ax = x.abs();
    // |x| < 0.625: x + x^3 P(x^2) (Cephes tanhf)
    let z = x * x;
    let mut p = -5.704_988_7e-3f32;
    p = p.mul_add(z, 2.063_908_9e-2);
    p = p.mul_add(z, -5.373_971_6e-2);
    p = p.mul_add(z, 1.333_144_2e-1);
    p = p.mul_add(z, -3.333_328_2e-1);
    let small = (p * z).mul_add(x, x);
    // else (1 - e) / (1 + e) for e = exp(-2|x|) (at most 1: the exp
    // without overflow to handle), with the sign of x
    let e = exp_nonpos(-2.0 * ax);
    let large = ((1.0 - e) / (1.0 + e)).copysign(x);
    if ax < 0.625 {
        small
    } else {
        large
    }
}

/// erfc(a) for a >= 1 (or NaN) as `exp(Q(a))`: `Q` a polynomial of
/// degree 8 in `a - 2.5` fitted to log erfc on [1, 4] (Chebyshev nodes,
/// float64: 1.3e-8 from it; as evaluated in float32 erfc is within 1.5e-6
/// of itself, relative), 0 from 4 on (erfc(4) = 1.5e-8: `1 - erfc` is 1
/// in float32 there). One exp and no division, evaluated by Estrin's
/// scheme, as [`exp_nonpos`]: `gelu_erf` over 605K elements in place (one
/// `Linear(768, 3072)` of ViT-B/16 at batch 1), one thread, 1.98 -> 1.34
/// ns an element against Abramowitz and Stegun 7.1.26's rational form (a
/// division and a general exp) in Horner's; `exp` 0.87 -> 0.54, softmax
/// rows of 197 1.57 -> 0.83, `gelu_tanh` 1.86 -> 1.14 (the vmath_speed
/// test).
#[inline(always)]
fn erfc_tail(a: f32) -> f32 {
    let s = a.clamp(1.0, 4.0) - 2.5;
    // Estrin's scheme (pairs, then by s^2 and s^4): half Horner's chain
    // of dependent steps, the bound of the loop (not its instructions)
    let c = |hi: f32, lo: f32| hi.mul_add(s, lo);
    let (s2, p01, p23) = (
        s * s,
        c(-5.352_680_7, -7.806_815),
        c(-1.085_851_7e-2, -9.438_936e-1),
    );
    let (p45, p67) = (
        c(-4.201_445_6e-4, 2.165_160_4e-3),
        c(-1.330_939e-5, 7.739_442_7e-5),
    );
    let s4 = s2 * s2;
    let hi = 1.614_061_6e-6f32.mul_add(s4, p67.mul_add(s2, p45));
    let q = hi.mul_add(s4, p23.mul_add(s2, p01));
    let e = exp_nonpos(q);
    if a > 4.0 {
        0.0
    } else {
        e
    }
}

/// erf: below 1, x P(x^2) (Cephes erff); from 1, 1 - erfc (see
/// [`erfc_tail`]), where erf is near 1.
#[inline(always)]
pub fn erf(x: f32) -> f32 {
    let large = (1.0 - erfc_tail(x.abs())).copysign(x);
    if x.abs() < 1.0 {
        erf_small(x)
    } else {
        large
    }
}

/// erf(x) for |x| < 1: x P(x^2) (Cephes erff, within 3e-7).
#[inline(always)]
fn erf_small(x: f32) -> f32 {
    let z = x * x;
    let mut q = 7.853_861_4e-5f32;
    q = q.mul_add(z, -8.010_193_6e-4);
    q = q.mul_add(z, 5.188_327_7e-3);
    q = q.mul_add(z, -2.685_381_2e-2);
    q = q.mul_add(z, 1.128_358_5e-1);
    q = q.mul_add(z, -3.761_262_6e-1);
    q = q.mul_add(z, std::f32::consts::FRAC_2_SQRT_PI);
    x * q
}

/// x (1 + erf(x / sqrt 2)) / 2; below x = -sqrt 2, `1 + erf` is taken as
/// erfc of the opposite (no cancellation in the tail), above sqrt 2 as
/// `2 - erfc`.
#[inline(always)]
pub fn gelu_erf(x: f32) -> f32 {
    let u = x * std::f32::consts::FRAC_1_SQRT_2;
    // both computed, then one chosen: selects the loop vectorises
    let tail = erfc_tail(u.abs());
    let body = 1.0 + erf_small(u);
    let one_plus = if u < -1.0 {
        tail
    } else if u > 1.0 {
        2.0 - tail
    } else {
        body
    };
    // torch's vectorised float kernels give NaN at both infinities
    // (x * (1 + erf) first, as torch: past half the largest float the
    // product overflows to inf before the halving, as torch's does)
    at_infinity(x, x * one_plus * 0.5, f32::NAN)
}

/// torch's GELU at the infinities: -inf * 0, NaN, at -inf; `at_inf` at
/// +inf (+inf for the tanh form; NaN for the exact form in float32 and
/// narrower, whose vectorised kernel gives it). A select, so the loops
/// vectorise.
#[inline(always)]
fn at_infinity(x: f32, y: f32, at_inf: f32) -> f32 {
    if x == f32::NEG_INFINITY {
        f32::NAN
    } else if x == f32::INFINITY {
        at_inf
    } else {
        y
    }
}

#[inline(always)]
pub fn gelu_tanh(x: f32) -> f32 {
    const K: f32 = 0.797_884_6; // sqrt(2 / pi)
    at_infinity(
        x,
        0.5 * x * (1.0 + tanh(K * (0.044_715 * x * x * x + x))),
        f32::INFINITY,
    )
}

#[inline(always)]
pub fn sigmoid(x: f32) -> f32 {
    1.0 / (1.0 + exp(-x))
}

#[inline(always)]
pub fn silu(x: f32) -> f32 {
    x / (1.0 + exp(-x))
}

use super::{isa, Isa};

/// A function compiled three times (AVX-512, AVX2 + FMA, the baseline),
/// the copy for this CPU chosen at run time ([`isa`]): its loops vectorise
/// to the widest registers there are, and the binary stays portable.
/// Generic parameters go in `[...]` after the name.
macro_rules! multiversion {
    ($(#[$m:meta])* $vis:vis fn $name:ident $([$($g:tt)*])? ($($arg:ident: $ty:ty),* $(,)?) $(-> $ret:ty)? $body:block) => {
        $(#[$m])*
        $vis fn $name $(<$($g)*>)? ($($arg: $ty),*) $(-> $ret)? {
            #[inline(always)]
            fn inner $(<$($g)*>)? ($($arg: $ty),*) $(-> $ret)? $body
            #[cfg(target_arch = "x86_64")]
            {
                #[target_feature(enable = "avx512f,avx2,fma")]
                unsafe fn wide $(<$($g)*>)? ($($arg: $ty),*) $(-> $ret)? {
                    inner($($arg),*)
                }
                #[target_feature(enable = "avx2,fma")]
                unsafe fn avx2 $(<$($g)*>)? ($($arg: $ty),*) $(-> $ret)? {
                    inner($($arg),*)
                }
                match $crate::kernels::isa() {
                    // SAFETY: the CPU has the features (checked by `isa`).
                    $crate::kernels::Isa::Avx512 => return unsafe { wide($($arg),*) },
                    $crate::kernels::Isa::Avx2 => return unsafe { avx2($($arg),*) },
                    $crate::kernels::Isa::Base => {}
                }
            }
            inner($($arg),*)
        }
    };
}
pub(crate) use multiversion;

multiversion! {
    /// `dst[i] = f(a[i], b[i])` on this thread, in the widest instruction
    /// set (`dst` may be uninitialised: every element is written).
    pub(crate) fn map2_here[T: Copy, F: Fn(f32, f32) -> T + Copy](a: &[f32], b: &[f32], dst: &mut [std::mem::MaybeUninit<T>], f: F) {
        for ((d, x), y) in dst.iter_mut().zip(a).zip(b) {
            d.write(f(*x, *y));
        }
    }
}

/// `n` elements to be written whole before they are read ([`assume_init`]):
/// a map's output, which a zeroed one cost a serial memset of (1.3% of
/// MobileNetV3's samples at batch 8, the other thread idle meanwhile).
fn uninit<T>(n: usize) -> Vec<std::mem::MaybeUninit<T>> {
    let mut v = Vec::with_capacity(n);
    // SAFETY: MaybeUninit needs no initialisation; the capacity is n.
    unsafe { v.set_len(n) };
    v
}

/// [`uninit`]'s vector once every element is written.
///
/// # Safety
/// Every element of `v` is initialised.
unsafe fn assume_init<T>(v: Vec<std::mem::MaybeUninit<T>>) -> Vec<T> {
    let mut v = std::mem::ManuallyDrop::new(v);
    // SAFETY: MaybeUninit<T> has T's layout; the caller says every
    // element is initialised; the allocation moves to the new Vec.
    unsafe { Vec::from_raw_parts(v.as_mut_ptr().cast::<T>(), v.len(), v.capacity()) }
}

multiversion! {
    /// `xs[i] = f(xs[i])` on this thread, in the widest instruction set
    /// (a product's epilogue on a block it has finished).
    pub fn map_in_place_here[F: Fn(f32) -> f32 + Copy](xs: &mut [f32], f: F) {
        for x in xs.iter_mut() {
            *x = f(*x);
        }
    }
}

/// The chunk a map of `len` elements gives each task (a few per thread).
fn chunk_of(len: usize) -> usize {
    len.div_ceil(rayon::current_num_threads().max(1) * 4)
        .max(4096)
}

/// `f` over every element, split over the pool's threads when large.
pub fn map(src: &[f32], f: impl Fn(f32) -> f32 + Copy + Send + Sync) -> Vec<f32> {
    map_to(src, f)
}

/// `f` over pairs of elements (equal lengths), split over the pool's
/// threads when large.
pub fn map2<T: Copy + Default + Send + Sync>(
    a: &[f32],
    b: &[f32],
    f: impl Fn(f32, f32) -> T + Copy + Send + Sync,
) -> Vec<T> {
    let mut dst = uninit(a.len().min(b.len()));
    if dst.len() < PARALLEL_MIN {
        map2_here(a, b, &mut dst, f);
    } else {
        let chunk = chunk_of(dst.len());
        crate::kernels::threads::par_chunks(&mut dst, chunk, |i, d| {
            map2_here(&a[i * chunk..][..d.len()], &b[i * chunk..][..d.len()], d, f)
        });
    }
    // SAFETY: the chunks cover dst, and map2_here writes each whole
    unsafe { assume_init(dst) }
}

multiversion! {
    /// `dst[o * block + i] = f(a[o * block + i], b[o])` on this thread, in
    /// the widest instruction set: every block in one call (a call a block
    /// chose the instruction set again for each of MobileNetV3's 576
    /// channels of 49 pixels: a squeeze-excite scale of them 3.2 us at
    /// batch 1, 2.7 with the blocks inside; its nine 25.6 us, 23.6).
    fn map_blocks_here[T: Copy, F: Fn(f32, f32) -> T + Copy](a: &[f32], b: &[f32], block: usize, dst: &mut [std::mem::MaybeUninit<T>], f: F) {
        for ((d, a), &y) in dst.chunks_mut(block).zip(a.chunks(block)).zip(b) {
            for (d, x) in d.iter_mut().zip(a) {
                d.write(f(*x, y));
            }
        }
    }
}

/// `f(a[o * inner + i], b[o])` for every element of `a` (`b.len() *
/// inner` of them): a binary op whose second operand is broadcast over the
/// trailing dims (a per-channel scale `[n, c, 1, 1]` of `[n, c, h, w]`),
/// split over the pool's threads by blocks when large.
pub fn map2_blocks<T: Copy + Default + Send + Sync>(
    a: &[f32],
    b: &[f32],
    inner: usize,
    f: impl Fn(f32, f32) -> T + Copy + Send + Sync,
) -> Vec<T> {
    assert_eq!(a.len(), b.len() * inner, "map2_blocks: a is not b's blocks");
    let mut dst = uninit(b.len() * inner);
    if inner == 0 {
        return Vec::new();
    }
    let run = |d: &mut [std::mem::MaybeUninit<T>], a: &[f32], b: &[f32]| {
        map_blocks_here(a, b, inner, d, f)
    };
    if dst.len() < PARALLEL_MIN {
        run(&mut dst, a, b);
    } else {
        let blocks = chunk_of(dst.len()).div_ceil(inner).max(1);
        crate::kernels::threads::par_chunks(&mut dst, blocks * inner, |i, d| {
            let rows = d.len() / inner;
            run(
                d,
                &a[i * blocks * inner..][..d.len()],
                &b[i * blocks..][..rows],
            )
        });
    }
    // SAFETY: the blocks cover dst, each written whole by map_blocks_here
    unsafe { assume_init(dst) }
}

/// `f` over every element into any element type (comparisons to u8),
/// split over the pool's threads when large: [`map2`] of the slice with
/// itself, the second operand unused.
pub fn map_to<T: Copy + Default + Send + Sync>(
    src: &[f32],
    f: impl Fn(f32) -> T + Copy + Send + Sync,
) -> Vec<T> {
    map2(src, src, move |x, _| f(x))
}

/// Softmax (or log-softmax) of each row of `n` values, rows split over the
/// pool's threads: `exp(x - max) / sum`, as torch's kernel (a row of -inf
/// only is NaN, as there).
pub fn softmax_rows(src: &[f32], n: usize, log: bool) -> Vec<f32> {
    // written row by row by the threads: no serial pass clearing it first
    let mut dst = uninit(src.len());
    if n == 0 {
        // SAFETY: empty
        return unsafe { assume_init(dst) };
    }
    let row = |s: &[f32], d: &mut [std::mem::MaybeUninit<f32>]| softmax_row(s, d, log);
    let rows_per_task = (PARALLEL_MIN / n).max(1);
    if src.len() < PARALLEL_MIN {
        for (s, d) in src.chunks(n).zip(dst.chunks_mut(n)) {
            row(s, d);
        }
    } else {
        let per = n * rows_per_task;
        crate::kernels::threads::par_chunks(&mut dst, per, |i, d| {
            for (s, d) in src[i * per..][..d.len()].chunks(n).zip(d.chunks_mut(n)) {
                row(s, d);
            }
        });
    }
    // SAFETY: each row wrote every element of its row, and the rows cover
    // dst (src.len() is a multiple of n, as the caller's rows)
    unsafe { assume_init(dst) }
}

/// `d` once every element has been written.
///
/// # Safety
/// Every element of `d` is initialised.
unsafe fn written(d: &mut [std::mem::MaybeUninit<f32>]) -> &mut [f32] {
    // SAFETY: same layout; the caller says every element is initialised
    unsafe { &mut *(d as *mut [std::mem::MaybeUninit<f32>] as *mut [f32]) }
}

multiversion! {
    /// One row of softmax (or log-softmax) in the widest instruction set:
    /// the maximum and the sum in 16 lanes, so that both vectorise (a NaN
    /// anywhere makes the row NaN, as torch's). Writes every element of
    /// `d` (as long as `s`).
    pub(crate) fn softmax_row(s: &[f32], d: &mut [std::mem::MaybeUninit<f32>], log: bool) {
        // the elements past the last whole vector in a vector of their
        // own, padded with -inf: every pass vectorised (ViT-B/16's rows of
        // 197 spent more in their last 5 elements, scalar, and in the
        // maximum's reduction than in their 12 vectors)
        let whole = s.len() / 16 * 16;
        let (body, rest) = s.split_at(whole);
        let mut tail = [f32::NEG_INFINITY; 16];
        tail[..rest.len()].copy_from_slice(rest);
        let mut lanes = [f32::NEG_INFINITY; 16];
        for c in body.chunks_exact(16).chain([&tail[..]]) {
            for (m, &v) in lanes.iter_mut().zip(c) {
                *m = if v > *m || v.is_nan() { v } else { *m };
            }
        }
        let max = lanes
            .iter()
            .fold(f32::NEG_INFINITY, |m, &v| if v > m || v.is_nan() { v } else { m });
        // each element's exp written and summed in 16 lanes in one pass,
        // the padded tail's apart: the sums of sum_lanes, in its order
        let d = &mut d[..s.len()];
        let (dbody, drest) = d.split_at_mut(whole);
        let mut acc = [0f32; 16];
        for (o, c) in dbody.chunks_exact_mut(16).zip(body.chunks_exact(16)) {
            for ((a, o), &v) in acc.iter_mut().zip(o.iter_mut()).zip(c) {
                let e = exp_nonpos(v - max);
                o.write(e);
                *a += e;
            }
        }
        for v in tail.iter_mut() {
            *v = exp_nonpos(*v - max);
        }
        for (o, &e) in drest.iter_mut().zip(&tail) {
            o.write(e);
        }
        let sum = acc.iter().sum::<f32>() + tail[..rest.len()].iter().sum::<f32>();
        // SAFETY: the loops above wrote every element
        let d = unsafe { written(d) };
        if log {
            let ls = sum.ln();
            for (o, &v) in d.iter_mut().zip(s) {
                *o = v - max - ls;
            }
        } else {
            let inv = 1.0 / sum;
            d.iter_mut().for_each(|v| *v *= inv);
        }
    }
}

/// Layer norm of each row of `n` values, rows split over the pool's
/// threads: `(x - mean) * rstd * w + b` (`w`, `b` of `n` values, each
/// optional), `rstd = 1 / sqrt(var + eps)` with the biased variance, as
/// torch's kernel; also each row's mean and rstd. One pass for the mean,
/// one for the variance, one to write: candle's ops took ten passes.
pub fn layer_norm_rows(
    src: &[f32],
    n: usize,
    w: Option<&[f32]>,
    b: Option<&[f32]>,
    eps: f32,
) -> (Vec<f32>, Vec<f32>, Vec<f32>) {
    let rows = src.len().checked_div(n).unwrap_or(0);
    // written row by row by the threads: no serial pass clearing it first
    let mut dst = uninit(rows * n);
    let mut stats = vec![(0f32, 0f32); rows];
    if let Some(per) = PARALLEL_MIN.checked_div(n) {
        let per = per.max(1);
        let task = |d: &mut [std::mem::MaybeUninit<f32>], s: &[f32], st: &mut [(f32, f32)]| {
            for ((d, s), st) in d.chunks_mut(n).zip(s.chunks(n)).zip(st.iter_mut()) {
                layer_norm_row(s, d, w, b, eps, st);
            }
        };
        if src.len() < PARALLEL_MIN {
            task(&mut dst, src, &mut stats);
        } else {
            crate::kernels::threads::par_chunks_pair(
                (&mut dst, n * per),
                (&mut stats, per),
                |i, d, st| task(d, &src[i * n * per..][..d.len()], st),
            );
        }
    }
    let (mean, rstd) = stats.into_iter().unzip();
    // SAFETY: each row wrote every element of its row (n == 0: none)
    (unsafe { assume_init(dst) }, mean, rstd)
}

multiversion! {
    /// One row of [`layer_norm_rows`], in the widest instruction set:
    /// writes every element of `d` (as long as `s`; the weight and bias
    /// as long too) in one pass, each step rounded as its own pass would.
    fn layer_norm_row(s: &[f32], d: &mut [std::mem::MaybeUninit<f32>], w: Option<&[f32]>, b: Option<&[f32]>, eps: f32, stats: &mut (f32, f32)) {
        let n = s.len() as f32;
        let mean = sum_lanes(s) / n;
        let mut acc = [0f32; 16];
        let chunks = s.chunks_exact(16);
        let rest = chunks.remainder();
        for c in chunks {
            for (a, x) in acc.iter_mut().zip(c) {
                let v = x - mean;
                *a += v * v;
            }
        }
        let var = (acc.iter().sum::<f32>() + rest.iter().map(|x| (x - mean) * (x - mean)).sum::<f32>()) / n;
        // a row with an infinity, or whose squares overflow, has NaN
        // statistics (and outputs), as torch's Welford moments give
        let mean = if mean.is_finite() { mean } else { f32::NAN };
        let rstd = if var.is_finite() { 1.0 / (var + eps).sqrt() } else { f32::NAN };
        let d = &mut d[..s.len()];
        match (w, b) {
            (Some(w), Some(b)) => {
                let (w, b) = (&w[..s.len()], &b[..s.len()]);
                for (((o, x), w), b) in d.iter_mut().zip(s).zip(w).zip(b) {
                    o.write((x - mean) * rstd * w + b);
                }
            }
            (Some(w), None) => {
                for ((o, x), w) in d.iter_mut().zip(s).zip(&w[..s.len()]) {
                    o.write((x - mean) * rstd * w);
                }
            }
            (None, Some(b)) => {
                for ((o, x), b) in d.iter_mut().zip(s).zip(&b[..s.len()]) {
                    o.write((x - mean) * rstd + b);
                }
            }
            (None, None) => {
                for (o, x) in d.iter_mut().zip(s) {
                    o.write((x - mean) * rstd);
                }
            }
        }
        *stats = (mean, rstd);
    }
}

/// A sum in 16 lanes (vectorisable), then across them.
#[inline(always)]
fn sum_lanes(v: &[f32]) -> f32 {
    let mut acc = [0f32; 16];
    let chunks = v.chunks_exact(16);
    let rest = chunks.remainder();
    for c in chunks {
        for (a, x) in acc.iter_mut().zip(c) {
            *a += x;
        }
    }
    acc.iter().sum::<f32>() + rest.iter().sum::<f32>()
}

/// `dst[c * rows + r] = src[r * cols + c]`: a `rows x cols` matrix
/// transposed, 8 x 8 blocks at a time in AVX registers where the CPU has
/// them (element by element, a column's writes touch a cache line each:
/// 18% of a pointwise convolution over 7 x 7 pixels), the edges one by one.
pub fn transpose(src: &[f32], rows: usize, cols: usize, dst: &mut [f32]) {
    // SAFETY: f32 and MaybeUninit<f32> have one layout; every element
    // transpose_into writes is a float
    let dst = unsafe { &mut *(dst as *mut [f32] as *mut [std::mem::MaybeUninit<f32>]) };
    transpose_into(src, rows, cols, dst);
}

/// [`transpose`] into memory that may be uninitialised: every element of
/// `dst[..rows * cols]` is written.
pub fn transpose_into(
    src: &[f32],
    rows: usize,
    cols: usize,
    dst: &mut [std::mem::MaybeUninit<f32>],
) {
    transpose_blocks::<false>(src, rows, cols, dst.as_mut_ptr().cast(), dst.len());
}

/// `dst[c * rows + r] = src[r * cols + c] + dst[c * rows + r]`: [`transpose`]
/// added to what `dst` holds (a product written over the residual it is
/// added to: the sum in the order of the add after it, so the same bits).
pub fn transpose_add(src: &[f32], rows: usize, cols: usize, dst: &mut [f32]) {
    transpose_blocks::<true>(src, rows, cols, dst.as_mut_ptr(), dst.len());
}

/// Rows of a strip of [`transpose_blocks`] (a multiple of 8).
const STRIP_ROWS: usize = 256;

/// [`transpose_into`] (or with `ADD`, [`transpose_add`]: `dst` then
/// initialised) into the `len` floats at `out`.
fn transpose_blocks<const ADD: bool>(
    src: &[f32],
    rows: usize,
    cols: usize,
    out: *mut f32,
    len: usize,
) {
    assert!(src.len() >= rows * cols && len >= rows * cols);
    // SAFETY: the destination's `rows * cols` floats lie at `out` (checked)
    unsafe { transpose_strided::<ADD>(src, cols, (rows, cols), out, rows) }
}

/// `out[c * ldo + r] = src[r * lds + c]` (with `ADD`, added to what it
/// holds) for the `rows x cols` block: part of a larger transpose (a
/// band of pixels, a block of channels), made as [`transpose_into`]
/// makes a whole one. Panics where `src` is too short.
///
/// # Safety
/// Every `out + c * ldo + r` lies in one buffer that no one else reads or
/// writes meanwhile (initialised, with `ADD`).
pub unsafe fn transpose_strided<const ADD: bool>(
    src: &[f32],
    lds: usize,
    (rows, cols): (usize, usize),
    out: *mut f32,
    ldo: usize,
) {
    if rows == 0 || cols == 0 {
        return;
    }
    assert!(
        src.len() >= (rows - 1) * lds + cols,
        "transpose_strided: source too short"
    );
    transpose_raw::<ADD>(src.as_ptr(), lds, (rows, cols), out, ldo)
}

/// [`transpose_strided`] from a pointer: the block of a matrix whose
/// other elements other threads may be writing meanwhile (a product's
/// finished block, [`crate::kernels::sgemm::gemm_lhs_each`]), which no slice
/// may cover.
///
/// # Safety
/// As [`transpose_strided`], and every `src + r * lds + c` of the block
/// is readable, initialised and written by no one meanwhile.
pub unsafe fn transpose_raw<const ADD: bool>(
    src: *const f32,
    lds: usize,
    (rows, cols): (usize, usize),
    out: *mut f32,
    ldo: usize,
) {
    let (r8, c8) = (rows / 8 * 8, cols / 8 * 8);
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx") {
        let block = |r0: usize, c0: usize| {
            // SAFETY: rows r0..r0 + 8 and columns c0..c0 + 8 lie inside
            // both matrices (the caller's promise); AVX is present.
            unsafe { transpose8::<ADD>(src.add(r0 * lds + c0), lds, out.add(c0 * ldo + r0), ldo) };
        };
        // strips of rows, each block of columns through the strip: the
        // strip's lines of the source stay in L1 from one block of columns
        // to the next, and each line of the destination is written (and
        // with ADD read) whole, a run of lines a row, where rows of blocks
        // one after the other left a line half written, out of L1 before
        // its other half, a line of each of the columns' rows (the pixel
        // rows of ResNet's convolutions, [196, 1024] into [1024, 196], 1.4%
        // faster at batch 8 in ResNet-50; its 3x3s over 14x14 and 7x7
        // 2.6% at batch 1 in ResNet-18)
        for s0 in (0..r8).step_by(STRIP_ROWS) {
            for c0 in (0..c8).step_by(8) {
                for r0 in (s0..r8.min(s0 + STRIP_ROWS)).step_by(8) {
                    block(r0, c0);
                }
            }
        }
    } else {
        // SAFETY: the block, inside both (the caller's promise)
        unsafe { scalar::<ADD>(src, lds, out, ldo, 0..r8, 0..c8) };
    }
    // SAFETY: the block's edges, inside both (the caller's promise)
    unsafe {
        #[cfg(not(target_arch = "x86_64"))]
        scalar::<ADD>(src, lds, out, ldo, 0..r8, 0..c8);
        scalar::<ADD>(src, lds, out, ldo, 0..rows, c8..cols);
        scalar::<ADD>(src, lds, out, ldo, r8..rows, 0..c8);
    }

    /// # Safety
    /// As [`transpose_raw`]'s, for rows `rs` by columns `cs`.
    unsafe fn scalar<const ADD: bool>(
        src: *const f32,
        lds: usize,
        out: *mut f32,
        ldo: usize,
        rs: std::ops::Range<usize>,
        cs: std::ops::Range<usize>,
    ) {
        for r in rs {
            for c in cs.clone() {
                // SAFETY: inside both (the caller's promise); initialised
                // where ADD reads it
                unsafe {
                    let d = out.add(c * ldo + r);
                    let v = *src.add(r * lds + c);
                    *d = if ADD { v + *d } else { v };
                }
            }
        }
    }
}

/// One 8 x 8 block: rows of `src` (stride `ss`) to columns of `dst` (stride
/// `ds`), by the unpack / shuffle / lane-swap sequence; with `ADD`, each
/// added to what `dst` holds.
///
/// # Safety
/// 8 rows of 8 floats at `src` and at `dst` (with their strides) are
/// readable and writable (and initialised, with `ADD`); AVX is present.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx")]
unsafe fn transpose8<const ADD: bool>(src: *const f32, ss: usize, dst: *mut f32, ds: usize) {
    use std::arch::x86_64::*;
    let r: [__m256; 8] = std::array::from_fn(|i| _mm256_loadu_ps(src.add(i * ss)));
    for (i, v) in transpose8x8(r).iter().enumerate() {
        let p = dst.add(i * ds);
        let v = if ADD {
            _mm256_add_ps(*v, _mm256_loadu_ps(p))
        } else {
            *v
        };
        _mm256_storeu_ps(p, v);
    }
}

/// Eight vectors of eight floats transposed (lane `j` of vector `i` to
/// lane `i` of vector `j`) by the unpack / shuffle / lane-swap sequence.
///
/// # Safety
/// AVX is present.
#[cfg(target_arch = "x86_64")]
#[inline]
#[target_feature(enable = "avx")]
pub unsafe fn transpose8x8(r: [std::arch::x86_64::__m256; 8]) -> [std::arch::x86_64::__m256; 8] {
    use std::arch::x86_64::*;
    let t0 = _mm256_unpacklo_ps(r[0], r[1]);
    let t1 = _mm256_unpackhi_ps(r[0], r[1]);
    let t2 = _mm256_unpacklo_ps(r[2], r[3]);
    let t3 = _mm256_unpackhi_ps(r[2], r[3]);
    let t4 = _mm256_unpacklo_ps(r[4], r[5]);
    let t5 = _mm256_unpackhi_ps(r[4], r[5]);
    let t6 = _mm256_unpacklo_ps(r[6], r[7]);
    let t7 = _mm256_unpackhi_ps(r[6], r[7]);
    let u0 = _mm256_shuffle_ps::<0x44>(t0, t2);
    let u1 = _mm256_shuffle_ps::<0xEE>(t0, t2);
    let u2 = _mm256_shuffle_ps::<0x44>(t1, t3);
    let u3 = _mm256_shuffle_ps::<0xEE>(t1, t3);
    let u4 = _mm256_shuffle_ps::<0x44>(t4, t6);
    let u5 = _mm256_shuffle_ps::<0xEE>(t4, t6);
    let u6 = _mm256_shuffle_ps::<0x44>(t5, t7);
    let u7 = _mm256_shuffle_ps::<0xEE>(t5, t7);
    [
        _mm256_permute2f128_ps::<0x20>(u0, u4),
        _mm256_permute2f128_ps::<0x20>(u1, u5),
        _mm256_permute2f128_ps::<0x20>(u2, u6),
        _mm256_permute2f128_ps::<0x20>(u3, u7),
        _mm256_permute2f128_ps::<0x31>(u0, u4),
        _mm256_permute2f128_ps::<0x31>(u1, u5),
        _mm256_permute2f128_ps::<0x31>(u2, u6),
        _mm256_permute2f128_ps::<0x31>(u3, u7),
    ]
}

/// Sixteen vectors of sixteen floats transposed: lane `j` of vector `i`
/// becomes lane `i` of vector `j` (unpacks, then shuffles within and
/// across the 128-bit lanes: 64 shuffles for 256 floats, where the 8 x 8
/// blocks of [`transpose`] take 96).
///
/// # Safety
/// AVX-512F is present.
#[cfg(target_arch = "x86_64")]
#[inline]
#[target_feature(enable = "avx512f")]
pub unsafe fn transpose16(r: [std::arch::x86_64::__m512; 16]) -> [std::arch::x86_64::__m512; 16] {
    use std::arch::x86_64::*;
    let mut t = [_mm512_setzero_ps(); 16];
    for i in 0..8 {
        t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
        t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
    }
    let mut u = [_mm512_setzero_ps(); 16];
    for q in 0..4 {
        let (a, b, c, d) = (t[4 * q], t[4 * q + 1], t[4 * q + 2], t[4 * q + 3]);
        u[4 * q] = _mm512_shuffle_ps::<0x44>(a, c);
        u[4 * q + 1] = _mm512_shuffle_ps::<0xEE>(a, c);
        u[4 * q + 2] = _mm512_shuffle_ps::<0x44>(b, d);
        u[4 * q + 3] = _mm512_shuffle_ps::<0xEE>(b, d);
    }
    for h in 0..2 {
        for i in 0..4 {
            let (a, b) = (u[8 * h + i], u[8 * h + 4 + i]);
            t[8 * h + i] = _mm512_shuffle_f32x4::<0x88>(a, b);
            t[8 * h + 4 + i] = _mm512_shuffle_f32x4::<0xDD>(a, b);
        }
    }
    let mut out = [_mm512_setzero_ps(); 16];
    for i in 0..8 {
        out[i] = _mm512_shuffle_f32x4::<0x88>(t[i], t[8 + i]);
        out[8 + i] = _mm512_shuffle_f32x4::<0xDD>(t[i], t[8 + i]);
    }
    out
}

/// A block's results by pixel to planes: `tile` holds `pixels` pixels of
/// 16 channels (`[pixels][16]`), of which the first `cb` go to `dst`, a
/// plane of `pixels` each (`[cb][pixels]`), sixteen pixels at a time
/// through [`transpose16`].
///
/// # Safety
/// None beyond the sizes, which are checked.
#[cfg(target_arch = "x86_64")]
pub unsafe fn pixels_to_planes(
    tile: &[f32],
    cb: usize,
    pixels: usize,
    dst: &mut [std::mem::MaybeUninit<f32>],
) {
    assert!(cb <= 16 && tile.len() >= pixels * 16 && dst.len() >= cb * pixels);
    pixels_to_planes_at(
        tile.as_ptr(),
        16,
        cb,
        pixels,
        dst.as_mut_ptr().cast(),
        pixels,
    );
}

/// [`pixels_to_planes`] with strides: pixel `p`'s 16 channels at `tile +
/// p * pitch`, channel `ch`'s pixels at `dst + ch * plane` (a line of each
/// plane of an output, say).
///
/// # Safety
/// `pixels` pixels of 16 floats are readable at `tile` and `cb` lines of
/// `pixels` floats writable at `dst` (no other thread writing them).
/// Without AVX-512F, [`transpose_strided`]'s blocks.
#[cfg(target_arch = "x86_64")]
pub unsafe fn pixels_to_planes_at(
    tile: *const f32,
    pitch: usize,
    cb: usize,
    pixels: usize,
    dst: *mut f32,
    plane: usize,
) {
    if pixels == 0 || cb == 0 {
        return;
    }
    if isa() == Isa::Avx512 {
        pixels_to_planes_avx512(tile, pitch, cb, pixels, dst, plane)
    } else {
        let src = std::slice::from_raw_parts(tile, (pixels - 1) * pitch + cb);
        transpose_strided::<false>(src, pitch, (pixels, cb), dst, plane)
    }
}

/// [`pixels_to_planes_at`] through [`transpose16`].
///
/// # Safety
/// As [`pixels_to_planes_at`], and AVX-512F is present.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn pixels_to_planes_avx512(
    tile: *const f32,
    pitch: usize,
    cb: usize,
    pixels: usize,
    dst: *mut f32,
    plane: usize,
) {
    use std::arch::x86_64::*;
    debug_assert!(cb <= 16);
    for p0 in (0..pixels).step_by(16) {
        let np = (pixels - p0).min(16);
        let m = ((1u32 << np) - 1) as __mmask16;
        let r: [__m512; 16] = std::array::from_fn(|j| {
            if j < np {
                _mm512_loadu_ps(tile.add((p0 + j) * pitch))
            } else {
                _mm512_setzero_ps()
            }
        });
        for (ch, v) in transpose16(r).iter().enumerate().take(cb) {
            _mm512_mask_storeu_ps(dst.add(ch * plane + p0), m, *v);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// transpose16 against the definition, on every lane.
    #[test]
    #[cfg(target_arch = "x86_64")]
    fn transpose16_transposes() {
        if !std::arch::is_x86_feature_detected!("avx512f") {
            return;
        }
        use std::arch::x86_64::*;
        let m: Vec<f32> = (0..256).map(|i| i as f32).collect();
        let mut out = vec![0f32; 256];
        // SAFETY: AVX-512F is present; 16 rows of 16 floats each way
        unsafe {
            let r: [__m512; 16] = std::array::from_fn(|i| _mm512_loadu_ps(m.as_ptr().add(i * 16)));
            for (i, v) in transpose16(r).iter().enumerate() {
                _mm512_storeu_ps(out.as_mut_ptr().add(i * 16), *v);
            }
        }
        for i in 0..16 {
            for j in 0..16 {
                assert_eq!(out[j * 16 + i], m[i * 16 + j], "row {i} lane {j}");
            }
        }
    }

    /// Layer norm against a float64 reference: rows of sizes that do and
    /// do not fill the 16 lanes, with weight and bias, either or neither,
    /// rows split over threads or not.
    #[test]
    fn layer_norm_rows_match_a_reference() {
        for (rows, n) in [(3, 1), (5, 17), (2, 768), (200, 48)] {
            let x: Vec<f32> = (0..rows * n)
                .map(|i| ((i * 37 % 101) as f32 - 50.0) * 0.1)
                .collect();
            let w: Vec<f32> = (0..n).map(|i| 0.5 + i as f32 * 0.01).collect();
            let b: Vec<f32> = (0..n).map(|i| i as f32 * -0.02).collect();
            for (wo, bo) in [
                (None, None),
                (Some(&w[..]), Some(&b[..])),
                (Some(&w[..]), None),
                (None, Some(&b[..])),
            ] {
                let (y, mean, rstd) = layer_norm_rows(&x, n, wo, bo, 1e-5);
                for r in 0..rows {
                    let row: Vec<f64> = x[r * n..(r + 1) * n].iter().map(|v| *v as f64).collect();
                    let m = row.iter().sum::<f64>() / n as f64;
                    let var = row.iter().map(|v| (v - m) * (v - m)).sum::<f64>() / n as f64;
                    let rs = 1.0 / (var + 1e-5).sqrt();
                    assert!(
                        (mean[r] as f64 - m).abs() < 1e-5
                            && (rstd[r] as f64 - rs).abs() < 1e-4 * rs
                    );
                    for c in 0..n {
                        let want = (row[c] - m) * rs * wo.map_or(1.0, |w| w[c] as f64)
                            + bo.map_or(0.0, |b| b[c] as f64);
                        let got = y[r * n + c] as f64;
                        assert!(
                            (got - want).abs() < 1e-4 * (1.0 + want.abs()),
                            "{rows}x{n} ({r}, {c}): {got} vs {want}"
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn transpose_matches_element_by_element() {
        // (and transpose_add, the sum)
        for (rows, cols) in [
            (49, 576),
            (8, 8),
            (1, 17),
            (17, 1),
            (9, 23),
            (0, 5),
            (64, 96),
            // strips of rows: two and a part, the last rows' edge
            (530, 19),
        ] {
            let src: Vec<f32> = (0..rows * cols).map(|i| i as f32).collect();
            let mut dst = vec![f32::NAN; rows * cols];
            transpose(&src, rows, cols, &mut dst);
            // added to what dst holds: the sum in that order, to the bit
            let held: Vec<f32> = (0..rows * cols)
                .map(|i| (i % 13) as f32 * 0.37 - 1.1)
                .collect();
            let mut sum = held.clone();
            transpose_add(&src, rows, cols, &mut sum);
            for r in 0..rows {
                for c in 0..cols {
                    let (at, v) = (c * rows + r, src[r * cols + c]);
                    assert_eq!(dst[at], v, "{rows}x{cols} at ({r}, {c})");
                    assert_eq!(
                        sum[at].to_bits(),
                        (v + held[at]).to_bits(),
                        "{rows}x{cols} at ({r}, {c}), added"
                    );
                }
            }
        }
    }

    fn grid() -> Vec<f32> {
        let mut v: Vec<f32> = (-200_000..=200_000).map(|i| i as f32 * 1e-4).collect();
        v.extend((-1000..=1000).map(|i| i as f32 * 0.1));
        v.extend([0.0, -0.0, 1e-30, -1e-30, 88.0, -88.0, 90.0, -90.0, -104.0]);
        v
    }

    fn check(
        name: &str,
        f: impl Fn(f32) -> f32 + Copy + Send + Sync,
        r: impl Fn(f64) -> f64,
        rel: f64,
        abs: f64,
    ) {
        let xs = grid();
        let got = map(&xs, f);
        for (x, g) in xs.iter().zip(&got) {
            let want = r(*x as f64);
            let err = (*g as f64 - want).abs();
            assert!(
                err <= abs + rel * want.abs() || (want as f32).is_infinite() && *g == want as f32,
                "{name}({x}) = {g}, want {want} (error {err:e})"
            );
        }
        assert!(f(f32::NAN).is_nan(), "{name}(NaN)");
    }

    #[test]
    fn functions_match_float64() {
        check("exp", exp, f64::exp, 3e-7, 1e-37);
        // (the exp without overflow, on the grid folded to x <= 0)
        check(
            "exp_nonpos",
            |x| exp_nonpos(-x.abs()),
            |x| (-x.abs()).exp(),
            3e-7,
            1e-37,
        );
        check("tanh", tanh, f64::tanh, 0.0, 3e-7);
        check("erf", erf, erf64, 0.0, 3e-7);
        check(
            "sigmoid",
            sigmoid,
            |x| 1.0 / (1.0 + (-x).exp()),
            3e-7,
            1e-30,
        );
        check("silu", silu, |x| x / (1.0 + (-x).exp()), 1e-6, 1e-30);
        check(
            "gelu_erf",
            gelu_erf,
            |x| 0.5 * x * (1.0 + erf64(x / 2f64.sqrt())),
            1e-6,
            3e-7,
        );
        check(
            "gelu_tanh",
            gelu_tanh,
            |x| {
                0.5 * x
                    * (1.0
                        + ((2.0 / std::f64::consts::PI).sqrt() * (x + 0.044715 * x * x * x)).tanh())
            },
            1e-6,
            3e-7,
        );
        assert_eq!(exp(f32::NEG_INFINITY), 0.0);
        assert_eq!(exp(f32::INFINITY), f32::INFINITY);
        assert_eq!(exp_nonpos(f32::NEG_INFINITY), 0.0);
        assert!(exp_nonpos(f32::NAN).is_nan());
        // erf is +-1 from 4 on, GELU x above and 0 below; at the
        // infinities torch's float kernels (golden/dtypes, aten.gelu):
        // NaN at -inf (-inf times 0) and, exact form, at +inf too; tanh
        // form +inf there; past half the largest float, x * 2 overflows
        assert_eq!((erf(4.5), erf(-4.5), erf(f32::INFINITY)), (1.0, -1.0, 1.0));
        assert_eq!(gelu_erf(-7.0), 0.0);
        assert!(gelu_erf(f32::NEG_INFINITY).is_nan() && gelu_erf(f32::INFINITY).is_nan());
        assert!(gelu_tanh(f32::NEG_INFINITY).is_nan());
        assert_eq!(gelu_tanh(f32::INFINITY), f32::INFINITY);
        assert_eq!(gelu_erf(f32::MAX), f32::INFINITY);
        assert_eq!(tanh(f32::INFINITY), 1.0);
        assert_eq!(tanh(f32::NEG_INFINITY), -1.0);
    }

    /// erf in float64 by its series and continued fraction (reference).
    fn erf64(x: f64) -> f64 {
        let ax = x.abs();
        let y = if ax < 3.0 {
            // Taylor series: 2/sqrt(pi) sum (-1)^n x^(2n+1) / (n! (2n+1))
            let (mut term, mut sum, mut n) = (ax, ax, 0.0);
            while term.abs() > 1e-17 * sum.abs() {
                n += 1.0;
                term *= -ax * ax / n;
                sum += term / (2.0 * n + 1.0);
            }
            sum * 2.0 / std::f64::consts::PI.sqrt()
        } else {
            // erfc by its continued fraction
            let mut f = 0.0;
            for k in (1..60).rev() {
                f = (k as f64 / 2.0) / (ax + f);
            }
            1.0 - (-ax * ax).exp() / std::f64::consts::PI.sqrt() / (ax + f)
        };
        y.copysign(x)
    }

    #[test]
    fn softmax_rows_match_float64() {
        // rows of one vector and less, whole vectors, and vectors and a
        // tail (ViT's 197)
        for n in [1, 5, 16, 32, 70, 197] {
            let xs: Vec<f32> = (0..3 * n)
                .map(|i| ((i * 37) % 101) as f32 * 0.3 - 15.0)
                .collect();
            for log in [false, true] {
                let got = softmax_rows(&xs, n, log);
                for (s, g) in xs.chunks(n).zip(got.chunks(n)) {
                    let max = s.iter().fold(f64::MIN, |m, v| m.max(*v as f64));
                    let sum: f64 = s.iter().map(|v| (*v as f64 - max).exp()).sum();
                    for (v, g) in s.iter().zip(g) {
                        let want = if log {
                            *v as f64 - max - sum.ln()
                        } else {
                            (*v as f64 - max).exp() / sum
                        };
                        assert!(
                            (*g as f64 - want).abs() < 1e-6 * (1.0 + want.abs()),
                            "rows of {n}: {g} vs {want}"
                        );
                    }
                }
            }
        }
        // a NaN anywhere in a row, in its vectors or its tail, makes it NaN
        for at in [3, 20] {
            let mut row = vec![0.5f32; 21];
            row[at] = f32::NAN;
            assert!(
                softmax_rows(&row, 21, false).iter().all(|v| v.is_nan()),
                "NaN at {at}"
            );
        }
        // masked rows: -inf gives 0; a row of -inf only is NaN, as torch
        let masked = [0.0, f32::NEG_INFINITY, 1.0, f32::NEG_INFINITY];
        let got = softmax_rows(&masked, 2, false);
        assert_eq!(got[1], 0.0);
        assert!((got[0] - 1.0).abs() < 1e-7);
        let got = softmax_rows(&[f32::NEG_INFINITY; 3], 3, false);
        assert!(got.iter().all(|v| v.is_nan()));
    }
}

#[cfg(test)]
mod speed {
    /// `cargo test --release -p pt2kit --features exec --lib vmath_speed -- --ignored --nocapture`
    #[test]
    #[ignore]
    fn vmath_speed() {
        let xs: Vec<f32> = (0..4_718_592)
            .map(|i| (i % 1000) as f32 * 0.01 - 5.0)
            .collect();
        macro_rules! time {
            ($($f:path),*) => {$(
                let t = std::time::Instant::now();
                let y = super::map(&xs, $f);
                eprintln!("{}: {:.2} ms ({})", stringify!($f), t.elapsed().as_secs_f64() * 1e3, y[7]);
            )*};
        }
        // softmax over ViT-B/16's attention rows at batch 8 (96 x 197
        // rows of 197), twice: cold then warm
        let rows: Vec<f32> = (0..96 * 197 * 197)
            .map(|i| (i % 997) as f32 * 0.01 - 5.0)
            .collect();
        for _ in 0..3 {
            let t = std::time::Instant::now();
            let y = super::softmax_rows(&rows, 197, false);
            let e = t.elapsed().as_secs_f64();
            eprintln!(
                "softmax_rows 197: {:.2} ms, {:.3} ns an element ({})",
                e * 1e3,
                e * 1e9 / rows.len() as f64,
                y[7]
            );
        }
        // in place over a warm buffer of one Linear(768, 3072)'s output
        // at 197 rows (the GELU epilogue's work), per element
        let mut warm: Vec<f32> = xs[..605_184].to_vec();
        macro_rules! warm {
            ($($f:path),*) => {$(
                let mut best = f64::MAX;
                for _ in 0..20 {
                    warm.copy_from_slice(&xs[..605_184]);
                    let t = std::time::Instant::now();
                    super::map_in_place_here(&mut warm, $f);
                    best = best.min(t.elapsed().as_secs_f64());
                }
                eprintln!("{} in place: {:.3} ns an element ({})", stringify!($f), best * 1e9 / warm.len() as f64, warm[7]);
            )*};
        }
        warm!(
            super::exp,
            super::tanh,
            super::erf,
            super::gelu_erf,
            super::gelu_tanh
        );
        time!(
            super::exp,
            super::tanh,
            super::erf,
            super::gelu_erf,
            super::gelu_tanh,
            super::sigmoid
        );
    }
}
