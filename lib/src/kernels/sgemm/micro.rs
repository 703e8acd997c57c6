//! The packed product's micro-kernels: an `MR x NR` block of C from a
//! slice of `k` ([`kernel`] on AVX-512; on AVX2 [`kernel_avx2`] and
//! [`avx2_part`], parts of up to six rows by 16 columns), written once
//! over 16-lane vectors ([`kernel_body`]).

use super::*;

/// A micro-kernel: see [`kernel`].
pub(super) type Kernel = unsafe fn(
    usize,
    *const f32,
    usize,
    usize,
    *const f32,
    usize,
    *mut f32,
    usize,
    usize,
    usize,
    bool,
    BiasAt,
    *const f32,
);

/// The kernel instance for a block of `mr` rows and `nr` columns: one that
/// computes only the rows there are (a product of one row, a linear layer
/// on one token, would otherwise spend 12 times the multiply-adds it
/// needs), and one vector of columns where 16 are enough.
pub(super) fn kernel_for(mr: usize, nr: usize) -> Kernel {
    if avx512() {
        instance_for!(kernel, mr, nr)
    } else {
        kernel_avx2
    }
}

/// One `MR x NR` block of C from `kc` steps of A and packed B: C = A B (or
/// C += A B, or C = A B + bias: `nr` floats from a [`BiasAt::Columns`],
/// one a column, or `mr` from a [`BiasAt::Rows`], one a row), A's element (i, p) at `a + i * lda + p * step` (packed: `lda`
/// 1, `step` MR; rows in place: `lda` the row stride, `step` 1), writing
/// only the first `mr` rows and `nr` columns, computing
/// the first `R` rows (at least `mr`) and `16 * W` columns (at least `nr`); with a
/// non-null `prefetch`, the micro-panel there (the next B
/// micro-panel) is fetched into the cache on the way (measured: BERT-base
/// 68.9 to 64.4 ms, ViT-B/16 123 to 119 ms). On AVX-512: `R x W` registers
/// of accumulators, 24 of the 32 at most.
///
/// # Safety
/// A's `mr` rows of `kc` steps are readable; `b` and `b + bh` each hold
/// `kc * HALF` floats, a micro-panel's left and right halves (and so do
/// `prefetch` and `prefetch + bh`, unless null); C's `mr` rows of `nr` columns at
/// stride `ldc` are writable; `bias` holds the floats it names;
/// AVX-512F is present.
#[allow(clippy::too_many_arguments)]
#[target_feature(enable = "avx512f")]
pub(super) unsafe fn kernel<const R: usize, const W: usize>(
    kc: usize,
    a: *const f32,
    lda: usize,
    step: usize,
    b: *const f32,
    bh: usize,
    c: *mut f32,
    ldc: usize,
    mr: usize,
    nr: usize,
    accumulate: bool,
    bias: BiasAt,
    prefetch: *const f32,
) {
    kernel_body::<Avx512, R, W, false, 0>(
        kc, a, lda, step, b, bh, c, ldc, mr, nr, accumulate, bias, prefetch,
    )
}

/// Rows of an AVX2 kernel's block: 6 rows of 16 columns (two registers
/// each) are 12 of AVX2's 16 registers, as in BLIS's Haswell kernel.
pub(super) const AVX2_ROWS: usize = 6;

/// A block's `mr` rows as even parts of at most [`AVX2_ROWS`] (first
/// row, rows): 8 as 4 + 4, not 6 + 2, whose 4 accumulators leave the FMA
/// units waiting on their latency.
pub(super) fn avx2_parts(mr: usize) -> impl Iterator<Item = (usize, usize)> {
    let parts = mr.div_ceil(AVX2_ROWS).max(1);
    (0..parts).map(move |p| (p * mr / parts, (p + 1) * mr / parts - p * mr / parts))
}

/// [`kernel`] on AVX2 + FMA: the block in parts of up to [`AVX2_ROWS`]
/// rows by 16 columns, each over all of `kc` (the B micro-panel stays in
/// L1 between them). The next B micro-panel (`prefetch`, unless null) is
/// fetched into L2, not L1, while the first part runs: its 32 KiB into a
/// Zen 3's 32 KiB L1 evicted the panels the later parts read (those of A
/// and B, 28 KiB; the MLP at batch 512 0.90-0.95x on one thread without
/// it, ResNet-50 b1 0.91x, ViT-B/16 b1 0.93x). Into L2 it pays where the
/// next panel is another tap's weight from memory ([`gemm_taps`]):
/// ResNet-50's stride-2 3x3 over 512 channels into 7x7 0.79x / 0.83x of
/// its time on one / two threads, its 3x3 over 7x7 0.77x / 0.75x,
/// ResNet-50 b1 0.94x, interleaved on the 2-vCPU AVX2 VM. The packed
/// product ([`gemm`]) names none here on AVX2 (rows outer, its first part
/// through a block fetches that block ahead: [`AHEAD_STEPS`]).
///
/// # Safety
/// As [`kernel`], with AVX2 and FMA present instead of AVX-512F.
#[allow(clippy::too_many_arguments)]
#[target_feature(enable = "avx2,fma")]
pub(super) unsafe fn kernel_avx2(
    kc: usize,
    a: *const f32,
    lda: usize,
    step: usize,
    b: *const f32,
    bh: usize,
    c: *mut f32,
    ldc: usize,
    mr: usize,
    nr: usize,
    accumulate: bool,
    bias: BiasAt,
    prefetch: *const f32,
) {
    if mr <= 2 && nr > 16 {
        // a row or two (a linear layer at batch 1, or 2): the whole
        // micro-panel in one pass, four chains of FMAs a row instead of
        // two, the panel read once in order (in parts it is read twice,
        // each half a line in two): [1, 1024] x [1024, 1000] 14-17 ->
        // 21-23 GFLOP/s warm, [1, 576] x [576, 1024] 14-18 -> 23-27, [2,
        // 1024] x [1024, 1000] 25 -> 44-49; MobileNetV3's two linears at
        // batch 1 0.65 -> 0.52 ms on one thread
        match mr {
            1 => kernel_body::<Avx2, 1, 2, true, 0>(
                kc, a, lda, step, b, bh, c, ldc, mr, nr, accumulate, bias, prefetch,
            ),
            _ => kernel_body::<Avx2, 2, 2, true, 0>(
                kc, a, lda, step, b, bh, c, ldc, mr, nr, accumulate, bias, prefetch,
            ),
        }
        return;
    }
    for j in (0..nr).step_by(16) {
        let cols = (nr - j).min(16);
        for (i, rows) in avx2_parts(mr) {
            let (a, c) = (a.add(i * lda), c.add(i * ldc + j));
            let bias = bias.at(i, j);
            let pf = if i == 0 && j == 0 {
                prefetch
            } else {
                std::ptr::null()
            };
            let b = (b.add(j / HALF * bh), bh);
            avx2_part::<0>(
                rows,
                kc,
                (a, lda, step),
                b,
                c,
                ldc,
                cols,
                accumulate,
                bias,
                pf,
            );
        }
    }
}

/// One part of an AVX2 block ([`kernel_avx2`], [`rows_outer`]): `rows`
/// (up to [`AVX2_ROWS`]) of A (`a`, its row stride and step) by `cols`
/// columns of C at `c`, 16 a half micro-panel, the halves `bh` floats
/// apart from `b` on (a panel's two, then the next panel's), each half's
/// columns of C 16 on. Where `prefetch` is not null, each half fetches
/// the lines from there (the first half's; the next half's `bh` on) as
/// [`kernel_body`] does. With `MODE` [`STORE_RELU`] or
/// [`STORE_HARDSWISH`], each element's relu or hardswish is stored (a
/// block's last slice of `k`, whose chain is that alone: no pass over
/// the part's rows after). One call for the row of
/// halves, not one a half (the call and the choice of instance were
/// paid for each 16 columns): interleaved call by call on the 2-vCPU
/// AVX2 VM, one / two threads, `72 x 3136 x 16` 0.82x / 0.80x of its time,
/// `72 x 3136 x 32` 0.87x, `256 x 3136 x 64` 0.92x / 0.92x, GPT-2's and
/// ViT-B/16's products 0.97-1.0x.
///
/// # Safety
/// As [`kernel_body`] for each half, with AVX2 and FMA present.
#[allow(clippy::too_many_arguments)]
#[target_feature(enable = "avx2,fma")]
pub(super) unsafe fn avx2_part<const MODE: u8>(
    rows: usize,
    kc: usize,
    (a, lda, step): (*const f32, usize, usize),
    (b, bh): (*const f32, usize),
    c: *mut f32,
    ldc: usize,
    cols: usize,
    accumulate: bool,
    bias: BiasAt,
    prefetch: *const f32,
) {
    macro_rules! rows {
        ($($r:literal)*) => {
            match rows {
                $($r => {
                    for (h, j) in (0..cols).step_by(HALF).enumerate() {
                        let b = b.add(h * bh);
                        let pf = if prefetch.is_null() {
                            prefetch
                        } else {
                            prefetch.wrapping_add(h * bh)
                        };
                        kernel_body::<Avx2, $r, 1, true, MODE>(
                            kc, a, lda, step, b, bh, c.add(j), ldc, rows, (cols - j).min(HALF),
                            accumulate, bias.at(0, j), pf,
                        );
                    }
                })*
                _ => unreachable!("avx2_part: at most {AVX2_ROWS} rows"),
            }
        };
    }
    rows!(1 2 3 4 5 6);
}

/// An [`avx2_part`] instance (its store mode chosen once a block).
pub(super) type AvxPart = unsafe fn(
    usize,
    usize,
    (*const f32, usize, usize),
    (*const f32, usize),
    *mut f32,
    usize,
    usize,
    bool,
    BiasAt,
    *const f32,
);

/// A step's prefetch in [`kernel_body`]: two cache lines of the next
/// micro-panel (its halves at `pf` and `pf + bh`), all of it by the end
/// of the steps, into L2 (`L2`) or L1.
#[inline(always)]
pub(super) fn prefetch_step<const L2: bool>(pf: *const f32, bh: usize) {
    use std::arch::x86_64::*;
    let (p0, p1) = (pf as *const i8, pf.wrapping_add(bh) as *const i8);
    // SAFETY: a prefetch reads nothing and does not fault
    unsafe {
        if L2 {
            _mm_prefetch::<_MM_HINT_T1>(p0);
            _mm_prefetch::<_MM_HINT_T1>(p1);
        } else {
            _mm_prefetch::<_MM_HINT_T0>(p0);
            _mm_prefetch::<_MM_HINT_T0>(p1);
        }
    }
}

/// What [`kernel`] and [`kernel_avx2`] run, over 16-lane vectors `S`.
///
/// # Safety
/// As [`kernel`], on a CPU with `S`'s instruction set.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
pub(super) unsafe fn kernel_body<
    S: F32x16,
    const R: usize,
    const W: usize,
    const L2: bool,
    const MODE: u8,
>(
    kc: usize,
    a: *const f32,
    lda: usize,
    step: usize,
    b: *const f32,
    bh: usize,
    c: *mut f32,
    ldc: usize,
    mr: usize,
    nr: usize,
    accumulate: bool,
    bias: BiasAt,
    prefetch: *const f32,
) {
    debug_assert!(mr <= R && nr <= 16 * W);
    let (mut ap, mut bp) = (a, b);
    let mut pf = prefetch;
    // the accumulators start at the first step's products (an FMA onto
    // zero: the loop's bits), not zeroed: on AVX-512 the zeroed array
    // was a memset on the stack and loads every call
    let zero = S::zero();
    let mut acc: [[S; W]; R] = if kc == 0 {
        [[zero; W]; R]
    } else {
        if !pf.is_null() {
            prefetch_step::<L2>(pf, bh);
            pf = pf.add(HALF);
        }
        // (loops, not `std::array::from_fn`, whose closures are calls
        // without this kernel's instruction set: see `simd`)
        let mut bv = [zero; W];
        for (j, v) in bv.iter_mut().enumerate() {
            *v = S::load(bp.add(bh * j));
        }
        let mut first = [[zero; W]; R];
        for (i, r) in first.iter_mut().enumerate() {
            let av = S::splat(*ap.add(i * lda));
            for (c, v) in r.iter_mut().zip(&bv) {
                *c = av.fma(*v, zero);
            }
        }
        ap = ap.add(step);
        bp = bp.add(HALF);
        first
    };
    for _ in 1..kc {
        if !pf.is_null() {
            prefetch_step::<L2>(pf, bh);
            pf = pf.add(HALF);
        }
        let mut bv = [S::zero(); W];
        for (j, v) in bv.iter_mut().enumerate() {
            *v = S::load(bp.add(bh * j));
        }
        for (i, row) in acc.iter_mut().enumerate() {
            let av = S::splat(*ap.add(i * lda));
            for (c, v) in row.iter_mut().zip(&bv) {
                *c = av.fma(*v, *c);
            }
        }
        ap = ap.add(step);
        bp = bp.add(HALF);
    }
    let (m0, m1) = (first(nr), first(nr.saturating_sub(16)));
    let mut bv = [S::zero(); W];
    if let BiasAt::Columns(bias) = bias {
        for (j, (v, m)) in bv.iter_mut().zip([m0, m1]).enumerate() {
            *v = S::load_mask(m, bias.add(16 * j));
        }
    }
    for (i, row) in acc.iter().enumerate().take(mr) {
        let cp = c.add(i * ldc);
        for (j, (v, m)) in row.iter().zip([m0, m1]).enumerate() {
            let mut v = *v;
            if accumulate {
                v = v.add(S::load_mask(m, cp.add(16 * j)));
            } else {
                match bias {
                    BiasAt::None => {}
                    BiasAt::Columns(_) => v = v.add(bv[j]),
                    BiasAt::Rows(b) => v = v.add(S::splat(*b.add(i))),
                }
            }
            // the chain's relu (NaN and -0 kept: its max) or hardswish,
            // as the direct kernel applies them (`panels::STORE_RELU`)
            if MODE & STORE_RELU != 0 {
                v = S::zero().max(v);
            }
            if MODE & STORE_HARDSWISH != 0 {
                v = chain::hardswish(v);
            }
            if m == 0xffff {
                v.store(cp.add(16 * j));
            } else {
                v.store_mask(m, cp.add(16 * j));
            }
        }
    }
}
