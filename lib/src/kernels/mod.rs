//! The CPU kernels: float32 products over packed operands (`sgemm`),
//! vector math (`vmath`), sixteen float32 lanes written once for every
//! instruction set (`simd`), and the thread pool they split their work
//! over (`threads`).
//!
//! Free of candle and of the IR: a kernel takes plain slices or
//! pointers, shapes and parameter structs. The instruction sets are
//! detected here and nowhere else.

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
