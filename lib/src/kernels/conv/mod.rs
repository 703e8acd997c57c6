//! The convolutions' inner loops, over host slices and the geometry of
//! their windows ([`Windows`], [`PlaneWindows`]): the direct product over
//! a padded grid (`direct`), the pixel-row and pixel-tap products
//! (`pixels`), Winograd F(2x2, 3x3) and F(4x4, 3x3) (`winograd`), stems of
//! few input channels (`few`), and depthwise convolutions (`depthwise`).
//! Which one a convolution takes is the executor's plan; what each needs
//! of the CPU is asked of [`crate::kernels::cpu`].

pub mod depthwise;
pub mod direct;
pub mod few;
pub mod pixels;
pub mod stride2;
pub mod winograd;

use crate::kernels::window::*;
use crate::kernels::{sgemm, vmath};

/// im2col over up to three spatial dims: for `b` images of `c` channels
/// (`xs`, row-major), the column matrix `[b, c * taps, out_plane]`: row
/// (channel, kz, ky, kx) holds the input under that tap at every output
/// position, zero where it reads padding. Each row is filled by its own
/// task ([`im2col_row`]).
pub fn im2col_fill<T: Copy + Default + Send + Sync>(
    xs: &[T],
    b: usize,
    c: usize,
    g: &Windows,
) -> Vec<T> {
    let (k, n) = (c * g.taps(), g.out_plane());
    let mut col = vec![T::default(); b * k * n];
    crate::kernels::threads::par_chunks(&mut col, n, |row, out| im2col_row(xs, c, g, row, out));
    col
}

/// Row `row` (image `row / (c * taps)`, then channel, kz, ky, kx) of the
/// column matrix of [`im2col_fill`] into `out` (`out_plane` values).
pub fn im2col_row<T: Copy + Default>(xs: &[T], c: usize, g: &Windows, row: usize, out: &mut [T]) {
    im2col_segment(xs, c, g, row, 0, out)
}

/// Columns `[j0, j0 + out.len())` of row `row` of the column matrix (see
/// [`im2col_row`]), from contiguous input rows: per output line only the
/// ends (the output columns whose tap falls in the padding) are worked
/// out, so the copy itself has no bounds checks.
pub fn im2col_segment<T: Copy + Default>(
    xs: &[T],
    c: usize,
    g: &Windows,
    row: usize,
    j0: usize,
    out: &mut [T],
) {
    let ([id, ih, iw], [kd, kh, kw], [sd, sh, sw]) = (g.input, g.kernel, g.stride);
    let ([pd, ph, pw], [dd, dh, dw], [_, oh, ow]) = (g.pad, g.dilation, g.output);
    let k = c * g.taps();
    let inside = |o: usize, s: usize, t: usize, d: usize, p: usize, size: usize| {
        let i = (o * s + t * d) as isize - p as isize;
        (i >= 0 && i < size as isize).then_some(i as usize)
    };
    let (bi, r) = (row / k, row % k);
    let (ch, kz, ky, kx) = (
        r / (kd * kh * kw),
        (r / (kh * kw)) % kd,
        (r / kw) % kh,
        r % kw,
    );
    let volume = &xs[(bi * c + ch) * id * ih * iw..][..id * ih * iw];
    // output column ox reads input column ox * sw + x0: inside the row for
    // ox in [lo, hi)
    let x0 = (kx * dw) as isize - pw as isize;
    let s = sw as isize;
    let lo = if x0 >= 0 {
        0
    } else {
        ((-x0 + s - 1) / s) as usize
    }
    .min(ow);
    let hi = if (iw as isize) <= x0 {
        0
    } else {
        ((iw as isize - x0 + s - 1) / s) as usize
    }
    .clamp(lo, ow);
    let end = j0 + out.len();
    let mut j = j0;
    while j < end {
        // one output line (oz, oy), from column ox0, len columns
        let (line, ox0) = (j / ow.max(1), j % ow.max(1));
        let len = (ow - ox0).min(end - j);
        let (oz, oy) = (line / oh, line % oh);
        let dst = &mut out[j - j0..][..len];
        j += len;
        let (Some(iz), Some(iy)) = (
            inside(oz, sd, kz, dd, pd, id),
            inside(oy, sh, ky, dh, ph, ih),
        ) else {
            dst.fill(T::default());
            continue;
        };
        let src = &volume[(iz * ih + iy) * iw..][..iw];
        // this segment's part of [lo, hi), relative to ox0
        let (a, b) = (
            lo.clamp(ox0, ox0 + len) - ox0,
            hi.clamp(ox0, ox0 + len) - ox0,
        );
        dst[..a].fill(T::default());
        dst[b..].fill(T::default());
        if a < b {
            let first = ((ox0 + a) as isize * s + x0) as usize;
            if sw == 1 {
                dst[a..b].copy_from_slice(&src[first..first + (b - a)]);
            } else {
                for (d, v) in dst[a..b].iter_mut().zip(src[first..].iter().step_by(sw)) {
                    *d = *v;
                }
            }
        }
    }
}

/// Whether a convolution is a product as the input lies: 1x1, stride 1,
/// no padding.
pub fn pointwise(g: &Windows) -> bool {
    g.taps() == 1 && g.stride == [1; 3] && g.pad == [0; 3]
}

/// `line[i] = row[i * step]` for every `i`: a stride of 2 through
/// AVX-512 where present (ResNet-50's downsampling 1x1s copy 200K floats
/// at batch 1 this way; element by element, the copy cost as much as a
/// tenth of their product).
pub fn every_nth(row: &[f32], step: usize, line: &mut [std::mem::MaybeUninit<f32>]) {
    if step == 2 {
        return (super::cpu().every_other)(row, line);
    }
    for (i, v) in line.iter_mut().enumerate() {
        v.write(row[i * step]);
    }
}

/// [`every_nth`] of step 2 on AVX-512F, the pairs vectorised by the compiler.
///
/// # Safety
/// AVX-512F is present.
#[target_feature(enable = "avx512f")]
unsafe fn every_other_avx512(row: &[f32], line: &mut [std::mem::MaybeUninit<f32>]) {
    let whole = line.len().min(row.len() / 2);
    for (v, pair) in line[..whole].iter_mut().zip(row.chunks_exact(2)) {
        v.write(pair[0]);
    }
    for (i, v) in line.iter_mut().enumerate().skip(whole) {
        v.write(row[i * 2]);
    }
}

/// [`every_nth`] of step 2 where [`super::cpu`] found AVX-512F (the only
/// place it is put in the table).
pub(super) fn every_other_wide(row: &[f32], line: &mut [std::mem::MaybeUninit<f32>]) {
    // SAFETY: in the table only where AVX-512F is present
    unsafe { every_other_avx512(row, line) }
}

/// [`every_nth`] of step 2, element by element.
pub(super) fn every_other(row: &[f32], line: &mut [std::mem::MaybeUninit<f32>]) {
    for (i, v) in line.iter_mut().enumerate() {
        v.write(row[i * 2]);
    }
}
