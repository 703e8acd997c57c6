//! The CPU kernels: float32 products over packed operands (`sgemm`),
//! the convolutions' inner loops (`conv`), sliding windows (`window`),
//! pooling and reduction loops (`pool`, `reduce`), vector math (`vmath`),
//! sixteen float32 lanes written once for every instruction set
//! (`simd`), and the thread pool they split their work over (`threads`).
//!
//! Free of candle, of the IR and of the executor: a kernel takes plain
//! slices or pointers, shapes and parameter structs. The CPU is detected
//! here once, into the table [`cpu`] returns; intrinsics and ISA tests
//! are written nowhere else (`lib/tests/layout.rs` holds it).

pub mod conv;
mod cpu;
pub mod pool;
pub mod reduce;
pub mod sgemm;
pub mod simd;
pub mod threads;
pub mod vmath;
pub mod window;

pub use cpu::{cpu, prefetch_l2, Isa, Kernels};

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
