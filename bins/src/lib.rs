//! The command-line tools: each module holds one tool's clap definition
//! (`Args`) and its `run`, a few lines over `pt2kit`. The files in
//! `src/bin/` only call `main()`. Man pages are generated from these
//! definitions (see `man` and `tests/man.rs`).

/// The allocator every tool uses (see bins/Cargo.toml).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

pub mod ir2onnx;
pub mod ir_diff;
#[cfg(feature = "exec")]
pub mod ir_run;
pub mod man;
pub mod pt2ir;
