//! Single-precision matrix products on the CPU, with operands packed once.
//!
//! `C = A B` (or `C += A B`, or `C = A B + bias`) for float32, in the
//! style of BLIS and ONNX Runtime's MLAS: B is copied into panels that the
//! micro-kernel reads in order (panels of [`NR`] columns, each two
//! k-major halves of [`HALF`] columns one after the other, zero-padded),
//! A is read where it lies ([`Lhs`]: rows in place, the
//! kernel broadcasting from [`MR`] of them; packed in panels of `MR` rows
//! only when neither stride is 1), and the kernel keeps an `MR x NR`
//! block of `C` in the 24 of AVX-512's 32 vector registers while it runs
//! down `k`. A weight is packed once and kept (see the executor's
//! pack cache), so a linear layer reads its weights in the kernel's order
//! on every run without copying them again. Packing the activations per
//! call cost 7-15% of a product (the MLP at batch 512: 1.66 -> 1.49 ms
//! without it).
//!
//! Files: this one the packed product; `micro.rs` its kernels; `panels.rs` the
//! direct product (B read where it lies: convolutions); `chain.rs` the
//! element-wise chains both run on each finished block of C.
//!
//! Blocking, in BLIS's order: for each block of [`NC_PANELS`] column panels,
//! each slice of [`KC`] along `k` and each block of [`MC_PANELS`] row
//! panels (`MC x KC` of A: in L2), every `B` micro-panel (`KC x NR`, up
//! to 100 KiB: in L2, read in order; on AVX2 each of its halves, 20 KiB,
//! in turn, in L1) meets every
//! `A` micro-panel of the block. So B, which is the weight streamed from
//! memory in a linear layer, is read from memory once per product. On
//! AVX2 the block goes rows outer instead ([`rows_outer`]): six rows of A
//! at a time, in L1, through a block of B of 128 KiB, in L2. The
//! threads take blocks of rows x columns of C as they
//! come free, up to [`TASKS_PER_THREAD`] a thread, split to read the
//! least of A and B ([`split`]).
//!
//! The kernels are written once over 16-lane vectors (`kernels::simd`) and
//! compiled for AVX-512F and for AVX2 + FMA; [`available`] says whether
//! this CPU has one of the two (checked at run time, so the binaries stay
//! portable), and callers use the `gemm` crate otherwise. On AVX2 a
//! kernel's `MR x NR` block runs as parts of 6 rows by 16 columns (12 of
//! its 16 registers), each part over one half of the micro-panel.

use super::simd::{first, Avx2, Avx512, F32x16};

/// Rows of `C` a kernel call computes.
pub const MR: usize = 12;
/// Columns of `C` a kernel call computes (two 16-lane vectors).
pub const NR: usize = 32;
/// The slice of `k` one pass of the kernel runs over (at most): a
/// micro-panel of B of up to 100 KiB, streamed from L2 (its next cache
/// lines fetched ahead, a step takes 128 bytes of it in 12 cycles), and
/// an `MC x KC` block of A of up to 450 KiB beside it in a 1 MiB L2. Each
/// kernel call ends by storing its `12 x 32` block of C (and each slice
/// after the first begins by reading it), so longer slices leave the FMA
/// units idle less: on the Zen 5 (48 KiB L1, 1 MiB L2), fresh processes
/// rotated, two threads, against 256 (a micro-panel in L1): the MLP at
/// batch 8 0.961x and 0.967x (`k = 784` in one slice, not 4 x 196),
/// BERT-base b1 0.960x / 0.959x, b8 0.946x, GPT-2 b1 0.958x, ViT-B/16 b1
/// 0.977x, b8 0.953x, the convolutions 0.99-1.01x (noise); 512 gained
/// half of that, 1200 and 2400 no more (the product `512 x 512 x 784`
/// alone 477-484 -> 508-511 GFLOP/s, of a peak of ~532).
pub const KC: usize = 800;
/// [`KC`] on AVX2: a half micro-panel of 320 steps is 20 KiB, and 6 rows
/// of A beside it 7.5 KiB, in a 32 KiB L1 (Zen 3). Interleaved on one
/// thread of the 2-vCPU AVX2 VM, against 256: ResNet-50 b1 0.94x / 0.95x
/// (its 3x3 convolutions over 64 and 256 channels go down k = 576 and
/// 2304 in slices of 288 instead of 192 and 256), the MLP b8 0.95x /
/// 0.97x (784 as 3 x 262), ViT-B/16 1.0x (k = 768 is 3 x 256 either
/// way); 384 made ResNet-50 1.12x slower.
const KC_AVX2: usize = 320;
/// The slices of `k` a product runs over: as few as [`KC`] (on AVX2
/// [`KC_AVX2`]) allows, all of one depth (784 as 4 x 196, not 3 x 256 and
/// a slice of 16 whose kernel calls load and store C for 16 steps: 512 x
/// 512 x 784 3.6% faster on AVX2, interleaved).
pub(super) fn k_slice(k: usize) -> usize {
    let most = if avx512() { KC } else { KC_AVX2 };
    k.div_ceil(k.div_ceil(most).max(1)).max(1)
}

/// Column panels in one block at most (`NC = NC_PANELS * NR` columns).
pub const NC_PANELS: usize = 16;
/// The bytes of C a block of column panels covers at most, for this
/// part's rows (down to 4 panels): half of L2.
pub const C_BLOCK: usize = 512 << 10;
/// Blocks a product splits into per thread, claimed as the threads come
/// free: on the 2-vCPU AVX2 machine, whose vCPUs were often lent
/// unevenly, 8 a thread against one block a thread made the MLP at batch
/// 512 0.89x, at 64 0.87x, BERT at batch 8 0.92x. On a Zen 5 with two
/// whole cores, 4 against 8 (fresh processes interleaved, two threads):
/// the MLP at batch 512 0.954x, BERT b1 0.963x, GPT-2 b1 0.965x, ViT-B/16
/// b1 0.98x, the rest within 1.5%; the product `512 x 512 x 784` alone
/// 495-502 GFLOP/s against 470 (smaller blocks each start on a B
/// micro-panel nothing fetched ahead, and split 2 x 8 rather than 1 x 8).
pub const TASKS_PER_THREAD: usize = 4;
/// Multiply-adds below which a product runs on the calling thread.
pub const PARALLEL_MIN_MACS: usize = 1 << 16;
/// Row panels in one block (`MC = MC_PANELS * MR` rows: an `MC x KC`
/// block of A, 144 KiB, stays in L2).
pub const MC_PANELS: usize = 12;

/// Whether this CPU runs the packed kernels: AVX-512F, or AVX2 with FMA
/// ([`crate::kernels::cpu`]; `PT2KIT_NO_AVX512=1` takes the AVX2 ones where both
/// are there).
pub fn available() -> bool {
    crate::kernels::isa() != crate::kernels::Isa::Base
}

/// Whether the kernels run on AVX-512F (else on AVX2 + FMA, where
/// [`available`]).
pub fn avx512() -> bool {
    crate::kernels::isa() == crate::kernels::Isa::Avx512
}

/// Rows a [`RowPanel`] of [`gemm_taps`] best holds: [`MR`] on AVX-512;
/// on AVX2 its kernel's part ([`micro::AVX2_ROWS`]), since a panel is
/// computed in even parts of at most that many rows, and a 14-pixel line
/// as two panels of 7 ran as parts of 3 and 4 rows, whose 6 and 8
/// accumulators leave the FMA units waiting. As parts of 5, 5 and 4,
/// interleaved call by call on the 2-vCPU AVX2 VM (one / two threads):
/// ResNet-50's stride-2 3x3 `[256, 256]` into 14x14 0.90x / 0.93x of
/// its time, `[128, 256]` 0.92x / 0.91x.
pub fn line_rows() -> usize {
    if avx512() {
        MR
    } else {
        micro::AVX2_ROWS
    }
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

/// `B` packed: panels of [`NR`] columns, each two halves of [`HALF`]
/// columns one after the other, each half `[k][HALF]`, the last panel
/// zero-padded.
#[derive(Debug)]
pub struct PackedB {
    pub k: usize,
    pub n: usize,
    data: Vec<f32>,
}

/// Columns of one half of a B micro-panel: a panel of `k x NR` is laid
/// out as its left `k x HALF` and then its right, so that a pass over 16
/// columns (an AVX2 kernel's, or one register of AVX-512's) reads 16 KiB
/// in order at `KC = 256`, where a half read out of `[k][NR]` rows (every
/// other cache line of 32 KiB) filled all 8 ways of half of Zen 3's L1
/// sets and the A panel beside it evicted it. Interleaved on one thread
/// of the 2-vCPU AVX2 VM, against `[k][NR]`: BERT-base b1 0.89x, GPT-2
/// b1 0.94x, ViT-B/16 b1 0.93x, ResNet-50 b1 0.93x, ResNet-18 b8 0.93x,
/// the MLP b8 0.94x, b1 0.96x; against the `gemm` crate, call by call,
/// `[128,768]x[768,3072]` 1.01x -> 0.95x of its time, `[128,768]x[768,768]`
/// 1.08x -> 1.00-1.02x. (Each 16-column half then run over all the row
/// panels before the other, BLIS's order with NR = 16: 1.01-1.03x, left
/// out.)
pub const HALF: usize = 16;

/// Row `r` of a `k`-deep panel (at most [`NR`] floats, the rest of the
/// row left as it is) into its two halves.
fn put_row(panel: &mut [f32], k: usize, r: usize, row: &[f32]) {
    for (h, part) in row.chunks(HALF).enumerate() {
        panel[h * k * HALF + r * HALF..][..part.len()].copy_from_slice(part);
    }
}

impl PackedB {
    /// Column panel `jp`'s micro-panel from step `pc` of k, and the
    /// distance in floats from its left half to its right.
    ///
    /// # Safety
    /// `jp` is a panel and `pc < k`.
    pub(super) unsafe fn micro(&self, jp: usize, pc: usize) -> (*const f32, usize) {
        (
            self.data.as_ptr().add(jp * self.k * NR + pc * HALF),
            self.k * HALF,
        )
    }
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
    // not cleared first: a whole panel is written whole below, a last
    // one of fewer rows is cleared by its task (138 KB cleared a call
    // for MobileNetV3's [96, 576] over 7x7)
    let mut data = uninit(panels * k * MR);
    let fill = |(ip, panel): (usize, &mut [std::mem::MaybeUninit<f32>])| {
        let rows = (m - ip * MR).min(MR);
        if rows < MR {
            panel.fill(std::mem::MaybeUninit::new(0.0));
        }
        // SAFETY: a float is written over every element of the panel
        // below (its rows' at every step of k), or was just above
        let panel = unsafe { assume_init_mut(panel) };
        if a.rs == 1 && a.cs != 1 {
            // a transposed matrix (the columns of an image, say): a panel
            // row is `rows` neighbours, copied as one run per step of k
            // (of MR floats as a constant where the panel is whole: a
            // copy of a length known only at run time is a call to
            // memcpy, 2,880 of them for MobileNetV3's [96, 576] over 7x7)
            let steps = panel.chunks_exact_mut(MR).enumerate().take(k);
            if rows == MR {
                for (p, dst) in steps {
                    dst.copy_from_slice(&a.data[a.off + p * a.cs + ip * MR..][..MR]);
                }
            } else {
                for (p, dst) in steps {
                    let src = &a.data[a.off + p * a.cs + ip * MR..][..rows];
                    dst[..rows].copy_from_slice(src);
                }
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
        let len = (panels * k * MR).min(data.len());
        crate::kernels::threads::par_chunks(&mut data[..len], k * MR, |i, d| fill((i, d)));
    }
    // SAFETY: every panel written whole (the fills above)
    let data = unsafe { assume_init(data) };
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
                put_row(panel, k, p, src);
            }
        } else {
            // k-contiguous columns (a transposed weight): read each column
            // in order, write it with stride HALF
            for j in 0..cols {
                let c = jp * NR + j;
                let half = &mut panel[j / HALF * k * HALF..][..k * HALF];
                if b.rs == 1 {
                    let col = &b.data[b.off + c * b.cs..][..k];
                    for (dst, v) in half.chunks_exact_mut(HALF).zip(col) {
                        dst[j % HALF] = *v;
                    }
                } else {
                    for (p, dst) in half.chunks_exact_mut(HALF).enumerate() {
                        dst[j % HALF] = b.at(p, c);
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
    let panels = n.div_ceil(NR);
    let mut data = vec![0f32; panels * k * NR];
    if panels >= rayon::current_num_threads() {
        crate::kernels::threads::par_chunks(&mut data, k * NR, |jp, panel| {
            let cols = (n - jp * NR).min(NR);
            let mut row = [0f32; NR];
            for r in 0..k {
                fill(r, jp * NR, &mut row[..cols]);
                put_row(panel, k, r, &row[..cols]);
            }
        });
    } else {
        // fewer panels than threads: whole rows, the rows split
        let rows = k.div_ceil(rayon::current_num_threads().max(1)).max(1);
        let ptr = SendPtr(data.as_mut_ptr());
        crate::kernels::threads::par_for(k.div_ceil(rows), |t| {
            let mut row = vec![0f32; n];
            for r in t * rows..((t + 1) * rows).min(k) {
                fill(r, 0, &mut row);
                for (jp, part) in row.chunks(NR).enumerate() {
                    for (h, part) in part.chunks(HALF).enumerate() {
                        // SAFETY: row r of panel jp's half h lies inside
                        // data, and each task writes only its own rows.
                        unsafe {
                            let dst = ptr.at(jp * k * NR + h * k * HALF + r * HALF);
                            std::ptr::copy_nonoverlapping(part.as_ptr(), dst, part.len());
                        }
                    }
                }
            }
        });
    }
    PackedB { k, n, data }
}

/// `C (m x n, row stride ldc) = A B`, or `C += A B` with `accumulate` (a
/// bias already written into C, say), on up to `threads` threads. Panics
/// when the shapes disagree or C is too short, or without the kernels'
/// instruction set ([`available`]).
pub fn gemm(a: &PackedA, b: &PackedB, c: &mut [f32], ldc: usize, accumulate: bool, threads: usize) {
    assert_eq!(a.k, b.k, "gemm: inner dims differ");
    let init = if accumulate {
        Init::Accumulate
    } else {
        Init::Zero
    };
    product(
        Lhs::packed(a),
        &Source::Packed(b),
        as_uninit(c),
        ldc,
        init,
        None,
        threads,
        None,
    );
}

/// What C holds before a product adds to it.
#[derive(Clone, Copy, Debug)]
pub enum Init<'a> {
    /// Nothing: C = A B.
    Zero,
    /// C += A B.
    Accumulate,
    /// A bias per column (`n` floats): C = A B + bias, added as the first
    /// slice of `k` is stored (no pass over C to write it first).
    Bias(&'a [f32]),
    /// A bias per row (`m` floats, a convolution's per output channel):
    /// as [`Init::Bias`].
    RowBias(&'a [f32]),
}

/// The bias a kernel call adds as it stores its first slice of `k`: none,
/// one a column (from the pointer on, one a column of the call's block) or
/// one a row (one a row of the call's block).
#[derive(Clone, Copy, Debug)]
pub(super) enum BiasAt {
    None,
    Columns(*const f32),
    Rows(*const f32),
}

impl BiasAt {
    /// The bias of the block `i` rows and `j` columns on.
    ///
    /// # Safety
    /// The bias holds that row or column.
    pub(super) unsafe fn at(self, i: usize, j: usize) -> BiasAt {
        match self {
            BiasAt::None => BiasAt::None,
            BiasAt::Columns(p) => BiasAt::Columns(p.add(j)),
            BiasAt::Rows(p) => BiasAt::Rows(p.add(i)),
        }
    }
}

/// [`gemm`] with A read where it lies (an activation in rows: no packed
/// copy, the kernel broadcasts from A's rows as ONNX Runtime's MLAS does;
/// see [`Lhs::view`]), C initialised as `init` says, and an element-wise
/// `epilogue` (a linear layer's relu or gelu) run on each block of C as
/// soon as it is final, while it is in L2. C may be uninitialised (a
/// fresh output, [`uninit`]): its `m` rows of `n` are written whole.
/// Panics when the shapes disagree, C (or an epilogue's input, laid out
/// as C) is too short, `init` is [`Init::Accumulate`], or without
/// the kernels' instruction set ([`available`]).
#[allow(clippy::too_many_arguments)]
pub fn gemm_lhs(
    a: Lhs,
    b: &PackedB,
    c: &mut [std::mem::MaybeUninit<f32>],
    ldc: usize,
    init: Init,
    epilogue: Option<&Epilogue>,
    threads: usize,
) {
    assert_eq!(a.k, b.k, "gemm: inner dims differ");
    assert!(
        !matches!(init, Init::Accumulate),
        "gemm_lhs: C may be uninitialised, nothing to accumulate on"
    );
    product(a, &Source::Packed(b), c, ldc, init, epilogue, threads, None);
}

/// What [`gemm_lhs_each`] calls on each block of C as soon as it is
/// final: the block's rows and columns (of C) and C's first element. It
/// runs on the thread that made the block, while the block is in its
/// cache, and other threads may be writing C's other blocks meanwhile (so
/// it reads its block through the pointer, under no slice of C).
pub type Done<'a> = &'a (dyn Fn(std::ops::Range<usize>, std::ops::Range<usize>, SendPtr) + Sync);

/// [`gemm_lhs`] with no epilogue and `done` called on each block of C as
/// it is final (see [`Done`]): a caller that moves the product where it
/// goes (a transpose into a convolution's output) does it in the
/// product's parallel parts rather than after it on one thread.
pub fn gemm_lhs_each(
    a: Lhs,
    b: &PackedB,
    c: &mut [std::mem::MaybeUninit<f32>],
    ldc: usize,
    init: Init,
    threads: usize,
    done: Done,
) {
    assert_eq!(a.k, b.k, "gemm: inner dims differ");
    assert!(
        !matches!(init, Init::Accumulate),
        "gemm_lhs_each: C may be uninitialised, nothing to accumulate on"
    );
    product(
        a,
        &Source::Packed(b),
        c,
        ldc,
        init,
        None,
        threads,
        Some(done),
    );
}

/// A row of B's columns `[j0, j0 + out.len())`: `fill(r, j0, out)`.
pub type RowFill<'a> = &'a (dyn Fn(usize, usize, &mut [f32]) + Sync);

/// [`gemm`] with B (`k x n`) made as it is needed: each block of [`KC`]
/// rows by up to [`NC_PANELS`] panels of columns is filled row by row
/// (`fill(r, j0, out)` writes row `r` from column `j0`) into a buffer the
/// size of L2 just before the kernel reads it. A convolution's im2col never
/// exists whole: it is made block by block, hot in the cache. C may be
/// uninitialised unless `init` is [`Init::Accumulate`]; the `epilogue`
/// runs on each block of C once it is final, as [`gemm_lhs`]'s.
#[allow(clippy::too_many_arguments)]
pub fn gemm_rows(
    a: Lhs,
    k: usize,
    n: usize,
    fill: RowFill,
    c: &mut [std::mem::MaybeUninit<f32>],
    ldc: usize,
    init: Init,
    epilogue: Option<&Epilogue>,
    threads: usize,
) {
    assert_eq!(a.k, k, "gemm_rows: inner dims differ");
    product(
        a,
        &Source::Rows { n, fill },
        c,
        ldc,
        init,
        epilogue,
        threads,
        None,
    );
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

/// C may be uninitialised unless `init` is [`Init::Accumulate`]: every
/// element of its `m` rows of `n` is written before it is read.
#[allow(clippy::too_many_arguments)]
fn product(
    a: Lhs,
    b: &Source,
    c: &mut [std::mem::MaybeUninit<f32>],
    ldc: usize,
    init: Init,
    epilogue: Option<&Epilogue>,
    threads: usize,
    done: Option<Done>,
) {
    assert!(
        available(),
        "gemm: this CPU has neither AVX-512F nor AVX2 + FMA"
    );
    let (m, n, k) = (a.m, b.n(), a.k);
    if m == 0 || n == 0 {
        return;
    }
    let clen = (m - 1) * ldc + n;
    assert!(ldc >= n && c.len() >= clen, "gemm: C too short");
    if let Init::Bias(bias) = init {
        assert!(bias.len() >= n, "gemm: a bias shorter than a row");
    }
    if let Init::RowBias(bias) = init {
        assert!(bias.len() >= m, "gemm: a bias shorter than a column");
    }
    if let Some(e) = epilogue {
        assert!(
            e.steps.iter().all(|s| match s.b {
                EpiSrc::Input(i) => e.inputs.get(i).is_some_and(|v| v.len() >= clen),
                EpiSrc::Const(_) => true,
            }),
            "gemm: an epilogue's input is shorter than C"
        );
    }
    if k == 0 {
        for i in 0..m {
            let row = &mut c[i * ldc..i * ldc + n];
            match init {
                Init::Zero => row.iter_mut().for_each(|v| {
                    v.write(0.0);
                }),
                Init::Bias(b) => row.iter_mut().zip(b).for_each(|(v, x)| {
                    v.write(*x);
                }),
                Init::RowBias(b) => row.iter_mut().for_each(|v| {
                    v.write(b[i]);
                }),
                Init::Accumulate => {}
            }
            // SAFETY: the row is written (or was, to accumulate on)
            let row = unsafe { &mut *(row as *mut [std::mem::MaybeUninit<f32>] as *mut [f32]) };
            if let Some(e) = epilogue {
                run_epilogue(e, i * ldc, row);
            }
        }
        if let Some(done) = done {
            done(0..m, 0..n, SendPtr(c.as_mut_ptr().cast()));
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
    let cptr = SendPtr(c.as_mut_ptr().cast::<f32>());
    let run = |rows: std::ops::Range<usize>, cols: std::ops::Range<usize>| {
        // SAFETY: every part writes only its rows x columns of C, which
        // the assertions above keep inside c; parts are disjoint.
        unsafe { block(&a, b, cptr, ldc, init, epilogue, rows.clone(), cols.clone()) };
        if let Some(done) = done {
            done(
                rows.start * MR..(rows.end * MR).min(m),
                cols.start * NR..(cols.end * NR).min(n),
                cptr,
            );
        }
    };
    if threads == 1 || (mp == 1 && np == 1) {
        run(0..mp, 0..np);
        return;
    }
    if let Source::Rows { n, fill } = b {
        if np < mp && np < threads * 2 {
            // Too few column panels for the threads, and a B made row by
            // row splits by columns alone ([`split`]: each row block would
            // make all of B again): make it once, packed, so that the rows
            // split too.
            let packed = pack_b_with(k, *n, *fill);
            return product(
                a,
                &Source::Packed(&packed),
                c,
                ldc,
                init,
                epilogue,
                threads,
                done,
            );
        }
    }
    // Blocks of C taken as the threads come free (rayon splits the range
    // and a thread that finishes steals): on a shared machine one core is
    // often slower than the other for a while (a VM's two vCPUs, one
    // sharing its core with a neighbour), and one part per thread waits
    // for the slow one.
    let (rb, cb) = split(
        mp,
        np,
        m,
        n,
        threads * TASKS_PER_THREAD,
        matches!(b, Source::Packed(_)),
    );
    crate::kernels::threads::par_for(rb * cb, |t| {
        let (r, q) = (t / cb, t % cb);
        run(
            r * mp / rb..(r + 1) * mp / rb,
            q * np / cb..(q + 1) * np / cb,
        );
    });
}

/// What reading B again costs [`split`] against reading A again: B is
/// a weight, from memory (a model's weights are past the last-level
/// cache), A the activations, in cache. Interleaved call by call
/// (`products_speed`, B from memory), two threads, against 1 (which
/// split BERT's and GPT-2's `[128, 768] x [768, 768]` into 2 x 8, each
/// weight read twice): `128 x 768 x 768` 0.93x of its time, `128 x 768 x
/// 3072` 0.92x, ViT-B/16's `197 x 768 x 768` 0.94x; at batch 8 within
/// 2% (`512 x 512 x 784` now 2 x 8, not 4 x 4: 0.99x, 1.00x with B in
/// cache); 16 lost 2-7% there. Whole models, fresh processes
/// interleaved, two threads: ViT-B/16 b1 0.92x, GPT-2 b1 0.93x, BERT b1
/// 0.99x (with [`AHEAD_STEPS`]).
const B_REREAD: usize = 4;

/// How a product's `mp` row panels by `np` column panels split into
/// about `tasks` blocks (row blocks, column blocks): as many as there can
/// be up to `tasks`, and of those the split that reads the least, since
/// each column block reads all of its rows of A and each row block all of
/// its columns of B (`cb * m + rb * n * B_REREAD`). Without `rows` (B made row by
/// row as it is needed: each row block would make it again) the columns
/// alone split.
pub(super) fn split(
    mp: usize,
    np: usize,
    m: usize,
    n: usize,
    tasks: usize,
    rows: bool,
) -> (usize, usize) {
    let tasks = tasks.max(1);
    if !rows {
        return (1, tasks.min(np).max(1));
    }
    let want = tasks.min(mp * np);
    (1..=tasks.min(mp).max(1))
        .map(|rb| (rb, tasks.div_ceil(rb).min(np).max(1)))
        .min_by_key(|&(rb, cb)| (rb * cb < want, cb * m + rb * n * B_REREAD))
        .unwrap_or((1, 1))
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
#[allow(clippy::too_many_arguments)]
unsafe fn block(
    a: &Lhs,
    b: &Source,
    c: SendPtr,
    ldc: usize,
    init: Init,
    epilogue: Option<&Epilogue>,
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
    // A product of a row or two goes down k in one slice (up to 2048: the
    // buffer of a B made row by row holds a block of the slice): the
    // weight, read once, in long runs of memory, where slices of 256 made
    // the kernel jump between panels every 32 KiB (with the whole
    // micro-panel in one pass, [`kernel_avx2`]: MobileNetV3 at batch 1
    // 0.93x of its time on one thread, interleaved; the sliced C it saves
    // reloading is 32 floats). Its C block is two rows: nothing to keep
    // in L2 between slices.
    let slice = if m <= 2 {
        k.div_ceil(k.div_ceil(2048))
    } else {
        k_slice(k)
    };
    let mut panels = match b {
        Source::Rows { .. } => {
            let mut v = PANELS.with(|p| p.take());
            let need = (cols.end - cols.start).min(NC_PANELS) * slice * NR;
            if v.len() < need {
                v.resize(need, 0.0);
            }
            v
        }
        Source::Packed(_) => Vec::new(),
    };
    // rows outer (AVX2): the block of B stays in L2 while each part of
    // a row panel goes through it (B_BLOCK_AVX2 bytes of it at most);
    // columns outer, the block of C the slices of k add to stays in L2
    // between them: at most C_BLOCK bytes of this part's rows (BERT's
    // 1024 x 3072 products 445 -> 475 GFLOP/s with 4 panels instead of 16)
    let rows_outer = rows_outer(m);
    let nc = if rows_outer {
        (B_BLOCK_AVX2 / (slice * NR * 4)).clamp(1, NC_PANELS)
    } else {
        (C_BLOCK / (rows.len() * MR * NR * 4).max(1)).clamp(4, NC_PANELS)
    };
    let mut jc = cols.start;
    while jc < cols.end {
        let jend = (jc + nc).min(cols.end);
        let mut pc = 0;
        while pc < k {
            let kc = slice.min(k - pc);
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
                        let panel = &mut panels[(jp - jc) * kc * NR..];
                        for h in 0..NR / HALF {
                            let dst = &mut panel[h * kc * HALF + r * HALF..][..HALF];
                            let part = part.get(h * HALF..).unwrap_or(&[]);
                            if let (Ok(d), Some(p)) =
                                (<&mut [f32; HALF]>::try_from(&mut *dst), part.first_chunk())
                            {
                                // a whole half row: vector moves, no call
                                *d = *p;
                            } else {
                                dst[..part.len()].copy_from_slice(part);
                                dst[part.len()..].fill(0.0);
                            }
                        }
                    }
                }
                ROW.with(|p| p.replace(row));
            }
            let mut ic = rows.start;
            while ic < rows.end {
                let iend = (ic + MC_PANELS).min(rows.end);
                let micro = |jp: usize| match b {
                    Source::Packed(p) => p.micro(jp, pc),
                    Source::Rows { .. } => (panels.as_ptr().add((jp - jc) * kc * NR), kc * HALF),
                };
                // the first slice starts C (from nothing, from what C
                // holds, or from the bias); the others add to it
                let start = |ip: usize, jp: usize| match init {
                    _ if pc > 0 => (true, BiasAt::None),
                    Init::Zero => (false, BiasAt::None),
                    Init::Accumulate => (true, BiasAt::None),
                    Init::Bias(b) => (false, BiasAt::Columns(b.as_ptr().add(jp * NR))),
                    Init::RowBias(b) => (false, BiasAt::Rows(b.as_ptr().add(ip * MR))),
                };
                for jp in (jc..jend).filter(|_| !rows_outer) {
                    let (bp, bh) = micro(jp);
                    let nr = (n - jp * NR).min(NR);
                    // the next micro-panel of a packed B, fetched while the
                    // first product of this one runs (it comes from memory:
                    // a weight is read once per product)
                    let next = match b {
                        Source::Packed(p) if jp + 1 < jend => p.micro(jp + 1, pc).0,
                        _ => std::ptr::null(),
                    };
                    for ip in ic..iend {
                        let (accumulate, bias) = start(ip, jp);
                        let ap = a.data.as_ptr().add(ip * a.panel + pc * a.step);
                        let mr = (m - ip * MR).min(MR);
                        let cp = c.0.add(ip * MR * ldc + jp * NR);
                        // (on AVX2 nothing: fetched into L2 there, the next
                        // panel was no faster over the MLP, BERT and ViT-B/16,
                        // 0.96-1.04x interleaved, see `kernel_avx2`)
                        let pf = if ip == ic && avx512() {
                            next
                        } else {
                            std::ptr::null()
                        };
                        kernel_for(mr, nr)(
                            kc, ap, a.row, a.step, bp, bh, cp, ldc, mr, nr, accumulate, bias, pf,
                        );
                    }
                }
                // the block's columns of C, and the chain to run on them once
                // they are final: rows outer, on each part's rows as the part
                // finishes them (in L1; the inputs' rows fetched into L2
                // as its products start), where it ran on the whole block
                // (up to 144 rows of 512 columns, 288 KiB, past L1) after
                // them. Fresh processes interleaved, one thread: ResNet-50
                // b1 0.986x, b8 0.988x, MobileNetV3 b8 0.976x, BERT b1
                // 0.99-1.0x; two threads ResNet-50 b1 1.01x
                let (lo, hi) = (jc * NR, (jend * NR).min(n));
                let then = epilogue.filter(|_| pc + kc == k);
                // rows outer, a relu or a hardswish alone is applied as
                // each element is stored (no pass over the part's rows):
                // against that pass, alternate calls on the 2-vCPU AVX2
                // VM, one / two threads, a relu after `72 x 3136 x 16`
                // 0.88x / 0.87x of the time, `256 x 3136 x 64` 0.94x /
                // 0.93x, `64 x 3136 x 576` 0.99x / 0.98x; a hardswish
                // 0.89x and 0.95x
                let (then, part_kernel) = match then {
                    Some(e) if rows_outer && e.relu_only() => {
                        (None, avx2_part::<STORE_RELU> as AvxPart)
                    }
                    Some(e) if rows_outer && e.hardswish_only() => {
                        (None, avx2_part::<STORE_HARDSWISH> as AvxPart)
                    }
                    then => (then, avx2_part::<0> as AvxPart),
                };
                for ip in (ic..iend).filter(|_| rows_outer) {
                    let ap = a.data.as_ptr().add(ip * a.panel + pc * a.step);
                    let mr = (m - ip * MR).min(MR);
                    for (i, part) in avx2_parts(mr) {
                        let part_rows = ip * MR + i..ip * MR + i + part;
                        if let Some(e) = then {
                            // its inputs' rows (a residual, from memory)
                            // into L2 while the part's products run
                            for row in part_rows.clone() {
                                prefetch_inputs(e, row * ldc + lo, hi - lo);
                            }
                        }
                        // this part's rows of A (in L1) through the block
                        // of B (in L2), 16 columns a kernel
                        let ap = ap.add(i * a.row);
                        // the block's halves of micro-panels lie `bh`
                        // apart (a panel's two, then the next panel's),
                        // its columns of C 16 apart: one call for them all
                        let (bp, bh) = micro(jc);
                        let (accumulate, bias) = start(ip, jc);
                        part_kernel(
                            part,
                            kc,
                            (ap, a.row, a.step),
                            (bp, bh),
                            c.0.add((ip * MR + i) * ldc + lo),
                            ldc,
                            hi - lo,
                            accumulate,
                            bias.at(i, 0),
                            // the first part through a block reads it from
                            // memory: fetched ahead into L2
                            if ip == rows.start && i == 0 {
                                bp.wrapping_add(AHEAD_STEPS * HALF)
                            } else {
                                std::ptr::null()
                            },
                        );
                        if let Some(e) = then {
                            // the part's rows of the block are final, in L1
                            for row in part_rows {
                                let at = row * ldc + lo;
                                epilogue_span(e, at, c.0.add(at), hi - lo);
                            }
                        }
                    }
                }
                if let (Some(e), false) = (then, rows_outer) {
                    // this block of C is final: its rows' columns, in L2
                    for row in ic * MR..(iend * MR).min(m) {
                        let at = row * ldc + lo;
                        epilogue_span(e, at, c.0.add(at), hi - lo);
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

    /// A matrix where it lies, when one of its strides is 1 (rows in
    /// place, or the columns of a transposed matrix: a packed panel's
    /// layout with `MR` replaced by the stride); `None` otherwise. Panics
    /// if the view leaves its data.
    pub fn view(v: &View<'a>) -> Option<Lhs<'a>> {
        assert!(v.in_bounds(), "Lhs::view: view out of bounds");
        let (row, step) = match (v.rs, v.cs) {
            (rs, 1) => (rs, 1),
            (1, cs) => (1, cs),
            _ if v.rows <= 1 => (0, v.cs),
            _ => return None,
        };
        Some(Lhs {
            data: v.data.get(v.off..).unwrap_or(&[]),
            m: v.rows,
            k: v.cols,
            row,
            step,
            panel: MR * row,
        })
    }

    /// A column-major `m x k` matrix, element (i, p) at `data[p * m + i]`
    /// (`data` holds at least `m * k` floats): a `[k, m]` image read as
    /// its transpose, the kernel broadcasting from `MR` neighbours.
    pub fn columns(data: &'a [f32], m: usize, k: usize) -> Lhs<'a> {
        assert!(data.len() >= m * k, "Lhs::columns: too few floats");
        Lhs {
            data,
            m,
            k,
            row: 1,
            step: m,
            panel: MR,
        }
    }

    /// Row panel `ip` of `mp` (`m.div_ceil(MR)`): its first row, its rows
    /// (at most [`MR`]) and where its first element lies in `data`. Read in
    /// place, the rows split evenly (64 output channels as 11, 11, 11, 11,
    /// 10, 10, not five panels of 12 and one of 4, whose 8 accumulators
    /// left the FMA units waiting on their latency); packed, [`MR`] a
    /// panel as the packing laid them out.
    pub(super) fn row_panel(&self, mp: usize, ip: usize) -> (usize, usize, usize) {
        if self.panel == MR * self.row {
            let (first, end) = (ip * self.m / mp, (ip + 1) * self.m / mp);
            (first, end - first, first * self.row)
        } else {
            let first = ip * MR;
            (first, (self.m - first).min(MR), ip * self.panel)
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

/// The instance of a kernel generic over its rows `R` and vectors of
/// columns `W` for a block of `mr` rows and `nr` columns: only the rows
/// there are, and one vector where 16 columns are enough.
macro_rules! instance_for {
    ($kernel:ident, $mr:expr, $nr:expr) => {
        instance_for!(@rows $kernel, $mr, $nr, []; 1 2 3 4 5 6 7 8 9 10 11)
    };
    // a third const parameter after the rows and vectors
    ($kernel:ident, $mr:expr, $nr:expr, $more:literal) => {
        instance_for!(@rows $kernel, $mr, $nr, [$more]; 1 2 3 4 5 6 7 8 9 10 11)
    };
    (@rows $kernel:ident, $mr:expr, $nr:expr, $more:tt; $($r:literal)*) => {
        if $nr <= 16 {
            match $mr {
                $($r => instance_for!(@one $kernel, $r, 1, $more),)*
                _ => instance_for!(@one $kernel, MR, 1, $more),
            }
        } else {
            match $mr {
                $($r => instance_for!(@one $kernel, $r, 2, $more),)*
                _ => instance_for!(@one $kernel, MR, 2, $more),
            }
        }
    };
    (@one $kernel:ident, $r:tt, $w:literal, []) => {
        $kernel::<$r, $w>
    };
    (@one $kernel:ident, $r:tt, $w:literal, [$more:literal]) => {
        $kernel::<$r, $w, $more>
    };
}

mod chain;
pub mod dot;
mod micro;
mod panels;
mod scaled_pack;
mod taps;
#[cfg(test)]
pub(crate) mod tests;

use chain::{epilogue_span, prefetch_inputs};
pub use chain::{run_epilogue, EpiMap, EpiOp, EpiSrc, EpiStep, Epilogue};
use micro::*;
pub use panels::{gemm_direct, Panels, Run};
use panels::{STORE_HARDSWISH, STORE_RELU};
pub use taps::{gemm_taps, RowPanel};

/// `n` floats for a kernel that writes every one before anything reads
/// it (an output): no pass clearing what the kernel overwrites (a
/// convolution's output of megabytes, cleared on one thread, was 6% of
/// MobileNetV3's samples at batch 8). [`assume_init`] once written.
pub fn uninit(n: usize) -> Vec<std::mem::MaybeUninit<f32>> {
    let mut v = Vec::with_capacity(n);
    // SAFETY: MaybeUninit needs no initialisation; the capacity is n.
    unsafe { v.set_len(n) };
    v
}

/// The floats of [`uninit`] once every one has been written.
///
/// # Safety
/// Every element of `v` is initialised.
pub unsafe fn assume_init(v: Vec<std::mem::MaybeUninit<f32>>) -> Vec<f32> {
    let mut v = std::mem::ManuallyDrop::new(v);
    // SAFETY: MaybeUninit<f32> has f32's layout; the caller says every
    // element is initialised; the allocation moves to the new Vec.
    unsafe { Vec::from_raw_parts(v.as_mut_ptr().cast::<f32>(), v.len(), v.capacity()) }
}

/// A slice of [`uninit`] as floats once every one has been written.
///
/// # Safety
/// Every element of `c` is initialised.
pub unsafe fn assume_init_mut(c: &mut [std::mem::MaybeUninit<f32>]) -> &mut [f32] {
    // SAFETY: the same layout; the caller says every element is written
    unsafe { &mut *(c as *mut [std::mem::MaybeUninit<f32>] as *mut [f32]) }
}

/// `c` cleared, as floats (for a kernel that needs C initialised).
pub fn zeroed(c: &mut [std::mem::MaybeUninit<f32>]) -> &mut [f32] {
    c.iter_mut().for_each(|v| {
        v.write(0.0);
    });
    // SAFETY: every element was just written
    unsafe { &mut *(c as *mut [std::mem::MaybeUninit<f32>] as *mut [f32]) }
}

/// Initialised floats as a kernel's output that may be uninitialised
/// ([`gemm_direct`]'s C): the kernel writes only floats into it.
pub fn as_uninit(c: &mut [f32]) -> &mut [std::mem::MaybeUninit<f32>] {
    // SAFETY: same layout; nothing writes an uninitialised value through
    // the result (its only users are this module's kernels, which store
    // floats).
    unsafe { &mut *(c as *mut [f32] as *mut [std::mem::MaybeUninit<f32>]) }
}

/// Whether a product of `m` rows goes through each block row panel by
/// row panel ([`block`]): on AVX2, six rows of A at a time (in L1) through
/// a block of B of [`B_BLOCK_AVX2`] bytes (in L2), 16 columns a kernel
/// call, as MLAS does, where the block was column panel by column panel
/// (each B micro-panel, 40 KiB at `k` slices of 320, through the row
/// panels of A from L2: a call's six rows of A and half of B's panel
/// were 35 KiB against a 32 KiB L1). Interleaved call by call, the same
/// bits, one thread: ViT-B/16's and BERT's products 0.93-0.97x of their
/// time, the MLP's 512 x 512 x 784 0.97x, 1024 x 3072 x 768 0.94x; two
/// threads 0.94-1.02x; in a neighbour's busy minutes (the one-thread
/// figures of each halved) 0.78-0.88x: the smaller footprint is what a
/// core whose caches are shared loses least with. A product of one or
/// two rows keeps the whole-panel kernel ([`kernel_avx2`]); AVX-512's
/// 12 x 32 kernel keeps columns outer.
fn rows_outer(m: usize) -> bool {
    #[cfg(test)]
    if COLUMNS_OUTER.load(std::sync::atomic::Ordering::Relaxed) {
        return false;
    }
    !avx512() && m > 2
}

/// The bytes of a block of B that [`rows_outer`] keeps in L2 (as MLAS's
/// 256 x 128 floats; 256 KiB was 1-2% slower on one thread).
const B_BLOCK_AVX2: usize = 128 << 10;

/// Tests: every block columns outer ([`rows_outer`] off), to compare.
#[cfg(test)]
pub(super) static COLUMNS_OUTER: std::sync::atomic::AtomicBool =
    std::sync::atomic::AtomicBool::new(false);

/// Steps of `k` ahead (a line of a half micro-panel each: 64 = 4 KiB,
/// a page) that the first part of A through a block of B ([`rows_outer`])
/// fetches into L2 as it reads it: the block comes from memory there, and
/// the hardware's streams stop at each page. Interleaved call by call
/// (`products_speed` with B from memory), one thread, against none:
/// GPT-2's `128 x 3072 x 768` 0.987x of its time, `128 x 768 x 3072`
/// 0.988x, `64 x 3072 x 768` 0.989x, `64 x 768 x 3072` 0.969x (8 steps
/// ahead 0.975-0.997x, 128 0.972-0.988x); two threads 0.98-0.995x; with B
/// in cache 0.994-1.010x. The next block fetched over all the parts
/// instead lost 1-12%.
const AHEAD_STEPS: usize = 64;
