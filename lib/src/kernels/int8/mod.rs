//! int8 products (PT2E int8 graphs' convolutions and linear layers):
//! unsigned 8-bit rows of activations times a signed 8-bit weight, the
//! products summed exactly in 32-bit integers.
//!
//! Plain slices in, plain slices out: nothing here knows candle or the IR.
//!
//! Layouts. The left operand, an activation (a linear layer's rows, a
//! convolution's im2col rows), is made per call into rows of bytes
//! ([`A8`]: `k` padded with zeros to a multiple of [`KP`], the rows to a
//! multiple of [`ROWS`]). The right operand, a weight given as `[n][k]`
//! (a linear layer's `[out, in]`, a convolution's `[c_out, c_in * taps]`),
//! is packed once ([`PackedI8`]) in panels of [`NR`] columns, each
//! `[k / 4][NR]` words of four bytes (element `(4q + r, j)` in byte `r` of
//! word `(q, j)`): the layout AVX512-VNNI's `vpdpbusd` reads (four
//! unsigned-by-signed byte products added to each 32-bit lane), and the
//! packing also sums each column ([`PackedI8::column_sums`]) for the
//! zero-point compensation: `sum (x - z) w = sum x w - z sum w`.
//!
//! Kernels, by what the CPU has ([`kernel`], found once):
//! - [`Kernel::Vnni`]: AVX512-VNNI (`vnni.rs`), blocks of 12 x 32 of C in
//!   24 registers, `vpdpbusd` over quads along `k`;
//! - [`Kernel::Avx2`]: AVX2 without VNNI (`avx2.rs`), blocks of 6 x 16
//!   in 12 registers, `vpmaddwd` over pairs along `k` widened to 16 bits
//!   (exact where AVX2's byte product would saturate), the weight packed
//!   as pairs of i16 ([`Form::Pairs`]) instead of quads of bytes;
//! - [`Kernel::Scalar`]: the VNNI kernel's blocks in plain Rust, on any
//!   CPU (what the tests hold the block logic to; the executor does not
//!   fuse int8 products without AVX2: [`kernel`]).
//!
//! Each kernel is tested against [`reference`] (`lib/tests/int8.rs`),
//! exactly: integer sums have one answer.

mod avx2;
mod vnni;
pub mod winograd;

/// Columns of a packed panel of B (two 16-lane vectors).
pub const NR: usize = 32;
/// `k` is padded with zeros to a multiple of this (one `vpdpbusd` quad).
pub const KP: usize = 4;
/// A's rows are padded to a multiple of this.
pub const ROWS: usize = 32;
/// Rows of C a block spans.
pub const MR: usize = 12;
/// Multiply-adds below which a product runs on the calling thread.
const PARALLEL_MIN_MACS: usize = 1 << 17;
/// Bytes of A a task of [`gemm_rows`] makes at most (its rows stay in
/// L2 while the task's column panels pass over them).
const ROWS_CHUNK_BYTES: usize = 1 << 16;
/// The most terms a sum may have so that 255 * 128 each cannot overflow
/// an i32 (and `k * 255 * 128 + k * 255 * 128` cannot either).
pub const MAX_K: usize = (i32::MAX as usize) / (2 * 255 * 128);

/// The int8 product kernel a CPU runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kernel {
    /// AVX512-VNNI's `vpdpbusd`.
    Vnni,
    /// AVX2's `vpmaddwd` on operands widened to 16 bits.
    Avx2,
    /// Plain Rust (the reference's blocks; any CPU).
    Scalar,
}

impl Kernel {
    pub fn name(self) -> &'static str {
        match self {
            Kernel::Vnni => "AVX512-VNNI",
            Kernel::Avx2 => "AVX2",
            Kernel::Scalar => "scalar",
        }
    }
}

/// The kernel the executor's int8 products run on (found once):
/// AVX512-VNNI where the CPU has it (`PT2KIT_NO_AVX512=1` turns it off),
/// else AVX2 (`PT2KIT_NO_AVX2=1` turns both off), else none: without
/// either the executor leaves a PT2E graph's products in float32.
pub fn kernel() -> Option<Kernel> {
    if vnni::available() {
        Some(Kernel::Vnni)
    } else {
        avx2::available().then_some(Kernel::Avx2)
    }
}

/// Whether `k` runs on this CPU (a test asks for each kernel by name).
pub fn runs(k: Kernel) -> bool {
    match k {
        Kernel::Vnni => vnni::available(),
        Kernel::Avx2 => avx2::available(),
        Kernel::Scalar => true,
    }
}

/// The padded depth of a `k`-deep product.
fn padded_k(k: usize) -> usize {
    k.div_ceil(KP).max(1) * KP
}

/// The left operand: `m` rows of `kp` bytes (`k` padded to [`KP`] with
/// zeros), the rows padded to [`ROWS`].
pub struct A8 {
    pub m: usize,
    pub k: usize,
    kp: usize,
    data: Vec<u8>,
}

/// Row `r` of a matrix made as it is needed: `fill(r, out)` writes its
/// `k` bytes (an im2col row, an activation row shifted to unsigned).
pub type RowFill<'a> = &'a (dyn Fn(usize, &mut [u8]) + Sync);

impl A8 {
    /// An `m x k` matrix made row by row (`fill`), the rows split
    /// between the threads where there are many.
    pub fn from_rows(m: usize, k: usize, fill: RowFill) -> A8 {
        let kp = padded_k(k);
        let rows = m.div_ceil(ROWS).max(1) * ROWS;
        let mut data = vec![0u8; rows * kp];
        let (head, _) = data.split_at_mut(m * kp);
        if m * k < 1 << 15 {
            head.chunks_mut(kp)
                .enumerate()
                .for_each(|(i, r)| fill(i, &mut r[..k]));
        } else {
            // about eight row groups a thread
            let per = (m / 64).max(1);
            crate::kernels::threads::par_chunks(head, per * kp, |g, part| {
                for (i, r) in part.chunks_mut(kp).enumerate() {
                    fill(g * per + i, &mut r[..k]);
                }
            });
        }
        A8 { m, k, kp, data }
    }

    /// The row stride in bytes.
    pub fn stride(&self) -> usize {
        self.kp
    }
}

/// How a packed weight's words hold `k`: what each kernel reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Form {
    /// Four bytes of `k` a word (VNNI, scalar).
    Quads,
    /// Two of `k` a word, each sign-extended to an i16 (AVX2).
    Pairs,
}

impl Form {
    /// The form `kernel` reads.
    pub fn of(kernel: Kernel) -> Form {
        match kernel {
            Kernel::Avx2 => Form::Pairs,
            Kernel::Vnni | Kernel::Scalar => Form::Quads,
        }
    }

    /// Elements of `k` a word.
    fn per_word(self) -> usize {
        match self {
            Form::Quads => 4,
            Form::Pairs => 2,
        }
    }
}

/// The right operand packed (see the module), with its column sums.
#[derive(Debug)]
pub struct PackedI8 {
    pub k: usize,
    pub n: usize,
    pub form: Form,
    kp: usize,
    data: Vec<i32>,
    sums: Vec<i32>,
    /// A 3 x 3 convolution's weight for [`winograd::conv3x3`] too, where
    /// the caller asked ([`PackedI8::with_winograd`]).
    pub winograd: Option<winograd::Packed>,
}

impl PackedI8 {
    pub fn bytes(&self) -> usize {
        self.data.len() * 4 + self.sums.len() * 4 + self.winograd.as_ref().map_or(0, |w| w.bytes())
    }

    /// With `w`, the same weight as `[co][ci][3][3]` (torch's layout),
    /// packed for [`winograd::conv3x3`] as well.
    pub fn with_winograd(mut self, w: &[i8], co: usize, ci: usize) -> PackedI8 {
        self.winograd = Some(winograd::pack(w, co, ci));
        self
    }

    /// Each column's sum over `k` (the zero-point compensation's factor).
    pub fn column_sums(&self) -> &[i32] {
        &self.sums
    }

    /// Panel `jp`'s first word row.
    fn panel(&self, jp: usize) -> *const i32 {
        self.data[jp * (self.kp / self.form.per_word()) * NR..].as_ptr()
    }
}

/// Packs a weight given as `n` rows of `k` (`w[j * k + p]` is element
/// `(p, j)` of B) for `kernel` (its [`Form`]). Panics if `w` is shorter
/// than `n * k`.
pub fn pack_b(w: &[i8], n: usize, k: usize, kernel: Kernel) -> PackedI8 {
    assert!(w.len() >= n * k, "int8::pack_b: weight shorter than n x k");
    let form = Form::of(kernel);
    let per = form.per_word();
    let kp = padded_k(k);
    let panels = n.div_ceil(NR).max(1);
    let mut data = vec![0i32; panels * kp / per * NR];
    for (jp, panel) in data.chunks_mut(kp / per * NR).enumerate() {
        let cols = n.saturating_sub(jp * NR).min(NR);
        for j in 0..cols {
            let col = &w[(jp * NR + j) * k..][..k];
            for (q, part) in col.chunks(per).enumerate() {
                panel[q * NR + j] = match form {
                    Form::Quads => {
                        let mut b = [0u8; 4];
                        for (d, s) in b.iter_mut().zip(part) {
                            *d = *s as u8;
                        }
                        i32::from_le_bytes(b)
                    }
                    Form::Pairs => {
                        let lo = part[0] as i16 as u16 as u32;
                        let hi = part.get(1).map_or(0, |&v| v as i16 as u16 as u32);
                        (lo | hi << 16) as i32
                    }
                };
            }
        }
    }
    let sums = (0..n)
        .map(|j| w[j * k..][..k].iter().map(|&v| v as i32).sum::<i32>())
        .collect();
    PackedI8 {
        k,
        n,
        form,
        kp,
        data,
        sums,
        winograd: None,
    }
}

/// What [`gemm`] calls on each finished block of C: its first row and
/// column, its rows and columns, and the block (row stride [`NR`]). It
/// runs on the thread that made the block, other threads finishing other
/// blocks meanwhile.
pub type Block<'a> = &'a (dyn Fn(usize, usize, usize, usize, &[i32]) + Sync);

/// `C (m x n) = A B` in exact 32-bit sums, each [`MR`] x [`NR`] block
/// handed to `done` as it is finished, on up to `threads` threads by
/// `kernel`. Panics when the inner dims differ, `k` passes [`MAX_K`], the
/// CPU lacks the kernel ([`runs`]), or `b` was packed for another form.
pub fn gemm(a: &A8, b: &PackedI8, threads: usize, kernel: Kernel, done: Block) {
    assert_eq!(a.k, b.k, "int8::gemm: inner dims differ");
    assert!(a.k <= MAX_K, "int8::gemm: k = {} may overflow", a.k);
    assert!(runs(kernel), "int8::gemm: this CPU lacks {}", kernel.name());
    assert_eq!(
        b.form,
        Form::of(kernel),
        "int8::gemm: B packed for another kernel"
    );
    let (m, n) = (a.m, b.n);
    if m == 0 || n == 0 {
        return;
    }
    let (mp, np) = (m.div_ceil(MR), n.div_ceil(NR));
    let threads = if m * n * a.k < PARALLEL_MIN_MACS {
        1
    } else {
        threads.max(1)
    };
    // blocks of rows x columns of C, about four a thread, split so that
    // B (the weight) is read as few times as it can be
    let tasks = (threads * 4).min(mp * np).max(1);
    let rb = tasks.div_ceil(np).min(mp).max(1);
    let cb = tasks.div_ceil(rb).min(np).max(1);
    let run = |t: usize| {
        let (r, q) = (t / cb, t % cb);
        let rows = r * mp / rb..(r + 1) * mp / rb;
        let cols = q * np / cb..(q + 1) * np / cb;
        run_block(kernel, a, b, rows, cols, done);
    };
    if threads == 1 || rb * cb == 1 {
        (0..rb * cb).for_each(run);
    } else {
        crate::kernels::threads::par_for(rb * cb, run);
    }
}

/// Row panels `rows` x column panels `cols` of C on `kernel`, which the
/// caller has checked this CPU runs.
fn run_block(
    kernel: Kernel,
    a: &A8,
    b: &PackedI8,
    rows: std::ops::Range<usize>,
    cols: std::ops::Range<usize>,
    done: Block,
) {
    match kernel {
        // SAFETY: the CPU has VNNI (the callers check `runs`)
        Kernel::Vnni => unsafe { vnni::block(a, b, rows, cols, done) },
        // SAFETY: the CPU has AVX2 (the callers check `runs`)
        Kernel::Avx2 => unsafe { avx2::block(a, b, rows, cols, done) },
        Kernel::Scalar => scalar_block(a, b, rows, cols, done),
    }
}

/// [`gemm`] with A's rows made as they are needed (`fill(r, row)`: a
/// convolution's im2col rows), in one parallel region: each task makes
/// its own rows in a buffer of its thread's and runs its part of the
/// product on them, so the rows are never all made at once, nor split
/// between the threads apart from the product. A task of a column split
/// makes its rows again. Panics as [`gemm`].
#[allow(clippy::too_many_arguments)]
pub fn gemm_rows(
    m: usize,
    k: usize,
    fill: RowFill,
    b: &PackedI8,
    threads: usize,
    kernel: Kernel,
    done: Block,
) {
    assert_eq!(k, b.k, "int8::gemm_rows: inner dims differ");
    assert!(k <= MAX_K, "int8::gemm_rows: k = {k} may overflow");
    assert!(
        runs(kernel),
        "int8::gemm_rows: this CPU lacks {}",
        kernel.name()
    );
    assert_eq!(
        b.form,
        Form::of(kernel),
        "int8::gemm_rows: B packed for another kernel"
    );
    let n = b.n;
    if m == 0 || n == 0 {
        return;
    }
    let kp = padded_k(k);
    let (mp, np) = (m.div_ceil(MR), n.div_ceil(NR));
    let threads = if m * n * k < PARALLEL_MIN_MACS {
        1
    } else {
        threads.max(1)
    };
    // about four tasks a thread; where the weight outweighs the rows
    // (deep layers of few pixels) the columns are split first, so that
    // the weight is read once and the rows made again by each task,
    // else the rows, in chunks of at most about ROWS_CHUNK_BYTES
    let want = (threads * 4).min(mp * np).max(1);
    let rb = if n >= m {
        want.div_ceil(np)
    } else {
        want.max((m * kp).div_ceil(ROWS_CHUNK_BYTES))
    }
    .clamp(1, mp);
    let cb = want.div_ceil(rb).clamp(1, np);
    let run = |buf: &mut Vec<u8>, t: usize| {
        let (r, q) = (t / cb, t % cb);
        let panels = r * mp / rb..(r + 1) * mp / rb;
        let cols = q * np / cb..(q + 1) * np / cb;
        let (i0, i1) = (panels.start * MR, (panels.end * MR).min(m));
        let mut a = A8 {
            m: i1 - i0,
            k,
            kp,
            data: std::mem::take(buf),
        };
        // only the rows the kernels read (`a.m` of them), the padding of
        // `k` zeroed with each row
        a.data.resize(a.m * kp, 0);
        for (i, row) in a.data.chunks_exact_mut(kp).enumerate() {
            fill(i0 + i, &mut row[..k]);
            row[k..].fill(0);
        }
        let shifted = |i: usize, rows: usize, j0: usize, cols: usize, tile: &[i32]| {
            done(i0 + i, rows, j0, cols, tile)
        };
        run_block(kernel, &a, b, 0..panels.len(), cols, &shifted);
        *buf = a.data;
    };
    if threads == 1 {
        let mut buf = Vec::new();
        (0..rb * cb).for_each(|t| run(&mut buf, t));
    } else {
        crate::kernels::threads::par_for_init(rb * cb, Vec::new, run);
    }
}

/// Row panels `rows` (of [`MR`]) x column panels `cols` of C in plain
/// Rust, reading the packed layouts as the vector kernel does.
fn scalar_block(
    a: &A8,
    b: &PackedI8,
    rows: std::ops::Range<usize>,
    cols: std::ops::Range<usize>,
    done: Block,
) {
    let mut tile = [0i32; MR * NR];
    let quads = a.kp / 4;
    for jp in cols {
        let panel = &b.data[jp * quads * NR..][..quads * NR];
        let ncols = (b.n - jp * NR).min(NR);
        for ip in rows.clone() {
            let i0 = ip * MR;
            let nrows = (a.m - i0).min(MR);
            tile.fill(0);
            for i in 0..nrows {
                let row = &a.data[(i0 + i) * a.kp..][..a.kp];
                for (q, x) in row.chunks_exact(4).enumerate() {
                    for j in 0..NR {
                        let w = panel[q * NR + j].to_le_bytes();
                        let s: i32 = (0..4).map(|r| x[r] as i32 * w[r] as i8 as i32).sum();
                        tile[i * NR + j] += s;
                    }
                }
            }
            done(i0, nrows, jp * NR, ncols, &tile);
        }
    }
}

/// The reference: `C[i][j] = sum_p a[i * k + p] * w[j * k + p]` (`a` `m x
/// k` unsigned, `w` the weight as `n` rows of `k`), in i64 and checked to
/// fit an i32. What the kernels are tested against.
pub fn reference(a: &[u8], w: &[i8], m: usize, k: usize, n: usize) -> Vec<i32> {
    let mut c = vec![0i32; m * n];
    for i in 0..m {
        for j in 0..n {
            let s: i64 = (0..k)
                .map(|p| a[i * k + p] as i64 * w[j * k + p] as i64)
                .sum();
            c[i * n + j] = i32::try_from(s).expect("int8 reference: the sum overflows an i32");
        }
    }
    c
}
