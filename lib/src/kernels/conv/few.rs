//! Convolutions from few input channels (a network's stem, over an
//! image's colours): the output channels on the lanes, the pixels of an
//! output line in registers, each input value broadcast: see
//! [`conv_few_channels`].

use super::*;
use crate::kernels::simd::{isa_entries, Avx2, Avx512, F32x16};

/// Input channels up to which a 2-D convolution takes
/// [`conv_few_channels`].
const FEW_CHANNELS_MAX: usize = 4;

/// Accumulators [`few_run`] keeps in registers: pixels times vectors of
/// output channels (24 of AVX-512's 32 vector registers; the weights and the
/// broadcast value take the rest).
const FEW_ACCUMULATORS: usize = 24;

/// [`FEW_ACCUMULATORS`] on AVX2: six pairs, 12 of its 16 registers
/// ([`passes`]).
const FEW_ACCUMULATORS_AVX2: usize = 6;

/// The fewest output channels [`conv_few_channels`] takes: 32 on
/// AVX-512; 16 on AVX2 (MobileNetV3's 3x3 stem to 16 channels, which the
/// direct kernel ran at 25 GFLOP/s there: 0.39-0.55 -> 0.17-0.30 ms at
/// batch 1 on a Zen 3, per node, interleaved).
fn few_min_channels() -> usize {
    if sgemm::avx512() {
        32
    } else {
        16
    }
}

/// How this CPU's [`few_run`] covers `vecs` vectors of output channels:
/// vectors a pass and pixels a run. On AVX-512 all of them in one pass;
/// on AVX2 one vector (two registers) of six pixels a pass, the line's
/// runs made once for each: 12 accumulators, two of weights and the
/// broadcast value in AVX2's 16 registers. ResNet's 64-channel stem as
/// one pass of four vectors (one pixel) held 17, and one accumulator
/// went to the stack and back on every tap.
fn passes(vecs: usize) -> (usize, usize) {
    if sgemm::avx512() {
        (vecs, FEW_ACCUMULATORS / vecs)
    } else {
        (1, FEW_ACCUMULATORS_AVX2)
    }
}

/// Whether a convolution takes [`conv_few_channels`]: 2-D with taps,
/// up to [`FEW_CHANNELS_MAX`] input channels, 32 (on AVX2 16: [`few_min_channels`]) to 64 output channels
/// in whole vectors, output lines at least a run long.
pub fn few_channels(g: &Windows, c: usize, co: usize) -> bool {
    g.planar()
        && (1..=FEW_CHANNELS_MAX).contains(&c)
        && co.is_multiple_of(16)
        && (few_min_channels()..=64).contains(&co)
        && g.taps() > 1
        && g.output[2] >= passes(co / 16).1
}

/// The product of [`conv_few_channels`]: `xs` the batch's images, `wt`
/// the weights `[k][c_out]`, `bias` one a channel, into `out`: planes, or
/// with `channels_last` `[b][oh][ow][co]` (each line's results where they
/// lie, no transposes); `then` run on each band.
///
/// # Safety
/// The kernels' instruction set is present ([`sgemm::available`]); `xs` holds `b * c * h * w` floats, `wt` `c *
/// taps * co`, `bias` `co`, `out` `b * co * oh * ow`; `co` is 16 to 64 in
/// whole vectors and `ow` at least a run ([`few_channels`]).
pub unsafe fn few_channels_product(
    xs: &[f32],
    wt: &[f32],
    bias: &[f32],
    g: &Windows,
    (b, c, co): (usize, usize, usize),
    out: &mut [std::mem::MaybeUninit<f32>],
    (then, channels_last): (Option<&sgemm::Epilogue>, bool),
) {
    let ([_, h, wd], [_, kh, kw]) = (g.input, g.kernel);
    let ([_, sh, sw], [_, ph, pw], [_, dh, dw]) = (g.stride, g.pad, g.dilation);
    let [_, oh, ow] = g.output;
    let (plane, oplane, vecs) = (h * wd, oh * ow, co / 16);
    let (per_pass, run) = passes(vecs);
    assert!(
        xs.len() >= b * c * plane
            && wt.len() >= c * kh * kw * co
            && bias.len() >= co
            && out.len() >= b * co * oplane
            && co.is_multiple_of(16)
            && (1..=4).contains(&vecs)
            && ow >= run,
        "few_channels_product: sizes that are not the convolution's"
    );
    // the columns whose windows lie inside the input's lines: lo..hi
    let inside = |ox: usize| ox * sw >= pw && ox * sw - pw + (kw - 1) * dw < wd;
    let lo = (0..ow).find(|&ox| inside(ox)).unwrap_or(ow);
    let hi = (lo..ow).find(|&ox| !inside(ox)).unwrap_or(ow);
    // bands of lines, about four a thread
    let threads = rayon::current_num_threads().max(1);
    let per_image = (4 * threads).div_ceil(b).clamp(1, oh.max(1));
    let band = oh.div_ceil(per_image).max(1);
    let bands = oh.div_ceil(band);
    let dst = sgemm::SendPtr(out.as_mut_ptr().cast());
    // a chain of numbers alone (the stem's hardswish or relu) runs on each
    // line's `[ow][co]` results while they are in L1, before they go to
    // their planes; a chain with inputs on each band once it is written
    // (a band is a whole 112-line image at batch 8: 800 KiB, past L2,
    // read back for the pass). MobileNetV3's stem with its hardswish,
    // alternate calls on the 2-vCPU AVX2 VM: at batch 8 0.966x of its
    // time on one thread, 0.983x on two; at batch 1 0.99x
    let per_line = then.filter(|e| e.constants_only());
    let task = |buf: &mut Vec<f32>, t: usize| {
        let (n, oy0) = (t / bands, (t % bands) * band);
        let oy1 = (oy0 + band).min(oh);
        if !channels_last {
            buf.resize(ow * co, 0.0);
        }
        let x = &xs[n * c * plane..][..c * plane];
        for oy in oy0..oy1 {
            // the line's `[ow][co]` results: a buffer, or channels-last
            // the output's line itself (its own task's)
            let tile = if channels_last {
                dst.at(((n * oh + oy) * ow) * co)
            } else {
                buf.as_mut_ptr()
            };
            let tile = (tile, ow * co);
            // the kernel rows inside the input: ky0..ky1
            let iy = |ky: usize| (oy * sh + ky * dh) as isize - ph as isize;
            let ky0 = (0..kh).find(|&ky| iy(ky) >= 0).unwrap_or(kh);
            let ky1 = (ky0..kh).find(|&ky| iy(ky) >= h as isize).unwrap_or(kh);
            let line = FewLine {
                x,
                plane,
                wd,
                c,
                kh,
                kw,
                dw,
                sw,
                rows: (ky0..ky1).map(|ky| (ky, iy(ky) as usize)).collect(),
                wt,
                bias,
                co,
            };
            let at = |ox: usize| (ox * sw) as isize - pw as isize;
            for ox in (0..lo).chain(hi..ow) {
                // SAFETY: the instruction set is present; the pixel is in the tile
                unsafe { few_pixel(&line, at(ox), (tile.0.add(ox * co), co)) };
            }
            if hi - lo >= run {
                // a pass a group of vectors: runs from lo, the last one
                // ending at hi (over pixels done already where it must:
                // the same values again)
                for v0 in (0..vecs).step_by(per_pass) {
                    let mut ox = lo;
                    loop {
                        let s = ox.min(hi - run);
                        macro_rules! call {
                            ($run:ident: $($v:literal => $p:literal),*) => {
                                match per_pass {
                                    $($v => $run::<$v, $p>(&line, at(s), v0, (tile.0.add(s * co), tile.1 - s * co)),)*
                                    _ => unreachable!("16 to 64 output channels"),
                                }
                            };
                        }
                        // SAFETY: the instruction set is present; the run's
                        // windows lie inside the input's lines (lo..hi), its
                        // rows inside the image, its pixels inside the tile
                        unsafe {
                            if sgemm::avx512() {
                                call!(few_run_avx512: 1 => 24, 2 => 12, 3 => 8, 4 => 6)
                            } else {
                                call!(few_run_avx2: 1 => 6)
                            }
                        };
                        if s + run >= hi {
                            break;
                        }
                        ox = s + run;
                    }
                }
            } else {
                for ox in lo..hi {
                    // SAFETY: as above
                    unsafe { few_pixel(&line, at(ox), (tile.0.add(ox * co), co)) };
                }
            }
            if let Some(e) = per_line {
                // SAFETY: the line's tile (the buffer, or channels-last
                // this task's line of the output) was written above
                let span = unsafe { std::slice::from_raw_parts_mut(tile.0, ow * co) };
                sgemm::run_epilogue(e, 0, span);
            }
            for v in (0..vecs).filter(|_| !channels_last) {
                // SAFETY: tasks write disjoint lines of `out`; the
                // instruction set is present, the tile holds `ow` pixels of `co`
                unsafe {
                    vmath::pixels_to_planes_at(
                        buf[v * 16..].as_ptr(),
                        co,
                        16,
                        ow,
                        dst.at((n * co + v * 16) * oplane + oy * ow),
                        oplane,
                    )
                };
            }
        }
        if per_line.is_some() {
            // run on each line above
        } else if let Some(e) = then.filter(|_| channels_last) {
            // the band's lines, one span (a chain of constants: any
            // element's offset will do)
            let at = (n * oh + oy0) * ow * co;
            // SAFETY: the band's lines were written above, by this task only
            let span = unsafe { std::slice::from_raw_parts_mut(dst.at(at), (oy1 - oy0) * ow * co) };
            sgemm::run_epilogue(e, at, span);
        } else if let Some(e) = then {
            for o in 0..co {
                let at = (n * co + o) * oplane + oy0 * ow;
                // SAFETY: the band's lines of this plane were written
                // above, by this task only
                let span = unsafe { std::slice::from_raw_parts_mut(dst.at(at), (oy1 - oy0) * ow) };
                sgemm::run_epilogue(e, at, span);
            }
        }
    };
    let tasks = b * bands;
    if tasks == 1 {
        task(&mut Vec::new(), 0);
    } else {
        crate::kernels::threads::par_for_init(tasks, Vec::new, task);
    }
}

/// One output line of [`few_channels_product`]: its image (`x`, `c`
/// planes of `plane` floats, lines of `wd`), the kernel rows inside the
/// image with their input lines, the weights `[k][co]` and the bias.
struct FewLine<'a> {
    x: &'a [f32],
    plane: usize,
    wd: usize,
    c: usize,
    kh: usize,
    kw: usize,
    dw: usize,
    sw: usize,
    rows: Vec<(usize, usize)>,
    wt: &'a [f32],
    bias: &'a [f32],
    co: usize,
}

// `few_run` for AVX-512F and for AVX2 + FMA.
isa_entries!(few_run_avx512, few_run_avx2 = few_run[V: usize, P: usize](l: &FewLine, ix0: isize, v0: usize, tile: (*mut f32, usize)));

/// `P` pixels of a line from input column `ix0` (the first's window
/// start; each next `sw` on), `V` vectors of output channels from vector
/// `v0`, into `tile` (`[P][co]`, written only): the bias, then every tap
/// in order.
///
/// # Safety
/// `S`'s instruction set is present; every window of the run lies inside
/// the input's lines, `tile` is a pointer to that many writable floats,
/// `P * co` or more, no other thread's.
#[inline(always)]
unsafe fn few_run<S: F32x16, const V: usize, const P: usize>(
    l: &FewLine,
    ix0: isize,
    v0: usize,
    tile: (*mut f32, usize),
) {
    assert!(
        ix0 >= 0
            && ix0 as usize + (P - 1) * l.sw + (l.kw - 1) * l.dw < l.wd
            && (v0 + V) * 16 <= l.co
            && tile.1 >= (P - 1) * l.co + (v0 + V) * 16
    );
    let (xp, wp) = (l.x.as_ptr(), l.wt.as_ptr().add(v0 * 16));
    let (tp, bp) = (tile.0.add(v0 * 16), l.bias.as_ptr().add(v0 * 16));
    let init: [S; V] = std::array::from_fn(|v| S::load(bp.add(v * 16)));
    let mut acc = [init; P];
    for ch in 0..l.c {
        for &(ky, iy) in &l.rows {
            let row = xp.add(ch * l.plane + iy * l.wd + ix0 as usize);
            for kx in 0..l.kw {
                let kk = (ch * l.kh + ky) * l.kw + kx;
                let wv: [S; V] = std::array::from_fn(|v| S::load(wp.add(kk * l.co + v * 16)));
                let base = row.add(kx * l.dw);
                for (p, a) in acc.iter_mut().enumerate() {
                    let xb = S::splat(*base.add(p * l.sw));
                    for v in 0..V {
                        a[v] = xb.fma(wv[v], a[v]);
                    }
                }
            }
        }
    }
    for (p, a) in acc.iter().enumerate() {
        for (v, r) in a.iter().enumerate() {
            r.store(tp.add(p * l.co + v * 16));
        }
    }
}

/// One pixel of a line whose window may reach past the line's ends
/// (those taps skipped: the padding adds nothing), from input column
/// `ix0`, into `out` (`co` floats, written only).
///
/// # Safety
/// The kernels' instruction set is present; `out` is a pointer to that
/// many writable floats, `co` or more, no other thread's.
unsafe fn few_pixel(l: &FewLine, ix0: isize, out: (*mut f32, usize)) {
    #[target_feature(enable = "avx512f")]
    unsafe fn wide(l: &FewLine, ix0: isize, out: (*mut f32, usize)) {
        few_pixel_in::<Avx512>(l, ix0, out)
    }
    #[target_feature(enable = "avx2,fma")]
    unsafe fn avx2(l: &FewLine, ix0: isize, out: (*mut f32, usize)) {
        few_pixel_in::<Avx2>(l, ix0, out)
    }
    if sgemm::avx512() {
        wide(l, ix0, out)
    } else {
        avx2(l, ix0, out)
    }
}

#[inline(always)]
unsafe fn few_pixel_in<S: F32x16>(l: &FewLine, ix0: isize, out: (*mut f32, usize)) {
    let vecs = l.co / 16;
    assert!(vecs <= 4 && out.1 >= l.co);
    let mut acc = [S::zero(); 4];
    for (v, a) in acc.iter_mut().enumerate().take(vecs) {
        *a = S::load(l.bias.as_ptr().add(v * 16));
    }
    for ch in 0..l.c {
        for &(ky, iy) in &l.rows {
            let row = &l.x[ch * l.plane + iy * l.wd..][..l.wd];
            for kx in 0..l.kw {
                let ix = ix0 + (kx * l.dw) as isize;
                if ix < 0 || ix >= l.wd as isize {
                    continue;
                }
                let xb = S::splat(row[ix as usize]);
                let kk = (ch * l.kh + ky) * l.kw + kx;
                for (v, a) in acc.iter_mut().enumerate().take(vecs) {
                    *a = xb.fma(S::load(l.wt.as_ptr().add(kk * l.co + v * 16)), *a);
                }
            }
        }
    }
    for (v, a) in acc.iter().enumerate().take(vecs) {
        a.store(out.0.add(v * 16));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The few-channel product against a float64 reference: one to four
    /// input channels, 32, 48 and 64 output channels, kernels 3 to 7 with
    /// strides 1 to 3, padding, a dilation, lines whose runs overlap at
    /// the end and pixels whose windows reach past the lines' ends, two
    /// images, with a bias and a fused relu.
    #[test]
    fn few_channels_match_a_reference() {
        if !sgemm::available() {
            return;
        }
        use sgemm::{EpiOp, EpiSrc, EpiStep};
        let relu = [EpiStep {
            op: EpiOp::Relu,
            b: EpiSrc::Const(0.0),
        }];
        for &(c, co, (h, w), k, s, p, d) in &[
            (
                3usize,
                64usize,
                (30usize, 37usize),
                7usize,
                2usize,
                3usize,
                1usize,
            ),
            (1, 32, (9, 40), 3, 1, 1, 1),
            (4, 48, (17, 29), 5, 3, 2, 1),
            (2, 64, (12, 31), 3, 1, 0, 2),
            (3, 16, (23, 26), 3, 2, 1, 1),
        ] {
            let g = Windows::new(&[h, w], &[k, k], &[s, s], &[p, p], &[d, d]).unwrap();
            let [_, oh, ow] = g.output;
            // (16 output channels are few-channel on AVX2 only: AVX-512's
            // runs of 24 pixels are longer than this shape's lines)
            let taken = few_channels(&g, c, co);
            assert!(
                taken || co < few_min_channels(),
                "{c} -> {co}: a few-channel shape"
            );
            if !taken {
                continue;
            }
            let b = 2;
            let xs: Vec<f32> = (0..b * c * h * w)
                .map(|i| ((i * 7919) % 23) as f32 * 0.1 - 1.1)
                .collect();
            let ws: Vec<f32> = (0..co * c * k * k)
                .map(|i| ((i * 104729) % 19) as f32 * 0.05 - 0.45)
                .collect();
            let bias: Vec<f32> = (0..co).map(|o| o as f32 * 0.01 - 0.2).collect();
            let kk = c * k * k;
            let mut wt = vec![0f32; kk * co];
            vmath::transpose(&ws, co, kk, &mut wt);
            let mut out = sgemm::uninit(b * co * oh * ow);
            let e = sgemm::Epilogue {
                steps: &relu,
                inputs: &[],
                map: None,
            };
            // SAFETY: the instruction set is present; the sizes are the convolution's
            unsafe {
                few_channels_product(&xs, &wt, &bias, &g, (b, c, co), &mut out, (Some(&e), false))
            };
            // SAFETY: every output pixel was written
            let out = unsafe { sgemm::assume_init(out) };
            // the same left channels-last: the same bits, each pixel's
            // channels side by side
            let mut last = sgemm::uninit(b * co * oh * ow);
            // SAFETY: as above
            unsafe {
                few_channels_product(&xs, &wt, &bias, &g, (b, c, co), &mut last, (Some(&e), true))
            };
            // SAFETY: as above
            let last = unsafe { sgemm::assume_init(last) };
            for (i, v) in last.iter().enumerate() {
                let (o, pixel, n) = (i % co, (i / co) % (oh * ow), i / (co * oh * ow));
                assert_eq!(
                    v.to_bits(),
                    out[(n * co + o) * oh * ow + pixel].to_bits(),
                    "{c} -> {co} k{k} channels-last, element {i}"
                );
            }
            for n in 0..b {
                for o in 0..co {
                    for oy in 0..oh {
                        for ox in 0..ow {
                            let mut want = bias[o] as f64;
                            for ch in 0..c {
                                for ky in 0..k {
                                    for kx in 0..k {
                                        let (iy, ix) = (
                                            (oy * s + ky * d) as isize - p as isize,
                                            (ox * s + kx * d) as isize - p as isize,
                                        );
                                        if iy < 0 || ix < 0 || iy >= h as isize || ix >= w as isize
                                        {
                                            continue;
                                        }
                                        let x = xs
                                            [((n * c + ch) * h + iy as usize) * w + ix as usize]
                                            as f64;
                                        want += x * ws[((o * c + ch) * k + ky) * k + kx] as f64;
                                    }
                                }
                            }
                            let got = out[((n * co + o) * oh + oy) * ow + ox] as f64;
                            assert!(
                                (got - want.max(0.0)).abs() <= 1e-4 * (1.0 + want.abs()),
                                "{c} -> {co} k{k} s{s} p{p} d{d}: image {n} channel {o} ({oy}, {ox}): {got} vs {want}"
                            );
                        }
                    }
                }
            }
        }
    }

    /// The few-channel product's speed on the stems of ResNet (3 -> 64,
    /// 7x7 stride 2) and MobileNetV3 (3 -> 16, 3x3 stride 2) at batch
    /// `BATCH` (1), on `THREADS` threads (2), into planes and left
    /// channels-last: a timing, not a test: `cargo
    /// test --release -p pt2kit --features exec --lib stem_speed --
    /// --ignored --nocapture`.
    #[test]
    #[ignore]
    fn stem_speed() {
        if !sgemm::available() {
            return;
        }
        let ((_, pool), b) = (
            crate::kernels::bench_pool(2),
            crate::kernels::env_number("BATCH", 1),
        );
        for &(co, k, pad) in &[(64usize, 7usize, 3usize), (32, 3, 1), (16, 3, 1)] {
            let g = Windows::new(&[224, 224], &[k, k], &[2, 2], &[pad, pad], &[1, 1]).unwrap();
            let [_, oh, ow] = g.output;
            let xs: Vec<f32> = (0..b * 3 * 224 * 224)
                .map(|i| (i % 7) as f32 * 0.1)
                .collect();
            let wt: Vec<f32> = (0..3 * k * k * co).map(|i| (i % 5) as f32 * 0.1).collect();
            let bias = vec![0.5f32; co];
            let mut out = sgemm::uninit(b * co * oh * ow);
            let flops = 2.0 * (b * co * oh * ow * 3 * k * k) as f64;
            let reps = (2e9 / flops) as usize + 1;
            for channels_last in [false, true] {
                let t0 = std::time::Instant::now();
                pool.install(|| {
                    for _ in 0..reps {
                        unsafe {
                            few_channels_product(
                                &xs,
                                &wt,
                                &bias,
                                &g,
                                (b, 3, co),
                                &mut out,
                                (None, channels_last),
                            )
                        };
                    }
                });
                let t = t0.elapsed().as_secs_f64() / reps as f64;
                let layout = if channels_last {
                    "channels-last"
                } else {
                    "planes"
                };
                eprintln!(
                    "3 -> {co} {k}x{k} s2 batch {b}, {layout}: {:.3} ms, {:.0} GF/s",
                    t * 1e3,
                    flops / t / 1e9
                );
            }
        }
    }
}
