//! The CPU, detected once into the table of kernels it runs ([`cpu`]), as
//! MLAS's platform fills its kernel pointers: what the executor's plans
//! may ask of the kernels (`vector`, `wide`) and the entry points chosen
//! for this instruction set, which callers use by name and never test an
//! ISA bit themselves.

/// The instruction sets the kernels are compiled for.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Isa {
    Avx512,
    Avx2,
    Base,
}

/// The kernels of this CPU ([`cpu`]).
pub struct Kernels {
    /// The widest instruction set the kernels run (`PT2KIT_NO_AVX512=1`
    /// stops at AVX2, `PT2KIT_NO_AVX2=1` at the baseline).
    pub(super) isa: Isa,
    /// This crate's vector kernels run (AVX-512F, or AVX2 with FMA): the
    /// packed products, the convolutions' own kernels, the fused
    /// epilogues. Without them the `gemm` crate's products and candle's
    /// loops run instead.
    pub vector: bool,
    /// The vector kernels have sixteen-lane registers, 32 of them, and
    /// per-lane masks (AVX-512F): the masked and stride-2 depthwise
    /// kernels exist, and the direct product keeps enough accumulators to
    /// beat the packed one where the plans weigh the two.
    pub wide: bool,
    /// A float32 row's sum in one pass of sixteen lanes; `None`: candle's
    /// sum (whose bits the baseline and AVX2 keep).
    pub row_sum: Option<fn(&[f32]) -> f32>,
    /// `line[i] = row[2 * i]` for every `i` of `line`.
    pub every_other: fn(&[f32], &mut [std::mem::MaybeUninit<f32>]),
}

/// The kernels of this CPU, detected on the first call.
pub fn cpu() -> &'static Kernels {
    static CPU: std::sync::OnceLock<Kernels> = std::sync::OnceLock::new();
    CPU.get_or_init(|| {
        let isa = detect();
        let wide = isa == Isa::Avx512;
        Kernels {
            isa,
            vector: isa != Isa::Base,
            wide,
            row_sum: wide.then_some(super::reduce::row_sum_wide as fn(&[f32]) -> f32),
            every_other: if wide {
                super::conv::every_other_wide
            } else {
                super::conv::every_other
            },
        }
    })
}

/// The widest instruction set this CPU runs, short of what the knobs
/// turn off.
fn detect() -> Isa {
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
