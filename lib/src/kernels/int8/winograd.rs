//! 3 x 3 convolutions of stride 1 in integers by Winograd's F(2 x 2, 3 x 3)
//! on the AVX2 kernel: each 2 x 2 tile of output from a 4 x 4 patch of
//! input in 16 products where the direct form takes 36.
//!
//! Exact, as the direct product is. The input transform (`B^T d B`, of
//! coefficients 0 and +-1) takes bytes to at most 4 * 255 in magnitude and
//! the weight's (`(2G) g (2G)^T`, twice torch's `G` so that it stays in
//! integers) signed bytes to at most 9 * 128: both i16, multiplied by
//! `vpmaddwd` without saturation. The sums over channels and the output
//! transform (`A^T m A`, coefficients 0 and +-1) run in wrapping i32:
//! every step is an integer linear map, so the wrapped result is the true
//! one modulo 2^32, and the true one, four times the direct sum (the
//! factor `2G` brings in), fits an i32 for any `k` under
//! [`super::MAX_K`]; the last step divides the 4 out exactly.
//!
//! Layout: the weight packed per position `e` of the 4 x 4 tile in the
//! AVX2 kernel's pair panels (`[e][panel][c / 2][NR]` words of two i16);
//! a task transforms the patches of its tile rows into `[e][tile][c]`
//! i16 rows and runs the 16 products, then the output transform into
//! [`NR`]-column blocks of C, rows the output pixels in order.

use super::{Block, NR};

/// The weight transformed and packed (see the module).
#[derive(Debug)]
pub struct Packed {
    ci: usize,
    /// `ci` padded to even.
    cp: usize,
    co: usize,
    data: Vec<i32>,
}

impl Packed {
    pub fn bytes(&self) -> usize {
        self.data.len() * 4
    }

    /// Position `e`'s panel `jp`.
    fn panel(&self, e: usize, jp: usize) -> *const i32 {
        let panels = self.co.div_ceil(NR);
        self.data[(e * panels + jp) * (self.cp / 2) * NR..].as_ptr()
    }
}

/// `(2G) g (2G)^T` of one 3 x 3 kernel `g` (row-major), row-major 4 x 4.
fn weight_transform(g: &[i32; 9]) -> [i32; 16] {
    const G2: [[i32; 3]; 4] = [[2, 0, 0], [1, 1, 1], [1, -1, 1], [0, 0, 2]];
    let mut t = [[0i32; 3]; 4];
    for (r, row) in G2.iter().enumerate() {
        for c in 0..3 {
            t[r][c] = (0..3).map(|s| row[s] * g[s * 3 + c]).sum();
        }
    }
    let mut u = [0i32; 16];
    for r in 0..4 {
        for (c, row) in G2.iter().enumerate() {
            u[r * 4 + c] = (0..3).map(|s| t[r][s] * row[s]).sum();
        }
    }
    u
}

/// Packs a `[co][ci][3][3]` weight (torch's layout).
pub fn pack(w: &[i8], co: usize, ci: usize) -> Packed {
    assert!(w.len() >= co * ci * 9, "winograd::pack: weight too short");
    let cp = ci.div_ceil(2) * 2;
    let panels = co.div_ceil(NR);
    let per = (cp / 2) * NR;
    let mut data = vec![0i32; 16 * panels * per];
    let mut u = vec![[0i32; 16]; co * ci];
    for (x, u) in u.iter_mut().enumerate() {
        let g: [i32; 9] = std::array::from_fn(|t| w[x * 9 + t] as i32);
        *u = weight_transform(&g);
    }
    for e in 0..16 {
        for o in 0..co {
            let (jp, j) = (o / NR, o % NR);
            let panel = &mut data[(e * panels + jp) * per..][..per];
            for q in 0..cp / 2 {
                let half = |c: usize| {
                    if c < ci {
                        u[o * ci + c][e] as i16 as u16 as u32
                    } else {
                        0
                    }
                };
                panel[q * NR + j] = (half(2 * q) | half(2 * q + 1) << 16) as i32;
            }
        }
    }
    Packed { ci, cp, co, data }
}

/// Where a 3 x 3 convolution of stride 1 and dilation 1 of `ci` channels
/// on an input of `[h][w]` pixels, padded by `pad`, runs this way: at
/// least 16 channels (over fewer the transforms outweigh the product),
/// its output at least two pixels each way (else the tiles are mostly
/// edge), and not turned off (`PT2KIT_NO_WINOGRAD=1`, as for float32's).
pub fn fits(ci: usize, h: usize, w: usize, pad: [usize; 2]) -> bool {
    static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    ci >= 16
        && h + 2 * pad[0] >= 4
        && w + 2 * pad[1] >= 4
        && *ON.get_or_init(|| !crate::knobs::is_set("PT2KIT_NO_WINOGRAD"))
}

/// The 3 x 3 convolution of stride 1 of `x` (`[h][w][ci]` unsigned bytes,
/// channels-last) padded by `pad` with the byte `z` by `b`: C, `ho * wo`
/// rows (the output pixels in order) by `co` columns, the exact sums
/// `sum x w` (the padding taking part as `z`), handed to `done` in blocks
/// as [`super::gemm`] hands its blocks, on up to `threads` threads.
///
/// # Panics
/// If the CPU lacks AVX2 (`super::runs`) or `x` is short.
#[allow(clippy::too_many_arguments)]
pub fn conv3x3(
    x: &[u8],
    [h, w]: [usize; 2],
    pad: [usize; 2],
    z: u8,
    b: &Packed,
    threads: usize,
    done: Block,
) {
    assert!(
        super::runs(super::Kernel::Avx2),
        "winograd: this CPU lacks AVX2"
    );
    assert!(x.len() >= h * w * b.ci, "winograd: input too short");
    let (ho, wo) = (
        (h + 2 * pad[0]).saturating_sub(2),
        (w + 2 * pad[1]).saturating_sub(2),
    );
    if ho == 0 || wo == 0 || b.co == 0 {
        return;
    }
    let (th, tw) = (ho.div_ceil(2), wo.div_ceil(2));
    let np = b.co.div_ceil(NR);
    // tile rows by chunks of about 32 tiles, columns split where there
    // are few such chunks: about four tasks a thread
    let want = (threads.max(1) * 4).min(th * np);
    let rb = th
        .div_ceil(32usize.div_ceil(tw).max(1))
        .max(want.div_ceil(np))
        .min(th)
        .max(1);
    let cb = want.div_ceil(rb).clamp(1, np);
    let run = |t: usize| {
        let (r, q) = (t / cb, t % cb);
        let rows = r * th / rb..(r + 1) * th / rb;
        let cols = q * np / cb..(q + 1) * np / cb;
        // SAFETY: the CPU has AVX2 (checked above)
        BUFFERS.with(|cell| unsafe {
            task(
                x,
                [h, w],
                pad,
                z,
                b,
                [ho, wo],
                rows,
                cols,
                &mut cell.borrow_mut(),
                done,
            )
        });
    };
    if threads <= 1 {
        (0..rb * cb).for_each(run);
    } else {
        crate::kernels::threads::par_for(rb * cb, run);
    }
}

/// A task's buffers, kept by its thread ([`task`]'s `v`, `m` and `c`):
/// `v`'s padding channels are zeroed with it, every other element of the
/// three is written before it is read, so `m` and `c` need no clearing.
type Buffers = (Vec<i16>, Vec<i32>, Vec<i32>);

thread_local! {
    static BUFFERS: std::cell::RefCell<Buffers> =
        const { std::cell::RefCell::new((Vec::new(), Vec::new(), Vec::new())) };
}

/// Tile rows `rows` x column panels `cols` of the output, on the thread's
/// buffers `bufs`.
///
/// # Safety
/// The CPU has AVX2.
#[allow(clippy::too_many_arguments)]
#[cfg_attr(target_arch = "x86_64", target_feature(enable = "avx2"))]
unsafe fn task(
    x: &[u8],
    [h, w]: [usize; 2],
    pad: [usize; 2],
    z: u8,
    b: &Packed,
    [ho, wo]: [usize; 2],
    rows: std::ops::Range<usize>,
    cols: std::ops::Range<usize>,
    (v, m, c): &mut Buffers,
    done: Block,
) {
    let (ci, cp) = (b.ci, b.cp);
    let tw = wo.div_ceil(2);
    let tiles = rows.len() * tw;
    let y0 = 2 * rows.start;
    let y1 = (2 * rows.end).min(ho);
    let pixels = (y1 - y0) * wo;
    v.clear();
    v.resize(16 * tiles * cp, 0);
    if m.len() < 16 * tiles * NR {
        m.resize(16 * tiles * NR, 0);
    }
    if c.len() < pixels * NR {
        c.resize(pixels * NR, 0);
    }
    // the input transform: v[e][tile][c]
    let zrow = vec![z; ci];
    for (ti, ty) in rows.clone().enumerate() {
        for tx in 0..tw {
            let tile = ti * tw + tx;
            let px: [&[u8]; 16] = std::array::from_fn(|rc| {
                let iy = (2 * ty + rc / 4) as isize - pad[0] as isize;
                let ix = (2 * tx + rc % 4) as isize - pad[1] as isize;
                if iy < 0 || ix < 0 || iy as usize >= h || ix as usize >= w {
                    &zrow[..]
                } else {
                    &x[(iy as usize * w + ix as usize) * ci..][..ci]
                }
            });
            let mut out: [&mut [i16]; 16] = {
                let mut rest = &mut v[..];
                let mut parts: [&mut [i16]; 16] = Default::default();
                let mut skipped = 0;
                for (e, part) in parts.iter_mut().enumerate() {
                    let at = (e * tiles + tile) * cp;
                    let (_, tail) = rest.split_at_mut(at - skipped);
                    let (mine, tail) = tail.split_at_mut(ci);
                    *part = mine;
                    rest = tail;
                    skipped = at + ci;
                }
                parts
            };
            // sixteen channels at a time in vector lanes, the rest one by one
            let vec = if cfg!(target_arch = "x86_64") {
                ci / 16 * 16
            } else {
                0
            };
            #[cfg(target_arch = "x86_64")]
            for c0 in (0..vec).step_by(16) {
                input_transform16(&px, &mut out, c0);
            }
            input_transform(&px, &mut out, vec..ci);
        }
    }
    // the 16 products, m[e][tile][NR] for each panel, then the output
    // transform into C's rows of this task's pixels
    for jp in cols {
        let ncols = (b.co - jp * NR).min(NR);
        for e in 0..16 {
            let bp = b.panel(e, jp);
            let a = v[e * tiles * cp..].as_ptr().cast::<u16>();
            let mo = m[e * tiles * NR..].as_mut_ptr();
            for r0 in (0..tiles).step_by(super::avx2::RB) {
                for c0 in (0..ncols).step_by(super::avx2::CB) {
                    super::avx2::rows_by_panel(
                        (tiles - r0).min(super::avx2::RB),
                        a.add(r0 * cp),
                        cp,
                        bp.add(c0),
                        cp / 2,
                        mo.add(r0 * NR + c0),
                    );
                }
            }
        }
        for ti in 0..rows.len() {
            for tx in 0..tw {
                let tile = ti * tw + tx;
                let mt: [&[i32]; 16] = std::array::from_fn(|e| &m[(e * tiles + tile) * NR..][..NR]);
                let mut y = [[0i32; NR]; 4];
                #[cfg(target_arch = "x86_64")]
                output_transform8(&mt, &mut y);
                #[cfg(not(target_arch = "x86_64"))]
                output_transform(&mt, &mut y);
                for (d, yd) in y.iter().enumerate() {
                    let (oy, ox) = (2 * (rows.start + ti) + d / 2, 2 * tx + d % 2);
                    if oy < y1 && ox < wo {
                        let p = (oy - y0) * wo + ox;
                        c[p * NR..][..NR].copy_from_slice(yd);
                    }
                }
            }
        }
        for r0 in (0..pixels).step_by(super::MR) {
            let n = (pixels - r0).min(super::MR);
            done(y0 * wo + r0, n, jp * NR, ncols, &c[r0 * NR..]);
        }
    }
}

/// `B^T d B` of each channel: `px` the 4 x 4 patch's pixels (row-major),
/// `out` the 16 positions' rows.
#[inline(always)]
fn input_transform(px: &[&[u8]; 16], out: &mut [&mut [i16]; 16], chans: std::ops::Range<usize>) {
    for c in chans {
        let d: [i16; 16] = std::array::from_fn(|i| px[i][c] as i16);
        // B^T d: rows
        let mut t = [0i16; 16];
        for col in 0..4 {
            let (d0, d1, d2, d3) = (d[col], d[4 + col], d[8 + col], d[12 + col]);
            t[col] = d0 - d2;
            t[4 + col] = d1 + d2;
            t[8 + col] = d2 - d1;
            t[12 + col] = d1 - d3;
        }
        // then B: columns
        for r in 0..4 {
            let (t0, t1, t2, t3) = (t[r * 4], t[r * 4 + 1], t[r * 4 + 2], t[r * 4 + 3]);
            out[r * 4][c] = t0 - t2;
            out[r * 4 + 1][c] = t1 + t2;
            out[r * 4 + 2][c] = t2 - t1;
            out[r * 4 + 3][c] = t1 - t3;
        }
    }
}

/// [`input_transform`] of channels `c0..c0 + 16` in 16-bit lanes.
///
/// # Safety
/// The CPU has AVX2; every row of `px` and `out` holds `c0 + 16`.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
#[inline]
unsafe fn input_transform16(px: &[&[u8]; 16], out: &mut [&mut [i16]; 16], c0: usize) {
    use std::arch::x86_64::*;
    let mut d = [_mm256_setzero_si256(); 16];
    for (d, px) in d.iter_mut().zip(px) {
        *d = _mm256_cvtepu8_epi16(_mm_loadu_si128(px[c0..c0 + 16].as_ptr().cast()));
    }
    use _mm256_add_epi16 as add;
    use _mm256_sub_epi16 as sub;
    let mut t = [_mm256_setzero_si256(); 16];
    for col in 0..4 {
        let (d0, d1, d2, d3) = (d[col], d[4 + col], d[8 + col], d[12 + col]);
        t[col] = sub(d0, d2);
        t[4 + col] = add(d1, d2);
        t[8 + col] = sub(d2, d1);
        t[12 + col] = sub(d1, d3);
    }
    for r in 0..4 {
        let (t0, t1, t2, t3) = (t[r * 4], t[r * 4 + 1], t[r * 4 + 2], t[r * 4 + 3]);
        let v = [sub(t0, t2), add(t1, t2), sub(t2, t1), sub(t1, t3)];
        for (q, v) in v.into_iter().enumerate() {
            _mm256_storeu_si256(out[r * 4 + q][c0..c0 + 16].as_mut_ptr().cast(), v);
        }
    }
}

/// [`output_transform`] in 32-bit lanes, eight columns at a time.
///
/// # Safety
/// The CPU has AVX2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
#[inline]
unsafe fn output_transform8(m: &[&[i32]; 16], y: &mut [[i32; NR]; 4]) {
    use _mm256_add_epi32 as add;
    use _mm256_sub_epi32 as sub;
    use std::arch::x86_64::*;
    for j in (0..NR).step_by(8) {
        let mut v = [_mm256_setzero_si256(); 16];
        for (v, m) in v.iter_mut().zip(m) {
            *v = _mm256_loadu_si256(m[j..j + 8].as_ptr().cast());
        }
        let mut t = [_mm256_setzero_si256(); 8];
        for col in 0..4 {
            let (m0, m1, m2, m3) = (v[col], v[4 + col], v[8 + col], v[12 + col]);
            t[col] = add(add(m0, m1), m2);
            t[4 + col] = sub(sub(m1, m2), m3);
        }
        for r in 0..2 {
            let (t0, t1, t2, t3) = (t[r * 4], t[r * 4 + 1], t[r * 4 + 2], t[r * 4 + 3]);
            let y0 = _mm256_srai_epi32::<2>(add(add(t0, t1), t2));
            let y1 = _mm256_srai_epi32::<2>(sub(sub(t1, t2), t3));
            _mm256_storeu_si256(y[r * 2][j..j + 8].as_mut_ptr().cast(), y0);
            _mm256_storeu_si256(y[r * 2 + 1][j..j + 8].as_mut_ptr().cast(), y1);
        }
    }
}

/// `A^T m A / 4` of each column in wrapping i32 (see the module): `m` the
/// 16 positions' rows, `y` the 2 x 2 outputs' (row-major).
#[cfg(not(target_arch = "x86_64"))]
#[inline(always)]
fn output_transform(m: &[&[i32]; 16], y: &mut [[i32; NR]; 4]) {
    for j in 0..NR {
        let v: [i32; 16] = std::array::from_fn(|e| m[e][j]);
        // A^T m: rows
        let mut t = [0i32; 8];
        for col in 0..4 {
            let (m0, m1, m2, m3) = (v[col], v[4 + col], v[8 + col], v[12 + col]);
            t[col] = m0.wrapping_add(m1).wrapping_add(m2);
            t[4 + col] = m1.wrapping_sub(m2).wrapping_sub(m3);
        }
        for r in 0..2 {
            let (t0, t1, t2, t3) = (t[r * 4], t[r * 4 + 1], t[r * 4 + 2], t[r * 4 + 3]);
            y[r * 2][j] = t0.wrapping_add(t1).wrapping_add(t2) >> 2;
            y[r * 2 + 1][j] = t1.wrapping_sub(t2).wrapping_sub(t3) >> 2;
        }
    }
}
