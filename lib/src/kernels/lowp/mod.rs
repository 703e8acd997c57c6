//! Reduced-precision products (`ir-run --precision bf16`): float32
//! matrices multiplied with both operands rounded to bfloat16 (to nearest,
//! ties to even, as torch's `.to(torch.bfloat16)`), the products summed
//! in float32, the result float32.
//!
//! Plain slices in, plain slices out: nothing here knows candle or the IR.
//!
//! Layouts. The left operand, an activation, is rounded per call into
//! tiles of bfloat16 ([`A16`]: `k` padded with zeros to a multiple of
//! [`KP`], the rows to a multiple of [`AMX_ROWS`], each 16 rows by 32
//! one contiguous KiB). The right operand, a
//! weight, is rounded once and packed ([`PackedB16`]) in panels of [`NR`]
//! columns, each `[k / 2][NR]` pairs (element `(2p, j)` in the low half of
//! a 32-bit word, `(2p + 1, j)` in the high half): the layout both kernels
//! read, AVX512-BF16's `vdpbf16ps` (one pair per lane) and AMX's B tiles
//! (16 pair rows of 16 columns, a row stride of `NR` words). Every buffer
//! a tile is loaded from starts on a 64-byte line ([`Lines`]).
//!
//! Kernels, by what the CPU has ([`kernel`], found once):
//! - [`Kernel::Amx`]: AMX-BF16 tiles (`amx.rs`), blocks of 32 x 32 of C
//!   in four tiles, `tdpbf16ps` over steps of 32 along `k`;
//! - [`Kernel::Avx512`]: AVX512-BF16 (`avx512.rs`), blocks of 12 x 32 in
//!   24 registers, `vdpbf16ps` over pairs along `k`;
//! - none: the caller stays in float32 (and says so at `-v`).
//!
//! Each kernel is tested against [`reference`] (`lib/tests/kernels.rs`).

mod amx;
mod avx512;
mod conv;

pub use conv::{
    act16, conv, conv_reference, conv_weight, padded_channels, Act16, ConvWeight16, Strides,
};

/// Columns of a packed panel of B (two 16-lane vectors, or two AMX tiles).
pub const NR: usize = 32;
/// `k` is padded with zeros to a multiple of this (one AMX tile's depth).
pub const KP: usize = 32;
/// A's rows are padded with zeros to a multiple of this (two AMX tiles).
pub const AMX_ROWS: usize = 32;
/// Multiply-adds below which a product runs on the calling thread.
const PARALLEL_MIN_MACS: usize = 1 << 16;

/// The precision products and convolutions compute in.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Precision {
    /// float32 throughout.
    #[default]
    F32,
    /// float32 weights and activations rounded to bfloat16 for the
    /// products, summed in float32 (where the CPU has a kernel for it).
    Bf16,
}

/// The bfloat16 product kernel a CPU runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kernel {
    /// AMX-BF16 tiles (Sapphire Rapids and later).
    Amx,
    /// AVX512-BF16's `vdpbf16ps`.
    Avx512,
}

impl Kernel {
    pub fn name(self) -> &'static str {
        match self {
            Kernel::Amx => "AMX-BF16",
            Kernel::Avx512 => "AVX512-BF16",
        }
    }
}

/// The bfloat16 kernel this CPU runs (found once): AMX where the CPU has
/// it and Linux grants its tile state to the process, else AVX512-BF16,
/// else none. `PT2KIT_NO_AMX=1` stops at AVX512-BF16; `PT2KIT_NO_AVX512=1`
/// (or `PT2KIT_NO_AVX2=1`) leaves none.
pub fn kernel() -> Option<Kernel> {
    static KERNEL: std::sync::OnceLock<Option<Kernel>> = std::sync::OnceLock::new();
    *KERNEL.get_or_init(|| {
        if !avx512::available() {
            return None;
        }
        if !crate::knobs::is_set("PT2KIT_NO_AMX") && amx::available() {
            return Some(Kernel::Amx);
        }
        Some(Kernel::Avx512)
    })
}

/// Whether `k` runs on this CPU (a test asks for each kernel by name).
pub fn runs(k: Kernel) -> bool {
    match k {
        Kernel::Avx512 => avx512::available(),
        Kernel::Amx => avx512::available() && amx::available(),
    }
}

/// `x` rounded to bfloat16, to nearest with ties to even (torch's
/// `round_to_nearest_even`; a NaN stays a quiet NaN).
#[inline(always)]
pub fn to_bf16(x: f32) -> u16 {
    let b = x.to_bits();
    if x.is_nan() {
        return ((b >> 16) | 0x40) as u16;
    }
    (b.wrapping_add(0x7fff + ((b >> 16) & 1)) >> 16) as u16
}

/// `src` rounded to bfloat16 into `dst` (as long): [`to_bf16`] on each,
/// compiled for AVX-512 where the kernels run (16 at a time).
fn round_into(src: &[f32], dst: &mut [u16]) {
    #[inline(always)]
    fn each(src: &[f32], dst: &mut [u16]) {
        for (d, s) in dst.iter_mut().zip(src) {
            *d = to_bf16(*s);
        }
    }
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx512f,avx512bw")]
    unsafe fn wide(src: &[f32], dst: &mut [u16]) {
        each(src, dst)
    }
    #[cfg(target_arch = "x86_64")]
    if avx512::available() {
        // SAFETY: the CPU has AVX-512F and BW (AVX512-BF16 implies them)
        return unsafe { wide(src, dst) };
    }
    each(src, dst)
}

/// `dst[j]` = `lo[j]` (low half) and `hi[j]` (high half, zero without
/// `hi`) rounded to bfloat16 as one word, compiled for AVX-512 where the
/// kernels run.
fn pair_rows(lo: &[f32], hi: Option<&[f32]>, dst: &mut [u32]) {
    #[inline(always)]
    fn each(lo: &[f32], hi: Option<&[f32]>, dst: &mut [u32]) {
        match hi {
            Some(hi) => {
                for ((d, a), b) in dst.iter_mut().zip(lo).zip(hi) {
                    *d = to_bf16(*a) as u32 | (to_bf16(*b) as u32) << 16;
                }
            }
            None => {
                for (d, a) in dst.iter_mut().zip(lo) {
                    *d = to_bf16(*a) as u32;
                }
            }
        }
    }
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx512f,avx512bw")]
    unsafe fn wide(lo: &[f32], hi: Option<&[f32]>, dst: &mut [u32]) {
        each(lo, hi, dst)
    }
    #[cfg(target_arch = "x86_64")]
    if avx512::available() {
        // SAFETY: the CPU has AVX-512F and BW (AVX512-BF16 implies them)
        return unsafe { wide(lo, hi, dst) };
    }
    each(lo, hi, dst)
}

/// `rows` rows of `k` (`rs` apart from `src[0]`) rounded to bfloat16 into
/// a block of tiles (`[k / KP][16][KP]`), a step of all the rows at a
/// time (each tile written whole before the next), compiled for AVX-512
/// where the kernels run.
fn round_block(src: &[f32], rows: usize, rs: usize, k: usize, dst: &mut [u16]) {
    #[inline(always)]
    fn each(src: &[f32], rows: usize, rs: usize, k: usize, dst: &mut [u16]) {
        for (s, tile) in dst
            .chunks_exact_mut(TILE / 2)
            .take(k.div_ceil(KP))
            .enumerate()
        {
            let (p0, len) = (s * KP, KP.min(k - s * KP));
            for (r, row) in tile.chunks_exact_mut(KP).take(rows).enumerate() {
                for (d, x) in row[..len].iter_mut().zip(&src[r * rs + p0..][..len]) {
                    *d = to_bf16(*x);
                }
            }
        }
    }
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx512f,avx512bw")]
    unsafe fn wide(src: &[f32], rows: usize, rs: usize, k: usize, dst: &mut [u16]) {
        each(src, rows, rs, k, dst)
    }
    #[cfg(target_arch = "x86_64")]
    if avx512::available() {
        // SAFETY: the CPU has AVX-512F and BW (AVX512-BF16 implies them)
        return unsafe { wide(src, rows, rs, k, dst) };
    }
    each(src, rows, rs, k, dst)
}

/// A bfloat16 as float32 (exact).
#[inline(always)]
pub fn from_bf16(h: u16) -> f32 {
    f32::from_bits((h as u32) << 16)
}

/// `x` rounded to bfloat16 and back.
pub fn round_bf16(x: f32) -> f32 {
    from_bf16(to_bf16(x))
}

/// The left operand rounded to bfloat16, laid out tile by tile: `k`
/// padded with zeros to `kp` (a multiple of [`KP`]), the rows to a
/// multiple of [`AMX_ROWS`], each block of 16 rows one run of `kp / 32`
/// steps of 1 KiB (`[m / 16][kp / 32][16][32]`), so that an AMX A tile
/// is one contiguous read (rows `2 * kp` bytes apart, one page apart at
/// BERT's 3072, missed the prefetchers), as a convolution's weight lies
/// ([`ConvWeight16`]).
pub struct A16 {
    pub m: usize,
    pub k: usize,
    kp: usize,
    data: Lines<u16>,
}

impl A16 {
    /// Bytes of a block of 16 rows.
    fn block(&self) -> usize {
        self.kp / KP * TILE
    }
}

/// Bytes of an A tile (16 rows of 32 bfloat16).
const TILE: usize = 16 * KP * 2;

/// A block of C as the kernels store it (row stride [`NR`]).
#[derive(Clone)]
#[repr(C, align(64))]
struct Tile([f32; AMX_ROWS * NR]);

/// A buffer of `len` words (`u16` or `u32`) whose first lies on a 64-byte
/// line, so that each row of an AMX tile, 64 bytes at a multiple of 64
/// from it, is one line: a row across two lines costs the tile load
/// twice and more (one core, four tile loads and four `tdpbf16ps` a
/// step: 0.86 TFLOP/s with both operands 16 bytes off a line, as glibc's
/// malloc places a large buffer, 2.2-2.3 with one, 3.1 with neither, the
/// peak; the tools' mimalloc happens to place them on lines).
pub(crate) struct Lines<T> {
    lines: Vec<std::mem::MaybeUninit<Line>>,
    /// Lines before the first word (to a 2 MiB boundary, see `zeroed`).
    skip: usize,
    len: usize,
    _word: std::marker::PhantomData<T>,
}

/// A huge page (x86-64's 2 MiB), the boundary [`Lines::zeroed`] puts a
/// large buffer on.
const HUGE_PAGE: usize = 2 << 20;

/// One 64-byte line of [`Lines`].
#[derive(Clone, Copy)]
#[repr(C, align(64))]
struct Line([u8; 64]);

/// The words a [`Lines`] holds: plain integers, any bits valid.
pub(crate) trait Word: Copy {}
impl Word for u16 {}
impl Word for u32 {}

impl<T: Word> Lines<T> {
    fn count(len: usize) -> usize {
        (len * std::mem::size_of::<T>()).div_ceil(64)
    }

    /// `len` zeros. A buffer of 2 MiB or more starts on a 2 MiB boundary
    /// and its whole 2 MiB pages are asked of the kernel as huge pages
    /// (`madvise`; transparent huge pages in `madvise` mode, the common
    /// default): a weight streamed from memory on every run then takes
    /// one TLB entry a 2 MiB rather than 512 (BERT-base's products under
    /// `--precision bf16`, 170 MB of weights a run: the run 0.96x). The
    /// pad before the boundary is never touched, so it costs no resident
    /// memory.
    pub(crate) fn zeroed(len: usize) -> Lines<T> {
        let n = Self::count(len);
        let zero = std::mem::MaybeUninit::new(Line([0; 64]));
        if n * 64 < HUGE_PAGE {
            return Lines {
                lines: vec![zero; n],
                skip: 0,
                len,
                _word: std::marker::PhantomData,
            };
        }
        let pad = HUGE_PAGE / 64;
        let mut lines: Vec<std::mem::MaybeUninit<Line>> = Vec::with_capacity(n + pad);
        // SAFETY: MaybeUninit needs no initialisation
        unsafe { lines.set_len(n + pad) };
        let at = lines.as_ptr() as usize;
        let first = at.next_multiple_of(HUGE_PAGE);
        let skip = (first - at) / 64;
        #[cfg(target_os = "linux")]
        // SAFETY: the range is whole pages inside the buffer, not yet
        // touched; the advice changes no contents
        unsafe {
            libc::madvise(
                first as *mut libc::c_void,
                n * 64 / HUGE_PAGE * HUGE_PAGE,
                libc::MADV_HUGEPAGE,
            );
        }
        lines[skip..skip + n].fill(zero);
        Lines {
            lines,
            skip,
            len,
            _word: std::marker::PhantomData,
        }
    }

    /// `len` words not yet written: the caller writes each before it is
    /// read ([`Lines::uninit_words`]).
    pub(crate) fn uninit(len: usize) -> Lines<T> {
        let mut lines = Vec::with_capacity(Self::count(len));
        // SAFETY: MaybeUninit needs no initialisation
        unsafe { lines.set_len(Self::count(len)) };
        Lines {
            lines,
            skip: 0,
            len,
            _word: std::marker::PhantomData,
        }
    }

    /// The words as they may be written.
    pub(crate) fn uninit_words(&mut self) -> &mut [std::mem::MaybeUninit<T>] {
        // SAFETY: the lines hold len words of T (count), MaybeUninit<T>
        // has T's layout and needs no initialisation
        unsafe {
            std::slice::from_raw_parts_mut(self.lines.as_mut_ptr().add(self.skip).cast(), self.len)
        }
    }
}

impl<T> std::fmt::Debug for Lines<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Lines({} words)", self.len)
    }
}

impl<T: Word> std::ops::Deref for Lines<T> {
    type Target = [T];
    fn deref(&self) -> &[T] {
        // SAFETY: the lines hold len words of T; zeroed wrote them all,
        // and uninit's caller writes each before the first read
        unsafe { std::slice::from_raw_parts(self.lines.as_ptr().add(self.skip).cast(), self.len) }
    }
}

impl<T: Word> std::ops::DerefMut for Lines<T> {
    fn deref_mut(&mut self) -> &mut [T] {
        // SAFETY: as deref
        unsafe {
            std::slice::from_raw_parts_mut(self.lines.as_mut_ptr().add(self.skip).cast(), self.len)
        }
    }
}

/// The padded depth of a `k`-deep product.
fn padded_k(k: usize) -> usize {
    k.div_ceil(KP).max(1) * KP
}

/// Rounds an `m x k` matrix, element (i, p) at `data[off + i * rs + p *
/// cs]`, to bfloat16 tiles ([`A16`]). Panics if an element lies past
/// `data`.
pub fn round_a(data: &[f32], off: usize, m: usize, k: usize, rs: usize, cs: usize) -> A16 {
    let kp = padded_k(k);
    let rows = m.div_ceil(AMX_ROWS) * AMX_ROWS;
    let mut out = Lines::<u16>::zeroed(rows * kp);
    if m > 0 && k > 0 {
        assert!(
            off + (m - 1) * rs + (k - 1) * cs < data.len(),
            "lowp::round_a: view out of bounds"
        );
    }
    // a block of 16 rows: each row's steps of 32 rounded into their
    // tiles, 1 KiB apart
    let fill = |rb: usize, block: &mut [u16]| {
        let rows = 16.min(m.saturating_sub(rb * 16));
        if cs == 1 {
            round_block(&data[off + rb * 16 * rs..], rows, rs, k, block);
            return;
        }
        for r in 0..rows {
            let i = rb * 16 + r;
            for p in 0..k {
                block[p / KP * TILE / 2 + r * KP + p % KP] = to_bf16(data[off + i * rs + p * cs]);
            }
        }
    };
    let block = kp / KP * TILE / 2;
    let (head, _) = out.split_at_mut(m.div_ceil(16) * block);
    if m * k < 1 << 15 {
        head.chunks_mut(block)
            .enumerate()
            .for_each(|(rb, b)| fill(rb, b));
    } else {
        crate::kernels::threads::par_chunks(head, block, fill);
    }
    A16 {
        m,
        k,
        kp,
        data: out,
    }
}

/// The right operand (`k x n`) rounded to bfloat16 and packed (see the
/// module): panels of [`NR`] columns of `kp / 2` pairs each.
#[derive(Debug)]
pub struct PackedB16 {
    pub k: usize,
    pub n: usize,
    kp: usize,
    data: Lines<u32>,
}

impl PackedB16 {
    pub fn bytes(&self) -> usize {
        self.data.len() * 4
    }

    /// Panel `jp`'s first pair row.
    fn panel(&self, jp: usize) -> *const u32 {
        self.data[jp * (self.kp / 2) * NR..].as_ptr()
    }
}

/// Rounds and packs a `k x n` matrix, element (p, j) at `data[off + p * rs
/// + j * cs]` ([`PackedB16`]). Panics if an element lies past `data`.
pub fn pack_b(data: &[f32], off: usize, k: usize, n: usize, rs: usize, cs: usize) -> PackedB16 {
    if k > 0 && n > 0 {
        assert!(
            off + (k - 1) * rs + (n - 1) * cs < data.len(),
            "lowp::pack_b: view out of bounds"
        );
    }
    let kp = padded_k(k);
    let panels = n.div_ceil(NR);
    let mut out = Lines::<u32>::zeroed(panels * kp / 2 * NR);
    let at = |p: usize, j: usize| to_bf16(data[off + p * rs + j * cs]) as u32;
    let fill = |jp: usize, panel: &mut [u32]| {
        let cols = (n - jp * NR).min(NR);
        if rs == 1 {
            // each column lies in order (a linear layer's weight, `[n, k]`
            // read as its transpose): rounded as one run, whose pairs are
            // the packed words, laid down one a pair row
            let mut col = vec![0u16; kp];
            for j in 0..cols {
                round_into(&data[off + (jp * NR + j) * cs..][..k], &mut col[..k]);
                for (q, w) in col.chunks_exact(2).enumerate() {
                    panel[q * NR + j] = w[0] as u32 | (w[1] as u32) << 16;
                }
            }
            return;
        }
        if cs == 1 {
            // rows in order (attention's values): each pair of rows'
            // columns of the panel rounded and interleaved in one pass
            let line = |p: usize| &data[off + p * rs + jp * NR..][..cols];
            for (q, row) in panel.chunks_exact_mut(NR).enumerate().take(k.div_ceil(2)) {
                let hi = (2 * q + 1 < k).then(|| line(2 * q + 1));
                pair_rows(line(2 * q), hi, &mut row[..cols]);
            }
            return;
        }
        for (q, row) in panel.chunks_exact_mut(NR).enumerate().take(k.div_ceil(2)) {
            let (p0, p1) = (2 * q, 2 * q + 1);
            for (j, w) in row[..cols].iter_mut().enumerate() {
                let c = jp * NR + j;
                let hi = if p1 < k { at(p1, c) } else { 0 };
                *w = at(p0, c) | hi << 16;
            }
        }
    };
    if panels > 1 && k * n >= 1 << 15 {
        crate::kernels::threads::par_chunks(&mut out, kp / 2 * NR, fill);
    } else {
        out.chunks_mut(kp / 2 * NR)
            .enumerate()
            .for_each(|(jp, p)| fill(jp, p));
    }
    PackedB16 {
        k,
        n,
        kp,
        data: out,
    }
}

/// Row `r` of a matrix made as it is needed: `fill(r, out)` writes its
/// `n` elements (a convolution's im2col, row by row).
pub type RowFill<'a> = &'a (dyn Fn(usize, &mut [f32]) + Sync);

/// A `k x n` matrix made row by row (`fill`), rounded and packed as
/// [`pack_b`] packs: pairs of rows made, rounded and interleaved in turn,
/// the pairs split between the threads.
pub fn pack_b_rows(k: usize, n: usize, fill: RowFill) -> PackedB16 {
    let kp = padded_k(k);
    let panels = n.div_ceil(NR);
    let mut out = Lines::<u32>::zeroed(panels * kp / 2 * NR);
    let pairs = k.div_ceil(2);
    let base = U32Ptr(out.as_mut_ptr());
    let run = |q: usize, rows: &mut (Vec<f32>, Vec<f32>, Vec<u16>, Vec<u16>)| {
        let (r0, r1, h0, h1) = rows;
        fill(2 * q, r0);
        round_into(r0, h0);
        if 2 * q + 1 < k {
            fill(2 * q + 1, r1);
            round_into(r1, h1);
        } else {
            h1.fill(0);
        }
        for (jp, (a, b)) in h0.chunks(NR).zip(h1.chunks(NR)).enumerate() {
            // SAFETY: pair row q of panel jp lies inside out, and only
            // this task writes pair row q
            let dst =
                unsafe { std::slice::from_raw_parts_mut(base.at((jp * kp / 2 + q) * NR), a.len()) };
            for ((d, lo), hi) in dst.iter_mut().zip(a).zip(b) {
                *d = *lo as u32 | (*hi as u32) << 16;
            }
        }
    };
    let state = || (vec![0f32; n], vec![0f32; n], vec![0u16; n], vec![0u16; n]);
    if k * n >= 1 << 15 {
        crate::kernels::threads::par_for_init(pairs, state, |rows, q| run(q, rows));
    } else {
        let mut rows = state();
        (0..pairs).for_each(|q| run(q, &mut rows));
    }
    PackedB16 {
        k,
        n,
        kp,
        data: out,
    }
}

/// [`pack_b_rows`]'s output, which its tasks write in disjoint rows.
#[derive(Clone, Copy)]
struct U32Ptr(*mut u32);
// SAFETY: each task writes its own pair rows
unsafe impl Send for U32Ptr {}
unsafe impl Sync for U32Ptr {}

impl U32Ptr {
    /// # Safety
    /// `i` lies inside the buffer.
    unsafe fn at(self, i: usize) -> *mut u32 {
        self.0.add(i)
    }
}

/// One step of a convolution's product ([`conv::conv`]): 32 channels
/// (16 pairs) of one tap: byte
/// offsets into a row block of the weight (its tile) and into the
/// image's words.
#[derive(Clone, Copy)]
pub(crate) struct Step {
    pub(super) a: usize,
    pub(super) b: usize,
}

/// The operands of one block of a convolution's product, as the kernels
/// read them.
pub(crate) struct Operands<'a> {
    /// The weight's first row block of the block (its first row's
    /// block of 16), the row the block starts at within it (0, or 4 or 8
    /// ... for the AVX512-BF16 kernel's 12 rows) and bytes between row
    /// blocks.
    pub(super) a: *const u8,
    pub(super) row: usize,
    pub(super) block: usize,
    /// The image's word of the block's first output, and bytes between
    /// pairs of channels.
    pub(super) b: *const u8,
    pub(super) ldb: usize,
    pub(super) steps: &'a [Step],
}

impl Operands<'_> {
    /// Row `i` of the block in the weight's step `s` (32 bfloat16).
    #[inline(always)]
    pub(super) fn a_row(&self, i: usize, s: &Step) -> *const u8 {
        let r = self.row + i;
        // SAFETY (of the callers): the rows lie in the weight's blocks
        self.a
            .wrapping_add(r / 16 * self.block + r % 16 * KP * 2 + s.a)
    }
}

/// What [`gemm`] calls on each block of C once it is final: its rows,
/// its columns and C's first element. It runs on the thread that made
/// the block while other threads write C's other blocks, so it reaches
/// its block through the pointer, under no slice of C.
pub type Done<'a> = &'a (dyn Fn(std::ops::Range<usize>, std::ops::Range<usize>, *mut f32) + Sync);

/// What a product adds to each element of C as it stores it.
#[derive(Clone, Copy, Debug)]
pub enum Bias<'a> {
    None,
    /// One a column (`n`: a linear layer's).
    Columns(&'a [f32]),
    /// One a row (`m`: a convolution's, one an output channel).
    Rows(&'a [f32]),
}

/// A pointer the tasks of a product share, each writing its own block.
#[derive(Clone, Copy)]
struct CPtr(*mut f32);
// SAFETY: the tasks of a product write disjoint blocks of C.
unsafe impl Send for CPtr {}
unsafe impl Sync for CPtr {}

impl CPtr {
    /// C's first element (a method, as [`CPtr::at`]).
    fn first(self) -> *mut f32 {
        self.0
    }

    /// The element `i` places on (a method: closures capture the `Sync`
    /// wrapper, not its pointer).
    ///
    /// # Safety
    /// `i` lies inside C.
    unsafe fn at(self, i: usize) -> *mut f32 {
        self.0.add(i)
    }
}

/// `C (m x n, row stride ldc) = A B + bias` on up to
/// `threads` threads by kernel `kernel`, `done` called on each block of C
/// once it is final. C may be uninitialised: its `m` rows of `n` are
/// written whole. Panics when the shapes disagree, C or the bias is too
/// short, or the CPU lacks the kernel ([`runs`]).
#[allow(clippy::too_many_arguments)]
pub fn gemm(
    a: &A16,
    b: &PackedB16,
    c: &mut [std::mem::MaybeUninit<f32>],
    ldc: usize,
    bias: Bias,
    threads: usize,
    kernel: Kernel,
    done: Option<Done>,
) {
    assert_eq!(a.k, b.k, "lowp::gemm: inner dims differ");
    assert!(runs(kernel), "lowp::gemm: this CPU lacks {}", kernel.name());
    let (m, n) = (a.m, b.n);
    if m == 0 || n == 0 {
        return;
    }
    assert!(
        ldc >= n && c.len() >= (m - 1) * ldc + n,
        "lowp::gemm: C too short"
    );
    match bias {
        Bias::Columns(b) => assert!(b.len() >= n, "lowp::gemm: a bias shorter than a row"),
        Bias::Rows(b) => assert!(b.len() >= m, "lowp::gemm: a bias shorter than a column"),
        Bias::None => {}
    }
    // rows of C a block spans, by kernel
    let mr = match kernel {
        Kernel::Amx => amx::MR,
        Kernel::Avx512 => avx512::MR,
    };
    let (mp, np) = (m.div_ceil(mr), n.div_ceil(NR));
    let threads = if m * n * a.k < PARALLEL_MIN_MACS {
        1
    } else {
        threads.max(1)
    };
    // blocks of rows x columns of C, about four a thread, split so that
    // B (the weight, from memory) is read as few times as it can be
    let tasks = (threads * 4).min(mp * np).max(1);
    let rb = tasks.div_ceil(np).min(mp).max(1);
    let cb = tasks.div_ceil(rb).min(np).max(1);
    let cptr = CPtr(c.as_mut_ptr().cast::<f32>());
    // a step: 32 of k, one A tile a block of 16 rows, 16 pair rows of
    // the panel
    let steps: Vec<Step> = (0..a.kp / KP)
        .map(|s| Step {
            a: s * TILE,
            b: s * KP / 2 * NR * 4,
        })
        .collect();
    let job = Job {
        a,
        b,
        steps: &steps,
        c: cptr,
        ldc,
        bias,
    };
    let run = |t: usize| {
        let (r, q) = (t / cb, t % cb);
        let rows = r * mp / rb..(r + 1) * mp / rb;
        let cols = q * np / cb..(q + 1) * np / cb;
        // SAFETY: the kernel runs here (asserted); the block's rows x
        // columns of C lie inside c (checked above) and no other task
        // writes them; A's padded rows and B's panels hold every step
        unsafe { task(&job, kernel, rows.clone(), cols.clone()) };
        if let Some(done) = done {
            done(
                rows.start * mr..(rows.end * mr).min(m),
                cols.start * NR..(cols.end * NR).min(n),
                cptr.first(),
            );
        }
    };
    if threads == 1 || rb * cb == 1 {
        (0..rb * cb).for_each(run);
    } else {
        crate::kernels::threads::par_for(rb * cb, run);
    }
}

/// What the tasks of one [`gemm`] share: the operands, their steps along
/// `k` (one A tile, 16 pair rows of a panel), C and its bias.
struct Job<'a> {
    a: &'a A16,
    b: &'a PackedB16,
    steps: &'a [Step],
    c: CPtr,
    ldc: usize,
    bias: Bias<'a>,
}

/// One task of [`gemm`]: row blocks `rows` (of the kernel's rows) x
/// column panels `cols` of C, each block by the kernel's [`Operands`]
/// tile.
///
/// # Safety
/// The CPU has `kernel`; the task's blocks lie inside C and are its own.
#[cfg_attr(target_arch = "x86_64", target_feature(enable = "avx512f"))]
unsafe fn task(
    job: &Job,
    kernel: Kernel,
    rows: std::ops::Range<usize>,
    cols: std::ops::Range<usize>,
) {
    if kernel == Kernel::Amx {
        amx::configure();
        amx_task(job, rows, cols);
        amx::release();
        return;
    }
    let Job {
        a,
        b,
        steps,
        c,
        ldc,
        bias,
    } = *job;
    let mr = avx512::MR;
    let mut tile = Tile([0f32; AMX_ROWS * NR]);
    for jp in cols {
        let ncols = (b.n - jp * NR).min(NR);
        for ib in rows.clone() {
            let i0 = ib * mr;
            let nrows = (a.m - i0).min(mr);
            let ops = Operands {
                a: a.data[i0 / 16 * a.block() / 2..].as_ptr().cast(),
                row: i0 % 16,
                block: a.block(),
                b: b.panel(jp).cast(),
                ldb: NR * 4,
                steps,
            };
            avx512::tile(&ops, nrows, tile.0.as_mut_ptr());
            store(&tile.0, c, ldc, i0, jp * NR, nrows, ncols, bias);
        }
    }
}

/// Steps of `k` an AMX product takes over a panel before it moves to the
/// next row block ([`amx_task`]): 8 (16 KiB of the panel) against all of
/// them, one thread, B from L2 or memory: BERT's `[128, 768] x [768,
/// 768]` 1.05 against 0.91 TFLOP/s, `[512, 768] x [768, 3072]` 0.79
/// against 0.66 (2 and 4: 0.97-1.08 and 0.57-0.71; 16: 1.00 and 0.75).
const AMX_DEPTH: usize = 8;

/// [`task`] on AMX tiles, blocked along `k`: for each panel of B, its
/// steps [`AMX_DEPTH`] at a time, each run of steps over every row block
/// of the task (the panel's run, 16 KiB, read from L1 by all of them; A's
/// from L2), the blocks of C summed in a buffer of the task's rows and
/// stored once the panel is done.
///
/// # Safety
/// As [`task`]; the tiles are configured ([`amx::configure`]).
#[cfg_attr(target_arch = "x86_64", target_feature(enable = "avx512f"))]
unsafe fn amx_task(job: &Job, rows: std::ops::Range<usize>, cols: std::ops::Range<usize>) {
    let Job {
        a,
        b,
        steps,
        c,
        ldc,
        bias,
    } = *job;
    let mr = amx::MR;
    let mut tiles = vec![Tile([0f32; AMX_ROWS * NR]); rows.len()];
    let depth = AMX_DEPTH;
    for jp in cols {
        let ncols = (b.n - jp * NR).min(NR);
        for (run, from) in steps.chunks(depth).zip((0..).step_by(depth)) {
            for (ib, tile) in rows.clone().zip(tiles.iter_mut()) {
                let i0 = ib * mr;
                let ops = Operands {
                    a: a.data[i0 / 16 * a.block() / 2..].as_ptr().cast(),
                    row: 0,
                    block: a.block(),
                    b: b.panel(jp).cast(),
                    ldb: NR * 4,
                    steps: run,
                };
                amx::tile(&ops, tile.0.as_mut_ptr(), from > 0);
            }
        }
        for (ib, tile) in rows.clone().zip(&tiles) {
            let i0 = ib * mr;
            store(
                &tile.0,
                c,
                ldc,
                i0,
                jp * NR,
                (a.m - i0).min(mr),
                ncols,
                bias,
            );
        }
    }
}

/// The reference: `A B` (`a` `m x k` and `b` `k x n`, row-major) with
/// both rounded to bfloat16 and the products summed in float64, then
/// rounded to float32. What the kernels are tested against.
pub fn reference(a: &[f32], b: &[f32], m: usize, k: usize, n: usize) -> Vec<f32> {
    let mut c = vec![0f32; m * n];
    for i in 0..m {
        for j in 0..n {
            let s: f64 = (0..k)
                .map(|p| round_bf16(a[i * k + p]) as f64 * round_bf16(b[p * n + j]) as f64)
                .sum();
            c[i * n + j] = s as f32;
        }
    }
    c
}

/// Stores an `rows x cols` block held in `tile` (row stride `NR`) into
/// C at `(i0, j0)`, the bias added.
///
/// # Safety
/// The block lies inside C (row stride `ldc`), written by this thread only.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn store(
    tile: &[f32],
    c: CPtr,
    ldc: usize,
    i0: usize,
    j0: usize,
    rows: usize,
    cols: usize,
    bias: Bias,
) {
    for i in 0..rows {
        let src = &tile[i * NR..][..cols];
        let dst = std::slice::from_raw_parts_mut(c.at((i0 + i) * ldc + j0), cols);
        match bias {
            Bias::Columns(b) => {
                for ((d, s), b) in dst.iter_mut().zip(src).zip(&b[j0..j0 + cols]) {
                    *d = s + b;
                }
            }
            Bias::Rows(b) => {
                let b = b[i0 + i];
                for (d, s) in dst.iter_mut().zip(src) {
                    *d = s + b;
                }
            }
            Bias::None => dst.copy_from_slice(src),
        }
    }
}
