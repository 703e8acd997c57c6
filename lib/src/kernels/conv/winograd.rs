//! 3x3 stride-1 convolutions by Winograd's minimal filtering F(2x2, 3x3)
//! (Lavin and Gray, "Fast Algorithms for Convolutional Neural Networks",
//! 2016): see [`conv_winograd`].

use super::*;
use crate::kernels::simd::{Avx2, Avx512, F32x16};

/// Whether a 2-D convolution takes [`conv_winograd`]: 3x3, stride 1, no
/// dilation, padding 1 (a plane the size of its input), one group, from
/// and to whole vectors of channels (`c`, `co` multiples of 16, at least
/// 32 in: over fewer the transforms outweigh the product), planes of any
/// size (in blocks of tiles: [`winograd_product`]). Off with
/// `PT2KIT_NO_WINOGRAD=1`.
pub fn winograd(g: &Windows, c: usize, co: usize) -> bool {
    g.planar()
        && g.kernel == [1, 3, 3]
        && g.stride == [1, 1, 1]
        && g.dilation == [1, 1, 1]
        && g.pad == [0, 1, 1]
        && c >= 32
        && c.is_multiple_of(16)
        && co.is_multiple_of(16)
        && enabled()
}

fn enabled() -> bool {
    static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ON.get_or_init(|| !crate::knobs::is_set("PT2KIT_NO_WINOGRAD"))
}

/// The output tile of F(m x m, 3x3) for a convolution of `b` images with
/// an output plane of `oh x ow`: 4 (36 products for 16 outputs: 2.25
/// multiply-adds an output and channel pair) where both sides are
/// [`F4_MIN_SIDE`] or more and the batch makes [`F4_MIN_TILES`] tiles of 4
/// or more, else 2 (16 products for 4: 4). Per node against tiles of 2,
/// ResNet-18: 56x56 1.26x and 28x28 1.68x faster at batch 1 (1.27x,
/// 1.37x at batch 8), 14x14 1.15x at batch 8 but 0.96x at batch 1 (16
/// tiles of 16 pixels for 196: the products' rows too few); a 7x7 plane
/// would be 4 tiles for 49 pixels.
pub fn tile_for(g: &Windows, b: usize) -> usize {
    let [_, oh, ow] = g.output;
    if oh >= F4_MIN_SIDE && ow >= F4_MIN_SIDE && b * oh.div_ceil(4) * ow.div_ceil(4) >= F4_MIN_TILES
    {
        4
    } else {
        2
    }
}

/// See [`tile_for`].
const F4_MIN_SIDE: usize = 14;

/// See [`tile_for`].
const F4_MIN_TILES: usize = 32;

/// F(2x2, 3x3)'s `G` (4 x 3).
const G2: [[f64; 3]; 4] = [
    [1.0, 0.0, 0.0],
    [0.5, 0.5, 0.5],
    [0.5, -0.5, 0.5],
    [0.0, 0.0, 1.0],
];

/// F(4x4, 3x3)'s `G` (6 x 3), for the points 0, ±1, ±2 and infinity.
const G4: [[f64; 3]; 6] = [
    [0.25, 0.0, 0.0],
    [-1.0 / 6.0, -1.0 / 6.0, -1.0 / 6.0],
    [-1.0 / 6.0, 1.0 / 6.0, -1.0 / 6.0],
    [1.0 / 24.0, 1.0 / 12.0, 1.0 / 6.0],
    [1.0 / 24.0, -1.0 / 12.0, 1.0 / 6.0],
    [0.0, 0.0, 1.0],
];

/// The transformed weights of a `[co, c, 3, 3]` weight (`w`, as the view
/// of its `co` rows of `9 c`) for F(m x m, 3x3) (`m` 2 or 4): `(m + 2)²`
/// matrices `U_ξν = (G g Gᵀ)[ξ][ν]`, each `[c, co]` packed as the
/// product's right operand, computed in float64 and rounded once.
pub(crate) fn winograd_weights(w: &sgemm::View, m: usize) -> Vec<sgemm::PackedB> {
    use rayon::prelude::*;
    let gm: &[[f64; 3]] = if m == 4 { &G4 } else { &G2 };
    let a = gm.len();
    let (co, c) = (w.rows, w.cols / 9);
    let mut u = vec![0f32; a * a * c * co];
    let up = sgemm::SendPtr(u.as_mut_ptr());
    // input channel i: row i of each of the matrices (a task's own)
    (0..c).into_par_iter().for_each(|i| {
        for o in 0..co {
            let g = |ky: usize, kx: usize| {
                w.data[w.off + o * w.rs + (i * 9 + ky * 3 + kx) * w.cs] as f64
            };
            // G g: a rows of 3
            let gg: Vec<[f64; 3]> = gm
                .iter()
                .map(|r| {
                    std::array::from_fn(|kx| r[0] * g(0, kx) + r[1] * g(1, kx) + r[2] * g(2, kx))
                })
                .collect();
            // (G g) Gᵀ
            for (xi, row) in gg.iter().enumerate() {
                for (nu, r) in gm.iter().enumerate() {
                    let v = r[0] * row[0] + r[1] * row[1] + r[2] * row[2];
                    // SAFETY: element (i, o) of matrix a xi + nu, in u
                    unsafe { *up.at(((xi * a + nu) * c + i) * co + o) = v as f32 };
                }
            }
        }
    });
    (0..a * a)
        .into_par_iter()
        .map(|e| sgemm::pack_b(&sgemm::View::row_major(&u[e * c * co..][..c * co], c, co)))
        .collect()
}

thread_local! {
    /// The padded channels-last images between calls.
    static IMAGE: std::cell::RefCell<Vec<f32>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// A [`conv_winograd`]'s tiles: `m x m` output pixels each (2 or 4),
/// `th x tw` an image, read from the padded channels-last images (`m th
/// + 2` lines of `wp` pixels of `c`), written channels-last (`[b][oh *
/// ow][co]`).
#[derive(Clone, Copy)]
struct Tiles {
    m: usize,
    th: usize,
    tw: usize,
    wp: usize,
    c: usize,
    co: usize,
    oh: usize,
    ow: usize,
}

impl Tiles {
    fn per_image(&self) -> usize {
        self.th * self.tw
    }

    fn padded(&self) -> usize {
        (self.m * self.th + 2) * self.wp * self.c
    }

    /// The products a tile takes, `(m + 2)²`.
    fn products(&self) -> usize {
        (self.m + 2) * (self.m + 2)
    }

    /// Tiles `tiles` transformed from `image` into rows of the matrices
    /// `stride` floats apart, the first tile's row at `v`.
    ///
    /// # Safety
    /// The kernels' instruction set is present ([`sgemm::available`]);
    /// the rows lie in `v`'s buffer.
    unsafe fn inputs(
        &self,
        image: &[f32],
        tiles: std::ops::Range<usize>,
        v: *mut f32,
        stride: usize,
    ) {
        #[target_feature(enable = "avx512f")]
        unsafe fn wide(
            g: &Tiles,
            image: &[f32],
            tiles: std::ops::Range<usize>,
            v: *mut f32,
            stride: usize,
        ) {
            g.inputs_in::<Avx512>(image, tiles, v, stride)
        }
        #[target_feature(enable = "avx2,fma")]
        unsafe fn avx2(
            g: &Tiles,
            image: &[f32],
            tiles: std::ops::Range<usize>,
            v: *mut f32,
            stride: usize,
        ) {
            g.inputs_in::<Avx2>(image, tiles, v, stride)
        }
        if sgemm::avx512() {
            wide(self, image, tiles, v, stride)
        } else {
            avx2(self, image, tiles, v, stride)
        }
    }

    #[inline(always)]
    unsafe fn inputs_in<S: F32x16>(
        &self,
        image: &[f32],
        tiles: std::ops::Range<usize>,
        v: *mut f32,
        stride: usize,
    ) {
        let c = self.c;
        for (k, t) in tiles.enumerate() {
            let (bi, r) = (t / self.per_image(), t % self.per_image());
            let (ty, tx) = (r / self.tw, r % self.tw);
            let at = image[bi * self.padded() + self.m * (ty * self.wp + tx) * c..].as_ptr();
            if self.m == 4 {
                input_tile::<S, 6>(at, self.wp * c, c, v.add(k * c), stride);
            } else {
                input_tile::<S, 4>(at, self.wp * c, c, v.add(k * c), stride);
            }
        }
    }

    /// Tiles `tiles`' outputs from their products' rows (the matrices
    /// `stride` floats apart, the first tile's row at `m`) into `y`
    /// (channels-last, the batch's).
    ///
    /// # Safety
    /// The kernels' instruction set is present; the rows lie in `m`'s
    /// buffer, `y` holds the batch's outputs; no one else writes these
    /// tiles' pixels.
    unsafe fn outputs(
        &self,
        m: *const f32,
        tiles: std::ops::Range<usize>,
        stride: usize,
        bias: Option<&[f32]>,
        y: sgemm::SendPtr,
    ) {
        type Args<'a> = (
            *const f32,
            std::ops::Range<usize>,
            usize,
            Option<&'a [f32]>,
            sgemm::SendPtr,
        );
        #[target_feature(enable = "avx512f")]
        unsafe fn wide(g: &Tiles, (m, tiles, stride, bias, y): Args) {
            g.outputs_in::<Avx512>(m, tiles, stride, bias, y)
        }
        #[target_feature(enable = "avx2,fma")]
        unsafe fn avx2(g: &Tiles, (m, tiles, stride, bias, y): Args) {
            g.outputs_in::<Avx2>(m, tiles, stride, bias, y)
        }
        if sgemm::avx512() {
            wide(self, (m, tiles, stride, bias, y))
        } else {
            avx2(self, (m, tiles, stride, bias, y))
        }
    }

    #[inline(always)]
    unsafe fn outputs_in<S: F32x16>(
        &self,
        m: *const f32,
        tiles: std::ops::Range<usize>,
        stride: usize,
        bias: Option<&[f32]>,
        y: sgemm::SendPtr,
    ) {
        let (co, n) = (self.co, self.oh * self.ow);
        for (k, t) in tiles.enumerate() {
            let (bi, r) = (t / self.per_image(), t % self.per_image());
            let (ty, tx) = (r / self.tw, r % self.tw);
            let (y0, x0) = (self.m * ty, self.m * tx);
            let (rows, cols) = ((self.oh - y0).min(self.m), (self.ow - x0).min(self.m));
            let dst = |i: usize, j: usize| y.at((bi * n + (y0 + i) * self.ow + x0 + j) * co);
            if self.m == 4 {
                output_tile::<S, 6>(m.add(k * co), stride, co, bias, (rows, cols), dst);
            } else {
                output_tile::<S, 4>(m.add(k * co), stride, co, bias, (rows, cols), dst);
            }
        }
    }
}

/// The bytes of a block of tiles' transformed inputs and products (see
/// [`winograd_product`]).
const BLOCK_BYTES: usize = 512 << 10;

/// Tiles a block holds at least.
const BLOCK_MIN_TILES: usize = 32;

/// [`conv_winograd`]'s work on the batch `xs` (`[b, c, h, w]`) into `out`
/// (`[b, co, h, w]`, written whole). The tiles go in blocks whose
/// transformed inputs and products fit [`BLOCK_BYTES`], a thread's
/// blocks each made whole by it (transforms and 16 products, in its own
/// cache), where there are two blocks a thread or more; otherwise (a few
/// tiles of many channels: ResNet's 7x7 and 14x14 planes at batch 1)
/// every phase is split between the threads: the tiles, then the 16
/// products.
///
/// # Safety
/// The kernels' instruction set is present; `c` and `co` are multiples of 16; `us` holds 16
/// products' `[c, co]` weights.
#[allow(clippy::too_many_arguments)]
pub unsafe fn winograd_product(
    xs: &[f32],
    (b, c, co): (usize, usize, usize),
    (g, m): (&Windows, usize),
    us: &[sgemm::PackedB],
    bias: Option<&[f32]>,
    (accumulate, then): (bool, Option<&sgemm::Epilogue>),
    out: &mut [std::mem::MaybeUninit<f32>],
) {
    use crate::kernels::threads::{par_chunks, par_for, par_for_init};
    let ([_, h, wd], [_, oh, ow]) = (g.input, g.output);
    let n = oh * ow;
    let (th, tw) = (oh.div_ceil(m), ow.div_ceil(m));
    let geo = Tiles {
        m,
        th,
        tw,
        wp: m * tw + 2,
        c,
        co,
        oh,
        ow,
    };
    let np = geo.products();
    assert_eq!(
        us.len(),
        np,
        "winograd_product: the weights of another tile"
    );
    let tiles = b * geo.per_image();
    let padded = geo.padded();
    let mut image = IMAGE.with(|v| v.take());
    if image.len() < b * padded {
        image.resize(b * padded, 0.0);
    }
    channels_last(xs, (b, h, wd), &geo, &mut image[..b * padded]);
    let mut yt = sgemm::uninit(b * n * co);
    let y = sgemm::SendPtr(yt.as_mut_ptr().cast::<f32>());
    let threads = rayon::current_num_threads();
    let tb = (BLOCK_BYTES / (4 * np * (c + co))).max(BLOCK_MIN_TILES);
    let blocks = tiles.div_ceil(tb);
    // product e of `len` tiles: their rows of V_e into M_e
    let product = |v: &[f32], m: &mut [std::mem::MaybeUninit<f32>], len: usize, e: usize| {
        let a = sgemm::Lhs::rows(&v[e * len * c..][..len * c], len, c);
        sgemm::gemm_lhs(a, &us[e], m, co, sgemm::Init::Zero, None, 1);
    };
    if blocks >= 2 * threads {
        let (tb, image) = (tiles.div_ceil(blocks), &image);
        par_for_init(
            blocks,
            || (vec![0f32; np * tb * c], sgemm::uninit(np * tb * co)),
            |(v, m), blk| {
                let ts = blk * tiles / blocks..(blk + 1) * tiles / blocks;
                let len = ts.len();
                geo.inputs(image, ts.clone(), v.as_mut_ptr(), len * c);
                for (e, m) in m.chunks_mut(len * co).take(np).enumerate() {
                    product(v, m, len, e);
                }
                geo.outputs(m.as_ptr().cast(), ts, len * co, bias, y);
            },
        );
    } else {
        let mut v = vec![0f32; np * tiles * c];
        let vp = sgemm::SendPtr(v.as_mut_ptr());
        let parts = (4 * threads).min(tiles);
        par_for(parts, |p| {
            let ts = p * tiles / parts..(p + 1) * tiles / parts;
            // each part writes its own tiles' rows of the matrices
            geo.inputs(&image, ts.clone(), vp.at(ts.start * c), tiles * c);
        });
        let mut m = sgemm::uninit(np * tiles * co);
        par_chunks(&mut m, tiles * co, |e, m| product(&v, m, tiles, e));
        let mp = m.as_ptr().cast::<f32>() as usize;
        par_for(parts, |p| {
            let ts = p * tiles / parts..(p + 1) * tiles / parts;
            let at = (mp as *const f32).add(ts.start * co);
            geo.outputs(at, ts, tiles * co, bias, y);
        });
    }
    IMAGE.with(|v| v.replace(image));
    // SAFETY: every output pixel lies in a tile, written whole
    let yv = sgemm::assume_init(yt);
    channels_first(&yv, (b, n, co), out, accumulate, then);
}

/// The batch `xs` (`[b, c, h, w]`) channels-last into `image` (`b` images
/// of `[2 th + 2][wp][c]`, each pixel at one line and one column in, the
/// rest zero): each padded line's pixels, a block of 16 channels at a
/// time, transposed straight into place and its border zeroed (no pass
/// clearing the whole buffer first). A task an image's block of 16
/// channels where the images are as many as the threads; fewer (batch 1),
/// a band of an image's lines, every channel of them, in order: the tiles
/// after take their blocks in order too, so each thread reads the lines
/// it wrote, transposed from the input's lines the layer before wrote on
/// the same core (its pixels split in order), not the other core's (a
/// split by channels read half the input, and had the tiles read half the
/// image, from the other core: on the VM's slow minutes, where a line
/// crosses between the cores in 400 ns, ResNet-50's Winograd layers at
/// batch 1 lost 25-40% against 5-15% elsewhere).
fn channels_last(xs: &[f32], (b, h, w): (usize, usize, usize), geo: &Tiles, image: &mut [f32]) {
    let (c, wp, padded) = (geo.c, geo.wp, geo.padded());
    let hp = padded / (wp * c);
    let groups = c / 16;
    let ip = sgemm::SendPtr(image.as_mut_ptr());
    assert!(image.len() >= b * padded && xs.len() >= b * c * h * w);
    // padded lines `lines` of image `bi`, channels c0..c0 + 16
    let write = |bi: usize, c0: usize, lines: std::ops::Range<usize>| {
        // SAFETY: the caller's task writes channels c0..c0 + 16 of these
        // lines of image bi, no other task's, all inside the image
        // (asserted)
        unsafe {
            let base = ip.at(bi * padded + c0);
            let zero = |p: usize| std::ptr::write_bytes(base.add(p * c), 0, 16);
            for y in lines {
                if y == 0 || y > h {
                    (0..wp).for_each(|x| zero(y * wp + x));
                    continue;
                }
                zero(y * wp);
                (w + 1..wp).for_each(|x| zero(y * wp + x));
                let src = &xs[(bi * c + c0) * h * w + (y - 1) * w..];
                crate::kernels::vmath::transpose_strided::<false>(
                    src,
                    h * w,
                    (16, w),
                    base.add((y * wp + 1) * c),
                    c,
                );
            }
        }
    };
    let threads = rayon::current_num_threads();
    if b >= threads || hp < 2 * threads {
        crate::kernels::threads::par_for(b * groups, |t| {
            write(t / groups, (t % groups) * 16, 0..hp)
        });
        return;
    }
    let bands = (4 * threads).min(hp);
    crate::kernels::threads::par_for(b * bands, |t| {
        let (bi, q) = (t / bands, t % bands);
        for g in 0..groups {
            write(bi, g * 16, q * hp / bands..(q + 1) * hp / bands);
        }
    });
}

/// The batch's outputs channels-last (`y`, `[b][n][co]`) into `out`
/// (`[b, co, n]`; with `accumulate`, added to what `out` holds), then the
/// fused chain `then` on each part: a task a band of an image's pixels
/// (two or more bands an image where the batch is smaller than the
/// threads: nothing serial at batch 1).
fn channels_first(
    y: &[f32],
    (b, n, co): (usize, usize, usize),
    out: &mut [std::mem::MaybeUninit<f32>],
    accumulate: bool,
    then: Option<&sgemm::Epilogue>,
) {
    let threads = rayon::current_num_threads();
    let parts = if b >= threads {
        1
    } else {
        threads.div_ceil(b).min(n.div_ceil(16))
    };
    let op = sgemm::SendPtr(out.as_mut_ptr().cast::<f32>());
    assert!(out.len() >= b * co * n && y.len() >= b * n * co);
    crate::kernels::threads::par_for(b * parts, |t| {
        let (bi, q) = (t / parts, t % parts);
        // bands of whole lines of 16 floats
        let band = |q: usize| (q * n / parts).next_multiple_of(16).min(n);
        let (p0, p1) = (band(q), if q + 1 == parts { n } else { band(q + 1) });
        let src = &y[(bi * n + p0) * co..];
        // SAFETY: the task writes pixels p0..p1 of image bi's planes, no
        // other task's, inside `out` (asserted); initialised where added
        unsafe {
            let dst = op.at(bi * co * n + p0);
            if accumulate {
                crate::kernels::vmath::transpose_strided::<true>(src, co, (p1 - p0, co), dst, n);
            } else {
                crate::kernels::vmath::transpose_strided::<false>(src, co, (p1 - p0, co), dst, n);
            }
            if let Some(e) = then {
                for o in 0..co {
                    let span = std::slice::from_raw_parts_mut(dst.add(o * n), p1 - p0);
                    sgemm::run_epilogue(e, bi * co * n + o * n + p0, span);
                }
            }
        }
    });
}

/// `Bᵀ` of F(m x m, 3x3) on the first `A = m + 2` of six vectors (the
/// rest zero): for `A` 4, `[d0 - d2, d1 + d2, d2 - d1, d1 - d3]`; for 6,
/// `4 d0 - 5 d2 + d4`, `-4 (d1 + d2) + d3 + d4`, `4 (d1 - d2) - d3 + d4`,
/// `-2 (d1 - d3) - d2 + d4`, `2 (d1 - d3) - d2 + d4`, `4 d1 - 5 d3 + d5`.
///
/// # Safety
/// `S`'s instruction set is present.
#[inline(always)]
unsafe fn bt<S: F32x16, const A: usize>(d: [S; 6]) -> [S; 6] {
    let z = S::zero();
    if A == 4 {
        return [
            d[0].sub(d[2]),
            d[1].add(d[2]),
            d[2].sub(d[1]),
            d[1].sub(d[3]),
            z,
            z,
        ];
    }
    let k = |v: f32| S::splat(v);
    let (s12, d12, d13) = (d[1].add(d[2]), d[1].sub(d[2]), d[1].sub(d[3]));
    let d42 = d[4].sub(d[2]);
    [
        k(4.0).fma(d[0], k(-5.0).fma(d[2], d[4])),
        k(-4.0).fma(s12, d[3].add(d[4])),
        k(4.0).fma(d12, d[4].sub(d[3])),
        k(-2.0).fma(d13, d42),
        k(2.0).fma(d13, d42),
        k(4.0).fma(d[1], k(-5.0).fma(d[3], d[5])),
    ]
}

/// `Aᵀ` of F(m x m, 3x3) on the first `A = m + 2` of six vectors, its `m`
/// results first of four: for `A` 4, `[m0 + m1 + m2, m1 - m2 - m3]`; for
/// 6, `m0 + m1 + m2 + m3 + m4`, `m1 - m2 + 2 (m3 - m4)`, `m1 + m2 + 4 (m3
/// + m4)`, `m1 - m2 + 8 (m3 - m4) + m5`.
///
/// # Safety
/// `S`'s instruction set is present.
#[inline(always)]
unsafe fn at<S: F32x16, const A: usize>(m: [S; 6]) -> [S; 4] {
    let z = S::zero();
    if A == 4 {
        return [m[0].add(m[1]).add(m[2]), m[1].sub(m[2]).sub(m[3]), z, z];
    }
    let k = |v: f32| S::splat(v);
    let (s12, d12) = (m[1].add(m[2]), m[1].sub(m[2]));
    let (s34, d34) = (m[3].add(m[4]), m[3].sub(m[4]));
    [
        s12.add(s34).add(m[0]),
        k(2.0).fma(d34, d12),
        k(4.0).fma(s34, s12),
        k(8.0).fma(d34, d12).add(m[5]),
    ]
}

/// One tile's `Bᵀ d B` over its `c` channels, F(m x m, 3x3) with `A = m +
/// 2`: `d` the `A x A` pixels from `at` (lines `line` floats apart, a
/// pixel's channels contiguous), [`bt`] on the columns then on the rows,
/// the `A²` results to `v + e * stride` (`e = A ξ + ν`).
///
/// # Safety
/// `S`'s instruction set is present; `c` is a multiple of 16; the reads
/// and writes lie in their buffers.
#[allow(clippy::needless_range_loop)] // the transforms as written
#[inline(always)]
unsafe fn input_tile<S: F32x16, const A: usize>(
    at: *const f32,
    line: usize,
    c: usize,
    v: *mut f32,
    stride: usize,
) {
    let z = S::zero();
    for ch in (0..c).step_by(16) {
        // Bᵀ d: t[j] is column j's results
        let mut t = [[z; 6]; 6];
        for j in 0..A {
            t[j] = bt::<S, A>(std::array::from_fn(|i| {
                if i < A {
                    S::load(at.add(i * line + j * c + ch))
                } else {
                    z
                }
            }));
        }
        for i in 0..A {
            let row = bt::<S, A>(std::array::from_fn(|j| t[j][i]));
            for j in 0..A {
                row[j].store(v.add((i * A + j) * stride + ch));
            }
        }
    }
}

/// One tile's outputs `Aᵀ m A` plus the bias over `co` channels, F(m x m,
/// 3x3) with `A = m + 2`: `m` the `A²` products' rows from `at + e *
/// stride`, [`at`] on the columns then on the rows, the `rows x cols` (up
/// to `m x m`) pixels inside the plane to `dst(i, j)`.
///
/// # Safety
/// `S`'s instruction set is present; `co` is a multiple of 16; the reads
/// and writes lie in their buffers.
#[allow(clippy::needless_range_loop)] // the transforms as written
#[inline(always)]
unsafe fn output_tile<S: F32x16, const A: usize>(
    at_: *const f32,
    stride: usize,
    co: usize,
    bias: Option<&[f32]>,
    (rows, cols): (usize, usize),
    dst: impl Fn(usize, usize) -> *mut f32,
) {
    let z = S::zero();
    for ch in (0..co).step_by(16) {
        // Aᵀ m: r[j] is column j's results
        let mut r = [[z; 4]; 6];
        for j in 0..A {
            r[j] = at::<S, A>(std::array::from_fn(|i| {
                if i < A {
                    S::load(at_.add((i * A + j) * stride + ch))
                } else {
                    z
                }
            }));
        }
        let bv = bias.map_or(z, |b| S::load(b.as_ptr().add(ch)));
        for i in 0..rows {
            let y = at::<S, A>(std::array::from_fn(|j| if j < A { r[j][i] } else { z }));
            for j in 0..cols {
                y[j].add(bv).store(dst(i, j).add(ch));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::sgemm::tests::values;

    /// F(2x2, 3x3) and F(4x4, 3x3) against the sum of a 3x3 convolution
    /// in float64, on
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
            (2usize, 32usize, 32usize, 28usize, 27usize),
            (1, 32, 16, 7, 7),
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
            assert!(
                winograd(&g, c, co) || !enabled(),
                "case {case} takes Winograd"
            );
            let xs = values(b * c * h * w, 1 + case as u32);
            let ws = values(co * c * 9, 100 + case as u32);
            let bias = values(co, 200 + case as u32);
            let res = values(b * co * h * w, 300 + case as u32);
            let uss = [2, 4].map(|m| winograd_weights(&sgemm::View::row_major(&ws, co, c * 9), m));
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
                                        let (iy, ix) =
                                            ((y + ky) as isize - 1, (x + kx) as isize - 1);
                                        if iy < 0 || ix < 0 || iy >= h as isize || ix >= w as isize
                                        {
                                            continue;
                                        }
                                        let t = ws[((o * c + i) * 3 + ky) * 3 + kx] as f64
                                            * xs[((bi * c + i) * h + iy as usize) * w + ix as usize]
                                                as f64;
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
            // one thread (blocks of tiles, each made whole), two (one
            // image's lines made channels-last in bands) and many (every
            // phase split)
            for (over, threads, m) in [1, 2, 64]
                .into_iter()
                .flat_map(|t| [(false, t, 2), (true, t, 2), (false, t, 4), (true, t, 4)])
            {
                let mut out = res.clone();
                let relu = [sgemm::EpiStep {
                    op: sgemm::EpiOp::Relu,
                    b: sgemm::EpiSrc::Const(0.0),
                }];
                let then = sgemm::Epilogue {
                    steps: &relu,
                    inputs: &[],
                    map: None,
                };
                let pool = rayon::ThreadPoolBuilder::new()
                    .num_threads(threads)
                    .build()
                    .unwrap();
                // SAFETY: the instruction set checked; the sizes are the convolution's
                pool.install(|| unsafe {
                    winograd_product(
                        &xs,
                        (b, c, co),
                        (&g, m),
                        &uss[m / 4],
                        Some(&bias),
                        (over, over.then_some(&then)),
                        sgemm::as_uninit(&mut out),
                    )
                });
                for (e, (got, &(s, a))) in out.iter().zip(&want).enumerate() {
                    let s = if over {
                        (s + res[e] as f64).max(0.0)
                    } else {
                        s
                    };
                    assert!(
                        (*got as f64 - s).abs() <= 1e-5 * (1.0 + a),
                        "F({m}x{m}, 3x3) case {case} over {over} on {threads} threads, element {e}: {got} vs {s}"
                    );
                }
            }
        }
    }
}
