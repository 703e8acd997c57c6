//! pt2kit: the library behind the `pt2ir` / `ir-*` tools.
//!
//! - [`ir`]: the one graph IR every tool shares
//! - [`import`]: `.pt2` archives into the IR (zip, JSON, safe pickle reading)
//! - [`wire`]: the binary IR stream between tools (protobuf records)
//! - [`text`]: listings and YAML for people and golden files
//! - [`schema`]: what is known about operators, as data (schemas, families)
//! - [`exec`]: the executor (`ir-run`), behind the `exec` feature
//! - `kernels`: the executor's CPU kernels (products, convolutions' inner
//!   loops, vector math, SIMD, the thread pool), free of candle and the IR
//! - [`export`]: the ONNX writer (`ir2onnx`)
//! - [`promote`]: torch's type promotion, for every tool
//! - [`decompose`]: lowering to core ATen and cleanup passes (`ir-decompose`)
//! - [`contract`]: inputs checked against the exported shape contract
//! - [`tensorfile`]: npy / npz / safetensors
//! - [`cli`]: conventions every binary shares (inputs, outputs, exit codes)

/// Declares an op table's family modules, the sixteen of
/// `lib/data/op_families.txt` in that order, and `FAMILIES`: each family's
/// name with its module's `ROWS`. Every op table (executor, decompositions,
/// ONNX emitters) is split the same way.
macro_rules! op_families {
    ($rows:ty) => {
        op_families!(@ $rows; pointwise activation reduce shape index create alias linalg conv
            pool resample norm rnn attention sym control vision);
    };
    (@ $rows:ty; $($family:ident)*) => {
        $(mod $family;)*
        /// Every family's rows, in family order.
        const FAMILIES: &[(&str, $rows)] = &[$((stringify!($family), $family::ROWS)),*];
    };
}

pub mod blob;
pub mod cli;
pub mod contract;
pub mod decompose;
pub mod diff;
pub mod error;
#[cfg(feature = "exec")]
pub mod exec;
pub mod export;
pub mod fuzzing;
pub mod import;
pub mod infer;
pub mod ir;
#[cfg(feature = "exec")]
pub mod kernels;
pub mod knobs;
pub mod output;
pub mod progress;
pub mod promote;
pub mod schema;
pub mod tensorfile;
pub mod text;
pub mod wire;
pub mod zip;

pub use error::{Error, ErrorKind, Result};
