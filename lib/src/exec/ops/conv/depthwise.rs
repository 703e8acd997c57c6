//! Depthwise convolutions (a filter a channel, MobileNet's): each plane
//! read in place (or its stride phases) under masks ([`conv_masked`]) where
//! the padding is "same", else channels last over small planes, or plane
//! by plane ([`window_planes`]).

use super::*;

/// A depthwise convolution (groups = input channels; each output channel
/// reads one input channel, `co / c` outputs per input): a direct sum per
/// output plane, the planes split between the threads, by the first of
/// [`conv_masked`], [`depthwise_channels_last`] and [`window_planes`]
/// that takes the geometry (all three the same multiply-adds in the same
/// order, so the same bits). im2col would build one `kh * kw` by `oh *
/// ow` matrix per channel for a product of one row.
pub(super) fn conv2d_depthwise(
    x: &CandleTensor,
    w: &CandleTensor,
    bias: Option<&CandleTensor>,
    stride: (usize, usize),
    pad: (usize, usize),
    dil: (usize, usize),
    epilogue: Option<&EpilogueArgs>,
) -> Result<CandleTensor> {
    let (b, c, h, wd) = x.dims4().map_err(ce)?;
    let (co, _, kh, kw) = w.dims4().map_err(ce)?;
    if co % c != 0 {
        return Err(Error::bad_input(format!(
            "depthwise convolution: {co} output channels for {c} input channels"
        )));
    }
    let mult = co / c;
    let (oh, ow) = (
        conv_span(h, pad.0, dil.0, kh, stride.0)?,
        conv_span(wd, pad.1, dil.1, kw, stride.1)?,
    );
    let bs = bias.map(f32s).transpose()?;
    // read where it lies below: a weight that is a view, made contiguous
    // (a clone of the handle when it already is)
    let w = &w.contiguous().map_err(ce)?;
    let geom = PlaneWindows {
        h,
        w: wd,
        kh,
        kw,
        stride,
        pad,
        dil,
        oh,
        ow,
    };
    let len = b * co * oh * ow;
    // the fused chain after it, on each task's planes as they are done
    let fused = register_epilogue(epilogue, len).filter(|_| sgemm::available());
    let then = fused.as_ref().map(|(steps, inputs)| sgemm::Epilogue {
        steps,
        inputs,
        map: None,
    });
    let apply = |at: usize, span: &mut [f32]| {
        if let Some(e) = &then {
            sgemm::run_epilogue(e, at, span)
        }
    };
    // in place under masks where the lines allow
    if let Some(plan) = MaskedPlan::cached(geom).filter(|_| sgemm::available()) {
        let mut out = sgemm::uninit(len);
        // the weights where they lie
        with_host(x, |xs: &[f32]| {
            with_host(w, |ws: &[f32]| {
                // SAFETY: AVX-512F is present (checked above); the sizes
                // are the op's.
                unsafe {
                    conv_masked(&plan, xs, ws, bs.as_deref(), c, co, &mut out, then.is_some().then_some(&apply as _))
                }
            })
        })
        .flatten()
        .ok_or_else(|| Error::internal("depthwise convolution of an input or weight that is not float32 on the host"))?;
        mark_applied(epilogue, then.is_some());
        // SAFETY: conv_masked wrote every plane
        let out = unsafe { sgemm::assume_init(out) };
        return CandleTensor::from_vec(out, (b, co, oh, ow), x.device()).map_err(ce);
    }
    let ws = f32s(w)?;
    // channels last over small planes, and over larger ones where the
    // batch gives each thread images of its own
    let cl_max = if b >= rayon::current_num_threads() {
        DEPTHWISE_CL_BATCH_MAX_PIXELS
    } else {
        DEPTHWISE_CL_MAX_PIXELS
    };
    if mult == 1 && c >= 16 && oh * ow <= cl_max && sgemm::available() {
        // (its transposes write floats: the small output cleared first)
        let mut out = vec![0f32; len];
        with_host(x, |xs: &[f32]| {
            // SAFETY: AVX-512F is present (checked above).
            unsafe { depthwise_channels_last(xs, &ws, bs.as_deref(), &geom, b, c, &mut out) };
        })
        .ok_or_else(|| Error::internal("depthwise convolution of an input that is not float32 on the host"))?;
        if then.is_some() {
            use rayon::prelude::*;
            out.par_chunks_mut((c * oh * ow).max(1))
                .enumerate()
                .for_each(|(n, image)| apply(n * c * oh * ow, image));
        }
        mark_applied(epilogue, then.is_some());
        return CandleTensor::from_vec(out, (b, co, oh, ow), x.device()).map_err(ce);
    }
    // written whole by window_planes
    let mut out = sgemm::uninit(len);
    with_host(x, |xs: &[f32]| {
        let plane = |plane| {
            let (n, o) = (plane / co, plane % co);
            let b0 = bs.as_ref().map_or(0.0, |v| v[o]);
            (n * c + o / mult, b0, WindowOp::Fma(&ws[o * kh * kw..][..kh * kw]))
        };
        window_planes(geom, xs, &mut out, 0.0, plane, then.is_some().then_some(&apply as _))
    })
    .ok_or_else(|| Error::internal("depthwise convolution of an input that is not float32 on the host"))?;
    mark_applied(epilogue, then.is_some());
    // SAFETY: window_planes wrote every plane
    let out = unsafe { sgemm::assume_init(out) };
    CandleTensor::from_vec(out, (b, co, oh, ow), x.device()).map_err(ce)
}

/// Output planes up to which a depthwise convolution runs channels last
/// ([`depthwise_channels_last`]).
const DEPTHWISE_CL_MAX_PIXELS: usize = 64;

/// ... and up to which it does with an image or more a thread (14x14:
/// MobileNetV3's 240-channel 5x5s at batch 8 0.46 -> 0.39 ms; its
/// 28x28s were slower, 72 channels 3x3 stride 2 0.31 -> 0.45 ms; at
/// batch 1 an image's rows in parallel were slower than plane by plane
/// on 14x14, 4% of the model).
const DEPTHWISE_CL_BATCH_MAX_PIXELS: usize = 196;

/// A depthwise convolution (one filter a channel) vectorised over the
/// channels: each image (a thread's at a time) transposed to pixels by
/// channels in a zero-padded grid (`[hp][wp][c]`), every output pixel's channels 16 at a time
/// through the taps in order (the tap's weights one vector, `[taps][c]`;
/// four pixels share each weight load), then transposed back. The same
/// multiply-adds in the same order as [`window_planes`], so the same
/// bits; but the lanes are channels, where plane by plane MobileNetV3's
/// 7x7 and 14x14 planes spent a third of theirs on padding columns and
/// each plane paid for its own copy (20-70 GFLOP/s).
///
/// # Safety
/// AVX-512F is present; `xs` holds `b * c * h * w` floats, `ws` `c * kh
/// * kw`, `bs` (if any) `c`, `out` `b * c * oh * ow`.
#[allow(clippy::too_many_arguments)]
unsafe fn depthwise_channels_last(
    xs: &[f32],
    ws: &[f32],
    bs: Option<&[f32]>,
    g: &PlaneWindows,
    b: usize,
    c: usize,
    out: &mut [f32],
) {
    use rayon::prelude::*;
    let (hp, wp) = (g.h + 2 * g.pad.0, g.w + 2 * g.pad.1);
    let (plane, oplane, taps) = (g.h * g.w, g.oh * g.ow, g.kh * g.kw);
    // the weights by tap: [taps][c]
    let mut wt = vec![0f32; taps * c];
    vmath::transpose(ws, c, taps, &mut wt);
    // one image: channels last in a grid padded with zeros, each output
    // row ([oh][ow][c]; the rows in parallel where `rows` says), back to
    // channels first in `dst`
    let image = |n: usize, dst: &mut [f32], bufs: &mut (Vec<f32>, Vec<f32>, Vec<f32>), rows: bool| {
        let (grid, t, hwc) = bufs;
        grid.clear();
        grid.resize(hp * wp * c, 0.0);
        t.resize(plane * c, 0.0);
        hwc.resize(oplane * c, 0.0);
        vmath::transpose(&xs[n * c * plane..][..c * plane], c, plane, t);
        for (y, row) in t.chunks_exact(g.w * c).enumerate() {
            grid[((y + g.pad.0) * wp + g.pad.1) * c..][..g.w * c].copy_from_slice(row);
        }
        let grid = &grid[..];
        let row_task = |(oy, dst): (usize, &mut [f32])| {
            // SAFETY: AVX-512F is present (this function's contract); the
            // grid holds every padded pixel a window of this row reads.
            unsafe { depthwise_row(grid, wp, &wt, bs, g, c, oy, dst) }
        };
        if rows {
            hwc.par_chunks_mut((g.ow * c).max(1)).enumerate().for_each(row_task);
        } else {
            hwc.chunks_mut((g.ow * c).max(1)).enumerate().for_each(row_task);
        }
        vmath::transpose(hwc, oplane, c, dst);
    };
    // images in parallel, each thread with its own buffers (a batch's
    // grids and results at once were 3 MB of MobileNetV3's peak at batch
    // 8); one image at a time, its rows in parallel, below a thread each
    let chunk = (c * oplane).max(1);
    if b >= rayon::current_num_threads() {
        out.par_chunks_mut(chunk)
            .enumerate()
            .for_each_init(Default::default, |bufs, (n, dst)| image(n, dst, bufs, false));
    } else {
        let mut bufs = Default::default();
        for (n, dst) in out.chunks_mut(chunk).enumerate() {
            image(n, dst, &mut bufs, true);
        }
    }
}

/// One output row `oy` of [`depthwise_channels_last`] (`dst`: `[ow][c]`)
/// from an image's padded grid (`[hp][wp][c]`).
///
/// # Safety
/// AVX-512F is present; `img` holds every pixel the row's windows read.
#[allow(clippy::too_many_arguments)]
#[target_feature(enable = "avx512f")]
unsafe fn depthwise_row(
    img: &[f32],
    wp: usize,
    wt: &[f32],
    bs: Option<&[f32]>,
    g: &PlaneWindows,
    c: usize,
    oy: usize,
    dst: &mut [f32],
) {
    use std::arch::x86_64::*;
    let img = img.as_ptr();
    for c0 in (0..c).step_by(16) {
        let m: __mmask16 = if c - c0 >= 16 {
            0xffff
        } else {
            ((1u32 << (c - c0)) - 1) as __mmask16
        };
        let init = match bs {
            Some(bv) => _mm512_maskz_loadu_ps(m, bv.as_ptr().add(c0)),
            None => _mm512_setzero_ps(),
        };
        // four pixels at a time, then the rest
        let mut ox = 0;
        while ox < g.ow {
            let k = (g.ow - ox).min(4);
            let mut acc = [init; 4];
            for ty in 0..g.kh {
                let iy = oy * g.stride.0 + ty * g.dil.0;
                for tx in 0..g.kw {
                    let wv = _mm512_maskz_loadu_ps(m, wt.as_ptr().add((ty * g.kw + tx) * c + c0));
                    for (j, a) in acc.iter_mut().enumerate().take(k) {
                        let ix = (ox + j) * g.stride.1 + tx * g.dil.1;
                        let xv = _mm512_maskz_loadu_ps(m, img.add((iy * wp + ix) * c + c0));
                        *a = _mm512_fmadd_ps(wv, xv, *a);
                    }
                }
            }
            for (j, a) in acc.iter().enumerate().take(k) {
                _mm512_mask_storeu_ps(dst.as_mut_ptr().add((ox + j) * c + c0), m, *a);
            }
            ox += k;
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
struct MaskedPlan {
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
    fn cached(g: PlaneWindows) -> Option<std::sync::Arc<MaskedPlan>> {
        use std::sync::{Arc, Mutex, OnceLock};
        type Plans = HashMap<PlaneWindows, Option<Arc<MaskedPlan>>>;
        static PLANS: OnceLock<Mutex<Plans>> = OnceLock::new();
        let Ok(mut plans) = PLANS.get_or_init(Default::default).lock() else {
            return MaskedPlan::new(g).map(Arc::new);
        };
        if plans.len() >= 1024 {
            plans.clear();
        }
        plans.entry(g).or_insert_with(|| MaskedPlan::new(g).map(Arc::new)).clone()
    }

    /// The plan, where the planes can be read this way: stride 1 with the
    /// output lines as long as the input's, or any stride whose phases'
    /// lines fit the output's (`ceil(w / sx) <= ow`: "same" padding).
    fn new(g: PlaneWindows) -> Option<MaskedPlan> {
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
    fn split(&self, src: &[f32], dst: &mut [f32]) {
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
                    if g.w <= 16 && sgemm::available() {
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

super::vmath::multiversion! {
    /// `row`'s even columns into `even`, its odd ones into `odd`: a loop
    /// over pairs, which the compiler vectorises (faster than two
    /// permutes of 32 columns by hand: 0.13 against 0.16 ms for the
    /// phases of MobileNetV3's 16-channel stride-2 3x3 at batch 8).
    fn deinterleave(row: &[f32], even: &mut [f32], odd: &mut [f32]) {
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
#[allow(clippy::too_many_arguments)]
unsafe fn conv_masked(
    plan: &MaskedPlan,
    xs: &[f32],
    ws: &[f32],
    bs: Option<&[f32]>,
    c: usize,
    co: usize,
    out: &mut [std::mem::MaybeUninit<f32>],
    then: Option<&Finish<'_>>,
) {
    use rayon::prelude::*;
    let g = &plan.g;
    let (per_in, per_out, taps) = (g.h * g.w, g.oh * g.ow, g.kh * g.kw);
    let (mult, count) = (co / c, out.len() / per_out);
    // outputs times taps: about 32 thousand a task (tens of microseconds)
    let threads = rayon::current_num_threads().max(1);
    let group = (32_768 / (per_out * taps)).clamp(1, count.div_ceil(threads).max(1));
    let phases = g.stride.0 * g.stride.1 * plan.phase_len;
    let run = |scratch: &mut Vec<f32>, (gi, dsts): (usize, &mut [std::mem::MaybeUninit<f32>])| {
        scratch.resize(phases, 0.0);
        for (j, dst) in dsts.chunks_mut(per_out).enumerate() {
            let p = gi * group + j;
            let (n, o) = (p / co, p % co);
            let src = &xs[(n * c + o / mult) * per_in..][..per_in];
            let src = if plan.in_place {
                src.as_ptr()
            } else {
                plan.split(src, scratch);
                scratch.as_ptr()
            };
            let init = bs.map_or(0.0, |v| v[o]);
            // SAFETY: AVX-512F is present (this function's contract); the
            // source holds every pixel an unmasked lane reads, `dst` the plane.
            unsafe { masked_plane(plan, src, &ws[o * taps..][..taps], init, dst.as_mut_ptr().cast()) };
        }
        if let Some(then) = then {
            // SAFETY: every plane of the task was written just above
            let dsts = unsafe { &mut *(dsts as *mut [std::mem::MaybeUninit<f32>] as *mut [f32]) };
            then(gi * group * per_out, dsts);
        }
    };
    if count <= group {
        run(&mut Vec::new(), (0, out));
    } else {
        out.par_chunks_mut(per_out * group)
            .enumerate()
            .for_each_init(Vec::new, run);
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

    /// The depthwise kernels' speed on MobileNetV3's shapes at batch 8
    /// (a timing, not a test: `THREADS=2 cargo test --release -p pt2kit
    /// --features exec --lib depthwise_speed -- --ignored --nocapture`).
    #[test]
    #[ignore]
    fn depthwise_speed() {
        if !sgemm::available() {
            return;
        }
        let threads: usize = std::env::var("THREADS").ok().and_then(|v| v.parse().ok()).unwrap_or(2);
        let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().unwrap();
        for &(c, hw, k, s) in &[
            (576usize, 7usize, 5usize, 1usize),
            (240, 14, 5, 1),
            (88, 28, 3, 1),
            (16, 112, 3, 2),
            (72, 56, 3, 2),
            (96, 28, 5, 2),
            (288, 14, 5, 2),
        ] {
            let b = 8;
            let pad = k / 2;
            let o = (hw + 2 * pad - k) / s + 1;
            let g = PlaneWindows {
                h: hw,
                w: hw,
                kh: k,
                kw: k,
                stride: (s, s),
                pad: (pad, pad),
                dil: (1, 1),
                oh: o,
                ow: o,
            };
            let plan = MaskedPlan::cached(g).unwrap();
            let xs: Vec<f32> = (0..b * c * hw * hw).map(|i| (i % 7) as f32 * 0.1).collect();
            let ws: Vec<f32> = (0..c * k * k).map(|i| (i % 5) as f32 * 0.1).collect();
            let mut out = sgemm::uninit(b * c * o * o);
            let mut cl = vec![0f32; b * c * o * o];
            let taps = (b * c * o * o * k * k) as f64;
            let reps = (2e8 / taps) as usize + 1;
            let mut t = [0f64; 2];
            pool.install(|| {
                for _ in 0..8 {
                    let t0 = std::time::Instant::now();
                    for _ in 0..reps {
                        unsafe { conv_masked(&plan, &xs, &ws, None, c, c, &mut out, None) };
                    }
                    t[0] += t0.elapsed().as_secs_f64();
                    let t0 = std::time::Instant::now();
                    if s == 1 && o * o <= 196 {
                        for _ in 0..reps {
                            unsafe { depthwise_channels_last(&xs, &ws, None, &g, b, c, &mut cl) };
                        }
                    }
                    t[1] += t0.elapsed().as_secs_f64();
                }
            });
            let per = |v: f64| v / (8 * reps) as f64 * 1e3;
            eprintln!(
                "c {c} {hw}x{hw} k{k} s{s}: masked {:.3} ms ({:.2} taps/ns), channels last {:.3} ms",
                per(t[0]),
                taps / (per(t[0]) * 1e6),
                per(t[1])
            );
        }
    }
}

