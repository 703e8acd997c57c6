//! Sliding windows over planes, shared by the depthwise convolution and
//! the max pool: [`PlaneWindows`] (the geometry) and [`window_planes`]
//! (every plane, its padded input split into stride phases so each tap
//! reads a contiguous run).

use crate::error::{Error, Result};

/// The geometry of a sliding window over up to three spatial dims (depth,
/// height, width; fewer lead with dims of size 1, kernel 1, stride 1):
/// what pooling, convolution and im2col share. Each family reads its own
/// arguments into it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Windows {
    pub input: [usize; 3],
    pub kernel: [usize; 3],
    pub stride: [usize; 3],
    pub pad: [usize; 3],
    pub dilation: [usize; 3],
    pub output: [usize; 3],
}

impl Windows {
    /// Elements of one input plane.
    pub fn plane(&self) -> usize {
        self.input.iter().product()
    }

    /// Elements of one output plane.
    pub fn out_plane(&self) -> usize {
        self.output.iter().product()
    }

    /// Taps of the kernel.
    pub fn taps(&self) -> usize {
        self.kernel.iter().product()
    }

    /// Whether the windows are 2-D (or 1-D): one plane of input depth read
    /// by a kernel one deep, no padding along the depth. A 3-D convolution
    /// over one plane with a deeper kernel is not (its padding holds the
    /// kernel's other depth taps): the 2-D kernels must not take it.
    pub fn planar(&self) -> bool {
        self.input[0] == 1 && self.kernel[0] == 1 && self.pad[0] == 0 && self.output[0] == 1
    }
}

/// The last `v.len()` entries of a 3-vector filled with `fill`.
pub fn lift(v: &[usize], fill: usize) -> [usize; 3] {
    let mut a = [fill; 3];
    let n = v.len().min(3);
    a[3 - n..].copy_from_slice(&v[v.len() - n..]);
    a
}

impl Windows {
    /// A convolution's windows over the spatial sizes `input` under a
    /// kernel of sizes `kernel`, with stride, padding and dilation per dim.
    pub fn new(
        input: &[usize],
        kernel: &[usize],
        stride: &[usize],
        pad: &[usize],
        dilation: &[usize],
    ) -> Result<Windows> {
        let mut g = Windows {
            input: lift(input, 1),
            kernel: lift(kernel, 1),
            stride: lift(stride, 1),
            pad: lift(pad, 0),
            dilation: lift(dilation, 1),
            output: [1; 3],
        };
        if g.kernel.contains(&0) || g.stride.contains(&0) || g.dilation.contains(&0) {
            return Err(Error::bad_input(
                "convolution: kernel, stride and dilation must be positive",
            ));
        }
        for a in 0..3 {
            g.output[a] = conv_span(
                g.input[a],
                g.pad[a],
                g.dilation[a],
                g.kernel[a],
                g.stride[a],
            )?;
        }
        Ok(g)
    }
}

/// The output size of a convolution along one dim.
pub fn conv_span(n: usize, p: usize, d: usize, k: usize, s: usize) -> Result<usize> {
    (n + 2 * p)
        .checked_sub(d * (k - 1) + 1)
        .map(|v| v / s + 1)
        .ok_or_else(|| Error::bad_input("convolution: the kernel is larger than the padded input"))
}

impl PlaneWindows {
    /// A convolution's windows over planes of `h x w` (refused where the
    /// kernel is larger than the padded plane).
    pub fn conv(
        h: usize,
        w: usize,
        (kh, kw): (usize, usize),
        stride: (usize, usize),
        pad: (usize, usize),
        dil: (usize, usize),
    ) -> Result<PlaneWindows> {
        Ok(PlaneWindows {
            h,
            w,
            kh,
            kw,
            stride,
            pad,
            dil,
            oh: conv_span(h, pad.0, dil.0, kh, stride.0)?,
            ow: conv_span(w, pad.1, dil.1, kw, stride.1)?,
        })
    }
}

/// The windows over one plane: input, kernel, stride, padding and
/// dilation (rows, columns), output.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct PlaneWindows {
    pub h: usize,
    pub w: usize,
    pub kh: usize,
    pub kw: usize,
    pub stride: (usize, usize),
    pub pad: (usize, usize),
    pub dil: (usize, usize),
    pub oh: usize,
    pub ow: usize,
}

/// What a windowed op does with each kernel tap ([`window_plane`]).
#[derive(Clone, Copy)]
pub enum WindowOp<'a> {
    /// A multiply-add by the tap's weight (a depthwise convolution).
    Fma(&'a [f32]),
    /// The maximum, NaN winning (a max pool, as torch's kernel).
    Max,
}

/// Lanes of the output [`window_plane`] rounds up to.
pub const WINDOW_LANES: usize = 16;

/// How every plane of a windowed op is laid out (see [`window_planes`]),
/// worked out once per op: the phases' pitch and length, where each tap
/// reads, and which padded columns of each column phase hold input.
pub struct WindowPlan {
    pub g: PlaneWindows,
    pub pitch: usize,
    pub phase_len: usize,
    pub acc_len: usize,
    pub starts: Vec<usize>,
}

impl WindowPlan {
    pub fn new(g: PlaneWindows) -> WindowPlan {
        let (sy, sx) = g.stride;
        // padded sizes: enough for every window (ceil mode may overhang)
        let hp = (g.h + 2 * g.pad.0).max((g.oh - 1) * sy + g.dil.0 * (g.kh - 1) + 1);
        let wp = (g.w + 2 * g.pad.1).max((g.ow - 1) * sx + g.dil.1 * (g.kw - 1) + 1);
        let (rows, pitch) = (hp.div_ceil(sy), wp.div_ceil(sx));
        // the outputs at the phases' pitch, in whole vectors
        let acc_len = (g.oh * pitch).div_ceil(WINDOW_LANES) * WINDOW_LANES;
        // slack past a phase's end: the last vector's overhang past the
        // farthest tap
        let slack = acc_len - g.oh * pitch + (g.kw * g.dil.1) / sx + pitch + 1;
        let phase_len = rows * pitch + slack;
        let starts = (0..g.kh * g.kw)
            .map(|t| {
                let (ty, tx) = ((t / g.kw) * g.dil.0, (t % g.kw) * g.dil.1);
                ((ty % sy) * sx + tx % sx) * phase_len + (ty / sy) * pitch + tx / sx
            })
            .collect();
        WindowPlan {
            g,
            pitch,
            phase_len,
            acc_len,
            starts,
        }
    }
}

/// What a kernel runs on each block of its output it has finished: `f(at,
/// block)`, the block from element `at`.
pub type Finish<'a> = dyn Fn(usize, &mut [f32]) + Sync + 'a;

/// What a thread's [`window_planes`] scratch was padded for: the
/// geometry and the padding value's bits.
type ScratchKey = (PlaneWindows, u32);

thread_local! {
    /// A thread's scratch for [`window_planes`] (phases and output), with
    /// the geometry and padding value its padding was set for; taken out
    /// while a task runs.
    static WINDOW_SCRATCH: std::cell::RefCell<(Vec<f32>, Option<ScratchKey>)> =
        const { std::cell::RefCell::new((Vec::new(), None)) };
}

/// Every output plane of a windowed op (a depthwise convolution, a max
/// pool) into `out` (planes of `oh * ow`): plane `p` reads input plane
/// `plane(p).0` of `xs` (planes of `h * w`), starts at `plane(p).1` and
/// applies `plane(p).2` at each tap. The planes are split over the
/// threads in groups big enough to be worth a task, each plane by
/// [`window_plane`]; `then(at, planes)`, where given, runs on each task's
/// planes (from element `at` of `out`) once they are done, while they are
/// in the cache (a convolution's epilogue). `out` may be uninitialised:
/// every plane is written whole before `then` or anyone reads it.
pub fn window_planes<'a>(
    g: PlaneWindows,
    xs: &[f32],
    out: &mut [std::mem::MaybeUninit<f32>],
    pad_value: f32,
    plane: impl Fn(usize) -> (usize, f32, WindowOp<'a>) + Sync,
    then: Option<&Finish<'_>>,
) {
    let plan = WindowPlan::new(g);
    let (per_in, per_out) = (plan.g.h * plan.g.w, (plan.g.oh * plan.g.ow).max(1));
    let count = out.len() / per_out;
    // outputs times taps: about 32 thousand a task (tens of microseconds)
    let work = per_out * plan.starts.len().max(1);
    let threads = rayon::current_num_threads().max(1);
    let group = (32_768 / work).clamp(1, count.div_ceil(threads).max(1));
    let need = plan.g.stride.0 * plan.g.stride.1 * plan.phase_len + plan.acc_len;
    let key = (plan.g, pad_value.to_bits());
    let run = |(gi, dsts): (usize, &mut [std::mem::MaybeUninit<f32>])| {
        // the phases' padding and slack are the same in every plane: set
        // once for this geometry and padding value, kept by the thread
        // between tasks and calls, and each plane writes only its input
        // over them (a fresh one a task, filled, was 11% of the samples
        // of MobileNetV3's first depthwise layer, sixteen 112x112 planes)
        let mut kept = WINDOW_SCRATCH.with(|s| std::mem::take(&mut *s.borrow_mut()));
        if kept.1 != Some(key) || kept.0.len() < need {
            kept.0.clear();
            kept.0.resize(need, pad_value);
            kept.1 = Some(key);
        }
        let scratch = &mut kept.0[..need];
        for (j, dst) in dsts.chunks_mut(per_out).enumerate() {
            let (ip, init, op) = plane(gi * group + j);
            window_plane(&plan, &xs[ip * per_in..][..per_in], init, dst, scratch, op);
        }
        WINDOW_SCRATCH.with(|s| *s.borrow_mut() = kept);
        if let Some(then) = then {
            // SAFETY: every plane of the task was written just above
            let dsts = unsafe { &mut *(dsts as *mut [std::mem::MaybeUninit<f32>] as *mut [f32]) };
            then(gi * group * per_out, dsts);
        }
    };
    if count <= group {
        run((0, out));
    } else {
        crate::kernels::threads::par_chunks(out, per_out * group, |i, d| run((i, d)));
    }
}

crate::kernels::vmath::multiversion! {
    /// One output plane of a windowed op: the input plane, padded (the
    /// padding already in `scratch`, see [`window_planes`]), is split into `sy * sx` phases (rows `py, py + sy, ...`
    /// by columns `px, px + sx, ...`), each `rows x pitch`; the output,
    /// started at `init`, is kept at that pitch. Every kernel tap then reads
    /// a contiguous run of a phase, so the columns past the output's width
    /// are computed and dropped, where short rows (MobileNet's 7 to 56)
    /// would spend their time in scalar tails; the output is computed four
    /// vectors at a time, each going through every tap while it stays in
    /// registers ([`window_taps`]).
    pub fn window_plane(
        plan: &WindowPlan,
        src: &[f32],
        init: f32,
        dst: &mut [std::mem::MaybeUninit<f32>],
        scratch: &mut [f32],
        op: WindowOp,
    ) {
        let (g, pitch, phase_len) = (&plan.g, plan.pitch, plan.phase_len);
        let (sy, sx) = g.stride;
        let (phases, acc) = scratch.split_at_mut(sy * sx * phase_len);
        let (mut py, mut r) = (g.pad.0 % sy, g.pad.0 / sy);
        for row in src.chunks_exact(g.w).take(g.h) {
            let base = py * sx * phase_len + r * pitch;
            if sx == 1 {
                // the row at its padding (every column lies below the pitch)
                let d = &mut phases[base + g.pad.1..][..g.w];
                if g.w < 16 {
                    for (d, v) in d.iter_mut().zip(row) {
                        *d = *v;
                    }
                } else {
                    d.copy_from_slice(row);
                }
            } else {
                scatter_columns(row, g.pad.1, sx, pitch, &mut phases[base..], phase_len);
            }
            py += 1;
            if py == sy {
                py = 0;
                r += 1;
            }
        }
        window_taps(phases, &plan.starts, op, init, acc);
        // every element of the plane written (it may be uninitialised)
        for (oy, d) in dst.chunks_exact_mut(g.ow).take(g.oh).enumerate() {
            for (d, v) in d.iter_mut().zip(&acc[oy * pitch..][..g.ow]) {
                d.write(*v);
            }
        }
    }
}

crate::kernels::vmath::multiversion! {
    /// A row's columns into the column phases of a stride `sx` after `pad`
    /// columns of padding: column `c` is padded column `q = c + pad`, which
    /// goes to `dst[(q % sx) * phase_len + q / sx]` when `q / sx < pitch`
    /// (the columns no window reads are left out). Whole runs, no division
    /// per element; two phases in one pass over pairs of columns, which
    /// vectorises.
    pub fn scatter_columns(row: &[f32], pad: usize, sx: usize, pitch: usize, dst: &mut [f32], phase_len: usize) {
        let w = row.len();
        if sx == 2 {
            let (even, odd) = dst.split_at_mut(phase_len);
            return scatter_pair_here(row, pad, pitch, even, odd);
        }
        for px in 0..sx {
            // padded columns px + j sx holding input: j in [lo, hi)
            let lo = pad.saturating_sub(px).div_ceil(sx);
            let hi = (pad + w).saturating_sub(px).div_ceil(sx).min(pitch);
            if lo >= hi {
                continue;
            }
            let c = px + lo * sx - pad;
            let phase = &mut dst[px * phase_len..][lo..hi];
            if sx == 1 {
                phase.copy_from_slice(&row[c..c + (hi - lo)]);
            } else {
                for (d, v) in phase.iter_mut().zip(row[c..].iter().step_by(sx)) {
                    *d = *v;
                }
            }
        }
    }
}

/// [`scatter_columns`] for a stride of 2, into the two phases' lines
/// `even` and `odd` (each at least `pitch` long), which need not lie
/// together: pairs of columns, which vectorises, then the first and last
/// columns left.
#[inline(always)] // into each instruction set's copy of its callers
pub fn scatter_pair_here(row: &[f32], pad: usize, pitch: usize, even: &mut [f32], odd: &mut [f32]) {
    let w = row.len();
    // pairs from the first column c0 whose q is even
    let c0 = pad % 2;
    let j = (c0 + pad) / 2;
    let pairs = (w.saturating_sub(c0) / 2).min(pitch.saturating_sub(j));
    for ((d0, d1), two) in even[j..j + pairs]
        .iter_mut()
        .zip(&mut odd[j..j + pairs])
        .zip(row[c0..].chunks_exact(2))
    {
        *d0 = two[0];
        *d1 = two[1];
    }
    // the columns left: the first (when c0 is 1) and the last
    for c in (0..c0.min(w)).chain(c0 + 2 * pairs..w) {
        let q = c + pad;
        if q / 2 < pitch {
            if q.is_multiple_of(2) {
                even[q / 2] = row[c];
            } else {
                odd[q / 2] = row[c];
            }
        }
    }
}

crate::kernels::vmath::multiversion! {
    /// A padded row's two phase lines for a stride of 2 (`even`, `odd`,
    /// `pitch` long each, anywhere): the row's columns scattered over them
    /// ([`scatter_pair_here`]) and every column no input lands in zeroed
    /// (the padding; `row` empty: all of it).
    pub fn scatter_pair_lines(row: &[f32], pad: usize, pitch: usize, even: &mut [f32], odd: &mut [f32]) {
        for (px, line) in [&mut *even, &mut *odd].into_iter().enumerate() {
            // padded columns px + 2 j holding input: j in [lo, hi)
            let lo = pad.saturating_sub(px).div_ceil(2).min(pitch);
            let hi = (pad + row.len()).saturating_sub(px).div_ceil(2).clamp(lo, pitch);
            if row.is_empty() {
                line[..pitch].fill(0.0);
            } else {
                line[..lo].fill(0.0);
                line[hi..pitch].fill(0.0);
            }
        }
        if !row.is_empty() {
            scatter_pair_here(row, pad, pitch, even, odd);
        }
    }
}

/// `acc[i] = op over taps t of phases[starts[t] + i]`, from `init`
/// (`acc.len()` a multiple of [`WINDOW_LANES`]; every `starts[t] +
/// acc.len()` inside `phases`).
#[inline(always)] // into each instruction set's copy of window_plane
pub fn window_taps(phases: &[f32], starts: &[usize], op: WindowOp, init: f32, acc: &mut [f32]) {
    assert!(acc.len().is_multiple_of(WINDOW_LANES));
    assert!(starts.iter().all(|&s| s + acc.len() <= phases.len()));
    if let WindowOp::Fma(w) = op {
        assert!(w.len() >= starts.len());
    }
    #[cfg(target_arch = "x86_64")]
    match crate::kernels::isa() {
        // SAFETY: the instruction set is present; the assertions keep
        // every read inside phases and every write inside acc.
        crate::kernels::Isa::Avx512 => {
            return unsafe { window_taps_avx512(phases, starts, op, init, acc) }
        }
        crate::kernels::Isa::Avx2 => {
            return unsafe { window_taps_avx2(phases, starts, op, init, acc) }
        }
        crate::kernels::Isa::Base => {}
    }
    for (i, out) in acc.chunks_exact_mut(WINDOW_LANES).enumerate() {
        let mut a = [init; WINDOW_LANES];
        for (t, &s) in starts.iter().enumerate() {
            let xs = &phases[s + i * WINDOW_LANES..][..WINDOW_LANES];
            match op {
                WindowOp::Fma(w) => {
                    for (o, v) in a.iter_mut().zip(xs) {
                        *o += *v * w[t];
                    }
                }
                WindowOp::Max => {
                    for (o, v) in a.iter_mut().zip(xs) {
                        *o = if *v > *o || v.is_nan() { *v } else { *o };
                    }
                }
            }
        }
        out.copy_from_slice(&a);
    }
}

// `window_taps_in` for AVX-512F and for AVX2 + FMA (the same bits: one
// FMA a tap); safety: the instruction set is present, the bounds
// [`window_taps`] asserts hold.
#[cfg(target_arch = "x86_64")]
crate::kernels::simd::isa_entries!(window_taps_avx512, window_taps_avx2 = window_taps_in[](
    phases: &[f32],
    starts: &[usize],
    op: WindowOp,
    init: f32,
    acc: &mut [f32],
));

/// [`window_taps`] with four (then one) 16-lane accumulators in registers.
///
/// # Safety
/// `S`'s instruction set is present; the bounds [`window_taps`] asserts hold.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn window_taps_in<S: crate::kernels::simd::F32x16>(
    phases: &[f32],
    starts: &[usize],
    op: WindowOp,
    init: f32,
    acc: &mut [f32],
) {
    const L: usize = WINDOW_LANES;
    #[inline(always)]
    unsafe fn step<S: crate::kernels::simd::F32x16>(op: WindowOp, t: usize, a: S, x: S) -> S {
        match op {
            WindowOp::Fma(w) => x.fma(S::splat(*w.get_unchecked(t)), a),
            // x where x > a or x is NaN (a NaN already in a stays)
            WindowOp::Max => a.above_or_nan(x),
        }
    }
    let (p, out) = (phases.as_ptr(), acc.as_mut_ptr());
    let mut i = 0;
    while i + 4 * L <= acc.len() {
        let mut a = [S::splat(init); 4];
        for (t, &s) in starts.iter().enumerate() {
            let x = p.add(s + i);
            a[0] = step(op, t, a[0], S::load(x));
            a[1] = step(op, t, a[1], S::load(x.add(L)));
            a[2] = step(op, t, a[2], S::load(x.add(2 * L)));
            a[3] = step(op, t, a[3], S::load(x.add(3 * L)));
        }
        for (j, v) in a.iter().enumerate() {
            v.store(out.add(i + j * L));
        }
        i += 4 * L;
    }
    while i < acc.len() {
        let mut a = S::splat(init);
        for (t, &s) in starts.iter().enumerate() {
            a = step(op, t, a, S::load(p.add(s + i)));
        }
        a.store(out.add(i));
        i += L;
    }
}
