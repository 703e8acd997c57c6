//! Convolutions over small planes with the pixels as the product's rows
//! and the output channels on the lanes: [`conv_pixel_rows`] (pointwise)
//! and [`conv_pixel_taps`] (taps or a stride).

use super::*;

/// Output planes of up to this many pixels take [`conv_pixel_taps`]
/// (ResNet's 14x14 and 7x7 stages; over 28x28 the channels-last copy and
/// the transpose weigh more: no gain at batch 1, slower at batch 8, and
/// its stride-2 3x3 into 28x28 at batch 8 2.7 -> 3.1 ms).
const PIXEL_TAPS_MAX: usize = 196;

/// Whether a 2-D convolution with taps or a stride over `c` input
/// channels to `co` output channels takes [`conv_pixel_taps`]: an output
/// plane of up to [`PIXEL_TAPS_MAX`] pixels, where the direct kernel's
/// panels of 32 pixels leave lanes idle (a 7x7 plane fills 49 of 64), and
/// whole panels of output channels.
pub fn pixel_taps(g: &Windows, c: usize, co: usize) -> bool {
    g.planar()
        && !pointwise(g)
        && (1..=PIXEL_TAPS_MAX).contains(&g.out_plane())
        && c >= 16
        && co.is_multiple_of(sgemm::NR)
}

/// A finished block of [`conv_pixel_rows`]' product `y` (`[n, co]`:
/// rows `pixels`, columns `chans`) transposed into image `bi`'s output
/// `out` (`[co, n]`; with `accumulate`, added to what it holds), then the
/// fused chain `then` on those channels' lines: in one call where the
/// block has every pixel (the channels' lines lie end to end), else line
/// by line.
///
/// # Safety
/// The block of `y` is initialised and written by no one meanwhile; the
/// block's elements of `out` are this caller's alone (initialised, with
/// `accumulate`).
pub unsafe fn finish_block(
    y: sgemm::SendPtr,
    out: sgemm::SendPtr,
    (n, co): (usize, usize),
    (pixels, chans): (std::ops::Range<usize>, std::ops::Range<usize>),
    (accumulate, then): (bool, Option<&sgemm::Epilogue>),
    bi: usize,
) {
    use crate::kernels::vmath::transpose_raw;
    // SAFETY: the block's first elements, inside both (the caller's promise)
    let (src, dst) = unsafe {
        (
            y.at(pixels.start * co + chans.start),
            out.at(chans.start * n + pixels.start),
        )
    };
    let size = (pixels.len(), chans.len());
    // SAFETY: the block in both (the caller's promise)
    unsafe {
        if accumulate {
            transpose_raw::<true>(src, co, size, dst, n);
        } else {
            transpose_raw::<false>(src, co, size, dst, n);
        }
    }
    let Some(e) = then else { return };
    let at = bi * co * n;
    if pixels.len() == n {
        // SAFETY: the channels' whole lines, written just above
        let lines =
            unsafe { std::slice::from_raw_parts_mut(out.at(chans.start * n), chans.len() * n) };
        sgemm::run_epilogue(e, at + chans.start * n, lines);
    } else {
        for ch in chans {
            // SAFETY: the line's pixels of the block, written just above
            let line = unsafe {
                std::slice::from_raw_parts_mut(out.at(ch * n + pixels.start), pixels.len())
            };
            sgemm::run_epilogue(e, at + ch * n + pixels.start, line);
        }
    }
}

/// Whether [`conv_pixel_rows`] packs an image of `n` pixels by `k`
/// channels as the product's left operand ([`sgemm::pack_a`]) rather than
/// read its columns in place: over [`PACKED_COLUMNS_MIN_K`] channels on
/// planes of up to [`PACKED_COLUMNS_MAX_PIXELS`]. In place, each step of
/// `k` reads a new line (a 7x7 plane is 196 bytes), and a slice of
/// [`sgemm::KC`] steps does not stay in L1 beside the weight's panel;
/// packed, a row panel's slice is 12 KiB read in order. On the 2-vCPU
/// AVX2 VM, interleaved: ResNet-50's `[2048, 512]` over 7x7 0.80-0.88x of
/// its time on one thread, 0.81-0.91x on two, its `[512, 2048]` 0.96-0.98x;
/// over 28x28 its `[512, 128]` was 1.19-1.31x (the copy, 1.6 MB, weighs
/// more than it saves), over 14x14 its `[1024, 256]` 0.85-1.11x.
pub fn packed_columns(n: usize, k: usize) -> bool {
    n <= PACKED_COLUMNS_MAX_PIXELS && k > PACKED_COLUMNS_MIN_K
}

/// See [`packed_columns`].
const PACKED_COLUMNS_MAX_PIXELS: usize = 64;

/// See [`packed_columns`].
const PACKED_COLUMNS_MIN_K: usize = 128;

thread_local! {
    /// The padded channels-last image between calls.
    static IMAGE: std::cell::RefCell<Vec<f32>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// Tap `t`'s weight `[c, c_out]` where it lies in a convolution's
/// contiguous `[c_out, c, taps]` (`ws`).
pub fn tap_weight(ws: &[f32], t: usize, (c, co): (usize, usize), taps: usize) -> sgemm::View<'_> {
    sgemm::View {
        data: ws,
        off: t,
        rows: c,
        cols: co,
        rs: taps,
        cs: c * taps,
    }
}

/// [`conv_pixel_taps`]' work on the batch's images `xs` (`[b, c, h, w]`)
/// with each tap's weight packed (`bs`) into `out` (`[b, co, oh, ow]`,
/// written whole), the fused chain `then` run on each image.
pub fn pixel_taps_product(
    xs: &[f32],
    (b, c, co): (usize, usize, usize),
    g: &Windows,
    bs: &[&sgemm::PackedB],
    bias: Option<&[f32]>,
    (accumulate, then): (bool, Option<&sgemm::Epilogue>),
    out: &mut [std::mem::MaybeUninit<f32>],
) {
    let ([_, h, wd], [_, kh, kw]) = (g.input, g.kernel);
    let ([_, sh, sw], [_, ph, pw], [_, dh, dw]) = (g.stride, g.pad, g.dilation);
    let [_, oh, ow] = g.output;
    let n = oh * ow;
    // the extent the taps read, padding included
    let (hp, wp) = (
        (oh - 1) * sh + (kh - 1) * dh + 1,
        (ow - 1) * sw + (kw - 1) * dw + 1,
    );
    let tap_offs: Vec<usize> = (0..kh * kw)
        .map(|t| ((t / kw) * dh * wp + (t % kw) * dw) * c)
        .collect();
    // each output line's pixels in panels of up to `line_rows`, evenly
    // split, every image's in one product (the weight read once for the batch)
    let padded = hp * wp * c;
    let mut rows = Vec::new();
    let panel = sgemm::line_rows();
    for bi in 0..b {
        for oy in 0..oh {
            let parts = ow.div_ceil(panel);
            for q in 0..parts {
                let (x0, x1) = (q * ow / parts, (q + 1) * ow / parts);
                rows.push(sgemm::RowPanel {
                    at: bi * padded + (oy * sh * wp + x0 * sw) * c,
                    c_row: bi * n + oy * ow + x0,
                    rows: x1 - x0,
                });
            }
        }
    }
    let mut yt: Vec<std::mem::MaybeUninit<f32>> = sgemm::uninit(b * n * co);
    let mut image = IMAGE.with(|v| v.take());
    image.clear();
    image.resize(b * padded, 0.0);
    let plane = c * h * wd;
    crate::kernels::threads::par_chunks_init(
        &mut image[..b * padded],
        padded,
        Vec::new,
        |tmp, bi, dst| {
            channels_last(
                &xs[bi * plane..][..plane],
                (c, h, wd),
                wp,
                (ph, pw),
                tmp,
                dst,
            )
        },
    );
    sgemm::gemm_taps(
        &image,
        sw * c,
        &tap_offs,
        &rows,
        bs,
        &mut yt,
        co,
        bias,
        rayon::current_num_threads(),
    );
    // SAFETY: the panels cover every pixel's row, written whole
    let y = unsafe { &*(&yt[..] as *const [std::mem::MaybeUninit<f32>] as *const [f32]) };
    crate::kernels::threads::par_chunks(&mut out[..b * co * n], co * n, |bi, dst| {
        channels_first(
            &y[bi * n * co..][..n * co],
            (n, co),
            dst,
            accumulate,
            then,
            bi,
        )
    });
    IMAGE.with(|v| v.replace(image));
}

/// Image `bi`'s product `[n, co]` transposed into its output `dst`
/// (`[co, n]`; with `accumulate`, added to what `dst` holds), then the
/// fused chain `then` on it.
pub fn channels_first(
    y: &[f32],
    (n, co): (usize, usize),
    dst: &mut [std::mem::MaybeUninit<f32>],
    accumulate: bool,
    then: Option<&sgemm::Epilogue>,
    bi: usize,
) {
    if accumulate {
        // SAFETY: dst holds the residual (initialised)
        let dst = unsafe { &mut *(dst as *mut [std::mem::MaybeUninit<f32>] as *mut [f32]) };
        crate::kernels::vmath::transpose_add(y, n, co, dst);
    } else {
        crate::kernels::vmath::transpose_into(y, n, co, dst);
    }
    if let Some(e) = then {
        // SAFETY: the transpose wrote every element of the image
        let dst = unsafe { &mut *(dst as *mut [std::mem::MaybeUninit<f32>] as *mut [f32]) };
        sgemm::run_epilogue(e, bi * co * n, dst);
    }
}

/// An image `[c, h, w]` into `out`, `[hp][wp][c]` and zero, pixel (y,
/// x) at (y + ph, x + pw) (those inside): the image transposed whole in
/// blocks (`[h * w][c]` in `tmp`; element by element, each write touched
/// a cache line: 0.13 ms of a 0.6 ms convolution), then line by line into
/// place.
pub fn channels_last(
    xs: &[f32],
    (c, h, w): (usize, usize, usize),
    wp: usize,
    (ph, pw): (usize, usize),
    tmp: &mut Vec<std::mem::MaybeUninit<f32>>,
    out: &mut [f32],
) {
    tmp.resize(c * h * w, std::mem::MaybeUninit::uninit());
    crate::kernels::vmath::transpose_into(xs, c, h * w, tmp);
    // SAFETY: the transpose wrote all of it
    let t = unsafe { &*(&tmp[..] as *const [std::mem::MaybeUninit<f32>] as *const [f32]) };
    let hp = out.len() / (wp * c).max(1);
    let cols = w.min(wp.saturating_sub(pw));
    for y in 0..h.min(hp.saturating_sub(ph)) {
        out[((y + ph) * wp + pw) * c..][..cols * c].copy_from_slice(&t[y * w * c..][..cols * c]);
    }
}
