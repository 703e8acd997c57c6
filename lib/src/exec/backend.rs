//! The candle boundary: where candle's errors become ours, and where
//! candle's process-wide settings are made. No other file reads a candle
//! error's text or variant.
//!
//! A candle error converts through `From` (so `?` works on candle results);
//! what a caller can act on is decided here once, from candle's error type,
//! into [`Cause`]: a kernel that refuses a strided layout
//! ([`Cause::Layout`]: the executor retries on a contiguous copy) and a
//! device without the kernel ([`Cause::NoDeviceKernel`]: it retries on the
//! host). candle's full report (its backtrace under `RUST_BACKTRACE`) is
//! kept as the error's detail; the tools show it at `-vv`.

use crate::error::{Cause, Error};

impl From<candle_core::Error> for Error {
    fn from(e: candle_core::Error) -> Error {
        let text = e.to_string();
        let first = text.lines().next().unwrap_or("");
        let mut err = Error::internal(format!("candle: {first}"));
        if text.trim_end() != first {
            err = err.with_detail(text.trim_end().to_string());
        }
        match cause(&e) {
            Some(c) => err.with_cause(c),
            None => err,
        }
    }
}

/// What a caller can do about a candle error, from its variant (the
/// wrappers candle adds, a backtrace, a context or a path, looked through).
fn cause(e: &candle_core::Error) -> Option<Cause> {
    use candle_core::Error as E;
    match e {
        E::WithBacktrace { inner, .. } | E::Context { inner, .. } | E::WithPath { inner, .. } => {
            cause(inner)
        }
        E::RequiresContiguous { .. } | E::MatMulUnexpectedStriding(_) => Some(Cause::Layout),
        // candle has no kernel for this dtype (its CUDA kernels have no i32
        // or i16 arithmetic), or its CUDA backend failed: a missing kernel
        // (`named symbol not found`), a custom op without a CUDA body (`no
        // cuda implementation`), a launch of no blocks (a `full` of zero
        // elements: `CUDA_ERROR_INVALID_VALUE`). The host runs the node.
        E::UnsupportedDTypeForOp(..) | E::Cuda(_) => Some(Cause::NoDeviceKernel),
        _ => None,
    }
}

/// candle's process-wide settings, made before any thread starts.
///
/// candle's own element-wise ops run on the calling thread: its barrier
/// pool's worker spins after every op (25,000 rounds) and took a core from
/// the executor's kernels, which split their work over rayon's pool
/// (measured: MobileNetV3 4.8 -> 3.9 ms, BERT-base 118 -> 92 ms with 2
/// threads). A `CANDLE_NUM_THREADS` the user set is kept.
///
/// # Safety
/// Sets an environment variable: call it before any other thread of the
/// process exists (first thing in `main`).
pub unsafe fn configure_before_threads() {
    if std::env::var_os("CANDLE_NUM_THREADS").is_none() {
        // SAFETY: the caller guarantees no other thread runs yet.
        unsafe { std::env::set_var("CANDLE_NUM_THREADS", "1") };
    }
}
