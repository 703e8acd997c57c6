//! Products of a few rows of A against a weight that lies as `[n, k]`
//! rows (a linear layer's, `B = W^T`), read in place: each element of C
//! the dot product of an A row and a W row, W streamed once, in order.
//!
//! This is the path of a mapped weight too large to keep packed
//! (the executor's `mapped::PACK_CACHE_BYTES`) at a small batch (a
//! language model's decoding, a wide MLP on one row): the packed product
//! made B's rows on every call, each a gather of one float from each of
//! `n` W rows, and spent its time there (12 x `Linear(8192, 8192)` at
//! batch 1: 2.5 s a run where ONNX Runtime, its weights in memory, took
//! 72 ms).

use super::super::simd::{first, isa_entries, F32x16};
use super::SendPtr;
use crate::kernels::{isa, Isa};

/// Rows of A at most: C's `m x 2` block of a step in `2 * m` registers
/// beside the two W vectors and an A vector.
pub const DOT_MAX_ROWS: usize = 8;

/// W rows a task (`64 x k` floats: 2 MiB at `k = 8192`), taken as the
/// threads come free.
const TASK_ROWS: usize = 64;

/// A row-major matrix by its rows: `rows` of `k` floats from `p`, `ld`
/// apart.
#[derive(Clone, Copy)]
pub struct Rows {
    pub p: *const f32,
    pub ld: usize,
    pub rows: usize,
}
// SAFETY: read only, by the tasks of one call while the caller holds the
// memory (see `dot_rows`).
unsafe impl Send for Rows {}
unsafe impl Sync for Rows {}

impl Rows {
    /// Rows `j0..` (up to `rows` of them); a method, so that closures
    /// capture the whole `Rows`, which is `Sync`, not its pointer.
    fn part(self, j0: usize, rows: usize) -> Rows {
        Rows {
            p: self.p.wrapping_add(j0 * self.ld),
            ld: self.ld,
            rows: rows.min(self.rows - j0),
        }
    }
}

/// `C[i, j] = sum_p A[i, p] W[j, p] (+ bias[j])` for `i < a.rows` (at
/// most [`DOT_MAX_ROWS`]) and `j < w.rows`, `k` steps; C's rows `ldc`
/// apart, written whole.
///
/// # Safety
/// A's and W's rows hold `k` floats each at their pointers (unaligned is
/// fine); C holds `a.rows` rows of `w.rows` floats at stride `ldc` and
/// nothing else reads or writes it meanwhile; `bias`, if any, holds
/// `w.rows` floats; AVX-512F or AVX2 + FMA is present (`super::available`).
pub unsafe fn dot_rows(a: Rows, w: Rows, k: usize, bias: Option<&[f32]>, c: *mut f32, ldc: usize) {
    assert!(
        a.rows <= DOT_MAX_ROWS,
        "dot_rows: more than {DOT_MAX_ROWS} rows"
    );
    assert!(
        bias.is_none_or(|b| b.len() >= w.rows),
        "dot_rows: a bias shorter than a row"
    );
    if a.rows == 0 || w.rows == 0 {
        return;
    }
    let c = SendPtr(c);
    let bias = bias.map(|b| b.as_ptr() as usize);
    let tasks = w.rows.div_ceil(TASK_ROWS);
    let run = |t: usize| {
        let j0 = t * TASK_ROWS;
        let part = w.part(j0, TASK_ROWS);
        let b = bias.map_or(std::ptr::null(), |b| (b as *const f32).wrapping_add(j0));
        // SAFETY: this task's W rows and C columns, inside what the caller
        // vouched for; tasks write disjoint columns
        unsafe { dot_block_for(a.rows)(a, part, k, b, c.at(j0), ldc) }
    };
    if tasks == 1 || a.rows * w.rows * k < super::PARALLEL_MIN_MACS {
        (0..tasks).for_each(run);
    } else {
        crate::kernels::threads::par_for(tasks, run);
    }
}

type DotBlock = unsafe fn(Rows, Rows, usize, *const f32, *mut f32, usize);

fn dot_block_for(m: usize) -> DotBlock {
    macro_rules! pick {
        ($($m:literal)*) => {
            match (isa(), m) {
                $((Isa::Avx512, $m) => dot_avx512::<$m>,)*
                $((_, $m) => dot_avx2::<$m>,)*
                _ => unreachable!("dot_rows: rows checked against DOT_MAX_ROWS"),
            }
        };
    }
    pick!(1 2 3 4 5 6 7 8)
}

isa_entries!(dot_avx512, dot_avx2 = dot_block[M: usize](
    a: Rows,
    w: Rows,
    k: usize,
    bias: *const f32,
    c: *mut f32,
    ldc: usize,
));

/// Floats of a W row fetched ahead of the step that reads them.
const AHEAD: usize = 512;

#[inline(always)]
fn prefetch(p: *const f32) {
    use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
    // SAFETY: a prefetch reads nothing and does not fault
    unsafe { _mm_prefetch::<_MM_HINT_T0>(p.cast()) }
}

/// The sum of a vector's lanes.
#[inline(always)]
unsafe fn lanes_sum<S: F32x16>(v: S) -> f32 {
    let mut t = [0f32; 16];
    v.store(t.as_mut_ptr());
    t.iter().sum()
}

/// [`dot_rows`] on `M` rows of A and one block of W's rows, two W rows a
/// step down `k`.
#[inline(always)]
unsafe fn dot_block<S: F32x16, const M: usize>(
    a: Rows,
    w: Rows,
    k: usize,
    bias: *const f32,
    c: *mut f32,
    ldc: usize,
) {
    let tail = first(k % 16);
    let whole = k - k % 16;
    let mut j = 0;
    while j < w.rows {
        let two = j + 1 < w.rows;
        let w0 = w.p.add(j * w.ld);
        let w1 = if two { w0.add(w.ld) } else { w0 };
        let mut acc0 = [S::zero(); M];
        let mut acc1 = [S::zero(); M];
        let mut p = 0;
        while p < whole {
            // W's lines fetched ahead (its pages, scattered, end the
            // hardware's streams every 4 KiB)
            prefetch(w0.wrapping_add(p + AHEAD));
            prefetch(w1.wrapping_add(p + AHEAD));
            let (b0, b1) = (S::load(w0.add(p)), S::load(w1.add(p)));
            for i in 0..M {
                let x = S::load(a.p.add(i * a.ld + p));
                acc0[i] = x.fma(b0, acc0[i]);
                acc1[i] = x.fma(b1, acc1[i]);
            }
            p += 16;
        }
        if whole < k {
            let (b0, b1) = (S::load_mask(tail, w0.add(p)), S::load_mask(tail, w1.add(p)));
            for i in 0..M {
                let x = S::load_mask(tail, a.p.add(i * a.ld + p));
                acc0[i] = x.fma(b0, acc0[i]);
                acc1[i] = x.fma(b1, acc1[i]);
            }
        }
        let (bias0, bias1) = if bias.is_null() {
            (0.0, 0.0)
        } else {
            (*bias.add(j), if two { *bias.add(j + 1) } else { 0.0 })
        };
        for i in 0..M {
            *c.add(i * ldc + j) = lanes_sum(acc0[i]) + bias0;
            if two {
                *c.add(i * ldc + j + 1) = lanes_sum(acc1[i]) + bias1;
            }
        }
        j += if two { 2 } else { 1 };
    }
}
