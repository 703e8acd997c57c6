//! The instruction sets the kernels are compiled for, and the one this
//! CPU runs (read once, into [`super::cpu`]'s table).

/// The instruction sets the kernels are compiled for.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Isa {
    Avx512,
    Avx2,
    Base,
}

/// The widest instruction set this CPU runs, short of what the knobs
/// turn off.
pub(super) fn detect() -> Isa {
    #[cfg(target_arch = "x86_64")]
    {
        let off = crate::knobs::is_set;
        if !off("PT2KIT_NO_AVX512")
            && !off("PT2KIT_NO_AVX2")
            && std::arch::is_x86_feature_detected!("avx512f")
        {
            return Isa::Avx512;
        }
        if !off("PT2KIT_NO_AVX2")
            && std::arch::is_x86_feature_detected!("avx2")
            && std::arch::is_x86_feature_detected!("fma")
        {
            return Isa::Avx2;
        }
    }
    Isa::Base
}

/// Asks the memory system for the cache line of `p` into L2, ahead of a
/// read (a hint: it reads nothing and cannot fault).
#[inline(always)]
pub fn prefetch_l2(p: *const f32) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch reads nothing
    unsafe {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T1};
        _mm_prefetch::<_MM_HINT_T1>(p.cast());
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}
