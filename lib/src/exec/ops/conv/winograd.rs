//! 3x3 stride-1 convolutions by Winograd's minimal filtering F(2x2, 3x3)
//! (Lavin and Gray, "Fast Algorithms for Convolutional Neural Networks",
//! 2016): see [`conv_winograd`].

use super::*;

/// Output planes of up to this many pixels take [`conv_winograd`] (see
/// [`winograd`]).
const WINOGRAD_MAX_PLANE: usize = 196;

/// Whether a 2-D convolution takes [`conv_winograd`]: 3x3, stride 1, no
/// dilation, padding 1 (a plane the size of its input), one group, from
/// and to whole vectors of channels (`c`, `co` multiples of 16, at least
/// 32 in: over fewer the transforms outweigh the product), an output
/// plane of up to [`WINOGRAD_MAX_PLANE`] pixels. Off with
/// `PT2KIT_NO_WINOGRAD=1`.
pub(super) fn winograd(g: &Windows, c: usize, co: usize) -> bool {
    g.input[0] == 1
        && g.kernel == [1, 3, 3]
        && g.stride == [1, 1, 1]
        && g.dilation == [1, 1, 1]
        && g.pad == [0, 1, 1]
        && c >= 32
        && c.is_multiple_of(16)
        && co.is_multiple_of(16)
        && g.out_plane() <= WINOGRAD_MAX_PLANE
        && enabled()
}

fn enabled() -> bool {
    static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ON.get_or_init(|| std::env::var_os("PT2KIT_NO_WINOGRAD").is_none())
}

/// The 16 transformed weights of a `[co, c, 3, 3]` weight (`w`, as the
/// view of its `co` rows of `9 c`), each `U_ξν = (G g Gᵀ)[ξ][ν]` as a
/// `[c, co]` matrix packed as the product's right operand, computed in
/// float64 and rounded once. `G = [[1, 0, 0], [1/2, 1/2, 1/2], [1/2,
/// -1/2, 1/2], [0, 0, 1]]`.
pub(crate) fn winograd_weights(w: &sgemm::View) -> Vec<sgemm::PackedB> {
    let (co, c) = (w.rows, w.cols / 9);
    let mut u = vec![0f32; 16 * c * co];
    for o in 0..co {
        for i in 0..c {
            let g = |ky: usize, kx: usize| w.data[w.off + o * w.rs + (i * 9 + ky * 3 + kx) * w.cs] as f64;
            // G g: 4 rows of 3
            let mut gg = [[0f64; 3]; 4];
            for (kx, col) in (0..3).map(|kx| (kx, [g(0, kx), g(1, kx), g(2, kx)])) {
                let [a, b, d] = col;
                gg[0][kx] = a;
                gg[1][kx] = (a + b + d) / 2.0;
                gg[2][kx] = (a - b + d) / 2.0;
                gg[3][kx] = d;
            }
            // (G g) Gᵀ
            for (xi, [a, b, d]) in gg.into_iter().enumerate() {
                let row = [a, (a + b + d) / 2.0, (a - b + d) / 2.0, d];
                for (nu, v) in row.into_iter().enumerate() {
                    u[((xi * 4 + nu) * c + i) * co + o] = v as f32;
                }
            }
        }
    }
    (0..16)
        .map(|e| sgemm::pack_b(&sgemm::View::row_major(&u[e * c * co..][..c * co], c, co)))
        .collect()
}

thread_local! {
    /// The transformed input and the products between calls.
    static BUFFERS: std::cell::RefCell<(Vec<f32>, Vec<std::mem::MaybeUninit<f32>>)> =
        const { std::cell::RefCell::new((Vec::new(), Vec::new())) };
}

/// A 3x3 stride-1 convolution ([`winograd`]) as F(2x2, 3x3): each image
/// copied channels-last with its padding (as [`conv_pixel_taps`] does);
/// every 4x4 tile of it (2 pixels apart, `T` over the batch) transformed,
/// `V = Bᵀ d B`, 16 channels a vector, into 16 matrices `[T, c]`; 16
/// products `M_ξν = V_ξν U_ξν` with the weights transformed once (the
/// executor's pack cache: [`winograd_weights`]); each tile's 2x2 outputs
/// `Aᵀ m A` plus the bias into a channels-last output, transposed into
/// the output planes with the fused chain run after. 4 multiply-adds an
/// output pixel and channel pair where the direct kernel does 9; the
/// transforms are additions. The results differ from torch's direct sum
/// by rounding (the tests' tolerance holds: `winograd_matches_direct`).
pub(super) fn conv_winograd(
    exec: &Executor,
    x: &CandleTensor,
    w: &CandleTensor,
    bias: Option<&CandleTensor>,
    g: &Windows,
    shape: Vec<usize>,
    epilogue: Option<&EpilogueArgs>,
) -> Result<CandleTensor> {
    let (b, c, co) = (shape[0], x.dims()[1], shape[1]);
    let bv = bias.map(f32s).transpose()?;
    let w = w.contiguous().map_err(ce)?;
    let us = with_host(&w, |ws: &[f32]| exec.winograd_weights(&sgemm::View::row_major(ws, co, c * 9)))
        .ok_or_else(|| Error::internal("Winograd convolution of a weight that is not float32 on the host"))?;
    output_of(x.device(), shape, epilogue, |out, accumulate, then| {
        with_host(x, |xs: &[f32]| {
            // SAFETY: AVX-512F is present (the caller's check)
            unsafe { winograd_product(xs, (b, c, co), g, &us, bv.as_deref(), (accumulate, then), out) }
        })
        .ok_or_else(|| Error::internal("Winograd convolution of an input that is not float32 on the host"))
    })
}

/// [`conv_winograd`]'s work on the batch `xs` (`[b, c, h, w]`) into `out`
/// (`[b, co, h, w]`, written whole).
///
/// # Safety
/// AVX-512F is present; `c` and `co` are multiples of 16; `us` holds 16
/// products' `[c, co]` weights.
#[allow(clippy::too_many_arguments)]
pub(super) unsafe fn winograd_product(
    xs: &[f32],
    (b, c, co): (usize, usize, usize),
    g: &Windows,
    us: &[sgemm::PackedB],
    bias: Option<&[f32]>,
    (accumulate, then): (bool, Option<&sgemm::Epilogue>),
    out: &mut [std::mem::MaybeUninit<f32>],
) {
    use rayon::prelude::*;
    let ([_, h, wd], [_, oh, ow]) = (g.input, g.output);
    let n = oh * ow;
    let (th, tw) = (oh.div_ceil(2), ow.div_ceil(2));
    let tiles = b * th * tw;
    // the padded image: 2 pixels a tile and one either side
    let (hp, wp) = (2 * th + 2, 2 * tw + 2);
    let padded = hp * wp * c;
    let (mut v, mut m) = BUFFERS.with(|s| s.take());
    let mut image = std::mem::take(&mut v);
    image.clear();
    image.resize(b * padded, 0.0);
    image
        .par_chunks_mut(padded.max(1))
        .zip(xs.par_chunks((c * h * wd).max(1)))
        .for_each_init(Vec::new, |tmp, (dst, x)| super::pixels::channels_last(x, (c, h, wd), wp, (1, 1), tmp, dst));
    // V: [16][tiles][c], a tile row of an image a task
    let mut vt = sgemm::uninit(16 * tiles * c);
    let vp = sgemm::SendPtr(vt.as_mut_ptr().cast::<f32>());
    (0..b * th).into_par_iter().for_each(|row| {
        let (bi, ty) = (row / th, row % th);
        for tx in 0..tw {
            let t = row * tw + tx;
            let at = image.as_ptr().add(bi * padded + (2 * ty * wp + 2 * tx) * c);
            input_tile(at, wp * c, c, vp.at(t * c), tiles * c);
        }
    });
    drop(image);
    // SAFETY: every tile's 16 rows written above
    let vt = sgemm::assume_init(vt);
    // M: [16][tiles][co], a product a task
    m.clear();
    m.resize(16 * tiles * co, std::mem::MaybeUninit::uninit());
    m.par_chunks_mut(tiles * co).zip(us.par_iter()).enumerate().for_each(|(e, (dst, u))| {
        let a = sgemm::Lhs::rows(&vt[e * tiles * c..][..tiles * c], tiles, c);
        sgemm::gemm_lhs(a, u, dst, co, sgemm::Init::Zero, None, 1);
    });
    // SAFETY: each product wrote its tiles x co whole
    let ms = &*(&m[..] as *const [std::mem::MaybeUninit<f32>] as *const [f32]);
    // the outputs channels-last, [b][n][co]
    let mut yt = sgemm::uninit(b * n * co);
    let yp = sgemm::SendPtr(yt.as_mut_ptr().cast::<f32>());
    (0..b * th).into_par_iter().for_each(|row| {
        let (bi, ty) = (row / th, row % th);
        for tx in 0..tw {
            let t = row * tw + tx;
            let (ys, xs) = ((2 * ty)..(2 * ty + 2).min(oh), (2 * tx)..(2 * tx + 2).min(ow));
            let dst = |i: usize, j: usize| yp.at((bi * n + (2 * ty + i) * ow + 2 * tx + j) * co);
            output_tile(ms.as_ptr().add(t * co), tiles * co, co, bias, (ys.len(), xs.len()), dst);
        }
    });
    // SAFETY: every output pixel lies in a tile, written whole
    let y = sgemm::assume_init(yt);
    out.par_chunks_mut((co * n).max(1))
        .zip(y.par_chunks((n * co).max(1)))
        .enumerate()
        .for_each(|(bi, (dst, y))| super::pixels::channels_first(y, (n, co), dst, accumulate, then, bi));
    BUFFERS.with(|s| s.replace((vt, m)));
}

/// One tile's `Bᵀ d B` over its `c` channels: `d` the 4x4 pixels from
/// `at` (lines `line` floats apart, a pixel's channels contiguous), the
/// 16 results to `v + e * stride` (`e = 4 ξ + ν`). `Bᵀ = [[1, 0, -1, 0],
/// [0, 1, 1, 0], [0, -1, 1, 0], [0, 1, 0, -1]]`.
///
/// # Safety
/// AVX-512F is present; `c` is a multiple of 16; the reads and writes lie
/// in their buffers.
#[target_feature(enable = "avx512f")]
unsafe fn input_tile(at: *const f32, line: usize, c: usize, v: *mut f32, stride: usize) {
    use std::arch::x86_64::*;
    for ch in (0..c).step_by(16) {
        let d = |i: usize, j: usize| _mm512_loadu_ps(at.add(i * line + j * c + ch));
        // Bᵀ d, column by column
        let mut t = [[_mm512_setzero_ps(); 4]; 4];
        for j in 0..4 {
            let (d0, d1, d2, d3) = (d(0, j), d(1, j), d(2, j), d(3, j));
            t[0][j] = _mm512_sub_ps(d0, d2);
            t[1][j] = _mm512_add_ps(d1, d2);
            t[2][j] = _mm512_sub_ps(d2, d1);
            t[3][j] = _mm512_sub_ps(d1, d3);
        }
        // (Bᵀ d) B, row by row
        for (i, r) in t.iter().enumerate() {
            let row = [
                _mm512_sub_ps(r[0], r[2]),
                _mm512_add_ps(r[1], r[2]),
                _mm512_sub_ps(r[2], r[1]),
                _mm512_sub_ps(r[1], r[3]),
            ];
            for (j, x) in row.into_iter().enumerate() {
                _mm512_storeu_ps(v.add((i * 4 + j) * stride + ch), x);
            }
        }
    }
}

/// One tile's outputs `Aᵀ m A` (plus the bias) over `co` channels: `m`
/// the 16 products' rows from `at + e * stride`, the `rows x cols` (up to
/// 2x2) pixels inside the plane to `dst(i, j)`. `Aᵀ = [[1, 1, 1, 0], [0,
/// 1, -1, -1]]`.
///
/// # Safety
/// AVX-512F is present; `co` is a multiple of 16; the reads and writes
/// lie in their buffers.
#[target_feature(enable = "avx512f")]
unsafe fn output_tile(
    at: *const f32,
    stride: usize,
    co: usize,
    bias: Option<&[f32]>,
    (rows, cols): (usize, usize),
    dst: impl Fn(usize, usize) -> *mut f32,
) {
    use std::arch::x86_64::*;
    for ch in (0..co).step_by(16) {
        let m = |e: usize| _mm512_loadu_ps(at.add(e * stride + ch));
        // Aᵀ m, column by column
        let mut r = [[_mm512_setzero_ps(); 4]; 2];
        for j in 0..4 {
            let (m0, m1, m2, m3) = (m(j), m(4 + j), m(8 + j), m(12 + j));
            r[0][j] = _mm512_add_ps(_mm512_add_ps(m0, m1), m2);
            r[1][j] = _mm512_sub_ps(_mm512_sub_ps(m1, m2), m3);
        }
        let bv = bias.map_or(_mm512_setzero_ps(), |b| _mm512_loadu_ps(b.as_ptr().add(ch)));
        for (i, r) in r.iter().enumerate().take(rows) {
            let y = [
                _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(r[0], r[1]), r[2]), bv),
                _mm512_add_ps(_mm512_sub_ps(_mm512_sub_ps(r[1], r[2]), r[3]), bv),
            ];
            for (j, y) in y.into_iter().enumerate().take(cols) {
                _mm512_storeu_ps(dst(i, j).add(ch), y);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Values in [-1, 1) from a seed.
    fn values(n: usize, seed: u32) -> Vec<f32> {
        let mut s = seed.wrapping_mul(2654435761).wrapping_add(1);
        (0..n)
            .map(|_| {
                s ^= s << 13;
                s ^= s >> 17;
                s ^= s << 5;
                (s >> 8) as f32 / (1u32 << 23) as f32 - 1.0
            })
            .collect()
    }

    /// F(2x2, 3x3) against the sum of a 3x3 convolution in float64, on
    /// planes even and odd, square and not, down to one pixel, batches of
    /// one to three, with and without a bias, fresh and added to a
    /// residual (then a relu): within 1e-5 of the sum of the terms'
    /// magnitudes.
    #[test]
    fn winograd_matches_direct() {
        if !sgemm::available() {
            return;
        }
        for (case, &(b, c, co, h, w)) in [
            (1usize, 32usize, 16usize, 7usize, 7usize),
            (1, 48, 32, 14, 14),
            (2, 32, 48, 5, 8),
            (3, 64, 16, 1, 1),
            (1, 32, 64, 2, 3),
            (2, 32, 32, 9, 4),
        ]
        .iter()
        .enumerate()
        {
            let g = Windows::new(&[h, w], &[3, 3], &[1, 1], &[1, 1], &[1, 1]).unwrap();
            assert!(winograd(&g, c, co) || !enabled(), "case {case} takes Winograd");
            let xs = values(b * c * h * w, 1 + case as u32);
            let ws = values(co * c * 9, 100 + case as u32);
            let bias = values(co, 200 + case as u32);
            let res = values(b * co * h * w, 300 + case as u32);
            let us = winograd_weights(&sgemm::View::row_major(&ws, co, c * 9));
            // the sum, and the sum of the terms' magnitudes
            let mut want = vec![(0f64, 0f64); b * co * h * w];
            for bi in 0..b {
                for o in 0..co {
                    for y in 0..h {
                        for x in 0..w {
                            let (mut s, mut a) = (bias[o] as f64, bias[o].abs() as f64);
                            for i in 0..c {
                                for ky in 0..3 {
                                    for kx in 0..3 {
                                        let (iy, ix) = ((y + ky) as isize - 1, (x + kx) as isize - 1);
                                        if iy < 0 || ix < 0 || iy >= h as isize || ix >= w as isize {
                                            continue;
                                        }
                                        let t = ws[((o * c + i) * 3 + ky) * 3 + kx] as f64
                                            * xs[((bi * c + i) * h + iy as usize) * w + ix as usize] as f64;
                                        s += t;
                                        a += t.abs();
                                    }
                                }
                            }
                            want[((bi * co + o) * h + y) * w + x] = (s, a);
                        }
                    }
                }
            }
            for over in [false, true] {
                let mut out = res.clone();
                let relu = [sgemm::EpiStep { op: sgemm::EpiOp::Relu, b: sgemm::EpiSrc::Const(0.0) }];
                let then = sgemm::Epilogue { steps: &relu, inputs: &[], map: None };
                // SAFETY: AVX-512F checked; the sizes are the convolution's
                unsafe {
                    winograd_product(
                        &xs,
                        (b, c, co),
                        &g,
                        &us,
                        Some(&bias),
                        (over, over.then_some(&then)),
                        sgemm::as_uninit(&mut out),
                    )
                };
                for (e, (got, &(s, a))) in out.iter().zip(&want).enumerate() {
                    let s = if over { (s + res[e] as f64).max(0.0) } else { s };
                    assert!(
                        (*got as f64 - s).abs() <= 1e-5 * (1.0 + a),
                        "case {case} over {over} element {e}: {got} vs {s}"
                    );
                }
            }
        }
    }
}
