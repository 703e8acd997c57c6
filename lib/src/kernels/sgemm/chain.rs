//! Element-wise chains run on blocks of C a product has just finished
//! (a layer's relu, gelu, residual add, hardswish): see [`Epilogue`].

use super::*;
use crate::kernels::vmath;

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
    /// GELU, exact ([`vmath::gelu_erf`]) or tanh's ([`vmath::gelu_tanh`]).
    GeluErf,
    GeluTanh,
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
#[derive(Clone, Copy)]
pub struct Epilogue<'a> {
    pub steps: &'a [EpiStep],
    /// The inputs `EpiSrc::Input` reads, each laid out as C.
    pub inputs: &'a [&'a [f32]],
    /// Where given, run instead of the steps: `map(at, span)` makes the
    /// span (elements `[at, at + span.len())` of C) the chain's result
    /// (a chain the steps cannot say, evaluated by its caller).
    pub map: Option<&'a EpiMap<'a>>,
}

impl Epilogue<'_> {
    /// Whether the chain reads no input, only numbers (a relu, a
    /// hardswish, a GELU): where an element lies is moot, so it may run on
    /// any layout of the same values.
    pub fn constants_only(&self) -> bool {
        self.map.is_none() && self.steps.iter().all(|s| matches!(s.b, EpiSrc::Const(_)))
    }

    /// Whether the chain is a hardswish alone (a kernel may apply it as
    /// it stores).
    pub fn hardswish_only(&self) -> bool {
        self.map.is_none()
            && matches!(
                self.steps,
                [EpiStep {
                    op: EpiOp::Hardswish,
                    ..
                }]
            )
    }

    /// Whether the chain is a relu alone (a kernel may apply it as it
    /// stores).
    pub fn relu_only(&self) -> bool {
        self.map.is_none()
            && matches!(
                self.steps,
                [EpiStep {
                    op: EpiOp::Relu,
                    ..
                }]
            )
    }
}

/// An [`Epilogue`]'s chain as its caller evaluates it on a span of C.
pub type EpiMap<'a> = dyn Fn(usize, &mut [f32]) + Sync + 'a;

/// An [`Epilogue`] over `len` elements of C from `c` (element `at` of C,
/// and of the inputs), in place, step by step (one op over the span at a time), on a
/// block of C the product has finished (still in L2). Not in the kernel's
/// store: there the accumulators' registers were spilled (ResNet-18 at
/// batch 8, 15% slower).
///
/// # Safety
/// The span is written by this thread alone; each input holds elements
/// `at..at + len`; the packed kernels' instruction set is present
/// ([`available`]).
pub(super) unsafe fn epilogue_span(e: &Epilogue, at: usize, c: *mut f32, len: usize) {
    if let Some(map) = e.map {
        return map(at, std::slice::from_raw_parts_mut(c, len));
    }
    if avx512() {
        epilogue_avx512(e, at, c, len)
    } else {
        epilogue_avx2(e, at, c, len)
    }
}

/// Fetches into L2 the elements `[at, at + len)` of each input an
/// [`Epilogue`]'s steps read (a residual, from memory), ahead of
/// [`epilogue_span`] there.
///
/// # Safety
/// Each input holds elements `at..at + len`.
pub(super) unsafe fn prefetch_inputs(e: &Epilogue, at: usize, len: usize) {
    #[cfg(target_arch = "x86_64")]
    for step in e.steps.iter().filter(|_| e.map.is_none()) {
        if let EpiSrc::Input(k) = step.b {
            let p = e.inputs[k].as_ptr().add(at);
            for q in (0..len).step_by(16) {
                std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T1 }>(
                    p.add(q).cast(),
                );
            }
        }
    }
}

/// torch's hardswish, `x * clamp(x + 3, 0, 6) / 6`, in its order (the
/// epilogue's step, and a kernel's as it stores).
#[inline(always)]
pub(super) unsafe fn hardswish<S: F32x16>(x: S) -> S {
    let c = x.add(S::splat(3.0)).clamp(S::zero(), S::splat(6.0));
    x.mul(c).div(S::splat(6.0))
}

/// [`epilogue_span`]'s steps on AVX-512F.
#[target_feature(enable = "avx512f")]
unsafe fn epilogue_avx512(e: &Epilogue, at: usize, c: *mut f32, len: usize) {
    epilogue_steps::<Avx512>(e, at, c, len)
}

/// [`epilogue_span`]'s steps on AVX2 + FMA.
#[target_feature(enable = "avx2,fma")]
unsafe fn epilogue_avx2(e: &Epilogue, at: usize, c: *mut f32, len: usize) {
    epilogue_steps::<Avx2>(e, at, c, len)
}

#[inline(always)]
unsafe fn epilogue_steps<S: F32x16>(e: &Epilogue, at: usize, c: *mut f32, len: usize) {
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
            ($op:expr, $p:expr) => {
                epilogue_map::<S, { $op }>(c, b, k, len, $p)
            };
        }
        match step.op {
            EpiOp::Relu => each!(MAP_RELU, (0.0, 0.0)),
            EpiOp::Add(k) => each!(MAP_ADD, (k, 0.0)),
            EpiOp::Sub(k) => each!(MAP_SUB, (k, 0.0)),
            EpiOp::Mul => each!(MAP_MUL, (0.0, 0.0)),
            EpiOp::Div => each!(MAP_DIV, (0.0, 0.0)),
            EpiOp::Clamp(lo, hi) => each!(MAP_CLAMP, (lo, hi)),
            EpiOp::Hardswish => each!(MAP_HARDSWISH, (0.0, 0.0)),
            // the functions the gelu rows map with, vectorised the same way
            EpiOp::GeluErf => {
                vmath::map_in_place_here(std::slice::from_raw_parts_mut(c, len), vmath::gelu_erf)
            }
            EpiOp::GeluTanh => {
                vmath::map_in_place_here(std::slice::from_raw_parts_mut(c, len), vmath::gelu_tanh)
            }
        }
    }
}

/// An [`Epilogue`] over `span`, elements `[at, at + span.len())` of an
/// output laid out as the epilogue's inputs: what [`gemm_direct`] runs on
/// each block it finishes, for kernels that finish blocks of their own (a
/// depthwise convolution's planes). Panics without the packed kernels' instruction
/// set ([`available`]) or where an input is shorter.
pub fn run_epilogue(e: &Epilogue, at: usize, span: &mut [f32]) {
    assert!(
        available(),
        "run_epilogue: this CPU has neither AVX-512F nor AVX2 + FMA"
    );
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

/// Sixteen floats from `q`, all of them (`whole`) or the lanes of `m`.
///
/// # Safety
/// The lanes read are readable; `S`'s instruction set is present.
#[inline(always)]
unsafe fn load_part<S: F32x16>(whole: bool, m: u16, q: *const f32) -> S {
    if whole {
        S::load(q)
    } else {
        S::load_mask(m, q)
    }
}

// [`epilogue_map`]'s ops, a const parameter: each its own instance, with
// no closure (a closure may stay out of line, without the kernel's
// instruction set: see `simd`; the plain release build left clamp's so).
const MAP_RELU: u8 = 0;
const MAP_ADD: u8 = 1;
const MAP_SUB: u8 = 2;
const MAP_MUL: u8 = 3;
const MAP_DIV: u8 = 4;
const MAP_CLAMP: u8 = 5;
const MAP_HARDSWISH: u8 = 6;

/// [`epilogue_map`]'s op `OP` on `x` and the operand `b`, with its
/// numbers `p` (the scale of an add or a sub; a clamp's bounds).
///
/// # Safety
/// `S`'s instruction set is present.
#[inline(always)]
unsafe fn map_op<S: F32x16, const OP: u8>(x: S, b: S, p: (f32, f32)) -> S {
    match OP {
        // max gives its second operand for NaN and for two zeros
        MAP_RELU => S::zero().max(x),
        MAP_ADD => x.add(b.mul(S::splat(p.0))),
        MAP_SUB => x.sub(b.mul(S::splat(p.0))),
        MAP_MUL => x.mul(b),
        MAP_DIV => x.div(b),
        MAP_CLAMP => x.clamp(S::splat(p.0), S::splat(p.1)),
        _ => hardswish(x),
    }
}

/// One step of [`epilogue_span`]: each `x` of the span to `map_op::<OP>(x,
/// b, p)`, `b` the input's element there (`input`) or the number `k`.
///
/// # Safety
/// As [`epilogue_span`], on a CPU with `S`'s instruction set.
#[inline(always)]
unsafe fn epilogue_map<S: F32x16, const OP: u8>(
    c: *mut f32,
    input: Option<*const f32>,
    k: f32,
    len: usize,
    p: (f32, f32),
) {
    let kv = S::splat(k);
    // whole vectors with plain loads and stores, the tail under a mask
    // (every vector masked spent more on its mask than on its op: a
    // relu's pass over a depthwise convolution's 88 x 28 x 28 outputs,
    // in L1, was 14% of its samples)
    let mut at = 0;
    while at < len {
        let at_c = c.add(at);
        let whole = at + 16 <= len;
        let m = if whole { u16::MAX } else { first(len - at) };
        // (a function, not a closure: see `simd`)
        let b = match input {
            Some(i) => load_part::<S>(whole, m, i.add(at)),
            None => kv,
        };
        let v = map_op::<S, OP>(load_part::<S>(whole, m, at_c), b, p);
        if whole {
            v.store(at_c)
        } else {
            v.store_mask(m, at_c)
        }
        at += 16;
    }
}
