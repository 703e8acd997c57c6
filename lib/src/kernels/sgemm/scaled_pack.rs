//! Packed weights with their input channels scaled, for a convolution
//! whose input the plan folds a per-channel scale out of
//! (the executor's `fuse::Plan::scaled`): a copy of the packed weight
//! (packed once and kept) into a buffer each thread reuses.

use super::*;

thread_local! {
    /// The buffer of this thread's last scaled copy of a packed weight,
    /// returned by [`PackedA::recycle`] / [`PackedB::recycle`]: a fresh
    /// one each call cost MobileNetV3's 14x14 projections 2-5 us each
    /// (its pages faulted in anew), as much as the scale folded saves.
    static SCALED: std::cell::RefCell<Vec<f32>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// `src` in steps of `step` floats, step `i` times `s[i % k / taps]`,
/// into this thread's recycled buffer.
fn scaled_steps(src: &[f32], step: usize, k: usize, s: &[f32], taps: usize) -> Vec<f32> {
    let mut data = SCALED.with(|v| std::mem::take(&mut *v.borrow_mut()));
    // (its floats written over below: zeroed only where it grows)
    data.resize(src.len(), 0.0);
    // (counters, not a division a step: 960 steps of a [40, 240] weight
    // took microseconds that way)
    let (mut p, mut tap, mut ch) = (0, 0, 0);
    for (chunk, from) in data.chunks_exact_mut(step).zip(src.chunks_exact(step)) {
        let f = s.get(ch).copied().unwrap_or(1.0);
        chunk.iter_mut().zip(from).for_each(|(v, x)| *v = x * f);
        p += 1;
        tap += 1;
        if tap == taps {
            tap = 0;
            ch += 1;
        }
        if p == k {
            (p, tap, ch) = (0, 0, 0);
        }
    }
    data
}

/// Keeps `data` as this thread's buffer for the next scaled copy.
fn recycle(data: Vec<f32>) {
    SCALED.with(|v| {
        let mut v = v.borrow_mut();
        if data.capacity() > v.capacity() {
            *v = data;
        }
    });
}

impl PackedA {
    /// A copy with column `p` times `s[p / taps]` (a convolution's
    /// weight, `[co, c * taps]`, with its input channels scaled); give it
    /// back with [`PackedA::recycle`].
    pub fn scaled_columns(&self, s: &[f32], taps: usize) -> PackedA {
        let data = scaled_steps(&self.data, MR, self.k, s, taps);
        PackedA { data, ..*self }
    }

    /// Its buffer kept for this thread's next scaled copy.
    pub fn recycle(self) {
        recycle(self.data)
    }
}

impl PackedB {
    /// A copy with row `p` times `s[p / taps]` (a convolution's weight
    /// transposed, `[c * taps, co]`, with its input channels scaled); give
    /// it back with [`PackedB::recycle`].
    pub fn scaled_rows(&self, s: &[f32], taps: usize) -> PackedB {
        let data = scaled_steps(&self.data, HALF, self.k, s, taps);
        PackedB { data, ..*self }
    }

    /// Its buffer kept for this thread's next scaled copy.
    pub fn recycle(self) {
        recycle(self.data)
    }
}
