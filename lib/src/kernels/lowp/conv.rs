//! 2-D convolutions of one group in bfloat16 as an implicit product: no
//! im2col. `C [c_out, pixels] = W [c_out, taps * cp] x X [taps * cp,
//! pixels]`, the weight the left operand ([`ConvWeight16`]: rounded once,
//! `k` ordered tap by tap, each tap's `c` input channels padded with
//! zeros to `cp`, a multiple of [`KP`]), the input the right one, read
//! where it lies in one bfloat16 copy of the input made per call
//! ([`Act16`]).
//!
//! That copy holds each image as pairs of channels (a 32-bit word a
//! pixel: channel `2q` in the low half, `2q + 1` in the high one, the
//! pair layout both kernels read), each pair's plane padded and split
//! into the stride's phases, so that every tap's reads of a run of
//! output pixels are one run of words at a fixed offset from the
//! output's index. The output is computed over a grid of `oh` rows of
//! `wq` (the phase plane's width): the columns past `ow` are computed
//! and dropped. A step of the product (one tap, 32 channels) is then 16
//! pair rows `ps` words apart: one AMX B tile, or 16 pairs of vectors.
//!
//! The output is written in planes, `[b][c_out][oh][ow]`, the bias per
//! output channel added (or the block added to what the output holds,
//! the residual it is written over), the caller's [`Done`] called on each
//! task's blocks once they are final. Tested against [`conv_reference`].

use super::{to_bf16, Bias, CPtr, Done, Kernel, Operands, Step, Tile, AMX_ROWS, KP, NR, TILE};
use crate::kernels::window::Windows;

/// Input channels padded to a multiple of [`KP`] (one AMX step).
pub fn padded_channels(c: usize) -> usize {
    c.div_ceil(KP).max(1) * KP
}

/// A convolution's weight `[c_out, c, kh, kw]` rounded to bfloat16 as
/// the left operand: row `o`, column `k = t * cp + ci` (tap `t`, input
/// channel `ci`), zero past `c`, laid out tile by tile: each AMX A tile
/// (16 rows of one step of 32 columns) one 1 KiB block, a row block's
/// steps one after another (`[c_out / 16][steps][16][32]`), so that a
/// tile is one contiguous read (rows `2 * taps * cp` bytes apart missed
/// the prefetchers: ResNet-50's 3x3 over 7x7, 512 channels, ran at 408
/// GFLOP/s).
pub struct ConvWeight16 {
    pub co: usize,
    pub c: usize,
    pub taps: usize,
    /// Steps of 32 columns (`taps * cp / 32`).
    steps: usize,
    data: super::Lines<u16>,
}

impl ConvWeight16 {
    pub fn bytes(&self) -> usize {
        self.data.len() * 2
    }

    /// Bytes of one block of 16 rows.
    fn block(&self) -> usize {
        self.steps * TILE
    }
}

/// Rounds and lays out a weight `w` (`[co][c][taps]`, row-major) as
/// [`ConvWeight16`]. Panics if `w` is shorter.
pub fn conv_weight(w: &[f32], co: usize, c: usize, taps: usize) -> ConvWeight16 {
    assert!(
        w.len() >= co * c * taps,
        "lowp::conv_weight: weight too short"
    );
    let cp = padded_channels(c);
    let steps = taps * cp / KP;
    // whole pairs of row blocks (the AMX kernel's 32 rows)
    let blocks = co.div_ceil(AMX_ROWS).max(1) * AMX_ROWS / 16;
    let mut data = super::Lines::<u16>::zeroed(blocks * steps * TILE / 2);
    let fill = |rb: usize, block: &mut [u16]| {
        for r in 0..16 {
            let o = rb * 16 + r;
            if o >= co {
                return;
            }
            for ci in 0..c {
                let src = &w[(o * c + ci) * taps..][..taps];
                for (t, v) in src.iter().enumerate() {
                    let k = t * cp + ci;
                    block[(k / KP) * TILE / 2 + r * KP + k % KP] = to_bf16(*v);
                }
            }
        }
    };
    if co * c * taps >= 1 << 16 {
        crate::kernels::threads::par_chunks(&mut data, steps * TILE / 2, fill);
    } else {
        data.chunks_mut(steps * TILE / 2)
            .enumerate()
            .for_each(|(rb, b)| fill(rb, b));
    }
    ConvWeight16 {
        co,
        c,
        taps,
        steps,
        data,
    }
}

/// Where element (image, channel, row, column) of an input lies: its
/// strides (planes: `c * h * w, h * w, w, 1`; channels-last: `h * w * c,
/// 1, w * c, c`).
#[derive(Clone, Copy, Debug)]
pub struct Strides {
    pub image: usize,
    pub channel: usize,
    pub row: usize,
    pub col: usize,
}

/// An input in bfloat16 as the product reads it (see the module): per
/// image, `cp / 2` pairs of channels, each `phases` planes of `hq x wq`
/// words (the padded input's rows and columns of one phase of the
/// stride), then slack the last blocks read past (their columns dropped).
pub struct Act16 {
    pub b: usize,
    pub c: usize,
    cp: usize,
    /// The output's rows and columns, and the width of the grid it is
    /// computed over (`wq >= ow`).
    oh: usize,
    ow: usize,
    wq: usize,
    /// Words between pairs of channels, and between images.
    ps: usize,
    image: usize,
    /// Per tap, the offset of its reads from the output's index.
    offs: Vec<usize>,
    data: super::Lines<u32>,
}

impl Act16 {
    /// Outputs of an image on the computed grid (`oh * wq`).
    fn grid(&self) -> usize {
        self.oh * self.wq
    }

    /// The index in the image's output planes of the first real pixel at
    /// or after grid index `v` (`oh * ow` past the last).
    fn real(&self, v: usize) -> usize {
        let (oy, ox) = (v / self.wq, v % self.wq);
        (oy * self.ow + ox.min(self.ow)).min(self.oh * self.ow)
    }
}

/// The phases of a stride `s` a kernel of `k` taps `d` apart reads (each
/// tap's `(tap * d) % s`), in order.
fn phases(k: usize, d: usize, s: usize) -> Vec<usize> {
    let mut p: Vec<usize> = (0..k).map(|t| t * d % s).collect();
    p.sort_unstable();
    p.dedup();
    p
}

/// Rounds `x` (`b` images of `c` channels over `g`'s 2-D input, laid out
/// as `s` says) into [`Act16`] for a convolution over `g`. Panics where
/// `g` is not 2-D ([`Windows::planar`]) or an element lies past `x`.
pub fn act16(x: &[f32], b: usize, c: usize, g: &Windows, s: Strides) -> Act16 {
    assert!(g.planar(), "lowp::act16: a 2-D convolution");
    let ([_, h, w], [_, kh, kw], [_, sh, sw]) = (g.input, g.kernel, g.stride);
    let ([_, ph, pw], [_, dh, dw], [_, oh, ow]) = (g.pad, g.dilation, g.output);
    if b > 0 && c > 0 && h > 0 && w > 0 {
        let last = (b - 1) * s.image + (c - 1) * s.channel + (h - 1) * s.row + (w - 1) * s.col;
        assert!(last < x.len(), "lowp::act16: input too short");
    }
    let cp = padded_channels(c);
    let (ys, xs) = (phases(kh, dh, sh), phases(kw, dw, sw));
    let (hp, wp) = (h + 2 * ph, w + 2 * pw);
    let (hq, wq) = (hp.div_ceil(sh), wp.div_ceil(sw));
    let plane = hq * wq;
    // (pairs and images a whole number of 64-byte lines apart: a B tile's
    // rows, one a pair, then lie on lines where the tap's offset does)
    let ps = (ys.len() * xs.len() * plane).div_ceil(16) * 16;
    let offs: Vec<usize> = (0..kh * kw)
        .map(|t| {
            let (ky, kx) = (t / kw * dh, t % kw * dw);
            let iy = ys.iter().position(|&p| p == ky % sh).unwrap_or(0);
            let ix = xs.iter().position(|&p| p == kx % sw).unwrap_or(0);
            (iy * xs.len() + ix) * plane + ky / sh * wq + kx / sw
        })
        .collect();
    let pairs = cp / 2;
    let grid = (oh * wq).div_ceil(NR) * NR;
    let reach = (pairs - 1) * ps + offs.iter().max().copied().unwrap_or(0) + grid;
    let image = (pairs * ps).max(reach).div_ceil(16) * 16;
    // every word written below: the pairs' planes by their tasks, the
    // slack after them here
    let mut lines = super::Lines::<u32>::uninit(b * image);
    let data = lines.uninit_words();
    for i in 0..b {
        data[i * image + pairs * ps..(i + 1) * image].fill(std::mem::MaybeUninit::new(0));
    }
    // (a pointwise convolution of an input in planes: the plane as it lies)
    let whole_planes = (sh, sw, ph, pw) == (1, 1, 0, 0) && s.col == 1 && s.row == w;
    // (a stride of 2 along lines in planes that reads both phases: each
    // line split into its even and odd columns in one pass)
    let halves = sw == 2 && xs == [0, 1] && s.col == 1;
    // one task a run of (image, pair)s: each writes its pairs' planes
    let base = super::U32Ptr(data.as_mut_ptr().cast());
    let fill = |i: usize, q: usize| {
        // SAFETY: pair q of image i is this task's alone, inside data
        let dst = unsafe {
            std::slice::from_raw_parts_mut(
                base.at(i * image + q * ps)
                    .cast::<std::mem::MaybeUninit<u32>>(),
                ps,
            )
        };
        let (c0, c1) = (2 * q, 2 * q + 1);
        if c0 >= c {
            dst.fill(std::mem::MaybeUninit::new(0));
            return;
        }
        let lo = &x[i * s.image + c0 * s.channel..];
        let hi = (c1 < c).then(|| &x[i * s.image + c1 * s.channel..]);
        if whole_planes {
            pair_run(lo, hi, 0, 1, &mut dst[..h * w]);
            dst[h * w..].fill(std::mem::MaybeUninit::new(0));
            return;
        }
        // the padding
        dst.fill(std::mem::MaybeUninit::new(0));
        for sy in 0..h {
            let y = sy + ph;
            let Some(iy) = ys.iter().position(|&p| p == y % sh) else {
                continue;
            };
            let row = iy * xs.len() * plane + y / sh * wq;
            if halves {
                // source column 0 is padded column pw: phase pw % 2
                let (first, second) = (pw % 2, 1 - pw % 2);
                let at0 = row + first * plane + pw / 2;
                let at1 = row + second * plane + pw.div_ceil(2);
                let (n0, n1) = (w.div_ceil(2), w / 2);
                let (d0, d1) = if at0 < at1 {
                    let (a, b) = dst.split_at_mut(at1);
                    (&mut a[at0..at0 + n0], &mut b[..n1])
                } else {
                    let (a, b) = dst.split_at_mut(at0);
                    (&mut b[..n0], &mut a[at1..at1 + n1])
                };
                pair_halves(lo, hi, sy * s.row, d0, d1);
                continue;
            }
            for (ix, &px) in xs.iter().enumerate() {
                // the padded columns of phase px inside the input
                let x0 = pw + (px + sw - pw % sw) % sw;
                if x0 >= pw + w {
                    continue;
                }
                let count = (pw + w - x0).div_ceil(sw);
                let at = row + ix * plane + x0 / sw;
                let from = sy * s.row + (x0 - pw) * s.col;
                pair_run(lo, hi, from, sw * s.col, &mut dst[at..at + count]);
            }
        }
    };
    let tasks = b * pairs;
    let work = c * h * w * b;
    if work >= 1 << 15 {
        let parts = (rayon::current_num_threads() * 8).min(tasks).max(1);
        crate::kernels::threads::par_for(parts, |p| {
            (p * tasks / parts..(p + 1) * tasks / parts).for_each(|t| fill(t / pairs, t % pairs))
        });
    } else {
        (0..tasks).for_each(|t| fill(t / pairs, t % pairs));
    }
    // (every word written above)
    let data = lines;
    Act16 {
        b,
        c,
        cp,
        oh,
        ow,
        wq,
        ps,
        image,
        offs,
        data,
    }
}

/// A pair of channels' values as one word, each rounded to bfloat16.
#[inline(always)]
fn pair(lo: f32, hi: f32) -> std::mem::MaybeUninit<u32> {
    std::mem::MaybeUninit::new(to_bf16(lo) as u32 | (to_bf16(hi) as u32) << 16)
}

/// `dst[j]` = the pair of `lo[from + j * step]` (low half) and
/// `hi[from + j * step]` (high half, zero without `hi`), rounded:
/// compiled for AVX-512 where the kernels run.
fn pair_run(
    lo: &[f32],
    hi: Option<&[f32]>,
    from: usize,
    step: usize,
    dst: &mut [std::mem::MaybeUninit<u32>],
) {
    #[inline(always)]
    fn each(
        lo: &[f32],
        hi: Option<&[f32]>,
        from: usize,
        step: usize,
        dst: &mut [std::mem::MaybeUninit<u32>],
    ) {
        let n = dst.len();
        if n == 0 {
            return;
        }
        let span = (n - 1) * step + 1;
        let lo = &lo[from..from + span];
        match (hi, step) {
            (Some(hi), 1) => {
                let hi = &hi[from..from + span];
                for ((d, a), b) in dst.iter_mut().zip(lo).zip(hi) {
                    *d = pair(*a, *b);
                }
            }
            (None, 1) => {
                for (d, a) in dst.iter_mut().zip(lo) {
                    *d = pair(*a, 0.0);
                }
            }
            (Some(hi), _) => {
                let hi = &hi[from..from + span];
                for (j, d) in dst.iter_mut().enumerate() {
                    *d = pair(lo[j * step], hi[j * step]);
                }
            }
            (None, _) => {
                for (j, d) in dst.iter_mut().enumerate() {
                    *d = pair(lo[j * step], 0.0);
                }
            }
        }
    }
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx512f,avx512bw")]
    unsafe fn wide(
        lo: &[f32],
        hi: Option<&[f32]>,
        from: usize,
        step: usize,
        dst: &mut [std::mem::MaybeUninit<u32>],
    ) {
        each(lo, hi, from, step, dst)
    }
    #[cfg(target_arch = "x86_64")]
    if super::avx512::available() {
        // SAFETY: the CPU has AVX-512F and BW (AVX512-BF16 implies them)
        return unsafe { wide(lo, hi, from, step, dst) };
    }
    each(lo, hi, from, step, dst)
}

/// A line from `lo[from..]` / `hi[from..]` split into its even columns
/// (`even.len()` of them) and its odd ones (`odd.len()`: as many, or one
/// fewer), as pairs ([`pair_run`], one pass for both phases of a stride
/// of 2).
fn pair_halves(
    lo: &[f32],
    hi: Option<&[f32]>,
    from: usize,
    even: &mut [std::mem::MaybeUninit<u32>],
    odd: &mut [std::mem::MaybeUninit<u32>],
) {
    #[inline(always)]
    fn each(
        lo: &[f32],
        hi: Option<&[f32]>,
        from: usize,
        even: &mut [std::mem::MaybeUninit<u32>],
        odd: &mut [std::mem::MaybeUninit<u32>],
    ) {
        let n = even.len() + odd.len();
        let lo = &lo[from..from + n];
        let zeros;
        let hi = match hi {
            Some(h) => &h[from..from + n],
            None => {
                zeros = vec![0f32; n];
                &zeros[..]
            }
        };
        let whole = odd.len();
        for (((e, o), a), b) in even
            .iter_mut()
            .zip(odd.iter_mut())
            .zip(lo.chunks_exact(2))
            .zip(hi.chunks_exact(2))
        {
            *e = pair(a[0], b[0]);
            *o = pair(a[1], b[1]);
        }
        if even.len() > whole {
            even[whole] = pair(lo[2 * whole], hi[2 * whole]);
        }
    }
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx512f,avx512bw")]
    unsafe fn wide(
        lo: &[f32],
        hi: Option<&[f32]>,
        from: usize,
        even: &mut [std::mem::MaybeUninit<u32>],
        odd: &mut [std::mem::MaybeUninit<u32>],
    ) {
        each(lo, hi, from, even, odd)
    }
    #[cfg(target_arch = "x86_64")]
    if super::avx512::available() {
        // SAFETY: the CPU has AVX-512F and BW (AVX512-BF16 implies them)
        return unsafe { wide(lo, hi, from, even, odd) };
    }
    each(lo, hi, from, even, odd)
}

/// `C = W X (+ bias)` into `out` (`[b][c_out][oh][ow]`: every element
/// written, or with `accumulate` added to what it holds), on up to
/// `threads` threads by `kernel`, `done` called on each task's blocks
/// once they are final (rows of `[b * c_out]`, columns of `oh * ow`, the
/// output's first element). Panics where the operands disagree, `out` or
/// the bias is too short, or the CPU lacks the kernel.
#[allow(clippy::too_many_arguments)]
pub fn conv(
    w: &ConvWeight16,
    x: &Act16,
    out: &mut [std::mem::MaybeUninit<f32>],
    accumulate: bool,
    bias: Option<&[f32]>,
    threads: usize,
    kernel: Kernel,
    done: Option<Done>,
) {
    assert!(
        w.c == x.c && w.taps == x.offs.len() && w.steps * KP == x.offs.len() * x.cp,
        "lowp::conv: weight and input disagree"
    );
    assert!(
        super::runs(kernel),
        "lowp::conv: this CPU lacks {}",
        kernel.name()
    );
    let (co, n) = (w.co, x.oh * x.ow);
    assert!(out.len() >= x.b * co * n, "lowp::conv: output too short");
    if let Some(b) = bias {
        assert!(
            b.len() >= co,
            "lowp::conv: a bias shorter than the channels"
        );
    }
    if x.b == 0 || co == 0 || n == 0 {
        return;
    }
    let steps: Vec<Step> = x
        .offs
        .iter()
        .enumerate()
        .flat_map(|(t, &off)| {
            (0..x.cp / KP).map(move |g| Step {
                a: ((t * x.cp) / KP + g) * TILE,
                b: (g * KP / 2 * x.ps + off) * 4,
            })
        })
        .collect();
    let mr = match kernel {
        Kernel::Amx => super::amx::MR,
        Kernel::Avx512 => super::avx512::MR,
    };
    let grid_blocks = x.grid().div_ceil(NR);
    let (mp, np) = (co.div_ceil(mr), x.b * grid_blocks);
    let macs = x.b * co * x.grid() * w.steps * KP;
    let threads = if macs < super::PARALLEL_MIN_MACS {
        1
    } else {
        threads.max(1)
    };
    // blocks of output channels x grid columns, about four a thread,
    // the larger operand split first, so that each of its blocks is read
    // from memory once (the weight of ResNet-50's 3x3 over 7x7, 512
    // channels, 4.7 MB, read by two tasks: 477 GFLOP/s)
    let tasks = (threads * 4).min(mp * np).max(1);
    let (rb, cb) = if w.bytes() > x.b * x.image * 4 {
        let rb = tasks.min(mp).max(1);
        (rb, tasks.div_ceil(rb).min(np).max(1))
    } else {
        let cb = tasks.min(np).max(1);
        (tasks.div_ceil(cb).min(mp).max(1), cb)
    };
    let cptr = CPtr(out.as_mut_ptr().cast::<f32>());
    let bias = bias.map_or(Bias::None, Bias::Rows);
    let run = |t: usize| {
        let (r, q) = (t / cb, t % cb);
        let rows = r * mp / rb..(r + 1) * mp / rb;
        let cols = q * np / cb..(q + 1) * np / cb;
        // SAFETY: the kernel runs here (asserted), and the task's blocks
        // are its own
        unsafe {
            task(
                w, x, &steps, cptr, accumulate, bias, kernel, mr, rows, cols, done,
            )
        }
    };
    if threads == 1 || rb * cb == 1 {
        (0..rb * cb).for_each(run);
    } else {
        crate::kernels::threads::par_for(rb * cb, run);
    }
}

/// One task of [`conv`]: row blocks `rows` (of `mr` output channels) x
/// grid blocks `cols` (of [`NR`] outputs, the images' one after another).
///
/// # Safety
/// The CPU has `kernel`; the blocks' outputs are this task's alone.
#[allow(clippy::too_many_arguments)]
#[cfg_attr(target_arch = "x86_64", target_feature(enable = "avx512f"))]
unsafe fn task(
    w: &ConvWeight16,
    x: &Act16,
    steps: &[Step],
    out: CPtr,
    accumulate: bool,
    bias: Bias,
    kernel: Kernel,
    mr: usize,
    rows: std::ops::Range<usize>,
    cols: std::ops::Range<usize>,
    done: Option<Done>,
) {
    let co = w.co;
    let blocks = x.grid().div_ceil(NR);
    let mut tile = Tile([0f32; AMX_ROWS * NR]);
    if kernel == Kernel::Amx {
        super::amx::configure();
    }
    for ib in rows {
        let o0 = ib * mr;
        let nrows = (co - o0).min(mr);
        let mut j = cols.start;
        while j < cols.end {
            // the task's blocks of one image
            let image = j / blocks;
            let last = cols.end.min((image + 1) * blocks);
            for vb in j % blocks..last - image * blocks {
                let v0 = vb * NR;
                let ops = Operands {
                    a: w.data[o0 / 16 * w.block() / 2..].as_ptr().cast(),
                    row: o0 % 16,
                    block: w.block(),
                    b: x.data[image * x.image + v0..].as_ptr().cast(),
                    ldb: x.ps * 4,
                    steps,
                };
                match kernel {
                    Kernel::Amx => super::amx::tile(&ops, tile.0.as_mut_ptr(), false),
                    Kernel::Avx512 => super::avx512::tile(&ops, nrows, tile.0.as_mut_ptr()),
                }
                let end = (v0 + NR).min(x.grid());
                store(
                    &tile.0,
                    x,
                    out,
                    (image * co + o0, nrows),
                    v0..end,
                    bias,
                    o0,
                    accumulate,
                );
            }
            if let Some(done) = done {
                let (v0, v1) = (
                    (j % blocks) * NR,
                    ((last - image * blocks) * NR).min(x.grid()),
                );
                let rows = image * co + o0..image * co + o0 + nrows;
                done(rows, x.real(v0)..x.real(v1), out.first());
            }
            j = last;
        }
    }
    if kernel == Kernel::Amx {
        super::amx::release();
    }
}

/// Stores a block of `rows` output channels (`first` the row of `[b *
/// c_out]` of its first) over grid outputs `grid` from `tile` into the
/// output planes, the columns past `ow` dropped, `bias` (by output
/// channel, from `o0`) added, or the block added to what the output
/// holds (`accumulate`).
///
/// # Safety
/// The block's outputs lie inside the output and are this thread's.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn store(
    tile: &[f32],
    x: &Act16,
    out: CPtr,
    (first, rows): (usize, usize),
    grid: std::ops::Range<usize>,
    bias: Bias,
    o0: usize,
    accumulate: bool,
) {
    let n = x.oh * x.ow;
    // runs of real pixels: (column of the tile, pixel, length)
    let mut runs = [(0usize, 0usize, 0usize); NR];
    let mut count = 0;
    let mut v = grid.start;
    while v < grid.end {
        let (oy, ox) = (v / x.wq, v % x.wq);
        if ox >= x.ow {
            v += x.wq - ox;
            continue;
        }
        let len = (x.ow - ox).min(grid.end - v);
        runs[count] = (v - grid.start, oy * x.ow + ox, len);
        count += 1;
        v += len;
    }
    for r in 0..rows {
        let b = match bias {
            Bias::Rows(b) => b[o0 + r],
            _ => 0.0,
        };
        let row = &tile[r * NR..][..NR];
        for &(tc, px, len) in &runs[..count] {
            let dst = std::slice::from_raw_parts_mut(out.at((first + r) * n + px), len);
            let src = &row[tc..tc + len];
            if accumulate {
                for (d, s) in dst.iter_mut().zip(src) {
                    *d += s + b;
                }
            } else {
                for (d, s) in dst.iter_mut().zip(src) {
                    *d = s + b;
                }
            }
        }
    }
}

/// The reference: the convolution of `x` (`[b][c][h][w]`) by `w`
/// (`[co][c][kh][kw]`) over `g` with both rounded to bfloat16 and the
/// products summed in float64, then rounded to float32; `[b][co][oh][ow]`.
/// What the kernels are tested against.
pub fn conv_reference(
    x: &[f32],
    w: &[f32],
    b: usize,
    c: usize,
    co: usize,
    g: &Windows,
) -> Vec<f32> {
    use super::round_bf16;
    let ([_, h, wd], [_, kh, kw], [_, sh, sw]) = (g.input, g.kernel, g.stride);
    let ([_, ph, pw], [_, dh, dw], [_, oh, ow]) = (g.pad, g.dilation, g.output);
    let mut out = vec![0f32; b * co * oh * ow];
    for i in 0..b {
        for o in 0..co {
            for oy in 0..oh {
                for ox in 0..ow {
                    let mut s = 0f64;
                    for ci in 0..c {
                        for ky in 0..kh {
                            for kx in 0..kw {
                                let y = (oy * sh + ky * dh) as isize - ph as isize;
                                let xx = (ox * sw + kx * dw) as isize - pw as isize;
                                if y < 0 || xx < 0 || y >= h as isize || xx >= wd as isize {
                                    continue;
                                }
                                let a = x[((i * c + ci) * h + y as usize) * wd + xx as usize];
                                let k = w[((o * c + ci) * kh + ky) * kw + kx];
                                s += round_bf16(a) as f64 * round_bf16(k) as f64;
                            }
                        }
                    }
                    out[((i * co + o) * oh + oy) * ow + ox] = s as f32;
                }
            }
        }
    }
    out
}
