//! Pooling loops over host images: a max pool's output line over an
//! image stored channels-last.

/// Output line `oy` of a channels-last max pool (the executor's channels-last max pool)
/// of one image (`[h][w][c]`) into `tile` (`[ow][c]`): each pixel's
/// channels in registers over its window, four vectors of 16 at a time
/// (four chains of blends in flight: one at a time, each window's nine
/// steps waited on each other, 0.14 ms of ResNet's 112x112 pool on one
/// thread), stored once.
pub fn max_line(
    image: &[f32],
    dims: (usize, usize, usize),
    windows: ((usize, usize), (usize, usize), (usize, usize)),
    (oy, ow): (usize, usize),
    tile: &mut [f32],
) {
    let ((h, w, c), (k, s, p)) = (dims, windows);
    // the window's lines inside the image
    let (y0, y1) = (
        (oy * s.0).saturating_sub(p.0),
        (oy * s.0 + k.0).saturating_sub(p.0).min(h),
    );
    let rows = &image[y0 * w * c..y1.max(y0) * w * c];
    assert!(tile.len() >= ow * c && rows.len().is_multiple_of((w * c).max(1)));
    // the channels in whole vectors, on the vector kernels
    let whole = match super::isa() {
        super::Isa::Base => 0,
        _ => c / 16 * 16,
    };
    // SAFETY: the instruction set is the one `isa` found; the
    // window's columns lie inside the lines (clamped below), the channels
    // inside `whole`, the pixels inside `tile`
    unsafe {
        match super::isa() {
            super::Isa::Avx512 => {
                max_pixels_avx512(rows, (w, c, whole), (k.1, s.1, p.1), ow, tile.as_mut_ptr())
            }
            super::Isa::Avx2 => {
                max_pixels_avx2(rows, (w, c, whole), (k.1, s.1, p.1), ow, tile.as_mut_ptr())
            }
            super::Isa::Base => {}
        }
    }
    for ox in 0..ow {
        let (x0, x1) = (
            (ox * s.1).saturating_sub(p.1),
            (ox * s.1 + k.1).saturating_sub(p.1).min(w),
        );
        for (i, o) in tile[ox * c..][..c].iter_mut().enumerate().skip(whole) {
            *o = rows
                .chunks_exact((w * c).max(1))
                .flat_map(|r| r[x0 * c..x1.max(x0) * c].chunks_exact(c.max(1)))
                // NaN wins (a NaN kept stays)
                .fold(f32::NEG_INFINITY, |m, px| {
                    if px[i] > m || px[i].is_nan() {
                        px[i]
                    } else {
                        m
                    }
                });
        }
    }
}

super::simd::isa_entries!(max_pixels_avx512, max_pixels_avx2 = max_pixels[](rows: &[f32], dims: (usize, usize, usize), windows: (usize, usize, usize), ow: usize, tile: *mut f32));

/// Channels `0..whole` (whole vectors) of each of a line's `ow` output
/// pixels ([`max_line`]) over lines `rows` (of `w` pixels of `c`): its
/// window's columns (`k` from `ox * s - p`, clamped to the lines) into
/// `tile` (`[ow][c]`; -inf over no pixel, a NaN wins).
///
/// # Safety
/// `S`'s instruction set is present; `whole` is a multiple of 16 up to
/// `c`; `rows` holds whole lines; `tile` holds `ow * c` writable floats.
#[inline(always)]
unsafe fn max_pixels<S: super::simd::F32x16>(
    rows: &[f32],
    (w, c, whole): (usize, usize, usize),
    (k, s, p): (usize, usize, usize),
    ow: usize,
    tile: *mut f32,
) {
    for ox in 0..ow {
        let (x0, x1) = (
            (ox * s).saturating_sub(p),
            (ox * s + k).saturating_sub(p).min(w),
        );
        let out = tile.add(ox * c);
        let mut j = 0;
        while j + 64 <= whole {
            let mut m = [S::splat(f32::NEG_INFINITY); 4];
            for line in rows.chunks_exact(w * c) {
                for x in x0..x1 {
                    let px = line.as_ptr().add(x * c + j);
                    for (v, m) in m.iter_mut().enumerate() {
                        *m = m.above_or_nan(S::load(px.add(16 * v)));
                    }
                }
            }
            for (v, m) in m.iter().enumerate() {
                m.store(out.add(j + 16 * v));
            }
            j += 64;
        }
        while j + 16 <= whole {
            let mut m = S::splat(f32::NEG_INFINITY);
            for line in rows.chunks_exact(w * c) {
                for x in x0..x1 {
                    m = m.above_or_nan(S::load(line.as_ptr().add(x * c + j)));
                }
            }
            m.store(out.add(j));
            j += 16;
        }
    }
}
