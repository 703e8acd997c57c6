//! Direct convolutions: the input read where it lies (in place, or in a
//! padded, stride-phased grid) under each tap, no im2col: see [`conv_direct`].

use super::*;

/// A batch's images for [`conv_direct`]: each padded with zeros and split
/// into the stride's phases, `[image][channel][row phase][column
/// phase][hp][pitch]`, where padded pixel (qy, qx) lies in phase (qy %
/// sh, qx % sw) at (qy / sh, qx / sw). Under tap (ky, kx), output pixel
/// (oy, ox) then reads `offs[tap] + oy * pitch + ox`: the output plane,
/// laid out with `pitch` columns a line (the last `pitch - ow` of each
/// computed and dropped), reads every tap's input as one contiguous run.
///
/// A convolution of stride 1 whose output lines fit the input's (`ow <=
/// w`) reads the input in place instead (no copy, and no padding columns
/// computed: ResNet-18's 56x56 stage at batch 8 spent a fifth of its time
/// making the padded copy): output pixel (oy, ox) at flat position `oy * w
/// + ox` reads under tap (ky, kx) the input at that position plus `ky * w
/// + kx - (ph * w + pw)` (the panels' shift), and each panel's lanes whose
/// tap falls in the padding are masked off, tap by tap
/// ([`sgemm::Panels`]' tap masks).
pub struct Grid {
    pub data: Vec<f32>,
    /// Floats per image.
    pub image: usize,
    /// Where row r (channel, ky, kx) of the product's B starts, from an
    /// output position's flat index (plus the panels' shift).
    pub offs: Vec<usize>,
    pub pitch: usize,
    /// The windows of an input read in place with taps: the panels mask
    /// each tap's lanes.
    pub masked: Option<Windows>,
    /// Read in place, the batch's planes of a channel side by side (a
    /// copy, `[channel][image][h][w]`): panels run on across images.
    pub batched: bool,
}

/// Floats of a copied [`Grid`] from which its rows are split between the
/// threads.
const GRID_PARALLEL_MIN: usize = 16 << 10;

/// Bytes of [`Grid::panels`] kept between calls at most (a batch of 64
/// images at 224x224 makes a few megabytes of them).
const PANELS_KEPT_MAX: usize = 64 << 20;

thread_local! {
    /// [`Grid`]'s buffer between calls.
    static GRID: std::cell::RefCell<Vec<f32>> = const { std::cell::RefCell::new(Vec::new()) };
}

impl Drop for Grid {
    fn drop(&mut self) {
        let data = std::mem::take(&mut self.data);
        GRID.with(|g| g.replace(data));
    }
}

/// Whether a convolution of stride 1 over a batch of `b` runs its
/// panels across the images, their planes of each channel side by side
/// ([`Grid`]): where an image's panels would leave 3% or more of their
/// lanes idle (7x7: 49 pixels in 64 lanes; 14x14: 196 in 208), 10% for a
/// pointwise one (the copy weighs more against one tap: MobileNetV3's
/// `[40, 240]` at 14x14, batch 8, 0.20 -> 0.28 ms batched; its `[576,
/// 96]` at 7x7 0.53 -> 0.41), and an image's output lines fit its plane.
pub fn batched_planes(g: &Windows, b: usize) -> bool {
    let ([_, h, w], [_, sh, sw], [_, oh, ow]) = (g.input, g.stride, g.output);
    let span = (oh - 1) * w + ow;
    let lanes = span / sgemm::NR * sgemm::NR + (span % sgemm::NR).next_multiple_of(16);
    let idle = if pointwise(g) { 10 } else { 3 };
    b > 1
        && (sh, sw) == (1, 1)
        && ow <= w
        && oh <= h
        && h * w > 0
        && span * 100 < lanes * (100 - idle)
}

/// Floats of a copied grid one image's channels reach before the images
/// of a batch take theirs one at a time ([`conv_direct`]; 64 Ki floats,
/// a quarter of L2).
pub const PER_IMAGE_GRID_MIN: usize = 1 << 16;

impl Grid {
    pub fn new(xs: &[f32], b: usize, c: usize, g: &Windows) -> Grid {
        Grid::build(xs, b, c, g, true)
    }

    /// Whether [`Grid::new`] reads the input in place (stride 1, output
    /// lines no longer than the input's; the batched small planes too).
    pub fn in_place(g: &Windows) -> bool {
        let ([_, h, w], [_, sh, sw], [_, _, ow]) = (g.input, g.stride, g.output);
        (sh, sw) == (1, 1) && ow <= w && h * w > 0
    }

    /// Floats a channel of a copied grid holds (its stride phases, padded).
    pub fn copied_len(g: &Windows) -> usize {
        let ([_, kh, kw], [_, sh, sw], [_, dh, dw]) = (g.kernel, g.stride, g.dilation);
        let [_, oh, ow] = g.output;
        sh * sw * (oh + (kh - 1) * dh / sh) * (ow + (kw - 1) * dw / sw)
    }

    /// [`Grid::new`], reading in place only where `in_place_allowed` (the
    /// kernel bench times the copied grid against it).
    pub fn build(xs: &[f32], b: usize, c: usize, g: &Windows, in_place_allowed: bool) -> Grid {
        let ([_, h, w], [_, kh, kw]) = (g.input, g.kernel);
        let ([_, sh, sw], [_, ph, pw], [_, dh, dw]) = (g.stride, g.pad, g.dilation);
        let [_, oh, ow] = g.output;
        // in place: row r (channel, ky, kx) of B from an output position's
        // flat index (`w` a line), channels `stride` apart
        let in_place = |stride: usize| -> Vec<usize> {
            (0..c * kh * kw)
                .map(|r| (r / (kh * kw)) * stride + (r / kw) % kh * dh * w + r % kw * dw)
                .collect()
        };
        if (in_place_allowed || pointwise(g)) && Grid::in_place(g) {
            let plane = h * w;
            // small planes whose panels, image by image, would leave
            // lanes idle (7x7: 49 pixels in 64 lanes) run on across the
            // batch, its planes of each channel copied side by side
            if batched_planes(g, b) {
                let mut data = GRID.with(|g| g.take());
                data.resize(b * c * plane, 0.0);
                crate::kernels::threads::par_chunks(&mut data, b * plane, |ch, dst| {
                    for (bi, d) in dst.chunks_mut(plane.max(1)).enumerate() {
                        d.copy_from_slice(&xs[(bi * c + ch) * plane..][..plane]);
                    }
                });
                return Grid {
                    data,
                    image: c * plane,
                    offs: in_place(b * plane),
                    pitch: w,
                    masked: Some(*g),
                    batched: true,
                };
            }
            // the input itself, the taps' lanes in the padding masked off
            // (a pointwise convolution has none)
            return Grid {
                data: Vec::new(),
                image: c * plane,
                offs: in_place(plane),
                pitch: w,
                masked: (!pointwise(g)).then_some(*g),
                batched: false,
            };
        }
        let (hp, pitch) = (oh + (kh - 1) * dh / sh, ow + (kw - 1) * dw / sw);
        let channel = Grid::copied_len(g);
        let image = c * channel;
        let offs: Vec<usize> = (0..c * kh * kw)
            .map(|r| {
                let (ch, ty, tx) = (r / (kh * kw), (r / kw) % kh * dh, r % kw * dw);
                ch * channel + (((ty % sh) * sw + tx % sw) * hp + ty / sh) * pitch + tx / sw
            })
            .collect();
        // a buffer kept from the last call (a fresh one of megabytes
        // faults its pages in on every call), written whole: each padded
        // row's phase lines cleared and the input row scattered over them
        // while they are in L1, rows in even bands between the threads
        // (a channel a task, MobileNetV3's three-colour stem was three
        // tasks on two threads, and the whole grid was cleared first: 25
        // us of its 60 on two threads, 32 of 95 on one)
        let mut data = GRID.with(|g| g.take());
        data.resize(b * image, 0.0);
        let rows = b * c * hp * sh;
        let out = sgemm::SendPtr(data.as_mut_ptr());
        let band = |r0: usize, r1: usize| {
            if sw == 2 {
                // each row's two phase lines written where they lie, each
                // its own slice (other tasks write the lines between them)
                for r in r0..r1 {
                    let (i, q) = (r / (hp * sh), r % (hp * sh));
                    let at = i * channel + ((q % sh) * sw * hp + q / sh) * pitch;
                    // SAFETY: padded row q's two lines, inside the grid
                    // and no other row's
                    let (even, odd) = unsafe {
                        (
                            std::slice::from_raw_parts_mut(out.at(at), pitch),
                            std::slice::from_raw_parts_mut(out.at(at + hp * pitch), pitch),
                        )
                    };
                    let row = match q.checked_sub(ph).filter(|&iy| iy < h) {
                        Some(iy) => &xs[(i * h + iy) * w..][..w],
                        None => &[][..],
                    };
                    scatter_pair_lines(row, pw, pitch, even, odd);
                }
                return;
            }
            // a row's sw phase lines side by side, then each to its place
            // (no slice spans the lines between them, which other tasks
            // write)
            let mut lines = vec![0f32; sw * pitch];
            for r in r0..r1 {
                // padded row q of channel i (of the batch's channels)
                let (i, q) = (r / (hp * sh), r % (hp * sh));
                let at = i * channel + ((q % sh) * sw * hp + q / sh) * pitch;
                lines.fill(0.0);
                if let Some(iy) = q.checked_sub(ph).filter(|&iy| iy < h) {
                    scatter_columns(
                        &xs[(i * h + iy) * w..][..w],
                        pw,
                        sw,
                        pitch,
                        &mut lines,
                        pitch,
                    );
                }
                for (px, line) in lines.chunks_exact(pitch).enumerate() {
                    // SAFETY: padded row q's line of column phase px,
                    // inside the grid (q / sh < hp) and no other row's
                    let dst = unsafe {
                        std::slice::from_raw_parts_mut(out.at(at + px * hp * pitch), pitch)
                    };
                    dst.copy_from_slice(line);
                }
            }
        };
        let tasks = if rows * pitch * sw < GRID_PARALLEL_MIN {
            1
        } else {
            (rayon::current_num_threads() * 4).min(rows)
        };
        if tasks <= 1 {
            band(0, rows);
        } else {
            crate::kernels::threads::par_for(tasks, |t| {
                band(t * rows / tasks, (t + 1) * rows / tasks)
            });
        }
        Grid {
            data,
            image,
            offs,
            pitch,
            masked: None,
            batched: false,
        }
    }

    /// The grid's floats: the input itself for a pointwise convolution.
    pub fn src<'a>(&'a self, xs: &'a [f32]) -> &'a [f32] {
        if self.data.is_empty() {
            xs
        } else {
            &self.data
        }
    }

    /// [`Grid::make_panels`], made once per geometry and kept: they
    /// depend on the grid's layout, the batch, the output channels and
    /// plane only, and made on every call they were 2% of MobileNetV3's
    /// run at batch 1 with their allocations (a vector of runs a panel).
    /// Kept up to [`PANELS_KEPT_MAX`] bytes of them (all dropped past it).
    pub fn panels(
        &self,
        b: usize,
        co: usize,
        out: (usize, usize),
    ) -> std::sync::Arc<sgemm::Panels> {
        use std::sync::{Arc, Mutex, OnceLock};
        type Key = (
            Option<Windows>,
            bool,
            usize,
            usize,
            usize,
            usize,
            (usize, usize),
        );
        type Kept = (crate::kernels::FastMap<Key, Arc<sgemm::Panels>>, usize);
        static KEPT: OnceLock<Mutex<Kept>> = OnceLock::new();
        let key = (
            self.masked,
            self.batched,
            self.pitch,
            self.image,
            b,
            co,
            out,
        );
        let Ok(mut kept) = KEPT.get_or_init(Default::default).lock() else {
            return Arc::new(self.make_panels(b, co, out));
        };
        if let Some(p) = kept.0.get(&key) {
            return p.clone();
        }
        let made = Arc::new(self.make_panels(b, co, out));
        let bytes = made.bytes();
        if kept.1 + bytes > PANELS_KEPT_MAX {
            *kept = Default::default();
        }
        if bytes <= PANELS_KEPT_MAX {
            kept.0.insert(key, made.clone());
            kept.1 += bytes;
        }
        made
    }

    /// The product's column panels for `b` images of `co` output channels
    /// of `oh x ow`: each image's flat output positions (`pitch` a line)
    /// in panels of 32, each lane written to its pixel of the output `[b,
    /// co, oh, ow]` (C's rows are the channels of image 0). Worked out a
    /// run at a time: lane by lane, the panels of MobileNetV3's stem took
    /// 0.2 ms at batch 8.
    pub fn make_panels(&self, b: usize, co: usize, (oh, ow): (usize, usize)) -> sgemm::Panels {
        if let Some(g) = &self.masked {
            return self.panels_in_place(g, b, co);
        }
        let (pitch, nr) = (self.pitch, sgemm::NR);
        let flat = (oh - 1) * pitch + ow;
        // each panel's first position and lanes
        let starts: Vec<(usize, usize)> = (0..flat)
            .step_by(nr)
            .map(|p0| (p0, nr.min(flat - p0)))
            .collect();
        // image 0's runs of each panel, a run per output line it meets
        let runs: Vec<Vec<sgemm::Run>> = starts
            .iter()
            .map(|&(p0, lanes)| {
                let mut runs = Vec::new();
                let mut p = p0;
                while p < p0 + lanes {
                    let (oy, ox) = (p / pitch, p % pitch);
                    let end = (oy * pitch + ow).min(p0 + lanes);
                    if p < end {
                        let (l0, l1) = (p - p0, end - p0);
                        let mask = ((1u64 << l1) - (1u64 << l0)) as u32;
                        let at = (oy * ow + ox) as isize - l0 as isize;
                        match runs.last_mut() {
                            // the last line's run goes on (no padding
                            // columns: a pointwise convolution)
                            Some(r @ sgemm::Run { .. }) if r.at == at => r.mask |= mask,
                            _ => runs.push(sgemm::Run { mask, at }),
                        }
                    }
                    p = (oy + 1) * pitch;
                }
                runs
            })
            .collect();
        let mut panels = sgemm::Panels::default();
        for bi in 0..b {
            let shift = (bi * co * oh * ow) as isize;
            for (&(p0, _), runs) in starts.iter().zip(&runs) {
                let moved = runs.iter().map(|r| sgemm::Run {
                    at: r.at + shift,
                    ..*r
                });
                panels.push(bi * self.image + p0, moved);
            }
        }
        panels
    }
}

impl Grid {
    /// [`Grid::panels`] over an input read in place: each image's output
    /// positions (`w` a line) in panels of 32, or with the batch's planes
    /// side by side (`batched`) the whole batch's, a panel running on
    /// from one image into the next; each panel's lanes per tap are those
    /// of an output pixel whose tap reads inside the input. Worked out a
    /// line of a panel at a time.
    pub fn panels_in_place(&self, g: &Windows, b: usize, co: usize) -> sgemm::Panels {
        let ([_, h, w], [_, kh, kw]) = (g.input, g.kernel);
        let ([_, ph, pw], [_, dh, dw]) = (g.pad, g.dilation);
        let [_, oh, ow] = g.output;
        let nr = sgemm::NR;
        let mut panels = sgemm::Panels {
            taps: kh * kw,
            shift: ph * w + pw,
            ..Default::default()
        };
        // lanes [l0, l1) as a mask
        let lanes = |l0: usize, l1: usize| ((1u64 << l1) - (1u64 << l0)) as u32;
        // each tap column's output columns that read inside a line
        let cols: Vec<(usize, usize)> = (0..kw)
            .map(|kx| {
                let lo = pw.saturating_sub(kx * dw);
                (lo, (w + pw).saturating_sub(kx * dw).min(ow).max(lo))
            })
            .collect();
        let inside = |oy: usize, ky: usize| (oy + ky * dh).checked_sub(ph).is_some_and(|iy| iy < h);
        // positions an image takes, and the runs of panels: per image, or
        // one run over the batch
        let span = (oh - 1) * w + ow;
        let (each, images, per) = if self.batched {
            (h * w, 1, b * h * w)
        } else {
            (span, b, span)
        };
        let mut masks = vec![0u32; kh * kw];
        for bi in 0..images {
            for v0 in (0..per).step_by(nr) {
                let n = nr.min(per - v0);
                let mut runs = Vec::new();
                masks.fill(0);
                // the panel's part in each image it meets, line by line
                let mut v = v0;
                while v < v0 + n {
                    let img = bi + v / each;
                    let end = ((v / each + 1) * each).min(v0 + n);
                    let at_image = v - v % each;
                    let (mut p, last) = (v % each, v % each + (end - v));
                    while p < last && p / w < oh {
                        let (oy, ox) = (p / w, p % w);
                        let stop = (oy * w + ow).min(last);
                        if p < stop {
                            let l0 = at_image + p - v0;
                            let (x0, x1) = (ox, ox + stop - p);
                            let mask = lanes(l0, l0 + x1 - x0);
                            let at = (img * co * oh * ow + oy * ow + ox) as isize - l0 as isize;
                            match runs.last_mut() {
                                Some(r @ sgemm::Run { .. }) if r.at == at => r.mask |= mask,
                                _ => runs.push(sgemm::Run { mask, at }),
                            }
                            for ky in (0..kh).filter(|&ky| inside(oy, ky)) {
                                for (kx, &(c0, c1)) in cols.iter().enumerate() {
                                    let (c0, c1) = (c0.max(x0), c1.min(x1));
                                    if c0 < c1 {
                                        masks[ky * kw + kx] |= lanes(l0 + c0 - x0, l0 + c1 - x0);
                                    }
                                }
                            }
                        }
                        p = (oy + 1) * w;
                    }
                    v = end;
                }
                if runs.is_empty() {
                    continue;
                }
                let base = if self.batched {
                    v0
                } else {
                    bi * self.image + v0
                };
                panels.push(base, runs);
                panels.masks.extend(&masks);
            }
        }
        panels
    }
}

/// The im2col matrix of a batch's images (rows channel by tap, columns
/// the output pixels image after image), made row by row where a packed
/// product needs it ([`Im2col::fill`]) from their padded, stride-phased
/// copy ([`Grid`]): each output line's pixels under a tap one run of it.
pub struct Im2col {
    grid: Grid,
    /// Output pixels an image, and a line.
    n: usize,
    ow: usize,
}

impl Im2col {
    /// Over `b` images of `c` channels (`xs`, `[b, c, h, w]`) under `g`
    /// (2-D).
    pub fn new(xs: &[f32], b: usize, c: usize, g: &Windows) -> Im2col {
        Im2col {
            grid: Grid::build(xs, b, c, g, false),
            n: g.out_plane(),
            ow: g.output[2],
        }
    }

    /// Row `r` of the matrix from column `j0` into `seg` (`xs` the images
    /// it was made of): an output line's pixels at a time, walked from
    /// one line to the next (no division a line), each line copied inline
    /// ([`copy_line`]).
    pub fn fill(&self, xs: &[f32], r: usize, j0: usize, seg: &mut [f32]) {
        let (src, grid) = (self.grid.src(xs), &self.grid);
        let (n, ow) = (self.n, self.ow);
        let (i, p) = (j0 / n, j0 % n);
        let (mut oy, mut ox) = (p / ow, p % ow);
        let mut line = i * grid.image + grid.offs[r] + oy * grid.pitch;
        let mut at = 0;
        while at < seg.len() {
            let len = (ow - ox).min(seg.len() - at);
            copy_line(&mut seg[at..at + len], &src[line + ox..][..len]);
            at += len;
            ox += len;
            if ox == ow {
                // the next output line, or the next image's first
                (ox, oy) = (0, oy + 1);
                line += grid.pitch;
                if oy * ow == n {
                    line = line + grid.image - oy * grid.pitch;
                    oy = 0;
                }
            }
        }
    }
}

/// `src` into `dst` (of the same length): an output line of an
/// [`Im2col`] row, 7 to 112 pixels, where `copy_from_slice` called
/// `memmove` for each (a stride-2 3x3 `[128, 128]` over 56x56 at batch 1
/// spent 15% of its samples there, its lines 28 pixels; with this and
/// the walk from line to line, the fill and its copies 19% -> 13% of
/// them, the kernel 67% -> 71%; fresh processes interleaved, one thread:
/// that convolution 0.98-0.99x, ResNet-50 b8 0.975x).
#[inline(always)]
fn copy_line(dst: &mut [f32], src: &[f32]) {
    debug_assert_eq!(dst.len(), src.len(), "copy_line: lengths differ");
    let len = dst.len().min(src.len());
    let (dst, src) = (&mut dst[..len], &src[..len]);
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{_mm_loadu_ps, _mm_storeu_ps};
        let mut k = 0;
        while k + 4 <= dst.len() {
            // SAFETY: k + 4 <= len of both; SSE2 is x86_64's baseline
            unsafe { _mm_storeu_ps(dst.as_mut_ptr().add(k), _mm_loadu_ps(src.as_ptr().add(k))) };
            k += 4;
        }
        for (d, s) in dst[k..].iter_mut().zip(&src[k..]) {
            *d = *s;
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    dst.copy_from_slice(src);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A copied [`Grid`] holds each channel's padded stride phases, the
    /// padding zero, over a kept buffer that held other numbers: strides
    /// 1 to 3 each way, padding none to past the kernel, dilations.
    #[test]
    pub fn copied_grid_is_the_padded_phases() {
        for &((h, w), (kh, kw), (sh, sw), (ph, pw), (dh, dw), c, b) in &[
            (
                (13usize, 11usize),
                (3usize, 3usize),
                (2usize, 2usize),
                (1usize, 1usize),
                (1usize, 1usize),
                3usize,
                2usize,
            ),
            ((9, 14), (7, 5), (2, 3), (3, 2), (1, 1), 2, 1),
            ((8, 8), (3, 3), (1, 1), (0, 2), (2, 1), 1, 2),
            ((10, 7), (5, 3), (3, 2), (4, 0), (1, 2), 2, 1),
            ((5, 6), (1, 3), (2, 1), (0, 1), (1, 1), 3, 1),
        ] {
            let g = Windows::new(&[h, w], &[kh, kw], &[sh, sw], &[ph, pw], &[dh, dw]).unwrap();
            let [_, oh, ow] = g.output;
            let (hp, pitch) = (oh + (kh - 1) * dh / sh, ow + (kw - 1) * dw / sw);
            let channel = Grid::copied_len(&g);
            // the thread's kept buffer full of NaNs first
            drop(Grid::build(&vec![f32::NAN; b * c * h * w], b, c, &g, false));
            let xs: Vec<f32> = (0..b * c * h * w).map(|i| i as f32 * 0.25 + 1.0).collect();
            let grid = Grid::build(&xs, b, c, &g, false);
            assert_eq!(grid.data.len(), b * c * channel);
            for (i, got) in grid.data.chunks(channel).enumerate() {
                for (p, phase) in got.chunks(hp * pitch).enumerate() {
                    let (py, px) = (p / sw, p % sw);
                    for (r, line) in phase.chunks(pitch).enumerate() {
                        for (j, v) in line.iter().enumerate() {
                            let (y, x) = (
                                (r * sh + py) as isize - ph as isize,
                                (j * sw + px) as isize - pw as isize,
                            );
                            let inside =
                                (0..h as isize).contains(&y) && (0..w as isize).contains(&x);
                            let want = if inside {
                                xs[i * h * w + y as usize * w + x as usize]
                            } else {
                                0.0
                            };
                            assert_eq!(v.to_bits(), want.to_bits(), "{h}x{w} k{kh}x{kw} s{sh}x{sw} p{ph}x{pw}: channel {i} phase {p} at {r},{j}");
                        }
                    }
                }
            }
        }
    }

    /// [`Im2col::fill`] gives the column matrix's rows (images side by
    /// side) from any column, across output lines and images, for taps,
    /// strides and padding, as [`im2col_fill`] makes them.
    #[test]
    pub fn im2col_rows_match_the_column_matrix() {
        for &(hw, kk, s, pad, c, b) in &[
            (9usize, 3usize, 1usize, 1usize, 2usize, 3usize),
            (10, 3, 2, 1, 3, 2),
            (11, 7, 2, 3, 1, 3),
            (7, 3, 2, 0, 2, 2),
            (6, 5, 1, 2, 2, 1),
        ] {
            let g = Windows::new(&[hw, hw], &[kk, kk], &[s, s], &[pad, pad], &[1, 1]).unwrap();
            let xs: Vec<f32> = (0..b * c * hw * hw).map(|i| i as f32 * 0.5 - 7.0).collect();
            let want = im2col_fill(&xs, b, c, &g);
            let (k, n) = (c * g.taps(), g.out_plane());
            let im = Im2col::new(&xs, b, c, &g);
            for r in 0..k {
                for (j0, len) in [
                    (0, b * n),
                    (1, n),
                    (g.output[2] - 1, 2 * g.output[2] + 1),
                    (n - 1, 2),
                    (3, b * n - 3),
                ] {
                    let len = len.min(b * n - j0);
                    let mut got = vec![f32::NAN; len];
                    im.fill(&xs, r, j0, &mut got);
                    for (q, v) in got.iter().enumerate() {
                        let j = j0 + q;
                        let e = want[(j / n) * k * n + r * n + j % n];
                        assert_eq!(
                            v.to_bits(),
                            e.to_bits(),
                            "{hw}x{hw} k{kk} s{s} p{pad}, row {r}, column {j}"
                        );
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod speed {
    use super::*;

    /// The direct convolution's kernel on ResNet's shapes at batch
    /// `BATCH` (8; and MobileNetV3's stem), its input read in place and
    /// copied, and the pixel-row product (rounds interleaved), on
    /// `THREADS` threads (2), kernels of size `ONLY` only if set: `cargo
    /// test --release -p pt2kit --features exec --lib direct_speed --
    /// --ignored --nocapture`. Each mode runs once a round, `8 * reps`
    /// times in all (its figures were halved until the average stopped
    /// counting each run twice: the gap to `ir-bench --profile` it seemed
    /// to show). The pointwise shapes at batch 8 show the direct kernel
    /// bound by its output's bytes where `k` is small: `[256, 64]` over
    /// 56x56 at 300 GFLOP/s on two threads (156 on one), 25.7 MB written
    /// (and read for ownership) in 2.7 ms, with A packed or in place alike.
    #[test]
    #[ignore]
    pub fn direct_speed() {
        let threads: usize = std::env::var("THREADS")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(2);
        let only: Option<usize> = std::env::var("ONLY").ok().and_then(|v| v.parse().ok());
        for &(c, co, hw, kk, s) in &[
            (64usize, 64usize, 56usize, 3usize, 1usize),
            (128, 128, 28, 3, 1),
            (256, 256, 14, 3, 1),
            (512, 512, 7, 3, 1),
            (3, 64, 224, 7, 2),
            (3, 16, 224, 3, 2),
            (64, 128, 56, 3, 2),
            (128, 128, 56, 3, 2),
            (256, 256, 28, 3, 2),
            (256, 512, 14, 3, 2),
            (64, 256, 56, 1, 1),
            (128, 512, 28, 1, 1),
            (256, 1024, 14, 1, 1),
        ] {
            if only.is_some_and(|k| k != kk) {
                continue;
            }
            let b: usize = std::env::var("BATCH")
                .ok()
                .and_then(|v| v.parse().ok())
                .unwrap_or(8);
            let pad = kk / 2;
            let g = Windows::new(&[hw, hw], &[kk, kk], &[s, s], &[pad, pad], &[1, 1]).unwrap();
            let [_, oh, ow] = g.output;
            let xs: Vec<f32> = (0..b * c * hw * hw).map(|i| (i % 7) as f32 * 0.1).collect();
            let k = c * kk * kk;
            let ws: Vec<f32> = (0..co * k).map(|i| (i % 5) as f32 * 0.1).collect();
            let mut out = sgemm::uninit(b * co * oh * ow);
            let flops = 2.0 * (b * co * oh * ow * k) as f64;
            let reps = (1e9 / flops) as usize + 1;
            let mut t = [[0f64; 2]; 2];
            // the same convolution with the pixels as rows (one product a
            // tap: super::pixels), copies and transposes included (its
            // input hot here: in ResNet at batch 8 the stride-2 3x3 into
            // 28x28 ran slower that way, 2.7 -> 3.1 ms, where this bench
            // had it faster)
            let taps = kk * kk;
            let bs: Vec<sgemm::PackedB> = (0..taps)
                .map(|tap| sgemm::pack_b(&super::pixels::tap_weight(&ws, tap, (c, co), taps)))
                .collect();
            let bs: Vec<&sgemm::PackedB> = bs.iter().collect();
            let mut tt = 0f64;
            for round in 0..8 {
                let t0 = std::time::Instant::now();
                for _ in 0..reps {
                    super::pixels::pixel_taps_product(
                        &xs,
                        (b, c, co),
                        &g,
                        &bs,
                        None,
                        (false, None),
                        &mut out,
                    );
                }
                tt += t0.elapsed().as_secs_f64();
                for in_place in [round % 2 == 0, round % 2 == 1] {
                    let (mut tg, mut tm) = (0f64, 0f64);
                    for _ in 0..reps {
                        let t0 = std::time::Instant::now();
                        let grid = Grid::build(&xs, b, c, &g, in_place);
                        let panels = grid.panels(b, co, (oh, ow));
                        tg += t0.elapsed().as_secs_f64();
                        let t0 = std::time::Instant::now();
                        unsafe {
                            sgemm::gemm_direct(
                                sgemm::Lhs::rows(&ws, co, k),
                                grid.src(&xs),
                                &grid.offs,
                                &panels,
                                &mut out,
                                oh * ow,
                                None,
                                false,
                                None,
                                threads,
                            )
                        };
                        tm += t0.elapsed().as_secs_f64();
                    }
                    t[in_place as usize][0] += tg;
                    t[in_place as usize][1] += tm;
                }
            }
            let tt = tt / (8 * reps) as f64;
            eprintln!(
                "c {c} co {co} {hw}x{hw} k{kk} s{s} pixel rows: {:.3} ms, {:.0} GF/s",
                tt * 1e3,
                flops / tt / 1e9
            );
            for (mode, [tg, tm]) in ["copied", "in place"].iter().zip(t) {
                let (tg, tm) = (tg / (8 * reps) as f64, tm / (8 * reps) as f64);
                eprintln!(
                    "c {c} co {co} {hw}x{hw} k{kk} s{s} {mode}: grid {:.3} ms, product {:.3} ms {:.0} GF/s, all {:.0} GF/s",
                    tg * 1e3,
                    tm * 1e3,
                    flops / tm / 1e9,
                    flops / (tm + tg) / 1e9
                );
            }
        }
    }

    /// A pointwise convolution with its relu stored by the kernel against
    /// a pass over each finished block as the relu's was (a clamp to [0,
    /// inf), which the kernel does not take, in its place), calls
    /// interleaved, median of each: `cargo test --release -p pt2kit
    /// --features exec --lib relu_store_speed -- --ignored --nocapture`
    /// (`THREADS`, 1 by default).
    #[test]
    #[ignore]
    pub fn relu_store_speed() {
        use sgemm::{EpiOp, EpiSrc, EpiStep};
        let threads: usize = std::env::var("THREADS")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(1);
        for &(c, co, hw) in &[
            (16usize, 72usize, 56usize),
            (16, 16, 56),
            (24, 88, 28),
            (64, 256, 56),
            (128, 512, 28),
        ] {
            let g = Windows::new(&[hw, hw], &[1, 1], &[1, 1], &[0, 0], &[1, 1]).unwrap();
            let xs: Vec<f32> = (0..c * hw * hw)
                .map(|i| (i % 7) as f32 * 0.1 - 0.3)
                .collect();
            let ws: Vec<f32> = (0..co * c).map(|i| (i % 5) as f32 * 0.1 - 0.2).collect();
            let grid = Grid::new(&xs, 1, c, &g);
            let panels = grid.panels(1, co, (hw, hw));
            let relu = [EpiStep {
                op: EpiOp::Relu,
                b: EpiSrc::Const(0.0),
            }];
            let relu_pass = [EpiStep {
                op: EpiOp::Clamp(0.0, f32::INFINITY),
                b: EpiSrc::Const(0.0),
            }];
            let pa = sgemm::pack_a(&sgemm::View::row_major(&ws, co, c));
            let mut outs = [vec![0f32; co * hw * hw], vec![0f32; co * hw * hw]];
            let mut t: [Vec<f64>; 2] = [Vec::new(), Vec::new()];
            for round in 0..400 {
                for mode in [round % 2, 1 - round % 2] {
                    let steps: &[EpiStep] = if mode == 0 { &relu } else { &relu_pass };
                    let e = sgemm::Epilogue {
                        steps,
                        inputs: &[],
                        map: None,
                    };
                    let t0 = std::time::Instant::now();
                    unsafe {
                        sgemm::gemm_direct(
                            sgemm::Lhs::packed(&pa),
                            grid.src(&xs),
                            &grid.offs,
                            &panels,
                            sgemm::as_uninit(&mut outs[mode]),
                            hw * hw,
                            None,
                            false,
                            Some(&e),
                            threads,
                        )
                    };
                    t[mode].push(t0.elapsed().as_secs_f64());
                }
            }
            assert!(outs[0] == outs[1], "the same bits");
            let med = |v: &mut Vec<f64>| {
                v.sort_by(f64::total_cmp);
                v[v.len() / 2] * 1e6
            };
            let (a, b) = (med(&mut t[0]), med(&mut t[1]));
            eprintln!(
                "[{co}, {c}] over {hw}x{hw}: relu stored {a:.1} us, a pass {b:.1} us ({:.3}x)",
                a / b
            );
        }
    }

    /// The direct kernel reading its grid from 4 KiB pages against the
    /// same grid on a transparent huge page (`madvise`), calls
    /// interleaved, one thread, median of each: how much of a layer's
    /// time is the TLB (a tile's B rows lie a plane or a channel's phases
    /// apart, one page each). On the AVX2 VM: ResNet's stride-2 3x3s
    /// 0.92-0.99x, the `[256, 64]` 1x1 over 56x56 0.86-0.88x, the 3x3 of
    /// stride 1 1.0x. The tools' allocator keeps huge pages off (`no_thp`).
    /// `cargo test --release -p pt2kit --features exec --lib
    /// huge_pages_speed -- --ignored --nocapture`.
    #[test]
    #[ignore]
    pub fn huge_pages_speed() {
        for &(c, co, hw, kk, st) in &[
            (128usize, 128usize, 56usize, 3usize, 2usize),
            (256, 256, 28, 3, 2),
            (64, 64, 56, 3, 1),
            (64, 256, 56, 1, 1),
        ] {
            let pad = kk / 2;
            let g = Windows::new(&[hw, hw], &[kk, kk], &[st, st], &[pad, pad], &[1, 1]).unwrap();
            let [_, oh, ow] = g.output;
            let xs: Vec<f32> = (0..c * hw * hw)
                .map(|i| (i % 7) as f32 * 0.1 - 0.3)
                .collect();
            let k = c * kk * kk;
            let ws: Vec<f32> = (0..co * k).map(|i| (i % 5) as f32 * 0.1 - 0.2).collect();
            let grid = Grid::build(&xs, 1, c, &g, false);
            let panels = grid.panels(1, co, (oh, ow));
            let src = grid.src(&xs);
            let n = src.len();
            let layout =
                std::alloc::Layout::from_size_align((n * 4).next_multiple_of(2 << 20), 2 << 20)
                    .unwrap();
            // SAFETY: a fresh allocation of the layout's size (checked not
            // null), n floats of it used
            let huge: &mut [f32] = unsafe {
                let p = std::alloc::alloc(layout);
                assert!(!p.is_null());
                libc::madvise(p.cast(), layout.size(), libc::MADV_HUGEPAGE);
                std::slice::from_raw_parts_mut(p.cast::<f32>(), n)
            };
            huge.copy_from_slice(src);
            let pa = sgemm::pack_a(&sgemm::View::row_major(&ws, co, k));
            let mut outs = [vec![0f32; co * oh * ow], vec![0f32; co * oh * ow]];
            let mut t: [Vec<f64>; 2] = [Vec::new(), Vec::new()];
            for round in 0..60 {
                for mode in [round % 2, 1 - round % 2] {
                    let s: &[f32] = if mode == 0 { src } else { &huge[..] };
                    let t0 = std::time::Instant::now();
                    unsafe {
                        sgemm::gemm_direct(
                            sgemm::Lhs::packed(&pa),
                            s,
                            &grid.offs,
                            &panels,
                            sgemm::as_uninit(&mut outs[mode]),
                            oh * ow,
                            None,
                            false,
                            None,
                            1,
                        )
                    };
                    t[mode].push(t0.elapsed().as_secs_f64());
                }
            }
            assert!(outs[0] == outs[1]);
            let med = |v: &mut Vec<f64>| {
                v.sort_by(f64::total_cmp);
                v[v.len() / 2] * 1e6
            };
            let (a, b) = (med(&mut t[0]), med(&mut t[1]));
            eprintln!("[{co}, {c}] {kk}x{kk} s{st} over {hw}x{hw}: grid {:.1} MB, 4K pages {a:.1} us, huge {b:.1} us ({:.3}x)", n as f64 * 4e-6, b / a);
            // SAFETY: allocated above with this layout, no longer borrowed
            unsafe { std::alloc::dealloc(huge.as_mut_ptr().cast(), layout) };
        }
    }

    /// A residual block's last convolution at batch `BATCH` (8) on 2
    /// threads, its output fresh with the add and relu on each block
    /// against written over the residual (the add as it is stored), the
    /// caches flushed before each run (as in a model, the residual comes
    /// from memory): `cargo test --release -p pt2kit --features exec --lib
    /// residual_speed -- --ignored --nocapture`.
    #[test]
    #[ignore]
    pub fn residual_speed() {
        use sgemm::{EpiOp, EpiSrc, EpiStep};
        let b: usize = std::env::var("BATCH")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(8);
        let mut flush = vec![0u8; 96 << 20];
        for &(c, co, hw, kk) in &[
            (64usize, 256usize, 56usize, 1usize),
            (128, 512, 28, 1),
            (64, 64, 56, 3),
            (128, 128, 28, 3),
        ] {
            let pad = kk / 2;
            let g = Windows::new(&[hw, hw], &[kk, kk], &[1, 1], &[pad, pad], &[1, 1]).unwrap();
            let xs: Vec<f32> = (0..b * c * hw * hw).map(|i| (i % 7) as f32 * 0.1).collect();
            let k = c * kk * kk;
            let ws: Vec<f32> = (0..co * k).map(|i| (i % 5) as f32 * 0.1 - 0.2).collect();
            let r: Vec<f32> = (0..b * co * hw * hw).map(|i| (i % 3) as f32).collect();
            let grid = Grid::new(&xs, b, c, &g);
            let panels = grid.panels(b, co, (hw, hw));
            let add = [
                EpiStep {
                    op: EpiOp::Add(1.0),
                    b: EpiSrc::Input(0),
                },
                EpiStep {
                    op: EpiOp::Relu,
                    b: EpiSrc::Const(0.0),
                },
            ];
            let (mut fresh, mut over) = (vec![0f32; r.len()], r.clone());
            let mut t = [0f64; 2];
            let reps = 10;
            for round in 0..2 * reps {
                for mode in [round % 2, 1 - round % 2] {
                    over.copy_from_slice(&r);
                    flush.iter_mut().for_each(|v| *v = v.wrapping_add(1));
                    let inputs = [&r[..]];
                    let t0 = std::time::Instant::now();
                    unsafe {
                        if mode == 0 {
                            let e = sgemm::Epilogue {
                                steps: &add,
                                inputs: &inputs,
                                map: None,
                            };
                            sgemm::gemm_direct(
                                sgemm::Lhs::rows(&ws, co, k),
                                grid.src(&xs),
                                &grid.offs,
                                &panels,
                                sgemm::as_uninit(&mut fresh),
                                hw * hw,
                                None,
                                false,
                                Some(&e),
                                2,
                            )
                        } else {
                            let e = sgemm::Epilogue {
                                steps: &add[1..],
                                inputs: &[],
                                map: None,
                            };
                            sgemm::gemm_direct(
                                sgemm::Lhs::rows(&ws, co, k),
                                grid.src(&xs),
                                &grid.offs,
                                &panels,
                                sgemm::as_uninit(&mut over),
                                hw * hw,
                                None,
                                true,
                                Some(&e),
                                2,
                            )
                        }
                    };
                    t[mode] += t0.elapsed().as_secs_f64();
                    if mode == 1 {
                        assert!(fresh == over, "the same bits");
                    }
                }
            }
            eprintln!(
                "c {c} co {co} {hw}x{hw} k{kk} b{b}: fresh {:.3} ms, over the residual {:.3} ms",
                t[0] * 1e3 / (2 * reps) as f64,
                t[1] * 1e3 / (2 * reps) as f64
            );
        }
    }
}
