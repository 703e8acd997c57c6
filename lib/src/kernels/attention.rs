//! Scaled dot-product attention fused on the CPU, in float32: for each
//! (batch, head) and run of query rows, the scores `q k^T` by the packed
//! product ([`sgemm`]) into a buffer that stays in L2, each row scaled,
//! masked and normalised in place, then `p v` by the same product into the
//! output. No `[.., L, S]` tensor of scores, mask or probabilities is
//! made, and the element-wise passes the decomposition runs over them (a
//! scale, a mask's add, the softmax and the checks for rows with every
//! key masked) are one pass over a row in L1.
//!
//! What it computes is torch's math attention with `_safe_softmax`: a row
//! whose scores are all `-inf` (every key masked) gives zeros, a NaN
//! anywhere in a row gives NaN. Tested against [`reference`].

use super::lowp;
use super::sgemm::{self, Init, Lhs, View};
use std::mem::MaybeUninit;

/// A strided operand: element (bh, row, column) at `data[offs[bh] + row *
/// rs + column * cs]` (`offs` one per flattened batch-and-head index:
/// broadcast batch dims and grouped-query heads are offsets that repeat).
#[derive(Clone, Debug)]
pub struct Operand<'a> {
    pub data: &'a [f32],
    pub offs: Vec<usize>,
    pub rs: usize,
    pub cs: usize,
}

impl Operand<'_> {
    /// Whether every element of `bhs` matrices of `rows x cols` lies
    /// inside `data`.
    fn fits(&self, bhs: usize, rows: usize, cols: usize) -> bool {
        if bhs == 0 || rows == 0 || cols == 0 {
            return true;
        }
        self.offs.len() >= bhs
            && self.offs[..bhs].iter().all(|&o| {
                (rows - 1)
                    .checked_mul(self.rs)
                    .zip((cols - 1).checked_mul(self.cs))
                    .and_then(|(r, c)| r.checked_add(c)?.checked_add(o))
                    .is_some_and(|last| last < self.data.len())
            })
    }

    fn view(&self, bh: usize, r0: usize, rows: usize, cols: usize) -> View<'_> {
        View {
            data: self.data,
            off: self.offs[bh] + r0 * self.rs,
            rows,
            cols,
            rs: self.rs,
            cs: self.cs,
        }
    }

    /// The transpose of `bh`'s matrix (`rows x cols` of it).
    fn transposed(&self, bh: usize, rows: usize, cols: usize) -> View<'_> {
        View {
            data: self.data,
            off: self.offs[bh],
            rows: cols,
            cols: rows,
            rs: self.cs,
            cs: self.rs,
        }
    }
}

/// The operands of one attention: query, key, value (`[bh][l][e]`,
/// `[bh][s][e]`, `[bh][s][ev]`) and a mask added to the scores
/// (`[bh][l][s]`, `-inf` for a masked key).
#[derive(Clone, Debug)]
pub struct Inputs<'a> {
    pub q: Operand<'a>,
    pub k: Operand<'a>,
    pub v: Operand<'a>,
    pub mask: Option<Operand<'a>>,
}

/// The sizes of one attention: `bh` (batch and heads flattened) of `l`
/// queries against `s` keys, `e` wide (queries and keys), values `ev`
/// wide; `scale` on the scores, `causal` (query `i` sees keys `j <= i`).
/// The output is laid out `[bh / heads][l][heads][ev]`: with `heads` the
/// count of heads, as torch's CPU kernel lays its output out (`[b, l, h,
/// e]` seen as `[b, h, l, e]`), so that the transpose back to `[b, l, h *
/// e]` that follows in a transformer is a view, not a copy; with 1,
/// `[bh][l][ev]`.
#[derive(Clone, Copy, Debug)]
pub struct Shape {
    pub bh: usize,
    pub heads: usize,
    pub l: usize,
    pub s: usize,
    pub e: usize,
    pub ev: usize,
    pub scale: f32,
    pub causal: bool,
}

/// What the two products compute in: float32 ([`sgemm`]), or bfloat16
/// operands summed in float32 by a [`lowp`] kernel (`--precision bf16`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Products {
    F32,
    Bf16(lowp::Kernel),
}

/// Query rows a task takes at most: its scores (`rows x s`) stay in L2.
const ROWS: usize = 128;

/// `softmax(q k^T * scale + mask) v` into `out` (`[bh][l][ev]`, written
/// whole), `mask` added to the scores (`-inf` for a masked key), on up to
/// `threads` threads. Panics where an operand is shorter than `shape`
/// says, or without the product's instruction set ([`sgemm::available`]).
pub fn attention(
    shape: Shape,
    inputs: &Inputs,
    out: &mut [MaybeUninit<f32>],
    products: Products,
    threads: usize,
) {
    let Shape {
        bh, l, s, e, ev, ..
    } = shape;
    let Inputs { q, k, v, mask } = inputs;
    match products {
        Products::F32 => assert!(sgemm::available(), "attention: no packed product here"),
        Products::Bf16(k) => assert!(lowp::runs(k), "attention: this CPU lacks {}", k.name()),
    }
    assert!(
        q.fits(bh, l, e) && k.fits(bh, s, e) && v.fits(bh, s, ev),
        "attention: an operand is shorter than its shape"
    );
    assert!(
        mask.as_ref().is_none_or(|m| m.fits(bh, l, s)),
        "attention: the mask is shorter than the scores"
    );
    assert!(out.len() >= bh * l * ev, "attention: output too short");
    if bh * l * ev == 0 {
        return;
    }
    // runs of query rows: at least one a thread where the heads are
    // fewer, at most ROWS
    let per = l.div_ceil(threads.div_ceil(bh).max(1)).clamp(1, ROWS);
    let chunks = l.div_ceil(per);
    let tasks = bh * chunks;
    // (the output's address: each task writes its rows of it)
    let base = out.as_mut_ptr() as usize;
    let heads = shape.heads.max(1);
    let run = |t: usize| {
        let (h, c) = (t / chunks, t % chunks);
        let r0 = c * per;
        let rows = per.min(l - r0);
        // where row `r` of head h starts in the output
        let at = |r: usize| ((h / heads * l + r) * heads + h % heads) * ev;
        let base = base as *mut MaybeUninit<f32>;
        if heads == 1 {
            // SAFETY: rows r0.. of head h are this task's alone, one run
            // inside out (checked above)
            let dst = unsafe { std::slice::from_raw_parts_mut(base.add(at(r0)), rows * ev) };
            task(shape, inputs, products, h, r0, rows, dst);
            return;
        }
        let mut res = sgemm::uninit(rows * ev);
        task(shape, inputs, products, h, r0, rows, &mut res);
        for (i, row) in res.chunks_exact(ev).enumerate() {
            // SAFETY: each row of head h is this task's alone, inside out
            // (bh * l * ev elements, checked above); no slice of the
            // output is made, the other tasks' rows lying between
            unsafe { std::ptr::copy_nonoverlapping(row.as_ptr(), base.add(at(r0 + i)), ev) };
        }
    };
    if threads <= 1 || tasks == 1 {
        (0..tasks).for_each(run);
    } else {
        super::threads::par_for(tasks, run);
    }
}

/// Rows `r0..r0 + rows` of head `h` into `dst` (`rows x ev`).
fn task(
    shape: Shape,
    inputs: &Inputs,
    products: Products,
    h: usize,
    r0: usize,
    rows: usize,
    dst: &mut [MaybeUninit<f32>],
) {
    let Shape {
        s,
        e,
        ev,
        scale,
        causal,
        ..
    } = shape;
    let Inputs { q, k, v, mask } = inputs;
    let mut scores = sgemm::uninit(rows * s);
    if s > 0 {
        let qv = q.view(h, r0, rows, e);
        let kt = k.transposed(h, s, e);
        match products {
            Products::F32 => {
                let kt = sgemm::pack_b(&kt);
                // a query with neither stride 1 (no product reads it in
                // place): its rows copied
                let copy: Vec<f32>;
                let lhs = match Lhs::view(&qv) {
                    Some(a) => a,
                    None => {
                        copy = (0..rows * e)
                            .map(|i| qv.data[qv.off + i / e * qv.rs + i % e * qv.cs])
                            .collect();
                        Lhs::rows(&copy, rows, e)
                    }
                };
                sgemm::gemm_lhs(lhs, &kt, &mut scores, s, Init::Zero, None, 1);
            }
            Products::Bf16(kernel) => {
                let a = lowp::round_a(qv.data, qv.off, rows, e, qv.rs, qv.cs);
                let b = lowp::pack_b(kt.data, kt.off, e, s, kt.rs, kt.cs);
                lowp::gemm(&a, &b, &mut scores, s, lowp::Bias::None, 1, kernel, None);
            }
        }
    }
    // SAFETY: the product wrote every score (none where s is 0)
    let mut scores = unsafe { sgemm::assume_init(scores) };
    let mut row = vec![0f32; s];
    for (i, sc) in scores.chunks_exact_mut(s.max(1)).take(rows).enumerate() {
        let qi = r0 + i;
        match mask {
            // a row of the mask in order, or one value for the row
            // (broadcast along the keys), or any strides
            Some(m) if m.cs == 1 => {
                let mr = &m.data[m.offs[h] + qi * m.rs..][..s];
                for ((x, &p), &b) in row.iter_mut().zip(sc.iter()).zip(mr) {
                    *x = p * scale + b;
                }
            }
            Some(m) if m.cs == 0 => {
                let b = m.data[m.offs[h] + qi * m.rs];
                for (x, &p) in row.iter_mut().zip(sc.iter()) {
                    *x = p * scale + b;
                }
            }
            Some(m) => {
                for (j, (x, &p)) in row.iter_mut().zip(sc.iter()).enumerate() {
                    *x = p * scale + m.data[m.offs[h] + qi * m.rs + j * m.cs];
                }
            }
            None => {
                for (x, &p) in row.iter_mut().zip(sc.iter()) {
                    *x = p * scale;
                }
            }
        }
        if causal && qi + 1 < s {
            row[qi + 1..].fill(f32::NEG_INFINITY);
        }
        if row.iter().all(|&x| x == f32::NEG_INFINITY) {
            // every key masked: torch's _safe_softmax gives zeros
            sc.fill(0.0);
        } else {
            super::vmath::softmax_row(&row, sgemm::as_uninit(sc), false);
        }
    }
    if s == 0 {
        // no key: a sum over nothing
        dst.fill(MaybeUninit::new(0.0));
        return;
    }
    let vv = v.view(h, 0, s, ev);
    match products {
        Products::F32 => {
            let vp = sgemm::pack_b(&vv);
            sgemm::gemm_lhs(
                Lhs::rows(&scores, rows, s),
                &vp,
                dst,
                ev,
                Init::Zero,
                None,
                1,
            );
        }
        Products::Bf16(kernel) => {
            let a = lowp::round_a(&scores, 0, rows, s, s, 1);
            let b = lowp::pack_b(vv.data, vv.off, s, ev, vv.rs, vv.cs);
            lowp::gemm(&a, &b, dst, ev, lowp::Bias::None, 1, kernel, None);
        }
    }
}

/// The reference: [`attention`] by its definition, summed in float64
/// (`[bh][l][ev]`, whatever `heads`). What the kernel is tested against.
pub fn reference(shape: Shape, inputs: &Inputs) -> Vec<f32> {
    let Inputs { q, k, v, mask } = inputs;
    let Shape {
        bh,
        l,
        s,
        e,
        ev,
        scale,
        causal,
        ..
    } = shape;
    let at = |o: &Operand, h: usize, r: usize, c: usize| o.data[o.offs[h] + r * o.rs + c * o.cs];
    let mut out = vec![0f32; bh * l * ev];
    for h in 0..bh {
        for i in 0..l {
            let scores: Vec<f64> = (0..s)
                .map(|j| {
                    let dot: f64 = (0..e)
                        .map(|p| at(q, h, i, p) as f64 * at(k, h, j, p) as f64)
                        .sum();
                    let m = mask.as_ref().map_or(0.0, |m| at(m, h, i, j) as f64);
                    if causal && j > i {
                        f64::NEG_INFINITY
                    } else {
                        dot * scale as f64 + m
                    }
                })
                .collect();
            if scores.iter().all(|&x| x == f64::NEG_INFINITY) {
                continue;
            }
            let max = scores.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
            let any_nan = scores.iter().any(|x| x.is_nan());
            let w: Vec<f64> = scores.iter().map(|&x| (x - max).exp()).collect();
            let sum: f64 = w.iter().sum();
            for c in 0..ev {
                let o: f64 = (0..s).map(|j| w[j] / sum * at(v, h, j, c) as f64).sum();
                out[(h * l + i) * ev + c] = if any_nan { f32::NAN } else { o as f32 };
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A small deterministic generator: `next(n)` in `0..n`.
    struct Draws(u64);
    impl Draws {
        fn next(&mut self, n: usize) -> usize {
            self.0 = self
                .0
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((self.0 >> 33) % n.max(1) as u64) as usize
        }
        fn value(&mut self) -> f32 {
            (self.next(2001) as f32 - 1000.0) / 1000.0
        }
    }

    /// A `bh` stack of `rows x cols` matrices laid out one of four ways
    /// (rows in order, columns in order, padded rows, neither stride 1),
    /// every other head sharing its neighbour's matrix where `shared`.
    fn operand(
        d: &mut Draws,
        bh: usize,
        rows: usize,
        cols: usize,
        shared: bool,
    ) -> (Vec<f32>, Vec<usize>, usize, usize) {
        let (rs, cs) = match d.next(4) {
            0 => (cols, 1),
            1 => (1, rows),
            2 => (cols + 3, 1),
            _ => (2 * cols, 2),
        };
        let span = (rows.max(1) - 1) * rs + (cols.max(1) - 1) * cs + 1;
        let data: Vec<f32> = (0..span * bh + 7).map(|_| d.value()).collect();
        let offs = (0..bh)
            .map(|h| 5.min(data.len() - span * bh) + span * if shared { h / 2 * 2 } else { h })
            .collect();
        (data, offs, rs, cs)
    }

    fn check(products: Products, tolerance: f32, cases: usize) {
        let mut d = Draws(0xa77e);
        for case in 0..cases {
            let (bh, l, s) = (1 + d.next(4), 1 + d.next(70), d.next(70));
            let (e, ev) = (1 + d.next(40), 1 + d.next(40));
            let scale = [0.125, 1.0 / (e as f32).sqrt(), 0.9][d.next(3)];
            let causal = d.next(4) == 0;
            let (mut qd, qo, qrs, qcs) = operand(&mut d, bh, l, e, false);
            if d.next(6) == 0 {
                let at = d.next(qd.len());
                qd[at] = f32::NAN;
            }
            let (kd, ko, krs, kcs) = operand(&mut d, bh, s, e, true);
            let (vd, vo, vrs, vcs) = operand(&mut d, bh, s, ev, true);
            // masks: none, rows in order, one value a row, strided; some
            // keys and whole rows at -inf
            let kind = d.next(4);
            let mcs = [0, 1, 0, 2][kind];
            let mrs = (s.max(1)) * mcs.max(1);
            let mut md: Vec<f32> = (0..bh * l * mrs + 1).map(|_| d.value()).collect();
            for x in md.iter_mut() {
                if d.next(5) == 0 {
                    *x = f32::NEG_INFINITY;
                }
            }
            if l > 1 && mcs > 0 {
                let row = d.next(l);
                for j in 0..s {
                    md[row * mrs + j * mcs] = f32::NEG_INFINITY;
                }
            }
            let q = Operand {
                data: &qd,
                offs: qo,
                rs: qrs,
                cs: qcs,
            };
            let k = Operand {
                data: &kd,
                offs: ko,
                rs: krs,
                cs: kcs,
            };
            let v = Operand {
                data: &vd,
                offs: vo,
                rs: vrs,
                cs: vcs,
            };
            let m = Operand {
                data: &md,
                offs: (0..bh).map(|h| h * l * mrs).collect(),
                rs: mrs,
                cs: mcs,
            };
            let mask = (kind > 0).then_some(m);
            let heads = [1, bh][d.next(2)];
            let shape = Shape {
                bh,
                heads,
                l,
                s,
                e,
                ev,
                scale,
                causal,
            };
            let want = if let Products::Bf16(_) = products {
                // the operands as the kernel rounds them
                let r = |o: &Operand| {
                    o.data
                        .iter()
                        .map(|x| lowp::round_bf16(*x))
                        .collect::<Vec<f32>>()
                };
                let (qr, kr, vr) = (r(&q), r(&k), r(&v));
                let rounded = Inputs {
                    q: Operand {
                        data: &qr,
                        ..q.clone()
                    },
                    k: Operand {
                        data: &kr,
                        ..k.clone()
                    },
                    v: Operand {
                        data: &vr,
                        ..v.clone()
                    },
                    mask: mask.clone(),
                };
                reference(shape, &rounded)
            } else {
                let exact = Inputs {
                    q: q.clone(),
                    k: k.clone(),
                    v: v.clone(),
                    mask: mask.clone(),
                };
                reference(shape, &exact)
            };
            let inputs = Inputs { q, k, v, mask };
            let mut out = sgemm::uninit(bh * l * ev);
            attention(shape, &inputs, &mut out, products, 1 + case % 2);
            let got = unsafe { sgemm::assume_init(out) };
            for (i, w) in want.iter().enumerate() {
                // element (h, r, c) of the reference, where the kernel
                // laid it out
                let (h, r, c) = (i / (l * ev), i / ev % l, i % ev);
                let g = &got[((h / heads * l + r) * heads + h % heads) * ev + c];
                let ok = (g.is_nan() && w.is_nan()) || (g - w).abs() <= tolerance * (1.0 + w.abs());
                assert!(
                    ok,
                    "case {case} {shape:?} mask {kind}: element {i} {g} against {w}"
                );
            }
        }
    }

    #[test]
    fn float32_matches_the_reference() {
        if sgemm::available() {
            check(Products::F32, 1e-5, 300);
        }
    }

    #[test]
    fn bfloat16_matches_the_reference_of_rounded_operands() {
        if let Some(k) = lowp::kernel() {
            // (the probabilities are rounded too: a relative 2^-8)
            check(Products::Bf16(k), 1e-2, 200);
        }
    }
}
