//! The command-line tools: each module holds one tool's clap definition
//! (`Args`) and its `run`, a few lines over `pt2kit`. The files in
//! `src/bin/` only call `main()`. Man pages are generated from these
//! definitions (see `man` and `tests/man.rs`).

/// The allocator every tool uses (see bins/Cargo.toml).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Allocator settings, set first thing in every tool's `main`: keep freed
/// memory instead of returning it to the OS at once (an executor frees and
/// reallocates tensors of the same sizes for every op, and fresh pages must
/// be zeroed by the kernel), and no large OS pages (nor transparent huge
/// pages: the `no_thp` build feature, bins/Cargo.toml).
pub fn init() {
    // mimalloc's `mi_option_purge_delay` (15 in the bundled mimalloc; the
    // -sys crate does not name it): -1 means never purge.
    const MI_OPTION_PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;
    // SAFETY: plain option setters with valid option ids, called before the
    // tool starts any thread.
    unsafe {
        libmimalloc_sys::mi_option_set(MI_OPTION_PURGE_DELAY, -1);
        libmimalloc_sys::mi_option_set(libmimalloc_sys::mi_option_large_os_pages, 0);
    }
    // candle's process-wide settings (its thread count), before any thread.
    #[cfg(feature = "exec")]
    // SAFETY: called first thing in main, before any thread starts.
    unsafe {
        pt2kit::exec::backend::configure_before_threads()
    };
}

pub mod ir2onnx;
#[cfg(feature = "exec")]
pub mod ir_bench;
pub mod ir_decompose;
pub mod ir_diff;
#[cfg(feature = "exec")]
pub mod ir_run;
pub mod man;
pub mod pt2ir;
#[cfg(feature = "exec")]
pub mod run_inputs;
pub mod ts2ir;
