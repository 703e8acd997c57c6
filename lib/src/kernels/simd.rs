//! Sixteen float32 lanes, as one AVX-512 register ([`Avx512`]) or two
//! AVX2 ones ([`Avx2`]): the kernels that keep blocks of 16 columns in
//! registers (the packed and direct products, their epilogues) are
//! written once over [`F32x16`] and compiled for each instruction set, so
//! a CPU without AVX-512 runs the same kernels, in the same order of
//! operations (the same bits: an FMA is one rounding on both), not the
//! `gemm` crate's (an AVX2 Zen 3 ran MobileNetV3's classifier, two
//! matrix-vector products, in 18 ms through it).
//!
//! Lanes are named by a `u16` mask (bit `i`, lane `i`); a masked load
//! gives zero in the lanes left out and a masked store leaves them alone,
//! and neither touches their memory (it may lie outside the buffer).
//!
//! The methods are `#[inline(always)]` without target features of their
//! own: they are inlined into a kernel compiled with its instruction set
//! (`#[target_feature]`), where the intrinsics inline in turn. Call them
//! only from such a kernel, on a CPU that has the set ([`super::cpu`]).

#[cfg(target_arch = "x86_64")]
use std::arch::x86_64::*;

/// Sixteen float32 lanes (see the module).
///
/// # Safety
/// Every method needs the implementation's instruction set on this CPU;
/// pointers need the lanes they name readable (loads) or writable (stores).
pub(crate) trait F32x16: Copy {
    unsafe fn zero() -> Self;
    unsafe fn splat(x: f32) -> Self;
    unsafe fn load(p: *const f32) -> Self;
    /// The lanes of `m` from `p`, zero elsewhere (their memory untouched).
    unsafe fn load_mask(m: u16, p: *const f32) -> Self;
    unsafe fn store(self, p: *mut f32);
    /// The lanes of `m` to `p` (the others' memory untouched).
    unsafe fn store_mask(self, m: u16, p: *mut f32);
    unsafe fn add(self, o: Self) -> Self;
    unsafe fn sub(self, o: Self) -> Self;
    unsafe fn mul(self, o: Self) -> Self;
    unsafe fn div(self, o: Self) -> Self;
    /// `self * b + c`, one rounding.
    unsafe fn fma(self, b: Self, c: Self) -> Self;
    /// The larger, `o` where either is NaN or both are zeros (x86's max).
    unsafe fn max(self, o: Self) -> Self;
    /// torch's clamp: `lo` where below it, `hi` where above (ordered
    /// compares: NaN stays).
    unsafe fn clamp(self, lo: Self, hi: Self) -> Self;
    /// `x` where it is above `self` or NaN, else `self` (a max pool's
    /// step: a NaN taken stays).
    unsafe fn above_or_nan(self, x: Self) -> Self;
}

/// A kernel's two entries: `$wide` compiled for AVX-512F and `$avx2` for
/// AVX2 + FMA, each `unsafe` and calling `$body::<lanes, consts...>(args)`
/// (the body `#[inline(always)]`, generic over [`F32x16`] first, then the
/// const parameters named in `[...]`). Each entry's safety is its body's,
/// with its instruction set present.
macro_rules! isa_entries {
    ($wide:ident, $avx2:ident = $body:ident [$($c:ident: $ct:ty),*] ($($arg:ident: $ty:ty),* $(,)?)) => {
        #[allow(clippy::too_many_arguments)]
        #[target_feature(enable = "avx512f")]
        unsafe fn $wide<$(const $c: $ct),*>($($arg: $ty),*) {
            $body::<$crate::kernels::simd::Avx512, $($c),*>($($arg),*)
        }
        #[allow(clippy::too_many_arguments)]
        #[target_feature(enable = "avx2,fma")]
        unsafe fn $avx2<$(const $c: $ct),*>($($arg: $ty),*) {
            $body::<$crate::kernels::simd::Avx2, $($c),*>($($arg),*)
        }
    };
}
pub(crate) use isa_entries;

/// A mask of the first `n` lanes (16 or more: all).
#[inline(always)]
pub(crate) fn first(n: usize) -> u16 {
    if n >= 16 {
        0xffff
    } else {
        ((1u32 << n) - 1) as u16
    }
}

/// One AVX-512 register.
#[cfg(target_arch = "x86_64")]
#[derive(Clone, Copy)]
pub(crate) struct Avx512(pub __m512);

#[cfg(target_arch = "x86_64")]
impl F32x16 for Avx512 {
    #[inline(always)]
    unsafe fn zero() -> Self {
        Avx512(_mm512_setzero_ps())
    }
    #[inline(always)]
    unsafe fn splat(x: f32) -> Self {
        Avx512(_mm512_set1_ps(x))
    }
    #[inline(always)]
    unsafe fn load(p: *const f32) -> Self {
        Avx512(_mm512_loadu_ps(p))
    }
    #[inline(always)]
    unsafe fn load_mask(m: u16, p: *const f32) -> Self {
        Avx512(_mm512_maskz_loadu_ps(m, p))
    }
    #[inline(always)]
    unsafe fn store(self, p: *mut f32) {
        _mm512_storeu_ps(p, self.0)
    }
    #[inline(always)]
    unsafe fn store_mask(self, m: u16, p: *mut f32) {
        _mm512_mask_storeu_ps(p, m, self.0)
    }
    #[inline(always)]
    unsafe fn add(self, o: Self) -> Self {
        Avx512(_mm512_add_ps(self.0, o.0))
    }
    #[inline(always)]
    unsafe fn sub(self, o: Self) -> Self {
        Avx512(_mm512_sub_ps(self.0, o.0))
    }
    #[inline(always)]
    unsafe fn mul(self, o: Self) -> Self {
        Avx512(_mm512_mul_ps(self.0, o.0))
    }
    #[inline(always)]
    unsafe fn div(self, o: Self) -> Self {
        Avx512(_mm512_div_ps(self.0, o.0))
    }
    #[inline(always)]
    unsafe fn fma(self, b: Self, c: Self) -> Self {
        Avx512(_mm512_fmadd_ps(self.0, b.0, c.0))
    }
    #[inline(always)]
    unsafe fn max(self, o: Self) -> Self {
        Avx512(_mm512_max_ps(self.0, o.0))
    }
    #[inline(always)]
    unsafe fn clamp(self, lo: Self, hi: Self) -> Self {
        let v = _mm512_mask_blend_ps(_mm512_cmp_ps_mask::<_CMP_LT_OQ>(self.0, lo.0), self.0, lo.0);
        Avx512(_mm512_mask_blend_ps(
            _mm512_cmp_ps_mask::<_CMP_GT_OQ>(v, hi.0),
            v,
            hi.0,
        ))
    }
    #[inline(always)]
    unsafe fn above_or_nan(self, x: Self) -> Self {
        let m = _mm512_cmp_ps_mask::<_CMP_GT_OQ>(x.0, self.0)
            | _mm512_cmp_ps_mask::<_CMP_UNORD_Q>(x.0, x.0);
        Avx512(_mm512_mask_mov_ps(self.0, m, x.0))
    }
}

/// Two AVX2 registers, lanes 0-7 and 8-15.
#[cfg(target_arch = "x86_64")]
#[derive(Clone, Copy)]
pub(crate) struct Avx2(pub [__m256; 2]);

/// The integer mask `vmaskmovps` takes for the lanes of a byte.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn lanes8(m: u8) -> __m256i {
    let bits = _mm256_setr_epi32(1, 2, 4, 8, 16, 32, 64, 128);
    _mm256_cmpeq_epi32(_mm256_and_si256(_mm256_set1_epi32(m as i32), bits), bits)
}

// The halves' helpers are functions marked `#[inline(always)]`, not
// closures: a closure is a function of its own, which the compiler may
// leave out of line, and there (without the kernel's instruction set)
// every intrinsic in it is a call. `std::array::from_fn` over a closure
// does the same in a kernel: fill arrays of lanes with loops. MobileNetV3
// at batch 8 spent 6% of its samples in such calls from the direct
// product's loads.

/// The lanes of byte `m` from `p` (see [`F32x16::load_mask`]).
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn load_half(m: u8, p: *const f32) -> __m256 {
    match m {
        0xff => _mm256_loadu_ps(p),
        0 => _mm256_setzero_ps(),
        _ => _mm256_maskload_ps(p, lanes8(m)),
    }
}

/// The lanes of byte `m` of `v` to `p` (see [`F32x16::store_mask`]).
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn store_half(m: u8, p: *mut f32, v: __m256) {
    match m {
        0xff => _mm256_storeu_ps(p, v),
        0 => {}
        _ => _mm256_maskstore_ps(p, lanes8(m), v),
    }
}

/// [`F32x16::clamp`] of eight lanes.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn clamp8(v: __m256, lo: __m256, hi: __m256) -> __m256 {
    let v = _mm256_blendv_ps(v, lo, _mm256_cmp_ps::<_CMP_LT_OQ>(v, lo));
    _mm256_blendv_ps(v, hi, _mm256_cmp_ps::<_CMP_GT_OQ>(v, hi))
}

/// [`F32x16::above_or_nan`] of eight lanes.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn above_or_nan8(a: __m256, x: __m256) -> __m256 {
    let m = _mm256_or_ps(
        _mm256_cmp_ps::<_CMP_GT_OQ>(x, a),
        _mm256_cmp_ps::<_CMP_UNORD_Q>(x, x),
    );
    _mm256_blendv_ps(a, x, m)
}

#[cfg(target_arch = "x86_64")]
macro_rules! both {
    ($a:expr, $b:expr, $f:ident) => {
        Avx2([$f($a.0[0], $b.0[0]), $f($a.0[1], $b.0[1])])
    };
}

#[cfg(target_arch = "x86_64")]
impl F32x16 for Avx2 {
    #[inline(always)]
    unsafe fn zero() -> Self {
        Avx2([_mm256_setzero_ps(); 2])
    }
    #[inline(always)]
    unsafe fn splat(x: f32) -> Self {
        Avx2([_mm256_set1_ps(x); 2])
    }
    #[inline(always)]
    unsafe fn load(p: *const f32) -> Self {
        Avx2([_mm256_loadu_ps(p), _mm256_loadu_ps(p.wrapping_add(8))])
    }
    #[inline(always)]
    unsafe fn load_mask(m: u16, p: *const f32) -> Self {
        Avx2([
            load_half(m as u8, p),
            load_half((m >> 8) as u8, p.wrapping_add(8)),
        ])
    }
    #[inline(always)]
    unsafe fn store(self, p: *mut f32) {
        _mm256_storeu_ps(p, self.0[0]);
        _mm256_storeu_ps(p.wrapping_add(8), self.0[1]);
    }
    #[inline(always)]
    unsafe fn store_mask(self, m: u16, p: *mut f32) {
        store_half(m as u8, p, self.0[0]);
        store_half((m >> 8) as u8, p.wrapping_add(8), self.0[1]);
    }
    #[inline(always)]
    unsafe fn add(self, o: Self) -> Self {
        both!(self, o, _mm256_add_ps)
    }
    #[inline(always)]
    unsafe fn sub(self, o: Self) -> Self {
        both!(self, o, _mm256_sub_ps)
    }
    #[inline(always)]
    unsafe fn mul(self, o: Self) -> Self {
        both!(self, o, _mm256_mul_ps)
    }
    #[inline(always)]
    unsafe fn div(self, o: Self) -> Self {
        both!(self, o, _mm256_div_ps)
    }
    #[inline(always)]
    unsafe fn fma(self, b: Self, c: Self) -> Self {
        Avx2([
            _mm256_fmadd_ps(self.0[0], b.0[0], c.0[0]),
            _mm256_fmadd_ps(self.0[1], b.0[1], c.0[1]),
        ])
    }
    #[inline(always)]
    unsafe fn max(self, o: Self) -> Self {
        both!(self, o, _mm256_max_ps)
    }
    #[inline(always)]
    unsafe fn clamp(self, lo: Self, hi: Self) -> Self {
        Avx2([
            clamp8(self.0[0], lo.0[0], hi.0[0]),
            clamp8(self.0[1], lo.0[1], hi.0[1]),
        ])
    }
    #[inline(always)]
    unsafe fn above_or_nan(self, x: Self) -> Self {
        Avx2([
            above_or_nan8(self.0[0], x.0[0]),
            above_or_nan8(self.0[1], x.0[1]),
        ])
    }
}

#[cfg(all(test, target_arch = "x86_64"))]
mod tests {
    use super::*;

    /// Every method of the AVX2 pair against the scalar arithmetic it
    /// stands for, masks included (the AVX-512 one where the CPU has it).
    #[test]
    fn lanes_match_scalar_arithmetic() {
        if crate::kernels::isa() == crate::kernels::Isa::Base {
            eprintln!("no AVX2 + FMA here: nothing to check");
            return;
        }
        let a: Vec<f32> = (0..16).map(|i| i as f32 * 0.37 - 2.5).collect();
        let b: Vec<f32> = (0..16).map(|i| 1.5 - i as f32 * 0.21).collect();
        // SAFETY: the CPU has AVX2 + FMA (checked above); 16 lanes each.
        unsafe { check::<Avx2>(&a, &b) };
        if crate::kernels::isa() == crate::kernels::Isa::Avx512 {
            // SAFETY: AVX-512F is present.
            unsafe { check::<Avx512>(&a, &b) };
        }
    }

    unsafe fn check<S: F32x16>(a: &[f32], b: &[f32]) {
        let (va, vb) = (S::load(a.as_ptr()), S::load(b.as_ptr()));
        let out = |v: S| {
            let mut o = [0f32; 16];
            v.store(o.as_mut_ptr());
            o
        };
        let each =
            |f: &dyn Fn(f32, f32) -> f32| -> [f32; 16] { std::array::from_fn(|i| f(a[i], b[i])) };
        assert_eq!(out(va.add(vb)), each(&|x, y| x + y));
        assert_eq!(out(va.sub(vb)), each(&|x, y| x - y));
        assert_eq!(out(va.mul(vb)), each(&|x, y| x * y));
        assert_eq!(out(va.div(vb)), each(&|x, y| x / y));
        assert_eq!(out(va.fma(vb, va)), each(&|x, y| x.mul_add(y, x)));
        assert_eq!(out(va.max(vb)), each(&|x, y| if x > y { x } else { y }));
        assert_eq!(
            out(va.clamp(S::splat(-1.0), S::splat(1.0))),
            each(&|x, _| x.clamp(-1.0, 1.0))
        );
        let mut nan = a.to_vec();
        nan[3] = f32::NAN;
        let got = out(vb.above_or_nan(S::load(nan.as_ptr())));
        for i in 0..16 {
            let want = if nan[i] > b[i] || nan[i].is_nan() {
                nan[i]
            } else {
                b[i]
            };
            assert_eq!(got[i].to_bits(), want.to_bits(), "above_or_nan lane {i}");
        }
        assert_eq!(out(S::splat(2.0)), [2.0; 16]);
        assert_eq!(out(S::zero()), [0.0; 16]);
        for m in [0u16, 1, 0x00ff, 0xff00, 0x8001, 0x1234, 0xffff] {
            let picked: [f32; 16] =
                std::array::from_fn(|i| if m >> i & 1 == 1 { a[i] } else { 0.0 });
            assert_eq!(out(S::load_mask(m, a.as_ptr())), picked, "load mask {m:#x}");
            let mut o = [9f32; 16];
            vb.store_mask(m, o.as_mut_ptr());
            let kept: [f32; 16] = std::array::from_fn(|i| if m >> i & 1 == 1 { b[i] } else { 9.0 });
            assert_eq!(o, kept, "store mask {m:#x}");
        }
        assert_eq!(first(3), 0b111);
        assert_eq!(first(20), 0xffff);
    }
}
