//! Direct products: B's columns read where they lie, in panels of
//! output positions (a convolution with no im2col): see [`gemm_direct`].

use super::*;

/// Up to this many column panels, a direct product goes row panel by row
/// panel through all of them (see [`gemm_direct`]).
const FEW_PANELS: usize = 4;

/// A run of one column panel's lanes in a direct product's C: lane `l`
/// (bit `l` of `mask` set) is column `at + l` of C's rows.
#[derive(Clone, Copy, Debug)]
pub struct Run {
    pub mask: u32,
    pub at: isize,
}

/// The column panels of a direct product ([`gemm_direct`]): panel `p`
/// reads B's row `r` as the [`NR`] floats at `src[base[p] + offs[r] -
/// shift..]` (only the lanes it writes, or with tap masks those of its
/// mask for the row: nothing else need exist) and writes its lanes to C
/// by `runs[first[p]..first[p + 1]]`.
///
/// Tap masks (`taps` > 0): B's rows come in groups of `taps` (a channel's
/// taps), and panel `p` reads row `r`'s lanes of `masks[p * taps + r %
/// taps]` only, the others zero: a convolution reading its input in
/// place, where a lane whose tap falls in the padding reads nothing.
#[derive(Clone, Debug, Default)]
pub struct Panels {
    pub base: Vec<usize>,
    pub first: Vec<usize>,
    pub runs: Vec<Run>,
    pub taps: usize,
    pub masks: Vec<u32>,
    pub shift: usize,
}

impl Panels {
    /// A panel reading from `base`, writing by `runs` (lanes with no run
    /// are computed and dropped).
    pub fn push(&mut self, base: usize, runs: impl IntoIterator<Item = Run>) {
        if self.first.is_empty() {
            self.first.push(0);
        }
        self.base.push(base);
        self.runs.extend(runs);
        self.first.push(self.runs.len());
    }

    pub fn len(&self) -> usize {
        self.base.len()
    }

    /// The bytes its vectors hold.
    pub fn bytes(&self) -> usize {
        use std::mem::size_of;
        (self.base.len() + self.first.len()) * size_of::<usize>()
            + self.runs.len() * size_of::<Run>()
            + self.masks.len() * 4
    }

    pub fn is_empty(&self) -> bool {
        self.base.is_empty()
    }

    pub(super) fn runs(&self, p: usize) -> &[Run] {
        &self.runs[self.first[p]..self.first[p + 1]]
    }

    /// Panel `p`'s load mask per tap: its tap masks, or the lanes it
    /// writes (in `one`) under every row.
    fn masks<'a>(&'a self, p: usize, one: &'a mut [u32; 1]) -> &'a [u32] {
        if self.taps == 0 {
            one[0] = loads(self.runs(p));
            &one[..]
        } else {
            &self.masks[p * self.taps..(p + 1) * self.taps]
        }
    }
}

/// The lanes a panel of `runs` reads from B: from the first it writes to
/// the last, those between too (a row's lanes are one run of memory, so
/// they lie inside B where those two do). A panel of a padded grid that
/// drops a column past an output line between its runs then loads its
/// rows whole, not through a mask each: on AVX2, where a masked load is
/// emulated, every panel of a stride-2 3x3 took the masked loop (ResNet-18
/// at batch 1 on two threads, interleaved: its stride-2 3x3s 0.84x, 0.91x
/// and 0.95x of their time, the run 0.95x).
fn loads(runs: &[Run]) -> u32 {
    let m = runs.iter().fold(0u32, |m, r| m | r.mask);
    if m == 0 {
        return 0;
    }
    let (lo, hi) = (m.trailing_zeros(), 32 - m.leading_zeros());
    (u32::MAX >> (32 - (hi - lo))) << lo
}

/// `C = A B (+ bias per row)` where B's columns come in panels that are
/// read where they lie ([`Panels`]): a direct convolution, whose B rows
/// are the input under each tap at [`NR`] output positions, offsets into a
/// padded, stride-phased copy of the images, with no im2col and no
/// packing; the kernel writes each lane where its output position lies in
/// C (the positions of a panel need not be contiguous: a panel may cross
/// output lines, or hold padding columns that are computed and dropped).
/// Blocked as [`gemm`] is (MC blocks of rows, NC blocks of panels) but
/// with no slices of `k`: each block of C is made in one pass (at batch 8,
/// ResNet-18's 512-channel 3x3s took 6.5 ms in slices of 256, 5.2 ms in
/// one; its 56x56 ones 5.2 and 4.6); the threads take blocks of rows by
/// panels, several each.
///
/// C may be uninitialised (a fresh output: no pass clearing it first):
/// the elements the runs name are written (with `k` of at least 1; the
/// epilogue reads only those), no other is read or written. With
/// `accumulate`, each of those elements is added to what C holds there
/// (after the bias: `(A B + bias) + C`, the order of a residual add after
/// the convolution, so the bits are the fused add's): C is then
/// initialised, a dead residual the output overwrites, the add reading
/// the line it writes (no line of a fresh output read for ownership).
///
/// # Safety
/// No two lanes (of any panels) write the same element of C, and `c` is
/// not read or written by anyone else during the call. (Reads and writes
/// are checked to be inside `src` and `c`: a bad offset panics.)
#[allow(clippy::too_many_arguments)]
pub unsafe fn gemm_direct(
    a: Lhs,
    src: &[f32],
    offs: &[usize],
    panels: &Panels,
    c: &mut [std::mem::MaybeUninit<f32>],
    ldc: usize,
    bias: Option<&[f32]>,
    accumulate: bool,
    epilogue: Option<&Epilogue>,
    threads: usize,
) {
    assert!(
        available() && offs.len() == a.k,
        "gemm_direct: the offsets are not A's k"
    );
    assert!(
        bias.is_none_or(|b| b.len() >= a.m),
        "gemm_direct: a bias per row"
    );
    let (m, k, np) = (a.m, a.k, panels.len());
    if m == 0 || np == 0 {
        return;
    }
    // every read and every write in bounds
    if let Some(e) = epilogue {
        assert!(
            e.steps.iter().all(|s| match s.b {
                EpiSrc::Input(i) => e.inputs.get(i).is_some_and(|v| v.len() >= c.len()),
                EpiSrc::Const(_) => true,
            }),
            "gemm_direct: an epilogue's input is shorter than C"
        );
    }
    // each tap's nearest and farthest row, against each panel's lanes
    let taps = panels.taps.max(1);
    assert!(
        offs.len().is_multiple_of(taps)
            && panels.masks.len() == if panels.taps == 0 { 0 } else { np * taps },
        "gemm_direct: tap masks that are not the rows' and panels'"
    );
    let reach: Vec<(usize, usize)> = (0..taps)
        .map(|t| {
            let of_tap = offs.iter().skip(t).step_by(taps);
            (
                of_tap.clone().min().map_or(0, |&o| o),
                of_tap.max().map_or(0, |&o| o),
            )
        })
        .collect();
    assert!(
        (0..np).all(|p| {
            let mut one = [0];
            panels
                .masks(p, &mut one)
                .iter()
                .zip(&reach)
                .all(|(&mask, &(near, far))| {
                    let (lo, hi) = (
                        mask.trailing_zeros() as usize,
                        32 - mask.leading_zeros() as usize,
                    );
                    mask == 0
                        || (panels.base[p] + near + lo >= panels.shift
                            && panels.base[p] + far + hi <= src.len() + panels.shift)
                })
        }),
        "gemm_direct: a panel reads outside the input"
    );
    let rows = (m - 1) * ldc;
    assert!(
        panels.runs.iter().all(|r| {
            let (lo, hi) = (
                r.mask.trailing_zeros() as isize,
                31 - r.mask.leading_zeros() as isize,
            );
            r.mask != 0 && r.at + lo >= 0 && ((r.at + hi) as usize) + rows < c.len()
        }),
        "gemm_direct: a panel writes outside C"
    );
    if k == 0 {
        return;
    }
    let mp = m.div_ceil(MR);
    // an epilogue that is a relu or a hardswish alone is applied as each
    // element is stored (no pass over the finished block; see
    // `STORE_RELU`, `STORE_HARDSWISH`)
    let (epilogue, mode) = match epilogue {
        Some(e) if e.relu_only() => (None, STORE_RELU),
        Some(e) if e.hardswish_only() && !accumulate => (None, STORE_HARDSWISH),
        _ => (epilogue, 0),
    };
    let mode = mode | if accumulate { STORE_ADD } else { 0 };
    let threads = if m * np * NR * k < PARALLEL_MIN_MACS {
        1
    } else {
        threads.max(1)
    };
    let cptr = SendPtr(c.as_mut_ptr().cast::<f32>());
    let run = |rows: std::ops::Range<usize>, cols: std::ops::Range<usize>| {
        // SAFETY: reads and writes checked above; parts write disjoint
        // lanes (the caller's promise) or disjoint rows.
        unsafe {
            direct_block(
                &a,
                src,
                offs,
                panels,
                cptr,
                ldc,
                (bias, mode),
                epilogue,
                rows,
                cols,
            )
        }
    };
    if threads == 1 || (mp == 1 && np == 1) {
        run(0..mp, 0..np);
        return;
    }
    if np >= 8 * threads {
        // blocks of panels, a multiple of the threads in number (7 blocks
        // left 4 against 3 on ResNet-18's 56x56 stage at batch 1), at
        // least four a thread (ResNet-50's 28x28 stage at batch 1 was two:
        // 0.97x of the whole run with eight, interleaved), taken as the
        // threads come free; each reads all of A
        let parts = (threads * 4)
            .max(np.div_ceil(NC_PANELS))
            .next_multiple_of(threads)
            .min(np);
        crate::kernels::threads::par_for(parts, |t| {
            run(0..mp, t * np / parts..(t + 1) * np / parts)
        });
        return;
    }
    // few panels: tasks of (row panels x panels), at least four a thread,
    // rows in even blocks of up to MC_PANELS (a split of the 7 panels of a
    // 14x14 image left 4 against 3)
    let (rb, cb) = if np <= FEW_PANELS {
        // every task all the panels: each row of A read once from memory
        // (ResNet-18's 7x7 stage at batch 1: 9.4 MB of weight under 2
        // panels)
        ((4 * threads).min(mp), 1)
    } else {
        let rb = mp.div_ceil(MC_PANELS);
        (rb, (4 * threads).div_ceil(rb).min(np))
    };
    crate::kernels::threads::par_for(rb * cb, |t| {
        let (r, q) = (t / cb, t % cb);
        run(
            r * mp / rb..(r + 1) * mp / rb,
            q * np / cb..(q + 1) * np / cb,
        );
    });
}

/// Row panels `rows` x column panels `cols` of a [`gemm_direct`].
///
/// # Safety
/// As [`gemm_direct`], whose checks have passed.
#[allow(clippy::too_many_arguments)]
unsafe fn direct_block(
    a: &Lhs,
    src: &[f32],
    offs: &[usize],
    panels: &Panels,
    c: SendPtr,
    ldc: usize,
    (bias, mode): (Option<&[f32]>, u8),
    epilogue: Option<&Epilogue>,
    rows: std::ops::Range<usize>,
    cols: std::ops::Range<usize>,
) {
    let (m, mp) = (a.m, a.m.div_ceil(MR));
    // the epilogue reads its inputs at each element's offset in C
    let epi = epilogue;
    let mut spans: Vec<(isize, isize)> = Vec::new();
    let mut jc = cols.start;
    while jc < cols.end {
        let jend = (jc + NC_PANELS).min(cols.end);
        let mut ic = rows.start;
        while ic < rows.end {
            let iend = (ic + MC_PANELS).min(rows.end);
            // a block of few panels: each row panel of A through all of
            // them before the next (read once from memory where A is
            // large); otherwise each panel through the rows (B in L1)
            let few = jend - jc <= FEW_PANELS;
            let (outer, inner) = if few {
                (iend - ic, jend - jc)
            } else {
                (jend - jc, iend - ic)
            };
            for o in 0..outer {
                for i in 0..inner {
                    let (jp, ip) = if few {
                        (jc + i, ic + o)
                    } else {
                        (jc + o, ic + i)
                    };
                    // lanes before the input are never read (checked above)
                    let from = src
                        .as_ptr()
                        .wrapping_add(panels.base[jp])
                        .wrapping_sub(panels.shift);
                    prefetch_ahead(
                        src,
                        offs,
                        panels,
                        c,
                        ldc,
                        (a, mp),
                        mode & STORE_ADD != 0,
                        (few, o, i),
                        (outer, inner),
                        (jc, ic),
                    );
                    let runs = panels.runs(jp);
                    let mut one = [0];
                    let masks = panels.masks(jp, &mut one);
                    let wide = runs.iter().any(|r| r.mask >> 16 != 0)
                        || masks.iter().any(|m| m >> 16 != 0);
                    let (first, mr, at) = a.row_panel(mp, ip);
                    direct_kernel_for(mr, if wide { NR } else { 16 }, mode)(
                        from,
                        offs,
                        masks,
                        a.data.as_ptr().add(at),
                        a.row,
                        a.step,
                        c.0.add(first * ldc),
                        ldc,
                        mr,
                        runs,
                        bias.map(|b| &b[first..first + mr]),
                    );
                }
            }
            if let Some(e) = epi {
                // the block is done (and its stores retired: right after
                // its kernel, the loads waited on the masked stores), its
                // columns of each row in spans
                spans.clear();
                for run in (jc..jend).flat_map(|jp| panels.runs(jp)) {
                    let lo = run.at + run.mask.trailing_zeros() as isize;
                    let hi = run.at + 32 - run.mask.leading_zeros() as isize;
                    match spans.last_mut() {
                        Some((_, end)) if *end == lo => *end = hi,
                        _ => spans.push((lo, hi)),
                    }
                }
                // the block's rows: its row panels' (split evenly in place)
                let (first, _, _) = a.row_panel(mp, ic);
                let end = if iend < mp {
                    a.row_panel(mp, iend).0
                } else {
                    m
                };
                for row in first..end {
                    for &(lo, hi) in &spans {
                        let at = row * ldc + lo as usize;
                        epilogue_span(e, at, c.0.add(at), (hi - lo) as usize);
                    }
                }
            }
            ic = iend;
        }
        jc = jend;
    }
}

/// Lines a [`direct_block`] will read, fetched into L2 ahead of its
/// kernels: at call `(o, i)` of the block's walk (`few`: row panels
/// outer), the `i`th share of the next panel's rows of B (with panels
/// outer; a pointwise convolution's B comes from 64 planes or more at
/// once, more streams than the hardware prefetcher follows: ResNet-50's
/// 1x1s at batch 8 2.7% faster), and with `accumulate` the lines of C
/// that the call [`PREFETCH_CALLS`] on adds to (the residual it writes
/// over comes from memory, and its loads waited in the kernel's store:
/// the [256, 64] 1x1s over 56x56 that write over one 3.9-4.2 -> 2.3 ms).
/// Fetching a fresh output's lines too (their reads for ownership) was no
/// faster over the model's 1x1s (1.008).
#[allow(clippy::too_many_arguments)]
#[inline]
fn prefetch_ahead(
    src: &[f32],
    offs: &[usize],
    panels: &Panels,
    c: SendPtr,
    ldc: usize,
    (a, mp): (&Lhs, usize),
    accumulate: bool,
    (few, o, i): (bool, usize, usize),
    (outer, inner): (usize, usize),
    (jc, ic): (usize, usize),
) {
    use std::arch::x86_64::*;
    let fetch = |p: *const f32| {
        // SAFETY: a prefetch reads nothing and faults on no address
        unsafe {
            _mm_prefetch::<_MM_HINT_T1>(p.cast());
            _mm_prefetch::<_MM_HINT_T1>(p.wrapping_add(16).cast());
        }
    };
    if !few && o + 1 < outer && offs.len() >= PREFETCH_MIN_ROWS {
        let next = src
            .as_ptr()
            .wrapping_add(panels.base[jc + o + 1])
            .wrapping_sub(panels.shift);
        let (lo, hi) = (i * offs.len() / inner, (i + 1) * offs.len() / inner);
        for &r in &offs[lo..hi] {
            fetch(next.wrapping_add(r));
        }
    }
    if accumulate {
        let at = o * inner + i + PREFETCH_CALLS;
        let (o2, i2) = (at / inner, at % inner);
        if o2 < outer {
            let (jp, ip) = if few {
                (jc + i2, ic + o2)
            } else {
                (jc + o2, ic + i2)
            };
            for run in panels.runs(jp) {
                let lo = run.at + run.mask.trailing_zeros() as isize;
                let (first, rows, _) = a.row_panel(mp, ip);
                for row in first..first + rows {
                    fetch(c.0.wrapping_offset(lo + (row * ldc) as isize));
                }
            }
        }
    }
}

/// Rows of B from which [`prefetch_ahead`] fetches the next panel's: a
/// product over fewer is over in a few hundred cycles a call, where the
/// fetching cost more than it saved (MobileNetV3's stem and its `[72,
/// 16]` 1x1 over 56x56 at batch 8 17% slower).
const PREFETCH_MIN_ROWS: usize = 64;

/// How many kernel calls ahead [`prefetch_ahead`] fetches C.
const PREFETCH_CALLS: usize = 2;

/// The lanes of `mask` from `p`, the others zero: a plain load where the
/// mask is full (a masked load of 16 lanes ran slower on this Zen 5 than a
/// plain one: ResNet-18 at batch 8 0.956x with the plain ones, its 56x56
/// 3x3s 340-390 -> 390-450 GFLOP/s; the branch follows the taps' cycle).
/// Not in the depthwise kernel, whose masks change from vector to vector
/// (there the branch cost more than it saved: 0.12 -> 0.13 ms).
///
/// # Safety
/// `S`'s instruction set is present; the lanes of `mask` at `p` are readable.
#[inline(always)]
unsafe fn load_lanes<S: F32x16>(mask: u16, p: *const f32) -> S {
    if mask == 0xffff {
        S::load(p)
    } else {
        S::load_mask(mask, p)
    }
}

/// The lanes of vector `j` (of two) that a 32-lane `mask` names.
#[inline(always)]
fn vector_lanes(mask: u32, j: usize) -> u16 {
    (mask >> (16 * j)) as u16
}

/// B's row at `row` for [`direct_body`]: `W` vectors, each loaded
/// whole (`FULL`) or in the lanes of `mask` from vector `j0` on.
///
/// # Safety
/// The lanes loaded are readable; the kernel's instruction set is present.
#[inline(always)]
unsafe fn tap_row<S: F32x16, const W: usize, const FULL: bool>(
    row: *const f32,
    mask: u32,
    j0: usize,
) -> [S; W] {
    let mut bv = [S::zero(); W];
    for (j, v) in bv.iter_mut().enumerate() {
        *v = if FULL {
            S::load(row.wrapping_add(16 * j))
        } else {
            load_lanes(vector_lanes(mask, j0 + j), row.wrapping_add(16 * j))
        };
    }
    bv
}

/// A kernel of [`gemm_direct`]: see [`direct_kernel`].
type DirectKernel = unsafe fn(
    *const f32,
    &[usize],
    &[u32],
    *const f32,
    usize,
    usize,
    *mut f32,
    usize,
    usize,
    &[Run],
    Option<&[f32]>,
);

/// A kernel's store mode bit: each element added to what C holds there.
const STORE_ADD: u8 = 1;
/// A kernel's store mode bit: each element's relu stored (after the add),
/// where the epilogue is a relu alone: no pass over the block once it is
/// done (that pass, reading and writing the block in L2, was 15% of the
/// time of MobileNetV3's `[72, 16]` 1x1 over 56x56).
pub(super) const STORE_RELU: u8 = 2;
/// A kernel's store mode: each element's hardswish stored, where the
/// epilogue is a hardswish alone (MobileNetV3's expanding 1x1s; the pass
/// over their blocks was 4.7% of the model's samples at batch 1 on one
/// thread). Not with [`STORE_ADD`].
pub(super) const STORE_HARDSWISH: u8 = 4;

/// The [`direct_kernel`] instance for `mr` rows and `nr` columns, storing
/// as `mode` says ([`STORE_ADD`], [`STORE_RELU`], [`STORE_HARDSWISH`]): chosen once a call,
/// where a branch on it for each vector stored took MobileNetV3's `[72,
/// 16]` 1x1 over 56x56 at batch 8 from 0.30 to 0.40 ms.
fn direct_kernel_for(mr: usize, nr: usize, mode: u8) -> DirectKernel {
    match (avx512(), mode) {
        (true, 0) => instance_for!(direct_kernel, mr, nr, 0),
        (true, 1) => instance_for!(direct_kernel, mr, nr, 1),
        (true, 2) => instance_for!(direct_kernel, mr, nr, 2),
        (true, 3) => instance_for!(direct_kernel, mr, nr, 3),
        (true, _) => instance_for!(direct_kernel, mr, nr, 4),
        (false, 0) => direct_avx2::<0>,
        (false, 1) => direct_avx2::<1>,
        (false, 2) => direct_avx2::<2>,
        (false, 3) => direct_avx2::<3>,
        (false, _) => direct_avx2::<4>,
    }
}

/// One block of [`gemm_direct`]: `R` rows (at least `mr`) and `16 * W`
/// columns in registers over all of `k` (B's row `r` loaded from `from +
/// offs[r]`, the lanes of `masks[r % masks.len()]` only, the others
/// zero), then each run of lanes stored to C, the bias added, then with
/// [`STORE_ADD`] in `MODE` what C held there, then with [`STORE_RELU`]
/// its relu, with [`STORE_HARDSWISH`] its hardswish (masked loads and stores: no other element is touched). A's element (i, p) is at `a
/// + i * lda + p * step`.
///
/// # Safety
/// Each B row's lanes of its mask are readable; A's rows `mr` and steps
/// `offs.len()` are readable; every run's lanes lie inside C for `mr`
/// rows `ldc` apart, and no other thread writes them; `offs.len()` is a
/// multiple of `masks.len()`; AVX-512F is present.
#[allow(clippy::too_many_arguments)]
#[target_feature(enable = "avx512f")]
unsafe fn direct_kernel<const R: usize, const W: usize, const MODE: u8>(
    from: *const f32,
    offs: &[usize],
    masks: &[u32],
    a: *const f32,
    lda: usize,
    step: usize,
    c: *mut f32,
    ldc: usize,
    mr: usize,
    runs: &[Run],
    bias: Option<&[f32]>,
) {
    direct_body::<Avx512, R, W, MODE, false>(
        from, offs, masks, a, lda, step, c, ldc, mr, runs, bias, 0,
    )
}

/// [`direct_kernel`] on AVX2 + FMA: the block in parts of up to
/// [`AVX2_ROWS`](super::AVX2_ROWS) rows by one vector of 16 columns, each
/// over all of `k` (so B's rows are read once a part, from the cache).
///
/// # Safety
/// As [`direct_kernel`], with AVX2 and FMA present instead of AVX-512F.
#[allow(clippy::too_many_arguments)]
#[target_feature(enable = "avx2,fma")]
unsafe fn direct_avx2<const MODE: u8>(
    from: *const f32,
    offs: &[usize],
    masks: &[u32],
    a: *const f32,
    lda: usize,
    step: usize,
    c: *mut f32,
    ldc: usize,
    mr: usize,
    runs: &[Run],
    bias: Option<&[f32]>,
) {
    // the vectors any run stores to (a block of 16 columns or fewer has one)
    let vectors = if runs.iter().any(|r| r.mask >> 16 != 0) {
        2
    } else {
        1
    };
    // whether every tap loads all 16 lanes of vector j (a pointwise
    // convolution's panels but the last, the inner windows of one with
    // taps): plain loads, no mask tested on each
    let full = [0, 1].map(|j| masks.iter().all(|&m| vector_lanes(m, j) == 0xffff));
    for (j, &full) in full.iter().enumerate().take(vectors) {
        for (i, rows) in super::avx2_parts(mr) {
            let (a, c) = (a.add(i * lda), c.wrapping_add(i * ldc));
            let bias = bias.map(|b| &b[i..]);
            macro_rules! rows {
                ($full:literal: $($r:literal)*) => {
                    match rows {
                        $($r => direct_body::<Avx2, $r, 1, MODE, $full>(
                            from, offs, masks, a, lda, step, c, ldc, rows, runs, bias, j,
                        ),)*
                        _ => unreachable!(),
                    }
                };
            }
            if full {
                rows!(true: 1 2 3 4 5 6)
            } else {
                rows!(false: 1 2 3 4 5 6)
            }
        }
    }
}

/// What [`direct_kernel`] and [`direct_avx2`] run, over 16-lane vectors
/// `S`: the block's vectors `j0..j0 + W` (of columns `16 * j0..`); with
/// `FULL`, every B row's lanes loaded whole (its masks all set).
///
/// # Safety
/// As [`direct_kernel`], on a CPU with `S`'s instruction set.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
unsafe fn direct_body<
    S: F32x16,
    const R: usize,
    const W: usize,
    const MODE: u8,
    const FULL: bool,
>(
    from: *const f32,
    offs: &[usize],
    masks: &[u32],
    a: *const f32,
    lda: usize,
    step: usize,
    c: *mut f32,
    ldc: usize,
    mr: usize,
    runs: &[Run],
    bias: Option<&[f32]>,
    j0: usize,
) {
    debug_assert!(mr <= R);
    let mut ap = a;
    let taps = masks.len();
    let mut t = 0;
    let from = from.wrapping_add(16 * j0);
    // B's row at offset `o` under tap `t`'s mask; masked-off lanes are
    // never touched (they may lie outside the input)
    // (a function, not a closure, and loops, not `std::array::from_fn`:
    // a closure may stay out of line, without this kernel's instruction
    // set, and every load in it was a call: see `simd`)
    let zero = S::zero();
    // the accumulators start at the first row's products (an FMA onto
    // zero: the loop's bits), not zeroed: a zeroed array of them was a
    // memset on the stack each call (0.6% of MobileNetV3's samples at
    // batch 1), as in the packed kernel
    let bv = tap_row::<S, W, FULL>(from.wrapping_add(offs[0]), *masks.get_unchecked(0), j0);
    let mut acc = [[zero; W]; R];
    for (i, r) in acc.iter_mut().enumerate() {
        let av = S::splat(*ap.add(i * lda));
        for (c, v) in r.iter_mut().zip(&bv) {
            *c = av.fma(*v, zero);
        }
    }
    ap = ap.add(step);
    t = if taps == 1 { 0 } else { t + 1 };
    for &o in &offs[1..] {
        // this row's tap's mask (a counter: no division in the loop)
        let bv = tap_row::<S, W, FULL>(from.wrapping_add(o), *masks.get_unchecked(t), j0);
        t = if t + 1 == taps { 0 } else { t + 1 };
        for (i, r) in acc.iter_mut().enumerate() {
            let av = S::splat(*ap.add(i * lda));
            for (c, v) in r.iter_mut().zip(&bv) {
                *c = av.fma(*v, *c);
            }
        }
        ap = ap.add(step);
    }
    for run in runs {
        for (i, r) in acc.iter().enumerate().take(mr) {
            // lane 0 of the run's first vector (masked lanes are never
            // touched, so the address may lie before C's row)
            let cp = c
                .wrapping_offset(run.at + (i * ldc) as isize)
                .wrapping_add(16 * j0);
            for (j, v) in r.iter().enumerate() {
                let (m, p) = (vector_lanes(run.mask, j0 + j), cp.wrapping_add(16 * j));
                if m == 0 {
                    continue;
                }
                let v = if let Some(b) = bias {
                    v.add(S::splat(b[i]))
                } else {
                    *v
                };
                let v = if MODE & STORE_ADD != 0 {
                    v.add(S::load_mask(m, p))
                } else {
                    v
                };
                // the epilogue's relu (NaN and -0 kept: its max)
                let v = if MODE & STORE_RELU != 0 {
                    S::zero().max(v)
                } else {
                    v
                };
                // the epilogue's hardswish, its operations in its order
                let v = if MODE & STORE_HARDSWISH != 0 {
                    super::chain::hardswish(v)
                } else {
                    v
                };
                v.store_mask(m, p);
            }
        }
    }
}
