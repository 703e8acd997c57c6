//! Single-precision matrix products on the CPU, with operands packed once.
//!
//! `C = A B` (or `C += A B`) for float32, in the style of BLIS and ONNX
//! Runtime's MLAS: both operands are copied into panels that the
//! micro-kernel reads in order (`A` in panels of [`MR`] rows, `B` in panels
//! of [`NR`] columns, each k-major and zero-padded), and the kernel keeps an
//! `MR x NR` block of `C` in the 24 of AVX-512's 32 vector registers while
//! it runs down `k`. A weight is packed once and kept (see
//! [`super::Executor`]'s pack cache), so a linear layer or a convolution
//! reads its weights in the kernel's order on every run without copying
//! them again; the activations are packed per call, which costs one read of
//! them against `2 m n k` flops.
//!
//! Blocking, in BLIS's order: for each block of [`NC_PANELS`] column panels,
//! each slice of [`KC`] along `k` and each block of [`MC_PANELS`] row
//! panels (`MC x KC` of A: in L2), every `B` micro-panel (`KC x NR`, 32
//! KiB: in L1) meets every `A` micro-panel of the block. So B, which is the
//! weight streamed from memory in a linear layer, is read from memory once
//! per product. Threads split the column panels (or the row panels when
//! there are more of those).
//!
//! The kernel needs AVX-512F; [`available`] says whether this CPU has it
//! (checked at run time, so the binaries stay portable), and callers use
//! the `gemm` crate otherwise.

use std::sync::OnceLock;

/// Rows of `C` a kernel call computes.
pub const MR: usize = 12;
/// Columns of `C` a kernel call computes (two 16-lane vectors).
pub const NR: usize = 32;
/// The slice of `k` one pass of the kernel runs over.
pub const KC: usize = 256;
/// Column panels in one block (`NC = NC_PANELS * NR` columns).
pub const NC_PANELS: usize = 16;
/// Multiply-adds below which a product runs on the calling thread.
pub const PARALLEL_MIN_MACS: usize = 1 << 16;
/// Row panels in one block (`MC = MC_PANELS * MR` rows: an `MC x KC`
/// block of A, 144 KiB, stays in L2).
pub const MC_PANELS: usize = 12;

/// Whether this CPU runs the packed kernel (AVX-512F).
pub fn available() -> bool {
    static HAS: OnceLock<bool> = OnceLock::new();
    *HAS.get_or_init(|| {
        #[cfg(target_arch = "x86_64")]
        {
            std::env::var_os("PT2KIT_NO_AVX512").is_none()
                && std::arch::is_x86_feature_detected!("avx512f")
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            false
        }
    })
}

/// A matrix where it lies: element (i, j) at `data[off + i * rs + j * cs]`.
#[derive(Clone, Copy, Debug)]
pub struct View<'a> {
    pub data: &'a [f32],
    pub off: usize,
    pub rows: usize,
    pub cols: usize,
    pub rs: usize,
    pub cs: usize,
}

impl<'a> View<'a> {
    /// A row-major `rows x cols` matrix from the start of `data`.
    pub fn row_major(data: &'a [f32], rows: usize, cols: usize) -> View<'a> {
        View {
            data,
            off: 0,
            rows,
            cols,
            rs: cols,
            cs: 1,
        }
    }

    /// Whether every element it names lies inside `data`.
    fn in_bounds(&self) -> bool {
        if self.rows == 0 || self.cols == 0 {
            return true;
        }
        let last = (self.rows - 1)
            .checked_mul(self.rs)
            .and_then(|r| (self.cols - 1).checked_mul(self.cs).map(|c| (r, c)))
            .and_then(|(r, c)| r.checked_add(c))
            .and_then(|x| x.checked_add(self.off));
        last.is_some_and(|l| l < self.data.len())
    }

    #[inline(always)]
    fn at(&self, i: usize, j: usize) -> f32 {
        self.data[self.off + i * self.rs + j * self.cs]
    }
}

/// `A` packed: panels of [`MR`] rows, each `[k][MR]`, the last zero-padded.
#[derive(Debug)]
pub struct PackedA {
    pub m: usize,
    pub k: usize,
    data: Vec<f32>,
}

/// `B` packed: panels of [`NR`] columns, each `[k][NR]`, the last zero-padded.
#[derive(Debug)]
pub struct PackedB {
    pub k: usize,
    pub n: usize,
    data: Vec<f32>,
}

impl PackedA {
    pub fn bytes(&self) -> usize {
        self.data.len() * 4
    }
}

impl PackedB {
    pub fn bytes(&self) -> usize {
        self.data.len() * 4
    }
}

/// Packs `a` (m x k) into row panels. Panics if the view leaves its data
/// (callers build views from tensors' own layouts).
pub fn pack_a(a: &View) -> PackedA {
    assert!(a.in_bounds(), "pack_a: view out of bounds");
    let (m, k) = (a.rows, a.cols);
    let panels = m.div_ceil(MR);
    let mut data = vec![0f32; panels * k * MR];
    let fill = |(ip, panel): (usize, &mut [f32])| {
        let rows = (m - ip * MR).min(MR);
        if a.rs == 1 && a.cs != 1 {
            // a transposed matrix (the columns of an image, say): a panel
            // row is `rows` neighbours, copied as one run per step of k
            for (p, dst) in panel.chunks_exact_mut(MR).enumerate().take(k) {
                let src = &a.data[a.off + p * a.cs + ip * MR..][..rows];
                dst[..rows].copy_from_slice(src);
            }
            return;
        }
        for i in 0..rows {
            let r = ip * MR + i;
            if a.cs == 1 {
                let src = &a.data[a.off + r * a.rs..][..k];
                for (p, v) in src.iter().enumerate() {
                    panel[p * MR + i] = *v;
                }
            } else {
                for p in 0..k {
                    panel[p * MR + i] = a.at(r, p);
                }
            }
        }
    };
    let chunks = data.chunks_mut((k * MR).max(1)).enumerate().take(panels);
    if m * k < 1 << 15 {
        chunks.for_each(fill);
    } else {
        // the activations of a large product: the panels split over the
        // threads
        use rayon::prelude::*;
        data.par_chunks_mut((k * MR).max(1))
            .enumerate()
            .take(panels)
            .for_each(fill);
    }
    PackedA { m, k, data }
}

/// Packs `b` (k x n) into column panels. Panics if the view leaves its data.
pub fn pack_b(b: &View) -> PackedB {
    assert!(b.in_bounds(), "pack_b: view out of bounds");
    let (k, n) = (b.rows, b.cols);
    let panels = n.div_ceil(NR);
    let mut data = vec![0f32; panels * k * NR];
    for (jp, panel) in data.chunks_mut((k * NR).max(1)).enumerate().take(panels) {
        let cols = (n - jp * NR).min(NR);
        if b.cs == 1 {
            for p in 0..k {
                let src = &b.data[b.off + p * b.rs + jp * NR..][..cols];
                panel[p * NR..p * NR + cols].copy_from_slice(src);
            }
        } else {
            // k-contiguous columns (a transposed weight): read each column
            // in order, write it with stride NR
            for j in 0..cols {
                let c = jp * NR + j;
                if b.rs == 1 {
                    let col = &b.data[b.off + c * b.cs..][..k];
                    for (dst, v) in panel.chunks_exact_mut(NR).zip(col) {
                        dst[j] = *v;
                    }
                } else {
                    for p in 0..k {
                        panel[p * NR + j] = b.at(p, c);
                    }
                }
            }
        }
    }
    PackedB { k, n, data }
}

/// A `k x n` matrix packed from rows made by `fill(r, j0, out)` (row `r`
/// from column `j0`; see [`gemm_rows`]), the column panels filled in
/// parallel: a weight read where it lies, packed once.
pub fn pack_b_with(k: usize, n: usize, fill: RowFill) -> PackedB {
    use rayon::prelude::*;
    let panels = n.div_ceil(NR);
    let mut data = vec![0f32; panels * k * NR];
    if panels >= rayon::current_num_threads() {
        data.par_chunks_mut((k * NR).max(1))
            .enumerate()
            .take(panels)
            .for_each(|(jp, panel)| {
                let cols = (n - jp * NR).min(NR);
                for r in 0..k {
                    fill(r, jp * NR, &mut panel[r * NR..r * NR + cols]);
                }
            });
    } else {
        // fewer panels than threads: whole rows, the rows split
        let rows = k.div_ceil(rayon::current_num_threads().max(1)).max(1);
        let ptr = SendPtr(data.as_mut_ptr());
        (0..k.div_ceil(rows)).into_par_iter().for_each(|t| {
            let mut row = vec![0f32; n];
            for r in t * rows..((t + 1) * rows).min(k) {
                fill(r, 0, &mut row);
                for (jp, part) in row.chunks(NR).enumerate() {
                    // SAFETY: row r of panel jp lies inside data, and
                    // each task writes only its own rows.
                    unsafe {
                        let dst = ptr.at((jp * k + r) * NR);
                        std::ptr::copy_nonoverlapping(part.as_ptr(), dst, part.len());
                    }
                }
            }
        });
    }
    PackedB { k, n, data }
}

/// `C (m x n, row stride ldc) = A B`, or `C += A B` with `accumulate` (a
/// bias already written into C, say), on up to `threads` threads. Panics
/// when the shapes disagree or C is too short, or without AVX-512F
/// ([`available`]).
pub fn gemm(a: &PackedA, b: &PackedB, c: &mut [f32], ldc: usize, accumulate: bool, threads: usize) {
    assert_eq!(a.k, b.k, "gemm: inner dims differ");
    product(a, &Source::Packed(b), c, ldc, accumulate, threads);
}

/// A row of B's columns `[j0, j0 + out.len())`: `fill(r, j0, out)`.
pub type RowFill<'a> = &'a (dyn Fn(usize, usize, &mut [f32]) + Sync);

/// [`gemm`] with B (`k x n`) made as it is needed: each block of [`KC`]
/// rows by up to [`NC_PANELS`] panels of columns is filled row by row
/// (`fill(r, j0, out)` writes row `r` from column `j0`) into a buffer the
/// size of L2 just before the kernel reads it. A convolution's im2col never
/// exists whole: it is made block by block, hot in the cache.
#[allow(clippy::too_many_arguments)]
pub fn gemm_rows(
    a: &PackedA,
    k: usize,
    n: usize,
    fill: RowFill,
    c: &mut [f32],
    ldc: usize,
    accumulate: bool,
    threads: usize,
) {
    assert_eq!(a.k, k, "gemm_rows: inner dims differ");
    product(a, &Source::Rows { n, fill }, c, ldc, accumulate, threads);
}

/// Where B's panels come from.
enum Source<'a> {
    Packed(&'a PackedB),
    Rows { n: usize, fill: RowFill<'a> },
}

impl Source<'_> {
    fn n(&self) -> usize {
        match self {
            Source::Packed(b) => b.n,
            Source::Rows { n, .. } => *n,
        }
    }
}

fn product(a: &PackedA, b: &Source, c: &mut [f32], ldc: usize, accumulate: bool, threads: usize) {
    assert!(available(), "gemm: this CPU has no AVX-512F");
    let (m, n, k) = (a.m, b.n(), a.k);
    if m == 0 || n == 0 {
        return;
    }
    assert!(
        ldc >= n && c.len() >= (m - 1) * ldc + n,
        "gemm: C too short"
    );
    if k == 0 {
        if !accumulate {
            for i in 0..m {
                c[i * ldc..i * ldc + n].fill(0.0);
            }
        }
        return;
    }
    let (mp, np) = (m.div_ceil(MR), n.div_ceil(NR));
    // A product of a few microseconds is not worth waking another thread.
    let threads = if m * n * k < PARALLEL_MIN_MACS {
        1
    } else {
        threads.max(1)
    };
    // Split the larger count of panels between the threads; each part is a
    // disjoint set of C's rows (row panels) or columns (column panels).
    let cptr = SendPtr(c.as_mut_ptr());
    let run = |rows: std::ops::Range<usize>, cols: std::ops::Range<usize>| {
        // SAFETY: every part writes only its rows x columns of C, which
        // the assertions above keep inside c; parts are disjoint.
        unsafe { block(a, b, cptr, ldc, accumulate, rows, cols) }
    };
    if threads == 1 || (mp == 1 && np == 1) {
        run(0..mp, 0..np);
        return;
    }
    use rayon::prelude::*;
    if let Source::Rows { n, fill } = b {
        if np < mp && np < threads * 2 {
            // The threads will split the rows, and each would make all of
            // B for itself: make it once, packed, its panels split instead.
            let packed = pack_b_with(k, *n, *fill);
            return product(a, &Source::Packed(&packed), c, ldc, accumulate, threads);
        }
    }
    if np >= mp || np >= threads * 2 {
        let parts = threads.min(np);
        (0..parts).into_par_iter().for_each(|t| {
            run(0..mp, t * np / parts..(t + 1) * np / parts);
        });
    } else {
        let parts = threads.min(mp);
        (0..parts).into_par_iter().for_each(|t| {
            run(t * mp / parts..(t + 1) * mp / parts, 0..np);
        });
    }
}

#[derive(Clone, Copy)]
pub struct SendPtr(pub *mut f32);

impl SendPtr {
    /// The element `i` places on (a method, so that closures capture the
    /// whole `SendPtr`, which is `Sync`, not its raw pointer).
    ///
    /// # Safety
    /// `i` is inside the allocation.
    pub unsafe fn at(self, i: usize) -> *mut f32 {
        self.0.add(i)
    }
}
// SAFETY: the parts of a product write disjoint elements (see `gemm`).
unsafe impl Send for SendPtr {}
unsafe impl Sync for SendPtr {}

/// Row panels `rows` x column panels `cols` of C, blocked as the module
/// says.
///
/// # Safety
/// C must hold rows up to `min(rows.end * MR, m)` with stride `ldc` and
/// columns up to `n`; no other thread may write those elements.
unsafe fn block(
    a: &PackedA,
    b: &Source,
    c: SendPtr,
    ldc: usize,
    accumulate: bool,
    rows: std::ops::Range<usize>,
    cols: std::ops::Range<usize>,
) {
    let (m, n, k) = (a.m, b.n(), a.k);
    // Rows of B made here: one block of panels (only as many as this part
    // has, on a buffer the thread keeps: a small product must not pay for
    // clearing a block it does not use).
    thread_local! {
        static PANELS: std::cell::RefCell<Vec<f32>> = const { std::cell::RefCell::new(Vec::new()) };
        static ROW: std::cell::RefCell<Vec<f32>> = const { std::cell::RefCell::new(Vec::new()) };
    }
    let mut panels = match b {
        Source::Rows { .. } => {
            let mut v = PANELS.with(|p| p.take());
            let need = (cols.end - cols.start).min(NC_PANELS) * KC.min(k) * NR;
            if v.len() < need {
                v.resize(need, 0.0);
            }
            v
        }
        Source::Packed(_) => Vec::new(),
    };
    let mut jc = cols.start;
    while jc < cols.end {
        let jend = (jc + NC_PANELS).min(cols.end);
        let mut pc = 0;
        while pc < k {
            let kc = KC.min(k - pc);
            if let Source::Rows { fill, .. } = b {
                // each row's part of the block in one call (an im2col row
                // works out its windows once per call), then into the
                // panels
                let width = (jend * NR).min(n) - jc * NR;
                let mut row = ROW.with(|p| p.take());
                row.resize(width, 0.0);
                for r in 0..kc {
                    fill(pc + r, jc * NR, &mut row);
                    for (jp, part) in (jc..jend).zip(row.chunks(NR)) {
                        let dst = &mut panels[((jp - jc) * kc + r) * NR..][..NR];
                        if let (Ok(d), Ok(p)) = (
                            <&mut [f32; NR]>::try_from(&mut *dst),
                            <&[f32; NR]>::try_from(part),
                        ) {
                            // a whole panel row: vector moves, no call
                            *d = *p;
                        } else {
                            dst[..part.len()].copy_from_slice(part);
                            dst[part.len()..].fill(0.0);
                        }
                    }
                }
                ROW.with(|p| p.replace(row));
            }
            let mut ic = rows.start;
            while ic < rows.end {
                let iend = (ic + MC_PANELS).min(rows.end);
                for jp in jc..jend {
                    let bp = match b {
                        Source::Packed(p) => p.data.as_ptr().add(jp * k * NR + pc * NR),
                        Source::Rows { .. } => panels.as_ptr().add((jp - jc) * kc * NR),
                    };
                    let nr = (n - jp * NR).min(NR);
                    // the next micro-panel of a packed B, fetched while the
                    // first product of this one runs (it comes from memory:
                    // a weight is read once per product)
                    let next = match b {
                        Source::Packed(p) if jp + 1 < jend => {
                            p.data.as_ptr().add((jp + 1) * k * NR + pc * NR)
                        }
                        _ => std::ptr::null(),
                    };
                    for ip in ic..iend {
                        let ap = a.data.as_ptr().add(ip * k * MR + pc * MR);
                        let mr = (m - ip * MR).min(MR);
                        let cp = c.0.add(ip * MR * ldc + jp * NR);
                        let pf = if ip == ic { next } else { std::ptr::null() };
                        kernel_for(mr, nr)(kc, ap, bp, cp, ldc, mr, nr, accumulate || pc > 0, pf);
                    }
                }
                ic = iend;
            }
            pc += kc;
        }
        jc = jend;
    }
    if let Source::Rows { .. } = b {
        PANELS.with(|p| p.replace(panels));
    }
}

/// A direct product's left operand (`m x k`) where it lies: element (i,
/// p) of row panel `ip` (rows `ip * MR..`) at `data[ip * panel + (i %
/// MR) * row + p * step]`. A [`PackedA`] is one ([`Lhs::packed`]); so is a
/// row-major matrix, read in place ([`Lhs::rows`]).
#[derive(Clone, Copy, Debug)]
pub struct Lhs<'a> {
    data: &'a [f32],
    m: usize,
    k: usize,
    row: usize,
    step: usize,
    panel: usize,
}

impl<'a> Lhs<'a> {
    pub fn packed(a: &'a PackedA) -> Lhs<'a> {
        Lhs {
            data: &a.data,
            m: a.m,
            k: a.k,
            row: 1,
            step: MR,
            panel: a.k * MR,
        }
    }

    /// A row-major `m x k` matrix (`data` holds at least `m * k` floats).
    pub fn rows(data: &'a [f32], m: usize, k: usize) -> Lhs<'a> {
        assert!(data.len() >= m * k, "Lhs::rows: too few floats");
        Lhs {
            data,
            m,
            k,
            row: k,
            step: 1,
            panel: MR * k,
        }
    }
}

/// The second operand of an [`Epilogue`] step (the first is the value so
/// far: the product with its bias, then each step's result).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum EpiSrc {
    /// Input `i`'s element at the same place (laid out as C).
    Input(usize),
    Const(f32),
}

/// What an [`Epilogue`] step computes: the formulas of the fused chain's
/// ops (`exec::ops::scalar`), in the same order, so the bits are the same.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum EpiOp {
    /// Below 0 is 0 (NaN and -0 kept).
    Relu,
    /// `x + b * k`
    Add(f32),
    /// `x - b * k`
    Sub(f32),
    Mul,
    Div,
    /// torch's clamp (NaN kept).
    Clamp(f32, f32),
    /// `x * clamp(x + 3, 0, 6) / 6`
    Hardswish,
}

/// One step of an [`Epilogue`]: `x = op(x, b)`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct EpiStep {
    pub op: EpiOp,
    pub b: EpiSrc,
}

/// An element-wise chain the direct kernel runs on each block of C it has
/// just stored, in place while the block is in L1 (a convolution's relu,
/// residual add, hardswish): each step maps the value so far.
#[derive(Clone, Copy, Debug)]
pub struct Epilogue<'a> {
    pub steps: &'a [EpiStep],
    /// The inputs `EpiSrc::Input` reads, each laid out as C.
    pub inputs: &'a [&'a [f32]],
}

/// A run of one column panel's lanes in a direct product's C: lane `l`
/// (bit `l` of `mask` set) is column `at + l` of C's rows.
#[derive(Clone, Copy, Debug)]
pub struct Run {
    pub mask: u32,
    pub at: isize,
}

/// The column panels of a direct product ([`gemm_direct`]): panel `p`
/// reads B's row `r` as the [`NR`] floats at `src[base[p] + offs[r]..]`
/// (only the lanes it writes: nothing past them need exist) and writes
/// its lanes to C by `runs[first[p]..first[p + 1]]`.
#[derive(Clone, Debug, Default)]
pub struct Panels {
    pub base: Vec<usize>,
    pub first: Vec<usize>,
    pub runs: Vec<Run>,
}

impl Panels {
    /// A panel reading from `base`, writing by `runs` (lanes with no run
    /// are computed and dropped).
    pub fn push(&mut self, base: usize, runs: impl IntoIterator<Item = Run>) {
        if self.first.is_empty() {
            self.first.push(0);
        }
        self.base.push(base);
        self.runs.extend(runs);
        self.first.push(self.runs.len());
    }

    pub fn len(&self) -> usize {
        self.base.len()
    }

    pub fn is_empty(&self) -> bool {
        self.base.is_empty()
    }

    fn runs(&self, p: usize) -> &[Run] {
        &self.runs[self.first[p]..self.first[p + 1]]
    }

    /// The lanes panel `p` reads: up to its last lane written.
    fn lanes(&self, p: usize) -> usize {
        32 - loads(self.runs(p)).leading_zeros() as usize
    }
}

/// The lanes a panel of `runs` reads from B (those it writes).
fn loads(runs: &[Run]) -> u32 {
    runs.iter().fold(0, |m, r| m | r.mask)
}

/// `C = A B (+ bias per row)` where B's columns come in panels that are
/// read where they lie ([`Panels`]): a direct convolution, whose B rows
/// are the input under each tap at [`NR`] output positions, offsets into a
/// padded, stride-phased copy of the images, with no im2col and no
/// packing; the kernel writes each lane where its output position lies in
/// C (the positions of a panel need not be contiguous: a panel may cross
/// output lines, or hold padding columns that are computed and dropped).
/// Blocked as [`gemm`] is (MC blocks of rows, NC blocks of panels) but
/// with no slices of `k`: each block of C is made in one pass (at batch 8,
/// ResNet-18's 512-channel 3x3s took 6.5 ms in slices of 256, 5.2 ms in
/// one; its 56x56 ones 5.2 and 4.6); the threads take blocks of rows by
/// panels, several each.
///
/// # Safety
/// No two lanes (of any panels) write the same element of C, and `c` is
/// not read or written by anyone else during the call. (Reads and writes
/// are checked to be inside `src` and `c`: a bad offset panics.)
#[allow(clippy::too_many_arguments)]
pub unsafe fn gemm_direct(
    a: Lhs,
    src: &[f32],
    offs: &[usize],
    panels: &Panels,
    c: &mut [f32],
    ldc: usize,
    bias: Option<&[f32]>,
    epilogue: Option<&Epilogue>,
    threads: usize,
) {
    assert!(
        available() && offs.len() == a.k,
        "gemm_direct: the offsets are not A's k"
    );
    assert!(
        bias.is_none_or(|b| b.len() >= a.m),
        "gemm_direct: a bias per row"
    );
    let (m, k, np) = (a.m, a.k, panels.len());
    if m == 0 || np == 0 {
        return;
    }
    // every read and every write in bounds
    if let Some(e) = epilogue {
        assert!(
            e.steps.iter().all(|s| match s.b {
                EpiSrc::Input(i) => e.inputs.get(i).is_some_and(|v| v.len() >= c.len()),
                EpiSrc::Const(_) => true,
            }),
            "gemm_direct: an epilogue's input is shorter than C"
        );
    }
    let reach = offs.iter().max().map_or(0, |&o| o);
    assert!(
        (0..np).all(|p| panels.base[p] + reach + panels.lanes(p) <= src.len()),
        "gemm_direct: a panel reads past the input"
    );
    let rows = (m - 1) * ldc;
    assert!(
        panels.runs.iter().all(|r| {
            let (lo, hi) = (
                r.mask.trailing_zeros() as isize,
                31 - r.mask.leading_zeros() as isize,
            );
            r.mask != 0 && r.at + lo >= 0 && ((r.at + hi) as usize) + rows < c.len()
        }),
        "gemm_direct: a panel writes outside C"
    );
    if k == 0 {
        return;
    }
    let mp = m.div_ceil(MR);
    let threads = if m * np * NR * k < PARALLEL_MIN_MACS {
        1
    } else {
        threads.max(1)
    };
    let cptr = SendPtr(c.as_mut_ptr());
    let run = |rows: std::ops::Range<usize>, cols: std::ops::Range<usize>| {
        // SAFETY: reads and writes checked above; parts write disjoint
        // lanes (the caller's promise) or disjoint rows.
        unsafe { direct_block(&a, src, offs, panels, cptr, ldc, bias, epilogue, rows, cols) }
    };
    if threads == 1 || (mp == 1 && np == 1) {
        run(0..mp, 0..np);
        return;
    }
    use rayon::prelude::*;
    if np >= 8 * threads {
        // blocks of panels, a multiple of the threads in number (7 blocks
        // left 4 against 3 on ResNet-18's 56x56 stage at batch 1), taken
        // as the threads come free; each reads all of A
        let parts = threads
            .max(np.div_ceil(NC_PANELS))
            .next_multiple_of(threads)
            .min(np);
        (0..parts)
            .into_par_iter()
            .for_each(|t| run(0..mp, t * np / parts..(t + 1) * np / parts));
        return;
    }
    // few panels: tasks of (row panels x panels), at least four a thread,
    // rows in even blocks of up to MC_PANELS (a split of the 7 panels of a
    // 14x14 image left 4 against 3)
    let rb = mp.div_ceil(MC_PANELS);
    let cb = (4 * threads).div_ceil(rb).min(np);
    (0..rb * cb).into_par_iter().for_each(|t| {
        let (r, q) = (t / cb, t % cb);
        run(
            r * mp / rb..(r + 1) * mp / rb,
            q * np / cb..(q + 1) * np / cb,
        );
    });
}

/// Row panels `rows` x column panels `cols` of a [`gemm_direct`].
///
/// # Safety
/// As [`gemm_direct`], whose checks have passed.
#[allow(clippy::too_many_arguments)]
unsafe fn direct_block(
    a: &Lhs,
    src: &[f32],
    offs: &[usize],
    panels: &Panels,
    c: SendPtr,
    ldc: usize,
    bias: Option<&[f32]>,
    epilogue: Option<&Epilogue>,
    rows: std::ops::Range<usize>,
    cols: std::ops::Range<usize>,
) {
    let m = a.m;
    // the epilogue reads its inputs at each element's offset in C
    let epi = epilogue;
    let mut spans: Vec<(isize, isize)> = Vec::new();
    let mut jc = cols.start;
    while jc < cols.end {
        let jend = (jc + NC_PANELS).min(cols.end);
        let mut ic = rows.start;
        while ic < rows.end {
            let iend = (ic + MC_PANELS).min(rows.end);
            for jp in jc..jend {
                let from = src.as_ptr().add(panels.base[jp]);
                let runs = panels.runs(jp);
                let wide = runs.iter().any(|r| r.mask >> 16 != 0);
                for ip in ic..iend {
                    let mr = (m - ip * MR).min(MR);
                    direct_kernel_for(mr, if wide { NR } else { 16 })(
                        from,
                        offs,
                        a.data.as_ptr().add(ip * a.panel),
                        a.row,
                        a.step,
                        c.0.add(ip * MR * ldc),
                        ldc,
                        mr,
                        runs,
                        bias.map(|b| &b[ip * MR..ip * MR + mr]),
                    );
                }
            }
            if let Some(e) = epi {
                // the block is done (and its stores retired: right after
                // its kernel, the loads waited on the masked stores), its
                // columns of each row in spans
                spans.clear();
                for run in (jc..jend).flat_map(|jp| panels.runs(jp)) {
                    let lo = run.at + run.mask.trailing_zeros() as isize;
                    let hi = run.at + 32 - run.mask.leading_zeros() as isize;
                    match spans.last_mut() {
                        Some((_, end)) if *end == lo => *end = hi,
                        _ => spans.push((lo, hi)),
                    }
                }
                for row in ic * MR..(iend * MR).min(m) {
                    for &(lo, hi) in &spans {
                        let at = row * ldc + lo as usize;
                        epilogue_span(e, at, c.0.add(at), (hi - lo) as usize);
                    }
                }
            }
            ic = iend;
        }
        jc = jend;
    }
}

/// A kernel of [`gemm_direct`]: see [`direct_kernel`].
type DirectKernel = unsafe fn(
    *const f32,
    &[usize],
    *const f32,
    usize,
    usize,
    *mut f32,
    usize,
    usize,
    &[Run],
    Option<&[f32]>,
);

/// The instance of a kernel generic over its rows `R` and vectors of
/// columns `W` for a block of `mr` rows and `nr` columns: only the rows
/// there are, and one vector where 16 columns are enough.
macro_rules! instance_for {
    ($kernel:ident, $mr:expr, $nr:expr) => {
        instance_for!(@rows $kernel, $mr, $nr; 1 2 3 4 5 6 7 8 9 10 11)
    };
    (@rows $kernel:ident, $mr:expr, $nr:expr; $($r:literal)*) => {
        if $nr <= 16 {
            match $mr {
                $($r => $kernel::<$r, 1>,)*
                _ => $kernel::<MR, 1>,
            }
        } else {
            match $mr {
                $($r => $kernel::<$r, 2>,)*
                _ => $kernel::<MR, 2>,
            }
        }
    };
}

/// The [`direct_kernel`] instance for `mr` rows and `nr` columns.
fn direct_kernel_for(mr: usize, nr: usize) -> DirectKernel {
    instance_for!(direct_kernel, mr, nr)
}

/// An [`Epilogue`] over `len` elements of C from `c` (element `at` of C,
/// and of the inputs), in place, step by step (one op over the span at a time), on a
/// block of C the product has finished (still in L2). Not in the kernel's
/// store: there the accumulators' registers were spilled (ResNet-18 at
/// batch 8, 15% slower).
///
/// # Safety
/// The span is written by this thread alone; each input holds elements
/// `at..at + len`; AVX-512F is present.
#[target_feature(enable = "avx512f")]
unsafe fn epilogue_span(e: &Epilogue, at: usize, c: *mut f32, len: usize) {
    use std::arch::x86_64::*;
    // torch's clamp: ordered compares, so NaN stays
    let clamp = |v: __m512, lo: __m512, hi: __m512| {
        let v = _mm512_mask_blend_ps(_mm512_cmp_ps_mask::<_CMP_LT_OQ>(v, lo), v, lo);
        _mm512_mask_blend_ps(_mm512_cmp_ps_mask::<_CMP_GT_OQ>(v, hi), v, hi)
    };
    for step in e.steps {
        let b = match step.b {
            EpiSrc::Input(k) => Some(e.inputs[k].as_ptr().add(at)),
            EpiSrc::Const(_) => None,
        };
        let k = match step.b {
            EpiSrc::Const(v) => v,
            EpiSrc::Input(_) => 0.0,
        };
        macro_rules! each {
            ($f:expr) => {
                epilogue_map(c, b, k, len, $f)
            };
        }
        match step.op {
            // max gives its second operand for NaN and for two zeros
            EpiOp::Relu => each!(|x, _| _mm512_max_ps(_mm512_setzero_ps(), x)),
            EpiOp::Add(k) => each!(|x, b| _mm512_add_ps(x, _mm512_mul_ps(b, _mm512_set1_ps(k)))),
            EpiOp::Sub(k) => each!(|x, b| _mm512_sub_ps(x, _mm512_mul_ps(b, _mm512_set1_ps(k)))),
            EpiOp::Mul => each!(|x, b| _mm512_mul_ps(x, b)),
            EpiOp::Div => each!(|x, b| _mm512_div_ps(x, b)),
            EpiOp::Clamp(lo, hi) => each!(|x, _| clamp(x, _mm512_set1_ps(lo), _mm512_set1_ps(hi))),
            EpiOp::Hardswish => each!(|x, _| {
                let c = clamp(
                    _mm512_add_ps(x, _mm512_set1_ps(3.0)),
                    _mm512_setzero_ps(),
                    _mm512_set1_ps(6.0),
                );
                _mm512_div_ps(_mm512_mul_ps(x, c), _mm512_set1_ps(6.0))
            }),
        }
    }
}

/// An [`Epilogue`] over `span`, elements `[at, at + span.len())` of an
/// output laid out as the epilogue's inputs: what [`gemm_direct`] runs on
/// each block it finishes, for kernels that finish blocks of their own (a
/// depthwise convolution's planes). Panics without AVX-512F
/// ([`available`]) or where an input is shorter.
pub fn run_epilogue(e: &Epilogue, at: usize, span: &mut [f32]) {
    assert!(available(), "run_epilogue: this CPU has no AVX-512F");
    assert!(
        e.steps.iter().all(|s| match s.b {
            EpiSrc::Input(i) => e.inputs.get(i).is_some_and(|v| v.len() >= at + span.len()),
            EpiSrc::Const(_) => true,
        }),
        "run_epilogue: an input is shorter than the output"
    );
    // SAFETY: checked above; `span` is borrowed mutably.
    unsafe { epilogue_span(e, at, span.as_mut_ptr(), span.len()) }
}

/// One step of [`epilogue_span`]: each `x` of the span to `f(x, b)`, `b`
/// the input's element there (`input`) or the number `k`.
///
/// # Safety
/// As [`epilogue_span`].
#[inline]
#[target_feature(enable = "avx512f")]
unsafe fn epilogue_map(
    c: *mut f32,
    input: Option<*const f32>,
    k: f32,
    len: usize,
    f: impl Fn(std::arch::x86_64::__m512, std::arch::x86_64::__m512) -> std::arch::x86_64::__m512,
) {
    use std::arch::x86_64::*;
    let kv = _mm512_set1_ps(k);
    let mut at = 0;
    while at < len {
        let m: __mmask16 = if len - at >= 16 {
            0xffff
        } else {
            ((1u32 << (len - at)) - 1) as __mmask16
        };
        let p = c.add(at);
        let b = match input {
            Some(i) => _mm512_maskz_loadu_ps(m, i.add(at)),
            None => kv,
        };
        _mm512_mask_storeu_ps(p, m, f(_mm512_maskz_loadu_ps(m, p), b));
        at += 16;
    }
}

/// One block of [`gemm_direct`]: `R` rows (at least `mr`) and `16 * W`
/// columns in registers over all of `k` (B's row `r` loaded from `from +
/// offs[r]`, the lanes of the runs only), then each run of lanes stored to
/// C, the bias added (masked loads and stores: no other element is
/// touched). A's element (i, p) is at `a + i * lda + p * step`.
///
/// # Safety
/// Each B row's lanes up to the last run's are readable; A's rows `mr`
/// and steps `offs.len()` are readable; every run's lanes lie inside C for
/// `mr` rows `ldc` apart, and no other thread writes them; AVX-512F is
/// present.
#[allow(clippy::too_many_arguments)]
#[target_feature(enable = "avx512f")]
unsafe fn direct_kernel<const R: usize, const W: usize>(
    from: *const f32,
    offs: &[usize],
    a: *const f32,
    lda: usize,
    step: usize,
    c: *mut f32,
    ldc: usize,
    mr: usize,
    runs: &[Run],
    bias: Option<&[f32]>,
) {
    use std::arch::x86_64::*;
    debug_assert!(mr <= R);
    let mut acc = [[_mm512_setzero_ps(); W]; R];
    let mut ap = a;
    let load = loads(runs);
    let lm = [load as __mmask16, (load >> 16) as __mmask16];
    for &o in offs {
        let row = from.add(o);
        let mut bv = [_mm512_setzero_ps(); W];
        for (j, v) in bv.iter_mut().enumerate() {
            *v = _mm512_maskz_loadu_ps(lm[j], row.add(16 * j));
        }
        for (i, r) in acc.iter_mut().enumerate() {
            let av = _mm512_set1_ps(*ap.add(i * lda));
            for (c, v) in r.iter_mut().zip(&bv) {
                *c = _mm512_fmadd_ps(av, *v, *c);
            }
        }
        ap = ap.add(step);
    }
    for run in runs {
        let masks = [run.mask as __mmask16, (run.mask >> 16) as __mmask16];
        for (i, r) in acc.iter().enumerate().take(mr) {
            // lane 0 of the run's first vector (masked lanes are never
            // touched, so the address may lie before C's row)
            let cp = c.wrapping_offset(run.at + (i * ldc) as isize);
            for (j, v) in r.iter().enumerate() {
                let (m, p) = (masks[j], cp.wrapping_add(16 * j));
                if m == 0 {
                    continue;
                }
                let v = if let Some(b) = bias {
                    _mm512_add_ps(*v, _mm512_set1_ps(b[i]))
                } else {
                    *v
                };
                _mm512_mask_storeu_ps(p, m, v);
            }
        }
    }
}

/// A micro-kernel: see [`kernel`].
type Kernel =
    unsafe fn(usize, *const f32, *const f32, *mut f32, usize, usize, usize, bool, *const f32);

/// The kernel instance for a block of `mr` rows and `nr` columns: one that
/// computes only the rows there are (a product of one row, a linear layer
/// on one token, would otherwise spend 12 times the multiply-adds it
/// needs), and one vector of columns where 16 are enough.
fn kernel_for(mr: usize, nr: usize) -> Kernel {
    instance_for!(kernel, mr, nr)
}

/// One `MR x NR` block of C from `kc` steps of packed A and B: C = A B (or
/// C += A B), writing only the first `mr` rows and `nr` columns, computing
/// the first `R` rows (at least `mr`) and `16 * W` columns (at least `nr`); with a
/// non-null `prefetch`, the `kc * NR` floats there (the next B
/// micro-panel) are fetched into the cache on the way (measured: BERT-base
/// 68.9 to 64.4 ms, ViT-B/16 123 to 119 ms).
///
/// # Safety
/// `a` holds `kc * MR` floats, `b` `kc * NR` (and `prefetch`, unless
/// null, `kc * NR`); C's `mr` rows of `nr` columns at stride `ldc` are
/// writable; AVX-512F is present.
#[allow(clippy::too_many_arguments)]
#[target_feature(enable = "avx512f")]
unsafe fn kernel<const R: usize, const W: usize>(
    kc: usize,
    a: *const f32,
    b: *const f32,
    c: *mut f32,
    ldc: usize,
    mr: usize,
    nr: usize,
    accumulate: bool,
    prefetch: *const f32,
) {
    use std::arch::x86_64::*;
    debug_assert!(mr <= R && nr <= 16 * W);
    let mut acc = [[_mm512_setzero_ps(); W]; R];
    let (mut ap, mut bp) = (a, b);
    let mut pf = prefetch;
    for _ in 0..kc {
        if !pf.is_null() {
            // two cache lines of the next panel a step: all of it by the end
            _mm_prefetch::<_MM_HINT_T0>(pf as *const i8);
            _mm_prefetch::<_MM_HINT_T0>(pf.add(16) as *const i8);
            pf = pf.add(NR);
        }
        let mut bv = [_mm512_setzero_ps(); W];
        for (j, v) in bv.iter_mut().enumerate() {
            *v = _mm512_loadu_ps(bp.add(16 * j));
        }
        for (i, row) in acc.iter_mut().enumerate() {
            let av = _mm512_set1_ps(*ap.add(i));
            for (c, v) in row.iter_mut().zip(&bv) {
                *c = _mm512_fmadd_ps(av, *v, *c);
            }
        }
        ap = ap.add(MR);
        bp = bp.add(NR);
    }
    let mask = |lanes: usize| -> __mmask16 {
        if lanes >= 16 {
            0xffff
        } else {
            ((1u32 << lanes) - 1) as __mmask16
        }
    };
    let (m0, m1) = (mask(nr), mask(nr.saturating_sub(16)));
    for (i, row) in acc.iter().enumerate().take(mr) {
        let cp = c.add(i * ldc);
        for (j, (v, m)) in row.iter().zip([m0, m1]).enumerate() {
            let mut v = *v;
            if accumulate {
                v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(m, cp.add(16 * j)));
            }
            _mm512_mask_storeu_ps(cp.add(16 * j), m, v);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn naive(a: &View, b: &View) -> Vec<f64> {
        let mut c = vec![0f64; a.rows * b.cols];
        for i in 0..a.rows {
            for j in 0..b.cols {
                c[i * b.cols + j] = (0..a.cols)
                    .map(|p| a.at(i, p) as f64 * b.at(p, j) as f64)
                    .sum();
            }
        }
        c
    }

    fn values(n: usize, seed: u32) -> Vec<f32> {
        let mut s = seed.wrapping_mul(2654435761).wrapping_add(1);
        (0..n)
            .map(|_| {
                s ^= s << 13;
                s ^= s >> 17;
                s ^= s << 5;
                (s % 2001) as f32 / 1000.0 - 1.0
            })
            .collect()
    }

    /// Every edge (rows and columns that do not fill a block, k across
    /// several KC slices, one and two threads, row- and column-major
    /// operands, accumulation) against a float64 reference.
    #[test]
    fn products_match_a_reference() {
        if !available() {
            eprintln!("no AVX-512F here: the packed kernel is not used, nothing to test");
            return;
        }
        for &(m, n, k) in &[
            (1, 1, 1),
            (12, 32, 7),
            (13, 33, 257),
            (25, 100, 600),
            (64, 10, 784),
            (3, 70, 0),
            (100, 3, 20),
        ] {
            let av = values(m * k, 1);
            let bv = values(k * n, 2);
            for &(a_rowmajor, b_rowmajor) in &[(true, true), (false, false), (true, false)] {
                let a = View {
                    data: &av,
                    off: 0,
                    rows: m,
                    cols: k,
                    rs: if a_rowmajor { k } else { 1 },
                    cs: if a_rowmajor { 1 } else { m },
                };
                let b = View {
                    data: &bv,
                    off: 0,
                    rows: k,
                    cols: n,
                    rs: if b_rowmajor { n } else { 1 },
                    cs: if b_rowmajor { 1 } else { k },
                };
                let want = naive(&a, &b);
                let (pa, pb) = (pack_a(&a), pack_b(&b));
                for threads in [1, 2, 3] {
                    let ldc = n + 3;
                    let mut c = vec![7f32; m * ldc];
                    gemm(&pa, &pb, &mut c, ldc, false, threads);
                    for i in 0..m {
                        for j in 0..n {
                            let got = c[i * ldc + j] as f64;
                            let w = want[i * n + j];
                            assert!(
                                (got - w).abs() <= 1e-4 * (1.0 + w.abs()),
                                "{m}x{n}x{k} ({i},{j}): {got} vs {w}"
                            );
                        }
                        // the padding between rows is left alone
                        assert!(c[i * ldc + n..(i + 1) * ldc].iter().all(|&v| v == 7.0));
                    }
                    // B made row by row as the kernel needs it: the same
                    let mut c2 = vec![7f32; m * ldc];
                    let fill = |r: usize, j0: usize, out: &mut [f32]| {
                        for (j, o) in out.iter_mut().enumerate() {
                            *o = b.at(r, j0 + j);
                        }
                    };
                    gemm_rows(&pa, k, n, &fill, &mut c2, ldc, false, threads);
                    assert_eq!(c, c2, "{m}x{n}x{k}: gemm_rows");
                    let mut c = vec![1f32; m * n];
                    gemm(&pa, &pb, &mut c, n, true, threads);
                    for (got, w) in c.iter().zip(&want) {
                        assert!((*got as f64 - (w + 1.0)).abs() <= 1e-4 * (1.0 + w.abs()));
                    }
                }
            }
        }
    }

    /// A direct product's panels (runs crossing "lines", lanes dropped, a
    /// panel of 16 lanes or fewer, rows that do not fill a block, a bias
    /// or none, A packed or read as it lies, one and two threads) against a float64 reference, and no
    /// element of C outside the runs touched.
    #[test]
    fn direct_products_match_a_reference() {
        if !available() {
            eprintln!("no AVX-512F here: the direct kernel is not used, nothing to test");
            return;
        }
        let (src, ldc) = (values(4000, 3), 90);
        for &(m, k) in &[(1, 1), (12, 27), (29, 300), (40, 5)] {
            let av = values(m * k, 4);
            let a = View::row_major(&av, m, k);
            let pa = pack_a(&a);
            let offs: Vec<usize> = (0..k).map(|r| (r * 37) % 500).collect();
            let bias = values(m, 5);
            let mut panels = Panels::default();
            // all 32 lanes to columns 0..32
            panels.push(0, [Run { mask: !0, at: 0 }]);
            // lanes 0..10 to 40..50, 13..30 to 60..77; 10..13 and 30..32 dropped
            panels.push(
                700,
                [
                    Run {
                        mask: 0x3ff,
                        at: 40,
                    },
                    Run {
                        mask: 0x3fff_e000,
                        at: 60 - 13,
                    },
                ],
            );
            // seven lanes: the one-vector kernel
            panels.push(1500, [Run { mask: 0x7f, at: 80 }]);
            let lhs = [Lhs::packed(&pa), Lhs::rows(&av, m, k)];
            for (bias, lhs) in [None, Some(&bias[..])]
                .into_iter()
                .flat_map(|b| lhs.map(|l| (b, l)))
            {
                for threads in [1, 2] {
                    let mut c = vec![7f32; m * ldc];
                    // SAFETY: the runs write distinct columns
                    unsafe {
                        gemm_direct(lhs, &src, &offs, &panels, &mut c, ldc, bias, None, threads)
                    };
                    let mut want = vec![7f64; m * ldc];
                    for p in 0..panels.len() {
                        for run in panels.runs(p) {
                            for l in (0..32).filter(|l| run.mask >> l & 1 == 1) {
                                let col = (run.at + l as isize) as usize;
                                for i in 0..m {
                                    let dot: f64 = (0..k)
                                        .map(|r| {
                                            av[i * k + r] as f64
                                                * src[panels.base[p] + offs[r] + l] as f64
                                        })
                                        .sum();
                                    want[i * ldc + col] = dot + bias.map_or(0.0, |b| b[i] as f64);
                                }
                            }
                        }
                    }
                    for (e, (got, w)) in c.iter().zip(&want).enumerate() {
                        assert!(
                            (*got as f64 - w).abs() <= 1e-4 * (1.0 + w.abs()),
                            "{m}x{k} element {e}: {got} vs {w}"
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

    /// `cargo test --release -p pt2kit --features exec --lib gemm_speed -- --ignored --nocapture`
    #[test]
    #[ignore]
    fn gemm_speed() {
        for &(m, n, k) in &[
            (128, 768, 768),
            (128, 3072, 768),
            (128, 768, 3072),
            (64, 512, 784),
            (64, 3136, 576),
            (256, 196, 2304),
        ] {
            let av: Vec<f32> = (0..m * k).map(|i| (i % 7) as f32 * 0.1).collect();
            let bv: Vec<f32> = (0..k * n).map(|i| (i % 5) as f32 * 0.1).collect();
            let a = View::row_major(&av, m, k);
            let b = View {
                data: &bv,
                off: 0,
                rows: k,
                cols: n,
                rs: 1,
                cs: k,
            };
            let many: Vec<PackedB> = (0..16).map(|_| pack_b(&b)).collect();
            let pb = pack_b(&b);
            let mut c = vec![0f32; m * n];
            for threads in [1, 2] {
                let t = std::time::Instant::now();
                for r in 0..48 {
                    let pa = pack_a(&a);
                    gemm(&pa, &many[r % 16], &mut c, n, false, threads);
                }
                let s = t.elapsed().as_secs_f64() / 48.0;
                eprintln!(
                    "{m}x{n}x{k} threads {threads}: B from memory {:.1} GFLOP/s, {:.1} GB/s of B",
                    2.0 * (m * n * k) as f64 / s / 1e9,
                    (k * n * 4) as f64 / s / 1e9
                );
            }
            let flops = 2.0 * (m * n * k) as f64;
            for threads in [1, 2] {
                let t = std::time::Instant::now();
                let reps = 50;
                for _ in 0..reps {
                    let pa = pack_a(&a);
                    gemm(&pa, &pb, &mut c, n, false, threads);
                }
                let s = t.elapsed().as_secs_f64() / reps as f64;
                let t2 = std::time::Instant::now();
                for _ in 0..reps {
                    unsafe {
                        ::gemm::gemm(
                            m,
                            n,
                            k,
                            c.as_mut_ptr(),
                            1,
                            n as isize,
                            false,
                            av.as_ptr(),
                            1,
                            k as isize,
                            bv.as_ptr(),
                            k as isize,
                            1,
                            1.0f32,
                            1.0f32,
                            false,
                            false,
                            false,
                            if threads == 1 {
                                ::gemm::Parallelism::None
                            } else {
                                ::gemm::Parallelism::Rayon(threads)
                            },
                        );
                    }
                }
                let s2 = t2.elapsed().as_secs_f64() / reps as f64;
                eprintln!(
                    "{m}x{n}x{k} threads {threads}: packed {:.1} GFLOP/s, gemm crate {:.1} GFLOP/s",
                    flops / s / 1e9,
                    flops / s2 / 1e9
                );
            }
        }
    }
}
