//! The CPU kernels: float32 products over packed operands (`sgemm`),
//! the convolutions' inner loops (`conv`), sliding windows (`window`),
//! pooling and reduction loops (`pool`, `reduce`), vector math (`vmath`),
//! sixteen float32 lanes written once for every instruction set
//! (`simd`), bfloat16 and int8 products (`lowp`, `int8`), and the thread
//! pool they split their work over (`threads`).
//!
//! Free of candle, of the IR and of the executor: a kernel takes plain
//! slices or pointers, shapes and parameter structs. The CPU is detected
//! here once, into the table [`cpu`] returns; intrinsics and ISA tests
//! are written nowhere else (`lib/tests/layout.rs` holds it).

pub mod attention;
pub mod conv;
mod cpu;
pub mod int8;
pub mod lowp;
pub mod pool;
pub mod reduce;
pub mod sgemm;
pub mod simd;
pub mod threads;
pub mod vmath;
pub mod window;

pub use cpu::{prefetch_l2, Isa};

use std::collections::HashMap;

/// A map looked up on every run (by kernels, of what they prepared once):
/// its keys are words the executor and the kernels make (addresses, sizes), no input's,
/// so a multiply-rotate a word ([`WordHasher`]) rather than SipHash.
pub type FastMap<K, V> = HashMap<K, V, std::hash::BuildHasherDefault<WordHasher>>;

/// [`FastMap`]'s hasher (FxHash's step).
#[derive(Default, Clone, Copy)]
pub struct WordHasher(u64);

impl WordHasher {
    fn add(&mut self, word: u64) {
        self.0 = (self.0.rotate_left(5) ^ word).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
}

impl std::hash::Hasher for WordHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for chunk in bytes.chunks(8) {
            let mut word = [0u8; 8];
            word[..chunk.len()].copy_from_slice(chunk);
            self.add(u64::from_le_bytes(word));
        }
    }

    fn write_u64(&mut self, n: u64) {
        self.add(n);
    }

    fn write_usize(&mut self, n: usize) {
        self.add(n as u64);
    }
}

// The CPU detected once into the table of kernels it runs, as MLAS's
// platform fills its kernel pointers: what the executor's plans may ask
// of the kernels (`vector`, `wide`) and the entry points chosen for this
// instruction set, which callers use by name and never test an ISA bit
// themselves. (Here, in the layer's root, so that the kernels it points
// at may ask it too.)

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
    /// `line[i] = row[2 * i]` for every `i` of `line`.
    pub every_other: fn(&[f32], &mut [std::mem::MaybeUninit<f32>]),
}

/// The kernels of this CPU, detected on the first call.
pub fn cpu() -> &'static Kernels {
    static CPU: std::sync::OnceLock<Kernels> = std::sync::OnceLock::new();
    CPU.get_or_init(|| {
        let isa = cpu::detect();
        let wide = isa == Isa::Avx512;
        Kernels {
            isa,
            vector: isa != Isa::Base,
            wide,
            every_other: if wide {
                conv::every_other_wide
            } else {
                conv::every_other
            },
        }
    })
}

/// The widest instruction set the kernels run ([`cpu`]).
#[inline]
pub(crate) fn isa() -> Isa {
    cpu().isa
}

/// For the speed tests (run with `--ignored`): the number in environment
/// variable `name`, else `default`.
#[cfg(test)]
pub(crate) fn env_number(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// For the speed tests: a pool of `THREADS` threads (else `default`), and
/// that count.
#[cfg(test)]
pub(crate) fn bench_pool(default: usize) -> (usize, rayon::ThreadPool) {
    let threads = env_number("THREADS", default);
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .expect("a thread pool");
    (threads, pool)
}
