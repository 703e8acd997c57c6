//! Products summed over taps, pixels on the rows: a convolution over a
//! small plane with the output channels on the lanes (see [`gemm_taps`]).

use super::*;

/// Bytes of A a block of row panels of [`gemm_taps`] reads, at most
/// (a quarter of L2) unless one panel reads more.
const A_BLOCK: usize = 256 << 10;

/// Rows of C that one kernel call makes, and where A has them: row `i`
/// (of `rows`) of the panel is C's row `c_row + i`, and its element `p` of
/// tap `t` lies at `a[at + tap_offs[t] + i * lda + p]`.
#[derive(Clone, Copy, Debug)]
pub struct RowPanel {
    pub at: usize,
    pub c_row: usize,
    pub rows: usize,
}

/// `C = sum over taps t of A_t B_t (+ bias per column)`: a convolution as
/// one product per tap, its pixels the rows of C and its output channels
/// the columns (on the lanes, every lane used whatever the plane's size:
/// a 7x7 plane fills 49 of the 64 lanes of two panels of pixels). `A_t`
/// (`m x k`) is the input image in rows of channels (a padded
/// channels-last copy), each pixel's row `lda` floats after the
/// previous one of its panel, the tap's rows `tap_offs[t]` floats on; the
/// panels of rows are `rows` (an output line's pixels, [`line_rows`] at best, [`MR`] at most, of
/// them: no row spans two lines, so none is computed and dropped). `bs[t]`
/// is the tap's weight, `k x n` packed. C (`m x n`, row stride `ldc`) may be
/// uninitialised: the rows the panels name are written whole.
///
/// Blocked for the caches: blocks of row panels whose part of A fits
/// [`A_BLOCK`] (in L2 while every column panel goes through them); the
/// threads split the column panels (each reads its part of the weights
/// once a block); each micro-panel of a tap's weight (a slice of [`KC`],
/// read in order from L2) goes through all the block's row panels, the next one fetched
/// meanwhile.
///
/// Panics where the panels, taps or weights disagree or reach outside A
/// or C, or without AVX-512F or AVX2 + FMA ([`available`]).
#[allow(clippy::too_many_arguments)]
pub fn gemm_taps(
    a: &[f32],
    lda: usize,
    tap_offs: &[usize],
    rows: &[RowPanel],
    bs: &[&PackedB],
    c: &mut [std::mem::MaybeUninit<f32>],
    ldc: usize,
    bias: Option<&[f32]>,
    threads: usize,
) {
    assert!(
        available(),
        "gemm_taps: this CPU has neither AVX-512F nor AVX2 + FMA"
    );
    assert!(
        !bs.is_empty() && bs.len() == tap_offs.len(),
        "gemm_taps: one weight a tap"
    );
    let (k, n) = (bs[0].k, bs[0].n);
    assert!(
        bs.iter().all(|b| b.k == k && b.n == n) && k > 0,
        "gemm_taps: the taps' weights differ in shape"
    );
    assert!(ldc >= n, "gemm_taps: C's rows shorter than n");
    assert!(
        bias.is_none_or(|b| b.len() >= n),
        "gemm_taps: a bias per column"
    );
    let reach = tap_offs.iter().max().copied().unwrap_or(0);
    assert!(
        rows.iter().all(|r| {
            r.rows > 0
                && r.rows <= MR
                && r.at + reach + (r.rows - 1) * lda + k <= a.len()
                && (r.c_row + r.rows - 1) * ldc + n <= c.len()
        }),
        "gemm_taps: a panel of rows reaches outside A or C"
    );
    let np = n.div_ceil(NR);
    let threads = if rows.len() * MR * n * k * bs.len() < PARALLEL_MIN_MACS {
        1
    } else {
        threads.clamp(1, np)
    };
    let cptr = SendPtr(c.as_mut_ptr().cast::<f32>());
    // blocks of row panels whose part of A stays in L2 while every
    // column panel of a thread goes through it (ResNet's 14x14 stage at
    // batch 8 read its 2 MB of A per tap and panel otherwise)
    let mut blocks = vec![0];
    for (i, r) in rows.iter().enumerate().skip(1) {
        let first = &rows[*blocks.last().unwrap_or(&0)];
        let span = r.at.saturating_sub(first.at) + reach + (r.rows - 1) * lda + k;
        if span * 4 > A_BLOCK {
            blocks.push(i);
        }
    }
    blocks.push(rows.len());
    let run = |cols: std::ops::Range<usize>| {
        for block in blocks.windows(2) {
            let rows = &rows[block[0]..block[1]];
            for jp in cols.clone() {
                let nr = (n - jp * NR).min(NR);
                let slices =
                    (0..bs.len()).flat_map(|t| (0..k).step_by(k_slice(k)).map(move |pc| (t, pc)));
                let mut slices = slices.peekable();
                let mut first = true;
                while let Some((t, pc)) = slices.next() {
                    let kc = k_slice(k).min(k - pc);
                    // SAFETY: jp is a panel, pc < k
                    let (bp, bh) = unsafe { bs[t].micro(jp, pc) };
                    // the next slice's micro-panel, fetched while this one runs
                    let next = slices.peek().map_or(std::ptr::null(), |&(t, pc)| {
                        // SAFETY: as above
                        unsafe { bs[t].micro(jp, pc).0 }
                    });
                    let bias = match bias {
                        Some(b) if first => BiasAt::Columns(b[jp * NR..].as_ptr()),
                        _ => BiasAt::None,
                    };
                    for (i, r) in rows.iter().enumerate() {
                        // SAFETY: A's reads and C's writes checked above; the
                        // threads write disjoint columns of C
                        unsafe {
                            kernel_for(r.rows, nr)(
                                kc,
                                a.as_ptr().add(r.at + tap_offs[t] + pc),
                                lda,
                                1,
                                bp,
                                bh,
                                cptr.at(r.c_row * ldc + jp * NR),
                                ldc,
                                r.rows,
                                nr,
                                !first,
                                bias,
                                if i == 0 { next } else { std::ptr::null() },
                            )
                        };
                    }
                    first = false;
                }
            }
        }
    };
    if threads == 1 {
        run(0..np);
        return;
    }
    crate::kernels::threads::par_for(threads, |t| run(t * np / threads..(t + 1) * np / threads));
}

#[cfg(test)]
mod speed {
    use super::*;

    /// [`gemm_taps`] on ResNet's small-plane 3x3 shapes, the weights hot:
    /// `THREADS=2 cargo test --release -p pt2kit --features exec --lib
    /// taps_speed -- --ignored --nocapture`.
    #[test]
    #[ignore]
    fn taps_speed() {
        let threads: usize = std::env::var("THREADS")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(2);
        for &(c, co, ohw, s, kk) in &[
            (512usize, 512usize, 7usize, 1usize, 3usize),
            (256, 256, 14, 1, 3),
            (256, 512, 7, 2, 3),
            (128, 256, 14, 2, 3),
            (128, 128, 28, 1, 3),
            (64, 64, 56, 1, 3),
            (64, 128, 28, 2, 3),
        ] {
            let taps = kk * kk;
            let wp = (ohw - 1) * s + kk;
            let image: Vec<f32> = (0..wp * wp * c).map(|i| (i % 7) as f32 * 0.1).collect();
            let bs: Vec<PackedB> = (0..taps)
                .map(|t| {
                    let w: Vec<f32> = (0..c * co).map(|i| ((i + t) % 5) as f32 * 0.1).collect();
                    pack_b(&View::row_major(&w, c, co))
                })
                .collect();
            let bs: Vec<&PackedB> = bs.iter().collect();
            let tap_offs: Vec<usize> = (0..taps).map(|t| ((t / kk) * wp + t % kk) * c).collect();
            let mut rows = Vec::new();
            for oy in 0..ohw {
                let parts = ohw.div_ceil(line_rows());
                for q in 0..parts {
                    let (x0, x1) = (q * ohw / parts, (q + 1) * ohw / parts);
                    rows.push(RowPanel {
                        at: (oy * s * wp + x0 * s) * c,
                        c_row: oy * ohw + x0,
                        rows: x1 - x0,
                    });
                }
            }
            let mut out = uninit(ohw * ohw * co);
            let flops = 2.0 * (ohw * ohw * co * c * taps) as f64;
            let reps = (5e9 / flops) as usize + 1;
            // the best of five rounds (the weights are hot: in the model they
            // come from memory at batch 1)
            let mut t = f64::MAX;
            for _ in 0..5 {
                let t0 = std::time::Instant::now();
                for _ in 0..reps {
                    gemm_taps(
                        &image,
                        s * c,
                        &tap_offs,
                        &rows,
                        &bs,
                        &mut out,
                        co,
                        None,
                        threads,
                    );
                }
                t = t.min(t0.elapsed().as_secs_f64() / reps as f64);
            }
            eprintln!(
                "c {c} co {co} {ohw}x{ohw} k{kk} s{s}: {:.3} ms {:.0} GF/s",
                t * 1e3,
                flops / t / 1e9
            );
        }
    }
}
