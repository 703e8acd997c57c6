//! Depthwise convolutions (a filter a channel, MobileNet's): with a
//! stride of 2 along lines long enough, each plane read in place as its
//! even and odd columns ([`super::stride2`]); else sixteen channels at a
//! time in a padded channels-last grid where a block's image fits the
//! cache ([`depthwise_blocked`]; 5x5 kernels first), else each plane read
//! in place (or its stride phases) under masks ([`conv_masked`]) where
//! the padding is "same", or plane by plane ([`window_planes`]).

use super::*;
use crate::kernels::simd::{isa_entries, F32x16};

/// A depthwise convolution's parameters (one filter a channel, `co / c`
/// outputs an input channel): its windows, the images, the channels, the
/// bias (`co` floats, if any).
#[derive(Clone, Copy)]
pub struct Depthwise<'a> {
    pub g: PlaneWindows,
    pub batch: usize,
    pub channels: usize,
    pub out_channels: usize,
    pub bias: Option<&'a [f32]>,
}

// `blocked_run` for AVX-512F and for AVX2 + FMA.
isa_entries!(blocked_run_avx512, blocked_run_avx2 = blocked_run[N: usize](
    grid: &[f32],
    wp: usize,
    w: &[f32],
    init: &[f32],
    g: &PlaneWindows,
    oy: usize,
    ox: usize,
    tile: &mut [f32],
));

/// Kernels of at least this many taps take [`depthwise_blocked`] before
/// [`conv_masked`] (MobileNetV3's 5x5s; its 3x3s ran faster under masks,
/// whose input is read in place: 88 channels at 28x28 0.08 against 0.12
/// ms at batch 8).
pub const BLOCKED_MIN_TAPS: usize = 25;

/// Input grids up to this many padded pixels take [`depthwise_blocked`]
/// (a block's grid 16 floats a pixel: 256 KiB, in L2).
const BLOCKED_MAX_GRID: usize = 4096;

/// Output pixels a call of [`blocked_run`] keeps in registers at most
/// (a 14-pixel line; 28-pixel lines in two halves).
const BLOCKED_RUN_MAX: usize = 14;

/// [`BLOCKED_RUN_MAX`] on AVX2: six pairs of registers, 12 of its 16.
const BLOCKED_RUN_MAX_AVX2: usize = 6;

/// Whether [`depthwise_blocked`] takes a depthwise convolution of this
/// geometry (padded input grid up to [`BLOCKED_MAX_GRID`] pixels).
pub fn blocked(g: &PlaneWindows) -> bool {
    (g.h + 2 * g.pad.0) * (g.w + 2 * g.pad.1) <= BLOCKED_MAX_GRID && g.oh * g.ow > 0
}

/// A depthwise convolution (one filter a channel) sixteen channels at a
/// time: each task one image's block of 16 channels (the blocks of the
/// batch shared between the threads), its planes transposed into a
/// zero-padded grid of pixels by 16 channels (`[hp][wp][16]`, NCHW16c for
/// the one block), each output line's pixels (up to
/// [`BLOCKED_RUN_MAX`] a pass) accumulated in registers through the taps
/// in order, sixteen channels a vector, then the block's `[pixels][16]`
/// transposed back into its planes, and the fused chain run on them while
/// they are in the cache (or `line`, a chain of constants only, on each
/// output line in the tile, in L1). With `input_cl`, `xs` is stored
/// channels-last (`[b][h][w][c]`) and each pixel's channels are copied
/// into the grid as they lie ([`pixels_to_grid`]); with `channels_last`
/// (and no `then`), the tile's pixels are written to `out` stored so,
/// not transposed into planes (the executor's layout plan, `exec::layout`). The multiply-adds of [`window_planes`] in the
/// same order (the bias first, then the taps), so the same bits; but the
/// lanes are channels, none spent on padding or masked off, and every load
/// a whole vector (the masked kernel loads each input vector under its
/// tap's mask, unaligned, with a mask and a broadcast beside it).
///
/// # Safety
/// The kernels' instruction set is present ([`sgemm::available`]); `xs` holds `b * c * h * w` floats, `wt` the
/// weight by blocks of 16 channels (`Executor::depthwise_taps`), `bs`
/// (if any) `c`, `out` `b * c * oh * ow`.
pub unsafe fn depthwise_blocked(
    p: &Depthwise,
    xs: &[f32],
    wt: &[f32],
    out: &mut [std::mem::MaybeUninit<f32>],
    then: Option<&Finish<'_>>,
    line: Option<&sgemm::Epilogue>,
    (input_cl, channels_last): (bool, bool),
) {
    let (g, b, c, bs) = (&p.g, p.batch, p.channels, p.bias);
    assert!(
        line.is_none_or(sgemm::Epilogue::constants_only),
        "depthwise_blocked: a line's chain reads inputs"
    );
    assert!(
        !channels_last || then.is_none(),
        "depthwise_blocked: a chain over planes of a channels-last output"
    );
    let (hp, wp) = (g.h + 2 * g.pad.0, g.w + 2 * g.pad.1);
    let (plane, oplane, taps) = (g.h * g.w, g.oh * g.ow, g.kh * g.kw);
    let blocks = c.div_ceil(16);
    assert!(
        wt.len() >= blocks * taps * 16,
        "depthwise_blocked: the weight is not by blocks of 16"
    );
    // the bias by block and lane, lanes past `c` zero
    let mut bias = vec![0f32; blocks * 16];
    if let Some(bs) = bs {
        bias[..c].copy_from_slice(&bs[..c]);
    }
    let dst = sgemm::SendPtr(out.as_mut_ptr().cast());
    // every window inside the grid
    assert!(
        (g.oh - 1) * g.stride.0 + (g.kh - 1) * g.dil.0 < hp
            && (g.ow - 1) * g.stride.1 + (g.kw - 1) * g.dil.1 < wp,
        "depthwise_blocked: windows outside the padded input"
    );
    let wide = sgemm::avx512();
    let run_max = if wide {
        BLOCKED_RUN_MAX
    } else {
        BLOCKED_RUN_MAX_AVX2
    };
    let task = |t: usize| {
        let mut s = SCRATCH.with(|s| std::mem::take(&mut *s.borrow_mut()));
        let Scratch { grid, tile, padded } = &mut s;
        let (n, blk) = (t / blocks, t % blocks);
        let (c0, cb) = (blk * 16, (c - blk * 16).min(16));
        if *padded != (hp, wp, g.pad.0, g.pad.1) {
            // the padding is zeroed once and stays so: each block writes
            // only the grid's interior, all 16 lanes of each pixel (so
            // only the border is cleared here, not the whole grid:
            // MobileNetV3's depthwise layers change geometry one after
            // another, 215 KB cleared for its 56x56 one)
            // (never shrunk: growing again would clear what it adds)
            if grid.len() < hp * wp * 16 {
                grid.resize(hp * wp * 16, 0.0);
            }
            let (ph, pw) = g.pad;
            for (y, line) in grid[..hp * wp * 16].chunks_mut(wp * 16).enumerate() {
                if y < ph || y >= ph + g.h {
                    line.fill(0.0);
                } else {
                    line[..pw * 16].fill(0.0);
                    line[(pw + g.w) * 16..].fill(0.0);
                }
            }
            *padded = (hp, wp, g.pad.0, g.pad.1);
        }
        if tile.len() < oplane * 16 {
            tile.resize(oplane * 16, 0.0);
        }
        // SAFETY: the block's planes are inside `xs`, the grid holds
        // the padded image.
        unsafe {
            if input_cl {
                pixels_to_grid(&xs[n * plane * c..][..plane * c], c, (c0, cb), g, wp, grid)
            } else {
                planes_to_grid(&xs[(n * c + c0) * plane..][..cb * plane], cb, g, wp, grid)
            }
        };
        let w = &wt[blk * taps * 16..][..taps * 16];
        let init = &bias[blk * 16..][..16];
        for oy in 0..g.oh {
            let mut ox = 0;
            while ox < g.ow {
                // even runs of up to BLOCKED_RUN_MAX (28 as 14 + 14; on
                // AVX2, BLOCKED_RUN_MAX_AVX2)
                let left = g.ow - ox;
                let len = left.div_ceil(left.div_ceil(run_max));
                macro_rules! call {
                    ($run:ident: $($n:literal)*) => {
                        match len {
                            $($n => $run::<$n>(grid, wp, w, init, g, oy, ox, &mut tile[(oy * g.ow + ox) * 16..]),)*
                            _ => unreachable!("runs hold at most BLOCKED_RUN_MAX pixels"),
                        }
                    };
                }
                // SAFETY: the instruction set is present (this function's
                // contract); the grid holds every pixel the run's windows read.
                unsafe {
                    if wide {
                        call!(blocked_run_avx512: 1 2 3 4 5 6 7 8 9 10 11 12 13 14)
                    } else {
                        call!(blocked_run_avx2: 1 2 3 4 5 6)
                    }
                }
                ox += len;
            }
            if let Some(e) = line {
                // (no inputs: where the line lies in the output is moot)
                sgemm::run_epilogue(e, 0, &mut tile[oy * g.ow * 16..][..g.ow * 16]);
            }
        }
        if channels_last {
            // each pixel's cb channels to where they lie in `[b][oh][ow][c]`
            for p in 0..oplane {
                // SAFETY: tasks write disjoint channels of each pixel,
                // inside `out` (b * oplane * c floats)
                unsafe {
                    let to = dst.at((n * oplane + p) * c + c0);
                    if cb == 16 {
                        to.cast::<[f32; 16]>().write_unaligned(
                            tile.as_ptr()
                                .add(p * 16)
                                .cast::<[f32; 16]>()
                                .read_unaligned(),
                        );
                    } else {
                        std::ptr::copy_nonoverlapping(tile.as_ptr().add(p * 16), to, cb);
                    }
                }
            }
            SCRATCH.with(|k| *k.borrow_mut() = s);
            return;
        }
        // back to planes, the block's first cb of them
        let at = (n * c + c0) * oplane;
        // SAFETY: tasks write disjoint blocks of planes of `out`
        let dst: &mut [std::mem::MaybeUninit<f32>] =
            unsafe { std::slice::from_raw_parts_mut(dst.at(at).cast(), cb * oplane) };
        // SAFETY: the sizes are the block's
        unsafe { vmath::pixels_to_planes(tile, cb, oplane, dst) };
        SCRATCH.with(|k| *k.borrow_mut() = s);
        if let Some(then) = then {
            // SAFETY: pixels_to_planes wrote every element of the block
            then(at, unsafe {
                &mut *(dst as *mut [std::mem::MaybeUninit<f32>] as *mut [f32])
            });
        }
    };
    let tasks = b * blocks;
    if tasks == 1 {
        task(0);
    } else {
        crate::kernels::threads::par_for(tasks, task);
    }
}

/// A thread's padded grid and tile for [`depthwise_blocked`], kept between
/// tasks and calls (taken out while a task runs: one the thread picks up
/// meanwhile makes its own). Made per batch of tasks, the grid was
/// cleared whole each time (6.5% of a lone depthwise layer's samples).
#[derive(Default)]
struct Scratch {
    grid: Vec<f32>,
    tile: Vec<f32>,
    /// The grid's (hp, wp, top, left) padding, zero while it stays.
    padded: (usize, usize, usize, usize),
}

thread_local! {
    static SCRATCH: std::cell::RefCell<Scratch> = std::cell::RefCell::new(Scratch::default());
}

/// A depthwise weight `ws` (`[c][taps]`) by blocks of 16 channels, tap
/// and lane (`[c / 16][taps][16]`, lanes past `c` zero): as
/// [`depthwise_blocked`] reads it.
pub(crate) fn depthwise_by_blocks(ws: &[f32], c: usize, taps: usize) -> Vec<f32> {
    let mut wt = vec![0f32; c.div_ceil(16) * taps * 16];
    for ch in 0..c {
        for t in 0..taps {
            wt[((ch / 16) * taps + t) * 16 + ch % 16] = ws[ch * taps + t];
        }
    }
    wt
}

/// `N` output pixels of line `oy` from column `ox` of one block of
/// [`depthwise_blocked`]: each started at the bias, then through every
/// tap in order (the tap's 16 weights one vector), into `tile` (`[N][16]`
/// from its start).
///
/// # Safety
/// `S`'s instruction set is present; `grid` (`[hp][wp][16]`) holds every
/// pixel the windows read, `w` `taps * 16` floats, `tile` `N * 16`.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
unsafe fn blocked_run<S: F32x16, const N: usize>(
    grid: &[f32],
    wp: usize,
    w: &[f32],
    init: &[f32],
    g: &PlaneWindows,
    oy: usize,
    ox: usize,
    tile: &mut [f32],
) {
    assert!(tile.len() >= N * 16 && init.len() >= 16 && w.len() >= g.kh * g.kw * 16);
    let (gp, sx) = (grid.as_ptr(), g.stride.1 * 16);
    let mut acc = [S::load(init.as_ptr()); N];
    for ty in 0..g.kh {
        let iy = oy * g.stride.0 + ty * g.dil.0;
        for tx in 0..g.kw {
            let wv = S::load(w.as_ptr().add((ty * g.kw + tx) * 16));
            let at = (iy * wp + ox * g.stride.1 + tx * g.dil.1) * 16;
            debug_assert!(at + (N - 1) * sx + 16 <= grid.len());
            let p = gp.add(at);
            for (j, a) in acc.iter_mut().enumerate() {
                *a = wv.fma(S::load(p.add(j * sx)), *a);
            }
        }
    }
    for (j, a) in acc.iter().enumerate() {
        a.store(tile.as_mut_ptr().add(j * 16));
    }
}

/// The `cb` (up to 16) planes of `src` (`h * w` each) into the interior
/// of a padded grid (`[hp][wp][16]`; lanes from `cb` zero), sixteen
/// pixels at a time through [`vmath::transpose16`].
///
/// # Safety
/// None beyond the sizes, which are checked: without AVX-512F the lines
/// go through [`vmath::transpose_strided`], lanes from `cb` zeroed.
unsafe fn planes_to_grid(src: &[f32], cb: usize, g: &PlaneWindows, wp: usize, grid: &mut [f32]) {
    let plane = g.h * g.w;
    assert!(cb <= 16 && src.len() >= cb * plane && grid.len() >= (g.h + 2 * g.pad.0) * wp * 16);
    if sgemm::avx512() {
        return planes_to_grid_avx512(src, cb, g, wp, grid);
    }
    // lines that are not a multiple of 8 pixels run on across the lines,
    // eight pixels at a time (lines of 56, in 8 x 8 blocks through a strip
    // of lines in L1, kept that way: 72 channels at 56x56 1.10x of its time
    // the other way)
    if sgemm::available() && !g.w.is_multiple_of(8) {
        return planes_to_grid_avx2(src, cb, g, wp, grid);
    }
    for y in 0..g.h {
        let line = grid[((y + g.pad.0) * wp + g.pad.1) * 16..][..g.w * 16].as_mut_ptr();
        vmath::transpose_strided::<false>(&src[y * g.w..], plane, (cb, g.w), line, 16);
        if cb < 16 {
            for x in 0..g.w {
                std::slice::from_raw_parts_mut(line.add(x * 16 + cb), 16 - cb).fill(0.0);
            }
        }
    }
}

/// Channels `[c0, c0 + cb)` (up to 16) of an image stored channels-last
/// (`src`, `[h][w][c]`) into the interior of a padded grid (`[hp][wp][16]`;
/// lanes from `cb` zero): each pixel's channels one copy, no transpose.
fn pixels_to_grid(
    src: &[f32],
    c: usize,
    (c0, cb): (usize, usize),
    g: &PlaneWindows,
    wp: usize,
    grid: &mut [f32],
) {
    assert!(
        cb <= 16
            && c0 + cb <= c
            && src.len() >= g.h * g.w * c
            && grid.len() >= (g.h + 2 * g.pad.0) * wp * 16,
        "pixels_to_grid: sizes"
    );
    for y in 0..g.h {
        let line = &mut grid[((y + g.pad.0) * wp + g.pad.1) * 16..][..g.w * 16];
        for (x, px) in line.chunks_exact_mut(16).enumerate() {
            let from = &src[(y * g.w + x) * c + c0..][..cb];
            if cb == 16 {
                px.copy_from_slice(from);
            } else {
                px[..cb].copy_from_slice(from);
                px[cb..].fill(0.0);
            }
        }
    }
}

/// [`planes_to_grid`] sixteen pixels at a time through [`vmath::transpose16`].
///
/// # Safety
/// AVX-512F is present; the sizes as [`planes_to_grid`] checks them.
#[target_feature(enable = "avx512f")]
unsafe fn planes_to_grid_avx512(
    src: &[f32],
    cb: usize,
    g: &PlaneWindows,
    wp: usize,
    grid: &mut [f32],
) {
    use std::arch::x86_64::*;
    let plane = g.h * g.w;
    let (sp, gp) = (src.as_ptr(), grid.as_mut_ptr());
    let (mut y, mut x) = (0, 0);
    for p0 in (0..plane).step_by(16) {
        let np = (plane - p0).min(16);
        let m = ((1u32 << np) - 1) as __mmask16;
        let r: [__m512; 16] = std::array::from_fn(|ch| {
            if ch < cb {
                _mm512_maskz_loadu_ps(m, sp.add(ch * plane + p0))
            } else {
                _mm512_setzero_ps()
            }
        });
        for v in vmath::transpose16(r).iter().take(np) {
            _mm512_storeu_ps(gp.add(((y + g.pad.0) * wp + x + g.pad.1) * 16), *v);
            x += 1;
            if x == g.w {
                (y, x) = (y + 1, 0);
            }
        }
    }
}

/// [`planes_to_grid`] eight pixels at a time through
/// [`vmath::transpose8x8`], running on across the lines (a line of 7,
/// 14 or 28 pixels left 7, 6 or 4 of them to a scalar loop a line,
/// transposed one float at a time): MobileNetV3's 5x5 over 576 channels
/// at 7x7 0.62x of its time on one thread, the model at batch 1 0.93x, at
/// batch 8 0.90x (interleaved, AVX2).
///
/// # Safety
/// AVX2 is present; the sizes as [`planes_to_grid`] checks them.
#[target_feature(enable = "avx2,fma")]
unsafe fn planes_to_grid_avx2(
    src: &[f32],
    cb: usize,
    g: &PlaneWindows,
    wp: usize,
    grid: &mut [f32],
) {
    use std::arch::x86_64::*;
    let plane = g.h * g.w;
    let (sp, gp) = (src.as_ptr(), grid.as_mut_ptr());
    let (mut y, mut x) = (0, 0);
    let lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    for p0 in (0..plane).step_by(8) {
        let np = (plane - p0).min(8);
        // the pixels there are (masked loads read nothing past them)
        let m = _mm256_cmpgt_epi32(_mm256_set1_epi32(np as i32), lane);
        let half = |h: usize| {
            let r: [__m256; 8] = std::array::from_fn(|i| {
                let ch = 8 * h + i;
                match ch < cb {
                    true if np == 8 => _mm256_loadu_ps(sp.add(ch * plane + p0)),
                    true => _mm256_maskload_ps(sp.add(ch * plane + p0), m),
                    false => _mm256_setzero_ps(),
                }
            });
            vmath::transpose8x8(r)
        };
        let lo = half(0);
        let hi = if cb > 8 {
            half(1)
        } else {
            [_mm256_setzero_ps(); 8]
        };
        for (l, h) in lo.iter().zip(&hi).take(np) {
            let at = gp.add(((y + g.pad.0) * wp + x + g.pad.1) * 16);
            _mm256_storeu_ps(at, *l);
            _mm256_storeu_ps(at.add(8), *h);
            x += 1;
            if x == g.w {
                (y, x) = (y + 1, 0);
            }
        }
    }
}

/// Vectors of output a kernel call keeps in registers at most
/// ([`masked_group`]).
const MASKED_GROUP_MAX: usize = 12;

/// Masks a [`MaskedPlan`] holds at most (4 MiB; a 112x112 plane under a
/// 5x5 kernel has 20 thousand).
const MASKED_PLAN_MAX_MASKS: usize = 1 << 21;

/// How [`conv_masked`] reads every plane of a depthwise convolution: the
/// output plane as one flat run of `oh * ow` pixels, 16 at a time, and
/// each tap's input as the same run shifted, in a source laid out with
/// `ow` columns a line: the input plane itself (stride 1, `ow == w`: read
/// in place, no copy), or its stride phases (rows `py, py + sy, ...` by
/// columns `px, px + sx, ...`, each `ow` wide). A lane whose tap falls
/// in the padding, or on another line, is masked off tap by tap.
pub struct MaskedPlan {
    g: PlaneWindows,
    /// Whether the input plane is the source (else its phases).
    in_place: bool,
    /// Floats per phase (lines of `ow`).
    phase_len: usize,
    /// Where each tap reads, from an output pixel's flat index.
    offs: Vec<isize>,
    /// Output vectors per kernel call (whole groups cover the plane).
    group: usize,
    /// Load masks by `[group][tap][vector of the group]`.
    masks: Vec<u16>,
}

impl MaskedPlan {
    /// [`MaskedPlan::new`], made once per geometry (a process's models
    /// have a few dozen; the masks of a 56x56 plane took longer to make
    /// than its convolution at batch 1).
    pub fn cached(g: PlaneWindows) -> Option<std::sync::Arc<MaskedPlan>> {
        use std::sync::{Arc, Mutex, OnceLock};
        type Plans = crate::kernels::FastMap<PlaneWindows, Option<Arc<MaskedPlan>>>;
        static PLANS: OnceLock<Mutex<Plans>> = OnceLock::new();
        let Ok(mut plans) = PLANS.get_or_init(Default::default).lock() else {
            return MaskedPlan::new(g).map(Arc::new);
        };
        if plans.len() >= 1024 {
            plans.clear();
        }
        plans
            .entry(g)
            .or_insert_with(|| MaskedPlan::new(g).map(Arc::new))
            .clone()
    }

    /// The plan, where the planes can be read this way: stride 1 with the
    /// output lines as long as the input's, or any stride whose phases'
    /// lines fit the output's (`ceil(w / sx) <= ow`: "same" padding).
    pub fn new(g: PlaneWindows) -> Option<MaskedPlan> {
        let (sy, sx) = g.stride;
        let in_place = (sy, sx) == (1, 1) && g.w == g.ow;
        if !in_place && g.w.div_ceil(sx) > g.ow {
            return None;
        }
        let (out, taps) = (g.oh * g.ow, g.kh * g.kw);
        if out == 0 || taps == 0 {
            return None;
        }
        let phase_len = if in_place { 0 } else { g.h.div_ceil(sy) * g.ow };
        // input lines (columns) of phase p: iy = p + k * s < n
        let count = |n: usize, p: usize, s: usize| n.saturating_sub(p).div_ceil(s);
        let mut offs = Vec::with_capacity(taps);
        // per tap: (phase row lines, phase columns, line shift, column shift)
        let mut reach = Vec::with_capacity(taps);
        for t in 0..taps {
            let ay = ((t / g.kw) * g.dil.0) as isize - g.pad.0 as isize;
            let ax = ((t % g.kw) * g.dil.1) as isize - g.pad.1 as isize;
            let (py, ry) = (ay.rem_euclid(sy as isize), ay.div_euclid(sy as isize));
            let (px, rx) = (ax.rem_euclid(sx as isize), ax.div_euclid(sx as isize));
            let phase = (py as usize * sx + px as usize) * phase_len;
            offs.push(phase as isize + ry * g.ow as isize + rx);
            let (lines, cols) = if in_place {
                (g.h, g.w)
            } else {
                (count(g.h, py as usize, sy), count(g.w, px as usize, sx))
            };
            reach.push((lines as isize, cols as isize, ry, rx));
        }
        let vectors = out.div_ceil(16);
        let groups = vectors.div_ceil(MASKED_GROUP_MAX);
        let group = vectors.div_ceil(groups);
        if groups * group * taps > MASKED_PLAN_MAX_MASKS {
            // (a huge plane under a huge kernel: plane by plane instead)
            return None;
        }
        let mut masks = vec![0u16; groups * group * taps];
        for gi in 0..groups {
            for (t, &(lines, cols, ry, rx)) in reach.iter().enumerate() {
                for j in 0..group {
                    let mut m = 0u16;
                    for lane in 0..16 {
                        let q = (gi * group + j) * 16 + lane;
                        let (y, x) = ((q / g.ow) as isize + ry, (q % g.ow) as isize + rx);
                        if q < out && (0..lines).contains(&y) && (0..cols).contains(&x) {
                            m |= 1 << lane;
                        }
                    }
                    masks[(gi * taps + t) * group + j] = m;
                }
            }
        }
        Some(MaskedPlan {
            g,
            in_place,
            phase_len,
            offs,
            group,
            masks,
        })
    }

    /// The stride phases of input plane `src` into `dst` (`sy * sx`
    /// phases of `phase_len`); what no tap reads is left as it was.
    pub fn split(&self, src: &[f32], dst: &mut [f32]) {
        let (g, (sy, sx)) = (&self.g, self.g.stride);
        for (iy, row) in src.chunks_exact(g.w).take(g.h).enumerate() {
            let (py, r) = (iy % sy, iy / sy);
            let line = |px: usize| (py * sx + px) * self.phase_len + r * g.ow;
            match sx {
                1 => dst[line(0)..][..g.w].copy_from_slice(row),
                2 => {
                    let (a, b) = (line(0), line(1));
                    let (even, odd) = dst.split_at_mut(b);
                    let (even, odd) = (&mut even[a..a + g.w.div_ceil(2)], &mut odd[..g.w / 2]);
                    if g.w <= 16 && sgemm::avx512() {
                        // SAFETY: AVX-512F is present; the row and its
                        // halves hold w, ceil(w / 2) and w / 2 floats.
                        unsafe { deinterleave_short(row, even.as_mut_ptr(), odd.as_mut_ptr()) }
                    } else {
                        deinterleave(row, even, odd);
                    }
                }
                _ => {
                    for (ix, v) in row.iter().enumerate() {
                        dst[line(ix % sx) + ix / sx] = *v;
                    }
                }
            }
        }
    }
}

/// [`deinterleave`] of a row of up to 16 columns in one vector, by two
/// permutes (MobileNetV3's 14-column rows spent more in the call and the
/// pairs' loop than in the convolution after it: the 288-channel 5x5
/// stride 2 on 14x14 at batch 8 0.148 -> 0.123 ms).
///
/// # Safety
/// AVX-512F is present; `row` holds at most 16 floats, `even` `ceil(len /
/// 2)`, `odd` `len / 2`.
#[target_feature(enable = "avx512f")]
unsafe fn deinterleave_short(row: &[f32], even: *mut f32, odd: *mut f32) {
    use std::arch::x86_64::*;
    let n = row.len();
    let mask = |k: usize| ((1u32 << k) - 1) as __mmask16;
    let v = _mm512_maskz_loadu_ps(mask(n), row.as_ptr());
    let ie = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 0, 0, 0, 0, 0, 0, 0, 0);
    let io = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 0, 0, 0, 0, 0, 0, 0, 0);
    _mm512_mask_storeu_ps(even, mask(n.div_ceil(2)), _mm512_permutexvar_ps(ie, v));
    _mm512_mask_storeu_ps(odd, mask(n / 2), _mm512_permutexvar_ps(io, v));
}

crate::kernels::vmath::multiversion! {
    /// `row`'s even columns into `even`, its odd ones into `odd`: a loop
    /// over pairs, which the compiler vectorises (faster than two
    /// permutes of 32 columns by hand: 0.13 against 0.16 ms for the
    /// phases of MobileNetV3's 16-channel stride-2 3x3 at batch 8).
    pub fn deinterleave(row: &[f32], even: &mut [f32], odd: &mut [f32]) {
        for ((e, o), two) in even.iter_mut().zip(odd.iter_mut()).zip(row.chunks_exact(2)) {
            *e = two[0];
            *o = two[1];
        }
        if row.len() % 2 == 1 {
            even[row.len() / 2] = row[row.len() - 1];
        }
    }
}

/// A depthwise convolution by [`MaskedPlan`]: every output plane (`co`
/// of them an image, output channel `o` reading input channel `o /
/// mult`) a group of up to [`MASKED_GROUP_MAX`] vectors at a time, each
/// through every tap while it stays in registers (the tap's weight
/// broadcast once a group, the input loaded under the tap's masks), the
/// planes split between the threads; `then` runs on each task's planes
/// once they are done (the fused epilogue). The multiply-adds of
/// [`window_planes`] in the same order (the bias first, then the taps in
/// order, a masked lane adding zero times the weight), so the same bits,
/// but no padded copy and no padding columns computed: MobileNetV3's 7x7
/// planes spent 49 of 80 lanes plane by plane, and channels last paid
/// for two transposes.
///
/// # Safety
/// AVX-512F is present; `xs` holds `b * c * h * w` floats, `ws` `co *
/// kh * kw`, `bs` (if any) `co`, `out` `b * co * oh * ow`.
pub unsafe fn conv_masked(
    plan: &MaskedPlan,
    p: &Depthwise,
    xs: &[f32],
    ws: &[f32],
    out: &mut [std::mem::MaybeUninit<f32>],
    then: Option<&Finish<'_>>,
) {
    let (c, co, bs) = (p.channels, p.out_channels, p.bias);
    let g = &plan.g;
    let (per_in, taps) = (g.h * g.w, g.kh * g.kw);
    let phases = g.stride.0 * g.stride.1 * plan.phase_len;
    planes_by_tasks(
        out,
        g.oh * g.ow,
        taps,
        then,
        |p, scratch: &mut Vec<f32>, dst| {
            scratch.resize(phases, 0.0);
            let (n, o) = (p / co, p % co);
            let src = &xs[(n * c + o / (co / c)) * per_in..][..per_in];
            let src = if plan.in_place {
                src.as_ptr()
            } else {
                plan.split(src, scratch);
                scratch.as_ptr()
            };
            let init = bs.map_or(0.0, |v| v[o]);
            // SAFETY: AVX-512F is present (this function's contract); the
            // source holds every pixel an unmasked lane reads, `dst` the plane.
            unsafe {
                masked_plane(
                    plan,
                    src,
                    &ws[o * taps..][..taps],
                    init,
                    dst.as_mut_ptr().cast(),
                )
            };
        },
    );
}

/// Every output plane of a depthwise kernel (`per_out` floats each) of
/// `out`, by `plane(p, scratch, plane p)`: the planes split between the
/// threads in tasks of about 32 thousand outputs times `taps` (tens of
/// microseconds), each with a scratch of its own; `then(at, planes)`,
/// where given, on each task's planes once they are written, while they
/// are in the cache (the fused epilogue).
pub(super) fn planes_by_tasks<S: Default>(
    out: &mut [std::mem::MaybeUninit<f32>],
    per_out: usize,
    taps: usize,
    then: Option<&Finish<'_>>,
    plane: impl Fn(usize, &mut S, &mut [std::mem::MaybeUninit<f32>]) + Sync,
) {
    let count = out.len() / per_out.max(1);
    let threads = rayon::current_num_threads().max(1);
    let group = (32_768 / (per_out * taps).max(1)).clamp(1, count.div_ceil(threads).max(1));
    let run = |scratch: &mut S, (gi, dsts): (usize, &mut [std::mem::MaybeUninit<f32>])| {
        for (j, dst) in dsts.chunks_mut(per_out.max(1)).enumerate() {
            plane(gi * group + j, scratch, dst);
        }
        if let Some(then) = then {
            // SAFETY: every plane of the task was written just above
            let dsts = unsafe { &mut *(dsts as *mut [std::mem::MaybeUninit<f32>] as *mut [f32]) };
            then(gi * group * per_out, dsts);
        }
    };
    if count <= group {
        run(&mut S::default(), (0, out));
    } else {
        let (chunk, len) = (per_out * group, out.len());
        let at = sgemm::SendPtr(out.as_mut_ptr().cast());
        crate::kernels::threads::par_for_init(len.div_ceil(chunk), S::default, |s, gi| {
            // SAFETY: task gi's planes, no other task's, inside `out`
            let dsts = unsafe {
                std::slice::from_raw_parts_mut(
                    at.at(gi * chunk).cast(),
                    chunk.min(len - gi * chunk),
                )
            };
            run(s, (gi, dsts))
        });
    }
}

/// One output plane of [`conv_masked`] from its source `src` (the input
/// plane or its phases), the tap weights `w`, the start `init`.
///
/// # Safety
/// AVX-512F is present; `src` holds every pixel an unmasked lane of the
/// plan reads, `dst` `oh * ow` floats.
unsafe fn masked_plane(plan: &MaskedPlan, src: *const f32, w: &[f32], init: f32, dst: *mut f32) {
    let (out, taps, group) = (plan.g.oh * plan.g.ow, w.len(), plan.group);
    for (gi, masks) in plan.masks.chunks_exact(taps * group).enumerate() {
        let q0 = gi * group * 16;
        macro_rules! call {
            ($($n:literal)*) => {
                match group {
                    $($n => masked_group::<$n>(src, &plan.offs, masks, w, init, q0, out, dst),)*
                    _ => unreachable!("groups hold at most MASKED_GROUP_MAX vectors"),
                }
            };
        }
        // SAFETY: as this function's
        unsafe { call!(1 2 3 4 5 6 7 8 9 10 11 12) }
    }
}

/// `N` vectors of an output plane from flat pixel `q0` (of `out`): each
/// started at `init`, then through every tap `t` (weight `w[t]`, input
/// at `src + offs[t]` past the pixel, loaded under `masks[t * N + j]`),
/// stored where they lie in the plane.
///
/// # Safety
/// AVX-512F is present; as [`masked_plane`]'s.
#[allow(clippy::too_many_arguments)]
#[target_feature(enable = "avx512f")]
unsafe fn masked_group<const N: usize>(
    src: *const f32,
    offs: &[isize],
    masks: &[u16],
    w: &[f32],
    init: f32,
    q0: usize,
    out: usize,
    dst: *mut f32,
) {
    use std::arch::x86_64::*;
    let mut acc = [_mm512_set1_ps(init); N];
    for (t, (&wt, &off)) in w.iter().zip(offs).enumerate() {
        let wv = _mm512_set1_ps(wt);
        // (a lane past the plane, or in the padding, is never read: the
        // addresses are only formed, with wrapping arithmetic)
        let p = src.wrapping_offset(off + q0 as isize);
        let m = &masks[t * N..][..N];
        for j in 0..N {
            let x = _mm512_maskz_loadu_ps(m[j], p.wrapping_add(j * 16));
            acc[j] = _mm512_fmadd_ps(wv, x, acc[j]);
        }
    }
    for (j, a) in acc.iter().enumerate() {
        let q = q0 + j * 16;
        let lanes = out.saturating_sub(q).min(16);
        let m = ((1u32 << lanes) - 1) as __mmask16;
        _mm512_mask_storeu_ps(dst.wrapping_add(q), m, *a);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// [`depthwise_blocked`] gives the bits of [`window_planes`] (the same
    /// multiply-adds in the same order): channels that do and do not fill
    /// the blocks, lines of one run and of two (28 as 14 + 14), strides,
    /// dilations, padding none, "same" and more, one image and three,
    /// with and without a bias, and a fused step run on each block's
    /// planes at their offset.
    #[test]
    pub fn blocked_depthwise_has_the_bits_of_plane_by_plane() {
        if !sgemm::available() {
            return;
        }
        for &(b, c, (h, w), (kh, kw), stride, pad, dil, bias) in &[
            (
                1usize,
                16usize,
                (7usize, 7usize),
                (5usize, 5usize),
                (1usize, 1usize),
                (2usize, 2usize),
                (1usize, 1usize),
                true,
            ),
            (3, 40, (14, 14), (5, 5), (2, 2), (2, 2), (1, 1), false),
            (2, 72, (28, 28), (3, 3), (1, 1), (1, 1), (1, 1), true),
            (1, 24, (9, 30), (3, 5), (1, 2), (0, 2), (2, 1), true),
            (2, 17, (5, 6), (1, 1), (1, 1), (0, 0), (1, 1), false),
            (1, 33, (11, 13), (3, 3), (3, 2), (3, 0), (1, 2), true),
            // a last block of 11 channels (both halves of its lanes), a
            // plane of 100 pixels (the last 4 a masked load)
            (2, 27, (10, 10), (3, 3), (1, 1), (1, 1), (1, 1), true),
        ] {
            let g = PlaneWindows::conv(h, w, (kh, kw), stride, pad, dil).unwrap();
            let (oh, ow) = (g.oh, g.ow);
            assert!(blocked(&g));
            let taps = kh * kw;
            let xs: Vec<f32> = (0..b * c * h * w)
                .map(|i| ((i * 7919 % 2001) as f32 / 1000.0) - 1.0)
                .collect();
            let ws: Vec<f32> = (0..c * taps)
                .map(|i| ((i * 104_729 % 997) as f32 / 500.0) - 1.0)
                .collect();
            let bs: Vec<f32> = (0..c).map(|i| i as f32 * 0.01 - 0.2).collect();
            let bs = bias.then_some(&bs[..]);
            let len = b * c * oh * ow;
            // the fused step: each element plus its offset in the output
            let then = |at: usize, span: &mut [f32]| {
                for (i, v) in span.iter_mut().enumerate() {
                    *v += (at + i) as f32;
                }
            };
            let mut want = sgemm::uninit(len);
            let plane = |p: usize| {
                let o = p % c;
                (
                    p,
                    bs.map_or(0.0, |v| v[o]),
                    WindowOp::Fma(&ws[o * taps..][..taps]),
                )
            };
            window_planes(g, &xs, &mut want, 0.0, plane, Some(&then));
            let mut got = sgemm::uninit(len);
            // SAFETY: AVX-512F is present (checked above); the sizes are
            // the convolution's
            unsafe {
                depthwise_blocked(
                    &Depthwise {
                        g,
                        batch: b,
                        channels: c,
                        out_channels: c,
                        bias: bs,
                    },
                    &xs,
                    &depthwise_by_blocks(&ws, c, taps),
                    &mut got,
                    Some(&then),
                    None,
                    (false, false),
                )
            };
            // a chain of constants (hardswish, then a relu) on each line
            // in the tile: the bits of the same chain run on the planes
            let steps = [
                sgemm::EpiStep {
                    op: sgemm::EpiOp::Hardswish,
                    b: sgemm::EpiSrc::Const(0.0),
                },
                sgemm::EpiStep {
                    op: sgemm::EpiOp::Relu,
                    b: sgemm::EpiSrc::Const(0.0),
                },
            ];
            let chain = sgemm::Epilogue {
                steps: &steps,
                inputs: &[],
                map: None,
            };
            let on_planes = |at: usize, span: &mut [f32]| sgemm::run_epilogue(&chain, at, span);
            let wt = depthwise_by_blocks(&ws, c, taps);
            let (mut planes, mut lines) = (sgemm::uninit(len), sgemm::uninit(len));
            // SAFETY: as above
            unsafe {
                depthwise_blocked(
                    &Depthwise {
                        g,
                        batch: b,
                        channels: c,
                        out_channels: c,
                        bias: bs,
                    },
                    &xs,
                    &wt,
                    &mut planes,
                    Some(&on_planes),
                    None,
                    (false, false),
                );
                depthwise_blocked(
                    &Depthwise {
                        g,
                        batch: b,
                        channels: c,
                        out_channels: c,
                        bias: bs,
                    },
                    &xs,
                    &wt,
                    &mut lines,
                    None,
                    Some(&chain),
                    (false, false),
                );
            }
            // SAFETY: every call wrote every element
            let (want, got) = unsafe { (sgemm::assume_init(want), sgemm::assume_init(got)) };
            let (planes, lines) =
                unsafe { (sgemm::assume_init(planes), sgemm::assume_init(lines)) };
            for (i, (x, y)) in want.iter().zip(&got).enumerate() {
                assert_eq!(
                    x.to_bits(),
                    y.to_bits(),
                    "{c} channels {h}x{w} kernel {kh}x{kw}: element {i}: {x} against {y}"
                );
            }
            assert!(planes.iter().any(|v| *v > 0.0) && planes.contains(&0.0));
            for (i, (x, y)) in planes.iter().zip(&lines).enumerate() {
                assert_eq!(
                    x.to_bits(),
                    y.to_bits(),
                    "{c} channels {h}x{w} kernel {kh}x{kw}, by lines: element {i}: {x} against {y}"
                );
            }
        }
    }
}
