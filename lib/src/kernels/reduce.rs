//! Reduction loops over host rows: sums along a row, and sums down
//! columns of rows stored channels-last, both in one order of additions
//! ([`LANES`] partial sums, then [`combine`]), so a sum over an image's
//! pixels has the same bits whichever layout its tensor is in, on every
//! instruction set: the executor's fused and unfused runs, and a planar
//! and a channels-last run, agree to the bit.

/// The partial sums of a row: element `p` is added into partial `p %
/// LANES`, in order, each partial starting from +0.0.
pub const LANES: usize = 32;

/// The partial sums folded in halves (`s[l] += s[l + half]` for half =
/// 16, 8, 4, 2, 1): the order two sixteen-lane registers or four
/// eight-lane ones reduce in.
#[inline(always)]
pub fn combine(mut s: [f32; LANES]) -> f32 {
    let mut half = LANES / 2;
    while half > 0 {
        for l in 0..half {
            s[l] += s[l + half];
        }
        half /= 2;
    }
    s[0]
}

super::vmath::multiversion! {
    /// A row's sum in [`LANES`] partial sums and [`combine`]d (a global
    /// average pool's row of 49 or 196 floats: two sixteen-lane or four
    /// eight-lane adds a chunk, which the compiler makes of the lanes'
    /// loop, each lane's additions in its own order).
    pub fn row_sum(xs: &[f32]) -> f32 {
        let mut acc = [0f32; LANES];
        let mut chunks = xs.chunks_exact(LANES);
        for c in &mut chunks {
            for (a, v) in acc.iter_mut().zip(c) {
                *a += v;
            }
        }
        // (a lane without an element stays +0.0, as the zeros a masked
        // load would add leave it)
        for (a, v) in acc.iter_mut().zip(chunks.remainder()) {
            *a += v;
        }
        combine(acc)
    }
}

super::vmath::multiversion! {
    /// `out[j]` = the sum over `n` rows `p` of `xs[p * stride + j]` (a
    /// block of channels over an image's pixels, stored channels-last),
    /// each in [`row_sum`]'s order: `lanes` (`LANES * out.len()` floats,
    /// any values) holds the partial sums.
    pub fn column_sums(xs: &[f32], stride: usize, n: usize, out: &mut [f32], lanes: &mut [f32]) {
        let len = out.len();
        let lanes = &mut lanes[..LANES * len];
        lanes.fill(0.0);
        for p in 0..n {
            let part = &mut lanes[p % LANES * len..][..len];
            for (a, v) in part.iter_mut().zip(&xs[p * stride..][..len]) {
                *a += v;
            }
        }
        for (j, o) in out.iter_mut().enumerate() {
            // (a loop: `std::array::from_fn` stayed out of line here, see `simd`)
            let mut s = [0f32; LANES];
            for (l, v) in s.iter_mut().enumerate() {
                *v = lanes[l * len + j];
            }
            *o = combine(s);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The order of additions written out plainly: each lane's elements
    /// in turn, then the halves folded.
    fn reference(xs: &[f32]) -> f32 {
        let mut acc = [0f32; LANES];
        for (p, v) in xs.iter().enumerate() {
            acc[p % LANES] += v;
        }
        combine(acc)
    }

    #[test]
    fn row_and_column_sums_add_in_one_order() {
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        let mut next = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            // values of very different sizes, so that any other order of
            // additions shows in the bits
            let m = (seed >> 40) as f32 / (1u64 << 24) as f32 - 0.5;
            m * [1e-3f32, 1.0, 1e4][(seed % 3) as usize]
        };
        for n in [
            0usize, 1, 7, 15, 16, 17, 31, 32, 33, 49, 63, 64, 65, 196, 1000,
        ] {
            for c in [1usize, 3, 16, 24, 64] {
                // channels-last: pixel p's channels at p * stride
                let stride = c + 2;
                let xs: Vec<f32> = (0..n * stride).map(|_| next()).collect();
                let mut out = vec![f32::NAN; c];
                let mut lanes = vec![f32::NAN; LANES * c];
                column_sums(&xs, stride, n, &mut out, &mut lanes);
                for (j, o) in out.iter().enumerate() {
                    let row: Vec<f32> = (0..n).map(|p| xs[p * stride + j]).collect();
                    let want = reference(&row);
                    assert_eq!(o.to_bits(), want.to_bits(), "n {n} c {c} channel {j}");
                    assert_eq!(row_sum(&row).to_bits(), want.to_bits(), "n {n} row");
                }
            }
        }
        // a lane of -0.0 elements stays +0.0, as a masked load leaves it
        assert_eq!(row_sum(&[-0.0; 5]).to_bits(), 0f32.to_bits());
    }
}
