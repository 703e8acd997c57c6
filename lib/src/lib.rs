//! pt2kit: the library behind the `pt2ir` / `ir-*` tools.
//!
//! - [`ir`]: the one graph IR every tool shares
//! - [`import`]: `.pt2` archives into the IR (zip, JSON, safe pickle reading)
//! - [`wire`]: the binary IR stream between tools (protobuf records)
//! - [`text`]: listings and YAML for people and golden files
//! - [`ops`]: what is known about operators, as data (schemas)
//! - [`decompose`]: lowering to core ATen and cleanup passes (`ir-decompose`)
//! - [`contract`]: inputs checked against the exported shape contract
//! - [`tensorfile`]: npy / npz / safetensors
//! - [`cli`]: conventions every binary shares (inputs, outputs, exit codes)

pub mod blob;
pub mod cli;
pub mod contract;
pub mod decompose;
pub mod diff;
pub mod error;
#[cfg(feature = "exec")]
pub mod exec;
pub mod export;
pub mod import;
pub mod ir;
pub mod output;
pub mod promote;
pub mod schema;
pub mod tensorfile;
pub mod text;
pub mod wire;
pub mod zip;

pub use error::{Error, ErrorKind, Result};
